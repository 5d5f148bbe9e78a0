/* 11_inference.c - a trained GPT answering fast: KV cache, quantized weights, and what they cost.

   Build: cc -O2 -fopenmp -march=native -I. examples/11_inference.c -o build/11_inference -lm
   Run: ./build/11_inference CKPT [--prompt TEXT] [--max-tokens N] [--val FILE] [--eval-tokens N]
        CKPT is a checkpoint pttrain wrote (e.g. build/demo_ckpt after `make demo`, or a --ckpt-dir of
        yours); the validation text defaults to data/fortunes/val.txt (what make demo holds out).

   What it teaches: how a model that was trained answers. Training runs the whole sequence through
   the model at once; generating one token at a time that way would redo all the work for every
   token. Inference keeps each layer's keys and values of the tokens seen so far (the KV cache, in
   fixed blocks of 16 tokens from one pool, reached through a block table per sequence), feeds the
   prompt in one step (prefill), then one token per step (decode), each step reading the cache. A
   decode step reads every weight once to produce one token, so its speed is the bytes of the
   weights over the memory bandwidth: storing them in fewer bits (bf16: 16, Q8_0: 8.5, Q4_0: 4.5 per
   weight, in ggml's 32-weight blocks with an fp16 scale) makes it faster, at a cost in quality that
   the table at the end measures: the perplexity of the validation text (exp of the mean negative
   log-likelihood per token, each token predicted from up to a whole context of the tokens before
   it; also in bits per byte, comparable across tokenizers), the bytes of the weights, and the decode
   speed at batch 1.

   Steps: 1. the checkpoint opened as f32 inference weights with its tokenizer (the checkpoint carries
   it: pt_gpt_weights_open); 2. a prompt continued with the cache, streamed as it is made, greedy then
   sampled (temperature 0.8, top-p 0.95); 3. the table: the same weights in f32, bf16, q8_0 and q4_0. */
#define PTRAIN_IMPLEMENTATION
#include "ptrain.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int print_token(void *user, int32_t req, int32_t token, float logprob, const char *text, size_t len) {
    (void)user, (void)req, (void)token, (void)logprob;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    return 0;
}

/* the weights' element count: every matrix and vector decode reads (a tied head counted once) */
static double weight_count(const pt_gpt_weights *w) {
    double C = w->cfg.width, n = (double)w->wte.rows * C + (double)w->cfg.max_seq * C + 2 * C;
    int l;
    if (w->head.data != w->wte.data) n += (double)w->head.rows * C;
    for (l = 0; l < w->cfg.layers; l++) n += 12 * C * C + 13 * C; /* qkv, proj, fc, fproj; their biases and the two norms */
    return n;
}

/* generates up to max_tokens from prompt with sampling params sp; prints the text when show */
static pt_status generate(pt_infer *inf, const pt_tokenizer *tok, const int32_t *prompt, int32_t n, int32_t max_tokens,
                          const pt_sample_params *sp, int show, pt_gen_stats *st) {
    pt_gen_request rq;
    pt_gen_result rs;
    pt_gen_opts go;
    memset(&rq, 0, sizeof rq);
    memset(&rs, 0, sizeof rs);
    memset(&go, 0, sizeof go);
    rq.prompt = prompt, rq.nprompt = n, rq.max_tokens = max_tokens, rq.sample = *sp;
    go.tokenizer = tok, go.on_token = show ? print_token : NULL;
    return pt_generate(inf, 1, &rq, &rs, &go, st);
}

