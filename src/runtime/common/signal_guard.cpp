#include "runtime/common/signal_guard.h"

#include <dlfcn.h>
#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>

#include "runtime/common/heap.h"
#include "runtime/common/runtime_state.h"
#include "runtime/common/spinlock.h"

namespace whymiss::rt::sig {
namespace {

const int kGuarded[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGINT, SIGTERM, SIGHUP, SIGQUIT};
constexpr int kMaxSig = 65;

// Set while the program's chosen disposition is SIG_DFL and ours stands in for it.
std::atomic<bool> g_guarding[kMaxSig] = {};
std::atomic<FinishFn> g_finish{nullptr};
std::atomic<pid_t> g_owner{0};
std::atomic<int> g_unblocked{0};  // keep_unblocked's signal, or 0

using MaskFn = int (*)(int, const sigset_t*, sigset_t*);
MaskFn g_next_sigprocmask = nullptr, g_next_pthread_sigmask = nullptr;

// libc's definitions, looked up while the process is single-threaded (dlsym is not
// async-signal-safe, and sigprocmask may be called from handlers).
__attribute__((constructor)) void find_mask_functions() {
  g_next_sigprocmask = reinterpret_cast<MaskFn>(dlsym(RTLD_NEXT, "sigprocmask"));
  g_next_pthread_sigmask = reinterpret_cast<MaskFn>(dlsym(RTLD_NEXT, "pthread_sigmask"));
}

// `set` without the signal the program may not block (into `buf`), or `set` itself.
const sigset_t* without_unblocked(int how, const sigset_t* set, sigset_t* buf) {
  const int keep = g_unblocked.load(std::memory_order_relaxed);
  if (!keep || !set || (how != SIG_BLOCK && how != SIG_SETMASK) || sigismember(set, keep) != 1) return set;
  *buf = *set;
  sigdelset(buf, keep);
  return buf;
}

// The reserved signals and the program's disposition for each: two slots and an atomic index
// per signal, so that a handler reads a complete record while a writer (under g_slot_lock)
// fills the other.
constexpr int kMaxReserved = 2;
struct Reserved {
  std::atomic<int> signo{0};
  struct sigaction program[2] = {};
  std::atomic<int> slot{0};
  std::atomic<bool> claimed{false};
};
constinit Reserved g_res[kMaxReserved];  // constinit: reserve() runs from a constructor before dynamic initialisation
SpinLock g_slot_lock;

Reserved* find_reserved(int s) {
  if (s <= 0) return nullptr;
  for (Reserved& r : g_res)
    if (r.signo.load(std::memory_order_acquire) == s) return &r;
  return nullptr;
}

using SigactionFn = int (*)(int, const struct sigaction*, struct sigaction*);

SigactionFn next_sigaction() {
  static std::atomic<SigactionFn> fn{nullptr};
  SigactionFn f = fn.load(std::memory_order_acquire);
  if (!f) {
    bool was = set_in_runtime(true);  // dlsym may allocate: not the program's allocation
    f = reinterpret_cast<SigactionFn>(dlsym(RTLD_NEXT, "sigaction"));
    set_in_runtime(was);
    fn.store(f, std::memory_order_release);
  }
  return f;
}

bool guarded_kind(int s) {
  for (int g : kGuarded)
    if (g == s) return true;
  return false;
}

bool is_fault(int s) { return s == SIGSEGV || s == SIGBUS || s == SIGILL || s == SIGFPE; }

// Ends the process the way the default action of `s` would, after the profile is written.
void die_by_default(int s) {
  if (FinishFn f = g_finish.load()) f(s);
  g_guarding[s].store(false);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  if (SigactionFn f = next_sigaction()) f(s, &dfl, nullptr);
  // A fault returns to the faulting instruction, which faults again under the default action;
  // other signals are raised again and delivered once this handler returns (they are blocked
  // while it runs), or at once if unblocked here.
  if (!is_fault(s)) {
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, s);
    raise(s);
    pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
  }
}

void stand_in(int s) {
  int saved = errno;
  die_by_default(s);
  errno = saved;
}

}  // namespace

int real_sigaction(int s, const struct sigaction* act, struct sigaction* old) {
  SigactionFn f = next_sigaction();
  if (!f) {
    errno = ENOSYS;
    return -1;
  }
  return f(s, act, old);
}

void install_fatal_guards(FinishFn finish, pid_t owner) {
  g_finish.store(finish);
  g_owner.store(owner);
  SigactionFn f = next_sigaction();
  if (!f) return;
  for (int s : kGuarded) {
    struct sigaction old {};
    if (f(s, nullptr, &old) != 0 || old.sa_handler != SIG_DFL || (old.sa_flags & SA_SIGINFO)) continue;
    struct sigaction sa {};
    sa.sa_handler = stand_in;
    sigemptyset(&sa.sa_mask);
    if (f(s, &sa, nullptr) == 0) g_guarding[s].store(true);
  }
}

void reserve(int signo) {
  LockGuard lock(g_slot_lock);
  if (find_reserved(signo)) return;
  for (Reserved& r : g_res) {
    if (r.signo.load(std::memory_order_relaxed) != 0) continue;
    r.program[0] = {};
    r.program[0].sa_handler = SIG_DFL;
    r.slot.store(0, std::memory_order_release);
    r.signo.store(signo, std::memory_order_release);
    return;
  }
}

