#include "report/sampled.h"

#include <cmath>
#include <cstdio>

#include "analysis/estimate.h"

namespace whymiss::report::sampled {
namespace {

using profile::Mode;
const char* kDiscardNames[profile::kDiscardReasons] = {"not a memory instruction", "address clobbered",
                                                        "not decodable", "inside whymiss",
                                                        "buffer full"};
const char* kDiscardKeys[profile::kDiscardReasons] = {"not_memory", "clobbered", "no_decode", "in_runtime",
                                                       "buffer_full"};

std::string thousands(uint64_t v) {
  std::string s = std::to_string(v);
  for (int i = int(s.size()) - 3; i > 0; i -= 3) s.insert(size_t(i), ",");
  return s;
}

// "1 window", "2 windows", "1,024 captures".
std::string counted(uint64_t n, const char* noun) {
  const std::string w(noun);
  return thousands(n) + " " + w + (n == 1 ? "" : w.back() == 's' ? "es" : "s");
}

const char* source_name(uint32_t s) {
  switch (profile::SampleSource(s)) {
    case profile::SampleSource::TaskClock: return "task-clock";
    case profile::SampleSource::Pebs: return "pebs";
    case profile::SampleSource::Ibs: return "ibs";
    case profile::SampleSource::None: break;
  }
  return "none";
}

const char* backend_name(uint32_t b) {
  switch (profile::CaptureBackend(b)) {
    case profile::CaptureBackend::HwBreakpoint: return "hardware breakpoints";
    case profile::CaptureBackend::Int3: return "int3 breakpoints";
    case profile::CaptureBackend::Trace: return "trace windows (trap-flag single-stepping)";
    case profile::CaptureBackend::None: break;
  }
  return "none";
}

uint64_t level_total(const profile::CounterRecord& c, int from) {
  uint64_t n = 0;
  for (int k = from; k < profile::kKinds; ++k) n += c.by_kind[k][0] + c.by_kind[k][1];
  return n;
}

uint64_t kept_samples(const profile::Profile& p) { return p.samples.size(); }

}  // namespace

bool is_sampled(const profile::Profile& p) { return p.meta.mode != uint32_t(Mode::Exact); }

std::string how(const profile::Profile& p) {
  if (p.meta.mode == uint32_t(Mode::Exact)) return "counted";
  if (analysis::uses_traces(p)) return "accesses traced, misses counted by replay";
  if (p.meta.mode == uint32_t(Mode::Soft)) return "accesses sampled, misses modelled";
  return "sampled";
}

std::string approx(double v) {
  if (v < 0.5) return "0";
  const double mag = std::pow(10.0, std::floor(std::log10(v)) - 1);
  const double r = mag >= 1 ? std::round(v / mag) * mag : std::round(v);
  return "~" + thousands(uint64_t(r));
}

std::string approx_pct(double f) {
  if (f <= 0) return "0%";
  if (f < 0.01) return "<1%";
  return "~" + std::to_string(int(std::lround(100 * f))) + "%";
}

const char* confidence(const profile::Profile& p, const analysis::Finding& f) {
  const analysis::Support s = analysis::support(p, f);
  const bool sharing = f.kind == analysis::Kind::FalseSharing || f.kind == analysis::Kind::TrueSharing;
  // Capacity vs conflict needs an access pattern (windows) unless the PMU gave the misses.
  if (analysis::uses_traces(p)) {
    // Every access of the windows was seen; what limits trust is how much of the run they cover.
    const analysis::TraceSummary t = analysis::trace_summary(p);
    if (s.traced >= 1000 && t.epochs >= 3) return "high";
    if (s.traced >= 200) return "medium";
    return "low";
  }
  const bool pattern = sharing || s.captures >= 64;
  if (s.samples >= 1000 && pattern) return "high";
  if (s.samples >= 100 && (pattern || p.meta.mode == uint32_t(Mode::Pmu))) return "medium";
  return "low";
}

void text_header(std::ostream& out, const profile::Profile& p) {
  const bool pmu = p.meta.mode == uint32_t(Mode::Pmu);
  out << "samples: " << thousands(kept_samples(p)) << " kept (" << source_name(p.meta.sample_source);
  if (p.meta.sample_period_ns) {
    char b[64];
    if (pmu) std::snprintf(b, sizeof b, ", one per ~%s events", approx(double(p.meta.sample_period_ns)).c_str() + 1);
    else std::snprintf(b, sizeof b, ", one per %.0f us of each thread's CPU time", double(p.meta.sample_period_ns) / 1000);
    out << b;
  }
  out << ")";
  uint64_t dropped = 0;
  for (uint64_t d : p.meta.discarded) dropped += d;
  if (dropped) {
    out << ", " << thousands(dropped) << " discarded (";
    bool first = true;
    for (int r = 0; r < profile::kDiscardReasons; ++r) {
      if (!p.meta.discarded[r]) continue;
      out << (first ? "" : ", ") << kDiscardNames[r] << " " << thousands(p.meta.discarded[r]);
      first = false;
    }
    out << ")";
  }
  if (p.meta.capture_backend == uint32_t(profile::CaptureBackend::Trace)) {
    const analysis::TraceSummary t = analysis::trace_summary(p);
    out << "\ntrace windows: " << counted(t.epochs, "epoch") << ", " << counted(t.windows, "thread window")
        << ", " << thousands(t.steps) << " instructions stepped, " << counted(t.accesses, "access") << " recorded";
    if (t.overlap >= 0)
      out << "; threads stepped at the same time " << std::lround(t.overlap * 100) << "% of the traced time";
    if (t.paired_epochs)
      out << "\n  (" << counted(t.paired_epochs, "epoch")
          << " traced one thread each and were replayed in pairs, as if their threads had run at once)";
    if (t.native_acquisitions || t.traced_acquisitions) {
      char b[400];
      auto share = [](double x) {
        if (x < 0) return std::string("-");
        char v[32];
        std::snprintf(v, sizeof v, x < 0.01 ? "%.2g%%" : "%.1f%%", x * 100);
        return std::string(v);
      };
      auto pc = [&](uint64_t h, uint64_t n) { return n ? " (" + share(double(h) / double(n)) + ")" : std::string(); };
      std::snprintf(b, sizeof b,
                    "\n  mutexes changed hands in %s of %s acquisitions in accounting periods outside the windows%s, %s of %s "
                    "in them%s (counted by the runtime's pthread mutex hooks)",
                    thousands(t.native_handovers).c_str(), thousands(t.native_acquisitions).c_str(),
                    pc(t.native_handovers, t.native_acquisitions).c_str(), thousands(t.traced_handovers).c_str(),
                    thousands(t.traced_acquisitions).c_str(), pc(t.traced_handovers, t.traced_acquisitions).c_str());
      out << b;
      if (analysis::uses_traces(p) && t.lock_weight >= 0 && t.lock_weight < 1)
        out << ": coherence misses between critical sections of one mutex count " << share(t.lock_weight)
            << " (stepping lets a contended lock change hands more often than it does outside them)";
    }
    if (!analysis::uses_traces(p))
      out << "\n  (too few traced accesses to count from: a longer run gives more windows; misses modelled from samples)";
    out << "\n";
    return;
  }
  out << "\ncapture stage: ";
  if (p.meta.capture_backend == uint32_t(profile::CaptureBackend::None) && p.windows.empty()) out << "off";
  else out << backend_name(p.meta.capture_backend) << ", " << counted(p.windows.size(), "window") << ", "
           << counted(p.captures.size(), "capture");
  out << "\n";
}

void text_levels(std::ostream& out, const profile::Profile& p) {
  char b[256];
  const bool traced = analysis::uses_traces(p);
  std::snprintf(b, sizeof b, "%-5s %10s %12s %7s %11s %10s %10s %9s %9s\n", "level", traced ? "accesses" : "samples", "misses",
                "ratio", "compulsory", "capacity", "conflict", "true-sh", "false-sh");
  out << b;
  for (size_t l = 0; l < p.counters.size(); ++l) {
    const auto& c = p.counters[l];
    const uint64_t acc = level_total(c, 0), miss = level_total(c, 1);
    auto share = [&](int k) {
      return miss ? approx_pct(double(c.by_kind[k][0] + c.by_kind[k][1]) / double(miss)) : std::string("-");
    };
    std::snprintf(b, sizeof b, "%-5s %10s %12s %7s %11s %10s %10s %9s %9s\n", p.geometry.levels[l].name.c_str(),
                  thousands(acc).c_str(), approx(double(miss)).c_str(),
                  acc ? approx_pct(double(miss) / double(acc)).c_str() : "-", share(1).c_str(), share(2).c_str(),
                  share(3).c_str(), share(4).c_str(), share(5).c_str());
    out << b;
  }
  out << (traced ? "(accesses and misses in traced accesses; kinds as shares of each level's misses)\n"
                 : "(samples and misses in samples; kinds as shares of each level's misses)\n");
}

std::string text_finding_head(const profile::Profile& p, const analysis::Finding& f) {
  const std::string& lname = p.geometry.levels[size_t(f.level)].name;
  if (analysis::uses_traces(p)) {
    const uint64_t n = p.trace_accesses.size();
    return approx_pct(f.share) + " of " + lname + " misses, in " +
           approx_pct(n ? double(f.misses) / double(n) : 0) + " of traced accesses [" + how(p) + "]";
  }
  const uint64_t samples = p.samples.size();
  return approx_pct(f.share) + " of " + lname + " misses, in " +
         approx_pct(samples ? double(f.misses) / double(samples) : 0) + " of samples [" + how(p) + "]";
}

std::string text_support(const profile::Profile& p, const analysis::Finding& f) {
  const analysis::Support s = analysis::support(p, f);
  if (analysis::uses_traces(p))
    return std::string(confidence(p, f)) + " confidence: " + counted(s.traced, "traced access") + ", " +
           counted(s.samples, "sample") + "; " + analysis::provenance(p, f);
  return std::string(confidence(p, f)) + " confidence: " + counted(s.samples, "sample") + ", " +
         counted(s.windows, "window") + ", " + counted(s.captures, "capture") + "; " +
         analysis::provenance(p, f);
}

void json_sampling(JsonWriter& w, const profile::Profile& p) {
  w.key("sampling").begin_object();
  w.field("source", source_name(p.meta.sample_source)).field("samples", uint64_t(kept_samples(p)));
  w.field("samples_taken", p.meta.samples);
  if (p.meta.mode == uint32_t(Mode::Pmu)) w.field("period_events", p.meta.sample_period_ns);
  else w.field("period_ns", p.meta.sample_period_ns);
  w.key("discarded").begin_object();
  for (int r = 0; r < profile::kDiscardReasons; ++r) w.field(kDiscardKeys[r], p.meta.discarded[r]);
  w.end_object();
  w.key("capture").begin_object().field("backend", backend_name(p.meta.capture_backend));
  w.field("windows", uint64_t(p.windows.size())).field("captures", uint64_t(p.captures.size())).end_object();
  if (p.meta.capture_backend == uint32_t(profile::CaptureBackend::Trace)) {
    const analysis::TraceSummary t = analysis::trace_summary(p);
    w.key("trace").begin_object().field("epochs", t.epochs).field("windows", t.windows);
    w.field("steps", t.steps).field("accesses", t.accesses).field("threads", t.threads);
    if (t.overlap >= 0) w.field("overlap", t.overlap);
    w.field("paired_epochs", t.paired_epochs);
    if (t.native_acquisitions || t.traced_acquisitions) {
      w.key("locks").begin_object();
      w.field("native_acquisitions", t.native_acquisitions).field("traced_acquisitions", t.traced_acquisitions);
      w.field("native_handovers", t.native_handovers).field("traced_handovers", t.traced_handovers);
      if (t.native_handover_share >= 0) w.field("native_handover_share", t.native_handover_share);
      if (t.traced_handover_share >= 0) w.field("traced_handover_share", t.traced_handover_share);
      w.field("untracked_acquisitions", t.untracked_acquisitions);
      if (analysis::uses_traces(p) && t.lock_weight >= 0 && t.lock_weight < 1) w.field("weight", t.lock_weight);
      w.field("how", "pthread mutex acquisitions and hand-overs counted by the runtime's hooks, outside the "
                     "windows (native) and in them (traced); the weight, when given, was applied to coherence "
                     "misses between critical sections of one mutex replayed from the windows").end_object();
    }
    w.field("counts_from_traces", analysis::uses_traces(p)).end_object();
  }
  w.field("unit", analysis::uses_traces(p) ? "traced accesses" : "samples");
  w.end_object();
}

void json_support(JsonWriter& w, const profile::Profile& p, const analysis::Finding& f) {
  const analysis::Support s = analysis::support(p, f);
  w.key("support").begin_object().field("samples", s.samples).field("windows", s.windows);
  if (analysis::uses_traces(p)) w.field("traced_accesses", s.traced);
  w.field("captures", s.captures).field("confidence", confidence(p, f)).end_object();
  w.field("provenance", analysis::provenance(p, f));
}

}  // namespace whymiss::report::sampled
