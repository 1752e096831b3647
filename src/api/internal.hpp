// src/api — libmcpwarden: the public C++ API (include/mcpwarden/mcpwarden.hpp) and the C ABI
// (include/mcpwarden/mcpwarden.h), as a thin layer over the internal layers. Nothing here
// holds policy of its own: it renders the layers' results into the public structs, keeps
// internal headers out of the public ones, and makes sure no exception or C++ type crosses
// the C boundary. The value types both sides share (mcpwarden/types.hpp) and their errors
// (mcpwarden/result.hpp) pass as they are.
#pragma once

#include <exception>
#include <string_view>

#include "mcpwarden/mcpwarden.hpp"
#include "sys/result.hpp"

namespace warden::api {

// What every entry point returns for an exception a layer let out (a bug, or bad_alloc):
// "<where>: internal error: <what>", so that none crosses the API.
Error internal_error(std::string_view where, const std::exception& e);

}  // namespace warden::api
