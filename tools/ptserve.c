/* ptserve.c - an OpenAI-compatible HTTP server on ptrain.h's serving engine (pt_engine).

   Build: mpicc -O2 -fopenmp -march=native -DPTRAIN_MPI -DPTRAIN_OPENCL -I. tools/ptserve.c -o build/ptserve -lmicrohttpd -lm
   (make tools builds it too; libmicrohttpd: Debian's libmicrohttpd-dev, `make deps`; without MPI,
   cc and no -DPTRAIN_MPI: the same server without --tp / --pp)

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
     --kv-type f32|f16|q8_0  the KV cache's type (f32; f16 half the bytes; q8_0 blocks of 32 as llama.cpp's
                          -ctk/-ctv q8_0: 3.76x the tokens of f32 in the same bytes; needs a head size that
                          is a multiple of 32)
     --max-batch-tokens N tokens fed one engine iteration (256)
     --max-queue N        requests waiting for a sequence at most; past it 429 + Retry-After (64)
     --timeout S          seconds a request may take at most (600; a request's "timeout" field may lower it)
     --threads N          CPU threads (default: the CPUs available)
     --device DEV         where the engine's steps run: cpu (the default) or opencl[:P[:D]] (weights, KV
                          cache and layers on the device, the sampler on the host: ptgen's --device)
     --model-name NAME    the id /v1/models gives (default: the model path's last part)
     --step-delay-ms N    sleep N ms after each engine iteration (0): a tiny model made slow, as a
                          larger one would be, for tests and demonstrations of queueing
     --read-timeout S     a request's headers and body must be in within S s (10), else the
                          connection is closed (slow clients); answers are never cut by it
     --max-conns-per-ip N connections open at once from one address (16; 1000 in all)
     --max-body-memory B  bytes held by request bodies being received, all together (64 MiB); past it 503
     --api-key KEY, --api-key-file FILE   every /v1/ endpoint needs "Authorization: Bearer KEY" (else 401)
     --tls-cert FILE --tls-key FILE       HTTPS (PEM certificate and private key; libmicrohttpd's GnuTLS)
     --lookup N           speculative decoding by prompt lookup: up to N (1..16) tokens drafted a step from
                          earlier matches in each request's prompt and output (0: off)
     --tp N, --pp N       a model-parallel layout (tensor x pipeline) under mpirun -np N*N: every rank loads its
                          shard of the checkpoint (resharded as it is read: any training layout), holds its
                          heads / layers of the KV cache and runs its part of each step; world rank 0 answers
                          HTTP and schedules. SIGTERM to rank 0 drains and ends every rank; a rank that dies ends
                          the job (mpirun names it). Checkpoints only (not --safetensors / --gguf), no --draft
     --draft MODEL        speculative decoding by a draft model (a smaller checkpoint, safetensors or GGUF
                          file with the same vocabulary; in --quant's format); --draft-tokens N a step (4).
                          The tokens are those without it, bit for bit; the engine turns drafting off for a
                          request where it does not pay; a request's "speculative": false turns it off
   Endpoints: POST /v1/completions, POST /v1/chat/completions, GET /v1/models, GET /health,
   GET /metrics (Prometheus text), GET / (the playground page). docs/serving.md has the details:
   the fields, the chat template, the errors, the metrics. SIGTERM or SIGINT drains: no new
   requests (503), the running ones finish, then exit 0. Prints `ptserve: listening on URL` once the
   model is loaded. Exit status: 0 after a drain, 1 a model or socket that fails, 2 bad usage.

   Threads: MHD's internal polling thread serves every connection; one engine thread runs
   pt_engine_run, whose per-iteration hook (sv_hook) applies the step delay, cancels the requests past
   their deadline or whose client went away, and reads the metrics; the engine's stop strings end a
   request in the iteration of its token, its text callback streams the text, its end callback
   finishes the choice (and the request, its last choice); a watchdog thread closes connections
   past --read-timeout. A streaming response's content reader with nothing to send suspends its
   connection; the engine's text and end callbacks resume it. A non-streaming request suspends in the
   access handler until its last token. Request parsing and validation (sv_parse_request) has no HTTP
   in it: tests/fuzz/fuzz_serve_request.c includes this file with PTSERVE_NO_MAIN. */
#define _GNU_SOURCE
#define PTRAIN_IMPLEMENTATION
#include "../ptrain.h"

