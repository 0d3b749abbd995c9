// /proc/self readers of the soft collectors (see proc_self.h).
#include "runtime/soft/proc_self.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace whymiss::soft::detail {

int mapping_prot(uint64_t addr, int* prot) {
  const int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  char buf[4096];
  char line[96];
  size_t ll = 0;
  bool found = false;
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) break;
    for (ssize_t i = 0; i < n && !found; ++i) {
      if (buf[i] != '\n') {
        if (ll < sizeof line - 1) line[ll++] = buf[i];
        continue;
      }
      line[ll] = 0;
      ll = 0;
      uint64_t lo = 0, hi = 0;
      const char* p = line;
      while (*p && *p != '-') lo = lo * 16 + uint64_t(*p <= '9' ? *p - '0' : (*p | 0x20) - 'a' + 10), ++p;
      if (*p == '-') ++p;
      while (*p && *p != ' ') hi = hi * 16 + uint64_t(*p <= '9' ? *p - '0' : (*p | 0x20) - 'a' + 10), ++p;
      if (*p == ' ') ++p;
      if (addr < lo || addr >= hi || !p[0] || !p[1] || !p[2]) continue;
      *prot = (p[0] == 'r' ? PROT_READ : 0) | (p[1] == 'w' ? PROT_WRITE : 0) | (p[2] == 'x' ? PROT_EXEC : 0);
      found = true;
    }
    if (found) break;
  }
  close(fd);
  return found ? 0 : ENOENT;
}

bool some_thread_refuses_int3() {
  const int dir = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return true;
  bool blocked = false;
  char dents[4096];
  for (;;) {
    const long n = syscall(SYS_getdents64, dir, dents, sizeof dents);
    if (n <= 0) {
      blocked = blocked || n < 0;
      break;
    }
    for (long off = 0; off < n && !blocked;) {
      const auto* d = reinterpret_cast<const struct dirent64*>(dents + off);
      off += d->d_reclen;
      if (d->d_name[0] < '0' || d->d_name[0] > '9') continue;
      char path[64] = "/proc/self/task/";
      size_t len = strlen(path);
      for (const char* c = d->d_name; *c && len < 50; ++c) path[len++] = *c;
      memcpy(path + len, "/status", 8);
      const int fd = open(path, O_RDONLY | O_CLOEXEC);
      if (fd < 0) continue;  // exited meanwhile
      // The whole file (a long Groups: line can push SigBlk past 2 KiB).
      char buf[16384];
      size_t got = 0;
      for (ssize_t r; got < sizeof buf - 1 && (r = read(fd, buf + got, sizeof buf - 1 - got)) > 0;)
        got += size_t(r);
      close(fd);
      if (got == 0) continue;  // exited meanwhile
      buf[got] = 0;
      const char* p = strstr(buf, "SigBlk:");
      if (!p) {
        blocked = true;  // cannot tell: assume the worst
        break;
      }
      p += 7;
      while (*p == ' ' || *p == '\t') ++p;
      uint64_t mask = 0;
      for (; (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'); ++p)
        mask = mask * 16 + uint64_t(*p <= '9' ? *p - '0' : *p - 'a' + 10);
      if (mask & (uint64_t(1) << (SIGTRAP - 1))) blocked = true;
      // Strict seccomp (mode 1) kills the thread for the system calls a breakpoint's handler
      // makes (mprotect, open of /proc/self/maps). Filters (mode 2: containers' default
      // profiles, which allow both) are not refused: documented limit.
      if (const char* q = strstr(buf, "Seccomp:")) {
        q += 8;
        while (*q == ' ' || *q == '\t') ++q;
        if (*q == '1') blocked = true;
      }
    }
    if (blocked) break;
  }
  close(dir);
  return blocked;
}

}  // namespace whymiss::soft::detail
