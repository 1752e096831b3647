// libmcpwarden — Error and Result<T>, the return type of every call that can fail (nothing
// in the API throws). Each concept header (session.hpp, drill.hpp, …) includes this one, not
// the umbrella mcpwarden.hpp: the umbrella includes every concept header, so a concept
// header that included it back would see its siblings before itself.
//
// Defined once, for the API and the layers alike (as mcpwarden/types.hpp's value types are):
// warden::api names them, and a layer's failure reaches the caller as it was made, nothing
// converting between twins. Recoverable failures come back as values, never as exceptions
// across the relay loop (docs/CONTRIBUTING.md).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "mcpwarden/export.h"

namespace warden {

// One line a user can read, naming what failed, on what and why ("pidfd_open(4711): No such
// process", "cannot run 'foo': command not found"), and the errno, if any.
struct Error {
    std::string message;
    int code = 0;  // errno when the failure came from the kernel, else 0

    // The layers' own (src/sys): "syscall(target): strerror(err)"; target may be empty:
    // "syscall: strerror(err)".
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

namespace api {
using warden::Error;
using warden::Result;
}  // namespace api

}  // namespace warden
