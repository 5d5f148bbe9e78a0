/* fuzz_ckpt.c - libFuzzer harness of the checkpoint reader: the manifest parser (pt__ck_man_read)
   and everything that reads a step directory through it: pt_ckpt_verify, pt_ckpt_info_read,
   pt_ckpt_tensor_read, pt_ckpt_export (then the exported file is read back: it must be valid
   safetensors) and pt_ckpt_load into a model of the manifest's configuration when that is tiny.
   Input: MANIFEST FZ_SEP DATA. DATA is written as every data file a `file` record names (a plain
   name, at most 8 of them). Unless the input starts with '!', the harness makes the checksums true
   (so the fuzzer gets past them): each record's crc32c= is set to the CRC32C of the data it names
   (when inside DATA) and the `end` line is rewritten over the bytes before it; with '!' the bytes
   are written as they are. Build: see the Makefile's fuzz target. */
#define _POSIX_C_SOURCE 200809L
#define PTRAIN_IMPLEMENTATION
#include "../../ptrain.h"
#include "fuzz_util.h"

/* the value of " key=" in line [s, e) as an integer; 0 when absent */
static int ckf_i64(const char *s, const char *e, const char *key, long long *v) {
    size_t kl = strlen(key);
    const char *p;
    for (p = s; p + kl + 2 <= e; p++)
        if (p[0] == ' ' && !memcmp(p + 1, key, kl) && p[kl + 1] == '=') {
            char b[32];
            size_t i = 0;
            p += kl + 2;
            while (p < e && *p != ' ' && i + 1 < sizeof b) b[i++] = *p++;
            b[i] = 0;
            *v = strtoll(b, NULL, 0);
            return 1;
        }
    return 0;
}
static int ckf_str(const char *s, const char *e, const char *key, char *out, size_t cap) {
    size_t kl = strlen(key);
    const char *p;
    for (p = s; p + kl + 2 <= e; p++)
        if (p[0] == ' ' && !memcmp(p + 1, key, kl) && p[kl + 1] == '=') {
            size_t i = 0;
            p += kl + 2;
            while (p < e && *p != ' ' && i + 1 < cap) out[i++] = *p++;
            out[i] = 0;
            return 1;
        }
    return 0;
}
static const char *ckf_find(const char *s, size_t n, const char *w) {
    size_t k = strlen(w), i;
    for (i = 0; i + k <= n; i++)
        if (!memcmp(s + i, w, k)) return s + i;
    return NULL;
}
/* appends n bytes to the manifest being built (its room is sized by the caller) */
static void ckf_put(char *buf, size_t *at, const void *p, size_t n) {
    memcpy(buf + *at, p, n);
    *at += n;
}

static int ckf_plain(const char *s) {
    size_t i;
    if (!s[0] || s[0] == '.' || !strcmp(s, "manifest") || strlen(s) > 60) return 0;
    for (i = 0; s[i]; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '-' || s[i] == '.'))
            return 0;
    return 1;
}

/* a tiny model of the manifest's configuration loads the checkpoint (what a resume does) */
static void ckf_load(const char *dir, const pt_ckpt_info *info) {
    const pt_gpt_config *c = &info->model;
    pt_ctx *ctx;
    pt_gpt *m;
    pt_optim *o = NULL;
    int64_t step = -2;
    pt_status st;
    if (!info->has_model || c->vocab < 1 || c->vocab > 256 || c->vocab_padded < 0 || c->vocab_padded > 256 || c->max_seq < 1 || c->max_seq > 16 ||
        c->layers < 1 || c->layers > 2 || c->width < 1 || c->width > 32 || c->heads < 1 || c->heads > 4)
        return;
    ctx = fz_new_ctx();
    if ((m = pt_gpt_new(ctx, c)) != NULL) {
        if (info->optim_kind >= 0) {
            pt_optim_desc od;
            memset(&od, 0, sizeof od);
            od.kind = (pt_optim_kind)info->optim_kind, od.lr = 1e-3f, od.momentum = 0.9f;
            o = pt_optim_new(ctx, &od);
        }
        st = pt_ckpt_load(ctx, o, dir, &step);
        fz_note("pt_ckpt_load", st, pt_error(ctx));
        if (st == PT_OK) FZ_ASSERT(step == info->step, "loaded step %lld, manifest %lld", (long long)step, (long long)info->step);
        if (o) pt_optim_free(o);
        pt_gpt_free(m);
    }
    pt_shutdown(ctx);
}

