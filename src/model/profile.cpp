#include "model/profile.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include <cmath>
#include <cstring>
#include <memory>
#include <new>

namespace whymiss::profile {
namespace {

// Format 1's checksum, byte by byte: about 1 byte per 4 cycles (a multiply chain), which made
// it a visible part of writing and reading the 32 MiB access log. Still read, never written.
uint64_t fnv1a(uint64_t h, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}
constexpr uint64_t kFnvBasis = 0xcbf29ce484222325ull;

inline uint64_t rotl(uint64_t v, int r) { return (v << r) | (v >> (64 - r)); }

// Format 2's checksum (see Checksum in profile.h): the same value whatever pieces the bytes come
// in. Word i of the stream (8 bytes, little-endian) goes into lane i % 4; the lanes are four
// independent multiply chains kept in registers across blocks (blocks()), ~1.4 ns a 32-byte
// block here: 32 MiB in ~1.5 ms, where FNV-1a's byte chain takes 34-38 ms.
class Summer {
 public:
  void add(const void* data, size_t n) {
    if (n == 0) return;  // (an empty section's data may be null)
    const auto* p = static_cast<const uint8_t*>(data);
    bytes_ += n;
    if (npending_ != 0) {
      const size_t take = std::min(n, sizeof pending_ - npending_);
      std::memcpy(pending_ + npending_, p, take);
      npending_ += take;
      p += take;
      n -= take;
      if (npending_ < sizeof pending_) return;
      blocks(pending_, 1);
      npending_ = 0;
    }
    const size_t whole = n / sizeof pending_;
    blocks(p, whole);
    p += whole * sizeof pending_;
    n -= whole * sizeof pending_;
    if (n) std::memcpy(pending_, p, n);
    npending_ = n;
  }
  uint64_t value() const {
    uint64_t lane[4] = {lane_[0], lane_[1], lane_[2], lane_[3]};
    for (size_t at = 0, j = 0; at < npending_; at += 8, ++j) {
      uint64_t w = 0;  // a last partial word is padded with zeros (the byte count tells them apart)
      std::memcpy(&w, pending_ + at, std::min<size_t>(8, npending_ - at));
      lane[j] = step(lane[j], w, j);
    }
    uint64_t h = bytes_ * kMul[0];
    for (int j = 0; j < 4; ++j) h = rotl(h ^ (lane[j] * kMul[j]), 27) * kMul[(j + 1) & 3];
    h ^= h >> 31;
    h *= kMul[2];
    h ^= h >> 29;
    return h;
  }

