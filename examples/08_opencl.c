/* 08_opencl.c - the GPT of 03 on a GPU (or any OpenCL device).

   What it teaches: moving training to a device is one field, pt_desc.device = "opencl" (or
   "opencl:P:D" for platform P, device D; `build/ptcl list` shows them). The model code does not
   change. Parameters, gradients, optimizer state and activations live in device buffers and stay
   there: what crosses between host and device in a step is the batch in, the loss out and a few
   scalars (the ids range check, the gradient norm). The program counts every copy by purpose
   (pt_transfer_stats) and prints them, so you can see it. GEMMs run through CLBlast; devices
   CLBlast has no tuning data for (PoCL, the CPU driver used in the tests, is one) get much faster
   GEMMs with parameters found by `build/ptcl tune -o cl_tune.txt`, applied with
   PTRAIN_CL_TUNE=cl_tune.txt. The kernels are compiled once and cached on disk (PTRAIN_CL_CACHE).

   Build: cc -O2 -fopenmp -march=native -DPTRAIN_OPENCL -I. examples/08_opencl.c -o build/08_opencl -lOpenCL -lclblast -lm
   Run: ./build/08_opencl --steps 50

   Flags: the shared set (--steps --seed --batch --seq --lr --layers --width --heads --stop-after
   --device; here the device defaults to opencl, --device cpu runs the same program on the CPU),
   --val-every N, --sample N (tokens to generate at the end), and the run's flags as in 03: --data DIR
   (token shards, or text made into shards; default data/fortunes), --ckpt-dir DIR --ckpt-every N
   --resume / --resume-if-any (a checkpoint saved on the device resumes on the CPU and back),
   --ckpt-async, --log FILE, --trace FILE, --guard off|warn|skip|rollback, --guard-z Z, and
   SIGINT / SIGTERM finish the step, save and print how to resume. Each step prints
   `step <n> loss <l> ...`; then the transfers of a step by kind, `val_loss <v>` and a sample. */
#define PTRAIN_IMPLEMENTATION
#define PTRAIN_HARNESS
#include "ptrain.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* mean loss over the first batches of the validation stream (in order, no gradients kept) */
static float eval_loss(pt_graph *g, const pt_gpt *m, pt_run *run, int B, int T, int batches, int32_t *ids, int32_t *tg) {
    double sum = 0;
    int k, nb = 0, n = pt_run_val_rewind(run, batches);
    pt_graph_set_grad(g, 0);
    pt_graph_set_training(g, 0);
    for (k = 0; k < n; k++, nb++) {
        pt_tensor *x, *y, *loss;
        if (pt_loader_next(run->val, ids, tg) != PT_OK) break;
        pt_graph_reset(g);
        x = pt_tensor_new(g, PT_I32, 2, B, T, 0, 0);
        y = pt_tensor_new(g, PT_I32, 2, B, T, 0, 0);
        pt_tensor_write(x, ids);
        pt_tensor_write(y, tg);
        loss = pt_gpt_loss(g, m, x, y);
        if (!loss) break;
        sum += pt_item(loss);
    }
    pt_graph_set_grad(g, 1);
    pt_graph_set_training(g, 1);
    return nb ? (float)(sum / nb) : -1.0f;
}

/* one line per kind of transfer that happened: "io: 2 in (16 KiB), 1 out (4 B)" */
static void print_transfers(const char *what, const pt_transfers *x, int steps) {
    int k;
    printf("transfers %s:%s\n", what, x->h2d_total_count + x->d2h_total_count ? "" : " none");
    for (k = 0; k < PT_XFER_KINDS; k++)
        if (x->h2d_count[k] || x->d2h_count[k])
            printf("  %-7s %4.1f in (%lld bytes), %4.1f out (%lld bytes) per step\n", pt_xfer_kind_name(k), (double)x->h2d_count[k] / steps,
                   (long long)(x->h2d_bytes[k] / steps), (double)x->d2h_count[k] / steps, (long long)(x->d2h_bytes[k] / steps));
}

