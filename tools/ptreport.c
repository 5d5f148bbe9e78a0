/* ptreport.c - a training run's JSON-lines log (and Chrome trace) -> SVG charts and one HTML page.
   Build: cc -O2 -I. tools/ptreport.c -o build/ptreport -lm                      (or: make tools)
   Usage: ptreport LOG.jsonl [--trace TRACE.json] [--step N] [--title TEXT] -o DIR
   Writes into DIR (created if missing): loss.svg (loss, val loss, event markers), tokens.svg,
   mfu.svg, grad_norm.svg, lr.svg, time.svg (step time stacked: compute / comm / bubble / data /
   ckpt / other), memory.svg (peak bytes per rank), timeline.svg (from --trace: one step, one row
   per rank, boxes colored by category) and index.html (the run's configuration, summary numbers,
   every chart inlined, the events table). A run supervised by tools/ptrun (its ptrun_* events in the
   log) also gets failures.svg (a row per failure: fault -> detected -> torn down -> relaunched ->
   first step, each part with its duration), restart and failure marks on loss.svg with the steps done
   twice drawn apart, and a Failures section on the page. A chart whose data is absent from the log is
   not written.
   The log schema and the drawing rules are in docs/monitoring.md; the names of the log's keys come
   from the monitor that writes them (pt_monitor_key). C99 + POSIX mkdir, on ptrain.h's JSON reader
   (pt_json, NaN and Infinity accepted, as Python writes them) and text buffer (pt_sb). The log is
   read line by line; the trace is read into memory as text and parsed event by event, so no tree
   of the whole trace is ever built.
   Exit status: 0 written, 1 a file cannot be read or is malformed (FILE:LINE: what was expected),
   2 bad command line. The log's last line cut off without its newline (a run killed while writing
   it) is not an error: a warning names it and the lines before it are reported. */
#define _POSIX_C_SOURCE 200809L
#define PTRAIN_IMPLEMENTATION
#include "../ptrain.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define LINE_BUCKETS 400 /* a polyline longer than 2x this keeps the min and max of each bucket */
#define BAR_BUCKETS 200  /* the stacked time chart draws at most this many bars */
#define MAX_EVENT_ROWS 2000
#define MAX_MARKERS 300
#define JSON_FLAGS (PT_JSON_NONFINITE | PT_JSON_DUPKEYS) /* what the log and the trace may hold */
#define KEY(name) pt_monitor_key(PT_MON_KEY_##name)    /* a key of the log, as the monitor writes it */

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

/* text for XML/HTML: & < > " escaped; control bytes dropped */
static void sb_esc(pt_sb *b, const char *s) {
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '&') pt_sb_add(b, "&amp;");
        else if (c == '<') pt_sb_add(b, "&lt;");
        else if (c == '>') pt_sb_add(b, "&gt;");
        else if (c == '"') pt_sb_add(b, "&quot;");
        else if (c >= 0x20 || c == '\t') pt_sb_add(b, "%c", (char)c);
    }
}

/* ------------------------------------------------------------------ JSON values */

/* the number at key (NaN when absent or not a number); the string at key (NULL) */
static double num_at(const pt_json *o, const char *key) { return pt_json_num(pt_json_get(o, key), NAN); }
static const char *str_at(const pt_json *o, const char *key) { return pt_json_str(pt_json_get(o, key)); }

/* the integer at key (into *out): 0 when absent or not finite (NaN, Infinity: treated as absent, as
   other non-finite values are), 1 read, -1 when it is not an integer within [lo, hi] (what was
   expected and found in why) */
static int int_at(const pt_json *o, const char *key, double lo, double hi, long *out, char *why, size_t n) {
    double v = num_at(o, key);
    if (!isfinite(v)) return 0;
    if (v < lo || v > hi || v != floor(v)) {
        snprintf(why, n, "%s: expected an integer %.0f..%.0f, found %.15g", key, lo, hi, v);
        return -1;
    }
    *out = (long)v;
    return 1;
}
#define INT_LO (-2147483648.0)
#define INT_HI 2147483647.0

/* compact text of v (numbers with %g, strings as they are) */
static void json_text(pt_sb *b, const pt_json *v) {
    size_t i;
    int obj = pt_json_type(v) == PT_JSON_OBJECT;
    switch (pt_json_type(v)) {
    case PT_JSON_BOOL: pt_sb_add(b, "%s", pt_json_bool(v, 0) ? "true" : "false"); break;
    case PT_JSON_NUMBER: pt_sb_add(b, "%.6g", pt_json_num(v, NAN)); break;
    case PT_JSON_STRING: pt_sb_add(b, "\"%s\"", pt_json_str(v)); break;
    case PT_JSON_ARRAY:
    case PT_JSON_OBJECT:
        pt_sb_add(b, "%c", obj ? '{' : '[');
        for (i = 0; i < pt_json_len(v); i++) {
            if (i) pt_sb_add(b, ",");
            if (obj) pt_sb_add(b, "\"%s\":", pt_json_key(v, i));
            json_text(b, pt_json_at(v, i));
        }
        pt_sb_add(b, "%c", obj ? '}' : ']');
        break;
    default: pt_sb_add(b, "null"); break;
    }
}

/* the line of byte `at` of text (1 = the first) */
static long line_of(const char *text, size_t at) {
    long line = 1;
    size_t i;
    for (i = 0; i < at; i++) line += text[i] == '\n';
    return line;
}

/* ------------------------------------------------------------------ the log */

enum { F_LOSS, F_VAL, F_GNORM, F_LR, F_TOKS, F_MFU, F_TSTEP, F_TCOMP, F_TCOMM, F_TBUB, F_TDATA, F_TCKPT,
       F_MEM, F_STRAG_S, F_NFIELDS };
static const int field_key[F_NFIELDS] = {PT_MON_KEY_LOSS,   PT_MON_KEY_VAL_LOSS,  PT_MON_KEY_GRAD_NORM, PT_MON_KEY_LR,
                                         PT_MON_KEY_TOKENS_PER_S, PT_MON_KEY_MFU, PT_MON_KEY_T_STEP, PT_MON_KEY_T_COMPUTE,
                                         PT_MON_KEY_T_COMM, PT_MON_KEY_T_BUBBLE, PT_MON_KEY_T_DATA, PT_MON_KEY_T_CKPT,
                                         PT_MON_KEY_MEM_PEAK_BYTES, PT_MON_KEY_STRAGGLER_S};

typedef struct step_rec {
    double step;
    double f[F_NFIELDS]; /* NaN where the line lacks the key */
    int straggler;       /* -1 when absent */
} step_rec;

typedef struct event_rec {
    char *name, *detail;
    double step; /* NaN when absent */
} event_rec;

/* ------------------------------------------------------------------ the supervisor's events (tools/ptrun) */

/* tools/ptrun restarts a failed job and appends its events ("ptrun_*", every one with "wall": Unix
   seconds, and "attempt": the launch number from 1) to the log; a failure is the row of
   ptrun_fault (an injected fault's own stamp) -> ptrun_detected -> ptrun_teardown -> ptrun_relaunch
   (the next attempt) -> ptrun_recovered (its first step). These key names are ptrun's, not the
   monitor's. */
#define PTRUN_PREFIX "ptrun_"
enum { S_FAULT = 1, S_DET = 2, S_TEAR = 4, S_REL = 8, S_REC = 16 };
#define PTRUN_LOOKBACK 64 /* an event is matched with the failures (launches) this close to the newest */
#define RESTART_COLOR "#222222" /* restart lines on the loss chart (failures: red, dotted) */

typedef struct failure {
    long attempt;                              /* the attempt that failed, -1 unknown */
    int have;                                  /* S_* seen */
    double step, resume, rec_step;             /* the step in progress at the failure; the relaunch's resume step; the first step after it */
    double wall[5];                            /* fault, detected, teardown, relaunch, recovered (Unix s; NaN absent) */
    double latency, tear_s, recover_s, backoff;
    long rank, restart, max_restarts, steps_lost;
    long dp0, acc0, dp1, tp1, pp1, acc1;       /* dp_from, accum_from; the layout after */
    char *kind, *what, *detail, *host, *hosts1;
} failure;

typedef struct launch_rec {
    long attempt, dp, tp, pp, acc;
    char *hosts;
} launch_rec;

typedef struct straggler_rec {
    long attempt, rank;
    double step, work_s, median_s;
    char *host;
} straggler_rec;

typedef struct ptrun_end {
    int seen, ok; /* ok: -1 absent */
    long restarts, steps_lost, exit_code;
    double time_lost_s, step;
} ptrun_end;

#define GROW(a, n, cap, first)                                                                                         \
    do {                                                                                                               \
        if ((n) == (cap)) {                                                                                            \
            (cap) = (cap) ? 2 * (cap) : (first);                                                                       \
            (a) = xrealloc((a), (cap) * sizeof *(a));                                                                  \
        }                                                                                                              \
    } while (0)

static char *dup_at(const pt_json *o, const char *key) {
    const char *s = str_at(o, key);
    return s ? xstrdup(s) : NULL;
}

typedef struct run {
    pt_json *header;  /* the run_start object (NULL when none) */
    step_rec *steps;
    size_t nsteps, capsteps;
    event_rec *events;
    size_t nevents, capevents;
    double *mem_rank; /* max over the run of mem_rank_bytes[r] */
    int nranks_mem;
    long lines;
    size_t nptrun;    /* ptrun_* events */
    failure *fails;
    size_t nfails, capfails;
    launch_rec *launches;
    size_t nlaunches, caplaunches;
    straggler_rec *strag;
    size_t nstrag, capstrag;
    ptrun_end end;
} run;

/* reads a line of any length; returns its length, -1 at the end of the file; *cut = 1 when the
   file ends inside it (no '\n') */
static long read_line(FILE *f, char **buf, size_t *cap, int *cut) {
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
    *cut = c == EOF;
    if (c == EOF && n == 0) return -1;
    if (!*buf) *buf = (char *)xrealloc(NULL, (*cap = 16));
    (*buf)[n] = 0;
    return (long)n;
}