 private:
  static constexpr uint64_t kMul[4] = {0x9e3779b97f4a7c15ull, 0xd6e8feb86659fd93ull,
                                       0xa0761d6478bd642full, 0xe7037ed1a0b428dbull};
  static uint64_t step(uint64_t lane, uint64_t w, size_t j) { return rotl((lane ^ w) * kMul[j], 29); }
  // The lanes in locals: kept in memory between blocks (and vectorised with emulated 64-bit
  // multiplies), the same loop took 5-7x longer.
  void blocks(const uint8_t* p, size_t count) {
    uint64_t a = lane_[0], b = lane_[1], c = lane_[2], d = lane_[3];
    for (size_t k = 0; k < count; ++k, p += 32) {
      uint64_t w0, w1, w2, w3;
      std::memcpy(&w0, p, 8);
      std::memcpy(&w1, p + 8, 8);
      std::memcpy(&w2, p + 16, 8);
      std::memcpy(&w3, p + 24, 8);
      a = step(a, w0, 0);
      b = step(b, w1, 1);
      c = step(c, w2, 2);
      d = step(d, w3, 3);
    }
    lane_[0] = a;
    lane_[1] = b;
    lane_[2] = c;
    lane_[3] = d;
  }
  uint64_t lane_[4] = {1, 2, 3, 4};
  uint8_t pending_[32];
  size_t npending_ = 0;
  uint64_t bytes_ = 0;
};

bool write_all(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= size_t(w);
  }
  return true;
}

// Appends the decimal digits of v to out[*n] (cap bytes). No heap, no locale.
bool append_number(char* out, size_t* n, size_t cap, uint64_t v) {
  char digits[24];
  int nd = 0;
  do {
    digits[nd++] = char('0' + v % 10);
    v /= 10;
  } while (v);
  if (*n + size_t(nd) >= cap) return false;
  while (nd) out[(*n)++] = digits[--nd];
  out[*n] = '\0';
  return true;
}

// "path.tmp.PID.N": N differs between attempts, so a name someone else created (or left behind)
// is skipped rather than opened. Returns false when it does not fit.
bool temp_name(const char* path, uint64_t attempt, char* out, size_t cap) {
  size_t n = std::strlen(path);
  const char suffix[] = ".tmp.";
  if (n + sizeof suffix >= cap) return false;
  std::memcpy(out, path, n);
  std::memcpy(out + n, suffix, sizeof suffix);
  n += sizeof suffix - 1;
  if (!append_number(out, &n, cap, uint64_t(getpid()))) return false;
  if (n + 1 >= cap) return false;
  out[n++] = '.';
  return append_number(out, &n, cap, attempt);
}

// Where the encoder's bytes go: write(2) on a file descriptor, or a std::string.
struct Sink {
  bool (*put)(void* ctx, const void* data, size_t n);
  void* ctx;
};

bool put_fd(void* ctx, const void* data, size_t n) {
  return write_all(*static_cast<int*>(ctx), data, n);
}

bool put_sum(void* ctx, const void* data, size_t n) {
  static_cast<Summer*>(ctx)->add(data, n);
  return true;
}

// A section's bytes into sink: its data, or what its producer makes, which must be exactly
// count * record_size bytes (else EIO).
bool emit(const SectionData& s, Sink sink) {
  const uint64_t bytes = s.count * s.record_size;
  if (!s.produce) return !bytes || sink.put(sink.ctx, s.data, size_t(bytes));
  struct Counted {
    Sink sink;
    uint64_t left;
    bool over;
  } c{sink, bytes, false};
  auto put = [](void* ctx, const void* data, size_t n) {
    auto* k = static_cast<Counted*>(ctx);
    if (n > k->left) {
      k->over = true;
      return false;
    }
    k->left -= n;
    return !n || k->sink.put(k->sink.ctx, data, n);
  };
  const bool ok = s.produce(s.produce_arg, put, &c);
  if (ok && !c.over && c.left == 0) return true;
  if (ok || c.over) errno = EIO;
  return false;
}

// Streams a whole profile in file order. The header comes first with its final size and
// checksum (computed in a first pass over the same bytes), so the destination needs no seeking:
// a pipe or a device works as well as a file.
bool encode(const SectionData* sections, uint32_t n, Sink sink) {
  FileHeader h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.version = kVersion;
  h.section_count = n;
  const uint64_t data_start = sizeof(FileHeader) + uint64_t(n) * sizeof(SectionHeader);
  auto section_header = [&](uint32_t i, uint64_t offset) {
    SectionHeader s{};
    s.kind = uint32_t(sections[i].kind);
    s.record_size = sections[i].record_size;
    s.count = sections[i].count;
    s.offset = offset;
    return s;
  };
  Summer sum;
  uint64_t offset = data_start;
  for (uint32_t i = 0; i < n; ++i) {
    SectionHeader s = section_header(i, offset);
    offset += s.count * s.record_size;
    sum.add(&s, sizeof s);
  }
  for (uint32_t i = 0; i < n; ++i)
    if (!emit(sections[i], Sink{put_sum, &sum})) return false;
  h.file_size = offset;
  h.checksum = sum.value();
  if (!sink.put(sink.ctx, &h, sizeof h)) return false;
  offset = data_start;
  for (uint32_t i = 0; i < n; ++i) {
    SectionHeader s = section_header(i, offset);
    offset += s.count * s.record_size;
    if (!sink.put(sink.ctx, &s, sizeof s)) return false;
  }
  for (uint32_t i = 0; i < n; ++i)
    if (!emit(sections[i], sink)) return false;
  return true;
}

}  // namespace

uint64_t checksum(const void* data, size_t n) {
  Summer s;
  s.add(data, n);
  return s.value();
}

int write_profile_fd(int fd, const SectionData* sections, uint32_t n) {
  errno = 0;
  if (!encode(sections, n, Sink{put_fd, &fd})) return errno ? errno : EIO;
  return 0;
}

