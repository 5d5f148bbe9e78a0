/* ptgen.c - generate text from a trained GPT with ptrain.h's KV-cached inference.

   Build: cc -O2 -fopenmp -march=native -I. tools/ptgen.c -o build/ptgen -lm
   (make tools builds it too)

   ptgen MODEL [flags]
     MODEL                a checkpoint (a directory pttrain's --ckpt-dir wrote, or one step_* in it),
                          a safetensors file (ptckpt export) or a GGUF file (ptckpt export --format
                          gguf, or any gpt2 GGUF such as llama.cpp's tools write)
     --prompt TEXT        the prompt, encoded with the model's tokenizer (the checkpoint's or the GGUF
                          file's; bytes for a model of at most 256 tokens that has none); default: a newline
     --prompt-ids I,J,..  the prompt as token ids (for a model whose tokenizer ptrain cannot
                          reproduce, or to compare with another program on ids). Without a usable
                          tokenizer and with more than 256 tokens the run is on ids only: no text is
                          printed, the `ids:` line is (a note on stderr says why; --stop is refused)
     --max-tokens N       new tokens at most (128)
     --temperature X      sampling temperature, 0 = greedy (0.8)
     --top-k K            only the K most likely tokens (0 = all)
     --top-p P            the fewest most likely tokens whose probability reaches P (1 = all)
     --min-p P            drop tokens below P times the most likely one's probability (0 = off)
     --repeat-penalty X   llama.cpp's penalty over the last 64 tokens (1 = off)
     --seed S             the sampler's seed (1); --n N generates N sequences in one batch, with
                          seeds S, S+1, ... (1)
     --stop STRING        stop at this text (not shown; repeatable, up to 8)
     --stop-id ID         stop at this token id (repeatable, up to 8)
     --quant f32|bf16|q8_0|q4_0   the weights' format for decode (default: as stored: f32 for a
                          checkpoint or safetensors, the file's own types for GGUF)
     --threads N          CPU threads (default: the CPUs available)
     --tokenizer PATH     a tokenizer.bin (or a directory holding one) instead of the model's
     --bytes              the ids are the bytes (no tokenizer, the model's not read): only for a
                          vocabulary of at most 256 tokens (else refused: ids 256 and up have no text)
   A model whose file carries a tokenizer that is refused (a GGUF vocabulary ptrain cannot reproduce, a
   token past PT_TOK_MAX_TOKEN_BYTES, a bad tokenizer.bin in a checkpoint) stops ptgen with the reason
   (exit 1) unless --tokenizer, --bytes or --prompt-ids says what to use instead; so does a model of
   more than 256 tokens without any tokenizer (its ids are no bytes).
     --print-ids          after the text, a line `ids: a,b,c` of the generated ids
     --logprobs           after the text, a line `logprobs: x,y,z`
   The text streams to stdout as it is made (bytes that may begin a stop string are held until they
   resolve). The last line, on stderr, gives the weights' format and bytes, the prefill and the decode
   tokens/s: `ptgen: q8_0 weights 91.2 MB, prefill 12 tokens 850.1 tokens/s, decode 128 tokens 301.3 tokens/s`.
   Exit status: 0 done, 1 a bad model file or a failed generation, 2 bad usage. */
#define PTRAIN_IMPLEMENTATION
#include "ptrain.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXSTOP 8

static int usage(const char *msg, const char *what) {
    if (msg) fprintf(stderr, "ptgen: %s%s%s\n", msg, what ? " " : "", what ? what : "");
    fprintf(stderr, "usage: ptgen MODEL [--prompt TEXT | --prompt-ids I,J,..] [--max-tokens N] [--temperature X] [--top-k K]\n"
                    "             [--top-p P] [--min-p P] [--repeat-penalty X] [--seed S] [--n N] [--stop STRING] [--stop-id ID]\n"
                    "             [--quant f32|bf16|q8_0|q4_0] [--threads N] [--tokenizer PATH | --bytes] [--print-ids] [--logprobs]\n"
                    "MODEL: a checkpoint directory, a .safetensors file or a .gguf file (see the top of tools/ptgen.c)\n");
    return 2;
}

