// Code and data that symbols_test resolves in its own executable. Each function captures a
// return address from inside itself; "@mark:NAME" comments label the lines the test expects
// (it searches this file for them, so edits here need no test changes).
// Included by exactly one translation unit.
#pragma once
#include <cstdint>

// noipa (GCC) also stops interprocedural shortcuts; Clang has no such attribute.
#if __has_attribute(noipa)
#define WHYMISS_FIXTURE_OPAQUE __attribute__((noinline, noipa))
#else
#define WHYMISS_FIXTURE_OPAQUE __attribute__((noinline))
#endif

extern "C" {
long whymiss_fixture_counters[4];  // exported global: 32 bytes
}

struct counters {
  long hits;
  long misses;
};
static struct counters fixture_static_counters;  // file-local: a LOCAL symbol, mangled name

namespace whymiss_fixture {

// Returns its own return address, i.e. an address just after the call in the caller.
WHYMISS_FIXTURE_OPAQUE uintptr_t capture() {
  return reinterpret_cast<uintptr_t>(__builtin_return_address(0));
}

// Namespaced C++ function: its name must come back demangled.
WHYMISS_FIXTURE_OPAQUE uintptr_t compute(int n) {
  uintptr_t ip = capture();  // @mark:compute
  whymiss_fixture_counters[2] += n;
  return ip;
}

}  // namespace whymiss_fixture

// A member of a type with internal linkage: GCC gives it no DWARF linkage name.
namespace {
struct Probe {
  long touched = 0;
  WHYMISS_FIXTURE_OPAQUE uintptr_t poke();
};
uintptr_t Probe::poke() {
  uintptr_t ip = whymiss_fixture::capture();  // @mark:poke
  ++touched;
  return ip;
}
}  // namespace

extern "C" WHYMISS_FIXTURE_OPAQUE uintptr_t whymiss_fixture_known() {
  uintptr_t ip = whymiss_fixture::capture();  // @mark:known
  whymiss_fixture_counters[0] += 1;           // keeps the call above from being a tail call
  return ip;
}

// Inline chain: leaf inlined into middle inlined into whymiss_fixture_caller.
static inline __attribute__((always_inline)) uintptr_t fixture_inlined_leaf(long k) {
  fixture_static_counters.hits += k;
  uintptr_t ip = whymiss_fixture::capture();  // @mark:leaf
  fixture_static_counters.misses += k;
  return ip;
}

static inline __attribute__((always_inline)) uintptr_t fixture_inlined_middle(long k) {
  uintptr_t ip = fixture_inlined_leaf(k + 1);  // @mark:middle
  whymiss_fixture_counters[3] += k;
  return ip;
}

extern "C" WHYMISS_FIXTURE_OPAQUE uintptr_t whymiss_fixture_caller(long k) {
  uintptr_t ip = fixture_inlined_middle(k);  // @mark:caller
  whymiss_fixture_counters[1] += k;
  return ip;
}
