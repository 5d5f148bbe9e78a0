/* test_pp.c - pipeline schedules (>>pipeline): GPipe, 1F1B, interleaved 1F1B, forward-only.
   Build: cc -std=c99 -I. tests/test_pp.c -lm && ./a.out [--quick]   (no MPI: pure computation)
   Every schedule of a sweep passes pt_pp_schedule_check and has one F and one B per (micro-batch,
   stage); warm-up and peak in-flight counts match the field notes; the simulated bubble matches
   (p-1)/(v*m+p-1); broken copies (a receive removed, a deadlocking swap, a BWD dropped) are caught;
   bad arguments are refused; the table has one row per rank. Prints PASS/FAIL lines and
   "N passed, N failed"; exits 1 on any failure. --quick: a smaller sweep. */
#define PTRAIN_IMPLEMENTATION
#include "ptrain.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* 1 if every (mb, stage) has exactly one FWD and (train) one BWD, else 0 and a message */
static int one_each(const pt_pp_schedule *s, int train, char *why, size_t n) {
    int kind, p, m, v, r, i, ok = 1;
    int *cf, *cb;
    pt_pp_schedule_shape(s, &kind, &p, &m, &v);
    cf = (int *)calloc((size_t)(m * v * p), sizeof(int));
    cb = (int *)calloc((size_t)(m * v * p), sizeof(int));
    for (r = 0; r < p; r++) {
        const pt_pp_instr *in = pt_pp_schedule_instrs(s, r);
        for (i = 0; i < pt_pp_schedule_count(s, r); i++) {
            int st = in[i].chunk * p + r;
            if (in[i].op == PT_PP_FWD) cf[in[i].mb * v * p + st]++;
            if (in[i].op == PT_PP_BWD) cb[in[i].mb * v * p + st]++;
        }
    }
    for (i = 0; i < m * v * p && ok; i++)
        if (cf[i] != 1 || cb[i] != (train ? 1 : 0)) {
            snprintf(why, n, "micro-batch %d stage %d has %d F, %d B", i / (v * p), i % (v * p), cf[i], cb[i]);
            ok = 0;
        }
    free(cf);
    free(cb);
    return ok;
}

/* sweep of one kind; v range vlo..vhi */
static void sweep(int kind, const char *name, int pmax, int mmax, int vlo, int vhi) {
    char why[1024] = "", err[512];
    int p, m, v, r, ok = 1, nsched = 0;
    for (p = 1; p <= pmax && ok; p++)
        for (m = 1; m <= mmax && ok; m++)
            for (v = vlo; v <= vhi && ok; v++) {
                pt_pp_schedule *s;
                if (kind == PT_PP_INTERLEAVED && m % p) continue;
                s = pt_pp_schedule_new(kind, p, m, v, err, sizeof err);
                nsched++;
                if (!s) {
                    snprintf(why, sizeof why, "p=%d m=%d v=%d: new failed: %s", p, m, v, err);
                    ok = 0;
                    break;
                }
                if (pt_pp_schedule_check(s, err, sizeof err) != PT_OK) {
                    snprintf(why, sizeof why, "p=%d m=%d v=%d: check: %s", p, m, v, err);
                    ok = 0;
                } else if (!one_each(s, kind != PT_PP_FORWARD_ONLY, err, sizeof err)) {
                    snprintf(why, sizeof why, "p=%d m=%d v=%d: %s", p, m, v, err);
                    ok = 0;
                } else if (kind == PT_PP_GPIPE && pt_pp_schedule_peak_inflight(s, 0) != m) {
                    snprintf(why, sizeof why, "p=%d m=%d: GPipe peak in flight on rank 0 = %d, want m", p, m, pt_pp_schedule_peak_inflight(s, 0));
                    ok = 0;
                } else if (kind == PT_PP_1F1B) {
                    for (r = 0; r < p && ok; r++) {
                        int pk = pt_pp_schedule_peak_inflight(s, r), wu = pt_pp_schedule_warmup(s, r);
                        int wpk = m < p - r ? m : p - r, wwu = m < p - r - 1 ? m : p - r - 1;
                        if (pk != wpk || wu != wwu) {
                            snprintf(why, sizeof why, "p=%d m=%d rank %d: peak %d (want %d), warm-up %d (want %d)", p, m, r, pk, wpk, wu, wwu);
                            ok = 0;
                        }
                    }
                }
                pt_pp_schedule_free(s);
            }
    {
        char nm[128];
        snprintf(nm, sizeof nm, "%s: %d schedules (p<=%d, m<=%d, v=%d..%d) check, one F/B each, counts", name, nsched, pmax, mmax, vlo, vhi);
        CHECK_WHY(ok, nm, why);
    }
}

