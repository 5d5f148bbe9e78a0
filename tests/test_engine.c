/* test_engine.c - the serving engine (see engine) and block sharing in the KV pool (see infer).
   Build: cc -std=c99 -O2 -march=native -fopenmp -I. tests/test_engine.c -lm
   A GPT of 2 layers, width 64, random weights; 10 requests (prompts 3..70 tokens, some sharing a
   48-token prefix; seeded sampling at temperature 0.9). Every run below checks pt_infer_check after
   every iteration, and every request's tokens and the logits each token was sampled from bitwise
   against the request run alone:
   - batch invariance: all together; prefill in chunks of 5 under a budget of 13; preemption by
     recompute and by swap (a pool too small for all, priorities that preempt); prefix-cache hits
     (blocks counted, the logits equal);
   - copy on write: a forked sequence written after the fork, its logits = a fresh one's;
   - priorities: a high request arriving at a full engine preempts a low one and finishes first;
     no starvation: one low request under a flood of high ones finishes (aging);
   - cancellation: the blocks are back at the next iteration; invalid requests, a prompt longer
     than the context or than the pool, a pool exhausted by one request: an error for that request,
     the others finish;
   - determinism and replay: the same trace twice gives the same events; an engine following the
     recorded trace (with other settings) reproduces the events and the tokens;
   - release: a finished request's memory goes back and its id is unknown after, the others (ids on
     both sides of it) still answer; an unfinished one is refused; the event trace capped (max_events);
   - threads: an engine thread runs while this thread submits, polls, cancels and waits (prompt lookup on);
   - speculative decoding: prompt lookup, a draft model that is the model itself (every greedy draft
     accepted) and a 1-layer draft model, greedy and sampled (top-k, top-p, repeat penalty): every
     request's tokens and logits bitwise those without drafting (a stop string, max_tokens, prompt
     chunks, 10 requests together), drafts accepted; a trace with drafts replays; the off-switch turns
     drafting off where it does not pay; pt_generate with drafts past max_seq (refills) = without;
     callbacks once per token in order, a callback stop inside an accepted run ends it at its token. */
#define PTRAIN_IMPLEMENTATION
#include "ptrain.h"
#include "tests/test_util.h"
#if !defined(PTRAIN_NO_THREADS) && (defined(__unix__) || defined(__APPLE__))
#include <pthread.h>
#define TE_THREADS 1
#endif

static void quiet(void *u, int level, const char *msg) { (void)u, (void)level, (void)msg; }
static void no_err(void *u, pt_status s, const char *msg) { (void)u, (void)s, (void)msg; }

#define V 96
#define MAXSEQ 128
#define NQ 10
static pt_ctx *g_ctx;
static pt_gpt *g_m;
static pt_gpt_weights *g_w;
static int32_t g_prompt[NQ][80];
static int g_np[NQ], g_maxt[NQ];
static int32_t g_ref_tok[NQ][64];
static float *g_ref_lg[NQ];
static int g_ref_n[NQ];

static int model_new(int threads) {
    tu_rng r = {42};
    pt_desc d;
    pt_gpt_config c;
    pt_tensor slab;
    float *p;
    int64_t i;
    memset(&d, 0, sizeof d);
    d.seed = 7, d.threads = threads, d.log = quiet, d.on_error = no_err, d.log_level = PT_LOG_ERROR;
    if (!(g_ctx = pt_init(&d))) return 0;
    memset(&c, 0, sizeof c);
    c.vocab = V, c.max_seq = MAXSEQ, c.layers = 2, c.width = 64, c.heads = 4;
    if (!(g_m = pt_gpt_new(g_ctx, &c))) return 0;
    slab = pt_param_slab(g_ctx);
    p = pt_f32(&slab);
    for (i = 0; i < slab.shape[0]; i++) p[i] += tu_uniform(&r, -0.15f, 0.15f);
    return (g_w = pt_gpt_weights_from(g_m, PT_W_F32)) != NULL;
}
static pt_infer *mk_inf(int max_seqs, int64_t kv_tokens) {
    pt_infer_desc d;
    memset(&d, 0, sizeof d);
    d.max_seqs = max_seqs, d.kv_tokens = kv_tokens;
    return pt_infer_new(g_ctx, g_w, &d);
}
static pt_engine_request mk_req(int k, int prio, double arrival, float *lg) {
    pt_engine_request r;
    memset(&r, 0, sizeof r);
    r.prompt = g_prompt[k], r.nprompt = g_np[k], r.max_tokens = g_maxt[k], r.priority = prio, r.arrival = arrival, r.logits = lg;
    r.sample.temperature = 0.9f, r.sample.top_k = 40, r.sample.seed = 1000 + (uint64_t)k;
    return r;
}

/* runs e to the end, checking the allocator after every iteration; returns the iterations or -1 */
static int g_inv_bad;
static char g_inv_msg[300];
static int64_t drive(pt_engine *e, pt_infer *inf, int64_t limit) {
    int64_t it = 0;
    int r;
    while ((r = pt_engine_step(e)) > 0 && ++it < limit)
        if (pt_infer_check(inf) != PT_OK && !g_inv_bad) g_inv_bad = 1, snprintf(g_inv_msg, sizeof g_inv_msg, "%.250s", pt_error(g_ctx));
    if (pt_infer_check(inf) != PT_OK && !g_inv_bad) g_inv_bad = 1, snprintf(g_inv_msg, sizeof g_inv_msg, "%.250s", pt_error(g_ctx));
    return r < 0 || it >= limit ? -1 : it;
}

static void make_requests(void) {
    tu_rng r = {9};
    int k, i;
    for (k = 0; k < NQ; k++) {
        g_np[k] = 3 + (int)(tu_next(&r) % 68);
        g_maxt[k] = 8 + (int)(tu_next(&r) % 24);
        for (i = 0; i < g_np[k]; i++) g_prompt[k][i] = (int32_t)(tu_next(&r) % V);
    }
    for (k = 6; k < NQ; k++) { /* 4 requests share a 48-token prefix with request 5 */
        g_np[k] = 48 + 5 + k;
        memcpy(g_prompt[k], g_prompt[5], 48 * sizeof(int32_t));
        if (g_np[5] < 48) g_np[5] = 60;
        for (i = 48; i < g_np[k]; i++) g_prompt[k][i] = (int32_t)(tu_next(&r) % V);
    }
}

/* each request alone on a fresh pool, no prefix cache: the reference */
static void reference(void) {
    int k, ok = 1;
    for (k = 0; k < NQ; k++) {
        pt_infer *inf = mk_inf(1, 0);
        pt_engine_desc d;
        pt_engine *e;
        pt_engine_request r;
        int64_t id;
        memset(&d, 0, sizeof d);
        d.no_prefix_cache = 1;
        e = pt_engine_new(inf, &d);
        g_ref_lg[k] = (float *)malloc(sizeof(float) * V * 64);
        r = mk_req(k, 0, 0, g_ref_lg[k]);
        id = pt_engine_submit(e, &r);
        drive(e, inf, 100000);
        {
            pt_engine_result res;
            ok &= pt_engine_poll(e, id, &res, g_ref_tok[k], 64) == PT_REQ_DONE;
            g_ref_n[k] = res.ntokens;
        }
        pt_engine_free(e);
        pt_infer_free(inf);
    }
    CHECK(ok, "reference: every request alone finishes");
}

