#include "cli/profile_cmds.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "analysis/analysis.h"
#include "analysis/estimate.h"
#include "cli/args.h"
#include "cli/elf_info.h"
#include "cli/namer.h"
#include "cli/output.h"
#include "cli/pmu_status.h"
#include "model/geometry.h"
#include "model/profile.h"
#include "report/report.h"
#include "sim/sim.h"

namespace whymiss::cli {
namespace {

const std::vector<OptionSpec> kRecordOpts = {
    {"mode", 0, true}, {"cache", 0, true}, {"cores", 0, true}, {"policy", 0, true},
    {"llc", 0, true},  {"output-profile", 'o', true}, {"period-us", 0, true},
    {"help", 'h', false}};
const std::vector<OptionSpec> kReportOpts = {
    {"input", 'i', true}, {"format", 0, true}, {"output", 0, true}, {"help", 'h', false}};

int fail(std::ostream& err, const std::string& sentence) {
  err << "whymiss: " << sentence << "\n";
  return 2;
}

// Splits "[options] [--] program args": options end at "--" or at the first word that is not
// an option or an option's value.
void split_command(int argc, char** argv, const std::vector<OptionSpec>& specs,
                   std::vector<std::string>* opts, std::vector<std::string>* prog) {
  int i = 1;
  for (; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (a.size() < 2 || a[0] != '-') break;
    opts->push_back(a);
    if (a.find('=') != std::string::npos) continue;
    for (const auto& s : specs) {
      bool match = (a == "--" + s.name) || (a.size() == 2 && s.short_name && a[1] == s.short_name);
      if (match && s.takes_value && i + 1 < argc) opts->push_back(argv[++i]);
    }
  }
  for (; i < argc; ++i) prog->push_back(argv[i]);
}

struct RecordConfig {
  std::string mode = "auto";  // as asked; record() resolves auto
  std::string output = "whymiss.data";
  std::vector<std::string> env;  // NAME=value for the runtime
  std::vector<std::string> program;
};

Result<RecordConfig> parse_record(int argc, char** argv, bool with_report_opts) {
  std::vector<OptionSpec> specs = kRecordOpts;
  if (with_report_opts)
    for (const auto& s : kReportOpts)
      if (s.name != "input" && s.name != "help") specs.push_back(s);
  std::vector<std::string> opts;
  RecordConfig c;
  split_command(argc, argv, specs, &opts, &c.program);
  auto a = parse_args(opts, specs);
  if (!a) return Error{a.error()};
  if (!a->positional.empty()) return make_error("unexpected argument '" + a->positional[0] + "' before the program");
  if (const auto* m = a->get("mode")) {
    if (*m != "exact" && *m != "soft" && *m != "pmu" && *m != "auto")
      return make_error("unknown mode '" + *m + "'; expected exact, soft, pmu or auto");
    c.mode = *m;
  }
  if (const auto* s = a->get("cache")) {
    auto g = parse_cache_spec(*s);
    if (!g) return Error{g.error()};
    c.env.push_back("WHYMISS_CACHE=" + g->to_spec());
  }
  if (const auto* s = a->get("cores")) {
    char* end = nullptr;
    long n = std::strtol(s->c_str(), &end, 10);
    if (s->empty() || *end || n < 1 || n > 1024)
      return make_error("--cores needs a number from 1 to 1024, not '" + *s + "'");
    c.env.push_back("WHYMISS_CORES=" + std::to_string(n));
  }
  if (const auto* s = a->get("policy")) {
    auto p = sim::parse_policy(*s);
    if (!p) return Error{p.error()};
    c.env.push_back("WHYMISS_POLICY=" + *s);
  }
  if (const auto* s = a->get("llc")) {
    if (*s != "inclusive" && *s != "non-inclusive")
      return make_error("--llc must be inclusive or non-inclusive, not '" + *s + "'");
    c.env.push_back("WHYMISS_LLC=" + *s);
  }
  if (const auto* s = a->get("period-us")) {
    char* end = nullptr;
    long n = std::strtol(s->c_str(), &end, 10);
    if (s->empty() || *end || n < 100 || n > 1000000)
      return make_error("--period-us needs a sampling period from 100 to 1000000 microseconds, not '" + *s + "'");
    c.env.push_back("WHYMISS_PERIOD_US=" + std::to_string(n));
  }
  if (const auto* o = a->get("output-profile")) c.output = *o;
  if (c.program.empty()) return make_error("no program given; usage: whymiss record [options] -- program [args]");
  return c;
}

struct ChosenMode {
  std::string mode;     // exact, soft or pmu
  std::string why;      // one sentence for the report header
  std::string preload;  // soft/pmu: the runtime to LD_PRELOAD
};

// The preloaded runtime of the sampling modes, installed beside the whymiss binary (bin/../lib).
Result<std::string> sampling_runtime() {
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return make_error("cannot locate the whymiss executable to find its runtime library");
  auto lib = self.parent_path().parent_path() / "lib" / "libwhymiss-soft.so";
#ifdef WHYMISS_BUILD_LIBDIR
  // Tests link the CLI into binaries that live elsewhere in the build tree.
  if (!std::filesystem::exists(lib, ec)) lib = std::filesystem::path(WHYMISS_BUILD_LIBDIR) / "libwhymiss-soft.so";
#endif
  if (!std::filesystem::exists(lib, ec))
    return make_error("the soft-mode runtime " + lib.string() + " is missing; rebuild whymiss with scripts/build.sh");
  return lib.string();
}

// Resolves --mode against the program: exact needs a whymiss-cc build; soft and pmu inject the
// runtime with LD_PRELOAD, which needs a dynamically linked program not built with whymiss-cc
// (two runtimes would both interpose malloc); auto takes exact for whymiss-cc builds, else the
// PMU when this machine has a usable one, else soft.
Result<ChosenMode> choose_mode(const std::string& asked, const std::string& name, const ElfInfo& elf) {
  const std::string q = "'" + name + "'";
  if (asked == "exact") {
    if (!elf.exact_runtime())
      return make_error(q + " was not built with whymiss-cc or whymiss-c++, so exact mode cannot see its memory accesses; rebuild it with CC=whymiss-cc CXX=whymiss-c++, or use --mode soft for an unmodified binary");
    return ChosenMode{"exact", "exact mode (asked for): every access of the instrumented program was simulated", ""};
  }
  if (elf.exact_runtime()) {
    if (asked == "auto")
      return ChosenMode{"exact", "exact mode (auto): the program was built with whymiss-cc, so every access was simulated", ""};
    return make_error(q + " was built with whymiss-cc, whose runtime cannot share the process with the " + asked + "-mode runtime; use --mode exact, or rebuild it without the wrapper");
  }
  if (!elf.dynamic)
    return make_error(q + " is statically linked, and " + (asked == "auto" ? std::string("the sampling modes inject") : asked + " mode injects") + " its runtime with LD_PRELOAD, which only dynamically linked programs load; link it dynamically, or rebuild it with whymiss-cc and use --mode exact");
  if (asked == "pmu") {
    PmuStatus pmu = detect_pmu();
    if (!pmu.available) return make_error("pmu mode is not possible here: " + pmu.reason + "; use --mode soft");
  }
  auto lib = sampling_runtime();
  if (!lib) return Error{lib.error()};
  if (asked == "pmu") {
    PmuStatus pmu = detect_pmu();
    return ChosenMode{"pmu", "pmu mode (asked for): " + pmu.what, *lib};
  }
  if (asked == "auto") {
    PmuStatus pmu = detect_pmu();
    if (pmu.available) return ChosenMode{"pmu", "pmu mode (auto): " + pmu.what, *lib};
    return ChosenMode{"soft", "soft mode (auto): no usable hardware PMU (" + pmu.reason + "), so misses are modelled from task-clock samples", *lib};
  }
  return ChosenMode{"soft", "soft mode (asked for): misses are modelled from task-clock samples", *lib};
}

// Runs the program with the runtime configured, waits, and turns its raw profile into the final
// one (with how the program ended). Returns the exit status for whymiss.
int record(const RecordConfig& c, std::ostream& err) {
  auto prog = find_program(c.program[0]);
  if (!prog) return fail(err, prog.error());
  auto elf = inspect_elf(*prog);
  if (!elf) return fail(err, elf.error());
  auto chosen = choose_mode(c.mode, c.program[0], *elf);
  if (!chosen) return fail(err, chosen.error());
  if (auto st = check_output_path(c.output); !st) return fail(err, st.error());
  const std::string raw = c.output + ".raw." + std::to_string(getpid());
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) return fail(err, std::string("cannot create a pipe: ") + std::strerror(errno));
  std::vector<std::string> envs = c.env;
  envs.push_back("WHYMISS_OUTPUT=" + raw);
  if (chosen->mode != "exact") {
    envs.push_back("WHYMISS_MODE=" + chosen->mode);
    std::string preload = chosen->preload;
    if (const char* old = std::getenv("LD_PRELOAD"); old && *old) preload += std::string(":") + old;
    envs.push_back("LD_PRELOAD=" + preload);
  }
  std::vector<char*> args;
  for (const auto& s : c.program) args.push_back(const_cast<char*>(s.c_str()));
  args.push_back(nullptr);
  // Ctrl-C reaches the program (same process group); whymiss waits for it to finish its profile.
  struct sigaction ign {}, old_int {}, old_term {};
  ign.sa_handler = SIG_IGN;
  sigaction(SIGINT, &ign, &old_int);
  pid_t pid = fork();
  if (pid < 0) return fail(err, std::string("cannot fork: ") + std::strerror(errno));
  if (pid == 0) {
    sigaction(SIGINT, &old_int, nullptr);
    ::close(pipefd[0]);
    for (const auto& e : envs) putenv(const_cast<char*>(e.c_str()));
    // Only this process records: descendants that exec a whymiss-built program run unprofiled.
    std::string self = "WHYMISS_PID=" + std::to_string(getpid());
    putenv(self.data());
    execv(prog->c_str(), args.data());
    int e = errno;
    (void)!::write(pipefd[1], &e, sizeof e);
    _exit(127);
  }
  (void)old_term;
  ::close(pipefd[1]);
  int exec_errno = 0;
  ssize_t got = ::read(pipefd[0], &exec_errno, sizeof exec_errno);
  ::close(pipefd[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  sigaction(SIGINT, &old_int, nullptr);
  if (got == sizeof exec_errno)
    return fail(err, "cannot run '" + c.program[0] + "': " + std::strerror(exec_errno));
  auto p = profile::read_profile(raw);
  std::error_code ec;
  std::filesystem::remove(raw, ec);
  if (!p) {
    std::string how = WIFSIGNALED(status) ? "was killed by signal " + std::to_string(WTERMSIG(status))
                                          : "exited with status " + std::to_string(WEXITSTATUS(status));
    return fail(err, "the program " + how + " without leaving a profile (" + p.error() + ")");
  }
  p->notes.insert(p->notes.begin(), {0, chosen->why});
  p->meta.exited = WIFEXITED(status) ? 1 : 0;
  p->meta.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 0;
  if (WIFSIGNALED(status)) p->meta.term_signal = WTERMSIG(status);
  if (auto st = profile::write_profile(c.output, *p); !st) return fail(err, st.error());
  if (WIFSIGNALED(status))
    err << "whymiss: the program was killed by signal " << WTERMSIG(status) << "; its profile up to then is in " << c.output << "\n";
  return 0;
}

struct ReportConfig {
  std::string input = "whymiss.data";
  std::string output;  // "" = stdout (report) or stderr (run)
  report::Format format = report::Format::Text;
};

Status parse_report_opts(const ParsedArgs& a, ReportConfig* c) {
  if (const auto* f = a.get("format")) {
    if (*f == "text") c->format = report::Format::Text;
    else if (*f == "json") c->format = report::Format::Json;
    else return make_error("unknown format '" + *f + "'; expected text or json");
  }
  if (const auto* o = a.get("output")) {
    if (auto st = check_output_path(*o); !st) return st;
    c->output = *o;
  }
  return Ok{};
}

int report(const ReportConfig& c, std::ostream& dest, std::ostream& err) {
  auto p = profile::read_profile(c.input);
  if (!p) return fail(err, p.error());
  // Sampled profiles (soft, pmu) carry raw facts: turn them into the records the analysis reads.
  if (p->meta.mode != uint32_t(profile::Mode::Exact))
    if (auto st = analysis::estimate(*p); !st) return fail(err, c.input + ": " + st.error());
  analysis::Analysis a = analysis::analyze(*p);
  SymbolNamer names(*p);
  for (const auto& w : names.warnings()) a.notes.push_back(w);
  std::ostringstream text;
  report::Options o;
  o.format = c.format;
  report::write_report(text, *p, a, names, o);
  if (!c.output.empty()) {
    if (auto st = write_file_atomically(c.output, text.str()); !st) return fail(err, st.error());
  } else {
    dest << text.str();
  }
  return 0;
}

}  // namespace

// True when --help/-h comes before the program (after "--" it belongs to the program).
static bool wants_help(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") return false;
    if (a == "--help" || a == "-h") return true;
  }
  return false;
}

int record_main(int argc, char** argv, std::ostream& out, std::ostream& err) {
  if (wants_help(argc, argv)) return record_usage(out), 0;
  auto c = parse_record(argc, argv, false);
  if (!c) return fail(err, c.error());
  return record(*c, err);
}

int report_main(int argc, char** argv, std::ostream& out, std::ostream& err) {
  if (wants_help(argc, argv)) return report_usage(out), 0;
  std::vector<std::string> args(argv + 1, argv + argc);
  auto a = parse_args(args, kReportOpts);
  if (!a) return fail(err, a.error());
  ReportConfig c;
  if (const auto* i = a->get("input")) c.input = *i;
  if (a->positional.size() == 1) c.input = a->positional[0];
  else if (a->positional.size() > 1) return fail(err, "report takes one profile, not " + std::to_string(a->positional.size()));
  if (auto st = parse_report_opts(*a, &c); !st) return fail(err, st.error());
  return report(c, out, err);
}

int run_main(int argc, char** argv, std::ostream& out, std::ostream& err) {
  if (wants_help(argc, argv)) return run_usage(out), 0;
  auto c = parse_record(argc, argv, true);
  if (!c) return fail(err, c.error());
  std::vector<std::string> opts, prog;
  std::vector<OptionSpec> specs = kRecordOpts;
  for (const auto& s : kReportOpts)
    if (s.name != "input" && s.name != "help") specs.push_back(s);
  split_command(argc, argv, specs, &opts, &prog);
  auto a = parse_args(opts, specs);
  ReportConfig rc;
  if (auto st = parse_report_opts(*a, &rc); !st) return fail(err, st.error());
  if (int rcode = record(*c, err); rcode != 0) return rcode;
  rc.input = c->output;
  return report(rc, err, err);  // the program owns stdout; the report goes to stderr or --output
}

void record_usage(std::ostream& out) {
  out << "usage: whymiss record [--mode auto|exact|soft|pmu] [--cache SPEC] [--cores N]\n"
         "                      [--policy lru|plru|random] [--llc inclusive|non-inclusive]\n"
         "                      [--period-us N] [-o PROFILE] -- program [args]\n"
         "Runs a program and writes its profile (default whymiss.data). Modes: exact simulates every\n"
         "access of a program built with whymiss-cc/whymiss-c++; soft samples an unmodified dynamically\n"
         "linked program (task-clock samples + software breakpoints); pmu uses PEBS/IBS where the\n"
         "machine has them; auto (default) picks exact for whymiss-cc builds, else pmu, else soft.\n";
}
void report_usage(std::ostream& out) {
  out << "usage: whymiss report [-i PROFILE] [--format text|json] [--output FILE]\n"
         "Explains the cache misses recorded in PROFILE (default whymiss.data).\n";
}
void run_usage(std::ostream& out) {
  out << "usage: whymiss run [record options] [--format text|json] [--output FILE] -- program [args]\n"
         "Records and reports in one step; the report goes to FILE, else to stderr.\n";
}

}  // namespace whymiss::cli
