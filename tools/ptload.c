/* ptload.c - a load generator for OpenAI-compatible completion servers (tools/ptserve, llama.cpp's
   llama-server, vLLM): open-loop arrivals, streaming clients, the vLLM serving benchmark's metrics.

   Build: cc -O2 -fopenmp -march=native -I. tools/ptload.c -o build/ptload -lm -lpthread
   (make tools builds it too)

   ptload [flags]
     --url URL            the server (http://127.0.0.1:8080)
     --rate R             requests per second, Poisson arrivals (exponential gaps) (4)
     --burstiness K       gamma-distributed gaps of shape K and mean 1/R instead (K < 1: burstier; 1 = Poisson)
     --requests N         requests in all (64)
     --prompt-len A[:B]   prompt length in words, uniform in [A, B] (8:32)
     --output-len A[:B]   max_tokens, uniform in [A, B] (16:64)
     --trace FILE         lines "PROMPT_LEN OUTPUT_LEN" (instead of the two above; cycled)
     --temperature X      (0.8)   --seed S: the arrivals' and lengths' RNG, and the prompts (1)
   A prompt is the number S x 100003 + its index (unique: no two prompts share a prefix-cache block),
   then its words.
     --slo-ttft S         goodput: a request is good when TTFT <= S (1.0 s) ...
     --slo-tpot S         ... and TPOT <= S (0.2 s)
     --timeout S          a client gives up after S seconds (60): counted as timed out
     --chat               POST /v1/chat/completions instead of /v1/completions
     --ignore-eos         send "ignore_eos": true (llama.cpp's and vLLM's servers then generate max_tokens;
                          tools/ptserve always does, as ptrain's models have no end-of-text token)
   Every request streams (stream_options.include_usage). Metrics, as vLLM's benchmark_serving defines
   them: TTFT (send to the first text chunk), TPOT ((E2E - TTFT) / (output tokens - 1)), ITL (the gaps
   between text chunks), E2E latency; throughput (completed requests and output tokens per second of
   the run), goodput (requests per second meeting both SLOs); the share refused (429) and timed out.
   Prints a table, then one JSON line. Exit status: 0, 1 when no request completed, 2 bad usage. */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <netdb.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "ptflags.h"

typedef struct job {
    int plen, olen, idx;
    double t_send;               /* planned send time (s from the start) */
    int status, timed_out, failed, out_tokens, nitl;
    double ttft, e2e, *itl;
} job;

static char g_host[256], g_port[16];
static double g_temp = 0.8, g_timeout = 60, g_t0;
static int g_chat, g_ignore_eos;
static unsigned g_seed = 1;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
static uint64_t rng_s = 1;
static double urand(void) { /* xorshift64*, in (0, 1) */
    rng_s ^= rng_s >> 12, rng_s ^= rng_s << 25, rng_s ^= rng_s >> 27;
    return ((double)((rng_s * 2685821657736338717ULL) >> 11) + 0.5) / 9007199254740992.0;
}
static double nrand(void) { return sqrt(-2 * log(urand())) * cos(6.283185307179586 * urand()); }
/* gamma(k, 1) by Marsaglia and Tsang (k < 1 boosted) */
static double grand(double k) {
    double d, c, x, v, u;
    if (k < 1) return grand(k + 1) * pow(urand(), 1 / k);
    d = k - 1.0 / 3, c = 1 / sqrt(9 * d);
    for (;;) {
        do x = nrand(), v = 1 + c * x; while (v <= 0);
        v = v * v * v, u = urand();
        if (log(u) < 0.5 * x * x + d - d * v + d * log(v)) return d * v;
    }
}

