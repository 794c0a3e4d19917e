// ggml_moe: llama.cpp's routed-expert FFN (the graph of llm_graph_context::build_moe_ffn: up and
// gate mul_mat_id, swiglu, down mul_mat_id, routing weights, sum over the top-k) on ggml's CPU
// backend, timed per layer over the routes `tandem bench moe` writes, so both engines do the
// same work. Built by `tandem bench moe` at run time against the oracle kit's headers and
// shipped libraries (llama.cpp v0.4.0); the CPU variant is the one llama.cpp would load.
//
// Usage: ggml_moe LIBDIR STEPS_FILE THREADS [--no-repack]
// STEPS_FILE (little-endian, written by tandem bench moe):
//   int32 magic 0x45534d54 ('TMSE'), gate_up_type, down_type (ggml type ids), hidden, ffn,
//   experts, layers, top_k, n_batches; then per batch: int32 T, n_steps, float hidden[T × hidden],
//   and per step: int32 layer, int32 ids[T × top_k], float weights[T × top_k].
// Output, one line each: "variant NAME", "weights gate=BUFT up=BUFT down=BUFT",
// "batch T steps N median_us M mean_us A".
#define _GNU_SOURCE
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"

#define MAX_BATCHES 16

static void die(const char* what) {
    fprintf(stderr, "ggml_moe: %s\n", what);
    exit(1);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int32_t read_i32(FILE* f) {
    int32_t v;
    if (fread(&v, 4, 1, f) != 1) die("steps file is truncated");
    return v;
}

static void read_exact(FILE* f, void* dst, size_t bytes) {
    if (fread(dst, 1, bytes, f) != bytes) die("steps file is truncated");
}

// The libggml-cpu-<variant>.so that ggml_backend_load_all_from_path picked (by score, as
// llama.cpp does), from the loaded objects.
static char variant[128] = "unknown";
static int find_variant(struct dl_phdr_info* info, size_t size, void* data) {
    (void)size;
    (void)data;
    const char* p = info->dlpi_name ? strstr(info->dlpi_name, "libggml-cpu-") : NULL;
    if (p) {
        p += strlen("libggml-cpu-");
        const char* end = strstr(p, ".so");
        snprintf(variant, sizeof variant, "%.*s", end ? (int)(end - p) : (int)strlen(p), p);
    }
    return 0;
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float nrand(void) {
    // xorshift64*, then a sum of uniforms (shape is irrelevant for speed; only validity is).
    float s = 0;
    for (int i = 0; i < 4; i++) {
        rng ^= rng >> 12;
        rng ^= rng << 25;
        rng ^= rng >> 27;
        s += (float)((rng * 2685821657736338717ull) >> 40) / (float)(1 << 24) - 0.5f;
    }
    return s;
}

// Fills a stacked expert tensor [cols, rows, experts] of `type`: 16 quantized random rows tiled
// over all rows (the content does not change the speed, as in the kit's kern bench).
static void fill_weights(struct ggml_tensor* t, void* host) {
    const int64_t cols = t->ne[0], rows = t->ne[1] * t->ne[2];
    const size_t rs = ggml_row_size(t->type, cols);
    const int n_src = 16;
    float* x = malloc(sizeof(float) * cols * n_src);
    float* imatrix = malloc(sizeof(float) * cols);
    for (int64_t i = 0; i < cols * n_src; i++) x[i] = nrand();
    for (int64_t i = 0; i < cols; i++) imatrix[i] = 1.0f;
    ggml_quantize_init(t->type);
    uint8_t* dst = host;
    ggml_quantize_chunk(t->type, x, dst, 0, n_src, cols,
                        ggml_quantize_requires_imatrix(t->type) ? imatrix : NULL);
    for (int64_t r = n_src; r < rows; r++) memcpy(dst + r * rs, dst + (r % n_src) * rs, rs);
    free(x);
    free(imatrix);
}

// The first extra buffer type (CPU_REPACK, AMX, ...) whose supports_op accepts a mul_mat_id on
// this weight, as llama.cpp's weight_buft_supported decides; else the plain CPU buffer type.
static ggml_backend_buffer_type_t pick_buft(ggml_backend_dev_t dev,
                                            ggml_backend_buffer_type_t* extra,
                                            struct ggml_tensor* w, int top_k) {
    struct ggml_init_params ip = {ggml_tensor_overhead() * 8, NULL, true};
    for (; extra && *extra; extra++) {
        struct ggml_context* ctx = ggml_init(ip);
        struct ggml_tensor* b = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, w->ne[0], top_k, 512);
        struct ggml_tensor* ids = ggml_new_tensor_2d(ctx, GGML_TYPE_I32, top_k, 512);
        struct ggml_tensor* op = ggml_mul_mat_id(ctx, w, b, ids);
        w->buffer = ggml_backend_buft_alloc_buffer(*extra, 0);
        const int ok = ggml_backend_dev_supports_op(dev, op);
        ggml_backend_buffer_free(w->buffer);
        w->buffer = NULL;
        ggml_free(ctx);
        if (ok) return *extra;
    }
    return ggml_backend_cpu_buffer_type();
}

int main(int argc, char** argv) {
    if (argc < 4) die("usage: ggml_moe LIBDIR STEPS_FILE THREADS [--no-repack]");
    const char* libdir = argv[1];
    const int threads = atoi(argv[3]);
    const int repack = !(argc > 4 && !strcmp(argv[4], "--no-repack"));
    FILE* f = fopen(argv[2], "rb");
    if (!f) die("cannot open the steps file");
    if (read_i32(f) != 0x45534d54) die("not a steps file");
    const enum ggml_type gate_up_type = read_i32(f), down_type = read_i32(f);
    const int64_t hidden = read_i32(f), ffn = read_i32(f);
    const int experts = read_i32(f), layers = read_i32(f), top_k = read_i32(f);
    const int n_batches = read_i32(f);
    if (n_batches < 1 || n_batches > MAX_BATCHES || layers < 1 || top_k < 1)
        die("bad steps header");

    ggml_backend_load_all_from_path(libdir);
    dl_iterate_phdr(find_variant, NULL);
    ggml_backend_dev_t dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    if (!dev) die("no CPU backend in the library directory");
    ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(dev);
    ggml_backend_t backend = ggml_backend_dev_init(dev, NULL);
    ggml_backend_dev_get_extra_bufts_t get_extra =
        (ggml_backend_dev_get_extra_bufts_t)ggml_backend_reg_get_proc_address(
            reg, "ggml_backend_dev_get_extra_bufts");
    ggml_backend_buffer_type_t* extra = repack && get_extra ? get_extra(dev) : NULL;
    // A persistent thread pool, so every layer does not pay for starting threads (llama.cpp
    // without one starts them per graph; this is ggml's best case).
    typedef struct ggml_threadpool* (*tp_new_t)(struct ggml_threadpool_params*);
    typedef void (*set_tp_t)(ggml_backend_t, struct ggml_threadpool*);
    typedef void (*set_threads_t)(ggml_backend_t, int);
    tp_new_t tp_new = (tp_new_t)ggml_backend_reg_get_proc_address(reg, "ggml_threadpool_new");
    set_tp_t set_tp =
        (set_tp_t)ggml_backend_reg_get_proc_address(reg, "ggml_backend_cpu_set_threadpool");
    set_threads_t set_threads =
        (set_threads_t)ggml_backend_reg_get_proc_address(reg, "ggml_backend_set_n_threads");
    if (!tp_new || !set_tp || !set_threads) die("the CPU backend lacks the thread pool functions");
    set_threads(backend, threads);
    struct ggml_threadpool_params tpp = ggml_threadpool_params_default(threads);
    struct ggml_threadpool* tp = tp_new(&tpp);
    set_tp(backend, tp);

    // Weights: per layer gate, up [hidden, ffn, experts] and down [ffn, hidden, experts], each in
    // its own context so it can go to the buffer type llama.cpp would pick for it.
    struct ggml_init_params wp = {ggml_tensor_overhead() * 4, NULL, true};
    struct ggml_tensor** w = malloc(sizeof(*w) * 3 * layers);
    const char* buft_names[3] = {"", "", ""};
    for (int l = 0; l < layers; l++) {
        for (int m = 0; m < 3; m++) {
            struct ggml_context* ctx = ggml_init(wp);
            struct ggml_tensor* t =
                m < 2 ? ggml_new_tensor_3d(ctx, gate_up_type, hidden, ffn, experts)
                      : ggml_new_tensor_3d(ctx, down_type, ffn, hidden, experts);
            ggml_backend_buffer_type_t buft = pick_buft(dev, extra, t, top_k);
            buft_names[m] = ggml_backend_buft_name(buft);
            if (!ggml_backend_alloc_ctx_tensors_from_buft(ctx, buft))
                die("out of memory for the weights");
            void* host = malloc(ggml_nbytes(t));
            if (!host) die("out of memory for the weights");
            fill_weights(t, host);
            ggml_backend_tensor_set(t, host, 0, ggml_nbytes(t));  // repacks where the buffer does
            free(host);
            w[3 * l + m] = t;
        }
    }
    printf("variant %s\n", variant);
    printf("weights gate=%s up=%s down=%s\n", buft_names[0], buft_names[1], buft_names[2]);
    fflush(stdout);

    for (int b = 0; b < n_batches; b++) {
        const int T = read_i32(f), n_steps = read_i32(f);
        if (T < 1 || n_steps < 1) die("bad batch header");
        // Inputs in their own buffer; the graphs' intermediates in a graph allocator.
        struct ggml_init_params ip = {ggml_tensor_overhead() * 4, NULL, true};
        struct ggml_context* in_ctx = ggml_init(ip);
        struct ggml_tensor* x = ggml_new_tensor_2d(in_ctx, GGML_TYPE_F32, hidden, T);
        struct ggml_tensor* ids = ggml_new_tensor_2d(in_ctx, GGML_TYPE_I32, top_k, T);
        struct ggml_tensor* weights = ggml_new_tensor_3d(in_ctx, GGML_TYPE_F32, 1, top_k, T);
        ggml_backend_buffer_t in_buf = ggml_backend_alloc_ctx_tensors(in_ctx, backend);
        float* xs = malloc(sizeof(float) * hidden * T);
        read_exact(f, xs, sizeof(float) * hidden * T);
        ggml_backend_tensor_set(x, xs, 0, sizeof(float) * hidden * T);
        free(xs);

        const size_t graph_mem = ggml_tensor_overhead() * (16 + 2 * top_k) + ggml_graph_overhead();
        struct ggml_context** g_ctx = malloc(sizeof(*g_ctx) * layers);
        struct ggml_cgraph** graphs = malloc(sizeof(*graphs) * layers);
        ggml_gallocr_t* galloc = malloc(sizeof(*galloc) * layers);
        for (int l = 0; l < layers; l++) {
            struct ggml_init_params gp = {graph_mem, NULL, true};
            struct ggml_context* ctx = ggml_init(gp);
            struct ggml_tensor* cur = ggml_reshape_3d(ctx, x, hidden, 1, T);
            struct ggml_tensor* up = ggml_mul_mat_id(ctx, w[3 * l + 1], cur, ids);    // [ffn, k, T]
            struct ggml_tensor* gate = ggml_mul_mat_id(ctx, w[3 * l + 0], cur, ids);  // [ffn, k, T]
            struct ggml_tensor* act = ggml_swiglu_split(ctx, gate, up);
            struct ggml_tensor* out =
                ggml_mul_mat_id(ctx, w[3 * l + 2], act, ids);  // [hidden, k, T]
            out = ggml_mul(ctx, out, weights);
            struct ggml_cgraph* gf = ggml_new_graph(ctx);
            ggml_build_forward_expand(gf, out);
            struct ggml_tensor* sum = NULL;
            for (int j = 0; j < top_k; j++) {
                struct ggml_tensor* v =
                    ggml_view_2d(ctx, out, hidden, T, out->nb[2], j * out->nb[1]);
                ggml_build_forward_expand(gf, v);
                sum = sum ? ggml_add(ctx, sum, v) : v;
                ggml_build_forward_expand(gf, sum);
            }
            if (top_k == 1) sum = ggml_cont(ctx, sum);
            ggml_build_forward_expand(gf, sum);
            galloc[l] = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
            if (!ggml_gallocr_alloc_graph(galloc[l], gf)) die("cannot allocate the graph");
            g_ctx[l] = ctx;
            graphs[l] = gf;
        }

        int32_t* step_ids = malloc(sizeof(int32_t) * top_k * T);
        float* step_w = malloc(sizeof(float) * top_k * T);
        double* us = malloc(sizeof(double) * n_steps);
        for (int s = 0; s < n_steps; s++) {
            const int l = read_i32(f);
            if (l < 0 || l >= layers) die("bad layer in steps file");
            read_exact(f, step_ids, sizeof(int32_t) * top_k * T);
            read_exact(f, step_w, sizeof(float) * top_k * T);
            for (int i = 0; i < top_k * T; i++) {
                if (step_ids[i] < 0 || step_ids[i] >= experts) die("bad expert id in steps file");
            }
            ggml_backend_tensor_set(ids, step_ids, 0, sizeof(int32_t) * top_k * T);
            ggml_backend_tensor_set(weights, step_w, 0, sizeof(float) * top_k * T);
            const double t0 = now_s();
            if (ggml_backend_graph_compute(backend, graphs[l]) != GGML_STATUS_SUCCESS)
                die("graph compute failed");
            us[s] = (now_s() - t0) * 1e6;
        }
        // The steps file starts with one warm-up pass over the layers (its first `layers` steps).
        const int skip = n_steps > layers ? layers : 0;
        const int n = n_steps - skip;
        double mean = 0;
        for (int i = skip; i < n_steps; i++) mean += us[i];
        mean /= n;
        // Sort the timed steps for the median.
        for (int i = skip + 1; i < n_steps; i++) {
            double v = us[i];
            int j = i - 1;
            for (; j >= skip && us[j] > v; j--) us[j + 1] = us[j];
            us[j + 1] = v;
        }
        const double median =
            n % 2 ? us[skip + n / 2] : 0.5 * (us[skip + n / 2 - 1] + us[skip + n / 2]);
        printf("batch %d steps %d median_us %.3f mean_us %.3f\n", T, n, median, mean);
        fflush(stdout);
        for (int l = 0; l < layers; l++) {
            ggml_gallocr_free(galloc[l]);
            ggml_free(g_ctx[l]);
        }
        free(galloc);
        free(g_ctx);
        free(graphs);
        free(step_ids);
        free(step_w);
        free(us);
        ggml_backend_buffer_free(in_buf);
        ggml_free(in_ctx);
    }
    fclose(f);
    return 0;
}
