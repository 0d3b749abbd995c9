#include "analysis/types.h"

#include <algorithm>

namespace whymiss::analysis {

const Field* field_at(const DataType& t, uint64_t offset) {
  if (t.size == 0 || t.fields.empty()) return nullptr;
  const uint64_t off = offset % t.size;
  // Fields are sorted by offset: the last one starting at or before `off`.
  auto it = std::upper_bound(t.fields.begin(), t.fields.end(), off,
                             [](uint64_t v, const Field& f) { return v < f.offset; });
  if (it == t.fields.begin()) return nullptr;
  --it;
  return off < it->offset + it->size ? &*it : nullptr;
}

}  // namespace whymiss::analysis
