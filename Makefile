# ptrain.h - build, demo, tests, benchmarks. `make help` lists the targets.
CC      ?= cc
CFLAGS  ?= -O2 -fopenmp -march=native
BUILD   := build
EXAMPLES := $(BUILD)/01_autograd $(BUILD)/02_mnist_mlp $(BUILD)/03_gpt $(BUILD)/11_inference $(BUILD)/12_engine
MPI_EXAMPLES := $(BUILD)/04_data_parallel $(BUILD)/05_tensor_parallel $(BUILD)/06_pipeline_parallel $(BUILD)/07_gpt_3d $(BUILD)/09_checkpoint_resume $(BUILD)/10_memory
CLLIBS  := -lOpenCL -lclblast

.PHONY: all help deps demo serve test soak valgrind fuzz bench examples tools clean

all: examples

help:
	@echo "make deps      install the Debian packages used (as root via apt-get; idempotent)"
	@echo "make demo      train a GPT with build/pttrain on the fortunes corpus as BPE tokens (1000 merges) on 4 MPI ranks"
	@echo "               (dp 2 x pp 2, bf16 matrix products, 800 steps), saving a checkpoint every 100 steps to build/demo_ckpt;"
	@echo "               run it again to continue from the newest one; it prints a sample and its share of dictionary words;"
	@echo "               its log and trace are drawn by build/ptreport into build/demo/report/index.html"
	@echo "make serve     tools/ptserve (an OpenAI-compatible server: /v1/completions, /v1/chat/completions, /metrics, a playground"
	@echo "               page at /) on the demo's checkpoint, training a short one first if there is none; prints its URL"
	@echo "               (SERVE_ARGS='--port 9000'; docs/serving.md)"
	@echo "make test      run the test suite (ends with 'N passed, N failed')"
	@echo "make soak      the long variants make test leaves out (SOAK=1: every equivalence and memory-estimate layout, the"
	@echo "               implementation compiled once more by dp, tp and coll_test, xent's OpenCL run at full size, the GPT tutorial"
	@echo "               in f32, bf16 and fp16 at its own sizes to its final val_loss, the AArch64 NEON tests under qemu at full size,"
	@echo "               about half an hour), then tests/fresh_machine.sh:"
	@echo "               make demo and make test on a fresh Debian 12 minbase root (debootstrap, chroot; as root; 95 minutes more on 2 busy cores,"
	@echo "               skipped where it cannot run); TEST_FILTER=name only those suites"
	@echo "make valgrind  the single-process test programs under valgrind's memcheck (built without -march=native; an invalid"
	@echo "               access, an uninitialised value or a leak fails the program); TEST_FILTER=name only those"
	@echo "make fuzz      build the libFuzzer harnesses of tests/fuzz (clang; every file parser: checkpoint, safetensors, shard,"
	@echo "               IDX, tokenizer, CLBlast tune file, ptreport's run log) into build/fuzz and run each FUZZ_SECONDS"
	@echo "               (default 60) on a copy of its corpus, printing executions, corpus size and crashes;"
	@echo "               FUZZ_TARGETS=name[ name...] only those, FUZZ_MERGE=1 merges new inputs into tests/fuzz/corpus"
	@echo "make bench     benchmarks as JSON lines (GEMM vs OpenBLAS, bf16 GEMM vs SGEMM, GPT training step, monitor overhead, token loader, checkpoint save/resume,"
	@echo "               DP allreduce/overlap/ZeRO, pipeline bubbles, OpenCL GEMM vs direct CLBlast untuned and tuned, elementwise"
	@echo "               bandwidth, GPT step on OpenCL, activation recomputation, the inference matrix kernel qmm, KV-cached decode,"
	@echo "               the supervisor's recovery per fault kind, the paged KV cache and the serving engine); BENCH=name[,name...] runs only those, BENCH=list names them;"
	@echo "               one that fails is reported and the others still run (a summary last, exit 1 if any failed)"
	@echo "make examples  build the tutorials into build/"
	@echo "make tools     build build/pttrain (the GPT trainer: any dp x tp x pp layout, CPU or OpenCL, checkpoints, log, trace, guard),"
	@echo "               build/ptcl (list OpenCL devices, check one against the CPU, tune CLBlast's GEMM), build/prepare_shards (text -> token shards)"
	@echo "               build/ptreport (a run's JSON-lines log and Chrome trace -> SVG charts, pipeline timeline, HTML page)"
	@echo "               build/ptckpt (checkpoints: inspect, verify, export to / import from safetensors)"
	@echo "               build/ptmem (predicted memory per rank of a GPT run on a dp x tp x pp layout, ZeRO, schedule)"
	@echo "               build/ptserve (the OpenAI-compatible HTTP server on the engine; libmicrohttpd) and build/ptload (its load generator)"
	@echo "               and build/ptrun (the supervisor: relaunches a failed or hung mpirun job from its newest checkpoint on"
	@echo "               the hosts that answer, DP shrunk to fit; docs/fault-tolerance.md); make build/pttrain-hooks: the trainer"
	@echo "               with the test hooks (PTRAIN_FAULT, PTRAIN_GUARD_INJECT, PTRAIN_CKPT_FAIL)"

