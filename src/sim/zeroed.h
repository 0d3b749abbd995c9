// Arrays whose initial contents are all zero bytes, taken from calloc. A large one then comes as
// fresh pages that cost memory only once touched (glibc maps them; the exact runtime's private
// heap hands out big blocks on untouched or released pages), where a vector's value-initialisation
// writes, and so commits, every byte up front. A level's entries and LRU stamps stay mostly
// untouched while the program uses little of the level (bench/README.md, "Exact mode memory").
#pragma once
#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <memory>
#include <new>
#include <type_traits>
#include <vector>

namespace whymiss::sim {

struct FreeDeleter {
  void operator()(void* p) const noexcept { std::free(p); }
};
template <typename T>
using ZeroedArray = std::unique_ptr<T[], FreeDeleter>;

// Asks for transparent huge pages (MADV_HUGEPAGE) on the whole 2 MiB pages inside [p, p + bytes),
// for the simulator's big arrays (tags, entries, shadow tables and nodes: MiBs read at random,
// where with 4 KiB pages nearly every host cache miss is a TLB miss too, and a costly one in a
// VM). Before the first write, so that the first touch faults in a huge page. Best effort: it
// changes nothing where THP is off, or for memory that is not an anonymous mapping (a large
// malloc is one; the exact runtime's big blocks already have the advice). Below 4 MiB, not
// worth a system call. A huge page commits 2 MiB at its first touch: only for arrays that are
// written in full anyway, or whose footprint is the simulated program's (entries).
inline void advise_huge(void* p, size_t bytes) {
  constexpr uintptr_t kHuge = uintptr_t(2) << 20;
  if (bytes < 2 * kHuge) return;
  const uintptr_t lo = (reinterpret_cast<uintptr_t>(p) + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t hi = (reinterpret_cast<uintptr_t>(p) + bytes) & ~(kHuge - 1);
  if (hi > lo) madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);
}

// Gives `v` room for n elements in storage advised as above, its elements kept (moved into the
// new storage when it grows). Later assign/resize up to n reuse that storage.
template <typename T>
void reserve_huge(std::vector<T>& v, size_t n) {
  if (v.capacity() >= n) return;
  std::vector<T> grown;
  grown.reserve(n);
  advise_huge(grown.data(), n * sizeof(T));
  grown.insert(grown.end(), std::make_move_iterator(v.begin()), std::make_move_iterator(v.end()));
  v.swap(grown);
}

// n elements of T (which all-zero bytes must represent: trivially copyable, zero = its initial
// value); throws std::bad_alloc.
template <typename T>
ZeroedArray<T> make_zeroed(size_t n) {
  static_assert(std::is_trivially_copyable_v<T>);
  void* p = std::calloc(n ? n : 1, sizeof(T));
  if (p == nullptr) throw std::bad_alloc();
  advise_huge(p, n * sizeof(T));
  return ZeroedArray<T>(static_cast<T*>(p));
}

}  // namespace whymiss::sim