/* the requests through e (arrivals, priorities as given); 1 when each one's tokens and logits equal the reference */
typedef struct run_opts {
    int max_seqs;
    int64_t kv_tokens;
    pt_engine_desc d;
    int prio[NQ];
    double arrival[NQ];
} run_opts;
static int run_all(const run_opts *o, char *why, size_t nwhy, pt_engine_stats *st, pt_kv_stats *ks, pt_engine_event **evs, int64_t *nev,
                   int32_t (*tok_out)[64]) {
    pt_infer *inf = mk_inf(o->max_seqs, o->kv_tokens);
    pt_engine *e = pt_engine_new(inf, &o->d);
    float *lg[NQ];
    int64_t id[NQ];
    int k, ok = 1;
    why[0] = 0;
    g_inv_bad = 0;
    pt_error_clear(g_ctx);
    for (k = 0; k < NQ; k++) {
        pt_engine_request r;
        lg[k] = (float *)malloc(sizeof(float) * V * 64);
        r = mk_req(k, o->prio[k], o->arrival[k], lg[k]);
        id[k] = pt_engine_submit(e, &r);
    }
    if (drive(e, inf, 100000) < 0) ok = 0, snprintf(why, nwhy, "the engine failed: %.250s", pt_error(g_ctx));
    if (g_inv_bad) ok = 0, snprintf(why, nwhy, "allocator invariant: %.250s", g_inv_msg);
    for (k = 0; k < NQ && ok; k++) {
        pt_engine_result res;
        int32_t tk[64] = {0};
        int st_ = pt_engine_poll(e, id[k], &res, tk, 64);
        if (st_ != PT_REQ_DONE || res.ntokens != g_ref_n[k] || memcmp(tk, g_ref_tok[k], sizeof(int32_t) * (size_t)res.ntokens))
            ok = 0, snprintf(why, nwhy, "request %d: state %d, %d tokens (alone: %d), tokens %s", k, st_, res.ntokens, g_ref_n[k],
                             st_ == PT_REQ_DONE && res.ntokens == g_ref_n[k] ? "differ" : "-");
        else if (memcmp(lg[k], g_ref_lg[k], sizeof(float) * V * (size_t)res.ntokens))
            ok = 0, snprintf(why, nwhy, "request %d: logits not bitwise equal to the request alone", k);
        if (tok_out) memcpy(tok_out[k], tk, sizeof tk);
    }
    if (st) *st = pt_engine_stats_get(e);
    if (ks) *ks = pt_infer_kv_stats(inf);
    if (evs) {
        const pt_engine_event *x = pt_engine_events(e, nev);
        *evs = (pt_engine_event *)malloc(sizeof(pt_engine_event) * (size_t)(*nev + 1));
        memcpy(*evs, x, sizeof(pt_engine_event) * (size_t)*nev);
    }
    for (k = 0; k < NQ; k++) free(lg[k]);
    pt_engine_free(e);
    pt_infer_free(inf);
    return ok;
}
static run_opts base_opts(void) {
    run_opts o;
    memset(&o, 0, sizeof o);
    o.max_seqs = NQ, o.kv_tokens = 0;
    o.d.token_budget = 1024, o.d.no_prefix_cache = 1;
    return o;
}

static void test_invariance(void) {
    char why[300];
    run_opts o;
    pt_engine_stats st;
    pt_kv_stats ks;
    int k, ok;
    o = base_opts();
    ok = run_all(&o, why, sizeof why, &st, NULL, NULL, NULL, NULL);
    CHECKF(ok && st.max_running_seen == NQ, "invariance: all 10 requests in one batch = each alone (tokens, logits bitwise)", "%s (max running %lld)",
           why, (long long)st.max_running_seen);
    o = base_opts();
    o.d.token_budget = 13, o.d.max_chunk = 5;
    for (k = 0; k < NQ; k++) o.arrival[k] = 2 * k;
    ok = run_all(&o, why, sizeof why, &st, NULL, NULL, NULL, NULL);
    CHECKF(ok && st.prefill_tokens > 0, "invariance: prefill in chunks of 5 under a budget of 13, staggered arrivals = alone", "%s", why);
    for (k = 0; k < 2; k++) {
        o = base_opts();
        o.kv_tokens = 12 * 16, o.d.token_budget = 64, o.d.preempt = k ? PT_PREEMPT_SWAP : PT_PREEMPT_RECOMPUTE;
        ok = run_all(&o, why, sizeof why, &st, NULL, NULL, NULL, NULL);
        CHECKF(ok && st.preempted > 0 && (!k || st.swapped_in > 0), k ? "invariance: preemption by swap (12-block pool) = alone"
                                                                       : "invariance: preemption by recompute (12-block pool) = alone",
               "%s (preempted %lld, swapped in %lld)", why, (long long)st.preempted, (long long)st.swapped_in);
    }
    o = base_opts();
    o.d.no_prefix_cache = 0, o.d.token_budget = 256;
    for (k = 0; k < NQ; k++) o.arrival[k] = k >= 6 ? 60 + 40 * (k - 6) : 0; /* the prefix sharers arrive one after another */
    ok = run_all(&o, why, sizeof why, &st, &ks, NULL, NULL, NULL);
    CHECKF(ok && ks.hit_tokens >= 4 * 47 && ks.hit_blocks >= 4 * 3, "invariance: prefix-cache hits (a shared 48-token prefix) = alone",
           "%s (hit blocks %lld, tokens %lld)", why, (long long)ks.hit_blocks, (long long)ks.hit_tokens);
    o = base_opts();
    o.d.no_prefix_cache = 0, o.kv_tokens = 10 * 16, o.d.token_budget = 24, o.d.max_chunk = 7, o.d.preempt = PT_PREEMPT_SWAP;
    for (k = 0; k < NQ; k++) o.prio[k] = k % 3, o.arrival[k] = k;
    ok = run_all(&o, why, sizeof why, &st, &ks, NULL, NULL, NULL);
    CHECKF(ok && st.preempted > 0, "invariance: everything at once (chunks, priorities, swap, prefix cache, 10-block pool) = alone",
           "%s (preempted %lld)", why, (long long)st.preempted);
}

