#include "report/whatif.h"

#include <algorithm>

#include "analysis/data_types.h"
#include "report/common.h"
#include "report/html_page.h"

namespace whymiss::report {
namespace {

std::string site_text(const profile::Profile& p, uint32_t site, Namer& n) {
  if (site >= p.sites.size()) return "an unknown site";
  const CodeLoc c = n.site(p.sites[site]);
  return c.file.empty() ? hex(p.sites[site].frames[0]) : c.file + ":" + std::to_string(c.line);
}

// A thread's fields for text: the first few by offset, then how many more.
std::string fields_text(const std::vector<std::string>& names) {
  constexpr size_t kShown = 4;
  std::string out;
  for (size_t i = 0; i < names.size() && i < kShown; ++i) out += (i ? ", " : "") + printable(names[i]);
  if (names.size() > kShown) out += " and " + std::to_string(names.size() - kShown) + " more";
  return out;
}

}  // namespace

analysis::Predictions predictions(const profile::Profile& p, const std::vector<analysis::Finding>& findings,
                                  Namer& n, analysis::TypeOracle& types, size_t max_findings) {
  std::vector<analysis::Finding> fs(findings.begin(), findings.begin() + std::min(findings.size(), max_findings));
  for (auto& f : fs)
    for (auto& o : f.objects)
      if (!o.heap && o.size == 0 && o.sample_addr)
        if (auto g = n.global(o.sample_addr)) {
          o.start = g->start;
          o.size = g->size;
        }
  analysis::PredictKnobs k;
  k.max_findings = std::min(max_findings, k.max_findings);
  analysis::Predictions pr = analysis::predict(p, fs, k);
  analysis::name_latent_fields(pr, p, types);
  return pr;
}

void json_predicted_fix(JsonWriter& w, const profile::Profile& p, const analysis::PredictedFix& fx) {
  if (!fx.available) return;
  w.key("predicted_fix").begin_object().field("what", fx.what).field("how", fx.how);
  w.field("level", p.geometry.levels[size_t(fx.level)].name);
  w.field("misses_before", fx.misses_before).field("misses_after", fx.misses_after);
  w.field("kind_misses_before", fx.kind_before).field("kind_misses_after", fx.kind_after);
  if (fx.cache_size) w.field("cache_size", fx.cache_size);
  w.end_object();
}

void json_latent(JsonWriter& w, const profile::Profile& p, const analysis::Predictions& pr, Namer& n) {
  if (!pr.have_log) return;
  w.key("latent_false_sharing").begin_array();
  for (const auto& l : pr.latent) {
    w.begin_object();
    w.key("object").begin_object().field("address", hex(l.start)).field("size", l.size);
    w.field("alloc_site", site_text(p, l.site, n)).field("alloc_thread", l.alloc_thread).end_object();
    w.field("trigger", l.trigger).field("offset", l.offset).field("line", l.line);
    w.field("predicted_misses", l.predicted_misses).field("today_misses", l.today_misses);
    w.field("how", pr.log_how + ", the object's accesses alone, in the recorded interleaving");
    if (!l.type.empty()) w.field("type", l.type);
    w.key("threads").begin_array();
    for (uint32_t t : l.threads) w.value(t);
    w.end_array().key("bytes").begin_array();
    for (const auto& b : l.bytes) w.value(b);
    w.end_array();
    if (!l.fields.empty()) {
      w.key("fields").begin_array();
      for (const auto& names : l.fields) {
        w.begin_array();
        for (const auto& f : names) w.value(f);
        w.end_array();
      }
      w.end_array();
    }
    w.end_object();
  }
  w.end_array();
}

void text_predicted_fix(std::ostream& out, const profile::Profile& p, const analysis::PredictedFix& fx) {
  if (!fx.available) return;
  const std::string l1 = p.geometry.levels[size_t(fx.level)].name;
  out << "   fix predicted: " << fx.what << ": " << thousands(fx.misses_before) << " -> "
      << thousands(fx.misses_after) << " " << l1 << " misses [" << fx.how << "]\n";
}

void text_latent(std::ostream& out, const profile::Profile& p, const analysis::Predictions& pr, Namer& n) {
  if (pr.latent.empty()) return;
  out << "\nLatent false sharing (predicted at other placements, well above today's) [" << pr.log_how
      << ", each object's accesses alone, in the recorded interleaving]:\n";
  // One entry per object: its threads' bytes, then each placement that shares a line.
  for (size_t i = 0; i < pr.latent.size();) {
    const auto& l = pr.latent[i];
    out << "   heap object of " << l.size << " bytes" << (l.type.empty() ? "" : " (" + printable(l.type) + ")")
        << " at " << hex(l.start) << " (allocated at " << site_text(p, l.site, n) << " by thread "
        << l.alloc_thread << "):\n";
    // One line per thread: its bytes of the object, and the fields they are when known.
    for (size_t t = 0; t < l.threads.size(); ++t) {
      out << "      thread " << l.threads[t] << " "
          << (l.bytes[t].empty() ? std::string("(only bytes past the first 64 KiB)") : l.bytes[t]);
      if (t < l.fields.size() && !l.fields[t].empty()) out << " (" << fields_text(l.fields[t]) << ")";
      out << "\n";
    }
    out << "      false-sharing misses today " << thousands(l.today_misses) << "; predicted:";
    for (; i < pr.latent.size() && pr.latent[i].serial == l.serial; ++i) {
      const auto& c = pr.latent[i];
      out << " " << c.trigger;
      if (c.line == 128) out << (c.offset ? " (object 64 bytes further)" : " (today's placement)");
      out << " " << thousands(c.predicted_misses) << ";";
    }
    out << "\n";
  }
}

std::string html_predicted_fix(const profile::Profile& p, const analysis::PredictedFix& fx) {
  if (!fx.available) return "";
  const std::string level = p.geometry.levels[size_t(fx.level)].name;
  return "Predicted: " + html::text(fx.what) + ": " + thousands(fx.misses_before) + " &rarr; " +
         thousands(fx.misses_after) + " " + html::text(level) + " misses [" + html::text(fx.how) + "]";
}

void html_latent(std::ostringstream& s, const profile::Profile& p, const analysis::Predictions& pr, Namer& n) {
  s << "<p class=\"muted\">Heap objects whose threads would falsely share a line at another placement or "
       "with 128-byte lines, well above today [" << html::text(pr.log_how)
    << ", each object's accesses alone, in the recorded interleaving].</p>\n";
  for (size_t i = 0; i < pr.latent.size();) {
    const auto& l = pr.latent[i];
    s << "<article class=\"finding\"><h3>Heap object of " << l.size << " bytes"
      << (l.type.empty() ? std::string() : " (" + html::text(l.type) + ")") << " at <span class=\"mono\">"
      << hex(l.start) << "</span></h3>\n<p>Allocated at " << html::text(site_text(p, l.site, n)) << " by thread "
      << l.alloc_thread << ".</p>\n<table>\n<tr><th>thread</th><th>bytes</th><th>fields</th></tr>\n";
    for (size_t t = 0; t < l.threads.size(); ++t) {
      s << "<tr><td>" << l.threads[t] << "</td><td>"
        << (l.bytes[t].empty() ? std::string("(only bytes past the first 64 KiB)") : html::text(l.bytes[t]))
        << "</td><td>" << (t < l.fields.size() ? html::text(fields_text(l.fields[t])) : std::string()) << "</td></tr>\n";
    }
    s << "</table>\n<table>\n<tr><th>placement</th><th class=\"num\">false-sharing misses</th></tr>\n"
      << "<tr><td>today</td><td class=\"num\">" << thousands(l.today_misses) << "</td></tr>\n";
    for (; i < pr.latent.size() && pr.latent[i].serial == l.serial; ++i) {
      const auto& c = pr.latent[i];
      s << "<tr><td>" << html::text(c.trigger);
      if (c.line == 128) s << (c.offset ? " (object 64 bytes further)" : " (today's placement)");
      s << "</td><td class=\"num\">" << thousands(c.predicted_misses) << "</td></tr>\n";
    }
    s << "</table>\n</article>\n";
  }
}

}  // namespace whymiss::report
