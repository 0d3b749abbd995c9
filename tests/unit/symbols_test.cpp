// Symbolizer tests. The test executable is its own fixture: symbols_fixture.h puts known
// functions, an inline chain and globals into it, and the tests resolve their run-time
// addresses against the executable file on disk (built -O2 -g in the default build).
#include <gtest/gtest.h>
#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "symbols/symbolizer.h"
#include "symbols_fixture.h"

namespace whymiss::symbols {
namespace {

constexpr char kFixtureFile[] = "symbols_fixture.h";

std::string_view basename_of(std::string_view path) {
  size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

// Line number of the "@mark:NAME" comment in the fixture source; 0 if missing.
uint32_t mark_line(const std::string& name) {
  std::ifstream in(std::string(WHYMISS_SOURCE_DIR) + "/tests/unit/" + kFixtureFile);
  std::string text;
  const std::string tag = "@mark:" + name;
  for (uint32_t n = 1; std::getline(in, text); ++n) {
    size_t at = text.find(tag);
    if (at != std::string::npos && at + tag.size() == text.size()) return n;
  }
  return 0;
}

std::string self_path() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

// Every loaded module with a file, as the runtime records them (main program first).
std::vector<ModuleSpec> loaded_modules() {
  std::vector<ModuleSpec> out;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* mods = static_cast<std::vector<ModuleSpec>*>(data);
        ModuleSpec m;
        m.path = mods->empty() ? self_path() : info->dlpi_name;
        if (m.path.empty() || m.path[0] != '/') return 0;  // vdso and friends
        m.load_bias = info->dlpi_addr;
        m.start = UINT64_MAX;
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          if (ph.p_type != PT_LOAD) continue;
          m.start = std::min<uint64_t>(m.start, info->dlpi_addr + ph.p_vaddr);
          m.end = std::max<uint64_t>(m.end, info->dlpi_addr + ph.p_vaddr + ph.p_memsz);
        }
        mods->push_back(m);
        return 0;
      },
      &out);
  return out;
}

ModuleSpec self_module() {
  return loaded_modules().at(0);
}

std::unique_ptr<Symbolizer> symbolizer_for(const ModuleSpec& m) {
  auto s = Symbolizer::create();
  Status st = s->add_module(m);
  EXPECT_TRUE(st.ok()) << st.error();
  return s;
}

void expect_frame(const SourceFrame& f, std::string_view function_prefix, const char* mark) {
  EXPECT_EQ(f.function.substr(0, function_prefix.size()), function_prefix) << f.function;
  EXPECT_EQ(basename_of(f.file), kFixtureFile) << f.file;
  EXPECT_EQ(f.line, mark_line(mark)) << f.function;
}

TEST(Symbolizer, FixtureMarksExist) {
  for (const char* m : {"known", "compute", "poke", "leaf", "middle", "caller"}) {
    EXPECT_GT(mark_line(m), 0u) << m;
  }
}

TEST(Symbolizer, KnownFunctionNameFileAndLine) {
  auto s = symbolizer_for(self_module());
  // capture() hands back a return address: resolve the call instruction, as callers must.
  const auto& frames = s->resolve(whymiss_fixture_known() - 1);
  ASSERT_EQ(frames.size(), 1u);
  expect_frame(frames[0], "whymiss_fixture_known", "known");
  EXPECT_EQ(frames[0].function, "whymiss_fixture_known");
}

TEST(Symbolizer, FunctionEntryResolvesToItsName) {
  auto s = symbolizer_for(self_module());
  auto entry = reinterpret_cast<uintptr_t>(&whymiss_fixture_known);
  EXPECT_EQ(s->resolve(entry).back().function, "whymiss_fixture_known");
  EXPECT_EQ(s->module_of(entry), self_module().path);
}

TEST(Symbolizer, InlineChainInnermostFirstWithCallSites) {
  auto s = symbolizer_for(self_module());
  const auto& frames = s->resolve(whymiss_fixture_caller(1) - 1);
  ASSERT_EQ(frames.size(), 3u);
  expect_frame(frames[0], "fixture_inlined_leaf", "leaf");
  expect_frame(frames[1], "fixture_inlined_middle", "middle");
  expect_frame(frames[2], "whymiss_fixture_caller", "caller");
}

TEST(Symbolizer, CxxNamesAreDemangled) {
  auto s = symbolizer_for(self_module());
  const auto& frames = s->resolve(whymiss_fixture::compute(3) - 1);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].function, "whymiss_fixture::compute(int)");
  expect_frame(frames[0], "whymiss_fixture::compute", "compute");
}

