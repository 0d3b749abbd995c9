// Cache geometry: validation, the --cache spec parser, sysfs detection, defaults and formatting.
#include "model/geometry.h"
#include "model/geometry_detect.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <system_error>
#include <utility>

namespace whymiss {


namespace {

constexpr uint64_t kUint32Max = std::numeric_limits<uint32_t>::max();
constexpr uint64_t kUint64Max = std::numeric_limits<uint64_t>::max();

bool is_pow2(uint64_t v) {
  return v != 0 && (v & (v - 1)) == 0;
}

std::string_view trim(std::string_view s) {
  constexpr std::string_view kSpace = " \t\r\n\v\f";
  size_t b = s.find_first_not_of(kSpace);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(kSpace) - b + 1);
}

// Quotes user-supplied text for an error sentence: shortened and with non-printable bytes
// replaced, so garbage input cannot flood or corrupt the terminal.
std::string quote(std::string_view s) {
  constexpr size_t kMaxShown = 40;
  std::string out = "'";
  for (size_t i = 0; i < s.size() && i < kMaxShown; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    out += std::isprint(c) ? static_cast<char>(c) : '?';
  }
  if (s.size() > kMaxShown) out += "...";
  out += "'";
  return out;
}

enum class Num { kOk, kNotNumber, kTooLarge };

// Plain decimal digits (no sign, no spaces), at most `max`.
Num parse_uint(std::string_view s, uint64_t max, uint64_t* out) {
  if (s.empty()) return Num::kNotNumber;
  for (char c : s) {
    if (c < '0' || c > '9') return Num::kNotNumber;
  }
  uint64_t v = 0;
  for (char c : s) {
    uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (max - d) / 10) return Num::kTooLarge;
    v = v * 10 + d;
  }
  *out = v;
  return Num::kOk;
}

// Decimal digits with an optional binary K/M/G suffix (case-insensitive): "48K" = 49152.
Num parse_size(std::string_view s, uint64_t* out) {
  uint64_t mult = 1;
  if (!s.empty()) {
    switch (s.back()) {
      case 'k':
      case 'K':
        mult = uint64_t{1} << 10;
        break;
      case 'm':
      case 'M':
        mult = uint64_t{1} << 20;
        break;
      case 'g':
      case 'G':
        mult = uint64_t{1} << 30;
        break;
      default:
        break;
    }
    if (mult != 1) s.remove_suffix(1);
  }
  uint64_t n = 0;
  Num st = parse_uint(s, kUint64Max, &n);
  if (st != Num::kOk) return st;
  if (n > kUint64Max / mult) return Num::kTooLarge;
  *out = n * mult;
  return Num::kOk;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    size_t pos = s.find(sep, start);
    if (pos == std::string_view::npos) {
      parts.push_back(s.substr(start));
      return parts;
    }
    parts.push_back(s.substr(start, pos - start));
    start = pos + 1;
  }
}

// Parses one "size:ways:line" field list of the --cache spec into *lv.
Status parse_level_fields(const std::string& label, std::string_view fields, LevelGeometry* lv) {
  std::vector<std::string_view> f = split(fields, ':');
  if (f.size() != 3) {
    return make_error(label + " needs size:ways:line (for example " + label + "=48K:12:64), not " +
                      quote(fields));
  }
  std::string_view size_s = trim(f[0]), ways_s = trim(f[1]), line_s = trim(f[2]);
  switch (parse_size(size_s, &lv->size)) {
    case Num::kOk:
      break;
    case Num::kNotNumber:
      return make_error(label + " size " + quote(size_s) +
                        " is not a whole number with an optional K, M or G suffix");
    case Num::kTooLarge:
      return make_error(label + " size " + quote(size_s) + " is too large");
  }
  uint64_t v = 0;
  switch (parse_uint(ways_s, kUint32Max, &v)) {
    case Num::kOk:
      lv->ways = static_cast<uint32_t>(v);
      break;
    case Num::kNotNumber:
      return make_error(label + " ways " + quote(ways_s) + " is not a whole number");
    case Num::kTooLarge:
      return make_error(label + " ways " + quote(ways_s) + " is too large");
  }
  switch (parse_uint(line_s, kUint32Max, &v)) {
    case Num::kOk:
      lv->line = static_cast<uint32_t>(v);
      break;
    case Num::kNotNumber:
      return make_error(label + " line size " + quote(line_s) + " is not a whole number of bytes");
    case Num::kTooLarge:
      return make_error(label + " line size " + quote(line_s) + " is too large");
  }
  return Ok{};
}

// A small sysfs attribute, trimmed; nullopt when it cannot be opened or read. The read is capped:
// sysfs values are short, and anything longer is garbage that the caller rejects.
std::optional<std::string> read_attr(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) return std::nullopt;
  std::string buf(256, '\0');
  f.read(buf.data(), static_cast<std::streamsize>(buf.size()));
  if (f.bad()) return std::nullopt;
  buf.resize(static_cast<size_t>(f.gcount()));
  return std::string(trim(buf));
}

}  // namespace

