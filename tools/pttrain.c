/* pttrain.c - train a GPT with ptrain.h: the program to train with.

   One process, or any layout of data, tensor and pipeline parallelism over the ranks of mpirun
   (dp x tp x pp, with ZeRO, gradient compression, accumulation), on the CPU or an OpenCL device,
   with checkpoints (resumable on another layout), a clean stop on SIGINT / SIGTERM, a metrics log,
   a Chrome trace and a health guard. The tutorials (examples/03_gpt.c, 07_gpt_3d.c, 08_opencl.c)
   show the pieces one at a time; this is them together.

   Build: mpicc -O2 -fopenmp -DPTRAIN_MPI -DPTRAIN_OPENCL -I. tools/pttrain.c -o build/pttrain -lOpenCL -lclblast -lm
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

int main(int argc, char **argv) {
    pt_args a;
    pt_run run;
    pt_layout lay = {0, 1, 1, 0};
    char err[1024];
    int val_every = 100, sample = 300, zero = 0, kind = PT_PP_1F1B, vstages = 2, mbs = 0, accum = 1, balanced = 1, bucket_kb = 0;
    int hier = 0, compress = 0, seq_parallel = 0, untied = 0, loss_chunk = 0, recompute = PT_RECOMPUTE_NONE;
    double temperature = 0.8; /* --temperature: the sample's; 0 = always the most likely token */
    double top_p = 1;         /* --top-p: nucleus sampling from the fewest most likely tokens of this much probability; 1 = off */
    int top_k = 0;            /* --top-k: sampling from the k most likely tokens only; 0 = off */
    double min_p = 0;         /* --min-p: tokens under min_p x the most likely one's probability dropped; 0 = off */
    double repeat_penalty = 1; /* --repeat-penalty: llama.cpp's penalty on the last --repeat-last-n tokens; 1 = off */
    int repeat_last_n = 64;
    double loss_scale = -1; /* --loss-scale: 0 = off, else dynamic from this scale; -1 = not given (fp16: dynamic) */
    const char *stage_layers = NULL; /* --split a,b,c: layers per stage, given by hand */
    int i, rank, fail = 0, stop = 0, v;
    pt_dist *d;
    memset(&run, 0, sizeof run);
    run.data = "data/fortunes", run.prepare = pt_run_fortunes;
    memset(&a, 0, sizeof a);
    a.steps = 600, a.seed = 1337, a.batch = 16, a.seq = 256, a.layers = 4, a.width = 256, a.heads = 8, a.lr = 2e-3f;
    argc = pt_run_parse(&run, argc, argv, err, sizeof err); /* first: it records the command line as given */
    if (argc >= 0) argc = pt_args_parse(&a, argc, argv, err, sizeof err);
    if (argc < 0) {
        fprintf(stderr, "pttrain: %s (try --help)\n", err);
        return 2;
    }
    for (i = 1; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(f, "--hier") || !strcmp(f, "--seq-parallel") || !strcmp(f, "--untied")) { /* the flags without a value */
            *(!strcmp(f, "--hier") ? &hier : !strcmp(f, "--untied") ? &untied : &seq_parallel) = 1;
            continue;
        }
        int *num = !strcmp(f, "--dp") ? &lay.dp : !strcmp(f, "--tp") ? &lay.tp : !strcmp(f, "--pp") ? &lay.pp : !strcmp(f, "--zero") ? &zero
                 : !strcmp(f, "--virtual-stages") ? &vstages : !strcmp(f, "--micro-batches") ? &mbs : !strcmp(f, "--accum") ? &accum
                 : !strcmp(f, "--val-every") ? &val_every : !strcmp(f, "--sample") ? &sample : !strcmp(f, "--bucket-kb") ? &bucket_kb
                 : !strcmp(f, "--loss-chunk") ? &loss_chunk : !strcmp(f, "--top-k") ? &top_k : !strcmp(f, "--repeat-last-n") ? &repeat_last_n : NULL;
        if (!v) {
            fprintf(stderr, "pttrain: unknown flag or missing value: '%s' (try --help)\n", f);
            return 2;
        }
        if (num) {
            int64_t x;
            if (pt_args_int(f, v, 0, 1 << 20, &x, err, sizeof err) != 0) {
                fprintf(stderr, "pttrain: %s\n", err);
                return 2;
            }
            *num = (int)x;
        } else if (!strcmp(f, "--schedule")) {
            if ((kind = flag_kind(v)) < 0) {
                fprintf(stderr, "pttrain: --schedule expects gpipe, 1f1b or interleaved, found '%s'\n", v);
                return 2;
            }
        } else if (!strcmp(f, "--split")) {
            if (strcmp(v, "balanced") && strcmp(v, "equal") && strspn(v, "0123456789,") != strlen(v)) {
                fprintf(stderr, "pttrain: --split expects balanced, equal or layers per stage (e.g. 3,1), found '%s'\n", v);
                return 2;
            }
            balanced = !strcmp(v, "balanced");
            if (strcmp(v, "balanced") && strcmp(v, "equal")) stage_layers = v;
        } else if (!strcmp(f, "--compress")) {
            if (strcmp(v, "bf16") && strcmp(v, "none")) {
                fprintf(stderr, "pttrain: --compress expects bf16 or none, found '%s'\n", v);
                return 2;
            }
            compress = !strcmp(v, "bf16");
        } else if (!strcmp(f, "--recompute")) {
            recompute = !strcmp(v, "none") ? PT_RECOMPUTE_NONE : !strcmp(v, "selective") ? PT_RECOMPUTE_SELECTIVE : !strcmp(v, "full") ? PT_RECOMPUTE_FULL : -1;
            if (recompute < 0) {
                fprintf(stderr, "pttrain: --recompute expects none, selective or full, found '%s'\n", v);
                return 2;
            }
        } else if (!strcmp(f, "--temperature")) {
            char *e;
            temperature = strtod(v, &e);
            if (e == v || *e || !(temperature >= 0 && temperature <= 100)) {
                fprintf(stderr, "pttrain: --temperature expects a number in 0..100 (0 = the most likely token each time), found '%s'\n", v);
                return 2;
            }
        } else if (!strcmp(f, "--top-p")) {
            char *e;
            top_p = strtod(v, &e);
            if (e == v || *e || !(top_p > 0 && top_p <= 1)) {
                fprintf(stderr, "pttrain: --top-p expects a number in (0, 1] (the share of probability the sampled tokens keep; 1 = all), found '%s'\n", v);
                return 2;
            }
        } else if (!strcmp(f, "--min-p")) {
            char *e;
            min_p = strtod(v, &e);
            if (e == v || *e || !(min_p >= 0 && min_p <= 1)) {
                fprintf(stderr, "pttrain: --min-p expects a number in [0, 1] (tokens under it x the top probability are dropped; 0 = off), found '%s'\n", v);
                return 2;
            }
        } else if (!strcmp(f, "--repeat-penalty")) {
            char *e;
            repeat_penalty = strtod(v, &e);
            if (e == v || *e || !(repeat_penalty > 0 && repeat_penalty <= 100)) {
                fprintf(stderr, "pttrain: --repeat-penalty expects a number in (0, 100] (> 1 discourages repeating the last tokens; 1 = off), found '%s'\n", v);
                return 2;
            }
        } else if (!strcmp(f, "--loss-scale")) {
            char *e = NULL;
            int ex;
            loss_scale = !strcmp(v, "off") ? 0 : !strcmp(v, "dynamic") ? 65536 : strtod(v, &e);
            if ((e && (e == v || *e)) || loss_scale < 0 || (loss_scale > 0 && frexp(loss_scale, &ex) != 0.5)) {
                fprintf(stderr, "pttrain: --loss-scale expects off, dynamic or a power of two to start from, found '%s'\n", v);
                return 2;
            }
        } else {
            fprintf(stderr, "pttrain: unknown flag '%s' (try --help)\n", f);
            return 2;
        }
        i++;
    }
    if (a.help) {
        pt_args_usage(&a, "pttrain",
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
        pt_run_usage(&run);
        return 0;
    }
    if (loss_scale < 0) loss_scale = a.precision == PT_F16 ? 65536 : 0; /* fp16 gradients underflow without one */
    if (zero > 3) {
        fprintf(stderr, "pttrain: --zero expects 0, 1, 2 or 3, found %d\n", zero);
        return 2;
    }
    if (kind != PT_PP_INTERLEAVED) vstages = 1;
    if (accum < 1) accum = 1;
    d = pt_dist_init(&argc, &argv, &lay, err, sizeof err);
    if (!d) {
        fprintf(stderr, "pttrain: %s\n", err);
        return 1;
    }
    lay = pt_dist_layout(d);
    rank = pt_dist_rank(d);
    if (mbs == 0) mbs = lay.pp;
    err[0] = 0;
    if (!err[0] && (a.batch % lay.dp || (a.batch / lay.dp) % ((int64_t)mbs * accum)))
        snprintf(err, sizeof err, "--batch %lld must split over dp = %d ranks and then into --accum %d x --micro-batches %d equal parts "
                 "(batch per DP rank %lld)", (long long)a.batch, lay.dp, accum, mbs, (long long)(a.batch / lay.dp));
    if (!pt_dist_agree_msg(d, !err[0], err, sizeof err)) {
        if (rank == 0) fprintf(stderr, "pttrain: %s\n", err);
        pt_dist_finalize(d);
        return 1;
    }
    {
        pt_desc desc;
        pt_ctx *ctx;
        pt_gpt_config cfg;
        pt_gpt *m = NULL;
        pt_optim_desc od = pt_args_adamw(&a);
        pt_optim *opt = NULL;
        pt_dp *dp = NULL;
        pt_pp *pp = NULL, *gen = NULL;
        pt_pp_desc pd;
        pt_lr_schedule sched = pt_args_schedule(&a);
        pt_coords me = pt_dist_coords(d);
        int B = (int)a.batch, T = (int)a.seq, nst = lay.pp * vstages, mine[256], nmine = 0, s; /* pt_args_parse bounds them by 2^24 */
        int32_t first[257];
        int32_t *ids = (int32_t *)malloc(sizeof(int32_t) * (size_t)B * (size_t)T), *tg = (int32_t *)malloc(sizeof(int32_t) * (size_t)B * (size_t)T);
        int64_t step, next, first_step = 0, last = a.stop_after ? (a.stop_after < a.steps ? a.stop_after : a.steps) : a.steps;
        double flops;
        feed f;
        f.row = NULL, f.sampler = NULL; /* freed at done: */
        memset(&desc, 0, sizeof desc);
        desc.seed = (uint64_t)a.seed, desc.device = a.device, desc.dist = d, desc.precision = a.precision;
        ctx = pt_init(&desc);
        err[0] = 0;
        if (!ctx) snprintf(err, sizeof err, "cannot use device '%s' (the reason is logged above)", a.device ? a.device : "cpu");
        else if (!ids || !tg) snprintf(err, sizeof err, "out of memory");
        /* the data: token shards (made from the text the first time); each DP rank's loader reads its
           slice of every global batch, so any layout sees the data of 03 */
        if (pt_dist_agree_msg(d, !err[0], err, sizeof err) && pt_run_data(ctx, &run, B, T, (uint64_t)a.seed) != PT_OK)
            snprintf(err, sizeof err, "%s", pt_error(ctx));
        cfg = pt_args_gpt(&a, run.vocab);
        cfg.seq_parallel = seq_parallel, cfg.loss_chunk = loss_chunk, cfg.recompute = recompute, cfg.untied = untied;
        if (err[0]) {
        } else if (nst > 256 || nst > cfg.layers)
            snprintf(err, sizeof err, "%d layers cannot fill pp x virtual stages = %d x %d stages (need at least one layer each)", cfg.layers, lay.pp, vstages);
        else if (stage_layers) { /* the split by hand: layers per stage, checked */
            const char *c = stage_layers;
            int k = 0, total = 0;
            first[0] = 0;
            while (*c && k < nst) {
                char *end;
                long n;
                errno = 0;
                n = strtol(c, &end, 10);
                if (n < 1 || errno == ERANGE || n > cfg.layers - total) break;
                total += (int)n, first[++k] = total;
                c = strchr(c, ',');
                if (!c) break;
                c++;
            }
            if (k != nst || total != cfg.layers || (c && *c))
                snprintf(err, sizeof err, "--split %s: expected %d positive layer counts (pp x virtual stages) summing to --layers %d",
                         stage_layers, nst, cfg.layers);
        } else if (balanced) {
            double *cost = (double *)malloc(sizeof(double) * (size_t)cfg.layers), fe, le;
            pt_gpt_stage_costs(&cfg, B, T, cost, &fe, &le);
            pt_pp_split(cfg.layers, nst, cost, fe, le, first, err, sizeof err);
            free(cost);
        } else {
            pt_pp_split(cfg.layers, nst, NULL, 0, 0, first, err, sizeof err);
        }
        if (!err[0]) {
            for (s = 0; s < vstages; s++) mine[nmine++] = s * lay.pp + me.pp;
            m = pt_gpt_new_stages(ctx, &cfg, nst, first, nmine, mine);
            if (m) opt = pt_optim_new(ctx, &od);
            if (opt && loss_scale > 0) {
                pt_loss_scale_desc ls;
                memset(&ls, 0, sizeof ls);
                ls.init = loss_scale;
                if (ls.init > 16777216.0) ls.max_scale = ls.init;
                pt_loss_scale_enable(ctx, &ls);
            }
            if (opt && lay.dp > 1) {
                pt_dp_options dopt;
                memset(&dopt, 0, sizeof dopt);
                dopt.bucket_bytes = (int64_t)bucket_kb << 10, dopt.hier = hier, dopt.compress = compress;
                if ((dp = pt_dp_new_opts(ctx, d, &dopt)) != NULL && zero) pt_dp_zero(dp, opt, zero);
            }
            memset(&pd, 0, sizeof pd);
            pd.kind = kind, pd.micro_batches = mbs, pd.virtual_stages = vstages, pd.forward = stage_fn, pd.user = &f;
            if (opt) pp = pt_pp_new(ctx, &pd);
            pd.micro_batches = 1, pd.kind = PT_PP_FORWARD_ONLY; /* generation: one sequence through the pipeline */
            if (pp) gen = pt_pp_new(ctx, &pd);
            pt_pp_set_dp(pp, dp);
            if (!pp || pt_status_get(ctx) != PT_OK) snprintf(err, sizeof err, "%s", pt_error(ctx));
        }
        if (!pt_dist_agree_msg(d, !err[0], err, sizeof err)) {
            if (rank == 0) fprintf(stderr, "pttrain: %s\n", err);
            fail = 1;
            goto done;
        }
        memset(&f, 0, sizeof f);
        f.m = m, f.T = T, f.mbs = mbs, f.d = d;
        f.row = (float *)malloc(sizeof(float) * (size_t)m->cfg.vocab_padded);
        flops = pt_gpt_flops(&cfg, B, T);
        pt_dist_print(d, NULL);
        if (rank == 0) {
            printf("model: %d layers, width %d, %d heads%s; batch %d x %d bytes (global); layout dp %d x tp %d x pp %d, %s schedule, "
                   "v %d, %d micro-batches x %d rounds, zero %d%s%s, precision %s\n",
                   cfg.layers, cfg.width, cfg.heads, cfg.untied ? ", a separate LM head" : "", B, T, lay.dp, lay.tp, lay.pp, kind == PT_PP_GPIPE ? "GPipe" : kind == PT_PP_1F1B ? "1F1B" : "interleaved",
                   vstages, mbs, accum, zero, hier ? ", hierarchical allreduce" : "", compress ? ", bf16 gradients" : "",
                   pt_args_precision_name(a.precision));
            printf("stages (%s split):", stage_layers ? "given" : balanced ? "balanced" : "equal");
            for (s = 0; s < nst; s++) printf(" %d:[%d,%d) on pp rank %d", s, (int)first[s], (int)first[s + 1], s % lay.pp);
            printf("\n");
            if (lay.pp > 1) pt_pp_schedule_print(pt_pp_get_schedule(pp), NULL);
            fflush(stdout);
        }
        /* --resume (collective: every rank loads its parameters, moments or ZeRO shard, the step and
           the data stream's position); from here on SIGINT / SIGTERM stop the run after a step */
        run.model = &cfg, run.pp = pp; /* the log's bubble comes from the pipeline */
        if (pt_run_start(ctx, opt, &run, a.steps, &first_step) != PT_OK) {
            if (rank == 0 && run.resume) fprintf(stderr, "pttrain: cannot resume from %s: %s\n", run.ckpt_dir, pt_error(ctx));
            else if (rank == 0) fprintf(stderr, "pttrain: %s\n", pt_error(ctx));
            fail = 1;
            goto done;
        }
        f.ids = ids, f.tg = tg, f.base = me.dp * (B / lay.dp);
        for (step = first_step; step < last && !stop; step++) {
            double t0 = pt_time(), dt;
            float lr = pt_lr_at(&sched, step), loss = 0, norm;
            double scale;
            int k, per = B / lay.dp;
            if (pt_loader_next(run.train, ids, tg) != PT_OK) { /* this DP rank's rows of the global batch */
                fprintf(stderr, "pttrain: rank %d: %s\n", rank, pt_error(ctx));
                fail = 1;
            }
            if (!pt_dist_agree(d, !fail)) {
                fail = 1;
                break;
            }
            f.gen = 0, f.T = T;
            pt_zero_grad(ctx);
            for (k = 0; k < accum; k++) {
                f.rows = per / accum, f.row0 = f.base + k * f.rows;
                loss += pt_pp_step(pp, k, accum) / (float)accum;
            }
            if (pt_status_get(ctx) != PT_OK) {
                if (rank == 0) fprintf(stderr, "pttrain: step %lld failed: %s\n", (long long)step, pt_error(ctx));
                fail = 1;
                break;
            }
            /* the health guard (--guard, collective) before the update: warn, skip, or roll back */
            norm = pt_grad_norm(ctx);
            if ((v = pt_run_guard(ctx, opt, &run, step, loss, norm, &next)) < 0) {
                if (rank == 0) fprintf(stderr, "pttrain: step %lld: %s\n", (long long)step, pt_error(ctx));
                fail = 1;
                break;
            }
            if (v == PT_GUARD_ROLLBACK) {
                step = next - 1;
                continue;
            }
            lr = pt_run_lr(&run, lr);
            scale = pt_loss_scale(ctx); /* the scale this step's gradients carried */
            if (v == PT_GUARD_OK) pt_optim_step(opt, lr);
            dt = pt_time() - t0;
            pt_run_line(&run); /* on a terminal: the progress line (--log) out of the way */
            if (rank == 0) {
                pt_pp_stats st = pt_pp_stats_get(pp);
                printf("step %lld loss %.9g lr %.3e norm %.3f ms %.0f tok/s %.0f gflops %.1f bubble %.3f data_ms %.2f", (long long)step, loss, lr,
                       norm, dt * 1e3, (double)B * T / dt, flops / dt * 1e-9, st.bubble, pt_loader_stats_get(run.train).last_wait_s * 1e3);
                if (loss_scale > 0) printf(" loss_scale %g%s", scale, pt_loss_scale(ctx) < scale ? " overflow: update skipped" : "");
                printf("\n");
                fflush(stdout);
            }
            if (val_every > 0 && (step + 1) % val_every == 0 && step + 1 < last) {
                double tv = pt_time();
                float vl = val_loss(pp, &f, &run, per, ids, tg, 16);
                pt_run_val(&run, vl, pt_time() - tv);
                pt_run_line(&run);
                if (rank == 0) printf("val step %lld val_loss %.4f\n", (long long)(step + 1), vl);
            }
            /* the ranks agree to stop (a signal may reach only some of them), then save together when
               due; a checkpoint of step k holds the state after k optimizer steps */
            if ((stop = pt_run_step_end(ctx, opt, &run, step + 1, a.steps, loss, norm, lr)) < 0) {
                if (rank == 0) fprintf(stderr, "pttrain: saving the checkpoint of step %lld failed: %s\n", (long long)(step + 1), pt_error(ctx));
                fail = 1;
                break;
            }
        }
        if (!fail && !stop) {
            pt_loader_stats ls = pt_loader_stats_get(run.train);
            double tv = pt_time();
            float vl = val_loss(pp, &f, &run, B / lay.dp, ids, tg, 32);
            pt_run_val(&run, vl, pt_time() - tv); /* after the last step: the log's eval event */
            pt_run_line(&run);
            if (rank == 0 && ls.batches) printf("data: rank 0 waited %.1f ms in all, %.3f ms per batch\n", ls.wait_s * 1e3, ls.wait_s * 1e3 / (double)ls.batches);
            if (rank == 0) printf("val_loss %.4f\n", vl);
        }
        if (!fail && !stop && sample > 0 && gen) {
            /* generation through the pipeline: one sequence, forward-only, the last stage picks a
               token and the pipeline's last rank shares it */
            int32_t *out = (int32_t *)malloc(sizeof(int32_t) * (size_t)(sample + 1));
            pt_sample_params sp;
            memset(&sp, 0, sizeof sp);
            sp.temperature = (float)temperature, sp.top_k = top_k, sp.top_p = (float)top_p, sp.min_p = (float)min_p;
            sp.repeat_penalty = (float)repeat_penalty, sp.repeat_last_n = repeat_last_n, sp.seed = (uint64_t)a.seed;
            f.sampler = pt_sampler_new(ctx, &sp, m->cfg.vocab); /* the same on every rank: only the last stage's picks */
            out[0] = '\n';
            f.gen = 1, f.mbs = 1, f.base = f.row0 = 0, f.rows = 1, f.hist = out;
            for (i = 1; i <= sample && f.sampler; i++) {
                int n = i < T ? i : T;
                f.T = n, f.ids = out + i - n, f.nhist = i;
                pt_pp_eval(gen);
#ifdef PTRAIN_MPI
                MPI_Bcast(&f.next, 1, MPI_INT32_T, lay.pp - 1, *(MPI_Comm *)pt_dist_comm(d, PT_COMM_PP));
#endif
                if (f.next < 0) break; /* the last stage's sampler refused the row */
                out[i] = f.next;
            }
            if (i <= sample) {
                if (rank == 0) fprintf(stderr, "pttrain: sampling failed at token %d: %s\n", i, pt_error(ctx));
                fail = 1;
            } else if (rank == 0) {
                int64_t nw, nr;
                char werr[300];
                printf("sampled %d tokens at temperature %g", sample, temperature);
                if (temperature > 0 && top_k > 0) printf(", top-k %d", top_k);
                if (temperature > 0 && top_p < 1) printf(", top-p %g", top_p);
                if (temperature > 0 && min_p > 0) printf(", min-p %g", min_p);
                if (repeat_penalty != 1) printf(", repeat penalty %g over %d tokens", repeat_penalty, repeat_last_n);
                printf(" (seed %lld)\n", (long long)a.seed);
                printf("sample:\n");
                pt_run_print(&run, out + 1, sample, stdout);
                printf("\n");
                if (pt_run_word_share(&run, out + 1, sample, getenv("PTRAIN_DICT"), &nw, &nr, werr, sizeof werr) == 0)
                    printf("words: %lld of the sample's %lld letter runs (%.1f%%) are dictionary words\n", (long long)nw, (long long)nr,
                           nr ? 100.0 * (double)nw / (double)nr : 0.0);
                else printf("words: not counted: %s\n", werr);
            }
            free(out);
        }
    done:
        pt_run_free(&run);
        free(f.row);
        pt_sampler_free(f.sampler);
        pt_pp_free(gen);
        pt_pp_free(pp);
        pt_gpt_free(m);
        pt_shutdown(ctx); /* frees the reducer too, without making the sharded slabs whole again */
        free(ids);
        free(tg);
    }
    pt_dist_finalize(d);
    return fail;
}
