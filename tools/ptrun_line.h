/* ptrun_line.h - the text of the supervisor's channel, ptrun's side: one line from a rank parsed
   and checked field by field (ptl_parse), and the one JSON string writer of every string ptrun
   writes into its events and the trainer's log (ptl_json_esc). Static functions, no allocation, no
   global state, no ptrain.h: tools/ptrun.c includes it, and so does tests/fuzz/fuzz_ptrun_line.c.

   The lines (ptrain.h's harness writes them; its comment "the supervisor's channel" is the protocol):
     hello rank=R world=W pid=P host=H attempt=A secret=S
     start first=K total=N
     beat step=S done=D phase=P work=W mpi=M
     fault kind=K step=S t=T
     bye done=D stopped=0|1
   A line is a verb and fields KEY=VALUE separated by single spaces, in any order; every field of the
   verb present once, no other; at most PTL_MAX_LINE bytes, printable ASCII only. Values:
     R 0 .. 2^24-1; W 1 .. 2^24; P 1 .. 2^31-1; A 1 .. 10^6; K N S D 0 .. 2^62 (decimal digits only,
     no sign); H a host name: letters, digits, '.', '_', '-', 1 .. 253 bytes, beginning with a letter
     or a digit; S (secret) hex digits, 1 .. 64; P setup|step|ckpt|eval; W (work) and T seconds, a
     finite number, 0 .. 10^12; M '-' or OP@COMM, letters, digits and '_' (COMM may be '?'), at most
     47 bytes; K (kind) kill|exit|hang|stop|crash-in-save|slow:MS with MS 1 .. 3600000; stopped 0|1.
   What ptl_parse cannot know (the secret's value, the world and attempt of this launch, whether the
   rank is taken, whether the host is one of the hostfile's) ptrun checks next. */
#ifndef PTRUN_LINE_H
#define PTRUN_LINE_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PTL_MAX_LINE 1024
enum { PTL_HELLO = 1, PTL_START, PTL_BEAT, PTL_FAULT, PTL_BYE };
enum { PTL_PH_SETUP = 0, PTL_PH_STEP, PTL_PH_CKPT, PTL_PH_EVAL, PTL_PH_N };
static const char *const ptl_phases[PTL_PH_N] = {"setup", "step", "ckpt", "eval"};
static const char *const ptl_kinds[] = {"kill", "exit", "hang", "stop", "crash-in-save"}; /* and slow:MS */

typedef struct ptl_line {
    int verb;
    long long rank, world, pid, attempt;      /* hello */
    char host[254], secret[65];               /* hello */
    long long first, total;                   /* start */
    long long step, done;                     /* beat (step, done), fault (step), bye (done) */
    int phase;                                /* beat */
    double work;                              /* beat */
    char mpi[48];                             /* beat */
    char kind[32];                            /* fault: the kind as sent (slow:MS whole) */
    int slow_ms;                              /* fault: MS of slow:MS, else 0 */
    double t;                                 /* fault */
    int stopped;                              /* bye */
} ptl_line;

/* n bytes of s as printable ASCII for a message (others as '?'; at most max, then "...") */
static void ptl_show(char *out, size_t cap, const char *s, size_t n, size_t max) {
    size_t i, o = 0;
    if (!cap) return;
    for (i = 0; i < n && i < max && o + 1 < cap; i++) out[o++] = (s[i] >= 32 && s[i] < 127) ? s[i] : '?';
    if (n > max && o + 4 < cap) memcpy(out + o, "...", 3), o += 3;
    out[o] = 0;
}

