/* test_util.h - tiny shared check helpers for the ptrain.h tests (static functions only).
   Every check prints one line, "PASS <name>" or "FAIL <name>: <why> (file:line)"; tu_summary()
   prints the final "N passed, N failed" line and returns the exit status.
   MPI tests (built with -DPTRAIN_MPI) call tu_mpi_init() once MPI is initialized (after
   pt_dist_init): from then on every check is collective, agreed over MPI_COMM_WORLD (every rank
   makes the same checks in the same order). A rank that fails one prints "  rank R: <name>: <why>",
   rank 0 prints the PASS/FAIL line, and every rank counts the agreed result. Checks that one rank
   makes alone go between tu_solo(1) and tu_solo(0): that rank prints and counts them. tu_summary()
   (before MPI_Finalize, i.e. before pt_dist_finalize) adds the agreed checks once and the solo
   checks of every rank; rank 0 prints the line, every rank returns the exit status. */
#ifndef PT_TEST_UTIL_H
#define PT_TEST_UTIL_H

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef PTRAIN_MPI
#include <mpi.h>
#endif

#if defined(__GNUC__) || defined(__clang__)
#define TU_UNUSED __attribute__((unused))
#define TU_FMT(a, b) __attribute__((format(printf, a, b)))
#else
#define TU_UNUSED
#define TU_FMT(a, b)
#endif

static int tu_npass, tu_nfail; /* the checks this rank counted (under MPI the agreed ones are the same on every rank) */
static int tu_quick;           /* --quick or PT_TEST_QUICK=1: smaller sizes (sanitizer builds); 2: --tiny */
static int tu_rank, tu_size = 1, tu_mpi; /* MPI_COMM_WORLD's rank and size; tu_mpi: checks are collective */
static int tu_solo_on, tu_spass, tu_sfail; /* tu_solo(1) is on; the solo checks among tu_npass / tu_nfail */
static char tu_tag[64];        /* appended to every PASS/FAIL name (tu_mpi_init) */

/* Records one check. name may come from tu_name(); why is a printf format (used on failure only).
   Under tu_mpi_init (and not tu_solo) a collective: returns the verdict of all ranks. */
static TU_UNUSED TU_FMT(5, 6) int tu_check(int ok, const char *file, int line, const char *name, const char *why, ...) {
    va_list ap;
    if (tu_mpi && !tu_solo_on) {
        char msg[4096] = "";
        int nbad = !ok;
        if (!ok) {
            va_start(ap, why);
            vsnprintf(msg, sizeof msg, why, ap);
            va_end(ap);
            printf("  rank %d: %s: %s\n", tu_rank, name, msg);
            fflush(stdout);
        }
#ifdef PTRAIN_MPI
        MPI_Allreduce(MPI_IN_PLACE, &nbad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
#endif
        if (nbad) tu_nfail++;
        else tu_npass++;
        if (tu_rank == 0) {
            if (!nbad) printf("PASS %s%s\n", name, tu_tag);
            else printf("FAIL %s%s: %s (%d of %d ranks) (%s:%d)\n", name, tu_tag, ok ? "failed on another rank" : msg, nbad, tu_size, file, line);
            fflush(stdout);
        }
        return !nbad;
    }
    if (ok) {
        tu_npass++, tu_spass += tu_solo_on;
        printf("PASS %s%s\n", name, tu_tag);
    } else {
        tu_nfail++, tu_sfail += tu_solo_on;
        printf("FAIL %s%s: ", name, tu_tag);
        va_start(ap, why);
        vprintf(why, ap);
        va_end(ap);
        printf(" (%s:%d)\n", file, line);
    }
    fflush(stdout);
    return ok;
}

/* Call once MPI is initialized (after pt_dist_init): the checks become collective over
   MPI_COMM_WORLD. tag (may be NULL), e.g. " (np=2)", is appended to every name; without
   PTRAIN_MPI, or before MPI_Init, only the tag is set. */
static TU_UNUSED void tu_mpi_init(const char *tag) {
#ifdef PTRAIN_MPI
    int inited = 0, fin = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&fin);
    if (inited && !fin) {
        MPI_Comm_rank(MPI_COMM_WORLD, &tu_rank);
        MPI_Comm_size(MPI_COMM_WORLD, &tu_size);
        tu_mpi = 1;
    }
#endif
    snprintf(tu_tag, sizeof tu_tag, "%s", tag ? tag : "");
}

/* on = 1: the next checks are made by this rank alone (no agreement; it prints and counts them);
   on = 0: collective again. Returns the previous setting. */
static TU_UNUSED int tu_solo(int on) {
    int was = tu_solo_on;
    tu_solo_on = on != 0;
    return was;
}

