/* test_infer_mp.c - model-parallel inference (>>infer): a pt_infer over this rank's shard of a TP, PP
   or TP x PP layout against one process. Build: mpicc -std=c99 -DPTRAIN_MPI -I. tests/test_infer_mp.c
   -lm; run: mpirun -np N test_infer_mp TP PP (N = TP x PP). Every rank builds the GPT (vocab 2000 ->
   padded 2048: a row of logits past MPI's eager size, max_seq 64, 4 layers, width 128, 4 heads: the shards of TP 4 still hold whole q8_0
   blocks) on the grid: deterministic initialization makes each shard the slice of the one-process
   model's parameters, which rank 0 also builds whole in a context of its own. The leader (world rank
   0) then runs, while the other ranks follow (pt_infer_follow):
   - a ragged batch (two prompts of 5 and 11 tokens, prefilled together), then decode steps, in f32
     and q8_0 weights: every logits row within 1e-5 relative of one process's (q8_0: of one process's
     q8_0 weights);
   - batch invariance: a sequence decoded alone and decoded beside two others gives the same bits;
   - pt_infer_nll of a stream: the same perplexity (1e-5);
   - the engine with continuous batching (6 requests of different lengths, max_running 3, greedy):
     each request's tokens equal one process's; a swap out and back (PT_PREEMPT_SWAP under a small
     pool) and a prefix cache hit keep them;
   - pt_gpt_generate (greedy) on the grid: the one-process tokens on every rank.
   Refusals: pt_infer_step on a follower, pt_infer_follow on the leader. */
#define _POSIX_C_SOURCE 200809L
#define PTRAIN_IMPLEMENTATION
#include "ptrain.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the vocabulary: its logits rows (8 KB) pass MPI's eager size, so the pipeline's messages rendezvous */
#define NV 2000
static pt_dist *g_d;
static int g_rank, g_tp = 1, g_pp = 1;

static double rel(const float *a, const float *b, long n) {
    double m = 1e-6, d = 0;
    long i;
    for (i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]);
        if (e != e) return INFINITY;
        if (fabs(b[i]) > m) m = fabs(b[i]);
        if (e > d) d = e;
    }
    return d / m;
}
static pt_ctx *mk_ctx(const pt_dist *d) {
    pt_desc desc;
    memset(&desc, 0, sizeof desc);
    desc.seed = 4321, desc.threads = 1, desc.dist = d;
    desc.log_level = PT_LOG_ERROR + 1;
    return pt_init(&desc);
}
static pt_gpt_config cfg_of(void) {
    pt_gpt_config c;
    memset(&c, 0, sizeof c);
    c.vocab = NV, c.max_seq = 64, c.layers = 4, c.width = 128, c.heads = 4;
    return c;
}
/* the model on the grid: this rank's stage (equal stages) and TP shard */
static pt_gpt *grid_model(pt_ctx *ctx) {
    pt_gpt_config c = cfg_of();
    int32_t first[9], mine = pt_dist_coords(g_d).pp;
    char err[256];
    if (g_pp == 1) return pt_gpt_new(ctx, &c);
    if (pt_pp_split(c.layers, g_pp, NULL, 0, 0, first, err, sizeof err) != PT_OK) return NULL;
    return pt_gpt_new_stages(ctx, &c, g_pp, first, 1, &mine);
}
static int32_t tok_at(int i, int salt) { return (int32_t)(pt_hash64(1000u * (uint64_t)salt + (uint64_t)i) % 100u); }

/* two prompts prefilled together, then decode steps; returns the worst relative difference of every
   logits row of a against r (a and r: pt_infer over the same model); bit-identical batch
   composition on a: *inv */
