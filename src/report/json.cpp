#include "report/json.h"

#include <cassert>
#include <charconv>
#include <cmath>

namespace whymiss {
namespace {

// Length of the valid UTF-8 sequence starting at s[i], or 0 if it is invalid (bad lead byte,
// truncated, overlong, surrogate, or above U+10FFFF).
size_t utf8_sequence(std::string_view s, size_t i) {
  auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = b(i);
  size_t n;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;  // overlong
    if (c == 0xED) hi = 0x9F;  // surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;  // overlong
    if (c == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  if (b(i + 1) < lo || b(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k) {
    if (b(i + k) < 0x80 || b(i + k) > 0xBF) return 0;
  }
  return n;
}

}  // namespace

void JsonWriter::escape(std::string_view s, std::string* dst) {
  static const char kHex[] = "0123456789abcdef";
  dst->reserve(dst->size() + s.size() + 2);
  dst->push_back('"');
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      size_t n = utf8_sequence(s, i);
      if (n == 0) {
        dst->append("\xEF\xBF\xBD");  // U+FFFD for one bad byte
        ++i;
      } else {
        dst->append(s.data() + i, n);
        i += n;
      }
      continue;
    }
    switch (c) {
      case '"':
        dst->append("\\\"");
        break;
      case '\\':
        dst->append("\\\\");
        break;
      case '\b':
        dst->append("\\b");
        break;
      case '\f':
        dst->append("\\f");
        break;
      case '\n':
        dst->append("\\n");
        break;
      case '\r':
        dst->append("\\r");
        break;
      case '\t':
        dst->append("\\t");
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          dst->append("\\u00");
          dst->push_back(kHex[c >> 4]);
          dst->push_back(kHex[c & 15]);
        } else {
          dst->push_back(static_cast<char>(c));
        }
    }
    ++i;
  }
  dst->push_back('"');
}

void JsonWriter::newline(size_t depth) {
  if (indent_ <= 0) return;
  out_ << '\n';
  for (size_t i = 0; i < depth * static_cast<size_t>(indent_); ++i) out_ << ' ';
}

void JsonWriter::before_value() {
  if (stack_.empty()) {
    assert(!wrote_root_ && "JsonWriter: only one top-level value");
    wrote_root_ = true;
    return;
  }
  Frame& f = stack_.back();
  if (f.object) {
    assert(f.after_key && "JsonWriter: key() must precede a value in an object");
    f.after_key = false;
    return;
  }
  if (!f.empty) out_ << ',';
  f.empty = false;
  newline(stack_.size());
}

JsonWriter& JsonWriter::key(std::string_view k) {
  assert(!stack_.empty() && stack_.back().object && !stack_.back().after_key);
  Frame& f = stack_.back();
  if (!f.empty) out_ << ',';
  f.empty = false;
  f.after_key = true;
  newline(stack_.size());
  scratch_.clear();
  escape(k, &scratch_);
  out_ << scratch_ << (indent_ > 0 ? ": " : ":");
  return *this;
}

JsonWriter& JsonWriter::begin_object() {
  before_value();
  out_ << '{';
  stack_.push_back(Frame{true});
  return *this;
}

JsonWriter& JsonWriter::begin_array() {
  before_value();
  out_ << '[';
  stack_.push_back(Frame{false});
  return *this;
}

JsonWriter& JsonWriter::close(bool object, char c) {
  assert(!stack_.empty() && stack_.back().object == object && !stack_.back().after_key);
  bool empty = stack_.back().empty;
  stack_.pop_back();
  if (!empty) newline(stack_.size());
  out_ << c;
  if (stack_.empty() && indent_ > 0) out_ << '\n';
  return *this;
}

JsonWriter& JsonWriter::end_object() {
  return close(true, '}');
}
JsonWriter& JsonWriter::end_array() {
  return close(false, ']');
}

JsonWriter& JsonWriter::value(std::string_view s) {
  before_value();
  scratch_.clear();
  escape(s, &scratch_);
  out_ << scratch_;
  return *this;
}

JsonWriter& JsonWriter::value(bool b) {
  before_value();
  out_ << (b ? "true" : "false");
  return *this;
}

JsonWriter& JsonWriter::null() {
  before_value();
  out_ << "null";
  return *this;
}

JsonWriter& JsonWriter::signed_value(int64_t v) {
  before_value();
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out_.write(buf, r.ptr - buf);
  return *this;
}

JsonWriter& JsonWriter::unsigned_value(uint64_t v) {
  before_value();
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out_.write(buf, r.ptr - buf);
  return *this;
}

JsonWriter& JsonWriter::value(double d, int decimals) {
  if (!std::isfinite(d)) return null();
  before_value();
  if (decimals < 0) decimals = 0;
  if (decimals > 17) decimals = 17;
  char buf[400];  // DBL_MAX has 309 integer digits
  auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::fixed, decimals);
  std::string_view text(buf, r.ptr - buf);
  if (text.front() == '-' && text.find_first_not_of("-0.") == std::string_view::npos) {
    text.remove_prefix(1);  // "-0.00" would be valid JSON but reads oddly
  }
  out_ << text;
  return *this;
}

}  // namespace whymiss