static int ptl_uint(const char *v, size_t n, long long lo, long long hi, long long *out) {
    long long x = 0;
    size_t i;
    if (n < 1 || n > 19) return -1;
    for (i = 0; i < n; i++) {
        if (v[i] < '0' || v[i] > '9') return -1;
        if (x > (hi - (v[i] - '0')) / 10) return -1; /* over hi (no overflow: hi <= 2^62) */
        x = 10 * x + (v[i] - '0');
    }
    if (x < lo || x > hi) return -1;
    *out = x;
    return 0;
}
static int ptl_num(const char *v, size_t n, double lo, double hi, double *out) {
    char b[48];
    char *e;
    double x;
    size_t i;
    if (n < 1 || n >= sizeof b) return -1;
    for (i = 0; i < n; i++)
        if (!((v[i] >= '0' && v[i] <= '9') || v[i] == '.' || v[i] == 'e' || v[i] == 'E' || v[i] == '+' || v[i] == '-')) return -1;
    memcpy(b, v, n), b[n] = 0;
    x = strtod(b, &e);
    if (*e || !(x >= lo && x <= hi)) return -1; /* NaN fails the comparison; inf is out of range */
    *out = x;
    return 0;
}
static int ptl_hostname_ok(const char *v, size_t n) {
    size_t i;
    if (n < 1 || n > 253) return 0;
    for (i = 0; i < n; i++) {
        char c = v[i];
        int alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        if (!alnum && !(i > 0 && (c == '.' || c == '_' || c == '-'))) return 0;
    }
    return 1;
}
static int ptl_ident(const char *v, size_t n) { /* [A-Za-z0-9_]+ */
    size_t i;
    if (!n) return 0;
    for (i = 0; i < n; i++)
        if (!((v[i] >= 'a' && v[i] <= 'z') || (v[i] >= 'A' && v[i] <= 'Z') || (v[i] >= '0' && v[i] <= '9') || v[i] == '_')) return 0;
    return 1;
}

/* the fields of each verb, as bits of this list */
enum { PTL_F_RANK, PTL_F_WORLD, PTL_F_PID, PTL_F_HOST, PTL_F_ATTEMPT, PTL_F_SECRET, PTL_F_FIRST, PTL_F_TOTAL, PTL_F_STEP,
       PTL_F_DONE, PTL_F_PHASE, PTL_F_WORK, PTL_F_MPI, PTL_F_KIND, PTL_F_T, PTL_F_STOPPED, PTL_F_N };
static const char *const ptl_keys[PTL_F_N] = {"rank", "world", "pid", "host", "attempt", "secret", "first", "total",
                                              "step", "done", "phase", "work", "mpi", "kind", "t", "stopped"};

/* one line (n bytes at s, without its newline) into *L; 0, or -1 with err naming the field, what
   it expected and what it found (printable ASCII only: it goes to a terminal) */
