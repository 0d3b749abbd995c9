#include "cli/profile_cmds.h"

#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>

#include "analysis/analysis.h"
#include "cli/args.h"
#include "cli/common.h"
#include "cli/elf_info.h"
#include "cli/namer.h"
#include "cli/type_oracle.h"
#include "analysis/data_types.h"
#include "cli/output.h"
#include "cli/pmu_status.h"
#include "cli/progress_line.h"
#include "model/geometry.h"
#include "model/profile.h"
#include "report/report.h"
#include "report/view.h"
#include "symbols/instrumented.h"
#include "sim/sim.h"

namespace whymiss::cli {
namespace {

const std::vector<OptionSpec> kRecordOpts = {
    {"mode", 0, true}, {"cache", 0, true}, {"cores", 0, true}, {"policy", 0, true},
    {"llc", 0, true},  {"interleave", 0, true}, {"output-profile", 'o', true}, {"period-us", 0, true},
    {"force", 0, false}, {"no-progress", 0, false}, {"help", 'h', false}};
const std::vector<OptionSpec> kReportOpts = {
    {"input", 'i', true}, {"format", 0, true}, {"output", 0, true}, {"force", 0, false},
    {"view", 0, true}, {"help", 'h', false}};

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
  // `record` always writes the profile; `run` only when -o names a file. Otherwise the raw
  // profile lives in a private temporary directory and is gone when whymiss exits.
  bool keep_profile = true;
  bool force = false;            // --force: -o may replace a file that is not a profile
  bool progress = true;          // exact mode: the progress line, when stderr is a terminal
  std::vector<std::string> env;  // NAME=value for the runtime
  std::vector<std::string> program;
};

// The runtime's settings: each option's value, checked, as the WHYMISS_* value the runtime
// reads. The same checks apply to a value the program would inherit from whymiss's own
// environment, which the runtime would otherwise drop silently (and record nothing).
struct Setting {
  const char* option;  // "cache" for --cache
  const char* env;     // "WHYMISS_CACHE"
  Result<std::string> (*check)(const std::string& value);
};

Result<std::string> check_cache(const std::string& v) {
  auto g = parse_cache_spec(v);
  if (!g) return Error{g.error()};
  return g->to_spec();
}
Result<std::string> check_cores(const std::string& v) {
  char* end = nullptr;
  long n = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end || n < 1 || n > 1024)
    return make_error("--cores needs a number from 1 to 1024, not '" + v + "'");
  return std::to_string(n);
}
Result<std::string> check_policy(const std::string& v) {
  auto p = sim::parse_policy(v);
  if (!p) return Error{p.error()};
  return v;
}
Result<std::string> check_llc(const std::string& v) {
  if (v != "inclusive" && v != "non-inclusive")
    return make_error("--llc must be inclusive or non-inclusive, not '" + v + "'");
  return v;
}
// "locks" too, undocumented: the experimental lock mode the benchmarks compare (bench/README.md).
Result<std::string> check_interleave(const std::string& v) {
  if (v != "strict" && v != "parallel" && v != "locks")
    return make_error("--interleave must be strict or parallel, not '" + v + "'");
  return v;
}
Result<std::string> check_period(const std::string& v) {
  char* end = nullptr;
  long n = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end || n < 100 || n > 1000000)
    return make_error("--period-us needs a sampling period from 100 to 1000000 microseconds, not '" + v + "'");
  return std::to_string(n);
}

const Setting kSettings[] = {
    {"cache", "WHYMISS_CACHE", check_cache},   {"cores", "WHYMISS_CORES", check_cores},
    {"policy", "WHYMISS_POLICY", check_policy}, {"llc", "WHYMISS_LLC", check_llc},
    {"interleave", "WHYMISS_INTERLEAVE", check_interleave},
    {"period-us", "WHYMISS_PERIOD_US", check_period},
};

