/* ptgen.c - generate text from a trained GPT with ptrain.h's KV-cached inference.

   Build: cc -O2 -fopenmp -march=native -DPTRAIN_OPENCL -I. tools/ptgen.c -o build/ptgen -lm
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
     --kv-type f32|f16|q8_0   the KV cache's type (f32; q8_0: blocks of 32 as llama.cpp's -ctk/-ctv
                          q8_0, 3.76x the tokens in the same bytes; needs a head size that is a multiple of 32)
     --threads N          CPU threads (default: the CPUs available)
     --device DEV         where the steps run: cpu (the default) or opencl[:P[:D]] (platform P, device D:
                          the weights, the KV cache and every layer on the device, the sampler on the
                          host; f32, bf16 and f16 weights as they are, q8_0 and q4_0 widened to f32 there;
                          --kv-type f32 or f16). The tokens are the CPU's (logits within float rounding).
                          OpenCL and CLBlast are loaded when asked for (no link flags)
     --tokenizer PATH     a tokenizer.bin (or a directory holding one) instead of the model's
     --lookup N           speculative decoding by prompt lookup: up to N (1..16) tokens drafted a step
                          from earlier matches of the last tokens in the prompt and output (0 = off)
     --draft MODEL        speculative decoding by a draft model (a smaller one with the same
                          vocabulary, any MODEL kind, in --quant's format); --draft-tokens N drafted a
                          step (4). Either way the tokens are those without it, bit for bit; the speed
                          line adds the tokens drafted and accepted
     --bytes              the ids are the bytes (no tokenizer, the model's not read): only for a
                          vocabulary of at most 256 tokens (else refused: ids 256 and up have no text)
   A model whose file carries a tokenizer that is refused (a GGUF vocabulary ptrain cannot reproduce, a
   token past PT_TOK_MAX_TOKEN_BYTES, a bad tokenizer.bin in a checkpoint) stops ptgen with the reason
   (exit 1) unless --tokenizer, --bytes or --prompt-ids says what to use instead; so does a model of
   more than 256 tokens without any tokenizer (its ids are no bytes).
     --print-ids          after the text, a line `ids: a,b,c` of the generated ids
     --logprobs           after the text, a line `logprobs: x,y,z`
   The text streams to stdout as it is made, through pt_generate's pt_detok (bytes that may begin a
   stop string, and those of a UTF-8 character split across tokens, are held until they resolve).
   The last line, on stderr, gives the weights' format and bytes, the prefill and the decode
   tokens/s: `ptgen: q8_0 weights 91.2 MB, prefill 12 tokens 850.1 tokens/s, decode 128 tokens 301.3 tokens/s`.
   Exit status: 0 done, 1 a bad model file or a failed generation, 2 bad usage. */
#define PTRAIN_IMPLEMENTATION
#include "ptrain.h"
#include "ptflags.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXSTOP 8

static const char usage_text[] =
    "usage: ptgen MODEL [--prompt TEXT | --prompt-ids I,J,..] [--max-tokens N] [--temperature X] [--top-k K]\n"
    "             [--top-p P] [--min-p P] [--repeat-penalty X] [--seed S] [--n N] [--stop STRING] [--stop-id ID]\n"
    "             [--quant f32|bf16|q8_0|q4_0] [--kv-type f32|f16|q8_0] [--threads N] [--device cpu|opencl[:P[:D]]]\n"
    "             [--tokenizer PATH | --bytes] [--print-ids] [--logprobs]\n"
    "             [--lookup N] [--draft MODEL [--draft-tokens N]]\n"
    "MODEL: a checkpoint directory, a .safetensors file or a .gguf file (see the top of tools/ptgen.c)\n";

static int usage(const char *msg, const char *what) {
    if (msg) fprintf(stderr, "ptgen: %s%s%s\n", msg, what ? " " : "", what ? what : "");
    fputs(usage_text, stderr);
    return 2;
}

/* the command line */
typedef struct gen_opts {
    const char *model, *prompt, *prompt_ids, *tok_path, *stops[MAXSTOP], *draft, *device;
    int32_t stop_ids[MAXSTOP], nstop, nstop_ids;
    long max_tokens, top_k, seed, n, threads, lookup, draft_tokens;
    double temperature, top_p, min_p, repeat_penalty;
    int quant, kv_type, print_ids, print_lp, bytes;
} gen_opts;