FZ_ENTRY(ckpt) {
    const char *root = fz_dir();
    char dir[600], path[1200], err[512], names[8][64];
    const uint8_t *bin;
    size_t nman, nbin, i;
    int raw = size > 0 && data[0] == '!', nfiles = 0, k;
    char *man, hex[16];
    size_t nm = 0;
    pt_ckpt_info info;
    pt_ckpt_export_opts eo;
    pt_status st;
    fz_split(data + raw, size - (size_t)raw, &nman, &bin, &nbin);
    snprintf(dir, sizeof dir, "%s/step_000000007", root);
    if (mkdir(dir, 0777) != 0) abort();
    if (!(man = (char *)malloc(2 * nman + 64))) return 0;
    /* the manifest, line by line: the data files named, the checksums made true */
    for (i = 0; i < nman;) {
        const char *s = (const char *)data + raw + i, *e = memchr(s, '\n', nman - i), *c;
        size_t len = e ? (size_t)(e - s) + 1 : nman - i;
        long long off = 0, bytes = 0;
        char name[64];
        e = s + len;
        i += len;
        if (!raw && len >= 4 && !memcmp(s, "end ", 4)) continue; /* rewritten below */
        if (len > 5 && !memcmp(s, "file ", 5) && ckf_str(s, e, "name", name, sizeof name) && ckf_plain(name) && nfiles < 8) {
            for (k = 0; k < nfiles && strcmp(names[k], name); k++) {}
            if (k == nfiles) memcpy(names[nfiles++], name, sizeof name);
        }
        if (!raw && (c = ckf_find(s, len, " crc32c=")) != NULL) {
            uint32_t crc = 0;
            int known = 0;
            if (len > 5 && !memcmp(s, "file ", 5)) crc = pt_crc32c(0, bin, nbin), known = 1;
            else if (((len > 7 && !memcmp(s, "tensor ", 7)) || (len > 6 && !memcmp(s, "state ", 6))) && ckf_i64(s, e, "offset", &off) &&
                     ckf_i64(s, e, "bytes", &bytes) && off >= 0 && bytes >= 0 && (unsigned long long)off + (unsigned long long)bytes <= nbin)
                crc = pt_crc32c(0, nbin ? bin + off : bin, (size_t)bytes), known = 1; /* no offset on a NULL buffer */
            if (known) {
                const char *v = c + 8;
                while (v < e && *v != ' ' && *v != '\n') v++;
                snprintf(hex, sizeof hex, "0x%08x", (unsigned)crc);
                ckf_put(man, &nm, s, (size_t)(c + 8 - s)), ckf_put(man, &nm, hex, 10), ckf_put(man, &nm, v, (size_t)(e - v));
                continue;
            }
        }
        ckf_put(man, &nm, s, len);
    }
    if (!raw) {
        if (nm && man[nm - 1] != '\n') ckf_put(man, &nm, "\n", 1);
        snprintf(hex, sizeof hex, "0x%08x\n", (unsigned)pt_crc32c(0, man, nm));
        ckf_put(man, &nm, "end crc32c=", 11), ckf_put(man, &nm, hex, 11);
    }
    if (!fz_write(path, sizeof path, dir, "manifest", man, nm)) abort();
    free(man);
    for (k = 0; k < nfiles; k++)
        if (!fz_write(path, sizeof path, dir, names[k], bin ? (const void *)bin : "", nbin)) abort();

    err[0] = 0;
    fz_note("pt_ckpt_verify", pt_ckpt_verify(dir, err, sizeof err), err);
    err[0] = 0;
    st = pt_ckpt_info_read(root, &info, err, sizeof err);
    fz_note("pt_ckpt_info_read", st, err);
    if (st == PT_OK) {
        for (k = 0; k < info.ntensors && k < 16; k++) {
            const pt_ckpt_tensor_info *t = &info.tensors[k];
            int64_t n = 1;
            int d;
            float *out;
            for (d = 0; d < t->ndim && n > 0; d++) n = t->shape[d] > 0 && t->shape[d] <= (1 << 20) && n * t->shape[d] <= (1 << 20) ? n * t->shape[d] : -1;
            if (n <= 0 || !(out = (float *)malloc((size_t)n * sizeof(float)))) continue;
            err[0] = 0;
            fz_note("pt_ckpt_tensor_read", pt_ckpt_tensor_read(dir, t->name, t->kind, out, n, err, sizeof err), err);
            free(out);
        }
        memset(&eo, 0, sizeof eo);
        eo.bf16 = (int32_t)(nbin & 1), eo.moments = (int32_t)(nman & 1);
        snprintf(path, sizeof path, "%s/out.safetensors", root);
        err[0] = 0;
        st = pt_ckpt_export(dir, path, &eo, err, sizeof err);
        fz_note("pt_ckpt_export", st, err);
        if (st == PT_OK) {
            pt__sf st;
            char err2[512];
            FZ_ASSERT(pt__sf_open(path, &st, err2, sizeof err2), "pt_ckpt_export wrote a file its reader refuses: %s", err2);
            pt__sf_free(&st);
        }
        ckf_load(dir, &info);
        pt_ckpt_info_free(&info);
    }
    return 0;
}