#include <errno.h>
#include <float.h>
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
    int speculative; /* 0: no drafting for it (the server's --lookup / --draft) */
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
        if (role && strlen(role) != pt_json_len(pt_json_get(m, "role"))) role = "\0"; /* a NUL inside: no role of ours */
        if (!role || (strcmp(role, "system") && strcmp(role, "user") && strcmp(role, "assistant") && strcmp(role, "developer")))
            return sv_fail(e, 400, "messages", "'messages[%zu].role' must be \"system\", \"developer\", \"user\" or \"assistant\", found %s", i,
                           role ? "another string" : sv_kind_name(pt_json_get(m, "role")));
        if (pt_json_type(c) != PT_JSON_STRING)
            return sv_fail(e, 400, "messages", "'messages[%zu].content' must be a string, found %s", i, sv_kind_name(c));
        /* the content's bytes as they are, a NUL among them too (as /v1/completions keeps a prompt's) */
        if (strcmp(role, "system") && strcmp(role, "developer")) sv_append(b, strcmp(role, "user") ? "Assistant: " : "User: ", strcmp(role, "user") ? 11 : 6);
        sv_append(b, pt_json_str(c), pt_json_len(c));
        sv_append(b, "\n", 1);
    }
    sv_append(b, "Assistant:", 10);
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
    r->chat = chat, r->temperature = 1.0f, r->top_p = 1.0f, r->n = 1, r->seed = 0, r->speculative = 1;
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
    if (t) {
        /* a temperature so small that the sampler's 1 / temperature overflows a float (or that rounds to
           float 0) is taken as 0, greedy: its limit, the same choice; never a row of NaN weights */
        r->temperature = (float)d;
        if (!(r->temperature > 0) || 1.0 / (double)r->temperature > FLT_MAX) r->temperature = 0;
    }
    if ((t = sv_num(root, "top_p", 0, 1, &d, e)) < 0) goto out;
    if (t) {
        if (d <= 0) {
            sv_fail(e, 400, "top_p", "'top_p' must be in (0, 1], found %g", d);
            goto out;
        }
        /* in float: a top_p that rounds to 0 would mean "off" (every token); under FLT_MIN it is
           FLT_MIN, the nucleus of the most likely token, as any tiny top_p means */
        r->top_p = (float)d;
        if (!(r->top_p >= FLT_MIN)) r->top_p = FLT_MIN;
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
    if (sv_bool(root, "speculative", &r->speculative, e) < 0) goto out;
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

#ifdef PTSERVE_NO_MAIN
/* bytes at the end of s[0, n) that begin a UTF-8 character not yet complete (pt_detok's hold-back;
   the request fuzzer checks it) */
static size_t sv_utf8_tail(const unsigned char *s, size_t n) { return pt__utf8_tail(s, n); }
#endif

#ifndef PTSERVE_NO_MAIN
#include <microhttpd.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ptserve_page.h"
#include "ptflags.h"

/* ==== the server ================================================================================ */
typedef struct sv_choice {
    struct sv_request *rq;
    int32_t index;
    int64_t eid;            /* the engine's request id */
    int32_t done;
    pt_finish finish;       /* why it ended (cancelled: a timeout when its request timed out) */
    int32_t ntok, cancel_sent;
    pt_sb text;             /* emitted text (the engine's pt_detok holds back the rest) */
    pt_sb lp_tok;           /* logprobs: the tokens' texts, NUL-separated */
    float *lp;
    int32_t nlp, caplp, lp_streamed;
    size_t streamed;        /* text bytes already sent in chunks */
    double t_last;
} sv_choice;

typedef struct sv_request {
    struct sv_request *next, *prev;
    int refs;                     /* the engine side and the connection */
    sv_req q;
    sv_choice *ch;
    int64_t serial;
    time_t created;
    double t_arrive, deadline, t_first;
    struct MHD_Connection *conn;
    int conn_fd, suspended, all_done, timed_out, gone, error, role_sent, finished_sent;
    int half_closed;              /* non-streaming, its client's side closed at arrival: answered by a reader */
    char errmsg[256];
    pt_sb out;                    /* streaming: SSE bytes to send */
    size_t sent;
    int stream_end;               /* [DONE] written */
} sv_request;

/* per-request state */
typedef struct sv_conn {
    pt_sb body;
    size_t reserved; /* bytes of --max-body-memory this body holds (its buffer's size) */
    sv_request *rq;
    int too_big, over_mem;
} sv_conn;

/* per-connection state (S.cmu): the read deadline's watch and the per-address count */
typedef struct sv_sock {
    struct sv_sock *prev, *next;
    int fd, receiving, killed; /* receiving: a request is being read (since t_start) */
    double t_start;
    unsigned char addr[16];    /* the client's address (IPv4: 4 bytes, IPv6: 16) */
    int alen;
} sv_sock;

#define SV_MAX_BODY ((size_t)16 << 20) /* one request's body at most */
#define SV_MAX_CONNS 1000              /* connections open at most */

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
    pt_gpt_weights *w, *dw;     /* the model, the draft model (--draft) */
    pt_tokenizer *tok;
    pt_infer *inf, *dinf;
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
    const char *api_key;        /* NULL: every /v1/ endpoint is open */
    size_t api_key_len;
    /* connections (S.cmu; taken after S.mu when both are, never the other way round) */
    pthread_mutex_t cmu;
    pthread_cond_t cwake;
    sv_sock *socks;
    int nsocks, max_conns, max_per_ip, wd_stop;
    double read_timeout;
    size_t body_mem, max_body_mem;
    int64_t refused_ip, refused_limit, slow, body_refused;
    /* metrics */
    int64_t req_total[7];       /* ok, 400, 429, 503, timeout, cancelled, 401 */
    int64_t tok_in, tok_out;
    sv_hist ttft, itl;
    pt_kv_stats kv;
    pt_engine_stats es;
    pt_dist *dist; /* --tp / --pp: the layout's grid (NULL: one process) */
    char pids[512]; /* the ranks' process ids, "0:PID 1:PID ..." (rank 0) */
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
        pt_sb_free(&c->text), pt_sb_free(&c->lp_tok);
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
static const char *sv_finish_name(const sv_choice *c) {
    switch (c->finish) {
    case PT_FINISH_STOP_STRING: case PT_FINISH_STOP_TOKEN: case PT_FINISH_CALLBACK: return "stop";
    case PT_FINISH_CANCELLED: return c->rq->timed_out ? "timeout" : "cancelled";
    case PT_FINISH_ERROR: return "error";
    default: return "length";
    }
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
    if (c->done) pt_sb_add(b, ",\"finish_reason\":\"%s\"}]}\n\n", sv_finish_name(c));
    else pt_sb_add(b, ",\"finish_reason\":null}]}\n\n");
    c->streamed = c->text.n;
}

/* the engine's per-token callback (the engine thread, no engine lock held): the metrics, the logprobs */
static int sv_on_token(void *user, int64_t id, int32_t token, float logprob) {
    sv_choice *c = (sv_choice *)user;
    sv_request *rq = c->rq;
    char small[256], *buf = small; /* a token of any length: a longer one is decoded into the heap */
    int64_t k = 0;
    double now = pt_time();
    (void)id;
    if (rq->q.logprobs) { /* the token's own text */
        if (S.tok) {
            k = pt_tokenizer_decode(S.tok, &token, 1, small, sizeof small - 1);
            if (k > (int64_t)sizeof small - 1) {
                buf = k < ((int64_t)1 << 31) ? (char *)malloc((size_t)k + 1) : NULL;
                if (!buf || pt_tokenizer_decode(S.tok, &token, 1, buf, k) != k) {
                    fprintf(stderr, "ptserve: token %d (%lld bytes) not decoded: out of memory\n", (int)token, (long long)k);
                    free(buf);
                    buf = small, k = 0;
                }
            }
        } else buf[0] = (char)token, k = token < 256 ? 1 : 0;
        if (k < 0) k = 0;
        buf[k] = 0;
    }
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
    pthread_mutex_unlock(&S.mu);
    if (buf != small) free(buf);
    return 0;
}
/* the engine's text callback: the text safe to show, streamed */
static int sv_on_text(void *user, int64_t id, int32_t token, float logprob, const char *text, size_t len) {
    sv_choice *c = (sv_choice *)user;
    (void)id, (void)token, (void)logprob;
    pthread_mutex_lock(&S.mu);
    if (len) sv_append(&c->text, text, len);
    if (!c->done) {
        sv_stream_choice(c->rq, c);
        sv_wake(c->rq);
    }
    pthread_mutex_unlock(&S.mu);
    return 0;
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
        pt_sb_add(b, ",\"finish_reason\":\"%s\"}", sv_finish_name(c));
    }
    pt_sb_add(b, "],");
    sv_usage_json(b, rq);
    pt_sb_add(b, "}");
}

/* ---- the engine thread ---- */
/* every choice of rq has ended: its last bytes, then it leaves the list (S.mu held) */
static void sv_request_done(sv_request *rq) {
    if (rq->half_closed && !rq->stream_end) { /* the whole answer for the reader (its status, 200, went out) */
        if (rq->error) {
            sv_err e;
            memset(&e, 0, sizeof e);
            sv_fail(&e, 500, "", "%s", rq->errmsg);
            sv_error_json(&rq->out, &e);
        } else sv_body_json(&rq->out, rq);
        rq->stream_end = 1;
    }
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
    if (rq->prev) rq->prev->next = rq->next;
    else S.reqs = rq->next;
    if (rq->next) rq->next->prev = rq->prev;
    sv_release(rq);
}
/* choice c has ended (finish, error: its message); the request when it was the last (S.mu held) */
static void sv_choice_done(sv_choice *c, pt_finish finish, const char *error) {
    sv_request *rq = c->rq;
    int32_t i, ndone = 0;
    c->done = 1, c->finish = finish;
    if (finish == PT_FINISH_ERROR) rq->error = 1, snprintf(rq->errmsg, sizeof rq->errmsg, "%s", error);
    sv_stream_choice(rq, c);
    sv_wake(rq);
    for (i = 0; i < rq->q.n; i++) ndone += rq->ch[i].done;
    if (ndone == rq->q.n) sv_request_done(rq);
}
/* the engine's end callback (once a choice; the engine thread, no engine lock held) */
static void sv_on_end(void *user, int64_t id, const pt_engine_result *res, const char *text, size_t len) {
    sv_choice *c = (sv_choice *)user;
    pthread_mutex_lock(&S.mu);
    pt_engine_release(S.eng, id); /* read: the engine forgets it (res is a copy) */
    if (len) sv_append(&c->text, text, len);
    sv_choice_done(c, res->finish, res->error);
    pthread_mutex_unlock(&S.mu);
}
static void sv_submit(sv_request *rq) {
    int32_t i;
    for (i = 0; i < rq->q.n; i++) {
        pt_engine_request er;
        sv_choice *c = &rq->ch[i];
        memset(&er, 0, sizeof er);
        er.prompt = rq->q.ids, er.nprompt = rq->q.nids, er.max_tokens = rq->q.max_tokens;
        er.sample.temperature = rq->q.temperature, er.sample.top_p = rq->q.top_p >= 1 ? 0 : rq->q.top_p, er.sample.top_k = rq->q.top_k;
        er.sample.seed = rq->q.seed + (uint64_t)i;
        er.stop = (const char *const *)rq->q.stop, er.nstop = rq->q.nstop;
        er.priority = rq->q.priority, er.arrival = 0, er.on_token = sv_on_token, er.on_text = sv_on_text, er.on_end = sv_on_end, er.user = c;
        er.lookup = rq->q.speculative ? 0 : -1, er.no_draft = !rq->q.speculative;
        c->eid = pt_engine_submit(S.eng, &er);
    }
}
/* the choices the engine refused (out of memory: no id, so no end callback) end here, once the
   connection is suspended or answered by a reader (S.mu held) */
static void sv_refused(sv_request *rq) {
    int32_t i, n = rq->q.n;
    for (i = 0; i < n && !rq->all_done; i++)
        if (rq->ch[i].eid < 0 && !rq->ch[i].done) sv_choice_done(&rq->ch[i], PT_FINISH_ERROR, "the engine refused the request");
}

