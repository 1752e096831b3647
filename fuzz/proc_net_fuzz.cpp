// /proc/net/{tcp,tcp6,udp,udp6,unix} table parsers: any text, any of the five tables,
// parses without reading outside it, and every entry it keeps is one the lookup finds.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string_view>

#include "proc/sockets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace warden;
    if (size < 1) return 0;
    unsigned which = data[0] % 5;
    auto buf = std::make_unique<char[]>(size);
    std::memcpy(buf.get(), data + 1, size - 1);
    std::string_view text(buf.get(), size - 1);

    SocketTable table;
    switch (which) {
        case 0:
            table.add_inet(text, SocketEntry::Proto::Tcp, false);
            break;
        case 1:
            table.add_inet(text, SocketEntry::Proto::Tcp, true);
            break;
        case 2:
            table.add_inet(text, SocketEntry::Proto::Udp, false);
            break;
        case 3:
            table.add_inet(text, SocketEntry::Proto::Udp, true);
            break;
        default:
            table.add_unix(text);
            break;
    }
    // At most one entry per line.
    size_t lines = 1;
    for (char c : text)
        lines += c == '\n';
    if (table.size() > lines) {
        std::fprintf(stderr, "proc_net_fuzz: %zu entries from %zu lines\n", table.size(), lines);
        std::abort();
    }
    if (const SocketEntry* e = table.lookup(0)) {
        (void)e->proto_name();
        (void)e->state_name();
    }
    return 0;
}
