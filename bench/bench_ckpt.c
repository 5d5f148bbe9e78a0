/* bench_ckpt.c - checkpoint speed (>>ckpt). Usage: bench_ckpt [A|B|C] [DIR] [PAIRS] (default A,
   build/bench_ckpt_dir, 3). Prints JSON lines:
     {"bench":"crc32c","gbs":..}      pt_crc32c over 64 MiB (SSE4.2 when the CPU has it)
     {"bench":"ckpt","mode":"async"|"sync","config":..,"bytes":..,"step_slowdown":..,"write_gbs":..,"disk_gbs":..,...}
        PAIRS rounds, each of three interleaved runs of STEPS (20) training steps of the GPT config on
        one context: no save, an asynchronous save every EVERY (5) steps (pt_ckpt_poll each step, the
        last one waited for inside the run), a synchronous save every EVERY steps; the order rotates
        per round. step_slowdown = median over rounds of (run time / the round's no-save run time - 1).
        write_gbs: bytes / median write time, the background write + fsync of the rank's file (async,
        pt_ckpt_stats write_s) or the whole pt_ckpt_save call (sync, "seconds"). disk_gbs: a plain
        sequential write + fsync of the same bytes after each run (same process, same disk), median;
        ratio: median over rounds of (that plain write's time / the median write time of the run
        just before it), i.e. write bandwidth / disk bandwidth measured close together. blocked_share: median over rounds of the time spent inside
        pt_ckpt_save / poll / wait during the run over the no-save run time (the direct cost, free of
        the step-time noise of a shared machine; it leaves out the writer thread's CPU contention).
        blocked_s (async): the median time a save call held the loop (snapshot + CRC32C)
     {"bench":"resume","config":..,"seconds_to_first_step":..,"load_s":..}
        a fresh context: pt_ckpt_load (every CRC checked) and the first training step after it
   Build: cc -O3 -march=native -fopenmp -I. bench/bench_ckpt.c -lm */
#define _POSIX_C_SOURCE 200809L
#define PTRAIN_IMPLEMENTATION
#include "ptrain.h"
#include "bench_util.h"
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct model {
    pt_ctx *ctx;
    pt_gpt *m;
    pt_optim *o;
    pt_graph *g;
    int B, T;
} model;

static int model_open(model *r, const char *which) {
    pt_gpt_config cfg;
    pt_desc d;
    pt_optim_desc od;
    memset(r, 0, sizeof *r);
    memset(&cfg, 0, sizeof cfg);
    if (!strcmp(which, "A")) cfg.vocab = 256, cfg.layers = 4, cfg.width = 256, cfg.heads = 8, r->B = 8, r->T = 256;
    else if (!strcmp(which, "B")) cfg.vocab = 512, cfg.layers = 6, cfg.width = 384, cfg.heads = 6, r->B = 8, r->T = 256;
    else if (!strcmp(which, "C")) cfg.vocab = 50257, cfg.vocab_padded = 50304, cfg.layers = 12, cfg.width = 768, cfg.heads = 12, r->B = 4, r->T = 64;
    else return 0;
    cfg.max_seq = !strcmp(which, "C") ? 1024 : r->T;
    memset(&d, 0, sizeof d);
    d.seed = 1;
    if (!(r->ctx = pt_init(&d)) || !(r->m = pt_gpt_new(r->ctx, &cfg))) return 0;
    memset(&od, 0, sizeof od);
    od.kind = PT_OPTIM_ADAMW, od.lr = 1e-4f, od.weight_decay = 0.1f, od.clip_norm = 1.0f;
    return (r->o = pt_optim_new(r->ctx, &od)) != NULL && (r->g = pt_graph_new(r->ctx)) != NULL;
}
static int model_step(model *r) {
    int n = r->B * r->T, i;
    int32_t *ids = (int32_t *)malloc(sizeof(int32_t) * (size_t)n);
    pt_tensor *loss;
    for (i = 0; i < n; i++) ids[i] = (int32_t)((i * 7 + 3) % 256);
    loss = gpt_batch_loss(r->g, r->m, ids, ids, r->B, r->T);
    free(ids);
    pt_zero_grad(r->ctx);
    if (!loss || pt_backward(r->g, loss) != PT_OK) return 0;
    pt_optim_step(r->o, 1e-4f);
    return 1;
}
static void model_close(model *r) {
    pt_gpt_free(r->m);
    pt_shutdown(r->ctx);
}

