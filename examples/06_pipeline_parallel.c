/* 06_pipeline_parallel.c - a deep MLP cut into pipeline stages, trained with GPipe, 1F1B and
   interleaved 1F1B; the schedules are printed as tables and their bubbles measured.

   What it teaches: pipeline parallelism with the public API, on a model of our own. A stack of
   `--layers` linear+GELU layers (width `--width`) learns a fixed random teacher network. The model
   is cut into p x v stages (p = the MPI ranks, v = 2 chunks per rank for the interleaved schedule);
   each rank creates only the layers of its stages. One stage function computes any stage of any
   micro-batch; pt_pp runs a schedule - the per-rank instruction lists printed below - sending
   activations forward and gradients backward. The bubble is the idle share of a step: measured
   (1 - busy/step, averaged over the ranks) next to the theory ((p-1)/(v*m+p-1) for equal stages,
   and the event simulation of the schedule with the measured forward/backward times). All three
   schedules compute the same gradients, so their losses agree, and rank 0 checks them against the
   same model trained by one process.

   Build: mpicc -O2 -fopenmp -DPTRAIN_MPI -DPTRAIN_OPENCL -I. examples/06_pipeline_parallel.c -o build/06_pipeline_parallel -lm
   Run: mpirun -np 2 ./build/06_pipeline_parallel

   Flags: --steps N (10 per schedule), --layers L (8), --width W (512), --batch B (256, split into
   --micro-batches M = 8), --seed S, --device cpu|opencl. Prints `step <n> loss <l> ...` per step of each schedule. */
#define PTRAIN_IMPLEMENTATION
#include "ptrain.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *device; /* --device (NULL = cpu) */

typedef struct model {
    int layers, nstages;
    int32_t first[65];         /* stage s = layers [first[s], first[s+1]) */
    pt_linear_layer layer[64]; /* only this rank's layers are created */
    const float *x, *y;        /* the batch: inputs [B, W], targets [B, 1] */
    int batch, width, mbs;
} model;

static void model_new(pt_ctx *ctx, model *m, const int *mine, int nmine) {
    int i, l;
    memset(m->layer, 0, sizeof m->layer);
    for (i = 0; i < nmine; i++)
        for (l = m->first[mine[i]]; l < m->first[mine[i] + 1]; l++) {
            char name[32];
            snprintf(name, sizeof name, "layer.%d", l);
            /* the last layer maps to one output, the others keep the width */
            m->layer[l] = pt_linear_new(ctx, name, m->width, l == m->layers - 1 ? 1 : m->width, 1, 1.0f / sqrtf((float)m->width));
        }
}

/* stage `stage` of micro-batch mb: stage 0 reads the inputs, the last stage ends with the loss */
static pt_tensor *stage_fn(pt_graph *g, int stage, int mb, pt_tensor *h, void *user) {
    model *m = (model *)user;
    int rows = m->batch / m->mbs, l;
    int64_t xs[2], ys[2];
    xs[0] = rows, xs[1] = m->width, ys[0] = rows, ys[1] = 1;
    if (stage == 0) h = pt_tensor_from(g, PT_F32, 2, xs, m->x + (size_t)mb * rows * m->width);
    for (l = m->first[stage]; h && l < m->first[stage + 1]; l++) {
        h = pt_linear_fwd(g, &m->layer[l], h);
        if (l < m->layers - 1) h = pt_gelu(g, h);
    }
    if (stage == m->nstages - 1) { /* mean squared error against the teacher */
        pt_tensor *d = pt_sub(g, h, pt_tensor_from(g, PT_F32, 2, ys, m->y + (size_t)mb * rows));
        h = pt_mean(g, pt_mul(g, d, d));
    }
    return h;
}

