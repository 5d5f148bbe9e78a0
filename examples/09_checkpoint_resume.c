/* 09_checkpoint_resume.c - stop a training run, resume it, and get the same run.

   What it teaches: checkpoints, and why a resumed run equals one never stopped.

   What a checkpoint holds. A checkpoint of step k is the training state after k optimizer steps:
   the parameters, the optimizer's state (AdamW's moments and its step count; under ZeRO each DP
   rank's shard) and every piece of registered state (pt_state_register) -- here the data loader's
   position (pt_loader_register), so the resumed run reads the batch the stopped run would have read
   next. The learning-rate schedule is a function of the step, and dropout masks are keyed by
   (seed, sample position), so nothing else is needed.

   On disk. pt_ckpt_save(ctx, opt, DIR, k, opts) writes DIR/step_<k>/: a text `manifest` (format
   version, step, layout, model configuration, one line per tensor piece and state entry, each with
   its byte range and CRC32C, and the CRC32C of the manifest itself) and one data file per rank
   (rank_<r>.bin). Every rank writes its own part, all at once.

   Atomic commit. The step is first written as DIR/.tmp.step_<k> and fsynced; the ranks agree it is
   complete; it is renamed to step_<k>; then DIR/latest (one line naming it) is replaced by an atomic
   rename. That rename is the commit point: a crash before it leaves the previous checkpoint as the
   newest one. opts.keep_last = K then deletes all but the newest K (retention).

   Loading. pt_ckpt_load(ctx, opt, DIR, &k) takes the checkpoint `latest` names (or a step
   directory given directly), checks every file's size and CRC32C and the manifest's checksum; a
   damaged one is reported and the previous one is tried. It restores the state in place; the
   training loop continues at step k.

   Bit-identical. The same layout replays the same arithmetic in the same order: steps k, k+1, ...
   give the losses of the run never stopped, bit for bit (this program checks it).

   Another layout. The pieces are matched by name and by global element range, so a checkpoint of
   2 DP ranks resumes on 4, or on 1 (or with ZeRO on, or another pipeline split in tools/pttrain; a
   different tensor-parallel split is refused). The reductions then add in another order, so the
   losses agree to rounding (1e-5 here), not bit for bit.

   Stopping cleanly. A job scheduler stops a job with SIGTERM (and you with Ctrl-C, SIGINT). The
   handler only raises a flag; after each step the ranks agree on it (a signal may reach only
   some), save, and exit 0. tools/pttrain does this through pt_run (--ckpt-dir --ckpt-every --resume,
   in the harness part of ptrain.h); this program spells out the same calls.

   The program: a small GPT on the fortunes corpus (token shards, data/fortunes, made the first
   time), data parallel over the MPI ranks. It trains --steps steps three times in one process:
   (1) never stopped, as the reference; (2) saving every --every steps, with a SIGTERM raised on
   rank 0 during step --stop-at - 1, so it saves step --stop-at and stops; (3) a fresh context, model
   and loader (as a new process would make) resumes from DIR and runs to the end: its losses must
   equal (1)'s. The reference losses go to DIR/reference.txt. With --continue, the program instead
   resumes step --stop-at of DIR on this run's layout and compares with DIR/reference.txt.

   Build: mpicc -O2 -fopenmp -DPTRAIN_MPI -DPTRAIN_OPENCL -I. examples/09_checkpoint_resume.c -o build/09_checkpoint_resume -lm
   Run: mpirun -np 2 ./build/09_checkpoint_resume
   Run: mpirun -np 4 ./build/09_checkpoint_resume --continue

   Flags: the shared set (--steps --seed --batch (global) --seq --lr --layers --width --heads),
   --data DIR, --ckpt-dir DIR (default build/ckpt_09), --every N (4), --stop-at K (6), --continue.
   It ends with `check: ...` lines (and exits 1 when a check fails). */
#define PTRAIN_IMPLEMENTATION
#define PTRAIN_HARNESS
#include "ptrain.h"

#include <math.h>
#include <mpi.h> /* MPI_Allreduce below */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <unistd.h>

/* the signal handler only raises a flag; the training loop looks at it after a step */
static volatile sig_atomic_t stop_requested = 0;
static void on_signal(int sig) {
    (void)sig;
    stop_requested = 1;
}