TEST(Symbolizer, NamesWithoutLinkageNameAreQualified) {
  auto s = symbolizer_for(self_module());
  Probe probe;
  const auto& frames = s->resolve(probe.poke() - 1);
  ASSERT_EQ(frames.size(), 1u);
  expect_frame(frames[0], "(anonymous namespace)::Probe::poke", "poke");
}

TEST(Symbolizer, ResultsAreCachedPerIp) {
  auto s = symbolizer_for(self_module());
  uint64_t ip = whymiss_fixture_known() - 1;
  const auto* first = &s->resolve(ip);
  EXPECT_EQ(first, &s->resolve(ip));
}

TEST(Symbolizer, GlobalArrayByInteriorAddress) {
  auto s = symbolizer_for(self_module());
  auto start = reinterpret_cast<uint64_t>(&whymiss_fixture_counters[0]);
  const GlobalVar* g = s->global_at(start + 8);
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->name, "whymiss_fixture_counters");
  EXPECT_EQ(g->start, start);
  EXPECT_EQ(g->size, 32u);
  EXPECT_EQ(g->module, self_module().path);
  // The base type's DW_AT_name: GCC spells it "long int", Clang "long".
  EXPECT_TRUE(g->type == "long int[4]" || g->type == "long[4]") << g->type;
  EXPECT_EQ(s->global_at(start + 31), g);
}

TEST(Symbolizer, StaticStructWithType) {
  auto s = symbolizer_for(self_module());
  auto start = reinterpret_cast<uint64_t>(&fixture_static_counters);
  const GlobalVar* g = s->global_at(reinterpret_cast<uint64_t>(&fixture_static_counters.misses));
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->name, "fixture_static_counters");
  EXPECT_EQ(g->start, start);
  EXPECT_EQ(g->size, sizeof(counters));
  EXPECT_EQ(g->type, "struct counters");
}

TEST(Symbolizer, NoGlobalForStackOrUnknownAddresses) {
  auto s = symbolizer_for(self_module());
  int local = 0;
  EXPECT_EQ(s->global_at(reinterpret_cast<uint64_t>(&local)), nullptr);
  EXPECT_EQ(s->global_at(0), nullptr);
  EXPECT_EQ(s->global_at(UINT64_MAX), nullptr);
}

TEST(Symbolizer, UnknownAddressIsOneUnknownFrame) {
  auto s = symbolizer_for(self_module());
  const auto& frames = s->resolve(0x10);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].function, "??");
  EXPECT_EQ(frames[0].file, "");
  EXPECT_EQ(frames[0].line, 0u);
  EXPECT_EQ(s->module_of(0x10), "");
}

TEST(Symbolizer, MissingModuleIsAWarningNotAFailure) {
  auto s = Symbolizer::create();
  ModuleSpec m{"/nonexistent/whymiss/libnope.so", 0x7f0000000000, 0x7f0000000000, 0x7f0000100000};
  Status st = s->add_module(m);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().find(m.path), std::string::npos) << st.error();
  EXPECT_EQ(st.error().find('\n'), std::string::npos);
  const auto& frames = s->resolve(0x7f0000000100);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].function, "??");
  EXPECT_EQ(s->module_of(0x7f0000000100), m.path);
  EXPECT_EQ(s->global_at(0x7f0000000100), nullptr);
  // The session still works for readable modules added afterwards.
  ASSERT_TRUE(s->add_module(self_module()).ok());
  EXPECT_EQ(s->resolve(whymiss_fixture_known() - 1)[0].function, "whymiss_fixture_known");
}

TEST(Symbolizer, SameAnswersUnderAnyLoadBias) {
  ModuleSpec real = self_module();
  if (real.load_bias == 0) GTEST_SKIP() << "test executable is not PIE";
  uint64_t ip = whymiss_fixture_caller(2) - 1;
  auto counters = reinterpret_cast<uint64_t>(&whymiss_fixture_counters[1]);
  auto reference = symbolizer_for(real);  // owns the strings `expected` views
  const std::vector<SourceFrame> expected = reference->resolve(ip);
  ASSERT_EQ(expected.size(), 3u);
  for (uint64_t bias : {uint64_t{0}, uint64_t{0x100000000}}) {
    ModuleSpec shifted{real.path, bias, real.start - real.load_bias + bias,
                       real.end - real.load_bias + bias};
    auto s = symbolizer_for(shifted);
    uint64_t moved = ip - real.load_bias + bias;
    const auto& frames = s->resolve(moved);
    ASSERT_EQ(frames.size(), expected.size()) << std::hex << bias;
    for (size_t i = 0; i < frames.size(); ++i) {
      EXPECT_EQ(frames[i].function, expected[i].function);
      EXPECT_EQ(frames[i].file, expected[i].file);
      EXPECT_EQ(frames[i].line, expected[i].line);
    }
    const GlobalVar* g = s->global_at(counters - real.load_bias + bias);
    ASSERT_NE(g, nullptr);
    EXPECT_EQ(g->name, "whymiss_fixture_counters");
    EXPECT_EQ(g->start, counters - 8 - real.load_bias + bias);
    EXPECT_EQ(s->module_of(moved), real.path);
  }
}

