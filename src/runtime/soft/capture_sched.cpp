// The capture stage's scheduler: candidate tables fed by note_sample, and tick, which ends
// windows and arms new ones.
//
// Candidates. Instructions: a bounded open-addressing table keyed by ip, counting samples.
// Lines: keyed by line address, remembering the first sampling thread, whether another thread
// and a write were sampled, and per 8-byte word an instruction and the access flags seen. Both
// are lock-free and approximate under races (a count lost or a recycled entry inheriting a stale
// count is harmless: they only rank candidates). Counts are halved every cfg.decay_ns so the
// ranking follows the program's phases; entries decayed to zero are recycled.
//
// Windows. A window is one instruction (execution breakpoint) or one sampled word of a shared
// line (watchpoint), armed in the same slot (debug register) of every tracked thread, threads
// added later included. It ends when cfg.window_ns has passed or every thread it was armed in
// has taken cfg.captures_per_window hits (the kernel disabled its event). Slots are shared:
// while there are shared-line words to watch, up to half of the free slots go to them, the
// rest to the hottest instructions (>= cfg.min_samples samples), and any slot still free to
// more words. An instruction or word is not armed again for cfg.rearm_ns, so other candidates
// get their turn (rotation).
//
// Pacing. Each trap costs the trapped thread ~hit_cost_ns. A budget of capture time accrues at
// budget_permille of wall time (capped at one second's worth); an ended window is charged its
// busiest thread's hits x hit_cost_ns; new windows are armed only while the budget is positive.
// The overshoot is bounded by the windows open at once (slots x captures_per_window hits).
#include <sched.h>

#include <algorithm>
#include <cerrno>

#include "runtime/soft/capture_internal.h"
#include "runtime/soft/modules.h"

