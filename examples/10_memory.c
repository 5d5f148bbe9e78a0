/* 10_memory.c - where the memory of a training rank goes, and what each technique removes.

   Build: mpicc -O2 -fopenmp -DPTRAIN_MPI -I. examples/10_memory.c -o build/10_memory -lm
   Run: mpirun -np 4 --oversubscribe ./build/10_memory

   What it teaches: the bytes one rank holds while it trains a GPT, by kind, and which technique
   takes which kind away. Every row of the table is a real run: a fresh context, model, AdamW and DP
   reducer on a grid of dp x tp 2 ranks (dp 2 x tp 2 on 4 ranks), trained for --steps steps (2) on random
   token ids (memory does not depend on their values); then what the framework's accounting counts
   (pt_mem, and pt_dp_stats for the reducer's own buffers), next to what pt_mem_estimate predicted
   for the same config and layout before anything ran.

   The kinds (f32 everywhere: 4 bytes a number):
   - parameters: this rank's slice of the weights (TP splits the matrices and the vocabulary over
     the tp ranks; the positions and the norms are replicated);
   - gradients: one number per parameter (the gradient slab);
   - optimizer state: AdamW keeps two moments per parameter, twice the parameters;
   - activations: what the forward keeps for the backward. Per block and token about 16-18 widths
     of numbers, plus the logits (one row of vocab / tp per token) and their gradient blocks. They
     live in the graph's arena, one chunk of at least 64 MiB (a smaller pass still holds 64 MiB)
     reused every step, and in a pool of gradient blocks;
   - workspace (work): kernel scratch (ids, targets, the attention backward's tiles per thread);
   - dp buf: the DP reducer's buffers outside pt_mem (staging ring, ZeRO-2 gradient shard);
   - total: all of them now, after the steps; peak: the high-water mark, reached in the first
     step while the arena was still made of 64 MiB chunks, or when the optimizer's full moments
     existed before ZeRO cut them.

   The techniques, each alone against the baseline (f32, nothing on):
   - ZeRO-1 (pt_dp_zero(dp, opt, 1)): each DP rank keeps the moments of its 1/dp of the slab only;
   - ZeRO-2 (stage 2): the gradients are also reduce-scattered into 1/dp shards and the full
     gradient slab is freed: a rank keeps its shard plus the bucket buffers that gradients
     accumulate in during backward (up to 3 shared ones, and one of its own for the tied embedding,
     complete only at the end of backward). On a model this small those buffers are more than the
     shard saves (grads 15.4 MiB against 10.3 here): ZeRO-2 pays when the slab is many buckets
     large and dp is large (see pt_dp_zero, tools/ptmem);
   - ZeRO-3 (stage 3): the parameters are sharded too: between uses a rank keeps its 1/dp of the
     slab, and each block's parameters are all-gathered just before the block runs (the next
     block's prefetched meanwhile) and released after it, in backward again; params shows what is
     held after the step (the shard), the peak what was held in use as well;
   - recompute selective / full (cfg.recompute): the backward re-runs the cheap ops of each block
     (layernorms, GELU, dropout, an add) / the whole block instead of keeping their outputs -- the
     same losses and gradients, bit for bit, for more compute (full: one more forward per block);
     what is re-run lives in a scratch arena shared by the graphs (counted in activations);
   - sequence parallelism (cfg.seq_parallel, needs tp >= 2): the norms, dropout and residual
     stream, which TP alone keeps whole on every TP rank, hold T/tp positions per rank;
   - chunked cross-entropy (cfg.loss_chunk): the head and the loss fused over --loss-chunk rows at
     a time, so the [tokens, vocab/tp] logits never exist; it pays with a large vocabulary;
   - bf16 activations (precision bf16): the matrix products on bf16 inputs, and each block's kept
     activations stored in bf16 (half the bytes; the residual stream and the statistics stay f32,
     one block's f32 values live in the scratch arena while it runs); parameters, gradients and the
     optimizer stay f32 (not in this version: bf16 weight copies, bf16 gathers under ZeRO-3);
   - the last row has them together (ZeRO-1, full recomputation, sequence parallelism, chunks).
   ZeRO-1/2/3 shrink what is proportional to the model, recomputation, sequence parallelism and
   chunks what is proportional to the tokens: which pays depends on which dominates. On the
   defaults the activations are four fifths of the total, so the token techniques pay and ZeRO
   little; a large model on few tokens per rank is the other way round (tools/ptmem shows any
   config without running it). Below 64 MiB a pass saves nothing more: the arena's chunk stays.

   The estimate is not a model: pt_mem_estimate runs the same constructors and ops on a backend that
   counts bytes without holding data, so it equals the measurement (tools/ptmem prints it for any
   layout without a grid; docs/memory.md). Each row prints `estimate` then `measured` (MiB on the
   largest rank; under ZeRO the DP rank with the largest shard), the measured line ending with the
   step time and the total against the baseline's; the program ends with how many rows matched to
   the byte.

   Flags: --steps (2) --seed --batch (global, 16) --seq (256) --layers (4) --width (256)
   --heads (8) as in the other tutorials (the GPT of 03), --vocab V (8192, a BPE-sized vocabulary;
   03's bytes would make the logits too small to matter), --loss-chunk R (256 rows). The layout:
   tp 2, dp the rest of the world (>= 2). On 2 cores shared with other work the defaults took
   56-93 s, and --layers 6 --width 32 --heads 2 --seq 128 --batch 96 --vocab 512 14-19 s. */
