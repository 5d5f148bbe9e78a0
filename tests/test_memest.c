/* test_memest.c - the memory estimate (>>memest) against the framework's own accounting.
   Build: mpicc -std=c99 -DPTRAIN_MPI -fopenmp -I. tests/test_memest.c -lm   (or cc without MPI: one rank)
   Run:   mpirun -np DP*TP*PP ./a.out DP TP PP ZERO SCHEDULE M [COMPRESS [LAYERS WIDTH BATCH]]
          (SCHEDULE: gpipe | 1f1b | interleaved; the model: 12 layers of width 64, micro-batches of 64)
          ./a.out --real   (only the one-process checks against the real constructors, below)
          PT_MEMEST_LAYOUT_ONLY=1: a layout run without rank 0's one-process checks
   Every rank trains a GPT for 2 steps on the layout (AdamW; pt_dp over DP with ZERO; pt_pp over PP
   with M micro-batches, else M accumulated passes of one graph), then compares pt_mem_estimate for
   its pipeline rank with what pt_mem measured (params, grads, optim, activations, workspace, their
   total, peak_total) and pt_dp_stats extra_bytes: each within 10%. Rank 0 prints every rank's
   ratios (estimate / measured) and, not gated, the process's resident-memory growth against the
   estimated total; and that every part equals the measurement to the byte (under ZeRO on a rank
   holding the largest shard, the one estimated; elsewhere all but the optimizer state and what
   sums it). SCHEDULE interleaved: 2 virtual stages per pipeline rank.
   Rank 0 also checks, in one process, that the estimate goes through the real constructors and ops
   rather than a model of them: for several configs and stage splits, the estimated parameter bytes
   are the slab of the real model pt_gpt_new_stages builds (pt_param_numel, padding to 16 floats);
   small single-rank runs match the estimate to the byte in every part; the graphs in flight are
   pt_pp_schedule_peak_inflight of the real schedule; and bad plans are refused with a message.
   Prints PASS/FAIL lines and "N passed, N failed"; exits 1 on any failure. */
#define PTRAIN_IMPLEMENTATION
#include "ptrain.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* resident bytes of this process (0 where /proc is missing) */
static double rss_bytes(void) {
    long pages = 0, res = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return 0;
    if (fscanf(f, "%ld %ld", &pages, &res) != 2) res = 0;
    fclose(f);
    return (double)res * (double)sysconf(_SC_PAGESIZE);
}

typedef struct feed {
    const pt_gpt *m;
    const int32_t *ids, *tg;
    int B, T;
} feed;
static pt_tensor *stage_fn(pt_graph *g, int stage, int mb, pt_tensor *x, void *user) {
    feed *f = (feed *)user;
    int64_t shp[2];
    pt_tensor *ids = NULL, *tg = NULL;
    shp[0] = f->B, shp[1] = f->T;
    if (stage == 0) ids = pt_tensor_from(g, PT_I32, 2, shp, f->ids + (size_t)mb * f->B * f->T);
    if (stage == f->m->nstages - 1) tg = pt_tensor_from(g, PT_I32, 2, shp, f->tg + (size_t)mb * f->B * f->T);
    return pt_gpt_stage_fwd(g, f->m, stage, x, ids, tg);
}

enum { K_PARAMS, K_GRADS, K_OPTIM, K_ACT, K_WORK, K_TOTAL, K_PEAK, K_DPX, K_RSS, NK };
static const char *kname[NK] = {"params", "grads", "optim", "activations", "workspace", "total", "peak_total", "dp_extra", "rss(info)"};