/* A printf-formatted name in one of 8 rotating buffers (so a few can be alive in one call). */
static TU_UNUSED TU_FMT(1, 2) const char *tu_name(const char *fmt, ...) {
    static char buf[8][256];
    static int k;
    va_list ap;
    char *b = buf[k++ & 7];
    va_start(ap, fmt);
    vsnprintf(b, sizeof buf[0], fmt, ap);
    va_end(ap);
    return b;
}

/* CHECK(cond, name): fails with the condition's text. CHECKF(cond, name, fmt, ...): with a message. */
#define CHECK(cond, name) tu_check(!!(cond), __FILE__, __LINE__, (name), "%s", "check failed: " #cond)
#define CHECKF(cond, name, ...) tu_check(!!(cond), __FILE__, __LINE__, (name), __VA_ARGS__)
/* CHECK_WHY(cond, name, why): with a message that is a ready string (not a format) */
#define CHECK_WHY(cond, name, why) tu_check(!!(cond), __FILE__, __LINE__, (name), "%s", (why))
/* |a - b| <= tol * max(1, |a|, |b|) */
#define CHECK_NEAR(a, b, tol, name) tu_check_near((double)(a), (double)(b), (double)(tol), __FILE__, __LINE__, (name))
/* a string contains a substring */
#define CHECK_HAS(s, sub, name) \
    tu_check((s) && strstr((s), (sub)) != NULL, __FILE__, __LINE__, (name), "'%s' not found in message '%s'", (sub), (s) ? (s) : "(null)")

static TU_UNUSED int tu_check_near(double a, double b, double tol, const char *file, int line, const char *name) {
    double m = fabs(a) > fabs(b) ? fabs(a) : fabs(b);
    if (m < 1) m = 1;
    return tu_check(fabs(a - b) <= tol * m, file, line, name, "%.9g vs %.9g (diff %.3g, tol %.3g)", a, b, fabs(a - b), tol * m);
}

/* Largest relative difference |a-b| / max(floor, |a|, |b|) over n floats; *at receives its index. */
static TU_UNUSED double tu_max_rel(const float *a, const float *b, long n, double floor_, long *at) {
    double worst = 0;
    long i;
    if (at) *at = 0;
    for (i = 0; i < n; i++) {
        double x = a[i], y = b[i], m = fabs(x) > fabs(y) ? fabs(x) : fabs(y), d;
        if (m < floor_) m = floor_;
        d = fabs(x - y) / m;
        if (d != d) d = INFINITY; /* NaN */
        if (d > worst) {
            worst = d;
            if (at) *at = i;
        }
    }
    return worst;
}

/* Parses --quick (and env PT_TEST_QUICK=1); --tiny (PT_TEST_QUICK=2): tu_quick 2, smaller still where a
   test says so (under an emulator: tests/arm64_test.sh), else as --quick. */
static TU_UNUSED void tu_init(int argc, char **argv) {
    int i;
    const char *e = getenv("PT_TEST_QUICK");
    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick") && tu_quick < 1) tu_quick = 1;
        if (!strcmp(argv[i], "--tiny")) tu_quick = 2;
    }
    if (e && atoi(e) > tu_quick) tu_quick = atoi(e) > 1 ? 2 : 1;
    setvbuf(stdout, NULL, _IOLBF, 0);
}

/* Prints "N passed, N failed" and returns the exit status. Under tu_mpi_init a collective (call it
   before MPI_Finalize): the agreed checks once plus every rank's solo checks, printed by rank 0;
   every rank returns 1 if any check failed. */
static TU_UNUSED int tu_summary(void) {
    int n[2];
    n[0] = (tu_rank == 0 ? tu_npass - tu_spass : 0) + tu_spass;
    n[1] = (tu_rank == 0 ? tu_nfail - tu_sfail : 0) + tu_sfail;
#ifdef PTRAIN_MPI
    if (tu_mpi) {
        int fin = 0;
        MPI_Finalized(&fin);
        if (!fin) MPI_Allreduce(MPI_IN_PLACE, n, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    }
#endif
    if (tu_rank == 0) printf("%d passed, %d failed\n", n[0], n[1]);
    fflush(stdout);
    return n[1] ? 1 : 0;
}

/* A small deterministic generator for test data (independent of the library's). */
typedef struct tu_rng { unsigned long long s; } tu_rng;
static TU_UNUSED unsigned long long tu_next(tu_rng *r) {
    unsigned long long z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
/* uniform in [lo, hi) */
static TU_UNUSED float tu_uniform(tu_rng *r, float lo, float hi) {
    return lo + (hi - lo) * (float)((double)(tu_next(r) >> 11) * (1.0 / 9007199254740992.0));
}

#endif /* PT_TEST_UTIL_H */
