// The `tandem` subcommands: each file registers one with the CLI11 application.
#pragma once

#include <CLI/CLI.hpp>

namespace tandem::cli {

void add_inspect_command(CLI::App& app);
void add_synth_command(CLI::App& app);
void add_run_command(CLI::App& app);
void add_logits_command(CLI::App& app);
void add_tokenize_command(CLI::App& app);
void add_perplexity_command(CLI::App& app);
void add_quantize_command(CLI::App& app);
void add_serve_command(CLI::App& app);
void add_chat_command(CLI::App& app);
void add_bench_command(CLI::App& app);
// Subcommands of `bench` (cmd_bench_*.cpp).
void add_bench_kernels(CLI::App* bench);
void add_bench_moe(CLI::App* bench);
void add_bench_model(CLI::App* bench);
void add_bench_grammar(CLI::App* bench);

}  // namespace tandem::cli
