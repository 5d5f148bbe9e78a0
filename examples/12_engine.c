/* 12_engine.c - many requests sharing one model: the serving engine, watched block by block.

   Build: cc -O2 -fopenmp -march=native -I. examples/12_engine.c -o build/12_engine -lm
   Run: ./build/12_engine [--recompute]
        (a small random GPT; no checkpoint needed: what it shows is the bookkeeping, not the text)

   What it teaches: how a server runs many requests on one model without wasting memory or making
   anyone wait for a batch. The KV cache is a pool of blocks of 16 tokens; each request holds a block
   table (which blocks hold its tokens, in order), so it takes memory as it grows, not a whole
   context up front. Blocks are found by a hash of their tokens and the block before them: two
   requests with the same system prompt share its blocks (reference counts; a block marked * below is
   held by more than one request), and a finished request's blocks stay cached, so the next turn of a
   chat finds its history already computed (a prefix-cache hit). Every iteration the engine feeds one
   token to each decoding request and spends the rest of a token budget on prompt chunks (chunked
   prefill: a long prompt does not stall the others). When a request of a higher class arrives and
   the pool is full, a lower one is preempted: its blocks copied to host memory (swap) or dropped and
   recomputed later (--recompute); it keeps its place in its class. Whatever happens around it, a
   request's tokens are the ones it would get alone (batch invariance).

   The trace (iterations are the clock): A and B (class 0) arrive at once, B with a 70-token prompt
   that is fed in chunks; C arrives at 4 with A's 40-token system prompt (shared blocks); D (class 2,
   high) arrives at 12 into a full pool and preempts; E arrives at 26 with A's whole conversation
   (a prefix-cache hit). Each line shows an iteration's decisions, then the block tables. */
#define PTRAIN_IMPLEMENTATION
#include "ptrain.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NREQ 5
static const char *NAME = "ABCDE";

static void print_tables(pt_engine *e, pt_infer *inf, const int64_t *id) {
    pt_kv_stats ks = pt_infer_kv_stats(inf);
    int k;
    for (k = 0; k < NREQ; k++) {
        pt_engine_result r;
        int32_t tb[64], n, b;
        if (pt_engine_poll(e, id[k], &r, NULL, 0) != PT_REQ_RUNNING) continue;
        n = pt_infer_seq_table(inf, r.seq, tb, 64);
        printf("      %c (seq %d, %3lld tokens):", NAME[k], (int)r.seq, (long long)pt_infer_seq_len(inf, r.seq));
        for (b = 0; b < n; b++) printf(" %2d%s", (int)tb[b], pt_infer_block_ref(inf, tb[b]) > 1 ? "*" : " ");
        printf("\n");
    }
    printf("      pool: %lld blocks: %lld held (%lld shared), %lld cached, %lld free\n", (long long)ks.total, (long long)ks.used, (long long)ks.shared,
           (long long)ks.cached, (long long)ks.free);
}

