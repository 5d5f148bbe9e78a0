/* test_dp.c - data parallelism (>>dp): pt_dp_new/begin/finish against a single-process reference.
   Build: mpicc -std=c99 -DPTRAIN_MPI -fopenmp -I. tests/test_dp.c -lm, run under mpirun -np 2 or 4
   (also builds and runs without MPI: a world of one, no communication). Every rank trains a small
   GPT on its slice of a fixed global batch with pt_dp averaging the gradients, and also trains the
   same model on the whole batch alone (the reference); losses and final parameters must agree.
   Every check is agreed across ranks (test_util.h); rank 0 prints PASS/FAIL and "N passed, N failed". */
#include "dp_common.h"
/* ---- the collective records of one data-parallel step (>>dist's records, >>dp's calls) ---- */
typedef struct {
    pt_coll_record rec[PT_COLL_RING];
    int n;            /* this rank's records tagged with the step */
    int ok;           /* the step ran without error */
    char err[512];
    int64_t buckets, grad_n, param_n;
} rec_out;

/* One step of the small GPT on this rank's slice with pt_dp_new_opts(o) (ZeRO stage `zero` first),
   tagged pt_dist_set_step(d, tag, 0); keeps this rank's records carrying that tag. */
static void rec_step(tctx *t, const pt_dp_options *o, int zero, int64_t tag, rec_out *out) {
    static pt_coll_record all[PT_COLL_RING];
    pt_desc desc;
    pt_gpt_config cfg;
    pt_optim_desc od;
    pt_ctx *ctx;
    pt_gpt *m;
    pt_optim *opt;
    pt_dp *dp;
    pt_graph *g;
    pt_tensor *ids, *tg, *loss, gs, ps;
    int nr = B / t->dpn, i, n;
    memset(out, 0, sizeof *out);
    memset(&desc, 0, sizeof desc);
    desc.seed = 1234, desc.threads = 1, desc.log_level = PT_LOG_ERROR + 1;
    ctx = pt_init(&desc);
    memset(&cfg, 0, sizeof cfg);
    cfg.vocab = 64, cfg.layers = 2, cfg.width = 32, cfg.heads = 4, cfg.max_seq = T;
    m = pt_gpt_new(ctx, &cfg);
    memset(&od, 0, sizeof od);
    od.kind = PT_OPTIM_ADAMW, od.lr = LR, od.clip_norm = 0.5f, od.eps = EPS;
    opt = pt_optim_new(ctx, &od);
    dp = pt_dp_new_opts(ctx, t->d, o);
    g = pt_graph_new(ctx);
    if (!m || !opt || !dp || !g || (zero && pt_dp_zero(dp, opt, zero) != PT_OK)) {
        snprintf(out->err, sizeof out->err, "setup failed: %.200s", pt_error(ctx));
    } else {
        pt_dist_set_step(t->d, tag, 0);
        pt_zero_grad(ctx);
        pt_dp_begin_step(dp, 1);
        ids = pt_tensor_new(g, PT_I32, 2, nr, T, 0, 0);
        tg = pt_tensor_new(g, PT_I32, 2, nr, T, 0, 0);
        pt_tensor_write(ids, t->ids[0] + t->dprank * nr * T);
        pt_tensor_write(tg, t->tgt[0] + t->dprank * nr * T);
        loss = pt_gpt_loss(g, m, ids, tg);
        pt_backward(g, loss);
        if (pt_dp_finish(dp) == PT_OK && pt_status_get(ctx) == PT_OK) pt_optim_step(opt, LR);
        out->ok = pt_status_get(ctx) == PT_OK;
        snprintf(out->err, sizeof out->err, "%.500s", pt_error(ctx));
        pt_dist_set_step(t->d, -1, -1);
    }
    gs = pt_grad_slab(ctx), ps = pt_param_slab(ctx);
    out->grad_n = pt_numel(&gs), out->param_n = pt_numel(&ps);
    out->buckets = pt_dp_stats_get(dp).buckets;
    n = pt_dist_records(t->d, all, PT_COLL_RING);
    for (i = 0; i < n; i++)
        if (all[i].step == tag) out->rec[out->n++] = all[i];
    pt_graph_free(g);
    pt_dp_free(dp);
    pt_gpt_free(m);
    pt_shutdown(ctx);
}

