/* test_monitor.c - per-step metrics and the JSON-lines log (>>monitor).
   Build: cc -std=c99 -I. tests/test_monitor.c -lm           (one rank; tests/monitor_test.sh)
          mpicc -std=c99 -DPTRAIN_MPI -I. tests/test_monitor.c -lm   (mpirun -np 2 ... dp | pp)
   Usage: test_monitor DIR [one|dp|pp|progress]
   one       a small GPT trained 6 steps on one rank from token shards through pt_loader; every line of
             the log parses as JSON (pt_json, strict); the header and every step's fields are
             present and agree with what the test measured itself (losses, grad norms, lr, the
             loader's wait per batch, the checkpoint's time, tokens/s, MFU from the stated formula);
             the parts of the step add up; val_loss only where given; events appear; the framework's
             memory accounting is <= the RSS high-water and explains most of the RSS growth; a log
             in a missing directory is PT_ERR_IO naming the path.
   dp        2 ranks, data parallel: only rank 0 writes; the loss is the mean of the ranks' losses;
             the bucket reductions' bytes are the gradient's bytes; a rank made slower by 60 ms on two
             steps is named the straggler by about that much, and the other rank's wait shows as
             exposed communication; another rank's event reaches the log.
   pp        2 ranks, a 1F1B pipeline: t_bubble is each rank's idle time from pt_pp_stats (mean over
             ranks in the log) and > 0; the isend bytes are the activation/gradient bytes sent.
   progress  prints "progress_on=0|1" and draws 3 steps (for the script's tty / mpirun / env checks).
   Prints PASS/FAIL lines and "N passed, N failed". */
#define PTRAIN_IMPLEMENTATION
#include "ptrain.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the log read with pt_json: a value is named by where its text starts (a line, or a value in
   one), so that a check can also look at the text itself ---- */
/* the value whose text starts at p (NULL when p is NULL or no JSON value starts there); free it */
static pt_json *js_parse(const char *p) {
    size_t pos = 0;
    return p ? pt_json_parse_next(p, strlen(p), &pos, 0, NULL, 0) : NULL;
}
/* 1 if the line is exactly one JSON object */
static int js_line_ok(const char *line) {
    pt_json *v = pt_json_parse(line, strlen(line), 0, NULL, 0);
    int ok = pt_json_type(v) == PT_JSON_OBJECT;
    pt_json_free(v);
    return ok;
}
/* the text of member key of the object whose text starts at obj, or NULL */
static const char *js_get(const char *obj, const char *key) {
    pt_json *o = js_parse(obj);
    const pt_json *v = pt_json_get(o, key);
    const char *r = v ? obj + pt_json_offset(v) : NULL;
    pt_json_free(o);
    return r;
}
/* number at key (NAN if missing or not a number) */
static double js_num(const char *obj, const char *key) {
    pt_json *v = js_parse(js_get(obj, key));
    double x = pt_json_num(v, NAN);
    pt_json_free(v);
    return x;
}
/* element i of the array at key (NAN if missing) */
static double js_arr(const char *obj, const char *key, int i) {
    pt_json *v = js_parse(js_get(obj, key));
    double x = pt_json_num(pt_json_at(v, (size_t)i), NAN);
    pt_json_free(v);
    return x;
}
/* 1 if the string at key equals s */
static int js_is(const char *obj, const char *key, const char *s) {
    pt_json *v = js_parse(js_get(obj, key));
    int ok = pt_json_str(v) && !strcmp(pt_json_str(v), s);
    pt_json_free(v);
    return ok;
}

/* the log's lines */
typedef struct { char **line; int n; } jlog;
static int read_log(const char *path, jlog *L) {
    FILE *f = fopen(path, "r");
    char buf[1 << 16];
    L->n = 0, L->line = NULL;
    if (!f) return 0;
    while (fgets(buf, sizeof buf, f)) {
        size_t k = strlen(buf);
        if (k && buf[k - 1] == '\n') buf[--k] = 0;
        L->line = (char **)realloc(L->line, sizeof(char *) * (size_t)(L->n + 1));
        L->line[L->n] = (char *)malloc(k + 1);
        memcpy(L->line[L->n++], buf, k + 1);
    }
    fclose(f);
    return 1;
}
static void free_log(jlog *L) {
    int i;
    for (i = 0; i < L->n; i++) free(L->line[i]);
    free(L->line);
}
/* the step line of step s (NULL if none or more than one) */
static const char *step_line(const jlog *L, int s) {
    const char *r = NULL;
    int i, n = 0;
    for (i = 0; i < L->n; i++)
        if (!js_get(L->line[i], "event") && js_num(L->line[i], "step") == s) r = L->line[i], n++;
    return n == 1 ? r : NULL;
}
static const char *event_line(const jlog *L, const char *name) {
    int i;
    for (i = 0; i < L->n; i++)
        if (js_is(L->line[i], "event", name)) return L->line[i];
    return NULL;
}
static const char *const step_keys[] = {"step", "loss", "grad_norm", "lr", "tokens", "tokens_per_s", "mfu", "t_step", "t_compute", "t_comm",
                                        "t_bubble", "t_data", "t_ckpt", "mem_peak_bytes", "mem_rank_bytes", "rss_rank_bytes", "coll",
                                        "straggler_rank", "straggler_s", NULL};
