/* bench_xent.c - the LM head and loss fused in chunks of rows (pt_gpt_config.loss_chunk,
   pt_linear_cross_entropy) against the unfused head (pt_linear, then pt_cross_entropy_ex), one JSON
   line per chunk size.

   bench_xent [A|B|C [steps [chunk...]]]   (defaults: C, 5 steps, chunk 64)

   Config C (bench.c's: vocab 50257 padded to 50304, 12 layers, width 768, B 4, T 64) is built twice
   from the same seed, one model without chunks and one with loss_chunk = chunk, in two contexts; after
   2 warm-up steps each, `steps` AdamW training steps alternate between the two (so both see the same
   machine load) and the medians are reported: step_s_unfused / step_s_chunked. The head alone (final
   norm output [B*T, C] through the head and the loss, forward + backward, median of 2 * steps) is
   timed the same way (head_s_*), since the step is mostly the blocks. Memory of each context after
   its last step (before the head alone runs): the graph's bytes (pt_graph_bytes: arena + pooled gradient blocks), its pass bytes
   (arena bytes one forward + backward allocates) and pt_mem's activations; logits_bytes is the
   [B*T, vocab_padded] f32 size the fused head does not allocate. loss_* are the last step's losses
   (the first step's are bit-identical; chunks smaller than B*T round dW's sum over rows differently,
   so after a few AdamW steps they differ in the 7th digit).
   Cost: backward runs the head's GEMM once more, and dW [V, C] is read and written once per chunk,
   so small chunks are slow (config C, 2 cores: head 1.5x at 64 rows, 2.8x at 32).
   Build: cc -O3 -march=native -fopenmp -I. bench/bench_xent.c -o build/bench_xent -lm */
#define PTRAIN_IMPLEMENTATION
#include "ptrain.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"

typedef struct run {
    pt_gpt_config cfg;
    pt_ctx *ctx;
    pt_gpt *m;
    pt_optim *opt;
    pt_graph *g, *gh; /* the step's graph; the head-only graph */
    float loss;
} run;

static void run_free(run *r) {
    pt_optim_free(r->opt);
    pt_graph_free(r->g);
    pt_graph_free(r->gh);
    pt_gpt_free(r->m);
    pt_shutdown(r->ctx);
}

static int run_new(run *r, const pt_gpt_config *cfg) {
    pt_desc d;
    pt_optim_desc od;
    memset(r, 0, sizeof *r);
    r->cfg = *cfg;
    memset(&d, 0, sizeof d);
    d.seed = 1;
    if (!(r->ctx = pt_init(&d))) return 1;
    memset(&od, 0, sizeof od);
    od.kind = PT_OPTIM_ADAMW, od.lr = 1e-4f, od.weight_decay = 0.1f, od.clip_norm = 1.0f;
    if (!(r->m = pt_gpt_new(r->ctx, cfg)) || !(r->opt = pt_optim_new(r->ctx, &od)) || !(r->g = pt_graph_new(r->ctx)) ||
        !(r->gh = pt_graph_new(r->ctx))) {
        fprintf(stderr, "bench_xent: %s\n", pt_error(r->ctx));
        return 1;
    }
    return 0;
}

/* one training step; its time in seconds, a negative number on error (printed) */
static double step(run *r, const int32_t *ids, int B, int T) {
    double t0 = pt_time();
    pt_tensor *l = gpt_batch_loss(r->g, r->m, ids, ids + B, B, T);
    pt_zero_grad(r->ctx);
    if (!l || pt_backward(r->g, l) != PT_OK) {
        fprintf(stderr, "bench_xent: %s\n", pt_error(r->ctx));
        return -1;
    }
    r->loss = pt_item(l);
    pt_optim_step(r->opt, 1e-4f);
    return pt_time() - t0;
}

/* the head and loss alone on a fixed [B*T, C] input: forward + backward time, negative on error */
static double head(run *r, const int32_t *tg, int B, int T) {
    pt_graph *g = r->gh;
    pt_tensor *x, *y, *l;
    double t0;
    pt_graph_reset(g);
    x = pt_full(g, 3, (const int64_t[]){B, T, r->cfg.width}, 0.01f);
    y = pt_tensor_new(g, PT_I32, 2, B, T, 0, 0);
    pt_tensor_write(y, tg);
    pt_requires_grad(x);
    t0 = pt_time();
    if (r->cfg.loss_chunk > 0) l = pt_linear_cross_entropy(g, x, r->m->lm_head, y, -1, r->cfg.vocab, r->cfg.loss_chunk);
    else l = pt_cross_entropy_ex(g, pt_linear(g, x, r->m->lm_head, NULL), y, -1, r->cfg.vocab);
    pt_zero_grad(r->ctx);
    if (!l || pt_backward(g, l) != PT_OK) {
        fprintf(stderr, "bench_xent: %s\n", pt_error(r->ctx));
        return -1;
    }
    return pt_time() - t0;
}

