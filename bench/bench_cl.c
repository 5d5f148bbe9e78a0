/* bench_cl.c - the OpenCL backend, one JSON line per measurement.

   bench_cl probe            exit 0 when an OpenCL device opens (bench/run.sh skips the rest otherwise)
   bench_cl gemm [n]         ptrain's matmul (the op training uses) vs a direct CLBlastSgemm on the
                             same device buffers, alternating in the same run, medians of 7;
                             "tuned" says whether env PTRAIN_CL_TUNE applied a tuning file
   bench_cl bandwidth [n]    device copy (clEnqueueCopyBuffer) vs ptrain's add, gelu and AdamW
                             update on n floats (default 8M); GB/s = bytes read + written / time
   bench_cl gpt A [steps]    one GPT training step on OpenCL (median of steps after 2 warm-ups) with
                             the CPU backend's tokens/s in the same run; an "error" field when the
                             step cannot run on OpenCL

   Every device timing is bracketed by pt_sync (OpenCL ops only enqueue work).
   Build: cc -O3 -march=native -fopenmp -DPTRAIN_OPENCL -I. bench/bench_cl.c -o build/bench_cl -lOpenCL -lclblast -lm
   The one program here that calls OpenCL and CLBlast itself (the direct baselines), so the one that
   needs their headers and -l flags (ocl-icd-opencl-dev, opencl-headers, libclblast-dev); ptrain.h
   needs neither (it loads both libraries at run time, the same ones this program links). */
#define PTRAIN_IMPLEMENTATION
#include "ptrain.h"

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>
#include <clblast_c.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"

#define REPS 7

static pt_ctx *open_cl(void) {
    pt_desc d;
    const char *e = getenv("PTRAIN_DEVICE");
    memset(&d, 0, sizeof d);
    d.seed = 1;
    d.device = e && !strncmp(e, "opencl", 6) ? e : "opencl";
    return pt_init(&d);
}

/* s as a JSON string body (quotes, backslashes and control characters escaped) */
static void json_str(const char *s) {
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') printf("\\%c", *s);
        else if ((unsigned char)*s < 32) printf("\\u%04x", (unsigned char)*s);
        else putchar(*s);
    }
}

static const char *tuned_file(void) {
    const char *t = getenv("PTRAIN_CL_TUNE");
    return t && *t ? t : NULL;
}

static int bench_gemm(int n) {
    pt_ctx *ctx = open_cl();
    pt_graph *g, *gc;
    pt_tensor *a, *b, *c;
    pt_cl_handles h;
    float *host;
    double tp[REPS], td[REPS], fl = 2.0 * n * n * (double)n;
    int i;
    if (!ctx) return 1;
    h = pt_cl_handles_get(ctx);
    g = pt_graph_new(ctx), gc = pt_graph_new(ctx);
    pt_graph_set_grad(g, 0), pt_graph_set_grad(gc, 0);
    a = pt_tensor_new(g, PT_F32, 2, n, n, 0, 0), b = pt_tensor_new(g, PT_F32, 2, n, n, 0, 0), c = pt_tensor_new(g, PT_F32, 2, n, n, 0, 0);
    host = (float *)malloc(sizeof(float) * (size_t)n * n);
    if (!a || !b || !c || !host) return 1;
    for (i = 0; i < n * n; i++) host[i] = (float)(i % 7) * 0.1f;
    pt_tensor_write(a, host);
    for (i = 0; i < n * n; i++) host[i] = (float)(i % 5) * 0.1f;
    pt_tensor_write(b, host);
    for (i = -1; i < REPS; i++) { /* -1: warm-up of both (kernel compilation) */
        cl_command_queue q = (cl_command_queue)h.queue;
        CLBlastStatusCode s;
        double t0;
        pt_tensor *r;
        pt_graph_reset(gc);
        pt_sync(ctx);
        t0 = pt_time();
        r = pt_matmul(gc, a, b, 0, 0);
        pt_sync(ctx);
        if (i >= 0) tp[i] = pt_time() - t0;
        t0 = pt_time();
        s = CLBlastSgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeNo, (size_t)n, (size_t)n, (size_t)n, 1.0f, (cl_mem)pt_cl_mem(a),
                         (size_t)a->off, (size_t)n, (cl_mem)pt_cl_mem(b), (size_t)b->off, (size_t)n, 0.0f, (cl_mem)pt_cl_mem(c), (size_t)c->off,
                         (size_t)n, &q, NULL);
        pt_sync(ctx);
        if (i >= 0) td[i] = pt_time() - t0;
        if (!r || s != CLBlastSuccess) {
            printf("{\"bench\":\"cl_gemm\",\"n\":%d,\"error\":\"", n);
            json_str(r ? "direct CLBlastSgemm failed" : pt_error(ctx));
            printf("\"}\n");
            fflush(stdout);
            return 1;
        }
    }
    {
        double p = fl / median(tp, REPS) * 1e-9, d = fl / median(td, REPS) * 1e-9;
        pt_device_info di = pt_device_info_get(ctx);
        printf("{\"bench\":\"cl_gemm\",\"n\":%d,\"device\":\"", n);
        json_str(di.device);
        printf("\",\"ptrain_gflops\":%.2f,\"clblast_direct_gflops\":%.2f,\"ratio\":%.3f,\"tuned\":%d}\n", p, d, p / d, tuned_file() ? 1 : 0);
        fflush(stdout);
    }
    free(host);
    pt_graph_free(gc);
    pt_graph_free(g);
    pt_shutdown(ctx);
    return 0;
}

