/* 13_parallel_inference.c - one model served by several ranks: where its weights and its KV cache live, and
   what the ranks tell each other for every token.

   Build: mpicc -O2 -fopenmp -DPTRAIN_MPI -I. examples/13_parallel_inference.c -o build/13_parallel_inference -lm
   Run: mpirun -np 4 --oversubscribe ./build/13_parallel_inference
        (tp 2 x pp 2; on 2 ranks: mpirun -np 2 ./build/13_parallel_inference --tp 2, or --pp 2)

   What it teaches: how inference splits a model that one device cannot hold, and what that costs.
   1. A checkpoint: rank 0 trains a small byte-level GPT (4 layers, width 64, 4 heads) on a pangram
      for a few seconds on one process and saves it, as pttrain would.
   2. The layout: every rank opens the same checkpoint on the grid (pt_gpt_weights_open on a context
      whose pt_desc.dist is a dp 1 x tp x pp grid) and gets only its shard, cut as it is read:
      - tensor parallelism (TP) splits every layer across the TP ranks: each holds some of the
        attention heads (their rows of the q, k, v projection, their columns of the output
        projection) and some of the MLP's hidden columns, and the vocabulary rows of the token
        table and of the LM head are split the same way (vocabulary-parallel);
      - pipeline parallelism (PP) gives each stage a run of consecutive layers; the token table
        and the positions live on the first stage, the final norm and the LM head on the last.
      The KV cache follows the weights: a rank caches keys and values only for its own heads of its
      own layers, so a KV block (16 tokens) is smaller on every rank, while every rank has the same
      number of blocks and the same block tables.
      A table shows, per rank (gathered to rank 0, in rank order), the layers, heads and vocabulary
      rows it holds, its weight bytes (pt_gpt_weights_bytes) and its KV bytes per block.
   3. The leader: world rank 0 runs the generation (pt_generate, greedy) while every other rank sits
      in pt_infer_follow, running the leader's calls on its shard. The text is generated once more
      on one process from the same checkpoint: the two must be equal, token for token.
   4. The traffic: every rank's counters (pt_infer_mp_get) after the run: TP sums, pipeline messages,
      logit gathers and the leader's commands, per step and in bytes, with what each is for and a
      check of the TP sums' count and bytes against the layout.
   Flags: --tp T --pp P (default: tp 2 and pp = ranks / 2; T x P must be the ranks), --steps N (training
   steps, default 300), --tokens N (generated, default 48), --prompt TEXT (default "the quick").
   Rank 0 prints everything; the checkpoint goes to a temporary directory, removed at the end. */
#define PTRAIN_IMPLEMENTATION
#include "ptrain.h"

#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char TEXT[] = "the quick brown fox jumps over the lazy dog. ";

/* what a rank holds and what it sent, gathered to rank 0 (all as doubles, one record a rank) */
enum { F_TP, F_PP, F_L0, F_L1, F_HEADS, F_EMB0, F_EMBN, F_HEAD0, F_HEADN, F_WBYTES, F_KVBLOCK, F_KVBLOCKS, F_STEPS, F_SUMS, F_SUMB, F_P2P, F_P2PB,
       F_GATH, F_GATHB, F_CMDS, F_COMM, F_STEP_S, NF };

static pt_ctx *mk_ctx(const pt_dist *d) {
    pt_desc desc;
    memset(&desc, 0, sizeof desc);
    desc.seed = 7, desc.threads = 1, desc.dist = d;
    return pt_init(&desc);
}

static pt_gpt_config model_cfg(void) {
    pt_gpt_config c;
    memset(&c, 0, sizeof c);
    c.vocab = 256, c.max_seq = 64, c.layers = 4, c.width = 64, c.heads = 4;
    return c;
}

/* rank 0, one process: trains the model on the text (AdamW, batches of 8 windows of 32 bytes) and saves
   it as a checkpoint in dir; 1 when it worked */
