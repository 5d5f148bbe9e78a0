/* fuzz_idx.c - libFuzzer harness of the loader's IDX path (PT_LOADER_IDX: LeCun's format, as
   MNIST ships it): pt_loader_new on a record file and an optional label file, then a few batches
   through pt_loader_next_records and pt_loader_next_bytes (no prefetch thread). Input: one byte
   of settings, then the record file, then (optional) FZ_SEP and the label file. The settings byte:
   bits 0-1 B - 1 (per rank), bit 2 shuffle, bit 3 classes = 10 (labels checked on open), bit 4
   two DP ranks (this one rank 1). */
#define _POSIX_C_SOURCE 200809L
#define PTRAIN_IMPLEMENTATION
#include "../../ptrain.h"
#include "fuzz_util.h"

FZ_ENTRY(idx) {
    const char *dir = fz_dir();
    char rec[700], lab[700];
    const uint8_t *p2;
    size_t n1, n2;
    pt_ctx *ctx = fz_ctx();
    pt_loader_desc d;
    pt_loader *L;
    int b0 = size ? data[0] : 0, k;
    int64_t B = 1 + (b0 & 3), ranks = 1 + ((b0 >> 4) & 1);
    if (size) data++, size--;
    fz_split(data, size, &n1, &p2, &n2);
    if (!fz_write(rec, sizeof rec, dir, "recs-idx3-ubyte", data, n1)) abort();
    if (p2 && !fz_write(lab, sizeof lab, dir, "labels-idx1-ubyte", p2, n2)) abort();
    memset(&d, 0, sizeof d);
    d.kind = PT_LOADER_IDX, d.idx_data = rec, d.idx_labels = p2 ? lab : NULL, d.batch = B * ranks, d.rank = (int32_t)(ranks - 1);
    d.ranks = (int32_t)ranks, d.seed = 3, d.shuffle = (b0 >> 2) & 1, d.prefetch = 0, d.classes = (b0 & 8) ? 10 : 0;
    L = pt_loader_new(ctx, &d);
    fz_note("pt_loader_new", L != NULL, pt_error(ctx));
    if (!L) return 0;
    {
        pt_loader_stats s = pt_loader_stats_get(L);
        int32_t *labels = (int32_t *)malloc((size_t)B * sizeof(int32_t));
        float *x = (float *)malloc((size_t)(B * s.record_bytes) * sizeof(float));
        uint8_t *xb = (uint8_t *)malloc((size_t)(B * s.record_bytes));
        FZ_ASSERT(s.record_bytes > 0 && s.record_bytes <= (1 << 30), "record_bytes %lld", (long long)s.record_bytes);
        for (k = 0; k < 4 && labels && x && xb; k++) {
            pt_status st = k & 1 ? pt_loader_next_bytes(L, xb, labels) : pt_loader_next_records(L, x, labels);
            int64_t i;
            fz_note(k & 1 ? "pt_loader_next_bytes" : "pt_loader_next_records", st, pt_error(ctx));
            if (st != PT_OK) break;
            for (i = 0; i < B && d.classes; i++) FZ_ASSERT(labels[i] >= 0 && labels[i] < 10, "label %d with classes 10", (int)labels[i]);
        }
        free(labels), free(x), free(xb);
    }
    pt_loader_free(L);
    return 0;
}