/* the client of a suspended connection went away. A reset socket is gone. End of file (a FIN) is
   not, where the answer is already under way (a streaming one, or one whose client had half-closed
   when its request came: shutdown(SHUT_WR), `nc -N`): the client may still read, and one that closed
   is found when the answer is written (the peer's reset fails the write, or shows here). A FIN that
   comes while a non-streaming request waits in the access handler is gone: libmicrohttpd (0.9.75)
   reads the end of file when the connection resumes and closes it unanswered. */
static int sv_peer_gone(sv_request *rq) {
    char ch;
    ssize_t k;
    if (rq->conn_fd < 0 || !rq->suspended) return 0;
    k = recv(rq->conn_fd, &ch, 1, MSG_PEEK | MSG_DONTWAIT);
    if (k == 0) return !rq->q.stream && !rq->half_closed;
    return k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

/* the engine's per-iteration hook: the step delay, deadlines and clients gone (their requests
   cancelled: the end callback finishes them), the metrics */
static int sv_hook(void *user, pt_engine *e) {
    sv_request *rq;
    double now;
    (void)user;
    if (S.step_delay_ms > 0) {
        struct timespec ts;
        ts.tv_sec = S.step_delay_ms / 1000, ts.tv_nsec = (S.step_delay_ms % 1000) * 1000000L;
        nanosleep(&ts, NULL);
    }
    pthread_mutex_lock(&S.mu);
    now = pt_time();
    for (rq = S.reqs; rq; rq = rq->next) {
        int32_t i;
        if (!rq->timed_out && now > rq->deadline) rq->timed_out = 1;
        if (!rq->gone && sv_peer_gone(rq)) rq->gone = 1;
        if (!rq->timed_out && !rq->gone) continue;
        for (i = 0; i < rq->q.n; i++)
            if (!rq->ch[i].done && rq->ch[i].eid >= 0 && !rq->ch[i].cancel_sent) pt_engine_cancel(e, rq->ch[i].eid), rq->ch[i].cancel_sent = 1;
    }
    S.kv = pt_infer_kv_stats(S.inf);
    S.es = pt_engine_stats_get(e);
    S.waiting = (int)S.es.waiting, S.running = (int)S.es.running;
    pthread_mutex_unlock(&S.mu);
    return 0;
}
static void *sv_engine_thread(void *arg) {
    (void)arg;
    if (pt_engine_run(S.eng) != PT_OK) fprintf(stderr, "ptserve: engine: %s\n", pt_error(S.ctx));
    return NULL;
}

/* ---- connections: the per-address cap, the read deadline, the bodies' memory ---- */
static int sv_addr_key(const struct sockaddr *sa, unsigned char out[16]) {
    if (sa && sa->sa_family == AF_INET) return memcpy(out, &((const struct sockaddr_in *)sa)->sin_addr, 4), 4;
    if (sa && sa->sa_family == AF_INET6) return memcpy(out, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16), 16;
    return 0;
}
/* MHD's accept policy (its polling thread, before the connection is set up): at most --max-conns-per-ip
   connections from one address, max_conns in all; a refused one is closed at once and counted */
static enum MHD_Result sv_accept(void *cls, const struct sockaddr *addr, socklen_t len) {
    unsigned char key[16];
    int n = sv_addr_key(addr, key), same = 0;
    enum MHD_Result ok = MHD_YES;
    const sv_sock *k;
    (void)cls, (void)len;
    pthread_mutex_lock(&S.cmu);
    for (k = S.socks; k; k = k->next) same += k->alen == n && !memcmp(k->addr, key, (size_t)n);
    if (S.nsocks >= S.max_conns) S.refused_limit++, ok = MHD_NO;
    else if (same >= S.max_per_ip) S.refused_ip++, ok = MHD_NO;
    pthread_mutex_unlock(&S.cmu);
    return ok;
}
/* MHD's connection start and end: the watch list. MHD calls CLOSED before it closes the socket, so
   while an entry is on the list (under S.cmu) its fd is the connection's own. */
static void sv_conn_notify(void *cls, struct MHD_Connection *con, void **socket_context, enum MHD_ConnectionNotificationCode code) {
    sv_sock *k;
    (void)cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *fi = MHD_get_connection_info(con, MHD_CONNECTION_INFO_CONNECTION_FD);
        const union MHD_ConnectionInfo *ai = MHD_get_connection_info(con, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        if (!(k = (sv_sock *)calloc(1, sizeof *k))) return; /* out of memory: not watched */
        k->fd = fi ? fi->connect_fd : -1;
        k->alen = sv_addr_key(ai ? ai->client_addr : NULL, k->addr);
        k->receiving = 1, k->t_start = pt_time();
        pthread_mutex_lock(&S.cmu);
        k->next = S.socks;
        if (S.socks) S.socks->prev = k;
        S.socks = k, S.nsocks++;
        pthread_mutex_unlock(&S.cmu);
        *socket_context = k;
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED && (k = (sv_sock *)*socket_context) != NULL) {
        pthread_mutex_lock(&S.cmu);
        if (k->prev) k->prev->next = k->next;
        else S.socks = k->next;
        if (k->next) k->next->prev = k->prev;
        S.nsocks--;
        pthread_mutex_unlock(&S.cmu);
        free(k);
        *socket_context = NULL;
    }
}
static sv_sock *sv_sock_of(struct MHD_Connection *con) {
    const union MHD_ConnectionInfo *i = MHD_get_connection_info(con, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return i ? (sv_sock *)i->socket_context : NULL;
}
/* the connection's request is in (answered, or its whole body read): the read deadline stops; at 1
   (its answer sent) it starts again for the next request on the connection */
static void sv_receiving(struct MHD_Connection *con, int on) {
    sv_sock *k = sv_sock_of(con);
    if (!k) return;
    pthread_mutex_lock(&S.cmu);
    k->receiving = on;
    if (on) k->t_start = pt_time();
    pthread_mutex_unlock(&S.cmu);
}
/* the watchdog thread: a connection whose request has not come in whole within --read-timeout (a
   slow client trickling its headers or body, each byte resetting MHD's idle timeout) is shut down;
   MHD then reads its end and closes it. A request once in (its answer streaming, however long) is
   never cut. */
static void *sv_watchdog(void *arg) {
    (void)arg;
    pthread_mutex_lock(&S.cmu);
    while (!S.wd_stop) {
        struct timespec ts;
        double now = pt_time();
        sv_sock *k;
        for (k = S.socks; k; k = k->next)
            if (k->receiving && !k->killed && k->fd >= 0 && now - k->t_start > S.read_timeout) shutdown(k->fd, SHUT_RDWR), k->killed = 1, S.slow++;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 100 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&S.cwake, &S.cmu, &ts);
    }
    pthread_mutex_unlock(&S.cmu);
    return NULL;
}
/* takes want - cc->reserved more bytes of --max-body-memory for cc's body; 0 when over it */
static int sv_reserve(sv_conn *cc, size_t want) {
    int ok = 1;
    if (want <= cc->reserved) return 1;
    pthread_mutex_lock(&S.cmu);
    if (S.body_mem + (want - cc->reserved) > S.max_body_mem) ok = 0, S.body_refused++;
    else S.body_mem += want - cc->reserved, cc->reserved = want;
    pthread_mutex_unlock(&S.cmu);
    return ok;
}
/* the body's buffer freed, its memory given back */
static void sv_body_drop(sv_conn *cc) {
    pt_sb_free(&cc->body);
    pt_sb_init(&cc->body);
    pthread_mutex_lock(&S.cmu);
    S.body_mem -= cc->reserved;
    pthread_mutex_unlock(&S.cmu);
    cc->reserved = 0;
}
/* a piece of the body: 1 kept, 0 over --max-body-memory (the body is dropped), -1 out of memory. With a
   Content-Length the whole body was reserved at its headers and the buffer is that size; a chunked
   one grows by doubling while the server's total allows. */
static int sv_body_add(sv_conn *cc, const char *data, size_t n) {
    size_t need = cc->body.n + n + 1;
    if (need > cc->body.cap) {
        size_t cap = need <= cc->reserved ? cc->reserved : need * 2 < SV_MAX_BODY + 1 ? need * 2 : need;
        char *p;
        if (!sv_reserve(cc, cap)) return sv_body_drop(cc), 0;
        if (!(p = (char *)realloc(cc->body.s, cap))) return -1;
        cc->body.s = p, cc->body.cap = cap;
    }
    memcpy(cc->body.s + cc->body.n, data, n);
    cc->body.n += n, cc->body.s[cc->body.n] = 0;
    return 1;
}
/* the API key, compared in constant time over the key's bytes: "Authorization: Bearer KEY" */
static int sv_authorized(struct MHD_Connection *con) {
    const char *h = MHD_lookup_connection_value(con, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    size_t n, i;
    unsigned d;
    if (!S.api_key) return 1;
    if (!h || strncasecmp(h, "Bearer ", 7)) return 0;
    for (h += 7; *h == ' '; h++) {}
    n = strlen(h);
    d = n != S.api_key_len;
    for (i = 0; i < S.api_key_len; i++) d |= (unsigned char)S.api_key[i] ^ (unsigned char)(i < n ? h[i] : 0);
    return d == 0;
}

/* ---- HTTP ---- */
static enum MHD_Result sv_send_h(struct MHD_Connection *con, int status, const char *type, const char *body, size_t n, int retry_after, const char *hname,
                                 const char *hval) {
    struct MHD_Response *r = MHD_create_response_from_buffer(n, (void *)body, MHD_RESPMEM_MUST_COPY);
    enum MHD_Result ok;
    sv_receiving(con, 0); /* answered: the read deadline is over for this request */
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", type);
    MHD_add_response_header(r, "Access-Control-Allow-Origin", "*");
    if (hname) MHD_add_response_header(r, hname, hval);
    if (retry_after > 0) {
        char s[16];
        snprintf(s, sizeof s, "%d", retry_after);
        MHD_add_response_header(r, "Retry-After", s);
    }
    ok = MHD_queue_response(con, (unsigned)status, r);
    MHD_destroy_response(r);
    return ok;
}
static enum MHD_Result sv_send(struct MHD_Connection *con, int status, const char *type, const char *body, size_t n, int retry_after) {
    return sv_send_h(con, status, type, body, n, retry_after, NULL, NULL);
}
static enum MHD_Result sv_send_err(struct MHD_Connection *con, const sv_err *e, int retry_after) {
    pt_sb b;
    enum MHD_Result ok;
    pt_sb_init(&b);
    sv_error_json(&b, e);
    ok = sv_send_h(con, e->status, "application/json", b.s ? b.s : "{}", b.n, retry_after, e->status == 401 ? "WWW-Authenticate" : NULL, "Bearer");
    pt_sb_free(&b);
    pthread_mutex_lock(&S.mu);
    S.req_total[e->status == 429 ? 2 : e->status == 503 ? 3 : e->status == 401 ? 6 : 1]++;
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
    static const char *const res[] = {"ok", "bad_request", "rejected", "unavailable", "timeout", "cancelled", "unauthorized"};
    int i;
    int64_t total;
    pt_sb_add(b, "# HELP ptserve_requests_running Requests with a sequence in the engine.\n# TYPE ptserve_requests_running gauge\nptserve_requests_running %d\n", S.running);
    pt_sb_add(b, "# HELP ptserve_requests_waiting Requests waiting for a sequence.\n# TYPE ptserve_requests_waiting gauge\nptserve_requests_waiting %d\n", S.waiting);
    pt_sb_add(b, "# HELP ptserve_requests_total Requests answered, by result.\n# TYPE ptserve_requests_total counter\n");
    for (i = 0; i < 7; i++) pt_sb_add(b, "ptserve_requests_total{result=\"%s\"} %lld\n", res[i], (long long)S.req_total[i]);
    pthread_mutex_lock(&S.cmu);
    pt_sb_add(b, "# HELP ptserve_connections_open Connections open.\n# TYPE ptserve_connections_open gauge\nptserve_connections_open %d\n", S.nsocks);
    pt_sb_add(b, "# HELP ptserve_connections_refused_total Connections closed as accepted: over --max-conns-per-ip from one address, or over the %d in all.\n"
                 "# TYPE ptserve_connections_refused_total counter\nptserve_connections_refused_total{reason=\"per_ip\"} %lld\n"
                 "ptserve_connections_refused_total{reason=\"limit\"} %lld\n", S.max_conns, (long long)S.refused_ip, (long long)S.refused_limit);
    pt_sb_add(b, "# HELP ptserve_connections_slow_total Connections closed because a request was not in whole within --read-timeout.\n"
                 "# TYPE ptserve_connections_slow_total counter\nptserve_connections_slow_total %lld\n", (long long)S.slow);
    pt_sb_add(b, "# HELP ptserve_body_memory_bytes Memory held by request bodies being received (at most --max-body-memory).\n"
                 "# TYPE ptserve_body_memory_bytes gauge\nptserve_body_memory_bytes %zu\n", S.body_mem);
    pt_sb_add(b, "# HELP ptserve_bodies_refused_total Requests answered 503 because --max-body-memory was held by others.\n"
                 "# TYPE ptserve_bodies_refused_total counter\nptserve_bodies_refused_total %lld\n", (long long)S.body_refused);
    pthread_mutex_unlock(&S.cmu);
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
    pt_sb_add(b, "# HELP ptserve_spec_drafted_tokens_total Tokens drafted (speculative decoding).\n# TYPE ptserve_spec_drafted_tokens_total counter\n"
                 "ptserve_spec_drafted_tokens_total %lld\n", (long long)S.es.drafted);
    pt_sb_add(b, "# HELP ptserve_spec_accepted_tokens_total Drafted tokens accepted.\n# TYPE ptserve_spec_accepted_tokens_total counter\n"
                 "ptserve_spec_accepted_tokens_total %lld\n", (long long)S.es.accepted);
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
    if (!cc && S.api_key && !strncmp(url, "/v1/", 4) && strcmp(method, "OPTIONS") && !sv_authorized(con)) {
        /* before the body is read: MHD answers and closes without reading it */
        sv_fail(&e, 401, "", "%s", MHD_lookup_connection_value(con, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION)
                                     ? "invalid API key: the header Authorization: Bearer KEY must carry the server's key (--api-key)"
                                     : "no API key: send the header Authorization: Bearer KEY (the server runs with --api-key)");
        e.type = "authentication_error";
        return sv_send_err(con, &e, 0);
    }
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
    if (!cc) { /* the headers: state for the body, its memory reserved when its length is given */
        const char *cl = MHD_lookup_connection_value(con, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        size_t limit = S.max_body_mem < SV_MAX_BODY ? S.max_body_mem : SV_MAX_BODY;
        unsigned long long len = 0;
        if (!(cc = (sv_conn *)calloc(1, sizeof *cc))) return MHD_NO;
        pt_sb_init(&cc->body);
        if (cl) {
            char *end;
            errno = 0;
            len = strtoull(cl, &end, 10);
            if (end == cl || *end || errno) len = 0; /* MHD itself refuses a malformed Content-Length */
        }
        if (len >= limit) { /* answered before the body is read: MHD closes the connection after it */
            free(cc);
            sv_fail(&e, 413, "", "the body is %llu bytes; at most %zu (%s)", len, limit - 1, limit < SV_MAX_BODY ? "--max-body-memory" : "16 MiB");
            return sv_send_err(con, &e, 0);
        }
        if (len && !sv_reserve(cc, (size_t)len + 1)) {
            free(cc);
            sv_fail(&e, 503, "", "the server holds --max-body-memory %zu bytes of request bodies being received; try again", S.max_body_mem);
            return sv_send_err(con, &e, 1);
        }
        *con_cls = cc;
        return MHD_YES;
    }
    if (*upload_size) { /* a piece of the body */
        if (cc->too_big || cc->over_mem) {}
        else if (cc->body.n + *upload_size + 1 > (S.max_body_mem < SV_MAX_BODY ? S.max_body_mem : SV_MAX_BODY)) cc->too_big = 1, sv_body_drop(cc);
        else {
            int k = sv_body_add(cc, upload, *upload_size);
            if (k < 0) return MHD_NO;
            if (k == 0) cc->over_mem = 1;
        }
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
        int chat = !strcmp(url, "/v1/chat/completions"), retry = 0, bad;
        const union MHD_ConnectionInfo *ci;
        sv_receiving(con, 0);
        pthread_mutex_lock(&S.mu);
        if (!S.ready || S.draining) sv_fail(&e, 503, "", "the server is %s", S.ready ? "draining (shutting down)" : "loading the model"), retry = 1;
        else if (S.waiting >= S.max_queue) {
            sv_fail(&e, 429, "", "the queue is full: %d requests waiting (--max-queue %d)", S.waiting, S.max_queue);
            retry = 1 + S.waiting / (S.max_seqs > 0 ? S.max_seqs : 1);
        }
        pthread_mutex_unlock(&S.mu);
        if (e.status) return sv_body_drop(cc), sv_send_err(con, &e, retry);
        if (cc->too_big) {
            sv_fail(&e, 413, "", "the body is over %zu bytes", S.max_body_mem < SV_MAX_BODY ? S.max_body_mem - 1 : SV_MAX_BODY - 1);
            return sv_send_err(con, &e, 0);
        }
        if (cc->over_mem) {
            sv_fail(&e, 503, "", "the server holds --max-body-memory %zu bytes of request bodies being received; try again", S.max_body_mem);
            return sv_send_err(con, &e, 1);
        }
        bad = sv_parse_request(cc->body.s ? cc->body.s : "", cc->body.n, chat, &S.model, &q, &e);
        sv_body_drop(cc); /* parsed: the body's memory goes back */
        if (bad) return sv_send_err(con, &e, 0);
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
        for (i = 0; i < q.n; i++) rq->ch[i].rq = rq, rq->ch[i].index = i, rq->ch[i].eid = -1, pt_sb_init(&rq->ch[i].text), pt_sb_init(&rq->ch[i].lp_tok);
        pthread_mutex_lock(&S.mu);
        rq->serial = S.nextserial++;
        S.live++;
        S.tok_in += q.nids;
        S.waiting += q.n;
        rq->next = S.reqs, rq->prev = NULL, S.reqs = rq;
        if (rq->next) rq->next->prev = rq;
        sv_submit(rq);
        cc->rq = rq;
        pthread_cond_broadcast(&S.work);
        if (!q.stream && rq->conn_fd >= 0) { /* the client has half-closed already: the answer must be under way before MHD reads the end */
            char ch;
            rq->half_closed = recv(rq->conn_fd, &ch, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
        }
        if (q.stream || rq->half_closed) {
            struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, sv_reader, rq, sv_reader_free);
            enum MHD_Result ok;
            cc->rq = NULL; /* the response holds the connection's reference */
            sv_refused(rq);
            pthread_mutex_unlock(&S.mu);
            if (!r) return MHD_NO;
            MHD_add_response_header(r, "Content-Type", q.stream ? "text/event-stream" : "application/json");
            MHD_add_response_header(r, "Cache-Control", "no-cache");
            MHD_add_response_header(r, "Access-Control-Allow-Origin", "*");
            ok = MHD_queue_response(con, 200, r);
            MHD_destroy_response(r);
            return ok;
        }
        rq->suspended = 1;
        MHD_suspend_connection(con);
        sv_refused(rq);
        pthread_mutex_unlock(&S.mu);
        return MHD_YES;
    }
}

static void sv_completed(void *cls, struct MHD_Connection *con, void **con_cls, enum MHD_RequestTerminationCode toe) {
    sv_conn *cc = (sv_conn *)*con_cls;
    (void)cls, (void)toe;
    sv_receiving(con, 1); /* the next request on this connection has --read-timeout from now */
    if (!cc) return;
    if (cc->rq) { /* a non-streaming request that ended before its answer */
        pthread_mutex_lock(&S.mu);
        cc->rq->gone = 1, cc->rq->conn = NULL, cc->rq->suspended = 0;
        pthread_cond_broadcast(&S.work);
        sv_release(cc->rq);
        pthread_mutex_unlock(&S.mu);
    }
    sv_body_drop(cc);
    free(cc);
    *con_cls = NULL;
}

/* ---- main ---- */
static const char usage_text[] =
    "usage: ptserve (--ckpt DIR | --safetensors FILE | --gguf FILE) [--tokenizer FILE | --bytes] [--quant f32|bf16|q8_0|q4_0] [--host ADDR] [--port N]\n"
    "               [--max-seqs N] [--kv-blocks N] [--kv-type f32|f16|q8_0] [--max-batch-tokens N] [--max-queue N] [--timeout S] [--threads N]\n"
    "               [--device cpu|opencl[:P[:D]]] [--model-name NAME] [--step-delay-ms N] [--read-timeout S] [--max-conns-per-ip N] [--max-body-memory BYTES]\n"
    "               [--api-key KEY | --api-key-file FILE] [--tls-cert FILE --tls-key FILE] [--tp N --pp N under mpirun -np N*N]\n"
    "               (see the top of tools/ptserve.c, docs/serving.md)\n";
static int usage(const char *msg, const char *what) {
    if (msg) fprintf(stderr, "ptserve: %s%s%s\n", msg, what ? " " : "", what ? what : "");
    fputs(usage_text, stderr);
    return 2;
}
/* a whole file, NUL-terminated (a PEM certificate or key, an API key); NULL with the reason on stderr */
static char *read_small_file(const char *flag, const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    char *p;
    size_t n;
    if (!f) return fprintf(stderr, "ptserve: %s %s: %s\n", flag, path, strerror(errno)), (char *)NULL;
    p = (char *)malloc((1 << 20) + 1);
    n = p ? fread(p, 1, 1 << 20, f) : 0;
    if (!p || ferror(f) || (n == (1 << 20) && fgetc(f) != EOF)) {
        fprintf(stderr, "ptserve: %s %s: %s\n", flag, path, !p ? "out of memory" : ferror(f) ? "cannot be read" : "over 1 MiB: not a key or a certificate");
        fclose(f);
        free(p);
        return NULL;
    }
    fclose(f);
    p[n] = 0;
    *len = n;
    return p;
}

/* the command line, and what main holds from it */
typedef struct sv_opts {
    const char *model, *host, *name, *tok_path, *key_arg, *key_file, *tls_cert, *tls_key, *draft, *device;
    long port, max_seqs, kv_blocks, budget, max_queue, threads, per_ip, lookup, draft_tokens, tp, pp;
    double timeout, read_timeout, body_mem;
    int quant, bytes, kv_type;
    char *cert_pem, *key_pem, *api_key; /* read from the files */
    struct sockaddr_in sa;
    sigset_t signals; /* SIGTERM, SIGINT: sigwait'ed by main */
    pthread_t wd, engine;
} sv_opts;

static int flag_model(void *dst, const char *tool, const char *flag, const char *v) {
    const char **model = (const char **)dst;
    (void)tool, (void)flag;
    if (*model) return usage("more than one model given:", v);
    *model = v;
    return 0;
}
static int flag_quant(void *dst, const char *tool, const char *flag, const char *v) {
    int *quant = (int *)dst;
    if ((*quant = pt_wtype_parse(v)) < 0 || *quant == PT_W_F16) return ptf_bad(tool, flag, "f32, bf16, q8_0 or q4_0", v);
    return 0;
}

static const int kv_types[] = {PT_W_F32, PT_W_F16, PT_W_Q8_0}; /* --kv-type's values */
/* parse_flags: the command line into o; PTF_GO, or the exit status */
static int parse_flags(sv_opts *o, int argc, char **argv) {
    int rc;
    const ptf_flag flags[] = {PTF_FN("--ckpt", flag_model, &o->model),
                              PTF_FN("--safetensors", flag_model, &o->model),
                              PTF_FN("--gguf", flag_model, &o->model),
                              PTF_FN("--quant", flag_quant, &o->quant),
                              PTF_STR("--tokenizer", &o->tok_path),
                              PTF_BOOL("--bytes", &o->bytes),
                              PTF_STR("--host", &o->host),
                              PTF_STR("--model-name", &o->name),
                              PTF_LONG("--port", &o->port, 0, 65535),
                              PTF_LONG("--max-seqs", &o->max_seqs, 1, 4096),
                              PTF_LONG("--kv-blocks", &o->kv_blocks, 1, 1L << 24),
                              PTF_CHOICE("--kv-type", &o->kv_type, "f32|f16|q8_0", kv_types),
                              PTF_LONG("--max-batch-tokens", &o->budget, 1, 1L << 20),
                              PTF_LONG("--max-queue", &o->max_queue, 1, 1L << 20),
                              PTF_LONG("--threads", &o->threads, 1, 1024),
                              PTF_STR("--device", &o->device),
                              PTF_LONG("--step-delay-ms", &S.step_delay_ms, 0, 10000),
                              PTF_REAL_X("--timeout", &o->timeout, 0, 1e7, PTF_OPEN_LO, "seconds in (0, 1e7]"),
                              PTF_REAL_X("--read-timeout", &o->read_timeout, 0.1, 3600, 0, "seconds in [0.1, 3600]"),
                              PTF_LONG("--max-conns-per-ip", &o->per_ip, 1, SV_MAX_CONNS),
                              PTF_REAL_X("--max-body-memory", &o->body_mem, 4096, 1e15, PTF_WHOLE, "a whole number of bytes in [4096, 1e15]"),
                              PTF_STR("--api-key", &o->key_arg),
                              PTF_STR("--api-key-file", &o->key_file),
                              PTF_STR("--tls-cert", &o->tls_cert),
                              PTF_STR("--tls-key", &o->tls_key),
                              PTF_LONG("--lookup", &o->lookup, 0, 16),
                              PTF_STR("--draft", &o->draft),
                              PTF_LONG("--draft-tokens", &o->draft_tokens, 1, 16),
                              PTF_LONG("--tp", &o->tp, 1, 4096),
                              PTF_LONG("--pp", &o->pp, 1, 4096),
                              PTF_END};
    memset(o, 0, sizeof *o);
    o->host = "127.0.0.1", o->port = 8080, o->max_seqs = 16, o->budget = 256, o->max_queue = 64, o->per_ip = 16;
    o->timeout = 600, o->read_timeout = 10, o->body_mem = 64.0 * (1 << 20), o->quant = -1, o->tp = o->pp = 1;
    if ((rc = ptf_parse("ptserve", usage_text, flags, argc, argv)) != PTF_GO) return rc;
    if (!o->model) return usage("no model given (--ckpt DIR, --safetensors FILE or --gguf FILE)", NULL);
    if (o->bytes && o->tok_path) return usage("--bytes and --tokenizer exclude each other (bytes are no tokenizer)", NULL);
    if (o->device && strcmp(o->device, "cpu") && strncmp(o->device, "opencl", 6))
        return usage("--device expects cpu or opencl[:P[:D]], found", o->device);
    if (o->key_arg && o->key_file) return usage("--api-key and --api-key-file both given: one key, from one of them", NULL);
    if (!o->tls_cert != !o->tls_key) return usage(o->tls_cert ? "--tls-cert needs --tls-key (the certificate's private key)" : "--tls-key needs --tls-cert", NULL);
    if (o->tp * o->pp > 1 && o->draft)
        return usage("--draft runs on one process: it cannot be combined with --tp / --pp (a model-parallel layout)", NULL);
#ifndef PTRAIN_MPI
    if (o->tp * o->pp > 1) return usage("--tp / --pp need a ptserve built with MPI (mpicc -DPTRAIN_MPI; make tools builds it so)", NULL);
#endif
    memset(&o->sa, 0, sizeof o->sa);
    o->sa.sin_family = AF_INET, o->sa.sin_port = htons((uint16_t)o->port);
    if (inet_pton(AF_INET, o->host, &o->sa.sin_addr) != 1) {
        fprintf(stderr, "ptserve: --host expects an IPv4 address such as 127.0.0.1 or 0.0.0.0, found '%s'\n", o->host);
        return 2;
    }
    return PTF_GO;
}

/* read_api_key: printable ASCII without spaces, from --api-key or --api-key-file's first line, into
   S.api_key; PTF_GO, or the exit status */
static int read_api_key(sv_opts *o) {
    size_t i, n, flen = 0;
    char *api_key = NULL;
    if (!o->key_arg && !o->key_file) return PTF_GO;
    if (o->key_file && !(api_key = read_small_file("--api-key-file", o->key_file, &flen))) return 2;
    if (o->key_arg && !(api_key = sv_strdup(o->key_arg))) return 1;
    for (n = 0; api_key[n] && api_key[n] != '\n' && api_key[n] != '\r'; n++) {}
    while (n > 0 && (api_key[n - 1] == ' ' || api_key[n - 1] == '\t')) n--;
    api_key[n] = 0;
    for (i = 0; i < n && api_key[i] > 32 && api_key[i] < 127; i++) {}
    if (n == 0 || i < n) {
        fprintf(stderr, "ptserve: %s%s%s: expected an API key of printable ASCII without spaces, found %s\n", o->key_file ? "--api-key-file " : "--api-key",
                o->key_file ? o->key_file : "", o->key_file ? " (its first line)" : "", n == 0 ? "an empty one" : "a space or a control byte in it");
        free(api_key);
        return 2;
    }
    o->api_key = api_key;
    S.api_key = api_key, S.api_key_len = n;
    return PTF_GO;
}

/* read_tls: with --tls-cert, both PEM files (and a libmicrohttpd built with GnuTLS); PTF_GO, or the
   exit status */
static int read_tls(sv_opts *o) {
    const char *bad = NULL;
    size_t flen = 0;
    if (!o->tls_cert) return PTF_GO;
    if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
        fprintf(stderr, "ptserve: --tls-cert: this libmicrohttpd was built without TLS (GnuTLS): HTTPS cannot be served\n");
        return 1;
    }
    if (!(o->cert_pem = read_small_file("--tls-cert", o->tls_cert, &flen))) bad = "";
    else if (!strstr(o->cert_pem, "-----BEGIN CERTIFICATE-----")) bad = "--tls-cert";
    else if (!(o->key_pem = read_small_file("--tls-key", o->tls_key, &flen))) bad = "";
    else if (!strstr(o->key_pem, "-----BEGIN") || !strstr(o->key_pem, "PRIVATE KEY-----")) bad = "--tls-key";
    if (bad) {
        if (*bad) fprintf(stderr, "ptserve: %s %s: expected a PEM %s, found none\n", bad, *bad && bad[6] == 'c' ? o->tls_cert : o->tls_key,
                          bad[6] == 'c' ? "certificate (-----BEGIN CERTIFICATE-----)" : "private key (-----BEGIN ... PRIVATE KEY-----)");
        return 2;
    }
    return PTF_GO;
}

/* init_state: the model's name, the locks and limits in S; SIGTERM and SIGINT kept for main's
   sigwait (no other thread gets them), SIGPIPE ignored */
static void init_state(sv_opts *o) {
    const char *base = strrchr(o->model, '/');
    size_t L;
    snprintf(S.model_name, sizeof S.model_name, "%s", o->name ? o->name : base && base[1] ? base + 1 : o->model);
    L = strlen(S.model_name);
    while (!o->name && L > 1 && S.model_name[L - 1] == '/') S.model_name[--L] = 0;
    pthread_mutex_init(&S.mu, NULL);
    pthread_cond_init(&S.work, NULL);
    pthread_mutex_init(&S.cmu, NULL);
    pthread_cond_init(&S.cwake, NULL);
    S.max_queue = (int)o->max_queue, S.timeout = o->timeout, S.max_seqs = (int32_t)o->max_seqs, S.budget = (int32_t)o->budget;
    S.read_timeout = o->read_timeout, S.max_per_ip = (int)o->per_ip, S.max_conns = SV_MAX_CONNS, S.max_body_mem = (size_t)o->body_mem;
    sigemptyset(&o->signals);
    sigaddset(&o->signals, SIGTERM);
    sigaddset(&o->signals, SIGINT);
    pthread_sigmask(SIG_BLOCK, &o->signals, NULL);
    signal(SIGPIPE, SIG_IGN);
}

/* start_http: the watchdog thread, then the HTTP daemon (first: /health answers 503 while the model
   loads); 0, or 1 after the message. The connection limit is MHD's too, a little above ours, so that
   sv_accept (called after MHD's own check) sees and counts each refusal. The TLS options come last:
   without --tls-cert the first of them is MHD_OPTION_END. */
static int start_http(sv_opts *o) {
    const union MHD_DaemonInfo *di;
    if (pthread_create(&o->wd, NULL, sv_watchdog, NULL)) {
        fprintf(stderr, "ptserve: cannot start the watchdog thread\n");
        return 1;
    }
    S.d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG | (o->cert_pem ? MHD_USE_TLS : 0),
                           (uint16_t)o->port, sv_accept, NULL, sv_handler, NULL, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&o->sa, MHD_OPTION_NOTIFY_COMPLETED,
                           sv_completed, NULL, MHD_OPTION_NOTIFY_CONNECTION, sv_conn_notify, NULL, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(1 << 20),
                           MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)120, MHD_OPTION_CONNECTION_LIMIT, (unsigned)(SV_MAX_CONNS + 8),
                           o->cert_pem ? MHD_OPTION_HTTPS_MEM_KEY : MHD_OPTION_END, o->key_pem, MHD_OPTION_HTTPS_MEM_CERT, o->cert_pem, MHD_OPTION_END);
    if (!S.d) {
        if (o->cert_pem)
            fprintf(stderr, "ptserve: cannot serve HTTPS on %s:%ld with --tls-cert %s --tls-key %s (is the key the certificate's? see above; or the port is in use)\n",
                    o->host, o->port, o->tls_cert, o->tls_key);
        else fprintf(stderr, "ptserve: cannot listen on %s:%ld (in use? --port 0 takes a free one)\n", o->host, o->port);
        return 1;
    }
    di = MHD_get_daemon_info(S.d, MHD_DAEMON_INFO_BIND_PORT);
    if (di) o->port = di->port;
    return 0;
}

