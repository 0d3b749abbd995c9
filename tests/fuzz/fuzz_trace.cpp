// Fuzzes the trace reader: any input must either parse or give a one-line "NAME:LINE: ..." error,
// and every access handed to the sink must satisfy the documented limits.
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>

#include "model/trace.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  std::istringstream in(text);
  size_t count = 0;
  whymiss::Status st = whymiss::read_trace(in, "fuzz", [&](const whymiss::TraceAccess& a) {
    ++count;
    if (a.thread >= whymiss::kMaxTraceThread) std::abort();
    if (a.size < 1 || a.size > whymiss::kMaxTraceAccessSize) std::abort();
    if (a.addr + (a.size - 1) < a.addr) std::abort();
  });
  if (!st.ok()) {
    const std::string& e = st.error();
    if (e.rfind("fuzz:", 0) != 0 || e.find('\n') != std::string::npos) std::abort();
  }
  // Every access is on its own line, so there can be no more accesses than lines.
  size_t lines = 1;
  for (char c : text) lines += c == '\n';
  if (count > lines) std::abort();

  // The whole input as one line must not crash parse_trace_line either.
  whymiss::TraceAccess a;
  (void)whymiss::parse_trace_line(text, &a);
  return 0;
}
