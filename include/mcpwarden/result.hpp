// libmcpwarden — Error and Result<T>, the return type of every call that can fail (nothing
// in the API throws). Each concept header (session.hpp, drill.hpp, …) includes this one, not
// the umbrella mcpwarden.hpp: the umbrella includes every concept header, so a concept
// header that included it back would see its siblings before itself.
#pragma once

#include <string>
#include <utility>
#include <variant>

#include "mcpwarden/export.h"

namespace warden::api {

// One line a user can read ("cannot run 'foo': command not found") and the errno, if any.
struct Error {
    std::string message;
    int code = 0;
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
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }
    const Error& error() const { return std::get<1>(v_); }

  private:
    std::variant<T, Error> v_;
};

}  // namespace warden::api