int main(int argc, char **argv) {
    const char *which = argc > 1 ? argv[1] : "C";
    int steps = argc > 2 ? atoi(argv[2]) : 5, nch = argc > 3 ? argc - 3 : 1, B, T, k, s, i;
    pt_gpt_config cfg;
    int32_t *ids;
    memset(&cfg, 0, sizeof cfg);
    if (!strcmp(which, "A")) cfg.vocab = 256, cfg.layers = 4, cfg.width = 256, cfg.heads = 8, B = 8, T = 256;
    else if (!strcmp(which, "B")) cfg.vocab = 512, cfg.layers = 6, cfg.width = 384, cfg.heads = 6, B = 8, T = 256;
    else if (!strcmp(which, "C")) cfg.vocab = 50257, cfg.vocab_padded = 50304, cfg.layers = 12, cfg.width = 768, cfg.heads = 12, B = 4, T = 64;
    else {
        fprintf(stderr, "bench_xent: unknown GPT config '%s' (expected A, B or C, as bench gpt)\n", which);
        return 2;
    }
    cfg.max_seq = !strcmp(which, "C") ? 1024 : T;
    if (steps < 1 || steps > 64) {
        fprintf(stderr, "bench_xent: steps %d (expected 1..64)\n", steps);
        return 2;
    }
    ids = (int32_t *)malloc(sizeof(int32_t) * (size_t)(B * (T + 1)));
    {
        pt_rng rng = pt_rng_seed(7);
        for (i = 0; ids && i < B * (T + 1); i++) ids[i] = (int32_t)(pt_rng_u32(&rng) % (uint32_t)cfg.vocab);
    }
    for (k = 0; ids && k < nch; k++) {
        int chunk = argc > 3 + k ? atoi(argv[3 + k]) : 64;
        run r[2];
        double ts[2][64], th[2][128], med[2], hmed[2];
        int64_t gb[2], pb[2], ab[2];
        int64_t vp = cfg.vocab_padded ? cfg.vocab_padded : (cfg.vocab + 63) / 64 * 64;
        if (chunk < 1) {
            fprintf(stderr, "bench_xent: chunk %d (expected rows per chunk >= 1)\n", chunk);
            return 2;
        }
        cfg.loss_chunk = 0;
        if (run_new(&r[0], &cfg)) return 1;
        cfg.loss_chunk = chunk;
        if (run_new(&r[1], &cfg)) return 1;
        for (s = -2; s < steps; s++) /* alternating: both runs see the same load */
            for (i = 0; i < 2; i++) {
                double t = step(&r[i], ids, B, T);
                if (t < 0) return 1;
                if (s >= 0) ts[i][s] = t;
            }
        for (i = 0; i < 2; i++) /* before the head-only graph allocates */
            gb[i] = pt_graph_bytes(r[i].g), pb[i] = r[i].g->dpass, ab[i] = pt_mem(r[i].ctx).activations;
        for (s = 0; s < 2 * steps; s++)
            for (i = 0; i < 2; i++)
                if ((th[i][s] = head(&r[i], ids + B, B, T)) < 0) return 1;
        for (i = 0; i < 2; i++) med[i] = median(ts[i], steps), hmed[i] = median(th[i], 2 * steps);
        printf("{\"bench\":\"xent_chunk\",\"config\":\"%s\",\"threads\":%d,\"B\":%d,\"T\":%d,\"vocab_padded\":%lld,\"loss_chunk\":%d,\"steps\":%d,"
               "\"step_s_unfused\":%.4f,\"step_s_chunked\":%.4f,\"step_ratio\":%.3f,\"head_s_unfused\":%.4f,\"head_s_chunked\":%.4f,\"head_ratio\":%.3f,"
               "\"logits_bytes\":%lld,\"graph_bytes_unfused\":%lld,\"graph_bytes_chunked\":%lld,\"pass_bytes_unfused\":%lld,\"pass_bytes_chunked\":%lld,"
               "\"act_bytes_unfused\":%lld,\"act_bytes_chunked\":%lld,\"loss_unfused\":%.7f,\"loss_chunked\":%.7f}\n",
               which, pt_threads(r[0].ctx), B, T, (long long)vp, chunk, steps, med[0], med[1], med[1] / med[0], hmed[0], hmed[1], hmed[1] / hmed[0],
               (long long)B * T * vp * 4, (long long)gb[0], (long long)gb[1], (long long)pb[0], (long long)pb[1], (long long)ab[0], (long long)ab[1],
               r[0].loss, r[1].loss);
        fflush(stdout);
        run_free(&r[0]);
        run_free(&r[1]);
    }
    free(ids);
    return ids ? 0 : 1;
}
