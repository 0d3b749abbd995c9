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

}  // namespace whymiss::report