deps:
	@sh tools/deps.sh

$(BUILD):
	@mkdir -p $(BUILD)

# each tutorial is built exactly as its own "Build:" line says
$(BUILD)/%: examples/%.c ptrain.h | $(BUILD)
	$(CC) $(CFLAGS) -I. $< -o $@ -lm

# the MPI tutorials, as their "Build:" lines say
$(MPI_EXAMPLES): $(BUILD)/%: examples/%.c ptrain.h | $(BUILD)
	mpicc -O2 -fopenmp -DPTRAIN_MPI -I. $< -o $@ -lm

# 08 is the OpenCL tutorial
$(BUILD)/08_opencl: examples/08_opencl.c ptrain.h | $(BUILD)
	$(CC) -O2 -fopenmp -march=native -DPTRAIN_OPENCL -I. $< -o $@ $(CLLIBS) -lm

examples: $(EXAMPLES) $(MPI_EXAMPLES) $(BUILD)/08_opencl

# the trainer: MPI and OpenCL compiled in (--device opencl on any layout)
$(BUILD)/pttrain: tools/pttrain.c ptrain.h | $(BUILD)
	mpicc -O2 -fopenmp -DPTRAIN_MPI -DPTRAIN_OPENCL -I. tools/pttrain.c -o $@ $(CLLIBS) -lm

# the trainer with the test hooks compiled in (PTRAIN_TEST_HOOKS: the faults of PTRAIN_FAULT,
# PTRAIN_GUARD_INJECT, PTRAIN_CKPT_FAIL; tests and tools/ptrun's trials use it), without OpenCL
$(BUILD)/pttrain-hooks: tools/pttrain.c ptrain.h | $(BUILD)
	mpicc -O2 -fopenmp -DPTRAIN_MPI -DPTRAIN_TEST_HOOKS -I. tools/pttrain.c -o $@ -lm

$(BUILD)/ptcl: tools/ptcl.c bench/bench_util.h ptrain.h | $(BUILD)
	$(CC) -O2 -fopenmp -DPTRAIN_OPENCL -I. tools/ptcl.c -o $@ $(CLLIBS) -lm

$(BUILD)/prepare_shards: tools/prepare_shards.c ptrain.h | $(BUILD)
	$(CC) -O2 -I. tools/prepare_shards.c -o $@ -lm

$(BUILD)/ptreport: tools/ptreport.c ptrain.h | $(BUILD)
	$(CC) -O2 -I. tools/ptreport.c -o $@ -lm

$(BUILD)/ptckpt: tools/ptckpt.c ptrain.h | $(BUILD)
	$(CC) -O2 -I. tools/ptckpt.c -o $@ -lm

$(BUILD)/ptmem: tools/ptmem.c ptrain.h | $(BUILD)
	$(CC) -O2 -I. tools/ptmem.c -o $@ -lm

# the supervisor: no ptrain.h, no MPI library (it runs mpirun)
$(BUILD)/ptrun: tools/ptrun.c | $(BUILD)
	$(CC) -O2 -Wall tools/ptrun.c -o $@

$(BUILD)/ptgen: tools/ptgen.c ptrain.h | $(BUILD)
	$(CC) -O2 -fopenmp -march=native -I. tools/ptgen.c -o $@ -lm

# the OpenAI-compatible server (libmicrohttpd) and its load generator
$(BUILD)/ptserve: tools/ptserve.c tools/ptserve_page.h ptrain.h | $(BUILD)
	$(CC) -O2 -fopenmp -march=native -I. tools/ptserve.c -o $@ -lmicrohttpd -lm

$(BUILD)/ptload: tools/ptload.c | $(BUILD)
	$(CC) -O2 -fopenmp -march=native -I. tools/ptload.c -o $@ -lm -lpthread

tools: $(BUILD)/pttrain $(BUILD)/ptrun $(BUILD)/ptcl $(BUILD)/prepare_shards $(BUILD)/ptreport $(BUILD)/ptckpt $(BUILD)/ptmem $(BUILD)/ptgen $(BUILD)/ptserve $(BUILD)/ptload

