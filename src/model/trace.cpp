#include "model/trace.h"

#include <cstring>
#include <vector>

namespace whymiss {
namespace {

// Longest line read_trace accepts; bounds memory on input without newlines.
constexpr size_t kMaxLineBytes = size_t{1} << 20;
constexpr size_t kReadChunk = size_t{1} << 16;  // initial buffer; grows for long lines

inline bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

// A token quoted for an error message: at most 32 bytes, non-printable bytes as \xNN.
std::string quote(std::string_view tok) {
  constexpr size_t kMax = 32;
  std::string s = "'";
  for (size_t i = 0; i < tok.size() && i < kMax; ++i) {
    unsigned char c = static_cast<unsigned char>(tok[i]);
    if (c >= 0x20 && c < 0x7f) {
      s += static_cast<char>(c);
    } else {
      static const char kHex[] = "0123456789abcdef";
      s += "\\x";
      s += kHex[c >> 4];
      s += kHex[c & 15];
    }
  }
  if (tok.size() > kMax) s += "...";
  s += '\'';
  return s;
}

// Splits off the next whitespace-separated token; empty when none is left.
inline std::string_view next_token(std::string_view& rest) {
  size_t i = 0;
  while (i < rest.size() && is_space(rest[i])) ++i;
  size_t j = i;
  while (j < rest.size() && !is_space(rest[j])) ++j;
  std::string_view tok = rest.substr(i, j - i);
  rest.remove_prefix(j);
  return tok;
}

enum class Num { Ok, NotNumber, Overflow };

// Decimal digits only (no sign), into *v; Overflow when above `max`.
inline Num parse_dec(std::string_view s, uint64_t max, uint64_t* v) {
  if (s.empty()) return Num::NotNumber;
  uint64_t x = 0;
  bool over = false;
  for (char c : s) {
    unsigned d = static_cast<unsigned char>(c) - '0';
    if (d > 9) return Num::NotNumber;
    if (!over) {
      x = x * 10 + d;
      if (x > max) over = true;  // max < 2^32 here, so x * 10 + d cannot wrap first
    }
  }
  *v = x;
  return over ? Num::Overflow : Num::Ok;
}

inline int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Hex digits with an optional 0x/0X prefix, any number of leading zeros, into *v.
inline Num parse_hex(std::string_view s, uint64_t* v) {
  if (s.size() >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) s.remove_prefix(2);
  if (s.empty()) return Num::NotNumber;
  uint64_t x = 0;
  bool over = false;
  for (char c : s) {
    int d = hex_digit(c);
    if (d < 0) return Num::NotNumber;
    if (x >> 60) over = true;
    x = (x << 4) | static_cast<uint64_t>(d);
  }
  *v = x;
  return over ? Num::Overflow : Num::Ok;
}

std::string hex(uint64_t v) {
  char buf[19];
  static const char kHex[] = "0123456789abcdef";
  int n = 0;
  char tmp[16];
  do {
    tmp[n++] = kHex[v & 15];
    v >>= 4;
  } while (v);
  buf[0] = '0';
  buf[1] = 'x';
  for (int i = 0; i < n; ++i) buf[2 + i] = tmp[n - 1 - i];
  return std::string(buf, 2 + n);
}

}  // namespace

Result<bool> parse_trace_line(std::string_view line, TraceAccess* out) {
  if (const void* hash = std::memchr(line.data(), '#', line.size())) {
    line = line.substr(0, static_cast<const char*>(hash) - line.data());
  }
  std::string_view rest = line;
  std::string_view f_thread = next_token(rest);
  if (f_thread.empty()) return false;  // blank or comment-only

  // Fields are checked left to right, so the message names the first thing that is wrong.
  TraceAccess a;
  uint64_t v = 0;
  switch (parse_dec(f_thread, kMaxTraceThread - 1, &v)) {
    case Num::NotNumber:
      return make_error("thread " + quote(f_thread) + " is not a decimal number");
    case Num::Overflow:
      return make_error("thread " + quote(f_thread) + " is out of range 0.." +
                        std::to_string(kMaxTraceThread - 1));
    case Num::Ok:
      a.thread = static_cast<uint32_t>(v);
  }

  std::string_view f_rw = next_token(rest);
  if (f_rw.empty()) return make_error("missing R|W field after the thread number");
  if (f_rw.size() == 1 && (f_rw[0] == 'R' || f_rw[0] == 'r')) {
    a.write = false;
  } else if (f_rw.size() == 1 && (f_rw[0] == 'W' || f_rw[0] == 'w')) {
    a.write = true;
  } else {
    return make_error("expected R or W, got " + quote(f_rw));
  }

  std::string_view f_addr = next_token(rest);
  if (f_addr.empty()) return make_error("missing ADDRESS field");
  switch (parse_hex(f_addr, &a.addr)) {
    case Num::NotNumber:
      return make_error("address " + quote(f_addr) + " is not hexadecimal");
    case Num::Overflow:
      return make_error("address " + quote(f_addr) + " does not fit in 64 bits");
    case Num::Ok:
      break;
  }

  std::string_view f_size = next_token(rest);
  if (f_size.empty()) return make_error("missing SIZE field");
  switch (parse_dec(f_size, kMaxTraceAccessSize, &v)) {
    case Num::NotNumber:
      return make_error("size " + quote(f_size) + " is not a decimal number");
    case Num::Overflow:
      return make_error("size " + quote(f_size) + " is out of range 1.." +
                        std::to_string(kMaxTraceAccessSize));
    case Num::Ok:
      if (v == 0) {
        return make_error("size 0 is out of range 1.." + std::to_string(kMaxTraceAccessSize));
      }
      a.size = static_cast<uint32_t>(v);
  }

  std::string_view f_extra = next_token(rest);
  if (!f_extra.empty()) return make_error("trailing field " + quote(f_extra));
  // The last byte must be addressable: an access may end at 2^64 - 1 but not wrap.
  if (a.addr + (a.size - 1) < a.addr) {
    return make_error("access of " + std::to_string(a.size) + " bytes at " + hex(a.addr) +
                      " runs past the end of the 64-bit address space");
  }
  *out = a;
  return true;
}

Status read_trace(std::istream& in, const std::string& name,
                  const std::function<void(const TraceAccess&)>& sink) {
  return read_trace_until(in, name, [&](const TraceAccess& a) -> Status {
    sink(a);
    return Ok{};
  });
}

Status read_trace_until(std::istream& in, const std::string& name,
                        const std::function<Status(const TraceAccess&)>& sink) {
  // Reads in 64 KiB chunks and splits lines by hand: iostream getline per line is several
  // times slower on traces of hundreds of MB. The buffer doubles while a line does not fit.
  std::vector<char> buf(kReadChunk);
  size_t have = 0;  // bytes in buf; buf[0..have) starts at the beginning of a line
  uint64_t lineno = 0;
  bool eof = false;
  auto fail = [&](uint64_t line_no, const std::string& msg) -> Status {
    return make_error(name + ":" + std::to_string(line_no) + ": " + msg);
  };
  auto process = [&](std::string_view line) -> Status {
    ++lineno;
    if (line.size() > kMaxLineBytes) {
      return fail(lineno, "line is longer than " + std::to_string(kMaxLineBytes) + " bytes");
    }
    TraceAccess a;
    Result<bool> r = parse_trace_line(line, &a);
    if (!r.ok()) return fail(lineno, r.error());
    if (r.value()) return sink(a);
    return Ok{};
  };

  while (true) {
    if (have == buf.size()) buf.resize(buf.size() * 2);  // a line longer than the buffer
    in.read(buf.data() + have, static_cast<std::streamsize>(buf.size() - have));
    have += static_cast<size_t>(in.gcount());
    if (!in) {
      if (in.bad()) return make_error(name + ": read error after line " + std::to_string(lineno));
      eof = true;
    }
    const char* base = buf.data();
    size_t start = 0;
    while (start < have) {
      const void* nl = std::memchr(base + start, '\n', have - start);
      if (!nl) break;
      size_t end = static_cast<const char*>(nl) - base;
      if (Status s = process(std::string_view(base + start, end - start)); !s.ok()) return s;
      start = end + 1;
    }
    size_t partial = have - start;
    if (partial > kMaxLineBytes) {
      return fail(lineno + 1, "line is longer than " + std::to_string(kMaxLineBytes) + " bytes");
    }
    if (eof) {
      if (partial > 0) return process(std::string_view(base + start, partial));
      return Ok{};
    }
    std::memmove(buf.data(), base + start, partial);
    have = partial;
  }
}

}  // namespace whymiss
