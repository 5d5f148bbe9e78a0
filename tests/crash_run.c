/* crash_run.c - the training run of the crash-consistency trials (tests/crash_test.sh).
   A tiny GPT (vocab 32, 1 layer, width 16, dropout 0.1, AdamW) trains NSTEPS steps of a batch drawn
   from a registered RNG state; data parallel over the ranks with ZeRO-1 when built with mpicc
   -DPTRAIN_MPI under mpirun. After every step it saves a checkpoint (keep_last 2) into TRIAL/ckpt:
   synchronous, asynchronous (pt_ckpt_poll each step) or mixed (odd steps asynchronous), and every
   third step the same step once more (a synchronous save of the step just saved: the replacement of
   a committed checkpoint). Rank r writes its pid to TRIAL/pid.r, rank 0 TRIAL/started when the loop
   starts, so that the script can kill -9 the ranks at a random moment.

   crash_run TRIAL NSTEPS MODE [resume]   MODE sync|async|mix|none (none: no saves, the reference).
                                          resume: pt_ckpt_load TRIAL/ckpt first (it must load, or
                                          find no step directory at all: from step 0).
                                          Prints (rank 0) "start K", "loss S HEX" per step (the loss
                                          bits), "hash HEX" (CRC32C of the parameters) at the end.
   crash_run --check TRIAL                what a kill left: "latest K" (-1: none), the directory latest
                                          resolves to verifies and holds step K, and steps K-1, K (the
                                          retention window, keep_last 2) are there and verify.
                                          Exit 0 when all holds.
   crash_run --stats TRIAL                asynchronous saves held in flight (PTRAIN_CKPT_DELAY_MS) while
                                          pt_ckpt_stats_get is called (a ThreadSanitizer build: no race).
   Defines PTRAIN_TEST_HOOKS (PTRAIN_CKPT_DELAY_MS). */
#define _POSIX_C_SOURCE 200809L
#define PTRAIN_TEST_HOOKS
#define PTRAIN_IMPLEMENTATION
#include "ptrain.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define GB 4
#define T 8

typedef struct data_state {
    uint64_t pos;
    pt_rng rng;
} data_state;

static pt_dist *D;
static int RANK, DPN = 1;
static pt_ctx *CTX;
static pt_gpt *M;
static pt_optim *O;
static pt_dp *DP;
static pt_graph *G;
static data_state DS;

static void quiet(void *user, int level, const char *msg) {
    (void)user;
    if (level >= PT_LOG_ERROR) fprintf(stderr, "%s\n", msg);
}

