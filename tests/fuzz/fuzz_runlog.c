/* fuzz_runlog.c - libFuzzer harness of tools/ptreport.c's readers: the JSON-lines run log
   (read_log) and the Chrome trace (read_trace), then the whole report (write_report: every chart and
   the page) into the scratch directory, so that absurd values in a log that reads reach the
   drawing code too. Input: the log, then (optional) FZ_SEP and the trace. ptreport.c is included
   whole (PTREPORT_NO_MAIN); in fuzz_all.c it comes last, as its macros (W, H, KEY, ...) are short. */
#define _POSIX_C_SOURCE 200809L
#define PTREPORT_NO_MAIN
#include "../../tools/ptreport.c"
#include "fuzz_util.h"

FZ_ENTRY(runlog) {
    const char *dir = fz_dir();
    char logp[700], trp[700], out[700];
    const uint8_t *p2;
    size_t n1, n2;
    run r;
    trace t;
    fz_split(data, size, &n1, &p2, &n2);
    if (!fz_write(logp, sizeof logp, dir, "log.jsonl", data, n1)) abort();
    if (p2 && !fz_write(trp, sizeof trp, dir, "trace.json", p2, n2)) abort();
    memset(&r, 0, sizeof r);
    memset(&t, 0, sizeof t);
    snprintf(out, sizeof out, "%s/report", dir);
    if (read_log(logp, &r) == 0 && (!p2 || read_trace(trp, &t) == 0) && mkdir(out, 0777) == 0)
        fz_note("write_report", write_report(out, "fuzz", &r, p2 ? &t : NULL, -1), NULL);
    run_free(&r);
    trace_free(&t);
    return 0;
}
