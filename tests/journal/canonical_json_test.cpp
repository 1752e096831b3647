#include "journal/canonical_json.hpp"

#include <gtest/gtest.h>

namespace warden::journal {
namespace {

TEST(CanonicalJson, SortsKeysAndHasNoWhitespace) {
    Json j{{"zeta", 1}, {"alpha", Json{{"b", true}, {"a", nullptr}}}, {"mid", "x"}};
    auto c = canonical(j);
    ASSERT_TRUE(c.ok()) << c.error().message;
    EXPECT_EQ(*c, R"({"alpha":{"a":null,"b":true},"mid":"x","zeta":1})");
}

}  // namespace
}  // namespace warden::journal