/* copy on write: a sequence forked in the middle of a block, both written after */
static void test_cow(void) {
    pt_infer *inf = mk_inf(4, 0);
    int32_t ids[40], a, b, c, n;
    float la[V], lb[V], lc[V];
    pt_kv_stats ks;
    int i, ok = 1;
    for (i = 0; i < 40; i++) ids[i] = (int32_t)((i * 7 + 3) % V);
    a = pt_infer_seq_new(inf);
    n = 20;
    ok &= pt_infer_step(inf, 1, &a, &n, ids, NULL, 0) == PT_OK;
    b = pt_infer_seq_fork(inf, a);
    ok &= b >= 0 && pt_infer_block_ref(inf, pt_infer_seq_table(inf, a, NULL, 0) >= 2 ? 1 : 0) >= 0;
    ok &= pt_infer_check(inf) == PT_OK;
    n = 1;
    ok &= pt_infer_step(inf, 1, &a, &n, ids + 20, la, 0) == PT_OK;
    ok &= pt_infer_step(inf, 1, &b, &n, ids + 21, lb, 0) == PT_OK; /* b differs from a at position 20 */
    ok &= pt_infer_check(inf) == PT_OK;
    ks = pt_infer_kv_stats(inf);
    c = pt_infer_seq_new(inf);
    {
        int32_t buf[21];
        memcpy(buf, ids, 20 * sizeof(int32_t));
        buf[20] = ids[21];
        n = 21;
        ok &= pt_infer_step(inf, 1, &c, &n, buf, lc, 0) == PT_OK;
    }
    CHECKF(ok && ks.cow == 1 && ks.shared == 1 && !memcmp(lb, lc, sizeof lb) && memcmp(la, lb, sizeof la),
           "copy on write: a fork written after the fork copies its last block once; its logits = a fresh sequence's", "ok %d, cow %lld, shared %lld", ok,
           (long long)ks.cow, (long long)ks.shared);
    pt_infer_seq_free(inf, a), pt_infer_seq_free(inf, b), pt_infer_seq_free(inf, c);
    ks = pt_infer_kv_stats(inf);
    CHECKF(pt_infer_check(inf) == PT_OK && ks.free + ks.cached == ks.total && ks.cached >= 1, "copy on write: freed, every block free or cached",
           "free %lld cached %lld total %lld", (long long)ks.free, (long long)ks.cached, (long long)ks.total);
    pt_infer_free(inf);
}

static int first_event(const pt_engine_event *ev, int64_t n, int kind, int64_t req) {
    int64_t i;
    for (i = 0; i < n; i++)
        if (ev[i].kind == kind && ev[i].req == req) return (int)i;
    return -1;
}
/* priorities: 4 low requests fill the engine (max_running 4); a high one arrives at iteration 3 */
static void test_priority(void) {
    pt_infer *inf = mk_inf(4, 0);
    pt_engine_desc d;
    pt_engine *e;
    int64_t id[5], nev;
    const pt_engine_event *ev;
    pt_engine_result rs[5];
    int k;
    memset(&d, 0, sizeof d);
    d.token_budget = 64;
    e = pt_engine_new(inf, &d);
    for (k = 0; k < 5; k++) {
        pt_engine_request r = mk_req(k, k == 4 ? 5 : 0, k == 4 ? 3 : 0, NULL);
        r.max_tokens = 30;
        id[k] = pt_engine_submit(e, &r);
    }
    g_inv_bad = 0;
    drive(e, inf, 10000);
    ev = pt_engine_events(e, &nev);
    for (k = 0; k < 5; k++) pt_engine_poll(e, id[k], &rs[k], NULL, 0);
    CHECKF(first_event(ev, nev, PT_EV_PREEMPT, id[3]) >= 0 && rs[4].first_token <= 4 && rs[4].done <= 3 + 30 && rs[4].done < rs[3].done && !g_inv_bad &&
               rs[3].state == PT_REQ_DONE && rs[3].preemptions == 1,
           "priority: a high request arriving at a full engine preempts the newest low one, runs at once to its end; the low one finishes later",
           "first token at %g, done %g vs %g; preempt event %d; low state %d preemptions %d", rs[4].first_token, rs[4].done, rs[0].done,
           first_event(ev, nev, PT_EV_PREEMPT, id[3]), rs[3].state, rs[3].preemptions);
    pt_engine_free(e);
    pt_infer_free(inf);
    /* no starvation: 2 running slots, a high request arriving every iteration, one low one */
    inf = mk_inf(2, 0);
    memset(&d, 0, sizeof d);
    d.token_budget = 64, d.aging = 8;
    e = pt_engine_new(inf, &d);
    {
        int64_t low;
        pt_engine_request r = mk_req(0, 0, 0, NULL);
        pt_engine_result res;
        r.max_tokens = 4;
        low = pt_engine_submit(e, &r);
        for (k = 0; k < 200; k++) {
            pt_engine_request h = mk_req(1 + k % 4, 3, 1 + k / 2.0, NULL);
            h.max_tokens = 4, h.nprompt = 4;
            pt_engine_submit(e, &h);
        }
        drive(e, inf, 100000);
        pt_engine_poll(e, low, &res, NULL, 0);
        CHECKF(res.state == PT_REQ_DONE && res.done < 80, "no starvation: a low request under a flood of high ones (2 an iteration) finishes, aging every 8 iterations",
               "state %d, done at %g", res.state, res.done);
        d.aging = -1;
    }
    pt_engine_free(e);
    pt_infer_free(inf);
}

