/* test_infer.c - KV-cached inference (see infer): pt_gpt_weights_from, pt_infer_step over the paged
   cache, pt_generate, pt_gpt_generate.
   Build: cc -std=c99 -O2 -march=native -fopenmp -I. tests/test_infer.c -lm
   - cache = no cache: the logits of every position of a 256-token sequence (prefilled at once, token by
     token, in ragged chunks; block sizes 16, 5 and 1; the AVX-512 and the portable attention kernel)
     against pt_gpt_forward of the whole sequence, within 1e-5 relative (floor 1: |a - b| <= 1e-5 max(1,
     |a|, |b|)); a ragged batch of 8 sequences against each one's pt_gpt_forward;
   - batch invariance: 8 sequences of mixed lengths, each alone vs all together (prefill and decode),
     logits bitwise equal; 1 thread vs 2 threads bitwise equal; the scalar references (pt__qmm's C
     kernel, ctx->cpu_simd = 1) vs the SIMD kernels (AVX-512 / AVX2 / NEON) bitwise equal;
   - greedy tokens of pt_gpt_generate and pt_generate = the uncached argmax loop over pt_gpt_forward;
   - the context policy (re-prefill of the last max_seq / 2 tokens; a prompt longer than max_seq) against
     the same policy computed uncached;
   - seeded sampling: each request alone = all together = through a queue of 2 sequences (tokens and
     log-probabilities bitwise);
   - stop tokens and stop strings (bytes and a BPE tokenizer, matches across token boundaries, held
     prefixes never shown, the streamed text = the result text);
   - errors: bad and dead sequence ids, a duplicate, past max_seq, a token outside the vocabulary, a
     vocabulary mismatch, a full KV pool, all sequences in use; a failed step changes nothing;
   - the q8_0 cache (kv_type PT_W_Q8_0, head size 64): near pt_gpt_forward, prefill = token by token =
     ragged chunks bitwise (block sizes 16 and 7, both attention kernels); batch and thread invariance
     bitwise (f32 and q8_0 weights); a fork's copy on write, a prefix-cache hit and a swap out and in
     give the logits of a fresh prefill, bitwise; perplexity of a model trained here for a few hundred
     steps on a validation text within 0.5% of the f32 cache's; kv_bytes: the blocks a byte budget
     holds in each type; a bad kv_type and a head size not a multiple of 32 are named. */
#define PTRAIN_IMPLEMENTATION
#include "ptrain.h"
#include "tests/test_util.h"

static char g_err[1024];
static void on_error(void *u, pt_status s, const char *msg) {
    (void)u, (void)s;
    snprintf(g_err, sizeof g_err, "%s", msg);
}
static void quiet(void *u, int level, const char *msg) { (void)u, (void)level, (void)msg; }

static pt_ctx *new_ctx(int threads) {
    pt_desc d;
    memset(&d, 0, sizeof d);
    d.seed = 7, d.threads = threads, d.on_error = on_error, d.log = quiet, d.log_level = PT_LOG_ERROR;
    return pt_init(&d);
}

typedef struct model {
    pt_ctx *ctx;
    pt_gpt *m;
    pt_gpt_weights *w;
    pt_gpt_config cfg;
} model;

/* a GPT with its parameters moved off their init by uniform noise (so the logits are far apart) */
static int model_new(model *md, int threads, int vocab, int max_seq, int layers, int width, int heads) {
    tu_rng r = {42};
    pt_tensor slab;
    float *p;
    int64_t i;
    memset(md, 0, sizeof *md);
    md->cfg.vocab = vocab, md->cfg.max_seq = max_seq, md->cfg.layers = layers, md->cfg.width = width, md->cfg.heads = heads;
    if (!(md->ctx = new_ctx(threads))) return 0;
    if (!(md->m = pt_gpt_new(md->ctx, &md->cfg))) return 0;
    slab = pt_param_slab(md->ctx);
    p = pt_f32(&slab);
    for (i = 0; i < slab.shape[0]; i++) p[i] += tu_uniform(&r, -0.15f, 0.15f);
    md->w = pt_gpt_weights_from(md->m, PT_W_F32);
    return md->w != NULL;
}
static void model_free(model *md) {
    pt_gpt_weights_free(md->w);
    pt_gpt_free(md->m);
    pt_shutdown(md->ctx);
}

/* pt_gpt_forward of ids[0, T) (positions 0..T-1): out[T][vocab] */
static int ref_logits(model *md, const int32_t *ids, int T, float *out) {
    pt_graph *g = pt_graph_new(md->ctx);
    pt_tensor *x, *lg;
    int Vp = md->m->cfg.vocab_padded, V = md->cfg.vocab, t, ok = 0;
    float *all = (float *)malloc(sizeof(float) * (size_t)T * (size_t)Vp);
    pt_graph_set_grad(g, 0);
    pt_graph_set_training(g, 0);
    x = pt_tensor_new(g, PT_I32, 2, 1, T, 0, 0);
    pt_tensor_write(x, ids);
    lg = pt_gpt_forward(g, md->m, x);
    if (lg && pt_tensor_read(lg, all) == PT_OK) {
        for (t = 0; t < T; t++) memcpy(out + (size_t)t * V, all + (size_t)t * Vp, sizeof(float) * (size_t)V);
        ok = 1;
    }
    free(all);
    pt_graph_free(g);
    return ok;
}

static int g_kv16; /* the caches mk_inf makes: fp16 (pt_infer_desc.kv_type) */
static int g_kvq8; /* or q8_0 */
static pt_infer *mk_inf(model *md, int max_seqs, int bt, int64_t kv_tokens) {
    pt_infer_desc d;
    memset(&d, 0, sizeof d);
    d.max_seqs = max_seqs, d.block_tokens = bt, d.kv_tokens = kv_tokens, d.kv_type = g_kvq8 ? PT_W_Q8_0 : g_kv16 ? PT_W_F16 : PT_W_F32;
    return pt_infer_new(md->ctx, md->w, &d);
}

static void rand_ids(tu_rng *r, int32_t *ids, int n, int vocab) {
    int i;
    for (i = 0; i < n; i++) ids[i] = (int32_t)(tu_next(r) % (unsigned)vocab);
}

/* ---- cache = no cache ---------------------------------------------------------------------------- */
/* one sequence of T tokens fed in chunks (chunk[k], cycling; 0 = all at once) with all_logits, against ref */
static double run_chunks(model *md, int bt, const int *chunk, int nchunk, const int32_t *ids, int T, float *got) {
    pt_infer *inf = mk_inf(md, 2, bt, 0);
    int32_t s;
    int t = 0, k = 0;
    if (!inf) return 1e9;
    s = pt_infer_seq_new(inf);
    while (t < T) {
        int n = chunk[k++ % nchunk];
        if (n <= 0 || n > T - t) n = T - t;
        if (pt_infer_step(inf, 1, &s, &n, ids + t, got + (size_t)t * md->cfg.vocab, 1) != PT_OK) {
            pt_infer_free(inf);
            return 1e9;
        }
        t += n;
    }
    if (pt_infer_seq_len(inf, s) != T) t = -1;
    pt_infer_free(inf);
    return t == T ? 0 : 1e9;
}

