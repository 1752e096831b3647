// src/api — libmcpwarden: the public C++ API (include/mcpwarden/mcpwarden.hpp) and the C ABI
// (include/mcpwarden/mcpwarden.h), as a thin layer over the internal layers. Nothing here
// holds policy of its own: it converts types, keeps internal headers out of the public
// ones, and makes sure no exception or C++ type crosses the C boundary.
#pragma once

#include "mcpwarden/mcpwarden.hpp"
#include "sys/result.hpp"

namespace warden::api {

Error to_public(const warden::Error& e);

}  // namespace warden::api