/* one run: the options, the model, the prompt's ids, the requests and their results */
typedef struct gen {
    gen_opts o;
    pt_ctx *ctx;
    pt_tokenizer *tok;
    pt_gpt_weights *w, *dw; /* the model, the draft model */
    pt_infer *inf, *dinf;
    int32_t *ids, nids;
    int ids_only; /* no usable tokenizer: ids in, ids out, no text */
    pt_gen_request *req;
    pt_gen_result *res;
    pt_gen_stats st;
} gen;

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

/* ---- the steps of main ---- */

static int flag_model(void *dst, const char *tool, const char *flag, const char *v) {
    gen_opts *o = (gen_opts *)dst;
    (void)tool, (void)flag;
    if (o->model) return usage("more than one MODEL:", v);
    o->model = v;
    return 0;
}
static int flag_stop(void *dst, const char *tool, const char *flag, const char *v) {
    gen_opts *o = (gen_opts *)dst;
    (void)tool, (void)flag;
    if (o->nstop == MAXSTOP || !*v) return usage(o->nstop == MAXSTOP ? "at most 8 --stop strings" : "--stop expects a non-empty string", NULL);
    o->stops[o->nstop++] = v;
    return 0;
}
static int flag_stop_id(void *dst, const char *tool, const char *flag, const char *v) {
    gen_opts *o = (gen_opts *)dst;
    long x;
    if (o->nstop_ids == MAXSTOP) return usage("at most 8 --stop-id ids", NULL);
    if (ptf_long(tool, flag, v, 0, 0x7fffffffL, &x)) return 2;
    o->stop_ids[o->nstop_ids++] = (int32_t)x;
    return 0;
}
static int flag_quant(void *dst, const char *tool, const char *flag, const char *v) {
    int *quant = (int *)dst;
    if ((*quant = pt_wtype_parse(v)) < 0 || *quant == PT_W_F16) return ptf_bad(tool, flag, "f32, bf16, q8_0 or q4_0", v);
    return 0;
}

static const int kv_types[] = {PT_W_F32, PT_W_F16, PT_W_Q8_0}; /* --kv-type's values */
/* parse_flags: the command line into o; PTF_GO, or the exit status */
static int parse_flags(gen_opts *o, int argc, char **argv) {
    int rc;
    const ptf_flag flags[] = {PTF_ARG(flag_model, o),
                              PTF_STR("--prompt", &o->prompt),
                              PTF_STR("--prompt-ids", &o->prompt_ids),
                              PTF_STR("--tokenizer", &o->tok_path),
                              PTF_LONG("--max-tokens", &o->max_tokens, 0, 1L << 20),
                              PTF_LONG("--top-k", &o->top_k, 0, 1L << 30),
                              PTF_LONG("--seed", &o->seed, 0, 0x7fffffffL),
                              PTF_LONG("--n", &o->n, 1, 256),
                              PTF_LONG("--threads", &o->threads, 1, 1024),
                              PTF_STR("--device", &o->device),
                              PTF_REAL("--temperature", &o->temperature, 0, 100),
                              PTF_REAL("--top-p", &o->top_p, 0, 1),
                              PTF_REAL("--min-p", &o->min_p, 0, 1),
                              PTF_REAL("--repeat-penalty", &o->repeat_penalty, 0, 100),
                              PTF_FN("--stop", flag_stop, o),
                              PTF_FN("--stop-id", flag_stop_id, o),
                              PTF_FN("--quant", flag_quant, &o->quant),
                              PTF_CHOICE("--kv-type", &o->kv_type, "f32|f16|q8_0", kv_types),
                              PTF_BOOL("--print-ids", &o->print_ids),
                              PTF_BOOL("--bytes", &o->bytes),
                              PTF_BOOL("--logprobs", &o->print_lp),
                              PTF_LONG("--lookup", &o->lookup, 0, 16),
                              PTF_STR("--draft", &o->draft),
                              PTF_LONG("--draft-tokens", &o->draft_tokens, 1, 16),
                              PTF_END};
    memset(o, 0, sizeof *o);
    o->prompt = "\n", o->max_tokens = 128, o->seed = 1, o->n = 1, o->temperature = 0.8, o->top_p = 1, o->repeat_penalty = 1, o->quant = -1;
    if ((rc = ptf_parse("ptgen", usage_text, flags, argc, argv)) != PTF_GO) return rc;
    if (!o->model) return usage("no MODEL given", NULL);
    if (o->bytes && o->tok_path) return usage("--bytes and --tokenizer exclude each other (bytes are no tokenizer)", NULL);
    if (o->device && strcmp(o->device, "cpu") && strncmp(o->device, "opencl", 6))
        return usage("--device expects cpu or opencl[:P[:D]], found", o->device);
    return PTF_GO;
}

