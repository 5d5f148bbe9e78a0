/* bench_infer_layout.c - model-parallel decode (a pt_infer over TP / PP shards) against one process, and the
   small-message TP sum against MPI's, JSON lines.

   bench_infer_layout layout MODEL TP PP THREADS [formats [batches [steps]]]
     one process (TP = PP = 1, started without mpirun) or, under mpirun -np TP x PP, a grid of dp 1, tp TP,
     pp PP; THREADS per process (the baseline: 1 process of 2 threads; the layouts: 1 thread per rank).
     MODEL    gpt2-124m (GPT-2 small's shape: 12 layers, width 768, 12 heads, vocabulary 50,257, max_seq 1024)
              or tiny (4 layers, width 128, 4 heads, vocabulary 256, max_seq 64: a smoke run)
     formats  comma-separated weight formats (default f32,q8_0)
     batches  comma-separated batch sizes (default 1,16)
     steps    timed decode steps per batch (default 16)
   The model has pt_gpt_new's deterministic random init (each rank builds its shard of the same model:
   pt_gpt_new / pt_gpt_new_stages on the grid, then pt_gpt_weights_from in the format). Per (format, batch):
   B sequences are prefilled with an 8-token prompt each (one step), 2 untimed decode steps follow, then
   `steps` timed decode steps of one token per sequence (greedy on the leader's logits);
   tokens_per_s = B x steps / the leader's wall time of those steps. The counters of pt_infer_mp_get
   give the communication: comm_share is the leader's comm_s / step_s over the timed steps (seconds
   inside MPI calls over seconds of steps; under PP the leader, stage 0, also waits there for the last
   stage's logits); comm_share_max is the largest share of the timed steps' wall time (the leader's) that
   a rank spent inside MPI calls: its comm_s over those steps / their wall time. A follower's comm_s also
   counts its wait for the leader's next command between steps (idle time, spent in MPI_Bcast); a
   follower's counters are read when its pt_infer_follow returns, so each configuration runs twice, once up to the
   timed steps and once with them, and the difference is the timed steps' (noisy for a short run; held
   to [0, 1]). The leader's counters per timed step:
   sums (TP sums), p2p (pipeline messages), gathers (the head's logits over TP), commands (the leader's
   broadcasts), and their bytes. weight_bytes_max: the largest pt_gpt_weights_bytes of a rank.
   "note" says when there are more ranks than CPUs (oversubscribed). INFER_LAYOUT_PP_GROUPS (default 0):
   pt_infer_desc.pp_groups of the pp > 1 layouts, printed as pp_groups (0: ptrain's default, pp
   micro-batches in flight; 1: one micro-batch a step, no pipelining, for comparison). The stages are cut by
   pt_infer_split (balanced by the weights each reads, the head on the last).

   bench_infer_layout allreduce [n [reps]]  (mpirun -np 2)
     a vector of n floats (default 768: GPT-2 small's width) summed over 2 ranks by pt_infer's TP sum
     (pt__inf_tp_sum on a tp-2 pt_infer of a one-layer model of width n), MPI_Allreduce, and a hand-written
     MPI_Sendrecv exchange + add; reps (default 2000) calls of each, interleaved, each after a barrier;
     the median microseconds of a call on rank 0.

   Build: mpicc -O3 -march=native -fopenmp -DPTRAIN_MPI -I. bench/bench_infer_layout.c -o build/bench_infer_layout -lm */
#define _POSIX_C_SOURCE 200809L
#define PTRAIN_IMPLEMENTATION
#include "ptrain.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_util.h"

#define PROMPT 8
#define WARM 2

static pt_dist *g_d;
static int g_rank, g_tp = 1, g_pp = 1, g_threads = 2;
static int g_groups = 0; /* pt_infer_desc.pp_groups (INFER_LAYOUT_PP_GROUPS) */
static pt_gpt_config g_cfg;
static const char *g_model;

static void die(pt_ctx *ctx, const char *what) {
    fprintf(stderr, "bench_infer_layout (rank %d): %s: %s\n", g_rank, what, ctx ? pt_error(ctx) : "");
    fflush(stderr);
    if (g_d) MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}


