/* 07_gpt_3d.c - the GPT of 03 on a 3D layout: data x tensor x pipeline parallelism.

   Build: mpicc -O2 -fopenmp -DPTRAIN_MPI -DPTRAIN_OPENCL -I. examples/07_gpt_3d.c -o build/07_gpt_3d -lm
   Run: mpirun -np 4 ./build/07_gpt_3d --dp 2 --pp 2 --steps 300

   What it teaches: how the three kinds of parallelism compose around one model.
   1. The grid: the world's ranks form a dp x tp x pp grid (pt_dist_init; the rank table is
      printed). Each rank's context knows its coordinates (pt_desc.dist).
   2. The pipeline cut: the layers are cut into pp x v stages balanced by a FLOP estimate
      (pt_gpt_stage_costs, pt_pp_split); pipeline rank r creates only the parameters of its stages
      r, r + pp, ... (pt_gpt_new_stages), with tensor-parallel layers when tp > 1 (Megatron: the
      heads and the MLP split over the tp ranks, one allreduce each forward and backward).
   3. The schedule: a pt_pp runtime calls one stage function for every (stage, micro-batch) in the
      order of GPipe, 1F1B or interleaved 1F1B (printed as a table), sending activations forward
      and gradients back between the pipeline ranks.
   4. The DP reducer: pt_dp averages the gradients over the dp replicas in buckets, each started
      while backward still runs (pt_pp_step drives it); --zero 1 shards the optimizer state over
      the replicas, --zero 2 the gradients too, --zero 3 the parameters too.
   --batch is the global batch: each DP rank's loader reads its rows of it and each micro-batch is a
   slice of those, so every layout computes the loss of the same batch, and the losses follow those
   of 03 (to float rounding: other layouts sum in another order).

   Flags: the shared set (--steps --seed --batch --seq --lr --layers --width --heads --stop-after
   --device, cpu or opencl[:P[:D]] on every rank), --data DIR (as in 03_gpt.c), the layout --dp D --tp T
   --pp P (0 = the rest of the world; default: all data parallel), --schedule gpipe|1f1b|interleaved
   (1f1b), --virtual-stages V (stages per pipeline rank when interleaved; 2), --micro-batches M
   (default pp), --zero 0|1|2|3. Rank 0 prints `step <n> loss <l> lr <lr> norm <g> ms <ms> tok/s <t>
   bubble <b> data_ms <d>` (b: the pipeline's idle share), then what the DP reducer did (`dp: ...`)
   and `val_loss <v>`. Checkpoints, logs, accumulation, splits by hand and generation on any
   layout: tools/pttrain. */
#define PTRAIN_IMPLEMENTATION
#define PTRAIN_HARNESS
#include "ptrain.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* what the stage function reads: the model and this DP rank's rows of the current global batch */
typedef struct feed {
    pt_gpt *m;
    const int32_t *ids, *tg; /* [rows, T] each */
    int T, rows, mbs;        /* rows per DP rank, in mbs micro-batches */
    int base;                /* the global index of the first row (dropout masks follow it) */
} feed;

/* stage `stage` of micro-batch mb: stage 0 embeds the micro-batch's ids, the others continue from
   the activation x that arrived, the last one ends with the loss against the targets */
static pt_tensor *stage_fn(pt_graph *g, int stage, int mb, pt_tensor *x, void *user) {
    feed *f = (feed *)user;
    int rows = f->rows / f->mbs;
    size_t first = (size_t)mb * rows * f->T;
    int64_t shape[2];
    pt_tensor *ids = NULL, *tg = NULL;
    shape[0] = rows, shape[1] = f->T;
    pt_graph_set_sample_offset(g, f->base + mb * rows);
    if (stage == 0) ids = pt_tensor_from(g, PT_I32, 2, shape, f->ids + first);
    if (stage == f->m->nstages - 1) tg = pt_tensor_from(g, PT_I32, 2, shape, f->tg + first);
    return pt_gpt_stage_fwd(g, f->m, stage, x, ids, tg);
}

/* the mean loss over the first batches of the validation stream: forward-only through the whole
   pipeline (pt_pp_eval averages over micro-batches and DP ranks) */
static float val_loss(pt_pp *pp, pt_run *data, int32_t *ids, int32_t *tg, int batches) {
    int j, n = pt_run_val_rewind(data, batches);
    float sum = 0;
    for (j = 0; j < n; j++) {
        if (pt_loader_next(data->val, ids, tg) != PT_OK) return NAN;
        sum += pt_pp_eval(pp);
    }
    return n ? sum / (float)n : NAN;
}

static const char *const schedules[] = {"gpipe", "1f1b", "interleaved"}; /* PT_PP_GPIPE, _1F1B, _INTERLEAVED */

