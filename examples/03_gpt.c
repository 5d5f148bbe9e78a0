/* 03_gpt.c - a byte-level GPT trained on real English text.

   What it teaches: the whole training loop of a language model with ptrain.h - a GPT-2 shaped
   model (learned positions, pre-norm blocks, LM head tied to the token embedding), AdamW with
   warmup + cosine decay and gradient clipping, one graph reused every step (no allocation after
   the first), validation loss, and sampling text from the trained model.

   The corpus is the text of the Debian package `fortunes`, turned into data/fortunes/train.txt
   and val.txt by tools/prepare_text.sh and then into token shards (train_*.bin, val_*.bin, as
   tools/prepare_shards writes them), both automatically the first time. A streaming loader reads
   the shards (pt_loader: memory-mapped, shuffled per epoch, a prefetch thread); the vocabulary
   comes from the shard header: tokens are bytes, so it is 256 and a model that knows nothing scores
   ln 256 = 5.55.

   Build: cc -O2 -fopenmp -march=native -I. examples/03_gpt.c -o build/03_gpt -lm
   Run: ./build/03_gpt

   Flags: the shared set (--steps --seed --batch --seq --lr --layers --width --heads --stop-after
   --device), --val-every N, --sample N (tokens to generate; bytes, or BPE tokens decoded with the tokenizer next to the shards), and the run's (pt_run_parse): --data DIR
   (token shards DIR/train_*.bin and val_*.bin, or text DIR/train.txt and val.txt made into shards;
   default data/fortunes), checkpoints --ckpt-dir DIR --ckpt-every N (a checkpoint of step k holds
   the state after k optimizer steps, the data stream's position included; one is also saved at the
   last step; the newest 3 are kept), --resume (continue from the newest valid checkpoint of DIR: the
   losses are those of a run never stopped) or --resume-if-any (the same, or start at step 0 when
   DIR holds no checkpoint yet), --ckpt-async (checkpoints written by a background thread), --log FILE
   (per-step metrics as JSON lines: loss, grad_norm, lr, tokens_per_s, mfu, the step's time split into
   compute / comm / bubble / data / checkpoint, peak memory, events; docs/monitoring.md), --trace FILE
   (a Chrome trace: open it in ui.perfetto.dev, or make a report with build/ptreport), --guard
   off|warn|skip|rollback and --guard-z Z (the health guard: NaN/Inf or a loss / gradient-norm spike
   is logged, its update skipped, or after 3 bad steps in a row the last checkpoint of --ckpt-dir is
   loaded and the LR halved; default warn). SIGINT / SIGTERM: the current step finishes, a checkpoint is saved
   (with --ckpt-dir), the run prints how to resume and exits 0 (a second Ctrl-C stops at once).
   Each step prints `step <n> loss <l> ... data_ms <ms waited for the batch>`; the run ends with
   `val_loss <v>` (the first 32 batches of the val shards, in order) and a sample. */
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
    return nb ? (float)(sum / nb) : NAN;
}