/* bad plans: refused with a message naming the value */
static void bad_plans(void) {
    pt_gpt_config c;
    pt_mem_plan p;
    pt_mem_estimate_out o;
    char err[512];
    memset(&c, 0, sizeof c);
    c.vocab = 256, c.max_seq = 64, c.layers = 4, c.width = 64, c.heads = 2;
    memset(&p, 0, sizeof p);
    p.batch = 4, p.seq = 64, p.optim = PT_OPTIM_ADAMW;
    CHECK_WHY(pt_mem_estimate(&c, &p, -1, &o, err, sizeof err) == PT_OK && o.total > 0, "a plain plan is estimated", err);
    p.tp = 4;
    CHECK_WHY(pt_mem_estimate(&c, &p, -1, &o, err, sizeof err) == PT_ERR_ARG && strstr(err, "heads"), "tp not dividing heads is refused", err);
    p.tp = 1, p.precision = 9;
    CHECK_WHY(pt_mem_estimate(&c, &p, -1, &o, err, sizeof err) == PT_ERR_ARG && strstr(err, "precision 9"), "precision 9 (no such type) is refused naming it", err);
    {   /* bf16 stores the blocks' kept activations in 16 bits (act_f32: at f32's bytes); the model state is f32's */
        pt_mem_estimate_out o32, o16, of;
        int ok;
        p.precision = PT_F32;
        ok = pt_mem_estimate(&c, &p, -1, &o32, err, sizeof err) == PT_OK;
        p.precision = PT_BF16;
        ok = ok && pt_mem_estimate(&c, &p, -1, &o16, err, sizeof err) == PT_OK;
        p.act_f32 = 1;
        ok = ok && pt_mem_estimate(&c, &p, -1, &of, err, sizeof err) == PT_OK;
        CHECK_WHY(ok && of.total == o32.total && of.activations == o32.activations, "bf16 precision with act_f32 is estimated at f32's bytes", err);
        CHECK_WHY(ok && o16.params == o32.params && o16.grads == o32.grads && o16.optim == o32.optim && o16.act_pass < 0.7 * o32.act_pass,
                  tu_name("bf16 precision: the model state at f32's bytes, the arena pass smaller (%lld against %lld)", (long long)o16.act_pass,
                          (long long)o32.act_pass), err);
        p.act_f32 = 2;
        CHECK_WHY(pt_mem_estimate(&c, &p, -1, &o, err, sizeof err) == PT_ERR_ARG && strstr(err, "act_f32 2"), "act_f32 2 is refused naming it", err);
        p.act_f32 = 0;
    }
    p.precision = PT_F32, p.recompute = 3;
    CHECK_WHY(pt_mem_estimate(&c, &p, -1, &o, err, sizeof err) == PT_ERR_ARG && strstr(err, "recompute 3"), "recompute 3 (no such mode) is refused naming it", err);
    p.recompute = 0, p.pp = 8;
    CHECK_WHY(pt_mem_estimate(&c, &p, -1, &o, err, sizeof err) == PT_ERR_ARG && strstr(err, "layers"), "more stages than layers is refused", err);
    p.pp = 2, p.schedule = PT_PP_INTERLEAVED, p.micro_batches = 3;
    CHECK_WHY(pt_mem_estimate(&c, &p, -1, &o, err, sizeof err) == PT_ERR_ARG, "interleaved with m % p != 0 is refused", err);
    p.schedule = PT_PP_1F1B, p.micro_batches = 4, p.seq = 65;
    CHECK_WHY(pt_mem_estimate(&c, &p, -1, &o, err, sizeof err) == PT_ERR_ARG && strstr(err, "max_seq"), "seq > max_seq is refused", err);
    p.seq = 64, p.zero = 4;
    CHECK_WHY(pt_mem_estimate(&c, &p, 1, &o, err, sizeof err) == PT_ERR_ARG && strstr(err, "zero 4"), "zero 4 is refused", err);
    p.zero = 3, p.compress = 1;
    CHECK_WHY(pt_mem_estimate(&c, &p, 1, &o, err, sizeof err) == PT_ERR_ARG && strstr(err, "zero 3 with compress"), "zero 3 with compression is refused", err);
    p.compress = 0;
    p.zero = 0;
    CHECK_WHY(pt_mem_estimate(&c, &p, 2, &o, err, sizeof err) == PT_ERR_ARG && strstr(err, "pp_rank"), "pp_rank outside is refused", err);
    /* what ZeRO saves: the optimizer state shrinks with dp, stage 2 the gradients too (a shard and bucket buffers) */
    {
        pt_mem_estimate_out z0, z1, z2, z3;
        p.pp = 1, p.dp = 4, p.micro_batches = 1, p.bucket_bytes = 64 << 10;
        pt_mem_estimate(&c, &p, 0, &z0, err, sizeof err);
        p.zero = 1;
        pt_mem_estimate(&c, &p, 0, &z1, err, sizeof err);
        p.zero = 2;
        pt_mem_estimate(&c, &p, 0, &z2, err, sizeof err);
        p.zero = 3;
        pt_mem_estimate(&c, &p, 0, &z3, err, sizeof err);
        snprintf(err, sizeof err, "optim %lld / %lld / %lld, grads %lld / %lld / %lld, dp_extra %lld / %lld / %lld", (long long)z0.optim,
                 (long long)z1.optim, (long long)z2.optim, (long long)z0.grads, (long long)z1.grads, (long long)z2.grads, (long long)z0.dp_extra,
                 (long long)z1.dp_extra, (long long)z2.dp_extra);
        CHECK_WHY(z1.optim * 4 >= z0.optim && z1.optim * 4 < z0.optim + 4 * 64 * 8 && z2.optim == z1.optim && z1.grads == z0.grads &&
                      z2.grads < z1.grads && z2.grads >= z1.grads / p.dp && z2.dp_extra == z1.dp_extra,
                  "ZeRO-1/2 divide the moments by dp, ZeRO-2 holds only the gradient shard and bucket buffers (in grads)", err);
        snprintf(err, sizeof err, "params %lld / %lld (gathered at most %lld), slab %lld floats, grads %lld / %lld, optim %lld / %lld", (long long)z2.params,
                 (long long)z3.params, (long long)z3.params_gathered, (long long)z3.slab_floats, (long long)z2.grads, (long long)z3.grads,
                 (long long)z2.optim, (long long)z3.optim);
        CHECK_WHY(z3.params * p.dp <= z2.params + 4 * 16 * p.dp && z3.params * p.dp >= z2.params && z3.params_gathered > z3.params &&
                      z3.params_gathered < z2.params && z3.grads == z2.grads && z3.optim == z2.optim && z2.params_gathered == z2.params,
                  "ZeRO-3 holds the parameter shard between steps (params = slab/dp) and less than the slab while in use (params_gathered)", err);
    }
}

/* the stages pipeline rank r holds of nst over p ranks (r, r + p, ...) into mine; returns how many */
static int stages_of(int r, int p, int nst, int32_t *mine) {
    int n = 0, s;
    for (s = r; s < nst; s += p) mine[n++] = s;
    return n;
}

/* the estimated parameters are the real model's: pt_gpt_new_stages on the CPU (one process, no
   grid) for each pipeline rank's stages, its slab and pt_param_numel against the estimate */
