/* test_kernels.c - every kernel of the CPU backend table of ptrain.h (pt__cpu_backend, the
   pt__cpu_* functions) against straightforward double-precision references, plus bitwise equality
   between 1 and 3 threads. The tensors are hand-made views (random element offsets into poisoned
   storages); the context comes from pt_init.
   Usage: test_kernels [--quick]   (--quick: accepted for the sanitizer run; every case is small
                                   enough to run in full there, so it changes nothing) */
#define PTRAIN_IMPLEMENTATION
#include "../ptrain.h"
#include "test_util.h"

/* ---- harness ------------------------------------------------------------------------------------ */
static pt_ctx *g_ctx; /* from pt_init; set_threads changes ctx->nthreads directly (the kernels read only that) */
static const pt__backend *be = &pt__cpu_backend;

static uint64_t g_rs = 0x1234567ull;
static double urand(void) { /* [0, 1) */
    g_rs = g_rs * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(g_rs >> 11) * (1.0 / 9007199254740992.0);
}
static float frand(float lo, float hi) { return lo + (hi - lo) * (float)urand(); }

typedef struct tbox {
    pt_tensor t;
    pt_storage st;
} tbox;
static tbox *g_pool[4096];
static int g_npool = 0;

static pt_tensor *newt(pt_dtype dt, int ndim, int64_t d0, int64_t d1, int64_t d2, int64_t d3) {
    tbox *b = (tbox *)calloc(1, sizeof(tbox));
    int64_t sh[4];
    sh[0] = d0; sh[1] = d1; sh[2] = d2; sh[3] = d3;
    b->t.st = &b->st;
    b->t.off = (int64_t)(urand() * 7); /* a random element offset into the storage */
    b->t.ndim = ndim;
    b->t.dtype = dt;
    for (int i = 0; i < 4; i++) b->t.shape[i] = i < ndim ? sh[i] : 1;
    if (be->st_alloc(g_ctx, &b->st, (pt_numel(&b->t) + b->t.off) * pt_dtype_size(dt)) != PT_OK) abort();
    memset(b->st.host, 0x7f, (size_t)b->st.bytes); /* poison */
    g_pool[g_npool++] = b;
    return &b->t;
}
static pt_tensor *newf(int ndim, int64_t d0, int64_t d1, int64_t d2, int64_t d3) {
    return newt(PT_F32, ndim, d0, d1, d2, d3);
}
static pt_tensor *newf1(int64_t n) { return newf(1, n, 1, 1, 1); }
static void pool_free(void) {
    for (int i = 0; i < g_npool; i++) {
        be->st_free(g_ctx, &g_pool[i]->st);
        free(g_pool[i]);
    }
    g_npool = 0;
}
static float *F(const pt_tensor *t) { return PT__F(t); }
static int32_t *I(const pt_tensor *t) { return PT__I(t); }
static int64_t N(const pt_tensor *t) { return pt_numel(t); }
static void rnd(const pt_tensor *t, float lo, float hi) {
    for (int64_t i = 0; i < N(t); i++) F(t)[i] = frand(lo, hi);
}
static pt_tensor *clone(const pt_tensor *t) {
    pt_tensor *c = newt(t->dtype, t->ndim, t->shape[0], t->shape[1], t->shape[2], t->shape[3]);
    memcpy(pt__cpu_bytes(c), pt__cpu_bytes(t), (size_t)(N(t) * pt_dtype_size(t->dtype)));
    return c;
}
static int same(const pt_tensor *a, const pt_tensor *b) {
    return N(a) == N(b) && memcmp(pt__cpu_bytes(a), pt__cpu_bytes(b), (size_t)(N(a) * pt_dtype_size(a->dtype))) == 0;
}
static double *dref(int64_t n) { return (double *)calloc((size_t)(n > 0 ? n : 1), sizeof(double)); }
static double *dcopy(const pt_tensor *t) {
    double *r = dref(N(t));
    for (int64_t i = 0; i < N(t); i++) r[i] = F(t)[i];
    return r;
}
/* |got - ref| <= atol + rtol * |ref| everywhere */
static int close_to(const float *got, const double *ref, int64_t n, double atol, double rtol) {
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - ref[i]);
        if (!(e <= atol + rtol * fabs(ref[i]))) {
            printf("   mismatch at %lld: got %.9g want %.9g\n", (long long)i, (double)got[i], ref[i]);
            return 0;
        }
    }
    return 1;
}
static void set_threads(int n) { g_ctx->nthreads = n; }

/* ---- tests -------------------------------------------------------------------------------------- */
/* references for the 16-bit storage types, by value (double arithmetic), independent of the bit tricks:
   the f16 value of each of the 65536 codes, and the nearest code to a float (ties: the even code) */
static double f16_value(uint16_t h) {
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
    return (h & 0x8000) ? -v : v;
}
static uint16_t f16_nearest(float f) { /* by bisection over the ordered positive codes 0..0x7c00 */
    double a = fabs((double)f);
    uint16_t sign = signbit(f) ? 0x8000 : 0, lo = 0, hi = 0x7c00;
    if (f != f) return 0x7e00;
    if (a >= 65520.0) return sign | 0x7c00;
    while (hi - lo > 1) { /* f16_value(lo) <= a < f16_value(hi) */
        uint16_t mid = (uint16_t)((lo + hi) / 2);
        if (f16_value(mid) <= a) lo = mid;
        else hi = mid;
    }
    if (f16_value(lo) == a) return sign | lo;
    {
        double dl = a - f16_value(lo), dh = f16_value(hi) - a;
        return sign | (dl < dh || (dl == dh && !(lo & 1)) ? lo : hi);
    }
}
static uint16_t bf16_nearest(float f) { /* the two bf16 values around f, by value */
    uint32_t u;
    float t, up;
    uint16_t c;
    memcpy(&u, &f, 4);
    if (f != f) return (uint16_t)((u >> 16) | 0x40);
    c = (uint16_t)(u >> 16);
    u = (uint32_t)c << 16, memcpy(&t, &u, 4);
    u = (uint32_t)(c + 1) << 16, memcpy(&up, &u, 4); /* next magnitude (the same sign) */
    if (t == f) return c;
    {
        double dl = fabs((double)f - t), dh = fabs((double)up - f);
        return dl < dh || (dl == dh && !(c & 1)) ? c : (uint16_t)(c + 1);
    }
}
static void test_convert(void) {
    int64_t n = 70000, i, bad = 0, badb = 0, badr = 0;
    pt_tensor *x = newf1(n), *h = newt(PT_F16, 1, n, 1, 1, 1), *b = newt(PT_BF16, 1, n, 1, 1, 1), *y = newf1(n), *a;
    uint16_t *hp = (uint16_t *)pt__cpu_bytes(h), *bp = (uint16_t *)pt__cpu_bytes(b);
    char why[300] = "";
    /* f32 -> f16 / bf16: special values, ties, the edges of the ranges, then random magnitudes */
    static const float sp[] = {0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, 65519.0f, 65520.0f, 1e30f, -1e30f, 5.9604644775390625e-8f,
                               2.98023223876953125e-8f, 2.98023224e-8f, 6.103515625e-5f, 6.1e-5f, 1.0009765625f /* 1 + 2^-10 */,
                               1.00048828125f /* a tie: 1 + 2^-11 */, 1.00146484375f /* a tie rounding up */, 3.3895314e38f};
    for (i = 0; i < n; i++) {
        if (i < (int64_t)(sizeof sp / sizeof *sp)) F(x)[i] = sp[i];
        else if (i < 200) F(x)[i] = i % 2 ? INFINITY : -INFINITY;
        else F(x)[i] = (float)((urand() - 0.5) * ldexp(1.0, (int)(urand() * 60) - 30));
    }
    F(x)[300] = NAN;
    be->convert(g_ctx, h, x, 0);
    be->convert(g_ctx, b, x, 0);
    for (i = 0; i < n; i++) {
        uint16_t want = f16_nearest(F(x)[i]), wb = bf16_nearest(F(x)[i]);
        if (F(x)[i] != F(x)[i] ? (hp[i] & 0x7c00) != 0x7c00 || !(hp[i] & 0x3ff) : hp[i] != want) {
            if (!bad++) snprintf(why, sizeof why, "f16 of %.9g: %04x, nearest %04x", (double)F(x)[i], hp[i], want);
        }
        if (bp[i] != wb && !badb++) snprintf(why, sizeof why, "bf16 of %.9g: %04x, nearest %04x", (double)F(x)[i], bp[i], wb);
    }
    CHECK_WHY(!bad && !badb && hp[1] == 0x8000 && hp[300] == 0x7e00, "convert f32 -> f16 and bf16: the nearest code, ties to even, NaN, Inf, -0, subnormals, overflow", why);
    /* f16 -> f32 of every code, exact; and back (codes of NaN stay NaN) */
    for (i = 0; i < 65536; i++) hp[i] = (uint16_t)i;
    be->convert(g_ctx, y, h, 0);
    for (i = 0; i < 65536; i++) {
        double v = f16_value((uint16_t)i);
        if (!(v != v ? F(y)[i] != F(y)[i] : (double)F(y)[i] == v && !!signbit(F(y)[i]) == !!(i & 0x8000)) && !badr++)
            snprintf(why, sizeof why, "code %04llx -> %.9g, want %.9g", (long long)i, (double)F(y)[i], v);
    }
    be->convert(g_ctx, b, h, 0); /* f16 -> bf16 directly, then bf16 -> f32: f16 values beyond bf16's 8 bits round */
    be->convert(g_ctx, x, b, 0);
    for (i = 0; i < 65536; i++) {
        float want = F(y)[i];
        uint16_t c = bf16_nearest(want);
        uint32_t u = (uint32_t)c << 16;
        memcpy(&want, &u, 4);
        if (!(F(x)[i] == want || (F(x)[i] != F(x)[i] && want != want)) && !badr++)
            snprintf(why, sizeof why, "f16 %04llx -> bf16 -> f32 %.9g, want %.9g", (long long)i, (double)F(x)[i], (double)want);
    }
    CHECK_WHY(!badr, "convert f16 -> f32 of all 65536 codes exact; f16 -> bf16 = the nearest bf16 of the value", why);
    /* accumulate: dst = round(dst + src) in dst's dtype; thread counts agree */
    a = newt(PT_BF16, 1, 1000, 1, 1, 1);
    {
        pt_tensor *s1 = newf1(1000), *ref = newf1(1000), *a2;
        uint16_t *ap = (uint16_t *)pt__cpu_bytes(a);
        rnd(s1, -3, 3);
        for (i = 0; i < 1000; i++) ap[i] = bf16_nearest((float)i / 7.0f);
        a2 = clone(a);
        be->convert(g_ctx, a, s1, 1);
        for (i = 0, bad = 0; i < 1000; i++) {
            float v = (float)i / 7.0f, w;
            uint32_t u = (uint32_t)bf16_nearest(v) << 16;
            memcpy(&w, &u, 4);
            bad += ap[i] != bf16_nearest(w + F(s1)[i]);
        }
        set_threads(1);
        be->convert(g_ctx, a2, s1, 1);
        set_threads(2);
        CHECK_WHY(!bad && same(a, a2), "convert accumulate into bf16: round(dst + src); 1 and 2 threads bit-identical", "differs");
        (void)ref;
    }
    {
        pt_tensor *i32 = newt(PT_I32, 1, 4, 1, 1, 1), *f4 = newf1(4);
        pt_error_clear(g_ctx);
        be->convert(g_ctx, f4, i32, 0);
        CHECK_WHY(pt_status_get(g_ctx) == PT_ERR_DTYPE && strstr(pt_error(g_ctx), "i32"), "convert from i32 is PT_ERR_DTYPE naming it", pt_error(g_ctx));
        pt_error_clear(g_ctx);
    }
    pool_free();
}