/* load_model: the context, the weights and the text of the ids: the model's tokenizer, --tokenizer
   FILE, or bytes when asked or the model is a byte model; never bytes instead of a refused
   tokenizer. 0, or the exit status after the message */
static int load_model(sv_opts *o) {
    pt_desc pd;
    memset(&pd, 0, sizeof pd);
    pd.dist = S.dist; /* a TP x PP layout: this rank's shard */
    pd.device = o->device ? o->device : "cpu";
    if (!(S.ctx = pt_init(&pd))) {
        fprintf(stderr, "ptserve: --device %s: no context (the reason above)\n", pd.device);
        return 1;
    }
    if (o->threads > 0) pt_set_threads(S.ctx, (int)o->threads);
    if (!(S.w = pt_gpt_weights_open(S.ctx, o->model, o->quant, o->tok_path || o->bytes ? NULL : &S.tok))) {
        fprintf(stderr, "ptserve: %s\n", pt_error(S.ctx));
        return 1;
    }
    if (o->tok_path && !(S.tok = pt_tokenizer_load(S.ctx, o->tok_path)) && !(S.tok = pt_tokenizer_load_dir(S.ctx, o->tok_path))) {
        fprintf(stderr, "ptserve: --tokenizer %s: %s\n", o->tok_path, pt_status_get(S.ctx) ? pt_error(S.ctx) : "no tokenizer.bin in it");
        return 1;
    }
    if (S.tok && pt_tokenizer_vocab(S.tok) > S.w->cfg.vocab) {
        fprintf(stderr, "ptserve: the tokenizer has %d tokens, more than the model's vocabulary of %d\n", (int)pt_tokenizer_vocab(S.tok), (int)S.w->cfg.vocab);
        return 1;
    }
    if (o->bytes && S.w->cfg.vocab > 256) {
        fprintf(stderr, "ptserve: --bytes: the model's vocabulary is %d tokens, more than the 256 bytes (ids 256 and up have no text): give its tokenizer "
                        "(--tokenizer FILE)\n", (int)S.w->cfg.vocab);
        return 2;
    }
    if (!S.tok && !o->bytes && (S.w->tokenizer_error[0] || S.w->cfg.vocab > 256)) {
        if (S.w->tokenizer_error[0]) fprintf(stderr, "ptserve: %s: give --tokenizer FILE%s\n", S.w->tokenizer_error, S.w->cfg.vocab <= 256 ? " or --bytes" : "");
        else fprintf(stderr, "ptserve: %s: a vocabulary of %d tokens and no tokenizer: give --tokenizer FILE\n", o->model, (int)S.w->cfg.vocab);
        return 1;
    }
    if (!S.tok && S.w->cfg.vocab < 256) {
        fprintf(stderr, "ptserve: %s has no tokenizer and a vocabulary of %d (< 256 bytes): prompts cannot be encoded\n", o->model, (int)S.w->cfg.vocab);
        return 1;
    }
    S.model.tok = S.tok, S.model.vocab = S.w->cfg.vocab, S.model.max_seq = S.w->cfg.max_seq;
    if (o->draft && !(S.dw = pt_gpt_weights_open(S.ctx, o->draft, o->quant, NULL))) {
        fprintf(stderr, "ptserve: --draft %s: %s\n", o->draft, pt_error(S.ctx));
        return 1;
    }
    if (S.dw && S.dw->cfg.vocab != S.w->cfg.vocab) {
        fprintf(stderr, "ptserve: --draft %s: a vocabulary of %d tokens, the model's is %d (expected the same tokenizer)\n", o->draft, (int)S.dw->cfg.vocab,
                (int)S.w->cfg.vocab);
        return 1;
    }
    return 0;
}

