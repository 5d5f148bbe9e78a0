/* test_dist.c - the process grid (>>dist): pure layout functions, and with -DPTRAIN_MPI the real grid.
   Build and run (tests/dist_test.sh does all of this):
     cc -std=c99 -O2 -Wall -Wextra -I. tests/test_dist.c -o build/tests/test_dist -lm
     mpicc -std=c99 -O2 -Wall -Wextra -DPTRAIN_MPI -I. tests/test_dist.c -o build/tests/test_dist_mpi -lm
     mpirun --oversubscribe -np 8 build/tests/test_dist_mpi
   Every check is collective: each rank evaluates it, rank 0 prints one PASS/FAIL line (failing ranks
   add a "  rank R: why" line), and rank 0 prints the final "N passed, N failed".
   --refused-first TP PP: the FIRST pt_dist_init (the one that initializes MPI) gets layout
     dp=0 tp=TP pp=PP and must be refused; each rank prints "REFUSED rank R: <message>" (or
     "FAIL rank R: ...", exit 1) and the library must have finalized MPI (mpirun would complain). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* setenv, sched_getaffinity, sysconf: for the test's own expectations */
#endif
#define PTRAIN_IMPLEMENTATION
#include "../ptrain.h"
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pt_layout td_layout(int dp, int tp, int pp, int allow) {
    pt_layout l;
    l.dp = dp, l.tp = tp, l.pp = pp, l.allow_tp_across_nodes = allow;
    return l;
}

/* ---- pure functions (identical on every rank) ------------------------------------------------- */
static void test_resolve(void) {
    char err[256];
    pt_layout l;
    pt_status st;

    l = td_layout(0, 0, 0, 0);
    st = pt_layout_resolve(&l, 8, err, sizeof err);
    CHECKF(st == PT_OK && l.dp == 8 && l.tp == 1 && l.pp == 1, "resolve: all zero = pure data parallel", "%d %d %d (%s)",
           l.dp, l.tp, l.pp, err);
    l = td_layout(2, 0, 2, 0);
    st = pt_layout_resolve(&l, 8, err, sizeof err);
    CHECKF(st == PT_OK && l.dp == 2 && l.tp == 2 && l.pp == 2, "resolve: tp=0 is the rest", "%d %d %d", l.dp, l.tp, l.pp);
    l = td_layout(0, 2, 2, 1);
    st = pt_layout_resolve(&l, 16, err, sizeof err);
    CHECKF(st == PT_OK && l.dp == 4 && l.tp == 2 && l.pp == 2 && l.allow_tp_across_nodes == 1, "resolve: dp=0 is the rest",
           "%d %d %d", l.dp, l.tp, l.pp);
    l = td_layout(1, 4, 0, 0);
    st = pt_layout_resolve(&l, 8, err, sizeof err);
    CHECKF(st == PT_OK && l.pp == 2, "resolve: pp=0 is the rest", "pp=%d", l.pp);
    l = td_layout(2, 2, 2, 0);
    st = pt_layout_resolve(&l, 8, err, sizeof err);
    CHECKF(st == PT_OK && err[0] == 0, "resolve: exact product", "%s", err);

    l = td_layout(2, 2, 2, 0);
    st = pt_layout_resolve(&l, 4, err, sizeof err);
    CHECKF(st == PT_ERR_ARG && strstr(err, "dp=2 tp=2 pp=2 needs 8 ranks, the world has 4") && l.dp == 2,
           "resolve: product != world is refused (message, layout untouched)", "st %d '%s'", (int)st, err);
    l = td_layout(-1, 2, 1, 0);
    st = pt_layout_resolve(&l, 8, err, sizeof err);
    CHECKF(st == PT_ERR_ARG && strstr(err, "negative") && strstr(err, "dp=-1"), "resolve: negative size refused", "'%s'", err);
    l = td_layout(0, 0, 2, 0);
    st = pt_layout_resolve(&l, 8, err, sizeof err);
    CHECKF(st == PT_ERR_ARG && strstr(err, "two sizes are 0"), "resolve: two zeros refused", "'%s'", err);
    l = td_layout(3, 0, 1, 0);
    st = pt_layout_resolve(&l, 8, err, sizeof err);
    CHECKF(st == PT_ERR_ARG && strstr(err, "does not divide by 3"), "resolve: rest that does not divide refused", "'%s'", err);
    l = td_layout(16, 0, 1, 0);
    st = pt_layout_resolve(&l, 8, err, sizeof err);
    CHECKF(st == PT_ERR_ARG && l.tp == 0, "resolve: known sizes larger than the world refused", "'%s'", err);
    l = td_layout(2147483647, 2147483647, 2147483647, 0);
    st = pt_layout_resolve(&l, 8, err, sizeof err);
    CHECKF(st == PT_ERR_ARG, "resolve: huge sizes (no overflow)", "'%s'", err);
    l = td_layout(1, 1, 1, 0);
    st = pt_layout_resolve(&l, 0, err, sizeof err);
    CHECKF(st == PT_ERR_ARG && strstr(err, "world of 0"), "resolve: world 0 refused", "'%s'", err);
    st = pt_layout_resolve(NULL, 8, err, sizeof err);
    CHECKF(st == PT_ERR_ARG && strstr(err, "NULL"), "resolve: NULL layout", "'%s'", err);
    l = td_layout(2, 2, 2, 0);
    st = pt_layout_resolve(&l, 4, NULL, 0);
    CHECKF(st == PT_ERR_ARG, "resolve: err may be NULL", "st %d", (int)st);
    {
        char small[12];
        memset(small, 'x', sizeof small);
        l = td_layout(2, 2, 2, 0);
        st = pt_layout_resolve(&l, 4, small, 8);
        CHECKF(st == PT_ERR_ARG && small[7] == 0 && strlen(small) == 7 && small[8] == 'x', "resolve: message truncated to errlen",
               "len %d", (int)strlen(small));
    }
}