/* every line parses, each step line has every key, its parts add up; returns 1 if all good */
static int check_common(const jlog *L, int steps, int world, const char *tag) {
    int i, ok = 1, s;
    for (i = 0; i < L->n; i++)
        if (!js_line_ok(L->line[i])) {
            CHECKF(0, tu_name("%s: every log line is one JSON object", tag), "line %d: %.200s", i + 1, L->line[i]);
            return 0;
        }
    CHECK_WHY(1, tu_name("%s: every one of the %d log lines is one JSON object", tag, L->n), "");
    ok = L->n > 0 && js_is(L->line[0], "event", "run_start") && js_get(L->line[0], "time") && js_get(L->line[0], "config") &&
         js_num(L->line[0], "world") == world && js_get(L->line[0], "layout") && js_num(L->line[0], "peak_flops") > 0 &&
         js_get(L->line[0], "peak_source") && js_get(L->line[0], "mfu_formula") && js_get(L->line[0], "flops_per_token");
    CHECK_WHY(ok, tu_name("%s: the first line is the run_start header with time, config, world %d, layout, flops_per_token, peak_flops, peak_source, mfu_formula", tag, world),
              L->n ? L->line[0] : "(empty log)");
    for (s = 0; s < steps; s++) {
        const char *l = step_line(L, s);
        const char *const *k;
        double parts;
        if (!l) {
            CHECKF(0, tu_name("%s: one line per step", tag), "step %d has no line (or several)", s);
            return 0;
        }
        for (k = step_keys; *k; k++)
            if (!js_get(l, *k)) {
                CHECKF(0, tu_name("%s: every step line has every field", tag), "step %d lacks %s: %.300s", s, *k, l);
                return 0;
            }
        parts = js_num(l, "t_compute") + js_num(l, "t_comm") + js_num(l, "t_bubble") + js_num(l, "t_data") + js_num(l, "t_ckpt");
        if (!(js_num(l, "t_compute") >= 0 && fabs(parts - js_num(l, "t_step")) <= 1e-6 + 1e-6 * js_num(l, "t_step") && js_num(l, "t_step") > 0 &&
              js_num(l, "t_comm") >= 0 && js_num(l, "t_data") >= 0 && js_num(l, "t_ckpt") >= 0 && js_num(l, "t_bubble") >= 0)) {
            CHECKF(0, tu_name("%s: t_compute >= 0 and the parts add up to t_step", tag), "step %d: %.400s", s, l);
            return 0;
        }
        if (!(js_arr(l, "mem_rank_bytes", world - 1) > 0 && isnan(js_arr(l, "mem_rank_bytes", world)) && js_arr(l, "rss_rank_bytes", world - 1) > 0)) {
            CHECKF(0, tu_name("%s: mem_rank_bytes and rss_rank_bytes have one entry per rank", tag), "step %d: %.400s", s, l);
            return 0;
        }
        for (i = 0; i < world; i++)
            if (!(js_num(js_get(l, "mem"), "params") + js_num(js_get(l, "mem"), "grads") + js_num(js_get(l, "mem"), "optim") <= js_arr(l, "rss_rank_bytes", i))) {
                CHECKF(0, tu_name("%s: parameters + gradients + optimizer state <= every rank's RSS high-water", tag), "step %d rank %d: %.400s", s, i, l);
                return 0;
            }
    }
    CHECK_WHY(1, tu_name("%s: %d step lines, each with every field, t_compute >= 0, parts summing to t_step, params + grads + optim <= RSS per rank", tag, steps), "");
    return 1;
}

