/* bench_engine.c - the serving engine (see engine) and the paged KV cache with block sharing, JSON lines.

   bench_engine kv [requests]
     Paged vs contiguous: requests (default 96) with prompt and output lengths uniform in 16..512 run
     through the engine on a tiny GPT (1 layer, width 32, max_seq 1024: the bookkeeping is measured,
     not the arithmetic) in a KV budget of 16 x 1024 tokens; a contiguous cache that reserves the
     context (1024 tokens) per request runs 16 at once. paged_over_contiguous = the mean requests
     running while others wait / 16. Shared prefix: 16 requests of a 512-token shared prefix plus 32
     tokens of their own: blocks held with and without sharing (saved_fraction). Multi-turn chat: 8
     conversations x 4 turns interleaved, each turn's prompt = the conversation so far + a 32-token
     message: the prefix cache's hit rate (hit tokens / prompt tokens looked up), beside the rate if
     every earlier turn were found whole (ideal). Then kvq8 (below), requests and context as given.
   bench_engine kvq8 [requests [context]]
     The q8_0 KV cache against f32 and f16 in one byte budget (pt_infer_desc.kv_bytes: the bytes of
     4 x 1024 f32 tokens of a 1-layer, width 64, 2 heads of 32 GPT): the same requests (default 96,
     prompts and outputs uniform in 16..512) through the engine with each cache type; requests running
     at once while others wait (mean, max), q8_0's over f32's and over f16's. Then decode speed at a
     long context: 4 sequences of context tokens (default 768) in a GPT of 4 layers, width 512, 8 heads
     of 64 (GPT-2's head size), q8_0 weights, 2 threads; 3 rounds of 32 decode steps of the batch per
     cache type, interleaved, the best round: tokens/s, q8_0's over f32's and f16's (attention reads
     the whole cache every token, so what dequantizing costs or saves shows).
   bench_engine engine [max_len [requests [rates]]]
     The GPT-2 124M shape (12 layers, width 768, 12 heads, vocabulary 50,257, max_seq 1024) in Q8_0,
     random weights; requests (default 24) with prompt and output lengths uniform in 16..max_len
     (default 64: on 2 shared cores the full 16..512 would take an hour), Poisson arrivals, wall time.
     Unloaded: the requests one at a time, twice, each request's smaller TTFT: p99 TTFT; SLO = 5 x that. Then each mode at each rate
     (multiples of the unloaded service rate; default 0.25 .. 8, doubling; bench/run.sh: 1,2,3,4,6): p50 / p99 TTFT, p99 TPOT
     (time per output token after the first), tokens/s. Modes: continuous (pt_engine: chunked
     prefill, 256-token budget, 16 running) and static (request-level batching: when a batch ends up
     to 16 waiting requests start and run to the end). The summary line: the highest rate of each
     mode whose p99 TTFT is under the SLO, and their ratio. Priority: continuous at 2x its best rate
     with a fifth of the requests in a higher class: each class's p99 TTFT against the unloaded one
     and the requests of the low class completed.
   Build: cc -O3 -march=native -fopenmp -I. bench/bench_engine.c -o build/bench_engine -lm */