#define STEPS 20
#define EVERY 5
#define MAXR 16
enum { NOSAVE, ASYNC, SYNC };

/* a plain sequential write of bytes with fsync, in seconds (-1 on failure) */
static double plain_write(const char *dir, const unsigned char *buf, int64_t bytes) {
    char path[1200];
    struct timespec ts = {0, 100000000L}; /* let the previous run's background deletion finish */
    double t0;
    int fd;
    nanosleep(&ts, NULL);
    snprintf(path, sizeof path, "%s/plain.bin", dir);
    t0 = pt_time();
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || write(fd, buf, (size_t)bytes) != (ssize_t)bytes || fsync(fd) != 0) return -1;
    close(fd);
    t0 = pt_time() - t0;
    unlink(path);
    return t0;
}

int main(int argc, char **argv) {
    const char *which = argc > 1 ? argv[1] : "A", *dir = argc > 2 ? argv[2] : "build/bench_ckpt_dir";
    int pairs = argc > 3 ? atoi(argv[3]) : 3;
    static const char *names[3] = {"none", "async", "sync"};
    char path[1200];
    model a, b;
    pt_ckpt_opts opts;
    double t0, crc_s, load_s, step_s, run_s[MAXR][3], in_s[MAXR][3], share[2][MAXR], slow[2][MAXR], rr[2][MAXR], disk[3 * MAXR], wr[2][4 * MAXR], blocked[4 * MAXR];
    int64_t bytes = 0, step, saved = 0;
    int i, k, p, mode, ndisk = 0, nwr[2] = {0, 0}, nblocked = 0;
    unsigned char *buf;
    size_t n = (size_t)64 << 20;
    if (pairs < 1 || pairs > MAXR) pairs = 3;
    /* CRC32C throughput */
    buf = (unsigned char *)malloc(n);
    for (i = 0; i < (int)n; i++) buf[i] = (unsigned char)(i * 131);
    t0 = pt_time();
    (void)pt_crc32c(0, buf, n);
    crc_s = pt_time() - t0;
    printf("{\"bench\":\"crc32c\",\"gbs\":%.3f}\n", (double)n / crc_s / 1e9);
    fflush(stdout);
    free(buf);
    buf = NULL;

    if (!model_open(&a, which) || !model_step(&a)) {
        fprintf(stderr, "bench_ckpt: cannot build GPT config '%s' (A, B or C)\n", which);
        return 1;
    }
    memset(&opts, 0, sizeof opts);
    opts.keep_last = 1;
    /* rounds of three interleaved runs: no save, async saves, sync saves (order rotated) */
    for (p = 0; p < pairs; p++) {
        for (k = 0; k < 3; k++) {
            mode = (k + p) % 3;
            int first = mode == NOSAVE ? 0 : nwr[mode - 1];
            opts.async = mode == ASYNC;
            in_s[p][mode] = 0;
            t0 = pt_time();
            for (i = 1; i <= STEPS; i++) {
                if (!model_step(&a)) return 1;
                if (mode == ASYNC) {
                    int64_t was = pt_ckpt_pending(a.ctx);
                    double tp = pt_time();
                    if (pt_ckpt_poll(a.ctx) != PT_OK) break;
                    in_s[p][mode] += pt_time() - tp;
                    if (was >= 0 && pt_ckpt_pending(a.ctx) < 0 && nwr[0] < 4 * MAXR) wr[0][nwr[0]++] = pt_ckpt_stats_get(a.ctx).write_s;
                }
                if (mode != NOSAVE && i % EVERY == 0) {
                    double ts = pt_time();
                    if (pt_ckpt_save(a.ctx, a.o, dir, ++saved, &opts) != PT_OK) break;
                    ts = pt_time() - ts;
                    in_s[p][mode] += ts;
                    if (mode == SYNC && nwr[1] < 4 * MAXR) wr[1][nwr[1]++] = ts;
                    if (mode == ASYNC && nblocked < 4 * MAXR) blocked[nblocked++] = ts;
                }
            }
            if (mode == ASYNC) {
                int64_t was = pt_ckpt_pending(a.ctx);
                double tw = pt_time();
                if (pt_ckpt_wait(a.ctx) != PT_OK) i = 0;
                in_s[p][mode] += pt_time() - tw;
                if (was >= 0 && nwr[0] < 4 * MAXR) wr[0][nwr[0]++] = pt_ckpt_stats_get(a.ctx).write_s;
            }
            if (i <= STEPS) {
                fprintf(stderr, "bench_ckpt: %s save failed: %s\n", names[mode], pt_error(a.ctx));
                return 1;
            }
            run_s[p][mode] = pt_time() - t0;
            if (mode != NOSAVE) {
                bytes = pt_ckpt_stats_get(a.ctx).bytes;
                if (!buf && !(buf = (unsigned char *)malloc((size_t)bytes + 1))) return 1;
                memset(buf, p + 1, (size_t)bytes);
                if ((disk[ndisk++] = plain_write(dir, buf, bytes)) < 0) {
                    fprintf(stderr, "bench_ckpt: plain write in %s failed\n", dir);
                    return 1;
                }
                { /* this round's ratio: the plain write against the median write of the run just before it */
                    double tmp[4 * MAXR];
                    int m = nwr[mode - 1] - first;
                    memcpy(tmp, wr[mode - 1] + first, (size_t)m * sizeof *tmp);
                    rr[mode - 1][p] = m > 0 ? disk[ndisk - 1] / median(tmp, m) : 0;
                }
            }
        }
        slow[0][p] = run_s[p][ASYNC] / run_s[p][NOSAVE] - 1, slow[1][p] = run_s[p][SYNC] / run_s[p][NOSAVE] - 1;
        share[0][p] = in_s[p][ASYNC] / run_s[p][NOSAVE], share[1][p] = in_s[p][SYNC] / run_s[p][NOSAVE];
        fprintf(stderr, "round %d: none %.3f s, async %.3f s, sync %.3f s\n", p, run_s[p][NOSAVE], run_s[p][ASYNC], run_s[p][SYNC]);
    }
    free(buf);
    {
        double d = median(disk, ndisk), none[MAXR];
        for (p = 0; p < pairs; p++) none[p] = run_s[p][NOSAVE];
        step_s = median(none, pairs) / STEPS;
        for (mode = ASYNC; mode <= SYNC; mode++) {
            double w = median(wr[mode - 1], nwr[mode - 1]), s = median(slow[mode - 1], pairs);
            printf("{\"bench\":\"ckpt\",\"mode\":\"%s\",\"config\":\"%s\",\"bytes\":%lld,\"steps\":%d,\"every\":%d,\"pairs\":%d,\"step_s\":%.4f,"
                   "\"step_slowdown\":%.4f,\"blocked_share\":%.4f,\"seconds\":%.4f,\"write_gbs\":%.3f,\"disk_gbs\":%.3f,\"ratio\":%.2f",
                   names[mode], which, (long long)bytes, STEPS, EVERY, pairs, step_s, s, median(share[mode - 1], pairs), w, (double)bytes / w / 1e9, (double)bytes / d / 1e9,
                   median(rr[mode - 1], pairs));
            if (mode == ASYNC) printf(",\"blocked_s\":%.4f", median(blocked, nblocked));
            printf("}\n");
            fflush(stdout);
        }
    }
    model_close(&a);
    /* resume: a fresh context loads the newest checkpoint and takes a step */
    if (!model_open(&b, which)) return 1;
    t0 = pt_time();
    if (pt_ckpt_load(b.ctx, b.o, dir, &step) != PT_OK) {
        fprintf(stderr, "bench_ckpt: %s\n", pt_error(b.ctx));
        return 1;
    }
    load_s = pt_time() - t0;
    if (!model_step(&b)) return 1;
    step_s = pt_time() - t0;
    printf("{\"bench\":\"resume\",\"config\":\"%s\",\"seconds_to_first_step\":%.4f,\"load_s\":%.4f}\n", which, step_s, load_s);
    fflush(stdout);
    model_close(&b);
    snprintf(path, sizeof path, "rm -rf '%s'", dir);
    if (system(path) != 0) fprintf(stderr, "bench_ckpt: could not remove %s\n", dir);
    return 0;
}