static int model_cfg(const char *name, pt_gpt_config *c) {
    memset(c, 0, sizeof *c);
    if (!strcmp(name, "gpt2-124m")) c->vocab = 50257, c->max_seq = 1024, c->layers = 12, c->width = 768, c->heads = 12;
    else if (!strcmp(name, "tiny")) c->vocab = 256, c->max_seq = 64, c->layers = 4, c->width = 128, c->heads = 4;
    else return 0;
    return 1;
}

static pt_ctx *mk_ctx(const pt_dist *d, int threads) {
    pt_desc desc;
    memset(&desc, 0, sizeof desc);
    desc.seed = 1234, desc.threads = threads, desc.dist = d;
    desc.log_level = PT_LOG_ERROR + 1;
    return pt_init(&desc);
}

/* this rank's model: its stage (equal stages) and its TP shard, or the whole model */
static pt_gpt *rank_model(pt_ctx *ctx, const pt_gpt_config *c) {
    int32_t first[64], mine;
    char err[256];
    if (g_pp == 1) return pt_gpt_new(ctx, c);
    mine = pt_dist_coords(g_d).pp;
    if (g_pp > 63 || pt_infer_split(c, g_pp, first, err, sizeof err) != PT_OK) {
        fprintf(stderr, "bench_infer_layout: cannot cut %d layers into %d stages: %s\n", c->layers, g_pp, err);
        return NULL;
    }
    return pt_gpt_new_stages(ctx, c, g_pp, first, 1, &mine);
}

