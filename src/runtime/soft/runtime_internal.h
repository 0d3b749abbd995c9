// State shared by the soft runtime's files (runtime.cpp: start, threads, signal handler,
// collector thread; finish.cpp: the profile at the end). Internal to libwhymiss-soft.so.
#pragma once
#include <pthread.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>

#include "model/profile.h"
#include "runtime/pmu/plan.h"
#include "runtime/soft/sampler.h"

namespace whymiss::pmu {
class LiveSampler;
}

namespace whymiss::rt::softrt {

constexpr uint32_t kMaxThreads = 1u << 16;
enum State : int { kOff = 0, kInitialising, kRecording, kFinished, kDisabled };

struct ThreadState {
  uint32_t index = 0;
  pid_t tid = 0;
  std::atomic<int> fd{-1};  // its task-clock event; -1 when none (refused, exited, forked child)
  uint64_t fs_base = 0, gs_base = 0;
  // Set while the thread's signal handler records a sample: finish() waits for it to clear
  // before reading the sample store (seq_cst on both sides, Dekker-style with g.state).
  std::atomic<uint8_t> in_handler{0};
  soft::SampleStore::Cursor cursor;
  // Written only by the thread's own handler; read at the end.
  uint64_t taken = 0, kept = 0;
  uint64_t discarded[profile::kDiscardReasons] = {};
  std::atomic<bool> exited{false};
};

constexpr int kMaxNotes = 12;
constexpr int kNoteLen = 480;

struct Global {
  std::atomic<int> state{kOff};
  bool pmu_mode = false;       // WHYMISS_MODE=pmu and the live sampler started
  bool sampling = false;       // task-clock events are being opened for threads
  bool capture_on = false;     // the capture stage is built in and initialised
  bool trace_on = false;       // full-trace windows (soft/trace.h) are on
  int signo = 0;
  uint64_t period_ns = 0;
  pid_t pid = 0;
  uint64_t start_ns = 0;
  pthread_key_t key{};
  std::atomic<uint32_t> next_index{0};
  std::atomic<ThreadState*> threads[kMaxThreads] = {};
  std::atomic<uint64_t> unrecorded_threads{0};
  std::atomic<uint64_t> open_failures{0};
  std::atomic<int> first_open_errno{0};
  soft::SampleStore store;
  pmu::LiveSampler* pmu = nullptr;
  pmu::Plan plan{};
  std::atomic<uint64_t> pmu_unknown_thread{0};  // pmu samples of threads we do not know
  // Collector thread.
  pthread_t collector{};
  bool collector_started = false;
  std::atomic<bool> collector_stop{false};
  std::atomic<uint8_t> collector_busy{0};
  // Profile geometry (from WHYMISS_CACHE or detected), as written into Levels.
  profile::LevelRecord levels[profile::kLevels] = {};
  uint32_t nlevels = 0;
  char output[4096] = {};
  char command[4096] = {};
  char geometry_source[512] = {};  // (with the reason when detection fell back to defaults)
  // Collector notes (written outside signal handlers only, read at the end).
  char notes[kMaxNotes][kNoteLen] = {};
  uint32_t note_severity[kMaxNotes] = {};
  std::atomic<int> nnotes{0};
};
extern Global g;

// Adds a note for the report (truncated to kNoteLen - 1 bytes; dropped beyond kMaxNotes).
void add_note(uint32_t severity, const char* text);
uint64_t monotonic_ns();
uint64_t realtime_ns();
// Writes the profile (finish.cpp). Called once, by finish().
void write_profile(int term_signal);

}  // namespace whymiss::rt::softrt
