/* test_data.c - token shards and the streaming loader (>>data): the llm.c and ptrain layouts read the
   same stream; every DP rank's batches together cover the dataset exactly once per epoch (dp 1, 2, 4,
   shuffled or not), equal to the one-rank stream batch by batch; the prefetch thread gives the same
   stream as reading in place; a saved state continues the uninterrupted stream (same layout, another
   DP size, another global batch, through pt_state_register); bad shards and a dataset smaller than
   one global batch are refused with a message.
   Usage: test_data [--quick] [--dir DIR]            (DIR for the shard files, default build/tests/data)
          test_data --prepared DIR TEXT              (train_* then val_* shards of DIR hold TEXT's bytes) */
#define PTRAIN_IMPLEMENTATION
#include "../ptrain.h"
#include "test_util.h"
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define T 8
#define NSH 6
static const int64_t sizes[NSH] = {97, 129, 57, 1, 201, 33}; /* windows: 12 16 7 0 25 4 = 64 */
#define TOTAL 64
static char dir[512] = "build/tests/data";
static char paths[NSH][600], paths16[NSH][600], pathsl[NSH][600];
static const char *pp[NSH], *pp16[NSH], *ppl[NSH];
static int64_t first_id[NSH]; /* token id of each shard's first token (ids are unique over the dataset) */

static char last_err[1024];
static void on_err(void *u, pt_status st, const char *msg) {
    (void)u, (void)st;
    snprintf(last_err, sizeof last_err, "%s", msg);
}

static pt_loader *mk(pt_ctx *ctx, const char *const *p, int64_t B, int rank, int ranks, int shuffle, int prefetch, uint64_t seed) {
    pt_loader_desc d;
    memset(&d, 0, sizeof d);
    d.paths = p, d.npaths = NSH, d.batch = B, d.seq = T, d.rank = rank, d.ranks = ranks, d.shuffle = shuffle, d.prefetch = prefetch, d.seed = seed;
    return pt_loader_new(ctx, &d);
}

/* the window id of a sample (its first token id), after checking x and y are consecutive tokens of
   one window that starts at a multiple of T inside one shard; -1 if not */
static int64_t window_of(const int32_t *x, const int32_t *y) {
    int s, t;
    for (t = 0; t < T; t++)
        if (x[t] != x[0] + t || y[t] != x[0] + t + 1) return -1;
    for (s = 0; s < NSH; s++) {
        int64_t off = x[0] - first_id[s];
        if (off >= 0 && off < sizes[s]) return off % T == 0 && off + T < sizes[s] ? x[0] : -1;
    }
    return -1;
}

/* global batches of a stream of (ranks) loaders: nb batches of B samples into ids (window ids) */
static int stream(pt_ctx *ctx, const char *const *p, int64_t B, int ranks, int shuffle, int prefetch, uint64_t seed, int nb, int64_t *ids,
                  const pt_loader_state *from) {
    pt_loader *L[4];
    int32_t x[TOTAL * T], y[TOTAL * T];
    int r, b, j, ok = 1;
    int64_t local = B / ranks;
    for (r = 0; r < ranks; r++) {
        L[r] = mk(ctx, p, B, r, ranks, shuffle, prefetch, seed);
        if (!L[r]) return 0;
        if (from && pt_loader_set_state(L[r], from) != PT_OK) ok = 0;
    }
    for (b = 0; b < nb && ok; b++)
        for (r = 0; r < ranks; r++) {
            if (pt_loader_next(L[r], x, y) != PT_OK) ok = 0;
            for (j = 0; j < local && ok; j++) ids[b * B + r * local + j] = window_of(x + j * T, y + j * T);
        }
    for (r = 0; r < ranks; r++) pt_loader_free(L[r]);
    return ok;
}

static void write_file(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (f) fwrite(p, 1, n, f), fclose(f);
}

/* --prepared DIR TEXT: the prepared shards hold the text, train first then val: its bytes, or (with
   DIR/tokenizer.bin) ids whose decoding is the text */
static int check_prepared(const char *d, const char *text) {
    pt_ctx *ctx = pt_init(NULL);
    pt_tokenizer *tk = pt_tokenizer_load_dir(ctx, d);
    FILE *f = fopen(text, "rb");
    static unsigned char want[1 << 22], dec[1 << 22];
    static int32_t ids[1 << 22];
    size_t n = f ? fread(want, 1, sizeof want, f) : 0, at = 0;
    const char *pre[2] = {"train", "val"};
    int k, i, bad = pt_status_get(ctx) != PT_OK, nshards = 0;
    char name[1024];
    if (f) fclose(f);
    for (k = 0; k < 2; k++)
        for (i = 0;; i++) {
            pt_shard_info info;
            FILE *g;
            int64_t t;
            snprintf(name, sizeof name, "%s/%s_%06d.bin", d, pre[k], i);
            if (!(g = fopen(name, "rb"))) break;
            nshards++;
            if (pt_shard_info_read(ctx, name, &info) != PT_OK || info.vocab != (tk ? pt_tokenizer_vocab(tk) : info.format == PT_SHARD_LLMC ? 0 : 256)) {
                bad = 1;
                fclose(g);
                break;
            }
            fseek(g, (long)info.header_bytes, SEEK_SET);
            for (t = 0; t < info.tokens && at < sizeof want; t++) {
                unsigned char b[4] = {0, 0, 0, 0};
                if (fread(b, 1, (size_t)info.token_bytes, g) != (size_t)info.token_bytes) bad = 1;
                ids[at++] = b[0] | b[1] << 8 | b[2] << 16;
            }
            fclose(g);
        }
    if (tk) {
        int64_t m = pt_tokenizer_decode(tk, ids, (int64_t)at, dec, sizeof dec);
        printf("  %zu ids (vocabulary %d) decode to %lld bytes\n", at, pt_tokenizer_vocab(tk), (long long)m);
        bad |= m != (int64_t)n, at = m < 0 ? 0 : (size_t)m;
    } else
        for (i = 0; i < (int)at; i++) dec[i] = (unsigned char)ids[i], bad |= ids[i] > 255;
    CHECKF(!bad && at == n && !memcmp(dec, want, n) && nshards >= 2, tk ? "prepared shards (train_*, val_*) decode to the text" : "prepared shards (train_*, val_*) hold the text's bytes in order",
           "%zu of %zu bytes, %d shards (bad %d)", at, n, nshards, bad);
    pt_tokenizer_free(tk);
    pt_shutdown(ctx);
    return tu_summary();
}

/* ---- PT_LOADER_IDX: fixed-size records and labels of an IDX pair ---- */
#define NREC 50
#define RB 12 /* a record: 3 x 4 bytes; record r starts with bytes r, r / 256 (unique ids) */
static char idx_img[600], idx_lab[600];

