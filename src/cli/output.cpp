#include "cli/output.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <new>
#include <vector>

#include "model/profile.h"

namespace whymiss::cli {
namespace fs = std::filesystem;

namespace {

std::string dir_of(const std::string& path) {
  fs::path dir = fs::path(path).parent_path();
  return dir.empty() ? std::string(".") : dir.string();
}

std::string quoted(const std::string& path) { return "'" + path + "'"; }

enum class How { Create, Replace, InPlace };

struct Target {
  How how = How::Create;
  struct stat st {};      // the existing file (for InPlace through a link: its target)
  bool regular = false;   // InPlace onto a regular file (through a symbolic link): truncate it
};

// What the first bytes of a regular file say it is.
enum class Content { Empty, Profile, Elf, Other, Unreadable };

Content sniff(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return Content::Unreadable;
  char head[8];
  ssize_t n;
  do n = ::read(fd, head, sizeof head);
  while (n < 0 && errno == EINTR);
  ::close(fd);
  if (n < 0) return Content::Unreadable;
  if (n == 0) return Content::Empty;
  if (size_t(n) == sizeof head && std::memcmp(head, profile::kMagic, sizeof head) == 0)
    return Content::Profile;
  if (n >= 4 && std::memcmp(head, "\x7f" "ELF", 4) == 0) return Content::Elf;
  return Content::Other;
}

// Whether an existing regular file may be overwritten (see output.h).
Status may_overwrite(const std::string& path, const OutputOptions& o) {
  if (o.force) return Ok{};
  const Content c = sniff(path);
  const std::string force = "; pass --force to replace it";
  if (o.kind == OutputKind::Profile) {
    if (c == Content::Empty || c == Content::Profile) return Ok{};
    if (c == Content::Unreadable)
      return make_error("refusing to overwrite " + quoted(path) +
                        ": whymiss cannot read it to check that it is a whymiss profile" + force);
    return make_error("refusing to overwrite " + quoted(path) + ": it is " +
                      (c == Content::Elf ? "a program" : "a file") +
                      ", not a whymiss profile" + force);
  }
  if (c == Content::Profile)
    return make_error("refusing to overwrite " + quoted(path) +
                      " with a report: it is a whymiss profile" + force);
  if (c == Content::Elf)
    return make_error("refusing to overwrite " + quoted(path) +
                      " with a report: it is a program (an ELF file)" + force);
  return Ok{};
}

Result<Target> classify(const std::string& path, const OutputOptions& o) {
  if (path.empty()) return make_error("the output file name is empty");
  const std::string q = quoted(path);
  Target t;
  if (::lstat(path.c_str(), &t.st) != 0) {
    if (errno == ENAMETOOLONG)
      return make_error("cannot write " + q + ": its name is too long for this system");
    if (errno != ENOENT) return make_error("cannot write " + q + ": " + std::strerror(errno));
    const std::string dir = dir_of(path);
    struct stat ds {};
    if (::stat(dir.c_str(), &ds) != 0 || !S_ISDIR(ds.st_mode))
      return make_error("cannot write " + q + ": directory '" + dir + "' does not exist");
    if (fs::path(path).filename().string().size() > NAME_MAX)
      return make_error("cannot write " + q + ": its name is too long for this system (over " +
                        std::to_string(NAME_MAX) + " bytes)");
    if (::access(dir.c_str(), W_OK | X_OK) != 0)
      return make_error("cannot write " + q + ": cannot create files in directory '" + dir +
                        "' (" + std::strerror(errno) + ")");
    t.how = How::Create;
    return t;
  }
  if (S_ISDIR(t.st.st_mode)) return make_error("cannot write " + q + ": it is a directory");
  if (S_ISREG(t.st.st_mode)) {
    if (Status st = may_overwrite(path, o); !st) return Error{st.error()};
    t.how = How::Replace;
    return t;
  }
  if (S_ISLNK(t.st.st_mode)) {
    if (::stat(path.c_str(), &t.st) != 0) {
      if (errno == ENOENT)
        return make_error("cannot write " + q +
                          ": it is a symbolic link to a file that does not exist");
      return make_error("cannot write " + q + ": " + std::strerror(errno));
    }
    if (S_ISDIR(t.st.st_mode))
      return make_error("cannot write " + q + ": it is a symbolic link to a directory");
    if (S_ISREG(t.st.st_mode)) {
      if (Status st = may_overwrite(path, o); !st) return Error{st.error()};
      t.regular = true;
    }
  }
  if (S_ISSOCK(t.st.st_mode)) return make_error("cannot write " + q + ": it is a socket");
  t.how = How::InPlace;
  return t;
}

bool write_all(int fd, std::string_view data) {
  const char* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) {
      errno = EIO;
      return false;
    }
    p += n;
    left -= size_t(n);
  }
  return true;
}