static const char *const words[] = {"the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "a", "cat", "sat", "on", "mat", "and", "ran"};

static void *client(void *arg) {
    job *j = (job *)arg;
    struct addrinfo hints, *ai = NULL;
    char body[8192], *req, buf[16384], acc[65536];
    size_t nacc = 0;
    int fd = -1, i, n, hdr_done = 0, cap = 64;
    double t, last = 0, wait = j->t_send - (now_s() - g_t0);
    struct timeval tv;
    if (wait > 0) usleep((useconds_t)(wait * 1e6));
    n = snprintf(body, sizeof body, g_chat ? "{\"messages\":[{\"role\":\"user\",\"content\":\"" : "{\"prompt\":\"");
    /* a number of its own first (request and seed), so that no two prompts share a prefix-cache block */
    n += snprintf(body + n, sizeof body - (size_t)n, "%u", g_seed * 100003u + (unsigned)j->idx);
    for (i = 0; i < j->plen && n < (int)sizeof body - 200; i++) n += snprintf(body + n, sizeof body - (size_t)n, " %s", words[(j->idx + i * 7) % 15]);
    n += snprintf(body + n, sizeof body - (size_t)n, "\"%s,\"max_tokens\":%d,\"temperature\":%g,\"seed\":%d,%s\"stream\":true,\"stream_options\":{\"include_usage\":true}}",
                  g_chat ? "}]" : "", j->olen, g_temp, j->idx, g_ignore_eos ? "\"ignore_eos\":true," : "");
    req = (char *)malloc((size_t)n + 512);
    j->itl = (double *)malloc(sizeof(double) * (size_t)cap);
    if (!req || !j->itl) return (j->failed = 1, NULL);
    snprintf(req, (size_t)n + 512, "POST %s HTTP/1.1\r\nHost: %s:%s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
             g_chat ? "/v1/chat/completions" : "/v1/completions", g_host, g_port, n, body);
    t = now_s();
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC, hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(g_host, g_port, &hints, &ai) || (fd = socket(ai->ai_family, ai->ai_socktype, 0)) < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen)) {
        j->failed = 1;
        goto out;
    }
    tv.tv_sec = (time_t)g_timeout, tv.tv_usec = 0;
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (write(fd, req, strlen(req)) < 0) {
        j->failed = 1;
        goto out;
    }
    j->ttft = -1;
    for (;;) {
        ssize_t k = read(fd, buf, sizeof buf);
        double tn = now_s();
        char *p;
        if (tn - t > g_timeout || (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))) {
            j->timed_out = 1;
            break;
        }
        if (k <= 0) break;
        if (nacc + (size_t)k >= sizeof acc) nacc = 0; /* only the recent bytes matter */
        memcpy(acc + nacc, buf, (size_t)k), nacc += (size_t)k, acc[nacc] = 0;
        if (!hdr_done) {
            if (!(p = strstr(acc, "\r\n\r\n"))) continue;
            j->status = atoi(acc + 9);
            hdr_done = 1;
            if (j->status != 200) break;
        }
        /* each event with text: a chunk; the usage chunk: the token count */
        while ((p = strstr(acc, "\n\n")) != NULL) {
            char *ev = acc, *q;
            size_t len = (size_t)(p - acc) + 2;
            *p = 0;
            if ((q = strstr(ev, "\"completion_tokens\":")) != NULL) j->out_tokens = atoi(q + 20);
            else if ((q = strstr(ev, g_chat ? "\"content\":\"" : "\"text\":\"")) != NULL && q[g_chat ? 11 : 8] != '"') {
                if (j->ttft < 0) j->ttft = tn - t;
                else {
                    if (j->nitl == cap) {
                        double *r2 = (double *)realloc(j->itl, sizeof(double) * (size_t)(cap *= 2));
                        if (!r2) break;
                        j->itl = r2;
                    }
                    j->itl[j->nitl++] = tn - last;
                }
                last = tn;
            }
            memmove(acc, acc + len, nacc - len + 1), nacc -= len;
        }
    }
    j->e2e = now_s() - t;
    if (!j->out_tokens && j->ttft >= 0) j->out_tokens = j->nitl + 1; /* no usage chunk: one token per text chunk */
out:
    if (fd >= 0) close(fd);
    if (ai) freeaddrinfo(ai);
    free(req);
    return NULL;
}

