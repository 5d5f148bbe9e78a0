# ptrain.h - build, demo, tests, benchmarks. `make help` lists the targets.
CC      ?= cc
CFLAGS  ?= -O2 -fopenmp -march=native
BUILD   := build
EXAMPLES := $(BUILD)/01_autograd $(BUILD)/02_mnist_mlp $(BUILD)/03_gpt
MPI_EXAMPLES := $(BUILD)/04_data_parallel $(BUILD)/05_tensor_parallel

.PHONY: all help deps demo test bench examples tools clean

all: examples

help:
	@echo "make deps      install the Debian packages used (as root via apt-get; idempotent)"
	@echo "make demo      train the tutorial GPT on the fortunes corpus"
	@echo "make test      run the test suite (ends with 'N passed, N failed')"
	@echo "make bench     benchmarks as JSON lines (GEMM vs OpenBLAS, GPT training step, DP allreduce/overlap/ZeRO)"
	@echo "make examples  build the tutorials into build/"

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

examples: $(EXAMPLES) $(MPI_EXAMPLES)

demo: deps $(BUILD)/03_gpt
	./$(BUILD)/03_gpt

test: deps
	@sh tests/run.sh $(BUILD)/tests

$(BUILD)/bench: bench/bench.c bench/bench_util.h ptrain.h | $(BUILD)
	$(CC) -O3 -march=native -fopenmp -I. bench/bench.c -o $@ -lopenblas -lm

$(BUILD)/bench_dist: bench/bench_dist.c bench/bench_util.h ptrain.h | $(BUILD)
	mpicc -O3 -march=native -fopenmp -DPTRAIN_MPI -I. bench/bench_dist.c -o $@ -lm

bench: deps $(BUILD)/bench $(BUILD)/bench_dist
	@sh bench/run.sh $(BUILD)/bench $(BUILD)/bench_dist

clean:
	rm -rf $(BUILD)
