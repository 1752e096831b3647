// JSON-RPC classifier: any line classifies without reading out of bounds, the padded and the
// copying paths agree, and every id is a piece of the line as sent.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "rpc/framer.hpp"
#include "rpc/message.hpp"

namespace warden {
namespace {

void check(bool ok, const char* what) {
    if (!ok) {
        std::fprintf(stderr, "message_fuzz: %s\n", what);
        std::abort();
    }
}

void check_message(const rpc::Message& m, std::string_view line) {
    if (!m.id.raw.empty())
        check(m.id.raw.data() >= line.data() &&
                  m.id.raw.data() + m.id.raw.size() <= line.data() + line.size(),
              "id.raw outside the line");
    check((m.kind == rpc::Kind::batch) == (m.members != nullptr), "members iff batch");
    if (m.utf8_error) check(!m.json, "utf8_error with json");
    // Touch every view so ASan sees a dangling one.
    for (std::string_view v : {m.method, m.tool, m.arguments, m.reason})
        for (char c : v) {
            volatile char x = c;
            (void)x;
        }
    if (m.members)
        for (const auto& member : *m.members) {
            check(member.kind != rpc::Kind::batch, "nested batch member");
            check_message(member, line);
        }
}

}  // namespace
}  // namespace warden

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace warden;
    // An exact-size heap copy, padded as the framer pads, so reads past the padding trip ASan.
    auto buf = std::make_unique<char[]>(size + rpc::kParsePadding);
    std::memcpy(buf.get(), data, size);
    std::memset(buf.get() + size, 0, rpc::kParsePadding);
    std::string_view line(buf.get(), size);

    static rpc::Classifier padded, copied;
    rpc::Message a = padded.classify(line, size + rpc::kParsePadding);
    check_message(a, line);
    rpc::Message b = copied.classify(line);
    check(a.kind == b.kind && a.id.type == b.id.type && a.json == b.json &&
              a.outcome == b.outcome && a.method == b.method && a.tool == b.tool &&
              a.id.raw == b.id.raw,
          "padded and copying classification differ");
    return 0;
}
