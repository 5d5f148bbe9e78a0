/* test_memest.c - the memory estimate (>>memest) against the framework's own accounting.
   Build: mpicc -std=c99 -DPTRAIN_MPI -fopenmp -I. tests/test_memest.c -lm   (or cc without MPI: one rank)
   Run:   mpirun -np DP*TP*PP ./a.out DP TP PP ZERO SCHEDULE M [COMPRESS]   (SCHEDULE: gpipe | 1f1b)
   Every rank trains a GPT for 2 steps on the layout (AdamW; pt_dp over DP with ZERO; pt_pp over PP
   with M micro-batches, else M accumulated passes of one graph), then compares pt_mem_estimate for
   its pipeline rank with what pt_mem measured (params, grads, optim, activations, workspace, their
   total, peak_total) and pt_dp_stats extra_bytes: each within 10%. Rank 0 prints every rank's
   ratios (estimate / measured) and, not gated, the process's resident-memory growth against the
   estimated total. Also checks that bad plans are refused with a message. Prints PASS/FAIL lines
   and "N passed, N failed"; exits 1 on any failure. */
#define PTRAIN_IMPLEMENTATION
#include "ptrain.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* resident bytes of this process (0 where /proc is missing) */
static double rss_bytes(void) {
    long pages = 0, res = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return 0;
    if (fscanf(f, "%ld %ld", &pages, &res) != 2) res = 0;
    fclose(f);
    return (double)res * (double)sysconf(_SC_PAGESIZE);
}

typedef struct feed {
    const pt_gpt *m;
    const int32_t *ids, *tg;
    int B, T;
} feed;
static pt_tensor *stage_fn(pt_graph *g, int stage, int mb, pt_tensor *x, void *user) {
    feed *f = (feed *)user;
    int64_t shp[2];
    pt_tensor *ids = NULL, *tg = NULL;
    shp[0] = f->B, shp[1] = f->T;
    if (stage == 0) ids = pt_tensor_from(g, PT_I32, 2, shp, f->ids + (size_t)mb * f->B * f->T);
    if (stage == f->m->nstages - 1) tg = pt_tensor_from(g, PT_I32, 2, shp, f->tg + (size_t)mb * f->B * f->T);
    return pt_gpt_stage_fwd(g, f->m, stage, x, ids, tg);
}

enum { K_PARAMS, K_GRADS, K_OPTIM, K_ACT, K_WORK, K_TOTAL, K_PEAK, K_DPX, K_RSS, NK };
static const char *kname[NK] = {"params", "grads", "optim", "activations", "workspace", "total", "peak_total", "dp_extra", "rss(info)"};