std::string format_size(uint64_t bytes) {
  static constexpr struct {
    uint64_t unit;
    char suffix;
  } kUnits[] = {{uint64_t{1} << 30, 'G'}, {uint64_t{1} << 20, 'M'}, {uint64_t{1} << 10, 'K'}};
  for (const auto& u : kUnits) {
    if (bytes != 0 && bytes % u.unit == 0) return std::to_string(bytes / u.unit) + u.suffix;
  }
  return std::to_string(bytes);
}

std::string CacheGeometry::to_spec() const {
  std::string out;
  for (const LevelGeometry& lv : levels) {
    if (!out.empty()) out += ',';
    out += lv.name + "=" + format_size(lv.size) + ":" + std::to_string(lv.ways) + ":" +
           std::to_string(lv.line);
  }
  return out;
}

Status validate(const CacheGeometry& g) {
  if (g.levels.empty()) return make_error("the cache geometry has no levels");
  if (g.levels.size() > kMaxLevels) {
    return make_error("the cache geometry has " + std::to_string(g.levels.size()) +
                      " levels, but at most " + std::to_string(kMaxLevels) + " are supported");
  }
  auto label_of = [&](size_t i) {
    const std::string& n = g.levels[i].name;
    return n.empty() ? "level " + std::to_string(i + 1) : n;
  };
  for (size_t i = 0; i < g.levels.size(); ++i) {
    const LevelGeometry& lv = g.levels[i];
    const std::string label = label_of(i);
    if (lv.size == 0) return make_error(label + " has size 0, so it cannot hold a single line");
    // Far beyond any cache built, and small enough to print and to count its lines in 32 bits.
    if (lv.size > kMaxLevelBytes)
      return make_error(label + " size " + format_size(lv.size) + " is larger than the " +
                        format_size(kMaxLevelBytes) + " a level may have");
    if (lv.ways == 0) return make_error(label + " has 0 ways, but a cache needs at least one way");
    if (lv.line < 8 || !is_pow2(lv.line)) {
      return make_error(label + " has " + std::to_string(lv.line) +
                        "-byte lines, but the line size must be a power of two of at least 8");
    }
    if (i > 0 && lv.line != g.levels[0].line) {
      return make_error(label + " has " + std::to_string(lv.line) + "-byte lines but " +
                        label_of(0) + " has " + std::to_string(g.levels[0].line) +
                        "-byte lines, and all levels must use one line size");
    }
    const uint64_t way_bytes = uint64_t{lv.ways} * lv.line;  // both < 2^32: no overflow
    if (lv.size % way_bytes != 0) {
      return make_error(label + " size " + format_size(lv.size) + " is not a multiple of " +
                        std::to_string(lv.ways) + " ways times " + std::to_string(lv.line) +
                        "-byte lines (" + std::to_string(way_bytes) + " bytes)");
    }
    if (lv.sets() > (uint64_t(1) << 32))
      return make_error(label + " has " + std::to_string(lv.sets()) +
                        " sets, more than the 4294967296 a level may have");
  }
  return Ok{};
}

Result<CacheGeometry> parse_cache_spec(std::string_view spec) {
  spec = trim(spec);
  if (spec.empty()) {
    return make_error("the cache spec is empty; expected something like " +
                      default_geometry().to_spec());
  }
  const std::vector<std::string_view> entries = split(spec, ',');
  if (entries.size() > kMaxLevels) {
    return make_error("the cache spec lists " + std::to_string(entries.size()) +
                      " levels, but at most " + std::to_string(kMaxLevels) + " are supported");
  }
  CacheGeometry g;
  g.source = "--cache";
  for (size_t i = 0; i < entries.size(); ++i) {
    const std::string_view entry = trim(entries[i]);
    if (entry.empty()) return make_error("the cache spec has an empty entry (a stray comma?)");
    const size_t eq = entry.find('=');
    if (eq == std::string_view::npos) {
      return make_error("cache spec entry " + quote(entry) +
                        " is not of the form L<n>=size:ways:line");
    }
    const std::string_view name = trim(entry.substr(0, eq));
    const bool known = name.size() == 2 && (name[0] == 'L' || name[0] == 'l') && name[1] >= '1' &&
                       name[1] <= static_cast<char>('0' + kMaxLevels);
    if (!known) {
      return make_error("unknown cache level " + quote(name) + "; levels are named L1 to L" +
                        std::to_string(kMaxLevels));
    }
    const size_t level = static_cast<size_t>(name[1] - '0');
    const std::string label = "L" + std::to_string(level);
    // Levels seen so far are exactly L1..Li, so a lower number is a repeat.
    if (level <= i) return make_error(label + " is given more than once in the cache spec");
    if (level != i + 1) {
      return make_error("expected L" + std::to_string(i + 1) + " but found " + label +
                        "; levels must be listed in order from L1 without gaps");
    }
    LevelGeometry lv;
    lv.name = label;
    Status st = parse_level_fields(label, entry.substr(eq + 1), &lv);
    if (!st) return make_error(st.error());
    g.levels.push_back(std::move(lv));
  }
  Status st = validate(g);
  if (!st) return make_error(st.error());
  return g;
}

