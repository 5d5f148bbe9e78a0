/* fuzz_shard.c - libFuzzer harness of the token shard reader: pt_shard_info_read, then a
   pt_loader over the file (no prefetch thread) pulling a few batches, its state taken and set
   again. Input: one byte of loader settings, then the shard file. The settings byte: bits 0-2
   T - 1, bits 3-4 B - 1 (per rank), bit 5 shuffle, bit 6 the file listed twice (two shards), bit
   7 two DP ranks (this one rank 1). Checked: y is x shifted by one in every row. */
#define _POSIX_C_SOURCE 200809L
#define PTRAIN_IMPLEMENTATION
#include "../../ptrain.h"
#include "fuzz_util.h"

FZ_ENTRY(shard) {
    const char *dir = fz_dir();
    char path[700];
    const char *paths[2];
    pt_ctx *ctx = fz_ctx();
    pt_shard_info info;
    pt_loader_desc d;
    pt_loader *L;
    int b0 = size ? data[0] : 0, k;
    int64_t T = 1 + (b0 & 7), B = 1 + ((b0 >> 3) & 3), ranks = 1 + (b0 >> 7), i, t;
    int32_t x[8 * 4], y[8 * 4];
    if (!fz_write(path, sizeof path, dir, "shard.bin", size ? data + 1 : data, size ? size - 1 : 0)) abort();
    fz_note("pt_shard_info_read", pt_shard_info_read(ctx, path, &info), pt_error(ctx));
    pt_error_clear(ctx);
    memset(&d, 0, sizeof d);
    paths[0] = paths[1] = path;
    d.paths = paths, d.npaths = 1 + ((b0 >> 6) & 1), d.batch = B * ranks, d.seq = T, d.rank = (int32_t)(ranks - 1), d.ranks = (int32_t)ranks;
    d.seed = 5, d.shuffle = (b0 >> 5) & 1, d.prefetch = 0;
    L = pt_loader_new(ctx, &d);
    fz_note("pt_loader_new", L != NULL, pt_error(ctx));
    if (!L) return 0;
    for (k = 0; k < 4; k++) {
        pt_loader_state s;
        pt_status st = pt_loader_next(L, x, y);
        fz_note("pt_loader_next", st, pt_error(ctx));
        if (st != PT_OK) break;
        for (i = 0; i < B; i++)
            for (t = 0; t + 1 < T; t++) FZ_ASSERT(y[i * T + t] == x[i * T + t + 1], "batch %d row %lld: y[%lld] != x[%lld]", k, (long long)i, (long long)t, (long long)t + 1);
        s = pt_loader_get_state(L);
        if (k == 1) FZ_ASSERT(pt_loader_set_state(L, &s) == PT_OK, "its own state refused: %s", pt_error(ctx));
    }
    (void)pt_loader_stats_get(L);
    pt_loader_free(L);
    return 0;
}
