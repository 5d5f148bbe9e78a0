/* ptserve.c - an OpenAI-compatible HTTP server on ptrain.h's serving engine (pt_engine).

   Build: cc -O2 -fopenmp -march=native -I. tools/ptserve.c -o build/ptserve -lmicrohttpd -lm
   (make tools builds it too; libmicrohttpd: Debian's libmicrohttpd-dev, `make deps`)

   ptserve (--ckpt DIR | --safetensors FILE | --gguf FILE) [flags]
     --quant f32|bf16|q8_0|q4_0   the weights' format for decode (default: as stored)
     --tokenizer FILE     a tokenizer.bin (or a directory holding one) instead of the model's
     --bytes              the ids are the bytes (the model's tokenizer not read): only for a vocabulary
                          of at most 256 tokens. A model whose tokenizer is refused, or of more than 256
                          tokens without one, does not start without one of these two (exit 1, the reason)
     --host ADDR          the IPv4 address to listen on (127.0.0.1)
     --port N             the TCP port (8080; 0: any free port, printed)
     --max-seqs N         requests running at once (16)
     --kv-blocks N        KV cache blocks of 16 tokens (default: max-seqs x the context)
     --max-batch-tokens N tokens fed one engine iteration (256)
     --max-queue N        requests waiting for a sequence at most; past it 429 + Retry-After (64)
     --timeout S          seconds a request may take at most (600; a request's "timeout" field may lower it)
     --threads N          CPU threads (default: the CPUs available)
     --model-name NAME    the id /v1/models gives (default: the model path's last part)
     --step-delay-ms N    sleep N ms after each engine iteration (0): a tiny model made slow, as a
                          larger one would be, for tests and demonstrations of queueing
   Endpoints: POST /v1/completions, POST /v1/chat/completions, GET /v1/models, GET /health,
   GET /metrics (Prometheus text), GET / (the playground page). docs/serving.md has the details:
   the fields, the chat template, the errors, the metrics. SIGTERM or SIGINT drains: no new
   requests (503), the running ones finish, then exit 0. Prints `ptserve: listening on URL` once the
   model is loaded. Exit status: 0 after a drain, 1 a model or socket that fails, 2 bad usage.

   Threads: MHD's internal polling thread serves every connection; one engine thread runs
   pt_engine_step. A streaming response's content reader with nothing to send suspends its
   connection; the engine's per-token callback resumes it. A non-streaming request suspends in the
   access handler until its last token. Request parsing and validation (sv_parse_request) has no HTTP
   in it: tests/fuzz/fuzz_serve_request.c includes this file with PTSERVE_NO_MAIN. */
#define _GNU_SOURCE
#define PTRAIN_IMPLEMENTATION
#include "../ptrain.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ==== requests: parsing and validation (no HTTP) =============================================== */
#define SV_MAX_STOP 4
#define SV_MAX_N 16
#define SV_MAX_CLASS 7

/* What the server knows of its model when it checks a request. */
typedef struct sv_model {
    const pt_tokenizer *tok; /* NULL: bytes are the tokens */
    int32_t vocab, max_seq;
} sv_model;

/* A request, checked. */
typedef struct sv_req {
    int chat;
    char *prompt; /* the text fed (for chat: the template applied) */
    size_t prompt_len;
    int32_t *ids;
    int32_t nids;
    int32_t max_tokens;
    float temperature, top_p;
    int32_t top_k;
    uint64_t seed;
    char *stop[SV_MAX_STOP + 1]; /* chat adds "\nUser:" */
    int32_t nstop;
    int32_t n;
    int32_t logprobs; /* completions: 0 none, k >= 1 (top 1 only); chat: 1 when asked */
    int32_t stream, include_usage, priority;
    double timeout; /* seconds; 0 = the server's */
} sv_req;

/* An error for the client: HTTP status, message, the field it names (or "") and OpenAI's type. */
typedef struct sv_err {
    int status;
    char message[320];
    char param[48];
    const char *type;
} sv_err;

static int sv_fail(sv_err *e, int status, const char *param, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
static int sv_fail(sv_err *e, int status, const char *param, const char *fmt, ...) {
    va_list ap;
    e->status = status;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    e->type = status == 429 ? "rate_limit_error" : status >= 500 ? "server_error" : "invalid_request_error";
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    return -1;
}

static void sv_req_free(sv_req *r) {
    int32_t i;
    free(r->prompt);
    free(r->ids);
    for (i = 0; i < r->nstop; i++) free(r->stop[i]);
    memset(r, 0, sizeof *r);
}

/* appends n bytes to b, keeping a NUL after them; 0 when out of memory (b->oom set) */
static int sv_append(pt_sb *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = (b->n + n + 1) * 2;
        char *p = (char *)realloc(b->s, cap);
        if (!p) return (b->oom = 1, 0);
        b->s = p, b->cap = cap;
    }
    if (n) memcpy(b->s + b->n, s, n);
    b->n += n, b->s[b->n] = 0;
    return 1;
}

static char *sv_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = (char *)malloc(n);
    return p ? (char *)memcpy(p, s, n) : NULL;
}

static const char *sv_kind_name(const pt_json *v) {
    static const char *const names[] = {"nothing", "null", "a boolean", "a number", "a string", "an array", "an object"};
    return names[pt_json_type(v)];
}

/* a field: absent or null -> 0 (the default stays); else 1 with the value in range, or -1 after sv_fail */
static int sv_int(const pt_json *o, const char *key, int64_t lo, int64_t hi, int64_t *out, sv_err *e) {
    const pt_json *v = pt_json_get(o, key);
    int64_t x;
    if (!v || pt_json_type(v) == PT_JSON_NULL) return 0;
    if (pt_json_type(v) != PT_JSON_NUMBER || !pt_json_int64(v, &x))
        return sv_fail(e, 400, key, "'%s' must be an integer, found %s", key, pt_json_type(v) == PT_JSON_NUMBER ? "a fraction" : sv_kind_name(v));
    if (x < lo || x > hi) return sv_fail(e, 400, key, "'%s' must be in [%lld, %lld], found %lld", key, (long long)lo, (long long)hi, (long long)x);
    *out = x;
    return 1;
}
static int sv_num(const pt_json *o, const char *key, double lo, double hi, double *out, sv_err *e) {
    const pt_json *v = pt_json_get(o, key);
    double x;
    if (!v || pt_json_type(v) == PT_JSON_NULL) return 0;
    if (pt_json_type(v) != PT_JSON_NUMBER) return sv_fail(e, 400, key, "'%s' must be a number, found %s", key, sv_kind_name(v));
    x = pt_json_num(v, 0);
    if (!(x >= lo && x <= hi)) return sv_fail(e, 400, key, "'%s' must be in [%g, %g], found %g", key, lo, hi, x);
    *out = x;
    return 1;
}
static int sv_bool(const pt_json *o, const char *key, int *out, sv_err *e) {
    const pt_json *v = pt_json_get(o, key);
    if (!v || pt_json_type(v) == PT_JSON_NULL) return 0;
    if (pt_json_type(v) != PT_JSON_BOOL) return sv_fail(e, 400, key, "'%s' must be a boolean, found %s", key, sv_kind_name(v));
    *out = pt_json_bool(v, 0);
    return 1;
}

/* the chat template (docs/serving.md): a system message as a line of its own, then "User: ...\n"
   and "Assistant: ...\n" per turn, ending "Assistant:" for the model to continue */
