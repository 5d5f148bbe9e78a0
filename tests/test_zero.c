/* test_zero.c - ZeRO-1/2/3 (>>dp, pt_dp_zero): optimizer state, gradients and parameters sharded over the DP ranks.
   Build: mpicc -std=c99 -DPTRAIN_MPI -fopenmp -I. tests/test_zero.c -lm, run under mpirun -np 2 or 4
   (also builds without MPI: a world of one, where ZeRO-1 changes nothing). Every rank trains the
   small GPT of test_dp.c on its slice of a fixed global batch with pt_dp averaging the gradients and
   the AdamW state sharded by pt_dp_zero (each rank updates its own slab range, then the parameter
   slab is allgathered), and also trains the same model on the whole batch alone (the reference);
   losses and final parameters must agree, and the optimizer state per rank must be ~1/dp of the
   whole; ZeRO-2's gradient storage and ZeRO-3's parameters held between steps ~1/dp, and a model that
   does not declare its parameter use under ZeRO-3 is stopped by a clear error. Every check is agreed across ranks (test_util.h); rank 0 prints PASS/FAIL and "N passed, N failed". */
#include "dp_common.h"
static int64_t sum_dp(tctx *t, int64_t x) {
    int64_t s = x;
#ifdef PTRAIN_MPI
    MPI_Allreduce(&x, &s, 1, MPI_INT64_T, MPI_SUM, *(MPI_Comm *)pt_dist_comm(t->d, PT_COMM_DP));
#else
    (void)t;
#endif
    return s;
}

#if defined(__linux__)
/* resident MiB of this process (/proc/self/statm) */
/* an allocator counting its live allocations (user: a long) */
static void *live_alloc(void *user, size_t n) {
    void *p = malloc(n);
    if (p) ++*(long *)user;
    return p;
}
static void *live_realloc(void *user, void *q, size_t n) {
    void *p = realloc(q, n);
    if (p && !q) ++*(long *)user;
    return p;
}
static void live_free(void *user, void *q) {
    --*(long *)user;
    free(q);
}
static double rss_mib(void) {
    long pages = 0, res = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return 0;
    if (fscanf(f, "%ld %ld", &pages, &res) != 2) res = 0;
    fclose(f);
    return (double)res * (double)sysconf(_SC_PAGESIZE) / 1048576.0;
}
#endif