namespace whymiss::soft::capture {

using namespace detail;

namespace {

uint32_t hash64(uint64_t k, uint32_t mask) {
  return uint32_t((k * 0x9E3779B97F4A7C15ull) >> 40) & mask;
}

void bump_hot(State& s, uint64_t ip) {
  const uint32_t h = hash64(ip, kHotEntries - 1);
  for (uint32_t i = 0; i < kProbe; ++i) {
    HotEntry& e = s.hot[(h + i) & (kHotEntries - 1)];
    uint64_t k = e.ip.load(std::memory_order_relaxed);
    if (k == 0 && e.ip.compare_exchange_strong(k, ip, std::memory_order_relaxed)) k = ip;
    if (k == ip) {
      e.count.fetch_add(1, std::memory_order_relaxed);
      return;
    }
  }
}

void note_line(State& s, const profile::SampleRecord& r) {
  const uint64_t key = r.addr / kLineBytes + 1;
  const uint32_t h = hash64(key, kLineEntries - 1);
  for (uint32_t i = 0; i < kProbe; ++i) {
    LineEntry& e = s.lines[(h + i) & (kLineEntries - 1)];
    uint64_t k = e.line.load(std::memory_order_relaxed);
    if (k == 0 && e.line.compare_exchange_strong(k, key, std::memory_order_relaxed)) k = key;
    if (k != key) continue;
    e.count.fetch_add(1, std::memory_order_relaxed);
    uint32_t first = kNone;
    if (!e.first_thread.compare_exchange_strong(first, r.thread, std::memory_order_relaxed) &&
        first != r.thread)
      e.multi.store(1, std::memory_order_relaxed);
    if (r.flags & profile::kAccessWrite) e.written.store(1, std::memory_order_relaxed);
    const uint32_t w = uint32_t(r.addr % kLineBytes) / 8;
    if ((r.flags & profile::kAccessWrite) || e.word_ip[w].load(std::memory_order_relaxed) == 0)
      e.word_ip[w].store(r.ip, std::memory_order_relaxed);
    e.word_flags[w].fetch_or(r.flags & (profile::kAccessRead | profile::kAccessWrite),
                             std::memory_order_relaxed);
    return;
  }
}

bool hold(Thread& t) {
  uint32_t expect = kLive;
  return t.state.compare_exchange_strong(expect, kBusy, std::memory_order_acquire);
}
void release(Thread& t) { t.state.store(kLive, std::memory_order_release); }

bool int3(const State& s) {
  return s.backend.load(std::memory_order_relaxed) == uint32_t(profile::CaptureBackend::Int3);
}

bool cooled(uint64_t last, uint64_t now, uint64_t rearm) { return last == 0 || now - last >= rearm; }

// Halves the counts; recycles entries at zero that are not in their re-arm cooldown.
void decay(State& s, uint64_t now) {
  for (uint32_t i = 0; i < kHotEntries; ++i) {
    HotEntry& e = s.hot[i];
    if (!e.ip.load(std::memory_order_relaxed)) continue;
    const uint32_t c = e.count.load(std::memory_order_relaxed);
    e.count.fetch_sub((c + 1) / 2, std::memory_order_relaxed);
    if (c <= 1 && cooled(e.last_armed_ns, now, s.cfg.rearm_ns)) {
      e.last_armed_ns = 0;
      e.ip.store(0, std::memory_order_relaxed);
    }
  }
  for (uint32_t i = 0; i < kLineEntries; ++i) {
    LineEntry& e = s.lines[i];
    if (!e.line.load(std::memory_order_relaxed)) continue;
    const uint32_t c = e.count.load(std::memory_order_relaxed);
    e.count.fetch_sub((c + 1) / 2, std::memory_order_relaxed);
    if (c > 1) continue;
    bool cool = true;
    for (uint32_t w = 0; w < kWords; ++w) cool = cool && cooled(e.last_armed_ns[w], now, s.cfg.rearm_ns);
    if (!cool) continue;
    e.first_thread.store(kNone, std::memory_order_relaxed);
    e.multi.store(0, std::memory_order_relaxed);
    e.written.store(0, std::memory_order_relaxed);
    for (uint32_t w = 0; w < kWords; ++w) {
      e.word_ip[w].store(0, std::memory_order_relaxed);
      e.word_flags[w].store(0, std::memory_order_relaxed);
      e.last_armed_ns[w] = 0;
    }
    e.line.store(0, std::memory_order_release);
  }
}

// A candidate window: an instruction or a word, its rank, and where its cooldown is kept.
struct Candidate {
  uint32_t score = 0;
  uint32_t reason = 0;
  uint64_t ip = 0, word = 0;
  uint64_t* last_armed = nullptr;
};

// Keeps the `cap` best candidates in `best` (sorted, highest first); ties keep scan order.
void offer(Candidate* best, uint32_t* n, uint32_t cap, const Candidate& c) {
  if (cap == 0) return;
  uint32_t pos = *n;
  while (pos > 0 && best[pos - 1].score < c.score) --pos;
  if (pos >= cap) return;
  const uint32_t last = std::min(*n, cap - 1);
  for (uint32_t i = last; i > pos; --i) best[i] = best[i - 1];
  best[pos] = c;
  if (*n < cap) ++*n;
}

bool window_open_on(State& s, uint32_t reason, uint64_t key) {
  for (uint32_t k = 0; k < s.cfg.slots; ++k) {
    const uint32_t w = s.slot_window[k];
    if (w == kNone) continue;
    if (reason == s.windows[w].reason && key == (reason ? s.windows[w].word : s.windows[w].ip)) return true;
  }
  return false;
}

uint32_t hot_candidates(State& s, uint64_t now, Candidate* best, uint32_t cap) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < kHotEntries && cap; ++i) {
    HotEntry& e = s.hot[i];
    const uint64_t ip = e.ip.load(std::memory_order_relaxed);
    const uint32_t c = e.count.load(std::memory_order_relaxed);
    if (!ip || c < s.cfg.min_samples || !cooled(e.last_armed_ns, now, s.cfg.rearm_ns)) continue;
    if (window_open_on(s, 0, ip)) continue;
    offer(best, &n, cap, Candidate{c, 0, ip, 0, &e.last_armed_ns});
  }
  return n;
}

