/* test_host.c - host safety: what a program that links ptrain keeps.
   - pt_run catches SIGINT / SIGTERM only from pt_run_start to pt_run_free: in between a signal sets
     the stop flag (pt_run_step_end returns 1) and the program's handler does not run; after
     pt_run_free the program's own handlers are back (they run, and sigaction reports them). Two
     overlapping runs share one installation: the handlers come back when the last one ends.
   - a build without PTRAIN_TEST_HOOKS ignores the test hooks' environment: a PTRAIN_GUARD_INJECT
     that a hooks build refuses is not even read.
   Built twice by tests/run.sh: with POSIX (sigaction) and as strict C99 with -DHOST_PLAIN_C (C's
   signal(), whose handlers may reset to the default when they run).
   Build: cc -std=c99 -O2 -I. tests/test_host.c -lm; run: test_host */
#ifndef HOST_PLAIN_C
#define _POSIX_C_SOURCE 200809L
#endif
#define PTRAIN_IMPLEMENTATION
#define PTRAIN_HARNESS
#include "ptrain.h"
#include "test_util.h"
#include <signal.h>

static volatile sig_atomic_t mine_term, mine_int;
static void on_term(int s) {
    mine_term++;
#ifdef HOST_PLAIN_C
    signal(s, on_term);
#else
    (void)s;
#endif
}
static void on_int(int s) {
    mine_int++;
#ifdef HOST_PLAIN_C
    signal(s, on_int);
#else
    (void)s;
#endif
}

static void install_mine(void) {
#ifdef HOST_PLAIN_C
    signal(SIGTERM, on_term);
    signal(SIGINT, on_int);
#else
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_term;
    sigaction(SIGTERM, &sa, NULL);
    sa.sa_handler = on_int;
    sigaction(SIGINT, &sa, NULL);
#endif
}

/* whether sig's handler is h now: sigaction reads it without changing it; C's signal() cannot, so
   in that build the raise checks carry the test (IS / ISNT are always true there) */
#ifdef HOST_PLAIN_C
#define IS(sig, h) 1
#define ISNT(sig, h) 1
#else
static int handler_is(int sig, void (*h)(int)) {
    struct sigaction cur;
    return sigaction(sig, NULL, &cur) == 0 && cur.sa_handler == h;
}
#define IS(sig, h) handler_is(sig, h)
#define ISNT(sig, h) (!handler_is(sig, h))
#endif

#ifndef HOST_PLAIN_C
#include <pthread.h>
typedef struct crc_job {
    unsigned char *data;
    int64_t n;
    uint32_t crc;
} crc_job;
static void *crc_main(void *arg) {
    crc_job *j = (crc_job *)arg;
    int k;
    for (k = 0; k < 8; k++) j->crc = pt_crc32c(0, j->data, (size_t)j->n);
    return NULL;
}
#endif

static void quiet(void *user, int level, const char *msg) { (void)user, (void)level, (void)msg; }

