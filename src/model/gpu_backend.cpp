// The CUDA backend.
#include "model/gpu_backend.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <optional>

#include "base/error.h"
#include "base/env_flag.h"
#include "base/log.h"
#include "base/timer.h"
#include "cuda/check.h"
#include "cuda/device.h"
#include "cuda/elementwise.h"
#include "cuda/fused_norm.h"
#include "cuda/sigmoid.h"

namespace tandem {
namespace {

constexpr size_t kMargin = size_t{1} << 30;             // left free when --gpu-mem is not given
constexpr size_t kReadStagingBytes = size_t{16} << 20;  // pinned buffer for read()
// From this many tokens a batch streams the experts of host layers to the GPU (each crosses PCIe
// once for the batch) instead of computing them on the CPU.
constexpr int kStreamMinTokens = 32;

double gib(size_t bytes) {
    return static_cast<double>(bytes) / (1u << 30);
}

cuda::DeviceRows rows(Act a) {
    return {a.data, a.rows, a.cols, a.stride};
}

size_t matrix_bytes(const WeightMatrix& m) {
    return m.empty() ? 0 : static_cast<size_t>(m.rows) * m.row_bytes;
}

size_t experts_bytes(const ExpertMatrix& e, int n_expert) {
    if (e.matrix.empty()) return 0;
    return static_cast<size_t>(n_expert - 1) * e.expert_stride + matrix_bytes(e.matrix);
}

// The vectors and matrices of a layer (empty ones included), for the upload and its translation.
template <typename Layer>
auto layer_vectors(Layer& L) {
    return std::array{&L.attn_norm,
                      &L.bq,
                      &L.bk,
                      &L.bv,
                      &L.bo,
                      &L.q_norm,
                      &L.k_norm,
                      &L.attn_sinks,
                      &L.attn_post_norm,
                      &L.ffn_norm,
                      &L.ffn_post_norm,
                      &L.router_bias,
                      &L.router_scale,
                      &L.ffn_pre_norm_2,
                      &L.ffn_post_norm_1,
                      &L.ffn_post_norm_2,
                      &L.pl_post_norm,
                      &L.out_scale,
                      &L.q_a_norm,
                      &L.kv_a_norm,
                      &L.expert_bias,
                      &L.ssm_conv,
                      &L.ssm_dt,
                      &L.ssm_a,
                      &L.ssm_norm};
}
template <typename Layer>
auto layer_matrices(Layer& L) {
    return std::array{&L.wq,       &L.wk,
                      &L.wv,       &L.wo,
                      &L.ffn_gate, &L.ffn_up,
                      &L.ffn_down, &L.router,
                      &L.pl_gate,  &L.pl_proj,
                      &L.wq_a,     &L.wq_b,
                      &L.wkv_a,    &L.shexp_gate,
                      &L.shexp_up, &L.shexp_down,
                      &L.wqkv,     &L.wqkv_gate,
                      &L.ssm_beta, &L.ssm_alpha,
                      &L.ssm_out,  &L.shexp_gate_inp};
}

constexpr int kNotExperts = -1;

bool same_rope(const RopeParams& a, const RopeParams& b) {
    return a.type == b.type && a.n_dims == b.n_dims && a.freq_base == b.freq_base &&
           a.freq_scale == b.freq_scale && a.ext_factor == b.ext_factor &&
           a.attn_factor == b.attn_factor && a.beta_fast == b.beta_fast &&
           a.beta_slow == b.beta_slow && a.n_ctx_orig == b.n_ctx_orig &&
           a.freq_factors == b.freq_factors && a.imrope == b.imrope &&
           std::equal(std::begin(a.sections), std::end(a.sections), std::begin(b.sections));
}

// Whether every layer with a KV cache has the model's heads, its own cache and the first such
// layer's values_in_keys (most models): then the KV cache keeps its uniform layout. Recurrent
// layers (qwen3.5's delta-net) keep no cache (kv_cache_positions() is 0), whatever their heads.
bool uniform_kv(const ModelConfig& c) {
    const LayerConfig* first = nullptr;
    for (int il = 0; il < c.n_layer; ++il) {
        const LayerConfig& L = c.layers[il];
        if (L.attention == AttentionKind::kRecurrent) continue;
        if (first == nullptr) first = &L;
        if (L.n_head_kv != c.n_head_kv || L.head_dim_k != c.head_dim_k ||
            L.head_dim_v != c.head_dim_v || L.kv_layer != il ||
            L.values_in_keys != first->values_in_keys)
            return false;
    }
    return true;
}

// Whether the first layer with a KV cache keeps its values in its keys (multi-head latent
// attention's latent cache: every layer alike where the layout is uniform).
bool first_values_in_keys(const ModelConfig& c) {
    for (const LayerConfig& L : c.layers) {
        if (L.attention != AttentionKind::kRecurrent) return L.values_in_keys;
    }
    return false;
}

// Every array a forward pass reads, as host ranges (the GPU gets the same bytes):
// add(data, bytes, layer) with the layer of routed expert weights, kNotExperts for the rest
// (the experts' small per-expert scales and biases included).
template <typename Fn>
void for_each_weight_range(const ModelWeights& w, const ModelConfig& c, Fn add) {
    auto matrix = [&](const WeightMatrix& m) { add(m.data, matrix_bytes(m), kNotExperts); };
    auto vector = [&](const WeightVector& v) {
        add(v.data, static_cast<size_t>(v.size) * sizeof(float), kNotExperts);
    };
    auto experts = [&](const ExpertMatrix& e, int n, int layer) {
        add(e.matrix.data, experts_bytes(e, n), layer);
        if (e.scales != nullptr) add(e.scales, sizeof(float) * n, kNotExperts);
        if (e.bias != nullptr)
            add(e.bias,
                sizeof(float) * (static_cast<size_t>(n - 1) * e.bias_stride + e.matrix.rows),
                kNotExperts);
    };
    matrix(w.token_embd);
    matrix(w.output);
    vector(w.output_norm);
    vector(w.rope_freqs);
    matrix(w.pl_token_embd);
    matrix(w.pl_model_proj);
    vector(w.pl_proj_norm);
    for (size_t il = 0; il < w.layers.size(); ++il) {
        const LayerWeights& L = w.layers[il];
        for (const WeightVector* v : layer_vectors(L)) vector(*v);
        for (const WeightMatrix* m : layer_matrices(L)) matrix(*m);
        if (L.experts.n_expert > 0) {
            for (const ExpertMatrix* e : {&L.experts.gate, &L.experts.up, &L.experts.down})
                experts(*e, L.experts.n_expert, static_cast<int>(il));
        }
        // MLA's per-head up-projections: one "expert" per head.
        for (const ExpertMatrix* e : {&L.wk_b, &L.wv_b}) {
            if (!e->matrix.empty()) add(e->matrix.data, experts_bytes(*e, c.n_head), kNotExperts);
        }
    }
}

}  // namespace

GpuBackend::GpuBackend(const Model& model, ThreadPool& pool, const CpuBackendOptions& o,
                       const GpuOptions& gpu_options)
    : model_(model), c_(model.config()), options_(o), graphs_(stream_) {
    Stopwatch watch;
    check_supported();
    const std::vector<cuda::GpuInfo> gpus = cuda::list_gpus();
    if (gpus.empty()) fail("--device cuda: no CUDA device");
    const cuda::GpuInfo& gpu = gpus.front();
    const double gpu_mem_gib = gpu_options.mem_gib;
    budget_ = gpu_mem_gib > 0 ? static_cast<size_t>(gpu_mem_gib * (1u << 30))
                              : (gpu.free_bytes > kMargin ? gpu.free_bytes - kMargin : 0);

    // What the model needs, before anything is allocated.
    const int T = o.max_batch, k = std::max(1, c_.n_expert_used);
    // Multi-head latent attention keeps no values: they are the first head_dim_v of the keys
    // (per layer where the layout is not uniform).
    kv_.shape = {c_.n_layer,     o.n_seq,         o.n_ctx,       c_.n_head_kv,
                 c_.head_dim_k, c_.head_dim_v, first_values_in_keys(c_)};
    kv_.f16 = o.kv_type == KvType::kF16;
    // A sliding layer keeps a ring of its window (and a batch), as the CPU's caches do.
    for (const LayerConfig& L : c_.layers)
        kv_.positions.push_back(kv_cache_positions(L, o.n_ctx, o.max_batch));
    // Layers of their own heads (Gemma 4's sliding and global layers), layers that read an
    // earlier layer's cache (and hold none), latent caches on some layers only.
    if (!uniform_kv(c_)) {
        for (const LayerConfig& L : c_.layers) {
            kv_.per_layer.push_back(
                {L.n_head_kv, L.head_dim_k, L.head_dim_v, L.kv_layer, L.values_in_keys});
        }
    }
    // Decode needs every chunk of kSmallBatch queries at once (prefill takes no scratch).
    attention_scratch_.capacity =
        int64_t{c_.n_head} * cuda::decode_chunks(o.n_ctx) * cuda::kSmallBatch;
    // The gated delta-net layers (qwen3.5): their states, and which layers have them.
    const ModelConfig::DeltaNet& dn = c_.delta;
    recurrent_index_.assign(c_.n_layer, -1);
    for (int il = 0; il < c_.n_layer; ++il) {
        if (c_.layers[il].attention == AttentionKind::kRecurrent)
            recurrent_index_[il] = n_recurrent_++;
    }
    if (n_recurrent_ > 0) {
        recurrent_conv_floats_ = static_cast<size_t>(dn.conv_kernel - 1) * dn.conv_width();
        recurrent_seq_floats_ =
            recurrent_conv_floats_ + static_cast<size_t>(dn.value_width()) * dn.head_dim;
    }
    const size_t recurrent_bytes =
        sizeof(float) * recurrent_seq_floats_ * static_cast<size_t>(n_recurrent_) * o.n_seq;
    // The widest input of a product: of the dense FFNs, shared experts, the attention's output
    // projection, multi-head latent attention's low-rank queries and per-head up-projections
    // (matmul_heads rounds all heads' inputs at once), and the delta-net's values.
    const ModelConfig::Latent& mla = c_.mla;
    int n_ff_shexp = 0;
    bool dense_ffn = false;
    for (const LayerConfig& L : c_.layers) {
        n_ff_shexp = std::max(n_ff_shexp, L.n_ff_shexp);
        dense_ffn = dense_ffn || L.dense_ffn || L.n_ff_shexp > 0;
    }
    const int64_t H = c_.n_head;
    const int64_t widest_input =
        std::max<int64_t>({c_.n_embd, H * c_.head_dim_v, c_.n_ff, n_ff_shexp, mla.q_lora_rank,
                           H * mla.v_head, H * mla.qk_nope, dn.value_width()});
    const int64_t mla_floats = mla.kv_lora_rank > 0
                                   ? H * (mla.qk_nope + mla.qk_rope) + mla.q_lora_rank +
                                         H * mla.v_head + 4 * H
                                   : 0;
    // The decoder's buffers beside the attention's: qwen3.5's delta-net layers, attention gates
    // and shared expert gate; Gemma 4's router input and dense FFN output beside the experts, and
    // its per-layer inputs.
    int64_t extra_per_token = 0;
    if (n_recurrent_ > 0)
        extra_per_token += 2 * (dn.conv_width() + dn.value_width() + dn.n_v_heads);
    if (c_.attn_output_gate) extra_per_token += 3 * int64_t{c_.n_head} * c_.head_dim_k;
    if (c_.shared_expert_gate) extra_per_token += 1;
    bool beside = false;
    for (const LayerConfig& L : c_.layers)
        beside = beside || (L.moe && (L.dense_ffn || L.n_ff_shexp > 0));
    if (beside) extra_per_token += c_.n_embd;
    if (c_.router_input == RouterInput::kScaledRmsNorm) extra_per_token += c_.n_embd;
    extra_per_token += int64_t{c_.n_embd_per_layer} * (2 * c_.n_layer + 1);
    const size_t decoder_floats =
        static_cast<size_t>(T) *
            (4 * int64_t{c_.n_embd} + widest_input + H * c_.head_dim_k * 2 +
             int64_t{c_.n_head_kv} * (c_.head_dim_k + c_.head_dim_v) +
             (dense_ffn ? 2 * int64_t{std::max(c_.n_ff, n_ff_shexp)} : 0) + mla_floats +
             c_.n_vocab + extra_per_token) +
        q8_floats(T, widest_input);
    const size_t moe_floats =
        c_.is_moe() ? static_cast<size_t>(T) *
                              (c_.n_expert + int64_t{k} * (2 * c_.n_ff_exp + c_.n_embd + 2 + 1)) +
                          q8_floats(int64_t{T} * k, c_.n_ff_exp)
                    : 0;
    const size_t activation_bytes =
        sizeof(float) *
            (decoder_floats + moe_floats + attention_scratch_.capacity * (c_.head_dim_v + 3)) +
        (size_t{16} << 20);
    size_t weight_bytes = 0;
    try {
        weight_bytes =
            place_weights(gpu_options, kv_.bytes() + recurrent_bytes + activation_bytes);
    } catch (const Error& e) {
        fail("{} on {} ({}): {}", model.file().path(), gpu.name,
             gpu_mem_gib > 0 ? "--gpu-mem" : "its free memory", e.what());
    }
    if (placement_.n_cpu_layers > 0) {
        cpu_experts_ = std::make_unique<GpuCpuExperts>(model, placement_.experts_on_cpu, T, pool);
    }
    // Without the CPU executor no host thread needs the cores while a step runs: poll for its end
    // (TANDEM_GPU_BLOCKING_SYNC=1 keeps the blocking wait, for comparison).
    stream_.set_spin_wait(!cpu_experts_ && !env_flag("TANDEM_GPU_BLOCKING_SYNC"));

    upload_weights();
    if (placement_.n_cpu_layers > 0) {
        // The host layers' experts as the prefill stream copies them: matrices in host memory,
        // per-expert scales and biases on the device.
        std::vector<MoeLayer> host_layers(c_.n_layer);
        for (int il = 0; il < c_.n_layer; ++il) {
            if (!placement_.experts_on_cpu[il]) continue;
            MoeLayer& m = host_layers[il];
            m = model.weights().layers[il].experts;
            for (ExpertMatrix* e : {&m.gate, &m.up, &m.down}) {
                e->scales = image_.device(e->scales);
                e->bias = image_.device(e->bias);
            }
        }
        expert_stream_ = std::make_unique<GpuExpertStream>(host_layers);
        log_info("expert stream: {}", expert_stream_->host_memory());
        if (placement_.n_slots > 0 && !expert_stream_->pinned() &&
            gpu_options.moe_strategy == MoeStrategy::kAuto) {
            log_warn("auto placement: the expert slots need the host experts registered with the "
                     "driver ({}); every routed expert runs on the CPU executor instead",
                     expert_stream_->host_memory());
            placement_.n_slots = 0;
            placement_.hybrid = false;
        }
        if (placement_.n_slots > 0) {
            if (!expert_stream_->pinned()) {
                fail(
                    "--moe-strategy offload: the expert slots read host experts in place, which "
                    "needs them registered with the driver: {}",
                    expert_stream_->host_memory());
            }
            expert_slots_ = std::make_unique<GpuExpertSlots>(host_layers, placement_.n_slots);
            slot_routes_ = reinterpret_cast<Route*>(
                device_floats(2 * static_cast<size_t>(cuda::kMaxSlotRoutes), "slot routes"));
            if (placement_.hybrid) {
                cpu_routes_ = reinterpret_cast<Route*>(
                    device_floats(2 * static_cast<size_t>(cuda::kMaxSlotRoutes), "slot routes"));
                hybrid_out_ = allocate(cuda::kSmallBatch, c_.n_embd);
                choose_max_fetch(gpu_options.moe_hybrid_max_fetch);
            }
            const Stopwatch watch;
            const int placed = expert_slots_->preload(stream_.get());
            log_info("expert slots: {} of them preloaded with the first experts of each host layer "
                     "in {:.2f} s",
                     placed, watch.seconds());
        }
    }

    // The KV cache and the scratch.
    buffers_.emplace_back(kv_.key_bytes(), "the KV cache (keys)");
    kv_.k = buffers_.back().get();
    buffers_.emplace_back(kv_.value_bytes(), "the KV cache (values)");
    kv_.v = buffers_.back().get();
    if (n_recurrent_ > 0) {
        recurrent_ = device_floats(recurrent_bytes / sizeof(float), "the recurrent state");
        cuda::check(cudaMemset(recurrent_, 0, recurrent_bytes), "the recurrent state");
        recurrent_pos_.assign(o.n_seq, 0);
        span_of_seq_.assign(o.n_seq, -1);
        spans_.reserve(T);
        seq_rows_ = reinterpret_cast<int32_t*>(device_floats(T, "batch"));
        seq_spans_ = reinterpret_cast<cuda::SequenceSpan*>(device_floats(
            sizeof(cuda::SequenceSpan) / sizeof(float) * static_cast<size_t>(T), "batch"));
        log_info("recurrent state: {:.2f} MiB for {} sequence(s)",
                 static_cast<double>(recurrent_bytes) / (1 << 20), o.n_seq);
    }
    attention_scratch_.values =
        device_floats(attention_scratch_.capacity * c_.head_dim_v, "attention scratch");
    attention_scratch_.stats = device_floats(attention_scratch_.capacity * 2, "attention scratch");
    // The chunks' counters: the last chunk of a head combines them (one launch fewer a layer);
    // TANDEM_GPU_SEPARATE_COMBINE=1 launches the combine kernel instead, for comparison.
    if (!env_flag("TANDEM_GPU_SEPARATE_COMBINE")) {
        attention_scratch_.done = reinterpret_cast<int*>(
            device_floats(static_cast<size_t>(attention_scratch_.capacity), "attention scratch"));
        cuda::check(cudaMemset(attention_scratch_.done, 0,
                               sizeof(int) * static_cast<size_t>(attention_scratch_.capacity)),
                    "cudaMemset (attention counters)");
    }

    make_ropes();
    // Gemma 4's GELU reads ggml's fp16 table.
    if (c_.activation == GluKind::kGelu || c_.expert_activation == GluKind::kGelu ||
        c_.n_embd_per_layer > 0)
        cuda::upload_gelu_table();

    // The batch's arrays, and their pinned staging (tokens, places, logit rows back to back).
    tokens_ = reinterpret_cast<int32_t*>(device_floats(T, "batch"));
    places_ = reinterpret_cast<TokenPlace*>(device_floats(2 * static_cast<size_t>(T), "batch"));
    logit_rows_ = reinterpret_cast<int32_t*>(device_floats(T, "batch"));
    argmax_keys_ = reinterpret_cast<uint64_t*>(device_floats(2 * static_cast<size_t>(T), "batch"));
    // tokens, places and logit rows; for recurrent layers also the rows by sequence and the spans.
    const size_t staged_per_token =
        sizeof(int32_t) * 4 +
        (n_recurrent_ > 0 ? sizeof(int32_t) + sizeof(cuda::SequenceSpan) : 0);
    batch_staging_ = cuda::PinnedBuffer(staged_per_token * static_cast<size_t>(T), "batch staging");
    read_staging_ = cuda::PinnedBuffer(kReadStagingBytes, "logit staging");
    rounded_ = device_floats(static_cast<size_t>(T) * widest_input, "rounded activations");
    if (mla.kv_lora_rank > 0) {
        // matmul_heads' routes: row t · H + h of the heads' inputs to head h, for any batch.
        const int n_routes = T * c_.n_head;
        std::vector<Route> host(n_routes);
        for (int r = 0; r < n_routes; ++r) host[r] = {r % c_.n_head, 1.0f};
        head_routes_ =
            static_cast<Route*>(upload(host.data(), sizeof(Route) * host.size(), "head routes"));
        head_groups_.max_routes = n_routes;
        head_groups_.max_tiles = cuda::max_group_tiles(n_routes, c_.n_head);
        const auto ints = [&](size_t n) {
            return reinterpret_cast<int32_t*>(device_floats(n, "head groups"));
        };
        head_groups_.sorted = ints(head_groups_.max_routes);
        head_groups_.tile_expert = ints(head_groups_.max_tiles);
        head_groups_.tile_begin = ints(head_groups_.max_tiles);
        head_groups_.tile_end = ints(head_groups_.max_tiles);
        head_groups_.n_tiles = ints(1);
    }
    rounded_q8_ = q8_rows(T, widest_input);
    cuda::check(cudaEventCreateWithFlags(&batch_copied_, cudaEventDisableTiming),
                "cudaEventCreate");

    if (c_.is_moe()) {
        if (c_.n_expert > cuda::kMaxRoutedExperts)
            fail("GPU backend: {} experts in a layer; the GPU's routing takes at most {}",
                 c_.n_expert, cuda::kMaxRoutedExperts);
        if (c_.n_expert_used > cuda::kMaxRoutesPerToken)
            fail("GPU backend: {} experts used a token; the GPU's routing takes at most {}",
                 c_.n_expert_used, cuda::kMaxRoutesPerToken);
        routing_.n_expert = c_.n_expert;
        routing_.top_k = c_.n_expert_used;
        routing_.gating = c_.gating;
        routing_.normalize = c_.expert_weights_norm;
        routing_.scale = c_.expert_weights_scale;
        routing_.n_groups = c_.n_expert_groups;
        routing_.n_groups_used = c_.n_group_used;
        router_probs_ = allocate(T, c_.n_expert);
        routes_ = reinterpret_cast<Route*>(device_floats(2 * static_cast<size_t>(T) * k, "routes"));
        expert_gate_ =
            device_floats(static_cast<size_t>(T) * k * c_.n_ff_exp, "expert activations");
        expert_up_ = device_floats(static_cast<size_t>(T) * k * c_.n_ff_exp, "expert activations");
        expert_down_ = device_floats(static_cast<size_t>(T) * k * c_.n_embd, "expert outputs");
        expert_q8_ = q8_rows(int64_t{T} * k, c_.n_ff_exp);
        groups_.max_routes = T * k;
        groups_.max_tiles = cuda::max_group_tiles(T * k, c_.n_expert);
        groups_.sorted =
            reinterpret_cast<int32_t*>(device_floats(groups_.max_routes, "expert groups"));
        groups_.tile_expert =
            reinterpret_cast<int32_t*>(device_floats(groups_.max_tiles, "expert groups"));
        groups_.tile_begin =
            reinterpret_cast<int32_t*>(device_floats(groups_.max_tiles, "expert groups"));
        groups_.tile_end =
            reinterpret_cast<int32_t*>(device_floats(groups_.max_tiles, "expert groups"));
        groups_.n_tiles = reinterpret_cast<int32_t*>(device_floats(1, "expert groups"));
    }
    ctx_.stream = stream_.get();
    ctx_.tables = dequant_tables_.tables();
    // What the caches of all layers hold for one position (latent attention: the latent and the
    // rotated key only; each layer's own heads; none for layers that read another's cache or
    // keep none), as the CPU backend counts it.
    size_t kv_per_position = 0;
    for (int l = 0; l < c_.n_layer; ++l) {
        if (kv_.owns(l) && kv_.layer_positions(l) > 0)
            kv_per_position += kv_.slot_bytes(l, true) + kv_.slot_bytes(l, false);
    }
    log_info(
        "backend: cuda on {} ({:.0f} GiB, compute {}.{}, driver CUDA {}); {:.2f} GiB of weights, "
        "KV cache {:.2f} GiB ({}, {} bytes per position); experts: {}; ready in {:.2f} s",
        gpu.name, gib(gpu.total_bytes), gpu.cc_major, gpu.cc_minor,
        cuda::cuda_version_text(gpu.driver_version), gib(weight_bytes), gib(kv_.bytes()),
        kv_.f16 ? "f16" : "f32", kv_per_position,
        c_.is_moe()
            ? describe(placement_) +
                  fmt::format(" (--moe-strategy {})", moe_strategy_name(gpu_options.moe_strategy))
            : "none",
        watch.seconds());
}

GpuBackend::~GpuBackend() {
    cudaStreamSynchronize(stream_.get());
    if (expert_slots_) {
        const auto [hits, misses] = expert_slots_->counts();
        log_info("expert slots: {} hits, {} misses ({:.1f}% hits) in {} slots", hits, misses,
                 100.0 * static_cast<double>(hits) /
                     static_cast<double>(std::max<uint64_t>(1, hits + misses)),
                 expert_slots_->n_slots());
    }
    if (expert_stream_) {
        const GpuExpertStream::Traffic& t = expert_stream_->traffic();
        log_info("expert stream: {} whole-layer copies ({:.2f} GiB from host memory, {:.2f} GiB "
                 "from expert slots), {} of the routed experts only",
                 t.whole_copies, t.host_bytes / (1u << 30), t.slot_bytes / (1u << 30),
                 t.routed_only_copies);
        expert_stream_.reset();  // before the slots, which its copies may still read
    }
    if (batch_copied_ != nullptr) cudaEventDestroy(batch_copied_);
}

void GpuBackend::make_ropes() {
    for (const LayerConfig& L : c_.layers) {
        size_t i = 0;
        while (i < ropes_.size() && !same_rope(ropes_[i].params, L.rope)) ++i;
        if (i == ropes_.size()) {
            LayerRope r;
            r.params = L.rope;
            r.table = cuda::make_rope_table(L.rope);  // (its frequency factors are host values)
            r.factor = static_cast<const float*>(upload(
                r.table.factor.data(), sizeof(float) * r.table.factor.size(), "rope table"));
            r.ramp = static_cast<const float*>(
                upload(r.table.ramp.data(), sizeof(float) * r.table.ramp.size(), "rope table"));
            ropes_.push_back(std::move(r));
        }
        rope_of_.push_back(static_cast<int>(i));
    }
}

void GpuBackend::check_supported() const {
    auto check_matrix = [&](const WeightMatrix& m, const char* role) {
        if (m.empty()) return;
        if (!cuda::gpu_supports(m.format->type))
            fail("--device cuda: no GPU kernels for {} weights ({})", m.format->name, role);
        if (m.cols % 8 != 0)
            fail("--device cuda: {} weights of {} columns (the GPU kernels need a multiple of 8)",
                 role, m.cols);
    };
    const ModelWeights& w = model_.weights();
    check_matrix(w.token_embd, "token_embd");
    check_matrix(w.output, "output");
    check_matrix(w.pl_token_embd, "per-layer embeddings");
    check_matrix(w.pl_model_proj, "per-layer embeddings");
    for (const LayerWeights& L : w.layers) {
        for (const WeightMatrix* m : {&L.wq, &L.wk, &L.wv, &L.wo}) check_matrix(*m, "attention");
        for (const WeightMatrix* m : {&L.wq_a, &L.wq_b, &L.wkv_a, &L.wk_b.matrix, &L.wv_b.matrix})
            check_matrix(*m, "latent attention");
        for (const WeightMatrix* m : {&L.ffn_gate, &L.ffn_up, &L.ffn_down}) check_matrix(*m, "ffn");
        check_matrix(L.router, "router");
        for (const WeightMatrix* m : {&L.wqkv, &L.wqkv_gate, &L.ssm_beta, &L.ssm_alpha, &L.ssm_out})
            check_matrix(*m, "delta-net");
        for (const WeightMatrix* m :
             {&L.shexp_gate, &L.shexp_up, &L.shexp_down, &L.shexp_gate_inp})
            check_matrix(*m, "shared expert");
        for (const ExpertMatrix* e : {&L.experts.gate, &L.experts.up, &L.experts.down})
            check_matrix(e->matrix, "experts");
        for (const WeightMatrix* m : {&L.pl_gate, &L.pl_proj}) check_matrix(*m, "per-layer inputs");
    }
    // What the GPU's operations do not implement yet (they would compute something else).
    auto missing = [&](const char* what) {
        fail("--device cuda: {} ({}) is not implemented on the GPU yet", what, c_.arch);
    };
    // Each layer's own heads (Gemma 4's sliding and global layers differ), the wide ones included
    // (Gemma 4's 512 / 512, multi-head latent attention's 576 / 512).
    bool recurrent = false;
    for (const LayerConfig& L : c_.layers) {
        if (L.attention == AttentionKind::kRecurrent) {
            recurrent = true;  // no attention, KV cache or rope: the gated delta-net
            continue;
        }
        if (L.head_dim_k % 8 != 0 || L.head_dim_v % 8 != 0) {
            fail("--device cuda: heads of {} key and {} value dims (the GPU kernels need multiples "
                 "of 8)",
                 L.head_dim_k, L.head_dim_v);
        }
        if (!cuda::attention_takes(L.head_dim_k, L.head_dim_v)) {
            fail("--device cuda: heads of {} key and {} value dims (the GPU attention takes up to "
                 "{} / {})",
                 L.head_dim_k, L.head_dim_v, cuda::kMaxWideKeyDim, cuda::kMaxWideValueDim);
        }
    }
    // Group-limited routing where the used groups hold fewer experts than a token takes
    // (route_experts() then picks experts of the other groups, which route_topk does not).
    if (c_.n_expert_groups > 1 &&
        c_.n_group_used * (c_.n_expert / c_.n_expert_groups) < c_.n_expert_used)
        missing("group-limited routing with fewer experts in the used groups than experts used");
    if (recurrent && c_.delta.conv_kernel > cuda::kMaxConvTaps) {
        fail("--device cuda: a delta-net convolution of {} taps (the GPU kernel takes up to {})",
             c_.delta.conv_kernel, cuda::kMaxConvTaps);
    }
    if (recurrent && c_.delta.head_dim > cuda::kMaxDeltaHeadDim) {
        fail("--device cuda: delta-net heads of {} values (the GPU kernel takes up to {})",
             c_.delta.head_dim, cuda::kMaxDeltaHeadDim);
    }
}

size_t GpuBackend::place_weights(const GpuOptions& gpu, size_t kv_and_activation_bytes) {
    // Ranges merge and align per image, so each part is measured as an image of its own.
    const ModelWeights& host = model_.weights();
    cuda::HostImage dense;
    std::vector<cuda::HostImage> layer_experts(host.layers.size());
    for_each_weight_range(host, c_, [&](const void* p, size_t n, int layer) {
        (layer == kNotExperts ? dense : layer_experts[layer]).add(p, n);
    });
    PlacementNeeds needs;
    needs.dense_bytes = dense.device_bytes() + kv_and_activation_bytes;
    size_t widest = 0;
    for (const cuda::HostImage& e : layer_experts) {
        needs.layer_expert_bytes.push_back(e.device_bytes());
        widest = std::max(widest, e.device_bytes() + 3 * cuda::kDeviceAlignment);
    }
    needs.stream_bytes = 2 * widest;
    std::vector<MoeLayer> expert_layers;
    for (const LayerWeights& L : host.layers) expert_layers.push_back(L.experts);
    needs.slot_bytes = static_cast<size_t>(GpuExpertSlots::slot_bytes(expert_layers));
    // A decode batch's distinct experts per layer must all have slots at once.
    const int decode_tokens = std::min(options_.max_batch, cuda::kSmallBatch);
    needs.min_slots = std::min(decode_tokens * std::max(1, c_.n_expert_used), c_.n_expert);
    needs.max_slots = static_cast<int>(std::count_if(needs.layer_expert_bytes.begin(),
                                                     needs.layer_expert_bytes.end(),
                                                     [](size_t b) { return b > 0; })) *
                      c_.n_expert;
    needs.budget_bytes = budget_;
    placement_ = place_experts(needs, gpu);
    for_each_weight_range(host, c_, [&](const void* p, size_t n, int layer) {
        if (layer == kNotExperts || !placement_.experts_on_cpu[layer]) image_.add(p, n);
    });
    return image_.device_bytes();
}

void GpuBackend::upload_weights() {
    Stopwatch watch;
    double last = 0.0;
    image_.upload([&](size_t done, size_t total) {
        if (watch.seconds() - last < 1.0 && done < total) return;
        last = watch.seconds();
        log_info("uploading weights: {:.2f} / {:.2f} GiB ({:.1f} GB/s)", gib(done), gib(total),
                 static_cast<double>(done) / 1e9 / std::max(1e-9, watch.seconds()));
    });
    const ModelWeights& host = model_.weights();
    auto matrix = [&](const WeightMatrix& m) {
        WeightMatrix d = m;
        d.data = image_.device(m.data);
        return d;
    };
    auto vector = [&](const WeightVector& v) {
        return WeightVector{image_.device(v.data), v.size};
    };
    auto experts = [&](const ExpertMatrix& e) {
        ExpertMatrix d = e;
        d.matrix.data = image_.device(e.matrix.data);
        d.scales = image_.device(e.scales);
        d.bias = image_.device(e.bias);
        return d;
    };
    weights_.token_embd = matrix(host.token_embd);
    weights_.output = matrix(host.output);
    weights_.output_norm = vector(host.output_norm);
    weights_.rope_freqs = vector(host.rope_freqs);
    weights_.pl_token_embd = matrix(host.pl_token_embd);
    weights_.pl_model_proj = matrix(host.pl_model_proj);
    weights_.pl_proj_norm = vector(host.pl_proj_norm);
    weights_.layers.resize(host.layers.size());
    for (size_t i = 0; i < host.layers.size(); ++i) {
        const LayerWeights& h = host.layers[i];
        LayerWeights& d = weights_.layers[i];
        d = h;
        // The same fields of d and h, in the same order: d's are made to point at the device copy.
        const auto dv = layer_vectors(d);
        const auto hv = layer_vectors(h);
        for (size_t j = 0; j < dv.size(); ++j) *dv[j] = vector(*hv[j]);
        const auto dm = layer_matrices(d);
        const auto hm = layer_matrices(h);
        for (size_t j = 0; j < dm.size(); ++j) *dm[j] = matrix(*hm[j]);
        if (!h.wk_b.matrix.empty()) d.wk_b = experts(h.wk_b);
        if (!h.wv_b.matrix.empty()) d.wv_b = experts(h.wv_b);
        if (h.experts.n_expert > 0 && !placement_.experts_on_cpu[i]) {
            d.experts.gate = experts(h.experts.gate);
            d.experts.up = experts(h.experts.up);
            d.experts.down = experts(h.experts.down);
        }
    }
    log_info("uploaded {:.2f} GiB of weights in {:.2f} s ({:.1f} GB/s)", gib(image_.device_bytes()),
             watch.seconds(),
             static_cast<double>(image_.device_bytes()) / 1e9 / std::max(1e-9, watch.seconds()));
}

void GpuBackend::synchronize(const char* what) {
    stream_.synchronize(what);
    if (cpu_experts_) cpu_experts_->check();
}

float* GpuBackend::device_floats(size_t n, const char* what) {
    buffers_.emplace_back(cuda::align_up(sizeof(float) * n), what);
    return buffers_.back().as<float>();
}

void* GpuBackend::upload(const void* host, size_t bytes, const char* what) {
    float* device = device_floats(std::max<size_t>(1, (bytes + sizeof(float) - 1) / sizeof(float)),
                                  what);
    if (bytes > 0) cuda::check(cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice), what);
    return device;
}

