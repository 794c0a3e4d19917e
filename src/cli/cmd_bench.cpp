// `tandem bench`: the benchmark subcommands (kernels, moe, model, each comparing with llama.cpp
// on the same machine in the same run where the oracle kit is set up; grammar, on its own).
#include "cli/commands.h"

namespace tandem::cli {

void add_bench_command(CLI::App& app) {
    CLI::App* bench =
        app.add_subcommand("bench", "Benchmarks, with llama.cpp (the oracle kit) as the yardstick");
    bench->require_subcommand(1);
    add_bench_kernels(bench);
    add_bench_moe(bench);
    add_bench_model(bench);
    add_bench_grammar(bench);
}

}  // namespace tandem::cli
