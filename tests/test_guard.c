/* test_guard.c - the health guard (>>guard). A small MLP regression trained data parallel (pt_dp over
   every DP rank; GUARD_TP=2 / GUARD_PP=2: inside a dp x tp or dp x pp grid, the whole MLP replicated over
   TP and PP: what the guard sees of the grid, not a split model) with PTRAIN_GUARD_INJECT
   faults, each run compared with fault-free reference runs computed here:
   - no fault: no event, every verdict OK;
   - NaN in one rank's gradient, warn policy: one event naming that rank, the run goes on, that rank's
     parameters are NaN after the update;
   - the same under the skip policy: the verdict is SKIP on every rank, the parameters after the step
     equal those before, the final parameters equal (bit for bit) a run that simply did not take it;
   - a loss spike (x100 on rank 0) and a gradient-norm spike (x1000): events with z > threshold, z =
     (value - mean) / std of the event's own fields, the step not added to the statistics;
   - exact resume: the spike run saved at step 15 and resumed in a fresh context gives the same
     losses, verdicts, parameters and guard state, bit for bit;
   - rollback after 3 consecutive NaN steps: the checkpoint of step 10 is loaded (parameters equal the
     snapshot taken at the save, the replayed loss of step 10 equals the first one), the LR scale is
     0.5 and the LR used afterwards is half the schedule's;
   - replica check: one bit flipped in one rank's weights is reported naming that rank (DP > 1);
   - bad descriptions and a bad PTRAIN_GUARD_INJECT fail with PT_ERR_ARG;
   - dynamic loss scaling (pt_loss_scale_enable): without an overflow, bit-identical to no scaling
     while the scale grows every 4 clean steps; injected overflows (inf in one rank's gradient at steps
     10 and 20) are grad_overflow events naming the rank, verdict OK, the update skipped on every rank
     (the final parameters equal, bit for bit, a run that did not take steps 10 and 20), the scale
     halved each time; the scale and its counters resume exactly from a checkpoint; bad factors are
     PT_ERR_ARG naming the field.
   Build: cc -std=c99 -O2 -I. tests/test_guard.c -lm (or mpicc -DPTRAIN_MPI); run: test_guard [DIR]. */
#define _POSIX_C_SOURCE 200809L
#define PTRAIN_IMPLEMENTATION
#define PTRAIN_TEST_HOOKS /* PTRAIN_GUARD_INJECT */
#include "ptrain.h"
#include "test_util.h"
#include <sys/stat.h>

#define GB 8 /* global batch rows */
#define NIN 8
#define NOUT 4
#define NSTEPS 30
#define MAXEV 64

static pt_dist *D;
static int RANK, WORLD, DPN;
static char BASE[512];


typedef struct data_state { pt_rng rng; uint64_t pos; } data_state;
typedef struct run {
    pt_ctx *ctx;
    pt_mlp m;
    pt_optim *o;
    pt_dp *dp;
    pt_graph *g;
    pt_guard *guard;
    data_state ds;
    float loss[NSTEPS], lr[NSTEPS];
    int verdict[NSTEPS];
    int skip_at, skip_at2, gscale_at; /* the caller skips these steps' updates / scales the gradients x1000 (-1 = none) */
    int ncb;                /* events seen by the callback */
} run;
static pt_lr_schedule SCHED;
static const pt_loss_scale_desc *LS; /* run_open turns loss scaling on with this (NULL = off) */

static void on_event(void *user, const pt_guard_event *e) { (void)e, ((run *)user)->ncb++; }
static void quiet(void *user, int level, const char *msg) { (void)user, (void)level, (void)msg; }