int main(void) {
    pt_desc desc;
    pt_ctx *ctx;
    pt_run r1, r2;
    int64_t first = -1;
    int st;
    memset(&desc, 0, sizeof desc);
    desc.seed = 1, desc.threads = 1, desc.log = quiet;
    ctx = pt_init(&desc);
    CHECKF(ctx != NULL, "pt_init", "failed");
    if (!ctx) return tu_summary();
    install_mine();

    /* ---- signals belong to the run only while it runs ---- */
    memset(&r1, 0, sizeof r1);
    r1.guard = -1;
    CHECKF(pt_run_start(ctx, NULL, &r1, 10, &first) == PT_OK && first == 0, "pt_run_start without data or checkpoints", "%s", pt_error(ctx));
    CHECKF(ISNT(SIGTERM, on_term) && ISNT(SIGINT, on_int), "during the run the program's handlers are replaced", "still the program's");
    CHECKF(pt_run_step_end(ctx, NULL, &r1, 1, 10, 1.0f, 1.0f, 0.1f) == 0, "pt_run_step_end goes on without a signal", "stopped");
    raise(SIGTERM);
    CHECKF(mine_term == 0, "SIGTERM during the run does not reach the program's handler", "it ran %d times", (int)mine_term);
    st = pt_run_step_end(ctx, NULL, &r1, 2, 10, 1.0f, 1.0f, 0.1f);
    CHECKF(st == 1, "SIGTERM during the run: pt_run_step_end says stop", "returned %d", st);
    raise(SIGTERM); /* SIGTERM stays caught (a scheduler may send it twice) */
    CHECKF(mine_term == 0, "a second SIGTERM is caught too", "the program's handler ran");

    /* a second run that overlaps the first: one installation; ends with the last run */
    memset(&r2, 0, sizeof r2);
    r2.guard = -1;
    CHECKF(pt_run_start(ctx, NULL, &r2, 10, &first) == PT_OK, "a second pt_run_start", "%s", pt_error(ctx));
    pt_run_free(&r1);
    CHECKF(ISNT(SIGTERM, on_term), "one run of two ended: the signals stay with the other", "the program's handler is back early");
    raise(SIGTERM);
    CHECKF(mine_term == 0, "...and SIGTERM is still caught", "the program's handler ran");
    pt_run_free(&r2);
    CHECKF(IS(SIGTERM, on_term) && IS(SIGINT, on_int), "after the last pt_run_free the program's handlers are back",
              "sigaction reports another handler");
    raise(SIGTERM);
    raise(SIGINT);
    CHECKF(mine_term == 1 && mine_int == 1, "after pt_run_free SIGTERM and SIGINT reach the program's handlers", "term %d, int %d",
              (int)mine_term, (int)mine_int);
    pt_run_free(&r2); /* twice: no-op */
    raise(SIGTERM);
    CHECKF(mine_term == 2, "pt_run_free twice changes nothing", "term %d", (int)mine_term);

    /* ---- test hooks are compiled out (setenv is POSIX: the POSIX build checks it) ---- */
#ifndef HOST_PLAIN_C
    {
        pt_guard_desc gd;
        pt_guard *g;
        pt_mlp_new(ctx, "mlp", 4, 8, 2, 1, 0.3f);
        memset(&gd, 0, sizeof gd);
        gd.policy = PT_GUARD_POLICY_SKIP, gd.window = 16, gd.warmup = 8, gd.z_threshold = 6.0f;
        setenv("PTRAIN_GUARD_INJECT", "nan:x:1", 1); /* refused by a PTRAIN_TEST_HOOKS build (test_guard) */
        g = pt_guard_new(ctx, &gd);
        CHECKF(g != NULL, "without PTRAIN_TEST_HOOKS, PTRAIN_GUARD_INJECT is not read (a bad value is not even refused)", "%s", pt_error(ctx));
        pt_guard_free(g);
        unsetenv("PTRAIN_GUARD_INJECT");
    }
#endif
    /* ---- a thread beside the caller (ThreadSanitizer runs this, tests/tsan_test.sh): CRC32C on a
       thread of the program while the caller's GEMM picks its kernel ---- */
#ifndef HOST_PLAIN_C
    {
        pthread_t th;
        crc_job job;
        int64_t shape[2] = {64, 64};
        pt_graph *g = pt_graph_new(ctx);
        pt_tensor *a, *c;
        float *buf = (float *)calloc(64 * 64, sizeof(float));
        memset(&job, 0, sizeof job);
        job.n = 1 << 20, job.data = (unsigned char *)calloc((size_t)job.n, 1);
        CHECKF(g && buf && job.data && pthread_create(&th, NULL, crc_main, &job) == 0, "a thread of the program computes CRC32C", "could not start");
        a = pt_tensor_from(g, PT_F32, 2, shape, buf);
        c = pt_matmul(g, a, a, 0, 0); /* the GEMM picks its kernel meanwhile */
        pthread_join(th, NULL);
        CHECKF(c && job.crc == pt_crc32c(0, job.data, (size_t)job.n), "CRC32C on a thread while the caller multiplies: the same CRC", "%08x",
               (unsigned)job.crc);
        pt_graph_free(g);
        free(buf);
        free(job.data);
    }
#endif
    pt_shutdown(ctx);
    return tu_summary();
}
