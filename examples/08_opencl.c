/* 08_opencl.c - training on a GPU (or any OpenCL device), checked against the CPU.

   Build: cc -O2 -fopenmp -march=native -DPTRAIN_OPENCL -I. examples/08_opencl.c -o build/08_opencl -lm
   Run: ./build/08_opencl --steps 50

   What it teaches:
   - choosing the device is one field, pt_desc.device = "opencl" (the first device) or "opencl:P:D"
     (platform P, device D; pt_device_list and `build/ptcl list` show them); the model code is that
     of the CPU. pt_init fails, and says why, without libOpenCL.so.1 or libclblast.so.1 (loaded at
     run time: the build needs neither), without a driver, without the device, or in a build
     without -DPTRAIN_OPENCL.
   - tensors stay on the device: parameters, gradients, optimizer state and activations live in
     device buffers (pt_mem counts them). What crosses between host and device in a step is the
     batch in, the loss out and a few scalars (the ids' range check, the gradient norm):
     pt_transfer_stats counts every copy by purpose, printed per step and by kind at the end.
   - the device computes what the CPU computes, to float rounding: a second context on the CPU with
     the same seed holds the same initial weights; the first --compare N steps run on both with the
     same batch and print the two losses and their relative difference.
   GEMMs run through CLBlast. Devices CLBlast has no tuning data for (PoCL, the CPU driver of the
   tests, is one) get faster GEMMs with `build/ptcl tune -o cl_tune.txt` and PTRAIN_CL_TUNE=cl_tune.txt.
   The kernels are compiled once and cached on disk (PTRAIN_CL_CACHE).

   Flags: the shared set (--steps --seed --batch --seq --lr --layers --width --heads --stop-after
   --device; here the device defaults to opencl, and --device cpu runs the same program on the CPU),
   --data DIR (token shards or text, as in 03_gpt.c; default data/fortunes), --compare N (2).
   Each step prints `step <n> loss <l> lr <lr> norm <g> ms <ms> tok/s <t> copies <in> in <out> out
   data_ms <d>`, the compared ones also `compare step <n>: loss ... cpu ... relative difference <r>`;
   then the transfers of step 0 and of the later steps by kind, and `val_loss <v>` (on the device). */
#define PTRAIN_IMPLEMENTATION
#define PTRAIN_HARNESS
#include "ptrain.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* a model with its optimizer and graph, in one context (on the device, or the CPU twin) */
typedef struct trainer {
    pt_ctx *ctx;
    pt_gpt *m;
    pt_optim *opt;
    pt_graph *g;
} trainer;

static int trainer_open(trainer *t, const pt_args *a, const char *device) {
    pt_desc d;
    memset(t, 0, sizeof *t);
    memset(&d, 0, sizeof d);
    d.seed = (uint64_t)a->seed, d.device = device, d.precision = a->precision; /* the seed fixes the initial weights on any device */
    return (t->ctx = pt_init(&d)) != NULL;
}

/* the model of 03 (pt_args_gpt) with AdamW (pt_args_adamw): on a device, its parameters are
   initialized on the host and copied over once (kind param) */
static int trainer_model(trainer *t, const pt_args *a, const pt_gpt_config *cfg) {
    pt_optim_desc od = pt_args_adamw(a);
    return (t->m = pt_gpt_new(t->ctx, cfg)) && (t->opt = pt_optim_new(t->ctx, &od)) && (t->g = pt_graph_new(t->ctx));
}

static void trainer_free(trainer *t) {
    pt_optim_free(t->opt);
    pt_graph_free(t->g);
    pt_gpt_free(t->m);
    pt_shutdown(t->ctx);
}

/* one optimizer step on batch (ids, tg) of B x T: the batch goes in (copies of kind io), the loss
   comes out (io), the gradient norm's sum of squares too (scalar); the rest stays on the device */
static float train_step(trainer *t, const int32_t *ids, const int32_t *tg, int B, int T, int64_t step, float lr, float *norm) {
    int64_t shape[2];
    pt_tensor *loss;
    shape[0] = B, shape[1] = T;
    pt_graph_reset(t->g);
    pt_graph_set_sample_offset(t->g, step * B);
    loss = pt_gpt_loss(t->g, t->m, pt_tensor_from(t->g, PT_I32, 2, shape, ids), pt_tensor_from(t->g, PT_I32, 2, shape, tg));
    pt_zero_grad(t->ctx);
    if (!loss || pt_backward(t->g, loss) != PT_OK) return NAN;
    *norm = pt_optim_step(t->opt, lr);
    return pt_item(loss);
}

