#include "export/protobuf_writer.hpp"

#include <cstring>

namespace warden::exporter {

namespace {
constexpr uint32_t kVarint = 0, kFixed64 = 1, kLengthDelimited = 2;

size_t varint_size(uint64_t v) {
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        ++n;
    }
    return n;
}
}  // namespace

void ProtoWriter::varint(uint64_t v) {
    while (v >= 0x80) {
        buf_.push_back(static_cast<char>((v & 0x7f) | 0x80));
        v >>= 7;
    }
    buf_.push_back(static_cast<char>(v));
}

void ProtoWriter::tag(uint32_t field, uint32_t wire_type) {
    varint((static_cast<uint64_t>(field) << 3) | wire_type);
}

void ProtoWriter::varint_field(uint32_t field, uint64_t v) {
    tag(field, kVarint);
    varint(v);
}

void ProtoWriter::le64(uint64_t v) {
    for (int i = 0; i < 8; ++i)
        buf_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void ProtoWriter::fixed64_field(uint32_t field, uint64_t v) {
    tag(field, kFixed64);
    le64(v);
}

void ProtoWriter::packed_fixed64_field(uint32_t field, const std::vector<uint64_t>& v) {
    tag(field, kLengthDelimited);
    varint(8 * v.size());
    for (uint64_t x : v)
        le64(x);
}

void ProtoWriter::packed_double_field(uint32_t field, const std::vector<double>& v) {
    tag(field, kLengthDelimited);
    varint(8 * v.size());
    for (double d : v) {
        uint64_t bits;
        std::memcpy(&bits, &d, sizeof bits);
        le64(bits);
    }
}

void ProtoWriter::double_field(uint32_t field, double v) {
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    fixed64_field(field, bits);
}

void ProtoWriter::bytes_field(uint32_t field, std::string_view v) {
    tag(field, kLengthDelimited);
    varint(v.size());
    buf_.append(v);
}

void ProtoWriter::begin(uint32_t field) {
    tag(field, kLengthDelimited);
    open_.push_back(buf_.size());
}

// The length goes before the content, and is known only now: the content moves up by the
// length's own size (one byte for most OTLP messages, which are short).
void ProtoWriter::end() {
    size_t start = open_.back();
    open_.pop_back();
    uint64_t len = buf_.size() - start;
    size_t n = varint_size(len);
    buf_.insert(start, n, '\0');
    for (size_t i = 0; i < n; ++i) {
        uint8_t b = len & 0x7f;
        len >>= 7;
        buf_[start + i] = static_cast<char>(i + 1 < n ? (b | 0x80) : b);
    }
}

}  // namespace warden::exporter
