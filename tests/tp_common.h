/* tp_common.h - shared by test_tp.c and test_tp_gpt.c: the implementation, the grid of the run
   (layout tp = world size; checks: test_util.h, agreed by every rank), relative differences, a quiet context. */
#define PTRAIN_IMPLEMENTATION
#include "ptrain.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pt_dist *g_d;
static int g_rank, g_tp, g_tpr;

/* normwise relative difference: max|a-b| / max(max|b|, 1e-6) */
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

/* checks rel(got, want) <= tol */
static void cmp_tol(const char *name, const float *got, const float *want, long n, double tol) {
    char why[160];
    double r = rel(got, want, n);
    snprintf(why, sizeof why, "relative difference %.3g > %g", r, tol);
    CHECK_WHY(r <= tol, name, why);
}

/* 1 if the n floats at v are bitwise the same on every rank of the world */
static int same_on_all_ranks(const float *v, int n) {
    int ok = 1;
#ifdef PTRAIN_MPI
    float *mx = (float *)malloc((size_t)n * 2 * sizeof(float)), *mn = mx + n;
    int i;
    MPI_Comm w = *(MPI_Comm *)pt_dist_comm(g_d, PT_COMM_WORLD);
    MPI_Allreduce(v, mx, n, MPI_FLOAT, MPI_MAX, w);
    MPI_Allreduce(v, mn, n, MPI_FLOAT, MPI_MIN, w);
    for (i = 0; i < n; i++) ok &= mx[i] == mn[i];
    free(mx);
#else
    (void)v, (void)n;
#endif
    return ok;
}

static pt_ctx *mk_ctx(const pt_dist *d) {
    pt_desc desc;
    memset(&desc, 0, sizeof desc);
    desc.seed = 1234;
    desc.threads = 1;
    desc.dist = d;
    desc.log_level = PT_LOG_ERROR + 1; /* quiet: expected errors are checked, not logged */
    return pt_init(&desc);
}

/* the grid (dp 1, pp 1, tp = world size) around run(); prints "N passed, N failed"; the exit status */
static int tp_main(int *argc, char ***argv, void (*run)(void)) {
    pt_layout lay;
    char err[512];
    int nf;
    memset(&lay, 0, sizeof lay);
    lay.dp = 1, lay.tp = 0, lay.pp = 1;
    g_d = pt_dist_init(argc, argv, &lay, err, sizeof err);
    if (!g_d) {
        printf("FAIL pt_dist_init: %s\n0 passed, 1 failed\n", err);
        return 1;
    }
    g_rank = pt_dist_rank(g_d);
    g_tp = pt_dist_layout(g_d).tp;
    g_tpr = pt_dist_coords(g_d).tp;
    tu_mpi_init(tu_name(" (tp=%d)", g_tp));
    run();
    nf = tu_summary();
    pt_dist_finalize(g_d);
    return nf;
}
