// A pipe as two owned ends.
#pragma once

#include "sys/fd.hpp"

namespace warden {

struct Pipe {
    Fd read;
    Fd write;
};

// pipe2(2) with O_CLOEXEC (plus any extra flags, e.g. O_NONBLOCK) on both ends.
Result<Pipe> make_pipe(int extra_flags = 0);

}  // namespace warden