/* bad plans: refused with a message naming the value */
static void bad_plans(void) {
    pt_gpt_config c;
    pt_mem_plan p;
    pt_mem_estimate_out o;
    char err[512];
    memset(&c, 0, sizeof c);
    c.vocab = 256, c.max_seq = 64, c.layers = 4, c.width = 64, c.heads = 2;
    memset(&p, 0, sizeof p);
    p.batch = 4, p.seq = 64, p.optim = PT_OPTIM_ADAMW;
    CHECK_WHY(pt_mem_estimate(&c, &p, -1, &o, err, sizeof err) == PT_OK && o.total > 0, "a plain plan is estimated", err);
    p.tp = 4;
    CHECK_WHY(pt_mem_estimate(&c, &p, -1, &o, err, sizeof err) == PT_ERR_ARG && strstr(err, "heads"), "tp not dividing heads is refused", err);
    p.tp = 1, p.precision = PT_BF16;
    CHECK_WHY(pt_mem_estimate(&c, &p, -1, &o, err, sizeof err) == PT_ERR_ARG && strstr(err, "f32 only"), "bf16 precision is refused", err);
    p.precision = PT_F32, p.recompute = 1;
    CHECK_WHY(pt_mem_estimate(&c, &p, -1, &o, err, sizeof err) == PT_ERR_ARG && strstr(err, "not implemented"), "recompute is refused", err);
    p.recompute = 0, p.pp = 8;
    CHECK_WHY(pt_mem_estimate(&c, &p, -1, &o, err, sizeof err) == PT_ERR_ARG && strstr(err, "layers"), "more stages than layers is refused", err);
    p.pp = 2, p.schedule = PT_PP_INTERLEAVED, p.micro_batches = 3;
    CHECK_WHY(pt_mem_estimate(&c, &p, -1, &o, err, sizeof err) == PT_ERR_ARG, "interleaved with m % p != 0 is refused", err);
    p.schedule = PT_PP_1F1B, p.micro_batches = 4, p.seq = 65;
    CHECK_WHY(pt_mem_estimate(&c, &p, -1, &o, err, sizeof err) == PT_ERR_ARG && strstr(err, "max_seq"), "seq > max_seq is refused", err);
    p.seq = 64, p.zero = 3;
    CHECK_WHY(pt_mem_estimate(&c, &p, 1, &o, err, sizeof err) == PT_ERR_ARG && strstr(err, "zero 3"), "zero 3 is refused", err);
    p.zero = 0;
    CHECK_WHY(pt_mem_estimate(&c, &p, 2, &o, err, sizeof err) == PT_ERR_ARG && strstr(err, "pp_rank"), "pp_rank outside is refused", err);
    /* what ZeRO saves: the optimizer state shrinks with dp, stage 2 holds a gradient shard besides */
    {
        pt_mem_estimate_out z0, z1, z2;
        p.pp = 1, p.dp = 4, p.micro_batches = 1;
        pt_mem_estimate(&c, &p, 0, &z0, err, sizeof err);
        p.zero = 1;
        pt_mem_estimate(&c, &p, 0, &z1, err, sizeof err);
        p.zero = 2;
        pt_mem_estimate(&c, &p, 0, &z2, err, sizeof err);
        snprintf(err, sizeof err, "optim %lld / %lld / %lld, dp_extra %lld / %lld / %lld", (long long)z0.optim, (long long)z1.optim,
                 (long long)z2.optim, (long long)z0.dp_extra, (long long)z1.dp_extra, (long long)z2.dp_extra);
        CHECK_WHY(z1.optim * 4 >= z0.optim && z1.optim * 4 < z0.optim + 4 * 64 * 8 && z2.optim == z1.optim && z2.dp_extra > z1.dp_extra,
                  "ZeRO-1/2 divide the moments by dp, ZeRO-2 adds the gradient shard", err);
    }
}

