/* test_json.c - the JSON reader (pt_json) and the text buffer with its JSON string writer (pt_sb), in base.
   Valid documents through every accessor (exact int64 past 2^53, escapes, surrogate pairs, \u0000, key
   lookup in a large object, duplicate keys with and without PT_JSON_DUPKEYS, NaN/Infinity only with
   PT_JSON_NONFINITE); every class of error with its message and byte offset (truncated, bad escape, bad
   surrogate, bad UTF-8 of each kind, control bytes, trailing text, trailing commas, bad numbers, a number
   past a double, the depth limit, the tree limit, out of memory at every allocation); values read one by
   one from a larger text (pt_json_parse_next); the writer's output for every byte 0..255 and for random
   UTF-8 reads back (exactly, or U+FFFD for a byte that is not UTF-8); every block the reader allocates is
   freed, on success and on error. Usage: test_json [--quick] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- counting allocator that can fail the n-th allocation (defined before the implementation) ---- */
static long live_blocks, n_allocs, fail_at = -1; /* fail_at: the allocation (0-based) that returns NULL */
static void *t_malloc(size_t n) {
    void *p = n_allocs++ == fail_at ? NULL : malloc(n);
    live_blocks += p != NULL;
    return p;
}
static void *t_realloc(void *p, size_t n) {
    void *q;
    if (n_allocs++ == fail_at) return NULL;
    q = realloc(p, n);
    live_blocks += q && !p;
    return q;
}
static void t_free(void *p) {
    live_blocks -= p != NULL;
    free(p);
}
#define PT_MALLOC(sz) t_malloc(sz)
#define PT_REALLOC(p, sz) t_realloc((p), (sz))
#define PT_FREE(p) t_free(p)
#define PT_JSON_MAX_TREE ((size_t)1 << 21) /* 2 MiB: small enough to reach here */
#define PTRAIN_IMPLEMENTATION
#include "../ptrain.h"
#include "test_util.h"

static char err[512];

static pt_json *parse(const char *s, int flags) { return pt_json_parse(s, strlen(s), flags, err, sizeof err); }

/* the text is refused and err has every one of the (up to 2) substrings */
static void refused(const char *name, const char *text, size_t len, int flags, const char *sub1, const char *sub2) {
    pt_json *v = pt_json_parse(text, len, flags, err, sizeof err);
    int ok = !v && strstr(err, sub1) && (!sub2 || strstr(err, sub2));
    CHECKF(ok, tu_name("refused: %s", name), "%s; message '%s' (expected '%s'%s%s)", v ? "accepted" : "refused", v ? "" : err, sub1,
           sub2 ? " and '" : "", sub2 ? sub2 : "");
    pt_json_free(v);
}