#define PTRAIN_IMPLEMENTATION
#define PTRAIN_HARNESS
#include "ptrain.h"
#ifdef PTRAIN_MPI
#include <mpi.h> /* MPI_Allreduce below (a program built against an implementation compiled apart gets ptrain.h's declarations only) */
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* one row of the table: what it turns on */
typedef struct technique {
    const char *name;
    int zero, recompute, seq_parallel, chunk;
    int precision; /* PT_BF16: bf16 precision, whose blocks keep their activations in 16 bits (0: --precision) */
} technique;

/* the columns: bytes by kind, then the step time (us, measured only) */
enum { PARAMS, GRADS, OPTIM, ACT, WORK, DPBUF, TOTAL, PEAK, NKIND, STEP_US = NKIND, NCOL };

typedef struct setup {
    pt_args a;
    const pt_dist *d;
    int vocab, chunk;
} setup;

static double mib(int64_t b) { return (double)b / 1048576.0; }

/* the GPT of the flags with technique t on */
static pt_gpt_config config_of(const setup *s, const technique *t) {
    pt_gpt_config cfg = pt_args_gpt(&s->a, s->vocab);
    cfg.recompute = t->recompute, cfg.seq_parallel = t->seq_parallel, cfg.loss_chunk = t->chunk ? s->chunk : 0;
    return cfg;
}

/* the prediction for this layout: one micro-batch of this DP rank's rows per step, no pipeline */
static int estimate(const setup *s, const technique *t, int threads, int64_t *e, char *err, size_t n) {
    pt_layout lay = pt_dist_layout(s->d);
    pt_gpt_config cfg = config_of(s, t);
    pt_mem_plan plan;
    pt_mem_estimate_out o;
    memset(&plan, 0, sizeof plan);
    plan.dp = lay.dp, plan.tp = lay.tp, plan.pp = 1, plan.zero = t->zero, plan.micro_batches = 1;
    plan.batch = (int)s->a.batch / lay.dp, plan.seq = (int)s->a.seq, plan.optim = PT_OPTIM_ADAMW, plan.threads = threads;
    plan.precision = t->precision ? t->precision : s->a.precision;
    if (pt_mem_estimate(&cfg, &plan, 0, &o, err, n) != PT_OK) return 0;
    e[PARAMS] = o.params, e[GRADS] = o.grads, e[OPTIM] = o.optim, e[ACT] = o.activations, e[WORK] = o.workspace;
    e[DPBUF] = o.dp_extra, e[TOTAL] = o.total + o.dp_extra, e[PEAK] = o.peak_total + o.dp_extra;
    return 1;
}