static void test_cache(void) {
    model md;
    const int T = tu_quick ? 96 : 256, V = 61;
    int32_t *ids = (int32_t *)malloc(sizeof(int32_t) * (size_t)T);
    float *ref = (float *)malloc(sizeof(float) * (size_t)T * V), *got = (float *)malloc(sizeof(float) * (size_t)T * V);
    static const int all[] = {0}, one[] = {1}, ragged[] = {1, 7, 33, 2, 100, 5};
    static const int bts[] = {16, 5, 1};
    tu_rng r = {3};
    int b, kern;
    if (!CHECK_WHY(model_new(&md, 2, V, 256, 2, 64, 4), "cache: a GPT (vocab 61, 2 x 64, 4 heads, max_seq 256) and its f32 weights", g_err)) return;
    rand_ids(&r, ids, T, V);
    if (!CHECK_WHY(ref_logits(&md, ids, T, ref), "cache: pt_gpt_forward of the sequence", g_err)) goto out;
    for (kern = 0; kern < 2; kern++) {
        md.ctx->attn_kernel = kern ? 1 : 0; /* 1: the portable attention kernel */
        for (b = 0; b < 3; b++) {
            const char *kn = kern ? "portable C" : "best";
            double e0 = run_chunks(&md, bts[b], all, 1, ids, T, got), d0 = tu_max_rel(got, ref, (long)T * V, 1.0, NULL), d1, d2;
            e0 += run_chunks(&md, bts[b], one, 1, ids, T, got), d1 = tu_max_rel(got, ref, (long)T * V, 1.0, NULL);
            e0 += run_chunks(&md, bts[b], ragged, 6, ids, T, got), d2 = tu_max_rel(got, ref, (long)T * V, 1.0, NULL);
            CHECKF(e0 == 0 && d0 <= 1e-5 && d1 <= 1e-5 && d2 <= 1e-5,
                   tu_name("cache = no cache: %d positions, block %d, %s attention: prefill, token by token, ragged chunks within 1e-5", T, bts[b], kn),
                   "steps %s; max relative differences %.3g %.3g %.3g (%s)", e0 == 0 ? "ran" : "failed", d0, d1, d2, g_err);
            printf("       max relative differences %.3g (prefill) %.3g (token by token) %.3g (ragged chunks)\n", d0, d1, d2);
        }
    }
    md.ctx->attn_kernel = 0;
    for (kern = 0; kern < 2; kern++) { /* an fp16 cache */
        double e0, d0, d1, d2;
        md.ctx->attn_kernel = kern ? 1 : 0;
        g_kv16 = 1;
        e0 = run_chunks(&md, 16, all, 1, ids, T, got), d0 = tu_max_rel(got, ref, (long)T * V, 1.0, NULL);
        e0 += run_chunks(&md, 16, one, 1, ids, T, got), d1 = tu_max_rel(got, ref, (long)T * V, 1.0, NULL);
        e0 += run_chunks(&md, 7, ragged, 6, ids, T, got), d2 = tu_max_rel(got, ref, (long)T * V, 1.0, NULL);
        g_kv16 = 0;
        CHECKF(e0 == 0 && d0 <= 2e-3 && d1 <= 2e-3 && d2 <= 2e-3,
               tu_name("fp16 cache (kv_type): %d positions, %s attention: within 2e-3 of pt_gpt_forward", T, kern ? "portable C" : "best"),
               "steps %s; max relative differences %.3g %.3g %.3g (%s)", e0 == 0 ? "ran" : "failed", d0, d1, d2, g_err);
        printf("       fp16 cache: max relative differences %.3g (prefill) %.3g (token by token) %.3g (ragged chunks)\n", d0, d1, d2);
    }
    md.ctx->attn_kernel = 0;
out:
    free(ids), free(ref), free(got);
    model_free(&md);
}

/* ---- ragged batches: against pt_gpt_forward and bitwise against each sequence alone ------------------ */
#define NS 8
static const int plen[NS] = {1, 5, 17, 33, 64, 100, 3, 16};
#define NDEC 12

/* prefill all NS prompts (together or one at a time), then NDEC decode steps of fixed tokens;
   lg[s] gets the logits of every token of sequence s (all_logits) */
static int run_batch(model *md, int together, int bt, int32_t *const *ids, float **lg) {
    pt_infer *inf = mk_inf(md, NS, bt, 0);
    int32_t seq[NS], ntok[NS], toks[NS * 128];
    float *buf = (float *)malloc(sizeof(float) * (size_t)(NS * 128) * md->cfg.vocab);
    int s, step, ok = inf != NULL, V = md->cfg.vocab;
    for (s = 0; ok && s < NS; s++) ok = (seq[s] = pt_infer_seq_new(inf)) >= 0;
    if (together) {
        int n = 0, row = 0;
        for (s = 0; s < NS; s++) {
            ntok[s] = plen[s];
            memcpy(toks + n, ids[s], sizeof(int32_t) * (size_t)plen[s]);
            n += plen[s];
        }
        ok = ok && pt_infer_step(inf, NS, seq, ntok, toks, buf, 1) == PT_OK;
        for (s = 0; ok && s < NS; s++) {
            memcpy(lg[s], buf + (size_t)row * V, sizeof(float) * (size_t)plen[s] * V);
            row += plen[s];
        }
        for (step = 0; ok && step < NDEC; step++) {
            for (s = 0; s < NS; s++) ntok[s] = 1, toks[s] = ids[s][plen[s] + step];
            ok = pt_infer_step(inf, NS, seq, ntok, toks, buf, 0) == PT_OK;
            for (s = 0; ok && s < NS; s++) memcpy(lg[s] + (size_t)(plen[s] + step) * V, buf + (size_t)s * V, sizeof(float) * (size_t)V);
        }
    } else {
        for (s = 0; ok && s < NS; s++) { /* alone: the prefill, then its decode steps */
            int n = plen[s];
            ok = pt_infer_step(inf, 1, &seq[s], &n, ids[s], lg[s], 1) == PT_OK;
            for (step = 0; ok && step < NDEC; step++) {
                n = 1;
                ok = pt_infer_step(inf, 1, &seq[s], &n, &ids[s][plen[s] + step], lg[s] + (size_t)(plen[s] + step) * V, 0) == PT_OK;
            }
        }
    }
    free(buf);
    pt_infer_free(inf);
    return ok;
}