/* the copies of `steps` steps by kind, per step: "  io    2.0 in (512 bytes), 1.0 out (4 bytes) per step" */
static void print_transfers(const char *what, const pt_transfers *x, int64_t steps) {
    int k;
    printf("transfers %s:%s\n", what, x->h2d_total_count + x->d2h_total_count ? "" : " none");
    for (k = 0; k < PT_XFER_KINDS; k++)
        if (x->h2d_count[k] || x->d2h_count[k])
            printf("  %-7s %4.1f in (%lld bytes), %4.1f out (%lld bytes) per step\n", pt_xfer_kind_name(k), (double)x->h2d_count[k] / steps,
                   (long long)(x->h2d_bytes[k] / steps), (double)x->d2h_count[k] / steps, (long long)(x->d2h_bytes[k] / steps));
}

static void add_transfers(pt_transfers *sum, const pt_transfers *x) {
    int k;
    for (k = 0; k < PT_XFER_KINDS; k++) {
        sum->h2d_count[k] += x->h2d_count[k], sum->h2d_bytes[k] += x->h2d_bytes[k];
        sum->d2h_count[k] += x->d2h_count[k], sum->d2h_bytes[k] += x->d2h_bytes[k];
    }
    sum->h2d_total_count += x->h2d_total_count, sum->d2h_total_count += x->d2h_total_count;
}