/* a step line (line of path); -1 when a value is refused (reported) */
static int add_step(run *r, const pt_json *o, const char *path, long line) {
    step_rec s;
    const pt_json *ranks = pt_json_get(o, KEY(MEM_RANK_BYTES));
    size_t k, nr = pt_json_type(ranks) == PT_JSON_ARRAY ? pt_json_len(ranks) : 0;
    long straggler = -1;
    char why[200];
    int i;
    s.step = num_at(o, KEY(STEP));
    for (i = 0; i < F_NFIELDS; i++) s.f[i] = num_at(o, pt_monitor_key(field_key[i]));
    if (int_at(o, KEY(STRAGGLER_RANK), -1, INT_HI, &straggler, why, sizeof why) < 0) {
        fprintf(stderr, "ptreport: %s:%ld: %s\n", path, line, why);
        return -1;
    }
    s.straggler = (int)straggler;
    if ((int)nr > r->nranks_mem && nr < 1000000) {
        r->mem_rank = (double *)xrealloc(r->mem_rank, nr * sizeof(double));
        for (k = (size_t)r->nranks_mem; k < nr; k++) r->mem_rank[k] = NAN;
        r->nranks_mem = (int)nr;
    }
    for (k = 0; k < nr && k < (size_t)r->nranks_mem; k++) {
        const pt_json *v = pt_json_at(ranks, k);
        if (pt_json_type(v) == PT_JSON_NUMBER && !(pt_json_num(v, NAN) <= r->mem_rank[k])) r->mem_rank[k] = pt_json_num(v, NAN);
    }
    if (r->nsteps == r->capsteps) {
        r->capsteps = r->capsteps ? r->capsteps * 2 : 1024;
        r->steps = (step_rec *)xrealloc(r->steps, r->capsteps * sizeof(step_rec));
    }
    r->steps[r->nsteps++] = s;
    return 0;
}

static void add_event(run *r, const pt_json *o) {
    event_rec e;
    pt_sb d;
    size_t i;
    pt_sb_init(&d);
    pt_sb_add(&d, "%s", "");
    e.name = xstrdup(str_at(o, KEY(EVENT)));
    e.step = num_at(o, KEY(STEP));
    for (i = 0; i < pt_json_len(o); i++) {
        const char *key = pt_json_key(o, i);
        const pt_json *v = pt_json_at(o, i);
        if (strcmp(key, KEY(EVENT)) == 0 || strcmp(key, KEY(STEP)) == 0) continue;
        if (d.n) pt_sb_add(&d, ", ");
        pt_sb_add(&d, "%s=", key);
        if (pt_json_str(v)) pt_sb_add(&d, "%s", pt_json_str(v));
        else if (strcmp(key, "wall") == 0 && isfinite(pt_json_num(v, NAN))) pt_sb_add(&d, "%.2f", pt_json_num(v, NAN)); /* ptrun's Unix time */
        else json_text(&d, v);
        if (d.n > 300) {
            d.n = 300, d.s[300] = 0;
            pt_sb_add(&d, "...");
            break;
        }
    }
    if (d.oom) {
        fprintf(stderr, "ptreport: out of memory\n");
        exit(1);
    }
    e.detail = d.s;
    if (r->nevents == r->capevents) {
        r->capevents = r->capevents ? r->capevents * 2 : 64;
        r->events = (event_rec *)xrealloc(r->events, r->capevents * sizeof(event_rec));
    }
    r->events[r->nevents++] = e;
}

/* an eval event (a run's final evaluation, after the last step line): its val_loss belongs to the
   step line it follows, the last one, numbered one below the steps done */
static void add_eval(run *r, const pt_json *o) {
    step_rec *s = r->nsteps ? &r->steps[r->nsteps - 1] : NULL;
    double v = num_at(o, KEY(VAL_LOSS));
    if (s && isfinite(v) && num_at(o, KEY(STEP)) == s->step + 1 && !isfinite(s->f[F_VAL])) s->f[F_VAL] = v;
}

#define NOI LONG_MIN /* an integer key that is absent */

/* the failure a ptrun event of `stage` belongs to: the one of attempt `att` (the attempt that
   failed), else the newest one when the attempt is unknown on either side and it has only seen
   earlier stages, else a new one; NULL when that failure has this stage already (a repeated
   event: the first one counts) */
static failure *fail_for(run *r, long att, int stage) {
    failure *f;
    size_t i;
    int k;
    if (att != NOI)
        for (i = r->nfails; i-- > 0 && i + PTRUN_LOOKBACK >= r->nfails;)
            if (r->fails[i].attempt == att) return r->fails[i].have & stage ? NULL : &r->fails[i];
    if (r->nfails) {
        f = &r->fails[r->nfails - 1];
        if ((att == NOI || f->attempt == NOI) && f->have < stage) {
            if (att != NOI) f->attempt = att;
            return f;
        }
    }
    GROW(r->fails, r->nfails, r->capfails, 16);
    f = &r->fails[r->nfails++];
    memset(f, 0, sizeof *f);
    f->attempt = att;
    f->step = f->resume = f->rec_step = NAN;
    for (k = 0; k < 5; k++) f->wall[k] = NAN;
    f->latency = f->tear_s = f->recover_s = f->backoff = NAN;
    f->rank = f->restart = f->max_restarts = f->steps_lost = NOI;
    f->dp0 = f->acc0 = f->dp1 = f->tp1 = f->pp1 = f->acc1 = NOI;
    return f;
}

static void set_str(char **dst, const pt_json *o, const char *key) {
    if (!*dst) *dst = dup_at(o, key);
}

/* a ptrun_* event (line of path); -1 when a value is refused (reported) */
static int add_ptrun(run *r, const pt_json *o, const char *name, const char *path, long line) {
    long att, rank, restart, maxr, dp, dpf, acc, accf, tp, pp, lost, restarts, exitc;
    const struct {
        const char *key;
        long *dst;
        double lo;
    } ints[] = {{"attempt", &att, 0},      {"rank", &rank, 0}, {"restart", &restart, 0}, {"max_restarts", &maxr, 0},
                {"dp", &dp, 1},            {"dp_from", &dpf, 1}, {"accum", &acc, 1},      {"accum_from", &accf, 1},
                {"tp", &tp, 1},            {"pp", &pp, 1},     {"steps_lost", &lost, 0}, {"restarts", &restarts, 0},
                {"exit", &exitc, INT_LO}};
    double step = num_at(o, KEY(STEP)), wall = num_at(o, "wall");
    const char *ev = name + strlen(PTRUN_PREFIX);
    char why[200];
    size_t i;
    failure *f = NULL;
    for (i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        long v;
        int got = int_at(o, ints[i].key, ints[i].lo, INT_HI, &v, why, sizeof why);
        if (got < 0) {
            fprintf(stderr, "ptreport: %s:%ld: %s\n", path, line, why);
            return -1;
        }
        *ints[i].dst = got ? v : NOI;
    }
    r->nptrun++;
    if (strcmp(ev, "launch") == 0 || strcmp(ev, "relaunch") == 0) {
        launch_rec *l;
        GROW(r->launches, r->nlaunches, r->caplaunches, 16);
        l = &r->launches[r->nlaunches++];
        l->attempt = att, l->dp = dp, l->tp = tp, l->pp = pp, l->acc = acc;
        l->hosts = dup_at(o, "hosts");
    }
    if (strcmp(ev, "fault") == 0 && (f = fail_for(r, att, S_FAULT))) {
        f->wall[0] = wall, f->have |= S_FAULT;
        set_str(&f->kind, o, "kind");
    } else if (strcmp(ev, "detected") == 0 && (f = fail_for(r, att, S_DET))) {
        f->wall[1] = wall, f->have |= S_DET, f->latency = num_at(o, "latency_s");
        set_str(&f->what, o, "what");
        set_str(&f->detail, o, "detail");
    } else if (strcmp(ev, "teardown") == 0 && (f = fail_for(r, att, S_TEAR))) {
        f->wall[2] = wall, f->have |= S_TEAR, f->tear_s = num_at(o, "seconds");
    } else if (strcmp(ev, "relaunch") == 0 && (f = fail_for(r, att != NOI && att >= 1 ? att - 1 : NOI, S_REL))) {
        double rs = num_at(o, "resume_step");
        f->wall[3] = wall, f->have |= S_REL, f->backoff = num_at(o, "backoff_s");
        f->resume = isfinite(step) ? step : rs;
        f->restart = restart, f->max_restarts = maxr, f->dp0 = dpf, f->acc0 = accf;
        f->dp1 = dp, f->tp1 = tp, f->pp1 = pp, f->acc1 = acc;
        set_str(&f->hosts1, o, "hosts");
        return 0;
    } else if (strcmp(ev, "recovered") == 0 && (f = fail_for(r, att != NOI && att >= 1 ? att - 1 : NOI, S_REC))) {
        f->wall[4] = wall, f->have |= S_REC, f->recover_s = num_at(o, "recover_s"), f->steps_lost = lost, f->rec_step = step;
        return 0;
    } else if (strcmp(ev, "straggler") == 0) {
        straggler_rec *g;
        GROW(r->strag, r->nstrag, r->capstrag, 16);
        g = &r->strag[r->nstrag++];
        g->attempt = att, g->rank = rank, g->step = step;
        g->work_s = num_at(o, "work_s"), g->median_s = num_at(o, "median_s");
        g->host = dup_at(o, "host");
    } else if (strcmp(ev, "end") == 0 && !r->end.seen) {
        const pt_json *ok = pt_json_get(o, "ok");
        r->end.seen = 1;
        r->end.ok = pt_json_type(ok) == PT_JSON_BOOL ? pt_json_bool(ok, 0) : -1;
        r->end.restarts = restarts, r->end.steps_lost = lost, r->end.exit_code = exitc;
        r->end.time_lost_s = num_at(o, "time_lost_s"), r->end.step = step;
    }
    if (f) { /* fault, detected, teardown: where and when it failed (the first event that says) */
        if (!isfinite(f->step)) f->step = step;
        if (f->rank == NOI) f->rank = rank;
        set_str(&f->host, o, "host");
    }
    return 0;
}

