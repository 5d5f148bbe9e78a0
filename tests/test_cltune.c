/* test_cltune.c - CLBlast tuning files (pt_cl_tune_load / pt_cl_tune_set / env PTRAIN_CL_TUNE) and
   the OpenCL interop calls (pt_sync, pt_cl_handles_get, pt_cl_mem). With -DPTRAIN_OPENCL: GEMMs of
   odd shapes agree with the CPU backend before and after a tuning file is applied; a file whose
   Xgemm tiles break CLBlast's constraints makes the next GEMM fail (so the parameters really reach
   CLBlast) and a good file makes it work again; malformed files are errors naming file and line.
   Without OpenCL: the calls fail with a clear error. Usage: test_cltune [TMPDIR] */
#define PTRAIN_IMPLEMENTATION
#include "ptrain.h"

#include "test_util.h"

static char tmpdir[400]; /* where the tuning files are written */

static pt_ctx *open_ctx(const char *dev) {
    pt_desc d;
    memset(&d, 0, sizeof d);
    d.seed = 3;
    d.device = dev;
    d.log_level = PT_LOG_ERROR + 1; /* quiet: errors are checked through pt_error */
    return pt_init(&d);
}

#ifdef PTRAIN_OPENCL
static const char *write_file(const char *name, const char *text) {
    static char path[8][512];
    static int k;
    char *p = path[k++ & 7];
    FILE *f;
    snprintf(p, sizeof path[0], "%s/%s", tmpdir, name);
    f = fopen(p, "w");
    if (f) fputs(text, f), fclose(f);
    return p;
}

/* max |C_dev - C_cpu| / max |C_cpu| of op(A) @ op(B), M x K times K x N, or -1 when the device GEMM fails */
static double gemm_err(pt_ctx *cl, pt_ctx *cpu, int M, int N, int K, int ta, int tb) {
    pt_ctx *c[2];
    float *a = (float *)malloc(sizeof(float) * (size_t)M * K), *b = (float *)malloc(sizeof(float) * (size_t)K * N);
    float *r[2];
    double md = 0, mr = 0;
    int i, s;
    pt_rng rng = pt_rng_seed((uint64_t)(M * 131 + N * 7 + K));
    c[0] = cl, c[1] = cpu;
    r[0] = (float *)malloc(sizeof(float) * (size_t)M * N), r[1] = (float *)malloc(sizeof(float) * (size_t)M * N);
    for (i = 0; i < M * K; i++) a[i] = pt_rng_float(&rng) - 0.5f;
    for (i = 0; i < K * N; i++) b[i] = pt_rng_float(&rng) - 0.5f;
    for (s = 0; s < 2; s++) {
        pt_graph *g = pt_graph_new(c[s]);
        pt_tensor *ta_ = pt_tensor_new(g, PT_F32, 2, ta ? K : M, ta ? M : K, 0, 0), *tb_ = pt_tensor_new(g, PT_F32, 2, tb ? N : K, tb ? K : N, 0, 0), *p;
        pt_graph_set_grad(g, 0);
        pt_tensor_write(ta_, a);
        pt_tensor_write(tb_, b);
        p = pt_matmul(g, ta_, tb_, ta, tb);
        pt_sync(c[s]);
        if (!p || pt_status_get(c[s]) != PT_OK || pt_tensor_read(p, r[s]) != PT_OK) md = -1;
        pt_graph_free(g);
    }
    for (i = 0; md >= 0 && i < M * N; i++) {
        double d = fabs((double)r[0][i] - r[1][i]);
        if (!(d <= md)) md = d;
        if (fabs(r[1][i]) > mr) mr = fabs(r[1][i]);
    }
    free(a), free(b), free(r[0]), free(r[1]);
    return md < 0 ? -1 : md / (mr > 0 ? mr : 1);
}

