// The one answer mcpwarden writes itself into a JSON-RPC stream: an error for a request (the
// relay's refusal, a failed wake, the multiplexer's and the broker's refusals, a shared
// tree that ended before answering), under the request's own id, as its raw bytes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace warden::rpc {

// JSON-RPC's own: a request that is not one we take (a batch through a shared tree), and
// parameters we refuse (another protocol era's request on a tree of one era).
inline constexpr int64_t kInvalidRequestCode = -32600;
inline constexpr int64_t kInvalidParamsCode = -32602;
// "server error", the range JSON-RPC leaves to implementations: a refusal of ours.
inline constexpr int64_t kRefusedCode = -32000;
// "internal error": what went wrong is ours (a shared tree gone before it answered).
inline constexpr int64_t kInternalErrorCode = -32603;

// Appends {"jsonrpc":"2.0","id":ID,"error":{"code":CODE,"message":MESSAGE}} (no newline).
void append_error_answer(std::string& out, std::string_view id_raw, int64_t code,
                         std::string_view message);
std::string error_answer(std::string_view id_raw, int64_t code, std::string_view message);

}  // namespace warden::rpc