uint32_t watch_candidates(State& s, uint64_t now, Candidate* best, uint32_t cap) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < kLineEntries && cap; ++i) {
    LineEntry& e = s.lines[i];
    const uint64_t key = e.line.load(std::memory_order_acquire);
    if (!key || !e.multi.load(std::memory_order_relaxed) || !e.written.load(std::memory_order_relaxed))
      continue;
    const uint32_t c = e.count.load(std::memory_order_relaxed);
    for (uint32_t w = 0; w < kWords; ++w) {
      const uint64_t word = (key - 1) * kLineBytes + w * 8;
      if (!e.word_flags[w].load(std::memory_order_relaxed) ||
          !cooled(e.last_armed_ns[w], now, s.cfg.rearm_ns) || window_open_on(s, 1, word))
        continue;
      offer(best, &n, cap, Candidate{c, 1, e.word_ip[w].load(std::memory_order_relaxed), word,
                                     &e.last_armed_ns[w]});
    }
  }
  return n;
}

// Is the instruction in mapped code of a loaded module? (A breakpoint elsewhere could never
// fire, and a trap there could not be decoded.)
bool in_code(uint64_t ip) {
  const soft::detail::ModuleTable* t = soft::detail::current_modules();
  return t && soft::detail::find_segment(*t, ip) != nullptr;
}

// Arms candidate `c` in slot `slot` of every live thread; publishes the window if any took it.
void arm_window(State& s, const Candidate& c, uint32_t slot, uint64_t now) {
  const uint32_t w = s.nwindows.load(std::memory_order_relaxed);
  if (w >= s.cfg.max_windows) return;
  *c.last_armed = now;  // tried now, whatever happens: the next candidate gets the next turn
  if (c.reason == 0 && !in_code(c.ip)) {
    s.rejected.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  Window& win = s.windows[w];
  win.ip = c.ip;
  win.word = c.word;
  win.start_ns = now;
  win.end_ns = 0;
  win.reason = c.reason;
  win.slot = slot;
  win.threads = 0;
  win.open = 1;
  win.captures.store(0, std::memory_order_relaxed);
  win.dropped.store(0, std::memory_order_relaxed);
  uint32_t tried = 0;
  const uint32_t hw = s.thread_hw.load(std::memory_order_acquire);
  for (uint32_t e = 0; e < hw; ++e) {
    Thread& t = s.threads[e];
    if (!hold(t)) continue;
    ++tried;
    if (arm_event(e, slot, w) == 0) ++win.threads;
    t.window[slot] = w;  // attempted: not retried for this window
    release(t);
  }
  if (int3(s) && win.threads > 0) {
    // The threads are marked first, so their first hits are recorded; then the int3 goes in.
    s.patches[slot].limit.store(win.threads * s.cfg.captures_per_window, std::memory_order_relaxed);
    const int err = int3_patch(slot, w, c.ip);
    if (err) {
      // Not a memory instruction (or undecodable, pushf/popf): rejected; an mprotect refusal
      // was counted as an open failure. Either way the window is not published.
      if (err == EINVAL) s.rejected.fetch_add(1, std::memory_order_relaxed);
      for (uint32_t e = 0; e < hw; ++e) {
        Thread& t = s.threads[e];
        if (!hold(t)) continue;
        disarm_event(e, slot);
        t.window[slot] = kNone;
        release(t);
      }
      win.open = 0;
      return;
    }
  }
  if (win.threads == 0) {
    win.open = 0;
    // Refused everywhere (debug registers taken, not permitted): leave the slot alone a while
    // rather than paying the failed syscalls every tick.
    if (tried) s.slot_backoff[slot] = now + s.cfg.decay_ns;
    return;
  }
  s.slot_window[slot] = w;
  if (c.reason == 1) s.watch_windows.fetch_add(1, std::memory_order_relaxed);
  s.nwindows.store(w + 1, std::memory_order_release);
}

void end_window(State& s, uint32_t slot, uint64_t now, uint32_t max_hits) {
  const uint32_t w = s.slot_window[slot];
  Window& win = s.windows[w];
  if (int3(s)) int3_unpatch(slot);  // original byte and page protection back
  win.end_ns = now;
  win.open = 0;
  s.slot_window[slot] = kNone;
  s.budget_ns -= int64_t(max_hits) * int64_t(int3(s) ? s.cfg.int3_hit_cost_ns : s.cfg.hit_cost_ns);
}

}  // namespace