/* removes what an earlier invocation left in dir: step_* and .tmp.step_* directories, latest */
static void clear_dir(const char *dir) {
    DIR *dd = opendir(dir), *sd;
    struct dirent *e, *f;
    char p[2048], q[4096];
    while (dd && (e = readdir(dd)) != NULL) {
        if (strncmp(e->d_name, "step_", 5) && strncmp(e->d_name, ".tmp.step_", 10)) continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if ((sd = opendir(p)) == NULL) continue;
        while ((f = readdir(sd)) != NULL)
            if (f->d_name[0] != '.') snprintf(q, sizeof q, "%s/%s", p, f->d_name), remove(q);
        closedir(sd);
        rmdir(p);
    }
    if (dd) closedir(dd);
    snprintf(p, sizeof p, "%s/latest", dir);
    remove(p);
}

typedef struct setup {
    pt_args a;
    pt_run run;       /* --data; pt_run_data finds or makes the shards and opens the loaders */
    const pt_dist *d;
    const char *dir;  /* checkpoint directory */
    int64_t every, stop_at;
} setup;

/* One training run: a fresh context, model, optimizer and loader. load: a checkpoint directory (or
   one step directory) to resume from, or NULL. Saves every s->every steps when save is set; stops
   early when a signal arrived. losses[step] receives the loss of every step run; *first and *end
   the steps it ran, [first, end). */
static int train(setup *s, const char *load, int save, int raise_at, float *losses, int64_t *first, int64_t *end) {
    const pt_dist *d = s->d;
    int rank = pt_dist_rank(d), ranks = pt_dist_size(d), ok;
    int B = (int)s->a.batch, T = (int)s->a.seq, per = B / ranks;
    int32_t *ids = (int32_t *)malloc(sizeof(int32_t) * (size_t)(per * T)), *tg = (int32_t *)malloc(sizeof(int32_t) * (size_t)(per * T));
    pt_desc desc;
    pt_ctx *ctx;
    pt_gpt_config cfg;
    pt_gpt *m = NULL;
    pt_optim_desc od;
    pt_optim *opt = NULL;
    pt_dp *dp = NULL;
    pt_graph *g = NULL;
    pt_lr_schedule sched;
    pt_ckpt_opts ck;
    int64_t step;
    memset(&desc, 0, sizeof desc);
    desc.seed = (uint64_t)s->a.seed, desc.dist = d, desc.precision = s->a.precision;
    ctx = pt_init(&desc);
    if (!ctx || !ids || !tg) return 0;
    /* the loader: this rank's slice of each global batch; its position is registered state */
    if (pt_run_data(ctx, &s->run, B, T, (uint64_t)s->a.seed) == PT_OK) {
        memset(&cfg, 0, sizeof cfg);
        cfg.vocab = s->run.vocab, cfg.max_seq = T, cfg.layers = (int)s->a.layers, cfg.width = (int)s->a.width, cfg.heads = (int)s->a.heads;
        m = pt_gpt_new(ctx, &cfg);
        memset(&od, 0, sizeof od);
        od.kind = PT_OPTIM_ADAMW, od.lr = s->a.lr, od.beta1 = 0.9f, od.beta2 = 0.95f, od.weight_decay = 0.1f, od.clip_norm = 1.0f;
        if (m) opt = pt_optim_new(ctx, &od);
        if (opt && ranks > 1) dp = pt_dp_new(ctx, d, 0);
        g = pt_graph_new(ctx);
    }
    ok = pt_dist_agree(d, opt && g && (ranks == 1 || dp) && pt_status_get(ctx) == PT_OK);
    sched.kind = PT_LR_COSINE, sched.lr = s->a.lr, sched.min_lr = s->a.lr * 0.1f, sched.warmup = 2, sched.total = s->a.steps;
    memset(&ck, 0, sizeof ck);
    ck.keep_last = 0, ck.model = &cfg; /* keep them all: --continue wants step --stop-at */
    *first = 0;
    /* resume: parameters, moments and the loader's position; the loop starts at the step loaded */
    if (ok && load && pt_ckpt_load(ctx, opt, load, first) != PT_OK) ok = 0;
    if (ok && load && rank == 0) printf("  resumed from %s at step %lld\n", load, (long long)*first);
    stop_requested = 0;
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    for (step = *first; ok && step < s->a.steps; step++) {
        pt_tensor *x, *y, *l;
        float loss, local;
        if (pt_loader_next(s->run.train, ids, tg) != PT_OK) break;
        pt_graph_reset(g);
        pt_graph_set_sample_offset(g, step * B + rank * per);
        x = pt_tensor_new(g, PT_I32, 2, per, T, 0, 0);
        y = pt_tensor_new(g, PT_I32, 2, per, T, 0, 0);
        pt_tensor_write(x, ids);
        pt_tensor_write(y, tg);
        l = pt_gpt_loss(g, m, x, y);
        pt_zero_grad(ctx);
        if (dp) pt_dp_begin(dp, 1);
        pt_backward(g, l);
        if (dp) pt_dp_finish(dp); /* gradients averaged over the ranks */
        local = loss = l ? pt_item(l) : NAN;
#ifdef PTRAIN_MPI
        MPI_Allreduce(&local, &loss, 1, MPI_FLOAT, MPI_SUM, *(MPI_Comm *)pt_dist_comm(d, PT_COMM_DP));
        loss /= (float)ranks;
#endif
        (void)local;
        pt_optim_step(opt, pt_lr_at(&sched, step));
        if (!pt_dist_agree(d, pt_status_get(ctx) == PT_OK)) break;
        losses[step] = loss;
        if (rank == 0) printf("  step %lld loss %.9g\n", (long long)step, loss);
        if (raise_at && step + 1 == raise_at && rank == 0) raise(SIGTERM); /* the scheduler's SIGTERM, on one rank */
        /* after the step: agree on a stop, save when due (a checkpoint of step k = after k steps) */
        {
            int stop = !pt_dist_agree(d, !stop_requested);
            if (save && ((s->every > 0 && (step + 1) % s->every == 0) || stop) && pt_ckpt_save(ctx, opt, s->dir, step + 1, &ck) != PT_OK) break;
            if (stop) {
                if (rank == 0) printf("  SIGTERM: saved step %lld to %s and stopped\n", (long long)(step + 1), s->dir);
                step++;
                break;
            }
        }
    }
    *end = step;
    ok = pt_dist_agree(d, ok && pt_status_get(ctx) == PT_OK);
    if (!ok && rank == 0) fprintf(stderr, "09_checkpoint_resume: %s\n", pt_error(ctx)[0] ? pt_error(ctx) : "failed on another rank");
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    pt_run_free(&s->run);
    pt_dp_free(dp);
    pt_graph_free(g);
    pt_optim_free(opt);
    pt_gpt_free(m);
    pt_shutdown(ctx);
    free(ids);
    free(tg);
    return ok;
}