/* a whole number in [lo, hi] from flag's value, else -1 after a message */
static int num_flag(const char *flag, const char *v, long lo, long hi, long *out) {
    char *e;
    long x;
    errno = 0;
    x = strtol(v, &e, 10);
    if (e == v || *e || errno || x < lo || x > hi) {
        fprintf(stderr, "ptgen: %s expects a whole number in [%ld, %ld], found '%s'\n", flag, lo, hi, v);
        return -1;
    }
    *out = x;
    return 0;
}
static int real_flag(const char *flag, const char *v, double lo, double hi, double *out) {
    char *e;
    double x = strtod(v, &e);
    if (e == v || *e || !(x >= lo && x <= hi)) {
        fprintf(stderr, "ptgen: %s expects a number in [%g, %g], found '%s'\n", flag, lo, hi, v);
        return -1;
    }
    *out = x;
    return 0;
}

typedef struct stream {
    int n; /* sequences: with more than one, each is printed whole at its end */
} stream;

static int on_token(void *user, int32_t req, int32_t token, float logprob, const char *text, size_t len) {
    stream *s = (stream *)user;
    (void)req, (void)token, (void)logprob;
    if (s->n == 1 && len) {
        fwrite(text, 1, len, stdout);
        fflush(stdout);
    }
    return 0;
}

