/* fuzz_safetensors.c - libFuzzer harness of the safetensors reader: pt_safetensors_config, the
   reader under it (pt__sf_open, every readable tensor through pt__sf_read) and, as `ptckpt import`
   does, pt_safetensors_load into a model of the file's configuration when that is tiny. Input: the
   file, as it is. */
#define _POSIX_C_SOURCE 200809L
#define PTRAIN_IMPLEMENTATION
#include "../../ptrain.h"
#include "fuzz_util.h"

static int sf_tiny(const pt_gpt_config *c) {
    return c->vocab >= 1 && c->vocab <= 256 && c->vocab_padded >= 0 && c->vocab_padded <= 256 && c->max_seq >= 1 && c->max_seq <= 16 &&
           c->layers >= 1 && c->layers <= 2 && c->width >= 1 && c->width <= 32 && c->heads >= 1 && c->heads <= 4;
}

FZ_ENTRY(safetensors) {
    const char *dir = fz_dir();
    char path[700], err[512];
    pt_gpt_config cfg;
    int64_t step;
    pt__sf st;
    int k;
    if (!fz_write(path, sizeof path, dir, "in.safetensors", data, size)) abort();
    err[0] = 0;
    k = pt__sf_open(path, &st, err, sizeof err);
    fz_note("pt__sf_open", k, err);
    if (k) {
        int i;
        for (i = 0; i < st.n && i < 64; i++) {
            const pt__sf_ent *e = &st.e[i];
            int64_t n = (e->end - e->begin) / e->esize;
            float *out;
            if (n > (1 << 20) || !(out = (float *)malloc((size_t)(n > 0 ? n : 1) * sizeof(float)))) continue;
            err[0] = 0;
            fz_note("pt__sf_read", pt__sf_read(&st, e, out, err, sizeof err), err);
            free(out);
        }
        pt__sf_free(&st);
    }
    err[0] = 0;
    k = pt_safetensors_config(path, &cfg, &step, err, sizeof err);
    fz_note("pt_safetensors_config", k, err);
    if (k == PT_OK && sf_tiny(&cfg)) {
        pt_ctx *ctx = fz_new_ctx();
        pt_gpt *m = pt_gpt_new(ctx, &cfg);
        if (m) {
            fz_note("pt_safetensors_load", pt_safetensors_load(ctx, path), pt_error(ctx));
            pt_gpt_free(m);
        }
        pt_shutdown(ctx);
    }
    return 0;
}
