// Pattern: a regular expression over untrusted text, in time linear in the text.
//
// `reap --match`, and anything else that matches what another process controls (its
// command line is up to the kernel's ARG_MAX, 2 MiB and more, and any local user can plant
// one), must not backtrack or recurse on its input: std::regex does both, and a 60 KB
// command line overflowed its stack (exit 139). Pattern wraps RE2, which compiles to an
// automaton and runs without recursion in time linear in the input and memory bounded at
// compile time. Syntax is RE2's (Perl-like: classes, alternation, counted repetition,
// (?i)); what an automaton cannot do — backreferences, lookaround — is refused when the
// pattern is compiled, with RE2's reason.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "sys/result.hpp"

namespace warden {

class Pattern {
  public:
    // Error "'PATTERN': not a regular expression: why" (the pattern escaped for display).
    static Result<Pattern> compile(std::string_view pattern);
    Pattern(Pattern&&) noexcept;
    Pattern& operator=(Pattern&&) noexcept;
    ~Pattern();

    // True when the pattern matches anywhere in `text` (searched, not anchored). Bytes
    // are bytes: the text need not be UTF-8.
    bool search(std::string_view text) const;
    const std::string& source() const;

  private:
    struct Impl;
    explicit Pattern(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace warden
