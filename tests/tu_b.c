/* tu_b.c - a second translation unit that only includes the header (no implementation) and calls
   the API; linked with tu_a.c (which holds the implementation) it must link without duplicate
   symbols and work. Also compiled as C++ against the C-compiled tu_a.o (extern "C" check). */
#include "../ptrain.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

int main(void) {
    pt_desc d;
    pt_ctx *ctx;
    pt_graph *g;
    pt_tensor *a, *b, *c, *loss;
    const int64_t sa[2] = {2, 3}, sb[2] = {3, 2};
    const float va[6] = {1, 2, 3, 4, 5, 6}, vb[6] = {1, 0, 0, 1, 1, 1};
    const float want[4] = {4, 5, 10, 11};
    float got[4];
    int i, bad = 0;
    memset(&d, 0, sizeof d);
    d.seed = 1;
    d.threads = 1;
    ctx = pt_init(&d);
    if (!ctx) return 2;
    g = pt_graph_new(ctx);
    a = pt_tensor_from(g, PT_F32, 2, sa, va);
    b = pt_tensor_from(g, PT_F32, 2, sb, vb);
    pt_requires_grad(a);
    c = pt_matmul(g, a, b, 0, 0);
    loss = pt_sum(g, c);
    if (!c || !loss || pt_backward(g, loss) != PT_OK) bad = 1;
    if (!bad) {
        pt_tensor_read(c, got);
        for (i = 0; i < 4; i++)
            if (fabsf(got[i] - want[i]) > 1e-6f) bad = 1;
        if (fabsf(pt_item(loss) - 30.0f) > 1e-5f) bad = 1;
        if (!a->grad || fabsf(pt_f32(a->grad)[0] - 1.0f) > 1e-6f || fabsf(pt_f32(a->grad)[2] - 2.0f) > 1e-6f) bad = 1;
    }
    if (pt_hash64(1) == pt_hash64(2)) bad = 1;
    printf("tu_b: %s, version %s, backend %s\n", bad ? "WRONG" : "ok", PTRAIN_VERSION_STRING, pt_backend_name(ctx));
    pt_graph_free(g);
    pt_shutdown(ctx);
    return bad;
}
