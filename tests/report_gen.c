/* report_gen.c - inputs and checks for tests/report_test.sh (tools/ptreport).
   report_gen log FILE STEPS VAL_EVERY RANKS    a synthetic JSON-lines log; prints the expected counts
   report_gen trace FILE RANKS MB STEPS [bare]  a synthetic GPipe trace of STEPS complete steps and one
                                                partial step after them; prints the expected counts
   report_gen ptrun FILE                        a log of a run under tools/ptrun: two failures (the first one
                                                an injected kill that shrinks dp 2->1, the second a hang
                                                without a fault stamp, same layout); prints the expected counts
   report_gen wellformed FILE...                tags balanced, attributes quoted, no raw '<' or stray '&'
   The expected values are computed here from what is written, independently of ptreport. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double loss_at(int s) { return 1.0 + 3.0 * exp(-s / 300.0) + 0.05 * sin(s * 0.7); }

static int gen_log(const char *path, int steps, int val_every, int ranks) {
    FILE *f = fopen(path, "w");
    int s, r, nval = 0, nloss = 0, nev = 0, nev_step = 0;
    double last = 0, tstep = 0, tbub = 0;
    if (!f) return 1;
    fprintf(f, "{\"event\":\"run_start\",\"time\":\"2026-01-02T03:04:05Z\",\"config\":{\"model\":\"gpt \\\"tiny\\\" \\u00e9\","
               "\"layout\":{\"dp\":2,\"tp\":1,\"pp\":%d},\"schedule\":\"1f1b\",\"steps\":%d,\"batch\":8,\"ok\":true,\"note\":null},"
               "\"flops_per_token\":1.5e6,\"peak_flops\":2e12,\"mfu_formula\":\"tokens_per_s * flops_per_token / (ranks * peak_flops)\"}\n",
            ranks, steps);
    fprintf(f, "\n"); /* a blank line is skipped */
    for (s = 1; s <= steps; s++) {
        double t_c = 0.2 + 0.01 * (s % 7), t_comm = 0.03, t_b = 0.05, t_d = 0.002, t_k = s % 100 == 0 ? 0.1 : 0;
        double t_s = t_c + t_comm + t_b + t_d + t_k + 0.004;
        int nan_here = s == 57 && steps >= 57;
        if (nan_here) fprintf(f, "{\"step\":%d,\"loss\":NaN,\"grad_norm\":Infinity,\"lr\":1e-3}\n", s);
        else {
            fprintf(f, "{\"step\":%d,\"loss\":%.6f,\"grad_norm\":%.5f,\"lr\":%.6e,\"tokens_per_s\":%.1f,\"mfu\":%.5f,"
                       "\"t_step\":%.6f,\"t_compute\":%.6f,\"t_comm\":%.6f,\"t_bubble\":%.6f,\"t_data\":%.6f,\"t_ckpt\":%.6f,"
                       "\"mem_peak_bytes\":%d,\"mem_rank_bytes\":[",
                    s, loss_at(s), 1.0 + 0.3 * cos(s * 0.1), 1e-3 * (s < 20 ? s / 20.0 : 1.0), 4096 / t_s, 0.3 + 0.001 * (s % 10),
                    t_s, t_c, t_comm, t_b, t_d, t_k, 300 << 20);
            for (r = 0; r < ranks; r++) fprintf(f, "%s%d", r ? "," : "", (200 + 25 * r) << 20);
            fprintf(f, "],\"straggler_rank\":%d,\"straggler_s\":0.01,\"unknown_key\":{\"a\":[1,{\"b\":\"\\t\"}]}", s % 3 == 0 ? 1 : 0);
            if (s % val_every == 0) fprintf(f, ",\"val_loss\":%.6f", loss_at(s) + 0.1), nval++;
            fprintf(f, "}\n");
            nloss++;
            last = loss_at(s);
            tstep += t_s, tbub += t_b;
        }
        if (nan_here) fprintf(f, "{\"event\":\"nan\",\"step\":%d,\"what\":\"loss\"}\n", s), nev++, nev_step++;
        if (s == 120 && steps >= 120) fprintf(f, "{\"event\":\"spike\",\"step\":%d,\"z\":6.5}\n", s), nev++, nev_step++;
        if (s == 121 && steps >= 121) fprintf(f, "{\"event\":\"rollback\",\"step\":%d,\"to\":100}\n", s), nev++, nev_step++;
        if (s % 100 == 0) fprintf(f, "{\"event\":\"ckpt_save\",\"step\":%d,\"path\":\"ck/step_%d\"}\n", s, s), nev++, nev_step++;
    }
    fprintf(f, "{\"event\":\"replica_mismatch\",\"ranks\":[0,1]}\n"), nev++; /* an event without a step */
    fclose(f);
    printf("loss_points=%d val_points=%d events=%d event_markers=%d final_loss=%.4f bubble_pct=%.1f\n", nloss, nval, nev,
           nev_step, last, 100 * tbub / tstep);
    return 0;
}