static int ptl_parse(const char *s, size_t n, ptl_line *L, char *err, size_t errlen) {
    static const char *const verbs[] = {"", "hello", "start", "beat", "fault", "bye"};
    static const unsigned need[] = {0,
                                    1u << PTL_F_RANK | 1u << PTL_F_WORLD | 1u << PTL_F_PID | 1u << PTL_F_HOST | 1u << PTL_F_ATTEMPT | 1u << PTL_F_SECRET,
                                    1u << PTL_F_FIRST | 1u << PTL_F_TOTAL,
                                    1u << PTL_F_STEP | 1u << PTL_F_DONE | 1u << PTL_F_PHASE | 1u << PTL_F_WORK | 1u << PTL_F_MPI,
                                    1u << PTL_F_KIND | 1u << PTL_F_STEP | 1u << PTL_F_T,
                                    1u << PTL_F_DONE | 1u << PTL_F_STOPPED};
    const long long big = (long long)1 << 62;
    char show[80];
    unsigned have = 0;
    size_t i, vl;
    int v;
    const char *p, *end = s + n;
    memset(L, 0, sizeof *L);
    if (n > PTL_MAX_LINE) return ptl_show(show, sizeof show, s, n, 40), snprintf(err, errlen, "a line of %zu bytes (at most %d): '%s'", n, PTL_MAX_LINE, show), -1;
    for (i = 0; i < n; i++)
        if ((unsigned char)s[i] < 32 || (unsigned char)s[i] >= 127) {
            ptl_show(show, sizeof show, s, n, 40);
            return snprintf(err, errlen, "a byte 0x%02x at %zu (expected printable ASCII): '%s'", (unsigned char)s[i], i, show), -1;
        }
    vl = 0;
    while (vl < n && s[vl] != ' ') vl++;
    for (v = 1; v <= PTL_BYE && !(strlen(verbs[v]) == vl && !memcmp(s, verbs[v], vl)); v++) {}
    if (v > PTL_BYE) {
        ptl_show(show, sizeof show, s, vl, 20);
        return snprintf(err, errlen, "unknown verb '%s' (expected hello, start, beat, fault or bye)", show), -1;
    }
    L->verb = v;
    for (p = s + vl; p < end;) {
        const char *k, *eq, *val, *te;
        size_t kl, n2;
        int f;
        if (*p != ' ' || p + 1 >= end || p[1] == ' ') return snprintf(err, errlen, "%s: fields must be separated by one space each", verbs[v]), -1;
        k = ++p;
        for (te = k; te < end && *te != ' '; te++) {}
        eq = (const char *)memchr(k, '=', (size_t)(te - k));
        if (!eq) return ptl_show(show, sizeof show, k, (size_t)(te - k), 30), snprintf(err, errlen, "%s: expected KEY=VALUE, found '%s'", verbs[v], show), -1;
        kl = (size_t)(eq - k), val = eq + 1, n2 = (size_t)(te - val);
        for (f = 0; f < PTL_F_N && !(strlen(ptl_keys[f]) == kl && !memcmp(k, ptl_keys[f], kl)); f++) {}
        if (f == PTL_F_N || !(need[v] >> f & 1)) {
            ptl_show(show, sizeof show, k, kl, 20);
            return snprintf(err, errlen, "%s: unknown field '%s'", verbs[v], show), -1;
        }
        if (have >> f & 1) return snprintf(err, errlen, "%s: field %s given twice", verbs[v], ptl_keys[f]), -1;
        have |= 1u << f;
        ptl_show(show, sizeof show, val, n2, 30);
#define PTL_BAD(what) return snprintf(err, errlen, "%s: %s expects %s, found '%s'", verbs[v], ptl_keys[f], what, show), -1
        switch (f) {
        case PTL_F_RANK: if (ptl_uint(val, n2, 0, (1 << 24) - 1, &L->rank)) PTL_BAD("a rank, 0 .. 2^24-1"); break;
        case PTL_F_WORLD: if (ptl_uint(val, n2, 1, 1 << 24, &L->world)) PTL_BAD("a world size, 1 .. 2^24"); break;
        case PTL_F_PID: if (ptl_uint(val, n2, 1, 2147483647LL, &L->pid)) PTL_BAD("a process id, a positive integer"); break;
        case PTL_F_ATTEMPT: if (ptl_uint(val, n2, 1, 1000000, &L->attempt)) PTL_BAD("an attempt, 1 .. 10^6"); break;
        case PTL_F_FIRST: if (ptl_uint(val, n2, 0, big, &L->first)) PTL_BAD("a step, 0 .. 2^62"); break;
        case PTL_F_TOTAL: if (ptl_uint(val, n2, 0, big, &L->total)) PTL_BAD("a step count, 0 .. 2^62"); break;
        case PTL_F_STEP: if (ptl_uint(val, n2, 0, big, &L->step)) PTL_BAD("a step, 0 .. 2^62"); break;
        case PTL_F_DONE: if (ptl_uint(val, n2, 0, big, &L->done)) PTL_BAD("a step count, 0 .. 2^62"); break;
        case PTL_F_HOST:
            if (!ptl_hostname_ok(val, n2)) PTL_BAD("a host name (letters, digits, '.', '_', '-'; 1 .. 253 bytes)");
            memcpy(L->host, val, n2), L->host[n2] = 0;
            break;
        case PTL_F_SECRET:
            if (n2 < 1 || n2 > 64) PTL_BAD("hex digits, 1 .. 64");
            for (i = 0; i < n2; i++)
                if (!((val[i] >= '0' && val[i] <= '9') || (val[i] >= 'a' && val[i] <= 'f') || (val[i] >= 'A' && val[i] <= 'F'))) PTL_BAD("hex digits, 1 .. 64");
            memcpy(L->secret, val, n2), L->secret[n2] = 0;
            break;
        case PTL_F_PHASE: {
            int ph;
            for (ph = 0; ph < PTL_PH_N && !(strlen(ptl_phases[ph]) == n2 && !memcmp(val, ptl_phases[ph], n2)); ph++) {}
            if (ph == PTL_PH_N) PTL_BAD("setup, step, ckpt or eval");
            L->phase = ph;
            break;
        }
        case PTL_F_WORK: if (ptl_num(val, n2, 0, 1e12, &L->work)) PTL_BAD("seconds, a finite number >= 0"); break;
        case PTL_F_T: if (ptl_num(val, n2, 0, 1e12, &L->t)) PTL_BAD("a Unix time, a finite number >= 0"); break;
        case PTL_F_MPI: {
            const char *at = (const char *)memchr(val, '@', n2);
            int ok = n2 == 1 && val[0] == '-';
            if (!ok && at && n2 < sizeof L->mpi) {
                size_t a = (size_t)(at - val), c = n2 - a - 1;
                ok = ptl_ident(val, a) && ((c == 1 && at[1] == '?') || ptl_ident(at + 1, c));
            }
            if (!ok) PTL_BAD("'-' or OP@COMM (letters, digits, '_'; at most 47 bytes)");
            memcpy(L->mpi, val, n2), L->mpi[n2] = 0;
            break;
        }
        case PTL_F_KIND: {
            size_t kk;
            int ok = 0;
            for (kk = 0; kk < sizeof ptl_kinds / sizeof *ptl_kinds && !ok; kk++) ok = strlen(ptl_kinds[kk]) == n2 && !memcmp(val, ptl_kinds[kk], n2);
            if (!ok && n2 > 5 && !memcmp(val, "slow:", 5)) {
                long long ms;
                if (ptl_uint(val + 5, n2 - 5, 1, 3600000, &ms) == 0) ok = 1, L->slow_ms = (int)ms;
            }
            if (!ok) PTL_BAD("kill, exit, hang, stop, crash-in-save or slow:MS (MS 1 .. 3600000)");
            memcpy(L->kind, val, n2), L->kind[n2] = 0;
            break;
        }
        case PTL_F_STOPPED: {
            long long x;
            if (ptl_uint(val, n2, 0, 1, &x) || n2 != 1) PTL_BAD("0 or 1");
            L->stopped = (int)x;
            break;
        }
        default: break;
        }
#undef PTL_BAD
        p = te;
    }
    if (have != need[v]) {
        int f;
        for (f = 0; f < PTL_F_N && !(need[v] >> f & 1 && !(have >> f & 1)); f++) {}
        return snprintf(err, errlen, "%s: field %s missing", verbs[v], f < PTL_F_N ? ptl_keys[f] : "?"), -1;
    }
    return 0;
}

