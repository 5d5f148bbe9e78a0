/* test_cldl.c - OpenCL and CLBlast loaded at run time (>>opencl: pt__clf_load), not linked.
   Build: cc -std=c99 -O2 -DPTRAIN_OPENCL -I. tests/test_cldl.c -o test_cldl -lm
   One binary built with -DPTRAIN_OPENCL and no -l flag; tests/cldl_test.sh runs it as is and with
   libOpenCL.so.1 and libclblast.so.1 hidden (a private mount namespace, /dev/null bound over them).
   test_cldl train OUT   a small MLP trained 5 AdamW steps on the CPU; the losses' bits go to OUT (the
                         script compares the two runs: the CPU path must not change when OpenCL is gone)
   test_cldl hidden      the libraries are hidden: pt_init("opencl") returns NULL with PT_ERR_DEVICE and
                         a message naming libOpenCL.so.1, dlopen's reason and the packages to install;
                         pt_device_list says OpenCL is unavailable and why; pt_device_query is -1
   test_cldl blast       only libclblast.so.1 is hidden: pt_init("opencl") fails naming it and libclblast1;
                         pt_device_list, which needs only OpenCL, still finds opencl:0:0
   test_cldl present     the libraries are there: pt_device_list and pt_device_query find opencl:0:0
   Each mode ends with "N passed, N failed"; the exit status is 0 when all passed. */
#define PTRAIN_IMPLEMENTATION
#include "../ptrain.h"
#include "test_util.h"

static char last_err[2048];
static pt_status last_st;
static void on_err(void *u, pt_status st, const char *msg) {
    (void)u;
    last_st = st;
    snprintf(last_err, sizeof last_err, "%s", msg);
}
static const char *S(const char *s) { return s; } /* CHECK_HAS takes a pointer, not an array */
static void quiet_log(void *u, int level, const char *msg) { (void)u, (void)level, (void)msg; }

static pt_ctx *open_ctx(const char *device) {
    pt_desc d;
    memset(&d, 0, sizeof d);
    d.seed = 3;
    d.threads = 1;
    d.device = device;
    d.on_error = on_err;
    d.log = quiet_log;
    last_err[0] = 0;
    last_st = PT_OK;
    return pt_init(&d);
}

enum { MB = 8, MD = 12, MH = 24, MO = 5, STEPS = 5 };
static int train(const char *out) {
    pt_ctx *c = open_ctx("cpu");
    pt_graph *g;
    pt_optim *o;
    pt_optim_desc od;
    int64_t s1[2] = {MH, MD}, s2[1] = {MH}, s3[2] = {MO, MH}, s4[1] = {MO}, xs[2] = {MB, MD}, ys[1] = {MB};
    float x[MB * MD];
    int32_t y[MB];
    tu_rng r = {11};
    int step, i;
    FILE *f;
    CHECKF(c != NULL, "the CPU context opens", "%s", last_err);
    if (!c) return tu_summary();
    pt_param_new(c, "w1", 2, s1, PT_INIT_NORMAL, 0.3f, 0);
    pt_param_new(c, "b1", 1, s2, PT_INIT_UNIFORM, 0.1f, 0);
    pt_param_new(c, "w2", 2, s3, PT_INIT_NORMAL, 0.2f, 0);
    pt_param_new(c, "b2", 1, s4, PT_INIT_CONST, 0.05f, 0);
    memset(&od, 0, sizeof od);
    od.kind = PT_OPTIM_ADAMW;
    od.lr = 0.01f;
    o = pt_optim_new(c, &od);
    g = pt_graph_new(c);
    f = fopen(out, "w");
    CHECKF(f != NULL, "the losses file opens", "%s", out);
    if (!f) return tu_summary();
    for (step = 0; step < STEPS; step++) {
        pt_tensor *xt, *yt, *h, *loss;
        float l;
        uint32_t bits;
        for (i = 0; i < MB * MD; i++) x[i] = tu_uniform(&r, -1, 1);
        for (i = 0; i < MB; i++) y[i] = (int32_t)(tu_next(&r) % MO);
        pt_graph_reset(g);
        xt = pt_tensor_from(g, PT_F32, 2, xs, x), yt = pt_tensor_from(g, PT_I32, 1, ys, y);
        h = pt_gelu(g, pt_linear(g, xt, &pt_param_find(c, "w1")->value, &pt_param_find(c, "b1")->value));
        h = pt_linear(g, h, &pt_param_find(c, "w2")->value, &pt_param_find(c, "b2")->value);
        loss = pt_cross_entropy(g, h, yt, -100);
        l = pt_item(loss);
        pt_zero_grad(c);
        pt_backward(g, loss);
        pt_optim_step(o, od.lr);
        memcpy(&bits, &l, sizeof bits);
        fprintf(f, "step %d loss %.9g bits %08x\n", step, (double)l, (unsigned)bits);
    }
    fclose(f);
    CHECKF(pt_status_get(c) == PT_OK, "5 AdamW steps on the CPU", "%s", pt_error(c));
    pt_shutdown(c);
    return tu_summary();
}