static void test_coords(void) {
    pt_layout l = td_layout(2, 2, 2, 0);
    pt_coords c = pt_layout_coords(&l, 5);
    int bad = 0, n = 0, dp, tp, pp, r;
    /* pinned order: rank = tp + TP*(dp + DP*pp): 5 = 1 + 2*(0 + 2*1) */
    CHECKF(c.tp == 1 && c.dp == 0 && c.pp == 1, "coords: dp2 tp2 pp2 rank 5 = (tp 1, dp 0, pp 1)", "tp %d pp %d dp %d", c.tp,
           c.pp, c.dp);
    l = td_layout(2, 4, 3, 0);
    c.tp = 3, c.dp = 1, c.pp = 2;
    CHECKF(pt_layout_rank(&l, c) == 3 + 4 * (1 + 2 * 2), "coords: rank of (tp 3, dp 1, pp 2) in dp2 tp4 pp3 is 23", "%d",
           pt_layout_rank(&l, c));
    c = pt_layout_coords(&l, 24);
    CHECKF(c.tp == -1 && c.pp == -1 && c.dp == -1, "coords: rank past the world gives -1", "%d %d %d", c.tp, c.pp, c.dp);
    c = pt_layout_coords(&l, -1);
    CHECKF(c.tp == -1, "coords: negative rank gives -1", "%d", c.tp);
    c.tp = 4, c.dp = 0, c.pp = 0;
    CHECKF(pt_layout_rank(&l, c) == -1, "rank: coordinate out of range gives -1", "%d", pt_layout_rank(&l, c));
    c.tp = 0, c.dp = -1;
    CHECKF(pt_layout_rank(&l, c) == -1, "rank: negative coordinate gives -1", "%d", pt_layout_rank(&l, c));
    l = td_layout(0, 2, 2, 0);
    c = pt_layout_coords(&l, 0);
    CHECKF(c.tp == -1, "coords: an unresolved layout gives -1", "%d", c.tp);

    /* round trip over many layouts */
    for (dp = 1; dp <= 8; dp++)
        for (tp = 1; tp <= 8; tp++)
            for (pp = 1; pp <= 8; pp++) {
                l = td_layout(dp, tp, pp, 0);
                for (r = 0; r < dp * tp * pp; r++) {
                    c = pt_layout_coords(&l, r);
                    n++;
                    if (c.tp < 0 || c.tp >= tp || c.dp < 0 || c.dp >= dp || c.pp < 0 || c.pp >= pp || pt_layout_rank(&l, c) != r ||
                        r / tp != (r - c.tp) / tp || c.tp != r % tp)
                        bad++;
                }
            }
    CHECKF(bad == 0, tu_name("coords <-> rank round trip, TP innermost (%d ranks over 512 layouts)", n), "%d bad", bad);
}

/* For every layout with dp*tp*pp <= 64: TP, PP and DP groups each partition the world, have the
   right sizes, and two groups of different kinds meet in at most one rank. */