/* start_engine: the paged KV cache, the engine and its thread; then ready (/health answers 200) and
   the two lines that say so; 0, or 1 after the message */
#ifdef PTRAIN_MPI
/* this process's resident memory in bytes (Linux: /proc/self/status VmRSS; else 0) */
static int64_t rss_bytes(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long long kb = 0;
    if (!f) return 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %lld kB", &kb) == 1) break;
    fclose(f);
    return (int64_t)kb * 1024;
}
/* every rank (collective, after its pt_infer_new): what it holds, printed by rank 0 in rank order:
   its layers and heads, its weights (pt_gpt_weights_bytes, and pt_mem of the model's context), its KV
   pool, its resident memory */
static void rank_memory(void) {
    enum { NV = 9 };
    pt_infer_mp mp = pt_infer_mp_get(S.inf);
    pt_mem_stats wm = pt_gpt_weights_mem(S.w);
    int64_t mine[NV], *all = NULL;
    int n = pt_dist_size(S.dist), r, me = pt_dist_rank(S.dist);
    mine[0] = mp.tp_rank, mine[1] = mp.pp_rank, mine[2] = mp.layer0, mine[3] = mp.layer1, mine[4] = mp.heads;
    mine[5] = pt_gpt_weights_bytes(S.w), mine[6] = wm.params, mine[7] = mp.kv_bytes, mine[8] = rss_bytes();
    if (me == 0 && !(all = (int64_t *)calloc((size_t)n * NV, sizeof(int64_t)))) return;
    MPI_Gather(mine, NV, MPI_INT64_T, all, NV, MPI_INT64_T, 0, *(MPI_Comm *)pt_dist_comm(S.dist, PT_COMM_WORLD));
    for (r = 0; me == 0 && r < n; r++) {
        const int64_t *a = all + (int64_t)r * NV;
        printf("ptserve: rank %d (tp %lld, pp %lld): layers %lld..%lld, %lld heads, weights %.1f MiB (pt_mem: %.1f MiB of parameters), KV cache %.1f MiB, "
               "resident %.1f MiB\n", r, (long long)a[0], (long long)a[1], (long long)a[2], (long long)a[3] - 1, (long long)a[4], (double)a[5] / 1048576.0,
               (double)a[6] / 1048576.0, (double)a[7] / 1048576.0, (double)a[8] / 1048576.0);
    }
    free(all);
}
#endif
/* the KV cache's sizes from the flags (every rank of a layout the same) */
static pt_infer_desc infer_desc(const sv_opts *o) {
    pt_infer_desc idesc;
    memset(&idesc, 0, sizeof idesc);
    idesc.max_seqs = (int32_t)o->max_seqs;
    idesc.block_tokens = 16;
    if (o->kv_blocks) idesc.kv_tokens = (int64_t)o->kv_blocks * 16;
    idesc.kv_type = o->kv_type;
    return idesc;
}
static int start_engine(sv_opts *o) {
    pt_infer_desc idesc = infer_desc(o);
    pt_engine_desc ed;
    memset(&ed, 0, sizeof ed);
    ed.max_running = (int32_t)o->max_seqs, ed.token_budget = (int32_t)o->budget, ed.wall_clock = 1;
    ed.max_events = 1 << 16; /* each request is released once answered and the trace is capped: memory stays flat */
    ed.tokenizer = S.tok, ed.on_iteration = sv_hook;
    ed.lookup = (int32_t)o->lookup, ed.draft_tokens = (int32_t)o->draft_tokens;
    if (S.dw) { /* the draft model's cache: a sequence per running request, its own context */
        pt_infer_desc dd;
        memset(&dd, 0, sizeof dd);
        dd.max_seqs = (int32_t)o->max_seqs;
        if (!(S.dinf = pt_infer_new(S.ctx, S.dw, &dd))) {
            fprintf(stderr, "ptserve: --draft: %s\n", pt_error(S.ctx));
            return 1;
        }
        ed.draft = S.dinf;
    }
    if (!(S.inf = pt_infer_new(S.ctx, S.w, &idesc)) || !(S.eng = pt_engine_new(S.inf, &ed))) {
        fprintf(stderr, "ptserve: %s\n", pt_error(S.ctx));
        return 1;
    }
#ifdef PTRAIN_MPI
    if (S.dist) rank_memory();
#endif
    S.kv = pt_infer_kv_stats(S.inf);
    if (pthread_create(&o->engine, NULL, sv_engine_thread, NULL)) {
        fprintf(stderr, "ptserve: cannot start the engine thread\n");
        return 1;
    }
    pthread_mutex_lock(&S.mu);
    S.ready = 1;
    pthread_mutex_unlock(&S.mu);
    printf("ptserve: %s (%d layers, width %d, context %d, vocabulary %d%s), %lld KV blocks of 16 tokens (%s), %ld sequences\n", S.model_name,
           (int)S.w->cfg.layers, (int)S.w->cfg.width, (int)S.w->cfg.max_seq, (int)S.w->cfg.vocab, S.tok ? ", its tokenizer" : ", bytes",
           (long long)S.kv.total, pt_wtype_name((pt_wtype)o->kv_type), o->max_seqs);
    if (S.dist) {
        pt_infer_mp mp = pt_infer_mp_get(S.inf);
        printf("ptserve: a layout of tp %d x pp %d over %d ranks: rank 0 serves HTTP and holds layers %d..%d, %d of %d heads, %.1f MiB of "
               "weights, %.1f MiB of KV cache; every rank runs its shard; the ranks' pids %s (SIGTERM to rank 0's drains; to mpirun's "
               "ends the job at once)\n", (int)mp.tp, (int)mp.pp, pt_dist_size(S.dist), (int)mp.layer0, (int)mp.layer1 - 1, (int)mp.heads,
               (int)S.w->cfg.heads, (double)pt_gpt_weights_bytes(S.w) / 1048576.0, (double)mp.kv_bytes / 1048576.0, S.pids);
    }
    printf("ptserve: listening on %s://%s:%ld/\n", o->cert_pem ? "https" : "http", o->host, o->port);
    fflush(stdout);
    return 0;
}

