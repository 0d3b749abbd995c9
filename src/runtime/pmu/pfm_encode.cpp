#include "runtime/pmu/pfm_encode.h"

#include <perfmon/pfmlib_perf_event.h>

#include <cstring>

namespace whymiss::pmu {

bool pfm_encode(const char* name, uint32_t* type, uint64_t* config, uint64_t* config1,
                std::string* why) {
  static int init = pfm_initialize();
  if (init != PFM_SUCCESS) {
    *why = std::string("libpfm4 could not initialise (") + pfm_strerror(init) + ")";
    return false;
  }
  perf_event_attr attr;
  std::memset(&attr, 0, sizeof attr);
  pfm_perf_encode_arg_t arg;
  std::memset(&arg, 0, sizeof arg);
  arg.attr = &attr;
  arg.size = sizeof arg;
  int r = pfm_get_os_event_encoding(name, PFM_PLM3, PFM_OS_PERF_EVENT_EXT, &arg);
  if (r != PFM_SUCCESS) {
    *why = std::string("libpfm4 cannot encode ") + name + " on this CPU (" + pfm_strerror(r) + ")";
    return false;
  }
  *type = attr.type;
  *config = attr.config;
  *config1 = attr.config1;
  return true;
}

}  // namespace whymiss::pmu
