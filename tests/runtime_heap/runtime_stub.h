// Test stand-in for the runtime core (src/runtime/exact/runtime.cpp): the three functions heap.h
// expects from it, plus switches the tests flip.
#pragma once

namespace whymiss::rt {

void test_set_in_runtime(bool on) noexcept;  // calling thread only
void test_set_recording(bool on) noexcept;   // process-wide

}  // namespace whymiss::rt
