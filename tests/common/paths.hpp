// Paths of the binaries the tests drive, fixed at build time.
#pragma once

namespace warden::testing {
inline constexpr const char* kFixture = WARDEN_FIXTURE;  // tests/fixtures server
inline constexpr const char* kCli = WARDEN_CLI;          // the mcpwarden binary
inline constexpr const char* kSourceDir = WARDEN_SOURCE_DIR;
}  // namespace warden::testing