static int cmpd(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static double pct(double *v, int n, double p) {
    double r;
    int i;
    if (n == 0) return NAN;
    r = p / 100 * (n - 1), i = (int)r;
    return i + 1 < n ? v[i] + (r - i) * (v[i + 1] - v[i]) : v[n - 1];
}
/* the command line */
typedef struct load_opts {
    const char *url, *trace;
    double rate, burst, slo_ttft, slo_tpot;
    long nreq;
    int pa, pb, oa, ob;
} load_opts;

/* the run's results, as vLLM's benchmark defines them */
typedef struct load_stats {
    double elapsed, *arr[4]; /* TTFT, TPOT, ITL, E2E, each sorted */
    int cnt[4];
    int done, refused, timed, failed, good;
    long long out_tok;
} load_stats;

static const char usage_text[] =
    "usage: ptload [--url URL] [--rate R] [--burstiness K] [--requests N] [--prompt-len A[:B]] [--output-len A[:B]] [--trace FILE]\n"
    "              [--temperature X] [--seed S] [--slo-ttft S] [--slo-tpot S] [--timeout S] [--chat] [--ignore-eos]   (see tools/ptload.c)\n";

static int flag_range(void *dst, const char *tool, const char *flag, const char *v) { /* A or A:B into dst[0], dst[1] */
    int *a = (int *)dst, *b = a + 1;
    if (sscanf(v, "%d:%d", a, b) == 2 || (sscanf(v, "%d", a) == 1 && (*b = *a, 1)))
        if (*a >= 1 && *b >= *a) return 0;
    return ptf_bad(tool, flag, "A or A:B with 1 <= A <= B", v);
}

static int flag_seed(void *dst, const char *tool, const char *flag, const char *v) { /* the RNG seeded from S (unseeded: 1) */
    long x;
    (void)dst;
    if (ptf_long(tool, flag, v, 0, 4294967295.0, &x)) return 2;
    g_seed = (unsigned)x, rng_s = (uint64_t)g_seed * 2654435761ULL + 1;
    return 0;
}

/* parse_flags: the command line into o (and the globals the clients read); PTF_GO, or the exit status */
static int parse_flags(load_opts *o, int argc, char **argv) {
    int rc;
    const ptf_flag flags[] = {PTF_STR("--url", &o->url),
                              PTF_REAL_X("--rate", &o->rate, 0, 1e9, PTF_OPEN_LO, "requests per second > 0"),
                              PTF_REAL_X("--burstiness", &o->burst, 0, 1e9, PTF_OPEN_LO, "a gamma shape > 0"),
                              PTF_LONG("--requests", &o->nreq, 1, 100000),
                              PTF_FN("--prompt-len", flag_range, &o->pa),
                              PTF_FN("--output-len", flag_range, &o->oa),
                              PTF_STR("--trace", &o->trace),
                              PTF_REAL("--temperature", &g_temp, 0, 1e9), /* the server checks it */
                              PTF_FN("--seed", flag_seed, NULL),
                              PTF_REAL("--slo-ttft", &o->slo_ttft, 0, 1e9),
                              PTF_REAL("--slo-tpot", &o->slo_tpot, 0, 1e9),
                              PTF_REAL_X("--timeout", &g_timeout, 0, 1e9, PTF_OPEN_LO, "seconds > 0"),
                              PTF_BOOL("--chat", &g_chat),
                              PTF_BOOL("--ignore-eos", &g_ignore_eos),
                              PTF_END};
    o->url = "http://127.0.0.1:8080", o->trace = NULL, o->rate = 4, o->burst = 1, o->slo_ttft = 1.0, o->slo_tpot = 0.2;
    o->nreq = 64, o->pa = 8, o->pb = 32, o->oa = 16, o->ob = 64;
    if ((rc = ptf_parse("ptload", usage_text, flags, argc, argv)) != PTF_GO) return rc;
    if (sscanf(o->url, "http://%255[^:/]:%15[0-9]", g_host, g_port) < 1) {
        fprintf(stderr, "ptload: --url expects http://HOST[:PORT], found '%s'\n", o->url);
        return 2;
    }
    if (!g_port[0]) strcpy(g_port, "80");
    return PTF_GO;
}

/* plan_jobs: each request's lengths (from --trace, cycled, or uniform in the ranges) and send time
   (Poisson or gamma gaps); NULL, with *rc the exit status, after a message */
static job *plan_jobs(const load_opts *o, int *rc) {
    int *trp = NULL, *tro = NULL, ntr = 0, captr = 0, i;
    double t;
    job *jobs;
    *rc = 1;
    if (o->trace) {
        FILE *fp = fopen(o->trace, "r");
        int a, b;
        if (!fp) return fprintf(stderr, "ptload: --trace %s: %s\n", o->trace, strerror(errno)), *rc = 2, (job *)NULL;
        while (fscanf(fp, "%d %d", &a, &b) == 2) {
            if (ntr == captr) {
                int *p, *q;
                captr = captr ? 2 * captr : 256;
                p = (int *)realloc(trp, sizeof(int) * (size_t)captr), trp = p ? p : trp;
                q = (int *)realloc(tro, sizeof(int) * (size_t)captr), tro = q ? q : tro;
                if (!p || !q) return fclose(fp), free(trp), free(tro), (job *)NULL;
            }
            trp[ntr] = a < 1 ? 1 : a, tro[ntr++] = b < 1 ? 1 : b;
        }
        fclose(fp);
        if (!ntr) return fprintf(stderr, "ptload: --trace %s: no lines \"PROMPT_LEN OUTPUT_LEN\"\n", o->trace), *rc = 2, (job *)NULL;
    }
    if ((jobs = (job *)calloc((size_t)o->nreq, sizeof *jobs)) != NULL)
        for (i = 0, t = 0; i < o->nreq; i++) {
            jobs[i].idx = i, jobs[i].t_send = t;
            jobs[i].plen = ntr ? trp[i % ntr] : o->pa + (int)(urand() * (o->pb - o->pa + 1));
            jobs[i].olen = ntr ? tro[i % ntr] : o->oa + (int)(urand() * (o->ob - o->oa + 1));
            t += o->burst == 1 ? -log(urand()) / o->rate : grand(o->burst) / (o->burst * o->rate);
        }
    free(trp), free(tro);
    return jobs;
}

/* run_clients: one thread per request, each sending at its time; the seconds the run took, or -1 */
static double run_clients(job *jobs, int n) {
    pthread_t *th = (pthread_t *)calloc((size_t)n, sizeof *th);
    int i;
    if (!th) return -1;
    g_t0 = now_s();
    for (i = 0; i < n; i++)
        if (pthread_create(&th[i], NULL, client, &jobs[i])) { jobs[i].failed = 1, th[i] = 0; }
    for (i = 0; i < n; i++)
        if (th[i]) pthread_join(th[i], NULL);
    free(th);
    return now_s() - g_t0;
}

/* tally: the requests' outcomes and latencies into st (sorted); 0, or 1 out of memory */
static int tally(const load_opts *o, const job *jobs, load_stats *st) {
    int i, k, nitl = 0, n = (int)o->nreq;
    for (i = 0; i < n; i++) nitl += jobs[i].nitl;
    st->arr[0] = (double *)malloc(sizeof(double) * (size_t)n), st->arr[1] = (double *)malloc(sizeof(double) * (size_t)n);
    st->arr[2] = (double *)malloc(sizeof(double) * (size_t)(nitl + 1)), st->arr[3] = (double *)malloc(sizeof(double) * (size_t)n);
    if (!st->arr[0] || !st->arr[1] || !st->arr[2] || !st->arr[3]) return 1;
    for (i = 0; i < n; i++) {
        const job *j = &jobs[i];
        if (j->status == 429) st->refused++;
        else if (j->timed_out) st->timed++;
        else if (j->failed || j->status != 200 || j->ttft < 0) st->failed++;
        else {
            double tp = j->out_tokens > 1 ? (j->e2e - j->ttft) / (j->out_tokens - 1) : 0;
            st->done++, st->out_tok += j->out_tokens;
            st->arr[0][st->cnt[0]++] = j->ttft, st->arr[3][st->cnt[3]++] = j->e2e;
            if (j->out_tokens > 1) st->arr[1][st->cnt[1]++] = tp;
            for (k = 0; k < j->nitl; k++) st->arr[2][st->cnt[2]++] = j->itl[k];
            if (j->ttft <= o->slo_ttft && tp <= o->slo_tpot) st->good++;
        }
    }
    for (k = 0; k < 4; k++) qsort(st->arr[k], (size_t)st->cnt[k], sizeof(double), cmpd);
    return 0;
}

/* print_report: the table, then one JSON line */
static void print_report(const load_opts *o, const load_stats *st) {
    const char *sect[4] = {"TTFT", "TPOT", "ITL", "E2E"}, *nm[4] = {"ttft", "tpot", "itl", "e2e"};
    const double ps[3] = {50, 90, 99};
    double el = st->elapsed;
    int i, k, q, nreq = (int)o->nreq;
    printf("ptload: %s, %d requests at %.3g/s (%s), %.2f s\n", o->url, nreq, o->rate, o->burst == 1 ? "Poisson" : "gamma-bursty", el);
    printf("  completed %d, refused (429) %d, timed out %d, failed %d\n", st->done, st->refused, st->timed, st->failed);
    printf("  throughput %.3f requests/s, %.1f output tokens/s; goodput %.3f requests/s (TTFT <= %g s, TPOT <= %g s)\n", st->done / el,
           (double)st->out_tok / el, st->good / el, o->slo_ttft, o->slo_tpot);
    printf("  %-5s %10s %10s %10s %10s  (ms)\n", "", "mean", "p50", "p90", "p99");
    for (k = 0; k < 4; k++) {
        double s = 0, *a = st->arr[k];
        int c = st->cnt[k];
        for (i = 0; i < c; i++) s += a[i];
        printf("  %-5s %10.2f %10.2f %10.2f %10.2f\n", sect[k], c ? 1e3 * s / c : NAN, 1e3 * pct(a, c, 50), 1e3 * pct(a, c, 90), 1e3 * pct(a, c, 99));
    }
    printf("{\"tool\":\"ptload\",\"url\":\"%s\",\"rate\":%g,\"burstiness\":%g,\"requests\":%d,\"duration_s\":%.4f,\"completed\":%d,\"refused\":%d,\"timed_out\":%d,"
           "\"failed\":%d,\"refused_share\":%.4f,\"timed_out_share\":%.4f,\"request_throughput\":%.4f,\"output_throughput\":%.2f,\"goodput\":%.4f,"
           "\"slo_ttft_s\":%g,\"slo_tpot_s\":%g",
           o->url, o->rate, o->burst, nreq, el, st->done, st->refused, st->timed, st->failed, (double)st->refused / nreq, (double)st->timed / nreq,
           st->done / el, (double)st->out_tok / el, st->good / el, o->slo_ttft, o->slo_tpot);
    for (k = 0; k < 4; k++)
        for (q = 0; q < 3; q++) {
            double v = pct(st->arr[k], st->cnt[k], ps[q]);
            if (isnan(v)) printf(",\"p%g_%s_ms\":null", ps[q], nm[k]);
            else printf(",\"p%g_%s_ms\":%.3f", ps[q], nm[k], 1e3 * v);
        }
    printf("}\n");
}

int main(int argc, char **argv) {
    load_opts o;
    load_stats st;
    job *jobs;
    int rc, i, k;
    memset(&st, 0, sizeof st);
    if ((rc = parse_flags(&o, argc, argv)) != PTF_GO) return rc;
    if (!(jobs = plan_jobs(&o, &rc))) return rc;
    rc = (st.elapsed = run_clients(jobs, (int)o.nreq)) < 0 || tally(&o, jobs, &st);
    if (!rc) print_report(&o, &st);
    for (i = 0; i < o.nreq; i++) free(jobs[i].itl);
    for (k = 0; k < 4; k++) free(st.arr[k]);
    free(jobs);
    return rc ? 1 : st.done ? 0 : 1;
}
