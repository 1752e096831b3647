// The running kernel's own type information (BTF, /sys/kernel/btf/vmlinux): where a field
// sits inside a kernel struct, and the id of a kernel function. fd_snapshot builds its BPF
// program from these, so it needs no compiler, no libbpf and no headers of this kernel: the
// offsets are the running kernel's, read when the program is built.
//
// The file is mapped, not read (5.5 MB on a 6.x kernel; the kernel allows mmap of it since
// 6.16, and a plain read is the fallback): opening and walking every type costs ~3 ms.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "sys/result.hpp"

namespace warden {

class KernelBtf {
  public:
    struct Field {
        uint32_t offset = 0;  // bytes from the start of the struct
        uint32_t size = 0;    // bytes: 1, 2, 4 or 8 (a pointer is 8)
    };

    // /sys/kernel/btf/vmlinux, or `path` (tests give a crafted file). An error names the
    // file and what is wrong with it.
    static Result<KernelBtf> open(const std::string& path = "/sys/kernel/btf/vmlinux");
    // The same from bytes in memory (the fuzz target); `name` stands for the file in errors.
    static Result<KernelBtf> from_bytes(std::string bytes, std::string name);

    KernelBtf(KernelBtf&&) noexcept;
    KernelBtf& operator=(KernelBtf&&) noexcept;
    ~KernelBtf();

    // The id of the function `name` (BTF_KIND_FUNC), or an error.
    Result<uint32_t> function(std::string_view name) const;
    // `field` of struct `type`, looked for also inside its anonymous structs and unions
    // ("f_mode" of "file"); an error for a bitfield, a missing field or a size other than
    // 1, 2, 4 or 8.
    Result<Field> field(std::string_view type, std::string_view field) const;

  private:
    KernelBtf() = default;
    struct Impl;
    static Result<KernelBtf> parse(std::unique_ptr<Impl> impl, const char* data, size_t size);
    std::unique_ptr<Impl> impl_;
};

}  // namespace warden