/* load_model: the context, the weights and the tokenizer (the model's, --tokenizer's, or none);
   0, or the exit status after the message */
static int load_model(gen *g) {
    const gen_opts *o = &g->o;
    pt_desc d;
    memset(&d, 0, sizeof d);
    d.device = o->device ? o->device : "cpu";
    if (!(g->ctx = pt_init(&d))) {
        fprintf(stderr, "ptgen: --device %s: no context (the reason above)\n", d.device);
        return 1;
    }
    if (o->threads > 0) pt_set_threads(g->ctx, (int)o->threads);
    if (!(g->w = pt_gpt_weights_open(g->ctx, o->model, o->quant, o->tok_path || o->bytes ? NULL : &g->tok))) {
        fprintf(stderr, "ptgen: %s\n", pt_error(g->ctx));
        return 1;
    }
    if (o->tok_path && !(g->tok = pt_tokenizer_load(g->ctx, o->tok_path)) && !(g->tok = pt_tokenizer_load_dir(g->ctx, o->tok_path))) {
        fprintf(stderr, "ptgen: --tokenizer %s: %s\n", o->tok_path, pt_error(g->ctx));
        return 1;
    }
    if (o->draft) {
        if (!(g->dw = pt_gpt_weights_open(g->ctx, o->draft, o->quant, NULL))) {
            fprintf(stderr, "ptgen: --draft %s: %s\n", o->draft, pt_error(g->ctx));
            return 1;
        }
        if (g->dw->cfg.vocab != g->w->cfg.vocab) {
            fprintf(stderr, "ptgen: --draft %s: a vocabulary of %d tokens, the model's is %d (expected the same tokenizer)\n", o->draft,
                    (int)g->dw->cfg.vocab, (int)g->w->cfg.vocab);
            return 1;
        }
    }
    return 0;
}

/* check_text: what the ids mean (the tokenizer, bytes, or ids only when asked for ids); 0, or the
   exit status after the message */
static int check_text(gen *g) {
    gen_opts *o = &g->o;
    const pt_gpt_weights *w = g->w;
    if (o->bytes && w->cfg.vocab > 256) {
        fprintf(stderr, "ptgen: --bytes: the model's vocabulary is %d tokens, more than the 256 bytes (ids 256 and up have no text): "
                        "give its tokenizer (--tokenizer FILE), or --prompt-ids for ids only\n", (int)w->cfg.vocab);
        return 2;
    }
    if (!g->tok && !o->bytes && (w->tokenizer_error[0] || w->cfg.vocab > 256)) { /* no silent bytes: stop, or ids only when asked for ids */
        char why[400];
        if (w->tokenizer_error[0]) snprintf(why, sizeof why, "%s", w->tokenizer_error);
        else snprintf(why, sizeof why, "%s: a vocabulary of %d tokens and no tokenizer", o->model, (int)w->cfg.vocab);
        if (!o->prompt_ids || w->cfg.vocab <= 256) {
            fprintf(stderr, "ptgen: %s: give --tokenizer FILE, or %s\n", why, w->cfg.vocab <= 256 ? "--bytes (the ids are bytes)" : "--prompt-ids for ids only");
            return 1;
        }
        if (o->nstop) {
            fprintf(stderr, "ptgen: %s: --stop needs a tokenizer (give --tokenizer FILE, or --stop-id)\n", why);
            return 2;
        }
        fprintf(stderr, "ptgen: note: %s: ids only (no text; the ids line follows)\n", why);
        g->ids_only = 1, o->print_ids = 1;
    }
    if (g->tok && pt_tokenizer_vocab(g->tok) > w->cfg.vocab) {
        fprintf(stderr, "ptgen: the tokenizer has %d tokens, more than the model's vocabulary of %d\n", (int)pt_tokenizer_vocab(g->tok),
                (int)w->cfg.vocab);
        return 1;
    }
    return 0;
}