Result<RecordConfig> parse_record(int argc, char** argv, bool with_report_opts) {
  std::vector<OptionSpec> specs = kRecordOpts;
  if (with_report_opts)
    for (const auto& s : kReportOpts)
      if (s.name != "input" && s.name != "help" && s.name != "force") specs.push_back(s);
  std::vector<std::string> opts;
  RecordConfig c;
  split_command(argc, argv, specs, &opts, &c.program);
  auto a = parse_args(opts, specs);
  if (!a) return Error{a.error()};
  if (!a->positional.empty()) return make_error("unexpected argument '" + a->positional[0] + "' before the program");
  c.progress = !a->has("no-progress");
  if (const auto* m = a->get("mode")) {
    if (*m != "exact" && *m != "soft" && *m != "pmu" && *m != "auto")
      return make_error("unknown mode '" + *m + "'; expected exact, soft, pmu or auto");
    c.mode = *m;
  }
  for (const Setting& s : kSettings) {
    if (const auto* v = a->get(s.option)) {
      auto r = s.check(*v);
      if (!r) return Error{r.error()};
      c.env.push_back(std::string(s.env) + "=" + *r);
    } else if (const char* e = std::getenv(s.env)) {
      auto r = s.check(e);
      if (!r)
        return make_error("the environment sets " + std::string(s.env) + "='" + e +
                          "', which is not a valid setting (" + r.error() +
                          "); unset it, or pass --" + s.option);
    }
  }
  if (const auto* o = a->get("output-profile")) c.output = *o;
  else if (with_report_opts) c.keep_profile = false;
  c.force = a->has("force");
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
    return ChosenMode{"exact", "exact mode (asked for): every access of code built with whymiss-cc was simulated, none of code built without it (uninstrumented libraries; see cpu time)", ""};
  }
  if (elf.exact_runtime()) {
    if (asked == "auto")
      return ChosenMode{"exact", "exact mode (auto): the program was built with whymiss-cc, so every access of code built with it was simulated, none of code built without it (uninstrumented libraries; see cpu time)", ""};
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

// ---- signals while the program runs ----
// SIGTERM, SIGHUP and SIGQUIT sent to whymiss (by `timeout`, `kill`, a closing terminal) are
// passed on to the program, whose runtime writes its profile before it dies of them; whymiss
// then writes the final profile as usual. (A signal sent to the whole process group reaches the
// program twice: a standard signal pending twice is delivered once.) SIGINT is ignored, as
// Ctrl-C already reaches the program through the terminal's process group.
constexpr int kForwarded[] = {SIGTERM, SIGHUP, SIGQUIT};
volatile sig_atomic_t g_child = 0;

extern "C" void forward_to_child(int s) {
  const int saved = errno;
  if (g_child > 0) ::kill(pid_t(g_child), s);
  errno = saved;
}

// Sets up and undoes the dispositions above around one run.
class SignalRelay {
 public:
  SignalRelay() {
    sigemptyset(&set_);
    for (int s : kForwarded) sigaddset(&set_, s);
    // Blocked across fork: the child resets them before it can receive one (see in_child).
    sigprocmask(SIG_BLOCK, &set_, &old_mask_);
    struct sigaction sa {};
    sa.sa_handler = forward_to_child;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < std::size(kForwarded); ++i) sigaction(kForwarded[i], &sa, &old_[i]);
    struct sigaction ign {};
    ign.sa_handler = SIG_IGN;
    sigaction(SIGINT, &ign, &old_int_);
  }
  void in_child() {
    for (size_t i = 0; i < std::size(kForwarded); ++i) sigaction(kForwarded[i], &old_[i], nullptr);
    sigaction(SIGINT, &old_int_, nullptr);
    sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
  }
  void started(pid_t child) {
    g_child = child;
    sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
  }
  ~SignalRelay() {
    sigprocmask(SIG_BLOCK, &set_, nullptr);
    g_child = 0;
    for (size_t i = 0; i < std::size(kForwarded); ++i) sigaction(kForwarded[i], &old_[i], nullptr);
    sigaction(SIGINT, &old_int_, nullptr);
    sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
  }

 private:
  sigset_t set_{}, old_mask_{};
  struct sigaction old_[std::size(kForwarded)] {}, old_int_ {};
};

