/* pttrain.c - train a GPT with ptrain.h: the program to train with.

   One process, or any layout of data, tensor and pipeline parallelism over the ranks of mpirun
   (dp x tp x pp, with ZeRO, gradient compression, accumulation), on the CPU or an OpenCL device,
   with checkpoints (resumable on another layout), a clean stop on SIGINT / SIGTERM, a metrics log,
   a Chrome trace and a health guard. The tutorials (examples/03_gpt.c, 07_gpt_3d.c, 08_opencl.c)
   show the pieces one at a time; this is them together.

   Build: mpicc -O2 -fopenmp -DPTRAIN_MPI -DPTRAIN_OPENCL -I. tools/pttrain.c -o build/pttrain -lm
   (make tools builds it; make demo trains with it on 4 ranks)

   Usage: ./build/pttrain [flags]                       one process
          mpirun -np N ./build/pttrain --dp D --tp T --pp P [flags]
   e.g.   mpirun -np 4 ./build/pttrain --dp 2 --pp 2 --steps 400 --ckpt-dir ckpt --ckpt-every 100 --resume-if-any --log run.jsonl

   Flags (--help lists them with their defaults):
   - the shared set: --steps N (also the LR schedule's length), --seed S, --batch B (the global batch:
     every layout sees the same data in a step, so its losses follow those of one process), --seq T,
     --lr X, --layers L, --width C, --heads H, --stop-after K (stop after K steps, schedule unchanged),
     --device cpu|opencl[:P[:D]] (the ranks of a node share its devices);
   - the layout: --dp D --tp T --pp P (0 = the rest of the world; default all data parallel),
     --schedule gpipe|1f1b|interleaved (1f1b), --virtual-stages V (interleaved; 2), --micro-batches M
     (default pp), --accum K (rounds of M micro-batches per optimizer step), --split
     balanced|equal|L0,L1,.. (layers per pipeline stage: by a FLOP estimate, equal, or by hand);
   - tensor parallelism: --seq-parallel (the residual stream, norms and dropout split along the
     sequence over the TP ranks; the sequence length must divide by tp);
   - the model: --untied (a separate LM head instead of the tied token embedding);
   - memory: --loss-chunk N (the LM head and the loss in chunks of N rows: no full logits),
     --recompute none|selective|full (activations re-run in backward: the cheap ops, or whole blocks);
   - data parallelism: --zero 0|1|2|3 (optimizer state, then gradients, then the parameters too,
     sharded over DP; 3 gathers each block's parameters just before it runs, on the CPU),
     --compress bf16 (gradients on the wire as bf16 with error feedback), --hier (hierarchical
     allreduce), --bucket-kb N (gradient bucket size);
   - numerics: --precision f32|bf16|fp16 (the matrix products multiply inputs rounded to bf16 or fp16,
     accumulating in fp32; weights, optimizer, gradients and their reduction stay fp32), --loss-scale
     off|dynamic|S (dynamic loss scaling from 2^16 or the power of two S: a step whose gradients
     overflow is skipped, a grad_overflow event, and the scale halves; dynamic by default with fp16);
   - the run: --data DIR (token shards DIR/train_*.bin and val_*.bin as tools/prepare_shards writes
     them, or text DIR/train.txt and val.txt made into byte shards the first time; default
     data/fortunes, itself made from the Debian fortunes the first time), --val-every N, --sample N
     (tokens generated at the end, picked by the header's pt_sampler: see sample in ptrain.h),
     --temperature X (their sampling temperature, 0.8; 0 = the most likely token each time), --top-k
     K (sampled from the K most likely tokens only; 0 = all), --top-p P (nucleus sampling: from the
     fewest most likely tokens whose probabilities reach P, in (0, 1]; 1 = all), --min-p P (tokens
     under P x the most likely one's probability dropped; 0 = off), --repeat-penalty X (llama.cpp's
     penalty on the tokens of the last --repeat-last-n N, default 64, generated; 1 = off),
     --ckpt-dir DIR --ckpt-every N (a checkpoint of step k holds the
     state after k optimizer steps, the data stream's position included; one is also saved at the
     last step; the newest 3 are kept), --resume (from the newest valid checkpoint: the losses are
     those of a run never stopped) or --resume-if-any (the same, or start at step 0 when DIR holds no
     checkpoint yet), --ckpt-async (written by a background thread), --log FILE (per-step metrics as
     JSON lines, docs/monitoring.md), --trace FILE (a Chrome trace of every rank: ui.perfetto.dev or
     build/ptreport), --guard off|warn|skip|rollback and --guard-z Z (NaN/Inf or a loss / gradient-norm
     spike is logged, its update skipped, or after 3 bad steps in a row the last checkpoint is loaded
     and the LR halved; default warn).
   SIGINT / SIGTERM (to the ranks: Open MPI's mpirun does not forward SIGTERM): the step finishes,
   the ranks save together (with --ckpt-dir), rank 0 prints the command that resumes, they exit 0.

   Output (rank 0): `step <n> loss <l> lr <lr> norm <g> ms <ms> tok/s <t> gflops <f> bubble <b> data_ms <d>`
   per step, `val step <n> val_loss <v>`, at the end `val_loss <v>`, the sample (after a line naming
   its length, temperature, top-k / top-p / min-p / repeat penalty when given, and seed) and its share of dictionary words (of
   its letter runs, those wamerican holds; a lone letter only when it is a, A, I or O). With --log on a
   terminal, one process, the monitor's progress line stays under the step lines. */
