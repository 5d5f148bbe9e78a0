/* prepare_shards.c - text files -> train/val token shards for the ptrain.h loader (byte-level tokens,
   or byte-level BPE).
   Build: cc -O2 -I. tools/prepare_shards.c -o build/prepare_shards -lm      (or: make tools)
   Usage: prepare_shards [--val-fraction F] [--val FILE] [--shard-tokens N] [--format ptrain|llmc] [--bpe N] [--prose]
                         OUTDIR TEXT...
   The TEXT files are read in order as one byte stream; every byte is one token (vocabulary 256).
   With --bpe N, a byte-level BPE tokenizer of N merges (vocabulary 256 + N) is trained on the
   training part, saved as OUTDIR/tokenizer.bin (pt_tokenizer_load_dir finds it), and the shards hold
   its ids (the training and validation parts encoded separately; decoding the train shards then the
   val shards gives the input back). Without --bpe, a tokenizer.bin left in OUTDIR is removed. OUTDIR is created if needed.
   Without --val, the last F of the stream (default 0.05) becomes the validation set; with --val FILE,
   FILE's bytes are the validation set and every TEXT goes to training. Writes OUTDIR/train_000000.bin,
   train_000001.bin, ... and OUTDIR/val_000000.bin, ... of at most N tokens each (default 16777216),
   in the ptrain layout (uint16 tokens, vocabulary 256) or the llm.c one; each file is written under
   a temporary name and renamed. Prints one summary line per split (and the BPE training time).
   With --prose, a quality filter in the spirit of Gopher's (Rae et al. 2021) runs first, on the
   training and the validation part alike: the text is cut into paragraphs (runs of non-blank lines
   with the blank lines after them), and a paragraph is kept only when it reads as prose: letters are
   at least 80% of its non-space bytes, capitals at most 20% of its letters, and at least 80% of its
   words (runs of non-space bytes) hold a letter. ASCII art, tables, logs of numbers and text in
   capitals go; it prints what it dropped. */
#define PTRAIN_IMPLEMENTATION
#include "ptrain.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct writer {
    pt_ctx *ctx;
    const char *dir, *split;
    pt_shard_format format;
    int32_t vocab;
    uint32_t *buf;
    int64_t n, cap, total;
    int shards;
} writer;

static int flush_shard(writer *w) {
    char path[4096];
    if (w->n == 0) return 0;
    snprintf(path, sizeof path, "%s/%s_%06d.bin", w->dir, w->split, w->shards);
    if (pt_shard_write(w->ctx, path, w->format, w->buf, w->n, w->format == PT_SHARD_LLMC ? 0 : w->vocab) != PT_OK) return -1;
    w->shards++, w->total += w->n, w->n = 0;
    return 0;
}

static int push(writer *w, const unsigned char *p, size_t n) {
    size_t i;
    for (i = 0; i < n; i++) {
        w->buf[w->n++] = p[i];
        if (w->n == w->cap && flush_shard(w) != 0) return -1;
    }
    return 0;
}

static int push_ids(writer *w, const int32_t *p, int64_t n) {
    int64_t i;
    for (i = 0; i < n; i++) {
        w->buf[w->n++] = (uint32_t)p[i];
        if (w->n == w->cap && flush_shard(w) != 0) return -1;
    }
    return 0;
}

/* --bpe: train on text[0, cut), encode text[0, cut) and text[cut, n) into the two writers */
static int bpe_shards(pt_ctx *ctx, const char *out, int merges, const unsigned char *text, long long n, long long cut, writer *tw, writer *vw) {
    char path[4096];
    double t0 = pt_time();
    pt_tokenizer *tk = pt_tokenizer_train(ctx, text, cut, merges);
    int32_t *ids = (int32_t *)malloc(sizeof(int32_t) * (size_t)(n > 0 ? n : 1));
    int64_t a, b;
    int rc = 0;
    if (!tk || !ids) {
        free(ids);
        pt_tokenizer_free(tk);
        return -1;
    }
    printf("bpe: %d merges (vocabulary %d) learned from %lld bytes in %.2f s\n", pt_tokenizer_vocab(tk) - 256, pt_tokenizer_vocab(tk), cut, pt_time() - t0);
    snprintf(path, sizeof path, "%s/%s", out, PT_TOKENIZER_FILE);
    t0 = pt_time();
    tw->vocab = vw->vocab = pt_tokenizer_vocab(tk);
    a = pt_tokenizer_encode(tk, text, cut, ids);
    b = a < 0 ? -1 : pt_tokenizer_encode(tk, text + cut, n - cut, ids + a);
    if (b < 0 || push_ids(tw, ids, a) != 0 || push_ids(vw, ids + a, b) != 0 || pt_tokenizer_save(tk, path) != PT_OK) rc = -1;
    else printf("bpe: %lld bytes encoded into %lld ids (%.2f bytes per id) in %.2f s; tokenizer %s\n", n, (long long)(a + b), (double)n / (double)(a + b > 0 ? a + b : 1),
                pt_time() - t0, path);
    free(ids);
    pt_tokenizer_free(tk);
    return rc;
}

