/* bench_spec.c - speculative decoding (see engine): tokens/s with drafting over without, JSON lines.

   bench_spec lookup [model [format [tokens [reps]]]]
     Prompt lookup (8 tokens a step) on a GPT-2 shape (model: gpt2-85m-bytes, the default, or gpt2-124m;
     random weights; format f32, bf16, q8_0 (default) or q4_0), batch 1, through pt_generate. Two inputs:
       quote  a summarisation-shaped one, whose answer quotes the prompt: the model's own greedy output
              fed back (a 32-token seed, its 224-token greedy continuation, the seed again); the answer
              is its greedy continuation (tokens new ones, default 128);
       novel  nothing to look up: 256 random tokens, the answer sampled at temperature 1 (seed 7),
              so drafts are almost never accepted and the off-switch has to turn them off.
   bench_spec draft [model [format [tokens [reps]]]]
     A draft model: the GPT-2 124M shape (the default model), and as its draft the same model cut to its
     first 2 layers (the embeddings and the head shared; a 2-layer draft of the 124M shape), 4 tokens a
     step, on the quote input.
   model tiny (4 layers, width 64, byte vocabulary) runs in a second: tests/bench_test.sh checks the
   lines' shape on it.
   Each case runs without and with drafting, interleaved, reps times (default 3); the medians of each.
   tokens_per_s: the tokens after the first over the decode iterations' seconds (pt_gen_stats.decode_s);
   acceptance: drafted tokens accepted / drafted; drafted: tokens drafted a run (the off-switch keeps it low
   where drafts do not pay); identical: 1 when both runs gave the same tokens (they
   must: speculative decoding changes no bit). One line a case:
   {"bench":"spec","case":"quote"|"novel","method":"lookup"|"draft","model":...,"format":...,"tokens":N,
    "speedup":x,"acceptance":a,"tokens_per_s":t,"base_tokens_per_s":b,"drafted":d,"identical":1}
   Build: cc -O3 -march=native -fopenmp -I. bench/bench_spec.c -o build/bench_spec -lm */
#define PTRAIN_IMPLEMENTATION
#include "ptrain.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXR 15