/* GPipe on `ranks` stages: forwards of every micro-batch, then backwards; a send after each forward but
   the last stage's, an allreduce per rank on thread 1. Rank 0 is written with B/E pairs. */
static int gen_trace(const char *path, int ranks, int mb, int steps, int bare) {
    FILE *f = fopen(path, "w");
    int s, r, m, first = 1, per_step = 0;
    const double tf = 1000, tb = 2000, step_us = (mb + ranks) * (tf + tb) + 5000;
    if (!f) return 1;
    fprintf(f, bare ? "[\n" : "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n");
#define SEP() (first ? (first = 0, "") : ",\n")
    for (r = 0; r < ranks; r++)
        fprintf(f, "%s{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":\"stage %d\"}}", SEP(), r, r);
    for (s = 0; s <= steps; s++) {
        double base = 1000 + s * step_us;
        int nr = s == steps ? 1 : ranks; /* the last step: only rank 0 wrote (the trace was cut) */
        for (r = 0; r < nr; r++) {
            for (m = 0; m < mb; m++) {
                double fs = base + (m + r) * tf, bs = base + (mb + ranks - 1) * tf + (m + ranks - 1 - r) * tb;
                if (r == 0) {
                    fprintf(f, "%s{\"name\":\"fwd\",\"cat\":\"forward\",\"ph\":\"B\",\"ts\":%.1f,\"pid\":0,\"tid\":0,\"args\":{\"mb\":%d,\"step\":%d}}", SEP(), fs, m, s);
                    fprintf(f, "%s{\"ph\":\"E\",\"ts\":%.1f,\"pid\":0,\"tid\":0}", SEP(), fs + tf * 0.9);
                    if (s == steps && m == mb - 1) break; /* and its last backward never ended */
                    fprintf(f, "%s{\"name\":\"bwd\",\"cat\":\"backward\",\"ph\":\"B\",\"ts\":%.1f,\"pid\":0,\"tid\":0,\"args\":{\"mb\":%d,\"step\":%d}}", SEP(), bs, m, s);
                    if (s == steps && m == 0) continue;
                    fprintf(f, "%s{\"ph\":\"E\",\"ts\":%.1f,\"pid\":0,\"tid\":0}", SEP(), bs + tb * 0.9);
                } else {
                    fprintf(f, "%s{\"name\":\"fwd\",\"cat\":\"forward\",\"ph\":\"X\",\"ts\":%.1f,\"dur\":%.1f,\"pid\":%d,\"tid\":0,\"args\":{\"mb\":%d,\"step\":%d}}",
                            SEP(), fs, tf * 0.9, r, m, s);
                    fprintf(f, "%s{\"name\":\"bwd\",\"cat\":\"backward\",\"ph\":\"X\",\"ts\":%.1f,\"dur\":%.1f,\"pid\":%d,\"tid\":0,\"args\":{\"mb\":%d,\"step\":%d}}",
                            SEP(), bs, tb * 0.9, r, m, s);
                }
                if (r < ranks - 1 && s < steps)
                    fprintf(f, "%s{\"name\":\"send act\",\"cat\":\"sendrecv\",\"ph\":\"X\",\"ts\":%.1f,\"dur\":%.1f,\"pid\":%d,\"tid\":0,\"args\":{\"mb\":%d,\"step\":%d}}",
                            SEP(), fs + tf * 0.9, tf * 0.1, r, m, s);
            }
            if (s < steps)
                fprintf(f, "%s{\"name\":\"allreduce\",\"cat\":\"comm\",\"ph\":\"X\",\"ts\":%.1f,\"dur\":%.1f,\"pid\":%d,\"tid\":1,\"args\":{\"step\":%d}}",
                        SEP(), base + (mb + ranks - 1) * tf + (mb + ranks - 1) * tb, 3000.0, r, s);
        }
    }
    per_step = ranks * 2 * mb + (ranks - 1) * mb + ranks;
    fprintf(f, bare ? "\n" : "\n]}\n"); /* a bare array may end without ']', as Chrome allows */
    fclose(f);
    printf("step=%d events=%d ranks=%d\n", steps - 1, per_step, ranks);
    return 0;
}

/* a supervised run: attempt 1 (dp 2, steps 0..16) is killed at step 17 and resumes at 15 with dp 1
   (accum 2); attempt 2 (steps 15..24) hangs at step 25 and resumes at 20, same layout; attempt 3 runs
   steps 20..30. The step lines of a resumed attempt start again at its resume step. */
