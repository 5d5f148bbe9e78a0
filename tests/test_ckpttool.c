/* test_ckpttool.c - checkpoint inspection and safetensors export/import (>>ckpt, tools/ptckpt.c).
   A tiny GPT (vocab 60 padded to 64, 2 layers, width 32, AdamW) trains 3 steps and saves a
   checkpoint. Its safetensors exports (F32, BF16, F32 with the moments) are parsed back by a parser
   of this file (independent of the library's): the 8-byte little-endian header size, a header that is
   a multiple of 8 padded with spaces, valid JSON of the expected keys, dtypes and shapes, offsets
   contiguous from 0 to the end of the file in offset order, the metadata; then every value against
   the live model (F32 bit-exact; BF16 equal to this file's own round-to-nearest-even of each value;
   NaN, ties, Inf, the largest finite value rounding to Inf, -0 included). Import: the F32 export
   loaded into a fresh model and saved without optimizer, loaded by pt_ckpt_load with an AdamW
   optimizer (its moments start at zero, with a message): the loss of one forward equals the
   original's bit for bit. A file written by this test in another style (metadata last, spaces,
   escapes) loads exactly. Refused, with a message and no parameter changed: truncated, a bad header
   size, invalid JSON, offsets out of range, a hole, a wrong byte count, a missing / extra /
   differently shaped tensor. pt_ckpt_verify names a data file with a flipped byte. Manifests crafted
   bad (a shape whose product overflows or has 5 dims or a 0, a split or range that does not fit,
   hi - lo whose x4 wraps to bytes, a piece or state past its file, vocab near INT_MAX, an unknown
   optimizer or kind, a step past int64, world 1048576 in a 99-byte file, dp x tp x pp not the world)
   are refused by verify, export and info alike, naming the field, what was expected and found; a data
   file or manifest that is a FIFO, a link to /dev/zero or a directory is refused without blocking.

   Build: cc -std=c99 -O2 -I. tests/test_ckpttool.c -lm; run: test_ckpttool DIR (leaves DIR/run, the
   checkpoint, and DIR/f32.safetensors for tests/ckpttool_test.sh). With mpicc -DPTRAIN_MPI under
   mpirun -np 4 (env CKT_TP=2: dp2 x tp2 with ZeRO-1): the checkpoint of step 0 exported must equal a
   1-rank model's initial values bit for bit, and after 3 steps every rank's shards and ZeRO ranges
   of the moments must match the export through pt_spec_global_index; on every layout the F32 export
   loaded by pt_safetensors_load into a fresh model gives every shard bit for bit.
   `test_ckpttool --loss CKPTDIR` prints the loss (as hex bits) of one forward of that checkpoint. */
#define _POSIX_C_SOURCE 200809L
#define PTRAIN_IMPLEMENTATION
#include "ptrain.h"
#include "test_util.h"
#include <sys/stat.h>
#include <unistd.h>

#define B 2
#define T 8

static pt_dist *D;
static int RANK, NTP = 1, DPN = 1;
static char LOG[1 << 16];
static void log_cb(void *user, int level, const char *msg) {
    size_t n = strlen(LOG);
    (void)user, (void)level;
    if (n + strlen(msg) + 2 < sizeof LOG) snprintf(LOG + n, sizeof LOG - n, "%s\n", msg);
}

static pt_gpt_config CFG;
typedef struct model {
    pt_ctx *ctx;
    pt_gpt *m;
    pt_optim *o;
    pt_dp *dp;
    pt_graph *g;
} model;
static int model_open(model *r, const pt_dist *d, int with_optim) {
    pt_desc desc;
    pt_optim_desc od;
    memset(r, 0, sizeof *r);
    memset(&desc, 0, sizeof desc);
    desc.seed = 11, desc.dist = d, desc.log = log_cb, desc.threads = 1, desc.device = "cpu";
    if (!(r->ctx = pt_init(&desc)) || !(r->m = pt_gpt_new(r->ctx, &CFG))) return 0;
    if (with_optim) {
        memset(&od, 0, sizeof od);
        od.kind = PT_OPTIM_ADAMW, od.lr = 1e-2f, od.weight_decay = 0.1f;
        if (!(r->o = pt_optim_new(r->ctx, &od))) return 0;
        if (d && DPN > 1 && (!(r->dp = pt_dp_new(r->ctx, D, 0)) || pt_dp_zero(r->dp, r->o, 1) != PT_OK)) return 0;
    }
    return (r->g = pt_graph_new(r->ctx)) != NULL;
}
static void model_close(model *r) {
    if (r->dp) pt_dp_free(r->dp);
    if (r->m) pt_gpt_free(r->m);
    if (r->ctx) pt_shutdown(r->ctx);
    memset(r, 0, sizeof *r);
}
static void batch(int k, int32_t *ids, int32_t *tgt) {
    int i;
    for (i = 0; i < B * T; i++) ids[i] = (i * 7 + k * 13) % CFG.vocab, tgt[i] = (i * 5 + k * 3 + 1) % CFG.vocab;
}
/* one forward (step < 0) or one training step on batch k; the loss (NAN on error) */
static float model_step(model *r, int k, int train) {
    int32_t ids[B * T], tgt[B * T];
    pt_tensor *x, *y, *loss;
    int bl = B / DPN, dpr = D ? pt_dist_coords(D).dp : 0;
    float l;
    batch(k, ids, tgt);
    pt_graph_reset(r->g);
    pt_graph_set_grad(r->g, train);
    x = pt_tensor_new(r->g, PT_I32, 2, bl, T, 0, 0);
    y = pt_tensor_new(r->g, PT_I32, 2, bl, T, 0, 0);
    if (!x || !y) return NAN;
    pt_tensor_write(x, ids + dpr * bl * T);
    pt_tensor_write(y, tgt + dpr * bl * T);
    if (!(loss = pt_gpt_loss(r->g, r->m, x, y))) return NAN;
    l = pt_item(loss);
    if (!train) return l;
    pt_zero_grad(r->ctx);
    if (r->dp) pt_dp_begin_step(r->dp, 1);
    if (pt_backward(r->g, loss) != PT_OK) return NAN;
    if (r->dp && pt_dp_finish(r->dp) != PT_OK) return NAN;
    pt_optim_step(r->o, 1e-2f);
    return l;
}