#define PTRAIN_IMPLEMENTATION
#define PTRAIN_HARNESS
#include "ptrain.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* what the stage function reads: the model, the current global batch and this rank's rows */
typedef struct feed {
    pt_gpt *m;
    const int32_t *ids, *tg; /* this DP rank's rows of the global batch, the first being row base */
    int T, base, row0, rows, mbs; /* this round: rows [row0, row0 + rows) of the batch, in mbs micro-batches */
    int gen;                /* generation: the last stage picks the next token instead of a loss */
    pt_sampler *sampler;    /* picks it (temperature, top-k, top-p, min-p, repeat penalty; seeded by --seed) */
    const int32_t *hist;    /* the sequence so far (the penalty's history) */
    int nhist;
    int32_t next;           /* the token picked (on the last pipeline rank); -1 when the sampler failed */
    float *row;             /* [vocab_padded] the last position's logits */
    const pt_dist *d;
} feed;

/* the last stage in generation: logits of the last position (gathered over TP), the next token
   picked by the sampler */
static pt_tensor *pick_next(pt_graph *g, feed *f, pt_tensor *x) {
    pt_tensor *logits = pt_gpt_head(g, f->m, x), last;
    int64_t T = x ? x->shape[1] : 0, Vl = logits ? logits->shape[2] : 0;
    int vp = Vl * pt_tp_size(pt_graph_ctx(g)) == f->m->cfg.vocab_padded && pt_tp_size(pt_graph_ctx(g)) > 1; /* vocab-parallel: Vl columns a TP rank */
    if (!logits) return NULL;
    last = *logits;
    last.off += (T - 1) * Vl;
    last.ndim = 1, last.shape[0] = Vl, last.shape[1] = last.shape[2] = 1;
    pt_tensor_read(&last, f->row + (vp ? (int64_t)pt_tp_rank(pt_graph_ctx(g)) * Vl : 0)); /* this rank's slot of the gathered row */
#ifdef PTRAIN_MPI
    if (vp) /* vocab-parallel: gather the row (in place: each rank's columns at its slot) */
        MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, f->row, (int)Vl, MPI_FLOAT, *(MPI_Comm *)pt_dist_comm(f->d, PT_COMM_TP));
#endif
    f->next = pt_sampler_next(f->sampler, f->row, f->hist, f->nhist, NULL); /* -1: a NaN row, named in pt_error */
    if (f->next < 0) return NULL;
    return pt_mean(g, logits); /* a scalar for the runtime; the byte is in f->next */
}

static pt_tensor *stage_fn(pt_graph *g, int stage, int mb, pt_tensor *x, void *user) {
    feed *f = (feed *)user;
    int rows = f->rows / f->mbs, r0 = f->row0 + mb * rows, last = stage == f->m->nstages - 1, l;
    int64_t shp[2];
    pt_tensor *ids = NULL, *tg = NULL;
    shp[0] = rows, shp[1] = f->T;
    pt_graph_set_sample_offset(g, r0);
    if (stage == 0) ids = pt_tensor_from(g, PT_I32, 2, shp, f->ids + (size_t)(r0 - f->base) * f->T);
    if (!f->gen) {
        if (last) tg = pt_tensor_from(g, PT_I32, 2, shp, f->tg + (size_t)(r0 - f->base) * f->T);
        return pt_gpt_stage_fwd(g, f->m, stage, x, ids, tg);
    }
    if (stage == 0) x = pt_gpt_embed(g, f->m, ids);
    for (l = f->m->first[stage]; x && l < f->m->first[stage + 1]; l++) x = pt_gpt_block(g, f->m, l, x);
    return last ? pick_next(g, f, x) : x;
}

/* mean loss over the first batches of the validation stream: each DP rank its rows, the whole
   pipeline forward-only (pt_pp_eval averages over micro-batches and DP ranks) */
static float val_loss(pt_pp *pp, feed *f, pt_run *run, int per, int32_t *ids, int32_t *tg, int batches) {
    int j, n = pt_run_val_rewind(run, batches);
    float vl = 0;
    f->rows = per, f->row0 = f->base;
    for (j = 0; j < n; j++) {
        if (pt_loader_next(run->val, ids, tg) != PT_OK) return NAN;
        vl += pt_pp_eval(pp) / (float)n;
    }
    return vl;
}

static int flag_kind(const char *v) {
    return !strcmp(v, "gpipe") ? PT_PP_GPIPE : !strcmp(v, "1f1b") ? PT_PP_1F1B : !strcmp(v, "interleaved") ? PT_PP_INTERLEAVED : -1;
}