static void test_orthogonality(void) {
    int dp, tp, pp, r, k, nlay = 0, bad = 0;
    char why[256] = "";
    for (dp = 1; dp <= 64; dp++)
        for (tp = 1; dp * tp <= 64; tp++)
            for (pp = 1; dp * tp * pp <= 64; pp++) {
                pt_layout l = td_layout(dp, tp, pp, 0);
                int W = dp * tp * pp, seen[3][64], gid[3][64], gsize[3][64], inter[64 * 64];
                nlay++;
                for (k = 0; k < 3; k++)
                    for (r = 0; r < 64; r++) seen[k][r] = gsize[k][r] = 0;
                for (r = 0; r < W; r++) {
                    pt_coords c = pt_layout_coords(&l, r);
                    gid[0][r] = c.dp + dp * c.pp; /* TP group: fixed dp, pp */
                    gid[1][r] = c.tp + tp * c.dp; /* PP group: fixed tp, dp */
                    gid[2][r] = c.tp + tp * c.pp; /* DP group: fixed tp, pp */
                    for (k = 0; k < 3; k++) {
                        seen[k][r]++;
                        gsize[k][gid[k][r]]++;
                    }
                }
                for (r = 0; r < W; r++)
                    for (k = 0; k < 3; k++)
                        if (seen[k][r] != 1 || gid[k][r] < 0) {
                            bad++;
                            snprintf(why, sizeof why, "dp%d tp%d pp%d: rank %d in %d groups of kind %d", dp, tp, pp, r, seen[k][r], k);
                        }
                for (k = 0; k < 3; k++) {
                    int want = k == 0 ? tp : k == 1 ? pp : dp, ngroups = W / want, g;
                    for (g = 0; g < ngroups; g++)
                        if (gsize[k][g] != want) {
                            bad++;
                            snprintf(why, sizeof why, "dp%d tp%d pp%d: group %d of kind %d has %d ranks, expected %d", dp, tp, pp, g, k,
                                     gsize[k][g], want);
                        }
                }
                /* members of each group, translated back with pt_layout_rank, are the group */
                for (r = 0; r < W; r++) {
                    pt_coords c = pt_layout_coords(&l, r), m = c;
                    for (k = 0; k < tp; k++) {
                        m = c, m.tp = k;
                        if (gid[0][pt_layout_rank(&l, m)] != gid[0][r]) bad++;
                    }
                    for (k = 0; k < pp; k++) {
                        m = c, m.pp = k;
                        if (gid[1][pt_layout_rank(&l, m)] != gid[1][r]) bad++;
                    }
                    for (k = 0; k < dp; k++) {
                        m = c, m.dp = k;
                        if (gid[2][pt_layout_rank(&l, m)] != gid[2][r]) bad++;
                    }
                }
                /* pairwise intersections of kinds (a, b) */
                {
                    int a, b;
                    for (a = 0; a < 3; a++)
                        for (b = a + 1; b < 3; b++) {
                            int na = W / (a == 0 ? tp : a == 1 ? pp : dp), nb = W / (b == 0 ? tp : b == 1 ? pp : dp);
                            for (k = 0; k < na * nb; k++) inter[k] = 0;
                            for (r = 0; r < W; r++) inter[gid[a][r] * nb + gid[b][r]]++;
                            for (k = 0; k < na * nb; k++)
                                if (inter[k] > 1) {
                                    bad++;
                                    snprintf(why, sizeof why, "dp%d tp%d pp%d: groups of kinds %d and %d share %d ranks", dp, tp, pp, a, b,
                                             inter[k]);
                                }
                        }
                }
            }
    CHECKF(bad == 0, tu_name("orthogonality: TP/PP/DP groups partition the world and meet in <= 1 rank (%d layouts <= 64)", nlay),
           "%d bad; last: %s", bad, why);
}

/* ---- the world of one (no MPI) ----------------------------------------------------------------- */
#ifndef PTRAIN_MPI
static int td_cpus(void) {
#if defined(CPU_COUNT)
    cpu_set_t s;
    if (sched_getaffinity(0, sizeof s, &s) == 0) return CPU_COUNT(&s);
#endif
    return 0;
}