# make serve: ptserve on the demo's checkpoint (which carries its BPE tokenizer), training a short
# one first when there is none; SERVE_ARGS adds flags (e.g. --port 9000 --host 0.0.0.0)
SERVE_ARGS ?=
serve: $(BUILD)/ptserve
	@if [ ! -f $(BUILD)/demo_ckpt/latest ]; then echo "make serve: no checkpoint in $(BUILD)/demo_ckpt: training a short one (make demo, 200 steps)"; \
	  $(MAKE) demo DEMO_ARGS="$(subst --steps 800,--steps 200,$(DEMO_ARGS))" || exit 1; fi
	./$(BUILD)/ptserve --ckpt $(BUILD)/demo_ckpt $(SERVE_ARGS)

# The demo's data: the fortunes corpus (tools/prepare_text.sh: data/fortunes/train.txt, val.txt) as
# byte-level BPE token shards of DEMO_BPE merges (tools/prepare_shards --bpe; tokenizer.bin beside
# them, so the sample is decoded to text). val_000000.bin is the last file prepare_shards writes.
DEMO_BPE  ?= 1000
DEMO_DATA ?= data/fortunes_bpe$(DEMO_BPE)
data/fortunes/train.txt: | deps
	sh tools/prepare_text.sh data/fortunes
$(DEMO_DATA)/val_000000.bin: data/fortunes/train.txt $(BUILD)/prepare_shards
	./$(BUILD)/prepare_shards --bpe $(DEMO_BPE) --val data/fortunes/val.txt $(DEMO_DATA) data/fortunes/train.txt

# build/pttrain trains a GPT on those shards on a hybrid layout: 2 data-parallel replicas of a 2-stage
# 1F1B pipeline (Open MPI needs the two ALLOW variables when run as root, and --oversubscribe for
# more ranks than cores). Checkpoints every 100 steps; --resume-if-any continues from the newest one
# when there is one (Ctrl-C saves and stops; `make demo` again resumes; rm -rf build/demo_ckpt starts over).
# The run logs its metrics (build/demo/log.jsonl, appended to on a resume) and a trace of every
# rank (build/demo/trace.json); build/ptreport then draws them into build/demo/report/index.html.
DEMO_NP   ?= 4
# bf16 matrix products where the CPU has AVX512_BF16 (vdpbf16ps), else f32 (faster there than bf16
# widened to f32)
DEMO_PRECISION ?= $(shell grep -qw avx512_bf16 /proc/cpuinfo 2>/dev/null && echo bf16 || echo f32)
DEMO_ARGS ?= --dp 2 --pp 2 --micro-batches 4 --batch 16 --width 128 --heads 4 --steps 800 --lr 4e-3 --precision $(DEMO_PRECISION)
DEMO_CKPT ?= --ckpt-dir $(BUILD)/demo_ckpt --ckpt-every 100 --resume-if-any --ckpt-async
DEMO_MON  ?= --log $(BUILD)/demo/log.jsonl --trace $(BUILD)/demo/trace.json
demo: deps $(BUILD)/pttrain $(BUILD)/ptreport $(DEMO_DATA)/val_000000.bin
	@mkdir -p $(BUILD)/demo
	OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --oversubscribe -np $(DEMO_NP) ./$(BUILD)/pttrain $(DEMO_ARGS) --data $(DEMO_DATA) $(DEMO_CKPT) $(DEMO_MON)
	./$(BUILD)/ptreport $(BUILD)/demo/log.jsonl --trace $(BUILD)/demo/trace.json --title "make demo: pttrain $(DEMO_ARGS) --data $(DEMO_DATA)" -o $(BUILD)/demo/report
	@echo "report: $(BUILD)/demo/report/index.html (charts, the pipeline timeline of the last step, events)"

test: deps
	@sh tests/run.sh $(BUILD)/tests

# the long variants (tests/soak.sh: tests/run.sh with SOAK=1 for the suites that have them), then the
# README's set-up on a fresh Debian 12 root (tests/fresh_machine.sh, logs in build/soak/fresh_machine)
soak: deps
	@sh tests/soak.sh $(BUILD)/soak

# the single-process test programs under valgrind's memcheck (tests/valgrind.sh: built without
# -march=native, which valgrind 3.19 cannot decode; an invalid access, uninitialised use or leak fails)
valgrind: deps
	@sh tests/valgrind.sh $(BUILD)/valgrind