/* ---- the trainer in named steps: parse, build, resume, loop, finish ----------------------------
   main runs them in order; each returns 0, or 1 after saying why (on rank 0). The supervisor's
   hooks (tools/ptrun) are the harness's: pt_run_data opens its channel (build), pt_run_start says
   where the run resumes (resume), pt_run_step_begin / pt_run_step_end / pt_run_phase report
   progress (loop, finish) and fire the test faults, pt_run_free says goodbye. */

/* the flags of this program (the shared ones are in a and run) */
typedef struct opts {
    pt_layout lay;
    int val_every, sample, zero, kind, vstages, mbs, accum, balanced, bucket_kb;
    int hier, compress, seq_parallel, untied, loss_chunk, recompute;
    double temperature;    /* --temperature: the sample's; 0 = always the most likely token */
    double top_p;          /* --top-p: nucleus sampling from the fewest most likely tokens of this much probability; 1 = off */
    int top_k;             /* --top-k: sampling from the k most likely tokens only; 0 = off */
    double min_p;          /* --min-p: tokens under min_p x the most likely one's probability dropped; 0 = off */
    double repeat_penalty; /* --repeat-penalty: llama.cpp's penalty on the last --repeat-last-n tokens; 1 = off */
    int repeat_last_n;
    double loss_scale;       /* --loss-scale: 0 = off, else dynamic from this scale; -1 = not given (fp16: dynamic) */
    const char *stage_layers; /* --split a,b,c: layers per stage, given by hand */
} opts;

/* everything a run holds, from parse to the end */
typedef struct trainer {
    pt_args a;
    pt_run run;
    opts o;
    pt_dist *d;
    pt_layout lay; /* as the grid made it */
    pt_coords me;
    int rank, B, T, nst;
    pt_ctx *ctx;
    pt_gpt_config cfg;
    pt_gpt *m;
    pt_optim *opt;
    pt_dp *dp;
    pt_pp *pp, *gen;
    pt_lr_schedule sched;
    int32_t first[257]; /* layers of stage s: [first[s], first[s + 1]) */
    int32_t *ids, *tg;  /* this DP rank's rows of the global batch */
    int64_t first_step, last;
    double flops;
    feed f;
    int stopped; /* a signal (or the supervisor) stopped the run after a saved step */
} trainer;

/* a number flag's value in [lo, hi]; 0, or -1 after saying why */
static int flag_num(const char *f, const char *v, double lo, double hi, int lo_open, double *out, const char *what) {
    char *e;
    double x = strtod(v, &e);
    if (e == v || *e || !(lo_open ? x > lo : x >= lo) || !(x <= hi)) {
        fprintf(stderr, "pttrain: %s expects %s, found '%s'\n", f, what, v);
        return -1;
    }
    *out = x;
    return 0;
}

/* parse: the command line into t (nothing run yet). 0 to go on, 1 = --help printed, -1 = a bad flag
   (said on stderr) */
