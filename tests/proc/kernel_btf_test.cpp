// KernelBtf: field offsets and function ids, from a crafted BTF file and from the kernel's.
#include "proc/kernel_btf.hpp"

#include <linux/btf.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/util.hpp"

namespace warden {
namespace {

// A BTF file written by hand: int, long, an anonymous union { int b; long c; } and
// struct outer { int a; union { int b; long c; }; }, and a function f.
class BtfWriter {
  public:
    uint32_t name(const std::string& s) {
        if (s.empty()) return 0;
        auto off = static_cast<uint32_t>(strings_.size());
        strings_ += s;
        strings_.push_back('\0');
        return off;
    }
    void type(uint32_t name_off, uint32_t kind, uint32_t vlen, uint32_t size_or_type,
              bool kflag = false) {
        btf_type t{};
        t.name_off = name_off;
        t.info = (uint32_t{kflag} << 31) | (kind << 24) | vlen;
        t.size = size_or_type;
        put(&t, sizeof t);
    }
    void u32(uint32_t v) { put(&v, sizeof v); }
    void member(const std::string& n, uint32_t type, uint32_t bit_offset) {
        btf_member m{name(n), type, bit_offset};
        put(&m, sizeof m);
    }
    std::string file(uint16_t magic = BTF_MAGIC) const {
        btf_header h{};
        h.magic = magic;
        h.version = BTF_VERSION;
        h.hdr_len = sizeof h;
        h.type_off = 0;
        h.type_len = static_cast<uint32_t>(types_.size());
        h.str_off = h.type_len;
        h.str_len = static_cast<uint32_t>(strings_.size());
        std::string out(reinterpret_cast<const char*>(&h), sizeof h);
        return out + types_ + strings_;
    }

  private:
    void put(const void* p, size_t n) { types_.append(static_cast<const char*>(p), n); }
    std::string types_;
    std::string strings_ = std::string(1, '\0');
};

std::string crafted(uint16_t magic = BTF_MAGIC) {
    BtfWriter w;
    w.type(w.name("int"), BTF_KIND_INT, 0, 4);  // id 1
    w.u32(32);
    w.type(w.name("long"), BTF_KIND_INT, 0, 8);  // id 2
    w.u32(64);
    w.type(0, BTF_KIND_UNION, 2, 8);  // id 3: the anonymous union
    w.member("b", 1, 0);
    w.member("c", 2, 0);
    w.type(w.name("outer"), BTF_KIND_STRUCT, 2, 16);  // id 4
    w.member("a", 1, 0);
    w.member("", 3, 64);
    w.type(w.name("f"), BTF_KIND_FUNC, 0, 0);  // id 5
    // id 6: struct flags { int low:3; int whole; } with bitfield-encoded offsets (kflag)
    w.type(w.name("flags"), BTF_KIND_STRUCT, 2, 8, /*kflag=*/true);
    w.member("low", 1, 3u << 24);
    w.member("whole", 1, 32);
    return w.file(magic);
}

std::string write_file(const testing::TempDir& dir, const std::string& bytes) {
    std::string path = dir.file("btf");
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
}

TEST(KernelBtf, FieldsInsideAnonymousUnionsAreFoundAtTheirOffset) {
    testing::TempDir dir;
    auto btf = KernelBtf::open(write_file(dir, crafted()));
    ASSERT_TRUE(btf) << btf.error().message;
    auto a = btf->field("outer", "a");
    ASSERT_TRUE(a) << a.error().message;
    EXPECT_EQ(a->offset, 0u);
    EXPECT_EQ(a->size, 4u);
    auto c = btf->field("outer", "c");
    ASSERT_TRUE(c) << c.error().message;
    EXPECT_EQ(c->offset, 8u);  // the union sits at bit 64
    EXPECT_EQ(c->size, 8u);
    auto b = btf->field("outer", "b");
    ASSERT_TRUE(b);
    EXPECT_EQ(b->offset, 8u);
    EXPECT_EQ(b->size, 4u);
    auto f = btf->function("f");
    ASSERT_TRUE(f);
    EXPECT_EQ(*f, 5u);
}

// The crafted file, written out and opened.
class CraftedBtf : public ::testing::Test {
  protected:
    void SetUp() override {
        path = write_file(dir, crafted());
        auto b = KernelBtf::open(path);
        ASSERT_TRUE(b) << b.error().message;
        btf.emplace(std::move(b).value());
    }
    // The error of a lookup that must fail, or "(found)".
    template <class T>
    static std::string error_of(const Result<T>& r) {
        return r ? "(found)" : r.error().message;
    }
    testing::TempDir dir;
    std::string path;
    std::optional<KernelBtf> btf;
};

TEST_F(CraftedBtf, MissingNamesAreErrorsThatSayWhat) {
    const std::string prefix = "cannot use kernel BTF " + path + ": ";
    EXPECT_EQ(error_of(btf->field("outer", "zz")), prefix + "struct outer has no field zz");
    EXPECT_EQ(error_of(btf->field("inner", "a")), prefix + "no struct inner");
    EXPECT_EQ(error_of(btf->function("g")), prefix + "no function g");
}

// A bitfield has no byte offset to load from: refused. Its neighbour in the same struct,
// encoded the same way, is found (the negative control).
TEST_F(CraftedBtf, ABitfieldIsRefused) {
    EXPECT_EQ(error_of(btf->field("flags", "low")),
              "cannot use kernel BTF " + path + ": flags.low is a bitfield");
    auto whole = btf->field("flags", "whole");
    ASSERT_TRUE(whole) << whole.error().message;
    EXPECT_EQ(whole->offset, 4u);
    EXPECT_EQ(whole->size, 4u);
    auto again = KernelBtf::from_bytes(crafted(), "in memory");
    ASSERT_TRUE(again);
    EXPECT_EQ(again->field("outer", "c")->offset, 8u);
}

TEST(KernelBtf, NotBtfIsRefusedWithTheFileNamed) {
    testing::TempDir dir;
    std::string path = write_file(dir, crafted(0x1234));
    auto btf = KernelBtf::open(path);
    ASSERT_FALSE(btf);
    EXPECT_EQ(btf.error().message, "cannot use kernel BTF " + path + ": not BTF (bad magic)");
    // Cut short: the type section runs past the end.
    std::string whole = crafted();
    std::string cut = write_file(dir, whole.substr(0, whole.size() - 20));
    auto short_btf = KernelBtf::open(cut);
    ASSERT_FALSE(short_btf);
    EXPECT_EQ(short_btf.error().message,
              "cannot use kernel BTF " + cut + ": sections run past the end of the file");
}

TEST(KernelBtf, TheRunningKernelsTaskStructHasItsTgid) {
    if (::access("/sys/kernel/btf/vmlinux", R_OK) != 0)
        GTEST_SKIP() << "this kernel has no /sys/kernel/btf/vmlinux";
    auto btf = KernelBtf::open();
    ASSERT_TRUE(btf) << btf.error().message;
    auto tgid = btf->field("task_struct", "tgid");
    ASSERT_TRUE(tgid) << tgid.error().message;
    EXPECT_EQ(tgid->size, 4u);  // pid_t
    auto mode = btf->field("file", "f_mode");
    ASSERT_TRUE(mode) << mode.error().message;
    EXPECT_EQ(mode->size, 4u);  // fmode_t
    EXPECT_TRUE(btf->function("bpf_iter_task_file"));
}

}  // namespace
}  // namespace warden