/* ---- one rank: a GPT from token shards ---- */
#define STEPS 6
static void test_one(const char *dir) {
    pt_ctx *ctx;
    pt_desc dd;
    pt_gpt_config cfg;
    pt_gpt *model;
    pt_optim_desc od;
    pt_optim *opt;
    pt_graph *g;
    pt_loader *L;
    pt_loader_desc ld;
    pt_monitor_desc md;
    pt_monitor *m;
    pt_monitor_metrics mine;
    char path[512], shard[512], ck[512], bad[512];
    const char *cfgkv[] = {"schedule", "none", "batch", "8", NULL};
    uint32_t *tok;
    int32_t x[8 * 32], y[8 * 32];
    float loss[STEPS], gn[STEPS], val = NAN;
    double wait[STEPS], wall[STEPS], ckpt_s = -1, fpt;
    int64_t rss0 = 0, rss1 = 0, i, B = 8, T = 32;
    int s;
    jlog J;
    pt_rss(&rss0, NULL);
    memset(&dd, 0, sizeof dd);
    dd.seed = 3, dd.threads = 1;
    ctx = pt_init(&dd);
    /* the data: one shard of 20000 byte tokens */
    snprintf(shard, sizeof shard, "%s/mon_shard.bin", dir);
    tok = (uint32_t *)malloc(sizeof(uint32_t) * 20000);
    for (i = 0; i < 20000; i++) tok[i] = (uint32_t)((i * 7 + i / 13) % 256);
    CHECK_WHY(pt_shard_write(ctx, shard, PT_SHARD_PTRAIN, tok, 20000, 256) == PT_OK, "one: token shard written", pt_error(ctx));
    free(tok);
    memset(&ld, 0, sizeof ld);
    {
        const char *paths[1];
        paths[0] = shard;
        ld.paths = paths, ld.npaths = 1, ld.batch = B, ld.seq = T, ld.seed = 1, ld.shuffle = 1, ld.prefetch = 0;
        L = pt_loader_new(ctx, &ld);
    }
    /* a GPT big enough that parameters, gradients and Adam moments dominate the process's memory */
    memset(&cfg, 0, sizeof cfg);
    cfg.vocab = 256, cfg.max_seq = (int32_t)T, cfg.layers = 4, cfg.width = 256, cfg.heads = 8;
    model = pt_gpt_new(ctx, &cfg);
    memset(&od, 0, sizeof od);
    od.kind = PT_OPTIM_ADAMW, od.lr = 1e-3f, od.clip_norm = 1.0f;
    opt = pt_optim_new(ctx, &od);
    g = pt_graph_new(ctx);
    if (!CHECK_WHY(L && model && opt && g, "one: loader, model, optimizer", pt_error(ctx))) return;

    /* a log in a directory that does not exist: a clear error */
    memset(&md, 0, sizeof md);
    snprintf(bad, sizeof bad, "%s/no_such_dir/run.jsonl", dir);
    md.log_path = bad;
    m = pt_monitor_new(ctx, NULL, &md);
    CHECKF(!m && pt_status_get(ctx) == PT_ERR_IO && strstr(pt_error(ctx), bad) && strstr(pt_error(ctx), "cannot open"),
           "one: a log path in a missing directory is PT_ERR_IO naming the path", "monitor %p, status %d, '%s'", (void *)m, (int)pt_status_get(ctx), pt_error(ctx));
    pt_error_clear(ctx);

    snprintf(path, sizeof path, "%s/one.jsonl", dir);
    memset(&md, 0, sizeof md);
    md.log_path = path, md.model = &cfg, md.seq = T, md.loader = L, md.total_steps = STEPS, md.config = cfgkv;
    m = pt_monitor_new(ctx, NULL, &md);
    if (!CHECK_WHY(m != NULL, "one: pt_monitor_new", pt_error(ctx))) return;
    snprintf(ck, sizeof ck, "%s/mon_ckpt", dir);
    for (s = 0; s < STEPS; s++) {
        double t0 = pt_time(), w0 = pt_loader_stats_get(L).wait_s;
        pt_tensor *xt, *yt, *l;
        pt_monitor_step ms;
        pt_monitor_step_begin(m);
        pt_loader_next(L, x, y);
        wait[s] = pt_loader_stats_get(L).wait_s - w0;
        pt_graph_reset(g);
        xt = pt_tensor_new(g, PT_I32, 2, B, T, 0, 0);
        yt = pt_tensor_new(g, PT_I32, 2, B, T, 0, 0);
        pt_tensor_write(xt, x), pt_tensor_write(yt, y);
        l = pt_gpt_loss(g, model, xt, yt);
        pt_zero_grad(ctx);
        pt_backward(g, l);
        loss[s] = pt_item(l);
        gn[s] = pt_optim_step(opt, 1e-3f);
        if (s == 2) pt_monitor_event(m, "custom", "a=%d b=%s c=%.3f lit=xyz n=12 big=%lld", 7, "q\"uote", 0.125, (long long)1 << 40);
        if (s == 3) { /* a validation loss on this step only */
            pt_graph_reset(g);
            pt_graph_set_grad(g, 0);
            xt = pt_tensor_new(g, PT_I32, 2, B, T, 0, 0);
            yt = pt_tensor_new(g, PT_I32, 2, B, T, 0, 0);
            pt_tensor_write(xt, x), pt_tensor_write(yt, y);
            val = pt_item(pt_gpt_loss(g, model, xt, yt));
            pt_graph_set_grad(g, 1);
            pt_monitor_val_loss(m, val);
        }
        if (s == 4) {
            double c0 = pt_time();
            CHECK_WHY(pt_monitor_ckpt_save(m, opt, ck, -1, NULL) == PT_OK, "one: pt_monitor_ckpt_save", pt_error(ctx));
            ckpt_s = pt_time() - c0;
        }
        memset(&ms, 0, sizeof ms);
        ms.loss = loss[s], ms.grad_norm = gn[s], ms.lr = 1e-3f, ms.tokens = B * T;
        pt_monitor_step_end(m, &ms);
        wall[s] = pt_time() - t0;
        pt_monitor_last(m, NULL, &mine);
    }
    pt_rss(NULL, &rss1);
    {
        pt_mem_stats mem = pt_mem(ctx);
        char line[256];
        pt_monitor_free(m);
        if (!CHECK_WHY(read_log(path, &J), "one: the log exists", path)) return;
        if (check_common(&J, STEPS, 1, "one")) {
            const char *h = J.line[0], *l, *e;
            int ok = 1;
            fpt = pt_gpt_flops(&cfg, 1, T) / (double)T;
            CHECK_WHY(fabs(js_num(h, "flops_per_token") - fpt) <= 1e-6 * fpt && fabs(pt_gpt_flops_per_token(&cfg, T) - fpt) <= 1e-9 * fpt,
                      "one: header flops_per_token = pt_gpt_flops(cfg, 1, T) / T (6*P + 12*L*T*C)", h);
            CHECK_WHY(js_num(js_get(h, "config"), "layers") == 4 && js_num(js_get(h, "config"), "batch") == 8 && js_is(js_get(h, "config"), "schedule", "none") &&
                          js_num(js_get(h, "layout"), "dp") == 1,
                      "one: header config has the model and the given key/values (numbers as numbers)", h);
            for (s = 0; s < STEPS && ok; s++) {
                double tps, mfu;
                l = step_line(&J, s);
                tps = B * T / js_num(l, "t_step");
                mfu = fpt * tps / js_num(h, "peak_flops");
                ok = (float)js_num(l, "loss") == loss[s] && (float)js_num(l, "grad_norm") == gn[s] && (float)js_num(l, "lr") == 1e-3f &&
                     js_num(l, "tokens") == B * T && fabs(js_num(l, "tokens_per_s") - tps) <= 1e-6 * tps && fabs(js_num(l, "mfu") - mfu) <= 1e-6 * mfu &&
                     js_num(l, "t_comm") == 0 && js_num(l, "t_bubble") == 0 && js_num(l, "t_step") <= wall[s] && js_num(l, "t_step") >= 0.5 * wall[s] &&
                     fabs(js_num(l, "t_data") - wait[s]) <= 1e-8 && js_num(l, "straggler_rank") == 0 && js_num(l, "straggler_s") == 0 &&
                     (s == 3) == (js_get(l, "val_loss") != NULL) && (s == 4) == (js_num(l, "t_ckpt") > 0);
                if (!ok) snprintf(line, sizeof line, "step %d", s);
            }
            CHECKF(ok, "one: each step's loss, grad norm, lr, tokens as given; tokens/s = tokens / t_step; mfu = fpt * tokens/s / peak; t_step within the "
                       "loop's wall time; t_data = the loader's wait; no comm, bubble or straggler; val_loss and t_ckpt only where given",
                   "%s: %.600s", line, l ? l : "(none)");
            l = step_line(&J, 3);
            CHECKF((float)js_num(l, "val_loss") == val, "one: val_loss of step 3 as given", "%.9g vs %.9g", js_num(l, "val_loss"), (double)val);
            l = step_line(&J, 4);
            e = event_line(&J, "ckpt_save");
            CHECKF(e && js_num(e, "step") == 4 && js_num(e, "ok") == 1 && js_num(e, "ckpt_step") == 5 && fabs(js_num(l, "t_ckpt") - js_num(e, "seconds")) <= 1e-6 &&
                       js_num(e, "seconds") <= ckpt_s,
                   "one: ckpt_save event (step 4, ok, checkpoint step 5) and t_ckpt of step 4 = its seconds", "%s | %.300s", e ? e : "(no event)", l);
            e = event_line(&J, "custom");
            CHECK_WHY(e && js_num(e, "step") == 2 && js_num(e, "a") == 7 && js_get(e, "b") && !strncmp(js_get(e, "b"), "\"q\\\"uote\"", 9) &&
                          js_num(e, "c") == 0.125 && js_is(e, "lit", "xyz") && js_num(e, "n") == 12 && js_num(e, "big") == 1099511627776.0 && js_get(e, "time_s"),
                      "one: pt_monitor_event's key=value members (int, escaped string, %.3f, literal text, number, %lld)", e ? e : "(no event)");
            e = J.n ? J.line[J.n - 1] : "";
            CHECK_WHY(js_is(e, "event", "run_end") && js_num(e, "steps") == STEPS, "one: the last line is run_end with the step count", e);
            l = step_line(&J, STEPS - 1);
            CHECK_WHY(js_num(l, "mem_peak_bytes") == (double)mem.peak_total && js_arr(l, "mem_rank_bytes", 0) == (double)mem.peak_total &&
                          js_num(js_get(l, "mem"), "params") == (double)mem.params && js_num(js_get(l, "mem"), "optim") == (double)mem.optim,
                      "one: mem_peak_bytes / mem_rank_bytes = pt_mem's peak, mem.params / mem.optim = pt_mem's", l);
            /* the accounting explains most of the growth of the process's memory since before pt_init
               (not under ThreadSanitizer, whose shadow memory is part of the RSS) */
#if !defined(__SANITIZE_THREAD__)
            CHECKF(mem.params + mem.grads + mem.optim <= rss1 && (double)(mem.params + mem.grads + mem.optim) >= 0.5 * (double)(rss1 - rss0) &&
                       (double)mem.peak_total >= 0.9 * (double)(rss1 - rss0),
                   "one: parameters + gradients + optimizer state <= RSS high-water and >= 50% of the RSS growth since before pt_init; the framework peak "
                   ">= 90% of that growth (it counts reserved capacity, an upper bound)",
                   "framework %.1f MB, RSS %.1f MB -> %.1f MB", mem.peak_total / 1e6, rss0 / 1e6, rss1 / 1e6);
#endif
            printf("memory: framework peak %.1f MB (params %.1f, grads %.1f, optim %.1f, activations %.1f, workspace %.1f), RSS %.1f MB -> high-water %.1f MB\n",
                   mem.peak_total / 1e6, mem.params / 1e6, mem.grads / 1e6, mem.optim / 1e6, mem.activations / 1e6, mem.workspace / 1e6, rss0 / 1e6,
                   rss1 / 1e6);
        }
        free_log(&J);
    }
    pt_loader_free(L);
    pt_graph_free(g);
    pt_optim_free(opt);
    pt_gpt_free(model);
    pt_shutdown(ctx);
}