/* ---- an independent safetensors reader (no library code) ---- */
typedef struct sent {
    char name[128], dtype[16];
    int ndim;
    long long shape[8], b, e;
} sent;
typedef struct sfile {
    unsigned char *bytes;
    long size;
    unsigned long long hlen;
    sent t[256];
    int n;
    char mk[32][32], mv[32][64];
    int nm;
    char why[512];
} sfile;
static void sk(const char **p) {
    while (**p == ' ' || **p == '\n' || **p == '\t' || **p == '\r') (*p)++;
}
static int sstr(const char **p, char *out, size_t cap) { /* no escapes expected in our names */
    size_t n = 0;
    sk(p);
    if (**p != '"') return 0;
    for ((*p)++; **p && **p != '"'; (*p)++) {
        if (**p == '\\' || n + 1 >= cap) return 0;
        out[n++] = **p;
    }
    out[n] = 0;
    if (**p != '"') return 0;
    (*p)++;
    return 1;
}
static int schar(const char **p, char c) {
    sk(p);
    if (**p != c) return 0;
    (*p)++;
    return 1;
}
static int sints(const char **p, long long *v, int *n) {
    *n = 0;
    if (!schar(p, '[')) return 0;
    sk(p);
    if (**p == ']') return (*p)++, 1;
    do {
        char *end;
        sk(p);
        if (**p < '0' || **p > '9' || *n >= 8) return 0;
        v[(*n)++] = strtoll(*p, &end, 10);
        *p = end;
    } while (schar(p, ','));
    return schar(p, ']');
}
static int sf_read(const char *path, sfile *f) {
    FILE *fp = fopen(path, "rb");
    char *h, key[128];
    const char *p;
    int i;
    memset(f, 0, sizeof *f);
    if (!fp) return snprintf(f->why, sizeof f->why, "cannot open %s", path), 0;
    fseek(fp, 0, SEEK_END);
    f->size = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    f->bytes = (unsigned char *)malloc((size_t)f->size + 1);
    if (fread(f->bytes, 1, (size_t)f->size, fp) != (size_t)f->size) f->size = 0;
    fclose(fp);
    if (f->size < 8) return snprintf(f->why, sizeof f->why, "file of %ld bytes", f->size), 0;
    for (i = 7; i >= 0; i--) f->hlen = f->hlen << 8 | f->bytes[i];
    if (f->hlen % 8 || 8 + f->hlen > (unsigned long long)f->size)
        return snprintf(f->why, sizeof f->why, "header size %llu: not a multiple of 8 or past the end (%ld)", f->hlen, f->size), 0;
    h = (char *)malloc(f->hlen + 1);
    memcpy(h, f->bytes + 8, f->hlen);
    h[f->hlen] = 0;
    p = h;
    if (*p != '{') return snprintf(f->why, sizeof f->why, "header does not start with '{'"), free(h), 0;
    p++;
    do {
        if (!sstr(&p, key, sizeof key) || !schar(&p, ':')) goto bad;
        if (!strcmp(key, "__metadata__")) {
            if (!schar(&p, '{')) goto bad;
            do {
                if (f->nm >= 32 || !sstr(&p, f->mk[f->nm], 32) || !schar(&p, ':') || !sstr(&p, f->mv[f->nm], 64)) goto bad;
                f->nm++;
            } while (schar(&p, ','));
            if (!schar(&p, '}')) goto bad;
        } else {
            sent *t = &f->t[f->n];
            char k2[32];
            long long off[8];
            int no, seen = 0;
            if (f->n >= 256) goto bad;
            snprintf(t->name, sizeof t->name, "%s", key);
            if (!schar(&p, '{')) goto bad;
            do {
                if (!sstr(&p, k2, sizeof k2) || !schar(&p, ':')) goto bad;
                if (!strcmp(k2, "dtype") && sstr(&p, t->dtype, sizeof t->dtype)) seen |= 1;
                else if (!strcmp(k2, "shape") && sints(&p, t->shape, &t->ndim)) seen |= 2;
                else if (!strcmp(k2, "data_offsets") && sints(&p, off, &no) && no == 2) seen |= 4, t->b = off[0], t->e = off[1];
                else goto bad;
            } while (schar(&p, ','));
            if (!schar(&p, '}') || seen != 7) goto bad;
            f->n++;
        }
    } while (schar(&p, ','));
    if (!schar(&p, '}')) goto bad;
    for (; *p; p++)
        if (*p != ' ') return snprintf(f->why, sizeof f->why, "header padding has a byte 0x%02x, not a space", (unsigned char)*p), free(h), 0;
    free(h);
    /* offsets in entry order (the export writes them in offset order): contiguous, from 0 to the end */
    {
        long long at = 0, data = f->size - 8 - (long long)f->hlen;
        for (i = 0; i < f->n; i++) {
            long long numel = 1;
            int d, es = !strcmp(f->t[i].dtype, "F32") ? 4 : !strcmp(f->t[i].dtype, "BF16") ? 2 : 0;
            for (d = 0; d < f->t[i].ndim; d++) numel *= f->t[i].shape[d];
            if (f->t[i].b != at || f->t[i].e - f->t[i].b != numel * es || !es)
                return snprintf(f->why, sizeof f->why, "'%s': offsets [%lld, %lld], expected to start at %lld with %lld x %d bytes", f->t[i].name,
                                f->t[i].b, f->t[i].e, at, numel, es), 0;
            at = f->t[i].e;
        }
        if (at != data) return snprintf(f->why, sizeof f->why, "data of %lld bytes, tensors cover %lld", data, at), 0;
        if ((8 + f->hlen) % 8) return snprintf(f->why, sizeof f->why, "data not 8-aligned"), 0;
    }
    return 1;
bad:
    snprintf(f->why, sizeof f->why, "header JSON not as expected near '%.30s'", p);
    free(h);
    return 0;
}
static const char *sf_meta(const sfile *f, const char *k) {
    int i;
    for (i = 0; i < f->nm; i++)
        if (!strcmp(f->mk[i], k)) return f->mv[i];
    return NULL;
}
static const sent *sf_find(const sfile *f, const char *name) {
    int i;
    for (i = 0; i < f->n; i++)
        if (!strcmp(f->t[i].name, name)) return &f->t[i];
    return NULL;
}
/* bf16 round to nearest even, written differently from the library: the nearer of the two
   neighbours, ties to the even one; NaN stays NaN */
static uint16_t bf16_ref(float x) {
    uint32_t u, lo, hi;
    double dl, dh, dx;
    float fl, fh;
    memcpy(&u, &x, 4);
    if (isnan(x)) return (uint16_t)((u >> 16) | 0x40);
    lo = u & 0xffff0000u, hi = lo + 0x10000u;
    if (lo == u) return (uint16_t)(u >> 16);
    memcpy(&fl, &lo, 4), memcpy(&fh, &hi, 4);
    dx = x, dl = fabs(dx - (double)fl);
    dh = isinf(fh) ? fabs(dx - (double)(x > 0 ? 3.4028236692093846e38 : -3.4028236692093846e38)) : fabs(dx - (double)fh); /* 2^128 for the step past FLT_MAX */
    if (dl < dh || (dl == dh && !((lo >> 16) & 1))) return (uint16_t)(lo >> 16);
    return (uint16_t)(hi >> 16);
}
static float sf_value(const sfile *f, const sent *t, long long i) {
    const unsigned char *d = f->bytes + 8 + f->hlen + t->b;
    float v;
    if (!strcmp(t->dtype, "F32")) memcpy(&v, d + 4 * i, 4);
    else {
        uint32_t u = (uint32_t)(d[2 * i] | d[2 * i + 1] << 8) << 16;
        memcpy(&v, &u, 4);
    }
    return v;
}
static uint32_t fbits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static int same_bits(float a, float b) { return !memcmp(&a, &b, 4) || (isnan(a) && isnan(b)); }