/* drain_on_signal: waits for SIGTERM or SIGINT; then no new requests, the running ones finish, the
   threads end and the connections close */
static void drain_on_signal(sv_opts *o) {
    int sig = 0;
    sigwait(&o->signals, &sig);
    pthread_mutex_lock(&S.mu);
    S.draining = 1;
    printf("ptserve: %s: draining %lld request%s\n", sig == SIGTERM ? "SIGTERM" : "SIGINT", (long long)S.live, S.live == 1 ? "" : "s");
    fflush(stdout);
    while (S.live > 0) pthread_cond_wait(&S.work, &S.mu);
    S.stop = 1;
    pthread_cond_broadcast(&S.work);
    pthread_mutex_unlock(&S.mu);
    pt_engine_stop(S.eng);
    pthread_join(o->engine, NULL);
    MHD_stop_daemon(S.d);
    pthread_mutex_lock(&S.cmu);
    S.wd_stop = 1;
    pthread_cond_broadcast(&S.cwake);
    pthread_mutex_unlock(&S.cmu);
    pthread_join(o->wd, NULL);
}

/* clean_up: what main read and made */
static void clean_up(sv_opts *o) {
    free(o->cert_pem), free(o->key_pem), free(o->api_key);
    pt_engine_free(S.eng);
    pt_infer_free(S.inf);
    pt_infer_free(S.dinf);
    pt_gpt_weights_free(S.dw);
    pt_tokenizer_free(S.tok);
    pt_gpt_weights_free(S.w);
    pt_shutdown(S.ctx);
}

