/* test_trace.c - timelines and the per-op profile (>>trace).
   Usage: mpirun -np N test_trace [DIR] (DIR: where the trace files go, default build/tests; N = pipeline size: a staged GPT on pp N, 1F1B) or test_trace without MPI
   (one rank: the same micro-batches run one after another). Trains a tiny GPT for a few steps with tracing
   on, then checks the Chrome trace file (read with pt_json): valid JSON, one process_name per rank and
   events only on ranks that exist, per traced step and rank m forward and m backward events (each
   micro-batch once; the same per chunk for interleaved 1F1B, v = 2, in a second context), communication
   events with bytes (and none on one rank), on tid 0 forward,
   backward and bubble disjoint and every event nested in or disjoint from the others, and the bubble
   events' sum per rank within 10% of sum(pt_pp_stats my_bubble x step_s) over the same steps (printed).
   Also: tracing off writes no file and records nothing; a bounded buffer drops and counts; an
   unwritable path fails on every rank with the same error; the profile's matmul and linear FLOPs
   equal the 2*M*N*K sums of the shapes used, and the table prints. Rank 0 prints PASS/FAIL lines and
   "N passed, N failed". With PTRAIN_PROFILE=1 the profile is on from pt_init (checked), training included. */
#define PTRAIN_IMPLEMENTATION
#include "ptrain.h"
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { T = 16, ROWS = 2, M = 4, STEPS = 4, ISTEPS = 2, MAXR = 16 };

/* ---- the trace read with pt_json (strict: also UTF-8, escapes, unique keys) ---- */
static char jerr[400]; /* why the last jload failed */
static const char *jstr(const pt_json *o, const char *key) {
    const char *s = pt_json_str(pt_json_get(o, key));
    return s ? s : "";
}
static double jnum(const pt_json *o, const char *key, double dflt) { return pt_json_num(pt_json_get(o, key), dflt); }
/* the file's JSON tree, NULL (and jerr) when it cannot be read or does not parse */
static pt_json *jload(const char *path) {
    FILE *f = fopen(path, "rb");
    long n;
    char *text;
    pt_json *root;
    snprintf(jerr, sizeof jerr, "cannot open");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END), n = ftell(f), fseek(f, 0, SEEK_SET);
    text = (char *)malloc((size_t)n + 1);
    if (fread(text, 1, (size_t)n, f) != (size_t)n) n = 0;
    fclose(f);
    root = pt_json_parse(text, (size_t)n, 0, jerr, sizeof jerr);
    free(text);
    return root;
}

/* ---- the staged GPT ---- */
static pt_dist *D;
static int32_t IDS[M * ROWS * T], TGT[M * ROWS * T];
static pt_tensor *stage_fn(pt_graph *g, int stage, int mb, pt_tensor *x, void *user) {
    int64_t shp[2];
    pt_tensor *ids = NULL, *tg = NULL;
    pt_gpt *model = (pt_gpt *)user;
    shp[0] = ROWS, shp[1] = T;
    if (stage == 0) ids = pt_tensor_from(g, PT_I32, 2, shp, IDS + mb * ROWS * T);
    if (stage == model->nstages - 1) tg = pt_tensor_from(g, PT_I32, 2, shp, TGT + mb * ROWS * T);
    return pt_gpt_stage_fwd(g, model, stage, x, ids, tg);
}

static int file_exists(const char *p) {
    FILE *f = fopen(p, "rb");
    if (f) fclose(f);
    return f != NULL;
}

typedef struct per_rank {
    double bubble_ref;   /* sum over the traced steps of my_bubble x step_s (seconds) */
    double ibubble_ref;  /* the same for the interleaved run */
    double bad_path_ok;  /* the unwritable path failed here with PT_ERR_IO and the expected message */
    double off_ok;       /* tracing off: no events here */
    double start_twice;  /* pt_trace_start while recording: PT_ERR_STATE */
} per_rank;

/* nesting on one track: sorted by start (longer first on ties), each event inside the open one or after it */
typedef struct ev {
    double ts, end;
    int cat; /* 0 forward, 1 backward, 2 bubble, 3 other */
} ev;
static int by_ts(const void *a, const void *b) {
    const ev *x = (const ev *)a, *y = (const ev *)b;
    if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
    return x->end > y->end ? -1 : x->end < y->end;
}

