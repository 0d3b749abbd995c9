#include "runtime/common/run_env.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace whymiss::rt {

bool profile_output_from_env(char* out, size_t n) {
  const char* path = std::getenv("WHYMISS_OUTPUT");
  if (!path || !*path || std::strlen(path) >= n) return false;
  if (const char* pid = std::getenv("WHYMISS_PID"); pid && std::atol(pid) != long(getpid())) return false;
  std::strcpy(out, path);
  return true;
}

void read_command_line(char* out, size_t n) {
  if (n == 0) return;
  out[0] = '\0';
  int fd = ::open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ssize_t len = ::read(fd, out, n - 1);
  ::close(fd);
  if (len <= 0) return;
  while (len > 0 && out[len - 1] == '\0') --len;
  for (ssize_t i = 0; i < len; ++i)
    if (out[i] == '\0') out[i] = ' ';
  out[len] = '\0';
}

}  // namespace whymiss::rt
