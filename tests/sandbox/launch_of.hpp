// A Launch for a plan made in a test: the command run in `home`, which is also its home
// directory and where its private temporary directory goes.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "common/testing.hpp"
#include "sandbox/sandbox.hpp"

namespace warden::testing {

inline sandbox::Launch launch_of(const TempDir& home, std::vector<std::string> argv) {
    sandbox::Launch l;
    l.argv = std::move(argv);
    l.executable = l.argv[0];
    l.cwd = home.path();
    l.home = home.path();
    l.session_id = "sandbox-test";
    l.tmp_parent = home.path();
    return l;
}

}  // namespace warden::testing
