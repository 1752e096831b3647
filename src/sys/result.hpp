// Result<T>: a value or an Error, for failures the caller is expected to handle; Status is
// Result<void>. Defined once, in the public header the API shares with the layers
// (mcpwarden/result.hpp); Error::sys is defined here, in src/sys/fd.cpp.
#pragma once

#include <cerrno>

#include "mcpwarden/result.hpp"
