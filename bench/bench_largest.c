/* bench_largest.c - the largest GPT-2-shaped model that trains on this machine with 4 DP ranks, before
   (f32, ZeRO-0, no recomputation) and after (bf16 matrix products, ZeRO-3, full recomputation); one
   JSON line per run:

   {"bench":"largest_model","mode":"after","model":"gpt2-large","params":P,"precision":"bf16","zero":3,
    "recompute":"full","total_rss_bytes":...,"loss_first":...,"loss_last":...,...}

   The candidates are GPT-2's shapes (vocabulary 50257, 1024 positions): small 124M (12 x 768),
   medium 355M (24 x 1024), large 774M (36 x 1280), xl 1.56B (48 x 1600). Unless one is named, the
   run takes the largest whose predicted total over the ranks fits the budget: pt_mem_estimate's
   pt_mem peak of a rank (its set-up or its steps, whichever is larger) plus a measured base (the
   resident memory of a rank before the model exists: code, MPI, the thread team), times the ranks.
   Then it really trains: `steps` AdamW steps (lr 1e-3) on one fixed batch of B x T tokens per rank,
   which the model learns, so the loss falls if the training works. total_rss_bytes is the sum over
   the ranks of each one's peak resident set (VmHWM of /proc/self/status: every rank's own high-water
   mark, so their sum bounds the machine's at any moment from above); rss_per_rank_max the largest
   one. est_total_bytes: the prediction the choice used. loss_falls: loss_last < loss_first.

   mpirun -np 4 bench_largest MODE [MODEL] [steps] [budget_gib]
     MODE   after | before | quick (quick: a 2 x 64 model, vocabulary 256, for tests)
     MODEL  small | medium | large | xl | auto (default auto: the largest that fits the budget)
     steps  optimizer steps (default 10); budget_gib the machine's budget (default 22)
   Build: mpicc -O3 -march=native -fopenmp -DPTRAIN_MPI -I. bench/bench_largest.c -o build/bench_largest -lm */
#define PTRAIN_IMPLEMENTATION
#include "ptrain.h"

#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define T_SEQ 128 /* tokens per sequence; one sequence per rank */

typedef struct shape {
    const char *name;
    int layers, width, heads;
} shape;
static const shape SHAPES[] = {{"gpt2-small", 12, 768, 12}, {"gpt2-medium", 24, 1024, 16}, {"gpt2-large", 36, 1280, 20}, {"gpt2-xl", 48, 1600, 25}};
#define NSHAPES ((int)(sizeof SHAPES / sizeof SHAPES[0]))

/* this process's resident set now (VmRSS) or its high-water mark (VmHWM), bytes; 0 if unknown */
static double rss_bytes(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    double kb = 0;
    size_t n = strlen(key);
    if (!f) return 0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, n) && line[n] == ':') kb = atof(line + n + 1);
    fclose(f);
    return kb * 1024.0;
}
static double world_sum(const pt_dist *d, double x) {
    MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_DOUBLE, MPI_SUM, *(MPI_Comm *)pt_dist_comm(d, PT_COMM_WORLD));
    return x;
}
static double world_max(const pt_dist *d, double x) {
    MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_DOUBLE, MPI_MAX, *(MPI_Comm *)pt_dist_comm(d, PT_COMM_WORLD));
    return x;
}