static void test_valid(void) {
    const char *doc = " {\"n\": null, \"t\": true, \"f\": false, \"i\": -42, \"d\": 2.5e-3, \"big\": 9007199254740993,\n"
                      "  \"min\": -9223372036854775808, \"max\": 9223372036854775807, \"over\": 9223372036854775808,\n"
                      "  \"e\": 1e3, \"z\": -0, \"s\": \"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00\xe2\x82\xac\",\n"
                      "  \"nul\": \"x\\u0000y\", \"arr\": [1, [], {}, \"\", [[2]]], \"obj\": {\"k\": {\"k\": 3}}, \"\": 7} ";
    pt_json *v = parse(doc, 0);
    const pt_json *a;
    int64_t x = 0;
    CHECKF(v != NULL, "a document with every kind of value parses", "%s", err);
    if (!v) return;
    CHECK(pt_json_type(v) == PT_JSON_OBJECT && pt_json_len(v) == 16, "the root: an object of 16 members");
    CHECK(pt_json_offset(v) == 1, "the root starts at byte 1 (after the space)");
    CHECK(pt_json_type(pt_json_get(v, "n")) == PT_JSON_NULL && pt_json_bool(pt_json_get(v, "t"), -1) == 1 && pt_json_bool(pt_json_get(v, "f"), -1) == 0,
          "null, true, false");
    CHECK(pt_json_num(pt_json_get(v, "i"), 0) == -42 && pt_json_int64(pt_json_get(v, "i"), &x) && x == -42, "-42: number and exact int64");
    CHECK(pt_json_num(pt_json_get(v, "d"), 0) == 2.5e-3 && !pt_json_int64(pt_json_get(v, "d"), NULL), "2.5e-3: a double, not an int64");
    CHECK(pt_json_int64(pt_json_get(v, "big"), &x) && x == 9007199254740993LL && pt_json_num(pt_json_get(v, "big"), 0) == 9007199254740992.0,
          "2^53 + 1: exact as int64, rounded as a double");
    CHECK(pt_json_int64(pt_json_get(v, "min"), &x) && x == INT64_MIN, "int64 min exact");
    CHECK(pt_json_int64(pt_json_get(v, "max"), &x) && x == INT64_MAX, "int64 max exact");
    CHECK(!pt_json_int64(pt_json_get(v, "over"), &x) && pt_json_num(pt_json_get(v, "over"), 0) == 9223372036854775808.0, "2^63: a double only");
    CHECK(!pt_json_int64(pt_json_get(v, "e"), &x) && pt_json_num(pt_json_get(v, "e"), 0) == 1000, "1e3: 1000, not an integer literal");
    CHECK(pt_json_int64(pt_json_get(v, "z"), &x) && x == 0 && signbit(pt_json_num(pt_json_get(v, "z"), 1)), "-0: int64 0, double -0");
    a = pt_json_get(v, "s");
    CHECKF(pt_json_str(a) && !strcmp(pt_json_str(a), "a\"b\\c/d\b\f\n\r\t\xc3\xa9\xf0\x9f\x98\x80\xe2\x82\xac") && pt_json_len(a) == 21,
           "escapes, a surrogate pair and raw UTF-8 decoded", "'%s' (%zu bytes)", pt_json_str(a) ? pt_json_str(a) : "(null)", pt_json_len(a));
    a = pt_json_get(v, "nul");
    CHECK(pt_json_len(a) == 3 && !memcmp(pt_json_str(a), "x\0y", 4), "\\u0000 kept: 3 bytes, NUL-terminated after them");
    a = pt_json_get(v, "arr");
    CHECK(pt_json_type(a) == PT_JSON_ARRAY && pt_json_len(a) == 5 && pt_json_num(pt_json_at(a, 0), 0) == 1 &&
              pt_json_type(pt_json_at(a, 1)) == PT_JSON_ARRAY && pt_json_len(pt_json_at(a, 1)) == 0 &&
              pt_json_type(pt_json_at(a, 2)) == PT_JSON_OBJECT && pt_json_str(pt_json_at(a, 3)) && !*pt_json_str(pt_json_at(a, 3)) &&
              pt_json_num(pt_json_at(pt_json_at(pt_json_at(a, 4), 0), 0), 0) == 2 && !pt_json_at(a, 5),
          "an array: elements by index, empty containers, NULL past the end");
    CHECK(pt_json_num(pt_json_get(pt_json_get(pt_json_get(v, "obj"), "k"), "k"), 0) == 3, "nested objects");
    CHECK(pt_json_num(pt_json_get(v, ""), 0) == 7, "the empty key");
    CHECK(!strcmp(pt_json_key(v, 0), "n") && !strcmp(pt_json_key(v, 15), "") && !pt_json_key(v, 16) && pt_json_num(pt_json_at(v, 3), 0) == -42,
          "members by index in the text's order, with their keys");
    CHECK(!pt_json_get(v, "missing") && !pt_json_get(pt_json_get(v, "i"), "x") && !pt_json_get(NULL, "x") && !pt_json_at(NULL, 0) &&
              pt_json_num(pt_json_get(v, "s"), -1) == -1 && !pt_json_str(pt_json_get(v, "i")) && pt_json_bool(pt_json_get(v, "i"), 5) == 5 &&
              pt_json_type(NULL) == PT_JSON_NONE && pt_json_len(pt_json_get(v, "i")) == 0 && !pt_json_int64(NULL, &x),
          "missing keys, wrong kinds and NULL give the defaults (lookups chain)");
    CHECK(pt_json_offset(pt_json_get(v, "n")) == (size_t)(strstr(doc, "null") - doc), "pt_json_offset: where a value starts in the text");
    pt_json_free(v);
    pt_json_free(NULL);
    CHECKF(live_blocks == 0, "pt_json_free frees every block of the tree", "%ld blocks left", live_blocks);
}

