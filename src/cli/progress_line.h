// Exact mode's progress line: while `whymiss record` or `run` waits for a long program, it shows
// on its stderr, when that is a terminal, how many accesses the runtime has simulated and how
// long the program has run, at most every 2 seconds, on one line it overwrites (\r) and clears
// when the program ends. The counts come from a page the runtime maps (model/progress.h); the
// program's own output is never touched.
#pragma once
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "model/progress.h"

namespace whymiss::cli {

class ProgressLine {
 public:
  // Creates the page at `path` (a file in the recording's private directory) when `tty_fd` is a
  // terminal; null when it is not, or when the page cannot be made (the run goes on without).
  static std::unique_ptr<ProgressLine> create(const std::string& path, int tty_fd);
  ~ProgressLine();
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  // "WHYMISS_PROGRESS=<path>", for the program's environment.
  std::string env() const { return "WHYMISS_PROGRESS=" + path_; }
  // Waits for the child `pid` as waitpid(pid, status, 0) does, showing the line every `every`
  // meanwhile (from the runtime's first tick on); clears it before returning.
  void wait(pid_t pid, int* status, std::chrono::milliseconds every = std::chrono::seconds(2));

 private:
  ProgressLine(std::string path, int fd, progress::Page* page)
      : path_(std::move(path)), fd_(fd), page_(page), start_(std::chrono::steady_clock::now()) {}
  void show();
  void clear();

  std::string path_;
  int fd_;
  progress::Page* page_;
  std::chrono::steady_clock::time_point start_;
  bool shown_ = false;
};

// "whymiss: 1,234,567 accesses simulated, 1:05 elapsed" (H:MM:SS from an hour on).
std::string progress_text(uint64_t accesses, std::chrono::seconds elapsed);

}  // namespace whymiss::cli