static void test_expf(void) {
    double worst = 0.0;
    for (double x = -87.3; x <= 88.0; x += 0.0137) {
        double e = exp((double)(float)x), g = (double)pt__cpu_expf((float)x);
        double rel = fabs(g - e) / e;
        if (rel > worst) worst = rel;
    }
    CHECK(worst < 2.0 * 5.97e-8, "pt__cpu_expf within 2 ulp on [-87.3, 88]");
    CHECK(pt__cpu_expf(-INFINITY) == 0.0f && pt__cpu_expf(-88.0f) == 0.0f && pt__cpu_expf(-1000.0f) == 0.0f,
          "pt__cpu_expf underflows to 0");
    CHECK(pt__cpu_expf(0.0f) == 1.0f, "pt__cpu_expf(0) = 1");
    CHECK(isinf(pt__cpu_expf(1000.0f)) == 0 && pt__cpu_expf(INFINITY) > 1e38f, "pt__cpu_expf saturates");
    CHECK(pt__cpu_expf(NAN) != pt__cpu_expf(NAN), "pt__cpu_expf(NaN) is NaN");
}

static void test_storage(void) {
    pt_storage st;
    memset(&st, 0, sizeof st);
    CHECK(be->st_alloc(g_ctx, &st, 1000) == PT_OK, "st_alloc ok");
    CHECK(((uintptr_t)st.host & 63) == 0, "st_alloc 64-byte aligned");
    CHECK(st.bytes == 1000 && st.raw != NULL, "st_alloc fields");
    be->st_free(g_ctx, &st);
    CHECK(st.raw == NULL && st.host == NULL && st.bytes == 0, "st_free clears");
    {
        pt_tensor *t = newf(2, 3, 5, 1, 1);
        float src[15], dst[15];
        for (int i = 0; i < 15; i++) src[i] = (float)i * 1.5f;
        be->write(g_ctx, t, src, sizeof src);
        CHECK(F(t)[7] == src[7] && F(t)[14] == src[14], "write at offset");
        memset(dst, 0, sizeof dst);
        be->read(g_ctx, t, dst, sizeof dst);
        CHECK(memcmp(src, dst, sizeof src) == 0, "read back");
        pt_tensor *ti = newt(PT_I32, 1, 9, 1, 1, 1);
        int32_t is[9], id[9];
        for (int i = 0; i < 9; i++) is[i] = -i * 1000;
        be->write(g_ctx, ti, is, sizeof is);
        be->read(g_ctx, ti, id, sizeof id);
        CHECK(memcmp(is, id, sizeof is) == 0 && I(ti)[8] == -8000, "i32 write/read");
    }
    pool_free();
}

static void test_fill_copy(void) {
    int64_t sizes[] = {1, 7, 4097, 100003};
    for (int s = 0; s < 4; s++) {
        int64_t n = sizes[s];
        pt_tensor *a = newf1(n), *b = newf1(n), *ia = newt(PT_I32, 1, n, 1, 1, 1), *ib = newt(PT_I32, 1, n, 1, 1, 1);
        be->fill(g_ctx, a, 2.5f);
        int ok = 1;
        for (int64_t i = 0; i < n; i++) ok &= F(a)[i] == 2.5f;
        CHECK(ok, "fill f32");
        be->fill(g_ctx, ia, -3.0f);
        ok = 1;
        for (int64_t i = 0; i < n; i++) ok &= I(ia)[i] == -3;
        CHECK(ok, "fill i32");
        rnd(b, -1, 1);
        be->copy(g_ctx, a, b, 0);
        CHECK(same(a, b), "copy f32");
        double *r = dcopy(a);
        for (int64_t i = 0; i < n; i++) r[i] += (double)F(b)[i];
        be->copy(g_ctx, a, b, 1);
        CHECK(close_to(F(a), r, n, 0, 0), "copy f32 accumulate");
        for (int64_t i = 0; i < n; i++) I(ib)[i] = (int32_t)(i * 3 - 7);
        be->copy(g_ctx, ia, ib, 1);
        ok = 1;
        for (int64_t i = 0; i < n; i++) ok &= I(ia)[i] == (int32_t)(i * 3 - 10);
        CHECK(ok, "copy i32 accumulate");
        be->copy(g_ctx, ia, ib, 0);
        CHECK(same(ia, ib), "copy i32");
        /* x += x */
        for (int64_t i = 0; i < n; i++) r[i] = 2.0 * (double)F(b)[i];
        be->copy(g_ctx, b, b, 1);
        CHECK(close_to(F(b), r, n, 0, 0), "copy accumulate onto itself");
        free(r);
    }
    { /* storage dtypes: zero fill, byte copies, permute */
        pt_tensor *h = newt(PT_BF16, 2, 3, 5, 1, 1), *h2 = newt(PT_BF16, 2, 5, 3, 1, 1), *h3 = newt(PT_BF16, 2, 3, 5, 1, 1);
        uint16_t *hp = (uint16_t *)pt__cpu_bytes(h), *hp2 = (uint16_t *)pt__cpu_bytes(h2);
        int perm[2] = {1, 0}, ok = 1;
        be->fill(g_ctx, h, 0.0f);
        for (int i = 0; i < 15; i++) ok &= hp[i] == 0;
        CHECK(ok, "fill bf16 with 0");
        for (int i = 0; i < 15; i++) hp[i] = (uint16_t)(i * 11 + 1);
        be->permute(g_ctx, h2, h, perm, 0);
        ok = 1;
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 5; j++) ok &= hp2[j * 3 + i] == hp[i * 5 + j];
        CHECK(ok, "permute bf16");
        be->copy(g_ctx, h3, h, 0);
        CHECK(same(h3, h), "copy bf16");
        pt_tensor *q = newt(PT_I8, 1, 37, 1, 1, 1), *q2 = newt(PT_I8, 1, 37, 1, 1, 1);
        for (int i = 0; i < 37; i++) ((int8_t *)pt__cpu_bytes(q))[i] = (int8_t)(i - 18);
        be->copy(g_ctx, q2, q, 0);
        CHECK(same(q, q2), "copy i8");
    }
    pool_free();
}

