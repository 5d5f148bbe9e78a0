/* ptckpt.c - ptrain.h checkpoints from the command line: inspect, verify, export to safetensors
   (for Python's `safetensors` package, torch, numpy), import from safetensors.

   Build: cc -O2 -I. tools/ptckpt.c -o build/ptckpt -lm   (or `make tools`)

   ptckpt inspect DIR|STEPDIR     step, layout, model configuration, optimizer, the tokenizer it
                                  carries, data files, and per global tensor: name, shape, dtype,
                                  pieces, bytes; totals. DIR means
                                  the checkpoint DIR/latest names (else the newest step_*).
   ptckpt verify DIR|STEPDIR      every CRC32C (manifest, data files, the tokenizer); DIR: every
                                  step_* in it. Exit 0 when all are good, 1 with a message naming
                                  the bad file.
   ptckpt export DIR|STEPDIR OUT.safetensors [--dtype f32|bf16] [--moments]
                                  every global tensor assembled from its pieces (TP shards, ZeRO
                                  ranges, a tied embedding once) under its parameter name and global
                                  shape (a padded vocabulary stays padded: wte has vocab_padded rows,
                                  metadata "vocab" says how many are real); bf16 rounds to nearest
                                  even; --moments adds the optimizer moments as optim.m.<name>,
                                  optim.v.<name>. Metadata: format, step, layout, the model
                                  configuration, optimizer. OUT is replaced only when complete.
   ptckpt import IN.safetensors OUTDIR [--step K] [--vocab N] [--vocab-padded N] [--max-seq N]
                 [--layers N] [--width N] [--heads N] [--untied 0|1]
                                  a 1-rank checkpoint (parameters only) of the GPT that the metadata
                                  (or the flags, which win) describe, every parameter taken from the
                                  tensor of its name (F32, BF16 or F16); a missing, extra or
                                  differently shaped tensor is refused, naming it and both shapes,
                                  before the model is made (pt_safetensors_check: a configuration
                                  out of range or larger than the file holds allocates nothing).
                                  The step is --step, else the metadata's, else 0. pt_ckpt_load with
                                  an optimizer starts its moments at zero.
   Exit status: 0 done, 1 a bad checkpoint or file, 2 bad usage. */
#define _POSIX_C_SOURCE 200809L
#define PTRAIN_IMPLEMENTATION
#include "ptrain.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int usage(void) {
    fprintf(stderr, "usage: ptckpt inspect DIR|STEPDIR\n"
                    "       ptckpt verify DIR|STEPDIR\n"
                    "       ptckpt export DIR|STEPDIR OUT.safetensors [--dtype f32|bf16] [--moments]\n"
                    "       ptckpt import IN.safetensors OUTDIR [--step K] [--vocab N] [--vocab-padded N] [--max-seq N]\n"
                    "                     [--layers N] [--width N] [--heads N] [--untied 0|1]\n");
    return 2;
}

static const char *kind_name(int k) { return k == 0 ? "param" : k == 1 ? "m" : "v"; }

static void human(char *out, size_t n, double b) {
    if (b >= 1e9) snprintf(out, n, "%.2f GB", b / 1e9);
    else if (b >= 1e6) snprintf(out, n, "%.2f MB", b / 1e6);
    else if (b >= 1e3) snprintf(out, n, "%.1f kB", b / 1e3);
    else snprintf(out, n, "%.0f B", b);
}

