/* fuzz_tokenizer.c - libFuzzer harness of the BPE tokenizer file reader: pt_tokenizer_load, then
   encode and decode a little text; checked: decode(encode(text)) == text and the sizing call of
   decode agrees, every token within PT_TOK_MAX_TOKEN_BYTES and the vocabulary within
   PT_TOK_MAX_TOTAL_BYTES. Input: the tokenizer file, then (optional) FZ_SEP and the text (at most 4 KiB
   used). Unless the input starts with '!', the harness writes the true CRC32C of the merges into
   the header (so the fuzzer gets past it); with '!' the file is written as it is. An input that starts
   with '{' is GPT-2's tokenizer files instead, for pt_tokenizer_load_gpt2: vocab.json FZ_SEP
   merges.txt [FZ_SEP text], with the same checks. */
#define _POSIX_C_SOURCE 200809L
#define PTRAIN_IMPLEMENTATION
#include "../../ptrain.h"
#include "fuzz_util.h"

FZ_ENTRY(tokenizer) {
    const char *dir = fz_dir();
    char path[700];
    const uint8_t *text;
    size_t n1, n2;
    int raw = size > 0 && data[0] == '!';
    pt_ctx *ctx = fz_ctx();
    pt_tokenizer *tk;
    uint8_t *file;
    if (raw) data++, size--;
    fz_split(data, size, &n1, &text, &n2);
    if (!raw && size > 0 && data[0] == '{') { /* GPT-2's vocab.json FZ_SEP merges.txt [FZ_SEP text] */
        char vpath[700];
        const uint8_t *m = text;
        size_t nm = n2;
        if (!fz_write(vpath, sizeof vpath, dir, "vocab.json", data, n1)) abort();
        if (m) fz_split(m, nm, &nm, &text, &n2);
        else nm = 0, n2 = 0;
        if (!fz_write(path, sizeof path, dir, "merges.txt", m ? m : data, nm)) abort();
        tk = pt_tokenizer_load_gpt2(ctx, vpath, path);
        fz_note("pt_tokenizer_load_gpt2", tk != NULL, pt_error(ctx));
    } else {
        if (!(file = (uint8_t *)malloc(n1 + 1))) return 0;
        memcpy(file, data, n1);
        if (!raw && n1 >= 32) {
            uint32_t crc = pt_crc32c(0, file + 32, n1 - 32);
            file[16] = (uint8_t)crc, file[17] = (uint8_t)(crc >> 8), file[18] = (uint8_t)(crc >> 16), file[19] = (uint8_t)(crc >> 24);
        }
        if (!fz_write(path, sizeof path, dir, PT_TOKENIZER_FILE, file, n1)) abort();
        free(file);
        tk = pt_tokenizer_load(ctx, path);
        fz_note("pt_tokenizer_load", tk != NULL, pt_error(ctx));
    }
    if (tk) {
        int64_t n = n2 > 4096 ? 4096 : (int64_t)n2, m, back;
        int32_t *ids = (int32_t *)malloc((size_t)(n > 0 ? n : 1) * sizeof(int32_t));
        uint8_t *out = (uint8_t *)malloc((size_t)(n > 0 ? n : 1));
        FZ_ASSERT(pt_tokenizer_vocab(tk) >= 256, "vocab %d", (int)pt_tokenizer_vocab(tk));
        { /* every token within PT_TOK_MAX_TOKEN_BYTES, all within PT_TOK_MAX_TOTAL_BYTES (the load's bounds) */
            int32_t id;
            int64_t all = 0, l;
            for (id = 0; id < pt_tokenizer_vocab(tk); id++) {
                l = pt_tokenizer_decode(tk, &id, 1, NULL, 0);
                FZ_ASSERT(l >= 1 && l <= PT_TOK_MAX_TOKEN_BYTES, "token %d stands for %lld bytes", (int)id, (long long)l);
                all += l;
            }
            FZ_ASSERT(all <= PT_TOK_MAX_TOTAL_BYTES, "the vocabulary stands for %lld bytes", (long long)all);
        }
        if (ids && out && (m = pt_tokenizer_encode(tk, text, n, ids)) >= 0) {
            FZ_ASSERT(m <= n, "%lld ids for %lld bytes", (long long)m, (long long)n);
            back = pt_tokenizer_decode(tk, ids, m, NULL, 0);
            FZ_ASSERT(back == n, "decode sizes %lld bytes, the text had %lld", (long long)back, (long long)n);
            back = pt_tokenizer_decode(tk, ids, m, out, n);
            FZ_ASSERT(back == n && (n == 0 || !memcmp(out, text, (size_t)n)), "decode(encode(text)) != text (%lld bytes)", (long long)n);
        }
        /* the text's bytes as ids too: in or out of the vocabulary */
        if (ids && n >= 4) {
            int64_t k, cnt = n / 4;
            for (k = 0; k < cnt; k++) memcpy(&ids[k], text + 4 * k, 4);
            back = pt_tokenizer_decode(tk, ids, cnt, NULL, 0);
            if (back >= 0 && back <= 65536) {
                uint8_t *big = (uint8_t *)malloc((size_t)(back > 0 ? back : 1));
                if (big) FZ_ASSERT(pt_tokenizer_decode(tk, ids, cnt, big, back) == back, "decode of %lld ids changed its size", (long long)cnt);
                free(big);
            }
        }
        free(ids), free(out);
        pt_tokenizer_free(tk);
    }
    return 0;
}
