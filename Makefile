# ptrain.h - build, demo, tests, benchmarks. `make help` lists the targets.
CC      ?= cc
CFLAGS  ?= -O2 -fopenmp -march=native
BUILD   := build
EXAMPLES := $(BUILD)/01_autograd $(BUILD)/11_inference $(BUILD)/12_engine
# the tutorials that train have OpenCL compiled in (loaded at run time: no headers, no -l flags)
CL_EXAMPLES := $(BUILD)/02_mnist_mlp $(BUILD)/03_gpt $(BUILD)/08_opencl
MPI_EXAMPLES := $(BUILD)/10_memory $(BUILD)/13_parallel_inference
MPI_CL_EXAMPLES := $(BUILD)/04_data_parallel $(BUILD)/05_tensor_parallel $(BUILD)/06_pipeline_parallel $(BUILD)/07_gpt_3d $(BUILD)/09_checkpoint_resume
# the MPI implementation of the MPI builds, the demo and `make test MPI=mpich` (docs/mpi.md):
# openmpi (mpicc / mpirun, the Debian alternatives) or mpich (mpicc.mpich / mpiexec.mpich, named
# explicitly so the alternatives stay Open MPI's). MPICC, MPIEXEC override the commands.
MPI     ?= openmpi
ifeq ($(MPI),mpich)
MPICC   ?= mpicc.mpich
MPIEXEC ?= mpiexec.mpich
MPIEXEC_FLAGS ?=
else
MPICC   ?= mpicc
MPIEXEC ?= mpirun
# Open MPI refuses root and more ranks than cores unless told
MPIEXEC_FLAGS ?= --oversubscribe
MPIEXEC_ENV ?= OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
endif
# the MPI programs depend on $(BUILD)/.mpi, rewritten when MPI or MPICC changes: switching rebuilds them
MPI_STAMP := $(BUILD)/.mpi
$(shell mkdir -p $(BUILD) && { [ "$$(cat $(MPI_STAMP) 2>/dev/null)" = "$(MPI) $(MPICC)" ] || echo "$(MPI) $(MPICC)" >$(MPI_STAMP); })

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
	@echo "make test      run the test suite (ends with 'N passed, N failed'); its MPI equivalence and checkpoint suites run"
	@echo "               under Open MPI and, reduced to 2 ranks, under MPICH (tests/mpich_test.sh); make test MPI=mpich: only"
	@echo "               MPICH's part, in full (every layout of at most as many ranks as CPUs; docs/mpi.md)"
	@echo "MPI=mpich      (any target) build the MPI programs with mpicc.mpich and run the demo with mpiexec.mpich; the default"
	@echo "               MPI=openmpi uses mpicc / mpirun (MPICC=, MPIEXEC= override the commands)"
	@echo "make soak      the long variants make test leaves out (SOAK=1: every equivalence and memory-estimate layout, MPICH's pass in full, the"
	@echo "               implementation compiled once more by dp, tp and coll_test, xent's OpenCL run at full size, the GPT tutorial"
	@echo "               in f32, bf16 and fp16 at its own sizes to its final val_loss, the AArch64 NEON tests under qemu at full size,"
	@echo "               about half an hour), then tests/fresh_machine.sh:"
	@echo "               make demo and make test on a fresh Debian 12 minbase root (debootstrap, chroot; as root; 95 minutes more on 2 busy cores,"
	@echo "               skipped where it cannot run); TEST_FILTER=name only those suites"
	@echo "make valgrind  the single-process test programs under valgrind's memcheck (built without -march=native; an invalid"
	@echo "               access, an uninitialised value or a leak fails the program); TEST_FILTER=name only those"
	@echo "make fuzz      build the libFuzzer harnesses of tests/fuzz (clang; every file parser: checkpoint, safetensors, shard,"
	@echo "               IDX, tokenizer, CLBlast tune file, ptreport's run log; ptrun's channel lines) into build/fuzz and run each FUZZ_SECONDS"
	@echo "               (default 60) on a copy of its corpus, printing executions, corpus size and crashes;"
	@echo "               FUZZ_TARGETS=name[ name...] only those, FUZZ_MERGE=1 merges new inputs into tests/fuzz/corpus"
	@echo "make bench     benchmarks as JSON lines (GEMM vs OpenBLAS, bf16 GEMM vs SGEMM, GPT training step, monitor overhead, token loader, checkpoint save/resume,"
	@echo "               DP allreduce/overlap/ZeRO, pipeline bubbles, OpenCL GEMM vs direct CLBlast untuned and tuned, elementwise"
	@echo "               bandwidth, GPT step on OpenCL, activation recomputation, the inference matrix kernel qmm, KV-cached decode,"
	@echo "               the supervisor's recovery per fault kind, the paged KV cache, the serving engine, ptserve over HTTP, the thread team vs OpenMP,
	@echo "               speculative decoding, model-parallel decode on tp2 / pp2 / tp2 x pp2 and the small-message TP sum);"
	@echo "               BENCH=name[,name...] runs only those, BENCH=list names them;"
	@echo "               one that fails is reported and the others still run (a summary last, exit 1 if any failed); docs/bench.md"
	@echo "make examples  build the tutorials into build/"
	@echo "make tools     build build/pttrain (the GPT trainer: any dp x tp x pp layout, CPU or OpenCL, checkpoints, log, trace, guard),"
	@echo "               build/ptcl (list OpenCL devices, check one against the CPU, tune CLBlast's GEMM), build/prepare_shards (text -> token shards)"
	@echo "               build/ptreport (a run's JSON-lines log and Chrome trace -> SVG charts, pipeline timeline, HTML page)"
	@echo "               build/ptckpt (checkpoints: inspect, verify, export to / import from safetensors and GGUF; inspect a GGUF file)"
	@echo "               build/ptgen (generate text from a checkpoint, safetensors or GGUF file: KV cache, f32/bf16/q8_0/q4_0, sampler)"
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

