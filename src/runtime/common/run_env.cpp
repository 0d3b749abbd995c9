#include "runtime/common/run_env.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "runtime/common/decimal.h"

namespace whymiss::rt {
namespace {

// The status file (see run_env.h) and its identity, to recognise it later.
int g_status_fd = -1;
dev_t g_status_dev = 0;
ino_t g_status_ino = 0;

bool write_status(const char* text, size_t len) {
  if (g_status_fd < 0) return false;
  struct stat st {};
  if (::fstat(g_status_fd, &st) != 0 || st.st_dev != g_status_dev || st.st_ino != g_status_ino)
    return false;
  bool ok = ::pwrite(g_status_fd, text, len, 0) == ssize_t(len);
  return ::ftruncate(g_status_fd, off_t(len)) == 0 && ok;
}

void open_status(const char* path) {
  char name[4200];
  const size_t n = std::strlen(path);
  const char suffix[] = ".status";
  if (n + sizeof suffix > sizeof name) return;
  std::memcpy(name, path, n);
  std::memcpy(name + n, suffix, sizeof suffix);
  // (An exec in the recorded process starts a new image that opens it again: no O_EXCL.)
  int fd = ::open(name, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return;
  }
  g_status_fd = fd;
  g_status_dev = st.st_dev;
  g_status_ino = st.st_ino;
  write_status("started\n", 8);
}

}  // namespace

bool profile_output_from_env(char* out, size_t n) {
  const char* path = std::getenv("WHYMISS_OUTPUT");
  if (!path || !*path || std::strlen(path) >= n) return false;
  if (const char* pid = std::getenv("WHYMISS_PID"); pid && std::atol(pid) != long(getpid())) return false;
  std::strcpy(out, path);
  const int saved_errno = errno;
  open_status(path);
  errno = saved_errno;
  return true;
}

void note_profile_written(int err) {
  const int saved_errno = errno;
  char text[32] = "written\n";
  size_t len = 8;
  if (err != 0) {
    // "error N\n", without stdio.
    std::memcpy(text, "error ", 6);
    len = 6;
    len += put_decimal(text + len, unsigned(err));
    text[len++] = '\n';
  }
  write_status(text, len);
  errno = saved_errno;
}

void note_runtime_disabled(const char* why) {
  const int saved_errno = errno;
  char text[1024] = "disabled ";
  size_t len = 9;
  for (const char* p = why; *p && len + 2 < sizeof text; ++p) text[len++] = *p == '\n' ? ' ' : *p;
  text[len++] = '\n';
  write_status(text, len);
  errno = saved_errno;
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