static int train_and_save(const char *dir, int steps) {
    enum { B = 8, T = 32 };
    pt_gpt_config c = model_cfg();
    pt_ctx *ctx = mk_ctx(NULL);
    pt_gpt *m = ctx ? pt_gpt_new(ctx, &c) : NULL;
    pt_graph *g = m ? pt_graph_new(ctx) : NULL;
    pt_optim_desc od;
    pt_optim *o = NULL;
    pt_ckpt_opts co;
    char text[2048];
    int32_t x[B * T], y[B * T];
    int n = 0, k, b, t, ok;
    float first = 0, last = 0;
    while (n + (int)sizeof TEXT < (int)sizeof text) memcpy(text + n, TEXT, sizeof TEXT - 1), n += (int)sizeof TEXT - 1;
    memset(&od, 0, sizeof od);
    od.kind = PT_OPTIM_ADAMW, od.lr = 1e-2f;
    ok = g && (o = pt_optim_new(ctx, &od)) != NULL;
    for (k = 0; ok && k < steps; k++) {
        pt_tensor *xt, *yt, *loss;
        for (b = 0; b < B; b++) {
            const int at = (int)(pt_hash64((uint64_t)(k * B + b)) % (uint64_t)(n - T - 1));
            for (t = 0; t < T; t++) x[b * T + t] = (unsigned char)text[at + t], y[b * T + t] = (unsigned char)text[at + t + 1];
        }
        pt_graph_reset(g);
        xt = pt_tensor_new(g, PT_I32, 2, B, T, 0, 0), yt = pt_tensor_new(g, PT_I32, 2, B, T, 0, 0);
        pt_tensor_write(xt, x), pt_tensor_write(yt, y);
        loss = pt_gpt_loss(g, m, xt, yt);
        pt_zero_grad(ctx);
        ok = loss && pt_backward(g, loss) == PT_OK;
        if (ok) {
            last = pt_item(loss);
            if (k == 0) first = last;
            pt_optim_step(o, 1e-2f);
            ok = pt_status_get(ctx) == PT_OK;
        }
    }
    memset(&co, 0, sizeof co);
    co.model = &c;
    ok = ok && pt_ckpt_save(ctx, NULL, dir, steps, &co) == PT_OK;
    if (ok) printf("trained %d steps on one process (loss %.2f -> %.2f), saved to %s\n", steps, first, last, dir);
    else fprintf(stderr, "13_parallel_inference: training or saving failed: %s\n", ctx ? pt_error(ctx) : "pt_init failed");
    if (o) pt_optim_free(o);
    if (g) pt_graph_free(g);
    pt_gpt_free(m);
    if (ctx) pt_shutdown(ctx);
    return ok;
}

/* the text of byte tokens, control bytes shown as '.' */
static void show(const char *label, const int32_t *tok, int n) {
    int i;
    printf("%s\"", label);
    for (i = 0; i < n; i++) putchar(tok[i] >= 32 && tok[i] < 127 && tok[i] != '"' ? tok[i] : '.');
    printf("\"\n");
}

static double mib(double b) { return b / (1024.0 * 1024.0); }

