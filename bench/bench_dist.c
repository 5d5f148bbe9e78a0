/* bench_dist.c - data-parallel benchmarks (>>dp), one JSON line per measurement, under mpirun.

   allreduce   the bucketed path (pt_dp_begin_step + pt_dp_finish over a gradient slab of `bytes`,
               25 MiB buckets: every bucket started in order, waited, the mean taken: a pass over the
               slab when dp is not a power of two, else left to the optimizer's gradient scale)
               against one raw MPI_Allreduce (in place, MPI_FLOAT, MPI_SUM) of the same bytes, same
               run, medians of reps; ratio = mpi_s / ptrain_s; busbw = 2(n-1)/n * bytes / t (the
               ring's bytes per rank over the time). pt_zero_grad before each (not timed).
   dp_overlap  a small GPT, small buckets: exposed_comm_fraction = the post-backward wait in
               pt_dp_finish of the rank whose backward ended last (the others' waits include the
               skew between ranks) / the standalone reduction of the same gradient (the same path
               with nothing started during backward), medians of steps.
   zero_gather ZeRO-1's parameter all-gather (per bucket, non-blocking, started by pt_optim_step):
               blocking_s = one blocking in-place MPI_Allgatherv of the whole parameter slab over the
               ZeRO shards (what the gather was before), immediate_s = the wait (pt_dp_stats
               gather_wait_s) when the parameters are read right after the update,
               overlapped_exposed_s = the wait at the next forward's first op when the step's data
               preparation and pt_zero_grad come between; medians of steps, the slowest DP rank.
   zero        optimizer bytes per rank under ZeRO-1 and ZeRO-2 vs the unsharded state (full_bytes),
               and what the reducer itself holds (reducer_bytes: ZeRO-2's shard and staging ring).

   Build: mpicc -O3 -march=native -fopenmp -DPTRAIN_MPI -I. bench/bench_dist.c -o build/bench_dist -lm
   Run:   mpirun -np 2 build/bench_dist */
#define PTRAIN_IMPLEMENTATION
#include "ptrain.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef PTRAIN_MPI
int main(void) {
    fprintf(stderr, "bench_dist needs -DPTRAIN_MPI (build with mpicc)\n");
    return 1;
}
#else
#include "bench_util.h"

/* the largest time over the DP ranks (a collective finishes when its slowest rank does) */
static double tmax(MPI_Comm c, double t) {
    double m = t;
    MPI_Allreduce(&t, &m, 1, MPI_DOUBLE, MPI_MAX, c);
    return m;
}
static pt_ctx *new_ctx(int threads) {
    pt_desc desc;
    memset(&desc, 0, sizeof desc);
    desc.seed = 1, desc.threads = threads;
    return pt_init(&desc);
}

/* the Open MPI setting that picks the non-blocking allreduce algorithm, as a JSON string */
static const char *nbc_alg(void) {
    const char *e = getenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm");
    return e && *e ? e : "default";
}