$(CL_EXAMPLES): $(BUILD)/%: examples/%.c ptrain.h | $(BUILD)
	$(CC) $(CFLAGS) -DPTRAIN_OPENCL -I. $< -o $@ -lm

# the MPI tutorials, as their "Build:" lines say
$(MPI_EXAMPLES): $(BUILD)/%: examples/%.c ptrain.h $(MPI_STAMP) | $(BUILD)
	$(MPICC) -O2 -fopenmp -DPTRAIN_MPI -I. $< -o $@ -lm

$(MPI_CL_EXAMPLES): $(BUILD)/%: examples/%.c ptrain.h $(MPI_STAMP) | $(BUILD)
	$(MPICC) -O2 -fopenmp -DPTRAIN_MPI -DPTRAIN_OPENCL -I. $< -o $@ -lm

examples: $(EXAMPLES) $(CL_EXAMPLES) $(MPI_EXAMPLES) $(MPI_CL_EXAMPLES)

# the trainer: MPI and OpenCL compiled in (--device opencl on any layout)
$(BUILD)/pttrain: tools/pttrain.c ptrain.h $(MPI_STAMP) | $(BUILD)
	$(MPICC) -O2 -fopenmp -DPTRAIN_MPI -DPTRAIN_OPENCL -I. tools/pttrain.c -o $@ -lm

# the trainer with the test hooks compiled in (PTRAIN_TEST_HOOKS: the faults of PTRAIN_FAULT,
# PTRAIN_GUARD_INJECT, PTRAIN_CKPT_FAIL; tests and tools/ptrun's trials use it), without OpenCL
$(BUILD)/pttrain-hooks: tools/pttrain.c ptrain.h $(MPI_STAMP) | $(BUILD)
	$(MPICC) -O2 -fopenmp -DPTRAIN_MPI -DPTRAIN_TEST_HOOKS -I. tools/pttrain.c -o $@ -lm

$(BUILD)/ptcl: tools/ptcl.c tools/ptflags.h bench/bench_util.h ptrain.h | $(BUILD)
	$(CC) -O2 -fopenmp -DPTRAIN_OPENCL -I. tools/ptcl.c -o $@ -lm

$(BUILD)/prepare_shards: tools/prepare_shards.c tools/ptflags.h ptrain.h | $(BUILD)
	$(CC) -O2 -I. tools/prepare_shards.c -o $@ -lm

$(BUILD)/ptreport: tools/ptreport.c tools/ptflags.h ptrain.h | $(BUILD)
	$(CC) -O2 -I. tools/ptreport.c -o $@ -lm

$(BUILD)/ptckpt: tools/ptckpt.c ptrain.h | $(BUILD)
	$(CC) -O2 -I. tools/ptckpt.c -o $@ -lm

