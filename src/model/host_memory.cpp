#include "model/host_memory.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstring>

namespace whymiss {
namespace {

// The first bytes of a /proc file into buf (NUL-terminated); false when unreadable.
bool read_small(const char* path, char* buf, size_t n) {
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  size_t have = 0;
  while (have + 1 < n) {
    const ssize_t r = ::read(fd, buf + have, n - 1 - have);
    if (r <= 0) break;
    have += size_t(r);
  }
  ::close(fd);
  buf[have] = '\0';
  return have > 0;
}

// The decimal number at p (after any spaces); 0 when none.
uint64_t number_at(const char* p) {
  while (*p == ' ' || *p == '\t') ++p;
  uint64_t v = 0;
  while (*p >= '0' && *p <= '9') v = v * 10 + uint64_t(*p++ - '0');
  return v;
}

}  // namespace

uint64_t host_memory_available() {
  const int saved = errno;
  uint64_t best = 0;  // 0: nothing known yet
  auto consider = [&](uint64_t v) {
    if (v == 0) v = 1;  // known to be none left: still "known"
    if (best == 0 || v < best) best = v;
  };
  char buf[4096];
  if (read_small("/proc/meminfo", buf, sizeof buf)) {
    if (const char* p = std::strstr(buf, "MemAvailable:")) consider(number_at(p + 13) * 1024);
  }
  rlimit as{};
  if (::getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) {
    uint64_t used = 0;
    if (read_small("/proc/self/statm", buf, sizeof buf))
      used = number_at(buf) * uint64_t(::sysconf(_SC_PAGESIZE));
    consider(uint64_t(as.rlim_cur) > used ? uint64_t(as.rlim_cur) - used : 0);
  }
  errno = saved;
  return best;
}

}  // namespace whymiss
