// Precompiled once per build (cmake/pch.cmake) and force-included in every layer, CLI and
// bench file: the third-party and standard headers most of them include anyway. Parsing
// nlohmann/json and fmt once instead of in every file roughly halves a clean build.
// Every source file still includes what it uses; this list only makes it cheaper.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
