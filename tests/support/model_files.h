// Small model files for tests: synthetic models written by the project itself, and edited
// copies of them (a key or tensor removed, a shape or architecture changed).
#pragma once

#include <functional>
#include <string>

#include "gguf/gguf_copy.h"
#include "model/synthetic_model.h"

namespace tandem::testing {

// A tiny spec that loads and runs in milliseconds (2 layers, embd 64).
SynthSpec tiny_spec(const std::string& arch = "qwen3moe");

// Writes spec to path and returns path.
std::string write_model(const SynthSpec& spec, const std::string& path);

// Copies `src` to `dst` with the edit applied.
void edit_model(const std::string& src, const std::string& dst, const GgufEdit& edit);

}  // namespace tandem::testing
