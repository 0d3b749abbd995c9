/* Query interface of the recording sink used by the ABI tests (tests/runtime_abi). C and C++.
 *
 * The sink implements whymiss::rt::on_access/on_range/on_init by counting into static arrays (no
 * allocation, lock-free, async-signal-safe). Totals count everything; the "window" counters and the
 * event log only cover events inside the address window set by rec_watch(), so the test program's
 * own (instrumented) bookkeeping outside the window does not disturb them. */
#ifndef WHYMISS_TESTS_RUNTIME_ABI_RECORDING_SINK_H
#define WHYMISS_TESTS_RUNTIME_ABI_RECORDING_SINK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { REC_LOG_MAX = 512 };

enum rec_kind { REC_READ = 0, REC_WRITE = 1, REC_RANGE_READ = 2, REC_RANGE_WRITE = 3 };

struct rec_event {
  uintptr_t ip;   /* return address in the instrumented code */
  uintptr_t addr;
  uint64_t size;
  uint32_t kind;  /* enum rec_kind */
};

struct rec_stats {
  uint64_t inits;               /* on_init calls (the ABI layer promises exactly one) */
  uint64_t total_access[2];     /* [write] every on_access, anywhere */
  uint64_t total_range[2];      /* [write] every on_range, anywhere */
  /* Accesses lying entirely inside the window, by [write][size]; sizes other than 1..16 go to [w][0]. */
  uint64_t win_access[2][17];
  uint64_t win_access_bytes[2]; /* [write] sum of their sizes */
  uint64_t win_range[2];        /* [write] ranges overlapping the window */
  uint64_t win_range_bytes[2];  /* [write] overlapping bytes of those ranges */
  /* The ABI layer's re-entrancy guard as the runtime's pthread hooks take it (enter_sink): tries
   * from inside on_access, and how many of them were let in (must be none). */
  uint64_t enter_tries_inside, entered_inside;
  uint64_t log_count;           /* window events seen; the first REC_LOG_MAX are in log[] */
  struct rec_event log[REC_LOG_MAX];
};

/* Sets the window to [lo, lo+len) and clears the window counters and the log (not the totals).
 * Call while no other thread is running instrumented code on the window. */
void rec_watch(const volatile void* lo, size_t len);
/* enter_sink() from outside the sink: 1 when it is let in, a second try meanwhile is not, and after
 * leave_sink() a third is let in again; 0 otherwise. */
int rec_enter_outside(void);
/* Copies the counters out (performed by the uninstrumented sink: not itself reported). */
void rec_snapshot(struct rec_stats* out);

#ifdef __cplusplus
}
#endif

#endif