static int hidden(void) {
    char buf[2048];
    pt_device_info di;
    pt_ctx *c = open_ctx("opencl");
    CHECK(c == NULL, "opencl with the libraries hidden: pt_init returns NULL");
    CHECKF(last_st == PT_ERR_DEVICE, "the status is PT_ERR_DEVICE", "status %d", (int)last_st);
    CHECK_HAS(S(last_err), "OpenCL is unavailable", "the message says OpenCL is unavailable");
    CHECK_HAS(S(last_err), "cannot load libOpenCL.so.1", "the message names the library");
    CHECK_HAS(S(last_err), "ocl-icd-libopencl1", "the message names the loader's package");
    CHECK_HAS(S(last_err), "pocl-opencl-icd", "the message names a driver's package");
    /* dlerror's text: the hidden file is /dev/null ("file too short" on glibc; any reason after the name) */
    CHECK_HAS(S(last_err), "libOpenCL.so.1 (", "the message carries dlopen's reason");
    printf("    message: %s\n", last_err);
    c = open_ctx("opencl:0:0");
    CHECK(c == NULL && strstr(last_err, "libOpenCL.so.1"), "opencl:0:0: the same error");
    CHECKF(pt_device_list(buf, sizeof buf) == 0, "pt_device_list: no OpenCL device", "%s", buf);
    CHECK_HAS(S(buf), "  cpu\n", "pt_device_list still lists cpu");
    CHECK_HAS(S(buf), "OpenCL unavailable: cannot load libOpenCL.so.1", "pt_device_list says why OpenCL is missing");
    CHECK(pt_device_query(0, 0, &di) == -1, "pt_device_query: -1 without the library");
    c = open_ctx("cpu");
    CHECKF(c != NULL, "the CPU context still opens", "%s", last_err);
    if (c) pt_shutdown(c);
    return tu_summary();
}

static int blast(void) {
    char buf[2048];
    pt_ctx *c = open_ctx("opencl");
    CHECK(c == NULL, "opencl with libclblast.so.1 hidden: pt_init returns NULL");
    CHECKF(last_st == PT_ERR_DEVICE, "the status is PT_ERR_DEVICE", "status %d", (int)last_st);
    CHECK_HAS(S(last_err), "cannot load libclblast.so.1 (", "the message names CLBlast's library and dlopen's reason");
    CHECK_HAS(S(last_err), "libclblast1", "the message names CLBlast's package");
    printf("    message: %s\n", last_err);
    CHECKF(pt_device_list(buf, sizeof buf) >= 1 && strstr(buf, "opencl:0:0"), "pt_device_list (OpenCL only) still finds opencl:0:0", "%s", buf);
    return tu_summary();
}

static int present(void) {
    char buf[2048];
    pt_device_info di;
    int n = pt_device_list(buf, sizeof buf), nd = pt_device_query(0, 0, &di);
    CHECKF(n >= 1 && strstr(buf, "opencl:0:0"), "pt_device_list finds opencl:0:0 (the libraries are loaded when asked)", "%d: %s", n, buf);
    CHECKF(nd >= 1 && di.device[0] && di.platform[0] && di.compute_units > 0 && di.max_work_group > 0 && di.global_mem > 0 &&
               di.platform_index == 0 && di.device_index == 0 && !strcmp(di.backend, "opencl"),
           "pt_device_query(0, 0): the device's name, platform, compute units, work group and memory", "%d devices; '%s' / '%s', %d CUs",
           nd, di.platform, di.device, (int)di.compute_units);
    CHECK(pt_device_query(99, 0, &di) == -1, "pt_device_query: -1 for a platform that is not there");
    CHECK(pt_device_query(0, 999, &di) == nd && di.device[0] == 0, "pt_device_query: a device index past the end fills no device");
    return tu_summary();
}

int main(int argc, char **argv) {
    tu_init(argc > 1 ? 1 : argc, argv);
    if (argc >= 3 && !strcmp(argv[1], "train")) return train(argv[2]);
    if (argc >= 2 && !strcmp(argv[1], "hidden")) return hidden();
    if (argc >= 2 && !strcmp(argv[1], "present")) return present();
    if (argc >= 2 && !strcmp(argv[1], "blast")) return blast();
    fprintf(stderr, "usage: test_cldl train OUT | hidden | blast | present\n");
    return 2;
}
