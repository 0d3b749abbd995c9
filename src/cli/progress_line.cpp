#include "cli/progress_line.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <new>

namespace whymiss::cli {

std::string progress_text(uint64_t accesses, std::chrono::seconds elapsed) {
  std::string n = std::to_string(accesses);
  for (int i = int(n.size()) - 3; i > 0; i -= 3) n.insert(size_t(i), ",");
  const long long s = elapsed.count();
  char t[48];
  if (s >= 3600) std::snprintf(t, sizeof t, "%lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
  else std::snprintf(t, sizeof t, "%lld:%02lld", s / 60, s % 60);
  return "whymiss: " + n + " accesses simulated, " + t + " elapsed";
}

std::unique_ptr<ProgressLine> ProgressLine::create(const std::string& path, int tty_fd) {
  if (!isatty(tty_fd)) return nullptr;
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return nullptr;
  void* m = MAP_FAILED;
  if (ftruncate(fd, off_t(progress::kSize)) == 0)
    m = mmap(nullptr, progress::kSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (m == MAP_FAILED) {
    unlink(path.c_str());
    return nullptr;
  }
  auto* page = new (m) progress::Page{progress::kMagic, {0}, {0}};
  return std::unique_ptr<ProgressLine>(new ProgressLine(path, tty_fd, page));
}

ProgressLine::~ProgressLine() {
  clear();
  munmap(page_, progress::kSize);
}

void ProgressLine::show() {
  if (page_->attached.load(std::memory_order_relaxed) == 0) return;  // no runtime yet
  const auto elapsed = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - start_);
  const std::string line = "\r" + progress_text(page_->accesses.load(std::memory_order_relaxed), elapsed) + "\033[K";
  if (::write(fd_, line.data(), line.size()) > 0) shown_ = true;
}

void ProgressLine::clear() {
  if (!shown_) return;
  shown_ = false;
  static const char kClear[] = "\r\033[K";
  (void)!::write(fd_, kClear, sizeof kClear - 1);
}

void ProgressLine::wait(pid_t pid, int* status, std::chrono::milliseconds every) {
  // A pidfd becomes readable when the child ends: poll on it with the period as timeout.
  const int pfd = int(syscall(SYS_pidfd_open, pid, 0));
  if (pfd >= 0) {
    pollfd p{pfd, POLLIN, 0};
    auto next = std::chrono::steady_clock::now() + every;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(next - std::chrono::steady_clock::now());
      const int r = poll(&p, 1, int(std::max<int64_t>(0, left.count())));
      if (r > 0) break;
      if (r < 0 && errno != EINTR) break;  // then wait without the line
      if (std::chrono::steady_clock::now() >= next) {
        show();
        next = std::chrono::steady_clock::now() + every;
      }
    }
    close(pfd);
  }
  while (waitpid(pid, status, 0) < 0 && errno == EINTR) {
  }
  clear();
}

}  // namespace whymiss::cli
