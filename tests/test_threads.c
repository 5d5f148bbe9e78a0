/* test_threads.c - the thread team (see ptrain.h's base: pt__par_run): results are bit-identical for
   1, 2 and 3 threads -- a GPT's training steps (losses and every parameter after AdamW), a GEMM, causal
   attention forward and backward, a Q8_0 model's prefill and batch-1 decode -- and the same bits as
   another build's (--dump FILE writes one hash a line; tests/threads_test.sh compares the team build
   with the OpenMP build, -DPTRAIN_OPENMP -fopenmp, and with clang without OpenMP). Also: two contexts
   used at once from two threads each run their own team; a parallel loop inside a job runs serially
   (no deadlock, every item once); pt_set_threads rebuilds the team; the default thread count is the
   CPUs of the affinity mask (>= 1).
   Build: cc -std=c99 -O2 -I. tests/test_threads.c -o build/test_threads -lm   (add -pthread on glibc < 2.34) */
#define PTRAIN_IMPLEMENTATION
#include "../ptrain.h"
#include "test_util.h"

#include <pthread.h>

static uint64_t hash_bytes(const void *p, size_t n) {
    const unsigned char *b = (const unsigned char *)p;
    uint64_t h = 0x9e3779b97f4a7c15ull;
    size_t i;
    for (i = 0; i < n; i++) h = pt_hash64(h ^ b[i]) + i;
    return h;
}
static uint64_t hash_tensor(const pt_tensor *t) {
    size_t n = (size_t)pt_numel(t) * (size_t)pt_dtype_size(t->dtype);
    void *buf = malloc(n ? n : 1);
    uint64_t h = 0;
    if (buf && pt_tensor_read(t, buf) == PT_OK) h = hash_bytes(buf, n);
    free(buf);
    return h;
}

static pt_ctx *new_ctx(int threads) {
    pt_desc d;
    memset(&d, 0, sizeof d);
    d.threads = threads;
    d.seed = 7;
    d.log_level = PT_LOG_WARN;
    return pt_init(&d);
}

enum { H_LOSS, H_PARAMS, H_GEMM, H_ATTN, H_DATTN, H_PREFILL, H_DECODE, NH };
static const char *hname[NH] = {"gpt_losses", "gpt_params", "gemm", "attention", "attention_grad", "q8_0_prefill", "q8_0_decode"};

/* GPT training: 3 AdamW steps of a 2-layer, width-128 model on B=4 x T=64 tokens (every kernel above
   the parallel threshold); the hash of the losses' bits and of the parameter slab */
static int gpt_train(pt_ctx *ctx, uint64_t *hl, uint64_t *hp) {
    pt_gpt_config cfg;
    pt_optim_desc od;
    pt_gpt *m;
    pt_optim *o;
    pt_graph *g;
    int32_t ids[4 * 64], tg[4 * 64];
    float losses[3];
    pt_tensor slab;
    int step, i;
    memset(&cfg, 0, sizeof cfg);
    cfg.vocab = 256, cfg.max_seq = 64, cfg.layers = 2, cfg.width = 128, cfg.heads = 4;
    memset(&od, 0, sizeof od);
    od.kind = PT_OPTIM_ADAMW, od.weight_decay = 0.1f, od.clip_norm = 1.0f;
    if (!(m = pt_gpt_new(ctx, &cfg)) || !(o = pt_optim_new(ctx, &od)) || !(g = pt_graph_new(ctx))) return 0;
    for (step = 0; step < 3; step++) {
        pt_tensor *x, *y, *loss;
        for (i = 0; i < 4 * 64; i++) ids[i] = (int32_t)((i * 31 + step * 7) % 256), tg[i] = (int32_t)((i * 17 + 3 + step) % 256);
        pt_graph_reset(g);
        x = pt_tensor_new(g, PT_I32, 2, 4, 64, 0, 0);
        y = pt_tensor_new(g, PT_I32, 2, 4, 64, 0, 0);
        pt_tensor_write(x, ids);
        pt_tensor_write(y, tg);
        loss = pt_gpt_loss(g, m, x, y);
        if (!loss) return 0;
        losses[step] = pt_item(loss);
        pt_zero_grad(ctx);
        pt_backward(g, loss);
        pt_optim_step(o, 1e-3f);
    }
    slab = pt_param_slab(ctx);
    *hl = hash_bytes(losses, sizeof losses);
    *hp = hash_tensor(&slab);
    pt_graph_free(g);
    pt_optim_free(o);
    pt_gpt_free(m);
    return ctx->status == PT_OK;
}