static int cmp_d(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* one generation of n tokens from prompt; its tokens/s after the first, its drafted and accepted counts */
static int gen(pt_infer *inf, const int32_t *prompt, int np, int n, float temp, int lookup, pt_infer *draft, int32_t *out, double *tps, int64_t *drafted,
               int64_t *accepted) {
    pt_gen_request q;
    pt_gen_result r;
    pt_gen_opts o;
    pt_gen_stats s;
    memset(&q, 0, sizeof q), memset(&r, 0, sizeof r), memset(&o, 0, sizeof o);
    q.prompt = prompt, q.nprompt = np, q.max_tokens = n, q.sample.temperature = temp, q.sample.seed = 7;
    r.tokens = out;
    o.lookup = lookup, o.draft = draft, o.draft_tokens = 4;
    if (pt_generate(inf, 1, &q, &r, &o, &s) != PT_OK) return 0;
    *tps = r.ntokens > 1 && s.decode_s > 0 ? (double)(r.ntokens - 1) / s.decode_s : 0;
    *drafted = s.drafted, *accepted = s.accepted;
    return r.ntokens == n;
}

/* a case: reps interleaved pairs (without, with), one line */
static int run_case(pt_infer *inf, const char *cs, const char *method, const char *model, const char *fmt, const int32_t *prompt, int np, int n, float temp,
                    int lookup, pt_infer *draft, int reps) {
    double base[MAXR], spec[MAXR], b, t;
    int64_t dr = 0, ac = 0, d1, a1;
    int32_t *t0 = (int32_t *)malloc(sizeof(int32_t) * (size_t)n), *t1 = (int32_t *)malloc(sizeof(int32_t) * (size_t)n);
    int i, same = 1;
    for (i = 0; i < reps; i++) {
        if (!gen(inf, prompt, np, n, temp, 0, NULL, t0, &base[i], &d1, &a1) || !gen(inf, prompt, np, n, temp, lookup, draft, t1, &spec[i], &d1, &a1)) {
            fprintf(stderr, "bench_spec: %s %s: %s\n", cs, method, pt_error(pt__infer_dims_of(inf).ctx));
            free(t0), free(t1);
            return 0;
        }
        same &= !memcmp(t0, t1, sizeof(int32_t) * (size_t)n);
        dr += d1, ac += a1;
    }
    b = median(base, reps), t = median(spec, reps);
    printf("{\"bench\":\"spec\",\"case\":\"%s\",\"method\":\"%s\",\"model\":\"%s\",\"format\":\"%s\",\"tokens\":%d,\"speedup\":%.3f,\"acceptance\":%.3f,"
           "\"tokens_per_s\":%.2f,\"base_tokens_per_s\":%.2f,\"drafted\":%.1f,\"identical\":%d}\n",
           cs, method, model, fmt, n, b > 0 ? t / b : 0.0, dr ? (double)ac / (double)dr : 0.0, t, b, (double)dr / reps, same);
    fflush(stdout);
    free(t0), free(t1);
    return same;
}

int main(int argc, char **argv) {
    const char *what = argc > 1 ? argv[1] : "lookup";
    const int draft_mode = !strcmp(what, "draft");
    const char *model = argc > 2 ? argv[2] : draft_mode ? "gpt2-124m" : "gpt2-85m-bytes";
    const char *fmt = argc > 3 ? argv[3] : "q8_0";
    const int n = argc > 4 ? atoi(argv[4]) : 128, reps = argc > 5 ? atoi(argv[5]) : 3;
    const int tiny = !strcmp(model, "tiny");
    const int t = pt_wtype_parse(fmt);
    pt_gpt_config cfg;
    pt_desc d;
    pt_ctx *ctx;
    pt_gpt *m;
    pt_gpt_weights *w, dw;
    pt_infer_desc idd;
    pt_infer *inf, *dinf = NULL;
    int32_t prompt[600], gen0[256];
    uint64_t rng = 12345;
    int i, ok = 1;
    double tps;
    int64_t x, y;
    if ((!draft_mode && strcmp(what, "lookup")) || t < 0 || t == PT_W_F16 || n < 2 || n > 256 || reps < 1 || reps > MAXR ||
        (strcmp(model, "gpt2-85m-bytes") && strcmp(model, "gpt2-124m") && !tiny)) {
        fprintf(stderr, "bench_spec: usage: bench_spec lookup|draft [gpt2-85m-bytes|gpt2-124m|tiny [f32|bf16|q8_0|q4_0 [tokens 2..256 [reps 1..%d]]]]; "
                        "found %s %s %s %d %d\n", MAXR, what, model, fmt, n, reps);
        return 2;
    }
    memset(&cfg, 0, sizeof cfg);
    cfg.layers = tiny ? 4 : 12, cfg.width = tiny ? 64 : 768, cfg.heads = tiny ? 4 : 12, cfg.max_seq = 1024;
    cfg.vocab = strcmp(model, "gpt2-124m") ? 256 : 50257;
    memset(&d, 0, sizeof d);
    d.seed = 1;
    memset(&idd, 0, sizeof idd);
    idd.max_seqs = 1;
    if (!(ctx = pt_init(&d)) || !(m = pt_gpt_new(ctx, &cfg)) || !(w = pt_gpt_weights_from(m, (pt_wtype)t)) || !(inf = pt_infer_new(ctx, w, &idd))) {
        fprintf(stderr, "bench_spec: %s\n", ctx ? pt_error(ctx) : "pt_init failed");
        return 1;
    }
    for (i = 0; i < 256; i++) { /* random tokens: the seed (its first 32) and the novel input */
        rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
        prompt[i] = (int32_t)((rng >> 33) % (uint64_t)(cfg.vocab < 256 ? cfg.vocab : 256));
    }
    /* quote: the seed, its greedy continuation, the seed again */
    if (!gen(inf, prompt, 32, 224, 0.0f, 0, NULL, gen0, &tps, &x, &y)) {
        fprintf(stderr, "bench_spec: the quote input: %s\n", pt_error(ctx));
        return 1;
    }
    memmove(prompt + 256, prompt, 32 * sizeof(int32_t));
    memcpy(prompt + 256 + 32, gen0, 224 * sizeof(int32_t));
    memcpy(prompt + 256 + 256, prompt, 32 * sizeof(int32_t)); /* prompt[256 .. 544): 288 tokens */
    if (draft_mode) { /* the model's first 2 layers, its embeddings and head: a 2-layer draft of the 124M shape */
        pt_infer_desc dd = idd;
        dw = *w, dw.cfg.layers = 2;
        if (!(dinf = pt_infer_new(ctx, &dw, &dd))) {
            fprintf(stderr, "bench_spec: the draft model: %s\n", pt_error(ctx));
            return 1;
        }
        ok &= run_case(inf, "quote", "draft", model, fmt, prompt + 256, 288, n, 0.0f, 0, dinf, reps);
    } else {
        ok &= run_case(inf, "quote", "lookup", model, fmt, prompt + 256, 288, n, 0.0f, 8, NULL, reps);
        ok &= run_case(inf, "novel", "lookup", model, fmt, prompt, 256, n, 1.0f, 8, NULL, reps);
    }
    pt_infer_free(dinf);
    pt_infer_free(inf);
    pt_gpt_weights_free(w);
    pt_gpt_free(m);
    pt_shutdown(ctx);
    return ok ? 0 : 1;
}