namespace detail {

void sched_reset(uint64_t now) {
  State& s = g();
  for (uint32_t k = 0; k < kMaxSlots; ++k) s.slot_window[k] = kNone, s.slot_backoff[k] = 0;
  s.budget_ns = int64_t(uint64_t(s.cfg.budget_permille) * 1'000'000);  // one second's worth
  s.last_tick_ns = now;
  s.last_decay_ns = now;
}

// Ends every open window and closes every event (stop; the caller excludes tick).
void end_all_windows(uint64_t now) {
  State& s = g();
  const uint32_t hw = s.thread_hw.load(std::memory_order_acquire);
  for (uint32_t e = 0; e < hw; ++e) {
    Thread& t = s.threads[e];
    while (!hold(t)) {  // kLeaving threads close their own events; kFree ones have none
      const uint32_t st = t.state.load(std::memory_order_acquire);
      if (st == kFree || st == kLeaving) break;
      sched_yield();
    }
    if (t.state.load(std::memory_order_relaxed) != kBusy) continue;
    for (uint32_t k = 0; k < kMaxSlots; ++k) disarm_event(e, k);
    release(t);
  }
  for (uint32_t k = 0; k < kMaxSlots; ++k)
    if (s.slot_window[k] != kNone) end_window(s, k, now, 0);
}

}  // namespace detail

void note_sample(const profile::SampleRecord& r) {
  State& s = g();
  if (!s.ready.load(std::memory_order_acquire)) return;
  if (r.ip) bump_hot(s, r.ip);
  if (s.cfg.watchpoints && r.addr) note_line(s, r);
}

