// An environment variable set (or removed) for one test and restored afterwards, even when
// the test fails.
#pragma once

#include <stdlib.h>

#include <optional>
#include <string>

namespace warden::testing {

class ScopedEnv {
  public:
    // value nullptr: the variable is removed for the test.
    ScopedEnv(const char* name, const char* value) : name_(name) {
        if (const char* old = ::getenv(name)) old_ = old;
        if (value)
            ::setenv(name, value, 1);
        else
            ::unsetenv(name);
    }
    ~ScopedEnv() {
        if (old_)
            ::setenv(name_.c_str(), old_->c_str(), 1);
        else
            ::unsetenv(name_.c_str());
    }
    ScopedEnv(const ScopedEnv&) = delete;
    ScopedEnv& operator=(const ScopedEnv&) = delete;

  private:
    std::string name_;
    std::optional<std::string> old_;
};

}  // namespace warden::testing