static void real_params(void) {
    static const struct { int vocab, vpad, layers, width, heads, max_seq, untied, pp, v, uneven; } cs[] = {
        {256, 0, 4, 64, 2, 64, 0, 1, 1, 0},   {1000, 0, 3, 48, 3, 40, 0, 1, 1, 0}, {50257, 0, 2, 32, 4, 128, 1, 1, 1, 0},
        {300, 512, 6, 64, 4, 32, 0, 2, 1, 0}, {300, 0, 6, 64, 4, 32, 1, 3, 1, 0},   {777, 0, 8, 32, 2, 16, 0, 2, 2, 0},
        {512, 0, 5, 80, 5, 24, 0, 2, 1, 1}};
    int k;
    for (k = 0; k < (int)(sizeof cs / sizeof cs[0]); k++) {
        pt_gpt_config c;
        pt_mem_plan p;
        int32_t first[9], mine[8];
        int r, nst = cs[k].pp * cs[k].v, ok = 1;
        int64_t numel = 0, count = 0;
        char why[1100] = "", name[256];
        memset(&c, 0, sizeof c);
        c.vocab = cs[k].vocab, c.vocab_padded = cs[k].vpad, c.layers = cs[k].layers, c.width = cs[k].width, c.heads = cs[k].heads;
        c.max_seq = cs[k].max_seq, c.untied = cs[k].untied;
        memset(&p, 0, sizeof p);
        p.pp = cs[k].pp, p.virtual_stages = cs[k].v, p.micro_batches = cs[k].pp, p.batch = 2, p.seq = c.max_seq < 16 ? c.max_seq : 16;
        p.schedule = cs[k].v > 1 ? PT_PP_INTERLEAVED : PT_PP_1F1B, p.optim = PT_OPTIM_ADAMW;
        if (cs[k].uneven) first[0] = 0, first[1] = 3, first[2] = 5, p.first = first; /* 5 layers: 3 + 2 */
        else pt_pp_split(c.layers, nst, NULL, 0, 0, first, why, sizeof why);
        for (r = 0; r < p.pp && ok; r++) {
            pt_mem_estimate_out o;
            pt_desc desc;
            pt_ctx *ctx;
            pt_gpt *m;
            pt_optim_desc od;
            pt_optim *opt;
            pt_tensor slab;
            memset(&desc, 0, sizeof desc);
            desc.threads = 1, desc.seed = 1;
            ctx = pt_init(&desc);
            m = pt_gpt_new_stages(ctx, &c, nst, first, stages_of(r, p.pp, nst, mine), mine);
            memset(&od, 0, sizeof od);
            od.kind = PT_OPTIM_ADAMW;
            opt = m ? pt_optim_new(ctx, &od) : NULL;
            slab = pt_param_slab(ctx);
            if (pt_mem_estimate(&c, &p, r, &o, why, sizeof why) != PT_OK || !m || pt_status_get(ctx) != PT_OK) {
                if (!why[0]) snprintf(why, sizeof why, "%s", pt_error(ctx));
                ok = 0;
            } else if (o.params != 4 * pt_numel(&slab) || o.grads != o.params || o.slab_floats != pt_numel(&slab) ||
                       o.optim != pt_optim_state_bytes(opt) || pt_mem(ctx).optim != 0 || o.params < 4 * pt_param_numel(ctx) ||
                       o.params >= 4 * (pt_param_numel(ctx) + 16 * (int64_t)pt_param_count(ctx))) {
                snprintf(why, sizeof why, "pp rank %d: estimate params %lld, optim %lld, slab %lld floats; real slab %lld floats, optim %lld "
                         "(made at the first step: pt_mem optim %lld before it), pt_param_numel %lld in %d tensors", r, (long long)o.params,
                         (long long)o.optim, (long long)o.slab_floats, (long long)pt_numel(&slab), (long long)pt_optim_state_bytes(opt),
                         (long long)pt_mem(ctx).optim, (long long)pt_param_numel(ctx), pt_param_count(ctx));
                ok = 0;
            }
            numel += pt_param_numel(ctx), count += pt_param_count(ctx);
            pt_gpt_free(m);
            pt_shutdown(ctx);
        }
        snprintf(name, sizeof name, "vocab %d%s%s, %d layers, width %d, pp %d x v %d%s: estimated parameters = the real slab on every "
                 "pipeline rank (%lld elements in %lld tensors)", c.vocab, cs[k].vpad ? " (padded)" : "", c.untied ? " untied" : "", c.layers,
                 c.width, p.pp, p.virtual_stages, cs[k].uneven ? ", split 3+2" : "", (long long)numel, (long long)count);
        CHECK_WHY(ok, name, why);
    }
}

/* small single-rank runs on the CPU against the estimate, every part to the byte; the last two: a
   50257-word vocabulary on 512 rows (logits 103 MB) without and with the head and loss fused in
   chunks of 64 rows (loss_chunk), whose estimate has no [rows, V] logits in the pass */
static void real_runs(void) {
    static const struct { int vocab, layers, width, heads, seq, batch, untied, sgd; float dropout; int chunk, rc, prec; } cs[] = {
        {300, 2, 32, 2, 16, 4, 0, 1, 0.0f, 0, 0, 0},     {1000, 3, 48, 3, 24, 3, 1, 0, 0.1f, 0, 0, 0},   {300, 3, 64, 2, 64, 16, 0, 0, 0.1f, 0, 1, 0},
        {300, 3, 64, 2, 64, 16, 0, 0, 0.1f, 0, 2, 0},    {50257, 1, 64, 4, 32, 2, 0, 0, 0.0f, 0, 0, 0},
        {300, 3, 64, 2, 64, 16, 0, 0, 0.1f, 0, 0, PT_BF16}, {300, 3, 64, 2, 64, 16, 0, 0, 0.1f, 0, 1, PT_BF16},
        {1000, 3, 48, 3, 24, 3, 1, 0, 0.1f, 0, 0, PT_F16},
        {50257, 1, 64, 4, 128, 4, 0, 0, 0.0f, 0, 0, 0}, {50257, 1, 64, 4, 128, 4, 0, 0, 0.0f, 64, 0, 0}};
    pt_mem_estimate_out last[2];
    int k, pass;
    for (k = 0; k < (int)(sizeof cs / sizeof cs[0]); k++) {
        pt_gpt_config c;
        pt_mem_plan p;
        pt_mem_estimate_out o;
        pt_desc desc;
        pt_optim_desc od;
        pt_optim *opt;
        pt_ctx *ctx;
        pt_gpt *m;
        pt_graph *g;
        pt_mem_stats ms;
        char why[1100] = "", name[256];
        memset(&c, 0, sizeof c);
        c.vocab = cs[k].vocab, c.layers = cs[k].layers, c.width = cs[k].width, c.heads = cs[k].heads, c.max_seq = cs[k].seq;
        c.untied = cs[k].untied, c.dropout = cs[k].dropout, c.loss_chunk = cs[k].chunk, c.recompute = cs[k].rc;
        memset(&p, 0, sizeof p);
        memset(&o, 0, sizeof o);
        p.batch = cs[k].batch, p.seq = cs[k].seq, p.optim = cs[k].sgd ? PT_OPTIM_SGD : PT_OPTIM_ADAMW, p.threads = 1, p.precision = cs[k].prec;
        memset(&desc, 0, sizeof desc);
        desc.threads = 1, desc.seed = 1, desc.precision = cs[k].prec;
        ctx = pt_init(&desc);
        m = pt_gpt_new(ctx, &c);
        memset(&od, 0, sizeof od);
        od.kind = p.optim, od.momentum = 0.9f; /* SGD with momentum, as the estimate plans it */
        opt = m ? pt_optim_new(ctx, &od) : NULL;
        g = pt_graph_new(ctx);
        for (pass = 0; pass < 2 && pt_status_get(ctx) == PT_OK; pass++) { /* ids and targets 0 .. vocab-1; a step each */
            int32_t *ids = (int32_t *)calloc((size_t)p.batch * p.seq, sizeof(int32_t));
            pt_tensor *x, *y;
            int i;
            for (i = 0; ids && i < p.batch * p.seq; i++) ids[i] = (int32_t)((i * 7 + pass) % c.vocab);
            pt_graph_reset(g);
            x = pt_tensor_new(g, PT_I32, 2, p.batch, p.seq, 0, 0), y = pt_tensor_new(g, PT_I32, 2, p.batch, p.seq, 0, 0);
            if (ids) pt_tensor_write(x, ids), pt_tensor_write(y, ids);
            pt_backward(g, pt_gpt_loss(g, m, x, y));
            if (opt) pt_optim_step(opt, 1e-3f); /* the first makes the moments */
            free(ids);
        }
        ms = pt_mem(ctx);
        if (pt_status_get(ctx) != PT_OK) snprintf(why, sizeof why, "%s", pt_error(ctx));
        else if (pt_mem_estimate(&c, &p, 0, &o, why, sizeof why) == PT_OK &&
                 (o.params != ms.params || o.grads != ms.grads || o.optim != ms.optim || o.activations != ms.activations ||
                  o.workspace != ms.workspace || o.peak_total != ms.peak_total || o.act_per_mb != pt_graph_bytes(g) || o.in_flight != 1))
            snprintf(why, sizeof why, "estimate / measured: params %lld / %lld, grads %lld / %lld, optim %lld / %lld, activations %lld / %lld "
                     "(graph %lld / %lld), workspace %lld / %lld, peak %lld / %lld", (long long)o.params, (long long)ms.params,
                     (long long)o.grads, (long long)ms.grads, (long long)o.optim, (long long)ms.optim, (long long)o.activations,
                     (long long)ms.activations, (long long)o.act_per_mb, (long long)pt_graph_bytes(g), (long long)o.workspace,
                     (long long)ms.workspace, (long long)o.peak_total, (long long)ms.peak_total);
        snprintf(name, sizeof name, "vocab %d, %d layer%s, width %d, %d x %d tokens%s%s%s%s%s%s: the estimate equals pt_mem of a real run in every part",
                 c.vocab, c.layers, c.layers == 1 ? "" : "s", c.width, p.batch, p.seq, cs[k].prec ? (cs[k].prec == PT_BF16 ? ", bf16" : ", fp16") : "",
                 c.untied ? ", untied" : "", c.dropout > 0 ? ", dropout" : "", cs[k].sgd ? ", SGD" : "",
                 c.loss_chunk ? tu_name(", loss_chunk %d", c.loss_chunk) : "", c.recompute ? (c.recompute == 1 ? ", recompute selective" : ", recompute full") : "");
        CHECK_WHY(!why[0], name, why);
        if (k >= (int)(sizeof cs / sizeof cs[0]) - 2) last[k - ((int)(sizeof cs / sizeof cs[0]) - 2)] = o;
        pt_gpt_free(m);
        pt_shutdown(ctx);
    }
    { /* the fused head: the pass holds no logits (50304 padded columns x 512 rows of f32); the chunk is a pool block */
        int64_t logits = 512LL * 50304 * 4, blk = 64LL * 50304 * 4;
        char why[300];
        snprintf(why, sizeof why, "pass bytes %lld -> %lld (logits %lld), activations %lld -> %lld, pooled gradient blocks %lld -> %lld",
                 (long long)last[0].act_pass, (long long)last[1].act_pass, (long long)logits, (long long)last[0].activations,
                 (long long)last[1].activations, (long long)last[0].act_grad_blocks, (long long)last[1].act_grad_blocks);
        CHECK_WHY(last[0].act_pass - last[1].act_pass == logits && last[1].activations < logits && last[1].act_grad_blocks >= blk,
                  "loss_chunk 64: the estimate's pass has no [512, 50304] logits, its activations are below their size", why);
    }
}