static void test_batch(void) {
    model md, m1;
    const int V = 61;
    static const pt_wtype types[6] = {PT_W_F32, PT_W_Q8_0, PT_W_Q4_0, PT_W_F16, PT_W_BF16, PT_W_F32};
    int32_t *ids[NS];
    float *a[NS], *b[NS], *c[NS], *ref;
    tu_rng r = {11};
    int s, k, ok;
    if (!CHECK_WHY(model_new(&md, 2, V, 128, 2, 64, 4), "batch: a GPT (2 threads)", g_err)) return;
    if (!CHECK_WHY(model_new(&m1, 1, V, 128, 2, 64, 4), "batch: the same GPT on 1 thread", g_err)) return;
    ref = (float *)malloc(sizeof(float) * 128 * V);
    for (s = 0; s < NS; s++) {
        ids[s] = (int32_t *)malloc(sizeof(int32_t) * 128);
        rand_ids(&r, ids[s], plen[s] + NDEC, V);
        a[s] = (float *)malloc(sizeof(float) * 128 * V);
        b[s] = (float *)malloc(sizeof(float) * 128 * V);
        c[s] = (float *)malloc(sizeof(float) * 128 * V);
    }
    for (k = 0; k < (tu_quick ? 2 : 6); k++) {
        const char *tn = k == 5 ? "f32, fp16 cache" : pt_wtype_name(types[k]);
        pt_gpt_weights *w0 = md.w, *w1 = m1.w;
        int same = 1, same_t = 1;
        double worst = 0, e2 = 0, r2 = 0;
        if (k > 0) {
            md.w = pt_gpt_weights_from(md.m, types[k]);
            m1.w = pt_gpt_weights_from(m1.m, types[k]);
        }
        g_kv16 = k == 5;
        ok = md.w && m1.w && run_batch(&md, 1, 16, ids, a) && run_batch(&md, 0, 16, ids, b) && run_batch(&m1, 1, 16, ids, c);
        if (CHECK_WHY(ok, tu_name("batch (%s): 8 sequences (prompts 1..100 tokens, 12 decode steps) together, alone, on 1 thread", tn), g_err)) {
            for (s = 0; s < NS; s++) {
                size_t n = (size_t)(plen[s] + NDEC) * V;
                same = same && !memcmp(a[s], b[s], n * sizeof(float));
                same_t = same_t && !memcmp(a[s], c[s], n * sizeof(float));
                if (ref_logits(&md, ids[s], plen[s] + NDEC, ref)) {
                    double d = tu_max_rel(a[s], ref, (long)n, 1.0, NULL);
                    size_t i;
                    worst = d > worst ? d : worst;
                    for (i = 0; i < n; i++) e2 += ((double)a[s][i] - ref[i]) * ((double)a[s][i] - ref[i]), r2 += (double)ref[i] * ref[i];
                } else worst = 1e9;
            }
            CHECK(same, tu_name("batch invariance (%s): each sequence's logits alone = in the ragged batch, bitwise (prefill and decode)", tn));
            CHECK(same_t, tu_name("thread invariance (%s): the ragged batch on 1 thread = on 2 threads, bitwise", tn));
            { /* the scalar references (pt__qmm's C kernel, the C loops of the cpu kernels) = the SIMD paths */
                const char *kn = pt__qmm_kernel(k == 5 ? PT_W_F32 : types[k]);
                int same_s;
                pt__qmm_force(md.ctx, PT__QMM_KERN_C), md.ctx->cpu_simd = 1;
                same_s = run_batch(&md, 1, 16, ids, c);
                pt__qmm_force(md.ctx, PT__QMM_KERN_AUTO), md.ctx->cpu_simd = 0;
                for (s = 0; s < NS && same_s; s++) same_s = !memcmp(a[s], c[s], (size_t)(plen[s] + NDEC) * V * sizeof(float));
                CHECK(same_s, tu_name("SIMD paths (%s): the ragged batch with pt__qmm's C kernel and the C loops = with the SIMD kernels "
                                      "(%s), bitwise", tn, kn ? kn : "?"));
            }
            if (k == 0)
                CHECKF(worst <= 1e-5, "cache = no cache on a ragged batch: every sequence's logits vs its pt_gpt_forward within 1e-5",
                       "max relative difference %.3g", worst);
            else /* the weights' rounding (q4_0 a few % of a weight, q8_0 < 1%, bf16 2^-9, f16 2^-12) through 2 layers: normwise */
                CHECKF(sqrt(e2 / r2) <= (k == 2 ? 0.3 : k == 1 ? 0.03 : k == 3 || k == 5 ? 2e-3 : 0.02), tu_name("%s logits near the f32 forward's (normwise)", tn),
                       "normwise relative difference %.3g", sqrt(e2 / r2));
            printf("       %s: relative difference to the f32 forward: max %.3g, normwise %.3g\n", tn, worst, sqrt(e2 / r2));
        }
        g_kv16 = 0;
        if (k > 0) {
            pt_gpt_weights_free(md.w), pt_gpt_weights_free(m1.w);
            md.w = w0, m1.w = w1;
        }
    }
    for (s = 0; s < NS; s++) free(ids[s]), free(a[s]), free(b[s]), free(c[s]);
    free(ref);
    model_free(&m1);
    model_free(&md);
}

/* ---- generation ----------------------------------------------------------------------------------- */
/* the uncached greedy loop with the context policy: the cache's window hist[s0, nhist) */
static void ref_greedy(model *md, const int32_t *prompt, int np, int nnew, int32_t *out) {
    const int V = md->cfg.vocab, ms = md->cfg.max_seq, keep = ms / 2 > 1 ? ms / 2 : 1;
    int32_t *hist = (int32_t *)malloc(sizeof(int32_t) * (size_t)(np + nnew));
    float *lg = (float *)malloc(sizeof(float) * (size_t)ms * V);
    int nh = np, s0 = np > ms ? np - ms : 0, k, i;
    memcpy(hist, prompt, sizeof(int32_t) * (size_t)np);
    for (k = 0; k < nnew; k++) {
        int best = 0;
        const float *row;
        if (k > 0 && nh - s0 > ms) s0 = nh - keep;
        if (!ref_logits(md, hist + s0, nh - s0, lg)) break;
        row = lg + (size_t)(nh - s0 - 1) * V;
        for (i = 1; i < V; i++)
            if (row[i] > row[best]) best = i;
        hist[nh++] = best;
        out[k] = best;
    }
    free(hist), free(lg);
}

static void test_greedy(void) {
    model md;
    const int V = 61, nnew = tu_quick ? 20 : 40;
    int32_t prompt[6] = {3, 14, 15, 9, 26, 5}, ref[64], out[6 + 64], toks[64];
    pt_infer *inf;
    pt_gen_request q;
    pt_gen_result res;
    pt_gen_stats st;
    memset(&st, 0, sizeof st);
    if (!CHECK_WHY(model_new(&md, 2, V, 128, 2, 64, 4), "greedy: a GPT", g_err)) return;
    ref_greedy(&md, prompt, 6, nnew, ref);
    CHECKF(pt_gpt_generate(md.m, NULL, prompt, 6, nnew, 0.0f, 1, out) == PT_OK && !memcmp(out, prompt, sizeof prompt) &&
               !memcmp(out + 6, ref, sizeof(int32_t) * (size_t)nnew),
           "greedy: pt_gpt_generate (KV-cached) = the uncached argmax loop over pt_gpt_forward", "%s; token 6.. %d %d %d vs %d %d %d", g_err, out[6], out[7],
           out[8], ref[0], ref[1], ref[2]);
    inf = mk_inf(&md, 4, 16, 0);
    memset(&q, 0, sizeof q);
    memset(&res, 0, sizeof res);
    q.prompt = prompt, q.nprompt = 6, q.max_tokens = nnew;
    res.tokens = toks;
    CHECKF(inf && pt_generate(inf, 1, &q, &res, NULL, &st) == PT_OK && res.ntokens == nnew && res.finish == PT_FINISH_LENGTH &&
               !memcmp(toks, ref, sizeof(int32_t) * (size_t)nnew) && st.prefill_tokens == 6 && st.decode_tokens == nnew - 1 && st.decode_steps == nnew - 1,
           "greedy: pt_generate = the uncached loop; stats count 6 prefill and max_tokens - 1 decode tokens", "%s; %d tokens, finish %d, stats %lld/%lld",
           g_err, res.ntokens, res.finish, (long long)st.prefill_tokens, (long long)st.decode_tokens);
    pt_infer_free(inf);
    model_free(&md);
}

