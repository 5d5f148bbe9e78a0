/* 04_data_parallel.c - data parallelism: several processes train one model on one batch.

   What it teaches: every rank holds the whole model and takes its share of the global batch;
   after backward the gradients are averaged over the ranks (pt_dp: buckets of the gradient slab,
   each reduced with MPI_Iallreduce as soon as backward has completed it), so every rank takes the
   same optimizer step and the model stays identical everywhere. With --accum M each rank splits
   its share into M micro-batches whose gradients add up before one reduction; with --zero 1 the
   AdamW moments are sharded over the ranks (ZeRO-1). Rank 0 also trains the same model in a single
   process on the whole batch, and the run ends by comparing the two loss curves: data parallelism
   changes where the arithmetic happens, not the result.

   The task: 4-class classification of 16-dimensional points labelled by a fixed random "teacher"
   network, a 16 -> W -> W -> 4 GELU MLP trained with AdamW.

   Build: mpicc -O2 -fopenmp -DPTRAIN_MPI -DPTRAIN_OPENCL -I. examples/04_data_parallel.c -o build/04_data_parallel -lm
   Run: mpirun -np 2 ./build/04_data_parallel

   Flags: the shared --steps --seed --batch (global batch) --lr --width --stop-after, plus
   --accum M (micro-batches per step and rank, default 1), --zero 0|1 (ZeRO-1, default 0),
   --bucket-kb K (gradient bucket size, default 8 KiB: small, so the model gives several buckets).
   The batch must split evenly into ranks x micro-batches. Rank 0 prints the rank table, one
   `step <n> loss <l> ...` line per step, the reducer's counters and the comparison. (As root, or
   with more ranks than cores, Open MPI wants OMPI_ALLOW_RUN_AS_ROOT=1
   OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 and --oversubscribe.) */
#define PTRAIN_IMPLEMENTATION
#define PTRAIN_HARNESS
#include "ptrain.h"

#include <math.h>
#include <mpi.h> /* MPI_Allreduce below */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define IN 16
#define CLASSES 4
#define NDATA 4096

typedef struct model { pt_linear_layer l1, l2, l3; } model;

/* the same names and seed give the same initial values in every context, on every rank */
static model model_new(pt_ctx *ctx, int64_t width) {
    model m;
    m.l1 = pt_linear_new(ctx, "l1", IN, width, 1, 0.25f);
    m.l2 = pt_linear_new(ctx, "l2", width, width, 1, 0.1f);
    m.l3 = pt_linear_new(ctx, "l3", width, CLASSES, 1, 0.1f);
    return m;
}
static pt_tensor *model_loss(pt_graph *g, const model *m, const float *x, const int32_t *y, int64_t n) {
    int64_t xs[2] = {n, IN};
    pt_tensor *h = pt_tensor_from(g, PT_F32, 2, xs, x);
    h = pt_gelu(g, pt_linear_fwd(g, &m->l1, h));
    h = pt_gelu(g, pt_linear_fwd(g, &m->l2, h));
    return pt_cross_entropy(g, pt_linear_fwd(g, &m->l3, h), pt_tensor_from(g, PT_I32, 1, &n, y), -1);
}

/* NDATA points, the same on every rank (same seed): x ~ U(-1, 1), y = argmax of a random teacher */
static void make_data(uint64_t seed, float *x, int32_t *y) {
    float t1[8][IN], t2[CLASSES][8];
    pt_rng r = pt_rng_seed(seed ^ 0xDA7Aull);
    int i, j, k, c;
    for (j = 0; j < 8; j++)
        for (k = 0; k < IN; k++) t1[j][k] = 2 * pt_rng_float(&r) - 1;
    for (c = 0; c < CLASSES; c++)
        for (j = 0; j < 8; j++) t2[c][j] = 2 * pt_rng_float(&r) - 1;
    for (i = 0; i < NDATA; i++) {
        float h[8], best = -1e30f;
        for (k = 0; k < IN; k++) x[i * IN + k] = 2 * pt_rng_float(&r) - 1;
        for (j = 0; j < 8; j++) {
            float s = 0;
            for (k = 0; k < IN; k++) s += t1[j][k] * x[i * IN + k];
            h[j] = tanhf(2 * s);
        }
        for (c = 0; c < CLASSES; c++) {
            float s = 0;
            for (j = 0; j < 8; j++) s += t2[c][j] * h[j];
            if (s > best) best = s, y[i] = c;
        }
    }
}