static void bench_allreduce(pt_dist *d, int64_t bytes, int reps) {
    MPI_Comm comm = *(MPI_Comm *)pt_dist_comm(d, PT_COMM_DP);
    pt_ctx *ctx = new_ctx(1);
    int n = pt_dist_layout(d).dp, i, np = 0;
    int64_t per = (int64_t)1 << 20, left = bytes / 4; /* 4 MiB parameters */
    double tp[32], tm[32], busf = 2.0 * (n - 1) / n;
    pt_dp *dp;
    float *raw, *g;
    pt_tensor gs;
    char name[32];
    while (left > 0) {
        int64_t s = left < per ? left : per;
        snprintf(name, sizeof name, "p%d", np++);
        pt_param_new(ctx, name, 1, &s, PT_INIT_ZEROS, 0.0f, 0);
        left -= s;
    }
    dp = pt_dp_new(ctx, d, 0);
    raw = (float *)malloc((size_t)bytes);
    gs = pt_grad_slab(ctx);
    g = pt_f32(&gs);
    if (!dp || !raw || !g) {
        fprintf(stderr, "bench_dist allreduce: setup failed: %s\n", pt_error(ctx));
        exit(1);
    }
    for (i = 0; i < bytes / 4; i++) raw[i] = 1.0f;
    for (i = 0; i < pt_numel(&gs); i++) g[i] = 1.0f;
    for (i = -1; i < reps; i++) { /* one warm-up each, interleaved so both see the same machine state */
        double t0;
        pt_zero_grad(ctx); /* a step's start (not timed): the 1/dp owed to the optimizer is dropped with the gradient */
        MPI_Barrier(comm);
        t0 = pt_time();
        pt_dp_begin_step(dp, 1);
        pt_dp_finish(dp);
        t0 = tmax(comm, pt_time() - t0);
        if (i >= 0) tp[i] = t0;
        MPI_Barrier(comm);
        t0 = pt_time();
        MPI_Allreduce(MPI_IN_PLACE, raw, (int)(bytes / 4), MPI_FLOAT, MPI_SUM, comm);
        t0 = tmax(comm, pt_time() - t0);
        if (i >= 0) tm[i] = t0;
    }
    if (pt_dist_rank(d) == 0)
        printf("{\"bench\":\"allreduce\",\"bytes\":%lld,\"dp\":%d,\"buckets\":%lld,\"reps\":%d,\"ptrain_s\":%.6f,\"mpi_s\":%.6f,"
               "\"ratio\":%.3f,\"ptrain_busbw_gbs\":%.3f,\"mpi_busbw_gbs\":%.3f,\"libnbc_iallreduce_algorithm\":\"%s\"}\n",
               (long long)bytes, n, (long long)pt_dp_stats_get(dp).buckets, reps, median(tp, reps), median(tm, reps), median(tm, reps) / median(tp, reps),
               busf * (double)bytes / median(tp, reps) * 1e-9, busf * (double)bytes / median(tm, reps) * 1e-9, nbc_alg());
    fflush(stdout);
    free(raw);
    pt_dp_free(dp);
    pt_shutdown(ctx);
}

/* the small GPT of the overlap and ZeRO benchmarks */
static pt_gpt *small_gpt(pt_ctx *ctx) {
    pt_gpt_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.vocab = 256, cfg.max_seq = 64, cfg.layers = 4, cfg.width = 128, cfg.heads = 4;
    return pt_gpt_new(ctx, &cfg);
}

static void bench_overlap(pt_dist *d, int64_t bucket, int steps) {
    MPI_Comm comm = *(MPI_Comm *)pt_dist_comm(d, PT_COMM_DP);
    pt_ctx *ctx = new_ctx(pt_dist_threads(d));
    pt_gpt *m = small_gpt(ctx);
    pt_dp *dp = pt_dp_new(ctx, d, bucket);
    pt_graph *g = pt_graph_new(ctx);
    pt_rng rng = pt_rng_seed(7 + (uint64_t)pt_dist_rank(d));
    int32_t ids[8 * 64], tg[8 * 64];
    double wexp[32], wsolo[32], tstep[32], tb;
    int s, i, nr = pt_dist_layout(d).dp;
    if (!m || !dp || !g) {
        fprintf(stderr, "bench_dist dp_overlap: setup failed: %s\n", pt_error(ctx));
        exit(1);
    }
    for (s = -1; s < steps; s++) {
        pt_tensor *loss;
        double w0, t0;
        for (i = 0; i < 8 * 64; i++) ids[i] = (int32_t)(pt_rng_u32(&rng) % 256), tg[i] = (int32_t)(pt_rng_u32(&rng) % 256);
        /* standalone: the same reduction with nothing started during backward */
        MPI_Barrier(comm);
        w0 = pt_dp_stats_get(dp).wait_s;
        pt_dp_begin_step(dp, 1);
        pt_dp_finish(dp);
        if (s >= 0) wsolo[s] = tmax(comm, pt_dp_stats_get(dp).wait_s - w0);
        /* a training step's backward with the reduction overlapped */
        loss = gpt_batch_loss(g, m, ids, tg, 8, 64);
        pt_zero_grad(ctx);
        MPI_Barrier(comm);
        t0 = pt_time();
        pt_dp_begin_step(dp, 1);
        pt_backward(g, loss);
        tb = pt_time() - t0;
        w0 = pt_dp_stats_get(dp).wait_s;
        pt_dp_finish(dp);
        if (s >= 0) {
            /* the exposed wait is that of the rank whose backward ended last: the others' waits
               also hold the skew between the ranks (they wait for it to join the last buckets) */
            double mine[2], *all = (double *)malloc(sizeof(double) * 2 * (size_t)nr);
            int r, last = 0;
            mine[0] = tb, mine[1] = pt_dp_stats_get(dp).wait_s - w0;
            MPI_Allgather(mine, 2, MPI_DOUBLE, all, 2, MPI_DOUBLE, comm);
            for (r = 1; r < nr; r++)
                if (all[2 * r] > all[2 * last]) last = r;
            wexp[s] = all[2 * last + 1];
            tstep[s] = tmax(comm, pt_time() - t0);
            free(all);
        }
    }
    if (pt_status_get(ctx) != PT_OK) {
        fprintf(stderr, "bench_dist dp_overlap: %s\n", pt_error(ctx));
        exit(1);
    }
    if (pt_dist_rank(d) == 0) {
        pt_dp_stats st = pt_dp_stats_get(dp);
        double e = median(wexp, steps), so = median(wsolo, steps);
        printf("{\"bench\":\"dp_overlap\",\"dp\":%d,\"bucket_bytes\":%lld,\"buckets\":%lld,\"grad_bytes\":%lld,\"steps\":%d,"
               "\"backward_plus_wait_s\":%.6f,\"exposed_wait_s\":%.6f,\"standalone_allreduce_s\":%.6f,\"exposed_comm_fraction\":%.3f,"
               "\"started_during_backward\":%lld,\"libnbc_iallreduce_algorithm\":\"%s\"}\n",
               pt_dist_layout(d).dp, (long long)bucket, (long long)st.buckets, (long long)(4 * pt_param_numel(ctx)), steps,
               median(tstep, steps), e, so, e / so, (long long)st.started_before_end, nbc_alg());
    }
    fflush(stdout);
    pt_dp_free(dp);
    pt_shutdown(ctx);
}