static void test_objects(void) {
    pt_sb b;
    pt_json *v;
    int i, ok = 1, n = tu_quick ? 300 : 3000;
    tu_rng r = {5};
    pt_sb_init(&b);
    pt_sb_add(&b, "{");
    for (i = 0; i < n; i++) pt_sb_add(&b, "%s\"key%d\":%d", i ? "," : "", (int)((i * 7919) % n), i);
    pt_sb_add(&b, "}");
    v = pt_json_parse(b.s, b.n, 0, err, sizeof err);
    CHECKF(v && pt_json_len(v) == (size_t)n, tu_name("an object of %d keys in scrambled order parses", n), "%s", err);
    for (i = 0; v && i < 200; i++) {
        char k[32];
        int want = (int)(tu_next(&r) % (unsigned)n), j;
        snprintf(k, sizeof k, "key%d", want);
        for (j = 0; (j * 7919) % n != want; j++) {
        }
        ok &= pt_json_num(pt_json_get(v, k), -1) == j;
    }
    CHECK(ok && v && !pt_json_get(v, "key") && !pt_json_get(v, "key00") && !pt_json_get(v, "zzz"), "pt_json_get finds every key (200 random ones), and no other");
    pt_json_free(v);
    pt_sb_free(&b);

    refused("a key twice", "{\"a\":1,\"b\":2,\"a\":3}", 19, 0, "each key once in an object, found \"a\" a second time", "at byte 17");
    v = parse("{\"a\":1,\"b\":2,\"a\":3}", PT_JSON_DUPKEYS);
    CHECK(v && pt_json_len(v) == 3 && pt_json_num(pt_json_get(v, "a"), 0) == 1 && pt_json_num(pt_json_at(v, 2), 0) == 3,
          "PT_JSON_DUPKEYS: kept, pt_json_get finds the first, pt_json_at the others");
    pt_json_free(v);
    v = parse("{\"a\":1,\"a\\u0000\":2,\"ab\":3}", 0);
    CHECK(v && pt_json_len(v) == 3 && pt_json_num(pt_json_get(v, "a"), 0) == 1 && pt_json_num(pt_json_get(v, "ab"), 0) == 3,
          "keys differing only after a \\u0000 are different keys");
    pt_json_free(v);
}

static void test_numbers(void) {
    static const char *const bad[][3] = {
            {"a leading zero", "01", "no digit after a leading 0"}, {"a lone minus", "-", "a digit after '-'"},
            {"a minus before a letter", "-x", "a digit after '-'"}, {"a dot without digits", "1.", "a digit after '.'"},
            {"an exponent without digits", "1e+", "a digit in the exponent"}, {"a leading dot", ".5", "a value"},
            {"a plus sign", "+1", "a value"}, {"hex", "0x10", "the end of the text, found 'x'"},
            {"1e309", "1e309", "a number of at most about 1.8e308 in magnitude, found '1e309'"},
            {"-1e400", "[-1e400]", "a number of at most about 1.8e308"}, {"NaN without the flag", "NaN", "a value, found 'N'"},
        {"Infinity without the flag", "[-Infinity]", "a digit after '-'"}, {"nan with the flag: nann", "nann", "the end of the text"}};
    char big[600];
    pt_json *v;
    size_t i;
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) refused(bad[i][0], bad[i][1], strlen(bad[i][1]), i == 12 ? PT_JSON_NONFINITE : 0, bad[i][2], NULL);
    v = parse("[1e-400, 123456789012345678901234567890, 1.7976931348623157e308]", 0);
    CHECK(v && pt_json_num(pt_json_at(v, 0), 1) == 0 && pt_json_num(pt_json_at(v, 1), 0) == 1.2345678901234568e29 &&
              !pt_json_int64(pt_json_at(v, 1), NULL) && pt_json_num(pt_json_at(v, 2), 0) == 1.7976931348623157e308,
          "huge numbers: an underflow reads 0, a 30-digit integer as a double (no int64), DBL_MAX exactly");
    pt_json_free(v);
    memset(big, '7', sizeof big - 1), big[sizeof big - 1] = 0;
    v = parse(big, 0);
    CHECK(!v && strstr(err, "1.8e308"), "a 599-digit number past a double is refused (the long-literal path)");
    memcpy(big + 500, "e-300", 6);
    v = parse(big, 0);
    CHECKF(v && pt_json_num(v, 0) == strtod(big, NULL) && pt_json_num(v, 0) > 7.7e199, "a 505-byte literal with an exponent reads", "%s %.17g", err,
           pt_json_num(v, 0));
    pt_json_free(v);
    v = parse("[NaN, -NaN, Infinity, -Infinity, nan, inf, -inf, 1]", PT_JSON_NONFINITE);
    CHECK(v && isnan(pt_json_num(pt_json_at(v, 0), 0)) && isnan(pt_json_num(pt_json_at(v, 1), 0)) && pt_json_num(pt_json_at(v, 2), 0) == HUGE_VAL &&
              pt_json_num(pt_json_at(v, 3), 0) == -HUGE_VAL && isnan(pt_json_num(pt_json_at(v, 4), 0)) && pt_json_num(pt_json_at(v, 5), 0) == HUGE_VAL &&
              pt_json_num(pt_json_at(v, 6), 0) == -HUGE_VAL && !pt_json_int64(pt_json_at(v, 2), NULL) && pt_json_num(pt_json_at(v, 7), 0) == 1,
          "PT_JSON_NONFINITE: NaN, Infinity (signed), nan, inf");
    pt_json_free(v);
    v = parse("[null, nul]", PT_JSON_NONFINITE);
    CHECK(!v && strstr(err, "a value, found 'n' at byte 7"), "PT_JSON_NONFINITE: null still null, nul refused at its byte");
}