static int parse(trainer *t, int argc, char **argv) {
    opts *o = &t->o;
    pt_args *a = &t->a;
    char err[1024];
    int i;
    memset(o, 0, sizeof *o);
    o->lay.dp = 0, o->lay.tp = 1, o->lay.pp = 1, o->lay.allow_tp_across_nodes = 0;
    o->val_every = 100, o->sample = 300, o->kind = PT_PP_1F1B, o->vstages = 2, o->accum = 1, o->balanced = 1;
    o->recompute = PT_RECOMPUTE_NONE, o->temperature = 0.8, o->top_p = 1, o->repeat_penalty = 1, o->repeat_last_n = 64, o->loss_scale = -1;
    t->run.data = "data/fortunes", t->run.prepare = pt_run_fortunes;
    a->steps = 600, a->seed = 1337, a->batch = 16, a->seq = 256, a->layers = 4, a->width = 256, a->heads = 8, a->lr = 2e-3f;
    argc = pt_run_parse(&t->run, argc, argv, err, sizeof err); /* first: it records the command line as given */
    if (argc >= 0) argc = pt_args_parse(a, argc, argv, err, sizeof err);
    if (argc < 0) {
        fprintf(stderr, "pttrain: %s (try --help)\n", err);
        return -1;
    }
    for (i = 1; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(f, "--hier") || !strcmp(f, "--seq-parallel") || !strcmp(f, "--untied")) { /* the flags without a value */
            *(!strcmp(f, "--hier") ? &o->hier : !strcmp(f, "--untied") ? &o->untied : &o->seq_parallel) = 1;
            continue;
        }
        int *num = !strcmp(f, "--dp") ? &o->lay.dp : !strcmp(f, "--tp") ? &o->lay.tp : !strcmp(f, "--pp") ? &o->lay.pp : !strcmp(f, "--zero") ? &o->zero
                 : !strcmp(f, "--virtual-stages") ? &o->vstages : !strcmp(f, "--micro-batches") ? &o->mbs : !strcmp(f, "--accum") ? &o->accum
                 : !strcmp(f, "--val-every") ? &o->val_every : !strcmp(f, "--sample") ? &o->sample : !strcmp(f, "--bucket-kb") ? &o->bucket_kb
                 : !strcmp(f, "--loss-chunk") ? &o->loss_chunk : !strcmp(f, "--top-k") ? &o->top_k : !strcmp(f, "--repeat-last-n") ? &o->repeat_last_n : NULL;
        if (!v) {
            fprintf(stderr, "pttrain: unknown flag or missing value: '%s' (try --help)\n", f);
            return -1;
        }
        if (num) {
            int64_t x;
            if (pt_args_int(f, v, 0, 1 << 20, &x, err, sizeof err) != 0) {
                fprintf(stderr, "pttrain: %s\n", err);
                return -1;
            }
            *num = (int)x;
        } else if (!strcmp(f, "--schedule")) {
            if ((o->kind = flag_kind(v)) < 0) {
                fprintf(stderr, "pttrain: --schedule expects gpipe, 1f1b or interleaved, found '%s'\n", v);
                return -1;
            }
        } else if (!strcmp(f, "--split")) {
            if (strcmp(v, "balanced") && strcmp(v, "equal") && strspn(v, "0123456789,") != strlen(v)) {
                fprintf(stderr, "pttrain: --split expects balanced, equal or layers per stage (e.g. 3,1), found '%s'\n", v);
                return -1;
            }
            o->balanced = !strcmp(v, "balanced");
            if (strcmp(v, "balanced") && strcmp(v, "equal")) o->stage_layers = v;
        } else if (!strcmp(f, "--compress")) {
            if (strcmp(v, "bf16") && strcmp(v, "none")) {
                fprintf(stderr, "pttrain: --compress expects bf16 or none, found '%s'\n", v);
                return -1;
            }
            o->compress = !strcmp(v, "bf16");
        } else if (!strcmp(f, "--recompute")) {
            o->recompute = !strcmp(v, "none") ? PT_RECOMPUTE_NONE : !strcmp(v, "selective") ? PT_RECOMPUTE_SELECTIVE : !strcmp(v, "full") ? PT_RECOMPUTE_FULL : -1;
            if (o->recompute < 0) {
                fprintf(stderr, "pttrain: --recompute expects none, selective or full, found '%s'\n", v);
                return -1;
            }
        } else if (!strcmp(f, "--temperature")) {
            if (flag_num(f, v, 0, 100, 0, &o->temperature, "a number in 0..100 (0 = the most likely token each time)")) return -1;
        } else if (!strcmp(f, "--top-p")) {
            if (flag_num(f, v, 0, 1, 1, &o->top_p, "a number in (0, 1] (the share of probability the sampled tokens keep; 1 = all)")) return -1;
        } else if (!strcmp(f, "--min-p")) {
            if (flag_num(f, v, 0, 1, 0, &o->min_p, "a number in [0, 1] (tokens under it x the top probability are dropped; 0 = off)")) return -1;
        } else if (!strcmp(f, "--repeat-penalty")) {
            if (flag_num(f, v, 0, 100, 1, &o->repeat_penalty, "a number in (0, 100] (> 1 discourages repeating the last tokens; 1 = off)")) return -1;
        } else if (!strcmp(f, "--loss-scale")) {
            char *e = NULL;
            int ex;
            o->loss_scale = !strcmp(v, "off") ? 0 : !strcmp(v, "dynamic") ? 65536 : strtod(v, &e);
            if ((e && (e == v || *e)) || o->loss_scale < 0 || (o->loss_scale > 0 && frexp(o->loss_scale, &ex) != 0.5)) {
                fprintf(stderr, "pttrain: --loss-scale expects off, dynamic or a power of two to start from, found '%s'\n", v);
                return -1;
            }
        } else {
            fprintf(stderr, "pttrain: unknown flag '%s' (try --help)\n", f);
            return -1;
        }
        i++;
    }
    if (a->help) {
        pt_args_usage(a, "pttrain",
                      "  --dp D --tp T --pp P  layout (0 = the rest of the world; default all data parallel)\n"
                      "  --zero Z              0, 1 (optimizer state sharded over DP), 2 (gradients too) or 3 (parameters too) (0)\n"
                      "  --compress C          bf16: gradients travel as bf16 with error feedback (none)\n"
                      "  --hier                hierarchical allreduce: in-node, across nodes, in-node\n"
                      "  --seq-parallel        with --tp > 1: norms, dropout and the residual on T/tp positions per TP rank\n"
                      "  --untied              a separate LM head instead of the tied token embedding\n"
                      "  --loss-chunk N        the LM head and loss fused, N rows of logits at a time (0 = unfused)\n"
                      "  --recompute R         activations: none, selective (re-run norms, GELU, dropout in backward) or full (keep block inputs only)\n"
                      "  --loss-scale S        dynamic loss scaling from S (dynamic = 65536; a power of two), or off (off; dynamic with fp16)\n"
                      "  --schedule S          gpipe, 1f1b or interleaved (1f1b)\n"
                      "  --virtual-stages V    chunks per pipeline rank for interleaved (2)\n"
                      "  --micro-batches M     micro-batches per round (default: pp)\n"
                      "  --accum K             rounds per optimizer step (1)\n"
                      "  --split S             balanced (by FLOPs), equal, or layers per stage, e.g. 3,1 (balanced)\n"
                      "  --bucket-kb N         data-parallel bucket size in KiB (0 = 25 MiB)\n"
                      "  --val-every N         validation interval (100)\n"
                      "  --sample N            tokens to generate at the end (300)\n"
                      "  --temperature X       the sample's softmax temperature; 0 = the most likely token each time (0.8)\n"
                      "  --top-k K             sample only from the K most likely tokens (0 = all)\n"
                      "  --top-p P             nucleus sampling: only from the fewest most likely tokens whose probabilities\n"
                      "                        (at the temperature) sum to P, in (0, 1] (1 = all)\n"
                      "  --min-p P             drop the tokens under P x the most likely one's probability, in [0, 1] (0 = off)\n"
                      "  --repeat-penalty X    llama.cpp's repeat penalty on the last --repeat-last-n tokens (1 = off)\n"
                      "  --repeat-last-n N     the penalty's window of tokens (64)");
        pt_run_usage(&t->run);
        return 1;
    }
    if (o->loss_scale < 0) o->loss_scale = a->precision == PT_F16 ? 65536 : 0; /* fp16 gradients underflow without one */
    if (o->zero > 3) {
        fprintf(stderr, "pttrain: --zero expects 0, 1, 2 or 3, found %d\n", o->zero);
        return -1;
    }
    if (o->kind != PT_PP_INTERLEAVED) o->vstages = 1;
    if (o->accum < 1) o->accum = 1;
    return 0;
}

