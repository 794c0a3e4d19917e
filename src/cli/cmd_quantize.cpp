// `tandem quantize IN OUT`: rewrites a model with q8_0 attention, embeddings and output and
// q4_K experts by default (model/quantize_model.h), and lists what each tensor became.
#include <cstdio>
#include <memory>
#include <string>

#include "base/error.h"
#include "base/timer.h"
#include "cli/commands.h"
#include "cli/type_option.h"
#include "formats/format_table.h"
#include "model/quantize_model.h"

namespace tandem::cli {
namespace {

struct QuantizeOptions {
    std::string in, out;
    std::string embd_type = "q8_0", attn_type = "q8_0", ffn_type = "q8_0", exp_type = "q4_K",
                out_type = "q8_0";
    int threads = 1;
    bool quiet = false;
};

void run(const QuantizeOptions& o) {
    if (o.in == o.out) fail("quantize: the output {} is the input", o.out);
    if (o.threads < 1) fail("quantize: --threads {} must be at least 1", o.threads);
    QuantizeSpec spec;
    spec.embd = parse_type(o.embd_type, "--embd-type");
    spec.attn = parse_type(o.attn_type, "--attn-type");
    spec.ffn = parse_type(o.ffn_type, "--ffn-type");
    spec.experts = parse_type(o.exp_type, "--exp-type");
    spec.output = parse_type(o.out_type, "--out-type");
    const Stopwatch watch;
    const std::vector<QuantizedTensor> plan = quantize_model(o.in, o.out, spec, o.threads);
    if (!o.quiet) {
        for (const QuantizedTensor& q : plan) {
            std::fprintf(stderr, "%-32s %-6s -> %-6s%s%s\n", q.name.c_str(),
                         std::string(format_of(q.from).name).c_str(), std::string(format_of(q.to).name).c_str(),
                         q.note.empty() ? "" : "  ", q.note.c_str());
        }
    }
    std::fprintf(stderr, "quantize: wrote %s (%zu tensors) in %.1f s\n", o.out.c_str(), plan.size(),
                 watch.seconds());
}

}  // namespace

void add_quantize_command(CLI::App& app) {
    auto o = std::make_shared<QuantizeOptions>();
    CLI::App* cmd = app.add_subcommand("quantize", "Rewrite a model with quantized weights");
    cmd->add_option("in", o->in, "Input GGUF model")->required();
    cmd->add_option("out", o->out, "Output GGUF path")->required();
    cmd->add_option("--embd-type", o->embd_type, "Type of the token embeddings")->capture_default_str();
    cmd->add_option("--attn-type", o->attn_type, "Type of attention (and other) matrices")->capture_default_str();
    cmd->add_option("--ffn-type", o->ffn_type, "Type of dense FFN and shared-expert matrices")->capture_default_str();
    cmd->add_option("--exp-type", o->exp_type, "Type of the routed experts")->capture_default_str();
    cmd->add_option("--out-type", o->out_type, "Type of output.weight")->capture_default_str();
    cmd->add_option("--threads", o->threads, "Threads")->capture_default_str();
    cmd->add_flag("--quiet", o->quiet, "Do not list the tensors");
    cmd->callback([o] { run(*o); });
}

}  // namespace tandem::cli