static void test_world_of_one(void) {
    char err[512];
    pt_layout l = td_layout(1, 1, 1, 0);
    pt_dist *d = pt_dist_init(NULL, NULL, &l, err, sizeof err);
    pt_coords c;
    const char *env = getenv("PTRAIN_THREADS");
    int cpus = td_cpus(), th;
    if (!CHECKF(d != NULL, "world of one: pt_dist_init dp1 tp1 pp1", "'%s'", err)) return;
    c = pt_dist_coords(d);
    l = pt_dist_layout(d);
    CHECKF(pt_dist_rank(d) == 0 && pt_dist_size(d) == 1 && c.tp == 0 && c.pp == 0 && c.dp == 0 && l.dp == 1 && l.tp == 1 && l.pp == 1,
           "world of one: rank 0 of 1, coords 0", "rank %d size %d", pt_dist_rank(d), pt_dist_size(d));
    CHECKF(pt_dist_node(d) == 0 && pt_dist_nodes(d) == 1 && pt_dist_local_rank(d) == 0 && pt_dist_local_size(d) == 1 &&
               pt_dist_node_of(d, 0) == 0 && pt_dist_node_of(d, 1) == -1,
           "world of one: one node, local rank 0 of 1", "node %d/%d", pt_dist_node(d), pt_dist_nodes(d));
    CHECKF(pt_dist_comm(d, PT_COMM_WORLD) == NULL && pt_dist_comm(d, PT_COMM_TP) == NULL && pt_dist_mpi_thread_level(d) == 0,
           "world of one: no communicators without PTRAIN_MPI", "comm %p", pt_dist_comm(d, PT_COMM_WORLD));
    CHECKF(pt_dist_agree(d, 1) == 1 && pt_dist_agree(d, 0) == 0 && pt_dist_agree(d, 7) == 1, "world of one: agree", "%d %d",
           pt_dist_agree(d, 1), pt_dist_agree(d, 0));
    strcpy(err, "mine");
    CHECKF(pt_dist_agree_msg(d, 0, err, sizeof err) == 0 && strcmp(err, "mine") == 0, "world of one: agree_msg keeps the message",
           "'%s'", err);
    th = pt_dist_threads(d);
    if (env && atoi(env) > 0)
        CHECKF(th == atoi(env), "world of one: PTRAIN_THREADS overrides the thread count", "%d vs %s", th, env);
    else
        CHECKF(th >= 1 && (cpus == 0 || th == cpus), "world of one: threads = CPUs of the affinity mask", "%d vs %d", th, cpus);
    {
        FILE *f = tmpfile();
        char line[512];
        int rows = 0, header = 0, r[7];
        if (f) {
            pt_dist_print(d, f);
            rewind(f);
            while (fgets(line, sizeof line, f)) {
                if (strstr(line, "grid: 1 ranks = dp 1 x tp 1 x pp 1") == line) header++;
                if (sscanf(line, "%d %d %d %d %d %d %d", &r[0], &r[1], &r[2], &r[3], &r[4], &r[5], &r[6]) == 7 && r[0] == 0 && r[4] == 0)
                    rows++;
            }
            fclose(f);
        }
        CHECKF(f && header == 1 && rows == 1, "world of one: pt_dist_print has the header and one row", "header %d rows %d", header,
               rows);
    }
    pt_dist_finalize(d);

    d = pt_dist_init(NULL, NULL, NULL, err, sizeof err);
    CHECKF(d && pt_dist_layout(d).dp == 1, "world of one: NULL layout", "'%s'", err);
    pt_dist_finalize(d);
    l = td_layout(2, 1, 1, 0);
    d = pt_dist_init(NULL, NULL, &l, err, sizeof err);
    CHECKF(!d && strstr(err, "pt_dist_init: layout dp=2 tp=1 pp=1 needs 2 ranks, the world has 1"),
           "world of one: dp2 is refused with a message", "'%s'", err);
    l = td_layout(0, 0, 1, 0);
    d = pt_dist_init(NULL, NULL, &l, err, sizeof err);
    CHECKF(!d && strstr(err, "two sizes are 0"), "world of one: two zeros refused", "'%s'", err);
    setenv("PTRAIN_FAKE_NODE_SIZE", "2x", 1);
    d = pt_dist_init(NULL, NULL, NULL, err, sizeof err);
    CHECKF(!d && strstr(err, "PTRAIN_FAKE_NODE_SIZE='2x'"), "world of one: malformed PTRAIN_FAKE_NODE_SIZE refused", "'%s'", err);
    unsetenv("PTRAIN_FAKE_NODE_SIZE");
    pt_dist_finalize(NULL);
    CHECKF(pt_dist_rank(NULL) == 0 && pt_dist_size(NULL) == 1 && pt_dist_nodes(NULL) == 1 && pt_dist_threads(NULL) >= 1,
           "NULL grid = world of one", "size %d", pt_dist_size(NULL));
}
#endif

/* ---- the MPI grid ---------------------------------------------------------------------------------- */
#ifdef PTRAIN_MPI
/* every rank got the same string */
static int td_same_string(const char *s) {
    unsigned long long h = pt_hash_str(s), lo = 0, hi = 0;
    MPI_Allreduce(&h, &lo, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&h, &hi, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    return lo == hi;
}

/* the expected node of each rank: fake nodes of N consecutive ranks, or the real shared-memory node
   (numbered by its lowest rank) */
static void td_nodes(int fake, int size, int *node_of) {
    int r, rank, leader, *leaders = (int *)malloc((size_t)size * sizeof(int)), n = 0;
    int *idx = (int *)malloc((size_t)size * sizeof(int));
    MPI_Comm shm;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &shm);
    MPI_Allreduce(&rank, &leader, 1, MPI_INT, MPI_MIN, shm);
    MPI_Comm_free(&shm);
    MPI_Allgather(&leader, 1, MPI_INT, leaders, 1, MPI_INT, MPI_COMM_WORLD);
    for (r = 0; r < size; r++) {
        if (fake > 0) leaders[r] = r - r % fake;
        if (leaders[r] == r) idx[r] = n++;
        node_of[r] = idx[leaders[r]];
    }
    free(leaders);
    free(idx);
}

