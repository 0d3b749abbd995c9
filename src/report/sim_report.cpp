#include "report/sim_report.h"

#include <cstdio>
#include <string_view>

#include "model/profile.h"
#include "report/json.h"

namespace whymiss {
namespace {

using sim::Outcome;

constexpr Outcome kMissKinds[] = {Outcome::Compulsory, Outcome::Capacity, Outcome::Conflict,
                                  Outcome::TrueSharing, Outcome::FalseSharing};
constexpr const char* kMissKindLabels[] = {"compulsory", "capacity", "conflict", "true sharing",
                                           "false sharing"};

// 1234567 -> "1,234,567".
std::string grouped(uint64_t v) {
  std::string digits = std::to_string(v);
  std::string s;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) s += ',';
    s += digits[i];
  }
  return s;
}

std::string right(std::string_view s, size_t width) {
  std::string r;
  if (s.size() < width) r.assign(width - s.size(), ' ');
  r += s;
  return r;
}

std::string left(std::string_view s, size_t width) {
  std::string r(s);
  if (r.size() < width) r.append(width - r.size(), ' ');
  return r;
}

std::string percent(uint64_t part, uint64_t whole) {
  if (whole == 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f%%", 100.0 * static_cast<double>(part) / whole);
  return buf;
}

double ratio(uint64_t part, uint64_t whole) {
  return whole == 0 ? 0.0 : static_cast<double>(part) / static_cast<double>(whole);
}

bool is_shared(const CacheGeometry& g, size_t i) {
  return g.levels.size() >= 2 && i + 1 == g.levels.size();
}

// "L1 and L2", "L1, L2 and L3".
std::string join_names(const CacheGeometry& g, size_t first, size_t last) {
  std::string s;
  for (size_t i = first; i < last; ++i) {
    if (i > first) s += (i + 1 == last) ? " and " : ", ";
    s += g.levels[i].name;
  }
  return s;
}

std::string describe_source(const std::string& source) {
  if (source == "sysfs") return "detected from sysfs";
  if (source == "cpuid") return "detected by cpuid";
  if (source == "--cache") return "given by --cache";
  if (source == "default") return "built-in default; not detected";
  if (source.rfind("default, ", 0) == 0) return "built-in " + source;  // with detection's failure
  return "source: " + (source.empty() ? std::string("unknown") : source);
}

}  // namespace

void write_sim_report_text(std::ostream& out, const SimReport& r) {
  const CacheGeometry& g = r.geometry;
  const sim::Counters& c = r.counters;
  const size_t n = g.levels.size();
  const uint32_t cores = r.knobs.cores;

  // Standard input is "<stdin>" here as in error sentences (the JSON keeps the argument, "-").
  out << "whymiss simulate: " << (r.trace == "-" ? profile::kStdinName : r.trace) << ": " << grouped(c.accesses) << " accesses ("
      << grouped(c.line_accesses) << " line accesses), " << grouped(r.threads)
      << (r.threads == 1 ? " thread\n" : " threads\n");

  out << "cache: ";
  for (size_t i = 0; i < n; ++i) {
    const LevelGeometry& lv = g.levels[i];
    out << lv.name << ' ' << format_size(lv.size) << ' ' << lv.ways << "-way, ";
  }
  out << g.line() << "-byte lines (" << describe_source(g.source) << ")\n";
  if (std::string note = indexing_note(g); !note.empty()) out << "cache note: " << note << "\n";

  out << "simulated: " << cores << (cores == 1 ? " core with" : " cores, each with") << " private "
      << join_names(g, 0, n >= 2 ? n - 1 : n);
  if (n >= 2) {
    out << "; shared " << (r.knobs.inclusive_llc ? "inclusive " : "non-inclusive ")
        << g.levels[n - 1].name;
  }
  out << "; " << sim::policy_name(r.knobs.policy) << " replacement; MESI\n";
  out << "Every number below is COUNTED by exact simulation of every access (not sampled).\n\n";

  // Accesses, hits, misses per level.
  constexpr size_t kLabel = 10, kNum = 16;
  out << left("level", kLabel) << right("accesses", kNum) << right("hits", kNum)
      << right("misses", kNum) << right("miss ratio", 12) << '\n';
  for (size_t i = 0; i < n; ++i) {
    const sim::LevelCounters& lc = c.level[i];
    out << left(g.levels[i].name, kLabel) << right(grouped(lc.accesses()), kNum)
        << right(grouped(lc.hits()), kNum) << right(grouped(lc.misses()), kNum)
        << right(percent(lc.misses(), lc.accesses()), 12) << '\n';
  }

  // Misses by kind: one column per kind, read/write/total rows per level.
  constexpr size_t kKind = 16;
  out << '\n' << left("misses by kind", 16);
  for (const char* label : kMissKindLabels) out << right(label, kKind);
  out << '\n';
  for (size_t i = 0; i < n; ++i) {
    const sim::LevelCounters& lc = c.level[i];
    static const char* const kRows[] = {"read", "write", "total"};
    for (int row = 0; row < 3; ++row) {
      out << left(row == 0 ? g.levels[i].name : "", 6) << left(kRows[row], 10);
      for (Outcome o : kMissKinds) {
        uint64_t v = row < 2 ? lc.by_outcome[int(o)][row] : lc.misses_of(o);
        out << right(grouped(v), kKind);
      }
      out << '\n';
    }
  }

  // Traffic that is not a miss of this level's own accesses.
  out << '\n'
      << left("level", kLabel) << right("writebacks", kNum) << right("upgrades", kNum)
      << right("coherence invalidations", 26) << right("back-invalidations", 21) << '\n';
  for (size_t i = 0; i < n; ++i) {
    const sim::LevelCounters& lc = c.level[i];
    out << left(g.levels[i].name, kLabel) << right(grouped(lc.writebacks), kNum)
        << right(grouped(lc.upgrades), kNum) << right(grouped(lc.coherence_invalidations), 26)
        << right(grouped(lc.back_invalidations), 21) << '\n';
  }

  out << "\ncompulsory: first touch of the line. capacity: would miss even if fully associative.\n"
         "conflict: lost only because its set was full. true sharing: another core wrote bytes\n"
         "this core uses. false sharing: another core wrote only other bytes of the line.\n";
}