/* the trace of `steps` steps of a schedule with v chunks; ref[r]: rank r's sum of my_bubble x step_s; full: also
   the checks of the main run (per_rank flags) */
static void check_trace(const char *path, int size, const double *ref, int pp, int v, int steps, const per_rank *pr) {
    pt_json *root = jload(path);
    const pt_json *evs;
    int r, i, s, c, nev_all;
    const char *sched = v > 1 ? "interleaved" : "1F1B";
    int names[MAXR] = {0}, fwd[MAXR][STEPS][M][2], bwd[MAXR][STEPS][M][2], comm_bytes[MAXR] = {0}, comm_any[MAXR] = {0}, stray = 0, badstep = 0;
    int sr_pp[MAXR] = {0};
    double bubble[MAXR] = {0};
    int ok = root != NULL;
    memset(fwd, 0, sizeof fwd), memset(bwd, 0, sizeof bwd);
    CHECKF(ok, tu_name("%s: trace file is valid JSON", sched), "%s does not parse: %s", path, jerr);
    if (!ok) return;
    evs = pt_json_get(root, "traceEvents");
    nev_all = (int)pt_json_len(evs);
    CHECK(pt_json_type(evs) == PT_JSON_ARRAY && nev_all > 0, tu_name("%s: traceEvents is a non-empty array", sched));
    CHECK(!strcmp(jstr(root, "displayTimeUnit"), "ms"), tu_name("%s: displayTimeUnit is ms", sched));
    CHECK(jnum(pt_json_get(root, "otherData"), "dropped_events", -1) == 0, tu_name("%s: no events dropped (default bound)", sched));
    for (i = 0; i < nev_all; i++) {
        const pt_json *e = pt_json_at(evs, (size_t)i), *a = pt_json_get(e, "args");
        const char *ph = jstr(e, "ph"), *cat = jstr(e, "cat");
        int pid = (int)jnum(e, "pid", -1), step = (int)jnum(a, "step", -1), mb = (int)jnum(a, "mb", -1), ch = (int)jnum(a, "chunk", -1);
        if (pid < 0 || pid >= size) {
            stray++;
            continue;
        }
        if (!strcmp(ph, "M")) {
            if (!strcmp(jstr(e, "name"), "process_name")) names[pid]++;
            continue;
        }
        if (strcmp(ph, "X") || jnum(e, "dur", -1) < 0 || jnum(e, "ts", -1) < 0) {
            stray++;
            continue;
        }
        if (!strcmp(cat, "forward") || !strcmp(cat, "backward")) {
            if (step < 0 || step >= steps || mb < 0 || mb >= M || ch < 0 || ch >= v) badstep++;
            else if (cat[0] == 'f') fwd[pid][step][mb][ch]++;
            else bwd[pid][step][mb][ch]++;
        }
        if (!strcmp(cat, "bubble")) bubble[pid] += jnum(e, "dur", 0) * 1e-6;
        if (!strcmp(cat, "comm") || !strcmp(cat, "sendrecv")) {
            comm_any[pid]++;
            if (jnum(a, "bytes", 0) > 0 && pt_json_get(a, "comm")) comm_bytes[pid]++;
            if (!strcmp(cat, "sendrecv") && !strcmp(jstr(a, "comm"), "pp") && jnum(a, "mb", -1) >= 0) sr_pp[pid]++;
        }
    }
    CHECKF(!stray, tu_name("%s: every event is a metadata or complete event of an existing rank", sched), "%d stray events", stray);
    CHECKF(!badstep, tu_name("%s: forward/backward events carry a traced step, micro-batch and chunk", sched), "%d without", badstep);
    for (r = 0; r < size; r++) {
        int each = 1, nev = 0, overlap = 0, nest = 0, top = 0;
        double rel;
        ev *list = (ev *)malloc(sizeof(ev) * (size_t)(nev_all + 1)), *stack[256];
        CHECKF(names[r] == 1, tu_name("%s rank %d: one process_name (one track per rank)", sched, r), "%d", names[r]);
        for (s = 0; s < steps; s++)
            for (i = 0; i < M; i++)
                for (c = 0; c < v; c++) each &= fwd[r][s][i][c] == 1 && bwd[r][s][i][c] == 1;
        CHECKF(each, tu_name("%s rank %d: per step one forward and one backward event per micro-batch and chunk (m = %d, v = %d)", sched, r, M, v),
               "counts differ (step 0 mb 0: %d F %d B)", fwd[r][0][0][0], bwd[r][0][0][0]);
        if (size > 1) {
            CHECKF(comm_bytes[r] > 0, tu_name("%s rank %d: communication events with comm and bytes", sched, r), "%d", comm_bytes[r]);
            CHECKF(sr_pp[r] > 0, tu_name("%s rank %d: pipeline send/recv events (comm pp, with micro-batch)", sched, r), "%d", sr_pp[r]);
        } else {
            CHECKF(comm_any[r] == 0, tu_name("%s: one rank: no MPI events", sched), "%d communication events", comm_any[r]);
        }
        rel = fabs(bubble[r] - ref[r]) / (ref[r] > 0 ? ref[r] : 1e-30);
        printf("rank %d: %s bubble in the trace %.6f s, pt_pp_stats my_bubble x step_s %.6f s over %d steps (relative difference %.2e)\n", r, sched,
               bubble[r], ref[r], steps, rel);
        CHECKF(rel <= 0.10 && (pp == 1 || bubble[r] > 0), tu_name("%s rank %d: trace bubble within 10%% of pt_pp_stats' (pp %d)", sched, r, pp),
               "%.6f vs %.6f s", bubble[r], ref[r]);
        /* tid 0 of rank r: forward, backward and bubble disjoint; every event nested or disjoint */
        for (i = 0; i < nev_all; i++) {
            const pt_json *e = pt_json_at(evs, (size_t)i);
            const char *cat = jstr(e, "cat");
            if ((int)jnum(e, "pid", -1) != r || jnum(e, "tid", -1) != 0 || strcmp(jstr(e, "ph"), "X")) continue;
            list[nev].ts = jnum(e, "ts", 0), list[nev].end = list[nev].ts + jnum(e, "dur", 0);
            list[nev++].cat = !strcmp(cat, "forward") ? 0 : !strcmp(cat, "backward") ? 1 : !strcmp(cat, "bubble") ? 2 : 3;
        }
        qsort(list, (size_t)nev, sizeof(ev), by_ts);
        {
            double last = -1;
            for (i = 0; i < nev; i++) {
                if (list[i].cat == 3) continue;
                if (list[i].ts < last - 1e-3) overlap++;
                last = list[i].end;
            }
        }
        for (i = 0; i < nev; i++) { /* a stack of open events */
            while (top && stack[top - 1]->end <= list[i].ts + 1e-3) top--;
            if (top && list[i].end > stack[top - 1]->end + 1e-3) nest++;
            if (top < 256) stack[top++] = &list[i];
        }
        CHECKF(nev > 0 && !overlap, tu_name("%s rank %d: tid 0 forward/backward/bubble events do not overlap", sched, r), "%d overlaps of %d", overlap, nev);
        CHECKF(!nest, tu_name("%s rank %d: tid 0 events nest properly (Perfetto slices)", sched, r), "%d partial overlaps", nest);
        free(list);
        if (!pr) continue;
        CHECK(pr[r].bad_path_ok, tu_name("rank %d: an unwritable path fails with PT_ERR_IO and the same message", r));
        CHECK(pr[r].off_ok, tu_name("rank %d: tracing off records nothing", r));
        CHECK(pr[r].start_twice, tu_name("rank %d: pt_trace_start while recording is PT_ERR_STATE", r));
    }
    pt_json_free(root);
}

