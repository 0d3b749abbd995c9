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
//
// When it returns true it has also created "<path>.status" (kept open, close-on-exec) holding
// "started": the recording tool reads it when no profile appears, to tell a runtime that never
// started from one that could not write (see note_profile_written). errno is preserved.
bool profile_output_from_env(char* out, size_t n);

// Records in "<path>.status" how writing the profile went: 0, or the errno value
// write_profile_sections returned. Async-signal-safe, errno preserved; does nothing when the
// status file could not be created, or when its descriptor is no longer the file we opened (the
// program closed it, and the number may now be one of the program's files).
void note_profile_written(int err);

// Records in "<path>.status" that the runtime turned itself off and why ("disabled WHY", one
// line): the recording tool then says so when no profile appears. Same safety as above.
void note_runtime_disabled(const char* why);

// The program and its arguments, space-joined, from /proc/self/cmdline into out[n] (always
// NUL-terminated; empty when unreadable).
void read_command_line(char* out, size_t n);

}  // namespace whymiss::rt
