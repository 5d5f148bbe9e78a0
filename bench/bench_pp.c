/* bench_pp.c - the pipeline bubble, measured against theory, for GPipe, 1F1B and interleaved 1F1B.

   Run under mpirun -np 2 (p = 2 pipeline ranks, dp = 1, one thread per rank). A staged GPT with
   equal stages trains a few warm steps with each schedule; for each, one JSON line:
   {"bench":"pipeline","schedule":"1f1b","p":2,"m":8,"v":1,"bubble_measured":..,"bubble_theory":..,
    "bubble_equal_stages":..,"t_fwd_ms":..,"t_bwd_ms":..,"step_ms":..}
   bubble_measured: idle share of the step, 1 - busy/step, averaged over the pipeline ranks (median
   of the steps); bubble_theory: the event simulation of the same schedule with the measured mean
   forward and backward times of a stage (transfers free); bubble_equal_stages: (p-1)/(v*m+p-1).
   Build: mpicc -O3 -march=native -fopenmp -DPTRAIN_MPI -I. bench/bench_pp.c -o build/bench_pp -lm */
#define PTRAIN_IMPLEMENTATION
#include "ptrain.h"

#include <stdio.h>
#include <string.h>

#ifndef PTRAIN_MPI
int main(void) {
    fprintf(stderr, "bench_pp needs -DPTRAIN_MPI (build with mpicc)\n");
    return 1;
}
#else
#include "bench_util.h"

enum { B = 32, T = 64, STEPS = 9 };

typedef struct feed {
    pt_gpt *m;
    int32_t ids[B * T], tg[B * T];
    int mbs;
} feed;

static pt_tensor *stage_fn(pt_graph *g, int stage, int mb, pt_tensor *x, void *user) {
    feed *f = (feed *)user;
    int rows = B / f->mbs;
    int64_t shp[2];
    shp[0] = rows, shp[1] = T;
    return pt_gpt_stage_fwd(g, f->m, stage, x, stage == 0 ? pt_tensor_from(g, PT_I32, 2, shp, f->ids + mb * rows * T) : NULL,
                            stage == f->m->nstages - 1 ? pt_tensor_from(g, PT_I32, 2, shp, f->tg + mb * rows * T) : NULL);
}

static void run(pt_dist *d, int kind, const char *name, int m, int v) {
    pt_desc desc;
    pt_gpt_config cfg;
    pt_optim_desc od;
    pt_pp_desc pd;
    pt_ctx *ctx;
    pt_optim *opt;
    pt_pp *pp;
    pt_pp_schedule *sc;
    feed f;
    int p = pt_dist_layout(d).pp, r = pt_dist_coords(d).pp, nst = p * v, mine[8], i, s;
    int32_t first[17];
    double bub[STEPS], tf = 0, tb = 0, step = 0, t[3];
    char err[256];
    memset(&desc, 0, sizeof desc);
    desc.seed = 1, desc.threads = 1, desc.dist = d;
    ctx = pt_init(&desc);
    memset(&cfg, 0, sizeof cfg);
    cfg.vocab = 256, cfg.max_seq = T, cfg.layers = 8, cfg.width = 128, cfg.heads = 4;
    pt_pp_split(cfg.layers, nst, NULL, 0, 0, first, err, sizeof err);
    for (i = 0; i < v; i++) mine[i] = i * p + r;
    memset(&f, 0, sizeof f);
    f.mbs = m;
    f.m = pt_gpt_new_stages(ctx, &cfg, nst, first, v, mine);
    {
        pt_rng g = pt_rng_seed(5);
        for (i = 0; i < B * T; i++) f.ids[i] = (int32_t)(pt_rng_u32(&g) % 256), f.tg[i] = (int32_t)(pt_rng_u32(&g) % 256);
    }
    memset(&od, 0, sizeof od);
    od.kind = PT_OPTIM_ADAMW, od.lr = 1e-3f;
    opt = pt_optim_new(ctx, &od);
    memset(&pd, 0, sizeof pd);
    pd.kind = kind, pd.micro_batches = m, pd.virtual_stages = v, pd.forward = stage_fn, pd.user = &f;
    pp = pt_pp_new(ctx, &pd);
    if (!pp) {
        fprintf(stderr, "bench_pp: %s\n", pt_error(ctx));
        pt_shutdown(ctx);
        return;
    }
    for (s = -2; s < STEPS; s++) { /* two warm-up steps */
        pt_pp_stats st;
        pt_zero_grad(ctx);
        pt_pp_step(pp, 0, 1);
        pt_optim_step(opt, od.lr);
        st = pt_pp_stats_get(pp);
        if (s < 0) continue;
        bub[s] = st.bubble;
        tf += st.fwd_s, tb += st.bwd_s, step += st.step_s;
    }
    /* mean stage forward/backward times over the ranks and steps */
    t[0] = tf / (STEPS * m * v), t[1] = tb / (STEPS * m * v), t[2] = step / STEPS;
    MPI_Allreduce(MPI_IN_PLACE, t, 3, MPI_DOUBLE, MPI_SUM, *(MPI_Comm *)pt_dist_comm(d, PT_COMM_PP));
    for (i = 0; i < 3; i++) t[i] /= p;
    sc = pt_pp_schedule_new(kind, p, m, v, NULL, 0);
    if (r == 0)
        printf("{\"bench\":\"pipeline\",\"schedule\":\"%s\",\"p\":%d,\"m\":%d,\"v\":%d,\"bubble_measured\":%.4f,\"bubble_theory\":%.4f,"
               "\"bubble_equal_stages\":%.4f,\"t_fwd_ms\":%.3f,\"t_bwd_ms\":%.3f,\"step_ms\":%.2f}\n",
               name, p, m, v, median(bub, STEPS), pt_pp_schedule_simulate(sc, t[0], t[1], NULL), pt_pp_bubble_theory(p, m, v), t[0] * 1e3,
               t[1] * 1e3, t[2] * 1e3);
    fflush(stdout);
    pt_pp_schedule_free(sc);
    pt_pp_free(pp);
    pt_gpt_free(f.m);
    pt_shutdown(ctx);
}

int main(int argc, char **argv) {
    char err[256];
    pt_layout lay = {1, 1, 0, 0};
    pt_dist *d = pt_dist_init(&argc, &argv, &lay, err, sizeof err);
    int m = 8;
    if (!d) {
        fprintf(stderr, "bench_pp: %s\n", err);
        return 1;
    }
    run(d, PT_PP_GPIPE, "gpipe", m, 1);
    run(d, PT_PP_1F1B, "1f1b", m, 1);
    run(d, PT_PP_INTERLEAVED, "interleaved", m, 2);
    pt_dist_finalize(d);
    return 0;
}
#endif