/* what the accounting counts now, the largest over the ranks (kind by kind; the rank with the
   largest ZeRO shard has the largest of each) */
static void measure(const setup *s, pt_ctx *ctx, const pt_dp *dp, double step_s, int64_t *m) {
    pt_mem_stats ms = pt_mem(ctx);
    int64_t mine[NCOL];
    mine[PARAMS] = ms.params, mine[GRADS] = ms.grads, mine[OPTIM] = ms.optim, mine[ACT] = ms.activations, mine[WORK] = ms.workspace;
    mine[DPBUF] = pt_dp_stats_get(dp).extra_bytes;
    mine[TOTAL] = ms.params + ms.grads + ms.optim + ms.activations + ms.workspace + mine[DPBUF];
    mine[PEAK] = ms.peak_total + mine[DPBUF];
    mine[STEP_US] = (int64_t)(step_s * 1e6);
    memcpy(m, mine, sizeof mine);
#ifdef PTRAIN_MPI
    MPI_Allreduce(mine, m, NCOL, MPI_INT64_T, MPI_MAX, *(MPI_Comm *)pt_dist_comm(s->d, PT_COMM_WORLD));
#else
    (void)s;
#endif
}

/* One row: a fresh context, model, optimizer and reducer with technique t, --steps steps of random
   ids (the same on the TP ranks of a DP rank), then the measurement into m. */
static int train(const setup *s, const technique *t, int64_t *m, int *threads, char *err, size_t n) {
    pt_coords me = pt_dist_coords(s->d);
    int rows = (int)s->a.batch / pt_dist_layout(s->d).dp, T = (int)s->a.seq, i, ok;
    int32_t *ids = (int32_t *)malloc(sizeof(int32_t) * (size_t)rows * T), *tg = (int32_t *)malloc(sizeof(int32_t) * (size_t)rows * T);
    pt_rng rng = pt_rng_seed((uint64_t)s->a.seed * 1000 + (uint64_t)me.dp);
    pt_gpt_config cfg = config_of(s, t);
    pt_optim_desc od = pt_args_adamw(&s->a);
    pt_desc desc;
    pt_ctx *ctx;
    pt_gpt *model = NULL;
    pt_optim *opt = NULL;
    pt_dp *dp = NULL;
    pt_graph *g = NULL;
    double t0 = 0, step_s = 0;
    int64_t step;
    memset(&desc, 0, sizeof desc);
    desc.seed = (uint64_t)s->a.seed, desc.dist = s->d, desc.device = "cpu", desc.precision = t->precision ? t->precision : s->a.precision;
    ctx = pt_init(&desc);
    if (ctx && ids && tg && (model = pt_gpt_new(ctx, &cfg)) != NULL && (opt = pt_optim_new(ctx, &od)) != NULL &&
        (dp = pt_dp_new(ctx, s->d, 0)) != NULL && (!t->zero || pt_dp_zero(dp, opt, t->zero) == PT_OK))
        g = pt_graph_new(ctx);
    ok = pt_dist_agree(s->d, g && pt_status_get(ctx) == PT_OK);
    for (step = 0; ok && step < s->a.steps; step++) {
        pt_tensor *x, *y;
        for (i = 0; i < rows * T; i++) ids[i] = (int32_t)(pt_rng_u32(&rng) % (uint32_t)s->vocab), tg[i] = (int32_t)(pt_rng_u32(&rng) % (uint32_t)s->vocab);
        t0 = pt_time();
        pt_graph_reset(g); /* the arena is kept: the next pass reuses it */
        x = pt_tensor_new(g, PT_I32, 2, rows, T, 0, 0), y = pt_tensor_new(g, PT_I32, 2, rows, T, 0, 0);
        pt_tensor_write(x, ids), pt_tensor_write(y, tg);
        pt_zero_grad(ctx);
        pt_dp_begin_step(dp, 1);
        pt_backward(g, pt_gpt_loss(g, model, x, y));
        pt_dp_finish(dp);
        pt_optim_step(opt, s->a.lr);
        step_s = pt_time() - t0;
        ok = pt_dist_agree(s->d, pt_status_get(ctx) == PT_OK);
    }
    if (ok) measure(s, ctx, dp, step_s, m), *threads = pt_threads(ctx);
    else snprintf(err, n, "%s", ctx && pt_error(ctx)[0] ? pt_error(ctx) : "failed on another rank");
    pt_dp_free(dp);
    pt_graph_free(g);
    pt_optim_free(opt);
    pt_gpt_free(model);
    pt_shutdown(ctx);
    free(ids);
    free(tg);
    return ok;
}