Act GpuBackend::allocate(int rows, int64_t cols) {
    return {device_floats(static_cast<size_t>(rows) * cols, "activations"), rows, cols, cols};
}

void GpuBackend::set_batch(std::span<const int32_t> tokens, std::span<const TokenPlace> places,
                           std::span<const int32_t> logit_rows) {
    const KvShape& s = kv_.shape;
    max_pos_ = 0;
    for (const TokenPlace& p : places) {
        if (p.seq < 0 || p.seq >= s.n_seq || p.pos < 0 || p.pos >= s.n_ctx) {
            fail(
                "token at sequence {} position {} is outside the KV cache ({} sequences x {} "
                "positions)",
                p.seq, p.pos, s.n_seq, s.n_ctx);
        }
        max_pos_ = std::max(max_pos_, p.pos);
    }
    const size_t n = tokens.size(), m = logit_rows.size();
    // The last batch's copies must have left the staging buffer before it is overwritten.
    if (batch_staged_) cuda::check(cudaEventSynchronize(batch_copied_), "batch upload");
    uint8_t* staging = batch_staging_.as<uint8_t>();
    const size_t places_at = n * sizeof(int32_t);
    const size_t logit_rows_at = places_at + n * sizeof(TokenPlace);
    const size_t recurrent_at = logit_rows_at + m * sizeof(int32_t);
    // Checked before anything is uploaded: a batch a recurrent state refuses changes nothing.
    if (n_recurrent_ > 0) stage_recurrent_batch(places, staging + recurrent_at);
    std::memcpy(staging, tokens.data(), n * sizeof(int32_t));
    std::memcpy(staging + places_at, places.data(), n * sizeof(TokenPlace));
    std::memcpy(staging + logit_rows_at, logit_rows.data(), m * sizeof(int32_t));
    cudaStream_t st = stream_.get();
    cuda::check(cudaMemcpyAsync(tokens_, staging, n * sizeof(int32_t), cudaMemcpyHostToDevice, st),
                "batch upload");
    cuda::check(cudaMemcpyAsync(places_, staging + places_at, n * sizeof(TokenPlace),
                                cudaMemcpyHostToDevice, st),
                "batch upload");
    if (m > 0) {
        cuda::check(cudaMemcpyAsync(logit_rows_, staging + logit_rows_at, m * sizeof(int32_t),
                                    cudaMemcpyHostToDevice, st),
                    "batch upload");
    }
    if (n_recurrent_ > 0) {
        cuda::check(cudaMemcpyAsync(seq_rows_, staging + recurrent_at, n * sizeof(int32_t),
                                    cudaMemcpyHostToDevice, st),
                    "batch upload");
        cuda::check(cudaMemcpyAsync(seq_spans_, staging + recurrent_at + n * sizeof(int32_t),
                                    n * sizeof(cuda::SequenceSpan), cudaMemcpyHostToDevice, st),
                    "batch upload");
    }
    cuda::check(cudaEventRecord(batch_copied_, st), "cudaEventRecord");
    batch_staged_ = true;
}