static void test_errors(void) {
    const char *doc = "{\"a\": [1, 2.5, \"x\\u00e9\", true, null], \"b\": {\"c\": false}}";
    size_t i, n = strlen(doc);
    int all = 1, eot = 1;
    char deep[1200];
    /* truncated: every proper prefix */
    for (i = 0; i < n; i++) {
        pt_json *v = pt_json_parse(doc, i, 0, err, sizeof err);
        all &= v == NULL;
        eot &= strstr(err, "found the end of the text") != NULL || strstr(err, "expected a value, found '") != NULL; /* a cut word */
        pt_json_free(v);
    }
    CHECK(all, tu_name("truncated: every one of the %zu proper prefixes is refused", n));
    CHECK(eot, "truncated: the message says the end of the text was found (or a value, where a word was cut)");
    refused("an empty text", "", 0, 0, "expected a value, found the end of the text at byte 0", NULL);
    refused("NULL", NULL, 5, 0, "a value", NULL);
    { /* name, text, what the message has (one or two parts): strings, escapes, surrogates, structure */
        static const char *const cases[][4] = {
            {"white space only", " \n\t\r ", "found the end of the text at byte 5", "(line 2, column 4)"},
            {"an unterminated string", "[\"abc", "'\"' closing the string, found the end of the text at byte 5", "(in [0])"},
            {"a bad escape", "[\"a\\qb\"]", "an escape (\\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX), found 'q' at byte 4", NULL},
            {"an escape cut by the end", "\"\\", "an escape", "the end of the text at byte 2"},
            {"a short \\u", "\"\\u12\"", "4 hex digits after \\u, found '\"' at byte 5", NULL},
            {"a bad hex digit", "\"\\u12G4\"", "4 hex digits after \\u, found 'G' at byte 5", NULL},
            {"a lone low surrogate", "\"\\udc00\"", "a high surrogate (\\uD800-\\uDBFF) before a low one, found \\uDC00 at byte 1", NULL},
            {"a high surrogate alone", "\"\\ud800x\"", "\\u and a low surrogate after a high one, found 'x' at byte 7", NULL},
            {"a high surrogate at the end", "\"\\ud800", "\\u and a low surrogate", "the end of the text"},
            {"a high surrogate and no low one", "\"\\ud800\\u0041\"", "a low surrogate (\\uDC00-\\uDFFF) after a high one, found \\u0041 at byte 7", NULL},
            {"two high surrogates", "\"\\ud800\\ud800\"", "a low surrogate", "found \\uD800"},
            {"a byte past ASCII outside a string", "[1, \xc3\xa9]", "a value, found byte 0xc3 at byte 4", NULL},
            {"a byte-order mark", "\xef\xbb\xbf{}", "a value, found byte 0xef at byte 0", NULL},
            {"trailing garbage", "{} x", "the end of the text, found 'x' at byte 3", NULL},
            {"a second value", "[1]]", "the end of the text, found ']' at byte 3", NULL},
            {"a trailing comma in an array", "[1,]", "a value, found ']' at byte 3", "(in [1])"},
            {"a trailing comma in an object", "{\"a\":1,}", "'\"' starting a key, found '}' at byte 7", NULL},
            {"a missing comma", "{\"a\":1 \"b\":2}", "',' or '}' in an object, found '\"' at byte 7", NULL},
            {"a missing colon", "{\"a\" 1}", "':' after the key, found '1' at byte 5", NULL},
            {"a key that is not a string", "{a:1}", "'\"' starting a key, found 'a' at byte 1", NULL},
            {"a missing value", "{\"a\":}", "a value, found '}' at byte 5", "(in a)"},
            {"a cut word", "[tru]", "a value, found 't' at byte 1", NULL},
            {"a word too long", "[falsey]", "',' or ']' in an array, found 'y' at byte 6", NULL},
            {"comments", "[1 /* c */]", "',' or ']' in an array, found '/'", NULL},
            {"single quotes", "['a']", "a value, found ''' at byte 1", NULL},
            {"the path and the line of an error", "{\"a\": {\"b\": [0,\n {\"c\": }]}}", "a value, found '}' at byte 23", "(line 2, column 8; in a.b[1].c)"}};
        for (i = 0; i < sizeof cases / sizeof cases[0]; i++) refused(cases[i][0], cases[i][1], strlen(cases[i][1]), 0, cases[i][2], cases[i][3]);
    }
    /* control bytes, bad UTF-8 (each kind) */
    refused("a raw tab in a string", "\"a\tb\"", 5, 0, "a string character (control bytes must be escaped), found byte 0x09 at byte 2", NULL);
    refused("a raw NUL in a string", "\"a\0b\"", 5, 0, "found byte 0x00 at byte 2", NULL);
    refused("a raw line break in a string", "\"a\nb\"", 5, 0, "found byte 0x0a at byte 2", NULL);
    {
        static const char *const bad[][2] = {{"\xc0\x80", "an overlong 2-byte form"},   {"\xe0\x80\x80", "an overlong 3-byte form"},
                                             {"\xf0\x80\x80\x80", "an overlong 4-byte form"}, {"\xed\xa0\x80", "an encoded surrogate"},
                                             {"\xf4\x90\x80\x80", "past U+10FFFF"},         {"\xf5\x80\x80\x80", "byte 0xf5"},
                                             {"\xff", "byte 0xff"},                           {"\x80", "a lone continuation byte"},
                                             {"\xc3", "a sequence cut by the quote"},         {"\xe2\x82", "a 3-byte sequence cut short"},
                                             {"\xc3\x28", "a lead byte before ASCII"}};
        static const char *const good[] = {"\xc2\x80", "\xdf\xbf", "\xe0\xa0\x80", "\xed\x9f\xbf", "\xee\x80\x80", "\xef\xbf\xbf", "\xf0\x90\x80\x80",
                                           "\xf4\x8f\xbf\xbf"};
        char t[32], want[64];
        int ok = 1;
        for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            snprintf(t, sizeof t, "[\"ab%s\"]", bad[i][0]);
            snprintf(want, sizeof want, "UTF-8 text, found byte 0x%02x at byte 4", (unsigned char)bad[i][0][0]);
            refused(tu_name("not UTF-8: %s", bad[i][1]), t, strlen(t), 0, want, NULL);
        }
        for (i = 0; i < sizeof good / sizeof good[0]; i++) {
            pt_json *v;
            snprintf(t, sizeof t, "\"%s\"", good[i]);
            v = parse(t, 0);
            ok &= v && !strcmp(pt_json_str(v), good[i]);
            pt_json_free(v);
        }
        CHECK(ok, "UTF-8 at every boundary of RFC 3629 reads (U+0080, U+07FF, U+0800, U+D7FF, U+E000, U+FFFF, U+10000, U+10FFFF)");
    }
    /* depth */
    memset(deep, '[', 200), memset(deep + 200, ']', 200);
    {
        pt_json *v = pt_json_parse(deep, 400, 0, err, sizeof err);
        CHECKF(v != NULL, "200 levels of nesting read", "%s", err);
        pt_json_free(v);
    }
    memset(deep, '[', 201), memset(deep + 201, ']', 201);
    refused("201 levels of nesting", deep, 402, 0, "at most 200 levels of nesting, found '[' at byte 200", "(in [0][0][0][0]...[0][0][0][0])");
    memset(deep, '[', 1100);
    refused("1100 '[' (no deep recursion)", deep, 1100, 0, "at most 200 levels", NULL);
    CHECKF(live_blocks == 0, "no block left after the refused texts", "%ld blocks left", live_blocks);
}