static int sv_chat_prompt(const pt_json *msgs, pt_sb *b, sv_err *e) {
    size_t i, n = pt_json_len(msgs);
    if (pt_json_type(msgs) != PT_JSON_ARRAY || n == 0)
        return sv_fail(e, 400, "messages", "'messages' must be a non-empty array of {\"role\", \"content\"} objects, found %s%s", sv_kind_name(msgs),
                       pt_json_type(msgs) == PT_JSON_ARRAY ? " (empty)" : "");
    for (i = 0; i < n; i++) {
        const pt_json *m = pt_json_at(msgs, i), *c = pt_json_get(m, "content");
        const char *role = pt_json_str(pt_json_get(m, "role"));
        if (pt_json_type(m) != PT_JSON_OBJECT) return sv_fail(e, 400, "messages", "'messages[%zu]' must be an object, found %s", i, sv_kind_name(m));
        if (!role || (strcmp(role, "system") && strcmp(role, "user") && strcmp(role, "assistant") && strcmp(role, "developer")))
            return sv_fail(e, 400, "messages", "'messages[%zu].role' must be \"system\", \"developer\", \"user\" or \"assistant\", found %s", i,
                           role ? "another string" : sv_kind_name(pt_json_get(m, "role")));
        if (pt_json_type(c) != PT_JSON_STRING)
            return sv_fail(e, 400, "messages", "'messages[%zu].content' must be a string, found %s", i, sv_kind_name(c));
        if (!strcmp(role, "system") || !strcmp(role, "developer")) pt_sb_add(b, "%.*s\n", (int)pt_json_len(c), pt_json_str(c));
        else pt_sb_add(b, "%s: %.*s\n", strcmp(role, "user") ? "Assistant" : "User", (int)pt_json_len(c), pt_json_str(c));
    }
    pt_sb_add(b, "Assistant:");
    return 0;
}

/* Parses and checks the JSON body of a completion request (chat: /v1/chat/completions). 0 and *r
   filled (free with sv_req_free), or -1 and *e (400 naming the field). Unknown fields are ignored. */
static int sv_parse_request(const char *body, size_t len, int chat, const sv_model *m, sv_req *r, sv_err *e) {
    char perr[200];
    pt_json *root;
    const pt_json *v;
    pt_sb b;
    int64_t x;
    double d;
    int t, rc = -1;
    memset(r, 0, sizeof *r);
    r->chat = chat, r->temperature = 1.0f, r->top_p = 1.0f, r->n = 1, r->seed = 0;
    r->max_tokens = chat ? 0 : 16;
    pt_sb_init(&b);
    if (!(root = pt_json_parse(body, len, 0, perr, sizeof perr))) return sv_fail(e, 400, "", "the body is not valid JSON: %s", perr);
    if (pt_json_type(root) != PT_JSON_OBJECT) {
        sv_fail(e, 400, "", "the body must be a JSON object, found %s", sv_kind_name(root));
        goto out;
    }
    /* the prompt */
    if (chat) {
        if (sv_chat_prompt(pt_json_get(root, "messages"), &b, e)) goto out;
    } else {
        v = pt_json_get(root, "prompt");
        if (pt_json_type(v) == PT_JSON_ARRAY && pt_json_len(v) == 1) v = pt_json_at(v, 0);
        if (pt_json_type(v) != PT_JSON_STRING || pt_json_len(v) == 0) {
            sv_fail(e, 400, "prompt", "'prompt' must be a non-empty string (or an array of one), found %s", v && pt_json_type(v) == PT_JSON_STRING ? "an empty string" : sv_kind_name(v));
            goto out;
        }
        sv_append(&b, pt_json_str(v), pt_json_len(v));
    }
    if (b.oom || !b.s) {
        sv_fail(e, 500, "", "out of memory");
        goto out;
    }
    /* sampling and the rest */
    if ((t = sv_int(root, "max_tokens", 1, 1 << 24, &x, e)) < 0) goto out;
    if (t) r->max_tokens = (int32_t)x;
    if (chat) {
        if ((t = sv_int(root, "max_completion_tokens", 1, 1 << 24, &x, e)) < 0) goto out;
        if (t) r->max_tokens = (int32_t)x;
    }
    if ((t = sv_num(root, "temperature", 0, 2, &d, e)) < 0) goto out;
    if (t) r->temperature = (float)d;
    if ((t = sv_num(root, "top_p", 0, 1, &d, e)) < 0) goto out;
    if (t) {
        if (d <= 0) {
            sv_fail(e, 400, "top_p", "'top_p' must be in (0, 1], found %g", d);
            goto out;
        }
        r->top_p = (float)d;
    }
    if ((t = sv_int(root, "top_k", -1, 1 << 30, &x, e)) < 0) goto out;
    if (t) r->top_k = x < 0 ? 0 : (int32_t)x;
    if ((t = sv_int(root, "seed", INT64_MIN, INT64_MAX, &x, e)) < 0) goto out;
    if (t) r->seed = (uint64_t)x;
    if ((t = sv_int(root, "n", 1, SV_MAX_N, &x, e)) < 0) goto out;
    if (t) r->n = (int32_t)x;
    if ((t = sv_int(root, "priority", 0, SV_MAX_CLASS, &x, e)) < 0) goto out;
    if (t) r->priority = (int32_t)x;
    if ((t = sv_num(root, "timeout", 1e-6, 1e6, &d, e)) < 0) goto out;
    if (t) r->timeout = d;
    if (sv_bool(root, "stream", &r->stream, e) < 0) goto out;
    v = pt_json_get(root, "stream_options");
    if (v && pt_json_type(v) != PT_JSON_NULL) {
        if (pt_json_type(v) != PT_JSON_OBJECT) {
            sv_fail(e, 400, "stream_options", "'stream_options' must be an object, found %s", sv_kind_name(v));
            goto out;
        }
        if (sv_bool(v, "include_usage", &r->include_usage, e) < 0) {
            snprintf(e->param, sizeof e->param, "stream_options.include_usage");
            goto out;
        }
    }
    if (chat) {
        int lp = 0;
        if (sv_bool(root, "logprobs", &lp, e) < 0) goto out;
        if (sv_int(root, "top_logprobs", 0, 20, &x, e) < 0) goto out;
        r->logprobs = lp;
    } else {
        if ((t = sv_int(root, "logprobs", 0, 5, &x, e)) < 0) goto out;
        if (t) r->logprobs = (int32_t)x;
    }
    v = pt_json_get(root, "stop");
    if (v && pt_json_type(v) != PT_JSON_NULL) {
        size_t i, n = pt_json_type(v) == PT_JSON_ARRAY ? pt_json_len(v) : 1;
        if ((pt_json_type(v) != PT_JSON_STRING && pt_json_type(v) != PT_JSON_ARRAY) || n > SV_MAX_STOP) {
            sv_fail(e, 400, "stop", "'stop' must be a string or an array of at most %d strings, found %s%s", SV_MAX_STOP, sv_kind_name(v),
                    pt_json_type(v) == PT_JSON_ARRAY ? " too long" : "");
            goto out;
        }
        for (i = 0; i < n; i++) {
            const pt_json *s = pt_json_type(v) == PT_JSON_ARRAY ? pt_json_at(v, i) : v;
            if (pt_json_type(s) != PT_JSON_STRING || pt_json_len(s) == 0 || pt_json_len(s) > 256 || strlen(pt_json_str(s)) != pt_json_len(s)) {
                sv_fail(e, 400, "stop", "'stop' entries must be non-empty strings of at most 256 bytes (no NUL), found %s", sv_kind_name(s));
                goto out;
            }
            if (!(r->stop[r->nstop] = sv_strdup(pt_json_str(s)))) {
                sv_fail(e, 500, "", "out of memory");
                goto out;
            }
            r->nstop++;
        }
    }
    if (chat && r->nstop <= SV_MAX_STOP && !(r->stop[r->nstop++] = sv_strdup("\nUser:"))) {
        r->nstop--;
        sv_fail(e, 500, "", "out of memory");
        goto out;
    }
    /* the prompt's tokens */
    r->prompt = b.s, r->prompt_len = b.n, b.s = NULL;
    if (!(r->ids = (int32_t *)malloc(sizeof(int32_t) * (r->prompt_len + 1)))) {
        sv_fail(e, 500, "", "out of memory");
        goto out;
    }
    if (m->tok) {
        int64_t k = pt_tokenizer_encode(m->tok, r->prompt, (int64_t)r->prompt_len, r->ids);
        if (k < 0) {
            sv_fail(e, 400, chat ? "messages" : "prompt", "the prompt cannot be encoded with the model's tokenizer");
            goto out;
        }
        r->nids = (int32_t)k;
    } else {
        size_t i;
        for (i = 0; i < r->prompt_len; i++) r->ids[i] = (unsigned char)r->prompt[i];
        r->nids = (int32_t)r->prompt_len;
        for (i = 0; i < r->prompt_len; i++)
            if (r->ids[i] >= m->vocab) {
                sv_fail(e, 400, chat ? "messages" : "prompt", "byte %zu of the prompt (%d) is outside the model's vocabulary of %d", i, (int)r->ids[i], (int)m->vocab);
                goto out;
            }
    }
    if (r->nids < 1 || r->nids >= m->max_seq) {
        sv_fail(e, 400, chat ? "messages" : "prompt", "the prompt is %d tokens; the model's context is %d tokens (at most %d for the prompt)", (int)r->nids,
                (int)m->max_seq, (int)m->max_seq - 1);
        goto out;
    }
    if (r->max_tokens == 0 || r->max_tokens > m->max_seq - r->nids) r->max_tokens = m->max_seq - r->nids; /* the context ends it */
    rc = 0;
out:
    pt_sb_free(&b);
    pt_json_free(root);
    if (rc) sv_req_free(r);
    return rc;
}