TEST(Symbolizer, SharedLibrariesResolveFromTheirSymbolTables) {
  auto s = Symbolizer::create();
  for (const ModuleSpec& m : loaded_modules()) {
    Status st = s->add_module(m);
    EXPECT_TRUE(st.ok()) << st.error();
  }
  // libc's qsort, or the interceptor of the same name in a sanitizer runtime.
  auto qsort_addr = reinterpret_cast<uint64_t>(&qsort);
  EXPECT_NE(basename_of(s->module_of(qsort_addr)).find(".so"), std::string::npos)
      << s->module_of(qsort_addr);
  const auto& frames = s->resolve(qsort_addr);
  EXPECT_NE(frames.back().function.find("qsort"), std::string::npos) << frames.back().function;
  // Our own code still resolves with all modules present.
  EXPECT_EQ(s->resolve(whymiss_fixture_known() - 1)[0].function, "whymiss_fixture_known");
  // Data in some module: environ lives in libc or, copy-relocated, in the executable.
  const GlobalVar* env = s->global_at(reinterpret_cast<uint64_t>(&environ));
  ASSERT_NE(env, nullptr);
  EXPECT_NE(env->name.find("environ"), std::string::npos) << env->name;
  EXPECT_EQ(env->name.find('@'), std::string::npos) << env->name;
}

// Clang-built code. Clang emits no .debug_aranges by default, so libdwfl's own CU lookup
// (elfutils < 0.192) finds nothing; in DWARF 5 it also uses DW_FORM_addrx / rnglistx, and
// -ffunction-sections puts DW_AT_ranges on the CU. A two-CU program is compiled at test time
// and run once: it prints its load bias and addresses captured inside known functions.

// "@mark:NAME" labels, as in symbols_fixture.h; lines are looked up in these strings.
constexpr char kClangMain[] = R"(#define _GNU_SOURCE
#include <inttypes.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>

volatile long sink;

__attribute__((noinline)) uintptr_t capture(void) {
  return (uintptr_t)__builtin_return_address(0);
}

__attribute__((noinline)) uintptr_t known(void) {
  uintptr_t ip = capture();  // @mark:known
  sink += 1;
  return ip;
}

static inline __attribute__((always_inline)) uintptr_t leaf(long k) {
  sink += k;
  uintptr_t ip = capture();  // @mark:leaf
  sink -= k;
  return ip;
}

static inline __attribute__((always_inline)) uintptr_t middle(long k) {
  uintptr_t ip = leaf(k + 1);  // @mark:middle
  sink += k;
  return ip;
}

__attribute__((noinline)) uintptr_t outer(long k) {
  uintptr_t ip = middle(k);  // @mark:outer
  sink += 2 * k;
  return ip;
}

uintptr_t other(void);

static int main_program(struct dl_phdr_info* info, size_t size, void* bias) {
  (void)size;
  *(uintptr_t*)bias = info->dlpi_addr;
  return 1;
}

int main(void) {
  uintptr_t bias = 0;
  dl_iterate_phdr(main_program, &bias);
  uintptr_t k = known(), o = outer(sink), x = other();
  printf("%" PRIxPTR " %" PRIxPTR " %" PRIxPTR " %" PRIxPTR " %" PRIxPTR "\n", bias, k, o, x,
         (uintptr_t)&known);
  return 0;
}
)";

constexpr char kClangOther[] = R"(#include <stdint.h>

extern volatile long sink;
uintptr_t capture(void);

__attribute__((noinline)) uintptr_t other(void) {
  uintptr_t ip = capture();  // @mark:other
  sink += 3;
  return ip;
}
)";

uint32_t mark_line_in(std::string_view text, const std::string& name) {
  const std::string tag = "@mark:" + name + "\n";
  size_t at = text.find(tag);
  if (at == std::string_view::npos) return 0;
  return 1 + static_cast<uint32_t>(std::count(text.begin(), text.begin() + at, '\n'));
}

class ClangBuilt : public testing::TestWithParam<const char*> {
 protected:
  struct Run {
    uint64_t bias = 0, known = 0, outer = 0, other = 0, known_entry = 0;
  };