int write_profile_sections(const char* path, const SectionData* sections, uint32_t n) {
  const int saved_errno = errno;
  char tmp[4096];
  int fd = -1;
  // O_EXCL|O_NOFOLLOW: never open a file (or follow a symlink) someone else put at the name;
  // 0600 until it is complete.
  for (uint64_t attempt = 0; fd < 0 && attempt < 64; ++attempt) {
    if (!temp_name(path, attempt, tmp, sizeof tmp)) return ENAMETOOLONG;
    fd = ::open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 && errno != EEXIST) {
      const int err = errno;
      errno = saved_errno;
      return err;
    }
  }
  if (fd < 0) {
    errno = saved_errno;
    return EEXIST;
  }
  int err = write_profile_fd(fd, sections, n);
  if (!err && ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && !err) err = errno;
  if (!err && ::rename(tmp, path) != 0) err = errno;
  if (err) ::unlink(tmp);
  errno = saved_errno;
  return err;
}

namespace {

// Lays out a Profile as the file's sections and passes them to fn.
template <typename Fn>
int with_sections(const Profile& p, Fn fn) {
  std::string strings;
  auto add = [&](const std::string& s) {
    uint32_t off = uint32_t(strings.size());
    strings += s;
    strings.push_back('\0');
    return off;
  };
  MetaRecord meta = p.meta;
  meta.command_str = add(p.command);
  meta.geometry_source_str = add(p.geometry_source);
  std::vector<LevelRecord> levels;
  for (const auto& l : p.geometry.levels) {
    LevelRecord r{};
    r.size = l.size;
    r.ways = l.ways;
    r.line = l.line;
    std::strncpy(r.name, l.name.c_str(), sizeof r.name - 1);
    levels.push_back(r);
  }
  std::vector<ModuleRecord> modules;
  for (const auto& m : p.modules) {
    ModuleRecord r = m.rec;
    r.path_str = add(m.path);
    modules.push_back(r);
  }
  std::vector<NoteRecord> notes;
  for (const auto& n : p.notes) notes.push_back({add(n.text), n.severity});
  SectionData s[] = {
      {Section::Meta, sizeof(MetaRecord), 1, &meta},
      {Section::Levels, sizeof(LevelRecord), levels.size(), levels.data()},
      {Section::Counters, sizeof(CounterRecord), p.counters.size(), p.counters.data()},
      {Section::Strings, 1, strings.size(), strings.data()},
      {Section::Modules, sizeof(ModuleRecord), modules.size(), modules.data()},
      {Section::Threads, sizeof(ThreadRecord), p.threads.size(), p.threads.data()},
      {Section::Instructions, sizeof(InstructionRecord), p.instructions.size(), p.instructions.data()},
      {Section::Lines, sizeof(LineRecord), p.lines.size(), p.lines.data()},
      {Section::Objects, sizeof(ObjectRecord), p.objects.size(), p.objects.data()},
      {Section::Sites, sizeof(SiteRecord), p.sites.size(), p.sites.data()},
      {Section::Samples, sizeof(SampleRecord), p.samples.size(), p.samples.data()},
      {Section::Windows, sizeof(WindowRecord), p.windows.size(), p.windows.data()},
      {Section::Captures, sizeof(CaptureRecord), p.captures.size(), p.captures.data()},
      {Section::Notes, sizeof(NoteRecord), notes.size(), notes.data()},
      {Section::Traces, sizeof(TraceRecord), p.traces.size(), p.traces.data()},
      {Section::TraceAccesses, sizeof(TraceAccessRecord), p.trace_accesses.size(), p.trace_accesses.data()},
      {Section::MissSteps, sizeof(StepRecord), p.steps.size(), p.steps.data()},
      {Section::CpuSampling, sizeof(CpuSamplingRecord), p.cpu_sampling.size(), p.cpu_sampling.data()},
      {Section::CpuSamples, sizeof(CpuSampleRecord), p.cpu_samples.size(), p.cpu_samples.data()},
      {Section::Reuse, sizeof(ReuseRecord), p.reuse.size(), p.reuse.data()},
      {Section::AccessLog, sizeof(AccessLogRecord), p.access_log_info.size(), p.access_log_info.data()},
      {Section::AccessLogEntries, sizeof(uint64_t), p.access_log.size(), p.access_log.data()},
      {Section::SetCounts, sizeof(SetCountRecord), p.set_counts.size(), p.set_counts.data()},
      {Section::Rcd, sizeof(RcdRecord), p.rcd.size(), p.rcd.data()},
      {Section::ObjectUseInfo, sizeof(ObjectUseInfoRecord), p.object_use_info.size(), p.object_use_info.data()},
      {Section::ObjectUse, sizeof(ObjectUseRecord), p.object_use.size(), p.object_use.data()},
      {Section::TraceTimes, sizeof(uint64_t), p.trace_times.size(), p.trace_times.data()},
      {Section::ReuseInfo, sizeof(ReuseInfoRecord), p.reuse_info.size(), p.reuse_info.data()},
      {Section::Locks, sizeof(LockInfoRecord), p.locks.size(), p.locks.data()},
  };
  // The sections from CpuSampling on (the later additions) only up to the last that has
  // records, and the flow and working-set sections only when there are any: a profile without
  // them encodes to the same bytes as before they existed.
  uint32_t n = uint32_t(sizeof s / sizeof s[0]);
  while (s[n - 1].kind != Section::MissSteps && s[n - 1].count == 0) --n;
  std::vector<SectionData> all(s, s + n);
  if (!p.flow_info.empty() || !p.flows.empty()) {
    all.push_back({Section::FlowInfo, sizeof(FlowInfoRecord), p.flow_info.size(), p.flow_info.data()});
    all.push_back({Section::Flows, sizeof(FlowRecord), p.flows.size(), p.flows.data()});
  }
  if (!p.working_set_info.empty() || !p.working_set.empty()) {
    all.push_back({Section::WorkingSetInfo, sizeof(WorkingSetInfoRecord), p.working_set_info.size(),
                   p.working_set_info.data()});
    all.push_back({Section::WorkingSet, sizeof(WorkingSetRecord), p.working_set.size(), p.working_set.data()});
  }
  return fn(all.data(), uint32_t(all.size()));
}

}  // namespace