static double ragged_cmp(pt_infer *a, pt_infer *r, int *inv, int *ok) {
    int32_t sa[3], sr[3], nt[3] = {5, 11, 1}, tk[64];
    float *la = (float *)malloc(3 * 16 * NV * sizeof(float)), *lr = la + 16 * NV, *solo = lr + 16 * NV;
    double worst = 0;
    int i, k, step;
    *ok = 1, *inv = 1;
    for (i = 0; i < 2; i++) sa[i] = pt_infer_seq_new(a), sr[i] = pt_infer_seq_new(r);
    for (i = 0; i < 16; i++) tk[i] = tok_at(i, 1);
    *ok &= pt_infer_step(a, 2, sa, nt, tk, la, 1) == PT_OK && pt_infer_step(r, 2, sr, nt, tk, lr, 1) == PT_OK;
    worst = fmax(worst, rel(la, lr, 16 * NV));
    for (step = 0; step < 6 && *ok; step++) {
        int32_t one[2] = {1, 1};
        for (i = 0; i < 2; i++) tk[i] = tok_at(step * 2 + i, 2);
        *ok &= pt_infer_step(a, 2, sa, one, tk, la, 0) == PT_OK && pt_infer_step(r, 2, sr, one, tk, lr, 0) == PT_OK;
        worst = fmax(worst, rel(la, lr, 2 * NV));
    }
    /* batch invariance on a: sequence 0 forked, decoded alone, and decoded beside 2 others */
    if (*ok) {
        int32_t f = pt_infer_seq_fork(a, sa[0]), x = pt_infer_seq_new(a), one[3] = {1, 1, 1}, seqs[3], t3[3];
        int32_t px[7] = {3, 1, 4, 1, 5, 9, 2}, n7 = 7;
        *ok &= f >= 0 && x >= 0 && pt_infer_step(a, 1, &x, &n7, px, NULL, 0) == PT_OK;
        t3[0] = 42;
        *ok &= pt_infer_step(a, 1, &f, one, t3, solo, 0) == PT_OK; /* the fork alone */
        seqs[0] = x, seqs[1] = sa[0], seqs[2] = sa[1], t3[0] = 7, t3[1] = 42, t3[2] = 8;
        *ok &= pt_infer_step(a, 3, seqs, one, t3, la, 0) == PT_OK; /* the original beside two others */
        for (k = 0; k < NV && *ok; k++) *inv &= memcmp(&solo[k], &la[NV + k], sizeof(float)) == 0;
        pt_infer_seq_free(a, f), pt_infer_seq_free(a, x);
    }
    for (i = 0; i < 2; i++) pt_infer_seq_free(a, sa[i]), pt_infer_seq_free(r, sr[i]);
    *ok &= pt_infer_check(a) == PT_OK;
    free(la);
    return worst;
}
/* 6 requests through an engine over inf (greedy), their tokens into out[6][12] */
static int engine_run(pt_infer *inf, int32_t out[6][12], int preempt) {
    pt_engine_desc ed;
    pt_engine *e;
    int32_t prompts[6][24];
    int64_t ids[6];
    int i, j, ok = 1;
    memset(&ed, 0, sizeof ed);
    ed.max_running = 3, ed.token_budget = 16, ed.preempt = preempt;
    if (!(e = pt_engine_new(inf, &ed))) return 0;
    for (i = 0; i < 6; i++) {
        pt_engine_request rq;
        memset(&rq, 0, sizeof rq);
        for (j = 0; j < 24; j++) prompts[i][j] = j < 16 ? tok_at(j, 9) : tok_at(j, 10 + i); /* a shared 16-token prefix */
        rq.prompt = prompts[i], rq.nprompt = 17 + i, rq.max_tokens = 12;
        ok &= (ids[i] = pt_engine_submit(e, &rq)) >= 0;
    }
    {
        int r, it = 0;
        while ((r = pt_engine_step(e)) > 0 && ++it < 2000) {}
        ok &= r == 0;
    }
    for (i = 0; i < 6 && ok; i++) {
        pt_engine_result res;
        pt_engine_poll(e, ids[i], &res, out[i], 12);
        ok &= res.ntokens == 12 && res.finish == PT_FINISH_LENGTH;
    }
    pt_engine_free(e);
    return ok;
}