void tick(uint64_t now) {
  State& s = g();
  if (!s.on.load(std::memory_order_acquire)) return;
  const int saved = errno;
  if (s.sched_busy.exchange(true, std::memory_order_acquire)) return;
  const uint32_t slots = s.cfg.slots;
  const uint32_t cap = s.cfg.captures_per_window;

  // Budget accrues with time, at most one second's worth.
  if (now > s.last_tick_ns) {
    const int64_t limit = int64_t(uint64_t(s.cfg.budget_permille) * 1'000'000);
    s.budget_ns = std::min(limit, s.budget_ns + int64_t((now - s.last_tick_ns) * s.cfg.budget_permille / 1000));
  }
  s.last_tick_ns = std::max(s.last_tick_ns, now);

  // Pass 1: per thread, arm open windows it does not have yet (threads added since), and see
  // which windows still have a thread with hits left.
  bool live[kMaxSlots] = {};
  uint32_t max_hits[kMaxSlots] = {};
  const uint32_t hw = s.thread_hw.load(std::memory_order_acquire);
  for (uint32_t e = 0; e < hw; ++e) {
    Thread& t = s.threads[e];
    if (!hold(t)) continue;
    for (uint32_t k = 0; k < slots; ++k) {
      const uint32_t w = s.slot_window[k];
      if (w == kNone) continue;
      if (t.window[k] != w) {
        disarm_event(e, k);
        if (arm_event(e, k, w) == 0) {
          ++s.windows[w].threads;
          if (int3(s)) s.patches[k].limit.fetch_add(cap, std::memory_order_relaxed);
        }
        t.window[k] = w;
      }
      if (t.fd[k] < 0) continue;
      const uint32_t h = t.hits[k].load(std::memory_order_relaxed);
      // Int3: hits past the bound still trapped (the int3 is everyone's): they are charged.
      max_hits[k] = std::max(max_hits[k], int3(s) ? h : std::min(h, cap));
      if (h < cap) live[k] = true;
    }
    release(t);
  }
  // Int3: a window lives while its int3 is re-inserted, i.e. until its hit limit (every armed
  // thread's captures_per_window, counting untracked threads' hits too) is reached.
  if (int3(s))
    for (uint32_t k = 0; k < slots; ++k)
      if (s.slot_window[k] != kNone)
        live[k] = ctl_state(s.patches[k].ctl.load(std::memory_order_acquire)) == kPatchArmed;
  // Pass 2: end expired or exhausted windows and close their events.
  bool ending[kMaxSlots] = {};
  bool any_ending = false;
  for (uint32_t k = 0; k < slots; ++k) {
    const uint32_t w = s.slot_window[k];
    if (w == kNone) continue;
    if (!live[k] || now >= s.windows[w].start_ns + s.cfg.window_ns) ending[k] = any_ending = true;
  }
  if (any_ending) {
    for (uint32_t e = 0; e < hw; ++e) {
      Thread& t = s.threads[e];
      if (!hold(t)) continue;
      for (uint32_t k = 0; k < slots; ++k)
        if (ending[k]) disarm_event(e, k);
      release(t);
    }
    for (uint32_t k = 0; k < slots; ++k)
      if (ending[k]) end_window(s, k, now, max_hits[k]);
  }

  if (now - s.last_decay_ns >= s.cfg.decay_ns) {
    decay(s, now);
    s.last_decay_ns = now;
  }

  // Int3: if the program installed its own SIGTRAP handler since, our int3s would reach it:
  // end every window now (bytes restored) and arm no more.
  if (int3(s) && !int3_handler_still_ours()) {
    s.sigtrap_taken.fetch_add(1, std::memory_order_relaxed);
    for (uint32_t e = 0; e < hw; ++e) {
      Thread& t = s.threads[e];
      if (!hold(t)) continue;
      for (uint32_t k = 0; k < slots; ++k) disarm_event(e, k);
      release(t);
    }
    for (uint32_t k = 0; k < slots; ++k)
      if (s.slot_window[k] != kNone) end_window(s, k, now, 0);
    s.on.store(false, std::memory_order_release);
  }

  // Pass 3: new windows in the free slots, while the budget lasts.
  uint32_t free_slots[kMaxSlots];
  uint32_t nfree = 0;
  for (uint32_t k = 0; k < slots; ++k)
    if (s.slot_window[k] == kNone && now >= s.slot_backoff[k]) free_slots[nfree++] = k;
  if (nfree && s.budget_ns > 0 && s.on.load(std::memory_order_acquire)) {
    Candidate watch[kMaxSlots], hot[kMaxSlots];
    const uint32_t nw_all = s.cfg.watchpoints ? watch_candidates(s, now, watch, nfree) : 0;
    const uint32_t nh_all = hot_candidates(s, now, hot, nfree);
    uint32_t nw = std::min(nw_all, (nfree + 1) / 2);
    const uint32_t nh = std::min(nh_all, nfree - nw);
    nw = std::min(nw_all, nfree - nh);
    uint32_t next = 0;
    for (uint32_t i = 0; i < nw; ++i) arm_window(s, watch[i], free_slots[next++], now);
    for (uint32_t i = 0; i < nh; ++i) arm_window(s, hot[i], free_slots[next++], now);
  }
  s.sched_busy.store(false, std::memory_order_release);
  errno = saved;
}

}  // namespace whymiss::soft::capture