/* the layers of each pipeline stage into t->first (--split); err set when they cannot be */
static void split_stages(trainer *t, char *err, size_t errlen) {
    const opts *o = &t->o;
    if (t->nst > 256 || t->nst > t->cfg.layers)
        snprintf(err, errlen, "%d layers cannot fill pp x virtual stages = %d x %d stages (need at least one layer each)", t->cfg.layers, t->lay.pp, o->vstages);
    else if (o->stage_layers) { /* the split by hand: layers per stage, checked */
        const char *c = o->stage_layers;
        int k = 0, total = 0;
        t->first[0] = 0;
        while (*c && k < t->nst) {
            char *end;
            long n;
            errno = 0;
            n = strtol(c, &end, 10);
            if (n < 1 || errno == ERANGE || n > t->cfg.layers - total) break;
            total += (int)n, t->first[++k] = total;
            c = strchr(c, ',');
            if (!c) break;
            c++;
        }
        if (k != t->nst || total != t->cfg.layers || (c && *c))
            snprintf(err, errlen, "--split %s: expected %d positive layer counts (pp x virtual stages) summing to --layers %d", o->stage_layers, t->nst,
                     t->cfg.layers);
    } else if (o->balanced) {
        double *cost = (double *)malloc(sizeof(double) * (size_t)t->cfg.layers), fe, le;
        pt_gpt_stage_costs(&t->cfg, t->B, t->T, cost, &fe, &le);
        pt_pp_split(t->cfg.layers, t->nst, cost, fe, le, t->first, err, errlen);
        free(cost);
    } else {
        pt_pp_split(t->cfg.layers, t->nst, NULL, 0, 0, t->first, err, errlen);
    }
}

/* build: the grid is up; the context, the data (the supervisor's channel opens here), the model split
   into stages, the optimizer, data parallelism and the pipelines; prints the run's summary */