int main(int argc, char **argv) {
    tctx *t = (tctx *)calloc(1, sizeof(tctx));
    char why[512];
    run_cfg c;
    run_out ref, a;
    int i, fails, stage;
    char name[256];
    int64_t full, want, tol, sum;
    if (!t) return 1;
    switch (setup(t, &argc, &argv, "test_zero", ", ZeRO-1", &ref)) {
    case -1: return 1;
    case 0: goto done;
    default: break;
    }
    full = ref.state_bytes;
    {
        pt_tensor ps = pt_param_slab(ref.ctx);
        snprintf(why, sizeof why, "state %lld bytes, slab %lld floats", (long long)full, (long long)pt_numel(&ps));
        CHECK_WHY(full == 2 * 4 * pt_numel(&ps), "reference: AdamW state is 2 floats per slab element", why);
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
    CHECK_WHY(a.ok && llabs(a.state_bytes - want) <= tol, "ZeRO-1: optimizer state bytes per rank = full / dp (within 16-float pads)", why);
    sum = sum_dp(t, a.state_bytes);
    snprintf(why, sizeof why, "sum over ranks %lld, full %lld", (long long)sum, (long long)full);
    CHECK_WHY(sum == full, "ZeRO-1: the state shards add up to the full state", why);
    snprintf(why, sizeof why, "pt_mem optim %lld, state %lld", (long long)a.mem_optim, (long long)a.state_bytes);
    CHECK_WHY(a.mem_optim == a.state_bytes, "ZeRO-1: memory accounting (pt_mem optim) drops to the shard", why);
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
    CHECK_WHY(a.ok && a.frozen0 == a.frozen1, "ZeRO-1 with frozen parameter: it stays unchanged", "it changed");
    pt_shutdown(a.ctx);

    /* switched on after 2 steps (state re-sharded, kept) and back off after 4 (state gathered) */
    c.extras = 0, c.zero_at = 2, c.unzero_at = 4;
    run(t, &c, &a);
    compare(t, "ZeRO-1 on at step 2, off at step 4 (state kept across re-sharding)", &a, &ref);
    pt_shutdown(a.ctx);

    /* the step contract under ZeRO-1 and ZeRO-2: passes 1, 2, 4 (the global batch split further), 16 KiB buckets */
    c.extras = 0, c.zero_at = 0, c.unzero_at = -1, c.bucket = 16 << 10, c.step_api = 1;
    for (stage = 1; stage <= 3; stage++)
        for (i = 1; i <= 4; i *= 2) {
            int64_t per = 4 * pt_param_numel(ref.ctx) + 4 * 16 * pt_param_count(ref.ctx); /* bytes of one whole reduction, pads included */
            c.stage = stage, c.micro = i;
            run(t, &c, &a);
            snprintf(name, sizeof name, "ZeRO-%d, pt_dp_begin_step(dp, %d)", stage, i);
            compare(t, name, &a, &ref);
            want = full / t->dpn, tol = 2 * 2 * 16 * 4;
            snprintf(why, sizeof why, "%lld bytes, want %lld +- %lld", (long long)a.state_bytes, (long long)want, (long long)tol);
            snprintf(name, sizeof name, "ZeRO-%d, %d passes: optimizer bytes per rank = full / dp", stage, i);
            CHECK_WHY(a.ok && llabs(a.state_bytes - want) <= tol, name, why);
            snprintf(why, sizeof why, "bytes reduced %lld (one whole reduction <= %lld), started during backward %lld of %lld",
                     (long long)a.st.bytes_reduced, (long long)per, (long long)a.st.started_before_end,
                     (long long)(a.st.buckets * STEPS * (stage >= 2 ? i : 1)));
            snprintf(name, sizeof name, "ZeRO-%d, %d passes: %s per step, started during backward", stage, i,
                     stage >= 2 ? "one reduce-scatter per pass" : "one reduce-scatter");
            CHECK_WHY(t->dpn == 1 || (a.st.bytes_reduced <= (int64_t)STEPS * (stage >= 2 ? i : 1) * per &&
                                      a.st.bytes_reduced > (int64_t)STEPS * (stage >= 2 ? i : 1) * (per / 2) && a.st.started_before_end > 0),
                      name, why);
            if (stage == 3) { /* the parameters: after the last update only this rank's range is held; gathered per use */
                int64_t slab = full / 2;
                snprintf(why, sizeof why, "pt_mem params %lld bytes (slab %lld, shard ~%lld), %lld gathers of %lld bytes", (long long)a.mem_params,
                         (long long)slab, (long long)(slab / t->dpn), (long long)a.st.gathers, (long long)a.st.gather_bytes);
                snprintf(name, sizeof name, "ZeRO-3, %d passes: parameters held between steps = the shard (slab/dp); gathered per use", i);
                CHECK_WHY(t->dpn == 1 || (llabs(a.mem_params - slab / t->dpn) <= 64 && a.st.gathers >= STEPS * i && a.st.gather_bytes > 0), name, why);
                if (t->dpn > 1 && tu_rank == 0 && i == 4) printf("ZeRO-3 dp%d: %s\n", t->dpn, why);
            }
            if (stage >= 2 && i == 4) {
                run_out b;
                pt_tensor pa = pt_param_slab(a.ctx), pb;
                int64_t grads = a.mem_grads, bmax = 16 << 10, shard = full / 2 / t->dpn;
                int k;
                for (k = 0; k < pt_param_count(a.ctx); k++) /* a parameter larger than a bucket has one of its own */
                    if (4 * ((pt_numel(&pt_param_at(a.ctx, k)->value) + 15) & ~(int64_t)15) > bmax) bmax = 4 * ((pt_numel(&pt_param_at(a.ctx, k)->value) + 15) & ~(int64_t)15);
                snprintf(why, sizeof why, "ZeRO-%d: pt_mem grads %lld bytes (slab %lld, shard %lld, largest bucket <= %lld), reducer extra %lld", stage, (long long)grads,
                         (long long)(full / 2), (long long)shard, (long long)bmax, (long long)a.st.extra_bytes);
                CHECK_WHY(t->dpn == 1 || (grads >= shard - 64 && grads <= shard + 64 + 3 * bmax && grads < full / 2 && a.st.extra_bytes == 0),
                          tu_name("ZeRO-%d: gradient storage (pt_mem grads) is the shard (slab/dp) and at most 3 bucket buffers, nothing else", stage), why);
                if (t->dpn > 1 && tu_rank == 0) printf("ZeRO-%d dp%d: %s\n", stage, t->dpn, why);
                run(t, &c, &b);
                pb = pt_param_slab(b.ctx);
                CHECK_WHY(a.ok && b.ok && !memcmp(a.loss, b.loss, sizeof a.loss) && !memcmp(pt_f32(&pa), pt_f32(&pb), (size_t)pt_numel(&pa) * 4),
                          tu_name("ZeRO-%d, 4 passes, run twice: bit-identical losses and parameters", stage), "they differ");
                pt_shutdown(b.ctx);
            }
            pt_shutdown(a.ctx);
        }

    /* ZeRO-2 with interleaved passes of a split model (part B one micro-batch ahead of part A) */
    {
        run_out uref;
        run_cfg u;
        memset(&u, 0, sizeof u);
        u.whole = 1, u.micro = 1, u.zero_at = u.unzero_at = -1, u.untied = 1;
        run(t, &u, &uref);
        u.whole = 0, u.use_dp = 1, u.bucket = 16 << 10, u.split = 1, u.micro = 4, u.zero_at = 0;
        for (stage = 2; stage <= 3; stage++) {
            u.stage = stage;
            run(t, &u, &a);
            snprintf(name, sizeof name, "ZeRO-%d, split model, 4 interleaved passes (B0 B1 A0 B2 A1 B3 A2 A3)", stage);
            compare(t, name, &a, &uref);
            pt_shutdown(a.ctx);
        }
        pt_shutdown(uref.ctx);
    }

    /* bf16 compression under ZeRO-1 and ZeRO-2 (reduce-scatter of bf16 buckets): the looser bound */
    c.compress = 1, c.micro = 2;
    for (stage = 1; stage <= 2; stage++) {
        c.stage = stage;
        run(t, &c, &a);
        snprintf(name, sizeof name, "ZeRO-%d, 2 passes, bf16 compression with error feedback", stage);
        compare_tol(t, name, &a, &ref, 1e-3, 5e-2, 1e-2);
        pt_shutdown(a.ctx);
    }
    c.compress = 0, c.step_api = 0, c.stage = 0, c.micro = 1, c.bucket = 0;

    /* ZeRO-3 and a model that does not declare what its forward reads (pt_params_use): the first op
       that reads a parameter not gathered fails, naming itself; declared, the same forward runs */
    if (t->dpn > 1) {
        pt_desc desc;
        pt_optim_desc od;
        pt_ctx *ctx;
        pt_linear_layer l1, l2;
        pt_optim *opt;
        pt_dp *dp;
        pt_graph *g;
        pt_tensor *x, *y = NULL, *ps[4];
        int st3;
        memset(&desc, 0, sizeof desc);
        desc.seed = 5, desc.threads = 1, desc.log = NULL;
        ctx = pt_init(&desc);
        l1 = pt_linear_new(ctx, "a", 32, 32, 1, 0.1f), l2 = pt_linear_new(ctx, "b", 32, 32, 1, 0.1f);
        memset(&od, 0, sizeof od);
        od.kind = PT_OPTIM_SGD, od.lr = 0.1f;
        opt = pt_optim_new(ctx, &od);
        dp = pt_dp_new(ctx, t->d, 4096); /* one bucket per layer */
        st3 = dp ? pt_dp_zero(dp, opt, 3) : PT_ERR_ARG;
        g = pt_graph_new(ctx);
        x = g ? pt_full(g, 2, (int64_t[]){4, 32}, 1.0f) : NULL;
        if (st3 == PT_OK && x) y = pt_linear_fwd(g, &l2, pt_linear_fwd(g, &l1, x));
        snprintf(why, sizeof why, "zero 3: %d, output %s, status %d: %.300s", (int)st3, y ? "made" : "none", (int)pt_status_get(ctx), pt_error(ctx));
        CHECK_WHY(st3 == PT_OK && pt_status_get(ctx) == PT_ERR_STATE && strstr(pt_error(ctx), "pt_linear") && strstr(pt_error(ctx), "pt_params_use"),
                  "ZeRO-3: an op reading a parameter the model did not declare fails (PT_ERR_STATE, naming the op and pt_params_use)", why);
        pt_error_clear(ctx);
        ps[0] = l1.w, ps[1] = l1.b, ps[2] = l2.w, ps[3] = l2.b;
        pt_graph_reset(g);
        x = pt_full(g, 2, (int64_t[]){4, 32}, 1.0f);
        pt_params_use(ctx, 4, ps, 0);
        y = pt_linear_fwd(g, &l2, pt_linear_fwd(g, &l1, x));
        snprintf(why, sizeof why, "status %d: %.300s", (int)pt_status_get(ctx), pt_error(ctx));
        CHECK_WHY(y && pt_status_get(ctx) == PT_OK && isfinite(pt_item(pt_sum(g, y))), "ZeRO-3: the same forward runs once its parameters are declared", why);
        pt_graph_free(g);
        pt_dp_free(dp);
        pt_shutdown(ctx);
    }

#if defined(__linux__)
    /* ZeRO-3 returns the pages of what it releases: two 4 MiB weights in buckets of their own, each
       inside one rank's shard at dp 2; the whole slab gathered (pt_param_slab), then the update's
       release gives the other rank's weight back to the system (resident memory from /proc) */
    if (t->dpn == 2) {
        pt_desc desc;
        pt_optim_desc od;
        pt_ctx *ctx;
        pt_optim *opt;
        pt_dp *dp;
        double r1 = 0, r2 = 0;
        memset(&desc, 0, sizeof desc);
        desc.seed = 5, desc.threads = 1;
        ctx = pt_init(&desc);
        pt_linear_new(ctx, "big0", 1024, 1024, 0, 0.02f), pt_linear_new(ctx, "big1", 1024, 1024, 0, 0.02f);
        memset(&od, 0, sizeof od);
        od.kind = PT_OPTIM_SGD, od.lr = 0.1f;
        opt = pt_optim_new(ctx, &od);
        dp = pt_dp_new(ctx, t->d, 4 << 20);
        if (dp && pt_dp_zero(dp, opt, 3) == PT_OK) {
            (void)pt_param_slab(ctx);
            r1 = rss_mib();
            pt_optim_step(opt, 0.1f);
            r2 = rss_mib();
        }
        snprintf(why, sizeof why, "resident %.2f MiB with the slab gathered, %.2f MiB after the release; pt_mem params %lld bytes: %.200s", r1, r2,
                 (long long)pt_mem(ctx).params, pt_error(ctx));
        CHECK_WHY(pt_status_get(ctx) == PT_OK && r1 - r2 > 3.5 && pt_mem(ctx).params < (5 << 20),
                  "ZeRO-3: a released bucket's pages go back to the system (resident memory drops by the other rank's 4 MiB)", why);
        if (tu_rank == 0) printf("ZeRO-3 release: %s\n", why);
        pt_dp_free(dp);
        pt_shutdown(ctx);
    }
#endif

    /* ending a ZeRO-3 run: pt_dp_free gathers the whole slab back (collectives recorded), pt_shutdown
       with the reducer attached frees it without any, and frees it (no allocation left live) */
    if (t->dpn > 1) {
        uint64_t gathered[2];
        long live[2];
        int k;
        for (k = 0; k < 2; k++) {
            pt_desc desc;
            pt_optim_desc od;
            pt_ctx *ctx;
            pt_optim *opt;
            pt_dp *dp;
            pt_coll_record r0, r1;
            memset(&desc, 0, sizeof desc);
            desc.seed = 5, desc.threads = 1;
            desc.allocator.alloc = live_alloc, desc.allocator.realloc = live_realloc, desc.allocator.free = live_free;
            desc.allocator.user = &live[k];
            live[k] = 0;
            ctx = pt_init(&desc);
            pt_linear_new(ctx, "a", 64, 64, 0, 0.02f), pt_linear_new(ctx, "b", 64, 64, 0, 0.02f);
            memset(&od, 0, sizeof od);
            od.kind = PT_OPTIM_ADAMW, od.lr = 0.1f;
            opt = pt_optim_new(ctx, &od);
            dp = pt_dp_new(ctx, t->d, 4096);
            if (!dp || pt_dp_zero(dp, opt, 3) != PT_OK) pt_error_set(ctx, PT_ERR_STATE, "set-up");
            pt_optim_step(opt, 0.1f); /* the update releases every bucket */
            memset(&r0, 0, sizeof r0), memset(&r1, 0, sizeof r1);
            pt_dist_records(t->d, &r0, 1);
            if (k == 0) pt_dp_free(dp);
            pt_shutdown(ctx); /* k == 1: frees the attached reducer */
            pt_dist_records(t->d, &r1, 1);
            gathered[k] = r1.seq - r0.seq;
        }
        snprintf(why, sizeof why, "collectives recorded while freeing: pt_dp_free %llu, pt_shutdown alone %llu; allocations left: %ld, %ld",
                 (unsigned long long)gathered[0], (unsigned long long)gathered[1], live[0], live[1]);
        CHECK_WHY(gathered[0] > 0 && gathered[1] == 0 && live[0] == 0 && live[1] == 0,
                  "ZeRO-3: pt_shutdown frees an attached reducer, without gathering the slab back (pt_dp_free does)", why);
    }

    /* the check can fail: without the allgather each rank holds only its own shard's updates */
    if (t->dpn > 1) {
        double pd;
        c.zero_at = 0, c.unzero_at = -1, c.no_gather = 1, c.extras = 0;
        run(t, &c, &a);
        pd = a.ok ? param_diff(a.ctx, ref.ctx) : 0;
        snprintf(why, sizeof why, "worst per-tensor relative difference only %.3g", pd);
        CHECK_WHY(pd > 1e-3, "control: ZeRO-1 without the parameter allgather differs from the reference (> 1e-3)", why);
        pt_shutdown(a.ctx);
    }
    pt_shutdown(ref.ctx);
done:
    fails = tu_summary();
    pt_dist_finalize(t->d);
    free(t);
    return fails;
}
