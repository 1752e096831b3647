// The running kernel's BTF: a field's offset in a kernel struct, a kernel function's id.
#include "proc/kernel_btf.hpp"

#include <fcntl.h>
#include <linux/btf.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "sys/fd.hpp"

namespace warden {

struct KernelBtf::Impl {
    std::string path;
    void* map = nullptr;  // the whole file, when mapped
    size_t map_size = 0;
    std::string copy;  // the whole file, when read instead
    const char* strings = nullptr;
    uint32_t strings_len = 0;
    std::vector<const btf_type*> types;  // by id; types[0] is void (nullptr)

    ~Impl() {
        if (map) ::munmap(map, map_size);
    }
    std::string_view name(const btf_type* t) const {
        if (!t || t->name_off >= strings_len) return {};
        return std::string_view(strings + t->name_off);
    }
    const btf_type* type(uint32_t id) const { return id < types.size() ? types[id] : nullptr; }
    // Size in bytes of type `id`, through typedefs and qualifiers; 0 when unknown.
    uint32_t size_of(uint32_t id) const {
        for (int hops = 0; hops < 32; ++hops) {
            const btf_type* t = type(id);
            if (!t) return 0;
            switch (BTF_INFO_KIND(t->info)) {
                case BTF_KIND_INT:
                case BTF_KIND_ENUM:
                case BTF_KIND_ENUM64:
                case BTF_KIND_STRUCT:
                case BTF_KIND_UNION:
                    return t->size;
                case BTF_KIND_PTR:
                    return 8;
                case BTF_KIND_TYPEDEF:
                case BTF_KIND_VOLATILE:
                case BTF_KIND_CONST:
                case BTF_KIND_RESTRICT:
                case BTF_KIND_TYPE_TAG:
                    id = t->type;
                    continue;
                default:
                    return 0;
            }
        }
        return 0;
    }
    // The struct or union that `id` names through typedefs and qualifiers, or nullptr.
    const btf_type* aggregate(uint32_t id) const {
        for (int hops = 0; hops < 32; ++hops) {
            const btf_type* t = type(id);
            if (!t) return nullptr;
            unsigned kind = BTF_INFO_KIND(t->info);
            if (kind == BTF_KIND_STRUCT || kind == BTF_KIND_UNION) return t;
            if (kind != BTF_KIND_TYPEDEF && kind != BTF_KIND_VOLATILE && kind != BTF_KIND_CONST &&
                kind != BTF_KIND_TYPE_TAG)
                return nullptr;
            id = t->type;
        }
        return nullptr;
    }
    // Depth-first through anonymous members; `base` is the offset of `t` in bits.
    bool find_member(const btf_type* t, std::string_view want, uint32_t base, int depth, Field& out,
                     std::string& why) const {
        if (depth > 8) return false;
        const auto* m = reinterpret_cast<const btf_member*>(t + 1);
        const bool kflag = BTF_INFO_KFLAG(t->info);
        for (unsigned i = 0; i < BTF_INFO_VLEN(t->info); ++i, ++m) {
            uint32_t bits = kflag ? BTF_MEMBER_BIT_OFFSET(m->offset) : m->offset;
            uint32_t bitfield = kflag ? BTF_MEMBER_BITFIELD_SIZE(m->offset) : 0;
            std::string_view n =
                m->name_off < strings_len ? std::string_view(strings + m->name_off) : "";
            if (n.empty()) {
                if (const btf_type* inner = aggregate(m->type);
                    inner && find_member(inner, want, base + bits, depth + 1, out, why))
                    return true;
                continue;
            }
            if (n != want) continue;
            uint32_t size = size_of(m->type);
            if (bitfield != 0 || (base + bits) % 8 != 0)
                why = "is a bitfield";
            else if (size != 1 && size != 2 && size != 4 && size != 8)
                why = fmt::format("is {} bytes, not 1, 2, 4 or 8", size);
            else
                out = Field{(base + bits) / 8, size};
            return true;
        }
        return false;
    }
};

namespace {

Error btf_error(const std::string& path, std::string_view why) {
    return Error::msg(fmt::format("cannot use kernel BTF {}: {}", path, why));
}

}  // namespace

KernelBtf::KernelBtf(KernelBtf&&) noexcept = default;
KernelBtf& KernelBtf::operator=(KernelBtf&&) noexcept = default;
KernelBtf::~KernelBtf() = default;

Result<KernelBtf> KernelBtf::open(const std::string& path) {
    auto impl = std::make_unique<Impl>();
    impl->path = path;
    Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) return btf_error(path, std::strerror(errno));
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) return btf_error(path, std::strerror(errno));
    const char* data = nullptr;
    size_t size = 0;
    if (st.st_size > 0) {
        void* m =
            ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd.get(), 0);
        if (m != MAP_FAILED) {
            impl->map = m;
            impl->map_size = size = static_cast<size_t>(st.st_size);
            data = static_cast<const char*>(m);
        }
    }
    if (!data) {  // before 6.16 the kernel's file cannot be mapped: read it whole
        char buf[1 << 16];
        for (;;) {
            ssize_t n = ::read(fd.get(), buf, sizeof buf);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) return btf_error(path, std::strerror(errno));
            if (n == 0) break;
            impl->copy.append(buf, static_cast<size_t>(n));
        }
        data = impl->copy.data();
        size = impl->copy.size();
    }
    return parse(std::move(impl), data, size);
}

Result<KernelBtf> KernelBtf::from_bytes(std::string bytes, std::string name) {
    auto impl = std::make_unique<Impl>();
    impl->path = std::move(name);
    impl->copy = std::move(bytes);
    const char* data = impl->copy.data();
    size_t size = impl->copy.size();
    return parse(std::move(impl), data, size);
}