/* --prose: is the paragraph p[0, n) prose (the thresholds above)? */
static int is_prose(const unsigned char *p, long long n) {
    long long i, nonspace = 0, letters = 0, caps = 0, words = 0, lettered = 0;
    int inword = 0, has = 0; /* in a word; the word holds a letter */
    for (i = 0; i <= n; i++) {
        int c = i < n ? p[i] : ' ', letter = (c | 32) >= 'a' && (c | 32) <= 'z';
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') { /* a space ends the word */
            lettered += inword && has, inword = 0;
            continue;
        }
        if (!inword) inword = 1, has = 0, words++;
        nonspace++, letters += letter, caps += c >= 'A' && c <= 'Z', has |= letter;
    }
    return nonspace > 0 && letters * 5 >= nonspace * 4 && caps * 5 <= letters && lettered * 5 >= words * 4;
}
/* --prose: keeps the prose paragraphs of p[0, n) in place; returns the new length */
static long long prose_filter(unsigned char *p, long long n, long long *kept, long long *dropped) {
    long long a = 0, w = 0;
    while (a < n) {
        long long e = a, body;
        while (e < n) { /* the paragraph's lines up to a blank line */
            long long l = e;
            while (l < n && p[l] != '\n') l++;
            if (l == e) break; /* a blank line */
            e = l < n ? l + 1 : l;
        }
        body = e;
        while (e < n && p[e] == '\n') e++; /* and the blank lines after it */
        if (is_prose(p + a, body - a)) memmove(p + w, p + a, (size_t)(e - a)), w += e - a, ++*kept;
        else ++*dropped;
        a = e;
    }
    return w;
}

static long long file_size(const char *path) {
    FILE *f = fopen(path, "rb");
    long n;
    if (!f) return -1;
    n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    fclose(f);
    return n;
}

static int usage(void) {
    fprintf(stderr, "usage: prepare_shards [--val-fraction F] [--val FILE] [--shard-tokens N] [--format ptrain|llmc] [--bpe N] [--prose] OUTDIR TEXT...\n");
    return 2;
}