int main(int argc, char **argv) {
    const char *model = NULL, *prompt = "\n", *prompt_ids = NULL, *tok_path = NULL, *stops[MAXSTOP];
    int32_t stop_ids[MAXSTOP], nstop = 0, nstop_ids = 0, *ids = NULL, nids = 0;
    long max_tokens = 128, top_k = 0, seed = 1, n = 1, threads = 0, v;
    double temperature = 0.8, top_p = 1, min_p = 0, repeat_penalty = 1;
    int quant = -1, print_ids = 0, print_lp = 0, bytes = 0, ids_only = 0, i, rc = 0;
    pt_desc d;
    pt_ctx *ctx;
    pt_tokenizer *tok = NULL;
    pt_gpt_weights *w;
    pt_infer *inf;
    pt_infer_desc idesc;
    pt_gen_request *req;
    pt_gen_result *res;
    pt_gen_opts go;
    pt_gen_stats st;
    stream s;

    for (i = 1; i < argc; i++) {
        static const char *const with_value[] = {"--prompt", "--prompt-ids", "--tokenizer", "--max-tokens", "--top-k", "--seed", "--n",
                                                 "--threads", "--temperature", "--top-p", "--min-p", "--repeat-penalty", "--stop",
                                                 "--stop-id", "--quant"};
        const char *f = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        int takes = 0, k;
        for (k = 0; k < (int)(sizeof with_value / sizeof *with_value); k++) takes |= !strcmp(f, with_value[k]);
        if (takes && !val) return usage("flag needs a value:", f);
        if (!strcmp(f, "--help") || !strcmp(f, "-h")) return usage(NULL, NULL), 0;
        else if (f[0] != '-') {
            if (model) return usage("more than one MODEL:", f);
            model = f;
            continue;
        } else if (!strcmp(f, "--prompt")) prompt = val;
        else if (!strcmp(f, "--prompt-ids")) prompt_ids = val;
        else if (!strcmp(f, "--tokenizer")) tok_path = val;
        else if (!strcmp(f, "--max-tokens")) { if (num_flag(f, val, 0, 1L << 20, &max_tokens)) return 2; }
        else if (!strcmp(f, "--top-k")) { if (num_flag(f, val, 0, 1L << 30, &top_k)) return 2; }
        else if (!strcmp(f, "--seed")) { if (num_flag(f, val, 0, 0x7fffffffL, &seed)) return 2; }
        else if (!strcmp(f, "--n")) { if (num_flag(f, val, 1, 256, &n)) return 2; }
        else if (!strcmp(f, "--threads")) { if (num_flag(f, val, 1, 1024, &threads)) return 2; }
        else if (!strcmp(f, "--temperature")) { if (real_flag(f, val, 0, 100, &temperature)) return 2; }
        else if (!strcmp(f, "--top-p")) { if (real_flag(f, val, 0, 1, &top_p)) return 2; }
        else if (!strcmp(f, "--min-p")) { if (real_flag(f, val, 0, 1, &min_p)) return 2; }
        else if (!strcmp(f, "--repeat-penalty")) { if (real_flag(f, val, 0, 100, &repeat_penalty)) return 2; }
        else if (!strcmp(f, "--stop")) {
            if (nstop == MAXSTOP || !*val) return usage(nstop == MAXSTOP ? "at most 8 --stop strings" : "--stop expects a non-empty string", NULL);
            stops[nstop++] = val;
        } else if (!strcmp(f, "--stop-id")) {
            if (nstop_ids == MAXSTOP) return usage("at most 8 --stop-id ids", NULL);
            if (num_flag(f, val, 0, 0x7fffffffL, &v)) return 2;
            stop_ids[nstop_ids++] = (int32_t)v;
        } else if (!strcmp(f, "--quant")) {
            if ((quant = pt_wtype_parse(val)) < 0 || quant == PT_W_F16) {
                fprintf(stderr, "ptgen: --quant expects f32, bf16, q8_0 or q4_0, found '%s'\n", val);
                return 2;
            }
        } else if (!strcmp(f, "--print-ids")) print_ids = 1;
        else if (!strcmp(f, "--bytes")) bytes = 1;
        else if (!strcmp(f, "--logprobs")) print_lp = 1;
        else return usage("unknown flag", f);
        if (takes) i++;
    }
    if (!model) return usage("no MODEL given", NULL);
    if (bytes && tok_path) return usage("--bytes and --tokenizer exclude each other (bytes are no tokenizer)", NULL);

    memset(&d, 0, sizeof d);
    if (!(ctx = pt_init(&d))) return 1;
    if (threads > 0) pt_set_threads(ctx, (int)threads);
    if (!(w = pt_gpt_weights_open(ctx, model, quant, tok_path || bytes ? NULL : &tok))) {
        fprintf(stderr, "ptgen: %s\n", pt_error(ctx));
        pt_shutdown(ctx);
        return 1;
    }
    if (tok_path && !(tok = pt_tokenizer_load(ctx, tok_path)) && !(tok = pt_tokenizer_load_dir(ctx, tok_path))) {
        fprintf(stderr, "ptgen: --tokenizer %s: %s\n", tok_path, pt_error(ctx));
        rc = 1;
        goto done;
    }
    if (bytes && w->cfg.vocab > 256) {
        fprintf(stderr, "ptgen: --bytes: the model's vocabulary is %d tokens, more than the 256 bytes (ids 256 and up have no text): "
                        "give its tokenizer (--tokenizer FILE), or --prompt-ids for ids only\n", (int)w->cfg.vocab);
        rc = 2;
        goto done;
    }
    if (!tok && !bytes && (w->tokenizer_error[0] || w->cfg.vocab > 256)) { /* no silent bytes: stop, or ids only when asked for ids */
        char why[400];
        if (w->tokenizer_error[0]) snprintf(why, sizeof why, "%s", w->tokenizer_error);
        else snprintf(why, sizeof why, "%s: a vocabulary of %d tokens and no tokenizer", model, (int)w->cfg.vocab);
        if (!prompt_ids || w->cfg.vocab <= 256) {
            fprintf(stderr, "ptgen: %s: give --tokenizer FILE, or %s\n", why, w->cfg.vocab <= 256 ? "--bytes (the ids are bytes)" : "--prompt-ids for ids only");
            rc = 1;
            goto done;
        }
        if (nstop) {
            fprintf(stderr, "ptgen: %s: --stop needs a tokenizer (give --tokenizer FILE, or --stop-id)\n", why);
            rc = 2;
            goto done;
        }
        fprintf(stderr, "ptgen: note: %s: ids only (no text; the ids line follows)\n", why);
        ids_only = 1, print_ids = 1;
    }
    if (tok && pt_tokenizer_vocab(tok) > w->cfg.vocab) {
        fprintf(stderr, "ptgen: the tokenizer has %d tokens, more than the model's vocabulary of %d\n", (int)pt_tokenizer_vocab(tok),
                (int)w->cfg.vocab);
        rc = 1;
        goto done;
    }

    /* the prompt's ids */
    if (prompt_ids) {
        const char *p = prompt_ids;
        ids = (int32_t *)malloc(sizeof(int32_t) * (strlen(p) / 2 + 2));
        while (ids && *p) {
            char *e;
            long x = strtol(p, &e, 10);
            if (e == p || x < 0 || x >= w->cfg.vocab || (*e && *e != ',')) {
                fprintf(stderr, "ptgen: --prompt-ids expects comma-separated ids in [0, %d), found '%s'\n", (int)w->cfg.vocab, prompt_ids);
                rc = 2;
                goto done;
            }
            ids[nids++] = (int32_t)x;
            p = *e ? e + 1 : e;
        }
    } else {
        size_t len = strlen(prompt);
        ids = (int32_t *)malloc(sizeof(int32_t) * (len + 1));
        if (ids && tok) nids = (int32_t)pt_tokenizer_encode(tok, prompt, (int64_t)len, ids);
        else if (ids) {
            if (w->cfg.vocab < 256) {
                fprintf(stderr, "ptgen: the model has no tokenizer and a vocabulary of %d (< 256 bytes): give the prompt as --prompt-ids\n",
                        (int)w->cfg.vocab);
                rc = 2;
                goto done;
            }
            for (nids = 0; nids < (int32_t)len; nids++) ids[nids] = (unsigned char)prompt[nids];
        }
    }
    if (!ids || nids < 1) {
        fprintf(stderr, "ptgen: the prompt is empty (give --prompt TEXT or --prompt-ids)\n");
        rc = 2;
        goto done;
    }
    if (nids > w->cfg.max_seq) {
        fprintf(stderr, "ptgen: the prompt is %d tokens, longer than the model's context of %d tokens (max_seq)\n", (int)nids,
                (int)w->cfg.max_seq);
        rc = 2;
        goto done;
    }

    memset(&idesc, 0, sizeof idesc);
    idesc.max_seqs = (int32_t)n;
    if (!(inf = pt_infer_new(ctx, w, &idesc))) {
        fprintf(stderr, "ptgen: %s\n", pt_error(ctx));
        rc = 1;
        goto done;
    }
    req = (pt_gen_request *)calloc((size_t)n, sizeof *req);
    res = (pt_gen_result *)calloc((size_t)n, sizeof *res);
    for (i = 0; req && res && i < n; i++) {
        req[i].prompt = ids, req[i].nprompt = nids, req[i].max_tokens = (int32_t)max_tokens;
        req[i].sample.temperature = (float)temperature, req[i].sample.top_k = (int32_t)top_k, req[i].sample.top_p = (float)top_p;
        req[i].sample.min_p = (float)min_p, req[i].sample.repeat_penalty = (float)repeat_penalty, req[i].sample.seed = (uint64_t)(seed + i);
        req[i].stop_tokens = nstop_ids ? stop_ids : NULL, req[i].nstop_tokens = nstop_ids;
        req[i].stop = nstop ? stops : NULL, req[i].nstop = nstop;
        res[i].tokens = (int32_t *)malloc(sizeof(int32_t) * (size_t)(max_tokens + 1));
        res[i].logprobs = (float *)malloc(sizeof(float) * (size_t)(max_tokens + 1));
        res[i].text_cap = 16 * max_tokens + 16;
        res[i].text = (char *)malloc((size_t)res[i].text_cap);
        if (!res[i].tokens || !res[i].logprobs || !res[i].text) break;
    }
    if (!req || !res || i < n) {
        fprintf(stderr, "ptgen: out of memory\n");
        rc = 1;
    } else {
        memset(&go, 0, sizeof go);
        go.tokenizer = tok, go.on_token = on_token, go.user = &s;
        s.n = ids_only ? 0 : (int)n; /* ids only: no text streamed */
        if (pt_generate(inf, (int32_t)n, req, res, &go, &st) != PT_OK) {
            fprintf(stderr, "\nptgen: %s\n", pt_error(ctx));
            rc = 1;
        }
        for (i = 0; i < n; i++) {
            int j;
            if (n > 1) printf("%s--- sequence %d (seed %ld)\n%.*s", i ? "\n" : "", i, seed + i, ids_only ? 0 : (int)res[i].text_len, res[i].text);
            if (print_ids) {
                printf("\nids: ");
                for (j = 0; j < res[i].ntokens; j++) printf("%s%d", j ? "," : "", (int)res[i].tokens[j]);
            }
            if (print_lp) {
                printf("\nlogprobs: ");
                for (j = 0; j < res[i].ntokens; j++) printf("%s%.4f", j ? "," : "", (double)res[i].logprobs[j]);
            }
        }
        printf("\n");
        fflush(stdout);
        if (!rc)
            fprintf(stderr, "ptgen: %s weights %.1f MB, %d thread%s, prefill %lld tokens %.1f tokens/s, decode %lld tokens %.1f tokens/s\n",
                    pt_wtype_name(w->layer[0].qkv.type),
                    (double)pt_gpt_weights_bytes(w) / 1e6, pt_threads(ctx), pt_threads(ctx) == 1 ? "" : "s", (long long)st.prefill_tokens,
                    st.prefill_s > 0 ? (double)st.prefill_tokens / st.prefill_s : 0.0, (long long)st.decode_tokens,
                    st.decode_s > 0 ? (double)st.decode_tokens / st.decode_s : 0.0);
    }
    for (i = 0; res && i < n; i++) free(res[i].tokens), free(res[i].logprobs), free(res[i].text);
    free(req);
    free(res);
    pt_infer_free(inf);
done:
    free(ids);
    pt_tokenizer_free(tok);
    pt_gpt_weights_free(w);
    pt_shutdown(ctx);
    return rc;
}
