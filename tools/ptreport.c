/* ptreport.c - a training run's JSON-lines log (and Chrome trace) -> SVG charts and one HTML page.
   Build: cc -O2 tools/ptreport.c -o build/ptreport -lm                          (or: make tools)
   Usage: ptreport LOG.jsonl [--trace TRACE.json] [--step N] [--title TEXT] -o DIR
   Writes into DIR (created if missing): loss.svg (loss, val loss, event markers), tokens.svg,
   mfu.svg, grad_norm.svg, lr.svg, time.svg (step time stacked: compute / comm / bubble / data /
   ckpt / other), memory.svg (peak bytes per rank), timeline.svg (from --trace: one step, one row
   per rank, boxes colored by category) and index.html (the run's configuration, summary numbers,
   every chart inlined, the events table). A chart whose data is absent from the log is not written.
   The log schema and the drawing rules are in docs/monitoring.md. Plain C99 + POSIX mkdir; the log
   is read line by line and the trace event by event, so neither has to fit in memory as text.
   Exit status: 0 written, 1 a file cannot be read or is malformed (FILE:LINE: what was expected),
   2 bad command line. */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_DEPTH 200
#define LINE_BUCKETS 400 /* a polyline longer than 2x this keeps the min and max of each bucket */
#define BAR_BUCKETS 200  /* the stacked time chart draws at most this many bars */
#define MAX_EVENT_ROWS 2000
#define MAX_MARKERS 300

/* ------------------------------------------------------------------ utilities */

static void *xrealloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    if (!q) {
        fprintf(stderr, "ptreport: out of memory (%zu bytes)\n", n);
        exit(1);
    }
    return q;
}

static char *xstrdup(const char *s) {
    size_t n = strlen(s) + 1;
    return (char *)memcpy(xrealloc(NULL, n), s, n);
}

/* growable string */
typedef struct sb {
    char *s;
    size_t n, cap;
} sb;

static void sb_put(sb *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        b->cap = (b->n + n + 1) * 2;
        b->s = (char *)xrealloc(b->s, b->cap);
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
}
static void sb_puts(sb *b, const char *s) { sb_put(b, s, strlen(s)); }
static void sb_putc(sb *b, char c) { sb_put(b, &c, 1); }

static void sb_printf(sb *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    int n;
    va_start(ap, fmt);
    n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof tmp) {
        sb_put(b, tmp, (size_t)n);
        return;
    }
    {
        char *big = (char *)xrealloc(NULL, (size_t)n + 1);
        va_start(ap, fmt);
        vsnprintf(big, (size_t)n + 1, fmt, ap);
        va_end(ap);
        sb_put(b, big, (size_t)n);
        free(big);
    }
}

/* text for XML/HTML: & < > " escaped; control bytes dropped */
static void sb_esc(sb *b, const char *s) {
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '&') sb_puts(b, "&amp;");
        else if (c == '<') sb_puts(b, "&lt;");
        else if (c == '>') sb_puts(b, "&gt;");
        else if (c == '"') sb_puts(b, "&quot;");
        else if (c >= 0x20 || c == '\t') sb_putc(b, (char)c);
    }
}

/* ------------------------------------------------------------------ JSON */

enum { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ };

typedef struct jv {
    int t;
    double num;         /* J_NUM, J_BOOL (0/1) */
    char *str;          /* J_STR */
    size_t n;           /* J_ARR, J_OBJ: items */
    struct jv *items;   /* J_ARR, J_OBJ */
    char **keys;        /* J_OBJ */
} jv;

static void jv_free(jv *v) {
    size_t i;
    if (v->t == J_STR) free(v->str);
    if (v->t == J_ARR || v->t == J_OBJ) {
        for (i = 0; i < v->n; i++) {
            jv_free(&v->items[i]);
            if (v->keys) free(v->keys[i]);
        }
        free(v->items);
        free(v->keys);
    }
    memset(v, 0, sizeof *v);
}

static const jv *jv_get(const jv *o, const char *key) {
    size_t i;
    if (!o || o->t != J_OBJ) return NULL;
    for (i = 0; i < o->n; i++)
        if (strcmp(o->keys[i], key) == 0) return &o->items[i];
    return NULL;
}

/* the number at key, or NaN when absent or not a number */
static double jv_num(const jv *o, const char *key) {
    const jv *v = jv_get(o, key);
    return v && v->t == J_NUM ? v->num : NAN;
}

static const char *jv_str(const jv *o, const char *key) {
    const jv *v = jv_get(o, key);
    return v && v->t == J_STR ? v->str : NULL;
}

/* compact JSON text of v (numbers with %g) */
static void jv_write(sb *b, const jv *v) {
    size_t i;
    switch (v->t) {
    case J_NULL: sb_puts(b, "null"); break;
    case J_BOOL: sb_puts(b, v->num != 0 ? "true" : "false"); break;
    case J_NUM: sb_printf(b, "%.6g", v->num); break;
    case J_STR: sb_printf(b, "\"%s\"", v->str); break;
    case J_ARR:
    case J_OBJ:
        sb_putc(b, v->t == J_ARR ? '[' : '{');
        for (i = 0; i < v->n; i++) {
            if (i) sb_putc(b, ',');
            if (v->t == J_OBJ) sb_printf(b, "\"%s\":", v->keys[i]);
            jv_write(b, &v->items[i]);
        }
        sb_putc(b, v->t == J_ARR ? ']' : '}');
        break;
    }
}

/* the parser reads from a string (one log line) or a FILE (the trace), one character of lookahead */
typedef struct jp {
    FILE *f;
    const char *s;
    size_t len, pos;
    int c;           /* current character, -1 at the end */
    long line;       /* line of c */
    const char *file;
    char err[600];
    int depth;
} jp;

static void jp_next(jp *p) {
    if (p->c == '\n') p->line++;
    if (p->f) p->c = getc(p->f);
    else p->c = p->pos < p->len ? (unsigned char)p->s[p->pos++] : -1;
    if (p->c == EOF) p->c = -1;
}

static void jp_ws(jp *p) {
    while (p->c == ' ' || p->c == '\t' || p->c == '\n' || p->c == '\r') jp_next(p);
}

static int jp_fail(jp *p, const char *expected) {
    char found[32];
    if (p->c < 0) snprintf(found, sizeof found, p->f ? "the end of the file" : "the end of the line");
    else if (p->c == '\n' || p->c == '\r') snprintf(found, sizeof found, "a line break");
    else if (p->c >= 0x20 && p->c < 0x7f) snprintf(found, sizeof found, "'%c'", p->c);
    else snprintf(found, sizeof found, "byte 0x%02x", p->c);
    if (!p->err[0]) snprintf(p->err, sizeof p->err, "%s:%ld: expected %s, found %s", p->file, p->line, expected, found);
    return -1;
}

static int jp_value(jp *p, jv *out);

static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static int jp_hex4(jp *p, unsigned *u) {
    int i, h;
    *u = 0;
    for (i = 0; i < 4; i++) {
        jp_next(p);
        if ((h = hexval(p->c)) < 0) return jp_fail(p, "4 hex digits after \\u");
        *u = *u * 16 + (unsigned)h;
    }
    return 0;
}

static void put_utf8(sb *b, unsigned u) {
    if (u < 0x80) sb_putc(b, (char)u);
    else if (u < 0x800) {
        sb_putc(b, (char)(0xc0 | (u >> 6)));
        sb_putc(b, (char)(0x80 | (u & 0x3f)));
    } else if (u < 0x10000) {
        sb_putc(b, (char)(0xe0 | (u >> 12)));
        sb_putc(b, (char)(0x80 | ((u >> 6) & 0x3f)));
        sb_putc(b, (char)(0x80 | (u & 0x3f)));
    } else {
        sb_putc(b, (char)(0xf0 | (u >> 18)));
        sb_putc(b, (char)(0x80 | ((u >> 12) & 0x3f)));
        sb_putc(b, (char)(0x80 | ((u >> 6) & 0x3f)));
        sb_putc(b, (char)(0x80 | (u & 0x3f)));
    }
}

