/* test_gguf.c - GGUF files (>>gguf): the container's reader and writer, pt_gguf_export of a
   checkpoint as llama.cpp's gpt2, pt_gguf_load back as inference weights.

   Writer -> reader: every metadata value type (extremes of each integer type, f32, f64, bool,
   strings, arrays of each, empty arrays) reads back exactly; tensors of f32 / f16 / q8_0 / q4_0 at
   alignment 32, 64 and 1, their data given in pieces, sit at offsets that are multiples of the
   alignment with the same bytes; the writer refuses a duplicate key, its own general.alignment, a
   bad type, a name of 64 bytes, rows that are not whole blocks, more or fewer bytes than the
   tensors hold (an unfinished file leaves no file and no .tmp).
   Malformed files, built byte by byte by this test's own small writer: the reader refuses each,
   naming the field (bad magic, versions 1, 4 and big-endian, counts the file cannot hold, an
   empty key, a key with a NUL, a value type 13, arrays of arrays, an array longer than the file, a
   bool 2, a duplicate key, general.alignment of another type or not a power of two, a tensor name of
   64 bytes, n_dims 0 and 5, a dim of 2^63, dims whose bytes overflow, the removed type 4 and 99,
   q8_0 rows of 33, an offset other than ggml's, data past the end, a duplicate tensor name), and
   every truncation of a valid file (each prefix up to the last tensor's end) is refused as
   "truncated" without reading past the bytes given.
   Export: tiny trained GPTs (tied with a padded byte vocabulary of 60; untied with 256; a BPE of
   20 merges; width 48, whose rows are not whole 32-blocks) exported as f32, f16, bf16, q8_0 and q4_0:
   the gpt2 keys, the vocabulary (GPT-2's byte characters, the extra merge 0xFF 0xFF, the
   control token <|endoftext|> as bos/eos, ptrain.vocab), each tensor's name, shape and type as
   llama.cpp's tools choose them (vectors and position_embd f32; q4_0: the head q8_0; rows that are
   not whole blocks f16), its values: f32 bit for bit, f16 / bf16 within half an ulp, q8_0 / q4_0
   the quantizer's bytes and within the format's error of the checkpoint, the vocabulary's extra
   rows zero. pt_gguf_load of each: the configuration, every matrix in its stored type pointing
   into the mapping, vectors f32, head = wte when tied, and the tokenizer reproduced (the same
   merges; the same ids for a text). Refused by pt_gguf_load, naming the field or tensor: another
   architecture, a missing tensor, another shape, a q6_K tensor, an extra tensor, feed_forward
   not 4 x width, another layernorm epsilon, a token list of another length, a block_count that the
   tensors cannot hold; a file of alignment 1 (misaligned data) loads through copies. GPT-2's own
   tokenizer files (pt_tokenizer_load_gpt2, ids 0..255 in GPT-2's order): its ids, the file of
   version 2, a checkpoint of vocabulary 256 + merges + 1 carrying it, its GGUF export and load.

   Run: test_gguf [DIR] [--quick] (DIR default: gguf beside the program; it keeps the checkpoints,
   the BPE's tokenizer.bin and the exports for tests/gguf_test.sh, whose Python reads them with the
   `gguf` package). test_gguf --foreign FILE
   checks a gpt2 file written by tests/gguf_test.sh's Python (values from a formula shared with it). */
#define _POSIX_C_SOURCE 200809L
#define PTRAIN_IMPLEMENTATION
#include "ptrain.h"
#include "test_util.h"
#include <sys/stat.h>
#include <unistd.h>

static char OUT[700];
static char LOG[1 << 16];
static void log_cb(void *user, int level, const char *msg) {
    size_t n = strlen(LOG);
    (void)user, (void)level;
    if (n + strlen(msg) + 2 < sizeof LOG) snprintf(LOG + n, sizeof LOG - n, "%s\n", msg);
}
static pt_ctx *new_ctx(void) {
    pt_desc d;
    memset(&d, 0, sizeof d);
    d.seed = 7, d.threads = 1, d.device = "cpu", d.log = log_cb;
    return pt_init(&d);
}
static unsigned char *slurp(const char *path, long *n) {
    FILE *f = fopen(path, "rb");
    unsigned char *b = NULL;
    long len = -1;
    if (f && fseek(f, 0, SEEK_END) == 0) len = ftell(f);
    if (len >= 0 && fseek(f, 0, SEEK_SET) == 0 && (b = (unsigned char *)malloc((size_t)len + 1)) && fread(b, 1, (size_t)len, f) != (size_t)len) free(b), b = NULL;
    if (f) fclose(f);
    *n = len;
    return b;
}
/* ---- this test's own GGUF byte builder (no library code): for malformed files ---- */
typedef struct bb {
    unsigned char *p;
    size_t n, cap;
} bb;
static void b_raw(bb *b, const void *p, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = (unsigned char *)realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
}
static void b_le(bb *b, unsigned long long v, int k) {
    unsigned char c[8];
    int i;
    for (i = 0; i < k; i++) c[i] = (unsigned char)(v >> (8 * i));
    b_raw(b, c, (size_t)k);
}
static void b_zero(bb *b, size_t n) {
    while (n--) b_le(b, 0, 1);
}
static void b_str(bb *b, const char *s) { b_le(b, strlen(s), 8), b_raw(b, s, strlen(s)); }
static void b_hdr(bb *b, unsigned v, unsigned long long nt, unsigned long long nkv) { b_raw(b, "GGUF", 4), b_le(b, v, 4), b_le(b, nt, 8), b_le(b, nkv, 8); }
static void b_kv_u32(bb *b, const char *k, unsigned v) { b_str(b, k), b_le(b, 4, 4), b_le(b, v, 4); }
static void b_kv_str(bb *b, const char *k, const char *v) { b_str(b, k), b_le(b, 8, 4), b_str(b, v); }
/* a tensor info: name, ndim dims, type, offset */
static void b_ti(bb *b, const char *name, int nd, const unsigned long long *ne, unsigned type, unsigned long long off) {
    int d;
    b_str(b, name), b_le(b, (unsigned)nd, 4);
    for (d = 0; d < nd; d++) b_le(b, ne[d], 8);
    b_le(b, type, 4), b_le(b, off, 8);
}
static void b_pad(bb *b, size_t a) {
    while (b->n % a) b_le(b, 0, 1);
}

/* the reader refuses bytes with a message that has want in it */
static void refuses(const bb *b, const char *name, const char *want) {
    char err[1024];
    pt_gguf *g;
    err[0] = 0;
    g = pt_gguf_parse(b->p, b->n, err, sizeof err);
    if (g) {
        pt_gguf_free(g);
        CHECKF(0, name, "parsed, expected a refusal naming '%s'", want);
        return;
    }
    {
        const char *e = err;
        CHECK_HAS(e, want, name);
    }
}