#define PTRAIN_IMPLEMENTATION
#include "ptrain.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t g_rng = 0x9e3779b97f4a7c15ULL;
static uint32_t rnd(void) {
    g_rng = g_rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(g_rng >> 33);
}
static int uni(int lo, int hi) { return lo + (int)(rnd() % (uint32_t)(hi - lo + 1)); }
static double expo(double rate) { return -log(((double)rnd() + 1.0) / 4294967297.0) / rate; }
static int cmp_d(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static double pct(double *v, int n, double p) {
    int i;
    if (n <= 0) return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    i = (int)ceil(p * n) - 1;
    return v[i < 0 ? 0 : i >= n ? n - 1 : i];
}
static void nap(double s) {
    struct timespec ts;
    ts.tv_sec = (time_t)s, ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
    nanosleep(&ts, NULL);
}
static pt_ctx *mk_ctx(int threads) {
    pt_desc d;
    memset(&d, 0, sizeof d);
    d.seed = 1, d.threads = threads;
    return pt_init(&d);
}

/* nreq requests (prompts and lengths of 16..512 from g_rng, prompt: room for 512 ids) through e until all
   end; returns the mean number running over the iterations where some wait; *iters: the iterations */
static double kv_mix(pt_engine *e, int nreq, int32_t *prompt, int *iters) {
    double run_sum = 0, run_n = 0;
    int k, i, it = 0;
    for (k = 0; k < nreq; k++) {
        pt_engine_request r;
        memset(&r, 0, sizeof r);
        r.nprompt = uni(16, 512), r.max_tokens = uni(16, 512);
        for (i = 0; i < r.nprompt; i++) prompt[i] = (int32_t)(rnd() % 256);
        r.prompt = prompt, r.sample.seed = (uint64_t)k;
        pt_engine_submit(e, &r);
    }
    for (;;) {
        int64_t waiting = 0, running = 0, j;
        int more = pt_engine_step(e);
        for (j = 0; j < nreq; j++) {
            const int32_t st = pt_engine_poll(e, j, NULL, NULL, 0);
            waiting += st == PT_REQ_WAITING, running += st == PT_REQ_RUNNING;
        }
        if (waiting > 0) run_sum += (double)running, run_n++;
        it++;
        if (more <= 0) break;
    }
    if (iters) *iters = it;
    return run_sum / (run_n > 0 ? run_n : 1);
}
/* ---- kv ----------------------------------------------------------------------------------------- */
static int bench_kv(int nreq) {
    pt_ctx *ctx = mk_ctx(1);
    pt_gpt_config c;
    pt_gpt *m;
    pt_gpt_weights *w;
    pt_infer_desc idd;
    pt_infer *inf;
    pt_engine_desc ed;
    pt_engine *e;
    int32_t *prompt = (int32_t *)malloc(sizeof(int32_t) * 4096);
    int k, i, it = 0;
    double run_sum = 0, run_mean;
    const int budget = 16 * 1024;
    memset(&c, 0, sizeof c);
    c.vocab = 256, c.max_seq = 1024, c.layers = 1, c.width = 32, c.heads = 2;
    m = pt_gpt_new(ctx, &c);
    w = pt_gpt_weights_from(m, PT_W_F32);
    memset(&idd, 0, sizeof idd);
    idd.max_seqs = 256, idd.kv_tokens = budget;
    inf = pt_infer_new(ctx, w, &idd);
    memset(&ed, 0, sizeof ed);
    ed.token_budget = 2048, ed.no_prefix_cache = 1;
    e = pt_engine_new(inf, &ed);
    if (!e) return fprintf(stderr, "bench_engine kv: %s\n", pt_error(ctx)), 1;
    run_mean = kv_mix(e, nreq, prompt, &it);
    {
        const pt_engine_stats st = pt_engine_stats_get(e);
        const double paged = run_mean, contig = (double)budget / c.max_seq;
        printf("{\"bench\":\"kv\",\"case\":\"concurrency\",\"requests\":%d,\"kv_budget_tokens\":%d,\"block_tokens\":16,\"context\":%d,"
               "\"paged_mean_running\":%.2f,\"paged_max_running\":%lld,\"contiguous_running\":%.0f,\"paged_over_contiguous\":%.3f,\"preemptions\":%lld,\"iterations\":%d}\n",
               nreq, budget, c.max_seq, paged, (long long)st.max_running_seen, contig, paged / contig, (long long)st.preempted, it);
    }
    pt_engine_free(e);
    /* a shared 512-token prefix: blocks held by 16 requests, sharing on and off */
    for (k = 0; k < 2; k++) {
        pt_kv_stats ks;
        int64_t peak = 0;
        int32_t base[512];
        memset(&ed, 0, sizeof ed);
        ed.token_budget = 4096, ed.no_prefix_cache = k == 0;
        e = pt_engine_new(inf, &ed);
        for (i = 0; i < 512; i++) base[i] = (int32_t)(rnd() % 256);
        for (i = 0; i < 17; i++) {
            pt_engine_request r;
            int j;
            memset(&r, 0, sizeof r);
            memcpy(prompt, base, sizeof base);
            for (j = 512; j < 544; j++) prompt[j] = (int32_t)(rnd() % 256);
            r.prompt = prompt, r.nprompt = i == 0 ? 512 : 544, r.max_tokens = i == 0 ? 1 : 16, r.arrival = i == 0 ? 0 : 2; /* the prefix first, then 16 */
            pt_engine_submit(e, &r);
        }
        while (pt_engine_step(e) > 0) {
            ks = pt_infer_kv_stats(inf);
            peak = ks.used > peak ? ks.used : peak;
        }
        ks = pt_infer_kv_stats(inf);
        if (k == 0) run_sum = (double)peak;
        else
            printf("{\"bench\":\"kv\",\"case\":\"shared_prefix\",\"requests\":16,\"prefix_tokens\":512,\"own_tokens\":32,\"blocks_held_unshared\":%.0f,"
                   "\"blocks_held_shared\":%lld,\"saved_fraction\":%.3f,\"hit_tokens\":%lld}\n",
                   run_sum, (long long)peak, 1.0 - (double)peak / run_sum, (long long)ks.hit_tokens);
        pt_engine_free(e);
    }
    /* multi-turn chat: 8 conversations x 4 turns, interleaved */
    {
        enum { NC = 8, NT = 4 };
        int32_t conv[NC][1024];
        int len[NC], t, cc;
        int64_t ideal = 0, looked = 0;
        pt_kv_stats k0 = pt_infer_kv_stats(inf), k1;
        memset(&ed, 0, sizeof ed);
        ed.token_budget = 2048;
        e = pt_engine_new(inf, &ed);
        for (cc = 0; cc < NC; cc++) {
            len[cc] = uni(32, 128);
            for (i = 0; i < len[cc]; i++) conv[cc][i] = (int32_t)(rnd() % 256);
        }
        for (t = 0; t < NT; t++) {
            int64_t id[NC];
            for (cc = 0; cc < NC; cc++) {
                pt_engine_request r;
                memset(&r, 0, sizeof r);
                for (i = 0; i < 32; i++) conv[cc][len[cc] + i] = (int32_t)(rnd() % 256);
                if (t > 0) ideal += (len[cc] / 16) * 16; /* everything before this turn's message */
                len[cc] += 32, looked += len[cc];
                r.prompt = conv[cc], r.nprompt = len[cc], r.max_tokens = 48, r.sample.seed = (uint64_t)(cc * 10 + t);
                id[cc] = pt_engine_submit(e, &r);
            }
            while (pt_engine_step(e) > 0) {}
            for (cc = 0; cc < NC; cc++) {
                pt_engine_result res;
                pt_engine_poll(e, id[cc], &res, conv[cc] + len[cc], 48);
                len[cc] += res.ntokens;
            }
        }
        k1 = pt_infer_kv_stats(inf);
        printf("{\"bench\":\"kv\",\"case\":\"multi_turn\",\"conversations\":%d,\"turns\":%d,\"prompt_tokens\":%lld,\"hit_tokens\":%lld,\"hit_rate\":%.3f,"
               "\"ideal_hit_rate\":%.3f,\"evicted_blocks\":%lld}\n",
               NC, NT, (long long)looked, (long long)(k1.hit_tokens - k0.hit_tokens), (double)(k1.hit_tokens - k0.hit_tokens) / (double)looked,
               (double)ideal / (double)looked, (long long)(k1.evicted - k0.evicted));
        pt_engine_free(e);
    }
    pt_infer_free(inf);
    pt_gpt_weights_free(w);
    pt_gpt_free(m);
    pt_shutdown(ctx);
    free(prompt);
    return 0;
}

/* ---- kvq8: the q8_0 cache in the same bytes --------------------------------------------------------- */
/* the requests of bench_kv (seeded by g_rng as it is now) through an engine over a cache of type kt in
   budget bytes: mean and max requests running while others wait */
static int kvq8_run(pt_ctx *ctx, const pt_gpt_weights *w, int32_t kt, int64_t budget, int nreq, double *mean, int64_t *maxr, int64_t *blocks) {
    pt_infer_desc idd;
    pt_infer *inf;
    pt_engine_desc ed;
    pt_engine *e;
    int32_t *prompt = (int32_t *)malloc(sizeof(int32_t) * 512);
    memset(&idd, 0, sizeof idd);
    idd.max_seqs = 256, idd.kv_bytes = budget, idd.kv_type = kt;
    if (!(inf = pt_infer_new(ctx, w, &idd))) return free(prompt), 0;
    pt_infer_blocks(inf, blocks, NULL);
    memset(&ed, 0, sizeof ed);
    ed.token_budget = 2048, ed.no_prefix_cache = 1;
    if (!(e = pt_engine_new(inf, &ed))) return pt_infer_free(inf), free(prompt), 0;
    *mean = kv_mix(e, nreq, prompt, NULL), *maxr = pt_engine_stats_get(e).max_running_seen;
    pt_engine_free(e);
    pt_infer_free(inf);
    free(prompt);
    return 1;
}
static int bench_kvq8(int nreq, int context) {
    static const int32_t types[3] = {PT_W_F32, PT_W_F16, PT_W_Q8_0};
    static const char *const tn[3] = {"f32", "f16", "q8_0"};
    pt_ctx *ctx = mk_ctx(1);
    pt_gpt_config c;
    pt_gpt *m;
    pt_gpt_weights *w;
    double mean[3], tps[3] = {0, 0, 0};
    int64_t maxr[3], blocks[3];
    const int64_t budget = (int64_t)4 * 1024 * 2 * 64 * 4; /* 4 x 1024 f32 tokens of 1 layer of width 64 */
    const uint64_t seed = g_rng;
    int k;
    memset(&c, 0, sizeof c);
    c.vocab = 256, c.max_seq = 1024, c.layers = 1, c.width = 64, c.heads = 2;
    m = pt_gpt_new(ctx, &c);
    w = m ? pt_gpt_weights_from(m, PT_W_F32) : NULL;
    for (k = 0; k < 3; k++) {
        g_rng = seed; /* the same requests for every type */
        if (!w || !kvq8_run(ctx, w, types[k], budget, nreq, &mean[k], &maxr[k], &blocks[k]))
            return fprintf(stderr, "bench_engine kvq8: %s cache: %s\n", tn[k], pt_error(ctx)), 1;
    }
    printf("{\"bench\":\"kv\",\"case\":\"kv_q8_0\",\"requests\":%d,\"kv_budget_bytes\":%lld,\"block_tokens\":16,\"context\":%d,\"blocks_f32\":%lld,\"blocks_f16\":%lld,"
           "\"blocks_q8_0\":%lld,\"mean_running_f32\":%.2f,\"mean_running_f16\":%.2f,\"mean_running_q8_0\":%.2f,\"max_running_f32\":%lld,\"max_running_f16\":%lld,"
           "\"max_running_q8_0\":%lld,\"q8_over_f32_requests\":%.3f,\"q8_over_f16_requests\":%.3f}\n",
           nreq, (long long)budget, c.max_seq, (long long)blocks[0], (long long)blocks[1], (long long)blocks[2], mean[0], mean[1], mean[2], (long long)maxr[0],
           (long long)maxr[1], (long long)maxr[2], mean[2] / mean[0], mean[2] / mean[1]);
    fflush(stdout);
    pt_gpt_weights_free(w);
    pt_gpt_free(m);
    pt_shutdown(ctx);
    /* decode at a long context: 4 sequences, GPT-2's head size */
    {
        enum { B = 4, D = 32, R = 3 };
        pt_infer *inf[3] = {NULL, NULL, NULL};
        int32_t seq[3][B], ntok[B], *toks;
        int r, s, d, ok = 1;
        if (context < 1) context = 1;
        if (context > 1024 - R * D) context = 1024 - R * D;
        toks = (int32_t *)malloc(sizeof(int32_t) * (size_t)B * (size_t)context);
        ctx = mk_ctx(2);
        memset(&c, 0, sizeof c);
        c.vocab = 256, c.max_seq = 1024, c.layers = 4, c.width = 512, c.heads = 8;
        m = pt_gpt_new(ctx, &c);
        w = m ? pt_gpt_weights_from(m, PT_W_Q8_0) : NULL;
        for (k = 0; ok && k < 3; k++) {
            pt_infer_desc idd;
            memset(&idd, 0, sizeof idd);
            idd.max_seqs = B, idd.kv_tokens = (int64_t)B * 1024, idd.kv_type = types[k];
            ok = w && (inf[k] = pt_infer_new(ctx, w, &idd)) != NULL;
            for (s = 0; ok && s < B; s++) {
                ok = (seq[k][s] = pt_infer_seq_new(inf[k])) >= 0;
                ntok[s] = context;
                for (d = 0; d < context; d++) toks[s * context + d] = (int32_t)((s * 131 + d * 7) % 256);
            }
            ok = ok && pt_infer_step(inf[k], B, seq[k], ntok, toks, NULL, 0) == PT_OK; /* the prefill, not timed */
        }
        for (r = 0; ok && r < R; r++)
            for (k = 0; ok && k < 3; k++) {
                const double t0 = pt_time();
                double dt;
                for (d = 0; ok && d < D; d++) {
                    int32_t one[B], tk[B];
                    for (s = 0; s < B; s++) one[s] = 1, tk[s] = (int32_t)((r * D + d + s) % 256);
                    ok = pt_infer_step(inf[k], B, seq[k], one, tk, NULL, 0) == PT_OK;
                }
                dt = pt_time() - t0;
                if (dt > 0 && (double)(B * D) / dt > tps[k]) tps[k] = (double)(B * D) / dt;
            }
        if (!ok) fprintf(stderr, "bench_engine kvq8 decode: %s\n", pt_error(ctx));
        else
            printf("{\"bench\":\"kv\",\"case\":\"kv_q8_0_decode\",\"model\":\"4 layers, width 512, 8 heads of 64, q8_0 weights\",\"threads\":2,\"batch\":%d,"
                   "\"context\":%d,\"decode_steps\":%d,\"f32_tokens_per_s\":%.1f,\"f16_tokens_per_s\":%.1f,\"q8_0_tokens_per_s\":%.1f,\"q8_over_f32_speed\":%.3f,"
                   "\"q8_over_f16_speed\":%.3f}\n",
                   B, context, D, tps[0], tps[1], tps[2], tps[2] / tps[0], tps[2] / tps[1]);
        for (k = 0; k < 3; k++) pt_infer_free(inf[k]);
        pt_gpt_weights_free(w);
        pt_gpt_free(m);
        pt_shutdown(ctx);
        free(toks);
        return ok ? 0 : 1;
    }
}

/* ---- engine ------------------------------------------------------------------------------------- */
typedef struct trace_req {
    int32_t prompt[600];
    int np, nout, cls;
    double at;
} trace_req;
typedef struct run_res {
    double p50, p99, tpot99, tps, p99_hi, p99_lo, wall;
    int done_lo, n_lo;
} run_res;
static pt_infer *g_inf;
static double g_ttft[4096]; /* the last run's TTFT per request, in submission order */
/* the trace through an engine in wall time; rate <= 0: one at a time (each arrives when the previous is done) */
static run_res run_trace(trace_req *tr, int n, double rate, int request_level) {
    pt_engine_desc ed;
    pt_engine *e;
    run_res rr;
    double *ttft = (double *)malloc(sizeof(double) * (size_t)n * 3), *tpot = ttft + n, *tt2 = tpot + n, t = 0, t0;
    int64_t *id = (int64_t *)malloc(sizeof(int64_t) * (size_t)n), tokens = 0;
    int k, nt = 0, nh = 0, nl = 0;
    memset(&rr, 0, sizeof rr);
    memset(&ed, 0, sizeof ed);
    ed.max_running = 16, ed.token_budget = 256, ed.wall_clock = 1, ed.request_level = request_level;
    e = pt_engine_new(g_inf, &ed);
    for (k = 0; k < n; k++) {
        pt_engine_request r;
        memset(&r, 0, sizeof r);
        t += rate > 0 ? expo(rate) : 0;
        r.prompt = tr[k].prompt, r.nprompt = tr[k].np, r.max_tokens = tr[k].nout, r.priority = tr[k].cls, r.sample.seed = (uint64_t)k;
        r.arrival = rate > 0 ? t : 1e30;
        id[k] = rate > 0 ? pt_engine_submit(e, &r) : -1;
        tr[k].at = t;
    }
    t0 = pt_time();
    if (rate <= 0)
        for (k = 0; k < n; k++) {
            pt_engine_request r;
            memset(&r, 0, sizeof r);
            r.prompt = tr[k].prompt, r.nprompt = tr[k].np, r.max_tokens = tr[k].nout, r.priority = tr[k].cls, r.sample.seed = (uint64_t)k;
            id[k] = pt_engine_submit(e, &r);
            while (pt_engine_step(e) > 0) {}
        }
    else
        for (;;) {
            const int64_t before = pt_engine_stats_get(e).iterations;
            const int more = pt_engine_step(e);
            if (more <= 0) break;
            if (pt_engine_stats_get(e).iterations == before) nap(0.0005); /* nothing to run: the next arrival */
        }
    rr.wall = pt_time() - t0;
    for (k = 0; k < n; k++) {
        pt_engine_result res;
        pt_engine_poll(e, id[k], &res, NULL, 0);
        if (res.state != PT_REQ_DONE) continue;
        ttft[nt] = res.first_token - res.arrival;
        if (k < 4096) g_ttft[k] = ttft[nt];
        tpot[nt] = res.ntokens > 1 ? (res.done - res.first_token) / (res.ntokens - 1) : 0;
        tokens += res.ntokens;
        if (tr[k].cls) tt2[nh++] = ttft[nt];
        else nl++;
        nt++;
    }
    rr.tps = (double)tokens / rr.wall;
    rr.p99_hi = pct(tt2, nh, 0.99);
    {
        int j = 0;
        for (k = 0; k < n; k++) {
            pt_engine_result res;
            pt_engine_poll(e, id[k], &res, NULL, 0);
            if (res.state == PT_REQ_DONE && !tr[k].cls) tt2[j++] = res.first_token - res.arrival;
            rr.n_lo += !tr[k].cls;
        }
        rr.p99_lo = pct(tt2, j, 0.99);
        rr.done_lo = nl;
    }
    rr.p50 = pct(ttft, nt, 0.5), rr.p99 = pct(ttft, nt, 0.99), rr.tpot99 = pct(tpot, nt, 0.99);
    pt_engine_free(e);
    free(ttft), free(id);
    return rr;
}
static int bench_engine(int maxlen, int n, const char *rates) {
    pt_ctx *ctx = mk_ctx(0);
    pt_gpt_config c;
    pt_gpt *m;
    pt_gpt_weights *w;
    pt_infer_desc idd;
    trace_req *tr = (trace_req *)calloc((size_t)n, sizeof *tr);
    run_res un, rr;
    double slo, base, best[2] = {0, 0}, rlist[16], t0 = pt_time();
    char ratio[32];
    int nr = 0, k, i, mode;
    memset(&c, 0, sizeof c);
    c.vocab = 50257, c.max_seq = 1024, c.layers = 12, c.width = 768, c.heads = 12;
    m = pt_gpt_new(ctx, &c);
    w = m ? pt_gpt_weights_from(m, PT_W_Q8_0) : NULL;
    memset(&idd, 0, sizeof idd);
    idd.max_seqs = 16, idd.kv_tokens = 16 * 1024;
    g_inf = w ? pt_infer_new(ctx, w, &idd) : NULL;
    if (!g_inf || maxlen < 16 || maxlen > 512) return fprintf(stderr, "bench_engine engine: %s (max_len 16..512)\n", pt_error(ctx)), 1;
    for (k = 0; k < n; k++) {
        tr[k].np = uni(16, maxlen), tr[k].nout = uni(16, maxlen);
        for (i = 0; i < tr[k].np; i++) tr[k].prompt[i] = (int32_t)(rnd() % 50257);
    }
    fprintf(stderr, "bench_engine: model ready in %.1f s\n", pt_time() - t0);
    run_trace(tr, 2, 0, 0); /* warm-up */
    un = run_trace(tr, n, 0, 0);
    { /* a second pass: each request's TTFT the smaller of the two (a busy machine's stalls are not the engine's) */
        double *a = (double *)malloc(sizeof(double) * (size_t)n);
        memcpy(a, g_ttft, sizeof(double) * (size_t)n);
        rr = run_trace(tr, n, 0, 0);
        for (k = 0; k < n; k++) a[k] = a[k] < g_ttft[k] ? a[k] : g_ttft[k];
        un.p50 = pct(a, n, 0.5), un.p99 = pct(a, n, 0.99), un.wall = un.wall < rr.wall ? un.wall : rr.wall;
        free(a);
    }
    slo = 5 * un.p99;
    base = (double)n / un.wall; /* requests a second, one at a time */
    printf("{\"bench\":\"engine\",\"mode\":\"unloaded\",\"model\":\"gpt2-124m\",\"format\":\"q8_0\",\"requests\":%d,\"max_len\":%d,\"threads\":%d,"
           "\"p50_ttft_s\":%.4f,\"p99_ttft_s\":%.4f,\"p99_tpot_s\":%.4f,\"tokens_per_s\":%.1f,\"service_rate\":%.3f}\n",
           n, maxlen, pt_threads(ctx), un.p50, un.p99, un.tpot99, un.tps, base);
    fflush(stdout);
    if (rates && *rates) {
        const char *p = rates;
        while (*p && nr < 16) {
            rlist[nr++] = atof(p) * base;
            while (*p && *p != ',') p++;
            if (*p) p++;
        }
    } else
        for (nr = 0; nr < 6; nr++) rlist[nr] = base * 0.25 * (double)(1 << nr);
    for (i = 0; i < nr; i++)
        for (mode = 0; mode < 2; mode++) { /* interleaved: both modes see the same load */
            rr = run_trace(tr, n, rlist[i], mode);
            printf("{\"bench\":\"engine\",\"mode\":\"%s\",\"rate\":%.3f,\"rate_x_service\":%.2f,\"p50_ttft_s\":%.4f,\"p99_ttft_s\":%.4f,\"p99_tpot_s\":%.4f,"
                   "\"tokens_per_s\":%.1f,\"under_slo\":%s}\n",
                   mode ? "static" : "continuous", rlist[i], rlist[i] / base, rr.p50, rr.p99, rr.tpot99, rr.tps, rr.p99 <= slo ? "true" : "false");
            fflush(stdout);
            if (rr.p99 <= slo && rlist[i] > best[mode]) best[mode] = rlist[i];
        }
    if (best[1] > 0) snprintf(ratio, sizeof ratio, "%.3f", best[0] / best[1]);
    else snprintf(ratio, sizeof ratio, "null"); /* static met the SLO at no rate swept */
    printf("{\"bench\":\"engine\",\"slo_p99_ttft_s\":%.4f,\"continuous_max_rate\":%.3f,\"static_max_rate\":%.3f,\"continuous_over_static\":%s,"
           "\"note\":\"the highest swept rate under the SLO: a lower bound, within one step of the sweep\"}\n",
           slo, best[0], best[1], ratio);
    fflush(stdout);
    /* priority under overload: continuous at 2x its best rate (or 2x the service rate), a fifth of the requests high */
    for (k = 0; k < n; k++) tr[k].cls = k % 5 == 2 ? 3 : 0;
    rr = run_trace(tr, n, 2 * (best[0] > 0 ? best[0] : base), 0);
    printf("{\"bench\":\"engine\",\"case\":\"priority_overload\",\"rate\":%.3f,\"high_p99_ttft_s\":%.4f,\"high_over_unloaded\":%.3f,\"low_p99_ttft_s\":%.4f,"
           "\"low_completed\":%d,\"low_requests\":%d}\n",
           2 * (best[0] > 0 ? best[0] : base), rr.p99_hi, rr.p99_hi / un.p99, rr.p99_lo, rr.done_lo, rr.n_lo);
    pt_infer_free(g_inf);
    pt_gpt_weights_free(w);
    pt_gpt_free(m);
    pt_shutdown(ctx);
    free(tr);
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "kv")) {
        const int n = argc > 2 ? atoi(argv[2]) : 96;
        return bench_kv(n) || bench_kvq8(n, argc > 3 ? atoi(argv[3]) : 768);
    }
    if (argc > 1 && !strcmp(argv[1], "kvq8")) return bench_kvq8(argc > 2 ? atoi(argv[2]) : 96, argc > 3 ? atoi(argv[3]) : 768);
    if (argc > 1 && !strcmp(argv[1], "engine"))
        return bench_engine(argc > 2 ? atoi(argv[2]) : 64, argc > 3 ? atoi(argv[3]) : 24, argc > 4 ? argv[4] : NULL);
    fprintf(stderr, "usage: bench_engine kv [requests [context]] | kvq8 [requests [context]] | engine [max_len [requests [rates as multiples of the service rate, comma-separated]]]\n");
    return 2;
}
