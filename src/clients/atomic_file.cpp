#include "clients/atomic_file.hpp"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sys/fd.hpp"

namespace warden::clients {

std::string legacy_backup_path(const std::string& path) {
    return path + ".mcpwarden.bak";
}

Result<std::string> real_path(const std::string& path) {
    char real[PATH_MAX];
    if (!::realpath(path.c_str(), real)) return Error::sys("realpath", path, errno);
    return std::string(real);
}

namespace {

std::string dir_of(const std::string& path) {
    size_t slash = path.rfind('/');
    if (slash == std::string::npos) return ".";
    return slash == 0 ? "/" : path.substr(0, slash);
}

// A temporary file next to `target`, removed on destruction unless committed.
class TempFile {
  public:
    static Result<TempFile> create(const std::string& target) {
        std::string base = target.substr(target.rfind('/') + 1);
        std::string tmpl = dir_of(target) + "/." + base + ".mcpwarden-XXXXXX";
        int fd = ::mkostemp(tmpl.data(), O_CLOEXEC);
        if (fd < 0) return Error::sys("mkstemp", tmpl, errno);
        return TempFile(Fd(fd), std::move(tmpl));
    }
    TempFile(TempFile&&) = default;
    TempFile& operator=(TempFile&&) = delete;
    ~TempFile() {
        if (!path_.empty()) ::unlink(path_.c_str());
    }
    int fd() const { return fd_.get(); }
    const std::string& path() const { return path_; }
    void committed() { path_.clear(); }

  private:
    TempFile(Fd fd, std::string path) : fd_(std::move(fd)), path_(std::move(path)) {}
    Fd fd_;
    std::string path_;
};

Status fsync_dir(const std::string& dir) {
    auto fd = open_file(dir, O_RDONLY | O_DIRECTORY);
    if (!fd) return fd.error();
    if (::fsync(fd->get()) < 0) return Error::sys("fsync", dir, errno);
    return {};
}

// Writes `content` to a temp file with `st`'s mode and owner, then renames it to
// `target`. `check` runs right before the rename; an error from it aborts.
template <class Check>
Status write_atomically(const std::string& target, const struct stat& st, std::string_view content,
                        Check check) {
    auto tmp = TempFile::create(target);
    if (!tmp) return tmp.error();
    if (::fchmod(tmp->fd(), st.st_mode & 07777) < 0)
        return Error::sys("fchmod", tmp->path(), errno);
    if (::geteuid() == 0 && ::fchown(tmp->fd(), st.st_uid, st.st_gid) < 0)
        return Error::sys("fchown", tmp->path(), errno);
    if (auto w = write_all(tmp->fd(), content, tmp->path()); !w) return w.error();
    if (::fsync(tmp->fd()) < 0) return Error::sys("fsync", tmp->path(), errno);
    if (auto c = check(); !c) return c.error();
    if (::rename(tmp->path().c_str(), target.c_str()) < 0)
        return Error::sys("rename", tmp->path() + " -> " + target, errno);
    tmp->committed();
    return fsync_dir(dir_of(target));
}

}  // namespace

Result<Replaced> replace_file(const std::string& path, std::string_view expected,
                              std::string_view content, const std::string& backup) {
    auto real = real_path(path);
    if (!real) return real.error();
    Replaced out;
    out.path = *real;

    struct stat st;
    if (::stat(out.path.c_str(), &st) < 0) return Error::sys("stat", out.path, errno);

    auto unchanged = [&]() -> Status {
        auto now = read_file(out.path);
        if (!now) return now.error();
        if (*now != expected)
            return Error{out.path + " changed while mcpwarden was editing it", EAGAIN};
        return {};
    };

    struct stat bst;
    if (::lstat(backup.c_str(), &bst) < 0) {
        if (errno != ENOENT) return Error::sys("stat", backup, errno);
        struct stat private_mode = st;
        private_mode.st_mode = 0600;
        private_mode.st_uid = ::geteuid();
        private_mode.st_gid = ::getegid();
        if (auto s = write_atomically(backup, private_mode, expected, unchanged); !s)
            return s.error();
        out.backup_written = true;
    }
    if (auto s = write_atomically(out.path, st, content, unchanged); !s) return s.error();
    return out;
}

Status write_private_file(const std::string& path, std::string_view content) {
    struct stat st {};
    st.st_mode = 0600;
    st.st_uid = ::geteuid();
    st.st_gid = ::getegid();
    return write_atomically(path, st, content, [] { return Status{}; });
}

}  // namespace warden::clients