static void test_cancel_errors(void) {
    pt_infer *inf = mk_inf(6, 0);
    pt_engine_desc d;
    pt_engine *e;
    int64_t id[8], f0, f1, i, nev;
    pt_engine_result res;
    const pt_engine_event *ev;
    int k, ok = 1;
    memset(&d, 0, sizeof d);
    d.token_budget = 256;
    e = pt_engine_new(inf, &d);
    for (k = 0; k < 2; k++) {
        pt_engine_request r = mk_req(k, 0, 0, NULL);
        r.max_tokens = 40;
        id[k] = pt_engine_submit(e, &r);
    }
    for (k = 0; k < 3; k++) pt_engine_step(e);
    pt_infer_blocks(inf, NULL, &f0);
    pt_engine_poll(e, id[0], &res, NULL, 0);
    pt_engine_cancel(e, id[0]);
    pt_engine_step(e);
    pt_infer_blocks(inf, NULL, &f1);
    ev = pt_engine_events(e, &nev);
    i = first_event(ev, nev, PT_EV_CANCEL, id[0]);
    CHECKF(res.state == PT_REQ_RUNNING && i >= 0 && f1 >= f0 + ev[i].a - 1 && ev[i].a >= 1 && pt_infer_check(inf) == PT_OK &&
               pt_engine_poll(e, id[0], NULL, NULL, 0) == PT_REQ_CANCELLED,
           "cancellation: a running request's blocks are back in the pool at the next iteration", "free %lld -> %lld, cancel event %lld (blocks %lld)",
           (long long)f0, (long long)f1, (long long)i, i >= 0 ? (long long)ev[i].a : -1LL);
    pt_engine_free(e);
    pt_infer_free(inf);
    /* errors: each for its request, the others finish */
    inf = mk_inf(6, 8 * 16);
    e = pt_engine_new(inf, &d);
    {
        int32_t bad[3] = {1, V + 5, 2}, longp[MAXSEQ];
        pt_engine_request r;
        for (k = 0; k < MAXSEQ; k++) longp[k] = k % V;
        r = mk_req(0, 0, 0, NULL), id[0] = pt_engine_submit(e, &r);
        r = mk_req(1, 0, 0, NULL), r.prompt = bad, r.nprompt = 3, id[1] = pt_engine_submit(e, &r);
        r = mk_req(1, 0, 0, NULL), r.prompt = longp, r.nprompt = MAXSEQ, id[2] = pt_engine_submit(e, &r);
        r = mk_req(1, 0, 0, NULL), r.sample.temperature = -1, id[3] = pt_engine_submit(e, &r);
        r = mk_req(1, 0, 0, NULL), r.max_tokens = 0, id[4] = pt_engine_submit(e, &r);
        r = mk_req(1, 9, 0, NULL), id[5] = pt_engine_submit(e, &r);
        r = mk_req(2, 0, 0, NULL), id[6] = pt_engine_submit(e, &r);
        ok &= drive(e, inf, 10000) >= 0;
        for (k = 1; k <= 5; k++) {
            ok &= pt_engine_poll(e, id[k], &res, NULL, 0) == PT_REQ_ERROR && res.error[0];
            if (k == 1) ok &= strstr(res.error, "outside the vocabulary") != NULL;
            if (k == 2) ok &= strstr(res.error, "longer than the context") != NULL;
        }
        ok &= pt_engine_poll(e, id[0], NULL, NULL, 0) == PT_REQ_DONE && pt_engine_poll(e, id[6], NULL, NULL, 0) == PT_REQ_DONE;
        CHECKF(ok, "errors: a bad token, a prompt past the context, bad sampling, max_tokens 0, a bad class: an error each, the others finish", "ok %d", ok);
    }
    pt_engine_free(e);
    pt_infer_free(inf);
    /* a prompt larger than the pool; a request that outgrows the pool alone */
    inf = mk_inf(4, 4 * 16);
    e = pt_engine_new(inf, &d);
    {
        int32_t p[100];
        pt_engine_request r;
        pt_engine_result r1, r2;
        for (k = 0; k < 100; k++) p[k] = k % V;
        r = mk_req(0, 0, 0, NULL), r.prompt = p, r.nprompt = 100, id[0] = pt_engine_submit(e, &r);
        r = mk_req(0, 0, 0, NULL), r.prompt = p, r.nprompt = 50, r.max_tokens = 60, id[1] = pt_engine_submit(e, &r);
        r = mk_req(2, 0, 50, NULL), id[2] = pt_engine_submit(e, &r);
        ok = drive(e, inf, 10000) >= 0;
        pt_engine_poll(e, id[0], &r1, NULL, 0), pt_engine_poll(e, id[1], &r2, NULL, 0);
        CHECKF(ok && r1.state == PT_REQ_ERROR && strstr(r1.error, "more than the whole cache") && r2.state == PT_REQ_ERROR && strstr(r2.error, "exhausted") &&
                   pt_engine_poll(e, id[2], NULL, NULL, 0) == PT_REQ_DONE && pt_infer_check(inf) == PT_OK,
               "errors: a prompt larger than the pool, a request that outgrows the pool: an error each, the engine serves the next", "'%s' / '%s'", r1.error,
               r2.error);
    }
    pt_engine_free(e);
    pt_infer_free(inf);
}

/* release: requests leave the engine once read, the event trace stays under its cap */
static void test_release(void) {
    pt_infer *inf = mk_inf(4, 0);
    pt_engine_desc d;
    pt_engine *e;
    pt_engine_stats st;
    pt_engine_result res;
    int64_t id[5], nev = 0;
    int32_t tk[64];
    int k, ok = 1, early;
    memset(&d, 0, sizeof d);
    d.no_prefix_cache = 1, d.max_events = 40;
    e = pt_engine_new(inf, &d);
    for (k = 0; k < 4; k++) {
        pt_engine_request r = mk_req(k, 0, 0, NULL);
        id[k] = pt_engine_submit(e, &r);
    }
    pt_engine_step(e);
    early = pt_engine_release(e, id[1]) == PT_ERR_ARG && pt_engine_poll(e, id[1], NULL, NULL, 0) == PT_REQ_RUNNING;
    ok &= drive(e, inf, 100000) >= 0;
    ok &= pt_engine_release(e, id[1]) == PT_OK && pt_engine_poll(e, id[1], NULL, NULL, 0) == -1 && pt_engine_wait(e, id[1]) == -1 &&
          pt_engine_cancel(e, id[1]) == PT_ERR_ARG && pt_engine_release(e, id[1]) == PT_ERR_ARG;
    for (k = 0; k < 4; k++) /* the others, on both sides of the released id, still answer with their tokens */
        if (k != 1) {
            ok &= pt_engine_poll(e, id[k], &res, tk, 64) == PT_REQ_DONE && res.ntokens == g_ref_n[k] && !memcmp(tk, g_ref_tok[k], sizeof(int32_t) * (size_t)g_ref_n[k]);
            ok &= pt_engine_release(e, id[k]) == PT_OK;
        }
    {
        pt_engine_request r = mk_req(4, 0, 0, NULL);
        id[4] = pt_engine_submit(e, &r); /* ids keep counting after releases */
    }
    ok &= id[4] == 4 && drive(e, inf, 100000) >= 0 && pt_engine_poll(e, id[4], &res, tk, 64) == PT_REQ_DONE && res.ntokens == g_ref_n[4] &&
          !memcmp(tk, g_ref_tok[4], sizeof(int32_t) * (size_t)g_ref_n[4]);
    st = pt_engine_stats_get(e);
    pt_engine_events(e, &nev);
    CHECKF(early && ok && st.released == 4 && st.held == 1 && nev <= 40 && st.events_dropped > 0 && pt_infer_check(inf) == PT_OK,
           "release: a finished request is freed and unknown after; unfinished refused; ids on both sides answer; events capped at max_events",
           "early %d ok %d released %lld held %lld events %lld dropped %lld", early, ok, (long long)st.released, (long long)st.held, (long long)nev,
           (long long)st.events_dropped);
    pt_engine_free(e);
    pt_infer_free(inf);
}

