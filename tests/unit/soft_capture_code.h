// Assembled code for the capture stage tests: loops whose memory instruction is at a known
// address (a global label), so a test can note samples for it and check what the breakpoint
// captured against the addresses the loop is known to access.
#pragma once
#include <cstdint>

extern "C" {
uint64_t wmc_walk(const void* base, uint64_t n, uint64_t stride);
void wmc_store(uint64_t* p, uint64_t n);
extern const uint8_t wmc_walk_load[];  // add (%rdi), %rax: an 8-byte read
extern const uint8_t wmc_store_op[];   // mov %rsi, (%rdi): an 8-byte write
extern const uint8_t wmc_n1[], wmc_n2[], wmc_n3[], wmc_n4[], wmc_n5[];  // never executed
}