static int gen_ptrun(const char *path) {
    static const struct { int first, last, fail, resume; } att[3] = {{0, 16, 17, 15}, {15, 24, 25, 20}, {20, 30, -1, -1}};
    FILE *f = fopen(path, "w");
    int a, s, lines = 0, redone = 0, runs = 0, kept = 0, lo = 1 << 30;
    if (!f) return 1;
    fprintf(f, "{\"event\":\"ptrun_launch\",\"step\":0,\"wall\":1765000000.10,\"attempt\":1,\"dp\":2,\"tp\":1,\"pp\":2,\"accum\":1,\"hosts\":\"a,b\",\"np\":4,\"resume_step\":0}\n");
    for (a = 0; a < 3; a++) {
        fprintf(f, "{\"event\":\"run_start\",\"config\":{\"model\":\"ptrun test\",\"layout\":{\"dp\":%d,\"tp\":1,\"pp\":2}},\"first_step\":%d}\n", a ? 1 : 2, att[a].first);
        if (a) fprintf(f, "{\"event\":\"ckpt_load\",\"step\":%d,\"dir\":\"ck\",\"ckpt_step\":%d}\n", att[a].first, att[a].first);
        for (s = att[a].first; s <= att[a].last; s++, lines++) {
            fprintf(f, "{\"step\":%d,\"loss\":%.6f,\"tokens_per_s\":%d", s, loss_at(s * 10) + 0.02 * a, a ? 3000 : 4000);
            if (s % 10 == 0) fprintf(f, ",\"val_loss\":%.6f", loss_at(s * 10) + 0.1);
            fprintf(f, "}\n");
            if (a == 0 && s == 9)
                fprintf(f, "{\"event\":\"ptrun_straggler\",\"step\":9,\"wall\":1765000007.00,\"attempt\":1,\"rank\":1,\"host\":\"a\",\"work_s\":0.52,\"median_s\":0.11}\n");
        }
        if (a == 1) /* written by ptrun after the relaunched job's first step */
            fprintf(f, "{\"event\":\"ptrun_recovered\",\"step\":15,\"wall\":1765000021.40,\"attempt\":2,\"recover_s\":9.1,\"steps_lost\":2}\n");
        if (a == 2)
            fprintf(f, "{\"event\":\"ptrun_recovered\",\"step\":20,\"wall\":1765000050.25,\"attempt\":3,\"recover_s\":10.25,\"steps_lost\":5}\n");
        if (a == 0) {
            fprintf(f, "{\"event\":\"ptrun_fault\",\"step\":17,\"wall\":1765000012.30,\"attempt\":1,\"rank\":3,\"host\":\"b\",\"kind\":\"kill\"}\n");
            fprintf(f, "{\"event\":\"ptrun_detected\",\"step\":17,\"wall\":1765000012.71,\"attempt\":1,\"rank\":3,\"host\":\"b\",\"what\":\"died\","
                       "\"detail\":\"channel closed without bye\",\"latency_s\":0.41}\n");
            fprintf(f, "{\"event\":\"ptrun_teardown\",\"step\":17,\"wall\":1765000013.90,\"attempt\":1,\"seconds\":1.19,\"left\":0}\n");
            fprintf(f, "{\"event\":\"ptrun_relaunch\",\"step\":15,\"wall\":1765000015.00,\"attempt\":2,\"restart\":1,\"max_restarts\":5,\"dp_from\":2,"
                       "\"dp\":1,\"accum_from\":1,\"accum\":2,\"tp\":1,\"pp\":2,\"hosts\":\"a\",\"resume_step\":15,\"backoff_s\":1.0}\n");
        } else if (a == 1) { /* a hang: no fault stamp, so no latency */
            fprintf(f, "{\"event\":\"ptrun_detected\",\"step\":25,\"wall\":1765000040.00,\"attempt\":2,\"rank\":0,\"host\":\"a\",\"what\":\"hung\","
                       "\"detail\":\"no heartbeat for 10 s\"}\n");
            fprintf(f, "{\"event\":\"ptrun_teardown\",\"step\":25,\"wall\":1765000042.50,\"attempt\":2,\"seconds\":2.5,\"left\":0}\n");
            fprintf(f, "{\"event\":\"ptrun_relaunch\",\"step\":20,\"wall\":1765000044.00,\"attempt\":3,\"restart\":2,\"max_restarts\":5,\"dp_from\":1,"
                       "\"dp\":1,\"accum_from\":2,\"accum\":2,\"tp\":1,\"pp\":2,\"hosts\":\"a\",\"resume_step\":20,\"backoff_s\":1.5}\n");
        }
    }
    fprintf(f, "{\"event\":\"ptrun_end\",\"step\":31,\"wall\":1765000060.00,\"ok\":true,\"restarts\":2,\"steps_lost\":7,\"time_lost_s\":19.35,\"exit\":0}\n");
    fclose(f);
    /* the points drawn: a step line is "done again" when a later attempt resumes at or before it */
    for (a = 2; a >= 0; a--) {
        int r = 0;
        for (s = att[a].last; s >= att[a].first; s--)
            if (s >= lo) redone++, r = 1;
            else kept++;
        runs += r;
        if (att[a].first < lo) lo = att[a].first;
    }
    printf("loss_lines=%d kept_points=%d redone_points=%d redone_lines=%d failures=2 restarts=2\n", lines, kept, redone + runs, runs);
    return 0;
}

