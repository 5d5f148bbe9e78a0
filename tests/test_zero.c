/* test_zero.c - ZeRO-1 (>>dp, pt_dp_zero): optimizer state sharded over the DP ranks.
   Build: mpicc -std=c99 -DPTRAIN_MPI -fopenmp -I. tests/test_zero.c -lm, run under mpirun -np 2 or 4
   (also builds without MPI: a world of one, where ZeRO-1 changes nothing). Every rank trains the
   small GPT of test_dp.c on its slice of a fixed global batch with pt_dp averaging the gradients and
   the AdamW state sharded by pt_dp_zero (each rank updates its own slab range, then the parameter
   slab is allgathered), and also trains the same model on the whole batch alone (the reference);
   losses and final parameters must agree, and the optimizer state per rank must be ~1/dp of the
   whole. Every check is agreed across ranks (MPI_MIN); rank 0 prints PASS/FAIL and "N passed, N failed". */
#include "dp_common.h"
typedef struct {
    int use_dp;         /* 0 = no pt_dp */
    int whole;          /* 1 = the whole batch (reference), 0 = this rank's slice */
    int64_t bucket;     /* pt_dp_new bucket_bytes */
    int micro;          /* micro-batches per step (1 or 2) */
    int extras;         /* 1 = a frozen and an unused parameter created before the model */
    int zero_at;        /* step before which pt_dp_zero(dp, opt, 1) is called; -1 = never */
    int unzero_at;      /* step before which pt_dp_zero(dp, opt, 0) is called; -1 = never */
    int no_gather;      /* control: ZeRO-1 with the parameter allgather detached */
} run_cfg;

typedef struct {
    float loss[STEPS];
    pt_ctx *ctx;        /* kept alive to compare parameters by name */
    int ok;
    char err[512];
    int64_t state_bytes;   /* pt_optim_state_bytes while sharded (or at the end) */
    int64_t mem_optim;     /* pt_mem(ctx).optim at the same time */
    float frozen0, frozen1;
} run_out;

static void extras(pt_ctx *ctx) {
    int64_t s[2] = {40, 24};
    pt_param_new(ctx, "x.frozen", 2, s, PT_INIT_NORMAL, 0.02f, PT_PARAM_FROZEN);
    pt_param_new(ctx, "x.unused", 2, s, PT_INIT_NORMAL, 0.02f, 0);
}

static void run(tctx *t, const run_cfg *c, run_out *o) {
    pt_desc desc;
    pt_gpt_config cfg;
    pt_optim_desc od;
    pt_gpt *m;
    pt_optim *opt;
    pt_dp *dp = NULL;
    pt_graph *g;
    int s, k, nr = c->whole ? B : B / t->dpn, r0 = c->whole ? 0 : t->dprank * (B / t->dpn);
    memset(o, 0, sizeof *o);
    memset(&desc, 0, sizeof desc);
    desc.seed = 1234;
    desc.threads = 1;
    o->ctx = pt_init(&desc);
    if (!o->ctx) {
        snprintf(o->err, sizeof o->err, "pt_init failed");
        return;
    }
    memset(&cfg, 0, sizeof cfg);
    cfg.vocab = 64, cfg.layers = 2, cfg.width = 32, cfg.heads = 4, cfg.max_seq = T;
    if (c->extras == 1) extras(o->ctx);
    m = pt_gpt_new(o->ctx, &cfg);
    if (c->extras) o->frozen0 = pt_f32(&pt_param_find(o->ctx, "x.frozen")->value)[0];
    memset(&od, 0, sizeof od);
    od.kind = PT_OPTIM_ADAMW, od.lr = LR, od.weight_decay = 0.1f, od.clip_norm = 1.0f, od.eps = EPS;
    opt = pt_optim_new(o->ctx, &od);
    if (c->use_dp) dp = pt_dp_new(o->ctx, t->d, c->bucket);
    g = pt_graph_new(o->ctx);
    if (!m || !opt || !g || (c->use_dp && !dp)) {
        snprintf(o->err, sizeof o->err, "setup failed: %.200s", pt_error(o->ctx));
        return;
    }
    o->state_bytes = pt_optim_state_bytes(opt);
    o->mem_optim = pt_mem(o->ctx).optim;
    for (s = 0; s < STEPS; s++) {
        double lsum = 0, gl;
        int mr = nr / c->micro;
        if (dp && s == c->zero_at) {
            if (pt_dp_zero(dp, opt, 1) != PT_OK) break;
            o->state_bytes = pt_optim_state_bytes(opt);
            o->mem_optim = pt_mem(o->ctx).optim;
            if (c->no_gather) opt->post_step = NULL; /* the control: this file sees the implementation */
        }
        if (dp && s == c->unzero_at && pt_dp_zero(dp, opt, 0) != PT_OK) break;
        pt_zero_grad(o->ctx);
        for (k = 0; k < c->micro; k++) {
            pt_tensor *ids, *tg, *loss;
            int row = r0 + k * mr;
            pt_graph_reset(g);
            ids = pt_tensor_new(g, PT_I32, 2, mr, T, 0, 0);
            tg = pt_tensor_new(g, PT_I32, 2, mr, T, 0, 0);
            if (!ids || !tg) break;
            pt_tensor_write(ids, t->ids[s] + row * T);
            pt_tensor_write(tg, t->tgt[s] + row * T);
            loss = pt_gpt_loss(g, m, ids, tg);
            if (c->micro > 1) loss = pt_scale(g, loss, 1.0f / (float)c->micro);
            if (!loss) break;
            lsum += pt_item(loss);
            if (dp) pt_dp_begin(dp, k == c->micro - 1);
            if (pt_backward(g, loss) != PT_OK) break;
            if (dp && pt_dp_finish(dp) != PT_OK) break;
        }
        if (pt_status_get(o->ctx) != PT_OK) break;
        gl = lsum;
#ifdef PTRAIN_MPI
        if (!c->whole) {
            MPI_Allreduce(&lsum, &gl, 1, MPI_DOUBLE, MPI_SUM, *(MPI_Comm *)pt_dist_comm(t->d, PT_COMM_DP));
            gl /= t->dpn;
        }
#endif
        o->loss[s] = (float)gl;
        if (isnan(pt_optim_step(opt, LR))) break;
    }
    if (pt_status_get(o->ctx) != PT_OK) {
        snprintf(o->err, sizeof o->err, "training failed: %.200s", pt_error(o->ctx));
    } else {
        o->ok = 1;
    }
    if (c->extras) o->frozen1 = pt_f32(&pt_param_find(o->ctx, "x.frozen")->value)[0];
    pt_dp_free(dp);
    pt_graph_free(g);
    pt_gpt_free(m);
}

