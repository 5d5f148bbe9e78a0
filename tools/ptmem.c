/* ptmem.c - predicted memory per rank of a GPT training run (pt_mem_estimate), before running it.
   Build: cc -O2 -I. tools/ptmem.c -o build/ptmem -lm                        (or: make tools)
   Usage: ptmem [--layers N] [--width N] [--heads N] [--seq N] [--max-seq N] [--batch N] [--vocab N] [--untied]
                [--dp N] [--tp N] [--pp N] [--zero 0|1|2|3] [--micro-batches M] [--schedule gpipe|1f1b|interleaved]
                [--virtual-stages V] [--optim adamw|sgd] [--compress] [--bucket-kb N] [--threads N]
                [--precision f32|bf16|fp16] [--recompute none|selective|full] [--seq-parallel] [--loss-chunk N] [--layer-table]
   The flags mean what they mean in tools/pttrain.c: --batch is the global batch (sequences per
   step over all DP ranks), so one micro-batch holds batch / (dp * micro-batches) sequences. Prints one
   row per pipeline rank (the first holds the embedding, the last the head): parameters, gradients,
   optimizer state, activations of one micro-batch x micro-batches in flight, workspace, the DP
   reducer's buffers, the total pt_mem counts and its expected peak; then what ZeRO-1/2/3 would save on
   this layout. --layer-table adds one transformer layer's activations (pt_mem_layer): the terms of
   Korthikanti et al. 2022 by op group, next to ptrain's measured bytes per layer, for no parallelism,
   TP, TP + SP, selective and full recomputation at the plan's tp (the plan's row marked *). Exit
   status: 0, or 2 with a message on a bad flag or an impossible plan. */
#define PTRAIN_IMPLEMENTATION
#include "ptrain.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptflags.h"

static double mib(int64_t b) { return (double)b / 1048576.0; }

/* one layer's activations per technique at the plan's tp: the paper's terms and ptrain's bytes */
static int layer_table(const pt_gpt_config *cfg, const pt_mem_plan *plan) {
    static const struct { const char *name; int tp, sp, rc; } rows[] = {
        {"none", 0, 0, PT_RECOMPUTE_NONE},          {"TP", 1, 0, PT_RECOMPUTE_NONE},
        {"TP + SP", 1, 1, PT_RECOMPUTE_NONE},       {"TP + selective", 1, 0, PT_RECOMPUTE_SELECTIVE},
        {"TP + SP + selective", 1, 1, PT_RECOMPUTE_SELECTIVE}, {"full", 1, -1, PT_RECOMPUTE_FULL}};
    int k, g, tp = plan->tp > 1 ? plan->tp : 1, sp = cfg->seq_parallel && tp > 1, rc = plan->recompute ? plan->recompute : cfg->recompute;
    int eb = plan->precision != PT_F32 && !plan->act_f32 ? 2 : 4; /* bf16 / fp16: the blocks' kept activations in 16 bits */
    printf("one transformer layer's activations, one micro-batch of %d x %d tokens on one TP rank (MiB): the terms of Korthikanti et al. 2022\n"
           "by op group at ptrain's %d-byte elements (their masks 1 byte; the layer input 4), their sum, the paper's 16-bit bytes; ptrain's "
           "measured bytes per layer\n", plan->batch, plan->seq, eb);
    printf("  technique (t = %d)     formula                     layernorm attention  scores      mlp    input   at %d B   16-bit    ptrain  ptrain/%dB\n", tp,
           eb, eb);
    for (k = 0; k < (int)(sizeof rows / sizeof rows[0]); k++) {
        pt_gpt_config c = *cfg;
        pt_mem_plan p = *plan;
        pt_mem_layer_out o;
        char err[512], name[40];
        if (tp == 1 && rows[k].tp && rows[k].rc != PT_RECOMPUTE_FULL && (rows[k].sp || rows[k].rc == PT_RECOMPUTE_NONE)) continue; /* = none */
        p.tp = rows[k].tp ? tp : 1, p.recompute = rows[k].rc, c.recompute = PT_RECOMPUTE_NONE;
        c.seq_parallel = rows[k].sp < 0 ? cfg->seq_parallel : rows[k].sp;
        snprintf(name, sizeof name, "%s", tp == 1 && rows[k].rc == PT_RECOMPUTE_SELECTIVE ? "selective" : rows[k].name);
        if (rows[k].rc == PT_RECOMPUTE_FULL && sp) snprintf(name, sizeof name, "TP + SP + full");
        else if (rows[k].rc == PT_RECOMPUTE_FULL && tp > 1) snprintf(name, sizeof name, "TP + full");
        if (pt_mem_layer(&c, &p, &o, err, sizeof err) != PT_OK) {
            printf("%c %-20s (not estimated: %s)\n", ' ', name, err);
            continue;
        }
        printf("%c %-20s %-27s", o.tp == tp && o.seq_parallel == sp && o.recompute == rc ? '*' : ' ', name, o.formula);
        for (g = 0; g < PT_KG_COUNT; g++) printf(" %8.2f", o.at_elem[g] / 1048576.0);
        printf(" %8.2f %8.2f  %8.2f  %9.2f\n", o.at_elem_total / 1048576.0, o.paper_total / 1048576.0, mib(o.ptrain), (double)o.ptrain / o.at_elem_total);
    }
    if (tp == 1) printf("  (--tp N adds the tensor-parallel rows)\n");
    printf("  (ptrain keeps no T x T scores; its selective recomputes the layernorms, GELU, dropout and an add, its full keeps the block output\n"
           "   and, under TP, the summed row-parallel outputs; docs/memory.md has the paper's terms op by op)\n");
    return 0;
}