// The directory the runtime writes its raw profile in: created before the program starts, in the
// output's directory (so a directory whymiss cannot write in is refused up front; a `run` that
// keeps no profile uses $TMPDIR or /tmp instead, and nothing outlives it), private to
// whymiss (mode 0700, a random name: nobody else can put a file or a link where the runtime
// writes, and two runs never share a raw file), given by absolute path (so a program that
// changes directory still writes there), and removed with everything in it on every way out.
class RawDir {
 public:
  // In the directory of `output`, or, when there is no output to keep, in $TMPDIR (else /tmp).
  static Result<std::unique_ptr<RawDir>> create(const std::string* output) {
    std::error_code ec;
    std::filesystem::path dir;
    if (output) {
      dir = std::filesystem::absolute(*output, ec).parent_path();
      if (ec) return make_error("cannot resolve the output path '" + *output + "': " + ec.message());
    } else {
      const char* t = std::getenv("TMPDIR");
      dir = t && *t == '/' ? t : "/tmp";
    }
    std::string tmpl = (dir / ".whymiss-rec.XXXXXX").string();
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (!::mkdtemp(buf.data()))
      return make_error("cannot record into '" + dir.string() + "': cannot create a directory there (" +
                        std::strerror(errno) + ")");
    auto d = std::unique_ptr<RawDir>(new RawDir(buf.data()));
    // The runtimes keep the path in a 4096-byte buffer, with room for their suffixes.
    if (d->raw().size() + 64 >= 4096)
      return make_error("cannot record into '" + dir.string() + "': its path is too long (" +
                        std::to_string(dir.string().size()) + " bytes)");
    return d;
  }
  ~RawDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string raw() const { return path_ + "/raw"; }
  // The directory it was created in.
  std::string parent() const { return std::filesystem::path(path_).parent_path().string(); }
  // What the runtime wrote in raw().status: "" (never started), "started", "written",
  // "error N", "disabled WHY".
  std::string status() const {
    std::ifstream f(raw() + ".status");
    std::string line;
    std::getline(f, line);
    return line;
  }

 private:
  explicit RawDir(std::string p) : path_(std::move(p)) {}
  std::string path_;
};

std::string describe_status(int status) {
  if (WIFSIGNALED(status)) {
    const char* name = sigabbrev_np(WTERMSIG(status));
    return "was killed by signal " + std::to_string(WTERMSIG(status)) +
           (name ? std::string(" (SIG") + name + ")" : std::string());
  }
  return "exited with status " + std::to_string(WEXITSTATUS(status));
}

// Why the program left no profile, as far as whymiss can tell.
std::string why_no_profile(const RawDir& dir, int status, const std::string& mode) {
  const std::string how = "the program " + describe_status(status) + " without leaving a profile: ";
  if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
    return how + "SIGKILL cannot be caught, so its runtime had no chance to write one";
  const std::string st = dir.status();
  const std::string where = dir.parent();
  if (st.empty())
    return how + "whymiss's " + mode + "-mode runtime never started in it" +
           (mode == "exact" ? " (did it exec a program not built with whymiss-cc?)"
                            : " (a set-user-ID program, or one that clears LD_PRELOAD, does not load it)");
  if (st.rfind("disabled ", 0) == 0)
    return how + "its runtime turned itself off at start: " + st.substr(9);
  if (st.rfind("error ", 0) == 0) {
    const int e = std::atoi(st.c_str() + 6);
    return how + "its runtime could not write it in '" + where + "' (" + std::strerror(e) + ")" +
           (e == EACCES || e == EPERM ? "; did the program drop its privileges?" : "");
  }
  return how + "its runtime started but never wrote one (the program ended with _exit(), exec'd "
               "a program not built with whymiss, or could not write in '" + where + "')";
}