static int build(trainer *t) {
    const opts *o = &t->o;
    pt_desc desc;
    pt_optim_desc od = pt_args_adamw(&t->a);
    pt_pp_desc pd;
    char err[1024];
    int mine[256], nmine = 0, s;
    t->lay = pt_dist_layout(t->d);
    t->rank = pt_dist_rank(t->d);
    t->me = pt_dist_coords(t->d);
    t->B = (int)t->a.batch, t->T = (int)t->a.seq, t->nst = t->lay.pp * o->vstages; /* pt_args_parse bounds them by 2^24 */
    t->sched = pt_args_schedule(&t->a);
    t->last = t->a.stop_after ? (t->a.stop_after < t->a.steps ? t->a.stop_after : t->a.steps) : t->a.steps;
    if (t->o.mbs == 0) t->o.mbs = t->lay.pp;
    err[0] = 0;
    if (t->a.batch % t->lay.dp || (t->a.batch / t->lay.dp) % ((int64_t)o->mbs * o->accum))
        snprintf(err, sizeof err, "--batch %lld must split over dp = %d ranks and then into --accum %d x --micro-batches %d equal parts "
                 "(batch per DP rank %lld)", (long long)t->a.batch, t->lay.dp, o->accum, o->mbs, (long long)(t->a.batch / t->lay.dp));
    if (!pt_dist_agree_msg(t->d, !err[0], err, sizeof err)) {
        if (t->rank == 0) fprintf(stderr, "pttrain: %s\n", err);
        return 1;
    }
    t->ids = (int32_t *)malloc(sizeof(int32_t) * (size_t)t->B * (size_t)t->T);
    t->tg = (int32_t *)malloc(sizeof(int32_t) * (size_t)t->B * (size_t)t->T);
    memset(&desc, 0, sizeof desc);
    desc.seed = (uint64_t)t->a.seed, desc.device = t->a.device, desc.dist = t->d, desc.precision = t->a.precision;
    t->ctx = pt_init(&desc);
    if (!t->ctx) snprintf(err, sizeof err, "cannot use device '%s' (the reason is logged above)", t->a.device ? t->a.device : "cpu");
    else if (!t->ids || !t->tg) snprintf(err, sizeof err, "out of memory");
    /* the data: token shards (made from the text the first time); each DP rank's loader reads its
       slice of every global batch, so any layout sees the data of 03 */
    if (pt_dist_agree_msg(t->d, !err[0], err, sizeof err) && pt_run_data(t->ctx, &t->run, t->B, t->T, (uint64_t)t->a.seed) != PT_OK)
        snprintf(err, sizeof err, "%s", pt_error(t->ctx));
    t->cfg = pt_args_gpt(&t->a, t->run.vocab);
    t->cfg.seq_parallel = o->seq_parallel, t->cfg.loss_chunk = o->loss_chunk, t->cfg.recompute = o->recompute, t->cfg.untied = o->untied;
    if (!err[0]) split_stages(t, err, sizeof err);
    if (!err[0]) {
        for (s = 0; s < o->vstages; s++) mine[nmine++] = s * t->lay.pp + t->me.pp;
        t->m = pt_gpt_new_stages(t->ctx, &t->cfg, t->nst, t->first, nmine, mine);
        if (t->m) t->opt = pt_optim_new(t->ctx, &od);
        if (t->opt && o->loss_scale > 0) {
            pt_loss_scale_desc ls;
            memset(&ls, 0, sizeof ls);
            ls.init = o->loss_scale;
            if (ls.init > 16777216.0) ls.max_scale = ls.init;
            pt_loss_scale_enable(t->ctx, &ls);
        }
        if (t->opt && t->lay.dp > 1) {
            pt_dp_options dopt;
            memset(&dopt, 0, sizeof dopt);
            dopt.bucket_bytes = (int64_t)o->bucket_kb << 10, dopt.hier = o->hier, dopt.compress = o->compress;
            if ((t->dp = pt_dp_new_opts(t->ctx, t->d, &dopt)) != NULL && o->zero) pt_dp_zero(t->dp, t->opt, o->zero);
        }
        memset(&pd, 0, sizeof pd);
        pd.kind = o->kind, pd.micro_batches = o->mbs, pd.virtual_stages = o->vstages, pd.forward = stage_fn, pd.user = &t->f;
        if (t->opt) t->pp = pt_pp_new(t->ctx, &pd);
        pd.micro_batches = 1, pd.kind = PT_PP_FORWARD_ONLY; /* generation: one sequence through the pipeline */
        if (t->pp) t->gen = pt_pp_new(t->ctx, &pd);
        pt_pp_set_dp(t->pp, t->dp);
        if (!t->pp || pt_status_get(t->ctx) != PT_OK) snprintf(err, sizeof err, "%s", pt_error(t->ctx));
    }
    if (!pt_dist_agree_msg(t->d, !err[0], err, sizeof err)) {
        if (t->rank == 0) fprintf(stderr, "pttrain: %s\n", err);
        return 1;
    }
    memset(&t->f, 0, sizeof t->f);
    t->f.m = t->m, t->f.T = t->T, t->f.mbs = o->mbs, t->f.d = t->d;
    t->f.row = (float *)malloc(sizeof(float) * (size_t)t->m->cfg.vocab_padded);
    t->flops = pt_gpt_flops(&t->cfg, t->B, t->T);
    pt_dist_print(t->d, NULL);
    if (t->rank == 0) {
        printf("model: %d layers, width %d, %d heads%s; batch %d x %d bytes (global); layout dp %d x tp %d x pp %d, %s schedule, "
               "v %d, %d micro-batches x %d rounds, zero %d%s%s, precision %s\n",
               t->cfg.layers, t->cfg.width, t->cfg.heads, t->cfg.untied ? ", a separate LM head" : "", t->B, t->T, t->lay.dp, t->lay.tp, t->lay.pp,
               o->kind == PT_PP_GPIPE ? "GPipe" : o->kind == PT_PP_1F1B ? "1F1B" : "interleaved", o->vstages, o->mbs, o->accum, o->zero,
               o->hier ? ", hierarchical allreduce" : "", o->compress ? ", bf16 gradients" : "", pt_args_precision_name(t->a.precision));
        printf("stages (%s split):", o->stage_layers ? "given" : o->balanced ? "balanced" : "equal");
        for (s = 0; s < t->nst; s++) printf(" %d:[%d,%d) on pp rank %d", s, (int)t->first[s], (int)t->first[s + 1], s % t->lay.pp);
        printf("\n");
        if (t->lay.pp > 1) pt_pp_schedule_print(pt_pp_get_schedule(t->pp), NULL);
        fflush(stdout);
    }
    return 0;
}