/* a string; p->c is the opening quote. The result is NUL-terminated UTF-8 (\u0000 becomes U+FFFD). */
static int jp_string(jp *p, char **out) {
    sb b = {NULL, 0, 0};
    sb_puts(&b, "");
    for (;;) {
        jp_next(p);
        if (p->c < 0 || p->c == '\n') {
            free(b.s);
            return jp_fail(p, "'\"' closing the string");
        }
        if (p->c == '"') break;
        if (p->c < 0x20) {
            free(b.s);
            return jp_fail(p, "a string character (control bytes must be escaped)");
        }
        if (p->c != '\\') {
            sb_putc(&b, (char)p->c);
            continue;
        }
        jp_next(p);
        switch (p->c) {
        case '"': sb_putc(&b, '"'); break;
        case '\\': sb_putc(&b, '\\'); break;
        case '/': sb_putc(&b, '/'); break;
        case 'b': sb_putc(&b, '\b'); break;
        case 'f': sb_putc(&b, '\f'); break;
        case 'n': sb_putc(&b, '\n'); break;
        case 'r': sb_putc(&b, '\r'); break;
        case 't': sb_putc(&b, '\t'); break;
        case 'u': {
            unsigned u, lo;
            if (jp_hex4(p, &u) != 0) {
                free(b.s);
                return -1;
            }
            if (u >= 0xd800 && u < 0xdc00) { /* a surrogate pair */
                jp_next(p);
                if (p->c != '\\') { free(b.s); return jp_fail(p, "'\\u' with the low surrogate"); }
                jp_next(p);
                if (p->c != 'u') { free(b.s); return jp_fail(p, "'\\u' with the low surrogate"); }
                if (jp_hex4(p, &lo) != 0) { free(b.s); return -1; }
                if (lo < 0xdc00 || lo > 0xdfff) { free(b.s); return jp_fail(p, "a low surrogate (DC00-DFFF)"); }
                u = 0x10000 + ((u - 0xd800) << 10) + (lo - 0xdc00);
            } else if ((u >= 0xdc00 && u < 0xe000) || u == 0) u = 0xfffd;
            put_utf8(&b, u);
            break;
        }
        default: free(b.s); return jp_fail(p, "an escape (\\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)");
        }
    }
    jp_next(p);
    *out = b.s;
    return 0;
}

static int jp_word(jp *p, const char *w) {
    const char *q;
    for (q = w; *q; q++) {
        if (p->c != *q) return -1;
        jp_next(p);
    }
    return 0;
}

/* a number: the JSON grammar, plus NaN / Infinity / -Infinity (as Python and some C loggers write) */
static int jp_number(jp *p, jv *out) {
    char buf[64];
    int n = 0, digits;
    char expected[64];
    out->t = J_NUM;
    if (p->c == '-') buf[n++] = '-', jp_next(p);
    if (p->c == 'I' || p->c == 'i') {
        if (jp_word(p, p->c == 'I' ? "Infinity" : "inf") != 0) return jp_fail(p, "a number");
        out->num = n ? -HUGE_VAL : HUGE_VAL;
        return 0;
    }
    if (p->c == 'N' || p->c == 'n') {
        if (jp_word(p, p->c == 'N' ? "NaN" : "nan") != 0) return jp_fail(p, "a value");
        out->num = NAN;
        return 0;
    }
    snprintf(expected, sizeof expected, "a digit");
    for (digits = 0; p->c >= '0' && p->c <= '9'; digits++) {
        if (n < 60) buf[n++] = (char)p->c;
        jp_next(p);
    }
    if (!digits) return jp_fail(p, "a digit");
    if (p->c == '.') {
        if (n < 60) buf[n++] = '.';
        jp_next(p);
        for (digits = 0; p->c >= '0' && p->c <= '9'; digits++) {
            if (n < 60) buf[n++] = (char)p->c;
            jp_next(p);
        }
        if (!digits) return jp_fail(p, "a digit after '.'");
    }
    if (p->c == 'e' || p->c == 'E') {
        if (n < 60) buf[n++] = 'e';
        jp_next(p);
        if (p->c == '+' || p->c == '-') {
            if (n < 60) buf[n++] = (char)p->c;
            jp_next(p);
        }
        for (digits = 0; p->c >= '0' && p->c <= '9'; digits++) {
            if (n < 60) buf[n++] = (char)p->c;
            jp_next(p);
        }
        if (!digits) return jp_fail(p, "a digit in the exponent");
    }
    buf[n] = 0;
    out->num = strtod(buf, NULL);
    return 0;
}

/* '[' or '{' ... matching close; items appended to out */
static int jp_container(jp *p, jv *out) {
    int obj = p->c == '{';
    char close = obj ? '}' : ']';
    size_t cap = 0;
    out->t = obj ? J_OBJ : J_ARR;
    if (++p->depth > MAX_DEPTH) return jp_fail(p, "at most 200 levels of nesting");
    jp_next(p);
    jp_ws(p);
    if (p->c == close) {
        jp_next(p);
        p->depth--;
        return 0;
    }
    for (;;) {
        char *key = NULL;
        jv item;
        memset(&item, 0, sizeof item);
        if (obj) {
            if (p->c != '"') return jp_fail(p, "'\"' starting a key");
            if (jp_string(p, &key) != 0) return -1;
            jp_ws(p);
            if (p->c != ':') {
                free(key);
                return jp_fail(p, "':' after the key");
            }
            jp_next(p);
        }
        if (jp_value(p, &item) != 0) {
            free(key);
            jv_free(&item);
            return -1;
        }
        if (out->n == cap) {
            cap = cap ? cap * 2 : 8;
            out->items = (jv *)xrealloc(out->items, cap * sizeof(jv));
            if (obj) out->keys = (char **)xrealloc(out->keys, cap * sizeof(char *));
        }
        out->items[out->n] = item;
        if (obj) out->keys[out->n] = key;
        out->n++;
        jp_ws(p);
        if (p->c == ',') {
            jp_next(p);
            jp_ws(p);
            continue;
        }
        if (p->c == close) break;
        return jp_fail(p, obj ? "',' or '}' in the object" : "',' or ']' in the array");
    }
    jp_next(p);
    p->depth--;
    return 0;
}

static int jp_value(jp *p, jv *out) {
    memset(out, 0, sizeof *out);
    jp_ws(p);
    switch (p->c) {
    case '{':
    case '[': return jp_container(p, out);
    case '"': out->t = J_STR; return jp_string(p, &out->str);
    case 't': out->t = J_BOOL, out->num = 1; return jp_word(p, "true") == 0 ? 0 : jp_fail(p, "a value");
    case 'f': out->t = J_BOOL; return jp_word(p, "false") == 0 ? 0 : jp_fail(p, "a value");
    case 'n': /* null, or nan */
        jp_next(p);
        if (p->c == 'a') {
            out->t = J_NUM, out->num = NAN;
            return jp_word(p, "an") == 0 ? 0 : jp_fail(p, "a value");
        }
        return jp_word(p, "ull") == 0 ? 0 : jp_fail(p, "a value (null)");
    default:
        if (p->c == '-' || p->c == 'N' || p->c == 'I' || (p->c >= '0' && p->c <= '9')) return jp_number(p, out);
        return jp_fail(p, "a value");
    }
}

/* ------------------------------------------------------------------ the log */

enum { F_LOSS, F_VAL, F_GNORM, F_LR, F_TOKS, F_MFU, F_TSTEP, F_TCOMP, F_TCOMM, F_TBUB, F_TDATA, F_TCKPT,
       F_MEM, F_STRAG_S, F_NFIELDS };
static const char *field_key[F_NFIELDS] = {"loss", "val_loss", "grad_norm", "lr", "tokens_per_s", "mfu", "t_step",
                                           "t_compute", "t_comm", "t_bubble", "t_data", "t_ckpt", "mem_peak_bytes",
                                           "straggler_s"};

typedef struct step_rec {
    double step;
    double f[F_NFIELDS]; /* NaN where the line lacks the key */
    int straggler;       /* -1 when absent */
} step_rec;

typedef struct event_rec {
    char *name, *detail;
    double step; /* NaN when absent */
} event_rec;

typedef struct run {
    jv header;        /* the run_start object (J_NULL when none) */
    step_rec *steps;
    size_t nsteps, capsteps;
    event_rec *events;
    size_t nevents, capevents;
    double *mem_rank; /* max over the run of mem_rank_bytes[r] */
    int nranks_mem;
    long lines;
} run;

/* reads a line of any length; returns its length, -1 at the end of the file */
static long read_line(FILE *f, char **buf, size_t *cap) {
    size_t n = 0;
    int c;
    while ((c = getc(f)) != EOF) {
        if (n + 2 > *cap) {
            *cap = *cap ? *cap * 2 : 4096;
            *buf = (char *)xrealloc(*buf, *cap);
        }
        if (c == '\n') break;
        (*buf)[n++] = (char)c;
    }
    if (c == EOF && n == 0) return -1;
    if (!*buf) *buf = (char *)xrealloc(NULL, (*cap = 16));
    (*buf)[n] = 0;
    return (long)n;
}

static void add_step(run *r, const jv *o) {
    step_rec s;
    const jv *ranks = jv_get(o, "mem_rank_bytes");
    int i;
    s.step = jv_num(o, "step");
    for (i = 0; i < F_NFIELDS; i++) s.f[i] = jv_num(o, field_key[i]);
    s.straggler = -1;
    if (isfinite(jv_num(o, "straggler_rank"))) s.straggler = (int)jv_num(o, "straggler_rank");
    if (ranks && ranks->t == J_ARR) {
        size_t k;
        if ((int)ranks->n > r->nranks_mem && ranks->n < 1000000) {
            r->mem_rank = (double *)xrealloc(r->mem_rank, ranks->n * sizeof(double));
            for (k = (size_t)r->nranks_mem; k < ranks->n; k++) r->mem_rank[k] = NAN;
            r->nranks_mem = (int)ranks->n;
        }
        for (k = 0; k < ranks->n && k < (size_t)r->nranks_mem; k++)
            if (ranks->items[k].t == J_NUM && !(ranks->items[k].num <= r->mem_rank[k])) r->mem_rank[k] = ranks->items[k].num;
    }
    if (r->nsteps == r->capsteps) {
        r->capsteps = r->capsteps ? r->capsteps * 2 : 1024;
        r->steps = (step_rec *)xrealloc(r->steps, r->capsteps * sizeof(step_rec));
    }
    r->steps[r->nsteps++] = s;
}

