/* fuzz_all.c - every harness of tests/fuzz in one libFuzzer binary (ptrain.h is compiled once,
   which is what takes the time), the harness chosen by the program's name: build/fuzz/fuzz_NAME is
   a link to it (NAME: ckpt safetensors shard idx tokenizer cltune runlog gguf serve ptrun_line), or by env FUZZ_TARGET.
   Env PTFUZZ_SEEDS=DIR writes the seed corpus (gen_seeds.c) into DIR and exits. Each harness also
   builds on its own (clang -fsanitize=fuzzer tests/fuzz/fuzz_NAME.c). */
#define FZ_ALL
#include "fuzz_ckpt.c"
#include "fuzz_safetensors.c"
#include "fuzz_shard.c"
#include "fuzz_idx.c"
#include "fuzz_tokenizer.c"
#include "fuzz_cltune.c"
#include "fuzz_gguf.c"
#include "gen_seeds.c"
#include "fuzz_serve_request.c"
#include "fuzz_ptrun_line.c"
#include "fuzz_runlog.c" /* last: tools/ptreport.c's short macro names */

static const struct { const char *name; int (*one)(const uint8_t *, size_t); } fz_targets[] = {
    {"ckpt", fz_one_ckpt}, {"safetensors", fz_one_safetensors}, {"shard", fz_one_shard}, {"idx", fz_one_idx},
    {"tokenizer", fz_one_tokenizer}, {"cltune", fz_one_cltune}, {"runlog", fz_one_runlog}, {"gguf", fz_one_gguf}, {"serve", fz_one_serve}, {"ptrun_line", fz_one_ptrun_line}};
static int (*fz_target)(const uint8_t *, size_t);

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    const char *want = getenv("FUZZ_TARGET"), *seeds = getenv("PTFUZZ_SEEDS"), *base;
    size_t i;
    if (seeds && *seeds) exit(fz_gen_seeds(seeds) ? 0 : 1);
    base = *argc > 0 ? strrchr((*argv)[0], '/') : NULL;
    base = base ? base + 1 : *argc > 0 ? (*argv)[0] : "";
    if (!want || !*want) want = strncmp(base, "fuzz_", 5) ? "" : base + 5;
    for (i = 0; i < sizeof fz_targets / sizeof *fz_targets; i++)
        if (!strcmp(want, fz_targets[i].name)) fz_target = fz_targets[i].one;
    if (!fz_target) {
        fprintf(stderr, "fuzz_all: no harness '%s' (run me as fuzz_NAME or with FUZZ_TARGET=NAME; NAME:", want);
        for (i = 0; i < sizeof fz_targets / sizeof *fz_targets; i++) fprintf(stderr, " %s", fz_targets[i].name);
        fprintf(stderr, ")\n");
        exit(2);
    }
    return 0;
}
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return fz_target(data, size); }
