// A unified diff of two texts, line by line, for `wrap --dry-run`.
//
// Myers' O((N+M)·D) algorithm over lines: config edits change a handful of lines in files
// that can be thousands of lines long (~/.claude.json), so D stays small. Output follows
// `diff -u`: `---`/`+++` headers, `@@ -l,n +l,n @@` hunks with three lines of context, and
// "\ No newline at end of file" where a last line has no newline.
#pragma once

#include <string>
#include <string_view>

namespace warden::clients {

// Empty when the texts are equal.
std::string unified_diff(std::string_view before, std::string_view after, std::string_view old_name,
                         std::string_view new_name, size_t context = 3);

}  // namespace warden::clients
