#include "rpc/answer.hpp"

#include "sys/json_string.hpp"

namespace warden::rpc {

void append_error_answer(std::string& out, std::string_view id_raw, int64_t code,
                         std::string_view message) {
    out += R"({"jsonrpc":"2.0","id":)";
    out.append(id_raw);
    out += R"(,"error":{"code":)";
    out += std::to_string(code);
    out += R"(,"message":)";
    append_json_string(out, message);
    out += "}}";
}

std::string error_answer(std::string_view id_raw, int64_t code, std::string_view message) {
    std::string out;
    append_error_answer(out, id_raw, code, message);
    return out;
}

}  // namespace warden::rpc
