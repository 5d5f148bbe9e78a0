/* bench_serve_engine.c - the serve bench's model and its engine-only baseline (bench/bench_serve.sh).

   bench_serve_engine export FILE
     writes the bench's model as a GGUF file in q8_0 (and FILE.ckpt, the checkpoint it came from):
     GPT-2 124M's shape (12 layers, width 768, 12 heads, context 1024) with a byte vocabulary (256,
     85M parameters: tools/ptserve has no tokenizer to give GPT-2's 50,257 ids text), random weights
     (pt_gpt_new's deterministic init, as bench/bench_decode.c makes them; speed does not depend on them)
   bench_serve_engine run FILE REQUESTS PROMPT_WORDS OUTPUT_TOKENS MAX_RUNNING THREADS [SEED]
     the engine driven directly on the same file (pt_gpt_weights_open, no HTTP): the requests
     tools/ptload sends with --prompt-len PROMPT_WORDS --output-len OUTPUT_TOKENS --seed SEED (the same prompt text,
     temperature 0.8, seed = the request's index), all submitted at once, max_running, a token budget of
     256 and a KV cache of MAX_RUNNING x the context, as tools/ptserve sets them; after one warm-up request,
     pt_engine_step until all are done. Prints {"bench":"serve_engine",...,"tokens_per_s":...}: generated tokens over the wall time.
   Build: cc -O2 -fopenmp -march=native -I. bench/bench_serve_engine.c -o build/bench_serve_engine -lm */
#define PTRAIN_IMPLEMENTATION
#include "ptrain.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const words[] = {"the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "a", "cat", "sat", "on", "mat", "and", "ran"};

static int export_model(const char *out) {
    pt_gpt_config cfg;
    pt_desc d;
    pt_ctx *ctx;
    pt_gpt *m;
    pt_gguf_export_opts eo;
    pt_ckpt_opts co;
    char err[512], dir[1100], step[1200];
    memset(&cfg, 0, sizeof cfg);
    cfg.layers = 12, cfg.width = 768, cfg.heads = 12, cfg.max_seq = 1024, cfg.vocab = 256;
    memset(&d, 0, sizeof d);
    d.seed = 1;
    if (!(ctx = pt_init(&d)) || !(m = pt_gpt_new(ctx, &cfg))) {
        fprintf(stderr, "bench_serve_engine: %s\n", ctx ? pt_error(ctx) : "pt_init failed");
        return 1;
    }
    memset(&eo, 0, sizeof eo);
    memset(&co, 0, sizeof co);
    co.model = &cfg;
    eo.type = PT_W_Q8_0;
    snprintf(dir, sizeof dir, "%s.ckpt", out);
    err[0] = 0;
    if (pt_ckpt_save(ctx, NULL, dir, 0, &co) != PT_OK || pt_ckpt_step_dir(dir, step, sizeof step) != PT_OK ||
        pt_gguf_export(step, out, &eo, err, sizeof err) != PT_OK) {
        fprintf(stderr, "bench_serve_engine: export %s: %s\n", out, ctx->status ? pt_error(ctx) : err);
        return 1;
    }
    pt_gpt_free(m);
    pt_shutdown(ctx);
    return 0;
}