/* the graphs in flight are the real schedule's: pt_pp_schedule_peak_inflight on every pipeline rank */
static void inflight(void) {
    static const int kinds[3] = {PT_PP_GPIPE, PT_PP_1F1B, PT_PP_INTERLEAVED};
    int k, p, r;
    for (k = 0; k < 3; k++) {
        char why[512] = "", name[128];
        for (p = 2; p <= 4 && !why[0]; p++) {
            pt_gpt_config c;
            pt_mem_plan pl;
            pt_pp_schedule *sc;
            memset(&c, 0, sizeof c);
            c.vocab = 64, c.max_seq = 8, c.layers = 8, c.width = 16, c.heads = 2;
            memset(&pl, 0, sizeof pl);
            pl.pp = p, pl.micro_batches = 2 * p, pl.schedule = kinds[k], pl.batch = 1, pl.seq = 8, pl.optim = PT_OPTIM_SGD;
            pl.virtual_stages = kinds[k] == PT_PP_INTERLEAVED ? 2 : 1;
            sc = pt_pp_schedule_new(kinds[k], p, pl.micro_batches, pl.virtual_stages, why, sizeof why);
            for (r = 0; sc && r < p && !why[0]; r++) {
                pt_mem_estimate_out o;
                if (pt_mem_estimate(&c, &pl, r, &o, why, sizeof why) == PT_OK && o.in_flight != pt_pp_schedule_peak_inflight(sc, r))
                    snprintf(why, sizeof why, "p %d, rank %d: %d graphs, the schedule keeps %d", p, r, o.in_flight, pt_pp_schedule_peak_inflight(sc, r));
            }
            pt_pp_schedule_free(sc);
        }
        snprintf(name, sizeof name, "%s, p 2..4, m 2p: graphs in flight = pt_pp_schedule_peak_inflight on every rank",
                 k == 0 ? "GPipe" : k == 1 ? "1F1B" : "interleaved");
        CHECK_WHY(!why[0], name, why);
    }
}

/* every kind of layout is estimated: dp, tp, pp 1 and 2, ZeRO 0..2, bf16, the three schedules */
static void layouts(void) {
    pt_gpt_config c;
    pt_mem_plan p;
    pt_mem_estimate_out o;
    char why[1100] = "";
    int n = 0, k;
    memset(&c, 0, sizeof c);
    c.vocab = 200, c.max_seq = 16, c.layers = 4, c.width = 32, c.heads = 2;
    for (k = 0; k < 2 * 2 * 2 * 3 * 2 * 3 && !why[0]; k++) {
        memset(&p, 0, sizeof p);
        p.dp = 1 + k % 2, p.tp = 1 + k / 2 % 2, p.pp = 1 + k / 4 % 2, p.zero = k / 8 % 3, p.compress = k / 24 % 2;
        p.schedule = k / 48 == 0 ? PT_PP_GPIPE : k / 48 == 1 ? PT_PP_1F1B : PT_PP_INTERLEAVED;
        p.micro_batches = 2, p.batch = 2, p.seq = 16, p.optim = PT_OPTIM_ADAMW, p.bucket_bytes = 4096, p.threads = 2;
        if (pt_mem_estimate(&c, &p, -1, &o, why, sizeof why) != PT_OK) break;
        if (o.total <= 0 || o.peak_total < o.total || o.in_flight < 1 || (p.dp > 1 && p.compress && o.dp_extra <= 0))
            snprintf(why, sizeof why, "layout %d: total %lld, peak %lld, in flight %d, dp_extra %lld", k, (long long)o.total, (long long)o.peak_total,
                     o.in_flight, (long long)o.dp_extra);
        n++;
    }
    snprintf(why + strlen(why), sizeof why - strlen(why), " (%d estimated)", n);
    CHECK_WHY(n == k && n == 144, "144 layouts (dp, tp, pp 1|2, ZeRO 0..2, bf16, 3 schedules) are estimated", why);
}

