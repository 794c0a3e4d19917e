// Errors of the HTTP API in OpenAI's shape, {"error": {"message", "type", "param", "code"}},
// with the HTTP status that goes with them.
#pragma once

#include <stdexcept>
#include <string>

namespace tandem::server {

class ApiError : public std::runtime_error {
  public:
    ApiError(int status, std::string message, std::string code = {}, std::string param = {});

    int status() const { return status_; }
    const std::string& code() const { return code_; }
    const std::string& param() const { return param_; }
    // The JSON body.
    std::string body() const;

  private:
    int status_;
    std::string code_;
    std::string param_;
};

// 400 invalid_request_error, naming the field at fault in `param`.
[[noreturn]] void bad_request(const std::string& message, const std::string& param = {});

// OpenAI's error type for a status: invalid_request_error for 4xx, server_error for 5xx.
const char* error_type(int status);
// The JSON body of an error (code and param are null when empty).
std::string error_body(int status, const std::string& message, const std::string& code = {},
                       const std::string& param = {});

}  // namespace tandem::server