/* the bounded buffer: max 8 events per rank, the rest dropped and counted */
static void check_dropped(const char *path, int size) {
    pt_json *root = jload(path);
    const pt_json *evs, *od;
    int i, x[MAXR] = {0}, ok = root != NULL, over = 0;
    double total = 0;
    CHECKF(ok, "bounded trace file is valid JSON", "%s", jerr);
    if (!ok) return;
    evs = pt_json_get(root, "traceEvents"), od = pt_json_get(root, "otherData");
    for (i = 0; i < (int)pt_json_len(evs); i++) {
        int pid = (int)jnum(pt_json_at(evs, (size_t)i), "pid", -1);
        if (!strcmp(jstr(pt_json_at(evs, (size_t)i), "ph"), "X") && pid >= 0 && pid < size) x[pid]++;
    }
    for (i = 0; i < size; i++) over |= x[i] > 8 || x[i] == 0;
    for (i = 0; i < (int)pt_json_len(pt_json_get(od, "dropped_per_rank")); i++) total += pt_json_num(pt_json_at(pt_json_get(od, "dropped_per_rank"), (size_t)i), 0);
    CHECKF(!over, "max_events 8: at most 8 events per rank kept", "rank 0 kept %d", x[0]);
    CHECKF(jnum(od, "dropped_events", 0) > 0 && jnum(od, "dropped_events", 0) == total, "dropped events counted in otherData (total = sum per rank)",
           "dropped %g, per rank sum %g", jnum(od, "dropped_events", 0), total);
    pt_json_free(root);
}