/* the Korthikanti et al. 2022 rows of pt_mem_layer against the paper's formulas, computed here by
   hand for 12 layers of width h 768, a 12 heads, s 1024 tokens, b 1: sbh = 786432, as^2b = 12582912,
   5as/h = 80, t = 2 (16-bit: 2 bytes an element, 1 a mask; at 4-byte elements 66 sbh + 9 as^2b
   without parallelism, by group: layernorm 2 x 4 = 8 sbh, attention 5 x 4 + 1 = 21 sbh, scores
   (2 x 4 + 1) as^2b, MLP 9 x 4 + 1 = 37 sbh) */
static void layer_formulas(void) {
    static const struct { int tp, sp, rc; double sbh; const char *formula; } rows[] = {
        {1, 0, PT_RECOMPUTE_NONE, 34 + 80, "sbh(34 + 5as/h)"},            {2, 0, PT_RECOMPUTE_NONE, 10 + 24 / 2 + 80 / 2, "sbh(10 + 24/t + 5as/(ht))"},
        {2, 1, PT_RECOMPUTE_NONE, 34 / 2. + 80 / 2, "sbh(34/t + 5as/(ht))"}, {2, 0, PT_RECOMPUTE_SELECTIVE, 10 + 24 / 2, "sbh(10 + 24/t)"},
        {2, 1, PT_RECOMPUTE_SELECTIVE, 34 / 2., "sbh(34/t)"},              {1, 0, PT_RECOMPUTE_SELECTIVE, 34, "sbh(34)"},
        {2, 1, PT_RECOMPUTE_FULL, 2, "sbh(2)"}};
    const double sbh = 1024.0 * 768, as2b = 12.0 * 1024 * 1024;
    pt_gpt_config c;
    pt_mem_plan p;
    pt_mem_layer_out o;
    char why[1100] = "";
    int k;
    memset(&c, 0, sizeof c);
    c.vocab = 256, c.max_seq = 1024, c.layers = 12, c.width = 768, c.heads = 12;
    memset(&p, 0, sizeof p);
    p.batch = 1, p.seq = 1024, p.optim = PT_OPTIM_ADAMW;
    for (k = 0; k < (int)(sizeof rows / sizeof rows[0]) && !why[0]; k++) {
        p.tp = rows[k].tp, p.recompute = rows[k].rc, c.seq_parallel = rows[k].sp;
        if (pt_mem_layer(&c, &p, &o, why, sizeof why) == PT_OK && (o.paper_total != rows[k].sbh * sbh || strcmp(o.formula, rows[k].formula)))
            snprintf(why, sizeof why, "tp %d, sp %d, recompute %d: %s = %.0f bytes, by hand %s = %.0f", rows[k].tp, rows[k].sp, rows[k].rc, o.formula,
                     o.paper_total, rows[k].formula, rows[k].sbh * sbh);
    }
    CHECK_WHY(!why[0], "12 x 768, 12 heads, 1 x 1024 tokens: the paper's bytes per layer for none, TP, TP+SP, selective, full (t = 2) = the formulas by hand", why);
    p.tp = 1, p.recompute = 0, c.seq_parallel = 0;
    if (pt_mem_layer(&c, &p, &o, why, sizeof why) == PT_OK &&
        (o.elem_bytes != 4 || o.at_elem[PT_KG_LAYERNORM] != 8 * sbh || o.at_elem[PT_KG_ATTENTION] != 21 * sbh || o.at_elem[PT_KG_SCORES] != 9 * as2b ||
         o.at_elem[PT_KG_MLP] != 37 * sbh || o.at_elem[PT_KG_INPUT] != 0 || o.at_elem_total != 66 * sbh + 9 * as2b))
        snprintf(why, sizeof why, "%d-byte elements: layernorm %.0f, attention %.0f, scores %.0f, mlp %.0f, input %.0f, total %.0f", o.elem_bytes,
                 o.at_elem[PT_KG_LAYERNORM], o.at_elem[PT_KG_ATTENTION], o.at_elem[PT_KG_SCORES], o.at_elem[PT_KG_MLP], o.at_elem[PT_KG_INPUT],
                 o.at_elem_total);
    CHECK_WHY(!why[0], "the same layer at ptrain's 4-byte elements, by op group: 8 sbh, 21 sbh, 9 as^2b, 37 sbh (66 sbh + 9 as^2b)", why);
    p.tp = 5;
    CHECK_WHY(pt_mem_layer(&c, &p, &o, why, sizeof why) == PT_ERR_ARG && strstr(why, "heads"), "pt_mem_layer refuses tp 5 for 12 heads", why);
}

/* a GPT of config c (on grid d; NULL: one process) trained 2 passes of bt[0] x bt[1] tokens, ids as
   the targets too: its last pass's arena (pt_graph_pass_bytes) and pt_mem activations; 0, or 1 with
   the error in why */
static int two_passes(pt_dist *d, const pt_gpt_config *c, int prec, const int64_t *bt, const int32_t *ids, int64_t *pass, int64_t *act, char *why,
                      size_t n) {
    pt_desc desc;
    pt_optim_desc od;
    pt_ctx *ctx;
    pt_gpt *m;
    pt_graph *g;
    int k;
    memset(&desc, 0, sizeof desc);
    desc.dist = d, desc.threads = 1, desc.seed = 1, desc.precision = prec;
    if (!(ctx = pt_init(&desc))) return snprintf(why, n, "pt_init failed"), 1;
    m = pt_gpt_new(ctx, c);
    memset(&od, 0, sizeof od);
    od.kind = PT_OPTIM_ADAMW;
    if (m) pt_optim_new(ctx, &od);
    g = pt_graph_new(ctx);
    for (k = 0; k < 2 && pt_status_get(ctx) == PT_OK; k++) {
        pt_graph_reset(g);
        pt_backward(g, pt_gpt_loss(g, m, pt_tensor_from(g, PT_I32, 2, bt, ids), pt_tensor_from(g, PT_I32, 2, bt, ids)));
    }
    *pass = pt_graph_pass_bytes(g), *act = pt_mem(ctx).activations;
    k = pt_status_get(ctx) != PT_OK;
    if (k) snprintf(why, n, "%d layers: %s", c->layers, pt_error(ctx));
    pt_gpt_free(m);
    pt_shutdown(ctx);
    return k;
}