static void test_binary_scale(void) {
    int64_t shapes[][2] = {{1, 1}, {7, 7}, {12, 3}, {12, 1}, {13, 13}, {100000, 100}, {99999, 1}, {70001, 70001},
                           {6 * 4099, 6}};
    for (int s = 0; s < 9; s++) {
        int64_t n = shapes[s][0], nb = shapes[s][1];
        for (int op = 0; op < 3; op++) {
            pt_tensor *a = newf1(n), *b = newf1(nb), *o = newf1(n);
            rnd(a, -2, 2);
            rnd(b, -2, 2);
            double *r = dref(n);
            for (int64_t i = 0; i < n; i++) {
                float x = F(a)[i], y = F(b)[i % nb];
                r[i] = op == PT__ADD ? (double)(x + y) : op == PT__SUB ? (double)(x - y) : (double)(x * y);
            }
            be->binary(g_ctx, op, o, a, b);
            CHECK(close_to(F(o), r, n, 0, 0), "binary");
            be->binary(g_ctx, op, a, a, b); /* in place */
            CHECK(close_to(F(a), r, n, 0, 0), "binary in place");
            free(r);
        }
        pool_free();
    }
    {
        pt_tensor *a = newf(3, 2, 3, 5, 1), *o = newf(3, 2, 3, 5, 1);
        rnd(a, -3, 3);
        double *r = dref(30);
        for (int i = 0; i < 30; i++) r[i] = (double)(0.75f * F(a)[i]);
        be->scale(g_ctx, o, a, 0.75f);
        CHECK(close_to(F(o), r, 30, 0, 0), "scale");
        be->scale(g_ctx, a, a, 0.75f);
        CHECK(close_to(F(a), r, 30, 0, 0), "scale in place");
        free(r);
    }
    pool_free();
}

/* the row-summing kernels: results vs double, and 1 thread vs 3 threads bit for bit */
static void test_axpy_mulacc(void) {
    int64_t cases[][2] = {{5, 5}, {1, 1}, {1, 100000}, {5, 5 * 20000}, {768, 768 * 64}, {33, 33 * 7},
                          {3, 3 * 7}, {31, 31 * 3001}, {64, 64}, {100, 100 * 400}, {1, 7}};
    for (int s = 0; s < 11; s++) {
        int64_t nd = cases[s][0], ns = cases[s][1], rows = ns / nd;
        pt_tensor *src = newf1(ns), *d0 = newf1(nd);
        rnd(src, -1, 1);
        rnd(d0, -1, 1);
        pt_tensor *d1 = clone(d0), *d2 = clone(d0);
        double *r = dcopy(d0);
        float alpha = -0.37f;
        for (int64_t j = 0; j < nd; j++) {
            double acc = 0.0;
            for (int64_t q = 0; q < rows; q++) acc += F(src)[q * nd + j];
            r[j] += alpha * acc;
        }
        set_threads(1);
        be->axpy_reduce(g_ctx, d1, src, alpha);
        set_threads(3);
        be->axpy_reduce(g_ctx, d2, src, alpha);
        set_threads(2);
        CHECK(same(d1, d2), "axpy_reduce thread-count independent");
        CHECK(close_to(F(d1), r, nd, 1e-6 * (double)rows, 1e-5), "axpy_reduce");
        free(r);

        /* mul_acc, row sums: dst[nd] += sum_r x * y with y full (ny = n) */
        pt_tensor *y = newf1(ns);
        rnd(y, -1, 1);
        d1 = clone(d0);
        d2 = clone(d0);
        r = dcopy(d0);
        for (int64_t j = 0; j < nd; j++) {
            double acc = 0.0;
            for (int64_t q = 0; q < rows; q++) acc += (double)F(src)[q * nd + j] * F(y)[q * nd + j];
            r[j] += acc;
        }
        set_threads(1);
        be->mul_acc(g_ctx, d1, src, y);
        set_threads(3);
        be->mul_acc(g_ctx, d2, src, y);
        set_threads(2);
        CHECK(same(d1, d2), "mul_acc rowsum thread-count independent");
        CHECK(close_to(F(d1), r, nd, 1e-6 * (double)rows, 1e-5), "mul_acc rowsum (y full)");
        free(r);

        /* mul_acc, row sums with y repeating with a period that is not nd (ny = 2 * nd or 1) */
        if (rows % 2 == 0 || nd == 1) {
            int64_t ny = rows % 2 == 0 ? 2 * nd : 1;
            pt_tensor *yy = newf1(ny);
            rnd(yy, -1, 1);
            d1 = clone(d0);
            d2 = clone(d0);
            r = dcopy(d0);
            for (int64_t j = 0; j < nd; j++) {
                double acc = 0.0;
                for (int64_t q = 0; q < rows; q++) acc += (double)F(src)[q * nd + j] * F(yy)[(q * nd + j) % ny];
                r[j] += acc;
            }
            set_threads(1);
            be->mul_acc(g_ctx, d1, src, yy);
            set_threads(3);
            be->mul_acc(g_ctx, d2, src, yy);
            set_threads(2);
            CHECK(same(d1, d2), "mul_acc rowsum (y periodic) thread-count independent");
            CHECK(close_to(F(d1), r, nd, 1e-6 * (double)rows, 1e-5), "mul_acc rowsum (y periodic)");
            free(r);
        }

        /* mul_acc, elementwise: dst[n] += x * y[i % nd] */
        pt_tensor *e0 = newf1(ns);
        rnd(e0, -1, 1);
        pt_tensor *e1 = clone(e0), *e2 = clone(e0);
        r = dcopy(e0);
        for (int64_t i = 0; i < ns; i++) r[i] += (double)F(src)[i] * F(d0)[i % nd];
        set_threads(1);
        be->mul_acc(g_ctx, e1, src, d0);
        set_threads(3);
        be->mul_acc(g_ctx, e2, src, d0);
        set_threads(2);
        CHECK(same(e1, e2), "mul_acc elementwise thread-count independent");
        CHECK(close_to(F(e1), r, ns, 1e-6, 1e-6), "mul_acc elementwise (y broadcast)");
        free(r);

        /* axpy_reduce, same size */
        e1 = clone(e0);
        r = dcopy(e0);
        for (int64_t i = 0; i < ns; i++) r[i] += (double)alpha * F(src)[i];
        be->axpy_reduce(g_ctx, e1, src, alpha);
        CHECK(close_to(F(e1), r, ns, 1e-6, 1e-6), "axpy elementwise");
        free(r);
        pool_free();
    }
}

static double gelu_d(double x) {
    const double k = sqrt(2.0 / 3.14159265358979323846);
    return 0.5 * x * (1.0 + tanh(k * (x + 0.044715 * x * x * x)));
}
static double gelu_grad_d(double x) {
    const double k = sqrt(2.0 / 3.14159265358979323846);
    double u = k * (x + 0.044715 * x * x * x), t = tanh(u);
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3.0 * 0.044715 * x * x);
}

static void test_act_dropout(void) {
    int64_t sizes[] = {1, 17, 50001};
    for (int s = 0; s < 3; s++) {
        int64_t n = sizes[s];
        for (int kind = 0; kind < 2; kind++) {
            pt_tensor *x = newf1(n), *y = newf1(n), *dy = newf1(n), *dx = newf1(n);
            rnd(x, -5, 5);
            rnd(dy, -1, 1);
            rnd(dx, -1, 1);
            if (n > 1) F(x)[1] = 0.0f;
            if (n > 5) {
                F(x)[2] = -30.0f;
                F(x)[3] = 30.0f;
                F(x)[4] = 1e-4f;
                F(x)[5] = -200.0f;
            }
            double *r = dref(n), *rg = dcopy(dx);
            for (int64_t i = 0; i < n; i++) {
                double v = F(x)[i];
                r[i] = kind == PT__GELU ? gelu_d(v) : (v > 0 ? v : 0);
                rg[i] += (kind == PT__GELU ? gelu_grad_d(v) : (v > 0 ? 1.0 : 0.0)) * F(dy)[i];
            }
            be->act_fwd(g_ctx, kind, y, x);
            CHECK(close_to(F(y), r, n, 1e-6, 1e-5), kind ? "gelu fwd" : "relu fwd");
            pt_tensor *dx2 = clone(dx);
            set_threads(1);
            be->act_bwd(g_ctx, kind, dx, x, dy);
            set_threads(3);
            be->act_bwd(g_ctx, kind, dx2, x, dy);
            set_threads(2);
            CHECK(close_to(F(dx), rg, n, 1e-6, 1e-5), kind ? "gelu bwd" : "relu bwd");
            CHECK(same(dx, dx2), "act_bwd thread-count independent");
            free(r);
            free(rg);
        }
        /* dropout */
        {
            pt_tensor *x = newf1(n), *o = newf1(n), *o2 = newf1(n);
            rnd(x, -1, 1);
            float p = 0.3f;
            uint64_t key = 0xabcdefull;
            int64_t base = 1000;
            double *r = dref(n);
            int64_t kept = 0;
            for (int64_t i = 0; i < n; i++) {
                int keep = pt__unit(key, (uint64_t)(base + i)) > p;
                kept += keep;
                r[i] = keep ? (double)(F(x)[i] / (1.0f - p)) : 0.0;
            }
            be->dropout(g_ctx, o, x, p, key, base, 0);
            CHECK(close_to(F(o), r, n, 0, 0), "dropout");
            if (n > 10000) CHECK(fabs((double)kept / (double)n - 0.7) < 0.02, "dropout keep rate");
            rnd(o2, -1, 1);
            for (int64_t i = 0; i < n; i++) r[i] = (double)(F(o2)[i] + (float)r[i]);
            be->dropout(g_ctx, o2, x, p, key, base, 1);
            CHECK(close_to(F(o2), r, n, 0, 0), "dropout accumulate");
            /* the mask is a function of the global position: the second half with base + n/2 */
            if (n > 2) {
                int64_t h = n / 2;
                pt_tensor xh = *x, oh = *o2;
                xh.off += h;
                xh.shape[0] = n - h;
                oh.off += h;
                oh.shape[0] = n - h;
                be->dropout(g_ctx, &oh, &xh, p, key, base + h, 0);
                CHECK(memcmp(F(o) + h, F(o2) + h, (size_t)(n - h) * 4) == 0, "dropout split-invariant");
            }
            free(r);
        }
        pool_free();
    }
}

