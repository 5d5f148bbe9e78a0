/* dp_common.h - shared by test_dp.c and test_zero.c: the implementation, the parameters of the
   small data-parallel GPT run, and the check that every rank agrees on. */
#define PTRAIN_IMPLEMENTATION
#include "ptrain.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define B 8
#define T 16
#define STEPS 6
#ifndef LR
#define LR 1e-2f
#endif
/* AdamW eps 1e-6, not the default 1e-8: with 1e-8, elements whose true gradient is ~0 (e.g. the
   attention key bias, whose gradient is exactly 0 in exact arithmetic) get rounding noise that Adam
   turns into full +-lr steps, so even one rank with 2 micro-batches vs 1 differs by ~2e-5 */
#ifndef EPS
#define EPS 1e-6f
#endif

typedef struct {
    pt_dist *d;
    int rank, dpn, dprank;
    int npass, nfail;
    int32_t ids[STEPS][B * T], tgt[STEPS][B * T];
} tctx;

/* one check, agreed on by every DP rank; rank 0 prints */
static int check(tctx *t, int ok, const char *name, const char *why) {
    int all = ok != 0;
#ifdef PTRAIN_MPI
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, *(MPI_Comm *)pt_dist_comm(t->d, PT_COMM_WORLD));
    all = all != 0;
#endif
    if (all) t->npass++; else t->nfail++;
    if (t->rank == 0) {
        if (all) printf("PASS %s\n", name);
        else printf("FAIL %s: %s (np=%d; rank 0's view)\n", name, why, t->dpn);
        fflush(stdout);
    }
    return all;
}

