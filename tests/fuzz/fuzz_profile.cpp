// The profile reader must reject any malformed bytes with an error, never crash or over-read.
// Every input of a header's size or more is tried again with a correct size and checksum patched
// in, so mutations reach the section table and records instead of stopping at the integrity
// checks.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "model/profile.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace whymiss::profile;
  auto r = parse_profile(data, size, "fuzz");
  if (!r.ok() && r.error().empty()) __builtin_trap();
  if (size >= sizeof(FileHeader)) {
    std::vector<uint8_t> b(data, data + size);
    FileHeader h;
    std::memcpy(&h, b.data(), sizeof h);
    h.file_size = size;
    if (h.version == kOldestVersion) h.version = kVersion;  // (seeds of format 1: other sum)
    h.checksum = checksum(b.data() + sizeof h, size - sizeof h);
    std::memcpy(b.data(), &h, sizeof h);
    auto r2 = parse_profile(b.data(), b.size(), "fuzz");
    if (!r2.ok() && r2.error().empty()) __builtin_trap();
  }
  return 0;
}
