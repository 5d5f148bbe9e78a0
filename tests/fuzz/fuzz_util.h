/* fuzz_util.h - shared by the libFuzzer harnesses of tests/fuzz (one per parser of ptrain.h, and
   ptreport's run-log reader). Each harness is the implementation TU (PTRAIN_IMPLEMENTATION) and
   includes this after ptrain.h. Gives: a scratch directory per process (mkdtemp under $TMPDIR or
   /tmp, removed at exit) emptied before every input, fz_write (a file in it), fz_split (an input cut
   in two at FZ_SEP), fz_ctx (one quiet CPU context per process) and FZ_ASSERT (a property that must
   hold: it aborts, which libFuzzer reports as a crash). Single-threaded, no clock: an input always
   takes the same path. */
#ifndef FUZZ_UTIL_H
#define FUZZ_UTIL_H
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* the entry point of harness NAME: LLVMFuzzerTestOneInput when the harness is built on its own,
   fz_one_NAME when fuzz_all.c builds every harness into one binary (FZ_ALL) */
#ifdef FZ_ALL
#define FZ_ENTRY(name) static int fz_one_##name(const uint8_t *data, size_t size)
#else
#define FZ_ENTRY(name)                                              \
    int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);   \
    int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
#endif

/* the line that cuts an input holding two files (manifest | data, records | labels, tokenizer | text,
   log | trace) */
#define FZ_SEP "\n--8<--\n"

#define FZ_ASSERT(c, ...)                                   \
    do {                                                    \
        if (!(c)) {                                         \
            fprintf(stderr, "fuzz: property failed: " #c " -- "); \
            fprintf(stderr, __VA_ARGS__);                   \
            fprintf(stderr, "\n");                          \
            abort();                                        \
        }                                                   \
    } while (0)

static char fz_dir_[512];

/* empties dir: its files, and its directories with their files (the harnesses write no deeper;
   pt__ck_rmdir, the checkpoint code's, removes a directory of files) */
static inline void fz_empty_(const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *e;
    char p[1024];
    while (d && (e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && snprintf(p, sizeof p, "%s/%s", dir, e->d_name) > 0 && unlink(p) != 0) pt__ck_rmdir(p);
    if (d) closedir(d);
}
static inline void fz_cleanup_(void) {
    if (fz_dir_[0]) fz_empty_(fz_dir_), rmdir(fz_dir_);
}

/* the scratch directory, emptied (created on the first call) */
static inline const char *fz_dir(void) {
    if (!fz_dir_[0]) {
        const char *t = getenv("TMPDIR");
        snprintf(fz_dir_, sizeof fz_dir_, "%s/ptfuzz.XXXXXX", t && *t ? t : "/tmp");
        if (!mkdtemp(fz_dir_)) {
            perror("fuzz: mkdtemp");
            abort();
        }
        atexit(fz_cleanup_);
    } else fz_empty_(fz_dir_);
    return fz_dir_;
}

/* dir/name (into path) holding n bytes of p; 0 on failure */
static inline int fz_write(char *path, size_t cap, const char *dir, const char *name, const void *p, size_t n) {
    FILE *f;
    size_t w;
    snprintf(path, cap, "%s/%s", dir, name);
    if (!(f = fopen(path, "wb"))) return 0;
    w = n ? fwrite(p, 1, n, f) : 0;
    return (fclose(f) == 0) & (w == n);
}

/* the input cut at the first FZ_SEP: [data, data + *n1) and [*p2, *p2 + *n2); no separator: all
   of it is the first part, *p2 NULL */
static inline void fz_split(const uint8_t *data, size_t size, size_t *n1, const uint8_t **p2, size_t *n2) {
    size_t k = sizeof FZ_SEP - 1, i;
    *n1 = size, *p2 = NULL, *n2 = 0;
    for (i = 0; i + k <= size; i++)
        if (data[i] == '\n' && !memcmp(data + i, FZ_SEP, k)) {
            *n1 = i, *p2 = data + i + k, *n2 = size - i - k;
            return;
        }
}

/* env FUZZ_VERBOSE=1: each harness says on stderr what its calls returned (to see how deep an input
   gets, e.g. a replayed crash) */
static inline void fz_note(const char *call, int st, const char *msg) {
    static int v = -1;
    if (v < 0) v = getenv("FUZZ_VERBOSE") && *getenv("FUZZ_VERBOSE") && strcmp(getenv("FUZZ_VERBOSE"), "0");
    if (v) fprintf(stderr, "fuzz: %s -> %d%s%s\n", call, st, msg && *msg ? ": " : "", msg ? msg : "");
}

static inline void fz_quiet_(void *user, int level, const char *msg) { (void)user, (void)level, (void)msg; }
/* a CPU context of one thread whose log goes nowhere (a fresh one when fresh) */
static inline pt_ctx *fz_new_ctx(void) {
    pt_desc desc;
    pt_ctx *ctx;
    memset(&desc, 0, sizeof desc);
    desc.seed = 1, desc.threads = 1, desc.device = "cpu", desc.log = fz_quiet_, desc.log_level = PT_LOG_ERROR;
    if (!(ctx = pt_init(&desc))) {
        fprintf(stderr, "fuzz: pt_init failed\n");
        abort();
    }
    return ctx;
}
static inline pt_ctx *fz_ctx(void) {
    static pt_ctx *ctx;
    if (!ctx) ctx = fz_new_ctx();
    pt_error_clear(ctx);
    return ctx;
}
#endif