static int cmd_inspect(const char *path) {
    pt_ckpt_info in;
    char err[1024], dir[1024], sh[128], hb[32];
    int64_t tot[3] = {0, 0, 0}, files = 0, numel[3] = {0, 0, 0};
    int i, d, cnt[3] = {0, 0, 0};
    if (pt_ckpt_step_dir(path, dir, sizeof dir) != PT_OK || pt_ckpt_info_read(dir, &in, err, sizeof err) != PT_OK) {
        fprintf(stderr, "ptckpt inspect: %s\n", pt_ckpt_step_dir(path, dir, sizeof dir) != PT_OK ? dir : err);
        return 1;
    }
    printf("checkpoint %s\n", dir);
    printf("step       %lld\n", (long long)in.step);
    printf("layout     dp=%d tp=%d pp=%d (world %d)\n", in.dp, in.tp, in.pp, in.world);
    if (in.has_model)
        printf("model      vocab=%d vocab_padded=%d max_seq=%d layers=%d width=%d heads=%d dropout=%g untied=%d\n", in.model.vocab,
               in.model.vocab_padded, in.model.max_seq, in.model.layers, in.model.width, in.model.heads, (double)in.model.dropout, in.model.untied);
    else printf("model      (not recorded)\n");
    if (in.optim_kind >= 0) printf("optimizer  %s, %lld steps\n", in.optim_kind == PT_OPTIM_ADAMW ? "adamw" : "sgd", (long long)in.optim_steps);
    else printf("optimizer  none (parameters only)\n");
    if (in.tokenizer_vocab > 0) printf("tokenizer  BPE, vocabulary %d (%s: pt_ckpt_tokenizer decodes the checkpoint's tokens)\n", in.tokenizer_vocab, PT_TOKENIZER_FILE);
    else printf("tokenizer  none (byte-level data, or saved without one)\n");
    printf("files      %d\n", in.nfiles);
    for (i = 0; i < in.nfiles; i++) {
        human(hb, sizeof hb, (double)in.files[i].bytes);
        printf("  %-16s %12lld bytes (%s)  crc32c %08x\n", in.files[i].name, (long long)in.files[i].bytes, hb, in.files[i].crc32c);
        files += in.files[i].bytes;
    }
    printf("tensors    %d global (name, kind, shape, dtype, pieces, bytes)\n", in.ntensors);
    for (i = 0; i < in.ntensors; i++) {
        const pt_ckpt_tensor_info *t = &in.tensors[i];
        int64_t n = 1;
        size_t k = 0;
        for (d = 0; d < t->ndim; d++) n *= t->shape[d], k += (size_t)snprintf(sh + k, sizeof sh - k, d ? "x%lld" : "%lld", (long long)t->shape[d]);
        printf("  %-24s %-5s %-14s f32 %3d %12lld\n", t->name, kind_name(t->kind), sh, t->pieces, (long long)t->bytes);
        tot[t->kind] += t->bytes, cnt[t->kind]++, numel[t->kind] += n;
    }
    for (i = 0; i < 3; i++)
        if (cnt[i]) {
            human(hb, sizeof hb, (double)tot[i]);
            printf("total %-5s %d tensors, %lld elements, %lld bytes stored (%s)\n", kind_name(i), cnt[i], (long long)numel[i], (long long)tot[i], hb);
        }
    human(hb, sizeof hb, (double)files);
    printf("total      %lld bytes in data files (%s), %d state entries (%lld bytes)\n", (long long)files, hb, in.nstate, (long long)in.state_bytes);
    pt_ckpt_info_free(&in);
    return 0;
}

static int verify_one(const char *dir) {
    char err[1024];
    pt_ckpt_info in;
    if (pt_ckpt_verify(dir, err, sizeof err) != PT_OK) {
        printf("BAD %s: %s\n", dir, err);
        return 0;
    }
    if (pt_ckpt_info_read(dir, &in, err, sizeof err) == PT_OK) {
        printf("OK  %s (step %lld, %d data files, every CRC32C matches)\n", dir, (long long)in.step, in.nfiles);
        pt_ckpt_info_free(&in);
    }
    return 1;
}

static int cmd_verify(const char *path) {
    char p[1100];
    DIR *dd;
    struct dirent *e;
    int n = 0, bad = 0;
    struct stat sb;
    snprintf(p, sizeof p, "%s/manifest", path);
    if (stat(p, &sb) == 0) /* not opened here: a FIFO would block (the library refuses what is not a regular file) */
        return verify_one(path) ? 0 : 1;
    if (!(dd = opendir(path))) {
        fprintf(stderr, "ptckpt verify: %s: no checkpoint (not a directory)\n", path);
        return 1;
    }
    while ((e = readdir(dd)) != NULL)
        if (!strncmp(e->d_name, "step_", 5)) {
            snprintf(p, sizeof p, "%s/%s", path, e->d_name);
            n++;
            bad += !verify_one(p);
        }
    closedir(dd);
    if (!n) {
        fprintf(stderr, "ptckpt verify: %s: no checkpoint (no manifest, no step_* directory)\n", path);
        return 1;
    }
    return bad ? 1 : 0;
}