static void test_limits(void) {
    pt_sb b;
    pt_json *v;
    long k, total, leaks = 0, ooms = 0;
    const char *doc = "{\"a\": [1, 2, {\"b\": \"text with \\u00e9\"}], \"c\": {\"d\": [[], {}, null]}, \"e\": \"more\"}";
    int i;
    /* the tree limit (PT_JSON_MAX_TREE is 2 MiB here) */
    pt_sb_init(&b);
    pt_sb_add(&b, "[");
    for (i = 0; i < 40000; i++) pt_sb_add(&b, "%s%d", i ? "," : "", i);
    pt_sb_add(&b, "]");
    v = pt_json_parse(b.s, b.n, 0, err, sizeof err);
    CHECKF(!v && strstr(err, "a tree of at most 2097152 bytes (PT_JSON_MAX_TREE), found more"), "a tree past PT_JSON_MAX_TREE is refused", "%s",
           v ? "accepted" : err);
    pt_json_free(v);
    b.n = 0;
    pt_sb_add(&b, "[");
    for (i = 0; i < 4000; i++) pt_sb_add(&b, "%s%d", i ? "," : "", i);
    pt_sb_add(&b, "]");
    v = pt_json_parse(b.s, b.n, 0, err, sizeof err);
    CHECKF(v && pt_json_len(v) == 4000 && pt_json_num(pt_json_at(v, 3999), 0) == 3999, "4000 numbers read (below the limit)", "%s", err);
    pt_json_free(v);
    pt_sb_free(&b);
    /* out of memory at every allocation of a parse: NULL, "out of memory", nothing left allocated */
    n_allocs = 0;
    v = parse(doc, 0);
    total = n_allocs;
    pt_json_free(v);
    for (k = 0; k < total; k++) {
        n_allocs = 0, fail_at = k;
        v = parse(doc, 0);
        fail_at = -1;
        ooms += !v && strstr(err, "out of memory") != NULL;
        pt_json_free(v);
        leaks += live_blocks != 0;
        live_blocks = 0;
    }
    CHECKF(total >= 2 && ooms == total && leaks == 0, tu_name("out of memory at each of the %ld allocations: refused, nothing leaked", total),
           "%ld of %ld refused, %ld leaked", ooms, total, leaks);
}

