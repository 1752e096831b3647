#include "sys/pipe.hpp"

#include <fcntl.h>
#include <unistd.h>

namespace warden {

Result<Pipe> make_pipe(int extra_flags) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC | extra_flags) < 0) return Error::sys("pipe2", "", errno);
    return Pipe{Fd(fds[0]), Fd(fds[1])};
}

}  // namespace warden