static int cmd_export(int argc, char **argv) {
    pt_ckpt_export_opts o;
    char err[1024];
    int i;
    memset(&o, 0, sizeof o);
    if (argc < 2) return usage();
    for (i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--dtype") && i + 1 < argc) {
            i++;
            if (!strcmp(argv[i], "bf16")) o.bf16 = 1;
            else if (strcmp(argv[i], "f32")) {
                fprintf(stderr, "ptckpt export: --dtype %s: expected f32 or bf16\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(argv[i], "--moments")) o.moments = 1;
        else return usage();
    }
    if (pt_ckpt_export(argv[0], argv[1], &o, err, sizeof err) != PT_OK) {
        fprintf(stderr, "ptckpt export: %s\n", err);
        return 1;
    }
    printf("wrote %s (%s%s)\n", argv[1], o.bf16 ? "BF16" : "F32", o.moments ? ", with the optimizer moments" : "");
    return 0;
}

static int cmd_import(int argc, char **argv) {
    static const char *const flags[] = {"--vocab", "--vocab-padded", "--max-seq", "--layers", "--width", "--heads", "--untied", "--step"};
    long long val[8];
    int given[8] = {0}, i, k, rc = 1;
    char err[1024];
    pt_gpt_config cfg;
    int64_t step = -1;
    pt_status st;
    pt_desc desc;
    pt_ctx *ctx;
    pt_gpt *m;
    pt_ckpt_opts co;
    if (argc < 2) return usage();
    for (i = 2; i < argc; i++) {
        char *end;
        for (k = 0; k < 8 && strcmp(argv[i], flags[k]); k++) {}
        if (k == 8 || i + 1 >= argc) return usage();
        errno = 0;
        val[k] = strtoll(argv[++i], &end, 10);
        if (*end || end == argv[i] || errno == ERANGE || val[k] < 0 || val[k] > 2147483647) {
            fprintf(stderr, "ptckpt import: %s %s: expected an integer in 0..2147483647\n", flags[k], argv[i]);
            return 2;
        }
        given[k] = 1;
    }
    st = pt_safetensors_config(argv[0], &cfg, &step, err, sizeof err);
    if (st != PT_OK) { /* the flags may supply what the metadata lacks, not repair a broken file */
        pt_gpt_config c2;
        memset(&c2, 0, sizeof c2);
        if (strstr(err, "__metadata__ has no") == NULL || !(given[0] && given[2] && given[3] && given[4] && given[5])) {
            fprintf(stderr, "ptckpt import: %s\n", err);
            return 1;
        }
        cfg = c2;
    }
    if (given[0]) cfg.vocab = (int32_t)val[0];
    if (given[1]) cfg.vocab_padded = (int32_t)val[1];
    if (given[2]) cfg.max_seq = (int32_t)val[2];
    if (given[3]) cfg.layers = (int32_t)val[3];
    if (given[4]) cfg.width = (int32_t)val[4];
    if (given[5]) cfg.heads = (int32_t)val[5];
    if (given[6]) cfg.untied = (int32_t)val[6];
    if (given[7]) step = val[7];
    if (step < 0) step = 0;
    /* the configuration (metadata and flags) against the file before anything of its size is made */
    if ((st = pt_safetensors_check(argv[0], &cfg, err, sizeof err)) != PT_OK) {
        fprintf(stderr, "ptckpt import: %s\n", err);
        return 1;
    }
    memset(&desc, 0, sizeof desc);
    desc.device = "cpu";
    if (!(ctx = pt_init(&desc))) {
        fprintf(stderr, "ptckpt import: cannot create a context\n");
        return 1;
    }
    if ((m = pt_gpt_new(ctx, &cfg)) == NULL) fprintf(stderr, "ptckpt import: the model of the configuration: %s\n", pt_error(ctx));
    else if (pt_safetensors_load(ctx, argv[0]) != PT_OK) fprintf(stderr, "ptckpt import: %s\n", pt_error(ctx));
    else {
        memset(&co, 0, sizeof co);
        co.model = &m->cfg;
        if (pt_ckpt_save(ctx, NULL, argv[1], step, &co) != PT_OK) fprintf(stderr, "ptckpt import: %s\n", pt_error(ctx));
        else {
            printf("wrote %s/step_%09lld (%d parameters, %lld elements, no optimizer state)\n", argv[1], (long long)step, pt_param_count(ctx),
                   (long long)pt_param_numel(ctx));
            rc = 0;
        }
    }
    if (m) pt_gpt_free(m);
    pt_shutdown(ctx);
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 3) return usage();
    if (!strcmp(argv[1], "inspect") && argc == 3) return cmd_inspect(argv[2]);
    if (!strcmp(argv[1], "verify") && argc == 3) return cmd_verify(argv[2]);
    if (!strcmp(argv[1], "export")) return cmd_export(argc - 2, argv + 2);
    if (!strcmp(argv[1], "import")) return cmd_import(argc - 2, argv + 2);
    return usage();
}