static void test_next(void) {
    const char *s = "1 [2, 3]\n{\"a\": \"x\"} \"y\"  tru";
    size_t pos = 0, len = strlen(s), at[4];
    pt_json *v[4];
    int i, ok = 1;
    for (i = 0; i < 4; i++) {
        v[i] = pt_json_parse_next(s, len, &pos, 0, err, sizeof err);
        at[i] = pos;
    }
    ok = v[0] && pt_json_num(v[0], 0) == 1 && at[0] == 1 && v[1] && pt_json_len(v[1]) == 2 && at[1] == 8 && v[2] &&
         !strcmp(pt_json_str(pt_json_get(v[2], "a")), "x") && pt_json_offset(v[2]) == 9 && at[2] == 19 && v[3] && !strcmp(pt_json_str(v[3]), "y") &&
         at[3] == 23;
    CHECKF(ok, "pt_json_parse_next: four values one after another, *pos just past each, offsets from the text's start", "pos %zu %zu %zu %zu",
           at[0], at[1], at[2], at[3]);
    for (i = 0; i < 4; i++) pt_json_free(v[i]);
    v[0] = pt_json_parse_next(s, len, &pos, 0, err, sizeof err);
    CHECKF(!v[0] && pos == 25 && strstr(err, "a value, found 't' at byte 25 (line 2, column 17)"),
           "pt_json_parse_next: an error sets *pos to its byte; err counts bytes and lines from the text's start", "pos %zu: %s", pos, err);
    pos = len;
    v[0] = pt_json_parse_next(s, len, &pos, 0, err, sizeof err);
    CHECK(!v[0] && pos == len && strstr(err, "the end of the text"), "pt_json_parse_next at the end: the end of the text");
    pos = 0;
    v[0] = pt_json_parse_next("{\"a\":1}xyz", 10, &pos, 0, NULL, 0);
    CHECK(v[0] && pos == 7, "pt_json_parse_next leaves what follows the value (err may be NULL)");
    pt_json_free(v[0]);
}