/* checks an export against model r: every parameter (and, with moments, m and v of the own ZeRO
   range) present with its global shape and dtype, values exact (bf16: rounded) */
static int check_export(const char *path, model *r, int bf16, int moments, char *why, size_t wl) {
    sfile f;
    int i, k, d, want = 0, ok = 1;
    char nm[160];
    if (!sf_read(path, &f)) {
        snprintf(why, wl, "%s", f.why);
        free(f.bytes);
        return 0;
    }
    if (!sf_meta(&f, "format") || strcmp(sf_meta(&f, "format"), "pt") || !sf_meta(&f, "step") || !sf_meta(&f, "vocab") ||
        atoi(sf_meta(&f, "vocab")) != CFG.vocab || !sf_meta(&f, "width") || atoi(sf_meta(&f, "width")) != CFG.width || !sf_meta(&f, "heads") ||
        atoi(sf_meta(&f, "heads")) != CFG.heads || !sf_meta(&f, "layers") || atoi(sf_meta(&f, "layers")) != CFG.layers)
        ok = 0, snprintf(why, wl, "metadata lacks format=pt, step or the model configuration");
    for (i = 0; ok && i < pt_param_count(r->ctx); i++) {
        pt_param *p = pt_param_at(r->ctx, i);
        int64_t n = pt_numel(&p->value), j;
        float *loc = (float *)malloc((size_t)n * 4);
        pt_tensor_read(&p->value, loc);
        for (k = 0; k < (moments ? 3 : 1) && ok; k++) {
            const sent *t;
            snprintf(nm, sizeof nm, "%s%s", k == 0 ? "" : k == 1 ? "optim.m." : "optim.v.", p->spec.name);
            want++;
            if (!(t = sf_find(&f, nm))) {
                ok = 0, snprintf(why, wl, "no tensor '%s'", nm);
                break;
            }
            if (strcmp(t->dtype, bf16 ? "BF16" : "F32") || t->ndim != p->spec.ndim) ok = 0;
            for (d = 0; ok && d < t->ndim; d++) ok = t->shape[d] == p->spec.global_shape[d];
            if (!ok) {
                snprintf(why, wl, "'%s': dtype %s, %d dims, not the model's", nm, t->dtype, t->ndim);
                break;
            }
            for (j = 0; j < n && ok; j++) {
                int64_t g = pt_spec_global_index(&p->spec, j), zl = r->o ? r->o->zlo : 0;
                float v, got = sf_value(&f, t, g);
                if (k == 0) v = loc[j];
                else if (p->slab_off + j < r->o->zlo || p->slab_off + j >= r->o->zhi) continue; /* another rank's ZeRO range */
                else v = ((float *)(k == 1 ? r->o->m.host : r->o->v.host))[p->slab_off + j - zl];
                if (bf16) {
                    uint16_t e = bf16_ref(v);
                    uint32_t u = (uint32_t)e << 16;
                    memcpy(&v, &u, 4);
                }
                if (!same_bits(v, got)) ok = 0, snprintf(why, wl, "'%s' element %lld: file %.9g (%08x), expected %.9g", nm, (long long)g, (double)got,
                                                         fbits(got), (double)v);
            }
        }
        free(loc);
    }
    if (ok && want != f.n && (D == NULL || pt_dist_layout(D).pp == 1))
        ok = 0, snprintf(why, wl, "%d tensors in the file, %d expected", f.n, want);
    free(f.bytes);
    return ok;
}

/* a safetensors file written by hand: header text as given (padded to 8), then data bytes */
static void write_raw(const char *path, const char *hdr, unsigned long long hlen_field, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    size_t hl = strlen(hdr), pad = (8 - hl % 8) % 8, i;
    unsigned char b8[8];
    unsigned long long N = hlen_field ? hlen_field : hl + pad;
    for (i = 0; i < 8; i++) b8[i] = (unsigned char)(N >> (8 * i));
    fwrite(b8, 1, 8, f);
    fwrite(hdr, 1, hl, f);
    for (i = 0; i < pad; i++) fputc(' ', f);
    if (n) fwrite(data, 1, n, f);
    fclose(f);
}
static void copy_file(const char *a, const char *b, long cut) {
    FILE *f = fopen(a, "rb"), *g = fopen(b, "wb");
    long n = 0, size;
    int c;
    fseek(f, 0, SEEK_END);
    size = ftell(f);
    fseek(f, 0, SEEK_SET);
    while ((c = fgetc(f)) != EOF && n++ < size - cut) fputc(c, g);
    fclose(f), fclose(g);
}
/* a copy of safetensors file src with the first `from` in its header replaced by `to` (header
   re-padded, data as it was); 0 when src cannot be read or has no `from` */
static int sf_variant(const char *src, const char *dst, const char *from, const char *to) {
    sfile f;
    char *hdr, *at;
    int ok = 0;
    if (!sf_read(src, &f)) return 0;
    hdr = (char *)calloc(f.hlen + strlen(to) + 8, 1);
    memcpy(hdr, f.bytes + 8, f.hlen);
    while (strlen(hdr) && hdr[strlen(hdr) - 1] == ' ') hdr[strlen(hdr) - 1] = 0;
    if ((at = strstr(hdr, from)) != NULL) {
        char *tail = strdup(at + strlen(from));
        snprintf(at, f.hlen + strlen(to) + 8 - (size_t)(at - hdr), "%s%s", to, tail);
        free(tail);
        write_raw(dst, hdr, 0, f.bytes + 8 + f.hlen, (size_t)(f.size - 8 - (long)f.hlen));
        ok = 1;
    }
    free(hdr);
    free(f.bytes);
    return ok;
}
static uint32_t slab_crc(pt_ctx *ctx) {
    pt_tensor s = pt_param_slab(ctx);
    return pt_crc32c(0, pt_f32(&s), (size_t)pt_numel(&s) * 4);
}
/* the configuration, then the model the checkpoint holds, one forward: the loss bits */
static int print_loss(const char *dir) {
    pt_ckpt_info in;
    char err[1024];
    model r;
    float l;
    if (pt_ckpt_info_read(dir, &in, err, sizeof err) != PT_OK || !in.has_model) {
        printf("no model: %s\n", err);
        return 1;
    }
    CFG = in.model;
    pt_ckpt_info_free(&in);
    if (!model_open(&r, NULL, 0) || pt_ckpt_load(r.ctx, NULL, dir, NULL) != PT_OK) {
        printf("cannot load %s: %s\n", dir, r.ctx ? pt_error(r.ctx) : "");
        return 1;
    }
    l = model_step(&r, 100, 0);
    printf("loss %.9g bits %08x\n", (double)l, fbits(l));
    model_close(&r);
    return 0;
}

