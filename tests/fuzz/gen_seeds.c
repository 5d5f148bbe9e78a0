/* gen_seeds.c - writes the seed corpus of every harness of tests/fuzz, each a valid file made by
   ptrain.h itself (so the seeds follow the formats as they change):
     DIR/ckpt/         a tiny GPT's checkpoint (AdamW with its moments, registered state; and one
                       without optimizer state) as manifest FZ_SEP data; the same with '!' (raw)
     DIR/safetensors/  pt_ckpt_export of it (F32 with the moments, BF16 without)
     DIR/shard/        ptrain shards (uint16 and uint32 tokens) and an llm.c shard, each after a byte of
                       loader settings (see fuzz_shard.c)
     DIR/idx/          an IDX record file (12 x 2 x 3) with and without its label file (fuzz_idx.c)
     DIR/tokenizer/    a trained BPE tokenizer FZ_SEP text; GPT-2's vocab.json FZ_SEP merges.txt FZ_SEP text
     DIR/cltune/       a tuning file of every kernel's parameters (pt_cl_tune_params)
     DIR/runlog/       a pt_monitor log of a few steps, alone and FZ_SEP a pt_trace timeline
     DIR/gguf/         pt_gguf_export of the tiny GPT (f32; q8_0, whose width 4 falls back to f16) and of
                       one of width 32 (q4_0, q8_0); a writer-made file of every metadata type and
                       f32 / f16 / q8_0 / q4_0 tensors, at alignment 32 and at 1
   Usage: gen_seeds DIR (a few KB per seed; built by tests/fuzz_test.sh and the Makefile's fuzz
   target, or into the fuzz binary: fuzz_all.c, env PTFUZZ_SEEDS=DIR). Exit 1 on failure. */
#ifndef FZ_ALL
#define _POSIX_C_SOURCE 200809L
#define PTRAIN_IMPLEMENTATION
#include "../../ptrain.h"
#include "fuzz_util.h"
#endif

/* the bytes of a file (NULL on failure) */
static uint8_t *gs_slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    uint8_t *b = NULL;
    long len;
    if (f && fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 && (b = (uint8_t *)malloc((size_t)len + 1)) != NULL &&
        fread(b, 1, (size_t)len, f) != (size_t)len)
        free(b), b = NULL;
    if (b) *n = (size_t)len;
    if (f) fclose(f);
    return b;
}
/* DIR/NAME/FILE = prefix (plen bytes) + a + [FZ_SEP + b] */
static int gs_put(const char *dir, const char *name, const char *file, const void *prefix, size_t plen, const void *a, size_t na, const void *b, size_t nb) {
    char path[1200];
    FILE *f;
    int ok;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    mkdir(path, 0777);
    snprintf(path, sizeof path, "%s/%s/%s", dir, name, file);
    if (!(f = fopen(path, "wb"))) return fprintf(stderr, "gen_seeds: cannot write %s\n", path), 0;
    ok = fwrite(prefix, 1, plen, f) == plen && fwrite(a, 1, na, f) == na;
    if (b) ok = ok && fwrite(FZ_SEP, 1, sizeof FZ_SEP - 1, f) == sizeof FZ_SEP - 1 && fwrite(b, 1, nb, f) == nb;
    return (fclose(f) == 0) & ok;
}
/* DIR/NAME/FILE = prefix + the bytes of path [+ FZ_SEP + the bytes of path2] */
static int gs_put_files(const char *dir, const char *name, const char *file, const void *prefix, size_t plen, const char *path, const char *path2) {
    size_t n1 = 0, n2 = 0;
    uint8_t *a = gs_slurp(path, &n1), *b = path2 ? gs_slurp(path2, &n2) : NULL;
    int ok = a && (!path2 || b) && gs_put(dir, name, file, prefix, plen, a, n1, b, n2);
    if (!ok) fprintf(stderr, "gen_seeds: %s/%s from %s%s%s failed\n", name, file, path, path2 ? " and " : "", path2 ? path2 : "");
    free(a), free(b);
    return ok;
}