/* ---- progress: the decision and the drawing ---- */
static void test_progress(void) {
    pt_ctx *ctx = pt_init(NULL);
    pt_monitor_desc md;
    pt_monitor *m;
    int s;
    memset(&md, 0, sizeof md);
    md.total_steps = 3, md.peak_flops = 1e9, md.print_every = getenv("PRINT_EVERY") ? atoi(getenv("PRINT_EVERY")) : 0;
    m = pt_monitor_new(ctx, NULL, &md);
    printf("progress_on=%d\n", pt_monitor_progress_on(m));
    fflush(stdout);
    for (s = 0; s < 3; s++) {
        pt_monitor_step ms;
        memset(&ms, 0, sizeof ms);
        ms.loss = 1.0f / (float)(s + 1), ms.tokens = 100;
        pt_monitor_step_end(m, &ms);
    }
    pt_monitor_free(m);
    pt_shutdown(ctx);
    CHECK_WHY(m != NULL, "progress: monitor", "");
}

#ifdef PTRAIN_MPI
/* ---- dp: 2 data-parallel ranks ---- */
static void spin(double s) {
    double t = pt_time();
    volatile double x = 0;
    while (pt_time() - t < s) x += 1;
}
static void test_dp(pt_dist *d, const char *dir) {
    pt_ctx *ctx;
    pt_desc dd;
    pt_gpt_config cfg;
    pt_gpt *model;
    pt_optim_desc od;
    pt_optim *opt;
    pt_graph *g;
    pt_dp *dp;
    pt_monitor_desc md;
    pt_monitor *m;
    char path[512], other[512];
    int32_t x[4 * 16], y[4 * 16];
    float loss[STEPS], mean[STEPS];
    int s, i, rank = pt_dist_rank(d), nd = pt_dist_layout(d).dp;
    int64_t B = 4, T = 16, gbytes;
    jlog J;
    memset(&dd, 0, sizeof dd);
    dd.seed = 5, dd.threads = 1, dd.dist = d;
    ctx = pt_init(&dd);
    memset(&cfg, 0, sizeof cfg);
    cfg.vocab = 64, cfg.max_seq = (int32_t)T, cfg.layers = 2, cfg.width = 64, cfg.heads = 4;
    model = pt_gpt_new(ctx, &cfg);
    memset(&od, 0, sizeof od);
    od.kind = PT_OPTIM_ADAMW, od.lr = 1e-3f;
    opt = pt_optim_new(ctx, &od);
    g = pt_graph_new(ctx);
    dp = pt_dp_new(ctx, d, 16 << 10);
    gbytes = pt_param_numel(ctx) * 4;
    snprintf(path, sizeof path, "%s/dp.%d.jsonl", dir, rank); /* every rank names its own file: only rank 0's may appear */
    remove(path);
    memset(&md, 0, sizeof md);
    md.log_path = path, md.model = &cfg, md.seq = T, md.total_steps = STEPS;
    m = pt_monitor_new(ctx, d, &md);
    if (!CHECK_WHY(model && opt && g && dp && m, "dp: setup", pt_error(ctx))) return;
    for (s = 0; s < STEPS; s++) {
        pt_tensor *xt, *yt, *l;
        pt_monitor_step ms;
        for (i = 0; i < B * T; i++) x[i] = (int32_t)((i * 5 + s * 3 + rank * 11) % 64), y[i] = (int32_t)((i * 3 + s + rank) % 64);
        pt_graph_reset(g);
        xt = pt_tensor_new(g, PT_I32, 2, B, T, 0, 0);
        yt = pt_tensor_new(g, PT_I32, 2, B, T, 0, 0);
        pt_tensor_write(xt, x), pt_tensor_write(yt, y);
        l = pt_gpt_loss(g, model, xt, yt);
        if ((s == 3 || s == 4) && rank == 1) spin(0.06); /* a straggler */
        pt_zero_grad(ctx);
        pt_dp_begin_step(dp, 1);
        pt_backward(g, l);
        pt_dp_finish(dp);
        loss[s] = pt_item(l);
        pt_optim_step(opt, 1e-3f);
        if (s == 2 && rank == 1) pt_monitor_event(m, "from_rank1", "x=%d", 5);
        memset(&ms, 0, sizeof ms);
        ms.loss = loss[s], ms.grad_norm = NAN, ms.lr = 1e-3f, ms.tokens = B * T * nd;
        pt_monitor_step_end(m, &ms);
        MPI_Allreduce(&loss[s], &mean[s], 1, MPI_FLOAT, MPI_SUM, *(MPI_Comm *)pt_dist_comm(d, PT_COMM_WORLD));
        mean[s] /= (float)nd;
    }
    pt_monitor_free(m);
    snprintf(other, sizeof other, "%s/dp.1.jsonl", dir);
    {
        FILE *f = rank == 0 ? fopen(other, "r") : NULL;
        CHECK_WHY(rank != 0 || !f, "dp: only rank 0 writes (rank 1's log path was never created)", other);
        if (f) fclose(f);
    }
    if (rank == 0) read_log(path, &J);
    tu_solo(1); /* the checks of the log: rank 0 alone */
    if (rank == 0 && check_common(&J, STEPS, 2, "dp")) {
        const char *l = NULL, *e;
        int ok = 1;
        for (s = 0; s < STEPS && ok; s++) {
            l = step_line(&J, s);
            ok = fabs(js_num(l, "loss") - (double)mean[s]) <= 1e-6 * fabs(mean[s]) && js_num(js_get(js_get(l, "coll"), "iallreduce"), "bytes") == (double)gbytes &&
                 js_get(l, "grad_norm") && !strncmp(js_get(l, "grad_norm"), "null", 4);
        }
        CHECKF(ok, "dp: loss = mean of the ranks' losses; iallreduce bytes per step = the gradient's bytes; a grad norm not given is null",
               "step %d (gradient %lld bytes): %.600s", s - 1, (long long)gbytes, l);
        ok = 1;
        for (s = 3; s <= 4 && ok; s++) {
            l = step_line(&J, s);
            ok = js_num(l, "straggler_rank") == 1 && js_num(l, "straggler_s") >= 0.035 && js_num(l, "straggler_s") <= 0.5 && js_arr(l, "t_wait_rank", 0) >= 0.04 &&
                 js_num(l, "t_comm") >= 0.02;
        }
        CHECKF(ok, "dp: a rank slowed by 60 ms is the straggler by 35..500 ms; the other rank's wait is exposed communication", "step %d: %.600s", s - 1, l);
        e = event_line(&J, "from_rank1");
        CHECK_WHY(e && js_num(e, "rank") == 1 && js_num(e, "step") == 2 && js_num(e, "x") == 5, "dp: rank 1's event is in rank 0's log (rank 1, step 2)", e ? e : "(none)");
        printf("dp: step 4: %s\n", step_line(&J, 4));
    }
    if (rank == 0) free_log(&J);
    tu_solo(0);
    pt_dp_free(dp);
    pt_graph_free(g);
    pt_optim_free(opt);
    pt_gpt_free(model);
    pt_shutdown(ctx);
}

