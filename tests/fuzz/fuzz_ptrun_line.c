/* fuzz_ptrun_line.c - libFuzzer harness of tools/ptrun_line.h: the supervisor's line parser
   (ptl_parse: every line a rank, or anyone who reaches ptrun's port, sends) and its JSON string
   writer (ptl_json_escn: every string ptrun writes into its events and the trainer's log).
   Input: a line (no newline), optionally FZ_SEP and bytes for the writer (without it the line itself
   is escaped too). Properties: an accepted line has every field of its verb in range (rank < 2^24,
   world >= 1, pid > 0, a host name of letters, digits, '.', '_', '-' that does not begin with '-',
   hex secret, known phase and kind, finite times) and is printable ASCII of at most PTL_MAX_LINE
   bytes; a refused one has a message of printable ASCII. The escaped text is valid JSON (it reads
   back with pt_json_parse as a string), holds no raw control byte nor an unescaped quote, never
   overruns its buffer, and, when it fits, decodes back to exactly the input's bytes. */
#define _POSIX_C_SOURCE 200809L
#define PTRAIN_IMPLEMENTATION
#include "../../ptrain.h"
#include "fuzz_util.h"
#include "../../tools/ptrun_line.h"

static int fz_ptl_printable(const char *s) {
    for (; *s; s++)
        if (*s < 32 || *s >= 127) return 0;
    return 1;
}
/* the JSON string contents e (as ptl_json_escn wrote it) decoded: \u00XX to byte XX (what the writer
   makes of a byte that is not UTF-8 or a control byte), the other escapes to their byte; -1 when e
   holds anything a writer of this kind must not write */
static long fz_ptl_unescape(const char *e, size_t n, unsigned char *out) {
    size_t i = 0, o = 0;
    while (i < n) {
        unsigned char c = (unsigned char)e[i];
        if (c < 32 || c == '"') return -1;
        if (c != '\\') {
            out[o++] = c, i++;
            continue;
        }
        if (i + 1 >= n) return -1;
        if (e[i + 1] == '"' || e[i + 1] == '\\') out[o++] = (unsigned char)e[i + 1], i += 2;
        else if (e[i + 1] == 'u' && i + 5 < n && e[i + 2] == '0' && e[i + 3] == '0') {
            unsigned v = 0;
            int k;
            for (k = 4; k < 6; k++) {
                char h = e[i + k];
                v = v * 16 + (unsigned)(h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : 99);
            }
            if (v > 255) return -1;
            out[o++] = (unsigned char)v, i += 6;
        } else return -1;
    }
    return (long)o;
}