$(BUILD)/ptmem: tools/ptmem.c tools/ptflags.h ptrain.h | $(BUILD)
	$(CC) -O2 -I. tools/ptmem.c -o $@ -lm

# the supervisor: no ptrain.h, no MPI library (it runs mpirun)
$(BUILD)/ptrun: tools/ptrun.c tools/ptflags.h tools/ptrun_line.h | $(BUILD)
	$(CC) -O2 -Wall tools/ptrun.c -o $@

$(BUILD)/ptgen: tools/ptgen.c tools/ptflags.h ptrain.h | $(BUILD)
	$(CC) -O2 -fopenmp -march=native -DPTRAIN_OPENCL -I. tools/ptgen.c -o $@ -lm

# the OpenAI-compatible server (libmicrohttpd) and its load generator
$(BUILD)/ptserve: tools/ptserve.c tools/ptflags.h tools/ptserve_page.h ptrain.h $(MPI_STAMP) | $(BUILD)
	$(MPICC) -O2 -fopenmp -march=native -DPTRAIN_MPI -DPTRAIN_OPENCL -I. tools/ptserve.c -o $@ -lmicrohttpd -lm

# a checkpoint of any GPT shape, deterministic initialization (bench/serve_large.sh)
$(BUILD)/make_gpt_ckpt: bench/make_gpt_ckpt.c ptrain.h | $(BUILD)
	$(CC) -O2 -fopenmp -march=native -I. bench/make_gpt_ckpt.c -o $@ -lm

$(BUILD)/ptload: tools/ptload.c tools/ptflags.h | $(BUILD)
	$(CC) -O2 -fopenmp -march=native -I. tools/ptload.c -o $@ -lm -lpthread

tools: $(BUILD)/pttrain $(BUILD)/ptrun $(BUILD)/ptcl $(BUILD)/prepare_shards $(BUILD)/ptreport $(BUILD)/ptckpt $(BUILD)/ptmem $(BUILD)/ptgen $(BUILD)/ptserve $(BUILD)/ptload

# make serve: ptserve on the demo's checkpoint (which carries its BPE tokenizer), training a short
# one first when there is none; SERVE_ARGS adds flags (e.g. --port 9000 --host 0.0.0.0)
SERVE_ARGS ?=
# deps first (libmicrohttpd's headers), then the server: make serve works as a fresh machine's first command
serve: deps
	@$(MAKE) --no-print-directory $(BUILD)/ptserve
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
	$(MPIEXEC_ENV) $(MPIEXEC) $(MPIEXEC_FLAGS) -np $(DEMO_NP) ./$(BUILD)/pttrain $(DEMO_ARGS) --data $(DEMO_DATA) $(DEMO_CKPT) $(DEMO_MON)
	./$(BUILD)/ptreport $(BUILD)/demo/log.jsonl --trace $(BUILD)/demo/trace.json --title "make demo: pttrain $(DEMO_ARGS) --data $(DEMO_DATA)" -o $(BUILD)/demo/report
	@echo "report: $(BUILD)/demo/report/index.html (charts, the pipeline timeline of the last step, events)"

# MPI=mpich: only MPICH's part, in full (tests/mpich_test.sh with SOAK=1: every equivalence layout and
# checkpoint run of at most as many ranks as CPUs, the C11 and C++ compiles, test_dp)
test: deps
ifeq ($(MPI),mpich)
	@SOAK=1 TEST_FILTER=mpich sh tests/run.sh $(BUILD)/tests
else
	@sh tests/run.sh $(BUILD)/tests
