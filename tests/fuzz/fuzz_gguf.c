/* fuzz_gguf.c - libFuzzer harness of the GGUF reader (>>gguf): pt_gguf_parse of the bytes as they
   are (every metadata value and array element read back through the accessors, every tensor's
   bytes touched at both ends and its first rows dequantized where inference reads the type), then,
   through a file, pt_gguf_open and pt_gguf_load with its tokenizer (a little text encoded and
   decoded back), and for a tiny model pt_gguf_to_params into a GPT of the file's configuration.
   Properties: the parse of the bytes and of the file agree; a tensor's bytes lie inside the input;
   decode(encode(text)) == text. Input: the file, as it is. */
#define _POSIX_C_SOURCE 200809L
#define PTRAIN_IMPLEMENTATION
#include "../../ptrain.h"
#include "fuzz_util.h"

static int gg_tiny(const pt_gpt_config *c) {
    return c->vocab_padded <= 300 && c->max_seq <= 64 && c->layers <= 2 && c->width <= 64 && c->heads <= 8;
}

FZ_ENTRY(gguf) {
    const char *dir = fz_dir();
    char path[700], err[1024];
    pt_gguf *g, *g2;
    int64_t i, j;
    err[0] = 0;
    g = pt_gguf_parse(data, size, err, sizeof err);
    fz_note("pt_gguf_parse", g != NULL, err);
    if (g) {
        volatile unsigned sink = 0;
        for (i = 0; i < pt_gguf_kv_count(g); i++) {
            int32_t et = -1;
            int64_t n = 0, v, len;
            int32_t ty = pt_gguf_kv_type(g, i, &et, &n);
            double d;
            const char *s;
            FZ_ASSERT(ty >= 0 && ty <= 12 && et >= 0 && et <= 12 && et != 9 && n >= 0 && pt_gguf_kv_key(g, i) && pt_gguf_kv_key(g, i)[0],
                      "metadata %lld: type %d / %d, n %lld", (long long)i, (int)ty, (int)et, (long long)n);
            FZ_ASSERT(pt_gguf_kv_find(g, pt_gguf_kv_key(g, i)) == i, "key %lld is not found at its index", (long long)i);
            for (j = 0; j < n && j < 64; j++) {
                if (pt_gguf_kv_int(g, i, j, &v)) sink += (unsigned)v;
                if (pt_gguf_kv_float(g, i, j, &d)) sink += d > 0;
                if ((s = pt_gguf_kv_str(g, i, j, &len)) != NULL) {
                    FZ_ASSERT(len >= 0 && (const uint8_t *)s >= data && (const uint8_t *)s + len <= data + size, "string outside the input");
                    if (len) sink += (unsigned char)s[0] + (unsigned char)s[len - 1];
                }
            }
        }
        for (i = 0; i < pt_gguf_tensor_count(g); i++) {
            const pt_gguf_tensor *t = pt_gguf_tensor_at(g, i);
            const uint8_t *p = (const uint8_t *)t->data;
            FZ_ASSERT(t->bytes >= 0 && p >= data && p + t->bytes <= data + size, "tensor '%s' outside the input", t->name);
            FZ_ASSERT(pt_gguf_tensor_find(g, t->name) == t, "tensor '%s' is not found by its name", t->name);
            if (t->bytes) sink += p[0] + p[t->bytes - 1];
            if (pt_wtype_name((pt_wtype)t->type) && t->ne[0] > 0 && t->ne[0] <= 4096) {
                int64_t rb = pt_wtype_row_bytes((pt_wtype)t->type, t->ne[0]), r;
                float y[4096];
                unsigned char row[4096 * 4];
                for (r = 0; rb > 0 && r < 4 && (r + 1) * rb <= t->bytes; r++) {
                    memcpy(row, p + r * rb, (size_t)rb); /* aligned for the block structs */
                    pt_dequantize_row((pt_wtype)t->type, row, y, t->ne[0]);
                    sink += y[0] > 0;
                }
            }
        }
        (void)sink;
    }
    if (!fz_write(path, sizeof path, dir, "in.gguf", data, size)) abort();
    g2 = pt_gguf_open(path, err, sizeof err);
    FZ_ASSERT((g == NULL) == (g2 == NULL), "the bytes %s, the file %s", g ? "parse" : "do not parse", g2 ? "parses" : "does not");
    if (g && g2) FZ_ASSERT(pt_gguf_kv_count(g) == pt_gguf_kv_count(g2) && pt_gguf_tensor_count(g) == pt_gguf_tensor_count(g2), "counts differ");
    pt_gguf_free(g2);
    pt_gguf_free(g);
    if (g) {
        pt_ctx *ctx = fz_ctx();
        pt_tokenizer *tk = NULL;
        pt_gpt_weights *w = pt_gguf_load(ctx, path, &tk);
        fz_note("pt_gguf_load", w != NULL, pt_error(ctx));
        if (w) {
            FZ_ASSERT(w->cfg.vocab >= 1 && w->cfg.vocab <= w->cfg.vocab_padded && w->wte.rows == w->cfg.vocab_padded && w->layer, "config");
            if (tk) {
                static const char text[] = "the cat sat on \xff\xff the mat";
                int32_t ids[64];
                uint8_t back[64];
                int64_t m = pt_tokenizer_encode(tk, text, (int64_t)sizeof text - 1, ids);
                FZ_ASSERT(m >= 0 && pt_tokenizer_decode(tk, ids, m, back, sizeof back) == (int64_t)sizeof text - 1 && !memcmp(back, text, sizeof text - 1),
                          "decode(encode(text)) != text");
            }
            if (gg_tiny(&w->cfg)) {
                pt_ctx *c2 = fz_new_ctx();
                pt_gpt *m = pt_gpt_new(c2, &w->cfg);
                if (m) fz_note("pt_gguf_to_params", pt_gguf_to_params(c2, w), pt_error(c2)), pt_gpt_free(m);
                pt_shutdown(c2);
            }
        }
        pt_tokenizer_free(tk);
        pt_gpt_weights_free(w);
    }
    return 0;
}