/* ptrain's bytes per layer (pt_mem_layer) = what real runs with one layer more hold: the pass's arena
   (pt_graph_pass_bytes) and pt_mem activations, 64 x 64 tokens of width 64, 2 passes each; the
   activations differ by a layer only where both passes are above the 64 MiB chunk (not under full,
   nor with bf16's 16-bit activations) */
static void layer_real(void) {
    static const struct { int layers, rc; float dropout; int prec; } cs[] = {
        {4, PT_RECOMPUTE_NONE, 0.0f, 0},          {4, PT_RECOMPUTE_NONE, 0.1f, 0},          {6, PT_RECOMPUTE_SELECTIVE, 0.1f, 0},
        {4, PT_RECOMPUTE_FULL, 0.0f, 0},          {4, PT_RECOMPUTE_NONE, 0.1f, PT_BF16}, {6, PT_RECOMPUTE_SELECTIVE, 0.1f, PT_BF16}};
    static int32_t zeros[64 * 64]; /* ids and targets 0 */
    const int64_t bt[2] = {64, 64};
    int k, j;
    for (k = 0; k < (int)(sizeof cs / sizeof cs[0]); k++) {
        pt_gpt_config c;
        pt_mem_plan p;
        pt_mem_layer_out o;
        int64_t pb[2] = {0, 0}, act[2] = {0, 0};
        char why[1100] = "", name[256];
        memset(&c, 0, sizeof c);
        c.vocab = 256, c.max_seq = 64, c.width = 64, c.heads = 2, c.dropout = cs[k].dropout, c.recompute = cs[k].rc;
        memset(&p, 0, sizeof p);
        p.batch = (int32_t)bt[0], p.seq = (int32_t)bt[1], p.optim = PT_OPTIM_ADAMW, p.threads = 1, p.precision = cs[k].prec;
        for (j = 0; j < 2 && !why[0]; j++) /* cs[k].layers, then one more */
            c.layers = cs[k].layers + j, two_passes(NULL, &c, cs[k].prec, bt, zeros, &pb[j], &act[j], why, sizeof why);
        c.layers = cs[k].layers;
        if (!why[0] && pt_mem_layer(&c, &p, &o, why, sizeof why) == PT_OK &&
            (o.ptrain != pb[1] - pb[0] || o.ptrain_act != act[1] - act[0] || (pb[0] > (64 << 20) && o.ptrain_act != o.ptrain) || o.ptrain <= 0))
            snprintf(why, sizeof why, "per layer estimated / measured: pass %lld / %lld, activations %lld / %lld (passes %lld, %lld)", (long long)o.ptrain,
                     (long long)(pb[1] - pb[0]), (long long)o.ptrain_act, (long long)(act[1] - act[0]), (long long)pb[0], (long long)pb[1]);
        snprintf(name, sizeof name, "%d -> %d layers of width 64, 64 x 64 tokens, recompute %s%s%s: ptrain's bytes per layer = the real runs' difference (pass%s)",
                 cs[k].layers, cs[k].layers + 1, cs[k].rc == 0 ? "none" : cs[k].rc == 1 ? "selective" : "full", cs[k].dropout > 0 ? ", dropout" : "",
                 cs[k].prec ? ", bf16" : "",
                 pb[0] <= (64 << 20) ? "; activations within the chunk: 0" : " and pt_mem activations");
        CHECK_WHY(!why[0], name, why);
    }
}

/* tp > 1 (dp 1, pp 1, one micro-batch): ptrain's bytes per layer (pt_mem_layer) = what a real run
   with one layer more on the same grid holds more than the one trained (its last pass pass0 and
   pt_mem activations act0), every TP rank; a collective check */
static void layer_tp(pt_dist *d, const pt_gpt_config *cfg, const pt_mem_plan *plan, int64_t pass0, int64_t act0, const int32_t *ids) {
    pt_gpt_config c = *cfg;
    pt_mem_layer_out o;
    int64_t pass1 = 0, act1 = 0, bt[2];
    char why[1100] = "", name[256];
    bt[0] = plan->batch, bt[1] = plan->seq;
    c.layers++;
    two_passes(d, &c, plan->precision, bt, ids, &pass1, &act1, why, sizeof why);
    if (!why[0] && pt_mem_layer(cfg, plan, &o, why, sizeof why) == PT_OK && (o.ptrain != pass1 - pass0 || o.ptrain_act != act1 - act0 || o.ptrain <= 0))
        snprintf(why, sizeof why, "per layer estimated / measured: pass %lld / %lld, activations %lld / %lld", (long long)o.ptrain,
                 (long long)(pass1 - pass0), (long long)o.ptrain_act, (long long)(act1 - act0));
    snprintf(name, sizeof name, "tp %d%s%s, %d -> %d layers: ptrain's bytes per layer = the real runs' difference (pass and pt_mem activations)",
             plan->tp, cfg->seq_parallel ? ", sequence parallel" : "", cfg->recompute ? ", recompute" : "", cfg->layers, c.layers);
    CHECK_WHY(!why[0], name, why);
}

/* the checks of one process: bad plans, the real constructors, every kind of layout, one layer */
static void one_process(void) {
    bad_plans();
    real_params();
    real_runs();
    inflight();
    layouts();
    layer_formulas();
    layer_real();
}