/* determinism and replay: a run with preemptions (swap), chunks, priorities, prefix hits and a cancel */
static int same_events(const pt_engine_event *a, int64_t na, const pt_engine_event *b, int64_t nb) {
    int64_t i;
    if (na != nb) return 0;
    for (i = 0; i < na; i++)
        if (a[i].iter != b[i].iter || a[i].req != b[i].req || a[i].kind != b[i].kind || a[i].a != b[i].a || a[i].b != b[i].b) return 0;
    return 1;
}
static void test_replay(void) {
    run_opts o;
    char why[300];
    pt_engine_event *e1, *e2, *e3;
    int64_t n1, n2, n3, i;
    int32_t t1[NQ][64], t3[NQ][64];
    int ok1, ok2, ok3, k, npre = 0;
    o = base_opts();
    o.d.no_prefix_cache = 0, o.kv_tokens = 10 * 16, o.d.token_budget = 24, o.d.max_chunk = 7, o.d.preempt = PT_PREEMPT_SWAP;
    for (k = 0; k < NQ; k++) o.prio[k] = (k * 7) % 3, o.arrival[k] = k;
    ok1 = run_all(&o, why, sizeof why, NULL, NULL, &e1, &n1, t1);
    ok2 = run_all(&o, why, sizeof why, NULL, NULL, &e2, &n2, NULL);
    for (i = 0; i < n1; i++) npre += e1[i].kind == PT_EV_PREEMPT;
    CHECKF(ok1 && ok2 && same_events(e1, n1, e2, n2) && npre > 0, "determinism: the same arrival trace twice gives the same events",
           "%s (%lld vs %lld events, %d preemptions)", why, (long long)n1, (long long)n2, npre);
    o.d.replay = e1, o.d.nreplay = n1;
    o.d.token_budget = 512, o.d.max_chunk = 0, o.d.preempt = PT_PREEMPT_RECOMPUTE; /* the trace decides, not these */
    for (k = 0; k < NQ; k++) o.arrival[k] = 0;                                    /* nor these: arrivals come from the trace */
    ok3 = run_all(&o, why, sizeof why, NULL, NULL, &e3, &n3, t3);
    CHECKF(ok3 && same_events(e1, n1, e3, n3) && !memcmp(t1, t3, sizeof t1), "replay: an engine following the trace (other settings) reproduces events and tokens",
           "%s (%lld vs %lld events)", why, (long long)n1, (long long)n3);
    e1[n1 / 2].b += 1; /* a tampered trace: an error, not a silent divergence */
    for (i = n1 / 2; i < n1 && e1[i].kind != PT_EV_RUN; i++) {}
    if (i < n1) e1[i].b += 3;
    ok3 = run_all(&o, why, sizeof why, NULL, NULL, NULL, NULL, NULL);
    CHECKF(!ok3 && strstr(why, "replayed trace"), "replay: a trace that does not fit the run is an error naming the event", "%s", why);
    free(e1), free(e2), free(e3);
}


/* ---- speculative decoding: the tokens and logits of every request bitwise those without it ---------- */
#define SPEC_MAXT 64
typedef struct spec_run {
    int32_t tok[NQ][SPEC_MAXT];
    float *lg[NQ];
    int n[NQ], fin[NQ];
    pt_engine_stats st;
    pt_engine_event *ev;
    int64_t nev;
    int ok;
    char why[300];
} spec_run;
/* the NQ requests (sampled: temperature 0.9, top-k 40, top-p 0.9, repeat penalty 1.1; or greedy), request 2
   with a stop string and request 7 with max_tokens 5, through one engine with desc d */