size_t GpuBackend::stage_recurrent_batch(std::span<const TokenPlace> places, uint8_t* staging) {
    // As CpuBackend::sequence_rows() checks it, for every recurrent layer at once: a sequence's
    // first token in the batch at position 0 starts its states over, every token continues at
    // the position its sequence's states stand at. Nothing moves on unless the whole batch does.
    const int n = static_cast<int>(places.size());
    staged_pos_ = recurrent_pos_;
    spans_.clear();
    for (int t = 0; t < n; ++t) {
        const TokenPlace p = places[t];
        int& span = span_of_seq_[p.seq];
        if (span < 0) {
            span = static_cast<int>(spans_.size());
            spans_.push_back({p.seq, 0, 0, p.pos == 0 ? 1 : 0});
            if (p.pos == 0) staged_pos_[p.seq] = 0;
        }
        if (p.pos != staged_pos_[p.seq]) {
            const int at = staged_pos_[p.seq];
            for (const cuda::SequenceSpan& sp : spans_) span_of_seq_[sp.seq] = -1;
            fail("batch: sequence {} continues at position {} but its recurrent state is at {} (a "
                 "recurrent state cannot be rewound)",
                 p.seq, p.pos, at);
        }
        ++staged_pos_[p.seq];
        ++spans_[span].count;
    }
    // Rows grouped by sequence, in batch order within each.
    int32_t* rows = reinterpret_cast<int32_t*>(staging);
    int32_t first = 0;
    for (cuda::SequenceSpan& sp : spans_) {
        sp.first = first;
        first += sp.count;
        sp.count = 0;  // counts again as the rows are placed
    }
    for (int t = 0; t < n; ++t) {
        cuda::SequenceSpan& sp = spans_[span_of_seq_[places[t].seq]];
        rows[sp.first + sp.count++] = t;
    }
    for (const cuda::SequenceSpan& sp : spans_) span_of_seq_[sp.seq] = -1;
    n_spans_ = static_cast<int>(spans_.size());
    spans_.resize(n);  // past the batch's sequences: spans of no rows
    std::memcpy(staging + n * sizeof(int32_t), spans_.data(), n * sizeof(cuda::SequenceSpan));
    recurrent_pos_.swap(staged_pos_);
    return n * (sizeof(int32_t) + sizeof(cuda::SequenceSpan));
}