/* ---- pp: a 2-rank 1F1B pipeline of linear layers ---- */
#define PW 64
#define PL 4
#define PB 16
#define PM 4
typedef struct { pt_linear_layer layer[PL]; int32_t first[3]; float x[PB * PW], y[PB]; } pmodel;
static pt_tensor *pstage(pt_graph *g, int stage, int mb, pt_tensor *h, void *user) {
    pmodel *pm = (pmodel *)user;
    int rows = PB / PM, l;
    int64_t xs[2], ys[2];
    xs[0] = rows, xs[1] = PW, ys[0] = rows, ys[1] = 1;
    if (stage == 0) h = pt_tensor_from(g, PT_F32, 2, xs, pm->x + (size_t)mb * rows * PW);
    for (l = pm->first[stage]; h && l < pm->first[stage + 1]; l++) {
        h = pt_linear_fwd(g, &pm->layer[l], h);
        if (l < PL - 1) h = pt_gelu(g, h);
    }
    if (stage == 1) {
        pt_tensor *dlt = pt_sub(g, h, pt_tensor_from(g, PT_F32, 2, ys, pm->y + (size_t)mb * rows));
        h = pt_mean(g, pt_mul(g, dlt, dlt));
    }
    return h;
}
static void test_pp(pt_dist *d, const char *dir) {
    pt_ctx *ctx;
    pt_desc dd;
    pt_optim_desc od;
    pt_optim *opt;
    pt_pp *pp;
    pt_pp_desc pd;
    pt_monitor_desc md;
    pt_monitor *m;
    pt_monitor_metrics mine;
    static pmodel pm;
    char path[512];
    int s, i, r = pt_dist_coords(d).pp, ok = 1;
    double idle[STEPS], mean_idle[STEPS], sent[STEPS], max_sent[STEPS], prev = 0;
    jlog J;
    memset(&dd, 0, sizeof dd);
    dd.seed = 9, dd.threads = 1, dd.dist = d;
    ctx = pt_init(&dd);
    pm.first[0] = 0, pm.first[1] = PL / 2, pm.first[2] = PL;
    for (i = pm.first[r]; i < pm.first[r + 1]; i++) {
        char name[32];
        snprintf(name, sizeof name, "layer.%d", i);
        pm.layer[i] = pt_linear_new(ctx, name, PW, i == PL - 1 ? 1 : PW, 1, 0.125f);
    }
    for (i = 0; i < PB * PW; i++) pm.x[i] = (float)((i * 7) % 11) * 0.1f - 0.5f;
    for (i = 0; i < PB; i++) pm.y[i] = (float)(i % 3) * 0.3f;
    memset(&od, 0, sizeof od);
    od.kind = PT_OPTIM_ADAMW, od.lr = 1e-3f;
    opt = pt_optim_new(ctx, &od);
    memset(&pd, 0, sizeof pd);
    pd.kind = PT_PP_1F1B, pd.micro_batches = PM, pd.forward = pstage, pd.user = &pm;
    pp = pt_pp_new(ctx, &pd);
    snprintf(path, sizeof path, "%s/pp.jsonl", dir);
    memset(&md, 0, sizeof md);
    md.log_path = path, md.pp = pp, md.flops_per_token = 1e6, md.peak_flops = 1e10;
    m = pt_monitor_new(ctx, d, &md);
    if (!CHECK_WHY(opt && pp && m, "pp: setup", pt_error(ctx))) return;
    for (s = 0; s < STEPS; s++) {
        pt_pp_stats st;
        pt_monitor_step ms;
        float l;
        pt_zero_grad(ctx);
        l = pt_pp_step(pp, 0, 1);
        pt_optim_step(opt, 1e-3f);
        st = pt_pp_stats_get(pp);
        idle[s] = st.step_s - st.busy_s;
        sent[s] = (double)st.bytes_sent - prev, prev = (double)st.bytes_sent;
        memset(&ms, 0, sizeof ms);
        ms.loss = l, ms.grad_norm = NAN, ms.lr = 1e-3f, ms.tokens = PB;
        pt_monitor_step_end(m, &ms);
        pt_monitor_last(m, NULL, &mine);
        if (mine.t_bubble != idle[s]) ok = 0;
        MPI_Allreduce(&idle[s], &mean_idle[s], 1, MPI_DOUBLE, MPI_SUM, *(MPI_Comm *)pt_dist_comm(d, PT_COMM_WORLD));
        MPI_Allreduce(&sent[s], &max_sent[s], 1, MPI_DOUBLE, MPI_MAX, *(MPI_Comm *)pt_dist_comm(d, PT_COMM_WORLD));
        mean_idle[s] /= 2;
    }
    CHECKF(ok, "pp: each rank's t_bubble = its pt_pp_stats step_s - busy_s", "rank %d: %.9g vs %.9g", r, mine.t_bubble, idle[STEPS - 1]);
    pt_monitor_free(m);
    if (r == 0) read_log(path, &J);
    tu_solo(1); /* the checks of the log: rank 0 alone */
    if (r == 0 && check_common(&J, STEPS, 2, "pp")) {
        const char *l = NULL;
        ok = 1;
        for (s = 0; s < STEPS && ok; s++) {
            l = step_line(&J, s);
            ok = js_num(l, "t_bubble") > 0 && fabs(js_num(l, "t_bubble") - mean_idle[s]) <= 1e-6 * mean_idle[s] + 1e-12 &&
                 js_num(js_get(js_get(l, "coll"), "isend"), "bytes") == max_sent[s];
        }
        CHECKF(ok, "pp: t_bubble > 0 = the mean over ranks of pt_pp_stats' idle time; isend bytes = the bytes pt_pp sent (largest rank)",
               "step %d: idle %.9g, sent %.0f: %.600s", s - 1, mean_idle[s - 1], max_sent[s - 1], l);
        printf("pp: step 5: %s\n", step_line(&J, 5));
    }
    if (r == 0) free_log(&J);
    tu_solo(0);
    pt_pp_free(pp);
    pt_optim_free(opt);
    pt_shutdown(ctx);
}
#endif

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : ".";
    const char *mode = argc > 2 ? argv[2] : "one";
#ifdef PTRAIN_MPI
    if (!strcmp(mode, "dp") || !strcmp(mode, "pp")) {
        char err[512];
        pt_layout lay = {0, 1, 1, 0};
        pt_dist *d;
        int rc;
        if (!strcmp(mode, "pp")) lay.dp = 1, lay.pp = 0;
        d = pt_dist_init(&argc, &argv, &lay, err, sizeof err);
        if (!d) {
            printf("FAIL pt_dist_init: %s\n0 passed, 1 failed\n", err);
            return 1;
        }
        tu_mpi_init(NULL);
        if (!strcmp(mode, "dp")) test_dp(d, dir);
        else test_pp(d, dir);
        rc = tu_summary();
        pt_dist_finalize(d);
        return rc;
    }
#endif
    if (!strcmp(mode, "progress")) test_progress();
    else test_one(dir);
    return tu_summary();
}