static void test_softmax(void) {
    int64_t shapes[][2] = {{1, 1}, {3, 7}, {5, 1000}, {40, 1000}, {2, 1}};
    for (int s = 0; s < 5; s++) {
        int64_t R = shapes[s][0], Cc = shapes[s][1], n = R * Cc;
        for (int lg = 0; lg < 2; lg++) {
            pt_tensor *x = newf(2, R, Cc, 1, 1), *y = newf(2, R, Cc, 1, 1), *y2 = newf(2, R, Cc, 1, 1);
            pt_tensor *dy = newf(2, R, Cc, 1, 1), *dx = newf(2, R, Cc, 1, 1);
            rnd(x, -8, 8);
            rnd(dy, -1, 1);
            rnd(dx, -1, 1);
            if (!lg && Cc >= 1000) /* masked entries: probability exactly 0 */
                for (int64_t i = 3; i < n; i += 7) F(x)[i] = -INFINITY;
            double *r = dref(n), *rg = dcopy(dx);
            for (int64_t q = 0; q < R; q++) {
                const float *xr = F(x) + q * Cc;
                double mx = xr[0], sum = 0.0;
                for (int64_t i = 0; i < Cc; i++) mx = xr[i] > mx ? xr[i] : mx;
                for (int64_t i = 0; i < Cc; i++) sum += exp(xr[i] - mx);
                for (int64_t i = 0; i < Cc; i++)
                    r[q * Cc + i] = lg ? xr[i] - mx - log(sum) : exp(xr[i] - mx) / sum;
            }
            set_threads(1);
            be->softmax_fwd(g_ctx, y, x, lg);
            set_threads(3);
            be->softmax_fwd(g_ctx, y2, x, lg);
            set_threads(2);
            CHECK(close_to(F(y), r, n, 1e-6, 1e-5), lg ? "log_softmax fwd" : "softmax fwd");
            CHECK(same(y, y2), "softmax fwd thread-count independent");
            /* backward from the analytic Jacobian: with p = softmax(x),
               softmax: dx_i = sum_j dy_j p_j (delta_ij - p_i) = p_i (dy_i - sum_j dy_j p_j)
               log-softmax: dx_i = sum_j dy_j (delta_ij - p_i) = dy_i - p_i sum_j dy_j */
            for (int64_t q = 0; q < R; q++) {
                double dot = 0.0, sdy = 0.0;
                const float *yr = F(y) + q * Cc, *gr = F(dy) + q * Cc;
                for (int64_t i = 0; i < Cc; i++) {
                    double p = lg ? exp((double)yr[i]) : (double)yr[i];
                    dot += gr[i] * p;
                    sdy += gr[i];
                }
                for (int64_t i = 0; i < Cc; i++) {
                    double p = lg ? exp((double)yr[i]) : (double)yr[i];
                    rg[q * Cc + i] += lg ? gr[i] - p * sdy : p * (gr[i] - dot);
                }
            }
            pt_tensor *dx2 = clone(dx);
            set_threads(1);
            be->softmax_bwd(g_ctx, dx, y, dy, lg);
            set_threads(3);
            be->softmax_bwd(g_ctx, dx2, y, dy, lg);
            set_threads(2);
            CHECK(close_to(F(dx), rg, n, 1e-5, 1e-5), lg ? "log_softmax bwd" : "softmax bwd");
            CHECK(same(dx, dx2), "softmax bwd thread-count independent");
            free(r);
            free(rg);
        }
        pool_free();
    }
}

static void test_xent(void) {
    struct { int64_t R, V, nvalid; } cs[] = {{1, 1, 1}, {5, 3000, 2990}, {13, 5000, 5000}, {4, 7, 5}, {3, 2500, 0}};
    for (int s = 0; s < 5; s++) {
        int64_t R = cs[s].R, V = cs[s].V, nv = cs[s].nvalid, nve = nv > 0 ? nv : V;
        int32_t ignore = -100;
        pt_tensor *lg = newf(3, 1, R, V, 1), *tg = newt(PT_I32, 2, 1, R, 1, 1);
        pt_tensor *loss = newf1(R), *lse = newf1(R), *loss2 = newf1(R), *lse2 = newf1(R);
        rnd(lg, -10, 10);
        if (V > 1000) F(lg)[V + 1500] = 30.0f; /* a large logit late in a row: the running max rescales */
        for (int64_t q = 0; q < R; q++) I(tg)[q] = (int32_t)(urand() * (double)nve);
        if (R > 2) I(tg)[1] = ignore;
        double *rl = dref(R), *rlse = dref(R);
        for (int64_t q = 0; q < R; q++) {
            const float *xr = F(lg) + q * V;
            double mx = xr[0], sum = 0.0;
            for (int64_t i = 0; i < nve; i++) mx = xr[i] > mx ? xr[i] : mx;
            for (int64_t i = 0; i < nve; i++) sum += exp(xr[i] - mx);
            rlse[q] = mx + log(sum);
            rl[q] = I(tg)[q] == ignore ? 0.0 : rlse[q] - xr[I(tg)[q]];
        }
        set_threads(1);
        be->xent_fwd(g_ctx, loss, lse, lg, tg, ignore, nv);
        set_threads(3);
        be->xent_fwd(g_ctx, loss2, lse2, lg, tg, ignore, nv);
        set_threads(2);
        CHECK(close_to(F(lse), rlse, R, 1e-5, 1e-6), "xent lse");
        CHECK(close_to(F(loss), rl, R, 1e-5, 1e-5), "xent loss rows");
        CHECK(same(loss, loss2) && same(lse, lse2), "xent fwd thread-count independent");
        /* backward: d loss_r / d x_rc = softmax(x_r)_c - [c == t_r] over the valid columns */
        pt_tensor *dl = newf(3, 1, R, V, 1), *dloss = newf(0, 1, 1, 1, 1);
        rnd(dl, -1, 1);
        F(dloss)[0] = 0.5f;
        float scale = 1.0f / 3.0f;
        double g = (double)(0.5f * scale);
        double *rg = dcopy(dl);
        for (int64_t q = 0; q < R; q++) {
            if (I(tg)[q] == ignore) continue;
            for (int64_t c = 0; c < nve; c++)
                rg[q * V + c] += g * (exp(F(lg)[q * V + c] - rlse[q]) - (c == I(tg)[q] ? 1.0 : 0.0));
        }
        /* overwrite = 1 sets dlogits instead: the same gradient, 0 in ignored rows and columns >= nvalid */
        double *rset = dref(R * V);
        for (int64_t i = 0; i < R * V; i++) rset[i] = rg[i] - (double)F(dl)[i];
        for (int64_t q = 0; q < R; q++)
            for (int64_t c = 0; c < V; c++)
                if (I(tg)[q] == ignore || c >= nve) rset[q * V + c] = 0.0;
        pt_tensor *dl2 = clone(dl);
        set_threads(1);
        be->xent_bwd(g_ctx, dl, lg, lse, tg, ignore, nv, dloss, scale, 0);
        set_threads(3);
        be->xent_bwd(g_ctx, dl2, lg, lse, tg, ignore, nv, dloss, scale, 0);
        set_threads(2);
        CHECK(close_to(F(dl), rg, R * V, 1e-6, 1e-5), "xent bwd");
        CHECK(same(dl, dl2), "xent bwd thread-count independent");
        /* overwrite into a separate (poisoned: 0x7f7f7f7f) output, then in place (dlogits == logits) */
        pt_tensor *ds1 = newf(3, 1, R, V, 1), *ds3 = newf(3, 1, R, V, 1), *ip1 = clone(lg), *ip3 = clone(lg);
        pt_tensor *lg0 = clone(lg);
        set_threads(1);
        be->xent_bwd(g_ctx, ds1, lg, lse, tg, ignore, nv, dloss, scale, 1);
        be->xent_bwd(g_ctx, ip1, ip1, lse, tg, ignore, nv, dloss, scale, 1);
        set_threads(3);
        be->xent_bwd(g_ctx, ds3, lg, lse, tg, ignore, nv, dloss, scale, 1);
        be->xent_bwd(g_ctx, ip3, ip3, lse, tg, ignore, nv, dloss, scale, 1);
        set_threads(2);
        CHECK(same(lg, lg0), "xent bwd overwrite leaves a separate logits untouched");
        CHECK(close_to(F(ds1), rset, R * V, 1e-6, 1e-5), "xent bwd overwrite");
        CHECK(same(ds1, ds3), "xent bwd overwrite thread-count independent");
        CHECK(close_to(F(ip1), rset, R * V, 1e-6, 1e-5), "xent bwd overwrite in place");
        CHECK(same(ip1, ip3), "xent bwd overwrite in place thread-count independent");
        {
            int zeros = 1;
            for (int64_t q = 0; q < R; q++)
                for (int64_t c = 0; c < V; c++)
                    if (I(tg)[q] == ignore || c >= nve) zeros &= F(ds1)[q * V + c] == 0.0f && F(ip1)[q * V + c] == 0.0f;
            CHECK(zeros, "xent bwd overwrite: ignored rows and columns >= nvalid are exactly 0");
        }
        free(rl);
        free(rlse);
        free(rg);
        free(rset);
        pool_free();
    }
}

