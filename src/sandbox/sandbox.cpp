#include "sandbox/sandbox.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <unordered_map>

#include "sandbox/command_line.hpp"
#include "sandbox/fs_probe.hpp"
#include "sys/exec_path.hpp"
#include "sys/fd.hpp"

extern char** environ;

namespace warden::sandbox {

std::string_view to_string(Sandbox p) {
    switch (p) {
        case Sandbox::Off:
            return "off";
        case Sandbox::Strict:
            return "strict";
        case Sandbox::Workspace:
            return "workspace";
    }
    return "?";
}

std::string_view to_string(SandboxNet n) {
    switch (n) {
        case SandboxNet::Profile:
            return "profile";
        case SandboxNet::None:
            return "none";
        case SandboxNet::Loopback:
            return "loopback";
        case SandboxNet::Any:
            return "any";
    }
    return "?";
}

Result<uint16_t> parse_port(std::string_view t) {
    unsigned v = 0;
    auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (ec != std::errc() || end != t.data() + t.size() || v == 0 || v > 65535)
        return Error::msg("not a TCP port (1-65535)");
    return static_cast<uint16_t>(v);
}

const std::vector<std::string_view>& base_env_names() {
    static const std::vector<std::string_view> names = {
        "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "LANGUAGE", "LC_*", "TZ"};
    return names;
}

namespace {

constexpr uint64_t kRead = landlock::kReadFile | landlock::kReadDir | landlock::kExecute;

using fs_probe::base_of;
using fs_probe::exists;
using fs_probe::is_dir;
using fs_probe::is_file;
using fs_probe::parent_of;

// A rule's path that is not there (the profile names paths that only some systems have).
bool missing(int err) {
    return err == ENOENT || err == ENOTDIR;
}

// The path with every symbolic link resolved, or `p` itself when that fails. realpath(3),
// not std::filesystem::canonical: the same answer for ~1/5 of the CPU on a start's critical
// path (canonical splits and rebuilds the path a component at a time, and in a fresh process
// pays for binding its symbols).
std::string real(const std::string& p) {
    char buf[PATH_MAX];
    return ::realpath(p.c_str(), buf) ? std::string(buf) : p;
}

// True when `dir` is `p` or one of its ancestors.
bool covers(const std::string& dir, const std::string& p) {
    if (dir == "/") return true;
    return p == dir ||
           (p.size() > dir.size() && p.compare(0, dir.size(), dir) == 0 && p[dir.size()] == '/');
}

// /etc is readable except for what holds secrets. Landlock only allows, so the profile
// allows every entry of /etc but these (one level down in the directories that mix
// secrets with what programs need, such as /etc/ssl's certificates and private keys).
bool etc_secret(const std::string& rel) {
    static const char* const top[] = {
        "shadow",    "shadow-",        "gshadow",          "gshadow-",    "sudoers",
        "sudoers.d", ".pwd.lock",      "krb5.keytab",      "ppp",         "ipsec.secrets",
        "wireguard", "NetworkManager", "security/opasswd", "ssl/private", "docker/key.json",
        "subuid-",   "subgid-"};
    for (const char* s : top)
        if (rel == s) return true;
    if (rel.rfind("ssh/ssh_host_", 0) == 0 && rel.find("_key") != std::string::npos &&
        rel.size() >= 4 && rel.compare(rel.size() - 4, 4, ".pub") != 0)
        return true;
    return false;
}

// A directory's entries, sorted, with what getdents already says of each: a directory or a
// file (a symbolic link, or a file system that does not say, stays Unknown).
struct Entry {
    std::string name;
    landlock::Ruleset::Kind kind;
};

std::vector<Entry> list_dir(const std::string& dir) {
    using Kind = landlock::Ruleset::Kind;
    std::vector<Entry> out;
    DIR* d = ::opendir(dir.c_str());
    if (!d) return out;
    while (dirent* e = ::readdir(d)) {
        std::string n = e->d_name;
        if (n == "." || n == "..") continue;
        out.push_back({std::move(n), e->d_type == DT_DIR   ? Kind::Directory
                                     : e->d_type == DT_REG ? Kind::File
                                                           : Kind::Unknown});
    }
    ::closedir(d);
    std::sort(out.begin(), out.end(),
              [](const Entry& a, const Entry& b) { return a.name < b.name; });
    return out;
}

// Shared prefixes that many programs install into: a command found there gets its own
// file (or script tree), never the whole prefix.
bool shared_prefix(const std::string& dir, const std::string& home) {
    static const char* const shared[] = {"/", "/usr", "/usr/local", "/opt", "/home"};
    for (const char* s : shared)
        if (dir == s) return true;
    return !home.empty() && (covers(dir, home) || dir == home + "/.local");
}

// The installation a program lives in: the directory above its bin/ (a Node or Python
// prefix, a virtualenv), or its own directory; the file alone under a shared prefix.
std::string installation_of(const std::string& program, const std::string& home) {
    std::string dir = parent_of(program);
    std::string b = base_of(dir);
    std::string tree = (b == "bin" || b == "sbin" || b == "libexec") ? parent_of(dir) : dir;
    if (!shared_prefix(tree, home)) return tree;
    if (!shared_prefix(dir, home)) return dir;
    return program;
}

// A script's package: the outermost node_modules on its path (its dependencies are there),
// else the nearest ancestor with a package manifest, else its directory.
std::string package_of(const std::string& file, const std::string& home) {
    auto nm = file.find("/node_modules/");
    if (nm != std::string::npos) return file.substr(0, nm + std::strlen("/node_modules"));
    for (std::string d = parent_of(file); !shared_prefix(d, home); d = parent_of(d)) {
        for (const char* m : {"package.json", "pyproject.toml", "setup.py", "Cargo.toml"})
            if (exists(d + "/" + m)) return d;
        if (d == "/" || d.empty()) break;
    }
    return shared_prefix(parent_of(file), home) ? file : parent_of(file);
}

// "#!/usr/bin/env node" → the resolved node; "#!/bin/sh" → /bin/sh; "" when not a script.
std::string interpreter_of(const std::string& file) {
    auto fd = open_file(file, O_RDONLY);
    if (!fd) return "";
    char buf[256];
    ssize_t n = ::read(fd->get(), buf, sizeof buf - 1);
    if (n < 3 || buf[0] != '#' || buf[1] != '!') return "";
    std::string line(buf + 2, static_cast<size_t>(n - 2));
    line = line.substr(0, line.find('\n'));
    std::vector<std::string> words;
    for (size_t i = 0; i < line.size();) {
        while (i < line.size() && (line[i] == ' ' || line[i] == '\t'))
            ++i;
        size_t j = i;
        while (j < line.size() && line[j] != ' ' && line[j] != '\t')
            ++j;
        if (j > i) words.push_back(line.substr(i, j - i));
        i = j;
    }
    if (words.empty()) return "";
    if (base_of(words[0]) != "env") return words[0];
    for (size_t i = 1; i < words.size(); ++i) {
        if (words[i][0] == '-') continue;  // env -S …
        auto r = find_executable(words[i]);
        return r ? *r : "";
    }
    return words[0];
}

// The rules a profile asks for, each path once, in the order asked. A path that does not
// exist is dropped when the rules are enforced (prepare), by the open that a rule needs
// anyway: no stat ahead of it.
struct Rules {
    struct Rule {
        PathRule rule;
        landlock::Ruleset::Kind kind;  // what a directory walk already knows, else Unknown
    };
    std::vector<Rule> list;
    std::unordered_map<std::string, size_t> index;  // path → its place in `list`

    // Room for a profile's rules (~170, most of them /etc's entries) from the start: grown
    // a doubling at a time, the list and the index would move every rule several times.
    Rules() {
        list.reserve(256);
        index.reserve(256);
    }

    void add(std::string path, bool write, std::string why,
             landlock::Ruleset::Kind kind = landlock::Ruleset::Kind::Unknown) {
        if (auto it = index.find(path); it != index.end()) {
            list[it->second].rule.write = list[it->second].rule.write || write;
            return;
        }
        index.emplace(path, list.size());
        list.push_back({{std::move(path), write, std::move(why)}, kind});
    }
};

// The system, read-only. /etc is the costly part: one rule for each of its ~150 entries,
// because Landlock only allows and /etc holds secrets beside what every program reads.
// Each rule is one open, one landlock_add_rule and one close; the walk's d_type spares the
// stat that would otherwise tell a directory from a file.
void system_rules(Rules& r) {
    for (const char* d : {"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"})
        r.add(d, false, "system");
    for (const auto& e : list_dir("/etc")) {
        if (etc_secret(e.name)) continue;
        if (e.name == "ssh" || e.name == "ssl" || e.name == "security" || e.name == "docker") {
            for (const auto& f : list_dir("/etc/" + e.name))
                if (!etc_secret(e.name + "/" + f.name))
                    r.add("/etc/" + e.name + "/" + f.name, false, "system /etc", f.kind);
            continue;
        }
        r.add("/etc/" + e.name, false, "system /etc", e.kind);
    }
    for (const char* d : {"/proc", "/sys/devices/system/cpu", "/sys/fs/cgroup"})
        r.add(d, false, "system");
    for (const char* d : {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"})
        r.add(d, true, "device");
}

// A fresh user has no launcher cache yet, and a confined launcher cannot make one: creating
// ~/.npm means writing the home directory, which no profile allows (a rule on $HOME would
// open all of it). So the relay makes the cache, as the launcher itself would have, before
// the rules are fixed: then it exists, gets its rule, and npx starts as on a machine where it
// ran before. Mode 0700: a cache of the user's packages and logs is nobody else's. A cache
// that cannot be made (a read-only home) gets no rule; the launcher then fails as it would
// unconfined.
void make_launcher_cache(const Launcher& launcher, const std::string& home) {
    auto first_written = std::find_if(launcher.paths.begin(), launcher.paths.end(),
                                      [](const PathRule& r) { return r.write; });
    if (first_written == launcher.paths.end()) return;
    const std::string& dir = first_written->path;
    if (exists(dir) || !exists(home) || !covers(home, dir)) return;
    // One directory at a time below the home (~/.cache may be missing as well as ~/.cache/uv).
    for (size_t at = dir.find('/', home.size() + 1);; at = dir.find('/', at + 1)) {
        ::mkdir(dir.substr(0, at).c_str(), 0700);
        if (at == std::string::npos) break;
    }
}

// `python -m MODULE` among an invocation's arguments: MODULE, or "".
std::string python_module_of(const Invocation& inv) {
    const std::string cmd = base_of(inv.argv[0]);
    if (cmd.rfind("python", 0) != 0) return "";
    for (size_t i = 1; i + 1 < inv.argv.size(); ++i) {
        const std::string& a = inv.argv[i];
        if (a == "-m") return inv.argv[i + 1];
        if (a.empty() || a[0] != '-') return "";  // a script: -m after it is the script's
    }
    return "";
}

// One command's rules: its installation (and its #! interpreter), the package of each file
// named in its arguments (node /x/dist/index.js, python3 server.py), the module it runs with
// `python -m`.
void invocation_rules(Rules& r, const Invocation& inv, const std::string& executable,
                      const Launch& l) {
    // The executable as found and as resolved: a virtualenv's python is a symlink into the
    // system, and the virtualenv is what holds the server's packages.
    for (const std::string& p : {executable, real(executable)}) {
        r.add(installation_of(p, l.home), false, "command");
        if (std::string interp = interpreter_of(p); !interp.empty()) {
            r.add(installation_of(interp, l.home), false, "command interpreter");
            r.add(installation_of(real(interp), l.home), false, "command interpreter");
        }
    }
    for (size_t i = 1; i < inv.argv.size(); ++i) {
        const std::string& a = inv.argv[i];
        if (a.empty() || a[0] == '-') continue;
        std::string p = fs_probe::absolute(a, inv.cwd);
        if (is_file(p)) r.add(package_of(real(p), l.home), false, "command script");
    }
    if (std::string module = python_module_of(inv); !module.empty()) {
        auto found = python_module_path(module, python_search_path(inv.cwd, l.python_path, l.home));
        if (!found.top.empty())
            r.add(
                shared_prefix(found.search_dir, l.home) ? real(found.top) : real(found.search_dir),
                false, "python module");
    }
}

void command_rules(Rules& r, const Launch& l, const std::optional<Launcher>& launcher) {
    // The command, then each command named inside it (sh -c '…', env …): their programs are
    // found through PATH as the shell would find them; a word that names none is skipped.
    auto invocations = l.no_inner_commands ? std::vector<Invocation>{{l.argv, l.cwd}}
                                           : invocations_of(l.argv, l.cwd);
    for (size_t i = 0; i < invocations.size(); ++i) {
        std::string exe = l.executable;
        if (i > 0) {
            auto found = find_executable(invocations[i].argv[0].empty() ? std::string("/")
                                                                        : invocations[i].argv[0]);
            if (!found) continue;
            exe = *found;
        }
        invocation_rules(r, invocations[i], exe, l);
    }
    // A package launcher's cache and configuration (src/sandbox/launcher.hpp).
    if (launcher)
        for (const auto& p : launcher->paths)
            r.add(p.path, p.write, p.why);
}

void workspace_rules(Rules& r, const Launch& l) {
    for (size_t i = 1; i < l.argv.size(); ++i) {
        std::string a = l.argv[i];
        if (auto eq = a.find('='); a.rfind("-", 0) == 0 && eq != std::string::npos)
            a = a.substr(eq + 1);  // --root=/srv/data
        if (a.empty() || a[0] == '-') continue;
        std::string p = a[0] == '/' ? a : l.cwd + "/" + a;
        if (is_dir(p) && real(p) != "/") r.add(real(p), true, "argument");
    }
    if (l.home.empty()) return;
    for (const char* c :
         {"/.npm", "/.cache/uv", "/.local/share/uv", "/.cache/pip", "/.cache/node-gyp"})
        r.add(l.home + c, true, "package cache");
}

// Names kept from the environment: the base names, then --env-allow ("NAME" or "PREFIX*").
bool env_kept(std::string_view name, const std::vector<std::string>& allow) {
    auto match = [&](std::string_view pattern) {
        if (!pattern.empty() && pattern.back() == '*')
            return name.substr(0, pattern.size() - 1) == pattern.substr(0, pattern.size() - 1);
        return name == pattern;
    };
    for (auto n : base_env_names())
        if (match(n)) return true;
    for (const auto& n : allow)
        if (match(n)) return true;
    return false;
}

// The calls a server has no business making, refused with EPERM. Landlock cannot express
// these: it confines files, TCP ports and two kinds of IPC.
const std::vector<std::string>& refused_calls() {
    static const std::vector<std::string> calls = {"ptrace",
                                                   "process_vm_readv",
                                                   "process_vm_writev",
                                                   "pidfd_getfd",
                                                   "keyctl",
                                                   "add_key",
                                                   "request_key",
                                                   "perf_event_open",
                                                   "bpf",
                                                   "userfaultfd",
                                                   "mount",
                                                   "umount2",
                                                   "pivot_root",
                                                   "move_mount",
                                                   "open_tree",
                                                   "fsopen",
                                                   "fsmount",
                                                   "fspick",
                                                   "mount_setattr",
                                                   "setns",
                                                   "kexec_load",
                                                   "kexec_file_load",
                                                   "init_module",
                                                   "finit_module",
                                                   "delete_module",
                                                   "open_by_handle_at",
                                                   "reboot",
                                                   "swapon",
                                                   "swapoff",
                                                   "acct"};
    return calls;
}

constexpr uint64_t kCloneNewFlags[] = {0x00020000,  /* CLONE_NEWNS */
                                       0x02000000,  /* CLONE_NEWCGROUP */
                                       0x04000000,  /* CLONE_NEWUTS */
                                       0x08000000,  /* CLONE_NEWIPC */
                                       0x10000000,  /* CLONE_NEWUSER */
                                       0x20000000,  /* CLONE_NEWPID */
                                       0x40000000,  /* CLONE_NEWNET */
                                       0x00000080}; /* CLONE_NEWTIME */

// The calls refused, as --explain lists them: the names of refused_calls() and a phrase for
// each rule with arguments.
std::vector<std::string> refused_listing(SeccompPolicy p) {
    std::vector<std::string> listed = refused_calls();
    listed.push_back("unshare/clone with CLONE_NEW*");
    listed.push_back("clone3 (ENOSYS: libc falls back to clone)");
    if (p.restrict_net)
        listed.push_back(p.inet_allowed ? "socket: families other than UNIX/INET/INET6, and "
                                          "INET/INET6 other than TCP (UDP, raw, SCTP, MPTCP)"
                                        : "socket: every family but UNIX");
    return listed;
}

#include "sandbox/seccomp_programs.inc"

}  // namespace

Result<SeccompProgram> build_seccomp(SeccompPolicy p) {
    auto b = SeccompBuilder::create();
    if (!b) return b.error();
    auto deny = [&](const std::string& call, int err, std::vector<SeccompArg> when) -> Status {
        auto r = b->deny(call, err, std::move(when));
        if (!r) return r.error();
        return {};
    };
    for (const auto& c : refused_calls())
        if (auto s = deny(c, EPERM, {}); !s) return s.error();
    // Namespaces: clone and unshare with any CLONE_NEW* flag. clone3 passes its flags in
    // memory a filter cannot read: ENOSYS makes libc fall back to clone.
    for (uint64_t f : kCloneNewFlags) {
        if (auto s = deny("unshare", EPERM, {{0, f, f}}); !s) return s.error();
        if (auto s = deny("clone", EPERM, {{0, f, f}}); !s) return s.error();
    }
    if (auto s = deny("clone3", ENOSYS, {}); !s) return s.error();
    if (p.restrict_net) {
        // socket(2) families other than UNIX, INET, INET6; and for INET/INET6 anything but
        // a TCP stream (UDP, raw, SCTP, MPTCP are beyond Landlock's TCP port rules).
        if (auto s = deny("socket", EAFNOSUPPORT, {{0, AF_UNSPEC}}); !s) return s.error();
        for (uint64_t fam = 3; fam < AF_INET6; ++fam)
            if (auto s = deny("socket", EAFNOSUPPORT, {{0, fam}}); !s) return s.error();
        SeccompArg above{0, AF_INET6};
        above.greater = true;
        if (auto s = deny("socket", EAFNOSUPPORT, {above}); !s) return s.error();
        for (uint64_t fam : {uint64_t{AF_INET}, uint64_t{AF_INET6}}) {
            if (!p.inet_allowed) {
                if (auto s = deny("socket", EACCES, {{0, fam}}); !s) return s.error();
                continue;
            }
            for (uint64_t type : {2, 3, 4, 5, 10})  // DGRAM RAW RDM SEQPACKET PACKET
                if (auto s = deny("socket", EACCES, {{0, fam}, {1, type, 0xf}}); !s)
                    return s.error();
            SeccompArg proto{2, 6};  // IPPROTO_TCP: anything above is SCTP, MPTCP, …
            proto.greater = true;
            if (auto s = deny("socket", EACCES, {{0, fam}, proto}); !s) return s.error();
        }
    }
    return b->export_bpf();
}

std::optional<SeccompProgram> precompiled_seccomp(SeccompPolicy p) {
#if defined(__x86_64__) && !defined(__ILP32__)
    auto of = [](const auto& insns) {
        return SeccompProgram(std::vector<sock_filter>(std::begin(insns), std::end(insns)));
    };
    if (!p.restrict_net) return of(kSeccompCalls);
    return p.inet_allowed ? of(kSeccompCallsTcpOnly) : of(kSeccompCallsNoInet);
#else
    (void)p;
    return std::nullopt;
#endif
}

namespace {

// The rules whose paths exist, into `out`, each added to the ruleset `rs` (null: no
// Landlock here, the plan only says what would be enforced). A path that is not there is
// left out; the open that its rule needs anyway finds that out, no stat ahead of it. The
// rules' descriptors are closed a batch at a time (close_held): with /etc's ~150
// entries, a close per rule would be a third of the calls that make the plan.
Status admit_paths(Rules rules, landlock::Ruleset* rs, std::vector<PathRule>& out) {
    constexpr size_t kBatch = 64;  // descriptors held at once, well below any RLIMIT_NOFILE
    std::vector<Fd> held;
    held.reserve(kBatch);
    out.reserve(out.size() + rules.list.size());
    for (auto& [r, kind] : rules.list) {
        if (!rs) {
            if (exists(r.path)) out.push_back(std::move(r));
            continue;
        }
        auto st = rs->allow_path(r.path, r.write ? rs->fs() : kRead, kind, &held);
        if (!st && !missing(st.error().code))
            return Error::msg(r.why + " " + r.path + ": " + st.error().message);
        if (st) out.push_back(std::move(r));
        if (held.size() >= kBatch) landlock::close_held(held);
    }
    landlock::close_held(held);
    return {};
}

// The private temporary directory's name, <parent>/mcpwarden-<session>-XXXXXX, chosen ahead
// of the fork (the server's TMPDIR names it) and made after it, by add_path_rules(): the
// mkdir of a directory on a disk file system is a good part of the plan's cost. The suffix
// is random, like mkdtemp's, beside a session id that already is; a name that exists all
// the same is refused by the mkdir (O_EXCL-like), never reused.
std::string private_tmp_name(const Launch& l) {
    static constexpr char kLetters[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    unsigned char r[6] = {};
    if (::getrandom(r, sizeof r, 0) != static_cast<ssize_t>(sizeof r)) {
        uint64_t t = static_cast<uint64_t>(
            std::chrono::steady_clock::now().time_since_epoch().count() ^ ::getpid());
        std::memcpy(r, &t, sizeof r);
    }
    std::string name =
        (l.tmp_parent.empty() ? "/tmp" : l.tmp_parent) + "/mcpwarden-" + l.session_id + "-";
    for (unsigned char c : r)
        name += kLetters[c % (sizeof kLetters - 1)];
    return name;
}

}  // namespace

namespace {

// The launcher the command is, when it is one, checked against what the options allow: a
// package known to be missing from its cache is refused here, before anything starts, since
// an offline launcher could only fail on it (and a launcher that tries the network through a
// sandbox that refuses it hangs in retries for a minute). --allow-fetch for a command that is
// no launcher would allow nothing, and is refused too.
Result<std::optional<Launcher>> checked_launcher(const RunOptions& s, const Launch& l) {
    auto launcher = l.no_launcher ? std::nullopt : launcher_of(l.argv, l.home, l.cwd);
    if (!launcher) {
        if (s.allow_fetch)
            return Error::msg("--allow-fetch: '" + (l.argv.empty() ? "" : l.argv[0]) +
                              "' is not a package launcher (npx, npm exec, uvx, uv tool run, "
                              "pipx run, bunx, pnpm dlx, yarn dlx): it would allow nothing");
        return std::optional<Launcher>();
    }
    if (!s.allow_fetch && launcher->cached == false) {
        std::string names;
        for (const auto& p : launcher->packages)
            names += (names.empty() ? "" : ", ") + p;
        return Error::msg(launcher->name + ": " + names + " is not in its cache (" +
                          launcher->cache +
                          "), and confined it runs offline, from the cache "
                          "alone: not starting. Add --allow-fetch to let " +
                          launcher->name + " fetch it (the network is then open to it: --net any)");
    }
    return launcher;
}

}  // namespace

std::string_view Plan::level() const {
    if (!on()) return "off";
    return not_enforced_.empty() ? "full" : "partial";
}

std::string Plan::render_text() const {
    if (!on())
        return "sandbox         off  (--sandbox off: the server runs with the user's reach)\n";
    std::string ll = abi_ > 0 ? fmt::format("Landlock ABI {}", abi_) : "no Landlock";
    std::string out = fmt::format("sandbox         {} ({}, seccomp, no_new_privs): {}\n",
                                  to_string(profile_), ll, level());
    const std::string fs = abi_ > 0 ? "landlock" : "NOT ENFORCED";
    size_t etc = 0;
    for (const auto& r : paths_) {
        if (r.why == "system /etc") {
            ++etc;  // one line for them all: /etc is every entry but its secrets
            continue;
        }
        out += fmt::format("  {:<6} {} ({}) [{}]\n", r.write ? "write" : "read", r.path, r.why, fs);
    }
    if (etc > 0)
        out += fmt::format(
            "  read   /etc: {} entries, all but shadow, gshadow, sudoers, ssh host "
            "keys, ssl/private and the other secrets of docs/SANDBOX.md [{}]\n",
            etc, fs);
    std::string ports;
    for (auto p : connect_)
        ports += (ports.empty() ? "" : ", ") + std::to_string(p);
    if (net_ == SandboxNet::Any) {
        out += "  net    any: no network rule\n";
    } else {
        bool tcp = abi_ >= 4;
        out += fmt::format(
            "  net    {}: TCP connect only to ports [{}]{} [{}]\n", to_string(net_),
            ports.empty() ? "none" : ports,
            bind_ephemeral_ ? "; TCP bind only to kernel-chosen ports (port 0)" : "; no TCP bind",
            tcp ? "landlock ABI 4" : "NOT ENFORCED");
        if (seccomp_net_)
            out += "  net    no UDP/raw sockets, no families but UNIX/INET/INET6 [seccomp]\n";
    }
    out += fmt::format(
        "  scope  signals and abstract unix sockets only within the server's tree [{}]\n",
        scoped_ ? "landlock ABI 6" : "NOT ENFORCED");
    std::string calls;
    for (const auto& c : syscalls_)
        calls += (calls.empty() ? "" : ", ") + c;
    out += fmt::format("  calls  refused: {} [seccomp]\n", calls);
    if (denials_counted())
        out +=
            "  denied calls counted per session (sandbox.denied, `mcpwarden status`) [seccomp "
            "user notification]\n";
    else if (!denials_uncounted_.empty())
        out += "  " + denials_uncounted_ + "\n";
    // The kernel reports those to its audit log alone, which an ordinary user can neither
    // read nor ask about (docs/SANDBOX.md, "Denials counted"): said here, so that no sandbox
    // line in `status` is not read as nothing refused.
    if (ruleset_)
        out +=
            "  paths and TCP ports Landlock refuses are not counted (the kernel tells only its "
            "audit log): the dry start of --explain shows them\n";
    out += "  exec   setuid/setgid bits and file capabilities ignored [no_new_privs]\n";
    std::string dropped;
    for (const auto& n : env_dropped_)
        dropped += (dropped.empty() ? "" : ", ") + n;
    out += fmt::format("  env    {} variables passed; dropped: {}\n", env_.size(),
                       dropped.empty() ? "none" : dropped);
    if (launcher_) out += launcher_line();
    for (const auto& s : not_enforced_)
        out += "  NOT ENFORCED: " + s + "\n";
    return out;
}

std::string Plan::launcher_line() const {
    std::string packages;
    for (const auto& p : launcher_->packages)
        packages += (packages.empty() ? "" : ", ") + p;
    if (fetch_)
        return fmt::format("  fetch  {} {}: may fetch what {} lacks (--allow-fetch), net {}\n",
                           launcher_->name, packages, launcher_->cache, to_string(net_));
    std::string offline;
    for (const auto& kv : launcher_->offline_env)
        offline += (offline.empty() ? "" : " ") + kv;
    const char* cached = !launcher_->cached   ? "cannot be told if cached"
                         : *launcher_->cached ? "cached"
                                              : "NOT cached";
    return fmt::format(
        "  fetch  {} {}: {} in {}; runs offline ({}); --allow-fetch to fetch\n", launcher_->name,
        packages, cached, launcher_->cache,
        offline.empty() ? "no offline switch: the network rules refuse the registry" : offline);
}

int Plan::apply_in_child() const noexcept {
    if (!on()) return 0;
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1UL, 0UL, 0UL, 0UL) != 0) return errno;
    if (ruleset_)
        if (int e = landlock::restrict_self(ruleset_->fd(), restrict_flags_); e != 0) return e;
    if (!seccomp_.empty()) {
        sock_fprog prog = seccomp_.fprog();
        const int e = denial_send_.valid() ? install_seccomp_listener(prog, denial_send_.get())
                                           : install_seccomp(prog);
        if (e != 0) return e;
    }
    return 0;
}

namespace {

// --allow-read and --allow-write, checked now (a mistyped path is the user's error, said
// before anything is made) and resolved against the server's working directory.
Result<std::vector<PathRule>> checked_allowed_paths(const RunOptions& s, const Launch& l) {
    std::vector<PathRule> allowed;
    for (const auto& [list, write] : {std::pair{&s.allow_read, false}, {&s.allow_write, true}}) {
        for (const auto& p : *list) {
            std::string abs = p.empty() || p[0] == '/' ? p : l.cwd + "/" + p;
            if (!exists(abs))
                return Error::sys(write ? "--allow-write" : "--allow-read", p, ENOENT);
            allowed.push_back({real(abs), write, write ? "--allow-write" : "--allow-read"});
        }
    }
    return allowed;
}

}  // namespace

// Landlock on this kernel: the ruleset with its network and scope rights (the path rules
// come in add_path_rules()), and a sentence for each right this ABI cannot enforce.
Status Plan::prepare_landlock(const Launch& l) {
    auto abi = l.no_landlock
                   ? Result<int>(Error{"Landlock disabled by MCPWARDEN_FAULT=landlock", ENOSYS})
                   : landlock::abi_version();
    abi_ = abi ? *abi : 0;
    if (!abi) {
        abi_error_ = abi.error().message;
        not_enforced_.push_back("files: every path stays readable and writable (" + abi_error_ +
                                ")");
    }
    const bool tcp_rules = net_ != SandboxNet::Any && abi_ >= 4;
    scoped_ = abi_ >= 6;
    if (abi_ > 0) {
        uint64_t net = tcp_rules ? landlock::kBindTcp | landlock::kConnectTcp : 0;
        uint64_t scoped = scoped_ ? landlock::kScopeSignal | landlock::kScopeAbstractUnixSocket : 0;
        auto rs = landlock::Ruleset::create(landlock::fs_rights(abi_), net, scoped);
        if (!rs) return rs.error();
        if (tcp_rules) {
            for (auto p : connect_)
                if (auto st = rs->allow_port(p, landlock::kConnectTcp); !st)
                    return Error::msg("--allow-connect: " + st.error().message);
            // Port 0 is how a bind asks the kernel for a free port: allowing only it lets a
            // server listen without choosing which port (and so without squatting one).
            if (net_ == SandboxNet::Loopback)
                bind_ephemeral_ = static_cast<bool>(rs->allow_port(0, landlock::kBindTcp));
        }
        ruleset_.emplace(std::move(*rs));
        // Denials by the server reach the kernel's audit log (ABI 7) only with this flag: by
        // default Landlock logs those of the executable that restricted itself, and ours
        // execs the server next. Where audit is off (no auditd: the default) nothing is
        // logged either way; reading what is logged takes CAP_AUDIT_READ (docs/SANDBOX.md).
        if (abi_ >= 7) restrict_flags_ = landlock::kLogNewExecOn;
    }
    if (!scoped_)
        not_enforced_.push_back(
            "signals and abstract unix sockets are not scoped: the server can signal the "
            "user's other processes and reach abstract sockets such as a D-Bus or X11 one "
            "(Landlock ABI < 6)");
    return {};
}

// The seccomp filter, after Landlock: where Landlock cannot restrict TCP by port, a network
// with no port allowed loses TCP altogether (stricter), and one with ports is said to be open.
Status Plan::prepare_seccomp(const Launch& l) {
    const bool restrict_net = net_ != SandboxNet::Any;
    bool inet_allowed = true;
    if (restrict_net && abi_ < 4) {
        if (connect_.empty()) {
            inet_allowed = false;  // no TCP rules possible: no TCP at all, which is stricter
        } else {
            not_enforced_.push_back(
                "TCP connect and bind are not restricted by port (Landlock ABI < 4): "
                "--allow-connect cannot be honoured alone, so every TCP port is reachable");
        }
    }
    seccomp_net_ = restrict_net;
    const SeccompPolicy policy{restrict_net, inet_allowed};
    syscalls_ = refused_listing(policy);
    if (auto pre = precompiled_seccomp(policy)) {
        seccomp_ = std::move(*pre);
    } else {
        auto prog = build_seccomp(policy);
        if (!prog) return prog.error();
        seccomp_ = std::move(*prog);
    }
    if (l.count_denials) count_denials();
    return {};
}

// The environment: the base names and --env-allow, TMPDIR pointing at the private tmp, and
// the launcher's own switch to stay offline and where its cache is, over any value the
// client set.
void Plan::prepare_env(const RunOptions& s, const Launch& l) {
    for (char** e = environ; e && *e; ++e) {
        std::string_view kv(*e);
        std::string_view name = kv.substr(0, kv.find('='));
        if (name == "TMPDIR" || name == "TMP" || name == "TEMP") continue;
        if (env_kept(name, s.env_allow))
            env_.emplace_back(kv);
        else
            env_dropped_.emplace_back(name);
    }
    for (const char* n : {"TMPDIR=", "TMP=", "TEMP="})
        env_.push_back(n + tmp_);
    auto set_env = [&](const std::vector<std::string>& kvs) {
        for (const auto& kv : kvs) {
            const std::string key = kv.substr(0, kv.find('=') + 1);
            std::erase_if(env_, [&](const std::string& e) { return e.rfind(key, 0) == 0; });
            env_.push_back(kv);
        }
    };
    if (launcher_ && !l.no_launcher_home) set_env(launcher_->home_env);
    if (launcher_ && !fetch_) set_env(launcher_->offline_env);
}

Result<Plan> prepare_ahead(const RunOptions& s, const Launch& l) {
    Plan plan;
    plan.profile_ = s.sandbox;
    if (s.sandbox == Sandbox::Off) return plan;
    auto launcher = checked_launcher(s, l);
    if (!launcher) return launcher.error();
    plan.launcher_ = *launcher;
    plan.fetch_ = s.allow_fetch;
    // A launcher that may fetch needs DNS (UDP) and the registry's port: the network of
    // `--net any`, unless --net was given.
    const SandboxNet net_default = plan.fetch_ ? SandboxNet::Any : SandboxNet::Loopback;
    plan.net_ = s.net == SandboxNet::Profile ? net_default : s.net;
    for (int port : s.allow_connect)
        if (port > 0 && port <= 65535) plan.connect_.push_back(static_cast<uint16_t>(port));

    // 1. Rules: the explicit paths are checked now; the profile's own are listed by
    // add_path_rules().
    auto allowed = checked_allowed_paths(s, l);
    if (!allowed) return allowed.error();
    Plan::Pending pending{l, s.sandbox == Sandbox::Workspace, std::move(*allowed), plan.launcher_};
    plan.tmp_ = private_tmp_name(l);
    // 2. Enforcement on this kernel, and 3. preparation (but the path rules).
    if (auto st = plan.prepare_landlock(l); !st) return st.error();
    if (auto st = plan.prepare_seccomp(l); !st) return st.error();
    plan.prepare_env(s, l);
    // `python -m` looks in PYTHONPATH first, when the server is given it.
    if (const char* pp = std::getenv("PYTHONPATH"); pp && env_kept("PYTHONPATH", s.env_allow))
        pending.launch.python_path = pp;
    plan.pending_ = std::move(pending);
    return plan;
}

Status Plan::add_path_rules() {
    if (!pending_) return {};
    const Pending p = std::move(*pending_);
    pending_.reset();
    if (::mkdir(tmp_.c_str(), 0700) != 0) return Error::sys("mkdir", tmp_, errno);
    if (p.launcher && !p.launch.no_runner_store) make_launcher_cache(*p.launcher, p.launch.home);
    Rules rules;
    system_rules(rules);
    command_rules(rules, p.launch, p.launcher);
    if (p.workspace) workspace_rules(rules, p.launch);
    rules.add(tmp_, true, "private tmp");
    for (const auto& a : p.allowed)
        rules.add(a.path, a.write, a.why);
    if (auto st = admit_paths(std::move(rules), ruleset_ ? &*ruleset_ : nullptr, paths_); !st) {
        remove_private_tmp(tmp_);
        return st.error();
    }
    return {};
}

Result<Plan> prepare(const RunOptions& s, const Launch& l) {
    auto plan = prepare_ahead(s, l);
    if (!plan) return plan.error();
    if (auto st = plan->add_path_rules(); !st) return st.error();
    return plan;
}

void remove_private_tmp(const std::string& dir) {
    if (dir.empty()) return;
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
}

}  // namespace warden::sandbox
