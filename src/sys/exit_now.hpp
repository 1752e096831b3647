// Ending a process whose exit someone waits for, without making them wait for the kernel to
// tear down its address space.
#pragma once

namespace warden {

// Flushes nothing and runs no exit handler (as _exit): closes every descriptor of this
// process, then hands its address space to a short-lived process that shares it (clone with
// CLONE_VM), and _exits with `code` (exit_now.cpp says why). Falls back to a plain _exit when
// that clone is refused, and under the sanitizers.
[[noreturn]] void exit_now(int code);

}  // namespace warden