static int gs_ckpt(const char *dir, const char *tmp) {
    pt_gpt_config cfg;
    pt_ckpt_opts co;
    pt_optim_desc od;
    pt_ckpt_export_opts eo;
    char p[1200], q[1200], err[512];
    unsigned char state[16] = "fuzz seed state";
    pt_ctx *ctx = fz_new_ctx();
    pt_gpt *m;
    pt_optim *o;
    int ok = 1, i;
    memset(&cfg, 0, sizeof cfg);
    cfg.vocab = 4, cfg.vocab_padded = 4, cfg.max_seq = 2, cfg.layers = 1, cfg.width = 4, cfg.heads = 1;
    memset(&od, 0, sizeof od);
    od.kind = PT_OPTIM_ADAMW, od.lr = 1e-3f;
    if (!(m = pt_gpt_new(ctx, &cfg)) || !(o = pt_optim_new(ctx, &od)) || pt_state_register(ctx, "fuzz.state", state, sizeof state) != PT_OK)
        return fprintf(stderr, "gen_seeds: the model: %s\n", pt_error(ctx)), 0;
    memset(&co, 0, sizeof co);
    co.model = &cfg;
    for (i = 0; i < 2 && ok; i++) {
        snprintf(p, sizeof p, "%s/ck%d", tmp, i);
        if (pt_ckpt_save(ctx, i ? NULL : o, p, 3 + i, &co) != PT_OK) return fprintf(stderr, "gen_seeds: pt_ckpt_save: %s\n", pt_error(ctx)), 0;
        snprintf(p, sizeof p, "%s/ck%d/step_%09d/manifest", tmp, i, 3 + i);
        snprintf(q, sizeof q, "%s/ck%d/step_%09d/rank_00000.bin", tmp, i, 3 + i);
        ok = gs_put_files(dir, "ckpt", i ? "params" : "adamw", "", 0, p, q);
        if (!i) ok = ok && gs_put_files(dir, "ckpt", "adamw_raw", "!", 1, p, q);
    }
    snprintf(p, sizeof p, "%s/ck0/step_%09d", tmp, 3);
    for (i = 0; i < 2 && ok; i++) {
        memset(&eo, 0, sizeof eo);
        eo.bf16 = i, eo.moments = !i;
        snprintf(q, sizeof q, "%s/export%d.safetensors", tmp, i);
        if (pt_ckpt_export(p, q, &eo, err, sizeof err) != PT_OK) return fprintf(stderr, "gen_seeds: pt_ckpt_export: %s\n", err), 0;
        ok = gs_put_files(dir, "safetensors", i ? "bf16" : "f32_moments", "", 0, q, NULL);
    }
    pt_optim_free(o);
    pt_gpt_free(m);
    pt_shutdown(ctx);
    return ok;
}

static int gs_shard(const char *dir, const char *tmp) {
    static const struct { pt_shard_format fmt; int32_t vocab; int n; unsigned char settings; const char *name; } s[] = {
        {PT_SHARD_PTRAIN, 300, 41, 0x0B, "ptrain_u16"},           /* T 4, B 2 */
        {PT_SHARD_PTRAIN, 0, 33, 0x6B, "ptrain_u32_shuffle_two"}, /* T 4, B 2, shuffled, listed twice */
        {PT_SHARD_LLMC, 0, 30, 0x81, "llmc_two_ranks"}};          /* T 2, B 1 per rank, 2 ranks */
    uint32_t tok[64];
    char p[1200];
    pt_ctx *ctx = fz_ctx();
    int i, k;
    for (k = 0; k < 64; k++) tok[k] = (uint32_t)(k * 7 % 300);
    for (i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/shard%d.bin", tmp, i);
        if (pt_shard_write(ctx, p, s[i].fmt, tok, s[i].n, s[i].vocab) != PT_OK) return fprintf(stderr, "gen_seeds: pt_shard_write: %s\n", pt_error(ctx)), 0;
        if (!gs_put_files(dir, "shard", s[i].name, &s[i].settings, 1, p, NULL)) return 0;
    }
    return 1;
}

static int gs_idx(const char *dir) {
    uint8_t rec[16 + 12 * 6], lab[8 + 12];
    unsigned char set_labels = 0x0D, set_plain = 0x01; /* B 2, shuffled, classes 10; B 2 */
    int i;
    memset(rec, 0, sizeof rec), memset(lab, 0, sizeof lab);
    rec[2] = 0x08, rec[3] = 3, rec[7] = 12, rec[11] = 2, rec[15] = 3;
    for (i = 0; i < 12 * 6; i++) rec[16 + i] = (uint8_t)(i * 37);
    lab[2] = 0x08, lab[3] = 1, lab[7] = 12;
    for (i = 0; i < 12; i++) lab[8 + i] = (uint8_t)(i % 10);
    return gs_put(dir, "idx", "with_labels", &set_labels, 1, rec, sizeof rec, lab, sizeof lab) &&
           gs_put(dir, "idx", "records_only", &set_plain, 1, rec, sizeof rec, NULL, 0);
}