/* ---- the text buffer and the JSON string writer ---- */
static int utf8_ok(const unsigned char *s, size_t n) { /* RFC 3629, written again here */
    static const unsigned least[4] = {0, 0x80, 0x800, 0x10000};
    size_t i = 0, j, need;
    while (i < n) {
        unsigned c = s[i], cp;
        need = c < 0x80 ? 0 : (c & 0xe0) == 0xc0 ? 1 : (c & 0xf0) == 0xe0 ? 2 : (c & 0xf8) == 0xf0 ? 3 : 4;
        if (need == 4 || i + need >= n + (need == 0)) return 0;
        cp = need ? c & (0x7fu >> (need + 1)) : c;
        for (j = 1; j <= need; j++) {
            if ((s[i + j] & 0xc0) != 0x80) return 0;
            cp = cp << 6 | (s[i + j] & 0x3f);
        }
        if (cp < least[need] || cp > 0x10ffff || (cp >= 0xd800 && cp < 0xe000)) return 0;
        i += need + 1;
    }
    return 1;
}
static size_t put_cp(unsigned char *o, unsigned c) {
    if (c < 0x80) return o[0] = (unsigned char)c, 1;
    if (c < 0x800) return o[0] = (unsigned char)(0xc0 | c >> 6), o[1] = (unsigned char)(0x80 | (c & 63)), 2;
    if (c < 0x10000) return o[0] = (unsigned char)(0xe0 | c >> 12), o[1] = (unsigned char)(0x80 | (c >> 6 & 63)), o[2] = (unsigned char)(0x80 | (c & 63)), 3;
    o[0] = (unsigned char)(0xf0 | c >> 18), o[1] = (unsigned char)(0x80 | (c >> 12 & 63)), o[2] = (unsigned char)(0x80 | (c >> 6 & 63));
    o[3] = (unsigned char)(0x80 | (c & 63));
    return 4;
}
/* writes n bytes as a JSON string and reads them back; 1 if they come back as want (wn bytes) */
static int round_trip(const char *s, size_t n, const char *want, size_t wn) {
    pt_sb b;
    pt_json *v;
    int ok;
    pt_sb_init(&b);
    pt_sb_json_strn(&b, s, n);
    v = b.oom ? NULL : pt_json_parse(b.s, b.n, 0, err, sizeof err);
    ok = v && pt_json_len(v) == wn && !memcmp(pt_json_str(v), want, wn) && utf8_ok((const unsigned char *)b.s, b.n);
    pt_json_free(v);
    pt_sb_free(&b);
    return ok;
}

