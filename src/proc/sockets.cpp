// Parsing /proc/net/* into inode-keyed socket tables.
#include "proc/sockets.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <charconv>
#include <cstring>
#include <string_view>

#include <fmt/format.h>

#include "proc/fields.hpp"
#include "proc/process_table.hpp"
#include "sys/fd.hpp"

namespace warden {
namespace {

constexpr int kTcpEstablished = 1;
constexpr int kTcpClose = 7;
constexpr int kTcpListen = 10;

template <class T>
bool parse_num(std::string_view s, T& v, int base = 10) {
    auto r = std::from_chars(s.data(), s.data() + s.size(), v, base);
    return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

using proc_text::next_field;

// "0100007F:1F90": the address is the kernel's in-memory (network order) words printed as
// native-endian hex, so converting each 8-digit word back to a native u32 restores the
// original bytes.
bool parse_endpoint(std::string_view s, bool ipv6, std::string& addr, uint16_t& port) {
    size_t colon = s.find(':');
    if (colon == std::string_view::npos) return false;
    std::string_view hex = s.substr(0, colon);
    if (!parse_num(s.substr(colon + 1), port, 16)) return false;
    size_t words = ipv6 ? 4 : 1;
    if (hex.size() != words * 8) return false;
    uint32_t raw[4] = {};
    for (size_t i = 0; i < words; ++i)
        if (!parse_num(hex.substr(i * 8, 8), raw[i], 16)) return false;
    char buf[INET6_ADDRSTRLEN];
    if (!::inet_ntop(ipv6 ? AF_INET6 : AF_INET, raw, buf, sizeof buf)) return false;
    addr = buf;
    return true;
}

template <class F>
void for_each_line(std::string_view text, F&& f) {
    bool header = true;
    while (!text.empty()) {
        size_t nl = text.find('\n');
        std::string_view line = text.substr(0, nl);
        text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
        if (header) {
            header = false;
            continue;
        }
        if (!line.empty()) f(line);
    }
}

}  // namespace

bool SocketEntry::listening() const {
    if (proto == Proto::Tcp) return state == kTcpListen;
    if (proto == Proto::Udp) return state == kTcpClose && local_port != 0 && remote_port == 0;
    return false;
}

bool SocketEntry::connected() const {
    if (proto == Proto::Unix) return false;
    return state == kTcpEstablished;
}

std::string SocketEntry::proto_name() const {
    switch (proto) {
        case Proto::Tcp:
            return ipv6 ? "tcp6" : "tcp";
        case Proto::Udp:
            return ipv6 ? "udp6" : "udp";
        case Proto::Unix:
            return "unix";
    }
    return "?";
}

std::string SocketEntry::state_name() const {
    if (proto != Proto::Tcp) return "";
    static constexpr const char* kNames[] = {
        "",      "ESTABLISHED", "SYN_SENT", "SYN_RECV", "FIN_WAIT1", "FIN_WAIT2",   "TIME_WAIT",
        "CLOSE", "CLOSE_WAIT",  "LAST_ACK", "LISTEN",   "CLOSING",   "NEW_SYN_RECV"};
    if (state > 0 && state < static_cast<int>(std::size(kNames))) return kNames[state];
    return fmt::format("{}", state);
}

void SocketTable::add_inet(std::string_view text, SocketEntry::Proto proto, bool ipv6) {
    for_each_line(text, [&](std::string_view line) {
        // sl local rem st tx:rx tr:tm retrnsmt uid timeout inode ...
        SocketEntry e;
        e.proto = proto;
        e.ipv6 = ipv6;
        std::string_view f[10];
        for (auto& x : f)
            x = next_field(line);
        if (f[9].empty()) return;
        if (!parse_endpoint(f[1], ipv6, e.local_addr, e.local_port)) return;
        if (!parse_endpoint(f[2], ipv6, e.remote_addr, e.remote_port)) return;
        if (!parse_num(f[3], e.state, 16)) return;
        if (!parse_num(f[9], e.inode) || e.inode == 0) return;  // 0: TIME_WAIT, no socket
        by_inode_.emplace(e.inode, std::move(e));
    });
}

void SocketTable::add_unix(std::string_view text) {
    for_each_line(text, [&](std::string_view line) {
        // Num RefCount Protocol Flags Type St Inode [Path]
        SocketEntry e;
        e.proto = SocketEntry::Proto::Unix;
        std::string_view f[7];
        for (auto& x : f)
            x = next_field(line);
        if (f[6].empty()) return;
        parse_num(f[4], e.unix_type, 16);
        parse_num(f[5], e.state, 16);
        if (!parse_num(f[6], e.inode) || e.inode == 0) return;
        size_t b = line.find_first_not_of(' ');
        if (b != std::string_view::npos) e.path = std::string(line.substr(b));
        by_inode_.emplace(e.inode, std::move(e));
    });
}

Result<SocketTable> SocketTable::load_for(pid_t pid) {
    struct Source {
        const char* name;
        SocketEntry::Proto proto;
        bool ipv6;
    };
    static constexpr Source kSources[] = {
        {"tcp", SocketEntry::Proto::Tcp, false},   {"tcp6", SocketEntry::Proto::Tcp, true},
        {"udp", SocketEntry::Proto::Udp, false},   {"udp6", SocketEntry::Proto::Udp, true},
        {"unix", SocketEntry::Proto::Unix, false},
    };
    SocketTable t;
    int read_ok = 0;
    Error last = Error::msg("");
    for (const Source& s : kSources) {
        auto text = read_file(fmt::format("/proc/{}/net/{}", pid, s.name));
        if (!text) {
            last = text.error();
            continue;
        }
        ++read_ok;
        if (s.proto == SocketEntry::Proto::Unix)
            t.add_unix(*text);
        else
            t.add_inet(*text, s.proto, s.ipv6);
    }
    if (read_ok == 0) return last;
    return t;
}

const SocketEntry* SocketTable::lookup(uint64_t inode) const {
    auto it = by_inode_.find(inode);
    return it == by_inode_.end() ? nullptr : &it->second;
}

SocketTables SocketTables::load(const ProcessTable& table) {
    SocketTables out;
    if (auto self = read_process(::getpid(), kNetNs)) out.own_ns_ = self->net_ns;
    // One reader pid per namespace, and only namespaces that hold a socket we would look up.
    std::unordered_map<uint64_t, pid_t> reader;
    for (const Process& p : table.all()) {
        bool has_socket = false;
        for (const FdInfo& f : p.fds)
            has_socket |= f.kind == FdInfo::Kind::Socket;
        if (!has_socket) continue;
        uint64_t ns = p.net_ns ? p.net_ns : out.own_ns_;
        reader.emplace(ns, p.net_ns ? p.id.pid : ::getpid());
    }
    for (auto [ns, pid] : reader) {
        auto t = SocketTable::load_for(pid);
        if (!t && pid != ::getpid() && ns == out.own_ns_) t = SocketTable::load_for(::getpid());
        if (t) out.by_ns_.emplace(ns, std::move(t).value());
    }
    return out;
}

SocketTables SocketTables::own_namespace() {
    SocketTables out;
    if (auto self = read_process(::getpid(), kNetNs)) out.own_ns_ = self->net_ns;
    if (auto t = SocketTable::load_for(::getpid()))
        out.by_ns_.emplace(out.own_ns_, std::move(t).value());
    return out;
}

void SocketTables::cover(const Process& p) {
    if (p.net_ns == 0 || by_ns_.count(p.net_ns)) return;
    if (auto t = SocketTable::load_for(p.id.pid)) by_ns_.emplace(p.net_ns, std::move(t).value());
}

const SocketEntry* SocketTables::lookup(const Process& p, uint64_t inode) const {
    auto it = by_ns_.find(p.net_ns ? p.net_ns : own_ns_);
    return it == by_ns_.end() ? nullptr : it->second.lookup(inode);
}

std::vector<ListeningPort> listening_ports(const Process& p, const SocketTable& table) {
    std::vector<ListeningPort> out;
    for (const FdInfo& f : p.fds) {
        if (f.kind != FdInfo::Kind::Socket) continue;
        const SocketEntry* e = table.lookup(f.inode);
        if (!e || !e->listening()) continue;
        out.push_back({e->proto == SocketEntry::Proto::Udp, e->ipv6, e->local_addr, e->local_port,
                       e->inode, f.fd});
    }
    return out;
}

std::vector<ListeningPort> listening_ports(const Process& p) {
    bool has_socket = false;
    for (const FdInfo& f : p.fds)
        has_socket |= f.kind == FdInfo::Kind::Socket;
    if (!has_socket) return {};
    auto t = SocketTable::load_for(p.id.pid);
    if (!t) return {};
    return listening_ports(p, *t);
}

}  // namespace warden
