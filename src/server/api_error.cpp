// Errors of the HTTP API in OpenAI's shape.
#include "server/api_error.h"

#include <nlohmann/json.hpp>

namespace tandem::server {

ApiError::ApiError(int status, std::string message, std::string code, std::string param)
    : std::runtime_error(std::move(message)),
      status_(status),
      code_(std::move(code)),
      param_(std::move(param)) {}

std::string ApiError::body() const {
    return error_body(status_, what(), code_, param_);
}

void bad_request(const std::string& message, const std::string& param) {
    throw ApiError(400, message, {}, param);
}

const char* error_type(int status) {
    if (status == 401) return "authentication_error";
    if (status == 404) return "not_found_error";
    if (status >= 500) return "server_error";
    return "invalid_request_error";
}

std::string error_body(int status, const std::string& message, const std::string& code,
                       const std::string& param) {
    nlohmann::json error = {
        {"message", message},
        {"type", error_type(status)},
        {"param", param.empty() ? nlohmann::json(nullptr) : nlohmann::json(param)},
        {"code", code.empty() ? nlohmann::json(nullptr) : nlohmann::json(code)},
    };
    // Messages may quote request text that is not valid UTF-8: replace rather than throw.
    return nlohmann::json{{"error", error}}.dump(-1, ' ', false,
                                                 nlohmann::json::error_handler_t::replace);
}

}  // namespace tandem::server