// The status `time` and valgrind give for a program that ended with wait status `status`: its
// exit code, or 128 + the signal that killed it.
int program_status(int status) {
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

// Runs the program with the runtime configured, waits, and turns its raw profile into the final
// one (with how the program ended), which goes to *out and, if c.keep_profile, to c.output.
// Returns whymiss's own exit status (0, or 2 when it failed); the program's wait status goes to
// *program.
int record(const RecordConfig& c, std::ostream& err, profile::Profile* out, int* program) {
  auto prog = find_program(c.program[0]);
  if (!prog) return fail(err, prog.error());
  auto elf = inspect_elf(*prog);
  if (!elf) return fail(err, elf.error());
  auto chosen = choose_mode(c.mode, c.program[0], *elf);
  if (!chosen) return fail(err, chosen.error());
  const OutputOptions out_opts{OutputKind::Profile, c.force};
  if (c.keep_profile)
    if (auto st = check_output_path(c.output, out_opts); !st) return fail(err, st.error());
  auto dir = RawDir::create(c.keep_profile ? &c.output : nullptr);
  if (!dir) return fail(err, dir.error());
  const std::string raw = (*dir)->raw();
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) return fail(err, std::string("cannot create a pipe: ") + std::strerror(errno));
  std::vector<std::string> envs = c.env;
  envs.push_back("WHYMISS_OUTPUT=" + raw);
  // Exact mode counts every access: a long run says how far it got (progress_line.h).
  std::unique_ptr<ProgressLine> progress;
  if (chosen->mode == "exact" && c.progress) progress = ProgressLine::create(raw + ".progress", STDERR_FILENO);
  if (progress) envs.push_back(progress->env());
  if (chosen->mode != "exact") {
    envs.push_back("WHYMISS_MODE=" + chosen->mode);
    std::string preload = chosen->preload;
    if (const char* old = std::getenv("LD_PRELOAD"); old && *old) preload += std::string(":") + old;
    envs.push_back("LD_PRELOAD=" + preload);
  }
  std::vector<char*> args;
  for (const auto& s : c.program) args.push_back(const_cast<char*>(s.c_str()));
  args.push_back(nullptr);
  const pid_t parent = getpid();
  int status = 0;
  int exec_errno = 0;
  ssize_t got = 0;
  {
    SignalRelay relay;
    pid_t pid = fork();
    if (pid < 0) {
      ::close(pipefd[0]);
      ::close(pipefd[1]);
      return fail(err, std::string("cannot fork: ") + std::strerror(errno));
    }
    if (pid == 0) {
      relay.in_child();
      ::close(pipefd[0]);
      // The program dies with whymiss: killed by something whymiss cannot pass on (SIGKILL), it
      // must not run on, orphaned, with nobody to collect its profile.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(127);
      for (const auto& e : envs) putenv(const_cast<char*>(e.c_str()));
      if (!progress) unsetenv("WHYMISS_PROGRESS");  // only ever the page made for this run
      // Only this process records: descendants that exec a whymiss-built program run unprofiled.
      std::string self = "WHYMISS_PID=" + std::to_string(getpid());
      putenv(self.data());
      execv(prog->c_str(), args.data());
      int e = errno;
      (void)!::write(pipefd[1], &e, sizeof e);
      _exit(127);
    }
    relay.started(pid);
    ::close(pipefd[1]);
    do got = ::read(pipefd[0], &exec_errno, sizeof exec_errno);
    while (got < 0 && errno == EINTR);
    ::close(pipefd[0]);
    if (progress && got != sizeof exec_errno) {
      progress->wait(pid, &status);
    } else {
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
    }
  }
  if (got == sizeof exec_errno)
    return fail(err, "cannot run '" + c.program[0] + "': " + std::strerror(exec_errno));
  std::error_code ec;
  if (!std::filesystem::exists(raw, ec))
    return fail(err, why_no_profile(**dir, status, chosen->mode));
  auto p = profile::read_profile(raw);
  if (!p) return fail(err, "the program " + describe_status(status) + " and left a damaged profile (" + p.error() + ")");
  p->notes.insert(p->notes.begin(), {0, chosen->why});
  p->meta.exited = WIFEXITED(status) ? 1 : 0;
  p->meta.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 0;
  if (WIFSIGNALED(status)) p->meta.term_signal = WTERMSIG(status);
  if (c.keep_profile) {
    auto write = [&](int fd) { return profile::write_profile_to_fd(fd, *p); };
    if (auto st = write_output(c.output, write, out_opts); !st) return fail(err, st.error());
  }
  if (WIFSIGNALED(status))
    err << "whymiss: the program " << describe_status(status)
        << (c.keep_profile ? "; its profile up to then is in " + c.output : std::string("; the report covers it up to then"))
        << "\n";
  *out = std::move(*p);
  *program = status;
  return 0;
}