static void test_policy(void) {
    model md;
    const int V = 61, ms = 24, nnew = 60;
    int32_t prompt[40], ref[64], toks[64];
    tu_rng r = {5};
    pt_infer *inf;
    pt_gen_request q;
    pt_gen_result res;
    pt_gen_stats st;
    int k, ok;
    if (!CHECK_WHY(model_new(&md, 2, V, ms, 2, 32, 2), "policy: a GPT with max_seq 24", g_err)) return;
    rand_ids(&r, prompt, 40, V);
    inf = mk_inf(&md, 2, 5, 0);
    for (k = 0; k < 2; k++) {
        const int np = k ? 40 : 5;
        ref_greedy(&md, prompt, np, nnew, ref);
        memset(&q, 0, sizeof q);
        memset(&res, 0, sizeof res);
        q.prompt = prompt, q.nprompt = np, q.max_tokens = nnew;
        res.tokens = toks;
        /* generated before the check: its message compares toks too, and arguments have no order */
        ok = inf && pt_generate(inf, 1, &q, &res, NULL, &st) == PT_OK;
        CHECKF(ok && res.ntokens == nnew && !memcmp(toks, ref, sizeof(int32_t) * nnew) && st.refills >= 4,
               tu_name("context policy: a %d-token prompt, %d tokens past max_seq 24: re-prefills of the last 12 tokens = the same policy uncached", np, nnew),
               "%s; %d tokens, %lld refills; first difference at %d", g_err, res.ntokens, (long long)st.refills,
               (int)(memcmp(toks, ref, sizeof(int32_t) * nnew) ? 0 : -1));
    }
    {
        int32_t out[5 + 60];
        CHECK(pt_gpt_generate(md.m, NULL, prompt, 5, nnew, 0.0f, 1, out) == PT_OK && (ref_greedy(&md, prompt, 5, nnew, ref), 1) &&
                  !memcmp(out + 5, ref, sizeof(int32_t) * nnew),
              "context policy: pt_gpt_generate past max_seq follows it too");
    }
    pt_infer_free(inf);
    model_free(&md);
}

#define NR 5
static void test_sampling(void) {
    model md;
    const int V = 61;
    int32_t prompts[NR][20], tk[3][NR][32];
    float lp[3][NR][32];
    pt_gen_request q[NR];
    pt_gen_result res[3][NR];
    tu_rng r = {9};
    int k, mode, ok = 1, same = 1, inv = 1, div = 0;
    if (!CHECK_WHY(model_new(&md, 2, V, 64, 2, 64, 4), "sampling: a GPT", g_err)) return;
    memset(q, 0, sizeof q);
    memset(res, 0, sizeof res);
    for (k = 0; k < NR; k++) {
        rand_ids(&r, prompts[k], 20, V);
        q[k].prompt = prompts[k], q[k].nprompt = 3 + 4 * k, q[k].max_tokens = 10 + 5 * k;
        q[k].sample.temperature = 1.0f, q[k].sample.seed = 100 + (uint64_t)k;
    }
    q[1].sample.top_k = 5;
    q[2].sample.top_p = 0.9f;
    q[3].sample.min_p = 0.05f, q[3].sample.repeat_penalty = 1.3f;
    q[4].sample.temperature = 0.7f, q[4].sample.top_k = 10, q[4].sample.top_p = 0.95f, q[4].sample.repeat_penalty = 1.1f, q[4].sample.repeat_last_n = 8;
    for (mode = 0; mode < 3; mode++) { /* 0: each alone; 1: all together; 2: a queue through 2 sequences */
        pt_infer *inf = mk_inf(&md, mode == 2 ? 2 : NR, 16, 0);
        for (k = 0; k < NR; k++) res[mode][k].tokens = tk[mode][k], res[mode][k].logprobs = lp[mode][k];
        if (mode == 0)
            for (k = 0; k < NR; k++) ok = ok && pt_generate(inf, 1, &q[k], &res[mode][k], NULL, NULL) == PT_OK;
        else ok = ok && pt_generate(inf, NR, q, res[mode], NULL, NULL) == PT_OK;
        pt_infer_free(inf);
    }
    for (k = 0; k < NR; k++) {
        for (mode = 1; mode < 3; mode++)
            same = same && res[mode][k].ntokens == res[0][k].ntokens && !memcmp(tk[mode][k], tk[0][k], sizeof(int32_t) * (size_t)res[0][k].ntokens) &&
                   !memcmp(lp[mode][k], lp[0][k], sizeof(float) * (size_t)res[0][k].ntokens);
        for (mode = 0; mode < res[0][k].ntokens; mode++) inv = inv && lp[0][k][mode] <= 0 && tk[0][k][mode] >= 0 && tk[0][k][mode] < V;
        div += res[0][k].ntokens == q[k].max_tokens;
    }
    CHECK_WHY(ok, "sampling: 5 seeded requests (temperature, top-k, top-p, min-p, repeat penalty) alone, together, through a queue of 2 sequences", g_err);
    CHECK(same, "sampling: each request's tokens and log-probabilities alone = batched = queued, bitwise");
    CHECK(inv && div == NR, "sampling: every request ran to max_tokens with tokens in the vocabulary and log-probabilities <= 0");
    {
        int32_t o1[40], o2[40], p2[2] = {5, 9};
        int t, ok2 = pt_gpt_generate(md.m, NULL, p2, 2, 30, 1.5f, 99, o1) == PT_OK && pt_gpt_generate(md.m, NULL, p2, 2, 30, 1.5f, 99, o2) == PT_OK;
        ok2 = ok2 && !memcmp(o1, o2, sizeof(int32_t) * 32);
        for (t = 2; ok2 && t < 32; t++) ok2 = o1[t] >= 0 && o1[t] < V;
        CHECK(ok2, "sampling: pt_gpt_generate at temperature 1.5 is a function of the seed");
    }
    model_free(&md);
}

/* ---- stop tokens and strings ------------------------------------------------------------------------ */
typedef struct stream {
    char buf[4096];
    int n, calls, bad;
    const char *never; /* a string the stream must not contain */
} stream;
static int on_tok(void *u, int32_t req, int32_t tok, float lp, const char *text, size_t len) {
    stream *s = (stream *)u;
    (void)req, (void)tok, (void)lp;
    if (s->n + (int)len < (int)sizeof s->buf) memcpy(s->buf + s->n, text, len), s->n += (int)len;
    s->buf[s->n] = 0;
    if (s->never && strstr(s->buf, s->never)) s->bad = 1;
    s->calls++;
    return 0;
}
static int stop_after3(void *u, int32_t req, int32_t tok, float lp, const char *text, size_t len) {
    stream *s = (stream *)u;
    on_tok(u, req, tok, lp, text, len);
    return s->calls >= 3;
}