static const char *device; /* --device (NULL = cpu) */
static int32_t precision;   /* --precision (PT_F32 = 0) */
static pt_ctx *make_ctx(const pt_dist *d, uint64_t seed, int threads) {
    pt_desc desc;
    memset(&desc, 0, sizeof desc);
    desc.seed = seed;
    desc.device = device, desc.precision = precision;
    desc.dist = d; /* NULL: a single process */
    desc.threads = threads;
    return pt_init(&desc);
}
static pt_optim *make_optim(pt_ctx *ctx, float lr) {
    pt_optim_desc od;
    memset(&od, 0, sizeof od);
    od.kind = PT_OPTIM_ADAMW;
    od.lr = lr;
    od.weight_decay = 0.01f;
    return pt_optim_new(ctx, &od);
}

int main(int argc, char **argv) {
    pt_args a;
    pt_layout lay;
    char err[1024];
    pt_dist *d;
    pt_ctx *ctx, *ref = NULL;
    pt_graph *g, *gref = NULL;
    pt_optim *opt, *oref = NULL;
    pt_dp *dp;
    pt_dp_stats st;
    model m, mref;
    float *x;
    int32_t *y;
    int64_t step, stop, B, share, mb, accum = 1, zero = 0, bucket_kb = 8;
    int rank, ranks, i, ok;
    double worst = 0, t0;

    /* 1. the grid: every rank is a data-parallel rank (dp = world size, tp = pp = 1) */
    memset(&lay, 0, sizeof lay);
    d = pt_dist_init(&argc, &argv, &lay, err, sizeof err);
    if (!d) {
        fprintf(stderr, "04_data_parallel: %s\n", err);
        return 1;
    }
    rank = pt_dist_rank(d);
    ranks = pt_dist_size(d);

    /* 2. the command line (every rank parses the same one, so every rank takes the same exits) */
    memset(&a, 0, sizeof a);
    a.steps = 20, a.seed = 1, a.batch = 64, a.lr = 1e-2f, a.width = 64;
    argc = pt_args_parse(&a, argc, argv, err, sizeof err);
    device = a.device, precision = a.precision;
    for (i = 1; argc > 0 && i < argc; i++) {
        int64_t *dst = !strcmp(argv[i], "--accum") ? &accum : !strcmp(argv[i], "--zero") ? &zero : !strcmp(argv[i], "--bucket-kb") ? &bucket_kb : NULL;
        if (!dst || i + 1 >= argc || pt_args_int(argv[i], argv[i + 1], 0, 1 << 20, dst, err, sizeof err) != 0) {
            if (!dst || i + 1 >= argc) snprintf(err, sizeof err, "bad flag '%s' (--accum M, --zero 0|1, --bucket-kb K take a number in 0..1048576)", argv[i]);
            argc = -1;
            break;
        }
        i++;
    }
    B = a.batch;
    if (argc > 0 && (accum < 1 || zero > 1 || B % (ranks * accum) != 0)) {
        snprintf(err, sizeof err, "--batch %lld must split into %d ranks x --accum %lld micro-batches (and --zero is 0 or 1)", (long long)B, ranks,
                 (long long)accum);
        argc = -1;
    }
    if (argc < 0 || a.help) {
        if (rank == 0 && a.help) pt_args_usage(&a, "04_data_parallel", "  --accum M       micro-batches per step and rank (1)\n  --zero 0|1      ZeRO-1: shard the AdamW moments (0)\n  --bucket-kb K   gradient bucket size in KiB (8)");
        if (rank == 0 && !a.help) fprintf(stderr, "04_data_parallel: %s (try --help)\n", err);
        pt_dist_finalize(d);
        return a.help ? 0 : 2;
    }
    stop = a.stop_after > 0 && a.stop_after < a.steps ? a.stop_after : a.steps;
    share = B / ranks;   /* samples per rank and step */
    mb = share / accum;  /* samples per micro-batch */

    if (rank == 0) printf("04_data_parallel: %d ranks, global batch %lld = %d x %lld micro-batches of %lld\n", ranks, (long long)B, ranks, (long long)accum, (long long)mb);
    pt_dist_print(d, stdout); /* collective: rank 0 prints one row per rank */

    /* 3. the data (identical on every rank) and the model; parameters first, then optimizer, then pt_dp */
    x = (float *)malloc(sizeof(float) * NDATA * IN);
    y = (int32_t *)malloc(sizeof(int32_t) * NDATA);
    if (!x || !y) return 1;
    make_data((uint64_t)a.seed, x, y);
    ctx = make_ctx(d, (uint64_t)a.seed, 0);
    m = model_new(ctx, a.width);
    opt = make_optim(ctx, a.lr);
    dp = pt_dp_new(ctx, d, bucket_kb * 1024);
    ok = opt && dp && (zero == 0 || pt_dp_zero(dp, opt, 1) == PT_OK);
    if (!pt_dist_agree_msg(d, ok, err, sizeof err)) { /* an error on one rank is an error on all */
        if (rank == 0) fprintf(stderr, "04_data_parallel: %s\n", ok ? err : pt_error(ctx));
        pt_dist_finalize(d);
        return 1;
    }
    g = pt_graph_new(ctx);
    if (rank == 0) { /* the reference: the same model in one process, trained on the whole batch */
        ref = make_ctx(NULL, (uint64_t)a.seed, pt_threads(ctx));
        mref = model_new(ref, a.width);
        oref = make_optim(ref, a.lr);
        gref = pt_graph_new(ref);
        printf("model: 16 -> %lld -> %lld -> 4 GELU MLP, %lld parameters; AdamW lr %g; %lld steps; zero %lld; %d threads per rank\n",
               (long long)a.width, (long long)a.width, (long long)pt_param_numel(ctx), (double)a.lr, (long long)a.steps, (long long)zero, pt_threads(ctx));
    }

    /* 4. training */
    t0 = pt_time();
    for (step = 0; step < stop; step++) {
        int64_t first = (step * B) % (NDATA - B + 1); /* the global batch: samples [first, first + B) */
        float local = 0, loss = 0;
        double tstep = pt_time();
        pt_zero_grad(ctx);
        for (i = 0; i < accum; i++) {
            /* my samples: share `rank` of the global batch, micro-batch i of it */
            int64_t at = first + rank * share + i * mb;
            pt_tensor *l;
            pt_dist_set_step(d, step, i); /* tags the collective records (PTRAIN_WATCHDOG dumps them) */
            pt_graph_reset(g);
            l = model_loss(g, &m, x + at * IN, y + at, mb);
            local += pt_item(l) / (float)accum;
            if (accum > 1) l = pt_scale(g, l, 1.0f / (float)accum); /* the step's gradient is the mean over micro-batches */
            pt_dp_begin(dp, i == accum - 1); /* 0: only accumulate; 1: reduce while this backward runs */
            pt_backward(g, l);
            pt_dp_finish(dp); /* waits for the buckets; the optimizer sees the mean over the ranks */
        }
        pt_optim_step(opt, a.lr);
        /* the loss of the global batch: the mean of the ranks' losses (for printing only) */
        loss = local;
#ifdef PTRAIN_MPI
        MPI_Allreduce(&local, &loss, 1, MPI_FLOAT, MPI_SUM, *(MPI_Comm *)pt_dist_comm(d, PT_COMM_DP));
        loss /= (float)ranks;
#endif
        if (pt_status_get(ctx) != PT_OK) {
            fprintf(stderr, "04_data_parallel: rank %d, step %lld: %s\n", rank, (long long)step, pt_error(ctx));
            break;
        }
        if (rank == 0) {
            float lref;
            pt_tensor *l;
            pt_zero_grad(ref);
            pt_graph_reset(gref);
            l = model_loss(gref, &mref, x + first * IN, y + first, B);
            lref = pt_item(l);
            pt_backward(gref, l);
            pt_optim_step(oref, a.lr);
            if (fabs(loss - lref) / fabs(lref) > worst) worst = fabs(loss - lref) / fabs(lref);
            printf("step %lld loss %.6f single_process_loss %.6f lr %.3g ms %.1f\n", (long long)step, (double)loss, (double)lref, (double)a.lr,
                   1000 * (pt_time() - tstep));
            fflush(stdout);
        }
    }

    /* 5. what the reducer did, and the verdict */
    st = pt_dp_stats_get(dp);
    if (rank == 0) {
        printf("dp: %lld buckets, %lld reductions started during backward, %.1f KiB reduced, %.3f s waiting; optimizer state on rank 0: %lld bytes\n",
               (long long)st.buckets, (long long)st.started_before_end, (double)st.bytes_reduced / 1024.0, st.wait_s,
               (long long)pt_optim_state_bytes(opt));
        printf("training: %lld steps in %.2f s\n", (long long)stop, pt_time() - t0);
        ok = worst <= 1e-4;
        if (ok) printf("check: the %d-rank losses equal the single-process run's (max relative difference %.2g over %lld steps, tolerance 1e-4)\n", ranks, worst, (long long)stop);
        else printf("check: MISMATCH: the %d-rank losses differ from the single-process run's by %.3g (tolerance 1e-4)\n", ranks, worst);
        pt_graph_free(gref);
        pt_optim_free(oref);
        pt_shutdown(ref);
    }
    ok = pt_dist_agree(d, rank != 0 || ok);
    pt_dp_free(dp);
    pt_graph_free(g);
    pt_optim_free(opt);
    pt_shutdown(ctx);
    free(x), free(y);
    pt_dist_finalize(d);
    return ok ? 0 : 1;
}
