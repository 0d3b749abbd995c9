#include "analysis/flow.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <unordered_map>

namespace whymiss::analysis {

const char* flow_kind_name(uint8_t kind) {
  switch (kind) {
    case profile::kFlowAlloc: return "alloc";
    case profile::kFlowRead: return "read";
    default: return "write";
  }
}

namespace {

FlowGroup flow_group(std::string type, uint32_t site) {
  FlowGroup g;
  g.type = std::move(type);
  g.site = site;
  return g;
}

using Key = std::tuple<uint32_t, uint32_t, uint8_t, uint32_t, uint8_t>;  // site, from, fk, to, tk

// The exact runtime's records, or the same replayed from samples.
struct Raw {
  Key key;
  profile::ObjectRecord example;  // for the oracle
  uint64_t handovers = 0, charged = 0;
};

std::vector<Raw> from_records(const profile::Profile& p) {
  std::vector<Raw> out;
  for (const auto& f : p.flows) {
    Raw r;
    r.key = {f.site, f.from, f.from_kind, f.to, f.to_kind};
    r.example.serial = f.example_serial;
    r.example.start = f.example_start;
    r.example.size = f.example_size;
    r.example.alloc_thread = f.example_alloc_thread;
    r.example.site = f.site;
    r.handovers = f.handovers;
    r.charged = f.misses;
    out.push_back(r);
  }
  return out;
}

std::vector<Raw> from_samples(const profile::Profile& p, uint64_t* objects) {
  std::unordered_map<uint64_t, const profile::ObjectRecord*> by_serial;
  for (const auto& o : p.objects) by_serial[o.serial] = &o;
  std::vector<const profile::SampleRecord*> order;
  for (const auto& s : p.samples)
    if (s.object != 0) order.push_back(&s);
  std::stable_sort(order.begin(), order.end(),
                   [](auto* a, auto* b) { return a->time_ns < b->time_ns; });
  struct Holder {
    uint32_t thread;
    uint8_t kind;
    Key edge;
    bool has_edge;
  };
  std::unordered_map<uint64_t, Holder> holder;
  std::map<Key, Raw> raw;
  for (const auto* s : order) {
    const uint8_t kind = (s->flags & profile::kAccessWrite) ? profile::kFlowWrite : profile::kFlowRead;
    auto it = holder.find(s->object);
    const auto obj = by_serial.find(s->object);
    const profile::ObjectRecord* o = obj == by_serial.end() ? nullptr : obj->second;
    const uint32_t site = o ? o->site : profile::kNoSite;
    if (it != holder.end() && it->second.thread == s->thread) {
      if (it->second.has_edge) raw[it->second.edge].charged++;
      continue;
    }
    Key k;
    bool has_edge = true;
    if (it == holder.end()) {
      ++*objects;
      // Its allocation is the first step when the object is known; otherwise the first sample
      // only says who holds it.
      if (o) k = {site, o->alloc_thread, profile::kFlowAlloc, s->thread, kind};
      else has_edge = false;
    } else {
      k = {site, it->second.thread, it->second.kind, s->thread, kind};
    }
    if (has_edge) {
      Raw& r = raw[k];
      r.key = k;
      if (o) r.example = *o;
      else r.example.site = site;
      r.handovers++;
      r.charged++;
    }
    holder[s->object] = Holder{s->thread, kind, k, has_edge};
  }
  std::vector<Raw> out;
  for (auto& [k, r] : raw) out.push_back(r);
  return out;
}

}  // namespace

Flow data_flow(const profile::Profile& p, TypeOracle& types) {
  Flow f;
  std::vector<Raw> raw;
  if (p.meta.mode == uint32_t(profile::Mode::Exact)) {
    if (p.flow_info.empty()) {
      f.unavailable = "the profile has no data-flow records (recorded with WHYMISS_FLOW=0, or by an "
                      "older whymiss)";
      return f;
    }
    raw = from_records(p);
    f.objects = p.flow_info[0].objects;
    f.dropped_handovers = p.flow_info[0].dropped_handovers;
    f.dropped_charged = p.flow_info[0].dropped_misses;
  } else {
    f.sampled = true;
    raw = from_samples(p, &f.objects);
    if (p.samples.empty()) {
      f.unavailable = "the profile has no samples to follow objects between threads with";
      return f;
    }
  }
  f.available = true;
  // Group by type when known, else by site.
  std::map<std::string, size_t> by_type;
  std::map<uint32_t, size_t> by_site;
  for (const Raw& r : raw) {
    const DataType* t = r.example.serial != 0 ? types.heap_type(p, r.example) : nullptr;
    size_t gi;
    if (t != nullptr) {
      auto [it, fresh] = by_type.try_emplace(t->name, f.groups.size());
      if (fresh) f.groups.push_back(flow_group(t->name, std::get<0>(r.key)));
      gi = it->second;
    } else {
      auto [it, fresh] = by_site.try_emplace(std::get<0>(r.key), f.groups.size());
      if (fresh) f.groups.push_back(flow_group("", std::get<0>(r.key)));
      gi = it->second;
    }
    FlowGroup& g = f.groups[gi];
    if (std::find(g.sites.begin(), g.sites.end(), std::get<0>(r.key)) == g.sites.end())
      g.sites.push_back(std::get<0>(r.key));
    FlowStep st{std::get<1>(r.key), std::get<3>(r.key), std::get<2>(r.key), std::get<4>(r.key),
                r.handovers, r.charged};
    // Several sites of one type: the same step adds up.
    auto same = std::find_if(g.steps.begin(), g.steps.end(), [&](const FlowStep& x) {
      return x.from == st.from && x.to == st.to && x.from_kind == st.from_kind && x.to_kind == st.to_kind;
    });
    if (same != g.steps.end()) {
      same->handovers += st.handovers;
      same->charged += st.charged;
    } else {
      g.steps.push_back(st);
    }
    g.handovers += r.handovers;
    g.charged += r.charged;
    if (st.from != st.to) g.cross_thread += r.handovers;
    f.handovers += r.handovers;
    f.charged += r.charged;
  }
  for (FlowGroup& g : f.groups) {
    std::sort(g.sites.begin(), g.sites.end());
    std::sort(g.steps.begin(), g.steps.end(), [](const FlowStep& a, const FlowStep& b) {
      const bool aa = a.from_kind == profile::kFlowAlloc, ba = b.from_kind == profile::kFlowAlloc;
      if (aa != ba) return aa;
      if (a.handovers != b.handovers) return a.handovers > b.handovers;
      return std::tie(a.from, a.from_kind, a.to, a.to_kind) < std::tie(b.from, b.from_kind, b.to, b.to_kind);
    });
    // The dominant path (steps are sorted: the first is the biggest allocation step). It ends
    // after a step back to a holder already on it (a ping-pong shows once).
    if (!g.steps.empty() && g.steps[0].from_kind == profile::kFlowAlloc) {
      std::vector<std::pair<uint32_t, uint8_t>> seen = {{g.steps[0].from, profile::kFlowAlloc}};
      size_t cur = 0;
      for (;;) {
        g.path.push_back(cur);
        const std::pair<uint32_t, uint8_t> at{g.steps[cur].to, g.steps[cur].to_kind};
        if (std::find(seen.begin(), seen.end(), at) != seen.end()) break;
        seen.push_back(at);
        size_t next = g.steps.size();
        for (size_t i = 0; i < g.steps.size(); ++i)
          if (g.steps[i].from_kind != profile::kFlowAlloc && g.steps[i].from == at.first &&
              g.steps[i].from_kind == at.second &&
              (next == g.steps.size() || g.steps[i].handovers > g.steps[next].handovers))
            next = i;
        if (next == g.steps.size()) break;
        cur = next;
      }
    }
  }
  std::sort(f.groups.begin(), f.groups.end(), [](const FlowGroup& a, const FlowGroup& b) {
    if (a.charged != b.charged) return a.charged > b.charged;
    if (a.handovers != b.handovers) return a.handovers > b.handovers;
    return a.site < b.site;
  });
  return f;
}

}  // namespace whymiss::analysis