int main(int argc, char **argv) {
    pt_layout lay;
    char err[512];
    pt_ctx *ctx, *rc = NULL;
    pt_gpt *m, *rm = NULL;
    pt_gpt_weights *w, *rw = NULL;
    int nf, fmt;
    memset(&lay, 0, sizeof lay);
    if (argc > 2) g_tp = atoi(argv[1]), g_pp = atoi(argv[2]);
    lay.dp = 1, lay.tp = g_tp, lay.pp = g_pp;
    if (!(g_d = pt_dist_init(&argc, &argv, &lay, err, sizeof err))) {
        printf("FAIL grid tp %d pp %d: %s\n0 passed, 1 failed\n", g_tp, g_pp, err);
        return 1;
    }
    g_rank = pt_dist_rank(g_d);
    tu_mpi_init("");
    ctx = mk_ctx(g_d);
    m = grid_model(ctx);
    w = m ? pt_gpt_weights_from(m, PT_W_F32) : NULL;
    CHECKF(w != NULL, "pt_gpt_weights_from a TP / PP model gives this rank's shard", "%s", pt_error(ctx));
    if (g_rank == 0) {
        pt_gpt_config c = cfg_of();
        rc = mk_ctx(NULL);
        rm = pt_gpt_new(rc, &c);
        rw = rm ? pt_gpt_weights_from(rm, PT_W_F32) : NULL;
    }
    for (fmt = 0; w && fmt < 2; fmt++) {
        const pt_wtype wt = fmt ? PT_W_Q8_0 : PT_W_F32;
        const char *wn = fmt ? "q8_0" : "f32";
        pt_gpt_weights *ws = fmt ? pt_gpt_weights_convert(w, wt) : w, *rs = NULL;
        pt_infer_desc idesc;
        pt_infer *inf;
        char name[160];
        memset(&idesc, 0, sizeof idesc);
        idesc.max_seqs = 8, idesc.kv_tokens = 8 * 64;
        inf = ws ? pt_infer_new(ctx, ws, &idesc) : NULL;
        snprintf(name, sizeof name, "pt_infer_new over a %s shard (tp %d, pp %d), every rank together", wn, g_tp, g_pp);
        CHECKF(inf != NULL, name, "%s", pt_error(ctx));
        if (!inf) break;
        if (g_rank != 0) {
            pt_status st = pt_infer_step(inf, 1, (const int32_t[]){0}, (const int32_t[]){1}, (const int32_t[]){1}, (float[NV]){0}, 0);
            int refused = st == PT_ERR_ARG && strstr(pt_error(ctx), "follows the leader") != NULL;
            pt_error_clear(ctx);
            st = pt_infer_follow(inf);
            tu_solo(1);
            CHECKF(refused, "pt_infer_step on a follower is refused, naming the leader", "status %d", (int)st);
            CHECKF(st == PT_OK, "pt_infer_follow runs the leader's calls until its pt_infer_free", "%s", pt_error(ctx));
            tu_solo(0);
        } else {
            pt_infer *ref;
            double worst, nll_a = 0, nll_r = 0;
            int inv = 0, ok = 0, pass;
            int32_t ta[6][12], tr[6][12], stream[150];
            int64_t ca = 0, cr = 0;
            rs = fmt ? pt_gpt_weights_convert(rw, wt) : rw;
            ref = pt_infer_new(rc, rs, &idesc);
            tu_solo(1);
            CHECKF(pt_infer_follow(inf) == PT_ERR_ARG, "pt_infer_follow on the leader is refused", "accepted");
            pt_error_clear(ctx);
            worst = ref ? ragged_cmp(inf, ref, &inv, &ok) : INFINITY;
            snprintf(name, sizeof name, "%s tp %d pp %d: a ragged prefill and decode steps, logits within 1e-5 of one process", wn, g_tp, g_pp);
            CHECKF(ok && worst <= 1e-5, name, "ok %d, worst relative difference %.3g (%s)", ok, worst, pt_error(ctx));
            snprintf(name, sizeof name, "%s tp %d pp %d: a sequence's logits alone and in a batch of 3 are the same bits", wn, g_tp, g_pp);
            CHECKF(ok && inv, name, "they differ");
            {
                int i;
                for (i = 0; i < 150; i++) stream[i] = tok_at(i, 5);
            }
            ok = pt_infer_nll(inf, stream, 150, &nll_a, &ca) == PT_OK && pt_infer_nll(ref, stream, 150, &nll_r, &cr) == PT_OK;
            snprintf(name, sizeof name, "%s tp %d pp %d: pt_infer_nll of 150 tokens equals one process's (1e-5)", wn, g_tp, g_pp);
            CHECKF(ok && ca == cr && fabs(nll_a - nll_r) <= 1e-5 * fabs(nll_r), name, "%.9g vs %.9g (%s)", nll_a, nll_r, pt_error(ctx));
            for (pass = 0; pass < 1; pass++) {
                memset(ta, 0, sizeof ta), memset(tr, 0, sizeof tr);
                ok = engine_run(inf, ta, pass ? PT_PREEMPT_SWAP : PT_PREEMPT_RECOMPUTE) && engine_run(ref, tr, pass ? PT_PREEMPT_SWAP : PT_PREEMPT_RECOMPUTE);
                snprintf(name, sizeof name, "%s tp %d pp %d: the engine (6 requests, 3 at once, a shared prefix%s) gives one process's tokens", wn,
                         g_tp, g_pp, pass ? ", swap preemption" : "");
                CHECKF(ok && !memcmp(ta, tr, sizeof ta), name, "ok %d (%s)", ok, pt_error(ctx));
            }
            CHECKF(pt_infer_kv_stats(inf).hit_blocks > 0, "the engine's prefix cache hits on the layout", "no hit");
            tu_solo(0);
            pt_infer_free(ref);
        }
        pt_infer_free(inf); /* the leader's ends the followers' loops */
        if (rs && rs != rw) pt_gpt_weights_free(rs);
        if (ws != w) pt_gpt_weights_free(ws);
    }
    { /* a checkpoint saved by one process, opened on the grid (resharded as it is read) */
        char dir[256] = "";
        pt_gpt_weights *wo;
        pt_infer *inf;
        pt_infer_desc idesc;
        memset(&idesc, 0, sizeof idesc);
        if (g_rank == 0) {
            pt_ckpt_opts co;
            pt_gpt_config c = cfg_of();
            memset(&co, 0, sizeof co);
            co.model = &c;
            snprintf(dir, sizeof dir, "%s/ptinfmp_XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
            if (!mkdtemp(dir) || pt_ckpt_save(rc, NULL, dir, 1, &co) != PT_OK) dir[0] = 0;
        }
        MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD);
        wo = dir[0] ? pt_gpt_weights_open(ctx, dir, -1, NULL) : NULL;
        {
            int64_t whole = g_rank == 0 ? pt_gpt_weights_bytes(rw) : 0, mine = wo ? pt_gpt_weights_bytes(wo) : -1;
            MPI_Bcast(&whole, 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
            CHECKF(wo && mine > 0 && mine <= whole * 9 / 10, "pt_gpt_weights_open of a checkpoint on the grid loads this rank's shard (at most 90% of the model)",
                   "%s: %lld of %lld bytes", wo ? "too many bytes" : pt_error(ctx), (long long)mine, (long long)whole);
        }
        inf = wo ? pt_infer_new(ctx, wo, &idesc) : NULL;
        if (inf && g_rank != 0) pt_infer_follow(inf);
        else if (inf) {
            pt_infer *ref = pt_infer_new(rc, rw, &idesc);
            int32_t stream[100];
            double na = 0, nr = 0;
            int64_t ca = 0, cr = 0;
            int i, ok;
            for (i = 0; i < 100; i++) stream[i] = tok_at(i, 6);
            ok = ref && pt_infer_nll(inf, stream, 100, &na, &ca) == PT_OK && pt_infer_nll(ref, stream, 100, &nr, &cr) == PT_OK;
            tu_solo(1);
            CHECKF(ok && fabs(na - nr) <= 1e-5 * fabs(nr), "a checkpoint served on the grid scores a stream as one process does (1e-5)", "%.9g vs %.9g (%s)", na, nr,
                   pt_error(ctx));
            tu_solo(0);
            pt_infer_free(ref);
        }
        pt_infer_free(inf);
        pt_gpt_weights_free(wo);
        if (g_rank == 0 && dir[0]) {
            char cmd[300];
            snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
            if (system(cmd) != 0) printf("  could not remove %s\n", dir);
        }
    }
    { /* pt_gpt_generate on the grid: the leader generates, every rank gets the tokens */
        int32_t prompt[3] = {5, 6, 7}, out[13], want[13];
        pt_status st = m ? pt_gpt_generate(m, NULL, prompt, 3, 10, 0.0f, 1, out) : PT_ERR_ARG;
        int same = 1, i;
        if (g_rank == 0) same = rm && pt_gpt_generate(rm, NULL, prompt, 3, 10, 0.0f, 1, want) == PT_OK && !memcmp(out, want, sizeof out);
        MPI_Bcast(&same, 1, MPI_INT, 0, MPI_COMM_WORLD);
        MPI_Bcast(want, 13, MPI_INT32_T, 0, MPI_COMM_WORLD);
        for (i = 0; i < 13; i++) same &= out[i] == want[i];
        CHECKF(st == PT_OK && same, "pt_gpt_generate (greedy) on the grid gives one process's tokens on every rank", "status %d (%s)", (int)st, pt_error(ctx));
    }
    pt_gpt_weights_free(w);
    pt_gpt_weights_free(rw);
    pt_gpt_free(m), pt_gpt_free(rm);
    if (rc) pt_shutdown(rc);
    pt_shutdown(ctx);
    nf = tu_summary();
    pt_dist_finalize(g_d);
    return nf;
}
