// Line framer: whatever the chunking and the limit, the frames hand back exactly the bytes
// received, in order, and the buffer stays bounded by the limit plus a read chunk.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "rpc/framer.hpp"

namespace warden {
namespace {

void check(bool ok, const char* what) {
    if (!ok) {
        std::fprintf(stderr, "framer_fuzz: %s\n", what);
        std::abort();
    }
}

void check_frame(const rpc::Frame& f, std::string& out) {
    check(f.capacity >= f.bytes.size() + rpc::kParsePadding, "frame capacity below padding");
    if (f.kind == rpc::Frame::Kind::line)
        check(!f.bytes.empty() && f.bytes.back() == '\n', "line without newline");
    check(f.content().size() <= f.bytes.size(), "content longer than bytes");
    // Touch the padding: ASan reports it if it is not really there.
    volatile char c = f.bytes.data()[f.bytes.size() + rpc::kParsePadding - 1];
    (void)c;
    out.append(f.bytes);
}

}  // namespace
}  // namespace warden

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace warden;
    if (size < 2) return 0;
    // First byte: the limit (1..256); second: the chunk size (1..64) used for reads.
    size_t max_message = size_t{data[0]} + 1;
    size_t step = static_cast<size_t>(data[1] % 64) + 1;
    data += 2;
    size -= 2;
    rpc::Framer framer(max_message, 64);
    std::string out;
    size_t i = 0;
    while (i < size) {
        auto space = framer.prepare();
        size_t n = std::min({step, space.size(), size - i});
        std::memcpy(space.data(), data + i, n);
        framer.commit(n);
        i += n;
        while (auto f = framer.next())
            check_frame(*f, out);
        check(framer.capacity() <= 4 * (max_message + 64 + rpc::kParsePadding), "buffer unbounded");
    }
    while (auto f = framer.finish())
        check_frame(*f, out);
    check(framer.pending() == 0, "bytes left after finish");
    check(out == std::string(reinterpret_cast<const char*>(data), size),
          "frames differ from input");
    return 0;
}