static double idle_of(int kind, int p, int m, int v) {
    char err[256];
    double ms, idle;
    pt_pp_schedule *s = pt_pp_schedule_new(kind, p, m, v, err, sizeof err);
    if (!s) return -1.0;
    idle = pt_pp_schedule_simulate(s, 1.0, 2.0, &ms);
    pt_pp_schedule_free(s);
    return idle;
}

/* a copy of s with rank r's program edited: drop index del (if >= 0), swap a and b (if >= 0) */
static pt_pp_schedule *edited(const pt_pp_schedule *s, int rank, int del, int a, int b) {
    int kind, p, m, v, r, *cnt;
    pt_pp_instr **prog;
    pt_pp_schedule *out;
    char err[256];
    pt_pp_schedule_shape(s, &kind, &p, &m, &v);
    cnt = (int *)malloc(sizeof(int) * (size_t)p);
    prog = (pt_pp_instr **)malloc(sizeof(pt_pp_instr *) * (size_t)p);
    for (r = 0; r < p; r++) {
        cnt[r] = pt_pp_schedule_count(s, r);
        prog[r] = (pt_pp_instr *)malloc(sizeof(pt_pp_instr) * (size_t)(cnt[r] + 1));
        memcpy(prog[r], pt_pp_schedule_instrs(s, r), sizeof(pt_pp_instr) * (size_t)cnt[r]);
    }
    if (a >= 0 && b >= 0) {
        pt_pp_instr t = prog[rank][a];
        prog[rank][a] = prog[rank][b];
        prog[rank][b] = t;
    }
    if (del >= 0) {
        memmove(&prog[rank][del], &prog[rank][del + 1], sizeof(pt_pp_instr) * (size_t)(cnt[rank] - del - 1));
        cnt[rank]--;
    }
    out = pt_pp_schedule_from(kind, p, m, v, cnt, (const pt_pp_instr *const *)prog, err, sizeof err);
    for (r = 0; r < p; r++) free(prog[r]);
    free(prog);
    free(cnt);
    return out;
}

static int find(const pt_pp_schedule *s, int rank, int op, int nth) {
    int i;
    const pt_pp_instr *in = pt_pp_schedule_instrs(s, rank);
    for (i = 0; i < pt_pp_schedule_count(s, rank); i++)
        if (in[i].op == op && nth-- == 0) return i;
    return -1;
}