static void spec_go(spec_run *o, const pt_engine_desc *d, int greedy, const char *stop2, pt_infer *draft_inf) {
    pt_infer *inf = mk_inf(NQ, 0);
    pt_engine_desc dd = *d;
    pt_engine *e;
    int64_t id[NQ];
    const char *stops[1];
    int k;
    memset(o->tok, 0, sizeof o->tok), memset(o->n, 0, sizeof o->n);
    o->ok = 1, o->why[0] = 0, g_inv_bad = 0;
    pt_error_clear(g_ctx);
    stops[0] = stop2;
    dd.draft = draft_inf;
    e = pt_engine_new(inf, &dd);
    if (!e) {
        o->ok = 0, snprintf(o->why, sizeof o->why, "pt_engine_new: %.250s", pt_error(g_ctx));
        pt_infer_free(inf);
        return;
    }
    for (k = 0; k < NQ; k++) {
        pt_engine_request r = mk_req(k, 0, 0, o->lg[k]);
        memset(o->lg[k], 0, sizeof(float) * V * SPEC_MAXT);
        r.max_tokens = k == 7 ? 5 : 24 + 4 * k;
        if (greedy) memset(&r.sample, 0, sizeof r.sample);
        else r.sample.top_p = 0.9f, r.sample.repeat_penalty = 1.1f;
        if (k == 2 && stop2) r.stop = stops, r.nstop = 1;
        id[k] = pt_engine_submit(e, &r);
    }
    if (drive(e, inf, 100000) < 0) o->ok = 0, snprintf(o->why, sizeof o->why, "the engine failed: %.250s", pt_error(g_ctx));
    if (g_inv_bad) o->ok = 0, snprintf(o->why, sizeof o->why, "allocator invariant: %.250s", g_inv_msg);
    for (k = 0; k < NQ; k++) {
        pt_engine_result res;
        if (pt_engine_poll(e, id[k], &res, o->tok[k], SPEC_MAXT) != PT_REQ_DONE && o->ok)
            o->ok = 0, snprintf(o->why, sizeof o->why, "request %d: state %d (%s)", k, res.state, res.error);
        o->n[k] = res.ntokens, o->fin[k] = res.finish;
    }
    o->st = pt_engine_stats_get(e);
    {
        const pt_engine_event *x = pt_engine_events(e, &o->nev);
        o->ev = (pt_engine_event *)malloc(sizeof(pt_engine_event) * (size_t)(o->nev + 1));
        memcpy(o->ev, x, sizeof(pt_engine_event) * (size_t)o->nev);
    }
    pt_engine_free(e);
    pt_infer_free(inf);
}
/* 1 when b's tokens, counts, finishes and logits equal a's */
static int spec_same(const spec_run *a, const spec_run *b, char *why, size_t n) {
    int k;
    if (!a->ok || !b->ok) return snprintf(why, n, "%s", !a->ok ? a->why : b->why), 0;
    for (k = 0; k < NQ; k++) {
        if (a->n[k] != b->n[k] || a->fin[k] != b->fin[k] || memcmp(a->tok[k], b->tok[k], sizeof(int32_t) * (size_t)a->n[k]))
            return snprintf(why, n, "request %d: %d tokens (finish %d) vs %d (finish %d) without drafting, tokens %s", k, b->n[k], b->fin[k], a->n[k], a->fin[k],
                            a->n[k] == b->n[k] ? "differ" : "-"), 0;
        if (memcmp(a->lg[k], b->lg[k], sizeof(float) * V * (size_t)a->n[k])) return snprintf(why, n, "request %d: logits not bitwise equal", k), 0;
    }
    return 1;
}
/* callbacks under drafting: every token once, in order; a stop asked at token g_cb_stop ends the request there */
typedef struct spec_cb {
    int32_t tok[SPEC_MAXT];
    int n, ntext, stop_at;
    char text[SPEC_MAXT + 8];
} spec_cb;
static int spec_on_token(void *u, int64_t id, int32_t tok, float lp) {
    spec_cb *c = (spec_cb *)u;
    (void)id, (void)lp;
    if (c->n < SPEC_MAXT) c->tok[c->n] = tok;
    return ++c->n == c->stop_at;
}
static int spec_on_text(void *u, int64_t id, int32_t tok, float lp, const char *text, size_t len) {
    spec_cb *c = (spec_cb *)u;
    (void)id, (void)tok, (void)lp;
    if (c->ntext + (int)len <= SPEC_MAXT) memcpy(c->text + c->ntext, text, len), c->ntext += (int)len;
    return 0;
}
static pt_ctx *g_ctx1;
static pt_gpt *g_m1;
static pt_gpt_weights *g_w1;
static void test_spec(void) {
    static spec_run base, run;
    pt_engine_desc d;
    pt_infer *same, *small;
    pt_infer_desc idd;
    char why[300], stop[3] = {0, 0, 0};
    int greedy, k, ok;
    for (k = 0; k < NQ; k++) base.lg[k] = (float *)malloc(sizeof(float) * V * SPEC_MAXT), run.lg[k] = (float *)malloc(sizeof(float) * V * SPEC_MAXT);
    { /* the draft models: the model itself (its own pt_infer: every greedy draft accepted), and 1 layer of the same shape */
        pt_desc cd;
        pt_gpt_config c;
        pt_tensor slab;
        tu_rng r = {5};
        int64_t i;
        memset(&cd, 0, sizeof cd);
        cd.seed = 3, cd.threads = 1, cd.log = quiet, cd.on_error = no_err, cd.log_level = PT_LOG_ERROR;
        g_ctx1 = pt_init(&cd);
        memset(&c, 0, sizeof c);
        c.vocab = V, c.max_seq = MAXSEQ, c.layers = 1, c.width = 64, c.heads = 4;
        g_m1 = g_ctx1 ? pt_gpt_new(g_ctx1, &c) : NULL;
        if (g_m1) {
            slab = pt_param_slab(g_ctx1);
            for (i = 0; i < slab.shape[0]; i++) pt_f32(&slab)[i] += tu_uniform(&r, -0.15f, 0.15f);
            g_w1 = pt_gpt_weights_from(g_m1, PT_W_F32);
        }
        memset(&idd, 0, sizeof idd);
        idd.max_seqs = 4; /* fewer than the requests: the others are not drafted */
        same = pt_infer_new(g_ctx, g_w, &idd);
        small = g_w1 ? pt_infer_new(g_ctx1, g_w1, &idd) : NULL;
    }
    for (greedy = 1; greedy >= 0; greedy--) {
        memset(&d, 0, sizeof d);
        d.token_budget = 64, d.max_chunk = 16;
        spec_go(&base, &d, greedy, NULL, NULL);
        free(base.ev);
        for (k = 3; k + 1 < base.n[2] && !stop[0]; k++) /* a stop string from request 2's text */
            if (base.tok[2][k] && base.tok[2][k + 1]) stop[0] = (char)base.tok[2][k], stop[1] = (char)base.tok[2][k + 1];
        spec_go(&base, &d, greedy, stop, NULL);
        d.lookup = 6, d.spec_fixed = 1;
        spec_go(&run, &d, greedy, stop, NULL);
        ok = spec_same(&base, &run, why, sizeof why);
        CHECKF(ok && run.st.drafted > 0 && run.st.accepted > 0 && base.fin[2] == PT_FINISH_STOP_STRING && base.fin[7] == PT_FINISH_LENGTH,
               greedy ? "spec: prompt lookup, greedy: 10 requests' tokens and logits bitwise = without (stop string, max_tokens, chunks)"
                      : "spec: prompt lookup, sampled (top-k, top-p, repeat penalty): tokens and logits bitwise = without",
               "%s (drafted %lld, accepted %lld, finish %d %d)", why, (long long)run.st.drafted, (long long)run.st.accepted, base.fin[2], base.fin[7]);
        if (greedy) { /* the trace of a run with drafts replays */
            pt_engine_event *e1 = run.ev;
            int64_t n1 = run.nev, nd = 0, i;
            pt_engine_desc r = d;
            for (i = 0; i < n1; i++) nd += e1[i].kind == PT_EV_DRAFT;
            r.replay = e1, r.nreplay = n1, r.lookup = 0, r.token_budget = 24; /* the trace decides, not the budget */
            run.ev = NULL;
            spec_go(&run, &r, greedy, stop, NULL);
            ok = spec_same(&base, &run, why, sizeof why) && same_events(e1, n1, run.ev, run.nev);
            CHECKF(ok && nd > 0, "spec: a trace with drafts (PT_EV_DRAFT) replays: the same events and tokens", "%s (%lld draft events; %lld vs %lld events)", why,
                   (long long)nd, (long long)n1, (long long)run.nev);
            free(e1);
        }
        free(run.ev);
        d.lookup = 0, d.draft_tokens = 4;
        spec_go(&run, &d, greedy, stop, same);
        ok = spec_same(&base, &run, why, sizeof why) && (!same || pt_infer_check(same) == PT_OK);
        CHECKF(ok && run.st.accepted > 0 && (!greedy || run.st.accepted * 10 >= run.st.drafted * 9),
               greedy ? "spec: a draft model (the model itself, greedy drafts all accepted), greedy: bitwise = without"
                      : "spec: a draft model (the model itself), sampled: bitwise = without",
               "%s (drafted %lld, accepted %lld)", why, (long long)run.st.drafted, (long long)run.st.accepted);
        free(run.ev);
        d.draft_tokens = 3;
        spec_go(&run, &d, greedy, stop, small);
        ok = spec_same(&base, &run, why, sizeof why) && (!small || pt_infer_check(small) == PT_OK);
        CHECKF(ok && small && run.st.drafted > 0, greedy ? "spec: a 1-layer draft model, greedy: bitwise = without" : "spec: a 1-layer draft model, sampled: bitwise = without",
               "%s (drafted %lld, accepted %lld)", why, (long long)run.st.drafted, (long long)run.st.accepted);
        free(run.ev), free(base.ev);
        stop[0] = 0;
    }
    { /* callbacks: with every greedy draft accepted (the model as its draft), each token once and in order; a callback
         stop at token 5 ends the request at token 5 although its run accepted more */
        pt_infer *inf = mk_inf(2, 0);
        pt_engine *e;
        static spec_cb cb[2];
        int32_t tk[2][SPEC_MAXT];
        pt_engine_result res[2];
        int64_t id[2];
        memset(&d, 0, sizeof d), memset(cb, 0, sizeof cb);
        d.draft = same, d.draft_tokens = 6, d.spec_fixed = 1;
        e = pt_engine_new(inf, &d);
        for (k = 0; k < 2; k++) {
            pt_engine_request r = mk_req(k, 0, 0, NULL);
            memset(&r.sample, 0, sizeof r.sample);
            r.max_tokens = 30, r.on_token = spec_on_token, r.on_text = spec_on_text, r.user = &cb[k];
            cb[k].stop_at = k ? 5 : -1;
            id[k] = pt_engine_submit(e, &r);
        }
        drive(e, inf, 100000);
        for (k = 0; k < 2; k++) pt_engine_poll(e, id[k], &res[k], tk[k], SPEC_MAXT);
        ok = res[0].ntokens == 30 && cb[0].n == 30 && !memcmp(cb[0].tok, tk[0], sizeof(int32_t) * 30) && cb[0].ntext == 30 && res[0].accepted > 10;
        for (k = 0; k < 30 && ok; k++) ok = cb[0].text[k] == (char)tk[0][k];
        ok = ok && res[1].ntokens == 5 && res[1].finish == PT_FINISH_CALLBACK && cb[1].n == 5 && !memcmp(cb[1].tok, tk[1], sizeof(int32_t) * 5) &&
             cb[1].ntext <= 5 && res[1].accepted >= 4;
        for (k = 0; k < cb[1].ntext && ok; k++) ok = cb[1].text[k] == (char)tk[1][k];
        CHECKF(ok, "spec: callbacks once per token in order under drafting; a callback stop inside an accepted run ends the request at its token",
               "tokens %d (callbacks %d, text %d, accepted %lld); stopped one: %d tokens, finish %d, callbacks %d, accepted %lld", res[0].ntokens,
               cb[0].n, cb[0].ntext, (long long)res[0].accepted, res[1].ntokens, res[1].finish, cb[1].n, (long long)res[1].accepted);
        pt_engine_free(e);
        pt_infer_free(inf);
    }
    { /* the off-switch: sampled at temperature 2 (nothing to look up that gets accepted), lookup 8, the engine's cost model */
        pt_infer *inf = mk_inf(2, 0);
        pt_engine *e;
        pt_engine_stats st;
        memset(&d, 0, sizeof d);
        d.lookup = 8;
        e = pt_engine_new(inf, &d);
        for (k = 0; k < 6; k++) {
            pt_engine_request r = mk_req(k, 0, 0, NULL);
            r.nprompt = g_np[k] < 20 ? g_np[k] : 20, r.max_tokens = 100, r.sample.temperature = 2.0f, r.sample.top_k = 0;
            pt_engine_submit(e, &r);
        }
        drive(e, inf, 100000);
        st = pt_engine_stats_get(e);
        CHECKF(st.spec_off > 0 && st.finished == 6, "spec: the off-switch turns drafting off for requests whose drafts do not pay",
               "turned off %lld times; drafted %lld, accepted %lld over %lld iterations", (long long)st.spec_off, (long long)st.drafted,
               (long long)st.accepted, (long long)st.iterations);
        pt_engine_free(e);
        pt_infer_free(inf);
    }
    { /* pt_generate with lookup and a draft model past the context (the context policy refills): = without */
        pt_infer *inf = mk_inf(2, 0);
        pt_gen_request q[2];
        pt_gen_result r0[2], r1[2];
        pt_gen_opts go;
        pt_gen_stats gs;
        int32_t t0[2][120], t1[2][120];
        pt_status s0, s1;
        memset(q, 0, sizeof q), memset(r0, 0, sizeof r0), memset(r1, 0, sizeof r1), memset(&go, 0, sizeof go);
        for (k = 0; k < 2; k++) {
            q[k].prompt = g_prompt[k + 5], q[k].nprompt = 60, q[k].max_tokens = 110;
            q[k].sample.temperature = k ? 0.8f : 0.0f, q[k].sample.seed = 77 + (uint64_t)k;
            r0[k].tokens = t0[k], r1[k].tokens = t1[k];
        }
        s0 = pt_generate(inf, 2, q, r0, NULL, NULL);
        go.lookup = 4, go.draft = same, go.spec_fixed = 1;
        s1 = pt_generate(inf, 2, q, r1, &go, &gs);
        ok = s0 == PT_OK && s1 == PT_OK;
        for (k = 0; k < 2 && ok; k++) ok = r0[k].ntokens == 110 && r1[k].ntokens == 110 && !memcmp(t0[k], t1[k], sizeof(int32_t) * 110);
        CHECKF(ok && gs.drafted > 0 && gs.refills > 0, "spec: pt_generate with a draft model past max_seq (context refills): tokens = without",
               "status %d %d, drafted %lld, refills %lld: %s", s0, s1, (long long)gs.drafted, (long long)gs.refills, pt_error(g_ctx));
        pt_infer_free(inf);
    }
    pt_infer_free(same), pt_infer_free(small);
    pt_gpt_weights_free(g_w1), pt_gpt_free(g_m1), pt_shutdown(g_ctx1);
    for (k = 0; k < NQ; k++) free(base.lg[k]), free(run.lg[k]);
}

