/* fuzz_cltune.c - libFuzzer harness of the CLBlast tuning file reader, pt_cl_tune_load (the
   `Kernel.PARAM = value` lines of `ptcl tune -o FILE`, env PTRAIN_CL_TUNE), without an OpenCL
   device: the reader refuses a context that is not on OpenCL before it opens the file, so the
   harness (the implementation TU, built without -DPTRAIN_OPENCL) gives its CPU context a stand-in
   ctx->cl pointer, never dereferenced without PTRAIN_OPENCL, and clears it again. Every line up to
   the end of the first kernel's lines is parsed and the kernel's parameters checked against the
   known names; applying them then fails (pt_cl_tune_set: no OpenCL compiled in), which ends the
   file there. Input: the file, as it is. */
#define _POSIX_C_SOURCE 200809L
#define PTRAIN_IMPLEMENTATION
#include "../../ptrain.h"
#include "fuzz_util.h"

FZ_ENTRY(cltune) {
    static int standin;
    const char *dir = fz_dir();
    char path[700];
    pt_ctx *ctx = fz_ctx();
    pt_status st;
    if (!fz_write(path, sizeof path, dir, "tune.txt", data, size)) abort();
    ctx->cl = &standin;
    st = pt_cl_tune_load(ctx, path);
    ctx->cl = NULL;
    fz_note("pt_cl_tune_load", st, pt_error(ctx));
    FZ_ASSERT(st == PT_OK || pt_status_get(ctx) != PT_OK, "status %d without an error message", (int)st);
    pt_error_clear(ctx);
    return 0;
}