# the fuzz harnesses: one binary (ptrain.h compiled once), build/fuzz/fuzz_NAME links to it;
# tests/fuzz/run.sh runs them (tests/fuzz_test.sh, in make test, only replays the corpus and past crashes)
FUZZ_SECONDS ?= 60
$(BUILD)/fuzz/ptfuzz: ptrain.h tools/ptreport.c $(wildcard tests/fuzz/*.c tests/fuzz/*.h) tests/fuzz/build.sh
	@echo "building $@ (clang -O1 -fsanitize=fuzzer,address,undefined; about a minute)"
	@sh tests/fuzz/build.sh $(BUILD)/fuzz -O1

fuzz: deps $(BUILD)/fuzz/ptfuzz
	@FUZZ_SECONDS=$(FUZZ_SECONDS) sh tests/fuzz/run.sh $(BUILD)/fuzz

$(BUILD)/bench: bench/bench.c bench/bench_util.h ptrain.h | $(BUILD)
	$(CC) -O3 -march=native -fopenmp -I. bench/bench.c -o $@ -lopenblas -lm

$(BUILD)/bench_data: bench/bench_data.c bench/bench_util.h ptrain.h | $(BUILD)
	$(CC) -O3 -march=native -I. bench/bench_data.c -o $@ -lm

$(BUILD)/bench_dist: bench/bench_dist.c bench/bench_util.h ptrain.h | $(BUILD)
	mpicc -O3 -march=native -fopenmp -DPTRAIN_MPI -I. bench/bench_dist.c -o $@ -lm

$(BUILD)/bench_zero: bench/bench_zero.c bench/bench_util.h ptrain.h | $(BUILD)
	mpicc -O3 -march=native -fopenmp -DPTRAIN_MPI -I. bench/bench_zero.c -o $@ -lm

$(BUILD)/bench_largest: bench/bench_largest.c ptrain.h | $(BUILD)
	mpicc -O3 -march=native -fopenmp -DPTRAIN_MPI -I. bench/bench_largest.c -o $@ -lm

$(BUILD)/bench_pp: bench/bench_pp.c bench/bench_util.h ptrain.h | $(BUILD)
	mpicc -O3 -march=native -fopenmp -DPTRAIN_MPI -I. bench/bench_pp.c -o $@ -lm

$(BUILD)/bench_ckpt: bench/bench_ckpt.c bench/bench_util.h ptrain.h | $(BUILD)
	$(CC) -O3 -march=native -fopenmp -I. bench/bench_ckpt.c -o $@ -lm

$(BUILD)/bench_xent: bench/bench_xent.c bench/bench_util.h ptrain.h | $(BUILD)
	$(CC) -O3 -march=native -fopenmp -I. bench/bench_xent.c -o $@ -lm
$(BUILD)/bench_recompute: bench/bench_recompute.c bench/bench_util.h ptrain.h | $(BUILD)
	$(CC) -O3 -march=native -fopenmp -I. bench/bench_recompute.c -o $@ -lm

$(BUILD)/bench_qmm: bench/bench_qmm.c bench/bench_util.h ptrain.h | $(BUILD)
	$(CC) -O3 -march=native -fopenmp -I. bench/bench_qmm.c -o $@ -lm

$(BUILD)/bench_decode: bench/bench_decode.c bench/bench_util.h ptrain.h | $(BUILD)
	$(CC) -O3 -march=native -fopenmp -I. bench/bench_decode.c -o $@ -lm

$(BUILD)/bench_engine: bench/bench_engine.c ptrain.h | $(BUILD)
	$(CC) -O3 -march=native -fopenmp -I. bench/bench_engine.c -o $@ -lm

# the recovery bench: a script run beside the supervisor and the trainer with the test hooks
$(BUILD)/bench_recovery: bench/bench_recovery.sh $(BUILD)/ptrun $(BUILD)/pttrain-hooks | $(BUILD)
	cp bench/bench_recovery.sh $@ && chmod +x $@

$(BUILD)/bench_cl: bench/bench_cl.c bench/bench_util.h ptrain.h | $(BUILD)
	$(CC) -O3 -march=native -fopenmp -DPTRAIN_OPENCL -I. bench/bench_cl.c -o $@ $(CLLIBS) -lm

# `make bench BENCH=gemm,gpt` runs only those benchmarks (`make bench BENCH=list` names them all) and builds
# only the programs they need (bench/run.sh --needs), each on its own: one that does not build (OpenCL or
# CLBlast missing: make deps) is removed, so that run.sh reports its benchmarks as failed and runs the others.
# The builds print on stderr: stdout has only the JSON lines
BENCH ?=
bench: deps
	@progs=$$(BENCH="$(BENCH)" sh bench/run.sh --needs) || exit 2; \
	for p in $$progs; do \
	    $(MAKE) --no-print-directory $(BUILD)/$$p >&2 || { rm -f $(BUILD)/$$p; echo "bench: cannot build $(BUILD)/$$p" >&2; }; \
	done; \
	BENCH="$(BENCH)" BENCH_BUILD=$(BUILD) sh bench/run.sh

clean:
	rm -rf $(BUILD)
