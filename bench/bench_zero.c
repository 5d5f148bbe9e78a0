/* bench_zero.c - ZeRO-0..3 (pt_dp_zero) on data parallelism: the model state each DP rank keeps
   between steps, apart from the transient buffers, and the step time; one JSON line per stage:

   {"bench":"zero","stage":3,"dp":4,"params":P,"model_state_bytes_per_rank":...,"transient_bytes_per_rank":...,...}

   model_state_bytes_per_rank (persistent: what a rank holds between steps): the parameters it keeps
   (pt_mem params after the update: the slab, or the ZeRO-3 shard), its gradient storage proper (the
   slab, or the ZeRO-2/3 shard: pt_grad_slab) and its optimizer state (pt_optim_state_bytes: the
   moments, or their shard). transient_bytes_per_rank: what exists only while a step runs: the
   ZeRO-2/3 gradient bucket buffers (pt_mem grads minus the shard) and the ZeRO-3 parameter buckets
   gathered for use (pt_dp_stats params_peak minus the shard). state_bound: 16 P / dp bytes (f32
   parameter, gradient and two moments, each 1/dp): state_ratio = model state / it. The largest rank's
   numbers (the last DP rank's shard may be larger). step_s: median over the timed steps of the
   slowest rank; gather_wait_share: the seconds waited for parameter gathers (pt_dp_stats
   gather_wait_s) over the step time, the exposed part of ZeRO's gathers (ZeRO-1/2: one blocking
   all-gather after the update; ZeRO-3: per block, prefetched). The stages train the same model from
   the same init on the same global batch; same_loss says each stage's losses equal stage 0's to 1e-5.

   mpirun -np DP bench_zero [B|quick] [steps]
     B      config B (6 layers, width 384, 6 heads, vocab 512, T = 256), global batch 8 (default)
     quick  2 layers, width 64, T = 64, global batch 8 (for tests)
   steps: timed steps per stage after 2 warm-up steps (default 5).
   Build: mpicc -O3 -march=native -fopenmp -DPTRAIN_MPI -I. bench/bench_zero.c -o build/bench_zero -lm */
#define PTRAIN_IMPLEMENTATION
#include "ptrain.h"

#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"

#define MAXSTEPS 32

/* the largest value over the world (a double) */
static double world_max(const pt_dist *d, double x) {
#ifdef PTRAIN_MPI
    MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_DOUBLE, MPI_MAX, *(MPI_Comm *)pt_dist_comm(d, PT_COMM_WORLD));
#else
    (void)d;
#endif
    return x;
}
/* the mean loss over the DP ranks */
static double dp_mean(const pt_dist *d, double x, int dp) {
#ifdef PTRAIN_MPI
    MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_DOUBLE, MPI_SUM, *(MPI_Comm *)pt_dist_comm(d, PT_COMM_DP));
#else
    (void)d;
#endif
    return x / dp;
}