cuda::RecurrentBatch GpuBackend::recurrent_batch(int rows) const {
    return {seq_rows_, seq_spans_, rows <= cuda::kSmallBatch ? rows : n_spans_};
}

cuda::RecurrentState GpuBackend::recurrent_state(int layer, bool conv) const {
    const int r = recurrent_index_[layer];
    if (r < 0) fail("layer {} has no recurrent state", layer);
    const size_t seq_floats = recurrent_seq_floats_;
    float* base = recurrent_ + static_cast<size_t>(r) * options_.n_seq * seq_floats;
    return {conv ? base : base + recurrent_conv_floats_, static_cast<int64_t>(seq_floats)};
}

void GpuBackend::run(uint64_t key, const std::function<void()>& pass) {
    const int n = static_cast<int>(key >> 32);
    rounded_from_ = nullptr;  // what a pass rounds, it rounds itself (a replay records nothing)
    // Nor does a pass that failed leave a sum for the next, or the deferral on.
    pending_sum_ = {};
    defer_sum_ = false;
    // hybrid's copies into slots for later steps run beside the pass; it ends when they do.
    const auto whole_pass = [&] {
        pass();
        if (pending_sum_.out != nullptr) fail("a forward pass left an MoE layer's sum pending");
        if (expert_slots_) expert_slots_->join(stream_.get());
    };
    // A prefill's streamed layers take the experts that sit in slots from there: which do, as
    // the decode steps before left them (read again only after passes that may have changed
    // them: the read waits for the stream). The first decode pass after a prefill may refill
    // slots that the copy of the first host layer ahead of the next prefill still reads.
    if (expert_stream_ && expert_slots_) {
        if (n < kStreamMinTokens) {
            if (!slot_map_stale_) expert_stream_->order_before(stream_.get());
            slot_map_stale_ = true;
        } else if (slot_map_stale_) {
            expert_stream_->take_from_slots(expert_slots_.get(),
                                            expert_slots_->slot_map(stream_.get()));
            slot_map_stale_ = false;
        }
    }
    if (profile_.enabled()) {
        profile_.set_phase(n <= cuda::kSmallBatch ? "decode" : "prefill");
        whole_pass();
        profile_.collect();
    } else if (n <= cuda::kSmallBatch) {
        graphs_.run(key, whole_pass);
    } else {
        whole_pass();
    }
}

