// The `tandem` command: dispatches to its subcommands; every error ends as one line on stderr.
#include <cstdio>
#include <algorithm>
#include <exception>
#include <vector>
#include <string>

#include "base/error.h"
#include "cli/commands.h"

int main(int argc, char** argv) {
    CLI::App app{"tandem: serves Mixture-of-Experts GGUF models on the CPU and GPU together"};
    app.require_subcommand(1);
    app.set_help_all_flag("--help-all", "Show help for every subcommand");
    tandem::cli::add_inspect_command(app);
    tandem::cli::add_synth_command(app);
    tandem::cli::add_run_command(app);
    tandem::cli::add_logits_command(app);
    tandem::cli::add_tokenize_command(app);
    tandem::cli::add_perplexity_command(app);
    tandem::cli::add_quantize_command(app);
    tandem::cli::add_serve_command(app);
    tandem::cli::add_chat_command(app);
    tandem::cli::add_bench_command(app);
    try {
        const std::vector<CLI::App*> commands = app.get_subcommands({});
        auto known = [&](const std::string& name) {
            return std::any_of(commands.begin(), commands.end(), [&](CLI::App* c) { return c->get_name() == name; });
        };
        if (argc > 1 && argv[1][0] != '-' && !known(argv[1])) {
            std::string names;
            for (const CLI::App* sub : commands) names += (names.empty() ? "" : ", ") + sub->get_name();
            throw tandem::Error("unknown command '" + std::string(argv[1]) + "' (commands: " + names + ")");
        }
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        std::fprintf(stderr, "error: %s (see 'tandem %s--help')\n", e.what(),
                     app.get_subcommands().empty()
                         ? ""
                         : (app.get_subcommands()[0]->get_name() + " ").c_str());
        return 2;
    } catch (const tandem::Error& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    } catch (const std::bad_alloc&) {
        std::fprintf(stderr, "error: out of memory\n");
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
    return 0;
}
