/* 05_tensor_parallel.c - tensor parallelism: one layer's weights split over several processes.

   What it teaches: Megatron's MLP split. The first linear of the MLP is column-parallel (rank r
   holds rows r*H/tp .. of its weight [H, W], i.e. H/tp of the hidden units), the second is
   row-parallel (rank r holds the matching H/tp columns of [O, H]). Each rank computes its part of
   the hidden layer on its own; one allreduce forward (summing the partial outputs of the second
   linear, pt_tp_reduce) and one backward (summing the gradient of the MLP's input, pt_tp_copy)
   are all the communication. The collective records (pt_dist_records) show exactly those calls.
   Every rank also trains the unsplit model in a single process, and the run ends by comparing
   the loss curves and the gradient norms: splitting the weights does not change the maths.

   The task: regression of y = sin(3 x.a) + cos(2 x.b) (x in R^16) with a replicated linear layer
   16 -> W, GELU, then the tensor-parallel MLP W -> H -> 1 (H split over the ranks), mean squared
   error, AdamW.

   Build: mpicc -O2 -fopenmp -DPTRAIN_MPI -DPTRAIN_OPENCL -I. examples/05_tensor_parallel.c -o build/05_tensor_parallel -lm
   Run: mpirun -np 2 ./build/05_tensor_parallel

   Flags: the shared --steps --seed --batch --lr --width (W; H = 4W) --stop-after. H must split
   evenly over the ranks. Rank 0 prints the rank table, each rank's parameter shapes, the
   communication of one step, one `step <n> loss <l> ...` line per step and the comparison. (As
   root, or with more ranks than cores, Open MPI wants OMPI_ALLOW_RUN_AS_ROOT=1
   OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 and --oversubscribe.) */
#define PTRAIN_IMPLEMENTATION
#define PTRAIN_HARNESS
#include "ptrain.h"

#include <math.h>
#include <mpi.h> /* MPI_Gather below */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define IN 16

typedef struct model { pt_linear_layer in; pt_mlp mlp; } model;

/* tp = 1 builds the unsplit model with the same names: the shards are slices of its parameters */
static model model_new(pt_ctx *ctx, int64_t width, int split) {
    model m;
    m.in = pt_linear_new(ctx, "in", IN, width, 1, 0.25f);
    m.mlp = split ? pt_mlp_tp_new(ctx, "mlp", width, 4 * width, 1, 1, 0.1f) : pt_mlp_new(ctx, "mlp", width, 4 * width, 1, 1, 0.1f);
    return m;
}
static pt_tensor *model_loss(pt_graph *g, const model *m, int split, const float *x, const float *y, int64_t n) {
    int64_t xs[2] = {n, IN}, ys[2] = {n, 1};
    pt_tensor *h = pt_gelu(g, pt_linear_fwd(g, &m->in, pt_tensor_from(g, PT_F32, 2, xs, x)));
    pt_tensor *out = split ? pt_mlp_tp_fwd(g, &m->mlp, h) : pt_mlp_fwd(g, &m->mlp, h);
    pt_tensor *e = pt_sub(g, out, pt_tensor_from(g, PT_F32, 2, ys, y));
    return pt_mean(g, pt_mul(g, e, e));
}

/* n samples of the target function (the same on every rank: same seed) */
static void make_data(uint64_t seed, int n, float *x, float *y) {
    float a[IN], b[IN];
    pt_rng r = pt_rng_seed(seed ^ 0x5EEDull);
    int i, k;
    for (k = 0; k < IN; k++) a[k] = (2 * pt_rng_float(&r) - 1) * 0.5f, b[k] = (2 * pt_rng_float(&r) - 1) * 0.5f;
    for (i = 0; i < n; i++) {
        float sa = 0, sb = 0;
        for (k = 0; k < IN; k++) {
            x[i * IN + k] = 2 * pt_rng_float(&r) - 1;
            sa += a[k] * x[i * IN + k], sb += b[k] * x[i * IN + k];
        }
        y[i] = sinf(3 * sa) + cosf(2 * sb);
    }
}

/* the TP calls recorded with numbers in (after, upto]: how many, and their elements in total */
static int tp_calls(const pt_dist *d, uint64_t after, uint64_t upto, int64_t *elems) {
    static pt_coll_record r[PT_COLL_RING];
    int n = pt_dist_records(d, r, PT_COLL_RING), i, c = 0;
    *elems = 0;
    for (i = 0; i < n; i++)
        if (r[i].seq > after && r[i].seq <= upto && r[i].comm == PT_COMM_TP) c++, *elems += r[i].count;
    return c;
}
static uint64_t last_seq(const pt_dist *d) {
    pt_coll_record r;
    return pt_dist_records(d, &r, 1) ? r.seq : 0;
}