int main(int argc, char **argv) {
    pt_args a;
    pt_run data; /* its data part: shards, this DP rank's loaders */
    pt_layout lay = {0, 1, 1, 0};
    pt_dist *d;
    pt_desc desc;
    pt_ctx *ctx;
    pt_gpt_config cfg;
    pt_gpt *m = NULL;
    pt_optim_desc od;
    pt_optim *opt = NULL;
    pt_dp *dp = NULL;
    pt_pp *pp = NULL;
    pt_pp_desc pd;
    pt_lr_schedule sched;
    pt_coords me;
    feed f;
    char err[1024];
    int zero = 0, kind = PT_PP_1F1B, vstages = 2, mbs = 0, B, T, nst, nmine = 0, rank, fail = 0, i, s;
    int32_t first[257], mine[256], *ids, *tg;
    int64_t step, last;
    double *cost, fe, le;

    memset(&a, 0, sizeof a);
    a.steps = 600, a.seed = 1337, a.batch = 16, a.seq = 256, a.layers = 4, a.width = 256, a.heads = 8, a.lr = 2e-3f;
    memset(&data, 0, sizeof data);
    data.data = "data/fortunes", data.prepare = pt_run_fortunes;
    argc = pt_args_parse(&a, argc, argv, err, sizeof err);
    for (i = 1; i < argc; i += 2) { /* this program's flags, each with a value */
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int *num = !strcmp(k, "--dp") ? &lay.dp : !strcmp(k, "--tp") ? &lay.tp : !strcmp(k, "--pp") ? &lay.pp : !strcmp(k, "--zero") ? &zero
                 : !strcmp(k, "--virtual-stages") ? &vstages : !strcmp(k, "--micro-batches") ? &mbs : NULL;
        int64_t x;
        if (!v) snprintf(err, sizeof err, "unknown flag or missing value: '%s'", k), argc = -1;
        else if (num) {
            if (pt_args_int(k, v, 0, 1 << 20, &x, err, sizeof err) != 0) argc = -1;
            else *num = (int)x;
        }
        else if (!strcmp(k, "--data")) data.data = v, data.prepare = NULL;
        else if (!strcmp(k, "--schedule")) {
            for (kind = 0; kind < 3 && strcmp(v, schedules[kind]); kind++) {}
            if (kind == 3) snprintf(err, sizeof err, "--schedule expects gpipe, 1f1b or interleaved, found '%s'", v), argc = -1;
        } else snprintf(err, sizeof err, "unknown flag '%s'", k), argc = -1;
    }
    if (argc < 0 || zero < 0 || zero > 3) {
        fprintf(stderr, "07_gpt_3d: %s (try --help)\n", argc < 0 ? err : "--zero expects 0, 1, 2 or 3");
        return 2;
    }
    if (a.help) {
        pt_args_usage(&a, "07_gpt_3d", "  --data DIR            token shards or text (data/fortunes)\n"
                                       "  --dp D --tp T --pp P  layout (0 = the rest of the world; default all data parallel)\n"
                                       "  --schedule S          gpipe, 1f1b or interleaved (1f1b)\n"
                                       "  --virtual-stages V    stages per pipeline rank for interleaved (2)\n"
                                       "  --micro-batches M     micro-batches per step (default: pp)\n"
                                       "  --zero Z              0, 1 (optimizer state sharded over DP), 2 (gradients too) or 3 (parameters too) (0)");
        return 0;
    }
    if (kind != PT_PP_INTERLEAVED) vstages = 1;
    B = (int)a.batch, T = (int)a.seq;
    last = a.stop_after && a.stop_after < a.steps ? a.stop_after : a.steps;

    /* 1. The grid, and a context on it. */
    if (!(d = pt_dist_init(&argc, &argv, &lay, err, sizeof err))) {
        fprintf(stderr, "07_gpt_3d: %s\n", err);
        return 1;
    }
    lay = pt_dist_layout(d), rank = pt_dist_rank(d), me = pt_dist_coords(d);
    if (mbs <= 0) mbs = lay.pp;
    pt_dist_print(d, NULL);
    memset(&desc, 0, sizeof desc);
    desc.seed = (uint64_t)a.seed, desc.device = a.device, desc.dist = d, desc.precision = a.precision;
    ctx = pt_init(&desc);
    err[0] = 0;
    nst = lay.pp * vstages;
    ids = (int32_t *)malloc(sizeof(int32_t) * (size_t)B * T);
    tg = (int32_t *)malloc(sizeof(int32_t) * (size_t)B * T);
    if (!ctx || !ids || !tg) snprintf(err, sizeof err, "cannot start: %s", ctx ? "out of memory" : "pt_init failed (the reason is logged above)");
    else if (B % lay.dp || (B / lay.dp) % mbs)
        snprintf(err, sizeof err, "--batch %d must split over dp = %d ranks, then into %d micro-batches", B, lay.dp, mbs);
    else if (nst > 256 || nst > a.layers) snprintf(err, sizeof err, "%d layers cannot fill pp x v = %d stages", (int)a.layers, nst);
    if (!pt_dist_agree_msg(d, !err[0], err, sizeof err) || pt_run_data(ctx, &data, B, T, (uint64_t)a.seed) != PT_OK) {
        if (rank == 0) fprintf(stderr, "07_gpt_3d: %s\n", err[0] ? err : pt_error(ctx));
        fail = 1;
        goto done;
    }

    /* 2. The pipeline cut, and this pipeline rank's stages of the model. */
    cfg = pt_args_gpt(&a, data.vocab);
    cost = (double *)malloc(sizeof(double) * (size_t)cfg.layers);
    pt_gpt_stage_costs(&cfg, B, T, cost, &fe, &le);
    if (pt_pp_split(cfg.layers, nst, cost, fe, le, first, err, sizeof err) == PT_OK) {
        for (s = me.pp; s < nst; s += lay.pp) mine[nmine++] = s; /* stages r, r + pp, ... */
        m = pt_gpt_new_stages(ctx, &cfg, nst, first, nmine, mine);
    }
    free(cost);
    od = pt_args_adamw(&a);
    if (m) opt = pt_optim_new(ctx, &od);

    /* 3. The DP reducer (with ZeRO), then the pipeline runtime that drives it. */
    if (opt && lay.dp > 1 && (dp = pt_dp_new(ctx, d, 0)) != NULL && zero) pt_dp_zero(dp, opt, zero);
    memset(&f, 0, sizeof f);
    f.m = m, f.ids = ids, f.tg = tg, f.T = T, f.rows = B / lay.dp, f.mbs = mbs, f.base = me.dp * (B / lay.dp);
    memset(&pd, 0, sizeof pd);
    pd.kind = kind, pd.micro_batches = mbs, pd.virtual_stages = vstages, pd.forward = stage_fn, pd.user = &f;
    if (opt) pp = pt_pp_new(ctx, &pd);
    pt_pp_set_dp(pp, dp);
    if (!err[0] && (!pp || pt_status_get(ctx) != PT_OK)) snprintf(err, sizeof err, "%s", pt_error(ctx));
    if (!pt_dist_agree_msg(d, !err[0], err, sizeof err)) {
        if (rank == 0) fprintf(stderr, "07_gpt_3d: %s\n", err);
        fail = 1;
        goto done;
    }
    if (rank == 0) {
        printf("model: %d layers, width %d, %d heads; batch %d x %d tokens (global); layout dp %d x tp %d x pp %d, %s schedule, v %d, "
               "%d micro-batches, zero %d\n", cfg.layers, cfg.width, cfg.heads, B, T, lay.dp, lay.tp, lay.pp, schedules[kind], vstages, mbs, zero);
        printf("stages (balanced):");
        for (s = 0; s < nst; s++) printf(" %d:[%d,%d) on pp rank %d", s, (int)first[s], (int)first[s + 1], s % lay.pp);
        printf("\n");
        if (lay.pp > 1) pt_pp_schedule_print(pt_pp_get_schedule(pp), NULL);
        fflush(stdout);
    }

    /* 4. The training loop: the same calls on every rank. */
    sched = pt_args_schedule(&a);
    for (step = 0; step < last; step++) {
        double t0 = pt_time(), dt;
        float lr = pt_lr_at(&sched, step), loss, norm;
        pt_run_step_begin(&data, step); /* under tools/ptrun: this rank's progress, its heartbeat */
        if (!pt_dist_agree(d, pt_loader_next(data.train, ids, tg) == PT_OK)) { /* this DP rank's rows */
            if (rank == 0) fprintf(stderr, "07_gpt_3d: reading the batch failed: %s\n", pt_error(ctx));
            fail = 1;
            break;
        }
        pt_zero_grad(ctx);
        loss = pt_pp_step(pp, 0, 1); /* every micro-batch forward and backward; gradients averaged over DP */
        if (isnan(loss)) {
            if (rank == 0) fprintf(stderr, "07_gpt_3d: step %lld failed: %s\n", (long long)step, pt_error(ctx));
            fail = 1;
            break;
        }
        norm = pt_optim_step(opt, lr); /* each rank updates its parameters (its ZeRO shard) */
        dt = pt_time() - t0;
        if (rank == 0) {
            printf("step %lld loss %.9g lr %.3e norm %.3f ms %.0f tok/s %.0f bubble %.3f data_ms %.2f\n", (long long)step, loss, lr, norm, dt * 1e3,
                   (double)B * T / dt, pt_pp_stats_get(pp).bubble, pt_loader_stats_get(data.train).last_wait_s * 1e3);
            fflush(stdout);
        }
    }

    /* 5. What the reducer did, and the validation loss. */
    if (!fail) {
        float vl = val_loss(pp, &data, ids, tg, 32);
        pt_dp_stats ds = pt_dp_stats_get(dp);
        if (rank == 0 && dp)
            printf("dp: %lld buckets, %lld reductions started during backward, %lld bytes reduced by rank 0, %.1f ms waited at the end\n",
                   (long long)ds.buckets, (long long)ds.started_before_end, (long long)ds.bytes_reduced, ds.wait_s * 1e3);
        if (rank == 0) printf("val_loss %.4f\n", vl);
    }
done:
    pt_run_free(&data);
    pt_pp_free(pp);
    if (dp && zero) pt_dp_zero(dp, opt, 0);
    pt_dp_free(dp);
    pt_gpt_free(m);
    pt_shutdown(ctx);
    free(ids);
    free(tg);
    pt_dist_finalize(d);
    return fail;
}
