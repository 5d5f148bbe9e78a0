/* 03_gpt.c - a byte-level GPT trained on real English text.

   What it teaches: the whole training loop of a language model with ptrain.h - a GPT-2 shaped
   model (learned positions, pre-norm blocks, LM head tied to the token embedding), AdamW with
   warmup + cosine decay and gradient clipping, one graph reused every step (no allocation after
   the first), validation loss, and sampling text from the trained model.

   The corpus is the text of the Debian package `fortunes`, turned into data/fortunes/train.txt
   and val.txt by tools/prepare_text.sh (run automatically when missing). Tokens are bytes, so
   the vocabulary is 256 and a model that knows nothing scores ln 256 = 5.55.

   Build: cc -O2 -fopenmp -march=native -I. examples/03_gpt.c -o build/03_gpt -lm
   Run: ./build/03_gpt

   Flags: the shared set (--steps --seed --batch --seq --lr --layers --width --heads --stop-after
   --device) plus --data DIR (default data/fortunes), --val-every N, --sample N (bytes to generate),
   and checkpoints: --ckpt-dir DIR --ckpt-every N (a checkpoint of step k holds the state after k
   optimizer steps; the newest 3 are kept), --resume (continue from the newest valid checkpoint of
   DIR: the data order is a function of (seed, step), so the losses are those of a run never stopped).
   SIGINT / SIGTERM: the current step finishes, a checkpoint is saved (with --ckpt-dir), the run
   prints how to resume and exits 0.
   Each step prints `step <n> loss <l> ...`; the run ends with `val_loss <v>` and a sample. */
#define PTRAIN_IMPLEMENTATION
#include "ptrain.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* SIGINT / SIGTERM only raise this flag; the training loop reads it once a step has finished */
static volatile sig_atomic_t stop_requested = 0;
static void on_signal(int sig) {
    (void)sig;
    stop_requested = 1;
}

/* the command line that continues this run: argv as given (quoted where needed) plus --resume */
static void print_resume(int argc, char **argv) {
    int i, has = 0;
    for (i = 0; i < argc; i++) {
        const char *s = argv[i];
        has |= !strcmp(s, "--resume");
        if (*s && strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%") == strlen(s)) printf("%s%s", i ? " " : "", s);
        else {
            printf("%s'", i ? " " : "");
            for (; *s; s++) *s == '\'' ? printf("'\\''") : putchar(*s);
            putchar('\'');
        }
    }
    printf("%s\n", has ? "" : " --resume");
}

typedef struct text {
    unsigned char *bytes;
    long n;
} text;

static int read_file(const char *path, text *t) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    fseek(f, 0, SEEK_END);
    t->n = ftell(f);
    fseek(f, 0, SEEK_SET);
    t->bytes = (unsigned char *)malloc((size_t)t->n + 1);
    if (!t->bytes || fread(t->bytes, 1, (size_t)t->n, f) != (size_t)t->n) {
        fclose(f);
        return -1;
    }
    fclose(f);
    return 0;
}

/* B windows of T+1 bytes at positions drawn from rng: inputs ids[b][t], targets ids shifted by one */
static void make_batch(const text *d, pt_rng *rng, int B, int T, int32_t *ids, int32_t *tg) {
    int b, t;
    for (b = 0; b < B; b++) {
        long start = (long)(((uint64_t)pt_rng_u32(rng) << 20 ^ pt_rng_u32(rng)) % (uint64_t)(d->n - T - 1));
        for (t = 0; t < T; t++) {
            ids[b * T + t] = d->bytes[start + t];
            tg[b * T + t] = d->bytes[start + t + 1];
        }
    }
}

