#include "report/report.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>

#include "analysis/estimate.h"
#include "report/common.h"
#include "report/json.h"
#include "report/mrc.h"
#include "report/whatif.h"
#include "report/sampled.h"
#include "report/unseen.h"

namespace whymiss::report {
namespace {

using analysis::Finding;
const char* kKindNames[profile::kKinds] = {"hit", "compulsory", "capacity", "conflict",
                                           "true_sharing", "false_sharing"};


}  // namespace

// Bytes a terminal would act on (C0 controls, DEL, C1 controls in UTF-8 or as raw bytes, and
// bytes that are not UTF-8) become \n, \t, \e or \xHH; a backslash is doubled so that the
// escapes stay unambiguous. Valid UTF-8 text passes unchanged.
std::string printable(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  auto escape = [&](unsigned char c) {
    static const char kHex[] = "0123456789abcdef";
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == 0x1b) out += "\\e";
    else out += {'\\', 'x', kHex[c >> 4], kHex[c & 15]};
  };
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) {
      escape(c);
      ++i;
      continue;
    }
    if (c == '\\') {
      out += "\\\\";
      ++i;
      continue;
    }
    if (c < 0x80) {
      out += char(c);
      ++i;
      continue;
    }
    // A UTF-8 sequence: its length from the lead byte, continuation bytes checked.
    const size_t len = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
    bool ok = len != 0 && i + len <= s.size();
    for (size_t k = 1; ok && k < len; ++k) ok = (static_cast<unsigned char>(s[i + k]) & 0xc0) == 0x80;
    const bool c1 = ok && c == 0xc2 && static_cast<unsigned char>(s[i + 1]) < 0xa0;  // U+0080..U+009F
    if (!ok || c1) {
      for (size_t k = 0; k < (ok ? len : 1); ++k) escape(static_cast<unsigned char>(s[i + k]));
      i += ok ? len : 1;
      continue;
    }
    out.append(s.substr(i, len));
    i += len;
  }
  return out;
}