static int gs_tokenizer(const char *dir, const char *tmp) {
    static const char text[] = "the cat sat on the mat; the cat ate the rat. the end.";
    static const char other[] = "a rat, a mat, \xc3\xa9t\xc3\xa9, and the the the\n";
    char p[1200];
    pt_ctx *ctx = fz_ctx();
    pt_tokenizer *tk = pt_tokenizer_train(ctx, text, (int64_t)strlen(text), 24);
    int ok;
    snprintf(p, sizeof p, "%s/%s", tmp, PT_TOKENIZER_FILE);
    if (!tk || pt_tokenizer_save(tk, p) != PT_OK) return fprintf(stderr, "gen_seeds: the tokenizer: %s\n", pt_error(ctx)), 0;
    pt_tokenizer_free(tk);
    {
        size_t n = 0;
        uint8_t *b = gs_slurp(p, &n);
        ok = b && gs_put(dir, "tokenizer", "trained_text", "", 0, b, n, text, strlen(text)) &&
             gs_put(dir, "tokenizer", "trained_other", "", 0, b, n, other, strlen(other)) && gs_put(dir, "tokenizer", "file_only", "", 0, b, n, NULL, 0);
        free(b);
    }
    { /* GPT-2's tokenizer files: vocab.json (ids 0..255 the bytes in GPT-2's order) FZ_SEP merges.txt FZ_SEP text */
        static const char *const mg[4] = {"\xc4\xa0 t", "h e", "\xc4\xa0t he", "a t"};
        char v[4096], *q = v, m[256];
        int bs[256], nb = 0, b, k, cp;
        for (b = 0; b < 256; b++)
            if ((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE) bs[nb++] = b;
        for (b = 0; b < 256; b++)
            if (!((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE)) bs[nb++] = b;
        *q++ = '{';
        for (k = 0; k < 256; k++) { /* GPT-2's character of byte bs[k]: itself, or U+0100 + its place among the others */
            cp = k < 188 ? bs[k] : 256 + k - 188;
            q += sprintf(q, "%s\"%s", k ? ", " : "", cp == '"' || cp == '\\' ? "\\" : "");
            if (cp < 128) *q++ = (char)cp;
            else *q++ = (char)(0xC0 | (cp >> 6)), *q++ = (char)(0x80 | (cp & 0x3F));
            q += sprintf(q, "\": %d", k);
        }
        q += sprintf(q, ", \"\xc4\xa0t\": 256, \"he\": 257, \"\xc4\xa0the\": 258, \"at\": 259, \"<|endoftext|>\": 260}");
        for (k = 0, m[0] = 0; k < 4; k++) strcat(m, mg[k]), strcat(m, "\n");
        ok = ok && gs_put(dir, "tokenizer", "gpt2_files", "", 0, v, (size_t)(q - v), m, strlen(m));
        if (ok) { /* the same with a text: append FZ_SEP text to the file just written */
            char path[1200];
            FILE *f;
            snprintf(path, sizeof path, "%s/tokenizer/gpt2_files", dir);
            ok = (f = fopen(path, "ab")) != NULL && fwrite(FZ_SEP, 1, sizeof FZ_SEP - 1, f) == sizeof FZ_SEP - 1 && fwrite(text, 1, strlen(text), f) == strlen(text);
            ok = (f && fclose(f) == 0) && ok;
        }
    }
    return ok;
}

static int gs_cltune(const char *dir) {
    static const char *const kernels[] = {"Xgemm", "XgemmDirect", "Copy", "Pad", "Transpose", "Padtranspose", "GemmRoutine"};
    pt_sb b;
    int k, i, ok;
    pt_sb_init(&b);
    pt_sb_add(&b, "# ptcl tune (a seed of tests/fuzz)\n\n");
    for (k = 0; k < 7; k++) {
        const char *const *names = pt_cl_tune_params(kernels[k]);
        for (i = 0; names && names[i]; i++) pt_sb_add(&b, "%s.%s = %d%s\n", kernels[k], names[i], 1 << (i % 4), i ? "" : "   # first");
    }
    ok = !b.oom && gs_put(dir, "cltune", "all_kernels", "", 0, b.s, b.n, NULL, 0);
    pt_sb_free(&b);
    return ok;
}

static int gs_runlog(const char *dir, const char *tmp) {
    static const char *const extra[] = {"model", "gpt tiny \"seed\"", "batch", "8", NULL};
    char lp[1200], tp[1200];
    pt_gpt_config cfg;
    pt_monitor_desc md;
    pt_monitor *mon;
    pt_ctx *ctx = fz_new_ctx();
    int s, mb, ok;
    memset(&cfg, 0, sizeof cfg);
    cfg.vocab = 4, cfg.vocab_padded = 4, cfg.max_seq = 2, cfg.layers = 1, cfg.width = 4, cfg.heads = 1;
    snprintf(lp, sizeof lp, "%s/log.jsonl", tmp);
    snprintf(tp, sizeof tp, "%s/trace.json", tmp);
    memset(&md, 0, sizeof md);
    md.log_path = lp, md.model = &cfg, md.seq = 2, md.peak_flops = 1e9, md.config = extra, md.total_steps = 6, md.progress = -1;
    if (pt_trace_start(ctx, NULL, tp, 0) != PT_OK || !(mon = pt_monitor_new(ctx, NULL, &md)))
        return fprintf(stderr, "gen_seeds: the monitor: %s\n", pt_error(ctx)), 0;
    for (s = 0; s < 6; s++) {
        pt_monitor_step st;
        double t = pt_time();
        pt_trace_step(ctx, s);
        for (mb = 0; mb < 2; mb++) {
            pt_trace_event(ctx, PT_TRACE_FORWARD, "forward", t + mb * 1e-4, t + mb * 1e-4 + 5e-5, -1, mb);
            pt_trace_event(ctx, PT_TRACE_BACKWARD, "backward", t + 3e-4 + mb * 1e-4, t + 3e-4 + mb * 1e-4 + 8e-5, -1, mb);
        }
        pt_trace_event(ctx, PT_TRACE_OPTIM, "adamw", t + 6e-4, t + 7e-4, -1, -1);
        pt_monitor_add_time(mon, PT_MON_DATA, 1e-7);
        if (s % 3 == 2) pt_monitor_val_loss(mon, 2.5f - 0.1f * (float)s);
        if (s == 4) pt_monitor_event(mon, "spike", "kind=%s loss=%g z=%.2f", "loss", 9.5, 4.25);
        st.loss = 3.0f - 0.2f * (float)s, st.grad_norm = 1.0f + 0.1f * (float)s, st.lr = 1e-3f, st.tokens = 16;
        if (pt_monitor_step_end(mon, &st) != PT_OK) return fprintf(stderr, "gen_seeds: pt_monitor_step_end: %s\n", pt_error(ctx)), 0;
    }
    pt_monitor_free(mon);
    if (pt_trace_finish(ctx) != PT_OK) return fprintf(stderr, "gen_seeds: pt_trace_finish: %s\n", pt_error(ctx)), 0;
    pt_shutdown(ctx);
    ok = gs_put_files(dir, "runlog", "log", "", 0, lp, NULL) && gs_put_files(dir, "runlog", "log_trace", "", 0, lp, tp);
    {
        /* the log of a run killed while writing its last line */
        size_t n = 0;
        uint8_t *b = gs_slurp(lp, &n);
        ok = ok && b && n > 20 && gs_put(dir, "runlog", "log_torn", "", 0, b, n - 12, NULL, 0);
        free(b);
    }
    return ok;
}

static int gs_gguf(const char *dir, const char *tmp) {
    static const pt_wtype types[4] = {PT_W_F32, PT_W_Q8_0, PT_W_Q4_0, PT_W_Q8_0};
    pt_gguf_export_opts eo;
    pt_gpt_config cfg;
    pt_ckpt_opts co;
    char p[1200], q[1200], err[512];
    pt_ctx *ctx = fz_new_ctx();
    pt_gpt *m;
    int ok = 1, i;
    unsigned a;
    memset(&cfg, 0, sizeof cfg);
    cfg.vocab = 4, cfg.vocab_padded = 4, cfg.max_seq = 2, cfg.layers = 1, cfg.width = 32, cfg.heads = 1;
    memset(&co, 0, sizeof co);
    co.model = &cfg;
    snprintf(p, sizeof p, "%s/ck32", tmp);
    if (!(m = pt_gpt_new(ctx, &cfg)) || pt_ckpt_save(ctx, NULL, p, 1, &co) != PT_OK) return fprintf(stderr, "gen_seeds: the width-32 GPT: %s\n", pt_error(ctx)), 0;
    pt_gpt_free(m);
    pt_shutdown(ctx);
    for (i = 0; i < 4 && ok; i++) { /* the ckpt seed's GPT (width 4) as f32 and q8_0; the width-32 one as q4_0 and q8_0 */
        memset(&eo, 0, sizeof eo);
        eo.type = types[i];
        if (i < 2) snprintf(p, sizeof p, "%s/ck0/step_%09d", tmp, 3);
        else snprintf(p, sizeof p, "%s/ck32/step_%09d", tmp, 1);
        snprintf(q, sizeof q, "%s/export%d.gguf", tmp, i);
        if (pt_gguf_export(p, q, &eo, err, sizeof err) != PT_OK) return fprintf(stderr, "gen_seeds: pt_gguf_export: %s\n", err), 0;
        snprintf(p, sizeof p, "gpt2_w%d_%s", i < 2 ? 4 : 32, pt_wtype_name(types[i]));
        ok = gs_put_files(dir, "gguf", p, "", 0, q, NULL);
    }
    for (a = 1; a <= 32 && ok; a *= 32) { /* every metadata type, four tensor types */
        pt_gguf_writer *w = pt_gguf_writer_new(a);
        uint8_t u8 = 7, bt = 1;
        int16_t i16 = -3;
        uint64_t u64 = 1ull << 40;
        double f64 = 0.5;
        float f32 = 2.5f, x[64];
        int32_t ai[3] = {1, -2, 3};
        const char *str = "gpt2", *strs[2] = {"\xc4\xa0" "a", "b c"};
        unsigned char q8[34 * 2], q4[18];
        uint16_t h[3];
        int64_t ne1[1] = {3}, ne2[2] = {32, 2}, ne3[2] = {32, 1};
        for (i = 0; i < 64; i++) x[i] = (float)(i % 7) - 3.0f;
        for (i = 0; i < 3; i++) h[i] = pt__f16_from_f32(x[i]);
        pt_quantize_row(PT_W_Q8_0, x, q8, 64), pt_quantize_row(PT_W_Q4_0, x, q4, 32);
        pt_gguf_writer_kv(w, "general.architecture", PT_GGUF_STRING, &str), pt_gguf_writer_kv(w, "u8", PT_GGUF_U8, &u8);
        pt_gguf_writer_kv(w, "b", PT_GGUF_BOOL, &bt), pt_gguf_writer_kv(w, "i16", PT_GGUF_I16, &i16), pt_gguf_writer_kv(w, "u64", PT_GGUF_U64, &u64);
        pt_gguf_writer_kv(w, "f64", PT_GGUF_F64, &f64), pt_gguf_writer_kv(w, "f32", PT_GGUF_F32, &f32);
        pt_gguf_writer_arr(w, "ai", PT_GGUF_I32, ai, 3), pt_gguf_writer_arr(w, "as", PT_GGUF_STRING, strs, 2);
        pt_gguf_writer_tensor(w, "f", 0, 1, ne1), pt_gguf_writer_tensor(w, "h", 1, 1, ne1), pt_gguf_writer_tensor(w, "q8", 8, 2, ne2);
        pt_gguf_writer_tensor(w, "q4", 2, 2, ne3);
        snprintf(q, sizeof q, "%s/types%u.gguf", tmp, a);
        pt_gguf_writer_begin(w, q), pt_gguf_writer_data(w, x, 12), pt_gguf_writer_data(w, h, 6), pt_gguf_writer_data(w, q8, 68), pt_gguf_writer_data(w, q4, 18);
        if (pt_gguf_writer_finish(w) != PT_OK) ok = 0, fprintf(stderr, "gen_seeds: the gguf writer: %s\n", pt_gguf_writer_error(w));
        pt_gguf_writer_free(w);
        snprintf(p, sizeof p, "types_align%u", a);
        ok = ok && gs_put_files(dir, "gguf", p, "", 0, q, NULL);
    }
    return ok;
}

/* every seed into dir (created); 1 when all were written */
static int fz_gen_seeds(const char *dir) {
    char tmp[1200];
    const char *scratch = fz_dir();
    int ok;
    mkdir(dir, 0777);
    snprintf(tmp, sizeof tmp, "%s", scratch);
    ok = gs_ckpt(dir, tmp) && gs_gguf(dir, tmp) && gs_shard(dir, tmp) && gs_idx(dir) && gs_tokenizer(dir, tmp) && gs_cltune(dir) && gs_runlog(dir, tmp);
    fz_dir(); /* emptied */
    return ok;
}

#ifndef FZ_ALL
int main(int argc, char **argv) {
    if (argc != 2) return fprintf(stderr, "usage: gen_seeds DIR\n"), 2;
    return fz_gen_seeds(argv[1]) ? 0 : 1;
}
#endif
