// Result<T>: a value or an Error, for failures the caller is expected to handle.
//
// Recoverable failures come back as values, never as exceptions across the relay loop
// (docs/CONTRIBUTING.md). An Error carries one line a user can read, naming what failed, on what
// and why ("pidfd_open(4711): No such process"), plus the errno when there was one.
#pragma once

#include <cerrno>
#include <string>
#include <utility>
#include <variant>

namespace warden {

struct Error {
    std::string message;
    int code = 0;  // errno when the failure came from the kernel, else 0

    // "syscall(target): strerror(err)"; target may be empty: "syscall: strerror(err)".
    static Error sys(std::string_view syscall, std::string_view target, int err);
    static Error msg(std::string message) { return Error{std::move(message), 0}; }
};

template <class T>
class [[nodiscard]] Result {
  public:
    Result(T value) : v_(std::move(value)) {}
    Result(Error error) : v_(std::move(error)) {}

    bool ok() const { return v_.index() == 0; }
    explicit operator bool() const { return ok(); }

    T& value() & { return std::get<0>(v_); }
    const T& value() const& { return std::get<0>(v_); }
    T&& value() && { return std::get<0>(std::move(v_)); }
    T& operator*() & { return value(); }
    const T& operator*() const& { return value(); }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }

    const Error& error() const { return std::get<1>(v_); }
    T value_or(T other) const& { return ok() ? value() : std::move(other); }

  private:
    std::variant<T, Error> v_;
};

// Result<void>: success or an Error.
template <>
class [[nodiscard]] Result<void> {
  public:
    Result() = default;
    Result(Error error) : error_(std::move(error)), failed_(true) {}

    bool ok() const { return !failed_; }
    explicit operator bool() const { return ok(); }
    const Error& error() const { return error_; }

  private:
    Error error_;
    bool failed_ = false;
};

using Status = Result<void>;

}  // namespace warden