/* the two lines of a row: the estimate, then the measurement (with the step time and the total
   against the baseline's) */
static void print_row(const technique *t, const int64_t *e, const int64_t *m, int64_t base_total) {
    int k;
    printf("%-28s estimate", t->name);
    for (k = 0; k < NKIND; k++) printf(" %8.2f", mib(e[k]));
    printf("\n%-28s measured", "");
    for (k = 0; k < NKIND; k++) printf(" %8.2f", mib(m[k]));
    printf("   step %.0f ms, total %+.1f%% vs baseline\n", (double)m[STEP_US] / 1e3, 100.0 * (double)(m[TOTAL] - base_total) / (double)base_total);
    fflush(stdout);
}

int main(int argc, char **argv) {
    static const technique rows[] = {
        {"baseline f32", 0, 0, 0, 0, 0},
        {"ZeRO-1", 1, 0, 0, 0, 0},
        {"ZeRO-2", 2, 0, 0, 0, 0},
        {"ZeRO-3", 3, 0, 0, 0, 0},
        {"recompute selective", 0, PT_RECOMPUTE_SELECTIVE, 0, 0, 0},
        {"recompute full", 0, PT_RECOMPUTE_FULL, 0, 0, 0},
        {"sequence parallelism", 0, 0, 1, 0, 0},
        {"chunked cross-entropy", 0, 0, 0, 1, 0},
        {"bf16 activations", 0, 0, 0, 0, PT_BF16},
        {"ZeRO-1+full+seq.par.+chunks", 1, PT_RECOMPUTE_FULL, 1, 1, 0},
    };
    setup s;
    pt_layout lay = {0, 2, 1, 0};
    pt_dist *d;
    char err[1024];
    int64_t v, e[NKIND], m[NCOL], base_total = 0;
    int i, k, rank, threads = 1, exact = 0, nrows = (int)(sizeof rows / sizeof rows[0]), ok = 1;
    memset(&s, 0, sizeof s);
    s.a.steps = 2, s.a.seed = 10, s.a.batch = 16, s.a.seq = 256, s.a.layers = 4, s.a.width = 256, s.a.heads = 8, s.a.lr = 1e-3f;
    s.vocab = 8192, s.chunk = 256;
    if ((argc = pt_args_parse(&s.a, argc, argv, err, sizeof err)) < 0) {
        fprintf(stderr, "10_memory: %s (try --help)\n", err);
        return 2;
    }
    for (i = 1; i < argc; i += 2) { /* this program's flags, each with a value */
        int vocab = !strcmp(argv[i], "--vocab");
        if (i + 1 >= argc || (!vocab && strcmp(argv[i], "--loss-chunk"))) {
            fprintf(stderr, "10_memory: unknown flag or missing value: '%s' (try --help)\n", argv[i]);
            return 2;
        }
        if (pt_args_int(argv[i], argv[i + 1], vocab ? 2 : 1, 1 << 20, &v, err, sizeof err) != 0) {
            fprintf(stderr, "10_memory: %s\n", err);
            return 2;
        }
        *(vocab ? &s.vocab : &s.chunk) = (int)v;
    }
    if (s.a.help) {
        pt_args_usage(&s.a, "10_memory", "  --vocab V       vocabulary size (8192)\n  --loss-chunk R  rows per chunk of the chunked cross-entropy (256)");
        return 0;
    }
    if (s.a.steps < 2) { /* the first step's arena is still in 64 MiB chunks: the estimate is of the steps after it */
        fprintf(stderr, "10_memory: --steps %lld: expected >= 2 (the second step is the steady state the estimate predicts)\n", (long long)s.a.steps);
        return 2;
    }
    if (s.a.device && strcmp(s.a.device, "cpu")) {
        fprintf(stderr, "10_memory: --device %s: this tutorial measures the CPU backend (the estimate's)\n", s.a.device);
        return 2;
    }
    if (!(d = pt_dist_init(&argc, &argv, &lay, err, sizeof err))) {
        fprintf(stderr, "10_memory: %s\n", err);
        return 1;
    }
    s.d = d, lay = pt_dist_layout(d), rank = pt_dist_rank(d);
    if (lay.dp < 2) snprintf(err, sizeof err, "needs dp >= 2 for ZeRO: 4 ranks or more (tp is 2), found %d", pt_dist_size(d));
    else if (s.a.batch % lay.dp) snprintf(err, sizeof err, "--batch %lld (global) must split over dp = %d ranks", (long long)s.a.batch, lay.dp);
    else snprintf(err, sizeof err, "--seq %lld must split over tp = %d ranks (sequence parallelism)", (long long)s.a.seq, lay.tp);
    if (!pt_dist_agree_msg(d, lay.dp >= 2 && s.a.batch % lay.dp == 0 && s.a.seq % lay.tp == 0, err, sizeof err)) {
        if (rank == 0) fprintf(stderr, "10_memory: %s\n", err);
        pt_dist_finalize(d);
        return 2;
    }
    if (rank == 0) {
        printf("model: GPT, %lld layers, width %lld, %lld heads, vocab %d; %lld x %lld tokens per DP rank per step, AdamW, f32 storage "
               "(matrix products on %s inputs); layout dp %d x tp %d; %lld steps per row\n", (long long)s.a.layers, (long long)s.a.width,
               (long long)s.a.heads, s.vocab, (long long)s.a.batch / lay.dp, (long long)s.a.seq,
               pt_args_precision_name(s.a.precision), lay.dp, lay.tp, (long long)s.a.steps);
        printf("%-28s %8s %8s %8s %8s %8s %8s %8s %8s %8s\n", "MiB on the largest rank", "", "params", "grads", "optim", "activ.", "work",
               "dp buf", "total", "peak");
    }
    for (i = 0; i < nrows && ok; i++) {
        ok = train(&s, &rows[i], m, &threads, err, sizeof err);
        if (ok && rank == 0 && !estimate(&s, &rows[i], threads, e, err, sizeof err)) ok = 0;
        if (!pt_dist_agree_msg(d, ok, err, sizeof err)) {
            if (rank == 0) fprintf(stderr, "10_memory: %s: %s\n", rows[i].name, err);
            ok = 0;
        } else if (rank == 0) {
            int same = 1;
            for (k = 0; k < NKIND; k++) same &= e[k] == m[k];
            exact += same;
            if (i == 0) base_total = m[TOTAL];
            print_row(&rows[i], e, m, base_total);
        }
    }
    if (ok && rank == 0) printf("the estimate equals the measurement to the byte in every column in %d of %d rows\n", exact, nrows);
    pt_dist_finalize(d);
    return ok ? 0 : 1;
}
