/* test_alloc.c - the run-time allocator (pt_desc.allocator): every allocation made for a context
   goes through it and back to it. Built with PT_MALLOC / PT_REALLOC / PT_FREE defined to counting
   wrappers (the "stray" allocator, which records the function each call sits in) and run with a
   counting desc allocator; every block carries a header naming the allocator that gave it, so a block
   freed by the other one is caught. Between pt_init and pt_shutdown a small GPT is trained 3 steps
   (AdamW, clipping, the profile on, a trace recording), generates a few tokens, is checkpointed and
   loaded (synchronous and asynchronous), a loader streams shards written by pt_shard_write, a
   tokenizer is trained on the context, a guard checks steps and a monitor logs them, a DP reducer and
   a one-stage pipeline run a step: none of it may reach the macros except the growable text buffers
   (pt__sb_room, documented), and after pt_shutdown the desc allocator has as many frees as
   allocations and no bytes left. The context-less calls (pt_ckpt_verify, pt_ckpt_info_read,
   pt_pp_schedule_new / check) use the macros only. A partial allocator is refused by pt_init, naming
   the missing functions.
   Build: cc -std=c99 -O2 -I. tests/test_alloc.c -lm; run: test_alloc [--quick] [DIR] (default
   build/tests/alloc; files are written there and removed). */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- two counting allocators: the macros' (stray) and the context's (desc) ---------------------- */
typedef struct blk { /* before every block: its size and the allocator that gave it */
    size_t n;
    unsigned tag;
    unsigned pad[13]; /* 64 bytes: the block keeps malloc's alignment */
} blk;
typedef struct counts {
    long allocs, frees, bad;  /* bad: a block of the other allocator (or no block) handed to this one */
    long long live_bytes, bytes;
} counts;
enum { TAG_STRAY = 0x57A7u, TAG_DESC = 0xDE5Cu };
static pthread_mutex_t MU = PTHREAD_MUTEX_INITIALIZER;
static counts STRAY, DESC, TEXT; /* TEXT: the stray calls made by the text buffer (pt__sb_room) */
static char STRAY_WHERE[512];    /* the functions of the other stray calls */
static char BAD_WHERE[256];

static void note(char *buf, size_t cap, const char *fn) {
    size_t k = strlen(buf);
    if (strstr(buf, fn) || k + strlen(fn) + 2 >= cap) return;
    snprintf(buf + k, cap - k, "%s%s", k ? " " : "", fn);
}
static void *blk_realloc(counts *c, unsigned tag, void *p, size_t n, const char *fn) {
    blk *b = p ? (blk *)p - 1 : NULL, *nb;
    size_t old = 0;
    if (b && b->tag != tag) {
        pthread_mutex_lock(&MU);
        c->bad++, note(BAD_WHERE, sizeof BAD_WHERE, fn ? fn : "desc");
        pthread_mutex_unlock(&MU);
        return NULL;
    }
    if (b) old = b->n;
    if (!(nb = (blk *)realloc(b, sizeof(blk) + n))) return NULL;
    nb->n = n, nb->tag = tag;
    pthread_mutex_lock(&MU);
    if (!b) c->allocs++;
    c->live_bytes += (long long)n - (long long)old, c->bytes += (long long)n;
    if (fn && c == &STRAY) {
        if (!strcmp(fn, "pt__sb_room")) {
            if (!b) TEXT.allocs++;
        } else note(STRAY_WHERE, sizeof STRAY_WHERE, fn);
    }
    pthread_mutex_unlock(&MU);
    return nb + 1;
}
static void blk_free(counts *c, unsigned tag, void *p, const char *fn) {
    blk *b;
    if (!p) return;
    b = (blk *)p - 1;
    pthread_mutex_lock(&MU);
    if (b->tag != tag) {
        c->bad++, note(BAD_WHERE, sizeof BAD_WHERE, fn ? fn : "desc");
        pthread_mutex_unlock(&MU);
        return;
    }
    c->frees++, c->live_bytes -= (long long)b->n;
    pthread_mutex_unlock(&MU);
    b->tag = 0;
    free(b);
}
static void *stray_malloc(size_t n, const char *fn) { return blk_realloc(&STRAY, TAG_STRAY, NULL, n, fn); }
static void *stray_realloc(void *p, size_t n, const char *fn) { return blk_realloc(&STRAY, TAG_STRAY, p, n, fn); }
static void stray_free(void *p, const char *fn) { blk_free(&STRAY, TAG_STRAY, p, fn); }
#define PT_MALLOC(sz) stray_malloc((sz), __func__)
#define PT_REALLOC(p, sz) stray_realloc((p), (sz), __func__)
#define PT_FREE(p) stray_free((p), __func__)

