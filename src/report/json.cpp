#include "report/json.h"

#include <cassert>
#include <cmath>
#include <limits>

namespace whymiss {

using nlohmann::ordered_json;

void JsonWriter::escape(std::string_view s, std::string* dst) {
  dst->append(ordered_json(std::string(s)).dump(-1, ' ', false, ordered_json::error_handler_t::replace));
}

ordered_json& JsonWriter::slot() {
  if (stack_.empty()) {
    assert(!wrote_root_ && "JsonWriter: only one top-level value");
    wrote_root_ = true;
    return root_;
  }
  ordered_json& top = *stack_.back();
  if (top.is_object()) {
    assert(have_key_ && "JsonWriter: key() must precede a value in an object");
    have_key_ = false;
    return top[key_];
  }
  top.push_back(nullptr);
  return top.back();
}

void JsonWriter::emit() {
  out_ << root_.dump(indent_ > 0 ? indent_ : -1, ' ', false, ordered_json::error_handler_t::replace);
  if (indent_ > 0) out_ << '\n';
  root_ = nullptr;  // the document is written; free it
}

JsonWriter& JsonWriter::put(ordered_json v) {
  const bool root = stack_.empty();
  slot() = std::move(v);
  if (root) emit();
  return *this;
}

JsonWriter& JsonWriter::key(std::string_view k) {
  assert(!stack_.empty() && stack_.back()->is_object() && !have_key_);
  key_.assign(k);
  have_key_ = true;
  return *this;
}

JsonWriter& JsonWriter::begin_object() {
  ordered_json& s = slot();
  s = ordered_json::object();
  stack_.push_back(&s);
  return *this;
}

JsonWriter& JsonWriter::begin_array() {
  ordered_json& s = slot();
  s = ordered_json::array();
  stack_.push_back(&s);
  return *this;
}

JsonWriter& JsonWriter::close(bool object) {
  assert(!stack_.empty() && stack_.back()->is_object() == object && !have_key_);
  (void)object;
  stack_.pop_back();
  if (stack_.empty()) emit();
  return *this;
}

JsonWriter& JsonWriter::end_object() { return close(true); }
JsonWriter& JsonWriter::end_array() { return close(false); }

JsonWriter& JsonWriter::value(std::string_view s) { return put(ordered_json(std::string(s))); }
JsonWriter& JsonWriter::value(bool b) { return put(ordered_json(b)); }
JsonWriter& JsonWriter::null() { return put(ordered_json(nullptr)); }

JsonWriter& JsonWriter::value(double d, int decimals) {
  if (!std::isfinite(d)) return null();
  if (decimals < 0) decimals = 0;
  if (decimals > 17) decimals = 17;
  const double scale = std::pow(10.0, decimals);
  if (std::fabs(d) * scale < 9e15) d = std::round(d * scale) / scale;  // beyond that: exact already
  if (d == 0) d = 0;  // no "-0.0"
  if (decimals == 0 && d >= 0 && d < 18446744073709551616.0) return put(ordered_json(static_cast<uint64_t>(d)));
  if (decimals == 0 && d < 0 && d >= -9223372036854775808.0) return put(ordered_json(static_cast<int64_t>(d)));
  return put(ordered_json(d));
}

}  // namespace whymiss
