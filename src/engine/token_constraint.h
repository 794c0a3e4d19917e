// A per-request restriction of the tokens that may come next (a grammar, a JSON schema),
// applied by the scheduler to a request's logits before sampling. Requests without one pay
// nothing: the scheduler checks a null pointer.
#pragma once

#include <cstdint>
#include <span>

namespace tandem {

// Both calls happen on the scheduler thread, one request at a time.
class TokenConstraint {
  public:
    virtual ~TokenConstraint() = default;
    // Sets the logits of the tokens that may not come next to -infinity, leaving at least one.
    virtual void mask(std::span<float> logits) = 0;
    // The token sampled from the masked logits (every sampled token, end-of-generation
    // tokens included).
    virtual void accept(int32_t token) = 0;
};

}  // namespace tandem