/* the command line: the model and the plan, as pttrain would run them */
typedef struct mem_opts {
    pt_gpt_config cfg;
    pt_mem_plan plan;
    long batch, maxseq, bucket_kb;
    int untied, ltable;
} mem_opts;

static const char usage_text[] =
    "usage: ptmem [--layers N] [--width N] [--heads N] [--seq N] [--max-seq N] [--batch N (global)] [--vocab N] [--untied]\n"
    "             [--dp N] [--tp N] [--pp N] [--zero 0|1|2|3] [--micro-batches M] [--schedule gpipe|1f1b|interleaved]\n"
    "             [--virtual-stages V] [--optim adamw|sgd] [--compress] [--bucket-kb N] [--threads N]\n"
    "             [--precision f32|bf16|fp16] [--recompute none|selective|full] [--seq-parallel] [--loss-chunk N] [--layer-table]\n";

/* parse_flags: the command line into o, the plan's per-rank batch from the global one; PTF_GO, or
   the exit status */
static int parse_flags(mem_opts *o, int argc, char **argv) {
    static const int recompute[] = {PT_RECOMPUTE_NONE, PT_RECOMPUTE_SELECTIVE, PT_RECOMPUTE_FULL}, schedule[] = {PT_PP_GPIPE, PT_PP_1F1B, PT_PP_INTERLEAVED},
                     optim[] = {PT_OPTIM_ADAMW, PT_OPTIM_SGD}, precision[] = {PT_F32, PT_BF16, PT_F16};
    pt_gpt_config *cfg = &o->cfg;
    pt_mem_plan *plan = &o->plan;
    const long big = 0x7fffffffL;
    int rc;
    const ptf_flag flags[] = {PTF_INT("--layers", &cfg->layers, 1, big),
                              PTF_INT("--width", &cfg->width, 1, big),
                              PTF_INT("--heads", &cfg->heads, 1, big),
                              PTF_INT("--seq", &plan->seq, 1, big),
                              PTF_LONG("--max-seq", &o->maxseq, 1, big),
                              PTF_LONG("--batch", &o->batch, 1, big),
                              PTF_INT("--vocab", &cfg->vocab, 1, big),
                              PTF_BOOL("--untied", &o->untied),
                              PTF_INT("--dp", &plan->dp, 1, big),
                              PTF_INT("--tp", &plan->tp, 1, big),
                              PTF_INT("--pp", &plan->pp, 1, big),
                              PTF_INT("--zero", &plan->zero, 0, big),
                              PTF_INT("--micro-batches", &plan->micro_batches, 1, big),
                              PTF_CHOICE("--schedule", &plan->schedule, "gpipe|1f1b|interleaved", schedule),
                              PTF_INT("--virtual-stages", &plan->virtual_stages, 1, big),
                              PTF_CHOICE("--optim", &plan->optim, "adamw|sgd", optim),
                              PTF_BOOL("--compress", &plan->compress),
                              PTF_LONG("--bucket-kb", &o->bucket_kb, 0, big),
                              PTF_INT("--threads", &plan->threads, 1, big),
                              PTF_CHOICE("--precision", &plan->precision, "f32|bf16|fp16", precision),
                              PTF_CHOICE("--recompute", &plan->recompute, "none|selective|full", recompute),
                              PTF_BOOL("--seq-parallel", &cfg->seq_parallel),
                              PTF_INT("--loss-chunk", &cfg->loss_chunk, 0, big),
                              PTF_BOOL("--layer-table", &o->ltable),
                              PTF_END};
    memset(o, 0, sizeof *o);
    o->batch = 16;
    cfg->vocab = 256, cfg->layers = 4, cfg->width = 256, cfg->heads = 8;
    plan->dp = plan->tp = plan->pp = 1, plan->seq = 256, plan->schedule = PT_PP_1F1B, plan->optim = PT_OPTIM_ADAMW, plan->threads = 1;
    if ((rc = ptf_parse("ptmem", usage_text, flags, argc, argv)) != PTF_GO) return rc;
    cfg->untied = o->untied;
    plan->bucket_bytes = (int64_t)o->bucket_kb << 10;
    if (!plan->micro_batches) plan->micro_batches = plan->pp;
    cfg->max_seq = (int32_t)(o->maxseq ? o->maxseq : plan->seq);
    if (o->batch % ((long)plan->dp * plan->micro_batches)) {
        fprintf(stderr, "ptmem: --batch %ld (global) must split into dp %d x micro-batches %d equal micro-batches\n", o->batch, plan->dp, plan->micro_batches);
        return 2;
    }
    plan->batch = (int32_t)(o->batch / ((long)plan->dp * plan->micro_batches));
    return PTF_GO;
}