int main(int argc, char **argv) {
    const char *ckpt = NULL, *prompt = "Q: What is the meaning of life?\nA:", *val = "data/fortunes/val.txt";
    const char *formats[4] = {"f32", "bf16", "q8_0", "q4_0"};
    long max_tokens = 120, eval_tokens = 32768;
    int i, f;
    pt_desc d;
    pt_ctx *ctx;
    pt_tokenizer *tok = NULL;
    pt_gpt_weights *w;
    pt_infer *inf;
    pt_sample_params sp;
    pt_gen_stats st;
    int32_t *ids, nids, *vt;
    int64_t nv, vbytes;
    double ppl32 = 0;
    int32_t ctxlen;
    char *text;
    FILE *fp;

    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--prompt") && i + 1 < argc) prompt = argv[++i];
        else if (!strcmp(argv[i], "--max-tokens") && i + 1 < argc) max_tokens = atol(argv[++i]);
        else if (!strcmp(argv[i], "--val") && i + 1 < argc) val = argv[++i];
        else if (!strcmp(argv[i], "--eval-tokens") && i + 1 < argc) eval_tokens = atol(argv[++i]);
        else if (argv[i][0] != '-' && !ckpt) ckpt = argv[i];
        else {
            fprintf(stderr, "11_inference: unknown or incomplete flag '%s'\n"
                            "usage: 11_inference CKPT [--prompt TEXT] [--max-tokens N] [--val FILE] [--eval-tokens N]\n", argv[i]);
            return 2;
        }
    }
    if (!ckpt || max_tokens < 1 || eval_tokens < 2) {
        fprintf(stderr, "usage: 11_inference CKPT [--prompt TEXT] [--max-tokens N >= 1] [--val FILE] [--eval-tokens N >= 2]\n"
                        "  CKPT: a checkpoint directory pttrain wrote (make demo: build/demo_ckpt)\n");
        return 2;
    }

    /* 1. The checkpoint as f32 inference weights: the matrices point into the model's parameters;
          its tokenizer (BPE when the training data had one) comes with it. */
    memset(&d, 0, sizeof d);
    if (!(ctx = pt_init(&d))) return 1;
    if (!(w = pt_gpt_weights_open(ctx, ckpt, PT_W_F32, &tok))) {
        fprintf(stderr, "11_inference: %s\n", pt_error(ctx));
        return 1;
    }
    printf("model: %d layers, width %d, %d heads, vocabulary %d (%s), context %d; %.1f MB of weights in f32\n", (int)w->cfg.layers,
           (int)w->cfg.width, (int)w->cfg.heads, (int)w->cfg.vocab, tok ? "BPE" : "bytes", (int)w->cfg.max_seq,
           (double)pt_gpt_weights_bytes(w) / 1e6);

    /* 2. The prompt continued: one prefill step, then one token per decode step. */
    ids = (int32_t *)malloc(sizeof(int32_t) * (strlen(prompt) + 1));
    if (!ids) return 1;
    if (tok) nids = (int32_t)pt_tokenizer_encode(tok, prompt, (int64_t)strlen(prompt), ids);
    else for (nids = 0; nids < (int32_t)strlen(prompt); nids++) ids[nids] = (unsigned char)prompt[nids];
    if (nids < 1 || nids > w->cfg.max_seq) {
        fprintf(stderr, "11_inference: the prompt is %d tokens; it must be 1 to %d (the context)\n", (int)nids, (int)w->cfg.max_seq);
        return 2;
    }
    ctxlen = w->cfg.max_seq;
    if (!(inf = pt_infer_new(ctx, w, NULL))) {
        fprintf(stderr, "11_inference: %s\n", pt_error(ctx));
        return 1;
    }
    memset(&sp, 0, sizeof sp);
    printf("\n--- greedy (temperature 0):\n%s", prompt);
    if (generate(inf, tok, ids, nids, (int32_t)max_tokens, &sp, 1, &st) != PT_OK) {
        fprintf(stderr, "\n11_inference: %s\n", pt_error(ctx));
        return 1;
    }
    sp.temperature = 0.8f, sp.top_p = 0.95f, sp.seed = 1;
    printf("\n--- sampled (temperature 0.8, top-p 0.95, seed 1):\n%s", prompt);
    if (generate(inf, tok, ids, nids, (int32_t)max_tokens, &sp, 1, &st) != PT_OK) {
        fprintf(stderr, "\n11_inference: %s\n", pt_error(ctx));
        return 1;
    }
    printf("\n[prefill %lld tokens at %.0f tokens/s, decode %lld tokens at %.0f tokens/s]\n", (long long)st.prefill_tokens,
           st.prefill_s > 0 ? st.prefill_tokens / st.prefill_s : 0.0, (long long)st.decode_tokens,
           st.decode_s > 0 ? st.decode_tokens / st.decode_s : 0.0);
    pt_infer_free(inf);
    pt_gpt_weights_free(w);

    /* 3. The quality table: the validation text's tokens, and for each format the weights made from
          the f32 ones at load, the perplexity over those tokens and the decode speed. */
    if (!(fp = fopen(val, "rb"))) {
        fprintf(stderr, "11_inference: cannot open the validation text %s (make demo, or tools/prepare_text.sh, writes it)\n", val);
        return 1;
    }
    fseek(fp, 0, SEEK_END);
    vbytes = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    text = (char *)malloc((size_t)vbytes + 1);
    vt = (int32_t *)malloc(sizeof(int32_t) * ((size_t)vbytes + 1));
    if (!text || !vt || fread(text, 1, (size_t)vbytes, fp) != (size_t)vbytes) return 1;
    fclose(fp);
    if (tok) nv = pt_tokenizer_encode(tok, text, vbytes, vt);
    else for (nv = 0; nv < vbytes; nv++) vt[nv] = (unsigned char)text[nv];
    if (nv > eval_tokens) {
        vbytes = (int64_t)((double)vbytes * (double)eval_tokens / (double)nv); /* bytes of the tokens kept (about) */
        nv = eval_tokens;
    }
    printf("\nquality on %s: %lld tokens (%lld bytes), windows of %d tokens sliding by half\n", val, (long long)nv, (long long)vbytes,
           (int)ctxlen);
    printf("| format | weight MB | bits/weight | perplexity | vs f32 | bits/byte | decode tokens/s |\n");
    printf("|---|---|---|---|---|---|---|\n");
    for (f = 0; f < 4; f++) {
        double nll = 0, ppl, bpw;
        int64_t count = 0;
        int32_t z = ids[0];
        if (!(w = pt_gpt_weights_open(ctx, ckpt, (pt_wtype)pt_wtype_parse(formats[f]), NULL)) || !(inf = pt_infer_new(ctx, w, NULL)) ||
            pt_infer_nll(inf, vt, nv, &nll, &count) != PT_OK) {
            fprintf(stderr, "11_inference: %s: %s\n", formats[f], pt_error(ctx));
            return 1;
        }
        memset(&sp, 0, sizeof sp);
        generate(inf, tok, &z, 1, 8, &sp, 0, &st); /* warm-up */
        generate(inf, tok, &z, 1, 64, &sp, 0, &st);
        ppl = exp(nll / (double)count);
        if (f == 0) ppl32 = ppl;
        bpw = 8.0 * (double)pt_gpt_weights_bytes(w) / weight_count(w);
        printf("| %s | %.2f | %.2f | %.4f | %+.2f%% | %.4f | %.0f |\n", formats[f], (double)pt_gpt_weights_bytes(w) / 1e6, bpw, ppl,
               100.0 * (ppl / ppl32 - 1), nll / log(2.0) / (double)vbytes * ((double)nv / (double)count),
               st.decode_s > 0 ? st.decode_tokens / st.decode_s : 0.0);
        fflush(stdout);
        pt_infer_free(inf);
        pt_gpt_weights_free(w);
    }
    free(text);
    free(vt);
    free(ids);
    pt_tokenizer_free(tok);
    pt_shutdown(ctx);
    return 0;
}