static void add_event(run *r, const jv *o) {
    event_rec e;
    sb d = {NULL, 0, 0};
    size_t i;
    sb_puts(&d, "");
    e.name = xstrdup(jv_str(o, "event"));
    e.step = jv_num(o, "step");
    for (i = 0; i < o->n; i++) {
        if (strcmp(o->keys[i], "event") == 0 || strcmp(o->keys[i], "step") == 0) continue;
        if (d.n) sb_puts(&d, ", ");
        sb_printf(&d, "%s=", o->keys[i]);
        if (o->items[i].t == J_STR) sb_puts(&d, o->items[i].str);
        else jv_write(&d, &o->items[i]);
        if (d.n > 300) {
            d.n = 300, d.s[300] = 0;
            sb_puts(&d, "...");
            break;
        }
    }
    e.detail = d.s;
    if (r->nevents == r->capevents) {
        r->capevents = r->capevents ? r->capevents * 2 : 64;
        r->events = (event_rec *)xrealloc(r->events, r->capevents * sizeof(event_rec));
    }
    r->events[r->nevents++] = e;
}

static int read_log(const char *path, run *r) {
    FILE *f = fopen(path, "rb");
    char *line = NULL;
    size_t cap = 0;
    long n, lineno = 0;
    if (!f) {
        fprintf(stderr, "ptreport: cannot open %s: %s\n", path, strerror(errno));
        return -1;
    }
    while ((n = read_line(f, &line, &cap)) >= 0) {
        jp p;
        jv o;
        const char *ev;
        lineno++;
        memset(&p, 0, sizeof p);
        p.s = line, p.len = (size_t)n, p.file = path, p.line = lineno, p.c = ' ';
        jp_ws(&p);
        if (p.c < 0) continue; /* blank line */
        if (p.c != '{') {
            jp_fail(&p, "'{' (one JSON object per line)");
            fprintf(stderr, "ptreport: %s\n", p.err);
            free(line);
            fclose(f);
            return -1;
        }
        if (jp_value(&p, &o) != 0 || (jp_ws(&p), p.c >= 0 ? jp_fail(&p, "the end of the line after the object") : 0) != 0) {
            fprintf(stderr, "ptreport: %s\n", p.err);
            jv_free(&o);
            free(line);
            fclose(f);
            return -1;
        }
        ev = jv_str(&o, "event");
        if (ev && strcmp(ev, "run_start") == 0 && r->header.t == J_NULL) r->header = o;
        else {
            if (ev) add_event(r, &o);
            else if (isfinite(jv_num(&o, "step"))) add_step(r, &o);
            jv_free(&o);
        }
    }
    r->lines = lineno;
    free(line);
    if (ferror(f)) {
        fprintf(stderr, "ptreport: %s: read error after line %ld\n", path, lineno);
        fclose(f);
        return -1;
    }
    fclose(f);
    return 0;
}

/* ------------------------------------------------------------------ the trace */

typedef struct tev {
    double ts, dur; /* microseconds */
    int pid, tid, mb;
    long step;      /* -1 when the event has no args.step */
    char cat[24], name[40];
} tev;

typedef struct trace {
    tev *ev;
    size_t n, cap;
    tev *open; /* "B" events waiting for their "E" */
    size_t nopen, capopen;
    int *pids; /* process names from "M" events */
    char **pnames;
    size_t npn;
} trace;

static void copy_str(char *dst, size_t cap, const char *s) {
    size_t n = s ? strlen(s) : 0;
    if (n >= cap) n = cap - 1;
    if (s) memcpy(dst, s, n);
    dst[n] = 0;
}

static void trace_push(tev **a, size_t *n, size_t *cap, const tev *e) {
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 1024;
        *a = (tev *)xrealloc(*a, *cap * sizeof(tev));
    }
    (*a)[(*n)++] = *e;
}

static void trace_event(trace *t, const jv *o) {
    const char *ph = jv_str(o, "ph");
    const jv *args = jv_get(o, "args");
    tev e;
    double pid = jv_num(o, "pid"), tid = jv_num(o, "tid"), v;
    if (!ph || !isfinite(pid)) return;
    if (ph[0] == 'M') {
        const char *nm = jv_str(o, "name"), *an = jv_str(args, "name");
        if (nm && an && strcmp(nm, "process_name") == 0) {
            t->pids = (int *)xrealloc(t->pids, (t->npn + 1) * sizeof(int));
            t->pnames = (char **)xrealloc(t->pnames, (t->npn + 1) * sizeof(char *));
            t->pids[t->npn] = (int)pid;
            t->pnames[t->npn++] = xstrdup(an);
        }
        return;
    }
    if (ph[0] != 'X' && ph[0] != 'B' && ph[0] != 'E') return;
    memset(&e, 0, sizeof e);
    e.ts = jv_num(o, "ts");
    e.dur = jv_num(o, "dur");
    e.pid = (int)pid;
    e.tid = isfinite(tid) ? (int)tid : 0;
    v = jv_num(args, "mb");
    e.mb = isfinite(v) ? (int)v : -1;
    v = jv_num(args, "step");
    e.step = isfinite(v) ? (long)v : -1;
    copy_str(e.cat, sizeof e.cat, jv_str(o, "cat"));
    copy_str(e.name, sizeof e.name, jv_str(o, "name"));
    if (!isfinite(e.ts)) return;
    if (ph[0] == 'X') {
        if (!isfinite(e.dur) || e.dur < 0) e.dur = 0;
        trace_push(&t->ev, &t->n, &t->cap, &e);
    } else if (ph[0] == 'B') {
        trace_push(&t->open, &t->nopen, &t->capopen, &e);
    } else { /* E closes the newest open B of the same pid and tid */
        size_t i;
        for (i = t->nopen; i-- > 0;) {
            if (t->open[i].pid == e.pid && t->open[i].tid == e.tid) {
                tev b = t->open[i];
                b.dur = e.ts - b.ts > 0 ? e.ts - b.ts : 0;
                if (b.mb < 0) b.mb = e.mb;
                if (b.step < 0) b.step = e.step;
                if (!b.cat[0]) copy_str(b.cat, sizeof b.cat, e.cat);
                memmove(&t->open[i], &t->open[i + 1], (t->nopen - i - 1) * sizeof(tev));
                t->nopen--;
                trace_push(&t->ev, &t->n, &t->cap, &b);
                break;
            }
        }
    }
}

/* streams the events of an array (p->c is '['); a missing final ']' is accepted, as Chrome does */
static int trace_array(jp *p, trace *t, int eof_ok) {
    jp_next(p);
    jp_ws(p);
    if (p->c == ']') {
        jp_next(p);
        return 0;
    }
    for (;;) {
        jv o;
        if (jp_value(p, &o) != 0) {
            jv_free(&o);
            return -1;
        }
        if (o.t == J_OBJ) trace_event(t, &o);
        jv_free(&o);
        jp_ws(p);
        if (p->c == ',') {
            jp_next(p);
            jp_ws(p);
            if (p->c < 0 && eof_ok) return 0;
            continue;
        }
        if (p->c == ']') {
            jp_next(p);
            return 0;
        }
        if (p->c < 0 && eof_ok) return 0;
        return jp_fail(p, "',' or ']' in the event array");
    }
}

static int read_trace(const char *path, trace *t) {
    jp p;
    int rc = 0;
    memset(&p, 0, sizeof p);
    p.f = fopen(path, "rb");
    if (!p.f) {
        fprintf(stderr, "ptreport: cannot open %s: %s\n", path, strerror(errno));
        return -1;
    }
    p.file = path, p.line = 1, p.c = ' ';
    jp_ws(&p);
    if (p.c == '[') rc = trace_array(&p, t, 1);
    else if (p.c == '{') {
        jp_next(&p);
        jp_ws(&p);
        while (rc == 0 && p.c != '}') {
            char *key = NULL;
            if (p.c != '"') { rc = jp_fail(&p, "'\"' starting a key"); break; }
            if (jp_string(&p, &key) != 0) { rc = -1; break; }
            jp_ws(&p);
            if (p.c != ':') rc = jp_fail(&p, "':' after the key");
            else {
                jp_next(&p);
                jp_ws(&p);
                if (strcmp(key, "traceEvents") == 0 && p.c == '[') rc = trace_array(&p, t, 0);
                else {
                    jv skip;
                    rc = jp_value(&p, &skip);
                    jv_free(&skip);
                }
            }
            free(key);
            if (rc != 0) break;
            jp_ws(&p);
            if (p.c == ',') {
                jp_next(&p);
                jp_ws(&p);
            } else if (p.c != '}') rc = jp_fail(&p, "',' or '}' in the object");
        }
        if (rc == 0) {
            jp_next(&p);
            jp_ws(&p);
            if (p.c >= 0) rc = jp_fail(&p, "the end of the file after the trace object");
        }
    } else rc = jp_fail(&p, "'{' or '[' starting a Chrome trace");
    if (rc != 0) fprintf(stderr, "ptreport: %s\n", p.err);
    fclose(p.f);
    return rc;
}