void keep_unblocked(int signo) { g_unblocked.store(signo, std::memory_order_relaxed); }

bool program_claimed(int signo) {
  const Reserved* r = find_reserved(signo);
  return r && r->claimed.load(std::memory_order_relaxed);
}

void forward(int s, siginfo_t* si, void* ctx) {
  const Reserved* r = find_reserved(s);
  if (!r) return;
  const struct sigaction& a = r->program[r->slot.load(std::memory_order_acquire)];
  if (a.sa_flags & SA_SIGINFO) {
    if (a.sa_sigaction) a.sa_sigaction(s, si, ctx);
    return;
  }
  if (a.sa_handler == SIG_IGN) return;
  if (a.sa_handler == SIG_DFL) {  // terminate (a real-time signal's default; SIGTRAP's dumps core)
    int saved = errno;
    die_by_default(s);
    errno = saved;
    return;
  }
  a.sa_handler(s);
}

}  // namespace whymiss::rt::sig

namespace sg = whymiss::rt::sig;

// The program's masks (see keep_unblocked). Before libc's functions are known (a constructor
// that runs before ours), the system call, without glibc's two internal signals (32, 33) as
// glibc's wrappers do.
namespace {
int raw_sigmask(int how, const sigset_t* set, sigset_t* old) {
  sigset_t buf;
  if (set) {
    buf = *set;
    // Signals 32 and 33 are bits 31 and 32 of the kernel's mask (glibc's sigdelset refuses them).
    reinterpret_cast<unsigned long*>(&buf)[0] &= ~((1ul << 31) | (1ul << 32));
    set = &buf;
  }
  return int(syscall(SYS_rt_sigprocmask, how, set, old, size_t(8)));
}
}  // namespace

extern "C" __attribute__((visibility("default"))) int sigprocmask(int how, const sigset_t* set, sigset_t* old) {
  using namespace whymiss::rt::sig;
  sigset_t buf;
  set = without_unblocked(how, set, &buf);
  return g_next_sigprocmask ? g_next_sigprocmask(how, set, old) : raw_sigmask(how, set, old);
}

extern "C" __attribute__((visibility("default"))) int pthread_sigmask(int how, const sigset_t* set,
                                                                      sigset_t* old) {
  using namespace whymiss::rt::sig;
  sigset_t buf;
  set = without_unblocked(how, set, &buf);
  if (g_next_pthread_sigmask) return g_next_pthread_sigmask(how, set, old);
  const int saved = errno;  // pthread_sigmask reports by its result, not errno
  const int rc = raw_sigmask(how, set, old) == 0 ? 0 : errno;
  errno = saved;
  return rc;
}

// The program's view of dispositions (see signal_guard.h).
extern "C" __attribute__((visibility("default"))) int sigaction(int s, const struct sigaction* act,
                                                                struct sigaction* old) {
  using namespace whymiss::rt::sig;
  // A handler's mask must not block keep_unblocked's signal either.
  struct sigaction stripped;
  if (act && g_unblocked.load(std::memory_order_relaxed) &&
      sigismember(&act->sa_mask, g_unblocked.load(std::memory_order_relaxed)) == 1) {
    stripped = *act;
    sigdelset(&stripped.sa_mask, g_unblocked.load(std::memory_order_relaxed));
    act = &stripped;
  }
  if (s <= 0 || s >= kMaxSig || getpid() != g_owner.load(std::memory_order_relaxed))
    return real_sigaction(s, act, old);
  if (Reserved* r = find_reserved(s)) {
    whymiss::rt::LockGuard lock(g_slot_lock);
    int cur = r->slot.load(std::memory_order_relaxed);
    if (old) *old = r->program[cur];
    if (act) {
      r->program[1 - cur] = *act;
      r->slot.store(1 - cur, std::memory_order_release);
      if ((act->sa_flags & SA_SIGINFO) || act->sa_handler != SIG_DFL) r->claimed.store(true);
    }
    return 0;
  }
  if (!guarded_kind(s)) return real_sigaction(s, act, old);
  bool guarding = g_guarding[s].load();
  struct sigaction current {};
  if (int rc = real_sigaction(s, nullptr, &current); rc != 0) return rc;
  if (old) {
    *old = current;
    if (guarding) {
      old->sa_handler = SIG_DFL;
      old->sa_flags &= ~SA_SIGINFO;
    }
  }
  if (!act) return 0;
  bool wants_default = !(act->sa_flags & SA_SIGINFO) && act->sa_handler == SIG_DFL;
  if (wants_default && whymiss::rt::recording()) {
    if (guarding) return 0;
    struct sigaction sa = *act;
    sa.sa_handler = stand_in;
    int rc = real_sigaction(s, &sa, nullptr);
    if (rc == 0) g_guarding[s].store(true);
    return rc;
  }
  g_guarding[s].store(false);
  return real_sigaction(s, act, nullptr);
}

extern "C" __attribute__((visibility("default"))) sighandler_t signal(int s, sighandler_t handler) {
  struct sigaction sa {}, old {};
  sa.sa_handler = handler;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // glibc's signal() has BSD semantics
  if (sigaction(s, &sa, &old) != 0) return SIG_ERR;
  return old.sa_handler;
}