/* world ranks of the members of comm, in comm rank order */
static int td_members(MPI_Comm comm, int *out) {
    MPI_Group g, w;
    int n, i, *in;
    MPI_Comm_size(comm, &n);
    in = (int *)malloc((size_t)n * sizeof(int));
    for (i = 0; i < n; i++) in[i] = i;
    MPI_Comm_group(comm, &g);
    MPI_Comm_group(MPI_COMM_WORLD, &w);
    MPI_Group_translate_ranks(g, n, in, w, out);
    MPI_Group_free(&g);
    MPI_Group_free(&w);
    free(in);
    return n;
}

/* checks a grid against the pure function and the expected node map */
static void td_verify(pt_dist *d, pt_layout l, int fake, const char *tag) {
    int size = tu_size, rank = tu_rank, r, k, n, bad = 0, *node_of, *mem, want_sum = 0, s;
    pt_coords c = pt_layout_coords(&l, rank), dc = pt_dist_coords(d);
    pt_layout dl = pt_dist_layout(d);
    char why[256] = "";
    MPI_Comm comm;
    int local_rank = 0, local_size = 0, nodes = 0, cmp = -1;
    node_of = (int *)malloc((size_t)size * sizeof(int));
    mem = (int *)malloc((size_t)size * sizeof(int));
    td_nodes(fake, size, node_of);
    for (r = 0; r < size; r++) {
        if (node_of[r] == node_of[rank]) {
            local_size++;
            if (r < rank) local_rank++;
        }
        if (node_of[r] + 1 > nodes) nodes = node_of[r] + 1;
    }
    CHECKF(pt_dist_rank(d) == rank && pt_dist_size(d) == size && dl.dp == l.dp && dl.tp == l.tp && dl.pp == l.pp,
           tu_name("%s: rank, size, resolved layout", tag), "rank %d size %d dp %d tp %d pp %d", pt_dist_rank(d), pt_dist_size(d),
           dl.dp, dl.tp, dl.pp);
    CHECKF(dc.tp == c.tp && dc.pp == c.pp && dc.dp == c.dp, tu_name("%s: coords = pt_layout_coords", tag),
           "(%d %d %d) vs (%d %d %d)", dc.tp, dc.pp, dc.dp, c.tp, c.pp, c.dp);
    for (r = 0; r < size; r++)
        if (pt_dist_node_of(d, r) != node_of[r]) bad++;
    CHECKF(!bad && pt_dist_node(d) == node_of[rank] && pt_dist_nodes(d) == nodes && pt_dist_local_rank(d) == local_rank &&
               pt_dist_local_size(d) == local_size,
           tu_name("%s: node %d of %d, local rank %d of %d", tag, node_of[rank], nodes, local_rank, local_size),
           "got node %d of %d, local %d of %d, %d ranks on the wrong node", pt_dist_node(d), pt_dist_nodes(d), pt_dist_local_rank(d),
           pt_dist_local_size(d), bad);

    /* world: a congruent duplicate */
    comm = *(MPI_Comm *)pt_dist_comm(d, PT_COMM_WORLD);
    MPI_Comm_compare(comm, MPI_COMM_WORLD, &cmp);
    CHECKF(cmp == MPI_CONGRUENT, tu_name("%s: world communicator is a duplicate of MPI_COMM_WORLD", tag), "compare %d", cmp);
    /* TP, PP, DP: members are the ranks whose other coordinates match, in coordinate order */
    bad = 0;
    for (k = PT_COMM_TP; k <= PT_COMM_DP; k++) {
        int want = k == PT_COMM_TP ? l.tp : k == PT_COMM_PP ? l.pp : l.dp, myc = k == PT_COMM_TP ? c.tp : k == PT_COMM_PP ? c.pp : c.dp,
            cr = -1;
        const char *nm = k == PT_COMM_TP ? "TP" : k == PT_COMM_PP ? "PP" : "DP";
        comm = *(MPI_Comm *)pt_dist_comm(d, k);
        n = td_members(comm, mem);
        MPI_Comm_rank(comm, &cr);
        if (n != want || cr != myc) {
            bad++;
            snprintf(why, sizeof why, "%s: size %d rank %d, expected %d and %d", nm, n, cr, want, myc);
            continue;
        }
        for (r = 0; r < n; r++) {
            pt_coords m = c;
            if (k == PT_COMM_TP) m.tp = r;
            else if (k == PT_COMM_PP) m.pp = r;
            else m.dp = r;
            if (mem[r] != pt_layout_rank(&l, m)) {
                bad++;
                snprintf(why, sizeof why, "%s member %d is world rank %d, expected %d", nm, r, mem[r], pt_layout_rank(&l, m));
            }
        }
        /* and it works: the sum of world ranks over the group */
        MPI_Allreduce(&rank, &s, 1, MPI_INT, MPI_SUM, comm);
        for (r = 0, want_sum = 0; r < n; r++) want_sum += mem[r];
        if (s != want_sum) {
            bad++;
            snprintf(why, sizeof why, "%s allreduce gave %d, expected %d", nm, s, want_sum);
        }
    }
    CHECKF(bad == 0, tu_name("%s: TP/PP/DP communicators match the pure function", tag), "%s", why);
    /* node and cross-node */
    bad = 0;
    comm = *(MPI_Comm *)pt_dist_comm(d, PT_COMM_NODE);
    n = td_members(comm, mem);
    for (r = 0, k = 0; r < size; r++)
        if (node_of[r] == node_of[rank]) {
            if (k >= n || mem[k] != r) bad++;
            k++;
        }
    if (k != n) bad++;
    if (bad) snprintf(why, sizeof why, "node communicator has %d ranks, expected %d", n, k);
    comm = *(MPI_Comm *)pt_dist_comm(d, PT_COMM_CROSS);
    n = td_members(comm, mem);
    for (r = 0, k = 0; r < size; r++) {
        int lr = 0, q;
        for (q = 0; q < r; q++) lr += node_of[q] == node_of[r];
        if (lr == local_rank) {
            if (k >= n || mem[k] != r) bad++;
            k++;
        }
    }
    if (k != n) {
        bad++;
        snprintf(why, sizeof why, "cross-node communicator has %d ranks, expected %d", n, k);
    }
    CHECKF(bad == 0, tu_name("%s: node and cross-node communicators", tag), "%s", why);
    free(node_of);
    free(mem);
}