/* ------------------------------------------------------------------ axes and charts */

#define W 760
#define H 330
#define ML 78
#define MR 24
#define MT 52
#define MB 48
#define PW (W - ML - MR)
#define PH (H - MT - MB)

static double nice_num(double x, int round_) {
    double e = floor(log10(x)), f = x / pow(10, e), nf;
    if (round_) nf = f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10;
    else nf = f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10;
    return nf * pow(10, e);
}

typedef struct axis {
    double lo, hi, step; /* in the scaled unit */
    double div;          /* data value / div = axis value */
    int decimals;
} axis;

/* nice limits and ticks for [lo, hi] (data units) divided by div; zero forces 0 into the range */
static axis make_axis(double lo, double hi, double div, int zero, int integer) {
    axis a;
    a.div = div;
    lo /= div, hi /= div;
    if (zero && lo > 0) lo = 0;
    if (zero && hi < 0) hi = 0;
    if (!(hi > lo)) {
        double d = fabs(lo) > 0 ? fabs(lo) * 0.1 : 1;
        lo -= d, hi += d;
        if (zero && lo < 0 && hi > 0 && hi - d <= 0) hi = 0;
    }
    a.step = nice_num((hi - lo) / 5, 1);
    if (integer && a.step < 1) a.step = 1;
    a.lo = floor(lo / a.step) * a.step;
    a.hi = ceil(hi / a.step) * a.step;
    if (a.hi <= a.lo) a.hi = a.lo + a.step;
    a.decimals = a.step >= 1 ? 0 : (int)ceil(-log10(a.step) - 1e-9);
    if (a.decimals > 8) a.decimals = 8;
    return a;
}

static double ax_px(const axis *a, double v, double p0, double len) { return p0 + (v / a->div - a->lo) / (a->hi - a->lo) * len; }
static double xpx(const axis *a, double v) { return ax_px(a, v, ML, PW); }
static double ypx(const axis *a, double v) { return ax_px(a, v, MT + PH, -PH); }

/* a unit for the y values: divisor and suffix */
enum { U_PLAIN, U_COUNT, U_BYTES, U_SECONDS };
static double unit_for(int kind, double maxabs, const char **name) {
    *name = "";
    if (kind == U_COUNT) {
        if (maxabs >= 1e9) return *name = "G", 1e9;
        if (maxabs >= 1e6) return *name = "M", 1e6;
        if (maxabs >= 1e4) return *name = "k", 1e3;
    } else if (kind == U_BYTES) {
        if (maxabs >= 1073741824.0) return *name = "GiB", 1073741824.0;
        if (maxabs >= 1048576.0) return *name = "MiB", 1048576.0;
        if (maxabs >= 1024.0) return *name = "KiB", 1024.0;
        return *name = "bytes", 1;
    } else if (kind == U_SECONDS) {
        if (maxabs < 1e-3) return *name = "\302\265s", 1e-6;
        if (maxabs < 1) return *name = "ms", 1e-3;
        return *name = "s", 1;
    }
    return 1;
}

static void svg_begin(sb *b, const char *id, const char *title, int w, int h) {
    sb_printf(b, "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"%s\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
                 "font-family=\"sans-serif\" font-size=\"12\">\n", id, w, h, w, h);
    sb_printf(b, "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"white\"/>\n", w, h);
    sb_puts(b, "<text x=\"12\" y=\"20\" font-size=\"15\" font-weight=\"bold\">");
    sb_esc(b, title);
    sb_puts(b, "</text>\n");
}

/* ticks are the multiples of the step inside [lo, hi] */
static double first_tick(const axis *a) { return ceil(a->lo / a->step - 1e-6) * a->step; }

