// A small streaming JSON writer. Calls must nest correctly (begin/end pairs, key() before each
// value inside an object); misuse is caught by assert in debug builds.
//
//   JsonWriter w(out);
//   w.begin_object().key("n").value(3).key("ok").value(true).end_object();
//
// Strings are escaped per RFC 8259; control characters become \uXXXX (or \n, \t, ...), and bytes
// that are not valid UTF-8 are replaced with U+FFFD so the output is always valid JSON.
#pragma once
#include <concepts>
#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace whymiss {

class JsonWriter {
 public:
  // indent > 0 pretty-prints with that many spaces per level; 0 writes compactly on one line.
  explicit JsonWriter(std::ostream& out, int indent = 2) : out_(out), indent_(indent) {}
  JsonWriter(const JsonWriter&) = delete;
  JsonWriter& operator=(const JsonWriter&) = delete;

  JsonWriter& begin_object();
  JsonWriter& end_object();
  JsonWriter& begin_array();
  JsonWriter& end_array();
  JsonWriter& key(std::string_view k);

  JsonWriter& value(std::string_view s);
  JsonWriter& value(const char* s) { return value(std::string_view(s)); }
  JsonWriter& value(const std::string& s) { return value(std::string_view(s)); }
  JsonWriter& value(bool b);
  template <std::integral T>
  requires(!std::same_as<T, bool>) JsonWriter& value(T v) {
    if constexpr (std::is_signed_v<T>) {
      return signed_value(static_cast<int64_t>(v));
    } else {
      return unsigned_value(static_cast<uint64_t>(v));
    }
  }
  // Fixed notation with `decimals` digits after the point; NaN and infinities become null.
  JsonWriter& value(double d, int decimals = 6);
  JsonWriter& null();

  // key(k).value(v) in one call.
  template <typename T>
  JsonWriter& field(std::string_view k, const T& v) {
    return key(k).value(v);
  }
  JsonWriter& field(std::string_view k, double d, int decimals) {
    return key(k).value(d, decimals);
  }

  // True once the single top-level value is complete.
  bool done() const { return stack_.empty() && wrote_root_; }

  // Appends s as a quoted JSON string literal to *dst.
  static void escape(std::string_view s, std::string* dst);

 private:
  struct Frame {
    bool object;
    bool empty = true;
    bool after_key = false;
  };
  void before_value();  // separator/indentation before any value or container
  void newline(size_t depth);
  JsonWriter& signed_value(int64_t v);
  JsonWriter& unsigned_value(uint64_t v);
  JsonWriter& close(bool object, char c);

  std::ostream& out_;
  int indent_;
  std::vector<Frame> stack_;
  bool wrote_root_ = false;
  std::string scratch_;
};

}  // namespace whymiss
