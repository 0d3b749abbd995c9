#include "analysis/data_types.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

namespace whymiss::analysis {
namespace {

using profile::kKinds;
using profile::kLevels;
using profile::kRefs;

constexpr int kFalseSharing = 5;  // sim::Outcome::FalseSharing

std::string field_name(const Place& pl) {
  if (!pl.type) return "";
  if (pl.type->fields.empty()) return pl.type->name;
  return pl.field ? pl.field->name : "(padding)";
}

}  // namespace

double TypeMisses::total(int level) const {
  double s = 0;
  for (int k = 1; k < kKinds; ++k) s += misses[level][k];
  return s;
}

DataIndex::DataIndex(const profile::Profile& p, TypeOracle& types) : p_(p), types_(types) {
  by_start_.resize(p.objects.size());
  for (uint32_t i = 0; i < by_start_.size(); ++i) by_start_[i] = i;
  std::sort(by_start_.begin(), by_start_.end(), [&](uint32_t a, uint32_t b) {
    return p.objects[a].start < p.objects[b].start;
  });
  reach_.resize(by_start_.size());
  uint64_t running = 0;
  for (size_t i = 0; i < by_start_.size(); ++i) {
    const auto& o = p.objects[by_start_[i]];
    running = std::max(running, o.start + o.size);
    reach_[i] = running;
  }
  heap_types_.assign(p.objects.size(), nullptr);
  heap_asked_.assign(p.objects.size(), 0);
}

const DataType* DataIndex::heap_type(size_t i) {
  if (!heap_asked_[i]) {
    heap_asked_[i] = 1;
    heap_types_[i] = types_.heap_type(p_, p_.objects[i]);
  }
  return heap_types_[i];
}

Place DataIndex::at(uint64_t addr, const uint64_t* prefer, int n) {
  Place pl;
  auto it = std::upper_bound(by_start_.begin(), by_start_.end(), addr, [&](uint64_t a, uint32_t i) {
    return a < p_.objects[i].start;
  });
  int best = -1;
  for (size_t j = size_t(it - by_start_.begin()); j-- > 0;) {
    if (reach_[j] <= addr) break;
    const auto& o = p_.objects[by_start_[j]];
    if (addr >= o.start + o.size) continue;
    bool preferred = false;
    for (int k = 0; k < n; ++k) preferred |= prefer[k] == o.serial;
    // The preferred object, else the latest allocation covering the address.
    if (best < 0 || preferred || (o.serial > p_.objects[size_t(best)].serial &&
                                  !std::count(prefer, prefer + n, p_.objects[size_t(best)].serial)))
      best = int(by_start_[j]);
    if (preferred) break;
  }
  if (best >= 0) {
    const auto& o = p_.objects[size_t(best)];
    pl.found = pl.heap = true;
    pl.serial = o.serial;
    pl.start = o.start;
    pl.type = heap_type(size_t(best));
  } else {
    uint64_t start = 0;
    if (const DataType* t = types_.global_type(addr, &start)) {
      pl.found = true;
      pl.start = start;
      pl.type = t;
    }
  }
  if (pl.type) pl.field = field_at(*pl.type, addr - pl.start);
  return pl;
}

DataTypes data_types(const profile::Profile& p, TypeOracle& oracle) {
  DataTypes r;
  r.levels = int(std::min<size_t>(p.geometry.levels.size(), kLevels));
  for (int l = 0; l < r.levels && l < int(p.counters.size()); ++l)
    for (int k = 1; k < kKinds; ++k) r.program[l] += double(p.counters[l].by_kind[k][0] + p.counters[l].by_kind[k][1]);

  DataIndex index(p, oracle);
  // Rows by type (nullptr = unknown); fields by name within a type.
  std::map<const DataType*, TypeMisses> rows;
  std::map<const DataType*, std::map<std::string, FieldMisses>> fields;
  std::map<const DataType*, std::set<std::pair<bool, uint64_t>>> seen;  // (heap, serial/start)
  auto row = [&](const DataType* t) -> TypeMisses& {
    auto [it, inserted] = rows.try_emplace(t);
    if (inserted) {
      it->second.known = t != nullptr;
      it->second.type = t;
      it->second.name = t ? t->name : "unknown";
      it->second.size = t ? t->size : 0;
    }
    return it->second;
  };

  for (const auto& ir : p.instructions) {
    int n = 0;
    while (n < kRefs && ir.sample_addrs[n]) ++n;
    if (n == 0) {
      for (int l = 0; l < r.levels; ++l)
        for (int k = 1; k < kKinds; ++k) r.unplaced[l] += double(ir.misses[l][k]);
      continue;
    }
    for (int i = 0; i < n; ++i) {
      const Place pl = index.at(ir.sample_addrs[i], ir.objects, kRefs);
      TypeMisses& t = row(pl.type);
      if (pl.found && !pl.heap) seen[pl.type].insert({false, pl.start});
      FieldMisses* f = nullptr;
      if (pl.type) {
        const std::string name = field_name(pl);
        auto [fit, inserted] = fields[pl.type].try_emplace(name);
        f = &fit->second;
        if (inserted) {
          f->name = name;
          f->offset = pl.field ? pl.field->offset : pl.type->fields.empty() ? 0 : (ir.sample_addrs[i] - pl.start) % pl.type->size;
          f->size = pl.field ? pl.field->size : pl.type->fields.empty() ? pl.type->size : 0;
        }
      }
      for (int l = 0; l < r.levels; ++l)
        for (int k = 1; k < kKinds; ++k) {
          const double share = double(ir.misses[l][k]) / n;
          t.misses[l][k] += share;
          if (f) f->misses[l][k] += share;
        }
    }
  }

  // False-sharing pairs: per line, the fields each thread wrote against the fields the other
  // threads used, in different granules.
  const uint32_t line = p.geometry.line();
  const uint32_t granule = line >= 64 ? line / 64 : 1;
  std::map<const DataType*, std::map<std::pair<std::string, std::string>, FalsePair>> pairs;
  for (const auto& lr : p.lines) {
    if (lr.misses[kFalseSharing] == 0 || line == 0) continue;
    struct Use { uint32_t thread; uint64_t granule; bool write; };
    std::vector<Use> uses;
    for (uint32_t t = 0; t < lr.thread_count && t < uint32_t(profile::kLineThreads); ++t)
      for (uint32_t g = 0; g < 64 && g * granule < line; ++g) {
        const uint64_t bit = uint64_t(1) << g;
        if ((lr.read_mask[t] | lr.write_mask[t]) & bit) uses.push_back({t, g, (lr.write_mask[t] & bit) != 0});
      }
    std::set<std::tuple<const DataType*, std::string, std::string>> here;
    const uint64_t base = lr.line * line;
    // Each used granule's place, once.
    std::map<uint64_t, Place> places;
    for (const Use& u : uses)
      if (!places.count(u.granule)) places[u.granule] = index.at(base + u.granule * granule, lr.objects, kRefs);
    // Per thread, the fields (one element's field is one slot: its address) written and used;
    // bytes of an array field or of no field are slots by 8-byte word.
    struct Slot {
      uint64_t addr;
      const Place* place;
      bool operator<(const Slot& o) const { return addr < o.addr; }
    };
    std::map<uint32_t, std::set<Slot>> written, used;
    for (const Use& u : uses) {
      const Place& pl = places[u.granule];
      const uint64_t at = base + u.granule * granule;
      // An array field's elements are not known: its slots are 8-byte words (counters[t]).
      uint64_t slot = at & ~uint64_t(7);
      if (pl.type && pl.field && pl.field->name.find("[]") == std::string::npos)
        slot = pl.start + (at - pl.start) / pl.type->size * pl.type->size + pl.field->offset;
      used[u.thread].insert({slot, &pl});
      if (u.write) written[u.thread].insert({slot, &pl});
    }
    for (const auto& [wt, ws] : written)
      for (const Slot& w : ws) {
        const Place& a = *w.place;
        if (!a.type) continue;
        for (const auto& [ut, us] : used) {
          if (ut == wt) continue;
          for (const Slot& u : us) {
            if (u.addr == w.addr) continue;  // the same bytes: true sharing, not false
            const Place& b = *u.place;
            std::string fa = field_name(a), fb = field_name(b);
            if (b.type != a.type) fb = (b.type ? b.type->name + "." : std::string("unknown.")) + fb;
            if (b.type == a.type && fb < fa) std::swap(fa, fb);
            here.insert({a.type, fa, fb});
          }
        }
      }
    for (const auto& [t, fa, fb] : here) {
      FalsePair& fp = pairs[t][{fa, fb}];
      fp.a = fa;
      fp.b = fb;
      fp.misses += double(lr.misses[kFalseSharing]) / double(here.size());
      fp.lines++;
    }
  }

  std::map<const DataType*, uint32_t> heap_count;
  for (size_t i = 0; i < p.objects.size(); ++i) heap_count[index.heap_type(i)]++;
  for (auto& [t, tm] : rows) {
    if (seen.count(t)) tm.globals = uint32_t(seen[t].size());
    // (For "unknown": the recorded heap objects of no known type.)
    tm.heap_objects = heap_count.count(t) ? heap_count[t] : 0;
    for (auto& [name, f] : fields[t]) tm.fields.push_back(f);
    auto all = [](const FieldMisses& f) {
      double s = 0;
      for (int l = 0; l < kLevels; ++l)
        for (int k = 1; k < kKinds; ++k) s += f.misses[l][k];
      return s;
    };
    std::stable_sort(tm.fields.begin(), tm.fields.end(),
                     [&](const FieldMisses& a, const FieldMisses& b) { return all(a) > all(b); });
    for (auto& [k, fp] : pairs[t]) tm.false_pairs.push_back(fp);
    std::stable_sort(tm.false_pairs.begin(), tm.false_pairs.end(),
                     [](const FalsePair& a, const FalsePair& b) { return a.misses > b.misses; });
    r.types.push_back(std::move(tm));
  }
  std::stable_sort(r.types.begin(), r.types.end(), [&](const TypeMisses& a, const TypeMisses& b) {
    for (int l = 0; l < r.levels; ++l)
      if (a.total(l) != b.total(l)) return a.total(l) > b.total(l);
    return a.name < b.name;
  });
  return r;
}

void name_finding_types(Analysis& a, const profile::Profile& p, TypeOracle& oracle) {
  DataIndex index(p, oracle);
  std::map<uint64_t, const profile::InstructionRecord*> by_ip;
  for (const auto& ir : p.instructions) by_ip[ir.ip] = &ir;
  const uint32_t line = p.geometry.line();
  const uint32_t granule = line >= 64 ? line / 64 : 1;
  // Line masks are kept at every sharing miss in exact mode; elsewhere they come from samples.
  const std::string masks_how = p.meta.mode == uint32_t(profile::Mode::Exact) ? "counted: " : "sampled: ";
  for (Finding& f : a.findings) {
    Place found;
    std::string how;
    uint64_t serials[kRefs] = {};
    for (size_t i = 0; i < f.objects.size() && i < size_t(kRefs); ++i) serials[i] = f.objects[i].serial;
    // Sharing: the bytes the threads wrote, then any they used.
    if (f.line_addr && line) {
      for (int pass = 0; pass < 2 && !found.type; ++pass)
        for (const LineThread& t : f.line_threads) {
          const uint64_t mask = pass == 0 ? t.write_mask : t.read_mask | t.write_mask;
          for (uint32_t g = 0; g < 64 && mask >> g && !found.type; ++g)
            if (mask >> g & 1) {
              const Place pl = index.at(f.line_addr + g * granule, serials, kRefs);
              if (pl.type) {
                found = pl;
                how = masks_how + (pass == 0 ? "the bytes the threads wrote on the line"
                                             : "the bytes the threads used on the line");
              }
            }
        }
    }
    // Else the instructions' sampled miss addresses (at most kRefs each): the type and field
    // most of them fall in (the first such on a tie), and how many do.
    if (!found.type) {
      std::set<uint64_t> addrs;
      std::vector<std::pair<Place, size_t>> votes;  // by first appearance
      for (const InstrRef& ins : f.instructions) {
        auto it = by_ip.find(ins.ip);
        if (it == by_ip.end()) continue;
        for (int i = 0; i < kRefs && it->second->sample_addrs[i]; ++i) {
          if (!addrs.insert(it->second->sample_addrs[i]).second) continue;
          const Place pl = index.at(it->second->sample_addrs[i], it->second->objects, kRefs);
          if (!pl.type) continue;
          auto v = std::find_if(votes.begin(), votes.end(), [&](const auto& x) {
            return x.first.type == pl.type && field_name(x.first) == field_name(pl);
          });
          if (v == votes.end()) votes.push_back({pl, 1});
          else ++v->second;
        }
      }
      size_t best = 0;
      for (size_t i = 1; i < votes.size(); ++i)
        if (votes[i].second > votes[best].second) best = i;
      if (!votes.empty()) {
        found = votes[best].first;
        how = "sampled: " + std::to_string(votes[best].second) + " of " + std::to_string(addrs.size()) +
              " sampled miss address" + (addrs.size() == 1 ? "" : "es");
      }
    }
    // Else an address the analysis kept for the finding's data.
    for (const ObjectRef& o : f.objects) {
      if (found.type || !o.sample_addr) break;
      const Place pl = index.at(o.sample_addr, serials, kRefs);
      if (pl.type) {
        found = pl;
        how = "sampled: one address of the finding's data";
      }
    }
    if (!found.type) continue;
    f.data_type = found.type->name;
    f.data_field = found.type->fields.empty() ? "" : field_name(found);
    f.data_how = how;
  }
}

void name_latent_fields(Predictions& pr, const profile::Profile& p, TypeOracle& oracle) {
  std::map<uint64_t, const DataType*> asked;  // by serial: the oracle is asked once per object
  for (LatentFalseSharing& l : pr.latent) {
    l.type.clear();
    l.fields.clear();
    auto it = asked.find(l.serial);
    if (it == asked.end()) {
      const DataType* t = nullptr;
      for (const auto& o : p.objects)
        if (o.serial == l.serial) {
          t = oracle.heap_type(p, o);
          break;
        }
      it = asked.emplace(l.serial, t).first;
    }
    const DataType* t = it->second;
    if (!t || t->size == 0) continue;
    l.type = t->name;
    if (t->fields.empty()) continue;
    for (const auto& runs : l.spans) {
      // Members by their offset in the type; one step per member (or padding run) covered.
      std::map<uint64_t, std::string> hit;
      for (const auto& [begin, end] : runs)
        for (uint64_t x = begin; x < end;) {
          const uint64_t in = x % t->size, element = x - in;
          if (const Field* f = field_at(*t, x)) {
            hit.emplace(f->offset, f->name);
            x = element + f->offset + f->size;
            continue;
          }
          hit.emplace(in, "(padding)");
          auto next = std::upper_bound(t->fields.begin(), t->fields.end(), in,
                                       [](uint64_t v, const Field& f) { return v < f.offset; });
          x = element + (next == t->fields.end() ? t->size : next->offset);
        }
      auto& names = l.fields.emplace_back();
      for (const auto& [off, name] : hit)
        if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    }
  }
}

}  // namespace whymiss::analysis
