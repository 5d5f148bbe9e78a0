/* static_test.c - PTRAIN_STATIC: every translation unit gets its own private copy of the library.
   Built twice (once with -DSTATIC_SECOND) and linked: no duplicate symbols, and both copies work. */
#define PTRAIN_STATIC
#define PTRAIN_IMPLEMENTATION
#include "../ptrain.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

/* sum of softmax([0, 1, 2]) * [1, 2, 3] computed by this TU's copy */
#ifdef STATIC_SECOND
#define STATIC_FN static_second
#else
#define STATIC_FN static_first
#endif
float STATIC_FN(void);
float STATIC_FN(void) {
    pt_desc d;
    pt_ctx *ctx;
    pt_graph *g;
    const int64_t s[1] = {3};
    const float x[3] = {0, 1, 2}, w[3] = {1, 2, 3};
    float r = -1;
    memset(&d, 0, sizeof d);
    d.threads = 1;
    if (!(ctx = pt_init(&d))) return -1;
    g = pt_graph_new(ctx);
    r = pt_item(pt_sum(g, pt_mul(g, pt_softmax(g, pt_tensor_from(g, PT_F32, 1, s, x)), pt_tensor_from(g, PT_F32, 1, s, w))));
    pt_graph_free(g);
    pt_shutdown(ctx);
    return r;
}

#ifndef STATIC_SECOND
float static_second(void);
int main(void) {
    double e0 = 1, e1 = exp(1.0), e2 = exp(2.0), want = (1 * e0 + 2 * e1 + 3 * e2) / (e0 + e1 + e2);
    float a = static_first(), b = static_second();
    int ok = fabs(a - want) < 1e-5 && fabs(b - want) < 1e-5;
    printf("static_test: %s (%.7f, %.7f, want %.7f)\n", ok ? "ok" : "WRONG", a, b, want);
    return ok ? 0 : 1;
}
#endif