void GpuBackend::read(Act x, float* host) {
    const size_t row_bytes = sizeof(float) * static_cast<size_t>(x.cols);
    const int rows_per_copy = static_cast<int>(std::max<size_t>(1, kReadStagingBytes / row_bytes));
    for (int r0 = 0; r0 < x.rows; r0 += rows_per_copy) {
        const int n = std::min(rows_per_copy, x.rows - r0);
        if (row_bytes > kReadStagingBytes) {  // a single row larger than the staging: plain copy
            cuda::check(cudaMemcpyAsync(host + static_cast<size_t>(r0) * x.cols, x.row(r0),
                                        row_bytes, cudaMemcpyDeviceToHost, stream_.get()),
                        "reading results");
            synchronize("reading results");
            continue;
        }
        cuda::check(
            cudaMemcpy2DAsync(read_staging_.get(), row_bytes, x.row(r0), sizeof(float) * x.stride,
                              row_bytes, n, cudaMemcpyDeviceToHost, stream_.get()),
            "reading results");
        synchronize("the forward pass");
        std::memcpy(host + static_cast<size_t>(r0) * x.cols, read_staging_.get(), row_bytes * n);
    }
}

size_t GpuBackend::sequence_state_bytes(int n_positions) const {
    // As copy_sequence copies, and as many bytes as the CPU backend counts: each layer with a
    // cache of its own gives a ring's slots, not the context (cpu_backend.cpp), of its own heads,
    // keys only where its values are in them; recurrent layers (no slots) their states.
    size_t bytes = 0;
    for (int l = 0; l < kv_.shape.n_layer; ++l) {
        if (!kv_.owns(l)) continue;  // it reads another layer's cache
        const size_t slots =
            static_cast<size_t>(std::min(std::max(0, n_positions), kv_.layer_positions(l)));
        bytes += slots * (kv_.slot_bytes(l, true) + kv_.slot_bytes(l, false));
    }
    return bytes + sizeof(float) * recurrent_seq_floats_ * static_cast<size_t>(n_recurrent_);
}

void GpuBackend::save_sequence(int seq, int n_positions, uint8_t* out) {
    copy_sequence("save_sequence", seq, n_positions, out, true);
}

void GpuBackend::load_sequence(int seq, int n_positions, const uint8_t* in) {
    copy_sequence("load_sequence", seq, n_positions, const_cast<uint8_t*>(in), false);
}