/* pt_dist_print: rank 0's capture has the header and one row per rank, in order, matching the grid */
static void td_print(pt_dist *d, const char *tag) {
    FILE *f = tu_rank == 0 ? tmpfile() : NULL;
    char line[512];
    int rows = 0, header = 0, bad = 0, v[7];
    pt_layout l = pt_dist_layout(d);
    pt_dist_print(d, f);
    if (f) {
        rewind(f);
        while (fgets(line, sizeof line, f)) {
            if (strncmp(line, "grid: ", 6) == 0) header++;
            if (sscanf(line, "%d %d %d %d %d %d %d", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6]) == 7) {
                pt_coords c = pt_layout_coords(&l, rows);
                if (v[0] != rows || v[1] != pt_dist_node_of(d, rows) || v[3] != c.tp || v[4] != c.pp || v[5] != c.dp || v[6] < 1) bad++;
                rows++;
            }
        }
        fclose(f);
    }
    CHECKF(tu_rank != 0 || (header == 1 && rows == tu_size && !bad), tu_name("%s: pt_dist_print has one row per rank, in order", tag),
           "header %d, %d rows of %d, %d wrong", header, rows, tu_size, bad);
}

/* does a TP group of this layout cross the (fake) nodes? */
static int td_tp_crosses(int tp, int size, int fake) {
    int g;
    if (fake <= 0) return 0; /* one machine */
    for (g = 0; g < size; g += tp)
        if (g / fake != (g + tp - 1) / fake) return 1;
    return 0;
}

static void td_set_fake(int fake) {
    char buf[32];
    if (fake <= 0) {
        unsetenv("PTRAIN_FAKE_NODE_SIZE");
        return;
    }
    snprintf(buf, sizeof buf, "%d", fake);
    setenv("PTRAIN_FAKE_NODE_SIZE", buf, 1);
}

