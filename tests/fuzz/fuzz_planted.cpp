// A target with a planted bug for the mutation driver's own test (replay_main.cpp): it crashes on
// any input holding the bytes "BUG", which its seed corpus ("BUF") does not. The driver passes
// that test only if its mutations reach the bug within the test's bound and it reports the crash.
#include <cstddef>
#include <cstdint>
#include <cstring>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  for (size_t i = 0; i + 3 <= size; ++i)
    if (std::memcmp(data + i, "BUG", 3) == 0) __builtin_trap();
  return 0;
}