int main(int argc, char **argv) {
    int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    int pmax = quick ? 4 : 8, mmax = quick ? 8 : 16, p, m;
    char why[512] = "", err[512];

    sweep(PT_PP_GPIPE, "gpipe", pmax, mmax, 1, 1);
    sweep(PT_PP_1F1B, "1f1b", pmax, mmax, 1, 1);
    sweep(PT_PP_FORWARD_ONLY, "forward-only", pmax, mmax, 1, 1);
    sweep(PT_PP_INTERLEAVED, "interleaved", pmax, mmax, 2, 4);

    { /* simulated bubble = theory for GPipe and 1F1B with t_bwd = 2 t_fwd */
        int ok = 1;
        double worst = 0.0;
        for (p = 1; p <= pmax && ok; p++)
            for (m = 1; m <= mmax && ok; m++) {
                double th = pt_pp_bubble_theory(p, m, 1), g = idle_of(PT_PP_GPIPE, p, m, 1), f = idle_of(PT_PP_1F1B, p, m, 1);
                if (fabs(g - th) > worst) worst = fabs(g - th);
                if (fabs(f - th) > worst) worst = fabs(f - th);
                if (fabs(g - th) > 1e-9 || fabs(f - th) > 1e-9) {
                    snprintf(why, sizeof why, "p=%d m=%d: theory %.12f gpipe %.12f 1f1b %.12f", p, m, th, g, f);
                    ok = 0;
                }
            }
        CHECK_WHY(ok, "bubble: simulated idle share == (p-1)/(m+p-1) for GPipe and 1F1B (1e-9)", why);
        printf("    max |simulated - theory| = %.3g\n", worst);
    }
    { /* interleaved: v=2 beats 1F1B; v=2..4 equal (p-1)/(v*m+p-1) */
        int ok = 1, v;
        double worst = 0.0;
        for (p = 2; p <= pmax && ok; p++)
            for (m = p; m <= mmax && ok; m += p)
                for (v = 2; v <= 4 && ok; v++) {
                    double f = idle_of(PT_PP_1F1B, p, m, 1), iv = idle_of(PT_PP_INTERLEAVED, p, m, v), th = pt_pp_bubble_theory(p, m, v);
                    if (fabs(iv - th) > worst) worst = fabs(iv - th);
                    if (!(iv >= 0.0 && iv < f) || fabs(iv - th) > 1e-9) {
                        snprintf(why, sizeof why, "p=%d m=%d v=%d: interleaved %.12f, 1f1b %.12f, theory %.12f", p, m, v, iv, f, th);
                        ok = 0;
                    }
                }
        CHECK_WHY(ok, "bubble: interleaved v=2..4 idle < 1F1B idle for m >= p and == (p-1)/(v*m+p-1) (1e-9)", why);
        printf("    max |interleaved simulated - theory| = %.3g\n", worst);
    }

    { /* mutations of a valid 1F1B p=4 m=8 */
        pt_pp_schedule *s = pt_pp_schedule_new(PT_PP_1F1B, 4, 8, 1, err, sizeof err), *b;
        pt_status st;
        int i, j;
        CHECK_WHY(s && pt_pp_schedule_check(s, err, sizeof err) == PT_OK, "mutation: base 1F1B p=4 m=8 valid", err);
        /* remove rank 1's first RECV_ACT */
        b = edited(s, 1, find(s, 1, PT_PP_RECV_ACT, 0), -1, -1);
        err[0] = 0;
        st = b ? pt_pp_schedule_check(b, err, sizeof err) : PT_OK;
        printf("    removed recv: %s\n", err);
        CHECK_WHY(b && st != PT_OK && strstr(err, "rank 1") && strstr(err, "RECV_ACT"), "mutation: a removed RECV_ACT is reported", err);
        pt_pp_schedule_free(b);
        /* rank 0: move its first RECV_GRAD in front of its first SEND_ACT -> deadlock */
        i = find(s, 0, PT_PP_SEND_ACT, 0), j = find(s, 0, PT_PP_RECV_GRAD, 0);
        b = edited(s, 0, -1, i, j);
        err[0] = 0;
        st = b ? pt_pp_schedule_check(b, err, sizeof err) : PT_OK;
        printf("    swap: %s\n", err);
        CHECK_WHY(b && st != PT_OK && strstr(err, "deadlock"), "mutation: a swap that deadlocks is reported as a deadlock", err);
        CHECK_WHY(b && pt_pp_schedule_simulate(b, 1.0, 2.0, NULL) < 0.0, "mutation: simulate refuses the deadlocking copy", "");
        pt_pp_schedule_free(b);
        /* drop rank 0's last BWD (rank 0 sends no gradient, so only the completeness pass sees it) */
        b = edited(s, 0, find(s, 0, PT_PP_BWD, 7), -1, -1);
        err[0] = 0;
        st = b ? pt_pp_schedule_check(b, err, sizeof err) : PT_OK;
        printf("    dropped BWD: %s\n", err);
        CHECK_WHY(b && st != PT_OK && strstr(err, "no BWD of micro-batch 7"), "mutation: a dropped BWD is reported", err);
        pt_pp_schedule_free(b);
        /* drop rank 2's first BWD: its SEND_GRAD comes first */
        b = edited(s, 2, find(s, 2, PT_PP_BWD, 0), -1, -1);
        err[0] = 0;
        st = b ? pt_pp_schedule_check(b, err, sizeof err) : PT_OK;
        printf("    dropped BWD (with send): %s\n", err);
        CHECK_WHY(b && st != PT_OK && strstr(err, "rank 2") && strstr(err, "BWD"), "mutation: a dropped BWD before its send is reported", err);
        pt_pp_schedule_free(b);
        pt_pp_schedule_free(s);
    }

    { /* errors */
        pt_pp_schedule *s;
        err[0] = 0;
        s = pt_pp_schedule_new(PT_PP_INTERLEAVED, 2, 5, 2, err, sizeof err);
        printf("    %s\n", err);
        CHECK_WHY(!s && strstr(err, "m = 5") && strstr(err, "p = 2"), "error: interleaved m=5 p=2 refused naming m and p", err);
        pt_pp_schedule_free(s);
        err[0] = 0;
        s = pt_pp_schedule_new(PT_PP_1F1B, 4, 8, 2, err, sizeof err);
        printf("    %s\n", err);
        CHECK_WHY(!s && strstr(err, "v = 2"), "error: 1F1B with v=2 refused", err);
        pt_pp_schedule_free(s);
        err[0] = 0;
        s = pt_pp_schedule_new(PT_PP_GPIPE, 0, 8, 1, err, sizeof err);
        CHECK_WHY(!s && strstr(err, "p = 0"), "error: p=0 refused", err);
        err[0] = 0;
        s = pt_pp_schedule_new(PT_PP_GPIPE, 2, 0, 1, err, sizeof err);
        CHECK_WHY(!s && strstr(err, "m = 0"), "error: m=0 refused", err);
        err[0] = 0;
        s = pt_pp_schedule_new(PT_PP_INTERLEAVED, 2, 4, 1, err, sizeof err);
        CHECK_WHY(!s && strstr(err, "v = 1"), "error: interleaved v=1 refused", err);
        CHECK_WHY(pt_pp_schedule_check(NULL, err, sizeof err) == PT_ERR_ARG, "error: check(NULL) is PT_ERR_ARG", err);
    }

    { /* the table */
        pt_pp_schedule *s = pt_pp_schedule_new(PT_PP_1F1B, 4, 8, 1, err, sizeof err);
        FILE *f = tmpfile();
        char line[1024];
        int rows = 0, bub = 0;
        if (f && s) {
            pt_pp_schedule_print(s, f);
            rewind(f);
            while (fgets(line, sizeof line, f)) {
                if (strncmp(line, "rank ", 5) == 0) rows++;
                if (strncmp(line, "bubble:", 7) == 0) bub++;
                fputs(line, stdout);
            }
            fclose(f);
        }
        snprintf(why, sizeof why, "%d rows, %d bubble lines", rows, bub);
        CHECK_WHY(rows == 4 && bub == 1, "print: 1F1B p=4 m=8 table has 4 rank rows and a bubble line", why);
        pt_pp_schedule_free(s);
        s = pt_pp_schedule_new(PT_PP_INTERLEAVED, 2, 4, 2, err, sizeof err);
        if (s) pt_pp_schedule_print(s, stdout);
        pt_pp_schedule_free(s);
    }

    return tu_summary();
}