int main(int argc, char **argv) {
    const int swap = !(argc > 1 && !strcmp(argv[1], "--recompute"));
    pt_desc dc;
    pt_ctx *ctx;
    pt_gpt_config cfg;
    pt_gpt *m;
    pt_gpt_weights *w;
    pt_infer_desc id_;
    pt_infer *inf;
    pt_engine_desc ed;
    pt_engine *e;
    int32_t sys[40], prompt[NREQ][120], a_out[32];
    int np[NREQ], k, i, an = 0;
    int64_t id[NREQ], seen = 0, nev;
    uint64_t r = 12345;

    memset(&dc, 0, sizeof dc);
    dc.seed = 1, dc.threads = 1;
    ctx = pt_init(&dc);
    memset(&cfg, 0, sizeof cfg);
    cfg.vocab = 64, cfg.max_seq = 128, cfg.layers = 2, cfg.width = 64, cfg.heads = 4;
    m = pt_gpt_new(ctx, &cfg);
    w = pt_gpt_weights_from(m, PT_W_F32);
    memset(&id_, 0, sizeof id_);
    id_.max_seqs = 4, id_.kv_tokens = 14 * 16; /* a pool of 14 blocks: too small for everyone at once */
    inf = pt_infer_new(ctx, w, &id_);
    memset(&ed, 0, sizeof ed);
    ed.token_budget = 24, ed.max_chunk = 16, ed.preempt = swap ? PT_PREEMPT_SWAP : PT_PREEMPT_RECOMPUTE;
    e = inf ? pt_engine_new(inf, &ed) : NULL;
    if (!e) {
        fprintf(stderr, "12_engine: %s\n", pt_error(ctx));
        return 1;
    }
    for (i = 0; i < 40; i++) sys[i] = (int32_t)((r = r * 6364136223846793005ULL + 1442695040888963407ULL) >> 58);
    for (k = 0; k < NREQ; k++) {
        np[k] = k == 1 ? 70 : k == 3 ? 60 : 46;
        for (i = 0; i < np[k]; i++) prompt[k][i] = (int32_t)((r = r * 6364136223846793005ULL + 1442695040888963407ULL) >> 58);
    }
    memcpy(prompt[0], sys, sizeof sys), memcpy(prompt[2], sys, sizeof sys); /* A and C: one system prompt */
    printf("engine: pool of 14 blocks x 16 tokens, 4 sequences, a budget of 24 tokens an iteration (prompt chunks <= 16), preemption by %s\n\n",
           swap ? "swap" : "recompute");
    for (k = 0; k < 4; k++) {
        pt_engine_request q;
        memset(&q, 0, sizeof q);
        q.prompt = prompt[k], q.nprompt = np[k], q.max_tokens = k == 3 ? 8 : 14, q.sample.seed = (uint64_t)k;
        q.priority = k == 3 ? 2 : 0, q.arrival = k == 2 ? 4 : k == 3 ? 12 : 0;
        id[k] = pt_engine_submit(e, &q);
    }
    id[4] = -1;
    for (;;) {
        const pt_engine_event *ev;
        int more, show = 0;
        int64_t it = (int64_t)pt_engine_now(e), j;
        if (id[4] < 0 && pt_engine_poll(e, id[0], NULL, NULL, 0) == PT_REQ_DONE && it >= 26) { /* E: A's next turn */
            pt_engine_request q;
            pt_engine_result res;
            pt_engine_poll(e, id[0], &res, a_out, 32);
            an = res.ntokens;
            memcpy(prompt[4], prompt[0], (size_t)np[0] * sizeof(int32_t));
            memcpy(prompt[4] + np[0], a_out, (size_t)an * sizeof(int32_t));
            np[4] = np[0] + an;
            for (i = 0; i < 6; i++) prompt[4][np[4] + i] = (int32_t)(i + 3);
            np[4] += 6;
            memset(&q, 0, sizeof q);
            q.prompt = prompt[4], q.nprompt = np[4], q.max_tokens = 6, q.arrival = (double)it;
            id[4] = pt_engine_submit(e, &q);
        }
        more = pt_engine_step(e);
        ev = pt_engine_events(e, &nev);
        if (seen < nev) printf("iter %2lld:", (long long)it);
        for (j = seen; j < nev; j++) {
            const pt_engine_event *x = &ev[j];
            const char c = NAME[x->req];
            switch (x->kind) {
            case PT_EV_ARRIVE: printf(" %c arrives (class %lld);", c, (long long)x->a), show = 1; break;
            case PT_EV_ADMIT:
                if (x->b) printf(" %c admitted, PREFIX-CACHE HIT: %lld prompt tokens already cached;", c, (long long)x->b);
                else printf(" %c admitted;", c);
                show = 1;
                break;
            case PT_EV_RUN:
                if (x->a > 1) printf(" %c prompt chunk [%lld, %lld);", c, (long long)x->b, (long long)(x->b + x->a));
                else if (x->a == 1) printf(" %c+1", c);
                break;
            case PT_EV_PREEMPT: printf(" %c PREEMPTED (%s, %lld tokens);", c, x->a ? "swapped to host" : "blocks dropped, to recompute", (long long)x->b), show = 1; break;
            case PT_EV_SWAPIN: printf(" %c swapped back in (%lld tokens);", c, (long long)x->b), show = 1; break;
            case PT_EV_FINISH: printf(" %c finished (%lld tokens);", c, (long long)x->b), show = 1; break;
            default: printf(" %c %s;", c, pt_engine_event_name(x->kind)); break;
            }
        }
        if (seen < nev) printf("\n");
        seen = nev;
        if (show) print_tables(e, inf, id);
        if (pt_infer_check(inf) != PT_OK) {
            fprintf(stderr, "12_engine: %s\n", pt_error(ctx));
            return 1;
        }
        if (more <= 0 && id[4] >= 0) break;
    }
    {
        pt_kv_stats ks = pt_infer_kv_stats(inf);
        pt_engine_stats st = pt_engine_stats_get(e);
        printf("\n%lld iterations; prefix cache: %lld lookups, %lld blocks (%lld tokens) found; %lld preemptions, %lld copies on write\n",
               (long long)st.iterations, (long long)ks.lookups, (long long)ks.hit_blocks, (long long)ks.hit_tokens, (long long)st.preempted, (long long)ks.cow);
        for (k = 0; k < NREQ; k++) {
            pt_engine_result res;
            pt_engine_poll(e, id[k], &res, NULL, 0);
            printf("  %c: class %d, arrived %3.0f, first token %3.0f, done %3.0f, %2d tokens, %d preemption(s), %lld prompt tokens from the cache\n", NAME[k],
                   k == 3 ? 2 : 0, res.arrival, res.first_token, res.done, res.ntokens, res.preemptions, (long long)res.cached_tokens);
        }
    }
    pt_engine_free(e);
    pt_infer_free(inf);
    pt_gpt_weights_free(w);
    pt_gpt_free(m);
    pt_shutdown(ctx);
    return 0;
}
