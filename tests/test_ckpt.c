/* test_ckpt.c - checkpoints (>>ckpt): CRC32C test vectors (RFC 3720 B.4), save/load round trip
   (parameters, AdamW moments, optimizer steps, registered state: bit-exact), exact resume (a small
   GPT with dropout, clipping and a cosine schedule trained n steps without a break is the
   reference; a fresh context loading the checkpoint of step k and training on must give bit-identical
   per-step losses), corruption (a flipped byte, a truncated or deleted data file, a missing or
   altered manifest: detected, the previous checkpoint used, a warning naming the file), retention,
   a failed save (PTRAIN_CKPT_FAIL) that leaves the previous checkpoints intact, and asynchronous
   saves (opts.async, writes held in flight by PTRAIN_CKPT_DELAY_MS while training goes on): the
   checkpoints are the states at the calls (bit-exact, exact resume), a second save waits for the
   first, pt_ckpt_poll commits, a failed background write is reported by pt_ckpt_wait and by the next
   save with the previous checkpoint intact, pt_shutdown joins a writer still running. On 1 rank: a
   stale temporary that the commit hands to the remover is renamed aside first, so the next save of
   its step (at once, while the remover runs) is whole; a rank file missing at the commit fails the
   save and publishes nothing; a save of the same step again stopped half-way (step_K moved to
   .old.step_K, the new one not in yet) loads step K bit-exact and the next save puts it back.
   Defines PTRAIN_TEST_HOOKS (PTRAIN_CKPT_FAIL, PTRAIN_CKPT_DELAY_MS).
   Build: cc -std=c99 -O2 -I. tests/test_ckpt.c -lm; run: test_ckpt [DIR]. With mpicc -DPTRAIN_MPI
   under mpirun it runs data parallel with ZeRO-1 (CKPT_ZERO=2: ZeRO-2, 3: ZeRO-3) (each DP rank writes its optimizer shard), with
   env CKPT_TP=N / CKPT_PP=2 tensor / pipeline parallel inside (np 8: dp2 x tp2 x pp2), CKPT_COMPRESS=1
   with bf16 gradient compression (its per-rank residual is registered state). CKPT_KEEP=1 keeps DIR
   (with DIR/run/ref_losses, the uninterrupted curve); CKPT_SHORT=1 stops after the exact-resume checks.
   CKPT_FROM=DIR/run instead loads such a kept run's checkpoint of step 4 on this layout (any DP, TP,
   PP, ZeRO) and checks every local parameter and moment element against the checkpoint's element of
   its global index (as an unsplit reader loads it), and the resumed losses against the original
   layout's and this layout's uninterrupted runs (rel. CKPT_TOL, default 1e-5). CKPT_LOADER=save
   streams a pt_loader (dp = world) 4 batches and saves its state; CKPT_LOADER=load with CKPT_FROM = that
   DIR restores it on this DP size and streams the rest of the epoch: the samples before + after must be
   the epoch's, each once. Every check is
   agreed over the ranks; rank 0 prints PASS/FAIL and "N passed, N failed". */
#define _POSIX_C_SOURCE 200809L
#define PTRAIN_TEST_HOOKS /* PTRAIN_CKPT_FAIL, PTRAIN_CKPT_DELAY_MS */
#define PTRAIN_IMPLEMENTATION
#include "ptrain.h"
#include "test_util.h"
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#define GB 4      /* global batch */
#define T 16
#define NSTEPS 8
#define KSAVE 4

static pt_dist *D;
static int RANK, WORLD, DPN, NTP, NPP; /* data-, tensor-, pipeline-parallel sizes */
#define CKPT_ZERO (getenv("CKPT_ZERO") ? atoi(getenv("CKPT_ZERO")) : 1) /* the ZeRO stage when dp > 1 */
static char LOG[1 << 16]; /* warnings and errors of the contexts */
static void log_cb(void *user, int level, const char *msg) {
    size_t n = strlen(LOG);
    (void)user, (void)level;
    snprintf(LOG + n, sizeof LOG - n, "%s\n", msg);
}

typedef struct data_state {
    uint64_t pos;
    pt_rng rng;
} data_state;
typedef struct run {
    pt_ctx *ctx;
    pt_gpt *m;
    pt_optim *o;
    pt_dp *dp;
    pt_pp *pp;  /* CKPT_PP=2: the model in 2 pipeline stages (1F1B, 2 micro-batches) */
    pt_graph *g;
    data_state ds;
    int32_t ids[GB * T], tgt[GB * T];
    int64_t step;
} run;
static pt_gpt_config CFG;
static pt_lr_schedule SCHED;

static pt_tensor *stage_fn(pt_graph *g, int stage, int mb, pt_tensor *x, void *user) {
    run *r = (run *)user;
    int bl = GB / DPN, rows = bl / 2, r0 = pt_dist_coords(D).dp * bl + mb * rows;
    int64_t shp[2];
    pt_tensor *ids = NULL, *tg = NULL;
    shp[0] = rows, shp[1] = T;
    pt_graph_set_sample_offset(g, r->step * GB + r0);
    if (stage == 0) ids = pt_tensor_from(g, PT_I32, 2, shp, r->ids + (size_t)r0 * T);
    if (stage == r->m->nstages - 1) tg = pt_tensor_from(g, PT_I32, 2, shp, r->tgt + (size_t)r0 * T);
    return pt_gpt_stage_fwd(g, r->m, stage, x, ids, tg);
}