static void test_layernorm(void) {
    int64_t shapes[][2] = {{1, 1}, {3, 5}, {64, 768}, {6, 33}, {1, 300}};
    for (int s = 0; s < 5; s++) {
        int64_t R = shapes[s][0], Cc = shapes[s][1], n = R * Cc;
        for (int hasb = 0; hasb < 2; hasb++) {
            pt_tensor *x = newf(3, 1, R, Cc, 1), *w = newf1(Cc), *b = hasb ? newf1(Cc) : NULL;
            pt_tensor *y = newf(3, 1, R, Cc, 1), *mu = newf1(R), *rs = newf1(R), *y2 = newf(3, 1, R, Cc, 1);
            pt_tensor *mu2 = newf1(R), *rs2 = newf1(R);
            float eps = 1e-5f;
            rnd(x, -3, 3);
            for (int64_t i = 0; i < n; i++) F(x)[i] += 2.0f;
            rnd(w, 0.5f, 1.5f);
            if (b) rnd(b, -1, 1);
            double *ry = dref(n), *rmu = dref(R), *rrs = dref(R), *xh = dref(n);
            for (int64_t q = 0; q < R; q++) {
                double m = 0.0, v = 0.0;
                for (int64_t i = 0; i < Cc; i++) m += F(x)[q * Cc + i];
                m /= (double)Cc;
                for (int64_t i = 0; i < Cc; i++) v += (F(x)[q * Cc + i] - m) * (F(x)[q * Cc + i] - m);
                v /= (double)Cc;
                rmu[q] = m;
                rrs[q] = 1.0 / sqrt(v + eps);
                for (int64_t i = 0; i < Cc; i++) {
                    xh[q * Cc + i] = (F(x)[q * Cc + i] - m) * rrs[q];
                    ry[q * Cc + i] = xh[q * Cc + i] * F(w)[i] + (b ? F(b)[i] : 0.0);
                }
            }
            set_threads(1);
            be->layernorm_fwd(g_ctx, y, mu, rs, x, w, b, eps);
            set_threads(3);
            be->layernorm_fwd(g_ctx, y2, mu2, rs2, x, w, b, eps);
            set_threads(2);
            CHECK(close_to(F(y), ry, n, 1e-4, 1e-4), "layernorm fwd");
            CHECK(close_to(F(mu), rmu, R, 1e-6, 1e-6), "layernorm mean");
            CHECK(close_to(F(rs), rrs, R, 1e-6, 1e-5), "layernorm rstd");
            CHECK(same(y, y2) && same(mu, mu2) && same(rs, rs2), "layernorm fwd thread-count independent");
            /* backward from the analytic formulas: xhat = (x - mu) rstd, g = dy * w,
               dx = rstd (g - mean(g) - xhat mean(g xhat)), dw = sum_r dy xhat, db = sum_r dy */
            pt_tensor *dy = newf(3, 1, R, Cc, 1), *dx = newf(3, 1, R, Cc, 1), *dw = newf1(Cc), *db = newf1(Cc);
            rnd(dy, -1, 1);
            rnd(dx, -1, 1);
            rnd(dw, -1, 1);
            rnd(db, -1, 1);
            double *rdx = dcopy(dx), *rdw = dcopy(dw), *rdb = dcopy(db);
            for (int64_t q = 0; q < R; q++) {
                double m1 = 0.0, m2 = 0.0;
                for (int64_t i = 0; i < Cc; i++) {
                    double gg = (double)F(dy)[q * Cc + i] * F(w)[i];
                    m1 += gg;
                    m2 += gg * xh[q * Cc + i];
                }
                m1 /= (double)Cc;
                m2 /= (double)Cc;
                for (int64_t i = 0; i < Cc; i++) {
                    double gg = (double)F(dy)[q * Cc + i] * F(w)[i];
                    rdx[q * Cc + i] += rrs[q] * (gg - m1 - xh[q * Cc + i] * m2);
                    rdw[i] += F(dy)[q * Cc + i] * xh[q * Cc + i];
                    rdb[i] += F(dy)[q * Cc + i];
                }
            }
            for (int mask = 0; mask < 8; mask++) {
                pt_tensor *a1 = clone(dx), *b1 = clone(dw), *c1 = clone(db);
                pt_tensor *a2 = clone(dx), *b2 = clone(dw), *c2 = clone(db);
                set_threads(1);
                be->layernorm_bwd(g_ctx, mask & 1 ? a1 : NULL, mask & 2 ? b1 : NULL, mask & 4 ? c1 : NULL, dy, x, w,
                                  mu, rs);
                set_threads(3);
                be->layernorm_bwd(g_ctx, mask & 1 ? a2 : NULL, mask & 2 ? b2 : NULL, mask & 4 ? c2 : NULL, dy, x, w,
                                  mu, rs);
                set_threads(2);
                CHECK(same(a1, a2) && same(b1, b2) && same(c1, c2), "layernorm bwd thread-count independent");
                CHECK(mask & 1 ? close_to(F(a1), rdx, n, 1e-4, 1e-4) : same(a1, dx), "layernorm dx");
                CHECK(mask & 2 ? close_to(F(b1), rdw, Cc, 1e-5 * (double)R, 1e-4) : same(b1, dw), "layernorm dw");
                CHECK(mask & 4 ? close_to(F(c1), rdb, Cc, 1e-5 * (double)R, 1e-5) : same(c1, db), "layernorm db");
            }
            free(ry); free(rmu); free(rrs); free(xh); free(rdx); free(rdw); free(rdb);
            pool_free();
        }
    }
}

static void test_embed(void) {
    struct { int64_t V, C, n; } cs[] = {{1, 1, 1}, {10, 70, 33}, {50, 768, 300}, {7, 3, 20000}};
    for (int s = 0; s < 4; s++) {
        int64_t V = cs[s].V, Cc = cs[s].C, n = cs[s].n;
        pt_tensor *tb = newf(2, V, Cc, 1, 1), *ids = newt(PT_I32, 2, 1, n, 1, 1), *o = newf(3, 1, n, Cc, 1);
        rnd(tb, -1, 1);
        for (int64_t i = 0; i < n; i++) I(ids)[i] = (int32_t)(urand() * (double)V);
        if (n > 3) I(ids)[3] = I(ids)[0]; /* repeats */
        be->embed_fwd(g_ctx, o, tb, ids);
        int ok = 1;
        for (int64_t i = 0; i < n; i++) ok &= memcmp(F(o) + i * Cc, F(tb) + I(ids)[i] * Cc, (size_t)Cc * 4) == 0;
        CHECK(ok, "embed fwd");
        pt_tensor *dt = newf(2, V, Cc, 1, 1), *g = newf(3, 1, n, Cc, 1);
        rnd(dt, -1, 1);
        rnd(g, -1, 1);
        pt_tensor *dt2 = clone(dt);
        double *r = dcopy(dt);
        for (int64_t i = 0; i < n; i++)
            for (int64_t c = 0; c < Cc; c++) r[I(ids)[i] * Cc + c] += F(g)[i * Cc + c];
        set_threads(1);
        be->embed_bwd(g_ctx, dt, g, ids);
        set_threads(3);
        be->embed_bwd(g_ctx, dt2, g, ids);
        set_threads(2);
        CHECK(close_to(F(dt), r, V * Cc, 1e-6 * (double)n, 1e-5), "embed bwd");
        CHECK(same(dt, dt2), "embed bwd thread-count independent");
        free(r);
        pool_free();
    }
}