static void test_malformed(void) {
    unsigned long long ne[4] = {4, 2, 1, 1};
    bb b;
    char n64[65];
    int i;
    memset(n64, 'x', 64), n64[64] = 0;
#define FRESH() (free(b.p), memset(&b, 0, sizeof b))
    memset(&b, 0, sizeof b);
    /* a valid tiny file first */
    b_hdr(&b, 3, 1, 2), b_kv_str(&b, "general.architecture", "x"), b_kv_u32(&b, "a.b", 5), b_ti(&b, "t", 2, ne, 0, 0), b_pad(&b, 32);
    for (i = 0; i < 8; i++) b_le(&b, 0x3f800000u, 4);
    {
        char err[512];
        pt_gguf *g = pt_gguf_parse(b.p, b.n, err, sizeof err);
        const pt_gguf_tensor *t = pt_gguf_tensor_find(g, "t");
        CHECKF(g && t && t->bytes == 32 && t->ne[0] == 4 && t->ne[1] == 2 && ((const float *)t->data)[7] == 1.0f, "hand-built file parses", "%s", g ? "bad tensor" : err);
        pt_gguf_free(g);
    }
    FRESH(), b_raw(&b, "GGUG", 4), b_le(&b, 3, 4), b_zero(&b, 16), refuses(&b, "bad magic refused", "magic: expected \"GGUF\"");
    FRESH(), b_hdr(&b, 1, 0, 0), refuses(&b, "version 1 refused", "version: expected 3");
    FRESH(), b_hdr(&b, 4, 0, 0), refuses(&b, "version 4 refused", "found 4");
    FRESH(), b_hdr(&b, 0x03000000u, 0, 0), refuses(&b, "big-endian refused by name", "big-endian");
    FRESH(), b_hdr(&b, 3, 1ull << 62, 0), refuses(&b, "tensor_count the file cannot hold refused", "tensor_count: expected at most 0");
    FRESH(), b_hdr(&b, 3, 0, 1000), b_kv_u32(&b, "a", 1), refuses(&b, "metadata_kv_count the file cannot hold refused", "metadata_kv_count: expected at most");
    FRESH(), b_hdr(&b, 3, 0, 1), b_str(&b, ""), b_le(&b, 4, 4), b_le(&b, 1, 4), refuses(&b, "empty key refused", "key: expected 1 or more bytes");
    FRESH(), b_hdr(&b, 3, 0, 1), b_le(&b, 3, 8), b_raw(&b, "a\0b", 3), b_le(&b, 4, 4), b_le(&b, 1, 4), refuses(&b, "key with a NUL refused", "NUL");
    FRESH(), b_hdr(&b, 3, 0, 1), b_str(&b, "k"), b_le(&b, 13, 4), b_le(&b, 1, 8), refuses(&b, "value type 13 refused", "value type: expected 0..12");
    FRESH(), b_hdr(&b, 3, 0, 1), b_str(&b, "k"), b_le(&b, 9, 4), b_le(&b, 9, 4), b_le(&b, 0, 8), refuses(&b, "array of arrays refused", "element type");
    FRESH(), b_hdr(&b, 3, 0, 1), b_str(&b, "k"), b_le(&b, 9, 4), b_le(&b, 5, 4), b_le(&b, 1000, 8), b_le(&b, 0, 8),
        refuses(&b, "array longer than the file refused", "length: expected at most 2");
    FRESH(), b_hdr(&b, 3, 0, 1), b_str(&b, "k"), b_le(&b, 9, 4), b_le(&b, 8, 4), b_le(&b, 2, 8), b_str(&b, "ok"), b_le(&b, 99, 8), b_raw(&b, "abc", 3),
        refuses(&b, "a string of an array past the end refused", "element 1 of metadata array 'k'");
    FRESH(), b_hdr(&b, 3, 0, 1), b_str(&b, "flag"), b_le(&b, 7, 4), b_le(&b, 2, 1), refuses(&b, "bool 2 refused", "metadata 'flag': bool: expected 0 or 1, found 2");
    FRESH(), b_hdr(&b, 3, 0, 2), b_kv_u32(&b, "dup", 1), b_kv_u32(&b, "dup", 2), refuses(&b, "duplicate key refused", "metadata key 'dup': expected once");
    FRESH(), b_hdr(&b, 3, 0, 1), b_str(&b, "general.alignment"), b_le(&b, 10, 4), b_le(&b, 64, 8), refuses(&b, "general.alignment as u64 refused", "type: expected u32, found u64");
    FRESH(), b_hdr(&b, 3, 0, 1), b_kv_u32(&b, "general.alignment", 24), refuses(&b, "general.alignment 24 refused", "expected a power of two, found 24");
    FRESH(), b_hdr(&b, 3, 0, 1), b_kv_u32(&b, "general.alignment", 0), refuses(&b, "general.alignment 0 refused", "expected a power of two, found 0");
    FRESH(), b_hdr(&b, 3, 1, 0), b_ti(&b, n64, 2, ne, 0, 0), refuses(&b, "tensor name of 64 bytes refused", "name: expected 1..63 bytes");
    FRESH(), b_hdr(&b, 3, 1, 0), b_ti(&b, "t", 0, ne, 0, 0), b_zero(&b, 64), refuses(&b, "n_dims 0 refused", "n_dims: expected 1..4, found 0");
    FRESH(), b_hdr(&b, 3, 1, 0), b_str(&b, "t"), b_le(&b, 5, 4), b_zero(&b, 64), refuses(&b, "n_dims 5 refused", "n_dims: expected 1..4, found 5");
    {
        unsigned long long big[2] = {1ull << 63, 1}, ov[3] = {1ull << 40, 1ull << 30, 1};
        FRESH(), b_hdr(&b, 3, 1, 0), b_ti(&b, "t", 2, big, 0, 0), refuses(&b, "a dim of 2^63 refused", "ne[0]: expected 0 .. 2^63-1");
        FRESH(), b_hdr(&b, 3, 1, 0), b_ti(&b, "t", 3, ov, 0, 0), refuses(&b, "dims whose bytes overflow refused", "expected at most 2^63 bytes");
    }
    FRESH(), b_hdr(&b, 3, 1, 0), b_ti(&b, "t", 2, ne, 4, 0), refuses(&b, "removed type 4 refused", "type: expected a ggml type");
    FRESH(), b_hdr(&b, 3, 1, 0), b_ti(&b, "t", 2, ne, 99, 0), refuses(&b, "type 99 refused", "found 99");
    {
        unsigned long long q[2] = {33, 1};
        FRESH(), b_hdr(&b, 3, 1, 0), b_ti(&b, "t", 2, q, 8, 0), refuses(&b, "q8_0 rows of 33 refused", "expected a multiple of the type's block of 32, found 33");
    }
    FRESH(), b_hdr(&b, 3, 1, 0), b_ti(&b, "t", 2, ne, 0, 64), b_pad(&b, 32), b_le(&b, 0, 8), refuses(&b, "an offset other than ggml's refused", "offset: expected 0");
    FRESH(), b_hdr(&b, 3, 2, 0), b_ti(&b, "t", 2, ne, 0, 0), b_ti(&b, "u", 2, ne, 0, 40), b_pad(&b, 32), b_zero(&b, 128),
        refuses(&b, "a second tensor not at the aligned end refused", "tensor 'u': offset: expected 32 (the previous tensor's end");
    FRESH(), b_hdr(&b, 3, 1, 0), b_ti(&b, "t", 2, ne, 0, 0), b_pad(&b, 32), b_le(&b, 0, 8), refuses(&b, "data past the end refused", "truncated");
    FRESH(), b_hdr(&b, 3, 2, 0), b_ti(&b, "t", 2, ne, 0, 0), b_ti(&b, "t", 2, ne, 0, 32), b_pad(&b, 32), b_zero(&b, 64),
        refuses(&b, "duplicate tensor name refused", "tensor name 't': expected once");
    FRESH(), b_hdr(&b, 3, 0, 1), b_le(&b, 1ull << 60, 8), b_raw(&b, "abcdefgh", 8), refuses(&b, "a key length past the end refused", "truncated: the key of metadata entry 0");
#undef FRESH
    free(b.p);
}

/* every prefix of a valid file shorter than its last tensor's end is refused as truncated */
static void test_truncations(const char *path, const char *label) {
    long n = 0, L, bad = 0, firstbad = -1;
    unsigned char *p = slurp(path, &n), *cp;
    char err[1024], keep[1024];
    pt_gguf *g = p ? pt_gguf_parse(p, (size_t)n, err, sizeof err) : NULL;
    int64_t end = 0, i;
    keep[0] = 0;
    if (!CHECKF(g != NULL, tu_name("%s parses", label), "%s", p ? err : "cannot read")) {
        free(p);
        return;
    }
    for (i = 0; i < pt_gguf_tensor_count(g); i++) {
        const pt_gguf_tensor *t = pt_gguf_tensor_at(g, i);
        int64_t e = (int64_t)((const unsigned char *)t->data - p) + t->bytes;
        if (e > end) end = e;
    }
    pt_gguf_free(g);
    for (L = 0; L < end; L++) {
        /* a private copy of exactly L bytes: ASan sees any read past it */
        cp = (unsigned char *)malloc((size_t)(L ? L : 1));
        memcpy(cp, p, (size_t)L);
        err[0] = 0;
        g = pt_gguf_parse(cp, (size_t)L, err, sizeof err);
        if (g || !strstr(err, "truncated")) {
            if (!bad++) firstbad = L, snprintf(keep, sizeof keep, "%s", g ? "(parsed)" : err);
        }
        pt_gguf_free(g);
        free(cp);
        if (tu_quick && L > 4096 && L < end - 64) L += 97; /* ASan build: the header byte by byte, the data sampled */
    }
    CHECKF(!bad, tu_name("%s: every truncation below byte %lld refused as truncated", label, (long long)end), "%ld prefixes not, the first at %ld: %s", bad,
           firstbad, keep);
    g = pt_gguf_parse(p, (size_t)end, err, sizeof err);
    CHECKF(g != NULL, tu_name("%s: the prefix up to the last tensor's end parses", label), "%s", err);
    pt_gguf_free(g);
    free(p);
}