int main(int argc, char **argv) {
    pt_args a;
    pt_run run;
    char err[256], list[2048];
    int sample = 200, val_every = 100, i;
    memset(&run, 0, sizeof run);
    run.data = "data/fortunes", run.prepare = pt_run_fortunes;
    memset(&a, 0, sizeof a);
    a.steps = 600, a.seed = 1337, a.batch = 16, a.seq = 256, a.layers = 4, a.width = 256, a.heads = 8, a.lr = 2e-3f;
    a.device = "opencl";
    argc = pt_run_parse(&run, argc, argv, err, sizeof err); /* first: it records the command line as given */
    if (argc >= 0) argc = pt_args_parse(&a, argc, argv, err, sizeof err);
    if (argc < 0) {
        fprintf(stderr, "08_opencl: %s (try --help)\n", err);
        return 2;
    }
    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--sample") && i + 1 < argc) sample = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--val-every") && i + 1 < argc) val_every = atoi(argv[++i]);
        else {
            fprintf(stderr, "08_opencl: unknown flag '%s' (try --help)\n", argv[i]);
            return 2;
        }
    }
    if (a.help) {
        pt_args_usage(&a, "08_opencl", "  --val-every N   validation interval (100)\n  --sample N      tokens to generate at the end (200)");
        pt_run_usage(&run);
        return 0;
    }
    {
        pt_desc d;
        pt_ctx *ctx;
        pt_device_info di;
        pt_gpt_config cfg;
        pt_gpt *m;
        pt_optim_desc od;
        pt_optim *opt;
        pt_lr_schedule sched;
        pt_graph *g;
        pt_transfers first, rest;
        int B = (int)a.batch, T = (int)a.seq, stop = 0, v;
        int32_t *ids = (int32_t *)malloc(sizeof(int32_t) * (size_t)(B * T)), *tg = (int32_t *)malloc(sizeof(int32_t) * (size_t)(B * T));
        int64_t step, next, first_step = 0, last = a.stop_after ? (a.stop_after < a.steps ? a.stop_after : a.steps) : a.steps;

        /* 1. The device: the only line that differs from 03. pt_init fails (and says why: no
              OpenCL driver, no such device, a build without -DPTRAIN_OPENCL) if it cannot open it. */
        memset(&d, 0, sizeof d);
        d.seed = (uint64_t)a.seed;
        d.device = a.device;
        if (!(ctx = pt_init(&d))) {
            pt_device_list(list, sizeof list);
            fprintf(stderr, "08_opencl: cannot open device '%s'; devices of this build:\n%s", a.device, list);
            return 1;
        }
        di = pt_device_info_get(ctx);
        if (!strcmp(di.backend, "opencl"))
            printf("device: opencl:%d:%d %s / %s, driver %s; kernels %s%s%s; CLBlast tuning: %s\n", di.platform_index, di.device_index, di.platform,
                   di.device, di.driver, di.program_cache_loads ? "loaded from the cache " : "compiled", di.program_cache_loads ? di.cache_file : "",
                   di.program_cache_loads || !di.cache_file[0] ? "" : " (now cached)", getenv("PTRAIN_CL_TUNE") ? getenv("PTRAIN_CL_TUNE") : "none");
        else
            printf("device: cpu, %d threads\n", pt_threads(ctx));

        /* 2. The data, model, optimizer and schedule of 03, unchanged. */
        if (pt_run_data(ctx, &run, B, T, (uint64_t)a.seed) != PT_OK) {
            fprintf(stderr, "08_opencl: %s\n", pt_error(ctx));
            return 1;
        }
        memset(&cfg, 0, sizeof cfg);
        cfg.vocab = run.vocab, cfg.max_seq = T, cfg.layers = (int)a.layers, cfg.width = (int)a.width, cfg.heads = (int)a.heads;
        m = pt_gpt_new(ctx, &cfg);
        memset(&od, 0, sizeof od);
        od.kind = PT_OPTIM_ADAMW, od.lr = a.lr, od.beta1 = 0.9f, od.beta2 = 0.95f, od.weight_decay = 0.1f, od.clip_norm = 1.0f;
        opt = m ? pt_optim_new(ctx, &od) : NULL;
        sched.kind = PT_LR_COSINE, sched.lr = a.lr, sched.min_lr = a.lr * 0.1f, sched.warmup = a.steps / 20 + 1, sched.total = a.steps;
        g = pt_graph_new(ctx);
        if (!m || !opt || !g || !ids || !tg) {
            fprintf(stderr, "08_opencl: %s\n", pt_error(ctx));
            return 1;
        }
        printf("model: %d layers, width %d, %d heads, %lld parameters; batch %d x %d bytes on %s\n", cfg.layers, cfg.width, cfg.heads,
               (long long)pt_param_numel(ctx), B, T, pt_backend_name(ctx));
        memset(&first, 0, sizeof first);
        memset(&rest, 0, sizeof rest);
        run.model = &cfg;
        if (pt_run_start(ctx, opt, &run, a.steps, &first_step) != PT_OK) { /* --resume, and SIGINT / SIGTERM caught */
            if (run.resume) fprintf(stderr, "08_opencl: cannot resume from %s: %s\n", run.ckpt_dir, pt_error(ctx));
            else fprintf(stderr, "08_opencl: %s\n", pt_error(ctx));
            return 1;
        }

        /* 3. The training loop of 03. pt_transfer_reset / pt_transfer_stats bracket each step. */
        for (step = first_step; step < last && !stop; step++) {
            double t0 = pt_time(), dt;
            float lr = pt_lr_at(&sched, step), loss, norm;
            pt_tensor *x, *y, *l;
            pt_transfers s;
            if (pt_loader_next(run.train, ids, tg) != PT_OK) {
                fprintf(stderr, "08_opencl: %s\n", pt_error(ctx));
                return 1;
            }
            pt_transfer_reset(ctx);
            pt_graph_reset(g);
            pt_graph_set_sample_offset(g, step * B);
            x = pt_tensor_new(g, PT_I32, 2, B, T, 0, 0);
            y = pt_tensor_new(g, PT_I32, 2, B, T, 0, 0);
            pt_tensor_write(x, ids); /* the batch goes in ... */
            pt_tensor_write(y, tg);
            l = pt_gpt_loss(g, m, x, y);
            pt_zero_grad(ctx);
            if (!l || pt_backward(g, l) != PT_OK) {
                fprintf(stderr, "08_opencl: step %lld failed: %s\n", (long long)step, pt_error(ctx));
                return 1;
            }
            loss = pt_item(l); /* ... and the loss comes out */
            norm = pt_grad_norm(ctx); /* the health guard (--guard) before the update, as in 03 */
            if ((v = pt_run_guard(ctx, opt, &run, step, loss, norm, &next)) < 0) {
                fprintf(stderr, "08_opencl: step %lld: %s\n", (long long)step, pt_error(ctx));
                return 1;
            }
            if (v == PT_GUARD_ROLLBACK) {
                step = next - 1;
                continue;
            }
            lr = pt_run_lr(&run, lr);
            if (v == PT_GUARD_OK) pt_optim_step(opt, lr);
            dt = pt_time() - t0;
            s = pt_transfer_stats(ctx);
            if (step == first_step) first = s;
            else {
                int k;
                for (k = 0; k < PT_XFER_KINDS; k++) {
                    rest.h2d_count[k] += s.h2d_count[k], rest.h2d_bytes[k] += s.h2d_bytes[k];
                    rest.d2h_count[k] += s.d2h_count[k], rest.d2h_bytes[k] += s.d2h_bytes[k];
                }
                rest.h2d_total_count += s.h2d_total_count, rest.d2h_total_count += s.d2h_total_count;
            }
            printf("step %lld loss %.9g lr %.3e norm %.3f ms %.0f tok/s %.0f copies %lld in %lld out data_ms %.2f\n", (long long)step, loss, lr, norm,
                   dt * 1e3, B * T / dt, (long long)s.h2d_total_count, (long long)s.d2h_total_count, pt_loader_stats_get(run.train).last_wait_s * 1e3);
            fflush(stdout);
            if (val_every > 0 && (step + 1) % val_every == 0 && step + 1 < last) {
                double tv = pt_time();
                float vl = eval_loss(g, m, &run, B, T, 16, ids, tg);
                pt_run_val(&run, vl, pt_time() - tv);
                printf("val step %lld val_loss %.4f\n", (long long)(step + 1), vl);
            }
            /* checkpoints (pt_run_step_end saves when due) and a stop asked by a signal */
            if ((stop = pt_run_step_end(ctx, opt, &run, step + 1, a.steps, loss, norm, lr)) < 0) {
                fprintf(stderr, "08_opencl: saving the checkpoint of step %lld failed: %s\n", (long long)(step + 1), pt_error(ctx));
                return 1;
            }
        }
        if (stop) last = step; /* the steps that ran */
        if (last > first_step) print_transfers(first_step ? "of the first step after resuming" : "of step 0", &first, 1);
        if (last > first_step + 1) print_transfers("of the later steps", &rest, (int)(last - first_step - 1));

        /* 4. Validation loss on fixed windows, then a sample (both run on the device too). */
        if (!stop) printf("val_loss %.4f\n", eval_loss(g, m, &run, B, T, 32, ids, tg));
        if (!stop && sample > 0) {
            int32_t *out = (int32_t *)malloc(sizeof(int32_t) * (size_t)(sample + 1));
            int32_t prompt = '\n';
            if (out && pt_gpt_generate(m, g, &prompt, 1, sample, 0.8f, (uint64_t)a.seed, out) == PT_OK) {
                printf("sample:\n");
                pt_run_print(&run, out + 1, sample, stdout);
                printf("\n");
            }
            free(out);
        }
        pt_run_free(&run);
        pt_optim_free(opt);
        pt_graph_free(g);
        pt_gpt_free(m);
        pt_shutdown(ctx);
        free(ids);
        free(tg);
    }
    return 0;
}