static void test_permute(void) {
    struct { int nd; int64_t s[4]; int p[4]; } cs[] = {
        {2, {3, 5, 1, 1}, {1, 0, 0, 0}},     {3, {2, 3, 4, 1}, {0, 2, 1, 0}}, {3, {2, 3, 4, 1}, {2, 0, 1, 0}},
        {4, {2, 3, 4, 5}, {0, 2, 1, 3}},     {4, {2, 3, 4, 5}, {3, 1, 0, 2}}, {1, {9, 1, 1, 1}, {0, 0, 0, 0}},
        {4, {8, 64, 12, 64}, {0, 2, 1, 3}},  {2, {1, 1, 1, 1}, {1, 0, 0, 0}}, {2, {300, 257, 1, 1}, {1, 0, 0, 0}},
    };
    for (int s = 0; s < 9; s++) {
        int nd = cs[s].nd;
        const int64_t *sh = cs[s].s;
        const int *p = cs[s].p;
        int64_t ds[4] = {1, 1, 1, 1}, n = sh[0] * sh[1] * sh[2] * sh[3];
        for (int i = 0; i < nd; i++) ds[i] = sh[p[i]];
        /* strides of the source dims in a 4-d, left-aligned view */
        int64_t sstr[4];
        sstr[nd - 1] = 1;
        for (int k = nd - 2; k >= 0; k--) sstr[k] = sstr[k + 1] * sh[k + 1];
        pt_tensor *x = newf(nd, sh[0], sh[1], sh[2], sh[3]), *y = newf(nd, ds[0], ds[1], ds[2], ds[3]);
        pt_tensor *xi = newt(PT_I32, nd, sh[0], sh[1], sh[2], sh[3]), *yi = newt(PT_I32, nd, ds[0], ds[1], ds[2], ds[3]);
        rnd(x, -1, 1);
        for (int64_t i = 0; i < n; i++) I(xi)[i] = (int32_t)(i * 7 + 1);
        rnd(y, -1, 1);
        double *r = dcopy(y);
        int64_t idx[4];
        int ok = 1;
        be->permute(g_ctx, yi, xi, p, 0);
        for (int64_t o = 0; o < n; o++) { /* dst index o -> its multi-index over ds */
            int64_t rem = o, so = 0;
            for (int k = nd - 1; k >= 0; k--) {
                idx[k] = rem % ds[k];
                rem /= ds[k];
            }
            for (int k = 0; k < nd; k++) so += idx[k] * sstr[p[k]];
            r[o] = (double)(F(y)[o] + F(x)[so]);
            ok &= I(yi)[o] == I(xi)[so];
        }
        CHECK(ok, "permute i32");
        be->permute(g_ctx, y, x, p, 1);
        CHECK(close_to(F(y), r, n, 0, 0), "permute accumulate");
        pt_tensor *y2 = newf(nd, ds[0], ds[1], ds[2], ds[3]);
        be->permute(g_ctx, y2, x, p, 0);
        /* exact check of the plain copy */
        {
            int ok2 = 1;
            for (int64_t o = 0; o < n; o++) {
                int64_t rem = o, so = 0;
                for (int k = nd - 1; k >= 0; k--) {
                    idx[k] = rem % ds[k];
                    rem /= ds[k];
                }
                for (int k = 0; k < nd; k++) so += idx[k] * sstr[p[k]];
                ok2 &= F(y2)[o] == F(x)[so];
            }
            CHECK(ok2, "permute f32");
        }
        free(r);
        pool_free();
    }
}

static void test_copy_block(void) {
    struct { int64_t outer, ddim, dstart, sdim, sstart, count, inner; } cs[] = {
        {1, 1, 0, 1, 0, 1, 1}, {3, 10, 4, 5, 1, 3, 7}, {2, 8, 0, 8, 0, 8, 5000}, {1000, 6, 2, 4, 0, 4, 16}, {5, 3, 2, 9, 8, 1, 1},
    };
    for (int s = 0; s < 5; s++) {
        int64_t o = cs[s].outer, dd = cs[s].ddim, ds0 = cs[s].dstart, sd = cs[s].sdim, ss0 = cs[s].sstart;
        int64_t cnt = cs[s].count, in = cs[s].inner;
        for (int acc = 0; acc < 2; acc++) {
            pt_tensor *d = newf(3, o, dd, in, 1), *src = newf(3, o, sd, in, 1);
            rnd(d, -1, 1);
            rnd(src, -1, 1);
            double *r = dcopy(d);
            for (int64_t a = 0; a < o; a++)
                for (int64_t i = 0; i < cnt; i++)
                    for (int64_t j = 0; j < in; j++) {
                        double v = F(src)[(a * sd + ss0 + i) * in + j];
                        double *rr = &r[(a * dd + ds0 + i) * in + j];
                        *rr = acc ? (double)(float)(*rr + v) : v;
                    }
            be->copy_block(g_ctx, d, dd, ds0, src, sd, ss0, cnt, o, in, acc);
            CHECK(close_to(F(d), r, N(d), 0, 0), acc ? "copy_block accumulate" : "copy_block");
            free(r);
        }
        {
            pt_tensor *d = newt(PT_I32, 3, o, dd, in, 1), *src = newt(PT_I32, 3, o, sd, in, 1);
            for (int64_t i = 0; i < N(d); i++) I(d)[i] = (int32_t)i;
            for (int64_t i = 0; i < N(src); i++) I(src)[i] = (int32_t)(-3 * i);
            be->copy_block(g_ctx, d, dd, ds0, src, sd, ss0, cnt, o, in, 1);
            int ok = 1;
            for (int64_t a = 0; a < o; a++)
                for (int64_t i = 0; i < cnt; i++)
                    for (int64_t j = 0; j < in; j++) {
                        int64_t di = (a * dd + ds0 + i) * in + j, si = (a * sd + ss0 + i) * in + j;
                        ok &= I(d)[di] == (int32_t)(di - 3 * si);
                    }
            CHECK(ok, "copy_block i32 accumulate");
        }
        pool_free();
    }
}

static void test_sum(void) {
    int64_t sizes[] = {1, 4095, 4097, 100000, 1000001};
    for (int s = 0; s < 5; s++) {
        int64_t n = sizes[s];
        pt_tensor *x = newf1(n), *o1 = newf(0, 1, 1, 1, 1), *o2 = newf(0, 1, 1, 1, 1);
        rnd(x, -1, 3);
        double rs = 0.0, rq = 0.0;
        for (int64_t i = 0; i < n; i++) {
            rs += F(x)[i];
            rq += (double)F(x)[i] * F(x)[i];
        }
        set_threads(1);
        be->sum(g_ctx, o1, x, 0.5f);
        double q1 = be->sumsq(g_ctx, x, n);
        set_threads(3);
        be->sum(g_ctx, o2, x, 0.5f);
        double q2 = be->sumsq(g_ctx, x, n);
        set_threads(2);
        double r05 = 0.5 * rs;
        CHECK(close_to(F(o1), &r05, 1, 1e-9, 1e-6), "sum");
        CHECK(same(o1, o2), "sum thread-count independent");
        CHECK(fabs(q1 - rq) <= 1e-12 * rq + 1e-12, "sumsq");
        CHECK(memcmp(&q1, &q2, sizeof q1) == 0, "sumsq thread-count independent");
        if (n > 10) { /* a prefix: n counts, not numel */
            double rp = 0.0;
            for (int64_t i = 0; i < n / 2; i++) rp += (double)F(x)[i] * F(x)[i];
            double qp = be->sumsq(g_ctx, x, n / 2);
            CHECK(fabs(qp - rp) <= 1e-12 * rp, "sumsq prefix");
        }
        pool_free();
    }
}

static void test_gemm(void) {
    int64_t M = 3, Nn = 4, K = 5;
    pt_tensor *a = newf(2, M, K, 1, 1), *b = newf(2, Nn, K, 1, 1), *c = newf(2, M, Nn, 1, 1);
    rnd(a, -1, 1);
    rnd(b, -1, 1);
    rnd(c, -1, 1);
    double *r = dref(M * Nn);
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < Nn; j++) {
            double acc = 0.0;
            for (int64_t k = 0; k < K; k++) acc += (double)F(a)[i * K + k] * F(b)[j * K + k];
            r[i * Nn + j] = 2.0 * acc + 0.5 * F(c)[i * Nn + j];
        }
    /* no product has run yet: every workspace is empty; the backend must use gemm_ws[0] (the
       whole-team workspace) and no other (pt__sgemm picks its kernel and grows ws->buf) */
    int fresh = g_ctx->ngemm_ws >= 2, others = 1;
    for (int i = 0; i < g_ctx->ngemm_ws; i++) fresh &= g_ctx->gemm_ws[i].buf == NULL && g_ctx->gemm_ws[i].kern == 0;
    be->gemm(g_ctx, 0, 1, 1, M, Nn, K, 2.0f, a, K, 0, b, K, 0, 0.5f, c, Nn, 0);
    for (int i = 1; i < g_ctx->ngemm_ws; i++) others &= g_ctx->gemm_ws[i].buf == NULL && g_ctx->gemm_ws[i].kern == 0;
    CHECK(fresh && g_ctx->gemm_ws[0].buf != NULL && g_ctx->gemm_ws[0].kern != 0 && others,
          "gemm calls pt__sgemm with gemm_ws[0]");
    CHECK(close_to(F(c), r, M * Nn, 1e-5, 1e-5), "gemm forwards its arguments (at tensor offsets)");
    free(r);
    pool_free();
}