int main(int argc, char **argv) {
    setup s;
    pt_layout lay = {0, 1, 1, 0};
    pt_dist *d;
    char err[1024], path[1024], stepdir[1024];
    int i, rank, cont = 0, ok = 1;
    int64_t first, end, k;
    float *ref, *got;
    memset(&s, 0, sizeof s);
    s.run.data = "data/fortunes", s.run.prepare = pt_run_fortunes;
    s.a.steps = 12, s.a.seed = 9, s.a.batch = 8, s.a.seq = 64, s.a.layers = 2, s.a.width = 64, s.a.heads = 4, s.a.lr = 2e-3f;
    s.every = 4, s.stop_at = 6;
    argc = pt_run_parse(&s.run, argc, argv, err, sizeof err);
    if (argc >= 0) argc = pt_args_parse(&s.a, argc, argv, err, sizeof err);
    if (argc < 0) {
        fprintf(stderr, "09_checkpoint_resume: %s (try --help)\n", err);
        return 2;
    }
    s.dir = s.run.ckpt_dir ? s.run.ckpt_dir : "build/ckpt_09";
    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--continue")) cont = 1;
        else if ((!strcmp(argv[i], "--every") || !strcmp(argv[i], "--stop-at")) && i + 1 < argc) {
            if (pt_args_int(argv[i], argv[i + 1], 0, 1 << 20, argv[i][2] == 'e' ? &s.every : &s.stop_at, err, sizeof err) != 0) {
                fprintf(stderr, "09_checkpoint_resume: %s\n", err);
                return 2;
            }
            i++;
        } else {
            fprintf(stderr, "09_checkpoint_resume: unknown flag '%s' (try --help)\n", argv[i]);
            return 2;
        }
    }
    if (s.a.help) {
        pt_args_usage(&s.a, "09_checkpoint_resume", "  --ckpt-dir DIR  checkpoint directory (build/ckpt_09)\n  --every N       save every N steps (4)\n"
                      "  --stop-at K     a SIGTERM during step K-1 stops run 2 after saving step K (6)\n"
                      "  --continue      resume step K of DIR on this layout, compare with DIR/reference.txt");
        return 0;
    }
    if (s.stop_at < 1 || s.stop_at >= s.a.steps) {
        fprintf(stderr, "09_checkpoint_resume: --stop-at expects 1 .. --steps - 1, found %lld\n", (long long)s.stop_at);
        return 2;
    }
    d = pt_dist_init(&argc, &argv, &lay, err, sizeof err);
    if (!d) {
        fprintf(stderr, "09_checkpoint_resume: %s\n", err);
        return 1;
    }
    s.d = d;
    rank = pt_dist_rank(d);
    snprintf(err, sizeof err, "--batch %lld must split over %d ranks", (long long)s.a.batch, pt_dist_size(d));
    if (!pt_dist_agree_msg(d, s.a.batch % pt_dist_size(d) == 0, err, sizeof err)) {
        if (rank == 0) fprintf(stderr, "09_checkpoint_resume: %s\n", err);
        pt_dist_finalize(d);
        return 2;
    }
    ref = (float *)calloc((size_t)s.a.steps, sizeof(float));
    got = (float *)calloc((size_t)s.a.steps, sizeof(float));
    snprintf(path, sizeof path, "%s/reference.txt", s.dir);
    snprintf(stepdir, sizeof stepdir, "%s/step_%09lld", s.dir, (long long)s.stop_at);
    if (!cont) {
        /* (1) the reference: never stopped */
        if (rank == 0) printf("run 1: %lld steps on %d rank(s), never stopped\n", (long long)s.a.steps, pt_dist_size(d));
        ok = train(&s, NULL, 0, 0, ref, &first, &end) && end == s.a.steps;
        /* (2) from scratch into an empty DIR, saving every N; SIGTERM arrives during step K-1 */
        if (ok && rank == 0) {
            printf("run 2: the same, saving every %lld steps to %s; SIGTERM during step %lld\n", (long long)s.every, s.dir, (long long)(s.stop_at - 1));
            remove(path); /* a stale reference of an earlier run would mislead --continue */
        }
        if (ok && rank == 0) clear_dir(s.dir); /* the checkpoints of an earlier invocation */
        if (ok) ok = train(&s, NULL, 1, (int)s.stop_at, got, &first, &end);
        if (ok && end != s.stop_at) {
            if (rank == 0) fprintf(stderr, "09_checkpoint_resume: run 2 stopped at step %lld, expected %lld\n", (long long)end, (long long)s.stop_at);
            ok = 0;
        }
        /* (3) a fresh start that resumes from DIR (the newest checkpoint: step K) and runs to the end */
        if (ok && rank == 0) printf("run 3: a new context, model, optimizer and loader resume from %s\n", s.dir);
        if (ok) ok = train(&s, s.dir, 1, 0, got, &first, &end);
        if (ok) {
            int same = first == s.stop_at && end == s.a.steps;
            for (k = first; same && k < end; k++) same = memcmp(&got[k], &ref[k], sizeof(float)) == 0;
            if (rank == 0) {
                FILE *f = fopen(path, "w");
                for (k = 0; f && k < s.a.steps; k++) fprintf(f, "%lld %.9g\n", (long long)k, ref[k]);
                if (f) fclose(f);
                if (same)
                    printf("check: resumed at step %lld, steps %lld..%lld have the losses of the run never stopped, bit for bit\n", (long long)first,
                           (long long)first, (long long)(end - 1));
                else printf("check FAILED: the resumed run (steps %lld..%lld) differs from the run never stopped\n", (long long)first, (long long)(end - 1));
            }
            ok = same;
        }
    } else {
        /* another layout: step K of DIR, the reference of the run that wrote it */
        FILE *f = fopen(path, "r");
        long long n = 0, kk;
        float v;
        while (f && n < s.a.steps && fscanf(f, "%lld %f", &kk, &v) == 2 && kk == n) ref[n++] = v;
        if (f) fclose(f);
        ok = pt_dist_agree(d, n == s.a.steps);
        if (!ok && rank == 0)
            fprintf(stderr, "09_checkpoint_resume: %s holds no reference of %lld steps: run the first Run: line (without --continue) first\n", path,
                    (long long)s.a.steps);
        if (ok && rank == 0) printf("continue: step %lld of %s, written on another layout, resumed on %d rank(s)\n", (long long)s.stop_at, s.dir, pt_dist_size(d));
        if (ok) ok = train(&s, stepdir, 0, 0, got, &first, &end);
        if (ok) {
            double worst = 0;
            for (k = first; k < end; k++) worst = fmax(worst, fabs((double)got[k] - ref[k]) / fabs((double)ref[k]));
            ok = first == s.stop_at && end == s.a.steps && worst <= 1e-5;
            if (rank == 0)
                printf("check%s: resumed at step %lld on %d rank(s), steps %lld..%lld match the reference within %.1e (largest relative difference %.2e)\n",
                       ok ? "" : " FAILED", (long long)first, pt_dist_size(d), (long long)first, (long long)(end - 1), 1e-5, worst);
        }
    }
    free(ref);
    free(got);
    pt_dist_finalize(d);
    return ok ? 0 : 1;
}