/* ---- writer -> reader ---- */
static void test_writer(void) {
    char path[800], err[1024];
    pt_gguf_writer *w;
    pt_gguf *g;
    uint8_t u8 = 255, bt = 1, bools[3] = {1, 0, 1};
    int8_t i8 = -128;
    uint16_t u16 = 65535;
    int16_t i16 = -32768;
    uint32_t u32 = 4294967295u;
    int32_t i32 = INT32_MIN, ai[4] = {-1, 0, 7, INT32_MAX};
    float f32 = 1.5f, af[2] = {-0.25f, 3e38f};
    uint64_t u64 = UINT64_MAX, u64s = 12345678901234ull;
    int64_t i64 = INT64_MIN, v = 0, n = 0;
    double f64 = 3.141592653589793, d = 0;
    const char *str = "h\xc3\xa9llo w\xc3\xb6rld", *strs[3] = {"a", "", "\xc4\xa0the"};
    int32_t et = 0;
    unsigned a;
    snprintf(path, sizeof path, "%s/types.gguf", OUT);
    w = pt_gguf_writer_new(0);
    pt_gguf_writer_kv(w, "u8", PT_GGUF_U8, &u8), pt_gguf_writer_kv(w, "i8", PT_GGUF_I8, &i8), pt_gguf_writer_kv(w, "u16", PT_GGUF_U16, &u16);
    pt_gguf_writer_kv(w, "i16", PT_GGUF_I16, &i16), pt_gguf_writer_kv(w, "u32", PT_GGUF_U32, &u32), pt_gguf_writer_kv(w, "i32", PT_GGUF_I32, &i32);
    pt_gguf_writer_kv(w, "f32", PT_GGUF_F32, &f32), pt_gguf_writer_kv(w, "bool", PT_GGUF_BOOL, &bt), pt_gguf_writer_kv(w, "str", PT_GGUF_STRING, &str);
    pt_gguf_writer_kv(w, "u64", PT_GGUF_U64, &u64), pt_gguf_writer_kv(w, "u64s", PT_GGUF_U64, &u64s), pt_gguf_writer_kv(w, "i64", PT_GGUF_I64, &i64);
    pt_gguf_writer_kv(w, "f64", PT_GGUF_F64, &f64);
    pt_gguf_writer_arr(w, "ai", PT_GGUF_I32, ai, 4), pt_gguf_writer_arr(w, "af", PT_GGUF_F32, af, 2), pt_gguf_writer_arr(w, "ab", PT_GGUF_BOOL, bools, 3);
    pt_gguf_writer_arr(w, "as", PT_GGUF_STRING, strs, 3), pt_gguf_writer_arr(w, "empty", PT_GGUF_U8, NULL, 0);
    CHECKF(pt_gguf_writer_begin(w, path) == PT_OK && pt_gguf_writer_finish(w) == PT_OK, "writer: every value type, no tensor", "%s", pt_gguf_writer_error(w));
    pt_gguf_writer_free(w);
    g = pt_gguf_open(path, err, sizeof err);
    if (CHECKF(g != NULL, "reader: the value types file opens", "%s", err)) {
#define KI(key) (pt_gguf_kv_int(g, pt_gguf_kv_find(g, key), 0, &v) ? v : -999)
        CHECK(KI("u8") == 255 && KI("i8") == -128 && KI("u16") == 65535 && KI("i16") == -32768 && KI("u32") == 4294967295ll && KI("i32") == INT32_MIN &&
                  KI("bool") == 1 && KI("u64s") == 12345678901234ll && KI("i64") == INT64_MIN,
              "reader: integer extremes of every type read back");
        CHECK(!pt_gguf_kv_int(g, pt_gguf_kv_find(g, "u64"), 0, &v), "reader: a u64 above 2^63-1 is no int64 (0)");
        CHECK(pt_gguf_kv_type(g, pt_gguf_kv_find(g, "u64"), NULL, NULL) == PT_GGUF_U64, "reader: the type of a value");
        CHECK(pt_gguf_kv_float(g, pt_gguf_kv_find(g, "f32"), 0, &d) && d == 1.5 && pt_gguf_kv_float(g, pt_gguf_kv_find(g, "f64"), 0, &d) && d == f64,
              "reader: f32 and f64 read back exactly");
        {
            const char *s = pt_gguf_kv_str(g, pt_gguf_kv_find(g, "str"), 0, &n);
            CHECK(s && n == (int64_t)strlen(str) && !memcmp(s, str, (size_t)n), "reader: a UTF-8 string reads back");
        }
        CHECK(pt_gguf_kv_type(g, pt_gguf_kv_find(g, "ai"), &et, &n) == PT_GGUF_ARRAY && et == PT_GGUF_I32 && n == 4 && pt_gguf_kv_int(g, pt_gguf_kv_find(g, "ai"), 3, &v) &&
                  v == INT32_MAX && pt_gguf_kv_int(g, pt_gguf_kv_find(g, "ai"), 0, &v) && v == -1 && !pt_gguf_kv_int(g, pt_gguf_kv_find(g, "ai"), 4, &v),
              "reader: an i32 array (and index 4 of 4 is refused)");
        CHECK(pt_gguf_kv_float(g, pt_gguf_kv_find(g, "af"), 1, &d) && (float)d == 3e38f && pt_gguf_kv_int(g, pt_gguf_kv_find(g, "ab"), 2, &v) && v == 1,
              "reader: f32 and bool arrays");
        {
            int64_t l0, l1, l2;
            const char *s0 = pt_gguf_kv_str(g, pt_gguf_kv_find(g, "as"), 0, &l0), *s1 = pt_gguf_kv_str(g, pt_gguf_kv_find(g, "as"), 1, &l1),
                       *s2 = pt_gguf_kv_str(g, pt_gguf_kv_find(g, "as"), 2, &l2);
            CHECK(s0 && l0 == 1 && *s0 == 'a' && s1 && l1 == 0 && s2 && l2 == 5 && !memcmp(s2, strs[2], 5), "reader: a string array (an empty string in it)");
        }
        CHECK(pt_gguf_kv_type(g, pt_gguf_kv_find(g, "empty"), &et, &n) == PT_GGUF_ARRAY && et == PT_GGUF_U8 && n == 0, "reader: an empty array");
        CHECK(pt_gguf_kv_count(g) == 18 && pt_gguf_tensor_count(g) == 0 && pt_gguf_kv_find(g, "nope") == -1 && !pt_gguf_kv_key(g, 18), "reader: counts and a missing key");
#undef KI
        pt_gguf_free(g);
    }
    /* tensors at alignments 32, 64 and 1, data in pieces */
    for (a = 1; a <= 64; a *= 2) {
        float x[96], y[96];
        uint16_t h[5];
        unsigned char q8[2 * 34], q4[18];
        int64_t ne3[1] = {3}, neq8[2] = {32, 2}, ne5[1] = {5}, neq4[2] = {32, 1}, k;
        uint32_t va = 0;
        int64_t doff = 0;
        if (a != 1 && a != 32 && a != 64) continue;
        for (k = 0; k < 96; k++) x[k] = (float)(k % 13) * 0.25f - 1.0f;
        for (k = 0; k < 5; k++) h[k] = pt__f16_from_f32(x[k]);
        pt_quantize_row(PT_W_Q8_0, x, q8, 64);
        pt_quantize_row(PT_W_Q4_0, x, q4, 32);
        snprintf(path, sizeof path, "%s/align%u.gguf", OUT, a);
        w = pt_gguf_writer_new(a);
        pt_gguf_writer_tensor(w, "f", 0, 1, ne3); /* ggml types: 0 f32, 8 q8_0, 1 f16, 2 q4_0 */
        pt_gguf_writer_tensor(w, "q8", 8, 2, neq8);
        pt_gguf_writer_tensor(w, "h", 1, 1, ne5);
        pt_gguf_writer_tensor(w, "q4", 2, 2, neq4);
        pt_gguf_writer_begin(w, path);
        pt_gguf_writer_data(w, x, 12);
        for (k = 0; k < (int64_t)sizeof q8; k++) pt_gguf_writer_data(w, q8 + k, 1); /* byte by byte */
        pt_gguf_writer_data(w, h, 10);
        pt_gguf_writer_data(w, q4, 18);
        CHECKF(pt_gguf_writer_finish(w) == PT_OK, tu_name("writer: 4 tensors at alignment %u, data in pieces", a), "%s", pt_gguf_writer_error(w));
        pt_gguf_writer_free(w);
        g = pt_gguf_open(path, err, sizeof err);
        if (CHECKF(g != NULL, tu_name("reader: alignment %u file opens", a), "%s", err)) {
            const pt_gguf_tensor *tf = pt_gguf_tensor_find(g, "f"), *t8 = pt_gguf_tensor_find(g, "q8"), *th = pt_gguf_tensor_find(g, "h"),
                                 *t4 = pt_gguf_tensor_find(g, "q4");
            pt_gguf_info(g, NULL, &va, &doff);
            CHECK(va == a && doff % a == 0 && (a == 32) == (pt_gguf_kv_find(g, "general.alignment") < 0), tu_name("reader: alignment %u (general.alignment written unless 32)", a));
            CHECK(tf && t8 && th && t4 && tf->offset == 0 && t8->offset % a == 0 && th->offset % a == 0 && t4->offset % a == 0 && t8->offset >= 12 &&
                      th->offset >= t8->offset + 68 && t4->offset >= th->offset + 10 && t8->bytes == 68 && t4->bytes == 18,
                  tu_name("reader: offsets are multiples of %u, in order, sizes right", a));
            if (tf && t8 && th && t4) {
                unsigned char al[68];
                memcpy(al, t8->data, 68); /* at alignment 1 the blocks sit at odd addresses */
                pt_dequantize_row(PT_W_Q8_0, al, y, 64);
                CHECK(!memcmp(tf->data, x, 12) && !memcmp(t8->data, q8, 68) && !memcmp(th->data, h, 10) && !memcmp(t4->data, q4, 18) && fabsf(y[5] - x[5]) < 0.01f,
                      tu_name("reader: the bytes of each tensor at alignment %u", a));
            }
            pt_gguf_free(g);
        }
    }
    /* the writer's refusals */
    w = pt_gguf_writer_new(0);
    pt_gguf_writer_kv(w, "k", PT_GGUF_U32, &u32);
    CHECK_HAS(pt_gguf_writer_kv(w, "k", PT_GGUF_U32, &u32) != PT_OK ? pt_gguf_writer_error(w) : "", "added twice", "writer refuses a duplicate key");
    pt_gguf_writer_free(w);
    w = pt_gguf_writer_new(0);
    CHECK_HAS(pt_gguf_writer_kv(w, "general.alignment", PT_GGUF_U32, &u32) != PT_OK ? pt_gguf_writer_error(w) : "", "the writer's", "writer refuses general.alignment as a key");
    pt_gguf_writer_free(w);
    CHECK(pt_gguf_writer_new(24) == NULL, "writer refuses alignment 24");
    {
        int64_t ne33[1] = {33}, ne4[1] = {4};
        static const unsigned char zeros20[20] = {0};
        char n64[65];
        memset(n64, 'y', 64), n64[64] = 0;
        w = pt_gguf_writer_new(0);
        CHECK_HAS(pt_gguf_writer_tensor(w, "q", 8, 1, ne33) != PT_OK ? pt_gguf_writer_error(w) : "", "whole blocks", "writer refuses q8_0 rows of 33");
        pt_gguf_writer_free(w);
        w = pt_gguf_writer_new(0);
        CHECK_HAS(pt_gguf_writer_tensor(w, n64, 0, 1, ne4) != PT_OK ? pt_gguf_writer_error(w) : "", "1..63 characters", "writer refuses a name of 64 bytes");
        pt_gguf_writer_free(w);
        w = pt_gguf_writer_new(0);
        CHECK_HAS(pt_gguf_writer_tensor(w, "t", 4, 1, ne4) != PT_OK ? pt_gguf_writer_error(w) : "", "known type", "writer refuses the removed type 4");
        pt_gguf_writer_free(w);
        snprintf(path, sizeof path, "%s/unfinished.gguf", OUT);
        unlink(path);
        w = pt_gguf_writer_new(0);
        pt_gguf_writer_tensor(w, "t", 0, 1, ne4);
        pt_gguf_writer_begin(w, path);
        pt_gguf_writer_data(w, af, 8);
        CHECK_HAS(pt_gguf_writer_finish(w) != PT_OK ? pt_gguf_writer_error(w) : "", "has 8 of its 16 bytes", "writer refuses to finish a tensor without all its bytes");
        pt_gguf_writer_free(w);
        {
            char tmp[820];
            snprintf(tmp, sizeof tmp, "%s.tmp", path);
            CHECK(access(path, F_OK) != 0 && access(tmp, F_OK) != 0, "... and leaves neither the file nor its .tmp");
        }
        w = pt_gguf_writer_new(0);
        pt_gguf_writer_tensor(w, "t", 0, 1, ne4);
        pt_gguf_writer_begin(w, path);
        CHECK_HAS(pt_gguf_writer_data(w, zeros20, 20) != PT_OK ? pt_gguf_writer_error(w) : "", "more than the tensors hold", "writer refuses more bytes than the tensors hold");
        pt_gguf_writer_free(w);
    }
}