/* the records of op on comm: how many, the sum of their counts; *bad = those not DONE or not of dtype,
   *gap = 1 if their per-communicator numbers are not consecutive */
static int rec_count(const rec_out *r, int op, int comm, int dtype, int64_t *sum, int *bad, int *gap) {
    int i, k = 0;
    uint64_t prev = 0;
    *sum = 0, *bad = 0, *gap = 0;
    for (i = 0; i < r->n; i++) {
        const pt_coll_record *c = &r->rec[i];
        if (c->op != op || c->comm != comm) continue;
        *sum += c->count;
        *bad += c->state != PT_COLL_DONE || c->rc != 0 || c->dtype != dtype || c->peer != -1 || c->micro_batch != 0 || c->t_end < c->t_start;
        if (k && comm != PT_COMM_DP_NODE && c->comm_seq != prev + 1) *gap = 1;
        prev = c->comm_seq, k++;
    }
    return k;
}

static void test_records(tctx *t) {
    pt_dp_options o;
    rec_out *r = (rec_out *)calloc(1, sizeof(rec_out));
    char why[1024];
    int64_t sum, sum2;
    int n, n2, bad, bad2, gap, i, last_rs = -1, ag = -1, norm = 0;
    if (!r) return;
    memset(&o, 0, sizeof o);
    o.bucket_bytes = 16 << 10;

    /* plain DP: one iallreduce of f32 per bucket on DP, together the whole gradient slab */
    rec_step(t, &o, 0, 101, r);
    CHECK_WHY(r->ok, "records: a DP step with 16 KiB buckets runs", r->err);
    n = rec_count(r, PT_COLL_IALLREDUCE, PT_COMM_DP, PT_COLL_F32, &sum, &bad, &gap);
    snprintf(why, sizeof why, "%d of %d records tagged step 101: %d iallreduce on DP (buckets %lld), counts sum %lld (slab %lld), %d not done/f32, gap %d",
             n, r->n, n, (long long)r->buckets, (long long)sum, (long long)r->grad_n, bad, gap);
    CHECK_WHY(t->dpn == 1 ? r->n == 0 : (n == r->buckets && r->buckets > 1 && sum == r->grad_n && !bad && !gap && n == r->n),
              "records: one iallreduce of f32 per bucket on DP, counts summing to the gradient slab, done, tagged with the step", why);

    /* bf16 compression: the same, dtype bf16 */
    o.compress = 1;
    rec_step(t, &o, 0, 102, r);
    n = rec_count(r, PT_COLL_IALLREDUCE, PT_COMM_DP, PT_COLL_BF16, &sum, &bad, &gap);
    snprintf(why, sizeof why, "%.300s; %d iallreduce of bf16 (buckets %lld), counts sum %lld (slab %lld), %d bad", r->err, n, (long long)r->buckets,
             (long long)sum, (long long)r->grad_n, bad);
    CHECK_WHY(r->ok && (t->dpn == 1 || (n == r->buckets && sum == r->grad_n && !bad)), "records: bf16 compression reduces buckets as bf16", why);
    o.compress = 0;

    /* ZeRO-1: reduce-scatter per bucket, the norm's allreduce, then a non-blocking parameter allgatherv per
       bucket (completed when the parameters are next read: here pt_param_slab) */
    o.overlap_gather = 1;
    rec_step(t, &o, 1, 103, r);
    o.overlap_gather = 0;
    n = rec_count(r, PT_COLL_IREDUCE_SCATTER, PT_COMM_DP, PT_COLL_F32, &sum, &bad, &gap);
    n2 = rec_count(r, PT_COLL_IALLGATHERV, PT_COMM_DP, PT_COLL_F32, &sum2, &bad2, &gap);
    for (i = 0; i < r->n; i++) {
        if (r->rec[i].op == PT_COLL_IREDUCE_SCATTER) last_rs = i;
        if (r->rec[i].op == PT_COLL_IALLGATHERV && ag < 0) ag = i;
        if (r->rec[i].op == PT_COLL_ALLREDUCE && r->rec[i].comm == PT_COMM_DP && r->rec[i].dtype == PT_COLL_F64 && r->rec[i].state == PT_COLL_DONE) norm++;
    }
    snprintf(why, sizeof why, "%.300s; %d ireduce_scatter (buckets %lld) summing %lld (slab %lld), %d bad; %d iallgatherv of %lld (params %lld), %d bad; norm allreduces %d; order %d < %d",
             r->err, n, (long long)r->buckets, (long long)sum, (long long)r->grad_n, bad, n2, (long long)sum2, (long long)r->param_n, bad2, norm, last_rs, ag);
    CHECK_WHY(r->ok && (t->dpn == 1 || (n == r->buckets && sum == r->grad_n && !bad && n2 == r->buckets && sum2 == r->param_n && !bad2 && norm == 1 && last_rs < ag)),
              "records: ZeRO-1 reduce-scatters every bucket, sums the norm over DP, then allgathers the parameters bucket by bucket (non-blocking)", why);
    /* the default (overlap_gather 0): one blocking allgatherv of the whole slab in the update */
    rec_step(t, &o, 1, 113, r);
    n = rec_count(r, PT_COLL_IALLGATHERV, PT_COMM_DP, PT_COLL_F32, &sum, &bad, &gap);
    n2 = rec_count(r, PT_COLL_ALLGATHERV, PT_COMM_DP, PT_COLL_F32, &sum2, &bad2, &gap);
    snprintf(why, sizeof why, "%.300s; %d iallgatherv, %d allgatherv of %lld (params %lld)", r->err, n, n2, (long long)sum2, (long long)r->param_n);
    CHECK_WHY(r->ok && (t->dpn == 1 || (n == 0 && n2 == 1 && sum2 >= r->param_n)), "records: ZeRO-1 by default gathers the parameters in one blocking allgatherv", why);

    /* hierarchical: in-node reduce-scatter, cross-node allreduce, in-node allgatherv per bucket */
    if (t->dpn > 1 && pt_dist_nodes(t->d) > 1) {
        int64_t sc, node_sum = 0;
        int nc, bc, ga;
        o.hier = 1;
        rec_step(t, &o, 0, 104, r);
        n = rec_count(r, PT_COLL_IREDUCE_SCATTER, PT_COMM_DP_NODE, PT_COLL_F32, &sum, &bad, &gap);
        nc = rec_count(r, PT_COLL_IALLREDUCE, PT_COMM_DP_CROSS, PT_COLL_F32, &sc, &bc, &gap);
        n2 = rec_count(r, PT_COLL_IALLGATHERV, PT_COMM_DP_NODE, PT_COLL_F32, &sum2, &bad2, &ga);
#ifdef PTRAIN_MPI
        MPI_Allreduce(&sc, &node_sum, 1, MPI_INT64_T, MPI_SUM, *(MPI_Comm *)pt_dist_comm(t->d, PT_COMM_NODE));
#endif
        snprintf(why, sizeof why, "%.300s; buckets %lld: %d ireduce_scatter (sum %lld, %d bad), %d iallreduce cross (sum over the node %lld, %d bad, gap %d), %d iallgatherv (sum %lld, %d bad); slab %lld",
                 r->err, (long long)r->buckets, n, (long long)sum, bad, nc, (long long)node_sum, bc, gap, n2, (long long)sum2, bad2, (long long)r->grad_n);
        CHECK_WHY(r->ok && n == r->buckets && nc == n && n2 == n && sum == r->grad_n && sum2 == r->grad_n && node_sum == r->grad_n && !bad && !bc && !bad2 && !gap,
                  "records: hierarchical buckets go DP-node reduce-scatter, DP-cross allreduce, DP-node allgatherv", why);
        o.hier = 0;
    }

    /* debug mode: matching steps run; different buckets on one rank are refused on every rank, no hang */
    if (t->dpn > 1) {
        const char *m;
        CHECK_WHY(pt_dist_set_coll_check(t->d, 1) == PT_OK, "records: debug mode on", "refused");
        rec_step(t, &o, 0, 105, r);
        n = rec_count(r, PT_COLL_IALLREDUCE, PT_COMM_DP, PT_COLL_F32, &sum, &bad, &gap);
        CHECK_WHY(r->ok && n == r->buckets && !bad, "debug mode: a DP step with matching buckets runs", r->err);
        o.hier = 1;
        rec_step(t, &o, 0, 106, r);
        CHECK_WHY(r->ok, "debug mode: a hierarchical DP step runs", r->err);
        if (pt_dist_nodes(t->d) > 1) {
            n = rec_count(r, PT_COLL_IREDUCE_SCATTER, PT_COMM_DP_NODE, PT_COLL_F32, &sum, &bad, &gap);
            n2 = rec_count(r, PT_COLL_ALLREDUCE, PT_COMM_DP, PT_COLL_I32, &sum2, &bad2, &gap);
            snprintf(why, sizeof why, "buckets %lld: %d DP-node reduce-scatters (%d bad), %d agreements on DP (%d bad)", (long long)r->buckets, n, bad, n2, bad2);
            CHECK_WHY(n == r->buckets && n2 == n && !bad && !bad2, "debug mode, hierarchical: each bucket's chain is run, then agreed on over DP", why);
            o.bucket_bytes = t->dprank == t->dpn - 1 ? 4 : 16 << 10;
            rec_step(t, &o, 0, 109, r);
            CHECK_WHY(!r->ok && strstr(r->err, "hierarchical reduction of bucket 0 failed on DP rank") && strstr(r->err, "collective mismatch on the DP-"),
                      "debug mode, hierarchical: one rank with other buckets: the step fails on every rank naming the mismatch", r->err);
            o.bucket_bytes = 16 << 10;
        }
        o.hier = 0;
        rec_step(t, &o, 1, 107, r);
        CHECK_WHY(r->ok, "debug mode: a ZeRO-1 step runs", r->err);
        o.bucket_bytes = t->dprank == t->dpn - 1 ? 4 : 16 << 10;
        rec_step(t, &o, 0, 108, r);
        m = r->err;
        CHECK_WHY(!r->ok && strstr(m, "collective mismatch on the DP communicator") && strstr(m, "iallreduce of"),
                  "debug mode: one rank with other buckets: the step fails on every rank naming the mismatch", m);
        for (i = 0, n = 0; i < r->n; i++) n += r->rec[i].state == PT_COLL_REFUSED;
        snprintf(why, sizeof why, "%d refused of %d records", n, r->n);
        CHECK_WHY(n == 1 && r->n == 1 && r->rec[0].op == PT_COLL_IALLREDUCE, "debug mode: the refused bucket is recorded as refused, nothing after it", why);
        CHECK_WHY(pt_dist_set_coll_check(t->d, 0) == PT_OK && pt_dist_agree(t->d, 1) == 1, "debug mode off again; the grid is usable", "failed");
    }
    free(r);
}