static void test_grids(int argc_fake) {
    int fakes[6], nf = 0, fi, dp, tp, pp, size = tu_size, z;
    char err[512];
    fakes[nf++] = argc_fake; /* what the environment said (0 = real nodes) */
    if (argc_fake != 0) fakes[nf++] = 0;
    if (argc_fake != 2 && size % 2 == 0) fakes[nf++] = 2;
    if (size >= 3 && argc_fake != 3) fakes[nf++] = 3; /* uneven nodes */
    if (argc_fake != 1) fakes[nf++] = 1;
    for (fi = 0; fi < nf; fi++) {
        int fake = fakes[fi];
        td_set_fake(fake);
        for (dp = 1; dp <= size; dp++)
            for (tp = 1; dp * tp <= size; tp++) {
                pt_layout l, want;
                pt_dist *d;
                char tag[128];
                int cross;
                if (size % (dp * tp)) continue;
                pp = size / (dp * tp);
                want = td_layout(dp, tp, pp, 0);
                cross = td_tp_crosses(tp, size, fake);
                snprintf(tag, sizeof tag, "np%d fake%d dp%d tp%d pp%d", size, fake, dp, tp, pp);
                /* the same layout written with one 0 (rotating which) */
                z = (dp + 2 * tp + 3 * pp) % 4;
                l = td_layout(z == 1 ? 0 : dp, z == 2 ? 0 : tp, z == 3 ? 0 : pp, 0);
                d = pt_dist_init(NULL, NULL, &l, err, sizeof err);
                if (cross) {
                    char sub[128];
                    snprintf(sub, sizeof sub, "tp=%d does not fit in nodes of %d ranks", tp, fake);
                    CHECKF(d == NULL && strstr(err, sub) && strstr(err, "allow_tp_across_nodes") &&
                               strstr(err, tu_name("layout dp=%d tp=%d pp=%d", dp, tp, pp)),
                           tu_name("%s: TP across nodes refused with the message", tag), "grid %p, '%s'", (void *)d, err);
                    CHECKF(td_same_string(err), tu_name("%s: same message on every rank", tag), "'%s'", err);
                    pt_dist_finalize(d);
                    l.allow_tp_across_nodes = 1;
                    d = pt_dist_init(NULL, NULL, &l, err, sizeof err);
                    if (!CHECKF(d != NULL, tu_name("%s: allowed with allow_tp_across_nodes", tag), "'%s'", err)) continue;
                    want.allow_tp_across_nodes = 1;
                } else if (!CHECKF(d != NULL, tu_name("%s: grid created (written as dp%d tp%d pp%d)", tag, l.dp, l.tp, l.pp), "'%s'",
                                   err)) {
                    pt_dist_finalize(d);
                    continue;
                }
                td_verify(d, want, fake, tag);
                if ((dp == 2 && tp == 2) || dp == size) td_print(d, tag);
                pt_dist_finalize(d);
            }
    }
    unsetenv("PTRAIN_FAKE_NODE_SIZE");
}

static void test_errors(pt_dist *outer) {
    char err[512], err2[512];
    pt_layout l;
    pt_dist *d;
    int size = tu_size, rank = tu_rank, a;

    l = td_layout(size + 1, 1, 1, 0);
    d = pt_dist_init(NULL, NULL, &l, err, sizeof err);
    CHECKF(!d && strstr(err, "pt_dist_init: layout") && strstr(err, tu_name("the world has %d", size)),
           "init: product != world refused on every rank", "'%s'", err);
    CHECKF(td_same_string(err), "init: product != world: same message everywhere", "'%s'", err);
    l = td_layout(2, -2, 0, 0);
    d = pt_dist_init(NULL, NULL, &l, err, sizeof err);
    CHECKF(!d && strstr(err, "negative") && td_same_string(err), "init: negative size refused, same message", "'%s'", err);
    l = td_layout(0, 1, 0, 0);
    d = pt_dist_init(NULL, NULL, &l, err, sizeof err);
    CHECKF(!d && strstr(err, "two sizes are 0") && td_same_string(err), "init: two zeros refused, same message", "'%s'", err);
    if (size > 1) {
        /* the ranks disagree: rank 0 asks for pure DP, the others for pure TP */
        l = rank == 0 ? td_layout(size, 1, 1, 0) : td_layout(1, size, 1, 0);
        d = pt_dist_init(NULL, NULL, &l, err, sizeof err);
        CHECKF(!d && strstr(err, "different layouts") && td_same_string(err), "init: different layouts on different ranks refused",
               "'%s'", err);
        /* one rank with a bad layout: everyone gets that rank's message */
        l = rank == size - 1 ? td_layout(-5, 1, 1, 0) : td_layout(size, 1, 1, 0);
        d = pt_dist_init(NULL, NULL, &l, err, sizeof err);
        CHECKF(!d && strstr(err, "dp=-5") && td_same_string(err), "init: one rank's bad layout: all refused with its message", "'%s'",
               err);
        /* PTRAIN_FAKE_NODE_SIZE differing between ranks */
        td_set_fake(rank == 0 ? 1 : 2);
        d = pt_dist_init(NULL, NULL, NULL, err, sizeof err);
        CHECKF(!d && strstr(err, "PTRAIN_FAKE_NODE_SIZE differs") && td_same_string(err),
               "init: PTRAIN_FAKE_NODE_SIZE differing between ranks refused", "'%s'", err);
        pt_dist_finalize(d);
    }
    setenv("PTRAIN_FAKE_NODE_SIZE", rank == size - 1 ? "zero" : "2", 1);
    d = pt_dist_init(NULL, NULL, NULL, err, sizeof err);
    CHECKF(!d && strstr(err, "PTRAIN_FAKE_NODE_SIZE='zero'") && td_same_string(err),
           "init: a malformed PTRAIN_FAKE_NODE_SIZE on one rank refused everywhere", "'%s'", err);
    unsetenv("PTRAIN_FAKE_NODE_SIZE");

    /* agreement */
    a = pt_dist_agree(outer, rank != size - 1);
    CHECKF(a == 0, "agree: one rank failing gives 0 on every rank", "%d", a);
    a = pt_dist_agree(outer, 1);
    CHECKF(a == 1, "agree: all ok gives 1", "%d", a);
    a = pt_dist_agree(outer, rank != 0);
    CHECKF(a == 0, "agree: rank 0 failing gives 0 everywhere", "%d", a);
    snprintf(err, sizeof err, "error of rank %d", rank);
    a = pt_dist_agree_msg(outer, size == 1 ? 0 : rank < 1 || rank > 2, err, sizeof err);
    snprintf(err2, sizeof err2, "error of rank %d", size == 1 ? 0 : 1);
    CHECKF(a == 0 && strcmp(err, err2) == 0, "agree_msg: every rank gets the lowest failing rank's message", "%d '%s'", a, err);
    strcpy(err, "untouched");
    a = pt_dist_agree_msg(outer, 1, err, sizeof err);
    CHECKF(a == 1 && strcmp(err, "untouched") == 0, "agree_msg: all ok leaves err alone", "%d '%s'", a, err);
}

