// The `tandem` subcommands: each file registers one with the CLI11 application.
#pragma once

#include <CLI/CLI.hpp>

namespace tandem::cli {

void add_inspect_command(CLI::App& app);
void add_synth_command(CLI::App& app);
void add_run_command(CLI::App& app);
void add_logits_command(CLI::App& app);
void add_tokenize_command(CLI::App& app);

}  // namespace tandem::cli