int main(int argc, char **argv) {
    pt_args a;
    pt_run run;
    char err[256];
    int val_every = 100, sample = 300, i;
    memset(&run, 0, sizeof run);
    run.data = "data/fortunes", run.prepare = pt_run_fortunes;
    memset(&a, 0, sizeof a);
    a.steps = 600, a.seed = 1337, a.batch = 16, a.seq = 256, a.layers = 4, a.width = 256, a.heads = 8, a.lr = 2e-3f;
    argc = pt_run_parse(&run, argc, argv, err, sizeof err); /* first: it records the command line as given */
    if (argc >= 0) argc = pt_args_parse(&a, argc, argv, err, sizeof err);
    if (argc < 0) {
        fprintf(stderr, "03_gpt: %s (try --help)\n", err);
        return 2;
    }
    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--val-every") && i + 1 < argc) val_every = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--sample") && i + 1 < argc) sample = atoi(argv[++i]);
        else {
            fprintf(stderr, "03_gpt: unknown flag '%s' (try --help)\n", argv[i]);
            return 2;
        }
    }
    if (a.help) {
        pt_args_usage(&a, "03_gpt", "  --val-every N   validation interval (100)\n  --sample N      tokens to generate at the end (300)");
        pt_run_usage(&run);
        return 0;
    }
    {
        pt_desc d;
        pt_ctx *ctx;
        pt_gpt_config cfg;
        pt_gpt *m;
        pt_optim_desc od;
        pt_optim *opt;
        pt_lr_schedule sched;
        pt_graph *g;
        int B = (int)a.batch, T = (int)a.seq, stop = 0, v;
        int32_t *ids = (int32_t *)malloc(sizeof(int32_t) * (size_t)(B * T)), *tg = (int32_t *)malloc(sizeof(int32_t) * (size_t)(B * T));
        int64_t step, next, first = 0, last = a.stop_after ? (a.stop_after < a.steps ? a.stop_after : a.steps) : a.steps;
        double flops;
        memset(&d, 0, sizeof d);
        d.seed = (uint64_t)a.seed;
        d.device = a.device;
        if (!(ctx = pt_init(&d))) return 1;
        /* the data: token shards streamed by a loader (made from the text the first time); the
           vocabulary comes from the shards (256: bytes) */
        if (pt_run_data(ctx, &run, B, T, (uint64_t)a.seed) != PT_OK) {
            fprintf(stderr, "03_gpt: %s\n", pt_error(ctx));
            return 1;
        }
        memset(&cfg, 0, sizeof cfg);
        cfg.vocab = run.vocab, cfg.max_seq = T, cfg.layers = (int)a.layers, cfg.width = (int)a.width, cfg.heads = (int)a.heads;
        m = pt_gpt_new(ctx, &cfg);
        if (!m) return 1;
        memset(&od, 0, sizeof od);
        od.kind = PT_OPTIM_ADAMW, od.lr = a.lr, od.beta1 = 0.9f, od.beta2 = 0.95f, od.weight_decay = 0.1f, od.clip_norm = 1.0f;
        opt = pt_optim_new(ctx, &od);
        sched.kind = PT_LR_COSINE, sched.lr = a.lr, sched.min_lr = a.lr * 0.1f, sched.warmup = a.steps / 20 + 1, sched.total = a.steps;
        g = pt_graph_new(ctx);
        if (!opt || !g || !ids || !tg) return 1;
        flops = pt_gpt_flops(&cfg, B, T);
        printf("model: %d layers, width %d, %d heads, %lld parameters; batch %d x %d bytes; %d threads on %s\n", cfg.layers, cfg.width, cfg.heads,
               (long long)pt_param_numel(ctx), B, T, pt_threads(ctx), pt_backend_name(ctx));
        /* --resume: parameters, AdamW moments, step and the data stream's position from the newest
           valid checkpoint; from here on SIGINT / SIGTERM stop the run after the current step */
        run.model = &cfg;
        if (pt_run_start(ctx, opt, &run, a.steps, &first) != PT_OK) {
            if (run.resume) fprintf(stderr, "03_gpt: cannot resume from %s: %s\n", run.ckpt_dir, pt_error(ctx));
            else fprintf(stderr, "03_gpt: %s\n", pt_error(ctx));
            return 1;
        }
        for (step = first; step < last && !stop; step++) {
            double t0 = pt_time(), tf, tb, dt;
            float lr = pt_lr_at(&sched, step), loss, norm;
            pt_tensor *x, *y, *l;
            if (pt_loader_next(run.train, ids, tg) != PT_OK) { /* the next B x T window of the stream */
                fprintf(stderr, "03_gpt: %s\n", pt_error(ctx));
                return 1;
            }
            tf = pt_time();
            pt_graph_reset(g);
            pt_graph_set_sample_offset(g, step * B);
            x = pt_tensor_new(g, PT_I32, 2, B, T, 0, 0);
            y = pt_tensor_new(g, PT_I32, 2, B, T, 0, 0);
            pt_tensor_write(x, ids);
            pt_tensor_write(y, tg);
            l = pt_gpt_loss(g, m, x, y);
            pt_zero_grad(ctx);
            tb = pt_time();
            pt_trace_event(ctx, PT_TRACE_FORWARD, "forward", tf, tb, -1, -1); /* --trace: a no-op without it */
            if (!l || pt_backward(g, l) != PT_OK) {
                fprintf(stderr, "03_gpt: step %lld failed: %s\n", (long long)step, pt_error(ctx));
                return 1;
            }
            pt_trace_event(ctx, PT_TRACE_BACKWARD, "backward", tb, pt_time(), -1, -1);
            loss = pt_item(l);
            /* the health guard (--guard) looks at the step before the update: warn, skip it, or roll
               back to the last checkpoint (then continue from there with the LR halved) */
            norm = pt_grad_norm(ctx);
            v = pt_run_guard(ctx, opt, &run, step, loss, norm, &next);
            if (v < 0) {
                fprintf(stderr, "03_gpt: step %lld: %s\n", (long long)step, pt_error(ctx));
                return 1;
            }
            if (v == PT_GUARD_ROLLBACK) {
                step = next - 1;
                continue;
            }
            lr = pt_run_lr(&run, lr);
            if (v == PT_GUARD_OK) pt_optim_step(opt, lr);
            dt = pt_time() - t0;
            printf("step %lld loss %.9g lr %.3e norm %.3f ms %.0f tok/s %.0f gflops %.1f data_ms %.2f\n", (long long)step, loss, lr, norm, dt * 1e3,
                   B * T / dt, flops / dt * 1e-9, pt_loader_stats_get(run.train).last_wait_s * 1e3);
            fflush(stdout);
            if (val_every > 0 && (step + 1) % val_every == 0 && step + 1 < last) {
                double tv = pt_time();
                float vl = eval_loss(g, m, &run, B, T, 16, ids, tg);
                pt_run_val(&run, vl, pt_time() - tv);
                printf("val step %lld val_loss %.4f\n", (long long)(step + 1), vl);
            }
            /* a checkpoint of step k holds the state after k optimizer steps: saved every
               --ckpt-every steps, at the end, and when a signal asks to stop (then stop = 1) */
            if ((stop = pt_run_step_end(ctx, opt, &run, step + 1, a.steps, loss, norm, lr)) < 0) {
                fprintf(stderr, "03_gpt: saving the checkpoint of step %lld failed: %s\n", (long long)(step + 1), pt_error(ctx));
                return 1;
            }
        }
        if (!stop) {
            pt_loader_stats ls = pt_loader_stats_get(run.train);
            if (ls.batches) printf("data: waited %.1f ms in all, %.3f ms per batch\n", ls.wait_s * 1e3, ls.wait_s * 1e3 / (double)ls.batches);
            printf("val_loss %.4f\n", eval_loss(g, m, &run, B, T, 32, ids, tg));
        }
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