/* trains a fresh model for `steps` steps with a schedule; losses into loss[] */
static int train(const pt_dist *d, int kind, int v, model *m, int steps, uint64_t seed, float *loss, pt_pp_stats *st, int print) {
    pt_desc desc;
    pt_ctx *ctx;
    pt_optim_desc od;
    pt_optim *opt;
    pt_pp *pp;
    pt_pp_desc pd;
    int p = d ? pt_dist_layout(d).pp : 1, r = d ? pt_dist_coords(d).pp : 0, mine[8], i, s, ok = 1;
    char err[256];
    memset(&desc, 0, sizeof desc);
    desc.seed = seed, desc.threads = 1, desc.dist = d, desc.device = device;
    ctx = pt_init(&desc);
    m->nstages = p * v;
    if (pt_pp_split(m->layers, m->nstages, NULL, 0, 0, m->first, err, sizeof err) != PT_OK) {
        fprintf(stderr, "06_pipeline_parallel: %s\n", err);
        pt_shutdown(ctx);
        return 0;
    }
    for (i = 0; i < v; i++) mine[i] = i * p + r;
    model_new(ctx, m, mine, v);
    memset(&od, 0, sizeof od);
    od.kind = PT_OPTIM_ADAMW, od.lr = 1e-3f, od.eps = 1e-6f;
    opt = pt_optim_new(ctx, &od);
    memset(&pd, 0, sizeof pd);
    pd.kind = kind, pd.micro_batches = m->mbs, pd.virtual_stages = v, pd.forward = stage_fn, pd.user = m;
    pp = pt_pp_new(ctx, &pd);
    if (!pp) {
        fprintf(stderr, "06_pipeline_parallel: %s\n", pt_error(ctx));
        pt_shutdown(ctx);
        return 0;
    }
    if (print && r == 0 && p > 1) pt_pp_schedule_print(pt_pp_get_schedule(pp), NULL);
    for (s = 0; s < steps && ok; s++) {
        double t0 = pt_time();
        pt_zero_grad(ctx);
        loss[s] = pt_pp_step(pp, 0, 1);
        pt_optim_step(opt, od.lr);
        ok = loss[s] == loss[s];
        if (print && r == 0)
            printf("step %d loss %.9g ms %.1f bubble %.3f\n", s, loss[s], (pt_time() - t0) * 1e3, pt_pp_stats_get(pp).bubble);
    }
    *st = pt_pp_stats_get(pp);
    if (ok) { /* the bubble of a warm step: the median of 5 more */
        double b[5], tmp;
        int j, k;
        for (j = 0; j < 5; j++) {
            pt_zero_grad(ctx);
            pt_pp_step(pp, 0, 1);
            b[j] = pt_pp_stats_get(pp).bubble;
        }
        for (j = 0; j < 5; j++)
            for (k = j + 1; k < 5; k++)
                if (b[k] < b[j]) tmp = b[j], b[j] = b[k], b[k] = tmp;
        *st = pt_pp_stats_get(pp);
        st->bubble = b[2];
    }
    if (!ok) fprintf(stderr, "06_pipeline_parallel: %s\n", pt_error(ctx));
    pt_pp_free(pp);
    pt_shutdown(ctx);
    return ok;
}

/* a flag's value: a decimal integer in [lo, hi] (strtol's ERANGE refused), else 0 (*out untouched) */
static int flag_int(const char *v, long lo, long hi, int *out) {
    char *end;
    long x;
    errno = 0;
    x = strtol(v, &end, 10);
    if (end == v || *end || errno == ERANGE || x < lo || x > hi) return 0;
    *out = (int)x;
    return 1;
}

