/* test_sample.c - the sampler (see sample in ptrain.h): greedy, top-k, top-p, min-p, the repeat
   penalty, seeds, the distribution of many draws against an independent reference, bad parameters,
   the log-probability, no allocation per call, stop strings; and a checkpoint that carries its
   tokenizer (pt_ckpt_opts.tokenizer, pt_ckpt_tokenizer).
   Build: cc -std=c99 -O2 -fopenmp -I. tests/test_sample.c -o build/test_sample -lm */
#define PTRAIN_IMPLEMENTATION
#include "ptrain.h"
#include "test_util.h"
#include <unistd.h>

/* a counting allocator: the sampler must not allocate after pt_sampler_new */
static long n_alloc;
static void *c_alloc(void *u, size_t n) { (void)u; n_alloc++; return malloc(n); }
static void *c_realloc(void *u, void *p, size_t n) { (void)u; n_alloc++; return realloc(p, n); }
static void c_free(void *u, void *p) { (void)u; free(p); }

static pt_sample_params sp(float t, int k, float p, float minp, float pen, int last, uint64_t seed) {
    pt_sample_params s;
    memset(&s, 0, sizeof s);
    s.temperature = t, s.top_k = k, s.top_p = p, s.min_p = minp, s.repeat_penalty = pen, s.repeat_last_n = last, s.seed = seed;
    return s;
}

/* the reference distribution, written independently of the header: penalty, softmax at T in double,
   a stable sort (logit descending, id ascending), top-k, top-p over the k's total, min-p */
static void ref_probs(const float *x, int V, const int32_t *hist, int nh, pt_sample_params p, double *out) {
    double z[4096], w[4096], tot = 0, cum = 0, mx;
    int ord[4096], seen[4096], i, j, n, keep;
    for (i = 0; i < V; i++) z[i] = x[i], seen[i] = 0, out[i] = 0;
    if (p.repeat_penalty != 0 && p.repeat_penalty != 1) {
        int last = p.repeat_last_n == 0 ? 64 : p.repeat_last_n < 0 ? nh : p.repeat_last_n;
        for (i = nh - (last < nh ? last : nh); i < nh; i++)
            if (!seen[hist[i]]) {
                seen[hist[i]] = 1;
                z[hist[i]] = (float)z[hist[i]] <= 0 ? (double)((float)z[hist[i]] * p.repeat_penalty) : (double)((float)z[hist[i]] / p.repeat_penalty);
            }
    }
    for (i = 0; i < V; i++) ord[i] = i;
    for (i = 1; i < V; i++) /* insertion sort: stable, so ties stay in id order */
        for (j = i; j > 0 && z[ord[j - 1]] < z[ord[j]]; j--) {
            int t = ord[j];
            ord[j] = ord[j - 1], ord[j - 1] = t;
        }
    mx = z[ord[0]];
    if (p.temperature == 0 || p.top_k == 1) {
        out[ord[0]] = 1;
        return;
    }
    for (i = 0; i < V; i++) w[i] = exp((z[ord[i]] - mx) / p.temperature);
    n = p.top_k > 0 && p.top_k < V ? p.top_k : V;
    for (i = 0; i < n; i++) tot += w[i];
    for (keep = 0; keep < n; keep++) {
        if (p.top_p > 0 && p.top_p < 1 && keep > 0 && cum >= p.top_p * tot) break;
        if (p.min_p > 0 && w[keep] < p.min_p) break;
        cum += w[keep];
    }
    for (i = 0; i < keep; i++) out[ord[i]] = w[i] / cum;
}

static void rand_logits(tu_rng *r, float *x, int V, float scale) {
    int i;
    for (i = 0; i < V; i++) x[i] = tu_uniform(r, -scale, scale);
}