/* print_ranks: the model and layout lines, then one row per pipeline rank; 0, or 2 after the message */
static int print_ranks(const mem_opts *m) {
    const pt_gpt_config *cfg = &m->cfg;
    const pt_mem_plan *plan = &m->plan;
    pt_mem_estimate_out o;
    char err[512];
    int r;
    if (pt_mem_estimate(cfg, plan, -1, &o, err, sizeof err) != PT_OK) {
        fprintf(stderr, "ptmem: %s\n", err);
        return 2;
    }
    printf("model: %d layers, width %d, %d heads, vocab %d%s; micro-batch %d x %d tokens, %d per step per DP rank\n", cfg->layers, cfg->width,
           cfg->heads, cfg->vocab, m->untied ? " (untied head)" : "", plan->batch, plan->seq, plan->micro_batches);
    printf("layout: dp %d x tp %d x pp %d%s%s, ZeRO-%d, %s, f32%s%s%s%s\n", plan->dp, plan->tp, plan->pp,
           plan->pp > 1 ? (plan->schedule == PT_PP_GPIPE ? ", GPipe" : plan->schedule == PT_PP_1F1B ? ", 1F1B" : ", interleaved 1F1B") : "",
           plan->pp > 1 && plan->schedule == PT_PP_INTERLEAVED ? " (virtual stages)" : "", plan->zero, plan->optim == PT_OPTIM_ADAMW ? "AdamW" : "SGD",
           plan->compress ? " (bf16 DP gradients)" : "", plan->recompute == PT_RECOMPUTE_FULL ? ", full recomputation" : plan->recompute ? ", selective recomputation" : "",
           cfg->seq_parallel && plan->tp > 1 ? ", sequence parallel" : "", cfg->loss_chunk ? ", chunked loss" : "");
    printf("MiB per rank      params    grads    optim   act/mb x flight = activations  workspace  dp extra  total+dp   peak+dp\n");
    for (r = 0; r < plan->pp; r++) {
        const char *kind;
        if (pt_mem_estimate(cfg, plan, r, &o, err, sizeof err) != PT_OK) return fprintf(stderr, "ptmem: %s\n", err), 2;
        kind = o.first_stage && o.last_stage ? "embed+head" : o.first_stage ? "embedding" : o.last_stage ? "head" : "middle";
        printf("pp %-3d %-10s %8.1f %8.1f %8.1f %8.1f x %-3d %13.1f %10.2f %9.1f %9.1f %9.1f\n", r, kind, mib(o.params), mib(o.grads), mib(o.optim),
               mib(o.act_per_mb), o.in_flight, mib(o.activations), mib(o.workspace), mib(o.dp_extra), mib(o.total + o.dp_extra),
               mib(o.peak_total + o.dp_extra));
    }
    return 0;
}

