// `mcpwarden demo` through the built binary: it exits 0 when mcpwarden left nothing, its
// JSON carries the numbers its table shows, the table fits 80 columns without colour on a
// pipe, and nothing of any row is left after it returns.
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/cli_run.hpp"
#include "common/json_doc.hpp"
#include "common/testing.hpp"
#include "drill/demo.hpp"
#include "drill/drill.hpp"

namespace warden::testing {
namespace {

std::vector<std::string> words(const std::string& s) {
    std::vector<std::string> w;
    std::istringstream in(s);
    for (std::string x; in >> x;)
        w.push_back(x);
    return w;
}

// The cells a table row must show for one side, derived from the JSON independently of the
// renderer: processes left, MB left, port, released.
std::vector<std::string> expected_cells(const nlohmann::json& t) {
    std::vector<std::string> c;
    const int procs = t["processes_left"].get<int>();
    c.push_back(std::to_string(procs));
    c.push_back(procs == 0 ? "0" : drill::format_mb(t["mb_left"].get<double>()));
    c.push_back(t["ports"].empty() ? "-" : t["port_held"].get<bool>() ? "held" : "free");
    for (const auto& w : words(drill::format_ms(t["released_ms"].get<double>())))
        c.push_back(w);
    return c;
}

TEST(Demo, ExitsZeroAndItsJsonCarriesTheTablesNumbers) {
    TempDir dir;
    auto r = run_cli(dir, {"demo", "--json"});
    ASSERT_EQ(r.code, 0) << r.out << "\nstderr:\n" << r.err;
    EXPECT_TRUE(r.left_after.empty()) << r.left_after.size() << " processes left";
    EXPECT_TRUE(r.cgroups_left.empty()) << "cgroups left:" << cgroups_left_text(r);
    EXPECT_NE(r.err.find("journal " + dir.path()), std::string::npos)
        << "the temporary journal is named on stderr: " << r.err;
    auto j = nlohmann::json::parse(r.out, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << r.out;
    EXPECT_TRUE(j["ok"].get<bool>());
    EXPECT_TRUE(j["journal"]["verify"]["ok"].get<bool>()) << j["journal"].dump();
    ASSERT_GE(j["rows"].size(), 4u);

    int fixture_rows = 0;
    for (const auto& row : j["rows"]) {
        if (row.contains("skipped")) {
            EXPECT_EQ(row["server"], "server-everything") << row.dump();
            continue;
        }
        const auto& without = row["without"];
        const auto& with = row["with"];
        EXPECT_EQ(with["processes_left"], 0) << row.dump(2);
        EXPECT_FALSE(with["port_held"].get<bool>()) << row.dump(2);
        EXPECT_GE(with["released_ms"].get<double>(), 0) << row.dump(2);
        EXPECT_EQ(with["journal"]["abandoned"], true) << with["journal"].dump(2);
        EXPECT_TRUE(with["journal"]["order_ok"].get<bool>()) << with["journal"].dump(2);
        EXPECT_TRUE(without["clean_after"].get<bool>());
        if (row["server"] != "server-everything") {
            ++fixture_rows;
            // The fixture's helper never exits by itself: without mcpwarden it is left,
            // holding its port.
            EXPECT_GE(without["processes_left"].get<int>(), 1) << row.dump(2);
            EXPECT_TRUE(without["port_held"].get<bool>()) << row.dump(2);
        }
    }
    EXPECT_EQ(fixture_rows, 3);
    // Every key, the trials' included, is in the demo's schema document or the drill's.
    EXPECT_EQ(j["schema"], "mcpwarden.demo");
    EXPECT_EQ(undocumented_keys(j, {schema_doc("demo-json.md"), schema_doc("drill-json.md")}),
              std::vector<std::string>{});

    // The table printed from the same JSON shows the same numbers, row by row.
    {
        std::ofstream f(dir.file("demo.json"));
        f << r.out;
    }
    auto table = run_cli(dir, {"demo", "--from", dir.file("demo.json")});
    EXPECT_EQ(table.code, 0) << table.out << table.err;
    EXPECT_EQ(table.out.find("\x1b["), std::string::npos) << "colour on a pipe";
    // A file path cannot be wrapped; every other line fits 80 columns.
    for (size_t at = 0, nl; (nl = table.out.find('\n', at)) != std::string::npos; at = nl + 1)
        if (table.out.substr(at, nl - at).find("/tmp/") == std::string::npos) {
            EXPECT_LE(columns(table.out.substr(at, nl - at)), 80u) << table.out.substr(at, nl - at);
        }
    for (const auto& row : j["rows"]) {
        const std::string server = row["server"];
        auto at = table.out.find("\n" + server + " ");
        ASSERT_NE(at, std::string::npos) << server << " not in\n" << table.out;
        std::string line = table.out.substr(at + 1, table.out.find('\n', at + 1) - at - 1);
        if (row.contains("skipped")) {
            EXPECT_NE(line.find("skipped"), std::string::npos) << line;
            continue;
        }
        auto expect = expected_cells(row["without"]);
        for (const auto& w : expected_cells(row["with"]))
            expect.push_back(w);
        auto got = words(line.substr(server.size()));
        EXPECT_EQ(got, expect) << line;
    }
    EXPECT_NE(table.out.find("activity.abandoned"), std::string::npos) << table.out;
    EXPECT_NE(table.out.find("process.snapshot"), std::string::npos) << table.out;
    EXPECT_NE(table.out.find("mcpwarden left nothing behind."), std::string::npos) << table.out;

    // The temporary journal is gone once the demo passed: no command offered to read it.
    const std::string journal = j["journal"]["path"];
    EXPECT_TRUE(j["journal"]["temporary"].get<bool>()) << j["journal"].dump();
    EXPECT_FALSE(std::filesystem::exists(journal)) << journal;
    EXPECT_EQ(table.out.find("journal sessions --journal"), std::string::npos) << table.out;
    EXPECT_NE(table.out.find("journal: temporary, removed (mcpwarden demo --journal PATH keeps "
                             "one)"),
              std::string::npos)
        << table.out;
    // The control: the same run with a journal kept (as with --journal) names it and the
    // command that reads it.
    {
        nlohmann::json kept = j;
        kept["journal"]["temporary"] = false;
        std::ofstream(dir.file("kept.json")) << kept.dump();
    }
    auto kept = run_cli(dir, {"demo", "--from", dir.file("kept.json")});
    EXPECT_NE(kept.out.find("mcpwarden journal sessions --journal " + journal + "\n"),
              std::string::npos)
        << kept.out;

    // And --from --json gives the numbers back unchanged.
    auto again = run_cli(dir, {"demo", "--from", dir.file("demo.json"), "--json"});
    auto j2 = nlohmann::json::parse(again.out, nullptr, false);
    ASSERT_FALSE(j2.is_discarded()) << again.out;
    for (size_t i = 0; i < j["rows"].size(); ++i) {
        for (const char* side : {"without", "with"}) {
            if (!j["rows"][i].contains(side)) continue;
            for (const char* k : {"processes_left", "mb_left", "port_held", "released_ms"})
                EXPECT_EQ(j2["rows"][i][side][k], j["rows"][i][side][k]) << side << " " << k;
        }
    }
}

TEST(Demo, FromRejectsOtherJson) {
    TempDir dir;
    {
        std::ofstream f(dir.file("x.json"));
        f << R"({"hello": 1})";
    }
    auto r = run_cli(dir, {"demo", "--from", dir.file("x.json")});
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find("not the JSON of `mcpwarden demo --json`"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace warden::testing