/* tk NULL: a byte-level model (vocab 256); else one of 256 + merges ids */
static void stop_case(model *md, const pt_tokenizer *tk, const char *what) {
    pt_infer *inf = mk_inf(md, 2, 16, 0);
    int32_t prompt[3] = {'a', 'b', 'c'}, all[64], toks[64];
    char text[1024], full[1024], stopstr[8];
    pt_gen_request q;
    pt_gen_result res;
    pt_gen_opts o;
    stream sm;
    const int nnew = 48;
    int64_t flen, i, at = -1, L = 3;
    int j, kstop;
    memset(&q, 0, sizeof q);
    memset(&res, 0, sizeof res);
    memset(&o, 0, sizeof o);
    o.tokenizer = tk;
    q.prompt = prompt, q.nprompt = 3, q.max_tokens = nnew;
    res.tokens = all, res.text = full, res.text_cap = sizeof full;
    if (!CHECK_WHY(inf && pt_generate(inf, 1, &q, &res, &o, NULL) == PT_OK && res.ntokens == nnew, tu_name("stop (%s): greedy text without stops", what), g_err))
        goto out;
    flen = res.text_len;
    /* a stop string: 3 bytes of the text, none 0, starting at byte 8 or later */
    for (i = 8; i + L <= flen && at < 0; i++) {
        int okb = 1;
        for (j = 0; j < L; j++) okb = okb && full[i + j] != 0;
        if (okb) at = i;
    }
    if (!CHECK_WHY(at >= 0, tu_name("stop (%s): the text has %lld bytes", what, (long long)flen), "too short for a stop string")) goto out;
    memcpy(stopstr, full + at, (size_t)L), stopstr[L] = 0;
    at = strstr(full, stopstr) - full; /* its first occurrence */
    {
        const char *stops[2];
        stops[0] = "\x01\x02\x03\x04\x05 never", stops[1] = stopstr;
        memset(&sm, 0, sizeof sm);
        sm.never = stopstr;
        o.on_token = on_tok, o.user = &sm;
        q.stop = stops, q.nstop = 2;
        memset(&res, 0, sizeof res);
        res.tokens = toks, res.text = text, res.text_cap = sizeof text;
        CHECKF(pt_generate(inf, 1, &q, &res, &o, NULL) == PT_OK && res.finish == PT_FINISH_STOP_STRING && res.text_len == at &&
                   !memcmp(text, full, (size_t)at) && text[at] == 0 && res.ntokens < nnew && !memcmp(toks, all, sizeof(int32_t) * (size_t)res.ntokens),
               tu_name("stop (%s): a stop string ends the request, the text cut before its first occurrence", what),
               "%s; finish %d, text_len %lld (expected %lld), %d tokens", g_err, res.finish, (long long)res.text_len, (long long)at, res.ntokens);
        CHECKF(!sm.bad && sm.n == at && !memcmp(sm.buf, full, (size_t)at) && sm.calls == res.ntokens,
               tu_name("stop (%s): the streamed text = the result, one call a token, the stop string never shown", what),
               "streamed %d bytes in %d calls (expected %lld bytes, %d calls), stop shown %d", sm.n, sm.calls, (long long)at, res.ntokens, sm.bad);
        q.stop = NULL, q.nstop = 0;
    }
    /* a stop token: the 8th generated id; the request ends at its first occurrence */
    kstop = 7;
    for (j = 0; j < kstop; j++)
        if (all[j] == all[kstop]) break;
    {
        int32_t st1 = all[kstop];
        q.stop_tokens = &st1, q.nstop_tokens = 1;
        memset(&res, 0, sizeof res);
        res.tokens = toks;
        CHECKF(pt_generate(inf, 1, &q, &res, NULL, NULL) == PT_OK && res.finish == PT_FINISH_STOP_TOKEN && res.ntokens == j + 1 && toks[j] == st1,
               tu_name("stop (%s): a stop token ends the request (the last id)", what), "%s; finish %d, %d tokens (expected %d)", g_err, res.finish,
               res.ntokens, j + 1);
        q.stop_tokens = NULL, q.nstop_tokens = 0;
    }
    memset(&sm, 0, sizeof sm);
    o.on_token = stop_after3, o.user = &sm;
    memset(&res, 0, sizeof res);
    CHECKF(pt_generate(inf, 1, &q, &res, &o, NULL) == PT_OK && res.finish == PT_FINISH_CALLBACK && res.ntokens == 3,
           tu_name("stop (%s): the callback ends a request", what), "finish %d after %d tokens", res.finish, res.ntokens);
out:
    pt_infer_free(inf);
}

static void test_stop(void) {
    model md;
    static const char corpus[] = "the cat sat on the mat; the rat ate the hat and the cat ate the rat. that is that, then.";
    pt_tokenizer *tk;
    size_t at = 0, hold = 0;
    const char *stops[2] = {"cat", "hat!"};
    CHECK(pt_stop_find("the hat", 7, stops, 2, &at, &hold) == 0 && hold == 3, "pt_stop_find: a proper prefix at the end is held");
    CHECK(pt_stop_find("the ca", 6, stops, 2, &at, &hold) == 0 && hold == 2 && pt_stop_find("a cat", 5, stops, 2, &at, &hold) == 1 && at == 2,
          "pt_stop_find: held prefix, then the match");
    if (!CHECK_WHY(model_new(&md, 2, 256, 128, 2, 64, 4), "stop: a byte-level GPT", g_err)) return;
    stop_case(&md, NULL, "bytes");
    model_free(&md);
    if (!CHECK_WHY(model_new(&md, 2, 300, 128, 2, 64, 4), "stop: a GPT of 300 ids", g_err)) return;
    tk = pt_tokenizer_train(md.ctx, corpus, (int64_t)strlen(corpus), 40);
    if (CHECK_WHY(tk && pt_tokenizer_vocab(tk) <= 300, "stop: a BPE tokenizer (<= 40 merges)", g_err)) stop_case(&md, tk, "BPE");
    pt_tokenizer_free(tk);
    model_free(&md);
}