int main(int argc, char **argv) {
    double frac = 0.05;
    const char *val = NULL, *out;
    long long shard_tokens = 1 << 24, total = 0, train_end, pos = 0, bpe = -1;
    unsigned char *all = NULL; /* --bpe: the whole stream (room bytes) */
    long long room = 0;
    char tkpath[4096];
    pt_shard_format format = PT_SHARD_PTRAIN;
    writer tw, vw;
    pt_ctx *ctx;
    static unsigned char chunk[1 << 16];
    int i, first, rc = 0, prose = 0;
    for (i = 1; i < argc && argv[i][0] == '-' && argv[i][1] == '-'; i += 2) {
        if (!strcmp(argv[i], "--prose")) { /* the one flag without a value */
            prose = 1, i--;
            continue;
        }
        if (i + 1 >= argc) return usage();
        if (!strcmp(argv[i], "--val-fraction")) frac = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--val")) val = argv[i + 1];
        else if (!strcmp(argv[i], "--shard-tokens")) shard_tokens = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--bpe")) bpe = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--format")) {
            if (!strcmp(argv[i + 1], "llmc")) format = PT_SHARD_LLMC;
            else if (strcmp(argv[i + 1], "ptrain") != 0) return usage();
        } else return usage();
    }
    if (argc - i < 2 || frac < 0 || frac >= 1 || shard_tokens < 2 || (bpe != -1 && (bpe < 0 || bpe > (format == PT_SHARD_LLMC ? 65280 : 1 << 24)))) return usage();
    out = argv[i], first = i + 1;
    for (i = first; i < argc; i++) {
        long long n = file_size(argv[i]);
        if (n < 0) {
            fprintf(stderr, "prepare_shards: cannot read %s\n", argv[i]);
            return 1;
        }
        total += n;
    }
    train_end = val ? total : total - (long long)(frac * (double)total);
    if (!pt_mkdirs(out)) {
        fprintf(stderr, "prepare_shards: cannot create the output directory %s\n", out);
        return 1;
    }
    ctx = pt_init(NULL);
    if (!ctx) return 1;
    memset(&tw, 0, sizeof tw);
    tw.ctx = ctx, tw.dir = out, tw.split = "train", tw.format = format, tw.cap = shard_tokens, tw.vocab = 256;
    vw = tw;
    vw.split = "val";
    tw.buf = (uint32_t *)malloc(sizeof(uint32_t) * (size_t)shard_tokens);
    vw.buf = (uint32_t *)malloc(sizeof(uint32_t) * (size_t)shard_tokens);
    if (!tw.buf || !vw.buf) return 1;
    room = total + (val ? file_size(val) : 0);
    if ((bpe >= 0 || prose) && (room < 0 || !(all = (unsigned char *)malloc((size_t)room + 1)))) return 1;
    for (i = first; i < argc + (val ? 1 : 0) && rc == 0; i++) {
        const char *path = i < argc ? argv[i] : val;
        FILE *f = fopen(path, "rb");
        size_t n;
        if (!f) {
            fprintf(stderr, "prepare_shards: cannot read %s\n", path);
            rc = 1;
            break;
        }
        while (rc == 0 && (n = fread(chunk, 1, sizeof chunk, f)) > 0) {
            size_t cut = n;
            if (i < argc && pos + (long long)n > train_end) cut = pos >= train_end ? 0 : (size_t)(train_end - pos);
            if (i == argc) cut = 0; /* --val FILE: all validation */
            if (all && pos + (long long)n > room) {
                fprintf(stderr, "prepare_shards: %s grew while being read\n", path);
                rc = 1;
            } else if (all) memcpy(all + pos, chunk, n); /* --bpe, --prose: the whole stream first */
            else if (push(&tw, chunk, cut) != 0 || push(&vw, chunk + cut, n - cut) != 0) rc = 1;
            pos += (long long)n;
        }
        fclose(f);
    }
    if (pos < train_end) train_end = pos; /* a file shrank while being read */
    if (rc == 0 && prose) { /* the training part, then the validation part, each filtered in place */
        long long kt = 0, dt = 0, kv = 0, dv = 0, t = prose_filter(all, train_end, &kt, &dt);
        long long v = (memmove(all + t, all + train_end, (size_t)(pos - train_end)), prose_filter(all + t, pos - train_end, &kv, &dv));
        printf("prose: kept %lld of %lld paragraphs (%lld of %lld bytes) for training, %lld of %lld (%lld of %lld bytes) for validation\n",
               kt, kt + dt, t, train_end, kv, kv + dv, v, pos - train_end);
        train_end = t, pos = t + v;
        if (!t) fprintf(stderr, "prepare_shards: --prose kept no training text (none of its %lld paragraphs reads as prose)\n", kt + dt), rc = 1;
    }
    snprintf(tkpath, sizeof tkpath, "%s/%s", out, PT_TOKENIZER_FILE);
    if (rc == 0 && all && bpe < 0 && (push(&tw, all, (size_t)train_end) != 0 || push(&vw, all + train_end, (size_t)(pos - train_end)) != 0)) rc = 1;
    if (rc == 0 && all && bpe >= 0 && bpe_shards(ctx, out, (int)bpe, all, pos, train_end, &tw, &vw) != 0) rc = 1;
    if (rc == 0 && bpe < 0) remove(tkpath); /* byte-level shards: no tokenizer */
    if (rc == 0 && (flush_shard(&tw) != 0 || flush_shard(&vw) != 0)) rc = 1;
    if (rc == 0) {
        printf("train: %lld tokens in %d shard(s) %s/train_*.bin\n", (long long)tw.total, tw.shards, out);
        printf("val: %lld tokens in %d shard(s) %s/val_*.bin\n", (long long)vw.total, vw.shards, out);
    } else fprintf(stderr, "prepare_shards: failed%s%s\n", pt_error(ctx)[0] ? ": " : "", pt_error(ctx));
    free(tw.buf);
    free(vw.buf);
    free(all);
    pt_shutdown(ctx);
    return rc;
}