/* encode_prompt: the prompt's ids (--prompt-ids, or --prompt through the tokenizer or as bytes);
   0, or the exit status after the message */
static int encode_prompt(gen *g) {
    const gen_opts *o = &g->o;
    const pt_gpt_weights *w = g->w;
    if (o->prompt_ids) {
        const char *p = o->prompt_ids;
        g->ids = (int32_t *)malloc(sizeof(int32_t) * (strlen(p) / 2 + 2));
        while (g->ids && *p) {
            char *e;
            long x = strtol(p, &e, 10);
            if (e == p || x < 0 || x >= w->cfg.vocab || (*e && *e != ',')) {
                fprintf(stderr, "ptgen: --prompt-ids expects comma-separated ids in [0, %d), found '%s'\n", (int)w->cfg.vocab, o->prompt_ids);
                return 2;
            }
            g->ids[g->nids++] = (int32_t)x;
            p = *e ? e + 1 : e;
        }
    } else {
        size_t len = strlen(o->prompt);
        g->ids = (int32_t *)malloc(sizeof(int32_t) * (len + 1));
        if (g->ids && g->tok) g->nids = (int32_t)pt_tokenizer_encode(g->tok, o->prompt, (int64_t)len, g->ids);
        else if (g->ids) {
            if (w->cfg.vocab < 256) {
                fprintf(stderr, "ptgen: the model has no tokenizer and a vocabulary of %d (< 256 bytes): give the prompt as --prompt-ids\n",
                        (int)w->cfg.vocab);
                return 2;
            }
            for (g->nids = 0; g->nids < (int32_t)len; g->nids++) g->ids[g->nids] = (unsigned char)o->prompt[g->nids];
        }
    }
    if (!g->ids || g->nids < 1) {
        fprintf(stderr, "ptgen: the prompt is empty (give --prompt TEXT or --prompt-ids)\n");
        return 2;
    }
    if (g->nids > w->cfg.max_seq) {
        fprintf(stderr, "ptgen: the prompt is %d tokens, longer than the model's context of %d tokens (max_seq)\n", (int)g->nids,
                (int)w->cfg.max_seq);
        return 2;
    }
    return 0;
}

/* make_requests: the inference state and the --n requests with room for their results; 0, or 1 */
static int make_requests(gen *g) {
    const gen_opts *o = &g->o;
    pt_infer_desc idesc;
    long i;
    memset(&idesc, 0, sizeof idesc);
    idesc.max_seqs = (int32_t)o->n, idesc.kv_type = o->kv_type;
    if (!(g->inf = pt_infer_new(g->ctx, g->w, &idesc)) || (g->dw && !(g->dinf = pt_infer_new(g->ctx, g->dw, &idesc)))) {
        fprintf(stderr, "ptgen: %s\n", pt_error(g->ctx));
        return 1;
    }
    g->req = (pt_gen_request *)calloc((size_t)o->n, sizeof *g->req);
    g->res = (pt_gen_result *)calloc((size_t)o->n, sizeof *g->res);
    for (i = 0; g->req && g->res && i < o->n; i++) {
        pt_gen_request *q = &g->req[i];
        pt_gen_result *r = &g->res[i];
        q->prompt = g->ids, q->nprompt = g->nids, q->max_tokens = (int32_t)o->max_tokens;
        q->sample.temperature = (float)o->temperature, q->sample.top_k = (int32_t)o->top_k, q->sample.top_p = (float)o->top_p;
        q->sample.min_p = (float)o->min_p, q->sample.repeat_penalty = (float)o->repeat_penalty, q->sample.seed = (uint64_t)(o->seed + i);
        q->stop_tokens = o->nstop_ids ? o->stop_ids : NULL, q->nstop_tokens = o->nstop_ids;
        q->stop = o->nstop ? o->stops : NULL, q->nstop = o->nstop;
        r->tokens = (int32_t *)malloc(sizeof(int32_t) * (size_t)(o->max_tokens + 1));
        r->logprobs = (float *)malloc(sizeof(float) * (size_t)(o->max_tokens + 1));
        r->text_cap = 16 * o->max_tokens + 16;
        r->text = (char *)malloc((size_t)r->text_cap);
        if (!r->tokens || !r->logprobs || !r->text) break;
    }
    if (!g->req || !g->res || i < o->n) {
        fprintf(stderr, "ptgen: out of memory\n");
        return 1;
    }
    return 0;
}