/* median seconds of REPS runs of one of: 0 copy, 1 add, 2 gelu, 3 adamw */
static double time_op(pt_ctx *ctx, int op, pt_graph *gc, pt_tensor *a, pt_tensor *b, pt_tensor *c, pt_optim *opt) {
    pt_cl_handles h = pt_cl_handles_get(ctx);
    double t[REPS];
    int i;
    size_t bytes = (size_t)pt_numel(a) * 4;
    for (i = -1; i < REPS; i++) {
        double t0;
        void *r = gc;
        pt_graph_reset(gc);
        pt_sync(ctx);
        t0 = pt_time();
        if (op == 0) {
            if (clEnqueueCopyBuffer((cl_command_queue)h.queue, (cl_mem)pt_cl_mem(a), (cl_mem)pt_cl_mem(c), (size_t)a->off * 4, (size_t)c->off * 4, bytes,
                                    0, NULL, NULL) != CL_SUCCESS)
                r = NULL;
        } else if (op == 1) r = pt_add(gc, a, b);
        else if (op == 2) r = pt_gelu(gc, a);
        else pt_optim_step(opt, 1e-3f);
        pt_sync(ctx);
        if (i >= 0) t[i] = pt_time() - t0;
        if (!r || pt_status_get(ctx) != PT_OK) return -1;
    }
    return median(t, REPS);
}

static int bench_bandwidth(int64_t n) {
    static const char *names[] = {"add", "gelu", "adamw"};
    static const double bytes_per[] = {12, 8, 28}; /* add: a, b in, out; gelu: x in, y out; AdamW: p, g, m, v in, p, m, v out */
    pt_ctx *ctx = open_cl();
    pt_graph *g, *gc;
    pt_tensor *a, *b, *c, *p;
    pt_optim *opt;
    pt_optim_desc od;
    int64_t shape[1];
    double tcopy, gcopy;
    int k;
    if (!ctx) return 1;
    shape[0] = n;
    p = pt_param_new(ctx, "w", 1, shape, PT_INIT_ZEROS, 0.0f, 0); /* AdamW over n parameters */
    memset(&od, 0, sizeof od);
    od.kind = PT_OPTIM_ADAMW, od.lr = 1e-3f, od.beta1 = 0.9f, od.beta2 = 0.95f, od.weight_decay = 0.1f;
    opt = pt_optim_new(ctx, &od);
    g = pt_graph_new(ctx), gc = pt_graph_new(ctx);
    if (!p || !opt || !g || !gc) {
        fprintf(stderr, "bench_cl: %s\n", pt_error(ctx));
        return 1;
    }
    pt_graph_set_grad(g, 0), pt_graph_set_grad(gc, 0);
    a = pt_full(g, 1, shape, 0.5f), b = pt_full(g, 1, shape, 0.25f), c = pt_full(g, 1, shape, 0.0f);
    pt_zero_grad(ctx);
    if (!a || !b || !c || (tcopy = time_op(ctx, 0, gc, a, b, c, opt)) <= 0) {
        fprintf(stderr, "bench_cl: copy failed: %s\n", pt_error(ctx));
        return 1;
    }
    gcopy = 8.0 * (double)n / tcopy * 1e-9;
    for (k = 0; k < 3; k++) {
        double t = time_op(ctx, k + 1, gc, a, b, c, opt), gb = bytes_per[k] * (double)n / t * 1e-9;
        if (t <= 0) {
            printf("{\"bench\":\"cl_bandwidth\",\"op\":\"%s\",\"error\":\"", names[k]);
            json_str(pt_error(ctx));
            printf("\"}\n");
            fflush(stdout);
            pt_error_clear(ctx);
            continue;
        }
        printf("{\"bench\":\"cl_bandwidth\",\"op\":\"%s\",\"n\":%lld,\"copy_gbs\":%.2f,\"ptrain_elementwise_gbs\":%.2f,\"ratio\":%.3f,\"op_ms\":%.3f}\n",
               names[k], (long long)n, gcopy, gb, gb / gcopy, t * 1e3);
        fflush(stdout);
    }
    pt_optim_free(opt);
    pt_graph_free(gc);
    pt_graph_free(g);
    pt_shutdown(ctx);
    return 0;
}