  void SetUp() override {
    if (std::system("command -v clang >/dev/null 2>&1") != 0) GTEST_SKIP() << "no clang on PATH";
    std::string tmpl = testing::TempDir() + "whymiss_clang_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    std::ofstream(dir_ + "/clang_main.c") << kClangMain;
    std::ofstream(dir_ + "/clang_other.c") << kClangOther;
    exe_ = dir_ + "/fixture";
    std::string cmd = "cd '" + dir_ + "' && clang -O2 " + GetParam() +
                      " -std=gnu11 clang_main.c clang_other.c -o fixture > build.log 2>&1";
    if (std::system(cmd.c_str()) != 0) {
      std::ifstream log(dir_ + "/build.log");
      std::stringstream text;
      text << log.rdbuf();
      GTEST_SKIP() << "clang cannot build the fixture here: " << text.str();
    }
    FILE* out = popen(("'" + exe_ + "'").c_str(), "r");
    ASSERT_NE(out, nullptr);
    int n = std::fscanf(out, "%" SCNx64 " %" SCNx64 " %" SCNx64 " %" SCNx64 " %" SCNx64,
                        &run_.bias, &run_.known, &run_.outer, &run_.other, &run_.known_entry);
    ASSERT_EQ(pclose(out), 0);
    ASSERT_EQ(n, 5);
    // As the runtime would record it; the mapped range is taken from the ELF.
    s_ = symbolizer_for(ModuleSpec{exe_, run_.bias, 0, 0});
  }

  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  static void expect_at(const SourceFrame& f, std::string_view function, const char* file,
                        std::string_view text, const char* mark) {
    EXPECT_EQ(f.function, function);
    EXPECT_EQ(basename_of(f.file), file) << f.function;
    EXPECT_EQ(f.line, mark_line_in(text, mark)) << f.function;
  }

  std::string dir_, exe_;
  Run run_;
  std::unique_ptr<Symbolizer> s_;
};

// One test per flag set: building the fixture is most of the cost.
TEST_P(ClangBuilt, FileLineAndInlineChains) {
  {
    SCOPED_TRACE("known function");
    const auto& frames = s_->resolve(run_.known - 1);
    ASSERT_EQ(frames.size(), 1u);
    expect_at(frames[0], "known", "clang_main.c", kClangMain, "known");
  }
  {
    SCOPED_TRACE("function entry");
    const auto& frames = s_->resolve(run_.known_entry);
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_EQ(frames[0].function, "known");
    EXPECT_EQ(basename_of(frames[0].file), "clang_main.c");
    EXPECT_GT(frames[0].line, 0u);
  }
  {
    SCOPED_TRACE("inline chain");
    const auto& frames = s_->resolve(run_.outer - 1);
    ASSERT_EQ(frames.size(), 3u);
    expect_at(frames[0], "leaf", "clang_main.c", kClangMain, "leaf");
    expect_at(frames[1], "middle", "clang_main.c", kClangMain, "middle");
    expect_at(frames[2], "outer", "clang_main.c", kClangMain, "outer");
  }
  {
    SCOPED_TRACE("second compilation unit");
    const auto& frames = s_->resolve(run_.other - 1);
    ASSERT_EQ(frames.size(), 1u);
    expect_at(frames[0], "other", "clang_other.c", kClangOther, "other");
  }
}

// Default -g is DWARF 5 since Clang 14; -ffunction-sections gives the CU DW_AT_ranges
// (DW_FORM_sec_offset into .debug_ranges in DWARF 4, DW_FORM_rnglistx in DWARF 5).
constexpr const char* kClangFlags[] = {"-g", "-gdwarf-4", "-gdwarf-4 -ffunction-sections",
                                       "-gdwarf-5 -ffunction-sections"};
constexpr const char* kClangFlagNames[] = {"DefaultG", "Dwarf4", "Dwarf4CuRanges",
                                           "Dwarf5CuRanges"};

std::string clang_flags_name(const testing::TestParamInfo<const char*>& param) {
  return kClangFlagNames[param.index];
}

INSTANTIATE_TEST_SUITE_P(Flags, ClangBuilt, testing::ValuesIn(kClangFlags), clang_flags_name);

TEST(Demangle, CxxNamesOnly) {
  EXPECT_EQ(demangle("_ZN3foo3barEv"), "foo::bar()");
  EXPECT_EQ(demangle("main"), "main");
  EXPECT_EQ(demangle("_Zgarbage"), "_Zgarbage");
  EXPECT_EQ(demangle(nullptr), "");
}

}  // namespace
}  // namespace whymiss::symbols
