#include "sys/pattern.hpp"

#include <re2/re2.h>

#include "sys/text.hpp"

namespace warden {

struct Pattern::Impl {
    std::string source;
    std::unique_ptr<re2::RE2> re;
};

namespace {

re2::RE2::Options pattern_options() {
    re2::RE2::Options o;
    // Latin-1: the text is matched byte by byte, so a command line that is not UTF-8 is
    // still searched (UTF-8 patterns then match their own bytes literally).
    o.set_encoding(re2::RE2::Options::EncodingLatin1);
    o.set_log_errors(false);
    // The automaton's memory, fixed when the pattern is compiled: a pattern that needs
    // more is refused then, never while it runs over a hostile command line.
    o.set_max_mem(32 << 20);
    return o;
}

}  // namespace

Result<Pattern> Pattern::compile(std::string_view pattern) {
    auto impl = std::make_unique<Impl>();
    impl->source = std::string(pattern);
    impl->re = std::make_unique<re2::RE2>(re2::StringPiece(pattern.data(), pattern.size()),
                                          pattern_options());
    if (!impl->re->ok())
        return Error::msg("'" + escape_bytes(pattern) +
                          "': not a regular expression: " + impl->re->error());
    return Pattern(std::move(impl));
}

Pattern::Pattern(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Pattern::Pattern(Pattern&&) noexcept = default;
Pattern& Pattern::operator=(Pattern&&) noexcept = default;
Pattern::~Pattern() = default;

bool Pattern::search(std::string_view text) const {
    return re2::RE2::PartialMatch(re2::StringPiece(text.data(), text.size()), *impl_->re);
}

const std::string& Pattern::source() const {
    return impl_->source;
}

}  // namespace warden