/* median step seconds of the GPT of config A on ctx, or -1 (message in pt_error) */
static double gpt_step_s(pt_ctx *ctx, const pt_gpt_config *cfg, int B, int T, int steps, pt_transfers *per_step) {
    pt_gpt *m = pt_gpt_new(ctx, cfg);
    pt_optim_desc od;
    pt_optim *opt;
    pt_graph *g;
    int32_t *ids = (int32_t *)malloc(sizeof(int32_t) * (size_t)(B * (T + 1)));
    double t[64], r = -1;
    int i, s;
    memset(&od, 0, sizeof od);
    od.kind = PT_OPTIM_ADAMW, od.lr = 1e-4f, od.weight_decay = 0.1f, od.clip_norm = 1.0f;
    opt = m ? pt_optim_new(ctx, &od) : NULL;
    g = pt_graph_new(ctx);
    if (!m || !opt || !g || !ids) goto done;
    {
        pt_rng rng = pt_rng_seed(7);
        for (i = 0; i < B * (T + 1); i++) ids[i] = (int32_t)(pt_rng_u32(&rng) % (uint32_t)cfg->vocab);
    }
    for (s = -2; s < steps; s++) {
        double t0;
        pt_tensor *l;
        pt_sync(ctx);
        if (s == steps - 1) pt_transfer_reset(ctx);
        t0 = pt_time();
        l = gpt_batch_loss(g, m, ids, ids + B, B, T);
        pt_zero_grad(ctx);
        if (!l || pt_backward(g, l) != PT_OK) goto done;
        pt_item(l);
        pt_optim_step(opt, 1e-4f);
        pt_sync(ctx);
        if (pt_status_get(ctx) != PT_OK) goto done;
        if (s >= 0) t[s] = pt_time() - t0;
    }
    if (per_step) *per_step = pt_transfer_stats(ctx);
    r = median(t, steps);
done:
    free(ids);
    if (g) pt_graph_free(g);
    if (opt) pt_optim_free(opt);
    if (m) pt_gpt_free(m);
    return r;
}

static int bench_gpt(const char *which, int steps) {
    pt_gpt_config cfg;
    pt_ctx *cl, *cpu;
    pt_desc d;
    pt_transfers x;
    int B = 8, T = 256;
    double tc, tcpu;
    if (strcmp(which, "A") != 0) {
        fprintf(stderr, "bench_cl: unknown GPT config '%s' (expected A)\n", which);
        return 2;
    }
    if (steps < 1 || steps > 64) steps = 3;
    memset(&cfg, 0, sizeof cfg);
    cfg.vocab = 256, cfg.layers = 4, cfg.width = 256, cfg.heads = 8, cfg.max_seq = T;
    if (!(cl = open_cl())) {
        printf("{\"bench\":\"gpt_train\",\"backend\":\"opencl\",\"config\":\"A\",\"error\":\"no OpenCL device\"}\n");
        fflush(stdout);
        return 1;
    }
    memset(&d, 0, sizeof d);
    d.seed = 1;
    d.device = "cpu";
    cpu = pt_init(&d);
    tc = gpt_step_s(cl, &cfg, B, T, steps, &x);
    if (tc < 0) {
        printf("{\"bench\":\"gpt_train\",\"backend\":\"opencl\",\"config\":\"A\",\"B\":%d,\"T\":%d,\"error\":\"", B, T);
        json_str(pt_error(cl));
        printf("\"}\n");
        fflush(stdout);
        pt_shutdown(cl);
        pt_shutdown(cpu);
        return 0;
    }
    tcpu = cpu ? gpt_step_s(cpu, &cfg, B, T, steps, NULL) : -1;
    printf("{\"bench\":\"gpt_train\",\"backend\":\"opencl\",\"config\":\"A\",\"B\":%d,\"T\":%d,\"step_s\":%.4f,\"tokens_per_s\":%.1f,"
           "\"step_gflops\":%.2f,\"cpu_tokens_per_s\":%.1f,\"cpu_threads\":%d,\"h2d_per_step\":%lld,\"d2h_per_step\":%lld,\"tuned\":%d}\n",
           B, T, tc, B * T / tc, pt_gpt_flops(&cfg, B, T) / tc * 1e-9, tcpu > 0 ? B * T / tcpu : 0.0, cpu ? pt_threads(cpu) : 0,
           (long long)x.h2d_total_count, (long long)x.d2h_total_count, tuned_file() ? 1 : 0);
    fflush(stdout);
    pt_shutdown(cl);
    if (cpu) pt_shutdown(cpu);
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "probe")) {
        pt_ctx *ctx = open_cl();
        if (!ctx) return 1;
        pt_shutdown(ctx);
        return 0;
    }
    if (argc >= 2 && !strcmp(argv[1], "gemm")) return bench_gemm(argc >= 3 ? atoi(argv[2]) : 1024);
    if (argc >= 2 && !strcmp(argv[1], "bandwidth")) return bench_bandwidth(argc >= 3 ? atoll(argv[2]) : 8 << 20);
    if (argc >= 3 && !strcmp(argv[1], "gpt")) return bench_gpt(argv[2], argc >= 4 ? atoi(argv[3]) : 3);
    fprintf(stderr, "usage: bench_cl probe | gemm [n] | bandwidth [n] | gpt A [steps]\n");
    return 2;
}
