// The settings file (mcpwarden/settings.hpp): which source each value comes from, the
// problems a user reads (FILE:LINE:COL), and the built-in defaults when a file is broken.
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "api/scoped_env.hpp"
#include "common/testing.hpp"
#include "mcpwarden/mcpwarden.hpp"

namespace warden::testing {
namespace {

using std::chrono::milliseconds;

void write_text(const std::string& path, const std::string& text) {
    std::ofstream(path) << text;
}

// A user's and a system's file in a fresh directory, and no MCPWARDEN_* variable of a run
// option inherited from whoever runs the tests.
struct SettingsDir {
    TempDir dir;
    api::SettingsFiles files{dir.file("user.toml"), dir.file("system.toml")};
    std::vector<std::unique_ptr<ScopedEnv>> clean;
    SettingsDir() {
        for (const api::RunOptionInfo& o : api::run_option_info())
            clean.push_back(std::make_unique<ScopedEnv>(o.env.c_str(), nullptr));
    }
};

const api::Setting& setting(const std::vector<api::Setting>& all, const std::string& key) {
    for (const api::Setting& s : all)
        if (s.key == key) return s;
    static const api::Setting none{};
    ADD_FAILURE() << "no setting " << key;
    return none;
}

std::vector<std::string> texts(const std::vector<api::SettingsProblem>& problems) {
    std::vector<std::string> out;
    for (const api::SettingsProblem& p : problems)
        out.push_back(p.text);
    return out;
}

TEST(ApiSettings, EachValueComesFromTheHighestSourceThatGivesIt) {
    SettingsDir d;
    write_text(d.files.system,
               "[run]\n"
               "eof-grace = \"100ms\"\n"
               "term-grace = \"5s\"\n"
               "max-message = \"1MiB\"\n"
               "record-args = \"full\"\n"
               "\n"
               "[server.other]\n"
               "term-grace = \"9s\"\n"
               "\n"
               "[server.fix]\n"
               "command = \"*/mcpwarden-fixture --quiet*\"\n"
               "term-grace = \"8s\"\n"
               "lazy-max-age = \"12h\"\n");
    write_text(d.files.user,
               "[run]\n"
               "eof-grace = \"200ms\"\n"
               "record-args = \"full\"\n"
               "isolate = \"cgroup\"\n"
               "\n"
               "[server.fix]\n"
               "term-grace = \"6s\"\n");
    ScopedEnv record("MCPWARDEN_RECORD_ARGS", "none");
    ScopedEnv isolate("MCPWARDEN_ISOLATE", "pidns");
    const std::vector<std::string> command{"/opt/bin/mcpwarden-fixture", "--quiet", "--x"};

    // Not named: the system's [server.fix] matches by its command pattern; the user's, with
    // no pattern, only by the name "fix".
    auto s = api::run_settings({{"isolate", "none"}}, command, d.files);
    ASSERT_TRUE(s) << s.error().message;
    EXPECT_TRUE(s->problems.empty()) << ::testing::PrintToString(texts(s->problems));
    EXPECT_EQ(s->files, (std::vector<std::string>{d.files.user, d.files.system}));
    EXPECT_EQ(s->servers, (std::vector<std::string>{d.files.system + ":10 [server.fix]"}));
    const auto& all = s->settings;
    ASSERT_EQ(all.size(), api::run_option_info().size());
    EXPECT_EQ(setting(all, "isolate").origin, "flag");
    EXPECT_EQ(setting(all, "isolate").where, "--isolate");
    EXPECT_EQ(setting(all, "record-args").origin, "env");
    EXPECT_EQ(setting(all, "record-args").where, "MCPWARDEN_RECORD_ARGS");
    EXPECT_EQ(setting(all, "term-grace").origin, "server");
    EXPECT_EQ(setting(all, "term-grace").where, d.files.system + ":12");
    EXPECT_EQ(setting(all, "eof-grace").origin, "user");
    EXPECT_EQ(setting(all, "eof-grace").where, d.files.user + ":2");
    EXPECT_EQ(setting(all, "max-message").origin, "system");
    EXPECT_EQ(setting(all, "max-message").value, "1MiB");
    EXPECT_EQ(setting(all, "stdout-guard").origin, "built-in");
    EXPECT_EQ(setting(all, "stdout-guard").value, "divert");
    const api::RunOptions& o = s->options;
    EXPECT_EQ(o.isolate, api::Isolate::None);
    EXPECT_EQ(o.record_args, api::RecordArgs::None);
    EXPECT_EQ(o.term_grace, milliseconds(8000));
    EXPECT_EQ(o.lazy_max_age, std::chrono::hours(12));
    EXPECT_EQ(setting(all, "lazy-max-age").where, d.files.system + ":13");
    EXPECT_EQ(o.eof_grace, milliseconds(200));
    EXPECT_EQ(o.max_message, std::size_t{1} << 20);
    EXPECT_EQ(o.stdout_guard, api::StdoutGuard::Divert);
    EXPECT_EQ(o.command, command);
    EXPECT_EQ(o.settings_files, s->files);
    EXPECT_EQ(o.settings_error, "");

    // Named "fix": both [server.fix] sections match; the user's wins.
    auto named = api::run_settings({{"name", "fix"}}, command, d.files);
    ASSERT_TRUE(named) << named.error().message;
    EXPECT_EQ(named->options.term_grace, milliseconds(6000));
    EXPECT_EQ(setting(named->settings, "term-grace").where, d.files.user + ":7");
    EXPECT_EQ(named->servers.size(), 2u);

    // No files at all: run_options() — flags and variables over the built-in defaults.
    auto bare = api::run_options({}, command);
    ASSERT_TRUE(bare) << bare.error().message;
    EXPECT_EQ(bare->term_grace, milliseconds(2000));
    EXPECT_EQ(bare->isolate, api::Isolate::Pidns);
}

// A broken file is not used at all (not half-applied; `mcpwarden run` then refuses to
// start), the problem names FILE:LINE:COL, and the settings shown are the flags' and the
// built-in defaults'.
TEST(ApiSettings, ABrokenFileIsIgnoredWholeAndNamedByLineAndColumn) {
    SettingsDir d;
    write_text(d.files.user,
               "[run]\n"
               "eof-grace = \"200ms\"\n"
               "term-grace = \"3x\"\n");
    auto s = api::run_settings({{"max-message", "4KiB"}}, {"srv"}, d.files);
    ASSERT_TRUE(s) << s.error().message;
    const std::string expected =
        d.files.user +
        ":3:14: [run] term-grace: cannot parse '3x' as a duration (e.g. 250ms, "
        "2s, 1.5s)";
    EXPECT_EQ(texts(s->problems), std::vector<std::string>{expected});
    EXPECT_EQ(s->problems[0].line, 3);
    EXPECT_EQ(s->problems[0].column, 14);
    EXPECT_EQ(s->options.settings_error, expected);
    EXPECT_EQ(s->options.eof_grace, milliseconds(1000))
        << "the good line of a broken file was used";
    EXPECT_EQ(setting(s->settings, "eof-grace").origin, "built-in");
    EXPECT_EQ(s->options.max_message, 4096u);

    // The control: the same file with the bad value mended is applied.
    write_text(d.files.user,
               "[run]\n"
               "eof-grace = \"200ms\"\n"
               "term-grace = \"3s\"\n");
    auto good = api::run_settings({}, {"srv"}, d.files);
    ASSERT_TRUE(good) << good.error().message;
    EXPECT_TRUE(good->problems.empty());
    EXPECT_EQ(good->options.eof_grace, milliseconds(200));
    EXPECT_EQ(good->options.term_grace, milliseconds(3000));
}

TEST(ApiSettings, CheckNamesUnknownKeysWrongTypesAndBadValues) {
    SettingsDir d;
    write_text(d.files.user,
               "[run]\n"
               "eof-grase = \"1s\"\n"
               "no-journal = \"yes\"\n"
               "isolate = \"jail\"\n"
               "name = \"x\"\n"
               "[reap]\n"
               "grace = 5\n"
               "[serevr.x]\n"
               "[server.y]\n"
               "command = 3\n");
    write_text(d.files.system, "[run\n");
    ScopedEnv guard("MCPWARDEN_STDOUT_GUARD", "loud");
    api::SettingsCheck c = api::check_settings(d.files);
    const std::string& u = d.files.user;
    EXPECT_EQ(c.files, (std::vector<std::string>{d.files.user, d.files.system}));
    auto t = texts(c.problems);
    ASSERT_EQ(t.size(), 9u) << ::testing::PrintToString(t);
    EXPECT_EQ(t[0], u + ":2:1: [run] eof-grase: unknown key (did you mean 'eof-grace'?)");
    EXPECT_EQ(t[1], u + ":3:14: [run] no-journal: expected true or false, not a string");
    EXPECT_EQ(t[2], u + ":4:11: [run] isolate: cannot parse 'jail' as auto, none, cgroup or pidns");
    EXPECT_EQ(t[3], u + ":5:1: [run] name: names one server: set it in a [server.NAME] section");
    EXPECT_EQ(t[4], u + ":7:9: [reap] grace: expected a duration as a string (\"2s\", \"5m\"), "
                        "not an integer");
    EXPECT_NE(t[5].find(u + ":8:"), std::string::npos) << t[5];
    EXPECT_NE(t[5].find("serevr: unknown key"), std::string::npos) << t[5];
    EXPECT_NE(t[5].find("did you mean 'server'?"), std::string::npos) << t[5];
    EXPECT_NE(t[6].find(u + ":10:11: [server.y] command: expected a string"), std::string::npos)
        << t[6];
    EXPECT_EQ(t[7].rfind(d.files.system + ":1:", 0), 0u) << t[7];  // TOML syntax
    EXPECT_EQ(t[8], "MCPWARDEN_STDOUT_GUARD: cannot parse 'loud' as divert, pass or fail");
}

// Counts are integers in TOML (`restart-burst = 5`), their text as the flag takes it too; a
// value that is no count, or of another type, is named by file, line and why, and the file is
// not used. The control: the same keys as integers are applied.
TEST(ApiSettings, CountsAreIntegersAndABadOneIsNamedByLine) {
    SettingsDir d;
    write_text(d.files.user,
               "[run]\n"
               "restart-burst = 3\n"
               "log-files = \"7\"\n"
               "tasks-max = 64\n");
    auto good = api::run_settings({}, {"srv"}, d.files);
    ASSERT_TRUE(good) << good.error().message;
    EXPECT_TRUE(good->problems.empty()) << ::testing::PrintToString(texts(good->problems));
    EXPECT_EQ(good->options.restart_burst, 3);
    EXPECT_EQ(good->options.log_files, 7);
    EXPECT_EQ(good->options.tasks_max, 64u);
    EXPECT_EQ(setting(good->settings, "restart-burst").where, d.files.user + ":2");

    write_text(d.files.user,
               "[run]\n"
               "restart-burst = \"x\"\n"
               "log-files = 0\n"
               "tasks-max = 1.5\n");
    auto bad = api::run_settings({}, {"srv"}, d.files);
    ASSERT_TRUE(bad) << bad.error().message;
    const std::string& u = d.files.user;
    EXPECT_EQ(texts(bad->problems),
              (std::vector<std::string>{
                  u + ":2:17: [run] restart-burst: cannot parse 'x' as a count from 1 to 100",
                  u + ":3:13: [run] log-files: cannot parse '0' as a count from 1 to 100",
                  u + ":4:13: [run] tasks-max: expected an integer (5) or its text (\"5\"), not "
                      "a float"}));
    EXPECT_EQ(bad->options.restart_burst, 5) << "a broken file was used";
    EXPECT_EQ(setting(bad->settings, "restart-burst").origin, "built-in");
}

// config.toml's [export]: a destination's [export.NAME] over [export], the user's file over
// the system's, each value with its file and line; [export.NAME] only for that name (or the
// `name` of [export]).
TEST(ApiSettings, ExportSectionsAreLayeredByDestinationThenFile) {
    SettingsDir d;
    write_text(d.files.user,
               "[export]\n"
               "protocol = \"http/json\"\n"
               "batch = 64\n"
               "\n"
               "[export.siem]\n"
               "syslog = \"tls://siem.example:6514\"\n"
               "ca-file = \"/etc/ssl/siem.pem\"\n");
    write_text(d.files.system,
               "[export]\n"
               "otlp = \"http://collector.example:4318\"\n"
               "protocol = \"http/protobuf\"\n"
               "signals = [\"logs\", \"metrics\"]\n"
               "export-gap = \"allow\"\n"
               "\n"
               "[export.siem]\n"
               "ca-file = \"/etc/ssl/other.pem\"\n"
               "retry-max = \"5s\"\n");
    const api::ExportSettings plain = api::export_settings("", d.files);
    ASSERT_TRUE(plain.problems.empty()) << texts(plain.problems).front();
    EXPECT_EQ(plain.value("protocol"), "http/json") << "the user's file over the system's";
    EXPECT_EQ(setting(plain.settings, "protocol").where, d.files.user + ":2");
    EXPECT_EQ(setting(plain.settings, "otlp").origin, "system");
    EXPECT_EQ(plain.value("signals"), "logs,metrics");
    EXPECT_EQ(plain.value("export-gap"), "allow");
    EXPECT_EQ(plain.value("syslog"), "") << "[export.siem] is for --name siem only";
    EXPECT_EQ(plain.value("retry-max"), "");
    const api::ExportSettings siem = api::export_settings("siem", d.files);
    EXPECT_EQ(siem.value("syslog"), "tls://siem.example:6514");
    EXPECT_EQ(setting(siem.settings, "syslog").section, "export.siem");
    EXPECT_EQ(siem.value("ca-file"), "/etc/ssl/siem.pem") << "the user's section first";
    EXPECT_EQ(siem.value("retry-max"), "5s") << "the system's section over [export]";
    EXPECT_EQ(siem.value("protocol"), "http/json") << "[export] under every section";
    // [export]'s name chooses the section when no name is given.
    write_text(d.files.system, "[export]\nname = \"siem\"\n");
    EXPECT_EQ(api::export_settings("", d.files).value("syslog"), "tls://siem.example:6514");
}

TEST(ApiSettings, ReapDefaultsComeFromTheFilesAndTheOlderReapToml) {
    SettingsDir d;
    ScopedEnv xdg("XDG_CONFIG_HOME", d.dir.path().c_str());
    ASSERT_EQ(::mkdir(d.dir.file("mcpwarden").c_str(), 0700), 0);
    write_text(d.dir.file("mcpwarden/reap.toml"), "revoke_timeout = \"45s\"\n");
    write_text(d.files.user, "[reap]\ngrace = \"7s\"\n");
    write_text(d.files.system,
               "[reap]\ngrace = \"1s\"\ninterval = \"1m\"\nrevoke-cmd = \"true\"\n");
    api::ReapSettings r = api::reap_settings(d.files);
    EXPECT_TRUE(r.problems.empty()) << ::testing::PrintToString(texts(r.problems));
    EXPECT_EQ(r.value("grace"), "7s");
    EXPECT_EQ(setting(r.settings, "grace").where, d.files.user + ":2");
    EXPECT_EQ(r.value("interval"), "1m");
    EXPECT_EQ(setting(r.settings, "interval").origin, "system");
    EXPECT_EQ(r.value("revoke-cmd"), "true");
    EXPECT_EQ(r.value("revoke-timeout"), "45s");
    EXPECT_EQ(setting(r.settings, "revoke-timeout").origin, "reap.toml");
    EXPECT_TRUE(r.from_file("revoke-timeout"));

    write_text(d.files.user, "[reap]\ngrace = \"soon\"\n");
    api::ReapSettings broken = api::reap_settings(d.files);
    ASSERT_EQ(broken.problems.size(), 1u);
    EXPECT_EQ(
        broken.problems[0].text.rfind(d.files.user + ":2:9: [reap] grace: duration 'soon'", 0), 0u)
        << broken.problems[0].text;
}

TEST(ApiSettings, TheUsersFileFollowsXdgThenHomeThenThePasswordDatabase) {
    {
        ScopedEnv xdg("XDG_CONFIG_HOME", "/x/cfg");
        EXPECT_EQ(api::default_settings_files().user, "/x/cfg/mcpwarden/config.toml");
        EXPECT_EQ(api::default_settings_files().system, "/etc/mcpwarden/config.toml");
    }
    {
        ScopedEnv xdg("XDG_CONFIG_HOME", "relative/cfg");  // not absolute: ignored (XDG spec)
        ScopedEnv home("HOME", "/h");
        EXPECT_EQ(api::default_settings_files().user, "/h/.config/mcpwarden/config.toml");
    }
    ScopedEnv xdg("XDG_CONFIG_HOME", nullptr);
    ScopedEnv home("HOME", nullptr);
    passwd* pw = ::getpwuid(::getuid());
    ASSERT_NE(pw, nullptr);
    EXPECT_EQ(api::default_settings_files().user,
              std::string(pw->pw_dir) + "/.config/mcpwarden/config.toml");
}

TEST(ApiSettings, ClosestWordSuggestsOnlyWhatLooksLikeATypo) {
    const std::vector<std::string> commands{"run", "ps", "inspect", "reap", "status", "config"};
    EXPECT_EQ(api::closest_word("rnu", commands), "run");
    EXPECT_EQ(api::closest_word("stauts", commands), "status");
    EXPECT_EQ(api::closest_word("confg", commands), "config");
    EXPECT_EQ(api::closest_word("frobnicate", commands), "");
    EXPECT_EQ(api::closest_word("bogus", commands), "");
    EXPECT_EQ(api::closest_word("eof_grace", {"eof-grace", "term-grace"}), "eof-grace");
}

}  // namespace
}  // namespace warden::testing