/* The mean of pt_dp_finish on a power-of-two DP size without ZeRO: no pass over the gradient (the
   slab keeps the exact sum, the 1/dp goes to the optimizer's scale and the norm), yet every reader
   sees the exact mean: pt_grad_norm, an SGD step, pt_grad_slab (which applies it to the slab), a
   step that accumulates onto it without pt_zero_grad. Values chosen so every sum and mean is exact. */
static void test_mean(tctx *t) {
    pt_desc desc;
    pt_optim_desc od;
    pt_ctx *ctx;
    pt_dp *dp;
    pt_optim *o;
    pt_param *p;
    pt_tensor gs, ps;
    int64_t n = 40, i;
    float *g, *raw, *w;
    double nn = 0, dpn = t->dpn;
    int pow2 = (t->dpn & (t->dpn - 1)) == 0, bad_raw = 0, bad_w = 0, bad_g = 0, bad_acc = 0;
    char why[256];
    if (t->dpn < 2) return;
    memset(&desc, 0, sizeof desc);
    desc.seed = 1, desc.threads = 1;
    ctx = pt_init(&desc);
    pt_param_new(ctx, "a", 1, &n, PT_INIT_ZEROS, 0.0f, 0);
    pt_param_new(ctx, "b", 1, &n, PT_INIT_ZEROS, 0.0f, 0);
    memset(&od, 0, sizeof od);
    od.kind = PT_OPTIM_SGD, od.lr = 1.0f;
    o = pt_optim_new(ctx, &od);
    dp = pt_dp_new(ctx, t->d, 64); /* small buckets: several */
    if (!o || !dp) {
        CHECK_WHY(0, "mean: setup", pt_error(ctx));
        pt_shutdown(ctx);
        return;
    }
    p = pt_param_at(ctx, 0);
    (void)pt_grad_slab(ctx); /* makes the gradient slab (made at its first use) */
    raw = pt_f32(&p->grad) - p->slab_off; /* the slab itself, read without pt_grad_slab's settling from now on */
    ps = pt_param_slab(ctx), w = pt_f32(&ps);
    pt_zero_grad(ctx);
    for (i = 0; i < 2 * n; i++) raw[i] = (float)((t->dprank + 1) * 0.25 + (double)i * 0.5);
    pt_dp_begin_step(dp, 1);
    CHECK_WHY(pt_dp_finish(dp) == PT_OK, "mean: pt_dp_finish", pt_error(ctx));
    for (i = 0; i < 2 * n; i++) { /* sum_r (r+1)/4 + i/2 * dp */
        double sum = 0.25 * dpn * (dpn + 1) / 2 + (double)i * 0.5 * dpn, mean = sum / dpn;
        bad_raw += raw[i] != (float)(pow2 ? sum : mean);
        nn += mean * mean;
    }
    snprintf(why, sizeof why, "%d of %lld elements differ from the %s", bad_raw, (long long)(2 * n), pow2 ? "sum over ranks" : "mean");
    CHECK_WHY(!bad_raw, pow2 ? "mean, dp a power of two: pt_dp_finish leaves the exact sum in the slab (no pass; 1/dp owed)"
                             : "mean, dp not a power of two: pt_dp_finish divides in place", why);
    snprintf(why, sizeof why, "%.9g, want %.9g", (double)pt_grad_norm(ctx), sqrt(nn));
    CHECK_WHY(pt_grad_norm(ctx) == (float)sqrt(nn), "mean: pt_grad_norm is the norm of the exact mean", why);
    pt_optim_step(o, 1.0f); /* w = 0 - 1 * mean */
    for (i = 0; i < 2 * n; i++) bad_w += w[i] != -(float)(0.25 * (dpn + 1) / 2 + (double)i * 0.5);
    snprintf(why, sizeof why, "%d of %lld parameters differ", bad_w, (long long)(2 * n));
    CHECK_WHY(!bad_w, "mean: an SGD step (lr 1) moves the parameters by exactly the mean", why);
    gs = pt_grad_slab(ctx), g = pt_f32(&gs);
    for (i = 0; i < 2 * n; i++) bad_g += g[i] != (float)(0.25 * (dpn + 1) / 2 + (double)i * 0.5) || raw[i] != g[i];
    snprintf(why, sizeof why, "%d of %lld elements differ", bad_g, (long long)(2 * n));
    CHECK_WHY(!bad_g, "mean: pt_grad_slab shows the exact mean, applied to the slab", why);
    /* a step accumulating onto the last one's gradient (no pt_zero_grad): mean + mean */
    pt_zero_grad(ctx);
    for (i = 0; i < 2 * n; i++) raw[i] = (float)((t->dprank + 1) * 0.25 + (double)i * 0.5);
    pt_dp_begin_step(dp, 1);
    pt_dp_finish(dp);
    pt_dp_begin_step(dp, 1); /* not zeroed: the gradient accumulates onto the mean */
    for (i = 0; i < 2 * n; i++) raw[i] += (float)((t->dprank + 1) * 0.25 + (double)i * 0.5);
    pt_dp_finish(dp);
    gs = pt_grad_slab(ctx), g = pt_f32(&gs);
    for (i = 0; i < 2 * n; i++) bad_acc += g[i] != (float)(2 * (0.25 * (dpn + 1) / 2 + (double)i * 0.5));
    snprintf(why, sizeof why, "%d of %lld elements differ", bad_acc, (long long)(2 * n));
    CHECK_WHY(!bad_acc, "mean: a step that accumulates onto the last one's gradient (no pt_zero_grad) averages mean + own", why);
    pt_dp_free(dp);
    pt_shutdown(ctx);
}