int main(int argc, char **argv) {
    pt_args a;
    pt_desc desc;
    pt_layout lay;
    char err[1024];
    pt_dist *d;
    pt_ctx *ctx, *ref;
    pt_graph *g, *gref;
    pt_optim *opt, *oref;
    pt_optim_desc od;
    model m, mref;
    float *x, *y;
    int64_t step, stop, B, e1, e2, e3;
    int rank, tp, i, ok, nf, nb, no;
    double worst = 0, worst_norm = 0;

    /* 1. the grid: all ranks form one tensor-parallel group (tp = world size) */
    memset(&lay, 0, sizeof lay);
    lay.dp = 1, lay.pp = 1, lay.tp = 0;
    d = pt_dist_init(&argc, &argv, &lay, err, sizeof err);
    if (!d) {
        fprintf(stderr, "05_tensor_parallel: %s\n", err);
        return 1;
    }
    rank = pt_dist_rank(d);
    tp = pt_dist_layout(d).tp;

    memset(&a, 0, sizeof a);
    a.steps = 20, a.seed = 1, a.batch = 32, a.lr = 3e-3f, a.width = 32;
    argc = pt_args_parse(&a, argc, argv, err, sizeof err);
    if (argc > 1) snprintf(err, sizeof err, "unknown flag '%s'", argv[1]);
    if (argc != 1 || a.help) {
        if (rank == 0 && a.help) pt_args_usage(&a, "05_tensor_parallel", "  (--width W: the MLP is W -> 4W -> 1; --seq --layers --heads are unused)");
        if (rank == 0 && !a.help) fprintf(stderr, "05_tensor_parallel: %s (try --help)\n", err);
        pt_dist_finalize(d);
        return a.help ? 0 : 2;
    }
    stop = a.stop_after > 0 && a.stop_after < a.steps ? a.stop_after : a.steps;
    B = a.batch;
    pt_dist_print(d, stdout);

    /* 2. the split model (every rank), the unsplit one (every rank too: each compares its own run) */
    memset(&desc, 0, sizeof desc);
    desc.seed = (uint64_t)a.seed;
    desc.device = a.device, desc.precision = a.precision; /* --device: cpu unless asked */
    desc.dist = d; /* the grid: pt_tp_copy/pt_tp_reduce talk to the TP ranks; threads per rank from it */
    ctx = pt_init(&desc);
    desc.dist = NULL; /* the reference: one process, same seed, same threads */
    desc.threads = pt_threads(ctx);
    ref = pt_init(&desc);
    m = model_new(ctx, a.width, 1);
    mref = model_new(ref, a.width, 0);
    memset(&od, 0, sizeof od);
    od.kind = PT_OPTIM_ADAMW;
    od.lr = a.lr;
    od.clip_norm = 1.0f; /* the clipping norm is the whole model's: split gradients are summed over the ranks */
    opt = pt_optim_new(ctx, &od);
    oref = pt_optim_new(ref, &od);
    ok = opt && oref;
    if (!pt_dist_agree_msg(d, ok, err, sizeof err)) {
        if (rank == 0) fprintf(stderr, "05_tensor_parallel: %s\n", ok ? err : pt_status_get(ctx) ? pt_error(ctx) : pt_error(ref));
        pt_dist_finalize(d);
        return 1;
    }

    /* 3. who holds what: each rank's shapes, gathered on rank 0 */
    {
        int64_t mine[6], *all = (int64_t *)malloc(sizeof mine * (size_t)tp);
        mine[0] = m.mlp.fc.w->shape[0], mine[1] = m.mlp.fc.w->shape[1], mine[2] = m.mlp.fc.b->shape[0];
        mine[3] = m.mlp.proj.w->shape[0], mine[4] = m.mlp.proj.w->shape[1], mine[5] = m.mlp.proj.b->shape[0];
        if (!all) return 1;
        memcpy(all, mine, sizeof mine);
#ifdef PTRAIN_MPI
        MPI_Gather(mine, 6, MPI_INT64_T, all, 6, MPI_INT64_T, 0, *(MPI_Comm *)pt_dist_comm(d, PT_COMM_TP));
#endif
        if (rank == 0) {
            printf("model: in %d -> %lld (replicated), GELU, MLP %lld -> %lld -> 1 split over tp=%d; unsplit: mlp.fc.w [%lld, %lld], mlp.proj.w [1, %lld]\n",
                   IN, (long long)a.width, (long long)a.width, (long long)(4 * a.width), tp, (long long)(4 * a.width), (long long)a.width,
                   (long long)(4 * a.width));
            for (i = 0; i < tp; i++) {
                const int64_t *s = all + 6 * i;
                printf("rank %d: mlp.fc.w [%lld, %lld] (rows %lld..%lld), mlp.fc.b [%lld], mlp.proj.w [%lld, %lld] (columns %lld..%lld), mlp.proj.b [%lld] (replicated)\n",
                       i, (long long)s[0], (long long)s[1], (long long)(i * s[0]), (long long)((i + 1) * s[0] - 1), (long long)s[2], (long long)s[3],
                       (long long)s[4], (long long)(i * s[4]), (long long)((i + 1) * s[4] - 1), (long long)s[5]);
            }
        }
        free(all);
    }

    /* 4. training, both models on the same batches */
    x = (float *)malloc(sizeof(float) * (size_t)B * IN);
    y = (float *)malloc(sizeof(float) * (size_t)B);
    g = pt_graph_new(ctx);
    gref = pt_graph_new(ref);
    if (!x || !y || !g || !gref) return 1;
    for (step = 0; step < stop; step++) {
        pt_tensor *l, *lr;
        float loss, lref, norm, nref;
        uint64_t s0 = last_seq(d), s1, s2;
        double t0 = pt_time();
        make_data((uint64_t)a.seed * 1000003u + (uint64_t)step, (int)B, x, y); /* a fresh batch every step */
        pt_dist_set_step(d, step, 0);
        pt_graph_reset(g);
        pt_zero_grad(ctx);
        l = model_loss(g, &m, 1, x, y, B);
        s1 = last_seq(d);
        pt_backward(g, l);
        s2 = last_seq(d);
        norm = pt_optim_step(opt, a.lr);
        if (step == 0 && rank == 0) { /* what the collective records saw */
            nf = tp_calls(d, s0, s1, &e1);
            nb = tp_calls(d, s1, s2, &e2);
            no = tp_calls(d, s2, last_seq(d), &e3);
            printf("communication of one step over TP: forward %d allreduce of %lld floats (the MLP's output, [%lld, 1]); "
                   "backward %d of %lld (the gradient of the MLP's input, [%lld, %lld]); optimizer %d of %lld double (the squared "
                   "gradient norm of the split parameters, for clipping)\n",
                   nf, (long long)e1, (long long)B, nb, (long long)e2, (long long)B, (long long)a.width, no, (long long)e3);
        }
        loss = pt_item(l);
        if (pt_status_get(ctx) != PT_OK) {
            fprintf(stderr, "05_tensor_parallel: rank %d: %s\n", rank, pt_error(ctx));
            break;
        }

        pt_graph_reset(gref);
        pt_zero_grad(ref);
        lr = model_loss(gref, &mref, 0, x, y, B);
        pt_backward(gref, lr);
        nref = pt_optim_step(oref, a.lr);
        lref = pt_item(lr);
        if (fabs(loss - lref) / fabs(lref) > worst) worst = fabs(loss - lref) / fabs(lref);
        if (fabs(norm - nref) / fabs(nref) > worst_norm) worst_norm = fabs(norm - nref) / fabs(nref);
        if (rank == 0) {
            printf("step %lld loss %.6f single_process_loss %.6f grad_norm %.6f single_process_grad_norm %.6f ms %.1f\n", (long long)step,
                   (double)loss, (double)lref, (double)norm, (double)nref, 1000 * (pt_time() - t0));
            fflush(stdout);
        }
    }

    /* 5. the verdict, agreed by all ranks */
    ok = pt_dist_agree(d, worst <= 1e-4 && worst_norm <= 1e-4);
    if (rank == 0) {
        if (ok) printf("check: the tp=%d losses equal the single-process run's (max relative difference %.2g; gradient norms %.2g; over %lld steps, tolerance 1e-4)\n",
                       tp, worst, worst_norm, (long long)stop);
        else printf("check: MISMATCH: the tp=%d run differs from the single-process run (loss %.3g, gradient norm %.3g; tolerance 1e-4)\n", tp, worst, worst_norm);
    }
    pt_shutdown(ref);
    pt_shutdown(ctx);
    free(x), free(y);
    pt_dist_finalize(d);
    return ok ? 0 : 1;
}