/* tags balance (void HTML elements allowed), attribute values quoted, '&' starts an entity */
static int wellformed(const char *path) {
    static const char *voids[] = {"meta", "br", "img", "hr", "link", "input", "!DOCTYPE"};
    FILE *f = fopen(path, "rb");
    char *s, stack[256][32];
    long n, i, line = 1, depth = 0;
    if (!f) return printf("%s: cannot open\n", path), 1;
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    s = (char *)malloc((size_t)n + 1);
    if (!s || fread(s, 1, (size_t)n, f) != (size_t)n) return printf("%s: cannot read\n", path), 1;
    s[n] = 0;
    fclose(f);
    for (i = 0; i < n; i++) {
        if (s[i] == '\n') line++;
        if (s[i] == '&') {
            long j = i + 1;
            while (j < n && j - i < 10 && (s[j] == '#' || (s[j] >= 'a' && s[j] <= 'z') || (s[j] >= '0' && s[j] <= '9'))) j++;
            if (j >= n || s[j] != ';' || j == i + 1) return printf("%s:%ld: '&' not starting an entity\n", path, line), 1;
        }
        if (s[i] == '>') return printf("%s:%ld: '>' outside a tag\n", path, line), 1;
        if (s[i] == '<') {
            char name[32];
            int close = 0, k = 0, self = 0;
            long j = i + 1;
            if (s[j] == '/') close = 1, j++;
            while (j < n && s[j] != ' ' && s[j] != '>' && s[j] != '/' && s[j] != '\n' && k < 31) name[k++] = s[j++];
            name[k] = 0;
            if (k == 0 || !(name[0] == '!' || (name[0] >= 'a' && name[0] <= 'z') || (name[0] >= 'A' && name[0] <= 'Z')))
                return printf("%s:%ld: raw '<' in text\n", path, line), 1;
            for (; j < n && s[j] != '>'; j++) { /* attributes: skip quoted values */
                if (s[j] == '<') return printf("%s:%ld: '<' inside tag <%s>\n", path, line, name), 1;
                if (s[j] == '=') {
                    char q = s[j + 1];
                    if (q != '"' && q != '\'') return printf("%s:%ld: unquoted attribute in <%s>\n", path, line, name), 1;
                    for (j += 2; j < n && s[j] != q; j++)
                        if (s[j] == '<') return printf("%s:%ld: '<' in an attribute of <%s>\n", path, line, name), 1;
                }
            }
            if (j >= n) return printf("%s:%ld: tag <%s> not closed\n", path, line, name), 1;
            self = s[j - 1] == '/';
            for (k = 0; k < 7; k++)
                if (strcmp(name, voids[k]) == 0) self = 1;
            if (close) {
                if (depth == 0 || strcmp(stack[depth - 1], name) != 0)
                    return printf("%s:%ld: </%s> closes <%s>\n", path, line, name, depth ? stack[depth - 1] : "(nothing)"), 1;
                depth--;
            } else if (!self) {
                if (depth == 256) return printf("%s:%ld: nested too deep\n", path, line), 1;
                strcpy(stack[depth++], name);
            }
            for (; i < j; i++)
                if (s[i] == '\n') line++;
        }
    }
    free(s);
    if (depth) return printf("%s: <%s> never closed\n", path, stack[depth - 1]), 1;
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 6 && strcmp(argv[1], "log") == 0) return gen_log(argv[2], atoi(argv[3]), atoi(argv[4]), atoi(argv[5]));
    if ((argc == 6 || argc == 7) && strcmp(argv[1], "trace") == 0)
        return gen_trace(argv[2], atoi(argv[3]), atoi(argv[4]), atoi(argv[5]), argc == 7 && strcmp(argv[6], "bare") == 0);
    if (argc == 3 && strcmp(argv[1], "ptrun") == 0) return gen_ptrun(argv[2]);
    if (argc >= 3 && strcmp(argv[1], "wellformed") == 0) {
        int i, bad = 0;
        for (i = 2; i < argc; i++) bad |= wellformed(argv[i]);
        return bad;
    }
    fprintf(stderr, "usage: report_gen log FILE STEPS VAL_EVERY RANKS | trace FILE RANKS MB STEPS [bare] | ptrun FILE | wellformed FILE...\n");
    return 2;
}