static int argmax(const float *x, int n) {
    int i, b = 0;
    for (i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

/* one lifetime of a pt_infer: every rank creates it; the leader prefills B sequences, runs WARM decode
   steps and then `timed` timed steps (0: none), the others follow. Returns this rank's counters at the
   end (the leader: *lead_d = its counters over the timed steps alone, *secs = their wall time). */
static pt_infer_mp lifetime(pt_ctx *ctx, const pt_gpt_weights *w, int B, int timed, pt_infer_mp *lead_d, double *secs) {
    pt_infer_desc d;
    pt_infer *inf;
    pt_infer_mp end;
    const int V = g_cfg.vocab;
    memset(&d, 0, sizeof d);
    d.pp_groups = g_groups;
    d.max_seqs = B, d.kv_tokens = (int64_t)B * ((PROMPT + WARM + timed + 16) / 16 * 16 + 16);
    if (!(inf = pt_infer_new(ctx, w, &d))) die(ctx, "pt_infer_new");
    memset(&end, 0, sizeof end);
    if (!pt_infer_mp_get(inf).leader) {
        if (pt_infer_follow(inf) != PT_OK) die(ctx, "pt_infer_follow");
    } else {
        int32_t seqs[64], ntok[64], *toks = (int32_t *)malloc(sizeof(int32_t) * (size_t)B * PROMPT);
        float *logits = (float *)malloc(sizeof(float) * (size_t)B * (size_t)V);
        pt_infer_mp a;
        double t0 = 0;
        int b, s, i;
        if (!toks || !logits) die(NULL, "out of memory");
        for (b = 0; b < B; b++) {
            if ((seqs[b] = pt_infer_seq_new(inf)) < 0) die(ctx, "pt_infer_seq_new");
            ntok[b] = PROMPT;
            for (i = 0; i < PROMPT; i++) toks[b * PROMPT + i] = (int32_t)((b * 7 + i * 13 + 1) % V);
        }
        if (pt_infer_step(inf, B, seqs, ntok, toks, logits, 0) != PT_OK) die(ctx, "the prefill step");
        memset(&a, 0, sizeof a);
        for (s = 0; s < WARM + timed; s++) {
            if (s == WARM) a = pt_infer_mp_get(inf), t0 = pt_time();
            for (b = 0; b < B; b++) ntok[b] = 1, toks[b] = argmax(logits + (size_t)b * V, V);
            if (pt_infer_step(inf, B, seqs, ntok, toks, logits, 0) != PT_OK) die(ctx, "a decode step");
        }
        if (timed) {
            pt_infer_mp e = pt_infer_mp_get(inf);
            *secs = pt_time() - t0;
            *lead_d = e;
            lead_d->steps -= a.steps, lead_d->sums -= a.sums, lead_d->sum_bytes -= a.sum_bytes, lead_d->p2p -= a.p2p, lead_d->p2p_bytes -= a.p2p_bytes;
            lead_d->gathers -= a.gathers, lead_d->gather_bytes -= a.gather_bytes, lead_d->commands -= a.commands;
            lead_d->comm_s -= a.comm_s, lead_d->step_s -= a.step_s;
        }
        for (b = 0; b < B; b++) pt_infer_seq_free(inf, seqs[b]);
        free(toks), free(logits);
    }
    end = pt_infer_mp_get(inf);
    pt_infer_free(inf); /* the leader's ends the followers' loops */
    return end;
}

static int run_layout(int argc, char **argv) {
    char fm[8][16], bs[8][16], note[128] = "";
    int nf, nb, f, b, steps, ranks = 1;
    pt_ctx *ctx;
    pt_gpt *m;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    if (argc < 6) {
        fprintf(stderr, "usage: bench_infer_layout layout MODEL TP PP THREADS [formats [batches [steps]]]\n");
        return 2;
    }
    g_model = argv[2];
    if (!model_cfg(g_model, &g_cfg)) {
        fprintf(stderr, "bench_infer_layout: unknown model '%s': expected gpt2-124m or tiny\n", g_model);
        return 2;
    }
    g_tp = atoi(argv[3]), g_pp = atoi(argv[4]), g_threads = atoi(argv[5]);
    if (g_tp < 1 || g_pp < 1 || g_threads < 1) {
        fprintf(stderr, "bench_infer_layout: TP %s, PP %s, THREADS %s: expected positive integers\n", argv[3], argv[4], argv[5]);
        return 2;
    }
    if (getenv("INFER_LAYOUT_PP_GROUPS") && *getenv("INFER_LAYOUT_PP_GROUPS")) g_groups = atoi(getenv("INFER_LAYOUT_PP_GROUPS"));
    if (g_groups < 0) {
        fprintf(stderr, "bench_infer_layout: INFER_LAYOUT_PP_GROUPS=%s: expected 0 (ptrain's default, 2 x pp) or a positive count\n", getenv("INFER_LAYOUT_PP_GROUPS"));
        return 2;
    }
    nf = split_list(argc > 6 ? argv[6] : "f32,q8_0", fm, 8);
    nb = split_list(argc > 7 ? argv[7] : "1,16", bs, 8);
    steps = argc > 8 ? atoi(argv[8]) : 16;
    if (steps < 1) {
        fprintf(stderr, "bench_infer_layout: steps %s: expected a positive integer\n", argv[8]);
        return 2;
    }
    for (f = 0; f < nf; f++)
        if (pt_wtype_parse(fm[f]) < 0) {
            fprintf(stderr, "bench_infer_layout: unknown weight format '%s' (expected f32, f16, bf16, q8_0 or q4_0)\n", fm[f]);
            return 2;
        }
    for (b = 0; b < nb; b++)
        if (atoi(bs[b]) < 1 || atoi(bs[b]) > 64) {
            fprintf(stderr, "bench_infer_layout: batch '%s': expected 1..64\n", bs[b]);
            return 2;
        }
    if (g_tp * g_pp > 1) {
        pt_layout lay;
        char err[512];
        memset(&lay, 0, sizeof lay);
        lay.dp = 1, lay.tp = g_tp, lay.pp = g_pp;
        if (!(g_d = pt_dist_init(&argc, &argv, &lay, err, sizeof err))) {
            fprintf(stderr, "bench_infer_layout: the grid tp %d x pp %d: %s\n", g_tp, g_pp, err);
            return 1;
        }
        g_rank = pt_dist_rank(g_d), ranks = pt_dist_size(g_d);
        if (ncpu > 0 && (long)ranks * g_threads > ncpu) snprintf(note, sizeof note, "%d ranks x %d threads on %ld CPUs (oversubscribed)", ranks, g_threads, ncpu);
    }
    if (!(ctx = mk_ctx(g_d, g_threads))) die(NULL, "pt_init");
    if (!(m = rank_model(ctx, &g_cfg))) die(ctx, "the model");
    for (f = 0; f < nf; f++) {
        const pt_wtype wt = (pt_wtype)pt_wtype_parse(fm[f]);
        pt_gpt_weights *w = pt_gpt_weights_from(m, wt);
        double wb;
        if (!w) die(ctx, "pt_gpt_weights_from");
        wb = (double)pt_gpt_weights_bytes(w);
        for (b = 0; b < nb; b++) {
            const int B = atoi(bs[b]);
            pt_infer_mp pre, all, ld;
            double secs = 0, mine[3], got[3 * 256], share_max = 0, wmax = wb;
            int r;
            memset(&ld, 0, sizeof ld);
            pre = lifetime(ctx, w, B, 0, &ld, &secs);
            all = lifetime(ctx, w, B, steps, &ld, &secs);
            mine[0] = all.comm_s - pre.comm_s, mine[1] = all.step_s - pre.step_s, mine[2] = wb;
            if (g_rank == 0) mine[0] = ld.comm_s, mine[1] = ld.step_s; /* the leader's: measured around the timed steps */
            if (g_d) {
                if (ranks > 256) die(NULL, "more than 256 ranks");
                MPI_Gather(mine, 3, MPI_DOUBLE, got, 3, MPI_DOUBLE, 0, MPI_COMM_WORLD);
            } else
                memcpy(got, mine, sizeof mine);
            if (g_rank != 0) continue;
            for (r = 0; r < ranks; r++) {
                double sh = secs > 0 ? got[3 * r] / secs : 0;
                sh = sh < 0 ? 0 : sh > 1 ? 1 : sh; /* a difference of two runs: noise can push it past the ends */
                if (sh > share_max) share_max = sh;
                if (got[3 * r + 2] > wmax) wmax = got[3 * r + 2];
            }
            {
                const double ns = ld.steps > 0 ? (double)ld.steps : 1, share = ld.step_s > 0 ? ld.comm_s / ld.step_s : 0;
                char lay[32], grp[32] = "";
                if (g_pp > 1) snprintf(grp, sizeof grp, ",\"pp_groups\":%d", g_groups);
                if (g_tp == 1 && g_pp == 1) snprintf(lay, sizeof lay, "one");
                else if (g_pp == 1) snprintf(lay, sizeof lay, "tp%d", g_tp);
                else if (g_tp == 1) snprintf(lay, sizeof lay, "pp%d", g_pp);
                else snprintf(lay, sizeof lay, "tp%dxpp%d", g_tp, g_pp);
                printf("{\"bench\":\"infer_layout\",\"model\":\"%s\",\"layout\":\"%s\",\"tp\":%d,\"pp\":%d,\"ranks\":%d,\"threads\":%d,\"format\":\"%s\",\"batch\":%d,"
                       "\"steps\":%d,\"tokens_per_s\":%.2f,\"comm_share\":%.4f,\"comm_share_max\":%.4f,\"sums_per_step\":%.2f,\"sum_bytes_per_step\":%.0f,"
                       "\"p2p_per_step\":%.2f,\"p2p_bytes_per_step\":%.0f,\"gathers_per_step\":%.2f,\"gather_bytes_per_step\":%.0f,\"commands_per_step\":%.2f,"
                       "\"weight_bytes_max\":%.0f%s,\"load\":%.2f%s%s%s}\n",
                       g_model, lay, g_tp, g_pp, ranks, g_threads, fm[f], B, steps, secs > 0 ? (double)B * steps / secs : 0, share, share_max,
                       (double)ld.sums / ns, (double)ld.sum_bytes / ns, (double)ld.p2p / ns, (double)ld.p2p_bytes / ns, (double)ld.gathers / ns,
                       (double)ld.gather_bytes / ns, (double)ld.commands / ns, wmax, grp, bench_loadavg(), note[0] ? ",\"note\":\"" : "", note, note[0] ? "\"" : "");
                fflush(stdout);
            }
        }
        pt_gpt_weights_free(w);
    }
    pt_gpt_free(m);
    pt_shutdown(ctx);
    if (g_d) pt_dist_finalize(g_d);
    return 0;
}

/* the 2-rank sum of n floats three ways */
static int run_allreduce(int argc, char **argv) {
    pt_layout lay;
    char err[512];
    int n = argc > 2 ? atoi(argv[2]) : 768, reps = argc > 3 ? atoi(argv[3]) : 2000, r, k, i, peer;
    pt_ctx *ctx;
    pt_gpt *m;
    pt_gpt_weights *w;
    pt_infer *inf;
    pt_infer_desc d;
    MPI_Comm comm;
    float *buf, *base, *tmp, *red;
    double *t[3];
    static const char *const names[3] = {"ptrain", "mpi_allreduce", "sendrecv"};
    if (n < 64 || n % 64 || n > (1 << 20) || reps < 1) {
        fprintf(stderr, "bench_infer_layout allreduce: n %d (expected a multiple of 64, 64..2^20), reps %d (expected >= 1)\n", n, reps);
        return 2;
    }
    memset(&lay, 0, sizeof lay);
    lay.dp = 1, lay.tp = 2, lay.pp = 1;
    if (!(g_d = pt_dist_init(&argc, &argv, &lay, err, sizeof err))) {
        fprintf(stderr, "bench_infer_layout allreduce: needs mpirun -np 2: %s\n", err);
        return 1;
    }
    g_rank = pt_dist_rank(g_d);
    if (!(ctx = mk_ctx(g_d, 1))) die(NULL, "pt_init");
    memset(&g_cfg, 0, sizeof g_cfg);
    g_cfg.vocab = 64, g_cfg.max_seq = 16, g_cfg.layers = 1, g_cfg.width = n, g_cfg.heads = n / 64;
    if (!(m = pt_gpt_new(ctx, &g_cfg)) || !(w = pt_gpt_weights_from(m, PT_W_F32))) die(ctx, "the model");
    memset(&d, 0, sizeof d);
    d.max_seqs = 1;
    if (!(inf = pt_infer_new(ctx, w, &d))) die(ctx, "pt_infer_new");
    if (inf->ldc != n) die(NULL, "the TP sum's row stride is not n");
    comm = *(MPI_Comm *)pt_dist_comm(g_d, PT_COMM_TP);
    peer = 1 - pt_dist_coords(g_d).tp;
    buf = (float *)malloc(sizeof(float) * (size_t)n * 4), base = buf + n, tmp = base + n, red = tmp + n;
    /* the TP sum's scratch (the other rank's rows): pt_infer_step allocates it with the step's buffers; no
       step has run here, so it points at ours for the calls below */
    if (!inf->red) inf->red = red;
    for (k = 0; k < 3; k++) t[k] = (double *)malloc(sizeof(double) * (size_t)reps);
    if (!buf || !t[0] || !t[1] || !t[2]) die(NULL, "out of memory");
    for (i = 0; i < n; i++) base[i] = (float)((i * 37 + g_rank * 11) % 101) * 0.01f;
    for (r = -50; r < reps; r++) /* 50 warm-up rounds */
        for (k = 0; k < 3; k++) {
            double t0;
            memcpy(buf, base, sizeof(float) * (size_t)n);
            MPI_Barrier(comm);
            t0 = pt_time();
            if (k == 0) {
                if (!pt__inf_tp_sum(inf, buf, 1)) die(ctx, "pt__inf_tp_sum");
            } else if (k == 1) {
                MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_SUM, comm);
            } else {
                MPI_Sendrecv(buf, n, MPI_FLOAT, peer, 5, tmp, n, MPI_FLOAT, peer, 5, comm, MPI_STATUS_IGNORE);
                for (i = 0; i < n; i++) buf[i] += tmp[i];
            }
            if (r >= 0) t[k][r] = pt_time() - t0;
        }
    if (inf->red == red) inf->red = NULL;
    if (g_rank == 0) {
        for (k = 0; k < 3; k++)
            printf("{\"bench\":\"allreduce_small\",\"n\":%d,\"ranks\":2,\"path\":\"%s\",\"us\":%.2f,\"reps\":%d}\n", n, names[k], median(t[k], reps) * 1e6, reps);
        fflush(stdout);
        pt_infer_free(inf); /* ends the other rank's pt_infer_follow */
    } else {
        if (pt_infer_follow(inf) != PT_OK) die(ctx, "pt_infer_follow");
        pt_infer_free(inf);
    }
    for (k = 0; k < 3; k++) free(t[k]);
    free(buf);
    pt_gpt_weights_free(w);
    pt_gpt_free(m);
    pt_shutdown(ctx);
    pt_dist_finalize(g_d);
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "layout")) return run_layout(argc, argv);
    if (argc > 1 && !strcmp(argv[1], "allreduce")) return run_allreduce(argc, argv);
    fprintf(stderr, "usage: bench_infer_layout layout MODEL TP PP THREADS [formats [batches [steps]]]\n"
                    "       bench_infer_layout allreduce [n [reps]]   (under mpirun -np 2)\n");
    return 2;
}