Status write_profile(const std::string& path, const Profile& p) {
  int err = with_sections(p, [&](const SectionData* s, uint32_t n) {
    return write_profile_sections(path.c_str(), s, n);
  });
  if (err) return make_error("cannot write profile '" + path + "': " + std::strerror(err));
  return Ok{};
}

int write_profile_to_fd(int fd, const Profile& p) {
  auto write = [&](const SectionData* s, uint32_t n) { return write_profile_fd(fd, s, n); };
  return with_sections(p, write);
}

std::string encode_profile(const Profile& p) {
  std::string out;
  with_sections(p, [&](const SectionData* s, uint32_t n) {
    auto put = [](void* ctx, const void* data, size_t len) {
      static_cast<std::string*>(ctx)->append(static_cast<const char*>(data), len);
      return true;
    };
    encode(s, n, Sink{put, &out});
    return 0;
  });
  return out;
}

namespace {

template <typename T>
bool take(const uint8_t* data, const SectionHeader& s, std::vector<T>* out) {
  if (s.record_size != sizeof(T)) return false;
  out->resize(s.count);
  if (s.count) std::memcpy(out->data(), data + s.offset, s.count * sizeof(T));
  return true;
}

}  // namespace

Result<Profile> parse_profile(const uint8_t* data, size_t size, const std::string& name) {
  auto bad = [&](const std::string& why) {
    return make_error("'" + name + "' is not a valid whymiss profile: " + why);
  };
  FileHeader h;
  if (size < sizeof h) return bad("it is too short to hold a header");
  std::memcpy(&h, data, sizeof h);
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0) return bad("it does not start with the whymiss magic number");
  if (h.version != kVersion && h.version != kOldestVersion)
    return make_error("'" + name + "' is a whymiss profile of format version " +
                      std::to_string(h.version) + ", but this whymiss reads versions " +
                      std::to_string(kOldestVersion) + " to " + std::to_string(kVersion));
  if (h.file_size != size)
    return bad("it is " + std::to_string(size) + " bytes but its header says " +
               std::to_string(h.file_size) + " (truncated or appended to)");
  const uint64_t sum = h.version == 1 ? fnv1a(kFnvBasis, data + sizeof h, size - sizeof h)
                                      : checksum(data + sizeof h, size - sizeof h);
  if (sum != h.checksum)
    return bad("its checksum does not match (the file is corrupt)");
  if (h.section_count > 64 || sizeof h + uint64_t(h.section_count) * sizeof(SectionHeader) > size)
    return bad("its section table does not fit in the file");

  Profile p;
  std::vector<LevelRecord> levels;
  std::string strings;
  std::vector<NoteRecord> note_recs;
  bool have_meta = false, have_levels = false, have_counters = false;
  for (uint32_t i = 0; i < h.section_count; ++i) {
    SectionHeader s;
    std::memcpy(&s, data + sizeof h + i * sizeof(SectionHeader), sizeof s);
    if (s.record_size == 0)
      return bad("section " + std::to_string(i) + " declares records of size 0");
    if (s.count > size / s.record_size || s.offset > size ||
        s.count * s.record_size > size - s.offset)
      return bad("section " + std::to_string(i) + " lies outside the file");
    bool ok = true;
    switch (Section(s.kind)) {
      case Section::Meta:
        ok = s.record_size == sizeof(MetaRecord) && s.count == 1;
        if (ok) std::memcpy(&p.meta, data + s.offset, sizeof p.meta);
        have_meta = ok;
        break;
      case Section::Levels: ok = take(data, s, &levels); have_levels = ok; break;
      case Section::Counters: ok = take(data, s, &p.counters); have_counters = ok; break;
      case Section::Strings:
        ok = s.record_size == 1;
        if (ok) strings.assign(reinterpret_cast<const char*>(data + s.offset), s.count);
        break;
      case Section::Modules: {
        std::vector<ModuleRecord> m;
        ok = take(data, s, &m);
        for (const auto& r : m) p.modules.push_back({r, ""});
        break;
      }
      case Section::Threads: ok = take(data, s, &p.threads); break;
      case Section::Instructions: ok = take(data, s, &p.instructions); break;
      case Section::Lines: ok = take(data, s, &p.lines); break;
      case Section::Objects: ok = take(data, s, &p.objects); break;
      case Section::Sites: ok = take(data, s, &p.sites); break;
      case Section::Samples: ok = take(data, s, &p.samples); break;
      case Section::Windows: ok = take(data, s, &p.windows); break;
      case Section::Captures: ok = take(data, s, &p.captures); break;
      case Section::Notes: ok = take(data, s, &note_recs); break;
      case Section::Traces: ok = take(data, s, &p.traces); break;
      case Section::TraceAccesses: ok = take(data, s, &p.trace_accesses); break;
      case Section::MissSteps: ok = take(data, s, &p.steps); break;
      case Section::CpuSampling: ok = take(data, s, &p.cpu_sampling) && s.count <= 1; break;
      case Section::CpuSamples: ok = take(data, s, &p.cpu_samples); break;
      case Section::Reuse: ok = take(data, s, &p.reuse); break;
      case Section::AccessLog: ok = take(data, s, &p.access_log_info) && s.count <= 1; break;
      case Section::AccessLogEntries: ok = take(data, s, &p.access_log); break;
      case Section::FlowInfo: ok = take(data, s, &p.flow_info) && s.count <= 1; break;
      case Section::Flows: ok = take(data, s, &p.flows); break;
      case Section::WorkingSetInfo: ok = take(data, s, &p.working_set_info) && s.count <= 1; break;
      case Section::WorkingSet: ok = take(data, s, &p.working_set); break;
      case Section::SetCounts: ok = take(data, s, &p.set_counts); break;
      case Section::Rcd: ok = take(data, s, &p.rcd); break;
      case Section::ObjectUseInfo: ok = take(data, s, &p.object_use_info); break;
      case Section::ObjectUse: ok = take(data, s, &p.object_use); break;
      case Section::TraceTimes: ok = take(data, s, &p.trace_times); break;
      case Section::ReuseInfo: ok = take(data, s, &p.reuse_info); break;
      case Section::Locks:
        ok = take(data, s, &p.locks);
        if (ok && p.locks.size() > 1) return bad("it holds more than one record of mutex hand-over counts");
        break;
      default: break;  // unknown sections of the same version are skipped
    }
    if (!ok) return bad("section " + std::to_string(i) + " has records of an unexpected size");
  }
  if (!have_meta || !have_levels || !have_counters)
    return bad("it lacks the meta, levels or counters section");
  auto str = [&](uint32_t off, std::string* out) {
    if (off == kNoString) return true;
    if (off >= strings.size()) return false;
    size_t end = strings.find('\0', off);
    if (end == std::string::npos) return false;
    out->assign(strings, off, end - off);
    return true;
  };
  if (!str(p.meta.command_str, &p.command) || !str(p.meta.geometry_source_str, &p.geometry_source))
    return bad("a string reference points outside its string table");
  for (auto& m : p.modules)
    if (!str(m.rec.path_str, &m.path)) return bad("a module path points outside its string table");
  for (const auto& n : note_recs) {
    Profile::Note note{n.severity, {}};
    if (!str(n.text_str, &note.text)) return bad("a note points outside its string table");
    p.notes.push_back(std::move(note));
  }
  for (const auto& c : p.captures)
    if (c.window >= p.windows.size()) return bad("a capture names a missing window");
  for (const auto& a : p.trace_accesses)
    if (a.window >= p.traces.size()) return bad("a traced access names a missing trace window");
  if (!p.trace_times.empty() && p.trace_times.size() != p.trace_accesses.size())
    return bad("the traced accesses' times do not match the traced accesses");
  for (const auto& r : p.locks)
    if (r.native_handovers > r.native_acquisitions || r.traced_handovers > r.traced_acquisitions)
      return bad("the mutex hand-over counts exceed their acquisitions");
  if (!p.access_log.empty() && p.access_log_info.empty())
    return bad("an access log comes without its description");
  for (const auto& r : p.access_log_info)
    if (r.kept != p.access_log.size() || r.kept > r.total || r.kept > r.capacity)
      return bad("the access log's description does not match its entries");
  for (const auto& r : p.reuse) {
    bool ok = r.scope <= kReuseInstruction && r.line_bytes >= 4 && (r.line_bytes & (r.line_bytes - 1)) == 0 &&
              std::isfinite(r.rate) && r.rate > 0 && r.rate <= 1 && std::isfinite(r.cold) && r.cold >= 0 &&
              std::isfinite(r.weighted) && r.weighted >= 0;
    for (double b : r.buckets) ok = ok && std::isfinite(b) && b >= 0;
    if (!ok) return bad("a reuse-distance histogram holds impossible values");
  }
  for (const auto& r : p.reuse_info)
    if (r.how > kReuseSampledBound || r.line_bytes < 4 || (r.line_bytes & (r.line_bytes - 1)) != 0 ||
        !std::isfinite(r.rate) || r.rate <= 0 || r.rate > 1)
      return bad("the reuse tracker's description holds impossible values");
  for (const auto& c : p.set_counts)
    if (c.level >= levels.size() || c.set >= kMaxSetRecords)
      return bad("a set count names a missing level or an impossible set");
  if (p.object_use_info.size() > 1 || (p.object_use_info.empty() && !p.object_use.empty()))
    return bad("spatial-use records come without their description");
  for (const auto& u : p.object_use) {
    bool ok = u.touched_bytes <= u.fetched_bytes;
    for (int i = 0; i < kUsePhases; ++i) ok = ok && u.touched[i] <= u.fetched[i] && u.fetched[i] <= u.lines;
    if (!ok) return bad("a spatial-use record touches more bytes than its lines fetched");
  }
  for (const auto& r : p.rcd)
    if (r.source > kRcdSampled || r.l1_sets == 0 || r.l1_sets > kMaxSetRecords)
      return bad("a re-conflict-distance histogram holds impossible values");
  for (const auto& l : levels) {
    LevelGeometry g;
    g.name.assign(l.name, strnlen(l.name, sizeof l.name));
    g.size = l.size;
    g.ways = l.ways;
    g.line = l.line;
    p.geometry.levels.push_back(g);
  }
  p.geometry.source = p.geometry_source;
  if (auto v = validate(p.geometry); !v) return bad(v.error());
  if (p.counters.size() != levels.size()) return bad("it has counters for a different number of levels");
  if (p.meta.mode < 1 || p.meta.mode > 3) return bad("its collection mode is unknown");
  for (const auto& s : p.objects)
    if (s.site != kNoSite && s.site >= p.sites.size()) return bad("an object names a missing allocation site");
  for (const auto& f : p.flows)
    if ((f.site != kNoSite && f.site >= p.sites.size()) || f.from_kind > kFlowWrite ||
        f.to_kind < kFlowRead || f.to_kind > kFlowWrite)
      return bad("a data-flow record names a missing allocation site or an unknown access");
  for (const auto& w : p.working_set)
    if ((w.site != kNoSite && w.site != kWsNotHeap && w.site >= p.sites.size()) ||
        w.level >= levels.size() ||
        (!p.working_set_info.empty() && w.sample >= p.working_set_info[0].samples))
      return bad("a working-set record names a missing allocation site, level or sample");
  for (const auto& s : p.sites)
    if (s.depth > kSiteFrames) return bad("an allocation site is deeper than the format allows");
  return p;
}