static int run_open(run *r) {
    pt_desc desc;
    pt_optim_desc od;
    int npp = pt_dist_layout(D).pp;
    memset(r, 0, sizeof *r);
    memset(&desc, 0, sizeof desc);
    desc.seed = 7, desc.dist = D, desc.log = log_cb, desc.threads = 1;
    if (!(r->ctx = pt_init(&desc))) return 0;
    memset(&CFG, 0, sizeof CFG);
    CFG.vocab = 64, CFG.max_seq = T, CFG.layers = 2, CFG.width = 32, CFG.heads = 4, CFG.dropout = 0.1f;
    if (D && npp > 1) {
        int32_t first[3] = {0, 1, 2}, mine = pt_dist_coords(D).pp;
        r->m = pt_gpt_new_stages(r->ctx, &CFG, 2, first, 1, &mine);
    } else r->m = pt_gpt_new(r->ctx, &CFG);
    memset(&od, 0, sizeof od);
    od.kind = PT_OPTIM_ADAMW, od.lr = 1e-2f, od.weight_decay = 0.1f, od.clip_norm = 0.5f;
    r->o = pt_optim_new(r->ctx, &od);
    if (!r->m || !r->o) return 0;
    if (DPN > 1) {
        pt_dp_options dopt;
        memset(&dopt, 0, sizeof dopt);
        dopt.compress = getenv("CKPT_COMPRESS") != NULL; /* bf16 gradients with error feedback (a per-rank residual) */
        if (CKPT_ZERO >= 2) dopt.bucket_bytes = 4096; /* ZeRO-2/3: several buckets, so gradients live in pooled bucket buffers (and ZeRO-3 gathers per bucket) */
        if (!(r->dp = pt_dp_new_opts(r->ctx, D, &dopt))) return 0;
        if (pt_dp_zero(r->dp, r->o, CKPT_ZERO) != PT_OK) return 0;
    }
    if (D && npp > 1) {
        pt_pp_desc pd;
        memset(&pd, 0, sizeof pd);
        pd.kind = PT_PP_1F1B, pd.micro_batches = 2, pd.forward = stage_fn, pd.user = r;
        if (!(r->pp = pt_pp_new(r->ctx, &pd))) return 0;
        pt_pp_set_dp(r->pp, r->dp);
    }
    r->ds.rng = pt_rng_seed(99);
    if (pt_state_register(r->ctx, "data", &r->ds, sizeof r->ds) != PT_OK) return 0;
    r->g = pt_graph_new(r->ctx);
    SCHED.kind = PT_LR_COSINE, SCHED.lr = 1e-2f, SCHED.min_lr = 1e-3f, SCHED.warmup = 2, SCHED.total = NSTEPS;
    return r->g != NULL;
}
static void run_close(run *r) {
    if (r->pp) pt_pp_free(r->pp);
    if (r->dp) pt_dp_free(r->dp);
    if (r->m) pt_gpt_free(r->m);
    if (r->ctx) pt_shutdown(r->ctx);
    memset(r, 0, sizeof *r);
}
/* one optimizer step on this rank's rows of the next global batch; the loss (NAN on error) */
static float run_step(run *r) {
    int32_t ids[GB * T], tgt[GB * T];
    int bl = GB / DPN, dpr = pt_dist_coords(D).dp, i;
    int64_t step = pt_optim_steps(r->o);
    pt_tensor *x, *y, *loss;
    float l;
    for (i = 0; i < GB * T; i++) ids[i] = (int32_t)(pt_rng_u32(&r->ds.rng) % 64), tgt[i] = (int32_t)(pt_rng_u32(&r->ds.rng) % 64);
    r->ds.pos++;
    if (r->pp) {
        memcpy(r->ids, ids, sizeof ids), memcpy(r->tgt, tgt, sizeof tgt);
        r->step = step;
        pt_zero_grad(r->ctx);
        l = pt_pp_step(r->pp, 0, 1);
        if (isnan(l)) return NAN;
        pt_optim_step(r->o, pt_lr_at(&SCHED, step));
        return l;
    }
    pt_graph_reset(r->g);
    pt_graph_set_sample_offset(r->g, step * GB + dpr * bl);
    x = pt_tensor_new(r->g, PT_I32, 2, bl, T, 0, 0);
    y = pt_tensor_new(r->g, PT_I32, 2, bl, T, 0, 0);
    if (!x || !y) return NAN;
    pt_tensor_write(x, ids + dpr * bl * T);
    pt_tensor_write(y, tgt + dpr * bl * T);
    loss = pt_gpt_loss(r->g, r->m, x, y);
    if (!loss) return NAN;
    l = pt_item(loss);
#ifdef PTRAIN_MPI
    if (DPN > 1) { /* the mean over the DP ranks' rows (pt_pp_step returns it too): comparable across layouts */
        double s = l;
        MPI_Allreduce(MPI_IN_PLACE, &s, 1, MPI_DOUBLE, MPI_SUM, *(MPI_Comm *)pt_dist_comm(D, PT_COMM_DP));
        l = (float)(s / DPN);
    }
#endif
    pt_zero_grad(r->ctx);
    if (r->dp) pt_dp_begin_step(r->dp, 1);
    if (pt_backward(r->g, loss) != PT_OK) return NAN;
    if (r->dp && pt_dp_finish(r->dp) != PT_OK) return NAN;
    pt_optim_step(r->o, pt_lr_at(&SCHED, step));
    return l;
}

/* the whole training state of a run, for bit-exact comparison */
typedef struct snap {
    float *p, *m, *v;
    int64_t np, nm, steps;
    data_state ds;
} snap;
static void snap_take(run *r, snap *s) {
    pt_tensor ps = pt_param_slab(r->ctx);
    s->np = pt_numel(&ps), s->nm = r->o->zhi - r->o->zlo;
    s->p = (float *)malloc((size_t)s->np * 4), s->m = (float *)malloc((size_t)(s->nm + 1) * 4), s->v = (float *)malloc((size_t)(s->nm + 1) * 4);
    memcpy(s->p, pt_f32(&ps), (size_t)s->np * 4);
    if (s->nm) memcpy(s->m, r->o->m.host, (size_t)s->nm * 4), memcpy(s->v, r->o->v.host, (size_t)s->nm * 4);
    s->steps = pt_optim_steps(r->o), s->ds = r->ds;
}
static int snap_equal(run *r, const snap *s, char *why, size_t n) {
    snap t;
    int ok;
    snap_take(r, &t);
    ok = t.np == s->np && t.nm == s->nm && !memcmp(t.p, s->p, (size_t)s->np * 4) && !memcmp(t.m, s->m, (size_t)s->nm * 4) &&
         !memcmp(t.v, s->v, (size_t)s->nm * 4) && t.steps == s->steps && !memcmp(&t.ds, &s->ds, sizeof t.ds);
    snprintf(why, n, "params %s, m %s, v %s, steps %lld vs %lld, data state %s", !memcmp(t.p, s->p, (size_t)s->np * 4) ? "equal" : "differ",
             !memcmp(t.m, s->m, (size_t)s->nm * 4) ? "equal" : "differ", !memcmp(t.v, s->v, (size_t)s->nm * 4) ? "equal" : "differ",
             (long long)t.steps, (long long)s->steps, !memcmp(&t.ds, &s->ds, sizeof t.ds) ? "equal" : "differs");
    free(t.p), free(t.m), free(t.v);
    return ok;
}
static void snap_free(snap *s) { free(s->p), free(s->m), free(s->v); }

/* file helpers (rank 0 changes files; everybody waits) */
static void sync_all(void) { pt_dist_agree(D, 1); }
static void rm_tree(const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *e;
    char p[2048];
    struct stat sb;
    if (d) {
        while ((e = readdir(d)) != NULL) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            if (stat(p, &sb) == 0 && S_ISDIR(sb.st_mode)) rm_tree(p);
            else unlink(p);
        }
        closedir(d);
    }
    rmdir(dir);
}
static void cp_tree(const char *from, const char *to) {
    DIR *d = opendir(from);
    struct dirent *e;
    char a[2048], b[2048];
    struct stat sb;
    mkdir(to, 0755);
    if (!d) return;
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(a, sizeof a, "%s/%s", from, e->d_name);
        snprintf(b, sizeof b, "%s/%s", to, e->d_name);
        if (stat(a, &sb) == 0 && S_ISDIR(sb.st_mode)) cp_tree(a, b);
        else {
            FILE *f = fopen(a, "rb"), *g = fopen(b, "wb");
            char buf[4096];
            size_t k;
            while (f && g && (k = fread(buf, 1, sizeof buf, f)) > 0) fwrite(buf, 1, k, g);
            if (f) fclose(f);
            if (g) fclose(g);
        }
    }
    closedir(d);
}
static int exists(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0;
}
/* the line dir/latest holds (empty if none) into line[64] */
static const char *latest_of(const char *dir, char *line) {
    char p[1200];
    FILE *f;
    line[0] = 0;
    snprintf(p, 1200, "%s/latest", dir);
    if ((f = fopen(p, "r")) != NULL) {
        if (!fgets(line, 64, f)) line[0] = 0;
        fclose(f);
    }
    return line;
}
static void flip_byte(const char *path, long at) {
    FILE *f = fopen(path, "r+b");
    int c;
    if (!f) return;
    fseek(f, at, SEEK_SET);
    c = fgetc(f);
    fseek(f, at, SEEK_SET);
    fputc(c ^ 0x10, f);
    fclose(f);
}

/* the per-step losses of the uninterrupted run, kept next to the checkpoints (DIR/ref_losses) so that
   a run on another layout compares against the original layout's curve */
static void ref_write(const char *dir, const float *ref) {
    char p[1200];
    FILE *f;
    int i;
    snprintf(p, sizeof p, "%s/ref_losses", dir);
    if (RANK != 0 || !(f = fopen(p, "w"))) return;
    fprintf(f, "dp%d tp%d pp%d%s\n", DPN, NTP, NPP, DPN > 1 ? (CKPT_ZERO == 3 ? " ZeRO-3" : CKPT_ZERO == 2 ? " ZeRO-2" : " ZeRO-1") : "");
    for (i = 0; i < NSTEPS; i++) fprintf(f, "%.9g\n", (double)ref[i]);
    fclose(f);
}
static int ref_read(const char *dir, float *ref, char *lay, size_t n) {
    char p[1200], line[128];
    FILE *f;
    int i = 0;
    snprintf(p, sizeof p, "%s/ref_losses", dir);
    if (!(f = fopen(p, "r"))) return 0;
    if (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        snprintf(lay, n, "%.40s", line);
        for (; i < NSTEPS && fgets(line, sizeof line, f); i++) ref[i] = strtof(line, NULL);
    }
    fclose(f);
    return i == NSTEPS;
}