/* Xgemm + XgemmDirect + GemmRoutine; vwm = 3 is Xgemm's vector width that CLBlast's kernel source has no type for */
static const char *tune_text(char *buf, size_t len, int vwm, int min_indirect) {
    snprintf(buf, len,
             "# a tuning file\n\nGemmRoutine.XGEMM_MIN_INDIRECT_SIZE = %d\n"
             "Xgemm.GEMMK = 0\nXgemm.KREG = 1\nXgemm.KWG = 16\nXgemm.KWI = 2\nXgemm.MDIMA = 8\nXgemm.MDIMC = 8\n"
             "Xgemm.MWG = 48   # tile rows\nXgemm.NDIMB = 8\nXgemm.NDIMC = 8\nXgemm.NWG = 32\nXgemm.SA = 1\nXgemm.SB = 1\n"
             "Xgemm.STRM = 0\nXgemm.STRN = 0\nXgemm.VWM = %d\nXgemm.VWN = 2\n"
             "XgemmDirect.KWID = 2\nXgemmDirect.MDIMAD = 8\nXgemmDirect.MDIMCD = 8\nXgemmDirect.NDIMBD = 8\nXgemmDirect.NDIMCD = 8\n"
             "XgemmDirect.PADA = 1\nXgemmDirect.PADB = 1\nXgemmDirect.VWMD = 2\nXgemmDirect.VWND = 2\nXgemmDirect.WGD = 16\n",
             min_indirect, vwm);
    return buf;
}

static void gemms(pt_ctx *cl, pt_ctx *cpu, const char *when) {
    static const int shapes[][5] = {{67, 45, 83, 0, 0}, {64, 64, 64, 1, 0}, {33, 129, 17, 0, 1}, {200, 96, 150, 1, 1}};
    int i;
    for (i = 0; i < 4; i++) {
        const int *s = shapes[i];
        double e = gemm_err(cl, cpu, s[0], s[1], s[2], s[3], s[4]);
        CHECKF(e >= 0 && e <= 1e-5, tu_name("gemm %dx%dx%d ta %d tb %d equals the CPU %s", s[0], s[1], s[2], s[3], s[4], when),
               "relative error %g (-1: failed: %s)", e, pt_error(cl));
        pt_error_clear(cl);
    }
}
#endif