int main(int argc, char **argv) {
    const char *which = argc > 1 ? argv[1] : "B";
    int steps = argc > 2 ? atoi(argv[2]) : 5, B = 8, T, stage, s, i, dp, rank;
    pt_layout lay;
    pt_dist *d;
    pt_gpt_config cfg;
    char err[256];
    int32_t *ids;
    float loss0[MAXSTEPS + 2];
    memset(&lay, 0, sizeof lay);
    if (!(d = pt_dist_init(&argc, &argv, &lay, err, sizeof err))) return fprintf(stderr, "bench_zero: %s\n", err), 1;
    dp = pt_dist_layout(d).dp, rank = pt_dist_rank(d);
    memset(&cfg, 0, sizeof cfg);
    if (!strcmp(which, "B")) cfg.vocab = 512, cfg.layers = 6, cfg.width = 384, cfg.heads = 6, T = 256;
    else if (!strcmp(which, "quick")) cfg.vocab = 256, cfg.layers = 2, cfg.width = 64, cfg.heads = 2, T = 64;
    else return fprintf(stderr, "bench_zero: unknown config '%s' (expected B or quick)\n", which), pt_dist_finalize(d), 2;
    if (steps < 1 || steps > MAXSTEPS) steps = 5;
    if (dp < 2 || B % dp) return fprintf(stderr, "bench_zero: needs 2, 4 or 8 DP ranks (found %d)\n", dp), pt_dist_finalize(d), 2;
    cfg.max_seq = T;
    ids = (int32_t *)malloc(sizeof(int32_t) * (size_t)(B * (T + 1)));
    if (!ids) return 1;
    {
        pt_rng rng = pt_rng_seed(11);
        for (i = 0; i < B * (T + 1); i++) ids[i] = (int32_t)(pt_rng_u32(&rng) % (uint32_t)cfg.vocab);
    }
    for (stage = 0; stage <= 3; stage++) {
        pt_desc desc;
        pt_optim_desc od;
        pt_ctx *ctx;
        pt_gpt *m;
        pt_optim *opt;
        pt_dp *pd;
        pt_graph *g;
        double t[MAXSTEPS], wait0 = 0, wait1 = 0, state, transient, params_held, grad_shard, loss_diff = 0;
        int64_t P, rows = B / dp;
        pt_dp_options o;
        pt_dp_stats st;
        memset(&desc, 0, sizeof desc);
        desc.dist = d, desc.threads = 1, desc.seed = 3;
        ctx = pt_init(&desc);
        m = pt_gpt_new(ctx, &cfg);
        memset(&od, 0, sizeof od);
        od.kind = PT_OPTIM_ADAMW, od.lr = 1e-3f, od.weight_decay = 0.1f;
        opt = pt_optim_new(ctx, &od);
        memset(&o, 0, sizeof o);
        o.bucket_bytes = 1 << 20; /* 1 MiB buckets: several per block */
        pd = pt_dp_new_opts(ctx, d, &o);
        if (!m || !opt || !pd || (stage && pt_dp_zero(pd, opt, stage) != PT_OK)) {
            fprintf(stderr, "bench_zero: set-up of stage %d failed: %s\n", stage, pt_error(ctx));
            return 1;
        }
        g = pt_graph_new(ctx);
        P = pt_param_numel(ctx);
        for (s = 0; s < steps + 2; s++) {
            pt_tensor *x, *y;
            double t0, lv;
            pt_zero_grad(ctx);
            pt_graph_reset(g);
            t0 = pt_time();
            if (s == 2) wait0 = pt_dp_stats_get(pd).gather_wait_s;
            pt_dp_begin_step(pd, 1);
            x = pt_tensor_new(g, PT_I32, 2, rows, T, 0, 0), y = pt_tensor_new(g, PT_I32, 2, rows, T, 0, 0);
            { /* this rank's rows of the global batch: sample r is ids[r (T + 1) ..], its target shifted by one */
                int32_t *xb = (int32_t *)malloc(sizeof(int32_t) * (size_t)(rows * T)), *yb = (int32_t *)malloc(sizeof(int32_t) * (size_t)(rows * T));
                int64_t r0 = (int64_t)pt_dist_coords(d).dp * rows, j;
                if (!xb || !yb) return 1;
                for (i = 0; i < rows; i++)
                    for (j = 0; j < T; j++) xb[i * T + j] = ids[(r0 + i) * (T + 1) + j], yb[i * T + j] = ids[(r0 + i) * (T + 1) + j + 1];
                pt_tensor_write(x, xb), pt_tensor_write(y, yb);
                free(xb), free(yb);
            }
            {
                pt_tensor *l = pt_gpt_loss(g, m, x, y);
                lv = l ? pt_item(l) : NAN;
                pt_backward(g, l);
            }
            pt_dp_finish(pd);
            pt_optim_step(opt, 1e-3f);
            if (s >= 2) t[s - 2] = world_max(d, pt_time() - t0);
            lv = dp_mean(d, lv, dp);
            if (stage == 0) loss0[s] = (float)lv;
            else loss_diff = fmax(loss_diff, fabs(lv - loss0[s]) / fabs((double)loss0[s]));
        }
        wait1 = pt_dp_stats_get(pd).gather_wait_s;
        st = pt_dp_stats_get(pd);
        {
            pt_tensor gs = pt_grad_slab(ctx);
            pt_mem_stats ms = pt_mem(ctx);
            grad_shard = 4.0 * (double)pt_numel(&gs);
            params_held = (double)ms.params;
            state = params_held + grad_shard + (double)pt_optim_state_bytes(opt);
            transient = ((double)ms.grads - grad_shard) + (stage == 3 ? (double)st.params_peak - params_held : 0.0);
        }
        state = world_max(d, state), transient = world_max(d, transient);
        {
            double med = median(t, steps), wait = world_max(d, (wait1 - wait0) / steps);
            if (rank == 0)
                printf("{\"bench\":\"zero\",\"config\":\"%s\",\"stage\":%d,\"dp\":%d,\"params\":%lld,\"model_state_bytes_per_rank\":%.0f,"
                       "\"transient_bytes_per_rank\":%.0f,\"state_bound\":%.0f,\"state_ratio\":%.4f,\"step_s\":%.4f,\"tokens_per_s\":%.1f,"
                       "\"gather_wait_s\":%.5f,\"gather_wait_share\":%.4f,\"gathers_per_step\":%.1f,\"same_loss\":%s}\n",
                       which, stage, dp, (long long)P, state, transient, 16.0 * (double)P / dp, state / (16.0 * (double)P / dp), med,
                       (double)(B * T) / med, wait, wait / med, (double)st.gathers / (steps + 2), stage == 0 || loss_diff <= 1e-5 ? "true" : "false");
        }
        pt_graph_free(g);
        pt_dp_free(pd);
        pt_gpt_free(m);
        pt_shutdown(ctx);
        fflush(stdout);
    }
    free(ids);
    pt_dist_finalize(d);
    return 0;
}