/* the profile: FLOPs of matmul and linear against 2*M*N*K of the shapes used here */
static void check_profile(void) {
    pt_ctx *ctx = pt_init(NULL);
    pt_graph *g = pt_graph_new(ctx);
    pt_profile_entry e[64];
    const pt_profile_entry *mm = NULL, *lin = NULL;
    /* (batch, M, N, K, ta, tb) */
    static const int shapes[4][6] = {{1, 3, 7, 5, 0, 0}, {1, 4, 6, 9, 1, 0}, {2, 3, 4, 5, 0, 1}, {3, 8, 2, 6, 1, 1}};
    double want = 0, want_lin;
    int i, n;
    FILE *f;
    char buf[4096] = "";
    pt_tensor *sum = NULL;
    if (getenv("PTRAIN_PROFILE") && atoi(getenv("PTRAIN_PROFILE")) > 0) /* the env switch turns it on at pt_init */
        CHECK(ctx->prof != NULL, "PTRAIN_PROFILE=1: profile on from pt_init");
    else
        CHECK(pt_profile_get(ctx, NULL, 0) == 0 && ctx->prof == NULL, "profile off by default: nothing summed");
    pt_profile_enable(ctx, 1);
    for (i = 0; i < 4; i++) {
        int B = shapes[i][0], Mm = shapes[i][1], N = shapes[i][2], K = shapes[i][3], ta = shapes[i][4], tb = shapes[i][5];
        pt_tensor *a = B > 1 ? pt_tensor_new(g, PT_F32, 3, B, ta ? K : Mm, ta ? Mm : K, 0) : pt_tensor_new(g, PT_F32, 2, ta ? K : Mm, ta ? Mm : K, 0, 0);
        pt_tensor *b = B > 1 ? pt_tensor_new(g, PT_F32, 3, B, tb ? N : K, tb ? K : N, 0) : pt_tensor_new(g, PT_F32, 2, tb ? N : K, tb ? K : N, 0, 0);
        pt_tensor *c;
        ctx->be->fill(ctx, a, 0.5f), ctx->be->fill(ctx, b, 0.25f);
        pt_requires_grad(a), pt_requires_grad(b);
        c = pt_sum(g, pt_matmul(g, a, b, ta, tb));
        sum = sum ? pt_add(g, sum, c) : c;
        want += 2.0 * B * Mm * N * K;
    }
    {
        pt_tensor *x = pt_tensor_new(g, PT_F32, 2, 10, 12, 0, 0), *w = pt_tensor_new(g, PT_F32, 2, 6, 12, 0, 0), *bb = pt_tensor_new(g, PT_F32, 1, 6, 0, 0, 0);
        ctx->be->fill(ctx, x, 0.1f), ctx->be->fill(ctx, w, 0.2f), ctx->be->fill(ctx, bb, 0.3f);
        pt_requires_grad(w), pt_requires_grad(bb);
        sum = pt_add(g, sum, pt_sum(g, pt_linear(g, x, w, bb)));
        want_lin = 2.0 * 10 * 12 * 6 + 10 * 6;
    }
    CHECKF(pt_backward(g, sum) == PT_OK, "profiled graph runs backward", "%s", pt_error(ctx));
    n = pt_profile_get(ctx, e, 64);
    for (i = 0; i < n; i++) {
        if (!strcmp(e[i].op, "pt_matmul")) mm = &e[i];
        if (!strcmp(e[i].op, "pt_linear")) lin = &e[i];
    }
    CHECK(mm && lin, "profile has pt_matmul and pt_linear rows");
    if (mm && lin) {
        CHECKF(mm->calls == 4 && mm->bwd_calls == 4, "pt_matmul: 4 forward and 4 backward calls", "%lld / %lld", (long long)mm->calls,
               (long long)mm->bwd_calls);
        CHECKF(mm->fwd_flops == want, "pt_matmul forward FLOPs = sum of 2*batch*M*N*K", "%.0f vs %.0f", mm->fwd_flops, want);
        CHECKF(mm->bwd_flops == 2 * want, "pt_matmul backward FLOPs = 2 x (both inputs need gradients)", "%.0f vs %.0f", mm->bwd_flops, 2 * want);
        CHECKF(lin->fwd_flops == want_lin, "pt_linear forward FLOPs = 2*rows*in*out + bias", "%.0f vs %.0f", lin->fwd_flops, want_lin);
        CHECKF(lin->bwd_flops == want_lin, "pt_linear backward FLOPs: dw (2*rows*in*out) + db (x needs none)", "%.0f vs %.0f", lin->bwd_flops,
               want_lin);
        CHECK(mm->fwd_s > 0 && mm->bwd_s > 0 && mm->fwd_bytes > 0 && mm->bwd_bytes > 0, "pt_matmul has time and bytes");
        for (i = 1; i < n; i++)
            if (e[i].fwd_s + e[i].bwd_s > e[i - 1].fwd_s + e[i - 1].bwd_s) break;
        CHECK(i == n, "pt_profile_get sorts by time");
    }
    if ((f = tmpfile()) != NULL) {
        size_t k;
        pt_profile_print(ctx, f);
        rewind(f);
        k = fread(buf, 1, sizeof buf - 1, f);
        buf[k] = 0;
        fclose(f);
    }
    CHECK(strstr(buf, "pt_matmul") && strstr(buf, "GFLOP") && strstr(buf, "total"), "pt_profile_print prints the table");
    printf("%s", buf);
    pt_profile_enable(ctx, 0);
    pt_profile_reset(ctx);
    pt_graph_reset(g);
    {
        pt_tensor *a = pt_tensor_new(g, PT_F32, 2, 2, 2, 0, 0);
        ctx->be->fill(ctx, a, 1.0f);
        pt_matmul(g, a, a, 0, 0);
    }
    CHECK(pt_profile_get(ctx, NULL, 0) == 0, "profile off again: nothing summed");
    pt_shutdown(ctx);
}

