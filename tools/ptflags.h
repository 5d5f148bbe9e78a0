/* ptflags.h - the tools' command-line flags: one table per tool, one parser, one error format.

   Included by the tools in tools/ (static functions only; needs only the C library, not ptrain.h).
   A tool lists its flags in a table ended by PTF_END and calls ptf_parse:

       long max_tokens = 128;
       double top_p = 1;
       const char *prompt = "\n";
       int bytes = 0;
       const ptf_flag flags[] = {
           PTF_LONG("--max-tokens", &max_tokens, 0, 1L << 20),   whole number in [0, 2^20]
           PTF_REAL("--top-p", &top_p, 0, 1),                    number in [0, 1]
           PTF_STR("--prompt", &prompt),                         any string
           PTF_BOOL("--bytes", &bytes),                          no value: sets 1
           PTF_END};
       int rc = ptf_parse("ptgen", USAGE, flags, argc, argv);
       if (rc != PTF_GO) return rc;                              0 after --help, 2 after a bad flag

   The other entries: PTF_INT (an int), PTF_REAL_X (a number with open ends, whole, or its own words for
   the expectation), PTF_CHOICE ("gpipe|1f1b|interleaved" -> an index or a value of a table), PTF_FN (a
   function of the tool's for what a table cannot say: repeated flags, PHASE=S), PTF_ARG (the positional
   arguments, to a function) and PTF_REST ("--": the rest of argv is another program's command line).
   ptf_long, ptf_real and ptf_bad check a value, or say what was wrong, the same way from a PTF_FN.

   Every tool says the same things the same way:
     TOOL: --flag expects a whole number in [0, 1048576], found 'x'      (exit 2; no usage text)
     TOOL: unknown flag --frobnicate                                       (exit 2; then the usage text)
     TOOL: missing value after --max-tokens                                (exit 2; then the usage text)
   -h and --help print the usage text on stderr and give 0. A flag's value is the next argument,
   whatever it looks like (--prompt --x is the prompt "--x"). */
#ifndef PTFLAGS_H
#define PTFLAGS_H

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GNUC__)
#define PTF_UNUSED __attribute__((unused))
#else
#define PTF_UNUSED
#endif

enum {
    PTF_K_END,
    PTF_K_INT,    /* int *: a whole number in [lo, hi] */
    PTF_K_LONG,   /* long *: a whole number in [lo, hi] */
    PTF_K_REAL,   /* double *: a number in [lo, hi] (opts: PTF_OPEN_LO, PTF_OPEN_HI, PTF_WHOLE) */
    PTF_K_STR,    /* const char **: the value as given */
    PTF_K_BOOL,   /* int *: set to 1; takes no value */
    PTF_K_CHOICE, /* int *: the index of the value in choices "a|b|c", or values[index] */
    PTF_K_FN,     /* fn(dst, tool, flag, value): 0, or the exit status after its own message */
    PTF_K_ARG,    /* a positional argument (not starting with '-', or "-"): fn(dst, tool, NULL, arg) */
    PTF_K_REST    /* "--": the flags end; int *: the index of the first argument after it */
};
#define PTF_OPEN_LO 1 /* PTF_K_REAL: lo itself is refused: (lo, hi] */
#define PTF_WHOLE 2   /* PTF_K_REAL: a whole number (a double for values past long's range) */
#define PTF_OPEN_HI 4 /* PTF_K_REAL: hi itself is refused: [lo, hi) */

/* the exit status ptf_parse gives when the tool goes on */
#define PTF_GO (-1)

typedef int (*ptf_fn)(void *dst, const char *tool, const char *flag, const char *value);