/* the bytes of one valid UTF-8 character at s (n bytes left), or 0 when s does not begin one
   (overlong forms, surrogates and code points over U+10FFFF are not valid) */
static size_t ptl_utf8_len(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    size_t k, i;
    unsigned long cp;
    if (c < 0x80) return 1;
    if (c >= 0xc2 && c <= 0xdf) k = 2, cp = c & 0x1f;
    else if (c >= 0xe0 && c <= 0xef) k = 3, cp = c & 0x0f;
    else if (c >= 0xf0 && c <= 0xf4) k = 4, cp = c & 0x07;
    else return 0;
    if (n < k) return 0;
    for (i = 1; i < k; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    if ((k == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) || (k == 4 && (cp < 0x10000 || cp > 0x10ffff))) return 0;
    return k;
}

/* the n bytes at s as the contents of a JSON string (no quotes) into out (cap bytes, NUL-ended):
   '"' and '\' escaped, control characters (and DEL) as \u00XX, valid UTF-8 kept as it is, any other
   byte >= 0x80 as \u00XX (read back: that code point, so nothing is lost and the text stays valid
   UTF-8). What does not fit is left out whole (never half an escape or half a character). Returns
   out. */
static char *ptl_json_escn(char *out, size_t cap, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, o = 0;
    if (!cap) return out;
    while (i < n) {
        unsigned c = u[i];
        size_t k = ptl_utf8_len(u + i, n - i);
        if (c == '"' || c == '\\') {
            if (o + 3 > cap) break;
            out[o++] = '\\', out[o++] = (char)c, i++;
        } else if (c < 32 || c == 127 || k == 0) {
            if (o + 7 > cap) break;
            out[o++] = '\\', out[o++] = 'u', out[o++] = '0', out[o++] = '0', out[o++] = hex[c >> 4], out[o++] = hex[c & 15], i++;
        } else {
            if (o + k + 1 > cap) break;
            memcpy(out + o, u + i, k), o += k, i += k;
        }
    }
    out[o] = 0;
    return out;
}
static char *ptl_json_esc(char *out, size_t cap, const char *s) { return ptl_json_escn(out, cap, s ? s : "", s ? strlen(s) : 0); }

/* constant-time equality of two strings of the same length (the length itself is not secret) */
static int ptl_secret_eq(const char *a, const char *b) {
    size_t na = strlen(a), nb = strlen(b), i;
    unsigned d = (unsigned)(na ^ nb);
    if (na != nb) return 0;
    for (i = 0; i < na; i++) d |= (unsigned)(unsigned char)(a[i] ^ b[i]);
    return d == 0;
}
#endif
