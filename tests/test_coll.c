/* test_coll.c - collective records, debug mode and the watchdog (>>dist). Build: mpicc -std=c99
   -DPTRAIN_MPI -fopenmp -I. tests/test_coll.c -lm, run under mpirun -np 2 or 3 (layout tp = world
   size); also builds and runs without MPI (a world of one: no calls, nothing recorded).
   Default mode: the records of a few known calls (pt_dist_agree, pt_dist_agree_msg, pt_tp_reduce,
   pt_grad_norm): numbers, op, communicator, count, dtype, root, step/micro-batch tags, the ring's
   wrap-around, the dump; then debug mode with a deliberate mismatch (the last rank reduces a
   different count; rank 0 asks for another op): every rank's call fails with a message naming the
   disagreeing rank(s) and what each asked for, and the grid stays usable. Every check is agreed
   across ranks (test_util.h); rank 0 prints PASS/FAIL and "N passed, N failed".
   --watchdog: rank 1 sleeps 8 s while rank 0 waits in pt_dist_agree; with PTRAIN_WATCHDOG=2 rank
   0's watchdog aborts the job (tests/coll_test.sh checks the exit status and stderr). Prints
   "NOT ABORTED" if the call returns.
   --init-error: prints "INIT ERROR rank <r>: <message>" if pt_dist_init refuses (bad environment). */
#define PTRAIN_IMPLEMENTATION
#include "ptrain.h"
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pt_dist *g_d;
static int g_rank, g_size;


static pt_ctx *mk_ctx(pt_dist *d) {
    pt_desc desc;
    memset(&desc, 0, sizeof desc);
    desc.seed = 7;
    desc.threads = 1;
    desc.dist = d;
    desc.log_level = PT_LOG_ERROR + 1; /* quiet: expected errors are checked, not logged */
    return pt_init(&desc);
}

/* the last record, and a description of it for failure messages */
static pt_coll_record last(char *why, size_t n) {
    pt_coll_record r[1];
    memset(r, 0, sizeof r);
    pt_dist_records(g_d, r, 1);
    snprintf(why, n, "last record: seq %llu op %d comm %d #%llu count %lld dtype %d peer %d step %lld mb %lld state %d t %.6f..%.6f",
             (unsigned long long)r->seq, (int)r->op, (int)r->comm, (unsigned long long)r->comm_seq, (long long)r->count, (int)r->dtype,
             (int)r->peer, (long long)r->step, (long long)r->micro_batch, (int)r->state, r->t_start, r->t_end);
    return r[0];
}

static int is(const pt_coll_record *r, uint64_t seq, int op, int comm, uint64_t comm_seq, int64_t count, int dtype, int peer,
              int64_t step, int64_t mb) {
    return r->seq == seq && r->op == op && r->comm == comm && r->comm_seq == comm_seq && r->count == count && r->dtype == dtype &&
           r->peer == peer && r->step == step && r->micro_batch == mb && r->state == PT_COLL_DONE && r->rc == 0 &&
           r->t_end >= r->t_start && r->t_start >= 0;
}

/* a [rows, 4] tensor summed over TP with pt_tp_reduce; 1 if it returned a tensor */
static int tp_reduce(pt_ctx *ctx, int rows) {
    pt_graph *g = pt_graph_new(ctx);
    pt_tensor *x = pt_tensor_new(g, PT_F32, 2, (int64_t)rows, (int64_t)4, (int64_t)0, (int64_t)0);
    pt_tensor *y = x ? pt_tp_reduce(g, x) : NULL;
    pt_graph_free(g);
    return y != NULL;
}