static void test_conv(void) {
    struct { int N, C, H, W, k, stride, pad; } cs[] = {
        {1, 1, 1, 1, 1, 1, 0}, {2, 3, 5, 6, 3, 1, 1}, {1, 2, 7, 7, 3, 2, 1}, {2, 1, 6, 5, 2, 2, 0},
        {1, 2, 4, 4, 3, 3, 2}, {3, 4, 17, 19, 5, 2, 2}, {4, 8, 32, 32, 3, 1, 1},
    };
    for (int s = 0; s < 7; s++) {
        int Nn = cs[s].N, Cc = cs[s].C, H = cs[s].H, W = cs[s].W, k = cs[s].k, st = cs[s].stride, pd = cs[s].pad;
        int Ho = (H + 2 * pd - k) / st + 1, Wo = (W + 2 * pd - k) / st + 1;
        int64_t S = (int64_t)Ho * Wo, KK = (int64_t)Cc * k * k, ncols = Nn * KK * S, nx = (int64_t)Nn * Cc * H * W;
        pt_tensor *x = newf(4, Nn, Cc, H, W), *cols = newf(3, Nn, KK, S, 1);
        rnd(x, -1, 1);
        double *r = dref(ncols);
        for (int n = 0; n < Nn; n++)
            for (int c = 0; c < Cc; c++)
                for (int ki = 0; ki < k; ki++)
                    for (int kj = 0; kj < k; kj++)
                        for (int oh = 0; oh < Ho; oh++)
                            for (int ow = 0; ow < Wo; ow++) {
                                int ih = oh * st - pd + ki, iw = ow * st - pd + kj;
                                r[(((int64_t)n * KK + (c * k + ki) * k + kj) * S) + oh * Wo + ow] =
                                    ih >= 0 && ih < H && iw >= 0 && iw < W ? F(x)[(((int64_t)n * Cc + c) * H + ih) * W + iw] : 0.0;
                            }
        be->im2col(g_ctx, cols, x, Nn, Cc, H, W, k, st, pd, Ho, Wo);
        CHECK(close_to(F(cols), r, ncols, 0, 0), "im2col");
        /* col2im = adjoint of im2col: scatter reference in double */
        pt_tensor *dc = newf(3, Nn, KK, S, 1), *dx = newf(4, Nn, Cc, H, W);
        rnd(dc, -1, 1);
        rnd(dx, -1, 1);
        pt_tensor *dx2 = clone(dx);
        double *rx = dcopy(dx);
        for (int n = 0; n < Nn; n++)
            for (int c = 0; c < Cc; c++)
                for (int ki = 0; ki < k; ki++)
                    for (int kj = 0; kj < k; kj++)
                        for (int oh = 0; oh < Ho; oh++)
                            for (int ow = 0; ow < Wo; ow++) {
                                int ih = oh * st - pd + ki, iw = ow * st - pd + kj;
                                if (ih >= 0 && ih < H && iw >= 0 && iw < W)
                                    rx[(((int64_t)n * Cc + c) * H + ih) * W + iw] +=
                                        F(dc)[(((int64_t)n * KK + (c * k + ki) * k + kj) * S) + oh * Wo + ow];
                            }
        set_threads(1);
        be->col2im(g_ctx, dx, dc, Nn, Cc, H, W, k, st, pd, Ho, Wo);
        set_threads(3);
        be->col2im(g_ctx, dx2, dc, Nn, Cc, H, W, k, st, pd, Ho, Wo);
        set_threads(2);
        CHECK(close_to(F(dx), rx, nx, 1e-5, 1e-5), "col2im");
        CHECK(same(dx, dx2), "col2im thread-count independent");
        /* channel bias */
        pt_tensor *bias = newf1(Cc), *o = clone(cols);
        pt_tensor *out = newf(4, Nn, Cc, Ho, Wo);
        rnd(out, -1, 1);
        rnd(bias, -1, 1);
        double *ro = dcopy(out);
        for (int64_t i = 0; i < N(out); i++) ro[i] = (double)(F(out)[i] + F(bias)[(i / S) % Cc]);
        be->chan_bias_fwd(g_ctx, out, bias, Nn, Cc, S);
        CHECK(close_to(F(out), ro, N(out), 0, 0), "chan_bias fwd");
        pt_tensor *db1 = newf1(Cc);
        rnd(db1, -1, 1);
        pt_tensor *db2 = clone(db1);
        double *rb = dcopy(db1);
        for (int64_t i = 0; i < N(out); i++) rb[(i / S) % Cc] += F(out)[i];
        set_threads(1);
        be->chan_bias_bwd(g_ctx, db1, out, Nn, Cc, S);
        set_threads(3);
        be->chan_bias_bwd(g_ctx, db2, out, Nn, Cc, S);
        set_threads(2);
        CHECK(close_to(F(db1), rb, Cc, 1e-6, 1e-6), "chan_bias bwd");
        CHECK(same(db1, db2), "chan_bias bwd thread-count independent");
        (void)o;
        free(r); free(rx); free(ro); free(rb);
        pool_free();
    }
}

static void test_maxpool(void) {
    struct { int N, C, H, W, k, stride; } cs[] = {
        {1, 1, 1, 1, 1, 1}, {2, 3, 4, 4, 2, 2}, {1, 2, 7, 5, 3, 2}, {2, 2, 5, 5, 2, 1}, {8, 16, 32, 32, 2, 2},
    };
    for (int s = 0; s < 5; s++) {
        int Nn = cs[s].N, Cc = cs[s].C, H = cs[s].H, W = cs[s].W, k = cs[s].k, st = cs[s].stride;
        int Ho = (H - k) / st + 1, Wo = (W - k) / st + 1;
        int64_t P = (int64_t)Nn * Cc, S = (int64_t)Ho * Wo, HW = (int64_t)H * W;
        pt_tensor *x = newf(4, Nn, Cc, H, W), *o = newf(4, Nn, Cc, Ho, Wo), *ix = newt(PT_I32, 4, Nn, Cc, Ho, Wo);
        for (int64_t i = 0; i < N(x); i++) F(x)[i] = (float)(int)(urand() * 5); /* many ties */
        be->maxpool_fwd(g_ctx, o, ix, x, Nn, Cc, H, W, k, st, Ho, Wo);
        int ok = 1;
        for (int64_t pl = 0; pl < P; pl++)
            for (int oh = 0; oh < Ho; oh++)
                for (int ow = 0; ow < Wo; ow++) {
                    float best = -1e30f;
                    int64_t bi = -1;
                    for (int ki = 0; ki < k; ki++)
                        for (int kj = 0; kj < k; kj++) {
                            int64_t j = (int64_t)(oh * st + ki) * W + ow * st + kj;
                            if (F(x)[pl * HW + j] > best) {
                                best = F(x)[pl * HW + j];
                                bi = j;
                            }
                        }
                    ok &= F(o)[pl * S + oh * Wo + ow] == best && I(ix)[pl * S + oh * Wo + ow] == (int32_t)bi;
                }
        CHECK(ok, "maxpool fwd (first max on ties)");
        pt_tensor *g = newf(4, Nn, Cc, Ho, Wo), *dx = newf(4, Nn, Cc, H, W);
        rnd(g, -1, 1);
        rnd(dx, -1, 1);
        pt_tensor *dx2 = clone(dx);
        double *r = dcopy(dx);
        for (int64_t pl = 0; pl < P; pl++)
            for (int64_t q = 0; q < S; q++) r[pl * HW + I(ix)[pl * S + q]] += F(g)[pl * S + q];
        set_threads(1);
        be->maxpool_bwd(g_ctx, dx, g, ix, Nn, Cc, H, W, Ho, Wo);
        set_threads(3);
        be->maxpool_bwd(g_ctx, dx2, g, ix, Nn, Cc, H, W, Ho, Wo);
        set_threads(2);
        CHECK(close_to(F(dx), r, N(dx), 1e-6, 1e-6), "maxpool bwd");
        CHECK(same(dx, dx2), "maxpool bwd thread-count independent");
        free(r);
        pool_free();
    }
}

