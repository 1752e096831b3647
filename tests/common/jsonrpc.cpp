#include "common/jsonrpc.hpp"

#include "common/child.hpp"

namespace warden::testing {

std::string rpc_request(const nlohmann::json& id, std::string_view method,
                        const nlohmann::json& params) {
    nlohmann::json j = {{"jsonrpc", "2.0"}, {"id", id}, {"method", method}};
    if (!params.is_null()) j["params"] = params;
    return j.dump();
}

std::string rpc_notification(std::string_view method, const nlohmann::json& params) {
    nlohmann::json j = {{"jsonrpc", "2.0"}, {"method", method}};
    if (!params.is_null()) j["params"] = params;
    return j.dump();
}

std::string rpc_initialize(const nlohmann::json& id, std::string_view protocol_version) {
    return rpc_request(id, "initialize",
                       {{"protocolVersion", protocol_version},
                        {"capabilities", nlohmann::json::object()},
                        {"clientInfo", {{"name", "warden-test"}, {"version", "0"}}}});
}

std::string rpc_stateless(const nlohmann::json& id, std::string_view method, nlohmann::json params,
                          const nlohmann::json& capabilities) {
    params["_meta"] = {
        {"io.modelcontextprotocol/protocolVersion", kStatelessVersion},
        {"io.modelcontextprotocol/clientCapabilities", capabilities},
        {"io.modelcontextprotocol/clientInfo", {{"name", "warden-test"}, {"version", "0"}}}};
    return rpc_request(id, method, params);
}

std::string rpc_initialized() {
    return rpc_notification("notifications/initialized");
}

std::string rpc_tools_list(const nlohmann::json& id) {
    return rpc_request(id, "tools/list");
}

std::string rpc_tools_call(const nlohmann::json& id, std::string_view tool,
                           const nlohmann::json& arguments) {
    return rpc_request(id, "tools/call", {{"name", tool}, {"arguments", arguments}});
}

std::optional<nlohmann::json> read_response(TestChild& child, const nlohmann::json& id,
                                            std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (int i = 0; i < 1'000'000; ++i) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        if (left.count() < 0) return std::nullopt;
        auto line = child.read_line(left);
        if (!line) return std::nullopt;
        auto j = nlohmann::json::parse(*line, nullptr, /*allow_exceptions=*/false);
        if (j.is_object() && j.contains("id") && j["id"] == id) return j;
    }
    return std::nullopt;
}

std::string result_text(const nlohmann::json& response) {
    const auto& r = response.value("result", nlohmann::json::object());
    if (!r.contains("content") || !r["content"].is_array() || r["content"].empty()) return "";
    return r["content"][0].value("text", "");
}

}  // namespace warden::testing