/* ---- errors ------------------------------------------------------------------------------------------ */
static void test_errors(void) {
    model md;
    pt_infer *inf;
    int32_t s0, s1, bad = 99, n2 = 2, n1 = 1, toks[40] = {1, 2, 3}, seqs[2];
    int ntoks[2] = {1, 1};
    float lg[2 * 61];
    if (!CHECK_WHY(model_new(&md, 2, 61, 32, 1, 32, 2), "errors: a GPT with max_seq 32", g_err)) return;
    inf = mk_inf(&md, 2, 8, 40); /* 5 blocks of 8 tokens */
    s0 = pt_infer_seq_new(inf), s1 = pt_infer_seq_new(inf);
    CHECK(s0 == 0 && s1 == 1, "errors: two sequences");
    g_err[0] = 0;
    CHECK(pt_infer_seq_new(inf) == -1 && strstr(g_err, "in use"), "errors: a third sequence of max_seqs 2 is refused");
    CHECK(pt_infer_step(inf, 1, &bad, &n1, toks, lg, 0) == PT_ERR_ARG && strstr(g_err, "sequence 99"), "errors: a bad sequence id is named");
    pt_error_clear(md.ctx);
    seqs[0] = s0, seqs[1] = s0;
    CHECK(pt_infer_step(inf, 2, seqs, ntoks, toks, lg, 0) == PT_ERR_ARG && strstr(g_err, "twice"), "errors: a sequence twice in a step");
    pt_error_clear(md.ctx);
    toks[1] = 61;
    CHECK(pt_infer_step(inf, 1, &s0, &n2, toks, lg, 0) == PT_ERR_ARG && strstr(g_err, "outside the vocabulary") && pt_infer_seq_len(inf, s0) == 0,
          "errors: a token outside the vocabulary is named; nothing changes");
    pt_error_clear(md.ctx);
    toks[1] = 2;
    {
        int n = 20, m = 13, ok;
        ok = pt_infer_step(inf, 1, &s0, &n, toks, lg, 0) == PT_OK && pt_infer_seq_len(inf, s0) == 20;
        CHECK(ok && pt_infer_step(inf, 1, &s0, &m, toks, lg, 0) == PT_ERR_ARG && strstr(g_err, "max_seq 32") && pt_infer_seq_len(inf, s0) == 20,
              "errors: past max_seq is an error naming the sequence; its length stays");
        pt_error_clear(md.ctx);
        n = 17; /* s0 holds 3 blocks, 17 more tokens need 3 of the 2 left */
        CHECK(pt_infer_step(inf, 1, &s1, &n, toks, lg, 0) == PT_ERR_OOM && strstr(g_err, "KV pool") && pt_infer_seq_len(inf, s1) == 0,
              "errors: a full KV pool is an error; nothing changes");
        pt_error_clear(md.ctx);
        n = 16;
        CHECK(pt_infer_step(inf, 1, &s1, &n, toks, lg, 0) == PT_OK, "errors: the blocks left still serve");
    }
    pt_infer_seq_free(inf, s1);
    CHECK(pt_infer_step(inf, 1, &s1, &n1, toks, lg, 0) == PT_ERR_ARG && strstr(g_err, "not alive"), "errors: a freed sequence is not alive");
    pt_error_clear(md.ctx);
    {
        int64_t tot = 0, fr = 0;
        pt_infer_seq_free(inf, s0);
        pt_infer_blocks(inf, &tot, &fr);
        CHECK(tot == 5 && fr == 5, "errors: freed sequences give every block back");
    }
    pt_infer_free(inf);
    {
        pt_gpt_weights w = *md.w;
        w.head.rows = 10;
        CHECK(pt_infer_new(md.ctx, &w, NULL) == NULL && strstr(g_err, "vocabulary mismatch"), "errors: a head with fewer rows than the vocabulary");
        pt_error_clear(md.ctx);
        w = *md.w;
        w.layer = md.w->layer;
        w.cfg.width = 48;
        CHECK(pt_infer_new(md.ctx, &w, NULL) == NULL && pt_status_get(md.ctx) != PT_OK, "errors: weights that do not fit their config");
        pt_error_clear(md.ctx);
    }
    {
        pt_gen_request q;
        pt_gen_result r;
        int32_t p[2] = {1, 70};
        inf = mk_inf(&md, 2, 8, 0);
        memset(&q, 0, sizeof q);
        memset(&r, 0, sizeof r);
        q.prompt = p, q.nprompt = 2, q.max_tokens = 3;
        CHECK(pt_generate(inf, 1, &q, &r, NULL, NULL) == PT_ERR_ARG && strstr(g_err, "prompt token 1 is 70"), "errors: pt_generate names a bad prompt token");
        pt_error_clear(md.ctx);
        pt_infer_free(inf);
    }
    model_free(&md);
}

/* ---- the q8_0 cache ------------------------------------------------------------------------------------ */
/* text of words from a small grammar (seeded), for a model to learn something */
static int64_t make_text(tu_rng *r, char *buf, int64_t n) {
    static const char *const subj[] = {"the cat", "a dog", "the old man", "my sister", "the bird", "a child"};
    static const char *const verb[] = {"sat on", "ate", "saw", "ran to", "liked", "found"};
    static const char *const obj[] = {"the mat", "a fish", "the red ball", "the garden", "a hat", "the river"};
    int64_t k = 0;
    while (k < n - 64) {
        k += snprintf(buf + k, (size_t)(n - k), "%s %s %s. ", subj[tu_next(r) % 6], verb[tu_next(r) % 6], obj[tu_next(r) % 6]);
    }
    return k;
}
/* trains md (a byte model, max_seq T) for steps AdamW steps on text: 1 when it ran */
static int train_text(model *md, const char *text, int64_t n, int steps) {
    enum { B = 8 };
    const int T = md->cfg.max_seq;
    pt_optim_desc od;
    pt_optim *o;
    pt_graph *g = pt_graph_new(md->ctx);
    int32_t *x = (int32_t *)malloc(sizeof(int32_t) * B * (size_t)T), *y = (int32_t *)malloc(sizeof(int32_t) * B * (size_t)T);
    tu_rng r = {5};
    int k, b, t, ok;
    memset(&od, 0, sizeof od);
    od.kind = PT_OPTIM_ADAMW, od.lr = 3e-3f;
    ok = g && x && y && (o = pt_optim_new(md->ctx, &od)) != NULL;
    for (k = 0; ok && k < steps; k++) {
        pt_tensor *xt, *yt, *loss;
        for (b = 0; b < B; b++) {
            const int64_t at = (int64_t)(tu_next(&r) % (unsigned)(n - T - 1));
            for (t = 0; t < T; t++) x[b * T + t] = (unsigned char)text[at + t], y[b * T + t] = (unsigned char)text[at + t + 1];
        }
        pt_graph_reset(g);
        xt = pt_tensor_new(g, PT_I32, 2, B, T, 0, 0), yt = pt_tensor_new(g, PT_I32, 2, B, T, 0, 0);
        pt_tensor_write(xt, x), pt_tensor_write(yt, y);
        loss = pt_gpt_loss(g, md->m, xt, yt);
        pt_zero_grad(md->ctx);
        ok = loss && pt_backward(g, loss) == PT_OK;
        if (ok) pt_optim_step(o, 3e-3f), ok = pt_status_get(md->ctx) == PT_OK;
    }
    if (g) pt_graph_free(g);
    if (ok) pt_optim_free(o);
    free(x), free(y);
    return ok;
}
/* the logits of tokens[0, n) through fresh sequences of inf: sequence s fed ids[0, n - 1) then the last token, into lg */
static int kv_last(pt_infer *inf, const int32_t *ids, int n, float *lg) {
    int32_t s = pt_infer_seq_new(inf);
    int a = n - 1, one = 1, ok = s >= 0 && pt_infer_step(inf, 1, &s, &a, ids, NULL, 0) == PT_OK && pt_infer_step(inf, 1, &s, &one, ids + n - 1, lg, 0) == PT_OK;
    if (s >= 0) pt_infer_seq_free(inf, s);
    return ok;
}

