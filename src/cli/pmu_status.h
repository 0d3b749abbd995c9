// Whether this machine can run pmu mode, for --mode auto/pmu and the report header.
#pragma once
#include <string>

namespace whymiss::cli {

struct PmuStatus {
  bool available = false;
  std::string what;    // when available: which sampling facility, e.g. "AMD IBS op sampling"
  std::string reason;  // when not: one clause naming the cause
};

PmuStatus detect_pmu();

}  // namespace whymiss::cli