static void bench_zero_gather(pt_dist *d, int steps) {
    MPI_Comm comm = *(MPI_Comm *)pt_dist_comm(d, PT_COMM_DP);
    pt_ctx *ctx = new_ctx(pt_dist_threads(d));
    pt_gpt *m = small_gpt(ctx);
    pt_optim_desc od;
    pt_optim *o;
    pt_dp *dp;
    pt_graph *g = pt_graph_new(ctx);
    pt_rng rng = pt_rng_seed(11 + (uint64_t)pt_dist_rank(d));
    int32_t ids[8 * 64], tg[8 * 64];
    double wb[32], wo[32], wr[32];
    int s, i, nr = pt_dist_layout(d).dp, *cnt = (int *)malloc(sizeof(int) * 2 * (size_t)nr), *dsp;
    float *raw;
    memset(&od, 0, sizeof od);
    od.kind = PT_OPTIM_ADAMW, od.lr = 1e-4f;
    o = pt_optim_new(ctx, &od);
    {
        pt_dp_options dopt;
        memset(&dopt, 0, sizeof dopt);
        dopt.bucket_bytes = (int64_t)256 << 10, dopt.overlap_gather = 1;
        dp = pt_dp_new_opts(ctx, d, &dopt);
    }
    if (!m || !o || !dp || !g || pt_dp_zero(dp, o, 1) != PT_OK) {
        fprintf(stderr, "bench_dist zero_gather: setup failed: %s\n", pt_error(ctx));
        exit(1);
    }
    dsp = cnt + nr;
    {
        pt_tensor ps = pt_param_slab(ctx);
        raw = (float *)calloc((size_t)pt_numel(&ps) + 1, sizeof(float));
    }
    for (i = 0; i < nr; i++) { /* the ZeRO shards as pt_dp_zero cuts them */
        pt_tensor ps = pt_param_slab(ctx);
        int64_t all = pt_numel(&ps), a, e;
        a = (all * i / nr) & ~(int64_t)15, e = i + 1 < nr ? (all * (i + 1) / nr) & ~(int64_t)15 : all;
        dsp[i] = (int)a, cnt[i] = (int)(e - a);
    }
    for (i = 0; i < 8 * 64; i++) ids[i] = (int32_t)(pt_rng_u32(&rng) % 256), tg[i] = (int32_t)(pt_rng_u32(&rng) % 256);
    for (s = -1; s < steps; s++) {
        pt_tensor *loss;
        double w0;
        int k;
        for (k = 0; k < 2; k++) { /* k 0: parameters read right after the update; 1: the next step's work first */
            pt_tensor ps;
            if (k == 1) {
                for (i = 0; i < 8 * 64; i++) ids[i] = (int32_t)(pt_rng_u32(&rng) % 256), tg[i] = (int32_t)(pt_rng_u32(&rng) % 256);
                pt_zero_grad(ctx);
            }
            w0 = pt_dp_stats_get(dp).gather_wait_s;
            if (k == 0) {
                double t0;
                ps = pt_param_slab(ctx), (void)ps;
                MPI_Barrier(comm);
                t0 = pt_time();
                MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, raw, cnt, dsp, MPI_FLOAT, comm);
                if (s >= 0) wr[s] = tmax(comm, pt_time() - t0);
            }
            pt_graph_reset(g);
            loss = gpt_batch_loss(g, m, ids, tg, 8, 64); /* k 1: the forward's first op waits */
            if (s >= 0) (k ? wo : wb)[s] = tmax(comm, pt_dp_stats_get(dp).gather_wait_s - w0);
            pt_zero_grad(ctx);
            pt_dp_begin_step(dp, 1);
            pt_backward(g, loss);
            pt_dp_finish(dp);
            MPI_Barrier(comm); /* the ranks enter the update together: the waits below hold no skew of backward */
            pt_optim_step(o, 1e-4f);
        }
    }
    if (pt_status_get(ctx) != PT_OK) {
        fprintf(stderr, "bench_dist zero_gather: %s\n", pt_error(ctx));
        exit(1);
    }
    if (pt_dist_rank(d) == 0)
        printf("{\"bench\":\"zero_gather\",\"dp\":%d,\"stage\":1,\"bucket_bytes\":262144,\"buckets\":%lld,\"param_bytes\":%lld,\"steps\":%d,"
               "\"blocking_s\":%.6f,\"immediate_s\":%.6f,\"overlapped_exposed_s\":%.6f,\"gathers\":%lld}\n",
               pt_dist_layout(d).dp, (long long)pt_dp_stats_get(dp).buckets, (long long)(4 * pt_param_numel(ctx)), steps, median(wr, steps), median(wb, steps),
               median(wo, steps), (long long)pt_dp_stats_get(dp).gathers);
    fflush(stdout);
    free(cnt);
    free(raw);
    pt_dp_free(dp);
    pt_shutdown(ctx);
}