/* an OpenAI-style error body */
static void sv_error_json(pt_sb *b, const sv_err *e) {
    pt_sb_add(b, "{\"error\":{\"message\":");
    pt_sb_json_str(b, e->message);
    pt_sb_add(b, ",\"type\":\"%s\",\"param\":", e->type ? e->type : "invalid_request_error");
    if (e->param[0]) pt_sb_json_str(b, e->param);
    else pt_sb_add(b, "null");
    pt_sb_add(b, ",\"code\":%d}}", e->status);
}

/* bytes at the end of s[0, n) that begin a UTF-8 character not yet complete */
static size_t sv_utf8_tail(const unsigned char *s, size_t n) {
    size_t k;
    for (k = 1; k <= 3 && k <= n; k++) {
        unsigned char c = s[n - k];
        if ((c & 0xC0) == 0x80) continue; /* a continuation byte: look further back */
        if (c >= 0xC0) {
            size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
            return need > k ? k : 0;
        }
        return 0;
    }
    return 0;
}

#ifndef PTSERVE_NO_MAIN
#include <microhttpd.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ptserve_page.h"

/* ==== the server ================================================================================ */
typedef struct sv_choice {
    struct sv_request *rq;
    int32_t index;
    int64_t eid;            /* the engine's request id */
    int32_t done, finish;   /* finish: 0 length, 1 stop, 2 timeout, 3 cancelled, 4 error */
    int32_t ntok, admitted, cancel_sent;
    pt_sb pend;             /* decoded bytes not emitted yet (an incomplete character, a possible stop) */
    pt_sb text;             /* emitted text */
    pt_sb lp_tok;           /* logprobs: the tokens' texts, NUL-separated */
    float *lp;
    int32_t nlp, caplp, lp_streamed;
    size_t streamed;        /* text bytes already sent in chunks */
    double t_last;
} sv_choice;

typedef struct sv_request {
    struct sv_request *next;
    int refs;                     /* the engine side and the connection */
    sv_req q;
    sv_choice *ch;
    int64_t serial;
    time_t created;
    double t_arrive, deadline, t_first;
    struct MHD_Connection *conn;
    int conn_fd, suspended, all_done, timed_out, gone, error, role_sent, finished_sent;
    char errmsg[256];
    pt_sb out;                    /* streaming: SSE bytes to send */
    size_t sent;
    int stream_end;               /* [DONE] written */
} sv_request;

/* per-connection state */
typedef struct sv_conn {
    pt_sb body;
    sv_request *rq;
    int too_big;
} sv_conn;

#define SV_NB 12
static const double sv_ttft_b[SV_NB] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
static const double sv_itl_b[SV_NB] = {0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5};
typedef struct sv_hist {
    int64_t c[SV_NB + 1], n;
    double sum;
} sv_hist;

static struct {
    pthread_mutex_t mu;
    pthread_cond_t work;
    struct MHD_Daemon *d;
    pt_ctx *ctx;
    pt_gpt_weights *w;
    pt_tokenizer *tok;
    pt_infer *inf;
    pt_engine *eng;
    sv_model model;
    char model_name[256];
    int ready, draining, stop;
    int max_queue, waiting, running;
    int64_t nextserial, live;
    double timeout;
    int32_t max_seqs, budget;
    long step_delay_ms;
    sv_request *reqs;           /* the requests the engine thread watches */
    /* metrics */
    int64_t req_total[6];       /* ok, 400, 429, 503, timeout, cancelled */
    int64_t tok_in, tok_out;
    sv_hist ttft, itl;
    pt_kv_stats kv;
    pt_engine_stats es;
} S;

static void sv_hist_add(sv_hist *h, const double *b, double x) {
    int i;
    for (i = 0; i < SV_NB && x > b[i]; i++) {}
    h->c[i]++, h->n++, h->sum += x;
}

/* the engine side or the connection lets go of rq (S.mu held) */
static void sv_release(sv_request *rq) {
    int32_t i;
    if (--rq->refs > 0) return;
    for (i = 0; rq->ch && i < rq->q.n; i++) {
        sv_choice *c = &rq->ch[i];
        pt_sb_free(&c->pend), pt_sb_free(&c->text), pt_sb_free(&c->lp_tok);
        free(c->lp);
    }
    free(rq->ch);
    pt_sb_free(&rq->out);
    sv_req_free(&rq->q);
    free(rq);
    S.live--;
    pthread_cond_broadcast(&S.work);
}

static void sv_wake(sv_request *rq) {
    if (rq->suspended && rq->conn) {
        rq->suspended = 0;
        MHD_resume_connection(rq->conn);
    }
}

