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
static int range(const char *flag, const char *v, int *a, int *b) {
    if (sscanf(v, "%d:%d", a, b) == 2 || (sscanf(v, "%d", a) == 1 && (*b = *a, 1)))
        if (*a >= 1 && *b >= *a) return 0;
    fprintf(stderr, "ptload: %s expects A or A:B with 1 <= A <= B, found '%s'\n", flag, v);
    return -1;
}

int main(int argc, char **argv) {
    const char *url = "http://127.0.0.1:8080", *trace = NULL;
    double rate = 4, burst = 1, slo_ttft = 1.0, slo_tpot = 0.2, t, elapsed;
    int nreq = 64, pa = 8, pb = 32, oa = 16, ob = 64, i, k, ntr = 0, done = 0, refused = 0, timed = 0, failed = 0, good = 0, captr = 0;
    long long out_tok = 0;
    int *trp = NULL, *tro = NULL;
    job *jobs;
    pthread_t *th;
    double *ttft, *tpot, *itl, *e2e;
    int nt = 0, np = 0, ni = 0, ne = 0, nitl = 0;
    const char *sect[4] = {"TTFT", "TPOT", "ITL", "E2E"};
    double *arr[4];
    int *cnt[4];
    for (i = 1; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(f, "--chat")) { g_chat = 1; continue; }
        if (!strcmp(f, "--ignore-eos")) { g_ignore_eos = 1; continue; }
        if (!strcmp(f, "-h") || !strcmp(f, "--help") || !v) {
            fprintf(stderr, "usage: ptload [--url URL] [--rate R] [--burstiness K] [--requests N] [--prompt-len A[:B]] [--output-len A[:B]] [--trace FILE]\n"
                            "              [--temperature X] [--seed S] [--slo-ttft S] [--slo-tpot S] [--timeout S] [--chat] [--ignore-eos]   (see tools/ptload.c)\n");
            return strcmp(f, "-h") && strcmp(f, "--help") ? 2 : 0;
        }
        if (!strcmp(f, "--url")) url = v;
        else if (!strcmp(f, "--rate")) rate = atof(v);
        else if (!strcmp(f, "--burstiness")) burst = atof(v);
        else if (!strcmp(f, "--requests")) nreq = atoi(v);
        else if (!strcmp(f, "--prompt-len")) { if (range(f, v, &pa, &pb)) return 2; }
        else if (!strcmp(f, "--output-len")) { if (range(f, v, &oa, &ob)) return 2; }
        else if (!strcmp(f, "--trace")) trace = v;
        else if (!strcmp(f, "--temperature")) g_temp = atof(v);
        else if (!strcmp(f, "--seed")) g_seed = (unsigned)strtoul(v, NULL, 10), rng_s = (uint64_t)g_seed * 2654435761ULL + 1;
        else if (!strcmp(f, "--slo-ttft")) slo_ttft = atof(v);
        else if (!strcmp(f, "--slo-tpot")) slo_tpot = atof(v);
        else if (!strcmp(f, "--timeout")) g_timeout = atof(v);
        else { fprintf(stderr, "ptload: unknown flag %s\n", f); return 2; }
        i++;
    }
    if (!(rate > 0) || !(burst > 0) || nreq < 1 || nreq > 100000 || !(g_timeout > 0)) {
        fprintf(stderr, "ptload: --rate and --burstiness expect numbers > 0, --requests 1..100000, --timeout > 0\n");
        return 2;
    }
    if (sscanf(url, "http://%255[^:/]:%15[0-9]", g_host, g_port) < 1) {
        fprintf(stderr, "ptload: --url expects http://HOST[:PORT], found '%s'\n", url);
        return 2;
    }
    if (!g_port[0]) strcpy(g_port, "80");
    if (trace) {
        FILE *fp = fopen(trace, "r");
        int a, b;
        if (!fp) { fprintf(stderr, "ptload: --trace %s: %s\n", trace, strerror(errno)); return 2; }
        while (fscanf(fp, "%d %d", &a, &b) == 2) {
            if (ntr == captr) {
                captr = captr ? 2 * captr : 256;
                trp = (int *)realloc(trp, sizeof(int) * (size_t)captr), tro = (int *)realloc(tro, sizeof(int) * (size_t)captr);
                if (!trp || !tro) return 1;
            }
            trp[ntr] = a < 1 ? 1 : a, tro[ntr++] = b < 1 ? 1 : b;
        }
        fclose(fp);
        if (!ntr) { fprintf(stderr, "ptload: --trace %s: no lines \"PROMPT_LEN OUTPUT_LEN\"\n", trace); return 2; }
    }
    jobs = (job *)calloc((size_t)nreq, sizeof *jobs);
    th = (pthread_t *)calloc((size_t)nreq, sizeof *th);
    if (!jobs || !th) return 1;
    for (i = 0, t = 0; i < nreq; i++) {
        jobs[i].idx = i, jobs[i].t_send = t;
        jobs[i].plen = ntr ? trp[i % ntr] : pa + (int)(urand() * (pb - pa + 1));
        jobs[i].olen = ntr ? tro[i % ntr] : oa + (int)(urand() * (ob - oa + 1));
        t += burst == 1 ? -log(urand()) / rate : grand(burst) / (burst * rate);
    }
    g_t0 = now_s();
    for (i = 0; i < nreq; i++)
        if (pthread_create(&th[i], NULL, client, &jobs[i])) { jobs[i].failed = 1, th[i] = 0; }
    for (i = 0; i < nreq; i++)
        if (th[i]) pthread_join(th[i], NULL);
    elapsed = now_s() - g_t0;
    ttft = (double *)malloc(sizeof(double) * (size_t)nreq), tpot = (double *)malloc(sizeof(double) * (size_t)nreq), e2e = (double *)malloc(sizeof(double) * (size_t)nreq);
    for (i = 0; i < nreq; i++) nitl += jobs[i].nitl;
    itl = (double *)malloc(sizeof(double) * (size_t)(nitl + 1));
    if (!ttft || !tpot || !e2e || !itl) return 1;
    for (i = 0; i < nreq; i++) {
        job *j = &jobs[i];
        if (j->status == 429) refused++;
        else if (j->timed_out) timed++;
        else if (j->failed || j->status != 200 || j->ttft < 0) failed++;
        else {
            double tp = j->out_tokens > 1 ? (j->e2e - j->ttft) / (j->out_tokens - 1) : 0;
            done++, out_tok += j->out_tokens;
            ttft[nt++] = j->ttft, e2e[ne++] = j->e2e;
            if (j->out_tokens > 1) tpot[np++] = tp;
            for (k = 0; k < j->nitl; k++) itl[ni++] = j->itl[k];
            if (j->ttft <= slo_ttft && tp <= slo_tpot) good++;
        }
    }
    arr[0] = ttft, arr[1] = tpot, arr[2] = itl, arr[3] = e2e;
    cnt[0] = &nt, cnt[1] = &np, cnt[2] = &ni, cnt[3] = &ne;
    for (k = 0; k < 4; k++) qsort(arr[k], (size_t)*cnt[k], sizeof(double), cmpd);
    printf("ptload: %s, %d requests at %.3g/s (%s), %.2f s\n", url, nreq, rate, burst == 1 ? "Poisson" : "gamma-bursty", elapsed);
    printf("  completed %d, refused (429) %d, timed out %d, failed %d\n", done, refused, timed, failed);
    printf("  throughput %.3f requests/s, %.1f output tokens/s; goodput %.3f requests/s (TTFT <= %g s, TPOT <= %g s)\n", done / elapsed, (double)out_tok / elapsed,
           good / elapsed, slo_ttft, slo_tpot);
    printf("  %-5s %10s %10s %10s %10s  (ms)\n", "", "mean", "p50", "p90", "p99");
    for (k = 0; k < 4; k++) {
        double s = 0;
        for (i = 0; i < *cnt[k]; i++) s += arr[k][i];
        printf("  %-5s %10.2f %10.2f %10.2f %10.2f\n", sect[k], *cnt[k] ? 1e3 * s / *cnt[k] : NAN, 1e3 * pct(arr[k], *cnt[k], 50), 1e3 * pct(arr[k], *cnt[k], 90),
               1e3 * pct(arr[k], *cnt[k], 99));
    }
    printf("{\"tool\":\"ptload\",\"url\":\"%s\",\"rate\":%g,\"burstiness\":%g,\"requests\":%d,\"duration_s\":%.4f,\"completed\":%d,\"refused\":%d,\"timed_out\":%d,"
           "\"failed\":%d,\"refused_share\":%.4f,\"timed_out_share\":%.4f,\"request_throughput\":%.4f,\"output_throughput\":%.2f,\"goodput\":%.4f,"
           "\"slo_ttft_s\":%g,\"slo_tpot_s\":%g",
           url, rate, burst, nreq, elapsed, done, refused, timed, failed, (double)refused / nreq, (double)timed / nreq, done / elapsed, (double)out_tok / elapsed,
           good / elapsed, slo_ttft, slo_tpot);
    for (k = 0; k < 4; k++) {
        const char *nm[4] = {"ttft", "tpot", "itl", "e2e"};
        int q;
        const double ps[3] = {50, 90, 99};
        for (q = 0; q < 3; q++) {
            double v = pct(arr[k], *cnt[k], ps[q]);
            if (isnan(v)) printf(",\"p%g_%s_ms\":null", ps[q], nm[k]);
            else printf(",\"p%g_%s_ms\":%.3f", ps[q], nm[k], 1e3 * v);
        }
    }
    printf("}\n");
    for (i = 0; i < nreq; i++) free(jobs[i].itl);
    free(jobs), free(th), free(ttft), free(tpot), free(itl), free(e2e), free(trp), free(tro);
    return done ? 0 : 1;
}