int main(int argc, char **argv) {
    pt_layout lay;
    pt_dist *d;
    pt_ctx *ctx = NULL;
    pt_desc desc;
    pt_gpt_config cfg;
    pt_mem_plan plan;
    pt_mem_estimate_out est;
    pt_gpt *m = NULL;
    pt_optim *opt = NULL;
    pt_dp *dp = NULL;
    pt_pp *pp = NULL;
    pt_graph *g = NULL;
    feed f;
    char err[1024] = "", name[256];
    int zero, kind, M, compress, rank, world, s, nst, step, mb, B = 64, T = 64, mine[4], nmine = 0;
    int32_t first[9];
    int32_t *ids, *tg;
    double rss0, meas[NK], ratio[NK], *all = NULL;
    pt_coords me;
    pt_rng rng = pt_rng_seed(7);
    memset(&lay, 0, sizeof lay);
    lay.dp = argc > 1 ? atoi(argv[1]) : 1, lay.tp = argc > 2 ? atoi(argv[2]) : 1, lay.pp = argc > 3 ? atoi(argv[3]) : 1;
    zero = argc > 4 ? atoi(argv[4]) : 0;
    kind = argc > 5 && !strcmp(argv[5], "gpipe") ? PT_PP_GPIPE : PT_PP_1F1B;
    M = argc > 6 ? atoi(argv[6]) : 1;
    compress = argc > 7 ? atoi(argv[7]) : 0;
    d = pt_dist_init(&argc, &argv, &lay, err, sizeof err);
    if (!d) {
        printf("FAIL pt_dist_init: %s\n0 passed, 1 failed\n", err);
        return 1;
    }
    rank = pt_dist_rank(d), world = pt_dist_size(d), me = pt_dist_coords(d);
    tu_mpi_init(NULL);
    bad_plans();
    /* a long, narrow model: activations above the 64 MiB arena chunk on every stage of pp 2 */
    memset(&cfg, 0, sizeof cfg);
    cfg.vocab = 256, cfg.max_seq = T, cfg.layers = 12, cfg.width = 64, cfg.heads = 2;
    memset(&plan, 0, sizeof plan);
    plan.dp = lay.dp, plan.tp = lay.tp, plan.pp = lay.pp, plan.zero = zero, plan.micro_batches = M, plan.batch = B, plan.seq = T;
    plan.schedule = kind, plan.optim = PT_OPTIM_ADAMW, plan.compress = compress, plan.bucket_bytes = 1 << 20, plan.threads = 1;
    ids = (int32_t *)malloc(sizeof(int32_t) * (size_t)M * B * T);
    tg = (int32_t *)malloc(sizeof(int32_t) * (size_t)M * B * T);
    for (s = 0; s < M * B * T; s++) ids[s] = (int32_t)(pt_rng_u32(&rng) % 256), tg[s] = (int32_t)(pt_rng_u32(&rng) % 256);
    rss0 = rss_bytes();
    memset(&desc, 0, sizeof desc);
    desc.dist = d, desc.threads = 1, desc.seed = 1;
    ctx = pt_init(&desc);
    nst = lay.pp;
    if (ctx && pt_pp_split(cfg.layers, nst, NULL, 0, 0, first, err, sizeof err) == PT_OK) {
        pt_optim_desc od;
        mine[nmine++] = me.pp;
        m = pt_gpt_new_stages(ctx, &cfg, nst, first, nmine, mine);
        memset(&od, 0, sizeof od);
        od.kind = PT_OPTIM_ADAMW, od.lr = 1e-3f, od.weight_decay = 0.1f;
        if (m) opt = pt_optim_new(ctx, &od);
        if (opt && lay.dp > 1) {
            pt_dp_options o;
            memset(&o, 0, sizeof o);
            o.bucket_bytes = plan.bucket_bytes, o.compress = compress;
            if ((dp = pt_dp_new_opts(ctx, d, &o)) != NULL && zero) pt_dp_zero(dp, opt, zero);
        }
        f.m = m, f.ids = ids, f.tg = tg, f.B = B, f.T = T;
        if (opt && lay.pp > 1) {
            pt_pp_desc pd;
            memset(&pd, 0, sizeof pd);
            pd.kind = kind, pd.micro_batches = M, pd.forward = stage_fn, pd.user = &f;
            if ((pp = pt_pp_new(ctx, &pd)) != NULL) pt_pp_set_dp(pp, dp);
        } else if (opt) {
            g = pt_graph_new(ctx);
        }
        for (step = 0; step < 2 && pt_status_get(ctx) == PT_OK; step++) {
            pt_zero_grad(ctx);
            if (pp) {
                pt_pp_step(pp, 0, 1);
            } else {
                if (dp) pt_dp_begin_step(dp, M);
                for (mb = 0; mb < M; mb++) {
                    pt_tensor *x, *y;
                    pt_graph_reset(g);
                    x = pt_tensor_new(g, PT_I32, 2, B, T, 0, 0), y = pt_tensor_new(g, PT_I32, 2, B, T, 0, 0);
                    pt_tensor_write(x, ids + (size_t)mb * B * T), pt_tensor_write(y, tg + (size_t)mb * B * T);
                    pt_backward(g, pt_gpt_loss(g, m, x, y));
                }
                if (dp) pt_dp_finish(dp);
            }
            pt_optim_step(opt, 1e-3f);
        }
    }
    if (!ctx) snprintf(err, sizeof err, "pt_init failed");
    else if (pt_status_get(ctx) != PT_OK) snprintf(err, sizeof err, "%s", pt_error(ctx));
    if (!err[0] && pt_mem_estimate(&cfg, &plan, me.pp, &est, err, sizeof err) != PT_OK && !err[0]) snprintf(err, sizeof err, "estimate failed");
    if (CHECK_WHY(!err[0], "every rank trains 2 steps and has its estimate", err)) {
        pt_mem_stats ms = pt_mem(ctx);
        double e[NK];
        int k, r;
        meas[K_PARAMS] = (double)ms.params, meas[K_GRADS] = (double)ms.grads, meas[K_OPTIM] = (double)ms.optim;
        meas[K_ACT] = (double)ms.activations, meas[K_WORK] = (double)ms.workspace;
        meas[K_TOTAL] = (double)(ms.params + ms.grads + ms.optim + ms.activations + ms.workspace);
        meas[K_PEAK] = (double)ms.peak_total, meas[K_DPX] = dp ? (double)pt_dp_stats_get(dp).extra_bytes : 0;
        meas[K_RSS] = rss_bytes() - rss0;
        e[K_PARAMS] = (double)est.params, e[K_GRADS] = (double)est.grads, e[K_OPTIM] = (double)est.optim;
        e[K_ACT] = (double)est.activations, e[K_WORK] = (double)est.workspace, e[K_TOTAL] = (double)est.total;
        e[K_PEAK] = (double)est.peak_total, e[K_DPX] = (double)est.dp_extra, e[K_RSS] = (double)(est.total + est.dp_extra);
        for (k = 0; k < NK; k++) ratio[k] = meas[k] == 0 && e[k] == 0 ? 1.0 : meas[k] > 0 ? e[k] / meas[k] : INFINITY;
        if (rank == 0) all = (double *)malloc(sizeof(double) * (size_t)world * (2 * NK + 2));
        {
            double mine_row[2 * NK + 2];
            for (k = 0; k < NK; k++) mine_row[k] = ratio[k], mine_row[NK + k] = meas[k];
            mine_row[2 * NK] = me.pp, mine_row[2 * NK + 1] = est.in_flight;
#ifdef PTRAIN_MPI
            MPI_Gather(mine_row, 2 * NK + 2, MPI_DOUBLE, all, 2 * NK + 2, MPI_DOUBLE, 0, *(MPI_Comm *)pt_dist_comm(d, PT_COMM_WORLD));
#else
            memcpy(all, mine_row, sizeof mine_row);
#endif
        }
        tu_solo(1); /* rank 0 checks every rank's ratios */
        if (rank == 0) {
            printf("layout dp %d x tp %d x pp %d, zero %d, %s, m %d%s: estimate / measured per rank (measured MiB)\n", lay.dp, lay.tp, lay.pp, zero,
                   lay.pp > 1 ? (kind == PT_PP_GPIPE ? "GPipe" : "1F1B") : "accumulation", M, compress ? ", bf16" : "");
            for (r = 0; r < world; r++) {
                double *row = all + (size_t)r * (2 * NK + 2);
                int ok = 1;
                char line[1024];
                size_t n = 0;
                n += (size_t)snprintf(line + n, sizeof line - n, "rank %d (pp %d, %d in flight):", r, (int)row[2 * NK], (int)row[2 * NK + 1]);
                for (k = 0; k < NK; k++) {
                    n += (size_t)snprintf(line + n, sizeof line - n, " %s %.3f (%.1f)", kname[k], row[k], row[NK + k] / 1048576.0);
                    if (k != K_RSS && fabs(row[k] - 1.0) > 0.10) ok = 0;
                }
                printf("  %s\n", line);
                snprintf(name, sizeof name, "rank %d: every part and the total within 10%% of pt_mem / pt_dp_stats", r);
                CHECK_WHY(ok, name, "a ratio above is outside [0.9, 1.1]");
            }
        }
        tu_solo(0);
    }
    free(all);
    pt_pp_free(pp);
    pt_dp_free(dp);
    pt_gpt_free(m);
    pt_shutdown(ctx);
    free(ids);
    free(tg);
    s = tu_summary();
    pt_dist_finalize(d);
    return s;
}