/* ---- SSE chunks (S.mu held) ---- */
static void sv_chunk_head(sv_request *rq, pt_sb *b) {
    pt_sb_add(b, "data: {\"id\":\"%s-%lld\",\"object\":\"%s\",\"created\":%lld,\"model\":", rq->q.chat ? "chatcmpl" : "cmpl", (long long)rq->serial,
              rq->q.chat ? "chat.completion.chunk" : "text_completion", (long long)rq->created);
    pt_sb_json_str(b, S.model_name);
}
static void sv_logprobs_json(pt_sb *b, const sv_choice *c, int32_t from, int32_t to, int chat) {
    int32_t i;
    const char *t = c->lp_tok.s;
    size_t off = 0;
    for (i = 0; i < from; i++) off += strlen(t + off) + 1;
    if (chat) {
        pt_sb_add(b, "{\"content\":[");
        for (i = from; i < to; i++) {
            size_t k, L = strlen(t + off);
            pt_sb_add(b, "%s{\"token\":", i > from ? "," : "");
            pt_sb_json_str(b, t + off);
            pt_sb_add(b, ",\"logprob\":%.6g,\"bytes\":[", (double)c->lp[i]);
            for (k = 0; k < L; k++) pt_sb_add(b, "%s%u", k ? "," : "", (unsigned)(unsigned char)t[off + k]);
            pt_sb_add(b, "],\"top_logprobs\":[]}");
            off += L + 1;
        }
        pt_sb_add(b, "]}");
        return;
    }
    pt_sb_add(b, "{\"tokens\":[");
    {
        size_t o = off;
        for (i = from; i < to; i++) {
            pt_sb_add(b, "%s", i > from ? "," : "");
            pt_sb_json_str(b, t + o);
            o += strlen(t + o) + 1;
        }
    }
    pt_sb_add(b, "],\"token_logprobs\":[");
    for (i = from; i < to; i++) pt_sb_add(b, "%s%.6g", i > from ? "," : "", (double)c->lp[i]);
    pt_sb_add(b, "],\"top_logprobs\":[");
    {
        size_t o = off;
        for (i = from; i < to; i++) {
            pt_sb_add(b, "%s{", i > from ? "," : "");
            pt_sb_json_str(b, t + o);
            pt_sb_add(b, ":%.6g}", (double)c->lp[i]);
            o += strlen(t + o) + 1;
        }
    }
    pt_sb_add(b, "]}");
}
static const char *sv_finish_name(int f) {
    static const char *const n[] = {"length", "stop", "timeout", "cancelled", "error"};
    return f >= 0 && f < 5 ? n[f] : "length";
}
/* the chunk of choice c's text since the last one (and its finish when done) */
static void sv_stream_choice(sv_request *rq, sv_choice *c) {
    pt_sb *b = &rq->out;
    size_t n = c->text.n - c->streamed;
    if (!rq->q.stream || (!n && !c->done && !(rq->q.chat && !rq->role_sent))) return;
    sv_chunk_head(rq, b);
    pt_sb_add(b, ",\"choices\":[{\"index\":%d,", (int)c->index);
    if (rq->q.chat) {
        pt_sb_add(b, "\"delta\":{");
        if (!rq->role_sent) pt_sb_add(b, "\"role\":\"assistant\"%s", n ? "," : ""), rq->role_sent = 1;
        if (n) pt_sb_add(b, "\"content\":"), pt_sb_json_strn(b, c->text.s + c->streamed, n);
        pt_sb_add(b, "},");
    } else {
        pt_sb_add(b, "\"text\":");
        pt_sb_json_strn(b, n ? c->text.s + c->streamed : "", n);
        pt_sb_add(b, ",");
    }
    pt_sb_add(b, "\"logprobs\":");
    if (rq->q.logprobs && c->nlp > c->lp_streamed) sv_logprobs_json(b, c, c->lp_streamed, c->nlp, rq->q.chat), c->lp_streamed = c->nlp;
    else pt_sb_add(b, "null");
    if (c->done) pt_sb_add(b, ",\"finish_reason\":\"%s\"}]}\n\n", sv_finish_name(c->finish));
    else pt_sb_add(b, ",\"finish_reason\":null}]}\n\n");
    c->streamed = c->text.n;
}

/* emits what of c->pend is decided: complete characters, and no possible start of a stop string;
   at the end (final) everything left; 1 when a stop string was found */
static int sv_emit(sv_choice *c, int final) {
    sv_request *rq = c->rq;
    size_t at = c->pend.n, hold = 0;
    int hit = rq->q.nstop ? pt_stop_find(c->pend.s ? c->pend.s : "", c->pend.n, (const char *const *)rq->q.stop, rq->q.nstop, &at, &hold) : 0;
    size_t emit;
    if (hit) emit = at;
    else if (final) emit = c->pend.n;
    else {
        size_t u = sv_utf8_tail((const unsigned char *)c->pend.s, c->pend.n);
        emit = c->pend.n - (hold > u ? hold : u);
    }
    if (emit) sv_append(&c->text, c->pend.s, emit);
    if (hit) c->pend.n = 0;
    else {
        memmove(c->pend.s, c->pend.s + emit, c->pend.n - emit);
        c->pend.n -= emit;
    }
    return hit;
}

/* the engine's per-token callback (the engine thread, no engine lock held) */
static int sv_on_token(void *user, int64_t id, int32_t token, float logprob) {
    sv_choice *c = (sv_choice *)user;
    sv_request *rq = c->rq;
    char buf[256];
    int64_t k;
    double now = pt_time();
    int stop = 0;
    (void)id;
    if (S.tok) k = pt_tokenizer_decode(S.tok, &token, 1, buf, sizeof buf - 1);
    else buf[0] = (char)token, k = token < 256 ? 1 : 0;
    if (k < 0 || k > (int64_t)sizeof buf - 1) k = 0;
    buf[k] = 0;
    pthread_mutex_lock(&S.mu);
    S.tok_out++;
    if (c->ntok == 0) {
        if (rq->t_first < 0) rq->t_first = now, sv_hist_add(&S.ttft, sv_ttft_b, now - rq->t_arrive);
    } else sv_hist_add(&S.itl, sv_itl_b, now - c->t_last);
    c->t_last = now;
    c->ntok++;
    if (rq->q.logprobs) {
        if (c->nlp == c->caplp) {
            int32_t cap = c->caplp ? 2 * c->caplp : 64;
            float *p = (float *)realloc(c->lp, sizeof(float) * (size_t)cap);
            if (p) c->lp = p, c->caplp = cap;
        }
        if (c->nlp < c->caplp) {
            size_t i;
            for (i = 0; i < (size_t)k; i++)
                if (!buf[i]) buf[i] = ' '; /* a NUL-separated list */
            sv_append(&c->lp_tok, buf, (size_t)k + 1);
            c->lp[c->nlp++] = logprob;
        }
    }
    if (k) sv_append(&c->pend, buf, (size_t)k);
    if (sv_emit(c, 0)) stop = 1, c->finish = 1;
    if (!stop) {
        sv_stream_choice(rq, c);
        sv_wake(rq);
    }
    pthread_mutex_unlock(&S.mu);
    return stop;
}

/* a request's last chunks, or its whole response body (S.mu held) */
static void sv_usage_json(pt_sb *b, sv_request *rq) {
    int32_t i, out = 0;
    for (i = 0; i < rq->q.n; i++) out += rq->ch[i].ntok;
    pt_sb_add(b, "\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d,\"total_tokens\":%d}", (int)rq->q.nids, (int)out, (int)(rq->q.nids + out));
}
static void sv_body_json(pt_sb *b, sv_request *rq) {
    int32_t i;
    pt_sb_add(b, "{\"id\":\"%s-%lld\",\"object\":\"%s\",\"created\":%lld,\"model\":", rq->q.chat ? "chatcmpl" : "cmpl", (long long)rq->serial,
              rq->q.chat ? "chat.completion" : "text_completion", (long long)rq->created);
    pt_sb_json_str(b, S.model_name);
    pt_sb_add(b, ",\"choices\":[");
    for (i = 0; i < rq->q.n; i++) {
        sv_choice *c = &rq->ch[i];
        pt_sb_add(b, "%s{\"index\":%d,", i ? "," : "", (int)i);
        if (rq->q.chat) pt_sb_add(b, "\"message\":{\"role\":\"assistant\",\"content\":");
        else pt_sb_add(b, "\"text\":");
        pt_sb_json_strn(b, c->text.s ? c->text.s : "", c->text.n);
        pt_sb_add(b, "%s,\"logprobs\":", rq->q.chat ? "}" : "");
        if (rq->q.logprobs) sv_logprobs_json(b, c, 0, c->nlp, rq->q.chat);
        else pt_sb_add(b, "null");
        pt_sb_add(b, ",\"finish_reason\":\"%s\"}", sv_finish_name(c->finish));
    }
    pt_sb_add(b, "],");
    sv_usage_json(b, rq);
    pt_sb_add(b, "}");
}

/* ---- the engine thread ---- */
static void sv_submit(sv_request *rq) {
    int32_t i;
    for (i = 0; i < rq->q.n; i++) {
        pt_engine_request er;
        sv_choice *c = &rq->ch[i];
        memset(&er, 0, sizeof er);
        er.prompt = rq->q.ids, er.nprompt = rq->q.nids, er.max_tokens = rq->q.max_tokens;
        er.sample.temperature = rq->q.temperature, er.sample.top_p = rq->q.top_p >= 1 ? 0 : rq->q.top_p, er.sample.top_k = rq->q.top_k;
        er.sample.seed = rq->q.seed + (uint64_t)i;
        er.priority = rq->q.priority, er.arrival = 0, er.on_token = sv_on_token, er.user = c;
        c->eid = pt_engine_submit(S.eng, &er);
    }
}

