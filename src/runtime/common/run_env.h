// What both runtimes (exact, soft) read about the run at start-up, before anything else.
// Called from their constructors with the runtime flag up; no heap, no stdio.
#pragma once
#include <cstddef>

namespace whymiss::rt {

// The profile path this process must write, copied into out[n]: WHYMISS_OUTPUT, set by
// `whymiss record`. False (the runtime stays off and the program runs normally) when it is
// unset, empty or too long, or when WHYMISS_PID names another process: descendants of the
// recorded process run unprofiled, since they would overwrite its profile (an exec in the
// recorded process itself keeps its pid, so the new image is profiled).
bool profile_output_from_env(char* out, size_t n);

// The program and its arguments, space-joined, from /proc/self/cmdline into out[n] (always
// NUL-terminated; empty when unreadable).
void read_command_line(char* out, size_t n);

}  // namespace whymiss::rt
