// libwhymiss-rt.so in a real instrumented process: what the profile says about heap objects.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "model/profile.h"

namespace {

std::string run(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[512];
  while (fgets(buf, sizeof buf, p)) out += buf;
  pclose(p);
  return out;
}

uint64_t non_compulsory(const whymiss::profile::ObjectRecord& o) {
  uint64_t n = 0;
  for (int k = 2; k < whymiss::profile::kKinds; ++k) n += o.misses[k];  // past hit, compulsory
  return n;
}

// Object B reuses freed object A's memory. The runtime caches object lookups while the program
// has one thread; a cache entry that outlived free(A) would charge B's misses to A.
TEST(ExactRuntime, AFreedObjectsMissesStayItsOwnWhenItsMemoryIsReused) {
  char dir[] = "/tmp/whymiss-exact-rt-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string prof = std::string(dir) + "/p.data";
  const std::string out = run(std::string(WHYMISS_BIN) + " record --mode exact -o " + prof +
                              " -- " + WHYMISS_OBJECT_REUSE + " 2>/dev/null");
  unsigned long a = 0, b = 0, sum = 0;
  ASSERT_EQ(std::sscanf(out.c_str(), "%lx %lx %lu", &a, &b, &sum), 3) << out;
  ASSERT_EQ(a, b) << "glibc did not reuse the chunk: the test has no teeth here";
  auto p = whymiss::profile::read_profile(prof);
  ASSERT_TRUE(p) << p.error();
  const whymiss::profile::ObjectRecord *ra = nullptr, *rb = nullptr;
  for (const auto& o : p->objects) {
    if (o.start != a || o.size != 64 * 1024) continue;
    if (o.freed && !ra) ra = &o;
    else if (!o.freed || ra) rb = &o;
  }
  ASSERT_NE(ra, nullptr) << "no record of the freed object";
  ASSERT_NE(rb, nullptr) << "no record of the object that reused its memory";
  ASSERT_NE(ra->serial, rb->serial);
  if (ra->serial > rb->serial) std::swap(ra, rb);  // A was allocated first
  // 1024 lines, 4 passes, none fitting in L1 by the end of a pass: A's first pass is compulsory,
  // B's is not (the lines were A's); every later pass misses again.
  EXPECT_GE(non_compulsory(*ra), 3u * 1024 * 9 / 10);
  EXPECT_LE(non_compulsory(*ra), 3u * 1024 + 64);
  EXPECT_GE(non_compulsory(*rb), 4u * 1024 * 9 / 10);
  EXPECT_LE(non_compulsory(*rb), 4u * 1024 + 64);
  std::system((std::string("rm -rf ") + dir).c_str());
}

}  // namespace