struct ReportConfig {
  std::string input = "whymiss.data";
  std::string output;  // "" = stdout (report) or stderr (run)
  bool force = false;
  report::Format format = report::Format::Text;
  const report::View* view = nullptr;  // --view: this view instead of the report
};

Status parse_report_opts(const ParsedArgs& a, ReportConfig* c) {
  if (const auto* f = a.get("format")) {
    if (*f == "text") c->format = report::Format::Text;
    else if (*f == "json") c->format = report::Format::Json;
    else if (*f == "cachegrind") c->format = report::Format::Cachegrind;
    else if (*f == "pprof") c->format = report::Format::Pprof;
    else if (*f == "html") c->format = report::Format::Html;
    else return make_error("unknown format '" + *f + "'; expected text, json, cachegrind, pprof or html");
  }
  c->force = a.has("force");
  if (const auto* v = a.get("view")) {
    c->view = report::find_view(*v);
    if (!c->view) return make_error("unknown view '" + *v + "'; expected " + report::view_names());
    if (c->format != report::Format::Text && c->format != report::Format::Json)
      return make_error("--view writes text or json, not the format asked for");
  }
  if (const auto* o = a.get("output")) {
    if (auto st = check_output_path(*o, {OutputKind::Report, c->force}); !st) return st;
    c->output = *o;
  }
  return Ok{};
}

// Which of the profile's modules were built with whymiss-cc, from their files (exact mode).
std::vector<analysis::CodeKind> module_kinds(const profile::Profile& p) {
  std::vector<analysis::CodeKind> kinds;
  for (const auto& m : p.modules) {
    switch (symbols::module_instrumentation(m.path)) {
      case symbols::Instrumentation::Instrumented: kinds.push_back(analysis::CodeKind::Instrumented); break;
      case symbols::Instrumentation::NotInstrumented: kinds.push_back(analysis::CodeKind::NotInstrumented); break;
      case symbols::Instrumentation::WhymissRuntime: kinds.push_back(analysis::CodeKind::WhymissRuntime); break;
      case symbols::Instrumentation::Unreadable: kinds.push_back(analysis::CodeKind::Unreadable); break;
    }
  }
  return kinds;
}

// Reports on a profile already read (`run` reports the one it recorded, never re-reading a
// path another run may have written meanwhile). `name` names it in sentences.
int report(const ReportConfig& c, profile::Profile& p, const std::string& name,
           std::ostream& dest, std::ostream& err) {
  if (auto st = make_analysable(p, name); !st) return fail(err, st.error());
  analysis::Analysis a = analysis::analyze(p);
  if (p.meta.mode == uint32_t(profile::Mode::Exact)) a.unseen = analysis::unseen_work(p, module_kinds(p));
  SymbolNamer names(p);
  for (const auto& w : names.warnings()) a.notes.push_back(w);
  DwarfTypes types(p, names);
  analysis::name_finding_types(a, p, types);
  std::ostringstream text;
  report::Options o;
  o.format = c.format;
  if (c.view) {
    report::write_view(text, *c.view, {p, a, names, types, o}, c.format);
  } else {
    report::write_report(text, p, a, names, types, o);
  }
  if (!c.output.empty()) {
    if (auto st = write_output(c.output, text.view(), {OutputKind::Report, c.force}); !st)
      return fail(err, st.error());
  } else {
    errno = 0;
    dest << text.view();
    dest.flush();
    if (!dest)
      return fail(err, std::string("cannot write the report") +
                           (errno ? std::string(": ") + std::strerror(errno) : std::string()));
  }
  return 0;
}