typedef struct ptf_flag {
    const char *name;    /* "--top-k" (PTF_K_ARG: NULL; PTF_K_REST: "--") */
    int kind;            /* PTF_K_* */
    void *dst;           /* where the value goes (see the kinds) */
    double lo, hi;       /* numbers: the range, both ends included unless opts says otherwise (exact to 2^53) */
    int opts;            /* PTF_OPEN_LO, PTF_WHOLE */
    const char *expect;  /* the expectation in messages (NULL: made from the range); PTF_K_CHOICE: "a|b|c" */
    ptf_fn fn;           /* PTF_K_FN, PTF_K_ARG */
    const int *values;   /* PTF_K_CHOICE: the value of each choice (NULL: its index) */
} ptf_flag;

#define PTF_INT(name, dst, lo, hi) {name, PTF_K_INT, (void *)(dst), (double)(lo), (double)(hi), 0, NULL, NULL, NULL}
#define PTF_LONG(name, dst, lo, hi) {name, PTF_K_LONG, (void *)(dst), (double)(lo), (double)(hi), 0, NULL, NULL, NULL}
#define PTF_REAL(name, dst, lo, hi) {name, PTF_K_REAL, (void *)(dst), (double)(lo), (double)(hi), 0, NULL, NULL, NULL}
/* a number with its own words for the expectation, e.g. "seconds in (0, 1e7]" */
#define PTF_REAL_X(name, dst, lo, hi, opts, expect) {name, PTF_K_REAL, (void *)(dst), (double)(lo), (double)(hi), opts, expect, NULL, NULL}
#define PTF_STR(name, dst) {name, PTF_K_STR, (void *)(dst), 0, 0, 0, NULL, NULL, NULL}
#define PTF_BOOL(name, dst) {name, PTF_K_BOOL, (void *)(dst), 0, 0, 0, NULL, NULL, NULL}
#define PTF_CHOICE(name, dst, choices, values) {name, PTF_K_CHOICE, (void *)(dst), 0, 0, 0, choices, NULL, values}
#define PTF_FN(name, fn, dst) {name, PTF_K_FN, (void *)(dst), 0, 0, 0, NULL, fn, NULL}
#define PTF_ARG(fn, dst) {NULL, PTF_K_ARG, (void *)(dst), 0, 0, 0, NULL, fn, NULL}
#define PTF_REST(dst) {"--", PTF_K_REST, (void *)(dst), 0, 0, 0, NULL, NULL, NULL}
#define PTF_END {NULL, PTF_K_END, NULL, 0, 0, 0, NULL, NULL, NULL}

/* "TOOL: FLAG expects EXPECT, found 'VALUE'"; 2 (the exit status of bad usage) */
static PTF_UNUSED int ptf_bad(const char *tool, const char *flag, const char *expect, const char *value) {
    fprintf(stderr, "%s: %s expects %s, found '%s'\n", tool, flag, expect, value ? value : "(nothing)");
    return 2;
}

/* a whole number in [lo, hi] from v into *out: 0, or 2 after the message */
static PTF_UNUSED int ptf_long(const char *tool, const char *flag, const char *v, long lo, long hi, long *out) {
    char *e, what[96];
    long x;
    errno = 0;
    x = v ? strtol(v, &e, 10) : 0;
    if (!v || e == v || *e || errno || x < lo || x > hi) {
        snprintf(what, sizeof what, "a whole number in [%ld, %ld]", lo, hi);
        return ptf_bad(tool, flag, what, v);
    }
    *out = x;
    return 0;
}

/* a number in [lo, hi] (opts: PTF_OPEN_LO, PTF_OPEN_HI, PTF_WHOLE) from v into *out: 0, or 2 after the message
   (expect: its words, NULL for "a number in [lo, hi]") */
static PTF_UNUSED int ptf_real(const char *tool, const char *flag, const char *v, double lo, double hi, int opts, const char *expect, double *out) {
    char *e, what[128];
    double x = v ? strtod(v, &e) : 0;
    if (!v || e == v || *e || !((opts & PTF_OPEN_LO) ? x > lo : x >= lo) || !((opts & PTF_OPEN_HI) ? x < hi : x <= hi) || ((opts & PTF_WHOLE) && x != floor(x))) {
        if (!expect)
            snprintf(what, sizeof what, "a %snumber in %c%g, %g%c", (opts & PTF_WHOLE) ? "whole " : "", (opts & PTF_OPEN_LO) ? '(' : '[', lo, hi,
                     (opts & PTF_OPEN_HI) ? ')' : ']');
        return ptf_bad(tool, flag, expect ? expect : what, v);
    }
    *out = x;
    return 0;
}