static int read_log(const char *path, run *r) {
    FILE *f = fopen(path, "rb");
    char *line = NULL, err[600];
    size_t cap = 0;
    long n, lineno = 0;
    int cut;
    if (!f) {
        fprintf(stderr, "ptreport: cannot open %s: %s\n", path, strerror(errno));
        return -1;
    }
    while ((n = read_line(f, &line, &cap, &cut)) >= 0) {
        pt_json *o;
        const char *ev;
        lineno++;
        if (strspn(line, " \t\r") == (size_t)n) continue; /* blank line */
        o = pt_json_parse(line, (size_t)n, JSON_FLAGS, err, sizeof err);
        if (!o && cut) { /* the last line, without its '\n' and unreadable: what a run killed while writing it leaves */
            fprintf(stderr, "ptreport: warning: %s: line %ld is cut off (a killed run?); read the %ld lines before it\n", path, lineno, lineno - 1);
            lineno--;
            break;
        }
        if (!o || pt_json_type(o) != PT_JSON_OBJECT) {
            if (o) fprintf(stderr, "ptreport: %s:%ld: expected '{' (one JSON object per line), found '%c'\n", path, lineno, line[pt_json_offset(o)]);
            else fprintf(stderr, "ptreport: %s:%ld: %s\n", path, lineno, err);
            pt_json_free(o);
            free(line);
            fclose(f);
            return -1;
        }
        ev = str_at(o, KEY(EVENT));
        if (ev && strcmp(ev, KEY(RUN_START)) == 0 && !r->header) r->header = o;
        else {
            int bad = 0;
            if (ev) {
                add_event(r, o);
                if (strcmp(ev, KEY(EVAL)) == 0) add_eval(r, o);
                else if (strncmp(ev, PTRUN_PREFIX, strlen(PTRUN_PREFIX)) == 0) bad = add_ptrun(r, o, ev, path, lineno) != 0;
            } else if (isfinite(num_at(o, KEY(STEP)))) bad = add_step(r, o, path, lineno) != 0;
            pt_json_free(o);
            if (bad) {
                free(line);
                fclose(f);
                return -1;
            }
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

/* one event of the trace (byte at of text, the file path); -1 when a value is refused (reported) */
static int trace_event(trace *t, const pt_json *o, const char *path, const char *text, size_t at) {
    const char *ph = str_at(o, "ph");
    const pt_json *args = pt_json_get(o, "args");
    tev e;
    long pid = 0, tid = 0, mb = -1, step = -1;
    char why[200];
    int has_pid = int_at(o, "pid", INT_LO, INT_HI, &pid, why, sizeof why);
    if (has_pid >= 0 && ph && (ph[0] == 'X' || ph[0] == 'B' || ph[0] == 'E') &&
        (int_at(o, "tid", INT_LO, INT_HI, &tid, why, sizeof why) < 0 || int_at(args, "mb", -1, INT_HI, &mb, why, sizeof why) < 0 ||
         int_at(args, "step", -1, 9007199254740992.0, &step, why, sizeof why) < 0))
        has_pid = -1;
    if (has_pid < 0) {
        fprintf(stderr, "ptreport: %s:%ld: %s\n", path, line_of(text, at), why);
        return -1;
    }
    if (!ph || !has_pid) return 0;
    if (ph[0] == 'M') {
        const char *nm = str_at(o, "name"), *an = str_at(args, "name");
        if (nm && an && strcmp(nm, "process_name") == 0) {
            t->pids = (int *)xrealloc(t->pids, (t->npn + 1) * sizeof(int));
            t->pnames = (char **)xrealloc(t->pnames, (t->npn + 1) * sizeof(char *));
            t->pids[t->npn] = (int)pid;
            t->pnames[t->npn++] = xstrdup(an);
        }
        return 0;
    }
    if (ph[0] != 'X' && ph[0] != 'B' && ph[0] != 'E') return 0;
    memset(&e, 0, sizeof e);
    e.ts = num_at(o, "ts");
    e.dur = num_at(o, "dur");
    e.pid = (int)pid, e.tid = (int)tid, e.mb = (int)mb, e.step = step;
    copy_str(e.cat, sizeof e.cat, str_at(o, "cat"));
    copy_str(e.name, sizeof e.name, str_at(o, "name"));
    if (!isfinite(e.ts)) return 0;
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
    return 0;
}

/* the trace file's text; the JSON values in it are read one at a time, the brackets and commas
   around the events here */
typedef struct ttext {
    const char *path, *s;
    size_t len, pos;
} ttext;

static int tt_peek(ttext *x) {
    while (x->pos < x->len && strchr(" \t\r\n", x->s[x->pos])) x->pos++;
    return x->pos < x->len ? (unsigned char)x->s[x->pos] : -1;
}
static int tt_fail(const ttext *x, const char *expected) {
    int c = x->pos < x->len ? (unsigned char)x->s[x->pos] : -1;
    fprintf(stderr, "ptreport: %s:%ld: expected %s, found ", x->path, line_of(x->s, x->pos), expected);
    if (c < 0) fprintf(stderr, "the end of the file\n");
    else if (c >= 0x20 && c < 0x7f) fprintf(stderr, "'%c'\n", c);
    else fprintf(stderr, "byte 0x%02x\n", c);
    return -1;
}
/* the next JSON value (NULL: reported) */
static pt_json *tt_value(ttext *x) {
    char err[600];
    pt_json *v = pt_json_parse_next(x->s, x->len, &x->pos, JSON_FLAGS, err, sizeof err);
    if (!v) fprintf(stderr, "ptreport: %s:%ld: %s\n", x->path, line_of(x->s, x->pos), err);
    return v;
}

/* the events of the array at x->pos ('['); a missing final ']' is accepted (eof_ok), as Chrome does */
static int trace_array(ttext *x, trace *t, int eof_ok) {
    x->pos++;
    if (tt_peek(x) == ']') return x->pos++, 0;
    for (;;) {
        pt_json *o = tt_value(x);
        int c;
        if (!o) return -1;
        if (pt_json_type(o) == PT_JSON_OBJECT && trace_event(t, o, x->path, x->s, pt_json_offset(o)) != 0) {
            pt_json_free(o);
            return -1;
        }
        pt_json_free(o);
        c = tt_peek(x);
        if (c == ',') {
            x->pos++;
            if (tt_peek(x) < 0 && eof_ok) return 0;
            continue;
        }
        if (c == ']') return x->pos++, 0;
        if (c < 0 && eof_ok) return 0;
        return tt_fail(x, "',' or ']' in the event array");
    }
}

static int read_trace(const char *path, trace *t) {
    FILE *f = fopen(path, "rb");
    char *text = NULL;
    size_t cap = 0, n = 0, k;
    ttext x;
    int rc = 0, c;
    if (!f) {
        fprintf(stderr, "ptreport: cannot open %s: %s\n", path, strerror(errno));
        return -1;
    }
    do {
        if (cap - n < 65536) text = (char *)xrealloc(text, cap = cap ? 2 * cap : 1 << 20);
        n += k = fread(text + n, 1, cap - n, f);
    } while (k > 0);
    if (ferror(f)) {
        fprintf(stderr, "ptreport: %s: read error after %zu bytes\n", path, n);
        fclose(f);
        free(text);
        return -1;
    }
    fclose(f);
    x.path = path, x.s = text, x.len = n, x.pos = 0;
    c = tt_peek(&x);
    if (c == '[') rc = trace_array(&x, t, 1);
    else if (c == '{') { /* {"traceEvents": [...], other keys (skipped)} */
        x.pos++;
        for (c = tt_peek(&x); rc == 0 && c != '}'; c = tt_peek(&x)) {
            pt_json *key;
            if (c != '"') {
                rc = tt_fail(&x, "'\"' starting a key");
                break;
            }
            if (!(key = tt_value(&x))) {
                rc = -1;
                break;
            }
            if (tt_peek(&x) != ':') rc = tt_fail(&x, "':' after the key");
            else {
                x.pos++;
                if (strcmp(pt_json_str(key), "traceEvents") == 0 && tt_peek(&x) == '[') rc = trace_array(&x, t, 0);
                else {
                    pt_json *skip = tt_value(&x);
                    rc = skip ? 0 : -1;
                    pt_json_free(skip);
                }
            }
            pt_json_free(key);
            if (rc != 0) break;
            if ((c = tt_peek(&x)) == ',') x.pos++;
            else if (c != '}') rc = tt_fail(&x, "',' or '}' in the object");
        }
        if (rc == 0) {
            x.pos++;
            if (tt_peek(&x) >= 0) rc = tt_fail(&x, "the end of the file after the trace object");
        }
    } else rc = tt_fail(&x, "'{' or '[' starting a Chrome trace");
    free(text);
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

static void svg_begin(pt_sb *b, const char *id, const char *title, int w, int h) {
    pt_sb_add(b, "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"%s\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
                 "font-family=\"sans-serif\" font-size=\"12\">\n", id, w, h, w, h);
    pt_sb_add(b, "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"white\"/>\n", w, h);
    pt_sb_add(b, "<text x=\"12\" y=\"20\" font-size=\"15\" font-weight=\"bold\">");
    sb_esc(b, title);
    pt_sb_add(b, "</text>\n");
}

/* ticks are the multiples of the step inside [lo, hi] */
static double first_tick(const axis *a) { return ceil(a->lo / a->step - 1e-6) * a->step; }

/* frame, grid, ticks and labels of a plot area at (x0, y0, w, h); ay NULL: no y ticks */
static void svg_axes(pt_sb *b, const axis *ax, const axis *ay, const char *xlabel, const char *ylabel, int x0, int y0, int w,
                     int h) {
    double v;
    int i;
    pt_sb_add(b, "<g class=\"axes\" stroke=\"#ccc\" stroke-width=\"1\">\n");
    for (i = 0, v = ay ? first_tick(ay) : 1; ay && v <= ay->hi + ay->step * 1e-6 && i < 50; v = first_tick(ay) + ++i * ay->step) {
        double y = y0 + h - (v - ay->lo) / (ay->hi - ay->lo) * h;
        pt_sb_add(b, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\"/>\n", x0, y, x0 + w, y);
    }
    pt_sb_add(b, "</g>\n<g class=\"ticks\" fill=\"#333\">\n");
    for (i = 0, v = ay ? first_tick(ay) : 1; ay && v <= ay->hi + ay->step * 1e-6 && i < 50; v = first_tick(ay) + ++i * ay->step) {
        double y = y0 + h - (v - ay->lo) / (ay->hi - ay->lo) * h;
        pt_sb_add(b, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%.*f</text>\n", x0 - 6, y + 4, ay->decimals,
                  fabs(v) < ay->step * 1e-6 ? 0.0 : v);
    }
    for (i = 0, v = first_tick(ax); v <= ax->hi + ax->step * 1e-6 && i < 50; v = first_tick(ax) + ++i * ax->step) {
        double x = x0 + (v - ax->lo) / (ax->hi - ax->lo) * w;
        pt_sb_add(b, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#333\"/>\n", x, y0 + h, x, y0 + h + 5);
        pt_sb_add(b, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%.*f</text>\n", x, y0 + h + 18, ax->decimals,
                  fabs(v) < ax->step * 1e-6 ? 0.0 : v);
    }
    pt_sb_add(b, "</g>\n");
    pt_sb_add(b, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#333\"/>\n", x0, y0, w, h);
    pt_sb_add(b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">", x0 + w / 2, y0 + h + 38);
    sb_esc(b, xlabel);
    pt_sb_add(b, "</text>\n<text transform=\"translate(16 %d) rotate(-90)\" text-anchor=\"middle\">", y0 + h / 2);
    sb_esc(b, ylabel);
    pt_sb_add(b, "</text>\n");
}

/* legend entries in a row under the title; returns the x after the last one */
static int svg_legend(pt_sb *b, int x, int y, const char *label, const char *color, int box) {
    if (box) pt_sb_add(b, "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"%s\" stroke=\"#555\" stroke-width=\"0.5\"/>\n", x, y - 10, color);
    else pt_sb_add(b, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"2.5\"/>\n", x, y - 4, x + 16, y - 4, color);
    pt_sb_add(b, "<text x=\"%d\" y=\"%d\">", x + 20, y);
    sb_esc(b, label);
    pt_sb_add(b, "</text>\n");
    return x + 20 + 7 * (int)strlen(label) + 16;
}

typedef struct series {
    const char *name, *color;
    const double *x, *y; /* y[i] NaN = no point */
    size_t n;
    size_t stride;       /* in doubles between consecutive x and y values */
    int dots;            /* circles at the points (few points) */
    const unsigned char *redone; /* per point: 1 = a step done again later (after a restart or a rollback); NULL: none */
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
                                         {"replica_mismatch", "#8c0000"}, {"run_start", "#1f77b4"},
                                         {"ptrun_fault", "#d62728"}, {"ptrun_detected", "#d62728"}, {"ptrun_relaunch", RESTART_COLOR},
                                         {"ptrun_recovered", "#4e79a7"}, {"ptrun_end", RESTART_COLOR}};
    size_t i;
    for (i = 0; i < sizeof map / sizeof map[0]; i++)
        if (strcmp(name, map[i][0]) == 0) return map[i][1];
    return "#7f7f7f";
}

/* the change of layout at a relaunch, for a label: "dp 2→1, accum 1→2", "same layout", "" (unknown) */
static void layout_change(char *buf, size_t n, const failure *f) {
    size_t k = 0;
    buf[0] = 0;
    if (f->dp0 != NOI && f->dp1 != NOI && f->dp0 != f->dp1) k += (size_t)snprintf(buf + k, n - k, "dp %ld\342\206\222%ld", f->dp0, f->dp1);
    if (k < n && f->acc0 != NOI && f->acc1 != NOI && f->acc0 != f->acc1)
        k += (size_t)snprintf(buf + k, n - k, "%saccum %ld\342\206\222%ld", k ? ", " : "", f->acc0, f->acc1);
    if (k == 0 && f->dp0 != NOI && f->dp1 != NOI) snprintf(buf, n, "same layout");
}

static const char *failure_kind(const failure *f) { return f->kind ? f->kind : f->what ? f->what : "failure"; }

/* a rotated label at the top of the plot, right of the line at x (clear of it) */
static void top_label(pt_sb *b, double x, const char *color, int bold, const char *text) {
    pt_sb_add(b, "<text x=\"%.1f\" y=\"%d\" font-size=\"10\"%s fill=\"%s\" transform=\"rotate(-90 %.1f %d)\" text-anchor=\"end\">", x + 11,
              MT + 4, bold ? " font-weight=\"bold\"" : "", color, x + 11, MT + 4);
    sb_esc(b, text);
    pt_sb_add(b, "</text>\n");
}

/* the failures of a supervised run on a chart against the step: the steps done twice shaded (from the
   resume step to the failure), the failure a dotted red line, the restart a solid red one, labelled;
   the x of every label into lab (returns how many) */
static int draw_restarts(pt_sb *b, const axis *ax, const run *r, double *lab, int maxlab) {
    size_t i;
    int nlab = 0, pass, j;
    for (pass = 0; pass < 3; pass++) /* the shading; the restarts; the failures (labelled where no restart label is) */
        for (i = 0; i < r->nfails && i < MAX_MARKERS; i++) {
            const failure *f = &r->fails[i];
            double xs = f->resume, xf = f->step;
            char text[160], chg[96];
            int fin_s = isfinite(xs) && xs >= ax->lo && xs <= ax->hi && (f->have & S_REL), fin_f = isfinite(xf) && xf >= ax->lo && xf <= ax->hi;
            if (pass == 0 && isfinite(xs) && isfinite(xf) && xs < xf && xf >= ax->lo && xs <= ax->hi) {
                double x0 = xpx(ax, xs > ax->lo ? xs : ax->lo), x1 = xpx(ax, xf < ax->hi ? xf : ax->hi);
                pt_sb_add(b, "<rect class=\"redone\" x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"#d62728\" fill-opacity=\"0.08\">"
                             "<title>steps %.0f to %.0f: done, lost at the failure, done again</title></rect>\n",
                          x0, MT, x1 - x0, PH, xs, xf - 1);
            }
            if (pass == 2 && fin_f) {
                double x = xpx(ax, xf);
                pt_sb_add(b, "<line class=\"failure\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#d62728\" stroke-width=\"1.5\" "
                             "stroke-dasharray=\"2 2\"><title>step %.0f: ", x, MT, x, MT + PH, xf);
                sb_esc(b, failure_kind(f));
                if (f->rank != NOI) pt_sb_add(b, " of rank %ld", f->rank);
                if (f->host) {
                    pt_sb_add(b, " on ");
                    sb_esc(b, f->host);
                }
                pt_sb_add(b, "</title></line>\n");
                for (j = 0; j < nlab && fabs(lab[j] - x) >= 12; j++) {
                }
                if (j == nlab && nlab < maxlab) {
                    lab[nlab++] = x;
                    snprintf(text, sizeof text, "failure (%s)", failure_kind(f));
                    top_label(b, x, "#d62728", 0, text);
                }
            }
            if (pass == 1 && fin_s) {
                double x = xpx(ax, xs);
                long no = f->restart != NOI ? f->restart : (long)i + 1;
                layout_change(chg, sizeof chg, f);
                if (chg[0]) snprintf(text, sizeof text, "restart %ld (%s)", no, chg);
                else snprintf(text, sizeof text, "restart %ld", no);
                pt_sb_add(b, "<line class=\"restart\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"" RESTART_COLOR "\" stroke-width=\"2\"><title>step %.0f: ",
                          x, MT, x, MT + PH, xs);
                sb_esc(b, text);
                pt_sb_add(b, "</title></line>\n");
                for (j = 0; j < nlab && fabs(lab[j] - x) >= 12; j++) {
                }
                if (j == nlab && nlab < maxlab) {
                    top_label(b, x, RESTART_COLOR, 1, text);
                    lab[nlab++] = x;
                }
            }
        }
    return nlab;
}

/* a dotted legend entry */
static int svg_legend_dotted(pt_sb *b, int x, int y, const char *label, const char *color) {
    pt_sb_add(b, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"1.5\" stroke-dasharray=\"2 2\"/>\n", x, y - 4, x + 16, y - 4, color);
    pt_sb_add(b, "<text x=\"%d\" y=\"%d\">", x + 20, y);
    sb_esc(b, label);
    pt_sb_add(b, "</text>\n");
    return x + 20 + 7 * (int)strlen(label) + 16;
}

/* a faded, dashed legend entry */
static int svg_legend_faded(pt_sb *b, int x, int y, const char *label, const char *color) {
    pt_sb_add(b, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"2\" stroke-opacity=\"0.4\" stroke-dasharray=\"4 2\"/>\n",
              x, y - 4, x + 16, y - 4, color);
    pt_sb_add(b, "<text x=\"%d\" y=\"%d\">", x + 20, y);
    sb_esc(b, label);
    pt_sb_add(b, "</text>\n");
    return x + 20 + 7 * (int)strlen(label) + 16;
}

/* a series whose steps were partly done twice (a restart resumed at an earlier step): the points kept
   (not done again later) as one polyline named after the series, rising in step; each run of points
   done again later faded and dashed, from the kept point before it, as its own polyline
   ("NAME (done again)"), cut where the step goes back, so no line runs back to the resume step */
static void draw_redone(pt_sb *b, const axis *ax, const axis *ay, const series *s, const size_t *idx, size_t m) {
    size_t i, kept = 0;
    int open = 0;
    for (i = 0; i < m; i++) kept += !s->redone[idx[i]];
    if (kept) {
        size_t j = 0;
        pt_sb_add(b, "<polyline class=\"series\" data-series=\"%s\" data-points=\"%zu\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"",
                  s->name, kept, s->color);
        for (i = 0; i < m; i++)
            if (!s->redone[idx[i]]) pt_sb_add(b, "%s%.1f,%.1f", j++ ? " " : "", xpx(ax, SX(s, idx[i])), ypx(ay, SY(s, idx[i])));
        pt_sb_add(b, "\"/>\n");
    }
    for (i = 0; i < m; i++) {
        size_t p = idx[i];
        if (!s->redone[p]) {
            if (open) pt_sb_add(b, "\"/>\n");
            open = 0;
            continue;
        }
        if (open && SX(s, p) <= SX(s, idx[i - 1])) pt_sb_add(b, "\"/>\n"), open = 0;
        if (!open) {
            pt_sb_add(b, "<polyline class=\"series redone\" data-series=\"%s (done again)\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" "
                         "stroke-opacity=\"0.5\" stroke-dasharray=\"4 2\" points=\"", s->name, s->color);
            if (i > 0 && !s->redone[idx[i - 1]] && SX(s, idx[i - 1]) < SX(s, p))
                pt_sb_add(b, "%.1f,%.1f ", xpx(ax, SX(s, idx[i - 1])), ypx(ay, SY(s, idx[i - 1])));
            open = 1;
        } else pt_sb_add(b, " ");
        pt_sb_add(b, "%.1f,%.1f", xpx(ax, SX(s, p)), ypx(ay, SY(s, p)));
    }
    if (open) pt_sb_add(b, "\"/>\n");
    if (s->dots && m <= 100)
        for (i = 0; i < m; i++)
            pt_sb_add(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"%s\"%s/>\n", xpx(ax, SX(s, idx[i])), ypx(ay, SY(s, idx[i])), s->color,
                      s->redone[idx[i]] ? " fill-opacity=\"0.35\"" : "");
}

/* a line chart of ns series against the step; events as vertical markers when given */
static int chart_lines(pt_sb *b, const char *id, const char *title, const char *ylabel, int ykind, int zero, series *s, int ns,
                       const event_rec *ev, size_t nev, const run *marks) {
    double xlo = HUGE_VAL, xhi = -HUGE_VAL, ylo = HUGE_VAL, yhi = -HUGE_VAL, div;
    const char *uname;
    char ylab[128];
    size_t i, *idx, total = 0;
    int k, lx, nlab = 0;
    double lab[MAX_MARKERS];
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
    for (k = 0; k < ns && !(s[k].n && s[k].redone); k++) {
    }
    if (k < ns) lx = svg_legend_faded(b, lx, 40, "lost at a failure, redone", s[k].color);
    if (marks && marks->nfails) {
        nlab = draw_restarts(b, &ax, marks, lab, (int)(sizeof lab / sizeof lab[0]));
        lx = svg_legend(b, lx, 40, "restart", RESTART_COLOR, 0);
        lx = svg_legend_dotted(b, lx, 40, "failure", "#d62728");
    }
    if (ev && nev) {
        size_t drawn = 0, nplain = 0;
        double last_label = -1e9; /* events a few pixels apart share one label (the first one's) */
        for (i = 0; i < nev; i++) nplain += strncmp(ev[i].name, PTRUN_PREFIX, strlen(PTRUN_PREFIX)) != 0;
        for (i = 0; i < nev && drawn < MAX_MARKERS; i++) {
            double x;
            int j;
            if (!isfinite(ev[i].step) || ev[i].step < ax.lo || ev[i].step > ax.hi) continue;
            if (strncmp(ev[i].name, PTRUN_PREFIX, strlen(PTRUN_PREFIX)) == 0) continue; /* the supervisor's: drawn above */
            x = xpx(&ax, ev[i].step);
            for (j = 0; j < nlab && fabs(lab[j] - x) >= 12; j++) {
            }
            if (j < nlab) last_label = x; /* a restart or failure label is there */
            pt_sb_add(b, "<line class=\"event\" data-event=\"");
            sb_esc(b, ev[i].name);
            pt_sb_add(b, "\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"%s\" stroke-dasharray=\"4 3\"><title>step %.0f: ", x,
                      MT, x, MT + PH, event_color(ev[i].name), ev[i].step);
            sb_esc(b, ev[i].name);
            pt_sb_add(b, "</title></line>\n");
            if (nplain <= 40 && x - last_label >= 12) {
                last_label = x;
                pt_sb_add(b, "<text x=\"%.1f\" y=\"%d\" font-size=\"10\" fill=\"%s\" transform=\"rotate(-90 %.1f %d)\" text-anchor=\"end\">",
                          x + 3, MT + 4, event_color(ev[i].name), x + 3, MT + 4);
                sb_esc(b, ev[i].name);
                pt_sb_add(b, "</text>\n");
            }
            drawn++;
        }
        lx = svg_legend(b, lx, 40, "events", "#7f7f7f", 0);
    }
    idx = (size_t *)xrealloc(NULL, (2 * LINE_BUCKETS + 1 > total ? 2 * LINE_BUCKETS + 1 : total) * sizeof(size_t));
    for (k = 0; k < ns; k++) {
        size_t m = s[k].n ? downsample(&s[k], idx) : 0;
        if (!m) continue;
        if (s[k].redone) {
            draw_redone(b, &ax, &ay, &s[k], idx, m);
            continue;
        }
        pt_sb_add(b, "<polyline class=\"series\" data-series=\"%s\" data-points=\"%zu\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"",
                  s[k].name, m, s[k].color);
        for (i = 0; i < m; i++) pt_sb_add(b, "%s%.1f,%.1f", i ? " " : "", xpx(&ax, SX(&s[k], idx[i])), ypx(&ay, SY(&s[k], idx[i])));
        pt_sb_add(b, "\"/>\n");
        if (s[k].dots && m <= 100)
            for (i = 0; i < m; i++)
                pt_sb_add(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"%s\"/>\n", xpx(&ax, SX(&s[k], idx[i])),
                          ypx(&ay, SY(&s[k], idx[i])), s[k].color);
    }
    free(idx);
    pt_sb_add(b, "</svg>\n");
    return 1;
}

/* step time stacked per step (bucket means for long runs) */
static const char *time_names[] = {"compute", "comm (exposed)", "bubble", "data wait", "checkpoint", "other (validation, ...)"};
static const char *time_colors[] = {"#4c9be8", "#f28e2b", "#d3d3d3", "#59a14f", "#8c564b", "#bab0ac"};

static int chart_time(pt_sb *b, const run *r) {
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
            pt_sb_add(b, "<rect class=\"bar\" x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\"/>\n", x0, y1,
                      x1 - x0 > 1.5 ? x1 - x0 - 0.5 : x1 - x0, y0 - y1, time_colors[c]);
        }
    }
    pt_sb_add(b, "</svg>\n");
    free(mean);
    free(bx0);
    free(bx1);
    return 1;
}

/* peak memory per rank as bars (from mem_rank_bytes), else mem_peak_bytes over the steps */
static int chart_memory(pt_sb *b, const run *r) {
    double ymax = 0, div;
    const char *uname;
    char ylab[64];
    int k, n = r->nranks_mem;
    axis ax, ay;
    for (k = 0; k < n; k++)
        if (r->mem_rank[k] > ymax) ymax = r->mem_rank[k];
    if (n == 0 || !(ymax > 0)) {
        series s;
        if (!r->nsteps) return 0;
        memset(&s, 0, sizeof s);
        s.name = "peak over ranks", s.color = "#e15759", s.x = &r->steps[0].step, s.y = &r->steps[0].f[F_MEM];
        s.n = r->nsteps, s.stride = sizeof(step_rec) / sizeof(double);
        return r->nsteps ? chart_lines(b, "memory", "Peak memory", "memory", U_BYTES, 1, &s, 1, NULL, 0, NULL) : 0;
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
        pt_sb_add(b, "<rect class=\"bar\" x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"#e15759\"><title>rank %d: %.0f bytes</title></rect>\n",
                  x0, ypx(&ay, v), x1 - x0, ypx(&ay, 0) - ypx(&ay, v), k, v);
    }
    pt_sb_add(b, "</svg>\n");
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

static int chart_timeline(pt_sb *b, const trace *t, long want, long *chosen, size_t *drawn, int *nrows) {
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
        pt_sb_add(b, "<rect class=\"row\" data-rank=\"%d\" x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%.1f\" fill=\"%s\"/>\n", ranks[r], ML,
                  y, PW, rowh, has_bubble ? "white" : "#f4f4f4");
        if (r % label_every == 0) { /* thin rows: a label every few rows */
            const char *pn = pi < (int)t->npn ? t->pnames[pi] : NULL, *par = pn ? strstr(pn, " (") : NULL;
            if (par && rowh >= 24) { /* "rank 3 (dp 1 tp 0 pp 1)": the name, its coordinates below in small type */
                char head[64];
                size_t len = (size_t)(par - pn) < sizeof head - 1 ? (size_t)(par - pn) : sizeof head - 1;
                memcpy(head, pn, len), head[len] = 0;
                pt_sb_add(b, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">", ML - 6, y + rowh / 2 - 1);
                sb_esc(b, head);
                pt_sb_add(b, "</text>\n<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\" font-size=\"8\" fill=\"#555\">", ML - 6, y + rowh / 2 + 9);
                sb_esc(b, par + 1);
            } else {
                pt_sb_add(b, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">", ML - 6, y + rowh / 2 + 4);
                if (pn) sb_esc(b, pn);
                else pt_sb_add(b, "rank %d", ranks[r]);
            }
            pt_sb_add(b, "</text>\n");
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
        pt_sb_add(b, "<rect class=\"ev\" data-cat=\"");
        sb_esc(b, cat);
        pt_sb_add(b, "\" x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"%s\" stroke=\"white\" stroke-width=\"0.5\"><title>rank %d ",
                  x0, y, w > 0.3 ? w : 0.3, hh, cat_color(cat), e->pid);
        sb_esc(b, e->name[0] ? e->name : cat);
        if (e->mb >= 0) pt_sb_add(b, " mb %d", e->mb);
        pt_sb_add(b, ": %.3f ms</title></rect>\n", e->dur / 1e3);
        if (e->mb >= 0 && main_lane && hh >= 11) {
            char num[16];
            int len = snprintf(num, sizeof num, "%d", e->mb);
            if (w >= 7.0 * len + 4)
                pt_sb_add(b, "<text class=\"mb\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"11\" fill=\"white\">%s</text>\n",
                          x0 + w / 2, y + hh / 2 + 4, num);
        }
    }
    lx = ML;
    qsort(cats, (size_t)ncats, sizeof cats[0], cmp_cat);
    for (r = 0; r < ncats; r++) lx = svg_legend(b, lx, 40, cats[r], cat_color(cats[r]), 1);
    if (!has_bubble) svg_legend(b, lx, 40, "idle (bubble)", "#f4f4f4", 1);
    pt_sb_add(b, "</svg>\n");
    free(ranks);
    free(sel);
    return 1;
}

/* ------------------------------------------------------------------ the page */

static int write_file(const char *dir, const char *name, const pt_sb *b) {
    char path[4096];
    FILE *f;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (b->oom) {
        fprintf(stderr, "ptreport: out of memory for %s\n", path);
        return -1;
    }
    f = fopen(path, "wb");
    if (!f || fwrite(b->s, 1, b->n, f) != b->n || fclose(f) != 0) {
        fprintf(stderr, "ptreport: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    printf("wrote %s (%zu bytes)\n", path, b->n);
    return 0;
}

/* config rows: nested objects flattened as a.b.c */
static void config_rows(pt_sb *h, const char *prefix, const pt_json *v) {
    size_t i;
    if (pt_json_type(v) == PT_JSON_OBJECT) {
        for (i = 0; i < pt_json_len(v); i++) {
            char key[256];
            snprintf(key, sizeof key, "%s%s%s", prefix, prefix[0] ? "." : "", pt_json_key(v, i));
            config_rows(h, key, pt_json_at(v, i));
        }
        return;
    }
    pt_sb_add(h, "<tr><th>");
    sb_esc(h, prefix);
    pt_sb_add(h, "</th><td>");
    if (pt_json_str(v)) sb_esc(h, pt_json_str(v));
    else {
        pt_sb tmp;
        pt_sb_init(&tmp);
        json_text(&tmp, v);
        sb_esc(h, tmp.s ? tmp.s : "");
        pt_sb_free(&tmp);
    }
    pt_sb_add(h, "</td></tr>\n");
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void summary_row(pt_sb *h, const char *name, const char *value) {
    pt_sb_add(h, "<tr><th>");
    sb_esc(h, name);
    pt_sb_add(h, "</th><td>");
    sb_esc(h, value);
    pt_sb_add(h, "</td></tr>\n");
}

static void summary(pt_sb *h, const run *r) {
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
    pt_sb_add(h, "<table class=\"kv\">\n");
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
    if (r->nptrun) { /* a supervised run (tools/ptrun) */
        size_t nrel = 0;
        for (i = 0; i < r->nfails; i++) nrel += (r->fails[i].have & S_REL) != 0;
        k = snprintf(v, sizeof v, "%ld", r->end.seen && r->end.restarts != NOI ? r->end.restarts : (long)nrel);
        if (r->end.seen && r->end.steps_lost != NOI) k += snprintf(v + k, sizeof v - (size_t)k, ", %ld steps lost", r->end.steps_lost);
        if (r->end.seen && isfinite(r->end.time_lost_s)) k += snprintf(v + k, sizeof v - (size_t)k, ", %.1f s lost", r->end.time_lost_s);
        if (r->end.seen && r->end.ok >= 0) snprintf(v + k, sizeof v - (size_t)k, "; %s", r->end.ok ? "finished ok" : "failed");
        summary_row(h, "restarts", v);
    }
    snprintf(v, sizeof v, "%zu", r->nevents);
    summary_row(h, "events", v);
    pt_sb_add(h, "</table>\n");
    free(tok);
    free(cnt);
}

/* ------------------------------------------------------------------ failures and restarts (tools/ptrun) */

#define MAX_FAIL_ROWS 40 /* failures.svg draws at most this many rows (the table lists them all) */

/* when each stage of a failure happened, in seconds from its origin: the fault's own stamp, else the
   detection (*from_det = 1); NaN where unknown. Missing stamps are filled from the durations the
   events carry (latency_s, the teardown's seconds, recover_s) */
static void failure_times(const failure *f, double a[5], int *from_det) {
    double t0 = isfinite(f->wall[0]) ? f->wall[0] : f->wall[1];
    int k;
    *from_det = !isfinite(f->wall[0]);
    for (k = 0; k < 5; k++) a[k] = f->wall[k] - t0;
    if (!isfinite(t0)) { /* no stamp of either: the durations alone */
        if (isfinite(f->latency)) a[0] = 0, *from_det = 0;
        else if (f->have & S_DET) a[1] = 0;
    }
    if (!isfinite(a[1]) && isfinite(a[0]) && isfinite(f->latency)) a[1] = a[0] + f->latency;
    if (!isfinite(a[2]) && isfinite(a[1]) && isfinite(f->tear_s)) a[2] = a[1] + f->tear_s;
    if (!isfinite(a[4]) && isfinite(f->recover_s)) a[4] = (isfinite(a[0]) ? a[0] : a[1]) + f->recover_s;
    for (k = 0; k < 5; k++)
        if (!isfinite(a[k]) || fabs(a[k]) > 1e9) a[k] = NAN; /* absurd stamps are not drawn */
}

/* the launch of attempt att (its layout), NULL when not in the log */
static const launch_rec *launch_of(const run *r, long att) {
    size_t i;
    if (att == NOI) return NULL;
    for (i = r->nlaunches; i-- > 0 && i + PTRUN_LOOKBACK >= r->nlaunches;)
        if (r->launches[i].attempt == att) return &r->launches[i];
    return NULL;
}

/* "dp 2 tp 1 pp 2 accum 1 (hosts a,b)"; parts that are unknown are left out */
static void layout_text(pt_sb *b, long dp, long tp, long pp, long acc, const char *hosts) {
    size_t n0 = b->n;
    if (dp != NOI) pt_sb_add(b, "dp %ld", dp);
    if (tp != NOI) pt_sb_add(b, "%stp %ld", b->n > n0 ? " " : "", tp);
    if (pp != NOI) pt_sb_add(b, "%spp %ld", b->n > n0 ? " " : "", pp);
    if (acc != NOI) pt_sb_add(b, "%saccum %ld", b->n > n0 ? " " : "", acc);
    if (hosts) {
        pt_sb_add(b, "%s(hosts ", b->n > n0 ? " " : "");
        sb_esc(b, hosts);
        pt_sb_add(b, ")");
    }
    if (b->n == n0) pt_sb_add(b, "?");
}

/* the layout before and after a failure: before from the failed attempt's launch, dp and accum from
   the relaunch's dp_from and accum_from where it has them */
static void layout_before_after(pt_sb *b, const run *r, const failure *f) {
    const launch_rec *l = launch_of(r, f->attempt);
    long dp = f->dp0 != NOI ? f->dp0 : l ? l->dp : NOI, acc = f->acc0 != NOI ? f->acc0 : l ? l->acc : NOI;
    layout_text(b, dp, l ? l->tp : NOI, l ? l->pp : NOI, acc, l ? l->hosts : NULL);
    pt_sb_add(b, " \342\206\222 ");
    if (f->have & S_REL) layout_text(b, f->dp1, f->tp1, f->pp1, f->acc1, f->hosts1);
    else pt_sb_add(b, "(no relaunch)");
}

/* the layout for the chart: the one before in full, after it only what changed: "dp 2 tp 1 pp 2 accum 1
   → dp 1 accum 2 · hosts a,b → a", or "... (unchanged)" */
static void layout_short(pt_sb *b, const run *r, const failure *f) {
    const launch_rec *l = launch_of(r, f->attempt);
    long before[4], after[4];
    const char *names[4] = {"dp", "tp", "pp", "accum"}, *h0 = l ? l->hosts : NULL;
    size_t n0 = b->n;
    int k, changed = 0;
    before[0] = f->dp0 != NOI ? f->dp0 : l ? l->dp : NOI, before[1] = l ? l->tp : NOI, before[2] = l ? l->pp : NOI;
    before[3] = f->acc0 != NOI ? f->acc0 : l ? l->acc : NOI;
    after[0] = f->dp1, after[1] = f->tp1, after[2] = f->pp1, after[3] = f->acc1;
    for (k = 0; k < 4; k++)
        if (before[k] != NOI) pt_sb_add(b, "%s%s %ld", b->n > n0 ? " " : "", names[k], before[k]);
    if (!(f->have & S_REL)) return;
    for (k = 0; k < 4; k++)
        if (after[k] != NOI && after[k] != before[k]) {
            pt_sb_add(b, "%s%s %ld", changed++ ? " " : b->n > n0 ? " \342\206\222 " : "\342\206\222 ", names[k], after[k]);
        }
    if (!changed && b->n > n0) pt_sb_add(b, " (unchanged)");
    if (h0 || f->hosts1) {
        pt_sb_add(b, "%shosts ", b->n > n0 ? " \302\267 " : "");
        sb_esc(b, h0 ? h0 : "?");
        if (f->hosts1 && (!h0 || strcmp(h0, f->hosts1) != 0)) {
            pt_sb_add(b, " \342\206\222 ");
            sb_esc(b, f->hosts1);
        }
    }
}

/* "rank 3@b" */
static void where_text(pt_sb *b, const failure *f) {
    if (f->rank != NOI) pt_sb_add(b, "rank %ld", f->rank);
    if (f->host) {
        pt_sb_add(b, f->rank != NOI ? "@" : "host ");
        sb_esc(b, f->host);
    }
}

static void dur_text(char *buf, size_t n, double s) { snprintf(buf, n, s < 99.995 ? "%.2f s" : s < 999.95 ? "%.1f s" : "%.0f s", s); }

static const char *const stage_names[5] = {"fault", "detected", "torn down", "relaunched", "recovered (first step)"};
static const char *const stage_colors[5] = {"#000000", "#f28e2b", "#9c755f", "#bab0ac", "#4e79a7"};

/* failures.svg: a row per failure, a bar from its fault (or detection) through detection, teardown,
   relaunch and the first step after it, each part labelled with its duration */
static int chart_failures(pt_sb *b, const run *r) {
    const double rowh = 86, y0 = MT + 6;
    size_t i, nrows = r->nfails < MAX_FAIL_ROWS ? r->nfails : MAX_FAIL_ROWS;
    double tmax = 0, a[5], h;
    int k, lx, from_det, any_det = 0;
    axis ax;
    if (!nrows) return 0;
    for (i = 0; i < nrows; i++) {
        failure_times(&r->fails[i], a, &from_det);
        any_det |= from_det;
        for (k = 0; k < 5; k++)
            if (a[k] > tmax) tmax = a[k];
    }
    ax = make_axis(0, tmax * 1.2, 1, 1, 0); /* room right of the bars for the time to recover */
    h = y0 + rowh * (double)nrows + MB + (r->nfails > nrows ? 14 : 0);
    svg_begin(b, "failures", "Failures and restarts", W, (int)h);
    svg_axes(b, &ax, NULL, any_det ? "seconds from the fault (* from its detection: no fault stamp)" : "seconds from the fault", "", ML, (int)y0, PW,
             (int)(rowh * (double)nrows));
    { /* vertical grid lines */
        double v;
        int n;
        pt_sb_add(b, "<g stroke=\"#eee\">\n");
        for (n = 1, v = first_tick(&ax) + ax.step; v < ax.hi - ax.step * 1e-6 && n < 50; v = first_tick(&ax) + ++n * ax.step)
            pt_sb_add(b, "<line x1=\"%.1f\" y1=\"%.0f\" x2=\"%.1f\" y2=\"%.0f\"/>\n", xpx(&ax, v), y0 + 1, xpx(&ax, v), y0 + rowh * (double)nrows - 1);
        pt_sb_add(b, "</g>\n");
    }
    lx = 12;
    for (k = 1; k < 5; k++) lx = svg_legend(b, lx, 40, k == 1 ? "until detected" : k == 2 ? "teardown" : k == 3 ? "until relaunched" : "until the first step",
                                          stage_colors[k], 1);
    lx = svg_legend(b, lx, 40, "stage reached", "#333", 0);
    for (i = 0; i < nrows; i++) {
        const failure *f = &r->fails[i];
        double y = y0 + rowh * (double)i, end1 = -1e9, end2 = -1e9, prev = NAN;
        char text[64];
        int prevk = -1, line2;
        pt_sb line;
        failure_times(f, a, &from_det);
        if (i) pt_sb_add(b, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ccc\"/>\n", ML, y, ML + PW, y);
        pt_sb_add(b, "<g class=\"failure-row\" data-attempt=\"%ld\">\n", f->attempt != NOI ? f->attempt : -1L);
        pt_sb_add(b, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\" font-weight=\"bold\">failure %zu</text>\n", ML - 6, y + 40, i + 1);
        /* line 1: what failed where; line 2: the layout and the cost */
        pt_sb_init(&line);
        if (f->attempt != NOI) pt_sb_add(&line, "attempt %ld \302\267 ", f->attempt);
        sb_esc(&line, failure_kind(f));
        if (f->kind && f->what) {
            pt_sb_add(&line, ", seen as ");
            sb_esc(&line, f->what);
        }
        if (f->rank != NOI || f->host) pt_sb_add(&line, " \302\267 "), where_text(&line, f);
        if (isfinite(f->step)) pt_sb_add(&line, " \302\267 step %.0f", f->step);
        if (from_det) pt_sb_add(&line, " *");
        pt_sb_add(b, "<text class=\"row-label\" x=\"%d\" y=\"%.1f\" font-weight=\"bold\">%s</text>\n", ML + 6, y + 16, line.s ? line.s : "");
        line.n = 0;
        if (line.s) line.s[0] = 0;
        layout_short(&line, r, f);
        if (f->have & S_REL) {
            if (f->restart != NOI) pt_sb_add(&line, "%srestart %ld", line.n ? " \302\267 " : "", f->restart);
            if (f->restart != NOI && f->max_restarts != NOI) pt_sb_add(&line, " of %ld", f->max_restarts);
            if (isfinite(f->resume)) pt_sb_add(&line, "%sfrom step %.0f", line.n ? " " : "", f->resume);
        }
        if (f->steps_lost != NOI) pt_sb_add(&line, "%s%ld step%s lost", line.n ? " \302\267 " : "", f->steps_lost, f->steps_lost == 1 ? "" : "s");
        pt_sb_add(b, "<text class=\"row-layout\" x=\"%d\" y=\"%.1f\" font-size=\"11\" fill=\"#444\">%s</text>\n", ML + 6, y + 30, line.s ? line.s : "");
        pt_sb_free(&line);
        /* the bar: a segment up to each stage reached, coloured by that stage */
        for (k = 0; k < 5; k++) {
            double x0, x1, w;
            if (!isfinite(a[k])) continue;
            if (prevk >= 0 && a[k] >= prev) {
                x0 = xpx(&ax, prev), x1 = xpx(&ax, a[k]), w = x1 - x0;
                dur_text(text, sizeof text, a[k] - prev);
                pt_sb_add(b, "<rect class=\"stage\" data-stage=\"%s\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"16\" fill=\"%s\"><title>%s \342\206\222 %s: %s</title></rect>\n",
                          stage_names[k], x0, y + 38, w > 0.5 ? w : 0.5, stage_colors[k], stage_names[prevk], stage_names[k], text);
                if (w >= 6.2 * (double)strlen(text) + 6)
                    pt_sb_add(b, "<text class=\"dur\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"11\" fill=\"%s\">%s</text>\n", x0 + w / 2,
                              y + 50, k == 3 ? "#222" : "white", text);
                else { /* below the bar, on a second line where the one before is in the way */
                    double tw = 6.2 * (double)strlen(text), cx = x0 + w / 2;
                    if (cx - tw / 2 < ML + 2) cx = ML + 2 + tw / 2;
                    line2 = cx - tw / 2 < end1 + 4 && cx - tw / 2 >= end2 + 4;
                    if (cx - tw / 2 < end1 + 4 && !line2) cx = end1 + 4 + tw / 2; /* both lines taken: after the first's */
                    pt_sb_add(b, "<text class=\"dur\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"11\" fill=\"%s\">%s</text>\n", cx,
                              y + (line2 ? 80 : 67), k == 1 ? "#c46a10" : k == 3 ? "#777" : stage_colors[k], text);
                    *(line2 ? &end2 : &end1) = cx + tw / 2;
                }
            }
            prev = a[k], prevk = k;
        }
        for (k = 0; k < 5; k++) /* a tick at each stage reached */
            if (isfinite(a[k]))
                pt_sb_add(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333\" stroke-width=\"1.5\"><title>%s</title></line>\n",
                          xpx(&ax, a[k]), y + 35, xpx(&ax, a[k]), y + 57, stage_names[k]);
        if ((f->have & S_REC) && isfinite(a[4]) && xpx(&ax, a[4]) + 8 + 6.5 * 18 < W - MR) {
            dur_text(text, sizeof text, a[4] - (isfinite(a[0]) ? a[0] : a[1]));
            pt_sb_add(b, "<text class=\"total\" x=\"%.1f\" y=\"%.1f\" font-size=\"11\" font-weight=\"bold\">recovered: %s</text>\n", xpx(&ax, a[4]) + 6,
                      y + 50, text);
        } else if (!(f->have & S_REC) && prevk >= 0 && xpx(&ax, prev) + 90 < W - MR)
            pt_sb_add(b, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" fill=\"#d62728\">%s</text>\n", xpx(&ax, prev) + 6, y + 50,
                      f->have & S_REL ? "no first step" : "not relaunched");
        pt_sb_add(b, "</g>\n");
    }
    if (r->nfails > nrows)
        pt_sb_add(b, "<text x=\"%d\" y=\"%.1f\" fill=\"#555\">... %zu more failures: see the table</text>\n", ML, h - 6, r->nfails - nrows);
    pt_sb_add(b, "</svg>\n");
    return 1;
}

/* a cell with seconds, or empty */
static void td_secs(pt_sb *h, double s) {
    if (isfinite(s)) pt_sb_add(h, "<td>%.2f</td>", s);
    else pt_sb_add(h, "<td></td>");
}

/* the page's Failures section: the supervisor's summary (ptrun_end), the chart, a row per failure,
   the stragglers */
static void failures_section(pt_sb *h, const run *r, const pt_sb *chart) {
    size_t i;
    pt_sb_add(h, "<h2 id=\"failures\">Failures (%zu)</h2>\n", r->nfails);
    if (r->end.seen) {
        char v[96];
        pt_sb_add(h, "<table class=\"kv ptrun-end\">\n");
        if (r->end.ok >= 0) summary_row(h, "finished", r->end.ok ? "ok" : "failed");
        if (r->end.restarts != NOI) snprintf(v, sizeof v, "%ld", r->end.restarts), summary_row(h, "restarts", v);
        if (r->end.steps_lost != NOI) snprintf(v, sizeof v, "%ld", r->end.steps_lost), summary_row(h, "steps lost", v);
        if (isfinite(r->end.time_lost_s)) snprintf(v, sizeof v, "%.2f s", r->end.time_lost_s), summary_row(h, "time lost", v);
        if (isfinite(r->end.step)) snprintf(v, sizeof v, "%.0f", r->end.step), summary_row(h, "last step", v);
        if (r->end.exit_code != NOI) snprintf(v, sizeof v, "%ld", r->end.exit_code), summary_row(h, "exit status", v);
        pt_sb_add(h, "</table>\n");
    } else pt_sb_add(h, "<p>no ptrun_end line: the supervisor had not finished when the log was read</p>\n");
    if (chart && chart->n) pt_sb_add(h, "<div class=\"charts\">\n%.*s</div>\n", (int)chart->n, chart->s);
    if (r->nfails) {
        pt_sb_add(h, "<p>Times in seconds from the fault (rows marked * have no fault stamp: from the detection). Recovered: the first step "
                     "completed after the relaunch.</p>\n<table class=\"failures\">\n<tr><th>#</th><th>attempt</th><th>kind</th><th>where</th>"
                     "<th>step</th><th>detected after</th><th>torn down after</th><th>relaunched after</th><th>recovered after</th>"
                     "<th>steps lost</th><th>resumed at</th><th>layout before \342\206\222 after</th></tr>\n");
        for (i = 0; i < r->nfails && i < MAX_EVENT_ROWS; i++) {
            const failure *f = &r->fails[i];
            double a[5];
            int from_det;
            failure_times(f, a, &from_det);
            pt_sb_add(h, "<tr><td>%zu%s</td><td>", i + 1, from_det ? " *" : "");
            if (f->attempt != NOI) pt_sb_add(h, "%ld", f->attempt);
            pt_sb_add(h, "</td><td");
            if (f->detail) {
                pt_sb_add(h, " title=\"");
                sb_esc(h, f->detail);
                pt_sb_add(h, "\"");
            }
            pt_sb_add(h, ">");
            sb_esc(h, failure_kind(f));
            if (f->kind && f->what) {
                pt_sb_add(h, " (");
                sb_esc(h, f->what);
                pt_sb_add(h, ")");
            }
            pt_sb_add(h, "</td><td>");
            where_text(h, f);
            pt_sb_add(h, "</td><td>");
            if (isfinite(f->step)) pt_sb_add(h, "%.0f", f->step);
            pt_sb_add(h, "</td>");
            td_secs(h, from_det ? NAN : a[1]);
            td_secs(h, a[2]);
            td_secs(h, a[3]);
            td_secs(h, a[4]);
            pt_sb_add(h, "<td>");
            if (f->steps_lost != NOI) pt_sb_add(h, "%ld", f->steps_lost);
            pt_sb_add(h, "</td><td>");
            if (isfinite(f->resume)) pt_sb_add(h, "%.0f", f->resume);
            pt_sb_add(h, "</td><td>");
            layout_before_after(h, r, f);
            pt_sb_add(h, "</td></tr>\n");
        }
        if (r->nfails > MAX_EVENT_ROWS) pt_sb_add(h, "<tr><td colspan=\"12\">... %zu more</td></tr>\n", r->nfails - MAX_EVENT_ROWS);
        pt_sb_add(h, "</table>\n");
    }
    pt_sb_add(h, "<h3>Stragglers (%zu)</h3>\n", r->nstrag);
    if (!r->nstrag) {
        pt_sb_add(h, "<p>none reported</p>\n");
        return;
    }
    pt_sb_add(h, "<table class=\"stragglers\">\n<tr><th>attempt</th><th>step</th><th>where</th><th>work (s)</th><th>median (s)</th>"
                 "<th>work / median</th></tr>\n");
    for (i = 0; i < r->nstrag && i < MAX_EVENT_ROWS; i++) {
        const straggler_rec *g = &r->strag[i];
        pt_sb_add(h, "<tr><td>");
        if (g->attempt != NOI) pt_sb_add(h, "%ld", g->attempt);
        pt_sb_add(h, "</td><td>");
        if (isfinite(g->step)) pt_sb_add(h, "%.0f", g->step);
        pt_sb_add(h, "</td><td>");
        if (g->rank != NOI) pt_sb_add(h, "rank %ld", g->rank);
        if (g->host) {
            pt_sb_add(h, g->rank != NOI ? "@" : "host ");
            sb_esc(h, g->host);
        }
        pt_sb_add(h, "</td>");
        td_secs(h, g->work_s);
        td_secs(h, g->median_s);
        if (isfinite(g->work_s) && isfinite(g->median_s) && g->median_s > 0) pt_sb_add(h, "<td>%.1f\303\227</td>", g->work_s / g->median_s);
        else pt_sb_add(h, "<td></td>");
        pt_sb_add(h, "</tr>\n");
    }
    if (r->nstrag > MAX_EVENT_ROWS) pt_sb_add(h, "<tr><td colspan=\"6\">... %zu more</td></tr>\n", r->nstrag - MAX_EVENT_ROWS);
    pt_sb_add(h, "</table>\n");
}

/* per step line: 1 when a later line has a step at or below it (done again after a restart, or a
   rollback): the suffix minimum of the steps */
static unsigned char *redone_flags(const run *r) {
    unsigned char *d = (unsigned char *)xrealloc(NULL, r->nsteps + 1);
    double low = HUGE_VAL;
    size_t i;
    for (i = r->nsteps; i-- > 0;) {
        d[i] = r->steps[i].step >= low;
        if (r->steps[i].step < low) low = r->steps[i].step;
    }
    return d;
}

static int write_report(const char *dir, const char *title, const run *r, const trace *t, long want) {
    pt_sb h, svg[8], fsvg;
    const char *names[8];
    int nsvg = 0, k, rc = 0;
    size_t i, nval = 0;
    const size_t stride = sizeof(step_rec) / sizeof(double);
    unsigned char *redone = r->nptrun ? redone_flags(r) : NULL; /* a supervised run: steps done again drawn apart */
    pt_sb_init(&h);
    pt_sb_init(&fsvg);
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
            s[k].redone = redone;
        }
        for (i = 0; i < r->nsteps; i++) nval += isfinite(r->steps[i].f[F_VAL]) != 0;
        if (!nval) s[1].n = 0;
        if (r->nsteps && chart_lines(&svg[nsvg], "loss", "Loss", "loss", U_PLAIN, 0, s, 2, r->events, r->nevents, r->nptrun ? r : NULL)) names[nsvg++] = "loss.svg";
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
            s.name = one[k].name, s.color = one[k].color, s.stride = stride, s.n = r->nsteps, s.redone = redone;
            s.x = r->nsteps ? &r->steps[0].step : NULL;
            s.y = r->nsteps ? &r->steps[0].f[one[k].f] : NULL;
            if (r->nsteps && chart_lines(&svg[nsvg], one[k].id, one[k].title, one[k].ylabel, one[k].kind, one[k].zero, &s, 1, NULL, 0, NULL))
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
    if (rc == 0 && chart_failures(&fsvg, r)) rc = write_file(dir, "failures.svg", &fsvg);
    /* the page */
    if (rc == 0) {
        const char *time = str_at(r->header, KEY(TIME)), *formula = str_at(r->header, KEY(MFU_FORMULA));
        const pt_json *cfg = pt_json_get(r->header, KEY(CONFIG));
        double fpt = num_at(r->header, KEY(FLOPS_PER_TOKEN)), peak = num_at(r->header, KEY(PEAK_FLOPS));
        pt_sb_add(&h, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n<title>");
        sb_esc(&h, title);
        pt_sb_add(&h, "</title>\n<style>\nbody{font-family:sans-serif;margin:24px;max-width:1600px;color:#222}\n"
                    "table{border-collapse:collapse;margin:8px 0 16px}th,td{border:1px solid #ccc;padding:3px 8px;text-align:left;"
                    "font-size:13px;vertical-align:top}\nth{background:#f4f4f4}\n.charts{display:flex;flex-wrap:wrap;gap:12px}\n"
                    ".charts svg{border:1px solid #ddd}\n.cols{display:flex;gap:32px;flex-wrap:wrap}\n</style>\n</head>\n<body>\n<h1>");
        sb_esc(&h, title);
        pt_sb_add(&h, "</h1>\n");
        if (time) {
            pt_sb_add(&h, "<p>started ");
            sb_esc(&h, time);
            pt_sb_add(&h, "</p>\n");
        }
        pt_sb_add(&h, "<div class=\"cols\">\n<div>\n<h2>Summary</h2>\n");
        summary(&h, r);
        pt_sb_add(&h, "</div>\n<div>\n<h2>Configuration</h2>\n<table class=\"kv\">\n");
        if (cfg) config_rows(&h, "", cfg);
        if (isfinite(fpt)) {
            char v[64];
            snprintf(v, sizeof v, "%.4g", fpt);
            summary_row(&h, KEY(FLOPS_PER_TOKEN), v);
        }
        if (isfinite(peak)) {
            char v[64];
            snprintf(v, sizeof v, "%.4g", peak);
            summary_row(&h, KEY(PEAK_FLOPS), v);
        }
        if (formula) summary_row(&h, KEY(MFU_FORMULA), formula);
        if (!cfg && !formula) pt_sb_add(&h, "<tr><td>no run_start line with a config in the log</td></tr>\n");
        pt_sb_add(&h, "</table>\n</div>\n</div>\n<h2>Charts</h2>\n<div class=\"charts\">\n");
        for (k = 0; k < nsvg; k++) pt_sb_add(&h, "%.*s", (int)svg[k].n, svg[k].s);
        if (!nsvg) pt_sb_add(&h, "<p>no step lines in the log</p>\n");
        pt_sb_add(&h, "</div>\n");
        if (r->nptrun) failures_section(&h, r, &fsvg);
        pt_sb_add(&h, "<h2>Events (%zu)</h2>\n", r->nevents);
        if (r->nevents) {
            pt_sb_add(&h, "<table class=\"events\">\n<tr><th>step</th><th>event</th><th>details</th></tr>\n");
            for (i = 0; i < r->nevents && i < MAX_EVENT_ROWS; i++) {
                pt_sb_add(&h, "<tr><td>");
                if (isfinite(r->events[i].step)) pt_sb_add(&h, "%.0f", r->events[i].step);
                pt_sb_add(&h, "</td><td style=\"color:%s\">", event_color(r->events[i].name));
                sb_esc(&h, r->events[i].name);
                pt_sb_add(&h, "</td><td>");
                sb_esc(&h, r->events[i].detail);
                pt_sb_add(&h, "</td></tr>\n");
            }
            if (r->nevents > MAX_EVENT_ROWS) pt_sb_add(&h, "<tr><td colspan=\"3\">... %zu more</td></tr>\n", r->nevents - MAX_EVENT_ROWS);
            pt_sb_add(&h, "</table>\n");
        } else pt_sb_add(&h, "<p>none</p>\n");
        pt_sb_add(&h, "</body>\n</html>\n");
        rc = write_file(dir, "index.html", &h);
    }
    for (k = 0; k < 8; k++) pt_sb_free(&svg[k]);
    pt_sb_free(&fsvg);
    pt_sb_free(&h);
    free(redone);
    return rc;
}

static void run_free(run *r) {
    size_t i;
    pt_json_free(r->header);
    for (i = 0; i < r->nevents; i++) free(r->events[i].name), free(r->events[i].detail);
    free(r->events);
    free(r->steps);
    free(r->mem_rank);
    for (i = 0; i < r->nfails; i++) {
        failure *f = &r->fails[i];
        free(f->kind), free(f->what), free(f->detail), free(f->host), free(f->hosts1);
    }
    free(r->fails);
    for (i = 0; i < r->nlaunches; i++) free(r->launches[i].hosts);
    free(r->launches);
    for (i = 0; i < r->nstrag; i++) free(r->strag[i].host);
    free(r->strag);
    memset(r, 0, sizeof *r);
}
static void trace_free(trace *t) {
    size_t i;
    free(t->ev);
    free(t->open);
    for (i = 0; i < t->npn; i++) free(t->pnames[i]);
    free(t->pids);
    free(t->pnames);
    memset(t, 0, sizeof *t);
}

/* tests/fuzz/fuzz_runlog.c includes this file with PTREPORT_NO_MAIN: read_log, read_trace and
   write_report are what it calls */
#ifndef PTREPORT_NO_MAIN
#include "ptflags.h"

static const char usage_text[] = "usage: ptreport LOG.jsonl [--trace TRACE.json] [--step N] [--title TEXT] -o DIR\n";

/* the command line */
typedef struct report_opts {
    const char *log, *tpath, *dir, *title;
    long want; /* --step: the step whose pipeline timeline is drawn; -1 = the report's choice */
} report_opts;

static int flag_log(void *dst, const char *tool, const char *flag, const char *v) {
    report_opts *o = (report_opts *)dst;
    (void)flag;
    if (o->log) return fprintf(stderr, "%s: one log file expected, found a second: %s\n", tool, v), fputs(usage_text, stderr), 2;
    o->log = v;
    return 0;
}

/* parse_flags: the command line into o; PTF_GO, or the exit status */
static int parse_flags(report_opts *o, int argc, char **argv) {
    int rc;
    const ptf_flag flags[] = {PTF_ARG(flag_log, o), PTF_STR("-o", &o->dir), PTF_STR("--trace", &o->tpath), PTF_STR("--title", &o->title),
                              PTF_LONG("--step", &o->want, 0, 1e15), PTF_END};
    memset(o, 0, sizeof *o);
    o->want = -1;
    if ((rc = ptf_parse("ptreport", usage_text, flags, argc, argv)) != PTF_GO) return rc;
    if (!o->log || !o->dir) return fprintf(stderr, "ptreport: expected LOG.jsonl and -o DIR, found %s\n", o->log ? "no -o DIR" : "no LOG.jsonl"), fputs(usage_text, stderr), 2;
    return PTF_GO;
}

/* report: the log (and trace) read, DIR made, the report written in it; 0, or 1 */
static int report(const report_opts *o, run *r, trace *t) {
    char dflt[512];
    const char *title = o->title;
    if (read_log(o->log, r) != 0) return 1;
    if (o->tpath && read_trace(o->tpath, t) != 0) return 1;
    if (mkdir(o->dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "ptreport: cannot create %s: %s\n", o->dir, strerror(errno));
        return 1;
    }
    if (!title) {
        const char *model = str_at(pt_json_get(r->header, KEY(CONFIG)), "model");
        snprintf(dflt, sizeof dflt, "Training report: %s", model ? model : o->log);
        title = dflt;
    }
    return write_report(o->dir, title, r, o->tpath ? t : NULL, o->want) != 0;
}

int main(int argc, char **argv) {
    report_opts o;
    run r;
    trace t;
    int rc;
    if ((rc = parse_flags(&o, argc, argv)) != PTF_GO) return rc;
    memset(&r, 0, sizeof r);
    memset(&t, 0, sizeof t);
    rc = report(&o, &r, &t);
    run_free(&r);
    trace_free(&t);
    return rc;
}
#endif
