// A generation request: ids, and the names of the finish reasons.
#include "engine/request.h"

namespace tandem {

const char* finish_reason_name(FinishReason reason) {
    switch (reason) {
        case FinishReason::kStop:
            return "stop";
        case FinishReason::kLength:
            return "length";
        case FinishReason::kCancelled:
            return "cancelled";
        case FinishReason::kError:
            return "error";
    }
    return "unknown";
}

Request::Request(GenerationParams params, std::shared_ptr<GenerationSink> sink)
    : params_(std::move(params)), sink_(std::move(sink)) {
    // Ids only label log lines; a process-wide counter keeps them unique across schedulers.
    static std::atomic<uint64_t> next_id{1};
    id_ = next_id.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace tandem
