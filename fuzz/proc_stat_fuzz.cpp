// /proc/PID/stat and /proc/PID/status parsers: any text parses or is refused, without
// reading outside it; a comm taken from the stat line is a piece of it.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string_view>

#include "proc/process.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace warden;
    auto buf = std::make_unique<char[]>(size + 1);  // exact size: ASan sees any overread
    std::memcpy(buf.get(), data, size);
    std::string_view text(buf.get(), size);

    Process p;
    if (parse_proc_stat(text, p)) {
        if (p.comm.size() + 2 > text.size() || text.find(p.comm) == std::string_view::npos) {
            std::fprintf(stderr, "proc_stat_fuzz: comm is not a piece of the stat line\n");
            std::abort();
        }
    }
    Process q;
    parse_proc_status(text, q);
    return 0;
}
