// The text of `mcpwarden version` and `mcpwarden --version` (version_cmd.cpp).
#pragma once

#include <string>

namespace warden::cli {

std::string version_text();

}  // namespace warden::cli