int report(const ReportConfig& c, std::ostream& dest, std::ostream& err) {
  auto p = profile::read_profile(c.input);
  if (!p) return fail(err, p.error());
  return report(c, *p, c.input == "-" ? profile::kStdinName : c.input, dest, err);
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
  profile::Profile p;
  int status = 0;
  if (int rcode = record(*c, err, &p, &status); rcode != 0) return rcode;
  return program_status(status);
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
    if (s.name != "input" && s.name != "help" && s.name != "force") specs.push_back(s);
  split_command(argc, argv, specs, &opts, &prog);
  auto a = parse_args(opts, specs);
  ReportConfig rc;
  if (auto st = parse_report_opts(*a, &rc); !st) return fail(err, st.error());
  profile::Profile p;
  int status = 0;
  if (int rcode = record(*c, err, &p, &status); rcode != 0) return rcode;
  // The program owns stdout; the report goes to stderr or --output.
  if (int rcode = report(rc, p, c->keep_profile ? c->output : "the recorded profile", err, err); rcode != 0)
    return rcode;
  return program_status(status);
}

void record_usage(std::ostream& out) {
  out << "usage: whymiss record [--mode auto|exact|soft|pmu] [--cache SPEC] [--cores N]\n"
         "                      [--policy lru|plru|random] [--llc inclusive|non-inclusive]\n"
         "                      [--interleave strict|parallel] [--period-us N] [-o PROFILE] [--force]\n"
         "                      [--no-progress] -- program [args]\n"
         "Runs a program and writes its profile (default whymiss.data; an existing file is replaced\n"
         "only if it is a whymiss profile, or with --force). Modes: exact simulates every\n"
         "access of a program built with whymiss-cc/whymiss-c++; soft samples an unmodified dynamically\n"
         "linked program (task-clock samples + software breakpoints); pmu uses PEBS/IBS where the\n"
         "machine has them; auto (default) picks exact for whymiss-cc builds, else pmu, else soft.\n"
         "Exact mode lets each thread simulate its own accesses on a core of its own, in host order\n"
         "(--interleave parallel, the default; at most 64 threads at once), until threads contend\n"
         "for lines: then one relay thread puts them in turn, access by access, for the rest of the\n"
         "run. --interleave strict does that from the start (deterministic order, up to 1024\n"
         "threads; the default with --cores: --interleave parallel --cores N folds threads under\n"
         "locks, in host order, and never moves).\n"
         "In exact mode, when stderr is a terminal, a line there says every 2 s how many accesses\n"
         "were simulated so far and how long the program has run (--no-progress: not).\n"
         "Exit status: the program's (128 + the signal's number if a signal killed it), as with\n"
         "time or valgrind; 2 when whymiss itself failed (bad options, no profile, a failed write).\n";
}
void report_usage(std::ostream& out) {
  out << "usage: whymiss report [-i PROFILE] [--format text|json|cachegrind|pprof|html] [--view NAME]\n"
         "                      [--output FILE] [--force]\n"
         "Explains the cache misses recorded in PROFILE (default whymiss.data; - for standard\n"
         "input). --output does not replace a profile or a program unless --force is given.\n"
         "--view NAME shows one view of the profile instead of the report (text or json):\n";
  for (const auto* v : report::views()) out << "  " << v->name() << ": " << v->summary() << "\n";
  out << "Exit status: 0, or 2 when the report could not be made or written.\n";
}
void run_usage(std::ostream& out) {
  out << "usage: whymiss run [record options] [--format text|json|cachegrind|pprof|html] [--view NAME]\n"
         "                   [--output FILE] -- program [args]\n"
         "Records and reports in one step; the report goes to FILE, else to stderr. The profile is\n"
         "kept only when -o PROFILE names a file for it; otherwise it is recorded into a private\n"
         "temporary directory ($TMPDIR, else /tmp) and removed.\n"
         "Exit status: the program's (128 + the signal's number if a signal killed it), as with\n"
         "time or valgrind; 2 when whymiss itself failed (bad options, no profile, a failed write).\n";
}

}  // namespace whymiss::cli