int main(int argc, char **argv) {
    pt_layout lay;
    pt_dist *d;
    pt_ctx *ctx = NULL;
    pt_desc desc;
    pt_gpt_config cfg;
    pt_mem_plan plan;
    pt_mem_estimate_out est;
    pt_gpt *m = NULL;
    pt_optim *opt = NULL;
    pt_dp *dp = NULL;
    pt_pp *pp = NULL;
    pt_graph *g = NULL;
    feed f;
    char err[1024] = "", name[256];
    int zero, kind, M, compress, rank, world, s, nst, v, step, mb, B, T = 64, nmine, layers, width;
    int32_t first[9], mine[8];
    int32_t *ids, *tg;
    double rss0, meas[NK], ratio[NK], *all = NULL;
    pt_coords me;
    pt_rng rng = pt_rng_seed(7);
    if (argc > 1 && !strcmp(argv[1], "--real")) { /* only the one-process checks against the real constructors */
        one_process();
        return tu_summary();
    }
    memset(&lay, 0, sizeof lay);
    lay.dp = argc > 1 ? atoi(argv[1]) : 1, lay.tp = argc > 2 ? atoi(argv[2]) : 1, lay.pp = argc > 3 ? atoi(argv[3]) : 1;
    zero = argc > 4 ? atoi(argv[4]) : 0;
    kind = argc > 5 && !strcmp(argv[5], "gpipe") ? PT_PP_GPIPE : argc > 5 && !strcmp(argv[5], "interleaved") ? PT_PP_INTERLEAVED : PT_PP_1F1B;
    v = kind == PT_PP_INTERLEAVED ? 2 : 1;
    M = argc > 6 ? atoi(argv[6]) : 1;
    compress = argc > 7 ? atoi(argv[7]) : 0;
    layers = argc > 8 ? atoi(argv[8]) : 12, width = argc > 9 ? atoi(argv[9]) : 64, B = argc > 10 ? atoi(argv[10]) : 64;
    d = pt_dist_init(&argc, &argv, &lay, err, sizeof err);
    if (!d) {
        printf("FAIL pt_dist_init: %s\n0 passed, 1 failed\n", err);
        return 1;
    }
    rank = pt_dist_rank(d), world = pt_dist_size(d), me = pt_dist_coords(d);
    tu_mpi_init(NULL);
    bad_plans(); /* agreed over the ranks */
    tu_solo(1);  /* the rest of the one-process checks: rank 0 alone; PT_MEMEST_LAYOUT_ONLY=1 skips them (run once elsewhere) */
    if (rank == 0 && !getenv("PT_MEMEST_LAYOUT_ONLY")) real_params(), real_runs(), inflight(), layouts(), layer_formulas(), layer_real();
    tu_solo(0);
    /* by default a long, narrow model: activations above the 64 MiB arena chunk on every stage of pp 2 */
    memset(&cfg, 0, sizeof cfg);
    cfg.vocab = 256, cfg.max_seq = T, cfg.layers = layers, cfg.width = width, cfg.heads = 2;
    cfg.recompute = argc > 11 ? atoi(argv[11]) : 0, cfg.seq_parallel = argc > 12 ? atoi(argv[12]) : 0;
    memset(&plan, 0, sizeof plan);
    plan.dp = lay.dp, plan.tp = lay.tp, plan.pp = lay.pp, plan.zero = zero, plan.micro_batches = M, plan.batch = B, plan.seq = T;
    plan.schedule = kind, plan.virtual_stages = v, plan.optim = PT_OPTIM_ADAMW, plan.compress = compress, plan.threads = 1;
    plan.bucket_bytes = zero >= 2 ? 128 << 10 : 1 << 20; /* ZeRO-2/3: several buckets, so bucket buffers (and gathers) are less than the slab */
    ids = (int32_t *)malloc(sizeof(int32_t) * (size_t)M * B * T);
    tg = (int32_t *)malloc(sizeof(int32_t) * (size_t)M * B * T);
    for (s = 0; s < M * B * T; s++) ids[s] = (int32_t)(pt_rng_u32(&rng) % 256), tg[s] = (int32_t)(pt_rng_u32(&rng) % 256);
    rss0 = rss_bytes();
    memset(&desc, 0, sizeof desc);
    desc.dist = d, desc.threads = 1, desc.seed = 1;
    ctx = pt_init(&desc);
    nst = lay.pp * v;
    if (ctx && pt_pp_split(cfg.layers, nst, NULL, 0, 0, first, err, sizeof err) == PT_OK) {
        pt_optim_desc od;
        nmine = stages_of(me.pp, lay.pp, nst, mine);
        m = pt_gpt_new_stages(ctx, &cfg, nst, first, nmine, mine);
        memset(&od, 0, sizeof od);
        od.kind = PT_OPTIM_ADAMW, od.lr = 1e-3f, od.weight_decay = 0.1f;
        if (m) opt = pt_optim_new(ctx, &od);
        if (opt && lay.dp > 1) {
            pt_dp_options o;
            memset(&o, 0, sizeof o);
            o.bucket_bytes = plan.bucket_bytes, o.compress = compress;
            if ((dp = pt_dp_new_opts(ctx, d, &o)) != NULL && zero) pt_dp_zero(dp, opt, zero);
        }
        f.m = m, f.ids = ids, f.tg = tg, f.B = B, f.T = T;
        if (opt && lay.pp > 1) {
            pt_pp_desc pd;
            memset(&pd, 0, sizeof pd);
            pd.kind = kind, pd.micro_batches = M, pd.virtual_stages = v, pd.forward = stage_fn, pd.user = &f;
            if ((pp = pt_pp_new(ctx, &pd)) != NULL) pt_pp_set_dp(pp, dp);
        } else if (opt) {
            g = pt_graph_new(ctx);
        }
        for (step = 0; step < 2 && pt_status_get(ctx) == PT_OK; step++) {
            pt_zero_grad(ctx);
            if (pp) {
                pt_pp_step(pp, 0, 1);
            } else {
                if (dp) pt_dp_begin_step(dp, M);
                for (mb = 0; mb < M; mb++) {
                    pt_tensor *x, *y;
                    pt_graph_reset(g);
                    x = pt_tensor_new(g, PT_I32, 2, B, T, 0, 0), y = pt_tensor_new(g, PT_I32, 2, B, T, 0, 0);
                    pt_tensor_write(x, ids + (size_t)mb * B * T), pt_tensor_write(y, tg + (size_t)mb * B * T);
                    pt_backward(g, pt_gpt_loss(g, m, x, y));
                }
                if (dp) pt_dp_finish(dp);
            }
            pt_optim_step(opt, 1e-3f);
        }
    }
    if (!ctx) snprintf(err, sizeof err, "pt_init failed");
    else if (pt_status_get(ctx) != PT_OK) snprintf(err, sizeof err, "%s", pt_error(ctx));
    if (!err[0] && pt_mem_estimate(&cfg, &plan, me.pp, &est, err, sizeof err) != PT_OK && !err[0]) snprintf(err, sizeof err, "estimate failed");
    if (CHECK_WHY(!err[0], "every rank trains 2 steps and has its estimate", err)) {
        pt_mem_stats ms = pt_mem(ctx);
        double e[NK];
        int k, r;
        meas[K_PARAMS] = (double)ms.params, meas[K_GRADS] = (double)ms.grads, meas[K_OPTIM] = (double)ms.optim;
        meas[K_ACT] = (double)ms.activations, meas[K_WORK] = (double)ms.workspace;
        meas[K_TOTAL] = (double)(ms.params + ms.grads + ms.optim + ms.activations + ms.workspace);
        meas[K_PEAK] = (double)ms.peak_total, meas[K_DPX] = dp ? (double)pt_dp_stats_get(dp).extra_bytes : 0;
        meas[K_RSS] = rss_bytes() - rss0;
        e[K_PARAMS] = (double)est.params, e[K_GRADS] = (double)est.grads, e[K_OPTIM] = (double)est.optim;
        e[K_ACT] = (double)est.activations, e[K_WORK] = (double)est.workspace, e[K_TOTAL] = (double)est.total;
        e[K_PEAK] = (double)est.peak_total, e[K_DPX] = (double)est.dp_extra, e[K_RSS] = (double)(est.total + est.dp_extra);
        for (k = 0; k < NK; k++) ratio[k] = meas[k] == 0 && e[k] == 0 ? 1.0 : meas[k] > 0 ? e[k] / meas[k] : INFINITY;
        if (rank == 0) all = (double *)malloc(sizeof(double) * (size_t)world * (2 * NK + 7));
        {
            /* to the byte; a rank holding a smaller ZeRO shard than the estimated (largest) one: all but the
               optimizer state and what sums it (total, peak, the ZeRO-2 gradient shard in dp_extra); ZeRO-3: the
               peak holds the gathered buckets' other ranks' parts, which depend on where the shard lies, and the
               estimate is the largest over the shards: per rank to 10%, and below, the largest of each pipeline
               stage's ranks to the byte */
            double mine_row[2 * NK + 7] = {0};
            int small = zero && lay.dp > 1 && meas[K_OPTIM] != e[K_OPTIM], exact = 1;
            for (k = 0; k < NK; k++) {
                mine_row[k] = ratio[k], mine_row[NK + k] = meas[k];
                if (k != K_RSS && e[k] != meas[k] && !(zero == 3 && k == K_PEAK) && !(small && (k == K_OPTIM || k == K_TOTAL || k == K_PEAK || k == K_DPX || (zero >= 2 && k == K_GRADS) || (zero == 3 && k == K_PARAMS))) && exact)
                    exact = 0, mine_row[2 * NK + 4] = k, mine_row[2 * NK + 5] = e[k] - meas[k]; /* the first part that differs */
            }
            mine_row[2 * NK] = me.pp, mine_row[2 * NK + 1] = est.in_flight, mine_row[2 * NK + 2] = exact, mine_row[2 * NK + 3] = small;
            mine_row[2 * NK + 6] = e[K_PEAK];
#ifdef PTRAIN_MPI
            MPI_Gather(mine_row, 2 * NK + 7, MPI_DOUBLE, all, 2 * NK + 7, MPI_DOUBLE, 0, *(MPI_Comm *)pt_dist_comm(d, PT_COMM_WORLD));
#else
            memcpy(all, mine_row, sizeof mine_row);
#endif
        }
        tu_solo(1); /* rank 0 checks every rank's ratios */
        if (rank == 0) {
            printf("layout dp %d x tp %d x pp %d, zero %d, %s, m %d%s, %d layers of width %d, micro-batch %d x %d: estimate / measured per rank "
                   "(measured MiB)\n", lay.dp, lay.tp, lay.pp, zero,
                   lay.pp > 1 ? (kind == PT_PP_GPIPE ? "GPipe" : kind == PT_PP_INTERLEAVED ? "interleaved" : "1F1B") : "accumulation", M,
                   compress ? ", bf16" : "", layers, width, B, T);
            for (r = 0; r < world; r++) {
                double *row = all + (size_t)r * (2 * NK + 7);
                int ok = 1;
                char line[1024];
                size_t n = 0;
                n += (size_t)snprintf(line + n, sizeof line - n, "rank %d (pp %d, %d in flight):", r, (int)row[2 * NK], (int)row[2 * NK + 1]);
                for (k = 0; k < NK; k++) {
                    n += (size_t)snprintf(line + n, sizeof line - n, " %s %.3f (%.1f)", kname[k], row[k], row[NK + k] / 1048576.0);
                    if (k != K_RSS && fabs(row[k] - 1.0) > 0.10) ok = 0;
                }
                printf("  %s\n", line);
                snprintf(name, sizeof name, "rank %d: every part and the total within 10%% of pt_mem / pt_dp_stats", r);
                CHECK_WHY(ok, name, "a ratio above is outside [0.9, 1.1]");
                snprintf(name, sizeof name, "rank %d: every part equals pt_mem / pt_dp_stats to the byte%s", r,
                         row[2 * NK + 3] != 0 ? " (a smaller ZeRO shard than the largest: all but the optimizer state and its sums)" : "");
                snprintf(line, sizeof line, "%s: the estimate is %+.0f bytes off the measurement", kname[(int)row[2 * NK + 4]], row[2 * NK + 5]);
                CHECK_WHY(row[2 * NK + 2] != 0, name, line);
            }
        }
        if (rank == 0 && zero == 3) { /* the ZeRO-3 peak: the largest over a stage's ranks is the estimate */
            int q;
            for (q = 0; q < lay.pp; q++) {
                double mx = 0, est_q = -1;
                for (r = 0; r < world; r++) {
                    double *row = all + (size_t)r * (2 * NK + 7);
                    if ((int)row[2 * NK] != q) continue;
                    mx = row[NK + K_PEAK] > mx ? row[NK + K_PEAK] : mx, est_q = row[2 * NK + 6];
                }
                snprintf(name, sizeof name, "ZeRO-3, pipeline rank %d: the estimated peak is the largest measured over its ranks, to the byte", q);
                snprintf(err, sizeof err, "estimated %.0f bytes, the largest measured %.0f", est_q, mx);
                CHECK_WHY(est_q == mx, name, err);
            }
        }
        tu_solo(0);
        if (lay.tp > 1 && lay.dp == 1 && lay.pp == 1 && M == 1) layer_tp(d, &cfg, &plan, pt_graph_pass_bytes(g), ms.activations, ids);
    }
    free(all);
    pt_pp_free(pp);
    pt_dp_free(dp);
    pt_gpt_free(m);
    pt_shutdown(ctx);
    free(ids);
    free(tg);
    s = tu_summary();
    pt_dist_finalize(d);
    return s;
}