/* ---- GPT-2's byte characters, computed as GPT-2's bytes_to_unicode does (independent of the library) ---- */
static char BYTECH[256][3];
static void init_bytech(void) {
    int bs[256], cs[256], nb = 0, b, k, n = 0;
    for (b = 0; b < 256; b++)
        if ((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)) bs[nb] = b, cs[nb++] = b;
    for (b = 0; b < 256; b++) {
        for (k = 0; k < nb && bs[k] != b; k++) {}
        if (k == nb) bs[nb] = b, cs[nb++] = 256 + n++;
    }
    for (k = 0; k < 256; k++) {
        int c = cs[k];
        char *o = BYTECH[bs[k]];
        if (c < 0x80) o[0] = (char)c, o[1] = 0;
        else o[0] = (char)(0xC0 | (c >> 6)), o[1] = (char)(0x80 | (c & 0x3F)), o[2] = 0;
    }
}
/* the token text of n bytes */
static void tok_text(const unsigned char *p, int64_t n, char *out, size_t cap) {
    size_t k = 0;
    int64_t i;
    for (i = 0; i < n && k + 3 < cap; i++) k += (size_t)snprintf(out + k, cap - k, "%s", BYTECH[p[i]]);
    out[k] = 0;
}
static int str_is(const pt_gguf *g, const char *key, int64_t j, const char *want) {
    int64_t n = -1;
    const char *s = pt_gguf_kv_str(g, pt_gguf_kv_find(g, key), j, &n);
    return s && n == (int64_t)strlen(want) && !memcmp(s, want, (size_t)n);
}
static int64_t int_of(const pt_gguf *g, const char *key, int64_t j) {
    int64_t v = -999;
    return pt_gguf_kv_int(g, pt_gguf_kv_find(g, key), j, &v) ? v : -999;
}

/* ---- a tiny trained GPT's checkpoint ---- */
static const char TEXT[] = "the cat sat on the mat; the cat ate the rat. the end of the story is near, the theme is there.";
static int make_ckpt(const char *dir, const pt_gpt_config *cfg) {
    pt_ctx *ctx = new_ctx();
    pt_gpt *m = ctx ? pt_gpt_new(ctx, cfg) : NULL;
    pt_optim_desc od;
    pt_optim *o = NULL;
    pt_graph *g = NULL;
    pt_ckpt_opts co;
    int32_t ids[2 * 4], tgt[2 * 4];
    int k, i, ok = m != NULL;
    memset(&od, 0, sizeof od);
    od.kind = PT_OPTIM_ADAMW, od.lr = 1e-2f;
    ok = ok && (o = pt_optim_new(ctx, &od)) != NULL && (g = pt_graph_new(ctx)) != NULL;
    for (k = 0; k < 2 && ok; k++) { /* two steps: biases and norms move off 0 and 1 */
        pt_tensor *x, *y, *loss;
        for (i = 0; i < 8; i++) ids[i] = (i * 7 + k * 13) % cfg->vocab, tgt[i] = (i * 5 + k * 3 + 1) % cfg->vocab;
        pt_graph_reset(g);
        x = pt_tensor_new(g, PT_I32, 2, 2, 4, 0, 0), y = pt_tensor_new(g, PT_I32, 2, 2, 4, 0, 0);
        pt_tensor_write(x, ids), pt_tensor_write(y, tgt);
        loss = pt_gpt_loss(g, m, x, y);
        pt_zero_grad(ctx);
        ok = loss && pt_backward(g, loss) == PT_OK;
        if (ok) pt_optim_step(o, 1e-2f), ok = pt_status_get(ctx) == PT_OK;
    }
    memset(&co, 0, sizeof co);
    co.model = cfg;
    ok = ok && pt_ckpt_save(ctx, o, dir, 2, &co) == PT_OK;
    if (!ok) printf("  make_ckpt %s: %s\n", dir, ctx ? pt_error(ctx) : "no context");
    if (g) pt_graph_free(g);
    if (o) pt_optim_free(o);
    if (m) pt_gpt_free(m);
    if (ctx) pt_shutdown(ctx);
    return ok;
}

enum { R_VEC, R_POS, R_MAT, R_EMB, R_OUT };
/* the type llama.cpp's tools give a tensor (the spec of pt_gguf_export) */
static int32_t want_type(int role, pt_wtype ft, int64_t cols, int tied) {
    int32_t t = (int32_t)ft;
    if (role == R_VEC || role == R_POS) return 0;
    if (ft == PT_W_Q4_0 && (role == R_OUT || (role == R_EMB && tied))) t = PT_W_Q8_0;
    if ((t == PT_W_Q4_0 || t == PT_W_Q8_0) && cols % 32) t = PT_W_F16;
    return t;
}
/* the exported tensors: gguf name, ptrain name, role, rows (0 vector), cols */
typedef struct tmap {
    char gg[64], pt[64];
    int role;
    int64_t rows, cols;
} tmap;
static int tensor_map(const pt_gpt_config *c, int64_t V, tmap *t) {
    static const char *const gn[12] = {"attn_norm.weight", "attn_norm.bias", "attn_qkv.weight", "attn_qkv.bias", "attn_output.weight", "attn_output.bias",
                                       "ffn_norm.weight",  "ffn_norm.bias",  "ffn_up.weight",   "ffn_up.bias",   "ffn_down.weight",    "ffn_down.bias"};
    static const char *const pn[12] = {"ln1.w", "ln1.b", "attn.w", "attn.b", "attn_proj.w", "attn_proj.b", "ln2.w", "ln2.b", "mlp.fc.w", "mlp.fc.b", "mlp.proj.w", "mlp.proj.b"};
    static const int rm[12] = {0, 0, 3, 0, 1, 0, 0, 0, 4, 0, 1, 0}, cm[12] = {1, 1, 1, 3, 1, 1, 1, 1, 1, 4, 4, 1};
    int64_t C = c->width;
    int n = 0, l, j;
#define TM(G, P, R, RO, CO) (snprintf(t[n].gg, 64, "%s", G), snprintf(t[n].pt, 64, "%s", P), t[n].role = R, t[n].rows = RO, t[n].cols = CO, n++)
    TM("token_embd.weight", "wte", R_EMB, V, C);
    TM("position_embd.weight", "wpe", R_POS, c->max_seq, C);
    for (l = 0; l < c->layers; l++)
        for (j = 0; j < 12; j++) {
            char g[64], p[64];
            snprintf(g, sizeof g, "blk.%d.%s", l, gn[j]), snprintf(p, sizeof p, "h.%d.%s", l, pn[j]);
            TM(g, p, rm[j] ? R_MAT : R_VEC, rm[j] * C, cm[j] * C);
        }
    TM("output_norm.weight", "lnf.w", R_VEC, 0, C);
    TM("output_norm.bias", "lnf.b", R_VEC, 0, C);
    if (c->untied) TM("output.weight", "lm_head", R_OUT, V, C);
#undef TM
    return n;
}

/* row x of n floats stored as type t at p: within the format's error, and (blocks) the quantizer's bytes */
static int row_ok(int32_t t, const void *p, const float *x, int64_t n, char *why, size_t wl) {
    float y[4096];
    unsigned char q[4096 / 32 * 34];
    int64_t i;
    if (n > 4096) return snprintf(why, wl, "row of %lld", (long long)n), 0;
    pt_dequantize_row((pt_wtype)t, p, y, n);
    if (t == 0) return memcmp(p, x, (size_t)n * 4) ? (snprintf(why, wl, "f32 not bit for bit"), 0) : 1;
    if (t == PT_W_Q8_0 || t == PT_W_Q4_0) {
        pt_quantize_row((pt_wtype)t, x, q, n);
        if (memcmp(q, p, (size_t)pt_wtype_row_bytes((pt_wtype)t, n))) return snprintf(why, wl, "not the quantizer's bytes"), 0;
    }
    for (i = 0; i < n; i++) {
        double tol, amax = 0;
        int64_t b0 = i / 32 * 32, k;
        if (t == PT_W_F16) tol = fabs(x[i]) * (1.0 / 2048) + 1.0 / (1 << 25);
        else if (t == PT_W_BF16) tol = fabs(x[i]) * (1.0 / 256) + 1e-38;
        else {
            for (k = b0; k < b0 + 32 && k < n; k++) amax = fabs(x[k]) > amax ? fabs(x[k]) : amax;
            tol = (t == PT_W_Q8_0 ? 0.5 * amax / 127 : amax / 8) * 1.002 + fabs(x[i]) / 1024 + 1e-12; /* half a step (q4_0: a step at the clamped end) + d's f16 rounding */
        }
        if (!(fabs((double)y[i] - x[i]) <= tol)) return snprintf(why, wl, "element %lld: %.9g stored as %.9g (tolerance %.3g)", (long long)i, x[i], y[i], tol), 0;
    }
    return 1;
}