static void write_idx(const char *path, int type, int nd, const uint32_t *dims, const unsigned char *data, size_t n, long cut) {
    unsigned char h[32];
    int i;
    FILE *f = fopen(path, "wb");
    h[0] = 0, h[1] = 0, h[2] = (unsigned char)type, h[3] = (unsigned char)nd;
    for (i = 0; i < nd; i++) h[4 + 4 * i] = (unsigned char)(dims[i] >> 24), h[5 + 4 * i] = (unsigned char)(dims[i] >> 16), h[6 + 4 * i] = (unsigned char)(dims[i] >> 8), h[7 + 4 * i] = (unsigned char)dims[i];
    if (!f) return;
    fwrite(h, 1, (size_t)(4 + 4 * nd), f);
    fwrite(data, 1, n - (size_t)(cut > 0 ? cut : 0), f);
    fclose(f);
}

static pt_loader *mk_idx(pt_ctx *ctx, const char *img, const char *lab, int64_t B, int rank, int ranks, int shuffle, int prefetch, int classes) {
    pt_loader_desc d;
    memset(&d, 0, sizeof d);
    d.kind = PT_LOADER_IDX, d.idx_data = img, d.idx_labels = lab, d.batch = B, d.rank = rank, d.ranks = ranks, d.shuffle = shuffle;
    d.prefetch = prefetch, d.seed = 11, d.classes = classes;
    return pt_loader_new(ctx, &d);
}

/* record id of a batch row (checking its bytes and label against the id); -1 if wrong */
static int64_t rec_of(const unsigned char *r, int32_t label) {
    int64_t id = r[0] + 256 * r[1];
    int i;
    for (i = 2; i < RB; i++)
        if (r[i] != (unsigned char)(id * 7 + i)) return -1;
    return id < NREC && label == (int32_t)(id % 10) ? id : -1;
}

/* nb global batches of B records from `ranks` loaders into ids; floats (pt_loader_next_records) when f */
static int idx_stream(pt_ctx *ctx, int64_t B, int ranks, int shuffle, int prefetch, int f, int nb, int64_t *ids, const pt_loader_state *from) {
    pt_loader *L[4];
    static unsigned char xb[NREC * RB];
    static float xf[NREC * RB];
    int32_t lab[NREC];
    int r, b, j, i, ok = 1;
    int64_t local = B / ranks;
    for (r = 0; r < ranks; r++) {
        L[r] = mk_idx(ctx, idx_img, idx_lab, B, r, ranks, shuffle, prefetch, 10);
        if (!L[r]) return 0;
        if (from && pt_loader_set_state(L[r], from) != PT_OK) ok = 0;
    }
    for (b = 0; b < nb && ok; b++)
        for (r = 0; r < ranks; r++) {
            ok = (f ? pt_loader_next_records(L[r], xf, lab) : pt_loader_next_bytes(L[r], xb, lab)) == PT_OK;
            if (f)
                for (i = 0; i < local * RB; i++) {
                    int v = (int)(xf[i] * 255.0f + 0.5f);
                    ok &= xf[i] == (float)v * (1.0f / 255.0f);
                    xb[i] = (unsigned char)v;
                }
            for (j = 0; j < local && ok; j++) ids[b * B + r * local + j] = rec_of(xb + j * RB, lab[j]);
        }
    for (r = 0; r < ranks; r++) pt_loader_free(L[r]);
    return ok;
}

