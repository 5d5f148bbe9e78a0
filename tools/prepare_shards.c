/* prepare_shards.c - text files -> train/val token shards for the ptrain.h loader (byte-level tokens,
   or byte-level BPE).
   Build: cc -O2 -I. tools/prepare_shards.c -o build/prepare_shards -lm      (or: make tools)
   Usage: prepare_shards [--val-fraction F] [--val FILE] [--shard-tokens N] [--format ptrain|llmc] [--bpe N | --tokenizer FILE]
                         [--prose] OUTDIR TEXT...
   The TEXT files are read in order as one byte stream; every byte is one token (vocabulary 256).
   With --bpe N, a byte-level BPE tokenizer of N merges (vocabulary 256 + N) is trained on the
   training part, saved as OUTDIR/tokenizer.bin (pt_tokenizer_load_dir finds it), and the shards hold
   its ids (the training and validation parts encoded separately; decoding the train shards then the
   val shards gives the input back). With --tokenizer FILE instead, that tokenizer file encodes them (one
   a --bpe run saved, or GPT-2's own from `ptckpt import vocab.json merges.txt FILE`: GPT-2's ids) and is
   saved as OUTDIR/tokenizer.bin. Without either, a tokenizer.bin left in OUTDIR is removed. OUTDIR is created if needed.
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

#include "ptflags.h"

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

/* --bpe: train on text[0, cut) (--tokenizer FILE: load tokf instead), encode text[0, cut) and text[cut, n)
   into the two writers */
