/* ptckpt.c - ptrain.h checkpoints from the command line: inspect, verify, export to safetensors
   (for Python's `safetensors` package, torch, numpy) or GGUF (llama.cpp's gpt2), import from both.

   Build: cc -O2 -I. tools/ptckpt.c -o build/ptckpt -lm   (or `make tools`)

   ptckpt inspect DIR|STEPDIR     step, layout, model configuration, optimizer, the tokenizer it
                                  carries, data files, and per global tensor: name, shape, dtype,
                                  pieces, bytes; totals. DIR means
                                  the checkpoint DIR/latest names (else the newest step_*).
   ptckpt inspect FILE.gguf       a GGUF file: version, alignment, every metadata key with its type and
                                  value (arrays: length and the first values), every tensor with its
                                  type, dims (ne[0] first) and bytes; totals.
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
   ptckpt export --format gguf [--type f32|f16|bf16|q8_0|q4_0] [--tokenizer FILE] DIR|STEPDIR OUT.gguf
                                  the checkpoint as a GGUF of llama.cpp's gpt2 architecture (see
                                  pt_gguf_export: tensor names, keys, GPT-2's byte-level vocabulary;
                                  --type the matrices' format, default f32; q4_0 keeps the LM head
                                  q8_0). --format defaults to gguf for an OUT ending in .gguf, else
                                  safetensors. A BPE model's vocabulary: the tokenizer the checkpoint
                                  carries, or --tokenizer FILE (tokenizer.bin of its shards).
   ptckpt import IN.gguf OUTDIR [--step K]
                                  a 1-rank checkpoint of the gpt2 GGUF (pt_gguf_load: shapes, types
                                  and every tensor checked; matrices dequantized to f32; the
                                  vocabulary's rows are the model's vocab_padded); the step is --step,
                                  else the file's ptrain.step, else 0.
   ptckpt import IN.safetensors OUTDIR [--step K] [--vocab N] [--vocab-padded N] [--max-seq N]
                 [--layers N] [--width N] [--heads N] [--untied 0|1] [--tokenizer FILE]
                                  a 1-rank checkpoint (parameters only) of the GPT that the metadata
                                  (or the flags, which win) describe, every parameter taken from the
                                  tensor of its name (F32, BF16 or F16); a missing, extra or
                                  differently shaped tensor is refused, naming it and both shapes,
                                  before the model is made (pt_safetensors_check: a configuration
                                  out of range or larger than the file holds allocates nothing).
                                  The step is --step, else the metadata's, else 0. pt_ckpt_load with
                                  an optimizer starts its moments at zero. --tokenizer FILE: the
                                  checkpoint carries that tokenizer (a BPE model's: GPT-2's from
                                  `ptckpt import vocab.json merges.txt FILE`; its vocabulary at most
                                  the model's), which export --format gguf then uses.
   ptckpt import VOCAB.json MERGES.txt OUT.bin
                                  GPT-2's own tokenizer files (Hugging Face's vocab.json + merges.txt)
                                  as a ptrain tokenizer file (pt_tokenizer_load_gpt2: the files' ids
                                  kept, ids 0..255 the bytes in GPT-2's order; <|endoftext|> and other
                                  ids past the merges' are not the tokenizer's), for ptckpt export
                                  --tokenizer, bench_decode --tokenizer, pt_tokenizer_load. A
                                  malformed file is refused naming the file, the line and what was
                                  expected. Prints the vocabulary.
   ptckpt encode TOKENIZER TEXT   the ids of TEXT under a tokenizer file (pt_tokenizer_encode), one
                                  line, then the text they decode to (pt_tokenizer_decode).
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
    fprintf(stderr, "usage: ptckpt inspect DIR|STEPDIR|FILE.gguf\n"
                    "       ptckpt verify DIR|STEPDIR\n"
                    "       ptckpt export DIR|STEPDIR OUT.safetensors [--dtype f32|bf16] [--moments]\n"
                    "       ptckpt export --format gguf [--type f32|f16|bf16|q8_0|q4_0] [--tokenizer FILE] DIR|STEPDIR OUT.gguf\n"
                    "       ptckpt import IN.gguf OUTDIR [--step K]\n"
                    "       ptckpt import VOCAB.json MERGES.txt OUT.bin\n"
                    "       ptckpt encode TOKENIZER TEXT\n"
                    "       ptckpt import IN.safetensors OUTDIR [--step K] [--vocab N] [--vocab-padded N] [--max-seq N]\n"
                    "                     [--layers N] [--width N] [--heads N] [--untied 0|1] [--tokenizer FILE]\n");
    return 2;
}

/* 1 when path is a regular file that starts with GGUF's magic */
static int is_gguf(const char *path) {
    struct stat sb;
    char m[4];
    FILE *f;
    int yes = 0;
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode) || !(f = fopen(path, "rb"))) return 0;
    yes = fread(m, 1, 4, f) == 4 && !memcmp(m, "GGUF", 4);
    fclose(f);
    return yes;
}

