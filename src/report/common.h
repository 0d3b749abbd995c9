// Helpers shared by the report's outputs (report.cpp, diff.cpp, html.cpp): number formatting,
// code locations as text, a finding's objects, and the per-source-line table. Internal to the
// report library.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/analysis.h"
#include "model/profile.h"
#include "report/report.h"

namespace whymiss::report {

std::string hex(uint64_t v);        // "0x1a2b"
std::string thousands(uint64_t v);  // "1,234,567"
std::string pct(double f);          // 0.123 -> "12.3%"
std::string basename(const std::string& f);

// "function  file.c:12", or the function alone when the file is unknown (printable).
std::string where(const CodeLoc& c);
// An instruction's place in the source, as cachegrind gives it: the line of the out-of-line
// function whose code it is (chain.back()), followed by the functions inlined there, outermost
// first: "caller  c.c:120 via read64 (mem.h:5)".
std::string where(const std::vector<CodeLoc>& chain);

// What the report says of one object of a finding. Objects it would name alike (a buffer freed
// and allocated again at the same address, by the same code and thread) are shown once, with the
// misses of all of them.
struct ObjectView {
  std::string name;  // global name, or "" for heap objects
  bool heap = false;
  uint32_t site_index = profile::kNoSite;
  CodeLoc site;
  uint64_t start = 0, size = 0;
  uint32_t alloc_thread = 0;
  std::vector<uint32_t> threads;
  uint32_t allocations = 1;  // heap: objects merged into this one
  // The object's L1 misses of the finding's kind (sharing findings: true and false sharing);
  // absent when the profile does not count them (data outside the heap of a capacity or
  // conflict finding).
  std::optional<uint64_t> l1_misses;
};
// The finding's objects, each once, most missed first.
std::vector<ObjectView> object_views(const analysis::Finding& f, const profile::Profile& p, Namer& n);
// "sharing", "conflict" or "capacity": the L1 misses an object of such a finding is counted by.
const char* finding_kind_words(analysis::Kind k);

// Per source line: accesses and misses by level, summed over its instructions (like
// cg_annotate's per-line view), keyed by the out-of-line function's line. Sorted by L1 misses,
// most first.
struct SourceLine {
  std::vector<CodeLoc> chain;  // of the line's instructions with the most L1 misses
  uint64_t chain_misses = 0;   // their L1 misses (to pick the chain)
  uint64_t accesses[2] = {};
  uint64_t misses[profile::kLevels][2] = {};  // [level][0 all non-hit, 1 non-compulsory]
  uint64_t l1_kinds[profile::kKinds] = {};    // L1 misses by kind (index 0, hits, unused)
};
std::vector<SourceLine> source_lines(const profile::Profile& p, Namer& n);

}  // namespace whymiss::report