static void test_idx(pt_ctx *ctx) {
    static unsigned char img[NREC * RB], lab[NREC];
    static int64_t ref[4 * NREC], got[4 * NREC];
    uint32_t dims[3] = {NREC, 3, 4}, ldims[1] = {NREC};
    int i, sh, dp, k;
    for (i = 0; i < NREC; i++) {
        int c;
        img[i * RB] = (unsigned char)i, img[i * RB + 1] = (unsigned char)(i / 256);
        for (c = 2; c < RB; c++) img[i * RB + c] = (unsigned char)(i * 7 + c);
        lab[i] = (unsigned char)(i % 10);
    }
    snprintf(idx_img, sizeof idx_img, "%s/recs-idx3-ubyte", dir);
    snprintf(idx_lab, sizeof idx_lab, "%s/labels-idx1-ubyte", dir);
    write_idx(idx_img, 0x08, 3, dims, img, sizeof img, 0);
    write_idx(idx_lab, 0x08, 1, ldims, lab, sizeof lab, 0);
    {
        pt_loader *L = mk_idx(ctx, idx_img, idx_lab, 10, 0, 1, 1, 2, 10);
        pt_loader_stats st = pt_loader_stats_get(L);
        CHECKF(L && st.record_bytes == RB && st.record_ndim == 2 && st.record_dims[0] == 3 && st.record_dims[1] == 4 && st.samples_total == NREC && st.batches_per_epoch == 5,
               "IDX: records of 3 x 4 bytes, 50 of them, 5 batches of 10 per epoch", "record %lld bytes, ndim %d, %lld samples", (long long)st.record_bytes, st.record_ndim, (long long)st.samples_total);
        pt_loader_free(L);
    }
    /* every DP size, shuffled or not, bytes or floats, with and without the prefetch thread: the union of
       the ranks' batches is the one-rank stream, and each epoch holds every record exactly once */
    for (sh = 0; sh <= 1; sh++) {
        int ok = idx_stream(ctx, 10, 1, sh, 0, 0, 20, ref, NULL);
        for (k = 0; k < 4; k++) {
            static int seen[NREC];
            int once = 1;
            memset(seen, 0, sizeof seen);
            for (i = 0; i < NREC; i++) once &= ref[k * NREC + i] >= 0 && !seen[ref[k * NREC + i]]++;
            CHECK(ok && once, tu_name("IDX epoch %d (shuffle %d): the %d records (bytes, labels) each exactly once", k, sh, NREC));
        }
        if (sh) CHECK(memcmp(ref, ref + NREC, sizeof(int64_t) * NREC) != 0, "IDX shuffle: epoch 1's order differs from epoch 0's");
        else {
            int inorder = 1;
            for (i = 0; i < NREC; i++) inorder &= ref[i] == i;
            CHECK(inorder, "IDX no shuffle: records in file order");
        }
        for (dp = 1; dp <= 4; dp *= 2) {
            int b = dp == 4 ? 12 : 10, nb = 4 * NREC / b, f;
            if (b != 10) idx_stream(ctx, b, 1, sh, 0, 0, nb, ref, NULL);
            for (f = 0; f <= 1; f++)
                CHECK(idx_stream(ctx, b, dp, sh, f ? 0 : 3, f, nb, got, NULL) && !memcmp(got, ref, sizeof(int64_t) * (size_t)(nb * b)),
                      tu_name("IDX dp %d (shuffle %d, batch %d, %s, %s): union of the ranks' batches = the one-rank stream", dp, sh, b, f ? "floats" : "bytes",
                              f ? "read in place" : "prefetch"));
            if (b != 10) idx_stream(ctx, 10, 1, sh, 0, 0, 20, ref, NULL);
        }
    }
    /* resume: a state after k batches continues the uninterrupted stream (also on dp 2 with another batch) */
    idx_stream(ctx, 10, 1, 1, 0, 0, 20, ref, NULL);
    for (k = 1; k <= 13; k += 6) {
        pt_loader *L = mk_idx(ctx, idx_img, idx_lab, 10, 0, 1, 1, 2, 10);
        pt_loader_state st;
        static float xf[NREC * RB];
        int32_t lb[NREC];
        int ok = L != NULL;
        for (i = 0; i < k && ok; i++) ok = pt_loader_next_records(L, xf, lb) == PT_OK;
        st = pt_loader_get_state(L);
        pt_loader_free(L);
        CHECK(ok && idx_stream(ctx, 10, 1, 1, 2, 1, 20 - k, got, &st) && !memcmp(got, ref + 10 * k, sizeof(int64_t) * 10 * (20 - k)),
              tu_name("IDX resume after %d batches (epoch %lld, sample %lld): the uninterrupted stream", k, (long long)st.epoch, (long long)st.sample));
        CHECK(idx_stream(ctx, 2, 2, 1, 0, 0, 5 * (20 - k), got, &st) && !memcmp(got, ref + 10 * k, sizeof(int64_t) * 10 * (20 - k)),
              tu_name("IDX resume after %d batches of 10 with batch 2 on dp 2: the same records", k));
    }
    {   /* the wrong call for the kind is refused */
        pt_loader *L = mk_idx(ctx, idx_img, NULL, 10, 0, 1, 0, 0, 0);
        int32_t x[NREC * RB], y[NREC * RB];
        unsigned char xb[NREC * RB];
        int32_t lb[NREC];
        last_err[0] = 0;
        CHECK(L && pt_loader_next(L, x, y) == PT_ERR_ARG && strstr(last_err, "pt_loader_next_records"), "IDX loader: pt_loader_next is refused, naming the right call");
        pt_error_clear(ctx);
        CHECK(L && pt_loader_next_bytes(L, xb, lb) == PT_OK && lb[0] == 0 && rec_of(xb, 0) == 0, "IDX without a label file: labels 0");
        pt_loader_free(L);
    }
    {   /* malformed IDX files are refused, naming the file, expected and found */
        static unsigned char big[NREC * RB + 8];
        uint32_t d2[2] = {NREC, 2}, dl[1] = {NREC - 1};
        char bad[700];
        struct { const char *what, *msg; int labels, type, nd; const uint32_t *dims; size_t n; long cut; int raw; } cases[] = {
            {"bad magic", "bad magic", 0, 0x08, 3, dims, sizeof img, 0, 1},
            {"value type 0x0D (float)", "value type: expected 0x08", 0, 0x0D, 3, dims, sizeof img, 0, 0},
            {"0 dimensions", "number of dimensions: expected 1..4, found 0", 0, 0x08, 0, dims, 0, 0, 0},
            {"truncated data", "(truncated)", 0, 0x08, 3, dims, sizeof img, 5, 0},
            {"a record dimension of 0", "dimension 2: expected 1..2^30", 0, 0x08, 3, dims, 0, 0, 2},
            {"labels: one fewer than the records", "expected one dimension of 50 labels", 1, 0x08, 1, dl, NREC - 1, 0, 0},
            {"labels: two dimensions", "found 2 dimension(s)", 1, 0x08, 2, d2, 2 * NREC, 0, 0},
            {"labels: one out of range for 10 classes", "label 7: expected 0..9, found 200", 1, 0x08, 1, ldims, NREC, 0, 3},
        };
        int c;
        for (c = 0; c < (int)(sizeof cases / sizeof cases[0]); c++) {
            pt_loader *L;
            uint32_t dd[3];
            memcpy(big, cases[c].labels ? lab : img, cases[c].labels ? sizeof lab : sizeof img);
            memcpy(dd, cases[c].dims, sizeof(uint32_t) * (size_t)(cases[c].nd < 3 ? (cases[c].nd ? cases[c].nd : 1) : 3));
            if (cases[c].raw == 2) dd[0] = NREC, dd[1] = 3, dd[2] = 0;
            if (cases[c].raw == 3) big[7] = 200;
            snprintf(bad, sizeof bad, "%s/bad_idx_%d", dir, c);
            write_idx(bad, cases[c].type, cases[c].nd, dd, big, cases[c].n, cases[c].cut);
            if (cases[c].raw == 1) write_file(bad, "\x1f\x8b\x08\x00garbage", 12);
            last_err[0] = 0;
            L = mk_idx(ctx, cases[c].labels ? idx_img : bad, cases[c].labels ? bad : idx_lab, 10, 0, 1, 1, 2, 10);
            CHECKF(!L && pt_status_get(ctx) == PT_ERR_FORMAT && strstr(last_err, bad) && strstr(last_err, cases[c].msg) && strstr(last_err, "expected"),
                   tu_name("IDX refused: %s", cases[c].what), "loader %p, message '%s'", (void *)L, last_err);
            pt_error_clear(ctx);
            pt_loader_free(L);
        }
        printf("  e.g. %s\n", last_err);
        last_err[0] = 0;
        CHECK(!mk_idx(ctx, idx_img, idx_lab, 64, 0, 1, 1, 2, 10) && strstr(last_err, "smaller than one global batch"), "IDX: 50 records, batch 64: refused");
        pt_error_clear(ctx);
    }
}

/* ---- the byte-level BPE tokenizer: against a naive reference (recount every pair per merge; apply
   each merge over the whole sequence in order) ---- */