/* a 193 x 385 by 385 x 257 product (odd tiles) */
static int gemm(pt_ctx *ctx, uint64_t *h) {
    pt_graph *g = pt_graph_new(ctx);
    float *a = (float *)malloc(193 * 385 * sizeof(float)), *b = (float *)malloc(385 * 257 * sizeof(float));
    pt_tensor *ta, *tb, *c;
    int i, ok = 0;
    if (g && a && b) {
        for (i = 0; i < 193 * 385; i++) a[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
        for (i = 0; i < 385 * 257; i++) b[i] = (float)((i * 53) % 97) / 48.0f - 1.0f;
        ta = pt_tensor_new(g, PT_F32, 2, 193, 385, 0, 0);
        tb = pt_tensor_new(g, PT_F32, 2, 385, 257, 0, 0);
        pt_tensor_write(ta, a);
        pt_tensor_write(tb, b);
        if ((c = pt_matmul(g, ta, tb, 0, 0))) *h = hash_tensor(c), ok = 1;
    }
    free(a);
    free(b);
    pt_graph_free(g);
    return ok;
}

/* attention over qkv [2, 96, 3 x 128] with 4 heads, forward and the gradient of qkv */
static int attention(pt_ctx *ctx, uint64_t *hf, uint64_t *hb) {
    pt_graph *g = pt_graph_new(ctx);
    const int64_t n = 2 * 96 * 3 * 128;
    float *v = (float *)malloc((size_t)n * sizeof(float));
    pt_tensor *qkv, *out, *loss;
    int64_t i;
    int ok = 0;
    if (g && v) {
        for (i = 0; i < n; i++) v[i] = (float)((i * 29) % 113) / 56.0f - 1.0f;
        qkv = pt_param_new(ctx, "qkv", 3, (int64_t[]){2, 96, 3 * 128}, PT_INIT_ZEROS, 0.0f, 0);
        if (qkv) {
            pt_tensor_write(qkv, v);
            out = pt_attention(g, qkv, 4);
            loss = out ? pt_sum(g, pt_mul(g, out, out)) : NULL;
            if (loss) {
                pt_zero_grad(ctx);
                pt_backward(g, loss);
                *hf = hash_tensor(out);
                pt_tensor gs = pt_grad_slab(ctx); /* qkv's gradient: the context's only parameter */
                *hb = hash_tensor(&gs);
                ok = ctx->status == PT_OK;
            }
        }
    }
    free(v);
    pt_graph_free(g);
    return ok;
}

/* a Q8_0 copy of a 2-layer model: a 300-token prefill (parallel attention) and 6 batch-1 decode steps */
static int decode(pt_ctx *ctx, uint64_t *hp, uint64_t *hd) {
    pt_gpt_config cfg;
    pt_gpt *m;
    pt_gpt_weights *w = NULL;
    pt_infer *inf = NULL;
    pt_infer_desc id;
    int32_t seq, nt = 300, toks[300], s;
    float *logits = (float *)malloc(256 * 7 * sizeof(float));
    int ok = 0, i;
    memset(&cfg, 0, sizeof cfg);
    cfg.vocab = 256, cfg.max_seq = 512, cfg.layers = 2, cfg.width = 128, cfg.heads = 4;
    memset(&id, 0, sizeof id);
    id.max_seqs = 2;
    if (logits && (m = pt_gpt_new(ctx, &cfg))) {
        if ((w = pt_gpt_weights_from(m, PT_W_Q8_0)) && (inf = pt_infer_new(ctx, w, &id)) && (seq = pt_infer_seq_new(inf)) >= 0) {
            for (i = 0; i < 300; i++) toks[i] = (int32_t)((i * 13 + 5) % 256);
            ok = pt_infer_step(inf, 1, &seq, &nt, toks, logits, 0) == PT_OK;
            *hp = hash_bytes(logits, 256 * sizeof(float));
            for (s = 0; ok && s < 6; s++) {
                int32_t one = 1, tok = (int32_t)((s * 41 + 1) % 256);
                ok = pt_infer_step(inf, 1, &seq, &one, &tok, logits + 256 * (s + 1), 0) == PT_OK;
            }
            *hd = hash_bytes(logits + 256, 6 * 256 * sizeof(float));
        }
        pt_infer_free(inf);
        pt_gpt_weights_free(w);
        pt_gpt_free(m);
    }
    free(logits);
    return ok;
}

/* every hash on a context of `threads` threads; 0 on an error */
static int run_all(int threads, uint64_t *h) {
    pt_ctx *ctx = new_ctx(threads);
    int ok = ctx && gpt_train(ctx, &h[H_LOSS], &h[H_PARAMS]);
    pt_shutdown(ctx);
    ctx = new_ctx(threads);
    ok = ok && ctx && gemm(ctx, &h[H_GEMM]) && attention(ctx, &h[H_ATTN], &h[H_DATTN]);
    if (!ok && ctx) printf("  (%d threads: %s)\n", threads, pt_error(ctx));
    pt_shutdown(ctx);
    ctx = new_ctx(threads); /* a model of its own (no parameter after the attention test's gradients) */
    ok = ok && ctx && decode(ctx, &h[H_PREFILL], &h[H_DECODE]);
    if (!ok && ctx) printf("  (%d threads: %s)\n", threads, pt_error(ctx));
    pt_shutdown(ctx);
    return ok;
}

/* ---- two contexts at once, from two threads ---- */
typedef struct {
    int threads, ok;
    uint64_t hl, hp;
} job;
static void *ctx_thread(void *p) {
    job *j = (job *)p;
    pt_ctx *ctx = new_ctx(j->threads);
    j->ok = ctx && gpt_train(ctx, &j->hl, &j->hp);
    pt_shutdown(ctx);
    return NULL;
}

/* ---- a parallel loop inside a job ---- */
typedef struct {
    const pt_ctx *ctx;
    int hits[64][16];
    int outer_tid[64];
    int seen; /* 1 << tid of each thread that ran a block (atomic) */
} nest;
static void inner_part(void *p, int64_t lo, int64_t hi, int tid) {
    int *row = (int *)p;
    int64_t i;
    (void)tid;
    for (i = lo; i < hi; i++) row[i]++;
}
static void outer_part(void *p, int64_t lo, int64_t hi, int tid) {
    nest *n = (nest *)p;
    int64_t i;
    __atomic_or_fetch(&n->seen, 1 << tid, __ATOMIC_SEQ_CST);
    for (i = lo; i < hi; i++) {
        double t0 = pt_time();
        n->outer_tid[i] = tid;
        pt__par_run(n->ctx, 4, 16, inner_part, n->hits[i]);
        /* 1 ms an item, and a thread's first item of a block waits (up to 5 s: valgrind, a loaded machine)
           until another thread has claimed a block: the check below does not depend on the OS scheduler */
        while (pt_time() - t0 < 1e-3 ||
               (i == lo && !(__atomic_load_n(&n->seen, __ATOMIC_SEQ_CST) & ~(1 << tid)) && pt_time() - t0 < 5.0)) {}
    }
}

int main(int argc, char **argv) {
    static uint64_t h[4][NH];
    const char *dump = NULL;
    int t, k, i;
    tu_init(argc, argv);
    for (i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--dump")) dump = argv[i + 1];
    for (t = 1; t <= 3; t++) CHECKF(run_all(t, h[t]), tu_name("every computation runs on %d thread(s)", t), "an error (above)");
    for (k = 0; k < NH; k++)
        for (t = 2; t <= 3; t++)
            CHECKF(h[t][k] == h[1][k], tu_name("%s: %d threads give the bits of 1", hname[k], t), "hash %016llx, 1 thread %016llx",
                   (unsigned long long)h[t][k], (unsigned long long)h[1][k]);
    {
        pt_ctx *ctx = new_ctx(3);
        uint64_t a = 0, b = 0, c = 0;
        int ok = ctx && gemm(ctx, &a);
        pt_set_threads(ctx, 1);
        ok = ok && gemm(ctx, &b);
        pt_set_threads(ctx, 2);
        ok = ok && gemm(ctx, &c) && pt_threads(ctx) == 2;
        CHECKF(ok && a == h[1][H_GEMM] && b == a && c == a, "pt_set_threads 3 -> 1 -> 2 rebuilds the team, same bits",
               "ok %d, hashes %016llx %016llx %016llx", ok, (unsigned long long)a, (unsigned long long)b, (unsigned long long)c);
        pt_shutdown(ctx);
    }
    {
        pthread_t th[2];
        job j[2];
        memset(j, 0, sizeof j);
        j[0].threads = 2, j[1].threads = 3;
        for (i = 0; i < 2; i++) pthread_create(&th[i], NULL, ctx_thread, &j[i]);
        for (i = 0; i < 2; i++) pthread_join(th[i], NULL);
        CHECKF(j[0].ok && j[1].ok && j[0].hl == h[1][H_LOSS] && j[1].hl == h[1][H_LOSS] && j[0].hp == h[1][H_PARAMS] && j[1].hp == h[1][H_PARAMS],
               "two contexts (2 and 3 threads) trained at once from two threads: each team gives the 1-thread bits", "ok %d %d", j[0].ok, j[1].ok);
    }
    {
        pt_ctx *ctx = new_ctx(3);
        static nest n;
        int bad = 0, tids = 0;
        memset(&n, 0, sizeof n);
        n.ctx = ctx;
        if (ctx) pt__par_run(ctx, 3, 64, outer_part, &n);
        for (i = 0; i < 64; i++) {
            for (k = 0; k < 16; k++) bad += n.hits[i][k] != 1;
            tids |= 1 << n.outer_tid[i];
        }
        CHECKF(ctx && bad == 0, "a parallel loop inside a job runs serially: every inner item once", "%d items wrong", bad);
        CHECKF(!PT__TEAM || (tids & (tids - 1)) != 0, "the outer loop's blocks were claimed by several threads", "thread mask %d", tids);
        pt_shutdown(ctx);
    }
    {
        pt_ctx *ctx = new_ctx(0);
        CHECKF(ctx && pt_threads(ctx) >= 1 && pt__cpus() >= 1, "the default thread count: the CPUs of the affinity mask (or PTRAIN_THREADS)",
               "threads %d, cpus %d", ctx ? pt_threads(ctx) : -1, pt__cpus());
        printf("  default threads %d, pt__cpus %d, team %s\n", ctx ? pt_threads(ctx) : -1, pt__cpus(),
               PT__TEAM ? "on" : PT__PAR ? "off (OpenMP)" : "off (serial build)");
        pt_shutdown(ctx);
    }
    if (dump) {
        FILE *f = fopen(dump, "w");
        CHECKF(f != NULL, "--dump opens its file", "cannot write %s", dump);
        if (f) {
            for (k = 0; k < NH; k++) fprintf(f, "%s %016llx\n", hname[k], (unsigned long long)h[1][k]);
            fclose(f);
        }
    }
    return tu_summary();
}