int main(int argc, char **argv) {
    pt_layout lay = {1, 1, 0, 0}; /* every rank is a pipeline stage */
    pt_dist *d;
    char err[512];
    model m;
    int steps = 10, i, rank, k, all_same = 1;
    uint64_t seed = 1;
    float *x, *y, loss[3][64], ref[64];
    static const int kinds[3] = {PT_PP_GPIPE, PT_PP_1F1B, PT_PP_INTERLEAVED};
    static const char *names[3] = {"GPipe", "1F1B", "interleaved 1F1B (v = 2)"};
    pt_pp_stats st[3];
    memset(&m, 0, sizeof m);
    m.layers = 8, m.width = 512, m.batch = 256, m.mbs = 8;
    for (i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : "";
        char *end;
        /* batch x width stays below 2^31 (the data loops count in int) */
        if (!strcmp(argv[i], "--steps") && flag_int(v, 1, 64, &steps)) {
        } else if (!strcmp(argv[i], "--layers") && flag_int(v, 1, 64, &m.layers)) {
        } else if (!strcmp(argv[i], "--width") && flag_int(v, 1, 16384, &m.width)) {
        } else if (!strcmp(argv[i], "--batch") && flag_int(v, 1, 65536, &m.batch)) {
        } else if (!strcmp(argv[i], "--micro-batches") && flag_int(v, 1, 65536, &m.mbs)) {
        } else if (!strcmp(argv[i], "--seed") && (errno = 0, seed = (uint64_t)strtoull(v, &end, 10), end != v && !*end && errno != ERANGE && *v != '-')) {
        } else if (!strcmp(argv[i], "--device") && *v) device = v;
        else {
            fprintf(stderr, "06_pipeline_parallel: unknown flag or bad value '%s %s' (flags: --steps 1..64, --layers 1..64, --width 1..16384, "
                            "--batch 1..65536, --micro-batches 1..65536, --seed 0..2^64-1, --device)\n", argv[i], v);
            return 2;
        }
        i++;
    }
    d = pt_dist_init(&argc, &argv, &lay, err, sizeof err);
    if (!d) {
        fprintf(stderr, "06_pipeline_parallel: %s\n", err);
        return 1;
    }
    rank = pt_dist_rank(d);
    lay = pt_dist_layout(d);
    if (m.batch % m.mbs || m.mbs % lay.pp || m.layers % (2 * lay.pp)) {
        if (rank == 0)
            fprintf(stderr, "06_pipeline_parallel: need --batch %d divisible by --micro-batches %d, micro-batches a multiple of the %d ranks "
                            "(interleaved) and --layers %d divisible by 2 x %d stages\n", m.batch, m.mbs, lay.pp, m.layers, lay.pp);
        pt_dist_finalize(d);
        return 1;
    }
    /* data: a random teacher MLP's outputs on random inputs (the same on every rank) */
    x = (float *)malloc(sizeof(float) * (size_t)m.batch * m.width);
    y = (float *)malloc(sizeof(float) * (size_t)m.batch);
    {
        pt_rng r = pt_rng_seed(seed + 99);
        int b, j;
        for (b = 0; b < m.batch * m.width; b++) x[b] = 2.0f * pt_rng_float(&r) - 1.0f;
        for (b = 0; b < m.batch; b++) {
            double acc = 0;
            for (j = 0; j < m.width; j++) acc += sin(3.0 * x[b * m.width + j] + j) / sqrt((double)m.width);
            y[b] = (float)acc;
        }
    }
    m.x = x, m.y = y;
    pt_dist_print(d, NULL);
    for (k = 0; k < 3; k++) {
        if (rank == 0) printf("\n== %s: %d ranks, %d micro-batches of %d rows, %d layers\n", names[k], lay.pp, m.mbs, m.batch / m.mbs, m.layers);
        if (!train(d, kinds[k], k == 2 ? 2 : 1, &m, steps, seed, loss[k], &st[k], 1)) {
            pt_dist_finalize(d);
            return 1;
        }
    }
    if (rank == 0) { /* the reference: the whole model in one process, no grid */
        pt_pp_stats s1;
        int sv = m.mbs;
        train(NULL, PT_PP_GPIPE, 1, &m, steps, seed, ref, &s1, 0);
        m.mbs = sv;
        printf("\nbubble = idle share of a step (median of 5 warm steps, mean over the ranks)\n");
        printf("%-26s %10s %14s %14s %12s\n", "schedule", "measured", "theory (eq.)", "simulated", "fwd/bwd ms");
        for (k = 0; k < 3; k++) {
            pt_pp_schedule *sc = pt_pp_schedule_new(kinds[k], lay.pp, m.mbs, k == 2 ? 2 : 1, NULL, 0);
            int per = m.mbs * (k == 2 ? 2 : 1); /* stage computations per rank and kind */
            double tf = st[k].fwd_s / per, tb = st[k].bwd_s / per, sim = pt_pp_schedule_simulate(sc, tf, tb, NULL);
            printf("%-26s %10.3f %14.3f %14.3f %6.2f/%.2f\n", names[k], st[k].bubble, pt_pp_bubble_theory(lay.pp, m.mbs, k == 2 ? 2 : 1), sim,
                   tf * 1e3, tb * 1e3);
            pt_pp_schedule_free(sc);
        }
        for (k = 0; k < 3; k++)
            for (i = 0; i < steps; i++) all_same &= fabsf(loss[k][i] - ref[i]) <= 1e-5f * fabsf(ref[i]);
        printf("check: the three schedules' losses %s the single-process run's within 1e-5 (last: %.9g vs %.9g)\n",
               all_same ? "equal" : "DO NOT EQUAL", loss[2][steps - 1], ref[steps - 1]);
    }
    free(x);
    free(y);
    pt_dist_finalize(d);
    return all_same ? 0 : 1;
}