static const char *kind_name(int k) { return k == 0 ? "param" : k == 1 ? "m" : "v"; }

static void human(char *out, size_t n, double b) {
    if (b >= 1e9) snprintf(out, n, "%.2f GB", b / 1e9);
    else if (b >= 1e6) snprintf(out, n, "%.2f MB", b / 1e6);
    else if (b >= 1e3) snprintf(out, n, "%.1f kB", b / 1e3);
    else snprintf(out, n, "%.0f B", b);
}

static int cmd_inspect_gguf(const char *path) {
    static const char *const vt[13] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"};
    char err[1024], hb[32];
    pt_gguf *g = pt_gguf_open(path, err, sizeof err);
    uint32_t ver = 0, al = 0;
    int64_t doff = 0, i, j, tot = 0, nel = 0;
    if (!g) {
        fprintf(stderr, "ptckpt inspect: %s\n", err);
        return 1;
    }
    pt_gguf_info(g, &ver, &al, &doff);
    printf("gguf       %s\n", path);
    printf("version    %u, alignment %u, data at byte %lld\n", ver, al, (long long)doff);
    printf("metadata   %lld keys\n", (long long)pt_gguf_kv_count(g));
    for (i = 0; i < pt_gguf_kv_count(g); i++) {
        int32_t et = 0;
        int64_t n = 0, sl = 0, v = 0;
        int32_t ty = pt_gguf_kv_type(g, i, &et, &n);
        double d = 0;
        const char *s;
        printf("  %-40s %-6s", pt_gguf_kv_key(g, i), vt[ty]);
        if (ty == PT_GGUF_ARRAY) printf(" %lld x %s:", (long long)n, vt[et]);
        for (j = 0; j < (ty == PT_GGUF_ARRAY ? (n < 6 ? n : 6) : 1); j++) {
            if ((s = pt_gguf_kv_str(g, i, j, &sl)) != NULL) printf(" \"%.*s\"", (int)(sl > 60 ? 60 : sl), s);
            else if (et == PT_GGUF_F32 || et == PT_GGUF_F64) pt_gguf_kv_float(g, i, j, &d), printf(" %.9g", d);
            else if (pt_gguf_kv_int(g, i, j, &v)) printf(" %lld", (long long)v);
            else printf(" (above 2^63)");
        }
        printf("%s\n", ty == PT_GGUF_ARRAY && n > 6 ? " ..." : "");
    }
    printf("tensors    %lld (name, type, ne, bytes)\n", (long long)pt_gguf_tensor_count(g));
    for (i = 0; i < pt_gguf_tensor_count(g); i++) {
        const pt_gguf_tensor *t = pt_gguf_tensor_at(g, i);
        char sh[96];
        size_t k = 0;
        int d;
        int64_t e = 1;
        for (d = 0; d < t->ndim; d++) e *= t->ne[d], k += (size_t)snprintf(sh + k, sizeof sh - k, d ? "x%lld" : "%lld", (long long)t->ne[d]);
        printf("  %-32s %-6s %-14s %12lld\n", t->name, pt_gguf_type_name(t->type), sh, (long long)t->bytes);
        tot += t->bytes, nel += e;
    }
    human(hb, sizeof hb, (double)tot);
    printf("total      %lld elements, %lld bytes of tensor data (%s)\n", (long long)nel, (long long)tot, hb);
    pt_gguf_free(g);
    return 0;
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
    pt_gguf_export_opts go;
    const char *pos[2] = {NULL, NULL}, *fmt = NULL, *tokf = NULL;
    pt_tokenizer *tk = NULL;
    char err[1024];
    int i, np = 0, st_flags = 0, gg_flags = 0, gguf, rc = 0;
    size_t L;
    memset(&o, 0, sizeof o);
    memset(&go, 0, sizeof go);
    for (i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--dtype") && i + 1 < argc) {
            i++, st_flags = 1;
            if (!strcmp(argv[i], "bf16")) o.bf16 = 1;
            else if (strcmp(argv[i], "f32")) {
                fprintf(stderr, "ptckpt export: --dtype %s: expected f32 or bf16\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(argv[i], "--moments")) o.moments = 1, st_flags = 1;
        else if (!strcmp(argv[i], "--format") && i + 1 < argc) {
            fmt = argv[++i];
            if (strcmp(fmt, "gguf") && strcmp(fmt, "safetensors")) {
                fprintf(stderr, "ptckpt export: --format %s: expected safetensors or gguf\n", fmt);
                return 2;
            }
        } else if (!strcmp(argv[i], "--type") && i + 1 < argc) {
            int t = pt_wtype_parse(argv[++i]);
            if (t < 0) {
                char names[128];
                fprintf(stderr, "ptckpt export: --type %s: expected %s\n", argv[i], pt_wtype_names(names, sizeof names, " or "));
                return 2;
            }
            go.type = (pt_wtype)t, gg_flags = 1;
        } else if (!strcmp(argv[i], "--tokenizer") && i + 1 < argc) tokf = argv[++i], gg_flags = 1;
        else if (argv[i][0] == '-' || np == 2) return usage();
        else pos[np++] = argv[i];
    }
    if (np != 2) return usage();
    L = strlen(pos[1]);
    gguf = fmt ? !strcmp(fmt, "gguf") : L > 5 && !strcmp(pos[1] + L - 5, ".gguf");
    if ((gguf && st_flags) || (!gguf && gg_flags)) {
        fprintf(stderr, "ptckpt export: %s are options of the %s format\n", gguf ? "--dtype and --moments" : "--type and --tokenizer", gguf ? "safetensors" : "gguf");
        return 2;
    }
    if (!gguf) {
        if (pt_ckpt_export(pos[0], pos[1], &o, err, sizeof err) != PT_OK) {
            fprintf(stderr, "ptckpt export: %s\n", err);
            return 1;
        }
        printf("wrote %s (%s%s)\n", pos[1], o.bf16 ? "BF16" : "F32", o.moments ? ", with the optimizer moments" : "");
        return 0;
    }
    if (tokf && !(tk = pt_tokenizer_load(NULL, tokf))) return 1; /* its message is on stderr */
    if (!tokf) { /* the tokenizer the checkpoint carries, when it carries one */
        pt_ckpt_info in;
        memset(&in, 0, sizeof in);
        if (pt_ckpt_info_read(pos[0], &in, err, sizeof err) == PT_OK && in.tokenizer_vocab > 0 && !(tk = pt_ckpt_tokenizer(NULL, pos[0]))) {
            pt_ckpt_info_free(&in);
            return 1; /* its message is on stderr */
        }
        pt_ckpt_info_free(&in);
    }
    go.tokenizer = tk;
    if (pt_gguf_export(pos[0], pos[1], &go, err, sizeof err) != PT_OK) {
        fprintf(stderr, "ptckpt export: %s%s\n", err, strstr(err, "opts.tokenizer") ? " (--tokenizer FILE: the tokenizer.bin of its shards)" : "");
        rc = 1;
    } else printf("wrote %s (gguf, gpt2, %s matrices%s)\n", pos[1], pt_wtype_name(go.type), tk ? ", with its BPE vocabulary" : ", byte vocabulary");
    pt_tokenizer_free(tk);
    return rc;
}

static int cmd_import_gguf(int argc, char **argv) {
    long long step = -1;
    int i, rc = 1;
    pt_desc desc;
    pt_ctx *ctx;
    pt_gpt *m = NULL;
    pt_gpt_weights *w = NULL;
    pt_ckpt_opts co;
    for (i = 2; i < argc; i++) {
        char *end;
        if (strcmp(argv[i], "--step") || i + 1 >= argc) {
            fprintf(stderr, "ptckpt import: %s: a GGUF file takes only --step (its configuration is its metadata)\n", argv[i]);
            return 2;
        }
        errno = 0;
        step = strtoll(argv[++i], &end, 10);
        if (*end || end == argv[i] || errno == ERANGE || step < 0) {
            fprintf(stderr, "ptckpt import: --step %s: expected a non-negative integer\n", argv[i]);
            return 2;
        }
    }
    memset(&desc, 0, sizeof desc);
    desc.device = "cpu";
    if (!(ctx = pt_init(&desc))) {
        fprintf(stderr, "ptckpt import: cannot create a context\n");
        return 1;
    }
    if (!(w = pt_gguf_load(ctx, argv[0], NULL))) fprintf(stderr, "ptckpt import: %s\n", pt_error(ctx));
    else if (!(m = pt_gpt_new(ctx, &w->cfg))) fprintf(stderr, "ptckpt import: the model of the file: %s\n", pt_error(ctx));
    else if (pt_gguf_to_params(ctx, w) != PT_OK) fprintf(stderr, "ptckpt import: %s\n", pt_error(ctx));
    else {
        char err[256];
        pt_gguf *g = step < 0 ? pt_gguf_open(argv[0], err, sizeof err) : NULL;
        int64_t s = -1;
        if (g && pt_gguf_kv_int(g, pt_gguf_kv_find(g, "ptrain.step"), 0, &s) && s >= 0) step = s;
        pt_gguf_free(g);
        if (step < 0) step = 0;
        memset(&co, 0, sizeof co);
        co.model = &m->cfg;
        if (pt_ckpt_save(ctx, NULL, argv[1], step, &co) != PT_OK) fprintf(stderr, "ptckpt import: %s\n", pt_error(ctx));
        else {
            printf("wrote %s/step_%09lld (%d parameters, %lld elements, from gguf; no optimizer state)\n", argv[1], step, pt_param_count(ctx),
                   (long long)pt_param_numel(ctx));
            rc = 0;
        }
    }
    if (m) pt_gpt_free(m);
    pt_gpt_weights_free(w);
    pt_shutdown(ctx);
    return rc;
}

/* VOCAB.json MERGES.txt OUT.bin: GPT-2's tokenizer files as a ptrain tokenizer file */
static int cmd_import_gpt2(int argc, char **argv) {
    pt_tokenizer *tk;
    int rc = 1;
    if (argc != 3) {
        fprintf(stderr, "ptckpt import: GPT-2's tokenizer files take exactly VOCAB.json MERGES.txt OUT.bin (found %d arguments)\n", argc);
        return 2;
    }
    if (!(tk = pt_tokenizer_load_gpt2(NULL, argv[0], argv[1]))) return 1; /* its message is on stderr */
    if (pt_tokenizer_save(tk, argv[2]) == PT_OK) {
        printf("wrote %s (BPE tokenizer: 256 bytes + %d merges = vocabulary %d, the ids of %s)\n", argv[2], (int)pt_tokenizer_vocab(tk) - 256, (int)pt_tokenizer_vocab(tk),
               argv[0]);
        rc = 0;
    }
    pt_tokenizer_free(tk);
    return rc;
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
    pt_tokenizer *tk = NULL;
    const char *tokf = NULL;
    if (argc < 2) return usage();
    if (is_gguf(argv[0])) return cmd_import_gguf(argc, argv);
    if (strlen(argv[0]) >= 5 && !strcmp(argv[0] + strlen(argv[0]) - 5, ".json")) return cmd_import_gpt2(argc, argv);
    for (i = 2; i < argc; i++) {
        char *end;
        if (!strcmp(argv[i], "--tokenizer") && i + 1 < argc) {
            tokf = argv[++i];
            continue;
        }
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
    if (tokf && !(tk = pt_tokenizer_load(NULL, tokf))) return 1; /* its message is on stderr */
    memset(&desc, 0, sizeof desc);
    desc.device = "cpu";
    if (!(ctx = pt_init(&desc))) {
        fprintf(stderr, "ptckpt import: cannot create a context\n");
        pt_tokenizer_free(tk);
        return 1;
    }
    if ((m = pt_gpt_new(ctx, &cfg)) == NULL) fprintf(stderr, "ptckpt import: the model of the configuration: %s\n", pt_error(ctx));
    else if (pt_safetensors_load(ctx, argv[0]) != PT_OK) fprintf(stderr, "ptckpt import: %s\n", pt_error(ctx));
    else {
        memset(&co, 0, sizeof co);
        co.model = &m->cfg, co.tokenizer = tk;
        if (pt_ckpt_save(ctx, NULL, argv[1], step, &co) != PT_OK) fprintf(stderr, "ptckpt import: %s\n", pt_error(ctx));
        else {
            printf("wrote %s/step_%09lld (%d parameters, %lld elements, no optimizer state%s)\n", argv[1], (long long)step, pt_param_count(ctx),
                   (long long)pt_param_numel(ctx), tk ? ", the tokenizer of --tokenizer" : "");
            rc = 0;
        }
    }
    if (m) pt_gpt_free(m);
    pt_shutdown(ctx);
    pt_tokenizer_free(tk);
    return rc;
}

/* TOKENIZER TEXT: the ids of TEXT, then the text they decode to */
static int cmd_encode(const char *tokf, const char *text) {
    pt_tokenizer *tk = pt_tokenizer_load(NULL, tokf);
    int64_t n = (int64_t)strlen(text), k, i, m;
    int32_t *ids = (int32_t *)malloc(sizeof(int32_t) * (size_t)(n + 1));
    char *back = (char *)malloc((size_t)n + 1);
    int rc = 1;
    if (tk && ids && back && (k = pt_tokenizer_encode(tk, text, n, ids)) >= 0 && (m = pt_tokenizer_decode(tk, ids, k, back, n)) == n) {
        for (i = 0; i < k; i++) printf(i ? " %d" : "%d", (int)ids[i]);
        printf("\n%.*s\n", (int)m, back);
        rc = 0;
    } else if (tk) fprintf(stderr, "ptckpt encode: %s\n", ids && back ? "the ids do not decode to the text" : "out of memory");
    free(ids), free(back);
    pt_tokenizer_free(tk);
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 3) return usage();
    if (!strcmp(argv[1], "inspect") && argc == 3) return is_gguf(argv[2]) ? cmd_inspect_gguf(argv[2]) : cmd_inspect(argv[2]);
    if (!strcmp(argv[1], "verify") && argc == 3) return cmd_verify(argv[2]);
    if (!strcmp(argv[1], "export")) return cmd_export(argc - 2, argv + 2);
    if (!strcmp(argv[1], "import")) return cmd_import(argc - 2, argv + 2);
    if (!strcmp(argv[1], "encode") && argc == 4) return cmd_encode(argv[2], argv[3]);
    return usage();
}