static void test_records(void) {
    char why[512], err[PT__DIST_MSG];
    pt_coll_record r, ring[PT_COLL_RING + 10];
    pt_ctx *ctx = mk_ctx(g_d);
    int multi = g_size > 1, i, n;
    uint64_t seq0;

    n = pt_dist_records(g_d, ring, PT_COLL_RING);
    CHECK_WHY(n == 0, "pt_dist_init's own calls are not recorded", "records after init");

    pt_dist_set_step(g_d, 7, 2);
    CHECK_WHY(pt_dist_agree(g_d, 1) == 1, "pt_dist_agree(1) agrees", "returned 0");
    r = last(why, sizeof why);
    if (multi) CHECK_WHY(is(&r, 1, PT_COLL_ALLREDUCE, PT_COMM_WORLD, 1, 1, PT_COLL_I32, -1, 7, 2), "record 1: allreduce of 1 i32 on world, step 7, micro-batch 2", why);
    else CHECK_WHY(pt_dist_records(g_d, ring, 4) == 0, "a world of one records nothing", why);

    /* a failing agreement: the allreduce, then the lowest failing rank's message broadcast */
    snprintf(err, sizeof err, "rank %d failed on purpose", g_rank);
    pt_dist_set_step(g_d, 8, 0);
    CHECK_WHY(pt_dist_agree_msg(g_d, g_rank != 0 || !multi ? 0 : 1, err, sizeof err) == 0, "pt_dist_agree_msg with failing ranks returns 0",
              "returned 1");
    if (multi) {
        CHECK_WHY(strcmp(err, "rank 1 failed on purpose") == 0, "every rank has the lowest failing rank's message", err);
        n = pt_dist_records(g_d, ring, 2);
        snprintf(why, sizeof why, "%d records; last two: op %d #%llu count %lld dtype %d peer %d / op %d #%llu count %lld dtype %d peer %d", n,
                 (int)ring[0].op, (unsigned long long)ring[0].comm_seq, (long long)ring[0].count, (int)ring[0].dtype, (int)ring[0].peer,
                 (int)ring[1].op, (unsigned long long)ring[1].comm_seq, (long long)ring[1].count, (int)ring[1].dtype, (int)ring[1].peer);
        CHECK_WHY(n == 2 && is(&ring[0], 2, PT_COLL_ALLREDUCE, PT_COMM_WORLD, 2, 1, PT_COLL_I32, -1, 8, 0) &&
                      is(&ring[1], 3, PT_COLL_BCAST, PT_COMM_WORLD, 3, PT__DIST_MSG, PT_COLL_CHAR, 1, 8, 0),
                  "records 2, 3: allreduce, then bcast of the message with root 1 (step 8)", why);
    }

    /* tensor parallelism: pt_tp_reduce and the gradient norm */
    pt_dist_set_step(g_d, 9, 3);
    CHECK_WHY(ctx && tp_reduce(ctx, 4), "pt_tp_reduce of [4, 4] runs", ctx ? pt_error(ctx) : "no context");
    r = last(why, sizeof why);
    if (multi) CHECK_WHY(is(&r, 4, PT_COLL_ALLREDUCE, PT_COMM_TP, 1, 16, PT_COLL_F32, -1, 9, 3), "record 4: allreduce of 16 f32 on TP (its #1), step 9, micro-batch 3", why);
    if (ctx) {
        pt_linear_layer l = pt_linear_col_new(ctx, "l", 4, 4 * g_size, 0, 0.1f);
        pt_grad_norm(ctx);
        r = last(why, sizeof why);
        if (multi) CHECK_WHY(l.w && is(&r, 5, PT_COLL_ALLREDUCE, PT_COMM_TP, 2, 1, PT_COLL_F64, -1, 9, 3), "record 5: pt_grad_norm's allreduce of 1 f64 on TP (its #2)", why);
    }

    /* the ring keeps the last PT_COLL_RING, oldest first, numbers without gaps */
    seq0 = last(why, sizeof why).seq;
    for (i = 0; i < 300; i++) pt_dist_agree(g_d, 1);
    n = pt_dist_records(g_d, ring, PT_COLL_RING + 10);
    if (multi) {
        int ok = n == PT_COLL_RING && ring[n - 1].seq == seq0 + 300 && ring[0].seq == seq0 + 300 - PT_COLL_RING + 1;
        for (i = 1; ok && i < n; i++) ok = ring[i].seq == ring[i - 1].seq + 1 && ring[i].comm_seq == ring[i - 1].comm_seq + 1;
        snprintf(why, sizeof why, "%d records, seq %llu..%llu", n, n ? (unsigned long long)ring[0].seq : 0ull, n ? (unsigned long long)ring[n - 1].seq : 0ull);
        CHECK_WHY(ok, "after 300 more calls the ring holds the last 256 in order, numbers without gaps", why);
        CHECK_WHY(pt_dist_records(g_d, ring, 3) == 3 && ring[2].seq == seq0 + 300, "pt_dist_records(max 3) gives the newest 3", "wrong");
    }

    /* the dump */
    {
        FILE *f = tmpfile();
        char buf[4096];
        size_t got = 0;
        if (f) {
            pt_dist_dump_records(g_d, f);
            rewind(f);
            got = fread(buf, 1, sizeof buf - 1, f);
            fclose(f);
        }
        buf[got] = 0;
        snprintf(why, sizeof why, "dump starts: %.300s", buf);
        CHECK_WHY(strstr(buf, "collective records of rank") != NULL && (!multi || (strstr(buf, "allreduce") && strstr(buf, " world ") && strstr(buf, " done"))),
                  "pt_dist_dump_records prints the header and one line per record", why);
    }
    pt_shutdown(ctx);
}