static long ZERO_ASKS; /* the desc allocator must never be asked for 0 bytes */
static void *desc_alloc(void *user, size_t n) {
    if (!n) ZERO_ASKS++;
    (void)user;
    return blk_realloc(&DESC, TAG_DESC, NULL, n, NULL);
}
static void *desc_realloc(void *user, void *p, size_t n) {
    if (!n) ZERO_ASKS++;
    (void)user;
    return blk_realloc(&DESC, TAG_DESC, p, n, NULL);
}
static void desc_free(void *user, void *p) {
    if (!p) ZERO_ASKS++; /* never given NULL either */
    (void)user;
    blk_free(&DESC, TAG_DESC, p, NULL);
}

#define PTRAIN_IMPLEMENTATION
#include "../ptrain.h"
#include "test_util.h"

static char DIR_[512] = "build/tests/alloc";
static char LAST_ERR[1024];
static void on_err(void *u, pt_status st, const char *msg) {
    (void)u, (void)st;
    snprintf(LAST_ERR, sizeof LAST_ERR, "%s", msg);
}

/* removes dir and what is below it (test files only) */
static void rm_tree(const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *e;
    char p[1024];
    struct stat sb;
    while (d && (e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (lstat(p, &sb) == 0 && S_ISDIR(sb.st_mode)) rm_tree(p);
        else unlink(p);
    }
    if (d) closedir(d);
    rmdir(dir);
}

/* the counts before a phase; check_phase: it used the desc allocator and no macro but the text buffers */
static counts S0, D0, T0;
static void phase_begin(void) {
    pthread_mutex_lock(&MU);
    S0 = STRAY, D0 = DESC, T0 = TEXT;
    STRAY_WHERE[0] = 0;
    pthread_mutex_unlock(&MU);
}
static void check_phase(const char *what, int ok) {
    long stray = STRAY.allocs - S0.allocs - (TEXT.allocs - T0.allocs);
    CHECKF(ok, tu_name("alloc: %s runs", what), "it failed: %s", LAST_ERR);
    CHECKF(DESC.allocs > D0.allocs, tu_name("alloc: %s allocates through the desc allocator", what), "no desc allocation (%ld before and after)",
           DESC.allocs);
    CHECKF(!STRAY_WHERE[0], tu_name("alloc: %s makes no stray allocation (only the text buffers use the macros)", what),
           "%ld stray allocation(s) through PT_MALLOC/PT_REALLOC/PT_FREE in: %s", stray, STRAY_WHERE);
}

#define V 64
#define T 16
#define B 2

static void random_tokens(int32_t *x, int32_t *y, int n, uint64_t seed) {
    pt_rng r = pt_rng_seed(seed);
    int i;
    for (i = 0; i < n; i++) x[i] = (int32_t)(pt_rng_u32(&r) % V), y[i] = (int32_t)(pt_rng_u32(&r) % V);
}

static float train_step(pt_graph *g, pt_gpt *m, pt_optim *o, uint64_t seed, float *norm) {
    int32_t x[B * T], y[B * T];
    pt_tensor *tx, *ty, *loss;
    float l;
    random_tokens(x, y, B * T, seed);
    pt_graph_reset(g);
    tx = pt_tensor_new(g, PT_I32, 2, B, T, 0, 0), ty = pt_tensor_new(g, PT_I32, 2, B, T, 0, 0);
    pt_tensor_write(tx, x), pt_tensor_write(ty, y);
    loss = pt_gpt_loss(g, m, tx, ty);
    if (!loss) return NAN;
    l = pt_item(loss);
    pt_zero_grad(m->ctx);
    pt_backward(g, loss);
    *norm = pt_optim_step(o, 1e-3f);
    return l;
}

/* the pipeline's stage function: the whole GPT as one stage, micro-batch mb of random tokens */
static pt_tensor *stage_fn(pt_graph *g, int stage, int mb, pt_tensor *x, void *user) {
    int32_t ids[B * T], tg[B * T];
    pt_tensor *ti = pt_tensor_new(g, PT_I32, 2, B, T, 0, 0), *tt = pt_tensor_new(g, PT_I32, 2, B, T, 0, 0);
    random_tokens(ids, tg, B * T, 400 + (uint64_t)mb);
    pt_tensor_write(ti, ids), pt_tensor_write(tt, tg);
    return pt_gpt_stage_fwd(g, (const pt_gpt *)user, stage, x, ti, tt);
}

/* pt_init refuses d's allocator with an error containing want */
static void refused(const pt_desc *d, const char *want, const char *name) {
    pt_ctx *c;
    LAST_ERR[0] = 0;
    c = pt_init(d);
    CHECKF(!c && strstr(LAST_ERR, "desc.allocator") && strstr(LAST_ERR, want), name, "context %p, error '%s'", (void *)c, LAST_ERR);
    pt_shutdown(c);
}
/* a partial allocator is refused, naming what is missing; nothing is allocated */
static void test_partial(void) {
    pt_desc d;
    long s = STRAY.allocs, k = DESC.allocs;
    memset(&d, 0, sizeof d);
    d.on_error = on_err;
    d.allocator.alloc = desc_alloc, d.allocator.free = desc_free;
    refused(&d, "no realloc function", "alloc: pt_init refuses an allocator without realloc, naming it");
    d.allocator.free = NULL;
    refused(&d, "no realloc and free function", "alloc: pt_init refuses an allocator with alloc only, naming realloc and free");
    d.allocator.alloc = NULL, d.allocator.free = desc_free;
    refused(&d, "no alloc and realloc function", "alloc: pt_init refuses an allocator with free only, naming alloc and realloc");
    CHECKF(STRAY.allocs == s && DESC.allocs == k, "alloc: a refused allocator allocates nothing", "stray %ld -> %ld, desc %ld -> %ld", s, STRAY.allocs, k,
           DESC.allocs);
}

/* the context-less calls use the macros, never a context's allocator */
static void test_contextless(const char *ckpt) {
    char err[512], step_dir[1024];
    pt_ckpt_info info;
    pt_pp_schedule *s;
    long d0 = DESC.allocs, s0 = STRAY.allocs, f0 = STRAY.frees;
    int ok = 1;
    ok &= pt_ckpt_step_dir(ckpt, step_dir, sizeof step_dir) == PT_OK;
    ok &= pt_ckpt_verify(step_dir, err, sizeof err) == PT_OK;
    ok &= pt_ckpt_info_read(ckpt, &info, err, sizeof err) == PT_OK;
    pt_ckpt_info_free(&info);
    s = pt_pp_schedule_new(PT_PP_1F1B, 2, 4, 1, err, sizeof err);
    ok &= s && pt_pp_schedule_check(s, err, sizeof err) == PT_OK;
    pt_pp_schedule_free(s);
    CHECKF(ok, "alloc: the context-less calls run", "%s", err);
    CHECKF(DESC.allocs == d0, "alloc: the context-less calls do not use a context's allocator", "desc allocations %ld -> %ld", d0, DESC.allocs);
    CHECKF(STRAY.allocs > s0 && STRAY.allocs - s0 == STRAY.frees - f0, "alloc: the context-less calls use the macros, balanced",
           "stray allocations %ld, frees %ld", STRAY.allocs - s0, STRAY.frees - f0);
}

int main(int argc, char **argv) {
    char path[1024], ckpt[700], shards[700];
    pt_desc d;
    pt_ctx *ctx;
    pt_gpt_config cfg;
    pt_gpt *m;
    pt_optim_desc od;
    pt_optim *o;
    pt_graph *g;
    long strays_before;
    int i, ok;
    float loss[3], norm = 0;
    int64_t step = -1;
    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) tu_quick = 1;
        else snprintf(DIR_, sizeof DIR_, "%s", argv[i]);
    }
    rm_tree(DIR_);
    mkdir("build", 0755), mkdir("build/tests", 0755);
    if (mkdir(DIR_, 0755) != 0) fprintf(stderr, "test_alloc: cannot create %s (continuing)\n", DIR_);
    snprintf(ckpt, sizeof ckpt, "%s/ckpt", DIR_);
    snprintf(shards, sizeof shards, "%s/shards", DIR_);
    mkdir(shards, 0755);

    test_partial();

    memset(&d, 0, sizeof d);
    d.seed = 7, d.threads = 2, d.on_error = on_err;
    d.allocator.alloc = desc_alloc, d.allocator.realloc = desc_realloc, d.allocator.free = desc_free;
    strays_before = STRAY.allocs;
    phase_begin();
    ctx = pt_init(&d);
    if (!ctx) {
        CHECKF(0, "alloc: pt_init with a full allocator", "NULL: %s", LAST_ERR);
        return tu_summary();
    }
    memset(&cfg, 0, sizeof cfg);
    cfg.vocab = V, cfg.max_seq = T, cfg.layers = 2, cfg.width = 32, cfg.heads = 2;
    m = pt_gpt_new(ctx, &cfg);
    memset(&od, 0, sizeof od);
    od.kind = PT_OPTIM_ADAMW, od.lr = 1e-3f, od.weight_decay = 0.1f, od.clip_norm = 1.0f;
    o = m ? pt_optim_new(ctx, &od) : NULL;
    g = pt_graph_new(ctx);
    check_phase("pt_init, pt_gpt_new, pt_optim_new, pt_graph_new", ctx && m && o && g);

    /* training with the profile on and a trace recording */
    phase_begin();
    snprintf(path, sizeof path, "%s/trace.json", DIR_);
    ok = pt_profile_enable(ctx, 1) == PT_OK && pt_trace_start(ctx, NULL, path, 0) == PT_OK;
    for (i = 0; i < 3; i++) loss[i] = train_step(g, m, o, 100 + (uint64_t)i, &norm);
    ok = ok && loss[0] == loss[0] && loss[2] == loss[2] && norm > 0 && pt_status_get(ctx) == PT_OK;
    {
        pt_profile_entry pe[64];
        int32_t prompt[2] = {1, 2}, out[6];
        ok = ok && pt_profile_get(ctx, pe, 64) > 0;
        ok = ok && pt_gpt_generate(m, g, prompt, 2, 4, 0.0f, 3, out) == PT_OK;
    }
    ok = ok && pt_trace_finish(ctx) == PT_OK;
    check_phase("training 3 steps (AdamW, clipping), the profile, a trace, generation", ok);
    printf("       losses %.4f %.4f %.4f, gradient norm %.4f\n", (double)loss[0], (double)loss[1], (double)loss[2], (double)norm);

    /* checkpoints: synchronous and asynchronous saves, loads */
    phase_begin();
    {
        pt_ckpt_opts co;
        memset(&co, 0, sizeof co);
        co.model = &cfg, co.keep_last = 1;
        ok = pt_ckpt_save(ctx, o, ckpt, 3, &co) == PT_OK && pt_ckpt_load(ctx, o, ckpt, &step) == PT_OK && step == 3;
        loss[0] = train_step(g, m, o, 200, &norm);
        co.async = 1;
        ok = ok && pt_ckpt_save(ctx, o, ckpt, 4, &co) == PT_OK;
        loss[1] = train_step(g, m, o, 201, &norm); /* while the writer runs */
        ok = ok && pt_ckpt_poll(ctx) == PT_OK && pt_ckpt_wait(ctx) == PT_OK && pt_ckpt_load(ctx, o, ckpt, &step) == PT_OK && step == 4;
        ok = ok && loss[0] == loss[0] && loss[1] == loss[1];
    }
    check_phase("pt_ckpt_save (sync and async), pt_ckpt_poll / wait, pt_ckpt_load", ok);

    /* shards written by pt_shard_write, streamed by a loader with its prefetch thread */
    phase_begin();
    {
        uint32_t tok[3000];
        int32_t x[B * T], y[B * T];
        pt_loader_desc ld;
        pt_loader *L;
        int k;
        for (i = 0; i < 3000; i++) tok[i] = (uint32_t)(i * 7 % V);
        ok = 1;
        for (k = 0; k < 3 && ok; k++) {
            snprintf(path, sizeof path, "%s/train_%02d.bin", shards, k);
            ok = pt_shard_write(ctx, path, PT_SHARD_PTRAIN, tok + 1000 * k, 1000, V) == PT_OK;
        }
        memset(&ld, 0, sizeof ld);
        ld.dir = shards, ld.prefix = "train_", ld.batch = B, ld.seq = T, ld.shuffle = 1, ld.seed = 5, ld.prefetch = -1;
        L = ok ? pt_loader_new(ctx, &ld) : NULL;
        for (k = 0; L && k < 40 && ok; k++) ok = pt_loader_next(L, x, y) == PT_OK && x[1] == (int32_t)((uint32_t)(x[0] + 7) % V);
        ok = ok && L;
        pt_loader_free(L);
    }
    check_phase("pt_shard_write, pt_loader_new (dir, prefetch thread), 40 x pt_loader_next, pt_loader_free", ok);

    /* a tokenizer on the context */
    phase_begin();
    {
        const char *text = "the quick brown fox jumps over the lazy dog; the quick brown fox jumps again";
        int32_t ids[128];
        char back[128];
        int64_t n = (int64_t)strlen(text), k;
        pt_tokenizer *tk = pt_tokenizer_train(ctx, text, n, 20);
        k = tk ? pt_tokenizer_encode(tk, text, n, ids) : -1;
        ok = k > 0 && k < n && pt_tokenizer_decode(tk, ids, k, back, sizeof back) == n && !memcmp(back, text, (size_t)n);
        pt_tokenizer_free(tk);
    }
    check_phase("pt_tokenizer_train (a context), encode, decode, free", ok);

    /* a guard and a monitor around two more steps */
    phase_begin();
    {
        pt_guard_desc gd;
        pt_guard *gu;
        pt_monitor_desc md;
        pt_monitor *mo;
        pt_monitor_step ms;
        memset(&gd, 0, sizeof gd);
        gd.window = 8, gd.warmup = 2, gd.replica_check_every = 1;
        gu = pt_guard_new(ctx, &gd);
        memset(&md, 0, sizeof md);
        snprintf(path, sizeof path, "%s/run.jsonl", DIR_);
        md.log_path = path, md.model = &cfg, md.seq = T, md.peak_flops = 1e12, md.progress = -1;
        mo = pt_monitor_new(ctx, NULL, &md);
        ok = gu && mo;
        for (i = 0; ok && i < 2; i++) {
            float l = train_step(g, m, o, 300 + (uint64_t)i, &norm);
            ok = pt_guard_check(gu, 10 + i, l, norm) >= 0;
            memset(&ms, 0, sizeof ms);
            ms.loss = l, ms.grad_norm = norm, ms.lr = 1e-3f, ms.tokens = B * T;
            pt_monitor_event(mo, "test", "step=%d", i);
            ok = ok && pt_monitor_step_end(mo, &ms) == PT_OK;
        }
        pt_monitor_free(mo);
        pt_guard_free(gu);
    }
    check_phase("pt_guard_new / check, pt_monitor_new / event / step_end / free", ok);

    /* a DP reducer (one rank) and a pipeline runtime (one stage, GPipe over 2 micro-batches) */
    phase_begin();
    {
        pt_dp *dp = pt_dp_new(ctx, NULL, 4096);
        pt_pp_desc pd;
        pt_pp *pp;
        float l;
        memset(&pd, 0, sizeof pd);
        pd.kind = PT_PP_GPIPE, pd.micro_batches = 2, pd.forward = stage_fn, pd.user = m;
        pp = pt_pp_new(ctx, &pd);
        pt_zero_grad(ctx);
        l = pp ? pt_pp_step(pp, 0, 1) : NAN;
        ok = dp && pp && l == l && pt_optim_step(o, 1e-3f) > 0;
        pt_pp_free(pp);
        pt_dp_free(dp);
    }
    check_phase("pt_dp_new / free, pt_pp_new / step / free", ok);

    pt_graph_free(g);
    pt_optim_free(o);
    pt_gpt_free(m);
    pt_shutdown(ctx);
    CHECKF(DESC.allocs > 0 && DESC.allocs == DESC.frees && DESC.live_bytes == 0, "alloc: after pt_shutdown the desc allocator got every block back",
           "%ld allocations, %ld frees, %lld bytes left", DESC.allocs, DESC.frees, DESC.live_bytes);
    CHECKF(STRAY.allocs == STRAY.frees && STRAY.live_bytes == 0, "alloc: the text buffers' blocks (macros) are all freed too",
           "%ld allocations, %ld frees, %lld bytes left", STRAY.allocs, STRAY.frees, STRAY.live_bytes);
    CHECKF(STRAY.allocs - strays_before == TEXT.allocs, "alloc: between pt_init and pt_shutdown only the text buffers used the macros",
           "%ld stray allocations, %ld of them text buffers", STRAY.allocs - strays_before, TEXT.allocs);
    printf("       desc allocator: %ld allocations, %lld bytes asked; macros: %ld text buffers\n", DESC.allocs, DESC.bytes, TEXT.allocs);
    CHECKF(!STRAY.bad && !DESC.bad, "alloc: every block went back to the allocator that gave it", "to the macros: %ld foreign, to desc: %ld foreign (%s)",
           STRAY.bad, DESC.bad, BAD_WHERE);
    CHECKF(!ZERO_ASKS, "alloc: the desc allocator is never asked for 0 bytes nor given NULL", "%ld times", ZERO_ASKS);

    test_contextless(ckpt);
    CHECKF(STRAY.allocs == STRAY.frees && DESC.allocs == DESC.frees, "alloc: nothing is left in either allocator at the end",
           "macros %ld/%ld, desc %ld/%ld", STRAY.allocs, STRAY.frees, DESC.allocs, DESC.frees);
    rm_tree(DIR_);
    return tu_summary();
}
