// The journal as a test reads it back: the data of each record of one kind.
#pragma once

#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

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

}  // namespace warden::testing