/* the client of a suspended connection went away (its socket reads end of file) */
static int sv_peer_gone(sv_request *rq) {
    char ch;
    ssize_t k;
    if (rq->conn_fd < 0 || !rq->suspended) return 0;
    k = recv(rq->conn_fd, &ch, 1, MSG_PEEK | MSG_DONTWAIT);
    return k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/* after a step: the requests' states, finishes, timeouts, disconnects (S.mu held) */
static void sv_sweep(void) {
    sv_request **pp = &S.reqs, *rq;
    double now = pt_time();
    int waiting = 0, running = 0;
    while ((rq = *pp) != NULL) {
        int32_t i, ndone = 0;
        int expire, gone;
        if (!rq->timed_out && now > rq->deadline) rq->timed_out = 1;
        if (!rq->gone && sv_peer_gone(rq)) rq->gone = 1;
        expire = rq->timed_out, gone = rq->gone;
        for (i = 0; i < rq->q.n; i++) {
            sv_choice *c = &rq->ch[i];
            pt_engine_result res;
            int32_t st;
            if (c->done) {
                ndone++;
                continue;
            }
            if ((expire || gone) && c->eid >= 0 && !c->cancel_sent) pt_engine_cancel(S.eng, c->eid), c->cancel_sent = 1;
            st = c->eid >= 0 ? pt_engine_poll(S.eng, c->eid, &res, NULL, 0) : PT_REQ_ERROR;
            if (st == PT_REQ_RUNNING) c->admitted = 1, running++;
            else if (st == PT_REQ_WAITING || st == PT_REQ_PENDING) waiting++;
            if (st == PT_REQ_DONE || st == PT_REQ_CANCELLED || st == PT_REQ_ERROR) {
                c->done = 1, ndone++;
                if (c->eid >= 0) pt_engine_release(S.eng, c->eid); /* read: the engine forgets it (res is a copy) */
                if (st == PT_REQ_DONE) {
                    if (res.finish != PT_FINISH_CALLBACK) c->finish = 0;
                } else if (st == PT_REQ_CANCELLED) c->finish = rq->timed_out ? 2 : 3;
                else {
                    c->finish = 4, rq->error = 1;
                    snprintf(rq->errmsg, sizeof rq->errmsg, "%s", c->eid >= 0 ? res.error : "the engine refused the request");
                }
                if (c->finish != 1) sv_emit(c, 1);
                sv_stream_choice(rq, c);
                sv_wake(rq);
            }
        }
        if (ndone == rq->q.n) {
            if (rq->q.stream && !rq->stream_end) {
                if (rq->q.include_usage) {
                    sv_chunk_head(rq, &rq->out);
                    pt_sb_add(&rq->out, ",\"choices\":[],");
                    sv_usage_json(&rq->out, rq);
                    pt_sb_add(&rq->out, "}\n\n");
                }
                pt_sb_add(&rq->out, "data: [DONE]\n\n");
                rq->stream_end = 1;
            }
            rq->all_done = 1;
            S.req_total[rq->timed_out ? 4 : rq->gone ? 5 : 0]++;
            sv_wake(rq);
            *pp = rq->next;
            sv_release(rq);
            continue;
        }
        pp = &rq->next;
    }
    S.waiting = waiting, S.running = running;
}

static void *sv_engine_thread(void *arg) {
    (void)arg;
    pthread_mutex_lock(&S.mu);
    for (;;) {
        int rc;
        while (!S.reqs && !S.stop) pthread_cond_wait(&S.work, &S.mu);
        if (!S.reqs && S.stop) break;
        pthread_mutex_unlock(&S.mu);
        rc = pt_engine_step(S.eng);
        if (S.step_delay_ms > 0) {
            struct timespec ts;
            ts.tv_sec = S.step_delay_ms / 1000, ts.tv_nsec = (S.step_delay_ms % 1000) * 1000000L;
            nanosleep(&ts, NULL);
        }
        pthread_mutex_lock(&S.mu);
        if (rc < 0) fprintf(stderr, "ptserve: engine: %s\n", pt_error(S.ctx)), pt_error_clear(S.ctx);
        sv_sweep(); /* before the stats: the requests it released are not counted as held */
        S.kv = pt_infer_kv_stats(S.inf);
        S.es = pt_engine_stats_get(S.eng);
    }
    pthread_mutex_unlock(&S.mu);
    return NULL;
}

/* ---- HTTP ---- */
static enum MHD_Result sv_send(struct MHD_Connection *con, int status, const char *type, const char *body, size_t n, int retry_after) {
    struct MHD_Response *r = MHD_create_response_from_buffer(n, (void *)body, MHD_RESPMEM_MUST_COPY);
    enum MHD_Result ok;
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", type);
    MHD_add_response_header(r, "Access-Control-Allow-Origin", "*");
    if (retry_after > 0) {
        char s[16];
        snprintf(s, sizeof s, "%d", retry_after);
        MHD_add_response_header(r, "Retry-After", s);
    }
    ok = MHD_queue_response(con, (unsigned)status, r);
    MHD_destroy_response(r);
    return ok;
}
static enum MHD_Result sv_send_err(struct MHD_Connection *con, const sv_err *e, int retry_after) {
    pt_sb b;
    enum MHD_Result ok;
    pt_sb_init(&b);
    sv_error_json(&b, e);
    ok = sv_send(con, e->status, "application/json", b.s ? b.s : "{}", b.n, retry_after);
    pt_sb_free(&b);
    pthread_mutex_lock(&S.mu);
    S.req_total[e->status == 429 ? 2 : e->status == 503 ? 3 : 1]++;
    pthread_mutex_unlock(&S.mu);
    return ok;
}

static ssize_t sv_reader(void *cls, uint64_t pos, char *buf, size_t max) {
    sv_request *rq = (sv_request *)cls;
    size_t n;
    (void)pos;
    pthread_mutex_lock(&S.mu);
    n = rq->out.n - rq->sent;
    if (n > max) n = max;
    if (n) {
        memcpy(buf, rq->out.s + rq->sent, n);
        rq->sent += n;
        if (rq->sent == rq->out.n) rq->sent = rq->out.n = 0; /* the buffer is reused */
    } else if (rq->stream_end && rq->all_done) {
        pthread_mutex_unlock(&S.mu);
        return MHD_CONTENT_READER_END_OF_STREAM;
    } else if (rq->gone) {
        pthread_mutex_unlock(&S.mu);
        return MHD_CONTENT_READER_END_WITH_ERROR;
    } else {
        rq->suspended = 1;
        MHD_suspend_connection(rq->conn);
    }
    pthread_mutex_unlock(&S.mu);
    return (ssize_t)n;
}
static void sv_reader_free(void *cls) {
    sv_request *rq = (sv_request *)cls;
    pthread_mutex_lock(&S.mu);
    rq->conn = NULL, rq->suspended = 0;
    if (!rq->all_done) rq->gone = 1, pthread_cond_broadcast(&S.work); /* the client left: cancelled at the next step */
    sv_release(rq);
    pthread_mutex_unlock(&S.mu);
}

static void sv_metrics(pt_sb *b) {
    static const char *const res[] = {"ok", "bad_request", "rejected", "unavailable", "timeout", "cancelled"};
    int i;
    int64_t total;
    pt_sb_add(b, "# HELP ptserve_requests_running Requests with a sequence in the engine.\n# TYPE ptserve_requests_running gauge\nptserve_requests_running %d\n", S.running);
    pt_sb_add(b, "# HELP ptserve_requests_waiting Requests waiting for a sequence.\n# TYPE ptserve_requests_waiting gauge\nptserve_requests_waiting %d\n", S.waiting);
    pt_sb_add(b, "# HELP ptserve_requests_total Requests answered, by result.\n# TYPE ptserve_requests_total counter\n");
    for (i = 0; i < 6; i++) pt_sb_add(b, "ptserve_requests_total{result=\"%s\"} %lld\n", res[i], (long long)S.req_total[i]);
    pt_sb_add(b, "# HELP ptserve_kv_blocks KV cache blocks by state.\n# TYPE ptserve_kv_blocks gauge\n");
    pt_sb_add(b, "ptserve_kv_blocks{state=\"used\"} %lld\nptserve_kv_blocks{state=\"cached\"} %lld\nptserve_kv_blocks{state=\"free\"} %lld\n",
              (long long)S.kv.used, (long long)S.kv.cached, (long long)S.kv.free);
    pt_sb_add(b, "# HELP ptserve_kv_blocks_total KV cache blocks in all.\n# TYPE ptserve_kv_blocks_total gauge\nptserve_kv_blocks_total %lld\n", (long long)S.kv.total);
    pt_sb_add(b, "# HELP ptserve_prefix_cache_hit_tokens_total Prompt tokens found in the prefix cache.\n# TYPE ptserve_prefix_cache_hit_tokens_total counter\n"
                 "ptserve_prefix_cache_hit_tokens_total %lld\n", (long long)S.kv.hit_tokens);
    pt_sb_add(b, "# HELP ptserve_prefix_cache_hits_total Blocks found in the prefix cache.\n# TYPE ptserve_prefix_cache_hits_total counter\n"
                 "ptserve_prefix_cache_hits_total %lld\n", (long long)S.kv.hit_blocks);
    pt_sb_add(b, "# HELP ptserve_prefix_cache_lookup_tokens_total Prompt tokens looked up in the prefix cache.\n# TYPE ptserve_prefix_cache_lookup_tokens_total counter\n"
                 "ptserve_prefix_cache_lookup_tokens_total %lld\n", (long long)S.kv.lookup_tokens);
    pt_sb_add(b, "# HELP ptserve_prompt_tokens_total Prompt tokens of accepted requests.\n# TYPE ptserve_prompt_tokens_total counter\nptserve_prompt_tokens_total %lld\n",
              (long long)S.tok_in);
    pt_sb_add(b, "# HELP ptserve_generation_tokens_total Tokens generated.\n# TYPE ptserve_generation_tokens_total counter\nptserve_generation_tokens_total %lld\n",
              (long long)S.tok_out);
    pt_sb_add(b, "# HELP ptserve_engine_iterations_total Engine iterations.\n# TYPE ptserve_engine_iterations_total counter\nptserve_engine_iterations_total %lld\n",
              (long long)S.es.iterations);
    pt_sb_add(b, "# HELP ptserve_engine_requests_held Requests the engine holds (in flight; each is released once answered).\n"
                 "# TYPE ptserve_engine_requests_held gauge\nptserve_engine_requests_held %lld\n", (long long)S.es.held);
    pt_sb_add(b, "# HELP ptserve_engine_preemptions_total Requests preempted.\n# TYPE ptserve_engine_preemptions_total counter\nptserve_engine_preemptions_total %lld\n",
              (long long)S.es.preempted);
    for (i = 0; i < 2; i++) {
        const sv_hist *h = i ? &S.itl : &S.ttft;
        const double *bk = i ? sv_itl_b : sv_ttft_b;
        const char *nm = i ? "ptserve_inter_token_latency_seconds" : "ptserve_time_to_first_token_seconds";
        int j;
        pt_sb_add(b, "# HELP %s %s\n# TYPE %s histogram\n", nm, i ? "Time between two tokens of a sequence." : "Time from a request's arrival to its first token.", nm);
        for (j = 0, total = 0; j < SV_NB; j++) total += h->c[j], pt_sb_add(b, "%s_bucket{le=\"%g\"} %lld\n", nm, bk[j], (long long)total);
        pt_sb_add(b, "%s_bucket{le=\"+Inf\"} %lld\n%s_sum %.6f\n%s_count %lld\n", nm, (long long)h->n, nm, h->sum, nm, (long long)h->n);
    }
}

static enum MHD_Result sv_handler(void *cls, struct MHD_Connection *con, const char *url, const char *method, const char *version,
                                  const char *upload, size_t *upload_size, void **con_cls) {
    sv_conn *cc = (sv_conn *)*con_cls;
    sv_err e;
    (void)cls, (void)version;
    memset(&e, 0, sizeof e);
    if (!strcmp(method, "GET") || !strcmp(method, "HEAD")) {
        pt_sb b;
        enum MHD_Result ok;
        pt_sb_init(&b);
        if (!strcmp(url, "/health")) {
            int st;
            pthread_mutex_lock(&S.mu);
            st = !S.ready ? 503 : S.draining ? 503 : 200;
            pt_sb_add(&b, "{\"status\":\"%s\"}", !S.ready ? "loading" : S.draining ? "draining" : "ok");
            pthread_mutex_unlock(&S.mu);
            ok = sv_send(con, st, "application/json", b.s, b.n, 0);
        } else if (!strcmp(url, "/metrics")) {
            pthread_mutex_lock(&S.mu);
            sv_metrics(&b);
            pthread_mutex_unlock(&S.mu);
            ok = sv_send(con, 200, "text/plain; version=0.0.4", b.s ? b.s : "", b.n, 0);
        } else if (!strcmp(url, "/v1/models")) {
            pt_sb_add(&b, "{\"object\":\"list\",\"data\":[{\"id\":");
            pt_sb_json_str(&b, S.model_name);
            pt_sb_add(&b, ",\"object\":\"model\",\"created\":0,\"owned_by\":\"ptrain\",\"max_model_len\":%d}]}", (int)S.model.max_seq);
            ok = sv_send(con, 200, "application/json", b.s, b.n, 0);
        } else if (!strcmp(url, "/") || !strcmp(url, "/index.html")) {
            ok = sv_send(con, 200, "text/html; charset=utf-8", sv_page, strlen(sv_page), 0);
        } else {
            sv_fail(&e, 404, "", "no such endpoint: %s %s", method, url);
            e.type = "not_found_error";
            ok = sv_send_err(con, &e, 0);
        }
        pt_sb_free(&b);
        return ok;
    }
    if (strcmp(method, "POST") || (strcmp(url, "/v1/completions") && strcmp(url, "/v1/chat/completions"))) {
        if (!cc && strcmp(method, "OPTIONS")) {
            sv_fail(&e, 404, "", "no such endpoint: %s %s", method, url);
            e.type = "not_found_error";
            return sv_send_err(con, &e, 0);
        }
        if (!cc) return sv_send(con, 204, "text/plain", "", 0, 0);
    }
    if (!cc) { /* the headers: state for the body */
        if (!(cc = (sv_conn *)calloc(1, sizeof *cc))) return MHD_NO;
        pt_sb_init(&cc->body);
        *con_cls = cc;
        return MHD_YES;
    }
    if (*upload_size) { /* a piece of the body */
        if (cc->body.n + *upload_size > ((size_t)16 << 20)) cc->too_big = 1;
        else if (!sv_append(&cc->body, upload, *upload_size)) return MHD_NO;
        *upload_size = 0;
        return MHD_YES;
    }
    if (cc->rq) { /* resumed: a non-streaming request is done */
        sv_request *rq = cc->rq;
        pt_sb b;
        enum MHD_Result ok;
        pthread_mutex_lock(&S.mu);
        if (!rq->all_done) { /* woken early: wait on */
            rq->suspended = 1;
            MHD_suspend_connection(con);
            pthread_mutex_unlock(&S.mu);
            return MHD_YES;
        }
        pt_sb_init(&b);
        if (rq->gone) ok = MHD_NO;
        else if (rq->timed_out) {
            sv_fail(&e, 408, "timeout", "the request took longer than its timeout of %g s", rq->deadline - rq->t_arrive);
            e.type = "timeout";
            sv_error_json(&b, &e);
            ok = sv_send(con, 408, "application/json", b.s, b.n, 0);
        } else if (rq->error) {
            sv_fail(&e, 500, "", "%s", rq->errmsg);
            sv_error_json(&b, &e);
            ok = sv_send(con, 500, "application/json", b.s, b.n, 0);
        } else {
            sv_body_json(&b, rq);
            ok = b.oom ? MHD_NO : sv_send(con, 200, "application/json", b.s, b.n, 0);
        }
        pt_sb_free(&b);
        rq->conn = NULL;
        cc->rq = NULL;
        sv_release(rq);
        pthread_mutex_unlock(&S.mu);
        return ok;
    }
    /* the whole body is in: check it, queue it */
    {
        sv_req q;
        sv_request *rq;
        int32_t i;
        int chat = !strcmp(url, "/v1/chat/completions"), retry = 0;
        const union MHD_ConnectionInfo *ci;
        pthread_mutex_lock(&S.mu);
        if (!S.ready || S.draining) sv_fail(&e, 503, "", "the server is %s", S.ready ? "draining (shutting down)" : "loading the model"), retry = 1;
        else if (S.waiting >= S.max_queue) {
            sv_fail(&e, 429, "", "the queue is full: %d requests waiting (--max-queue %d)", S.waiting, S.max_queue);
            retry = 1 + S.waiting / (S.max_seqs > 0 ? S.max_seqs : 1);
        }
        pthread_mutex_unlock(&S.mu);
        if (e.status) return sv_send_err(con, &e, retry);
        if (cc->too_big) {
            sv_fail(&e, 413, "", "the body is over 16 MiB");
            return sv_send_err(con, &e, 0);
        }
        if (sv_parse_request(cc->body.s ? cc->body.s : "", cc->body.n, chat, &S.model, &q, &e)) return sv_send_err(con, &e, 0);
        if (!(rq = (sv_request *)calloc(1, sizeof *rq)) || !(rq->ch = (sv_choice *)calloc((size_t)q.n, sizeof *rq->ch))) {
            free(rq);
            sv_req_free(&q);
            return MHD_NO;
        }
        rq->q = q, rq->refs = 2, rq->conn = con, rq->created = time(NULL), rq->t_arrive = pt_time(), rq->t_first = -1;
        rq->deadline = rq->t_arrive + (q.timeout > 0 && q.timeout < S.timeout ? q.timeout : S.timeout);
        ci = MHD_get_connection_info(con, MHD_CONNECTION_INFO_CONNECTION_FD);
        rq->conn_fd = ci ? ci->connect_fd : -1;
        pt_sb_init(&rq->out);
        for (i = 0; i < q.n; i++) rq->ch[i].rq = rq, rq->ch[i].index = i, rq->ch[i].eid = -1, pt_sb_init(&rq->ch[i].text), pt_sb_init(&rq->ch[i].pend), pt_sb_init(&rq->ch[i].lp_tok);
        pthread_mutex_lock(&S.mu);
        rq->serial = S.nextserial++;
        S.live++;
        S.tok_in += q.nids;
        S.waiting += q.n;
        sv_submit(rq);
        rq->next = S.reqs, S.reqs = rq;
        cc->rq = rq;
        pthread_cond_broadcast(&S.work);
        if (q.stream) {
            struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, sv_reader, rq, sv_reader_free);
            enum MHD_Result ok;
            cc->rq = NULL; /* the response holds the connection's reference */
            pthread_mutex_unlock(&S.mu);
            if (!r) return MHD_NO;
            MHD_add_response_header(r, "Content-Type", "text/event-stream");
            MHD_add_response_header(r, "Cache-Control", "no-cache");
            MHD_add_response_header(r, "Access-Control-Allow-Origin", "*");
            ok = MHD_queue_response(con, 200, r);
            MHD_destroy_response(r);
            return ok;
        }
        rq->suspended = 1;
        MHD_suspend_connection(con);
        pthread_mutex_unlock(&S.mu);
        return MHD_YES;
    }
}