endif

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
$(BUILD)/fuzz/ptfuzz: ptrain.h tools/ptreport.c tools/ptrun_line.h $(wildcard tests/fuzz/*.c tests/fuzz/*.h) tests/fuzz/build.sh
	@echo "building $@ (clang -O1 -fsanitize=fuzzer,address,undefined; about a minute)"
	@sh tests/fuzz/build.sh $(BUILD)/fuzz -O1

fuzz: deps $(BUILD)/fuzz/ptfuzz
	@FUZZ_SECONDS=$(FUZZ_SECONDS) sh tests/fuzz/run.sh $(BUILD)/fuzz

$(BUILD)/bench: bench/bench.c bench/bench_util.h ptrain.h | $(BUILD)
	$(CC) -O3 -march=native -fopenmp -I. bench/bench.c -o $@ -lopenblas -lm

# the OpenMP builds of bench and bench_decode (the threads benchmark compares the team with them)
$(BUILD)/bench_omp: bench/bench.c bench/bench_util.h ptrain.h | $(BUILD)
	$(CC) -O3 -march=native -fopenmp -DPTRAIN_OPENMP -I. bench/bench.c -o $@ -lopenblas -lm

$(BUILD)/bench_decode_omp: bench/bench_decode.c bench/bench_util.h ptrain.h | $(BUILD)
	$(CC) -O3 -march=native -fopenmp -DPTRAIN_OPENMP -I. bench/bench_decode.c -o $@ -lm

$(BUILD)/bench_data: bench/bench_data.c bench/bench_util.h ptrain.h | $(BUILD)
	$(CC) -O3 -march=native -I. bench/bench_data.c -o $@ -lm

$(BUILD)/bench_dist: bench/bench_dist.c bench/bench_util.h ptrain.h $(MPI_STAMP) | $(BUILD)
	$(MPICC) -O3 -march=native -fopenmp -DPTRAIN_MPI -I. bench/bench_dist.c -o $@ -lm

$(BUILD)/bench_zero: bench/bench_zero.c bench/bench_util.h ptrain.h $(MPI_STAMP) | $(BUILD)
	$(MPICC) -O3 -march=native -fopenmp -DPTRAIN_MPI -I. bench/bench_zero.c -o $@ -lm

$(BUILD)/bench_largest: bench/bench_largest.c ptrain.h $(MPI_STAMP) | $(BUILD)
	$(MPICC) -O3 -march=native -fopenmp -DPTRAIN_MPI -I. bench/bench_largest.c -o $@ -lm

# model-parallel decode on tp2, pp2, tp2 x pp2 against one process, and the small-message TP sum (bench/run.sh: infer_layout)
$(BUILD)/bench_infer_layout: bench/bench_infer_layout.c bench/bench_util.h ptrain.h $(MPI_STAMP) | $(BUILD)
	$(MPICC) -O3 -march=native -fopenmp -DPTRAIN_MPI -I. bench/bench_infer_layout.c -o $@ -lm

$(BUILD)/bench_pp: bench/bench_pp.c bench/bench_util.h ptrain.h $(MPI_STAMP) | $(BUILD)
	$(MPICC) -O3 -march=native -fopenmp -DPTRAIN_MPI -I. bench/bench_pp.c -o $@ -lm

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

$(BUILD)/bench_spec: bench/bench_spec.c ptrain.h | $(BUILD)
	$(CC) -O3 -march=native -fopenmp -I. bench/bench_spec.c -o $@ -lm

# the recovery bench: a script run beside the supervisor and the trainer with the test hooks
$(BUILD)/bench_recovery: bench/bench_recovery.sh $(BUILD)/ptrun $(BUILD)/pttrain-hooks | $(BUILD)
	cp bench/bench_recovery.sh $@ && chmod +x $@

# the serve bench: a script beside the server, its load generator and the engine-only baseline (compiled with
# ptserve's flags, so that the two sides differ only by HTTP)
$(BUILD)/bench_serve_engine: bench/bench_serve_engine.c ptrain.h | $(BUILD)
	$(CC) -O2 -fopenmp -march=native -I. bench/bench_serve_engine.c -o $@ -lm

$(BUILD)/bench_serve: bench/bench_serve.sh $(BUILD)/ptserve $(BUILD)/ptload $(BUILD)/bench_serve_engine | $(BUILD)
	cp bench/bench_serve.sh $@ && chmod +x $@

$(BUILD)/bench_serve_layout: bench/serve_layout.sh $(BUILD)/ptserve $(BUILD)/ptload $(BUILD)/make_gpt_ckpt | $(BUILD)
	cp bench/serve_layout.sh $@ && chmod +x $@

$(BUILD)/bench_infer_large: bench/serve_large.sh $(BUILD)/ptserve $(BUILD)/make_gpt_ckpt | $(BUILD)
	cp bench/serve_large.sh $@ && chmod +x $@

$(BUILD)/bench_cl: bench/bench_cl.c bench/bench_util.h ptrain.h | $(BUILD)
	$(CC) -O3 -march=native -fopenmp -DPTRAIN_OPENCL -I. bench/bench_cl.c -o $@ -lOpenCL -lclblast -lm

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
