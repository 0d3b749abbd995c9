// Internal to src/symbols: interned strings, so cached frames share names and file paths
// (a C++ inline chain is ~5 frames of ~250 characters each, repeated across many ips).
#pragma once
#include <functional>
#include <string>
#include <string_view>
#include <unordered_set>

namespace whymiss::symbols::internal {

class StringPool {
 public:
  // A view that stays valid as long as the pool does (unordered_set nodes never move).
  std::string_view intern(std::string_view s) {
    auto it = set_.find(s);
    if (it == set_.end()) it = set_.emplace(s).first;
    return *it;
  }

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_set<std::string, Hash, std::equal_to<>> set_;
};

}  // namespace whymiss::symbols::internal
