// `mcpwarden export --syslog` into rsyslog from Debian, run as this test's own process with a
// private configuration on 127.0.0.1 (never the system's): RFC 5424 with octet-counted
// framing over TCP, and over TLS (RFC 5425, rsyslog's gtls driver) with a certificate that
// matches and one that does not.
#include <sys/stat.h>

#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "export/harness.hpp"

namespace warden::testing {
namespace {

bool have_rsyslog() {
    struct stat st;
    return ::stat("/usr/sbin/rsyslogd", &st) == 0;
}

// rsyslogd -n with a configuration of its own: one imtcp input on 127.0.0.1 (a port it picks
// and names in a file), every message's MSGID and structured data to out.log.
class Rsyslog {
  public:
    Rsyslog(const TempDir& dir, std::string name, bool tls, const std::string& cert = "")
        : out_(dir.file(name + ".log")) {
        std::string work = dir.file(name + ".work"), port_file = dir.file(name + ".port");
        ::mkdir(work.c_str(), 0700);
        std::ofstream conf(dir.file(name + ".conf"));
        conf << "global(workDirectory=\"" << work << "\"";
        if (tls)
            conf << " defaultNetstreamDriverCAFile=\"" << dir.file("ca.pem") << "\""
                 << " defaultNetstreamDriverCertFile=\"" << dir.file(cert + ".pem") << "\""
                 << " defaultNetstreamDriverKeyFile=\"" << dir.file(cert + ".key") << "\"";
        conf << ")\n";
        conf << "module(load=\"imtcp\"";
        if (tls)
            conf << " streamDriver.name=\"gtls\" streamDriver.mode=\"1\" "
                    "streamDriver.authMode=\"anon\"";
        conf << ")\n"
             << "input(type=\"imtcp\" address=\"127.0.0.1\" port=\"0\" listenPortFileName=\""
             << port_file << "\" ruleset=\"r\")\n"
             << "template(name=\"t\" type=\"string\" string=\"%msgid% %structured-data%\\n\")\n"
             << "ruleset(name=\"r\") { action(type=\"omfile\" file=\"" << out_
             << "\" template=\"t\") }\n";
        conf.close();
        ChildOptions o;
        o.capture_stderr = true;
        child_.emplace(
            std::vector<std::string>{"/usr/sbin/rsyslogd", "-n", "-f", dir.file(name + ".conf"),
                                     "-i", dir.file(name + ".pid")},
            o);
        if (!wait_for_file(port_file, 20s) || !(port_ = read_port_file(port_file).value_or(0)))
            ADD_FAILURE() << "rsyslogd did not start: " << child_->read_stderr(1s);
    }
    ~Rsyslog() {
        child_->signal(SIGTERM);
        (void)child_->wait_exit(10s);
    }
    std::string url(const char* scheme) const {
        return std::string(scheme) + "://127.0.0.1:" + std::to_string(port_);
    }
    // (msgid, seq, id) of each message written so far.
    struct Line {
        std::string kind;
        int64_t seq;
        std::string id;
    };
    std::vector<Line> lines() const {
        std::vector<Line> out;
        std::ifstream in(out_);
        static const std::regex re(
            R"re(^(\S+) \[mcpwarden@32473 seq="(\d+)" id="([0-9a-f]{64})")re");
        for (std::string l; std::getline(in, l);) {
            std::smatch m;
            if (std::regex_search(l, m, re)) out.push_back({m[1], std::stoll(m[2]), m[3]});
        }
        return out;
    }
    // rsyslog writes asynchronously: until `n` lines are there (or 20 s).
    std::vector<Line> wait_lines(size_t n) const {
        wait_until([&] { return lines().size() >= n; }, 20s, 50ms);
        return lines();
    }

  private:
    std::string out_;
    std::optional<TestChild> child_;
    uint16_t port_ = 0;
};

void expect_each_once_in_order(const std::vector<JournalRow>& rows,
                               const std::vector<Rsyslog::Line>& got) {
    ASSERT_EQ(got.size(), rows.size());
    for (size_t i = 0; i < rows.size(); ++i) {
        EXPECT_EQ(got[i].seq, rows[i].seq) << i;
        EXPECT_EQ(got[i].id, rows[i].hash) << i;
        EXPECT_EQ(got[i].kind, rows[i].kind.substr(0, 32)) << i;
    }
}

TEST(ExportSyslog, RsyslogReceivesEachRecordOnceInOrderOverTcpAndTls) {
    if (!have_rsyslog()) GTEST_SKIP() << "rsyslogd missing: run scripts/deps.sh";
    TempDir dir;
    ASSERT_TRUE(make_certificates(dir));
    const std::string db = dir.file("j.db");
    ASSERT_TRUE(run_session(dir, db, 3));
    auto rows = journal_rows(db);
    {
        Rsyslog tcp(dir, "tcp", false);
        auto run = export_cli(dir, db, {"--syslog", tcp.url("tcp"), "--name", "siem"});
        ASSERT_EQ(run.code, 0) << run.err;
        expect_each_once_in_order(rows, tcp.wait_lines(rows.size()));
        EXPECT_EQ(position_of(db, "siem")["seq"], rows.back().seq);
    }
    {
        Rsyslog tls(dir, "tls", true, "right");
        auto run = export_cli(
            dir, db,
            {"--syslog", tls.url("tls"), "--name", "siem-tls", "--ca-file", dir.file("ca.pem")});
        ASSERT_EQ(run.code, 0) << run.err;
        expect_each_once_in_order(rows, tls.wait_lines(rows.size()));
    }
    {
        // A certificate for another name: refused, and why; nothing delivered, nothing moves.
        Rsyslog wrong(dir, "wrong", true, "wrong");
        auto run = export_cli(dir, db,
                              {"--syslog", wrong.url("tls"), "--name", "siem-wrong", "--ca-file",
                               dir.file("ca.pem")});
        EXPECT_EQ(run.code, 1) << run.err;
        EXPECT_NE(run.err.find("the receiver's certificate was refused: IP address mismatch"),
                  std::string::npos)
            << run.err;
        EXPECT_TRUE(wrong.lines().empty());
        EXPECT_EQ(position_of(db, "siem-wrong").value("seq", int64_t{0}), 0);
    }
}

}  // namespace
}  // namespace warden::testing
