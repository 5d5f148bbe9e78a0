/* 01_autograd.c - tensors, ops, backward, and a gradient checked by hand.

   The first tutorial. It builds one tiny expression,

       y = sum(gelu(x @ W + b))      x [4, 3] (4 samples, 3 features), W [3, 2], b [2]

   prints its value, lets pt_backward compute dy/dW, dy/db and dy/dx, then checks every entry of
   dy/dW twice: against a formula derived by hand, and by finite differences. It prints "ok" or
   "MISMATCH" per entry and exits 0 only if all of them agree.

   Build: cc -O2 -I. examples/01_autograd.c -o build/01_autograd -lm
   Run: ./build/01_autograd
*/
#define PTRAIN_IMPLEMENTATION /* this file holds the library's code too (stb style) */
#include "ptrain.h"

#include <math.h>
#include <stdio.h>

enum { N = 4, IN = 3, OUT = 2 };

/* The forward pass. Everything created in the graph g (x, z, ...) lives in the graph's arena and
   disappears at the next pt_graph_reset; the parameters W and b live in the context. */
static pt_tensor *forward(pt_graph *g, const float *xdata, pt_tensor *W, pt_tensor *b, pt_tensor **x_out) {
    int64_t xs[2] = {N, IN};
    pt_tensor *x = pt_tensor_from(g, PT_F32, 2, xs, xdata); /* an input: copied into the graph */
    pt_tensor *z, *a;
    pt_requires_grad(x);             /* ask for dy/dx too (inputs get no gradient by default) */
    z = pt_matmul(g, x, W, 0, 0);    /* [4,3] @ [3,2] -> [4,2]; 0, 0 = no transposes */
    z = pt_bias_add(g, z, b);        /* + b on every row */
    a = pt_gelu(g, z);               /* elementwise GELU */
    if (x_out) *x_out = x;
    return pt_sum(g, a);             /* a scalar: the value we differentiate */
}

/* GELU (tanh form, as the library computes it) and its derivative, by hand:
     gelu(z)  = 0.5 z (1 + tanh(u)),  u = k0 (z + k1 z^3)
     gelu'(z) = 0.5 (1 + tanh(u)) + 0.5 z (1 - tanh(u)^2) k0 (1 + 3 k1 z^2) */
static double gelu_grad(double z) {
    const double k0 = 0.7978845608028654, k1 = 0.044715;
    double t = tanh(k0 * (z + k1 * z * z * z));
    return 0.5 * (1 + t) + 0.5 * z * (1 - t * t) * k0 * (1 + 3 * k1 * z * z);
}

int main(void) {
    /* 1. A context with the default settings (seed 0, CPU, all cores), and one graph. */
    pt_ctx *ctx = pt_init(NULL);
    pt_graph *g;
    pt_tensor *W, *b, *x, *y;
    int64_t ws[2] = {IN, OUT}, bs[1] = {OUT};
    const float xdata[N * IN] = {0.5f, -1.0f, 2.0f, /* sample 0 */
                                 1.5f, 0.25f, -0.5f, /* sample 1 */
                                 -2.0f, 1.0f, 0.0f,  /* sample 2 */
                                 0.1f, 0.2f, 0.3f};  /* sample 3 */
    const float wdata[IN * OUT] = {0.3f, -0.7f, 0.8f, 0.1f, -0.4f, 0.5f};
    const float bdata[OUT] = {0.1f, -0.2f};
    float dW[IN * OUT], db[OUT], dx[N * IN], *wv;
    int i, j, n, bad = 0;
    if (!ctx) return 1;
    g = pt_graph_new(ctx);

    /* 2. Parameters: created once, in the context. They always get gradients. We initialize them
       to zeros and then write our own numbers, to make the output easy to follow. */
    W = pt_param_new(ctx, "W", 2, ws, PT_INIT_ZEROS, 0.0f, 0);
    b = pt_param_new(ctx, "b", 1, bs, PT_INIT_ZEROS, 0.0f, PT_PARAM_NO_DECAY);
    pt_tensor_write(W, wdata);
    pt_tensor_write(b, bdata);

    /* 3. Forward: every op records itself on the graph's tape. Ops return NULL after an error,
       so checking the last result is enough. */
    y = forward(g, xdata, W, b, &x);
    if (!y) {
        fprintf(stderr, "forward failed: %s\n", pt_error(ctx));
        return 1;
    }
    printf("y = sum(gelu(x @ W + b)) = %.6f\n", pt_item(y));

    /* 4. Backward: walks the tape in reverse. Parameter gradients ACCUMULATE (so a training loop
       calls pt_zero_grad before each step); they are read through W->grad. */
    pt_zero_grad(ctx);
    if (pt_backward(g, y) != PT_OK) {
        fprintf(stderr, "backward failed: %s\n", pt_error(ctx));
        return 1;
    }
    pt_tensor_read(W->grad, dW);
    pt_tensor_read(b->grad, db);
    pt_tensor_read(x->grad, dx);
    printf("dy/db = [% .6f % .6f]\n", db[0], db[1]);
    printf("dy/dx =");
    for (n = 0; n < N; n++) printf(" [% .4f % .4f % .4f]", dx[n * 3], dx[n * 3 + 1], dx[n * 3 + 2]);
    printf("\n\n");

    /* 5. Check dy/dW. By the chain rule, with z = x @ W + b:
            dy/dW[i][j] = sum over samples n of x[n][i] * gelu'(z[n][j])
       And by central finite differences, re-running the forward pass with one weight nudged:
            dy/dW[i][j] ~ (y(W[i][j] + h) - y(W[i][j] - h)) / 2h
       The second needs no calculus at all, which makes it the standard test of a backward pass.
       The forward pass here needs no tape: pt_graph_set_grad(g, 0) turns recording off. */
    pt_graph_set_grad(g, 0);
    wv = pt_f32(W); /* the parameter's values, in host memory (CPU backend) */
    printf("  entry     autograd      by hand   finite diff\n");
    for (i = 0; i < IN; i++)
        for (j = 0; j < OUT; j++) {
            const float h = 1e-2f;
            double hand = 0, fd, yp, ym, tol;
            float saved = wv[i * OUT + j];
            for (n = 0; n < N; n++) {
                double z = bdata[j];
                int k;
                for (k = 0; k < IN; k++) z += (double)xdata[n * IN + k] * wdata[k * OUT + j];
                hand += xdata[n * IN + i] * gelu_grad(z);
            }
            pt_graph_reset(g); /* drop the previous pass; its memory is reused */
            wv[i * OUT + j] = saved + h;
            yp = pt_item(forward(g, xdata, W, b, NULL));
            pt_graph_reset(g);
            wv[i * OUT + j] = saved - h;
            ym = pt_item(forward(g, xdata, W, b, NULL));
            wv[i * OUT + j] = saved;
            fd = (yp - ym) / (2 * h);
            /* float32 arithmetic: agree to ~1e-3 relative */
            tol = 1e-3 * (1 + fabs(hand));
            {
                int ok = fabs(dW[i * OUT + j] - hand) <= tol && fabs(fd - hand) <= tol;
                printf("  W[%d][%d]  % .7f  % .7f  % .7f  %s\n", i, j, dW[i * OUT + j], hand, fd, ok ? "ok" : "MISMATCH");
                bad += !ok;
            }
        }
    printf("\n%s\n", bad ? "MISMATCH: the gradients disagree" : "all gradients ok");

    pt_graph_free(g);
    pt_shutdown(ctx); /* frees the parameters */
    return bad ? 1 : 0;
}