void GpuBackend::copy_sequence(const char* op, int seq, int n_positions, uint8_t* host,
                               bool to_host) {
    const KvShape& s = kv_.shape;
    if (seq < 0 || seq >= s.n_seq)
        fail("{}: sequence {} outside the cache's {} sequences", op, seq, s.n_seq);
    if (n_positions < 0 || n_positions > s.n_ctx)
        fail("{}: {} positions outside the context of {}", op, n_positions, s.n_ctx);
    // A recurrent state stands at one position: it can only be saved there.
    if (n_recurrent_ > 0 && to_host && recurrent_pos_[seq] != n_positions) {
        fail("{}: sequence {}'s recurrent state is at position {}, not {}", op, seq,
             recurrent_pos_[seq], n_positions);
    }
    // A layer's slots of one sequence are contiguous (attention.h's layout), and the caches of the
    // layers that own one follow each other: one strided copy per run of layers whose caches
    // have one size and one row size. Each layer gives the first min(n_positions, its ring)
    // slots (as the CPU's caches save them), every layer's keys, then every layer's values (none
    // where they are in the keys: such a layer's value rows are 0 bytes, and no run spans it).
    std::vector<int> owners;  // the layers with a cache of their own
    for (int l = 0; l < s.n_layer; ++l) {
        if (kv_.owns(l)) owners.push_back(l);
    }
    for (const bool keys : {true, false}) {
        for (size_t i0 = 0, i1 = 0; i0 < owners.size(); i0 = i1) {
            const cuda::KvLayer kv = kv_.layer(owners[i0]);
            const size_t slot = kv_.slot_bytes(owners[i0], keys);
            while (i1 < owners.size()) {
                const int next = owners[i1];
                if (kv_.layer_positions(next) != kv.positions || kv_.slot_bytes(next, keys) != slot)
                    break;
                ++i1;
            }
            const int n_layers = static_cast<int>(i1 - i0);
            const size_t width = slot * std::min(n_positions, kv.positions),
                         pitch = slot * kv.positions * kv.n_seq;
            if (width == 0) continue;  // no positions yet, or recurrent layers (no KV cache)
            uint8_t* device = static_cast<uint8_t*>(keys ? kv.k : kv.v) + slot * kv.positions * seq;
            const cudaError_t e =
                to_host ? cudaMemcpy2DAsync(host, width, device, pitch, width, n_layers,
                                            cudaMemcpyDeviceToHost, stream_.get())
                        : cudaMemcpy2DAsync(device, pitch, host, width, width, n_layers,
                                            cudaMemcpyHostToDevice, stream_.get());
            cuda::check(e, op);
            host += width * n_layers;
        }
    }
    if (n_recurrent_ > 0) {
        // Each recurrent layer's states of the sequence (conv, then delta rule), layer after
        // layer: one strided copy.
        const size_t width = sizeof(float) * recurrent_seq_floats_,
                     pitch = width * static_cast<size_t>(s.n_seq);
        float* device = recurrent_ + recurrent_seq_floats_ * static_cast<size_t>(seq);
        const cudaError_t e =
            to_host ? cudaMemcpy2DAsync(host, width, device, pitch, width, n_recurrent_,
                                        cudaMemcpyDeviceToHost, stream_.get())
                    : cudaMemcpy2DAsync(device, pitch, host, width, width, n_recurrent_,
                                        cudaMemcpyHostToDevice, stream_.get());
        cuda::check(e, op);
        if (!to_host) recurrent_pos_[seq] = n_positions;
    }
    synchronize(op);
}

void GpuBackend::argmax(Act x, int32_t* host) {
    cuda::argmax_rows(rows(x), argmax_keys_, stream_.get());
    cuda::check(cudaMemcpyAsync(read_staging_.get(), argmax_keys_, sizeof(uint64_t) * x.rows,
                                cudaMemcpyDeviceToHost, stream_.get()),
                "reading argmax");
    synchronize("the forward pass");
    const uint64_t* keys = reinterpret_cast<const uint64_t*>(read_staging_.get());
    for (int r = 0; r < x.rows; ++r) host[r] = cuda::argmax_index(keys[r]);
}

void GpuBackend::embed(const WeightMatrix& table, Act out) {
    written(out);
    const cuda::OpProfile::Scope scope(profile_, "embed", stream_.get());
    cuda::embed_rows(ctx_, table, tokens_, out.rows, out.data, out.stride);
}

void GpuBackend::rms_norm(Act x, const WeightVector& w, float eps, Act out) {
    written(out);
    const cuda::OpProfile::Scope scope(profile_, "rms_norm", stream_.get());
    cuda::rms_norm(rows(x), w.data, x.cols, eps, rows(out), stream_.get());
}

void GpuBackend::rms_norm_heads(Act x, int head_dim, const WeightVector& w, float eps) {
    written(x);
    const cuda::OpProfile::Scope scope(profile_, "rms_norm_heads", stream_.get());
    cuda::rms_norm(rows(x), w.data, head_dim, eps, rows(x), stream_.get());
}

void GpuBackend::residual_norm(Act x, Act residual, const WeightVector& w, float eps, Act out,
                               const WeightMatrix* reader) {
    const GgmlType type =
        reader != nullptr && reader->format != nullptr ? reader->format->dot_type : GgmlType::kF32;
    if (!cuda::residual_norm_fits(x.cols)) {
        // (gpu_experts() leaves no sum pending for rows of this width.)
        Ops::residual_norm(x, residual, w, eps, out, reader);
        return;
    }
    written(x);
    written(out);
    const cuda::OpProfile::Scope scope(profile_, "residual_norm", stream_.get());
    const bool codes = cuda::has_q8_codes(type);
    // An MoE layer's output whose weighted sum was left to this norm (moe_into_residual()).
    const cuda::RoutedRows routed = pending_sum_.experts;
    if (pending_sum_.out != nullptr && pending_sum_.out != residual.data)
        fail("residual_norm: the MoE output left pending is not its residual");
    pending_sum_ = {};
    cuda::residual_norm(rows(x), residual.data != nullptr ? rows(residual) : cuda::DeviceRows{},
                        w.data, eps, rows(out), type, {rounded_, out.rows, out.cols, out.stride},
                        codes ? &rounded_q8_ : nullptr, stream_.get(), routed);
    // The products that read out next find it rounded (rounded_input()).
    if (type != GgmlType::kF32) remember_rounded(out, type);
}

void GpuBackend::norm_rope_heads(int layer, Act x, int n_heads, int head_dim,
                                 const WeightVector& w, float eps) {
    written(x);
    const cuda::OpProfile::Scope scope(profile_, "norm_rope", stream_.get());
    const LayerRope& r = layer_rope(layer);
    cuda::norm_rope(rows(x), n_heads, head_dim, w.data, eps, places_, r.table, r.factor, r.ramp,
                    stream_.get());
}

void GpuBackend::norm_rope_store(int layer, Act q, int n_head, Act k, int n_head_kv, Act v,
                                 int head_dim, const WeightVector& q_norm,
                                 const WeightVector& k_norm, float eps) {
    // The layer's heads are its cache's (kv_.layer()).
    (void)n_head_kv, (void)head_dim;
    written(q);
    written(k);
    const cuda::OpProfile::Scope scope(profile_, "norm_rope_store", stream_.get());
    const LayerRope& r = layer_rope(layer);
    cuda::norm_rope_store(rows(q), n_head, rows(k), rows(v), q_norm.data, k_norm.data, eps,
                          places_, r.table, r.factor, r.ramp, kv_.layer(layer), stream_.get());
}

void GpuBackend::written(Act x) {
    if (rounded_from_ == nullptr || x.rows == 0) return;
    const float* end = x.data + (x.rows - 1) * x.stride + x.cols;
    if (x.data < rounded_from_ + rounded_extent_ && rounded_from_ < end) rounded_from_ = nullptr;
}

void GpuBackend::remember_rounded(Act in, GgmlType type) {
    rounded_from_ = in.data;
    rounded_extent_ = (in.rows - 1) * in.stride + in.cols;
    rounded_rows_ = in.rows;
    rounded_as_ = type;
}

GpuBackend::RoundedInput GpuBackend::rounded_input(Act in, const WeightMatrix& w) {
    const GgmlType type = w.format->dot_type;
    if (type == GgmlType::kF32) return {in.data, nullptr};
    const bool codes = cuda::has_q8_codes(type);
    if (rounded_from_ != in.data || rounded_as_ != type || rounded_rows_ != in.rows) {
        cuda::round_activations(rows(in), type, {rounded_, in.rows, in.cols, in.stride},
                                stream_.get(), codes ? &rounded_q8_ : nullptr);
        remember_rounded(in, type);
    }
    return {rounded_, codes ? &rounded_q8_ : nullptr};
}

size_t GpuBackend::q8_floats(int64_t rows, int64_t cols) {
    const int64_t blocks = (cols + 31) / 32;
    return static_cast<size_t>(rows) * blocks * (32 / sizeof(float) + 1);
}

cuda::Q8Rows GpuBackend::q8_rows(int64_t rows, int64_t cols) {
    const int64_t blocks = (cols + 31) / 32;
    cuda::Q8Rows q8;
    q8.q = reinterpret_cast<int8_t*>(
        device_floats(static_cast<size_t>(rows) * blocks * 32 / sizeof(float), "q8 activations"));
    q8.d = device_floats(static_cast<size_t>(rows) * blocks, "q8 activations");
    q8.q_stride = blocks * 32;
    q8.d_stride = blocks;
    return q8;
}

