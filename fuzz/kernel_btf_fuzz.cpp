// KernelBtf: any bytes either parse or give an error naming the file; lookups on what
// parsed stay inside it (ASan and UBSan watch), through typedef chains, anonymous members
// and cycles.
#include <cstdint>
#include <string>

#include "proc/kernel_btf.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string bytes(reinterpret_cast<const char*>(data), size);
    auto btf = warden::KernelBtf::from_bytes(std::move(bytes), "fuzz-input");
    if (!btf) return 0;
    // The names of the committed seed (fuzz/corpus/kernel_btf) and of the real lookups.
    for (const char* type : {"outer", "task_struct", "file", "inode"})
        for (const char* field : {"a", "b", "c", "tgid", "f_mode", "i_ino"})
            (void)btf->field(type, field);
    (void)btf->function("f");
    (void)btf->function("bpf_iter_task_file");
    return 0;
}