static void sv_completed(void *cls, struct MHD_Connection *con, void **con_cls, enum MHD_RequestTerminationCode toe) {
    sv_conn *cc = (sv_conn *)*con_cls;
    (void)cls, (void)con, (void)toe;
    if (!cc) return;
    if (cc->rq) { /* a non-streaming request that ended before its answer */
        pthread_mutex_lock(&S.mu);
        cc->rq->gone = 1, cc->rq->conn = NULL, cc->rq->suspended = 0;
        pthread_cond_broadcast(&S.work);
        sv_release(cc->rq);
        pthread_mutex_unlock(&S.mu);
    }
    pt_sb_free(&cc->body);
    free(cc);
    *con_cls = NULL;
}

/* ---- main ---- */
static int usage(const char *msg, const char *what) {
    if (msg) fprintf(stderr, "ptserve: %s%s%s\n", msg, what ? " " : "", what ? what : "");
    fprintf(stderr, "usage: ptserve (--ckpt DIR | --safetensors FILE | --gguf FILE) [--tokenizer FILE | --bytes] [--quant f32|bf16|q8_0|q4_0] [--host ADDR] [--port N]\n"
                    "               [--max-seqs N] [--kv-blocks N] [--max-batch-tokens N] [--max-queue N] [--timeout S] [--threads N]\n"
                    "               [--model-name NAME] [--step-delay-ms N]   (see the top of tools/ptserve.c, docs/serving.md)\n");
    return 2;
}
static int num_flag(const char *flag, const char *v, long lo, long hi, long *out) {
    char *end;
    long x;
    errno = 0;
    x = strtol(v, &end, 10);
    if (end == v || *end || errno || x < lo || x > hi) {
        fprintf(stderr, "ptserve: %s expects a whole number in [%ld, %ld], found '%s'\n", flag, lo, hi, v);
        return -1;
    }
    *out = x;
    return 0;
}

