/* bench_ckpt.c - checkpoint speed (>>ckpt). Usage: bench_ckpt [A|B|C] [DIR] (default A, build/bench_ckpt_dir).
   Prints JSON lines:
     {"bench":"crc32c","gbs":..}                              software CRC32C over 64 MiB
     {"bench":"ckpt","mode":"sync","config":..,"bytes":..,"seconds":..,"write_gbs":..,"disk_gbs":..}
        a synchronous pt_ckpt_save of the GPT config (parameters + AdamW moments), median of 5, and
        disk_gbs: a plain sequential write of the same bytes with fsync, interleaved with them, median of 5
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
    pt_tensor *x, *y, *loss;
    for (i = 0; i < n; i++) ids[i] = (int32_t)((i * 7 + 3) % 256);
    pt_graph_reset(r->g);
    x = pt_tensor_new(r->g, PT_I32, 2, r->B, r->T, 0, 0), y = pt_tensor_new(r->g, PT_I32, 2, r->B, r->T, 0, 0);
    pt_tensor_write(x, ids), pt_tensor_write(y, ids);
    free(ids);
    loss = pt_gpt_loss(r->g, r->m, x, y);
    pt_zero_grad(r->ctx);
    if (!loss || pt_backward(r->g, loss) != PT_OK) return 0;
    pt_optim_step(r->o, 1e-4f);
    return 1;
}
static void model_close(model *r) {
    pt_gpt_free(r->m);
    pt_shutdown(r->ctx);
}

int main(int argc, char **argv) {
    const char *which = argc > 1 ? argv[1] : "A", *dir = argc > 2 ? argv[2] : "build/bench_ckpt_dir";
    char path[1200];
    model a, b;
    pt_ckpt_opts keep;
    double ts[5], td[5], t0, crc_s, load_s, step_s;
    int64_t bytes = 0, step;
    int i, k;
    unsigned char *buf;
    size_t n = (size_t)64 << 20;
    /* CRC32C throughput */
    buf = (unsigned char *)malloc(n);
    for (i = 0; i < (int)n; i++) buf[i] = (unsigned char)(i * 131);
    t0 = pt_time();
    (void)pt_crc32c(0, buf, n);
    crc_s = pt_time() - t0;
    printf("{\"bench\":\"crc32c\",\"gbs\":%.3f}\n", (double)n / crc_s / 1e9);
    free(buf);
    buf = NULL;
    memset(&keep, 0, sizeof keep);
    keep.keep_last = 1;

    if (!model_open(&a, which) || !model_step(&a)) {
        fprintf(stderr, "bench_ckpt: cannot build GPT config '%s' (A, B or C)\n", which);
        return 1;
    }
    /* interleaved: a checkpoint save, then a plain sequential write of the same bytes with fsync */
    for (k = 0; k < 5; k++) {
        struct stat sb;
        int fd;
        t0 = pt_time();
        if (pt_ckpt_save(a.ctx, a.o, dir, k + 1, &keep) != PT_OK) {
            fprintf(stderr, "bench_ckpt: %s\n", pt_error(a.ctx));
            return 1;
        }
        ts[k] = pt_time() - t0;
        snprintf(path, sizeof path, "%s/step_%09d/rank_00000.bin", dir, k + 1);
        bytes = stat(path, &sb) == 0 ? (int64_t)sb.st_size : 0;
        if (!buf && !(buf = (unsigned char *)malloc((size_t)bytes + 1))) return 1;
        memset(buf, k + 1, (size_t)bytes);
        snprintf(path, sizeof path, "%s/plain.bin", dir);
        t0 = pt_time();
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0 || write(fd, buf, (size_t)bytes) != (ssize_t)bytes || fsync(fd) != 0) {
            fprintf(stderr, "bench_ckpt: plain write of %s failed\n", path);
            return 1;
        }
        close(fd);
        td[k] = pt_time() - t0;
        unlink(path);
    }
    free(buf);
    {
        double s = median(ts, 5), d = median(td, 5);
        printf("{\"bench\":\"ckpt\",\"mode\":\"sync\",\"config\":\"%s\",\"bytes\":%lld,\"seconds\":%.4f,\"write_gbs\":%.3f,\"disk_gbs\":%.3f}\n", which,
               (long long)bytes, s, (double)bytes / s / 1e9, (double)bytes / d / 1e9);
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
    model_close(&b);
    snprintf(path, sizeof path, "rm -rf '%s'", dir);
    if (system(path) != 0) fprintf(stderr, "bench_ckpt: could not remove %s\n", dir);
    return 0;
}