static void test_optim(void) {
    int64_t sizes[] = {1, 13, 70000};
    for (int s = 0; s < 3; s++) {
        int64_t n = sizes[s];
        pt_tensor *p = newf1(n + 5), *g = newf1(n + 5), *m = newf1(n + 5), *v = newf1(n + 5);
        rnd(p, -1, 1);
        rnd(g, -1, 1);
        rnd(m, -0.1f, 0.1f);
        rnd(v, 0, 0.01f);
        float lr = 0.01f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f, bc1 = 0.19f, bc2 = 0.0975f, gs = 0.5f;
        double *rp = dcopy(p), *rm = dcopy(m), *rv = dcopy(v);
        for (int64_t i = 0; i < n; i++) {
            double gi = (double)F(g)[i] * gs;
            rm[i] = b1 * rm[i] + (1.0 - b1) * gi;
            rv[i] = b2 * rv[i] + (1.0 - b2) * gi * gi;
            rp[i] -= lr * ((rm[i] / bc1) / (sqrt(rv[i] / bc2) + eps) + wd * rp[i]);
        }
        pt_tensor *p0 = clone(p);
        be->adamw(g_ctx, p, g, m, v, n, lr, b1, b2, eps, wd, bc1, bc2, gs);
        CHECK(close_to(F(m), rm, n, 1e-7, 1e-5), "adamw m");
        CHECK(close_to(F(v), rv, n, 1e-9, 1e-5), "adamw v");
        CHECK(close_to(F(p), rp, n, 1e-6, 1e-5), "adamw p");
        CHECK(memcmp(F(p) + n, F(p0) + n, 5 * 4) == 0, "adamw touches n elements only");
        /* sgd with and without momentum */
        for (int mo = 0; mo < 3; mo++) {
            float momentum = mo == 0 ? 0.0f : 0.9f;
            pt_tensor *pp = clone(p0), *mm = clone(m);
            double *rpp = dcopy(pp), *rmm = dcopy(mm);
            for (int64_t i = 0; i < n; i++) {
                double gi = (double)F(g)[i] * gs + wd * rpp[i];
                if (mo) {
                    rmm[i] = momentum * rmm[i] + gi;
                    rpp[i] -= lr * rmm[i];
                } else
                    rpp[i] -= lr * gi;
            }
            be->sgd(g_ctx, pp, g, mo == 2 ? mm : (mo ? mm : NULL), n, lr, momentum, wd, gs);
            CHECK(close_to(F(pp), rpp, n, 1e-6, 1e-5), "sgd p");
            if (mo) CHECK(close_to(F(mm), rmm, n, 1e-6, 1e-5), "sgd momentum");
            free(rpp);
            free(rmm);
        }
        free(rp); free(rm); free(rv);
        pool_free();
    }
}

/* the SIMD paths of the elementwise kernels (NEON on AArch64: ctx->cpu_simd 0) against their C reference
   (ctx->cpu_simd = 1) in the same process, bit for bit: AdamW, GELU forward / backward, softmax and
   log-softmax rows, logsumexp of the cross-entropy, layernorm forward / backward; sizes with tails (not
   multiples of 4 or 16), edge values (0, -0, +-30, -200, +-inf, NaN). Off AArch64 both runs take the C
   path (the check still runs). */
static void test_simd_paths(void) {
    static const int64_t sizes[] = {1, 7, 16, 35, 1029, 5003};
    int ok[7] = {1, 1, 1, 1, 1, 1, 1};
    for (int s = 0; s < 6; s++) {
        int64_t n = sizes[s], rows = 3, C = n;
        pt_tensor *x = newf1(n), *dy = newf1(n), *y[2], *dx[2], *p[2], *m[2], *v[2], *g = newf1(n);
        pt_tensor *X = newf(2, rows, C, 1, 1), *Y[2], *L[2], *S[2], *LR[2], *LS[2], *MU[2], *RS[2], *DX[2], *DW[2], *DB[2];
        pt_tensor *w = newf1(C), *b = newf1(C), *DY = newf(2, rows, C, 1, 1), *tg = newt(PT_I32, 1, rows, 1, 1, 1);
        rnd(x, -6, 6), rnd(dy, -1, 1), rnd(g, -1, 1), rnd(X, -8, 8), rnd(w, 0.5f, 1.5f), rnd(b, -1, 1), rnd(DY, -1, 1);
        if (n > 6) F(x)[1] = 0.0f, F(x)[2] = -30.0f, F(x)[3] = 30.0f, F(x)[4] = -200.0f, F(x)[5] = -0.0f, F(x)[6] = 1e-4f;
        if (n > 20) F(x)[17] = INFINITY, F(x)[18] = -INFINITY, F(x)[19] = NAN, F(X)[C + 3] = -INFINITY, F(X)[2 * C + 5] = 100.0f;
        for (int r = 0; r < rows; r++) I(tg)[r] = (int32_t)((r * 7) % C);
        for (int k = 0; k < 2; k++) { /* k = 0: the C reference, 1: the SIMD path */
            g_ctx->cpu_simd = k ? 0 : 1;
            y[k] = newf1(n), dx[k] = clone(dy), Y[k] = newf(2, rows, C, 1, 1), L[k] = newf(2, rows, C, 1, 1);
            S[k] = newf(2, rows, C, 1, 1), LR[k] = newf1(rows), LS[k] = newf1(rows), MU[k] = newf1(rows), RS[k] = newf1(rows);
            DX[k] = clone(DY), DW[k] = newf1(C), DB[k] = newf1(C);
            p[k] = clone(g), m[k] = clone(dy), v[k] = clone(dy);
            for (int64_t i = 0; i < n; i++) F(v[k])[i] = F(v[k])[i] * F(v[k])[i];
            memset(F(DW[k]), 0, (size_t)C * 4), memset(F(DB[k]), 0, (size_t)C * 4);
            be->act_fwd(g_ctx, PT__GELU, y[k], x);
            be->act_bwd(g_ctx, PT__GELU, dx[k], x, dy);
            be->softmax_fwd(g_ctx, S[k], X, 0);
            be->softmax_fwd(g_ctx, L[k], X, 1);
            be->xent_fwd(g_ctx, LR[k], LS[k], X, tg, -1, C);
            be->adamw(g_ctx, p[k], g, m[k], v[k], n, 0.01f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.19f, 0.0975f, 0.5f);
            be->layernorm_fwd(g_ctx, Y[k], MU[k], RS[k], X, w, s & 1 ? b : NULL, 1e-5f);
            be->layernorm_bwd(g_ctx, DX[k], DW[k], DB[k], DY, X, w, MU[k], RS[k]);
        }
        g_ctx->cpu_simd = 0;
        ok[0] &= same(y[0], y[1]), ok[1] &= same(dx[0], dx[1]), ok[2] &= same(L[0], L[1]) && same(S[0], S[1]);
        ok[3] &= same(LR[0], LR[1]) && same(LS[0], LS[1]);
        ok[4] &= same(p[0], p[1]) && same(m[0], m[1]) && same(v[0], v[1]);
        ok[5] &= same(Y[0], Y[1]) && same(MU[0], MU[1]) && same(RS[0], RS[1]);
        ok[6] &= same(DX[0], DX[1]) && same(DW[0], DW[1]) && same(DB[0], DB[1]);
        pool_free();
    }
    printf("  elementwise SIMD paths: %s\n", PT__NEON ? "NEON (AArch64)" : "none on this architecture (both runs are C)");
    CHECK(ok[0], "SIMD path = C reference bit for bit: gelu fwd (sizes 1..5003, tails, 0, -0, +-30, -200, +-inf, NaN)");
    CHECK(ok[1], "SIMD path = C reference bit for bit: gelu bwd");
    CHECK(ok[2], "SIMD path = C reference bit for bit: softmax and log-softmax rows");
    CHECK(ok[3], "SIMD path = C reference bit for bit: cross-entropy loss and logsumexp");
    CHECK(ok[4], "SIMD path = C reference bit for bit: adamw p, m, v");
    CHECK(ok[5], "SIMD path = C reference bit for bit: layernorm fwd y, mean, rstd");
    CHECK(ok[6], "SIMD path = C reference bit for bit: layernorm bwd dx, dw, db");
}

int main(int argc, char **argv) {
    pt_desc desc;
    tu_init(argc, argv);
    memset(&desc, 0, sizeof desc);
    desc.threads = 2;
    g_ctx = pt_init(&desc);
    if (!g_ctx) {
        printf("FAIL pt_init returned NULL\n");
        return 1;
    }
    CHECK(g_ctx->be == &pt__cpu_backend && g_ctx->nthreads == 2, "pt_init: cpu backend, 2 threads");
    CHECK(strcmp(be->name, "cpu") == 0, "backend name");
    test_expf();
    test_convert();
    test_storage();
    test_fill_copy();
    test_binary_scale();
    test_axpy_mulacc();
    test_act_dropout();
    test_softmax();
    test_xent();
    test_layernorm();
    test_embed();
    test_permute();
    test_copy_block();
    test_sum();
    test_gemm();
    test_conv();
    test_maxpool();
    test_optim();
    test_simd_paths();
    CHECK(g_ctx->status == PT_OK, "no error recorded");
    pt_shutdown(g_ctx);
    return tu_summary();
}
