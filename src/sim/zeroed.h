// Arrays whose initial contents are all zero bytes, taken from calloc. A large one then comes as
// fresh pages that cost memory only once touched (glibc maps them; the exact runtime's private
// heap hands out big blocks on untouched or released pages), where a vector's value-initialisation
// writes, and so commits, every byte up front. A level's entries and LRU stamps stay mostly
// untouched while the program uses little of the level (bench/README.md, "Exact mode memory").
#pragma once
#include <cstddef>
#include <cstdlib>
#include <memory>
#include <new>
#include <type_traits>

namespace whymiss::sim {

struct FreeDeleter {
  void operator()(void* p) const noexcept { std::free(p); }
};
template <typename T>
using ZeroedArray = std::unique_ptr<T[], FreeDeleter>;

// n elements of T (which all-zero bytes must represent: trivially copyable, zero = its initial
// value); throws std::bad_alloc.
template <typename T>
ZeroedArray<T> make_zeroed(size_t n) {
  static_assert(std::is_trivially_copyable_v<T>);
  void* p = std::calloc(n ? n : 1, sizeof(T));
  if (p == nullptr) throw std::bad_alloc();
  return ZeroedArray<T>(static_cast<T*>(p));
}

}  // namespace whymiss::sim