static void test_debug_mode(void) {
    char why[1024], want[256];
    pt_ctx *ctx = mk_ctx(g_d);
    pt_coll_record r;
    const char *m;
    int ok, i;

    CHECK_WHY(pt_dist_set_coll_check(g_d, 1) == PT_OK, "pt_dist_set_coll_check(1) on every rank", "refused");
    CHECK_WHY(pt_dist_agree(g_d, 1) == 1 && pt_dist_coll_error(g_d)[0] == 0, "debug mode: a matching collective runs", pt_dist_coll_error(g_d));
    CHECK_WHY(ctx && tp_reduce(ctx, 4), "debug mode: a matching pt_tp_reduce runs", ctx ? pt_error(ctx) : "no context");
    if (!ctx || g_size < 2) {
        pt_dist_set_coll_check(g_d, 0);
        pt_shutdown(ctx);
        return;
    }

    /* count mismatch: the last rank reduces [3, 4], the others [4, 4] */
    pt_error_clear(ctx);
    ok = tp_reduce(ctx, g_rank == g_size - 1 ? 3 : 4);
    m = pt_error(ctx);
    CHECK_WHY(!ok && pt_status_get(ctx) == PT_ERR_DEVICE, "count mismatch: pt_tp_reduce fails on every rank (no hang)", m);
    CHECK_WHY(strstr(m, "collective mismatch on the TP communicator") != NULL, "the message names the mismatch and the communicator", m);
    snprintf(want, sizeof want, "rank %d disagrees with the others", g_size - 1);
    CHECK_WHY(strstr(m, want) != NULL, "the message names the disagreeing rank", m);
    snprintf(want, sizeof want, "rank %d asked for allreduce of 12 f32", g_size - 1);
    CHECK_WHY(strstr(m, want) != NULL && strstr(m, "allreduce of 16 f32") != NULL, "the message says what each rank asked for", m);
    if (g_size == 3) CHECK_WHY(strstr(m, "ranks 0,1 asked for allreduce of 16 f32") != NULL, "the agreeing ranks are listed together", m);
    r = last(why, sizeof why);
    CHECK_WHY(r.state == PT_COLL_REFUSED && r.count == (g_rank == g_size - 1 ? 12 : 16), "the refused call is recorded as refused", why);

#ifdef PTRAIN_MPI
    /* op mismatch: rank 0 asks for a bcast, the others for an allreduce (private entry point) */
    {
        uint64_t s = pt__coll_begin(g_d, g_rank == 0 ? PT_COLL_BCAST : PT_COLL_ALLREDUCE, PT_COMM_WORLD, 4, PT_COLL_I32, g_rank == 0 ? 0 : -1);
        if (s) pt__coll_end(g_d, s, MPI_SUCCESS); /* not refused: a bug; make no call */
        m = pt_dist_coll_error(g_d);
        CHECK_WHY(s == 0, "op mismatch: refused on every rank", m);
        CHECK_WHY(strstr(m, "bcast of 4 i32 with root 0") != NULL && strstr(m, "allreduce of 4 i32") != NULL, "the message names both ops", m);
        if (g_size == 3) CHECK_WHY(strstr(m, "rank 0 disagrees") != NULL && strstr(m, "ranks 1,2 asked for allreduce") != NULL,
                                   "the odd rank out is named", m);
    }
#endif

    /* the grid stays usable: the refused calls were numbered alike on every rank */
    CHECK_WHY(pt_dist_agree(g_d, 1) == 1, "after the mismatches a matching collective runs again", pt_dist_coll_error(g_d));
    pt_error_clear(ctx);
    CHECK_WHY(tp_reduce(ctx, 4), "and so does pt_tp_reduce", pt_error(ctx));

    /* switching needs the same value everywhere */
    CHECK_WHY(pt_dist_set_coll_check(g_d, g_rank == 0) == PT_ERR_ARG, "pt_dist_set_coll_check with different values: PT_ERR_ARG on every rank", "accepted");
    CHECK_WHY(pt_dist_set_coll_check(g_d, 0) == PT_OK, "pt_dist_set_coll_check(0)", "refused");
    for (i = 0; i < 3; i++) pt_dist_agree(g_d, 1);
    r = last(why, sizeof why);
    CHECK_WHY(r.state == PT_COLL_DONE, "debug mode off: calls run", why);
    pt_shutdown(ctx);
}

