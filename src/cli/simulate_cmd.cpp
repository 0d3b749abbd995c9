#include "cli/simulate_cmd.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/output.h"
#include "model/geometry.h"
#include "model/host_memory.h"
#include "model/profile.h"
#include "model/trace.h"
#include "report/sim_report.h"
#include "sim/sim.h"

namespace whymiss::cli {
namespace {

constexpr uint32_t kMaxCores = 1024;  // what the simulator models
using profile::kStdinName;  // one name for standard input in every sentence

// Dense core-independent index of each thread number, in order of first appearance.
class ThreadIndex {
 public:
  static constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();
  uint32_t add(uint32_t thread) {
    if (thread >= index_.size()) index_.resize(thread + 1, kNone);
    if (index_[thread] == kNone) index_[thread] = count_++;
    return index_[thread];
  }
  uint32_t find(uint32_t thread) const { return thread < index_.size() ? index_[thread] : kNone; }
  uint32_t count() const { return count_; }

 private:
  std::vector<uint32_t> index_;
  uint32_t count_ = 0;
};

Status open_trace(const std::string& path, std::ifstream* f) {
  std::error_code ec;
  auto st = std::filesystem::status(path, ec);
  if (st.type() == std::filesystem::file_type::not_found) {
    return make_error("cannot open trace '" + path + "': no such file");
  }
  if (st.type() == std::filesystem::file_type::directory) {
    return make_error("cannot read trace '" + path + "': it is a directory");
  }
  f->open(path, std::ios::binary);
  if (!*f) return make_error("cannot open trace '" + path + "': " + std::strerror(errno));
  return Ok{};
}

Result<uint32_t> parse_cores(const std::string& s) {
  uint64_t v = 0;
  bool ok = !s.empty() && s.size() <= 10;
  for (char c : s) {
    if (c < '0' || c > '9') ok = false;
    if (ok) v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (!ok || v < 1 || v > kMaxCores) {
    return make_error("--cores '" + s + "' is not a whole number from 1 to " +
                      std::to_string(kMaxCores));
  }
  return static_cast<uint32_t>(v);
}

struct Options {
  std::string trace;
  CacheGeometry geometry;
  bool cores_given = false;
  uint32_t cores = 0;
  sim::Policy policy = sim::Policy::LRU;
  bool inclusive_llc = true;
  bool json = false;
  std::string output;  // empty: `out`
};

// Parses and checks every option; Ok{} with *help set when --help was asked for.
Status parse_options(int argc, char** argv, Options* o, bool* help) {
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  Result<ParsedArgs> pa = parse_args(args, {{"cache"},
                                            {"cores"},
                                            {"policy"},
                                            {"llc"},
                                            {"format"},
                                            {"output", 'o'},
                                            {"help", 'h', false}});
  if (!pa) return make_error(pa.error());
  *help = pa->has("help");
  if (*help) return Ok{};

  if (pa->positional.empty()) {
    return make_error(
        "simulate needs a TRACE file (or - for standard input); see "
        "'whymiss simulate --help'");
  }
  if (pa->positional.size() > 1) {
    return make_error("simulate takes one TRACE, but '" + pa->positional[1] +
                      "' was given as well");
  }
  o->trace = pa->positional[0];

  if (const std::string* v = pa->get("cache")) {
    Result<CacheGeometry> g = parse_cache_spec(*v);
    if (!g) return make_error("invalid --cache '" + *v + "': " + g.error());
    o->geometry = std::move(g.value());
    o->geometry.source = "--cache";
  } else {
    o->geometry = detect_geometry();
  }
  if (const std::string* v = pa->get("cores")) {
    Result<uint32_t> n = parse_cores(*v);
    if (!n) return make_error(n.error());
    o->cores_given = true;
    o->cores = *n;
  }
  if (const std::string* v = pa->get("policy")) {
    Result<sim::Policy> p = sim::parse_policy(*v);
    if (!p) return make_error(p.error());
    o->policy = *p;
  }
  if (const std::string* v = pa->get("llc")) {
    if (*v == "inclusive") {
      o->inclusive_llc = true;
    } else if (*v == "non-inclusive") {
      o->inclusive_llc = false;
    } else {
      return make_error("unknown --llc '" + *v + "'; expected inclusive or non-inclusive");
    }
  }
  if (const std::string* v = pa->get("format")) {
    if (*v != "text" && *v != "json") {
      return make_error("unknown --format '" + *v + "'; expected text or json");
    }
    o->json = *v == "json";
  }
  if (const std::string* v = pa->get("output"); v && *v != "-") {
    if (Status st = check_output_path(*v); !st) return st;
    o->output = *v;
  }
  return Ok{};
}

}  // namespace

void simulate_usage(std::ostream& out) {
  out << "usage: whymiss simulate TRACE [options]\n"
         "\n"
         "Simulates the cache hierarchy exactly on a text trace and counts every miss by kind:\n"
         "compulsory, capacity, conflict, true sharing, false sharing.\n"
         "TRACE holds one access per line, 'THREAD R|W ADDRESS SIZE' (address in hex), or is -\n"
         "for standard input.\n"
         "\n"
         "options:\n"
         "  --cache SPEC       cache geometry, e.g. L1=48K:12:64,L2=1M:16:64,L3=32M:16:64\n"
         "                     (default: detected from this machine)\n"
         "  --cores N          simulated cores, 1 to 1024; threads are dealt out to them in order\n"
         "                     of first appearance (default: one core per thread)\n"
         "  --policy P         replacement policy: lru (default), plru or random\n"
         "  --llc MODE         last level: inclusive (default) or non-inclusive\n"
         "  --format F         text (default) or json\n"
         "  -o, --output FILE  write the report to FILE instead of standard output\n"
         "  -h, --help         show this help\n";
}

int simulate_main(int argc, char** argv, std::istream& in, std::ostream& out, std::ostream& err) {
  auto fail = [&](const std::string& msg) {
    err << "whymiss: " << msg << '\n';
    return 2;
  };
  Options o;
  bool help = false;
  if (Status st = parse_options(argc, argv, &o, &help); !st) return fail(st.error());
  if (help) {
    simulate_usage(out);
    return 0;
  }

  // One pass, in bounded memory: each access is simulated as it is read, so a trace of any
  // length (a pipe, standard input) costs the simulator's state and a 64 KiB read buffer, never a
  // copy of the trace. A malformed line still ends the run with its error and no report (the
  // report is written only at the end). Simulated cores are created on first use, so the
  // hierarchy is made for the most cores there can be and the report names those used.
  const bool from_stdin = o.trace == "-";
  const std::string name = from_stdin ? kStdinName : o.trace;
  std::ifstream file;
  if (!from_stdin) {
    if (Status st = open_trace(o.trace, &file); !st) return fail(st.error());
  }
  sim::Knobs knobs;
  knobs.concurrent = false;
  knobs.policy = o.policy;
  knobs.inclusive_llc = o.inclusive_llc;
  knobs.cores = o.cores_given ? o.cores : kMaxCores;
  knobs.memory_budget = simulator_memory_budget();
  auto h = sim::Hierarchy::create(o.geometry, knobs);
  if (!h) return fail(h.error());
  sim::Hierarchy& hier = *h.value();
  const uint32_t ncores = knobs.cores;

  ThreadIndex threads;
  Status read = read_trace_until(from_stdin ? in : file, name, [&](const TraceAccess& a) -> Status {
    const uint32_t before = threads.count();
    const uint32_t core = threads.add(a.thread) % ncores;
    if (threads.count() != before) {
      if (!o.cores_given && threads.count() > kMaxCores) {
        return make_error("the trace has more than " + std::to_string(kMaxCores) +
                          " threads but at most " + std::to_string(kMaxCores) +
                          " cores can be simulated; fold them onto fewer cores with --cores N");
      }
      if (Status st = hier.add_core(core); !st) return st;
    }
    hier.access(core, a.addr, a.size, a.write);
    return Ok{};
  });
  if (!read) return fail(read.error());
  if (!o.cores_given) knobs.cores = std::max<uint32_t>(1, threads.count());

  SimReport report;
  report.trace = o.trace;
  report.threads = threads.count();
  report.geometry = o.geometry;
  report.knobs = knobs;
  report.counters = hier.counters();
  std::ostringstream text;
  if (o.json) {
    write_sim_report_json(text, report);
  } else {
    write_sim_report_text(text, report);
  }

  if (!o.output.empty()) {
    if (Status st = write_file_atomically(o.output, text.view()); !st) return fail(st.error());
    return 0;
  }
  out << text.view();
  out.flush();
  if (!out) return fail("cannot write the report to standard output");
  return 0;
}

int simulate_main(int argc, char** argv, std::ostream& out, std::ostream& err) {
  return simulate_main(argc, argv, std::cin, out, err);
}

}  // namespace whymiss::cli