static void test_kvq8(void) {
    model md, m1;
    const int T = tu_quick ? 96 : 200, V = 61;
    int32_t *ids = (int32_t *)malloc(sizeof(int32_t) * (size_t)T), *bids[NS];
    float *ref = (float *)malloc(sizeof(float) * (size_t)T * V), *got = (float *)malloc(sizeof(float) * (size_t)T * V),
          *g2 = (float *)malloc(sizeof(float) * (size_t)T * V), *a[NS], *b[NS], *c[NS];
    static const int all[] = {0}, one[] = {1}, ragged[] = {1, 7, 33, 2, 100, 5};
    tu_rng r = {13};
    int kern, s, k;
    if (!CHECK_WHY(model_new(&md, 2, V, 256, 2, 128, 2), "kv q8_0: a GPT (vocab 61, 2 x 128, 2 heads of 64, max_seq 256) and its f32 weights", g_err)) return;
    if (!CHECK_WHY(model_new(&m1, 1, V, 256, 2, 128, 2), "kv q8_0: the same GPT on 1 thread", g_err)) return;
    rand_ids(&r, ids, T, V);
    if (!CHECK_WHY(ref_logits(&md, ids, T, ref), "kv q8_0: pt_gpt_forward of the sequence", g_err)) goto out;
    /* cache = no cache within the rounding; the chunking changes no bit */
    g_kvq8 = 1;
    for (kern = 0; kern < 2; kern++) {
        static const int bts[2] = {16, 7};
        int bi;
        md.ctx->attn_kernel = kern ? 1 : 0;
        for (bi = 0; bi < 2; bi++) {
            double e0 = run_chunks(&md, bts[bi], all, 1, ids, T, got), d0 = tu_max_rel(got, ref, (long)T * V, 1.0, NULL), e2 = 0, r2 = 0;
            int same;
            long i;
            for (i = 0; i < (long)T * V; i++) e2 += ((double)got[i] - ref[i]) * ((double)got[i] - ref[i]), r2 += (double)ref[i] * ref[i];
            e0 += run_chunks(&md, bts[bi], one, 1, ids, T, g2);
            same = !memcmp(got, g2, sizeof(float) * (size_t)T * V);
            e0 += run_chunks(&md, bts[bi], ragged, 6, ids, T, g2);
            same = same && !memcmp(got, g2, sizeof(float) * (size_t)T * V);
            CHECKF(e0 == 0 && sqrt(e2 / r2) <= 0.02 && d0 <= 0.1,
                   tu_name("q8_0 cache: %d positions, block %d, %s attention: near pt_gpt_forward (normwise 2e-2)", T, bts[bi], kern ? "portable C" : "best"),
                   "steps %s; max relative difference %.3g, normwise %.3g (%s)", e0 == 0 ? "ran" : "failed", d0, sqrt(e2 / r2), g_err);
            CHECK(e0 == 0 && same, tu_name("q8_0 cache, block %d, %s attention: prefill = token by token = ragged chunks, bitwise", bts[bi],
                                           kern ? "portable C" : "best"));
            printf("       q8_0 cache: max relative difference %.3g, normwise %.3g\n", d0, sqrt(e2 / r2));
        }
    }
    md.ctx->attn_kernel = 0;
    /* batch and thread invariance, f32 and q8_0 weights */
    for (s = 0; s < NS; s++) {
        bids[s] = (int32_t *)malloc(sizeof(int32_t) * 128);
        rand_ids(&r, bids[s], plen[s] + NDEC, V);
        a[s] = (float *)malloc(sizeof(float) * 128 * V), b[s] = (float *)malloc(sizeof(float) * 128 * V), c[s] = (float *)malloc(sizeof(float) * 128 * V);
    }
    for (k = 0; k < 2; k++) {
        pt_gpt_weights *w0 = md.w, *w1 = m1.w;
        int ok, same = 1, same_t = 1;
        if (k) md.w = pt_gpt_weights_from(md.m, PT_W_Q8_0), m1.w = pt_gpt_weights_from(m1.m, PT_W_Q8_0);
        ok = md.w && m1.w && run_batch(&md, 1, 16, bids, a) && run_batch(&md, 0, 16, bids, b) && run_batch(&m1, 1, 16, bids, c);
        for (s = 0; ok && s < NS; s++) {
            const size_t n = (size_t)(plen[s] + NDEC) * V * sizeof(float);
            same = same && !memcmp(a[s], b[s], n), same_t = same_t && !memcmp(a[s], c[s], n);
        }
        CHECK_WHY(ok && same, tu_name("batch invariance (q8_0 cache, %s weights): each sequence alone = in the ragged batch, bitwise", k ? "q8_0" : "f32"), g_err);
        CHECK_WHY(ok && same_t, tu_name("thread invariance (q8_0 cache, %s weights): 1 thread = 2 threads, bitwise", k ? "q8_0" : "f32"), g_err);
        if (k) pt_gpt_weights_free(md.w), pt_gpt_weights_free(m1.w), md.w = w0, m1.w = w1;
    }
    for (s = 0; s < NS; s++) free(bids[s]), free(a[s]), free(b[s]), free(c[s]);
    /* the block API with q8_0 blocks (34 bytes a 32 values): fork + copy on write, a prefix hit, a swap out and in */
    {
        pt_infer *inf = mk_inf(&md, 6, 16, 0);
        const int n = 41;
        float *fresh = got, *lg = g2;
        int32_t sa, sb, sc, sd, na = n - 1, one1 = 1;
        int64_t hit = -1;
        pt__infer_swap *sw = NULL;
        int ok = inf && kv_last(inf, ids, n, fresh);
        sa = pt_infer_seq_new(inf);
        ok = ok && sa >= 0 && pt_infer_step(inf, 1, &sa, &na, ids, NULL, 0) == PT_OK && (sb = pt_infer_seq_fork(inf, sa)) >= 0;
        ok = ok && pt_infer_step(inf, 1, &sb, &one1, ids + n - 1, lg, 0) == PT_OK;
        CHECK_WHY(ok && !memcmp(lg, fresh, sizeof(float) * V) && pt_infer_kv_stats(inf).cow == 1,
                  "q8_0 cache: a fork's first step copies the shared last block on write; its logits = a fresh prefill's, bitwise", g_err);
        ok = ok && pt_infer_step(inf, 1, &sa, &one1, ids + n - 1, lg, 0) == PT_OK;
        CHECK_WHY(ok && !memcmp(lg, fresh, sizeof(float) * V), "q8_0 cache: the forked-from sequence's next step too", g_err);
        sc = ok ? pt_infer_seq_new(inf) : -1;
        ok = ok && sc >= 0 && (hit = pt_infer_seq_prefix(inf, sc, ids, n)) == 32;
        na = n - 1 - (int)hit;
        ok = ok && pt_infer_step(inf, 1, &sc, &na, ids + hit, NULL, 0) == PT_OK && pt_infer_step(inf, 1, &sc, &one1, ids + n - 1, lg, 0) == PT_OK;
        CHECKF(ok && !memcmp(lg, fresh, sizeof(float) * V), "q8_0 cache: a prefix-cache hit (2 blocks) then the rest: a fresh prefill's logits, bitwise",
               "hit %lld: %s", (long long)hit, g_err);
        sw = ok ? pt__infer_swap_out(inf, sc) : NULL;
        if (sw) pt_infer_seq_free(inf, sc), pt_infer_seq_free(inf, sa);
        sd = sw ? pt__infer_swap_in(inf, sw) : -1;
        /* sc holds n tokens: its last one fed again at position n gives other logits; compare a fresh run of n + 1 */
        ok = ok && sd >= 0 && pt_infer_seq_len(inf, sd) == n && pt_infer_step(inf, 1, &sd, &one1, ids + n, lg, 0) == PT_OK && kv_last(inf, ids, n + 1, fresh);
        CHECK_WHY(ok && !memcmp(lg, fresh, sizeof(float) * V) && pt_infer_check(inf) == PT_OK,
                  "q8_0 cache: a sequence swapped out and back in: the next step = a fresh prefill's, bitwise; the pool's invariants hold", g_err);
        if (sw) pt__infer_swap_free(inf, sw);
        pt_infer_free(inf);
    }
    g_kvq8 = 0;
    /* kv_bytes: the same budget in each type */
    {
        int64_t nb[3] = {0, 0, 0};
        static const int32_t tys[3] = {PT_W_F32, PT_W_F16, PT_W_Q8_0};
        pt_infer_desc d;
        pt_infer *inf;
        for (k = 0; k < 3; k++) {
            memset(&d, 0, sizeof d);
            d.kv_type = tys[k], d.kv_bytes = 1 << 20, d.max_seqs = 2;
            if ((inf = pt_infer_new(md.ctx, md.w, &d)) != NULL) pt_infer_blocks(inf, &nb[k], NULL);
            pt_infer_free(inf);
        }
        /* a block of 16 tokens: 2 layers x 2 x 128 x 16 values: 32768 bytes in f32, 16384 in f16, 8704 in q8_0 */
        CHECKF(nb[0] == 32 && nb[1] == 64 && nb[2] == 120, "kv_bytes: 1 MiB holds 32 f32 blocks, 64 f16 and 120 q8_0 (3.75x f32, 1.88x f16)",
               "%lld %lld %lld blocks", (long long)nb[0], (long long)nb[1], (long long)nb[2]);
        d.kv_type = PT_W_Q8_0, d.kv_bytes = 4000;
        g_err[0] = 0;
        CHECKF(!pt_infer_new(md.ctx, md.w, &d) && strstr(g_err, "kv_bytes 4000 holds no block") && strstr(g_err, "8704 bytes"),
               "kv_bytes below one block is refused, naming both sizes", "%s", g_err);
        pt_error_clear(md.ctx);
        d.kv_bytes = 0, d.kv_type = PT_W_Q4_0;
        CHECKF(!pt_infer_new(md.ctx, md.w, &d) && strstr(g_err, "kv_type 2 (q4_0)") && strstr(g_err, "PT_W_Q8_0 (8)"),
               "a kv_type other than f32, f16 and q8_0 is refused, naming it and the accepted ones", "%s", g_err);
        pt_error_clear(md.ctx);
        d.kv_type = 77;
        CHECKF(!pt_infer_new(md.ctx, md.w, &d) && strstr(g_err, "kv_type 77 is not"), "an unknown kv_type number is named", "%s", g_err);
        pt_error_clear(md.ctx);
    }
    {
        model m4;
        pt_infer_desc d;
        if (model_new(&m4, 1, V, 16, 1, 64, 4)) {
            memset(&d, 0, sizeof d);
            d.kv_type = PT_W_Q8_0;
            g_err[0] = 0;
            CHECKF(!pt_infer_new(m4.ctx, m4.w, &d) && strstr(g_err, "head size 16") && strstr(g_err, "multiple of 32"),
                   "kv_type q8_0 with a head size of 16 is refused, naming the head size", "%s", g_err);
        }
        model_free(&m4);
    }
out:
    free(ids), free(ref), free(got), free(g2);
    model_free(&m1);
    model_free(&md);
}