int main(int argc, char **argv) {
    const char *model = NULL, *host = "127.0.0.1", *name = NULL, *tok_path = NULL;
    long port = 8080, max_seqs = 16, kv_blocks = 0, budget = 256, max_queue = 64, threads = 0;
    double timeout = 600;
    int quant = -1, i, sig = 0, bytes = 0;
    pt_desc pd;
    pt_infer_desc idesc;
    pt_engine_desc ed;
    struct sockaddr_in sa;
    sigset_t set;
    pthread_t th;
    const union MHD_DaemonInfo *di;

    for (i = 1; i < argc; i++) {
        const char *f = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(f, "--help") || !strcmp(f, "-h")) return usage(NULL, NULL), 0;
        if (!strcmp(f, "--bytes")) {
            bytes = 1;
            continue;
        }
        if (!val) return usage("unknown flag or flag without a value:", f);
        if (!strcmp(f, "--ckpt") || !strcmp(f, "--safetensors") || !strcmp(f, "--gguf")) {
            if (model) return usage("more than one model given:", val);
            model = val;
        } else if (!strcmp(f, "--quant")) {
            if ((quant = pt_wtype_parse(val)) < 0 || quant == PT_W_F16) {
                fprintf(stderr, "ptserve: --quant expects f32, bf16, q8_0 or q4_0, found '%s'\n", val);
                return 2;
            }
        } else if (!strcmp(f, "--tokenizer")) tok_path = val;
        else if (!strcmp(f, "--host")) host = val;
        else if (!strcmp(f, "--model-name")) name = val;
        else if (!strcmp(f, "--port")) { if (num_flag(f, val, 0, 65535, &port)) return 2; }
        else if (!strcmp(f, "--max-seqs")) { if (num_flag(f, val, 1, 4096, &max_seqs)) return 2; }
        else if (!strcmp(f, "--kv-blocks")) { if (num_flag(f, val, 1, 1L << 24, &kv_blocks)) return 2; }
        else if (!strcmp(f, "--max-batch-tokens")) { if (num_flag(f, val, 1, 1L << 20, &budget)) return 2; }
        else if (!strcmp(f, "--max-queue")) { if (num_flag(f, val, 1, 1L << 20, &max_queue)) return 2; }
        else if (!strcmp(f, "--threads")) { if (num_flag(f, val, 1, 1024, &threads)) return 2; }
        else if (!strcmp(f, "--step-delay-ms")) { if (num_flag(f, val, 0, 10000, &S.step_delay_ms)) return 2; }
        else if (!strcmp(f, "--timeout")) {
            char *end;
            timeout = strtod(val, &end);
            if (end == val || *end || !(timeout > 0 && timeout <= 1e7)) {
                fprintf(stderr, "ptserve: --timeout expects seconds in (0, 1e7], found '%s'\n", val);
                return 2;
            }
        } else return usage("unknown flag", f);
        i++;
    }
    if (!model) return usage("no model given (--ckpt DIR, --safetensors FILE or --gguf FILE)", NULL);
    if (bytes && tok_path) return usage("--bytes and --tokenizer exclude each other (bytes are no tokenizer)", NULL);
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET, sa.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
        fprintf(stderr, "ptserve: --host expects an IPv4 address such as 127.0.0.1 or 0.0.0.0, found '%s'\n", host);
        return 2;
    }
    {
        const char *base = strrchr(model, '/');
        size_t L;
        snprintf(S.model_name, sizeof S.model_name, "%s", name ? name : base && base[1] ? base + 1 : model);
        L = strlen(S.model_name);
        while (!name && L > 1 && S.model_name[L - 1] == '/') S.model_name[--L] = 0;
    }
    pthread_mutex_init(&S.mu, NULL);
    pthread_cond_init(&S.work, NULL);
    S.max_queue = (int)max_queue, S.timeout = timeout, S.max_seqs = (int32_t)max_seqs, S.budget = (int32_t)budget;
    /* the signals go to sigwait in this thread, none to the others */
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    /* HTTP first: /health answers 503 while the model loads */
    S.d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG, (uint16_t)port, NULL, NULL,
                           sv_handler, NULL, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa, MHD_OPTION_NOTIFY_COMPLETED, sv_completed, NULL,
                           MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(1 << 20), MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)120,
                           MHD_OPTION_CONNECTION_LIMIT, (unsigned)1000, MHD_OPTION_END);
    if (!S.d) {
        fprintf(stderr, "ptserve: cannot listen on %s:%ld (in use? --port 0 takes a free one)\n", host, port);
        return 1;
    }
    di = MHD_get_daemon_info(S.d, MHD_DAEMON_INFO_BIND_PORT);
    if (di) port = di->port;

    memset(&pd, 0, sizeof pd);
    if (!(S.ctx = pt_init(&pd))) return 1;
    if (threads > 0) pt_set_threads(S.ctx, (int)threads);
    if (!(S.w = pt_gpt_weights_open(S.ctx, model, quant, tok_path || bytes ? NULL : &S.tok))) {
        fprintf(stderr, "ptserve: %s\n", pt_error(S.ctx));
        MHD_stop_daemon(S.d);
        return 1;
    }
    /* the text of the ids: the model's tokenizer, --tokenizer FILE, or bytes when asked or the model is a byte model; never bytes instead of a refused tokenizer */
    if (tok_path && !(S.tok = pt_tokenizer_load(S.ctx, tok_path)) && !(S.tok = pt_tokenizer_load_dir(S.ctx, tok_path))) {
        fprintf(stderr, "ptserve: --tokenizer %s: %s\n", tok_path, pt_status_get(S.ctx) ? pt_error(S.ctx) : "no tokenizer.bin in it");
        MHD_stop_daemon(S.d);
        return 1;
    }
    if (S.tok && pt_tokenizer_vocab(S.tok) > S.w->cfg.vocab) {
        fprintf(stderr, "ptserve: the tokenizer has %d tokens, more than the model's vocabulary of %d\n", (int)pt_tokenizer_vocab(S.tok), (int)S.w->cfg.vocab);
        MHD_stop_daemon(S.d);
        return 1;
    }
    if (bytes && S.w->cfg.vocab > 256) {
        fprintf(stderr, "ptserve: --bytes: the model's vocabulary is %d tokens, more than the 256 bytes (ids 256 and up have no text): give its tokenizer "
                        "(--tokenizer FILE)\n", (int)S.w->cfg.vocab);
        MHD_stop_daemon(S.d);
        return 2;
    }
    if (!S.tok && !bytes && (S.w->tokenizer_error[0] || S.w->cfg.vocab > 256)) {
        if (S.w->tokenizer_error[0]) fprintf(stderr, "ptserve: %s: give --tokenizer FILE%s\n", S.w->tokenizer_error, S.w->cfg.vocab <= 256 ? " or --bytes" : "");
        else fprintf(stderr, "ptserve: %s: a vocabulary of %d tokens and no tokenizer: give --tokenizer FILE\n", model, (int)S.w->cfg.vocab);
        MHD_stop_daemon(S.d);
        return 1;
    }
    if (!S.tok && S.w->cfg.vocab < 256) {
        fprintf(stderr, "ptserve: %s has no tokenizer and a vocabulary of %d (< 256 bytes): prompts cannot be encoded\n", model, (int)S.w->cfg.vocab);
        return 1;
    }
    S.model.tok = S.tok, S.model.vocab = S.w->cfg.vocab, S.model.max_seq = S.w->cfg.max_seq;
    memset(&idesc, 0, sizeof idesc);
    idesc.max_seqs = (int32_t)max_seqs;
    idesc.block_tokens = 16;
    if (kv_blocks) idesc.kv_tokens = (int64_t)kv_blocks * 16;
    memset(&ed, 0, sizeof ed);
    ed.max_running = (int32_t)max_seqs, ed.token_budget = (int32_t)budget, ed.wall_clock = 1;
    ed.max_events = 1 << 16; /* each request is released once answered and the trace is capped: memory stays flat */
    if (!(S.inf = pt_infer_new(S.ctx, S.w, &idesc)) || !(S.eng = pt_engine_new(S.inf, &ed))) {
        fprintf(stderr, "ptserve: %s\n", pt_error(S.ctx));
        return 1;
    }
    S.kv = pt_infer_kv_stats(S.inf);
    if (pthread_create(&th, NULL, sv_engine_thread, NULL)) {
        fprintf(stderr, "ptserve: cannot start the engine thread\n");
        return 1;
    }
    pthread_mutex_lock(&S.mu);
    S.ready = 1;
    pthread_mutex_unlock(&S.mu);
    printf("ptserve: %s (%d layers, width %d, context %d, vocabulary %d%s), %lld KV blocks of 16 tokens, %ld sequences\n", S.model_name,
           (int)S.w->cfg.layers, (int)S.w->cfg.width, (int)S.w->cfg.max_seq, (int)S.w->cfg.vocab, S.tok ? ", its tokenizer" : ", bytes",
           (long long)S.kv.total, max_seqs);
    printf("ptserve: listening on http://%s:%ld/\n", host, port);
    fflush(stdout);

    sigwait(&set, &sig);
    /* drain: no new requests; the running ones finish; then the connections close */
    pthread_mutex_lock(&S.mu);
    S.draining = 1;
    printf("ptserve: %s: draining %lld request%s\n", sig == SIGTERM ? "SIGTERM" : "SIGINT", (long long)S.live, S.live == 1 ? "" : "s");
    fflush(stdout);
    while (S.live > 0) pthread_cond_wait(&S.work, &S.mu);
    S.stop = 1;
    pthread_cond_broadcast(&S.work);
    pthread_mutex_unlock(&S.mu);
    pthread_join(th, NULL);
    MHD_stop_daemon(S.d);
    pt_engine_free(S.eng);
    pt_infer_free(S.inf);
    pt_tokenizer_free(S.tok);
    pt_gpt_weights_free(S.w);
    pt_shutdown(S.ctx);
    printf("ptserve: drained, exiting\n");
    return 0;
}
#endif /* PTSERVE_NO_MAIN */
