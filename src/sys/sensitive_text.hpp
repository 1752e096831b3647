// Text that may hold a secret: a command line, a working directory, a note or a message
// built from them, anything another process or the user wrote.
//
// A journal cannot be edited, so a credential recorded once is kept for as long as the
// journal is. Remembering to redact at each place a record is built is how one gets missed;
// so such text travels in a type of its own, which nothing serializes as it stands:
//
// * it converts to nothing: no implicit std::string, no operator<<, no fmt formatter, no
//   to_json of its own;
// * the one way into a record is the journal's to_json (journal/redact.hpp), which writes
//   it redacted; a layer that cannot see that declaration cannot put it into JSON at all
//   (nlohmann refuses to compile a value it has no to_json for);
// * raw access is spelled out: `unredacted()`, for a terminal the text's owner reads, a
//   pattern match or a command to run, never for a record. `grep -rn unredacted src` lists
//   every place it leaves the type.
//
// Wrapping is the safe direction, so it constructs implicitly from a string: a field of this
// type takes what it took before, and only the places that read it out change.
#pragma once

#include <string>
#include <string_view>
#include <utility>

namespace warden {

class SensitiveText {
  public:
    SensitiveText() = default;
    SensitiveText(std::string text) : text_(std::move(text)) {}  // NOLINT: implicit on purpose
    SensitiveText(const char* text) : text_(text) {}             // NOLINT: implicit on purpose

    // The text as it was given, credentials and all: never for a record.
    const std::string& unredacted() const { return text_; }

    bool empty() const { return text_.empty(); }
    bool operator==(const SensitiveText&) const = default;

  private:
    std::string text_;
};

// unredacted() as a function, for an interface that takes how to write a text out (a test's
// report, TeardownReport::to_json_string).
inline std::string unredacted_text(const SensitiveText& text) {
    return text.unredacted();
}

}  // namespace warden