namespace {


uint64_t sum_kind(const profile::CounterRecord& c, int k) { return c.by_kind[k][0] + c.by_kind[k][1]; }
uint64_t accesses(const profile::CounterRecord& c) {
  uint64_t n = 0;
  for (int k = 0; k < profile::kKinds; ++k) n += sum_kind(c, k);
  return n;
}

std::string how(const profile::Profile& p) { return sampled::how(p); }

void json_collector_notes(JsonWriter& w, const profile::Profile& p) {
  if (p.notes.empty()) return;
  w.key("collector_notes").begin_array();
  for (const auto& n : p.notes)
    w.begin_object().field("severity", n.severity ? "warning" : "info").field("text", n.text).end_object();
  w.end_array();
}

void json_loc(JsonWriter& w, const CodeLoc& c) {
  w.field("function", c.function).field("file", c.file).field("line", c.line);
}

// The out-of-line function's line, and the whole inline chain as "frames", innermost first.
void json_chain(JsonWriter& w, const std::vector<CodeLoc>& chain) {
  json_loc(w, chain.back());
  w.key("frames").begin_array();
  for (const CodeLoc& c : chain) {
    w.begin_object();
    json_loc(w, c);
    w.end_object();
  }
  w.end_array();
}

void write_json(std::ostream& out, const profile::Profile& p, const analysis::Analysis& a,
                Namer& n, analysis::TypeOracle& types, const Options& o) {
  JsonWriter w(out);
  w.begin_object();
  w.field("tool", "whymiss").field("schema_version", 1).field("mode", mode_name(p.meta.mode));
  w.field("how", how(p));
  unseen::json(w, a.unseen);  // first: it qualifies every count below
  w.field("command", p.command);
  w.key("exit").begin_object();
  if (p.meta.exited) w.field("code", p.meta.exit_code); else w.key("code").null();
  w.field("signal", p.meta.term_signal).end_object();
  w.key("cache").begin_object().field("source", p.geometry_source).field("spec", p.geometry.to_spec());
  w.key("levels").begin_array();
  for (size_t l = 0; l < p.geometry.levels.size(); ++l) {
    const auto& g = p.geometry.levels[l];
    w.begin_object().field("name", g.name).field("size", g.size).field("ways", g.ways);
    w.field("line", g.line).field("sets", g.sets());
    w.field("shared", p.geometry.levels.size() >= 2 && l + 1 == p.geometry.levels.size());
    w.end_object();
  }
  w.end_array().end_object();
  w.field("threads", p.meta.threads_seen);
  if (p.meta.cores) w.field("cores", p.meta.cores); else w.field("cores", "one per thread");
  if (sampled::is_sampled(p)) sampled::json_sampling(w, p);
  json_collector_notes(w, p);
  w.key("totals").begin_object();
  if (analysis::uses_traces(p)) w.field("unit", "traced accesses").field("accesses", uint64_t(p.trace_accesses.size()));
  else if (sampled::is_sampled(p)) w.field("unit", "samples").field("accesses", uint64_t(p.samples.size()));
  else w.field("accesses", p.meta.accesses);
  w.field("dropped_accesses", p.meta.dropped_accesses).field("dropped_records", p.meta.dropped_records);
  w.key("levels").begin_array();
  for (size_t l = 0; l < p.counters.size(); ++l) {
    const auto& c = p.counters[l];
    uint64_t acc = accesses(c), hits = sum_kind(c, 0);
    w.begin_object().field("name", p.geometry.levels[l].name).field("accesses", acc);
    w.field("hits", hits).field("misses", acc - hits);
    w.key("misses_by_kind").begin_object();
    for (int k = 1; k < profile::kKinds; ++k) {
      w.key(kKindNames[k]).begin_object().field("read", c.by_kind[k][0]).field("write", c.by_kind[k][1]);
      w.field("total", sum_kind(c, k)).end_object();
    }
    w.end_object().end_object();
  }
  w.end_array().end_object();
  json_program_mrc(w, p);
  const analysis::Predictions pred = predictions(p, a.findings, n, types, o.max_findings);
  json_latent(w, p, pred, n);
  w.key("findings").begin_array();
  for (size_t i = 0; i < a.findings.size() && i < o.max_findings; ++i) {
    const Finding& f = a.findings[i];
    w.begin_object().field("kind", analysis::kind_name(f.kind));
    w.field("origin", analysis::origin_name(f.origin));
    w.field("level", p.geometry.levels[size_t(f.level)].name).field("misses", f.misses);
    w.field("share", f.share, 4).field("how", how(p));
    w.field("cost_cycles", f.cost, 0).field("cost_how", "modelled");
    if (f.kind == analysis::Kind::Capacity) {
      w.field("pattern", analysis::pattern_name(f.pattern));
      if (f.pattern == analysis::Pattern::Strided) w.field("stride_bytes", f.stride);
    }
    if (sampled::is_sampled(p)) sampled::json_support(w, p, f);
    w.key("instructions").begin_array();
    for (size_t j = 0; j < f.instructions.size() && j < o.max_instructions; ++j) {
      w.begin_object().field("ip", hex(f.instructions[j].ip));
      json_chain(w, n.chain(f.instructions[j].ip));
      w.field("misses", f.instructions[j].misses).end_object();
    }
    w.end_array();
    w.key("objects").begin_array();
    const std::vector<ObjectView> objects = object_views(f, p, n);
    for (size_t j = 0; j < objects.size() && j < o.max_objects; ++j) {
      const ObjectView& v = objects[j];
      w.begin_object();
      if (v.heap) {
        w.key("alloc_site").begin_object();
        json_loc(w, v.site);
        w.end_object().field("address", hex(v.start)).field("alloc_thread", v.alloc_thread);
        w.field("allocations", v.allocations);
      } else {
        w.field("name", v.name).field("address", hex(v.start));
      }
      w.field("size", v.size).key("threads").begin_array();
      for (uint32_t t : v.threads) w.value(t);
      w.end_array();
      if (v.l1_misses) w.field("l1_misses", *v.l1_misses); else w.key("l1_misses").null();
      w.end_object();
    }
    w.end_array();
    w.key("evidence").begin_object();
    for (const auto& e : f.evidence) {
      if (e.is_number) w.field(e.key, e.number, 0); else w.field(e.key, e.text);
    }
    if (!f.line_threads.empty()) {
      w.field("line", hex(f.line_addr));
      w.key("words_per_thread").begin_array();
      uint32_t g = std::max<uint32_t>(1, p.geometry.line() / 64);
      for (const auto& t : f.line_threads) {
        w.begin_object().field("thread", t.thread);
        w.field("read_bytes", t.read_mask ? analysis::byte_ranges(t.read_mask, g) : "none");
        w.field("write_bytes", t.write_mask ? analysis::byte_ranges(t.write_mask, g) : "none");
        w.end_object();
      }
      w.end_array();
    }
    w.end_object();
    json_finding_mrc(w, p, f);
    if (!f.data_type.empty()) w.field("type", f.data_type);
    if (!f.data_field.empty()) w.field("field", f.data_field);
    if (!f.data_type.empty() && !f.data_how.empty()) w.field("type_how", f.data_how);
    json_predicted_fix(w, p, pred.fixes[i]);
    w.field("suggestion", f.suggestion).end_object();
  }
  w.end_array();
  w.key("source_lines").begin_array();
  std::vector<SourceLine> lines = source_lines(p, n);
  for (size_t i = 0; i < lines.size() && i < o.max_source_lines; ++i) {
    const SourceLine& sl = lines[i];
    w.begin_object();
    json_chain(w, sl.chain);
    w.field("reads", sl.accesses[0]).field("writes", sl.accesses[1]);
    w.key("misses").begin_object();
    for (size_t l = 0; l < p.geometry.levels.size(); ++l) w.field(p.geometry.levels[l].name, sl.misses[l][0]);
    w.end_object().end_object();
  }
  w.end_array();
  w.key("notes").begin_array();
  for (const auto& s : a.notes) w.value(s);
  w.end_array();
  w.end_object();
  out << "\n";
}

std::string upper(std::string s) {
  for (char& c : s) c = c == '_' ? ' ' : char(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

void write_text(std::ostream& out, const profile::Profile& p, const analysis::Analysis& a,
                Namer& n, analysis::TypeOracle& types, const Options& o) {
  const bool exact = p.meta.mode == uint32_t(profile::Mode::Exact);
  out << "whymiss report: " << mode_name(p.meta.mode) << " mode — "
      << (exact ? "every instrumented access counted by simulating the cache hierarchy\n"
          : analysis::uses_traces(p)
              ? "accesses traced in windows, misses counted by replaying them (in units of traced accesses)\n"
          : p.meta.mode == uint32_t(profile::Mode::Soft)
              ? "accesses sampled, misses modelled (estimates in units of samples)\n"
              : "accesses and misses sampled (estimates in units of samples)\n");
  unseen::text_first(out, a.unseen);  // before anything it qualifies
  // Whatever the program's arguments hold (newlines, terminal escapes) cannot forge report lines.
  out << "program: " << printable(p.command);
  if (p.meta.exited) out << "  (exit " << p.meta.exit_code << ")";
  else if (p.meta.term_signal) out << "  (killed by signal " << p.meta.term_signal << ")";
  out << "\nthreads: " << p.meta.threads_seen;
  if (exact)
    out << ", simulated cores: " << (p.meta.cores ? std::to_string(p.meta.cores) : std::string("one per thread"));
  out << "\n";
  out << "cache: " << p.geometry.to_spec() << " (" << printable(p.geometry_source) << ")\n";
  if (std::string note = indexing_note(p.geometry); !note.empty()) out << "cache note: " << note << "\n";
  if (exact) {
    out << "accesses: " << thousands(p.meta.accesses) << " " << how(p);
    if (p.meta.dropped_accesses) out << ", " << thousands(p.meta.dropped_accesses) << " not recorded";
    out << "\n";
    unseen::text_header(out, a.unseen);
  } else {
    sampled::text_header(out, p);
  }
  for (const auto& n : p.notes) out << "collector " << (n.severity ? "warning" : "note") << ": " << printable(n.text) << "\n";
  out << "\n";
  char b[256];
  if (!exact) sampled::text_levels(out, p);
  if (exact) {
  std::snprintf(b, sizeof b, "%-5s %14s %12s %7s %11s %10s %10s %9s %9s\n", "level", "accesses",
                "misses", "ratio", "compulsory", "capacity", "conflict", "true-sh", "false-sh");
  out << b;
  for (size_t l = 0; l < p.counters.size(); ++l) {
    const auto& c = p.counters[l];
    uint64_t acc = accesses(c), miss = acc - sum_kind(c, 0);
    std::snprintf(b, sizeof b, "%-5s %14s %12s %7s %11s %10s %10s %9s %9s\n",
                  p.geometry.levels[l].name.c_str(), thousands(acc).c_str(), thousands(miss).c_str(),
                  acc ? pct(double(miss) / double(acc)).c_str() : "-", thousands(sum_kind(c, 1)).c_str(),
                  thousands(sum_kind(c, 2)).c_str(), thousands(sum_kind(c, 3)).c_str(),
                  thousands(sum_kind(c, 4)).c_str(), thousands(sum_kind(c, 5)).c_str());
    out << b;
  }
  }
  out << "\n";
  const analysis::Predictions pred = predictions(p, a.findings, n, types, o.max_findings);
  if (a.findings.empty()) out << "No significant cache problem found.\n";
  else out << "Findings, most costly first (cost = misses x modelled stall cycles):\n";
  for (size_t i = 0; i < a.findings.size() && i < o.max_findings; ++i) {
    const Finding& f = a.findings[i];
    out << "\n" << i + 1 << ". " << upper(analysis::kind_name(f.kind)) << " ("
        << analysis::origin_name(f.origin) << ") at " << p.geometry.levels[size_t(f.level)].name << ": ";
    if (exact)
      out << thousands(f.misses) << " misses, " << pct(f.share) << " of "
          << p.geometry.levels[size_t(f.level)].name << " misses [" << how(p) << "]\n";
    else
      out << sampled::text_finding_head(p, f) << "\n   support: " << sampled::text_support(p, f) << "\n";
    for (size_t j = 0; j < f.instructions.size() && j < o.max_instructions; ++j) {
      const auto& ins = f.instructions[j];
      out << "   code: " << where(n.chain(ins.ip)) << "  [" << hex(ins.ip) << ", "
          << (exact ? thousands(ins.misses) + " misses]\n"
                    : sampled::approx_pct(f.misses ? double(ins.misses) / double(f.misses) : 0) +
                          " of the finding's misses]\n");
    }
    const std::vector<ObjectView> objects = object_views(f, p, n);
    uint64_t object_misses = 0;
    for (const ObjectView& v : objects) object_misses += v.l1_misses.value_or(0);
    for (size_t j = 0; j < objects.size() && j < o.max_objects; ++j) {
      const ObjectView& v = objects[j];
      out << "   data: ";
      if (v.heap) {
        out << "heap object of " << v.size << " bytes at " << hex(v.start) << ", allocated "
            << (v.allocations > 1 ? std::to_string(v.allocations) + " times " : std::string())
            << "by thread " << v.alloc_thread << " at " << where(v.site);
      } else {
        out << printable(v.name);
        if (v.size) out << " (" << v.size << " bytes)";
      }
      if (!v.threads.empty()) {
        out << ", missed by threads";
        for (uint32_t t : v.threads) out << " " << t;
      }
      // Sampled profiles: the object's share of the listed objects' misses, rounded.
      const std::string what = p.geometry.levels[0].name + " " + finding_kind_words(f.kind) + " misses";
      if (v.l1_misses && exact) out << "  [" << thousands(*v.l1_misses) << " " << what << "]";
      else if (v.l1_misses && object_misses)
        out << "  [" << sampled::approx_pct(double(*v.l1_misses) / double(object_misses)) << " of the data's " << what << "]";
      out << "\n";
    }
    if (!f.line_threads.empty()) {
      uint32_t g = std::max<uint32_t>(1, p.geometry.line() / 64);
      out << "   line " << hex(f.line_addr) << (f.lines > 1 ? " (and " + std::to_string(f.lines - 1) + " more)" : "") << ":";
      for (const auto& t : f.line_threads) {
        out << " thread " << t.thread;
        if (t.write_mask) out << " writes " << analysis::byte_ranges(t.write_mask, g);
        if (t.read_mask) out << (t.write_mask ? "," : "") << " reads " << analysis::byte_ranges(t.read_mask, g);
        out << ";";
      }
      out << "\n";
    }
    std::ostringstream ev;
    for (const auto& e : f.evidence) {
      if (e.key == "false_sharing_misses" || e.key == "true_sharing_misses" || e.key == "misses_at_level") continue;
      // Modelled per-level counts would look more precise than they are.
      if (!exact && e.key.find("_capacity_conflict") != std::string::npos) continue;
      ev << (ev.tellp() ? "; " : "") << e.key << " " << e.text;
    }
    if (!f.data_type.empty()) {
      ev << (ev.tellp() ? "; " : "") << "type " << f.data_type;
      if (!f.data_field.empty()) ev << ", field " << f.data_field;
      if (!f.data_how.empty()) ev << " [" << f.data_how << "]";
    }
    if (ev.tellp()) out << "   evidence: " << ev.str() << "\n";
    out << "   fix: " << f.suggestion << "\n";
    text_predicted_fix(out, p, pred.fixes[i]);
  }
  text_latent(out, p, pred, n);
  text_program_mrc(out, p);
  std::vector<SourceLine> lines = source_lines(p, n);
  size_t shown = 0;
  for (const auto& sl : lines) shown += sl.misses[0][0] > 0;
  if (shown) {
    out << "\nSource lines by " << p.geometry.levels[0].name << " misses [" << how(p) << "]:\n";
    // One column per level: with three levels, L2 is as telling as L1 and L3.
    const size_t nlevels = p.geometry.levels.size();
    std::snprintf(b, sizeof b, "%14s", exact || analysis::uses_traces(p) ? "accesses" : "samples");
    out << b;
    for (size_t l = 0; l < nlevels; ++l) {
      std::snprintf(b, sizeof b, " %12s", p.geometry.levels[l].name.c_str());
      out << b;
    }
    out << "  line\n";
    for (size_t i = 0; i < lines.size() && i < o.max_text_lines && lines[i].misses[0][0]; ++i) {
      const SourceLine& sl = lines[i];
      const uint64_t acc = sl.accesses[0] + sl.accesses[1];
      std::snprintf(b, sizeof b, "%14s", thousands(acc).c_str());
      out << b;
      for (size_t l = 0; l < nlevels; ++l) {
        // Sampled profiles: miss ratios of the line's samples, rounded.
        const uint64_t m = sl.misses[l][0];
        std::snprintf(b, sizeof b, " %12s",
                      exact ? thousands(m).c_str() : sampled::approx_pct(acc ? double(m) / double(acc) : 0).c_str());
        out << b;
      }
      out << "  " << where(sl.chain) << "\n";
    }
  }
  for (const auto& s : a.notes) out << "\nnote: " << s << "\n";
}

}  // namespace

const char* mode_name(uint32_t mode) {
  switch (profile::Mode(mode)) {
    case profile::Mode::Exact: return "exact";
    case profile::Mode::Soft: return "soft";
    case profile::Mode::Pmu: return "pmu";
  }
  return "unknown";
}

void write_report(std::ostream& out, const profile::Profile& p, const analysis::Analysis& a,
                  Namer& names, analysis::TypeOracle& types, const Options& o) {
  if (o.format == Format::Json) write_json(out, p, a, names, types, o);
  else if (o.format == Format::Cachegrind) write_cachegrind(out, p, names);
  else if (o.format == Format::Html) write_html(out, p, a, names, types, o);
  else if (o.format == Format::Pprof) {
    if (!write_pprof(out, p, names)) out.setstate(std::ios::failbit);
  }
  else write_text(out, p, a, names, types, o);
}

}  // namespace whymiss::report