static int64_t naive_apply(int32_t *t, int64_t n, int32_t a, int32_t b, int32_t c) {
    int64_t i, o = 0;
    for (i = 0; i < n; i++)
        if (i + 1 < n && t[i] == a && t[i + 1] == b) t[o++] = c, i++;
        else t[o++] = t[i];
    return o;
}
/* the reference trainer: merges into pairs, returns how many */
static int naive_train(const unsigned char *text, int64_t n, int want, int32_t *pairs) {
    static int32_t t[1 << 16];
    static int64_t cnt[(256 + 64) * (256 + 64)];
    int64_t i, len = n;
    int m, V;
    for (i = 0; i < n; i++) t[i] = text[i];
    for (m = 0; m < want; m++) {
        int64_t best = -1, bc = 0;
        V = 256 + m;
        memset(cnt, 0, sizeof(int64_t) * (size_t)V * (size_t)V);
        for (i = 0; i + 1 < len; i++) cnt[(int64_t)t[i] * V + t[i + 1]]++; /* every adjacent pair, runs overlapping */
        for (i = 0; i < (int64_t)V * V; i++)
            if (cnt[i] > bc) bc = cnt[i], best = i;
        if (bc < 2) break;
        pairs[2 * m] = (int32_t)(best / V), pairs[2 * m + 1] = (int32_t)(best % V);
        len = naive_apply(t, len, pairs[2 * m], pairs[2 * m + 1], 256 + m);
    }
    return m;
}
static int64_t naive_encode(const int32_t *pairs, int merges, const unsigned char *text, int64_t n, int32_t *out) {
    int64_t i, len = n;
    int m;
    for (i = 0; i < n; i++) out[i] = text[i];
    for (m = 0; m < merges; m++) len = naive_apply(out, len, pairs[2 * m], pairs[2 * m + 1], 256 + m);
    return len;
}
/* the merges of a tokenizer, through its file */
static int file_pairs(const char *path, int32_t *pairs, int cap) {
    unsigned char h[32], b[8];
    FILE *f = fopen(path, "rb");
    int m = 0, n;
    if (!f || fread(h, 1, 32, f) != 32) return -1;
    n = h[8] | h[9] << 8 | h[10] << 16;
    for (; m < n && m < cap && fread(b, 1, 8, f) == 8; m++) pairs[2 * m] = b[0] | b[1] << 8 | b[2] << 16, pairs[2 * m + 1] = b[4] | b[5] << 8 | b[6] << 16;
    fclose(f);
    return m == n ? n : -1;
}

/* ---- a shard truncated or replaced while a loader reads it: an error, not SIGBUS ---- */
#define TRN 2000 /* tokens per shard: 8064 bytes, more than a page */
/* in a child (a crash must not end the test): 0 = each case gave PT_ERR_IO naming the file and the
   sizes; k = case k went wrong; the message of each case into msg */
static int trunc_child(pt_ctx *ctx, const char *a, const char *b, char msg[2][1024]) {
    static uint32_t tok[TRN];
    int32_t x[2 * T], y[2 * T];
    const char *ab[2];
    char nb[720];
    pt_loader_desc d;
    pt_loader *L;
    pt_status st = PT_OK;
    int i;
    ab[0] = a, ab[1] = b;
    for (i = 0; i < TRN; i++) tok[i] = (uint32_t)i;
    if (pt_shard_write(ctx, a, PT_SHARD_PTRAIN, tok, TRN, 0) != PT_OK || pt_shard_write(ctx, b, PT_SHARD_PTRAIN, tok, TRN, 0) != PT_OK) return 9;
    memset(&d, 0, sizeof d);
    d.paths = ab, d.npaths = 2, d.batch = 2, d.seq = T; /* no prefetch thread: each pt_loader_next reads */
    /* 1: b replaced (rename) by a valid shard of 100 tokens after the loader validated it; read on until b is mapped */
    if (!(L = pt_loader_new(ctx, &d)) || pt_loader_next(L, x, y) != PT_OK) return 1;
    snprintf(nb, sizeof nb, "%s.new", b);
    if (pt_shard_write(ctx, nb, PT_SHARD_PTRAIN, tok, 100, 0) != PT_OK || rename(nb, b) != 0) return 9;
    for (i = 0; i < 400 && (st = pt_loader_next(L, x, y)) == PT_OK; i++) {}
    snprintf(msg[0], 1024, "%s", pt_error(ctx));
    pt_loader_free(L);
    pt_error_clear(ctx);
    if (st != PT_ERR_IO || !strstr(msg[0], b) || !strstr(msg[0], "expected 8064 bytes, found 464")) return 1;
    /* 2: a truncated to nothing while mapped (its pages gone) */
    if (!(L = pt_loader_new(ctx, &d)) || pt_loader_next(L, x, y) != PT_OK) return 2;
    if ((i = open(a, O_WRONLY | O_TRUNC)) < 0) return 9;
    close(i);
    st = pt_loader_next(L, x, y);
    snprintf(msg[1], 1024, "%s", pt_error(ctx));
    pt_loader_free(L);
    pt_error_clear(ctx);
    if (st != PT_ERR_IO || !strstr(msg[1], a) || !strstr(msg[1], "expected 8064 bytes, found 0")) return 2;
    return 0;
}
static void test_truncated(pt_ctx *ctx) {
    char a[700], b[700], msg[2][1024];
    int status = 0;
    FILE *f;
    pid_t pid;
    snprintf(a, sizeof a, "%s/trunc_a.bin", dir);
    snprintf(b, sizeof b, "%s/trunc_b.bin", dir);
    snprintf(msg[0], sizeof msg[0], "%s/trunc.msg", dir);
    fflush(stdout);
    pid = fork();
    if (pid == 0) {
        char name[1024];
        int rc;
        memcpy(name, msg[0], sizeof name);
        msg[0][0] = msg[1][0] = 0;
        rc = trunc_child(ctx, a, b, msg);
        if ((f = fopen(name, "w")) != NULL) fprintf(f, "%s\n%s\n", msg[0], msg[1]), fclose(f);
        _exit(rc);
    }
    remove(msg[0]);
    if (pid > 0) waitpid(pid, &status, 0);
    msg[1][0] = 0;
    if ((f = fopen(msg[0], "r")) != NULL) {
        size_t n = fread(msg[1], 1, sizeof msg[1] - 1, f);
        msg[1][n] = 0;
        fclose(f);
    }
    CHECKF(pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
           "a shard replaced (by rename, shorter) or truncated while the loader reads it: PT_ERR_IO naming it and both sizes, no SIGBUS",
           "%s %d; messages: %s", pid > 0 && WIFSIGNALED(status) ? "killed by signal" : "case", pid > 0 && WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status), msg[1]);
    if (msg[1][0]) printf("  %s", msg[1]);
}

