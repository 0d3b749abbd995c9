#include "report/common.h"

#include <algorithm>
#include <cstdio>
#include <map>

namespace whymiss::report {

std::string hex(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "0x%llx", (unsigned long long)v);
  return b;
}

std::string thousands(uint64_t v) {
  std::string s = std::to_string(v);
  for (int i = int(s.size()) - 3; i > 0; i -= 3) s.insert(size_t(i), ",");
  return s;
}

std::string pct(double f) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f%%", 100 * f);
  return b;
}

std::string basename(const std::string& f) {
  size_t s = f.rfind('/');
  return s == std::string::npos ? f : f.substr(s + 1);
}

std::string where(const CodeLoc& c) {
  if (c.file.empty()) return c.function;
  return printable(c.function) + "  " + printable(basename(c.file)) + ":" + std::to_string(c.line);
}

std::string where(const std::vector<CodeLoc>& chain) {
  std::string s = where(chain.back());
  for (size_t i = chain.size() - 1; i-- > 0;) {
    const CodeLoc& c = chain[i];
    s += " via " + printable(c.function);
    if (!c.file.empty()) s += " (" + printable(basename(c.file)) + ":" + std::to_string(c.line) + ")";
  }
  return s;
}

std::vector<SourceLine> source_lines(const profile::Profile& p, Namer& n) {
  std::map<std::pair<std::string, uint32_t>, SourceLine> by_line;
  // Several instructions of one line share an inline chain: sum their misses per chain.
  std::map<std::pair<std::string, uint32_t>, std::map<std::string, std::pair<std::vector<CodeLoc>, uint64_t>>> chains;
  for (const auto& ir : p.instructions) {
    std::vector<CodeLoc> chain = n.chain(ir.ip);
    const CodeLoc& c = chain.back();
    const std::pair<std::string, uint32_t> key{c.file.empty() ? c.function : c.file, c.line};
    SourceLine& sl = by_line[key];
    sl.accesses[0] += ir.accesses[0];
    sl.accesses[1] += ir.accesses[1];
    uint64_t l1 = 0;
    for (int l = 0; l < profile::kLevels; ++l)
      for (int k = 1; k < profile::kKinds; ++k) {
        sl.misses[l][0] += ir.misses[l][k];
        if (k != 1) sl.misses[l][1] += ir.misses[l][k];
        if (l == 0) l1 += ir.misses[l][k], sl.l1_kinds[k] += ir.misses[l][k];
      }
    auto& entry = chains[key][where(chain)];
    if (entry.first.empty()) entry.first = std::move(chain);
    entry.second += l1;
    if (sl.chain.empty() || entry.second > sl.chain_misses) {
      sl.chain = entry.first;
      sl.chain_misses = entry.second;
    }
  }
  std::vector<SourceLine> v;
  for (auto& [key, sl] : by_line) v.push_back(sl);
  std::stable_sort(v.begin(), v.end(), [](const SourceLine& a, const SourceLine& b) {
    return a.misses[0][0] > b.misses[0][0];
  });
  return v;
}

namespace {

ObjectView view(const analysis::ObjectRef& r, const profile::Profile& p, Namer& n) {
  ObjectView v;
  v.heap = r.heap;
  v.start = r.start;
  v.size = r.size;
  v.alloc_thread = r.alloc_thread;
  v.threads = r.threads;
  v.site_index = r.site;
  if (r.heap) {
    if (r.site < p.sites.size()) v.site = n.site(p.sites[r.site]);
    else v.site = {"??", "", 0};
  } else if (auto g = n.global(r.sample_addr)) {
    v.name = g->name;
    v.start = g->start;
    v.size = g->size;
  } else {
    v.name = "(data at " + hex(r.sample_addr) + ", not a heap object or named global)";
  }
  return v;
}

// The kinds of L1 miss that make up a finding of kind k, as profile kind indices.
std::vector<int> finding_kinds(analysis::Kind k) {
  switch (k) {
    case analysis::Kind::FalseSharing:
    case analysis::Kind::TrueSharing: return {4, 5};
    case analysis::Kind::Conflict: return {3};
    case analysis::Kind::Capacity: return {2};
  }
  return {};
}

}  // namespace

const char* finding_kind_words(analysis::Kind k) {
  switch (k) {
    case analysis::Kind::FalseSharing:
    case analysis::Kind::TrueSharing: return "sharing";
    case analysis::Kind::Conflict: return "conflict";
    case analysis::Kind::Capacity: return "capacity";
  }
  return "";
}

std::vector<ObjectView> object_views(const analysis::Finding& f, const profile::Profile& p, Namer& n) {
  std::map<uint64_t, const profile::ObjectRecord*> records;
  for (const auto& o : p.objects) records[o.serial] = &o;
  const std::vector<int> kinds = finding_kinds(f.kind);
  std::vector<ObjectView> views;
  for (const auto& r : f.objects) {
    ObjectView v = view(r, p, n);
    if (r.heap) {
      if (auto it = records.find(r.serial); it != records.end()) {
        uint64_t m = 0;
        for (int k : kinds) m += it->second->misses[k];
        v.l1_misses = m;
      }
    } else if (r.misses) {
      v.l1_misses = r.misses;  // sharing on data outside the heap: the finding's misses
    }
    auto same = std::find_if(views.begin(), views.end(), [&](const ObjectView& w) {
      return w.heap == v.heap && w.name == v.name && w.start == v.start && w.size == v.size &&
             w.site_index == v.site_index && w.alloc_thread == v.alloc_thread;
    });
    if (same == views.end()) {
      views.push_back(std::move(v));
      continue;
    }
    same->allocations += v.allocations;
    if (v.l1_misses) same->l1_misses = same->l1_misses.value_or(0) + *v.l1_misses;
    for (uint32_t t : v.threads)
      if (std::find(same->threads.begin(), same->threads.end(), t) == same->threads.end()) same->threads.push_back(t);
    std::sort(same->threads.begin(), same->threads.end());
  }
  std::stable_sort(views.begin(), views.end(), [](const ObjectView& a, const ObjectView& b) {
    return a.l1_misses.value_or(0) > b.l1_misses.value_or(0);
  });
  return views;
}

}  // namespace whymiss::report