int main(int argc, char **argv) {
    tctx *t = (tctx *)calloc(1, sizeof(tctx));
    char name[256], why[256];
    run_cfg c;
    run_out ref, a, b;
    int i, fails;
    if (!t) return 1;
    switch (setup(t, &argc, &argv, "test_dp", "", &ref)) {
    case -1: return 1;
    case 0: goto done;
    default: break;
    }

    /* default buckets (25 MiB: one bucket) */
    memset(&c, 0, sizeof c);
    c.use_dp = 1, c.micro = 1, c.zero_at = c.unzero_at = -1;
    run(t, &c, &a);
    compare(t, "DP, default buckets", &a, &ref);
    snprintf(why, sizeof why, "%lld vs %lld bytes", (long long)a.state_bytes, (long long)ref.state_bytes);
    CHECK_WHY(a.state_bytes == ref.state_bytes, "DP without ZeRO keeps the whole optimizer state on every rank", why);
    snprintf(why, sizeof why, "buckets %lld", (long long)a.st.buckets);
    CHECK_WHY(a.st.buckets == 1, "DP, default buckets: the whole gradient (~113 KB) is one bucket", why);
    pt_shutdown(a.ctx);

    /* 16 KiB buckets: overlap */
    c.bucket = 16 << 10;
    run(t, &c, &a);
    compare(t, "DP, 16 KiB buckets", &a, &ref);
    snprintf(why, sizeof why, "buckets %lld, started before the end %lld, bytes %lld", (long long)a.st.buckets,
             (long long)a.st.started_before_end, (long long)a.st.bytes_reduced);
    CHECK_WHY(a.st.buckets > 1, "DP, 16 KiB buckets: more than one bucket", why);
    CHECK_WHY(t->dpn == 1 || a.st.started_before_end > 0, "DP, 16 KiB buckets: buckets start during backward (overlap)", why);
    CHECK_WHY(t->dpn == 1 || a.st.bytes_reduced == (int64_t)STEPS * 4 * pt_param_numel(ref.ctx) ||
                  a.st.bytes_reduced >= (int64_t)STEPS * 4 * pt_param_numel(ref.ctx),
              "DP, 16 KiB buckets: every gradient element reduced each step", why);

    /* the same run again: bit-identical */
    run(t, &c, &b);
    CHECK_WHY(a.ok && b.ok && !memcmp(a.loss, b.loss, sizeof a.loss), "DP, 16 KiB buckets, run twice: bit-identical losses",
              "losses differ");
    {
        pt_tensor pa = pt_param_slab(a.ctx), pb = pt_param_slab(b.ctx);
        CHECK_WHY(a.ok && b.ok && pt_numel(&pa) == pt_numel(&pb) && !memcmp(pt_f32(&pa), pt_f32(&pb), (size_t)pt_numel(&pa) * 4),
                  "DP, 16 KiB buckets, run twice: bit-identical parameter slabs", "parameters differ");
    }
    pt_shutdown(a.ctx);
    pt_shutdown(b.ctx);

    /* tiny buckets: one parameter each */
    c.bucket = 4;
    run(t, &c, &a);
    compare(t, "DP, 4-byte buckets (one per parameter)", &a, &ref);
    snprintf(why, sizeof why, "buckets %lld of %d parameters", (long long)a.st.buckets, pt_param_count(ref.ctx));
    CHECK_WHY(a.st.buckets == pt_param_count(ref.ctx), "DP, 4-byte buckets: one bucket per parameter", why);
    pt_shutdown(a.ctx);

    /* gradient accumulation: 2 micro-batches, reduce on the second */
    c.bucket = 16 << 10, c.micro = 2;
    run(t, &c, &a);
    compare(t, "DP + accumulation (2 micro-batches)", &a, &ref);
    snprintf(why, sizeof why, "bytes reduced %lld, want %lld", (long long)a.st.bytes_reduced,
             (long long)(STEPS * 4 * pt_param_numel(ref.ctx)));
    CHECK_WHY(t->dpn == 1 || a.st.bytes_reduced <= (int64_t)STEPS * 4 * (pt_param_numel(ref.ctx) + 16 * pt_param_count(ref.ctx)),
              "DP + accumulation: one reduction per step (none on the first micro-batch)", why);
    pt_shutdown(a.ctx);

    /* the step contract: pt_dp_begin_step(dp, passes), passes 2 and 4 (the global batch split further) */
    c.step_api = 1;
    for (i = 2; i <= 4; i += 2) {
        c.micro = i;
        run(t, &c, &a);
        snprintf(name, sizeof name, "DP, pt_dp_begin_step(dp, %d): accumulation over %d passes", i, i);
        compare(t, name, &a, &ref);
        snprintf(why, sizeof why, "bytes reduced %lld, started before the end %lld", (long long)a.st.bytes_reduced, (long long)a.st.started_before_end);
        snprintf(name, sizeof name, "DP, pt_dp_begin_step(dp, %d): one reduction per bucket per step, overlapped with the last pass", i);
        CHECK_WHY(t->dpn == 1 || (a.st.bytes_reduced <= (int64_t)STEPS * 4 * (pt_param_numel(ref.ctx) + 16 * pt_param_count(ref.ctx)) &&
                                  a.st.started_before_end > 0), name, why);
        pt_shutdown(a.ctx);
    }
    c.step_api = 0;

    /* interleaved passes: two model parts, part B one micro-batch ahead of part A; untied reference */
    {
        run_out uref;
        run_cfg u;
        memset(&u, 0, sizeof u);
        u.whole = 1, u.micro = 1, u.zero_at = u.unzero_at = -1, u.untied = 1;
        run(t, &u, &uref);
        CHECK_WHY(uref.ok, "reference with an untied head trains", uref.err);
        u.whole = 0, u.use_dp = 1, u.bucket = 16 << 10, u.split = 1, u.micro = 4;
        run(t, &u, &a);
        compare(t, "DP, split model, 4 interleaved passes (B0 B1 A0 B2 A1 B3 A2 A3)", &a, &uref);
        pt_shutdown(a.ctx);
        pt_shutdown(uref.ctx);
    }

    /* hierarchical allreduce (PTRAIN_FAKE_NODE_SIZE=2 under np 4: 2 nodes of 2) */
    c.micro = 2, c.step_api = 1, c.hier = 1;
    run(t, &c, &a);
    snprintf(name, sizeof name, "DP, hierarchical allreduce (%d nodes), 2 passes", pt_dist_nodes(t->d));
    compare(t, name, &a, &ref);
    if (getenv("PTRAIN_FAKE_NODE_SIZE") && t->dpn >= 4) {
        snprintf(why, sizeof why, "%d nodes", pt_dist_nodes(t->d));
        CHECK_WHY(pt_dist_nodes(t->d) > 1, "DP, hierarchical: the fake nodes make more than one node", why);
    }
    pt_shutdown(a.ctx);
    c.hier = 0;

    /* bf16 on the wire with error feedback: a looser bound; deterministic */
    c.compress = 1;
    run(t, &c, &a);
    compare_tol(t, "DP, bf16 compression with error feedback", &a, &ref, 1e-3, 5e-2, 1e-2);
    snprintf(why, sizeof why, "bytes reduced %lld", (long long)a.st.bytes_reduced);
    CHECK_WHY(t->dpn == 1 || a.st.bytes_reduced <= (int64_t)STEPS * 2 * (pt_param_numel(ref.ctx) + 16 * pt_param_count(ref.ctx)),
              "DP, bf16 compression: 2 bytes per gradient element on the wire", why);
    run(t, &c, &b);
    {
        pt_tensor pa = pt_param_slab(a.ctx), pb = pt_param_slab(b.ctx);
        CHECK_WHY(a.ok && b.ok && !memcmp(a.loss, b.loss, sizeof a.loss) && !memcmp(pt_f32(&pa), pt_f32(&pb), (size_t)pt_numel(&pa) * 4),
                  "DP, bf16 compression, run twice: bit-identical losses and parameters", "they differ");
    }
    pt_shutdown(a.ctx);
    pt_shutdown(b.ctx);
    c.hier = 1;
    run(t, &c, &a);
    compare_tol(t, "DP, hierarchical allreduce of bf16 buckets with error feedback", &a, &ref, 1e-3, 5e-2, 1e-2);
    pt_shutdown(a.ctx);
    c.compress = 0, c.step_api = 0, c.hier = 0;

    /* a frozen and an unused parameter: before the model (last bucket) and after it (first bucket) */
    c.micro = 1;
    for (i = 1; i <= 2; i++) {
        c.extras = i;
        run(t, &c, &a);
        snprintf(name, sizeof name, "DP with a frozen and an unused parameter created %s the model", i == 1 ? "before" : "after");
        compare(t, name, &a, &ref);
        snprintf(name, sizeof name, "DP with frozen/unused parameters %s the model: frozen one unchanged", i == 1 ? "before" : "after");
        CHECK_WHY(a.ok && a.frozen0 == a.frozen1, name, "it changed");
        snprintf(why, sizeof why, "started before the end %lld of %lld", (long long)a.st.started_before_end, (long long)a.st.buckets * STEPS);
        if (i == 1) CHECK_WHY(t->dpn == 1 || a.st.started_before_end > 0, "DP, unused parameter in the last bucket: overlap still happens", why);
        else CHECK_WHY(a.st.started_before_end == 0, "DP, unused parameter in the first bucket: every bucket waits for pt_dp_finish (in order)", why);
        pt_shutdown(a.ctx);
    }

    /* errors: passes < 1; a parameter completing more often than the step's passes */
    if (t->dpn > 1) {
        pt_desc desc;
        pt_gpt_config cfg;
        pt_ctx *ctx;
        pt_gpt *m;
        pt_dp *dp;
        pt_graph *g;
        pt_tensor *x, *loss;
        memset(&desc, 0, sizeof desc);
        desc.threads = 1;
        memset(&cfg, 0, sizeof cfg);
        cfg.vocab = 64, cfg.layers = 1, cfg.width = 32, cfg.heads = 4, cfg.max_seq = T;
        ctx = pt_init(&desc);
        m = pt_gpt_new(ctx, &cfg);
        dp = pt_dp_new(ctx, t->d, 0);
        g = pt_graph_new(ctx);
        pt_dp_begin_step(dp, 0);
        snprintf(why, sizeof why, "'%.200s'", pt_error(ctx));
        CHECK_WHY(pt_status_get(ctx) == PT_ERR_ARG && strstr(pt_error(ctx), "passes must be >= 1"), "error: pt_dp_begin_step(dp, 0)", why);
        pt_error_clear(ctx);
        x = pt_tensor_new(g, PT_I32, 2, 1, T, 0, 0);
        pt_tensor_write(x, t->ids[0]);
        loss = pt_gpt_loss(g, m, x, x);
        pt_dp_begin_step(dp, 1);
        pt_backward(g, loss);
        pt_graph_reset(g);
        x = pt_tensor_new(g, PT_I32, 2, 1, T, 0, 0);
        pt_tensor_write(x, t->ids[0]);
        loss = pt_gpt_loss(g, m, x, x);
        pt_backward(g, loss);
        snprintf(why, sizeof why, "'%.200s'", pt_error(ctx));
        CHECK_WHY(pt_status_get(ctx) == PT_ERR_STATE && strstr(pt_error(ctx), "completed 2 times in a step of 1"),
                  "error: a second backward in a step of 1 pass names the parameter and the counts", why);
        pt_dp_free(dp);
        pt_gpt_free(m);
        pt_shutdown(ctx);
    }

    test_records(t);
    test_mean(t);

    /* the check can fail: without the reduction each rank's model drifts from the reference */
    if (t->dpn > 1) {
        double pd;
        c.use_dp = 0, c.extras = 0;
        run(t, &c, &a);
        pd = a.ok ? param_diff(a.ctx, ref.ctx) : 0;
        snprintf(why, sizeof why, "worst per-tensor relative difference only %.3g", pd);
        CHECK_WHY(pd > 1e-3, "control: slices trained without pt_dp do differ from the reference (> 1e-3)", why);
        pt_shutdown(a.ctx);
    }
    pt_shutdown(ref.ctx);
done:
    fails = tu_summary();
    pt_dist_finalize(t->d);
    free(t);
    return fails;
}