/* mean loss over fixed, evenly spaced windows of the validation text (no gradients kept) */
static float eval_loss(pt_graph *g, const pt_gpt *m, const text *val, int B, int T, int batches, int32_t *ids, int32_t *tg) {
    double sum = 0;
    int k, b, t, nb = 0;
    long stride = (val->n - T - 1) / ((long)batches * B);
    pt_graph_set_grad(g, 0);
    pt_graph_set_training(g, 0);
    for (k = 0; k < batches && stride > 0; k++, nb++) {
        pt_tensor *x, *y, *loss;
        for (b = 0; b < B; b++) {
            long start = ((long)k * B + b) * stride;
            for (t = 0; t < T; t++) ids[b * T + t] = val->bytes[start + t], tg[b * T + t] = val->bytes[start + t + 1];
        }
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
    char err[256], path[512];
    const char *data = "data/fortunes", *ckpt_dir = NULL;
    int val_every = 100, sample = 300, ckpt_every = 0, resume = 0, i, argc0 = argc;
    char **argv0 = (char **)malloc(sizeof(char *) * (size_t)(argc + 1)); /* argv as given (pt_args_parse reorders it) */
    text train = {0, 0}, val = {0, 0};
    if (!argv0) return 1;
    memcpy(argv0, argv, sizeof(char *) * (size_t)(argc + 1));
    memset(&a, 0, sizeof a);
    a.steps = 600, a.seed = 1337, a.batch = 16, a.seq = 256, a.layers = 4, a.width = 256, a.heads = 8, a.lr = 2e-3f;
    argc = pt_args_parse(&a, argc, argv, err, sizeof err);
    if (argc < 0) {
        fprintf(stderr, "03_gpt: %s (try --help)\n", err);
        return 2;
    }
    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--data") && i + 1 < argc) data = argv[++i];
        else if (!strcmp(argv[i], "--val-every") && i + 1 < argc) val_every = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--sample") && i + 1 < argc) sample = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--ckpt-dir") && i + 1 < argc) ckpt_dir = argv[++i];
        else if (!strcmp(argv[i], "--ckpt-every") && i + 1 < argc) ckpt_every = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--resume")) resume = 1;
        else {
            fprintf(stderr, "03_gpt: unknown flag '%s' (try --help)\n", argv[i]);
            return 2;
        }
    }
    if (a.help) {
        pt_args_usage(&a, "03_gpt", "  --data DIR      train.txt/val.txt directory (data/fortunes)\n  --val-every N   validation interval (100)\n  --sample N      bytes to generate at the end (300)\n"
                      "  --ckpt-dir DIR  checkpoint directory (none)\n  --ckpt-every N  save every N steps (0 = only when interrupted)\n"
                      "  --resume        continue from the newest valid checkpoint of --ckpt-dir");
        return 0;
    }
    if (resume && !ckpt_dir) {
        fprintf(stderr, "03_gpt: --resume needs --ckpt-dir DIR (the directory the checkpoints were saved to)\n");
        return 2;
    }
    if (ckpt_every < 0) {
        fprintf(stderr, "03_gpt: --ckpt-every expects a number >= 0, found %d\n", ckpt_every);
        return 2;
    }
    snprintf(path, sizeof path, "%s/train.txt", data);
    if (read_file(path, &train) != 0 && !strcmp(data, "data/fortunes")) {
        printf("preparing the corpus: sh tools/prepare_text.sh data/fortunes\n");
        fflush(stdout);
        if (system("sh tools/prepare_text.sh data/fortunes") != 0) {
            fprintf(stderr, "03_gpt: tools/prepare_text.sh failed (is the Debian package 'fortunes' installed? make deps)\n");
            return 1;
        }
    }
    if (!train.bytes && read_file(path, &train) != 0) {
        fprintf(stderr, "03_gpt: cannot read %s (expected a text file; prepare it with tools/prepare_text.sh %s)\n", path, data);
        return 1;
    }
    snprintf(path, sizeof path, "%s/val.txt", data);
    if (read_file(path, &val) != 0) {
        fprintf(stderr, "03_gpt: cannot read %s\n", path);
        return 1;
    }
    if (train.n < a.seq + 2 || val.n < a.seq + 2) {
        fprintf(stderr, "03_gpt: the corpus is too small: train %ld and val %ld bytes, need more than --seq %lld + 1\n", train.n, val.n,
                (long long)a.seq);
        return 1;
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
        int B = (int)a.batch, T = (int)a.seq;
        int32_t *ids = (int32_t *)malloc(sizeof(int32_t) * (size_t)(B * T)), *tg = (int32_t *)malloc(sizeof(int32_t) * (size_t)(B * T));
        int64_t step, first = 0, saved = -1, last = a.stop_after ? (a.stop_after < a.steps ? a.stop_after : a.steps) : a.steps;
        double flops;
        pt_ckpt_opts ck;
        memset(&d, 0, sizeof d);
        d.seed = (uint64_t)a.seed;
        d.device = a.device;
        if (!(ctx = pt_init(&d))) return 1;
        memset(&cfg, 0, sizeof cfg);
        cfg.vocab = 256, cfg.max_seq = T, cfg.layers = (int)a.layers, cfg.width = (int)a.width, cfg.heads = (int)a.heads;
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
        memset(&ck, 0, sizeof ck);
        ck.keep_last = 3, ck.model = &cfg;
        if (resume) { /* parameters, AdamW moments and step count of the newest valid checkpoint */
            if (pt_ckpt_load(ctx, opt, ckpt_dir, &first) != PT_OK) {
                fprintf(stderr, "03_gpt: cannot resume from %s: %s\n", ckpt_dir, pt_error(ctx));
                return 1;
            }
            saved = first;
            printf("resumed from %s at step %lld\n", ckpt_dir, (long long)first);
        }
        signal(SIGINT, on_signal);
        signal(SIGTERM, on_signal);
        for (step = first; step < last; step++) {
            pt_rng rng = pt_rng_seed((uint64_t)a.seed * 1000003u + (uint64_t)step); /* data order: a function of (seed, step) */
            double t0 = pt_time(), dt;
            float lr = pt_lr_at(&sched, step), loss, norm;
            pt_tensor *x, *y, *l;
            make_batch(&train, &rng, B, T, ids, tg);
            pt_graph_reset(g);
            pt_graph_set_sample_offset(g, step * B);
            x = pt_tensor_new(g, PT_I32, 2, B, T, 0, 0);
            y = pt_tensor_new(g, PT_I32, 2, B, T, 0, 0);
            pt_tensor_write(x, ids);
            pt_tensor_write(y, tg);
            l = pt_gpt_loss(g, m, x, y);
            pt_zero_grad(ctx);
            if (!l || pt_backward(g, l) != PT_OK) {
                fprintf(stderr, "03_gpt: step %lld failed: %s\n", (long long)step, pt_error(ctx));
                return 1;
            }
            loss = pt_item(l);
            norm = pt_optim_step(opt, lr);
            dt = pt_time() - t0;
            printf("step %lld loss %.9g lr %.3e norm %.3f ms %.0f tok/s %.0f gflops %.1f\n", (long long)step, loss, lr, norm, dt * 1e3,
                   B * T / dt, flops / dt * 1e-9);
            fflush(stdout);
            if (val_every > 0 && (step + 1) % val_every == 0 && step + 1 < last)
                printf("val step %lld val_loss %.4f\n", (long long)(step + 1), eval_loss(g, m, &val, B, T, 16, ids, tg));
            /* a checkpoint of step k holds the state after k optimizer steps */
            if (ckpt_dir && ((ckpt_every > 0 && (step + 1) % ckpt_every == 0) || stop_requested)) {
                if (pt_ckpt_save(ctx, opt, ckpt_dir, step + 1, &ck) != PT_OK) {
                    fprintf(stderr, "03_gpt: saving the checkpoint of step %lld failed: %s\n", (long long)(step + 1), pt_error(ctx));
                    return 1;
                }
                saved = step + 1;
            }
            if (stop_requested) {
                if (saved == step + 1) {
                    printf("interrupted at step %lld; resume with: ", (long long)(step + 1));
                    print_resume(argc0, argv0);
                } else printf("interrupted at step %lld; nothing saved (no --ckpt-dir)\n", (long long)(step + 1));
                fflush(stdout);
                return 0;
            }
        }
        printf("val_loss %.4f\n", eval_loss(g, m, &val, B, T, 32, ids, tg));
        if (sample > 0) {
            int32_t *out = (int32_t *)malloc(sizeof(int32_t) * (size_t)(sample + 1));
            int32_t prompt = '\n';
            if (out && pt_gpt_generate(m, g, &prompt, 1, sample, 0.8f, (uint64_t)a.seed, out) == PT_OK) {
                printf("sample:\n");
                for (i = 1; i <= sample; i++) putchar(out[i] >= 32 || out[i] == '\n' || out[i] == '\t' ? out[i] : '?');
                printf("\n");
            }
            free(out);
        }
        pt_optim_free(opt);
        pt_graph_free(g);
        pt_gpt_free(m);
        pt_shutdown(ctx);
        free(ids);
        free(tg);
    }
    free(train.bytes);
    free(val.bytes);
    free(argv0);
    return 0;
}