FZ_ENTRY(ptrun_line) {
    const uint8_t *p2;
    size_t n1, n2, cap;
    ptl_line L;
    char err[400], *esc, *line;
    unsigned char *back;
    long nb;
    fz_split(data, size, &n1, &p2, &n2);
    if (!p2) p2 = data, n2 = size;
    /* the parser: on a copy of exactly n1 bytes (no NUL after it: an overread shows) */
    line = (char *)malloc(n1 ? n1 : 1);
    if (!line) abort();
    if (n1) memcpy(line, data, n1);
    err[0] = 0;
    if (ptl_parse(line, n1, &L, err, sizeof err) == 0) {
        size_t i;
        FZ_ASSERT(n1 <= PTL_MAX_LINE, "accepted a line of %zu bytes", n1);
        for (i = 0; i < n1; i++) FZ_ASSERT(line[i] >= 32 && line[i] < 127, "accepted byte 0x%02x", (unsigned char)line[i]);
        FZ_ASSERT(L.verb >= PTL_HELLO && L.verb <= PTL_BYE, "verb %d", L.verb);
        if (L.verb == PTL_HELLO) {
            FZ_ASSERT(L.rank >= 0 && L.rank < (1 << 24) && L.world >= 1 && L.world <= (1 << 24), "rank %lld world %lld", L.rank, L.world);
            FZ_ASSERT(L.pid > 0 && L.pid <= 2147483647LL && L.attempt >= 1, "pid %lld attempt %lld", L.pid, L.attempt);
            FZ_ASSERT(ptl_hostname_ok(L.host, strlen(L.host)) && L.host[0] != '-' && !strpbrk(L.host, " ;|&$`'\"\\<>()*?!#~=/"), "host '%s'", L.host);
            FZ_ASSERT(L.secret[0] && strspn(L.secret, "0123456789abcdefABCDEF") == strlen(L.secret), "secret '%s'", L.secret);
        } else if (L.verb == PTL_BEAT) {
            FZ_ASSERT(L.phase >= 0 && L.phase < PTL_PH_N && L.step >= 0 && L.done >= 0, "beat");
            FZ_ASSERT(L.work >= 0 && L.work <= 1e12, "work %g", L.work);
            FZ_ASSERT(L.mpi[0] && fz_ptl_printable(L.mpi) && !strchr(L.mpi, ' '), "mpi '%s'", L.mpi);
        } else if (L.verb == PTL_FAULT) {
            FZ_ASSERT(L.t >= 0 && L.t <= 1e12 && L.step >= 0, "fault t %g", L.t);
            FZ_ASSERT(!strcmp(L.kind, "kill") || !strcmp(L.kind, "exit") || !strcmp(L.kind, "hang") || !strcmp(L.kind, "stop") ||
                          !strcmp(L.kind, "crash-in-save") || (!strncmp(L.kind, "slow:", 5) && L.slow_ms >= 1 && L.slow_ms <= 3600000),
                      "kind '%s'", L.kind);
        } else if (L.verb == PTL_BYE) FZ_ASSERT(L.stopped == 0 || L.stopped == 1, "stopped %d", L.stopped);
        else if (L.verb == PTL_START) FZ_ASSERT(L.first >= 0 && L.total >= 0, "start");
    } else FZ_ASSERT(err[0] && fz_ptl_printable(err), "a refusal without a printable message: '%s'", err);
    free(line);
    /* the JSON writer: a buffer of cap bytes (from the input's first byte) for n2 bytes */
    cap = 1 + (n2 ? (size_t)p2[0] % 64 : 0) * (n2 / 8 + 1);
    if (cap > 6 * n2 + 1) cap = 6 * n2 + 1;
    esc = (char *)malloc(cap);
    back = (unsigned char *)malloc(n2 + 1);
    if (!esc || !back) abort();
    ptl_json_escn(esc, cap, (const char *)p2, n2);
    FZ_ASSERT(strlen(esc) < cap, "overran");
    nb = fz_ptl_unescape(esc, strlen(esc), back);
    FZ_ASSERT(nb >= 0, "not a JSON string's contents: '%s'", esc);
    FZ_ASSERT((size_t)nb <= n2 && !memcmp(back, p2, (size_t)nb), "does not read back as the input's bytes");
    if (cap == 6 * n2 + 1) FZ_ASSERT((size_t)nb == n2, "the whole input fits but %ld of %zu bytes came back", nb, n2);
    { /* and a JSON reader takes it */
        pt_sb b;
        pt_json *j;
        pt_sb_init(&b);
        pt_sb_add(&b, "\"%s\"", esc);
        j = b.s ? pt_json_parse(b.s, b.n, 0, NULL, 0) : NULL;
        FZ_ASSERT(b.oom || (j && pt_json_str(j)), "pt_json_parse refuses \"%s\"", esc);
        pt_json_free(j);
        pt_sb_free(&b);
    }
    { /* the secret's comparison agrees with strcmp; the NUL-ended writer with the counted one */
        char *a = (char *)malloc(n2 + 1), *e1 = (char *)malloc(cap), *e2 = (char *)malloc(cap);
        size_t h = n2 / 2;
        if (!a || !e1 || !e2) abort();
        memcpy(a, p2, n2), a[n2] = 0;
        FZ_ASSERT(ptl_secret_eq(a, a) == 1, "a secret unequal to itself");
        a[h] = 0;
        FZ_ASSERT(ptl_secret_eq(a, a + (h < n2 ? h + 1 : h)) == !strcmp(a, a + (h < n2 ? h + 1 : h)), "ptl_secret_eq disagrees with strcmp");
        ptl_json_esc(e1, cap, a);
        ptl_json_escn(e2, cap, a, strlen(a));
        FZ_ASSERT(!strcmp(e1, e2), "ptl_json_esc and ptl_json_escn differ");
        free(a), free(e1), free(e2);
    }
    free(esc);
    free(back);
    return 0;
}