static void test_bpe(pt_ctx *ctx) {
    static unsigned char text[1 << 16], rnd[5000], back[1 << 17];
    static int32_t ids[1 << 16], ref[1 << 16], pa[2 * 64], pb[2 * 64];
    char path[700], path2[700], bad[700];
    int64_t n, i, k, got, want;
    int m, c, ok;
    FILE *f = fopen("ptrain.h", "rb");
    pt_tokenizer *tk, *tl;
    pt_rng r = pt_rng_seed(5);
    n = f ? (int64_t)fread(text, 1, 20000, f) : 0;
    if (f) fclose(f);
    if (n < 20000) { /* the text every check below learns from */
        CHECKF(0, "BPE: the training text ptrain.h can be read", "read %lld of 20000 bytes of ./ptrain.h (run from the repository root)", (long long)n);
        return;
    }
    for (i = 0; i < (int64_t)sizeof rnd; i++) rnd[i] = (unsigned char)(i % 7 == 0 ? 'a' : pt_rng_u32(&r));
    for (i = 1000; i < 1100; i++) rnd[i] = 'a'; /* a long run: overlapping pairs */
    snprintf(path, sizeof path, "%s/tok.bin", dir);
    snprintf(path2, sizeof path2, "%s/tok2.bin", dir);
    tk = pt_tokenizer_train(ctx, text, n, 64);
    CHECK(tk && pt_tokenizer_vocab(tk) == 256 + 64 && pt_tokenizer_save(tk, path) == PT_OK, "BPE: 64 merges learned from 20000 bytes of text, saved");
    m = naive_train(text, n, 64, ref);
    CHECKF(m == 64 && file_pairs(path, pa, 64) == 64 && !memcmp(pa, ref, sizeof(int32_t) * 128), "BPE: the merges equal a naive trainer's (recount per merge)", "naive %d merges", m);
    tl = pt_tokenizer_train(ctx, text, n, 64);
    CHECK(tl && pt_tokenizer_save(tl, path2) == PT_OK && file_pairs(path2, pb, 64) == 64 && !memcmp(pa, pb, sizeof pa), "BPE: training twice gives the same merges (deterministic)");
    pt_tokenizer_free(tl);
    tl = pt_tokenizer_load(ctx, path);
    for (k = 0; k < 3; k++) { /* text, random bytes with runs, a tokenizer trained on the random bytes */
        const unsigned char *src = k == 0 ? text : rnd;
        int64_t len = k == 0 ? n : (int64_t)sizeof rnd;
        pt_tokenizer *t = k == 2 ? pt_tokenizer_train(ctx, rnd, len, 40) : tl;
        int mm = k == 2 ? 40 : 64;
        if (k == 2) {
            pt_tokenizer_save(t, path2);
            mm = file_pairs(path2, pb, 64);
            CHECK(mm == naive_train(rnd, len, 40, ref) && !memcmp(pb, ref, sizeof(int32_t) * 2 * (size_t)mm), "BPE on random bytes with a run of 100 'a': the naive trainer's merges");
        }
        got = pt_tokenizer_encode(t, src, len, ids);
        want = naive_encode(k == 2 ? pb : pa, mm, src, len, ref);
        CHECKF(got == want && !memcmp(ids, ref, sizeof(int32_t) * (size_t)got), tu_name("BPE encode (%s) = applying the merges in order", k == 0 ? "text" : "random bytes"),
               "%lld ids, reference %lld", (long long)got, (long long)want);
        ok = pt_tokenizer_decode(t, ids, got, back, sizeof back) == len && !memcmp(back, src, (size_t)len);
        for (i = 0; i < 200 && ok; i++) { /* every prefix of random length and offset */
            int64_t off = pt_rng_u32(&r) % (uint32_t)len, l = pt_rng_u32(&r) % (uint32_t)(len - off + 1), g2 = pt_tokenizer_encode(t, src + off, l, ids);
            ok = g2 >= 0 && g2 <= l && pt_tokenizer_decode(t, ids, g2, back, sizeof back) == l && !memcmp(back, src + off, (size_t)l);
        }
        CHECK(ok, tu_name("BPE decode(encode(x)) == x (%s, whole and 200 random slices, empty included)", k == 0 ? "text" : "random bytes"));
        if (k == 0) printf("  20000 bytes of ptrain.h -> %lld ids with 64 merges\n", (long long)got);
        if (k == 2) pt_tokenizer_free(t);
    }
    CHECK(pt_tokenizer_decode(tl, ids, 2, NULL, 0) > 0 && (ids[0] = 999, pt_tokenizer_decode(tl, ids, 2, back, sizeof back) == -1) && pt_status_get(ctx) == PT_ERR_ARG,
          "BPE decode: sizes with cap 0; an id outside the vocabulary is refused");
    pt_error_clear(ctx);
    {   /* malformed tokenizer files */
        static unsigned char fb[32 + 8 * 64 + 16];
        struct { const char *what, *msg; int off; uint32_t val; int cut, fixcrc; } cases[] = {
            {"truncated header", "truncated header", -1, 0, 32 + 8 * 64 - 20, 0},
            {"bad magic", "bad magic", 0, 0x12345678u, 0, 0},
            {"version 3", "version: expected 1 or 2, found 3", 4, 3, 0, 0},
            {"vocabulary not 256 + merges", "vocabulary: expected 256 + 64 merges = 320", 12, 300, 0, 0},
            {"truncated merges", "size: expected 544 bytes", -1, 0, 8, 0},
            {"a flipped bit in the merges", "checksum of the merges", 32 + 8 * 10, 0x7, 0, 0},
            {"a merge using a later id", "merge 3: expected ids < 259", 32 + 8 * 3, 300, 0, 1},
            {"nonzero reserved byte", "reserved header byte 24", 24, 1, 0, 0},
        };
        FILE *g = fopen(path, "rb");
        size_t fl = g ? fread(fb, 1, sizeof fb, g) : 0;
        if (g) fclose(g);
        for (c = 0; c < (int)(sizeof cases / sizeof cases[0]); c++) {
            unsigned char w[sizeof fb];
            pt_tokenizer *t;
            memcpy(w, fb, fl);
            if (cases[c].off >= 0) w[cases[c].off] = (unsigned char)cases[c].val, w[cases[c].off + 1] = (unsigned char)(cases[c].val >> 8), w[cases[c].off + 2] = 0, w[cases[c].off + 3] = 0;
            if (cases[c].off == 0) w[2] = 0x34, w[3] = 0x12;
            if (cases[c].fixcrc) {
                uint32_t crc = pt_crc32c(0, w + 32, fl - 32);
                w[16] = (unsigned char)crc, w[17] = (unsigned char)(crc >> 8), w[18] = (unsigned char)(crc >> 16), w[19] = (unsigned char)(crc >> 24);
            }
            snprintf(bad, sizeof bad, "%s/bad_tok_%d.bin", dir, c);
            write_file(bad, w, fl - (size_t)cases[c].cut);
            last_err[0] = 0;
            t = pt_tokenizer_load(ctx, bad);
            CHECKF(!t && pt_status_get(ctx) == PT_ERR_FORMAT && strstr(last_err, bad) && strstr(last_err, cases[c].msg) && strstr(last_err, "expected"),
                   tu_name("tokenizer file refused: %s", cases[c].what), "message '%s'", last_err);
            pt_error_clear(ctx);
            pt_tokenizer_free(t);
        }
        printf("  e.g. %s\n", last_err);
        last_err[0] = 0;
        CHECK(!pt_tokenizer_load_dir(ctx, dir) && pt_status_get(ctx) == PT_OK, "pt_tokenizer_load_dir without a tokenizer file: NULL, no error");
        last_err[0] = 0;
        CHECKF(!pt_tokenizer_load(ctx, dir) && pt_status_get(ctx) == PT_ERR_IO && strstr(last_err, dir) && strstr(last_err, "not a regular file"),
               "pt_tokenizer_load of a directory: PT_ERR_IO, not a regular file", "status %d, '%s'", (int)pt_status_get(ctx), last_err);
        pt_error_clear(ctx);
        { /* a FIFO where a shard or a tokenizer file should be: refused at once (opening it to read would wait for a writer) */
            pt_shard_info si;
            snprintf(bad, sizeof bad, "%s/fifo.bin", dir);
            unlink(bad);
            alarm(30);
            CHECKF(mkfifo(bad, 0644) == 0 && pt_shard_info_read(ctx, bad, &si) != PT_OK && strstr(pt_error(ctx), "not a regular file"),
                   "a shard that is a FIFO: refused without blocking", "'%s'", pt_error(ctx));
            pt_error_clear(ctx);
            CHECKF(!pt_tokenizer_load(ctx, bad) && strstr(pt_error(ctx), "not a regular file"), "a tokenizer file that is a FIFO: refused without blocking",
                   "'%s'", pt_error(ctx));
            pt_error_clear(ctx);
            alarm(0);
            unlink(bad);
        }
        snprintf(bad, sizeof bad, "%s/tk", dir);
        mkdir(bad, 0755);
        snprintf(path2, sizeof path2, "%s/tk/" PT_TOKENIZER_FILE, dir);
        pt_tokenizer_save(tk, path2);
        {
            pt_tokenizer *t2 = pt_tokenizer_load_dir(ctx, bad);
            CHECK(t2 && pt_tokenizer_vocab(t2) == 320, "pt_tokenizer_load_dir finds DIR/" PT_TOKENIZER_FILE);
            pt_tokenizer_free(t2);
        }
    }
    { /* the tokens' bytes bounded at load (PT_TOK_MAX_TOKEN_BYTES): merges that double a token each step */
#define put32(p, v) ((p)[0] = (unsigned char)(v), (p)[1] = (unsigned char)((v) >> 8), (p)[2] = (unsigned char)((v) >> 16), (p)[3] = (unsigned char)((v) >> 24))
        static unsigned char w[32 + 8 * 40];
        static unsigned char run[270000];
        uint32_t crc;
        int64_t t0 = 0, maxlen = 0;
        pt_tokenizer *t;
        int j;
        for (j = 0; j < 40; j++) put32(w + 32 + 8 * j, j ? 255u + (uint32_t)j : 97u), put32(w + 36 + 8 * j, j ? 255u + (uint32_t)j : 97u);
        memset(w, 0, 32);
        crc = pt_crc32c(0, w + 32, 8 * 40);
        put32(w, PT_TOKENIZER_MAGIC), put32(w + 4, 1), put32(w + 8, 40), put32(w + 12, 296), put32(w + 16, crc);
        snprintf(bad, sizeof bad, "%s/double.bin", dir);
        write_file(bad, w, sizeof w);
        last_err[0] = 0;
        t = pt_tokenizer_load(ctx, bad);
        CHECKF(!t && pt_status_get(ctx) == PT_ERR_FORMAT && strstr(last_err, bad) &&
                   strstr(last_err, "token 272 (merge 16: 271 + 271) expands to 131072 bytes, at most PT_TOK_MAX_TOKEN_BYTES (65536) allowed"),
               "a 352-byte tokenizer whose merges double (token 295: 2^40 bytes) is refused at load, naming the token, its bytes and the limit", "'%s'", last_err);
        pt_error_clear(ctx);
        pt_tokenizer_free(t);
        /* 11 such merges: a 2,048-byte token (a BPE of runs of 2,048 'a') loads and decodes */
        put32(w + 8, 11), put32(w + 12, 267), put32(w + 16, pt_crc32c(0, w + 32, 8 * 11));
        write_file(bad, w, 32 + 8 * 11);
        t = pt_tokenizer_load(ctx, bad);
        ids[0] = 266;
        CHECKF(t && pt_tokenizer_decode(t, ids, 1, back, sizeof back) == 2048 && back[0] == 'a' && back[2047] == 'a', "a tokenizer with a 2,048-byte token loads and decodes it",
               "%s", t ? "decode" : pt_error(ctx));
        pt_tokenizer_free(t);
        /* training keeps to the limit: 270,000 'a' and 20 merges make tokens of 2, 4, .. 65,536 bytes, not the 131,072 that occurs twice */
        memset(run, 'a', sizeof run);
        t = pt_tokenizer_train(ctx, run, (int64_t)sizeof run, 20);
        for (j = 0; t && j < pt_tokenizer_vocab(t); j++) {
            int32_t id = j;
            int64_t l = pt_tokenizer_decode(t, &id, 1, NULL, 0);
            maxlen = l > maxlen ? l : maxlen, t0 += l;
        }
        CHECKF(t && maxlen <= PT_TOK_MAX_TOKEN_BYTES && maxlen == 65536, "training on 270,000 'a' (4 runs of 65,536 and more) makes no token past PT_TOK_MAX_TOKEN_BYTES (the longest 65,536 bytes)",
               "longest %lld bytes, %d tokens", (long long)maxlen, t ? pt_tokenizer_vocab(t) : 0);
        pt_tokenizer_free(t);
        (void)t0;
#undef put32
    }
    pt_tokenizer_free(tk);
    pt_tokenizer_free(tl);
}