/* every element of this rank's parameters and moments equals the element of the same global index
   of the checkpoint as an unsplit reader (a context without grid: one rank, no TP, every stage, no
   ZeRO) loads it; mapped with pt_spec_global_index. Returns the number of differing elements. */
static long long compare_unsplit(run *b, const char *from, char *why, size_t n) {
    pt_desc desc;
    pt_optim_desc od;
    pt_ctx *u;
    pt_gpt *um;
    pt_optim *uo;
    long long bad = 0, cnt = 0;
    int i;
    memset(&desc, 0, sizeof desc);
    desc.seed = 7, desc.log = log_cb, desc.threads = 1;
    u = pt_init(&desc);
    um = u ? pt_gpt_new(u, &CFG) : NULL;
    memset(&od, 0, sizeof od);
    od.kind = PT_OPTIM_ADAMW, od.lr = 1e-2f, od.weight_decay = 0.1f, od.clip_norm = 0.5f;
    uo = um ? pt_optim_new(u, &od) : NULL;
    if (!uo || pt_ckpt_load(u, uo, from, NULL) != PT_OK) {
        snprintf(why, n, "unsplit load: %s", u ? pt_error(u) : "no context");
        bad = -1;
    }
    (void)pt_param_slab(b->ctx); /* ZeRO-3: the load restored this rank's range; the others' parts are gathered (collective) */
    for (i = 0; bad >= 0 && i < pt_param_count(b->ctx); i++) {
        pt_param *p = pt_param_at(b->ctx, i), *q = pt_param_find(u, p->spec.name);
        int64_t e, ne = pt_numel(&p->value);
        const float *pv = (const float *)b->ctx->pslab->host + p->slab_off;
        if (!q) {
            snprintf(why, n, "no '%s' in the unsplit model", p->spec.name);
            bad = -1;
            break;
        }
        for (e = 0; e < ne; e++) {
            int64_t g = pt_spec_global_index(&p->spec, e), so = p->slab_off + e, uo_ = q->slab_off + g;
            bad += pv[e] != ((const float *)u->pslab->host)[uo_];
            if (so >= b->o->zlo && so < b->o->zhi) { /* the moments of this rank's ZeRO range */
                bad += ((const float *)b->o->m.host)[so - b->o->zlo] != ((const float *)uo->m.host)[uo_];
                bad += ((const float *)b->o->v.host)[so - b->o->zlo] != ((const float *)uo->v.host)[uo_];
                cnt += 2;
            }
            cnt++;
        }
    }
    if (bad >= 0) snprintf(why, n, "%lld of %lld values (parameters, m, v) differ from the unsplit reading", bad, cnt);
    if (um) pt_gpt_free(um);
    if (u) pt_shutdown(u);
    return bad;
}

/* ---- the data stream across a DP size change (CKPT_LOADER=save | load) ----
   A dataset of 2 shards whose tokens are their global positions (so x[0] names a sample). save: the
   loader (global batch LB, rank = DP rank) streams LK batches, each rank writes the samples it got,
   the state goes into a checkpoint. load (on another DP size, CKPT_FROM = the save directory): the
   checkpoint restores the state, the rest of the epoch is streamed; rank 0 checks that the samples
   before + after are exactly the epoch's samples of a one-rank reader, each once. */
#define LT 4
#define LB 4
#define LK 4
static pt_loader *loader_open(pt_ctx *ctx, const char *data, int rank, int ranks) {
    pt_loader_desc ld;
    memset(&ld, 0, sizeof ld);
    ld.dir = data, ld.prefix = "train_", ld.batch = LB, ld.seq = LT, ld.rank = rank, ld.ranks = ranks, ld.seed = 5, ld.shuffle = 1, ld.prefetch = 2;
    return pt_loader_new(ctx, &ld);
}
static void loader_phase(const char *base, const char *mode) {
    pt_desc desc;
    pt_ctx *ctx;
    pt_loader *L = NULL;
    char data[1200], p[1300], why[2048];
    const char *from = getenv("CKPT_FROM");
    int32_t x[LB * LT], y[LB * LT];
    int save = !strcmp(mode, "save"), i, j, nb, ok = 1, bl = LB / DPN, dpr = pt_dist_coords(D).dp;
    int64_t step = -1;
    FILE *f;
    memset(&desc, 0, sizeof desc);
    desc.seed = 7, desc.dist = D, desc.log = log_cb, desc.threads = 1;
    ctx = pt_init(&desc);
    snprintf(data, sizeof data, "%s/data", save ? base : from);
    if (save && RANK == 0) { /* shard sizes: 25 and 18 samples of LT tokens: 43 samples, 10 batches of 4 per epoch */
        uint32_t tok[200];
        mkdir(data, 0755);
        for (j = 0; j < 2; j++) {
            int ntok = j ? 73 : 101;
            for (i = 0; i < ntok; i++) tok[i] = (uint32_t)(j * 1000 + i);
            snprintf(p, sizeof p, "%s/train_%d.bin", data, j);
            ok = ok && pt_shard_write(ctx, p, PT_SHARD_PTRAIN, tok, ntok, 0) == PT_OK;
        }
    }
    CHECK_WHY(ok, tu_name("loader (%s): shards written", mode), ctx ? pt_error(ctx) : "no context");
    sync_all();
    ok = (L = loader_open(ctx, data, dpr, DPN)) != NULL && pt_loader_register(L, "loader") == PT_OK;
    CHECK_WHY(ok, tu_name("loader (%s on dp %d): opened and registered", mode, DPN), pt_error(ctx));
    if (ok && !save) {
        ok = pt_ckpt_load(ctx, NULL, from, &step) == PT_OK && step == LK;
        snprintf(why, sizeof why, "step %lld: %s", (long long)step, pt_error(ctx));
        CHECK_WHY(ok, tu_name("loader: a checkpoint saved on another DP size loads on dp %d", DPN), why);
    }
    nb = save ? LK : (int)(pt_loader_stats_get(L).batches_per_epoch - pt_loader_get_state(L).batches);
    snprintf(p, sizeof p, "%s/%s_%d.txt", base, save ? "before" : "after", pt_dist_rank(D));
    f = fopen(p, "w");
    for (i = 0; ok && i < nb; i++) { /* the samples of this DP rank (one per TP/PP rank is enough: DP rank's first) */
        ok = pt_loader_next(L, x, y) == PT_OK;
        for (j = 0; ok && f && j < bl; j++) fprintf(f, "%d\n", (int)x[j * LT]);
    }
    if (f) fclose(f);
    CHECK_WHY(ok && f, tu_name("loader (%s on dp %d): %d batches streamed", mode, DPN, nb), pt_error(ctx));
    if (save) CHECK_WHY(pt_ckpt_save(ctx, NULL, base, LK, NULL) == PT_OK, "loader: the state is saved in a checkpoint", pt_error(ctx));
    sync_all();
    if (!save) { /* rank 0: before (the saving ranks' files) + after = the epoch of a one-rank reader */
        int seen[2000], want[2000], nw = 0, dup = 0, extra = 0, missing = 0, total = 0, v;
        const char *dirs[2] = {from, base}, *kinds[2] = {"before", "after"};
        pt_loader *R = loader_open(ctx, data, 0, 1);
        memset(seen, 0, sizeof seen), memset(want, 0, sizeof want);
        for (i = 0; R && i < (int)pt_loader_stats_get(R).batches_per_epoch && pt_loader_next(R, x, y) == PT_OK; i++)
            for (j = 0; j < LB; j++) want[x[j * LT]]++, nw++;
        if (R) pt_loader_free(R);
        for (i = 0; i < 2; i++)
            for (j = 0; j < 64; j++) {
                snprintf(p, sizeof p, "%s/%s_%d.txt", dirs[i], kinds[i], j);
                if (!(f = fopen(p, "r"))) continue;
                while (fscanf(f, "%d", &v) == 1)
                    if (v >= 0 && v < 2000) seen[v]++, total++;
                fclose(f);
            }
        for (v = 0; v < 2000; v++) {
            dup += seen[v] > 1, extra += seen[v] && !want[v], missing += want[v] && !seen[v];
        }
        snprintf(why, sizeof why, "%d samples consumed (the epoch has %d): %d repeated, %d not of the epoch, %d skipped", total, nw, dup, extra, missing);
        ok = RANK != 0 || (nw == 40 && total == nw && !dup && !extra && !missing);
        CHECK_WHY(ok, tu_name("loader: samples before the save + after the load on dp %d = the epoch's %d samples, each once", DPN, nw), why);
        if (RANK == 0) printf("loader across DP sizes: %s\n", why);
    }
    if (L) pt_loader_free(L);
    if (ctx) pt_shutdown(ctx);
}

