/* 03_gpt.c - a byte-level GPT trained on real English text.

   Build: cc -O2 -fopenmp -march=native -DPTRAIN_OPENCL -I. examples/03_gpt.c -o build/03_gpt -lm
   Run: ./build/03_gpt

   What it teaches: the whole training loop of a language model with ptrain.h, one plain call after
   the other - a GPT-2 shaped model (learned positions, pre-norm blocks, LM head tied to the token
   embedding), AdamW with warmup + cosine decay and gradient clipping, the next batch from a
   streaming loader, forward to the loss, backward, the update; one graph reused every step (no
   allocation after the first), a validation loss, and text sampled from the trained model.

   The corpus is the text of the Debian package `fortunes`, written to data/fortunes/train.txt and
   val.txt and then into token shards (train_*.bin, val_*.bin, as tools/prepare_shards writes them),
   both the first time (pt_run_data). The loader (pt_loader) memory-maps the shards, shuffles the
   windows once per epoch and reads ahead on a thread. Tokens are bytes, so the vocabulary (from the
   shard header) is 256 and a model that knows nothing scores ln 256 = 5.55.

   Flags: the shared set (--steps --seed --batch --seq --lr --layers --width --heads --stop-after
   --device cpu or opencl[:P[:D]]: OpenCL is compiled in and loaded when asked for, see 08_opencl.c; --precision f32|bf16|fp16: the matrix
   products multiply 16-bit rounded inputs with fp32 accumulation, fp16 with a dynamic loss scale), --data DIR (token shards DIR/train_*.bin and
   val_*.bin, or text DIR/train.txt and val.txt made into shards; BPE shards come with their
   tokenizer), --val-every N, --sample N (tokens to generate at the end).
   Each step prints `step <n> loss <l> lr <lr> norm <g> ms <ms> tok/s <t> gflops <f> data_ms <d>`
   (d: how long the step waited for its batch); the run ends with `val_loss <v>` (the first 32
   batches of the val shards, in order) and a sample. Checkpoints, a metrics log, a trace, a clean
   stop on Ctrl-C and parallel layouts are what tools/pttrain adds to this loop. */