static int run_open(run *r, const pt_guard_desc *gd, const char *inject) {
    pt_desc desc;
    pt_optim_desc od;
    pt_guard_desc d = *gd;
    memset(r, 0, sizeof *r);
    r->skip_at = r->skip_at2 = r->gscale_at = -1;
    memset(&desc, 0, sizeof desc);
    desc.seed = 11, desc.dist = D, desc.threads = 1, desc.log = quiet;
    if (!(r->ctx = pt_init(&desc))) return 0;
    r->m = pt_mlp_new(r->ctx, "mlp", NIN, 16, NOUT, 1, 0.3f);
    memset(&od, 0, sizeof od);
    od.kind = PT_OPTIM_ADAMW, od.lr = 1e-2f, od.weight_decay = 0.01f;
    if (!(r->o = pt_optim_new(r->ctx, &od))) return 0;
    if (LS && pt_loss_scale_enable(r->ctx, LS) != PT_OK) return 0;
    if (DPN > 1 && !(r->dp = pt_dp_new(r->ctx, D, 0))) return 0;
    r->ds.rng = pt_rng_seed(5);
    if (pt_state_register(r->ctx, "data", &r->ds, sizeof r->ds) != PT_OK) return 0;
    if (!(r->g = pt_graph_new(r->ctx))) return 0;
    setenv("PTRAIN_GUARD_INJECT", inject ? inject : "", 1);
    d.on_event = on_event, d.user = r;
    r->guard = pt_guard_new(r->ctx, &d);
    SCHED.kind = PT_LR_COSINE, SCHED.lr = 1e-2f, SCHED.min_lr = 1e-3f, SCHED.warmup = 3, SCHED.total = NSTEPS;
    return r->guard != NULL;
}
static void run_close(run *r) {
    if (r->guard) pt_guard_free(r->guard);
    if (r->dp) pt_dp_free(r->dp);
    if (r->ctx) pt_shutdown(r->ctx);
    r->ctx = NULL;
}
static float *params(run *r) { pt_tensor s = pt_param_slab(r->ctx); return pt_f32(&s); }
static int64_t nparams(run *r) { pt_tensor s = pt_param_slab(r->ctx); return pt_numel(&s); }
static int same_params(run *a, run *b) { return nparams(a) == nparams(b) && !memcmp(params(a), params(b), (size_t)nparams(a) * 4); }
static int finite_params(run *r) {
    int64_t i;
    for (i = 0; i < nparams(r); i++)
        if (!(params(r)[i] == params(r)[i]) || params(r)[i] - params(r)[i] != 0) return 0;
    return 1;
}

/* one training step of the global batch (this rank's rows); returns the verdict (-1 on error) */
static int run_step(run *r, int step) {
    float x[GB * NIN], y[GB * NOUT], lr;
    int bl = GB / DPN, dpr = D ? pt_dist_coords(D).dp : 0, i, j, v;
    pt_tensor *tx, *ty, *out, *d, *loss;
    double l;
    for (i = 0; i < GB; i++) {
        for (j = 0; j < NIN; j++) x[i * NIN + j] = 2.0f * pt_rng_float(&r->ds.rng) - 1.0f;
        for (j = 0; j < NOUT; j++) y[i * NOUT + j] = 0.5f * x[i * NIN + j] - 0.25f * x[i * NIN + j + 4] + 0.05f * pt_rng_float(&r->ds.rng);
    }
    r->ds.pos++;
    pt_graph_reset(r->g);
    tx = pt_tensor_new(r->g, PT_F32, 2, bl, NIN, 0, 0), ty = pt_tensor_new(r->g, PT_F32, 2, bl, NOUT, 0, 0);
    if (!tx || !ty) return -1;
    pt_tensor_write(tx, x + dpr * bl * NIN), pt_tensor_write(ty, y + dpr * bl * NOUT);
    out = pt_mlp_fwd(r->g, &r->m, tx);
    d = pt_sub(r->g, out, ty);
    loss = pt_mean(r->g, pt_mul(r->g, d, d));
    if (!loss) return -1;
    l = pt_item(loss);
    pt_zero_grad(r->ctx);
    if (r->dp) pt_dp_begin_step(r->dp, 1);
    if (pt_backward(r->g, loss) != PT_OK) return -1;
    if (r->dp && pt_dp_finish(r->dp) != PT_OK) return -1;
    if (step == r->gscale_at) {
        pt_tensor gs = pt_grad_slab(r->ctx);
        for (i = 0; i < pt_numel(&gs); i++) pt_f32(&gs)[i] *= 1000.0f;
    }
    v = pt_guard_check(r->guard, step, (float)l, pt_grad_norm(r->ctx));
#ifdef PTRAIN_MPI
    if (DPN > 1) MPI_Allreduce(MPI_IN_PLACE, &l, 1, MPI_DOUBLE, MPI_SUM, *(MPI_Comm *)pt_dist_comm(D, PT_COMM_DP)), l /= DPN;
#endif
    r->loss[step] = (float)l, r->verdict[step] = v;
    lr = pt_lr_at(&SCHED, step) * pt_guard_lr_scale(r->guard);
    r->lr[step] = lr;
    if (v == PT_GUARD_OK && step != r->skip_at && step != r->skip_at2) pt_optim_step(r->o, lr);
    return v;
}
/* steps [from, to); 0 on an error */
static int run_steps(run *r, int from, int to) {
    int s;
    for (s = from; s < to; s++)
        if (run_step(r, s) < 0) return 0;
    return 1;
}
static int events(run *r, pt_guard_event *ev) { return (int)pt_guard_events(r->guard, ev, MAXEV); }

