// Splitting the space-separated lines of /proc text files (stat, net/tcp, net/unix):
// shared by the process reader and the socket tables.
#pragma once

#include <string_view>

namespace warden::proc_text {

// The next run of non-space characters of `rest`, which is advanced past it; empty at the
// end of the line.
inline std::string_view next_field(std::string_view& rest) {
    size_t b = rest.find_first_not_of(' ');
    if (b == std::string_view::npos) {
        rest = {};
        return {};
    }
    rest.remove_prefix(b);
    size_t e = rest.find(' ');
    std::string_view f = rest.substr(0, e);
    rest.remove_prefix(e == std::string_view::npos ? rest.size() : e);
    return f;
}

}  // namespace warden::proc_text