#define PTRAIN_IMPLEMENTATION
#define PTRAIN_HARNESS
#include "ptrain.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    pt_args a;
    pt_run data; /* only its data part: the shards, the loaders, the tokenizer */
    pt_desc d;
    pt_ctx *ctx;
    pt_gpt_config cfg;
    pt_gpt *m;
    pt_optim_desc od;
    pt_optim *opt;
    pt_lr_schedule sched;
    pt_graph *g;
    char err[256];
    int64_t val_every = 100, sample = 300;
    int B, T, i;
    int32_t *ids, *tg;
    int64_t step, last;
    double flops;

    /* 1. Flags: the shared ones (pt_args_parse leaves the others in argv), then this program's. */
    memset(&a, 0, sizeof a);
    a.steps = 600, a.seed = 1337, a.batch = 16, a.seq = 256, a.layers = 4, a.width = 256, a.heads = 8, a.lr = 2e-3f;
    memset(&data, 0, sizeof data);
    data.data = "data/fortunes", data.prepare = pt_run_fortunes; /* the default corpus, made the first time */
    if ((argc = pt_args_parse(&a, argc, argv, err, sizeof err)) < 0) {
        fprintf(stderr, "03_gpt: %s (try --help)\n", err);
        return 2;
    }
    for (i = 1; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[++i] : NULL;
        if (v && !strcmp(f, "--data")) data.data = v, data.prepare = NULL;
        else if (v && (!strcmp(f, "--val-every") || !strcmp(f, "--sample"))) { /* 0 = none */
            if (pt_args_int(f, v, 0, 1 << 24, f[2] == 'v' ? &val_every : &sample, err, sizeof err) != 0) {
                fprintf(stderr, "03_gpt: %s\n", err);
                return 2;
            }
        } else {
            fprintf(stderr, "03_gpt: unknown flag or missing value: '%s' (try --help)\n", f);
            return 2;
        }
    }
    if (a.help) {
        pt_args_usage(&a, "03_gpt", "  --data DIR      token shards or text (data/fortunes)\n  --val-every N   validation interval (100)\n"
                                    "  --sample N      tokens to generate at the end (300)");
        return 0;
    }
    B = (int)a.batch, T = (int)a.seq; /* pt_args_parse keeps them in 1..2^24 (layers, width, heads below 2^20) */
    last = a.stop_after && a.stop_after < a.steps ? a.stop_after : a.steps;

    /* 2. A context (the CPU, seeded: init, data order and dropout follow the seed), then the data:
          each pt_loader_next gives the next B x T window of the shuffled stream and its targets
          (the same window shifted by one token). */
    memset(&d, 0, sizeof d);
    d.seed = (uint64_t)a.seed, d.device = a.device;
    d.precision = a.precision; /* --precision bf16|fp16: matrix products on 16-bit inputs, fp32 accumulation */
    if (!(ctx = pt_init(&d))) return 1;
    if (a.precision == PT_F16) pt_loss_scale_enable(ctx, NULL); /* fp16 gradients underflow without a loss scale */
    if (pt_run_data(ctx, &data, B, T, (uint64_t)a.seed) != PT_OK) {
        fprintf(stderr, "03_gpt: %s\n", pt_error(ctx));
        return 1;
    }

    /* 3. The model, the optimizer and the learning-rate schedule (pt_args_gpt, pt_args_adamw and
          pt_args_schedule give the other programs these same three). */
    memset(&cfg, 0, sizeof cfg);
    cfg.vocab = data.vocab, cfg.max_seq = T, cfg.layers = (int)a.layers, cfg.width = (int)a.width, cfg.heads = (int)a.heads;
    m = pt_gpt_new(ctx, &cfg);
    memset(&od, 0, sizeof od);
    od.kind = PT_OPTIM_ADAMW, od.lr = a.lr, od.beta1 = 0.9f, od.beta2 = 0.95f; /* beta2 0.95: steadier on small batches */
    od.weight_decay = 0.1f;                                                     /* decoupled; not on biases and norms */
    od.clip_norm = 1.0f;                                                        /* the global gradient norm, before the update */
    opt = m ? pt_optim_new(ctx, &od) : NULL;
    sched.kind = PT_LR_COSINE, sched.lr = a.lr, sched.min_lr = a.lr * 0.1f, sched.warmup = a.steps / 20 + 1, sched.total = a.steps;
    g = pt_graph_new(ctx); /* the step's graph: reset, not freed, between steps */
    ids = (int32_t *)malloc(sizeof(int32_t) * (size_t)B * T);
    tg = (int32_t *)malloc(sizeof(int32_t) * (size_t)B * T);
    if (!opt || !g || !ids || !tg) {
        fprintf(stderr, "03_gpt: %s\n", pt_error(ctx));
        return 1;
    }
    flops = pt_gpt_flops(&cfg, B, T);
    printf("model: %d layers, width %d, %d heads, %lld parameters; batch %d x %d tokens; %d threads on %s\n", cfg.layers, cfg.width, cfg.heads,
           (long long)pt_param_numel(ctx), B, T, pt_threads(ctx), pt_backend_name(ctx));

    /* 4. The training loop. */
    for (step = 0; step < last; step++) {
        double t0 = pt_time(), dt;
        float lr = pt_lr_at(&sched, step), loss, norm;
        pt_tensor *x, *y, *l;
        pt_run_step_begin(&data, step); /* under tools/ptrun: this rank's progress, its heartbeat */
        if (pt_loader_next(data.train, ids, tg) != PT_OK) {
            fprintf(stderr, "03_gpt: %s\n", pt_error(ctx));
            return 1;
        }
        pt_graph_reset(g);                          /* forget the last step's nodes, keep the memory */
        pt_graph_set_sample_offset(g, step * B);    /* dropout masks follow the sample, not the step */
        x = pt_tensor_new(g, PT_I32, 2, B, T, 0, 0); /* [B, T] token ids */
        y = pt_tensor_new(g, PT_I32, 2, B, T, 0, 0); /* [B, T] the next token at each position */
        pt_tensor_write(x, ids);
        pt_tensor_write(y, tg);
        l = pt_gpt_loss(g, m, x, y); /* forward: the mean cross-entropy, a scalar */
        pt_zero_grad(ctx);
        if (!l || pt_backward(g, l) != PT_OK) { /* backward: every parameter's gradient */
            fprintf(stderr, "03_gpt: step %lld failed: %s\n", (long long)step, pt_error(ctx));
            return 1;
        }
        loss = pt_item(l);
        norm = pt_optim_step(opt, lr); /* clip, then AdamW; returns the norm before clipping */
        dt = pt_time() - t0;
        printf("step %lld loss %.9g lr %.3e norm %.3f ms %.0f tok/s %.0f gflops %.1f data_ms %.2f\n", (long long)step, loss, lr, norm, dt * 1e3,
               (double)B * T / dt, flops / dt * 1e-9, pt_loader_stats_get(data.train).last_wait_s * 1e3);
        fflush(stdout);
        if (val_every > 0 && (step + 1) % val_every == 0 && step + 1 < last) /* no gradients, no dropout */
            printf("val step %lld val_loss %.4f\n", (long long)(step + 1), pt_run_val_loss(&data, g, m, 16));
    }

    /* 5. How much the loader made the steps wait, the validation loss, and a sample: the model
          continues a newline, one token at a time, at temperature 0.8. */
    if (pt_loader_stats_get(data.train).batches) {
        pt_loader_stats ls = pt_loader_stats_get(data.train);
        printf("data: waited %.1f ms in all, %.3f ms per batch\n", ls.wait_s * 1e3, ls.wait_s * 1e3 / (double)ls.batches);
    }
    printf("val_loss %.4f\n", pt_run_val_loss(&data, g, m, 32));
    if (sample > 0) {
        int32_t *out = (int32_t *)malloc(sizeof(int32_t) * (size_t)(sample + 1));
        int32_t prompt = '\n';
        if (out && pt_gpt_generate(m, g, &prompt, 1, (int)sample, 0.8f, (uint64_t)a.seed, out) == PT_OK) {
            printf("sample:\n");
            pt_run_print(&data, out + 1, sample, stdout); /* bytes, or BPE tokens decoded */
            printf("\n");
        }
        free(out);
    }
    pt_run_free(&data);
    pt_optim_free(opt);
    pt_graph_free(g);
    pt_gpt_free(m);
    pt_shutdown(ctx);
    free(ids);
    free(tg);
    return 0;
}