int main(int argc, char **argv) {
    pt_desc desc;
    pt_ctx *ctx;
    static uint32_t tok[1024];
    static int64_t ref[3 * TOTAL], got[3 * TOTAL], a[3 * TOTAL];
    int32_t x[TOTAL * T], y[TOTAL * T];
    int s, i, dp, sh, k;
    int64_t id = 1;
    tu_init(argc, argv);
    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--dir") && i + 1 < argc) snprintf(dir, sizeof dir, "%s", argv[++i]);
        if (!strcmp(argv[i], "--prepared") && i + 2 < argc) return check_prepared(argv[i + 1], argv[i + 2]);
    }
    {   /* the shard directory, made as mkdir -p would: without it nothing below can be written */
        char part[sizeof dir];
        size_t j, n = strlen(dir);
        for (j = 1; j <= n; j++)
            if (j == n || dir[j] == '/') memcpy(part, dir, j), part[j] = 0, mkdir(part, 0755);
        if (access(dir, W_OK) != 0) {
            CHECKF(0, "the shard directory can be written", "cannot write to '%s' (give --dir DIR)", dir);
            return tu_summary();
        }
    }
    memset(&desc, 0, sizeof desc);
    desc.on_error = on_err;
    ctx = pt_init(&desc);

    /* the dataset three times: ptrain uint32 (vocab 0), ptrain uint16, llm.c; same tokens */
    for (s = 0; s < NSH; s++) {
        first_id[s] = id;
        for (i = 0; i < sizes[s]; i++) tok[i] = (uint32_t)id++;
        snprintf(paths[s], sizeof paths[s], "%s/d32_%d.bin", dir, s);
        snprintf(paths16[s], sizeof paths16[s], "%s/d16_%d.bin", dir, s);
        snprintf(pathsl[s], sizeof pathsl[s], "%s/dllmc_%d.bin", dir, s);
        pp[s] = paths[s], pp16[s] = paths16[s], ppl[s] = pathsl[s];
        CHECK(pt_shard_write(ctx, paths[s], PT_SHARD_PTRAIN, tok, sizes[s], 0) == PT_OK &&
                  pt_shard_write(ctx, paths16[s], PT_SHARD_PTRAIN, tok, sizes[s], 1024) == PT_OK &&
                  pt_shard_write(ctx, pathsl[s], PT_SHARD_LLMC, tok, sizes[s], 0) == PT_OK,
              tu_name("write shard %d in three layouts", s));
    }
    {
        pt_shard_info i32, i16, il;
        pt_shard_info_read(ctx, paths[4], &i32), pt_shard_info_read(ctx, paths16[4], &i16), pt_shard_info_read(ctx, pathsl[4], &il);
        CHECKF(i32.token_bytes == 4 && i16.token_bytes == 2 && il.token_bytes == 2 && il.format == PT_SHARD_LLMC && il.header_bytes == 1024 &&
                   i32.tokens == 201 && i16.vocab == 1024 && il.tokens == 201,
               "shard headers read back (width, vocab, count, layout)", "widths %d %d %d", i32.token_bytes, i16.token_bytes, il.token_bytes);
    }

    /* every layout, every DP size, shuffled or not: the global batches equal the one-rank stream, and an
       epoch covers every window exactly once */
    for (sh = 0; sh <= 1; sh++) {
        int ok = stream(ctx, pp, 16, 1, sh, 0, 7, 3 * TOTAL / 16, ref, NULL);
        for (k = 0; k < 3; k++) {
            static int seen[4096];
            int once = 1, n = 0;
            memset(seen, 0, sizeof seen);
            for (i = 0; i < TOTAL; i++) {
                int64_t w = ref[k * TOTAL + i];
                if (w < 0 || w >= 4096 || seen[w]++) once = 0;
                else n++;
            }
            CHECKF(ok && once && n == TOTAL, tu_name("epoch %d (shuffle %d): the %d windows each exactly once", k, sh, TOTAL), "ok %d once %d n %d", ok, once, n);
        }
        if (sh) CHECK(memcmp(ref, ref + TOTAL, sizeof(int64_t) * TOTAL) != 0, "shuffle: epoch 1's order differs from epoch 0's");
        else {
            int inorder = 1;
            for (i = 1; i < TOTAL; i++) inorder &= ref[i] > ref[i - 1];
            CHECK(inorder, "no shuffle: windows in file order");
        }
        for (dp = 1; dp <= 4; dp *= 2) {
            int okd = stream(ctx, pp, 16, dp, sh, 2, 7, 3 * TOTAL / 16, got, NULL);
            CHECK(okd && !memcmp(got, ref, sizeof(int64_t) * 3 * TOTAL), tu_name("dp %d (shuffle %d, prefetch): union of the ranks' batches = the one-rank stream, 3 epochs", dp, sh));
        }
        CHECK(stream(ctx, pp16, 16, 2, sh, 0, 7, 3 * TOTAL / 16, got, NULL) && !memcmp(got, ref, sizeof(int64_t) * 3 * TOTAL),
              tu_name("uint16 ptrain shards give the same stream (shuffle %d)", sh));
        CHECK(stream(ctx, ppl, 16, 4, sh, 3, 7, 3 * TOTAL / 16, got, NULL) && !memcmp(got, ref, sizeof(int64_t) * 3 * TOTAL),
              tu_name("llm.c shards give the same stream (shuffle %d)", sh));
    }
    stream(ctx, pp, 16, 1, 1, 0, 8, TOTAL / 16, got, NULL);
    CHECK(memcmp(got, ref, sizeof(int64_t) * TOTAL) != 0, "another seed: another order");
    {   /* batch 24 does not divide 64: 2 batches per epoch, 16 windows skipped, none twice */
        static int seen[4096];
        int once = 1;
        memset(seen, 0, sizeof seen);
        stream(ctx, pp, 24, 2, 1, 1, 7, 2, got, NULL);
        for (i = 0; i < 48; i++) once &= got[i] >= 0 && got[i] < 4096 && !seen[got[i]]++;
        CHECK(once, "batch 24 (64 windows): 48 distinct windows in the epoch's 2 batches");
    }

    /* resume: a state saved after k batches continues the uninterrupted stream (same layout; dp 1 -> 2,
       dp 4 -> 1; another global batch), with and without the prefetch thread */
    stream(ctx, pp, 16, 1, 1, 0, 7, 12, ref, NULL);
    for (k = 0; k <= 9; k += 3) {
        pt_loader *L = mk(ctx, pp, 16, 0, 1, 1, 2, 7);
        pt_loader_state st;
        int ok = L != NULL;
        for (i = 0; i < k && ok; i++) ok = pt_loader_next(L, x, y) == PT_OK;
        st = pt_loader_get_state(L);
        pt_loader_free(L);
        CHECK(ok && stream(ctx, pp, 16, 1, 1, 2, 7, 12 - k, got, &st) && !memcmp(got, ref + 16 * k, sizeof(int64_t) * 16 * (12 - k)),
              tu_name("resume after %d batches (epoch %lld, sample %lld): the uninterrupted stream", k, (long long)st.epoch, (long long)st.sample));
        CHECK(stream(ctx, pp, 16, 2, 1, 0, 7, 12 - k, got, &st) && !memcmp(got, ref + 16 * k, sizeof(int64_t) * 16 * (12 - k)),
              tu_name("resume after %d batches of dp 1 on dp 2 (no prefetch): the uninterrupted stream", k));
        CHECK(stream(ctx, pp, 8, 4, 1, 1, 7, 2 * (12 - k), got, &st) && !memcmp(got, ref + 16 * k, sizeof(int64_t) * 16 * (12 - k)),
              tu_name("resume after %d batches of 16 with batch 8 on dp 4: the same samples, none repeated or skipped", k));
    }
    {   /* through the state registry: a checkpoint load overwrites the registered bytes */
        pt_loader *L = mk(ctx, pp, 16, 0, 1, 1, 2, 7), *M = mk(ctx, pp, 16, 0, 1, 1, 3, 7);
        pt_loader_state st;
        void *ptr = NULL;
        int64_t bytes = 0;
        int ok = L && M, n;
        for (i = 0; i < 5 && ok; i++) ok = pt_loader_next(L, x, y) == PT_OK;
        st = pt_loader_get_state(L);
        ok = ok && pt_loader_register(M, "data.train") == PT_OK && pt_loader_next(M, x, y) == PT_OK;
        n = pt_state_count(ctx);
        CHECK(ok && n >= 1 && !strcmp(pt_state_at(ctx, n - 1, &ptr, &bytes), "data.train") && bytes == (int64_t)sizeof st, "pt_loader_register: the state is in the registry");
        if (ptr) memcpy(ptr, &st, sizeof st);
        for (i = 5; i < 12 && ok; i++) {
            ok = pt_loader_next(M, x, y) == PT_OK;
            for (k = 0; k < 16 && ok; k++) a[16 * i + k] = window_of(x + k * T, y + k * T);
        }
        CHECK(ok && !memcmp(a + 80, ref + 80, sizeof(int64_t) * 16 * 7), "registered state overwritten (a checkpoint load): the stream continues from it");
        st.seq = T + 1;
        CHECK(pt_loader_set_state(M, &st) == PT_ERR_ARG, "a state of another seq is refused");
        {
            const char *msg = last_err;
            CHECK_HAS(msg, "expected seq 8", "  ... with a message");
        }
        pt_error_clear(ctx);
        {
            pt_loader_stats ls = pt_loader_stats_get(M);
            CHECKF(ls.batches == 8 && ls.wait_s >= 0 && ls.last_wait_s >= 0 && ls.batches_per_epoch == 4 && ls.samples_total == TOTAL && ls.shards == NSH,
                   "stats: batches, data wait, samples per epoch", "batches %lld wait %g", (long long)ls.batches, ls.wait_s);
        }
        pt_loader_free(L);
        pt_loader_free(M);
    }
    {   /* dir + prefix: the same shards, sorted by name */
        pt_loader_desc d;
        pt_loader *L;
        memset(&d, 0, sizeof d);
        d.dir = dir, d.prefix = "d32_", d.batch = 16, d.seq = T, d.shuffle = 1, d.seed = 7, d.prefetch = 2;
        L = pt_loader_new(ctx, &d);
        stream(ctx, pp, 16, 1, 1, 0, 7, 1, ref, NULL);
        for (k = 0; L && k < 16; k++) {
            if (k == 0) pt_loader_next(L, x, y);
            got[k] = window_of(x + k * T, y + k * T);
        }
        CHECK(L && !memcmp(got, ref, 16 * sizeof(int64_t)), "desc.dir + prefix: the same stream as the path list");
        pt_loader_free(L);
    }

    /* refused: bad shards, a dataset smaller than one global batch */
    {
        unsigned char h[2048];
        char bad[700];
        struct { const char *what, *msg; int llmc; size_t n; int off; uint32_t val; } cases[] = {
            {"truncated header (10 bytes)", "truncated header", 0, 10, -1, 0},
            {"garbled magic", "bad magic", 0, 64 + 40, 0, 0xDEADBEEFu},
            {"version 2", "version: expected 1, found 2", 0, 64 + 40, 4, 2},
            {"token width 3", "token width: expected 2 or 4", 0, 64 + 40, 8, 3},
            {"count larger than the data", "(truncated)", 0, 64 + 40, 16, 21},
            {"nonzero reserved byte", "reserved header byte", 0, 64 + 40, 40, 1},
            {"llm.c truncated header", "truncated llm.c header", 1, 600, -1, 0},
            {"llm.c version 3", "llm.c shard version: expected 1, found 3", 1, 1024 + 20, 4, 3},
            {"llm.c count smaller than the data", "expected 1036 bytes", 1, 1024 + 20, 8, 6},
        };
        int c;
        for (c = 0; c < (int)(sizeof cases / sizeof cases[0]); c++) {
            const char *one[NSH];
            pt_loader *L;
            pt_shard_info info;
            memset(h, 0, sizeof h);
            if (cases[c].llmc) h[0] = 0x88, h[1] = 0xD8, h[2] = 0x34, h[3] = 0x01, h[4] = 1, h[8] = 10; /* 20240520, v1, 10 tokens */
            else h[0] = 'P', h[1] = 'T', h[2] = 'K', h[3] = 'S', h[4] = 1, h[8] = 4, h[16] = 10;
            if (cases[c].off >= 0) h[cases[c].off] = (unsigned char)cases[c].val, h[cases[c].off + 1] = (unsigned char)(cases[c].val >> 8),
                                   h[cases[c].off + 2] = (unsigned char)(cases[c].val >> 16), h[cases[c].off + 3] = (unsigned char)(cases[c].val >> 24);
            snprintf(bad, sizeof bad, "%s/bad_%d.bin", dir, c);
            write_file(bad, h, cases[c].n);
            for (i = 0; i < NSH; i++) one[i] = i == 2 ? bad : pp[i];
            last_err[0] = 0;
            L = mk(ctx, one, 16, 0, 1, 1, 2, 7);
            CHECKF(!L && pt_status_get(ctx) == PT_ERR_FORMAT && strstr(last_err, bad) && strstr(last_err, cases[c].msg) && strstr(last_err, "expected"),
                   tu_name("refused: %s", cases[c].what), "loader %p, message '%s'", (void *)L, last_err);
            pt_error_clear(ctx);
            CHECK(pt_shard_info_read(ctx, bad, &info) == PT_ERR_FORMAT, tu_name("pt_shard_info_read refuses it too (%s)", cases[c].what));
            pt_error_clear(ctx);
            pt_loader_free(L);
        }
        printf("  e.g. %s\n", last_err);
        last_err[0] = 0;
        CHECK(!mk(ctx, pp, 128, 0, 2, 1, 2, 7) && pt_status_get(ctx) == PT_ERR_ARG && strstr(last_err, "smaller than one global batch"),
              "a dataset smaller than one global batch (64 samples, batch 128) is refused");
        printf("  %s\n", last_err);
        pt_error_clear(ctx);
        last_err[0] = 0;
        CHECK(!mk(ctx, pp, 18, 0, 4, 1, 2, 7) && pt_status_get(ctx) == PT_ERR_ARG && strstr(last_err, "divisible"), "a batch not divisible by the DP size is refused");
        pt_error_clear(ctx);
        {
            uint32_t big[3] = {1, 70000, 2};
            char p2[700];
            snprintf(p2, sizeof p2, "%s/big.bin", dir);
            CHECK(pt_shard_write(ctx, p2, PT_SHARD_LLMC, big, 3, 0) == PT_ERR_ARG, "llm.c layout refuses a token >= 65536");
            pt_error_clear(ctx);
            CHECK(pt_shard_write(ctx, p2, PT_SHARD_PTRAIN, big, 3, 100000) == PT_OK, "ptrain layout stores a token >= 65536 (vocab 100000, 4 bytes)");
        }
    }
    test_idx(ctx);
    test_truncated(ctx);
    test_bpe(ctx);
    pt_shutdown(ctx);
    return tu_summary();
}
