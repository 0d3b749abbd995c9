// Writing command output (reports, profiles) without ever leaving a half-written file behind,
// replacing what is not a regular file, or overwriting a file that is not ours.
//
// What happens depends on what is at the path (lstat, checked before any work and again when
// writing):
//  - nothing: a temporary file beside it (mkstemp: O_EXCL, a random name), renamed into place
//    without replacing anything that appeared meanwhile (RENAME_NOREPLACE). New reports get
//    0666 & ~umask, new profiles 0600 (as perf does: a profile shows the program's addresses).
//  - a regular file: replaced the same way (atomically), keeping its permission bits (and, as
//    root, its owner). Refused without `force` when it could be a loss: a profile only replaces
//    an empty file or another whymiss profile; a report never replaces a profile or an ELF file.
//  - a device, a FIFO, or a symbolic link (to anything but a directory): written in place, as
//    `cat > PATH` would, so /dev/null stays a device, /dev/stdout reaches standard output and a
//    link keeps pointing where it did. A symbolic link's regular target is checked as above and
//    truncated first; a dangling link, a socket and a directory are refused.
#pragma once
#include <functional>
#include <string>
#include <string_view>

#include "model/result.h"

namespace whymiss::cli {

enum class OutputKind { Report, Profile };

struct OutputOptions {
  OutputKind kind = OutputKind::Report;
  bool force = false;  // replace a regular file whatever it holds
};

// Fails early, before any expensive work, if `path` cannot be written as described above: one
// sentence naming the cause (and --force where it would help).
Status check_output_path(const std::string& path, const OutputOptions& o = {});

// Writes `data` to `path` as described above.
Status write_output(const std::string& path, std::string_view data, const OutputOptions& o = {});
// The same with the bytes `write` writes into the descriptor it is given, front to back (it
// returns 0 or an errno value; std::bad_alloc counts as ENOMEM): a profile streamed from its
// tables, never assembled in memory first. On failure no temporary file is left.
using OutputWriter = std::function<int(int fd)>;
Status write_output(const std::string& path, const OutputWriter& write,
                    const OutputOptions& o = {});

// A report, by the rules above (kept for the callers that write reports).
inline Status write_file_atomically(const std::string& path, std::string_view data) {
  return write_output(path, data, OutputOptions{});
}

}  // namespace whymiss::cli