/* print_zero: one micro-batch's graph, and with dp > 1 what each ZeRO stage saves on the largest
   rank; 0, or 2 after the message */
static int print_zero(const mem_opts *m) {
    const pt_gpt_config *cfg = &m->cfg;
    const pt_mem_plan *plan = &m->plan;
    pt_mem_estimate_out o, z[4];
    char err[512];
    int zk, nz = plan->compress || plan->hier ? 3 : 4; /* ZeRO-3 runs without compression or hier */
    pt_mem_estimate(cfg, plan, -1, &o, err, sizeof err);
    printf("one micro-batch's graph: %.1f MiB of arena (%s the 64 MiB chunk) + %.1f MiB of gradient blocks\n", mib(o.act_pass),
           o.act_pass < o.act_per_mb - o.act_grad_blocks ? "within" : "above", mib(o.act_grad_blocks)); /* within: the arena is the chunk */
    if (plan->dp <= 1) return 0;
    printf("what ZeRO saves on the largest rank (pp %d), total incl. the DP reducer's buffers:\n", o.pp_rank);
    for (zk = 0; zk < nz; zk++) {
        pt_mem_plan q = *plan;
        q.zero = zk;
        if (pt_mem_estimate(cfg, &q, o.pp_rank, &z[zk], err, sizeof err) != PT_OK) return fprintf(stderr, "ptmem: %s\n", err), 2;
    }
    for (zk = 0; zk < nz; zk++) {
        int64_t t = z[zk].total + z[zk].dp_extra, t0 = z[0].total + z[0].dp_extra;
        printf("  ZeRO-%d: parameters %.1f MiB (%.1f in use), optimizer %.1f MiB, gradients %.1f MiB, reducer %.1f MiB, total %.1f MiB "
               "(%+.1f MiB, %+.1f%% vs ZeRO-0)\n", zk, mib(z[zk].params), mib(z[zk].params_gathered), mib(z[zk].optim), mib(z[zk].grads),
               mib(z[zk].dp_extra), mib(t), mib(t - t0), 100.0 * (double)(t - t0) / (double)t0);
    }
    printf("  (ZeRO-1 keeps 1/dp of the moments; ZeRO-2 also keeps only a 1/dp gradient shard plus bucket buffers, which cost "
           "some back (bf16: the full gradient slab stays, with a staging ring); ZeRO-3 also keeps 1/dp of the parameters between uses, "
           "gathering each block's just before it runs: 'in use' is the most held at once)\n");
    return 0;
}

int main(int argc, char **argv) {
    mem_opts m;
    int rc;
    if ((rc = parse_flags(&m, argc, argv)) != PTF_GO) return rc;
    if ((rc = print_ranks(&m)) || (rc = print_zero(&m))) return rc;
    return m.ltable ? layer_table(&m.cfg, &m.plan) : 0;
}
