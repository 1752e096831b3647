// JSON-RPC lines for tests (one line each, no trailing '\n'), and reading answers back.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace warden::testing {

class TestChild;

inline constexpr const char* kProtocolVersion = "2025-06-18";

std::string rpc_request(const nlohmann::json& id, std::string_view method,
                        const nlohmann::json& params = nullptr);
std::string rpc_notification(std::string_view method, const nlohmann::json& params = nullptr);
std::string rpc_initialize(const nlohmann::json& id = 1,
                           std::string_view protocol_version = kProtocolVersion);
std::string rpc_initialized();  // notifications/initialized
// A request of the stateless 2026-07-28 revision: params with `_meta` naming the protocol
// version, the client's capabilities and its clientInfo (warden-test).
inline constexpr const char* kStatelessVersion = "2026-07-28";
std::string rpc_stateless(const nlohmann::json& id, std::string_view method,
                          nlohmann::json params = nlohmann::json::object(),
                          const nlohmann::json& capabilities = nlohmann::json::object());
std::string rpc_tools_list(const nlohmann::json& id);
std::string rpc_tools_call(const nlohmann::json& id, std::string_view tool,
                           const nlohmann::json& arguments = nlohmann::json::object());

// Reads stdout lines until a JSON object whose "id" equals `id` (others, and non-JSON lines,
// are skipped); nullopt on timeout or EOF.
std::optional<nlohmann::json> read_response(TestChild& child, const nlohmann::json& id,
                                            std::chrono::milliseconds timeout);

// The text of the first content item of a tools/call result ("" if absent).
std::string result_text(const nlohmann::json& response);

}  // namespace warden::testing