/* max over the reference's parameters of ||a - ref|| / ||ref|| (matched by name) */
static char worst_name[96];
static double param_diff(pt_ctx *a, pt_ctx *ref) {
    double worst = 0;
    int i;
    for (i = 0; i < pt_param_count(ref); i++) {
        pt_param *pr = pt_param_at(ref, i), *pa = pt_param_find(a, pr->spec.name);
        const float *x, *y;
        double dn = 0, rn = 0;
        int64_t j, n = pt_numel(&pr->value);
        if (!pa || pt_numel(&pa->value) != n) return INFINITY;
        x = pt_f32(&pa->value), y = pt_f32(&pr->value);
        for (j = 0; j < n; j++) dn += ((double)x[j] - y[j]) * ((double)x[j] - y[j]), rn += (double)y[j] * y[j];
        dn = sqrt(dn) / (sqrt(rn) > 0 ? sqrt(rn) : 1);
        if (!(dn <= worst)) worst = dn, snprintf(worst_name, sizeof worst_name, "%s", pr->spec.name); /* NaN sticks */
    }
    return worst;
}
static double loss_diff(const run_out *a, const run_out *r) {
    double worst = 0;
    int s;
    for (s = 0; s < STEPS; s++) {
        double d = fabs((double)a->loss[s] - r->loss[s]) / fabs((double)r->loss[s]);
        if (!(d <= worst)) worst = d;
    }
    return worst;
}

static void compare(tctx *t, const char *what, run_out *a, run_out *ref) {
    char name[256], why[512];
    double ld, pd;
    snprintf(name, sizeof name, "%s: trains without error", what);
    check(t, a->ok, name, a->err);
    ld = a->ok ? loss_diff(a, ref) : INFINITY;
    snprintf(name, sizeof name, "%s: losses of %d steps match the reference (rel <= 1e-5)", what, STEPS);
    snprintf(why, sizeof why, "worst relative loss difference %.3g (step 0: %.7f vs %.7f)", ld, a->loss[0], ref->loss[0]);
    check(t, ld <= 1e-5, name, why);
    pd = a->ok ? param_diff(a->ctx, ref->ctx) : INFINITY;
    snprintf(name, sizeof name, "%s: final parameters match the reference (||d||/||p|| <= 1e-5 per tensor)", what);
    snprintf(why, sizeof why, "worst per-tensor relative difference %.3g (%s)", pd, worst_name);
    check(t, pd <= 1e-5, name, why);
}

static int64_t sum_dp(tctx *t, int64_t x) {
    int64_t s = x;
#ifdef PTRAIN_MPI
    MPI_Allreduce(&x, &s, 1, MPI_INT64_T, MPI_SUM, *(MPI_Comm *)pt_dist_comm(t->d, PT_COMM_DP));
#else
    (void)t;
#endif
    return s;
}