namespace detail {

Result<CacheGeometry> geometry_from_detected(std::vector<std::pair<uint32_t, LevelGeometry>> caches,
                                             const std::string& source, const std::string& where) {
  if (caches.empty()) return make_error(where + " lists no data or unified caches");
  std::stable_sort(caches.begin(), caches.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  CacheGeometry g;
  g.source = source;
  for (size_t i = 0; i < caches.size(); ++i) {
    const uint32_t level = caches[i].first;
    const std::string n = std::to_string(level);
    if (level == 0) return make_error(where + " lists a cache at level 0, which is not a level");
    if (i > 0 && level == caches[i - 1].first) {
      return make_error(where + " lists more than one data cache at level " + n);
    }
    if (level != i + 1) {
      return make_error(where + " lists a level-" + n + " cache but no level-" +
                        std::to_string(i + 1) + " data cache");
    }
    LevelGeometry lv = caches[i].second;
    lv.name = "L" + n;
    g.levels.push_back(std::move(lv));
  }
  Status st = validate(g);
  if (!st) return make_error(where + " describes caches the simulator cannot model: " + st.error());
  return g;
}

}  // namespace detail

Result<CacheGeometry> detect_from_sysfs(const std::string& cache_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<std::pair<uint64_t, fs::path>> indexes;  // (N of indexN, path)
  for (fs::directory_iterator it(cache_dir, ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    const std::string fname = it->path().filename().string();
    uint64_t n = 0;
    if (fname.rfind("index", 0) != 0) continue;
    if (parse_uint(std::string_view(fname).substr(5), kUint32Max, &n) != Num::kOk) continue;
    indexes.emplace_back(n, it->path());
  }
  if (ec)
    return make_error("cannot read the cache directory " + cache_dir + " (" + ec.message() + ")");
  std::sort(indexes.begin(), indexes.end());

  std::vector<std::pair<uint32_t, LevelGeometry>> caches;
  for (const auto& index : indexes) {
    const fs::path& dir = index.second;
    // Reads one numeric attribute of this index; `what` describes the expected value.
    auto number = [&dir](const char* attr, uint64_t max, bool size_suffix, const char* what,
                         uint64_t* out) -> Status {
      const fs::path p = dir / attr;
      std::optional<std::string> text = read_attr(p);
      if (!text) return make_error(p.string() + " is missing or unreadable");
      Num st = size_suffix ? parse_size(*text, out) : parse_uint(*text, max, out);
      if (st == Num::kOk && *out <= max) return Ok{};
      return make_error(p.string() + " contains " + quote(*text) + ", expected " + what);
    };
    const fs::path type_path = dir / "type";
    std::optional<std::string> type = read_attr(type_path);
    if (!type) return make_error(type_path.string() + " is missing or unreadable");
    if (*type == "Instruction") continue;
    if (*type != "Data" && *type != "Unified") {
      return make_error(type_path.string() + " contains " + quote(*type) +
                        ", expected Data, Instruction or Unified");
    }
    uint64_t level = 0, size = 0, ways = 0, line = 0;
    Status st = number("level", 255, false, "a cache level number", &level);
    if (st) st = number("size", kUint64Max, true, "a size such as 48K", &size);
    if (st) st = number("ways_of_associativity", kUint32Max, false, "a number of ways", &ways);
    if (st) st = number("coherency_line_size", kUint32Max, false, "a line size in bytes", &line);
    if (!st) return make_error(st.error());
    LevelGeometry lv;
    lv.size = size;
    lv.ways = static_cast<uint32_t>(ways);
    lv.line = static_cast<uint32_t>(line);
    caches.emplace_back(static_cast<uint32_t>(level), std::move(lv));
  }
  return detail::geometry_from_detected(std::move(caches), "sysfs",
                                        "the sysfs cache directory " + cache_dir);
}

CacheGeometry default_geometry() {
  CacheGeometry g;
  g.levels = {{"L1", uint64_t{48} << 10, 12, 64},
              {"L2", uint64_t{1} << 20, 16, 64},
              {"L3", uint64_t{32} << 20, 16, 64}};
  g.source = "default";
  return g;
}

CacheGeometry detect_geometry() {
  auto sysfs = detect_from_sysfs("/sys/devices/system/cpu/cpu0/cache");
  if (sysfs) return std::move(sysfs).value();
  auto cpuid = detect_from_cpuid();
  if (cpuid) return std::move(cpuid).value();
  // Whoever reads "(default)" deserves to know why: one sentence with both causes.
  CacheGeometry g = default_geometry();
  g.source = "default, as detection failed: " + sysfs.error() + "; " + cpuid.error();
  return g;
}

std::string indexing_note(const CacheGeometry& g) {
  std::string levels;
  for (const LevelGeometry& lv : g.levels) {
    if (is_pow2(lv.sets())) continue;
    levels += (levels.empty() ? "" : ", ") + lv.name + " (" + std::to_string(lv.sets()) + " sets)";
  }
  if (levels.empty()) return "";
  return levels + ": a set count that is not a power of two is indexed by line address modulo "
                  "the count, which approximates a hashed-slice last-level cache (its real hash "
                  "is not known)";
}

}  // namespace whymiss