static void test_sb(void) {
    pt_sb b;
    unsigned char all[256], want[512];
    size_t i, wn = 0;
    int ok = 1, k, n;
    tu_rng r = {11};
    pt_sb_init(&b);
    CHECK(b.s == NULL && b.n == 0 && !b.oom, "pt_sb_init: empty");
    for (i = 0; i < 5000; i++) pt_sb_add(&b, "%d,", (int)i % 10);
    for (i = 0; i < 10000; i++) ok &= b.s[i] == (i % 2 ? ',' : (char)('0' + i / 2 % 10));
    CHECK(ok && b.n == 10000 && b.s[b.n] == 0, "pt_sb_add: 5000 formatted pieces, in order, NUL-terminated");
    b.n = 0;
    pt_sb_add(&b, "%s|%0300d|", "x", 7);
    CHECK(b.n == 303 && b.s[301] == '7' && b.s[1] == '|', "pt_sb_add: a piece longer than the room left");
    b.n = 0;
    pt_sb_json_str(&b, "a\"b\\c\n\t\x01\x1f\x7f/\xc3\xa9\xff");
    CHECKF(b.n == 35 && !strcmp(b.s, "\"a\\\"b\\\\c\\n\\t\\u0001\\u001f\x7f/\xc3\xa9\\ufffd\""), "pt_sb_json_str: the escapes written", "%s", b.s);
    b.n = 0;
    pt_sb_json_str(&b, NULL);
    pt_sb_json_strn(&b, "a\0b", 3);
    CHECKF(!strcmp(b.s, "\"\"\"a\\u0000b\""), "pt_sb_json_str(NULL) is \"\"; pt_sb_json_strn writes a NUL byte as \\u0000", "%s", b.s);
    pt_sb_free(&b);
    CHECK(b.s == NULL && b.n == 0, "pt_sb_free: empty again");
    /* every byte alone, then all 256 together */
    for (ok = 1, k = 0; k < 256; k++) {
        char c = (char)k;
        ok &= k < 0x80 ? round_trip(&c, 1, &c, 1) : round_trip(&c, 1, "\xef\xbf\xbd", 3);
    }
    CHECK(ok, "every byte 0..255 alone: written, read back (itself, or U+FFFD past ASCII)");
    for (k = 0; k < 256; k++) {
        all[k] = (unsigned char)k;
        wn += k < 0x80 ? (want[wn] = (unsigned char)k, 1) : (memcpy(want + wn, "\xef\xbf\xbd", 3), 3);
    }
    CHECK(round_trip((const char *)all, 256, (const char *)want, wn), "the 256 bytes in one string: read back");
    /* random UTF-8: exactly back */
    n = tu_quick ? 200 : 2000;
    for (ok = 1, k = 0; k < n; k++) {
        unsigned char s[400];
        size_t len = 0, m = tu_next(&r) % 60;
        for (i = 0; i < m; i++) {
            unsigned kind = (unsigned)(tu_next(&r) % 5), c;
            c = kind == 0 ? (unsigned)(tu_next(&r) % 0x80) : kind == 1 ? 0x80 + (unsigned)(tu_next(&r) % 0x780)
                : kind == 2 ? 0x800 + (unsigned)(tu_next(&r) % 0xf800) : kind == 3 ? 0x10000 + (unsigned)(tu_next(&r) % 0x100000)
                            : (unsigned)(tu_next(&r) % 0x20);
            if (c >= 0xd800 && c < 0xe000) c -= 0x800; /* not a surrogate */
            len += put_cp(s + len, c);
        }
        ok &= utf8_ok(s, len) && round_trip((const char *)s, len, (const char *)s, len);
    }
    CHECK(ok, tu_name("%d random UTF-8 strings (1- to 4-byte characters, control characters): written and read back exactly", n));
    /* random bytes: the output always reads back as valid UTF-8 */
    for (ok = 1, k = 0; k < n; k++) {
        char s[64];
        pt_json *v;
        size_t m = tu_next(&r) % 64;
        for (i = 0; i < m; i++) s[i] = (char)(tu_next(&r) & 0xff);
        pt_sb_init(&b);
        pt_sb_json_strn(&b, s, m);
        v = pt_json_parse(b.s, b.n, 0, err, sizeof err);
        ok &= v && utf8_ok((const unsigned char *)pt_json_str(v), pt_json_len(v)) && pt_json_len(v) >= m;
        pt_json_free(v);
        pt_sb_free(&b);
    }
    CHECK(ok, tu_name("%d strings of random bytes: the written JSON always parses, as UTF-8", n));
    CHECKF(live_blocks == 0, "the buffers freed", "%ld blocks left", live_blocks);
}

int main(int argc, char **argv) {
    tu_init(argc, argv);
    test_valid();
    test_objects();
    test_numbers();
    test_errors();
    test_limits();
    test_next();
    test_sb();
    return tu_summary();
}