/* the malformed-file and import checks (1 rank) */
static void import_checks(const char *base, model *a) {
    char p[1200], q[1300], err[1024], why[1200], imp[1200];
    pt_gpt_config c2;
    int64_t step = -2;
    model b, c;
    float la, lc;
    int i;
    snprintf(p, sizeof p, "%s/f32.safetensors", base);
    snprintf(imp, sizeof imp, "%s/imp", base);
    i = pt_safetensors_config(p, &c2, &step, err, sizeof err) == PT_OK && c2.vocab_padded == 64;
    c2.vocab_padded = CFG.vocab_padded; /* 0 in CFG: the default, 64 rows */
    CHECKF(i && !memcmp(&c2, &CFG, sizeof CFG) && step == 3,
           "pt_safetensors_config: the model configuration and step from the metadata", "%s (step %lld)", err, (long long)step);
    /* import: a fresh model from the file, saved without optimizer, loaded with one */
    i = model_open(&b, NULL, 0) && pt_safetensors_load(b.ctx, p) == PT_OK;
    CHECKF(i, "pt_safetensors_load: the F32 export into a fresh model", "%s", b.ctx ? pt_error(b.ctx) : "");
    CHECK(slab_crc(b.ctx) == slab_crc(a->ctx), "imported parameters equal the original's bit for bit");
    {
        pt_ckpt_opts co;
        memset(&co, 0, sizeof co);
        co.model = &CFG;
        CHECKF(pt_ckpt_save(b.ctx, NULL, imp, 3, &co) == PT_OK, "pt_ckpt_save of the imported model (no optimizer)", "%s", pt_error(b.ctx));
    }
    LOG[0] = 0;
    i = model_open(&c, NULL, 1) && pt_ckpt_load(c.ctx, c.o, imp, &step) == PT_OK && step == 3 && pt_optim_steps(c.o) == 0;
    CHECKF(i, "pt_ckpt_load with AdamW of a checkpoint without optimizer state", "%s", c.ctx ? pt_error(c.ctx) : "");
    CHECKF(strstr(LOG, "moments start at zero") != NULL, "... says the moments start at zero", "log: %s", LOG);
    la = model_step(a, 100, 0), lc = model_step(&c, 100, 0);
    CHECKF(same_bits(la, lc) && !isnan(la), "forward loss after export -> import -> save -> load equals the original's bit for bit", "%.9g vs %.9g",
           (double)lc, (double)la);
    {
        float l1 = model_step(&c, 101, 1), l2 = model_step(&c, 102, 1);
        CHECKF(!isnan(l1) && !isnan(l2) && l2 < l1 + 1.0f, "AdamW trains on from zero moments", "%g %g", (double)l1, (double)l2);
    }
    model_close(&c);

    /* a file in another style: metadata last, spaces, escapes, keys reordered; BF16 values */
    {
        uint16_t data[2 * 4];
        char hdr[1024];
        pt_gpt_config small;
        model s;
        int i, ok = 1;
        float got[8];
        memset(&small, 0, sizeof small);
        for (i = 0; i < 8; i++) data[i] = bf16_ref((float)(i - 3) * 0.375f);
        snprintf(hdr, sizeof hdr, "{ \"w\" : { \"data_offsets\" : [0, 16], \"shape\": [2, 4], \"dtype\": \"BF16\" },\n"
                                  "  \"__metadata__\": {\"note\": \"a \\\"quoted\\\" \\u00e9 value\"} }");
        snprintf(q, sizeof q, "%s/style.safetensors", base);
        write_raw(q, hdr, 0, data, sizeof data);
        memset(&s, 0, sizeof s);
        {
            pt_desc desc;
            int64_t shp[2] = {2, 4};
            memset(&desc, 0, sizeof desc);
            desc.log = log_cb, desc.threads = 1;
            s.ctx = pt_init(&desc);
            pt_param_new(s.ctx, "w", 2, shp, PT_INIT_ZEROS, 0, 0);
        }
        ok = pt_safetensors_load(s.ctx, q) == PT_OK;
        if (ok) pt_tensor_read(&pt_param_find(s.ctx, "w")->value, got);
        for (i = 0; ok && i < 8; i++) ok = got[i] == (float)(i - 3) * 0.375f;
        CHECKF(ok, "a safetensors file in another style (metadata last, escapes, BF16) loads exactly", "%s", pt_error(s.ctx));
        model_close(&s);
    }

    /* malformed files: refused with a message, the parameters unchanged */
    {
        struct bad {
            const char *what, *expect;
        } bads[] = {{"truncated (the last 12 bytes cut)", "truncated"},
                    {"header size past the end", "does not fit"},
                    {"header size cut inside the JSON", "the entry of tensor 'w' is not"},
                    {"invalid JSON (a '[' for the '{')", "not valid safetensors JSON"},
                    {"offsets out of range", "offsets past the end"},
                    {"a hole in the data", "a hole"},
                    {"byte count not matching the shape", "needs 32 bytes"},
                    {"a tensor the model does not have", "no parameter of the model"},
                    {"a parameter missing", "has no tensor 'wpe'"},
                    {"another shape", "has shape [16, 16]"},
                    {"bytes after the last tensor", "bytes after the last tensor"},
                    {"a shape whose element count overflows int64", "expected at most 2^58 elements"},
                    {"a NUL inside the header size", "header byte 54 of 64 is a NUL"}};
        int i, n = (int)(sizeof bads / sizeof bads[0]);
        uint32_t before = slab_crc(b.ctx);
        float zeros[64];
        memset(zeros, 0, sizeof zeros);
        for (i = 0; i < n; i++) {
            snprintf(q, sizeof q, "%s/bad%d.safetensors", base, i);
            switch (i) {
            case 0: copy_file(p, q, 12); break;
            case 1: {
                FILE *f;
                copy_file(p, q, 0);
                f = fopen(q, "r+b");
                fputc(0x7f, f), fputc(0x7f, f), fputc(0x7f, f);
                fclose(f);
                break;
            }
            case 2: write_raw(q, "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 16, zeros, 64); break;
            case 3: {
                FILE *f;
                copy_file(p, q, 0);
                f = fopen(q, "r+b");
                fseek(f, 8, SEEK_SET);
                fputc('[', f);
                fclose(f);
                break;
            }
            case 4: write_raw(q, "{\"w\":{\"dtype\":\"F32\",\"shape\":[200],\"data_offsets\":[0,800]}}", 0, zeros, 64); break;
            case 5: write_raw(q, "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}", 0, zeros, 16); break;
            case 6: write_raw(q, "{\"w\":{\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[0,16]}}", 0, zeros, 16); break;
            case 10: write_raw(q, "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 0, zeros, 16); break;
            case 11: /* 2^61 each: the product wraps to 0 in signed arithmetic */
                write_raw(q, "{\"w\":{\"dtype\":\"F32\",\"shape\":[2305843009213693952,2305843009213693952,2305843009213693952,2305843009213693952],"
                             "\"data_offsets\":[0,0]}}", 0, zeros, 0);
                break;
            case 12: { /* valid JSON, then a NUL and more inside the header size */
                static const char h[] = "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}\0, \"x\": [}";
                FILE *f = fopen(q, "wb");
                unsigned char b8[8] = {sizeof h - 1, 0, 0, 0, 0, 0, 0, 0};
                fwrite(b8, 1, 8, f), fwrite(h, 1, sizeof h - 1, f), fwrite(zeros, 1, 8, f);
                fclose(f);
                break;
            }
            default: /* the real tensors with one changed: an extra one, wpe renamed, wpe of another shape */
                sf_variant(p, q, i == 9 ? "\"shape\":[8,32]" : "\"wpe\"",
                           i == 7 ? "\"xtra\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]},\"wpe\"" : i == 8 ? "\"wpX\"" : "\"shape\":[16,16]");
            }
            LOG[0] = 0;
            pt_error_clear(b.ctx);
            {
                pt_status st = pt_safetensors_load(b.ctx, q);
                snprintf(why, sizeof why, "status %d, message: %s", (int)st, pt_error(b.ctx));
                CHECKF(st != PT_OK && strstr(pt_error(b.ctx), bads[i].expect) && slab_crc(b.ctx) == before,
                       tu_name("malformed safetensors refused, parameters unchanged: %s", bads[i].what), "%s (expected '%s')", why, bads[i].expect);
            }
        }
    }
    /* the configuration of the metadata (and pt_safetensors_check, before a model is made) in range
       and against the file; the files are left for tests/ckpttool_test.sh (ptckpt import) */
    {
        struct cfgcase {
            const char *file, *from, *to, *expect;
            int layers, width, heads;
        } cc[] = {{"vocab_max", "\"vocab\":\"60\"", "\"vocab\":\"2147483647\"", "vocab: expected 1..2147483584, found 2147483647", 0, 0, 0},
                  {"heads_zero", "\"heads\":\"4\"", "\"heads\":\"0\"", "heads: expected >= 1, dividing width, found 0", 0, 0, 0},
                  {"huge", "\"width\":\"32\"", "\"width\":\"2147483520\"", "size: expected at most 2^48 parameters", 0, 0, 0},
                  {"step_range", "\"step\":\"3\"", "\"step\":\"99999999999999999999\"", "'step' is \"99999999999999999999\", expected a non-negative", 0, 0, 0},
                  {"layers_many", "\"layers\":\"2\"", "\"layers\":\"1000000\"", "layers is 1000000 in the metadata: the model's 1000000 blocks need at least 4000002 tensors, the file holds 28", 0, 0, 0},
                  {"width_big", "\"width\":\"32\"", "\"width\":\"1048576\"", "width is 1048576 in the metadata, tensor 'wte' has shape [64, 32] (expected [64, 1048576])", 0, 0, 0},
                  {"seq_big", "\"max_seq\":\"8\"", "\"max_seq\":\"1000000000\"", "max_seq is 1000000000 in the metadata, tensor 'wpe' has shape [8, 32] (expected [1000000000, 32])", 0, 0, 0}};
        int k;
        for (k = 0; k < (int)(sizeof cc / sizeof cc[0]); k++) {
            pt_gpt_config c3;
            pt_status st;
            snprintf(q, sizeof q, "%s/cfg_%s.safetensors", base, cc[k].file);
            err[0] = 0;
            if (!sf_variant(p, q, cc[k].from, cc[k].to)) {
                CHECKF(0, tu_name("safetensors configuration refused: %s", cc[k].file), "no %s in %s", cc[k].from, p);
                continue;
            }
            st = pt_safetensors_config(q, &c3, &step, err, sizeof err);
            if (st == PT_OK) st = pt_safetensors_check(q, &c3, err, sizeof err);
            CHECKF(st != PT_OK && strstr(err, q) && strstr(err, cc[k].expect), tu_name("safetensors configuration refused before a model is made: %s", cc[k].file),
                   "status %d, '%s' (expected '%s')", (int)st, err, cc[k].expect);
            if (k == 0) printf("  e.g. %s\n", err);
        }
        CHECKF(pt_safetensors_config(p, &c2, &step, err, sizeof err) == PT_OK && pt_safetensors_check(p, &c2, err, sizeof err) == PT_OK,
               "pt_safetensors_check: the export holds the GPT of its metadata", "%s", err);
        c2.width = 64;
        CHECKF(pt_safetensors_check(p, &c2, err, sizeof err) == PT_ERR_SHAPE && strstr(err, "'wte' has shape [64, 32] in") && strstr(err, "[64, 64] in the model"),
               "pt_safetensors_check: another width is PT_ERR_SHAPE naming the tensor and both shapes", "%s", err);
    }
    pt_error_clear(b.ctx);
    model_close(&b);
    snprintf(q, sizeof q, "%s/step_000000003", imp);
    CHECKF(pt_ckpt_verify(q, err, sizeof err) == PT_OK, "the imported checkpoint still verifies after the refused files", "%s", err);
}

/* ---- manifests and data files crafted bad: verify refuses each (naming the file, the field, what was
   expected and found), export and info refuse it too and write nothing, load does not hang ---- */
/* src's manifest without its end line, with record `pre` (the first line starting so) changed: field
   key set to val (key NULL: the whole text replaced by val), then a fresh end crc32c line, into dst */
static void man_mutate(const char *src, const char *dst, const char *pre, const char *key, const char *val) {
    static char txt[1 << 20], out[1 << 20];
    FILE *f = fopen(src, "rb");
    size_t n = f ? fread(txt, 1, sizeof txt - 1, f) : 0;
    char *e, *line;
    if (f) fclose(f);
    txt[n] = 0;
    if ((e = strstr(txt, "end crc32c=")) != NULL) *e = 0;
    out[0] = 0;
    if (!key) snprintf(out, sizeof out, "%s", val);
    else if ((line = strstr(txt, pre)) != NULL) {
        char pat[64], *v, *ve;
        snprintf(pat, sizeof pat, " %s=", key);
        v = strstr(line, pat);
        if (v && v < strchr(line, '\n')) {
            v += strlen(pat);
            ve = v + strcspn(v, " \n");
            snprintf(out, sizeof out, "%.*s%s%s", (int)(v - txt), txt, val, ve);
        }
    }
    if (!out[0]) snprintf(out, sizeof out, "%s", txt); /* nothing matched: the check below fails */
    n = strlen(out);
    snprintf(out + n, sizeof out - n, "end crc32c=0x%08x\n", pt_crc32c(0, out, n));
    if ((f = fopen(dst, "wb")) != NULL) fputs(out, f), fclose(f);
}
static void bad_checkpoints(const char *base, const char *good, model *a) {
    static const struct {
        const char *what, *pre, *key, *val, *expect, *key2, *val2;
    } cases[] = {
        {"a shape whose product overflows", "tensor name=wte kind=param", "shape", "4611686018427387904,4", "shape [4611686018427387904,4]: dim 0 is not an integer in [1, ", NULL, NULL},
        {"a shape of more than 2^40 elements", "tensor name=wte kind=param", "shape", "1048576,1048576,16", "has more than 1099511627776 elements", NULL, NULL},
        {"a shape of 5 dims", "tensor name=wte kind=param", "shape", "64,32,1,1,1", "tensor 'wte' (param): shape [64,32,1,1,1] has 5 dims, expected 1-4", NULL, NULL},
        {"a dim of 0", "tensor name=wte kind=param", "shape", "0,32", "shape [0,32]: dim 0 is not an integer", NULL, NULL},
        {"a split index past its parts", "tensor name=wte kind=param", "split_index", "7", "is not a cut of its shape", NULL, NULL},
        {"a range past its shard (global index past the tensor)", "tensor name=wte kind=param", "split_parts", "2", "range [0, 2048) past the 1024 elements of its shard", "split_dim", "0"},
        {"hi - lo whose x4 wraps to bytes", "tensor name=wte kind=param", "hi", "4611686018427389952", "tensor 'wte' (param): field 'hi': expected an integer in [0, 1099511627776], found '4611686018427389952'", NULL, NULL},
        {"a piece past the end of its file", "tensor name=wte kind=param", "offset", "100000000", "past the end of rank_00000.bin", NULL, NULL},
        {"a state entry past the end of its file", "state name=", "offset", "100000000", "state '", NULL, NULL},
        {"vocab near INT_MAX", "model ", "vocab", "2147483647", "field 'vocab': expected an integer in [1, 1073741824], found '2147483647'", NULL, NULL},
        {"an unknown optimizer", "optim ", "kind", "lion", "field 'kind': expected adamw or sgd, found 'lion'", NULL, NULL},
        {"a step past int64 (strtoll ERANGE)", "step ", "value", "99999999999999999999", "field 'value': expected an integer in [0, ", NULL, NULL},
        {"an unknown tensor kind", "tensor name=wte kind=param", "kind", "w", "field 'kind': expected param, m or v, found 'w'", NULL, NULL},
        {"world 1048576 in a 99-byte manifest", "", NULL, "ptrain-checkpoint version=1\nstep value=1\nlayout dp=1 tp=1 pp=1048576 world=1048576\n",
         "field 'world': expected an integer in [1, ", NULL, NULL},
        {"dp x tp x pp not the world", "layout ", "world", "2", "layout record): dp=1 x tp=1 x pp=1 is not world=2", NULL, NULL},
        {"dp past the world", "layout ", "dp", "2", "field 'dp': expected an integer in [1, 1], found '2'", NULL, NULL},
    };
    char dir[1400], p[1500], q[1500], err[1024];
    int c, n = (int)(sizeof cases / sizeof cases[0]);
    pt_ckpt_export_opts eo;
    pt_ckpt_info in;
    memset(&eo, 0, sizeof eo);
    alarm(60); /* a verify or load that blocks (on a FIFO) ends the test here */
    for (c = 0; c < n; c++) {
        double t0 = pt_time();
        int ok;
        snprintf(dir, sizeof dir, "%s/bad%d", base, c);
        mkdir(dir, 0755);
        snprintf(p, sizeof p, "%s/manifest", good);
        snprintf(q, sizeof q, "%s/manifest", dir);
        man_mutate(p, q, cases[c].pre, cases[c].key, cases[c].val);
        if (cases[c].key2) man_mutate(q, q, cases[c].pre, cases[c].key2, cases[c].val2);
        snprintf(p, sizeof p, "%s/rank_00000.bin", good);
        snprintf(q, sizeof q, "%s/rank_00000.bin", dir);
        copy_file(p, q, 0);
        err[0] = 0;
        ok = pt_ckpt_verify(dir, err, sizeof err) == PT_ERR_FORMAT && strstr(err, cases[c].expect) && strstr(err, "manifest");
        CHECKF(ok, tu_name("verify refuses %s, naming the field", cases[c].what), "%s (want '%s')", err, cases[c].expect);
        if (c == n - 3) CHECKF(pt_time() - t0 < 0.5, "... quickly, without allocating for the claimed world", "%.3f s", pt_time() - t0);
        snprintf(p, sizeof p, "%s/bad%d.safetensors", base, c);
        err[0] = 0;
        ok = pt_ckpt_export(dir, p, &eo, err, sizeof err) != PT_OK && strstr(err, cases[c].expect) && access(p, F_OK) != 0;
        CHECKF(ok, tu_name("export refuses %s and writes nothing", cases[c].what), "%s", err);
        ok = pt_ckpt_info_read(dir, &in, err, sizeof err) != PT_OK && strstr(err, cases[c].expect);
        if (!ok && !err[0]) pt_ckpt_info_free(&in);
        CHECKF(ok, tu_name("info refuses %s", cases[c].what), "%s", err);
    }
    /* data files and manifests that are not regular files: refused at once, not read (a FIFO would block) */
    for (c = 0; c < 4; c++) {
        static const char *what[4] = {"a data file that is a FIFO", "a data file that is a link to /dev/zero", "a manifest that is a FIFO",
                                      "a data file that is a directory"};
        static const char *expect[4] = {"rank_00000.bin: not a regular file (expected a file of ", "rank_00000.bin: not a regular file", "manifest: not a regular file",
                                        "rank_00000.bin: not a regular file"};
        int ok;
        snprintf(dir, sizeof dir, "%s/special%d", base, c);
        mkdir(dir, 0755);
        snprintf(p, sizeof p, "%s/manifest", good);
        snprintf(q, sizeof q, "%s/manifest", dir);
        if (c == 2) mkfifo(q, 0644);
        else copy_file(p, q, 0);
        snprintf(p, sizeof p, "%s/rank_00000.bin", good);
        snprintf(q, sizeof q, "%s/rank_00000.bin", dir);
        if (c == 0) mkfifo(q, 0644);
        else if (c == 1) ok = symlink("/dev/zero", q);
        else if (c == 3) mkdir(q, 0755);
        else copy_file(p, q, 0);
        err[0] = 0;
        ok = pt_ckpt_verify(dir, err, sizeof err) != PT_OK && strstr(err, expect[c]);
        CHECKF(ok, tu_name("verify refuses %s without blocking", what[c]), "%s", err);
        ok = pt_ckpt_load(a->ctx, NULL, dir, NULL) != PT_OK && strstr(pt_error(a->ctx), expect[c]);
        CHECKF(ok, tu_name("load refuses %s without blocking", what[c]), "%s", pt_error(a->ctx));
        pt_error_clear(a->ctx);
        snprintf(p, sizeof p, "%s/special%d.safetensors", base, c);
        ok = pt_ckpt_export(dir, p, &eo, err, sizeof err) != PT_OK && strstr(err, expect[c]) && access(p, F_OK) != 0;
        CHECKF(ok, tu_name("export refuses %s", what[c]), "%s", err);
    }
    alarm(0);
    /* an 'end' line whose CRC lacks its 0x: a parse error saying so, not a "mismatch" of two equal numbers */
    {
        FILE *f;
        char txt[65536], *e;
        size_t n = 0;
        int ok;
        snprintf(dir, sizeof dir, "%s/crc_nohex", base);
        mkdir(dir, 0755);
        snprintf(p, sizeof p, "%s/manifest", good);
        if ((f = fopen(p, "rb")) != NULL) n = fread(txt, 1, sizeof txt - 1, f), fclose(f);
        txt[n] = 0;
        if ((e = strstr(txt, "end crc32c=0x")) != NULL) memmove(e + 11, e + 13, strlen(e + 13) + 1);
        snprintf(q, sizeof q, "%s/manifest", dir);
        if ((f = fopen(q, "wb")) != NULL) fputs(txt, f), fclose(f);
        snprintf(p, sizeof p, "%s/rank_00000.bin", good);
        snprintf(q, sizeof q, "%s/rank_00000.bin", dir);
        copy_file(p, q, 0);
        err[0] = 0;
        ok = e && pt_ckpt_verify(dir, err, sizeof err) == PT_ERR_FORMAT && strstr(err, "crc32c: expected 0x and at most 8 hex digits, found '") &&
             !strstr(err, "mismatch");
        CHECKF(ok, "verify refuses an end line's crc32c without 0x as unreadable, not as a mismatch", "%s", err);
    }
}

int main(int argc, char **argv) {
    char err[1024], why[1024], base[1024], run[1200], p[1300], sd[1300];
    model a;
    pt_ckpt_opts co;
    pt_ckpt_export_opts eo;
    pt_ckpt_info in;
    int i, ok;
    memset(&CFG, 0, sizeof CFG);
    CFG.vocab = 60, CFG.max_seq = T, CFG.layers = 2, CFG.width = 32, CFG.heads = 4;
    if (argc > 2 && !strcmp(argv[1], "--loss")) return print_loss(argv[2]);
    tu_init(argc, argv);
    {
        pt_layout lay;
        memset(&lay, 0, sizeof lay);
        lay.tp = getenv("CKT_TP") ? atoi(getenv("CKT_TP")) : 1, lay.pp = 1;
        D = pt_dist_init(&argc, &argv, &lay, err, sizeof err);
    }
#ifdef PTRAIN_MPI
    if (!D) {
        printf("FAIL pt_dist_init: %s\n0 passed, 1 failed\n", err);
        return 1;
    }
#endif
    tu_mpi_init(NULL);
    RANK = pt_dist_rank(D);
    if (D) NTP = pt_dist_layout(D).tp, DPN = pt_dist_layout(D).dp;
    snprintf(base, sizeof base, "%s", argc > 1 ? argv[1] : "build/tests/ckpttool");
    snprintf(run, sizeof run, "%s/run", base);
    if (RANK == 0) {
        printf("test_ckpttool: %d rank(s) (dp %d, tp %d)%s, GPT vocab 60 (64 padded), 2 layers, width 32, AdamW, 3 steps, in %s\n",
               pt_dist_size(D), DPN, NTP, DPN > 1 ? " with ZeRO-1" : "", base);
        mkdir(base, 0755); /* a new or empty directory (tests/ckpttool_test.sh removes it first) */
    }
    pt_dist_agree(D, 1);
    memset(&co, 0, sizeof co);
    co.model = &CFG;
    memset(&eo, 0, sizeof eo);

    ok = model_open(&a, D, 1);
    CHECK_WHY(ok, "a GPT with AdamW", a.ctx ? pt_error(a.ctx) : "");
    if (!ok) goto done;

    /* step 0 of any layout: the initial values, equal to a 1-rank model's bit for bit */
    ok = pt_ckpt_save(a.ctx, a.o, run, 0, &co) == PT_OK;
    CHECK_WHY(ok, "save step 0", pt_error(a.ctx));
    snprintf(p, sizeof p, "%s/init.safetensors", base);
    snprintf(sd, sizeof sd, "%s/step_000000000", run);
    if (RANK == 0) {
        model one;
        err[0] = 0;
        ok = pt_ckpt_export(sd, p, &eo, err, sizeof err) == PT_OK;
        if (ok && !(ok = model_open(&one, NULL, 0))) snprintf(why, sizeof why, "1-rank model");
        else if (ok) ok = check_export(p, &one, 0, 0, why, sizeof why);
        else snprintf(why, sizeof why, "%s", err);
        if (ok || one.ctx) model_close(&one);
    }
    CHECK_WHY(ok, "the export of step 0 equals a 1-rank model's initial parameters bit for bit", why);

    for (i = 0; i < 3; i++) ok = ok && !isnan(model_step(&a, i, 1));
    CHECK_WHY(ok, "3 training steps", pt_error(a.ctx));
    ok = pt_ckpt_save(a.ctx, a.o, run, -1, &co) == PT_OK;
    CHECK_WHY(ok, "save step 3", pt_error(a.ctx));
    snprintf(sd, sizeof sd, "%s/step_000000003", run);

    /* inspect */
    ok = pt_ckpt_info_read(run, &in, err, sizeof err) == PT_OK;
    if (ok) {
        int np = 0, nm = 0;
        for (i = 0; i < in.ntensors; i++) {
            const pt_param *q = pt_param_find(a.ctx, in.tensors[i].name);
            np += in.tensors[i].kind == 0, nm += in.tensors[i].kind != 0;
            if (!q || in.tensors[i].ndim != q->spec.ndim || memcmp(in.tensors[i].shape, q->spec.global_shape, sizeof(int64_t) * (size_t)q->spec.ndim))
                ok = 0, snprintf(why, sizeof why, "'%s' not the model's parameter or shape", in.tensors[i].name);
        }
        if (ok && !(in.step == 3 && in.has_model && !memcmp(&in.model, &CFG, sizeof CFG) && in.optim_kind == PT_OPTIM_ADAMW && in.optim_steps == 3 &&
                    np == pt_param_count(a.ctx) && nm == 2 * np && in.nfiles == pt_dist_size(D) && in.tp == NTP && in.dp == DPN))
            ok = 0, snprintf(why, sizeof why, "step %lld, model %d, optim %d/%lld, %d params %d moments, %d files", (long long)in.step, in.has_model,
                             in.optim_kind, (long long)in.optim_steps, np, nm, in.nfiles);
        pt_ckpt_info_free(&in);
    } else snprintf(why, sizeof why, "%s", err);
    CHECK_WHY(ok, "pt_ckpt_info_read (through DIR/latest): step, layout, model, optimizer, files, global tensors with their shapes", why);

    /* exports: rank 0 writes, every rank checks its own shards */
    {
        static const struct {
            const char *file;
            int bf16, moments;
        } ex[3] = {{"f32.safetensors", 0, 0}, {"bf16.safetensors", 1, 0}, {"moments.safetensors", 0, 1}};
        for (i = 0; i < 3; i++) {
            snprintf(p, sizeof p, "%s/%s", base, ex[i].file);
            eo.bf16 = ex[i].bf16, eo.moments = ex[i].moments;
            err[0] = 0;
            ok = RANK != 0 || pt_ckpt_export(sd, p, &eo, err, sizeof err) == PT_OK;
            CHECK_WHY(ok, tu_name("pt_ckpt_export %s", ex[i].file), err);
            ok = ok && check_export(p, &a, ex[i].bf16, ex[i].moments, why, sizeof why);
            CHECK_WHY(ok, tu_name("%s: header, offsets, padding per the spec; every value %s", ex[i].file,
                                  ex[i].bf16 ? "the round-to-nearest-even of the model's" : ex[i].moments ? "and moment exact" : "exact"),
                      why);
        }
    }

    /* the F32 export read back into a fresh model of this layout: every rank's shards equal the trained ones */
    {
        model b;
        snprintf(p, sizeof p, "%s/f32.safetensors", base);
        ok = model_open(&b, D, 0) && pt_safetensors_load(b.ctx, p) == PT_OK;
        snprintf(why, sizeof why, "%s", b.ctx ? pt_error(b.ctx) : "no context");
        for (i = 0; ok && i < pt_param_count(a.ctx); i++) {
            pt_param *pa = pt_param_at(a.ctx, i), *pb = pt_param_find(b.ctx, pa->spec.name);
            int64_t n = pt_numel(&pa->value);
            float *x = (float *)malloc((size_t)n * 4), *y = (float *)malloc((size_t)n * 4);
            ok = pb && pt_numel(&pb->value) == n && pt_tensor_read(&pa->value, x) == PT_OK && pt_tensor_read(&pb->value, y) == PT_OK &&
                 !memcmp(x, y, (size_t)n * 4);
            if (!ok) snprintf(why, sizeof why, "'%s' differs", pa->spec.name);
            free(x), free(y);
        }
        model_close(&b);
        CHECK_WHY(ok, "pt_safetensors_load of the F32 export on this layout: every shard equals the trained model's bit for bit", why);
    }

    if (pt_dist_size(D) == 1) {
        /* bf16 rounding at the edges: NaN, ties both ways, Inf, overflow to Inf, -0, subnormal */
        static const uint32_t edge[] = {0x7fc00001u, 0xffa00000u, 0x3f808000u, 0x3f818000u, 0x3f808001u, 0x7f800000u, 0xff800000u, 0x7f7fffffu,
                                        0x80000000u, 0x00008000u, 0x00018000u, 0xbf7fffffu};
        pt_param *lb = pt_param_find(a.ctx, "lnf.b");
        float v[32];
        model e2;
        int n = (int)(sizeof edge / sizeof edge[0]);
        pt_tensor_read(&lb->value, v);
        for (i = 0; i < n; i++) memcpy(&v[i], &edge[i], 4);
        pt_tensor_write(&lb->value, v);
        snprintf(p, sizeof p, "%s/edge", base);
        ok = pt_ckpt_save(a.ctx, a.o, p, 9, &co) == PT_OK;
        snprintf(sd, sizeof sd, "%s/edge/step_000000009", base);
        snprintf(p, sizeof p, "%s/edge.safetensors", base);
        eo.bf16 = 1, eo.moments = 0;
        ok = ok && pt_ckpt_export(sd, p, &eo, err, sizeof err) == PT_OK;
        ok = ok && check_export(p, &a, 1, 0, why, sizeof why);
        CHECKF(ok, "bf16 export at the edges (NaN kept NaN, ties to even, Inf, FLT_MAX -> Inf, -0, subnormals)", "%s %s", err, why);
        /* restore the trained values: the reload of step 3 (also a parameters-only load of a full checkpoint) */
        ok = model_open(&e2, NULL, 0) && pt_ckpt_load(a.ctx, NULL, run, NULL) == PT_OK;
        model_close(&e2);
        CHECK(ok, "reload step 3");

        /* verify: a flipped byte is named */
        snprintf(p, sizeof p, "%s/step_000000003/rank_00000.bin", run);
        {
            FILE *f = fopen(p, "r+b");
            int c;
            fseek(f, 100, SEEK_SET);
            c = fgetc(f);
            fseek(f, 100, SEEK_SET);
            fputc(c ^ 0x10, f);
            fclose(f);
            snprintf(sd, sizeof sd, "%s/step_000000003", run);
            CHECKF(pt_ckpt_verify(sd, err, sizeof err) != PT_OK && strstr(err, "rank_00000.bin") && strstr(err, "CRC32C"),
                   "pt_ckpt_verify names the data file with a flipped byte", "%s", err);
            snprintf(p, sizeof p, "%s/broken.safetensors", base);
            eo.bf16 = 0;
            CHECKF(pt_ckpt_export(sd, p, &eo, err, sizeof err) != PT_OK && strstr(err, "CRC32C") && access(p, F_OK) != 0,
                   "pt_ckpt_export of a corrupted checkpoint fails (CRC32C) and writes nothing", "%s", err);
            f = fopen(tu_name("%s/step_000000003/rank_00000.bin", run), "r+b");
            fseek(f, 100, SEEK_SET);
            fputc(c, f);
            fclose(f);
            CHECKF(pt_ckpt_verify(sd, err, sizeof err) == PT_OK, "... and verifies again once restored", "%s", err);
        }
        bad_checkpoints(base, sd, &a);
        import_checks(base, &a);
    }
done:
    model_close(&a);
    i = tu_summary();
    pt_dist_finalize(D);
    return i;
}