int main(int argc, char **argv) {
    pt_ctx *cpu;
    snprintf(tmpdir, sizeof tmpdir, "%s", argc > 1 ? argv[1] : ".");
    cpu = open_ctx("cpu");
    CHECK(cpu != NULL, "cpu context");
    CHECK(pt_cl_tune_params("Xgemm") && pt_cl_tune_params("XgemmDirect") && !pt_cl_tune_params("Nope"), "pt_cl_tune_params knows Xgemm, XgemmDirect");
    {
        const char *const *p = pt_cl_tune_params("Xgemm");
        int n = 0;
        while (p && p[n]) n++;
        CHECKF(n == 16, "Xgemm has 16 parameters", "found %d", n);
    }
    CHECK(pt_cl_handles_get(cpu).queue == NULL && pt_cl_handles_get(cpu).device == NULL, "pt_cl_handles_get on the cpu: NULL");
    CHECK(pt_cl_tune_load(cpu, "nosuch") == PT_ERR_DEVICE && strstr(pt_error(cpu), "OpenCL"), "pt_cl_tune_load on a cpu context: PT_ERR_DEVICE");
    printf("    %s\n", pt_error(cpu));
    pt_error_clear(cpu);
#ifdef PTRAIN_OPENCL
    {
        pt_ctx *cl = open_ctx("opencl");
        char text[2048], bad[2048];
        char good[512];
        const char *broken, *f;
        pt_status st;
        struct {
            const char *name, *text, *want;
        } cases[] = {
            {"no '='", "# c\nXgemm.MWG 64\n", "bad1.txt:2: expected `Kernel.PARAM = value`"},
            {"not a number", "Xgemm.MWG = 6x4\n", "bad2.txt:1: expected"},
            {"negative", "\n\nXgemm.MWG = -4\n", "bad3.txt:3:"},
            {"no kernel", "MWG = 4\n", "bad4.txt:1: expected"},
            {"unknown parameter", "GemmRoutine.XGEMM_MIN_INDIRECT_SIZE = 8\nGemmRoutine.FOO = 1\n", "bad5.txt:2: kernel GemmRoutine has no parameter FOO"},
            {"missing parameter", "Copy.COPY_DIMX = 8\nCopy.COPY_DIMY = 8\nCopy.COPY_VW = 1\n", "bad6.txt:1: kernel Copy is missing parameters: COPY_WPT"},
            {"twice", "Pad.PAD_DIMX = 8\nPad.PAD_DIMX = 8\n", "bad7.txt:2: parameter given twice"},
            {"a zero tile", "GemmRoutine.XGEMM_MIN_INDIRECT_SIZE = 8\n\nXgemm.MWG = 0\n", "bad8.txt:3: Xgemm.MWG: expected 1..1024, found 0"},
            {"a zero work-group size", "Copy.COPY_DIMX = 0\n", "bad9.txt:1: Copy.COPY_DIMX: expected 1..1024, found 0"},
            {"a value past 2^64", "Xgemm.KWG = 99999999999999999999999\n", "bad10.txt:1: Xgemm.KWG: expected 1..1024, found a value past 2^64"},
            {"a vector width of 3", "Xgemm.VWM = 3\n", "bad11.txt:1: Xgemm.VWM: expected a power of two in 1..16, found 3"},
            {"a switch of 2", "Xgemm.SA = 2\n", "bad12.txt:1: Xgemm.SA: expected 0..1, found 2"},
            {"an unknown kernel", "Xgemmm.MWG = 64\n", "bad13.txt:1: unknown kernel Xgemmm"},
            {"a zero threshold", "GemmRoutine.XGEMM_MIN_INDIRECT_SIZE = 0\n", "bad14.txt:1: GemmRoutine.XGEMM_MIN_INDIRECT_SIZE: expected 1..16777216, found 0"},
        };
        int i;
        CHECKF(cl != NULL, "opencl context", "%s", "pt_init(\"opencl\") failed");
        if (!cl) return tu_summary();
        CHECK(pt_cl_handles_get(cl).queue && pt_cl_handles_get(cl).device && pt_cl_handles_get(cl).context, "pt_cl_handles_get on OpenCL");
        {
            pt_graph *g = pt_graph_new(cl), *gc = pt_graph_new(cpu);
            CHECK(pt_cl_mem(pt_tensor_new(g, PT_F32, 1, 8, 0, 0, 0)) != NULL && pt_cl_mem(pt_tensor_new(gc, PT_F32, 1, 8, 0, 0, 0)) == NULL,
                  "pt_cl_mem: the buffer on OpenCL, NULL on the cpu");
            pt_graph_free(g), pt_graph_free(gc);
        }
        gemms(cl, cpu, "(untuned)");
        snprintf(good, sizeof good, "%s", write_file("good.txt", tune_text(text, sizeof text, 2, 1))); /* Xgemm for every size */
        st = pt_cl_tune_load(cl, good);
        CHECKF(st == PT_OK, "a good tuning file loads (Xgemm for every size)", "%s", pt_error(cl));
        gemms(cl, cpu, "(tuned Xgemm)");
        broken = write_file("broken.txt", tune_text(bad, sizeof bad, 3, 1));
        st = pt_cl_tune_load(cl, broken);
        CHECKF(st == PT_ERR_FORMAT && strstr(pt_error(cl), "broken.txt:18: Xgemm.VWM: expected a power of two in 1..16, found 3"),
               "a file with an Xgemm vector width CLBlast has no kernel for (VWM = 3) is refused at load, naming file, line and value", "%s", pt_error(cl));
        printf("    %s\n", pt_error(cl));
        pt_error_clear(cl);
        {   /* every parameter there, one of them zero: refused (loaded, it would break every later GEMM) */
            char *mwg;
            tune_text(bad, sizeof bad, 2, 1);
            if ((mwg = strstr(bad, "Xgemm.MWG = 48")) != NULL) memcpy(mwg, "Xgemm.MWG =  0", 14);
            st = pt_cl_tune_load(cl, write_file("zero.txt", bad));
            CHECKF(st == PT_ERR_FORMAT && strstr(pt_error(cl), "zero.txt:10: Xgemm.MWG: expected 1..1024, found 0"),
                   "a complete file with Xgemm.MWG = 0 is refused at load, naming file, line, expected and found", "status %d, '%s'", (int)st, pt_error(cl));
            printf("    %s\n", pt_error(cl));
            pt_error_clear(cl);
        }
        gemms(cl, cpu, "(after the refused files: nothing of them applied)");
        {   /* the same parameters through pt_cl_tune_set (no checks): the next GEMM fails, so they reach CLBlast */
            static const char *const xp[16] = {"GEMMK", "KREG", "KWG", "KWI", "MDIMA", "MDIMC", "MWG", "NDIMB", "NDIMC", "NWG", "SA", "SB", "STRM", "STRN", "VWM", "VWN"};
            static const size_t xv[16] = {0, 1, 16, 2, 8, 8, 48, 8, 8, 32, 1, 1, 0, 0, 3, 2};
            CHECKF(pt_cl_tune_set(cl, "Xgemm", 16, xp, xv) == PT_OK && gemm_err(cl, cpu, 64, 64, 64, 0, 0) < 0,
                   "pt_cl_tune_set with VWM = 3: the next GEMM fails (the parameters reach CLBlast)", "%s", "the GEMM ran");
            printf("    %s\n", pt_error(cl));
            pt_error_clear(cl);
        }
        CHECKF(pt_cl_tune_load(cl, good) == PT_OK, "the good file again", "%s", pt_error(cl));
        gemms(cl, cpu, "(tuned again)");
        f = write_file("direct.txt", tune_text(text, sizeof text, 2, 100000)); /* XgemmDirect for every size */
        CHECKF(pt_cl_tune_load(cl, f) == PT_OK, "a good tuning file loads (XgemmDirect for every size)", "%s", pt_error(cl));
        gemms(cl, cpu, "(tuned XgemmDirect)");
        for (i = 0; i < (int)(sizeof cases / sizeof *cases); i++) {
            char name[16];
            snprintf(name, sizeof name, "bad%d.txt", i + 1);
            f = write_file(name, cases[i].text);
            st = pt_cl_tune_load(cl, f);
            CHECKF(st == PT_ERR_FORMAT && strstr(pt_error(cl), cases[i].want), tu_name("a bad tuning file (%s) is an error naming the line", cases[i].name),
                   "status %d, message '%s', expected '%s'", (int)st, pt_error(cl), cases[i].want);
            printf("    %s\n", pt_error(cl));
            pt_error_clear(cl);
        }
        st = pt_cl_tune_load(cl, "/nonexistent/tune.txt");
        CHECKF(st == PT_ERR_IO && strstr(pt_error(cl), "/nonexistent/tune.txt"), "a missing tuning file: PT_ERR_IO naming it", "%d '%s'", (int)st,
               pt_error(cl));
        pt_error_clear(cl);
        pt_shutdown(cl);
        /* env PTRAIN_CL_TUNE: applied by pt_init; a bad file fails pt_init */
        setenv("PTRAIN_CL_TUNE", write_file("bad1.txt", cases[0].text), 1);
        cl = open_ctx("opencl");
        CHECK(cl == NULL, "PTRAIN_CL_TUNE=<bad file>: pt_init fails");
        if (cl) pt_shutdown(cl);
        setenv("PTRAIN_CL_TUNE", good, 1);
        cl = open_ctx("opencl");
        CHECK(cl != NULL, "PTRAIN_CL_TUNE=<good file>: pt_init applies it");
        if (cl) {
            gemms(cl, cpu, "(PTRAIN_CL_TUNE)");
            pt_shutdown(cl);
        }
        unsetenv("PTRAIN_CL_TUNE");
    }
#else
    CHECK(open_ctx("opencl") == NULL, "without PTRAIN_OPENCL, device opencl fails");
#endif
    pt_shutdown(cpu);
    return tu_summary();
}