int main(int argc, char **argv) {
    pt_args a;
    pt_run data; /* only its data part: shards, loaders */
    pt_device_info di;
    pt_gpt_config cfg;
    pt_lr_schedule sched;
    pt_transfers first, rest;
    pt_mem_stats mem;
    trainer dev, cpu;
    char err[256], list[2048];
    int compare = 2, twin = 0, B, T, i;
    int32_t *ids, *tg;
    int64_t step, last;

    memset(&a, 0, sizeof a);
    a.steps = 600, a.seed = 1337, a.batch = 16, a.seq = 256, a.layers = 4, a.width = 256, a.heads = 8, a.lr = 2e-3f;
    a.device = "opencl";
    memset(&data, 0, sizeof data);
    data.data = "data/fortunes", data.prepare = pt_run_fortunes;
    argc = pt_args_parse(&a, argc, argv, err, sizeof err);
    for (i = 1; i < argc; i += 2) {
        if (i + 1 < argc && !strcmp(argv[i], "--data")) data.data = argv[i + 1], data.prepare = NULL;
        else if (i + 1 < argc && !strcmp(argv[i], "--compare")) {
            int64_t x;
            if (pt_args_int("--compare", argv[i + 1], 0, 1 << 20, &x, err, sizeof err) != 0) argc = -1;
            else compare = (int)x;
        }
        else snprintf(err, sizeof err, "unknown flag or missing value: '%s'", argv[i]), argc = -1;
    }
    if (argc < 0) {
        fprintf(stderr, "08_opencl: %s (try --help)\n", err);
        return 2;
    }
    if (a.help) {
        pt_args_usage(&a, "08_opencl", "  --data DIR      token shards or text (data/fortunes)\n  --compare N     steps also run on the CPU, compared (2)");
        return 0;
    }
    B = (int)a.batch, T = (int)a.seq;
    last = a.stop_after && a.stop_after < a.steps ? a.stop_after : a.steps;

    /* 1. The device. */
    if (!trainer_open(&dev, &a, a.device)) {
        pt_device_list(list, sizeof list);
        fprintf(stderr, "08_opencl: cannot open device '%s'; devices of this build:\n%s", a.device, list);
        return 1;
    }
    di = pt_device_info_get(dev.ctx);
    if (!strcmp(di.backend, "opencl")) /* the line `device: opencl:P:D platform / device, driver V` comes from pt_run_data below */
        printf("opencl kernels %s%s%s; CLBlast tuning: %s\n", di.program_cache_loads ? "loaded from the cache " : "compiled", di.program_cache_loads ? di.cache_file : "",
               di.program_cache_loads || !di.cache_file[0] ? "" : " (now cached)", getenv("PTRAIN_CL_TUNE") ? getenv("PTRAIN_CL_TUNE") : "none");
    else
        printf("device: cpu, %d threads\n", pt_threads(dev.ctx));

    /* 2. The data (read on the host: the batches are copied in), the model and its optimizer. */
    if (pt_run_data(dev.ctx, &data, B, T, (uint64_t)a.seed) != PT_OK) {
        fprintf(stderr, "08_opencl: %s\n", pt_error(dev.ctx));
        return 1;
    }
    cfg = pt_args_gpt(&a, data.vocab);
    ids = (int32_t *)malloc(sizeof(int32_t) * (size_t)B * T);
    tg = (int32_t *)malloc(sizeof(int32_t) * (size_t)B * T);
    if (!trainer_model(&dev, &a, &cfg) || !ids || !tg) {
        fprintf(stderr, "08_opencl: %s\n", pt_error(dev.ctx));
        return 1;
    }
    sched = pt_args_schedule(&a);
    mem = pt_mem(dev.ctx);
    printf("model: %d layers, width %d, %d heads, %lld parameters; batch %d x %d tokens on %s\n", cfg.layers, cfg.width, cfg.heads,
           (long long)pt_param_numel(dev.ctx), B, T, pt_backend_name(dev.ctx));
    printf("resident on %s: parameters %lld bytes, gradients %lld, AdamW state %lld\n", pt_backend_name(dev.ctx), (long long)mem.params,
           (long long)mem.grads, (long long)mem.optim);

    /* 3. The CPU twin (same seed, same weights) for the steps compared. */
    if (compare > 0 && strcmp(di.backend, "cpu")) {
        if (!(twin = trainer_open(&cpu, &a, "cpu") && trainer_model(&cpu, &a, &cfg))) {
            fprintf(stderr, "08_opencl: the CPU twin: %s\n", cpu.ctx ? pt_error(cpu.ctx) : "pt_init failed");
            return 1;
        }
    }

    /* 4. The training loop; pt_transfer_reset / pt_transfer_stats bracket each step. */
    memset(&first, 0, sizeof first);
    memset(&rest, 0, sizeof rest);
    for (step = 0; step < last; step++) {
        double t0 = pt_time(), dt;
        float lr = pt_lr_at(&sched, step), loss, norm = 0;
        pt_transfers s;
        pt_run_step_begin(&data, step); /* under tools/ptrun: this rank's progress, its heartbeat */
        if (pt_loader_next(data.train, ids, tg) != PT_OK) {
            fprintf(stderr, "08_opencl: %s\n", pt_error(dev.ctx));
            return 1;
        }
        pt_transfer_reset(dev.ctx);
        loss = train_step(&dev, ids, tg, B, T, step, lr, &norm);
        dt = pt_time() - t0;
        s = pt_transfer_stats(dev.ctx);
        if (step == 0) first = s;
        else add_transfers(&rest, &s);
        printf("step %lld loss %.9g lr %.3e norm %.3f ms %.0f tok/s %.0f copies %lld in %lld out data_ms %.2f\n", (long long)step, loss, lr, norm,
               dt * 1e3, (double)B * T / dt, (long long)s.h2d_total_count, (long long)s.d2h_total_count, pt_loader_stats_get(data.train).last_wait_s * 1e3);
        if (isnan(loss)) {
            fprintf(stderr, "08_opencl: step %lld failed: %s\n", (long long)step, pt_error(dev.ctx));
            return 1;
        }
        if (twin && step < compare) {
            float cnorm = 0, closs = train_step(&cpu, ids, tg, B, T, step, lr, &cnorm);
            printf("compare step %lld: loss %s %.9g cpu %.9g relative difference %.1e; gradient norm %.6g cpu %.6g\n", (long long)step,
                   pt_backend_name(dev.ctx), loss, closs, fabs((double)loss - closs) / fabs((double)closs), norm, cnorm);
        }
        fflush(stdout);
    }
    if (last > 0) print_transfers("of step 0", &first, 1);
    if (last > 1) print_transfers("of the later steps", &rest, last - 1);

    /* 5. The validation loss, computed on the device too. */
    printf("val_loss %.4f\n", pt_run_val_loss(&data, dev.g, dev.m, 32));
    if (twin) trainer_free(&cpu);
    pt_run_free(&data);
    trainer_free(&dev);
    free(ids);
    free(tg);
    return 0;
}