#ifdef PTRAIN_MPI
/* a rank of a layout that cannot go on: the message, then the whole job ends (the other ranks would
   wait for it in their next collective) */
static int abort_job(int rc) {
    fprintf(stderr, "ptserve: world rank %d of the layout failed (above): ending the job\n", pt_dist_rank(S.dist));
    fflush(stderr);
    MPI_Abort(*(MPI_Comm *)pt_dist_comm(S.dist, PT_COMM_WORLD), rc ? rc : 1);
    return rc;
}
/* every rank but 0: no HTTP; its shard and its part of the KV cache, then the leader's calls until its
   drain ends them. SIGTERM / SIGINT (mpirun passes them on to every rank) are left to rank 0, which
   drains and then ends the followers. */
static int follower_main(sv_opts *o) {
    pt_infer_desc idesc = infer_desc(o);
    pt_status st;
    sigset_t sg;
    sigemptyset(&sg);
    sigaddset(&sg, SIGTERM);
    sigaddset(&sg, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sg, NULL);
    if (load_model(o)) return abort_job(1);
    if (!(S.inf = pt_infer_new(S.ctx, S.w, &idesc))) {
        fprintf(stderr, "ptserve: world rank %d: %s\n", pt_dist_rank(S.dist), pt_error(S.ctx));
        return abort_job(1);
    }
    rank_memory();
    if ((st = pt_infer_follow(S.inf)) != PT_OK) {
        fprintf(stderr, "ptserve: world rank %d: %s\n", pt_dist_rank(S.dist), pt_error(S.ctx));
        return abort_job(1);
    }
    pt_infer_free(S.inf);
    pt_tokenizer_free(S.tok);
    pt_gpt_weights_free(S.w);
    pt_shutdown(S.ctx);
    pt_dist_finalize(S.dist);
    return 0;
}
#endif