/* frame, grid, ticks and labels of a plot area at (x0, y0, w, h); ay NULL: no y ticks */
static void svg_axes(sb *b, const axis *ax, const axis *ay, const char *xlabel, const char *ylabel, int x0, int y0, int w,
                     int h) {
    double v;
    int i;
    sb_puts(b, "<g class=\"axes\" stroke=\"#ccc\" stroke-width=\"1\">\n");
    for (i = 0, v = ay ? first_tick(ay) : 1; ay && v <= ay->hi + ay->step * 1e-6 && i < 50; v = first_tick(ay) + ++i * ay->step) {
        double y = y0 + h - (v - ay->lo) / (ay->hi - ay->lo) * h;
        sb_printf(b, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\"/>\n", x0, y, x0 + w, y);
    }
    sb_puts(b, "</g>\n<g class=\"ticks\" fill=\"#333\">\n");
    for (i = 0, v = ay ? first_tick(ay) : 1; ay && v <= ay->hi + ay->step * 1e-6 && i < 50; v = first_tick(ay) + ++i * ay->step) {
        double y = y0 + h - (v - ay->lo) / (ay->hi - ay->lo) * h;
        sb_printf(b, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%.*f</text>\n", x0 - 6, y + 4, ay->decimals,
                  fabs(v) < ay->step * 1e-6 ? 0.0 : v);
    }
    for (i = 0, v = first_tick(ax); v <= ax->hi + ax->step * 1e-6 && i < 50; v = first_tick(ax) + ++i * ax->step) {
        double x = x0 + (v - ax->lo) / (ax->hi - ax->lo) * w;
        sb_printf(b, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#333\"/>\n", x, y0 + h, x, y0 + h + 5);
        sb_printf(b, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%.*f</text>\n", x, y0 + h + 18, ax->decimals,
                  fabs(v) < ax->step * 1e-6 ? 0.0 : v);
    }
    sb_puts(b, "</g>\n");
    sb_printf(b, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#333\"/>\n", x0, y0, w, h);
    sb_printf(b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">", x0 + w / 2, y0 + h + 38);
    sb_esc(b, xlabel);
    sb_printf(b, "</text>\n<text transform=\"translate(16 %d) rotate(-90)\" text-anchor=\"middle\">", y0 + h / 2);
    sb_esc(b, ylabel);
    sb_puts(b, "</text>\n");
}

/* legend entries in a row under the title; returns the x after the last one */
static int svg_legend(sb *b, int x, int y, const char *label, const char *color, int box) {
    if (box) sb_printf(b, "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"%s\" stroke=\"#555\" stroke-width=\"0.5\"/>\n", x, y - 10, color);
    else sb_printf(b, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"2.5\"/>\n", x, y - 4, x + 16, y - 4, color);
    sb_printf(b, "<text x=\"%d\" y=\"%d\">", x + 20, y);
    sb_esc(b, label);
    sb_puts(b, "</text>\n");
    return x + 20 + 7 * (int)strlen(label) + 16;
}

typedef struct series {
    const char *name, *color;
    const double *x, *y; /* y[i] NaN = no point */
    size_t n;
    size_t stride;       /* in doubles between consecutive x and y values */
    int dots;            /* circles at the points (few points) */
} series;

#define SX(s, i) ((s)->x[(i) * (s)->stride])
#define SY(s, i) ((s)->y[(i) * (s)->stride])

/* the indices of the points drawn: every finite point, or per bucket its min and max (in order) */
static size_t downsample(const series *s, size_t *idx) {
    size_t i, k = 0, bkt;
    size_t nfin = 0;
    for (i = 0; i < s->n; i++) nfin += isfinite(SY(s, i)) != 0;
    if (nfin <= 2 * LINE_BUCKETS) {
        for (i = 0; i < s->n; i++)
            if (isfinite(SY(s, i))) idx[k++] = i;
        return k;
    }
    for (bkt = 0; bkt < LINE_BUCKETS; bkt++) {
        size_t a = s->n * bkt / LINE_BUCKETS, e = s->n * (bkt + 1) / LINE_BUCKETS, lo = (size_t)-1, hi = (size_t)-1;
        for (i = a; i < e; i++) {
            if (!isfinite(SY(s, i))) continue;
            if (lo == (size_t)-1 || SY(s, i) < SY(s, lo)) lo = i;
            if (hi == (size_t)-1 || SY(s, i) > SY(s, hi)) hi = i;
        }
        if (lo == (size_t)-1) continue;
        if (lo == hi) idx[k++] = lo;
        else idx[k++] = lo < hi ? lo : hi, idx[k++] = lo < hi ? hi : lo;
    }
    return k;
}

static const char *event_color(const char *name) {
    static const char *const map[][2] = {{"nan", "#d62728"},     {"spike", "#ff7f0e"},         {"skip", "#bcbd22"},
                                         {"rollback", "#9467bd"}, {"ckpt_save", "#2ca02c"},    {"ckpt_load", "#17becf"},
                                         {"replica_mismatch", "#8c0000"}, {"run_start", "#1f77b4"}};
    size_t i;
    for (i = 0; i < sizeof map / sizeof map[0]; i++)
        if (strcmp(name, map[i][0]) == 0) return map[i][1];
    return "#7f7f7f";
}

/* a line chart of ns series against the step; events as vertical markers when given */
static int chart_lines(sb *b, const char *id, const char *title, const char *ylabel, int ykind, int zero, series *s, int ns,
                       const event_rec *ev, size_t nev) {
    double xlo = HUGE_VAL, xhi = -HUGE_VAL, ylo = HUGE_VAL, yhi = -HUGE_VAL, div;
    const char *uname;
    char ylab[128];
    size_t i, *idx, total = 0;
    int k, lx;
    axis ax, ay;
    for (k = 0; k < ns; k++)
        for (i = 0; i < s[k].n; i++) {
            if (!isfinite(SY(&s[k], i)) || !isfinite(SX(&s[k], i))) continue;
            total++;
            if (SX(&s[k], i) < xlo) xlo = SX(&s[k], i);
            if (SX(&s[k], i) > xhi) xhi = SX(&s[k], i);
            if (SY(&s[k], i) < ylo) ylo = SY(&s[k], i);
            if (SY(&s[k], i) > yhi) yhi = SY(&s[k], i);
        }
    if (total == 0) return 0;
    div = unit_for(ykind, fmax(fabs(ylo), fabs(yhi)), &uname);
    if (uname[0]) snprintf(ylab, sizeof ylab, "%s (%s)", ylabel, uname);
    else snprintf(ylab, sizeof ylab, "%s", ylabel);
    ax = make_axis(xlo, xhi, 1, 0, 1);
    ay = make_axis(ylo, yhi, div, zero, 0);
    svg_begin(b, id, title, W, H);
    svg_axes(b, &ax, &ay, "step", ylab, ML, MT, PW, PH);
    lx = ML;
    for (k = 0; k < ns; k++)
        if (s[k].n) lx = svg_legend(b, lx, 40, s[k].name, s[k].color, 0);
    if (ev && nev) {
        size_t drawn = 0;
        double last_label = -1e9; /* events a few pixels apart share one label (the first one's) */
        for (i = 0; i < nev && drawn < MAX_MARKERS; i++) {
            double x;
            if (!isfinite(ev[i].step) || ev[i].step < ax.lo || ev[i].step > ax.hi) continue;
            x = xpx(&ax, ev[i].step);
            sb_printf(b, "<line class=\"event\" data-event=\"");
            sb_esc(b, ev[i].name);
            sb_printf(b, "\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"%s\" stroke-dasharray=\"4 3\"><title>step %.0f: ", x,
                      MT, x, MT + PH, event_color(ev[i].name), ev[i].step);
            sb_esc(b, ev[i].name);
            sb_puts(b, "</title></line>\n");
            if (nev <= 40 && x - last_label >= 12) {
                last_label = x;
                sb_printf(b, "<text x=\"%.1f\" y=\"%d\" font-size=\"10\" fill=\"%s\" transform=\"rotate(-90 %.1f %d)\" text-anchor=\"end\">",
                          x + 3, MT + 4, event_color(ev[i].name), x + 3, MT + 4);
                sb_esc(b, ev[i].name);
                sb_puts(b, "</text>\n");
            }
            drawn++;
        }
        lx = svg_legend(b, lx, 40, "events", "#7f7f7f", 0);
    }
    idx = (size_t *)xrealloc(NULL, (2 * LINE_BUCKETS + 1 > total ? 2 * LINE_BUCKETS + 1 : total) * sizeof(size_t));
    for (k = 0; k < ns; k++) {
        size_t m = s[k].n ? downsample(&s[k], idx) : 0;
        if (!m) continue;
        sb_printf(b, "<polyline class=\"series\" data-series=\"%s\" data-points=\"%zu\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"",
                  s[k].name, m, s[k].color);
        for (i = 0; i < m; i++) sb_printf(b, "%s%.1f,%.1f", i ? " " : "", xpx(&ax, SX(&s[k], idx[i])), ypx(&ay, SY(&s[k], idx[i])));
        sb_puts(b, "\"/>\n");
        if (s[k].dots && m <= 100)
            for (i = 0; i < m; i++)
                sb_printf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"%s\"/>\n", xpx(&ax, SX(&s[k], idx[i])),
                          ypx(&ay, SY(&s[k], idx[i])), s[k].color);
    }
    free(idx);
    sb_puts(b, "</svg>\n");
    return 1;
}

/* step time stacked per step (bucket means for long runs) */
static const char *time_names[] = {"compute", "comm (exposed)", "bubble", "data wait", "checkpoint", "other (validation, ...)"};
static const char *time_colors[] = {"#4c9be8", "#f28e2b", "#d3d3d3", "#59a14f", "#8c564b", "#bab0ac"};

static int chart_time(sb *b, const run *r) {
    size_t i, nb, bkt, any = 0;
    double xlo = HUGE_VAL, xhi = -HUGE_VAL, ymax = 0, div, (*mean)[6];
    double *bx0, *bx1;
    const char *uname;
    char ylab[64];
    int c, lx;
    axis ax, ay;
    for (i = 0; i < r->nsteps; i++) {
        const double *f = r->steps[i].f;
        if (!isfinite(f[F_TSTEP]) && !isfinite(f[F_TCOMP])) continue;
        any++;
        if (r->steps[i].step < xlo) xlo = r->steps[i].step;
        if (r->steps[i].step > xhi) xhi = r->steps[i].step;
    }
    if (!any) return 0;
    nb = any < BAR_BUCKETS ? any : BAR_BUCKETS;
    mean = (double(*)[6])xrealloc(NULL, nb * sizeof *mean);
    bx0 = (double *)xrealloc(NULL, nb * sizeof(double));
    bx1 = (double *)xrealloc(NULL, nb * sizeof(double));
    for (bkt = 0; bkt < nb; bkt++) {
        size_t a = any * bkt / nb, e = any * (bkt + 1) / nb, j = 0, cnt = 0;
        double tot = 0;
        for (c = 0; c < 6; c++) mean[bkt][c] = 0;
        bx0[bkt] = HUGE_VAL, bx1[bkt] = -HUGE_VAL;
        for (i = 0; i < r->nsteps; i++) {
            const double *f = r->steps[i].f;
            double parts[6], sum = 0;
            if (!isfinite(f[F_TSTEP]) && !isfinite(f[F_TCOMP])) continue;
            if (j++ < a) continue;
            if (j > e) break;
            parts[0] = f[F_TCOMP], parts[1] = f[F_TCOMM], parts[2] = f[F_TBUB], parts[3] = f[F_TDATA], parts[4] = f[F_TCKPT];
            for (c = 0; c < 5; c++) {
                if (!isfinite(parts[c]) || parts[c] < 0) parts[c] = 0;
                sum += parts[c];
            }
            parts[5] = isfinite(f[F_TSTEP]) && f[F_TSTEP] > sum ? f[F_TSTEP] - sum : 0;
            for (c = 0; c < 6; c++) mean[bkt][c] += parts[c];
            if (r->steps[i].step < bx0[bkt]) bx0[bkt] = r->steps[i].step;
            if (r->steps[i].step > bx1[bkt]) bx1[bkt] = r->steps[i].step;
            cnt++;
        }
        for (c = 0; c < 6; c++) tot += mean[bkt][c] /= cnt ? (double)cnt : 1;
        if (tot > ymax) ymax = tot;
    }
    div = unit_for(U_SECONDS, ymax, &uname);
    snprintf(ylab, sizeof ylab, "time per step (%s)", uname);
    ax = make_axis(xlo, xhi, 1, 0, 1);
    ax.lo = xlo - 0.5, ax.hi = xhi + 0.5; /* the bars fill the plot; ticks stay on nice steps */
    ay = make_axis(0, ymax, div, 1, 0);
    svg_begin(b, "time", nb < any ? "Step time breakdown (bucket means)" : "Step time breakdown", W, H);
    svg_axes(b, &ax, &ay, "step", ylab, ML, MT, PW, PH);
    lx = ML;
    for (c = 0; c < 6; c++) lx = svg_legend(b, lx, 40, time_names[c], time_colors[c], 1);
    for (bkt = 0; bkt < nb; bkt++) {
        double y = 0, x0 = xpx(&ax, bx0[bkt] - 0.5), x1 = xpx(&ax, bx1[bkt] + 0.5);
        if (bx1[bkt] < bx0[bkt]) continue;
        for (c = 0; c < 6; c++) {
            double y0 = ypx(&ay, y), y1 = ypx(&ay, y + mean[bkt][c]);
            y += mean[bkt][c];
            if (mean[bkt][c] <= 0) continue;
            sb_printf(b, "<rect class=\"bar\" x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\"/>\n", x0, y1,
                      x1 - x0 > 1.5 ? x1 - x0 - 0.5 : x1 - x0, y0 - y1, time_colors[c]);
        }
    }
    sb_puts(b, "</svg>\n");
    free(mean);
    free(bx0);
    free(bx1);
    return 1;
}

/* peak memory per rank as bars (from mem_rank_bytes), else mem_peak_bytes over the steps */
static int chart_memory(sb *b, const run *r) {
    double ymax = 0, div;
    const char *uname;
    char ylab[64];
    int k, n = r->nranks_mem;
    axis ax, ay;
    for (k = 0; k < n; k++)
        if (r->mem_rank[k] > ymax) ymax = r->mem_rank[k];
    if (n == 0 || !(ymax > 0)) {
        series s;
        memset(&s, 0, sizeof s);
        s.name = "peak over ranks", s.color = "#e15759", s.x = &r->steps[0].step, s.y = &r->steps[0].f[F_MEM];
        s.n = r->nsteps, s.stride = sizeof(step_rec) / sizeof(double);
        return r->nsteps ? chart_lines(b, "memory", "Peak memory", "memory", U_BYTES, 1, &s, 1, NULL, 0) : 0;
    }
    div = unit_for(U_BYTES, ymax, &uname);
    snprintf(ylab, sizeof ylab, "peak memory (%s)", uname);
    ax = make_axis(0, n - 1, 1, 0, 1);
    ax.lo = -0.5, ax.hi = n - 0.5; /* bars centred on the ranks */
    ay = make_axis(0, ymax, div, 1, 0);
    svg_begin(b, "memory", "Peak memory per rank", W, H);
    svg_axes(b, &ax, &ay, "rank", ylab, ML, MT, PW, PH);
    for (k = 0; k < n; k++) {
        double v = isfinite(r->mem_rank[k]) ? r->mem_rank[k] : 0, x0 = xpx(&ax, k - 0.4), x1 = xpx(&ax, k + 0.4);
        sb_printf(b, "<rect class=\"bar\" x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"#e15759\"><title>rank %d: %.0f bytes</title></rect>\n",
                  x0, ypx(&ay, v), x1 - x0, ypx(&ay, 0) - ypx(&ay, v), k, v);
    }
    sb_puts(b, "</svg>\n");
    return 1;
}

/* ------------------------------------------------------------------ the pipeline timeline */

static const char *const cat_map[][2] = {{"forward", "#59a14f"}, {"backward", "#4e79a7"}, {"comm", "#f28e2b"},
                                         {"sendrecv", "#b07aa1"}, {"bubble", "#e0e0e0"},  {"data", "#76b7b2"},
                                         {"ckpt", "#9c755f"},     {"optim", "#edc948"}};
#define N_CATS (int)(sizeof cat_map / sizeof cat_map[0])

/* the color of a category and its place in the legend (unknown ones last, gray) */
static int cat_index(const char *cat) {
    int i;
    for (i = 0; i < N_CATS; i++)
        if (strcmp(cat, cat_map[i][0]) == 0) return i;
    return N_CATS;
}
static const char *cat_color(const char *cat) { return cat_index(cat) < N_CATS ? cat_map[cat_index(cat)][1] : "#bab0ac"; }
static int cmp_cat(const void *a, const void *b) {
    int x = cat_index(*(const char *const *)a), y = cat_index(*(const char *const *)b);
    return x < y ? -1 : x > y;
}

static int cmp_long(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return x < y ? -1 : x > y;
}
static int cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return x < y ? -1 : x > y;
}
static int cmp_dur_desc(const void *a, const void *b) {
    const tev *x = *(const tev *const *)a, *y = *(const tev *const *)b;
    if (x->dur != y->dur) return x->dur > y->dur ? -1 : 1;
    return x->ts < y->ts ? -1 : x->ts > y->ts;
}