int main(int argc, char **argv) {
    int nreq, plen, olen, maxr, threads, i, k, rc;
    unsigned seed;
    pt_desc d;
    pt_ctx *ctx;
    pt_gpt_weights *w;
    pt_tokenizer *tok = NULL;
    pt_infer_desc idesc;
    pt_engine_desc ed;
    pt_infer *inf;
    pt_engine *e;
    int32_t ids[4096];
    int64_t gen = 0;
    double t0, t1;
    if (argc == 3 && !strcmp(argv[1], "export")) return export_model(argv[2]);
    if ((argc != 8 && argc != 9) || strcmp(argv[1], "run")) {
        fprintf(stderr, "usage: bench_serve_engine export FILE | run FILE REQUESTS PROMPT_WORDS OUTPUT_TOKENS MAX_RUNNING THREADS [SEED]\n");
        return 2;
    }
    nreq = atoi(argv[3]), plen = atoi(argv[4]), olen = atoi(argv[5]), maxr = atoi(argv[6]), threads = atoi(argv[7]);
    seed = argc == 9 ? (unsigned)strtoul(argv[8], NULL, 10) : 1;
    if (nreq < 1 || plen < 1 || plen > 500 || olen < 1 || maxr < 1 || threads < 1) {
        fprintf(stderr, "bench_serve_engine: bad arguments\n");
        return 2;
    }
    memset(&d, 0, sizeof d);
    if (!(ctx = pt_init(&d))) return 1;
    pt_set_threads(ctx, threads);
    if (!(w = pt_gpt_weights_open(ctx, argv[2], -1, &tok))) {
        fprintf(stderr, "bench_serve_engine: %s\n", pt_error(ctx));
        return 1;
    }
    memset(&idesc, 0, sizeof idesc);
    idesc.max_seqs = maxr, idesc.block_tokens = 16;
    memset(&ed, 0, sizeof ed);
    ed.max_running = maxr, ed.token_budget = 256, ed.wall_clock = 1;
    if (!(inf = pt_infer_new(ctx, w, &idesc)) || !(e = pt_engine_new(inf, &ed))) {
        fprintf(stderr, "bench_serve_engine: %s\n", pt_error(ctx));
        return 1;
    }
    { /* a warm-up request first (the weights' pages and the threads, as in a server that has run) */
        pt_engine_request r;
        memset(&r, 0, sizeof r);
        ids[0] = 't', ids[1] = 'h', ids[2] = 'e';
        r.prompt = ids, r.nprompt = 3, r.max_tokens = 4;
        if (pt_engine_submit(e, &r) < 0) return 1;
        while ((rc = pt_engine_step(e)) > 0) {}
    }
    t0 = pt_time();
    for (i = 0; i < nreq; i++) { /* ptload's prompt of request i, as bytes */
        pt_engine_request r;
        int32_t n = 0;
        char num[16], *c;
        snprintf(num, sizeof num, "%u", seed * 100003u + (unsigned)i);
        for (c = num; *c; c++) ids[n++] = (unsigned char)*c;
        for (k = 0; k < plen; k++) {
            const char *s = words[(i + k * 7) % 15];
            ids[n++] = ' ';
            while (*s) ids[n++] = (unsigned char)*s++;
        }
        memset(&r, 0, sizeof r);
        r.prompt = ids, r.nprompt = n, r.max_tokens = olen;
        r.sample.temperature = 0.8f, r.sample.seed = (uint64_t)i;
        if (pt_engine_submit(e, &r) < 0) return 1;
    }
    while ((rc = pt_engine_step(e)) > 0) {}
    t1 = pt_time();
    if (rc < 0) {
        fprintf(stderr, "bench_serve_engine: %s\n", pt_error(ctx));
        return 1;
    }
    for (i = 0; i < nreq; i++) {
        pt_engine_result res;
        if (pt_engine_poll(e, i + 1, &res, NULL, 0) != PT_REQ_DONE) {
            fprintf(stderr, "bench_serve_engine: request %d: %s\n", i, res.error);
            return 1;
        }
        gen += res.ntokens;
    }
    printf("{\"bench\":\"serve_engine\",\"requests\":%d,\"prompt_words\":%d,\"output_tokens\":%d,\"max_running\":%d,\"threads\":%d,\"generated\":%lld,"
           "\"wall_s\":%.3f,\"tokens_per_s\":%.2f}\n",
           nreq, plen, olen, maxr, threads, (long long)gen, t1 - t0, (double)gen / (t1 - t0));
    pt_engine_free(e);
    pt_infer_free(inf);
    pt_tokenizer_free(tok);
    pt_gpt_weights_free(w);
    pt_shutdown(ctx);
    return 0;
}
