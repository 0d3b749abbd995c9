// The text trace format read by `whymiss simulate`. One access per line:
//   THREAD R|W ADDRESS SIZE      e.g.  0 W 0x7f0000001000 8
// THREAD: decimal thread number; R or W (case-insensitive); ADDRESS: hex, 0x prefix optional;
// SIZE: decimal bytes, 1..4096. '#' starts a comment; blank lines are ignored.
#pragma once
#include <cstdint>
#include <functional>
#include <istream>
#include <string>
#include <string_view>

#include "model/result.h"

namespace whymiss {

struct TraceAccess {
  uint32_t thread = 0;
  bool write = false;
  uint64_t addr = 0;
  uint32_t size = 0;
};

inline constexpr uint32_t kMaxTraceThread = 1u << 20;
inline constexpr uint32_t kMaxTraceAccessSize = 4096;

// Parses one line. Returns true with *out set for an access, false for blank/comment lines,
// or an error sentence (without file:line; the caller adds it).
Result<bool> parse_trace_line(std::string_view line, TraceAccess* out);

// Streams every access of `in` to `sink`. On the first malformed line returns
// "NAME:LINE: what is wrong" and stops; the sink has then seen only the lines before it.
// Reads in 64 KiB chunks: memory stays bounded (the chunk, grown only for a line longer than
// it, up to the longest line accepted) however long the trace, so `in` may be a pipe.
Status read_trace(std::istream& in, const std::string& name,
                  const std::function<void(const TraceAccess&)>& sink);
// The same, for a sink that may give up: the first error it returns stops the reading and is
// returned as it is (no file:line is added; nothing after that access is read).
Status read_trace_until(std::istream& in, const std::string& name,
                        const std::function<Status(const TraceAccess&)>& sink);

}  // namespace whymiss