/* perplexity of a trained byte model on a validation text: each cache type */
static void test_kvq8_ppl(void) {
    model md;
    enum { NTRAIN = 16384, NVAL = 2048 };
    char *train = (char *)malloc(NTRAIN), *val = (char *)malloc(NVAL);
    int32_t *vid = (int32_t *)malloc(sizeof(int32_t) * NVAL);
    static const int32_t tys[3] = {PT_W_F32, PT_W_F16, PT_W_Q8_0};
    double ppl[3] = {0, 0, 0};
    tu_rng r1 = {21}, r2 = {22};
    int64_t nt, nv, i, cnt;
    int k, ok;
    nt = make_text(&r1, train, NTRAIN), nv = make_text(&r2, val, tu_quick ? 512 : NVAL);
    for (i = 0; i < nv; i++) vid[i] = (unsigned char)val[i];
    ok = model_new(&md, 2, 256, 64, 2, 64, 2) && train_text(&md, train, nt, tu_quick ? 20 : 120);
    if (CHECK_WHY(ok, "kv q8_0 perplexity: a byte GPT (2 x 64, 2 heads of 32, context 64) trained on a text of a small grammar", g_err)) {
        for (k = 0; k < 3; k++) {
            pt_infer_desc d;
            pt_infer *inf;
            double nll = 0;
            memset(&d, 0, sizeof d);
            d.max_seqs = 1, d.kv_type = tys[k];
            inf = pt_infer_new(md.ctx, md.w, &d);
            if (inf && pt_infer_nll(inf, vid, nv, &nll, &cnt) == PT_OK && cnt > 0) ppl[k] = exp(nll / (double)cnt);
            pt_infer_free(inf);
        }
        CHECKF(ppl[0] > 1 && ppl[0] < (tu_quick ? 32 : 8) && fabs(ppl[2] / ppl[0] - 1) <= 0.005 && fabs(ppl[1] / ppl[0] - 1) <= 0.005,
               tu_name("perplexity of %lld validation bytes: the q8_0 cache within 0.5%% of the f32 cache's (and fp16's)", (long long)nv),
               "f32 %.4f, f16 %.4f, q8_0 %.4f (%s)", ppl[0], ppl[1], ppl[2], g_err);
        printf("       perplexity: f32 cache %.5f, f16 %.5f (%+.3f%%), q8_0 %.5f (%+.3f%%)\n", ppl[0], ppl[1], 100 * (ppl[1] / ppl[0] - 1), ppl[2],
               100 * (ppl[2] / ppl[0] - 1));
    }
    model_free(&md);
    free(train), free(val), free(vid);
}

/* pt_gpt_generate on a model whose weights change: the f32 weights point into the slab */
static void test_weights(void) {
    model md;
    pt_tensor slab;
    if (!CHECK_WHY(model_new(&md, 1, 61, 16, 1, 32, 2), "weights: a GPT", g_err)) return;
    slab = pt_param_slab(md.ctx);
    CHECK(md.w->wte.data == pt_f32(md.m->wte) && md.w->head.data == md.w->wte.data && md.w->layer[0].qkv.rows == 96 && md.w->layer[0].fproj.cols == 128 &&
              (const float *)md.w->layer[0].qkv.data >= pt_f32(&slab),
          "weights: f32 weights point into the parameter slab (tied head = token table), shapes [3C, C] .. [C, 4C]");
    model_free(&md);
}

int main(int argc, char **argv) {
    tu_init(argc, argv);
    test_weights();
    test_cache();
    test_batch();
    test_greedy();
    test_policy();
    test_sampling();
    test_stop();
    test_errors();
    test_kvq8();
    test_kvq8_ppl();
    return tu_summary();
}