// Schema (schema_version 1):
// {"tool":"whymiss","command":"simulate","schema_version":1,"how":"counted","trace":S,
//  "threads":N,
//  "cache":{"source":S,"spec":S,"levels":[{"name","size","ways","line","sets","shared"}]},
//  "cores":N,"policy":S,"inclusive_llc":B,
//  "totals":{"accesses":N,"line_accesses":N,"levels":[{"name","accesses","hits","misses",
//    "miss_ratio","misses_by_kind":{KIND:{"read","write","total"}},"writebacks","upgrades",
//    "coherence_invalidations","back_invalidations"}]}}
// KIND is compulsory, capacity, conflict, true_sharing, false_sharing. miss_ratio is 0 for a
// level with no accesses.
void write_sim_report_json(std::ostream& out, const SimReport& r) {
  const CacheGeometry& g = r.geometry;
  const sim::Counters& c = r.counters;
  JsonWriter w(out);
  w.begin_object();
  w.field("tool", "whymiss").field("command", "simulate");
  w.field("schema_version", kSimReportSchemaVersion).field("how", "counted");
  w.field("trace", r.trace).field("threads", r.threads);

  w.key("cache").begin_object();
  w.field("source", g.source).field("spec", g.to_spec());
  w.key("levels").begin_array();
  for (size_t i = 0; i < g.levels.size(); ++i) {
    const LevelGeometry& lv = g.levels[i];
    w.begin_object();
    w.field("name", lv.name).field("size", lv.size).field("ways", lv.ways);
    w.field("line", lv.line).field("sets", lv.sets()).field("shared", is_shared(g, i));
    w.end_object();
  }
  w.end_array().end_object();

  w.field("cores", r.knobs.cores).field("policy", sim::policy_name(r.knobs.policy));
  w.field("inclusive_llc", r.knobs.inclusive_llc);

  w.key("totals").begin_object();
  w.field("accesses", c.accesses).field("line_accesses", c.line_accesses);
  w.key("levels").begin_array();
  for (size_t i = 0; i < g.levels.size(); ++i) {
    const sim::LevelCounters& lc = c.level[i];
    w.begin_object();
    w.field("name", g.levels[i].name);
    w.field("accesses", lc.accesses()).field("hits", lc.hits()).field("misses", lc.misses());
    w.field("miss_ratio", ratio(lc.misses(), lc.accesses()), 6);
    w.key("misses_by_kind").begin_object();
    for (Outcome o : kMissKinds) {
      w.key(sim::outcome_name(o)).begin_object();
      w.field("read", lc.by_outcome[int(o)][0]).field("write", lc.by_outcome[int(o)][1]);
      w.field("total", lc.misses_of(o));
      w.end_object();
    }
    w.end_object();
    w.field("writebacks", lc.writebacks).field("upgrades", lc.upgrades);
    w.field("coherence_invalidations", lc.coherence_invalidations);
    w.field("back_invalidations", lc.back_invalidations);
    w.end_object();
  }
  w.end_array().end_object();
  w.end_object();
}

}  // namespace whymiss