/* ---- push: the end callback, stop strings, the per-iteration hook -------------------------------- */
typedef struct ends {
    int calls[NQ + 2];
    pt_finish finish[NQ + 2];
    int state[NQ + 2];
    char text[NQ + 2][256];
    int ntext[NQ + 2];
    pt_engine *e;
    int release;
} ends;
static void on_end_cb(void *u, int64_t id, const pt_engine_result *res, const char *text, size_t len) {
    ends *x = (ends *)u;
    if (id < 0 || id >= NQ + 2) return;
    x->calls[id]++, x->finish[id] = res->finish, x->state[id] = res->state;
    if (len && x->ntext[id] + (int)len < 256) memcpy(x->text[id] + x->ntext[id], text, len), x->ntext[id] += (int)len;
    if (x->release) pt_engine_release(x->e, id);
}
static int on_text_cb(void *u, int64_t id, int32_t tok, float lp, const char *text, size_t len) {
    ends *x = (ends *)u;
    (void)tok, (void)lp;
    if (id >= 0 && id < NQ + 2 && len && x->ntext[id] + (int)len < 256) memcpy(x->text[id] + x->ntext[id], text, len), x->ntext[id] += (int)len;
    return 0;
}
static int g_hook_calls, g_hook_stop_at;
static int hook(void *u, pt_engine *e) {
    (void)u, (void)e;
    return ++g_hook_calls >= g_hook_stop_at;
}
static void test_push(void) {
    pt_infer *inf = mk_inf(4, 0);
    pt_engine_desc d;
    pt_engine *e;
    static ends x;
    char stop[3] = {0, 0, 0};
    const char *stops[1];
    int64_t id[6], nev, i;
    const pt_engine_event *ev;
    int k, ok = 1, at = -1, want = -1, fin_b = -1;
    pt_engine_stats st;
    memset(&x, 0, sizeof x);
    memset(&d, 0, sizeof d);
    d.token_budget = 64;
    e = pt_engine_new(inf, &d);
    x.e = e, x.release = 1;
    /* the stop string: two bytes of request 2's reference tokens (nonzero), ending at token 4 or later;
       the request must end with the token that completes its first occurrence */
    for (k = 3; k + 1 < g_ref_n[2] && at < 0; k++)
        if (g_ref_tok[2][k] && g_ref_tok[2][k + 1]) at = k;
    if (at >= 0) {
        stop[0] = (char)g_ref_tok[2][at], stop[1] = (char)g_ref_tok[2][at + 1];
        for (k = 1; k < g_ref_n[2] && want < 0; k++)
            if ((char)g_ref_tok[2][k - 1] == stop[0] && (char)g_ref_tok[2][k] == stop[1]) want = k + 1; /* tokens generated */
    }
    stops[0] = stop;
    for (k = 0; k < 6; k++) {
        pt_engine_request r = mk_req(k, 0, 0, NULL);
        int32_t stok = g_ref_tok[3][4];
        r.on_end = on_end_cb, r.on_text = on_text_cb, r.user = &x;
        if (k == 2) r.stop = stops, r.nstop = 1;
        if (k == 3) r.stop_tokens = &stok, r.nstop_tokens = 1;
        if (k == 4) r.max_tokens = 0; /* refused at submission */
        id[k] = pt_engine_submit(e, &r);
    }
    pt_engine_cancel(e, id[5]);
    while (pt_engine_step(e) > 0) {}
    ev = pt_engine_events(e, &nev);
    for (i = 0; i < nev; i++)
        if (ev[i].kind == PT_EV_FINISH && ev[i].req == id[2]) fin_b = (int)ev[i].b;
    for (k = 0; k < 6; k++) ok &= x.calls[id[k]] == 1;
    st = pt_engine_stats_get(e);
    CHECKF(ok && x.finish[id[0]] == PT_FINISH_LENGTH && x.finish[id[1]] == PT_FINISH_LENGTH && x.finish[id[3]] == PT_FINISH_STOP_TOKEN &&
               x.finish[id[4]] == PT_FINISH_ERROR && x.state[id[4]] == PT_REQ_ERROR && x.finish[id[5]] == PT_FINISH_CANCELLED && st.held == 0,
           "push: the end callback fires once per request (done, stop token, refused, cancelled) with its pt_finish, and may release it",
           "calls %d %d %d %d %d %d, finish %d %d %d %d %d, held %lld", x.calls[0], x.calls[1], x.calls[2], x.calls[3], x.calls[4], x.calls[5], x.finish[0],
           x.finish[1], x.finish[3], x.finish[4], x.finish[5], (long long)st.held);
    if (at < 0 || want < 0) printf("  (no stop string in request 2's text: skipped)\n");
    else
        CHECKF(x.finish[id[2]] == PT_FINISH_STOP_STRING && fin_b == want && x.ntext[id[2]] == want - 2,
               "push: a stop string ends the request in the iteration of the token that completes it; its text stops before it",
               "finish %d after %d tokens (expected %d), text %d bytes", x.finish[id[2]], fin_b, want, x.ntext[id[2]]);
    pt_engine_free(e);
    /* the hook: once an iteration, and its nonzero answer ends the run */
    e = pt_engine_new(inf, &d);
    {
        pt_engine_desc d2 = d;
        pt_engine_free(e);
        d2.on_iteration = hook;
        e = pt_engine_new(inf, &d2);
    }
    {
        pt_engine_request r = mk_req(0, 0, 0, NULL);
        pt_engine_stats s1;
        g_hook_calls = 0, g_hook_stop_at = 3;
        id[0] = pt_engine_submit(e, &r);
        pt_engine_run(e);
        s1 = pt_engine_stats_get(e);
        CHECKF(g_hook_calls == 3 && s1.iterations == 3 && pt_engine_poll(e, id[0], NULL, NULL, 0) == PT_REQ_RUNNING,
               "push: the hook runs once an iteration and its nonzero answer ends pt_engine_run", "hook %d, iterations %lld", g_hook_calls,
               (long long)s1.iterations);
        g_hook_stop_at = 1 << 30;
        pt_engine_cancel(e, id[0]);
        pt_engine_step(e);
    }
    pt_engine_free(e);
    pt_infer_free(inf);
}

