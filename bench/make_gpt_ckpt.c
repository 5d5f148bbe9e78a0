/* make_gpt_ckpt.c - a checkpoint of a GPT of any size with its deterministic initialization (no
   training, no optimizer state), for the benchmarks that serve a large model (bench/serve_large.sh).
   Build: cc -O2 -fopenmp -march=native -I. bench/make_gpt_ckpt.c -o build/make_gpt_ckpt -lm
   Usage: make_gpt_ckpt OUTDIR LAYERS WIDTH HEADS VOCAB MAX_SEQ [TOKENIZER.bin]
   e.g. gpt2-large: make_gpt_ckpt build/gpt2-large 36 1280 20 50257 1024 build/bench_bpe_50001.bin
   Prints one JSON line: the parameters and the bytes of the f32 model, the seconds taken. */
#define PTRAIN_IMPLEMENTATION
#include "ptrain.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    pt_desc d;
    pt_gpt_config c;
    pt_ckpt_opts o;
    pt_ctx *ctx;
    pt_gpt *m;
    pt_tokenizer *tok = NULL;
    pt_gpt_weights *w;
    double t0 = pt_time();
    if (argc < 7) {
        fprintf(stderr, "usage: make_gpt_ckpt OUTDIR LAYERS WIDTH HEADS VOCAB MAX_SEQ [TOKENIZER.bin]\n");
        return 2;
    }
    memset(&d, 0, sizeof d);
    d.seed = 1;
    if (!(ctx = pt_init(&d))) return 1;
    memset(&c, 0, sizeof c);
    c.layers = atoi(argv[2]), c.width = atoi(argv[3]), c.heads = atoi(argv[4]), c.vocab = atoi(argv[5]), c.max_seq = atoi(argv[6]);
    if (argc > 7 && !(tok = pt_tokenizer_load(ctx, argv[7]))) {
        fprintf(stderr, "make_gpt_ckpt: %s: %s\n", argv[7], pt_error(ctx));
        return 1;
    }
    memset(&o, 0, sizeof o);
    o.model = &c, o.tokenizer = tok;
    if (!(m = pt_gpt_new(ctx, &c)) || !(w = pt_gpt_weights_from(m, PT_W_F32)) || pt_ckpt_save(ctx, NULL, argv[1], 0, &o) != PT_OK) {
        fprintf(stderr, "make_gpt_ckpt: %s\n", pt_error(ctx));
        return 1;
    }
    printf("{\"bench\":\"make_gpt_ckpt\",\"dir\":\"%s\",\"layers\":%d,\"width\":%d,\"heads\":%d,\"vocab\":%d,\"params\":%lld,\"weights_bytes\":%lld,\"seconds\":%.1f}\n",
           argv[1], c.layers, c.width, c.heads, c.vocab, (long long)(pt_gpt_weights_bytes(w) / 4), (long long)pt_gpt_weights_bytes(w), pt_time() - t0);
    pt_gpt_weights_free(w);
    pt_gpt_free(m);
    pt_tokenizer_free(tok);
    pt_shutdown(ctx);
    return 0;
}