// Runs the writer; a writer that runs out of memory (a profile's tables are laid out as it
// writes) is a write that failed, not an exception past the temporary file it was writing.
int run_writer(const OutputWriter& data, int fd) {
  try {
    return data(fd);
  } catch (const std::bad_alloc&) {
    return ENOMEM;
  }
}

Status write_in_place(const std::string& path, const Target& t, const OutputWriter& data) {
  // No O_CREAT: the path was a device, FIFO or link a moment ago, and must not become a new
  // file if it has been removed since.
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY | (t.regular ? O_TRUNC : 0));
  if (fd < 0) return make_error("cannot write '" + path + "': " + std::strerror(errno));
  int err = run_writer(data, fd);
  if (!err && t.regular && ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && !err && errno != EINTR) err = errno;
  if (err) return make_error("cannot write '" + path + "': " + std::strerror(err));
  return Ok{};
}

// Moves `tmp` to `path` without replacing anything there.
int rename_noreplace(const char* tmp, const char* path) {
  if (::renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_NOREPLACE) == 0) return 0;
  if (errno != EINVAL && errno != ENOSYS) return errno;
  // A file system without RENAME_NOREPLACE: link() refuses an existing name too.
  if (::link(tmp, path) == 0) {
    ::unlink(tmp);
    return 0;
  }
  return errno;
}

Status write_replacing(const std::string& path, const Target& t, const OutputOptions& o,
                       const OutputWriter& data) {
  const std::string q = quoted(path);
  std::string tmpl = (fs::path(dir_of(path)) / ".whymiss-out.XXXXXX").string();
  std::vector<char> tmp(tmpl.begin(), tmpl.end());
  tmp.push_back('\0');
  int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0)
    return make_error("cannot write " + q + ": cannot create a temporary file next to it (" +
                      std::strerror(errno) + ")");
  mode_t mode;
  if (t.how == How::Replace) {
    mode = t.st.st_mode & 07777;
    if (::geteuid() == 0) (void)!::fchown(fd, t.st.st_uid, t.st.st_gid);
  } else if (o.kind == OutputKind::Profile) {
    mode = 0600;
  } else {
    mode_t mask = ::umask(0);
    ::umask(mask);
    mode = 0666 & ~mask;
  }
  int err = ::fchmod(fd, mode) == 0 ? 0 : errno;
  if (!err) err = run_writer(data, fd);
  if (!err && ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && !err && errno != EINTR) err = errno;
  if (!err) {
    if (t.how == How::Create) {
      err = rename_noreplace(tmp.data(), path.c_str());
      if (err == EEXIST) {
        ::unlink(tmp.data());
        return make_error("cannot write " + q +
                          ": a file of that name appeared meanwhile, and was left alone");
      }
    } else {
      // Still the file that was checked (not swapped for another meanwhile)?
      struct stat now {};
      if (::lstat(path.c_str(), &now) != 0 || now.st_dev != t.st.st_dev ||
          now.st_ino != t.st.st_ino) {
        ::unlink(tmp.data());
        return make_error("cannot write " + q + ": it was replaced meanwhile, and was left alone");
      }
      if (::rename(tmp.data(), path.c_str()) != 0) err = errno;
    }
  }
  if (err) {
    ::unlink(tmp.data());
    return make_error("cannot write " + q + ": " + std::strerror(err));
  }
  return Ok{};
}

}  // namespace

Status check_output_path(const std::string& path, const OutputOptions& o) {
  auto t = classify(path, o);
  if (!t) return Error{t.error()};
  return Ok{};
}

Status write_output(const std::string& path, const OutputWriter& data, const OutputOptions& o) {
  auto t = classify(path, o);
  if (!t) return Error{t.error()};
  if (t->how == How::InPlace) return write_in_place(path, *t, data);
  return write_replacing(path, *t, o, data);
}

Status write_output(const std::string& path, std::string_view data, const OutputOptions& o) {
  auto write = [data](int fd) { return write_all(fd, data) ? 0 : (errno ? errno : EIO); };
  return write_output(path, write, o);
}

}  // namespace whymiss::cli
