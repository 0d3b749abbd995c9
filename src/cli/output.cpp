#include "cli/output.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

namespace whymiss::cli {
namespace fs = std::filesystem;

namespace {

fs::path dir_of(const std::string& path) {
  fs::path dir = fs::path(path).parent_path();
  return dir.empty() ? fs::path(".") : dir;
}

}  // namespace

Status check_output_path(const std::string& path) {
  if (path.empty()) return make_error("the output file name is empty");
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    return make_error("cannot write '" + path + "': it is a directory");
  }
  fs::path dir = dir_of(path);
  if (!fs::is_directory(dir, ec)) {
    return make_error("cannot write '" + path + "': directory '" + dir.string() +
                      "' does not exist");
  }
  return Ok{};
}

Status write_file_atomically(const std::string& path, std::string_view data) {
  if (Status st = check_output_path(path); !st) return st;
  fs::path target(path);
  std::string tmpl = (dir_of(path) / ("." + target.filename().string() + ".tmp.XXXXXX")).string();
  std::vector<char> tmp(tmpl.begin(), tmpl.end());
  tmp.push_back('\0');
  int fd = mkstemp(tmp.data());
  if (fd < 0) {
    return make_error("cannot write '" + path + "': cannot create a temporary file next to it (" +
                      std::strerror(errno) + ")");
  }
  // mkstemp makes the file 0600; give it the permissions a plain create would have.
  mode_t mask = umask(0);
  umask(mask);
  fchmod(fd, 0666 & ~mask);

  int saved_errno = 0;
  const char* p = data.data();
  size_t left = data.size();
  while (left > 0 && saved_errno == 0) {
    ssize_t n = write(fd, p, left);
    if (n < 0) {
      if (errno != EINTR) saved_errno = errno;
      continue;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (saved_errno == 0 && fsync(fd) != 0) saved_errno = errno;
  if (close(fd) != 0 && saved_errno == 0) saved_errno = errno;
  if (saved_errno == 0 && std::rename(tmp.data(), path.c_str()) != 0) saved_errno = errno;
  if (saved_errno != 0) {
    unlink(tmp.data());
    return make_error("cannot write '" + path + "': " + std::strerror(saved_errno));
  }
  return Ok{};
}

}  // namespace whymiss::cli