static void bench_zero(pt_dist *d, int stage) {
    pt_ctx *ctx = new_ctx(1);
    pt_gpt *m = small_gpt(ctx);
    pt_optim_desc od;
    pt_optim *o;
    pt_dp *dp;
    int64_t full;
    memset(&od, 0, sizeof od);
    od.kind = PT_OPTIM_ADAMW, od.lr = 1e-3f;
    o = pt_optim_new(ctx, &od);
    dp = pt_dp_new(ctx, d, (int64_t)1 << 20);
    if (!m || !o || !dp) {
        fprintf(stderr, "bench_dist zero: setup failed: %s\n", pt_error(ctx));
        exit(1);
    }
    full = pt_optim_state_bytes(o);
    if (pt_dp_zero(dp, o, stage) != PT_OK) {
        fprintf(stderr, "bench_dist zero: %s\n", pt_error(ctx));
        exit(1);
    }
    if (pt_dist_rank(d) == 0)
        printf("{\"bench\":\"zero\",\"stage\":%d,\"dp\":%d,\"bucket_bytes\":1048576,\"optimizer_bytes_per_rank\":%lld,\"full_bytes\":%lld,\"grad_slab_bytes\":%lld,"
               "\"reducer_bytes\":%lld}\n",
               stage, pt_dist_layout(d).dp, (long long)pt_optim_state_bytes(o), (long long)full, (long long)(4 * pt_param_numel(ctx)),
               (long long)pt_dp_stats_get(dp).extra_bytes);
    fflush(stdout);
    pt_dp_free(dp);
    pt_shutdown(ctx);
}

int main(int argc, char **argv) {
    char err[256];
    pt_dist *d = pt_dist_init(&argc, &argv, NULL, err, sizeof err);
    static const int64_t sizes[] = {(int64_t)1 << 20, (int64_t)4 << 20, (int64_t)16 << 20, (int64_t)64 << 20};
    int i;
    if (!d) {
        fprintf(stderr, "bench_dist: %s\n", err);
        return 1;
    }
    for (i = 0; i < 4; i++) bench_allreduce(d, sizes[i], sizes[i] >= ((int64_t)64 << 20) ? 5 : 9);
    bench_overlap(d, (int64_t)64 << 10, 21);
    bench_zero_gather(d, 15);
    bench_zero(d, 1);
    bench_zero(d, 2);
    pt_dist_finalize(d);
    return 0;
}
#endif
