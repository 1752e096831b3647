// Every fallback path runs for real: pidfd_open, clone3, cgroup writes, pidfd_getfd (ports
// then come from /proc/net) and the children files (members then come from a /proc scan)
// are made to fail through the fault seam, and the escaping shapes must still leave nothing.
#include <gtest/gtest.h>

#include "common/tree_guard.hpp"
#include "contain/keeper_harness.hpp"

namespace warden::testing {
namespace {

class Fallback : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(Fallback, NothingSurvives) {
    auto [fault, shape] = GetParam();
    TempDir dir;
    const std::string tag = unique_tag();
    TreeGuard guard(0, tag);
    Scenario sc;
    sc.shape = shape;
    sc.extra_args = {"--on-eof", "ignore"};
    sc.contain.faults = Faults::parse(fault);
    sc.teardown = quick_teardown();
    nlohmann::json j = run_scenario(sc, tag, dir);
    ASSERT_FALSE(j.contains("error")) << j.dump(2);
    const auto& layers = j["layers"];
    const auto& r = j["report"];
    EXPECT_TRUE(r["ok"].get<bool>()) << j["text"].get<std::string>();
    EXPECT_TRUE(live_tagged(tag).empty()) << j["text"].get<std::string>();
    EXPECT_TRUE(port_bindable(j["port"].get<uint16_t>())) << j["text"].get<std::string>();
    const std::string text = j["text"].get<std::string>();
    // Whichever way the ports were found (a duplicate of each socket, or the /proc/net
    // tables), the fixture's listener is among the ports the report proved free.
    bool found = false;
    for (const auto& p : r["ports"])
        found |=
            p["port"].get<uint16_t>() == j["port"].get<uint16_t>() && p["bindable"].get<bool>();
    EXPECT_TRUE(found) << "port " << j["port"] << " not verified\n" << text;
    if (fault.find("pidfd_open") != std::string::npos) {
        EXPECT_FALSE(layers["pidfd"]["on"].get<bool>());
        EXPECT_NE(layers["pidfd"]["reason"].get<std::string>().find("injected"), std::string::npos);
    }
    if (fault.find("clone3") != std::string::npos) {
        EXPECT_FALSE(j["via_clone3"].get<bool>());
        // fork() fallback: the child joined the session cgroup itself before exec.
        if (fault.find("cgroup") == std::string::npos) {
            EXPECT_TRUE(j["in_cgroup"].get<bool>());
        }
    }
    if (fault == "cgroup") {
        EXPECT_FALSE(layers["cgroup"]["on"].get<bool>());
        EXPECT_FALSE(j["in_cgroup"].get<bool>());
    }
    if (fault == "cgroup_kill" && shape == "ignore-term") {
        EXPECT_NE(text.find("cgroup.kill: injected fault"), std::string::npos) << text;
    }
}

INSTANTIATE_TEST_SUITE_P(
    Faults, Fallback,
    ::testing::Combine(::testing::Values("pidfd_open", "clone3", "cgroup", "cgroup_kill",
                                         "pidfd_getfd", "proc_children",
                                         "cgroup,proc_children,pidfd_getfd",
                                         "pidfd_open,clone3,cgroup,cgroup_kill,pidfd_getfd,"
                                         "proc_children"),
                       ::testing::Values("setsid", "doublefork", "ignore-term", "fork-storm")),
    [](const auto& param_info) {
        std::string s = std::get<0>(param_info.param) + "_" + std::get<1>(param_info.param);
        for (char& c : s)
            if (c == '-' || c == ',') c = '_';
        return s;
    });

}  // namespace
}  // namespace warden::testing