static pt_guard_desc desc_of(int policy) {
    pt_guard_desc d;
    memset(&d, 0, sizeof d);
    d.policy = policy, d.window = 16, d.warmup = 8, d.z_threshold = 6.0f;
    return d;
}

int main(int argc, char **argv) {
    char err[512], why[2048], dir[700];
    pt_guard_event ev[MAXEV];
    pt_guard_desc gd;
    pt_guard_stats st;
    run ref, skip10, skip20, a, b;
    int R, n, i, ok;
    int64_t loaded = -1;
    tu_init(argc, argv);
    {
        pt_layout lay;
        memset(&lay, 0, sizeof lay);
        lay.tp = getenv("GUARD_TP") ? atoi(getenv("GUARD_TP")) : 1, lay.pp = getenv("GUARD_PP") ? atoi(getenv("GUARD_PP")) : 1;
        D = pt_dist_init(&argc, &argv, &lay, err, sizeof err);
    }
#ifdef PTRAIN_MPI
    if (!D) {
        printf("FAIL pt_dist_init: %s\n0 passed, 1 failed\n", err);
        return 1;
    }
#endif
    tu_mpi_init(NULL);
    RANK = pt_dist_rank(D), WORLD = pt_dist_size(D), DPN = D ? pt_dist_layout(D).dp : 1;
    R = WORLD - 1; /* the faulty rank */
    snprintf(BASE, sizeof BASE, "%s", argc > 1 && argv[1][0] != '-' ? argv[1] : "build/tests/guard_tmp");
    if (RANK == 0) {
        char cmd[600];
        printf("test_guard: %d rank(s) (dp %d, tp %d, pp %d), MLP 8-16-4, AdamW, %d steps, faults on rank %d, checkpoints in %s\n", WORLD, DPN,
               D ? pt_dist_layout(D).tp : 1, D ? pt_dist_layout(D).pp : 1, NSTEPS, R, BASE);
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", BASE);
        if (system(cmd) != 0) printf("(could not remove %s)\n", BASE);
        mkdir(BASE, 0755);
    }
    pt_dist_agree(D, 1);

    /* ---- references: no fault; skipping step 10's / steps 20 and 24's updates by hand ---- */
    gd = desc_of(PT_GUARD_POLICY_SKIP);
    ok = run_open(&ref, &gd, NULL) && run_steps(&ref, 0, NSTEPS);
    for (i = 0, n = 0; i < NSTEPS; i++) n += ref.verdict[i] != PT_GUARD_OK;
    snprintf(why, sizeof why, "%d verdicts not OK, %lld events (%.300s)", n, (long long)pt_guard_events(ref.guard, NULL, 0), pt_error(ref.ctx));
    CHECK_WHY(ok && n == 0 && pt_guard_events(ref.guard, NULL, 0) == 0, "no fault: every verdict OK, no event", why);
    if (RANK == 0) printf("reference losses: step 0 %.5f, step 10 %.5f, step 29 %.5f\n", ref.loss[0], ref.loss[10], ref.loss[29]);
    ok = run_open(&skip10, &gd, NULL);
    skip10.skip_at = 10;
    ok = ok && run_steps(&skip10, 0, NSTEPS);
    ok = run_open(&skip20, &gd, NULL) && ok;
    skip20.skip_at = 20, skip20.skip_at2 = 24;
    ok = ok && run_steps(&skip20, 0, NSTEPS);
    CHECK_WHY(ok && !same_params(&ref, &skip10), "references: skipping one update changes the final parameters", "equal or failed");

    /* ---- NaN in rank R's gradient at step 10, warn policy ---- */
    snprintf(why, sizeof why, "nan:10:%d", R);
    gd = desc_of(PT_GUARD_POLICY_WARN);
    ok = run_open(&a, &gd, why) && run_steps(&a, 0, 11);
    n = events(&a, ev);
    snprintf(why, sizeof why, "%d events; first: step %lld kind %s rank %d verdict %d: %s", n, n ? (long long)ev[0].step : -1LL,
             n ? pt_guard_event_name(ev[0].kind) : "-", n ? ev[0].rank : -9, n ? ev[0].verdict : -9, n ? ev[0].detail : "");
    CHECK_WHY(ok && n == 1 && ev[0].step == 10 && ev[0].kind == PT_GUARD_EV_GRAD_NONFINITE && ev[0].rank == R && ev[0].verdict == PT_GUARD_OK &&
                  a.verdict[10] == PT_GUARD_OK && a.ncb == 1,
              tu_name("warn: NaN gradient on rank %d at step 10 is one event naming rank %d, verdict OK", R, R), why);
    CHECK_WHY(ok && (RANK == R ? !finite_params(&a) : 1), "warn: the update went ahead: the faulty rank's parameters hold a NaN",
              "parameters finite");
    ok = ok && run_steps(&a, 11, NSTEPS);
    st = pt_guard_stats_get(a.guard);
    snprintf(why, sizeof why, "checks %lld, events %lld", (long long)st.checks, (long long)st.events);
    CHECK_WHY(ok && st.checks == NSTEPS && st.events > 1, "warn: the run goes on to the end, the guard reports every later bad step", why);
    if (RANK == 0) printf("warn: %lld events, the first: %s\n", (long long)st.events, ev[0].detail);
    run_close(&a);

    /* ---- the same under the skip policy ---- */
    snprintf(why, sizeof why, "nan:10:%d", R);
    gd = desc_of(PT_GUARD_POLICY_SKIP);
    ok = run_open(&a, &gd, why) && run_steps(&a, 0, 10);
    {
        float *before = (float *)malloc((size_t)nparams(&a) * 4);
        memcpy(before, params(&a), (size_t)nparams(&a) * 4);
        ok = ok && run_step(&a, 10) == PT_GUARD_SKIP;
        CHECK_WHY(ok && !memcmp(before, params(&a), (size_t)nparams(&a) * 4), "skip: verdict SKIP at step 10 on every rank, parameters unchanged",
                  "changed or another verdict");
        free(before);
    }
    ok = ok && run_steps(&a, 11, NSTEPS);
    n = events(&a, ev);
    snprintf(why, sizeof why, "%d events, rank %d", n, n ? ev[0].rank : -9);
    CHECK_WHY(ok && n == 1 && ev[0].rank == R && ev[0].verdict == PT_GUARD_SKIP, tu_name("skip: one event, naming rank %d", R), why);
    CHECK_WHY(ok && same_params(&a, &skip10), "skip: final parameters = the run that simply did not take step 10 (bitwise)", "differ");
    run_close(&a);

    /* ---- loss spike at step 20 (x100 on rank 0) and gradient-norm spike at 24 (x1000), skip policy; save at 15 ---- */
    gd = desc_of(PT_GUARD_POLICY_SKIP);
    ok = run_open(&a, &gd, "spike:20:0");
    a.gscale_at = 24;
    snprintf(dir, sizeof dir, "%s/resume", BASE);
    ok = ok && run_steps(&a, 0, 15) && pt_ckpt_save(a.ctx, a.o, dir, 15, NULL) == PT_OK && run_steps(&a, 15, 20);
    st = pt_guard_stats_get(a.guard);
    ok = ok && run_step(&a, 20) == PT_GUARD_SKIP;
    n = events(&a, ev);
    snprintf(why, sizeof why, "%d events; kind %s rank %d z %.3f value %.5g mean %.5g std %.3g", n, n ? pt_guard_event_name(ev[0].kind) : "-",
             n ? ev[0].rank : -9, n ? ev[0].z : 0.0, n ? ev[0].value : 0.0, n ? ev[0].mean : 0.0, n ? ev[0].std : 0.0);
    CHECK_WHY(ok && n == 1 && ev[0].kind == PT_GUARD_EV_LOSS_SPIKE && ev[0].step == 20 && ev[0].rank == 0 && ev[0].z > 6.0 &&
                  fabs(ev[0].z - (ev[0].value - ev[0].mean) / ev[0].std) <= 1e-9 * ev[0].z,
              "spike: loss x100 at step 20 is a loss_spike event on rank 0 with z > 6 = (value - mean) / std", why);
    if (RANK == 0) printf("loss spike: %s\n", n ? ev[0].detail : "(none)");
    CHECK_WHY(ok && pt_guard_stats_get(a.guard).accepted == st.accepted, "spike: the spike step is not added to the statistics", "added");
    ok = ok && run_steps(&a, 21, NSTEPS);
    n = events(&a, ev);
    snprintf(why, sizeof why, "%d events; second: %s", n, n > 1 ? ev[1].detail : "-");
    CHECK_WHY(ok && n == 2 && ev[1].kind == PT_GUARD_EV_GRAD_SPIKE && ev[1].step == 24 && ev[1].z > 6.0 && a.verdict[24] == PT_GUARD_SKIP,
              "spike: gradients x1000 at step 24 are a grad_spike event with z > 6, skipped", why);
    if (RANK == 0 && n > 1) printf("grad spike: %s\n", ev[1].detail);
    for (i = 0, n = 0; i < NSTEPS; i++) n += a.verdict[i] != (i == 20 || i == 24 ? PT_GUARD_SKIP : PT_GUARD_OK);
    CHECK_WHY(ok && n == 0, "spike: every other step OK", "other verdicts");

    /* ---- exact resume from step 15 ---- */
    ok = run_open(&b, &gd, "spike:20:0");
    b.gscale_at = 24;
    ok = ok && pt_ckpt_load(b.ctx, b.o, dir, &loaded) == PT_OK && loaded == 15 && run_steps(&b, 15, NSTEPS);
    for (i = 15, n = 0; i < NSTEPS; i++) n += b.loss[i] != a.loss[i] || b.verdict[i] != a.verdict[i];
    {
        void *pa = NULL, *pb = NULL;
        int64_t na = 0, nb = 0;
        int k;
        for (k = 0; k < pt_state_count(a.ctx); k++)
            if (!strcmp(pt_state_at(a.ctx, k, &pa, &na), "guard")) break;
        for (k = 0; k < pt_state_count(b.ctx); k++)
            if (!strcmp(pt_state_at(b.ctx, k, &pb, &nb), "guard")) break;
        snprintf(why, sizeof why, "loaded %lld; %d steps differ in loss or verdict; guard state %lld vs %lld bytes (%.300s)", (long long)loaded, n,
                 (long long)na, (long long)nb, pt_error(b.ctx));
        CHECK_WHY(ok && n == 0 && same_params(&a, &b) && na == nb && pa && pb && !memcmp(pa, pb, (size_t)na),
                  "resume at 15: losses, verdicts (spikes at 20, 24), parameters and guard state identical", why);
    }
    CHECK_WHY(ok && same_params(&a, &skip20), "spike: final parameters = the run that simply did not take steps 20 and 24 (bitwise)", "differ");
    run_close(&a), run_close(&b);

    /* ---- rollback after 3 consecutive NaN steps (12, 13, 14), checkpoints every 5 steps ---- */
    snprintf(dir, sizeof dir, "%s/rollback", BASE);
    gd = desc_of(PT_GUARD_POLICY_ROLLBACK);
    gd.rollback_after = 3, gd.lr_factor = 0.5f, gd.ckpt_dir = dir;
    snprintf(why, sizeof why, "nan:12:%d,nan:13:%d,nan:14:%d", R, R, R);
    ok = run_open(&a, &gd, why);
    {
        float *at10 = (float *)malloc((size_t)nparams(&a) * 4), loss10 = 0;
        int s = 0, saved = -1, v, rolled = 0, vs[3] = {-1, -1, -1};
        while (ok && s < NSTEPS) {
            if (s % 5 == 0 && s > saved) {
                ok = pt_ckpt_save(a.ctx, a.o, dir, s, NULL) == PT_OK;
                saved = s;
                if (s == 10) memcpy(at10, params(&a), (size_t)nparams(&a) * 4);
            }
            v = run_step(&a, s);
            if (s == 10 && !rolled) loss10 = a.loss[10];
            if (s >= 12 && s <= 14 && !rolled) vs[s - 12] = v;
            if (v == PT_GUARD_ROLLBACK) {
                int64_t to = -1;
                ok = ok && !rolled && pt_guard_rollback(a.guard, a.o, &to) == PT_OK;
                snprintf(why, sizeof why, "rollback at step %d loaded step %lld, lr scale %g (%.300s)", s, (long long)to, (double)pt_guard_lr_scale(a.guard),
                         pt_error(a.ctx));
                CHECK_WHY(ok && s == 14 && to == 10 && pt_guard_lr_scale(a.guard) == 0.5f && !memcmp(at10, params(&a), (size_t)nparams(&a) * 4),
                          "rollback: at step 14 (3rd bad step) the checkpoint of step 10 is loaded, parameters as saved, LR scale 0.5", why);
                rolled = 1, s = (int)to;
                continue;
            }
            if (v < 0) ok = 0;
            s++;
        }
        snprintf(why, sizeof why, "verdicts at 12..14: %d %d %d", vs[0], vs[1], vs[2]);
        CHECK_WHY(ok && rolled && vs[0] == PT_GUARD_SKIP && vs[1] == PT_GUARD_SKIP && vs[2] == PT_GUARD_ROLLBACK, "rollback: verdicts SKIP, SKIP, ROLLBACK", why);
        snprintf(why, sizeof why, "replayed loss %.9g vs %.9g; lr at 15: %.9g vs schedule %.9g", a.loss[10], loss10, a.lr[15], pt_lr_at(&SCHED, 15));
        CHECK_WHY(ok && a.loss[10] == loss10 && a.lr[15] == pt_lr_at(&SCHED, 15) * 0.5f,
                  "rollback: the replayed step 10 has the same loss (data state restored), the LR afterwards is halved", why);
        n = events(&a, ev);
        snprintf(why, sizeof why, "%d events, last %s: %s", n, n ? pt_guard_event_name(ev[n - 1].kind) : "-", n ? ev[n - 1].detail : "");
        CHECK_WHY(ok && n == 4 && ev[3].kind == PT_GUARD_EV_ROLLBACK && ev[3].loaded_step == 10 && ev[3].value == 0.5 && ev[0].rank == R &&
                      pt_guard_stats_get(a.guard).rollbacks == 1,
                  "rollback: 3 grad_nonfinite events then one rollback event (loaded step 10, lr scale 0.5)", why);
        if (RANK == 0 && n) printf("rollback: %s\n", ev[n - 1].detail);
        for (i = 15, n = 0; i < NSTEPS; i++) n += a.verdict[i] != PT_GUARD_OK;
        CHECK_WHY(ok && n == 0 && finite_params(&a), "rollback: training goes on after it, finite", "bad steps after the rollback");
        free(at10);
    }
    run_close(&a);

    /* ---- replica check: one bit of rank R's first weight flipped at step 8, checks every 4 steps ---- */
    gd = desc_of(PT_GUARD_POLICY_WARN);
    gd.replica_check_every = 4;
    snprintf(why, sizeof why, "flip:8:%d", R);
    ok = run_open(&a, &gd, why) && run_steps(&a, 0, 12);
    n = events(&a, ev);
    if (DPN > 1) {
        snprintf(why, sizeof why, "%d events; first: step %lld %s rank %d: %s", n, n ? (long long)ev[0].step : -1LL, n ? pt_guard_event_name(ev[0].kind) : "-",
                 n ? ev[0].rank : -9, n ? ev[0].detail : "");
        CHECK_WHY(ok && n >= 1 && ev[0].step == 8 && ev[0].kind == PT_GUARD_EV_REPLICA_MISMATCH && ev[0].rank == R && ev[0].value == 1,
                  tu_name("replicas: a flipped weight on rank %d is found at the check of step 8, naming rank %d", R, R), why);
        if (RANK == 0 && n) printf("replicas: %s\n", ev[0].detail);
        CHECK_WHY(ok && pt_guard_replica_check(a.guard, 12) == 1, "replicas: pt_guard_replica_check counts 1 differing rank", "another count");
    } else {
        CHECK_WHY(ok && n == 0 && pt_guard_replica_check(a.guard, 12) == 0, "replicas: one replica, nothing to compare, no event", "events");
    }
    run_close(&a);

    /* ---- dynamic loss scaling ---- */
    {
        pt_loss_scale_desc ls;
        run sk;
        int64_t over = -1, grow = -1;
        memset(&ls, 0, sizeof ls);
        ls.init = 1024, ls.interval = 4;
        LS = &ls;
        gd = desc_of(PT_GUARD_POLICY_SKIP);
        ok = run_open(&a, &gd, NULL) && run_steps(&a, 0, NSTEPS);
        for (i = 0, n = 0; i < NSTEPS; i++) n += a.loss[i] != ref.loss[i] || a.verdict[i] != PT_GUARD_OK;
        pt_loss_scale_counts(a.ctx, &over, &grow);
        snprintf(why, sizeof why, "%d steps differ; scale %g, %lld overflows, %lld growths (%.200s)", n, pt_loss_scale(a.ctx), (long long)over,
                 (long long)grow, pt_error(a.ctx));
        CHECK_WHY(ok && n == 0 && same_params(&a, &ref) && pt_loss_scale(a.ctx) == 1024.0 * 128 && over == 0 && grow == 7,
                  "loss scale: no overflow: losses and parameters bit-identical to no scaling, the scale grew 7 times (x2 per 4 clean steps)", why);
        run_close(&a);

        /* references: steps 10 and 20 not taken, by hand, without loss scaling */
        LS = NULL;
        ok = run_open(&sk, &gd, NULL);
        sk.skip_at = 10, sk.skip_at2 = 20;
        ok = ok && run_steps(&sk, 0, NSTEPS);
        LS = &ls;
        /* inf in rank R's gradient at 10 and 20 (after the reduction: only R sees it), warn policy: the update is
           skipped anyway; save at 15 and resume */
        snprintf(why, sizeof why, "inf:10:%d,inf:20:%d", R, R);
        gd = desc_of(PT_GUARD_POLICY_WARN);
        snprintf(dir, sizeof dir, "%s/lscale", BASE);
        ok = run_open(&a, &gd, why) && run_steps(&a, 0, 10) && ok;
        {
            float *before = (float *)malloc((size_t)nparams(&a) * 4);
            double s0 = pt_loss_scale(a.ctx);
            int64_t steps0 = pt_optim_steps(a.o);
            memcpy(before, params(&a), (size_t)nparams(&a) * 4);
            ok = ok && run_step(&a, 10) == PT_GUARD_OK;
            snprintf(why, sizeof why, "scale %g -> %g, optimizer steps %lld -> %lld", s0, pt_loss_scale(a.ctx), (long long)steps0,
                     (long long)pt_optim_steps(a.o));
            CHECK_WHY(ok && !memcmp(before, params(&a), (size_t)nparams(&a) * 4) && pt_loss_scale(a.ctx) == s0 / 2 &&
                          pt_optim_steps(a.o) == steps0 && finite_params(&a),
                      "loss scale: an overflow at step 10: verdict OK, parameters and optimizer step count unchanged on every rank, scale halved", why);
            free(before);
        }
        ok = ok && run_steps(&a, 11, 15) && pt_ckpt_save(a.ctx, a.o, dir, 15, NULL) == PT_OK && run_steps(&a, 15, NSTEPS);
        n = events(&a, ev);
        pt_loss_scale_counts(a.ctx, &over, &grow);
        snprintf(why, sizeof why, "%d events: %s @%lld rank %d, %s @%lld; %lld overflows; guard stats overflows %lld", n,
                 n ? pt_guard_event_name(ev[0].kind) : "-", n ? (long long)ev[0].step : -1LL, n ? ev[0].rank : -9,
                 n > 1 ? pt_guard_event_name(ev[1].kind) : "-", n > 1 ? (long long)ev[1].step : -1LL, (long long)over,
                 (long long)pt_guard_stats_get(a.guard).overflows);
        CHECK_WHY(ok && n == 2 && ev[0].kind == PT_GUARD_EV_OVERFLOW && ev[0].step == 10 && ev[0].rank == R && ev[0].verdict == PT_GUARD_OK &&
                      ev[1].kind == PT_GUARD_EV_OVERFLOW && ev[1].step == 20 && over == 2 && pt_guard_stats_get(a.guard).overflows == 2 &&
                      pt_guard_stats_get(a.guard).consecutive_bad == 0,
                  tu_name("loss scale: injected overflows at 10 and 20 are 2 grad_overflow events naming rank %d, not bad steps", R), why);
        if (RANK == 0 && n) printf("loss scale: %s\n", ev[0].detail);
        CHECK_WHY(ok && same_params(&a, &sk), "loss scale: final parameters = the run that did not take steps 10 and 20 (bitwise)", "differ");
        /* resume at 15: same losses, scale and counters */
        snprintf(why, sizeof why, "inf:20:%d", R);
        ok = run_open(&b, &gd, why);
        ok = ok && pt_ckpt_load(b.ctx, b.o, dir, &loaded) == PT_OK && loaded == 15;
        ok = ok && run_steps(&b, 15, NSTEPS);
        for (i = 15, n = 0; i < NSTEPS; i++) n += b.loss[i] != a.loss[i];
        {
            int64_t o2 = -1, g2 = -1;
            pt_loss_scale_counts(b.ctx, &o2, &g2);
            snprintf(why, sizeof why, "%d losses differ; scale %g vs %g, overflows %lld vs %lld, growths %lld vs %lld", n, pt_loss_scale(b.ctx),
                     pt_loss_scale(a.ctx), (long long)o2, (long long)over, (long long)g2, (long long)grow);
            CHECK_WHY(ok && n == 0 && same_params(&a, &b) && pt_loss_scale(b.ctx) == pt_loss_scale(a.ctx) && o2 == over && g2 == grow,
                      "loss scale: resumed at 15: losses, parameters, scale and counters identical", why);
        }
        run_close(&a), run_close(&b), run_close(&sk);
        LS = NULL;
        ok = run_open(&a, &gd, NULL);
        ls.growth = 3;
        CHECK_WHY(ok && pt_loss_scale_enable(a.ctx, &ls) == PT_ERR_ARG && strstr(pt_error(a.ctx), "growth 3"),
                  "loss scale: growth 3 (no power of two) is PT_ERR_ARG naming it", pt_error(a.ctx));
        pt_error_clear(a.ctx);
        ls.growth = 2, ls.min_scale = 4096;
        CHECK_WHY(pt_loss_scale_enable(a.ctx, &ls) == PT_ERR_ARG && strstr(pt_error(a.ctx), "min_scale"),
                  "loss scale: init below min_scale is PT_ERR_ARG naming both", pt_error(a.ctx));
        run_close(&a);
    }

    /* ---- bad descriptions ---- */
    ok = run_open(&a, &gd, NULL);
    pt_guard_free(a.guard), a.guard = NULL;
    gd = desc_of(PT_GUARD_POLICY_ROLLBACK);
    CHECK_WHY(ok && !pt_guard_new(a.ctx, &gd) && pt_status_get(a.ctx) == PT_ERR_ARG && strstr(pt_error(a.ctx), "ckpt_dir"),
              "errors: ROLLBACK without ckpt_dir is PT_ERR_ARG naming ckpt_dir", pt_error(a.ctx));
    pt_error_clear(a.ctx);
    gd = desc_of(PT_GUARD_POLICY_SKIP);
    gd.z_threshold = -1;
    CHECK_WHY(!pt_guard_new(a.ctx, &gd) && pt_status_get(a.ctx) == PT_ERR_ARG, "errors: a negative z_threshold is PT_ERR_ARG", pt_error(a.ctx));
    pt_error_clear(a.ctx);
    gd = desc_of(PT_GUARD_POLICY_SKIP);
    setenv("PTRAIN_GUARD_INJECT", "nan:x:1", 1);
    CHECK_WHY(!pt_guard_new(a.ctx, &gd) && strstr(pt_error(a.ctx), "PTRAIN_GUARD_INJECT"), "errors: a bad PTRAIN_GUARD_INJECT is PT_ERR_ARG naming it",
              pt_error(a.ctx));
    run_close(&a);
    run_close(&ref), run_close(&skip10), run_close(&skip20);
    i = tu_summary();
    pt_dist_finalize(D);
    return i;
}
