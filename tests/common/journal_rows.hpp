// The journal as a test reads it back: the data of each record of one kind.
#pragma once

#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include "common/procfs.hpp"
#include "journal/query.hpp"

namespace warden::testing {

// The `data` of every record of `kind` in the journal at `db`, in order, each with the
// record's `seq` and `session` added.
inline std::vector<nlohmann::json> record_data(const std::string& db, const std::string& kind) {
    std::vector<nlohmann::json> out;
    auto st = journal::for_each_record(db, 0, [&](const journal::Record& r) {
        if (r.kind != kind) return true;
        auto body = nlohmann::json::parse(r.body, nullptr, false);
        out.push_back(body.is_object() ? body["data"] : nlohmann::json());
        out.back()["seq"] = r.seq;
        out.back()["session"] = r.session;
        return true;
    });
    EXPECT_TRUE(st.ok()) << st.error().message;
    return out;
}

// The session cgroups (under this test's cgroup) of the sessions that `db` has a
// session.start of and that were still there; each is removed, left or not, so that a
// failing test leaves none behind.
inline std::vector<std::string> remove_recorded_session_cgroups(const std::string& db) {
    std::vector<std::string> left;
    if (::access(db.c_str(), F_OK) != 0) return left;
    const std::string own = cgroup_of(::getpid());
    for (const auto& start : record_data(db, "session.start")) {
        const std::string payload =
            (own == "/" ? "" : own) + "/mcpwarden-" + start.value("session", "") + "/payload";
        if (session_cgroup_left(payload)) left.push_back(payload);
        (void)remove_session_cgroup(payload);
    }
    return left;
}

}  // namespace warden::testing