static int bpe_shards(pt_ctx *ctx, const char *out, int merges, const char *tokf, const unsigned char *text, long long n, long long cut, writer *tw, writer *vw) {
    char path[4096];
    double t0 = pt_time();
    pt_tokenizer *tk = tokf ? pt_tokenizer_load(ctx, tokf) : pt_tokenizer_train(ctx, text, cut, merges);
    int32_t *ids = (int32_t *)malloc(sizeof(int32_t) * (size_t)(n > 0 ? n : 1));
    int64_t a, b;
    int rc = 0;
    if (!tk || !ids) {
        free(ids);
        pt_tokenizer_free(tk);
        return -1;
    }
    if (tw->format == PT_SHARD_LLMC && pt_tokenizer_vocab(tk) > 65280) {
        fprintf(stderr, "prepare_shards: --tokenizer %s has a vocabulary of %d, --format llmc holds 16-bit ids: at most 65280\n", tokf, (int)pt_tokenizer_vocab(tk));
        free(ids);
        pt_tokenizer_free(tk);
        return -1;
    }
    if (tokf) printf("bpe: the tokenizer %s, %d merges (vocabulary %d)\n", tokf, pt_tokenizer_vocab(tk) - 256, pt_tokenizer_vocab(tk));
    else printf("bpe: %d merges (vocabulary %d) learned from %lld bytes in %.2f s\n", pt_tokenizer_vocab(tk) - 256, pt_tokenizer_vocab(tk), cut, pt_time() - t0);
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

static const char usage_text[] =
    "usage: prepare_shards [--val-fraction F] [--val FILE] [--shard-tokens N] [--format ptrain|llmc] [--bpe N | --tokenizer FILE] [--prose] OUTDIR TEXT...\n";

/* the command line, and the run's state */
typedef struct prep {
    const char *val, *out, **text, *tokf; /* --val FILE, OUTDIR, the TEXT files, --tokenizer FILE */
    int ntext, format, prose;
    double frac;
    long shard_tokens, bpe;
    long long total, train_end, pos, room;
    unsigned char *all; /* --bpe, --prose: the whole stream (room bytes) */
    pt_ctx *ctx;
    writer tw, vw;
} prep;

static int flag_arg(void *dst, const char *tool, const char *flag, const char *v) { /* OUTDIR, then the TEXT files */
    prep *p = (prep *)dst;
    (void)tool, (void)flag;
    if (!p->out) p->out = v;
    else p->text[p->ntext++] = v;
    return 0;
}

/* parse_flags: the command line into p; PTF_GO, or the exit status */
static int parse_flags(prep *p, int argc, char **argv) {
    static const int formats[] = {PT_SHARD_PTRAIN, PT_SHARD_LLMC};
    int rc;
    const ptf_flag flags[] = {PTF_ARG(flag_arg, p),
                              PTF_REAL_X("--val-fraction", &p->frac, 0, 1, PTF_OPEN_HI, NULL),
                              PTF_STR("--val", &p->val),
                              PTF_LONG("--shard-tokens", &p->shard_tokens, 2, 1e15),
                              PTF_LONG("--bpe", &p->bpe, 0, 1L << 24),
                              PTF_STR("--tokenizer", &p->tokf),
                              PTF_CHOICE("--format", &p->format, "ptrain|llmc", formats),
                              PTF_BOOL("--prose", &p->prose),
                              PTF_END};
    memset(p, 0, sizeof *p);
    p->frac = 0.05, p->shard_tokens = 1 << 24, p->bpe = -1, p->format = PT_SHARD_PTRAIN;
    if (!(p->text = (const char **)calloc((size_t)argc, sizeof *p->text))) return 1;
    if ((rc = ptf_parse("prepare_shards", usage_text, flags, argc, argv)) != PTF_GO) return rc;
    if (!p->ntext) return fprintf(stderr, "prepare_shards: expected OUTDIR TEXT..., found %s\n", p->out ? "no TEXT file" : "neither"), fputs(usage_text, stderr), 2;
    if (p->tokf && p->bpe >= 0) return fprintf(stderr, "prepare_shards: --bpe N trains a tokenizer, --tokenizer FILE reads one: give one of them\n"), 2;
    if (p->tokf) p->bpe = 0; /* the BPE path, with the file's tokenizer */
    if (p->bpe > (p->format == PT_SHARD_LLMC ? 65280 : 1 << 24)) {
        fprintf(stderr, "prepare_shards: --bpe expects a whole number in [0, 65280] with --format llmc (16-bit ids), found '%ld'\n", p->bpe);
        return 2;
    }
    return PTF_GO;
}

/* open_output: the inputs' sizes and the train / val cut, OUTDIR made, the context and the two
   writers; 0, or 1 after the message */
static int open_output(prep *p) {
    int i;
    for (i = 0; i < p->ntext; i++) {
        long long n = file_size(p->text[i]);
        if (n < 0) {
            fprintf(stderr, "prepare_shards: cannot read %s\n", p->text[i]);
            return 1;
        }
        p->total += n;
    }
    p->train_end = p->val ? p->total : p->total - (long long)(p->frac * (double)p->total);
    if (!pt_mkdirs(p->out)) {
        fprintf(stderr, "prepare_shards: cannot create the output directory %s\n", p->out);
        return 1;
    }
    if (!(p->ctx = pt_init(NULL))) return 1;
    p->tw.ctx = p->ctx, p->tw.dir = p->out, p->tw.split = "train", p->tw.format = (pt_shard_format)p->format, p->tw.cap = p->shard_tokens, p->tw.vocab = 256;
    p->vw = p->tw;
    p->vw.split = "val";
    p->tw.buf = (uint32_t *)malloc(sizeof(uint32_t) * (size_t)p->shard_tokens);
    p->vw.buf = (uint32_t *)malloc(sizeof(uint32_t) * (size_t)p->shard_tokens);
    if (!p->tw.buf || !p->vw.buf) return 1;
    p->room = p->total + (p->val ? file_size(p->val) : 0);
    if ((p->bpe >= 0 || p->prose) && (p->room < 0 || !(p->all = (unsigned char *)malloc((size_t)p->room + 1)))) return 1;
    return 0;
}

/* read_stream: the TEXT files in order, then --val FILE: byte-level, straight into the writers (the
   train / val cut at train_end); with --bpe or --prose into p->all first. 0, or 1 */
static int read_stream(prep *p) {
    static unsigned char chunk[1 << 16];
    int i, rc = 0;
    for (i = 0; i < p->ntext + (p->val ? 1 : 0) && rc == 0; i++) {
        const char *path = i < p->ntext ? p->text[i] : p->val;
        FILE *f = fopen(path, "rb");
        size_t n;
        if (!f) {
            fprintf(stderr, "prepare_shards: cannot read %s\n", path);
            return 1;
        }
        while (rc == 0 && (n = fread(chunk, 1, sizeof chunk, f)) > 0) {
            size_t cut = n;
            if (i < p->ntext && p->pos + (long long)n > p->train_end) cut = p->pos >= p->train_end ? 0 : (size_t)(p->train_end - p->pos);
            if (i == p->ntext) cut = 0; /* --val FILE: all validation */
            if (p->all && p->pos + (long long)n > p->room) {
                fprintf(stderr, "prepare_shards: %s grew while being read\n", path);
                rc = 1;
            } else if (p->all) memcpy(p->all + p->pos, chunk, n); /* --bpe, --prose: the whole stream first */
            else if (push(&p->tw, chunk, cut) != 0 || push(&p->vw, chunk + cut, n - cut) != 0) rc = 1;
            p->pos += (long long)n;
        }
        fclose(f);
    }
    if (p->pos < p->train_end) p->train_end = p->pos; /* a file shrank while being read */
    return rc;
}

/* filter_prose: --prose: the training part, then the validation part, each filtered in place; 0, or
   1 when no training text is left */
static int filter_prose(prep *p) {
    long long kt = 0, dt = 0, kv = 0, dv = 0, t, v;
    if (!p->prose) return 0;
    t = prose_filter(p->all, p->train_end, &kt, &dt);
    v = (memmove(p->all + t, p->all + p->train_end, (size_t)(p->pos - p->train_end)), prose_filter(p->all + t, p->pos - p->train_end, &kv, &dv));
    printf("prose: kept %lld of %lld paragraphs (%lld of %lld bytes) for training, %lld of %lld (%lld of %lld bytes) for validation\n",
           kt, kt + dt, t, p->train_end, kv, kv + dv, v, p->pos - p->train_end);
    p->train_end = t, p->pos = t + v;
    if (!t) return fprintf(stderr, "prepare_shards: --prose kept no training text (none of its %lld paragraphs reads as prose)\n", kt + dt), 1;
    return 0;
}

/* write_shards: the stream held in p->all as bytes or BPE ids, the last shards flushed; without
   --bpe a tokenizer.bin left in OUTDIR removed. 0, or 1 */
static int write_shards(prep *p) {
    char tkpath[4096];
    snprintf(tkpath, sizeof tkpath, "%s/%s", p->out, PT_TOKENIZER_FILE);
    if (p->all && p->bpe < 0 && (push(&p->tw, p->all, (size_t)p->train_end) != 0 || push(&p->vw, p->all + p->train_end, (size_t)(p->pos - p->train_end)) != 0)) return 1;
    if (p->all && p->bpe >= 0 && bpe_shards(p->ctx, p->out, (int)p->bpe, p->tokf, p->all, p->pos, p->train_end, &p->tw, &p->vw) != 0) return 1;
    if (p->bpe < 0) remove(tkpath); /* byte-level shards: no tokenizer */
    return flush_shard(&p->tw) != 0 || flush_shard(&p->vw) != 0;
}

int main(int argc, char **argv) {
    prep p;
    int rc;
    if ((rc = parse_flags(&p, argc, argv)) != PTF_GO || (rc = open_output(&p))) {
        free(p.text), free(p.tw.buf), free(p.vw.buf), free(p.all), pt_shutdown(p.ctx);
        return rc;
    }
    rc = read_stream(&p) || filter_prose(&p) || write_shards(&p);
    if (rc == 0) {
        printf("train: %lld tokens in %d shard(s) %s/train_*.bin\n", (long long)p.tw.total, p.tw.shards, p.out);
        printf("val: %lld tokens in %d shard(s) %s/val_*.bin\n", (long long)p.vw.total, p.vw.shards, p.out);
    } else fprintf(stderr, "prepare_shards: failed%s%s\n", pt_error(p.ctx)[0] ? ": " : "", pt_error(p.ctx));
    free(p.text), free(p.tw.buf), free(p.vw.buf), free(p.all);
    pt_shutdown(p.ctx);
    return rc;
}