static void config_of(pt_gpt_config *c, const shape *s, int quick, int recompute) {
    memset(c, 0, sizeof *c);
    c->vocab = quick ? 256 : 50257, c->max_seq = quick ? 64 : 1024;
    c->layers = s->layers, c->width = s->width, c->heads = s->heads;
    c->loss_chunk = 64; /* the vocabulary projection and loss in chunks of 64 rows: no full logits */
    c->recompute = recompute;
}
/* pt_mem_estimate's peak of one rank, bytes (-1 if the estimate fails) */
static double predicted_peak(const pt_gpt_config *c, int dp, int zero, int precision, int T) {
    pt_mem_plan pl;
    pt_mem_estimate_out o;
    char err[256];
    memset(&pl, 0, sizeof pl);
    pl.dp = dp, pl.zero = zero, pl.batch = 1, pl.seq = T, pl.optim = PT_OPTIM_ADAMW, pl.threads = 1, pl.precision = precision;
    if (pt_mem_estimate(c, &pl, -1, &o, err, sizeof err) != PT_OK) return -1;
    { /* the larger of the set-up / first-step peak and the steps' (ZeRO-3: with the buckets gathered) */
        double steps = (double)(o.total - o.params + o.params_gathered);
        return ((double)o.peak_total > steps ? (double)o.peak_total : steps) + (double)o.dp_extra;
    }
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "after", *want = argc > 2 ? argv[2] : "auto";
    int steps = argc > 3 ? atoi(argv[3]) : 10, quick = !strcmp(mode, "quick"), after = strcmp(mode, "before") != 0;
    double budget = (argc > 4 ? atof(argv[4]) : 22.0) * 1073741824.0, base, est = 0;
    int zero = after ? 3 : 0, precision = after ? PT_BF16 : PT_F32, recompute = after ? PT_RECOMPUTE_FULL : PT_RECOMPUTE_NONE;
    int T = quick ? 32 : T_SEQ, dp, rank, i, s, pick = -1;
    shape q = {"quick", 2, 64, 2};
    pt_layout lay;
    pt_dist *d;
    pt_gpt_config cfg;
    char err[256];
    double loss_first = NAN, loss_last = NAN, t0, t_steps = 0;
    int32_t *xb, *yb;
    memset(&lay, 0, sizeof lay);
    if (!(d = pt_dist_init(&argc, &argv, &lay, err, sizeof err))) return fprintf(stderr, "bench_largest: %s\n", err), 1;
    dp = pt_dist_layout(d).dp, rank = pt_dist_rank(d);
    if (strcmp(mode, "after") && strcmp(mode, "before") && !quick)
        return fprintf(stderr, "bench_largest: unknown mode '%s' (expected after, before or quick)\n", mode), pt_dist_finalize(d), 2;
    if (steps < 2 || steps > 1000) return fprintf(stderr, "bench_largest: steps %d (expected 2..1000)\n", steps), pt_dist_finalize(d), 2;
    base = world_max(d, rss_bytes("VmRSS")); /* a rank before its model */
    if (quick) {
        pick = 0;
    } else if (!strcmp(want, "auto")) {
        for (i = 0; i < NSHAPES; i++) { /* the largest shape predicted to fit */
            double p;
            config_of(&cfg, &SHAPES[i], 0, recompute);
            p = predicted_peak(&cfg, dp, zero, precision, T);
            if (p > 0 && (p + base) * dp <= budget) pick = i, est = (p + base) * dp;
        }
        if (pick < 0) return fprintf(stderr, "bench_largest: no candidate fits %.1f GiB\n", budget / 1073741824.0), pt_dist_finalize(d), 1;
    } else {
        for (i = 0; i < NSHAPES; i++)
            if (!strcmp(want, SHAPES[i].name + 5)) pick = i;
        if (pick < 0)
            return fprintf(stderr, "bench_largest: unknown model '%s' (expected small, medium, large, xl or auto)\n", want), pt_dist_finalize(d), 2;
    }
    config_of(&cfg, quick ? &q : &SHAPES[pick], quick, recompute);
    if (!est) est = (predicted_peak(&cfg, dp, zero, precision, T) + base) * dp;
    xb = (int32_t *)malloc(sizeof(int32_t) * (size_t)T), yb = (int32_t *)malloc(sizeof(int32_t) * (size_t)T);
    if (!xb || !yb) return 1;
    { /* this rank's fixed sequence: the model learns it */
        pt_rng rng = pt_rng_seed(100 + (uint64_t)pt_dist_coords(d).dp);
        int32_t prev = (int32_t)(pt_rng_u32(&rng) % (uint32_t)cfg.vocab);
        for (i = 0; i < T; i++) {
            int32_t next = (int32_t)(pt_rng_u32(&rng) % (uint32_t)cfg.vocab);
            xb[i] = prev, yb[i] = next, prev = next;
        }
    }
    {
        pt_desc desc;
        pt_optim_desc od;
        pt_ctx *ctx;
        pt_gpt *m;
        pt_optim *opt;
        pt_dp *pd;
        pt_graph *g;
        double rss_setup;
        memset(&desc, 0, sizeof desc);
        desc.dist = d, desc.threads = 1, desc.seed = 5, desc.precision = precision;
        ctx = pt_init(&desc);
        m = pt_gpt_new(ctx, &cfg);
        memset(&od, 0, sizeof od);
        od.kind = PT_OPTIM_ADAMW, od.lr = 1e-3f, od.weight_decay = 0.1f, od.clip_norm = 1.0f;
        opt = m ? pt_optim_new(ctx, &od) : NULL;
        pd = opt ? pt_dp_new(ctx, d, 0) : NULL;
        if (!m || !opt || !pd || (zero && pt_dp_zero(pd, opt, zero) != PT_OK)) {
            fprintf(stderr, "bench_largest: set-up failed: %s\n", pt_error(ctx));
            return 1;
        }
        rss_setup = world_sum(d, rss_bytes("VmHWM"));
        g = pt_graph_new(ctx);
        t0 = pt_time();
        for (s = 0; s < steps && pt_status_get(ctx) == PT_OK; s++) {
            pt_tensor *x, *y, *l;
            double lv;
            pt_zero_grad(ctx);
            pt_graph_reset(g);
            pt_dp_begin_step(pd, 1);
            x = pt_tensor_new(g, PT_I32, 2, 1, T, 0, 0), y = pt_tensor_new(g, PT_I32, 2, 1, T, 0, 0);
            pt_tensor_write(x, xb), pt_tensor_write(y, yb);
            l = pt_gpt_loss(g, m, x, y);
            lv = l ? pt_item(l) : NAN;
            pt_backward(g, l);
            pt_dp_finish(pd);
            pt_optim_step(opt, 1e-3f);
            lv = world_sum(d, lv) / dp;
            if (s == 0) loss_first = lv;
            loss_last = lv;
            if (rank == 0) fprintf(stderr, "bench_largest: %s step %d loss %.4f (%.1f s)\n", quick ? "quick" : SHAPES[pick].name, s + 1, lv, pt_time() - t0);
        }
        t_steps = world_max(d, pt_time() - t0);
        if (pt_status_get(ctx) != PT_OK) {
            fprintf(stderr, "bench_largest: training failed: %s\n", pt_error(ctx));
            return 1;
        }
        {
            double total = world_sum(d, rss_bytes("VmHWM")), mx = world_max(d, rss_bytes("VmHWM"));
            int64_t P = pt_param_numel(ctx);
            if (rank == 0)
                printf("{\"bench\":\"largest_model\",\"mode\":\"%s\",\"model\":\"%s\",\"layers\":%d,\"width\":%d,\"params\":%lld,\"dp\":%d,"
                       "\"precision\":\"%s\",\"zero\":%d,\"recompute\":\"%s\",\"tokens_per_step\":%d,\"steps\":%d,\"total_rss_bytes\":%.0f,"
                       "\"rss_per_rank_max\":%.0f,\"setup_rss_bytes\":%.0f,\"base_rss_per_rank\":%.0f,\"est_total_bytes\":%.0f,"
                       "\"budget_bytes\":%.0f,\"loss_first\":%.4f,\"loss_last\":%.4f,\"loss_falls\":%s,\"step_s\":%.2f}\n",
                       mode, quick ? "quick" : SHAPES[pick].name, cfg.layers, cfg.width, (long long)P, dp, after ? "bf16" : "f32", zero,
                       after ? "full" : "none", T * dp, steps, total, mx, rss_setup, base, est, budget, loss_first, loss_last,
                       loss_last < loss_first ? "true" : "false", t_steps / steps);
        }
        pt_graph_free(g);
        pt_gpt_free(m);
        pt_shutdown(ctx); /* frees the reducer without gathering (pt_dp_free would make the slabs whole: 4 x the model) */
    }
    free(xb), free(yb);
    pt_dist_finalize(d);
    return 0;
}