/* exports checkpoint dir as type ft to path and checks the file and pt_gguf_load of it */
/* the name of a type the tests export (never NULL: gcc sees through quant's table that pt_wtype_name could be) */
static const char *tname(pt_wtype t) { return pt_wtype_name(t) ? pt_wtype_name(t) : "?"; }
static void check_export(const char *label, const char *dir, const pt_gpt_config *cfg, const pt_tokenizer *tk, pt_wtype ft, const char *path) {
    pt_gguf_export_opts eo;
    char err[1024], why[400], txt[4096], sdir[1024];
    pt_gguf *g;
    tmap tm[64];
    int64_t M = tk ? pt_tokenizer_vocab(tk) - 256 : 0, V = 256 + (M ? M : 1) + 1, i, r, vp = cfg->vocab_padded ? cfg->vocab_padded : (cfg->vocab + 63) / 64 * 64;
    int nt = tensor_map(cfg, V, tm), k, bad = 0, tied = !cfg->untied;
    float *ref = NULL, *zero = (float *)calloc(4096, sizeof(float));
    memset(&eo, 0, sizeof eo);
    eo.type = ft, eo.tokenizer = tk;
    if (!CHECKF(pt_gguf_export(dir, path, &eo, err, sizeof err) == PT_OK, tu_name("%s: pt_gguf_export", label), "%s", err)) return;
    g = pt_gguf_open(path, err, sizeof err);
    if (!CHECKF(g != NULL, tu_name("%s: the export opens", label), "%s", err)) return;
    /* metadata */
    CHECK(str_is(g, "general.architecture", 0, "gpt2") && int_of(g, "gpt2.context_length", 0) == cfg->max_seq && int_of(g, "gpt2.embedding_length", 0) == cfg->width &&
              int_of(g, "gpt2.block_count", 0) == cfg->layers && int_of(g, "gpt2.feed_forward_length", 0) == 4 * cfg->width &&
              int_of(g, "gpt2.attention.head_count", 0) == cfg->heads && int_of(g, "ptrain.vocab", 0) == cfg->vocab && int_of(g, "ptrain.step", 0) == 2 &&
              int_of(g, "general.file_type", 0) == (ft == PT_W_F32 ? 0 : ft == PT_W_F16 ? 1 : ft == PT_W_Q4_0 ? 2 : ft == PT_W_Q8_0 ? 7 : 32),
          tu_name("%s: gpt2 keys, file_type, ptrain.vocab", label));
    {
        double eps = 0;
        CHECK(pt_gguf_kv_float(g, pt_gguf_kv_find(g, "gpt2.attention.layer_norm_epsilon"), 0, &eps) && (float)eps == 1e-5f, tu_name("%s: layer_norm_epsilon 1e-5", label));
    }
    /* the vocabulary: every token's text from the tokenizer's bytes through GPT-2's characters */
    {
        int64_t nt2 = -1, nm = -1;
        int32_t et;
        int vbad = 0;
        pt_gguf_kv_type(g, pt_gguf_kv_find(g, "tokenizer.ggml.tokens"), &et, &nt2);
        pt_gguf_kv_type(g, pt_gguf_kv_find(g, "tokenizer.ggml.merges"), &et, &nm);
        for (i = 0; i < 256 + M && nt2 == V; i++) {
            unsigned char bytes[512];
            int32_t id = (int32_t)i;
            int64_t nb = i < 256 ? 1 : pt_tokenizer_decode(tk, &id, 1, bytes, sizeof bytes);
            if (i < 256) bytes[0] = (unsigned char)i;
            tok_text(bytes, nb, txt, sizeof txt);
            if (!str_is(g, "tokenizer.ggml.tokens", i, txt) || int_of(g, "tokenizer.ggml.token_type", i) != 1) vbad++;
        }
        for (i = 0; i < M && nm == M; i++) {
            char l[1024], rr[1024], both[2100];
            unsigned char bytes[512];
            int32_t a = tk->pair[2 * i], b = tk->pair[2 * i + 1];
            tok_text(bytes, pt_tokenizer_decode(tk, &a, 1, bytes, sizeof bytes), l, sizeof l);
            tok_text(bytes, pt_tokenizer_decode(tk, &b, 1, bytes, sizeof bytes), rr, sizeof rr);
            snprintf(both, sizeof both, "%s %s", l, rr);
            if (!str_is(g, "tokenizer.ggml.merges", i, both) || int_of(g, "ptrain.merge_ids", 2 * i) != a || int_of(g, "ptrain.merge_ids", 2 * i + 1) != b) vbad++;
        }
        if (!M && !(nm == 1 && str_is(g, "tokenizer.ggml.merges", 0, "\xc3\xbf \xc3\xbf") && str_is(g, "tokenizer.ggml.tokens", 256, "\xc3\xbf\xc3\xbf"))) vbad++;
        CHECKF(nt2 == V && !vbad && str_is(g, "tokenizer.ggml.model", 0, "gpt2") && str_is(g, "tokenizer.ggml.pre", 0, "gpt-2") &&
                   str_is(g, "tokenizer.ggml.tokens", V - 1, "<|endoftext|>") && int_of(g, "tokenizer.ggml.token_type", V - 1) == 3 &&
                   int_of(g, "tokenizer.ggml.bos_token_id", 0) == V - 1 && int_of(g, "tokenizer.ggml.eos_token_id", 0) == V - 1 && int_of(g, "tokenizer.ggml.add_bos_token", 0) == 0 &&
                   str_is(g, "tokenizer.ggml.tokens", 32, "\xc4\xa0") && str_is(g, "tokenizer.ggml.tokens", 65, "A"),
               tu_name("%s: the vocabulary (%lld tokens: bytes as GPT-2's characters, %lld merges, <|endoftext|> as bos/eos)", label, (long long)V, (long long)(M ? M : 1)),
               "%lld tokens, %lld merges, %d tokens or merges wrong", (long long)nt2, (long long)nm, vbad);
    }
    /* the tensors: names, shapes, types, values */
    CHECKF(pt_gguf_tensor_count(g) == nt, tu_name("%s: %d tensors", label, nt), "found %lld", (long long)pt_gguf_tensor_count(g));
    for (k = 0; k < nt && !bad; k++) {
        const pt_gguf_tensor *t = pt_gguf_tensor_find(g, tm[k].gg);
        int64_t srows = tm[k].role == R_EMB || tm[k].role == R_OUT ? vp : tm[k].rows ? tm[k].rows : 1, rows = tm[k].rows ? tm[k].rows : 1, live;
        int32_t wt = want_type(tm[k].role, ft, tm[k].cols, tied);
        live = tm[k].role == R_EMB || tm[k].role == R_OUT ? cfg->vocab : rows;
        if (!t || t->ndim != (tm[k].rows ? 2 : 1) || t->ne[0] != tm[k].cols || (tm[k].rows && t->ne[1] != tm[k].rows) || t->type != wt) {
            bad++;
            snprintf(why, sizeof why, "'%.63s': %s, type %d (want %d), ne %lld x %lld", tm[k].gg, t ? "present" : "missing", t ? (int)t->type : -1, (int)wt,
                     t ? (long long)t->ne[0] : 0LL, t ? (long long)t->ne[1] : 0LL);
            break;
        }
        ref = (float *)realloc(ref, (size_t)(srows * tm[k].cols) * sizeof(float));
        pt_ckpt_step_dir(dir, sdir, sizeof sdir);
        if (pt_ckpt_tensor_read(sdir, tm[k].pt, 0, ref, srows * tm[k].cols, err, sizeof err) != PT_OK) {
            bad++, snprintf(why, sizeof why, "'%.63s': %.300s", tm[k].pt, err);
            break;
        }
        for (r = 0; r < rows && !bad; r++) {
            const unsigned char *p = (const unsigned char *)t->data + r * pt_gguf_type_bytes(t->type, tm[k].cols);
            if (!row_ok(t->type, p, r < live ? ref + r * tm[k].cols : zero, tm[k].cols, why + 100, sizeof why - 100)) {
                bad++;
                snprintf(why, 100, "'%.40s' row %lld%s: ", tm[k].gg, (long long)r, r < live ? "" : " (an extra token: zeros)");
                memmove(why + strlen(why), why + 100, strlen(why + 100) + 1);
            }
        }
    }
    CHECKF(!bad, tu_name("%s: every tensor's name, shape, type (llama.cpp's choice) and values (%s)", label, ft == PT_W_F32 ? "bit for bit" : "within the format, the quantizer's bytes"),
           "%s", why);
    /* pt_gguf_load */
    {
        pt_ctx *ctx = new_ctx();
        pt_tokenizer *tk2 = NULL;
        pt_gpt_weights *w = pt_gguf_load(ctx, path, &tk2);
        int lbad = 0;
        if (CHECKF(w != NULL, tu_name("%s: pt_gguf_load", label), "%s", pt_error(ctx))) {
            const pt_gpt_config *c = &w->cfg;
            CHECKF(c->vocab == cfg->vocab && c->vocab_padded == V && c->max_seq == cfg->max_seq && c->layers == cfg->layers && c->width == cfg->width &&
                       c->heads == cfg->heads && c->untied == cfg->untied && w->wte.rows == V && w->head.rows == V,
                   tu_name("%s: loaded configuration (vocab %d of %lld rows, untied %d)", label, (int)cfg->vocab, (long long)V, (int)cfg->untied),
                   "vocab %d padded %d, max_seq %d layers %d width %d heads %d untied %d", c->vocab, c->vocab_padded, c->max_seq, c->layers, c->width, c->heads, c->untied);
            for (k = 0; k < nt; k++) {
                const pt_gguf_tensor *t = pt_gguf_tensor_find(g, tm[k].gg);
                const void *have = NULL;
                int32_t ht = -1;
                int64_t l = -1;
                if (!t) {
                    lbad++;
                    continue;
                }
                if (!strncmp(tm[k].gg, "blk.", 4)) l = strtol(tm[k].gg + 4, NULL, 10);
#define QM(NAME, Q) else if (strstr(tm[k].gg, NAME)) have = w->layer[l].Q.data, ht = (int32_t)w->layer[l].Q.type
#define VV(NAME, V) else if (strstr(tm[k].gg, NAME)) have = w->layer[l].V, ht = 0
                if (!strcmp(tm[k].gg, "token_embd.weight")) have = w->wte.data, ht = (int32_t)w->wte.type;
                else if (!strcmp(tm[k].gg, "output.weight")) have = w->head.data, ht = (int32_t)w->head.type;
                else if (!strcmp(tm[k].gg, "position_embd.weight")) have = w->wpe, ht = 0;
                else if (!strcmp(tm[k].gg, "output_norm.weight")) have = w->lnf_w, ht = 0;
                else if (!strcmp(tm[k].gg, "output_norm.bias")) have = w->lnf_b, ht = 0;
                QM("attn_qkv.weight", qkv); QM("attn_output.weight", proj); QM("ffn_up.weight", fc); QM("ffn_down.weight", fproj);
                VV("attn_norm.weight", ln1_w); VV("attn_norm.bias", ln1_b); VV("ffn_norm.weight", ln2_w); VV("ffn_norm.bias", ln2_b);
                VV("attn_qkv.bias", qkv_b); VV("attn_output.bias", proj_b); VV("ffn_up.bias", fc_b); VV("ffn_down.bias", fproj_b);
#undef QM
#undef VV
                if (!have || ht != t->type || memcmp(have, t->data, (size_t)t->bytes)) {
                    if (!lbad) snprintf(why, sizeof why, "'%.63s': %s", tm[k].gg, !have ? "not set" : ht != t->type ? "another type" : "other bytes");
                    lbad++;
                }
            }
            CHECKF(!lbad && (cfg->untied ? w->head.data != w->wte.data : w->head.data == w->wte.data && w->head.type == w->wte.type),
                   tu_name("%s: every loaded matrix in its stored type, every vector f32, the same bytes as the file; head %s", label, cfg->untied ? "its own" : "= wte"),
                   "%d differ, the first %s", lbad, why);
            if (CHECKF(tk2 != NULL, tu_name("%s: the tokenizer is reproduced", label), "none (see the log)\n%s", LOG)) {
                int32_t a[256], b2[256];
                int64_t na = 0, nb = 0;
                int same = pt_tokenizer_vocab(tk2) == 256 + M;
                for (i = 0; same && i < 2 * M; i++) same = tk2->pair[i] == tk->pair[i];
                if (tk) na = pt_tokenizer_encode(tk, TEXT, (int64_t)strlen(TEXT), a);
                else for (na = 0; na < (int64_t)strlen(TEXT); na++) a[na] = (unsigned char)TEXT[na];
                nb = pt_tokenizer_encode(tk2, TEXT, (int64_t)strlen(TEXT), b2);
                CHECKF(same && na == nb && !memcmp(a, b2, (size_t)na * 4), tu_name("%s: ... with the same %lld merges: the same ids for a text", label, (long long)M),
                       "vocab %d, %lld vs %lld ids", pt_tokenizer_vocab(tk2), (long long)na, (long long)nb);
            }
        }
        pt_tokenizer_free(tk2);
        pt_gpt_weights_free(w);
        pt_shutdown(ctx);
    }
    pt_gguf_free(g);
    free(ref);
    free(zero);
}

