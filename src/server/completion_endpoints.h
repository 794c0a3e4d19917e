// POST /v1/chat/completions and /v1/completions: a parsed request becomes prompt tokens, is
// submitted to the scheduler, and its text goes back whole or as server-sent events.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include <httplib.h>

#include "server/metrics.h"
#include "server/served_model.h"

namespace tandem::server {

enum class CompletionKind { kChat, kText };

// Throws ApiError for a bad request (400), an unknown model (404), a full queue or a server
// shutting down (503). `stopping` turns true when the server shuts down: requests in flight are
// then cancelled. `in_flight` is held until the response is complete (for a stream, until its
// last event is written), so shutdown can wait for it. `metrics` (may be null) sees the tokens.
void serve_completion(CompletionKind kind, const ServedModel& model, const std::string& body,
                      httplib::Response& res, const std::atomic<bool>& stopping,
                      std::shared_ptr<void> in_flight, Metrics* metrics);

}  // namespace tandem::server
