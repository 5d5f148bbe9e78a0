/* bench_recompute.c - activation recomputation (pt_recompute): activation memory and step time of
   a GPT training step with recompute none, selective and full, one JSON line per mode:

   {"bench":"recompute","config":"...","recompute":"full","activation_bytes":...,"step_s":...,...}

   activation_bytes: pt_mem(ctx).activations after the timed steps (the graph's arena and gradient
   blocks, and the recompute scratch), in the steady state; graph_bytes: pt_graph_bytes (the graph's
   own); mem_peak_bytes: pt_mem peak_total (parameters, gradients and AdamW state included);
   act_ratio / time_ratio: against none. The three modes train the same model side by side in
   contexts of their own, their steps interleaved (machine load falls on all three alike);
   same_loss says each mode's losses equal none's, bit for bit.

   bench_recompute [L12|quick] [steps]
     L12   12 layers, width 768, 12 heads, T = 1024, byte vocabulary (256), batch 1 (default)
     quick 4 layers, width 128, 4 heads, T = 256, byte vocabulary, batch 2 (for tests)
   steps: timed steps per mode (default 3, after one warm-up); the median is reported.
   Build: cc -O3 -march=native -fopenmp -I. bench/bench_recompute.c -o build/bench_recompute -lm */
#define PTRAIN_IMPLEMENTATION
#include "ptrain.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"

typedef struct mode_run {
    pt_ctx *ctx;
    pt_gpt *m;
    pt_optim *opt;
    pt_graph *g;
    double t[32];
    float loss[33];
} mode_run;

int main(int argc, char **argv) {
    const char *which = argc > 1 ? argv[1] : "L12", *names[3] = {"none", "selective", "full"};
    int steps = argc > 2 ? atoi(argv[2]) : 3, B, T, s, k, i;
    pt_gpt_config cfg;
    mode_run r[3];
    int32_t *ids;
    double med[3];
    char config[128];
    memset(&cfg, 0, sizeof cfg);
    if (!strcmp(which, "L12")) cfg.layers = 12, cfg.width = 768, cfg.heads = 12, B = 1, T = 1024;
    else if (!strcmp(which, "quick")) cfg.layers = 4, cfg.width = 128, cfg.heads = 4, B = 2, T = 256;
    else {
        fprintf(stderr, "bench_recompute: unknown config '%s' (expected L12 or quick)\n", which);
        return 2;
    }
    if (steps < 1 || steps > 32) steps = 3;
    cfg.vocab = 256, cfg.max_seq = T;
    snprintf(config, sizeof config, "%s: %d layers, width %d, T %d, vocab 256, batch %d", which, cfg.layers, cfg.width, T, B);
    ids = (int32_t *)malloc(sizeof(int32_t) * (size_t)(B * (T + 1)));
    if (!ids) return 1;
    {
        pt_rng rng = pt_rng_seed(7);
        for (i = 0; i < B * (T + 1); i++) ids[i] = (int32_t)(pt_rng_u32(&rng) % 256u);
    }
    for (k = 0; k < 3; k++) {
        pt_desc d;
        pt_optim_desc od;
        memset(&d, 0, sizeof d);
        d.seed = 1;
        memset(&od, 0, sizeof od);
        od.kind = PT_OPTIM_ADAMW, od.lr = 1e-4f, od.weight_decay = 0.1f, od.clip_norm = 1.0f;
        cfg.recompute = k;
        memset(&r[k], 0, sizeof r[k]);
        if (!(r[k].ctx = pt_init(&d)) || !(r[k].m = pt_gpt_new(r[k].ctx, &cfg)) || !(r[k].opt = pt_optim_new(r[k].ctx, &od)) ||
            !(r[k].g = pt_graph_new(r[k].ctx))) {
            fprintf(stderr, "bench_recompute: %s\n", r[k].ctx ? pt_error(r[k].ctx) : "pt_init failed");
            return 1;
        }
    }
    for (s = -1; s < steps; s++)
        for (k = 0; k < 3; k++) {
            double t0 = pt_time();
            pt_tensor *l = gpt_batch_loss(r[k].g, r[k].m, ids, ids + B, B, T);
            pt_zero_grad(r[k].ctx);
            if (!l || pt_backward(r[k].g, l) != PT_OK) {
                fprintf(stderr, "bench_recompute: %s\n", pt_error(r[k].ctx));
                return 1;
            }
            r[k].loss[s + 1] = pt_item(l);
            pt_optim_step(r[k].opt, 1e-4f);
            if (s >= 0) r[k].t[s] = pt_time() - t0;
        }
    for (k = 0; k < 3; k++) med[k] = median(r[k].t, steps);
    for (k = 0; k < 3; k++) {
        pt_mem_stats ms = pt_mem(r[k].ctx), m0 = pt_mem(r[0].ctx);
        printf("{\"bench\":\"recompute\",\"config\":\"%s\",\"recompute\":\"%s\",\"activation_bytes\":%lld,\"step_s\":%.4f,\"graph_bytes\":%lld,"
               "\"mem_peak_bytes\":%lld,\"act_ratio\":%.3f,\"time_ratio\":%.3f,\"threads\":%d,\"same_loss\":%s}\n",
               config, names[k], (long long)ms.activations, med[k], (long long)pt_graph_bytes(r[k].g), (long long)ms.peak_total,
               (double)ms.activations / (double)m0.activations, med[k] / med[0], pt_threads(r[k].ctx),
               memcmp(r[k].loss, r[0].loss, sizeof(float) * (size_t)(steps + 1)) ? "false" : "true");
    }
    fflush(stdout);
    for (k = 0; k < 3; k++) {
        pt_optim_free(r[k].opt);
        pt_graph_free(r[k].g);
        pt_gpt_free(r[k].m);
        pt_shutdown(r[k].ctx);
    }
    free(ids);
    return 0;
}