/* the index of v in the sorted a[n], or -1 */
static int find_int(const int *a, int n, int v) {
    const int *q = (const int *)bsearch(&v, a, (size_t)n, sizeof(int), cmp_int);
    return q ? (int)(q - a) : -1;
}

/* the step drawn: --step N, else the last training step (one with a backward event) in which every
   rank has events and no "B" is left open (else the last such step of any kind);
   -1 when no event carries args.step (then the whole trace is drawn). Sets *why on an error. */
static long pick_step(const trace *t, long want, const int *ranks, int nr, const char **why) {
    long *steps, best = -1;
    size_t i, ns = 0, u = 0;
    int pass;
    *why = NULL;
    steps = (long *)xrealloc(NULL, (t->n + 1) * sizeof(long));
    for (i = 0; i < t->n; i++)
        if (t->ev[i].step >= 0) steps[ns++] = t->ev[i].step;
    if (ns == 0) {
        free(steps);
        if (want >= 0) *why = "no trace event has args.step";
        return -1;
    }
    qsort(steps, ns, sizeof(long), cmp_long);
    for (i = 0; i < ns; i++)
        if (!u || steps[u - 1] != steps[i]) steps[u++] = steps[i];
    if (want >= 0) {
        free(steps);
        for (i = 0; i < t->n; i++)
            if (t->ev[i].step == want) return want;
        *why = "the trace has no event of that step";
        return -1;
    }
    for (pass = 0; pass < 2 && best < 0; pass++)
    for (i = u; i-- > 0 && best < 0;) { /* pass 0: a training step (one with a backward event) */
        long s = steps[i];
        int r, complete = 1;
        size_t j;
        if (pass == 0) {
            for (complete = 0, j = 0; j < t->n && !complete; j++) complete = t->ev[j].step == s && strcmp(t->ev[j].cat, "backward") == 0;
        }
        for (j = 0; j < t->nopen; j++)
            if (t->open[j].step == s) complete = 0;
        if (complete) { /* every rank has an event of step s */
            char *seen = (char *)xrealloc(NULL, (size_t)nr + 1);
            memset(seen, 0, (size_t)nr + 1);
            for (j = 0; j < t->n; j++)
                if (t->ev[j].step == s) seen[find_int(ranks, nr, t->ev[j].pid)] = 1;
            for (r = 0; r < nr; r++) complete &= seen[r];
            free(seen);
        }
        if (complete) best = s;
    }
    if (best < 0) best = steps[u - 1];
    free(steps);
    return best;
}

static int chart_timeline(sb *b, const trace *t, long want, long *chosen, size_t *drawn, int *nrows) {
    int *ranks = (int *)xrealloc(NULL, (t->n + 1) * sizeof(int)), nr = 0, r, lx;
    const tev **sel;
    size_t i, ns = 0;
    double t0 = HUGE_VAL, t1 = -HUGE_VAL, rowh, h, div = 1e3;
    const char *why, *cats[16];
    int ncats = 0, has_bubble = 0, label_every;
    char title[96];
    axis ax;
    for (i = 0; i < t->n; i++) ranks[i] = t->ev[i].pid;
    qsort(ranks, t->n, sizeof(int), cmp_int);
    for (i = 0; i < t->n; i++)
        if (nr == 0 || ranks[nr - 1] != ranks[i]) ranks[nr++] = ranks[i];
    *chosen = pick_step(t, want, ranks, nr, &why);
    if (why) {
        fprintf(stderr, "ptreport: --step %ld: %s\n", want, why);
        free(ranks);
        return -1;
    }
    sel = (const tev **)xrealloc(NULL, (t->n + 1) * sizeof(tev *));
    for (i = 0; i < t->n; i++) {
        const tev *e = &t->ev[i];
        if (*chosen >= 0 && e->step != *chosen) continue;
        sel[ns++] = e;
        if (e->ts < t0) t0 = e->ts;
        if (e->ts + e->dur > t1) t1 = e->ts + e->dur;
        if (strcmp(e->cat, "bubble") == 0) has_bubble = 1;
    }
    *drawn = ns;
    *nrows = nr;
    if (ns == 0) {
        free(ranks);
        free(sel);
        return 0;
    }
    qsort(sel, ns, sizeof *sel, cmp_dur_desc); /* long boxes first, so the short ones stay visible on top */
    if (t1 - t0 < 1e3) div = 1; /* under a millisecond: the axis in µs */
    ax = make_axis(0, t1 - t0, div, 1, 0);
    rowh = nr <= 8 ? 34 : nr <= 32 ? 20 : 480.0 / nr;
    label_every = rowh >= 14 ? 1 : (int)ceil(14 / rowh);
    h = MT + 16 + rowh * nr + MB;
    if (*chosen >= 0) snprintf(title, sizeof title, "Pipeline timeline, step %ld", *chosen);
    else snprintf(title, sizeof title, "Timeline (whole trace)");
    svg_begin(b, "timeline", title, W, (int)h);
    svg_axes(b, &ax, NULL, div == 1 ? "time from the step's first event (\302\265s)" : "time from the step's first event (ms)",
             "", ML, MT + 16, PW, (int)(rowh * nr));
    for (r = 0; r < nr; r++) {
        double y = MT + 16 + r * rowh;
        int pi;
        for (pi = 0; pi < (int)t->npn && t->pids[pi] != ranks[r]; pi++) {
        }
        sb_printf(b, "<rect class=\"row\" data-rank=\"%d\" x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%.1f\" fill=\"%s\"/>\n", ranks[r], ML,
                  y, PW, rowh, has_bubble ? "white" : "#f4f4f4");
        if (r % label_every == 0) { /* thin rows: a label every few rows */
            const char *pn = pi < (int)t->npn ? t->pnames[pi] : NULL, *par = pn ? strstr(pn, " (") : NULL;
            if (par && rowh >= 24) { /* "rank 3 (dp 1 tp 0 pp 1)": the name, its coordinates below in small type */
                char head[64];
                size_t len = (size_t)(par - pn) < sizeof head - 1 ? (size_t)(par - pn) : sizeof head - 1;
                memcpy(head, pn, len), head[len] = 0;
                sb_printf(b, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">", ML - 6, y + rowh / 2 - 1);
                sb_esc(b, head);
                sb_printf(b, "</text>\n<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\" font-size=\"8\" fill=\"#555\">", ML - 6, y + rowh / 2 + 9);
                sb_esc(b, par + 1);
            } else {
                sb_printf(b, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">", ML - 6, y + rowh / 2 + 4);
                if (pn) sb_esc(b, pn);
                else sb_printf(b, "rank %d", ranks[r]);
            }
            sb_puts(b, "</text>\n");
        }
    }
    for (i = 0; i < ns; i++) {
        const tev *e = sel[i];
        double x0 = ML + (e->ts - t0) / div / (ax.hi - ax.lo) * PW, w = e->dur / div / (ax.hi - ax.lo) * PW, y, hh;
        int row = find_int(ranks, nr, e->pid), k;
        const char *cat = e->cat[0] ? e->cat : "other";
        int main_lane = strcmp(cat, "forward") == 0 || strcmp(cat, "backward") == 0 || strcmp(cat, "bubble") == 0;
        y = MT + 16 + row * rowh + 2;
        hh = rowh - 4;
        if (!main_lane && rowh >= 16 && (strcmp(cat, "comm") == 0 || strcmp(cat, "sendrecv") == 0))
            y += hh * 0.6, hh *= 0.4; /* communication in the lower part: the compute or bubble it overlaps stays visible */
        for (k = 0; k < ncats && strcmp(cats[k], cat) != 0; k++) {
        }
        if (k == ncats && ncats < 16) cats[ncats++] = cat;
        sb_printf(b, "<rect class=\"ev\" data-cat=\"");
        sb_esc(b, cat);
        sb_printf(b, "\" x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"%s\" stroke=\"white\" stroke-width=\"0.5\"><title>rank %d ",
                  x0, y, w > 0.3 ? w : 0.3, hh, cat_color(cat), e->pid);
        sb_esc(b, e->name[0] ? e->name : cat);
        if (e->mb >= 0) sb_printf(b, " mb %d", e->mb);
        sb_printf(b, ": %.3f ms</title></rect>\n", e->dur / 1e3);
        if (e->mb >= 0 && main_lane && hh >= 11) {
            char num[16];
            int len = snprintf(num, sizeof num, "%d", e->mb);
            if (w >= 7.0 * len + 4)
                sb_printf(b, "<text class=\"mb\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"11\" fill=\"white\">%s</text>\n",
                          x0 + w / 2, y + hh / 2 + 4, num);
        }
    }
    lx = ML;
    qsort(cats, (size_t)ncats, sizeof cats[0], cmp_cat);
    for (r = 0; r < ncats; r++) lx = svg_legend(b, lx, 40, cats[r], cat_color(cats[r]), 1);
    if (!has_bubble) svg_legend(b, lx, 40, "idle (bubble)", "#f4f4f4", 1);
    sb_puts(b, "</svg>\n");
    free(ranks);
    free(sel);
    return 1;
}