/* the index of v among choices "a|b|c", or -1; the expectation "a, b or c" into what */
static PTF_UNUSED int ptf_choice(const char *choices, const char *v, char *what, size_t len) {
    const char *c = choices;
    int k = 0, found = -1;
    size_t n = 0;
    if (what && len) what[0] = 0;
    while (*c) {
        size_t m = strcspn(c, "|");
        if (found < 0 && strlen(v) == m && !strncmp(c, v, m)) found = k;
        if (what && n < len) n += (size_t)snprintf(what + n, len - n, "%s%.*s", !k ? "" : c[m] ? ", " : " or ", (int)m, c);
        c += m + (c[m] == '|'), k++;
    }
    return found;
}

/* one flag's value into its place: 0, or the exit status after the message */
static PTF_UNUSED int ptf_set(const char *tool, const ptf_flag *f, const char *v) {
    char what[256];
    long x;
    double r;
    int k, rc;
    switch (f->kind) {
    case PTF_K_INT:
        if ((rc = ptf_long(tool, f->name, v, (long)f->lo, (long)f->hi, &x))) return rc;
        *(int *)f->dst = (int)x;
        return 0;
    case PTF_K_LONG: return ptf_long(tool, f->name, v, (long)f->lo, (long)f->hi, (long *)f->dst);
    case PTF_K_REAL:
        if ((rc = ptf_real(tool, f->name, v, f->lo, f->hi, f->opts, f->expect, &r))) return rc;
        *(double *)f->dst = r;
        return 0;
    case PTF_K_STR: *(const char **)f->dst = v; return 0;
    case PTF_K_CHOICE:
        if ((k = ptf_choice(f->expect, v, what, sizeof what)) < 0) return ptf_bad(tool, f->name, what, v);
        *(int *)f->dst = f->values ? f->values[k] : k;
        return 0;
    case PTF_K_FN: return f->fn(f->dst, tool, f->name, v);
    default: return 2;
    }
}

/* the table's entry for flag name a, or NULL */
static PTF_UNUSED const ptf_flag *ptf_find(const ptf_flag *flags, const char *a) {
    for (; flags->kind != PTF_K_END; flags++)
        if (flags->name && !strcmp(flags->name, a)) return flags;
    return NULL;
}

/* argv[1..argc) against the table: PTF_GO to go on; 0 after -h / --help (usage printed); 2 (or a
   PTF_K_FN's status) after a bad flag, with the message on stderr */
static PTF_UNUSED int ptf_parse(const char *tool, const char *usage, const ptf_flag *flags, int argc, char **argv) {
    const ptf_flag *positional = NULL, *f;
    int i, rc;
    for (f = flags; f->kind != PTF_K_END; f++)
        if (f->kind == PTF_K_ARG) positional = f;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(usage, stderr);
            return 0;
        }
        if ((a[0] != '-' || !a[1]) && positional) { /* "-" too: standard input */
            if ((rc = positional->fn(positional->dst, tool, NULL, a))) return rc;
            continue;
        }
        if (!(f = ptf_find(flags, a))) {
            fprintf(stderr, "%s: unknown flag %s\n", tool, a);
            fputs(usage, stderr);
            return 2;
        }
        if (f->kind == PTF_K_REST) {
            *(int *)f->dst = i + 1;
            return PTF_GO;
        }
        if (f->kind == PTF_K_BOOL) {
            *(int *)f->dst = 1;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "%s: missing value after %s\n", tool, a);
            fputs(usage, stderr);
            return 2;
        }
        if ((rc = ptf_set(tool, f, argv[++i]))) return rc;
    }
    return PTF_GO;
}

#endif /* PTFLAGS_H */
