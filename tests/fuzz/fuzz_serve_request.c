/* fuzz_serve_request.c - libFuzzer harness of tools/ptserve.c's request parsing and validation
   (sv_parse_request: the JSON body of /v1/completions and /v1/chat/completions; the HTTP parsing
   is libmicrohttpd's). The first byte picks the endpoint (bit 0: chat) and the model's tokens
   (bit 1: a small BPE tokenizer, else bytes); the rest is the body. Properties: an accepted request
   has a prompt of 1 .. max_seq - 1 tokens in the vocabulary, max_tokens that fit the context, n, top_p,
   temperature, priority and stops in range; a refused one has status 400 (500 only when out of
   memory) and an error object that reads back as JSON naming the same field. ptserve.c is included
   whole with PTSERVE_NO_MAIN (no libmicrohttpd). */
#define PTSERVE_NO_MAIN
#include "../../tools/ptserve.c"
#include "fuzz_util.h"

static pt_tokenizer *fz_serve_tok_;

FZ_ENTRY(serve) {
    sv_model m;
    sv_req r;
    sv_err e;
    int32_t i;
    if (size < 1) return 0;
    if (!fz_serve_tok_) {
        static const char text[] = "the quick brown fox jumps over the lazy dog; the lazy dog sleeps. \xc3\xa9t\xc3\xa9 \xe2\x98\x83";
        fz_serve_tok_ = pt_tokenizer_train(fz_ctx(), text, (int64_t)sizeof text - 1, 20);
        FZ_ASSERT(fz_serve_tok_ != NULL, "pt_tokenizer_train");
    }
    m.tok = (data[0] & 2) ? fz_serve_tok_ : NULL;
    m.vocab = m.tok ? pt_tokenizer_vocab(m.tok) : 256;
    m.max_seq = 64;
    memset(&e, 0, sizeof e);
    if (sv_parse_request((const char *)data + 1, size - 1, data[0] & 1, &m, &r, &e) == 0) {
        FZ_ASSERT(r.nids >= 1 && r.nids < m.max_seq, "prompt of %d tokens", (int)r.nids);
        for (i = 0; i < r.nids; i++) FZ_ASSERT(r.ids[i] >= 0 && r.ids[i] < m.vocab, "token %d", (int)r.ids[i]);
        FZ_ASSERT(r.max_tokens >= 1 && r.nids + r.max_tokens <= m.max_seq, "max_tokens %d", (int)r.max_tokens);
        FZ_ASSERT(r.n >= 1 && r.n <= SV_MAX_N && r.priority >= 0 && r.priority <= SV_MAX_CLASS, "n %d priority %d", (int)r.n, (int)r.priority);
        FZ_ASSERT(r.temperature >= 0 && r.temperature <= 2 && r.top_p > 0 && r.top_p <= 1 && r.top_k >= 0, "sampling");
        FZ_ASSERT(r.nstop >= 0 && r.nstop <= SV_MAX_STOP + 1, "nstop %d", (int)r.nstop);
        for (i = 0; i < r.nstop; i++) FZ_ASSERT(r.stop[i] && r.stop[i][0], "stop %d empty", (int)i);
        FZ_ASSERT(sv_utf8_tail((const unsigned char *)r.prompt, r.prompt_len) <= 3, "utf8 tail");
        sv_req_free(&r);
    } else {
        pt_sb b;
        pt_json *j;
        const char *param;
        FZ_ASSERT(e.status == 400 || e.status == 500, "status %d", e.status);
        FZ_ASSERT(e.message[0], "an error without a message");
        pt_sb_init(&b);
        sv_error_json(&b, &e);
        j = b.s ? pt_json_parse(b.s, b.n, 0, NULL, 0) : NULL;
        FZ_ASSERT(b.oom || j, "the error object does not read back: %s", b.s ? b.s : "(null)");
        param = pt_json_str(pt_json_get(pt_json_get(j, "error"), "param"));
        FZ_ASSERT(b.oom || (e.param[0] ? param && !strcmp(param, e.param) : !param), "param '%s'", e.param);
        pt_json_free(j);
        pt_sb_free(&b);
    }
    return 0;
}