int main(int argc, char **argv) {
    char err[512], why[2048], base[1024], dir[1100], p[1300], q[1300];
    run a, b;
    snap s2, s4;
    float ref[NSTEPS], res[NSTEPS];
    int i, ok;
    int64_t step = -1;
    pt_ckpt_opts opts;
    tu_init(argc, argv);
    {
        pt_layout lay; /* CKPT_TP=2: tensor parallel inside data parallel (e.g. np 4 = dp2 x tp2) */
        memset(&lay, 0, sizeof lay);
        lay.tp = getenv("CKPT_TP") ? atoi(getenv("CKPT_TP")) : 1, lay.pp = getenv("CKPT_PP") ? atoi(getenv("CKPT_PP")) : 1;
        D = pt_dist_init(&argc, &argv, &lay, err, sizeof err);
    }
#ifdef PTRAIN_MPI
    if (!D) {
        printf("FAIL pt_dist_init: %s\n0 passed, 1 failed\n", err);
        return 1;
    }
#endif
    tu_mpi_init(NULL);
    RANK = pt_dist_rank(D), WORLD = pt_dist_size(D), DPN = pt_dist_layout(D).dp;
    NTP = D ? pt_dist_layout(D).tp : 1, NPP = D ? pt_dist_layout(D).pp : 1;
    if (!D) DPN = 1;
    snprintf(base, sizeof base, "%s", argc > 1 && argv[1][0] != '-' ? argv[1] : "build/tests/ckpt_tmp");
    if (RANK == 0) {
        printf("test_ckpt: %d rank(s) (dp %d, tp %d, pp %d)%s, GPT vocab 64, 2 layers, width 32, dropout 0.1, AdamW, %d steps, checkpoint at %d, in %s\n", WORLD, DPN, NTP, NPP,
               DPN > 1 ? (CKPT_ZERO == 3 ? " with ZeRO-3" : CKPT_ZERO == 2 ? " with ZeRO-2" : " with ZeRO-1") : "", NSTEPS, KSAVE, base);
        rm_tree(base);
        mkdir(base, 0755);
    }
    sync_all();

    if (getenv("CKPT_LOADER")) { /* the data stream across a DP size change */
        loader_phase(base, getenv("CKPT_LOADER"));
        goto done;
    }
    if (getenv("CKPT_FROM")) { /* another layout: load the run directory of a test_ckpt run kept with CKPT_KEEP=1 */
        const char *from = getenv("CKPT_FROM");
        double md = 0, mo = 0, tol = getenv("CKPT_TOL") ? atof(getenv("CKPT_TOL")) : 1e-5;
        float orig[NSTEPS];
        char olay[64] = "?", here[64];
        int have = ref_read(from, orig, olay, sizeof olay);
        long long bad;
        snprintf(here, sizeof here, "dp%d tp%d pp%d%s%s", DPN, NTP, NPP, DPN > 1 ? (CKPT_ZERO == 3 ? " ZeRO-3" : CKPT_ZERO == 2 ? " ZeRO-2" : " ZeRO-1") : "", getenv("CKPT_COMPRESS") ? " bf16" : "");
        ok = run_open(&a);
        for (i = 0; ok && i < NSTEPS; i++) ok = !isnan(ref[i] = run_step(&a));
        run_close(&a);
        LOG[0] = 0;
        ok = ok && run_open(&b) && pt_ckpt_load(b.ctx, b.o, from, &step) == PT_OK;
        snprintf(why, sizeof why, "step %lld: %s", (long long)step, b.ctx ? pt_error(b.ctx) : "");
        CHECK_WHY(ok && step == KSAVE, tu_name("reshard %s -> %s: the checkpoint of step 4 loads", olay, here), why);
        if (getenv("CKPT_COMPRESS")) { /* the per-rank bf16 residual cannot follow a layout change: dropped with a warning */
            snprintf(why, sizeof why, "log: %.300s", LOG);
            CHECK_WHY(RANK != 0 || strstr(LOG, "per-rank state 'dp.bf16_residual' not restored"),
                      "reshard: the per-rank bf16 residual is not restored on another layout (a warning names it)", why);
        }
        bad = ok ? compare_unsplit(&b, from, why, sizeof why) : -1;
        CHECK_WHY(bad == 0, tu_name("reshard %s -> %s: every parameter, m and v element = the checkpoint's element of its global index", olay, here), why);
        for (i = KSAVE; ok && i < NSTEPS; i++) {
            res[i] = run_step(&b);
            md = fmax(md, fabs((double)res[i] - ref[i]) / fmax(1.0, fabs((double)ref[i])));
            if (have) mo = fmax(mo, fabs((double)res[i] - orig[i]) / fmax(1.0, fabs((double)orig[i])));
        }
        snprintf(why, sizeof why, "max relative loss difference %g (have the original curve: %d)", mo, have);
        CHECK_WHY(ok && have && mo < tol, tu_name("reshard %s -> %s: resumed losses follow the original layout's uninterrupted run (rel. tol %g)", olay, here, tol), why);
        snprintf(why, sizeof why, "max relative loss difference %g", md);
        CHECK_WHY(ok && md < tol, tu_name("reshard %s -> %s: resumed losses follow this layout's uninterrupted run (rel. tol %g)", olay, here, tol), why);
        if (RANK == 0)
            printf("reshard %s -> %s: max relative loss difference %.3g vs the original run, %.3g vs this layout's own run (steps %d..%d)\n", olay, here, mo, md,
                   KSAVE, NSTEPS - 1);
        run_close(&b);
        goto done;
    }

    /* ---- CRC32C: RFC 3720 B.4 and the usual check value ---- */
    {
        unsigned char z[32], o[32], inc[32], dec[32];
        static const unsigned char pdu[48] = {0x01, 0xc0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x14, 0, 0, 0, 0, 0, 0x04, 0,
                                              0, 0, 0, 0x14, 0, 0, 0, 0x18, 0x28, 0, 0, 0, 0, 0, 0, 0, 0x02, 0, 0, 0, 0, 0, 0, 0};
        uint32_t c;
        for (i = 0; i < 32; i++) z[i] = 0, o[i] = 0xff, inc[i] = (unsigned char)i, dec[i] = (unsigned char)(31 - i);
        CHECK_WHY(pt_crc32c(0, "123456789", 9) == 0xE3069283u, "crc32c(\"123456789\") = e3069283", "wrong");
        CHECK_WHY(pt_crc32c(0, z, 32) == 0x8A9136AAu, "crc32c(32 zero bytes) = 8a9136aa (RFC 3720 B.4)", "wrong");
        CHECK_WHY(pt_crc32c(0, o, 32) == 0x62A8AB43u, "crc32c(32 0xff bytes) = 62a8ab43", "wrong");
        CHECK_WHY(pt_crc32c(0, inc, 32) == 0x46DD794Eu, "crc32c(bytes 0..31) = 46dd794e", "wrong");
        CHECK_WHY(pt_crc32c(0, dec, 32) == 0x113FDB5Cu, "crc32c(bytes 31..0) = 113fdb5c", "wrong");
        c = pt_crc32c(0, pdu, 48);
        snprintf(why, sizeof why, "got %08x", c);
        CHECK_WHY(c == 0xD9963A56u, "crc32c(iSCSI read PDU, 48 bytes) = d9963a56", why);
        c = pt_crc32c(pt_crc32c(0, pdu, 13), pdu + 13, 35);
        CHECK_WHY(c == pt_crc32c(0, pdu, 48), "crc32c continues over pieces", "differs");
        CHECK_WHY(pt_crc32c(0, pdu + 1, 20) == pt_crc32c(0, pdu + 1, 20) && pt_crc32c(0, NULL, 0) == 0, "crc32c unaligned start, empty", "wrong");
        for (ok = 1, i = 0; i <= 48; i++) /* the file CRC of a checkpoint is combined from its pieces' CRCs */
            ok = ok && pt__crc32c_combine(pt_crc32c(0, pdu, (size_t)i), pt_crc32c(0, pdu + i, (size_t)(48 - i)), 48 - i) == pt_crc32c(0, pdu, 48);
        CHECK_WHY(ok, "crc32c combine(crc(A), crc(B), |B|) = crc(A|B) for every cut of 48 bytes", "differs");
        { /* the constant slicing tables against the polynomial */
            uint32_t c, i2;
            int k2;
            for (ok = 1, i2 = 0; i2 < 256; i2++) {
                for (c = i2, k2 = 0; k2 < 8; k2++) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
                ok = ok && pt__crc_tab[0][i2] == c;
                for (k2 = 1; k2 < 8; k2++) ok = ok && pt__crc_tab[k2][i2] == ((pt__crc_tab[k2 - 1][i2] >> 8) ^ pt__crc_tab[0][pt__crc_tab[k2 - 1][i2] & 0xff]);
            }
            CHECK_WHY(ok, "crc32c: the constant slicing-by-8 tables equal those computed from the polynomial", "differ");
        }
#if PT__X86
        { /* the SSE4.2 path (three streams above 64 KiB) against slicing-by-8, long and odd lengths */
            size_t nb = 300007, lens[6] = {65535, 65536, 65543, 196608 + 5, 299990, 300007};
            unsigned char *big = (unsigned char *)malloc(nb);
            int hw, k;
            for (i = 0; i < (int)nb; i++) big[i] = (unsigned char)((uint32_t)i * 2654435761u >> 19);
            __builtin_cpu_init();
            hw = __builtin_cpu_supports("sse4.2") != 0;
            for (ok = 1, k = 0; k < 6; k++) {
                size_t len = lens[k] - (size_t)(k % 3);
                uint32_t h, sw;
                h = pt_crc32c(0x5eed, big + k % 3, len);
                sw = pt__crc32c_sw(0x5eed, big + k % 3, len);
                ok = ok && h == sw;
            }
            free(big);
            snprintf(why, sizeof why, "hardware path %s", hw ? "in use" : "absent (both sides software)");
            CHECK_WHY(ok, "crc32c: SSE4.2 path = slicing-by-8 on long buffers (odd starts and lengths)", why);
        }
#endif
    }

    /* ---- the reference: NSTEPS steps without a break ---- */
    ok = run_open(&a);
    for (i = 0; ok && i < NSTEPS; i++) ok = !isnan(ref[i] = run_step(&a));
    if (!CHECK_WHY(ok, "reference run trains", ok ? "" : pt_error(a.ctx))) goto done;
    run_close(&a);

    /* ---- run A: KSAVE steps with checkpoints at 2 and KSAVE, then on to NSTEPS ---- */
    snprintf(dir, sizeof dir, "%s/run", base);
    memset(&opts, 0, sizeof opts);
    opts.keep_last = 3, opts.model = &CFG;
    ok = run_open(&a);
    for (i = 0; ok && i < KSAVE; i++) {
        float l = run_step(&a);
        ok = l == ref[i];
        if (i == 1) ok = ok && pt_ckpt_save(a.ctx, a.o, dir, -1, &opts) == PT_OK, snap_take(&a, &s2);
    }
    ok = ok && pt_ckpt_save(a.ctx, a.o, dir, pt_optim_steps(a.o), &opts) == PT_OK;
    snap_take(&a, &s4);
    CHECK_WHY(ok, "run A: saves at steps 2 and 4 (losses unchanged by saving)", pt_error(a.ctx));
    for (i = KSAVE; ok && i < NSTEPS; i++) ok = run_step(&a) == ref[i];
    CHECK_WHY(ok, "run A: saving does not perturb training (losses = reference to the end)", pt_error(a.ctx));
    snprintf(p, sizeof p, "%s/step_000000004/manifest", dir);
    snprintf(q, sizeof q, "%s/step_000000004/rank_%05d.bin", dir, RANK);
    CHECK_WHY(exists(p) && exists(q), "checkpoint layout: step_000000004/manifest and one rank_*.bin per rank", p);
    {
        char line[64];
        CHECK_WHY(!strcmp(latest_of(dir, line), "step_000000004\n"), "latest names step_000000004", line);
    }
    snprintf(p, sizeof p, "%s/step_000000004", dir);
    CHECK_WHY(pt_ckpt_verify(p, why, sizeof why) == PT_OK, "pt_ckpt_verify passes on a good checkpoint", why);
    run_close(&a);
    ref_write(dir, ref);

    /* ---- run B: a fresh context loads the newest checkpoint and continues ---- */
    LOG[0] = 0;
    ok = run_open(&b);
    ok = ok && pt_ckpt_load(b.ctx, b.o, dir, &step) == PT_OK;
    snprintf(why, sizeof why, "load: %s, step %lld", pt_error(b.ctx), (long long)step);
    CHECK_WHY(ok && step == KSAVE, "load picks the newest checkpoint (step 4)", why);
    CHECK_WHY(ok && snap_equal(&b, &s4, why, sizeof why), "round trip bit-exact: parameters, AdamW m and v, steps, registered state", why);
    for (i = KSAVE; ok && i < NSTEPS; i++) res[i] = run_step(&b);
    {
        double md = 0;
        for (i = KSAVE; i < NSTEPS; i++) md = fmax(md, fabs((double)res[i] - ref[i]));
        ok = ok && md == 0;
        snprintf(why, sizeof why, "max |loss difference| %g over steps %d..%d", md, KSAVE, NSTEPS - 1);
        CHECK_WHY(ok, tu_name("exact resume: losses of steps %d..%d bit-identical to the uninterrupted run", KSAVE, NSTEPS - 1), why);
        if (RANK == 0) printf("resume: max loss difference %g over steps %d..%d (dp %d, tp %d, pp %d%s)\n", md, KSAVE, NSTEPS - 1, DPN, NTP, NPP,
                                 DPN > 1 ? (CKPT_ZERO == 3 ? ", ZeRO-3" : CKPT_ZERO == 2 ? ", ZeRO-2" : ", ZeRO-1") : "");
    }
    /* a step directory given directly */
    snprintf(p, sizeof p, "%s/step_000000002", dir);
    ok = pt_ckpt_load(b.ctx, b.o, p, &step) == PT_OK && step == 2;
    CHECK_WHY(ok && snap_equal(&b, &s2, why, sizeof why), "load of a given step directory (step 2) restores that state", why);
    run_close(&b);
    if (WORLD == 1) { /* a vocabulary padded to another size: refused, naming both sizes */
        pt_desc desc;
        pt_gpt_config c2 = CFG;
        pt_ctx *ctx;
        pt_gpt *m2;
        memset(&desc, 0, sizeof desc);
        desc.seed = 7, desc.log = log_cb, desc.threads = 1;
        c2.vocab_padded = 128;
        ctx = pt_init(&desc);
        m2 = ctx ? pt_gpt_new(ctx, &c2) : NULL;
        snprintf(p, sizeof p, "%s/step_000000004", dir);
        ok = m2 && pt_ckpt_load(ctx, NULL, p, &step) == PT_ERR_FORMAT && strstr(pt_error(ctx), "vocab_padded=64") &&
             strstr(pt_error(ctx), "to 128 here");
        CHECK_WHY(ok, "a model whose vocabulary is padded to another size (128, checkpoint 64) is refused, naming both", ctx ? pt_error(ctx) : "");
        if (RANK == 0) printf("  message: %s\n", ctx ? pt_error(ctx) : "");
        if (m2) pt_gpt_free(m2);
        if (ctx) pt_shutdown(ctx);
    }
    if (getenv("CKPT_SHORT")) { /* a layout to resume from elsewhere, or exact resume only: no corruption, retention */
        snap_free(&s4);
        snap_free(&s2);
        goto done;
    }

    /* ---- asynchronous saves (opts.async): the writes are held 300 ms (PTRAIN_CKPT_DELAY_MS), so
       training goes on while they are in flight; the checkpoints must be the states at the calls ---- */
    {
        char ad[1200], s2d[1300], s4d[1300];
        pt_ckpt_opts ao;
        double t0;
        int pend, committed;
        snprintf(ad, sizeof ad, "%s/async", base);
        snprintf(s2d, sizeof s2d, "%s/step_000000002", ad);
        snprintf(s4d, sizeof s4d, "%s/step_000000004", ad);
        memset(&ao, 0, sizeof ao);
        ao.keep_last = 3, ao.model = &CFG, ao.async = 1;
        setenv("PTRAIN_CKPT_DELAY_MS", "300", 1);
        ok = run_open(&a);
        for (i = 0; ok && i < 2; i++) ok = run_step(&a) == ref[i];
        ok = ok && pt_ckpt_save(a.ctx, a.o, ad, -1, &ao) == PT_OK;
        pend = (int)pt_ckpt_pending(a.ctx);
        snprintf(why, sizeof why, "%s; in flight: step %d, step_000000002 %s", pt_error(a.ctx), pend, exists(s2d) ? "exists" : "absent");
        CHECK_WHY(ok && pend == 2 && !exists(s2d), "async save of step 2 returns with the write in flight (nothing committed yet)", why);
        for (; ok && i < KSAVE; i++) ok = run_step(&a) == ref[i]; /* the parameters change under the write */
        ok = ok && pt_ckpt_save(a.ctx, a.o, ad, -1, &ao) == PT_OK;
        pend = (int)pt_ckpt_pending(a.ctx);
        ok = ok && pend == 4 && pt_ckpt_verify(s2d, why, sizeof why) == PT_OK && !exists(s4d);
        CHECK_WHY(ok, "a second async save while the first is in flight commits step 2 first, then writes step 4", why);
        for (; ok && i < NSTEPS; i++) ok = run_step(&a) == ref[i];
        CHECK_WHY(ok, "async: training on during the writes gives the reference losses", pt_error(a.ctx));
        for (t0 = pt_time(); ok && pt_ckpt_pending(a.ctx) >= 0 && pt_time() - t0 < 20;) {
            struct timespec ts = {0, 5000000L};
            ok = pt_ckpt_poll(a.ctx) == PT_OK;
            nanosleep(&ts, NULL);
        }
        unsetenv("PTRAIN_CKPT_DELAY_MS");
        committed = pt_ckpt_pending(a.ctx) < 0 && exists(s4d);
        CHECK_WHY(ok && committed, "pt_ckpt_poll commits step 4 once every rank's write is done", pt_error(a.ctx));
        CHECK_WHY(pt_ckpt_wait(a.ctx) == PT_OK && pt_ckpt_stats_get(a.ctx).step == 4 && pt_ckpt_stats_get(a.ctx).bytes > 0,
                  "pt_ckpt_wait with nothing in flight: PT_OK; stats name step 4", pt_error(a.ctx));
        run_close(&a);
        ok = run_open(&b);
        ok = ok && pt_ckpt_load(b.ctx, b.o, ad, &step) == PT_OK && step == KSAVE;
        snprintf(why, sizeof why, "load: %s, step %lld", pt_error(b.ctx), (long long)step);
        CHECK_WHY(ok && snap_equal(&b, &s4, why, sizeof why), "async checkpoint of step 4 = the state at the call, bit-exact (not the later state)", why);
        for (i = KSAVE; ok && i < NSTEPS; i++) res[i] = run_step(&b);
        {
            double md = 0;
            for (i = KSAVE; i < NSTEPS; i++) md = fmax(md, fabs((double)res[i] - ref[i]));
            snprintf(why, sizeof why, "max |loss difference| %g", md);
            CHECK_WHY(ok && md == 0, "async: exact resume from step 4 (losses bit-identical to the uninterrupted run)", why);
        }
        ok = pt_ckpt_load(b.ctx, b.o, s2d, &step) == PT_OK && step == 2;
        CHECK_WHY(ok && snap_equal(&b, &s2, why, sizeof why), "async checkpoint of step 2 = the state at its call, bit-exact", why);
        run_close(&b);

        /* failures of the background write: reported by pt_ckpt_wait, and by the next save */
        snprintf(ad, sizeof ad, "%s/async_fail", base);
        ok = run_open(&a);
        for (i = 0; ok && i < 2; i++) ok = !isnan(run_step(&a));
        ok = ok && pt_ckpt_save(a.ctx, a.o, ad, -1, &ao) == PT_OK && pt_ckpt_wait(a.ctx) == PT_OK;
        CHECK_WHY(ok, "async save of step 2, then pt_ckpt_wait: PT_OK", pt_error(a.ctx));
        snprintf(s2d, sizeof s2d, "%s/step_000000002", ad);
        ok = !isnan(run_step(&a));
        setenv("PTRAIN_CKPT_FAIL", "1000", 1);
        ok = ok && pt_ckpt_save(a.ctx, a.o, ad, -1, &ao) == PT_OK; /* the snapshot is fine; the write fails */
        unsetenv("PTRAIN_CKPT_FAIL");
        ok = ok && !isnan(run_step(&a)) && pt_ckpt_wait(a.ctx) == PT_ERR_IO;
        snprintf(why, sizeof why, "%s", pt_error(a.ctx));
        CHECK_WHY(ok && strstr(why, "step 3 not saved (asynchronous write)") && strstr(why, "PTRAIN_CKPT_FAIL") && strstr(why, "rank_00000.bin"),
                  "a failed async write: pt_ckpt_wait returns PT_ERR_IO with the same reason on every rank", why);
        pt_error_clear(a.ctx);
        snprintf(p, sizeof p, "%s/step_000000003", ad);
        snprintf(q, sizeof q, "%s/.tmp.step_000000003", ad);
        ok = !exists(p) && !exists(q) && pt_ckpt_verify(s2d, why, sizeof why) == PT_OK;
        {
            char line[64];
            ok = ok && !strcmp(latest_of(ad, line), "step_000000002\n");
        }
        CHECK_WHY(ok, "failed async write: no step 3, no temporary directory, step 2 intact and still latest", why);
        setenv("PTRAIN_CKPT_FAIL", "1000", 1);
        ok = pt_ckpt_save(a.ctx, a.o, ad, -1, &ao) == PT_OK; /* step 4, failing in the background */
        unsetenv("PTRAIN_CKPT_FAIL");
        ok = ok && !isnan(run_step(&a)) && pt_ckpt_save(a.ctx, a.o, ad, -1, &ao) == PT_ERR_IO;
        snprintf(why, sizeof why, "%s; in flight %lld", pt_error(a.ctx), (long long)pt_ckpt_pending(a.ctx));
        CHECK_WHY(ok && strstr(why, "step 4 not saved") && pt_ckpt_pending(a.ctx) < 0,
                  "a failed async write is reported by the next save (which starts nothing)", why);
        pt_error_clear(a.ctx);
        ok = pt_ckpt_save(a.ctx, a.o, ad, -1, &ao) == PT_OK && pt_ckpt_wait(a.ctx) == PT_OK;
        snprintf(p, sizeof p, "%s/step_000000005", ad);
        CHECK_WHY(ok && pt_ckpt_verify(p, why, sizeof why) == PT_OK, "after a failure the next async save (step 5) works", ok ? why : pt_error(a.ctx));
        /* a save still in flight at pt_shutdown: the writer is joined (ASan: nothing leaks), a warning */
        ok = !isnan(run_step(&a)) && pt_ckpt_save(a.ctx, a.o, ad, -1, &ao) == PT_OK;
        LOG[0] = 0;
        run_close(&a);
        CHECK_WHY(ok && strstr(LOG, "never committed"), "pt_shutdown with an async save in flight joins the writer and warns", LOG);
        /* the next commit in that directory removes what it left (and the dropped checkpoints) */
        ok = run_open(&b) && pt_ckpt_load(b.ctx, b.o, ad, &step) == PT_OK && step == 5;
        ao.async = 0, ao.keep_last = 1;
        ok = ok && !isnan(run_step(&b)) && pt_ckpt_save(b.ctx, b.o, ad, 7, &ao) == PT_OK;
        run_close(&b); /* joins the remover (rank 0's) */
        sync_all();
        snprintf(p, sizeof p, "%s/.tmp.step_000000006", ad);
        snprintf(q, sizeof q, "%s/.del.step_000000005", ad);
        snprintf(why, sizeof why, "%.900s %s, %.900s %s", p, exists(p) ? "exists" : "gone", q, exists(q) ? "exists" : "gone");
        CHECK_WHY(ok && !exists(p) && !exists(q) && !exists(s2d), "the next commit removes the uncommitted temporary and the checkpoints retention dropped", why);
    }

    /* ---- corruption: each case on a copy of the run directory; step 4 is damaged, step 2 must be used ---- */
    {
        static const char *cases[] = {"flip a byte of a data file", "truncate a data file", "delete a data file", "remove the manifest",
                                      "flip a byte of the manifest", "flip a byte of registered state"};
        int c;
        for (c = 0; c < 6; c++) {
            char cd[1200], target[1400];
            snprintf(cd, sizeof cd, "%s/corrupt%d", base, c);
            snprintf(target, sizeof target, c >= 3 && c <= 4 ? "%s/step_000000004/manifest" : "%s/step_000000004/rank_00000.bin", cd);
            if (RANK == 0) {
                cp_tree(dir, cd);
                if (c == 0) flip_byte(target, 100);
                else if (c == 1) {
                    struct stat sb;
                    if (stat(target, &sb) == 0 && truncate(target, sb.st_size / 2) != 0) printf("truncate failed\n");
                } else if (c == 2 || c == 3) unlink(target);
                else if (c == 4) flip_byte(target, 40);
                else {
                    struct stat sb;
                    if (stat(target, &sb) == 0) flip_byte(target, (long)sb.st_size - 3); /* the registered state is written last */
                }
            }
            sync_all();
            LOG[0] = 0;
            ok = run_open(&b);
            ok = ok && pt_ckpt_load(b.ctx, b.o, cd, &step) == PT_OK;
            snprintf(why, sizeof why, "step %lld, %s", (long long)step, pt_error(b.ctx));
            CHECK_WHY(ok && step == 2, tu_name("corruption (%s): detected, the previous checkpoint (step 2) is loaded", cases[c]), why);
            CHECK_WHY(ok && snap_equal(&b, &s2, why, sizeof why), tu_name("corruption (%s): state = step 2's, bit-exact", cases[c]), why);
            ok = strstr(LOG, target) != NULL || RANK != 0;
            snprintf(why, sizeof why, "log: %.600s", LOG);
            CHECK_WHY(ok, tu_name("corruption (%s): the warning names %s", cases[c], strrchr(target, '/') + 1), why);
            if (RANK == 0 && c < 5) printf("  message: %s", LOG);
            run_close(&b);
        }
    }
    /* every checkpoint bad, and an empty directory */
    {
        char cd[1200];
        snprintf(cd, sizeof cd, "%s/corrupt0", base);
        if (RANK == 0) {
            snprintf(p, sizeof p, "%s/step_000000002/manifest", cd);
            unlink(p);
        }
        snprintf(p, sizeof p, "%s/empty", base);
        if (RANK == 0) mkdir(p, 0755);
        sync_all();
        run_open(&b);
        ok = pt_ckpt_load(b.ctx, b.o, cd, &step) == PT_ERR_FORMAT && step == -1;
        CHECK_WHY(ok, "no valid checkpoint: PT_ERR_FORMAT", pt_error(b.ctx));
        pt_error_clear(b.ctx);
        ok = pt_ckpt_load(b.ctx, b.o, p, &step) == PT_ERR_IO;
        CHECK_WHY(ok && strstr(pt_error(b.ctx), "no checkpoint"), "empty directory: PT_ERR_IO 'no checkpoint'", pt_error(b.ctx));
        run_close(&b);
    }

    /* ---- retention (keep_last 2) and a failed save ---- */
    {
        char rd[1200];
        int n = 0;
        snprintf(rd, sizeof rd, "%s/keep", base);
        opts.keep_last = 2, opts.model = NULL;
        ok = run_open(&a);
        for (i = 0; ok && i < 5; i++) ok = !isnan(run_step(&a)) && pt_ckpt_save(a.ctx, a.o, rd, -1, &opts) == PT_OK;
        CHECK_WHY(ok, "5 saves with keep_last 2", pt_error(a.ctx));
        for (i = 1; i <= 5; i++) {
            snprintf(p, sizeof p, "%s/step_%09d", rd, i);
            n += exists(p) << (i - 1);
        }
        snprintf(why, sizeof why, "present steps mask %#x (want 0x18: steps 4 and 5)", n);
        CHECK_WHY(n == 0x18, "retention keeps the newest 2 (steps 4, 5)", why);
        /* the same step saved again replaces it */
        ok = pt_ckpt_save(a.ctx, a.o, rd, -1, &opts) == PT_OK;
        snprintf(p, sizeof p, "%s/step_000000005", rd);
        CHECK_WHY(ok && pt_ckpt_verify(p, why, sizeof why) == PT_OK, "saving the same step again replaces it (still valid)", pt_error(a.ctx));
        /* a save that fails half-way: the older checkpoints stay, no step_6, no temporary left, latest unchanged */
        ok = run_step(&a) == run_step(&a); /* two more steps: 7 */
        (void)ok;
        setenv("PTRAIN_CKPT_FAIL", "1000", 1);
        ok = pt_ckpt_save(a.ctx, a.o, rd, -1, &opts) == PT_ERR_IO;
        unsetenv("PTRAIN_CKPT_FAIL");
        CHECK_WHY(ok && strstr(pt_error(a.ctx), "PTRAIN_CKPT_FAIL"), "a failing write makes pt_ckpt_save return PT_ERR_IO with the reason", pt_error(a.ctx));
        pt_error_clear(a.ctx);
        snprintf(p, sizeof p, "%s/step_000000007", rd);
        snprintf(q, sizeof q, "%s/.tmp.step_000000007", rd);
        CHECK_WHY(!exists(p) && !exists(q), "failed save: no step_000000007, no temporary directory left", p);
        snprintf(p, sizeof p, "%s/step_000000005", rd);
        ok = pt_ckpt_verify(p, why, sizeof why) == PT_OK;
        snprintf(p, sizeof p, "%s/step_000000004", rd);
        ok = ok && pt_ckpt_verify(p, why, sizeof why) == PT_OK;
        CHECK_WHY(ok, "failed save: the previous checkpoints (4, 5) still verify", why);
        {
            char line[64];
            CHECK_WHY(!strcmp(latest_of(rd, line), "step_000000005\n"), "failed save: latest still names step_000000005", line);
        }
        run_close(&a);
        run_open(&b);
        ok = pt_ckpt_load(b.ctx, b.o, rd, &step) == PT_OK && step == 5;
        CHECK_WHY(ok, "after the failed save the directory loads step 5", pt_error(b.ctx));
        run_close(&b);
        /* a step directory newer than latest (an abandoned run): load follows latest; retention after
           a save of an older step keeps it and the step just saved */
        if (RANK == 0) {
            snprintf(p, sizeof p, "%s/step_000000004", rd);
            snprintf(q, sizeof q, "%s/step_000000009", rd);
            cp_tree(p, q);
        }
        sync_all();
        LOG[0] = 0;
        run_open(&b);
        ok = pt_ckpt_load(b.ctx, b.o, rd, &step) == PT_OK && step == 5;
        snprintf(why, sizeof why, "step %lld; log: %.300s", (long long)step, LOG);
        CHECK_WHY(ok && (RANK != 0 || strstr(LOG, "newer step directory")), "a step directory newer than latest is skipped with a warning (step 5 loaded)", why);
        opts.keep_last = 1;
        ok = !isnan(run_step(&b)) && pt_ckpt_save(b.ctx, b.o, rd, -1, &opts) == PT_OK;
        for (n = 0, i = 1; i <= 9; i++) {
            snprintf(p, sizeof p, "%s/step_%09d", rd, i);
            n += exists(p) << (i - 1);
        }
        snprintf(why, sizeof why, "present steps mask %#x (want 0x120: steps 6 and 9)", n);
        CHECK_WHY(ok && n == 0x120, "retention (keep 1) after a save of step 6 keeps step 6 and leaves the newer step 9 alone", why);
        run_close(&b);
    }
    /* ---- the remover and the next save, a rank file gone before the commit, a replacement stopped half-way (1 rank) ---- */
    if (WORLD == 1) {
        char rd[1200], tq[1300], line[64];
        int t, f, gone;
        int64_t s1;
        snap sx;
        FILE *g;
        snprintf(rd, sizeof rd, "%s/race", base);
        memset(&opts, 0, sizeof opts);
        opts.keep_last = 2;
        ok = run_open(&a);
        for (t = 0; ok && t < 3; t++) {
            /* a temporary of step s1 + 1 that a save never committed, large enough that removing it takes a while;
               the commit of s1 queues it for the remover, then s1 + 1 is saved at once into the same temporary name */
            s1 = pt_optim_steps(a.o) + 1;
            snprintf(tq, sizeof tq, "%s/.tmp.step_%09lld", rd, (long long)(s1 + 1));
            pt_mkdirs(tq);
            for (f = 0; f <= 3000; f++) {
                snprintf(p, sizeof p, f < 3000 ? "%.1200s/f%05d" : "%.1200s/rank_00000.bin", tq, f);
                if ((g = fopen(p, "w")) != NULL) fclose(g);
            }
            ok = !isnan(run_step(&a)) && pt_ckpt_save(a.ctx, a.o, rd, -1, &opts) == PT_OK;
            gone = !exists(tq);
            ok = ok && !isnan(run_step(&a)) && pt_ckpt_save(a.ctx, a.o, rd, -1, &opts) == PT_OK;
            snprintf(p, sizeof p, "%s/step_%09lld", rd, (long long)(s1 + 1));
            snprintf(why, sizeof why, "stale temporary %s right after the commit; save: %s; verify: ", gone ? "moved away" : "still there", pt_error(a.ctx));
            ok = ok && pt_ckpt_verify(p, why + strlen(why), sizeof why - strlen(why)) == PT_OK;
            CHECK_WHY(ok && gone, tu_name("remover vs the next save (trial %d): a stale temporary is moved aside before the remover gets it; the save of its step is whole", t), why);
        }
        /* an asynchronous save whose rank file disappears before the commit: refused, nothing published */
        opts.async = 1;
        s1 = pt_optim_steps(a.o) + 1;
        ok = ok && !isnan(run_step(&a)) && pt_ckpt_save(a.ctx, a.o, rd, -1, &opts) == PT_OK;
#ifdef PT__CK_THREADS
        for (f = 0; ok && f < 20000; f++) { /* until the writer is done */
            struct timespec ts = {0, 1000000L};
            int w;
            pthread_mutex_lock(&a.ctx->ckpt->mu);
            w = a.ctx->ckpt->written || !a.ctx->ckpt->writer_on;
            pthread_mutex_unlock(&a.ctx->ckpt->mu);
            if (w) break;
            nanosleep(&ts, NULL);
        }
#endif
        snprintf(p, sizeof p, "%s/.tmp.step_%09lld/rank_00000.bin", rd, (long long)s1);
        unlink(p);
        ok = ok && pt_ckpt_wait(a.ctx) == PT_ERR_IO;
        snprintf(why, sizeof why, "%s; latest %s", pt_error(a.ctx), latest_of(rd, line));
        snprintf(p, sizeof p, "%s/step_%09lld", rd, (long long)s1);
        snprintf(q, sizeof q, "step_%09lld\n", (long long)(s1 - 1));
        CHECK_WHY(ok && strstr(why, "rank_00000.bin: missing") && strstr(why, "not published") && !exists(p) && !strcmp(line, q),
                  "a rank file missing at the commit: the save fails naming it, nothing is published, latest unchanged", why);
        pt_error_clear(a.ctx);
        /* the same step saved again, stopped between moving the old one aside and renaming the new one in:
           latest names step_K, step_K is missing, .old.step_K is the committed one, .tmp.step_K half-written */
        opts.async = 0;
        ok = !isnan(run_step(&a)) && pt_ckpt_save(a.ctx, a.o, rd, -1, &opts) == PT_OK;
        s1 = pt_optim_steps(a.o);
        snap_take(&a, &sx);
        run_close(&a);
        snprintf(p, sizeof p, "%s/step_%09lld", rd, (long long)s1);
        snprintf(q, sizeof q, "%s/.old.step_%09lld", rd, (long long)s1);
        snprintf(tq, sizeof tq, "%s/.tmp.step_%09lld", rd, (long long)s1);
        ok = ok && rename(p, q) == 0 && mkdir(tq, 0755) == 0;
        snprintf(tq, sizeof tq, "%s/.tmp.step_%09lld/rank_00000.bin", rd, (long long)s1);
        if ((g = fopen(tq, "w")) != NULL) fputs("half", g), fclose(g);
        {
            char sd[1300];
            ok = ok && pt_ckpt_step_dir(rd, sd, sizeof sd) == PT_OK && !strcmp(sd, q);
            CHECK_WHY(ok, "a replacement stopped half-way: latest resolves to the committed .old.step_K (pt_ckpt_step_dir, ptckpt)", sd);
            CHECK(pt_ckpt_step_dir(rd, sd, strlen(q)) == PT_ERR_ARG && pt_ckpt_step_dir(rd, sd, strlen(q) + 1) == PT_OK && !strcmp(sd, q),
                  "pt_ckpt_step_dir: an out one byte too short for the path is refused (PT_ERR_ARG, no cut path); one that fits takes it");
        }
        LOG[0] = 0;
        ok = run_open(&b) && pt_ckpt_load(b.ctx, b.o, rd, &step) == PT_OK && step == s1;
        snprintf(why, sizeof why, "step %lld (want %lld): %.900s %.900s", (long long)step, (long long)s1, pt_error(b.ctx), LOG);
        CHECK_WHY(ok && snap_equal(&b, &sx, why, sizeof why), "... load takes step K from .old.step_K, bit-exact", why);
        ok = ok && !isnan(run_step(&b)) && pt_ckpt_save(b.ctx, b.o, rd, -1, &opts) == PT_OK && pt_ckpt_verify(p, why, sizeof why) == PT_OK;
        snprintf(tq, sizeof tq, "%s/.tmp.step_%09lld", rd, (long long)s1);
        CHECK_WHY(ok && !exists(q) && !exists(tq), "... the next save puts step_K back (it verifies) and clears .old.step_K and the temporary", why);
        run_close(&b);
        snap_free(&sx);
    }
    snap_free(&s4);
    snap_free(&s2);
done:
    if (getenv("CKPT_FROM") || getenv("CKPT_LOADER") || getenv("CKPT_SHORT")) {
        if (RANK == 0 && tu_nfail == 0 && !getenv("CKPT_KEEP") && !getenv("CKPT_FROM")) rm_tree(base);
    } else if (RANK == 0 && tu_nfail == 0 && !getenv("CKPT_KEEP")) rm_tree(base);
    i = tu_summary();
    pt_dist_finalize(D);
    return i;
}