int main(int argc, char **argv) {
    tctx *t = (tctx *)calloc(1, sizeof(tctx));
    char err[512], why[512];
    run_cfg c;
    run_out ref, a;
    pt_rng rng;
    int s, i, fails;
    int64_t full, want, tol, sum;
    if (!t) return 1;
    t->d = pt_dist_init(&argc, &argv, NULL, err, sizeof err);
    if (!t->d) {
        printf("FAIL pt_dist_init: %s\n0 passed, 1 failed\n", err);
        return 1;
    }
    t->rank = pt_dist_rank(t->d);
    t->dpn = pt_dist_layout(t->d).dp;
    t->dprank = pt_dist_coords(t->d).dp;
    rng = pt_rng_seed(42); /* the same data on every rank */
    for (s = 0; s < STEPS; s++)
        for (i = 0; i < B * T; i++) t->ids[s][i] = (int32_t)(pt_rng_u32(&rng) % 64), t->tgt[s][i] = (int32_t)(pt_rng_u32(&rng) % 64);
    if (t->rank == 0) printf("test_zero: %d DP ranks, GPT vocab 64, 2 layers, width 32, B=%d T=%d, %d AdamW steps, ZeRO-1\n", t->dpn, B, T, STEPS);
    if (!check(t, B % (2 * t->dpn) == 0, "the global batch splits into 2 micro-batches per rank", "use np 1, 2 or 4")) goto done;

    memset(&c, 0, sizeof c);
    c.whole = 1, c.micro = 1, c.zero_at = c.unzero_at = -1;
    run(t, &c, &ref); /* the single-process reference */
    check(t, ref.ok, "reference (whole batch, no DP) trains", ref.err);
    full = ref.state_bytes;
    {
        pt_tensor ps = pt_param_slab(ref.ctx);
        snprintf(why, sizeof why, "state %lld bytes, slab %lld floats", (long long)full, (long long)pt_numel(&ps));
        check(t, full == 2 * 4 * pt_numel(&ps), "reference: AdamW state is 2 floats per slab element", why);
    }

    /* ZeRO-1 from the start, default buckets */
    memset(&c, 0, sizeof c);
    c.use_dp = 1, c.micro = 1, c.zero_at = 0, c.unzero_at = -1;
    run(t, &c, &a);
    compare(t, "ZeRO-1, default buckets", &a, &ref);
    /* m and v: each shard is within 16 floats of slab/dp at each of its two boundaries */
    want = full / t->dpn, tol = 2 * 2 * 16 * 4;
    snprintf(why, sizeof why, "rank 0: %lld bytes, want %lld +- %lld (full %lld)", (long long)a.state_bytes, (long long)want,
             (long long)tol, (long long)full);
    check(t, a.ok && llabs(a.state_bytes - want) <= tol, "ZeRO-1: optimizer state bytes per rank = full / dp (within 16-float pads)", why);
    sum = sum_dp(t, a.state_bytes);
    snprintf(why, sizeof why, "sum over ranks %lld, full %lld", (long long)sum, (long long)full);
    check(t, sum == full, "ZeRO-1: the state shards add up to the full state", why);
    snprintf(why, sizeof why, "pt_mem optim %lld, state %lld", (long long)a.mem_optim, (long long)a.state_bytes);
    check(t, a.mem_optim == a.state_bytes, "ZeRO-1: memory accounting (pt_mem optim) drops to the shard", why);
    pt_shutdown(a.ctx);

    /* 16 KiB buckets (overlap) and 2 micro-batches */
    c.bucket = 16 << 10, c.micro = 2;
    run(t, &c, &a);
    compare(t, "ZeRO-1, 16 KiB buckets, 2 micro-batches", &a, &ref);
    pt_shutdown(a.ctx);

    /* a frozen and an unused parameter at the front of the slab (inside rank 0's shard) */
    c.bucket = 0, c.micro = 1, c.extras = 1;
    run(t, &c, &a);
    compare(t, "ZeRO-1 with a frozen and an unused parameter", &a, &ref);
    check(t, a.ok && a.frozen0 == a.frozen1, "ZeRO-1 with frozen parameter: it stays unchanged", "it changed");
    pt_shutdown(a.ctx);

    /* switched on after 2 steps (state re-sharded, kept) and back off after 4 (state gathered) */
    c.extras = 0, c.zero_at = 2, c.unzero_at = 4;
    run(t, &c, &a);
    compare(t, "ZeRO-1 on at step 2, off at step 4 (state kept across re-sharding)", &a, &ref);
    pt_shutdown(a.ctx);

    /* the check can fail: without the allgather each rank holds only its own shard's updates */
    if (t->dpn > 1) {
        double pd;
        c.zero_at = 0, c.unzero_at = -1, c.no_gather = 1;
        run(t, &c, &a);
        pd = a.ok ? param_diff(a.ctx, ref.ctx) : 0;
        snprintf(why, sizeof why, "worst per-tensor relative difference only %.3g", pd);
        check(t, pd > 1e-3, "control: ZeRO-1 without the parameter allgather differs from the reference (> 1e-3)", why);
        pt_shutdown(a.ctx);
    }
    pt_shutdown(ref.ctx);
done:
    fails = t->nfail;
    if (t->rank == 0) printf("%d passed, %d failed\n", t->npass, t->nfail);
    pt_dist_finalize(t->d);
    free(t);
    return fails ? 1 : 0;
}