Result<KernelBtf> KernelBtf::parse(std::unique_ptr<Impl> impl, const char* data, size_t size) {
    const std::string& path = impl->path;
    btf_header h{};
    if (size < sizeof h) return btf_error(path, "shorter than a BTF header");
    std::memcpy(&h, data, sizeof h);
    if (h.magic != BTF_MAGIC) return btf_error(path, "not BTF (bad magic)");
    if (h.version != BTF_VERSION)
        return btf_error(path, fmt::format("BTF version {}, not {}", h.version, BTF_VERSION));
    const uint64_t types_end = uint64_t{h.hdr_len} + h.type_off + h.type_len;
    const uint64_t strings_end = uint64_t{h.hdr_len} + h.str_off + h.str_len;
    if (h.hdr_len < sizeof h || types_end > size || strings_end > size || h.str_len == 0 ||
        data[strings_end - 1] != '\0')
        return btf_error(path, "sections run past the end of the file");
    // Types are read in place: their section must start 4-byte aligned (it does in the
    // kernel's file, mapped at a page; and in a copy, which the allocator aligns).
    if ((reinterpret_cast<uintptr_t>(data) + h.hdr_len + h.type_off) % alignof(btf_type) != 0)
        return btf_error(path, "the type section is not 4-byte aligned");
    impl->strings = data + h.hdr_len + h.str_off;
    impl->strings_len = h.str_len;

    const char* p = data + h.hdr_len + h.type_off;
    const char* end = p + h.type_len;
    // What follows each type's header: a fixed part, and a part per vlen entry. One table
    // lookup per type instead of a switch: the walk covers ~127k types on a 6.x kernel.
    struct Tail {
        uint8_t fixed = 0, per_entry = 0;
        bool known = false;
    };
    static constexpr auto kTails = [] {
        std::array<Tail, 32> t{};
        auto set = [&t](unsigned kind, size_t fixed, size_t per_entry) {
            t[kind] = Tail{static_cast<uint8_t>(fixed), static_cast<uint8_t>(per_entry), true};
        };
        for (unsigned k :
             {BTF_KIND_PTR, BTF_KIND_FWD, BTF_KIND_TYPEDEF, BTF_KIND_VOLATILE, BTF_KIND_CONST,
              BTF_KIND_RESTRICT, BTF_KIND_FUNC, BTF_KIND_FLOAT, BTF_KIND_TYPE_TAG})
            set(k, 0, 0);
        set(BTF_KIND_INT, sizeof(uint32_t), 0);
        set(BTF_KIND_ARRAY, sizeof(btf_array), 0);
        set(BTF_KIND_STRUCT, 0, sizeof(btf_member));
        set(BTF_KIND_UNION, 0, sizeof(btf_member));
        set(BTF_KIND_ENUM, 0, sizeof(btf_enum));
        set(BTF_KIND_FUNC_PROTO, 0, sizeof(btf_param));
        set(BTF_KIND_VAR, sizeof(btf_var), 0);
        set(BTF_KIND_DATASEC, 0, sizeof(btf_var_secinfo));
        set(BTF_KIND_DECL_TAG, sizeof(btf_decl_tag), 0);
        set(BTF_KIND_ENUM64, 0, sizeof(btf_enum64));
        return t;
    }();
    // Reserved, not filled: an upper bound (3 MB of pointers), of which a third is used.
    impl->types.reserve(1 + h.type_len / sizeof(btf_type));
    impl->types.push_back(nullptr);  // id 0 is void
    while (p < end) {
        if (end - p < static_cast<ptrdiff_t>(sizeof(btf_type)))
            return btf_error(path, fmt::format("type {} is cut short", impl->types.size()));
        // The type section is 4-byte aligned in the file and every record a multiple of 4.
        const auto* t = reinterpret_cast<const btf_type*>(p);
        const Tail tail = kTails[BTF_INFO_KIND(t->info)];
        if (!tail.known)
            // A kind newer than this reader: its length is unknown, so nothing after it can
            // be found. Refuse rather than misread.
            return btf_error(path, fmt::format("type {} has kind {}, unknown here",
                                               impl->types.size(), BTF_INFO_KIND(t->info)));
        const size_t record =
            sizeof(btf_type) + tail.fixed + size_t{tail.per_entry} * BTF_INFO_VLEN(t->info);
        if (static_cast<size_t>(end - p) < record)
            return btf_error(path, fmt::format("type {} is cut short", impl->types.size()));
        impl->types.push_back(t);
        p += record;
    }
    KernelBtf out;
    out.impl_ = std::move(impl);
    return out;
}

Result<uint32_t> KernelBtf::function(std::string_view name) const {
    for (uint32_t id = 1; id < impl_->types.size(); ++id) {
        const btf_type* t = impl_->types[id];
        if (BTF_INFO_KIND(t->info) == BTF_KIND_FUNC && impl_->name(t) == name) return id;
    }
    return btf_error(impl_->path, fmt::format("no function {}", name));
}

Result<KernelBtf::Field> KernelBtf::field(std::string_view type, std::string_view name) const {
    for (uint32_t id = 1; id < impl_->types.size(); ++id) {
        const btf_type* t = impl_->types[id];
        unsigned kind = BTF_INFO_KIND(t->info);
        if ((kind != BTF_KIND_STRUCT && kind != BTF_KIND_UNION) || impl_->name(t) != type) continue;
        Field f;
        std::string why;
        if (!impl_->find_member(t, name, 0, 0, f, why))
            return btf_error(impl_->path, fmt::format("struct {} has no field {}", type, name));
        if (!why.empty()) return btf_error(impl_->path, fmt::format("{}.{} {}", type, name, why));
        return f;
    }
    return btf_error(impl_->path, fmt::format("no struct {}", type));
}

}  // namespace warden
