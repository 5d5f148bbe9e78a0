/* test_dp.c - data parallelism (>>dp): pt_dp_new/begin/finish against a single-process reference.
   Build: mpicc -std=c99 -DPTRAIN_MPI -fopenmp -I. tests/test_dp.c -lm, run under mpirun -np 2 or 4
   (also builds and runs without MPI: a world of one, no communication). Every rank trains a small
   GPT on its slice of a fixed global batch with pt_dp averaging the gradients, and also trains the
   same model on the whole batch alone (the reference); losses and final parameters must agree.
   Every check is agreed across ranks (MPI_MIN); rank 0 prints PASS/FAIL and "N passed, N failed". */
#include "dp_common.h"
int main(int argc, char **argv) {
    tctx *t = (tctx *)calloc(1, sizeof(tctx));
    char err[512], name[256], why[256];
    run_cfg c;
    run_out ref, a, b;
    pt_rng rng;
    int s, i, fails;
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
    if (t->rank == 0) printf("test_dp: %d DP ranks, GPT vocab 64, 2 layers, width 32, B=%d T=%d, %d AdamW steps\n", t->dpn, B, T, STEPS);
    if (!check(t, B % (MAXMICRO * t->dpn) == 0, "the global batch splits into 4 micro-batches per rank", "use np 1, 2 or 4")) goto done;

    memset(&c, 0, sizeof c);
    c.whole = 1, c.micro = 1, c.zero_at = c.unzero_at = -1;
    run(t, &c, &ref); /* the single-process reference */
    check(t, ref.ok, "reference (whole batch, no DP) trains", ref.err);
    snprintf(why, sizeof why, "step-0 gradient norm %.4f", ref.norm[0]);
    check(t, ref.norm[0] > 0.5f, "reference: clipping (clip_norm 0.5) is active at step 0, so the norm under DP/ZeRO matters", why);

    /* default buckets (25 MiB: one bucket) */
    memset(&c, 0, sizeof c);
    c.use_dp = 1, c.micro = 1, c.zero_at = c.unzero_at = -1;
    run(t, &c, &a);
    compare(t, "DP, default buckets", &a, &ref);
    snprintf(why, sizeof why, "%lld vs %lld bytes", (long long)a.state_bytes, (long long)ref.state_bytes);
    check(t, a.state_bytes == ref.state_bytes, "DP without ZeRO keeps the whole optimizer state on every rank", why);
    snprintf(why, sizeof why, "buckets %lld", (long long)a.st.buckets);
    check(t, a.st.buckets == 1, "DP, default buckets: the whole gradient (~113 KB) is one bucket", why);
    pt_shutdown(a.ctx);

    /* 16 KiB buckets: overlap */
    c.bucket = 16 << 10;
    run(t, &c, &a);
    compare(t, "DP, 16 KiB buckets", &a, &ref);
    snprintf(why, sizeof why, "buckets %lld, started before the end %lld, bytes %lld", (long long)a.st.buckets,
             (long long)a.st.started_before_end, (long long)a.st.bytes_reduced);
    check(t, a.st.buckets > 1, "DP, 16 KiB buckets: more than one bucket", why);
    check(t, t->dpn == 1 || a.st.started_before_end > 0, "DP, 16 KiB buckets: buckets start during backward (overlap)", why);
    check(t, t->dpn == 1 || a.st.bytes_reduced == (int64_t)STEPS * 4 * pt_param_numel(ref.ctx) ||
                 a.st.bytes_reduced >= (int64_t)STEPS * 4 * pt_param_numel(ref.ctx),
          "DP, 16 KiB buckets: every gradient element reduced each step", why);

    /* the same run again: bit-identical */
    run(t, &c, &b);
    check(t, a.ok && b.ok && !memcmp(a.loss, b.loss, sizeof a.loss), "DP, 16 KiB buckets, run twice: bit-identical losses",
          "losses differ");
    {
        pt_tensor pa = pt_param_slab(a.ctx), pb = pt_param_slab(b.ctx);
        check(t, a.ok && b.ok && pt_numel(&pa) == pt_numel(&pb) && !memcmp(pt_f32(&pa), pt_f32(&pb), (size_t)pt_numel(&pa) * 4),
              "DP, 16 KiB buckets, run twice: bit-identical parameter slabs", "parameters differ");
    }
    pt_shutdown(a.ctx);
    pt_shutdown(b.ctx);

    /* tiny buckets: one parameter each */
    c.bucket = 4;
    run(t, &c, &a);
    compare(t, "DP, 4-byte buckets (one per parameter)", &a, &ref);
    snprintf(why, sizeof why, "buckets %lld of %d parameters", (long long)a.st.buckets, pt_param_count(ref.ctx));
    check(t, a.st.buckets == pt_param_count(ref.ctx), "DP, 4-byte buckets: one bucket per parameter", why);
    pt_shutdown(a.ctx);

    /* gradient accumulation: 2 micro-batches, reduce on the second */
    c.bucket = 16 << 10, c.micro = 2;
    run(t, &c, &a);
    compare(t, "DP + accumulation (2 micro-batches)", &a, &ref);
    snprintf(why, sizeof why, "bytes reduced %lld, want %lld", (long long)a.st.bytes_reduced,
             (long long)(STEPS * 4 * pt_param_numel(ref.ctx)));
    check(t, t->dpn == 1 || a.st.bytes_reduced <= (int64_t)STEPS * 4 * (pt_param_numel(ref.ctx) + 16 * pt_param_count(ref.ctx)),
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
        check(t, t->dpn == 1 || (a.st.bytes_reduced <= (int64_t)STEPS * 4 * (pt_param_numel(ref.ctx) + 16 * pt_param_count(ref.ctx)) &&
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
        check(t, uref.ok, "reference with an untied head trains", uref.err);
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
        check(t, pt_dist_nodes(t->d) > 1, "DP, hierarchical: the fake nodes make more than one node", why);
    }
    pt_shutdown(a.ctx);
    c.hier = 0;

    /* bf16 on the wire with error feedback: a looser bound; deterministic */
    c.compress = 1;
    run(t, &c, &a);
    compare_tol(t, "DP, bf16 compression with error feedback", &a, &ref, 1e-3, 5e-2, 1e-2);
    snprintf(why, sizeof why, "bytes reduced %lld", (long long)a.st.bytes_reduced);
    check(t, t->dpn == 1 || a.st.bytes_reduced <= (int64_t)STEPS * 2 * (pt_param_numel(ref.ctx) + 16 * pt_param_count(ref.ctx)),
          "DP, bf16 compression: 2 bytes per gradient element on the wire", why);
    run(t, &c, &b);
    {
        pt_tensor pa = pt_param_slab(a.ctx), pb = pt_param_slab(b.ctx);
        check(t, a.ok && b.ok && !memcmp(a.loss, b.loss, sizeof a.loss) && !memcmp(pt_f32(&pa), pt_f32(&pb), (size_t)pt_numel(&pa) * 4),
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
        check(t, a.ok && a.frozen0 == a.frozen1, name, "it changed");
        snprintf(why, sizeof why, "started before the end %lld of %lld", (long long)a.st.started_before_end, (long long)a.st.buckets * STEPS);
        if (i == 1) check(t, t->dpn == 1 || a.st.started_before_end > 0, "DP, unused parameter in the last bucket: overlap still happens", why);
        else check(t, a.st.started_before_end == 0, "DP, unused parameter in the first bucket: every bucket waits for pt_dp_finish (in order)", why);
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
        check(t, pt_status_get(ctx) == PT_ERR_ARG && strstr(pt_error(ctx), "passes must be >= 1"), "error: pt_dp_begin_step(dp, 0)", why);
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
        check(t, pt_status_get(ctx) == PT_ERR_STATE && strstr(pt_error(ctx), "completed 2 times in a step of 1"),
              "error: a second backward in a step of 1 pass names the parameter and the counts", why);
        pt_dp_free(dp);
        pt_gpt_free(m);
        pt_shutdown(ctx);
    }

    /* the check can fail: without the reduction each rank's model drifts from the reference */
    if (t->dpn > 1) {
        double pd;
        c.use_dp = 0, c.extras = 0;
        run(t, &c, &a);
        pd = a.ok ? param_diff(a.ctx, ref.ctx) : 0;
        snprintf(why, sizeof why, "worst per-tensor relative difference only %.3g", pd);
        check(t, pd > 1e-3, "control: slices trained without pt_dp do differ from the reference (> 1e-3)", why);
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