/* ------------------------------------------------------------------ the page */

static int write_file(const char *dir, const char *name, const sb *b) {
    char path[4096];
    FILE *f;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    f = fopen(path, "wb");
    if (!f || fwrite(b->s, 1, b->n, f) != b->n || fclose(f) != 0) {
        fprintf(stderr, "ptreport: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    printf("wrote %s (%zu bytes)\n", path, b->n);
    return 0;
}

/* config rows: nested objects flattened as a.b.c */
static void config_rows(sb *h, const char *prefix, const jv *v) {
    size_t i;
    if (v->t == J_OBJ) {
        for (i = 0; i < v->n; i++) {
            char key[256];
            snprintf(key, sizeof key, "%s%s%s", prefix, prefix[0] ? "." : "", v->keys[i]);
            config_rows(h, key, &v->items[i]);
        }
        return;
    }
    sb_puts(h, "<tr><th>");
    sb_esc(h, prefix);
    sb_puts(h, "</th><td>");
    if (v->t == J_STR) sb_esc(h, v->str);
    else {
        sb tmp = {NULL, 0, 0};
        jv_write(&tmp, v);
        sb_esc(h, tmp.s ? tmp.s : "");
        free(tmp.s);
    }
    sb_puts(h, "</td></tr>\n");
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void summary_row(sb *h, const char *name, const char *value) {
    sb_puts(h, "<tr><th>");
    sb_esc(h, name);
    sb_puts(h, "</th><td>");
    sb_esc(h, value);
    sb_puts(h, "</td></tr>\n");
}

static void summary(sb *h, const run *r) {
    char v[160];
    double last = NAN, lastval = NAN, *tok, sum_mfu = 0, bub = 0, comm = 0, data = 0, tstep = 0, memmax = 0;
    size_t i, ntok = 0, nmfu = 0, laststep = 0;
    int *cnt = NULL, ncnt = 0, k, worst = -1;
    tok = (double *)xrealloc(NULL, (r->nsteps + 1) * sizeof(double));
    for (i = 0; i < r->nsteps; i++) {
        const double *f = r->steps[i].f;
        if (isfinite(f[F_LOSS])) last = f[F_LOSS], laststep = i;
        if (isfinite(f[F_VAL])) lastval = f[F_VAL];
        if (isfinite(f[F_TOKS])) tok[ntok++] = f[F_TOKS];
        if (isfinite(f[F_MFU])) sum_mfu += f[F_MFU], nmfu++;
        if (isfinite(f[F_TSTEP]) && f[F_TSTEP] > 0) {
            tstep += f[F_TSTEP];
            if (isfinite(f[F_TBUB])) bub += f[F_TBUB];
            if (isfinite(f[F_TCOMM])) comm += f[F_TCOMM];
            if (isfinite(f[F_TDATA])) data += f[F_TDATA];
        }
        if (isfinite(f[F_MEM]) && f[F_MEM] > memmax) memmax = f[F_MEM];
        if (r->steps[i].straggler >= 0 && r->steps[i].straggler < 1000000) {
            if (r->steps[i].straggler >= ncnt) {
                cnt = (int *)xrealloc(cnt, (size_t)(r->steps[i].straggler + 1) * sizeof(int));
                for (k = ncnt; k <= r->steps[i].straggler; k++) cnt[k] = 0;
                ncnt = r->steps[i].straggler + 1;
            }
            cnt[r->steps[i].straggler]++;
        }
    }
    for (k = 0; k < r->nranks_mem; k++)
        if (r->mem_rank[k] > memmax) memmax = r->mem_rank[k];
    sb_puts(h, "<table class=\"kv\">\n");
    snprintf(v, sizeof v, "%zu lines (steps %.0f to %.0f)", r->nsteps, r->nsteps ? r->steps[0].step : 0.0,
             r->nsteps ? r->steps[r->nsteps - 1].step : 0.0);
    summary_row(h, "steps logged", v);
    if (isfinite(last)) {
        snprintf(v, sizeof v, "%.4f (step %.0f)", last, r->steps[laststep].step);
        summary_row(h, "final loss", v);
    }
    if (isfinite(lastval)) {
        snprintf(v, sizeof v, "%.4f", lastval);
        summary_row(h, "final val loss", v);
    }
    if (ntok) {
        qsort(tok, ntok, sizeof(double), cmp_double);
        snprintf(v, sizeof v, "%.1f", ntok % 2 ? tok[ntok / 2] : 0.5 * (tok[ntok / 2 - 1] + tok[ntok / 2]));
        summary_row(h, "median tokens/s", v);
    }
    if (nmfu) {
        snprintf(v, sizeof v, "%.2f%%", 100 * sum_mfu / (double)nmfu);
        summary_row(h, "mean MFU", v);
    }
    if (tstep > 0) {
        snprintf(v, sizeof v, "%.1f%% (sum of t_bubble / sum of t_step)", 100 * bub / tstep);
        summary_row(h, "bubble fraction", v);
        snprintf(v, sizeof v, "%.1f%%", 100 * comm / tstep);
        summary_row(h, "exposed comm fraction", v);
        snprintf(v, sizeof v, "%.1f%%", 100 * data / tstep);
        summary_row(h, "data wait fraction", v);
    }
    if (memmax > 0) {
        snprintf(v, sizeof v, "%.1f MiB", memmax / 1048576.0);
        summary_row(h, "peak memory (any rank)", v);
    }
    for (k = 0; k < ncnt; k++)
        if (worst < 0 || cnt[k] > cnt[worst]) worst = k;
    if (worst >= 0) {
        snprintf(v, sizeof v, "rank %d (slowest in %d steps)", worst, cnt[worst]);
        summary_row(h, "most frequent straggler", v);
    }
    snprintf(v, sizeof v, "%zu", r->nevents);
    summary_row(h, "events", v);
    sb_puts(h, "</table>\n");
    free(tok);
    free(cnt);
}

static int write_report(const char *dir, const char *title, const run *r, const trace *t, long want) {
    sb h = {NULL, 0, 0}, svg[8];
    const char *names[8];
    int nsvg = 0, k, rc = 0;
    size_t i, nval = 0;
    const size_t stride = sizeof(step_rec) / sizeof(double);
    memset(svg, 0, sizeof svg);
    /* the charts */
    {
        series s[2];
        memset(s, 0, sizeof s);
        s[0].name = "loss", s[0].color = "#1f77b4";
        s[1].name = "val loss", s[1].color = "#d62728", s[1].dots = 1;
        for (k = 0; k < 2; k++) {
            s[k].stride = stride;
            s[k].x = r->nsteps ? &r->steps[0].step : NULL;
            s[k].y = r->nsteps ? &r->steps[0].f[k == 0 ? F_LOSS : F_VAL] : NULL;
            s[k].n = r->nsteps;
        }
        for (i = 0; i < r->nsteps; i++) nval += isfinite(r->steps[i].f[F_VAL]) != 0;
        if (!nval) s[1].n = 0;
        if (r->nsteps && chart_lines(&svg[nsvg], "loss", "Loss", "loss", U_PLAIN, 0, s, 2, r->events, r->nevents)) names[nsvg++] = "loss.svg";
    }
    {
        static const struct { int f; const char *file, *id, *title, *name, *ylabel, *color; int kind, zero; } one[] = {
            {F_TOKS, "tokens.svg", "tokens", "Throughput", "tokens/s", "tokens/s", "#59a14f", U_COUNT, 1},
            {F_MFU, "mfu.svg", "mfu", "Model FLOPs utilization", "MFU", "MFU (fraction of peak)", "#76b7b2", U_PLAIN, 1},
            {F_GNORM, "grad_norm.svg", "grad_norm", "Gradient norm", "grad norm", "global L2 norm", "#e15759", U_PLAIN, 1},
            {F_LR, "lr.svg", "lr", "Learning rate", "lr", "learning rate", "#9467bd", U_PLAIN, 1}};
        for (k = 0; k < 4; k++) {
            series s;
            memset(&s, 0, sizeof s);
            s.name = one[k].name, s.color = one[k].color, s.stride = stride, s.n = r->nsteps;
            s.x = r->nsteps ? &r->steps[0].step : NULL;
            s.y = r->nsteps ? &r->steps[0].f[one[k].f] : NULL;
            if (r->nsteps && chart_lines(&svg[nsvg], one[k].id, one[k].title, one[k].ylabel, one[k].kind, one[k].zero, &s, 1, NULL, 0))
                names[nsvg++] = one[k].file;
        }
    }
    if (chart_time(&svg[nsvg], r)) names[nsvg++] = "time.svg";
    if (chart_memory(&svg[nsvg], r)) names[nsvg++] = "memory.svg";
    if (t) {
        long chosen;
        size_t drawn;
        int rows, tr = chart_timeline(&svg[nsvg], t, want, &chosen, &drawn, &rows);
        if (tr < 0) rc = -1;
        else if (tr > 0) {
            names[nsvg++] = "timeline.svg";
            if (chosen >= 0) printf("timeline: step %ld, %d ranks, %zu events\n", chosen, rows, drawn);
            else printf("timeline: the whole trace (no args.step), %d ranks, %zu events\n", rows, drawn);
        } else fprintf(stderr, "ptreport: the trace has no complete (\"X\" or \"B\"/\"E\") events; no timeline\n");
    }
    for (k = 0; k < nsvg && rc == 0; k++) rc = write_file(dir, names[k], &svg[k]);
    /* the page */
    if (rc == 0) {
        const char *time = jv_str(&r->header, "time"), *formula = jv_str(&r->header, "mfu_formula");
        const jv *cfg = jv_get(&r->header, "config");
        double fpt = jv_num(&r->header, "flops_per_token"), peak = jv_num(&r->header, "peak_flops");
        sb_puts(&h, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n<title>");
        sb_esc(&h, title);
        sb_puts(&h, "</title>\n<style>\nbody{font-family:sans-serif;margin:24px;max-width:1600px;color:#222}\n"
                    "table{border-collapse:collapse;margin:8px 0 16px}th,td{border:1px solid #ccc;padding:3px 8px;text-align:left;"
                    "font-size:13px;vertical-align:top}\nth{background:#f4f4f4}\n.charts{display:flex;flex-wrap:wrap;gap:12px}\n"
                    ".charts svg{border:1px solid #ddd}\n.cols{display:flex;gap:32px;flex-wrap:wrap}\n</style>\n</head>\n<body>\n<h1>");
        sb_esc(&h, title);
        sb_puts(&h, "</h1>\n");
        if (time) {
            sb_puts(&h, "<p>started ");
            sb_esc(&h, time);
            sb_puts(&h, "</p>\n");
        }
        sb_puts(&h, "<div class=\"cols\">\n<div>\n<h2>Summary</h2>\n");
        summary(&h, r);
        sb_puts(&h, "</div>\n<div>\n<h2>Configuration</h2>\n<table class=\"kv\">\n");
        if (cfg) config_rows(&h, "", cfg);
        if (isfinite(fpt)) {
            char v[64];
            snprintf(v, sizeof v, "%.4g", fpt);
            summary_row(&h, "flops_per_token", v);
        }
        if (isfinite(peak)) {
            char v[64];
            snprintf(v, sizeof v, "%.4g", peak);
            summary_row(&h, "peak_flops", v);
        }
        if (formula) summary_row(&h, "mfu_formula", formula);
        if (!cfg && !formula) sb_puts(&h, "<tr><td>no run_start line with a config in the log</td></tr>\n");
        sb_puts(&h, "</table>\n</div>\n</div>\n<h2>Charts</h2>\n<div class=\"charts\">\n");
        for (k = 0; k < nsvg; k++) sb_put(&h, svg[k].s, svg[k].n);
        if (!nsvg) sb_puts(&h, "<p>no step lines in the log</p>\n");
        sb_printf(&h, "</div>\n<h2>Events (%zu)</h2>\n", r->nevents);
        if (r->nevents) {
            sb_puts(&h, "<table class=\"events\">\n<tr><th>step</th><th>event</th><th>details</th></tr>\n");
            for (i = 0; i < r->nevents && i < MAX_EVENT_ROWS; i++) {
                sb_puts(&h, "<tr><td>");
                if (isfinite(r->events[i].step)) sb_printf(&h, "%.0f", r->events[i].step);
                sb_printf(&h, "</td><td style=\"color:%s\">", event_color(r->events[i].name));
                sb_esc(&h, r->events[i].name);
                sb_puts(&h, "</td><td>");
                sb_esc(&h, r->events[i].detail);
                sb_puts(&h, "</td></tr>\n");
            }
            if (r->nevents > MAX_EVENT_ROWS) sb_printf(&h, "<tr><td colspan=\"3\">... %zu more</td></tr>\n", r->nevents - MAX_EVENT_ROWS);
            sb_puts(&h, "</table>\n");
        } else sb_puts(&h, "<p>none</p>\n");
        sb_puts(&h, "</body>\n</html>\n");
        rc = write_file(dir, "index.html", &h);
    }
    for (k = 0; k < 8; k++) free(svg[k].s);
    free(h.s);
    return rc;
}

static int usage(void) {
    fprintf(stderr, "usage: ptreport LOG.jsonl [--trace TRACE.json] [--step N] [--title TEXT] -o DIR\n");
    return 2;
}

int main(int argc, char **argv) {
    const char *log = NULL, *tpath = NULL, *dir = NULL, *title = NULL;
    long want = -1;
    int i, rc;
    run r;
    trace t;
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-o") == 0 && i + 1 < argc) dir = argv[++i];
        else if (strcmp(argv[i], "--trace") == 0 && i + 1 < argc) tpath = argv[++i];
        else if (strcmp(argv[i], "--title") == 0 && i + 1 < argc) title = argv[++i];
        else if (strcmp(argv[i], "--step") == 0 && i + 1 < argc) {
            char *end;
            want = strtol(argv[++i], &end, 10);
            if (*end || want < 0) {
                fprintf(stderr, "ptreport: --step wants a step number >= 0, found '%s'\n", argv[i]);
                return 2;
            }
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) return usage(), 0;
        else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "ptreport: unknown option %s\n", argv[i]);
            return usage();
        } else if (!log) log = argv[i];
        else {
            fprintf(stderr, "ptreport: one log file expected, found a second: %s\n", argv[i]);
            return usage();
        }
    }
    if (!log || !dir) return usage();
    memset(&r, 0, sizeof r);
    memset(&t, 0, sizeof t);
    if (read_log(log, &r) != 0) rc = 1;
    else if (tpath && read_trace(tpath, &t) != 0) rc = 1;
    else if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "ptreport: cannot create %s: %s\n", dir, strerror(errno));
        rc = 1;
    } else {
        char dflt[512];
        if (!title) {
            const jv *cfg = jv_get(&r.header, "config");
            const char *model = jv_str(cfg, "model");
            snprintf(dflt, sizeof dflt, "Training report: %s", model ? model : log);
            title = dflt;
        }
        rc = write_report(dir, title, &r, tpath ? &t : NULL, want) != 0;
    }
    jv_free(&r.header);
    for (i = 0; i < (int)r.nevents; i++) free(r.events[i].name), free(r.events[i].detail);
    free(r.events);
    free(r.steps);
    free(r.mem_rank);
    free(t.ev);
    free(t.open);
    for (i = 0; i < (int)t.npn; i++) free(t.pnames[i]);
    free(t.pids);
    free(t.pnames);
    return rc;
}