int main(int argc, char **argv) {
    pt_layout lay;
    pt_dist *d;
    pt_ctx *ctx;
    pt_gpt_weights *w;
    pt_infer *inf;
    pt_infer_desc idesc;
    pt_infer_mp mp;
    char err[512], dir[512] = "";
    const char *prompt = "the quick";
    int tp = 0, pp = 0, steps = 300, ntok = 22, rank, size, i, ok = 1, r;
    double mine[NF], *all = NULL;
    int32_t out[256], ref[256];
    int nout = 0;
    pt_gpt_config c = model_cfg();

    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--tp") && i + 1 < argc) tp = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--pp") && i + 1 < argc) pp = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--tokens") && i + 1 < argc) ntok = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--prompt") && i + 1 < argc) prompt = argv[++i];
        else {
            fprintf(stderr, "13_parallel_inference: unknown flag '%s' (expected --tp T --pp P --steps N --tokens N --prompt TEXT)\n", argv[i]);
            return 2;
        }
    }
    if (tp < 0 || pp < 0 || steps < 1 || ntok < 1 || ntok > 200 || !prompt[0] || strlen(prompt) > 40) {
        fprintf(stderr, "13_parallel_inference: --tp %d --pp %d --steps %d --tokens %d --prompt of %d bytes: expected tp, pp >= 1, steps >= 1, "
                        "tokens 1..200, a prompt of 1..40 bytes\n", tp, pp, steps, ntok, (int)strlen(prompt));
        return 2;
    }
    /* the grid: dp 1 x tp x pp over the world's ranks (a 0 is filled from the world's size; pt_dist_init says
       when the product is not the world) */
    if (!tp && !pp) tp = 2;
    memset(&lay, 0, sizeof lay);
    lay.dp = 1, lay.tp = tp, lay.pp = pp;
    if (!(d = pt_dist_init(&argc, &argv, &lay, err, sizeof err))) {
        fprintf(stderr, "13_parallel_inference: the grid tp %d x pp %d: %s\n", tp, pp, err);
        return 1;
    }
    tp = pt_dist_layout(d).tp, pp = pt_dist_layout(d).pp;
    rank = pt_dist_rank(d), size = pt_dist_size(d);

    /* 1. the checkpoint, trained and saved by rank 0 alone; its directory sent to every rank */
    if (rank == 0) {
        snprintf(dir, sizeof dir, "%s/pt13_XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
        printf("grid: %d ranks = tp %d x pp %d (world rank 0 is the leader)\n", size, tp, pp);
        if (!mkdtemp(dir) || !train_and_save(dir, steps)) dir[0] = 0;
    }
    { /* the others wait for it asleep, not spinning in MPI_Bcast (they may share the cores rank 0 trains on) */
        MPI_Request rq;
        int done = 0;
        MPI_Ibcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD, &rq);
        while (MPI_Test(&rq, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done) {
            struct timespec ts = {0, 5000000};
            nanosleep(&ts, NULL);
        }
    }
    if (!dir[0]) {
        pt_dist_finalize(d);
        return 1;
    }

    /* 2. every rank opens its shard of the checkpoint and makes its pt_infer (all together) */
    ctx = mk_ctx(d);
    w = ctx ? pt_gpt_weights_open(ctx, dir, -1, NULL) : NULL;
    memset(&idesc, 0, sizeof idesc);
    idesc.max_seqs = 1, idesc.block_tokens = 16, idesc.kv_tokens = c.max_seq;
    inf = w ? pt_infer_new(ctx, w, &idesc) : NULL;
    if (!inf) {
        fprintf(stderr, "13_parallel_inference (rank %d): %s\n", rank, ctx ? pt_error(ctx) : "pt_init failed");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    /* 3. the leader generates; the others follow its calls until it frees its pt_infer */
    if (rank == 0) {
        pt_gen_request q;
        pt_gen_result res;
        int32_t p[64];
        int np = (int)strlen(prompt);
        for (i = 0; i < np; i++) p[i] = (unsigned char)prompt[i];
        memset(&q, 0, sizeof q), memset(&res, 0, sizeof res);
        q.prompt = p, q.nprompt = np, q.max_tokens = ntok; /* q.sample all zero: greedy */
        res.tokens = out;
        ok = pt_generate(inf, 1, &q, &res, NULL, NULL) == PT_OK;
        nout = res.ntokens;
        if (!ok) fprintf(stderr, "13_parallel_inference: pt_generate on the layout: %s\n", pt_error(ctx));
    } else if (pt_infer_follow(inf) != PT_OK) {
        fprintf(stderr, "13_parallel_inference (rank %d): pt_infer_follow: %s\n", rank, pt_error(ctx));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    mp = pt_infer_mp_get(inf);
    pt_infer_free(inf); /* the leader's free ends the followers' pt_infer_follow */

    /* what this rank holds and sent */
    {
        const int first = w->layer0 == 0, last = (w->layer1 ? w->layer1 : c.layers) == c.layers;
        memset(mine, 0, sizeof mine);
        mine[F_TP] = mp.tp_rank, mine[F_PP] = mp.pp_rank, mine[F_L0] = mp.layer0, mine[F_L1] = mp.layer1, mine[F_HEADS] = mp.heads;
        mine[F_EMB0] = first ? (double)w->vocab0 : -1, mine[F_EMBN] = first ? (double)w->wte.rows : 0;
        mine[F_HEAD0] = last ? (double)w->vocab0 : -1, mine[F_HEADN] = last ? (double)w->head.rows : 0;
        mine[F_WBYTES] = (double)pt_gpt_weights_bytes(w), mine[F_KVBLOCK] = mp.kv_blocks ? (double)mp.kv_bytes / (double)mp.kv_blocks : 0;
        mine[F_KVBLOCKS] = (double)mp.kv_blocks, mine[F_STEPS] = (double)mp.steps, mine[F_SUMS] = (double)mp.sums, mine[F_SUMB] = (double)mp.sum_bytes;
        mine[F_P2P] = (double)mp.p2p, mine[F_P2PB] = (double)mp.p2p_bytes, mine[F_GATH] = (double)mp.gathers, mine[F_GATHB] = (double)mp.gather_bytes;
        mine[F_CMDS] = (double)mp.commands, mine[F_COMM] = mp.comm_s, mine[F_STEP_S] = mp.step_s;
    }
    if (rank == 0 && !(all = (double *)malloc(sizeof(double) * NF * (size_t)size))) MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Gather(mine, NF, MPI_DOUBLE, all, NF, MPI_DOUBLE, 0, MPI_COMM_WORLD);

    if (rank == 0) {
        const int H = c.heads, hs = c.width / c.heads, vp = (c.vocab + 63) / 64 * 64;
        const int fed = (int)strlen(prompt) + nout - 1; /* the last generated token is never fed */
        pt_ctx *rc = mk_ctx(NULL);
        pt_gpt_weights *rw = rc ? pt_gpt_weights_open(rc, dir, -1, NULL) : NULL;
        pt_infer *ri = rw ? pt_infer_new(rc, rw, &idesc) : NULL;
        double whole = rw ? (double)pt_gpt_weights_bytes(rw) : 0;
        int same = 0;
        printf("\nwhere the model lives (the whole model: %d layers x %d heads of size %d, vocabulary %d in %d rows, %.3f MiB of f32 weights)\n",
               c.layers, H, hs, c.vocab, vp, mib(whole));
        printf("  rank  tp pp  layers  heads      token table rows  LM head rows    weights MiB  KV bytes/block  KV blocks\n");
        for (r = 0; r < size; r++) {
            const double *a = all + (size_t)r * NF;
            const int h0 = (int)a[F_TP] * (int)a[F_HEADS];
            char emb[32] = "-", head[32] = "-";
            if (a[F_EMB0] >= 0) snprintf(emb, sizeof emb, "[%d, %d)", (int)a[F_EMB0], (int)(a[F_EMB0] + a[F_EMBN]));
            if (a[F_HEAD0] >= 0) snprintf(head, sizeof head, "[%d, %d)", (int)a[F_HEAD0], (int)(a[F_HEAD0] + a[F_HEADN]));
            printf("  rank %d  %d  %d  [%d, %d)  %d-%d of %d   %-16s  %-14s  %11.3f  %14.0f  %9.0f\n", r, (int)a[F_TP], (int)a[F_PP], (int)a[F_L0], (int)a[F_L1],
                   h0, h0 + (int)a[F_HEADS] - 1, H, emb, head, mib(a[F_WBYTES]), a[F_KVBLOCK], a[F_KVBLOCKS]);
        }
        printf("  A KV block holds 16 tokens' keys and values of the rank's own heads of its own layers:\n"
               "  16 tokens x 2 (k, v) x %d layers x %d heads x %d values x 4 bytes = %d bytes on rank 0 (%d on one process).\n",
               (int)(all[F_L1] - all[F_L0]), (int)all[F_HEADS], hs, (int)all[F_KVBLOCK], 16 * 2 * c.layers * c.width * 4);
        printf("  Every rank has the same blocks and block tables (the leader's calls run everywhere); only their bytes differ.\n");

        /* 3. the same text on one process */
        if (ri) {
            pt_gen_request q;
            pt_gen_result res;
            int32_t p[64];
            int np = (int)strlen(prompt);
            for (i = 0; i < np; i++) p[i] = (unsigned char)prompt[i];
            memset(&q, 0, sizeof q), memset(&res, 0, sizeof res);
            q.prompt = p, q.nprompt = np, q.max_tokens = ntok;
            res.tokens = ref;
            same = ok && pt_generate(ri, 1, &q, &res, NULL, NULL) == PT_OK && res.ntokens == nout && !memcmp(ref, out, sizeof(int32_t) * (size_t)nout);
        }
        printf("\ngreedy generation, prompt \"%s\"\n", prompt);
        show("  on the layout:     ", out, nout);
        if (ri) show("  on one process:    ", ref, nout);
        printf("same tokens as one process: %s (%d tokens)\n", same ? "yes" : "NO", nout);

        /* 4. the traffic */
        printf("\nwhat the ranks sent: %d steps (one prefill of the %d-byte prompt, then one per new token but the last), %d tokens fed\n",
               (int)all[F_STEPS], (int)strlen(prompt), fed);
        printf("  rank  TP sums  per step  bytes      pipeline msgs  per step  bytes      logit gathers  bytes      commands  step ms  in MPI ms\n");
        for (r = 0; r < size; r++) {
            const double *a = all + (size_t)r * NF, s = a[F_STEPS] > 0 ? a[F_STEPS] : 1;
            printf("  rank %d  %7.0f  %8.1f  %-9.0f  %13.0f  %8.1f  %-9.0f  %13.0f  %-9.0f  %8.0f  %7.1f  %9.1f\n", r, a[F_SUMS], a[F_SUMS] / s, a[F_SUMB],
                   a[F_P2P], a[F_P2P] / s, a[F_P2PB], a[F_GATH], a[F_GATHB], a[F_CMDS], 1e3 * a[F_STEP_S], 1e3 * a[F_COMM]);
        }
        printf("  (bytes: sent by the rank, or received for pipeline messages; a pipeline message is counted by its sender and\n"
               "  by its receiver. A follower also waits inside MPI between steps, for the leader's next command: its MPI time\n"
               "  can pass its step time.)\n");
        if (tp > 1)
            printf("  TP sum: a TP rank's heads (or MLP columns) give only part of a layer's output: each rank's output projection\n"
                   "    makes a partial [tokens x %d] result and the TP ranks add theirs (at tp 2 one exchange of %d bytes a token),\n"
                   "    so every rank holds the whole residual stream again. Two per layer: after attention and after the MLP;\n"
                   "    one more on the first stage for the embedding (each rank holds only its vocabulary rows of the token table).\n"
                   "    Rank 0: %d sums a step = 1 (the embedding) + 2 x %d layers; %d x %d tokens fed x %d bytes = %d bytes (counted: %.0f).\n",
                   c.width, c.width * 4, 1 + 2 * (int)(all[F_L1] - all[F_L0]), (int)(all[F_L1] - all[F_L0]), 1 + 2 * (int)(all[F_L1] - all[F_L0]), fed,
                   c.width * 4, (1 + 2 * (int)(all[F_L1] - all[F_L0])) * fed * c.width * 4, all[F_SUMB]);
        if (pp > 1)
            printf("  pipeline: a stage sends its output activations ([tokens x %d] floats, %d bytes a token) to the next stage,\n"
                   "    and the last stage sends each step's logits to the leader, which samples (a message sent is counted once by\n"
                   "    its sender and once by its receiver). A step of several sequences is cut into micro-batches in flight.\n",
                   c.width, c.width * 4);
        if (tp > 1)
            printf("  logit gathers: the LM head's vocabulary rows are split over TP; the last stage's TP ranks gather their logits\n"
                   "    on its TP rank 0 (%d rows x 4 bytes from each rank per sampled token).\n", vp / tp);
        printf("  commands: the leader broadcasts every call that changes the cache (a new sequence, a step with its tokens, a free)\n"
               "    so the followers run the same calls, in the same order: their block tables stay the leader's.\n"
               "  step ms: the rank's time in steps; in MPI ms: its time inside MPI calls (pt_infer_mp: step_s, comm_s).\n");
        if (ri) pt_infer_free(ri);
        pt_gpt_weights_free(rw);
        if (rc) pt_shutdown(rc);
        {
            char cmd[600];
            snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
            if (system(cmd) != 0) fprintf(stderr, "13_parallel_inference: could not remove %s\n", dir);
        }
        ok = ok && same;
        free(all);
    }
    MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    pt_gpt_weights_free(w);
    pt_shutdown(ctx);
    pt_dist_finalize(d);
    return ok ? 0 : 1;
}