static void test_watchdog_api(void) {
    double t0;
    CHECK_WHY(pt_dist_set_watchdog(g_d, -1) == PT_ERR_ARG, "pt_dist_set_watchdog(-1) is PT_ERR_ARG", "accepted");
    CHECK_WHY(pt_dist_set_watchdog(g_d, 30) == PT_OK, "pt_dist_set_watchdog(30) starts the watchdog", "refused");
    CHECK_WHY(pt_dist_agree(g_d, 1) == 1, "collectives run under a watchdog with a long deadline", "failed");
    t0 = pt_time();
    CHECK_WHY(pt_dist_set_watchdog(g_d, 0) == PT_OK && pt_time() - t0 < 1.0, "pt_dist_set_watchdog(0) stops it promptly", "slow or refused");
}

int main(int argc, char **argv) {
    pt_layout lay;
    char err[PT__DIST_MSG];
    int nf, i, mode = 0;
    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--watchdog")) mode = 1;
        if (!strcmp(argv[i], "--init-error")) mode = 2;
        if (!strcmp(argv[i], "--own-init")) mode = 3;
    }
    memset(&lay, 0, sizeof lay);
    lay.dp = 1, lay.tp = 0, lay.pp = 1;
#ifdef PTRAIN_MPI
    if (mode == 3) { /* the program initializes MPI itself, at the default level (not MULTIPLE) */
        int provided = 0;
        MPI_Init(&argc, &argv);
        MPI_Query_thread(&provided);
        g_d = pt_dist_init(&argc, &argv, &lay, err, sizeof err);
        if (!g_d) printf("INIT ERROR rank ?: %s\n", err);
        else {
            printf("INIT OK rank %d level %d%s\n", pt_dist_rank(g_d), provided, provided == MPI_THREAD_MULTIPLE ? " (MULTIPLE)" : "");
            printf("SET_WATCHDOG %s\n", pt_dist_set_watchdog(g_d, 5) == PT_ERR_STATE ? "refused" : "accepted");
            pt_dist_finalize(g_d);
        }
        MPI_Finalize();
        return 0;
    }
#endif
    g_d = pt_dist_init(&argc, &argv, &lay, err, sizeof err);
    if (mode == 2) {
        if (!g_d) printf("INIT ERROR rank ?: %s\n", err);
        else printf("INIT OK rank %d\n", pt_dist_rank(g_d));
        pt_dist_finalize(g_d);
        return 0;
    }
    if (!g_d) {
        printf("FAIL pt_dist_init: %s\n0 passed, 1 failed\n", err);
        return 1;
    }
    g_rank = pt_dist_rank(g_d);
    g_size = pt_dist_size(g_d);
    tu_mpi_init(tu_name(" (np=%d)", g_size));
    if (mode == 1) {
        pt_dist_set_step(g_d, 5, 1);
        pt_dist_agree(g_d, 1);
        if (g_rank == 1) sleep(8);
        pt_dist_agree(g_d, 1);
        printf("NOT ABORTED rank %d\n", g_rank);
        pt_dist_finalize(g_d);
        return 0;
    }
    test_records();
    test_debug_mode();
    test_watchdog_api();
    nf = tu_summary();
    pt_dist_finalize(g_d);
    return nf;
}