void GpuBackend::matmul(Act in, std::initializer_list<MatmulTarget> targets) {
    // Targets of one format share their rounded input, and a launch where the kernels allow.
    std::vector<cuda::ProductTarget> group;
    const auto flush = [&] {
        if (group.empty()) return;
        std::string name;
        if (profile_.enabled()) {
            name = "matmul";
            for (const cuda::ProductTarget& t : group)
                name += fmt::format("{}{}x{}", name.size() > 6 ? "+" : " ", t.w->rows, t.w->cols);
            name += fmt::format(" {}", group[0].w->format->name);
        }
        const cuda::OpProfile::Scope scope(profile_, name, stream_.get());
        const RoundedInput x = rounded_input(in, *group[0].w);
        cuda::matmul_group(ctx_, group, x.data, in.stride, in.rows, x.q8);
        group.clear();
    };
    for (const MatmulTarget& t : targets) {
        if (!group.empty() && group[0].w->format != t.weight->format) flush();
        written(t.out);
        group.push_back({t.weight, t.out.data, t.out.stride});
    }
    flush();
}

void GpuBackend::add_bias(Act x, const WeightVector& bias) {
    written(x);
    const cuda::OpProfile::Scope scope(profile_, "add_bias", stream_.get());
    cuda::add_bias(rows(x), bias.data, stream_.get());
}

void GpuBackend::rope(int layer, Act x, int n_heads, int head_dim) {
    written(x);
    const cuda::OpProfile::Scope scope(profile_, "rope", stream_.get());
    const LayerRope& r = layer_rope(layer);
    cuda::rope(rows(x), n_heads, head_dim, places_, r.table, r.factor, r.ramp, stream_.get());
}

void GpuBackend::store_kv(int layer, Act k, Act v) {
    const cuda::OpProfile::Scope scope(profile_, "store_kv", stream_.get());
    cuda::store_kv(kv_.layer(layer), rows(k), rows(v), places_, stream_.get());
}

void GpuBackend::attention(int layer, Act q, Act out, const WeightMatrix* reader) {
    written(out);
    const cuda::OpProfile::Scope scope(profile_, "attention", stream_.get());
    const LayerConfig& L = c_.layers[layer];
    const WeightVector& sinks = weights_.layers[layer].attn_sinks;
    Attention::Params params;
    params.n_head = L.n_head;
    params.scale = L.attn_scale;
    params.window = L.attention == AttentionKind::kSliding ? L.window : 0;
    params.sinks = sinks.empty() ? nullptr : sinks.data;  // on the device
    const cuda::KvLayer kv = kv_.layer(layer);
    // Decode passes are replayed as graphs, so they cover the whole context in short chunks
    // spread over the GPU; prefill batches share each staged tile of keys among many queries
    // (where the GPU gives a tile of wide heads its shared memory).
    if (q.rows > cuda::kSmallBatch && cuda::tiled_attention_fits(kv.dk, kv.dv)) {
        cuda::attention_tiled(kv, rows(q), places_, params, rows(out), stream_.get());
        return;
    }
    // The combine rounds its output for wo where it can (the product then finds it rounded).
    const GgmlType type =
        reader != nullptr && reader->format != nullptr ? reader->format->dot_type : GgmlType::kF32;
    const cuda::OutputRounding rounding{type, {rounded_, out.rows, out.cols, out.stride},
                                        cuda::has_q8_codes(type) ? &rounded_q8_ : nullptr};
    if (cuda::attention(kv, rows(q), places_, params, 0, cuda::decode_chunks(options_.n_ctx),
                        attention_scratch_, rows(out), stream_.get(), rounding))
        remember_rounded(out, type);
}

void GpuBackend::glu(GluKind kind, Act gate, Act up, Act out) {
    written(out);
    const cuda::OpProfile::Scope scope(profile_, "glu", stream_.get());
    cuda::glu(kind, rows(gate), rows(up), rows(out), stream_.get());
}

void GpuBackend::add(Act y, Act x) {
    written(y);
    const cuda::OpProfile::Scope scope(profile_, "add", stream_.get());
    cuda::add(rows(y), rows(x), stream_.get());
}

void GpuBackend::choose_max_fetch(int asked) {
    if (asked >= 0) {
        max_fetch_ = asked;
        log_info("hybrid: up to {} missed experts copied into slots a layer and step "
                 "(--moe-hybrid-max-fetch)",
                 max_fetch_);
        return;
    }
    // Measured here, as this machine runs them: what the copies of a layer may take so that they
    // end within the CPU's share of it (expert_placement.h).
    const int k = c_.n_expert_used;
    const double copy = expert_slots_->copy_seconds_per_expert(k, stream_.get());
    const double cpu = cpu_experts_->seconds_per_expert();
    max_fetch_ = hybrid_max_fetch(k, cpu, copy);
    log_info("hybrid: up to {} missed experts copied into slots a layer and step (a copy {:.1f} "
             "us an expert, the CPU executor {:.1f} us)",
             max_fetch_, 1e6 * copy, 1e6 * cpu);
}

void GpuBackend::moe_into_residual(int layer, Act logits, Act in, Act out) {
    defer_sum_ = true;
    moe(layer, logits, in, out);
    defer_sum_ = false;
}

void GpuBackend::moe(int layer, Act logits, Act in, Act out) {
    const MoeLayer& m = weights_.layers[layer].experts;
    const int n = in.rows;
    const cudaStream_t st = stream_.get();
    written(out);
    std::optional<cuda::OpProfile::Scope> scope(std::in_place, profile_, "moe router", st);
    // The probabilities go to scratch: the logits stay as the decoder left them.
    const WeightVector& bias = weights_.layers[layer].expert_bias;  // on the device, or empty
    cuda::route_topk(rows(logits), rows(router_probs_.first_rows(n)), routing_, routes_, st,
                     bias.data);
    if (!placement_.experts_on_cpu[layer]) {
        scope.reset();
        gpu_experts(m, routes_, in, out, defer_sum_);
    } else if (expert_slots_ && n <= cuda::kSmallBatch && !placement_.hybrid) {
        scope.emplace(profile_, "moe expert slots", st);
        const MoeLayer slotted =
            expert_slots_->prepare(layer, routes_, n * c_.n_expert_used, slot_routes_, st);
        scope.reset();
        gpu_experts(slotted, slot_routes_, in, out, defer_sum_);
    } else if (expert_slots_ && n <= cuda::kSmallBatch) {
        // The misses go to the CPU executor on the side stream while the hits run here; the
        // executor's sum is added once both are done.
        scope.emplace(profile_, "moe expert slots", st);
        const MoeLayer slotted = expert_slots_->split(layer, routes_, n * c_.n_expert_used,
                                                      max_fetch_, slot_routes_, cpu_routes_, st);
        const cudaStream_t side = side_stream_.get();
        hybrid_fork_.record(st);
        hybrid_fork_.wait_on(side);
        const Act cpu_out = hybrid_out_.first_rows(n);
        cpu_experts_->enqueue(layer, in.data, in.stride, cpu_routes_, n, cpu_out.data,
                              cpu_out.stride, side);
        scope.reset();
        cuda::RoutedRows outputs = gpu_expert_products(slotted, slot_routes_, in);
        hybrid_join_.record(side);
        hybrid_join_.wait_on(st);
        // The executor's sum after the hits' (the order the add after them gave).
        outputs.extra = cpu_out.data;
        outputs.extra_stride = cpu_out.stride;
        moe_sum(outputs, out, defer_sum_);
    } else if (n < kStreamMinTokens) {
        scope.emplace(profile_, "moe experts on the cpu", st);
        cpu_experts_->enqueue(layer, in.data, in.stride, routes_, n, out.data, out.stride, st);
    } else {
        scope.emplace(profile_, "moe expert stream wait", st);
        const MoeLayer streamed = expert_stream_->acquire(layer, routes_, n * c_.n_expert_used, st);
        scope.reset();
        gpu_experts(streamed, routes_, in, out, defer_sum_);
        expert_stream_->release(layer, st);
    }
}

void GpuBackend::gpu_experts(const MoeLayer& m, const Route* routes, Act in, Act out,
                             bool defer_sum) {
    moe_sum(gpu_expert_products(m, routes, in), out, defer_sum);
}