#ifdef TE_THREADS
static void *engine_thread(void *p) {
    pt_engine_run((pt_engine *)p);
    return NULL;
}
static int g_cb_calls;
static pthread_mutex_t g_cb_mu = PTHREAD_MUTEX_INITIALIZER;
static int on_tok(void *u, int64_t id, int32_t tok, float lp) {
    (void)u, (void)id, (void)tok, (void)lp;
    pthread_mutex_lock(&g_cb_mu);
    g_cb_calls++;
    pthread_mutex_unlock(&g_cb_mu);
    return 0;
}
static void test_threads(void) {
    pt_infer *inf = mk_inf(4, 0);
    pt_engine_desc d;
    pt_engine *e;
    pthread_t th;
    int64_t id[NQ];
    int k, ok = 1, calls;
    memset(&d, 0, sizeof d);
    d.token_budget = 64, d.wall_clock = 1, d.lookup = 4; /* drafting too: the same tokens */
    e = pt_engine_new(inf, &d);
    pthread_create(&th, NULL, engine_thread, e);
    for (k = 0; k < NQ; k++) {
        pt_engine_request r = mk_req(k, k % 2, 0, NULL);
        pt_engine_result res;
        r.on_token = on_tok;
        id[k] = pt_engine_submit(e, &r);
        if (k == 3) pt_engine_cancel(e, id[1]);
        if (k == 5) /* polled while the engine runs: until request 0 has tokens */
            while (pt_engine_poll(e, id[0], &res, NULL, 0) != PT_REQ_DONE && res.ntokens < 2) {}
    }
    for (k = 0; k < NQ; k++) {
        int32_t tk[64];
        pt_engine_result res;
        int st = pt_engine_wait(e, id[k]);
        pt_engine_poll(e, id[k], &res, tk, 64);
        if (k == 1) ok &= st == PT_REQ_CANCELLED || st == PT_REQ_DONE;
        else ok &= st == PT_REQ_DONE && res.ntokens == g_ref_n[k] && !memcmp(tk, g_ref_tok[k], sizeof(int32_t) * (size_t)g_ref_n[k]);
    }
    pt_engine_stop(e);
    pthread_join(th, NULL);
    pthread_mutex_lock(&g_cb_mu);
    calls = g_cb_calls;
    pthread_mutex_unlock(&g_cb_mu);
    CHECKF(ok && calls > 0 && pt_infer_check(inf) == PT_OK, "threads: an engine thread runs while another submits, cancels and waits; tokens = alone",
           "ok %d, callbacks %d", ok, calls);
    pt_engine_free(e);
    pt_infer_free(inf);
}
#endif

int main(int argc, char **argv) {
    int k;
    tu_init(argc, argv);
    if (!model_new(1)) {
        printf("FAIL model: %s\n", g_ctx ? pt_error(g_ctx) : "no context");
        return 1;
    }
    make_requests();
    reference();
    test_cow();
    test_invariance();
    test_priority();
    test_cancel_errors();
    test_replay();
    test_release();
    test_push();
    test_spec();
#ifdef TE_THREADS
    test_threads();
#endif
    for (k = 0; k < NQ; k++) free(g_ref_lg[k]);
    pt_gpt_weights_free(g_w);
    pt_gpt_free(g_m);
    pt_shutdown(g_ctx);
    return tu_summary();
}