/* resume: --resume (collective: every rank loads its parameters, moments or ZeRO shard, the step and
   the data stream's position), the guard, the log and the trace; from here on SIGINT / SIGTERM (or
   the supervisor's stop) end the run after a step */
static int resume(trainer *t) {
    t->run.model = &t->cfg, t->run.pp = t->pp; /* the log's bubble comes from the pipeline */
    if (pt_run_start(t->ctx, t->opt, &t->run, t->a.steps, &t->first_step) != PT_OK) {
        if (t->rank == 0 && t->run.resume) fprintf(stderr, "pttrain: cannot resume from %s: %s\n", t->run.ckpt_dir, pt_error(t->ctx));
        else if (t->rank == 0) fprintf(stderr, "pttrain: %s\n", pt_error(t->ctx));
        return 1;
    }
    t->f.ids = t->ids, t->f.tg = t->tg, t->f.base = t->me.dp * (t->B / t->lay.dp);
    return 0;
}

/* loop: the training steps from first_step to last, with validation, checkpoints and the guard */
static int loop(trainer *t) {
    const opts *o = &t->o;
    pt_run *run = &t->run;
    feed *f = &t->f;
    int64_t step, next;
    int fail = 0, stop = 0, v, k, per = t->B / t->lay.dp;
    for (step = t->first_step; step < t->last && !stop; step++) {
        double t0 = pt_time(), dt, scale;
        float lr = pt_lr_at(&t->sched, step), loss = 0, norm;
        pt_run_step_begin(run, step); /* the supervisor hears of it; a test fault may strike here */
        if (pt_loader_next(run->train, t->ids, t->tg) != PT_OK) { /* this DP rank's rows of the global batch */
            fprintf(stderr, "pttrain: rank %d: %s\n", t->rank, pt_error(t->ctx));
            fail = 1;
        }
        if (!pt_dist_agree(t->d, !fail)) return 1;
        f->gen = 0, f->T = t->T;
        pt_zero_grad(t->ctx);
        for (k = 0; k < o->accum; k++) {
            f->rows = per / o->accum, f->row0 = f->base + k * f->rows;
            loss += pt_pp_step(t->pp, k, o->accum) / (float)o->accum;
        }
        if (pt_status_get(t->ctx) != PT_OK) {
            if (t->rank == 0) fprintf(stderr, "pttrain: step %lld failed: %s\n", (long long)step, pt_error(t->ctx));
            return 1;
        }
        /* the health guard (--guard, collective) before the update: warn, skip, or roll back */
        norm = pt_grad_norm(t->ctx);
        if ((v = pt_run_guard(t->ctx, t->opt, run, step, loss, norm, &next)) < 0) {
            if (t->rank == 0) fprintf(stderr, "pttrain: step %lld: %s\n", (long long)step, pt_error(t->ctx));
            return 1;
        }
        if (v == PT_GUARD_ROLLBACK) {
            step = next - 1;
            continue;
        }
        lr = pt_run_lr(run, lr);
        scale = pt_loss_scale(t->ctx); /* the scale this step's gradients carried */
        if (v == PT_GUARD_OK) pt_optim_step(t->opt, lr);
        dt = pt_time() - t0;
        pt_run_line(run); /* on a terminal: the progress line (--log) out of the way */
        if (t->rank == 0) {
            pt_pp_stats st = pt_pp_stats_get(t->pp);
            printf("step %lld loss %.9g lr %.3e norm %.3f ms %.0f tok/s %.0f gflops %.1f bubble %.3f data_ms %.2f", (long long)step, loss, lr, norm,
                   dt * 1e3, (double)t->B * t->T / dt, t->flops / dt * 1e-9, st.bubble, pt_loader_stats_get(run->train).last_wait_s * 1e3);
            if (o->loss_scale > 0) printf(" loss_scale %g%s", scale, pt_loss_scale(t->ctx) < scale ? " overflow: update skipped" : "");
            printf("\n");
            fflush(stdout);
        }
        if (o->val_every > 0 && (step + 1) % o->val_every == 0 && step + 1 < t->last) {
            double tv = pt_time();
            float vl;
            pt_run_phase(run, PT_RUN_EVAL);
            vl = val_loss(t->pp, f, run, per, t->ids, t->tg, 16);
            pt_run_phase(run, PT_RUN_STEP);
            pt_run_val(run, vl, pt_time() - tv);
            pt_run_line(run);
            if (t->rank == 0) printf("val step %lld val_loss %.4f\n", (long long)(step + 1), vl);
        }
        /* the ranks agree to stop (a signal may reach only some of them), then save together when
           due; a checkpoint of step k holds the state after k optimizer steps */
        if ((stop = pt_run_step_end(t->ctx, t->opt, run, step + 1, t->a.steps, loss, norm, lr)) < 0) {
            if (t->rank == 0) fprintf(stderr, "pttrain: saving the checkpoint of step %lld failed: %s\n", (long long)(step + 1), pt_error(t->ctx));
            return 1;
        }
    }
    t->stopped = stop;
    return 0;
}