/* generate: the sequences, the first streamed to stdout as it is made when it is the only one;
   0, or 1 after the message */
static int generate(gen *g) {
    pt_gen_opts go;
    stream s;
    memset(&go, 0, sizeof go);
    go.tokenizer = g->tok, go.on_token = on_token, go.user = &s;
    go.lookup = (int32_t)g->o.lookup, go.draft = g->dinf, go.draft_tokens = (int32_t)g->o.draft_tokens;
    s.n = g->ids_only ? 0 : (int)g->o.n; /* ids only: no text streamed */
    if (pt_generate(g->inf, (int32_t)g->o.n, g->req, g->res, &go, &g->st) != PT_OK) {
        fprintf(stderr, "\nptgen: %s\n", pt_error(g->ctx));
        return 1;
    }
    return 0;
}

/* print_results: each sequence (when several), its ids and logprobs when asked; then, after a
   generation that went well, the speed line on stderr */
static void print_results(const gen *g, int ok) {
    const gen_opts *o = &g->o;
    const pt_gpt_weights *w = g->w;
    const pt_gen_stats *st = &g->st;
    long i;
    for (i = 0; i < o->n; i++) {
        const pt_gen_result *r = &g->res[i];
        int j;
        if (o->n > 1) printf("%s--- sequence %ld (seed %ld)\n%.*s", i ? "\n" : "", i, o->seed + i, g->ids_only ? 0 : (int)r->text_len, r->text);
        if (o->print_ids) {
            printf("\nids: ");
            for (j = 0; j < r->ntokens; j++) printf("%s%d", j ? "," : "", (int)r->tokens[j]);
        }
        if (o->print_lp) {
            printf("\nlogprobs: ");
            for (j = 0; j < r->ntokens; j++) printf("%s%.4f", j ? "," : "", (double)r->logprobs[j]);
        }
    }
    printf("\n");
    fflush(stdout);
    if (ok)
        fprintf(stderr, "ptgen: %s weights %.1f MB, %s%s%d thread%s, prefill %lld tokens %.1f tokens/s, decode %lld tokens %.1f tokens/s\n",
                pt_wtype_name(w->layer[0].qkv.type), (double)pt_gpt_weights_bytes(w) / 1e6,
                strcmp(pt_backend_name(g->ctx), "cpu") ? pt_backend_name(g->ctx) : "", strcmp(pt_backend_name(g->ctx), "cpu") ? ", " : "", pt_threads(g->ctx), pt_threads(g->ctx) == 1 ? "" : "s", (long long)st->prefill_tokens,
                st->prefill_s > 0 ? (double)st->prefill_tokens / st->prefill_s : 0.0, (long long)st->decode_tokens,
                st->decode_s > 0 ? (double)st->decode_tokens / st->decode_s : 0.0);
    if (ok && (o->lookup || o->draft))
        fprintf(stderr, "ptgen: speculative decoding (%s): %lld tokens drafted, %lld accepted (%.1f%%)\n", o->draft ? "draft model" : "prompt lookup",
                (long long)st->drafted, (long long)st->accepted, st->drafted ? 100.0 * (double)st->accepted / (double)st->drafted : 0.0);
}

/* clean_up: everything g holds */
static void clean_up(gen *g) {
    long i;
    for (i = 0; g->res && i < g->o.n; i++) free(g->res[i].tokens), free(g->res[i].logprobs), free(g->res[i].text);
    free(g->req);
    free(g->res);
    pt_infer_free(g->inf);
    pt_infer_free(g->dinf);
    pt_gpt_weights_free(g->dw);
    free(g->ids);
    pt_tokenizer_free(g->tok);
    pt_gpt_weights_free(g->w);
    pt_shutdown(g->ctx);
}

int main(int argc, char **argv) {
    gen g;
    int rc;
    memset(&g, 0, sizeof g);
    if ((rc = parse_flags(&g.o, argc, argv)) != PTF_GO) return rc;
    if (!(rc = load_model(&g)) && !(rc = check_text(&g)) && !(rc = encode_prompt(&g)) && !(rc = make_requests(&g))) {
        rc = generate(&g);
        print_results(&g, !rc);
    }
    clean_up(&g);
    return rc;
}
