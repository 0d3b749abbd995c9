// Result<T>: a value or a one-sentence error message. std::expected is C++23; GCC 12 lacks it.
#pragma once
#include <string>
#include <utility>
#include <variant>

namespace whymiss {

struct Error {
  std::string message;  // one sentence, no trailing newline, meant for the user
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}
  Result(Error e) : v_(std::move(e)) {}
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  const std::string& error() const { return std::get<1>(v_).message; }

 private:
  std::variant<T, Error> v_;
};

struct Ok {};
using Status = Result<Ok>;

inline Error make_error(std::string msg) { return Error{std::move(msg)}; }

}  // namespace whymiss