/* generation through the pipeline: one sequence, forward-only, the last stage picks a token and
   the pipeline's last rank shares it */
static int sample_text(trainer *t) {
    const opts *o = &t->o;
    feed *f = &t->f;
    int32_t *out = (int32_t *)malloc(sizeof(int32_t) * (size_t)(o->sample + 1));
    pt_sample_params sp;
    int i, fail = 0;
    if (!out) return 1;
    memset(&sp, 0, sizeof sp);
    sp.temperature = (float)o->temperature, sp.top_k = o->top_k, sp.top_p = (float)o->top_p, sp.min_p = (float)o->min_p;
    sp.repeat_penalty = (float)o->repeat_penalty, sp.repeat_last_n = o->repeat_last_n, sp.seed = (uint64_t)t->a.seed;
    f->sampler = pt_sampler_new(t->ctx, &sp, t->m->cfg.vocab); /* the same on every rank: only the last stage's picks */
    out[0] = '\n';
    f->gen = 1, f->mbs = 1, f->base = f->row0 = 0, f->rows = 1, f->hist = out;
    for (i = 1; i <= o->sample && f->sampler; i++) {
        int n = i < t->T ? i : t->T;
        f->T = n, f->ids = out + i - n, f->nhist = i;
        pt_pp_eval(t->gen);
#ifdef PTRAIN_MPI
        MPI_Bcast(&f->next, 1, MPI_INT32_T, t->lay.pp - 1, *(MPI_Comm *)pt_dist_comm(t->d, PT_COMM_PP));
#endif
        if (f->next < 0) break; /* the last stage's sampler refused the row */
        out[i] = f->next;
    }
    if (i <= o->sample) {
        if (t->rank == 0) fprintf(stderr, "pttrain: sampling failed at token %d: %s\n", i, pt_error(t->ctx));
        fail = 1;
    } else if (t->rank == 0) {
        int64_t nw, nr;
        char werr[300];
        printf("sampled %d tokens at temperature %g", o->sample, o->temperature);
        if (o->temperature > 0 && o->top_k > 0) printf(", top-k %d", o->top_k);
        if (o->temperature > 0 && o->top_p < 1) printf(", top-p %g", o->top_p);
        if (o->temperature > 0 && o->min_p > 0) printf(", min-p %g", o->min_p);
        if (o->repeat_penalty != 1) printf(", repeat penalty %g over %d tokens", o->repeat_penalty, o->repeat_last_n);
        printf(" (seed %lld)\n", (long long)t->a.seed);
        printf("sample:\n");
        pt_run_print(&t->run, out + 1, o->sample, stdout);
        printf("\n");
        if (pt_run_word_share(&t->run, out + 1, o->sample, getenv("PTRAIN_DICT"), &nw, &nr, werr, sizeof werr) == 0)
            printf("words: %lld of the sample's %lld letter runs (%.1f%%) are dictionary words\n", (long long)nw, (long long)nr,
                   nr ? 100.0 * (double)nw / (double)nr : 0.0);
        else printf("words: not counted: %s\n", werr);
    }
    free(out);
    return fail;
}

/* finish: after the last step (not after a stop): the final validation loss and the sample */
static int finish(trainer *t) {
    pt_loader_stats ls;
    double tv;
    float vl;
    int fail = 0;
    if (t->stopped) return 0;
    ls = pt_loader_stats_get(t->run.train);
    tv = pt_time();
    pt_run_phase(&t->run, PT_RUN_EVAL);
    vl = val_loss(t->pp, &t->f, &t->run, t->B / t->lay.dp, t->ids, t->tg, 32);
    pt_run_val(&t->run, vl, pt_time() - tv); /* after the last step: the log's eval event */
    pt_run_line(&t->run);
    if (t->rank == 0 && ls.batches) printf("data: rank 0 waited %.1f ms in all, %.3f ms per batch\n", ls.wait_s * 1e3, ls.wait_s * 1e3 / (double)ls.batches);
    if (t->rank == 0) printf("val_loss %.4f\n", vl);
    if (t->o.sample > 0 && t->gen) fail = sample_text(t);
    return fail;
}

/* what build made, freed (the run's collective part first) */
static void release(trainer *t) {
    pt_run_free(&t->run);
    free(t->f.row);
    pt_sampler_free(t->f.sampler);
    pt_pp_free(t->gen);
    pt_pp_free(t->pp);
    pt_gpt_free(t->m);
    pt_shutdown(t->ctx); /* frees the reducer too, without making the sharded slabs whole again */
    free(t->ids);
    free(t->tg);
}

int main(int argc, char **argv) {
    static trainer t; /* zero: every pointer NULL */
    char err[1024];
    int fail, p = parse(&t, argc, argv);
    if (p) return p > 0 ? 0 : 2;
    t.d = pt_dist_init(&argc, &argv, &t.o.lay, err, sizeof err);
    if (!t.d) {
        fprintf(stderr, "pttrain: %s\n", err);
        return 1;
    }
    fail = build(&t) || resume(&t) || loop(&t) || finish(&t);
    release(&t);
    pt_dist_finalize(t.d);
    return fail;
}