static int open_run(void) {
    pt_desc desc;
    pt_optim_desc od;
    pt_gpt_config cfg;
    memset(&desc, 0, sizeof desc);
    desc.seed = 3, desc.dist = D, desc.threads = 1, desc.log = quiet;
    if (!(CTX = pt_init(&desc))) return 0;
    memset(&cfg, 0, sizeof cfg);
    cfg.vocab = 32, cfg.max_seq = T, cfg.layers = 1, cfg.width = 16, cfg.heads = 2, cfg.dropout = 0.1f;
    memset(&od, 0, sizeof od);
    od.kind = PT_OPTIM_ADAMW, od.lr = 1e-2f, od.weight_decay = 0.1f, od.clip_norm = 1.0f;
    if (!(M = pt_gpt_new(CTX, &cfg)) || !(O = pt_optim_new(CTX, &od))) return 0;
    if (DPN > 1 && (!(DP = pt_dp_new(CTX, D, 0)) || pt_dp_zero(DP, O, 1) != PT_OK)) return 0;
    DS.pos = 0, DS.rng = pt_rng_seed(17);
    if (pt_state_register(CTX, "data", &DS, sizeof DS) != PT_OK) return 0;
    return (G = pt_graph_new(CTX)) != NULL;
}
static void close_run(void) {
    if (DP) pt_dp_free(DP);
    if (M) pt_gpt_free(M);
    if (CTX) pt_shutdown(CTX);
}
/* one step on this rank's rows of the next global batch: its loss (NAN on error) */
static float step(void) {
    int32_t ids[GB * T], tgt[GB * T];
    int bl = GB / DPN, r = D ? pt_dist_coords(D).dp : 0, i;
    pt_tensor *x, *y, *loss;
    float l;
    for (i = 0; i < GB * T; i++) ids[i] = (int32_t)(pt_rng_u32(&DS.rng) % 32), tgt[i] = (int32_t)(pt_rng_u32(&DS.rng) % 32);
    DS.pos++;
    pt_graph_reset(G);
    pt_graph_set_sample_offset(G, pt_optim_steps(O) * GB + r * bl);
    x = pt_tensor_new(G, PT_I32, 2, bl, T, 0, 0);
    y = pt_tensor_new(G, PT_I32, 2, bl, T, 0, 0);
    if (!x || !y) return NAN;
    pt_tensor_write(x, ids + r * bl * T);
    pt_tensor_write(y, tgt + r * bl * T);
    if (!(loss = pt_gpt_loss(G, M, x, y))) return NAN;
    l = pt_item(loss);
    pt_zero_grad(CTX);
    if (DP) pt_dp_begin_step(DP, 1);
    if (pt_backward(G, loss) != PT_OK || (DP && pt_dp_finish(DP) != PT_OK)) return NAN;
    pt_optim_step(O, 1e-2f);
    return l;
}
static void touch(const char *path, long v) {
    FILE *f = fopen(path, "w");
    if (f) fprintf(f, "%ld\n", v), fclose(f);
}

/* the checks after a kill (one process, no MPI) */
static int check(const char *trial) {
    char ck[1100], p[1300], err[1024], dir[1300];
    int64_t k = -1, j;
    FILE *f;
    int bad = 0;
    pt_ckpt_info in;
    snprintf(ck, sizeof ck, "%s/ckpt", trial);
    snprintf(p, sizeof p, "%s/latest", ck);
    if ((f = fopen(p, "r")) != NULL) {
        long long x;
        if (fscanf(f, "step_%lld", &x) == 1) k = x;
        fclose(f);
    }
    printf("latest %lld\n", (long long)k);
    if (k < 0) return 0; /* killed before the first commit: nothing to hold */
    if (pt_ckpt_step_dir(ck, dir, sizeof dir) != PT_OK || pt_ckpt_verify(dir, err, sizeof err) != PT_OK) {
        printf("FAIL latest names step %lld: %s does not verify: %s\n", (long long)k, dir, err);
        return 1;
    }
    if (pt_ckpt_info_read(dir, &in, err, sizeof err) != PT_OK || in.step != k) {
        printf("FAIL %s: not step %lld (%s)\n", dir, (long long)k, err);
        return 1;
    }
    pt_ckpt_info_free(&in);
    for (j = k > 1 ? k - 1 : 1; j <= k; j++) { /* the retention window: keep_last 2 */
        snprintf(p, sizeof p, "%s/step_%09lld", ck, (long long)j);
        if (j == k) snprintf(p, sizeof p, "%s", dir); /* step_K or, mid-replacement, .old.step_K */
        if (pt_ckpt_verify(p, err, sizeof err) != PT_OK) printf("FAIL committed step %lld of the retention window: %s\n", (long long)j, err), bad = 1;
    }
    printf("resolved %s\n", strrchr(dir, '/') + 1);
    return bad;
}