cuda::RoutedRows GpuBackend::gpu_expert_products(const MoeLayer& m, const Route* routes, Act in) {
    const int n = in.rows, k = c_.n_expert_used, n_routes = n * k;
    const cudaStream_t st = stream_.get();
    std::optional<cuda::OpProfile::Scope> scope;
    cuda::ExpertGroups groups;
    const cuda::ExpertGroups* grouped = nullptr;
    if (n > cuda::kSmallBatch) {
        groups = cuda::group_routes(routes, n_routes, m.n_expert, groups_, st);
        grouped = &groups;
    }
    const int64_t F = m.n_ff, E = m.n_embd;
    scope.emplace(profile_, "moe experts", st);
    const RoundedInput gate_in = rounded_input(in, m.gate.matrix);
    if (m.up.matrix.format == m.gate.matrix.format) {
        // One launch for both where the kernels allow (decode on the integer kernels).
        cuda::matmul_routed_pair(ctx_, m.gate, m.up, routes, n_routes, k, gate_in.data, in.stride,
                                 expert_gate_, expert_up_, F, grouped, gate_in.q8);
    } else {
        cuda::matmul_routed(ctx_, m.gate, routes, n_routes, k, gate_in.data, in.stride,
                            expert_gate_, F, grouped, gate_in.q8);
        const RoundedInput up_in = rounded_input(in, m.up.matrix);
        cuda::matmul_routed(ctx_, m.up, routes, n_routes, k, up_in.data, in.stride, expert_up_, F,
                            grouped, up_in.q8);
    }
    if (grouped == nullptr && cuda::routed_glu_fits(m.down)) {
        // Decode: the down projection makes act(gate) · up and its codes itself, a launch fewer.
        cuda::matmul_routed_glu(ctx_, m.down, routes, n_routes, m.activation, expert_gate_,
                                expert_up_, F, expert_down_, E);
        return {expert_down_, E, routes, k};
    }
    const cuda::DeviceRows gate{expert_gate_, n_routes, F, F}, up{expert_up_, n_routes, F, F};
    // act(gate) · up through the down projection's activation type (with its q8 codes where it
    // has them, in the same pass), into the gate buffer: each value is read and then written by
    // one thread.
    const GgmlType down_type = m.down.matrix.format->dot_type;
    const cuda::Q8Rows* down_q8 = cuda::has_q8_codes(down_type) ? &expert_q8_ : nullptr;
    if (down_q8 != nullptr) {
        cuda::glu_round_activations(m.activation, gate, up, down_type, gate, *down_q8, st);
    } else {
        cuda::glu(m.activation, gate, up, gate, st);
        if (down_type != GgmlType::kF32) cuda::round_activations(gate, down_type, gate, st);
    }
    // The routes are settled by now: gate and up ran since they were written.
    cuda::matmul_routed(ctx_, m.down, routes, n_routes, 1, expert_gate_, F, expert_down_, E,
                        grouped, down_q8, true);
    return {expert_down_, E, routes, k};
}

void GpuBackend::moe_sum(const cuda::RoutedRows& outputs, Act out, bool defer_sum) {
    if (defer_sum && cuda::residual_norm_fits(out.cols)) {
        pending_sum_ = {out.data, outputs};
        return;
    }
    const cuda::OpProfile::Scope scope(profile_, "moe sum", stream_.get());
    cuda::moe_weighted_sum(outputs, rows(out), stream_.get());
}

void GpuBackend::matmul_heads(const ExpertMatrix& w, int n_heads, Act in, int64_t in_head_stride,
                              Act out, int64_t out_head_stride) {
    // Row t · H + h of the heads' inputs is a route of token row t to "expert" h: the routed
    // products (matrix-vector per route for decode, tiles per head for prefill) over them.
    const int n = in.rows, n_rows = n * n_heads;
    const int64_t cols = w.matrix.cols;
    const GgmlType type = w.matrix.format->dot_type;
    const FormatTraits& act = format_of(type);
    if (cols % act.block_size != 0)
        fail("matmul_heads: heads of {} values for {} activations", cols, act.name);
    if (head_routes_ == nullptr || n_rows > head_groups_.max_routes)
        fail("matmul_heads: {} heads of {} rows (the backend was made for {})", n_heads, n,
             head_groups_.max_routes);
    if (out.stride != n_heads * out_head_stride)
        fail("matmul_heads: output heads {} apart in rows of {} (the GPU needs them to tile the "
             "rows)",
             out_head_stride, out.stride);
    written(out);
    const cudaStream_t st = stream_.get();
    const cuda::OpProfile::Scope scope(profile_, "matmul_heads", st);
    // Each head's input through the weights' activation type on its own, packed as rows of
    // `cols` in rounded_ (blocks never straddle two heads: the check above); f32 weights read
    // the input in place where its heads tile the rows (rows of whole float4s, which the tiles
    // load).
    const bool tiled_rows = in.stride == n_heads * in_head_stride;
    const bool in_place = type == GgmlType::kF32 && tiled_rows && in_head_stride % 4 == 0 &&
                          reinterpret_cast<uintptr_t>(in.data) % 16 == 0;
    const float* x = in.data;
    int64_t x_stride = in_head_stride;
    cuda::Q8Rows codes;
    const cuda::Q8Rows* xq = nullptr;
    if (!in_place) {
        const bool has_codes = cuda::has_q8_codes(type);
        codes = rounded_q8_;
        codes.q_stride = cols;  // bytes: one code per value
        codes.d_stride = (cols + 31) / 32;
        if (tiled_rows) {
            cuda::round_activations({in.data, n_rows, cols, in_head_stride}, type,
                                    {rounded_, n_rows, cols, cols}, st,
                                    has_codes ? &codes : nullptr);
        } else {
            for (int h = 0; h < n_heads; ++h) {
                cuda::Q8Rows head = codes;
                head.q += h * codes.q_stride;
                head.d += h * codes.d_stride;
                head.q_stride *= n_heads;
                head.d_stride *= n_heads;
                cuda::round_activations({in.data + h * in_head_stride, n, cols, in.stride}, type,
                                        {rounded_ + h * cols, n, cols, n_heads * cols}, st,
                                        has_codes ? &head : nullptr);
            }
        }
        rounded_from_ = nullptr;  // rounded_ holds no remembered input now
        x = rounded_;
        x_stride = cols;
        xq = has_codes ? &codes : nullptr;
    }
    cuda::ExpertGroups groups;
    const cuda::ExpertGroups* grouped = nullptr;
    if (n > cuda::kSmallBatch) {
        groups = cuda::group_routes(head_routes_, n_rows, n_heads, head_groups_, st);
        grouped = &groups;
    }
    cuda::matmul_routed(ctx_, w, head_routes_, n_rows, 1, x, x_stride, out.data, out_head_stride,
                        grouped, xq, true);  // head_routes_ never change
}

void GpuBackend::scale(Act x, float s) {
    written(x);
    const cuda::OpProfile::Scope scope(profile_, "scale", stream_.get());
    cuda::scale_rows(rows(x), s, stream_.get());
}

void GpuBackend::mul(Act x, const WeightVector& w) {
    if (w.size != x.cols && w.size != 1)
        fail("mul: a vector of {} values for rows of {}", w.size, x.cols);
    written(x);
    const cuda::OpProfile::Scope scope(profile_, "mul", stream_.get());
    cuda::mul_rows(rows(x), w.data, w.size, stream_.get());
}

void GpuBackend::softcap(Act x, float cap) {
    written(x);
    const cuda::OpProfile::Scope scope(profile_, "softcap", stream_.get());
    cuda::softcap_rows(rows(x), cap, stream_.get());
}

void GpuBackend::copy(Act src, Act dst) {
    if (src.rows != dst.rows || src.cols != dst.cols)
        fail("copy: {} x {} into {} x {}", src.rows, src.cols, dst.rows, dst.cols);
    written(dst);
    const cuda::OpProfile::Scope scope(profile_, "copy", stream_.get());
    cuda::copy_rows(rows(src), rows(dst), stream_.get());
}

void GpuBackend::sigmoid(Act x) {
    written(x);
    const cuda::OpProfile::Scope scope(profile_, "sigmoid", stream_.get());
    cuda::sigmoid(rows(x), stream_.get());
}

void GpuBackend::mul_sigmoid(Act x, Act gate) {
    if (gate.cols != x.cols && gate.cols != 1)
        fail("mul_sigmoid: a gate of {} columns for rows of {}", gate.cols, x.cols);
    written(x);
    const cuda::OpProfile::Scope scope(profile_, "mul_sigmoid", stream_.get());
    cuda::mul_sigmoid(rows(x), rows(gate), stream_.get());
}

void GpuBackend::l2_norm_heads(Act x, int head_dim, float eps) {
    written(x);
    const cuda::OpProfile::Scope scope(profile_, "l2_norm_heads", stream_.get());
    cuda::l2_norm_heads(rows(x), head_dim, eps, stream_.get());
}

void GpuBackend::ssm_decay(Act x, const WeightVector& bias, const WeightVector& a) {
    written(x);
    const cuda::OpProfile::Scope scope(profile_, "ssm_decay", stream_.get());
    cuda::ssm_decay(rows(x), bias.data, a.data, stream_.get());
}

void GpuBackend::short_conv(int layer, Act x, Act out) {
    written(out);
    const cuda::OpProfile::Scope scope(profile_, "short_conv", stream_.get());
    cuda::short_conv(rows(x), weights_.layers[layer].ssm_conv.data, c_.delta.conv_kernel,
                     recurrent_batch(x.rows), recurrent_state(layer, true), rows(out),
                     stream_.get());
}

void GpuBackend::delta_net(int layer, Act q, Act k, Act v, Act g, Act beta, Act out) {
    written(out);
    const cuda::OpProfile::Scope scope(profile_, "delta_net", stream_.get());
    const ModelConfig::DeltaNet& d = c_.delta;
    cuda::delta_net(rows(q), rows(k), rows(v), rows(g), rows(beta), d.n_k_heads, d.n_v_heads,
                    d.head_dim, 1.0f / std::sqrt(static_cast<float>(d.head_dim)),
                    recurrent_batch(q.rows), recurrent_state(layer, false), rows(out),
                    stream_.get());
}

void GpuBackend::gather_logit_rows(Act x, Act out) {
    written(out);
    const cuda::OpProfile::Scope scope(profile_, "gather", stream_.get());
    cuda::gather_rows(rows(x), logit_rows_, rows(out), stream_.get());
}

}  // namespace tandem