static void test_threads(pt_dist *d) {
    const char *env = getenv("PTRAIN_THREADS");
    int th = pt_dist_threads(d), rank = tu_rank, sum = 0, n = 0, lvl = -1;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    MPI_Comm shm;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &shm);
    MPI_Allreduce(&th, &sum, 1, MPI_INT, MPI_SUM, shm);
    MPI_Comm_size(shm, &n);
    MPI_Comm_free(&shm);
    if (env && atoi(env) > 0) CHECKF(th == atoi(env), "threads: PTRAIN_THREADS overrides", "%d vs %s", th, env);
    else
        CHECKF(th >= 1 && sum <= (cpus > n ? cpus : n), "threads: >= 1, and the ranks of a node do not oversubscribe its CPUs",
               "%d threads here, %d on the node of %ld CPUs and %d ranks", th, sum, cpus, n);
    MPI_Query_thread(&lvl);
    CHECKF(pt_dist_mpi_thread_level(d) == lvl && lvl >= MPI_THREAD_FUNNELED, "MPI thread level recorded (>= FUNNELED)",
           "%d vs %d", pt_dist_mpi_thread_level(d), lvl);
}
#endif /* PTRAIN_MPI */

int main(int argc, char **argv) {
    char err[512];
    int rc;
#ifdef PTRAIN_MPI
    {
        int fake = 0;
        const char *e = getenv("PTRAIN_FAKE_NODE_SIZE");
        pt_dist *outer;
        pt_layout l;
        if (e) fake = atoi(e);
        if (argc >= 4 && strcmp(argv[1], "--refused-first") == 0) {
            /* the first grid is refused: MPI finalized again by the library, message on every rank */
            int fin = 0, inited = 0, rank = -1;
            l = td_layout(0, atoi(argv[2]), atoi(argv[3]), 0);
            outer = pt_dist_init(&argc, &argv, &l, err, sizeof err);
            MPI_Initialized(&inited);
            MPI_Finalized(&fin);
            if (getenv("OMPI_COMM_WORLD_RANK")) rank = atoi(getenv("OMPI_COMM_WORLD_RANK"));
            if (!outer && inited && fin && strstr(err, "does not fit in nodes")) {
                printf("REFUSED rank %d: %s\n", rank, err);
                return 0;
            }
            printf("FAIL rank %d: --refused-first: grid %p, MPI initialized %d finalized %d, '%s'\n", rank, (void *)outer, inited, fin, err);
            return 1;
        }
        outer = pt_dist_init(&argc, &argv, NULL, err, sizeof err);
        if (!outer) {
            printf("FAIL pt_dist_init (pure DP): %s\n0 passed, 1 failed\n", err);
            return 1;
        }
        tu_mpi_init(NULL);
        if (tu_rank == 0) printf("MPI world of %d ranks, PTRAIN_FAKE_NODE_SIZE=%s\n", tu_size, e ? e : "(unset)");
        test_resolve();
        test_coords();
        test_orthogonality();
        td_verify(outer, td_layout(tu_size, 1, 1, 0), fake, "outer grid (NULL layout)");
        td_print(outer, "outer grid");
        pt_dist_print(outer, NULL); /* collective: every rank calls it, rank 0 prints to stdout */
        test_threads(outer);
        test_errors(outer);
        test_grids(fake);
        rc = tu_summary();
        pt_dist_finalize(outer); /* calls MPI_Finalize: without it mpirun reports an error */
    }
#else
    (void)argc;
    (void)argv;
    (void)err;
    test_resolve();
    test_coords();
    test_orthogonality();
    test_world_of_one();
    rc = tu_summary();
#endif
    return rc;
}