namespace {

// read(2) until n bytes or the end; returns the bytes read, or -1 (errno set).
ssize_t read_full(int fd, uint8_t* p, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::read(fd, p + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r == 0) break;
    got += size_t(r);
  }
  return ssize_t(got);
}

// Closes the descriptor on every return path (but not standard input).
struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd > 2) ::close(fd);
  }
};

}  // namespace

Result<Profile> read_profile(const std::string& path) {
  const bool from_stdin = path == "-";
  const std::string name = from_stdin ? std::string(kStdinName) : path;
  int fd = from_stdin ? 0 : ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return make_error("cannot open profile '" + name + "': " + std::strerror(errno));
  FdCloser closer{from_stdin ? -1 : fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) return make_error("cannot read profile '" + name + "': " + std::strerror(errno));
  if (S_ISDIR(st.st_mode)) return make_error("cannot read profile '" + name + "': it is a directory");
  auto bad = [&](const std::string& why) {
    return make_error("'" + name + "' is not a valid whymiss profile: " + why);
  };
  // The header first: nothing more is read from a file that is not a profile (a device that never
  // ends, a huge unrelated file), and no more than the header's size from one that is.
  std::vector<uint8_t> buf(sizeof(FileHeader));
  ssize_t got = read_full(fd, buf.data(), buf.size());
  if (got < 0) return make_error("cannot read profile '" + name + "': " + std::strerror(errno));
  if (size_t(got) < sizeof(FileHeader) || std::memcmp(buf.data(), kMagic, sizeof kMagic) != 0)
    return parse_profile(buf.data(), size_t(got), name);  // its sentence says what is wrong
  FileHeader h;
  std::memcpy(&h, buf.data(), sizeof h);
  if (h.version != kVersion && h.version != kOldestVersion)
    return parse_profile(buf.data(), buf.size(), name);
  if (h.file_size < sizeof h || h.file_size > kMaxProfileBytes)
    return bad("its header gives an impossible size (" + std::to_string(h.file_size) + " bytes)");
  if (S_ISREG(st.st_mode) && uint64_t(st.st_size) != h.file_size)
    return bad("it is " + std::to_string(st.st_size) + " bytes but its header says " +
               std::to_string(h.file_size) + " (truncated or appended to)");
  // A regular file's size was checked against the header: read it in one piece, into memory
  // that is neither zeroed first nor moved as it grows (a profile with a full access log is
  // tens of MiB, and `record` reads every one it writes).
  static_assert(sizeof(size_t) >= sizeof(uint64_t), "sizes up to kMaxProfileBytes");
  if (S_ISREG(st.st_mode)) {
    std::unique_ptr<uint8_t[]> whole(new (std::nothrow) uint8_t[h.file_size]);
    if (!whole) return make_error("cannot read profile '" + name + "': not enough memory for its " +
                                  std::to_string(h.file_size) + " bytes");
    std::memcpy(whole.get(), &h, sizeof h);
    got = read_full(fd, whole.get() + sizeof h, size_t(h.file_size - sizeof h));
    if (got < 0) return make_error("cannot read profile '" + name + "': " + std::strerror(errno));
    return parse_profile(whole.get(), sizeof h + size_t(got), name);
  }
  // Other files grow as bytes arrive, so a stream that claims a large size but ends early costs
  // only what it sent.
  size_t have = sizeof h;
  while (have < h.file_size) {
    const size_t want = size_t(std::min<uint64_t>(h.file_size - have, uint64_t(16) << 20));
    buf.resize(have + want);
    got = read_full(fd, buf.data() + have, want);
    if (got < 0) return make_error("cannot read profile '" + name + "': " + std::strerror(errno));
    have += size_t(got);
    if (size_t(got) < want) break;
  }
  buf.resize(have);
  if (have == h.file_size && !S_ISREG(st.st_mode)) {
    uint8_t extra;
    if (read_full(fd, &extra, 1) == 1)
      return bad("it is longer than its header's " + std::to_string(h.file_size) + " bytes (appended to)");
  }
  return parse_profile(buf.data(), buf.size(), name);
}

}  // namespace whymiss::profile