int main(int argc, char **argv) {
    sv_opts o;
    int rc;
    if ((rc = parse_flags(&o, argc, argv)) != PTF_GO || (rc = read_api_key(&o)) != PTF_GO || (rc = read_tls(&o)) != PTF_GO) {
        free(o.cert_pem), free(o.key_pem), free(o.api_key);
        return rc;
    }
#ifdef PTRAIN_MPI
    if (o.tp * o.pp > 1) { /* a TP x PP layout under mpirun: rank 0 serves, every rank runs its shard */
        pt_layout lay;
        char err[512];
        memset(&lay, 0, sizeof lay);
        lay.dp = 1, lay.tp = (int32_t)o.tp, lay.pp = (int32_t)o.pp;
        if (!(S.dist = pt_dist_init(&argc, &argv, &lay, err, sizeof err))) {
            fprintf(stderr, "ptserve: --tp %ld --pp %ld: %s (run under mpirun -np %ld)\n", o.tp, o.pp, err, o.tp * o.pp);
            return 2;
        }
        { /* rank 0 prints every rank's process id (a drain: SIGTERM to rank 0's) */
            int me = (int)getpid(), n = pt_dist_size(S.dist), *all = (int *)calloc((size_t)n, sizeof(int)), r;
            size_t at = 0;
            MPI_Gather(&me, 1, MPI_INT, all, 1, MPI_INT, 0, *(MPI_Comm *)pt_dist_comm(S.dist, PT_COMM_WORLD));
            for (r = 0; all && r < n && at + 24 < sizeof S.pids; r++) at += (size_t)snprintf(S.pids + at, sizeof S.pids - at, "%s%d:%d", r ? " " : "", r, all[r]);
            free(all);
        }
        if (pt_dist_rank(S.dist) != 0) return follower_main(&o);
    }
#endif
    init_state(&o);
    if (start_http(&o)) rc = 1;
    else if ((rc = load_model(&o)) || (rc = start_engine(&o))) MHD_stop_daemon(S.d);
    if (rc) {
#ifdef PTRAIN_MPI
        if (S.dist) abort_job(rc);
#endif
        return rc;
    }
    drain_on_signal(&o);
    clean_up(&o);
#ifdef PTRAIN_MPI
    pt_dist_finalize(S.dist);
#endif
    printf("ptserve: drained, exiting\n");
    return 0;
}
#endif /* PTSERVE_NO_MAIN */