int main(int argc, char **argv) {
    pt_ctx *ctx;
    pt_desc desc;
    tu_rng r = {42};
    float x[4096];
    int i, j;
    tu_init(argc, argv);
    memset(&desc, 0, sizeof desc);
    desc.allocator.alloc = c_alloc, desc.allocator.realloc = c_realloc, desc.allocator.free = c_free;
    desc.log_level = PT_LOG_ERROR + 1; /* the refused parameters below would log */
    ctx = pt_init(&desc);
    if (!CHECK(ctx != NULL, "context")) return tu_summary();

    /* ---- greedy = argmax, ties to the lowest id ---- */
    {
        pt_sample_params p = sp(0, 0, 0, 0, 0, 0, 1);
        pt_sampler *s = pt_sampler_new(ctx, &p, 1000);
        int ok = s != NULL;
        for (j = 0; ok && j < 50; j++) {
            int best = 0;
            rand_logits(&r, x, 1000, 5);
            for (i = 1; i < 1000; i++)
                if (x[i] > x[best]) best = i;
            ok = pt_sampler_next(s, x, NULL, 0, NULL) == best;
        }
        CHECK(ok, "greedy (temperature 0) picks the argmax of 50 random rows");
        for (i = 0; i < 1000; i++) x[i] = -1;
        x[7] = x[500] = x[3] = 2;
        CHECKF(pt_sampler_next(s, x, NULL, 0, NULL) == 3, "greedy: ties go to the lowest id", "picked %d", pt_sampler_next(s, x, NULL, 0, NULL));
        x[3] = -INFINITY;
        CHECK(pt_sampler_next(s, x, NULL, 0, NULL) == 7, "greedy: a -inf logit is banned");
        pt_sampler_free(s);
        s = pt_sampler_new(ctx, NULL, 5);
        x[0] = 0, x[1] = 4, x[2] = 1, x[3] = 4, x[4] = 9;
        CHECK(s && pt_sampler_next(s, x, NULL, 0, NULL) == 4, "params NULL: greedy");
        pt_sampler_free(s);
    }
    /* ---- top-k 1 and a tiny top-p give greedy at any temperature; top-k >= V and top-p 1 are off ---- */
    {
        pt_sample_params pg = sp(0, 0, 0, 0, 0, 0, 9), pk = sp(1.5f, 1, 0, 0, 0, 0, 9), pp = sp(1.5f, 0, 1e-6f, 0, 0, 0, 9);
        pt_sample_params pa = sp(0.8f, 0, 0, 0, 0, 0, 9), pka = sp(0.8f, 300, 1, 0, 0, 0, 9), pm = sp(1.5f, 0, 0, 1, 0, 0, 9);
        pt_sampler *g = pt_sampler_new(ctx, &pg, 300), *k = pt_sampler_new(ctx, &pk, 300), *p = pt_sampler_new(ctx, &pp, 300);
        pt_sampler *a = pt_sampler_new(ctx, &pa, 300), *ka = pt_sampler_new(ctx, &pka, 300), *m = pt_sampler_new(ctx, &pm, 300);
        int same_k = 1, same_p = 1, same_m = 1, same_all = 1, differs = 0;
        for (j = 0; j < 200; j++) {
            int tg, ta;
            rand_logits(&r, x, 300, 2);
            tg = pt_sampler_next(g, x, NULL, 0, NULL), ta = pt_sampler_next(a, x, NULL, 0, NULL);
            same_k &= pt_sampler_next(k, x, NULL, 0, NULL) == tg;
            same_p &= pt_sampler_next(p, x, NULL, 0, NULL) == tg;
            same_m &= pt_sampler_next(m, x, NULL, 0, NULL) == tg;
            same_all &= pt_sampler_next(ka, x, NULL, 0, NULL) == ta;
            differs += ta != tg;
        }
        CHECK(same_k, "top_k 1 at temperature 1.5 = greedy (200 rows)");
        CHECK(same_p, "top_p 1e-6 at temperature 1.5 = greedy (200 rows)");
        CHECK(same_m, "min_p 1 at temperature 1.5 = greedy (no ties)");
        CHECK(same_all, "top_k >= vocabulary with top_p 1 = plain sampling, draw for draw");
        CHECKF(differs > 50, "plain sampling at 0.8 is not greedy", "differs on %d of 200 rows", differs);
        pt_sampler_free(g), pt_sampler_free(k), pt_sampler_free(p), pt_sampler_free(a), pt_sampler_free(ka), pt_sampler_free(m);
    }
    /* ---- the kept sets and their probabilities against the reference ---- */
    {
        static const float cfg[][4] = {{1, 0, 0, 0}, {0.7f, 10, 0, 0}, {1.3f, 0, 0.9f, 0}, {1, 0, 0, 0.2f}, {0.8f, 20, 0.8f, 0.05f},
                                       {2, 5, 0.5f, 0}, {1, 0, 0.95f, 0.1f}, {0.5f, 3, 0, 0.3f}};
        int c, worst_c = -1;
        double worst = 0;
        float pr[4096];
        double rf[4096];
        for (c = 0; c < (int)(sizeof cfg / sizeof *cfg); c++) {
            pt_sample_params p = sp(cfg[c][0], (int)cfg[c][1], cfg[c][2], cfg[c][3], 0, 0, 3);
            pt_sampler *s = pt_sampler_new(ctx, &p, 64);
            for (j = 0; j < 20; j++) {
                rand_logits(&r, x, 64, 3);
                if (j % 5 == 0) x[j] = x[j + 1]; /* ties */
                pt_sampler_probs(s, x, NULL, 0, pr);
                ref_probs(x, 64, NULL, 0, p, rf);
                for (i = 0; i < 64; i++)
                    if (fabs(pr[i] - rf[i]) > worst) worst = fabs(pr[i] - rf[i]), worst_c = c;
            }
            pt_sampler_free(s);
        }
        CHECKF(worst < 1e-5, "pt_sampler_probs = the reference (8 settings of temperature, top-k, top-p, min-p; 20 rows each, ties)",
               "largest difference %g in setting %d", worst, worst_c);
    }
    /* ---- min_p on a hand-made row ---- */
    {
        pt_sample_params p = sp(1, 0, 0, 0.25f, 0, 0, 5);
        pt_sampler *s = pt_sampler_new(ctx, &p, 6);
        float pr[6];
        int hits[6] = {0};
        /* probabilities relative to the top: 1, e^-1 = 0.37, e^-1.2 = 0.30, e^-1.5 = 0.22, e^-3, e^-0.5 */
        x[0] = 0, x[1] = -1, x[2] = -1.2f, x[3] = -1.5f, x[4] = -3, x[5] = -0.5f;
        pt_sampler_probs(s, x, NULL, 0, pr);
        CHECK(pr[0] > 0 && pr[1] > 0 && pr[2] > 0 && pr[5] > 0 && pr[3] == 0 && pr[4] == 0, "min_p 0.25 keeps the tokens at >= 0.25 x the top");
        CHECK_NEAR(pr[1] / pr[0], exp(-1.0), 1e-6, "min_p: the kept tokens keep their proportions");
        for (j = 0; j < 2000; j++) hits[pt_sampler_next(s, x, NULL, 0, NULL)]++;
        CHECKF(hits[3] == 0 && hits[4] == 0 && hits[0] > hits[5] && hits[5] > hits[1], "min_p: 2000 draws never pick a dropped token",
               "hits %d %d %d %d %d %d", hits[0], hits[1], hits[2], hits[3], hits[4], hits[5]);
        pt_sampler_free(s);
    }
    /* ---- the repeat penalty (llama.cpp's rule) ---- */
    {
        pt_sample_params p = sp(1, 0, 0, 0, 2, 0, 5);
        pt_sampler *s = pt_sampler_new(ctx, &p, 4);
        int32_t h[3] = {0, 1, 1};
        float pr[4], e[4];
        double tot = 0;
        x[0] = 2, x[1] = -1, x[2] = 0.5f, x[3] = 3;
        e[0] = 1, e[1] = -2, e[2] = 0.5f, e[3] = 3; /* positive / 2, negative x 2, once per distinct token */
        pt_sampler_probs(s, x, h, 3, pr);
        for (i = 0; i < 4; i++) tot += exp(e[i] - 3);
        CHECKF(fabs(pr[0] - exp(e[0] - 3) / tot) < 1e-6 && fabs(pr[1] - exp(e[1] - 3) / tot) < 1e-6 && fabs(pr[3] - 1 / tot) < 1e-6,
               "penalty 2: positive logits halved, negative doubled, once per distinct token", "probs %g %g %g %g", pr[0], pr[1], pr[2], pr[3]);
        pt_sampler_free(s);
        p = sp(0, 0, 0, 0, 10, 1, 5); /* window of 1: only the last token is penalized */
        s = pt_sampler_new(ctx, &p, 4);
        x[0] = 3, x[1] = 2.9f, x[2] = 0, x[3] = 0;
        h[0] = 1, h[1] = 2, h[2] = 0;
        CHECK(pt_sampler_next(s, x, h, 3, NULL) == 1, "penalty window 1: the last token (0) loses the argmax to 1");
        h[2] = 2;
        CHECK(pt_sampler_next(s, x, h, 3, NULL) == 0, "penalty window 1: an earlier token (0 at -3) is not penalized");
        pt_sampler_free(s);
        p = sp(0, 0, 0, 0, 10, -1, 5);
        s = pt_sampler_new(ctx, &p, 4);
        h[0] = 0, h[1] = 2, h[2] = 2;
        CHECK(pt_sampler_next(s, x, h, 3, NULL) == 1, "penalty window -1: the whole history");
        CHECK(pt_sampler_next(s, x, h, 0, NULL) == 0, "penalty: an empty history changes nothing");
        h[1] = 4;
        CHECK(pt_sampler_next(s, x, h, 3, NULL) == -1, "penalty: a history id outside the vocabulary is an error");
        CHECK_HAS(pt_error(ctx), "history[1] = 4", "the error names the history entry");
        pt_error_clear(ctx);
        pt_sampler_free(s);
        p = sp(0, 0, 0, 0, 1e6f, 0, 5); /* default window 64: a token 64 back is penalized, 65 back is not */
        s = pt_sampler_new(ctx, &p, 4);
        {
            int32_t hh[70];
            for (i = 0; i < 70; i++) hh[i] = 3;
            hh[70 - 64] = 0;
            x[0] = 3, x[1] = 2.9f, x[2] = 0, x[3] = -5;
            CHECK(pt_sampler_next(s, x, hh, 70, NULL) == 1, "penalty: the default window is 64 (64 back is inside)");
            hh[70 - 64] = 3, hh[70 - 65] = 0;
            CHECK(pt_sampler_next(s, x, hh, 70, NULL) == 0, "penalty: 65 back is outside the default window");
        }
        pt_sampler_free(s);
    }
    /* ---- seeds: the same seed gives the same sequence, alone or interleaved with other samplers ---- */
    {
        pt_sample_params p = sp(0.9f, 40, 0.95f, 0.01f, 1.1f, 16, 1234);
        pt_sampler *a = pt_sampler_new(ctx, &p, 500), *b, *c;
        int32_t sa[200], sb[200], sc[200];
        float rows[20][500];
        int same = 1, diff = 0, reseed = 1;
        for (j = 0; j < 20; j++) rand_logits(&r, rows[j], 500, 4);
        for (j = 0; j < 200; j++) sa[j] = pt_sampler_next(a, rows[j % 20], sa, j, NULL);
        b = pt_sampler_new(ctx, &p, 500);
        p.seed = 99;
        c = pt_sampler_new(ctx, &p, 500);
        for (j = 0; j < 200; j++) { /* b beside c, as in a batch */
            sc[j] = pt_sampler_next(c, rows[(j * 7) % 20], sc, j, NULL);
            sb[j] = pt_sampler_next(b, rows[j % 20], sb, j, NULL);
            same &= sb[j] == sa[j];
            diff += sc[j] != sa[j];
        }
        CHECK(same, "the same seed gives the same 200 tokens, alone or beside another sampler");
        CHECKF(diff > 20, "another seed gives other tokens", "%d of 200 differ", diff);
        pt_sampler_seed(c, 1234);
        for (j = 0; j < 200; j++) reseed &= pt_sampler_next(c, rows[j % 20], sc, j, NULL) == sa[j], sc[j] = sa[j];
        CHECK(reseed && pt_sampler_params(c).seed == 1234, "pt_sampler_seed restarts the sequence");
        pt_sampler_free(a), pt_sampler_free(b), pt_sampler_free(c);
    }
    /* ---- many draws follow the distribution (chi-square) ---- */
    {
        static const float cfg[][4] = {{1, 0, 0, 0}, {0.7f, 12, 0, 0}, {1.2f, 0, 0.9f, 0}, {1, 0, 0, 0.1f}, {0.9f, 15, 0.85f, 0.02f}};
        int c, V = 24, N = tu_quick ? 40000 : 200000;
        for (c = 0; c < (int)(sizeof cfg / sizeof *cfg); c++) {
            pt_sample_params p = sp(cfg[c][0], (int)cfg[c][1], cfg[c][2], cfg[c][3], 0, 0, 77 + (uint64_t)c);
            pt_sampler *s = pt_sampler_new(ctx, &p, V);
            double rf[64], chi = 0;
            long cnt[64] = {0}, out = 0;
            int df = -1;
            rand_logits(&r, x, V, 2.5f);
            ref_probs(x, V, NULL, 0, p, rf);
            for (j = 0; j < N; j++) cnt[pt_sampler_next(s, x, NULL, 0, NULL)]++;
            for (i = 0; i < V; i++) {
                if (rf[i] == 0) {
                    out += cnt[i];
                    continue;
                }
                chi += (cnt[i] - N * rf[i]) * (cnt[i] - N * rf[i]) / (N * rf[i]), df++;
            }
            /* df + 6 sqrt(2 df): far in the tail (p < 1e-5 for these df); the draws are seeded, so fixed */
            CHECKF(out == 0 && chi < df + 6 * sqrt(2.0 * df),
                   tu_name("%d draws (T %g, top_k %g, top_p %g, min_p %g) match the reference distribution: chi-square over %d df", N, cfg[c][0],
                           cfg[c][1], cfg[c][2], cfg[c][3], df),
                   "chi-square %.1f, %ld draws outside the kept set", chi, out);
            if (c == 0) printf("  chi-square %.1f over %d degrees of freedom\n", chi, df);
            pt_sampler_free(s);
        }
    }
    /* ---- the log-probability is of the raw logits ---- */
    {
        pt_sample_params p = sp(0.5f, 5, 0, 0, 3, 0, 11);
        pt_sampler *s = pt_sampler_new(ctx, &p, 100);
        int32_t h[4] = {1, 2, 3, 4};
        double worst = 0;
        for (j = 0; j < 20; j++) {
            float lp;
            double m = -1e30, tot = 0;
            int t;
            rand_logits(&r, x, 100, 6);
            t = pt_sampler_next(s, x, h, 4, &lp);
            for (i = 0; i < 100; i++) m = x[i] > m ? x[i] : m;
            for (i = 0; i < 100; i++) tot += exp(x[i] - m);
            if (fabs(lp - (x[t] - m - log(tot))) > worst) worst = fabs(lp - (x[t] - m - log(tot)));
        }
        CHECKF(worst < 1e-5, "logprob = log-softmax of the raw logits at the pick (not penalized, not tempered)", "worst %g", worst);
        pt_sampler_free(s);
    }
    /* ---- no allocation per call ---- */
    {
        pt_sample_params p = sp(0.8f, 0, 0.9f, 0.01f, 1.2f, 0, 1);
        pt_sampler *s = pt_sampler_new(ctx, &p, 4000);
        long before = n_alloc;
        float pr[4000], lp;
        int32_t h[100];
        for (i = 0; i < 100; i++) h[i] = i * 37 % 4000;
        for (j = 0; j < 100; j++) {
            rand_logits(&r, x, 4000, 3);
            pt_sampler_next(s, x, h, 100, &lp);
            pt_sampler_probs(s, x, h, 100, pr);
        }
        CHECKF(n_alloc == before, "100 calls of pt_sampler_next and pt_sampler_probs allocate nothing", "%ld allocations", n_alloc - before);
        pt_sampler_free(s);
    }
    /* ---- bad parameters and rows are refused, naming them ---- */
    {
        struct { pt_sample_params p; int64_t v; const char *has; } bad[10];
        int nb = 0, ok = 1;
        bad[nb].p = sp(-1, 0, 0, 0, 0, 0, 0), bad[nb].v = 10, bad[nb++].has = "temperature = -1";
        bad[nb].p = sp(NAN, 0, 0, 0, 0, 0, 0), bad[nb].v = 10, bad[nb++].has = "temperature = nan";
        bad[nb].p = sp(INFINITY, 0, 0, 0, 0, 0, 0), bad[nb].v = 10, bad[nb++].has = "temperature = inf";
        bad[nb].p = sp(1, -2, 0, 0, 0, 0, 0), bad[nb].v = 10, bad[nb++].has = "top_k = -2";
        bad[nb].p = sp(1, 0, 1.5f, 0, 0, 0, 0), bad[nb].v = 10, bad[nb++].has = "top_p = 1.5";
        bad[nb].p = sp(1, 0, -0.1f, 0, 0, 0, 0), bad[nb].v = 10, bad[nb++].has = "top_p = -0.1";
        bad[nb].p = sp(1, 0, 0, 2, 0, 0, 0), bad[nb].v = 10, bad[nb++].has = "min_p = 2";
        bad[nb].p = sp(1, 0, 0, 0, -1, 0, 0), bad[nb].v = 10, bad[nb++].has = "repeat_penalty = -1";
        bad[nb].p = sp(1, 0, 0, 0, 0, -5, 0), bad[nb].v = 10, bad[nb++].has = "repeat_last_n = -5";
        bad[nb].p = sp(1, 0, 0, 0, 0, 0, 0), bad[nb].v = 0, bad[nb++].has = "vocab = 0";
        for (i = 0; i < nb; i++) {
            pt_sampler *s;
            pt_error_clear(ctx);
            s = pt_sampler_new(ctx, &bad[i].p, bad[i].v);
            if (s || pt_status_get(ctx) != PT_ERR_ARG || !strstr(pt_error(ctx), bad[i].has)) {
                ok = 0;
                printf("  refusal %d: got %p, '%s', expected '%s'\n", i, (void *)s, pt_error(ctx), bad[i].has);
            }
            pt_sampler_free(s);
        }
        CHECK(ok, "10 bad parameters refused, each error naming the field and its value");
        pt_error_clear(ctx);
        {
            pt_sample_params p = sp(1, 0, 0, 0, 0, 0, 0);
            pt_sampler *s = pt_sampler_new(ctx, &p, 4);
            float pr[4];
            x[0] = 1, x[1] = NAN, x[2] = 0, x[3] = 0;
            CHECK(pt_sampler_next(s, x, NULL, 0, NULL) == -1 && strstr(pt_error(ctx), "token 1 is NaN"), "a NaN logit is an error naming its token");
            pt_error_clear(ctx);
            x[1] = INFINITY;
            CHECK(pt_sampler_probs(s, x, NULL, 0, pr) == PT_ERR_ARG && strstr(pt_error(ctx), "token 1 is +inf"), "a +inf logit is an error naming its token");
            pt_error_clear(ctx);
            x[0] = x[1] = x[2] = x[3] = -INFINITY;
            CHECK(pt_sampler_next(s, x, NULL, 0, NULL) == -1 && strstr(pt_error(ctx), "every logit"), "every logit -inf is an error");
            pt_error_clear(ctx);
            CHECK(pt_sampler_next(s, NULL, NULL, 0, NULL) == -1 && strstr(pt_error(ctx), "no logits"), "no logits is an error");
            pt_error_clear(ctx);
            x[0] = -INFINITY, x[1] = 0, x[2] = -INFINITY, x[3] = -INFINITY;
            for (j = 0, i = 1; j < 50; j++) i &= pt_sampler_next(s, x, NULL, 0, NULL) == 1;
            CHECK(i, "sampling with one finite logit always picks it");
            pt_sampler_free(s);
        }
    }
    /* ---- stop strings ---- */
    {
        const char *stops[] = {"END", "\n\n", "", NULL, "lo w"};
        size_t at = 99, hold = 99;
        int f;
        f = pt_stop_find("hello world", 11, stops, 5, &at, &hold);
        CHECKF(f == 1 && at == 3, "a stop string in the text: found at its offset", "found %d at %zu", f, at);
        f = pt_stop_find("xx\n\nyyEND", 9, stops, 5, &at, &hold);
        CHECKF(f == 1 && at == 2 && hold == 0, "the earliest of several matches", "found %d at %zu hold %zu", f, at, hold);
        f = pt_stop_find("some text EN", 12, stops, 5, &at, &hold);
        CHECKF(f == 0 && at == 12 && hold == 2, "an end that begins a stop string is held ('EN' of 'END')", "found %d at %zu hold %zu", f, at, hold);
        f = pt_stop_find("a\n", 2, stops, 5, &at, &hold);
        CHECKF(f == 0 && hold == 1, "held: a lone newline of '\\n\\n'", "found %d hold %zu", f, hold);
        f = pt_stop_find("hex", 3, stops, 5, &at, &hold);
        CHECKF(f == 0 && hold == 0, "nothing held when no stop string begins with the end", "found %d hold %zu", f, hold);
        f = pt_stop_find("END", 3, stops, 5, &at, NULL);
        CHECK(f == 1 && at == 0, "a text that is a stop string matches (hold may be NULL)");
        f = pt_stop_find("ab", 2, NULL, 0, &at, &hold);
        CHECK(f == 0 && at == 2 && hold == 0, "no stop strings: nothing found, nothing held");
        { /* streaming: tokens "Hel" "lo " "wor" "ld": the stop "lo w" spans three of them */
            const char *toks[] = {"Hel", "lo ", "wor", "ld"};
            char pend[64], emitted[64] = "";
            size_t np = 0;
            int stopped = -1, k;
            for (k = 0; k < 4 && stopped < 0; k++) {
                memcpy(pend + np, toks[k], strlen(toks[k]));
                np += strlen(toks[k]);
                if (pt_stop_find(pend, np, stops, 5, &at, &hold)) {
                    strncat(emitted, pend, at);
                    stopped = k;
                } else {
                    strncat(emitted, pend, np - hold);
                    memmove(pend, pend + np - hold, hold);
                    np = hold;
                }
            }
            CHECKF(stopped == 2 && !strcmp(emitted, "Hel"), "streaming: a stop string across token boundaries ends the text before it",
                   "stopped at token %d, emitted '%s'", stopped, emitted);
        }
    }
    /* ---- the detokenizer (bytes: an id below 256 is that byte) ---- */
    {
        const char *st1[] = {"lo w", "END"}, *st2[] = {"abcd", "ab"}, *nul[] = {NULL, ""};
        char out[64];
        size_t n, len;
        const char *p;
        int k, r = 0, calls = 0;
        pt_detok *d = pt_detok_new(ctx, NULL, NULL, 0);
        /* "é" = C3 A9 then "x": the first byte is held, then the character comes out whole */
        pt_detok_push(d, 0xC3), p = pt_detok_take(d, 0, &n);
        CHECKF(n == 0, "detok: the first byte of a two-byte UTF-8 character is held", "%zu bytes out", n);
        pt_detok_push(d, 0xA9), p = pt_detok_take(d, 0, &n);
        CHECKF(n == 2 && !memcmp(p, "\xC3\xA9", 2), "detok: the character comes out when complete", "%zu bytes out", n);
        pt_detok_push(d, 0xE2), pt_detok_push(d, 0x82), p = pt_detok_take(d, 0, &n);
        CHECKF(n == 0, "detok: two bytes of a three-byte character are held", "%zu bytes out", n);
        p = pt_detok_take(d, 1, &n);
        CHECKF(n == 2 && !memcmp(p, "\xE2\x82", 2), "detok: the end flushes an incomplete character", "%zu bytes out", n);
        pt_detok_push(d, 300), p = pt_detok_text(d, &len);
        CHECKF(len == 4 && pt_detok_last(d, &n) && n == 0, "detok: an id above the bytes adds no text", "text %zu, last %zu", len, n);
        pt_detok_free(d);
        /* a stop string across token boundaries: "Hello world" byte by byte, "lo w" spans four tokens */
        d = pt_detok_new(ctx, NULL, st1, 2);
        out[0] = 0;
        for (k = 0; "Hello world"[k] && r == 0; k++, calls++) {
            r = pt_detok_push(d, (unsigned char)"Hello world"[k]);
            p = pt_detok_take(d, 0, &n);
            strncat(out, p, n);
        }
        p = pt_detok_text(d, &len);
        CHECKF(r == 1 && calls == 7 && !strcmp(out, "Hel") && len == 3 && pt_detok_stopped(d) && pt_detok_push(d, 'x') == 1,
               "detok: a stop string across tokens ends the text before it, in the token that completes it", "r %d after %d tokens, out '%s', text %zu", r,
               calls, out, len);
        p = pt_detok_take(d, 1, &n);
        CHECKF(n == 0, "detok: after a stop string the end flushes nothing", "%zu bytes", n);
        pt_detok_free(d);
        /* held back, then flushed at the end: "abEN" with "END" */
        d = pt_detok_new(ctx, NULL, st1, 2);
        out[0] = 0;
        for (k = 0; k < 4; k++) pt_detok_push(d, (unsigned char)"abEN"[k]), p = pt_detok_take(d, 0, &n), strncat(out, p, n);
        CHECKF(!strcmp(out, "ab"), "detok: bytes that may begin a stop string are held", "out '%s'", out);
        p = pt_detok_take(d, 1, &n), strncat(out, p, n);
        CHECKF(!strcmp(out, "abEN") && !pt_detok_stopped(d), "detok: the end flushes the held bytes", "out '%s'", out);
        pt_detok_free(d);
        /* a stop string that is a prefix of another: "ab" ends "xab..." though "abcd" might still come */
        d = pt_detok_new(ctx, NULL, st2, 2);
        out[0] = 0;
        for (k = 0, r = 0; k < 4 && !r; k++) r = pt_detok_push(d, (unsigned char)"xabc"[k]), p = pt_detok_take(d, 0, &n), strncat(out, p, n);
        p = pt_detok_text(d, &len);
        CHECKF(r == 1 && k == 3 && !strcmp(out, "x") && len == 1, "detok: a stop string that begins another ends the text at once", "r %d at token %d, out '%s'",
               r, k, out);
        pt_detok_free(d);
        d = pt_detok_new(ctx, NULL, nul, 2);
        CHECK(d && pt_detok_push(d, 'a') == 0 && pt_detok_take(d, 0, &n) && n == 1, "detok: NULL and empty stop strings are ignored");
        pt_detok_free(d);
        CHECK(!pt_detok_new(ctx, NULL, NULL, 2) && strstr(pt_error(ctx), "pt_detok_new"), "detok: a count without strings is refused");
        pt_error_clear(ctx);
        (void)p;
    }
    /* ---- a checkpoint carries its tokenizer ---- */
    {
        char dir[256], sd[300], path[400], err[1024];
        const char *text = "the cat sat on the mat; the cat ate the rat. that hat is the cat's hat, and that is that. ";
        char big[4096], back[4096];
        int32_t ids[4096], ids2[4096];
        int64_t n = 0, ni, nb;
        pt_gpt_config cfg;
        pt_gpt *m;
        pt_optim_desc od;
        pt_optim *o;
        pt_ckpt_opts ck;
        pt_ckpt_info info;
        pt_tokenizer *tk, *tk2;
        FILE *f;
        int ok;
        while (n + (int64_t)strlen(text) < (int64_t)sizeof big) memcpy(big + n, text, strlen(text)), n += (int64_t)strlen(text);
        tk = pt_tokenizer_train(ctx, big, n, 40);
        snprintf(dir, sizeof dir, "build/test_sample_ckpt.%ld", (long)getpid());
        memset(&cfg, 0, sizeof cfg);
        cfg.vocab = pt_tokenizer_vocab(tk), cfg.max_seq = 16, cfg.layers = 1, cfg.width = 16, cfg.heads = 2;
        m = pt_gpt_new(ctx, &cfg);
        memset(&od, 0, sizeof od);
        od.kind = PT_OPTIM_ADAMW, od.lr = 1e-3f;
        o = pt_optim_new(ctx, &od);
        memset(&ck, 0, sizeof ck);
        ck.model = &cfg, ck.tokenizer = tk;
        CHECKF(tk && m && o && pt_ckpt_save(ctx, o, dir, 1, &ck) == PT_OK, "a checkpoint saved with its tokenizer", "%s", pt_error(ctx));
        tk2 = pt_ckpt_tokenizer(ctx, dir);
        ni = tk2 ? pt_tokenizer_encode(tk2, big, n, ids2) : -1;
        ok = tk2 && pt_tokenizer_vocab(tk2) == pt_tokenizer_vocab(tk) && ni == pt_tokenizer_encode(tk, big, n, ids) && !memcmp(ids, ids2, (size_t)ni * 4);
        nb = ok ? pt_tokenizer_decode(tk2, ids2, ni, back, sizeof back) : -1;
        CHECKF(ok && nb == n && !memcmp(back, big, (size_t)n), "pt_ckpt_tokenizer(DIR) gives the same tokenizer: the same ids, decoded back to the text",
               "vocab %d, %lld ids: %s", tk2 ? (int)pt_tokenizer_vocab(tk2) : -1, (long long)ni, pt_error(ctx));
        pt_tokenizer_free(tk2);
        CHECK(pt_ckpt_info_read(dir, &info, err, sizeof err) == PT_OK && info.tokenizer_vocab == pt_tokenizer_vocab(tk), "pt_ckpt_info: tokenizer_vocab");
        pt_ckpt_info_free(&info);
        pt_ckpt_step_dir(dir, sd, sizeof sd);
        CHECKF(pt_ckpt_verify(sd, err, sizeof err) == PT_OK, "pt_ckpt_verify checks the tokenizer too (good)", "%s", err);
        /* asynchronous: the tokenizer is written during the call, so the caller may free its own at once */
        ck.async = 1;
        ok = pt_ckpt_save(ctx, o, dir, 2, &ck) == PT_OK && pt_ckpt_wait(ctx) == PT_OK;
        tk2 = ok ? pt_ckpt_tokenizer(ctx, dir) : NULL;
        CHECKF(tk2 && pt_tokenizer_vocab(tk2) == pt_tokenizer_vocab(tk), "an asynchronous save carries it too (step 2, through latest)", "%s", pt_error(ctx));
        pt_tokenizer_free(tk2);
        ck.async = 0;
        /* a damaged tokenizer.bin: verify and pt_ckpt_tokenizer name it; the training state still loads */
        snprintf(path, sizeof path, "%s/step_000000002/%s", dir, PT_TOKENIZER_FILE);
        if ((f = fopen(path, "r+b")) != NULL) {
            fseek(f, 40, SEEK_SET);
            fputc(0x7f, f);
            fclose(f);
        }
        snprintf(sd, sizeof sd, "%s/step_000000002", dir);
        CHECKF(pt_ckpt_verify(sd, err, sizeof err) != PT_OK && strstr(err, "tokenizer.bin") && strstr(err, "CRC32C"),
               "pt_ckpt_verify: a damaged tokenizer.bin is named", "%s", err);
        pt_error_clear(ctx);
        CHECKF(!pt_ckpt_tokenizer(ctx, dir) && pt_status_get(ctx) == PT_ERR_FORMAT && strstr(pt_error(ctx), "tokenizer.bin"),
               "pt_ckpt_tokenizer: a damaged tokenizer.bin is an error naming it", "%s", pt_error(ctx));
        pt_error_clear(ctx);
        {
            int64_t st = -1;
            CHECKF(pt_ckpt_load(ctx, o, dir, &st) == PT_OK && st == 2, "pt_ckpt_load does not need the tokenizer (step 2 loads)", "step %lld: %s",
                   (long long)st, pt_error(ctx));
        }
        /* saved without one: none, and no error */
        ck.tokenizer = NULL;
        pt_error_clear(ctx);
        CHECK(pt_ckpt_save(ctx, o, dir, 3, &ck) == PT_OK && pt_ckpt_tokenizer(ctx, dir) == NULL && pt_status_get(ctx) == PT_OK,
              "a checkpoint saved without a tokenizer: pt_ckpt_tokenizer gives NULL and no error");
        CHECK(pt_ckpt_info_read(dir, &info, err, sizeof err) == PT_OK && info.tokenizer_vocab == 0, "pt_ckpt_info: tokenizer_vocab 0 without one");
        pt_ckpt_info_free(&info);
        /* a tokenizer larger than the model's vocabulary is refused */
        cfg.vocab = 280, ck.tokenizer = tk;
        pt_error_clear(ctx);
        CHECKF(pt_ckpt_save(ctx, o, dir, 4, &ck) != PT_OK && strstr(pt_error(ctx), "exceeds the model's vocab of 280"),
               "a tokenizer vocabulary above the model's is refused at the save, naming both", "%s", pt_error(ctx));
        pt_error_clear(ctx);
        CHECK(pt_ckpt_tokenizer(ctx, "build/no/such/checkpoint") == NULL && pt_status_get(ctx) == PT_ERR_IO, "no checkpoint there: PT_ERR_IO");
        pt_error_clear(ctx);
        pt_tokenizer_free(tk);
        pt_optim_free(o);
        pt_gpt_free(m);
        snprintf(path, sizeof path, "rm -rf '%s'", dir);
        if (system(path) != 0) printf("  (could not remove %s)\n", dir);
    }
    /* ---- speed at GPT-2's vocabulary (printed) ---- */
    {
        static float big[50257];
        static const float cfg[][4] = {{0, 0, 0, 0}, {1, 0, 0, 0}, {0.8f, 40, 0, 0}, {0.8f, 0, 0.9f, 0}, {0.8f, 0, 0, 0.05f}};
        int c, reps = tu_quick ? 20 : 200;
        for (i = 0; i < 50257; i++) big[i] = tu_uniform(&r, -4, 4) + (i % 97 == 0 ? 6.0f : 0.0f);
        for (c = 0; c < (int)(sizeof cfg / sizeof *cfg); c++) {
            pt_sample_params p = sp(cfg[c][0], (int)cfg[c][1], cfg[c][2], cfg[c][3], 0, 0, 1);
            pt_sampler *s = pt_sampler_new(ctx, &p, 50257);
            double t0 = pt_time();
            for (j = 0; j < reps; j++) pt_sampler_next(s, big, NULL, 0, NULL);
            printf("  vocab 50257, T %g top_k %g top_p %g min_p %g: %.1f us a token\n", cfg[c][0], cfg[c][1], cfg[c][2], cfg[c][3],
                   (pt_time() - t0) / reps * 1e6);
            pt_sampler_free(s);
        }
    }
    pt_shutdown(ctx);
    return tu_summary();
}
