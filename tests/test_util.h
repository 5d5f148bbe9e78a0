/* test_util.h - tiny shared check helpers for the ptrain.h tests (static functions only).
   Every check prints one line, "PASS <name>" or "FAIL <name>: <why> (file:line)"; tu_summary()
   prints the final "N passed, N failed" line and returns the exit status. */
#ifndef PT_TEST_UTIL_H
#define PT_TEST_UTIL_H

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GNUC__) || defined(__clang__)
#define TU_UNUSED __attribute__((unused))
#define TU_FMT(a, b) __attribute__((format(printf, a, b)))
#else
#define TU_UNUSED
#define TU_FMT(a, b)
#endif

static int tu_npass, tu_nfail;
static int tu_quick; /* --quick or PT_TEST_QUICK=1: smaller sizes (sanitizer builds) */

/* Records one check. name may come from tu_name(); why is a printf format (used on failure only). */
static TU_UNUSED TU_FMT(5, 6) int tu_check(int ok, const char *file, int line, const char *name, const char *why, ...) {
    if (ok) {
        tu_npass++;
        printf("PASS %s\n", name);
    } else {
        va_list ap;
        tu_nfail++;
        printf("FAIL %s: ", name);
        va_start(ap, why);
        vprintf(why, ap);
        va_end(ap);
        printf(" (%s:%d)\n", file, line);
    }
    fflush(stdout);
    return ok;
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

/* Parses --quick (and env PT_TEST_QUICK=1). */
static TU_UNUSED void tu_init(int argc, char **argv) {
    int i;
    const char *e = getenv("PT_TEST_QUICK");
    for (i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--quick")) tu_quick = 1;
    if (e && atoi(e) > 0) tu_quick = 1;
    setvbuf(stdout, NULL, _IOLBF, 0);
}

/* Prints "N passed, N failed" and returns the exit status. */
static TU_UNUSED int tu_summary(void) {
    printf("%d passed, %d failed\n", tu_npass, tu_nfail);
    fflush(stdout);
    return tu_nfail ? 1 : 0;
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