/* ---- GPT-2's own tokenizer files (pt_tokenizer_load_gpt2): ids 0..255 the bytes in GPT-2's order ----
   A vocab.json + merges.txt of 12 merges written here: the ids of a text are GPT-2's; the tokenizer
   (a file of version 2) saved and loaded, carried by a checkpoint of vocabulary 256 + 12 + 1 (the
   end-of-text row, as GPT-2's 50,257), exported as GGUF (tokens 0..255 in GPT-2's order, the
   checkpoint's own end-of-text row) and loaded back: the same ids each time. */
static const int GPT2_IDS[10] = {83, 257, 261, 263, 267, 258, 265, 198, 127, 102}; /* "the cat sat on the mat\n\xc3\xa9" */
static int same_ids(const pt_tokenizer *t, const char *what) {
    static const char s[] = "the cat sat on the mat\n\xc3\xa9";
    int32_t ids[32];
    unsigned char back[32];
    int64_t n = t ? pt_tokenizer_encode(t, s, (int64_t)strlen(s), ids) : -1, i;
    int ok = n == 10 && pt_tokenizer_decode(t, ids, n, back, sizeof back) == (int64_t)strlen(s) && !memcmp(back, s, strlen(s));
    for (i = 0; ok && i < n; i++) ok = ids[i] == GPT2_IDS[i];
    return CHECKF(ok, tu_name("GPT-2's files: %s: GPT-2's ids (83 257 261 ...) and the text back", what), "%lld ids, the first %d", (long long)n, n > 0 ? (int)ids[0] : -1);
}
static void test_gpt2_files(void) {
    static const char *const mg[12] = {"\xc4\xa0 t", "h e", "\xc4\xa0t he", "a t", "\xc4\xa0 c", "\xc4\xa0" "c at", "\xc4\xa0 s", "\xc4\xa0s at", "\xc4\xa0 m", "\xc4\xa0m at", "o n", "\xc4\xa0 on"};
    char vj[900], mt[900], tb[900], ck[900], gg[900], e[512];
    int order[256], n = 0, b, k;
    FILE *f;
    pt_tokenizer *tk, *t2 = NULL;
    pt_ctx *ctx;
    pt_gpt_config c;
    snprintf(vj, sizeof vj, "%s/gpt2_vocab.json", OUT), snprintf(mt, sizeof mt, "%s/gpt2_merges.txt", OUT), snprintf(tb, sizeof tb, "%s/gpt2_tok.bin", OUT);
    snprintf(ck, sizeof ck, "%s/ckG", OUT), snprintf(gg, sizeof gg, "%s/G_q8_0.gguf", OUT);
    for (b = 0; b < 256; b++) /* GPT-2's order: its printable bytes, then the others */
        if ((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE) order[n++] = b;
    for (b = 0; b < 256; b++)
        if (!((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE)) order[n++] = b;
    if ((f = fopen(vj, "w")) != NULL) {
        fputc('{', f);
        for (k = 0; k < 256; k++) fprintf(f, "%s\"%s%s\": %d", k ? ", " : "", order[k] == '"' || order[k] == '\\' ? "\\" : "", BYTECH[order[k]], k);
        for (k = 0; k < 12; k++) {
            const char *sp = strchr(mg[k], ' ');
            fprintf(f, ", \"%.*s%s\": %d", (int)(sp - mg[k]), mg[k], sp + 1, 256 + k);
        }
        fprintf(f, ", \"<|endoftext|>\": 268}");
        fclose(f);
    }
    if ((f = fopen(mt, "w")) != NULL) {
        fprintf(f, "#version: 0.2\n");
        for (k = 0; k < 12; k++) fprintf(f, "%s\n", mg[k]);
        fclose(f);
    }
    tk = pt_tokenizer_load_gpt2(NULL, vj, mt);
    if (!CHECKF(tk && pt_tokenizer_vocab(tk) == 268, "GPT-2's files: pt_tokenizer_load_gpt2 (12 merges, vocabulary 268)", "%d", tk ? pt_tokenizer_vocab(tk) : -1)) return;
    same_ids(tk, "loaded");
    {
        long len = 0;
        unsigned char *bytes = NULL;
        if (pt_tokenizer_save(tk, tb) == PT_OK) bytes = slurp(tb, &len);
        CHECKF(bytes && len == 32 + 8 * 12 + 256 && bytes[4] == 2 && bytes[32 + 96] == '!', "GPT-2's files: saved as version 2 (the byte table after the pairs)", "%ld bytes", len);
        free(bytes);
    }
    t2 = pt_tokenizer_load(NULL, tb);
    same_ids(t2, "saved and loaded");
    pt_tokenizer_free(t2);
    /* a checkpoint carrying it, of vocabulary 256 + 12 + 1 */
    memset(&c, 0, sizeof c);
    c.vocab = 269, c.max_seq = 8, c.layers = 1, c.width = 32, c.heads = 2;
    ctx = new_ctx();
    {
        pt_gpt *m = ctx ? pt_gpt_new(ctx, &c) : NULL;
        pt_ckpt_opts co;
        memset(&co, 0, sizeof co);
        co.model = &c, co.tokenizer = tk;
        CHECKF(m && pt_ckpt_save(ctx, NULL, ck, 0, &co) == PT_OK, "GPT-2's files: a checkpoint of vocabulary 269 carries the tokenizer", "%s", ctx ? pt_error(ctx) : "");
        t2 = pt_ckpt_tokenizer(ctx, ck);
        same_ids(t2, "pt_ckpt_tokenizer");
        pt_tokenizer_free(t2);
        if (m) pt_gpt_free(m);
    }
    {
        pt_gguf_export_opts eo;
        pt_gguf *g;
        memset(&eo, 0, sizeof eo);
        eo.type = PT_W_Q8_0, eo.tokenizer = tk;
        CHECKF(pt_gguf_export(ck, gg, &eo, e, sizeof e) == PT_OK, "GPT-2's files: pt_gguf_export of vocabulary 256 + 12 merges + 1", "%s", e);
        g = pt_gguf_open(gg, e, sizeof e);
        CHECKF(g && str_is(g, "tokenizer.ggml.tokens", 0, "!") && str_is(g, "tokenizer.ggml.tokens", 198, "\xc4\x8a") && str_is(g, "tokenizer.ggml.tokens", 258, "\xc4\xa0the") &&
                   str_is(g, "tokenizer.ggml.tokens", 268, "<|endoftext|>") && int_of(g, "ptrain.vocab", 0) == 269 && str_is(g, "tokenizer.ggml.merges", 2, "\xc4\xa0t he") &&
                   pt_gguf_tensor_find(g, "token_embd.weight") && pt_gguf_tensor_find(g, "token_embd.weight")->ne[1] == 269,
               "GPT-2's files: the GGUF's tokens in GPT-2's order (0 \"!\", 198 newline, 258 \" the\", 268 <|endoftext|>), 269 rows", "%s", g ? "" : e);
        pt_gguf_free(g);
    }
    {
        pt_gpt_weights *w = ctx ? pt_gguf_load(ctx, gg, &t2) : NULL;
        CHECKF(w && t2 && pt_tokenizer_vocab(t2) == 268 && w->cfg.vocab == 269, "GPT-2's files: pt_gguf_load gives the tokenizer back (12 merges, the model's vocabulary 269)", "%s",
               ctx ? pt_error(ctx) : "");
        same_ids(t2, "from the GGUF");
        pt_tokenizer_free(t2);
        pt_gpt_weights_free(w);
    }
    if (ctx) pt_shutdown(ctx);
    pt_tokenizer_free(tk);
}

/* ---- gpt2 files written with the writer from a formula (exact in f16): load, refusals ---- */
static float fval(int k, int64_t i) { return (float)((int)((i * 37 + (int64_t)k * 11) % 97) - 48) / 512.0f; }
enum { D_NONE, D_ARCH, D_MISSING, D_SHAPE, D_Q6K, D_EXTRA, D_FF, D_EPS, D_TOKENS, D_BLOCKS, D_COUNT };
static int write_gpt2(const char *path, int defect, uint32_t align, int with_model) {
    pt_gpt_config c;
    tmap tm[64];
    const char *arch = defect == D_ARCH ? "llama" : "gpt2", *model = "gpt2", *toks[258];
    char tb[258][8];
    int64_t V = 258, i;
    int n, k, ok;
    uint32_t u;
    float eps = defect == D_EPS ? 1e-6f : 1e-5f, *x;
    pt_gguf_writer *w = pt_gguf_writer_new(align);
    memset(&c, 0, sizeof c);
    c.layers = 1, c.width = 64, c.heads = 4, c.max_seq = 4, c.untied = 1;
    n = tensor_map(&c, V, tm);
    for (i = 0; i < V; i++) {
        const char *t = i < 256 ? BYTECH[i] : i == 256 ? "\xc3\xbf\xc3\xbf" : "<|e|>";
        memcpy(tb[i], t, strlen(t) + 1), toks[i] = tb[i];
    }
    pt_gguf_writer_kv(w, "general.architecture", PT_GGUF_STRING, &arch);
    u = 4, pt_gguf_writer_kv(w, "gpt2.context_length", PT_GGUF_U32, &u);
    u = 64, pt_gguf_writer_kv(w, "gpt2.embedding_length", PT_GGUF_U32, &u);
    u = defect == D_BLOCKS ? 1000000 : 1, pt_gguf_writer_kv(w, "gpt2.block_count", PT_GGUF_U32, &u);
    u = defect == D_FF ? 192 : 256, pt_gguf_writer_kv(w, "gpt2.feed_forward_length", PT_GGUF_U32, &u);
    u = 4, pt_gguf_writer_kv(w, "gpt2.attention.head_count", PT_GGUF_U32, &u);
    pt_gguf_writer_kv(w, "gpt2.attention.layer_norm_epsilon", PT_GGUF_F32, &eps);
    if (with_model) pt_gguf_writer_kv(w, "tokenizer.ggml.model", PT_GGUF_STRING, &model);
    pt_gguf_writer_arr(w, "tokenizer.ggml.tokens", PT_GGUF_STRING, toks, defect == D_TOKENS ? V - 1 : V);
    for (k = 0; k < n; k++) {
        int64_t ne[2];
        int32_t t = 0;
        ne[0] = tm[k].cols, ne[1] = tm[k].rows;
        if (defect == D_MISSING && !strcmp(tm[k].gg, "blk.0.ffn_up.bias")) continue;
        if (defect == D_SHAPE && !strcmp(tm[k].gg, "blk.0.attn_qkv.weight")) ne[1] = 128;
        if (defect == D_Q6K && !strcmp(tm[k].gg, "blk.0.ffn_down.weight")) t = 14;
        pt_gguf_writer_tensor(w, tm[k].gg, t, tm[k].rows ? 2 : 1, ne);
    }
    if (defect == D_EXTRA) {
        int64_t ne[1] = {4};
        pt_gguf_writer_tensor(w, "foo.weight", 0, 1, ne);
    }
    pt_gguf_writer_begin(w, path);
    x = (float *)malloc(258 * 256 * sizeof(float));
    for (k = 0; k < n; k++) {
        int64_t rows = tm[k].rows ? tm[k].rows : 1, ne = rows * tm[k].cols;
        if (defect == D_MISSING && !strcmp(tm[k].gg, "blk.0.ffn_up.bias")) continue;
        if (defect == D_SHAPE && !strcmp(tm[k].gg, "blk.0.attn_qkv.weight")) ne = 128 * 64;
        for (i = 0; i < ne; i++) x[i] = fval(k, i);
        if (defect == D_Q6K && !strcmp(tm[k].gg, "blk.0.ffn_down.weight")) memset(x, 0, 64 * 210), ne = 64 * 210 / 4;
        pt_gguf_writer_data(w, x, ne * 4);
    }
    if (defect == D_EXTRA) pt_gguf_writer_data(w, x, 16);
    ok = pt_gguf_writer_finish(w) == PT_OK;
    if (!ok) printf("  write_gpt2 %s: %s\n", path, pt_gguf_writer_error(w));
    pt_gguf_writer_free(w);
    free(x);
    return ok;
}
/* the weights loaded equal the formula (f32 / f16 tensors exactly; q8_0 / q4_0: the quantizer's bytes
   of the formula's row (q4_0 within its error where another quantizer wrote it: bytes_exact 0)) */
static int check_formula(const pt_gpt_weights *w, const pt_gguf *g, int bytes_exact, char *why, size_t wl) {
    tmap tm[64];
    int n = tensor_map(&w->cfg, w->wte.rows, tm), k;
    int64_t i, r;
    float x[4096], y[4096];
    for (k = 0; k < n; k++) {
        const pt_gguf_tensor *t = pt_gguf_tensor_find(g, tm[k].gg);
        int64_t rows = tm[k].rows ? tm[k].rows : 1, C = tm[k].cols;
        const float *v = NULL;
        const pt_qmat *q = NULL;
        int64_t l = !strncmp(tm[k].gg, "blk.", 4) ? strtol(tm[k].gg + 4, NULL, 10) : -1;
        if (!strcmp(tm[k].gg, "token_embd.weight")) q = &w->wte;
        else if (!strcmp(tm[k].gg, "output.weight")) q = &w->head;
        else if (!strcmp(tm[k].gg, "position_embd.weight")) v = w->wpe;
        else if (!strcmp(tm[k].gg, "output_norm.weight")) v = w->lnf_w;
        else if (!strcmp(tm[k].gg, "output_norm.bias")) v = w->lnf_b;
        else if (strstr(tm[k].gg, "attn_qkv.weight")) q = &w->layer[l].qkv;
        else if (strstr(tm[k].gg, "attn_output.weight")) q = &w->layer[l].proj;
        else if (strstr(tm[k].gg, "ffn_up.weight")) q = &w->layer[l].fc;
        else if (strstr(tm[k].gg, "ffn_down.weight")) q = &w->layer[l].fproj;
        else if (strstr(tm[k].gg, "attn_norm.weight")) v = w->layer[l].ln1_w;
        else if (strstr(tm[k].gg, "attn_norm.bias")) v = w->layer[l].ln1_b;
        else if (strstr(tm[k].gg, "ffn_norm.weight")) v = w->layer[l].ln2_w;
        else if (strstr(tm[k].gg, "ffn_norm.bias")) v = w->layer[l].ln2_b;
        else if (strstr(tm[k].gg, "attn_qkv.bias")) v = w->layer[l].qkv_b;
        else if (strstr(tm[k].gg, "attn_output.bias")) v = w->layer[l].proj_b;
        else if (strstr(tm[k].gg, "ffn_up.bias")) v = w->layer[l].fc_b;
        else if (strstr(tm[k].gg, "ffn_down.bias")) v = w->layer[l].fproj_b;
        if (!t || (!v && !q)) return snprintf(why, wl, "'%s' %s", tm[k].gg, t ? "not set" : "missing"), 0;
        if (v && ((uintptr_t)v % 4)) return snprintf(why, wl, "'%s' misaligned", tm[k].gg), 0;
        for (r = 0; r < rows; r++) {
            for (i = 0; i < C; i++) x[i] = fval(k, r * C + i);
            if (v) {
                if (memcmp(v + r * C, x, (size_t)C * 4)) return snprintf(why, wl, "'%s' row %lld: other values", tm[k].gg, (long long)r), 0;
                continue;
            }
            if ((int32_t)q->type != t->type || q->rows != rows || q->cols != C) return snprintf(why, wl, "'%s': another type or shape", tm[k].gg), 0;
            if ((uintptr_t)q->data % 2) return snprintf(why, wl, "'%s' misaligned", tm[k].gg), 0;
            if (q->type == PT_W_Q4_0 && !bytes_exact) {
                pt_dequantize_row(q->type, (const char *)q->data + r * pt_wtype_row_bytes(q->type, C), y, C);
                for (i = 0; i < C; i++)
                    if (fabsf(y[i] - x[i]) > 48.0f / 512 / 8 * 1.01f) return snprintf(why, wl, "'%s' q4_0 row %lld: %g vs %g", tm[k].gg, (long long)r, y[i], x[i]), 0;
                continue;
            }
            if (!row_ok(q->type, (const char *)q->data + r * pt_wtype_row_bytes(q->type, C), x, C, why + 60, wl - 60)) {
                char tmp[200];
                snprintf(tmp, sizeof tmp, "%s", why + 60);
                return snprintf(why, wl, "'%s' row %lld: %s", tm[k].gg, (long long)r, tmp), 0;
            }
        }
    }
    return 1;
}

static void test_load_files(void) {
    static const struct { int defect; pt_status st; const char *want; } bad[] = {
        {D_ARCH, PT_ERR_FORMAT, "general.architecture: expected \"gpt2\", found \"llama\""},
        {D_MISSING, PT_ERR_FORMAT, "has no tensor 'blk.0.ffn_up.bias'"},
        {D_SHAPE, PT_ERR_SHAPE, "tensor 'blk.0.attn_qkv.weight': expected ne [64, 192]"},
        {D_Q6K, PT_ERR_DTYPE, "tensor 'blk.0.ffn_down.weight' is q6_K"},
        {D_EXTRA, PT_ERR_FORMAT, "tensor 'foo.weight': expected only the 17 tensors of gpt2 with 1 layers"},
        {D_FF, PT_ERR_SHAPE, "gpt2.feed_forward_length: expected 4 x embedding_length = 256 (ptrain's MLP), found 192"},
        {D_EPS, PT_ERR_FORMAT, "layer_norm_epsilon: expected 1e-5"},
        {D_TOKENS, PT_ERR_FORMAT, "tokenizer.ggml.tokens: expected an array of 258 strings"},
        {D_BLOCKS, PT_ERR_FORMAT, "gpt2.block_count 1000000 needs"}};
    char path[800], why[300], err[512];
    unsigned a;
    size_t i;
    for (a = 1; a <= 32; a *= 32) {
        pt_ctx *ctx = new_ctx();
        pt_tokenizer *tk = NULL;
        pt_gpt_weights *w;
        pt_gguf *g;
        snprintf(path, sizeof path, "%s/formula_a%u.gguf", OUT, a);
        if (!CHECK(write_gpt2(path, D_NONE, a, a == 32), tu_name("a gpt2 file at alignment %u written", a))) continue;
        w = pt_gguf_load(ctx, path, &tk);
        g = pt_gguf_open(path, err, sizeof err);
        why[0] = 0;
        CHECKF(w && g && w->cfg.vocab == 258 && w->cfg.untied == 1 && check_formula(w, g, 1, why, sizeof why),
               tu_name("pt_gguf_load of it: the formula's values%s", a == 1 ? " (alignment 1: misaligned data copied)" : ""), "%s %s", w ? why : pt_error(ctx), g ? "" : err);
        if (a == 1)
            CHECKF(!tk && w && strstr(w->tokenizer_error, "its tokenizer (tokenizer.ggml.*) is refused: tokenizer.ggml.model is not \"gpt2\"") &&
                       strstr(LOG, "is refused: tokenizer.ggml.model is not \"gpt2\""),
                   "a file with tokens but without tokenizer.ggml.model gives no tokenizer: the weights' tokenizer_error and a warning say why", "tk %p, %s", (void *)tk,
                   w ? w->tokenizer_error : "");
        else CHECKF(tk && pt_tokenizer_vocab(tk) == 256, "the bytes without merges give the byte tokenizer (0 merges)", "tk %p", (void *)tk);
        pt_tokenizer_free(tk);
        pt_gguf_free(g);
        pt_gpt_weights_free(w);
        pt_shutdown(ctx);
    }
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pt_ctx *ctx = new_ctx();
        pt_gpt_weights *w;
        snprintf(path, sizeof path, "%s/bad%d.gguf", OUT, bad[i].defect);
        if (!write_gpt2(path, bad[i].defect, 0, 1)) {
            CHECK(0, tu_name("write defect %d", bad[i].defect));
            pt_shutdown(ctx);
            continue;
        }
        w = pt_gguf_load(ctx, path, NULL);
        CHECKF(!w && pt_status_get(ctx) == bad[i].st && strstr(pt_error(ctx), bad[i].want) && strstr(pt_error(ctx), path),
               tu_name("pt_gguf_load refuses: %s", bad[i].want), "status %d: %s", (int)pt_status_get(ctx), pt_error(ctx));
        pt_gpt_weights_free(w);
        pt_shutdown(ctx);
    }
    {
        pt_ctx *ctx = new_ctx();
        snprintf(path, sizeof path, "%s/types.gguf", OUT);
        CHECK(!pt_gguf_load(ctx, path, NULL) && strstr(pt_error(ctx), "general.architecture"), "pt_gguf_load refuses a GGUF that is no model");
        pt_error_clear(ctx);
        snprintf(path, sizeof path, "%s/no_such.gguf", OUT);
        CHECK(!pt_gguf_load(ctx, path, NULL) && pt_status_get(ctx) == PT_ERR_IO && strstr(pt_error(ctx), "cannot open"), "pt_gguf_load of a missing file: PT_ERR_IO");
        pt_shutdown(ctx);
    }
}

/* a gpt2 file written by tests/gguf_test.sh's Python (the gguf package): 2 layers, width 64, 4 heads,
   32 positions, 257 tokens (the bytes + "th"), the formula's values; f16 matrices but
   blk.0.attn_qkv.weight q8_0 and blk.1.ffn_up.weight q4_0, untied */
static int check_foreign(const char *path) {
    pt_ctx *ctx = new_ctx();
    pt_tokenizer *tk = NULL;
    pt_gpt_weights *w = pt_gguf_load(ctx, path, &tk);
    char err[512], why[300];
    pt_gguf *g = pt_gguf_open(path, err, sizeof err);
    why[0] = 0;
    if (CHECKF(w && g, "foreign: pt_gguf_load of the Python-written gpt2", "%s", w ? err : pt_error(ctx))) {
        CHECK(w->cfg.layers == 2 && w->cfg.width == 64 && w->cfg.heads == 4 && w->cfg.max_seq == 32 && w->cfg.vocab == 257 && w->cfg.untied == 1 &&
                  w->wte.type == PT_W_F16 && w->layer[0].qkv.type == PT_W_Q8_0 && w->layer[1].fc.type == PT_W_Q4_0 && w->layer[0].fc.type == PT_W_F16,
              "foreign: configuration and stored types");
        CHECKF(check_formula(w, g, 0, why, sizeof why), "foreign: values: f16 and f32 exact, q8_0 the same bytes as ptrain's quantizer, q4_0 within its error", "%s", why);
        if (CHECKF(tk != NULL, "foreign: its vocabulary (bytes + the merge t h) gives a tokenizer", "%s", LOG)) {
            int32_t ids[8];
            int64_t n = pt_tokenizer_encode(tk, "the", 3, ids);
            CHECKF(pt_tokenizer_vocab(tk) == 257 && n == 2 && ids[0] == 256 && ids[1] == 'e', "foreign: \"the\" encodes as [256, 'e']", "vocab %d, %lld ids",
                   pt_tokenizer_vocab(tk), (long long)n);
        }
        {
            int64_t k = pt_gguf_kv_find(g, "test.f64"), v = 0;
            double d = 0;
            CHECK(pt_gguf_kv_float(g, k, 0, &d) && d == 0.1 && pt_gguf_kv_int(g, pt_gguf_kv_find(g, "test.i16"), 0, &v) && v == -300 &&
                      pt_gguf_kv_int(g, pt_gguf_kv_find(g, "test.u64s"), 2, &v) && v == 3 && str_is(g, "test.strs", 1, "b\xc3\xa9"),
                  "foreign: metadata of other types (f64, i16, a u64 array, a string array) read back");
        }
    }
    pt_tokenizer_free(tk);
    pt_gguf_free(g);
    pt_gpt_weights_free(w);
    pt_shutdown(ctx);
    return 0;
}

static void test_export_errors(const char *dirA, const char *dirC, const pt_tokenizer *tk) {
    pt_gguf_export_opts eo;
    char err[1024], path[800];
    pt_tokenizer *small = pt_tokenizer_train(NULL, TEXT, (int64_t)strlen(TEXT), 3);
    snprintf(path, sizeof path, "%s/err.gguf", OUT);
    memset(&eo, 0, sizeof eo);
    CHECK(pt_gguf_export(dirC, path, &eo, err, sizeof err) == PT_ERR_ARG && strstr(err, "give its BPE tokenizer"), "export of a BPE model without its tokenizer refused");
    eo.tokenizer = small;
    CHECK(pt_gguf_export(dirC, path, &eo, err, sizeof err) == PT_ERR_ARG && strstr(err, "another tokenizer"), "export with a smaller tokenizer refused");
    eo.tokenizer = NULL, eo.type = (pt_wtype)3;
    CHECK(pt_gguf_export(dirA, path, &eo, err, sizeof err) == PT_ERR_ARG && strstr(err, "type: expected"), "export to type 3 refused");
    eo.type = PT_W_F32;
    CHECK(pt_gguf_export(OUT, path, &eo, err, sizeof err) != PT_OK && access(path, F_OK) != 0, "export of a directory without a checkpoint refused, no file");
    (void)tk;
    pt_tokenizer_free(small);
}

int main(int argc, char **argv) {
    static const pt_wtype all[5] = {PT_W_F32, PT_W_F16, PT_W_BF16, PT_W_Q8_0, PT_W_Q4_0};
    const char *foreign = NULL;
    char dA[800], dB[800], dC[800], dD[800], path[900];
    pt_gpt_config A, Bc, Cc, Dc;
    pt_tokenizer *tk;
    int i;
    tu_init(argc, argv);
    {
        const char *sl = strrchr(argv[0], '/'); /* default: beside the program, as tests/run.sh builds it */
        snprintf(OUT, sizeof OUT, "%.*sgguf", sl ? (int)(sl - argv[0] + 1) : 0, argv[0]);
    }
    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--foreign") && i + 1 < argc) foreign = argv[++i];
        else if (argv[i][0] != '-') snprintf(OUT, sizeof OUT, "%s", argv[i]);
    }
    pt_mkdirs(OUT);
    init_bytech();
    if (foreign) {
        check_foreign(foreign);
        return tu_summary();
    }
    test_writer();
    test_malformed();
    /* the checkpoints: A tied, byte vocabulary 60 (padded 64); B untied 256; C a BPE of 20 merges; D width 48 */
    memset(&A, 0, sizeof A);
    A.vocab = 60, A.max_seq = 16, A.layers = 2, A.width = 64, A.heads = 4;
    Bc = A, Bc.vocab = 256, Bc.untied = 1, Bc.layers = 1, Bc.width = 32, Bc.heads = 2, Bc.max_seq = 8;
    tk = pt_tokenizer_train(NULL, TEXT, (int64_t)strlen(TEXT), 20);
    Cc = Bc, Cc.untied = 0, Cc.vocab = pt_tokenizer_vocab(tk);
    Dc = Bc, Dc.untied = 0, Dc.vocab = 40, Dc.width = 48, Dc.heads = 4;
    snprintf(dA, sizeof dA, "%s/ckA", OUT), snprintf(dB, sizeof dB, "%s/ckB", OUT), snprintf(dC, sizeof dC, "%s/ckC", OUT), snprintf(dD, sizeof dD, "%s/ckD", OUT);
    snprintf(path, sizeof path, "%s/%s", OUT, PT_TOKENIZER_FILE);
    CHECKF(pt_tokenizer_vocab(tk) >= 266 && pt_tokenizer_save(tk, path) == PT_OK, "the BPE has at least 10 merges (saved for tests/gguf_test.sh)", "%d",
           pt_tokenizer_vocab(tk));
    if (CHECK(make_ckpt(dA, &A) && make_ckpt(dB, &Bc) && make_ckpt(dC, &Cc) && make_ckpt(dD, &Dc), "four tiny GPTs trained 2 steps and saved")) {
        for (i = 0; i < 5; i++) {
            snprintf(path, sizeof path, "%s/A_%s.gguf", OUT, tname(all[i]));
            check_export(tu_name("A (tied, vocab 60) %s", tname(all[i])), dA, &A, NULL, all[i], path);
        }
        for (i = 0; i < 5; i += 4) {
            snprintf(path, sizeof path, "%s/B_%s.gguf", OUT, tname(all[i]));
            check_export(tu_name("B (untied, 256) %s", tname(all[i])), dB, &Bc, NULL, all[i], path);
        }
        for (i = 0; i < 5; i += 3) {
            snprintf(path, sizeof path, "%s/C_%s.gguf", OUT, tname(all[i]));
            check_export(tu_name("C (BPE) %s", tname(all[i])), dC, &Cc, tk, all[i], path);
        }
        for (i = 0; i < 5; i += i ? 1 : 3) {
            snprintf(path, sizeof path, "%s/D_%s.gguf", OUT, tname(all[i]));
            check_export(tu_name("D (width 48: rows not whole blocks) %s", tname(all[i])), dD, &Dc, NULL, all[i], path);
        }
        snprintf(path, sizeof path, "%s/B_q4_0.gguf", OUT);
        test_truncations(path, "B_q4_0.gguf");
        test_export_errors(dA, dC, tk);
    }
    snprintf(path, sizeof path, "%s/align1.gguf", OUT);
    test_truncations(path, "align1.gguf (alignment 1)");
    test_load_files();
    test_gpt2_files();
    pt_tokenizer_free(tk);
    return tu_summary();
}