int main(int argc, char **argv) {
    char err[512], path[512], ipath[512], off_path[512], small_path[512], bad_path[512], want_msg[600];
    const char *dir;
    pt_layout lay;
    pt_desc desc;
    pt_optim_desc od;
    pt_pp_desc pd;
    pt_ctx *ctx;
    pt_optim *opt;
    pt_pp *pp;
    pt_gpt *model;
    pt_rng rng;
    per_rank mine, all[MAXR];
    int rank, size, step, i, p;
    memset(&lay, 0, sizeof lay);
    lay.dp = 1, lay.tp = 1, lay.pp = 0;
    D = pt_dist_init(&argc, &argv, &lay, err, sizeof err);
    if (!D) {
        printf("FAIL pt_dist_init: %s\n0 passed, 1 failed\n", err);
        return 1;
    }
    rank = pt_dist_rank(D), size = pt_dist_size(D), p = pt_dist_layout(D).pp;
    if (size > MAXR) {
        printf("FAIL at most %d ranks\n0 passed, 1 failed\n", MAXR);
        return 1;
    }
    dir = argc > 1 ? argv[1] : "build/tests";
    if (rank != 0 && !freopen("/dev/null", "w", stdout)) return 1; /* rank 0 reports (the others send their numbers) */
    snprintf(path, sizeof path, "%s/trace_np%d.json", dir, size);
    snprintf(ipath, sizeof ipath, "%s/trace_interleaved_np%d.json", dir, size);
    snprintf(off_path, sizeof off_path, "%s/trace_off_np%d.json", dir, size);
    snprintf(small_path, sizeof small_path, "%s/trace_small_np%d.json", dir, size);
    snprintf(bad_path, sizeof bad_path, "%s/no_such_dir/trace.json", dir);
    snprintf(want_msg, sizeof want_msg, "cannot open %s.tmp", bad_path);
    if (rank == 0) remove(path), remove(ipath), remove(off_path), remove(small_path);
    memset(&mine, 0, sizeof mine);

    memset(&desc, 0, sizeof desc);
    desc.seed = 5, desc.dist = D, desc.threads = 1;
    ctx = pt_init(&desc);
    {
        pt_gpt_config cfg;
        int32_t first[MAXR + 1], me = pt_dist_coords(D).pp;
        memset(&cfg, 0, sizeof cfg);
        cfg.vocab = 64, cfg.max_seq = T, cfg.layers = 2 * p, cfg.width = 32, cfg.heads = 4;
        for (i = 0; i <= p; i++) first[i] = 2 * i;
        model = pt_gpt_new_stages(ctx, &cfg, p, first, 1, &me);
    }
    memset(&od, 0, sizeof od);
    od.kind = PT_OPTIM_ADAMW, od.lr = 1e-3f;
    opt = pt_optim_new(ctx, &od);
    memset(&pd, 0, sizeof pd);
    pd.kind = PT_PP_1F1B, pd.micro_batches = M, pd.forward = stage_fn, pd.user = model;
    pp = model && opt ? pt_pp_new(ctx, &pd) : NULL;
    if (!pp) {
        printf("FAIL setup: %s\n0 passed, 1 failed\n", pt_error(ctx));
        return 1;
    }
    rng = pt_rng_seed(11);

    /* tracing off: a step writes no file and records nothing */
    for (i = 0; i < M * ROWS * T; i++) IDS[i] = (int32_t)(pt_rng_u32(&rng) % 64), TGT[i] = (int32_t)(pt_rng_u32(&rng) % 64);
    pt_zero_grad(ctx);
    pt_pp_step(pp, 0, 1);
    pt_optim_step(opt, 1e-3f);
    mine.off_ok = pt_trace_count(ctx, NULL) == 0 && !pt_trace_on(ctx) && !file_exists(off_path);

    /* traced steps */
    if (pt_trace_start(ctx, D, path, 0) != PT_OK) printf("FAIL pt_trace_start: %s\n", pt_error(ctx));
    mine.start_twice = pt_trace_start(ctx, D, path, 0) == PT_ERR_STATE;
    pt_error_clear(ctx);
    for (step = 0; step < STEPS; step++) {
        pt_pp_stats st;
        double t0;
        for (i = 0; i < M * ROWS * T; i++) IDS[i] = (int32_t)(pt_rng_u32(&rng) % 64), TGT[i] = (int32_t)(pt_rng_u32(&rng) % 64);
        pt_trace_step(ctx, step);
        pt_zero_grad(ctx);
        if (isnan(pt_pp_step(pp, 0, 1))) printf("FAIL step %d: %s\n", step, pt_error(ctx));
        st = pt_pp_stats_get(pp);
        mine.bubble_ref += st.my_bubble * st.step_s;
        t0 = pt_time();
        pt_optim_step(opt, 1e-3f);
        pt_trace_event(ctx, PT_TRACE_OPTIM, "optim", t0, pt_time(), -1, -1);
    }
    if (pt_trace_finish(ctx) != PT_OK) printf("FAIL pt_trace_finish: %s\n", pt_error(ctx));
    CHECK(pt_trace_finish(ctx) == PT_ERR_STATE, "pt_trace_finish when not recording is PT_ERR_STATE");
    pt_error_clear(ctx);

    /* a bounded buffer */
    pt_trace_start(ctx, D, small_path, 8);
    pt_zero_grad(ctx);
    pt_pp_step(pp, 0, 1);
    { /* more than 8 whatever the step recorded (its bubbles depend on the clock's resolution) */
        int k;
        double t = pt_time();
        for (k = 0; k < 9; k++) pt_trace_event(ctx, PT_TRACE_OPTIM, "filler", t, t, -1, -1);
    }
    {
        int64_t dropped = 0, n = pt_trace_count(ctx, &dropped);
        CHECKF(n == 8 && dropped > 0, "pt_trace_count: 8 kept, the rest dropped", "%lld kept, %lld dropped", (long long)n, (long long)dropped);
    }
    if (pt_trace_finish(ctx) != PT_OK) printf("FAIL pt_trace_finish (bounded): %s\n", pt_error(ctx));

    /* an unwritable path: every rank fails with the same error */
    pt_error_clear(ctx);
    pt_trace_start(ctx, D, bad_path, 0);
    pt_zero_grad(ctx);
    pt_pp_step(pp, 0, 1);
    mine.bad_path_ok = pt_trace_finish(ctx) == PT_ERR_IO && strstr(pt_error(ctx), want_msg) != NULL &&
                       !pt_trace_on(ctx);
    pt_error_clear(ctx);

    /* interleaved 1F1B (v = 2: this rank holds stages r and r + p) in a second context: chunks in the events */
    {
        pt_ctx *c2 = pt_init(&desc);
        pt_gpt_config cfg;
        int32_t first[2 * MAXR + 1], me[2];
        pt_gpt *m2;
        pt_pp *pp2 = NULL;
        memset(&cfg, 0, sizeof cfg);
        cfg.vocab = 64, cfg.max_seq = T, cfg.layers = 2 * p, cfg.width = 32, cfg.heads = 4;
        for (i = 0; i <= 2 * p; i++) first[i] = i;
        me[0] = pt_dist_coords(D).pp, me[1] = me[0] + p;
        m2 = pt_gpt_new_stages(c2, &cfg, 2 * p, first, 2, me);
        pd.kind = PT_PP_INTERLEAVED, pd.virtual_stages = 2, pd.user = m2;
        if (m2) pp2 = pt_pp_new(c2, &pd);
        if (!pp2) printf("FAIL interleaved setup: %s\n", pt_error(c2));
        pt_trace_start(c2, D, ipath, 0);
        for (step = 0; pp2 && step < ISTEPS; step++) {
            pt_pp_stats st;
            pt_trace_step(c2, step);
            pt_zero_grad(c2);
            if (isnan(pt_pp_step(pp2, 0, 1))) printf("FAIL interleaved step %d: %s\n", step, pt_error(c2));
            st = pt_pp_stats_get(pp2);
            mine.ibubble_ref += st.my_bubble * st.step_s;
        }
        if (pt_trace_finish(c2) != PT_OK) printf("FAIL pt_trace_finish (interleaved): %s\n", pt_error(c2));
        pt_pp_free(pp2);
        pt_gpt_free(m2);
        pt_shutdown(c2);
    }

    /* rank 0 collects the numbers and checks the files */
#ifdef PTRAIN_MPI
    MPI_Gather(&mine, 5, MPI_DOUBLE, all, 5, MPI_DOUBLE, 0, MPI_COMM_WORLD);
#else
    all[0] = mine;
#endif
    if (rank == 0) {
        double ref[MAXR], iref[MAXR];
        for (i = 0; i < size; i++) ref[i] = all[i].bubble_ref, iref[i] = all[i].ibubble_ref;
        check_trace(path, size, ref, p, 1, STEPS, all);
        check_trace(ipath, size, iref, p, 2, ISTEPS, NULL);
        check_dropped(small_path, size);
        check_profile();
    }
    pt_pp_free(pp);
    pt_gpt_free(model);
    pt_shutdown(ctx);
    pt_dist_finalize(D);
    return rank == 0 ? tu_summary() : 0;
}
