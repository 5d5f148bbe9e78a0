/* bench_data.c - throughput of the token loader (>>data) on config A's batch (B 8, T 256).
   Build: cc -O3 -march=native -I. bench/bench_data.c -o build/bench_data -lm
   Usage: bench_data [DIR]   (DIR for the temporary shards, default build/bench_data_dir; removed after)
   Writes 8 shards of 4M byte-level tokens (uint16, ptrain layout), then reads shuffled batches with the
   prefetch thread as fast as it can: {"bench":"loader","tokens_per_s":..}; wait_per_batch_s is the
   mean data wait of pt_loader_next when the consumer spends 1 ms per batch (a step), ~0 when the
   loader keeps up; tokens_per_s_sync reads in pt_loader_next without the thread. */
#define PTRAIN_IMPLEMENTATION
#include "ptrain.h"
#include "bench/bench_util.h"

#define NSH 8
#define NTOK (4 << 20)

static double run(pt_ctx *ctx, const char *const *paths, int prefetch, double work_s, int batches, double *wait) {
    pt_loader_desc d;
    pt_loader *L;
    static int32_t x[8 * 256], y[8 * 256];
    double t0, t;
    int i;
    memset(&d, 0, sizeof d);
    d.paths = paths, d.npaths = NSH, d.batch = 8, d.seq = 256, d.shuffle = 1, d.seed = 1, d.prefetch = prefetch;
    if (!(L = pt_loader_new(ctx, &d))) return -1;
    pt_loader_next(L, x, y); /* the thread starts, the first shard maps */
    t0 = pt_time();
    for (i = 0; i < batches; i++) {
        if (pt_loader_next(L, x, y) != PT_OK) return -1;
        if (work_s > 0)
            for (t = pt_time(); pt_time() - t < work_s;) {
            }
    }
    t = pt_time() - t0;
    if (wait) {
        pt_loader_stats s = pt_loader_stats_get(L);
        *wait = (s.wait_s - 0.0) / (double)s.batches;
    }
    pt_loader_free(L);
    return (double)batches * 8 * 256 / t;
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "build/bench_data_dir";
    static char names[NSH][512];
    const char *paths[NSH];
    uint32_t *tok = (uint32_t *)malloc(sizeof(uint32_t) * NTOK);
    pt_ctx *ctx = pt_init(NULL);
    pt_rng r = pt_rng_seed(3);
    double tps[5], sync[3], wait = 0, med, med_sync;
    int s, i;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
    if (!ctx || !tok || system(cmd) != 0) return 1;
    for (s = 0; s < NSH; s++) {
        for (i = 0; i < NTOK; i++) tok[i] = pt_rng_u32(&r) & 255u;
        snprintf(names[s], sizeof names[s], "%s/bench_%d.bin", dir, s);
        paths[s] = names[s];
        if (pt_shard_write(ctx, names[s], PT_SHARD_PTRAIN, tok, NTOK, 256) != PT_OK) return 1;
    }
    for (i = 0; i < 5; i++) tps[i] = run(ctx, paths, 4, 0, 4000, NULL);
    for (i = 0; i < 3; i++) sync[i] = run(ctx, paths, 0, 0, 4000, NULL);
    run(ctx, paths, 4, 1e-3, 500, &wait);
    med = median(tps, 5), med_sync = median(sync, 3);
    printf("{\"bench\":\"loader\",\"B\":8,\"T\":256,\"shards\":%d,\"tokens_per_s\":%.0f,\"tokens_per_s_sync\":%.0f,\"wait_per_batch_s\":%.2e}\n", NSH, med,
           med_sync, wait);
    fflush(stdout);
    for (s = 0; s < NSH; s++) remove(names[s]);
    free(tok);
    pt_shutdown(ctx);
    return med > 0 ? 0 : 1;
}
