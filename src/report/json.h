// The JSON writer every report uses: calls in document order (begin/end pairs, key() before each
// value inside an object; misuse is caught by assert in debug builds) build an
// nlohmann::ordered_json document, which is written to the stream, in the order the keys were
// given, when the top-level value is complete.
//
//   JsonWriter w(out);
//   w.begin_object().key("n").value(3).key("ok").value(true).end_object();
//
// Escaping, UTF-8 and number formatting are nlohmann-json's: strings are escaped per RFC 8259,
// and bytes that are not valid UTF-8 (text from the program: file names, symbols, its command
// line) are replaced with U+FFFD, so the output is always valid UTF-8 JSON.
#pragma once
#include <concepts>
#include <cstdint>
#include <nlohmann/json.hpp>
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
      return put(nlohmann::ordered_json(static_cast<int64_t>(v)));
    } else {
      return put(nlohmann::ordered_json(static_cast<uint64_t>(v)));
    }
  }
  // Rounded to `decimals` digits after the point (the library prints the shortest form that
  // reads back as that number); with 0 decimals a whole number within 64 bits is written as an
  // integer. NaN and infinities become null.
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

  // True once the single top-level value is complete (and written).
  bool done() const { return stack_.empty() && wrote_root_; }

  // Appends s as a quoted JSON string literal to *dst, as the writer writes it.
  static void escape(std::string_view s, std::string* dst);

 private:
  JsonWriter& put(nlohmann::ordered_json v);    // a scalar where the next value goes
  nlohmann::ordered_json& slot();               // where the next value goes
  JsonWriter& close(bool object);
  void emit();

  std::ostream& out_;
  int indent_;
  nlohmann::ordered_json root_;
  // The open containers, outermost first. Only the innermost one grows while it is open, so
  // the pointers to its ancestors stay valid.
  std::vector<nlohmann::ordered_json*> stack_;
  std::string key_;
  bool have_key_ = false;
  bool wrote_root_ = false;
};

}  // namespace whymiss