int main(int argc, char **argv) {
    char err[512], ck[1100], p[1300];
    int64_t start = 0, n, s;
    const char *mode;
    int i, stats;
    pt_ckpt_opts co;
    if (argc == 3 && !strcmp(argv[1], "--check")) return check(argv[2]);
    stats = argc == 3 && !strcmp(argv[1], "--stats");
    if (argc < 4 && !stats) {
        fprintf(stderr, "usage: crash_run TRIAL NSTEPS sync|async|mix|none [resume] | --check TRIAL | --stats TRIAL\n");
        return 2;
    }
    D = pt_dist_init(&argc, &argv, NULL, err, sizeof err);
#ifdef PTRAIN_MPI
    if (!D) {
        fprintf(stderr, "pt_dist_init: %s\n", err);
        return 1;
    }
#endif
    RANK = pt_dist_rank(D);
    if (D) DPN = pt_dist_layout(D).dp;
    snprintf(ck, sizeof ck, "%s/ckpt", argv[stats ? 2 : 1]);
    n = stats ? 6 : atoll(argv[2]);
    mode = stats ? "async" : argv[3];
    if (!open_run()) {
        fprintf(stderr, "crash_run: setup failed: %s\n", CTX ? pt_error(CTX) : "no context");
        return 1;
    }
    memset(&co, 0, sizeof co);
    co.keep_last = 2;
    if (argc > 4 && !strcmp(argv[4], "resume")) {
        pt_status st = pt_ckpt_load(CTX, O, ck, &start);
        if (st == PT_ERR_IO && strstr(pt_error(CTX), "no checkpoint")) start = 0, pt_error_clear(CTX); /* killed before a step directory */
        else if (st != PT_OK) {
            fprintf(stderr, "crash_run: resume: %s\n", pt_error(CTX));
            return 1;
        }
    }
    snprintf(p, sizeof p, "%s/pid.%d", argv[stats ? 2 : 1], RANK);
    touch(p, (long)getpid());
    pt_dist_agree(D, 1);
    if (RANK == 0) {
        snprintf(p, sizeof p, "%s/started", argv[stats ? 2 : 1]);
        touch(p, 1);
        printf("start %lld\n", (long long)start);
        fflush(stdout);
    }
    for (s = start; s < n; s++) {
        float l = step();
        uint32_t b;
        int async = !strcmp(mode, "async") || (!strcmp(mode, "mix") && (s + 1) % 2);
        memcpy(&b, &l, 4);
        if (l != l) {
            fprintf(stderr, "crash_run: step %lld: %s\n", (long long)s, pt_error(CTX));
            return 1;
        }
        if (RANK == 0) printf("loss %lld %08x\n", (long long)(s + 1), b), fflush(stdout);
        if (!strcmp(mode, "none")) continue;
        co.async = async;
        if (pt_ckpt_save(CTX, O, ck, -1, &co) != PT_OK) {
            fprintf(stderr, "crash_run: save of step %lld: %s\n", (long long)(s + 1), pt_error(CTX));
            return 1;
        }
        if ((s + 1) % 3 == 0) { /* the same step again, replacing the committed one */
            co.async = 0;
            if (pt_ckpt_save(CTX, O, ck, -1, &co) != PT_OK) {
                fprintf(stderr, "crash_run: second save of step %lld: %s\n", (long long)(s + 1), pt_error(CTX));
                return 1;
            }
        }
        for (i = 0; stats && i < 2000 && pt_ckpt_pending(CTX) >= 0; i++) { /* reads the stats while the writer runs */
            pt_ckpt_stats st = pt_ckpt_stats_get(CTX);
            struct timespec ts = {0, 100000L};
            if (st.write_s < 0) return 1;
            nanosleep(&ts, NULL);
            if (i % 50 == 49 && pt_ckpt_poll(CTX) != PT_OK) return 1;
        }
        if (pt_ckpt_poll(CTX) != PT_OK) {
            fprintf(stderr, "crash_run: poll: %s\n", pt_error(CTX));
            return 1;
        }
    }
    if (pt_ckpt_wait(CTX) != PT_OK) {
        fprintf(stderr, "crash_run: wait: %s\n", pt_error(CTX));
        return 1;
    }
    if (RANK == 0) {
        pt_tensor ps = pt_param_slab(CTX);
        printf("hash %08x\n", pt_crc32c(0, pt_f32(&ps), (size_t)pt_numel(&ps) * 4));
        if (stats) printf("stats ok: last save step %lld, write %.4f s\n", (long long)pt_ckpt_stats_get(CTX).step, pt_ckpt_stats_get(CTX).write_s);
    }
    close_run();
    pt_dist_finalize(D);
    return 0;
}
