/* ptrain.h - train neural networks in parallel from C. One header, no dependencies in its core.
   Version 0.1.0. MIT license or public domain, your choice (see the end of this file).

   ==================================================================================================
   QUICK START
   ==================================================================================================
   In exactly ONE C or C++ file:

       #define PTRAIN_IMPLEMENTATION
       #include "ptrain.h"

   Everywhere else just #include "ptrain.h". Then:

       pt_ctx *ctx = pt_init(NULL);                       // device, threads, errors, parameters
       pt_gpt_config cfg = {0};
       cfg.vocab = 256; cfg.max_seq = 128; cfg.layers = 4; cfg.width = 256; cfg.heads = 8;
       pt_gpt *model = pt_gpt_new(ctx, &cfg);             // parameters live in ctx's slabs
       pt_optim_desc od = {0};
       od.kind = PT_OPTIM_ADAMW; od.weight_decay = 0.1f; od.clip_norm = 1.0f;
       pt_optim *opt = pt_optim_new(ctx, &od);            // create it after every parameter
       pt_graph *g = pt_graph_new(ctx);                   // activations + tape of one pass
       for (step = 0; step < steps; step++) {
           pt_graph_reset(g);                             // reuses last step's memory
           pt_tensor *x = pt_tensor_new(g, PT_I32, 2, B, T, 0, 0), *y = ...;
           pt_tensor_write(x, ids); pt_tensor_write(y, targets);
           pt_tensor *loss = pt_gpt_loss(g, model, x, y); // NULL on error: see pt_error(ctx)
           pt_zero_grad(ctx);
           pt_backward(g, loss);
           pt_optim_step(opt, pt_lr_at(&schedule, step));
       }
       pt_shutdown(ctx);

   Compile: cc -O2 -fopenmp -march=native prog.c -lm    (-fopenmp and -march=native optional)

   The tutorials in examples/ (01_autograd.c, 02_mnist_mlp.c, 03_gpt.c; over MPI:
   04_data_parallel.c, 05_tensor_parallel.c, 06_pipeline_parallel.c, 07_gpt_3d.c,
   09_checkpoint_resume.c; on OpenCL: 08_opencl.c) each start with their one-line build command.
   The training examples share their command line: pt_args_parse, and pt_run (--data shards through
   the loader, --ckpt-dir/--ckpt-every/--resume/--ckpt-async, a clean stop on SIGINT/SIGTERM, --log
   per-step metrics, --trace, the health guard --guard; pt_run_guard before the update, pt_run_step_end
   after it; docs/monitoring.md). The tools (make tools): tools/ptcl.c lists OpenCL devices, checks
   one against the CPU backend and tunes CLBlast's GEMM for it; tools/ptckpt.c inspects, verifies,
   exports and imports checkpoints (safetensors); tools/ptreport.c draws a run's log and trace as
   SVG charts, a pipeline timeline and an HTML page; tools/ptmem.c predicts the memory per rank.

   Parallel (compile with mpicc -DPTRAIN_MPI): pt_dist_init builds the dp x tp x pp grid; pass it
   as pt_desc.dist. Tensor parallel: pt_linear_col_new / pt_linear_row_new / pt_mlp_tp_new, and
   the GPT constructors build the Megatron GPT when tp > 1. Data parallel: pt_dp_new (buckets
   reduced during backward), pt_dp_zero (ZeRO-1/2), pt_dp_new_opts (hierarchical, bf16). Pipeline:
   pt_pp_new with one function computing any stage (pt_gpt_new_stages / pt_gpt_stage_fwd for the
   GPT), pt_pp_step per step (pt_pp_set_dp hands it the DP reducer), pt_pp_eval to evaluate.

   Data: tools/prepare_shards.c turns text files into train/val token shards (byte-level, or with
   --bpe N a byte-level BPE tokenizer saved as tokenizer.bin beside them: pt_tokenizer_load_dir,
   pt_tokenizer_encode / decode); llm.c's shards are read too. pt_loader_new streams them memory-mapped (desc.dir + prefix, or a path list),
   each DP rank taking its slice of every global batch (desc.rank of desc.ranks), shuffled per epoch
   by a seed, a prefetch thread keeping batches ready; pt_loader_next fills x and y. Its state
   (pt_loader_get_state / set_state, or pt_loader_register into the checkpointed state) continues the
   stream exactly, also on another DP size or global batch. pt_loader_stats_get: data wait per batch.
   desc.kind = PT_LOADER_IDX streams fixed-size records and labels of an IDX file pair (Fashion-MNIST
   in examples/02) the same way: pt_loader_next_records (floats 0..1) or pt_loader_next_bytes.

   Observability: pt_trace_start / pt_trace_finish write a Chrome trace-event JSON (Perfetto), one
   track per rank: forward, backward, bubble, every MPI call, your own events (pt_trace_event).
   pt_profile_enable (or PTRAIN_PROFILE=1): per op type calls, time, FLOPs, bytes (pt_profile_print).

   Health: pt_guard_new / pt_guard_check per step (before pt_optim_step): NaN/Inf in the loss or the
   gradients (naming the rank), loss and gradient-norm spikes (z-score over a window); the verdict
   (agreed over the grid) says update, skip, or roll back (pt_guard_rollback: the last checkpoint, the
   LR scale times lr_factor); a periodic hash compare of the DP replicas' weights. See docs/guard.md.

   ==================================================================================================
   CONCEPTS
   ==================================================================================================
   context   pt_ctx: the device backend, the thread count, the first error, every parameter (in one
             contiguous value slab and one gradient slab), the registry of checkpointed state.
   graph     pt_graph: the activations and the tape of one forward/backward pass. Ops append nodes
             to it (define-by-run); pt_backward walks it in reverse. pt_graph_reset rewinds it and
             keeps its memory, so a training step allocates nothing after the first one. Several
             graphs may be alive at once (one per pipeline micro-batch).
   tensor    pt_tensor: (storage, element offset, shape) of contiguous row-major data, f32 first
             (bf16, f16, i32, i8 as storage types). Only the CPU backend dereferences host memory:
             pt_f32(t) gives the host pointer there (NULL on OpenCL), pt_tensor_read/write work
             everywhere; pt_transfer_stats counts a device backend's host <-> device copies.
   op        pt_add, pt_matmul, pt_attention, ...: checks its inputs (a clear error naming the op
             and the shapes), computes through the backend's kernel table, records its backward.
             Ops return NULL on error and when an input is NULL, so a pass is checked once at end.
   parameter pt_param_new / pt_param_from_spec: a slice of the slabs plus its sharding spec (name,
             global shape, tensor-parallel split, pipeline stage). Its initial value is a pure
             function of (seed, name, global element index): every parallel layout starts from
             the same model. pt_spec_global_index maps a shard's elements to the unsplit tensor
             (grouped splits such as q|k|v included).
   errors    A failing call records the first error in the context (pt_status_get, pt_error) and
             reports it to desc.on_error or the log. Nothing calls exit() or abort() on bad input
             (the one abort is the opt-in collective watchdog, PTRAIN_WATCHDOG).
   stage     a pipeline stage: consecutive layers on one pipeline rank (rank r holds stages r, r+p,
             ... with v virtual stages). pt_pp runs a schedule -- per-rank instruction lists,
             checked before they run -- with one graph per micro-batch in flight.
   checkpoint pt_ckpt_save / pt_ckpt_load: DIR/step_<k>/ holds a checksummed manifest and one
             data file per rank (parameters, optimizer moments -- ZeRO shards per DP rank --,
             registered state); written to a temporary name, fsynced, renamed, then DIR/latest;
             loading verifies every CRC32C and falls back to the previous checkpoint. Resuming
             from step k gives the same losses, bit for bit, as never stopping; a checkpoint also
             loads on any other dp x tp x pp layout and ZeRO level (resharded on load). pt_ckpt_export
             writes one as safetensors (global tensors, f32 or bf16), pt_safetensors_load reads
             such a file into the parameters; tools/ptckpt.c (make tools): inspect, verify,
             export, import.
             With opts.async the save copies the state into host memory and a thread writes it
             while training goes on; pt_ckpt_poll (each step) / pt_ckpt_wait / the next save
             commit it.
   monitor   pt_monitor_new / pt_monitor_step_end (collective, once per step): loss, grad norm, LR,
             tokens/s, MFU, the step split into compute / exposed communication / pipeline bubble /
             data wait / checkpoint stall, memory per rank, bytes per collective, the straggler --
             aggregated over the ranks, one JSON line per step written by rank 0 (docs/monitoring.md),
             pt_monitor_event for events, a progress line with ETA on a terminal.

   ==================================================================================================
   BUILD SWITCHES (define before including)
   ==================================================================================================
   PTRAIN_IMPLEMENTATION    emit the implementation in this translation unit (exactly one)
   PTRAIN_STATIC            make every API function static (private copy per translation unit)
   PTDEF                    the linkage of every API function (default extern, static with
                            PTRAIN_STATIC); define it to add e.g. __declspec(dllexport)
   PTRAIN_HARNESS           the run harness of the tools and tutorials (pt_args, pt_run: flags,
                            signals, data preparation; see harness). Without it none of that is
                            compiled, and the library installs no signal handler
   PTRAIN_MPI               real multi-process runs over MPI (compile with mpicc); without it the
                            same API runs as a world of one rank
   PT_MALLOC(sz), PT_REALLOC(p, sz), PT_FREE(p)
                            the allocator: define all three or none
   PT_ASSERT(x)             assertion macro for internal invariants (default: assert; -DNDEBUG
                            compiles them out); never used on input: bad input is an error
   PT_LOG(level, msg)       default log sink when pt_desc.log is NULL (default: stderr)
   _OPENMP (-fopenmp)       threaded kernels; results do not depend on the thread count
   PTRAIN_CBLAS             matrix products through cblas_sgemm (link e.g. -lopenblas) instead of
                            the built-in SGEMM
   PTRAIN_NO_THREADS        no prefetch thread in the data loader (pt_loader_next reads the batch),
                            no checkpoint writer thread (an asynchronous save is synchronous);
                            platforms without pthreads get this by themselves
   PTRAIN_OPENCL            the OpenCL backend (link -lOpenCL -lclblast): own kernels for every
                            entry of the kernel table (elementwise, row-wise, attention, layout,
                            images, reductions, optimizers), CLBlast for GEMM; chosen at run time
                            with device "opencl[:P[:D]]" (cpu stays the default). With PTRAIN_MPI
                            every rank may run on OpenCL: data, tensor and pipeline parallelism
                            stage their MPI payloads through host memory (DP buckets, ZeRO gathers,
                            TP sums, PP activations), counted as dp/tp/pp transfers

   ==================================================================================================
   ENVIRONMENT
   ==================================================================================================
   PTRAIN_THREADS=N         CPU threads per process (default: CPUs in the affinity mask, divided
                            among the ranks of the node sharing them)
   PTRAIN_DEVICE=cpu        backend when pt_desc.device is NULL: cpu, or opencl[:P[:D]] (platform P,
                            device D; without D an MPI rank takes node-local rank mod devices)
   PTRAIN_CL_TUNE=FILE      CLBlast kernel parameters applied to each OpenCL context (pt_cl_tune_load;
                            `ptcl tune -o FILE` writes them)
   PTRAIN_CL_OPTIONS=...    extra OpenCL build options (part of the program cache key); relaxed-math
                            options are refused. -DPT_CL_FORCE_BUILD_ERROR fails the build (tests)
   PTRAIN_CL_CACHE=DIR      where compiled OpenCL programs are cached ("off": no cache; default
                            $XDG_CACHE_HOME/ptrain or ~/.cache/ptrain)
   PTRAIN_CL_REDUCE=groups  OpenCL sums: a work group per chunk (default on GPUs) or "lanes", one
                            work item per chunk (default on CPU devices); the same bits either way
   PTRAIN_FAKE_NODE_SIZE=N  treat every N consecutive ranks as one node (tests hierarchy on one
                            machine)
   PTRAIN_COLL_CHECK=1      debug mode: the ranks of a communicator agree on each collective before
                            it runs; a mismatch fails the call on every rank, naming the ranks
   PTRAIN_WATCHDOG=S        a collective in flight for more than S seconds dumps the rank's
                            collective records to stderr and aborts the job (MPI_Abort)
   PTRAIN_CKPT_FAIL=N       (tests) pt_ckpt_save fails once a rank has written N bytes of its file
   PTRAIN_PROFILE=1         the per-op profile on from pt_init (pt_profile_enable; pt_profile_print)
   PTRAIN_PEAK_FLOPS=X      peak FLOP/s of one rank for pt_monitor's MFU (default: measured at pt_monitor_new)
   PTRAIN_PROGRESS=0|1      pt_monitor's progress line off / on (default: on an interactive terminal,
                            not under mpirun)
   PTRAIN_CKPT_DELAY_MS=N   (tests) an asynchronous checkpoint write starts N ms late
   PTRAIN_GUARD_INJECT=K:S:R (tests) faults for pt_guard_check: nan, inf (gradient), spike (loss x100),
                            flip (a weight bit) at step S on world rank R (* = all); comma-separated
   OMP_WAIT_POLICY=passive  (OpenMP's own) threads sleep instead of spinning; use it on a machine
                            shared with other busy processes, where spinning threads thrash

   ==================================================================================================
   DETERMINISM
   ==================================================================================================
   Same seed, same inputs, same layout: bit-identical results, whatever the number of threads.
   Threaded kernels never use float atomics or OpenMP reduction clauses on training values: each
   output element is computed by one thread, reductions use fixed chunks combined in a fixed
   order. Dropout masks are keyed by (seed, global element position), set with
   pt_graph_set_sample_offset.

   ==================================================================================================
   MEMORY
   ==================================================================================================
   Parameters, gradients and optimizer state: persistent slabs (pt_param_slab, pt_grad_slab).
   Activations: the graph's arena, rewound by pt_graph_reset. Gradients of activations: a pool
   of blocks, each returned as soon as the op that produced the activation has run its backward.
   Attention keeps O(B*T*C) (no T x T matrix). The fused cross-entropy writes the gradient of the
   logits over the logits themselves when no other op reads them (so a 50k vocabulary costs one
   buffer, not two): read such logits before pt_backward if you need them afterwards.
   pt_mem(ctx) reports bytes by kind (slab capacities included) and the peak. pt_mem_estimate predicts
   them per rank from a GPT config and a layout (dp x tp x pp, ZeRO, schedule, micro-batches) before
   running (tools/ptmem.c prints the table; docs/memory.md).

   ==================================================================================================
   CONTENTS: each name is a section that starts at the line "// >>name" (search for that); the
   sections stand in this order, each using only what stands above it (docs/architecture.md).
   ==================================================================================================
   api       Public declarations. Entry: (declarations only)
   base      Includes, allocator, errors and logging, clock, hashing and RNG, CRC32C, text buffer
             and JSON string writer, the context struct. Entry: pt_error_set pt_status_get pt_error
             pt_log pt_time pt_hash64 pt_rng_seed pt_crc32c
   dist      The process grid: layout <-> coordinates, nodes, communicators, agreement on errors,
             collective records, watchdog. Entry: pt_dist_init pt_dist_finalize pt_layout_resolve
             pt_dist_agree_msg pt_dist_print pt_dist_records pt_dist_set_watchdog
   backend   The kernel table a device backend supplies; element sizes; host <-> device transfer
             counts; the counting backend of the memory estimate. Entry: pt__backend pt_numel
             pt_dtype_size pt_backend_name pt_transfer_stats pt__count_backend
   gemm      Packed, cache-blocked SGEMM with run-time AVX-512/AVX2 dispatch. Entry: pt__sgemm
             pt__gemm_ws_free
   attn      Causal multi-head self-attention kernels for the CPU (flash-style, no T x T kept).
             Entry: pt__cpu_attn_fwd pt__cpu_attn_bwd pt__attn_pick
   cpu       The CPU backend: reference kernels for every table entry. Entry: pt__cpu_backend
   opencl    The OpenCL backend: devices, kernel sources, program cache, CLBlast GEMM and tuning.
             Entry: pt_device_list pt_device_info_get pt_cl_tune_load pt_sync pt_cl_mem; matmul
             through CLBlast: pt__cl_gemm
   tensor    Storages, the graph's arenas, tensors. Entry: pt_tensor_new pt_tensor_from
             pt_tensor_write pt_tensor_read pt_item pt_f32
   trace     Timelines per rank (Chrome trace-event JSON) and the per-op profile. Entry:
             pt_trace_start pt_trace_event pt_trace_add pt_trace_finish pt_profile_enable
             pt_profile_print
   autograd  Graphs, the tape, backward. Entry: pt_graph_new pt_graph_reset pt_backward
             pt_backward_from pt_graph_set_training
   param     Parameters in slabs, deterministic init, the checkpointed-state registry. Entry:
             pt_param_new pt_param_from_spec pt_spec_global_index pt_zero_grad pt_state_register
   ctx       Context setup and teardown. Entry: pt_init pt_shutdown pt_set_threads pt_mem
   ops       Every op: checks, forward through the kernel table, its backward next to it. Entry:
             pt_add pt_matmul pt_linear pt_cross_entropy pt_layernorm pt_embedding pt_attention
             pt_dropout pt_conv2d
   comm      Host staging of device data for MPI, the tensor-parallel sums, the gradient norm over
             the grid. Entry: pt_tp_size pt_tp_rank pt__stage_buf pt__stage_xfer pt__tp_allreduce
             pt__grad_sumsq
   optim     SGD with momentum, AdamW, clipping, learning-rate schedules. Entry: pt_optim_new
             pt_optim_step pt_grad_norm pt_lr_at pt_optim_free
   nn        Layers: linear and MLP. Entry: pt_linear_new pt_linear_fwd pt_mlp_new pt_mlp_fwd
   tp        Tensor parallelism: the conjugate ops f and g, column/row-parallel linears, the TP
             MLP, attention heads and block, vocabulary-parallel cross-entropy. Entry: pt_tp_copy
             pt_tp_reduce pt_linear_col_new pt_linear_row_new pt_mlp_tp_new pt_cross_entropy_vp
   gpt       The transformer block and the GPT: constructors, stages, loss, generation. Entry:
             pt_gpt_new pt_gpt_new_stages pt_gpt_loss pt_gpt_stage_fwd pt_gpt_generate pt_gpt_flops
             pt_block_new
   dp        Data parallelism: gradient buckets reduced during backward, accumulation, ZeRO-1/2,
             hierarchical allreduce, bf16 compression. Entry: pt_dp_new pt_dp_new_opts pt_dp_begin
             pt_dp_finish pt_dp_zero pt_dp_stats_get; a bucket's allreduce or ZeRO reduce-scatter:
             pt__dp_call; the ZeRO parameter all-gather: pt__dp_zero_gather
   pipeline  Pipeline schedules as data: generate, check, simulate, print. Entry:
             pt_pp_schedule_new pt_pp_schedule_check pt_pp_schedule_simulate pt_pp_schedule_print
   pprun     Pipeline execution over MPI: the schedule interpreter, a graph per micro-batch,
             transfers, tied parameters. Entry: pt_pp_new pt_pp_step pt_pp_eval pt_pp_split
             pt_pp_set_dp pt_pp_stats_get; the schedule interpreter: pt__pp_exec
   data      Token shards, the streaming loader, the byte-level BPE tokenizer. Entry:
             pt_shard_write pt_loader_new pt_loader_next pt_loader_register pt_tokenizer_train
             pt_tokenizer_load_dir
   ckpt      Checkpoints: manifest, save (synchronous or asynchronous), load with fallback and
             resharding, inspection, safetensors. Entry: pt_ckpt_save pt_ckpt_poll pt_ckpt_load
             pt_ckpt_verify pt_ckpt_export pt_safetensors_load
   monitor   Per-step metrics aggregated over the ranks, the JSON-lines log, the progress line.
             Entry: pt_monitor_new pt_monitor_step_end pt_monitor_event pt_monitor_ckpt_save
             pt_monitor_free
   guard     Health guard: NaN/Inf and spike detection, warn / skip / roll back, DP replica hashes.
             Entry: pt_guard_new pt_guard_check pt_guard_rollback pt_guard_replica_check
   memest    Memory estimate per rank from a GPT config and a layout. Entry: pt_mem_estimate
   harness   The run harness of the training programs (switch PTRAIN_HARNESS). Entry: pt_args_parse
             pt_run_parse pt_run_data pt_run_start pt_run_guard pt_run_step_end pt_run_free
*/
#ifndef PTRAIN_H
#define PTRAIN_H

#define PTRAIN_VERSION_MAJOR 0
#define PTRAIN_VERSION_MINOR 1
#define PTRAIN_VERSION_PATCH 0
#define PTRAIN_VERSION_STRING "0.1.0"

#include <stddef.h>
#include <stdint.h>

#ifndef PTDEF /* the linkage of every API function; define it yourself (e.g. for DLL export) */
#ifdef PTRAIN_STATIC
#if defined(__GNUC__) || defined(__clang__)
#define PTDEF static __attribute__((unused))
#else
#define PTDEF static
#endif
#else
#define PTDEF extern
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

// >>api  public declarations
/* Owns: every public type and function, each with its doc comment
   Invariants: the declarations are grouped in the order of the sections below
   Entry points: (declarations only) */
/* =================================================================================================
   Public API
   ================================================================================================= */

#define PT_MAX_DIMS 4

/** Element types. f32 is first-class; the others are storage types (bf16/f16 mixed precision, i32
    token ids and indices, i8 quantized weights). */
typedef enum pt_dtype { PT_F32 = 0, PT_BF16, PT_F16, PT_I32, PT_I8, PT_DTYPE_COUNT } pt_dtype;

/** Result of a call that can fail. The message is in pt_error(ctx). */
typedef enum pt_status {
    PT_OK = 0,
    PT_ERR_ARG,    /**< an invalid argument (bad flag, negative size, NULL where a value is needed) */
    PT_ERR_SHAPE,  /**< tensor shapes that do not fit the operation */
    PT_ERR_DTYPE,  /**< a tensor of the wrong element type */
    PT_ERR_OOM,    /**< an allocation failed */
    PT_ERR_IO,     /**< a file could not be read or written */
    PT_ERR_FORMAT, /**< a malformed file */
    PT_ERR_DEVICE, /**< a missing or failing compute device */
    PT_ERR_STATE   /**< a call at the wrong time (e.g. a parameter created after the optimizer) */
} pt_status;

/** Log levels of the log callback. */
typedef enum pt_log_level { PT_LOG_DEBUG = 0, PT_LOG_INFO, PT_LOG_WARN, PT_LOG_ERROR } pt_log_level;

typedef struct pt_ctx pt_ctx;         /**< a training context: device, parameters, errors, workspace */
typedef struct pt_graph pt_graph;     /**< one forward/backward graph: activation arena + tape */
typedef struct pt_storage pt_storage; /**< a buffer owned by a device (host memory or cl_mem) */
typedef struct pt_node pt_node;       /**< one recorded operation on the tape */
typedef struct pt_param pt_param;     /**< a parameter: its sharding spec and its slab slices */
typedef struct pt_optim pt_optim;     /**< an optimizer (SGD with momentum, AdamW) */

/** A tensor is a view (storage, element offset, shape) of contiguous row-major data. Fields are
    readable; create tensors with the functions below. */
typedef struct pt_tensor {
    pt_storage *st;              /**< the buffer holding the data */
    int64_t off;                 /**< offset into st, in elements */
    int32_t ndim;                /**< number of dimensions, 0 (scalar) to PT_MAX_DIMS */
    pt_dtype dtype;              /**< element type */
    int64_t shape[PT_MAX_DIMS];  /**< sizes; unused trailing entries are 1 */
    struct pt_tensor *grad;      /**< gradient (same shape), or NULL */
    pt_node *node;               /**< the op that produced it (NULL for inputs and parameters) */
    pt_param *param;             /**< the parameter it is, or NULL */
    uint32_t flags;              /**< PT_TENSOR_* */
    int32_t uses;                /**< ops on the tape that read it (activations only) */
} pt_tensor;

#define PT_TENSOR_REQUIRES_GRAD 1u /**< gradients flow to (or through) this tensor */

/** Setup of a context (sokol-style: zero-initialize, then set what you need). */
typedef struct pt_desc {
    uint64_t seed;       /**< master seed: parameter init, dropout; same seed = same run */
    int32_t threads;     /**< CPU threads; 0 = env PTRAIN_THREADS, else CPUs in the affinity mask */
    const char *device;  /**< "cpu" (default; env PTRAIN_DEVICE when NULL), or "opencl[:P[:D]]" (platform P,
                              device D; without D a rank of a pt_dist grid takes node-local rank
                              modulo the platform's devices, else device 0; needs -DPTRAIN_OPENCL) */
    void (*log)(void *user, int level, const char *msg);          /**< log sink; NULL = stderr */
    void *log_user;
    void (*on_error)(void *user, pt_status status, const char *msg); /**< called on every error */
    void *error_user;
    int32_t log_level;   /**< lowest level passed to the log sink (default PT_LOG_INFO) */
    const struct pt_dist *dist; /**< process grid (pt_dist_init): threads default to pt_dist_threads */
} pt_desc;

/* ---- context ---------------------------------------------------------------------------------- */
/** Creates a context; NULL desc = defaults. Returns NULL (and logs why) only if out of memory or
    the device is unavailable. */
PTDEF pt_ctx *pt_init(const pt_desc *desc);
/** Frees the context and everything it owns (parameters, graphs, optimizers). */
PTDEF void pt_shutdown(pt_ctx *ctx);
/** The status of the first error since the last pt_error_clear (PT_OK if none). */
PTDEF pt_status pt_status_get(const pt_ctx *ctx);
/** The message of that error ("" if none). */
PTDEF const char *pt_error(const pt_ctx *ctx);
/** Forgets the recorded error. */
PTDEF void pt_error_clear(pt_ctx *ctx);
/** Records an error as the library's own calls do (the first one since the last clear is kept,
    desc.on_error or the log is told); returns st, so a caller can `return pt_error_set(...)`. */
PTDEF pt_status pt_error_set(pt_ctx *ctx, pt_status st, const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/** The process grid the context was created with (desc.dist; NULL = a world of one rank). */
PTDEF const struct pt_dist *pt_ctx_dist(const pt_ctx *ctx);
/** Number of CPU threads kernels use. */
PTDEF int pt_threads(const pt_ctx *ctx);
/** Sets the number of CPU threads (>= 1). */
PTDEF void pt_set_threads(pt_ctx *ctx, int threads);
/** Name of the active backend ("cpu" or "opencl"). */
PTDEF const char *pt_backend_name(const pt_ctx *ctx);
/** Logs a printf-style message through the context's log sink. */
PTDEF void pt_log(pt_ctx *ctx, int level, const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/** Monotonic wall clock in seconds. */
PTDEF double pt_time(void);

/** Bytes the framework holds, by kind, now and at the high-water mark. */
typedef struct pt_mem_stats {
    int64_t params, grads, optim, activations, workspace; /**< current bytes */
    int64_t peak_total;                                    /**< high-water of their sum */
    int64_t allocs;                                        /**< allocations made so far */
} pt_mem_stats;
PTDEF pt_mem_stats pt_mem(const pt_ctx *ctx);

/** Why host <-> device data moved (pt_transfers). A device backend counts every copy between host
    memory and its buffers under the purpose in effect; the CPU backend moves nothing (all zero). */
typedef enum pt_xfer_kind {
    PT_XFER_IO = 0, /**< pt_tensor_write / pt_tensor_read / pt_item / pt_tensor_from: batches in, losses out */
    PT_XFER_PARAM,  /**< parameter initialization and slab growth */
    PT_XFER_CHECK,  /**< ids and targets read back by pt_embedding / pt_cross_entropy to check their range */
    PT_XFER_SCALAR, /**< scalar results a kernel returns to the host (pt_grad_norm's sum of squares) */
    PT_XFER_DP,     /**< staging of data-parallel gradient buckets and ZeRO gathers for MPI */
    PT_XFER_TP,     /**< staging of tensor-parallel collectives */
    PT_XFER_PP,     /**< pipeline activations and gradients sent between stages */
    PT_XFER_CKPT,   /**< checkpoints and exports */
    PT_XFER_KINDS
} pt_xfer_kind;
/** Host <-> device transfers of a context since it started (or pt_transfer_reset): bytes and
    number of copies, per purpose (index pt_xfer_kind) and in total. h2d = host to device. */
typedef struct pt_transfers {
    int64_t h2d_bytes[PT_XFER_KINDS], h2d_count[PT_XFER_KINDS];
    int64_t d2h_bytes[PT_XFER_KINDS], d2h_count[PT_XFER_KINDS];
    int64_t h2d_total_bytes, h2d_total_count, d2h_total_bytes, d2h_total_count;
} pt_transfers;
/** The transfer counters of a context (all zero on the CPU backend). */
PTDEF pt_transfers pt_transfer_stats(const pt_ctx *ctx);
/** Sets the transfer counters to zero (e.g. at the start of the step to measure). */
PTDEF void pt_transfer_reset(pt_ctx *ctx);
/** Name of a pt_xfer_kind ("io", "param", ...). */
PTDEF const char *pt_xfer_kind_name(int kind);

/** The device a context computes on. */
typedef struct pt_device_info {
    char backend[16];              /**< "cpu" or "opencl" */
    char platform[128];            /**< OpenCL platform name ("" on the CPU) */
    char device[128];              /**< OpenCL device name */
    char driver[64];               /**< driver version (part of the program cache key) */
    int32_t platform_index, device_index; /**< indices as in PTRAIN_DEVICE=opencl:P:D (-1 on the CPU) */
    int32_t program_builds;        /**< kernel programs this context compiled from source (0 or 1) */
    int32_t program_cache_loads;   /**< kernel programs it loaded from the binary cache (0 or 1) */
    char cache_file[512];          /**< the program binary cache file ("" when the cache is off) */
} pt_device_info;
/** What device ctx uses; for OpenCL also whether its kernels came from the binary cache. */
PTDEF pt_device_info pt_device_info_get(const pt_ctx *ctx);
/** Writes a listing of the devices this build can use ("cpu", then one line per OpenCL platform and
    device with its PTRAIN_DEVICE string) into buf (may be NULL); returns the number of OpenCL
    devices found (0 when built without PTRAIN_OPENCL or when no OpenCL platform is present). */
PTDEF int pt_device_list(char *buf, size_t len);
/** Waits until ctx's device has finished every queued command (clFinish on OpenCL, where ops only
    enqueue work; nothing on the CPU). For timing. */
PTDEF void pt_sync(pt_ctx *ctx);
/** OpenCL handles of a context, for interop with other OpenCL code (cl_platform_id, cl_device_id,
    cl_context, cl_command_queue as void *; all NULL when ctx is not on OpenCL). */
typedef struct pt_cl_handles {
    void *platform, *device, *context, *queue;
} pt_cl_handles;
PTDEF pt_cl_handles pt_cl_handles_get(const pt_ctx *ctx);
/** The cl_mem holding a tensor's data (its elements start at t->off); NULL on the CPU backend. */
PTDEF void *pt_cl_mem(const pt_tensor *t);
/** Applies tuned CLBlast kernel parameters from a file to ctx's OpenCL device (process-wide for that
    device, through CLBlastOverrideParameters; pt_init does it for env PTRAIN_CL_TUNE=FILE). The file
    (`ptcl tune -o FILE` writes one): lines `Kernel.PARAM = value` (e.g. `Xgemm.MWG = 64`), `#`
    comments, blank lines; a kernel named must have every one of its parameters. A bad line is
    PT_ERR_FORMAT naming the file and line; a context not on OpenCL is PT_ERR_DEVICE. */
PTDEF pt_status pt_cl_tune_load(pt_ctx *ctx, const char *path);
/** Applies one CLBlast kernel's parameters (names[i] = values[i], all of the kernel's parameters) to
    ctx's device; the next GEMM recompiles with them. For tools that search parameters. */
PTDEF pt_status pt_cl_tune_set(pt_ctx *ctx, const char *kernel, int n, const char *const *names, const size_t *values);
/** The parameter names of a CLBlast kernel ptrain knows ("Xgemm", "XgemmDirect", "Copy", "Pad",
    "Transpose", "Padtranspose", "GemmRoutine"), NULL-terminated; NULL for an unknown kernel. */
PTDEF const char *const *pt_cl_tune_params(const char *kernel);

/* ---- tensors ---------------------------------------------------------------------------------- */
/** Number of elements. */
PTDEF int64_t pt_numel(const pt_tensor *t);
/** Bytes of one element of a dtype. */
PTDEF int64_t pt_dtype_size(pt_dtype dt);
/** Host pointer to f32 data (CPU backend), or NULL. */
PTDEF float *pt_f32(const pt_tensor *t);
/** Host pointer to i32 data (CPU backend), or NULL. */
PTDEF int32_t *pt_i32(const pt_tensor *t);
/** Copies numel elements from host memory into the tensor. */
PTDEF pt_status pt_tensor_write(pt_tensor *t, const void *src);
/** Copies the tensor's elements to host memory. */
PTDEF pt_status pt_tensor_read(const pt_tensor *t, void *dst);
/** Value of a one-element f32 tensor (e.g. a loss). NAN on error. */
PTDEF float pt_item(const pt_tensor *t);
/** Writes "[2,3,4]" into buf; returns buf. */
PTDEF const char *pt_shape_str(const pt_tensor *t, char *buf, size_t n);

/* ---- graphs ----------------------------------------------------------------------------------- */
/** A graph owns the activations and the tape of one forward/backward pass. Several may be alive at
    once (e.g. one per pipeline micro-batch). */
PTDEF pt_graph *pt_graph_new(pt_ctx *ctx);
/** Frees the graph and its memory. */
PTDEF void pt_graph_free(pt_graph *g);
/** Drops the tape and all activations; keeps the memory for the next pass (no allocation then). */
PTDEF void pt_graph_reset(pt_graph *g);
/** Training mode (dropout active) on/off; default on. */
PTDEF void pt_graph_set_training(pt_graph *g, int on);
/** Tape recording on/off (off = inference, nothing kept for backward); default on. */
PTDEF void pt_graph_set_grad(pt_graph *g, int on);
/** Sets the global position of this graph's first sample, so dropout masks depend on the global
    sample index, not on how the batch was split. */
PTDEF void pt_graph_set_sample_offset(pt_graph *g, int64_t offset);
/** The context of a graph. */
PTDEF pt_ctx *pt_graph_ctx(const pt_graph *g);
/** Bytes of activation memory the graph holds now. */
PTDEF int64_t pt_graph_bytes(const pt_graph *g);

/** A new tensor in the graph's arena: ndim sizes d0..d3 (unused ones ignored), uninitialized. */
PTDEF pt_tensor *pt_tensor_new(pt_graph *g, pt_dtype dt, int ndim, int64_t d0, int64_t d1, int64_t d2,
                               int64_t d3);
/** A new tensor from a shape array; data (numel elements, may be NULL) is copied in. */
PTDEF pt_tensor *pt_tensor_from(pt_graph *g, pt_dtype dt, int ndim, const int64_t *shape, const void *data);
/** A new f32 tensor filled with value. */
PTDEF pt_tensor *pt_full(pt_graph *g, int ndim, const int64_t *shape, float value);
/** Marks a graph tensor as needing a gradient (a leaf you want d(loss)/d(t) for). */
PTDEF void pt_requires_grad(pt_tensor *t);

/* ---- ops: each records itself on the tape and has a backward --------------------------------
   All return NULL on error (message in pt_error) and return NULL at once when an input is NULL,
   so a forward pass can be checked once at its end. */
/** a + b; b may have a's trailing shape (broadcast over the leading dims). */
PTDEF pt_tensor *pt_add(pt_graph *g, pt_tensor *a, pt_tensor *b);
/** a - b; broadcast as pt_add. */
PTDEF pt_tensor *pt_sub(pt_graph *g, pt_tensor *a, pt_tensor *b);
/** a * b elementwise; broadcast as pt_add. */
PTDEF pt_tensor *pt_mul(pt_graph *g, pt_tensor *a, pt_tensor *b);
/** s * x. */
PTDEF pt_tensor *pt_scale(pt_graph *g, pt_tensor *x, float s);
/** op(a) @ op(b), op = transpose of the last two dims when ta/tb. Batched when a has more than 2
    dims: leading dims of a and b must match, or b is 2-D (shared). */
PTDEF pt_tensor *pt_matmul(pt_graph *g, pt_tensor *a, pt_tensor *b, int ta, int tb);
/** x + bias, bias of x's last-dim size. */
PTDEF pt_tensor *pt_bias_add(pt_graph *g, pt_tensor *x, pt_tensor *bias);
/** x @ w^T + b: x [..., in], w [out, in], b [out] or NULL. One fused op. */
PTDEF pt_tensor *pt_linear(pt_graph *g, pt_tensor *x, pt_tensor *w, pt_tensor *b);
/** max(x, 0). */
PTDEF pt_tensor *pt_relu(pt_graph *g, pt_tensor *x);
/** GELU, tanh approximation. */
PTDEF pt_tensor *pt_gelu(pt_graph *g, pt_tensor *x);
/** Softmax over the last dim. */
PTDEF pt_tensor *pt_softmax(pt_graph *g, pt_tensor *x);
/** Log-softmax over the last dim. */
PTDEF pt_tensor *pt_log_softmax(pt_graph *g, pt_tensor *x);
/** Mean cross-entropy of softmax(logits) [..., V] against i32 targets [...]; targets equal to
    ignore_index do not count. Fused: no probability tensor is kept; when nothing else reads the
    logits, backward writes their gradient in their place. Scalar result. */
PTDEF pt_tensor *pt_cross_entropy(pt_graph *g, pt_tensor *logits, pt_tensor *targets, int32_t ignore_index);
/** As pt_cross_entropy, softmax over the first nvalid columns only (padded vocabularies). */
PTDEF pt_tensor *pt_cross_entropy_ex(pt_graph *g, pt_tensor *logits, pt_tensor *targets, int32_t ignore_index,
                                     int64_t nvalid);
/** Layer normalization over the last dim with weight w and bias b (b may be NULL). */
PTDEF pt_tensor *pt_layernorm(pt_graph *g, pt_tensor *x, pt_tensor *w, pt_tensor *b, float eps);
/** Rows of table [V, C] picked by i32 ids [...]: result [..., C]. */
PTDEF pt_tensor *pt_embedding(pt_graph *g, pt_tensor *table, pt_tensor *ids);
/** Vocabulary-parallel embedding: w_local [V/tp, C] holds rows [vocab_offset, vocab_offset + V/tp)
    of the table; ids outside that range give zero rows (and no gradient). Sum the result over the
    TP ranks (pt_tp_reduce) to get pt_embedding of the whole table. ids must be >= 0. */
PTDEF pt_tensor *pt_embedding_vp(pt_graph *g, pt_tensor *w_local, pt_tensor *ids, int64_t vocab_offset);
/** Vocabulary-parallel mean cross-entropy: logits_local [..., V/tp] are columns [vocab_offset,
    vocab_offset + V/tp) of the logits, targets (i32, global ids in [0, nvalid), or -1 = ignored)
    are the same on every TP rank. No rank holds full logits: per row, the local log-sum-exps are
    combined by an allreduce MAX and SUM over TP, the target logit by an allreduce SUM. Columns
    with global index >= nvalid are masked (as pt_cross_entropy_ex). Backward is local:
    (softmax_local - onehot_local) / N. Collective over TP; with TP size 1 it is pt_cross_entropy_ex. */
PTDEF pt_tensor *pt_cross_entropy_vp(pt_graph *g, pt_tensor *logits_local, pt_tensor *targets, int64_t vocab_offset,
                                     int64_t nvalid);
/** Causal multi-head self-attention on packed qkv [B, T, 3C] (q, k, v each C wide, heads of C/n_head
    contiguous): result [B, T, C]. Memory O(B·T·C): no T×T matrix is kept. */
PTDEF pt_tensor *pt_attention(pt_graph *g, pt_tensor *qkv, int n_head);
/** Inverted dropout with probability p; the mask is a pure function of (context seed, seed, global
    element position), so it does not depend on how the batch is split. Identity when not training. */
PTDEF pt_tensor *pt_dropout(pt_graph *g, pt_tensor *x, float p, uint64_t seed);
/** Same data, new shape (same numel); one size may be -1 (inferred). */
PTDEF pt_tensor *pt_reshape(pt_graph *g, pt_tensor *x, int ndim, const int64_t *shape);
/** Swaps two dims (copies). */
PTDEF pt_tensor *pt_transpose(pt_graph *g, pt_tensor *x, int d0, int d1);
/** Result dim i is x's dim perm[i] (copies). */
PTDEF pt_tensor *pt_permute(pt_graph *g, pt_tensor *x, const int *perm);
/** Joins n tensors along dim (other dims equal). */
PTDEF pt_tensor *pt_concat(pt_graph *g, int n, pt_tensor *const *xs, int dim);
/** Cuts x along dim into n parts of the given sizes (summing to the dim); outs receives n tensors. */
PTDEF pt_status pt_split(pt_graph *g, pt_tensor *x, int dim, int n, const int64_t *sizes, pt_tensor **outs);
/** Elements [start, start+len) of dim (copies). */
PTDEF pt_tensor *pt_slice(pt_graph *g, pt_tensor *x, int dim, int64_t start, int64_t len);
/** Sum of all elements (scalar), in a fixed order. */
PTDEF pt_tensor *pt_sum(pt_graph *g, pt_tensor *x);
/** Mean of all elements (scalar). */
PTDEF pt_tensor *pt_mean(pt_graph *g, pt_tensor *x);
/** 2-D convolution: x [N, Cin, H, W], w [Cout, Cin, kh, kw], b [Cout] or NULL. */
PTDEF pt_tensor *pt_conv2d(pt_graph *g, pt_tensor *x, pt_tensor *w, pt_tensor *b, int stride, int pad);
/** 2-D max pooling with a k×k window: x [N, C, H, W]. */
PTDEF pt_tensor *pt_maxpool2d(pt_graph *g, pt_tensor *x, int k, int stride);

/* ---- autograd --------------------------------------------------------------------------------- */
/** Backpropagates from a scalar loss (seed gradient 1). Parameter gradients accumulate. */
PTDEF pt_status pt_backward(pt_graph *g, pt_tensor *loss);
/** Backpropagates from out with the given gradient dout (same shape): pipeline stage boundaries. */
PTDEF pt_status pt_backward_from(pt_graph *g, pt_tensor *out, const pt_tensor *dout);

/* ---- parameters ------------------------------------------------------------------------------- */
/** How a parameter is initialized: a pure function of (seed, name, global element index). */
typedef enum pt_init_kind { PT_INIT_ZEROS = 0, PT_INIT_ONES, PT_INIT_CONST, PT_INIT_NORMAL, PT_INIT_UNIFORM } pt_init_kind;

#define PT_PARAM_NO_DECAY 1u /**< excluded from weight decay (biases, norms) */
#define PT_PARAM_FROZEN 2u   /**< no gradient */
#define PT_PARAM_TIED_COPY 4u /**< a copy of a parameter that also lives on another pipeline rank (set by
                                   pt_pp_new): its gradient is summed with the original's; counted once in norms */

/** Sharding spec of a parameter: kept apart from the local shard it describes. */
typedef struct pt_spec {
    char name[96];                   /**< unique name, e.g. "h.3.attn.w" */
    int32_t ndim;
    int64_t global_shape[PT_MAX_DIMS];
    int32_t split_dim;               /**< dim cut across tensor-parallel ranks, -1 = replicated */
    int32_t split_parts, split_index;/**< number of parts and this rank's part */
    int32_t split_groups;            /**< 0 or 1: plain split; G > 1: the split dim is G equal blocks
                                          (fused weights, e.g. q|k|v), each cut in split_parts; a
                                          shard holds its part of every block, in block order */
    int32_t stage;                   /**< pipeline stage holding it, -1 = every stage */
    pt_init_kind init;
    float init_scale;                /**< std (normal), half-width (uniform) or the constant */
    uint32_t flags;                  /**< PT_PARAM_* */
} pt_spec;

/** A parameter: its spec, its tensor (a slice of the parameter slab) and its gradient (a slice of
    the gradient slab). */
struct pt_param {
    pt_spec spec;
    int32_t id;
    pt_tensor value, grad;
    int64_t slab_off; /**< element offset in the slabs */
};

/** Creates a replicated parameter of the given global shape, initialized by kind and scale. */
PTDEF pt_tensor *pt_param_new(pt_ctx *ctx, const char *name, int ndim, const int64_t *shape, pt_init_kind init,
                              float scale, uint32_t flags);
/** Creates a parameter from a full spec (sharded parameters). */
PTDEF pt_tensor *pt_param_from_spec(pt_ctx *ctx, const pt_spec *spec);
/** Global flat index (row-major in global_shape) of element local_flat of the shard s describes
    (local shape: global_shape with the split dim divided by split_parts); -1 if out of range or s
    is not a valid split. Maps shards to slices of the unsplit tensor (tests, checkpoint resharding). */
PTDEF int64_t pt_spec_global_index(const pt_spec *s, int64_t local_flat);
/** Number of parameters. */
PTDEF int pt_param_count(const pt_ctx *ctx);
/** The i-th parameter. */
PTDEF pt_param *pt_param_at(pt_ctx *ctx, int i);
/** The parameter of that name, or NULL. */
PTDEF pt_param *pt_param_find(pt_ctx *ctx, const char *name);
/** Total elements of all (local) parameters. */
PTDEF int64_t pt_param_numel(const pt_ctx *ctx);
/** Sets all parameter gradients to zero. */
PTDEF void pt_zero_grad(pt_ctx *ctx);
/** Called during backward when a parameter's gradient is complete (all its uses done). */
PTDEF void pt_set_grad_hook(pt_ctx *ctx, void (*fn)(void *user, pt_param *p), void *user);
/** Called after every node's backward (e.g. to progress non-blocking reductions with MPI_Test). */
PTDEF void pt_set_backward_poll(pt_ctx *ctx, void (*fn)(void *user), void *user);
/** The whole parameter slab (host pointer on CPU) and its element count. */
PTDEF pt_tensor pt_param_slab(pt_ctx *ctx);
/** The whole gradient slab. */
PTDEF pt_tensor pt_grad_slab(pt_ctx *ctx);

/* ---- checkpointed state registry ---------------------------------------------------------- */
/** Registers bytes that are part of the training state (saved and restored by checkpoints), equal on
    every rank (a loader's position, a step counter): a load on the same layout restores each rank's
    own copy, on another layout rank 0's. */
PTDEF pt_status pt_state_register(pt_ctx *ctx, const char *name, void *ptr, int64_t bytes);
#define PT_STATE_PER_RANK 1u /**< pt_state_register_flags: the bytes differ per rank and cannot be resharded (e.g. the
                                  bf16 error-feedback residual of pt_dp): restored from this rank's own copy on the
                                  same layout (dp, tp, pp) only; on another layout, or when the checkpoint lacks it,
                                  left as it is, with a warning */
/** pt_state_register with flags (0 or PT_STATE_PER_RANK). */
PTDEF pt_status pt_state_register_flags(pt_ctx *ctx, const char *name, void *ptr, int64_t bytes, uint32_t flags);
/** Number of registered state entries. */
PTDEF int pt_state_count(const pt_ctx *ctx);
/** Entry i: name, pointer and size. */
PTDEF const char *pt_state_at(const pt_ctx *ctx, int i, void **ptr, int64_t *bytes);

/* ---- optimizers and schedules -------------------------------------------------------------- */
typedef enum pt_optim_kind { PT_OPTIM_SGD = 0, PT_OPTIM_ADAMW } pt_optim_kind;
typedef struct pt_optim_desc {
    pt_optim_kind kind;
    float lr;           /**< default learning rate (pt_optim_step may pass another) */
    float momentum;     /**< SGD momentum (0 = plain SGD) */
    float beta1, beta2; /**< AdamW (defaults 0.9, 0.95 when 0) */
    float eps;          /**< AdamW (default 1e-8 when 0) */
    float weight_decay; /**< decoupled; not applied to PT_PARAM_NO_DECAY parameters */
    float clip_norm;    /**< clip gradients to this global L2 norm; 0 = off */
} pt_optim_desc;
/** Creates an optimizer over all parameters of ctx (its state slabs are allocated now). */
PTDEF pt_optim *pt_optim_new(pt_ctx *ctx, const pt_optim_desc *desc);
/** Frees it. */
PTDEF void pt_optim_free(pt_optim *o);
/** One update with learning rate lr (clipping first); returns the gradient norm before clipping. */
PTDEF float pt_optim_step(pt_optim *o, float lr);
/** Updates done so far. */
PTDEF int64_t pt_optim_steps(const pt_optim *o);
/** Global L2 norm of all parameter gradients, summed in a fixed order. */
PTDEF float pt_grad_norm(pt_ctx *ctx);

typedef enum pt_lr_kind { PT_LR_CONST = 0, PT_LR_COSINE, PT_LR_LINEAR } pt_lr_kind;
/** Learning-rate schedule: linear warmup to lr, then cosine or linear decay to min_lr at total. */
typedef struct pt_lr_schedule {
    pt_lr_kind kind;
    float lr, min_lr;
    int64_t warmup, total;
} pt_lr_schedule;
/** The learning rate at a step (0-based). */
PTDEF float pt_lr_at(const pt_lr_schedule *s, int64_t step);

/* ---- building blocks ------------------------------------------------------------------------ */
/** A linear layer: w [out, in], b [out] (or NULL). */
typedef struct pt_linear_layer { pt_tensor *w, *b; } pt_linear_layer;
/** Creates "<name>.w" (normal, std) and, if bias, "<name>.b" (zeros). */
PTDEF pt_linear_layer pt_linear_new(pt_ctx *ctx, const char *name, int64_t in, int64_t out, int bias, float std);
/** x @ w^T + b. */
PTDEF pt_tensor *pt_linear_fwd(pt_graph *g, const pt_linear_layer *l, pt_tensor *x);

/** A two-layer perceptron: fc (in -> hidden), act, proj (hidden -> out). */
typedef struct pt_mlp { pt_linear_layer fc, proj; int gelu; } pt_mlp;
PTDEF pt_mlp pt_mlp_new(pt_ctx *ctx, const char *name, int64_t in, int64_t hidden, int64_t out, int gelu, float std);
PTDEF pt_tensor *pt_mlp_fwd(pt_graph *g, const pt_mlp *m, pt_tensor *x);

/** GPT configuration (GPT-2 shape: learned positions, pre-norm, GELU MLP of 4x width). */
typedef struct pt_gpt_config {
    int32_t vocab;        /**< real vocabulary size */
    int32_t vocab_padded; /**< embedding rows (>= vocab; 0 = vocab rounded up to 64) */
    int32_t max_seq;      /**< positions */
    int32_t layers, width, heads;
    float dropout;        /**< residual/attention-output dropout (0 = none) */
    int32_t untied;       /**< 1 = separate LM head instead of the tied token embedding */
} pt_gpt_config;

/** One transformer block's parameters. */
typedef struct pt_block {
    pt_tensor *ln1_w, *ln1_b, *ln2_w, *ln2_b;
    pt_linear_layer attn, attn_proj;
    pt_mlp mlp;
} pt_block;

/** A transformer block: x + attn(ln1(x)), then + mlp(ln2(.)). n_head heads; dropout p. With
    pt_tp_size(ctx) > 1 it is the Megatron block (same names, shards): "<name>.attn" column-parallel
    with its q|k|v rows split as 3 groups (heads/tp heads per rank), "attn_proj" row-parallel, the
    MLP pt_mlp_tp; one allreduce forward in attn_proj and one in the MLP (n_head % tp must be 0). */
PTDEF pt_block pt_block_new(pt_ctx *ctx, const char *name, int64_t width, int n_layer_total);
PTDEF pt_tensor *pt_block_fwd(pt_graph *g, const pt_block *b, pt_tensor *x, int n_head, float dropout,
                              uint64_t seed);

typedef struct pt_gpt {
    pt_gpt_config cfg;
    pt_tensor *wte, *wpe, *lnf_w, *lnf_b, *lm_head; /* lm_head == wte when tied */
    pt_block *blocks;
    pt_ctx *ctx;
    int32_t nstages;      /**< pipeline stages the model is cut into (1 = whole) */
    int32_t *first;       /**< [nstages + 1]: first layer of each stage */
    unsigned char *mine;  /**< [nstages]: 1 = this rank holds the stage's parameters */
} pt_gpt;

/** Creates the GPT's parameters in ctx (names "wte", "wpe", "h.<l>.*", "lnf.*", "lm_head"). With
    pt_tp_size(ctx) > 1: blocks as pt_block_new, wte (and an untied lm_head) split over vocabulary
    rows (vocab_padded % tp == 0 and heads % tp == 0, else an error), wpe and the norms replicated. */
PTDEF pt_gpt *pt_gpt_new(pt_ctx *ctx, const pt_gpt_config *cfg);
/** The GPT cut into nstages pipeline stages: stage s holds layers [first[s], first[s+1]) (see
    pt_pp_split), stage 0 also the embeddings (wte, wpe), the last stage lnf and the head (tied: wte
    again, a parameter of the same name). Only the nmine stages listed in mine get parameters in
    ctx. nstages 1 (first and mine may be NULL) is pt_gpt_new. */
PTDEF pt_gpt *pt_gpt_new_stages(pt_ctx *ctx, const pt_gpt_config *cfg, int nstages, const int32_t *first, int nmine,
                                const int32_t *mine);
/** Stage s of a staged GPT: stage 0 starts from ids [B, T] (x unused), later stages from x; the
    last stage ends with the mean loss against targets (returned), the others return [B, T, C]. */
PTDEF pt_tensor *pt_gpt_stage_fwd(pt_graph *g, const pt_gpt *m, int stage, pt_tensor *x, pt_tensor *ids, pt_tensor *targets);
/** Cost estimate (FLOPs of forward + backward for a batch of B x T tokens) for pt_pp_split: per
    block into layer_cost[0..layers), the embedding into *first_extra, final norm + head + loss into
    *last_extra. */
PTDEF void pt_gpt_stage_costs(const pt_gpt_config *cfg, int64_t B, int64_t T, double *layer_cost, double *first_extra,
                              double *last_extra);
PTDEF void pt_gpt_free(pt_gpt *m);
/** Token + position embedding of ids [B, T] (i32): [B, T, C] (TP: pt_embedding_vp + pt_tp_reduce). */
PTDEF pt_tensor *pt_gpt_embed(pt_graph *g, const pt_gpt *m, pt_tensor *ids);
/** Block l. */
PTDEF pt_tensor *pt_gpt_block(pt_graph *g, const pt_gpt *m, int l, pt_tensor *x);
/** Final norm and LM head: [B, T, vocab_padded] logits. With TP size tp > 1: this rank's columns
    [B, T, vocab_padded/tp], vocabulary ids [tp_rank * vocab_padded/tp, ...) (layernorm, pt_tp_copy,
    linear with the local wte rows); the full logits exist nowhere. */
PTDEF pt_tensor *pt_gpt_head(pt_graph *g, const pt_gpt *m, pt_tensor *x);
/** The whole forward pass: logits [B, T, vocab_padded] (TP: the local [B, T, vocab_padded/tp]). */
PTDEF pt_tensor *pt_gpt_forward(pt_graph *g, const pt_gpt *m, pt_tensor *ids);
/** Mean next-token loss of ids against targets (both [B, T] i32; -1 = ignored). TP: pt_cross_entropy_vp. */
PTDEF pt_tensor *pt_gpt_loss(pt_graph *g, const pt_gpt *m, pt_tensor *ids, pt_tensor *targets);
/** Samples max_new tokens after prompt (n tokens) into out (n + max_new); temperature 0 = greedy.
    Under TP (collective) the last row's logits are gathered over TP and every rank samples the same. */
PTDEF pt_status pt_gpt_generate(pt_gpt *m, pt_graph *g, const int32_t *prompt, int n, int max_new,
                                float temperature, uint64_t seed, int32_t *out);
/** Parameters used in matmuls (all block weights and the LM head; no positions). */
PTDEF int64_t pt_gpt_matmul_params(const pt_gpt_config *cfg);
/** Training FLOPs of one step: 6·P·B·T + 12·L·B·T²·C. */
PTDEF double pt_gpt_flops(const pt_gpt_config *cfg, int64_t B, int64_t T);

/* ---- utilities -------------------------------------------------------------------------------- */
/** 64-bit mixing hash (splitmix64 finalizer). */
PTDEF uint64_t pt_hash64(uint64_t x);
/** Hash of a string (FNV-1a 64). */
PTDEF uint64_t pt_hash_str(const char *s);
/** A small deterministic random generator. */
typedef struct pt_rng { uint64_t s; } pt_rng;
PTDEF pt_rng pt_rng_seed(uint64_t seed);
PTDEF uint32_t pt_rng_u32(pt_rng *r);
/** Uniform in [0, 1). */
PTDEF float pt_rng_float(pt_rng *r);


/* ---- data: token shards and the streaming loader (see data) ----------------------------------------
   A shard is a file of token ids. Two layouts are read:
     llm.c    256 little-endian int32 (magic 20240520, version 1, token count, rest 0), then the
              tokens as uint16 (byte 1024 on).
     ptrain   a 64-byte header of little-endian fields: uint32 magic 0x534B5450 ("PTKS"), uint32
              version 1, uint32 token width in bytes (2 or 4), uint32 vocabulary size (0 = not
              recorded), uint64 token count, 40 bytes of zero; then the tokens (uint16 or uint32).
   Opening a shard checks the magic, the version, the width and that the file size is exactly
   header + count x width; a bad shard is PT_ERR_FORMAT naming the file, what was expected and what
   was found. A sample is a window of T+1 tokens starting at a multiple of T inside one shard (x =
   its first T tokens, y = its last T): a shard of n tokens holds (n - 1) / T samples. */
typedef enum pt_shard_format { PT_SHARD_PTRAIN = 0, PT_SHARD_LLMC = 1 } pt_shard_format;
#define PT_SHARD_MAGIC 0x534B5450u    /**< "PTKS": the ptrain shard magic */
#define PT_SHARD_LLMC_MAGIC 20240520  /**< llm.c's token shard magic */
/** What a shard's header says (after validation). */
typedef struct pt_shard_info {
    pt_shard_format format;
    int32_t version;      /**< 1 */
    int32_t token_bytes;  /**< 2 or 4 */
    int32_t vocab;        /**< vocabulary size (0 = not recorded; llm.c does not record it) */
    int64_t tokens;       /**< token count */
    int64_t header_bytes; /**< where the tokens start (64 or 1024) */
} pt_shard_info;
/** Reads and validates a shard's header against the file size. PT_ERR_IO (cannot open) or
    PT_ERR_FORMAT with the file, expected and found in the message. */
PTDEF pt_status pt_shard_info_read(pt_ctx *ctx, const char *path, pt_shard_info *info);
/** Writes n tokens as a shard (under path.tmp, then renamed). format PT_SHARD_LLMC stores uint16
    (every token must be < 65536); PT_SHARD_PTRAIN stores uint16 when vocab is 1..65536, else uint32.
    Tokens >= vocab (when vocab > 0) are PT_ERR_ARG. */
PTDEF pt_status pt_shard_write(pt_ctx *ctx, const char *path, pt_shard_format format, const uint32_t *tokens, int64_t n,
                               int32_t vocab);

/** The position of a loader's stream: everything needed to continue it exactly. The shuffle is a
    pure function of (seed, epoch), so (seed, epoch, sample) is the whole random state. Plain
    bytes: a checkpoint saves and restores them (pt_loader_register). */
typedef struct pt_loader_state {
    uint64_t seed;      /**< the shuffle seed */
    int64_t epoch;      /**< epochs completed */
    int64_t sample;     /**< next sample of this epoch's global order (a multiple of nothing in particular:
                             a changed global batch or DP size continues from it, no repeat, no skip) */
    int64_t shard;      /**< informational: slot in this epoch's shard order of that sample */
    int64_t position;   /**< informational: its window index in that shard */
    int64_t batches;    /**< global batches delivered so far (all epochs) */
    int64_t seq;        /**< T the state was taken with (a restore with another T is refused; PT_LOADER_IDX:
                             the record bytes) */
    int64_t samples_total; /**< samples per epoch of the dataset it was taken on (must match) */
} pt_loader_state;
/** Setup of a loader (zero-initialize, then set what you need). */
typedef struct pt_loader_desc {
    const char *const *paths; /**< shard files, in this order before shuffling ... */
    int32_t npaths;
    const char *dir;          /**< ... or every regular file of dir whose name starts with prefix, */
    const char *prefix;       /**< sorted by name (prefix NULL = all files) */
    int64_t batch;            /**< global batch B in samples (sequences); divisible by ranks */
    int64_t seq;              /**< T: tokens per sample */
    int32_t rank, ranks;      /**< this DP rank and the DP size (ranks 0 = 1): rank r reads samples
                                   [r B/ranks, (r+1) B/ranks) of every global batch */
    uint64_t seed;            /**< shuffle seed */
    int32_t shuffle;          /**< 1: shard order and windows in a shard are permuted per epoch */
    int32_t prefetch;         /**< batches a background thread keeps ready (0 = read in pt_loader_next;
                                   default used when < 0: 4). Without threads (PTRAIN_NO_THREADS) always 0 */
    int32_t kind;             /**< pt_loader_kind: PT_LOADER_TOKENS (0, shards above) or PT_LOADER_IDX */
    const char *idx_data;     /**< PT_LOADER_IDX: the IDX file of records (unsigned bytes, its first dimension
                                   counts the records; e.g. images n x 28 x 28). seq, paths, dir unused */
    const char *idx_labels;   /**< PT_LOADER_IDX: the IDX file of one unsigned-byte label per record, or NULL */
    int32_t classes;          /**< PT_LOADER_IDX: when > 0, every label must be < classes (checked on open) */
} pt_loader_desc;
/** What a loader streams: windows of token shards, or fixed-size records (+ labels) of an IDX pair.
    IDX (LeCun's format): bytes 0 0, a type byte (0x08 = unsigned byte, the one read), the number of
    dimensions, then each dimension as a big-endian uint32, then the values; the file size must be
    exactly that. A record is one index of the first dimension; its label the same index of the label file. */
typedef enum pt_loader_kind { PT_LOADER_TOKENS = 0, PT_LOADER_IDX = 1 } pt_loader_kind;
typedef struct pt_loader pt_loader;
/** Data-wait and throughput counters of a loader. */
typedef struct pt_loader_stats {
    int64_t batches;      /**< batches returned by pt_loader_next */
    double wait_s;        /**< total seconds pt_loader_next spent waiting for (or reading) data */
    double last_wait_s;   /**< of the last call: ~0 when the prefetch keeps up */
    int64_t samples_total;/**< samples per epoch (whole dataset) */
    int64_t batches_per_epoch; /**< floor(samples_total / B): the last < B samples of an epoch are skipped */
    int64_t shards;       /**< number of shards */
    int64_t tokens;       /**< tokens over all shards (PT_LOADER_IDX: records x record_bytes) */
    int64_t record_bytes; /**< PT_LOADER_IDX: bytes of one record (e.g. 784), 0 for tokens */
    int32_t record_ndim;  /**< PT_LOADER_IDX: dimensions of one record (the IDX file's minus one) */
    int64_t record_dims[3]; /**< PT_LOADER_IDX: their sizes (e.g. 28, 28) */
} pt_loader_stats;
/** Opens and validates every shard (headers only; the data is memory-mapped one or two shards at a
    time while streaming). NULL with PT_ERR_FORMAT / PT_ERR_IO / PT_ERR_ARG (e.g. a dataset with fewer
    samples than one global batch). */
PTDEF pt_loader *pt_loader_new(pt_ctx *ctx, const pt_loader_desc *desc);
/** The next batch of this rank: x and y each receive B/ranks x T token ids (row-major), y the
    targets (x shifted by one). Crosses epochs by itself. PT_ERR_IO on a read failure. */
PTDEF pt_status pt_loader_next(pt_loader *L, int32_t *x, int32_t *y);
/** PT_LOADER_IDX: the next batch of this rank as floats: x receives B/ranks records of record_bytes
    values each, byte / 255 (0..1), labels (when not NULL) B/ranks label bytes as int32 (0 without a
    label file). Same order, state and prefetch as pt_loader_next. */
PTDEF pt_status pt_loader_next_records(pt_loader *L, float *x, int32_t *labels);
/** PT_LOADER_IDX: the same batch as raw bytes (B/ranks x record_bytes). */
PTDEF pt_status pt_loader_next_bytes(pt_loader *L, uint8_t *x, int32_t *labels);
/** The state after the last batch returned (what a checkpoint saves). */
PTDEF pt_loader_state pt_loader_get_state(const pt_loader *L);
/** Continues the stream from a saved state (possibly saved with another DP size or global batch);
    PT_ERR_ARG when it belongs to another T or dataset. Ready batches are dropped and refilled. */
PTDEF pt_status pt_loader_set_state(pt_loader *L, const pt_loader_state *s);
/** Registers the loader's state with pt_state_register under name: a checkpoint saves it, and when
    a load overwrites it, the next pt_loader_next continues from the loaded state. */
PTDEF pt_status pt_loader_register(pt_loader *L, const char *name);
/** Counters (data-wait time per batch: last_wait_s; in total: wait_s / batches). */
PTDEF pt_loader_stats pt_loader_stats_get(const pt_loader *L);
/** Stops the prefetch thread, unmaps, frees. */
PTDEF void pt_loader_free(pt_loader *L);

/* ---- a byte-level BPE tokenizer (see data) ----
   Ids 0..255 are the bytes; merge i (from 0) makes id 256 + i out of a pair of smaller ids, so the
   vocabulary is 256 + merges. Training counts adjacent pairs of a byte stream and repeatedly merges
   the most frequent one (ties: the smallest left id, then the smallest right id), every occurrence
   left to right; counts are updated incrementally (no recount per merge). Encoding applies the merges
   in their order, each left to right: on the training text it gives the training's tokens. decode(
   encode(x)) == x for every byte string. The file (PT_TOKENIZER_FILE, written next to the shards by
   tools/prepare_shards --bpe N): a 32-byte header of little-endian uint32s: magic 0x45504250 ("PBPE"),
   version 1, merges N, vocabulary 256 + N, CRC32C of the pair data, 12 bytes of zero; then N pairs
   (left, right) as uint32, pair i's ids < 256 + i. */
#define PT_TOKENIZER_MAGIC 0x45504250u /**< "PBPE" */
#define PT_TOKENIZER_FILE "tokenizer.bin" /**< its name in a shard directory */
typedef struct pt_tokenizer pt_tokenizer;
/** Learns up to merges merges from n bytes (fewer when no pair occurs twice any more). */
PTDEF pt_tokenizer *pt_tokenizer_train(pt_ctx *ctx, const void *text, int64_t n, int32_t merges);
/** Reads and validates a tokenizer file: PT_ERR_IO, or PT_ERR_FORMAT naming the file, expected, found. */
PTDEF pt_tokenizer *pt_tokenizer_load(pt_ctx *ctx, const char *path);
/** DIR/PT_TOKENIZER_FILE when it exists (NULL and no error when it does not: byte-level shards). */
PTDEF pt_tokenizer *pt_tokenizer_load_dir(pt_ctx *ctx, const char *dir);
/** Writes the tokenizer (under path.tmp, then renamed). */
PTDEF pt_status pt_tokenizer_save(const pt_tokenizer *tk, const char *path);
/** 256 + merges. */
PTDEF int32_t pt_tokenizer_vocab(const pt_tokenizer *tk);
/** The ids of n bytes into ids (room for n: never more ids than bytes); returns their count, -1 on error. */
PTDEF int64_t pt_tokenizer_encode(const pt_tokenizer *tk, const void *text, int64_t n, int32_t *ids);
/** The bytes of n ids: returns their count, written to out only when it is <= cap (so a call with cap 0
    sizes the buffer); -1 (PT_ERR_ARG) for an id outside the vocabulary. */
PTDEF int64_t pt_tokenizer_decode(const pt_tokenizer *tk, const int32_t *ids, int64_t n, void *out, int64_t cap);
PTDEF void pt_tokenizer_free(pt_tokenizer *tk);

/* ---- process grid (see dist) -------------------------------------------------------------------
   The world's ranks form a dp x tp x pp grid. Rank order (a pure function, pt_layout_coords):
   TP innermost (the most local: consecutive ranks, same node), then DP, then PP outermost, i.e.
   rank = tp + TP*(dp + DP*pp) -- Megatron's "tp-dp-pp". Compiled with -DPTRAIN_MPI (mpicc) the grid
   spans the MPI world; without it every call works on a world of one rank. */

/** Grid sizes. 0 = "the rest of the world" (at most one 0; all three 0 = pure data parallel). */
typedef struct pt_layout {
    int32_t dp, tp, pp;            /**< data-, tensor- and pipeline-parallel sizes */
    int32_t allow_tp_across_nodes; /**< 1 = accept a TP group spanning nodes (slow; refused otherwise) */
} pt_layout;
/** Coordinates of a rank in the grid (each from 0 to its size - 1). */
typedef struct pt_coords { int32_t tp, pp, dp; } pt_coords;
typedef struct pt_dist pt_dist; /**< the process grid of this process: ranks, nodes, communicators */

/** Communicators of pt_dist_comm. CROSS = the ranks with my local rank, one per node. */
enum { PT_COMM_WORLD = 0, PT_COMM_TP, PT_COMM_PP, PT_COMM_DP, PT_COMM_NODE, PT_COMM_CROSS, PT_COMM_COUNT };
/** More communicators of the collective records (pt_coll_record.comm; not given by pt_dist_comm): the DP
    sub-communicators of a hierarchical pt_dp (see dp): its DP ranks on my node, its DP ranks of my index in the node. */
enum { PT_COMM_DP_NODE = PT_COMM_COUNT, PT_COMM_DP_CROSS };

/** Fills the 0 of a layout from the world size and checks dp*tp*pp == world, all >= 1. PT_OK, or
    PT_ERR_ARG with a message in err (err may be NULL). */
PTDEF pt_status pt_layout_resolve(pt_layout *l, int world, char *err, size_t errlen);
/** Pure: the coordinates of rank in a resolved layout ({-1,-1,-1} if out of range). */
PTDEF pt_coords pt_layout_coords(const pt_layout *l, int rank);
/** Pure: the rank at coordinates c (rank = tp + TP*(dp + DP*pp)); -1 if out of range. */
PTDEF int pt_layout_rank(const pt_layout *l, pt_coords c);

/** Collective. Initializes MPI if nobody has (asking for MPI_THREAD_MULTIPLE), builds the grid
    (NULL layout = pure data parallel) and its communicators. On error every rank returns NULL with
    the same message in err (and MPI is finalized again if this call initialized it). Never aborts.
    Env: PTRAIN_FAKE_NODE_SIZE=N fakes nodes of N consecutive ranks; PTRAIN_THREADS as in pt_init;
    PTRAIN_COLL_CHECK=1 debug mode (the same on every rank); PTRAIN_WATCHDOG=seconds the watchdog. */
PTDEF pt_dist *pt_dist_init(int *argc, char ***argv, const pt_layout *layout, char *err, size_t errlen);
/** Collective. Frees the communicators and d; calls MPI_Finalize if pt_dist_init initialized MPI
    (finalize that grid last). NULL is a no-op. */
PTDEF void pt_dist_finalize(pt_dist *d);
/** World rank of this process (0 for a NULL grid). */
PTDEF int pt_dist_rank(const pt_dist *d);
/** World size (1 for a NULL grid). */
PTDEF int pt_dist_size(const pt_dist *d);
/** This rank's grid coordinates. */
PTDEF pt_coords pt_dist_coords(const pt_dist *d);
/** The resolved layout (no 0 left). */
PTDEF pt_layout pt_dist_layout(const pt_dist *d);
/** Rank among the ranks of this node. */
PTDEF int pt_dist_local_rank(const pt_dist *d);
/** Number of ranks on this node. */
PTDEF int pt_dist_local_size(const pt_dist *d);
/** Index of this node (nodes numbered by their lowest world rank). */
PTDEF int pt_dist_node(const pt_dist *d);
/** Number of nodes. */
PTDEF int pt_dist_nodes(const pt_dist *d);
/** Node index of any world rank (-1 if out of range). */
PTDEF int pt_dist_node_of(const pt_dist *d, int rank);
/** OpenMP threads this rank should use: PTRAIN_THREADS if set, else the CPUs of its affinity mask
    divided by the ranks of this node sharing them, at least 1 (pass it as pt_desc.threads). */
PTDEF int pt_dist_threads(const pt_dist *d);
/** The MPI thread level MPI provides (MPI_THREAD_*; 0 without PTRAIN_MPI). */
PTDEF int pt_dist_mpi_thread_level(const pt_dist *d);
/** Pointer to an MPI_Comm (which = PT_COMM_*): MPI_Comm c = *(MPI_Comm *)pt_dist_comm(d, PT_COMM_TP).
    NULL without PTRAIN_MPI. The grid owns it. */
PTDEF void *pt_dist_comm(const pt_dist *d, int which);
/** Collective: 1 only if every rank passes ok != 0 (an error on one rank seen by all). */
PTDEF int pt_dist_agree(const pt_dist *d, int ok);
/** Collective: as pt_dist_agree, and on disagreement every rank's err receives the message that the
    lowest failing rank had in its err, so all ranks report the same error. */
PTDEF int pt_dist_agree_msg(const pt_dist *d, int ok, char *err, size_t errlen);
/** Collective: rank 0 prints the grid (a header line, then one row per rank: rank, node, local rank,
    tp, pp, dp, threads, host) to file (a FILE *; NULL = stdout). Other ranks' file is unused. */
PTDEF void pt_dist_print(const pt_dist *d, void *file);

/* Collective records. Every MPI collective, send and receive the library makes after pt_dist_init
   gets a sequence number and a record in a per-rank ring of the last PT_COLL_RING ones (the
   collectives that build the grid inside pt_dist_init are not recorded). Debug mode
   (PTRAIN_COLL_CHECK=1 or pt_dist_set_coll_check) makes the ranks of a communicator agree on each
   collective before it runs: on a mismatch no rank runs it, every rank's call fails with a message
   naming the ranks that disagree and what each asked for. The watchdog (PTRAIN_WATCHDOG=seconds or
   pt_dist_set_watchdog) is a thread that, when a record stays in flight past the deadline, prints
   the rank's records to stderr and calls MPI_Abort: the one place where ptrain.h aborts. */
#define PT_COLL_RING 256 /**< records kept per rank */
/** Operations of the records (pt_coll_record.op). */
typedef enum pt_coll_op {
    PT_COLL_ALLREDUCE = 1, PT_COLL_IALLREDUCE, PT_COLL_BCAST, PT_COLL_GATHER, PT_COLL_ALLGATHER, PT_COLL_ALLGATHERV,
    PT_COLL_REDUCE_SCATTER, PT_COLL_IREDUCE_SCATTER, PT_COLL_BARRIER, PT_COLL_SEND, PT_COLL_RECV, PT_COLL_ISEND,
    PT_COLL_IRECV, PT_COLL_IALLGATHERV, PT_COLL_OP_COUNT
} pt_coll_op;
/** Element types of the records (pt_coll_record.dtype). */
typedef enum pt_coll_dtype { PT_COLL_BYTE = 0, PT_COLL_CHAR, PT_COLL_I32, PT_COLL_I64, PT_COLL_F32, PT_COLL_F64, PT_COLL_BF16, PT_COLL_DTYPE_COUNT } pt_coll_dtype;
/** States of a record (pt_coll_record.state). */
enum { PT_COLL_IN_FLIGHT = 0, PT_COLL_DONE, PT_COLL_FAILED, PT_COLL_REFUSED };
/** One communication call of this rank. */
typedef struct pt_coll_record {
    uint64_t seq;        /**< 1, 2, ...: this rank's calls over all communicators */
    uint64_t comm_seq;   /**< 1, 2, ...: this rank's collectives on that communicator (0 for send/recv) */
    int32_t op;          /**< pt_coll_op */
    int32_t comm;        /**< PT_COMM_* (incl. PT_COMM_DP_NODE, PT_COMM_DP_CROSS) */
    int64_t count;       /**< elements (the total for allgatherv) */
    int32_t dtype;       /**< pt_coll_dtype */
    int32_t peer;        /**< root of bcast/gather, peer of send/recv (rank in comm); -1 otherwise */
    int64_t step, micro_batch; /**< pt_dist_set_step's values when the call started */
    double t_start, t_end;     /**< seconds since pt_dist_init; t_end < 0 while in flight */
    int32_t state;       /**< PT_COLL_IN_FLIGHT, _DONE, _FAILED (MPI error rc) or _REFUSED (debug mode mismatch) */
    int32_t rc;          /**< MPI's return code (0 = success) */
} pt_coll_record;
/** Tags the records of the following calls with the training step and micro-batch. */
PTDEF void pt_dist_set_step(pt_dist *d, int64_t step, int64_t micro_batch);
/** Copies the last min(max, kept) records into out, oldest first; returns how many. */
PTDEF int pt_dist_records(const pt_dist *d, pt_coll_record *out, int max);
/** Prints this rank's records (a header, then one line per record, oldest first) to file (a FILE *;
    NULL = stderr). Not collective. */
PTDEF void pt_dist_dump_records(const pt_dist *d, void *file);
/** Collective (world): debug mode on (1) or off (0); every rank must pass the same value (else
    PT_ERR_ARG on every rank and the mode is unchanged). Costs one MPI_Allgather per collective. */
PTDEF pt_status pt_dist_set_coll_check(pt_dist *d, int on);
/** This rank's watchdog deadline in seconds (0 = off; PT_ERR_ARG if negative or not finite): a
    call in flight longer than that aborts the job (MPI_Abort) after dumping the records to stderr.
    Starts or stops the watchdog thread. Without PTRAIN_MPI it is accepted and does nothing. */
PTDEF pt_status pt_dist_set_watchdog(pt_dist *d, double seconds);
/** The message of the last call refused by debug mode ("" if none). */
PTDEF const char *pt_dist_coll_error(const pt_dist *d);

/* ---- data parallelism (see dp) -----------------------------------------------------------------
   Gradients of the DP ranks are averaged in buckets: contiguous ranges of the gradient slab cut in
   reverse parameter order at pt_dp_new (the same on every rank), each reduced (MPI_Iallreduce, or
   MPI_Ireduce_scatter under ZeRO) as soon as all its parameters' gradients are complete, while
   backward goes on. A step: pt_zero_grad; pt_dp_begin_step(dp, passes); the `passes` backward passes
   (micro-batches; each parameter's grad hook fires once per pass that uses it, passes of different
   model parts may interleave); pt_dp_finish; pt_optim_step. pt_dp_begin(dp, 0/1) is the older
   per-pass form: 0 = this pass only accumulates, 1 = pt_dp_begin_step(dp, 1), the last pass, which
   reduces whatever the slab accumulated. pt_dp_new installs its own grad hook and backward poll on
   ctx (it owns them until pt_dp_free; with one DP rank, or without PTRAIN_MPI, it installs nothing
   and never communicates). Create it after all parameters; one pt_dp per context. */
typedef struct pt_dp pt_dp; /**< a data-parallel gradient reducer over one context's gradient slab */
/** Per-reducer counters, cumulative since pt_dp_new (buckets: the fixed number of buckets). */
typedef struct pt_dp_stats {
    int64_t buckets;            /**< buckets cut at pt_dp_new */
    int64_t started_before_end; /**< bucket reductions started during backward (not at pt_dp_finish) */
    int64_t bytes_reduced;      /**< bytes of gradient passed to the first reduction of each bucket (bf16: 2 per element) */
    double wait_s;              /**< seconds spent in pt_dp_finish (starting what is left, waiting) */
    int64_t extra_bytes;        /**< memory the reducer holds now: staging ring, ZeRO-2 shard, bf16 residual */
} pt_dp_stats;
/** Options of pt_dp_new_opts (zero-initialize; all 0 = pt_dp_new(ctx, d, 0)). */
typedef struct pt_dp_options {
    int64_t bucket_bytes; /**< bucket size; 0 = 25 MiB */
    int32_t hier;     /**< 1 = hierarchical allreduce (ZeRO stage 0): in-node reduce-scatter, allreduce across nodes among
                           ranks of equal local index, in-node allgather, on DP sub-communicators (equal DP ranks per node) */
    int32_t compress; /**< 1 = gradients travel as bf16 (summed as bf16 by an MPI operator), with error feedback: a
                           per-rank f32 residual keeps what rounding dropped and adds it to the next step's gradient
                           (registered state "dp.bf16_residual", PT_STATE_PER_RANK: checkpoints keep it) */
} pt_dp_options;
/** Creates the reducer for ctx over d's DP communicator; bucket_bytes 0 = 25 MiB; NULL on error (in pt_error(ctx)). */
PTDEF pt_dp *pt_dp_new(pt_ctx *ctx, const pt_dist *d, int64_t bucket_bytes);
/** Collective over DP (with hier). As pt_dp_new, with options (hierarchical, bf16 compression). */
PTDEF pt_dp *pt_dp_new_opts(pt_ctx *ctx, const pt_dist *d, const pt_dp_options *opts);
/** Waits for reductions in flight, removes its hook and poll from the context, frees dp (free it before its context). */
PTDEF void pt_dp_free(pt_dp *dp);
/** Before a step's first backward: the step's gradient comes from `passes` >= 1 backward passes; a bucket is reduced
    once all its parameters fired `passes` times (ZeRO-2: reduce-scattered after each pass). */
PTDEF void pt_dp_begin_step(pt_dp *dp, int passes);
/** Before a pass's backward: reduce_now 0 = accumulate only (no communication), 1 = pt_dp_begin_step(dp, 1). */
PTDEF void pt_dp_begin(pt_dp *dp, int reduce_now);
/** After the step's last backward: starts the buckets not yet started, waits for all, scales by 1/dp (the mean of
    the sums); ZeRO-1/2: only this rank's range [lo_r, hi_r) of the gradient slab holds it. No-op after pt_dp_begin(dp, 0). */
PTDEF pt_status pt_dp_finish(pt_dp *dp);
/** The counters. */
PTDEF pt_dp_stats pt_dp_stats_get(const pt_dp *dp);
/** ZeRO stage for optimizer o of dp's context (collective over the DP ranks; between steps). DP rank r owns the slab
    range [lo_r, hi_r) (the slab cut in dp equal parts, boundaries rounded down to 16 floats, the last rank takes the
    rest). 1 = ZeRO-1: buckets are reduce-scattered (each rank receives its range's sum), o keeps moment state for
    its range only (the full slabs are freed), pt_optim_step updates only it (clipping uses the global norm: shard
    squares summed over DP), then allgathers the parameter slab over DP. 2 = ZeRO-2: as 1, and every pass is
    reduce-scattered into a shard accumulator, so the accumulated gradient exists only as 1/dp shards (the gradient
    slab stays full size: it is autograd's per-pass scratch, so resident memory does not drop here). 0 = back to
    unsharded (state shards allgathered). One optimizer per pt_dp; on a device backend the gathers go through host
    staging (PT_XFER_DP). pt_dp_free detaches the
    allgather: free the optimizer or call pt_dp_zero(dp, o, 0) first if it is used afterwards. One DP rank (or no
    PTRAIN_MPI): changes nothing. */
PTDEF pt_status pt_dp_zero(pt_dp *dp, pt_optim *o, int stage);
/** Bytes of optimizer state (moments) this rank holds for o: the whole slab's, or its ZeRO shard's. */
PTDEF int64_t pt_optim_state_bytes(const pt_optim *o);

/* ---- tensor parallelism (see tp) ---------------------------------------------------------------
   Megatron-style building blocks over the TP communicator of the context's grid (pt_desc.dist;
   NULL grid, TP size 1 or no PTRAIN_MPI: every TP op is an identity, still recorded on the tape).
   The two conjugate ops: f = pt_tp_copy (identity forward, allreduce-sum of the gradient backward)
   and g = pt_tp_reduce (allreduce-sum forward, identity backward). A column-parallel linear holds
   out/tp rows of w [out, in] (and of b); a row-parallel linear holds in/tp columns of w, its bias
   is replicated and added once after the reduction. Shards are made by pt_param_from_spec with the
   unsplit names, so their initial values are the slices of the unsplit parameters. Replicated
   parameters (the row-parallel bias, and anything after a pt_tp_reduce) see the same input on every
   TP rank, so they get identical gradients without communication: do not reduce them over TP.
   The reductions run in host f32 memory (CPU backend); every TP rank must make the same calls in
   the same order (they are collectives over the TP communicator). The GPT (see nn) uses these
   automatically when the context's TP size is > 1: pt_block_new/pt_block_fwd build and run the
   Megatron block (qkv split with pt_spec.split_groups = 3), pt_gpt_new splits the vocabulary of wte
   (pt_embedding_vp, pt_cross_entropy_vp in ops); see those declarations. */
/** f: forward identity (a view of x), backward: the gradient is summed over the TP ranks. */
PTDEF pt_tensor *pt_tp_copy(pt_graph *g, pt_tensor *x);
/** g: forward x summed over the TP ranks (a new tensor), backward: identity. */
PTDEF pt_tensor *pt_tp_reduce(pt_graph *g, pt_tensor *x);
/** TP size of the context's grid (1 without a grid or without PTRAIN_MPI). */
PTDEF int pt_tp_size(const pt_ctx *ctx);
/** This rank's TP coordinate (0 without a grid). */
PTDEF int pt_tp_rank(const pt_ctx *ctx);
/** Column-parallel linear: "<name>.w" rows [out/tp, in] and "<name>.b" [out/tp] of this rank;
    out must split evenly over tp (else an error and NULL tensors). */
PTDEF pt_linear_layer pt_linear_col_new(pt_ctx *ctx, const char *name, int64_t in, int64_t out, int bias, float std);
/** pt_linear(pt_tp_copy(x), w, b): x [..., in] replicated -> this rank's [..., out/tp] columns. */
PTDEF pt_tensor *pt_linear_col_fwd(pt_graph *g, const pt_linear_layer *l, pt_tensor *x);
/** Row-parallel linear: "<name>.w" columns [out, in/tp] of this rank, "<name>.b" [out] replicated;
    in must split evenly over tp. */
PTDEF pt_linear_layer pt_linear_row_new(pt_ctx *ctx, const char *name, int64_t in, int64_t out, int bias, float std);
/** pt_tp_reduce(x_local @ w^T) + b: x_local [..., in/tp] -> replicated [..., out]. */
PTDEF pt_tensor *pt_linear_row_fwd(pt_graph *g, const pt_linear_layer *l, pt_tensor *x_local);
/** Tensor-parallel MLP with pt_mlp_new's names: column-parallel fc (hidden split), row-parallel
    proj; hidden must split evenly over tp. */
PTDEF pt_mlp pt_mlp_tp_new(pt_ctx *ctx, const char *name, int64_t in, int64_t hidden, int64_t out, int gelu, float std);
/** fc, act, proj: one allreduce forward (in proj) and one backward (of x's gradient). */
PTDEF pt_tensor *pt_mlp_tp_fwd(pt_graph *g, const pt_mlp *m, pt_tensor *x);

/* ---- pipeline schedules (see pipeline) ---------------------------------------------------------
   A pipeline schedule is data: for each of the p pipeline ranks, the list of instructions it runs
   in one training step (compute a micro-batch's forward or backward of one model chunk, send or
   receive an activation or a gradient, step the optimizer). With v virtual stages per rank the
   model is cut into v*p stages; global stage s = chunk*p + rank (Megatron interleaving: rank r
   holds stages r, r+p, r+2p, ...), the last stage (v*p-1) computes the loss. Activations flow from
   stage s to s+1, gradients from s+1 to s; a transfer between stages of the same rank (p = 1) is
   not emitted. In a send or receive, chunk is the chunk of the issuing rank's stage (the stage the
   data leaves or enters) and peer is the other pipeline rank. The schedules can be checked (a
   static simulation: matching, ordering, no deadlock with buffered sends and blocking receives),
   simulated with given compute times, and printed as a timeline table. Pure computation: no MPI. */
/** Schedule kinds. */
typedef enum pt_pp_kind {
    PT_PP_GPIPE = 0,     /**< all forwards, then all backwards (keeps m activations in flight) */
    PT_PP_1F1B,          /**< warm-up of p-r-1 forwards on rank r, then one forward / one backward */
    PT_PP_INTERLEAVED,   /**< Megatron interleaved 1F1B over v >= 2 chunks per rank; m % p == 0 */
    PT_PP_FORWARD_ONLY   /**< forwards and activation transfers only (inference, evaluation); v >= 1,
                              chunk by chunk */
} pt_pp_kind;
/** Instruction kinds of a pipeline program. */
typedef enum pt_pp_op {
    PT_PP_FWD = 0,   /**< forward of (micro-batch, chunk) */
    PT_PP_BWD,       /**< backward of (micro-batch, chunk) */
    PT_PP_SEND_ACT,  /**< send the chunk's output activation to the next stage's rank (peer) */
    PT_PP_RECV_ACT,  /**< receive the chunk's input activation from the previous stage's rank */
    PT_PP_SEND_GRAD, /**< send the gradient of the chunk's input to the previous stage's rank */
    PT_PP_RECV_GRAD, /**< receive the gradient of the chunk's output from the next stage's rank */
    PT_PP_OPTIM      /**< optimizer step (once, last, on every rank of a training schedule) */
} pt_pp_op;
/** One instruction: op (pt_pp_op), micro-batch, chunk (virtual stage index on this rank, 0..v-1),
    peer pipeline rank of a send/receive (-1 otherwise; mb and chunk are -1 for PT_PP_OPTIM). */
typedef struct pt_pp_instr { int32_t op, mb, chunk, peer; } pt_pp_instr;
typedef struct pt_pp_schedule pt_pp_schedule; /**< the per-rank programs of one pipeline step */

/** A schedule of kind (pt_pp_kind) for p ranks, m micro-batches, v virtual stages per rank (1
    unless PT_PP_INTERLEAVED, which needs v >= 2 and m % p == 0). NULL and a message naming the
    numbers in err on bad arguments or allocation failure. */
PTDEF pt_pp_schedule *pt_pp_schedule_new(int kind, int p, int m, int v, char *err, size_t errlen);
/** A schedule from given programs (counts[r] instructions at progs[r], copied), e.g. a custom or a
    deliberately broken one; only the sizes are checked here, run pt_pp_schedule_check. */
PTDEF pt_pp_schedule *pt_pp_schedule_from(int kind, int p, int m, int v, const int *counts,
                                          const pt_pp_instr *const *progs, char *err, size_t errlen);
/** Frees a schedule (NULL is fine). */
PTDEF void pt_pp_schedule_free(pt_pp_schedule *s);
/** Kind, p, m, v of the schedule (any out pointer may be NULL). */
PTDEF void pt_pp_schedule_shape(const pt_pp_schedule *s, int *kind, int *p, int *m, int *v);
/** Number of instructions of rank's program (0 for a bad rank). */
PTDEF int pt_pp_schedule_count(const pt_pp_schedule *s, int rank);
/** rank's program, pt_pp_schedule_count(s, rank) instructions (NULL for a bad rank). */
PTDEF const pt_pp_instr *pt_pp_schedule_instrs(const pt_pp_schedule *s, int rank);
/** Forwards of rank's warm-up phase (before its first backward is due) as built; -1 for a schedule
    from pt_pp_schedule_from or a bad rank. */
PTDEF int pt_pp_schedule_warmup(const pt_pp_schedule *s, int rank);
/** Peak activations in flight on rank: max over its program of forwards done minus backwards done
    (a forward-only schedule never frees, so it reports its forward count). */
PTDEF int pt_pp_schedule_peak_inflight(const pt_pp_schedule *s, int rank);
/** Static check: fields in range, every send matched by exactly one receive, FWD after its
    RECV_ACT, BWD after its RECV_GRAD and its FWD, sends after their compute, exactly one FWD and
    (unless forward-only) one BWD per (micro-batch, stage), OPTIM last, and no deadlock with buffered
    sends and blocking receives. The first violation (rank, instruction index, what) goes to err. */
PTDEF pt_status pt_pp_schedule_check(const pt_pp_schedule *s, char *err, size_t errlen);
/** Theoretical bubble (idle share of a step with equal stages): (p-1)/(v*m+p-1). */
PTDEF double pt_pp_bubble_theory(int p, int m, int v);
/** Event simulation, t_fwd / t_bwd per chunk forward / backward, transfers free, receives wait:
    returns the idle share 1 - busy/(p*makespan) and the makespan (may be NULL); -1 if the schedule
    is malformed or deadlocks. */
PTDEF double pt_pp_schedule_simulate(const pt_pp_schedule *s, double t_fwd, double t_bwd, double *makespan);
/** Prints the timeline (unit forward, 2-unit backward): one row "rank r |" per rank, F<mb> / B<mb>
    (F<mb>.<chunk> when interleaved) per time slot, '.' idle; then the theoretical and simulated
    bubble. file is a FILE * (NULL: stdout). */
PTDEF void pt_pp_schedule_print(const pt_pp_schedule *s, void *file);

/* ---- pipeline execution (see pprun) ------------------------------------------------------------
   pt_pp runs a training schedule over the PP communicator of the context's grid (pt_desc.dist).
   The model is cut into nstages = p*v stages; this rank (pipeline coordinate r) holds stages
   r, r+p, ..., and one function, supplied by the caller, computes any stage for any micro-batch.
   Each micro-batch of each stage gets a graph of its own (pooled, reused), alive from its forward
   to its backward. Activations and gradients travel as host f32 buffers (a shape header, then the
   data) with MPI_Isend / blocking receives, keyed by (micro-batch, stage); between stages of the
   same rank they are handed over in memory. A parameter present (by name) on the first and on the
   last pipeline rank -- a tied embedding -- is found at pt_pp_new: after backward the two gradients
   are summed between those ranks (the last rank's copy gets PT_PARAM_TIED_COPY, so norms count it
   once) and both copies take identical updates. Without a grid (or with p = 1) the same code runs
   the micro-batches on one rank: plain gradient accumulation. */
typedef struct pt_pp pt_pp; /**< a pipeline runtime: schedule, graphs, buffers, peers */
/** Computes global stage `stage` of micro-batch mb in graph g. x: the input activation (a leaf that
    needs a gradient when training), NULL on stage 0 (make the input from your data). The last
    stage returns the micro-batch's mean loss (one element), other stages their output activation.
    NULL on error (message in pt_error). */
typedef pt_tensor *(*pt_pp_stage_fn)(pt_graph *g, int stage, int mb, pt_tensor *x, void *user);
/** Pipeline runtime setup. */
typedef struct pt_pp_desc {
    int32_t kind;           /**< pt_pp_kind of the training schedule (GPipe, 1F1B or interleaved), or
                                 PT_PP_FORWARD_ONLY for an inference-only runtime (pt_pp_eval) */
    int32_t micro_batches;  /**< m (0 = the pipeline size p) */
    int32_t virtual_stages; /**< v: 0 = 2 for PT_PP_INTERLEAVED, else 1 (forward-only: any v >= 1) */
    pt_pp_stage_fn forward; /**< computes a stage */
    void *user;             /**< passed to forward */
} pt_pp_desc;
/** Timings of the last pt_pp_step / pt_pp_eval on this rank, and the pipeline-wide bubble. */
typedef struct pt_pp_stats {
    double step_s;     /**< wall time of the schedule (gradient reductions after it not included) */
    double busy_s;     /**< time inside forward and backward computations */
    double fwd_s, bwd_s;
    double bubble;     /**< idle share of the step, 1 - busy/step, averaged over the pipeline ranks */
    double my_bubble;  /**< the same for this rank alone */
    int64_t bytes_sent;/**< activation and gradient bytes this rank sent (cumulative) */
    int32_t graphs;    /**< graphs allocated (peak micro-batch stages in flight) */
} pt_pp_stats;
/** Collective over the world of ctx's grid: builds the schedule (checked with pt_pp_schedule_check),
    finds tied parameters. NULL on error, the same message on every rank (pt_error(ctx)). */
PTDEF pt_pp *pt_pp_new(pt_ctx *ctx, const pt_pp_desc *desc);
/** Frees the runtime, its graphs and buffers (waits for sends in flight). */
PTDEF void pt_pp_free(pt_pp *pp);
/** Gradients also averaged over the data-parallel ranks by dp (NULL = none): pt_pp_step drives it. */
PTDEF void pt_pp_set_dp(pt_pp *pp, pt_dp *dp);
/** Runs one training schedule: forward and backward of every micro-batch. Gradients accumulate
    (call pt_zero_grad before the first round); each micro-batch's loss is scaled by 1/(m*rounds),
    so after rounds calls (round = 0..rounds-1, gradient accumulation) the gradient is that of the
    mean loss. In the last round the gradients are averaged over DP and tied copies are summed:
    then call pt_optim_step. Returns this round's mean loss over micro-batches and DP ranks, on
    every rank (NAN on error, agreed over the world). */
PTDEF float pt_pp_step(pt_pp *pp, int round, int rounds);
/** Forward-only schedule (evaluation): the mean loss over the m micro-batches and DP ranks, on
    every rank; no gradients, graphs recycled right after each forward. */
PTDEF float pt_pp_eval(pt_pp *pp);
/** Timings of the last step (bubble agreed over the pipeline ranks). */
PTDEF pt_pp_stats pt_pp_stats_get(const pt_pp *pp);
/** The training schedule (for pt_pp_schedule_print). */
PTDEF const pt_pp_schedule *pt_pp_get_schedule(const pt_pp *pp);
/** Pipeline size p, this rank's pipeline coordinate, m and v (out pointers may be NULL). */
PTDEF void pt_pp_shape(const pt_pp *pp, int *p, int *rank, int *m, int *v);
/** Cuts `layers` consecutive layers into nstages stages: first[s] = first layer of stage s,
    first[nstages] = layers. cost NULL: equal stages (layers % nstages must be 0). Else balanced:
    cost[l] per layer, plus first_extra on stage 0 and last_extra on the last stage (e.g. embedding
    and head), minimizing the most expensive stage with >= 1 layer each. PT_ERR_ARG and a message
    naming the numbers on bad input. */
PTDEF pt_status pt_pp_split(int layers, int nstages, const double *cost, double first_extra, double last_extra,
                            int32_t *first, char *err, size_t errlen);

/* ---- checkpoints (see ckpt) --------------------------------------------------------------------
   A checkpoint of step k holds the training state after k optimizer steps: DIR/step_<k, 9 digits>/
   with a text manifest (`manifest`) and one data file per rank (`rank_<r, 5 digits>.bin`). The
   manifest records the format version, the step, the layout (dp, tp, pp, world), the model
   configuration (if given), the optimizer (kind, steps, hyper-parameters, ZeRO), each rank's grid
   coordinates and ZeRO range, each data file (bytes, CRC32C), and per tensor piece: name, kind
   (param, m, v = optimizer moments), rank (file), dtype, global shape, TP split (dim, parts, index,
   groups), the element range [lo, hi) of that shard it holds, offset, bytes, CRC32C; per registered
   state entry (pt_state_register): name, rank, offset, bytes, CRC32C. Its last line is the CRC32C
   of every byte before it. Parameters are written by the ranks of DP coordinate 0 (the replicas
   are equal); optimizer moments by DP rank 0, or under ZeRO by every DP rank for its own range;
   registered state by every rank. A save writes DIR/.tmp.step_<k>, fsyncs every file, agrees over
   the grid, renames it to step_<k>, then replaces DIR/latest (a one-line file naming it) by an
   atomic rename (the commit point), then deletes all but the newest keep_last checkpoints up to
   this step (newer ones, left by an abandoned run, are not touched; pt_ckpt_load skips them): they
   are renamed to DIR/.del.step_<k> and removed by a background thread (with any .tmp.step_* that a
   save never committed left). Needs a file system that
   all ranks share. Asynchronous (opts.async): pt_ckpt_save takes the snapshot (device -> host
   included) into a host buffer of the context (grown only) and returns; a thread writes and fsyncs
   the rank's file; the commit (agreement, manifest, renames, latest, retention: MPI collectives)
   runs on the calling thread in pt_ckpt_poll, pt_ckpt_wait or the next pt_ckpt_save. Without
   threads (PTRAIN_NO_THREADS) an asynchronous save is synchronous. Env PTRAIN_CKPT_FAIL=N (tests):
   a save fails once a rank has written N bytes.
   A checkpoint without optimizer state (an import) loads with an optimizer too: its moments start at
   zero (a warning says so). Safetensors (pt_ckpt_export, pt_safetensors_load): 8-byte little-endian
   header size, JSON header, contiguous data; see the end of ckpt. */
/** Options of pt_ckpt_save (zero-initialize). */
typedef struct pt_ckpt_opts {
    int32_t keep_last;          /**< keep the newest K checkpoints of the directory (0 = all) */
    const pt_gpt_config *model; /**< model configuration recorded in the manifest (NULL = none) */
    int32_t async;              /**< 1: snapshot the state into host memory and write it on a background
                                     thread; committed by pt_ckpt_poll / pt_ckpt_wait / the next save */
} pt_ckpt_opts;
/** Timings of the last save of a context (pt_ckpt_stats_get), this rank's view. */
typedef struct pt_ckpt_stats {
    int64_t step, bytes;  /**< its step (-1 = none yet) and this rank's file size */
    double snapshot_s;    /**< in pt_ckpt_save before the write: records, and for async the copy (+ CRC32C) */
    double write_s;       /**< writing and fsyncing this rank's file (the background thread when async) */
    double wait_s;        /**< how long the commit waited for this rank's write to finish */
    double commit_s;      /**< agreement, manifest, renames, latest, retention */
} pt_ckpt_stats;
/** CRC32C (Castagnoli, as iSCSI / RFC 3720) of n bytes, continuing crc (0 to start): pt_crc32c(0,
    "123456789", 9) = 0xE3069283; crc32c(a|b) = pt_crc32c(pt_crc32c(0, a), b). Table-driven, software. */
PTDEF uint32_t pt_crc32c(uint32_t crc, const void *data, size_t n);
/** Collective over ctx's grid (world). Saves parameters, optimizer o's state (NULL = none) and every
    registered state entry as checkpoint `step` of dir (created if needed; step < 0 = pt_optim_steps(o)).
    A failure (same error on every rank) leaves every checkpoint already in dir as it was. A save
    still in flight is committed first (its failure is returned instead). With opts->async it
    returns once the state is copied into host memory; see pt_ckpt_poll / pt_ckpt_wait. */
PTDEF pt_status pt_ckpt_save(pt_ctx *ctx, pt_optim *o, const char *dir, int64_t step, const pt_ckpt_opts *opts);
/** Collective. Commits the asynchronous save in flight (opts.async): waits for this rank's write,
    agrees, rank 0 writes the manifest and renames; PT_OK when none is in flight. A failed write is
    reported here, on every rank, with the previous checkpoints untouched. Call it before pt_shutdown
    (which joins the writer but cannot commit: the save is lost, its temporary directory removed
    by the next commit in that directory). The next pt_ckpt_save calls it first, and returns its
    failure instead of saving. */
PTDEF pt_status pt_ckpt_wait(pt_ctx *ctx);
/** Collective, cheap enough for every step: commits the save in flight once every rank's write has
    finished (one small allreduce while a save is in flight, nothing otherwise); PT_OK while it is
    still being written. Errors as pt_ckpt_wait. */
PTDEF pt_status pt_ckpt_poll(pt_ctx *ctx);
/** The step of the asynchronous save in flight (written or not yet committed), -1 if none. */
PTDEF int64_t pt_ckpt_pending(const pt_ctx *ctx);
/** Timings of ctx's last save on this rank (step -1 before the first). */
PTDEF pt_ckpt_stats pt_ckpt_stats_get(const pt_ctx *ctx);
/** Collective. Restores parameters, o's state (NULL = none) and registered state from the newest
    valid checkpoint of dir (path may also be one step directory: then only that one); newest = the
    one `latest` names (newer step directories are an unfinished save or an abandoned run and are
    skipped with a warning), then older ones. Every file is
    checked (size, CRC32C, manifest checksum); a bad or incomplete checkpoint is reported (a warning
    naming the file and the problem) and the previous one is tried. *step_out (may be NULL) = the
    step loaded, -1 if none. PT_ERR_IO when dir holds no checkpoint, PT_ERR_FORMAT when none is
    valid or none fits this model. Any layout loads any other: DP size, ZeRO sharding (the moments
    are re-cut by slab range), PP split (pieces are matched by name) and TP split (each element goes
    through its global index, grouped q|k|v splits included); the global shapes must match (a vocabulary
    padded to another size is refused, naming both). Registered state: see pt_state_register. */
PTDEF pt_status pt_ckpt_load(pt_ctx *ctx, pt_optim *o, const char *path, int64_t *step_out);
/** Checks one checkpoint directory without a context: manifest checksum, every file's size and
    CRC32C. PT_OK, or PT_ERR_IO / PT_ERR_FORMAT with a message naming the file in err. */
PTDEF pt_status pt_ckpt_verify(const char *step_dir, char *err, size_t errlen);
/** The checkpoint directory path names: path itself if it holds a manifest, else the step directory
    path/latest names, else path's newest step_* directory. PT_OK and the path in out, or PT_ERR_IO. */
PTDEF pt_status pt_ckpt_step_dir(const char *path, char *out, size_t outlen);
/** One global tensor of a checkpoint (its pieces together), as pt_ckpt_info lists it. */
typedef struct pt_ckpt_tensor_info {
    char name[96];
    int32_t kind;               /**< 0 = parameter, 1 = first moment (AdamW m, SGD momentum), 2 = AdamW v */
    int32_t ndim;
    int64_t shape[PT_MAX_DIMS]; /**< the global shape (wte: vocab_padded rows) */
    int32_t pieces;             /**< pieces it is stored in (TP shards, ZeRO ranges, a tied copy) */
    int64_t bytes;              /**< bytes of those pieces */
} pt_ckpt_tensor_info;
/** One data file of a checkpoint. */
typedef struct pt_ckpt_file_info {
    char name[64];
    int64_t bytes;
    uint32_t crc32c;
} pt_ckpt_file_info;
/** What a checkpoint directory holds (pt_ckpt_info_read; release with pt_ckpt_info_free). */
typedef struct pt_ckpt_info {
    int64_t step;
    int32_t dp, tp, pp, world;
    int32_t has_model;           /**< 1 = the manifest records the model configuration (model) */
    pt_gpt_config model;
    int32_t optim_kind;          /**< -1 = no optimizer state, else a pt_optim_kind */
    int64_t optim_steps;
    int32_t nfiles, ntensors, nstate;
    pt_ckpt_file_info *files;    /**< [nfiles]: one per rank */
    pt_ckpt_tensor_info *tensors;/**< [ntensors]: global tensors, parameters first, in manifest order */
    int64_t state_bytes;         /**< registered state, every rank's together */
} pt_ckpt_info;
/** Reads the manifest of the checkpoint path names (pt_ckpt_step_dir; its checksum is checked, the
    data files are not: pt_ckpt_verify) into info. PT_OK, or an error with a message in err. */
PTDEF pt_status pt_ckpt_info_read(const char *path, pt_ckpt_info *info, char *err, size_t errlen);
PTDEF void pt_ckpt_info_free(pt_ckpt_info *info);
/** Assembles global tensor (name, kind) of checkpoint step_dir into out (n = its element count):
    each piece's CRC32C checked, TP shards placed through pt_spec_global_index, ZeRO ranges joined. */
PTDEF pt_status pt_ckpt_tensor_read(const char *step_dir, const char *name, int kind, float *out, int64_t n, char *err, size_t errlen);
/** Options of pt_ckpt_export (zero-initialize). */
typedef struct pt_ckpt_export_opts {
    int32_t bf16;    /**< 1 = BF16 (round to nearest even, NaN kept), 0 = F32 */
    int32_t moments; /**< 1 = also the optimizer moments, as "optim.m.<name>" and "optim.v.<name>" */
} pt_ckpt_export_opts;
/** Writes checkpoint step_dir as a safetensors file (loadable by Python's safetensors): every global
    tensor under its parameter name and global shape (a padded vocabulary stays padded), metadata
    "format": "pt", "step" and the model configuration ("vocab", "vocab_padded" = the rows of wte,
    "max_seq", "layers", "width", "heads", "dropout", "untied"). Written to out_path.tmp and renamed: a failure leaves
    out_path as it was. */
PTDEF pt_status pt_ckpt_export(const char *step_dir, const char *out_path, const pt_ckpt_export_opts *opts, char *err, size_t errlen);
/** The model configuration (and *step, -1 if absent; may be NULL) a safetensors file's metadata
    records, as pt_ckpt_export writes it. PT_ERR_FORMAT with a message when the file is not valid
    safetensors or lacks a key. */
PTDEF pt_status pt_safetensors_config(const char *path, pt_gpt_config *cfg, int64_t *step, char *err, size_t errlen);
/** Collective over ctx's grid. Sets every parameter of ctx from the safetensors tensor of its name
    (F32, BF16 or F16; a TP shard takes its elements of the global tensor). Refused, nothing
    changed: an invalid file, a parameter missing from it, another shape, and (on a grid without
    pipeline stages) a tensor that is no parameter ("optim.*" moments are ignored). */
PTDEF pt_status pt_safetensors_load(pt_ctx *ctx, const char *path);

/* ---- timelines and the per-op profile (see trace) ----------------------------------------------
   A Chrome trace-event JSON file per run (opens in Perfetto, ui.perfetto.dev, or chrome://tracing):
   one track (pid) per world rank, complete events ("ph":"X") with ts and dur in microseconds on
   one time base for all ranks. pt_trace_start starts recording on every rank (a per-rank buffer of
   at most max_events; events beyond it are dropped and counted in the file's otherData and the
   rank's process label), pt_trace_finish gathers every rank's events to rank 0, which writes the file
   (temporary name, then rename). What is recorded by itself: per pipeline micro-batch and chunk its
   forward and backward (cat "forward"/"backward", args mb, chunk), the gaps of a pt_pp_step between
   them ("bubble": what pt_pp_stats counts as idle, so the bubble events of a step sum to
   my_bubble x step_s), every MPI call of the library after pt_trace_start (named by the op, cat
   "comm", or "sendrecv" for point-to-point; args comm, bytes; non-blocking ones on tracks tid 1, 2,
   ... as they overlap), pt_dp_finish's wait ("dp_wait"), pt_loader_next's wait (cat "data"), pt_ckpt_save's
   blocking part ("ckpt"; an asynchronous save's write on tid 16, "ckpt_write", and its commit, "ckpt_commit",
   added at the commit). Programs add theirs through pt_trace_event / pt_trace_add (optimizer,
   step; pt_run adds "optim"). Clock: pt_time() (monotonic) minus each rank's own value
   read right after a barrier at pt_trace_start: ranks line up to the barrier's exit skew (a few
   microseconds on one node, more across nodes) and drift apart with their clocks over long runs.
   Off (the default) costs one branch per hook. Record from the thread that calls the library: a
   background thread's timings are handed over and added from there with their own tid.
   The profile (pt_profile_enable or env PTRAIN_PROFILE=1 at pt_init) sums per op type the calls, the
   forward time (from the op's first output allocation to its tape record: the kernels), the backward
   time (its node's backward), FLOPs from the shapes (matmul 2*M*N*K, linear 2*rows*in*out (+ bias),
   conv2d 2*out*Ci*k*k, attention 2*B*T*T*C (causal half of QK^T and PV); backward: one such product
   per input needing a gradient, attention 2.5x its forward; other ops: one per output element, in
   backward per input needing a gradient) and bytes (forward: inputs read + output written;
   backward: output gradient, inputs, and each input gradient read and written). */
/** Categories of trace events ("cat" in the file). */
typedef enum pt_trace_cat {
    PT_TRACE_FORWARD = 0, PT_TRACE_BACKWARD, PT_TRACE_COMM, PT_TRACE_SENDRECV, PT_TRACE_BUBBLE, PT_TRACE_DATA, PT_TRACE_CKPT,
    PT_TRACE_OPTIM, PT_TRACE_STEP, PT_TRACE_CAT_COUNT
} pt_trace_cat;
/** One event for pt_trace_add (step, mb, chunk and comm -1 where they do not apply). */
typedef struct pt_trace_rec {
    int32_t cat;      /**< pt_trace_cat */
    int32_t tid;      /**< 0 = the main thread; another id for a background thread's track */
    const char *name; /**< copied (up to 31 bytes) */
    double t0, t1;    /**< start and end, pt_time() seconds */
    int64_t step;     /**< < 0: the step of pt_trace_step */
    int64_t mb;       /**< micro-batch, < 0 = none */
    int32_t chunk;    /**< pipeline chunk, < 0 = none */
    int32_t comm;     /**< PT_COMM_* of a communication event, < 0 = none */
    int64_t bytes;    /**< bytes moved, <= 0 = none */
} pt_trace_rec;
/** Starts recording a timeline. Collective over d's world (d NULL: this process alone, one rank);
    path: the JSON file rank 0 writes at pt_trace_finish (other ranks' path unused; may be NULL
    there); max_events per rank (0 = 1000000). PT_ERR_STATE if already recording, PT_ERR_ARG on bad
    arguments (the same on every rank), PT_ERR_OOM. */
PTDEF pt_status pt_trace_start(pt_ctx *ctx, const pt_dist *d, const char *path, int64_t max_events);
/** 1 while ctx records a timeline. */
PTDEF int pt_trace_on(const pt_ctx *ctx);
/** The training step the following events belong to (args.step). */
PTDEF void pt_trace_step(pt_ctx *ctx, int64_t step);
/** Adds an event on the main track: t0, t1 from pt_time(); step < 0 = pt_trace_step's; mb < 0 =
    none. A no-op when not recording. */
PTDEF void pt_trace_event(pt_ctx *ctx, int cat, const char *name, double t0, double t1, int64_t step, int64_t mb);
/** Adds an event with every field (pt_trace_rec). A no-op when not recording. */
PTDEF void pt_trace_add(pt_ctx *ctx, const pt_trace_rec *r);
/** Events buffered on this rank so far (0 when not recording); *dropped (may be NULL): those beyond max_events. */
PTDEF int64_t pt_trace_count(const pt_ctx *ctx, int64_t *dropped);
/** Collective over the world given to pt_trace_start: stops recording, gathers every rank's events to
    rank 0 (point-to-point, in chunks of at most 64 MiB), which writes {"traceEvents":[...],
    "displayTimeUnit":"ms","otherData":{...}} to path.tmp and renames it to path. PT_ERR_IO (file) with
    the same message on every rank; PT_ERR_STATE if not recording. The buffers are freed either way. */
PTDEF pt_status pt_trace_finish(pt_ctx *ctx);
/** One op type of the profile. */
typedef struct pt_profile_entry {
    const char *op;           /**< the op's name ("pt_matmul", ...) */
    int64_t calls, bwd_calls; /**< forward calls, backward calls */
    double fwd_s, bwd_s;      /**< seconds */
    double fwd_flops, bwd_flops, fwd_bytes, bwd_bytes;
} pt_profile_entry;
/** Per-op profile on (1) or off (0; what was summed is kept until pt_profile_reset). */
PTDEF pt_status pt_profile_enable(pt_ctx *ctx, int on);
/** Clears the sums. */
PTDEF void pt_profile_reset(pt_ctx *ctx);
/** Copies min(max, n) op types, most time (forward + backward) first, into out (may be NULL);
    returns n, the number of op types seen. */
PTDEF int pt_profile_get(const pt_ctx *ctx, pt_profile_entry *out, int max);
/** Prints the profile table (one row per op type, most time first, then a total row) to file (a
    FILE *; NULL = stdout): calls, ms forward / backward, GFLOP, GB, GFLOP/s. */
PTDEF void pt_profile_print(const pt_ctx *ctx, void *file);

/* ---- per-step metrics and the JSON-lines log (see monitor) -------------------------------------
   A monitor measures every training step on every rank; pt_monitor_step_end, a collective over
   the world (one MPI_Allgather of a fixed vector of per-rank numbers), gives every rank the
   aggregated numbers and lets world rank 0 write one JSON object per line to the log: a
   run_start header (configuration, layout, the MFU formula and the peak it divides by), one line
   per step, and events. A step's time is split into exposed communication (time blocked in
   blocking MPI calls and in waits for non-blocking ones -- a reduction running in the background
   costs nothing), pipeline bubble (idle time of pt_pp_step; its point-to-point waits count here,
   not as communication), data wait, checkpoint stall, and compute = the rest. docs/monitoring.md
   describes every field. One monitor per run; all of its calls are made by the training thread. */
typedef struct pt_monitor pt_monitor;
/** Kinds of time of pt_monitor_add_time. */
typedef enum pt_mon_time { PT_MON_DATA = 0, PT_MON_CKPT, PT_MON_BUBBLE, PT_MON_COMM, PT_MON_EVAL, PT_MON_TIMES } pt_mon_time;
/** Setup of a monitor (zero-initialize, then set what you need). */
typedef struct pt_monitor_desc {
    const char *log_path;       /**< JSON-lines file written by world rank 0 (NULL = no file) */
    int32_t append;             /**< 1 = append to it (a resumed run), 0 = truncate */
    const pt_gpt_config *model; /**< written into the header's config; with seq, gives flops_per_token */
    int64_t seq;                /**< tokens per sequence T (for pt_gpt_flops_per_token) */
    double flops_per_token;     /**< training FLOPs per token; 0 = pt_gpt_flops_per_token(model, seq), or no MFU */
    double peak_flops;          /**< peak FLOP/s of one rank; 0 = env PTRAIN_PEAK_FLOPS, else measured at
                                     pt_monitor_new (ptrain's own f32 matmul; the header says which) */
    const char *const *config;  /**< more header configuration: key, value, key, value, ..., NULL (a value that
                                     reads as a number is written as one) */
    const pt_loader *loader;    /**< data wait taken from its counters (NULL: pt_monitor_add_time(PT_MON_DATA)) */
    const pt_pp *pp;            /**< bubble = idle time of its last pt_pp_step (NULL: none, or add it yourself) */
    int64_t first_step;         /**< number of the first step (a resumed run: the step it resumed from) */
    int64_t total_steps;        /**< steps of the run (progress and ETA; 0 = unknown) */
    int32_t progress;           /**< 0 = auto: a progress line (carriage return) on an interactive terminal,
                                     not under mpirun; 1 = on; -1 = off. Env PTRAIN_PROGRESS=0/1 overrides */
    int32_t print_every;        /**< without the progress line: a plain line on stderr every N steps (0 = none) */
} pt_monitor_desc;
/** What the program knows at the end of a step. */
typedef struct pt_monitor_step {
    float loss;      /**< this rank's loss (the log has the mean over ranks); NAN = unknown */
    float grad_norm; /**< the global gradient norm (the log has the largest over ranks); NAN = unknown */
    float lr;        /**< the learning rate of the step */
    int64_t tokens;  /**< tokens of the whole step, all DP ranks together (global batch x T) */
} pt_monitor_step;
/** Numbers of one step: aggregated over ranks (pt_monitor_last's all) or of this rank (mine). */
typedef struct pt_monitor_metrics {
    int64_t step, tokens;
    double loss, val_loss, grad_norm, lr;  /**< NAN when not given */
    double tokens_per_s, mfu;              /**< mfu: NAN without flops_per_token */
    double t_step, t_compute, t_comm, t_bubble, t_data, t_ckpt; /**< seconds */
    double t_eval;                         /**< seconds of validation inside the step (PT_MON_EVAL), not in t_compute nor tokens_per_s */
    int64_t mem_peak_bytes, rss_peak_bytes; /**< framework high-water (pt_mem), process RSS high-water */
    int32_t straggler_rank;                 /**< the rank that waited least for others (-1 in mine) */
    double straggler_s;                     /**< its working time minus the median rank's */
    int64_t coll_bytes[PT_COLL_OP_COUNT];   /**< bytes per pt_coll_op during the step */
    double coll_s[PT_COLL_OP_COUNT];        /**< seconds start to completion per pt_coll_op */
} pt_monitor_metrics;
/** Totals of a grid's completed MPI calls since pt_dist_init, per pt_coll_op, and the time the
    calling threads were blocked (all zero for a NULL grid or without PTRAIN_MPI). */
typedef struct pt_coll_totals {
    int64_t bytes[PT_COLL_OP_COUNT], calls[PT_COLL_OP_COUNT];
    double seconds[PT_COLL_OP_COUNT]; /**< start to completion (non-blocking: including the background time) */
    double blocked_s;                 /**< in blocking collectives and in waits for non-blocking ones */
    double blocked_p2p_s;             /**< in blocking sends/receives and waits for non-blocking ones */
} pt_coll_totals;
PTDEF pt_coll_totals pt_dist_coll_totals(const pt_dist *d);
/** Name of a pt_coll_op ("allreduce", "iallreduce", "isend", ...; "?" if out of range). */
PTDEF const char *pt_coll_op_name(int op);
/** Training FLOPs per token of the GPT at sequence length T: 6*P + 12*L*T*C, P = pt_gpt_matmul_params
    (matmul weights with the LM head, no embedding lookups), L layers, C width
    (= pt_gpt_flops(cfg, 1, T) / T; attention counted over the full T x T, as in PaLM's MFU). */
PTDEF double pt_gpt_flops_per_token(const pt_gpt_config *cfg, int64_t seq);
/** Resident memory of this process now and its high-water mark, in bytes (0 where unknown). */
PTDEF void pt_rss(int64_t *current, int64_t *peak);
/** Collective over d's world (NULL = one rank). Opens the log on world rank 0 and writes the header;
    measures the peak FLOP/s when needed. NULL on error with the same message on every rank
    (pt_error(ctx)): PT_ERR_IO naming the path when the log cannot be opened. */
PTDEF pt_monitor *pt_monitor_new(pt_ctx *ctx, const pt_dist *d, const pt_monitor_desc *desc);
/** Marks the start of a step (optional: by default a step starts where the previous one ended). */
PTDEF void pt_monitor_step_begin(pt_monitor *m);
/** Adds seconds of one kind (pt_mon_time) to this rank's step, for what the monitor cannot see itself. */
PTDEF void pt_monitor_add_time(pt_monitor *m, int kind, double seconds);
/** The step has a validation loss (any ranks may give it; the log has their mean). */
PTDEF void pt_monitor_val_loss(pt_monitor *m, float val_loss);
/** Collective over the world: ends the step, aggregates, rank 0 logs it (and other ranks' events)
    and draws the progress. PT_OK, or the MPI error (the same on every rank). */
PTDEF pt_status pt_monitor_step_end(pt_monitor *m, const pt_monitor_step *s);
/** Logs an event {"event":name,"step":N,"time_s":..,...} with members from fmt: space-separated
    key=value, a value being a printf conversion (%d %i %u %ld %lld %zu %f %e %g with flags, %s for a
    string, escaped) taking the next argument, or literal text, e.g. pt_monitor_event(m, "guard",
    "kind=spike loss=%g z=%.2f", loss, z). Rank 0 writes it now; another rank's (with "rank") goes to
    rank 0 at the next pt_monitor_step_end. */
PTDEF void pt_monitor_event(pt_monitor *m, const char *name, const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/** pt_ckpt_save (collective), timed as this step's checkpoint stall (its MPI calls count there, not as
    communication), logged as event "ckpt_save" (dir, ckpt_step, seconds, ok). */
PTDEF pt_status pt_monitor_ckpt_save(pt_monitor *m, pt_optim *o, const char *dir, int64_t step, const pt_ckpt_opts *opts);
/** The last step's numbers: aggregated (all) and this rank's own (mine); either may be NULL. */
PTDEF void pt_monitor_last(const pt_monitor *m, pt_monitor_metrics *all, pt_monitor_metrics *mine);
/** 1 if this rank draws the progress line (rank 0, and see pt_monitor_desc.progress). */
PTDEF int pt_monitor_progress_on(const pt_monitor *m);
/** The step number the next pt_monitor_step_end logs (after a rollback a run continues at an
    earlier step, and the log numbers the steps from there). */
PTDEF void pt_monitor_set_step(pt_monitor *m, int64_t step);
/** Rank 0 writes a run_end event (steps, seconds) and closes the log; frees m. Not collective: events
    of other ranks not yet sent are dropped. NULL is a no-op. */
PTDEF void pt_monitor_free(pt_monitor *m);
/* ---- health guard (see guard) ------------------------------------------------------------------
   Per step, after backward (and pt_dp_finish / pt_pp_step) and before pt_optim_step, the training
   loop calls pt_guard_check(g, step, loss, grad_norm); it returns the verdict, the same on every
   rank of ctx's grid (one MPI_Allgather of 4 doubles per rank over the world):
   - non-finite values: each rank tests its local loss and, when its grad_norm is not finite (or not
     given, < 0), the sum of squares of its whole local gradient slab; the event names the lowest
     world rank holding one (a rank that holds a non-finite gradient before one that only saw it in
     a reduced norm). A NaN born in backward before the DP reduction reaches every DP replica, so
     then the rank named is the lowest of them; a non-finite local loss names its origin.
   - spikes: z = (x - mean) / std of the last `window` accepted steps' values (a ring; mean and
     population std recomputed from it in a fixed order), for the loss (the mean of the ranks'
     losses: pass each rank's local loss or the global one) and the gradient norm (the largest
     over the ranks); a spike when z > z_threshold once `warmup` steps were accepted. Non-finite
     and spike steps are not added to the ring.
   Policy: PT_GUARD_POLICY_WARN returns PT_GUARD_OK always (events only: an update with a NaN
   gradient makes parameters NaN, and the DP reduction spreads them; the guard keeps reporting);
   _SKIP returns PT_GUARD_SKIP for a bad step (do not call pt_optim_step; pt_zero_grad before the
   next step); _ROLLBACK returns PT_GUARD_SKIP for a bad step and PT_GUARD_ROLLBACK after
   rollback_after consecutive ones (or at once on a replica mismatch): then call pt_guard_rollback,
   which loads the newest valid checkpoint of ckpt_dir (pt_ckpt_load: parameters, optimizer,
   registered state: the data stream too) and multiplies the LR scale by lr_factor. The LR scale
   is guard state: multiply your learning rate by pt_guard_lr_scale(g). The guard's state (the
   ring, counters, LR scale) is registered as checkpointed state "guard" (create the guard before
   pt_ckpt_load on resume; same window), so a resumed run gives the same verdicts; the LR scale
   after a rollback is kept (the loaded one times lr_factor), not the checkpoint's.
   Replica check: every replica_check_every steps (or pt_guard_replica_check) each rank's CRC32C
   of its parameter slab is compared among the DP replicas of its (tp, pp) position; the ranks
   whose hash differs from the majority (on a tie: from the lowest DP rank's) are an event.
   Every event is kept (the last PT_GUARD_EVENTS_KEPT, pt_guard_events), passed to on_event on
   every rank (the same events everywhere) and logged as a warning by world rank 0.
   Env PTRAIN_GUARD_INJECT=KIND:STEP:RANK[,...] (tests; RANK = world rank, * = every rank; each
   fires once, at pt_guard_check of that step): nan / inf = the rank's first gradient element,
   spike = the rank's loss times 100, flip = a bit of the rank's first parameter element. */
#define PT_GUARD_EVENTS_KEPT 256
typedef struct pt_guard pt_guard; /**< a health guard (pt_guard_new) */
/** What pt_guard_check does with a bad step. */
typedef enum pt_guard_policy { PT_GUARD_POLICY_WARN = 0, PT_GUARD_POLICY_SKIP, PT_GUARD_POLICY_ROLLBACK } pt_guard_policy;
/** Verdicts of pt_guard_check (< 0: an error, see pt_error). */
typedef enum pt_guard_verdict { PT_GUARD_OK = 0, PT_GUARD_SKIP, PT_GUARD_ROLLBACK } pt_guard_verdict;
/** Kinds of events (pt_guard_event.kind). */
typedef enum pt_guard_event_kind {
    PT_GUARD_EV_LOSS_NONFINITE = 0, PT_GUARD_EV_GRAD_NONFINITE, PT_GUARD_EV_LOSS_SPIKE, PT_GUARD_EV_GRAD_SPIKE,
    PT_GUARD_EV_ROLLBACK, PT_GUARD_EV_REPLICA_MISMATCH, PT_GUARD_EV_KINDS
} pt_guard_event_kind;
/** One event. */
typedef struct pt_guard_event {
    int64_t step;     /**< the step checked (a rollback: the step it happened at) */
    int32_t kind;     /**< pt_guard_event_kind */
    int32_t rank;     /**< world rank: where a non-finite value first appeared (lowest), the largest loss or
                           norm of a spike, the first differing replica; -1 = none */
    int32_t verdict;  /**< the step's verdict (pt_guard_verdict) */
    double value;     /**< the loss or norm (spike, non-finite), the new LR scale (rollback), the number of
                           differing replicas (mismatch) */
    double z;         /**< z-score of a spike (0 otherwise) */
    double mean, std; /**< the statistics the z-score used */
    int64_t loaded_step; /**< rollback: the checkpoint step loaded (-1 otherwise) */
    char detail[160]; /**< one readable line */
} pt_guard_event;
/** Setup of a guard (zero-initialize; 0 = the default in brackets). */
typedef struct pt_guard_desc {
    int32_t policy;              /**< pt_guard_policy [WARN] */
    int32_t window;              /**< accepted steps in the statistics [128] */
    float z_threshold;           /**< spike when z > this [6] */
    int32_t warmup;              /**< accepted steps before z-scores count [16, at least 2] */
    int32_t rollback_after;      /**< consecutive bad steps before PT_GUARD_ROLLBACK [3] */
    float lr_factor;             /**< LR scale multiplier per rollback [0.5] */
    const char *ckpt_dir;        /**< checkpoints to roll back to (needed by POLICY_ROLLBACK; copied) */
    int32_t replica_check_every; /**< pt_guard_check compares DP replicas at steps % K == 0 [0 = never] */
    void (*on_event)(void *user, const pt_guard_event *e); /**< called for every event [none] */
    void *user;
} pt_guard_desc;
/** Guard statistics and counters. */
typedef struct pt_guard_stats {
    int64_t checks, skips, rollbacks, events; /**< rollbacks: checkpointed; the others: this process */
    int64_t accepted;         /**< steps added to the statistics (checkpointed) */
    int64_t consecutive_bad;  /**< bad steps in a row now */
    int32_t n;                /**< values in the ring now */
    double lr_scale;          /**< what to multiply the LR by */
    double loss_mean, loss_std, grad_mean, grad_std; /**< over the ring */
} pt_guard_stats;
/** Creates a guard on ctx (over ctx's grid: pt_desc.dist) and registers its state "guard". Not itself
    collective, but every rank of the grid creates one (pt_guard_check is). NULL on error (PT_ERR_ARG
    naming the field). Every rank passes its loss to pt_guard_check. Free it with pt_guard_free
    before pt_shutdown. */
PTDEF pt_guard *pt_guard_new(pt_ctx *ctx, const pt_guard_desc *desc);
/** Frees the guard and unregisters its state. NULL is a no-op. */
PTDEF void pt_guard_free(pt_guard *g);
/** Collective (world). Checks step's loss and gradient norm (grad_norm < 0: not given; the local
    gradients are tested instead), runs the replica check when due; returns a pt_guard_verdict,
    the same on every rank, or -1 on an error. */
PTDEF int pt_guard_check(pt_guard *g, int64_t step, float loss, float grad_norm);
/** Collective (world). Loads the newest valid checkpoint of the guard's ckpt_dir into ctx and o
    (NULL = no optimizer state) and multiplies the LR scale by lr_factor; *step (may be NULL) = the
    step loaded (continue training from it). Errors of pt_ckpt_load (then nothing changes). */
PTDEF pt_status pt_guard_rollback(pt_guard *g, pt_optim *o, int64_t *step);
/** Collective (world). Compares the DP replicas' parameter hashes now; returns the number of ranks
    whose parameters differ from their replicas' majority (0 = all equal), -1 on error. */
PTDEF int pt_guard_replica_check(pt_guard *g, int64_t step);
/** The learning-rate scale (1, times lr_factor per rollback). */
PTDEF float pt_guard_lr_scale(const pt_guard *g);
/** Copies the last min(max, kept) events, oldest first, into out (may be NULL); returns how many
    events there were in all. */
PTDEF int64_t pt_guard_events(const pt_guard *g, pt_guard_event *out, int max);
/** Statistics and counters now. */
PTDEF pt_guard_stats pt_guard_stats_get(const pt_guard *g);
/** Name of an event kind ("loss_nonfinite", "grad_nonfinite", "loss_spike", "grad_spike", "rollback",
    "replica_mismatch"). */
PTDEF const char *pt_guard_event_name(int kind);
/* ---- memory estimate (see memest) --------------------------------------------------------------
   Predicted bytes per rank of a GPT training run on a dp x tp x pp layout, by the kinds of pt_mem
   (params, grads, optim, activations, workspace) plus the DP reducer's own buffers (pt_dp_stats
   extra_bytes). Computed by the framework itself, on a backend that counts bytes without holding
   data: the rank's stages as pt_gpt_new_stages builds them, the optimizer, the DP buckets and ZeRO
   shard as pt_dp cuts them, and two steps of forward and backward passes with the graphs in flight
   as the pipeline schedule keeps them; then pt_mem. What it assumes: f32 everything (bf16 exists only
   as DP gradient compression), a stage function that makes the ids in stage 0's graph and the
   targets in the last stage's (as examples/07), with pp = 1 one graph reused per micro-batch (plain
   accumulation), no recomputation (not implemented). */
typedef struct pt_mem_plan {
    int32_t dp, tp, pp;         /**< grid sizes (0 = 1) */
    int32_t zero;               /**< ZeRO stage 0, 1 or 2 (sharding needs dp > 1) */
    int32_t micro_batches;      /**< m per step (0 = pp) */
    int32_t batch, seq;         /**< one micro-batch: B sequences of T tokens (T <= cfg max_seq) */
    int32_t schedule;           /**< pt_pp_kind when pp > 1: PT_PP_GPIPE, PT_PP_1F1B, PT_PP_INTERLEAVED */
    int32_t virtual_stages;     /**< v (0 = 2 for PT_PP_INTERLEAVED, else 1) */
    int32_t optim;              /**< pt_optim_kind: PT_OPTIM_SGD (one buffer) or PT_OPTIM_ADAMW (two moments) */
    int32_t compress, hier;     /**< pt_dp_options: bf16 gradient compression (a residual slab, a staging ring), hierarchical
                                     allreduce (no extra buffer on the CPU backend) */
    int64_t bucket_bytes;       /**< pt_dp bucket size (0 = 25 MiB) */
    int32_t threads;            /**< CPU threads per process (the attention workspace scales with it; 0 = 1) */
    int32_t precision;          /**< PT_F32 (the only one: anything else is refused) */
    int32_t recompute;          /**< 0 (activation recomputation does not exist: anything else is refused) */
    const int32_t *first;       /**< stage split [pp*v + 1] (NULL = equal if it divides, else balanced as examples/07) */
} pt_mem_plan;
/** Predicted bytes of one pipeline rank (every DP and TP rank of it alike; ZeRO: the largest shard). */
typedef struct pt_mem_estimate_out {
    int32_t pp_rank, stages;    /**< the pipeline rank; how many stages (chunks) it holds */
    int32_t first_stage, last_stage; /**< 1 if it holds the embedding / the head */
    int32_t in_flight;          /**< micro-batch graphs alive at once (GPipe m, 1F1B p - rank, interleaved from the schedule) */
    int64_t params, grads, optim;   /**< pt_mem kinds: slab slices, gradients, optimizer state (ZeRO shard) */
    int64_t act_pass;           /**< arena bytes one micro-batch's forward + backward allocate (before chunk rounding; the largest) */
    int64_t act_grad_blocks;    /**< the pooled activation-gradient blocks of the largest graph */
    int64_t act_per_mb;         /**< the largest graph: max(act_pass, 64 MiB arena chunk) + act_grad_blocks (interleaved: a
                                     graph serves several chunks, its arena the largest of their passes, its blocks their union) */
    int64_t activations;        /**< what the graphs in flight hold: act_per_mb x in_flight when all serve the same stage */
    int64_t workspace;          /**< kernel scratch (ids, targets, attention tiles x threads) */
    int64_t dp_extra;           /**< pt_dp_stats extra_bytes: staging ring, ZeRO-2 gradient shard, bf16 residual (not in pt_mem) */
    int64_t total;              /**< params + grads + optim + activations + workspace: what pt_mem sums */
    int64_t peak_total;         /**< pt_mem peak_total: total, or the optimizer's unsharded moments at setup, or the first
                                     step's arena spill (chunks of 64 MiB before a graph is consolidated), the most */
    int64_t slab_floats;        /**< the parameter slab (floats) */
} pt_mem_estimate_out;
/** Estimates pipeline rank pp_rank (-1: the rank with the largest total). PT_OK, or PT_ERR_ARG with a
    message in err (err may be NULL) naming the bad value (PT_ERR_OOM: out of host memory). Needs no
    grid, no MPI and no device: it runs in a private context of its own, touching no data. */
PTDEF pt_status pt_mem_estimate(const pt_gpt_config *cfg, const pt_mem_plan *plan, int pp_rank, pt_mem_estimate_out *out, char *err,
                                size_t errlen);

#ifdef __cplusplus
}
#endif
#endif /* PTRAIN_H */

/* =================================================================================================
   Implementation
   ================================================================================================= */
#if defined(PTRAIN_IMPLEMENTATION) && !defined(PTRAIN_IMPLEMENTATION_DONE)
#define PTRAIN_IMPLEMENTATION_DONE

// >>base  includes, allocator, errors and logging, clock, hashing and RNG, CRC32C, text buffer and JSON string writer, the context struct
/* Owns: the allocator macros, the context struct (one field group per section; later sections hold
   their state through opaque pointers and register their teardown with pt__at_shutdown), error
   recording (pt__fail, pt_error_set), the clock, hashes, CRC32C, the growable text buffer pt__sb
   Invariants: nothing here calls a section below it; the only global state is read-only after it is
   written once (see docs/architecture.md)
   Entry points: pt_error_set pt_status_get pt_error pt_log pt_time pt_hash64 pt_rng_seed pt_crc32c */
/* includes, allocator, logging, errors, clock, hashing
   No feature macro (_GNU_SOURCE) is defined here: it would put GNU names into the user's
   translation unit. CPU affinity comes from OpenMP (omp_get_num_procs respects the mask), or from
   sched_getaffinity when the user's build has _GNU_SOURCE. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(_M_X64))
#define PT__X86 1 /* x86-64 with GCC/Clang intrinsics: the AVX kernels, SSE4.2 CRC32C */
#include <immintrin.h>
#else
#define PT__X86 0
#endif
#ifdef _OPENMP
#include <omp.h>
#endif
#if defined(__linux__)
#include <sched.h>
#endif
#if defined(__unix__) || defined(__APPLE__)
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>
#endif
#ifdef PTRAIN_CBLAS
#if !defined(I) && !defined(complex)
#define PT__CBLAS_UNDEF
#endif
#include <cblas.h>
#ifdef PT__CBLAS_UNDEF /* OpenBLAS's cblas.h pulls in <complex.h>: keep its I and complex out of the user's way */
#undef I
#undef complex
#undef PT__CBLAS_UNDEF
#endif
#endif

#if defined(PT_MALLOC) && defined(PT_FREE) && defined(PT_REALLOC)
/* user allocator */
#elif !defined(PT_MALLOC) && !defined(PT_FREE) && !defined(PT_REALLOC)
#define PT_MALLOC(sz) malloc(sz)
#define PT_REALLOC(p, sz) realloc(p, sz)
#define PT_FREE(p) free(p)
#else
#error "ptrain.h: define all of PT_MALLOC, PT_REALLOC and PT_FREE, or none of them"
#endif

#ifndef PT_ASSERT
#include <assert.h>
#define PT_ASSERT(x) assert(x)
#endif

/* Default log sink (overridable: define PT_LOG(level, msg) before the implementation). */
#ifndef PT_LOG
#define PT_LOG(level, msg) (fputs((msg), stderr), fputc('\n', stderr), (void)(level))
#endif

#define PT__ALIGN 64
#define PT__MIN(a, b) ((a) < (b) ? (a) : (b))
#define PT__MAX(a, b) ((a) > (b) ? (a) : (b))
#define PT__ERRLEN 1024

#if defined(_OPENMP)
#define PT__PRAGMA(x) _Pragma(#x)
/* A statically scheduled parallel loop over [0, n): each index is done by exactly one thread, and
   what an index computes never depends on the thread count (the determinism rule). */
#define PT__PAR_FOR(ctx) PT__PRAGMA(omp parallel for schedule(static) num_threads((ctx)->nthreads))
#else
#define PT__PAR_FOR(ctx)
#endif

/* A buffer owned by a device. On the CPU, host points at the data. */
struct pt_storage {
    void *host;      /* CPU data (64-byte aligned) */
    void *dev;       /* device handle (cl_mem) for device backends */
    void *raw;       /* the pointer to free */
    int64_t bytes;   /* usable bytes */
    int32_t kind;    /* PT__MEM_* accounting category */
    pt_ctx *ctx;     /* the context whose backend owns it */
};

enum { PT__MEM_PARAMS = 0, PT__MEM_GRADS, PT__MEM_OPTIM, PT__MEM_ACT, PT__MEM_WORK, PT__MEM_KINDS };

typedef struct pt__state_entry {
    char name[64];
    void *ptr;
    int64_t bytes;
    uint32_t flags; /* PT_STATE_* */
} pt__state_entry;

#define PT__AT_SHUTDOWN 8
struct pt_ctx {
    pt_desc desc;
    int nthreads;
    const struct pt__backend *be;
    pt_status status;
    char err[PT__ERRLEN];
    /* memory accounting */
    int64_t mem[PT__MEM_KINDS], mem_peak, nallocs;
    /* parameters: one slab each for values and gradients */
    pt_param **params;
    int nparams, cap_params;
    pt_storage *pslab, *gslab;
    int64_t slab_n;       /* elements used */
    int optim_frozen;     /* set once an optimizer exists: no new parameters */
    void (*grad_hook)(void *user, pt_param *p);
    void *grad_hook_user;
    void (*poll)(void *user); /* after each node's backward */
    void *poll_user;
    /* checkpointed state */
    pt__state_entry *state;
    int nstate, cap_state;
    /* kernel workspace (grown only) */
    struct pt__gemm_ws *gemm_ws; /* one per thread: [0] is the whole-team workspace */
    int ngemm_ws;
    float *work;
    int64_t work_cap;
    pt_graph *graphs;  /* live graphs and optimizers, freed by pt_shutdown */
    pt_optim *optims;
    int attn_kernel; /* attention kernel: 0 = best available, 1 = C, 2 = AVX-512, 3 = AVX2 (tests) */
    pt_dp *dp;       /* the data-parallel reducer (see dp), whose ZeRO shard pt_grad_norm sums over */
    void *cl;        /* the OpenCL device state (struct pt__cl, opencl) when the backend is OpenCL */
    pt_transfers xfer; /* host <-> device copies made by a device backend, by purpose */
    int xfer_kind;   /* the purpose (PT_XFER_*) copies are counted under now; PT_XFER_IO by default */
    float *stage;    /* host staging of MPI payloads on a device backend (tp, pprun; pt__stage_buf), grown only */
    int64_t stage_cap;
    /* set by the data-parallel reducer (see dp): the range of the gradient slab this rank holds
       reduced, 1 when it is a shard whose squares must be summed over DP; and that sum. NULL: the
       whole slab, no DP */
    int (*grad_range)(pt_ctx *ctx, int64_t *lo, int64_t *hi);
    void (*dp_sum)(pt_ctx *ctx, double *x, int n);
    struct pt__trace *trace;     /* the timeline being recorded (see trace), NULL = off */
    struct pt__prof *prof;       /* the per-op profile's sums while it is on (see trace), NULL = off */
    struct pt__prof *prof_sums;  /* its sums, kept while off */
    struct pt__ck_job *ckpt; /* the last checkpoint save: its snapshot buffer, its writer thread (see ckpt) */
    /* teardown registered by later sections when they first attach state to the context (the
       optimizers, the trace, the checkpoint writer); pt_shutdown runs them first, newest first */
    void (*at_shutdown[PT__AT_SHUTDOWN])(pt_ctx *ctx);
    int nat_shutdown;
};
/* registers fn (once) to run at pt_shutdown; the sections above the context call nothing below */
static void pt__at_shutdown(pt_ctx *ctx, void (*fn)(pt_ctx *ctx)) {
    int i;
    for (i = 0; i < ctx->nat_shutdown; i++)
        if (ctx->at_shutdown[i] == fn) return;
    PT_ASSERT(ctx->nat_shutdown < PT__AT_SHUTDOWN); /* a fixed set of sections registers */
    if (ctx->nat_shutdown < PT__AT_SHUTDOWN) ctx->at_shutdown[ctx->nat_shutdown++] = fn;
}
/* ---- errors and logging --------------------------------------------------------------------- */
static void pt__emit(const pt_ctx *ctx, int level, const char *msg) {
    if (ctx && ctx->desc.log) {
        if (level >= ctx->desc.log_level) ctx->desc.log(ctx->desc.log_user, level, msg);
    } else if (!ctx || level >= ctx->desc.log_level) {
        PT_LOG(level, msg);
    }
}

PTDEF void pt_log(pt_ctx *ctx, int level, const char *fmt, ...) {
    char buf[PT__ERRLEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    pt__emit(ctx, level, buf);
}

/* Records an error (the first one since the last clear is kept), tells the error callback and the
   log. Returns NULL so ops can `return pt__fail(...)`. */
static void *pt__fail(pt_ctx *ctx, pt_status st, const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static void *pt__fail(pt_ctx *ctx, pt_status st, const char *fmt, ...) {
    char buf[PT__ERRLEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (!ctx) {
        PT_LOG(PT_LOG_ERROR, buf);
        return NULL;
    }
    if (ctx->status == PT_OK) {
        ctx->status = st;
        memcpy(ctx->err, buf, sizeof buf);
    }
    if (ctx->desc.on_error) ctx->desc.on_error(ctx->desc.error_user, st, buf);
    else pt__emit(ctx, PT_LOG_ERROR, buf);
    return NULL;
}

/* Formats a message into a caller's buffer (for functions that report errors without a context). */
static void pt__msg(char *err, size_t errlen, const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static void pt__msg(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    if (!err || !errlen) return;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* mkdir -p (POSIX): 1 when dir exists as a directory afterwards (the OpenCL program cache, checkpoints) */
static int pt__mkdirs(const char *dir) {
#if defined(__unix__) || defined(__APPLE__)
    char p[1024];
    size_t i, n = strlen(dir);
    struct stat sb;
    if (n == 0 || n >= sizeof p) return 0;
    memcpy(p, dir, n + 1);
    for (i = 1; i <= n; i++)
        if (p[i] == '/' || p[i] == 0) {
            char c = p[i];
            p[i] = 0;
            if (mkdir(p, 0755) != 0 && (stat(p, &sb) != 0 || !S_ISDIR(sb.st_mode))) return 0;
            p[i] = c;
        }
    return 1;
#else
    (void)dir;
    return 0;
#endif
}

/* A growable text buffer (checkpoint manifests, safetensors headers, the run log, trace files):
   text appended with a printf format (pt__sb_add) or as a JSON string (pt__sb_json_str). An allocation failure sets oom and drops everything after it. Free s. */
typedef struct pt__sb {
    char *s;
    size_t n, cap;
    int oom;
} pt__sb;
static int pt__sb_room(pt__sb *b, size_t k) { /* room for k more bytes and a terminating 0 */
    size_t cap;
    char *ns;
    if (b->oom) return 0;
    if (b->s && b->n + k + 1 <= b->cap) return 1;
    cap = PT__MAX(2 * b->cap, b->n + k + 256);
    if (!(ns = (char *)PT_REALLOC(b->s, cap))) {
        b->oom = 1;
        return 0;
    }
    b->s = ns, b->cap = cap;
    return 1;
}
static void pt__sb_vadd(pt__sb *b, const char *fmt, va_list ap) {
    va_list aq;
    int k;
    if (b->oom) return;
    va_copy(aq, ap);
    k = vsnprintf(b->s ? b->s + b->n : NULL, b->s ? b->cap - b->n : 0, fmt, aq);
    va_end(aq);
    if (k < 0) {
        b->oom = 1;
        return;
    }
    if (!b->s || b->n + (size_t)k + 1 > b->cap) {
        if (!pt__sb_room(b, (size_t)k)) return;
        vsnprintf(b->s + b->n, b->cap - b->n, fmt, ap);
    }
    b->n += (size_t)k;
}
static void pt__sb_add(pt__sb *b, const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void pt__sb_add(pt__sb *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    pt__sb_vadd(b, fmt, ap);
    va_end(ap);
}
/* a JSON string: quotes, backslashes and control characters escaped */
static void pt__sb_json_str(pt__sb *b, const char *s) {
    pt__sb_add(b, "\"");
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') pt__sb_add(b, "\\%c", c);
        else if (c == '\n') pt__sb_add(b, "\\n");
        else if (c == '\t') pt__sb_add(b, "\\t");
        else if (c < 0x20) pt__sb_add(b, "\\u%04x", c);
        else pt__sb_add(b, "%c", c);
    }
    pt__sb_add(b, "\"");
}

PTDEF pt_status pt_status_get(const pt_ctx *ctx) { return ctx ? ctx->status : PT_ERR_ARG; }
PTDEF pt_status pt_error_set(pt_ctx *ctx, pt_status st, const char *fmt, ...) {
    char buf[PT__ERRLEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    pt__fail(ctx, st, "%s", buf);
    return st;
}
PTDEF const struct pt_dist *pt_ctx_dist(const pt_ctx *ctx) { return ctx ? ctx->desc.dist : NULL; }
PTDEF const char *pt_error(const pt_ctx *ctx) { return ctx ? ctx->err : "no context"; }
PTDEF void pt_error_clear(pt_ctx *ctx) {
    if (!ctx) return;
    ctx->status = PT_OK;
    ctx->err[0] = 0;
}
PTDEF int pt_threads(const pt_ctx *ctx) { return ctx ? ctx->nthreads : 1; }

/* A strict -std=c99 build has no CLOCK_MONOTONIC (a POSIX name): then gettimeofday, a wall clock
   too -- never clock(), which counts the CPU time of all threads and not the time spent waiting. */
PTDEF double pt_time(void) {
#if defined(CLOCK_MONOTONIC)
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
#elif defined(__unix__) || defined(__APPLE__)
    /* seconds since a fixed epoch (2023-11-14), not since 1970, so the double keeps steps far below
       a microsecond for decades; a constant, not a first-call value: no state shared by threads */
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)((long)tv.tv_sec - 1700000000L) + 1e-6 * (double)tv.tv_usec;
#else
    return (double)clock() / CLOCKS_PER_SEC;
#endif
}

/* ---- hashing and random numbers ------------------------------------------------------------- */
PTDEF uint64_t pt_hash64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}
PTDEF uint64_t pt_hash_str(const char *s) {
    uint64_t h = 0xcbf29ce484222325ull;
    while (s && *s) h = (h ^ (uint8_t)*s++) * 0x100000001b3ull;
    return h;
}
PTDEF pt_rng pt_rng_seed(uint64_t seed) {
    pt_rng r;
    r.s = pt_hash64(seed ^ 0x5eed5eed5eedull);
    return r;
}
PTDEF uint32_t pt_rng_u32(pt_rng *r) {
    r->s += 0x9E3779B97F4A7C15ull;
    return (uint32_t)(pt_hash64(r->s) >> 32);
}
PTDEF float pt_rng_float(pt_rng *r) { return (float)(pt_rng_u32(r) >> 8) * (1.0f / 16777216.0f); }

/* Counter-based uniform in (0, 1] from a key and an index: the basis of layout-independent init
   and dropout masks. */
static inline float pt__unit(uint64_t key, uint64_t i) {
    uint64_t h = pt_hash64(key ^ pt_hash64(i));
    return ((float)(h >> 40) + 1.0f) * (1.0f / 16777216.0f);
}
/* Standard normal from a key and an index (Box-Muller on two counter draws). */
static inline float pt__normal(uint64_t key, uint64_t i) {
    float u1 = pt__unit(key, 2 * i), u2 = pt__unit(key, 2 * i + 1);
    return sqrtf(-2.0f * logf(u1)) * cosf(6.28318530717958647692f * u2);
}

/* ---- memory ----------------------------------------------------------------------------------- */
static void *pt__malloc(pt_ctx *ctx, size_t bytes) {
    void *p = PT_MALLOC(bytes ? bytes : 1);
    if (ctx) ctx->nallocs++;
    return p;
}
static void pt__mem_add(pt_ctx *ctx, int kind, int64_t bytes) {
    int64_t tot = 0;
    int k;
    ctx->mem[kind] += bytes;
    for (k = 0; k < PT__MEM_KINDS; k++) tot += ctx->mem[k];
    if (tot > ctx->mem_peak) ctx->mem_peak = tot;
}

/* CRC32C (Castagnoli, reflected 0x82F63B78) slicing-by-8 tables: [0] is the byte table, [k][i] =
   [k-1][i] >> 8 ^ [0][[k-1][i] & 0xff]. Constant data (no table built at run time, so no global
   state and no race); tests/test_ckpt.c recomputes them from the polynomial. */
static const uint32_t pt__crc_tab[8][256] = {
    {
        0x00000000u, 0xf26b8303u, 0xe13b70f7u, 0x1350f3f4u, 0xc79a971fu, 0x35f1141cu, 0x26a1e7e8u, 0xd4ca64ebu,
        0x8ad958cfu, 0x78b2dbccu, 0x6be22838u, 0x9989ab3bu, 0x4d43cfd0u, 0xbf284cd3u, 0xac78bf27u, 0x5e133c24u,
        0x105ec76fu, 0xe235446cu, 0xf165b798u, 0x030e349bu, 0xd7c45070u, 0x25afd373u, 0x36ff2087u, 0xc494a384u,
        0x9a879fa0u, 0x68ec1ca3u, 0x7bbcef57u, 0x89d76c54u, 0x5d1d08bfu, 0xaf768bbcu, 0xbc267848u, 0x4e4dfb4bu,
        0x20bd8edeu, 0xd2d60dddu, 0xc186fe29u, 0x33ed7d2au, 0xe72719c1u, 0x154c9ac2u, 0x061c6936u, 0xf477ea35u,
        0xaa64d611u, 0x580f5512u, 0x4b5fa6e6u, 0xb93425e5u, 0x6dfe410eu, 0x9f95c20du, 0x8cc531f9u, 0x7eaeb2fau,
        0x30e349b1u, 0xc288cab2u, 0xd1d83946u, 0x23b3ba45u, 0xf779deaeu, 0x05125dadu, 0x1642ae59u, 0xe4292d5au,
        0xba3a117eu, 0x4851927du, 0x5b016189u, 0xa96ae28au, 0x7da08661u, 0x8fcb0562u, 0x9c9bf696u, 0x6ef07595u,
        0x417b1dbcu, 0xb3109ebfu, 0xa0406d4bu, 0x522bee48u, 0x86e18aa3u, 0x748a09a0u, 0x67dafa54u, 0x95b17957u,
        0xcba24573u, 0x39c9c670u, 0x2a993584u, 0xd8f2b687u, 0x0c38d26cu, 0xfe53516fu, 0xed03a29bu, 0x1f682198u,
        0x5125dad3u, 0xa34e59d0u, 0xb01eaa24u, 0x42752927u, 0x96bf4dccu, 0x64d4cecfu, 0x77843d3bu, 0x85efbe38u,
        0xdbfc821cu, 0x2997011fu, 0x3ac7f2ebu, 0xc8ac71e8u, 0x1c661503u, 0xee0d9600u, 0xfd5d65f4u, 0x0f36e6f7u,
        0x61c69362u, 0x93ad1061u, 0x80fde395u, 0x72966096u, 0xa65c047du, 0x5437877eu, 0x4767748au, 0xb50cf789u,
        0xeb1fcbadu, 0x197448aeu, 0x0a24bb5au, 0xf84f3859u, 0x2c855cb2u, 0xdeeedfb1u, 0xcdbe2c45u, 0x3fd5af46u,
        0x7198540du, 0x83f3d70eu, 0x90a324fau, 0x62c8a7f9u, 0xb602c312u, 0x44694011u, 0x5739b3e5u, 0xa55230e6u,
        0xfb410cc2u, 0x092a8fc1u, 0x1a7a7c35u, 0xe811ff36u, 0x3cdb9bddu, 0xceb018deu, 0xdde0eb2au, 0x2f8b6829u,
        0x82f63b78u, 0x709db87bu, 0x63cd4b8fu, 0x91a6c88cu, 0x456cac67u, 0xb7072f64u, 0xa457dc90u, 0x563c5f93u,
        0x082f63b7u, 0xfa44e0b4u, 0xe9141340u, 0x1b7f9043u, 0xcfb5f4a8u, 0x3dde77abu, 0x2e8e845fu, 0xdce5075cu,
        0x92a8fc17u, 0x60c37f14u, 0x73938ce0u, 0x81f80fe3u, 0x55326b08u, 0xa759e80bu, 0xb4091bffu, 0x466298fcu,
        0x1871a4d8u, 0xea1a27dbu, 0xf94ad42fu, 0x0b21572cu, 0xdfeb33c7u, 0x2d80b0c4u, 0x3ed04330u, 0xccbbc033u,
        0xa24bb5a6u, 0x502036a5u, 0x4370c551u, 0xb11b4652u, 0x65d122b9u, 0x97baa1bau, 0x84ea524eu, 0x7681d14du,
        0x2892ed69u, 0xdaf96e6au, 0xc9a99d9eu, 0x3bc21e9du, 0xef087a76u, 0x1d63f975u, 0x0e330a81u, 0xfc588982u,
        0xb21572c9u, 0x407ef1cau, 0x532e023eu, 0xa145813du, 0x758fe5d6u, 0x87e466d5u, 0x94b49521u, 0x66df1622u,
        0x38cc2a06u, 0xcaa7a905u, 0xd9f75af1u, 0x2b9cd9f2u, 0xff56bd19u, 0x0d3d3e1au, 0x1e6dcdeeu, 0xec064eedu,
        0xc38d26c4u, 0x31e6a5c7u, 0x22b65633u, 0xd0ddd530u, 0x0417b1dbu, 0xf67c32d8u, 0xe52cc12cu, 0x1747422fu,
        0x49547e0bu, 0xbb3ffd08u, 0xa86f0efcu, 0x5a048dffu, 0x8ecee914u, 0x7ca56a17u, 0x6ff599e3u, 0x9d9e1ae0u,
        0xd3d3e1abu, 0x21b862a8u, 0x32e8915cu, 0xc083125fu, 0x144976b4u, 0xe622f5b7u, 0xf5720643u, 0x07198540u,
        0x590ab964u, 0xab613a67u, 0xb831c993u, 0x4a5a4a90u, 0x9e902e7bu, 0x6cfbad78u, 0x7fab5e8cu, 0x8dc0dd8fu,
        0xe330a81au, 0x115b2b19u, 0x020bd8edu, 0xf0605beeu, 0x24aa3f05u, 0xd6c1bc06u, 0xc5914ff2u, 0x37faccf1u,
        0x69e9f0d5u, 0x9b8273d6u, 0x88d28022u, 0x7ab90321u, 0xae7367cau, 0x5c18e4c9u, 0x4f48173du, 0xbd23943eu,
        0xf36e6f75u, 0x0105ec76u, 0x12551f82u, 0xe03e9c81u, 0x34f4f86au, 0xc69f7b69u, 0xd5cf889du, 0x27a40b9eu,
        0x79b737bau, 0x8bdcb4b9u, 0x988c474du, 0x6ae7c44eu, 0xbe2da0a5u, 0x4c4623a6u, 0x5f16d052u, 0xad7d5351u
    },
    {
        0x00000000u, 0x13a29877u, 0x274530eeu, 0x34e7a899u, 0x4e8a61dcu, 0x5d28f9abu, 0x69cf5132u, 0x7a6dc945u,
        0x9d14c3b8u, 0x8eb65bcfu, 0xba51f356u, 0xa9f36b21u, 0xd39ea264u, 0xc03c3a13u, 0xf4db928au, 0xe7790afdu,
        0x3fc5f181u, 0x2c6769f6u, 0x1880c16fu, 0x0b225918u, 0x714f905du, 0x62ed082au, 0x560aa0b3u, 0x45a838c4u,
        0xa2d13239u, 0xb173aa4eu, 0x859402d7u, 0x96369aa0u, 0xec5b53e5u, 0xfff9cb92u, 0xcb1e630bu, 0xd8bcfb7cu,
        0x7f8be302u, 0x6c297b75u, 0x58ced3ecu, 0x4b6c4b9bu, 0x310182deu, 0x22a31aa9u, 0x1644b230u, 0x05e62a47u,
        0xe29f20bau, 0xf13db8cdu, 0xc5da1054u, 0xd6788823u, 0xac154166u, 0xbfb7d911u, 0x8b507188u, 0x98f2e9ffu,
        0x404e1283u, 0x53ec8af4u, 0x670b226du, 0x74a9ba1au, 0x0ec4735fu, 0x1d66eb28u, 0x298143b1u, 0x3a23dbc6u,
        0xdd5ad13bu, 0xcef8494cu, 0xfa1fe1d5u, 0xe9bd79a2u, 0x93d0b0e7u, 0x80722890u, 0xb4958009u, 0xa737187eu,
        0xff17c604u, 0xecb55e73u, 0xd852f6eau, 0xcbf06e9du, 0xb19da7d8u, 0xa23f3fafu, 0x96d89736u, 0x857a0f41u,
        0x620305bcu, 0x71a19dcbu, 0x45463552u, 0x56e4ad25u, 0x2c896460u, 0x3f2bfc17u, 0x0bcc548eu, 0x186eccf9u,
        0xc0d23785u, 0xd370aff2u, 0xe797076bu, 0xf4359f1cu, 0x8e585659u, 0x9dface2eu, 0xa91d66b7u, 0xbabffec0u,
        0x5dc6f43du, 0x4e646c4au, 0x7a83c4d3u, 0x69215ca4u, 0x134c95e1u, 0x00ee0d96u, 0x3409a50fu, 0x27ab3d78u,
        0x809c2506u, 0x933ebd71u, 0xa7d915e8u, 0xb47b8d9fu, 0xce1644dau, 0xddb4dcadu, 0xe9537434u, 0xfaf1ec43u,
        0x1d88e6beu, 0x0e2a7ec9u, 0x3acdd650u, 0x296f4e27u, 0x53028762u, 0x40a01f15u, 0x7447b78cu, 0x67e52ffbu,
        0xbf59d487u, 0xacfb4cf0u, 0x981ce469u, 0x8bbe7c1eu, 0xf1d3b55bu, 0xe2712d2cu, 0xd69685b5u, 0xc5341dc2u,
        0x224d173fu, 0x31ef8f48u, 0x050827d1u, 0x16aabfa6u, 0x6cc776e3u, 0x7f65ee94u, 0x4b82460du, 0x5820de7au,
        0xfbc3faf9u, 0xe861628eu, 0xdc86ca17u, 0xcf245260u, 0xb5499b25u, 0xa6eb0352u, 0x920cabcbu, 0x81ae33bcu,
        0x66d73941u, 0x7575a136u, 0x419209afu, 0x523091d8u, 0x285d589du, 0x3bffc0eau, 0x0f186873u, 0x1cbaf004u,
        0xc4060b78u, 0xd7a4930fu, 0xe3433b96u, 0xf0e1a3e1u, 0x8a8c6aa4u, 0x992ef2d3u, 0xadc95a4au, 0xbe6bc23du,
        0x5912c8c0u, 0x4ab050b7u, 0x7e57f82eu, 0x6df56059u, 0x1798a91cu, 0x043a316bu, 0x30dd99f2u, 0x237f0185u,
        0x844819fbu, 0x97ea818cu, 0xa30d2915u, 0xb0afb162u, 0xcac27827u, 0xd960e050u, 0xed8748c9u, 0xfe25d0beu,
        0x195cda43u, 0x0afe4234u, 0x3e19eaadu, 0x2dbb72dau, 0x57d6bb9fu, 0x447423e8u, 0x70938b71u, 0x63311306u,
        0xbb8de87au, 0xa82f700du, 0x9cc8d894u, 0x8f6a40e3u, 0xf50789a6u, 0xe6a511d1u, 0xd242b948u, 0xc1e0213fu,
        0x26992bc2u, 0x353bb3b5u, 0x01dc1b2cu, 0x127e835bu, 0x68134a1eu, 0x7bb1d269u, 0x4f567af0u, 0x5cf4e287u,
        0x04d43cfdu, 0x1776a48au, 0x23910c13u, 0x30339464u, 0x4a5e5d21u, 0x59fcc556u, 0x6d1b6dcfu, 0x7eb9f5b8u,
        0x99c0ff45u, 0x8a626732u, 0xbe85cfabu, 0xad2757dcu, 0xd74a9e99u, 0xc4e806eeu, 0xf00fae77u, 0xe3ad3600u,
        0x3b11cd7cu, 0x28b3550bu, 0x1c54fd92u, 0x0ff665e5u, 0x759baca0u, 0x663934d7u, 0x52de9c4eu, 0x417c0439u,
        0xa6050ec4u, 0xb5a796b3u, 0x81403e2au, 0x92e2a65du, 0xe88f6f18u, 0xfb2df76fu, 0xcfca5ff6u, 0xdc68c781u,
        0x7b5fdfffu, 0x68fd4788u, 0x5c1aef11u, 0x4fb87766u, 0x35d5be23u, 0x26772654u, 0x12908ecdu, 0x013216bau,
        0xe64b1c47u, 0xf5e98430u, 0xc10e2ca9u, 0xd2acb4deu, 0xa8c17d9bu, 0xbb63e5ecu, 0x8f844d75u, 0x9c26d502u,
        0x449a2e7eu, 0x5738b609u, 0x63df1e90u, 0x707d86e7u, 0x0a104fa2u, 0x19b2d7d5u, 0x2d557f4cu, 0x3ef7e73bu,
        0xd98eedc6u, 0xca2c75b1u, 0xfecbdd28u, 0xed69455fu, 0x97048c1au, 0x84a6146du, 0xb041bcf4u, 0xa3e32483u
    },
    {
        0x00000000u, 0xa541927eu, 0x4f6f520du, 0xea2ec073u, 0x9edea41au, 0x3b9f3664u, 0xd1b1f617u, 0x74f06469u,
        0x38513ec5u, 0x9d10acbbu, 0x773e6cc8u, 0xd27ffeb6u, 0xa68f9adfu, 0x03ce08a1u, 0xe9e0c8d2u, 0x4ca15aacu,
        0x70a27d8au, 0xd5e3eff4u, 0x3fcd2f87u, 0x9a8cbdf9u, 0xee7cd990u, 0x4b3d4beeu, 0xa1138b9du, 0x045219e3u,
        0x48f3434fu, 0xedb2d131u, 0x079c1142u, 0xa2dd833cu, 0xd62de755u, 0x736c752bu, 0x9942b558u, 0x3c032726u,
        0xe144fb14u, 0x4405696au, 0xae2ba919u, 0x0b6a3b67u, 0x7f9a5f0eu, 0xdadbcd70u, 0x30f50d03u, 0x95b49f7du,
        0xd915c5d1u, 0x7c5457afu, 0x967a97dcu, 0x333b05a2u, 0x47cb61cbu, 0xe28af3b5u, 0x08a433c6u, 0xade5a1b8u,
        0x91e6869eu, 0x34a714e0u, 0xde89d493u, 0x7bc846edu, 0x0f382284u, 0xaa79b0fau, 0x40577089u, 0xe516e2f7u,
        0xa9b7b85bu, 0x0cf62a25u, 0xe6d8ea56u, 0x43997828u, 0x37691c41u, 0x92288e3fu, 0x78064e4cu, 0xdd47dc32u,
        0xc76580d9u, 0x622412a7u, 0x880ad2d4u, 0x2d4b40aau, 0x59bb24c3u, 0xfcfab6bdu, 0x16d476ceu, 0xb395e4b0u,
        0xff34be1cu, 0x5a752c62u, 0xb05bec11u, 0x151a7e6fu, 0x61ea1a06u, 0xc4ab8878u, 0x2e85480bu, 0x8bc4da75u,
        0xb7c7fd53u, 0x12866f2du, 0xf8a8af5eu, 0x5de93d20u, 0x29195949u, 0x8c58cb37u, 0x66760b44u, 0xc337993au,
        0x8f96c396u, 0x2ad751e8u, 0xc0f9919bu, 0x65b803e5u, 0x1148678cu, 0xb409f5f2u, 0x5e273581u, 0xfb66a7ffu,
        0x26217bcdu, 0x8360e9b3u, 0x694e29c0u, 0xcc0fbbbeu, 0xb8ffdfd7u, 0x1dbe4da9u, 0xf7908ddau, 0x52d11fa4u,
        0x1e704508u, 0xbb31d776u, 0x511f1705u, 0xf45e857bu, 0x80aee112u, 0x25ef736cu, 0xcfc1b31fu, 0x6a802161u,
        0x56830647u, 0xf3c29439u, 0x19ec544au, 0xbcadc634u, 0xc85da25du, 0x6d1c3023u, 0x8732f050u, 0x2273622eu,
        0x6ed23882u, 0xcb93aafcu, 0x21bd6a8fu, 0x84fcf8f1u, 0xf00c9c98u, 0x554d0ee6u, 0xbf63ce95u, 0x1a225cebu,
        0x8b277743u, 0x2e66e53du, 0xc448254eu, 0x6109b730u, 0x15f9d359u, 0xb0b84127u, 0x5a968154u, 0xffd7132au,
        0xb3764986u, 0x1637dbf8u, 0xfc191b8bu, 0x595889f5u, 0x2da8ed9cu, 0x88e97fe2u, 0x62c7bf91u, 0xc7862defu,
        0xfb850ac9u, 0x5ec498b7u, 0xb4ea58c4u, 0x11abcabau, 0x655baed3u, 0xc01a3cadu, 0x2a34fcdeu, 0x8f756ea0u,
        0xc3d4340cu, 0x6695a672u, 0x8cbb6601u, 0x29faf47fu, 0x5d0a9016u, 0xf84b0268u, 0x1265c21bu, 0xb7245065u,
        0x6a638c57u, 0xcf221e29u, 0x250cde5au, 0x804d4c24u, 0xf4bd284du, 0x51fcba33u, 0xbbd27a40u, 0x1e93e83eu,
        0x5232b292u, 0xf77320ecu, 0x1d5de09fu, 0xb81c72e1u, 0xccec1688u, 0x69ad84f6u, 0x83834485u, 0x26c2d6fbu,
        0x1ac1f1ddu, 0xbf8063a3u, 0x55aea3d0u, 0xf0ef31aeu, 0x841f55c7u, 0x215ec7b9u, 0xcb7007cau, 0x6e3195b4u,
        0x2290cf18u, 0x87d15d66u, 0x6dff9d15u, 0xc8be0f6bu, 0xbc4e6b02u, 0x190ff97cu, 0xf321390fu, 0x5660ab71u,
        0x4c42f79au, 0xe90365e4u, 0x032da597u, 0xa66c37e9u, 0xd29c5380u, 0x77ddc1feu, 0x9df3018du, 0x38b293f3u,
        0x7413c95fu, 0xd1525b21u, 0x3b7c9b52u, 0x9e3d092cu, 0xeacd6d45u, 0x4f8cff3bu, 0xa5a23f48u, 0x00e3ad36u,
        0x3ce08a10u, 0x99a1186eu, 0x738fd81du, 0xd6ce4a63u, 0xa23e2e0au, 0x077fbc74u, 0xed517c07u, 0x4810ee79u,
        0x04b1b4d5u, 0xa1f026abu, 0x4bdee6d8u, 0xee9f74a6u, 0x9a6f10cfu, 0x3f2e82b1u, 0xd50042c2u, 0x7041d0bcu,
        0xad060c8eu, 0x08479ef0u, 0xe2695e83u, 0x4728ccfdu, 0x33d8a894u, 0x96993aeau, 0x7cb7fa99u, 0xd9f668e7u,
        0x9557324bu, 0x3016a035u, 0xda386046u, 0x7f79f238u, 0x0b899651u, 0xaec8042fu, 0x44e6c45cu, 0xe1a75622u,
        0xdda47104u, 0x78e5e37au, 0x92cb2309u, 0x378ab177u, 0x437ad51eu, 0xe63b4760u, 0x0c158713u, 0xa954156du,
        0xe5f54fc1u, 0x40b4ddbfu, 0xaa9a1dccu, 0x0fdb8fb2u, 0x7b2bebdbu, 0xde6a79a5u, 0x3444b9d6u, 0x91052ba8u
    },
    {
        0x00000000u, 0xdd45aab8u, 0xbf672381u, 0x62228939u, 0x7b2231f3u, 0xa6679b4bu, 0xc4451272u, 0x1900b8cau,
        0xf64463e6u, 0x2b01c95eu, 0x49234067u, 0x9466eadfu, 0x8d665215u, 0x5023f8adu, 0x32017194u, 0xef44db2cu,
        0xe964b13du, 0x34211b85u, 0x560392bcu, 0x8b463804u, 0x924680ceu, 0x4f032a76u, 0x2d21a34fu, 0xf06409f7u,
        0x1f20d2dbu, 0xc2657863u, 0xa047f15au, 0x7d025be2u, 0x6402e328u, 0xb9474990u, 0xdb65c0a9u, 0x06206a11u,
        0xd725148bu, 0x0a60be33u, 0x6842370au, 0xb5079db2u, 0xac072578u, 0x71428fc0u, 0x136006f9u, 0xce25ac41u,
        0x2161776du, 0xfc24ddd5u, 0x9e0654ecu, 0x4343fe54u, 0x5a43469eu, 0x8706ec26u, 0xe524651fu, 0x3861cfa7u,
        0x3e41a5b6u, 0xe3040f0eu, 0x81268637u, 0x5c632c8fu, 0x45639445u, 0x98263efdu, 0xfa04b7c4u, 0x27411d7cu,
        0xc805c650u, 0x15406ce8u, 0x7762e5d1u, 0xaa274f69u, 0xb327f7a3u, 0x6e625d1bu, 0x0c40d422u, 0xd1057e9au,
        0xaba65fe7u, 0x76e3f55fu, 0x14c17c66u, 0xc984d6deu, 0xd0846e14u, 0x0dc1c4acu, 0x6fe34d95u, 0xb2a6e72du,
        0x5de23c01u, 0x80a796b9u, 0xe2851f80u, 0x3fc0b538u, 0x26c00df2u, 0xfb85a74au, 0x99a72e73u, 0x44e284cbu,
        0x42c2eedau, 0x9f874462u, 0xfda5cd5bu, 0x20e067e3u, 0x39e0df29u, 0xe4a57591u, 0x8687fca8u, 0x5bc25610u,
        0xb4868d3cu, 0x69c32784u, 0x0be1aebdu, 0xd6a40405u, 0xcfa4bccfu, 0x12e11677u, 0x70c39f4eu, 0xad8635f6u,
        0x7c834b6cu, 0xa1c6e1d4u, 0xc3e468edu, 0x1ea1c255u, 0x07a17a9fu, 0xdae4d027u, 0xb8c6591eu, 0x6583f3a6u,
        0x8ac7288au, 0x57828232u, 0x35a00b0bu, 0xe8e5a1b3u, 0xf1e51979u, 0x2ca0b3c1u, 0x4e823af8u, 0x93c79040u,
        0x95e7fa51u, 0x48a250e9u, 0x2a80d9d0u, 0xf7c57368u, 0xeec5cba2u, 0x3380611au, 0x51a2e823u, 0x8ce7429bu,
        0x63a399b7u, 0xbee6330fu, 0xdcc4ba36u, 0x0181108eu, 0x1881a844u, 0xc5c402fcu, 0xa7e68bc5u, 0x7aa3217du,
        0x52a0c93fu, 0x8fe56387u, 0xedc7eabeu, 0x30824006u, 0x2982f8ccu, 0xf4c75274u, 0x96e5db4du, 0x4ba071f5u,
        0xa4e4aad9u, 0x79a10061u, 0x1b838958u, 0xc6c623e0u, 0xdfc69b2au, 0x02833192u, 0x60a1b8abu, 0xbde41213u,
        0xbbc47802u, 0x6681d2bau, 0x04a35b83u, 0xd9e6f13bu, 0xc0e649f1u, 0x1da3e349u, 0x7f816a70u, 0xa2c4c0c8u,
        0x4d801be4u, 0x90c5b15cu, 0xf2e73865u, 0x2fa292ddu, 0x36a22a17u, 0xebe780afu, 0x89c50996u, 0x5480a32eu,
        0x8585ddb4u, 0x58c0770cu, 0x3ae2fe35u, 0xe7a7548du, 0xfea7ec47u, 0x23e246ffu, 0x41c0cfc6u, 0x9c85657eu,
        0x73c1be52u, 0xae8414eau, 0xcca69dd3u, 0x11e3376bu, 0x08e38fa1u, 0xd5a62519u, 0xb784ac20u, 0x6ac10698u,
        0x6ce16c89u, 0xb1a4c631u, 0xd3864f08u, 0x0ec3e5b0u, 0x17c35d7au, 0xca86f7c2u, 0xa8a47efbu, 0x75e1d443u,
        0x9aa50f6fu, 0x47e0a5d7u, 0x25c22ceeu, 0xf8878656u, 0xe1873e9cu, 0x3cc29424u, 0x5ee01d1du, 0x83a5b7a5u,
        0xf90696d8u, 0x24433c60u, 0x4661b559u, 0x9b241fe1u, 0x8224a72bu, 0x5f610d93u, 0x3d4384aau, 0xe0062e12u,
        0x0f42f53eu, 0xd2075f86u, 0xb025d6bfu, 0x6d607c07u, 0x7460c4cdu, 0xa9256e75u, 0xcb07e74cu, 0x16424df4u,
        0x106227e5u, 0xcd278d5du, 0xaf050464u, 0x7240aedcu, 0x6b401616u, 0xb605bcaeu, 0xd4273597u, 0x09629f2fu,
        0xe6264403u, 0x3b63eebbu, 0x59416782u, 0x8404cd3au, 0x9d0475f0u, 0x4041df48u, 0x22635671u, 0xff26fcc9u,
        0x2e238253u, 0xf36628ebu, 0x9144a1d2u, 0x4c010b6au, 0x5501b3a0u, 0x88441918u, 0xea669021u, 0x37233a99u,
        0xd867e1b5u, 0x05224b0du, 0x6700c234u, 0xba45688cu, 0xa345d046u, 0x7e007afeu, 0x1c22f3c7u, 0xc167597fu,
        0xc747336eu, 0x1a0299d6u, 0x782010efu, 0xa565ba57u, 0xbc65029du, 0x6120a825u, 0x0302211cu, 0xde478ba4u,
        0x31035088u, 0xec46fa30u, 0x8e647309u, 0x5321d9b1u, 0x4a21617bu, 0x9764cbc3u, 0xf54642fau, 0x2803e842u
    },
    {
        0x00000000u, 0x38116facu, 0x7022df58u, 0x4833b0f4u, 0xe045beb0u, 0xd854d11cu, 0x906761e8u, 0xa8760e44u,
        0xc5670b91u, 0xfd76643du, 0xb545d4c9u, 0x8d54bb65u, 0x2522b521u, 0x1d33da8du, 0x55006a79u, 0x6d1105d5u,
        0x8f2261d3u, 0xb7330e7fu, 0xff00be8bu, 0xc711d127u, 0x6f67df63u, 0x5776b0cfu, 0x1f45003bu, 0x27546f97u,
        0x4a456a42u, 0x725405eeu, 0x3a67b51au, 0x0276dab6u, 0xaa00d4f2u, 0x9211bb5eu, 0xda220baau, 0xe2336406u,
        0x1ba8b557u, 0x23b9dafbu, 0x6b8a6a0fu, 0x539b05a3u, 0xfbed0be7u, 0xc3fc644bu, 0x8bcfd4bfu, 0xb3debb13u,
        0xdecfbec6u, 0xe6ded16au, 0xaeed619eu, 0x96fc0e32u, 0x3e8a0076u, 0x069b6fdau, 0x4ea8df2eu, 0x76b9b082u,
        0x948ad484u, 0xac9bbb28u, 0xe4a80bdcu, 0xdcb96470u, 0x74cf6a34u, 0x4cde0598u, 0x04edb56cu, 0x3cfcdac0u,
        0x51eddf15u, 0x69fcb0b9u, 0x21cf004du, 0x19de6fe1u, 0xb1a861a5u, 0x89b90e09u, 0xc18abefdu, 0xf99bd151u,
        0x37516aaeu, 0x0f400502u, 0x4773b5f6u, 0x7f62da5au, 0xd714d41eu, 0xef05bbb2u, 0xa7360b46u, 0x9f2764eau,
        0xf236613fu, 0xca270e93u, 0x8214be67u, 0xba05d1cbu, 0x1273df8fu, 0x2a62b023u, 0x625100d7u, 0x5a406f7bu,
        0xb8730b7du, 0x806264d1u, 0xc851d425u, 0xf040bb89u, 0x5836b5cdu, 0x6027da61u, 0x28146a95u, 0x10050539u,
        0x7d1400ecu, 0x45056f40u, 0x0d36dfb4u, 0x3527b018u, 0x9d51be5cu, 0xa540d1f0u, 0xed736104u, 0xd5620ea8u,
        0x2cf9dff9u, 0x14e8b055u, 0x5cdb00a1u, 0x64ca6f0du, 0xccbc6149u, 0xf4ad0ee5u, 0xbc9ebe11u, 0x848fd1bdu,
        0xe99ed468u, 0xd18fbbc4u, 0x99bc0b30u, 0xa1ad649cu, 0x09db6ad8u, 0x31ca0574u, 0x79f9b580u, 0x41e8da2cu,
        0xa3dbbe2au, 0x9bcad186u, 0xd3f96172u, 0xebe80edeu, 0x439e009au, 0x7b8f6f36u, 0x33bcdfc2u, 0x0badb06eu,
        0x66bcb5bbu, 0x5eadda17u, 0x169e6ae3u, 0x2e8f054fu, 0x86f90b0bu, 0xbee864a7u, 0xf6dbd453u, 0xcecabbffu,
        0x6ea2d55cu, 0x56b3baf0u, 0x1e800a04u, 0x269165a8u, 0x8ee76becu, 0xb6f60440u, 0xfec5b4b4u, 0xc6d4db18u,
        0xabc5decdu, 0x93d4b161u, 0xdbe70195u, 0xe3f66e39u, 0x4b80607du, 0x73910fd1u, 0x3ba2bf25u, 0x03b3d089u,
        0xe180b48fu, 0xd991db23u, 0x91a26bd7u, 0xa9b3047bu, 0x01c50a3fu, 0x39d46593u, 0x71e7d567u, 0x49f6bacbu,
        0x24e7bf1eu, 0x1cf6d0b2u, 0x54c56046u, 0x6cd40feau, 0xc4a201aeu, 0xfcb36e02u, 0xb480def6u, 0x8c91b15au,
        0x750a600bu, 0x4d1b0fa7u, 0x0528bf53u, 0x3d39d0ffu, 0x954fdebbu, 0xad5eb117u, 0xe56d01e3u, 0xdd7c6e4fu,
        0xb06d6b9au, 0x887c0436u, 0xc04fb4c2u, 0xf85edb6eu, 0x5028d52au, 0x6839ba86u, 0x200a0a72u, 0x181b65deu,
        0xfa2801d8u, 0xc2396e74u, 0x8a0ade80u, 0xb21bb12cu, 0x1a6dbf68u, 0x227cd0c4u, 0x6a4f6030u, 0x525e0f9cu,
        0x3f4f0a49u, 0x075e65e5u, 0x4f6dd511u, 0x777cbabdu, 0xdf0ab4f9u, 0xe71bdb55u, 0xaf286ba1u, 0x9739040du,
        0x59f3bff2u, 0x61e2d05eu, 0x29d160aau, 0x11c00f06u, 0xb9b60142u, 0x81a76eeeu, 0xc994de1au, 0xf185b1b6u,
        0x9c94b463u, 0xa485dbcfu, 0xecb66b3bu, 0xd4a70497u, 0x7cd10ad3u, 0x44c0657fu, 0x0cf3d58bu, 0x34e2ba27u,
        0xd6d1de21u, 0xeec0b18du, 0xa6f30179u, 0x9ee26ed5u, 0x36946091u, 0x0e850f3du, 0x46b6bfc9u, 0x7ea7d065u,
        0x13b6d5b0u, 0x2ba7ba1cu, 0x63940ae8u, 0x5b856544u, 0xf3f36b00u, 0xcbe204acu, 0x83d1b458u, 0xbbc0dbf4u,
        0x425b0aa5u, 0x7a4a6509u, 0x3279d5fdu, 0x0a68ba51u, 0xa21eb415u, 0x9a0fdbb9u, 0xd23c6b4du, 0xea2d04e1u,
        0x873c0134u, 0xbf2d6e98u, 0xf71ede6cu, 0xcf0fb1c0u, 0x6779bf84u, 0x5f68d028u, 0x175b60dcu, 0x2f4a0f70u,
        0xcd796b76u, 0xf56804dau, 0xbd5bb42eu, 0x854adb82u, 0x2d3cd5c6u, 0x152dba6au, 0x5d1e0a9eu, 0x650f6532u,
        0x081e60e7u, 0x300f0f4bu, 0x783cbfbfu, 0x402dd013u, 0xe85bde57u, 0xd04ab1fbu, 0x9879010fu, 0xa0686ea3u
    },
    {
        0x00000000u, 0xef306b19u, 0xdb8ca0c3u, 0x34bccbdau, 0xb2f53777u, 0x5dc55c6eu, 0x697997b4u, 0x8649fcadu,
        0x6006181fu, 0x8f367306u, 0xbb8ab8dcu, 0x54bad3c5u, 0xd2f32f68u, 0x3dc34471u, 0x097f8fabu, 0xe64fe4b2u,
        0xc00c303eu, 0x2f3c5b27u, 0x1b8090fdu, 0xf4b0fbe4u, 0x72f90749u, 0x9dc96c50u, 0xa975a78au, 0x4645cc93u,
        0xa00a2821u, 0x4f3a4338u, 0x7b8688e2u, 0x94b6e3fbu, 0x12ff1f56u, 0xfdcf744fu, 0xc973bf95u, 0x2643d48cu,
        0x85f4168du, 0x6ac47d94u, 0x5e78b64eu, 0xb148dd57u, 0x370121fau, 0xd8314ae3u, 0xec8d8139u, 0x03bdea20u,
        0xe5f20e92u, 0x0ac2658bu, 0x3e7eae51u, 0xd14ec548u, 0x570739e5u, 0xb83752fcu, 0x8c8b9926u, 0x63bbf23fu,
        0x45f826b3u, 0xaac84daau, 0x9e748670u, 0x7144ed69u, 0xf70d11c4u, 0x183d7addu, 0x2c81b107u, 0xc3b1da1eu,
        0x25fe3eacu, 0xcace55b5u, 0xfe729e6fu, 0x1142f576u, 0x970b09dbu, 0x783b62c2u, 0x4c87a918u, 0xa3b7c201u,
        0x0e045bebu, 0xe13430f2u, 0xd588fb28u, 0x3ab89031u, 0xbcf16c9cu, 0x53c10785u, 0x677dcc5fu, 0x884da746u,
        0x6e0243f4u, 0x813228edu, 0xb58ee337u, 0x5abe882eu, 0xdcf77483u, 0x33c71f9au, 0x077bd440u, 0xe84bbf59u,
        0xce086bd5u, 0x213800ccu, 0x1584cb16u, 0xfab4a00fu, 0x7cfd5ca2u, 0x93cd37bbu, 0xa771fc61u, 0x48419778u,
        0xae0e73cau, 0x413e18d3u, 0x7582d309u, 0x9ab2b810u, 0x1cfb44bdu, 0xf3cb2fa4u, 0xc777e47eu, 0x28478f67u,
        0x8bf04d66u, 0x64c0267fu, 0x507ceda5u, 0xbf4c86bcu, 0x39057a11u, 0xd6351108u, 0xe289dad2u, 0x0db9b1cbu,
        0xebf65579u, 0x04c63e60u, 0x307af5bau, 0xdf4a9ea3u, 0x5903620eu, 0xb6330917u, 0x828fc2cdu, 0x6dbfa9d4u,
        0x4bfc7d58u, 0xa4cc1641u, 0x9070dd9bu, 0x7f40b682u, 0xf9094a2fu, 0x16392136u, 0x2285eaecu, 0xcdb581f5u,
        0x2bfa6547u, 0xc4ca0e5eu, 0xf076c584u, 0x1f46ae9du, 0x990f5230u, 0x763f3929u, 0x4283f2f3u, 0xadb399eau,
        0x1c08b7d6u, 0xf338dccfu, 0xc7841715u, 0x28b47c0cu, 0xaefd80a1u, 0x41cdebb8u, 0x75712062u, 0x9a414b7bu,
        0x7c0eafc9u, 0x933ec4d0u, 0xa7820f0au, 0x48b26413u, 0xcefb98beu, 0x21cbf3a7u, 0x1577387du, 0xfa475364u,
        0xdc0487e8u, 0x3334ecf1u, 0x0788272bu, 0xe8b84c32u, 0x6ef1b09fu, 0x81c1db86u, 0xb57d105cu, 0x5a4d7b45u,
        0xbc029ff7u, 0x5332f4eeu, 0x678e3f34u, 0x88be542du, 0x0ef7a880u, 0xe1c7c399u, 0xd57b0843u, 0x3a4b635au,
        0x99fca15bu, 0x76ccca42u, 0x42700198u, 0xad406a81u, 0x2b09962cu, 0xc439fd35u, 0xf08536efu, 0x1fb55df6u,
        0xf9fab944u, 0x16cad25du, 0x22761987u, 0xcd46729eu, 0x4b0f8e33u, 0xa43fe52au, 0x90832ef0u, 0x7fb345e9u,
        0x59f09165u, 0xb6c0fa7cu, 0x827c31a6u, 0x6d4c5abfu, 0xeb05a612u, 0x0435cd0bu, 0x308906d1u, 0xdfb96dc8u,
        0x39f6897au, 0xd6c6e263u, 0xe27a29b9u, 0x0d4a42a0u, 0x8b03be0du, 0x6433d514u, 0x508f1eceu, 0xbfbf75d7u,
        0x120cec3du, 0xfd3c8724u, 0xc9804cfeu, 0x26b027e7u, 0xa0f9db4au, 0x4fc9b053u, 0x7b757b89u, 0x94451090u,
        0x720af422u, 0x9d3a9f3bu, 0xa98654e1u, 0x46b63ff8u, 0xc0ffc355u, 0x2fcfa84cu, 0x1b736396u, 0xf443088fu,
        0xd200dc03u, 0x3d30b71au, 0x098c7cc0u, 0xe6bc17d9u, 0x60f5eb74u, 0x8fc5806du, 0xbb794bb7u, 0x544920aeu,
        0xb206c41cu, 0x5d36af05u, 0x698a64dfu, 0x86ba0fc6u, 0x00f3f36bu, 0xefc39872u, 0xdb7f53a8u, 0x344f38b1u,
        0x97f8fab0u, 0x78c891a9u, 0x4c745a73u, 0xa344316au, 0x250dcdc7u, 0xca3da6deu, 0xfe816d04u, 0x11b1061du,
        0xf7fee2afu, 0x18ce89b6u, 0x2c72426cu, 0xc3422975u, 0x450bd5d8u, 0xaa3bbec1u, 0x9e87751bu, 0x71b71e02u,
        0x57f4ca8eu, 0xb8c4a197u, 0x8c786a4du, 0x63480154u, 0xe501fdf9u, 0x0a3196e0u, 0x3e8d5d3au, 0xd1bd3623u,
        0x37f2d291u, 0xd8c2b988u, 0xec7e7252u, 0x034e194bu, 0x8507e5e6u, 0x6a378effu, 0x5e8b4525u, 0xb1bb2e3cu
    },
    {
        0x00000000u, 0x68032cc8u, 0xd0065990u, 0xb8057558u, 0xa5e0c5d1u, 0xcde3e919u, 0x75e69c41u, 0x1de5b089u,
        0x4e2dfd53u, 0x262ed19bu, 0x9e2ba4c3u, 0xf628880bu, 0xebcd3882u, 0x83ce144au, 0x3bcb6112u, 0x53c84ddau,
        0x9c5bfaa6u, 0xf458d66eu, 0x4c5da336u, 0x245e8ffeu, 0x39bb3f77u, 0x51b813bfu, 0xe9bd66e7u, 0x81be4a2fu,
        0xd27607f5u, 0xba752b3du, 0x02705e65u, 0x6a7372adu, 0x7796c224u, 0x1f95eeecu, 0xa7909bb4u, 0xcf93b77cu,
        0x3d5b83bdu, 0x5558af75u, 0xed5dda2du, 0x855ef6e5u, 0x98bb466cu, 0xf0b86aa4u, 0x48bd1ffcu, 0x20be3334u,
        0x73767eeeu, 0x1b755226u, 0xa370277eu, 0xcb730bb6u, 0xd696bb3fu, 0xbe9597f7u, 0x0690e2afu, 0x6e93ce67u,
        0xa100791bu, 0xc90355d3u, 0x7106208bu, 0x19050c43u, 0x04e0bccau, 0x6ce39002u, 0xd4e6e55au, 0xbce5c992u,
        0xef2d8448u, 0x872ea880u, 0x3f2bddd8u, 0x5728f110u, 0x4acd4199u, 0x22ce6d51u, 0x9acb1809u, 0xf2c834c1u,
        0x7ab7077au, 0x12b42bb2u, 0xaab15eeau, 0xc2b27222u, 0xdf57c2abu, 0xb754ee63u, 0x0f519b3bu, 0x6752b7f3u,
        0x349afa29u, 0x5c99d6e1u, 0xe49ca3b9u, 0x8c9f8f71u, 0x917a3ff8u, 0xf9791330u, 0x417c6668u, 0x297f4aa0u,
        0xe6ecfddcu, 0x8eefd114u, 0x36eaa44cu, 0x5ee98884u, 0x430c380du, 0x2b0f14c5u, 0x930a619du, 0xfb094d55u,
        0xa8c1008fu, 0xc0c22c47u, 0x78c7591fu, 0x10c475d7u, 0x0d21c55eu, 0x6522e996u, 0xdd279cceu, 0xb524b006u,
        0x47ec84c7u, 0x2fefa80fu, 0x97eadd57u, 0xffe9f19fu, 0xe20c4116u, 0x8a0f6ddeu, 0x320a1886u, 0x5a09344eu,
        0x09c17994u, 0x61c2555cu, 0xd9c72004u, 0xb1c40cccu, 0xac21bc45u, 0xc422908du, 0x7c27e5d5u, 0x1424c91du,
        0xdbb77e61u, 0xb3b452a9u, 0x0bb127f1u, 0x63b20b39u, 0x7e57bbb0u, 0x16549778u, 0xae51e220u, 0xc652cee8u,
        0x959a8332u, 0xfd99affau, 0x459cdaa2u, 0x2d9ff66au, 0x307a46e3u, 0x58796a2bu, 0xe07c1f73u, 0x887f33bbu,
        0xf56e0ef4u, 0x9d6d223cu, 0x25685764u, 0x4d6b7bacu, 0x508ecb25u, 0x388de7edu, 0x808892b5u, 0xe88bbe7du,
        0xbb43f3a7u, 0xd340df6fu, 0x6b45aa37u, 0x034686ffu, 0x1ea33676u, 0x76a01abeu, 0xcea56fe6u, 0xa6a6432eu,
        0x6935f452u, 0x0136d89au, 0xb933adc2u, 0xd130810au, 0xccd53183u, 0xa4d61d4bu, 0x1cd36813u, 0x74d044dbu,
        0x27180901u, 0x4f1b25c9u, 0xf71e5091u, 0x9f1d7c59u, 0x82f8ccd0u, 0xeafbe018u, 0x52fe9540u, 0x3afdb988u,
        0xc8358d49u, 0xa036a181u, 0x1833d4d9u, 0x7030f811u, 0x6dd54898u, 0x05d66450u, 0xbdd31108u, 0xd5d03dc0u,
        0x8618701au, 0xee1b5cd2u, 0x561e298au, 0x3e1d0542u, 0x23f8b5cbu, 0x4bfb9903u, 0xf3feec5bu, 0x9bfdc093u,
        0x546e77efu, 0x3c6d5b27u, 0x84682e7fu, 0xec6b02b7u, 0xf18eb23eu, 0x998d9ef6u, 0x2188ebaeu, 0x498bc766u,
        0x1a438abcu, 0x7240a674u, 0xca45d32cu, 0xa246ffe4u, 0xbfa34f6du, 0xd7a063a5u, 0x6fa516fdu, 0x07a63a35u,
        0x8fd9098eu, 0xe7da2546u, 0x5fdf501eu, 0x37dc7cd6u, 0x2a39cc5fu, 0x423ae097u, 0xfa3f95cfu, 0x923cb907u,
        0xc1f4f4ddu, 0xa9f7d815u, 0x11f2ad4du, 0x79f18185u, 0x6414310cu, 0x0c171dc4u, 0xb412689cu, 0xdc114454u,
        0x1382f328u, 0x7b81dfe0u, 0xc384aab8u, 0xab878670u, 0xb66236f9u, 0xde611a31u, 0x66646f69u, 0x0e6743a1u,
        0x5daf0e7bu, 0x35ac22b3u, 0x8da957ebu, 0xe5aa7b23u, 0xf84fcbaau, 0x904ce762u, 0x2849923au, 0x404abef2u,
        0xb2828a33u, 0xda81a6fbu, 0x6284d3a3u, 0x0a87ff6bu, 0x17624fe2u, 0x7f61632au, 0xc7641672u, 0xaf673abau,
        0xfcaf7760u, 0x94ac5ba8u, 0x2ca92ef0u, 0x44aa0238u, 0x594fb2b1u, 0x314c9e79u, 0x8949eb21u, 0xe14ac7e9u,
        0x2ed97095u, 0x46da5c5du, 0xfedf2905u, 0x96dc05cdu, 0x8b39b544u, 0xe33a998cu, 0x5b3fecd4u, 0x333cc01cu,
        0x60f48dc6u, 0x08f7a10eu, 0xb0f2d456u, 0xd8f1f89eu, 0xc5144817u, 0xad1764dfu, 0x15121187u, 0x7d113d4fu
    },
    {
        0x00000000u, 0x493c7d27u, 0x9278fa4eu, 0xdb448769u, 0x211d826du, 0x6821ff4au, 0xb3657823u, 0xfa590504u,
        0x423b04dau, 0x0b0779fdu, 0xd043fe94u, 0x997f83b3u, 0x632686b7u, 0x2a1afb90u, 0xf15e7cf9u, 0xb86201deu,
        0x847609b4u, 0xcd4a7493u, 0x160ef3fau, 0x5f328eddu, 0xa56b8bd9u, 0xec57f6feu, 0x37137197u, 0x7e2f0cb0u,
        0xc64d0d6eu, 0x8f717049u, 0x5435f720u, 0x1d098a07u, 0xe7508f03u, 0xae6cf224u, 0x7528754du, 0x3c14086au,
        0x0d006599u, 0x443c18beu, 0x9f789fd7u, 0xd644e2f0u, 0x2c1de7f4u, 0x65219ad3u, 0xbe651dbau, 0xf759609du,
        0x4f3b6143u, 0x06071c64u, 0xdd439b0du, 0x947fe62au, 0x6e26e32eu, 0x271a9e09u, 0xfc5e1960u, 0xb5626447u,
        0x89766c2du, 0xc04a110au, 0x1b0e9663u, 0x5232eb44u, 0xa86bee40u, 0xe1579367u, 0x3a13140eu, 0x732f6929u,
        0xcb4d68f7u, 0x827115d0u, 0x593592b9u, 0x1009ef9eu, 0xea50ea9au, 0xa36c97bdu, 0x782810d4u, 0x31146df3u,
        0x1a00cb32u, 0x533cb615u, 0x8878317cu, 0xc1444c5bu, 0x3b1d495fu, 0x72213478u, 0xa965b311u, 0xe059ce36u,
        0x583bcfe8u, 0x1107b2cfu, 0xca4335a6u, 0x837f4881u, 0x79264d85u, 0x301a30a2u, 0xeb5eb7cbu, 0xa262caecu,
        0x9e76c286u, 0xd74abfa1u, 0x0c0e38c8u, 0x453245efu, 0xbf6b40ebu, 0xf6573dccu, 0x2d13baa5u, 0x642fc782u,
        0xdc4dc65cu, 0x9571bb7bu, 0x4e353c12u, 0x07094135u, 0xfd504431u, 0xb46c3916u, 0x6f28be7fu, 0x2614c358u,
        0x1700aeabu, 0x5e3cd38cu, 0x857854e5u, 0xcc4429c2u, 0x361d2cc6u, 0x7f2151e1u, 0xa465d688u, 0xed59abafu,
        0x553baa71u, 0x1c07d756u, 0xc743503fu, 0x8e7f2d18u, 0x7426281cu, 0x3d1a553bu, 0xe65ed252u, 0xaf62af75u,
        0x9376a71fu, 0xda4ada38u, 0x010e5d51u, 0x48322076u, 0xb26b2572u, 0xfb575855u, 0x2013df3cu, 0x692fa21bu,
        0xd14da3c5u, 0x9871dee2u, 0x4335598bu, 0x0a0924acu, 0xf05021a8u, 0xb96c5c8fu, 0x6228dbe6u, 0x2b14a6c1u,
        0x34019664u, 0x7d3deb43u, 0xa6796c2au, 0xef45110du, 0x151c1409u, 0x5c20692eu, 0x8764ee47u, 0xce589360u,
        0x763a92beu, 0x3f06ef99u, 0xe44268f0u, 0xad7e15d7u, 0x572710d3u, 0x1e1b6df4u, 0xc55fea9du, 0x8c6397bau,
        0xb0779fd0u, 0xf94be2f7u, 0x220f659eu, 0x6b3318b9u, 0x916a1dbdu, 0xd856609au, 0x0312e7f3u, 0x4a2e9ad4u,
        0xf24c9b0au, 0xbb70e62du, 0x60346144u, 0x29081c63u, 0xd3511967u, 0x9a6d6440u, 0x4129e329u, 0x08159e0eu,
        0x3901f3fdu, 0x703d8edau, 0xab7909b3u, 0xe2457494u, 0x181c7190u, 0x51200cb7u, 0x8a648bdeu, 0xc358f6f9u,
        0x7b3af727u, 0x32068a00u, 0xe9420d69u, 0xa07e704eu, 0x5a27754au, 0x131b086du, 0xc85f8f04u, 0x8163f223u,
        0xbd77fa49u, 0xf44b876eu, 0x2f0f0007u, 0x66337d20u, 0x9c6a7824u, 0xd5560503u, 0x0e12826au, 0x472eff4du,
        0xff4cfe93u, 0xb67083b4u, 0x6d3404ddu, 0x240879fau, 0xde517cfeu, 0x976d01d9u, 0x4c2986b0u, 0x0515fb97u,
        0x2e015d56u, 0x673d2071u, 0xbc79a718u, 0xf545da3fu, 0x0f1cdf3bu, 0x4620a21cu, 0x9d642575u, 0xd4585852u,
        0x6c3a598cu, 0x250624abu, 0xfe42a3c2u, 0xb77edee5u, 0x4d27dbe1u, 0x041ba6c6u, 0xdf5f21afu, 0x96635c88u,
        0xaa7754e2u, 0xe34b29c5u, 0x380faeacu, 0x7133d38bu, 0x8b6ad68fu, 0xc256aba8u, 0x19122cc1u, 0x502e51e6u,
        0xe84c5038u, 0xa1702d1fu, 0x7a34aa76u, 0x3308d751u, 0xc951d255u, 0x806daf72u, 0x5b29281bu, 0x1215553cu,
        0x230138cfu, 0x6a3d45e8u, 0xb179c281u, 0xf845bfa6u, 0x021cbaa2u, 0x4b20c785u, 0x906440ecu, 0xd9583dcbu,
        0x613a3c15u, 0x28064132u, 0xf342c65bu, 0xba7ebb7cu, 0x4027be78u, 0x091bc35fu, 0xd25f4436u, 0x9b633911u,
        0xa777317bu, 0xee4b4c5cu, 0x350fcb35u, 0x7c33b612u, 0x866ab316u, 0xcf56ce31u, 0x14124958u, 0x5d2e347fu,
        0xe54c35a1u, 0xac704886u, 0x7734cfefu, 0x3e08b2c8u, 0xc451b7ccu, 0x8d6dcaebu, 0x56294d82u, 0x1f1530a5u
    }
};
static uint32_t pt__crc32c_combine(uint32_t crc1, uint32_t crc2, int64_t len2);
#if PT__X86
/* SSE4.2's crc32 instruction computes CRC32C. It has a latency of 3 cycles and issues one per
   cycle, so a long buffer runs as three independent streams over its thirds, joined by
   pt__crc32c_combine (a few microseconds, paid only above 64 KiB). */
__attribute__((target("sse4.2"))) static uint32_t pt__crc32c_hw1(uint32_t c, const unsigned char *p, size_t n) {
    uint64_t c64 = c;
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c64 = _mm_crc32_u64(c64, v);
    }
    c = (uint32_t)c64;
    while (n--) c = _mm_crc32_u8(c, *p++);
    return c;
}
__attribute__((target("sse4.2"))) static uint32_t pt__crc32c_hw(uint32_t crc, const unsigned char *p, size_t n) {
    uint32_t c = ~crc;
    if (n >= ((size_t)64 << 10)) {
        size_t third = (n / 3) & ~(size_t)7, i;
        const unsigned char *q = p + third, *r = p + 2 * third;
        uint64_t a = c, b = 0xffffffffu, d = 0xffffffffu;
        for (i = 0; i < third; i += 8) {
            uint64_t x, y, z;
            memcpy(&x, p + i, 8), memcpy(&y, q + i, 8), memcpy(&z, r + i, 8);
            a = _mm_crc32_u64(a, x), b = _mm_crc32_u64(b, y), d = _mm_crc32_u64(d, z);
        }
        /* streams two and three started from an all-ones register, i.e. they are the plain CRCs of
           their thirds; stream one continues crc */
        c = pt__crc32c_combine(pt__crc32c_combine(~(uint32_t)a, ~(uint32_t)b, (int64_t)third), ~(uint32_t)d, (int64_t)third);
        return ~pt__crc32c_hw1(~c, r + third, n - 3 * third); /* the tail continues the joined CRC */
    }
    return ~pt__crc32c_hw1(c, p, n);
}
#endif
/* the portable path: slicing by 8 over the constant tables */
static uint32_t pt__crc32c_sw(uint32_t crc, const unsigned char *p, size_t n) {
    crc = ~crc;
    for (; n >= 8; p += 8, n -= 8) { /* slicing by 8 */
        uint32_t lo = crc ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
        uint32_t hi = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 | (uint32_t)p[7] << 24;
        crc = pt__crc_tab[7][lo & 0xff] ^ pt__crc_tab[6][(lo >> 8) & 0xff] ^ pt__crc_tab[5][(lo >> 16) & 0xff] ^ pt__crc_tab[4][lo >> 24] ^
              pt__crc_tab[3][hi & 0xff] ^ pt__crc_tab[2][(hi >> 8) & 0xff] ^ pt__crc_tab[1][(hi >> 16) & 0xff] ^ pt__crc_tab[0][hi >> 24];
    }
    while (n--) crc = pt__crc_tab[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return ~crc;
}
PTDEF uint32_t pt_crc32c(uint32_t crc, const void *data, size_t n) {
    const unsigned char *p = (const unsigned char *)data;
#if PT__X86
    /* the CPU check reads what libgcc's constructor detected (__builtin_cpu_init is idempotent) */
    __builtin_cpu_init();
    if (__builtin_cpu_supports("sse4.2")) return pt__crc32c_hw(crc, p, n);
#endif
    return pt__crc32c_sw(crc, p, n);
}

/* CRC32C of A|B from crc(A), crc(B) and |B| (zlib's crc32_combine with the Castagnoli polynomial):
   appending |B| zero bytes to A multiplies its CRC by x^(8|B|) modulo the polynomial (bit-reflected
   arithmetic over GF(2)); x^(8|B|) comes from repeated squaring, ~2 log2(8|B|) products of 32 steps.
   A save combines the file CRC from its pieces' CRCs, so it hashes each byte once. */
static uint32_t pt__crc_mulmod(uint32_t a, uint32_t b) {
    uint32_t m = 1u << 31, p = 0;
    for (;;) {
        if (a & m) {
            p ^= b;
            if ((a & (m - 1)) == 0) break;
        }
        m >>= 1;
        b = b & 1 ? (b >> 1) ^ 0x82F63B78u : b >> 1;
    }
    return p;
}
static uint32_t pt__crc32c_combine(uint32_t crc1, uint32_t crc2, int64_t len2) {
    uint32_t xp = 1u << 31, sq = 1u << 23; /* x^0, and x^8 (one zero byte) */
    if (len2 <= 0) return crc1;
    for (; len2; len2 >>= 1, sq = pt__crc_mulmod(sq, sq))
        if (len2 & 1) xp = pt__crc_mulmod(sq, xp);
    return pt__crc_mulmod(xp, crc1) ^ crc2;
}

// >>dist  the process grid
/* Owns: pt_dist (the dp x tp x pp grid and its MPI communicators), the ring of collective records
   every MPI call goes through, the debug-mode agreement and the watchdog
   Invariants: pure rank <-> coordinate maps; a NULL grid is a world of one rank; every MPI call is
   wrapped by pt__coll_begin / pt__coll_end; an observer (the trace) may watch the records
   Entry points: pt_dist_init pt_dist_finalize pt_layout_resolve pt_dist_agree_msg pt_dist_print
   pt_dist_records pt_dist_set_watchdog */
/* =================================================================================================
   the process grid: layout <-> coordinates, nodes, communicators, agreement on errors
   =================================================================================================
   Rank order: TP innermost, then DP, then PP outermost: rank = tp + TP*(dp + DP*pp). A TP group is
   TP consecutive world ranks (so, with the usual by-slot mapping, on one node). Every communicator
   is an MPI_Comm_split of a private duplicate of MPI_COMM_WORLD with key = world rank, so a rank's
   rank in its TP/PP/DP communicator is its tp/pp/dp coordinate. The duplicate has
   MPI_ERRORS_RETURN (inherited by the splits): a failing MPI call returns an error code here
   instead of aborting the job. Errors at the API boundary are agreed on: one MPI_Allreduce (MIN) of
   "ok ? size : rank" finds the lowest failing rank, which broadcasts its message to all. */
#ifdef PTRAIN_MPI
#if defined(__cplusplus) && !defined(OMPI_SKIP_MPICXX) && !defined(MPICH_SKIP_MPICXX)
/* keep MPI's deprecated C++ bindings out (they warn under -Wextra, define MPI:: symbols in this TU
   and need -lmpi_cxx); include <mpi.h> before ptrain.h if you want them */
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>
#if defined(__unix__) || defined(__APPLE__)
#include <poll.h>
#include <pthread.h>
#define PT__COLL_THREADS 1 /* the watchdog thread (POSIX threads) */
#endif
#endif

#define PT__DIST_MSG 1024 /* bytes of an agreed error message */
#define PT__DIST_HOST 32  /* bytes of a host name in pt_dist_print */
#define PT__COLL_REFUSED (-1) /* the return code of a call refused by debug mode (MPI's codes are >= 0) */
#define PT__COLL_NV 6 /* values per rank in the debug-mode agreement */
#define PT__COMM_ALL (PT_COMM_DP_CROSS + 1) /* communicators of the records: the grid's and a hierarchical pt_dp's */

struct pt_dist {
    int rank, size;
    pt_layout layout;  /* resolved */
    pt_coords coords;  /* this rank */
    int node, nodes, local_rank, local_size;
    int fake_node_size; /* PTRAIN_FAKE_NODE_SIZE, 0 = real nodes */
    int threads;        /* pt_dist_threads */
    int thread_level;   /* MPI_Init_thread's provided level (0 without MPI) */
    int owns_mpi;       /* pt_dist_init called MPI_Init_thread: pt_dist_finalize calls MPI_Finalize */
    int *node_of;       /* [size]: node index of every world rank */
#ifdef PTRAIN_MPI
    MPI_Comm comm[PT__COMM_ALL]; /* [PT_COMM_DP_NODE..]: a hierarchical pt_dp's, registered for debug mode (it owns them) */
#endif
    /* the collective records (below): written by the calling thread, read by the watchdog */
    pt_coll_record ring[PT_COLL_RING]; /* record of call seq at ring[(seq - 1) % PT_COLL_RING] */
    uint64_t seq;                      /* calls recorded */
    uint64_t comm_seq[PT__COMM_ALL];   /* collectives recorded per communicator */
    int64_t step, micro_batch;         /* pt_dist_set_step */
    int check;                         /* debug mode */
    int64_t *check_buf;                /* [size * PT__COLL_NV]: the debug mode's allgather */
    double t0, deadline;               /* MPI_Wtime at pt_dist_init; the watchdog's deadline (0 = off) */
    char coll_err[PT__DIST_MSG];       /* the last refusal */
    char why[PT__DIST_MSG];            /* pt__coll_why's text of an MPI error */
    /* an observer of every call (the trace sets it while it records): begin = 1 at the start,
       0 at the end, with a copy of the record; NULL = none */
    void (*coll_hook)(void *user, const pt_coll_record *r, int begin);
    void *coll_hook_user;
    /* monitor's totals of completed calls, per pt_coll_op (pt__coll_tally, pt__coll_wait; under mu) */
    int64_t mon_bytes[PT_COLL_OP_COUNT], mon_calls[PT_COLL_OP_COUNT];
    double mon_s[PT_COLL_OP_COUNT];
    double mon_blocked_s, mon_blocked_p2p_s; /* time blocked in collectives / point-to-point calls and waits */
#ifdef PT__COLL_THREADS
    pthread_mutex_t mu; /* guards ring, seq, deadline and wd_stop against the watchdog */
    pthread_t wd;
    int wd_running, wd_stop;
#endif
};

/* ---- collective records ------------------------------------------------------------------------
   Every call site of an MPI collective, send or receive is wrapped as
       uint64_t s = pt__coll_begin(d, PT_COLL_ALLREDUCE, PT_COMM_TP, count, PT_COLL_F32, -1);
       rc = pt__coll_end(d, s, s ? MPI_Allreduce(...) : PT__COLL_REFUSED);
   begin writes the record (in flight) and, in debug mode, lets the ranks of the communicator agree
   on (op, count, dtype, their collective number on it, root) with one MPI_Allgather: all ranks
   see the same table, so all of them refuse a mismatch (begin returns 0, the message is in
   coll_err, pt__coll_why(d, rc) gives it) and nobody blocks in the real call. end stamps the
   end time and the outcome and returns rc. A non-blocking call keeps s and calls pt__coll_end at
   its completion (MPI_Test's flag or MPI_Wait). The watchdog thread wakes every deadline/10 (10 ms
   to 200 ms), looks for a record in flight for longer than the deadline, prints the records and
   calls MPI_Abort. The ring and the counters are guarded by a mutex (never held during MPI calls). */
static const char *const pt__dist_comm_names[PT__COMM_ALL] = {"world", "TP", "PP", "DP", "node", "cross-node", "DP-node", "DP-cross"};

static const char *pt__coll_op_name(int op) {
    static const char *const names[PT_COLL_OP_COUNT] = {"?", "allreduce", "iallreduce", "bcast", "gather", "allgather",
        "allgatherv", "reduce_scatter", "ireduce_scatter", "barrier", "send", "recv", "isend", "irecv", "iallgatherv"};
    return op > 0 && op < PT_COLL_OP_COUNT ? names[op] : "?";
}
static const char *pt__coll_dtype_name(int dt) {
    static const char *const names[PT_COLL_DTYPE_COUNT] = {"byte", "char", "i32", "i64", "f32", "f64", "bf16"};
    return dt >= 0 && dt < PT_COLL_DTYPE_COUNT ? names[dt] : "?";
}
static const char *pt__coll_comm_name(int which) { return which >= 0 && which < PT__COMM_ALL ? pt__dist_comm_names[which] : "?"; }

static void pt__coll_lock(const pt_dist *d) {
#ifdef PT__COLL_THREADS
    pthread_mutex_lock(&((pt_dist *)d)->mu);
#else
    (void)d;
#endif
}
static void pt__coll_unlock(const pt_dist *d) {
#ifdef PT__COLL_THREADS
    pthread_mutex_unlock(&((pt_dist *)d)->mu);
#else
    (void)d;
#endif
}
/* seconds since pt_dist_init (MPI_Wtime: callable from the watchdog thread) */
static double pt__coll_now(const pt_dist *d) {
#ifdef PTRAIN_MPI
    return MPI_Wtime() - d->t0;
#else
    (void)d;
    return 0.0;
#endif
}

/* the records (caller holds the lock) */
static void pt__coll_dump_locked(const pt_dist *d, FILE *f) {
    uint64_t n = PT__MIN(d->seq, (uint64_t)PT_COLL_RING), i;
    double now = pt__coll_now(d);
    fprintf(f, "collective records of rank %d (tp %d, pp %d, dp %d): %llu calls, the last %llu (oldest first); now %.3f s, step %lld, micro-batch %lld\n",
            d->rank, (int)d->coords.tp, (int)d->coords.pp, (int)d->coords.dp, (unsigned long long)d->seq, (unsigned long long)n, now,
            (long long)d->step, (long long)d->micro_batch);
    if (!n) return;
    fprintf(f, "      seq op              comm           #      count dtype  peer     step   mb    start_s     time_s state\n");
    for (i = d->seq - n; i < d->seq; i++) {
        const pt_coll_record *r = &d->ring[i % PT_COLL_RING];
        fprintf(f, "%9llu %-15s %-10s %6llu %10lld %-5s %5d %8lld %4lld %10.3f ", (unsigned long long)r->seq, pt__coll_op_name(r->op),
                pt__coll_comm_name(r->comm), (unsigned long long)r->comm_seq, (long long)r->count, pt__coll_dtype_name(r->dtype), (int)r->peer,
                (long long)r->step, (long long)r->micro_batch, r->t_start);
        if (r->state == PT_COLL_IN_FLIGHT) fprintf(f, "%10.3f IN FLIGHT\n", now - r->t_start);
        else if (r->state == PT_COLL_DONE) fprintf(f, "%10.6f done\n", r->t_end - r->t_start);
        else if (r->state == PT_COLL_REFUSED) fprintf(f, "%10.6f refused (debug mode: the ranks disagree)\n", r->t_end - r->t_start);
        else fprintf(f, "%10.6f failed (MPI error %d)\n", r->t_end - r->t_start, (int)r->rc);
    }
}

PTDEF void pt_dist_set_step(pt_dist *d, int64_t step, int64_t micro_batch) {
    if (!d) return;
    pt__coll_lock(d);
    d->step = step;
    d->micro_batch = micro_batch;
    pt__coll_unlock(d);
}
PTDEF int pt_dist_records(const pt_dist *d, pt_coll_record *out, int max) {
    uint64_t n, i;
    if (!d || !out || max <= 0) return 0;
    pt__coll_lock(d);
    n = PT__MIN(PT__MIN(d->seq, (uint64_t)PT_COLL_RING), (uint64_t)max);
    for (i = 0; i < n; i++) out[i] = d->ring[(d->seq - n + i) % PT_COLL_RING];
    pt__coll_unlock(d);
    return (int)n;
}
PTDEF void pt_dist_dump_records(const pt_dist *d, void *file) {
    FILE *f = file ? (FILE *)file : stderr;
    if (!d) {
        fprintf(f, "collective records: no grid (a world of one rank makes no calls)\n");
        return;
    }
    pt__coll_lock(d);
    pt__coll_dump_locked(d, f);
    pt__coll_unlock(d);
    fflush(f);
}
PTDEF const char *pt_dist_coll_error(const pt_dist *d) { return d ? d->coll_err : ""; }

#ifdef PTRAIN_MPI
/* appends printf output at the end of the string in buf (cap bytes), truncating */
static void pt__coll_cat(char *buf, size_t cap, const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static void pt__coll_cat(char *buf, size_t cap, const char *fmt, ...) {
    size_t len = strlen(buf);
    va_list ap;
    if (len + 1 >= cap) return;
    va_start(ap, fmt);
    vsnprintf(buf + len, cap - len, fmt, ap);
    va_end(ap);
}
/* "rank 3" or "ranks 0,2,5": the world ranks (v[i * NV]) of the n ranks whose tuple equals (or, when
   same = 0, differs from) the tuple at ref */
static void pt__coll_ranks(char *buf, size_t cap, const int64_t *v, int n, const int64_t *ref, int same) {
    int i, k = 0, total = 0;
    for (i = 0; i < n; i++) total += (memcmp(v + (size_t)i * PT__COLL_NV + 1, ref + 1, (PT__COLL_NV - 1) * sizeof(int64_t)) == 0) == same;
    pt__coll_cat(buf, cap, "rank%s ", total == 1 ? "" : "s");
    for (i = 0; i < n; i++) {
        if ((memcmp(v + (size_t)i * PT__COLL_NV + 1, ref + 1, (PT__COLL_NV - 1) * sizeof(int64_t)) == 0) != same) continue;
        if (k == 16) {
            pt__coll_cat(buf, cap, ",...");
            break;
        }
        pt__coll_cat(buf, cap, "%s%lld", k++ ? "," : "", (long long)v[(size_t)i * PT__COLL_NV]);
    }
}
/* The mismatch message: the disagreeing ranks (outside the largest group of equal requests, ties
   to the group of the lowest rank), then every distinct request with the ranks that made it. */
static void pt__coll_mismatch(pt_dist *d, int which, const int64_t *v, int n) {
    char *m = d->coll_err;
    size_t cap = sizeof d->coll_err;
    int i, j, best = 0, best_n = 0, groups = 0;
    for (i = 0; i < n; i++) { /* group leaders: no earlier rank with the same request */
        int lead = 1, cnt = 0;
        for (j = 0; j < i && lead; j++) lead = memcmp(v + (size_t)j * PT__COLL_NV + 1, v + (size_t)i * PT__COLL_NV + 1, (PT__COLL_NV - 1) * sizeof(int64_t)) != 0;
        if (!lead) continue;
        for (j = i; j < n; j++) cnt += memcmp(v + (size_t)j * PT__COLL_NV + 1, v + (size_t)i * PT__COLL_NV + 1, (PT__COLL_NV - 1) * sizeof(int64_t)) == 0;
        if (cnt > best_n) best = i, best_n = cnt;
    }
    m[0] = 0;
    pt__coll_cat(m, cap, "collective mismatch on the %s communicator (%d ranks; debug mode, nothing was run): ", pt__coll_comm_name(which), n);
    pt__coll_ranks(m, cap, v, n, v + (size_t)best * PT__COLL_NV, 0);
    pt__coll_cat(m, cap, " disagree%s with the others; ", n - best_n == 1 ? "s" : "");
    for (i = 0; i < n; i++) {
        const int64_t *t = v + (size_t)i * PT__COLL_NV;
        int lead = 1;
        for (j = 0; j < i && lead; j++) lead = memcmp(v + (size_t)j * PT__COLL_NV + 1, t + 1, (PT__COLL_NV - 1) * sizeof(int64_t)) != 0;
        if (!lead) continue;
        if (groups++ == 8) {
            pt__coll_cat(m, cap, "; ...");
            break;
        }
        if (groups > 1) pt__coll_cat(m, cap, "; ");
        pt__coll_ranks(m, cap, v, n, t, 1);
        pt__coll_cat(m, cap, " asked for %s of %lld %s", pt__coll_op_name((int)t[1]), (long long)t[2], pt__coll_dtype_name((int)t[3]));
        if (t[5] >= 0) pt__coll_cat(m, cap, " with root %lld", (long long)t[5]);
        pt__coll_cat(m, cap, " as collective #%lld on it", (long long)t[4]);
    }
}
/* debug mode: 1 if every rank of the communicator asks for the same collective as r */
static int pt__coll_check(pt_dist *d, const pt_coll_record *r) {
    int64_t mine[PT__COLL_NV];
    int n = 1, i, rc;
    MPI_Comm c = d->comm[r->comm];
    mine[0] = d->rank, mine[1] = r->op, mine[2] = r->count, mine[3] = r->dtype, mine[4] = (int64_t)r->comm_seq, mine[5] = r->peer;
    MPI_Comm_size(c, &n);
    rc = MPI_Allgather(mine, PT__COLL_NV, MPI_INT64_T, d->check_buf, PT__COLL_NV, MPI_INT64_T, c);
    if (rc != MPI_SUCCESS) {
        pt__msg(d->coll_err, sizeof d->coll_err, "debug mode: the agreement on the next collective (MPI_Allgather on the %s communicator) failed (MPI error %d)",
                pt__coll_comm_name(r->comm), rc);
        return 0;
    }
    for (i = 1; i < n; i++)
        if (memcmp(d->check_buf + (size_t)i * PT__COLL_NV + 1, d->check_buf + 1, (PT__COLL_NV - 1) * sizeof(int64_t)) != 0) break;
    if (i == n) return 1;
    pt__coll_mismatch(d, r->comm, d->check_buf, n);
    return 0;
}

/* monitor: adds a completed call (record r, caller holds the lock) to the per-operation totals;
   the time of a blocking call is time the caller was blocked */
static void pt__coll_tally(pt_dist *d, const pt_coll_record *r) {
    static const int64_t es[PT_COLL_DTYPE_COUNT] = {1, 1, 4, 8, 4, 8, 2};
    int op = r->op, p2p = op == PT_COLL_SEND || op == PT_COLL_RECV || op == PT_COLL_ISEND || op == PT_COLL_IRECV;
    int nb = op == PT_COLL_IALLREDUCE || op == PT_COLL_IREDUCE_SCATTER || op == PT_COLL_IALLGATHERV || op == PT_COLL_ISEND || op == PT_COLL_IRECV;
    double t = r->t_end - r->t_start;
    if (op <= 0 || op >= PT_COLL_OP_COUNT || r->dtype < 0 || r->dtype >= PT_COLL_DTYPE_COUNT) return;
    d->mon_bytes[op] += r->count * es[r->dtype], d->mon_calls[op]++, d->mon_s[op] += t;
    if (!nb) *(p2p ? &d->mon_blocked_p2p_s : &d->mon_blocked_s) += t;
}
/* monitor: seconds the caller spent blocked in an MPI call that has no record (p2p: point-to-point) */
static void pt__coll_blocked(const pt_dist *cd, double seconds, int p2p) {
    pt_dist *d = (pt_dist *)cd;
    if (!d) return;
    pt__coll_lock(d);
    *(p2p ? &d->mon_blocked_p2p_s : &d->mon_blocked_s) += seconds;
    pt__coll_unlock(d);
}
/* monitor: MPI_Wait(all) on n requests of non-blocking calls (p2p: point-to-point ones), the wait
   counted as blocked time */
static int pt__coll_wait(const pt_dist *cd, int n, MPI_Request *req, int p2p) {
    pt_dist *d = (pt_dist *)cd;
    double t = MPI_Wtime();
    int rc = n == 1 ? MPI_Wait(req, MPI_STATUS_IGNORE) : MPI_Waitall(n, req, MPI_STATUSES_IGNORE);
    pt__coll_blocked(d, MPI_Wtime() - t, p2p);
    return rc;
}

/* Closes record s with MPI return code rc (PT__COLL_REFUSED: refused); returns rc. s = 0 (a refused
   call, already closed) or a record already overwritten by newer ones: nothing to do. */
static int pt__coll_end(const pt_dist *cd, uint64_t s, int rc) {
    pt_dist *d = (pt_dist *)cd;
    pt_coll_record *r, copy;
    int hit;
    if (!d || !s) return rc;
    pt__coll_lock(d);
    r = &d->ring[(s - 1) % PT_COLL_RING];
    if ((hit = r->seq == s) != 0) {
        int was = r->state;
        r->t_end = pt__coll_now(d);
        r->rc = rc;
        r->state = rc == MPI_SUCCESS ? PT_COLL_DONE : rc == PT__COLL_REFUSED ? PT_COLL_REFUSED : PT_COLL_FAILED;
        if (rc == MPI_SUCCESS && was == PT_COLL_IN_FLIGHT) pt__coll_tally(d, r); /* monitor */
        hit = was == PT_COLL_IN_FLIGHT; /* closed once: one trace event */
        copy = *r;
    }
    pt__coll_unlock(d);
    if (hit && d->coll_hook) d->coll_hook(d->coll_hook_user, &copy, 0);
    return rc;
}
/* Records the start of a call on communicator which (PT_COMM_*) of d; count elements of dtype,
   peer = root or peer rank in that communicator (-1 if none). Returns the record's number for
   pt__coll_end, or 0 when debug mode refused the call (do not make it). d may be const: the records
   are its only mutable part. A NULL d records nothing (returns 1). */
static uint64_t pt__coll_begin(const pt_dist *cd, int op, int which, int64_t count, int dtype, int peer) {
    pt_dist *d = (pt_dist *)cd;
    pt_coll_record *r, copy;
    uint64_t s;
    int coll = op != PT_COLL_SEND && op != PT_COLL_RECV && op != PT_COLL_ISEND && op != PT_COLL_IRECV;
    if (!d) return 1;
    pt__coll_lock(d);
    s = ++d->seq;
    r = &d->ring[(s - 1) % PT_COLL_RING];
    memset(r, 0, sizeof *r);
    r->seq = s;
    r->comm_seq = coll ? ++d->comm_seq[which] : 0;
    r->op = op, r->comm = which, r->count = count, r->dtype = dtype, r->peer = peer;
    r->step = d->step, r->micro_batch = d->micro_batch;
    r->t_start = pt__coll_now(d);
    r->t_end = -1.0;
    r->state = PT_COLL_IN_FLIGHT;
    copy = *r;
    pt__coll_unlock(d);
    if (d->coll_hook) d->coll_hook(d->coll_hook_user, &copy, 1);
    if (coll && d->check && !pt__coll_check(d, &copy)) {
        pt__coll_end(d, s, PT__COLL_REFUSED);
        return 0;
    }
    return s;
}
/* what went wrong with a call that returned rc: the refusal's message or MPI's error string */
static const char *pt__coll_why(const pt_dist *cd, int rc) {
    pt_dist *d = (pt_dist *)cd;
    char es[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (!d) return "an MPI call failed";
    if (rc == PT__COLL_REFUSED) return d->coll_err;
    es[0] = 0;
    if (MPI_Error_string(rc, es, &len) != MPI_SUCCESS) len = 0;
    es[len > 0 && len < MPI_MAX_ERROR_STRING ? len : 0] = 0;
    pt__msg(d->why, sizeof d->why, "MPI error %d: %s", rc, es);
    return d->why;
}

#ifdef PT__COLL_THREADS
static void *pt__coll_watchdog(void *arg) {
    pt_dist *d = (pt_dist *)arg;
    for (;;) {
        uint64_t n, i;
        const pt_coll_record *late = NULL;
        double now, dl;
        int ms;
        pt__coll_lock(d);
        if (d->wd_stop) {
            pt__coll_unlock(d);
            return NULL;
        }
        dl = d->deadline;
        now = pt__coll_now(d);
        n = PT__MIN(d->seq, (uint64_t)PT_COLL_RING);
        for (i = d->seq - n; i < d->seq && !late; i++) {
            const pt_coll_record *r = &d->ring[i % PT_COLL_RING];
            if (r->state == PT_COLL_IN_FLIGHT && now - r->t_start > dl) late = r;
        }
        if (late) {
            fprintf(stderr,
                    "ptrain watchdog: rank %d: %s of %lld %s on the %s communicator (call %llu, collective #%llu there, step %lld, "
                    "micro-batch %lld) has been in flight for %.1f s, longer than the deadline of %g s: a rank of that communicator is "
                    "stuck, much slower, or on another path. Aborting the job (MPI_Abort).\n",
                    d->rank, pt__coll_op_name(late->op), (long long)late->count, pt__coll_dtype_name(late->dtype), pt__coll_comm_name(late->comm),
                    (unsigned long long)late->seq, (unsigned long long)late->comm_seq, (long long)late->step, (long long)late->micro_batch,
                    now - late->t_start, dl);
            pt__coll_dump_locked(d, stderr);
            fflush(stderr);
            pt__coll_unlock(d);
            MPI_Abort(MPI_COMM_WORLD, 1);
            return NULL;
        }
        pt__coll_unlock(d);
        ms = (int)(dl * 100.0); /* a tenth of the deadline */
        poll(NULL, 0, ms < 10 ? 10 : ms > 200 ? 200 : ms);
    }
}
#endif
#endif /* PTRAIN_MPI */

PTDEF pt_status pt_dist_set_watchdog(pt_dist *d, double seconds) {
    if (!(seconds >= 0.0 && seconds <= 1e9)) return PT_ERR_ARG; /* also NaN */
    if (!d) return PT_OK;
#ifdef PT__COLL_THREADS
    pt__coll_lock(d);
    d->deadline = seconds;
    if (seconds > 0 && !d->wd_running) {
        d->wd_stop = 0;
        d->wd_running = pthread_create(&d->wd, NULL, pt__coll_watchdog, d) == 0;
        if (!d->wd_running) d->deadline = 0;
        pt__coll_unlock(d);
        return d->wd_running ? PT_OK : PT_ERR_STATE;
    }
    if (seconds == 0 && d->wd_running) {
        d->wd_stop = 1;
        pt__coll_unlock(d);
        pthread_join(d->wd, NULL);
        d->wd_running = 0;
        return PT_OK;
    }
    pt__coll_unlock(d);
    return PT_OK;
#elif defined(PTRAIN_MPI)
    return seconds > 0 ? PT_ERR_STATE : PT_OK; /* no threads on this platform */
#else
    d->deadline = seconds; /* a world of one never waits for another rank */
    return PT_OK;
#endif
}


/* ---- the pure layout functions ---------------------------------------------------------------- */
PTDEF pt_status pt_layout_resolve(pt_layout *l, int world, char *err, size_t errlen) {
    int zeros, known;
    double need;
    if (err && errlen) err[0] = 0;
    if (!l) {
        pt__msg(err, errlen, "pt_layout_resolve: NULL layout");
        return PT_ERR_ARG;
    }
    if (world < 1) {
        pt__msg(err, errlen, "world of %d ranks, expected >= 1", world);
        return PT_ERR_ARG;
    }
    if (l->dp < 0 || l->tp < 0 || l->pp < 0) {
        pt__msg(err, errlen, "layout dp=%d tp=%d pp=%d: a size is negative (sizes are >= 1, or 0 = the rest of the world)",
                     (int)l->dp, (int)l->tp, (int)l->pp);
        return PT_ERR_ARG;
    }
    zeros = (l->dp == 0) + (l->tp == 0) + (l->pp == 0);
    if (zeros == 3) { /* the zero-initialized layout: pure data parallelism */
        l->dp = world;
        l->tp = l->pp = 1;
        return PT_OK;
    }
    if (zeros == 2) {
        pt__msg(err, errlen, "layout dp=%d tp=%d pp=%d: two sizes are 0 (at most one may be 0 = the rest of the world)",
                     (int)l->dp, (int)l->tp, (int)l->pp);
        return PT_ERR_ARG;
    }
    need = (double)(l->dp ? l->dp : 1) * (double)(l->tp ? l->tp : 1) * (double)(l->pp ? l->pp : 1);
    if (zeros == 1) {
        if (need > (double)world || world % (int)need != 0) {
            pt__msg(err, errlen,
                         "layout dp=%d tp=%d pp=%d: the world of %d ranks does not divide by %.0f (the product of the other sizes)",
                         (int)l->dp, (int)l->tp, (int)l->pp, world, need);
            return PT_ERR_ARG;
        }
        known = world / (int)need;
        if (l->dp == 0) l->dp = known;
        else if (l->tp == 0) l->tp = known;
        else l->pp = known;
        return PT_OK;
    }
    if (need != (double)world) {
        pt__msg(err, errlen, "layout dp=%d tp=%d pp=%d needs %.0f ranks, the world has %d (set one size to 0 for the rest)",
                     (int)l->dp, (int)l->tp, (int)l->pp, need, world);
        return PT_ERR_ARG;
    }
    return PT_OK;
}

PTDEF pt_coords pt_layout_coords(const pt_layout *l, int rank) {
    pt_coords c;
    c.tp = c.pp = c.dp = -1;
    if (!l || l->dp < 1 || l->tp < 1 || l->pp < 1 || rank < 0) return c;
    if ((double)rank >= (double)l->dp * (double)l->tp * (double)l->pp) return c;
    c.tp = rank % l->tp;
    c.dp = (rank / l->tp) % l->dp;
    c.pp = rank / l->tp / l->dp;
    return c;
}

PTDEF int pt_layout_rank(const pt_layout *l, pt_coords c) {
    if (!l || l->dp < 1 || l->tp < 1 || l->pp < 1) return -1;
    if (c.tp < 0 || c.tp >= l->tp || c.dp < 0 || c.dp >= l->dp || c.pp < 0 || c.pp >= l->pp) return -1;
    return (int)(c.tp + l->tp * (c.dp + l->dp * c.pp));
}

/* ---- environment and CPUs --------------------------------------------------------------------- */
/* Environment variable name as a number in [lo, hi] (whole if whole): 0 when unset or empty, 1 with
   *v set, or -1 (message in msg naming the variable and what) when malformed. */
static int pt__dist_env(const char *name, double lo, double hi, int whole, const char *what, double *v, char *msg, size_t n) {
    const char *e = getenv(name);
    char *end = NULL;
    double x;
    if (!e || !*e) return 0;
    x = strtod(e, &end);
    if (!end || *end || !(x >= lo && x <= hi) || (whole && x != (double)(long)x)) {
        pt__msg(msg, n, "pt_dist_init: %s='%s', expected %s", name, e, what);
        return -1;
    }
    *v = x;
    return 1;
}
/* PTRAIN_FAKE_NODE_SIZE: 0 when unset or empty, N >= 1, or -1 (message in msg) when malformed. */
static int pt__dist_fake_node_size(char *msg, size_t n) {
    double v = 0;
    int k = pt__dist_env("PTRAIN_FAKE_NODE_SIZE", 1, 1e9, 1, "a whole number >= 1 (ranks per fake node)", &v, msg, n);
    return k < 0 ? -1 : (int)v;
}
/* PTRAIN_COLL_CHECK (0 or 1) and PTRAIN_WATCHDOG (seconds >= 0, 0 = off) into check and deadline;
   0 and the message in msg when one is malformed. */
static int pt__dist_coll_env(int *check, double *deadline, char *msg, size_t n) {
    double c = 0, w = 0;
    if (pt__dist_env("PTRAIN_COLL_CHECK", 0, 1, 1, "0 or 1 (1 = the ranks agree on every collective before it runs)", &c, msg, n) < 0)
        return 0;
    if (pt__dist_env("PTRAIN_WATCHDOG", 0, 1e9, 0, "seconds >= 0 (the deadline of a collective; 0 = off)", &w, msg, n) < 0) return 0;
    *check = (int)c;
    *deadline = w;
    return 1;
}

#if defined(__linux__) && defined(CPU_COUNT) && defined(CPU_AND)
#define PT__DIST_AFFINITY 1
#endif

/* CPUs this process may run on: its affinity mask where the platform tells. */
static int pt__dist_cpus(void) {
    int n = 0;
#if defined(PT__DIST_AFFINITY)
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) n = CPU_COUNT(&set);
#elif defined(_OPENMP)
    n = omp_get_num_procs();
#elif (defined(__unix__) || defined(__APPLE__)) && defined(_SC_NPROCESSORS_ONLN)
    n = (int)sysconf(_SC_NPROCESSORS_ONLN);
#endif
    return n > 0 ? n : 1;
}

/* PTRAIN_THREADS when set (> 0), else cpus / sharers, at least 1. */
static int pt__dist_threads_for(int cpus, int sharers) {
    const char *e = getenv("PTRAIN_THREADS");
    int t;
    if (e && atoi(e) > 0) return atoi(e);
    t = cpus / (sharers > 0 ? sharers : 1);
    return t > 0 ? t : 1;
}

/* Node indices of all ranks from each rank's node leader (lowest world rank of its node): nodes are
   numbered by their leaders. Returns 0 if the map is inconsistent. */
static int pt__dist_nodes_from_leaders(const int *leader, int *node_of, int *tmp, int size, int *nodes) {
    int r, n = 0;
    for (r = 0; r < size; r++) {
        if (leader[r] < 0 || leader[r] > r || leader[leader[r]] != leader[r]) return 0;
        if (leader[r] == r) tmp[r] = n++;
        node_of[r] = tmp[leader[r]];
    }
    *nodes = n;
    return 1;
}

/* node, local rank and local size of rank from node_of */
static void pt__dist_local(pt_dist *d) {
    int r;
    d->node = d->node_of[d->rank];
    d->local_rank = d->local_size = 0;
    for (r = 0; r < d->size; r++) {
        if (d->node_of[r] != d->node) continue;
        if (r < d->rank) d->local_rank++;
        d->local_size++;
    }
}

/* The TP group check: a group of tp consecutive ranks all on one node. Returns 1 if it fits (or
   crossing is allowed), else 0 with the message. */
static int pt__dist_tp_fits(const pt_dist *d, char *msg, size_t n) {
    int g, r, tp = d->layout.tp;
    if (d->layout.allow_tp_across_nodes) return 1;
    for (g = 0; g < d->size; g += tp) {
        for (r = g + 1; r < g + tp; r++) {
            if (d->node_of[r] != d->node_of[g]) {
                int node_size = 0, k;
                for (k = 0; k < d->size; k++) node_size += d->node_of[k] == d->node_of[g];
                pt__msg(msg, n,
                             "pt_dist_init: layout dp=%d tp=%d pp=%d on %d ranks: tp=%d does not fit in nodes of %d ranks: a "
                             "tensor-parallel group would cross nodes (ranks %d-%d span nodes %d and %d%s); set "
                             "allow_tp_across_nodes to force",
                             (int)d->layout.dp, tp, (int)d->layout.pp, d->size, tp, node_size, g, g + tp - 1, d->node_of[g],
                             d->node_of[r], d->fake_node_size ? ", faked by PTRAIN_FAKE_NODE_SIZE" : "");
                return 0;
            }
        }
    }
    return 1;
}

/* the records' part of a new grid (d zeroed): the mutex */
static void pt__dist_coll_setup(pt_dist *d) {
#ifdef PT__COLL_THREADS
    pthread_mutex_init(&d->mu, NULL);
#else
    (void)d;
#endif
}

static void pt__dist_free(pt_dist *d) {
    if (!d) return;
    pt_dist_set_watchdog(d, 0); /* joins the thread */
#ifdef PT__COLL_THREADS
    pthread_mutex_destroy(&d->mu);
#endif
    PT_FREE(d->check_buf);
    PT_FREE(d->node_of);
    PT_FREE(d);
}

#ifdef PTRAIN_MPI
/* ---- MPI ---------------------------------------------------------------------------------------- */
static void pt__dist_mpi_msg(char *msg, size_t n, const char *what, int rc) {
    char es[MPI_MAX_ERROR_STRING];
    int len = 0;
    es[0] = 0;
    if (MPI_Error_string(rc, es, &len) != MPI_SUCCESS) len = 0;
    es[len > 0 && len < MPI_MAX_ERROR_STRING ? len : 0] = 0;
    pt__msg(msg, n, "pt_dist_init: %s failed (error %d: %s)", what, rc, es);
}

/* The agreement: 1 if every rank of comm passed ok; else 0 and msg (PT__DIST_MSG bytes) holds the
   message of the lowest failing rank on every rank. rec: the grid whose world communicator comm
   is, recording the calls; NULL while pt_dist_init builds the grid (not recorded). */
static int pt__dist_agree_comm(const pt_dist *rec, MPI_Comm comm, int ok, char *msg) {
    int rank = 0, size = 1, v, first = 0, rc;
    uint64_t s;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    v = ok ? size : rank;
    s = pt__coll_begin(rec, PT_COLL_ALLREDUCE, PT_COMM_WORLD, 1, PT_COLL_I32, -1);
    rc = pt__coll_end(rec, s, s ? MPI_Allreduce(&v, &first, 1, MPI_INT, MPI_MIN, comm) : PT__COLL_REFUSED);
    if (rc != MPI_SUCCESS) {
        pt__msg(msg, PT__DIST_MSG, "pt_dist: the error agreement (MPI_Allreduce) failed: %s", pt__coll_why(rec, rc));
        return 0;
    }
    if (first >= size) return 1;
    s = pt__coll_begin(rec, PT_COLL_BCAST, PT_COMM_WORLD, PT__DIST_MSG, PT_COLL_CHAR, first);
    if (pt__coll_end(rec, s, s ? MPI_Bcast(msg, PT__DIST_MSG, MPI_CHAR, first, comm) : PT__COLL_REFUSED) != MPI_SUCCESS)
        pt__msg(msg, PT__DIST_MSG, "pt_dist: rank %d failed (its message could not be broadcast)", first);
    msg[PT__DIST_MSG - 1] = 0;
    return 0;
}

static const char *pt__dist_level_name(int level) {
    if (level == MPI_THREAD_MULTIPLE) return "MULTIPLE";
    if (level == MPI_THREAD_SERIALIZED) return "SERIALIZED";
    if (level == MPI_THREAD_FUNNELED) return "FUNNELED";
    if (level == MPI_THREAD_SINGLE) return "SINGLE";
    return "?";
}

/* Threads per rank: CPUs of my mask / ranks of my (real, shared-memory) node whose masks overlap it. */
static int pt__dist_mpi_threads(MPI_Comm shm) {
    int cpus = pt__dist_cpus(), n = 1, sharers;
#if defined(PT__DIST_AFFINITY)
    char msg[PT__DIST_MSG];
    cpu_set_t mine, both, *all;
    int i, ok;
    memset(msg, 0, sizeof msg);
    MPI_Comm_size(shm, &n);
    sharers = n;
    CPU_ZERO(&mine);
    ok = sched_getaffinity(0, sizeof mine, &mine) == 0;
    all = (cpu_set_t *)PT_MALLOC((size_t)n * sizeof(cpu_set_t));
    ok = ok && all != NULL;
    if (pt__dist_agree_comm(NULL, shm, ok, msg) &&
        MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE, shm) == MPI_SUCCESS) {
        sharers = 0;
        for (i = 0; i < n; i++) {
            CPU_AND(&both, &mine, &all[i]);
            sharers += CPU_COUNT(&both) > 0;
        }
    }
    PT_FREE(all);
#else
    MPI_Comm_size(shm, &n);
    sharers = n;
#endif
    return pt__dist_threads_for(cpus, sharers);
}

static void pt__dist_free_comms(pt_dist *d) {
    int i, fin = 0;
    MPI_Finalized(&fin);
    if (fin) return;
    for (i = 0; i < PT_COMM_COUNT; i++)
        if (d->comm[i] != MPI_COMM_NULL) MPI_Comm_free(&d->comm[i]);
}

PTDEF pt_dist *pt_dist_init(int *argc, char ***argv, const pt_layout *layout, char *err, size_t errlen) {
    char msg[PT__DIST_MSG];
    int inited = 0, fin = 0, owns = 0, provided = 0, rank = 0, size = 1, rc, ok, i, fake, nodes = 0, check = 0;
    int same[12], color[PT_COMM_COUNT], want_size[PT_COMM_COUNT], want_rank[PT_COMM_COUNT];
    int *leader = NULL, *tmp = NULL, my_leader;
    double deadline = 0;
    MPI_Comm world = MPI_COMM_NULL, shm = MPI_COMM_NULL;
    pt_dist *d = NULL;
    pt_layout l;
    const char *const *names = pt__dist_comm_names;

    memset(msg, 0, sizeof msg);
    if (err && errlen) err[0] = 0;
    MPI_Finalized(&fin);
    if (fin) {
        pt__msg(err, errlen, "pt_dist_init: MPI was already finalized");
        return NULL;
    }
    MPI_Initialized(&inited);
    if (!inited) {
        rc = MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
        if (rc != MPI_SUCCESS) {
            pt__dist_mpi_msg(err, errlen, "MPI_Init_thread", rc);
            return NULL;
        }
        owns = 1;
    } else {
        MPI_Query_thread(&provided);
    }
    rc = MPI_Comm_dup(MPI_COMM_WORLD, &world);
    if (rc != MPI_SUCCESS) {
        pt__dist_mpi_msg(err, errlen, "MPI_Comm_dup(MPI_COMM_WORLD)", rc);
        if (owns) MPI_Finalize();
        return NULL;
    }
    MPI_Comm_set_errhandler(world, MPI_ERRORS_RETURN);
    MPI_Comm_rank(world, &rank);
    MPI_Comm_size(world, &size);

    /* memory */
    d = (pt_dist *)PT_MALLOC(sizeof(pt_dist));
    if (d) {
        memset(d, 0, sizeof *d);
        for (i = 0; i < PT__COMM_ALL; i++) d->comm[i] = MPI_COMM_NULL;
        pt__dist_coll_setup(d);
        d->t0 = MPI_Wtime();
        d->node_of = (int *)PT_MALLOC((size_t)size * sizeof(int));
        d->check_buf = (int64_t *)PT_MALLOC((size_t)size * PT__COLL_NV * sizeof(int64_t));
    }
    leader = (int *)PT_MALLOC((size_t)size * sizeof(int));
    tmp = (int *)PT_MALLOC((size_t)size * sizeof(int));
    ok = d && d->node_of && d->check_buf && leader && tmp;
    if (!ok) pt__msg(msg, sizeof msg, "pt_dist_init: out of memory on rank %d", rank);
    if (!pt__dist_agree_comm(NULL, world, ok, msg)) goto fail;
    d->comm[PT_COMM_WORLD] = world;
    world = MPI_COMM_NULL;
    d->rank = rank;
    d->size = size;
    d->owns_mpi = owns;
    d->thread_level = provided;

    /* the layout: valid on every rank, and the same everywhere */
    memset(&l, 0, sizeof l);
    if (layout) l = *layout;
    l.allow_tp_across_nodes = l.allow_tp_across_nodes != 0;
    ok = pt_layout_resolve(&l, size, msg, sizeof msg) == PT_OK;
    if (!ok) {
        char m2[PT__DIST_MSG];
        memcpy(m2, msg, sizeof m2);
        pt__msg(msg, sizeof msg, "pt_dist_init: %s", m2);
    }
    if (!pt__dist_agree_comm(NULL, d->comm[PT_COMM_WORLD], ok, msg)) goto fail;
    fake = pt__dist_fake_node_size(msg, sizeof msg);
    if (!pt__dist_agree_comm(NULL, d->comm[PT_COMM_WORLD], fake >= 0, msg)) goto fail;
    if (!pt__dist_agree_comm(NULL, d->comm[PT_COMM_WORLD], pt__dist_coll_env(&check, &deadline, msg, sizeof msg), msg)) goto fail;
    same[0] = l.dp, same[1] = l.tp, same[2] = l.pp, same[3] = l.allow_tp_across_nodes, same[4] = fake, same[5] = check;
    for (i = 0; i < 6; i++) same[6 + i] = -same[i];
    rc = MPI_Allreduce(MPI_IN_PLACE, same, 12, MPI_INT, MPI_MIN, d->comm[PT_COMM_WORLD]);
    if (rc != MPI_SUCCESS) pt__dist_mpi_msg(msg, sizeof msg, "MPI_Allreduce (layout check)", rc);
    if (!pt__dist_agree_comm(NULL, d->comm[PT_COMM_WORLD], rc == MPI_SUCCESS, msg)) goto fail;
    if (same[0] != -same[6] || same[1] != -same[7] || same[2] != -same[8] || same[3] != -same[9]) {
        pt__msg(msg, sizeof msg,
                     "pt_dist_init: the ranks passed different layouts (resolved dp %d..%d, tp %d..%d, pp %d..%d, "
                     "allow_tp_across_nodes %d..%d)",
                     same[0], -same[6], same[1], -same[7], same[2], -same[8], same[3], -same[9]);
        goto fail; /* every rank saw the same reduction: every rank is here, with the same message */
    }
    if (same[4] != -same[10] || same[5] != -same[11]) {
        pt__msg(msg, sizeof msg, "pt_dist_init: %s differs between ranks (%d..%d; 0 = unset)",
                same[4] != -same[10] ? "PTRAIN_FAKE_NODE_SIZE" : "PTRAIN_COLL_CHECK", same[4] != -same[10] ? same[4] : same[5],
                same[4] != -same[10] ? -same[10] : -same[11]);
        goto fail;
    }
    d->layout = l;
    d->coords = pt_layout_coords(&l, rank);

    /* nodes: real ones from MPI_Comm_split_type(SHARED), or fake ones of N consecutive ranks */
    d->fake_node_size = fake;
    rc = MPI_Comm_split_type(d->comm[PT_COMM_WORLD], MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &shm);
    my_leader = rank;
    if (rc == MPI_SUCCESS) rc = MPI_Allreduce(&rank, &my_leader, 1, MPI_INT, MPI_MIN, shm);
    if (rc != MPI_SUCCESS) pt__dist_mpi_msg(msg, sizeof msg, "MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)", rc);
    if (!pt__dist_agree_comm(NULL, d->comm[PT_COMM_WORLD], rc == MPI_SUCCESS, msg)) goto fail;
    if (fake > 0) my_leader = rank - rank % fake;
    rc = MPI_Allgather(&my_leader, 1, MPI_INT, leader, 1, MPI_INT, d->comm[PT_COMM_WORLD]);
    if (rc != MPI_SUCCESS) pt__dist_mpi_msg(msg, sizeof msg, "MPI_Allgather (node map)", rc);
    if (!pt__dist_agree_comm(NULL, d->comm[PT_COMM_WORLD], rc == MPI_SUCCESS, msg)) goto fail;
    if (!pt__dist_nodes_from_leaders(leader, d->node_of, tmp, size, &nodes)) {
        pt__msg(msg, sizeof msg, "pt_dist_init: the ranks disagree on the nodes (is PTRAIN_FAKE_NODE_SIZE the same on every rank?)");
        goto fail; /* every rank gathered the same map, so every rank is here */
    }
    d->nodes = nodes;
    pt__dist_local(d);
    if (!pt__dist_tp_fits(d, msg, sizeof msg)) goto fail; /* same map and layout everywhere: same verdict */

    /* the communicators; every split is called on every rank, the verdict comes after */
    color[PT_COMM_TP] = d->coords.dp + l.dp * d->coords.pp;
    color[PT_COMM_PP] = d->coords.tp + l.tp * d->coords.dp;
    color[PT_COMM_DP] = d->coords.tp + l.tp * d->coords.pp;
    color[PT_COMM_NODE] = d->node;
    color[PT_COMM_CROSS] = d->local_rank;
    want_size[PT_COMM_WORLD] = size, want_rank[PT_COMM_WORLD] = rank;
    want_size[PT_COMM_TP] = l.tp, want_rank[PT_COMM_TP] = d->coords.tp;
    want_size[PT_COMM_PP] = l.pp, want_rank[PT_COMM_PP] = d->coords.pp;
    want_size[PT_COMM_DP] = l.dp, want_rank[PT_COMM_DP] = d->coords.dp;
    want_size[PT_COMM_NODE] = d->local_size, want_rank[PT_COMM_NODE] = d->local_rank;
    /* cross-node: one rank per node that has a rank with my local rank; tmp = node sizes */
    for (i = 0; i < nodes; i++) tmp[i] = 0;
    for (i = 0; i < size; i++) tmp[d->node_of[i]]++;
    want_size[PT_COMM_CROSS] = want_rank[PT_COMM_CROSS] = 0;
    for (i = 0; i < nodes; i++) {
        if (tmp[i] <= d->local_rank) continue;
        want_size[PT_COMM_CROSS]++;
        if (i < d->node) want_rank[PT_COMM_CROSS]++;
    }
    ok = 1;
    for (i = PT_COMM_TP; i < PT_COMM_COUNT; i++) {
        rc = MPI_Comm_split(d->comm[PT_COMM_WORLD], color[i], rank, &d->comm[i]);
        if (rc != MPI_SUCCESS && ok) {
            char what[64];
            pt__msg(what, sizeof what, "MPI_Comm_split (%s communicator)", names[i]);
            pt__dist_mpi_msg(msg, sizeof msg, what, rc);
            ok = 0;
        }
    }
    for (i = 0; ok && i < PT_COMM_COUNT; i++) {
        int s = -1, r = -1;
        MPI_Comm_size(d->comm[i], &s);
        MPI_Comm_rank(d->comm[i], &r);
        if (s != want_size[i] || r != want_rank[i]) {
            pt__msg(msg, sizeof msg, "pt_dist_init: rank %d: the %s communicator has size %d and rank %d, expected %d and %d",
                         rank, names[i], s, r, want_size[i], want_rank[i]);
            ok = 0;
        }
    }
    if (!pt__dist_agree_comm(NULL, d->comm[PT_COMM_WORLD], ok, msg)) goto fail;

    /* the records start here: debug mode and the watchdog */
    d->check = check;
    ok = pt_dist_set_watchdog(d, deadline) == PT_OK;
    if (!ok) pt__msg(msg, sizeof msg, "pt_dist_init: rank %d could not start the watchdog thread (PTRAIN_WATCHDOG=%g)", rank, deadline);
    if (!pt__dist_agree_comm(NULL, d->comm[PT_COMM_WORLD], ok, msg)) goto fail;

    d->threads = pt__dist_mpi_threads(shm);
    MPI_Comm_free(&shm);
    PT_FREE(leader);
    PT_FREE(tmp);
    return d;

fail:
    if (shm != MPI_COMM_NULL) MPI_Comm_free(&shm);
    if (world != MPI_COMM_NULL) MPI_Comm_free(&world);
    if (d) {
        pt__dist_free_comms(d);
        pt__dist_free(d);
    }
    PT_FREE(leader);
    PT_FREE(tmp);
    if (owns) MPI_Finalize();
    pt__msg(err, errlen, "%s", msg);
    return NULL;
}

PTDEF void pt_dist_finalize(pt_dist *d) {
    int fin = 0, owns;
    if (!d) return;
    owns = d->owns_mpi;
    pt__dist_free_comms(d);
    pt__dist_free(d);
    MPI_Finalized(&fin);
    if (owns && !fin) MPI_Finalize();
}

PTDEF int pt_dist_agree(const pt_dist *d, int ok) {
    int in = ok != 0, out = 0;
    uint64_t s;
    if (!d) return in;
    s = pt__coll_begin(d, PT_COLL_ALLREDUCE, PT_COMM_WORLD, 1, PT_COLL_I32, -1);
    if (pt__coll_end(d, s, s ? MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_MIN, d->comm[PT_COMM_WORLD]) : PT__COLL_REFUSED) != MPI_SUCCESS) return 0;
    return out;
}

PTDEF pt_status pt_dist_set_coll_check(pt_dist *d, int on) {
    int v[2];
    uint64_t s;
    if (!d) return PT_OK;
    v[0] = on != 0, v[1] = -(on != 0);
    s = pt__coll_begin(d, PT_COLL_ALLREDUCE, PT_COMM_WORLD, 2, PT_COLL_I32, -1);
    if (pt__coll_end(d, s, s ? MPI_Allreduce(MPI_IN_PLACE, v, 2, MPI_INT, MPI_MIN, d->comm[PT_COMM_WORLD]) : PT__COLL_REFUSED) != MPI_SUCCESS)
        return PT_ERR_STATE;
    if (v[0] != -v[1]) return PT_ERR_ARG; /* the same verdict on every rank */
    d->check = v[0];
    return PT_OK;
}

PTDEF int pt_dist_agree_msg(const pt_dist *d, int ok, char *err, size_t errlen) {
    char msg[PT__DIST_MSG];
    if (!d) return ok != 0;
    memset(msg, 0, sizeof msg);
    if (!ok && err && errlen) pt__msg(msg, sizeof msg, "%s", err);
    if (pt__dist_agree_comm(d, d->comm[PT_COMM_WORLD], ok != 0, msg)) return 1;
    pt__msg(err, errlen, "%s", msg);
    return 0;
}

PTDEF void *pt_dist_comm(const pt_dist *d, int which) {
    if (!d || which < 0 || which >= PT_COMM_COUNT) return NULL;
    return (void *)&d->comm[which];
}

static void pt__dist_host(char *host) {
    char name[MPI_MAX_PROCESSOR_NAME];
    int len = 0;
    memset(name, 0, sizeof name);
    if (MPI_Get_processor_name(name, &len) != MPI_SUCCESS || len <= 0) pt__msg(name, sizeof name, "?");
    pt__msg(host, PT__DIST_HOST, "%s", name);
}
#else /* !PTRAIN_MPI: a world of one rank */

PTDEF pt_dist *pt_dist_init(int *argc, char ***argv, const pt_layout *layout, char *err, size_t errlen) {
    char msg[PT__DIST_MSG];
    pt_dist *d;
    pt_layout l;
    int fake, leader, tmp, check = 0;
    double deadline = 0;
    (void)argc;
    (void)argv;
    if (err && errlen) err[0] = 0;
    memset(&l, 0, sizeof l);
    if (layout) l = *layout;
    l.allow_tp_across_nodes = l.allow_tp_across_nodes != 0;
    if (pt_layout_resolve(&l, 1, msg, sizeof msg) != PT_OK) {
        pt__msg(err, errlen, "pt_dist_init: %s (built without PTRAIN_MPI: a world of one rank)", msg);
        return NULL;
    }
    fake = pt__dist_fake_node_size(msg, sizeof msg);
    if (fake < 0 || !pt__dist_coll_env(&check, &deadline, msg, sizeof msg)) {
        pt__msg(err, errlen, "%s", msg);
        return NULL;
    }
    d = (pt_dist *)PT_MALLOC(sizeof(pt_dist));
    if (d) {
        memset(d, 0, sizeof *d);
        pt__dist_coll_setup(d);
        d->node_of = (int *)PT_MALLOC(sizeof(int));
    }
    if (!d || !d->node_of) {
        pt__dist_free(d);
        pt__msg(err, errlen, "pt_dist_init: out of memory");
        return NULL;
    }
    d->size = 1;
    d->layout = l;
    d->coords = pt_layout_coords(&l, 0);
    d->fake_node_size = fake;
    leader = tmp = 0; /* the same path as with MPI, for one rank */
    if (!pt__dist_nodes_from_leaders(&leader, d->node_of, &tmp, 1, &d->nodes)) d->nodes = 1;
    pt__dist_local(d);
    if (!pt__dist_tp_fits(d, msg, sizeof msg)) { /* cannot happen with tp = 1 */
        pt__dist_free(d);
        pt__msg(err, errlen, "%s", msg);
        return NULL;
    }
    d->threads = pt__dist_threads_for(pt__dist_cpus(), 1);
    d->check = check;
    d->deadline = deadline;
    return d;
}
PTDEF void pt_dist_finalize(pt_dist *d) { pt__dist_free(d); }
PTDEF pt_status pt_dist_set_coll_check(pt_dist *d, int on) {
    if (d) d->check = on != 0; /* a world of one: nothing to disagree with */
    return PT_OK;
}
PTDEF int pt_dist_agree(const pt_dist *d, int ok) {
    (void)d;
    return ok != 0;
}
PTDEF int pt_dist_agree_msg(const pt_dist *d, int ok, char *err, size_t errlen) {
    (void)d;
    (void)err;
    (void)errlen;
    return ok != 0;
}
PTDEF void *pt_dist_comm(const pt_dist *d, int which) {
    (void)d;
    (void)which;
    return NULL;
}
static void pt__dist_host(char *host) { pt__msg(host, PT__DIST_HOST, "%s", "local"); }
#endif /* PTRAIN_MPI */

/* ---- accessors (a NULL grid is a world of one rank) ------------------------------------------- */
PTDEF int pt_dist_rank(const pt_dist *d) { return d ? d->rank : 0; }
PTDEF int pt_dist_size(const pt_dist *d) { return d ? d->size : 1; }
PTDEF pt_coords pt_dist_coords(const pt_dist *d) {
    pt_coords c;
    if (d) return d->coords;
    c.tp = c.pp = c.dp = 0;
    return c;
}
PTDEF pt_layout pt_dist_layout(const pt_dist *d) {
    pt_layout l;
    if (d) return d->layout;
    l.dp = l.tp = l.pp = 1;
    l.allow_tp_across_nodes = 0;
    return l;
}
PTDEF int pt_dist_local_rank(const pt_dist *d) { return d ? d->local_rank : 0; }
PTDEF int pt_dist_local_size(const pt_dist *d) { return d ? d->local_size : 1; }
PTDEF int pt_dist_node(const pt_dist *d) { return d ? d->node : 0; }
PTDEF int pt_dist_nodes(const pt_dist *d) { return d ? d->nodes : 1; }
PTDEF int pt_dist_node_of(const pt_dist *d, int rank) {
    if (!d) return rank == 0 ? 0 : -1;
    return rank >= 0 && rank < d->size ? d->node_of[rank] : -1;
}
PTDEF int pt_dist_threads(const pt_dist *d) { return d ? d->threads : pt__dist_threads_for(pt__dist_cpus(), 1); }
PTDEF int pt_dist_mpi_thread_level(const pt_dist *d) { return d ? d->thread_level : 0; }

/* ---- the printed grid ------------------------------------------------------------------------- */
#define PT__DIST_ROW 8 /* rank, node, local rank, local size, tp, pp, dp, threads */
PTDEF void pt_dist_print(const pt_dist *d, void *file) {
    FILE *f = file ? (FILE *)file : stdout;
    int row[PT__DIST_ROW], *rows = NULL, size = pt_dist_size(d), rank = pt_dist_rank(d), i, ok;
    char host[PT__DIST_HOST], *hosts = NULL;
    pt_layout l = pt_dist_layout(d);
    pt_coords c = pt_dist_coords(d);
    memset(host, 0, sizeof host);
    pt__dist_host(host);
    row[0] = rank, row[1] = pt_dist_node(d), row[2] = pt_dist_local_rank(d), row[3] = pt_dist_local_size(d);
    row[4] = c.tp, row[5] = c.pp, row[6] = c.dp, row[7] = pt_dist_threads(d);
    if (rank == 0) {
        rows = (int *)PT_MALLOC((size_t)size * sizeof row);
        hosts = (char *)PT_MALLOC((size_t)size * PT__DIST_HOST);
    }
    ok = rank != 0 || (rows && hosts);
    if (!pt_dist_agree(d, ok)) {
        if (rank == 0) fprintf(f, "pt_dist_print: out of memory\n");
        PT_FREE(rows);
        PT_FREE(hosts);
        return;
    }
#ifdef PTRAIN_MPI
    if (d) {
        MPI_Comm w = d->comm[PT_COMM_WORLD];
        uint64_t s = pt__coll_begin(d, PT_COLL_GATHER, PT_COMM_WORLD, PT__DIST_ROW, PT_COLL_I32, 0);
        ok = pt__coll_end(d, s, s ? MPI_Gather(row, PT__DIST_ROW, MPI_INT, rows, PT__DIST_ROW, MPI_INT, 0, w) : PT__COLL_REFUSED) == MPI_SUCCESS;
        s = ok ? pt__coll_begin(d, PT_COLL_GATHER, PT_COMM_WORLD, PT__DIST_HOST, PT_COLL_CHAR, 0) : 0;
        ok = ok && pt__coll_end(d, s, s ? MPI_Gather(host, PT__DIST_HOST, MPI_CHAR, hosts, PT__DIST_HOST, MPI_CHAR, 0, w) : PT__COLL_REFUSED) == MPI_SUCCESS;
    } else
#endif
    {
        memcpy(rows, row, sizeof row);
        memcpy(hosts, host, PT__DIST_HOST);
        ok = 1;
    }
    if (rank == 0) {
        if (!ok) {
            fprintf(f, "pt_dist_print: gathering the rows failed%s%s\n", d && d->coll_err[0] ? ": " : "", d ? d->coll_err : "");
        } else {
            fprintf(f, "grid: %d ranks = dp %d x tp %d x pp %d (rank = tp + %d*(dp + %d*pp): tp innermost), %d node%s", size,
                    (int)l.dp, (int)l.tp, (int)l.pp, (int)l.tp, (int)l.dp, pt_dist_nodes(d), pt_dist_nodes(d) == 1 ? "" : "s");
            if (d && d->fake_node_size) fprintf(f, " (fake: PTRAIN_FAKE_NODE_SIZE=%d)", d->fake_node_size);
            if (l.allow_tp_across_nodes) fprintf(f, ", tp across nodes allowed");
#ifdef PTRAIN_MPI
            if (d) fprintf(f, ", MPI thread level %s", pt__dist_level_name(d->thread_level));
#else
            fprintf(f, ", no MPI");
#endif
            fprintf(f, "\n rank  node local   tp   pp   dp threads host\n");
            for (i = 0; i < size; i++) {
                const int *r = rows + (size_t)i * PT__DIST_ROW;
                hosts[(size_t)i * PT__DIST_HOST + PT__DIST_HOST - 1] = 0;
                fprintf(f, "%5d %5d %5d %4d %4d %4d %7d %s\n", r[0], r[1], r[2], r[4], r[5], r[6], r[7],
                        hosts + (size_t)i * PT__DIST_HOST);
            }
        }
        fflush(f);
    }
    PT_FREE(rows);
    PT_FREE(hosts);
}

// >>backend  the kernel table a device backend supplies; element sizes; host <-> device transfer counts
/* Owns: pt__backend (one function pointer per kernel), pt_numel / pt_dtype_size, the transfer
   counters, the scratch sizes of the CPU attention kernels, the counting backend (pt__count_backend)
   Invariants: an op never dereferences device memory: it calls through the table; adding a kernel =
   one table entry + a CPU and an OpenCL implementation + a test against the CPU (+ a counting one
   that does nothing, or takes the CPU kernel's pt__work scratch)
   Entry points: pt__backend pt_numel pt_dtype_size pt_backend_name pt_transfer_stats pt__count_backend */
/* the kernel table every op goes through
   An op (see ops) checks shapes, allocates its result and records itself on the tape; the numbers are
   computed by the kernels of ctx->be. The CPU backend (see cpu) is the reference; a device backend
   supplies the same table over its own buffers, so no op changes meaning or tape when it plugs in.
   Conventions for every kernel:
   - tensors are contiguous views: data at (storage, element offset t->off), numel elements;
   - "accumulate" kernels (names ending in _bwd, or with an accumulate flag set) ADD into dst;
   - results never depend on the number of threads: each output element is computed by one thread
     in a fixed order; reductions use fixed chunks combined in a fixed order (no float atomics,
     no OpenMP reduction clauses). */

enum { PT__ADD = 0, PT__SUB, PT__MUL };
enum { PT__RELU = 0, PT__GELU };

typedef struct pt__backend {
    const char *name;
    /* ---- storage ---- */
    pt_status (*st_alloc)(pt_ctx *ctx, pt_storage *st, int64_t bytes); /* st->bytes = bytes */
    void (*st_free)(pt_ctx *ctx, pt_storage *st);
    void (*write)(pt_ctx *ctx, const pt_tensor *dst, const void *src, int64_t bytes);
    void (*read)(pt_ctx *ctx, const pt_tensor *src, void *dst, int64_t bytes);
    /* read without waiting: starts the copy (counted like read) and returns its handle, or NULL when it
       is already done (or failed: the error is in ctx); dst must stay untouched until read_wait(h)
       returned 1, which releases h. read_wait: 1 when done, 0 while running (block: waits). */
    void *(*read_start)(pt_ctx *ctx, const pt_tensor *src, void *dst, int64_t bytes);
    int (*read_wait)(pt_ctx *ctx, void *h, int block);
    /* ---- elementwise (n = numel of the first tensor argument unless said) ---- */
    /* t[i] = v (f32), or (int32_t)v for an i32 tensor */
    void (*fill)(pt_ctx *ctx, const pt_tensor *t, float v);
    /* dst[i] (+)= src[i], same numel, same dtype (f32 or i32) */
    void (*copy)(pt_ctx *ctx, const pt_tensor *dst, const pt_tensor *src, int accumulate);
    /* out[i] = a[i] op b[i % nb]; nb = numel(b) divides numel(a) = numel(out); out may alias a */
    void (*binary)(pt_ctx *ctx, int op, const pt_tensor *out, const pt_tensor *a, const pt_tensor *b);
    /* dst += alpha * src when numel equal; when nd = numel(dst) < ns = numel(src) (nd divides ns):
       dst[j] += alpha * sum over r = 0.. of src[r*nd + j], rows summed in increasing r */
    void (*axpy_reduce)(pt_ctx *ctx, const pt_tensor *dst, const pt_tensor *src, float alpha);
    /* dst += x * y, n = numel(x); y repeats (index i % ny); dst is n elements, or nd < n elements
       receiving the row sums: dst[j] += sum over r of x[r*nd+j] * y[(r*nd+j) % ny] in increasing r */
    void (*mul_acc)(pt_ctx *ctx, const pt_tensor *dst, const pt_tensor *x, const pt_tensor *y);
    /* out[i] = s * x[i]; out may alias x */
    void (*scale)(pt_ctx *ctx, const pt_tensor *out, const pt_tensor *x, float s);
    /* out = f(x), f = relu or gelu (tanh form: 0.5x(1+tanh(sqrt(2/pi)(x+0.044715x^3)))) */
    void (*act_fwd)(pt_ctx *ctx, int kind, const pt_tensor *out, const pt_tensor *x);
    /* dx += f'(x) * dy */
    void (*act_bwd)(pt_ctx *ctx, int kind, const pt_tensor *dx, const pt_tensor *x, const pt_tensor *dy);
    /* inverted dropout, used for forward and backward alike: out[i] (+)= keep_i ? x[i]/(1-p) : 0 with
       keep_i = (pt__unit(key, base + i) > p); p in [0, 1) */
    void (*dropout)(pt_ctx *ctx, const pt_tensor *out, const pt_tensor *x, float p, uint64_t key, int64_t base,
                    int accumulate);
    /* ---- row-wise (a tensor seen as [rows, cols], cols = last dim) ---- */
    /* y = softmax(x) or log_softmax(x) per row */
    void (*softmax_fwd)(pt_ctx *ctx, const pt_tensor *y, const pt_tensor *x, int log);
    /* dx += y*(dy - sum(dy*y)) (softmax), dx += dy - exp(y)*sum(dy) (log-softmax; y is the output) */
    void (*softmax_bwd)(pt_ctx *ctx, const pt_tensor *dx, const pt_tensor *y, const pt_tensor *dy, int log);
    /* logits [rows, V], targets i32 [rows]: lse[r] = logsumexp(logits[r, 0:nvalid]);
       loss_rows[r] = lse[r] - logits[r, targets[r]], or 0 when targets[r] == ignore */
    void (*xent_fwd)(pt_ctx *ctx, const pt_tensor *loss_rows, const pt_tensor *lse, const pt_tensor *logits,
                     const pt_tensor *targets, int32_t ignore, int64_t nvalid);
    /* dlogits[r, c] += g * (exp(logits[r,c] - lse[r]) - (c == targets[r])) for c < nvalid, rows whose
       target != ignore; g = dloss[0] * scale (dloss: a one-element tensor). overwrite: dlogits is set
       instead (0 for ignored rows and for c >= nvalid) and may be logits itself (in place) */
    void (*xent_bwd)(pt_ctx *ctx, const pt_tensor *dlogits, const pt_tensor *logits, const pt_tensor *lse,
                     const pt_tensor *targets, int32_t ignore, int64_t nvalid, const pt_tensor *dloss, float scale,
                     int overwrite);
    /* y = (x - mean) * rstd * w + b per row (b may be NULL); saves mean[r], rstd[r] */
    void (*layernorm_fwd)(pt_ctx *ctx, const pt_tensor *y, const pt_tensor *mean, const pt_tensor *rstd,
                          const pt_tensor *x, const pt_tensor *w, const pt_tensor *b, float eps);
    /* accumulates dx, dw, db (each may be NULL = not needed) */
    void (*layernorm_bwd)(pt_ctx *ctx, const pt_tensor *dx, const pt_tensor *dw, const pt_tensor *db,
                          const pt_tensor *dy, const pt_tensor *x, const pt_tensor *w, const pt_tensor *mean,
                          const pt_tensor *rstd);
    /* out[i, :] = table[ids[i], :], table [V, C], ids i32 (checked: < V); ids[i] < 0 gives a zero row */
    void (*embed_fwd)(pt_ctx *ctx, const pt_tensor *out, const pt_tensor *table, const pt_tensor *ids);
    /* dtable[ids[i], :] += dout[i, :], summed in increasing i; ids[i] < 0 are skipped */
    void (*embed_bwd)(pt_ctx *ctx, const pt_tensor *dtable, const pt_tensor *dout, const pt_tensor *ids);
    /* causal self-attention, qkv [B, T, 3C] -> out [B, T, C]; head h of q is columns
       [h*hs, (h+1)*hs) of the first C, k and v likewise in the second and third C; scale 1/sqrt(hs);
       lse [B, H, T] receives each query row's logsumexp (for the backward) */
    void (*attn_fwd)(pt_ctx *ctx, const pt_tensor *out, const pt_tensor *lse, const pt_tensor *qkv, int B, int T,
                     int C, int H);
    /* accumulates dqkv [B, T, 3C] from dout [B, T, C] */
    void (*attn_bwd)(pt_ctx *ctx, const pt_tensor *dqkv, const pt_tensor *dout, const pt_tensor *qkv,
                     const pt_tensor *out, const pt_tensor *lse, int B, int T, int C, int H);
    /* ---- layout ---- */
    /* dst (+)= src permuted: dst dim i is src dim perm[i]; ndim = src->ndim */
    void (*permute)(pt_ctx *ctx, const pt_tensor *dst, const pt_tensor *src, const int *perm, int accumulate);
    /* both seen as [outer, dim, inner]: dst[o, dst_start + i, :] (+)= src[o, src_start + i, :], i < count */
    void (*copy_block)(pt_ctx *ctx, const pt_tensor *dst, int64_t dst_dim, int64_t dst_start, const pt_tensor *src,
                       int64_t src_dim, int64_t src_start, int64_t count, int64_t outer, int64_t inner,
                       int accumulate);
    /* out[0] = scale * sum(x), in fixed chunks combined in a fixed order (double accumulation) */
    void (*sum)(pt_ctx *ctx, const pt_tensor *out, const pt_tensor *x, float scale);
    /* ---- matrix products (row-major; see pt__sgemm) ---- */
    void (*gemm)(pt_ctx *ctx, int ta, int tb, int64_t batch, int64_t M, int64_t N, int64_t K, float alpha,
                 const pt_tensor *A, int64_t lda, int64_t sa, const pt_tensor *B, int64_t ldb, int64_t sb,
                 float beta, const pt_tensor *C, int64_t ldc, int64_t sc);
    /* ---- images ---- */
    /* x [N, C, H, W] -> cols [N, C*k*k, Ho*Wo] (zero padding) */
    void (*im2col)(pt_ctx *ctx, const pt_tensor *cols, const pt_tensor *x, int N, int C, int H, int W, int k,
                   int stride, int pad, int Ho, int Wo);
    /* dx += the adjoint of im2col applied to dcols (deterministic: each dx element gathered by one thread) */
    void (*col2im)(pt_ctx *ctx, const pt_tensor *dx, const pt_tensor *dcols, int N, int C, int H, int W, int k,
                   int stride, int pad, int Ho, int Wo);
    /* out[n, c, s] += b[c] over S = spatial size */
    void (*chan_bias_fwd)(pt_ctx *ctx, const pt_tensor *out, const pt_tensor *b, int N, int C, int64_t S);
    /* db[c] += sum over n, s of dout[n, c, s] */
    void (*chan_bias_bwd)(pt_ctx *ctx, const pt_tensor *db, const pt_tensor *dout, int N, int C, int64_t S);
    /* out [N, C, Ho, Wo] = window max; idx (i32) = flat input index (within the plane) of the max */
    void (*maxpool_fwd)(pt_ctx *ctx, const pt_tensor *out, const pt_tensor *idx, const pt_tensor *x, int N, int C,
                        int H, int W, int k, int stride, int Ho, int Wo);
    /* dx[n, c, idx] += dout[n, c, o] (each plane by one thread, in increasing o) */
    void (*maxpool_bwd)(pt_ctx *ctx, const pt_tensor *dx, const pt_tensor *dout, const pt_tensor *idx, int N, int C,
                        int H, int W, int Ho, int Wo);
    /* ---- optimizers over n elements of slabs (p, g, m, v at each tensor's offset) ---- */
    /* g' = g * gscale; m = b1 m + (1-b1) g'; v = b2 v + (1-b2) g'^2;
       p -= lr * ((m / bc1) / (sqrt(v / bc2) + eps) + wd * p) */
    void (*adamw)(pt_ctx *ctx, const pt_tensor *p, const pt_tensor *g, const pt_tensor *m, const pt_tensor *v,
                  int64_t n, float lr, float b1, float b2, float eps, float wd, float bc1, float bc2, float gscale);
    /* g' = g * gscale + wd * p; mom = momentum * mom + g' (mom may be NULL when momentum == 0);
       p -= lr * (momentum ? mom : g') */
    void (*sgd)(pt_ctx *ctx, const pt_tensor *p, const pt_tensor *g, const pt_tensor *mom, int64_t n, float lr,
                float momentum, float wd, float gscale);
    /* sum of squares of n elements, fixed chunks, double */
    double (*sumsq)(pt_ctx *ctx, const pt_tensor *x, int64_t n);
} pt__backend;

#define PT__F(t) ((float *)(t)->st->host + (t)->off)
#define PT__I(t) ((int32_t *)(t)->st->host + (t)->off)

/* Scratch floats for kernels, grown only (so the steady state does not allocate). Call outside
   parallel regions; the pointer is valid until the next call. */
static float *pt__work(pt_ctx *ctx, int64_t nfloats) {
    if (nfloats > ctx->work_cap) {
        float *p = (float *)pt__malloc(ctx, (size_t)nfloats * sizeof(float) + PT__ALIGN);
        if (!p) return (float *)pt__fail(ctx, PT_ERR_OOM, "pt: out of memory for %lld scratch floats", (long long)nfloats);
        if (ctx->work) PT_FREE(ctx->work);
        pt__mem_add(ctx, PT__MEM_WORK, (nfloats - ctx->work_cap) * (int64_t)sizeof(float));
        ctx->work = p;
        ctx->work_cap = nfloats;
    }
    return (float *)(((uintptr_t)ctx->work + PT__ALIGN - 1) & ~(uintptr_t)(PT__ALIGN - 1));
}
/* ---- transfer accounting (pt_transfers) -------------------------------------------------------
   A device backend counts every host <-> device copy (pt__xfer_count, opencl); code that moves data for a
   purpose other than user I/O brackets it: `int k = pt__xfer_as(ctx, PT_XFER_DP); ...;
   pt__xfer_as(ctx, k);`. */
static int pt__xfer_as(pt_ctx *ctx, int kind) {
    int old = ctx->xfer_kind;
    ctx->xfer_kind = kind;
    return old;
}
PTDEF pt_transfers pt_transfer_stats(const pt_ctx *ctx) {
    pt_transfers x;
    if (ctx) return ctx->xfer;
    memset(&x, 0, sizeof x);
    return x;
}
PTDEF void pt_transfer_reset(pt_ctx *ctx) {
    if (ctx) memset(&ctx->xfer, 0, sizeof ctx->xfer);
}
PTDEF const char *pt_xfer_kind_name(int kind) {
    static const char *names[PT_XFER_KINDS] = {"io", "param", "check", "scalar", "dp", "tp", "pp", "ckpt"};
    return (unsigned)kind < PT_XFER_KINDS ? names[kind] : "?";
}

PTDEF int64_t pt_dtype_size(pt_dtype dt) {
    switch (dt) {
    case PT_F32: case PT_I32: return 4;
    case PT_BF16: case PT_F16: return 2;
    case PT_I8: return 1;
    default: return 0;
    }
}
PTDEF int64_t pt_numel(const pt_tensor *t) {
    int64_t n = 1;
    int i;
    if (!t) return 0;
    for (i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}
PTDEF const char *pt_backend_name(const pt_ctx *ctx) { return ctx && ctx->be ? ctx->be->name : "none"; }

/* ---- scratch of the CPU attention kernels ----------------------------------------------------
   Floats per thread that the CPU attention kernels (see attn) take from pt__work: query blocks of
   PT__ATTN_BQ rows; the forward holds a packed query tile, a T x BQ score tile and 2 x BQ row
   statistics, the backward two packed tiles, two score tiles and 2 x BQ. Stated here, beside
   pt__work, because the counting backend below takes the same scratch. */
#define PT__ATTN_BQ 64 /* query rows per block = column stride of the score tiles (multiple of 16) */
static int64_t pt__attn_ws(int64_t T, int64_t hs, int bwd) {
    int64_t tile = (hs * PT__ATTN_BQ + 15) & ~(int64_t)15;
    return (bwd ? 2 : 1) * (tile + T * PT__ATTN_BQ) + 2 * PT__ATTN_BQ;
}

/* ---- the counting backend ----------------------------------------------------------------------
   Allocation accounting without data, for the memory estimate (see memest: pt_mem_estimate sets
   ctx->be to it right after pt_init; no device string selects it). A storage holds nothing:
   st->dev marks it allocated, st->host stays NULL as on a device, and pt__st_alloc accounts its
   bytes by kind as for every backend, so pt_mem reads what the CPU backend would hold. Kernels
   compute nothing, except that the attention kernels take the CPU kernels' scratch (pt__work:
   workspace); read gives zeros (so the host-side checks of ids and targets pass: id 0 is valid),
   write drops the data, sums are 0. Code that works on values on the host asks pt__be_counts and
   skips: the parameter init (param) and every communication (comm). Not counted as the CPU does:
   the scratch of reductions with more than one thread (a few floats per 4096 elements). */
static const char pt__count_buf = 0; /* what st->dev of every counting storage points at */
static pt_status pt__count_st_alloc(pt_ctx *ctx, pt_storage *st, int64_t bytes) {
    ctx->nallocs++;
    st->host = st->raw = NULL;
    st->dev = (void *)&pt__count_buf;
    st->bytes = bytes < 0 ? 0 : bytes;
    return PT_OK;
}
static void pt__count_st_free(pt_ctx *ctx, pt_storage *st) {
    (void)ctx;
    st->dev = NULL;
    st->bytes = 0;
}
static void pt__count_write(pt_ctx *ctx, const pt_tensor *dst, const void *src, int64_t bytes) { (void)ctx, (void)dst, (void)src, (void)bytes; }
static void pt__count_read(pt_ctx *ctx, const pt_tensor *src, void *dst, int64_t bytes) {
    (void)ctx, (void)src;
    if (bytes > 0) memset(dst, 0, (size_t)bytes);
}
static void *pt__count_read_start(pt_ctx *ctx, const pt_tensor *src, void *dst, int64_t bytes) {
    pt__count_read(ctx, src, dst, bytes);
    return NULL;
}
static int pt__count_read_wait(pt_ctx *ctx, void *h, int block) { return (void)ctx, (void)h, (void)block, 1; }
static void pt__count_fill(pt_ctx *ctx, const pt_tensor *t, float v) { (void)ctx, (void)t, (void)v; }
static void pt__count_copy(pt_ctx *ctx, const pt_tensor *dst, const pt_tensor *src, int acc) { (void)ctx, (void)dst, (void)src, (void)acc; }
static void pt__count_binary(pt_ctx *ctx, int op, const pt_tensor *out, const pt_tensor *a, const pt_tensor *b) {
    (void)ctx, (void)op, (void)out, (void)a, (void)b;
}
static void pt__count_xy(pt_ctx *ctx, const pt_tensor *dst, const pt_tensor *x, const pt_tensor *y) { (void)ctx, (void)dst, (void)x, (void)y; }
static void pt__count_axpy_reduce(pt_ctx *ctx, const pt_tensor *dst, const pt_tensor *src, float alpha) {
    (void)ctx, (void)dst, (void)src, (void)alpha;
}
static void pt__count_act_fwd(pt_ctx *ctx, int kind, const pt_tensor *out, const pt_tensor *x) { (void)ctx, (void)kind, (void)out, (void)x; }
static void pt__count_act_bwd(pt_ctx *ctx, int kind, const pt_tensor *dx, const pt_tensor *x, const pt_tensor *dy) {
    (void)ctx, (void)kind, (void)dx, (void)x, (void)dy;
}
static void pt__count_dropout(pt_ctx *ctx, const pt_tensor *out, const pt_tensor *x, float p, uint64_t key, int64_t base, int acc) {
    (void)ctx, (void)out, (void)x, (void)p, (void)key, (void)base, (void)acc;
}
static void pt__count_softmax_fwd(pt_ctx *ctx, const pt_tensor *y, const pt_tensor *x, int log) { (void)ctx, (void)y, (void)x, (void)log; }
static void pt__count_softmax_bwd(pt_ctx *ctx, const pt_tensor *dx, const pt_tensor *y, const pt_tensor *dy, int log) {
    (void)ctx, (void)dx, (void)y, (void)dy, (void)log;
}
static void pt__count_xent_fwd(pt_ctx *ctx, const pt_tensor *loss_rows, const pt_tensor *lse, const pt_tensor *logits, const pt_tensor *targets,
                               int32_t ignore, int64_t nvalid) {
    (void)ctx, (void)loss_rows, (void)lse, (void)logits, (void)targets, (void)ignore, (void)nvalid;
}
static void pt__count_xent_bwd(pt_ctx *ctx, const pt_tensor *dlogits, const pt_tensor *logits, const pt_tensor *lse, const pt_tensor *targets,
                               int32_t ignore, int64_t nvalid, const pt_tensor *dloss, float scale, int overwrite) {
    (void)ctx, (void)dlogits, (void)logits, (void)lse, (void)targets, (void)ignore, (void)nvalid, (void)dloss, (void)scale, (void)overwrite;
}
static void pt__count_layernorm_fwd(pt_ctx *ctx, const pt_tensor *y, const pt_tensor *mean, const pt_tensor *rstd, const pt_tensor *x,
                                    const pt_tensor *w, const pt_tensor *b, float eps) {
    (void)ctx, (void)y, (void)mean, (void)rstd, (void)x, (void)w, (void)b, (void)eps;
}
static void pt__count_layernorm_bwd(pt_ctx *ctx, const pt_tensor *dx, const pt_tensor *dw, const pt_tensor *db, const pt_tensor *dy,
                                    const pt_tensor *x, const pt_tensor *w, const pt_tensor *mean, const pt_tensor *rstd) {
    (void)ctx, (void)dx, (void)dw, (void)db, (void)dy, (void)x, (void)w, (void)mean, (void)rstd;
}
static void pt__count_attn_fwd(pt_ctx *ctx, const pt_tensor *out, const pt_tensor *lse, const pt_tensor *qkv, int B, int T, int C, int H) {
    (void)out, (void)lse, (void)qkv;
    if (B > 0 && T > 0 && H > 0 && C > 0 && C % H == 0) pt__work(ctx, pt__attn_ws(T, C / H, 0) * PT__MAX(ctx->nthreads, 1));
}
static void pt__count_attn_bwd(pt_ctx *ctx, const pt_tensor *dqkv, const pt_tensor *dout, const pt_tensor *qkv, const pt_tensor *out,
                               const pt_tensor *lse, int B, int T, int C, int H) {
    (void)dqkv, (void)dout, (void)qkv, (void)out, (void)lse;
    if (B > 0 && T > 0 && H > 0 && C > 0 && C % H == 0) pt__work(ctx, pt__attn_ws(T, C / H, 1) * PT__MAX(ctx->nthreads, 1));
}
static void pt__count_permute(pt_ctx *ctx, const pt_tensor *dst, const pt_tensor *src, const int *perm, int acc) {
    (void)ctx, (void)dst, (void)src, (void)perm, (void)acc;
}
static void pt__count_copy_block(pt_ctx *ctx, const pt_tensor *dst, int64_t dst_dim, int64_t dst_start, const pt_tensor *src, int64_t src_dim,
                                 int64_t src_start, int64_t count, int64_t outer, int64_t inner, int acc) {
    (void)ctx, (void)dst, (void)dst_dim, (void)dst_start, (void)src, (void)src_dim, (void)src_start, (void)count, (void)outer, (void)inner, (void)acc;
}
static void pt__count_sum(pt_ctx *ctx, const pt_tensor *out, const pt_tensor *x, float scale) { (void)ctx, (void)out, (void)x, (void)scale; }
static void pt__count_gemm(pt_ctx *ctx, int ta, int tb, int64_t batch, int64_t M, int64_t N, int64_t K, float alpha, const pt_tensor *A,
                           int64_t lda, int64_t sa, const pt_tensor *B, int64_t ldb, int64_t sb, float beta, const pt_tensor *C, int64_t ldc,
                           int64_t sc) {
    (void)ctx, (void)ta, (void)tb, (void)batch, (void)M, (void)N, (void)K, (void)alpha, (void)A, (void)lda, (void)sa, (void)B, (void)ldb;
    (void)sb, (void)beta, (void)C, (void)ldc, (void)sc;
}
static void pt__count_im2col(pt_ctx *ctx, const pt_tensor *cols, const pt_tensor *x, int N, int C, int H, int W, int k, int stride, int pad,
                             int Ho, int Wo) {
    (void)ctx, (void)cols, (void)x, (void)N, (void)C, (void)H, (void)W, (void)k, (void)stride, (void)pad, (void)Ho, (void)Wo;
}
static void pt__count_chan_bias(pt_ctx *ctx, const pt_tensor *a, const pt_tensor *b, int N, int C, int64_t S) {
    (void)ctx, (void)a, (void)b, (void)N, (void)C, (void)S;
}
static void pt__count_maxpool_fwd(pt_ctx *ctx, const pt_tensor *out, const pt_tensor *idx, const pt_tensor *x, int N, int C, int H, int W,
                                  int k, int stride, int Ho, int Wo) {
    (void)ctx, (void)out, (void)idx, (void)x, (void)N, (void)C, (void)H, (void)W, (void)k, (void)stride, (void)Ho, (void)Wo;
}
static void pt__count_maxpool_bwd(pt_ctx *ctx, const pt_tensor *dx, const pt_tensor *dout, const pt_tensor *idx, int N, int C, int H, int W,
                                  int Ho, int Wo) {
    (void)ctx, (void)dx, (void)dout, (void)idx, (void)N, (void)C, (void)H, (void)W, (void)Ho, (void)Wo;
}
static void pt__count_adamw(pt_ctx *ctx, const pt_tensor *p, const pt_tensor *g, const pt_tensor *m, const pt_tensor *v, int64_t n, float lr,
                            float b1, float b2, float eps, float wd, float bc1, float bc2, float gscale) {
    (void)ctx, (void)p, (void)g, (void)m, (void)v, (void)n, (void)lr, (void)b1, (void)b2, (void)eps, (void)wd, (void)bc1, (void)bc2, (void)gscale;
}
static void pt__count_sgd(pt_ctx *ctx, const pt_tensor *p, const pt_tensor *g, const pt_tensor *mom, int64_t n, float lr, float momentum,
                          float wd, float gscale) {
    (void)ctx, (void)p, (void)g, (void)mom, (void)n, (void)lr, (void)momentum, (void)wd, (void)gscale;
}
static double pt__count_sumsq(pt_ctx *ctx, const pt_tensor *x, int64_t n) { return (void)ctx, (void)x, (void)n, 0.0; }

static const pt__backend pt__count_backend = {
    "count",
    pt__count_st_alloc, pt__count_st_free, pt__count_write, pt__count_read, pt__count_read_start, pt__count_read_wait,
    pt__count_fill, pt__count_copy, pt__count_binary, pt__count_axpy_reduce, pt__count_xy, pt__count_sum,
    pt__count_act_fwd, pt__count_act_bwd, pt__count_dropout,
    pt__count_softmax_fwd, pt__count_softmax_bwd, pt__count_xent_fwd, pt__count_xent_bwd,
    pt__count_layernorm_fwd, pt__count_layernorm_bwd, pt__count_xy, pt__count_xy,
    pt__count_attn_fwd, pt__count_attn_bwd,
    pt__count_permute, pt__count_copy_block, pt__count_sum,
    pt__count_gemm,
    pt__count_im2col, pt__count_im2col, pt__count_chan_bias, pt__count_chan_bias, pt__count_maxpool_fwd,
    pt__count_maxpool_bwd,
    pt__count_adamw, pt__count_sgd, pt__count_sumsq,
};
/* 1 when ctx counts bytes without data (the counting backend): host-side work on values is skipped */
static int pt__be_counts(const pt_ctx *ctx) { return ctx->be == &pt__count_backend; }

// >>gemm  packed, cache-blocked SGEMM with run-time AVX-512/AVX2 dispatch
/* Owns: the CPU matrix product (pt__sgemm) and its per-thread workspaces
   Invariants: results do not depend on the thread count; no allocation once the workspace has grown
   to the sizes in use
   Entry points: pt__sgemm pt__gemm_ws_free */
/* packed, cache-blocked SGEMM
 * ==========================================================================
 * Single-precision GEMM for the CPU backend (row-major, four transpose cases, batched).
 * ==========================================================================
 *
 *   C[b] = alpha * op(A[b]) * op(B[b]) + beta * C[b]     (row-major)
 *
 * Blocking scheme (Goto / BLIS), run by one thread on one tile of C:
 *
 *   for jc in N step NC            B panel  op(B)[pc:pc+kc, jc:jc+nc] -> packed
 *     for pc in K step KC            (KC x NC, 8 MiB max, streamed from L3)
 *       pack B panel
 *       for ic in M step MC          A block  op(A)[ic:ic+mc, pc:pc+kc] -> packed
 *         pack A block                 (MC x KC = 240 x 512 floats, ~480 KiB: L2)
 *         for jr in nc step NR       B micro-panel (KC x NR): L1 / L2
 *           for ir in mc step MR     A micro-panel (MR x KC) streams from L2
 *             micro-kernel: MR x NR tile of C += A sliver * B sliver
 *
 *   (Zen5 feeds L1 from L2 at 64 B/cycle, so a 64 KiB B micro-panel that does
 *   not quite fit the 48 KiB L1 still keeps the FMA units busy; KC=512 measured
 *   best. MC blocks are balanced so no tiny trailing block re-streams B.)
 *
 *   Packed A micro-panel: for each k, MR consecutive floats (rows i..i+MR).
 *   Packed B micro-panel: for each k, NR consecutive floats (cols j..j+NR).
 *   Partial panels are zero-padded, so the micro-kernel always runs the full
 *   MR x NR register tile; only its final C update is masked to m x n.
 *   The four transpose cases are absorbed by the two packing routines
 *   (AVX-512 versions use 16x16 in-register transposes for the strided cases).
 *
 *   Micro-kernels (chosen at run time, cached in ws->kern):
 *     AVX-512F : MR=12, NR=32 (24 zmm accumulators)
 *     AVX2+FMA : MR=6,  NR=16 (12 ymm accumulators)
 *     plain C  : MR=4,  NR=16 (GCC/Clang vector extensions, or plain loops)
 *
 * Determinism rule:
 *   K is never split across threads. Each element of C is computed as
 *     for each K block (fixed split that depends only on K and the kernel):
 *       acc = 0; acc = fma(a_k, b_k, acc) for k in block, in order;
 *       C = alpha * acc + beta_eff * C   (beta_eff = beta for the first block, 1 after)
 *   using the same instructions for full and edge tiles (edges are masked,
 *   never computed by a different code path). Threads only split the M / N
 *   ranges (or whole batch items), so results are bit-identical for any
 *   thread count. (The kernel choice - AVX-512 / AVX2 / C - can change bits.)
 *
 * Threading (OpenMP, ws->nthreads): C of every batch item is cut into tiles
 *   (halving the larger side until there are >= 2 work items per thread); the
 *   (batch item, tile) items are handed out with schedule(dynamic). Each thread
 *   runs the serial blocked GEMM above on its item with its own private A and
 *   B buffers, so there is no barrier or shared data inside the region (some
 *   packing is duplicated between tiles: a few % of the work). This degrades
 *   gracefully when the cores are shared; on a busy machine, also run with
 *   OMP_WAIT_POLICY=passive so idle OpenMP threads do not spin.
 *   All memory is taken from ws->buf, grown (never shrunk) before the parallel
 *   region, so repeated calls with the same sizes never allocate.
 * ========================================================================== */


/* micro-kernel identifiers for pt__gemm_ws.kern (0 = pick automatically) */
#define PT__GEMM_KERN_AUTO   0
#define PT__GEMM_KERN_C      1
#define PT__GEMM_KERN_AVX2   2
#define PT__GEMM_KERN_AVX512 3

typedef struct pt__gemm_ws {      /* per-context workspace: packing buffers, grown only, never shrunk */
    float *buf; size_t cap;       /* cap is in floats */
    int nthreads;                 /* threads to use; 1 = no OpenMP region */
    int kern;                     /* PT__GEMM_KERN_*: 0 = auto-select on first call (then cached) */
} pt__gemm_ws;

static void pt__gemm_ws_free(pt__gemm_ws *ws)
{
    if (ws->buf) PT_FREE(ws->buf);
    ws->buf = NULL;
    ws->cap = 0;
}

/* micro-kernel: C[0:m,0:n] = alpha * (Apanel * Bpanel) + beta * C  (beta==0: C not read) */
typedef void (*pt__gemm_kern_fn)(int64_t kc, const float *a, const float *b, float *c,
                                 int64_t ldc, float alpha, float beta, int m, int n);

/* everything one GEMM call needs, shared read-only by all threads */
struct pt__gemm_ctx;
typedef void (*pt__gemm_pack_a_fn)(const struct pt__gemm_ctx *g, const float *A, int64_t i0, int64_t mb,
                                   int64_t p0, int64_t kb, float *dst);
typedef void (*pt__gemm_pack_b_fn)(const struct pt__gemm_ctx *g, const float *B, int64_t p0, int64_t kb,
                                   int64_t j0, int64_t nb, float *bp);

typedef struct pt__gemm_ctx {
    pt__gemm_kern_fn kern;
    pt__gemm_pack_a_fn pack_a;    /* packing routines matching the kernel's MR / NR */
    pt__gemm_pack_b_fn pack_b;
    int64_t mr, nr, mc, kc, nc;   /* register and cache blocking */
    int ta, tb;
    int64_t M, N, K, lda, ldb, ldc;
    float alpha, beta;
} pt__gemm_ctx;

#define PT__GEMM_MIN(a, b) ((a) < (b) ? (a) : (b))
#define PT__GEMM_RUP(x, m) (((x) + (m) - 1) / (m) * (m))

/* ---------------------------------------------------------------- kernels */

/* Portable kernel: MR=4, NR=16. With GCC/Clang (any architecture) it uses
   generic vector extensions: 4 rows x 4 vectors of 4 floats = 16 independent
   accumulators. Otherwise plain loops with a unit-stride inner j loop. */
#define PT__GEMMC_MR 4
#define PT__GEMMC_NR 16
#if defined(__GNUC__) || defined(__clang__)
typedef float pt__gemm_v4 __attribute__((vector_size(16)));
#define PT__GEMMC_ROW(i)                                                        \
    { const float ai = a[i];                                                    \
      r##i##0 += ai * b0; r##i##1 += ai * b1; r##i##2 += ai * b2; r##i##3 += ai * b3; }
#define PT__GEMMC_OUT(i) \
    memcpy(out[i], &r##i##0, 16); memcpy(out[i] + 4, &r##i##1, 16); \
    memcpy(out[i] + 8, &r##i##2, 16); memcpy(out[i] + 12, &r##i##3, 16);
static void pt__sgemm_kern_c(int64_t kc, const float *a, const float *b, float *c,
                             int64_t ldc, float alpha, float beta, int m, int n)
{
    pt__gemm_v4 z = {0.0f, 0.0f, 0.0f, 0.0f};
    pt__gemm_v4 r00 = z, r01 = z, r02 = z, r03 = z, r10 = z, r11 = z, r12 = z, r13 = z;
    pt__gemm_v4 r20 = z, r21 = z, r22 = z, r23 = z, r30 = z, r31 = z, r32 = z, r33 = z;
    float out[PT__GEMMC_MR][PT__GEMMC_NR];
    int64_t k;
    int i, j;
    for (k = 0; k < kc; k++, a += PT__GEMMC_MR, b += PT__GEMMC_NR) {
        pt__gemm_v4 b0, b1, b2, b3;
        memcpy(&b0, b, 16); memcpy(&b1, b + 4, 16); memcpy(&b2, b + 8, 16); memcpy(&b3, b + 12, 16);
        PT__GEMMC_ROW(0) PT__GEMMC_ROW(1) PT__GEMMC_ROW(2) PT__GEMMC_ROW(3)
    }
    PT__GEMMC_OUT(0) PT__GEMMC_OUT(1) PT__GEMMC_OUT(2) PT__GEMMC_OUT(3)
    for (i = 0; i < m; i++) {
        float *cr = c + (int64_t)i * ldc;
        if (beta == 0.0f) for (j = 0; j < n; j++) cr[j] = alpha * out[i][j];
        else for (j = 0; j < n; j++) cr[j] = alpha * out[i][j] + beta * cr[j];
    }
}
#else
static void pt__sgemm_kern_c(int64_t kc, const float *a, const float *b, float *c,
                             int64_t ldc, float alpha, float beta, int m, int n)
{
    float acc[PT__GEMMC_MR][PT__GEMMC_NR];
    int64_t k;
    int i, j;
    memset(acc, 0, sizeof(acc));
    for (k = 0; k < kc; k++, a += PT__GEMMC_MR, b += PT__GEMMC_NR)
        for (i = 0; i < PT__GEMMC_MR; i++)
            for (j = 0; j < PT__GEMMC_NR; j++) acc[i][j] += a[i] * b[j];
    for (i = 0; i < m; i++) {
        float *cr = c + (int64_t)i * ldc;
        if (beta == 0.0f) for (j = 0; j < n; j++) cr[j] = alpha * acc[i][j];
        else for (j = 0; j < n; j++) cr[j] = alpha * acc[i][j] + beta * cr[j];
    }
}
#endif

#if PT__X86

/* ---- AVX-512: MR=12, NR=32 ---- */
#define PT__G512_MR 12
#define PT__G512_NR 32
#ifndef PT__G512_MC                /* cache blocking (tuned on Zen5: 48K L1d, 1M L2) */
#define PT__G512_MC 240
#define PT__G512_KC 512
#define PT__G512_NC 4096
#endif
#ifndef PT__G512_PFB
#define PT__G512_PFB 8                    /* B-packing prefetch distance (rows) */
#endif
#define PT__G512_TGT __attribute__((target("avx512f,avx512vl,avx512dq,fma")))

PT__G512_TGT static inline void pt__gemm_st512(float *c, __m512 x0, __m512 x1, __m512 va, __m512 vb,
                                                float beta, __mmask16 k0, __mmask16 k1)
{
    __m512 r0 = _mm512_mul_ps(va, x0), r1 = _mm512_mul_ps(va, x1);
    if (beta != 0.0f) {
        r0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(k0, c), r0);
        r1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(k1, c + 16), r1);
    }
    _mm512_mask_storeu_ps(c, k0, r0);
    _mm512_mask_storeu_ps(c + 16, k1, r1);
}

#define PT__G512_DECL(i) __m512 c##i##_0 = _mm512_setzero_ps(), c##i##_1 = _mm512_setzero_ps();
#define PT__G512_FMA(i)                                              \
    { __m512 ai = _mm512_set1_ps(a[i]);                              \
      c##i##_0 = _mm512_fmadd_ps(ai, b0, c##i##_0);                  \
      c##i##_1 = _mm512_fmadd_ps(ai, b1, c##i##_1); }
#define PT__G512_STORE(i) \
    if ((i) < m) pt__gemm_st512(c + (int64_t)(i) * ldc, c##i##_0, c##i##_1, va, vb, beta, k0, k1);
#define PT__G512_PREFETCH(i)                                                 \
    if ((i) < m) { _mm_prefetch((const char *)(c + (int64_t)(i) * ldc), _MM_HINT_T0);      \
                   _mm_prefetch((const char *)(c + (int64_t)(i) * ldc + 31), _MM_HINT_T0); }
#define PT__G512_ALL(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)

PT__G512_TGT static void pt__sgemm_kern_avx512(int64_t kc, const float *a, const float *b, float *c,
                                               int64_t ldc, float alpha, float beta, int m, int n)
{
    __mmask16 k0, k1;
    __m512 va, vb;
    int64_t k;
    PT__G512_ALL(PT__G512_DECL)
#ifndef PT__G512_NOPF
    PT__G512_ALL(PT__G512_PREFETCH)
#endif
    for (k = 0; k < kc; k++) {
        __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);
        PT__G512_ALL(PT__G512_FMA)
        a += PT__G512_MR;
        b += PT__G512_NR;
    }
    k0 = (__mmask16)(n >= 16 ? 0xFFFFu : (1u << n) - 1u);
    k1 = (__mmask16)(n >= 32 ? 0xFFFFu : n > 16 ? (1u << (n - 16)) - 1u : 0u);
    va = _mm512_set1_ps(alpha);
    vb = _mm512_set1_ps(beta);
    PT__G512_ALL(PT__G512_STORE)
}

/* ---- AVX2 + FMA: MR=6, NR=16 ---- */
#define PT__G256_MR 6
#define PT__G256_NR 16
#define PT__G256_TGT __attribute__((target("avx2,fma")))

PT__G256_TGT static inline void pt__gemm_st256(float *c, __m256 x0, __m256 x1, __m256 va, __m256 vb,
                                                float beta, __m256i k0, __m256i k1)
{
    __m256 r0 = _mm256_mul_ps(va, x0), r1 = _mm256_mul_ps(va, x1);
    if (beta != 0.0f) {
        r0 = _mm256_fmadd_ps(vb, _mm256_maskload_ps(c, k0), r0);
        r1 = _mm256_fmadd_ps(vb, _mm256_maskload_ps(c + 8, k1), r1);
    }
    _mm256_maskstore_ps(c, k0, r0);
    _mm256_maskstore_ps(c + 8, k1, r1);
}

#define PT__G256_DECL(i) __m256 c##i##_0 = _mm256_setzero_ps(), c##i##_1 = _mm256_setzero_ps();
#define PT__G256_FMA(i)                                              \
    { __m256 ai = _mm256_broadcast_ss(a + (i));                      \
      c##i##_0 = _mm256_fmadd_ps(ai, b0, c##i##_0);                  \
      c##i##_1 = _mm256_fmadd_ps(ai, b1, c##i##_1); }
#define PT__G256_STORE(i) \
    if ((i) < m) pt__gemm_st256(c + (int64_t)(i) * ldc, c##i##_0, c##i##_1, va, vb, beta, k0, k1);
#define PT__G256_ALL(X) X(0) X(1) X(2) X(3) X(4) X(5)

PT__G256_TGT static void pt__sgemm_kern_avx2(int64_t kc, const float *a, const float *b, float *c,
                                             int64_t ldc, float alpha, float beta, int m, int n)
{
    __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), k0, k1;
    __m256 va, vb;
    int64_t k;
    PT__G256_ALL(PT__G256_DECL)
    for (k = 0; k < kc; k++) {
        __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
        PT__G256_ALL(PT__G256_FMA)
        a += PT__G256_MR;
        b += PT__G256_NR;
    }
    k0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(n), idx);       /* lane j valid if j < n */
    k1 = _mm256_cmpgt_epi32(_mm256_set1_epi32(n - 8), idx);
    va = _mm256_set1_ps(alpha);
    vb = _mm256_set1_ps(beta);
    PT__G256_ALL(PT__G256_STORE)
}

#endif /* PT__X86 */

/* ---------------------------------------------------------------- packing */

/* Pack op(A)[i0:i0+mb, p0:p0+kb] into MR-row micro-panels (zero-padded). */
static void pt__gemm_pack_a(const pt__gemm_ctx *g, const float *A, int64_t i0, int64_t mb,
                            int64_t p0, int64_t kb, float *dst)
{
    const int64_t mr = g->mr, lda = g->lda;
    int64_t ip, i, k;
    for (ip = 0; ip < mb; ip += mr, dst += mr * kb) {
        int64_t mm = PT__GEMM_MIN(mr, mb - ip);
        if (!g->ta) {                       /* op(A)[i][k] = A[i*lda + k]: strided gather */
            for (i = 0; i < mm; i++) {
                const float *src = A + (i0 + ip + i) * lda + p0;
                for (k = 0; k < kb; k++) dst[k * mr + i] = src[k];
            }
        } else {                            /* op(A)[i][k] = A[k*lda + i]: contiguous rows */
            for (k = 0; k < kb; k++) {
                const float *src = A + (p0 + k) * lda + i0 + ip;
                for (i = 0; i < mm; i++) dst[k * mr + i] = src[i];
            }
        }
        if (mm < mr)
            for (k = 0; k < kb; k++)
                for (i = mm; i < mr; i++) dst[k * mr + i] = 0.0f;
    }
}

/* Pack op(B)[p0:p0+kb, j0:j0+nb] into NR-column micro-panels (zero-padded). */
static void pt__gemm_pack_b(const pt__gemm_ctx *g, const float *B, int64_t p0, int64_t kb,
                            int64_t j0, int64_t nb, float *bp)
{
    const int64_t nr = g->nr, ldb = g->ldb;
    int64_t jp, j, k;
    for (jp = 0; jp * nr < nb; jp++) {
        float *dst = bp + jp * nr * kb;
        int64_t jj = jp * nr, nn = PT__GEMM_MIN(nr, nb - jj);
        if (!g->tb) {                       /* op(B)[k][j] = B[k*ldb + j]: contiguous rows */
            for (k = 0; k < kb; k++) {
                const float *src = B + (p0 + k) * ldb + j0 + jj;
                float *d = dst + k * nr;
                if (nn == nr) for (j = 0; j < nr; j++) d[j] = src[j];
                else {
                    for (j = 0; j < nn; j++) d[j] = src[j];
                    for (; j < nr; j++) d[j] = 0.0f;
                }
            }
        } else {                            /* op(B)[k][j] = B[j*ldb + k]: strided gather */
            for (j = 0; j < nn; j++) {
                const float *src = B + (j0 + jj + j) * ldb + p0;
                for (k = 0; k < kb; k++) dst[k * nr + j] = src[k];
            }
            if (nn < nr)
                for (k = 0; k < kb; k++)
                    for (j = nn; j < nr; j++) dst[k * nr + j] = 0.0f;
        }
    }
}

#if PT__X86
/* ---- AVX-512 packing for the 12x32 kernel ---- */

/* In-register transpose of 16 rows x 16 floats: r[i][j] -> r[j][i].
   (Masked forms with an all-ones mask compile to the plain instructions; they
   avoid a g++-12 -Wmaybe-uninitialized false positive in the unmasked ones.) */
#define PT__G512_ALL1 ((__mmask16)0xFFFF)
PT__G512_TGT static inline void pt__gemm_tr16(__m512 *r)
{
    __m512 t[16], u[16];
    int i, c;
    for (i = 0; i < 16; i += 2) {          /* interleave pairs of rows */
        t[i] = _mm512_mask_unpacklo_ps(r[i], PT__G512_ALL1, r[i], r[i + 1]);
        t[i + 1] = _mm512_mask_unpackhi_ps(r[i], PT__G512_ALL1, r[i], r[i + 1]);
    }
    for (i = 0; i < 16; i += 4) {          /* 4x4 blocks inside each 128-bit lane */
        u[i + 0] = _mm512_mask_shuffle_ps(t[i], PT__G512_ALL1, t[i], t[i + 2], 0x44);
        u[i + 1] = _mm512_mask_shuffle_ps(t[i], PT__G512_ALL1, t[i], t[i + 2], 0xEE);
        u[i + 2] = _mm512_mask_shuffle_ps(t[i], PT__G512_ALL1, t[i + 1], t[i + 3], 0x44);
        u[i + 3] = _mm512_mask_shuffle_ps(t[i], PT__G512_ALL1, t[i + 1], t[i + 3], 0xEE);
    }
    for (c = 0; c < 4; c++) {              /* gather the 128-bit lanes */
        __m512 v0 = _mm512_mask_shuffle_f32x4(u[c], PT__G512_ALL1, u[c], u[4 + c], 0x88);
        __m512 v1 = _mm512_mask_shuffle_f32x4(u[c], PT__G512_ALL1, u[c], u[4 + c], 0xDD);
        __m512 w0 = _mm512_mask_shuffle_f32x4(u[c], PT__G512_ALL1, u[8 + c], u[12 + c], 0x88);
        __m512 w1 = _mm512_mask_shuffle_f32x4(u[c], PT__G512_ALL1, u[8 + c], u[12 + c], 0xDD);
        r[c] = _mm512_mask_shuffle_f32x4(v0, PT__G512_ALL1, v0, w0, 0x88);
        r[8 + c] = _mm512_mask_shuffle_f32x4(v0, PT__G512_ALL1, v0, w0, 0xDD);
        r[4 + c] = _mm512_mask_shuffle_f32x4(v1, PT__G512_ALL1, v1, w1, 0x88);
        r[12 + c] = _mm512_mask_shuffle_f32x4(v1, PT__G512_ALL1, v1, w1, 0xDD);
    }
}

static __mmask16 pt__gemm_mask16(int64_t n)
{
    return (__mmask16)(n >= 16 ? 0xFFFFu : n <= 0 ? 0u : (1u << n) - 1u);
}

/* Transposing copy: rows src + i*ld (i < rows <= 16), k in [0,kb) ->
   dst[k*dstride + i] for i < width (zero for rows <= i < width). */
PT__G512_TGT static void pt__gemm_pack_tr512(const float *src, int64_t ld, int64_t rows,
                                             int64_t kb, float *dst, int64_t dstride, int width)
{
    const __mmask16 wmask = pt__gemm_mask16(width);
    __m512 r[16];
    int64_t k0, i, kk;
    for (k0 = 0; k0 < kb; k0 += 16) {
        const int64_t kn = PT__GEMM_MIN(16, kb - k0);
        const __mmask16 km = pt__gemm_mask16(kn);
        for (i = 0; i < 16; i++)
            r[i] = i < rows ? _mm512_maskz_loadu_ps(km, src + i * ld + k0) : _mm512_setzero_ps();
        pt__gemm_tr16(r);
        for (kk = 0; kk < kn; kk++) _mm512_mask_storeu_ps(dst + (k0 + kk) * dstride, wmask, r[kk]);
    }
}

PT__G512_TGT static void pt__gemm_pack_a512(const pt__gemm_ctx *g, const float *A, int64_t i0, int64_t mb,
                                            int64_t p0, int64_t kb, float *dst)
{
    const int64_t lda = g->lda;
    int64_t ip, k;
    for (ip = 0; ip < mb; ip += PT__G512_MR, dst += PT__G512_MR * kb) {
        const int64_t mm = PT__GEMM_MIN(PT__G512_MR, mb - ip);
        if (!g->ta) {
            pt__gemm_pack_tr512(A + (i0 + ip) * lda + p0, lda, mm, kb, dst, PT__G512_MR, PT__G512_MR);
        } else {
            const __mmask16 m = pt__gemm_mask16(mm);
            const float *src = A + p0 * lda + i0 + ip;
            for (k = 0; k < kb; k++, src += lda)
                _mm512_mask_storeu_ps(dst + k * PT__G512_MR, 0x0FFF, _mm512_maskz_loadu_ps(m, src));
        }
    }
}

PT__G512_TGT static void pt__gemm_pack_b512(const pt__gemm_ctx *g, const float *B, int64_t p0, int64_t kb,
                                            int64_t j0, int64_t nb, float *bp)
{
    const int64_t ldb = g->ldb;
    int64_t jp, k;
    for (jp = 0; jp * PT__G512_NR < nb; jp++) {
        float *dst = bp + jp * PT__G512_NR * kb;
        const int64_t jj = jp * PT__G512_NR, nn = PT__GEMM_MIN(PT__G512_NR, nb - jj);
        if (!g->tb) {
            const __mmask16 m0 = pt__gemm_mask16(nn), m1 = pt__gemm_mask16(nn - 16);
            const float *src = B + p0 * ldb + j0 + jj;
            for (k = 0; k < kb; k++, src += ldb, dst += PT__G512_NR) {
#ifndef PT__G512_NOPFB
                if (k + PT__G512_PFB < kb) {     /* strided rows: help the prefetcher */
                    _mm_prefetch((const char *)(src + PT__G512_PFB * ldb), _MM_HINT_T0);
                    _mm_prefetch((const char *)(src + PT__G512_PFB * ldb + 31), _MM_HINT_T0);
                }
#endif
                _mm512_storeu_ps(dst, _mm512_maskz_loadu_ps(m0, src));
                _mm512_storeu_ps(dst + 16, _mm512_maskz_loadu_ps(m1, src + 16));
            }
        } else {
            const float *src = B + (j0 + jj) * ldb + p0;
            pt__gemm_pack_tr512(src, ldb, PT__GEMM_MIN(16, nn), kb, dst, PT__G512_NR, 16);
            pt__gemm_pack_tr512(src + 16 * ldb, ldb, nn - 16, kb, dst + 16, PT__G512_NR, 16);
        }
    }
}
#endif /* PT__X86 */

/* Pick the best kernel this CPU supports (once; cached in ws->kern). */
static int pt__gemm_pick_kern(void)
{
#if PT__X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("fma"))
        return PT__GEMM_KERN_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return PT__GEMM_KERN_AVX2;
#endif
    return PT__GEMM_KERN_C;
}

/* Fill kernel + blocking parameters. KC depends only on K and the kernel
   (determinism); MC/NC may be anything. */
static void pt__gemm_setup(pt__gemm_ws *ws, pt__gemm_ctx *g)
{
    int64_t kc_max, nkb;
    if (ws->kern == PT__GEMM_KERN_AUTO) ws->kern = pt__gemm_pick_kern();
#if PT__X86
    if (ws->kern == PT__GEMM_KERN_AVX512) {
        g->kern = pt__sgemm_kern_avx512;
        g->pack_a = pt__gemm_pack_a512; g->pack_b = pt__gemm_pack_b512;
        g->mr = PT__G512_MR; g->nr = PT__G512_NR;
        g->mc = PT__G512_MC; kc_max = PT__G512_KC; g->nc = PT__G512_NC;
    } else if (ws->kern == PT__GEMM_KERN_AVX2) {
        g->kern = pt__sgemm_kern_avx2;
        g->pack_a = pt__gemm_pack_a; g->pack_b = pt__gemm_pack_b;
        g->mr = PT__G256_MR; g->nr = PT__G256_NR;
        g->mc = 192; kc_max = 256; g->nc = 4096;
    } else
#endif
    {
        ws->kern = PT__GEMM_KERN_C;
        g->kern = pt__sgemm_kern_c;
        g->pack_a = pt__gemm_pack_a; g->pack_b = pt__gemm_pack_b;
        g->mr = PT__GEMMC_MR; g->nr = PT__GEMMC_NR;
        g->mc = 128; kc_max = 256; g->nc = 2048;
    }
    nkb = (g->K + kc_max - 1) / kc_max;          /* even split of K into blocks */
    g->kc = (g->K + nkb - 1) / nkb;
}

/* ---------------------------------------------------------------- drivers */

/* Macro-kernel: packed A block (mb x kb) times the np packed B micro-panels. */
static void pt__gemm_macro(const pt__gemm_ctx *g, const float *ap, const float *bp, float *C,
                           int64_t ic, int64_t mb, int64_t jc, int64_t nb, int64_t kb, float beta)
{
    const int64_t mr = g->mr, nr = g->nr, ldc = g->ldc;
    int64_t jr, ir;
    for (jr = 0; jr < nb; jr += nr) {
        const int nn = (int)PT__GEMM_MIN(nr, nb - jr);
        const float *bpan = bp + jr * kb;
        float *cc = C + ic * ldc + jc + jr;
        for (ir = 0; ir < mb; ir += mr) {
            const int mm = (int)PT__GEMM_MIN(mr, mb - ir);
            g->kern(kb, ap + ir * kb, bpan, cc + ir * ldc, ldc, g->alpha, beta, mm, nn);
        }
    }
}

/* Serial Goto GEMM on the C tile rows [m0,m1) x cols [n0,n1) of one batch item,
   using the caller's private buffers bp (B panel) and ap (A block). */
static void pt__gemm_tile(const pt__gemm_ctx *g, const float *A, const float *B, float *C,
                          int64_t m0, int64_t m1, int64_t n0, int64_t n1, float *bp, float *ap)
{
    /* even MC blocks over the tile's rows (no tiny trailing block) */
    const int64_t nblk = (m1 - m0 + g->mc - 1) / g->mc;
    const int64_t mc = PT__GEMM_RUP((m1 - m0 + nblk - 1) / nblk, g->mr);
    int64_t jc, pc, ic;
    for (jc = n0; jc < n1; jc += g->nc) {
        const int64_t nb = PT__GEMM_MIN(g->nc, n1 - jc);
        for (pc = 0; pc < g->K; pc += g->kc) {
            const int64_t kb = PT__GEMM_MIN(g->kc, g->K - pc);
            const float beta = pc == 0 ? g->beta : 1.0f;
            g->pack_b(g, B, pc, kb, jc, nb, bp);
            for (ic = m0; ic < m1; ic += mc) {
                const int64_t mb = PT__GEMM_MIN(mc, m1 - ic);
                g->pack_a(g, A, ic, mb, pc, kb, ap);
                pt__gemm_macro(g, ap, bp, C, ic, mb, jc, nb, kb, beta);
            }
        }
    }
}

/* Work split: C of every batch item is cut into tile_m x tile_n tiles; the
   (batch item, tile) pairs are the work items handed out to threads. Tiles are
   halved along their larger side (duplicating the least packing work) until
   there are at least 2 items per thread, or tiles reach one register block. */
static void pt__gemm_tiles(const pt__gemm_ctx *g, int64_t batch, int nt, int64_t *tile_m, int64_t *tile_n)
{
    int64_t tm = g->M, tn = g->N;
    while (nt > 1 && batch * ((g->M + tm - 1) / tm) * ((g->N + tn - 1) / tn) < 2 * nt) {
        const int can_m = tm > g->mr, can_n = tn > g->nr;
        if (can_m && (tm >= tn || !can_n)) tm = PT__GEMM_RUP((tm + 1) / 2, g->mr);
        else if (can_n) tn = PT__GEMM_RUP((tn + 1) / 2, g->nr);
        else break;
    }
    *tile_m = tm;
    *tile_n = tn;
}

/* Run work item `it` (batch item it / tiles, tile it % tiles). */
static void pt__gemm_item(const pt__gemm_ctx *g, int64_t it, int64_t tile_m, int64_t tile_n,
                          const float *A, int64_t sa, const float *B, int64_t sb, float *C, int64_t sc,
                          float *bp, float *ap)
{
    const int64_t ntm = (g->M + tile_m - 1) / tile_m, ntn = (g->N + tile_n - 1) / tile_n;
    const int64_t b = it / (ntm * ntn), t = it % (ntm * ntn);
    const int64_t m0 = t / ntn * tile_m, n0 = t % ntn * tile_n;
    pt__gemm_tile(g, A + b * sa, B + b * sb, C + b * sc, m0, PT__GEMM_MIN(m0 + tile_m, g->M),
                  n0, PT__GEMM_MIN(n0 + tile_n, g->N), bp, ap);
}

/* C = beta * C (used for K == 0 or alpha == 0). */
static void pt__gemm_scale(float *C, int64_t M, int64_t N, int64_t ldc, float beta)
{
    int64_t i, j;
    for (i = 0; i < M; i++) {
        float *c = C + i * ldc;
        if (beta == 0.0f) memset(c, 0, (size_t)N * sizeof(float));
        else if (beta != 1.0f) for (j = 0; j < N; j++) c[j] *= beta;
    }
}

/* Make sure ws->buf holds at least `need` floats (+64-byte alignment slack). */
static int pt__gemm_reserve(pt__gemm_ws *ws, size_t need)
{
    need += 16;
    if (need <= ws->cap) return 0;
    if (ws->buf) PT_FREE(ws->buf);
    ws->buf = (float *)PT_MALLOC(need * sizeof(float));
    ws->cap = ws->buf ? need : 0;
    return ws->buf ? 0 : -1;
}

static float *pt__gemm_align(float *p)
{
    return (float *)(((uintptr_t)p + 63) & ~(uintptr_t)63);
}

static int pt__sgemm(pt__gemm_ws *ws, int ta, int tb, int64_t batch, int64_t M, int64_t N, int64_t K,
                     float alpha, const float *A, int64_t lda, int64_t sa,
                     const float *B, int64_t ldb, int64_t sb,
                     float beta, float *C, int64_t ldc, int64_t sc)
{
    pt__gemm_ctx g;
    size_t asz, bsz;
    int64_t tile_m, tile_n, nitems, it;
    int nt = ws->nthreads < 1 ? 1 : ws->nthreads;
    float *base;

    if (batch <= 0 || M <= 0 || N <= 0) return 0;
    if (K <= 0 || alpha == 0.0f) {
        for (it = 0; it < batch; it++) pt__gemm_scale(C + it * sc, M, N, ldc, beta);
        return 0;
    }
    memset(&g, 0, sizeof(g));
    g.ta = ta; g.tb = tb; g.M = M; g.N = N; g.K = K;
    g.lda = lda; g.ldb = ldb; g.ldc = ldc; g.alpha = alpha; g.beta = beta;
    pt__gemm_setup(ws, &g);

#ifndef _OPENMP
    nt = 1;
#endif
    if ((double)M * (double)N * (double)K * (double)batch < 32768.0) nt = 1;  /* not worth a fork */
    pt__gemm_tiles(&g, batch, nt, &tile_m, &tile_n);
    nitems = batch * ((M + tile_m - 1) / tile_m) * ((N + tile_n - 1) / tile_n);
    if (nitems < nt) nt = (int)nitems;

    /* workspace: a private B panel + A block per thread, each 64-byte aligned */
    bsz = (size_t)PT__GEMM_RUP(g.kc * PT__GEMM_RUP(PT__GEMM_MIN(g.nc, tile_n), g.nr), 16);
    asz = (size_t)PT__GEMM_RUP(g.kc * PT__GEMM_RUP(PT__GEMM_MIN(g.mc, tile_m), g.mr), 16);
    if (pt__gemm_reserve(ws, (size_t)nt * (asz + bsz))) return -1;
    base = pt__gemm_align(ws->buf);

    if (nt == 1) {
        for (it = 0; it < nitems; it++)
            pt__gemm_item(&g, it, tile_m, tile_n, A, sa, B, sb, C, sc, base, base + bsz);
        return 0;
    }
#ifdef _OPENMP
#pragma omp parallel num_threads(nt)
    {
        float *bp = base + (size_t)omp_get_thread_num() * (asz + bsz);
        int64_t i;
#pragma omp for schedule(dynamic, 1)
        for (i = 0; i < nitems; i++)
            pt__gemm_item(&g, i, tile_m, tile_n, A, sa, B, sb, C, sc, bp, bp + bsz);
    }
#endif
    return 0;
}

// >>attn  causal multi-head self-attention kernels for the CPU (flash-style, no T x T kept)
/* Owns: the attention forward and backward kernels and their dispatch
   Invariants: O(B*T*C) memory; fixed-order reductions
   Entry points: pt__cpu_attn_fwd pt__cpu_attn_bwd pt__attn_pick */
/* causal multi-head self-attention kernels (CPU)
   Flash-style: the queries of one (b, h) are cut into blocks of PT__ATTN_BQ rows. For a block
   [i0, i0+bq) only keys 0..i0+bq-1 are looked at (key blocks past the diagonal are skipped), and the
   scores live in a per-thread scratch tile St[key j][query c] (keys are rows, the block's queries
   are the 16-aligned columns), so the softmax over keys is an elementwise max/sum down the rows.
   Nothing T×T is kept: the forward saves only lse (per query row), the backward recomputes P from
   q, k and lse:
     forward   St = scale·K Qᵀ;  P = exp(St − m) (0 where j > i);  O = Pᵀ V / l;  lse = m + log l
     backward  P = exp(scale·K Qᵀ − lse);  dPt = V dOᵀ;  dS = P ∘ (dP − D), D_i = dO_i·O_i
               dV += P dO;  dK += scale·dS Q;  dQ += scale·dSᵀ K          (all accumulated)
   Every product is one strided tile product (pt__attn_mm): C(r,n) (+)= alpha Σ_k A(r,k) B(k,n) with
   A(r,k) = A[r·sr + k·sk] broadcast from memory and B rows unit-stride, computed with AVX-512
   register tiles (run-time dispatch) or a portable loop.
   Threads: the forward spreads (b, h, query block) items, the backward (b, h) pairs; each item's
   numbers are computed by one thread in a fixed order, so results do not depend on nthreads. */

#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#define PT__ATTN_X86 1
#include <immintrin.h>
#else
#define PT__ATTN_X86 0
#endif

/* PT__ATTN_BQ, the query rows per block, and the scratch per thread (pt__attn_ws) stand in backend */


/* C(r, n) (+)= alpha * sum_k A(r, k) * B(k, n) for r < M, n < N, with A(r, k) = A[r*sr + k*sk],
   B(k, n) = B[k*ldb + n], C(r, n) = C[r*ldc + n]; acc: add into C, else overwrite.
   k range of a group of rows [r0, r1) (the causal structure; skipped terms are exact zeros):
   kmode 0: [0, K);  1: [0, min(K, r1 + koff)) (rows are queries koff+r);
   2: [max(0, r0 + koff), K) (rows are keys, k are queries -koff+k). */
typedef struct pt__attn_mm {
    const float *A;
    int64_t sr, sk;
    const float *B;
    int64_t ldb;
    float *C;
    int64_t ldc;
    int M, N, K, kmode, koff, acc;
    float alpha;
} pt__attn_mm;

static void pt__attn_mm_init(pt__attn_mm *p, const float *A, int64_t sr, int64_t sk, const float *B, int64_t ldb,
                             float *C, int64_t ldc, int M, int N, int K, float alpha, int acc) {
    memset(p, 0, sizeof *p);
    p->A = A; p->sr = sr; p->sk = sk;
    p->B = B; p->ldb = ldb;
    p->C = C; p->ldc = ldc;
    p->M = M; p->N = N; p->K = K;
    p->alpha = alpha; p->acc = acc;
}

static void pt__attn_krange(const pt__attn_mm *p, int r0, int r1, int *kb, int *ke) {
    *kb = 0;
    *ke = p->K;
    if (p->kmode == 1) *ke = PT__MIN(p->K, r1 + p->koff);
    else if (p->kmode == 2) *kb = PT__MAX(0, r0 + p->koff);
}

/* ---- portable kernels ------------------------------------------------------------------------ */
#if defined(__GNUC__) || defined(__clang__)
#define PT__ATTN_INLINE __attribute__((always_inline)) inline
#else
#define PT__ATTN_INLINE inline
#endif

/* 4 x 16 tiles with fixed-length inner loops (vectorized at -O2); also compiled for AVX2 below.
   Rows past M repeat row M-1 (in-bounds reads; not stored); columns past N are read from a
   zero-padded copy of the B row. */
static PT__ATTN_INLINE void pt__attn_mm_c_impl(const pt__attn_mm *p) {
    float acc[4][16], bb[16];
    int r0, n0, k, n, i;
    for (r0 = 0; r0 < p->M; r0 += 4) {
        const int m = PT__MIN(4, p->M - r0);
        const float *a0 = p->A + (int64_t)r0 * p->sr, *a1 = a0 + (m > 1 ? p->sr : 0);
        const float *a2 = a0 + (int64_t)(m > 2 ? 2 : m - 1) * p->sr, *a3 = a0 + (int64_t)(m - 1) * p->sr;
        int kb, ke;
        pt__attn_krange(p, r0, r0 + m, &kb, &ke);
        for (n0 = 0; n0 < p->N; n0 += 16) {
            const int nn = PT__MIN(16, p->N - n0);
            memset(acc, 0, sizeof acc);
            for (k = kb; k < ke; k++) {
                const int64_t ko = (int64_t)k * p->sk;
                const float x0 = a0[ko], x1 = a1[ko], x2 = a2[ko], x3 = a3[ko];
                const float *b = p->B + (int64_t)k * p->ldb + n0;
                if (nn < 16) {
                    for (n = 0; n < 16; n++) bb[n] = n < nn ? b[n] : 0.0f;
                    b = bb;
                }
                for (n = 0; n < 16; n++) {
                    acc[0][n] += x0 * b[n];
                    acc[1][n] += x1 * b[n];
                    acc[2][n] += x2 * b[n];
                    acc[3][n] += x3 * b[n];
                }
            }
            for (i = 0; i < m; i++) {
                float *c = p->C + (int64_t)(r0 + i) * p->ldc + n0;
                if (p->acc) for (n = 0; n < nn; n++) c[n] += p->alpha * acc[i][n];
                else for (n = 0; n < nn; n++) c[n] = p->alpha * acc[i][n];
            }
        }
    }
}
static void pt__attn_mm_c(const pt__attn_mm *p) { pt__attn_mm_c_impl(p); }
#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
__attribute__((target("avx2,fma"))) static void pt__attn_mm_avx2(const pt__attn_mm *p) { pt__attn_mm_c_impl(p); }
#endif

/* In place on St [nk rows (keys) x ld]: for query column c < bq (query i0 + c) and key j <= i0 + c,
   P = exp(St - m_c) with m_c the column max; other entries (and columns bq..16-aligned) become 0.
   mx[c] = m_c, sm[c] = sum_j P. */
static void pt__attn_sm_fwd_c(float *S, int64_t ld, int nk, int i0, int bq, float *mx, float *sm) {
    const int nq = (bq + 15) & ~15;
    int c, j;
    for (c = 0; c < nq; c++) {
        const int jend = c < bq ? PT__MIN(nk, i0 + c + 1) : 0;
        float m = -INFINITY, s = 0.0f;
        for (j = 0; j < jend; j++) m = PT__MAX(m, S[(int64_t)j * ld + c]);
        for (j = 0; j < jend; j++) {
            float e = expf(S[(int64_t)j * ld + c] - m);
            S[(int64_t)j * ld + c] = e;
            s += e;
        }
        for (; j < nk; j++) S[(int64_t)j * ld + c] = 0.0f;
        mx[c] = m;
        sm[c] = s;
    }
}

/* Backward: S = exp(S - lse_c) (masked entries 0), then dP = S * (dP - D_c). */
static void pt__attn_sm_bwd_c(float *S, float *dP, int64_t ld, int nk, int i0, int bq, const float *ls,
                              const float *D) {
    const int nq = (bq + 15) & ~15;
    int c, j;
    for (c = 0; c < nq; c++) {
        const int jend = c < bq ? PT__MIN(nk, i0 + c + 1) : 0;
        for (j = 0; j < jend; j++) {
            const int64_t o = (int64_t)j * ld + c;
            const float pv = expf(S[o] - ls[c]);
            S[o] = pv;
            dP[o] = pv * (dP[o] - D[c]);
        }
        for (; j < nk; j++) S[(int64_t)j * ld + c] = dP[(int64_t)j * ld + c] = 0.0f;
    }
}

/* ---- AVX-512 kernels ------------------------------------------------------------------------- */
#if PT__ATTN_X86
#define PT__ATTN_TGT __attribute__((target("avx512f,fma")))

#define PT__AK_R6(X) X(0) X(1) X(2) X(3) X(4) X(5)
#define PT__AK_R12(X) PT__AK_R6(X) X(6) X(7) X(8) X(9) X(10) X(11)
/* rows past m repeat row m-1 (read in bounds; their results are not stored) */
#define PT__AK_PTR(r) const float *a##r = A + (int64_t)((r) < m ? (r) : m - 1) * sr;
#define PT__AK_ZERO(r) __m512 c##r##_0 = _mm512_setzero_ps(), c##r##_1 = c##r##_0, c##r##_2 = c##r##_0, \
                              c##r##_3 = c##r##_0;
#define PT__AK_FMA(r)                                               \
    {                                                               \
        const __m512 av = _mm512_set1_ps(a##r[ko]);                 \
        c##r##_0 = _mm512_fmadd_ps(av, b0, c##r##_0);               \
        if (NV > 1) c##r##_1 = _mm512_fmadd_ps(av, b1, c##r##_1);   \
        if (NV > 2) {                                               \
            c##r##_2 = _mm512_fmadd_ps(av, b2, c##r##_2);           \
            c##r##_3 = _mm512_fmadd_ps(av, b3, c##r##_3);           \
        }                                                           \
    }
#define PT__AK_ST(r)                                                          \
    if ((r) < m) {                                                            \
        float *cr = C + (int64_t)(r) * ldc;                                   \
        pt__attn_st512(cr, c##r##_0, va, acc, k0);                            \
        if (NV > 1) pt__attn_st512(cr + 16, c##r##_1, va, acc, k1);           \
        if (NV > 2) {                                                         \
            pt__attn_st512(cr + 32, c##r##_2, va, acc, k2);                   \
            pt__attn_st512(cr + 48, c##r##_3, va, acc, k3);                   \
        }                                                                     \
    }

PT__ATTN_TGT static inline void pt__attn_st512(float *c, __m512 x, __m512 va, int acc, __mmask16 k) {
    if (acc) x = _mm512_fmadd_ps(x, va, _mm512_maskz_loadu_ps(k, c));
    else x = _mm512_mul_ps(x, va);
    _mm512_mask_storeu_ps(c, k, x);
}

/* An m x (16*NV) tile (m <= rows of the variant) over k in [kb, ke); mk: the NV column masks. */
#define PT__AK_FN(NAME, NVV, ROWS)                                                                    \
    PT__ATTN_TGT static void NAME(const float *A, int64_t sr, int64_t sk, int m, int kb, int ke,       \
                                  const float *B, int64_t ldb, float *C, int64_t ldc, float alpha,     \
                                  int acc, const __mmask16 *mk) {                                      \
        const int NV = NVV;                                                                            \
        const __mmask16 k0 = mk[0], k1 = mk[1], k2 = mk[2], k3 = mk[3];                                \
        const __m512 va = _mm512_set1_ps(alpha);                                                       \
        int k;                                                                                         \
        ROWS(PT__AK_PTR)                                                                               \
        ROWS(PT__AK_ZERO)                                                                              \
        for (k = kb; k < ke; k++) {                                                                    \
            const float *bk = B + (int64_t)k * ldb;                                                    \
            const int64_t ko = (int64_t)k * sk;                                                        \
            const __m512 b0 = _mm512_maskz_loadu_ps(k0, bk);                                           \
            const __m512 b1 = NV > 1 ? _mm512_maskz_loadu_ps(k1, bk + 16) : b0;                        \
            const __m512 b2 = NV > 2 ? _mm512_maskz_loadu_ps(k2, bk + 32) : b0;                        \
            const __m512 b3 = NV > 2 ? _mm512_maskz_loadu_ps(k3, bk + 48) : b0;                        \
            ROWS(PT__AK_FMA)                                                                           \
        }                                                                                              \
        ROWS(PT__AK_ST)                                                                                \
    }

PT__AK_FN(pt__attn_k6x4, 4, PT__AK_R6)
PT__AK_FN(pt__attn_k12x2, 2, PT__AK_R12)
PT__AK_FN(pt__attn_k12x1, 1, PT__AK_R12)

static __mmask16 pt__attn_lanes(int n) { return (__mmask16)(n >= 16 ? 0xFFFF : n <= 0 ? 0 : (1u << n) - 1u); }

PT__ATTN_TGT static void pt__attn_mm_avx512(const pt__attn_mm *p) {
    int n0 = 0;
    while (n0 < p->N) {
        const int rem = p->N - n0;
        const int nv = rem > 48 ? 4 : rem > 16 ? 2 : 1, rows = nv == 4 ? 6 : 12;
        const int w = PT__MIN(rem, 16 * nv);
        __mmask16 mk[4];
        int v, r0;
        for (v = 0; v < 4; v++) mk[v] = v < nv ? pt__attn_lanes(w - 16 * v) : (__mmask16)0;
        for (r0 = 0; r0 < p->M; r0 += rows) {
            const int m = PT__MIN(rows, p->M - r0);
            const float *A = p->A + (int64_t)r0 * p->sr;
            const float *B = p->B + n0;
            float *C = p->C + (int64_t)r0 * p->ldc + n0;
            int kb, ke;
            pt__attn_krange(p, r0, r0 + m, &kb, &ke);
            if (nv == 4) pt__attn_k6x4(A, p->sr, p->sk, m, kb, ke, B, p->ldb, C, p->ldc, p->alpha, p->acc, mk);
            else if (nv == 2) pt__attn_k12x2(A, p->sr, p->sk, m, kb, ke, B, p->ldb, C, p->ldc, p->alpha, p->acc, mk);
            else pt__attn_k12x1(A, p->sr, p->sk, m, kb, ke, B, p->ldb, C, p->ldc, p->alpha, p->acc, mk);
        }
        n0 += w;
    }
}

/* exp(x), x clamped to [-104, 88.7] (exp(-104) flushes to 0); ~1 ulp. (The _mask_ forms with an
   explicit source avoid _mm512_undefined_ps, which g++ 12 flags as maybe-uninitialized.) */
PT__ATTN_TGT static inline __m512 pt__attn_exp512(__m512 x) {
    const __mmask16 all = (__mmask16)0xFFFF;
    __m512 n, r, q;
    x = _mm512_mask_max_ps(x, all, x, _mm512_set1_ps(-104.0f));
    x = _mm512_mask_min_ps(x, all, x, _mm512_set1_ps(88.7f));
    n = _mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f));
    n = _mm512_mask_roundscale_ps(n, all, n, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187e-06f), r);
    q = _mm512_set1_ps(1.0f / 720.0f);
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(1.0f / 120.0f));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(1.0f / 24.0f));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(1.0f / 6.0f));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(0.5f));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(1.0f));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(1.0f));
    return _mm512_mask_scalef_ps(q, all, q, n);
}

/* lanes l of the 16 columns from c0 valid on key row j: i0 + c0 + l >= j, and c0 + l < bq */
static __mmask16 pt__attn_rowmask(int j, int i0, int c0, __mmask16 tail) {
    const int s = j - i0 - c0;
    return (__mmask16)(s <= 0 ? tail : s >= 16 ? 0 : (tail & (0xFFFFu << s)));
}

PT__ATTN_TGT static void pt__attn_sm_fwd_avx512(float *S, int64_t ld, int nk, int i0, int bq, float *mx, float *sm) {
    int c0, j;
    for (c0 = 0; c0 < bq; c0 += 16) {
        const __mmask16 tail = pt__attn_lanes(bq - c0);
        const int jend = PT__MIN(nk, i0 + c0 + 16), jfull = PT__MIN(jend, i0 + c0 + 1);
        __m512 vm = _mm512_set1_ps(-INFINITY), vs = _mm512_setzero_ps();
        float *s = S + c0;
        for (j = 0; j < jfull; j++) vm = _mm512_mask_max_ps(vm, tail, vm, _mm512_load_ps(s + (int64_t)j * ld));
        for (; j < jend; j++)
            vm = _mm512_mask_max_ps(vm, pt__attn_rowmask(j, i0, c0, tail), vm, _mm512_load_ps(s + (int64_t)j * ld));
        for (j = 0; j < jend; j++) {
            float *sj = s + (int64_t)j * ld;
            const __mmask16 mk = j < jfull ? tail : pt__attn_rowmask(j, i0, c0, tail);
            const __m512 e = _mm512_maskz_mov_ps(mk, pt__attn_exp512(_mm512_sub_ps(_mm512_load_ps(sj), vm)));
            _mm512_store_ps(sj, e);
            vs = _mm512_add_ps(vs, e);
        }
        for (; j < nk; j++) _mm512_store_ps(s + (int64_t)j * ld, _mm512_setzero_ps());
        _mm512_store_ps(mx + c0, vm);
        _mm512_store_ps(sm + c0, vs);
    }
}

PT__ATTN_TGT static void pt__attn_sm_bwd_avx512(float *S, float *dP, int64_t ld, int nk, int i0, int bq,
                                                const float *ls, const float *D) {
    int c0, j;
    for (c0 = 0; c0 < bq; c0 += 16) {
        const __mmask16 tail = pt__attn_lanes(bq - c0);
        const int jend = PT__MIN(nk, i0 + c0 + 16), jfull = PT__MIN(jend, i0 + c0 + 1);
        const __m512 vl = _mm512_load_ps(ls + c0), vd = _mm512_load_ps(D + c0);
        float *s = S + c0, *d = dP + c0;
        for (j = 0; j < jend; j++) {
            const int64_t o = (int64_t)j * ld;
            const __mmask16 mk = j < jfull ? tail : pt__attn_rowmask(j, i0, c0, tail);
            const __m512 e = _mm512_maskz_mov_ps(mk, pt__attn_exp512(_mm512_sub_ps(_mm512_load_ps(s + o), vl)));
            _mm512_store_ps(s + o, e);
            _mm512_store_ps(d + o, _mm512_mul_ps(e, _mm512_sub_ps(_mm512_load_ps(d + o), vd)));
        }
        for (; j < nk; j++) {
            _mm512_store_ps(s + (int64_t)j * ld, _mm512_setzero_ps());
            _mm512_store_ps(d + (int64_t)j * ld, _mm512_setzero_ps());
        }
    }
}
#endif /* PT__ATTN_X86 */

/* ---- dispatch ---------------------------------------------------------------------------------- */
typedef struct pt__attn_fns {
    void (*mm)(const pt__attn_mm *p);
    void (*sm_fwd)(float *S, int64_t ld, int nk, int i0, int bq, float *mx, float *sm);
    void (*sm_bwd)(float *S, float *dP, int64_t ld, int nk, int i0, int bq, const float *ls, const float *D);
} pt__attn_fns;

/* ctx->attn_kernel: 0 = pick at run time, 1 = portable C, 2 = AVX-512, 3 = portable C compiled for
   AVX2 (tests set it to cover every path) */
static pt__attn_fns pt__attn_pick(const pt_ctx *ctx) {
    pt__attn_fns f;
    int k = ctx->attn_kernel;
#if PT__ATTN_X86
    __builtin_cpu_init();
    if (k == 0) k = __builtin_cpu_supports("avx512f") ? 2 : 3;
    if (k == 2 && !__builtin_cpu_supports("avx512f")) k = 3;
    if (k == 3 && !(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))) k = 1;
    if (k == 2) {
        f.mm = pt__attn_mm_avx512;
        f.sm_fwd = pt__attn_sm_fwd_avx512;
        f.sm_bwd = pt__attn_sm_bwd_avx512;
        return f;
    }
    if (k == 3) {
        f.mm = pt__attn_mm_avx2;
        f.sm_fwd = pt__attn_sm_fwd_c;
        f.sm_bwd = pt__attn_sm_bwd_c;
        return f;
    }
#endif
    (void)k;
    f.mm = pt__attn_mm_c;
    f.sm_fwd = pt__attn_sm_fwd_c;
    f.sm_bwd = pt__attn_sm_bwd_c;
    return f;
}

/* Qt [hs x BQ] = rows [0, bq) of X (row stride ldx) transposed, columns bq.. zero-filled to 16. */
static void pt__attn_pack_t(float *Qt, const float *X, int64_t ldx, int bq, int hs) {
    const int nq = (bq + 15) & ~15;
    int c, d;
    for (c = 0; c < bq; c++) {
        const float *x = X + (int64_t)c * ldx;
        for (d = 0; d < hs; d++) Qt[(int64_t)d * PT__ATTN_BQ + c] = x[d];
    }
    for (d = 0; d < hs; d++)
        for (c = bq; c < nq; c++) Qt[(int64_t)d * PT__ATTN_BQ + c] = 0.0f;
}

static int64_t pt__attn_rup16(int64_t n) { return (n + 15) & ~(int64_t)15; }

/* ---- forward ---------------------------------------------------------------------------------- */
static void pt__attn_fwd_item(const pt__attn_fns *f, float *ws, const float *qkv, float *out, float *lse,
                              int64_t item, int T, int C, int H) {
    const int hs = C / H, BQ = PT__ATTN_BQ, nblk = (T + BQ - 1) / BQ;
    const int qb = (int)(item % nblk), h = (int)(item / nblk % H);
    const int64_t b = item / ((int64_t)nblk * H), ld3 = 3 * (int64_t)C;
    const int i0 = qb * BQ, bq = PT__MIN(BQ, T - i0), nk = i0 + bq, nq = (bq + 15) & ~15;
    const float scale = 1.0f / sqrtf((float)hs);
    const float *base = qkv + b * T * ld3 + (int64_t)h * hs;
    float *Qt = ws, *S = Qt + pt__attn_rup16((int64_t)hs * BQ), *mx = S + (int64_t)T * BQ, *sm = mx + BQ;
    float *o = out + (b * T + i0) * C + (int64_t)h * hs, *l = lse + (b * H + h) * T + i0;
    pt__attn_mm p;
    int c, d;
    pt__attn_pack_t(Qt, base + (int64_t)i0 * ld3, ld3, bq, hs);
    /* St = scale * K Qt : [nk x nq] */
    pt__attn_mm_init(&p, base + C, ld3, 1, Qt, BQ, S, BQ, nk, nq, hs, scale, 0);
    f->mm(&p);
    f->sm_fwd(S, BQ, nk, i0, bq, mx, sm);
    /* O = P^T V : rows = queries, k = keys (only keys <= the tile's last query) */
    pt__attn_mm_init(&p, S, 1, BQ, base + 2 * (int64_t)C, ld3, o, C, bq, hs, nk, 1.0f, 0);
    p.kmode = 1;
    p.koff = i0;
    f->mm(&p);
    for (c = 0; c < bq; c++) {
        const float inv = 1.0f / sm[c];
        float *oc = o + (int64_t)c * C;
        for (d = 0; d < hs; d++) oc[d] *= inv;
        l[c] = mx[c] + logf(sm[c]);
    }
}

static void pt__cpu_attn_fwd(pt_ctx *ctx, const pt_tensor *out, const pt_tensor *lse, const pt_tensor *qkv, int B,
                             int T, int C, int H) {
    const int nt = ctx->nthreads < 1 ? 1 : ctx->nthreads;
    int64_t per, nitems, it;
    float *work, *q, *o, *l;
    pt__attn_fns f;
    int hs;
    if (B <= 0 || T <= 0 || H <= 0 || C <= 0) return;
    if (C % H) {
        pt__fail(ctx, PT_ERR_SHAPE, "attention: width %d not divisible by %d heads", C, H);
        return;
    }
    hs = C / H;
    per = pt__attn_ws(T, hs, 0);
    nitems = (int64_t)B * H * ((T + PT__ATTN_BQ - 1) / PT__ATTN_BQ);
    work = pt__work(ctx, per * nt);
    if (!work) return;
    f = pt__attn_pick(ctx);
    q = PT__F(qkv);
    o = PT__F(out);
    l = PT__F(lse);
    PT__PAR_FOR(ctx)
    for (it = 0; it < nitems; it++) {
        int tid = 0;
#ifdef _OPENMP
        tid = omp_get_thread_num();
#endif
        pt__attn_fwd_item(&f, work + per * tid, q, o, l, it, T, C, H);
    }
}

/* ---- backward --------------------------------------------------------------------------------- */
static void pt__attn_bwd_bh(const pt__attn_fns *f, float *ws, float *dqkv, const float *dout, const float *qkv,
                            const float *out, const float *lse, int64_t bh, int T, int C, int H) {
    const int hs = C / H, BQ = PT__ATTN_BQ, h = (int)(bh % H);
    const int64_t b = bh / H, ld3 = 3 * (int64_t)C, tile = (int64_t)T * BQ;
    const float scale = 1.0f / sqrtf((float)hs);
    const float *base = qkv + b * T * ld3 + (int64_t)h * hs;
    const float *dob = dout + b * T * C + (int64_t)h * hs, *ob = out + b * T * C + (int64_t)h * hs;
    const float *lb = lse + bh * T;
    float *db = dqkv + b * T * ld3 + (int64_t)h * hs;
    float *Qt = ws, *dOt = Qt + pt__attn_rup16((int64_t)hs * BQ), *S = dOt + pt__attn_rup16((int64_t)hs * BQ);
    float *dP = S + tile, *D = dP + tile, *ls = D + BQ;
    pt__attn_mm p;
    int i0, c, d;
    for (i0 = 0; i0 < T; i0 += BQ) {
        const int bq = PT__MIN(BQ, T - i0), nk = i0 + bq, nq = (bq + 15) & ~15;
        pt__attn_pack_t(Qt, base + (int64_t)i0 * ld3, ld3, bq, hs);
        pt__attn_pack_t(dOt, dob + (int64_t)i0 * C, C, bq, hs);
        for (c = 0; c < nq; c++) {
            float s = 0.0f;
            if (c < bq) {
                const float *x = dob + (int64_t)(i0 + c) * C, *y = ob + (int64_t)(i0 + c) * C;
                for (d = 0; d < hs; d++) s += x[d] * y[d];
            }
            D[c] = s;
            ls[c] = c < bq ? lb[i0 + c] : 0.0f;
        }
        /* St = scale * K Qt, dPt = V dOt : [nk x nq] */
        pt__attn_mm_init(&p, base + C, ld3, 1, Qt, BQ, S, BQ, nk, nq, hs, scale, 0);
        f->mm(&p);
        pt__attn_mm_init(&p, base + 2 * (int64_t)C, ld3, 1, dOt, BQ, dP, BQ, nk, nq, hs, 1.0f, 0);
        f->mm(&p);
        f->sm_bwd(S, dP, BQ, nk, i0, bq, ls, D);
        /* dV += P dO, dK += scale dS Q : rows = keys, k = the block's queries at or after the key */
        pt__attn_mm_init(&p, S, BQ, 1, dob + (int64_t)i0 * C, C, db + 2 * (int64_t)C, ld3, nk, hs, bq, 1.0f, 1);
        p.kmode = 2;
        p.koff = -i0;
        f->mm(&p);
        pt__attn_mm_init(&p, dP, BQ, 1, base + (int64_t)i0 * ld3, ld3, db + C, ld3, nk, hs, bq, scale, 1);
        p.kmode = 2;
        p.koff = -i0;
        f->mm(&p);
        /* dQ += scale dS^T K : rows = queries, k = keys up to the query */
        pt__attn_mm_init(&p, dP, 1, BQ, base + C, ld3, db + (int64_t)i0 * ld3, ld3, bq, hs, nk, scale, 1);
        p.kmode = 1;
        p.koff = i0;
        f->mm(&p);
    }
}

static void pt__cpu_attn_bwd(pt_ctx *ctx, const pt_tensor *dqkv, const pt_tensor *dout, const pt_tensor *qkv,
                             const pt_tensor *out, const pt_tensor *lse, int B, int T, int C, int H) {
    const int nt = ctx->nthreads < 1 ? 1 : ctx->nthreads;
    int64_t per, nitems, it;
    float *work, *dq, *q, *o, *l, *dO;
    pt__attn_fns f;
    int hs;
    if (B <= 0 || T <= 0 || H <= 0 || C <= 0) return;
    if (C % H) {
        pt__fail(ctx, PT_ERR_SHAPE, "attention: width %d not divisible by %d heads", C, H);
        return;
    }
    hs = C / H;
    per = pt__attn_ws(T, hs, 1);
    nitems = (int64_t)B * H;
    work = pt__work(ctx, per * nt);
    if (!work) return;
    f = pt__attn_pick(ctx);
    dq = PT__F(dqkv);
    dO = PT__F(dout);
    q = PT__F(qkv);
    o = PT__F(out);
    l = PT__F(lse);
    PT__PAR_FOR(ctx)
    for (it = 0; it < nitems; it++) {
        int tid = 0;
#ifdef _OPENMP
        tid = omp_get_thread_num();
#endif
        pt__attn_bwd_bh(&f, work + per * tid, dq, dO, q, o, l, it, T, C, H);
    }
}

// >>cpu  the CPU backend: reference kernels for every table entry
/* Owns: pt__cpu_backend and its kernels (elementwise, row-wise, layout, images, optimizers)
   Invariants: each output element written by one thread; reductions in fixed chunks combined in a
   fixed order
   Entry points: pt__cpu_backend */
/* CPU backend: the reference kernels
   Threading and determinism: loops are split with OpenMP (static schedule, ctx->nthreads) over
   output elements, rows, planes, column blocks or fixed-size chunks; small loops stay serial
   (PT__CPU_PAR_MIN), which changes nothing but speed because every output element is computed by
   one thread with the same instructions in the same order whichever path runs. Reductions over
   rows (axpy_reduce, mul_acc, layernorm dw/db, chan_bias_bwd, embed_bwd) give each thread whole
   columns and loop over rows serially inside; sums over many elements (sum, sumsq, small-column
   row sums) use chunks of a fixed size (PT__CPU_CHUNK elements, never derived from the thread
   count) whose partials are combined serially in chunk order. No atomics, no reduction clauses:
   results are bit-identical for any thread count. Row statistics (softmax, logsumexp, layernorm
   mean/var) and sum/sumsq accumulate in double. */

#ifndef PT__RESTRICT
#if defined(__GNUC__) || defined(__clang__) || (defined(_MSC_VER) && defined(__cplusplus))
#define PT__RESTRICT __restrict
#else
#define PT__RESTRICT
#endif
#endif

#define PT__CPU_CHUNK 4096    /* elements per work item and per reduction chunk (a constant) */
#define PT__CPU_PAR_MIN 32768 /* less work than this (elements touched) stays on one thread */
#define PT__CPU_CB 64         /* columns per work item in column-parallel row reductions */

/* PT__PAR_FOR with a size threshold: parallel only when work >= PT__CPU_PAR_MIN. */
#if defined(_OPENMP)
#define PT__CPU_PAR_FOR(ctx, work)                                                                        \
    PT__PRAGMA(omp parallel for schedule(static) num_threads((ctx)->nthreads > 1 ? (ctx)->nthreads : 1) \
                   if ((work) >= PT__CPU_PAR_MIN))
#else /* one statement that only marks ctx used: `PT__CPU_PAR_FOR(ctx, n) for (...)` stays one statement */
#define PT__CPU_PAR_FOR(ctx, work) \
    if (0) {                       \
        (void)(ctx);               \
        (void)(work);              \
    } else
#endif

/* asks for vectorization of the next loop (OpenMP simd: works at -O2, where GCC's cheap cost
   model skips loops with calls to the inline exp below); nothing without OpenMP */
#if defined(_OPENMP)
#define PT__SIMD PT__PRAGMA(omp simd)
#else
#define PT__SIMD
#endif

#define PT__CPU_NCHUNK(n) (((n) + PT__CPU_CHUNK - 1) / PT__CPU_CHUNK)

static int64_t pt__cpu_cols(const pt_tensor *t) { return t->ndim > 0 ? t->shape[t->ndim - 1] : 1; }
static char *pt__cpu_bytes(const pt_tensor *t) {
    return (char *)t->st->host + t->off * pt_dtype_size(t->dtype);
}

/* exp(x) in float arithmetic only (Cody-Waite reduction, degree-6 polynomial; within 1.5 ulp), written
   so that loops calling it vectorize (libm's expf/tanhf calls do not; GCC -O3 or -O2 -ftree-vectorize). The result is exactly 0 for
   x <= -88 (and -inf), exp(88) for x >= 88 (and +inf), NaN for NaN. The exponent is rounded with
   the 1.5 * 2^23 bit trick and clamped as an integer (no float-to-int conversion of big values, and
   no constant branch results, which would stop the vectorizer). */
static inline float pt__cpu_expf(float x) {
    float z = x < -88.0f ? -88.0f : x, t, n, r, p, sc;
    uint32_t tb, bits;
    int32_t i;
    z = z > 88.0f ? 88.0f : z;
    t = x * 1.44269504088896341f + 12582912.0f; /* the low mantissa bits hold round(x log2 e) */
    memcpy(&tb, &t, sizeof tb);
    i = (int32_t)(tb - 0x4B400000u);
    i = i < -127 ? -127 : i;
    i = i > 127 ? 127 : i;
    n = (float)i;
    r = z - n * 0.693359375f; /* ln 2 in two parts */
    r = r - n * -2.12194440e-4f;
    p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    bits = ((uint32_t)i + 127u) << 23; /* 2^i; i = -127 (x <= -88): 0 */
    memcpy(&sc, &bits, sizeof sc);
    return p * sc;
}
/* GELU pieces without cancellation: with a = exp(-2|u|), 1 + |tanh u| = 2/(1+a) and
   1 - |tanh u| = 2a/(1+a); so 1 + tanh u and 1 - tanh^2 u = (1+t)(1-t) are exact to a few ulp. */
static inline void pt__cpu_tanh_parts(float u, float *one_plus_t, float *one_minus_t2) {
    float a = pt__cpu_expf(-2.0f * (u < 0.0f ? -u : u)), s = 2.0f / (1.0f + a), q = a * s;
    *one_plus_t = u < 0.0f ? q : s;
    *one_minus_t2 = s * q;
}

#define PT__CPU_LANES 16 /* independent float partial sums/maxima, so the loops vectorize */

/* max of x[0, n), n >= 1 (NaNs ignored unless all are NaN) */
static float pt__cpu_maxf(const float *PT__RESTRICT x, int64_t n) {
    float m = x[0];
    int64_t i = 0;
    if (n >= PT__CPU_LANES) {
        float lm[PT__CPU_LANES];
        for (int l = 0; l < PT__CPU_LANES; l++) lm[l] = x[l];
        for (i = PT__CPU_LANES; i + PT__CPU_LANES <= n; i += PT__CPU_LANES)
            for (int l = 0; l < PT__CPU_LANES; l++) lm[l] = x[i + l] > lm[l] ? x[i + l] : lm[l];
        for (int l = 0; l < PT__CPU_LANES; l++) m = lm[l] > m ? lm[l] : m;
    }
    for (; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}
/* sum of exp(x[i] - m) over [0, n): 16 float lanes, combined in a fixed order in double */
static double pt__cpu_expsum(const float *PT__RESTRICT x, int64_t n, float m) {
    float ls[PT__CPU_LANES];
    double s = 0.0;
    int64_t i = 0;
    for (int l = 0; l < PT__CPU_LANES; l++) ls[l] = 0.0f;
    for (; i + PT__CPU_LANES <= n; i += PT__CPU_LANES) {
        PT__SIMD
        for (int l = 0; l < PT__CPU_LANES; l++) ls[l] += pt__cpu_expf(x[i + l] - m);
    }
    for (int l = 0; l < PT__CPU_LANES; l++) s += (double)ls[l];
    for (; i < n; i++) s += (double)pt__cpu_expf(x[i] - m);
    return s;
}
/* as pt__cpu_expsum, also storing y[i] = exp(x[i] - m) */
static double pt__cpu_expsum_st(float *PT__RESTRICT y, const float *PT__RESTRICT x, int64_t n, float m) {
    float ls[PT__CPU_LANES];
    double s = 0.0;
    int64_t i = 0;
    for (int l = 0; l < PT__CPU_LANES; l++) ls[l] = 0.0f;
    for (; i + PT__CPU_LANES <= n; i += PT__CPU_LANES) {
        PT__SIMD
        for (int l = 0; l < PT__CPU_LANES; l++) {
            float e = pt__cpu_expf(x[i + l] - m);
            y[i + l] = e;
            ls[l] += e;
        }
    }
    for (int l = 0; l < PT__CPU_LANES; l++) s += (double)ls[l];
    for (; i < n; i++) {
        float e = pt__cpu_expf(x[i] - m);
        y[i] = e;
        s += (double)e;
    }
    return s;
}

/* ---- storage ---------------------------------------------------------------------------------- */
static pt_status pt__cpu_st_alloc(pt_ctx *ctx, pt_storage *st, int64_t bytes) {
    void *raw;
    if (bytes < 0) bytes = 0;
    raw = pt__malloc(ctx, (size_t)bytes + PT__ALIGN);
    if (!raw) {
        pt__fail(ctx, PT_ERR_OOM, "pt: out of memory allocating %lld bytes", (long long)bytes);
        return PT_ERR_OOM;
    }
    st->raw = raw;
    st->host = (void *)(((uintptr_t)raw + PT__ALIGN - 1) & ~(uintptr_t)(PT__ALIGN - 1));
    st->bytes = bytes;
    return PT_OK;
}
static void pt__cpu_st_free(pt_ctx *ctx, pt_storage *st) {
    (void)ctx;
    if (st->raw) PT_FREE(st->raw);
    st->raw = NULL;
    st->host = NULL;
    st->bytes = 0;
}
static void pt__cpu_write(pt_ctx *ctx, const pt_tensor *dst, const void *src, int64_t bytes) {
    (void)ctx;
    if (bytes > 0) memcpy(pt__cpu_bytes(dst), src, (size_t)bytes);
}
static void pt__cpu_read(pt_ctx *ctx, const pt_tensor *src, void *dst, int64_t bytes) {
    (void)ctx;
    if (bytes > 0) memcpy(dst, pt__cpu_bytes(src), (size_t)bytes);
}
static void *pt__cpu_read_start(pt_ctx *ctx, const pt_tensor *src, void *dst, int64_t bytes) { /* done at once */
    pt__cpu_read(ctx, src, dst, bytes);
    return NULL;
}
static int pt__cpu_read_wait(pt_ctx *ctx, void *h, int block) {
    (void)ctx, (void)h, (void)block;
    return 1;
}

/* ---- elementwise ------------------------------------------------------------------------------ */
static void pt__cpu_fill(pt_ctx *ctx, const pt_tensor *t, float v) {
    int64_t n = pt_numel(t), nch = PT__CPU_NCHUNK(n);
    if (t->dtype != PT_F32 && t->dtype != PT_I32) { /* storage types: zero only */
        if (v == 0.0f) memset(pt__cpu_bytes(t), 0, (size_t)(n * pt_dtype_size(t->dtype)));
        else pt__fail(ctx, PT_ERR_DTYPE, "pt: fill of a non-f32/i32 tensor with %g (only 0 is supported)", (double)v);
        return;
    }
    if (t->dtype == PT_I32) {
        int32_t *PT__RESTRICT p = PT__I(t);
        int32_t iv = (int32_t)v;
        PT__CPU_PAR_FOR(ctx, n)
        for (int64_t c = 0; c < nch; c++) {
            int64_t i0 = c * PT__CPU_CHUNK, i1 = PT__MIN(n, i0 + PT__CPU_CHUNK);
            for (int64_t i = i0; i < i1; i++) p[i] = iv;
        }
    } else {
        float *PT__RESTRICT p = PT__F(t);
        PT__CPU_PAR_FOR(ctx, n)
        for (int64_t c = 0; c < nch; c++) {
            int64_t i0 = c * PT__CPU_CHUNK, i1 = PT__MIN(n, i0 + PT__CPU_CHUNK);
            for (int64_t i = i0; i < i1; i++) p[i] = v;
        }
    }
}

static void pt__cpu_add_f(float *PT__RESTRICT d, const float *PT__RESTRICT s, int64_t n) {
    for (int64_t i = 0; i < n; i++) d[i] += s[i];
}
static void pt__cpu_add_i(int32_t *PT__RESTRICT d, const int32_t *PT__RESTRICT s, int64_t n) {
    for (int64_t i = 0; i < n; i++) d[i] = (int32_t)((uint32_t)d[i] + (uint32_t)s[i]); /* wraps */
}

/* d (+)= s over n elements of esz bytes (accumulate: f32, or i32 when is_i32) */
static void pt__cpu_move(void *d, const void *s, int64_t n, int64_t esz, int accumulate, int is_i32) {
    if (n <= 0) return;
    if (!accumulate) {
        if (d != s) memmove(d, s, (size_t)(n * esz));
    }
    else if (is_i32) pt__cpu_add_i((int32_t *)d, (const int32_t *)s, n);
    else pt__cpu_add_f((float *)d, (const float *)s, n);
}

static void pt__cpu_copy(pt_ctx *ctx, const pt_tensor *dst, const pt_tensor *src, int accumulate) {
    int64_t n = pt_numel(dst), nch = PT__CPU_NCHUNK(n), esz = pt_dtype_size(dst->dtype);
    char *d = pt__cpu_bytes(dst);
    const char *s = pt__cpu_bytes(src);
    int is_i32 = dst->dtype == PT_I32;
    if (accumulate && dst->dtype != PT_F32 && !is_i32) {
        pt__fail(ctx, PT_ERR_DTYPE, "pt: accumulating copy of a non-f32/i32 tensor");
        return;
    }
    if (accumulate && d == s) { /* x += x: elementwise doubling, still safe */
        if (is_i32) {
            int32_t *p = (int32_t *)d;
            for (int64_t i = 0; i < n; i++) p[i] = (int32_t)((uint32_t)p[i] * 2u);
        } else {
            float *p = (float *)d;
            for (int64_t i = 0; i < n; i++) p[i] += p[i];
        }
        return;
    }
    if (d == s) return;
    PT__CPU_PAR_FOR(ctx, n)
    for (int64_t c = 0; c < nch; c++) {
        int64_t i0 = c * PT__CPU_CHUNK, i1 = PT__MIN(n, i0 + PT__CPU_CHUNK);
        pt__cpu_move(d + i0 * esz, s + i0 * esz, i1 - i0, esz, accumulate, is_i32);
    }
}

/* o[i] = a[i] op b[i] (o may alias a) */
static void pt__cpu_binary_seg(int op, float *o, const float *a, const float *b, int64_t n) {
    if (op == PT__ADD)
        for (int64_t i = 0; i < n; i++) o[i] = a[i] + b[i];
    else if (op == PT__SUB)
        for (int64_t i = 0; i < n; i++) o[i] = a[i] - b[i];
    else
        for (int64_t i = 0; i < n; i++) o[i] = a[i] * b[i];
}
static void pt__cpu_binary_sc(int op, float *o, const float *a, float b, int64_t n) {
    if (op == PT__ADD)
        for (int64_t i = 0; i < n; i++) o[i] = a[i] + b;
    else if (op == PT__SUB)
        for (int64_t i = 0; i < n; i++) o[i] = a[i] - b;
    else
        for (int64_t i = 0; i < n; i++) o[i] = a[i] * b;
}
static void pt__cpu_binary(pt_ctx *ctx, int op, const pt_tensor *out, const pt_tensor *a, const pt_tensor *b) {
    int64_t n = pt_numel(a), nb = pt_numel(b), nch = PT__CPU_NCHUNK(n);
    float *o = PT__F(out);
    const float *x = PT__F(a), *y = PT__F(b);
    if (nb <= 0) return;
    PT__CPU_PAR_FOR(ctx, n)
    for (int64_t c = 0; c < nch; c++) {
        int64_t i = c * PT__CPU_CHUNK, i1 = PT__MIN(n, i + PT__CPU_CHUNK);
        if (nb == n) pt__cpu_binary_seg(op, o + i, x + i, y + i, i1 - i);
        else if (nb == 1) pt__cpu_binary_sc(op, o + i, x + i, y[0], i1 - i);
        else
            while (i < i1) {
                int64_t j = i % nb, len = PT__MIN(nb - j, i1 - i);
                pt__cpu_binary_seg(op, o + i, x + i, y + j, len);
                i += len;
            }
    }
}

/* acc[j] += x[j] * y[(yi + j) % ny] for j < n, where 0 <= yi < ny */
static void pt__cpu_fma_wrap(float *PT__RESTRICT acc, const float *PT__RESTRICT x, const float *PT__RESTRICT y,
                             int64_t yi, int64_t ny, int64_t n) {
    if (ny == 1) {
        float s = y[0];
        for (int64_t j = 0; j < n; j++) acc[j] += x[j] * s;
        return;
    }
    while (n > 0) {
        int64_t len = PT__MIN(n, ny - yi);
        const float *PT__RESTRICT yy = y + yi;
        for (int64_t j = 0; j < len; j++) acc[j] += x[j] * yy[j];
        acc += len;
        x += len;
        n -= len;
        yi = 0;
    }
}

/* Row sums of [rows, nd] into acc[0, len) for columns [j0, j0 + len) and rows [r0, r1), in
   increasing r. y == NULL: rows of src; else rows of src * y (y repeating with period ny). */
static void pt__cpu_rows_acc(float *PT__RESTRICT acc, const float *src, const float *y, int64_t ny, int64_t nd,
                             int64_t j0, int64_t len, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; r++) {
        int64_t base = r * nd + j0;
        if (y) pt__cpu_fma_wrap(acc, src + base, y, base % ny, ny, len);
        else pt__cpu_add_f(acc, src + base, len);
    }
}

/* dst[j] += alpha * sum_r (src[r*nd+j] (* y[...])), deterministic for any thread count. */
static void pt__cpu_rowsum(pt_ctx *ctx, float *dst, int64_t nd, int64_t rows, float alpha, const float *src,
                           const float *y, int64_t ny) {
    if (nd <= 0 || rows <= 0) return;
    if (nd >= 32 || rows * nd < PT__CPU_PAR_MIN) {
        /* column blocks, rows serially inside */
        int64_t nblk = (nd + PT__CPU_CB - 1) / PT__CPU_CB;
        PT__CPU_PAR_FOR(ctx, rows * nd)
        for (int64_t b = 0; b < nblk; b++) {
            float acc[PT__CPU_CB];
            int64_t j0 = b * PT__CPU_CB, len = PT__MIN(nd - j0, (int64_t)PT__CPU_CB);
            for (int64_t j = 0; j < len; j++) acc[j] = 0.0f;
            pt__cpu_rows_acc(acc, src, y, ny, nd, j0, len, 0, rows);
            for (int64_t j = 0; j < len; j++) dst[j0 + j] += alpha * acc[j];
        }
    } else {
        /* few columns, many rows: fixed row chunks, partials combined in chunk order */
        int64_t rc = PT__MAX((int64_t)1, (int64_t)PT__CPU_CHUNK / nd), nch = (rows + rc - 1) / rc;
        float tot[32], acc[32];
        float *part = ctx->nthreads > 1 ? pt__work(ctx, nch * nd) : NULL;
        for (int64_t j = 0; j < nd; j++) tot[j] = 0.0f;
        if (part) {
            PT__CPU_PAR_FOR(ctx, rows * nd)
            for (int64_t c = 0; c < nch; c++) {
                float *p = part + c * nd;
                for (int64_t j = 0; j < nd; j++) p[j] = 0.0f;
                pt__cpu_rows_acc(p, src, y, ny, nd, 0, nd, c * rc, PT__MIN(rows, (c + 1) * rc));
            }
            for (int64_t c = 0; c < nch; c++) pt__cpu_add_f(tot, part + c * nd, nd);
        } else {
            for (int64_t c = 0; c < nch; c++) {
                for (int64_t j = 0; j < nd; j++) acc[j] = 0.0f;
                pt__cpu_rows_acc(acc, src, y, ny, nd, 0, nd, c * rc, PT__MIN(rows, (c + 1) * rc));
                pt__cpu_add_f(tot, acc, nd);
            }
        }
        for (int64_t j = 0; j < nd; j++) dst[j] += alpha * tot[j];
    }
}

static void pt__cpu_axpy_reduce(pt_ctx *ctx, const pt_tensor *dst, const pt_tensor *src, float alpha) {
    int64_t nd = pt_numel(dst), ns = pt_numel(src);
    float *d = PT__F(dst);
    const float *s = PT__F(src);
    if (nd <= 0) return;
    if (nd >= ns) {
        int64_t nch = PT__CPU_NCHUNK(ns);
        PT__CPU_PAR_FOR(ctx, ns)
        for (int64_t c = 0; c < nch; c++) {
            int64_t i0 = c * PT__CPU_CHUNK, i1 = PT__MIN(ns, i0 + PT__CPU_CHUNK);
            float *PT__RESTRICT dd = d;
            const float *PT__RESTRICT ss = s;
            for (int64_t i = i0; i < i1; i++) dd[i] += alpha * ss[i];
        }
    } else {
        pt__cpu_rowsum(ctx, d, nd, ns / nd, alpha, s, NULL, 1);
    }
}

static void pt__cpu_mul_acc(pt_ctx *ctx, const pt_tensor *dst, const pt_tensor *x, const pt_tensor *y) {
    int64_t n = pt_numel(x), ny = pt_numel(y), nd = pt_numel(dst);
    float *d = PT__F(dst);
    const float *a = PT__F(x), *b = PT__F(y);
    if (nd <= 0 || ny <= 0) return;
    if (nd >= n) {
        int64_t nch = PT__CPU_NCHUNK(n);
        PT__CPU_PAR_FOR(ctx, n)
        for (int64_t c = 0; c < nch; c++) {
            int64_t i0 = c * PT__CPU_CHUNK, i1 = PT__MIN(n, i0 + PT__CPU_CHUNK);
            pt__cpu_fma_wrap(d + i0, a + i0, b, i0 % ny, ny, i1 - i0);
        }
    } else {
        pt__cpu_rowsum(ctx, d, nd, n / nd, 1.0f, a, b, ny);
    }
}

static void pt__cpu_scale(pt_ctx *ctx, const pt_tensor *out, const pt_tensor *x, float s) {
    int64_t n = pt_numel(x), nch = PT__CPU_NCHUNK(n);
    float *o = PT__F(out);
    const float *a = PT__F(x);
    PT__CPU_PAR_FOR(ctx, n)
    for (int64_t c = 0; c < nch; c++) {
        int64_t i0 = c * PT__CPU_CHUNK, i1 = PT__MIN(n, i0 + PT__CPU_CHUNK);
        for (int64_t i = i0; i < i1; i++) o[i] = s * a[i];
    }
}

#define PT__CPU_GELU_K0 0.7978845608028654f /* sqrt(2/pi) */
#define PT__CPU_GELU_K1 0.044715f

static void pt__cpu_act_fwd(pt_ctx *ctx, int kind, const pt_tensor *out, const pt_tensor *x) {
    int64_t n = pt_numel(x), nch = PT__CPU_NCHUNK(n);
    float *o = PT__F(out);
    const float *a = PT__F(x);
    PT__CPU_PAR_FOR(ctx, kind == PT__GELU ? 8 * n : n)
    for (int64_t c = 0; c < nch; c++) {
        int64_t i0 = c * PT__CPU_CHUNK, i1 = PT__MIN(n, i0 + PT__CPU_CHUNK);
        if (kind == PT__GELU)
            PT__SIMD
            for (int64_t i = i0; i < i1; i++) {
                float v = a[i], u = PT__CPU_GELU_K0 * (v + PT__CPU_GELU_K1 * v * v * v), tp, t2;
                pt__cpu_tanh_parts(u, &tp, &t2);
                o[i] = 0.5f * v * tp;
            }
        else
            for (int64_t i = i0; i < i1; i++) o[i] = a[i] > 0.0f ? a[i] : 0.0f;
    }
}

static void pt__cpu_act_bwd(pt_ctx *ctx, int kind, const pt_tensor *dx, const pt_tensor *x, const pt_tensor *dy) {
    int64_t n = pt_numel(x), nch = PT__CPU_NCHUNK(n);
    float *d = PT__F(dx);
    const float *a = PT__F(x), *g = PT__F(dy);
    PT__CPU_PAR_FOR(ctx, kind == PT__GELU ? 8 * n : n)
    for (int64_t c = 0; c < nch; c++) {
        int64_t i0 = c * PT__CPU_CHUNK, i1 = PT__MIN(n, i0 + PT__CPU_CHUNK);
        if (kind == PT__GELU)
            PT__SIMD
            for (int64_t i = i0; i < i1; i++) {
                float v = a[i], u = PT__CPU_GELU_K0 * (v + PT__CPU_GELU_K1 * v * v * v), tp, t2;
                float du = PT__CPU_GELU_K0 * (1.0f + 3.0f * PT__CPU_GELU_K1 * v * v);
                pt__cpu_tanh_parts(u, &tp, &t2);
                d[i] += (0.5f * tp + 0.5f * v * t2 * du) * g[i];
            }
        else
            for (int64_t i = i0; i < i1; i++) d[i] += a[i] > 0.0f ? g[i] : 0.0f;
    }
}

static void pt__cpu_dropout(pt_ctx *ctx, const pt_tensor *out, const pt_tensor *x, float p, uint64_t key,
                            int64_t base, int accumulate) {
    int64_t n = pt_numel(x), nch = PT__CPU_NCHUNK(n);
    float *o = PT__F(out), q = 1.0f - p;
    const float *a = PT__F(x);
    PT__CPU_PAR_FOR(ctx, 4 * n)
    for (int64_t c = 0; c < nch; c++) {
        int64_t i0 = c * PT__CPU_CHUNK, i1 = PT__MIN(n, i0 + PT__CPU_CHUNK);
        for (int64_t i = i0; i < i1; i++) {
            float v = pt__unit(key, (uint64_t)(base + i)) > p ? a[i] / q : 0.0f;
            if (accumulate) o[i] += v;
            else o[i] = v;
        }
    }
}

/* ---- row-wise --------------------------------------------------------------------------------- */
static void pt__cpu_softmax_row(float *PT__RESTRICT y, const float *PT__RESTRICT x, int64_t n, int lg) {
    float mx = pt__cpu_maxf(x, n);
    if (lg) {
        float lse = (float)((double)mx + log(pt__cpu_expsum(x, n, mx)));
        for (int64_t i = 0; i < n; i++) y[i] = x[i] - lse;
    } else {
        float inv = (float)(1.0 / pt__cpu_expsum_st(y, x, n, mx));
        for (int64_t i = 0; i < n; i++) y[i] *= inv;
    }
}

static void pt__cpu_softmax_fwd(pt_ctx *ctx, const pt_tensor *y, const pt_tensor *x, int lg) {
    int64_t cols = pt__cpu_cols(x), rows = cols > 0 ? pt_numel(x) / cols : 0;
    float *o = PT__F(y);
    const float *a = PT__F(x);
    if (cols <= 0) return;
    PT__CPU_PAR_FOR(ctx, 4 * rows * cols)
    for (int64_t r = 0; r < rows; r++) pt__cpu_softmax_row(o + r * cols, a + r * cols, cols, lg);
}

static void pt__cpu_softmax_bwd(pt_ctx *ctx, const pt_tensor *dx, const pt_tensor *y, const pt_tensor *dy, int lg) {
    int64_t cols = pt__cpu_cols(y), rows = cols > 0 ? pt_numel(y) / cols : 0;
    float *d = PT__F(dx);
    const float *p = PT__F(y), *g = PT__F(dy);
    if (cols <= 0) return;
    PT__CPU_PAR_FOR(ctx, 2 * rows * cols)
    for (int64_t r = 0; r < rows; r++) {
        float *PT__RESTRICT dr = d + r * cols;
        const float *PT__RESTRICT yr = p + r * cols, *PT__RESTRICT gr = g + r * cols;
        double s = 0.0;
        if (lg) {
            for (int64_t i = 0; i < cols; i++) s += (double)gr[i];
            float sf = (float)s;
            PT__SIMD
            for (int64_t i = 0; i < cols; i++) dr[i] += gr[i] - pt__cpu_expf(yr[i]) * sf;
        } else {
            for (int64_t i = 0; i < cols; i++) s += (double)gr[i] * (double)yr[i];
            float sf = (float)s;
            for (int64_t i = 0; i < cols; i++) dr[i] += yr[i] * (gr[i] - sf);
        }
    }
}

#define PT__CPU_LSE_BLOCK 1024 /* logits per block of the one-pass logsumexp (stays in L1) */

/* logsumexp of x[0, n) in one pass over memory: per block, the block max rescales the running sum
   (double), then the block's exponentials are added. */
static double pt__cpu_lse_row(const float *PT__RESTRICT x, int64_t n) {
    float m = x[0];
    double s = 0.0;
    for (int64_t b = 0; b < n; b += PT__CPU_LSE_BLOCK) {
        int64_t e = PT__MIN(n, b + PT__CPU_LSE_BLOCK);
        float bm = pt__cpu_maxf(x + b, e - b);
        if (bm > m) {
            s *= exp((double)m - (double)bm);
            m = bm;
        }
        s += pt__cpu_expsum(x + b, e - b, m);
    }
    return (double)m + log(s);
}

static void pt__cpu_xent_fwd(pt_ctx *ctx, const pt_tensor *loss_rows, const pt_tensor *lse, const pt_tensor *logits,
                             const pt_tensor *targets, int32_t ignore, int64_t nvalid) {
    int64_t V = pt__cpu_cols(logits), rows = V > 0 ? pt_numel(logits) / V : 0;
    float *lo = PT__F(loss_rows), *ls = PT__F(lse);
    const float *x = PT__F(logits);
    const int32_t *tg = PT__I(targets);
    if (nvalid <= 0 || nvalid > V) nvalid = V;
    if (nvalid <= 0) return;
    PT__CPU_PAR_FOR(ctx, 4 * rows * nvalid)
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * V;
        double l = pt__cpu_lse_row(xr, nvalid);
        int32_t t = tg[r];
        ls[r] = (float)l;
        if (t == ignore) lo[r] = 0.0f;
        else if (t >= 0 && (int64_t)t < V) lo[r] = (float)(l - (double)xr[t]);
        else lo[r] = (float)NAN; /* out-of-range target (the op checks; never silently 0) */
    }
}

static void pt__cpu_xent_bwd(pt_ctx *ctx, const pt_tensor *dlogits, const pt_tensor *logits, const pt_tensor *lse,
                             const pt_tensor *targets, int32_t ignore, int64_t nvalid, const pt_tensor *dloss,
                             float scale, int overwrite) {
    int64_t V = pt__cpu_cols(logits), rows = V > 0 ? pt_numel(logits) / V : 0;
    float *d = PT__F(dlogits), g = PT__F(dloss)[0] * scale;
    const float *x = PT__F(logits), *ls = PT__F(lse);
    const int32_t *tg = PT__I(targets);
    if (nvalid <= 0 || nvalid > V) nvalid = V;
    if (nvalid <= 0) return;
    PT__CPU_PAR_FOR(ctx, 4 * rows * nvalid)
    for (int64_t r = 0; r < rows; r++) {
        int32_t t = tg[r];
        float l = ls[r];
        int has_t = t >= 0 && (int64_t)t < nvalid && t != ignore;
        if (overwrite) { /* dlogits may be logits itself: every element read once, then written */
            float *dr = d + r * V;
            const float *xr = x + r * V;
            float xt = has_t ? xr[t] : 0.0f;
            if (t == ignore) {
                for (int64_t c = 0; c < V; c++) dr[c] = 0.0f;
                continue;
            }
            PT__SIMD
            for (int64_t c = 0; c < nvalid; c++) dr[c] = g * pt__cpu_expf(xr[c] - l);
            for (int64_t c = nvalid; c < V; c++) dr[c] = 0.0f;
            if (has_t) dr[t] = g * (pt__cpu_expf(xt - l) - 1.0f);
        } else {
            float *PT__RESTRICT dr = d + r * V;
            const float *PT__RESTRICT xr = x + r * V;
            float old_t = has_t ? dr[t] : 0.0f;
            if (t == ignore) continue;
            PT__SIMD
            for (int64_t c = 0; c < nvalid; c++) dr[c] += g * pt__cpu_expf(xr[c] - l);
            if (has_t) dr[t] = old_t + g * (pt__cpu_expf(xr[t] - l) - 1.0f);
        }
    }
}

static void pt__cpu_layernorm_fwd(pt_ctx *ctx, const pt_tensor *y, const pt_tensor *mean, const pt_tensor *rstd,
                                  const pt_tensor *x, const pt_tensor *w, const pt_tensor *b, float eps) {
    int64_t C = pt__cpu_cols(x), rows = C > 0 ? pt_numel(x) / C : 0;
    float *o = PT__F(y), *mu = PT__F(mean), *rs = PT__F(rstd);
    const float *a = PT__F(x), *wt = PT__F(w), *bs = b ? PT__F(b) : NULL;
    if (C <= 0) return;
    PT__CPU_PAR_FOR(ctx, 3 * rows * C)
    for (int64_t r = 0; r < rows; r++) {
        const float *PT__RESTRICT xr = a + r * C;
        float *PT__RESTRICT yr = o + r * C;
        double s = 0.0, v = 0.0;
        for (int64_t i = 0; i < C; i++) s += (double)xr[i];
        s /= (double)C;
        for (int64_t i = 0; i < C; i++) {
            double dv = (double)xr[i] - s;
            v += dv * dv;
        }
        v /= (double)C;
        float m = (float)s, rsd = (float)(1.0 / sqrt(v + (double)eps));
        mu[r] = m;
        rs[r] = rsd;
        if (bs)
            for (int64_t i = 0; i < C; i++) yr[i] = (xr[i] - m) * rsd * wt[i] + bs[i];
        else
            for (int64_t i = 0; i < C; i++) yr[i] = (xr[i] - m) * rsd * wt[i];
    }
}

static void pt__cpu_layernorm_bwd(pt_ctx *ctx, const pt_tensor *dx, const pt_tensor *dw, const pt_tensor *db,
                                  const pt_tensor *dy, const pt_tensor *x, const pt_tensor *w, const pt_tensor *mean,
                                  const pt_tensor *rstd) {
    int64_t C = pt__cpu_cols(x), rows = C > 0 ? pt_numel(x) / C : 0;
    const float *a = PT__F(x), *g = PT__F(dy), *wt = PT__F(w), *mu = PT__F(mean), *rs = PT__F(rstd);
    if (C <= 0) return;
    if (dx) {
        float *d = PT__F(dx);
        PT__CPU_PAR_FOR(ctx, 3 * rows * C)
        for (int64_t r = 0; r < rows; r++) {
            const float *PT__RESTRICT xr = a + r * C, *PT__RESTRICT gr = g + r * C;
            float *PT__RESTRICT dr = d + r * C;
            float m = mu[r], s = rs[r];
            double s1 = 0.0, s2 = 0.0;
            for (int64_t i = 0; i < C; i++) {
                float gw = gr[i] * wt[i];
                s1 += (double)gw;
                s2 += (double)gw * (double)((xr[i] - m) * s);
            }
            float m1 = (float)(s1 / (double)C), m2 = (float)(s2 / (double)C);
            for (int64_t i = 0; i < C; i++) dr[i] += s * (gr[i] * wt[i] - m1 - (xr[i] - m) * s * m2);
        }
    }
    if (dw || db) {
        float *dwp = dw ? PT__F(dw) : NULL, *dbp = db ? PT__F(db) : NULL;
        int64_t nblk = (C + PT__CPU_CB - 1) / PT__CPU_CB;
        PT__CPU_PAR_FOR(ctx, 2 * rows * C)
        for (int64_t bk = 0; bk < nblk; bk++) {
            float aw[PT__CPU_CB], ab[PT__CPU_CB];
            int64_t j0 = bk * PT__CPU_CB, len = PT__MIN(C - j0, (int64_t)PT__CPU_CB);
            for (int64_t j = 0; j < len; j++) aw[j] = ab[j] = 0.0f;
            for (int64_t r = 0; r < rows; r++) {
                const float *PT__RESTRICT xr = a + r * C + j0, *PT__RESTRICT gr = g + r * C + j0;
                float m = mu[r], s = rs[r];
                for (int64_t j = 0; j < len; j++) {
                    aw[j] += gr[j] * ((xr[j] - m) * s);
                    ab[j] += gr[j];
                }
            }
            if (dwp)
                for (int64_t j = 0; j < len; j++) dwp[j0 + j] += aw[j];
            if (dbp)
                for (int64_t j = 0; j < len; j++) dbp[j0 + j] += ab[j];
        }
    }
}

static void pt__cpu_embed_fwd(pt_ctx *ctx, const pt_tensor *out, const pt_tensor *table, const pt_tensor *ids) {
    int64_t C = pt__cpu_cols(table), n = pt_numel(ids);
    float *o = PT__F(out);
    const float *tb = PT__F(table);
    const int32_t *id = PT__I(ids);
    PT__CPU_PAR_FOR(ctx, n * C)
    for (int64_t i = 0; i < n; i++) {
        if (id[i] >= 0) memcpy(o + i * C, tb + (int64_t)id[i] * C, (size_t)C * sizeof(float));
        else memset(o + i * C, 0, (size_t)C * sizeof(float));
    }
}

static void pt__cpu_embed_bwd(pt_ctx *ctx, const pt_tensor *dtable, const pt_tensor *dout, const pt_tensor *ids) {
    int64_t C = pt__cpu_cols(dtable), n = pt_numel(ids), cb = 32, nblk = (C + cb - 1) / cb;
    float *dt = PT__F(dtable);
    const float *g = PT__F(dout);
    const int32_t *id = PT__I(ids);
    /* column blocks in parallel; every thread walks all ids in increasing i */
    PT__CPU_PAR_FOR(ctx, n * C)
    for (int64_t bk = 0; bk < nblk; bk++) {
        int64_t j0 = bk * cb, len = PT__MIN(C - j0, cb);
        for (int64_t i = 0; i < n; i++)
            if (id[i] >= 0) pt__cpu_add_f(dt + (int64_t)id[i] * C + j0, g + i * C + j0, len);
    }
}

/* ---- layout ----------------------------------------------------------------------------------- */
static void pt__cpu_permute(pt_ctx *ctx, const pt_tensor *dst, const pt_tensor *src, const int *perm, int accumulate) {
    int nd = src->ndim, is_i32 = src->dtype == PT_I32;
    int64_t sstr[PT_MAX_DIMS], D[4] = {1, 1, 1, 1}, S[4] = {0, 0, 0, 0}, n = pt_numel(src), outer;
    const int64_t esz = pt_dtype_size(src->dtype);
    if (n <= 0) return;
    if (esz != 4 || (accumulate && src->dtype != PT_F32 && !is_i32)) {
        if (accumulate || esz <= 0) {
            pt__fail(ctx, PT_ERR_DTYPE, "pt: permute%s of a %lld-byte dtype", accumulate ? " (accumulate)" : "",
                     (long long)esz);
            return;
        }
    }
    if (nd <= 0) {
        pt__cpu_move(pt__cpu_bytes(dst), pt__cpu_bytes(src), 1, esz, accumulate, is_i32);
        return;
    }
    sstr[nd - 1] = 1;
    for (int k = nd - 2; k >= 0; k--) sstr[k] = sstr[k + 1] * src->shape[k + 1];
    for (int i = 0; i < nd; i++) {
        D[4 - nd + i] = src->shape[perm[i]];
        S[4 - nd + i] = sstr[perm[i]];
    }
    outer = D[0] * D[1] * D[2];
    {
        const int64_t d1 = D[1], d2 = D[2], d3 = D[3], s0 = S[0], s1 = S[1], s2 = S[2], s3 = S[3];
        char *dbase = pt__cpu_bytes(dst);
        const char *sbase = pt__cpu_bytes(src);
        PT__CPU_PAR_FOR(ctx, n)
        for (int64_t o = 0; o < outer; o++) {
            int64_t i2 = o % d2, i1 = (o / d2) % d1, i0 = o / (d2 * d1);
            int64_t so = i0 * s0 + i1 * s1 + i2 * s2, doff = o * d3;
            if (s3 == 1) {
                pt__cpu_move(dbase + esz * doff, sbase + esz * so, d3, esz, accumulate, is_i32);
            } else if (esz != 4) { /* 1- and 2-byte storage types: plain copy */
                for (int64_t i = 0; i < d3; i++) memcpy(dbase + esz * (doff + i), sbase + esz * (so + i * s3), (size_t)esz);
            } else if (is_i32) {
                int32_t *PT__RESTRICT dp = (int32_t *)dbase + doff;
                const int32_t *PT__RESTRICT sp = (const int32_t *)sbase + so;
                if (accumulate)
                    for (int64_t i = 0; i < d3; i++) dp[i] = (int32_t)((uint32_t)dp[i] + (uint32_t)sp[i * s3]);
                else
                    for (int64_t i = 0; i < d3; i++) dp[i] = sp[i * s3];
            } else {
                float *PT__RESTRICT dp = (float *)dbase + doff;
                const float *PT__RESTRICT sp = (const float *)sbase + so;
                if (accumulate)
                    for (int64_t i = 0; i < d3; i++) dp[i] += sp[i * s3];
                else
                    for (int64_t i = 0; i < d3; i++) dp[i] = sp[i * s3];
            }
        }
    }
}

static void pt__cpu_copy_block(pt_ctx *ctx, const pt_tensor *dst, int64_t dst_dim, int64_t dst_start,
                               const pt_tensor *src, int64_t src_dim, int64_t src_start, int64_t count,
                               int64_t outer, int64_t inner, int accumulate) {
    int64_t L = count * inner, np = PT__CPU_NCHUNK(L), esz = pt_dtype_size(dst->dtype);
    int is_i32 = dst->dtype == PT_I32;
    char *d = pt__cpu_bytes(dst);
    const char *s = pt__cpu_bytes(src);
    if (L <= 0 || outer <= 0) return;
    if (accumulate && dst->dtype != PT_F32 && !is_i32) {
        pt__fail(ctx, PT_ERR_DTYPE, "pt: accumulating copy_block of a non-f32/i32 tensor");
        return;
    }
    PT__CPU_PAR_FOR(ctx, outer * L)
    for (int64_t it = 0; it < outer * np; it++) {
        int64_t o = it / np, p0 = (it % np) * PT__CPU_CHUNK, len = PT__MIN(L - p0, (int64_t)PT__CPU_CHUNK);
        int64_t doff = (o * dst_dim + dst_start) * inner + p0, soff = (o * src_dim + src_start) * inner + p0;
        pt__cpu_move(d + doff * esz, s + soff * esz, len, esz, accumulate, is_i32);
    }
}

static double pt__cpu_chunk_sum(const float *PT__RESTRICT x, int64_t n, int sq) {
    double s = 0.0;
    if (sq)
        for (int64_t i = 0; i < n; i++) s += (double)x[i] * (double)x[i];
    else
        for (int64_t i = 0; i < n; i++) s += (double)x[i];
    return s;
}

/* sum (or sum of squares) of x[0, n): chunk partials in double, added in chunk order */
static double pt__cpu_reduce(pt_ctx *ctx, const float *x, int64_t n, int sq) {
    int64_t nch = PT__CPU_NCHUNK(n);
    double tot = 0.0, *part = NULL;
    if (n <= 0) return 0.0;
    if (ctx->nthreads > 1 && n >= PT__CPU_PAR_MIN) part = (double *)(void *)pt__work(ctx, 2 * nch);
    if (part) {
        PT__CPU_PAR_FOR(ctx, n)
        for (int64_t c = 0; c < nch; c++) {
            int64_t i0 = c * PT__CPU_CHUNK;
            part[c] = pt__cpu_chunk_sum(x + i0, PT__MIN(n - i0, (int64_t)PT__CPU_CHUNK), sq);
        }
        for (int64_t c = 0; c < nch; c++) tot += part[c];
    } else {
        for (int64_t c = 0; c < nch; c++) {
            int64_t i0 = c * PT__CPU_CHUNK;
            tot += pt__cpu_chunk_sum(x + i0, PT__MIN(n - i0, (int64_t)PT__CPU_CHUNK), sq);
        }
    }
    return tot;
}

static void pt__cpu_sum(pt_ctx *ctx, const pt_tensor *out, const pt_tensor *x, float scale) {
    PT__F(out)[0] = (float)((double)scale * pt__cpu_reduce(ctx, PT__F(x), pt_numel(x), 0));
}

/* ---- matrix products -------------------------------------------------------------------------- */
static void pt__cpu_gemm(pt_ctx *ctx, int ta, int tb, int64_t batch, int64_t M, int64_t N, int64_t K, float alpha,
                         const pt_tensor *A, int64_t lda, int64_t sa, const pt_tensor *B, int64_t ldb, int64_t sb,
                         float beta, const pt_tensor *C, int64_t ldc, int64_t sc) {
    struct pt__gemm_ws *ws = ctx->gemm_ws; /* [0]: the whole-team workspace (nthreads set by the core) */
#ifdef PTRAIN_CBLAS
    /* -DPTRAIN_CBLAS: the system BLAS instead of the built-in kernel (a K = 0 product still scales C) */
    if (M > 0 && N > 0 && K > 0) {
        int64_t b;
        for (b = 0; b < batch; b++)
            cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)M, (int)N, (int)K,
                        alpha, PT__F(A) + b * sa, (int)lda, PT__F(B) + b * sb, (int)ldb, beta, PT__F(C) + b * sc, (int)ldc);
        return;
    }
#endif
    if (!ws) {
        pt__fail(ctx, PT_ERR_STATE, "pt: gemm without a workspace");
        return;
    }
    if (pt__sgemm(ws, ta, tb, batch, M, N, K, alpha, PT__F(A), lda, sa, PT__F(B), ldb, sb, beta, PT__F(C), ldc,
                  sc) < 0)
        pt__fail(ctx, PT_ERR_OOM, "pt: out of memory for the gemm workspace (M=%lld N=%lld K=%lld)", (long long)M,
                 (long long)N, (long long)K);
}

/* ---- images ----------------------------------------------------------------------------------- */
static void pt__cpu_im2col(pt_ctx *ctx, const pt_tensor *cols, const pt_tensor *x, int N, int C, int H, int W, int k,
                           int stride, int pad, int Ho, int Wo) {
    const int64_t kk = (int64_t)k * k, rows = (int64_t)N * C * kk, HW = (int64_t)H * W, S = (int64_t)Ho * Wo;
    float *cp = PT__F(cols);
    const float *xp = PT__F(x);
    PT__CPU_PAR_FOR(ctx, rows * S)
    for (int64_t rr = 0; rr < rows; rr++) {
        int64_t plane = rr / kk, rem = rr % kk, ki = rem / k, kj = rem % k;
        const float *PT__RESTRICT xs = xp + plane * HW;
        float *PT__RESTRICT out = cp + rr * S;
        for (int64_t oh = 0; oh < Ho; oh++) {
            int64_t ih = oh * stride - pad + ki;
            float *PT__RESTRICT row = out + oh * Wo;
            if (ih < 0 || ih >= H) {
                for (int64_t ow = 0; ow < Wo; ow++) row[ow] = 0.0f;
                continue;
            }
            for (int64_t ow = 0; ow < Wo; ow++) {
                int64_t iw = ow * stride - pad + kj;
                row[ow] = (iw >= 0 && iw < W) ? xs[ih * W + iw] : 0.0f;
            }
        }
    }
}

static void pt__cpu_col2im(pt_ctx *ctx, const pt_tensor *dx, const pt_tensor *dcols, int N, int C, int H, int W,
                           int k, int stride, int pad, int Ho, int Wo) {
    const int64_t planes = (int64_t)N * C, HW = (int64_t)H * W, S = (int64_t)Ho * Wo, kk = (int64_t)k * k;
    float *dp = PT__F(dx);
    const float *cp = PT__F(dcols);
    /* gather: each dx element sums its (ki, kj) contributions in increasing order, then adds */
    PT__CPU_PAR_FOR(ctx, planes * kk * S)
    for (int64_t pl = 0; pl < planes; pl++) {
        const float *cs = cp + pl * kk * S;
        float *d = dp + pl * HW;
        for (int64_t h = 0; h < H; h++)
            for (int64_t w = 0; w < W; w++) {
                float acc = 0.0f;
                for (int64_t ki = 0; ki < k; ki++) {
                    int64_t th = h + pad - ki, oh;
                    if (th < 0 || th % stride) continue;
                    oh = th / stride;
                    if (oh >= Ho) continue;
                    for (int64_t kj = 0; kj < k; kj++) {
                        int64_t tw = w + pad - kj, ow;
                        if (tw < 0 || tw % stride) continue;
                        ow = tw / stride;
                        if (ow >= Wo) continue;
                        acc += cs[(ki * k + kj) * S + oh * Wo + ow];
                    }
                }
                d[h * W + w] += acc;
            }
    }
}

static void pt__cpu_chan_bias_fwd(pt_ctx *ctx, const pt_tensor *out, const pt_tensor *b, int N, int C, int64_t S) {
    const int64_t planes = (int64_t)N * C;
    float *o = PT__F(out);
    const float *bs = PT__F(b);
    PT__CPU_PAR_FOR(ctx, planes * S)
    for (int64_t pl = 0; pl < planes; pl++) {
        float *PT__RESTRICT op = o + pl * S, v = bs[pl % C];
        for (int64_t s = 0; s < S; s++) op[s] += v;
    }
}

static void pt__cpu_chan_bias_bwd(pt_ctx *ctx, const pt_tensor *db, const pt_tensor *dout, int N, int C, int64_t S) {
    float *d = PT__F(db);
    const float *g = PT__F(dout);
    PT__CPU_PAR_FOR(ctx, (int64_t)N * C * S)
    for (int64_t c = 0; c < C; c++) {
        double acc = 0.0;
        for (int64_t n = 0; n < N; n++) acc += pt__cpu_chunk_sum(g + (n * C + c) * S, S, 0);
        d[c] += (float)acc;
    }
}

static void pt__cpu_maxpool_fwd(pt_ctx *ctx, const pt_tensor *out, const pt_tensor *idx, const pt_tensor *x, int N,
                                int C, int H, int W, int k, int stride, int Ho, int Wo) {
    const int64_t planes = (int64_t)N * C, HW = (int64_t)H * W, S = (int64_t)Ho * Wo;
    float *op = PT__F(out);
    int32_t *ip = PT__I(idx);
    const float *xp = PT__F(x);
    PT__CPU_PAR_FOR(ctx, planes * S * k * k)
    for (int64_t pl = 0; pl < planes; pl++) {
        const float *xs = xp + pl * HW;
        for (int64_t oh = 0; oh < Ho; oh++)
            for (int64_t ow = 0; ow < Wo; ow++) {
                int64_t h0 = oh * stride, w0 = ow * stride, bi = h0 * W + w0;
                float best = xs[bi];
                for (int64_t ki = 0; ki < k && h0 + ki < H; ki++)
                    for (int64_t kj = 0; kj < k && w0 + kj < W; kj++) {
                        int64_t j = (h0 + ki) * W + w0 + kj;
                        float v = xs[j];
                        if (v > best || (v != v && best == best)) { /* first max; NaN wins */
                            best = v;
                            bi = j;
                        }
                    }
                op[pl * S + oh * Wo + ow] = best;
                ip[pl * S + oh * Wo + ow] = (int32_t)bi;
            }
    }
}

static void pt__cpu_maxpool_bwd(pt_ctx *ctx, const pt_tensor *dx, const pt_tensor *dout, const pt_tensor *idx, int N,
                                int C, int H, int W, int Ho, int Wo) {
    const int64_t planes = (int64_t)N * C, HW = (int64_t)H * W, S = (int64_t)Ho * Wo;
    float *dp = PT__F(dx);
    const float *g = PT__F(dout);
    const int32_t *ip = PT__I(idx);
    PT__CPU_PAR_FOR(ctx, planes * S)
    for (int64_t pl = 0; pl < planes; pl++) {
        float *d = dp + pl * HW;
        for (int64_t o = 0; o < S; o++) d[ip[pl * S + o]] += g[pl * S + o];
    }
}

/* ---- optimizers ------------------------------------------------------------------------------- */
static void pt__cpu_adamw(pt_ctx *ctx, const pt_tensor *p, const pt_tensor *g, const pt_tensor *m, const pt_tensor *v,
                          int64_t n, float lr, float b1, float b2, float eps, float wd, float bc1, float bc2,
                          float gscale) {
    float *pp = PT__F(p), *mp = PT__F(m), *vp = PT__F(v);
    const float *gp = PT__F(g);
    const float c1 = 1.0f - b1, c2 = 1.0f - b2;
    int64_t nch = PT__CPU_NCHUNK(n);
    PT__CPU_PAR_FOR(ctx, 4 * n)
    for (int64_t c = 0; c < nch; c++) {
        int64_t i0 = c * PT__CPU_CHUNK, i1 = PT__MIN(n, i0 + PT__CPU_CHUNK);
        float *PT__RESTRICT P = pp, *PT__RESTRICT M = mp, *PT__RESTRICT Vv = vp;
        const float *PT__RESTRICT G = gp;
        for (int64_t i = i0; i < i1; i++) {
            float gi = G[i] * gscale;
            float mi = b1 * M[i] + c1 * gi, vi = b2 * Vv[i] + c2 * gi * gi;
            M[i] = mi;
            Vv[i] = vi;
            P[i] -= lr * ((mi / bc1) / (sqrtf(vi / bc2) + eps) + wd * P[i]);
        }
    }
}

static void pt__cpu_sgd(pt_ctx *ctx, const pt_tensor *p, const pt_tensor *g, const pt_tensor *mom, int64_t n, float lr,
                        float momentum, float wd, float gscale) {
    float *pp = PT__F(p), *mp = mom ? PT__F(mom) : NULL;
    const float *gp = PT__F(g);
    int64_t nch = PT__CPU_NCHUNK(n);
    PT__CPU_PAR_FOR(ctx, 2 * n)
    for (int64_t c = 0; c < nch; c++) {
        int64_t i0 = c * PT__CPU_CHUNK, i1 = PT__MIN(n, i0 + PT__CPU_CHUNK);
        float *PT__RESTRICT P = pp;
        const float *PT__RESTRICT G = gp;
        if (mp) {
            float *PT__RESTRICT M = mp;
            for (int64_t i = i0; i < i1; i++) {
                float gi = G[i] * gscale + wd * P[i], mi = momentum * M[i] + gi;
                M[i] = mi;
                P[i] -= lr * (momentum != 0.0f ? mi : gi);
            }
        } else {
            for (int64_t i = i0; i < i1; i++) P[i] -= lr * (G[i] * gscale + wd * P[i]);
        }
    }
}

static double pt__cpu_sumsq(pt_ctx *ctx, const pt_tensor *x, int64_t n) { return pt__cpu_reduce(ctx, PT__F(x), n, 1); }

static const pt__backend pt__cpu_backend = {
    "cpu",
    pt__cpu_st_alloc, pt__cpu_st_free, pt__cpu_write, pt__cpu_read, pt__cpu_read_start, pt__cpu_read_wait,
    pt__cpu_fill, pt__cpu_copy, pt__cpu_binary, pt__cpu_axpy_reduce, pt__cpu_mul_acc, pt__cpu_scale,
    pt__cpu_act_fwd, pt__cpu_act_bwd, pt__cpu_dropout,
    pt__cpu_softmax_fwd, pt__cpu_softmax_bwd, pt__cpu_xent_fwd, pt__cpu_xent_bwd,
    pt__cpu_layernorm_fwd, pt__cpu_layernorm_bwd, pt__cpu_embed_fwd, pt__cpu_embed_bwd,
    pt__cpu_attn_fwd, pt__cpu_attn_bwd,
    pt__cpu_permute, pt__cpu_copy_block, pt__cpu_sum,
    pt__cpu_gemm,
    pt__cpu_im2col, pt__cpu_col2im, pt__cpu_chan_bias_fwd, pt__cpu_chan_bias_bwd, pt__cpu_maxpool_fwd,
    pt__cpu_maxpool_bwd,
    pt__cpu_adamw, pt__cpu_sgd, pt__cpu_sumsq,
};

// >>opencl  the OpenCL backend
/* Owns: pt__cl_backend, the device state of a context (struct pt__cl), the program cache on disk,
   CLBlast tuning files
   Invariants: tensors stay resident on the device; host copies only for I/O, MPI staging and
   checkpoints, each counted
   Entry points: pt_device_list pt_device_info_get pt_cl_tune_load pt_sync pt_cl_mem; matmul through
   CLBlast: pt__cl_gemm */
/* OpenCL backend (-DPTRAIN_OPENCL; link -lOpenCL -lclblast)
   pt_init with device "opencl[:P[:D]]" (pt_desc.device or env PTRAIN_DEVICE) opens platform P,
   device D (pt__cl_open; without D a rank of a pt_dist grid takes node-local rank modulo the
   platform's devices) and sets ctx->be to pt__cl_backend. Storages are device buffers: st->dev is
   a cl_mem, st->host stays NULL, a tensor is (cl_mem, element offset) and every kernel takes both.
   One in-order command queue per context; reads and writes are blocking and counted
   (pt__xfer_count, pt_transfer_stats), except read_start (a cl_event to read_wait on: the DP
   bucket staging of dp). Kernels: the OpenCL C source below (pt__cl_src), built once
   per context with a binary cache on disk (pt__cl_build); launched through pt__cl_launch (one
   work item per element, row or column -- PT_EPI = 16 elements for act_fwd/bwd, binary and
   AdamW: a full run is one float16, which PoCL compiles to full-width SIMD -- the global size
   rounded up to the work group, every kernel checks its bound). GEMM: CLBlast. Determinism: as on the CPU, every output element is
   computed by one work item, no atomics; sum/sumsq reduce fixed 4096-element chunks (64 strided
   lanes and a fixed tree: a work group of 64 items per chunk, or on CPU devices one item holding
   the 64 lanes, pt_reduce_lanes, the same bits) whose partials one work item adds in chunk order,
   in double where the device has cl_khr_fp64 (float otherwise).
   Adding a kernel: write it in pt__cl_src, add its name to PT__CL_KERNELS, call it with
   pt__cl_launch(ctx, PT__CLK_<name>, items, 0, "<sig>", args...). Every entry of the kernel table
   is implemented. Attention: one work item per (b, h, row), flash-style (lse saved, nothing T x T
   kept); the backward computes dQ per query row, then dK and dV per key row (no atomics), with
   D_i = dO_i . O_i passed between the two in the scratch buffer. */
#ifdef PTRAIN_OPENCL
#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#if defined(__APPLE__)
#include <OpenCL/opencl.h>
#else
#include <CL/cl.h>
#endif
#include <clblast_c.h>
#if defined(__unix__) || defined(__APPLE__)
#include <sys/stat.h>
#endif

/* counts one host <-> device copy under the purpose in effect (ctx->xfer_kind) */
static void pt__xfer_count(pt_ctx *ctx, int d2h, int64_t bytes) {
    pt_transfers *x = &ctx->xfer;
    int k = (unsigned)ctx->xfer_kind < PT_XFER_KINDS ? ctx->xfer_kind : PT_XFER_IO;
    if (d2h) x->d2h_bytes[k] += bytes, x->d2h_count[k]++, x->d2h_total_bytes += bytes, x->d2h_total_count++;
    else x->h2d_bytes[k] += bytes, x->h2d_count[k]++, x->h2d_total_bytes += bytes, x->h2d_total_count++;
}

/* The kernel sources, in pieces below the 4095 characters a C99 compiler must accept per literal.
   They port the CPU kernels statement by statement (same formulas, same evaluation order, the same
   exp polynomial, the same counter-based RNG) so the backends agree to a few ulp; no relaxed-math
   options, contraction off, divide and sqrt correctly rounded where the device can. */
static const char *const pt__cl_src[] = {
    /* ---- common: accumulator type, RNG, exp, GELU parts ---- */
    "#ifdef PT_FP64\n"
    "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n"
    "typedef double pt_acc;\n"
    "#else\n"
    "typedef float pt_acc;\n"
    "#endif\n"
    "#pragma OPENCL FP_CONTRACT OFF\n"
    "#ifdef PT_CL_FORCE_BUILD_ERROR\n"
    "#error \"forced by PTRAIN_CL_OPTIONS=-DPT_CL_FORCE_BUILD_ERROR\"\n"
    "#endif\n"
    "#define PT_CHUNK 4096\n"
    "#define PT_RWG 64\n"
    "#define PT_LANES 16\n"
    "#define PT_EPI 16\n"
    "#define PT_LSE_BLOCK 1024\n"
    /* index arithmetic of non-negative longs in 32 bits when both fit (64-bit division is slow) */
    "#define PT_DIV(a, b) ((((a) | (b)) >> 31) ? (a) / (b) : (long)((uint)(a) / (uint)(b)))\n"
    "#define PT_MOD(a, b) ((((a) | (b)) >> 31) ? (a) % (b) : (long)((uint)(a) % (uint)(b)))\n"
    "#define PT_GELU_K0 0.7978845608028654f\n"
    "#define PT_GELU_K1 0.044715f\n"
    "ulong pt_hash64(ulong x) {\n"
    "    x += 0x9E3779B97F4A7C15UL;\n"
    "    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9UL;\n"
    "    x = (x ^ (x >> 27)) * 0x94D049BB133111EBUL;\n"
    "    return x ^ (x >> 31);\n"
    "}\n"
    "float pt_unit(ulong key, ulong i) {\n"
    "    ulong h = pt_hash64(key ^ pt_hash64(i));\n"
    "    return ((float)(h >> 40) + 1.0f) * (1.0f / 16777216.0f);\n"
    "}\n"
    "float pt_expf(float x) {\n"
    "    float z = x < -88.0f ? -88.0f : x, t, n, r, p;\n"
    "    int i;\n"
    "    z = z > 88.0f ? 88.0f : z;\n"
    "    t = x * 1.44269504088896341f + 12582912.0f;\n"
    "    i = (int)(as_uint(t) - 0x4B400000u);\n"
    "    i = i < -127 ? -127 : i;\n"
    "    i = i > 127 ? 127 : i;\n"
    "    n = (float)i;\n"
    "    r = z - n * 0.693359375f;\n"
    "    r = r - n * -2.12194440e-4f;\n"
    "    p = 1.9875691500e-4f;\n"
    "    p = p * r + 1.3981999507e-3f;\n"
    "    p = p * r + 8.3334519073e-3f;\n"
    "    p = p * r + 4.1665795894e-2f;\n"
    "    p = p * r + 1.6666665459e-1f;\n"
    "    p = p * r + 5.0000001201e-1f;\n"
    "    p = p * r * r + r + 1.0f;\n"
    "    return p * as_float(((uint)i + 127u) << 23);\n"
    "}\n"
    "void pt_tanh_parts(float u, float *one_plus_t, float *one_minus_t2) {\n"
    "    float a = pt_expf(-2.0f * (u < 0.0f ? -u : u)), s = 2.0f / (1.0f + a), q = a * s;\n"
    "    *one_plus_t = u < 0.0f ? q : s;\n"
    "    *one_minus_t2 = s * q;\n"
    "}\n"
    "float pt_maxf(__global const float *x, long n) {\n"
    "    float m = x[0];\n"
    "    for (long i = 1; i < n; i++) m = x[i] > m ? x[i] : m;\n"
    "    return m;\n"
    "}\n"
    /* sum of exp(x - m) as the CPU's pt__cpu_expsum: 16 float lanes, combined in order, tail added */
    "pt_acc pt_expsum(__global const float *x, long n, float m, __global float *y, int store) {\n"
    "    float ls[PT_LANES];\n"
    "    pt_acc s = 0;\n"
    "    long i = 0;\n"
    "    for (int l = 0; l < PT_LANES; l++) ls[l] = 0.0f;\n"
    "    for (; i + PT_LANES <= n; i += PT_LANES)\n"
    "        for (int l = 0; l < PT_LANES; l++) {\n"
    "            float e = pt_expf(x[i + l] - m);\n"
    "            if (store) y[i + l] = e;\n"
    "            ls[l] += e;\n"
    "        }\n"
    "    for (int l = 0; l < PT_LANES; l++) s += (pt_acc)ls[l];\n"
    "    for (; i < n; i++) {\n"
    "        float e = pt_expf(x[i] - m);\n"
    "        if (store) y[i] = e;\n"
    "        s += (pt_acc)e;\n"
    "    }\n"
    "    return s;\n"
    "}\n",
    /* ---- elementwise ---- */
    "__kernel void pt_acc_f32(__global float *d, long d_o, __global const float *s, long s_o, long n) {\n"
    "    long i = get_global_id(0);\n"
    "    if (i < n) d[d_o + i] += s[s_o + i];\n"
    "}\n"
    "__kernel void pt_acc_i32(__global int *d, long d_o, __global const int *s, long s_o, long n) {\n"
    "    long i = get_global_id(0);\n"
    "    if (i < n) d[d_o + i] = as_int(as_uint(d[d_o + i]) + as_uint(s[s_o + i]));\n"
    "}\n"
    "__kernel void pt_binary(__global float *o, long o_o, __global const float *a, long a_o, __global const float *b,\n"
    "                        long b_o, long n, long nb, int op) {\n"
    "    long i0 = get_global_id(0) * PT_EPI, e = min(n - i0, (long)PT_EPI);\n"
    "    __global float *op_ = o + o_o + i0;\n"
    "    __global const float *ap = a + a_o + i0, *bp = b + b_o + i0;\n"
    "    if (e == PT_EPI && nb == n) {\n"
    "        float16 x = vload16(0, ap), y = vload16(0, bp);\n"
    "        vstore16(op == 0 ? x + y : op == 1 ? x - y : x * y, 0, op_);\n"
    "    } else {\n"
    "        for (int k = 0; k < e; k++) {\n"
    "            float x = ap[k], y = b[b_o + (nb == n ? i0 + k : PT_MOD(i0 + k, nb))];\n"
    "            op_[k] = op == 0 ? x + y : op == 1 ? x - y : x * y;\n"
    "        }\n"
    "    }\n"
    "}\n"
    "__kernel void pt_scale(__global float *o, long o_o, __global const float *x, long x_o, long n, float s) {\n"
    "    long i = get_global_id(0);\n"
    "    if (i < n) o[o_o + i] = s * x[x_o + i];\n"
    "}\n"
    "__kernel void pt_axpy(__global float *d, long d_o, __global const float *s, long s_o, long n, float alpha) {\n"
    "    long i = get_global_id(0);\n"
    "    if (i < n) d[d_o + i] += alpha * s[s_o + i];\n"
    "}\n"
    "__kernel void pt_mul_acc(__global float *d, long d_o, __global const float *x, long x_o, __global const float *y,\n"
    "                         long y_o, long n, long ny) {\n"
    "    long i = get_global_id(0);\n"
    "    if (i < n) d[d_o + i] += x[x_o + i] * y[y_o + PT_MOD(i, ny)];\n"
    "}\n"
    /* one work item per column j, rows in increasing r (the CPU's column-block order) */
    "__kernel void pt_rowsum(__global float *d, long d_o, __global const float *s, long s_o, __global const float *y,\n"
    "                        long y_o, long nd, long rows, long ny, int use_y, float alpha) {\n"
    "    long j = get_global_id(0);\n"
    "    float acc = 0.0f;\n"
    "    if (j >= nd) return;\n"
    "    for (long r = 0; r < rows; r++) {\n"
    "        long k = r * nd + j;\n"
    "        if (use_y) acc += s[s_o + k] * y[y_o + PT_MOD(k, ny)];\n"
    "        else acc += s[s_o + k];\n"
    "    }\n"
    "    d[d_o + j] += alpha * acc;\n"
    "}\n",
    /* PT_EPI = 16 elements per work item: a full run is one float16 (the same IEEE operations per
       element in the same order, so the same bits as one element at a time), which PoCL compiles
       to full-width SIMD; the tail goes one element at a time */
    "float16 pt_expf16(float16 x) {\n"
    "    float16 z = x < -88.0f ? (float16)(-88.0f) : x, t, n, r, p;\n"
    "    int16 i;\n"
    "    z = z > 88.0f ? (float16)(88.0f) : z;\n"
    "    t = x * 1.44269504088896341f + 12582912.0f;\n"
    "    i = as_int16(as_uint16(t) - 0x4B400000u);\n"
    "    i = i < -127 ? (int16)(-127) : i;\n"
    "    i = i > 127 ? (int16)(127) : i;\n"
    "    n = convert_float16(i);\n"
    "    r = z - n * 0.693359375f;\n"
    "    r = r - n * -2.12194440e-4f;\n"
    "    p = 1.9875691500e-4f;\n"
    "    p = p * r + 1.3981999507e-3f;\n"
    "    p = p * r + 8.3334519073e-3f;\n"
    "    p = p * r + 4.1665795894e-2f;\n"
    "    p = p * r + 1.6666665459e-1f;\n"
    "    p = p * r + 5.0000001201e-1f;\n"
    "    p = p * r * r + r + 1.0f;\n"
    "    return p * as_float16((as_uint16(i) + 127u) << 23);\n"
    "}\n"
    /* gelu and its derivative, as pt_tanh_parts: a = exp(-2|u|), s = 2/(1+a), q = a*s */
    "float pt_gelu_f(float v) {\n"
    "    float u = PT_GELU_K0 * (v + PT_GELU_K1 * v * v * v), tp, t2;\n"
    "    pt_tanh_parts(u, &tp, &t2);\n"
    "    return 0.5f * v * tp;\n"
    "}\n"
    "float pt_gelu_d(float v) {\n"
    "    float u = PT_GELU_K0 * (v + PT_GELU_K1 * v * v * v), du = PT_GELU_K0 * (1.0f + 3.0f * PT_GELU_K1 * v * v), tp, t2;\n"
    "    pt_tanh_parts(u, &tp, &t2);\n"
    "    return 0.5f * tp + 0.5f * v * t2 * du;\n"
    "}\n"
    "float16 pt_gelu_f16(float16 v) {\n"
    "    float16 u = PT_GELU_K0 * (v + PT_GELU_K1 * v * v * v);\n"
    "    float16 a = pt_expf16(-2.0f * (u < 0.0f ? -u : u)), s = 2.0f / (1.0f + a), q = a * s;\n"
    "    return 0.5f * v * (u < 0.0f ? q : s);\n"
    "}\n"
    "float16 pt_gelu_d16(float16 v) {\n"
    "    float16 u = PT_GELU_K0 * (v + PT_GELU_K1 * v * v * v), du = PT_GELU_K0 * (1.0f + 3.0f * PT_GELU_K1 * v * v);\n"
    "    float16 a = pt_expf16(-2.0f * (u < 0.0f ? -u : u)), s = 2.0f / (1.0f + a), q = a * s;\n"
    "    return 0.5f * (u < 0.0f ? q : s) + 0.5f * v * (s * q) * du;\n"
    "}\n"
    "__kernel void pt_act_fwd(__global float *o, long o_o, __global const float *x, long x_o, long n, int kind) {\n"
    "    long i0 = get_global_id(0) * PT_EPI, e = min(n - i0, (long)PT_EPI);\n"
    "    __global float *op = o + o_o + i0;\n"
    "    __global const float *xp = x + x_o + i0;\n"
    "    if (e == PT_EPI) {\n"
    "        float16 v = vload16(0, xp);\n"
    "        vstore16(kind == 1 ? pt_gelu_f16(v) : v > 0.0f ? v : (float16)(0.0f), 0, op);\n"
    "    } else {\n"
    "        for (int k = 0; k < e; k++) op[k] = kind == 1 ? pt_gelu_f(xp[k]) : xp[k] > 0.0f ? xp[k] : 0.0f;\n"
    "    }\n"
    "}\n",
    "__kernel void pt_act_bwd(__global float *d, long d_o, __global const float *x, long x_o, __global const float *g,\n"
    "                         long g_o, long n, int kind) {\n"
    "    long i0 = get_global_id(0) * PT_EPI, e = min(n - i0, (long)PT_EPI);\n"
    "    __global float *dp = d + d_o + i0;\n"
    "    __global const float *xp = x + x_o + i0, *gp = g + g_o + i0;\n"
    "    if (e == PT_EPI) {\n"
    "        float16 v = vload16(0, xp), gv = vload16(0, gp);\n"
    "        vstore16(vload16(0, dp) + (kind == 1 ? pt_gelu_d16(v) * gv : v > 0.0f ? gv : (float16)(0.0f)), 0, dp);\n"
    "    } else {\n"
    "        for (int k = 0; k < e; k++) dp[k] += kind == 1 ? pt_gelu_d(xp[k]) * gp[k] : xp[k] > 0.0f ? gp[k] : 0.0f;\n"
    "    }\n"
    "}\n"
    "__kernel void pt_dropout(__global float *o, long o_o, __global const float *x, long x_o, long n, float p, ulong key,\n"
    "                         long base, int acc) {\n"
    "    long i = get_global_id(0);\n"
    "    float q = 1.0f - p, v;\n"
    "    if (i >= n) return;\n"
    "    v = pt_unit(key, (ulong)(base + i)) > p ? x[x_o + i] / q : 0.0f;\n"
    "    if (acc) o[o_o + i] += v;\n"
    "    else o[o_o + i] = v;\n"
    "}\n"
    /* sum / sum of squares: one work group of PT_RWG items per chunk of PT_CHUNK elements, a fixed
       tree in local memory; then one item adds the chunk partials in chunk order */
    "__kernel void pt_reduce_chunks(__global const float *x, long x_o, long n, int sq, __global pt_acc *part, long p_o) {\n"
    "    __local pt_acc sh[PT_RWG];\n"
    "    long c = get_group_id(0), i0 = c * PT_CHUNK, i1 = min(n, i0 + PT_CHUNK);\n"
    "    int l = get_local_id(0);\n"
    "    pt_acc s = 0;\n"
    "    for (long i = i0 + l; i < i1; i += PT_RWG) {\n"
    "        pt_acc v = (pt_acc)x[x_o + i];\n"
    "        s += sq ? v * v : v;\n"
    "    }\n"
    "    sh[l] = s;\n"
    "    barrier(CLK_LOCAL_MEM_FENCE);\n"
    "    for (int w = PT_RWG / 2; w > 0; w >>= 1) {\n"
    "        if (l < w) sh[l] += sh[l + w];\n"
    "        barrier(CLK_LOCAL_MEM_FENCE);\n"
    "    }\n"
    "    if (l == 0) part[p_o + c] = sh[0];\n"
    "}\n",
    /* the same partials, one work item per chunk holding the PT_RWG lanes (the same per-lane order
       and tree, so the same bits): CPU devices, where the full chunks' lane loop vectorizes */
    "__kernel void pt_reduce_lanes(__global const float *x, long x_o, long n, int sq, __global pt_acc *part, long p_o) {\n"
    "    long c = get_global_id(0), i0 = c * PT_CHUNK, m = min(n - i0, (long)PT_CHUNK);\n"
    "    __global const float *xp = x + x_o + i0;\n"
    "    pt_acc sh[PT_RWG];\n"
    "    if (m <= 0) return;\n"
    "    for (int l = 0; l < PT_RWG; l++) sh[l] = 0;\n"
    "    if (m == PT_CHUNK) {\n"
    "        for (int k = 0; k < PT_CHUNK; k += PT_RWG)\n"
    "            for (int l = 0; l < PT_RWG; l++) {\n"
    "                pt_acc v = (pt_acc)xp[k + l];\n"
    "                sh[l] += sq ? v * v : v;\n"
    "            }\n"
    "    } else {\n"
    "        for (long i = 0; i < m; i++) {\n"
    "            pt_acc v = (pt_acc)xp[i];\n"
    "            sh[i % PT_RWG] += sq ? v * v : v;\n"
    "        }\n"
    "    }\n"
    "    for (int w = PT_RWG / 2; w > 0; w >>= 1)\n"
    "        for (int l = 0; l < w; l++) sh[l] += sh[l + w];\n"
    "    part[p_o + c] = sh[0];\n"
    "}\n"
    "__kernel void pt_reduce_final(__global pt_acc *part, long p_o, long nch, __global float *out, long o_o, int has_out,\n"
    "                              float scale) {\n"
    "    pt_acc t = 0;\n"
    "    if (get_global_id(0) != 0) return;\n"
    "    for (long c = 0; c < nch; c++) t += part[p_o + c];\n"
    "    part[p_o + nch] = t;\n"
    "    if (has_out) out[o_o] = (float)((pt_acc)scale * t);\n"
    "}\n"
    "__kernel void pt_adamw(__global float *p, long p_o, __global const float *g, long g_o, __global float *m, long m_o,\n"
    "                       __global float *v, long v_o, long n, float lr, float b1, float b2, float eps, float wd,\n"
    "                       float bc1, float bc2, float gscale) {\n"
    "    long i0 = get_global_id(0) * PT_EPI, e = min(n - i0, (long)PT_EPI);\n"
    "    float c1 = 1.0f - b1, c2 = 1.0f - b2;\n"
    "    __global float *pp = p + p_o + i0, *mp = m + m_o + i0, *vp = v + v_o + i0;\n"
    "    __global const float *gp = g + g_o + i0;\n"
    "    if (e == PT_EPI) { /* float16 lanes, as pt_act_fwd */\n"
    "        float16 gi = vload16(0, gp) * gscale, pi = vload16(0, pp);\n"
    "        float16 mi = b1 * vload16(0, mp) + c1 * gi, vi = b2 * vload16(0, vp) + c2 * gi * gi;\n"
    "        vstore16(mi, 0, mp);\n"
    "        vstore16(vi, 0, vp);\n"
    "        vstore16(pi - lr * ((mi / bc1) / (sqrt(vi / bc2) + eps) + wd * pi), 0, pp);\n"
    "    } else {\n"
    "        for (int k = 0; k < e; k++) {\n"
    "            float gi = gp[k] * gscale, mi = b1 * mp[k] + c1 * gi, vi = b2 * vp[k] + c2 * gi * gi;\n"
    "            mp[k] = mi;\n"
    "            vp[k] = vi;\n"
    "            pp[k] -= lr * ((mi / bc1) / (sqrt(vi / bc2) + eps) + wd * pp[k]);\n"
    "        }\n"
    "    }\n"
    "}\n"
    "__kernel void pt_sgd(__global float *p, long p_o, __global const float *g, long g_o, __global float *m, long m_o,\n"
    "                     long n, float lr, float momentum, float wd, float gscale, int has_m) {\n"
    "    long i = get_global_id(0);\n"
    "    float gi, mi;\n"
    "    if (i >= n) return;\n"
    "    if (has_m) {\n"
    "        gi = g[g_o + i] * gscale + wd * p[p_o + i], mi = momentum * m[m_o + i] + gi;\n"
    "        m[m_o + i] = mi;\n"
    "        p[p_o + i] -= lr * (momentum != 0.0f ? mi : gi);\n"
    "    } else {\n"
    "        p[p_o + i] -= lr * (g[g_o + i] * gscale + wd * p[p_o + i]);\n"
    "    }\n"
    "}\n",
    /* ---- row-wise: one work item per row, the CPU's loops and accumulation order ---- */
    "__kernel void pt_softmax_fwd(__global float *y, long y_o, __global const float *x, long x_o, long rows, long cols,\n"
    "                             int lg) {\n"
    "    long r = get_global_id(0);\n"
    "    __global const float *xr;\n"
    "    __global float *yr;\n"
    "    float mx;\n"
    "    if (r >= rows) return;\n"
    "    xr = x + x_o + r * cols, yr = y + y_o + r * cols;\n"
    "    mx = pt_maxf(xr, cols);\n"
    "    if (lg) {\n"
    "        float lse = (float)((pt_acc)mx + log(pt_expsum(xr, cols, mx, yr, 0)));\n"
    "        for (long i = 0; i < cols; i++) yr[i] = xr[i] - lse;\n"
    "    } else {\n"
    "        float inv = (float)((pt_acc)1 / pt_expsum(xr, cols, mx, yr, 1));\n"
    "        for (long i = 0; i < cols; i++) yr[i] *= inv;\n"
    "    }\n"
    "}\n"
    "__kernel void pt_softmax_bwd(__global float *d, long d_o, __global const float *y, long y_o, __global const float *g,\n"
    "                             long g_o, long rows, long cols, int lg) {\n"
    "    long r = get_global_id(0);\n"
    "    __global float *dr;\n"
    "    __global const float *yr, *gr;\n"
    "    pt_acc s = 0;\n"
    "    float sf;\n"
    "    if (r >= rows) return;\n"
    "    dr = d + d_o + r * cols, yr = y + y_o + r * cols, gr = g + g_o + r * cols;\n"
    "    if (lg) {\n"
    "        for (long i = 0; i < cols; i++) s += (pt_acc)gr[i];\n"
    "        sf = (float)s;\n"
    "        for (long i = 0; i < cols; i++) dr[i] += gr[i] - pt_expf(yr[i]) * sf;\n"
    "    } else {\n"
    "        for (long i = 0; i < cols; i++) s += (pt_acc)gr[i] * (pt_acc)yr[i];\n"
    "        sf = (float)s;\n"
    "        for (long i = 0; i < cols; i++) dr[i] += yr[i] * (gr[i] - sf);\n"
    "    }\n"
    "}\n"
    "pt_acc pt_lse_row(__global const float *x, long n) {\n"
    "    float m = x[0];\n"
    "    pt_acc s = 0;\n"
    "    for (long b = 0; b < n; b += PT_LSE_BLOCK) {\n"
    "        long e = min(n, b + PT_LSE_BLOCK);\n"
    "        float bm = pt_maxf(x + b, e - b);\n"
    "        if (bm > m) {\n"
    "            s *= exp((pt_acc)m - (pt_acc)bm);\n"
    "            m = bm;\n"
    "        }\n"
    "        s += pt_expsum(x + b, e - b, m, 0, 0);\n"
    "    }\n"
    "    return (pt_acc)m + log(s);\n"
    "}\n"
    "__kernel void pt_xent_fwd(__global float *lo, long lo_o, __global float *ls, long ls_o, __global const float *x,\n"
    "                          long x_o, __global const int *tg, long tg_o, long rows, long V, int ignore, long nvalid) {\n"
    "    long r = get_global_id(0);\n"
    "    __global const float *xr;\n"
    "    pt_acc l;\n"
    "    int t;\n"
    "    if (r >= rows) return;\n"
    "    xr = x + x_o + r * V;\n"
    "    l = pt_lse_row(xr, nvalid);\n"
    "    t = tg[tg_o + r];\n"
    "    ls[ls_o + r] = (float)l;\n"
    "    if (t == ignore) lo[lo_o + r] = 0.0f;\n"
    "    else if (t >= 0 && (long)t < V) lo[lo_o + r] = (float)(l - (pt_acc)xr[t]);\n"
    "    else lo[lo_o + r] = NAN;\n"
    "}\n",
    "__kernel void pt_xent_bwd(__global float *d, long d_o, __global const float *x, long x_o, __global const float *ls,\n"
    "                          long ls_o, __global const int *tg, long tg_o, __global const float *dl, long dl_o,\n"
    "                          long rows, long V, int ignore, long nvalid, float scale, int overwrite) {\n"
    "    long r = get_global_id(0);\n"
    "    __global float *dr;\n"
    "    __global const float *xr;\n"
    "    float g, l, xt, old_t;\n"
    "    int t, has_t;\n"
    "    if (r >= rows) return;\n"
    "    g = dl[dl_o] * scale;\n"
    "    t = tg[tg_o + r], l = ls[ls_o + r];\n"
    "    has_t = t >= 0 && (long)t < nvalid && t != ignore;\n"
    "    dr = d + d_o + r * V, xr = x + x_o + r * V;\n"
    "    if (overwrite) {\n"
    "        xt = has_t ? xr[t] : 0.0f;\n"
    "        if (t == ignore) {\n"
    "            for (long c = 0; c < V; c++) dr[c] = 0.0f;\n"
    "            return;\n"
    "        }\n"
    "        for (long c = 0; c < nvalid; c++) dr[c] = g * pt_expf(xr[c] - l);\n"
    "        for (long c = nvalid; c < V; c++) dr[c] = 0.0f;\n"
    "        if (has_t) dr[t] = g * (pt_expf(xt - l) - 1.0f);\n"
    "    } else {\n"
    "        old_t = has_t ? dr[t] : 0.0f;\n"
    "        if (t == ignore) return;\n"
    "        for (long c = 0; c < nvalid; c++) dr[c] += g * pt_expf(xr[c] - l);\n"
    "        if (has_t) dr[t] = old_t + g * (pt_expf(xr[t] - l) - 1.0f);\n"
    "    }\n"
    "}\n"
    "__kernel void pt_layernorm_fwd(__global float *y, long y_o, __global float *mu, long mu_o, __global float *rs,\n"
    "                               long rs_o, __global const float *x, long x_o, __global const float *w, long w_o,\n"
    "                               __global const float *b, long b_o, int has_b, long rows, long C, float eps) {\n"
    "    long r = get_global_id(0);\n"
    "    __global const float *xr;\n"
    "    __global float *yr;\n"
    "    pt_acc s = 0, v = 0;\n"
    "    float m, rsd;\n"
    "    if (r >= rows) return;\n"
    "    xr = x + x_o + r * C, yr = y + y_o + r * C;\n"
    "    for (long i = 0; i < C; i++) s += (pt_acc)xr[i];\n"
    "    s /= (pt_acc)C;\n"
    "    for (long i = 0; i < C; i++) {\n"
    "        pt_acc dv = (pt_acc)xr[i] - s;\n"
    "        v += dv * dv;\n"
    "    }\n"
    "    v /= (pt_acc)C;\n"
    "    m = (float)s, rsd = (float)((pt_acc)1 / sqrt(v + (pt_acc)eps));\n"
    "    mu[mu_o + r] = m;\n"
    "    rs[rs_o + r] = rsd;\n"
    "    if (has_b)\n"
    "        for (long i = 0; i < C; i++) yr[i] = (xr[i] - m) * rsd * w[w_o + i] + b[b_o + i];\n"
    "    else\n"
    "        for (long i = 0; i < C; i++) yr[i] = (xr[i] - m) * rsd * w[w_o + i];\n"
    "}\n"
    "__kernel void pt_layernorm_bwd_dx(__global float *d, long d_o, __global const float *g, long g_o,\n"
    "                                  __global const float *x, long x_o, __global const float *w, long w_o,\n"
    "                                  __global const float *mu, long mu_o, __global const float *rs, long rs_o,\n"
    "                                  long rows, long C) {\n"
    "    long r = get_global_id(0);\n"
    "    __global const float *xr, *gr;\n"
    "    __global float *dr;\n"
    "    float m, s, m1, m2;\n"
    "    pt_acc s1 = 0, s2 = 0;\n"
    "    if (r >= rows) return;\n"
    "    xr = x + x_o + r * C, gr = g + g_o + r * C, dr = d + d_o + r * C;\n"
    "    m = mu[mu_o + r], s = rs[rs_o + r];\n"
    "    for (long i = 0; i < C; i++) {\n"
    "        float gw = gr[i] * w[w_o + i];\n"
    "        s1 += (pt_acc)gw;\n"
    "        s2 += (pt_acc)gw * (pt_acc)((xr[i] - m) * s);\n"
    "    }\n"
    "    m1 = (float)(s1 / (pt_acc)C), m2 = (float)(s2 / (pt_acc)C);\n"
    "    for (long i = 0; i < C; i++) dr[i] += s * (gr[i] * w[w_o + i] - m1 - (xr[i] - m) * s * m2);\n"
    "}\n",
    "__kernel void pt_layernorm_bwd_wb(__global float *dw, long dw_o, int has_w, __global float *db, long db_o, int has_b,\n"
    "                                  __global const float *g, long g_o, __global const float *x, long x_o,\n"
    "                                  __global const float *mu, long mu_o, __global const float *rs, long rs_o,\n"
    "                                  long rows, long C) {\n"
    "    long j = get_global_id(0);\n"
    "    float aw = 0.0f, ab = 0.0f;\n"
    "    if (j >= C) return;\n"
    "    for (long r = 0; r < rows; r++) {\n"
    "        float gv = g[g_o + r * C + j];\n"
    "        aw += gv * ((x[x_o + r * C + j] - mu[mu_o + r]) * rs[rs_o + r]);\n"
    "        ab += gv;\n"
    "    }\n"
    "    if (has_w) dw[dw_o + j] += aw;\n"
    "    if (has_b) db[db_o + j] += ab;\n"
    "}\n"
    "__kernel void pt_embed_fwd(__global float *o, long o_o, __global const float *tb, long tb_o, __global const int *id,\n"
    "                           long id_o, long n, long C) {\n"
    "    long e = get_global_id(0), i, c;\n"
    "    int k;\n"
    "    if (e >= n * C) return;\n"
    "    i = PT_DIV(e, C), c = e - i * C, k = id[id_o + i];\n"
    "    o[o_o + e] = k >= 0 ? tb[tb_o + (long)k * C + c] : 0.0f;\n"
    "}\n"
    /* one work item per column: every id in increasing i (the CPU's order per element) */
    "__kernel void pt_embed_bwd(__global float *dt, long dt_o, __global const float *g, long g_o, __global const int *id,\n"
    "                           long id_o, long n, long C) {\n"
    "    long j = get_global_id(0);\n"
    "    if (j >= C) return;\n"
    "    for (long i = 0; i < n; i++) {\n"
    "        int k = id[id_o + i];\n"
    "        if (k >= 0) dt[dt_o + (long)k * C + j] += g[g_o + i * C + j];\n"
    "    }\n"
    "}\n"
    /* ---- layout (4-byte elements; acc: 1 = f32 add, 2 = i32 wrapping add, 0 = copy) ---- */
    "__kernel void pt_permute(__global uint *d, long d_o, __global const uint *s, long s_o, long n, long d1, long d2,\n"
    "                         long d3, long s0, long s1, long s2, long s3, int acc) {\n"
    "    long e = get_global_id(0), i3, i2, i1, i0, so;\n"
    "    uint v;\n"
    "    if (e >= n) return;\n"
    "    i0 = PT_DIV(e, d3), i3 = e - i0 * d3, i1 = PT_DIV(i0, d2), i2 = i0 - i1 * d2, i0 = PT_DIV(i1, d1), i1 -= i0 * d1;\n"
    "    so = i0 * s0 + i1 * s1 + i2 * s2 + i3 * s3;\n"
    "    v = s[s_o + so];\n"
    "    if (acc == 1) d[d_o + e] = as_uint(as_float(d[d_o + e]) + as_float(v));\n"
    "    else if (acc == 2) d[d_o + e] = d[d_o + e] + v;\n"
    "    else d[d_o + e] = v;\n"
    "}\n"
    "__kernel void pt_copy_block(__global uint *d, long d_o, __global const uint *s, long s_o, long outer, long L,\n"
    "                            long dst_dim, long dst_start, long src_dim, long src_start, long inner, int acc) {\n"
    "    long e = get_global_id(0), o, p, di, si;\n"
    "    uint v;\n"
    "    if (e >= outer * L) return;\n"
    "    o = PT_DIV(e, L), p = e - o * L;\n"
    "    di = (o * dst_dim + dst_start) * inner + p, si = (o * src_dim + src_start) * inner + p;\n"
    "    v = s[s_o + si];\n"
    "    if (acc == 1) d[d_o + di] = as_uint(as_float(d[d_o + di]) + as_float(v));\n"
    "    else if (acc == 2) d[d_o + di] = d[d_o + di] + v;\n"
    "    else d[d_o + di] = v;\n"
    "}\n"
    /* C = beta C over batch x [M, N] with row stride ldc and batch stride sc (a product with K = 0,
       and the zeroing before a beta = 0 product) */
    "__kernel void pt_gemm_scale(__global float *c, long c_o, long batch, long M, long N, long ldc, long sc, float beta) {\n"
    "    long e = get_global_id(0), b, r, j;\n"
    "    __global float *p;\n"
    "    if (e >= batch * M * N) return;\n"
    "    r = PT_DIV(e, N), j = e - r * N, b = PT_DIV(r, M), r -= b * M;\n"
    "    p = c + c_o + b * sc + r * ldc + j;\n"
    "    *p = beta == 0.0f ? 0.0f : beta * *p;\n"
    "}\n",
    /* ---- layout of 1- and 2-byte storage types: plain copies (the CPU accumulates only f32/i32) ---- */
    "#define PT_MOVE(TY, SUF)\\\n"
    "__kernel void pt_permute_##SUF(__global TY *d, long d_o, __global const TY *s, long s_o, long n, long d1, long d2,\\\n"
    "                               long d3, long s0, long s1, long s2, long s3) {\\\n"
    "    long e = get_global_id(0), i3, i2, i1, i0;\\\n"
    "    if (e >= n) return;\\\n"
    "    i0 = PT_DIV(e, d3), i3 = e - i0 * d3, i1 = PT_DIV(i0, d2), i2 = i0 - i1 * d2, i0 = PT_DIV(i1, d1), i1 -= i0 * d1;\\\n"
    "    d[d_o + e] = s[s_o + i0 * s0 + i1 * s1 + i2 * s2 + i3 * s3];\\\n"
    "}\\\n"
    "__kernel void pt_copy_block_##SUF(__global TY *d, long d_o, __global const TY *s, long s_o, long outer, long L,\\\n"
    "                                  long dst_dim, long dst_start, long src_dim, long src_start, long inner) {\\\n"
    "    long e = get_global_id(0), o, p;\\\n"
    "    if (e >= outer * L) return;\\\n"
    "    o = PT_DIV(e, L), p = e - o * L;\\\n"
    "    d[d_o + (o * dst_dim + dst_start) * inner + p] = s[s_o + (o * src_dim + src_start) * inner + p];\\\n"
    "}\n"
    "PT_MOVE(ushort, u16)\n"
    "PT_MOVE(uchar, u8)\n"
    /* ---- images: one work item per output element (maxpool_bwd: per plane, as the CPU) ---- */
    "__kernel void pt_im2col(__global float *cp, long c_o, __global const float *x, long x_o, long rows, int C, int H, int W,\n"
    "                        int k, int stride, int pad, int Ho, int Wo) {\n"
    "    long e = get_global_id(0), S = (long)Ho * Wo, rr, plane, kk = (long)k * k, s, ih, iw;\n"
    "    int ki, kj;\n"
    "    if (e >= rows * S) return;\n"
    "    rr = PT_DIV(e, S), s = e - rr * S, plane = PT_DIV(rr, kk), ki = (int)(rr - plane * kk), kj = ki % k, ki /= k;\n"
    "    ih = PT_DIV(s, (long)Wo), iw = (s - ih * Wo) * stride - pad + kj, ih = ih * stride - pad + ki;\n"
    "    cp[c_o + e] = ih >= 0 && ih < H && iw >= 0 && iw < W ? x[x_o + plane * H * W + ih * W + iw] : 0.0f;\n"
    "}\n"
    /* each dx element sums its (ki, kj) contributions in increasing order, then adds (the CPU's gather) */
    "__kernel void pt_col2im(__global float *dx, long d_o, __global const float *cp, long c_o, long n, int H, int W, int k,\n"
    "                        int stride, int pad, int Ho, int Wo) {\n"
    "    long e = get_global_id(0), S = (long)Ho * Wo, pl, h, w, th, tw, oh, ow;\n"
    "    __global const float *cs;\n"
    "    float acc = 0.0f;\n"
    "    if (e >= n) return;\n"
    "    h = PT_DIV(e, (long)W), w = e - h * W, pl = PT_DIV(h, (long)H), h -= pl * H;\n"
    "    cs = cp + c_o + pl * k * k * S;\n"
    "    for (int ki = 0; ki < k; ki++) {\n"
    "        th = h + pad - ki;\n"
    "        if (th < 0 || th % stride) continue;\n"
    "        oh = th / stride;\n"
    "        if (oh >= Ho) continue;\n"
    "        for (int kj = 0; kj < k; kj++) {\n"
    "            tw = w + pad - kj;\n"
    "            if (tw < 0 || tw % stride) continue;\n"
    "            ow = tw / stride;\n"
    "            if (ow >= Wo) continue;\n"
    "            acc += cs[(ki * k + kj) * S + oh * Wo + ow];\n"
    "        }\n"
    "    }\n"
    "    dx[d_o + e] += acc;\n"
    "}\n"
    "__kernel void pt_chan_bias_fwd(__global float *o, long o_o, __global const float *b, long b_o, long n, int C, long S) {\n"
    "    long e = get_global_id(0);\n"
    "    if (e < n) o[o_o + e] += b[b_o + PT_MOD(PT_DIV(e, S), (long)C)];\n"
    "}\n"
    /* a work group per channel: item l sums the plane of image n0 + l (in order, pt_acc), item 0 adds
       the planes in increasing n (the CPU's per-plane partials in double, added in image order) */
    "__kernel void pt_chan_bias_bwd(__global float *db, long db_o, __global const float *g, long g_o, int N, int C, long S) {\n"
    "    __local pt_acc sh[PT_RWG];\n"
    "    int c = get_group_id(0), l = get_local_id(0);\n"
    "    pt_acc acc = 0;\n"
    "    for (int n0 = 0; n0 < N; n0 += PT_RWG) {\n"
    "        pt_acc s = 0;\n"
    "        if (n0 + l < N) {\n"
    "            __global const float *p = g + g_o + ((long)(n0 + l) * C + c) * S;\n"
    "            for (long i = 0; i < S; i++) s += (pt_acc)p[i];\n"
    "        }\n"
    "        sh[l] = s;\n"
    "        barrier(CLK_LOCAL_MEM_FENCE);\n"
    "        if (l == 0)\n"
    "            for (int i = 0; i < PT_RWG && n0 + i < N; i++) acc += sh[i];\n"
    "        barrier(CLK_LOCAL_MEM_FENCE);\n"
    "    }\n"
    "    if (l == 0) db[db_o + c] += (float)acc;\n"
    "}\n",
    "__kernel void pt_maxpool_fwd(__global float *o, long o_o, __global int *ix, long ix_o, __global const float *x, long x_o,\n"
    "                             long n, int H, int W, int k, int stride, int Ho, int Wo) {\n"
    "    long e = get_global_id(0), S = (long)Ho * Wo, pl, s, h0, w0, bi, j;\n"
    "    __global const float *xs;\n"
    "    float best, v;\n"
    "    if (e >= n) return;\n"
    "    pl = PT_DIV(e, S), s = e - pl * S, h0 = PT_DIV(s, (long)Wo), w0 = (s - h0 * Wo) * stride, h0 *= stride, bi = h0 * W + w0;\n"
    "    xs = x + x_o + pl * H * W;\n"
    "    best = xs[bi];\n"
    "    for (int ki = 0; ki < k && h0 + ki < H; ki++)\n"
    "        for (int kj = 0; kj < k && w0 + kj < W; kj++) {\n"
    "            j = (h0 + ki) * W + w0 + kj, v = xs[j];\n"
    "            if (v > best || (v != v && best == best)) best = v, bi = j;\n"
    "        }\n"
    "    o[o_o + e] = best;\n"
    "    ix[ix_o + e] = (int)bi;\n"
    "}\n"
    "__kernel void pt_maxpool_bwd(__global float *dx, long d_o, __global const float *g, long g_o, __global const int *ix,\n"
    "                             long ix_o, long planes, long HW, long S) {\n"
    "    long pl = get_global_id(0);\n"
    "    if (pl >= planes) return;\n"
    "    for (long o = 0; o < S; o++) dx[d_o + pl * HW + ix[ix_o + pl * S + o]] += g[g_o + pl * S + o];\n"
    "}\n",
    /* ---- causal attention, qkv [B, T, 3C], heads of hs = C/H; one work item per (b, h, row), rows
       consecutive. Scores s_ij = scale * sum_d q_i[d] k_j[d] (d increasing, as the CPU's tiles); the
       row's outputs are accumulated PT_AD dims at a time in private memory (scores recomputed per
       slice when hs > PT_AD). No atomics: dQ by query row, dK and dV by key row. ---- */
    "#define PT_AD 64\n"
    "float pt_dot(__global const float *a, __global const float *b, int n) {\n"
    "    float s = 0.0f;\n"
    "    for (int d = 0; d < n; d++) s += a[d] * b[d];\n"
    "    return s;\n"
    "}\n"
    "__kernel void pt_attn_fwd(__global float *o, long o_o, __global float *ls, long ls_o, __global const float *q, long q_o,\n"
    "                          int B, int T, int C, int H) {\n"
    "    long e = get_global_id(0), b, ld3 = 3 * (long)C;\n"
    "    int hs = C / H, i, h;\n"
    "    float scale = 1.0f / sqrt((float)hs), m = -INFINITY, l = 0.0f, acc[PT_AD];\n"
    "    __global const float *qr, *kb, *vb;\n"
    "    __global float *orow;\n"
    "    if (e >= (long)B * H * T) return;\n"
    "    i = (int)(e % T), h = (int)(e / T % H), b = e / ((long)T * H);\n"
    "    qr = q + q_o + (b * T + i) * ld3 + (long)h * hs, kb = q + q_o + b * T * ld3 + C + (long)h * hs, vb = kb + C;\n"
    "    orow = o + o_o + (b * T + i) * C + (long)h * hs;\n"
    "    for (int j = 0; j <= i; j++) m = fmax(m, scale * pt_dot(kb + j * ld3, qr, hs));\n"
    "    for (int d0 = 0; d0 < hs; d0 += PT_AD) {\n"
    "        int dn = min(PT_AD, hs - d0);\n"
    "        float inv;\n"
    "        for (int d = 0; d < dn; d++) acc[d] = 0.0f;\n"
    "        l = 0.0f;\n"
    "        for (int j = 0; j <= i; j++) {\n"
    "            __global const float *vj = vb + j * ld3 + d0;\n"
    "            float p = exp(scale * pt_dot(kb + j * ld3, qr, hs) - m);\n"
    "            l += p;\n"
    "            for (int d = 0; d < dn; d++) acc[d] += p * vj[d];\n"
    "        }\n"
    "        inv = 1.0f / l;\n"
    "        for (int d = 0; d < dn; d++) orow[d0 + d] = acc[d] * inv;\n"
    "    }\n"
    "    ls[ls_o + e] = m + log(l);\n"
    "}\n",
    /* dQ_i += scale * sum_j<=i P_ij (dP_ij - D_i) k_j, P_ij = exp(s_ij - lse_i), dP_ij = dO_i . v_j,
       D_i = dO_i . O_i (also stored in Dv for the dK/dV kernel) */
    "__kernel void pt_attn_bwd_dq(__global float *dq, long dq_o, __global float *Dv, long Dv_o, __global const float *dO,\n"
    "                             long dO_o, __global const float *q, long q_o, __global const float *O, long O_o,\n"
    "                             __global const float *ls, long ls_o, int B, int T, int C, int H) {\n"
    "    long e = get_global_id(0), b, ld3 = 3 * (long)C;\n"
    "    int hs = C / H, i, h;\n"
    "    float scale = 1.0f / sqrt((float)hs), D, L, acc[PT_AD];\n"
    "    __global const float *qr, *kb, *vb, *gr;\n"
    "    __global float *dr;\n"
    "    if (e >= (long)B * H * T) return;\n"
    "    i = (int)(e % T), h = (int)(e / T % H), b = e / ((long)T * H);\n"
    "    qr = q + q_o + (b * T + i) * ld3 + (long)h * hs, kb = q + q_o + b * T * ld3 + C + (long)h * hs, vb = kb + C;\n"
    "    gr = dO + dO_o + (b * T + i) * C + (long)h * hs;\n"
    "    dr = dq + dq_o + (b * T + i) * ld3 + (long)h * hs;\n"
    "    D = pt_dot(gr, O + O_o + (b * T + i) * C + (long)h * hs, hs), L = ls[ls_o + e];\n"
    "    Dv[Dv_o + e] = D;\n"
    "    for (int d0 = 0; d0 < hs; d0 += PT_AD) {\n"
    "        int dn = min(PT_AD, hs - d0);\n"
    "        for (int d = 0; d < dn; d++) acc[d] = 0.0f;\n"
    "        for (int j = 0; j <= i; j++) {\n"
    "            __global const float *kj = kb + j * ld3;\n"
    "            float p = exp(scale * pt_dot(kj, qr, hs) - L), ds = p * (pt_dot(vb + j * ld3, gr, hs) - D);\n"
    "            for (int d = 0; d < dn; d++) acc[d] += ds * kj[d0 + d];\n"
    "        }\n"
    "        for (int d = 0; d < dn; d++) dr[d0 + d] += scale * acc[d];\n"
    "    }\n"
    "}\n",
    /* dV_j += sum_i>=j P_ij dO_i;  dK_j += scale * sum_i>=j P_ij (dP_ij - D_i) q_i */
    "__kernel void pt_attn_bwd_dkv(__global float *dq, long dq_o, __global const float *Dv, long Dv_o, __global const float *dO,\n"
    "                              long dO_o, __global const float *q, long q_o, __global const float *ls, long ls_o, int B,\n"
    "                              int T, int C, int H) {\n"
    "    long e = get_global_id(0), b, ld3 = 3 * (long)C, bh;\n"
    "    int hs = C / H, j, h;\n"
    "    float scale = 1.0f / sqrt((float)hs), av[PT_AD], ak[PT_AD];\n"
    "    __global const float *qb, *kr, *vr, *gb;\n"
    "    __global float *dk;\n"
    "    if (e >= (long)B * H * T) return;\n"
    "    j = (int)(e % T), h = (int)(e / T % H), b = e / ((long)T * H), bh = e - j;\n"
    "    qb = q + q_o + b * T * ld3 + (long)h * hs, kr = qb + j * ld3 + C, vr = kr + C;\n"
    "    gb = dO + dO_o + b * T * C + (long)h * hs;\n"
    "    dk = dq + dq_o + (b * T + j) * ld3 + C + (long)h * hs;\n"
    "    for (int d0 = 0; d0 < hs; d0 += PT_AD) {\n"
    "        int dn = min(PT_AD, hs - d0);\n"
    "        for (int d = 0; d < dn; d++) av[d] = ak[d] = 0.0f;\n"
    "        for (int i = j; i < T; i++) {\n"
    "            __global const float *qi = qb + i * ld3, *gi = gb + (long)i * C;\n"
    "            float p = exp(scale * pt_dot(kr, qi, hs) - ls[ls_o + bh + i]);\n"
    "            float ds = p * (pt_dot(vr, gi, hs) - Dv[Dv_o + bh + i]);\n"
    "            for (int d = 0; d < dn; d++) {\n"
    "                av[d] += p * gi[d0 + d];\n"
    "                ak[d] += ds * qi[d0 + d];\n"
    "            }\n"
    "        }\n"
    "        for (int d = 0; d < dn; d++) {\n"
    "            dk[C + d0 + d] += av[d];\n"
    "            dk[d0 + d] += scale * ak[d];\n"
    "        }\n"
    "    }\n"
    "}\n",
};

/* every kernel of the program, in the order of the PT__CLK_* indices */
#define PT__CL_KERNELS(X)                                                                                     \
    X(acc_f32) X(acc_i32) X(binary) X(scale) X(axpy) X(mul_acc) X(rowsum) X(act_fwd) X(act_bwd) X(dropout)   \
    X(reduce_chunks) X(reduce_lanes) X(reduce_final) X(adamw) X(sgd) X(softmax_fwd) X(softmax_bwd) X(xent_fwd) X(xent_bwd)   \
    X(layernorm_fwd) X(layernorm_bwd_dx) X(layernorm_bwd_wb) X(embed_fwd) X(embed_bwd) X(permute)           \
    X(copy_block) X(gemm_scale) X(permute_u16) X(copy_block_u16) X(permute_u8) X(copy_block_u8) X(im2col)    \
    X(col2im) X(chan_bias_fwd) X(chan_bias_bwd) X(maxpool_fwd) X(maxpool_bwd) X(attn_fwd) X(attn_bwd_dq)      \
    X(attn_bwd_dkv)

enum {
#define PT__CL_ENUM(name) PT__CLK_##name,
    PT__CL_KERNELS(PT__CL_ENUM)
#undef PT__CL_ENUM
    PT__CLK_COUNT
};
static const char *const pt__cl_kname[PT__CLK_COUNT] = {
#define PT__CL_NAME(name) "pt_" #name,
    PT__CL_KERNELS(PT__CL_NAME)
#undef PT__CL_NAME
};

#define PT__CL_WG 256     /* work-group size of the one-item-per-element kernels (at most the device's) */
#define PT__CL_EPI_ITEMS(n) (((n) + 15) / 16) /* work items of a kernel doing PT_EPI (16) elements each */
#define PT__CL_MINWG 32   /* the smallest group pt__cl_launch shrinks to */
#define PT__CL_CHUNK 4096 /* elements per partial of sum/sumsq: PT_CHUNK in the kernel source */
#define PT__CL_RWG 64     /* work items per chunk in pt_reduce_chunks: PT_RWG in the kernel source */

/* the OpenCL state of a context (ctx->cl) */
typedef struct pt__cl {
    cl_platform_id platform;
    cl_device_id device;
    cl_context context;
    cl_command_queue queue;
    cl_program program;
    cl_kernel k[PT__CLK_COUNT];
    size_t wg;           /* work-group size of the elementwise kernels */
    cl_uint cus;         /* CL_DEVICE_MAX_COMPUTE_UNITS: small launches use smaller groups to reach them all */
    cl_ulong max_alloc;  /* CL_DEVICE_MAX_MEM_ALLOC_SIZE */
    int fp64;            /* double accumulators (cl_khr_fp64); float otherwise */
    int lanes;           /* sum/sumsq partials by pt_reduce_lanes (CPU devices; env PTRAIN_CL_REDUCE), else pt_reduce_chunks */
    cl_mem part;         /* partial sums of sum/sumsq (grown only), also the stand-in for absent tensors */
    int64_t part_bytes;
    pt_device_info info;
} pt__cl;

static const char *pt__cl_err(cl_int e) {
    switch (e) {
    case CL_SUCCESS: return "CL_SUCCESS";
    case CL_DEVICE_NOT_FOUND: return "CL_DEVICE_NOT_FOUND";
    case CL_DEVICE_NOT_AVAILABLE: return "CL_DEVICE_NOT_AVAILABLE";
    case CL_COMPILER_NOT_AVAILABLE: return "CL_COMPILER_NOT_AVAILABLE";
    case CL_MEM_OBJECT_ALLOCATION_FAILURE: return "CL_MEM_OBJECT_ALLOCATION_FAILURE";
    case CL_OUT_OF_RESOURCES: return "CL_OUT_OF_RESOURCES";
    case CL_OUT_OF_HOST_MEMORY: return "CL_OUT_OF_HOST_MEMORY";
    case CL_BUILD_PROGRAM_FAILURE: return "CL_BUILD_PROGRAM_FAILURE";
    case CL_INVALID_VALUE: return "CL_INVALID_VALUE";
    case CL_INVALID_PLATFORM: return "CL_INVALID_PLATFORM";
    case CL_INVALID_DEVICE: return "CL_INVALID_DEVICE";
    case CL_INVALID_BINARY: return "CL_INVALID_BINARY";
    case CL_INVALID_BUILD_OPTIONS: return "CL_INVALID_BUILD_OPTIONS";
    case CL_INVALID_KERNEL_NAME: return "CL_INVALID_KERNEL_NAME";
    case CL_INVALID_KERNEL_ARGS: return "CL_INVALID_KERNEL_ARGS";
    case CL_INVALID_ARG_SIZE: return "CL_INVALID_ARG_SIZE";
    case CL_INVALID_WORK_GROUP_SIZE: return "CL_INVALID_WORK_GROUP_SIZE";
    case CL_INVALID_BUFFER_SIZE: return "CL_INVALID_BUFFER_SIZE";
    case CL_INVALID_MEM_OBJECT: return "CL_INVALID_MEM_OBJECT";
    case CL_MEM_COPY_OVERLAP: return "CL_MEM_COPY_OVERLAP";
    case -1001: return "CL_PLATFORM_NOT_FOUND_KHR (no OpenCL driver installed)";
    default: return "OpenCL error";
    }
}

/* ---- platforms and devices -------------------------------------------------------------------- */
#define PT__CL_MAXP 16
#define PT__CL_MAXD 64

static cl_uint pt__cl_platforms(cl_platform_id *ids) {
    cl_uint n = 0;
    if (clGetPlatformIDs(PT__CL_MAXP, ids, &n) != CL_SUCCESS) return 0;
    return n > PT__CL_MAXP ? PT__CL_MAXP : n;
}
static cl_uint pt__cl_devices(cl_platform_id p, cl_device_id *ids) {
    cl_uint n = 0;
    if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, PT__CL_MAXD, ids, &n) != CL_SUCCESS) return 0;
    return n > PT__CL_MAXD ? PT__CL_MAXD : n;
}
static void pt__cl_str(cl_platform_id p, cl_device_id d, cl_uint what, char *buf, size_t n) {
    buf[0] = 0;
    if (d) clGetDeviceInfo(d, what, n, buf, NULL);
    else clGetPlatformInfo(p, what, n, buf, NULL);
    buf[n - 1] = 0;
}

/* appends to buf at *k, never past len */
static void pt__cl_cat(char *buf, size_t len, size_t *k, const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
static void pt__cl_cat(char *buf, size_t len, size_t *k, const char *fmt, ...) {
    va_list ap;
    int w;
    if (!buf || *k >= len) return;
    va_start(ap, fmt);
    w = vsnprintf(buf + *k, len - *k, fmt, ap);
    va_end(ap);
    if (w > 0) *k = PT__MIN(len, *k + (size_t)w);
}

/* one line per platform and device, "opencl:P:D  platform / device"; returns the number of devices */
static int pt__cl_list(char *buf, size_t len) {
    cl_platform_id ps[PT__CL_MAXP];
    cl_device_id ds[PT__CL_MAXD];
    cl_uint np = pt__cl_platforms(ps), p, d, nd;
    size_t k = 0;
    int total = 0;
    char pn[128], dn[128];
    if (buf && len) buf[0] = 0;
    for (p = 0; p < np; p++) {
        pt__cl_str(ps[p], NULL, CL_PLATFORM_NAME, pn, sizeof pn);
        nd = pt__cl_devices(ps[p], ds);
        if (!nd) pt__cl_cat(buf, len, &k, "  opencl:%u    %s (no devices)\n", p, pn);
        for (d = 0; d < nd; d++, total++) {
            pt__cl_str(NULL, ds[d], CL_DEVICE_NAME, dn, sizeof dn);
            pt__cl_cat(buf, len, &k, "  opencl:%u:%u  %s / %s\n", p, d, pn, dn);
        }
    }
    return total;
}

/* ---- launching kernels -------------------------------------------------------------------------- */
/* Sets the arguments of kernel kid from sig and enqueues `items` work items (rounded up to a multiple
   of the work-group size `local`; 0 = cl->wg, halved down to PT__CL_MINWG while that gives fewer than
   4 groups per compute unit, so launches of a few hundred rows or columns still fill the device;
   kernels check their bound). sig letters: T a tensor
   (two arguments: its cl_mem and its element offset as long; NULL gives the scratch buffer and 0),
   L an int64_t (long), I an int, F a float (passed as double), U a uint64_t (ulong). Returns 0 and
   records the error on failure. */
static int pt__cl_launch(pt_ctx *ctx, int kid, int64_t items, size_t local, const char *sig, ...) {
    pt__cl *cl = (pt__cl *)ctx->cl;
    cl_kernel k = cl->k[kid];
    cl_int err = CL_SUCCESS;
    cl_uint a = 0;
    size_t gsz;
    va_list ap;
    if (items <= 0) return 1;
    if (!local)
        for (local = cl->wg; local / 2 >= PT__CL_MINWG && (uint64_t)items < (uint64_t)local * 4 * (cl->cus ? cl->cus : 1);) local /= 2;
    va_start(ap, sig);
    for (; *sig && err == CL_SUCCESS; sig++) {
        switch (*sig) {
        case 'T': {
            const pt_tensor *t = va_arg(ap, const pt_tensor *);
            cl_mem m = t ? (cl_mem)t->st->dev : cl->part;
            cl_long o = t ? (cl_long)t->off : 0;
            err = clSetKernelArg(k, a++, sizeof m, &m);
            if (err == CL_SUCCESS) err = clSetKernelArg(k, a++, sizeof o, &o);
            break;
        }
        case 'L': {
            cl_long v = (cl_long)va_arg(ap, int64_t);
            err = clSetKernelArg(k, a++, sizeof v, &v);
            break;
        }
        case 'I': {
            cl_int v = (cl_int)va_arg(ap, int);
            err = clSetKernelArg(k, a++, sizeof v, &v);
            break;
        }
        case 'F': {
            cl_float v = (cl_float)va_arg(ap, double);
            err = clSetKernelArg(k, a++, sizeof v, &v);
            break;
        }
        case 'U': {
            cl_ulong v = (cl_ulong)va_arg(ap, uint64_t);
            err = clSetKernelArg(k, a++, sizeof v, &v);
            break;
        }
        default: err = CL_INVALID_KERNEL_ARGS;
        }
    }
    va_end(ap);
    gsz = ((size_t)items + local - 1) / local * local;
    if (err == CL_SUCCESS) err = clEnqueueNDRangeKernel(cl->queue, k, 1, NULL, &gsz, &local, 0, NULL, NULL);
    if (err != CL_SUCCESS) {
        pt__fail(ctx, PT_ERR_DEVICE, "opencl: kernel %s (%lld items) failed: %s (%d)", pt__cl_kname[kid], (long long)items,
                 pt__cl_err(err), (int)err);
        return 0;
    }
    return 1;
}

/* grows the scratch buffer cl->part (what a NULL tensor stands for in pt__cl_launch) to at least
   `need` bytes; its contents are not kept. 0 and an error on failure. */
static int pt__cl_scratch(pt_ctx *ctx, int64_t need, const char *what) {
    pt__cl *cl = (pt__cl *)ctx->cl;
    if (need > cl->part_bytes) {
        cl_int err = CL_SUCCESS;
        cl_mem m = clCreateBuffer(cl->context, CL_MEM_READ_WRITE, (size_t)need, NULL, &err);
        if (!m || err != CL_SUCCESS) {
            pt__fail(ctx, PT_ERR_OOM, "opencl: allocating %lld bytes of %s scratch failed: %s (%d)", (long long)need, what, pt__cl_err(err), (int)err);
            return 0;
        }
        clReleaseMemObject(cl->part);
        cl->part = m;
        cl->part_bytes = need;
    }
    return 1;
}

/* ---- storage ------------------------------------------------------------------------------------ */
static pt_status pt__cl_st_alloc(pt_ctx *ctx, pt_storage *st, int64_t bytes) {
    pt__cl *cl = (pt__cl *)ctx->cl;
    cl_int err = CL_SUCCESS;
    cl_mem m;
    size_t sz = (size_t)(bytes > 0 ? bytes : 4);
    int64_t held = 0;
    int i;
    for (i = 0; i < PT__MEM_KINDS; i++) held += ctx->mem[i];
    if (bytes < 0) bytes = 0;
    if ((cl_ulong)sz > cl->max_alloc) {
        pt__fail(ctx, PT_ERR_OOM, "opencl: cannot allocate %lld bytes on '%s': more than its largest buffer (%llu bytes)", (long long)bytes,
                 cl->info.device, (unsigned long long)cl->max_alloc);
        return PT_ERR_OOM;
    }
    m = clCreateBuffer(cl->context, CL_MEM_READ_WRITE, sz, NULL, &err);
    if (!m || err != CL_SUCCESS) {
        pt__fail(ctx, PT_ERR_OOM, "opencl: allocating %lld bytes on '%s' failed: %s (%d); %lld bytes held by this context", (long long)bytes,
                 cl->info.device, pt__cl_err(err), (int)err, (long long)held);
        return PT_ERR_OOM;
    }
    st->dev = (void *)m;
    st->host = NULL;
    st->raw = NULL;
    st->bytes = bytes;
    return PT_OK;
}
static void pt__cl_st_free(pt_ctx *ctx, pt_storage *st) {
    (void)ctx;
    if (st->dev) clReleaseMemObject((cl_mem)st->dev);
    st->dev = NULL;
    st->bytes = 0;
}
static void pt__cl_write(pt_ctx *ctx, const pt_tensor *dst, const void *src, int64_t bytes) {
    pt__cl *cl = (pt__cl *)ctx->cl;
    cl_int err;
    if (bytes <= 0) return;
    err = clEnqueueWriteBuffer(cl->queue, (cl_mem)dst->st->dev, CL_TRUE, (size_t)(dst->off * pt_dtype_size(dst->dtype)), (size_t)bytes, src, 0,
                               NULL, NULL);
    if (err != CL_SUCCESS)
        pt__fail(ctx, PT_ERR_DEVICE, "opencl: writing %lld bytes to the device failed: %s (%d)", (long long)bytes, pt__cl_err(err), (int)err);
    else pt__xfer_count(ctx, 0, bytes);
}
static void pt__cl_read(pt_ctx *ctx, const pt_tensor *src, void *dst, int64_t bytes) {
    pt__cl *cl = (pt__cl *)ctx->cl;
    cl_int err;
    if (bytes <= 0) return;
    err = clEnqueueReadBuffer(cl->queue, (cl_mem)src->st->dev, CL_TRUE, (size_t)(src->off * pt_dtype_size(src->dtype)), (size_t)bytes, dst, 0,
                              NULL, NULL);
    if (err != CL_SUCCESS) {
        memset(dst, 0, (size_t)bytes);
        pt__fail(ctx, PT_ERR_DEVICE, "opencl: reading %lld bytes from the device failed: %s (%d)", (long long)bytes, pt__cl_err(err), (int)err);
    } else pt__xfer_count(ctx, 1, bytes);
}
/* the non-blocking read: its handle is the read's cl_event (flushed, so the copy runs while the
   host goes on); NULL after an error, which is in ctx */
static void *pt__cl_read_start(pt_ctx *ctx, const pt_tensor *src, void *dst, int64_t bytes) {
    pt__cl *cl = (pt__cl *)ctx->cl;
    cl_event ev = NULL;
    cl_int err;
    if (bytes <= 0) return NULL;
    err = clEnqueueReadBuffer(cl->queue, (cl_mem)src->st->dev, CL_FALSE, (size_t)(src->off * pt_dtype_size(src->dtype)), (size_t)bytes, dst, 0,
                              NULL, &ev);
    if (err == CL_SUCCESS) err = clFlush(cl->queue);
    if (err != CL_SUCCESS) {
        if (ev) clWaitForEvents(1, &ev), clReleaseEvent(ev);
        memset(dst, 0, (size_t)bytes);
        pt__fail(ctx, PT_ERR_DEVICE, "opencl: starting a read of %lld bytes from the device failed: %s (%d)", (long long)bytes, pt__cl_err(err),
                 (int)err);
        return NULL;
    }
    pt__xfer_count(ctx, 1, bytes);
    return (void *)ev;
}
static int pt__cl_read_wait(pt_ctx *ctx, void *h, int block) {
    cl_event ev = (cl_event)h;
    cl_int st = CL_COMPLETE, err = CL_SUCCESS;
    if (!ev) return 1;
    if (block) err = clWaitForEvents(1, &ev);
    if (err == CL_SUCCESS) err = clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL);
    if (err == CL_SUCCESS && st > CL_COMPLETE) return 0; /* queued, submitted or running */
    if (err == CL_SUCCESS && st < 0) err = st;
    clReleaseEvent(ev);
    if (err != CL_SUCCESS)
        pt__fail(ctx, PT_ERR_DEVICE, "opencl: a read from the device failed: %s (%d)", pt__cl_err(err), (int)err);
    return 1;
}

/* ---- elementwise ------------------------------------------------------------------------------ */
static void pt__cl_fill(pt_ctx *ctx, const pt_tensor *t, float v) {
    pt__cl *cl = (pt__cl *)ctx->cl;
    int64_t n = pt_numel(t), esz = pt_dtype_size(t->dtype);
    cl_int err;
    if (n <= 0) return;
    if (t->dtype == PT_F32) {
        cl_float f = v;
        err = clEnqueueFillBuffer(cl->queue, (cl_mem)t->st->dev, &f, sizeof f, (size_t)(t->off * 4), (size_t)(n * 4), 0, NULL, NULL);
    } else if (t->dtype == PT_I32) {
        cl_int iv = (cl_int)v;
        err = clEnqueueFillBuffer(cl->queue, (cl_mem)t->st->dev, &iv, sizeof iv, (size_t)(t->off * 4), (size_t)(n * 4), 0, NULL, NULL);
    } else if (v == 0.0f) { /* storage types: zero only, as on the CPU */
        cl_uchar z = 0;
        err = clEnqueueFillBuffer(cl->queue, (cl_mem)t->st->dev, &z, 1, (size_t)(t->off * esz), (size_t)(n * esz), 0, NULL, NULL);
    } else {
        pt__fail(ctx, PT_ERR_DTYPE, "pt: fill of a non-f32/i32 tensor with %g (only 0 is supported)", (double)v);
        return;
    }
    if (err != CL_SUCCESS) pt__fail(ctx, PT_ERR_DEVICE, "opencl: fill of %lld elements failed: %s (%d)", (long long)n, pt__cl_err(err), (int)err);
}

static void pt__cl_copy(pt_ctx *ctx, const pt_tensor *dst, const pt_tensor *src, int accumulate) {
    pt__cl *cl = (pt__cl *)ctx->cl;
    int64_t n = pt_numel(dst), esz = pt_dtype_size(dst->dtype), d0 = dst->off * esz, s0 = src->off * esz;
    cl_int err;
    if (n <= 0) return;
    if (accumulate) {
        if (dst->dtype != PT_F32 && dst->dtype != PT_I32) {
            pt__fail(ctx, PT_ERR_DTYPE, "pt: accumulating copy of a non-f32/i32 tensor");
            return;
        }
        pt__cl_launch(ctx, dst->dtype == PT_I32 ? PT__CLK_acc_i32 : PT__CLK_acc_f32, n, 0, "TTL", dst, src, n);
        return;
    }
    if (dst->st == src->st && d0 == s0) return;
    if (dst->st == src->st && d0 < s0 + n * esz && s0 < d0 + n * esz) {
        pt__fail(ctx, PT_ERR_DEVICE, "opencl: copy between overlapping ranges of one buffer (%lld bytes at %lld and %lld)", (long long)(n * esz),
                 (long long)s0, (long long)d0);
        return;
    }
    err = clEnqueueCopyBuffer(cl->queue, (cl_mem)src->st->dev, (cl_mem)dst->st->dev, (size_t)s0, (size_t)d0, (size_t)(n * esz), 0, NULL, NULL);
    if (err != CL_SUCCESS) pt__fail(ctx, PT_ERR_DEVICE, "opencl: copy of %lld bytes failed: %s (%d)", (long long)(n * esz), pt__cl_err(err), (int)err);
}

static void pt__cl_binary(pt_ctx *ctx, int op, const pt_tensor *out, const pt_tensor *a, const pt_tensor *b) {
    int64_t n = pt_numel(a), nb = pt_numel(b);
    if (nb > 0) pt__cl_launch(ctx, PT__CLK_binary, PT__CL_EPI_ITEMS(n), 0, "TTTLLI", out, a, b, n, nb, op);
}

static void pt__cl_axpy_reduce(pt_ctx *ctx, const pt_tensor *dst, const pt_tensor *src, float alpha) {
    int64_t nd = pt_numel(dst), ns = pt_numel(src);
    if (nd <= 0) return;
    if (nd >= ns) pt__cl_launch(ctx, PT__CLK_axpy, ns, 0, "TTLF", dst, src, ns, (double)alpha);
    else pt__cl_launch(ctx, PT__CLK_rowsum, nd, 0, "TTTLLLIF", dst, src, (const pt_tensor *)NULL, nd, ns / nd, (int64_t)1, 0, (double)alpha);
}

static void pt__cl_mul_acc(pt_ctx *ctx, const pt_tensor *dst, const pt_tensor *x, const pt_tensor *y) {
    int64_t n = pt_numel(x), ny = pt_numel(y), nd = pt_numel(dst);
    if (nd <= 0 || ny <= 0) return;
    if (nd >= n) pt__cl_launch(ctx, PT__CLK_mul_acc, n, 0, "TTTLL", dst, x, y, n, ny);
    else pt__cl_launch(ctx, PT__CLK_rowsum, nd, 0, "TTTLLLIF", dst, x, y, nd, n / nd, ny, 1, 1.0);
}

static void pt__cl_scale(pt_ctx *ctx, const pt_tensor *out, const pt_tensor *x, float s) {
    int64_t n = pt_numel(x);
    pt__cl_launch(ctx, PT__CLK_scale, n, 0, "TTLF", out, x, n, (double)s);
}

static void pt__cl_act_fwd(pt_ctx *ctx, int kind, const pt_tensor *out, const pt_tensor *x) {
    int64_t n = pt_numel(x);
    pt__cl_launch(ctx, PT__CLK_act_fwd, PT__CL_EPI_ITEMS(n), 0, "TTLI", out, x, n, kind);
}
static void pt__cl_act_bwd(pt_ctx *ctx, int kind, const pt_tensor *dx, const pt_tensor *x, const pt_tensor *dy) {
    int64_t n = pt_numel(x);
    pt__cl_launch(ctx, PT__CLK_act_bwd, PT__CL_EPI_ITEMS(n), 0, "TTTLI", dx, x, dy, n, kind);
}
static void pt__cl_dropout(pt_ctx *ctx, const pt_tensor *out, const pt_tensor *x, float p, uint64_t key, int64_t base,
                           int accumulate) {
    int64_t n = pt_numel(x);
    pt__cl_launch(ctx, PT__CLK_dropout, n, 0, "TTLFULI", out, x, n, (double)p, key, base, accumulate);
}

/* ---- row-wise --------------------------------------------------------------------------------- */
static int64_t pt__cl_cols(const pt_tensor *t) { return t->ndim > 0 ? t->shape[t->ndim - 1] : 1; }

static void pt__cl_softmax_fwd(pt_ctx *ctx, const pt_tensor *y, const pt_tensor *x, int lg) {
    int64_t cols = pt__cl_cols(x), rows = cols > 0 ? pt_numel(x) / cols : 0;
    if (cols > 0) pt__cl_launch(ctx, PT__CLK_softmax_fwd, rows, 0, "TTLLI", y, x, rows, cols, lg);
}
static void pt__cl_softmax_bwd(pt_ctx *ctx, const pt_tensor *dx, const pt_tensor *y, const pt_tensor *dy, int lg) {
    int64_t cols = pt__cl_cols(y), rows = cols > 0 ? pt_numel(y) / cols : 0;
    if (cols > 0) pt__cl_launch(ctx, PT__CLK_softmax_bwd, rows, 0, "TTTLLI", dx, y, dy, rows, cols, lg);
}
static void pt__cl_xent_fwd(pt_ctx *ctx, const pt_tensor *loss_rows, const pt_tensor *lse, const pt_tensor *logits,
                            const pt_tensor *targets, int32_t ignore, int64_t nvalid) {
    int64_t V = pt__cl_cols(logits), rows = V > 0 ? pt_numel(logits) / V : 0;
    if (nvalid <= 0 || nvalid > V) nvalid = V;
    if (nvalid > 0) pt__cl_launch(ctx, PT__CLK_xent_fwd, rows, 0, "TTTTLLIL", loss_rows, lse, logits, targets, rows, V, (int)ignore, nvalid);
}
static void pt__cl_xent_bwd(pt_ctx *ctx, const pt_tensor *dlogits, const pt_tensor *logits, const pt_tensor *lse,
                            const pt_tensor *targets, int32_t ignore, int64_t nvalid, const pt_tensor *dloss, float scale,
                            int overwrite) {
    int64_t V = pt__cl_cols(logits), rows = V > 0 ? pt_numel(logits) / V : 0;
    if (nvalid <= 0 || nvalid > V) nvalid = V;
    if (nvalid > 0)
        pt__cl_launch(ctx, PT__CLK_xent_bwd, rows, 0, "TTTTTLLILFI", dlogits, logits, lse, targets, dloss, rows, V, (int)ignore, nvalid,
                      (double)scale, overwrite);
}
static void pt__cl_layernorm_fwd(pt_ctx *ctx, const pt_tensor *y, const pt_tensor *mean, const pt_tensor *rstd, const pt_tensor *x,
                                 const pt_tensor *w, const pt_tensor *b, float eps) {
    int64_t C = pt__cl_cols(x), rows = C > 0 ? pt_numel(x) / C : 0;
    if (C > 0) pt__cl_launch(ctx, PT__CLK_layernorm_fwd, rows, 0, "TTTTTTILLF", y, mean, rstd, x, w, b, b != NULL, rows, C, (double)eps);
}
static void pt__cl_layernorm_bwd(pt_ctx *ctx, const pt_tensor *dx, const pt_tensor *dw, const pt_tensor *db, const pt_tensor *dy,
                                 const pt_tensor *x, const pt_tensor *w, const pt_tensor *mean, const pt_tensor *rstd) {
    int64_t C = pt__cl_cols(x), rows = C > 0 ? pt_numel(x) / C : 0;
    if (C <= 0) return;
    if (dx) pt__cl_launch(ctx, PT__CLK_layernorm_bwd_dx, rows, 0, "TTTTTTLL", dx, dy, x, w, mean, rstd, rows, C);
    if (dw || db)
        pt__cl_launch(ctx, PT__CLK_layernorm_bwd_wb, C, 0, "TITITTTTLL", dw, dw != NULL, db, db != NULL, dy, x, mean, rstd, rows, C);
}
static void pt__cl_embed_fwd(pt_ctx *ctx, const pt_tensor *out, const pt_tensor *table, const pt_tensor *ids) {
    int64_t C = pt__cl_cols(table), n = pt_numel(ids);
    pt__cl_launch(ctx, PT__CLK_embed_fwd, n * C, 0, "TTTLL", out, table, ids, n, C);
}
static void pt__cl_embed_bwd(pt_ctx *ctx, const pt_tensor *dtable, const pt_tensor *dout, const pt_tensor *ids) {
    int64_t C = pt__cl_cols(dtable), n = pt_numel(ids);
    pt__cl_launch(ctx, PT__CLK_embed_bwd, C, 0, "TTTLL", dtable, dout, ids, n, C);
}
static int pt__cl_attn_ok(pt_ctx *ctx, int B, int T, int C, int H) {
    if (B <= 0 || T <= 0 || H <= 0 || C <= 0) return 0;
    if (C % H) {
        pt__fail(ctx, PT_ERR_SHAPE, "attention: width %d not divisible by %d heads", C, H);
        return 0;
    }
    return 1;
}
static void pt__cl_attn_fwd(pt_ctx *ctx, const pt_tensor *out, const pt_tensor *lse, const pt_tensor *qkv, int B, int T, int C, int H) {
    if (pt__cl_attn_ok(ctx, B, T, C, H)) pt__cl_launch(ctx, PT__CLK_attn_fwd, (int64_t)B * H * T, 0, "TTTIIII", out, lse, qkv, B, T, C, H);
}
/* dQ by query row (also D_i = dO_i . O_i into the scratch buffer), then dK and dV by key row */
static void pt__cl_attn_bwd(pt_ctx *ctx, const pt_tensor *dqkv, const pt_tensor *dout, const pt_tensor *qkv, const pt_tensor *out,
                            const pt_tensor *lse, int B, int T, int C, int H) {
    const pt_tensor *D = NULL; /* the scratch buffer */
    int64_t n = (int64_t)B * H * T;
    if (!pt__cl_attn_ok(ctx, B, T, C, H) || !pt__cl_scratch(ctx, n * 4, "attention")) return;
    if (pt__cl_launch(ctx, PT__CLK_attn_bwd_dq, n, 0, "TTTTTTIIII", dqkv, D, dout, qkv, out, lse, B, T, C, H))
        pt__cl_launch(ctx, PT__CLK_attn_bwd_dkv, n, 0, "TTTTTIIII", dqkv, D, dout, qkv, lse, B, T, C, H);
}

/* ---- layout: 4-byte elements (f32 add, i32 wrapping add or copy), 1- and 2-byte storage types (copy) -- */
/* the kernel for t's element size (PT__CLK_permute or PT__CLK_copy_block for 4 bytes, *kid + 2 for 2
   bytes, + 4 for 1 byte) and the accumulate mode; -1 with the CPU's error for an accumulating move of
   a storage type */
static int pt__cl_acc_mode(pt_ctx *ctx, const char *what, const pt_tensor *t, int accumulate, int *kid) {
    int64_t esz = pt_dtype_size(t->dtype);
    if (esz != 4 && esz != 2 && esz != 1) {
        pt__fail(ctx, PT_ERR_DTYPE, "pt: %s of a %lld-byte dtype", what, (long long)esz);
        return -1;
    }
    if (esz != 4 && accumulate) {
        pt__fail(ctx, PT_ERR_DTYPE, "pt: accumulating %s of a non-f32/i32 tensor", what);
        return -1;
    }
    *kid = esz == 4 ? *kid : *kid == PT__CLK_permute ? (esz == 2 ? PT__CLK_permute_u16 : PT__CLK_permute_u8)
                                                      : (esz == 2 ? PT__CLK_copy_block_u16 : PT__CLK_copy_block_u8);
    return esz != 4 ? -2 : accumulate ? (t->dtype == PT_I32 ? 2 : 1) : 0;
}
static void pt__cl_permute(pt_ctx *ctx, const pt_tensor *dst, const pt_tensor *src, const int *perm, int accumulate) {
    int kid = PT__CLK_permute, nd = src->ndim, acc = pt__cl_acc_mode(ctx, "permute", src, accumulate, &kid), i, k;
    int64_t sstr[PT_MAX_DIMS], D[4] = {1, 1, 1, 1}, S[4] = {0, 0, 0, 0}, n = pt_numel(src);
    if (acc == -1 || n <= 0) return;
    if (nd > 0) {
        sstr[nd - 1] = 1;
        for (k = nd - 2; k >= 0; k--) sstr[k] = sstr[k + 1] * src->shape[k + 1];
        for (i = 0; i < nd; i++) {
            D[4 - nd + i] = src->shape[perm[i]];
            S[4 - nd + i] = sstr[perm[i]];
        }
    } else S[3] = 1;
    /* the storage-type kernels take no acc argument (the trailing "I" is left off) */
    pt__cl_launch(ctx, kid, n, 0, acc == -2 ? "TTLLLLLLLL" : "TTLLLLLLLLI", dst, src, n, D[1], D[2], D[3], S[0], S[1], S[2], S[3], acc);
}
static void pt__cl_copy_block(pt_ctx *ctx, const pt_tensor *dst, int64_t dst_dim, int64_t dst_start, const pt_tensor *src, int64_t src_dim,
                              int64_t src_start, int64_t count, int64_t outer, int64_t inner, int accumulate) {
    int kid = PT__CLK_copy_block, acc = pt__cl_acc_mode(ctx, "copy_block", dst, accumulate, &kid);
    int64_t L = count * inner;
    if (acc == -1 || L <= 0 || outer <= 0) return;
    pt__cl_launch(ctx, kid, outer * L, 0, acc == -2 ? "TTLLLLLLL" : "TTLLLLLLLI", dst, src, outer, L, dst_dim, dst_start, src_dim, src_start,
                  inner, acc);
}

/* sum or sum of squares of x[0, n) into the scratch slot part[nch] (and into out[0] * scale when out
   is given); 0 and an error on failure */
static int pt__cl_reduce(pt_ctx *ctx, const pt_tensor *x, int64_t n, int sq, const pt_tensor *out, float scale, int64_t *slot) {
    pt__cl *cl = (pt__cl *)ctx->cl;
    int64_t nch = (n + PT__CL_CHUNK - 1) / PT__CL_CHUNK, esz = cl->fp64 ? 8 : 4;
    if (!pt__cl_scratch(ctx, (nch + 1) * esz, "reduction")) return 0;
    *slot = nch;
    if (cl->lanes ? !pt__cl_launch(ctx, PT__CLK_reduce_lanes, nch, 0, "TLIT", x, n, sq, (const pt_tensor *)NULL)
                : !pt__cl_launch(ctx, PT__CLK_reduce_chunks, nch * PT__CL_RWG, PT__CL_RWG, "TLIT", x, n, sq, (const pt_tensor *)NULL))
        return 0;
    /* a NULL tensor stands for the scratch buffer at offset 0 (see pt__cl_launch) */
    return pt__cl_launch(ctx, PT__CLK_reduce_final, 1, 1, "TLTIF", (const pt_tensor *)NULL, nch, out, out != NULL, (double)scale);
}
static void pt__cl_sum(pt_ctx *ctx, const pt_tensor *out, const pt_tensor *x, float scale) {
    int64_t slot, n = pt_numel(x);
    if (n <= 0) {
        pt__cl_fill(ctx, out, 0.0f);
        return;
    }
    pt__cl_reduce(ctx, x, n, 0, out, scale, &slot);
}
static double pt__cl_sumsq(pt_ctx *ctx, const pt_tensor *x, int64_t n) {
    pt__cl *cl = (pt__cl *)ctx->cl;
    int64_t slot;
    double r = 0.0;
    float rf = 0.0f;
    cl_int err;
    int k;
    if (n <= 0 || !pt__cl_reduce(ctx, x, n, 1, NULL, 1.0f, &slot)) return 0.0;
    err = cl->fp64 ? clEnqueueReadBuffer(cl->queue, cl->part, CL_TRUE, (size_t)(slot * 8), 8, &r, 0, NULL, NULL)
                   : clEnqueueReadBuffer(cl->queue, cl->part, CL_TRUE, (size_t)(slot * 4), 4, &rf, 0, NULL, NULL);
    if (err != CL_SUCCESS) {
        pt__fail(ctx, PT_ERR_DEVICE, "opencl: reading a sum of squares failed: %s (%d)", pt__cl_err(err), (int)err);
        return 0.0;
    }
    k = pt__xfer_as(ctx, PT_XFER_SCALAR);
    pt__xfer_count(ctx, 1, cl->fp64 ? 8 : 4);
    pt__xfer_as(ctx, k);
    return cl->fp64 ? r : (double)rf;
}

/* ---- matrix products: CLBlast, row-major, offsets in elements ---------------------------------- */
static void pt__cl_gemm(pt_ctx *ctx, int ta, int tb, int64_t batch, int64_t M, int64_t N, int64_t K, float alpha, const pt_tensor *A,
                        int64_t lda, int64_t sa, const pt_tensor *B, int64_t ldb, int64_t sb, float beta, const pt_tensor *C,
                        int64_t ldc, int64_t sc) {
    pt__cl *cl = (pt__cl *)ctx->cl;
    CLBlastStatusCode s;
    CLBlastTranspose TA = ta ? CLBlastTransposeYes : CLBlastTransposeNo, TB = tb ? CLBlastTransposeYes : CLBlastTransposeNo;
    if (M <= 0 || N <= 0 || batch <= 0) return;
    /* K = 0 scales C by beta; beta = 0 must not read C (the arena may hold NaN bit patterns). A
       contiguous C is zeroed by the driver's fill, several times faster than the kernel on PoCL */
    if (beta == 0.0f && ldc == N && (batch == 1 || sc == M * N)) {
        const float zero = 0.0f;
        cl_int e = clEnqueueFillBuffer(cl->queue, (cl_mem)C->st->dev, &zero, sizeof zero, (size_t)C->off * sizeof(float),
                                       (size_t)(batch * M * N) * sizeof(float), 0, NULL, NULL);
        if (e != CL_SUCCESS) {
            pt__fail(ctx, PT_ERR_DEVICE, "opencl: zeroing a GEMM result of %lld floats failed: %s (%d)", (long long)(batch * M * N), pt__cl_err(e), (int)e);
            return;
        }
        if (K <= 0) return;
    } else if (K <= 0 || beta == 0.0f) {
        if (!pt__cl_launch(ctx, PT__CLK_gemm_scale, batch * M * N, 0, "TLLLLLF", C, batch, M, N, ldc, sc, (double)beta) || K <= 0) return;
    }
    if (batch == 1)
        s = CLBlastSgemm(CLBlastLayoutRowMajor, TA, TB, (size_t)M, (size_t)N, (size_t)K, alpha, (cl_mem)A->st->dev, (size_t)A->off, (size_t)lda,
                         (cl_mem)B->st->dev, (size_t)B->off, (size_t)ldb, beta, (cl_mem)C->st->dev, (size_t)C->off, (size_t)ldc, &cl->queue, NULL);
    else
        s = CLBlastSgemmStridedBatched(CLBlastLayoutRowMajor, TA, TB, (size_t)M, (size_t)N, (size_t)K, alpha, (cl_mem)A->st->dev, (size_t)A->off,
                                       (size_t)lda, (size_t)sa, (cl_mem)B->st->dev, (size_t)B->off, (size_t)ldb, (size_t)sb, beta,
                                       (cl_mem)C->st->dev, (size_t)C->off, (size_t)ldc, (size_t)sc, (size_t)batch, &cl->queue, NULL);
    if (s != CLBlastSuccess)
        pt__fail(ctx, PT_ERR_DEVICE, "opencl: CLBlast SGEMM (batch %lld, M=%lld N=%lld K=%lld, ta %d tb %d, lda %lld ldb %lld ldc %lld) failed: status %d",
                 (long long)batch, (long long)M, (long long)N, (long long)K, ta, tb, (long long)lda, (long long)ldb, (long long)ldc, (int)s);
}

/* ---- images ------------------------------------------------------------------------------------- */
static void pt__cl_im2col(pt_ctx *ctx, const pt_tensor *cols, const pt_tensor *x, int N, int C, int H, int W, int k, int stride, int pad,
                          int Ho, int Wo) {
    int64_t rows = (int64_t)N * C * k * k;
    pt__cl_launch(ctx, PT__CLK_im2col, rows * Ho * Wo, 0, "TTLIIIIIIII", cols, x, rows, C, H, W, k, stride, pad, Ho, Wo);
}
static void pt__cl_col2im(pt_ctx *ctx, const pt_tensor *dx, const pt_tensor *dcols, int N, int C, int H, int W, int k, int stride, int pad,
                          int Ho, int Wo) {
    int64_t n = (int64_t)N * C * H * W;
    pt__cl_launch(ctx, PT__CLK_col2im, n, 0, "TTLIIIIIII", dx, dcols, n, H, W, k, stride, pad, Ho, Wo);
}
static void pt__cl_chan_bias_fwd(pt_ctx *ctx, const pt_tensor *out, const pt_tensor *b, int N, int C, int64_t S) {
    int64_t n = (int64_t)N * C * S;
    pt__cl_launch(ctx, PT__CLK_chan_bias_fwd, n, 0, "TTLIL", out, b, n, C, S);
}
static void pt__cl_chan_bias_bwd(pt_ctx *ctx, const pt_tensor *db, const pt_tensor *dout, int N, int C, int64_t S) {
    if (N > 0 && S > 0) pt__cl_launch(ctx, PT__CLK_chan_bias_bwd, (int64_t)C * PT__CL_RWG, PT__CL_RWG, "TTIIL", db, dout, N, C, S);
}
static void pt__cl_maxpool_fwd(pt_ctx *ctx, const pt_tensor *out, const pt_tensor *idx, const pt_tensor *x, int N, int C, int H, int W, int k,
                               int stride, int Ho, int Wo) {
    int64_t n = (int64_t)N * C * Ho * Wo;
    pt__cl_launch(ctx, PT__CLK_maxpool_fwd, n, 0, "TTTLIIIIII", out, idx, x, n, H, W, k, stride, Ho, Wo);
}
/* one work item per plane, outputs in increasing order (overlapping windows add into one dx element) */
static void pt__cl_maxpool_bwd(pt_ctx *ctx, const pt_tensor *dx, const pt_tensor *dout, const pt_tensor *idx, int N, int C, int H, int W,
                               int Ho, int Wo) {
    pt__cl_launch(ctx, PT__CLK_maxpool_bwd, (int64_t)N * C, 0, "TTTLLL", dx, dout, idx, (int64_t)N * C, (int64_t)H * W, (int64_t)Ho * Wo);
}

/* ---- optimizers ------------------------------------------------------------------------------- */
static void pt__cl_adamw(pt_ctx *ctx, const pt_tensor *p, const pt_tensor *g, const pt_tensor *m, const pt_tensor *v, int64_t n, float lr,
                         float b1, float b2, float eps, float wd, float bc1, float bc2, float gscale) {
    pt__cl_launch(ctx, PT__CLK_adamw, PT__CL_EPI_ITEMS(n), 0, "TTTTLFFFFFFFF", p, g, m, v, n, (double)lr, (double)b1, (double)b2, (double)eps, (double)wd,
                  (double)bc1, (double)bc2, (double)gscale);
}
static void pt__cl_sgd(pt_ctx *ctx, const pt_tensor *p, const pt_tensor *g, const pt_tensor *mom, int64_t n, float lr, float momentum,
                       float wd, float gscale) {
    pt__cl_launch(ctx, PT__CLK_sgd, n, 0, "TTTLFFFFI", p, g, mom, n, (double)lr, (double)momentum, (double)wd, (double)gscale, mom != NULL);
}

static const pt__backend pt__cl_backend = {
    "opencl",
    pt__cl_st_alloc, pt__cl_st_free, pt__cl_write, pt__cl_read, pt__cl_read_start, pt__cl_read_wait,
    pt__cl_fill, pt__cl_copy, pt__cl_binary, pt__cl_axpy_reduce, pt__cl_mul_acc, pt__cl_scale,
    pt__cl_act_fwd, pt__cl_act_bwd, pt__cl_dropout,
    pt__cl_softmax_fwd, pt__cl_softmax_bwd, pt__cl_xent_fwd, pt__cl_xent_bwd,
    pt__cl_layernorm_fwd, pt__cl_layernorm_bwd, pt__cl_embed_fwd, pt__cl_embed_bwd,
    pt__cl_attn_fwd, pt__cl_attn_bwd,
    pt__cl_permute, pt__cl_copy_block, pt__cl_sum,
    pt__cl_gemm,
    pt__cl_im2col, pt__cl_col2im, pt__cl_chan_bias_fwd, pt__cl_chan_bias_bwd, pt__cl_maxpool_fwd,
    pt__cl_maxpool_bwd,
    pt__cl_adamw, pt__cl_sgd, pt__cl_sumsq,
};

/* ---- the program: built from source once per context, binaries cached on disk ------------------
   Cache file <dir>/ptrain-cl-<key>.bin, key = hash(platform, device name, driver version, build
   options, kernel source). Layout: "PTCLBIN1", the key, the binary's size and a hash of its bytes
   (4 x 8 bytes), then the binary. An entry whose header, size or hash does not match, or that the
   driver refuses, is rebuilt from source and rewritten; writes go to a temporary file renamed over
   the entry, so readers never see half a file. dir: env PTRAIN_CL_CACHE ("off" disables), else
   $XDG_CACHE_HOME/ptrain, else $HOME/.cache/ptrain. */
static uint64_t pt__cl_hash_bytes(uint64_t h, const void *p, size_t n) {
    const unsigned char *s = (const unsigned char *)p;
    size_t i;
    for (i = 0; i < n; i++) h = (h ^ s[i]) * 0x100000001b3ull;
    return h;
}

static void pt__cl_cache_path(pt__cl *cl, uint64_t key) {
    const char *e = getenv("PTRAIN_CL_CACHE"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    char dir[400];
    cl->info.cache_file[0] = 0;
    if (e && (!strcmp(e, "off") || !strcmp(e, "0"))) return;
    if (e && *e) pt__msg(dir, sizeof dir, "%s", e);
    else if (xdg && *xdg) pt__msg(dir, sizeof dir, "%s/ptrain", xdg);
    else if (home && *home) pt__msg(dir, sizeof dir, "%s/.cache/ptrain", home);
    else return;
    if (!pt__mkdirs(dir)) return;
    pt__msg(cl->info.cache_file, sizeof cl->info.cache_file, "%s/ptrain-cl-%016llx.bin", dir, (unsigned long long)key);
}

/* the cached binary (PT_MALLOC'd, *size set) if the entry is intact, else NULL */
static unsigned char *pt__cl_cache_load(const char *path, uint64_t key, size_t *size) {
    FILE *f = path[0] ? fopen(path, "rb") : NULL;
    uint64_t hdr[4];
    unsigned char *bin = NULL;
    if (!f) return NULL;
    if (fread(hdr, sizeof hdr, 1, f) == 1 && !memcmp(&hdr[0], "PTCLBIN1", 8) && hdr[1] == key && hdr[2] > 0 && hdr[2] < ((uint64_t)1 << 31) &&
        (bin = (unsigned char *)PT_MALLOC((size_t)hdr[2])) != NULL) {
        if (fread(bin, 1, (size_t)hdr[2], f) != (size_t)hdr[2] || fgetc(f) != EOF ||
            pt__cl_hash_bytes(0xcbf29ce484222325ull, bin, (size_t)hdr[2]) != hdr[3]) {
            PT_FREE(bin);
            bin = NULL;
        } else *size = (size_t)hdr[2];
    }
    fclose(f);
    return bin;
}

static void pt__cl_cache_store(pt_ctx *ctx, pt__cl *cl, uint64_t key) {
    size_t size = 0;
    unsigned char *bin;
    char tmp[600];
    uint64_t hdr[4];
    FILE *f;
    int ok;
    if (!cl->info.cache_file[0] || clGetProgramInfo(cl->program, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, NULL) != CL_SUCCESS || !size) return;
    if (!(bin = (unsigned char *)PT_MALLOC(size))) return;
    if (clGetProgramInfo(cl->program, CL_PROGRAM_BINARIES, sizeof bin, &bin, NULL) != CL_SUCCESS) {
        PT_FREE(bin);
        return;
    }
    memcpy(&hdr[0], "PTCLBIN1", 8);
    hdr[1] = key;
    hdr[2] = size;
    hdr[3] = pt__cl_hash_bytes(0xcbf29ce484222325ull, bin, size);
    pt__msg(tmp, sizeof tmp, "%s.%016llx.tmp", cl->info.cache_file,
            (unsigned long long)pt_hash64((uint64_t)(uintptr_t)ctx ^ (uint64_t)(pt_time() * 1e9)));
    f = fopen(tmp, "wb");
    ok = f && fwrite(hdr, sizeof hdr, 1, f) == 1 && fwrite(bin, 1, size, f) == size;
    if (f && fclose(f) != 0) ok = 0;
    if (ok) ok = rename(tmp, cl->info.cache_file) == 0;
    if (!ok) {
        remove(tmp);
        pt_log(ctx, PT_LOG_WARN, "opencl: could not write the program cache %s (kernels are rebuilt next time)", cl->info.cache_file);
    }
    PT_FREE(bin);
}

static pt_status pt__cl_build(pt_ctx *ctx, pt__cl *cl) {
    char opts[400], drv[64];
    const char *extra = getenv("PTRAIN_CL_OPTIONS");
    size_t lens[sizeof pt__cl_src / sizeof pt__cl_src[0]], bsize = 0, i;
    const size_t npieces = sizeof pt__cl_src / sizeof pt__cl_src[0];
    unsigned char *bin;
    uint64_t key = 0xcbf29ce484222325ull;
    cl_device_fp_config fc = 0;
    cl_int err = CL_SUCCESS, bst = CL_SUCCESS;
    /* stricter than the default (correctly rounded / and sqrt) where the device offers it; nothing relaxed */
    clGetDeviceInfo(cl->device, CL_DEVICE_SINGLE_FP_CONFIG, sizeof fc, &fc, NULL);
    if (extra && (strstr(extra, "relaxed") || strstr(extra, "unsafe") || strstr(extra, "finite-math") || strstr(extra, "mad-enable") ||
                  strstr(extra, "no-signed-zeros") || strlen(extra) > 200))
        return (pt_status)(pt__fail(ctx, PT_ERR_ARG, "pt_init: PTRAIN_CL_OPTIONS='%.200s': relaxed-math options are refused (results must match the CPU), "
                                    "at most 200 characters", extra), PT_ERR_ARG);
    /* PTRAIN_CL_OPTIONS: extra build options (part of the cache key); -DPT_CL_FORCE_BUILD_ERROR
       makes the build fail on purpose, which the tests use to check the build-error path */
    pt__msg(opts, sizeof opts, "-cl-std=CL1.2%s%s%s%s", cl->fp64 ? " -DPT_FP64=1" : "",
            (fc & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT) ? " -cl-fp32-correctly-rounded-divide-sqrt" : "", extra ? " " : "", extra ? extra : "");
    pt__cl_str(NULL, cl->device, CL_DEVICE_VERSION, drv, sizeof drv);
    key = pt__cl_hash_bytes(key, cl->info.platform, strlen(cl->info.platform) + 1);
    key = pt__cl_hash_bytes(key, cl->info.device, strlen(cl->info.device) + 1);
    key = pt__cl_hash_bytes(key, cl->info.driver, strlen(cl->info.driver) + 1);
    key = pt__cl_hash_bytes(key, drv, strlen(drv) + 1);
    key = pt__cl_hash_bytes(key, opts, strlen(opts) + 1);
    for (i = 0; i < npieces; i++) key = pt__cl_hash_bytes(key, pt__cl_src[i], lens[i] = strlen(pt__cl_src[i]));
    pt__cl_cache_path(cl, key);
    if ((bin = pt__cl_cache_load(cl->info.cache_file, key, &bsize)) != NULL) {
        const unsigned char *b = bin;
        cl->program = clCreateProgramWithBinary(cl->context, 1, &cl->device, &bsize, &b, &bst, &err);
        if (cl->program && err == CL_SUCCESS && bst == CL_SUCCESS && clBuildProgram(cl->program, 1, &cl->device, opts, NULL, NULL) == CL_SUCCESS)
            cl->info.program_cache_loads = 1;
        else if (cl->program) {
            clReleaseProgram(cl->program);
            cl->program = NULL;
        }
        PT_FREE(bin);
    }
    if (!cl->program && cl->info.cache_file[0]) {
        FILE *f = fopen(cl->info.cache_file, "rb");
        if (f) { /* present but unusable */
            fclose(f);
            pt_log(ctx, PT_LOG_WARN, "opencl: program cache entry %s is corrupt or stale: rebuilding it", cl->info.cache_file);
        }
    }
    if (!cl->program) {
        cl->program = clCreateProgramWithSource(cl->context, (cl_uint)npieces, (const char **)pt__cl_src, lens, &err);
        if (!cl->program || err != CL_SUCCESS) {
            pt__fail(ctx, PT_ERR_DEVICE, "pt_init: clCreateProgramWithSource failed: %s (%d)", pt__cl_err(err), (int)err);
            return PT_ERR_DEVICE;
        }
        err = clBuildProgram(cl->program, 1, &cl->device, opts, NULL, NULL);
        if (err != CL_SUCCESS) {
            char log[700];
            size_t n = 0;
            log[0] = 0;
            clGetProgramBuildInfo(cl->program, cl->device, CL_PROGRAM_BUILD_LOG, sizeof log, log, &n);
            log[sizeof log - 1] = 0;
            pt__fail(ctx, PT_ERR_DEVICE, "pt_init: building the OpenCL kernels for '%s' failed: %s (%d); build log:\n%s", cl->info.device,
                     pt__cl_err(err), (int)err, log);
            return PT_ERR_DEVICE;
        }
        cl->info.program_builds = 1;
        pt__cl_cache_store(ctx, cl, key);
    }
    for (i = 0; i < PT__CLK_COUNT; i++) {
        cl->k[i] = clCreateKernel(cl->program, pt__cl_kname[i], &err);
        if (!cl->k[i] || err != CL_SUCCESS) {
            pt__fail(ctx, PT_ERR_DEVICE, "pt_init: OpenCL kernel %s missing from the program: %s (%d)", pt__cl_kname[i], pt__cl_err(err), (int)err);
            return PT_ERR_DEVICE;
        }
    }
    return PT_OK;
}

static void pt__cl_close(pt_ctx *ctx) {
    pt__cl *cl = (pt__cl *)ctx->cl;
    int i;
    if (!cl) return;
    if (cl->queue) clFinish(cl->queue);
    for (i = 0; i < PT__CLK_COUNT; i++)
        if (cl->k[i]) clReleaseKernel(cl->k[i]);
    if (cl->part) clReleaseMemObject(cl->part);
    if (cl->program) clReleaseProgram(cl->program);
    if (cl->queue) clReleaseCommandQueue(cl->queue);
    if (cl->context) clReleaseContext(cl->context);
    PT_FREE(cl);
    ctx->cl = NULL;
}

/* parses "opencl[:P[:D]]" (-1 = not given); 0 if malformed */
static int pt__cl_parse(const char *spec, long *P, long *D) {
    const char *s = spec + 6;
    char *end;
    *P = *D = -1;
    if (!*s) return 1;
    if (*s++ != ':') return 0;
    *P = strtol(s, &end, 10);
    if (end == s || *P < 0) return 0;
    if (!*end) return 1;
    if (*end != ':') return 0;
    s = end + 1;
    *D = strtol(s, &end, 10);
    return end != s && *D >= 0 && !*end;
}

/* opens the device named by spec ("opencl[:P[:D]]") and makes it ctx's backend */
static pt_status pt__cl_open(pt_ctx *ctx, const char *spec) {
    cl_platform_id ps[PT__CL_MAXP];
    cl_device_id ds[PT__CL_MAXD];
    cl_uint np, nd = 0, p;
    cl_int err = CL_SUCCESS;
    cl_device_fp_config dfc = 0;
    long P, D;
    char list[700];
    pt__cl *cl;
    if (!pt__cl_parse(spec, &P, &D)) {
        pt__fail(ctx, PT_ERR_ARG, "pt_init: device '%s' is malformed, expected opencl, opencl:P or opencl:P:D (platform and device indices)", spec);
        return PT_ERR_ARG;
    }
    np = pt__cl_platforms(ps);
    if (!np) {
        pt__fail(ctx, PT_ERR_DEVICE, "pt_init: device '%s': no OpenCL platform found (install an OpenCL driver, e.g. pocl-opencl-icd: make deps)", spec);
        return PT_ERR_DEVICE;
    }
    pt__cl_list(list, sizeof list);
    if (P >= (long)np) {
        pt__fail(ctx, PT_ERR_DEVICE, "pt_init: device '%s': there is no OpenCL platform %ld (%u platform%s); devices:\n%s", spec, P, np,
                 np == 1 ? "" : "s", list);
        return PT_ERR_DEVICE;
    }
    if (P < 0) /* the first platform with a device */
        for (p = 0; p < np && P < 0; p++)
            if (pt__cl_devices(ps[p], ds) > 0) P = (long)p;
    if (P >= 0) nd = pt__cl_devices(ps[P], ds);
    if (!nd) {
        pt__fail(ctx, PT_ERR_DEVICE, "pt_init: device '%s': no OpenCL device found; platforms:\n%s", spec, list);
        return PT_ERR_DEVICE;
    }
    if (D >= (long)nd) {
        pt__fail(ctx, PT_ERR_DEVICE, "pt_init: device '%s': OpenCL platform %ld has no device %ld (%u device%s); devices:\n%s", spec, P, D, nd,
                 nd == 1 ? "" : "s", list);
        return PT_ERR_DEVICE;
    }
    if (D < 0) D = ctx->desc.dist ? (long)(pt_dist_local_rank(ctx->desc.dist) % (int)nd) : 0; /* ranks of a node share the devices */
    cl = (pt__cl *)pt__malloc(ctx, sizeof *cl);
    if (!cl) {
        pt__fail(ctx, PT_ERR_OOM, "pt_init: out of memory");
        return PT_ERR_OOM;
    }
    memset(cl, 0, sizeof *cl);
    ctx->cl = cl;
    cl->platform = ps[P];
    cl->device = ds[D];
    pt__msg(cl->info.backend, sizeof cl->info.backend, "opencl");
    pt__cl_str(cl->platform, NULL, CL_PLATFORM_NAME, cl->info.platform, sizeof cl->info.platform);
    pt__cl_str(NULL, cl->device, CL_DEVICE_NAME, cl->info.device, sizeof cl->info.device);
    pt__cl_str(NULL, cl->device, CL_DRIVER_VERSION, cl->info.driver, sizeof cl->info.driver);
    cl->info.platform_index = (int32_t)P;
    cl->info.device_index = (int32_t)D;
    clGetDeviceInfo(cl->device, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof cl->max_alloc, &cl->max_alloc, NULL);
    clGetDeviceInfo(cl->device, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof cl->wg, &cl->wg, NULL);
    clGetDeviceInfo(cl->device, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cl->cus, &cl->cus, NULL);
    clGetDeviceInfo(cl->device, CL_DEVICE_DOUBLE_FP_CONFIG, sizeof dfc, &dfc, NULL);
    cl->fp64 = dfc != 0;
    {
        cl_device_type ty = 0;
        const char *r = getenv("PTRAIN_CL_REDUCE");
        clGetDeviceInfo(cl->device, CL_DEVICE_TYPE, sizeof ty, &ty, NULL);
        cl->lanes = r && !strcmp(r, "groups") ? 0 : r && !strcmp(r, "lanes") ? 1 : (ty & CL_DEVICE_TYPE_CPU) != 0;
    }
    if (cl->wg > PT__CL_WG || cl->wg == 0) cl->wg = PT__CL_WG;
    if (cl->wg < PT__CL_RWG) {
        pt__fail(ctx, PT_ERR_DEVICE, "pt_init: OpenCL device '%s' allows work groups of %zu items, fewer than the %d needed", cl->info.device,
                 cl->wg, PT__CL_RWG);
        return PT_ERR_DEVICE;
    }
    cl->context = clCreateContext(NULL, 1, &cl->device, NULL, NULL, &err);
    if (cl->context && err == CL_SUCCESS) cl->queue = clCreateCommandQueue(cl->context, cl->device, 0, &err);
    if (!cl->context || !cl->queue || err != CL_SUCCESS) {
        pt__fail(ctx, PT_ERR_DEVICE, "pt_init: cannot open OpenCL device '%s' (%s): %s (%d)", cl->info.device, spec, pt__cl_err(err), (int)err);
        return PT_ERR_DEVICE;
    }
    cl->part = clCreateBuffer(cl->context, CL_MEM_READ_WRITE, 64, NULL, &err);
    if (!cl->part || err != CL_SUCCESS) {
        pt__fail(ctx, PT_ERR_DEVICE, "pt_init: allocating 64 bytes on OpenCL device '%s' failed: %s (%d)", cl->info.device, pt__cl_err(err), (int)err);
        return PT_ERR_DEVICE;
    }
    cl->part_bytes = 64;
    if (pt__cl_build(ctx, cl) != PT_OK) return PT_ERR_DEVICE;
    ctx->be = &pt__cl_backend;
    return PT_OK;
}
#endif /* PTRAIN_OPENCL */

PTDEF int pt_device_list(char *buf, size_t len) {
    size_t k = 0;
    int n = 0;
    if (buf && len) buf[0] = 0;
#ifdef PTRAIN_OPENCL
    if (buf && len) pt__msg(buf, len, "  cpu\n");
    k = buf ? strlen(buf) : 0;
    n = pt__cl_list(buf ? buf + k : NULL, buf && len > k ? len - k : 0);
#else
    (void)k;
    if (buf && len) pt__msg(buf, len, "  cpu\n  (OpenCL not compiled in: build with -DPTRAIN_OPENCL -lOpenCL -lclblast)\n");
#endif
    return n;
}

PTDEF pt_device_info pt_device_info_get(const pt_ctx *ctx) {
    pt_device_info d;
#ifdef PTRAIN_OPENCL
    if (ctx && ctx->cl) return ((const pt__cl *)ctx->cl)->info;
#endif
    memset(&d, 0, sizeof d);
    (void)ctx;
    pt__msg(d.backend, sizeof d.backend, "cpu");
    d.platform_index = d.device_index = -1;
    return d;
}

/* ---- CLBlast tuning (see opencl) ----------------------------------------------------------------
   CLBlast takes its kernel parameters (tile sizes, vector widths, ...) from a database keyed by
   device; a device it does not know (PoCL among them) gets generic defaults and runs slowly.
   pt_cl_tune_set hands CLBlast a kernel's full parameter set (CLBlastOverrideParameters: the next
   call of a routine using the kernel recompiles it); pt_cl_tune_load reads `Kernel.PARAM = value`
   lines and applies them per kernel; pt_init applies env PTRAIN_CL_TUNE. `ptcl tune` (tools/ptcl.c)
   searches Xgemm / XgemmDirect parameters and writes such a file. */
static const char *const pt__clt_xgemm[] = {"GEMMK", "KREG", "KWG", "KWI", "MDIMA", "MDIMC", "MWG", "NDIMB", "NDIMC",
                                            "NWG", "SA", "SB", "STRM", "STRN", "VWM", "VWN", NULL};
static const char *const pt__clt_direct[] = {"KWID", "MDIMAD", "MDIMCD", "NDIMBD", "NDIMCD", "PADA", "PADB", "VWMD", "VWND", "WGD", NULL};
static const char *const pt__clt_copy[] = {"COPY_DIMX", "COPY_DIMY", "COPY_VW", "COPY_WPT", NULL};
static const char *const pt__clt_pad[] = {"PAD_DIMX", "PAD_DIMY", "PAD_WPTX", "PAD_WPTY", NULL};
static const char *const pt__clt_tra[] = {"TRA_DIM", "TRA_PAD", "TRA_SHUFFLE", "TRA_WPT", NULL};
static const char *const pt__clt_padtra[] = {"PADTRA_PAD", "PADTRA_TILE", "PADTRA_WPT", NULL};
static const char *const pt__clt_routine[] = {"XGEMM_MIN_INDIRECT_SIZE", NULL};

PTDEF const char *const *pt_cl_tune_params(const char *kernel) {
    static const char *const kernels[] = {"Xgemm", "XgemmDirect", "Copy", "Pad", "Transpose", "Padtranspose", "GemmRoutine"};
    static const char *const *const params[] = {pt__clt_xgemm, pt__clt_direct, pt__clt_copy, pt__clt_pad, pt__clt_tra, pt__clt_padtra, pt__clt_routine};
    int i;
    for (i = 0; kernel && i < (int)(sizeof kernels / sizeof *kernels); i++)
        if (!strcmp(kernel, kernels[i])) return params[i];
    return NULL;
}

/* the names of a known kernel's parameters absent from names[0, n), space-separated, into buf */
static void pt__clt_missing(const char *kernel, int n, const char *const *names, char *buf, size_t len) {
    const char *const *want = pt_cl_tune_params(kernel);
    size_t k = 0;
    int i, j;
    buf[0] = 0;
    for (i = 0; want && want[i]; i++) {
        for (j = 0; j < n && strcmp(names[j], want[i]); j++) {}
        if (j == n && k < len) k += (size_t)snprintf(buf + k, len - k, "%s%s", k ? " " : "", want[i]);
    }
}

PTDEF pt_status pt_cl_tune_set(pt_ctx *ctx, const char *kernel, int n, const char *const *names, const size_t *values) {
#ifdef PTRAIN_OPENCL
    CLBlastStatusCode s;
    char miss[256];
    if (!ctx) return PT_ERR_ARG;
    if (!ctx->cl) {
        pt__fail(ctx, PT_ERR_DEVICE, "pt_cl_tune_set: the context is on '%s', expected an OpenCL device (device \"opencl[:P[:D]]\")", pt_backend_name(ctx));
        return PT_ERR_DEVICE;
    }
    if (!kernel || !*kernel || n <= 0 || !names || !values) {
        pt__fail(ctx, PT_ERR_ARG, "pt_cl_tune_set: expected a kernel name and n > 0 parameters, found kernel %s and n = %d", kernel ? kernel : "NULL", n);
        return PT_ERR_ARG;
    }
    s = CLBlastOverrideParameters(((pt__cl *)ctx->cl)->device, kernel, CLBlastPrecisionSingle, (size_t)n, (const char **)names, values);
    if (s != CLBlastSuccess) {
        pt__clt_missing(kernel, n, names, miss, sizeof miss);
        pt__fail(ctx, PT_ERR_ARG, "pt_cl_tune_set: CLBlast refused the %d parameters of kernel %s (status %d%s)%s%s", n, kernel, (int)s,
                 s == CLBlastMissingOverrideParameter ? ": every parameter of the kernel is needed, each once" : "",
                 miss[0] ? "; missing: " : "", miss);
        return PT_ERR_ARG;
    }
    return PT_OK;
#else
    (void)kernel, (void)n, (void)names, (void)values;
    if (ctx) pt__fail(ctx, PT_ERR_DEVICE, "pt_cl_tune_set: OpenCL is not compiled in (compile with -DPTRAIN_OPENCL, link -lOpenCL -lclblast)");
    return PT_ERR_DEVICE;
#endif
}

#define PT__CLT_MAXP 32 /* parameters of one kernel in a tuning file */
/* applies the parameters of kernel `kern` gathered from the lines starting at `first` */
static pt_status pt__clt_apply(pt_ctx *ctx, const char *path, int first, const char *kern, int n, const char *const *names, const size_t *vals) {
    const char *const *want = pt_cl_tune_params(kern);
    char miss[256];
    int i, j;
    if (want) {
        for (i = 0; i < n; i++) {
            for (j = 0; want[j] && strcmp(want[j], names[i]); j++) {}
            if (!want[j]) {
                pt__fail(ctx, PT_ERR_FORMAT, "pt_cl_tune_load: %s:%d: kernel %s has no parameter %s", path, first, kern, names[i]);
                return PT_ERR_FORMAT;
            }
        }
        pt__clt_missing(kern, n, names, miss, sizeof miss);
        if (miss[0]) {
            pt__fail(ctx, PT_ERR_FORMAT, "pt_cl_tune_load: %s:%d: kernel %s is missing parameters: %s (a kernel needs all of them)", path, first, kern, miss);
            return PT_ERR_FORMAT;
        }
    }
    if (pt_cl_tune_set(ctx, kern, n, names, vals) != PT_OK) {
        char why[300];
        pt__msg(why, sizeof why, "%s", pt_error(ctx));
        pt_error_clear(ctx);
        pt__fail(ctx, PT_ERR_FORMAT, "pt_cl_tune_load: %s:%d: %s", path, first, why);
        return PT_ERR_FORMAT;
    }
    return PT_OK;
}

PTDEF pt_status pt_cl_tune_load(pt_ctx *ctx, const char *path) {
    char line[256], kern[64], cur[64], names[PT__CLT_MAXP][48];
    const char *np[PT__CLT_MAXP];
    size_t vals[PT__CLT_MAXP];
    int n = 0, lineno = 0, i, first = 0, eof = 0;
    pt_status st = PT_OK;
    FILE *f;
    if (!ctx) return PT_ERR_ARG;
    if (!ctx->cl) {
#ifdef PTRAIN_OPENCL
        pt__fail(ctx, PT_ERR_DEVICE, "pt_cl_tune_load: the context is on '%s', expected an OpenCL device (device \"opencl[:P[:D]]\")", pt_backend_name(ctx));
#else
        pt__fail(ctx, PT_ERR_DEVICE, "pt_cl_tune_load: OpenCL is not compiled in (compile with -DPTRAIN_OPENCL, link -lOpenCL -lclblast)");
#endif
        return PT_ERR_DEVICE;
    }
    if (!path || !(f = fopen(path, "r"))) {
        pt__fail(ctx, PT_ERR_IO, "pt_cl_tune_load: cannot open the tuning file '%s' (write one with `ptcl tune -o FILE`)", path ? path : "(null)");
        return PT_ERR_IO;
    }
    for (i = 0; i < PT__CLT_MAXP; i++) np[i] = names[i];
    cur[0] = kern[0] = 0;
    while (!eof && st == PT_OK) {
        char *s = fgets(line, sizeof line, f), *dot = NULL, *eq = NULL, *end = NULL, *e;
        unsigned long long v = 0;
        size_t kl = 0, pl = 0;
        if (!s) eof = 1;
        else {
            lineno++;
            if (!strchr(s, '\n') && !feof(f)) {
                pt__fail(ctx, PT_ERR_FORMAT, "pt_cl_tune_load: %s:%d: line longer than %d characters", path, lineno, (int)sizeof line - 2);
                st = PT_ERR_FORMAT;
                break;
            }
            if ((e = strchr(s, '#')) != NULL) *e = 0;
            while (*s == ' ' || *s == '\t') s++;
            for (e = s + strlen(s); e > s && (e[-1] == '\n' || e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t'); e--) {}
            *e = 0;
            if (!*s) continue;
            dot = strchr(s, '.'), eq = strchr(s, '=');
            if (dot && eq && dot < eq) {
                kl = (size_t)(dot - s);
                for (e = eq; e > dot + 1 && (e[-1] == ' ' || e[-1] == '\t'); e--) {}
                pl = (size_t)(e - dot - 1);
                v = strtoull(eq + 1, &end, 10);
                while (*end == ' ' || *end == '\t') end++;
            }
            if (!dot || !eq || dot > eq || !kl || kl >= sizeof kern || !pl || pl >= sizeof names[0] || end == eq + 1 || *end || strchr(eq + 1, '-')) {
                pt__fail(ctx, PT_ERR_FORMAT, "pt_cl_tune_load: %s:%d: expected `Kernel.PARAM = value` (e.g. Xgemm.MWG = 64, value a non-negative integer), found '%s'",
                         path, lineno, s);
                st = PT_ERR_FORMAT;
                break;
            }
            memcpy(kern, s, kl), kern[kl] = 0;
        }
        if (cur[0] && (eof || strcmp(kern, cur) != 0)) { /* the lines of kernel `cur` are complete */
            st = pt__clt_apply(ctx, path, first, cur, n, np, vals);
            n = 0, cur[0] = 0;
        }
        if (eof || st != PT_OK) break;
        if (!cur[0]) memcpy(cur, kern, strlen(kern) + 1), first = lineno;
        for (i = 0; i < n && (strlen(names[i]) != pl || strncmp(names[i], dot + 1, pl)); i++) {}
        if (i < n || n == PT__CLT_MAXP) {
            pt__fail(ctx, PT_ERR_FORMAT, "pt_cl_tune_load: %s:%d: %s", path, lineno, i < n ? "parameter given twice" : "too many parameters for one kernel");
            st = PT_ERR_FORMAT;
            break;
        }
        memcpy(names[n], dot + 1, pl), names[n][pl] = 0, vals[n++] = (size_t)v;
    }
    fclose(f);
    return st;
}

PTDEF void pt_sync(pt_ctx *ctx) {
#ifdef PTRAIN_OPENCL
    if (ctx && ctx->cl) clFinish(((pt__cl *)ctx->cl)->queue);
#else
    (void)ctx;
#endif
}
PTDEF pt_cl_handles pt_cl_handles_get(const pt_ctx *ctx) {
    pt_cl_handles h;
    memset(&h, 0, sizeof h);
#ifdef PTRAIN_OPENCL
    if (ctx && ctx->cl) {
        const pt__cl *cl = (const pt__cl *)ctx->cl;
        h.platform = (void *)cl->platform, h.device = (void *)cl->device, h.context = (void *)cl->context, h.queue = (void *)cl->queue;
    }
#else
    (void)ctx;
#endif
    return h;
}
PTDEF void *pt_cl_mem(const pt_tensor *t) { return t && t->st && t->st->ctx && t->st->ctx->cl ? t->st->dev : NULL; }

#ifdef PTRAIN_OPENCL
/* pt_init: env PTRAIN_CL_TUNE=FILE applies a tuning file to a new OpenCL context */
static pt_status pt__clt_env(pt_ctx *ctx) {
    const char *p = getenv("PTRAIN_CL_TUNE");
    return p && *p ? pt_cl_tune_load(ctx, p) : PT_OK;
}
#endif

// >>tensor  storages, the graph's arenas, tensors
/* Owns: pt_storage, the per-graph activation arena and gradient pool, tensor creation and host I/O
   Invariants: a tensor is (storage, offset, shape) of contiguous row-major data; only the CPU
   backend dereferences host pointers
   Entry points: pt_tensor_new pt_tensor_from pt_tensor_write pt_tensor_read pt_item pt_f32 */
/* storages, the graph's arenas, tensors
   A graph holds two arenas: a host arena for the small records (tensor structs, tape nodes) and a
   data arena of device storages for activations. Both are bump allocators; pt_graph_reset rewinds
   them and, if a pass needed more than one chunk, replaces the chunks by one chunk of the pass's
   high-water size, so from the second identical pass on nothing is allocated. Gradients of
   activations come from a pool of blocks reused by exact size: a block returns to the pool as soon
   as the op that produced the activation has run its backward, so backward holds only a few
   layers' gradients at a time. */

typedef struct pt__hchunk {
    struct pt__hchunk *next;
    size_t cap, used;
} pt__hchunk;

typedef struct pt__dchunk {
    struct pt__dchunk *next;
    pt_storage st;
    int64_t used;
} pt__dchunk;

typedef struct pt__block {
    pt_storage st;
    int busy;
} pt__block;

/* the node's backward never reads its output: a consumer may overwrite the output's data with its
   gradient (the fused cross-entropy does, so the logits need no second buffer) */
#define PT__NODE_OUT_FREE 1u

struct pt_node {
    void (*backward)(pt_graph *g, pt_node *n);
    const char *op;
    pt_tensor *out;
    pt_tensor **in;      /* nin inputs */
    int nin;
    pt_tensor *saved[3]; /* tensors kept for the backward (e.g. lse, mean/rstd) */
    uint32_t flags;      /* PT__NODE_* */
    int64_t i[8];        /* integer attributes */
    float f[4];          /* float attributes */
};

struct pt_graph {
    pt_ctx *ctx;
    pt_graph *prev, *next;            /* the context's list of graphs (freed by pt_shutdown) */
    pt__hchunk *hhead, *hcur;
    size_t hpass;                     /* host bytes this pass */
    pt__dchunk *dhead, *dcur;
    int64_t dpass;                    /* data bytes this pass */
    pt__block **pool;
    int npool, cap_pool;
    pt_node **tape;
    int ntape, cap_tape;
    int32_t *puse;                    /* uses of each parameter on this tape */
    int cap_puse;
    int training, grad_on;
    int64_t sample_off;
    int64_t bytes;                    /* activation bytes held */
    double prof_t0;                   /* per-op profile (see trace): when the op being built allocated its output */
};

static pt_status pt__st_alloc(pt_ctx *ctx, pt_storage *st, int64_t bytes, int kind) {
    pt_status s = ctx->be->st_alloc(ctx, st, bytes);
    if (s == PT_OK) {
        st->kind = kind;
        st->ctx = ctx;
        pt__mem_add(ctx, kind, bytes);
    }
    return s;
}
static void pt__st_free(pt_ctx *ctx, pt_storage *st) {
    if (!st->raw && !st->dev) return;
    if (st->kind >= 0) pt__mem_add(ctx, st->kind, -st->bytes); /* slabs (kind -1) count what they use */
    ctx->be->st_free(ctx, st);
}

/* host arena: small records, zeroed */
static void *pt__halloc(pt_graph *g, size_t bytes) {
    pt__hchunk *c = g->hcur;
    bytes = (bytes + 15) & ~(size_t)15;
    g->hpass += bytes;
    while (c && c->used + bytes > c->cap) {
        c = c->next;
        if (c) g->hcur = c;
    }
    if (!c) {
        size_t cap = PT__MAX(bytes, (size_t)1 << 16);
        c = (pt__hchunk *)pt__malloc(g->ctx, sizeof(pt__hchunk) + 16 + cap);
        if (!c) return pt__fail(g->ctx, PT_ERR_OOM, "pt_graph: out of host memory (%zu bytes)", cap);
        c->next = NULL;
        c->cap = cap;
        c->used = 0;
        if (g->hcur) g->hcur->next = c;
        else g->hhead = c;
        g->hcur = c;
    }
    {
        char *p = (char *)(c + 1) + ((16 - sizeof(pt__hchunk) % 16) % 16) + c->used;
        c->used += bytes;
        memset(p, 0, bytes);
        return p;
    }
}

/* data arena: returns (storage, element offset) for nbytes, 64-byte aligned */
static pt_storage *pt__dalloc(pt_graph *g, int64_t nbytes, int64_t esize, int64_t *off) {
    pt__dchunk *c = g->dcur;
    nbytes = (nbytes + PT__ALIGN - 1) & ~(int64_t)(PT__ALIGN - 1);
    g->dpass += nbytes;
    while (c && c->used + nbytes > c->st.bytes) {
        c = c->next;
        if (c) g->dcur = c;
    }
    if (!c) {
        /* 64 MiB at least: big enough to be mapped pages of their own, so chunks freed when reset
           consolidates them return to the system instead of staying resident in the heap;
           untouched pages cost nothing */
        int64_t cap = PT__MAX(nbytes, (int64_t)64 << 20);
        c = (pt__dchunk *)pt__malloc(g->ctx, sizeof(pt__dchunk));
        if (!c) return (pt_storage *)pt__fail(g->ctx, PT_ERR_OOM, "pt_graph: out of memory");
        memset(c, 0, sizeof *c);
        if (pt__st_alloc(g->ctx, &c->st, cap, PT__MEM_ACT) != PT_OK) {
            PT_FREE(c);
            return NULL;
        }
        g->bytes += cap;
        if (g->dcur) g->dcur->next = c;
        else g->dhead = c;
        g->dcur = c;
    }
    *off = c->used / esize;
    c->used += nbytes;
    return &c->st;
}

/* grad pool: a zero-filled block of exactly nbytes */
static pt_storage *pt__pool_get(pt_graph *g, int64_t nbytes) {
    int i;
    pt__block *b = NULL;
    for (i = 0; i < g->npool; i++)
        if (!g->pool[i]->busy && g->pool[i]->st.bytes == nbytes) {
            b = g->pool[i];
            break;
        }
    if (!b) {
        if (g->npool == g->cap_pool) {
            int cap = g->cap_pool ? 2 * g->cap_pool : 32;
            pt__block **np = (pt__block **)PT_REALLOC(g->pool, (size_t)cap * sizeof *np);
            if (!np) return (pt_storage *)pt__fail(g->ctx, PT_ERR_OOM, "pt_graph: out of memory (grad pool)");
            g->ctx->nallocs++;
            g->pool = np;
            g->cap_pool = cap;
        }
        b = (pt__block *)pt__malloc(g->ctx, sizeof *b);
        if (!b) return (pt_storage *)pt__fail(g->ctx, PT_ERR_OOM, "pt_graph: out of memory (grad pool)");
        memset(b, 0, sizeof *b);
        if (pt__st_alloc(g->ctx, &b->st, nbytes, PT__MEM_ACT) != PT_OK) {
            PT_FREE(b);
            return NULL;
        }
        g->bytes += nbytes;
        g->pool[g->npool++] = b;
    }
    b->busy = 1;
    return &b->st;
}
static void pt__pool_put(pt_graph *g, pt_storage *st) {
    int i;
    for (i = 0; i < g->npool; i++)
        if (&g->pool[i]->st == st) g->pool[i]->busy = 0;
}

PTDEF float *pt_f32(const pt_tensor *t) {
    return (t && t->dtype == PT_F32 && t->st && t->st->host) ? PT__F(t) : NULL;
}
PTDEF int32_t *pt_i32(const pt_tensor *t) {
    return (t && t->dtype == PT_I32 && t->st && t->st->host) ? PT__I(t) : NULL;
}
PTDEF const char *pt_shape_str(const pt_tensor *t, char *buf, size_t n) {
    size_t k = 0;
    int i;
    if (!t) {
        snprintf(buf, n, "(null)");
        return buf;
    }
    k += (size_t)snprintf(buf + k, n - k, "[");
    for (i = 0; i < t->ndim && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, i ? ",%lld" : "%lld", (long long)t->shape[i]);
    if (k < n) snprintf(buf + k, n - k, "]");
    return buf;
}

/* the shape of a tensor as a string for messages: up to 4 at once per call site */
typedef struct pt__sbuf { char s[64]; } pt__sbuf;
static pt__sbuf pt__shp(const pt_tensor *t) {
    pt__sbuf b;
    pt_shape_str(t, b.s, sizeof b.s);
    return b;
}
static const char *pt__dtname(pt_dtype dt) {
    static const char *names[] = {"f32", "bf16", "f16", "i32", "i8"};
    return (unsigned)dt < PT_DTYPE_COUNT ? names[dt] : "?";
}

/* a new tensor record (no data) */
static pt_tensor *pt__rec(pt_graph *g, pt_dtype dt, int ndim, const int64_t *shape) {
    pt_tensor *t = (pt_tensor *)pt__halloc(g, sizeof(pt_tensor));
    int i;
    if (!t) return NULL;
    t->dtype = dt;
    t->ndim = ndim;
    for (i = 0; i < PT_MAX_DIMS; i++) t->shape[i] = i < ndim ? shape[i] : 1;
    return t;
}
/* a new tensor with data in the arena */
static pt_tensor *pt__new(pt_graph *g, pt_dtype dt, int ndim, const int64_t *shape) {
    pt_tensor *t = pt__rec(g, dt, ndim, shape);
    if (!t) return NULL;
    if (g->ctx->prof && g->prof_t0 == 0) g->prof_t0 = pt_time(); /* trace: an op's forward starts */
    t->st = pt__dalloc(g, pt_numel(t) * pt_dtype_size(dt), pt_dtype_size(dt), &t->off);
    return t->st ? t : NULL;
}

PTDEF pt_tensor *pt_tensor_from(pt_graph *g, pt_dtype dt, int ndim, const int64_t *shape, const void *data) {
    pt_tensor *t;
    int i;
    if (!g) return NULL;
    if (ndim < 0 || ndim > PT_MAX_DIMS || (ndim > 0 && !shape))
        return (pt_tensor *)pt__fail(g->ctx, PT_ERR_ARG, "pt_tensor_from: ndim is %d, expected 0..%d with a shape", ndim,
                                     PT_MAX_DIMS);
    if ((unsigned)dt >= PT_DTYPE_COUNT) return (pt_tensor *)pt__fail(g->ctx, PT_ERR_ARG, "pt_tensor_from: unknown dtype %d", (int)dt);
    for (i = 0; i < ndim; i++)
        if (shape[i] < 0)
            return (pt_tensor *)pt__fail(g->ctx, PT_ERR_SHAPE, "pt_tensor_from: dim %d has negative size %lld", i,
                                         (long long)shape[i]);
    {
        double keep = g->prof_t0; /* trace: a tensor made outside an op starts no op's time */
        t = pt__new(g, dt, ndim, shape);
        g->prof_t0 = keep;
    }
    if (t && data) g->ctx->be->write(g->ctx, t, data, pt_numel(t) * pt_dtype_size(dt));
    return t;
}
PTDEF pt_tensor *pt_tensor_new(pt_graph *g, pt_dtype dt, int ndim, int64_t d0, int64_t d1, int64_t d2, int64_t d3) {
    int64_t s[4];
    s[0] = d0, s[1] = d1, s[2] = d2, s[3] = d3;
    return pt_tensor_from(g, dt, ndim, s, NULL);
}
PTDEF pt_tensor *pt_full(pt_graph *g, int ndim, const int64_t *shape, float value) {
    pt_tensor *t = pt_tensor_from(g, PT_F32, ndim, shape, NULL);
    if (t) g->ctx->be->fill(g->ctx, t, value);
    return t;
}
PTDEF void pt_requires_grad(pt_tensor *t) {
    if (t && t->dtype == PT_F32) t->flags |= PT_TENSOR_REQUIRES_GRAD;
}
PTDEF pt_status pt_tensor_write(pt_tensor *t, const void *src) {
    if (!t || !src || !t->st || !t->st->ctx) return PT_ERR_ARG;
    t->st->ctx->be->write(t->st->ctx, t, src, pt_numel(t) * pt_dtype_size(t->dtype));
    return PT_OK;
}
PTDEF pt_status pt_tensor_read(const pt_tensor *t, void *dst) {
    if (!t || !dst || !t->st || !t->st->ctx) return PT_ERR_ARG;
    t->st->ctx->be->read(t->st->ctx, t, dst, pt_numel(t) * pt_dtype_size(t->dtype));
    return PT_OK;
}
PTDEF float pt_item(const pt_tensor *t) {
    float v = NAN;
    if (t && t->dtype == PT_F32 && pt_numel(t) == 1) pt_tensor_read(t, &v);
    return v;
}

// >>trace  timelines per rank (Chrome trace-event JSON) and the per-op profile
/* Owns: the event buffer of a context, the observer of the collective records, the gather and the
   file writer; the per-op profile sums
   Invariants: recording is one branch when off; events are kept in pt_time() seconds and written as
   microseconds since the agreed start
   Entry points: pt_trace_start pt_trace_event pt_trace_add pt_trace_finish pt_profile_enable
   pt_profile_print */
/* =================================================================================================
   Chrome trace-event timelines per rank (buffer, hooks' entry points, gather, JSON writer)
   and the per-op profile
   The hooks elsewhere, each one branch when off: dist (pt__coll_begin / pt__coll_end: every MPI
   call), pprun (forward / backward of each micro-batch and chunk, the bubble between them), dp
   (pt_dp_finish's wait), autograd (an op's tape record and each node's backward: the profile),
   tensor (pt__new opens an op's forward time). An event is kept in pt_time() seconds and turned
   into microseconds since the agreed start when the file is written.
   ================================================================================================= */
#define PT__TRACE_NAME 32
#define PT__TRACE_LANES 8 /* tracks for non-blocking calls in flight at once (tid 1..) */
typedef struct pt__trace_ev {
    double t0, t1;
    int64_t step, mb, bytes;
    int32_t chunk, cat, tid, comm;
    char name[PT__TRACE_NAME];
} pt__trace_ev;
struct pt__trace {
    pt_dist *d; /* the world of pt_trace_start (NULL: one rank) */
    char *path;
    pt__trace_ev *ev;
    int64_t n, cap, max, dropped;
    int64_t step, mb; /* pt_trace_step; the micro-batch the pipeline runs now (-1: none) */
    int32_t chunk;
    double base;                  /* pt_time() right after the start barrier */
    double coll_t0[PT_COLL_RING]; /* at pt__coll_begin, by record slot: pt_time(), micro-batch, chunk */
    int64_t coll_mb[PT_COLL_RING];
    int32_t coll_chunk[PT_COLL_RING];
};
static const char *const pt__trace_cats[PT_TRACE_CAT_COUNT] = {"forward", "backward", "comm", "sendrecv", "bubble",
                                                               "data",    "ckpt",     "optim", "step"};
static const char *const pt__trace_comms[PT_COMM_DP_CROSS + 1] = {"world", "tp", "pp", "dp", "node", "cross", "dp_node", "dp_cross"};

static void pt__trace_put(struct pt__trace *tr, int cat, const char *name, double t0, double t1, int64_t step, int64_t mb,
                          int32_t chunk, int32_t comm, int64_t bytes, int32_t tid) {
    pt__trace_ev *e;
    int i;
    if (tr->n == tr->cap) {
        int64_t cap = PT__MIN(tr->max, tr->cap ? 2 * tr->cap : 4096);
        pt__trace_ev *ne = cap > tr->cap ? (pt__trace_ev *)PT_REALLOC(tr->ev, sizeof *ne * (size_t)cap) : NULL;
        if (!ne) {
            tr->dropped++;
            return;
        }
        tr->ev = ne, tr->cap = cap;
    }
    e = &tr->ev[tr->n++];
    e->t0 = t0, e->t1 = t1 < t0 ? t0 : t1;
    e->step = step < 0 ? tr->step : step, e->mb = mb < 0 ? -1 : mb, e->bytes = bytes;
    e->chunk = chunk < 0 ? -1 : chunk, e->cat = cat, e->tid = tid < 0 ? 0 : tid;
    e->comm = comm >= 0 && comm <= PT_COMM_DP_CROSS ? comm : -1;
    for (i = 0; name && name[i] && i < PT__TRACE_NAME - 1; i++) /* no quoting needed in the file */
        e->name[i] = name[i] == '"' || name[i] == '\\' || (unsigned char)name[i] < 0x20 ? '_' : name[i];
    e->name[i] = 0;
}

PTDEF int pt_trace_on(const pt_ctx *ctx) { return ctx && ctx->trace; }
PTDEF void pt_trace_step(pt_ctx *ctx, int64_t step) {
    if (ctx && ctx->trace) ctx->trace->step = step;
}
PTDEF void pt_trace_event(pt_ctx *ctx, int cat, const char *name, double t0, double t1, int64_t step, int64_t mb) {
    if (!ctx || !ctx->trace || cat < 0 || cat >= PT_TRACE_CAT_COUNT) return;
    pt__trace_put(ctx->trace, cat, name ? name : pt__trace_cats[cat], t0, t1, step, mb, -1, -1, 0, 0);
}
PTDEF void pt_trace_add(pt_ctx *ctx, const pt_trace_rec *r) {
    if (!ctx || !ctx->trace || !r || r->cat < 0 || r->cat >= PT_TRACE_CAT_COUNT) return;
    pt__trace_put(ctx->trace, r->cat, r->name ? r->name : pt__trace_cats[r->cat], r->t0, r->t1, r->step, r->mb, r->chunk, r->comm,
                  r->bytes, r->tid);
}
PTDEF int64_t pt_trace_count(const pt_ctx *ctx, int64_t *dropped) {
    const struct pt__trace *tr = ctx ? ctx->trace : NULL;
    if (dropped) *dropped = tr ? tr->dropped : 0;
    return tr ? tr->n : 0;
}

/* pprun: the micro-batch and chunk the next communication events belong to (-1: none) */
static void pt__trace_at(pt_ctx *ctx, int64_t mb, int chunk) {
    ctx->trace->mb = mb, ctx->trace->chunk = chunk;
}
/* pprun: a computation [t0, t1] of a pipeline step, after the bubble since *idle (the end of the
   previous one, or the step's start); *idle becomes t1 */
static void pt__trace_compute(pt_ctx *ctx, int cat, double *idle, double t0, double t1, int64_t mb, int chunk) {
    struct pt__trace *tr = ctx->trace;
    if (t0 > *idle) pt__trace_put(tr, PT_TRACE_BUBBLE, "bubble", *idle, t0, -1, -1, -1, -1, 0, 0);
    if (cat >= 0) pt__trace_put(tr, cat, pt__trace_cats[cat], t0, t1, -1, mb, chunk, -1, 0, 0);
    *idle = t1;
}
#ifdef PTRAIN_MPI
/* dp: a span ending now */
static void pt__trace_span(pt_ctx *ctx, int cat, const char *name, double t0, int comm) {
    pt__trace_put(ctx->trace, cat, name, t0, pt_time(), -1, -1, -1, comm, 0, 0);
}
/* dist: record s starts; record r (a copy) ended */
static void pt__trace_coll_begin(struct pt__trace *tr, uint64_t s) {
    size_t k = (size_t)((s - 1) % PT_COLL_RING);
    tr->coll_t0[k] = pt_time(), tr->coll_mb[k] = tr->mb, tr->coll_chunk[k] = tr->chunk;
}
static void pt__trace_coll_end(struct pt__trace *tr, const pt_coll_record *r);
static void pt__trace_coll_hook(void *user, const pt_coll_record *r, int begin) {
    if (begin) pt__trace_coll_begin((struct pt__trace *)user, r->seq);
    else pt__trace_coll_end((struct pt__trace *)user, r);
}
static void pt__trace_coll_end(struct pt__trace *tr, const pt_coll_record *r) {
    static const int size[PT_COLL_DTYPE_COUNT] = {1, 1, 4, 8, 4, 8, 2};
    int op = r->op, p2p = op == PT_COLL_SEND || op == PT_COLL_RECV || op == PT_COLL_ISEND || op == PT_COLL_IRECV;
    int async = op == PT_COLL_IALLREDUCE || op == PT_COLL_IREDUCE_SCATTER || op == PT_COLL_ISEND || op == PT_COLL_IRECV ||
                op == PT_COLL_IALLGATHERV;
    int64_t bytes = r->count * (r->dtype >= 0 && r->dtype < PT_COLL_DTYPE_COUNT ? size[r->dtype] : 1);
    size_t k = (size_t)((r->seq - 1) % PT_COLL_RING);
    pt__trace_put(tr, p2p ? PT_TRACE_SENDRECV : PT_TRACE_COMM, pt__coll_op_name(op), tr->coll_t0[k], pt_time(), -1, tr->coll_mb[k],
                  tr->coll_chunk[k], r->comm, bytes, async ? 1 : 0);
}
#else
static void pt__trace_coll_hook(void *user, const pt_coll_record *r, int begin) { (void)user, (void)r, (void)begin; }
#endif

static void pt__trace_free(pt_ctx *ctx); /* below */
PTDEF pt_status pt_trace_start(pt_ctx *ctx, const pt_dist *d, const char *path, int64_t max_events) {
    struct pt__trace *tr = NULL;
    char msg[512] = "";
    int ok = 1, rank = d ? pt_dist_rank(d) : 0;
    pt_status why = PT_ERR_ARG;
    if (!ctx) return PT_ERR_ARG;
    if (ctx->trace) pt__msg(msg, sizeof msg, "pt_trace_start: already recording a timeline (call pt_trace_finish first)"), ok = 0, why = PT_ERR_STATE;
    else if (max_events < 0) pt__msg(msg, sizeof msg, "pt_trace_start: max_events is %lld, expected >= 0 (0 = 1000000)", (long long)max_events), ok = 0;
    else if (rank == 0 && (!path || !*path)) pt__msg(msg, sizeof msg, "pt_trace_start: no file name (path) on rank 0"), ok = 0;
    if (ok) {
        tr = (struct pt__trace *)PT_MALLOC(sizeof *tr);
        if (tr) memset(tr, 0, sizeof *tr);
        if (tr && path && !(tr->path = (char *)PT_MALLOC(strlen(path) + 1))) PT_FREE(tr), tr = NULL;
        if (!tr) pt__msg(msg, sizeof msg, "pt_trace_start: out of memory"), ok = 0, why = PT_ERR_OOM;
        else if (path) memcpy(tr->path, path, strlen(path) + 1);
    }
#ifdef PTRAIN_MPI
    if (d && d->size > 1) {
        ok = pt_dist_agree_msg(d, ok, msg, sizeof msg);
        if (!ok) /* the status follows the agreed message, so every rank returns the same */
            why = strstr(msg, "out of memory") ? PT_ERR_OOM : strstr(msg, "already recording") ? PT_ERR_STATE : PT_ERR_ARG;
        if (ok) { /* one time base: every rank reads its clock right after leaving the same barrier */
            uint64_t s = pt__coll_begin(d, PT_COLL_BARRIER, PT_COMM_WORLD, 0, PT_COLL_BYTE, -1);
            pt__coll_end(d, s, s ? MPI_Barrier(d->comm[PT_COMM_WORLD]) : PT__COLL_REFUSED);
        }
    }
#endif
    if (!ok) {
        if (tr) PT_FREE(tr->path);
        PT_FREE(tr);
        return (pt_status)(pt__fail(ctx, why, "%s", msg), why);
    }
    tr->base = pt_time();
    tr->max = max_events ? max_events : 1000000;
    tr->step = 0, tr->mb = -1, tr->chunk = -1;
    tr->d = (pt_dist *)d;
    if (tr->d) tr->d->coll_hook = pt__trace_coll_hook, tr->d->coll_hook_user = tr;
    ctx->trace = tr;
    pt__at_shutdown(ctx, pt__trace_free);
    return PT_OK;
}

static void pt__trace_free(pt_ctx *ctx) {
    struct pt__trace *tr = ctx->trace;
    if (!tr) return;
    if (tr->d) tr->d->coll_hook = NULL, tr->d->coll_hook_user = NULL;
    ctx->trace = NULL;
    PT_FREE(tr->ev);
    PT_FREE(tr->path);
    PT_FREE(tr);
}

static int pt__trace_by_start(const void *a, const void *b) {
    double x = (*(pt__trace_ev *const *)a)->t0, y = (*(pt__trace_ev *const *)b)->t0;
    return x < y ? -1 : x > y;
}
/* the non-blocking calls (tid 1 for now) onto tracks 1..PT__TRACE_LANES, each free when it starts
   (the least busy one if none is); returns the tracks used */
static int pt__trace_lanes(struct pt__trace *tr) {
    pt__trace_ev **a;
    double end[PT__TRACE_LANES];
    int64_t i, n = 0;
    int k, used = 0;
    for (i = 0; i < tr->n; i++) n += tr->ev[i].tid == 1;
    if (!n || !(a = (pt__trace_ev **)PT_MALLOC(sizeof *a * (size_t)n))) return n ? 1 : 0;
    for (i = 0, n = 0; i < tr->n; i++)
        if (tr->ev[i].tid == 1) a[n++] = &tr->ev[i];
    qsort(a, (size_t)n, sizeof *a, pt__trace_by_start);
    for (k = 0; k < PT__TRACE_LANES; k++) end[k] = -HUGE_VAL;
    for (i = 0; i < n; i++) {
        int best = 0;
        for (k = 0; k < PT__TRACE_LANES; k++)
            if (end[k] <= a[i]->t0 || end[k] < end[best]) {
                best = k;
                if (end[k] <= a[i]->t0) break;
            }
        end[best] = a[i]->t1;
        a[i]->tid = 1 + best;
        used = PT__MAX(used, best + 1);
    }
    PT_FREE(a);
    return used;
}

/* this rank's metadata and events, each as ",\n{...}" */
static void pt__trace_text_of(struct pt__trace *tr, pt__sb *b) {
    int rank = tr->d ? tr->d->rank : 0, lanes = pt__trace_lanes(tr), k;
    pt_coords c;
    int64_t i;
    c.dp = c.tp = c.pp = 0;
    if (tr->d) c = tr->d->coords;
    pt__sb_add(b, ",\n{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":\"rank %d (dp %d tp %d pp %d)\"}}", rank, rank,
               c.dp, c.tp, c.pp);
    pt__sb_add(b, ",\n{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%d,\"tid\":0,\"args\":{\"sort_index\":%d}}", rank, rank);
    if (tr->dropped)
        pt__sb_add(b, ",\n{\"ph\":\"M\",\"name\":\"process_labels\",\"pid\":%d,\"tid\":0,\"args\":{\"labels\":\"%lld events dropped\"}}", rank,
                   (long long)tr->dropped);
    for (k = 0; k <= lanes; k++) {
        pt__sb_add(b, ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"%s%.0d\"}}", rank, k,
                   k ? "non-blocking comm " : "main", k);
        pt__sb_add(b, ",\n{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":%d,\"tid\":%d,\"args\":{\"sort_index\":%d}}", rank, k, k);
    }
    for (i = 0; i < tr->n; i++) {
        const pt__trace_ev *e = &tr->ev[i];
        pt__sb_add(b, ",\n{\"name\":");
        pt__sb_json_str(b, e->name);
        pt__sb_add(b, ",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%d,\"tid\":%d,\"args\":{\"step\":%lld", pt__trace_cats[e->cat],
                   (e->t0 - tr->base) * 1e6, (e->t1 - e->t0) * 1e6, rank, (int)e->tid, (long long)e->step);
        if (e->mb >= 0) pt__sb_add(b, ",\"mb\":%lld", (long long)e->mb);
        if (e->chunk >= 0) pt__sb_add(b, ",\"chunk\":%d", (int)e->chunk);
        if (e->comm >= 0) pt__sb_add(b, ",\"comm\":\"%s\"", pt__trace_comms[e->comm]);
        if (e->bytes > 0 || e->comm >= 0) pt__sb_add(b, ",\"bytes\":%lld", (long long)e->bytes);
        pt__sb_add(b, "}}");
    }
}

PTDEF pt_status pt_trace_finish(pt_ctx *ctx) {
    struct pt__trace *tr;
    pt_dist *d;
    pt__sb b;
    char msg[512] = "", *tmp = NULL;
    FILE *f = NULL;
    int ok = 1, rank = 0, size = 1, r;
    int64_t total_dropped, *dropped = NULL;
    if (!ctx) return PT_ERR_ARG;
    if (!(tr = ctx->trace)) return (pt_status)(pt__fail(ctx, PT_ERR_STATE, "pt_trace_finish: not recording (pt_trace_start first)"), PT_ERR_STATE);
    d = tr->d;
    ctx->trace = NULL; /* nothing more is recorded, the gather included */
    if (d) d->coll_hook = NULL, d->coll_hook_user = NULL, rank = d->rank, size = d->size;
    memset(&b, 0, sizeof b);
    pt__trace_text_of(tr, &b);
    total_dropped = tr->dropped;
    if (b.oom) pt__msg(msg, sizeof msg, "pt_trace_finish: out of memory formatting %lld events on rank %d", (long long)tr->n, rank), ok = 0;
    if (ok && rank == 0) {
        size_t L = strlen(tr->path);
        dropped = (int64_t *)PT_MALLOC(sizeof(int64_t) * (size_t)size);
        tmp = (char *)PT_MALLOC(L + 5);
        if (!dropped || !tmp) pt__msg(msg, sizeof msg, "pt_trace_finish: out of memory"), ok = 0;
        else {
            memcpy(tmp, tr->path, L), memcpy(tmp + L, ".tmp", 5);
            dropped[0] = tr->dropped;
            if (!(f = fopen(tmp, "wb"))) pt__msg(msg, sizeof msg, "pt_trace_finish: cannot open %s for writing", tmp), ok = 0;
            else ok = fputs("{\"traceEvents\":[", f) >= 0 && fwrite(b.s + 2, 1, b.n - 2, f) == b.n - 2; /* the first entry without ",\n" */
            if (f && !ok) pt__msg(msg, sizeof msg, "pt_trace_finish: writing %s failed", tmp);
        }
    }
#ifdef PTRAIN_MPI
    if (d && size > 1) {
        const size_t chunk = (size_t)64 << 20;
        MPI_Comm w = d->comm[PT_COMM_WORLD];
        char *buf = NULL;
        int go;
        if (rank == 0 && ok && !(buf = (char *)PT_MALLOC(chunk))) pt__msg(msg, sizeof msg, "pt_trace_finish: out of memory"), ok = 0;
        go = ok = pt_dist_agree_msg(d, ok, msg, sizeof msg);
        for (r = 1; go && r < size; r++) { /* rank r sends (length, dropped) then its text; rank 0 appends it (all of
                                              it, even after a failed write: no sender is left waiting) */
            int64_t h[2];
            size_t off;
            int bad = 0, rc;
            uint64_t s;
            if (rank != r && rank != 0) continue;
            h[0] = (int64_t)b.n, h[1] = tr->dropped;
            s = pt__coll_begin(d, rank ? PT_COLL_SEND : PT_COLL_RECV, PT_COMM_WORLD, 2, PT_COLL_I64, rank ? 0 : r);
            rc = pt__coll_end(d, s, !s ? PT__COLL_REFUSED : rank ? MPI_Send(h, 2, MPI_INT64_T, 0, 91, w) : MPI_Recv(h, 2, MPI_INT64_T, r, 91, w, MPI_STATUS_IGNORE));
            if (rank == 0) dropped[r] = h[1], total_dropped += h[1];
            for (off = 0; rc == MPI_SUCCESS && off < (size_t)h[0]; off += chunk) {
                int n = (int)PT__MIN(chunk, (size_t)h[0] - off);
                s = pt__coll_begin(d, rank ? PT_COLL_SEND : PT_COLL_RECV, PT_COMM_WORLD, n, PT_COLL_CHAR, rank ? 0 : r);
                rc = pt__coll_end(d, s, !s ? PT__COLL_REFUSED : rank ? MPI_Send(b.s + off, n, MPI_CHAR, 0, 92, w) : MPI_Recv(buf, n, MPI_CHAR, r, 92, w, MPI_STATUS_IGNORE));
                if (rank == 0 && rc == MPI_SUCCESS && ok && !bad && fwrite(buf, 1, (size_t)n, f) != (size_t)n) bad = 1;
            }
            if (!ok) continue;
            if (rc != MPI_SUCCESS) pt__msg(msg, sizeof msg, "pt_trace_finish: gathering rank %d's events failed: %s", r, pt__coll_why(d, rc)), ok = 0;
            else if (bad) pt__msg(msg, sizeof msg, "pt_trace_finish: writing rank %d's events to %s failed", r, tmp), ok = 0;
        }
        PT_FREE(buf);
    }
#endif
    if (f) {
        if (ok) {
            fprintf(f, "\n],\"displayTimeUnit\":\"ms\",\"otherData\":{\"clock\":\"pt_time() minus each rank's reading after a start barrier\","
                       "\"ranks\":%d,\"max_events_per_rank\":%lld,\"dropped_events\":%lld,\"dropped_per_rank\":[", size, (long long)tr->max,
                    (long long)total_dropped);
            for (r = 0; r < size; r++) fprintf(f, "%s%lld", r ? "," : "", (long long)dropped[r]);
            fprintf(f, "]}}\n");
        }
        if ((ferror(f) || fclose(f) != 0) && ok) pt__msg(msg, sizeof msg, "pt_trace_finish: writing %s failed", tmp), ok = 0;
        if (ok && rename(tmp, tr->path) != 0) pt__msg(msg, sizeof msg, "pt_trace_finish: cannot rename %s to %s", tmp, tr->path), ok = 0;
        if (!ok) remove(tmp);
    }
#ifdef PTRAIN_MPI
    if (d && size > 1) ok = pt_dist_agree_msg(d, ok, msg, sizeof msg);
#else
    (void)r, (void)size;
#endif
    PT_FREE(b.s);
    PT_FREE(tmp);
    PT_FREE(dropped);
    ctx->trace = tr;
    pt__trace_free(ctx);
    if (!ok) return (pt_status)(pt__fail(ctx, strstr(msg, "memory") ? PT_ERR_OOM : PT_ERR_IO, "%s", msg), ctx->status);
    return PT_OK;
}

/* ---- the per-op profile ---------------------------------------------------------------------- */
#define PT__PROF_OPS 64
struct pt__prof {
    pt_profile_entry e[PT__PROF_OPS];
    int n;
};
static pt_profile_entry *pt__prof_entry(struct pt__prof *p, const char *op) {
    int i;
    for (i = 0; i < p->n; i++)
        if (p->e[i].op == op || !strcmp(p->e[i].op, op)) return &p->e[i];
    if (p->n == PT__PROF_OPS) return p->e[PT__PROF_OPS - 1].op = "(other ops)", &p->e[PT__PROF_OPS - 1];
    memset(&p->e[p->n], 0, sizeof p->e[0]);
    p->e[p->n].op = op; /* op names are string literals */
    return &p->e[p->n++];
}
static int pt__prof_needs(const pt_tensor *t) { return t && (t->flags & PT_TENSOR_REQUIRES_GRAD) ? 1 : 0; }
static double pt__prof_bytes(const pt_tensor *t) { return t ? (double)pt_numel(t) * (double)pt_dtype_size(t->dtype) : 0.0; }
/* FLOPs of an op's forward (bwd 0) or backward (bwd 1) from its shapes (see api, trace) */
static double pt__prof_flops(const char *op, const pt_tensor *out, int nin, pt_tensor *const *ins, int bwd) {
    double no = (double)pt_numel(out), f, extra = 0.0;
    int j, per = 0;
    if (!strcmp(op, "pt_matmul") && nin >= 2 && ins[0] && ins[1] && no > 0) {
        f = 2.0 * (double)pt_numel(ins[0]) * (double)out->shape[out->ndim - 1]; /* 2 * (batch M K) * N */
        per = 2;
    } else if (!strcmp(op, "pt_linear") && nin >= 2 && ins[1] && ins[1]->ndim == 2) {
        f = 2.0 * no * (double)ins[1]->shape[1];
        per = 2;
        if (nin > 2 && ins[2]) extra = bwd ? pt__prof_needs(ins[2]) * no : no;
    } else if (!strcmp(op, "pt_conv2d") && nin >= 2 && ins[1] && ins[1]->shape[0] > 0) {
        f = 2.0 * no * (double)pt_numel(ins[1]) / (double)ins[1]->shape[0];
        per = 2;
        if (nin > 2 && ins[2]) extra = bwd ? pt__prof_needs(ins[2]) * no : no;
    } else if (!strcmp(op, "pt_attention") && out->ndim == 3) {
        f = 2.0 * no * (double)out->shape[1];
        return bwd ? 2.5 * f : f;
    } else {
        f = no;
        per = nin;
    }
    if (!bwd) return f + extra;
    for (j = 0, no = 0.0; j < per && j < nin; j++) no += pt__prof_needs(ins[j]) * f;
    return no + extra;
}
/* autograd: op recorded out from ins (its kernels ran since g->prof_t0) */
static void pt__prof_fwd(pt_graph *g, const char *op, const pt_tensor *out, int nin, pt_tensor *const *ins) {
    pt_profile_entry *e = pt__prof_entry(g->ctx->prof, op);
    double t = pt_time();
    int j;
    e->calls++;
    if (g->prof_t0 > 0) e->fwd_s += t - g->prof_t0;
    g->prof_t0 = 0;
    e->fwd_flops += pt__prof_flops(op, out, nin, ins, 0);
    e->fwd_bytes += pt__prof_bytes(out);
    for (j = 0; j < nin; j++) e->fwd_bytes += pt__prof_bytes(ins[j]);
}
/* autograd: node n's backward took s seconds */
static void pt__prof_bwd(pt_ctx *ctx, const pt_node *n, double s) {
    pt_profile_entry *e = pt__prof_entry(ctx->prof, n->op);
    int j;
    e->bwd_calls++;
    e->bwd_s += s;
    e->bwd_flops += pt__prof_flops(n->op, n->out, n->nin, n->in, 1);
    e->bwd_bytes += pt__prof_bytes(n->out);
    for (j = 0; j < n->nin; j++) e->bwd_bytes += pt__prof_bytes(n->in[j]) + 8.0 * pt__prof_needs(n->in[j]) * (n->in[j] ? (double)pt_numel(n->in[j]) : 0.0);
}

PTDEF pt_status pt_profile_enable(pt_ctx *ctx, int on) {
    if (!ctx) return PT_ERR_ARG;
    if (on && !ctx->prof_sums) {
        if (!(ctx->prof_sums = (struct pt__prof *)PT_MALLOC(sizeof(struct pt__prof))))
            return (pt_status)(pt__fail(ctx, PT_ERR_OOM, "pt_profile_enable: out of memory"), PT_ERR_OOM);
        memset(ctx->prof_sums, 0, sizeof(struct pt__prof));
    }
    ctx->prof = on ? ctx->prof_sums : NULL;
    return PT_OK;
}
PTDEF void pt_profile_reset(pt_ctx *ctx) {
    if (ctx && ctx->prof_sums) ctx->prof_sums->n = 0;
}
static int pt__prof_by_time(const void *a, const void *b) {
    double x = ((const pt_profile_entry *)a)->fwd_s + ((const pt_profile_entry *)a)->bwd_s;
    double y = ((const pt_profile_entry *)b)->fwd_s + ((const pt_profile_entry *)b)->bwd_s;
    return x > y ? -1 : x < y;
}
PTDEF int pt_profile_get(const pt_ctx *ctx, pt_profile_entry *out, int max) {
    pt_profile_entry e[PT__PROF_OPS];
    int n = ctx && ctx->prof_sums ? ctx->prof_sums->n : 0;
    if (!n) return 0;
    memcpy(e, ctx->prof_sums->e, sizeof e[0] * (size_t)n);
    qsort(e, (size_t)n, sizeof e[0], pt__prof_by_time);
    if (out && max > 0) memcpy(out, e, sizeof e[0] * (size_t)PT__MIN(max, n));
    return n;
}
PTDEF void pt_profile_print(const pt_ctx *ctx, void *file) {
    FILE *f = file ? (FILE *)file : stdout;
    pt_profile_entry e[PT__PROF_OPS], t;
    int n = pt_profile_get(ctx, e, PT__PROF_OPS), i;
    memset(&t, 0, sizeof t);
    t.op = "total";
    fprintf(f, "%-20s %9s %10s %9s %10s %10s %10s %9s\n", "op", "calls", "fwd ms", "bwd calls", "bwd ms", "GFLOP", "GB", "GFLOP/s");
    for (i = 0; i <= n; i++) {
        const pt_profile_entry *x = i < n ? &e[i] : &t;
        double s = x->fwd_s + x->bwd_s, fl = x->fwd_flops + x->bwd_flops;
        if (i < n) {
            t.calls += x->calls, t.bwd_calls += x->bwd_calls, t.fwd_s += x->fwd_s, t.bwd_s += x->bwd_s;
            t.fwd_flops += x->fwd_flops, t.bwd_flops += x->bwd_flops, t.fwd_bytes += x->fwd_bytes, t.bwd_bytes += x->bwd_bytes;
        }
        fprintf(f, "%-20s %9lld %10.3f %9lld %10.3f %10.4f %10.4f %9.2f\n", x->op, (long long)x->calls, 1e3 * x->fwd_s, (long long)x->bwd_calls,
                1e3 * x->bwd_s, fl * 1e-9, (x->fwd_bytes + x->bwd_bytes) * 1e-9, s > 0 ? fl * 1e-9 / s : 0.0);
    }
}

// >>autograd  graphs, the tape, backward
/* Owns: pt_graph (its tape of pt_node records), pt_backward and pt_backward_from
   Invariants: define-by-run; a node's backward runs once, in reverse order; activation gradients go
   back to the pool once consumed
   Entry points: pt_graph_new pt_graph_reset pt_backward pt_backward_from pt_graph_set_training */
/* graphs, the tape, backward */
PTDEF pt_graph *pt_graph_new(pt_ctx *ctx) {
    pt_graph *g;
    if (!ctx) return NULL;
    g = (pt_graph *)pt__malloc(ctx, sizeof *g);
    if (!g) return (pt_graph *)pt__fail(ctx, PT_ERR_OOM, "pt_graph_new: out of memory");
    memset(g, 0, sizeof *g);
    g->ctx = ctx;
    g->training = 1;
    g->grad_on = 1;
    g->next = ctx->graphs;
    if (ctx->graphs) ctx->graphs->prev = g;
    ctx->graphs = g;
    return g;
}
static void pt__graph_free_chunks(pt_graph *g) {
    while (g->hhead) {
        pt__hchunk *n = g->hhead->next;
        PT_FREE(g->hhead);
        g->hhead = n;
    }
    while (g->dhead) {
        pt__dchunk *n = g->dhead->next;
        g->bytes -= g->dhead->st.bytes;
        pt__st_free(g->ctx, &g->dhead->st);
        PT_FREE(g->dhead);
        g->dhead = n;
    }
    g->hcur = NULL;
    g->dcur = NULL;
}
PTDEF void pt_graph_free(pt_graph *g) {
    int i;
    if (!g) return;
    if (g->prev) g->prev->next = g->next;
    else g->ctx->graphs = g->next;
    if (g->next) g->next->prev = g->prev;
    pt__graph_free_chunks(g);
    for (i = 0; i < g->npool; i++) {
        pt__st_free(g->ctx, &g->pool[i]->st);
        PT_FREE(g->pool[i]);
    }
    PT_FREE(g->pool);
    PT_FREE(g->tape);
    PT_FREE(g->puse);
    PT_FREE(g);
}
PTDEF void pt_graph_reset(pt_graph *g) {
    pt__hchunk *h;
    pt__dchunk *d;
    int i;
    if (!g) return;
    /* consolidate: a pass that spilled into a second chunk gets one chunk of its high-water size */
    if ((g->hhead && g->hhead->next) || (g->dhead && g->dhead->next)) {
        size_t hneed = g->hpass;
        int64_t dneed = g->dpass;
        pt__graph_free_chunks(g);
        if (hneed) {
            g->hpass = 0;
            pt__halloc(g, hneed);
        }
        if (dneed) {
            int64_t off;
            pt__dalloc(g, dneed, 1, &off);
        }
    }
    for (h = g->hhead; h; h = h->next) h->used = 0;
    for (d = g->dhead; d; d = d->next) d->used = 0;
    g->hcur = g->hhead;
    g->dcur = g->dhead;
    g->hpass = 0;
    g->dpass = 0;
    for (i = 0; i < g->npool; i++) g->pool[i]->busy = 0;
    g->ntape = 0;
    g->prof_t0 = 0;
    if (g->puse) memset(g->puse, 0, (size_t)g->cap_puse * sizeof *g->puse);
}
PTDEF void pt_graph_set_training(pt_graph *g, int on) {
    if (g) g->training = on != 0;
}
PTDEF void pt_graph_set_grad(pt_graph *g, int on) {
    if (g) g->grad_on = on != 0;
}
PTDEF void pt_graph_set_sample_offset(pt_graph *g, int64_t offset) {
    if (g) g->sample_off = offset;
}
PTDEF pt_ctx *pt_graph_ctx(const pt_graph *g) { return g ? g->ctx : NULL; }
PTDEF int64_t pt_graph_bytes(const pt_graph *g) { return g ? g->bytes : 0; }

/* Records an op producing out from inputs, if any input needs a gradient (and the tape is on).
   Returns the node (NULL when nothing is recorded; that is not an error). */
static pt_node *pt__record(pt_graph *g, const char *op, pt_tensor *out, void (*bwd)(pt_graph *, pt_node *), int nin,
                           pt_tensor *const *ins) {
    pt_node *n;
    int i, need = 0;
    if (g->ctx->prof && out) pt__prof_fwd(g, op, out, nin, ins); /* trace */
    if (!g->grad_on || !out) return NULL;
    for (i = 0; i < nin; i++)
        if (ins[i] && (ins[i]->flags & PT_TENSOR_REQUIRES_GRAD)) need = 1;
    if (!need) return NULL;
    if (g->ntape == g->cap_tape) {
        int cap = g->cap_tape ? 2 * g->cap_tape : 256;
        pt_node **nt = (pt_node **)PT_REALLOC(g->tape, (size_t)cap * sizeof *nt);
        if (!nt) return (pt_node *)pt__fail(g->ctx, PT_ERR_OOM, "%s: out of memory for the tape", op);
        g->ctx->nallocs++;
        g->tape = nt;
        g->cap_tape = cap;
    }
    if (g->cap_puse < g->ctx->nparams) {
        int cap = g->ctx->cap_params;
        int32_t *np = (int32_t *)PT_REALLOC(g->puse, (size_t)cap * sizeof *np);
        if (!np) return (pt_node *)pt__fail(g->ctx, PT_ERR_OOM, "%s: out of memory for the tape", op);
        g->ctx->nallocs++;
        memset(np + g->cap_puse, 0, (size_t)(cap - g->cap_puse) * sizeof *np);
        g->puse = np;
        g->cap_puse = cap;
    }
    n = (pt_node *)pt__halloc(g, sizeof *n);
    if (!n) return NULL;
    n->in = (pt_tensor **)pt__halloc(g, (size_t)nin * sizeof(pt_tensor *));
    if (!n->in) return NULL;
    n->op = op;
    n->backward = bwd;
    n->out = out;
    n->nin = nin;
    for (i = 0; i < nin; i++) {
        n->in[i] = ins[i];
        if (ins[i] && ins[i]->param && (ins[i]->flags & PT_TENSOR_REQUIRES_GRAD)) g->puse[ins[i]->param->id]++;
        if (ins[i] && !ins[i]->param) ins[i]->uses++;
    }
    out->node = n;
    out->flags |= PT_TENSOR_REQUIRES_GRAD;
    g->tape[g->ntape++] = n;
    return n;
}

/* The gradient of t, created zero-filled on first use: a parameter's is its slab slice, an
   activation's comes from the pool, a leaf's from the arena. NULL if t needs none. */
static pt_tensor *pt__grad(pt_graph *g, pt_tensor *t) {
    pt_tensor *gr;
    if (!t || !(t->flags & PT_TENSOR_REQUIRES_GRAD)) return NULL;
    if (t->grad) return t->grad;
    if (t->param) return t->grad = &t->param->grad;
    gr = pt__rec(g, PT_F32, t->ndim, t->shape);
    if (!gr) return NULL;
    if (t->node) {
        gr->st = pt__pool_get(g, pt_numel(t) * 4);
        gr->off = 0;
    } else {
        gr->st = pt__dalloc(g, pt_numel(t) * 4, 4, &gr->off);
    }
    if (!gr->st) return NULL;
    g->ctx->be->fill(g->ctx, gr, 0.0f);
    return t->grad = gr;
}

static pt_status pt__run_backward(pt_graph *g) {
    pt_ctx *ctx = g->ctx;
    int i, j;
    g->prof_t0 = 0; /* trace */
    for (i = g->ntape - 1; i >= 0; i--) {
        pt_node *n = g->tape[i];
        if (n->out->grad) {
            if (ctx->prof) { /* trace */
                double t = pt_time();
                n->backward(g, n);
                pt__prof_bwd(ctx, n, pt_time() - t);
            } else {
                n->backward(g, n);
            }
            if (n->out->node == n && !n->out->param) {
                pt__pool_put(g, n->out->grad->st);
                n->out->grad = NULL;
            }
        }
        for (j = 0; j < n->nin; j++) {
            pt_param *p = n->in[j] && (n->in[j]->flags & PT_TENSOR_REQUIRES_GRAD) ? n->in[j]->param : NULL;
            if (p && --g->puse[p->id] == 0 && ctx->grad_hook) ctx->grad_hook(ctx->grad_hook_user, p);
        }
        if (ctx->poll) ctx->poll(ctx->poll_user);
        if (ctx->status != PT_OK) return ctx->status;
    }
    g->prof_t0 = 0; /* trace: a backward's allocations start no forward op's time */
    return ctx->status;
}

PTDEF pt_status pt_backward(pt_graph *g, pt_tensor *loss) {
    pt_tensor *gr;
    if (!g) return PT_ERR_ARG;
    if (!loss) return (pt_status)(pt__fail(g->ctx, PT_ERR_ARG, "pt_backward: loss is NULL (did the forward pass fail?)"), PT_ERR_ARG);
    if (pt_numel(loss) != 1) {
        pt__fail(g->ctx, PT_ERR_SHAPE, "pt_backward: loss must have one element, found shape %s", pt__shp(loss).s);
        return PT_ERR_SHAPE;
    }
    if (!(loss->flags & PT_TENSOR_REQUIRES_GRAD)) {
        pt__fail(g->ctx, PT_ERR_STATE, "pt_backward: the loss does not depend on any parameter or tensor needing a gradient");
        return PT_ERR_STATE;
    }
    gr = pt__grad(g, loss);
    if (!gr) return g->ctx->status;
    g->ctx->be->fill(g->ctx, gr, 1.0f);
    return pt__run_backward(g);
}

PTDEF pt_status pt_backward_from(pt_graph *g, pt_tensor *out, const pt_tensor *dout) {
    pt_tensor *gr;
    if (!g) return PT_ERR_ARG;
    if (!out || !dout) {
        pt__fail(g->ctx, PT_ERR_ARG, "pt_backward_from: %s is NULL", out ? "dout" : "out");
        return PT_ERR_ARG;
    }
    if (pt_numel(out) != pt_numel(dout) || dout->dtype != PT_F32) {
        pt__fail(g->ctx, PT_ERR_SHAPE, "pt_backward_from: dout %s (%s) does not match out %s (f32)", pt__shp(dout).s,
                 pt__dtname(dout->dtype), pt__shp(out).s);
        return PT_ERR_SHAPE;
    }
    if (!(out->flags & PT_TENSOR_REQUIRES_GRAD)) {
        pt__fail(g->ctx, PT_ERR_STATE, "pt_backward_from: out does not depend on anything needing a gradient");
        return PT_ERR_STATE;
    }
    gr = pt__grad(g, out);
    if (!gr) return g->ctx->status;
    g->ctx->be->copy(g->ctx, gr, dout, 1);
    return pt__run_backward(g);
}

// >>param  parameters in slabs, deterministic init, the checkpointed-state registry
/* Owns: pt_param and its sharding spec, the value and gradient slabs, the registry of checkpointed
   state
   Invariants: an initial value is a pure function of (seed, name, global element index), never of
   the layout
   Entry points: pt_param_new pt_param_from_spec pt_spec_global_index pt_zero_grad pt_state_register */
/* parameters in slabs, deterministic init, the state registry */

/* global linear index of local element i of a (possibly tensor-parallel) shard. A grouped split
   (split_groups G > 1) cuts each of the G blocks of the split dim in split_parts: local index j of
   that dim is block j / P, offset j % P, with P = its part size; global = block * (size / G) +
   split_index * P + offset (G = 1: the plain split_index * local size + j). */
static int32_t pt__split_groups(const pt_spec *s) { return s->split_groups > 1 ? s->split_groups : 1; }
static uint64_t pt__global_index(const pt_spec *s, const int64_t *lshape, int64_t i) {
    int64_t idx[PT_MAX_DIMS], g = 0;
    int d;
    for (d = s->ndim - 1; d >= 0; d--) {
        idx[d] = i % lshape[d];
        i /= lshape[d];
    }
    if (s->split_dim >= 0) {
        int64_t part = lshape[s->split_dim] / pt__split_groups(s), j = idx[s->split_dim];
        idx[s->split_dim] = j / part * (s->global_shape[s->split_dim] / pt__split_groups(s)) + (int64_t)s->split_index * part + j % part;
    }
    for (d = 0; d < s->ndim; d++) g = g * s->global_shape[d] + idx[d];
    return (uint64_t)g;
}
/* the shard shape of a spec into lshape; PT_ERR_ARG (a bad split) or PT_ERR_SHAPE (a dim that does not
   split evenly) and a message in err (if any) when the spec is invalid */
static pt_status pt__spec_local_shape(const pt_spec *s, int64_t *lshape, char *err, size_t errlen) {
    int d;
    for (d = 0; d < PT_MAX_DIMS; d++) lshape[d] = d < s->ndim ? s->global_shape[d] : 1;
    if (s->split_dim < 0) return PT_OK;
    if (s->split_dim >= s->ndim || s->split_parts < 1 || s->split_index < 0 || s->split_index >= s->split_parts || s->split_groups < 0) {
        if (err)
            snprintf(err, errlen, "pt_param: '%s' split dim %d into %d parts (part %d, %d groups) is invalid", s->name, s->split_dim,
                     s->split_parts, s->split_index, s->split_groups);
        return PT_ERR_ARG;
    }
    if (lshape[s->split_dim] % ((int64_t)s->split_parts * pt__split_groups(s))) {
        if (err)
            snprintf(err, errlen, "pt_param: '%s' dim %d of size %lld does not split evenly into %d groups of %d parts", s->name,
                     s->split_dim, (long long)lshape[s->split_dim], pt__split_groups(s), s->split_parts);
        return PT_ERR_SHAPE;
    }
    lshape[s->split_dim] /= s->split_parts;
    return PT_OK;
}
PTDEF int64_t pt_spec_global_index(const pt_spec *s, int64_t local_flat) {
    int64_t lshape[PT_MAX_DIMS], n = 1;
    int d;
    if (!s || s->ndim < 1 || s->ndim > PT_MAX_DIMS || pt__spec_local_shape(s, lshape, NULL, 0) != PT_OK) return -1;
    for (d = 0; d < s->ndim; d++) n *= lshape[d];
    if (local_flat < 0 || local_flat >= n) return -1;
    return (int64_t)pt__global_index(s, lshape, local_flat);
}

/* the initial values, computed on the host: in place on the CPU, else in scratch and written to
   the device (counted as PT_XFER_PARAM) */
static void pt__param_init(pt_ctx *ctx, pt_param *p) {
    int64_t n = pt_numel(&p->value), i;
    float *x;
    const pt_spec *s = &p->spec;
    uint64_t key = pt_hash64(ctx->desc.seed) ^ pt_hash_str(s->name);
    if (pt__be_counts(ctx)) return; /* no values to hold */
    if (!(x = ctx->pslab->host ? (float *)ctx->pslab->host + p->slab_off : pt__work(ctx, n))) return;
    for (i = 0; i < n; i++) {
        switch (s->init) {
        case PT_INIT_ZEROS: x[i] = 0.0f; break;
        case PT_INIT_ONES: x[i] = 1.0f; break;
        case PT_INIT_CONST: x[i] = s->init_scale; break;
        case PT_INIT_NORMAL: x[i] = s->init_scale * pt__normal(key, pt__global_index(s, p->value.shape, i)); break;
        case PT_INIT_UNIFORM:
            x[i] = s->init_scale * (2.0f * pt__unit(key, pt__global_index(s, p->value.shape, i)) - 1.0f);
            break;
        }
    }
    if (!ctx->pslab->host) {
        int k = pt__xfer_as(ctx, PT_XFER_PARAM);
        ctx->be->write(ctx, &p->value, x, n * 4);
        pt__xfer_as(ctx, k);
    }
}

static pt_tensor pt__slab_view(pt_storage *st, int64_t n) {
    pt_tensor t;
    memset(&t, 0, sizeof t);
    t.st = st;
    t.ndim = 1;
    t.dtype = PT_F32;
    t.shape[0] = n;
    t.shape[1] = t.shape[2] = t.shape[3] = 1;
    return t;
}

/* grows a slab storage to hold n elements, keeping its contents */
static pt_status pt__slab_grow(pt_ctx *ctx, pt_storage **slab, int64_t n) {
    pt_storage *old = *slab, *st;
    st = (pt_storage *)pt__malloc(ctx, sizeof *st);
    if (!st) return PT_ERR_OOM;
    memset(st, 0, sizeof *st);
    if (ctx->be->st_alloc(ctx, st, n * 4) != PT_OK) {
        PT_FREE(st);
        return PT_ERR_OOM;
    }
    st->kind = -1; /* accounted by use in pt_param_from_spec, not by capacity */
    st->ctx = ctx;
    if (old) { /* only the used part is copied; the tail is zeroed per parameter as it is created, so
                  unused capacity is never touched (and costs no resident memory) */
        if (st->host && old->host) memcpy(st->host, old->host, (size_t)ctx->slab_n * 4);
        else if (ctx->slab_n > 0) { /* device buffers: copied on the device */
            pt_tensor d = pt__slab_view(st, ctx->slab_n), o = pt__slab_view(old, ctx->slab_n);
            ctx->be->copy(ctx, &d, &o, 0);
        }
        pt__st_free(ctx, old);
        PT_FREE(old);
    }
    *slab = st;
    return PT_OK;
}

PTDEF pt_tensor *pt_param_from_spec(pt_ctx *ctx, const pt_spec *spec) {
    pt_param *p;
    int64_t lshape[PT_MAX_DIMS], n = 1, need, cap;
    int d, i;
    if (!ctx || !spec) return NULL;
    if (ctx->optim_frozen)
        return (pt_tensor *)pt__fail(ctx, PT_ERR_STATE, "pt_param: '%s' created after the optimizer; create every parameter first", spec->name);
    if (spec->ndim < 1 || spec->ndim > PT_MAX_DIMS || !spec->name[0])
        return (pt_tensor *)pt__fail(ctx, PT_ERR_ARG, "pt_param: '%s' has ndim %d (expected 1..%d) or no name", spec->name, spec->ndim, PT_MAX_DIMS);
    if (pt_param_find(ctx, spec->name)) return (pt_tensor *)pt__fail(ctx, PT_ERR_ARG, "pt_param: a parameter named '%s' exists already", spec->name);
    for (d = 0; d < spec->ndim; d++)
        if (spec->global_shape[d] <= 0)
            return (pt_tensor *)pt__fail(ctx, PT_ERR_SHAPE, "pt_param: '%s' dim %d has size %lld, expected > 0", spec->name, d,
                                         (long long)spec->global_shape[d]);
    {
        char err[256];
        pt_status st = pt__spec_local_shape(spec, lshape, err, sizeof err);
        if (st != PT_OK) return (pt_tensor *)pt__fail(ctx, st, "%s", err);
    }
    for (d = 0; d < spec->ndim; d++) n *= lshape[d];
    if (ctx->nparams == ctx->cap_params) {
        int c = ctx->cap_params ? 2 * ctx->cap_params : 64;
        pt_param **np = (pt_param **)PT_REALLOC(ctx->params, (size_t)c * sizeof *np);
        if (!np) return (pt_tensor *)pt__fail(ctx, PT_ERR_OOM, "pt_param: out of memory");
        ctx->params = np;
        ctx->cap_params = c;
    }
    p = (pt_param *)pt__malloc(ctx, sizeof *p);
    if (!p) return (pt_tensor *)pt__fail(ctx, PT_ERR_OOM, "pt_param: out of memory");
    memset(p, 0, sizeof *p);
    p->spec = *spec;
    p->spec.name[sizeof p->spec.name - 1] = 0;
    p->id = ctx->nparams;
    p->slab_off = ctx->slab_n;
    need = ctx->slab_n + ((n + 15) & ~(int64_t)15); /* 64-byte aligned slices */
    cap = ctx->pslab ? ctx->pslab->bytes / 4 : 0;
    if (need > cap) {
        int64_t ncap = PT__MAX(need, PT__MAX(2 * cap, (int64_t)16 << 20)); /* >= 64 MiB: own pages, see pt__dalloc */
        if (pt__slab_grow(ctx, &ctx->pslab, ncap) != PT_OK ||
            pt__slab_grow(ctx, &ctx->gslab, ncap) != PT_OK) {
            PT_FREE(p);
            return (pt_tensor *)pt__fail(ctx, PT_ERR_OOM, "pt_param: out of memory for the slabs (%lld elements)", (long long)ncap);
        }
    }
    pt__mem_add(ctx, PT__MEM_PARAMS, (need - ctx->slab_n) * 4);
    pt__mem_add(ctx, PT__MEM_GRADS, (need - ctx->slab_n) * 4);
    {
        pt_tensor t = pt__slab_view(ctx->pslab, need - ctx->slab_n);
        t.off = ctx->slab_n;
        ctx->be->fill(ctx, &t, 0.0f);
        t.st = ctx->gslab;
        ctx->be->fill(ctx, &t, 0.0f);
    }
    ctx->slab_n = need;
    ctx->params[ctx->nparams++] = p;
    for (i = 0; i < 2; i++) {
        pt_tensor *t = i ? &p->grad : &p->value;
        t->st = NULL; /* slabs may move; resolved below and after every growth */
        t->off = p->slab_off;
        t->ndim = spec->ndim;
        t->dtype = PT_F32;
        for (d = 0; d < PT_MAX_DIMS; d++) t->shape[d] = d < spec->ndim ? lshape[d] : 1;
    }
    p->value.param = p;
    p->value.grad = &p->grad;
    p->value.flags = (spec->flags & PT_PARAM_FROZEN) ? 0 : PT_TENSOR_REQUIRES_GRAD;
    for (i = 0; i < ctx->nparams; i++) { /* the slab storages may have been replaced */
        ctx->params[i]->value.st = ctx->pslab;
        ctx->params[i]->grad.st = ctx->gslab;
    }
    pt__param_init(ctx, p);
    return &p->value;
}

PTDEF pt_tensor *pt_param_new(pt_ctx *ctx, const char *name, int ndim, const int64_t *shape, pt_init_kind init, float scale,
                              uint32_t flags) {
    pt_spec s;
    int d;
    if (!ctx) return NULL;
    if (!name || !shape || ndim < 1 || ndim > PT_MAX_DIMS)
        return (pt_tensor *)pt__fail(ctx, PT_ERR_ARG, "pt_param_new: '%s': need a name and a shape of 1..%d dims, got ndim %d",
                                     name ? name : "(null)", PT_MAX_DIMS, ndim);
    if (strlen(name) >= sizeof s.name)
        return (pt_tensor *)pt__fail(ctx, PT_ERR_ARG, "pt_param_new: name '%s' is longer than %d characters", name, (int)sizeof s.name - 1);
    memset(&s, 0, sizeof s);
    memcpy(s.name, name, strlen(name) + 1);
    s.ndim = ndim;
    for (d = 0; d < PT_MAX_DIMS; d++) s.global_shape[d] = d < ndim ? shape[d] : 1;
    s.split_dim = -1;
    s.split_parts = 1;
    s.stage = -1;
    s.init = init;
    s.init_scale = scale;
    s.flags = flags;
    return pt_param_from_spec(ctx, &s);
}
PTDEF int pt_param_count(const pt_ctx *ctx) { return ctx ? ctx->nparams : 0; }
PTDEF pt_param *pt_param_at(pt_ctx *ctx, int i) { return ctx && i >= 0 && i < ctx->nparams ? ctx->params[i] : NULL; }
PTDEF pt_param *pt_param_find(pt_ctx *ctx, const char *name) {
    int i;
    for (i = 0; ctx && name && i < ctx->nparams; i++)
        if (!strcmp(ctx->params[i]->spec.name, name)) return ctx->params[i];
    return NULL;
}
PTDEF int64_t pt_param_numel(const pt_ctx *ctx) {
    int64_t n = 0;
    int i;
    for (i = 0; ctx && i < ctx->nparams; i++) n += pt_numel(&ctx->params[i]->value);
    return n;
}
PTDEF pt_tensor pt_param_slab(pt_ctx *ctx) { return pt__slab_view(ctx->pslab, ctx->slab_n); }
PTDEF pt_tensor pt_grad_slab(pt_ctx *ctx) { return pt__slab_view(ctx->gslab, ctx->slab_n); }
PTDEF void pt_zero_grad(pt_ctx *ctx) {
    pt_tensor t;
    if (!ctx || !ctx->gslab) return;
    t = pt_grad_slab(ctx);
    ctx->be->fill(ctx, &t, 0.0f);
}
PTDEF void pt_set_grad_hook(pt_ctx *ctx, void (*fn)(void *user, pt_param *p), void *user) {
    if (!ctx) return;
    ctx->grad_hook = fn;
    ctx->grad_hook_user = user;
}

PTDEF void pt_set_backward_poll(pt_ctx *ctx, void (*fn)(void *user), void *user) {
    if (!ctx) return;
    ctx->poll = fn;
    ctx->poll_user = user;
}

PTDEF pt_status pt_state_register(pt_ctx *ctx, const char *name, void *ptr, int64_t bytes) { return pt_state_register_flags(ctx, name, ptr, bytes, 0); }
PTDEF pt_status pt_state_register_flags(pt_ctx *ctx, const char *name, void *ptr, int64_t bytes, uint32_t flags) {
    pt__state_entry *e;
    int i;
    if (!ctx) return PT_ERR_ARG;
    if (!name || !ptr || bytes <= 0 || (flags & ~PT_STATE_PER_RANK)) {
        pt__fail(ctx, PT_ERR_ARG, "pt_state_register: '%s' needs a name, a pointer, a size > 0 and flags 0 or PT_STATE_PER_RANK (got %lld bytes, flags %u)",
                 name ? name : "(null)", (long long)bytes, (unsigned)flags);
        return PT_ERR_ARG;
    }
    for (i = 0; i < ctx->nstate; i++)
        if (!strcmp(ctx->state[i].name, name)) {
            pt__fail(ctx, PT_ERR_ARG, "pt_state_register: '%s' is registered already", name);
            return PT_ERR_ARG;
        }
    if (ctx->nstate == ctx->cap_state) {
        int c = ctx->cap_state ? 2 * ctx->cap_state : 16;
        pt__state_entry *ns = (pt__state_entry *)PT_REALLOC(ctx->state, (size_t)c * sizeof *ns);
        if (!ns) {
            pt__fail(ctx, PT_ERR_OOM, "pt_state_register: out of memory");
            return PT_ERR_OOM;
        }
        ctx->state = ns;
        ctx->cap_state = c;
    }
    e = &ctx->state[ctx->nstate++];
    snprintf(e->name, sizeof e->name, "%s", name);
    e->ptr = ptr;
    e->bytes = bytes;
    e->flags = flags;
    return PT_OK;
}
PTDEF int pt_state_count(const pt_ctx *ctx) { return ctx ? ctx->nstate : 0; }
PTDEF const char *pt_state_at(const pt_ctx *ctx, int i, void **ptr, int64_t *bytes) {
    if (!ctx || i < 0 || i >= ctx->nstate) return NULL;
    if (ptr) *ptr = ctx->state[i].ptr;
    if (bytes) *bytes = ctx->state[i].bytes;
    return ctx->state[i].name;
}
static void pt__state_unregister(pt_ctx *ctx, void *ptr) {
    int i, j = 0;
    for (i = 0; i < ctx->nstate; i++)
        if (ctx->state[i].ptr != ptr) ctx->state[j++] = ctx->state[i];
    ctx->nstate = j;
}

/* a parameter named base + suffix (the layers name theirs so: "h3" + ".attn.w") */
static pt_tensor *pt__param2(pt_ctx *ctx, const char *base, const char *suffix, int ndim, int64_t d0, int64_t d1, pt_init_kind init,
                             float scale, uint32_t flags) {
    char name[sizeof(((pt_spec *)0)->name)];
    int64_t s[2];
    size_t nb = strlen(base), ns = strlen(suffix);
    s[0] = d0, s[1] = d1;
    if (nb + ns >= sizeof name)
        return (pt_tensor *)pt__fail(ctx, PT_ERR_ARG, "pt_param: name '%s%s' is longer than %d characters", base, suffix,
                                     (int)sizeof name - 1);
    memcpy(name, base, nb);
    memcpy(name + nb, suffix, ns + 1);
    return pt_param_new(ctx, name, ndim, s, init, scale, flags);
}

// >>ctx  context setup and teardown
/* Owns: pt_init / pt_shutdown, threads, memory statistics
   Invariants: pt_shutdown runs the teardown later sections registered, newest first, then frees
   what the context owns
   Entry points: pt_init pt_shutdown pt_set_threads pt_mem */
/* context setup */
static int pt__default_threads(void) {
    const char *e = getenv("PTRAIN_THREADS");
    int n = 0;
    if (e && atoi(e) > 0) return atoi(e);
#if defined(_OPENMP)
    n = omp_get_num_procs(); /* the CPUs of the affinity mask (what mpirun --bind-to gives a rank) */
#elif defined(__linux__) && defined(CPU_COUNT)
    {
        cpu_set_t set;
        if (sched_getaffinity(0, sizeof set, &set) == 0) n = CPU_COUNT(&set);
    }
#endif
    return n > 0 ? n : 1; /* without OpenMP the kernels run on one thread anyway */
}

static pt_status pt__gemm_ws_setup(pt_ctx *ctx, int threads) {
    int i;
    if (ctx->gemm_ws) {
        for (i = 0; i < ctx->ngemm_ws; i++) pt__gemm_ws_free(&ctx->gemm_ws[i]);
        PT_FREE(ctx->gemm_ws);
    }
    ctx->gemm_ws = (pt__gemm_ws *)pt__malloc(ctx, (size_t)(threads + 1) * sizeof(pt__gemm_ws));
    if (!ctx->gemm_ws) return PT_ERR_OOM;
    memset(ctx->gemm_ws, 0, (size_t)(threads + 1) * sizeof(pt__gemm_ws));
    ctx->ngemm_ws = threads + 1;
    for (i = 0; i <= threads; i++) ctx->gemm_ws[i].nthreads = i ? 1 : threads;
    ctx->nthreads = threads;
    return PT_OK;
}
PTDEF void pt_set_threads(pt_ctx *ctx, int threads) {
    if (!ctx) return;
    if (threads < 1) {
        pt__fail(ctx, PT_ERR_ARG, "pt_set_threads: %d threads, expected >= 1", threads);
        return;
    }
    if (pt__gemm_ws_setup(ctx, threads) != PT_OK) pt__fail(ctx, PT_ERR_OOM, "pt_set_threads: out of memory");
}

PTDEF pt_ctx *pt_init(const pt_desc *desc) {
    pt_ctx *ctx = (pt_ctx *)PT_MALLOC(sizeof(pt_ctx));
    const char *dev;
    if (!ctx) {
        PT_LOG(PT_LOG_ERROR, "pt_init: out of memory");
        return NULL;
    }
    memset(ctx, 0, sizeof *ctx);
    if (desc) ctx->desc = *desc;
    if (!desc) ctx->desc.log_level = PT_LOG_INFO;
    ctx->be = &pt__cpu_backend;
    if (pt__gemm_ws_setup(ctx, ctx->desc.threads > 0 ? ctx->desc.threads
                               : ctx->desc.dist ? pt_dist_threads(ctx->desc.dist)
                                                : pt__default_threads()) != PT_OK) {
        PT_LOG(PT_LOG_ERROR, "pt_init: out of memory");
        PT_FREE(ctx);
        return NULL;
    }
    dev = ctx->desc.device ? ctx->desc.device : getenv("PTRAIN_DEVICE");
    if (dev && *dev && strcmp(dev, "cpu") != 0) {
        pt_status st = PT_ERR_DEVICE;
        if (!strncmp(dev, "opencl", 6) && (dev[6] == 0 || dev[6] == ':')) {
#ifdef PTRAIN_OPENCL
            st = pt__cl_open(ctx, dev);
            if (st == PT_OK) st = pt__clt_env(ctx);
#else
            pt__fail(ctx, PT_ERR_DEVICE,
                     "pt_init: device '%s' needs OpenCL, which this build does not have (devices compiled in: cpu; compile with "
                     "-DPTRAIN_OPENCL and link -lOpenCL -lclblast)", dev);
#endif
        } else {
            pt__fail(ctx, PT_ERR_DEVICE, "pt_init: unknown device '%s', expected cpu or opencl[:platform[:device]]", dev);
        }
        if (st != PT_OK) {
            pt_shutdown(ctx);
            return NULL;
        }
    }
    dev = getenv("PTRAIN_PROFILE"); /* trace */
    if (dev && atoi(dev) > 0 && pt_profile_enable(ctx, 1) != PT_OK) {
        pt_shutdown(ctx);
        return NULL;
    }
    return ctx;
}
PTDEF void pt_shutdown(pt_ctx *ctx) {
    int i;
    if (!ctx) return;
    for (i = ctx->nat_shutdown - 1; i >= 0; i--) ctx->at_shutdown[i](ctx); /* the checkpoint writer is joined first */
    while (ctx->graphs) pt_graph_free(ctx->graphs);
    for (i = 0; i < ctx->nparams; i++) PT_FREE(ctx->params[i]);
    PT_FREE(ctx->params);
    if (ctx->pslab) {
        pt__st_free(ctx, ctx->pslab);
        PT_FREE(ctx->pslab);
    }
    if (ctx->gslab) {
        pt__st_free(ctx, ctx->gslab);
        PT_FREE(ctx->gslab);
    }
    for (i = 0; i < ctx->ngemm_ws; i++) pt__gemm_ws_free(&ctx->gemm_ws[i]);
    PT_FREE(ctx->gemm_ws);
    PT_FREE(ctx->work);
    PT_FREE(ctx->stage);
    PT_FREE(ctx->state);
    PT_FREE(ctx->prof_sums);
#ifdef PTRAIN_OPENCL
    pt__cl_close(ctx); /* after every buffer of the context is released */
#endif
    PT_FREE(ctx);
}
PTDEF pt_mem_stats pt_mem(const pt_ctx *ctx) {
    pt_mem_stats m;
    memset(&m, 0, sizeof m);
    if (!ctx) return m;
    m.params = ctx->mem[PT__MEM_PARAMS];
    m.grads = ctx->mem[PT__MEM_GRADS];
    m.optim = ctx->mem[PT__MEM_OPTIM];
    m.activations = ctx->mem[PT__MEM_ACT];
    m.workspace = ctx->mem[PT__MEM_WORK];
    m.peak_total = ctx->mem_peak;
    m.allocs = ctx->nallocs;
    return m;
}

// >>ops  every op: checks, forward through the kernel table, its backward next to it
/* Owns: the differentiable ops (elementwise, matmul, linear, softmax, cross-entropy, layernorm,
   embedding, attention, dropout, layout, reductions, images)
   Invariants: an op checks its inputs and names the shapes in its error; returns NULL on error or a
   NULL input; records its backward on the tape
   Entry points: pt_add pt_matmul pt_linear pt_cross_entropy pt_layernorm pt_embedding pt_attention
   pt_dropout pt_conv2d */
/* every op: checks, forward through the kernel table, its backward next to it
   Each op is a pair: `pt_X` checks its arguments (a clear message naming the op and the shapes),
   allocates the result in the graph, runs the forward kernel and records a node; `pt__X_bwd`
   accumulates the gradients of the inputs that need one. */

#define PT__BE (g->ctx->be)
#define PT__C (g->ctx)

/* a copy of t's view shifted by off elements (for per-batch kernel calls) */
static pt_tensor pt__at(const pt_tensor *t, int64_t off) {
    pt_tensor v = *t;
    v.off += off;
    return v;
}

static int pt__need_f32(pt_graph *g, const char *op, const char *what, const pt_tensor *t) {
    if (t->dtype == PT_F32) return 1;
    pt__fail(g->ctx, PT_ERR_DTYPE, "%s: %s must be f32, found %s %s", op, what, pt__dtname(t->dtype), pt__shp(t).s);
    return 0;
}
/* rows of a tensor seen as [rows, last dim] */
static int64_t pt__rows(const pt_tensor *t) { return t->ndim ? pt_numel(t) / t->shape[t->ndim - 1] : 1; }
static int64_t pt__last(const pt_tensor *t) { return t->ndim ? t->shape[t->ndim - 1] : 1; }

/* ---- add, sub, mul (b equal to a, or a's trailing dims) --------------------------------------- */
static void pt__binary_bwd(pt_graph *g, pt_node *n) {
    pt_tensor *dy = n->out->grad, *a = n->in[0], *b = n->in[1];
    pt_tensor *da = pt__grad(g, a), *db = pt__grad(g, b);
    if (n->i[0] == PT__MUL) {
        if (da) PT__BE->mul_acc(PT__C, da, dy, b);
        if (db) PT__BE->mul_acc(PT__C, db, dy, a);
    } else {
        if (da) PT__BE->axpy_reduce(PT__C, da, dy, 1.0f);
        if (db) PT__BE->axpy_reduce(PT__C, db, dy, n->i[0] == PT__SUB ? -1.0f : 1.0f);
    }
}
static pt_tensor *pt__binary(pt_graph *g, int op, const char *name, pt_tensor *a, pt_tensor *b) {
    pt_tensor *out, *ins[2];
    pt_node *n;
    int i, ok;
    if (!g || !a || !b) return NULL;
    if (!pt__need_f32(g, name, "a", a) || !pt__need_f32(g, name, "b", b)) return NULL;
    ok = b->ndim <= a->ndim;
    for (i = 0; ok && i < b->ndim; i++) ok = b->shape[i] == a->shape[a->ndim - b->ndim + i];
    if (!ok)
        return (pt_tensor *)pt__fail(g->ctx, PT_ERR_SHAPE, "%s: b %s must equal a %s or a's trailing dims", name, pt__shp(b).s,
                                     pt__shp(a).s);
    out = pt__new(g, PT_F32, a->ndim, a->shape);
    if (!out) return NULL;
    PT__BE->binary(PT__C, op, out, a, b);
    ins[0] = a, ins[1] = b;
    if ((n = pt__record(g, name, out, pt__binary_bwd, 2, ins)) != NULL) n->i[0] = op;
    return out;
}
PTDEF pt_tensor *pt_add(pt_graph *g, pt_tensor *a, pt_tensor *b) { return pt__binary(g, PT__ADD, "pt_add", a, b); }
PTDEF pt_tensor *pt_sub(pt_graph *g, pt_tensor *a, pt_tensor *b) { return pt__binary(g, PT__SUB, "pt_sub", a, b); }
PTDEF pt_tensor *pt_mul(pt_graph *g, pt_tensor *a, pt_tensor *b) { return pt__binary(g, PT__MUL, "pt_mul", a, b); }
PTDEF pt_tensor *pt_bias_add(pt_graph *g, pt_tensor *x, pt_tensor *bias) {
    if (!g || !x || !bias) return NULL;
    if (bias->ndim != 1 || bias->shape[0] != pt__last(x))
        return (pt_tensor *)pt__fail(g->ctx, PT_ERR_SHAPE, "pt_bias_add: bias %s must be 1-D of x's last dim (x is %s)",
                                     pt__shp(bias).s, pt__shp(x).s);
    return pt__binary(g, PT__ADD, "pt_bias_add", x, bias);
}

/* ---- scale --------------------------------------------------------------------------------- */
static void pt__scale_bwd(pt_graph *g, pt_node *n) {
    pt_tensor *dx = pt__grad(g, n->in[0]);
    if (dx) PT__BE->axpy_reduce(PT__C, dx, n->out->grad, n->f[0]);
}
PTDEF pt_tensor *pt_scale(pt_graph *g, pt_tensor *x, float s) {
    pt_tensor *out;
    pt_node *n;
    if (!g || !x || !pt__need_f32(g, "pt_scale", "x", x)) return NULL;
    if (!(out = pt__new(g, PT_F32, x->ndim, x->shape))) return NULL;
    PT__BE->scale(PT__C, out, x, s);
    if ((n = pt__record(g, "pt_scale", out, pt__scale_bwd, 1, &x)) != NULL) n->f[0] = s;
    return out;
}

/* ---- matmul ----------------------------------------------------------------------------------
   i[]: ta, tb, batch, M, N, K, b shared across the batch */
static void pt__matmul_bwd(pt_graph *g, pt_node *n) {
    pt_tensor *a = n->in[0], *b = n->in[1], *dc = n->out->grad;
    pt_tensor *da = pt__grad(g, a), *db = pt__grad(g, b);
    int ta = (int)n->i[0], tb = (int)n->i[1], bshared = (int)n->i[6];
    int64_t batch = n->i[2], M = n->i[3], N = n->i[4], K = n->i[5];
    int64_t lda = ta ? M : K, ldb = tb ? K : N, sa = M * K, sb = bshared ? 0 : K * N, sc = M * N, i;
    if (da) {
        if (!ta) PT__BE->gemm(PT__C, 0, !tb, batch, M, K, N, 1.0f, dc, N, sc, b, ldb, sb, 1.0f, da, lda, sa);
        else PT__BE->gemm(PT__C, tb, 1, batch, K, M, N, 1.0f, b, ldb, sb, dc, N, sc, 1.0f, da, lda, sa);
    }
    if (db) {
        /* a shared b sums its gradient over the batch: one accumulating call per item, in order */
        int64_t nb = bshared ? batch : 1, bb = bshared ? 1 : batch;
        for (i = 0; i < nb; i++) {
            pt_tensor ai = pt__at(a, i * sa), ci = pt__at(dc, i * sc);
            if (!tb) PT__BE->gemm(PT__C, !ta, 0, bb, K, N, M, 1.0f, &ai, lda, sa, &ci, N, sc, 1.0f, db, ldb, sb);
            else PT__BE->gemm(PT__C, 1, ta, bb, N, K, M, 1.0f, &ci, N, sc, &ai, lda, sa, 1.0f, db, ldb, sb);
        }
    }
}
PTDEF pt_tensor *pt_matmul(pt_graph *g, pt_tensor *a, pt_tensor *b, int ta, int tb) {
    int64_t M, K, Kb, N, batch = 1, shape[PT_MAX_DIMS];
    int i, bshared, nd;
    pt_tensor *out, *ins[2];
    pt_node *n;
    if (!g || !a || !b) return NULL;
    if (!pt__need_f32(g, "pt_matmul", "a", a) || !pt__need_f32(g, "pt_matmul", "b", b)) return NULL;
    if (a->ndim < 2 || b->ndim < 2)
        return (pt_tensor *)pt__fail(g->ctx, PT_ERR_SHAPE, "pt_matmul: a %s and b %s need at least 2 dims", pt__shp(a).s, pt__shp(b).s);
    nd = a->ndim;
    M = ta ? a->shape[nd - 1] : a->shape[nd - 2];
    K = ta ? a->shape[nd - 2] : a->shape[nd - 1];
    Kb = tb ? b->shape[b->ndim - 1] : b->shape[b->ndim - 2];
    N = tb ? b->shape[b->ndim - 2] : b->shape[b->ndim - 1];
    if (K != Kb)
        return (pt_tensor *)pt__fail(g->ctx, PT_ERR_SHAPE, "pt_matmul: inner dims differ: a %s%s has K=%lld, b %s%s has K=%lld", pt__shp(a).s,
                                     ta ? "^T" : "", (long long)K, pt__shp(b).s, tb ? "^T" : "", (long long)Kb);
    bshared = b->ndim == 2;
    if (!bshared) {
        int ok = b->ndim == nd;
        for (i = 0; ok && i < nd - 2; i++) ok = a->shape[i] == b->shape[i];
        if (!ok)
            return (pt_tensor *)pt__fail(g->ctx, PT_ERR_SHAPE, "pt_matmul: batch dims differ: a %s, b %s (b must be 2-D or share a's leading dims)",
                                         pt__shp(a).s, pt__shp(b).s);
    }
    for (i = 0; i < nd - 2; i++) batch *= a->shape[i], shape[i] = a->shape[i];
    shape[nd - 2] = M;
    shape[nd - 1] = N;
    if (!(out = pt__new(g, PT_F32, nd, shape))) return NULL;
    if (bshared && !ta) { /* [batch*M, K] @ b: one matrix product */
        M *= batch;
        batch = 1;
    }
    PT__BE->gemm(PT__C, ta, tb, batch, M, N, K, 1.0f, a, ta ? M : K, M * K, b, tb ? K : N, bshared ? 0 : K * N, 0.0f, out, N, M * N);
    ins[0] = a, ins[1] = b;
    if ((n = pt__record(g, "pt_matmul", out, pt__matmul_bwd, 2, ins)) != NULL) {
        n->flags |= PT__NODE_OUT_FREE;
        n->i[0] = ta, n->i[1] = tb, n->i[2] = batch, n->i[3] = M, n->i[4] = N, n->i[5] = K, n->i[6] = bshared;
    }
    return out;
}

/* ---- linear: x @ w^T + b ---------------------------------------------------------------------- */
static void pt__linear_bwd(pt_graph *g, pt_node *n) {
    pt_tensor *x = n->in[0], *w = n->in[1], *b = n->nin > 2 ? n->in[2] : NULL, *dy = n->out->grad;
    pt_tensor *dx = pt__grad(g, x), *dw = pt__grad(g, w), *db = pt__grad(g, b);
    int64_t rows = n->i[0], in = n->i[1], out = n->i[2];
    if (dx) PT__BE->gemm(PT__C, 0, 0, 1, rows, in, out, 1.0f, dy, out, 0, w, in, 0, 1.0f, dx, in, 0);
    if (dw) PT__BE->gemm(PT__C, 1, 0, 1, out, in, rows, 1.0f, dy, out, 0, x, in, 0, 1.0f, dw, in, 0);
    if (db) PT__BE->axpy_reduce(PT__C, db, dy, 1.0f);
}
PTDEF pt_tensor *pt_linear(pt_graph *g, pt_tensor *x, pt_tensor *w, pt_tensor *b) {
    int64_t in, outf, rows, shape[PT_MAX_DIMS];
    pt_tensor *y, *ins[3];
    pt_node *n;
    int i;
    if (!g || !x || !w) return NULL;
    if (!pt__need_f32(g, "pt_linear", "x", x) || !pt__need_f32(g, "pt_linear", "w", w) || (b && !pt__need_f32(g, "pt_linear", "b", b)))
        return NULL;
    if (x->ndim < 1 || w->ndim != 2 || w->shape[1] != pt__last(x))
        return (pt_tensor *)pt__fail(g->ctx, PT_ERR_SHAPE, "pt_linear: w %s must be [out, %lld] for x %s", pt__shp(w).s,
                                     (long long)pt__last(x), pt__shp(x).s);
    outf = w->shape[0];
    if (b && (b->ndim != 1 || b->shape[0] != outf))
        return (pt_tensor *)pt__fail(g->ctx, PT_ERR_SHAPE, "pt_linear: bias %s must be [%lld] for w %s", pt__shp(b).s, (long long)outf,
                                     pt__shp(w).s);
    in = w->shape[1];
    rows = pt__rows(x);
    for (i = 0; i < x->ndim; i++) shape[i] = x->shape[i];
    shape[x->ndim - 1] = outf;
    if (!(y = pt__new(g, PT_F32, x->ndim, shape))) return NULL;
    PT__BE->gemm(PT__C, 0, 1, 1, rows, outf, in, 1.0f, x, in, 0, w, in, 0, 0.0f, y, outf, 0);
    if (b) PT__BE->binary(PT__C, PT__ADD, y, y, b);
    ins[0] = x, ins[1] = w, ins[2] = b;
    if ((n = pt__record(g, "pt_linear", y, pt__linear_bwd, b ? 3 : 2, ins)) != NULL) {
        n->flags |= PT__NODE_OUT_FREE;
        n->i[0] = rows, n->i[1] = in, n->i[2] = outf;
    }
    return y;
}

/* ---- activations ------------------------------------------------------------------------------ */
static void pt__act_bwd(pt_graph *g, pt_node *n) {
    pt_tensor *dx = pt__grad(g, n->in[0]);
    if (dx) PT__BE->act_bwd(PT__C, (int)n->i[0], dx, n->in[0], n->out->grad);
}
static pt_tensor *pt__act(pt_graph *g, int kind, const char *name, pt_tensor *x) {
    pt_tensor *out;
    pt_node *n;
    if (!g || !x || !pt__need_f32(g, name, "x", x)) return NULL;
    if (!(out = pt__new(g, PT_F32, x->ndim, x->shape))) return NULL;
    PT__BE->act_fwd(PT__C, kind, out, x);
    if ((n = pt__record(g, name, out, pt__act_bwd, 1, &x)) != NULL) n->i[0] = kind;
    return out;
}
PTDEF pt_tensor *pt_relu(pt_graph *g, pt_tensor *x) { return pt__act(g, PT__RELU, "pt_relu", x); }
PTDEF pt_tensor *pt_gelu(pt_graph *g, pt_tensor *x) { return pt__act(g, PT__GELU, "pt_gelu", x); }

/* ---- softmax, log-softmax --------------------------------------------------------------------- */
static void pt__softmax_bwd(pt_graph *g, pt_node *n) {
    pt_tensor *dx = pt__grad(g, n->in[0]);
    if (dx) PT__BE->softmax_bwd(PT__C, dx, n->out, n->out->grad, (int)n->i[0]);
}
static pt_tensor *pt__softmax(pt_graph *g, int log, const char *name, pt_tensor *x) {
    pt_tensor *out;
    pt_node *n;
    if (!g || !x || !pt__need_f32(g, name, "x", x)) return NULL;
    if (x->ndim < 1 || pt__last(x) < 1) return (pt_tensor *)pt__fail(g->ctx, PT_ERR_SHAPE, "%s: x %s needs a last dim of size >= 1", name, pt__shp(x).s);
    if (!(out = pt__new(g, PT_F32, x->ndim, x->shape))) return NULL;
    PT__BE->softmax_fwd(PT__C, out, x, log);
    if ((n = pt__record(g, name, out, pt__softmax_bwd, 1, &x)) != NULL) n->i[0] = log;
    return out;
}
PTDEF pt_tensor *pt_softmax(pt_graph *g, pt_tensor *x) { return pt__softmax(g, 0, "pt_softmax", x); }
PTDEF pt_tensor *pt_log_softmax(pt_graph *g, pt_tensor *x) { return pt__softmax(g, 1, "pt_log_softmax", x); }

/* ---- cross-entropy (fused with softmax) ------------------------------------------------------- */
static void pt__xent_bwd(pt_graph *g, pt_node *n) {
    pt_tensor *lg = n->in[0], *dl;
    int overwrite = 0;
    if (!(lg->flags & PT_TENSOR_REQUIRES_GRAD)) return;
    if (!lg->grad && lg->node && lg->uses == 1 && (lg->node->flags & PT__NODE_OUT_FREE)) {
        /* the logits are read by nothing else and their producer's backward does not need them:
           their gradient takes their place (no second vocabulary-sized buffer) */
        if (!(dl = pt__rec(g, PT_F32, lg->ndim, lg->shape))) return;
        dl->st = lg->st;
        dl->off = lg->off;
        lg->grad = dl;
        overwrite = 1;
    } else if (!(dl = pt__grad(g, lg)))
        return;
    PT__BE->xent_bwd(PT__C, dl, lg, n->saved[0], n->in[1], (int32_t)n->i[0], n->i[1], n->out->grad, n->f[0], overwrite);
}
/* f32 logits [..., V] and i32 targets with one id per row; 0 and an error otherwise */
static int pt__xent_shape(pt_graph *g, const char *op, const pt_tensor *logits, const pt_tensor *targets) {
    if (!pt__need_f32(g, op, "logits", logits)) return 0;
    if (targets->dtype != PT_I32)
        return pt__fail(g->ctx, PT_ERR_DTYPE, "%s: targets must be i32, found %s %s", op, pt__dtname(targets->dtype), pt__shp(targets).s), 0;
    if (logits->ndim < 1 || pt_numel(targets) != pt__rows(logits))
        return pt__fail(g->ctx, PT_ERR_SHAPE, "%s: targets %s must hold one id per logits row (logits %s: %lld rows)", op, pt__shp(targets).s,
                        pt__shp(logits).s, (long long)pt__rows(logits)),
               0;
    return 1;
}
/* the targets (rows ids) in host scratch of rows + extra words, checked to be in [0, nvalid) or
   ignore; *count receives the rows that count. NULL on error. */
static int32_t *pt__xent_targets(pt_graph *g, const char *op, const pt_tensor *targets, int64_t rows, int32_t ignore, int64_t nvalid,
                                 int64_t extra, int64_t *count) {
    int32_t *tg = (int32_t *)pt__work(g->ctx, rows + extra);
    int64_t i;
    if (!tg) return NULL;
    {
        int k = pt__xfer_as(g->ctx, PT_XFER_CHECK);
        PT__BE->read(PT__C, targets, tg, rows * 4);
        pt__xfer_as(g->ctx, k);
    }
    for (*count = 0, i = 0; i < rows; i++) {
        if (tg[i] == ignore) continue;
        if (tg[i] < 0 || tg[i] >= nvalid)
            return (int32_t *)pt__fail(g->ctx, PT_ERR_ARG, "%s: target %d at row %lld is outside [0, %lld) (ignore_index %d)", op, (int)tg[i],
                                       (long long)i, (long long)nvalid, (int)ignore);
        (*count)++;
    }
    return tg;
}
PTDEF pt_tensor *pt_cross_entropy_ex(pt_graph *g, pt_tensor *logits, pt_tensor *targets, int32_t ignore_index, int64_t nvalid) {
    int64_t rows, V, count = 0;
    pt_tensor *lse, *lrows, *out, *ins[2];
    pt_node *n;
    if (!g || !logits || !targets) return NULL;
    if (!pt__xent_shape(g, "pt_cross_entropy", logits, targets)) return NULL;
    V = pt__last(logits);
    rows = pt__rows(logits);
    if (nvalid < 1 || nvalid > V)
        return (pt_tensor *)pt__fail(g->ctx, PT_ERR_ARG, "pt_cross_entropy: nvalid %lld must be in [1, %lld] (logits %s)", (long long)nvalid,
                                     (long long)V, pt__shp(logits).s);
    if (!pt__xent_targets(g, "pt_cross_entropy", targets, rows, ignore_index, nvalid, 0, &count)) return NULL;
    lse = pt__new(g, PT_F32, 1, &rows);
    lrows = pt__new(g, PT_F32, 1, &rows);
    out = pt__new(g, PT_F32, 0, NULL);
    if (!lse || !lrows || !out) return NULL;
    PT__BE->xent_fwd(PT__C, lrows, lse, logits, targets, ignore_index, nvalid);
    PT__BE->sum(PT__C, out, lrows, count ? 1.0f / (float)count : 0.0f);
    ins[0] = logits, ins[1] = targets;
    if ((n = pt__record(g, "pt_cross_entropy", out, pt__xent_bwd, 2, ins)) != NULL) {
        n->saved[0] = lse;
        n->i[0] = ignore_index;
        n->i[1] = nvalid;
        n->f[0] = count ? 1.0f / (float)count : 0.0f;
    }
    return out;
}
PTDEF pt_tensor *pt_cross_entropy(pt_graph *g, pt_tensor *logits, pt_tensor *targets, int32_t ignore_index) {
    return pt_cross_entropy_ex(g, logits, targets, ignore_index, logits ? pt__last(logits) : 0);
}

/* ---- layernorm -------------------------------------------------------------------------------- */
static void pt__layernorm_bwd(pt_graph *g, pt_node *n) {
    pt_tensor *dx = pt__grad(g, n->in[0]), *dw = pt__grad(g, n->in[1]), *db = n->nin > 2 ? pt__grad(g, n->in[2]) : NULL;
    PT__BE->layernorm_bwd(PT__C, dx, dw, db, n->out->grad, n->in[0], n->in[1], n->saved[0], n->saved[1]);
}
PTDEF pt_tensor *pt_layernorm(pt_graph *g, pt_tensor *x, pt_tensor *w, pt_tensor *b, float eps) {
    int64_t C, rows;
    pt_tensor *y, *mean, *rstd, *ins[3];
    pt_node *n;
    if (!g || !x || !w) return NULL;
    if (!pt__need_f32(g, "pt_layernorm", "x", x) || !pt__need_f32(g, "pt_layernorm", "w", w) || (b && !pt__need_f32(g, "pt_layernorm", "b", b)))
        return NULL;
    C = pt__last(x);
    if (x->ndim < 1 || w->ndim != 1 || w->shape[0] != C || (b && (b->ndim != 1 || b->shape[0] != C)))
        return (pt_tensor *)pt__fail(g->ctx, PT_ERR_SHAPE, "pt_layernorm: w %s and b %s must be [%lld], the last dim of x %s", pt__shp(w).s,
                                     pt__shp(b).s, (long long)C, pt__shp(x).s);
    if (!(eps > 0.0f)) return (pt_tensor *)pt__fail(g->ctx, PT_ERR_ARG, "pt_layernorm: eps must be > 0, found %g", (double)eps);
    rows = pt__rows(x);
    y = pt__new(g, PT_F32, x->ndim, x->shape);
    mean = pt__new(g, PT_F32, 1, &rows);
    rstd = pt__new(g, PT_F32, 1, &rows);
    if (!y || !mean || !rstd) return NULL;
    PT__BE->layernorm_fwd(PT__C, y, mean, rstd, x, w, b, eps);
    ins[0] = x, ins[1] = w, ins[2] = b;
    if ((n = pt__record(g, "pt_layernorm", y, pt__layernorm_bwd, b ? 3 : 2, ins)) != NULL) n->saved[0] = mean, n->saved[1] = rstd;
    return y;
}

/* ---- embedding -------------------------------------------------------------------------------- */
static void pt__embedding_bwd(pt_graph *g, pt_node *n) {
    pt_tensor *dt = pt__grad(g, n->in[0]);
    if (dt) PT__BE->embed_bwd(PT__C, dt, n->out->grad, n->in[1]);
}
/* checks table [V, C] f32 and ids i32; returns the ids in host scratch (NULL on error) */
static int32_t *pt__embed_ids(pt_graph *g, const char *op, const pt_tensor *table, const pt_tensor *ids) {
    int32_t *id;
    if (!pt__need_f32(g, op, "table", table)) return NULL;
    if (ids->dtype != PT_I32)
        return (int32_t *)pt__fail(g->ctx, PT_ERR_DTYPE, "%s: ids must be i32, found %s %s", op, pt__dtname(ids->dtype), pt__shp(ids).s);
    if (table->ndim != 2 || ids->ndim >= PT_MAX_DIMS)
        return (int32_t *)pt__fail(g->ctx, PT_ERR_SHAPE, "%s: table %s must be [V, C] and ids %s at most %d-D", op, pt__shp(table).s,
                                   pt__shp(ids).s, PT_MAX_DIMS - 1);
    if (!(id = (int32_t *)pt__work(g->ctx, pt_numel(ids)))) return NULL;
    {
        int k = pt__xfer_as(g->ctx, PT_XFER_CHECK);
        PT__BE->read(PT__C, ids, id, pt_numel(ids) * 4);
        pt__xfer_as(g->ctx, k);
    }
    return id;
}
/* rows of table picked by checked ids (< V; negative ids: zero rows), recorded as op */
static pt_tensor *pt__embed(pt_graph *g, const char *op, pt_tensor *table, pt_tensor *ids) {
    int64_t shape[PT_MAX_DIMS];
    pt_tensor *out, *ins[2];
    int d;
    for (d = 0; d < ids->ndim; d++) shape[d] = ids->shape[d];
    shape[ids->ndim] = table->shape[1];
    if (!(out = pt__new(g, PT_F32, ids->ndim + 1, shape))) return NULL;
    PT__BE->embed_fwd(PT__C, out, table, ids);
    ins[0] = table, ins[1] = ids;
    pt__record(g, op, out, pt__embedding_bwd, 2, ins);
    return out;
}
PTDEF pt_tensor *pt_embedding(pt_graph *g, pt_tensor *table, pt_tensor *ids) {
    int64_t i;
    int32_t *id;
    if (!g || !table || !ids) return NULL;
    if (!(id = pt__embed_ids(g, "pt_embedding", table, ids))) return NULL;
    for (i = 0; i < pt_numel(ids); i++)
        if (id[i] < 0 || id[i] >= table->shape[0])
            return (pt_tensor *)pt__fail(g->ctx, PT_ERR_ARG, "pt_embedding: id %d at position %lld is outside the table's %lld rows", (int)id[i],
                                         (long long)i, (long long)table->shape[0]);
    return pt__embed(g, "pt_embedding", table, ids);
}
/* this rank's rows [vocab_offset, vocab_offset + V_local): the ids mapped to local rows, -1 elsewhere */
PTDEF pt_tensor *pt_embedding_vp(pt_graph *g, pt_tensor *w_local, pt_tensor *ids, int64_t vocab_offset) {
    int64_t i, n;
    int32_t *id;
    pt_tensor *lid;
    if (!g || !w_local || !ids) return NULL;
    if (!(id = pt__embed_ids(g, "pt_embedding_vp", w_local, ids))) return NULL;
    if (vocab_offset < 0)
        return (pt_tensor *)pt__fail(g->ctx, PT_ERR_ARG, "pt_embedding_vp: vocab_offset %lld must be >= 0", (long long)vocab_offset);
    for (n = pt_numel(ids), i = 0; i < n; i++) {
        if (id[i] < 0)
            return (pt_tensor *)pt__fail(g->ctx, PT_ERR_ARG, "pt_embedding_vp: id %d at position %lld is negative", (int)id[i], (long long)i);
        id[i] = id[i] >= vocab_offset && id[i] - vocab_offset < w_local->shape[0] ? (int32_t)(id[i] - vocab_offset) : -1;
    }
    if (!(lid = pt__new(g, PT_I32, ids->ndim, ids->shape))) return NULL;
    {
        int k = pt__xfer_as(g->ctx, PT_XFER_TP); /* a device backend: the ids mapped to this rank's rows */
        PT__BE->write(PT__C, lid, id, n * 4);
        pt__xfer_as(g->ctx, k);
    }
    return pt__embed(g, "pt_embedding_vp", w_local, lid);
}

/* ---- causal self-attention -------------------------------------------------------------------- */
static void pt__attention_bwd(pt_graph *g, pt_node *n) {
    pt_tensor *dq = pt__grad(g, n->in[0]);
    if (dq)
        PT__BE->attn_bwd(PT__C, dq, n->out->grad, n->in[0], n->out, n->saved[0], (int)n->i[0], (int)n->i[1], (int)n->i[2], (int)n->i[3]);
}
PTDEF pt_tensor *pt_attention(pt_graph *g, pt_tensor *qkv, int n_head) {
    int64_t B, T, C, shape[3];
    pt_tensor *out, *lse;
    pt_node *n;
    if (!g || !qkv || !pt__need_f32(g, "pt_attention", "qkv", qkv)) return NULL;
    if (qkv->ndim != 3 || qkv->shape[2] % 3)
        return (pt_tensor *)pt__fail(g->ctx, PT_ERR_SHAPE, "pt_attention: qkv %s must be [B, T, 3C]", pt__shp(qkv).s);
    B = qkv->shape[0], T = qkv->shape[1], C = qkv->shape[2] / 3;
    if (n_head < 1 || C % n_head)
        return (pt_tensor *)pt__fail(g->ctx, PT_ERR_SHAPE, "pt_attention: width C=%lld (qkv %s) does not split into %d heads", (long long)C,
                                     pt__shp(qkv).s, n_head);
    shape[0] = B, shape[1] = T, shape[2] = C;
    out = pt__new(g, PT_F32, 3, shape);
    shape[1] = n_head, shape[2] = T;
    lse = pt__new(g, PT_F32, 3, shape);
    if (!out || !lse) return NULL;
    PT__BE->attn_fwd(PT__C, out, lse, qkv, (int)B, (int)T, (int)C, n_head);
    if ((n = pt__record(g, "pt_attention", out, pt__attention_bwd, 1, &qkv)) != NULL) {
        n->saved[0] = lse;
        n->i[0] = B, n->i[1] = T, n->i[2] = C, n->i[3] = n_head;
    }
    return out;
}

/* ---- dropout ---------------------------------------------------------------------------------- */
static void pt__dropout_bwd(pt_graph *g, pt_node *n) {
    pt_tensor *dx = pt__grad(g, n->in[0]);
    if (dx) PT__BE->dropout(PT__C, dx, n->out->grad, n->f[0], (uint64_t)n->i[0], n->i[1], 1);
}
PTDEF pt_tensor *pt_dropout(pt_graph *g, pt_tensor *x, float p, uint64_t seed) {
    pt_tensor *out;
    pt_node *n;
    uint64_t key;
    int64_t base;
    if (!g || !x || !pt__need_f32(g, "pt_dropout", "x", x)) return NULL;
    if (!(p >= 0.0f && p < 1.0f)) return (pt_tensor *)pt__fail(g->ctx, PT_ERR_ARG, "pt_dropout: p must be in [0, 1), found %g", (double)p);
    if (!g->training || p == 0.0f) return x;
    key = pt_hash64(g->ctx->desc.seed ^ pt_hash64(seed ^ 0xd509u));
    base = g->sample_off * (x->ndim ? pt_numel(x) / PT__MAX(x->shape[0], 1) : 1);
    if (!(out = pt__new(g, PT_F32, x->ndim, x->shape))) return NULL;
    PT__BE->dropout(PT__C, out, x, p, key, base, 0);
    if ((n = pt__record(g, "pt_dropout", out, pt__dropout_bwd, 1, &x)) != NULL) {
        n->i[0] = (int64_t)key;
        n->i[1] = base;
        n->f[0] = p;
    }
    return out;
}

/* ---- reshape (a view), permute, transpose ---------------------------------------------------- */
static void pt__copyback_bwd(pt_graph *g, pt_node *n) {
    pt_tensor *dx = pt__grad(g, n->in[0]);
    if (dx) PT__BE->copy(PT__C, dx, n->out->grad, 1);
}
/* a new shape over x's data (no copy), recorded as op with a pass-through backward */
static pt_tensor *pt__view(pt_graph *g, const char *op, pt_tensor *x, int ndim, const int64_t *shape) {
    pt_tensor *out = pt__rec(g, x->dtype, ndim, shape);
    if (!out) return NULL;
    out->st = x->st;
    out->off = x->off;
    pt__record(g, op, out, pt__copyback_bwd, 1, &x);
    return out;
}
PTDEF pt_tensor *pt_reshape(pt_graph *g, pt_tensor *x, int ndim, const int64_t *shape) {
    int64_t s[PT_MAX_DIMS], known = 1;
    int i, infer = -1;
    if (!g || !x) return NULL;
    if (ndim < 0 || ndim > PT_MAX_DIMS || (ndim && !shape))
        return (pt_tensor *)pt__fail(g->ctx, PT_ERR_ARG, "pt_reshape: ndim %d must be in 0..%d", ndim, PT_MAX_DIMS);
    for (i = 0; i < ndim; i++) {
        s[i] = shape[i];
        if (s[i] == -1 && infer < 0) infer = i;
        else if (s[i] < 0) return (pt_tensor *)pt__fail(g->ctx, PT_ERR_SHAPE, "pt_reshape: dim %d is %lld (one -1 allowed)", i, (long long)s[i]);
        else known *= s[i];
    }
    if (infer >= 0 && known > 0 && pt_numel(x) % known == 0) s[infer] = pt_numel(x) / known, known *= s[infer];
    if (known != pt_numel(x) || (infer >= 0 && known == 0)) {
        char want[96];
        int k = snprintf(want, sizeof want, "[");
        for (i = 0; i < ndim && k < (int)sizeof want; i++) k += snprintf(want + k, sizeof want - (size_t)k, i ? ",%lld" : "%lld", (long long)shape[i]);
        if (k < (int)sizeof want) snprintf(want + k, sizeof want - (size_t)k, "]");
        return (pt_tensor *)pt__fail(g->ctx, PT_ERR_SHAPE, "pt_reshape: x %s (%lld elements) cannot take shape %s", pt__shp(x).s,
                                     (long long)pt_numel(x), want);
    }
    return pt__view(g, "pt_reshape", x, ndim, s);
}
static void pt__permute_bwd(pt_graph *g, pt_node *n) {
    pt_tensor *dx = pt__grad(g, n->in[0]);
    int inv[PT_MAX_DIMS], i;
    for (i = 0; i < n->in[0]->ndim; i++) inv[n->i[i]] = i;
    if (dx) PT__BE->permute(PT__C, dx, n->out->grad, inv, 1);
}
PTDEF pt_tensor *pt_permute(pt_graph *g, pt_tensor *x, const int *perm) {
    int64_t s[PT_MAX_DIMS];
    int i, seen = 0;
    pt_tensor *out;
    pt_node *n;
    if (!g || !x) return NULL;
    for (i = 0; perm && i < x->ndim; i++) {
        if (perm[i] < 0 || perm[i] >= x->ndim || (seen & (1 << perm[i]))) break;
        seen |= 1 << perm[i];
        s[i] = x->shape[perm[i]];
    }
    if (!perm || i < x->ndim)
        return (pt_tensor *)pt__fail(g->ctx, PT_ERR_ARG, "pt_permute: perm is not a permutation of the %d dims of x %s", x->ndim, pt__shp(x).s);
    if (!(out = pt__new(g, x->dtype, x->ndim, s))) return NULL;
    PT__BE->permute(PT__C, out, x, perm, 0);
    if ((n = pt__record(g, "pt_permute", out, pt__permute_bwd, 1, &x)) != NULL)
        for (i = 0; i < x->ndim; i++) n->i[i] = perm[i];
    return out;
}
PTDEF pt_tensor *pt_transpose(pt_graph *g, pt_tensor *x, int d0, int d1) {
    int perm[PT_MAX_DIMS], i;
    if (!g || !x) return NULL;
    if (d0 < 0 || d1 < 0 || d0 >= x->ndim || d1 >= x->ndim)
        return (pt_tensor *)pt__fail(g->ctx, PT_ERR_ARG, "pt_transpose: dims %d and %d must be in [0, %d) for x %s", d0, d1, x->ndim, pt__shp(x).s);
    for (i = 0; i < PT_MAX_DIMS; i++) perm[i] = i;
    perm[d0] = d1;
    perm[d1] = d0;
    return pt_permute(g, x, perm);
}

/* ---- concat, slice, split -------------------------------------------------------------------- */
static void pt__outer_inner(const pt_tensor *t, int dim, int64_t *outer, int64_t *inner) {
    int i;
    *outer = *inner = 1;
    for (i = 0; i < dim; i++) *outer *= t->shape[i];
    for (i = dim + 1; i < t->ndim; i++) *inner *= t->shape[i];
}
static void pt__concat_bwd(pt_graph *g, pt_node *n) {
    int64_t outer, inner, at = 0, dimn = n->out->shape[n->i[0]];
    int k;
    pt__outer_inner(n->out, (int)n->i[0], &outer, &inner);
    for (k = 0; k < n->nin; k++) {
        pt_tensor *dx = pt__grad(g, n->in[k]);
        int64_t len = n->in[k]->shape[n->i[0]];
        if (dx) PT__BE->copy_block(PT__C, dx, len, 0, n->out->grad, dimn, at, len, outer, inner, 1);
        at += len;
    }
}
PTDEF pt_tensor *pt_concat(pt_graph *g, int nx, pt_tensor *const *xs, int dim) {
    int64_t s[PT_MAX_DIMS], outer, inner, at = 0;
    int k, i;
    pt_tensor *out;
    pt_node *n;
    if (!g || !xs || nx < 1) return g ? (pt_tensor *)pt__fail(g->ctx, PT_ERR_ARG, "pt_concat: needs at least one tensor") : NULL;
    for (k = 0; k < nx; k++)
        if (!xs[k]) return NULL;
    if (dim < 0 || dim >= xs[0]->ndim)
        return (pt_tensor *)pt__fail(g->ctx, PT_ERR_ARG, "pt_concat: dim %d must be in [0, %d)", dim, xs[0]->ndim);
    for (i = 0; i < xs[0]->ndim; i++) s[i] = xs[0]->shape[i];
    for (k = 1; k < nx; k++) {
        int ok = xs[k]->ndim == xs[0]->ndim && xs[k]->dtype == xs[0]->dtype;
        for (i = 0; ok && i < xs[0]->ndim; i++) ok = i == dim || xs[k]->shape[i] == xs[0]->shape[i];
        if (!ok)
            return (pt_tensor *)pt__fail(g->ctx, PT_ERR_SHAPE, "pt_concat: tensor %d %s does not match tensor 0 %s outside dim %d", k,
                                         pt__shp(xs[k]).s, pt__shp(xs[0]).s, dim);
        s[dim] += xs[k]->shape[dim];
    }
    if (!(out = pt__new(g, xs[0]->dtype, xs[0]->ndim, s))) return NULL;
    pt__outer_inner(out, dim, &outer, &inner);
    for (k = 0; k < nx; k++) {
        PT__BE->copy_block(PT__C, out, s[dim], at, xs[k], xs[k]->shape[dim], 0, xs[k]->shape[dim], outer, inner, 0);
        at += xs[k]->shape[dim];
    }
    if ((n = pt__record(g, "pt_concat", out, pt__concat_bwd, nx, xs)) != NULL) n->i[0] = dim;
    return out;
}
static void pt__slice_bwd(pt_graph *g, pt_node *n) {
    pt_tensor *dx = pt__grad(g, n->in[0]);
    int64_t outer, inner;
    pt__outer_inner(n->in[0], (int)n->i[0], &outer, &inner);
    if (dx) PT__BE->copy_block(PT__C, dx, n->in[0]->shape[n->i[0]], n->i[1], n->out->grad, n->i[2], 0, n->i[2], outer, inner, 1);
}
PTDEF pt_tensor *pt_slice(pt_graph *g, pt_tensor *x, int dim, int64_t start, int64_t len) {
    int64_t s[PT_MAX_DIMS], outer, inner;
    int i;
    pt_tensor *out;
    pt_node *n;
    if (!g || !x) return NULL;
    if (dim < 0 || dim >= x->ndim || start < 0 || len < 0 || start + len > x->shape[dim])
        return (pt_tensor *)pt__fail(g->ctx, PT_ERR_ARG, "pt_slice: [%lld, %lld) of dim %d is outside x %s", (long long)start,
                                     (long long)(start + len), dim, pt__shp(x).s);
    for (i = 0; i < x->ndim; i++) s[i] = x->shape[i];
    s[dim] = len;
    if (!(out = pt__new(g, x->dtype, x->ndim, s))) return NULL;
    pt__outer_inner(x, dim, &outer, &inner);
    PT__BE->copy_block(PT__C, out, len, 0, x, x->shape[dim], start, len, outer, inner, 0);
    if ((n = pt__record(g, "pt_slice", out, pt__slice_bwd, 1, &x)) != NULL) n->i[0] = dim, n->i[1] = start, n->i[2] = len;
    return out;
}
PTDEF pt_status pt_split(pt_graph *g, pt_tensor *x, int dim, int n, const int64_t *sizes, pt_tensor **outs) {
    int64_t at = 0;
    int k;
    if (!g) return PT_ERR_ARG;
    if (!x || !sizes || !outs || n < 1 || dim < 0 || dim >= x->ndim) {
        pt__fail(g->ctx, PT_ERR_ARG, "pt_split: needs x, n >= 1 sizes, outs and a dim of x (dim %d, x %s)", dim, pt__shp(x).s);
        return PT_ERR_ARG;
    }
    for (k = 0; k < n; k++) at += sizes[k];
    if (at != x->shape[dim]) {
        pt__fail(g->ctx, PT_ERR_SHAPE, "pt_split: sizes sum to %lld, dim %d of x %s is %lld", (long long)at, dim, pt__shp(x).s,
                 (long long)x->shape[dim]);
        return PT_ERR_SHAPE;
    }
    for (at = 0, k = 0; k < n; k++) {
        if (!(outs[k] = pt_slice(g, x, dim, at, sizes[k]))) return g->ctx->status;
        at += sizes[k];
    }
    return PT_OK;
}

/* ---- sum, mean -------------------------------------------------------------------------------- */
static void pt__sum_bwd(pt_graph *g, pt_node *n) {
    pt_tensor *dx = pt__grad(g, n->in[0]);
    if (dx) PT__BE->binary(PT__C, PT__ADD, dx, dx, n->out->grad);
}
PTDEF pt_tensor *pt_sum(pt_graph *g, pt_tensor *x) {
    pt_tensor *out;
    if (!g || !x || !pt__need_f32(g, "pt_sum", "x", x)) return NULL;
    if (!(out = pt__new(g, PT_F32, 0, NULL))) return NULL;
    PT__BE->sum(PT__C, out, x, 1.0f);
    pt__record(g, "pt_sum", out, pt__sum_bwd, 1, &x);
    return out;
}
PTDEF pt_tensor *pt_mean(pt_graph *g, pt_tensor *x) {
    if (!x) return NULL;
    if (pt_numel(x) == 0 && g) return (pt_tensor *)pt__fail(g->ctx, PT_ERR_SHAPE, "pt_mean: x %s has no elements", pt__shp(x).s);
    return pt_scale(g, pt_sum(g, x), 1.0f / (float)pt_numel(x));
}

/* ---- conv2d (im2col + GEMM), max-pool ---------------------------------------------------------
   conv i[]: N, Cin, H, W, Cout, k, stride, pad; saved[0] = the im2col matrix */
static void pt__conv2d_bwd(pt_graph *g, pt_node *n) {
    pt_tensor *x = n->in[0], *w = n->in[1], *b = n->nin > 2 ? n->in[2] : NULL, *dy = n->out->grad, *cols = n->saved[0];
    pt_tensor *dx = pt__grad(g, x), *dw = pt__grad(g, w), *db = pt__grad(g, b);
    int N = (int)n->i[0], Ci = (int)n->i[1], H = (int)n->i[2], W = (int)n->i[3], Co = (int)n->i[4], k = (int)n->i[5];
    int st = (int)n->i[6], pad = (int)n->i[7], Ho = (int)n->out->shape[2], Wo = (int)n->out->shape[3], i;
    int64_t S = (int64_t)Ho * Wo, CKK = (int64_t)Ci * k * k;
    if (db) PT__BE->chan_bias_bwd(PT__C, db, dy, N, Co, S);
    if (dw)
        for (i = 0; i < N; i++) { /* summed over images in order */
            pt_tensor yi = pt__at(dy, i * Co * S), ci = pt__at(cols, i * CKK * S);
            PT__BE->gemm(PT__C, 0, 1, 1, Co, CKK, S, 1.0f, &yi, S, 0, &ci, S, 0, 1.0f, dw, CKK, 0);
        }
    if (dx) {
        pt_tensor dc = *cols;
        dc.st = pt__pool_get(g, pt_numel(cols) * 4);
        dc.off = 0;
        if (!dc.st) return;
        PT__BE->gemm(PT__C, 1, 0, N, CKK, S, Co, 1.0f, w, CKK, 0, dy, S, Co * S, 0.0f, &dc, S, CKK * S);
        PT__BE->col2im(PT__C, dx, &dc, N, Ci, H, W, k, st, pad, Ho, Wo);
        pt__pool_put(g, dc.st);
    }
}
PTDEF pt_tensor *pt_conv2d(pt_graph *g, pt_tensor *x, pt_tensor *w, pt_tensor *b, int stride, int pad) {
    int64_t N, Ci, H, W, Co, k, Ho, Wo, s[4];
    pt_tensor *y, *cols, *ins[3];
    pt_node *n;
    if (!g || !x || !w) return NULL;
    if (!pt__need_f32(g, "pt_conv2d", "x", x) || !pt__need_f32(g, "pt_conv2d", "w", w) || (b && !pt__need_f32(g, "pt_conv2d", "b", b))) return NULL;
    if (x->ndim != 4 || w->ndim != 4 || w->shape[1] != x->shape[1] || w->shape[2] != w->shape[3])
        return (pt_tensor *)pt__fail(g->ctx, PT_ERR_SHAPE, "pt_conv2d: x %s must be [N, Cin, H, W] and w %s [Cout, Cin, k, k]", pt__shp(x).s, pt__shp(w).s);
    N = x->shape[0], Ci = x->shape[1], H = x->shape[2], W = x->shape[3], Co = w->shape[0], k = w->shape[2];
    if (b && (b->ndim != 1 || b->shape[0] != Co))
        return (pt_tensor *)pt__fail(g->ctx, PT_ERR_SHAPE, "pt_conv2d: bias %s must be [%lld]", pt__shp(b).s, (long long)Co);
    if (stride < 1 || pad < 0 || H + 2 * pad < k || W + 2 * pad < k)
        return (pt_tensor *)pt__fail(g->ctx, PT_ERR_ARG, "pt_conv2d: stride %d, pad %d and kernel %lld do not fit x %s", stride, pad, (long long)k,
                                     pt__shp(x).s);
    Ho = (H + 2 * pad - k) / stride + 1;
    Wo = (W + 2 * pad - k) / stride + 1;
    s[0] = N, s[1] = Co, s[2] = Ho, s[3] = Wo;
    y = pt__new(g, PT_F32, 4, s);
    s[0] = N, s[1] = Ci * k * k, s[2] = Ho * Wo;
    cols = pt__new(g, PT_F32, 3, s);
    if (!y || !cols) return NULL;
    PT__BE->im2col(PT__C, cols, x, (int)N, (int)Ci, (int)H, (int)W, (int)k, stride, pad, (int)Ho, (int)Wo);
    PT__BE->gemm(PT__C, 0, 0, N, Co, Ho * Wo, Ci * k * k, 1.0f, w, Ci * k * k, 0, cols, Ho * Wo, Ci * k * k * Ho * Wo, 0.0f, y, Ho * Wo,
                 Co * Ho * Wo);
    if (b) PT__BE->chan_bias_fwd(PT__C, y, b, (int)N, (int)Co, Ho * Wo);
    ins[0] = x, ins[1] = w, ins[2] = b;
    if ((n = pt__record(g, "pt_conv2d", y, pt__conv2d_bwd, b ? 3 : 2, ins)) != NULL) {
        n->saved[0] = cols;
        n->i[0] = N, n->i[1] = Ci, n->i[2] = H, n->i[3] = W, n->i[4] = Co, n->i[5] = k, n->i[6] = stride, n->i[7] = pad;
    }
    return y;
}
static void pt__maxpool_bwd(pt_graph *g, pt_node *n) {
    pt_tensor *x = n->in[0], *dx = pt__grad(g, x);
    if (dx)
        PT__BE->maxpool_bwd(PT__C, dx, n->out->grad, n->saved[0], (int)x->shape[0], (int)x->shape[1], (int)x->shape[2], (int)x->shape[3],
                            (int)n->out->shape[2], (int)n->out->shape[3]);
}
PTDEF pt_tensor *pt_maxpool2d(pt_graph *g, pt_tensor *x, int k, int stride) {
    int64_t s[4];
    pt_tensor *y, *idx;
    pt_node *n;
    if (!g || !x || !pt__need_f32(g, "pt_maxpool2d", "x", x)) return NULL;
    if (x->ndim != 4 || k < 1 || stride < 1 || x->shape[2] < k || x->shape[3] < k)
        return (pt_tensor *)pt__fail(g->ctx, PT_ERR_SHAPE, "pt_maxpool2d: x %s must be [N, C, H, W] with H, W >= k=%d (stride %d >= 1)",
                                     pt__shp(x).s, k, stride);
    s[0] = x->shape[0], s[1] = x->shape[1], s[2] = (x->shape[2] - k) / stride + 1, s[3] = (x->shape[3] - k) / stride + 1;
    y = pt__new(g, PT_F32, 4, s);
    idx = pt__new(g, PT_I32, 4, s);
    if (!y || !idx) return NULL;
    PT__BE->maxpool_fwd(PT__C, y, idx, x, (int)s[0], (int)s[1], (int)x->shape[2], (int)x->shape[3], k, stride, (int)s[2], (int)s[3]);
    if ((n = pt__record(g, "pt_maxpool2d", y, pt__maxpool_bwd, 1, &x)) != NULL) n->saved[0] = idx;
    return y;
}

// >>comm  host staging of device data for MPI, the tensor-parallel sums, the gradient norm over the grid
/* Owns: the context's host staging buffer, the TP allreduce / allgather of tensors and buffers,
   sums over a grid communicator, the global gradient sum of squares
   Invariants: on a device backend every MPI payload crosses through host staging and is counted
   (dp/tp/pp transfers); sums run in a fixed order
   Entry points: pt_tp_size pt_tp_rank pt__stage_buf pt__stage_xfer pt__tp_allreduce pt__grad_sumsq */
/* ---- host staging of device data (the MPI paths of dp, tp, pprun on a device backend) ------
   A storage has host memory (the CPU backend: MPI works on it in place) or not (a device backend:
   st->host is NULL, and data crosses to the host around each MPI call). pt__stage_xfer copies n
   floats at element offset off of st to or from host memory through the backend's read/write,
   counted as transfers of `kind` (PT_XFER_DP, _TP, _PP); pt__stage_read_start is its device-to-host
   direction without waiting (the backend's read_start: a handle for read_wait, NULL = done);
   pt__stage_buf is the context's grown-only host buffer for payloads that have no home of their own. */
static void pt__stage_xfer(pt_ctx *ctx, pt_storage *st, int64_t off, float *host, int64_t n, int d2h, int kind) {
    pt_tensor v = pt__slab_view(st, n);
    int k;
    if (n <= 0) return;
    v.off = off;
    k = pt__xfer_as(ctx, kind);
    if (d2h) ctx->be->read(ctx, &v, host, n * 4);
    else ctx->be->write(ctx, &v, host, n * 4);
    pt__xfer_as(ctx, k);
}
#ifdef PTRAIN_MPI
static void *pt__stage_read_start(pt_ctx *ctx, pt_storage *st, int64_t off, float *host, int64_t n, int kind) {
    pt_tensor v = pt__slab_view(st, n);
    void *h;
    int k;
    if (n <= 0) return NULL;
    v.off = off;
    k = pt__xfer_as(ctx, kind);
    h = ctx->be->read_start(ctx, &v, host, n * 4);
    pt__xfer_as(ctx, k);
    return h;
}
#endif
static float *pt__stage_buf(pt_ctx *ctx, int64_t n) {
    if (n > ctx->stage_cap) {
        float *p = (float *)PT_REALLOC(ctx->stage, (size_t)PT__MAX(n, 1) * sizeof(float));
        if (!p) return (float *)pt__fail(ctx, PT_ERR_OOM, "pt: out of memory for %lld floats of host staging", (long long)n);
        ctx->stage = p, ctx->stage_cap = n;
    }
    return ctx->stage;
}

PTDEF int pt_tp_size(const pt_ctx *ctx) {
    if (!ctx || !ctx->desc.dist) return 1;
    return PT__MAX(pt_dist_layout(ctx->desc.dist).tp, 1);
}
PTDEF int pt_tp_rank(const pt_ctx *ctx) {
    if (!ctx || !ctx->desc.dist) return 0;
    return PT__MAX(pt_dist_coords(ctx->desc.dist).tp, 0);
}

#define PT__TP_SUM 0
#define PT__TP_MAX 1
/* reduces n host floats at p over the TP ranks in place (how: PT__TP_SUM or PT__TP_MAX); 0 and a
   context error on failure */
static int pt__tp_allreduce_buf(pt_ctx *ctx, const char *op, float *p, int64_t n, int how) {
#ifdef PTRAIN_MPI
    MPI_Comm comm;
    void *cp;
    int64_t done = 0;
    if (pt_tp_size(ctx) <= 1 || pt__be_counts(ctx)) return 1;
    cp = pt_dist_comm(ctx->desc.dist, PT_COMM_TP);
    if (!cp) return pt__fail(ctx, PT_ERR_STATE, "%s: the grid has no TP communicator", op), 0;
    comm = *(MPI_Comm *)cp;
    while (done < n) {
        int cnt = (int)PT__MIN(n - done, (int64_t)1 << 30);
        uint64_t s = pt__coll_begin(ctx->desc.dist, PT_COLL_ALLREDUCE, PT_COMM_TP, cnt, PT_COLL_F32, -1);
        int rc = pt__coll_end(ctx->desc.dist, s,
                              s ? MPI_Allreduce(MPI_IN_PLACE, p + done, cnt, MPI_FLOAT, how == PT__TP_MAX ? MPI_MAX : MPI_SUM, comm) : PT__COLL_REFUSED);
        if (rc != MPI_SUCCESS)
            return pt__fail(ctx, PT_ERR_DEVICE, "%s: MPI_Allreduce of %lld floats over the TP communicator failed: %s", op,
                            (long long)n, pt__coll_why(ctx->desc.dist, rc)), 0;
        done += cnt;
    }
    return 1;
#else
    (void)ctx, (void)op, (void)p, (void)n, (void)how;
    return 1;
#endif
}

/* sums t (contiguous f32) over the TP ranks in place; 0 and a context error on failure. On a device
   backend t goes through the context's host staging: read, reduced, written back (PT_XFER_TP). */
static int pt__tp_allreduce(pt_ctx *ctx, const char *op, pt_tensor *t) {
    int64_t n;
    float *h;
    if (pt_tp_size(ctx) <= 1 || pt__be_counts(ctx)) return 1; /* the counting backend: nothing to sum */
    if (t->dtype != PT_F32 || !t->st)
        return pt__fail(ctx, PT_ERR_DTYPE, "%s: tensor parallelism needs f32 data, found %s", op, pt__dtname(t->dtype)), 0;
    n = pt_numel(t);
    if (t->st->host) return pt__tp_allreduce_buf(ctx, op, PT__F(t), n, PT__TP_SUM);
    if (!(h = pt__stage_buf(ctx, n))) return 0;
    pt__stage_xfer(ctx, t->st, t->off, h, n, 1, PT_XFER_TP);
    if (ctx->status != PT_OK || !pt__tp_allreduce_buf(ctx, op, h, n, PT__TP_SUM)) return 0;
    pt__stage_xfer(ctx, t->st, t->off, h, n, 0, PT_XFER_TP);
    return ctx->status == PT_OK;
}

/* full (tp * n_local host floats) holds this rank's n_local at tp_rank * n_local: gathers the other
   ranks' parts around it, in TP rank order */
static int pt__tp_allgather(pt_ctx *ctx, const char *op, float *full, int64_t n_local) {
#ifdef PTRAIN_MPI
    void *cp;
    int rc;
    if (pt_tp_size(ctx) > 1) {
        if (!(cp = pt_dist_comm(ctx->desc.dist, PT_COMM_TP))) return pt__fail(ctx, PT_ERR_STATE, "%s: the grid has no TP communicator", op), 0;
        if (n_local > INT32_MAX) return pt__fail(ctx, PT_ERR_ARG, "%s: %lld floats per rank exceed MPI's int count", op, (long long)n_local), 0;
        rc = MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, full, (int)n_local, MPI_FLOAT, *(MPI_Comm *)cp);
        if (rc != MPI_SUCCESS)
            return pt__fail(ctx, PT_ERR_DEVICE, "%s: MPI_Allgather over the TP communicator failed (MPI error %d)", op, rc), 0;
        return 1;
    }
#endif
    (void)ctx, (void)op, (void)full, (void)n_local;
    return 1;
}

#ifdef PTRAIN_MPI
/* sums one double over a communicator of the context's grid (recorded); 0 and an error on failure */
static int pt__sum_f64(pt_ctx *ctx, int comm, double *x, const char *what) {
    const pt_dist *d = ctx->desc.dist;
    uint64_t s = pt__coll_begin(d, PT_COLL_ALLREDUCE, comm, 1, PT_COLL_F64, -1);
    int rc = pt__coll_end(d, s, s ? MPI_Allreduce(MPI_IN_PLACE, x, 1, MPI_DOUBLE, MPI_SUM, *(MPI_Comm *)pt_dist_comm(d, comm)) : PT__COLL_REFUSED);
    if (rc != MPI_SUCCESS) return pt__fail(ctx, PT_ERR_DEVICE, "%s: MPI_Allreduce over the %s communicator failed: %s", what, pt__coll_comm_name(comm), pt__coll_why(d, rc)), 0;
    return 1;
}
#endif

/* Sum of squares of all parameter gradients of the model, for clipping and monitoring. Without
   tensor parallelism: the whole gradient slab in one fixed-order kernel call. With it: the shards
   of split parameters are summed over the TP ranks, replicated parameters (identical on every TP
   rank) are counted once; parameters are visited in slab order, so the result is deterministic. */
static double pt__grad_sumsq(pt_ctx *ctx) {
    /* local partial sums over the gradient range this rank holds reduced (ZeRO: its DP shard):
       [0] TP-split parameters, [1] the rest (replicated over TP); then the reductions */
    pt_tensor gs = pt_grad_slab(ctx);
    const pt_dist *d = ctx->desc.dist;
    double part[2] = {0.0, 0.0};
    int64_t lo, hi;
    int i, dpshard, tp = pt_tp_size(ctx), pp = d ? pt_dist_layout(d).pp : 1, tied = 0;
    lo = 0, hi = ctx->slab_n;
    dpshard = ctx->grad_range ? ctx->grad_range(ctx, &lo, &hi) : 0;
    for (i = 0; i < ctx->nparams; i++) tied |= (ctx->params[i]->spec.flags & PT_PARAM_TIED_COPY) != 0;
    if (tp <= 1 && !tied) {
        gs.off = lo;
        part[1] = ctx->be->sumsq(ctx, &gs, hi - lo);
    } else {
        for (i = 0; i < ctx->nparams; i++) {
            pt_param *p = ctx->params[i];
            pt_tensor t = gs;
            int64_t a = PT__MAX(lo, p->slab_off), e = PT__MIN(hi, p->slab_off + pt_numel(&p->grad));
            if (e <= a || (p->spec.flags & PT_PARAM_TIED_COPY)) continue; /* a tied copy: the original elsewhere counts */
            t.off = a;
            part[p->spec.split_dim >= 0 && p->spec.split_parts > 1 ? 0 : 1] += ctx->be->sumsq(ctx, &t, e - a);
        }
    }
    if (dpshard && ctx->dp_sum) ctx->dp_sum(ctx, part, 2); /* ZeRO: the shards together are the whole gradient */
    (void)pp;
#ifdef PTRAIN_MPI
    if (tp > 1) pt__sum_f64(ctx, PT_COMM_TP, &part[0], "pt_grad_norm");
    if (pp > 1) { /* the stages hold disjoint parameters: sum over the pipeline */
        part[0] += part[1], part[1] = 0.0;
        pt__sum_f64(ctx, PT_COMM_PP, &part[0], "pt_grad_norm");
    }
#endif
    return part[0] + part[1];
}

// >>optim  SGD with momentum, AdamW, clipping, learning-rate schedules
/* Owns: pt_optim and its state slabs (whole, or a ZeRO range of them)
   Invariants: the state is laid out like the parameter slab; one kernel call updates a run of
   parameters sharing a weight decay
   Entry points: pt_optim_new pt_optim_step pt_grad_norm pt_lr_at pt_optim_free */
/* SGD with momentum, AdamW, clipping, learning-rate schedules
   The optimizer's state lives in slabs laid out like the parameter slab, so one kernel call
   updates a run of parameters that share a weight decay; padding between parameters stays 0. */

typedef struct pt__run {
    int64_t off, n;
    float wd;
} pt__run;

struct pt_optim {
    pt_ctx *ctx;
    pt_optim *prev, *next; /* the context's list */
    pt_optim_desc d;
    pt_storage m, v; /* AdamW moments, or SGD momentum in m */
    pt__run *runs;
    int nruns;
    int64_t steps;
    /* ZeRO-1/2 (dp, pt_dp_zero): m and v hold only the slab range [zlo, zhi) (element zlo at state
       offset 0) and pt_optim_step updates only that range; [0, slab_n) when not sharded. After the
       update post_step (the DP allgather of the parameter slab) runs, if set. */
    int64_t zlo, zhi;
    pt_status (*post_step)(void *user);
    void *post_user;
};


PTDEF float pt_grad_norm(pt_ctx *ctx) {
    if (!ctx || !ctx->gslab) return 0.0f;
    return (float)sqrt(pt__grad_sumsq(ctx));
}

static void pt__optim_free_all(pt_ctx *ctx) {
    while (ctx->optims) pt_optim_free(ctx->optims);
}
PTDEF pt_optim *pt_optim_new(pt_ctx *ctx, const pt_optim_desc *desc) {
    pt_optim *o;
    int i;
    if (!ctx) return NULL;
    if (!desc || (desc->kind != PT_OPTIM_SGD && desc->kind != PT_OPTIM_ADAMW))
        return (pt_optim *)pt__fail(ctx, PT_ERR_ARG, "pt_optim_new: unknown optimizer kind %d (expected PT_OPTIM_SGD or PT_OPTIM_ADAMW)",
                                    desc ? (int)desc->kind : -1);
    if (desc->lr < 0 || desc->weight_decay < 0 || desc->clip_norm < 0 || desc->momentum < 0 || desc->momentum >= 1 || desc->beta1 < 0 ||
        desc->beta1 >= 1 || desc->beta2 < 0 || desc->beta2 >= 1)
        return (pt_optim *)pt__fail(ctx, PT_ERR_ARG, "pt_optim_new: lr %g, weight_decay %g, clip %g must be >= 0; momentum %g, betas %g/%g in [0, 1)",
                                    (double)desc->lr, (double)desc->weight_decay, (double)desc->clip_norm, (double)desc->momentum,
                                    (double)desc->beta1, (double)desc->beta2);
    if (!ctx->nparams) return (pt_optim *)pt__fail(ctx, PT_ERR_STATE, "pt_optim_new: the context has no parameters yet");
    o = (pt_optim *)pt__malloc(ctx, sizeof *o);
    if (!o) return (pt_optim *)pt__fail(ctx, PT_ERR_OOM, "pt_optim_new: out of memory");
    memset(o, 0, sizeof *o);
    o->ctx = ctx;
    o->d = *desc;
    o->zlo = 0, o->zhi = ctx->slab_n;
    if (o->d.kind == PT_OPTIM_ADAMW) {
        if (o->d.beta1 == 0) o->d.beta1 = 0.9f;
        if (o->d.beta2 == 0) o->d.beta2 = 0.95f;
        if (o->d.eps == 0) o->d.eps = 1e-8f;
    }
    o->runs = (pt__run *)pt__malloc(ctx, (size_t)ctx->nparams * sizeof *o->runs);
    if (!o->runs || pt__st_alloc(ctx, &o->m, ctx->slab_n * 4, PT__MEM_OPTIM) != PT_OK ||
        (o->d.kind == PT_OPTIM_ADAMW && pt__st_alloc(ctx, &o->v, ctx->slab_n * 4, PT__MEM_OPTIM) != PT_OK)) {
        pt_optim_free(o);
        return (pt_optim *)pt__fail(ctx, PT_ERR_OOM, "pt_optim_new: out of memory for the optimizer state (%lld floats)", (long long)ctx->slab_n);
    }
    {
        pt_tensor t = pt__slab_view(&o->m, ctx->slab_n);
        ctx->be->fill(ctx, &t, 0.0f);
        if (o->v.host || o->v.dev) {
            t.st = &o->v;
            ctx->be->fill(ctx, &t, 0.0f);
        }
    }
    /* runs of slab-consecutive parameters with equal weight decay (frozen ones are skipped) */
    for (i = 0; i < ctx->nparams; i++) {
        pt_param *p = ctx->params[i];
        float wd = (p->spec.flags & PT_PARAM_NO_DECAY) ? 0.0f : o->d.weight_decay;
        int64_t end = i + 1 < ctx->nparams ? ctx->params[i + 1]->slab_off : ctx->slab_n;
        if (p->spec.flags & PT_PARAM_FROZEN) continue;
        if (o->nruns && o->runs[o->nruns - 1].wd == wd && o->runs[o->nruns - 1].off + o->runs[o->nruns - 1].n == p->slab_off)
            o->runs[o->nruns - 1].n = end - o->runs[o->nruns - 1].off;
        else {
            o->runs[o->nruns].off = p->slab_off;
            o->runs[o->nruns].n = end - p->slab_off;
            o->runs[o->nruns].wd = wd;
            o->nruns++;
        }
    }
    ctx->optim_frozen = 1;
    pt_state_register(ctx, "optim.steps", &o->steps, sizeof o->steps);
    o->next = ctx->optims;
    if (ctx->optims) ctx->optims->prev = o;
    ctx->optims = o;
    pt__at_shutdown(ctx, pt__optim_free_all);
    return o;
}
PTDEF void pt_optim_free(pt_optim *o) {
    if (!o) return;
    if (o->prev) o->prev->next = o->next;
    else if (o->ctx->optims == o) o->ctx->optims = o->next;
    if (o->next) o->next->prev = o->prev;
    pt__st_free(o->ctx, &o->m);
    pt__st_free(o->ctx, &o->v);
    pt__state_unregister(o->ctx, &o->steps);
    PT_FREE(o->runs);
    PT_FREE(o);
}
PTDEF int64_t pt_optim_steps(const pt_optim *o) { return o ? o->steps : 0; }
PTDEF int64_t pt_optim_state_bytes(const pt_optim *o) {
    if (!o) return 0;
    return ((o->m.raw || o->m.dev) ? o->m.bytes : 0) + ((o->v.raw || o->v.dev) ? o->v.bytes : 0);
}

/* Re-shards the optimizer state to the slab range [lo, hi) (ZeRO-1; [0, slab_n) = unsharded): new
   zeroed slabs of hi - lo floats; the part of the old range that overlaps the new one is copied
   (on a device backend by a device copy). The old slabs are freed, so the memory
   accounting (pt_mem_stats optim) drops to the shard. Does not touch the parameters. */
static pt_status pt__optim_reshard(pt_optim *o, int64_t lo, int64_t hi) {
    pt_ctx *ctx = o->ctx;
    pt_storage nm, nv;
    int64_t n = hi - lo, clo = PT__MAX(lo, o->zlo), chi = PT__MIN(hi, o->zhi);
    int adam = o->d.kind == PT_OPTIM_ADAMW, k;
    if (lo < 0 || hi > ctx->slab_n || lo > hi)
        return (pt_status)(pt__fail(ctx, PT_ERR_ARG, "pt_optim: shard [%lld, %lld) outside the slab of %lld", (long long)lo, (long long)hi,
                                    (long long)ctx->slab_n), PT_ERR_ARG);
    if (lo == o->zlo && hi == o->zhi) return PT_OK;
    memset(&nm, 0, sizeof nm);
    memset(&nv, 0, sizeof nv);
    if (n > 0 && (pt__st_alloc(ctx, &nm, n * 4, PT__MEM_OPTIM) != PT_OK ||
                  (adam && pt__st_alloc(ctx, &nv, n * 4, PT__MEM_OPTIM) != PT_OK))) {
        pt__st_free(ctx, &nm);
        pt__st_free(ctx, &nv);
        return (pt_status)(pt__fail(ctx, PT_ERR_OOM, "pt_optim: out of memory for the state shard (%lld floats)", (long long)n), PT_ERR_OOM);
    }
    for (k = 0; k < 2 && n > 0; k++) {
        pt_storage *ns = k ? &nv : &nm, *os = k ? &o->v : &o->m;
        pt_tensor t;
        if (!ns->raw && !ns->dev) continue;
        t = pt__slab_view(ns, n);
        ctx->be->fill(ctx, &t, 0.0f);
        if (o->steps > 0 && chi > clo) {
            if (ns->host && os->host) {
                memcpy((float *)ns->host + (clo - lo), (const float *)os->host + (clo - o->zlo), (size_t)(chi - clo) * 4);
            } else { /* a device backend: copied on the device (no host round trip) */
                pt_tensor src = pt__slab_view(os, chi - clo), dst = pt__slab_view(ns, chi - clo);
                src.off = clo - o->zlo, dst.off = clo - lo;
                ctx->be->copy(ctx, &dst, &src, 0);
            }
        }
    }
    pt__st_free(ctx, &o->m);
    pt__st_free(ctx, &o->v);
    o->m = nm, o->v = nv;
    o->zlo = lo, o->zhi = hi;
    return PT_OK;
}

PTDEF float pt_optim_step(pt_optim *o, float lr) {
    pt_ctx *ctx;
    float norm, gscale = 1.0f;
    int r;
    if (!o) return NAN;
    ctx = o->ctx;
    norm = pt_grad_norm(ctx);
    if (o->d.clip_norm > 0 && norm > o->d.clip_norm) gscale = o->d.clip_norm / (norm + 1e-6f);
    o->steps++;
    /* ZeRO: the norm above is the global one (pt__grad_sumsq sums the DP shards' squares); only the
       runs' parts inside [zlo, zhi) are updated */
    for (r = 0; r < o->nruns; r++) {
        pt__run *u = &o->runs[r];
        int64_t lo = PT__MAX(u->off, o->zlo), hi = PT__MIN(u->off + u->n, o->zhi), n = hi - lo;
        pt_tensor p, g, m, v;
        if (n <= 0) continue;
        p = pt__slab_view(ctx->pslab, n), g = pt__slab_view(ctx->gslab, n), m = pt__slab_view(&o->m, n), v = pt__slab_view(&o->v, n);
        p.off = g.off = lo;
        m.off = v.off = lo - o->zlo;
        if (o->d.kind == PT_OPTIM_ADAMW) {
            float bc1 = 1.0f - powf(o->d.beta1, (float)o->steps), bc2 = 1.0f - powf(o->d.beta2, (float)o->steps);
            ctx->be->adamw(ctx, &p, &g, &m, &v, n, lr, o->d.beta1, o->d.beta2, o->d.eps, u->wd, bc1, bc2, gscale);
        } else {
            ctx->be->sgd(ctx, &p, &g, o->d.momentum > 0 ? &m : NULL, n, lr, o->d.momentum, u->wd, gscale);
        }
    }
    if (o->post_step && o->post_step(o->post_user) != PT_OK) return NAN;
    return norm;
}

PTDEF float pt_lr_at(const pt_lr_schedule *s, int64_t step) {
    double p;
    if (!s) return 0.0f;
    if (step < s->warmup) return s->lr * (float)(step + 1) / (float)s->warmup;
    if (s->kind == PT_LR_CONST || s->total <= s->warmup) return s->kind == PT_LR_CONST ? s->lr : s->min_lr;
    p = (double)(step - s->warmup) / (double)(s->total - s->warmup);
    if (p > 1) p = 1;
    if (s->kind == PT_LR_COSINE) return (float)(s->min_lr + 0.5 * (1.0 + cos(3.14159265358979323846 * p)) * (s->lr - s->min_lr));
    return (float)(s->lr - (s->lr - s->min_lr) * p);
}

// >>nn  layers: linear and MLP
/* Owns: pt_linear_layer and pt_mlp
   Invariants: layers only create parameters and call ops
   Entry points: pt_linear_new pt_linear_fwd pt_mlp_new pt_mlp_fwd */
/* layers and the GPT */
PTDEF pt_linear_layer pt_linear_new(pt_ctx *ctx, const char *name, int64_t in, int64_t out, int bias, float std) {
    pt_linear_layer l;
    l.w = pt__param2(ctx, name, ".w", 2, out, in, PT_INIT_NORMAL, std, 0);
    l.b = bias ? pt__param2(ctx, name, ".b", 1, out, 1, PT_INIT_ZEROS, 0, PT_PARAM_NO_DECAY) : NULL;
    return l;
}
PTDEF pt_tensor *pt_linear_fwd(pt_graph *g, const pt_linear_layer *l, pt_tensor *x) { return pt_linear(g, x, l->w, l->b); }

PTDEF pt_mlp pt_mlp_new(pt_ctx *ctx, const char *name, int64_t in, int64_t hidden, int64_t out, int gelu, float std) {
    pt_mlp m;
    char n[96];
    snprintf(n, sizeof n, "%s.fc", name);
    m.fc = pt_linear_new(ctx, n, in, hidden, 1, std);
    snprintf(n, sizeof n, "%s.proj", name);
    m.proj = pt_linear_new(ctx, n, hidden, out, 1, std);
    m.gelu = gelu;
    return m;
}
PTDEF pt_tensor *pt_mlp_fwd(pt_graph *g, const pt_mlp *m, pt_tensor *x) {
    pt_tensor *h = pt_linear_fwd(g, &m->fc, x);
    h = m->gelu ? pt_gelu(g, h) : pt_relu(g, h);
    return pt_linear_fwd(g, &m->proj, h);
}

// >>tp  tensor parallelism
/* Owns: every tensor-parallel piece of the model: pt_tp_copy / pt_tp_reduce, the parallel linears,
   the TP block and attention, the vocabulary-parallel cross-entropy
   Invariants: with TP size 1 (or no grid) every piece is the serial one; shards are slices of the
   unsplit parameters
   Entry points: pt_tp_copy pt_tp_reduce pt_linear_col_new pt_linear_row_new pt_mlp_tp_new
   pt_cross_entropy_vp */
/* =================================================================================================
   tensor parallelism: the conjugate ops f (pt_tp_copy) and g (pt_tp_reduce), parallel linears
   =================================================================================================
   f's forward is a view of its input (no copy, like pt_reshape); its backward sums the output's
   gradient over the TP communicator in place (the gradient buffer is the node's own, returned to the
   pool right after) and accumulates it into the input's. g's forward copies its input into a new
   tensor and sums that in place; its backward accumulates the gradient unchanged. The sums are one
   MPI_Allreduce (MPI_SUM, MPI_FLOAT) over host memory, cut into chunks of at most 2^30 elements for
   MPI's int counts; the TP communicator has MPI_ERRORS_RETURN, so a failing call becomes a
   PT_ERR_DEVICE error of the context. On a device backend the tensor is read to host staging,
   reduced and written back (PT_XFER_TP); the vocabulary-parallel cross-entropy's row statistics and
   pt_gpt_generate's gathered row cross the same way. With TP size 1 (or no grid, or no PTRAIN_MPI) nothing is
   communicated and both ops are identities. pt__tp_allreduce_buf also reduces with MPI_MAX (the
   vocabulary-parallel cross-entropy in ops), pt__tp_allgather gathers in place (pt_gpt_generate).
   The transformer block under TP (pt__block_tp_new, pt__attn_tp_fwd) is at the end of this section. */

/* ---- f: identity forward, allreduce backward ---------------------------------------------------- */
static void pt__tp_copy_bwd(pt_graph *g, pt_node *n) {
    pt_tensor *dy = n->out->grad, *dx = pt__grad(g, n->in[0]);
    if (!dx) return;
    if (!pt__tp_allreduce(PT__C, "pt_tp_copy (backward)", dy)) return;
    PT__BE->copy(PT__C, dx, dy, 1);
}
PTDEF pt_tensor *pt_tp_copy(pt_graph *g, pt_tensor *x) {
    pt_tensor *out;
    if (!g || !x || !pt__need_f32(g, "pt_tp_copy", "x", x)) return NULL;
    if (!(out = pt__view(g, "pt_tp_copy", x, x->ndim, x->shape))) return NULL;
    if (out->node) out->node->backward = pt__tp_copy_bwd; /* the gradient is summed over TP first */
    return out;
}

/* ---- g: allreduce forward, identity backward ------------------------------------------------- */
PTDEF pt_tensor *pt_tp_reduce(pt_graph *g, pt_tensor *x) {
    pt_tensor *out;
    pt_node *n;
    if (!g || !x || !pt__need_f32(g, "pt_tp_reduce", "x", x)) return NULL;
    if (!(out = pt__new(g, PT_F32, x->ndim, x->shape))) return NULL;
    PT__BE->copy(PT__C, out, x, 0);
    if (!pt__tp_allreduce(PT__C, "pt_tp_reduce", out)) return NULL;
    if ((n = pt__record(g, "pt_tp_reduce", out, pt__copyback_bwd, 1, &x)) != NULL) n->flags |= PT__NODE_OUT_FREE;
    return out;
}

/* ---- parallel linear layers ------------------------------------------------------------------- */
/* "<base><suffix>" of global shape [d0(, d1)], split on split_dim (-1 = replicated) over tp parts, each
   of `groups` blocks of that dim separately when groups > 1 (pt_spec.split_groups) */
static pt_tensor *pt__tp_param(pt_ctx *ctx, const char *base, const char *suffix, int ndim, int64_t d0, int64_t d1, pt_init_kind init,
                               float scale, uint32_t flags, int split_dim, int groups) {
    pt_spec s;
    memset(&s, 0, sizeof s);
    snprintf(s.name, sizeof s.name, "%s%s", base, suffix);
    s.ndim = ndim;
    s.global_shape[0] = d0;
    s.global_shape[1] = ndim > 1 ? d1 : 1;
    s.global_shape[2] = s.global_shape[3] = 1;
    s.split_dim = split_dim;
    s.split_parts = split_dim >= 0 ? pt_tp_size(ctx) : 1;
    s.split_index = split_dim >= 0 ? pt_tp_rank(ctx) : 0;
    s.split_groups = split_dim >= 0 ? groups : 0;
    s.stage = -1;
    s.init = init;
    s.init_scale = scale;
    s.flags = flags;
    return pt_param_from_spec(ctx, &s);
}
/* 1 if n splits evenly over the TP size, else 0 and an error naming the dimension */
static int pt__tp_even(pt_ctx *ctx, const char *fn, const char *what, int64_t n) {
    int tp = pt_tp_size(ctx);
    if (n > 0 && n % tp == 0) return 1;
    pt__fail(ctx, PT_ERR_SHAPE, "%s: %s=%lld does not split evenly over tp=%d", fn, what, (long long)n, tp);
    return 0;
}
/* column-parallel linear whose out rows are `groups` fused blocks (q|k|v: 3), each split over TP */
static pt_linear_layer pt__linear_col(pt_ctx *ctx, const char *fn, const char *name, int64_t in, int64_t out, int groups, int bias,
                                      float std) {
    pt_linear_layer l;
    l.w = l.b = NULL;
    if (!ctx) return l;
    if (!name) return pt__fail(ctx, PT_ERR_ARG, "%s: name is NULL", fn), l;
    if (out % groups) return pt__fail(ctx, PT_ERR_SHAPE, "%s: out=%lld is not %d equal blocks", fn, (long long)out, groups), l;
    if (!pt__tp_even(ctx, fn, groups > 1 ? "out/groups" : "out", out / groups)) return l;
    l.w = pt__tp_param(ctx, name, ".w", 2, out, in, PT_INIT_NORMAL, std, 0, 0, groups);
    if (l.w && bias) l.b = pt__tp_param(ctx, name, ".b", 1, out, 1, PT_INIT_ZEROS, 0, PT_PARAM_NO_DECAY, 0, groups);
    if (bias && !l.b) l.w = NULL;
    return l;
}
PTDEF pt_linear_layer pt_linear_col_new(pt_ctx *ctx, const char *name, int64_t in, int64_t out, int bias, float std) {
    return pt__linear_col(ctx, "pt_linear_col_new", name, in, out, 1, bias, std);
}
PTDEF pt_tensor *pt_linear_col_fwd(pt_graph *g, const pt_linear_layer *l, pt_tensor *x) {
    if (!g || !l || !x) return NULL;
    return pt_linear(g, pt_tp_copy(g, x), l->w, l->b);
}
PTDEF pt_linear_layer pt_linear_row_new(pt_ctx *ctx, const char *name, int64_t in, int64_t out, int bias, float std) {
    pt_linear_layer l;
    l.w = l.b = NULL;
    if (!ctx) return l;
    if (!name) return pt__fail(ctx, PT_ERR_ARG, "pt_linear_row_new: name is NULL"), l;
    if (!pt__tp_even(ctx, "pt_linear_row_new", "in", in)) return l;
    l.w = pt__tp_param(ctx, name, ".w", 2, out, in, PT_INIT_NORMAL, std, 0, 1, 1);
    if (l.w && bias) l.b = pt__tp_param(ctx, name, ".b", 1, out, 1, PT_INIT_ZEROS, 0, PT_PARAM_NO_DECAY, -1, 1);
    if (bias && !l.b) l.w = NULL;
    return l;
}
PTDEF pt_tensor *pt_linear_row_fwd(pt_graph *g, const pt_linear_layer *l, pt_tensor *x_local) {
    pt_tensor *y;
    if (!g || !l || !x_local) return NULL;
    y = pt_tp_reduce(g, pt_linear(g, x_local, l->w, NULL));
    return l->b ? pt_bias_add(g, y, l->b) : y;
}

PTDEF pt_mlp pt_mlp_tp_new(pt_ctx *ctx, const char *name, int64_t in, int64_t hidden, int64_t out, int gelu, float std) {
    pt_mlp m;
    char n[96];
    memset(&m, 0, sizeof m);
    m.gelu = gelu;
    if (!ctx) return m;
    if (!name) return pt__fail(ctx, PT_ERR_ARG, "pt_mlp_tp_new: name is NULL"), m;
    if (!pt__tp_even(ctx, "pt_mlp_tp_new", "hidden", hidden)) return m;
    snprintf(n, sizeof n, "%s.fc", name);
    m.fc = pt_linear_col_new(ctx, n, in, hidden, 1, std);
    snprintf(n, sizeof n, "%s.proj", name);
    if (m.fc.w) m.proj = pt_linear_row_new(ctx, n, hidden, out, 1, std);
    return m;
}
PTDEF pt_tensor *pt_mlp_tp_fwd(pt_graph *g, const pt_mlp *m, pt_tensor *x) {
    pt_tensor *h;
    if (!g || !m || !x) return NULL;
    h = pt_linear_col_fwd(g, &m->fc, x);
    h = m->gelu ? pt_gelu(g, h) : pt_relu(g, h);
    return pt_linear_row_fwd(g, &m->proj, h);
}

/* ---- the tensor-parallel transformer block (pt_block_new / pt_block_fwd when tp > 1) ----------
   qkv: column-parallel, its 3C rows split as 3 groups, so rank r holds q_r|k_r|v_r (heads
   [r*H/tp, (r+1)*H/tp) of each), exactly the packed layout pt_attention expects for H/tp heads of
   the same size; attn_proj: row-parallel over those C/tp attention outputs; the MLP: pt_mlp_tp.
   Norms, the row-parallel biases and the residual stream are replicated, so dropout (keyed by global
   positions) draws the same mask as one process. */
static pt_block pt__block_tp_new(pt_ctx *ctx, const char *name, int64_t C, float std, float pstd) {
    pt_block b;
    char n[96];
    memset(&b, 0, sizeof b);
    if (!pt__tp_even(ctx, "pt_block_new", "width", C)) return b;
    b.ln1_w = pt__param2(ctx, name, ".ln1.w", 1, C, 1, PT_INIT_ONES, 0, PT_PARAM_NO_DECAY);
    b.ln1_b = pt__param2(ctx, name, ".ln1.b", 1, C, 1, PT_INIT_ZEROS, 0, PT_PARAM_NO_DECAY);
    snprintf(n, sizeof n, "%s.attn", name);
    b.attn = pt__linear_col(ctx, "pt_block_new", n, C, 3 * C, 3, 1, std);
    snprintf(n, sizeof n, "%s.attn_proj", name);
    b.attn_proj = pt_linear_row_new(ctx, n, C, C, 1, pstd);
    b.ln2_w = pt__param2(ctx, name, ".ln2.w", 1, C, 1, PT_INIT_ONES, 0, PT_PARAM_NO_DECAY);
    b.ln2_b = pt__param2(ctx, name, ".ln2.b", 1, C, 1, PT_INIT_ZEROS, 0, PT_PARAM_NO_DECAY);
    snprintf(n, sizeof n, "%s.mlp.fc", name);
    b.mlp.fc = pt_linear_col_new(ctx, n, C, 4 * C, 1, std);
    snprintf(n, sizeof n, "%s.mlp.proj", name);
    b.mlp.proj = pt_linear_row_new(ctx, n, 4 * C, C, 1, pstd);
    b.mlp.gelu = 1;
    return b;
}
/* the attention half: pt_tp_copy before the qkv linear, one allreduce in attn_proj */
static pt_tensor *pt__attn_tp_fwd(pt_graph *g, const pt_block *b, pt_tensor *h, int n_head) {
    int tp = pt_tp_size(g->ctx);
    if (n_head < 1 || n_head % tp)
        return (pt_tensor *)pt__fail(g->ctx, PT_ERR_SHAPE, "pt_block_fwd: heads=%d does not split evenly over tp=%d", n_head, tp);
    h = pt_linear_col_fwd(g, &b->attn, h);
    h = pt_attention(g, h, n_head / tp);
    return pt_linear_row_fwd(g, &b->attn_proj, h);
}

/* ---- vocabulary-parallel cross-entropy ----------------------------------------------------------
   Rank k holds columns [off_k, off_k + V/tp) of the logits; nloc of them are valid (global index <
   nvalid). Per row r: lse_k = logsumexp of the local valid columns (the xent kernel; -inf when
   nloc = 0), M = allreduce MAX of lse_k, S = allreduce SUM of exp(lse_k - M), so
   lse = M + log S = logsumexp of the whole row (stable: every term <= 1, the largest is 1). The target
   logit x_t and a "held" flag come from the rank holding column t (allreduce SUM); loss_r = lse - x_t.
   The backward needs only the global lse: dlogits_local = g * (exp(x - lse) - onehot_local), the
   pt_cross_entropy_ex kernel with local targets (-2 = held elsewhere: no one-hot) and nvalid = nloc. */
static void pt__xent_vp_bwd(pt_graph *g, pt_node *n) {
    if (n->i[1] > 0) pt__xent_bwd(g, n);
    else pt__grad(g, n->in[0]); /* no valid column on this rank: a zero gradient (the backward goes on) */
}
PTDEF pt_tensor *pt_cross_entropy_vp(pt_graph *g, pt_tensor *logits_local, pt_tensor *targets, int64_t vocab_offset, int64_t nvalid) {
    static const char *op = "pt_cross_entropy_vp";
    int64_t rows, Vl, nloc, count = 0, i;
    int32_t *tg, *tl;
    float *ls, *mx, *red;
    pt_tensor *lse, *lrows, *tloc, *out, *ins[2];
    pt_node *n;
    int xk;
    if (!g || !logits_local || !targets) return NULL;
    if (!pt__xent_shape(g, op, logits_local, targets)) return NULL;
    Vl = pt__last(logits_local);
    rows = pt__rows(logits_local);
    if (nvalid < 1 || vocab_offset < 0)
        return (pt_tensor *)pt__fail(g->ctx, PT_ERR_ARG, "%s: nvalid %lld must be >= 1 and vocab_offset %lld >= 0 (logits_local %s)", op,
                                     (long long)nvalid, (long long)vocab_offset, pt__shp(logits_local).s);
    /* scratch: targets, local targets (rows each), local lse, M, S | x_t | held (3 rows), in words */
    if (!(tg = pt__xent_targets(g, op, targets, rows, -1, nvalid, 6 * rows, &count))) return NULL;
    tl = tg + rows, ls = (float *)(tl + rows), mx = ls + rows, red = mx + rows;
    nloc = PT__MAX((int64_t)0, PT__MIN(nvalid - vocab_offset, Vl));
    for (i = 0; i < rows; i++) tl[i] = tg[i] == -1 ? -1 : tg[i] >= vocab_offset && tg[i] - vocab_offset < nloc ? (int32_t)(tg[i] - vocab_offset) : -2;
    lse = pt__new(g, PT_F32, 1, &rows);
    lrows = pt__new(g, PT_F32, 1, &rows);
    tloc = pt__new(g, PT_I32, targets->ndim, targets->shape);
    out = pt__new(g, PT_F32, 0, NULL);
    if (!lse || !lrows || !tloc || !out) return NULL;
    xk = pt__xfer_as(g->ctx, PT_XFER_TP); /* a device backend: the row statistics cross to the host for the TP reductions */
    PT__BE->write(PT__C, tloc, tl, rows * 4);
    if (nloc > 0) {
        PT__BE->xent_fwd(PT__C, lrows, lse, logits_local, tloc, -1, nloc);
        PT__BE->read(PT__C, lse, ls, rows * 4);
    } else
        for (i = 0; i < rows; i++) ls[i] = -INFINITY;
    memcpy(mx, ls, (size_t)rows * sizeof(float));
    if (!pt__tp_allreduce_buf(PT__C, op, mx, rows, PT__TP_MAX)) return pt__xfer_as(g->ctx, xk), (pt_tensor *)NULL;
    for (i = 0; i < rows; i++) {
        red[i] = nloc > 0 ? (float)exp((double)ls[i] - (double)mx[i]) : 0.0f;
        red[rows + i] = red[2 * rows + i] = 0.0f;
        if (tl[i] >= 0) {
            pt_tensor xt = pt__at(logits_local, i * Vl + tl[i]);
            PT__BE->read(PT__C, &xt, &red[rows + i], 4);
            red[2 * rows + i] = 1.0f;
        }
    }
    if (!pt__tp_allreduce_buf(PT__C, op, red, 3 * rows, PT__TP_SUM)) return pt__xfer_as(g->ctx, xk), (pt_tensor *)NULL;
    pt__xfer_as(g->ctx, xk);
    for (i = 0; i < rows; i++) { /* the same on every TP rank: every input of this loop is reduced */
        double l = (double)mx[i] + log((double)red[i]);
        if (tg[i] != -1 && (!(mx[i] > -INFINITY) || red[2 * rows + i] != 1.0f))
            return (pt_tensor *)pt__fail(g->ctx, PT_ERR_ARG, "%s: row %lld: target %d is held by %g TP ranks (expected 1; vocab_offset %lld + %lld "
                                         "columns on this rank, nvalid %lld)", op, (long long)i, (int)tg[i], (double)red[2 * rows + i],
                                         (long long)vocab_offset, (long long)Vl, (long long)nvalid);
        ls[i] = (float)l;
        mx[i] = tg[i] == -1 ? 0.0f : (float)(l - (double)red[rows + i]); /* the row's loss */
    }
    xk = pt__xfer_as(g->ctx, PT_XFER_TP);
    PT__BE->write(PT__C, lse, ls, rows * 4);
    PT__BE->write(PT__C, lrows, mx, rows * 4);
    pt__xfer_as(g->ctx, xk);
    PT__BE->sum(PT__C, out, lrows, count ? 1.0f / (float)count : 0.0f);
    ins[0] = logits_local, ins[1] = tloc;
    if ((n = pt__record(g, op, out, pt__xent_vp_bwd, 2, ins)) != NULL) {
        n->saved[0] = lse;
        n->i[0] = -1;
        n->i[1] = nloc;
        n->f[0] = count ? 1.0f / (float)count : 0.0f;
    }
    return out;
}

// >>gpt  the transformer block and the GPT: constructors, stages, loss, generation
/* Owns: pt_block and pt_gpt (also split into pipeline stages), their forward, loss, FLOP counts and
   sampling
   Invariants: the same model on every layout: tp > 1 swaps in the pieces of the tp section
   Entry points: pt_gpt_new pt_gpt_new_stages pt_gpt_loss pt_gpt_stage_fwd pt_gpt_generate
   pt_gpt_flops pt_block_new */
/* first vocabulary id of this rank's logits columns / token-table rows (0 without TP) */
static int64_t pt__gpt_vocab_offset(const pt_gpt *m) {
    return (int64_t)pt_tp_rank(m->ctx) * (m->cfg.vocab_padded / pt_tp_size(m->ctx));
}

PTDEF pt_block pt_block_new(pt_ctx *ctx, const char *name, int64_t C, int n_layer_total) {
    pt_block b;
    char n[96];
    float std = 0.02f, pstd = 0.02f / sqrtf(2.0f * (float)PT__MAX(n_layer_total, 1));
    if (pt_tp_size(ctx) > 1) return pt__block_tp_new(ctx, name, C, std, pstd);
    b.ln1_w = pt__param2(ctx, name, ".ln1.w", 1, C, 1, PT_INIT_ONES, 0, PT_PARAM_NO_DECAY);
    b.ln1_b = pt__param2(ctx, name, ".ln1.b", 1, C, 1, PT_INIT_ZEROS, 0, PT_PARAM_NO_DECAY);
    snprintf(n, sizeof n, "%s.attn", name);
    b.attn = pt_linear_new(ctx, n, C, 3 * C, 1, std);
    snprintf(n, sizeof n, "%s.attn_proj", name);
    b.attn_proj = pt_linear_new(ctx, n, C, C, 1, pstd);
    b.ln2_w = pt__param2(ctx, name, ".ln2.w", 1, C, 1, PT_INIT_ONES, 0, PT_PARAM_NO_DECAY);
    b.ln2_b = pt__param2(ctx, name, ".ln2.b", 1, C, 1, PT_INIT_ZEROS, 0, PT_PARAM_NO_DECAY);
    snprintf(n, sizeof n, "%s.mlp.fc", name);
    b.mlp.fc = pt_linear_new(ctx, n, C, 4 * C, 1, std);
    snprintf(n, sizeof n, "%s.mlp.proj", name);
    b.mlp.proj = pt_linear_new(ctx, n, 4 * C, C, 1, pstd);
    b.mlp.gelu = 1;
    return b;
}
PTDEF pt_tensor *pt_block_fwd(pt_graph *g, const pt_block *b, pt_tensor *x, int n_head, float dropout, uint64_t seed) {
    int tp = g && b ? pt_tp_size(g->ctx) : 1;
    pt_tensor *h;
    if (!g || !b || !x) return NULL;
    h = pt_layernorm(g, x, b->ln1_w, b->ln1_b, 1e-5f);
    if (tp > 1) h = pt__attn_tp_fwd(g, b, h, n_head);
    else h = pt_linear_fwd(g, &b->attn_proj, pt_attention(g, pt_linear_fwd(g, &b->attn, h), n_head));
    if (dropout > 0) h = pt_dropout(g, h, dropout, seed);
    x = pt_add(g, x, h);
    h = pt_layernorm(g, x, b->ln2_w, b->ln2_b, 1e-5f);
    h = tp > 1 ? pt_mlp_tp_fwd(g, &b->mlp, h) : pt_mlp_fwd(g, &b->mlp, h);
    if (dropout > 0) h = pt_dropout(g, h, dropout, seed + 1);
    return pt_add(g, x, h);
}

PTDEF pt_gpt *pt_gpt_new(pt_ctx *ctx, const pt_gpt_config *cfg) { return pt_gpt_new_stages(ctx, cfg, 1, NULL, 0, NULL); }
PTDEF pt_gpt *pt_gpt_new_stages(pt_ctx *ctx, const pt_gpt_config *cfg, int nstages, const int32_t *first, int nmine,
                                const int32_t *mine) {
    pt_gpt *m;
    int l, s, head, embed, tp, vp;
    if (!ctx) return NULL;
    if (!cfg || cfg->vocab < 1 || cfg->max_seq < 1 || cfg->layers < 1 || cfg->width < 1 || cfg->heads < 1 || cfg->width % cfg->heads ||
        (cfg->vocab_padded && cfg->vocab_padded < cfg->vocab) || cfg->dropout < 0 || cfg->dropout >= 1)
        return (pt_gpt *)pt__fail(ctx, PT_ERR_ARG,
                                  "pt_gpt_new: invalid config: vocab %d (padded %d), max_seq %d, layers %d, width %d, heads %d (must divide width), "
                                  "dropout %g",
                                  cfg ? cfg->vocab : 0, cfg ? cfg->vocab_padded : 0, cfg ? cfg->max_seq : 0, cfg ? cfg->layers : 0,
                                  cfg ? cfg->width : 0, cfg ? cfg->heads : 0, cfg ? (double)cfg->dropout : 0.0);
    if (nstages < 1 || nstages > cfg->layers || (nstages > 1 && (!first || !mine || nmine < 1)))
        return (pt_gpt *)pt__fail(ctx, PT_ERR_ARG, "pt_gpt_new_stages: %d stages for %d layers (need 1..layers stages, a split and the stages held)",
                                  nstages, cfg->layers);
    if (nstages > 1) {
        if (first[0] != 0 || first[nstages] != cfg->layers)
            return (pt_gpt *)pt__fail(ctx, PT_ERR_ARG, "pt_gpt_new_stages: the split must start at layer 0 and end at %d (found %d .. %d)",
                                      cfg->layers, (int)first[0], (int)first[nstages]);
        for (s = 0; s < nstages; s++)
            if (first[s + 1] <= first[s])
                return (pt_gpt *)pt__fail(ctx, PT_ERR_ARG, "pt_gpt_new_stages: stage %d is empty or reversed (layers %d .. %d)", s, (int)first[s],
                                          (int)first[s + 1]);
        for (s = 0; s < nmine; s++)
            if (mine[s] < 0 || mine[s] >= nstages)
                return (pt_gpt *)pt__fail(ctx, PT_ERR_ARG, "pt_gpt_new_stages: stage %d outside [0, %d)", (int)mine[s], nstages);
    }
    tp = pt_tp_size(ctx);
    vp = cfg->vocab_padded ? cfg->vocab_padded : (cfg->vocab + 63) / 64 * 64;
    if (cfg->heads % tp || vp % tp)
        return (pt_gpt *)pt__fail(ctx, PT_ERR_SHAPE, "pt_gpt_new: %s=%d does not split evenly over tp=%d", cfg->heads % tp ? "heads" : "vocab_padded",
                                  cfg->heads % tp ? cfg->heads : vp, tp);
    m = (pt_gpt *)pt__malloc(ctx, sizeof *m);
    if (!m) return (pt_gpt *)pt__fail(ctx, PT_ERR_OOM, "pt_gpt_new: out of memory");
    memset(m, 0, sizeof *m);
    m->cfg = *cfg;
    m->ctx = ctx;
    m->nstages = nstages;
    m->cfg.vocab_padded = vp;
    m->blocks = (pt_block *)pt__malloc(ctx, (size_t)cfg->layers * sizeof(pt_block));
    m->first = (int32_t *)pt__malloc(ctx, (size_t)(nstages + 1) * sizeof(int32_t));
    m->mine = (unsigned char *)pt__malloc(ctx, (size_t)nstages);
    if (!m->blocks || !m->first || !m->mine) {
        pt_gpt_free(m);
        return (pt_gpt *)pt__fail(ctx, PT_ERR_OOM, "pt_gpt_new: out of memory");
    }
    memset(m->blocks, 0, (size_t)cfg->layers * sizeof(pt_block));
    if (nstages == 1) {
        m->first[0] = 0, m->first[1] = cfg->layers, m->mine[0] = 1;
    } else {
        memcpy(m->first, first, (size_t)(nstages + 1) * sizeof(int32_t));
        memset(m->mine, 0, (size_t)nstages);
        for (s = 0; s < nmine; s++) m->mine[mine[s]] = 1;
    }
    embed = m->mine[0], head = m->mine[nstages - 1];
    /* creation order = slab order: embedding, blocks, final norm, head (as the unsplit model); a
       tied copy of the embedding on a last stage without the first comes first, so it lands in the
       last gradient bucket (the one reduced last, after the pipeline sums the two copies) */
    if (head && !embed && !cfg->untied)
        m->lm_head = pt__tp_param(ctx, "wte", "", 2, vp, cfg->width, PT_INIT_NORMAL, 0.02f, 0, tp > 1 ? 0 : -1, 1);
    if (embed) {
        /* the token table (and an untied head) split over vocabulary rows across TP (replicated at tp 1) */
        m->wte = pt__tp_param(ctx, "wte", "", 2, vp, cfg->width, PT_INIT_NORMAL, 0.02f, 0, tp > 1 ? 0 : -1, 1);
        m->wpe = pt__param2(ctx, "wpe", "", 2, cfg->max_seq, cfg->width, PT_INIT_NORMAL, 0.02f, 0);
    }
    for (s = 0; s < nstages; s++) {
        if (!m->mine[s]) continue;
        for (l = m->first[s]; l < m->first[s + 1]; l++) {
            char n[32];
            snprintf(n, sizeof n, "h.%d", l);
            m->blocks[l] = pt_block_new(ctx, n, cfg->width, cfg->layers);
        }
    }
    if (head) {
        m->lnf_w = pt__param2(ctx, "lnf.w", "", 1, cfg->width, 1, PT_INIT_ONES, 0, PT_PARAM_NO_DECAY);
        m->lnf_b = pt__param2(ctx, "lnf.b", "", 1, cfg->width, 1, PT_INIT_ZEROS, 0, PT_PARAM_NO_DECAY);
        if (cfg->untied) m->lm_head = pt__tp_param(ctx, "lm_head", "", 2, vp, cfg->width, PT_INIT_NORMAL, 0.02f, 0, tp > 1 ? 0 : -1, 1);
        else if (embed) m->lm_head = m->wte;
    }
    if (ctx->status != PT_OK) {
        pt_gpt_free(m);
        return NULL;
    }
    return m;
}
PTDEF void pt_gpt_free(pt_gpt *m) {
    if (!m) return;
    PT_FREE(m->blocks);
    PT_FREE(m->first);
    PT_FREE(m->mine);
    PT_FREE(m);
}
PTDEF pt_tensor *pt_gpt_embed(pt_graph *g, const pt_gpt *m, pt_tensor *ids) {
    pt_tensor *tok, *pos;
    if (!g || !m || !ids) return NULL;
    if (ids->ndim != 2 || ids->shape[1] > m->cfg.max_seq)
        return (pt_tensor *)pt__fail(g->ctx, PT_ERR_SHAPE, "pt_gpt_embed: ids %s must be [B, T] with T <= max_seq %d", pt__shp(ids).s,
                                     m->cfg.max_seq);
    if (pt_tp_size(g->ctx) > 1) tok = pt_tp_reduce(g, pt_embedding_vp(g, m->wte, ids, pt__gpt_vocab_offset(m)));
    else tok = pt_embedding(g, m->wte, ids);
    pos = pt_slice(g, m->wpe, 0, 0, ids->shape[1]);
    return pt_add(g, tok, pos);
}
PTDEF pt_tensor *pt_gpt_block(pt_graph *g, const pt_gpt *m, int l, pt_tensor *x) {
    if (!m || l < 0 || l >= m->cfg.layers) return g ? (pt_tensor *)pt__fail(g->ctx, PT_ERR_ARG, "pt_gpt_block: layer %d outside [0, %d)", l, m ? m->cfg.layers : 0) : NULL;
    return pt_block_fwd(g, &m->blocks[l], x, m->cfg.heads, m->cfg.dropout, pt_hash64((uint64_t)l * 2654435761u + 17));
}
PTDEF pt_tensor *pt_gpt_head(pt_graph *g, const pt_gpt *m, pt_tensor *x) {
    if (!m) return NULL;
    x = pt_layernorm(g, x, m->lnf_w, m->lnf_b, 1e-5f);
    if (g && pt_tp_size(g->ctx) > 1) x = pt_tp_copy(g, x); /* the local vocabulary columns: f before the column-parallel head */
    return pt_linear(g, x, m->lm_head, NULL);
}
PTDEF pt_tensor *pt_gpt_forward(pt_graph *g, const pt_gpt *m, pt_tensor *ids) {
    pt_tensor *x = pt_gpt_embed(g, m, ids);
    int l;
    for (l = 0; m && l < m->cfg.layers; l++) x = pt_gpt_block(g, m, l, x);
    return pt_gpt_head(g, m, x);
}
/* the mean loss of logits (this rank's vocabulary columns under TP) against targets */
static pt_tensor *pt__gpt_xent(pt_graph *g, const pt_gpt *m, pt_tensor *logits, pt_tensor *targets) {
    if (!m || !g) return NULL;
    if (pt_tp_size(g->ctx) > 1) return pt_cross_entropy_vp(g, logits, targets, pt__gpt_vocab_offset(m), m->cfg.vocab);
    return pt_cross_entropy_ex(g, logits, targets, -1, m->cfg.vocab);
}
PTDEF pt_tensor *pt_gpt_loss(pt_graph *g, const pt_gpt *m, pt_tensor *ids, pt_tensor *targets) {
    return pt__gpt_xent(g, m, pt_gpt_forward(g, m, ids), targets);
}
PTDEF pt_tensor *pt_gpt_stage_fwd(pt_graph *g, const pt_gpt *m, int stage, pt_tensor *x, pt_tensor *ids, pt_tensor *targets) {
    int l;
    if (!g || !m) return NULL;
    if (stage < 0 || stage >= m->nstages || !m->mine[stage])
        return (pt_tensor *)pt__fail(g->ctx, PT_ERR_ARG, "pt_gpt_stage_fwd: stage %d is not held here (%d stages)", stage, m->nstages);
    if (stage == 0) x = pt_gpt_embed(g, m, ids);
    for (l = m->first[stage]; x && l < m->first[stage + 1]; l++) x = pt_gpt_block(g, m, l, x);
    if (stage < m->nstages - 1) return x;
    return pt__gpt_xent(g, m, pt_gpt_head(g, m, x), targets);
}
PTDEF void pt_gpt_stage_costs(const pt_gpt_config *c, int64_t B, int64_t T, double *layer_cost, double *first_extra, double *last_extra) {
    double bt = (double)B * (double)T, C = c->width, Vp = c->vocab_padded ? c->vocab_padded : (c->vocab + 63) / 64 * 64;
    int l;
    for (l = 0; layer_cost && l < c->layers; l++) layer_cost[l] = 6.0 * 12.0 * C * C * bt + 12.0 * bt * (double)T * C;
    if (first_extra) *first_extra = 3.0 * bt * C;           /* gathers and adds, forward and backward */
    if (last_extra) *last_extra = 6.0 * Vp * C * bt + 10.0 * bt * Vp; /* head matmuls and the softmax */
}
PTDEF pt_status pt_gpt_generate(pt_gpt *m, pt_graph *g, const int32_t *prompt, int n, int max_new, float temperature, uint64_t seed,
                                int32_t *out) {
    pt_rng rng = pt_rng_seed(seed);
    int t, i, V, Vp, Vl, saved_grad, saved_train;
    float *row;
    if (!m || !g || !out || (n > 0 && !prompt) || n < 1 || max_new < 0)
        return (pt_status)(pt__fail(m ? m->ctx : NULL, PT_ERR_ARG, "pt_gpt_generate: needs a model, a graph, a prompt of >= 1 token and out"),
                           PT_ERR_ARG);
    V = m->cfg.vocab, Vp = m->cfg.vocab_padded, Vl = Vp / pt_tp_size(m->ctx);
    row = (float *)PT_MALLOC((size_t)Vp * sizeof(float));
    if (!row) return (pt_status)(pt__fail(m->ctx, PT_ERR_OOM, "pt_gpt_generate: out of memory"), PT_ERR_OOM);
    memcpy(out, prompt, (size_t)n * sizeof *out);
    saved_grad = g->grad_on, saved_train = g->training;
    pt_graph_set_grad(g, 0);
    pt_graph_set_training(g, 0);
    for (t = n; t < n + max_new; t++) {
        int T = PT__MIN(t, m->cfg.max_seq), best = 0;
        pt_tensor *ids, *logits, last;
        pt_graph_reset(g);
        ids = pt_tensor_new(g, PT_I32, 2, 1, T, 0, 0);
        if (!ids || pt_tensor_write(ids, out + t - T) != PT_OK) break;
        logits = pt_gpt_forward(g, m, ids);
        if (!logits) break;
        last = pt__at(logits, (int64_t)(T - 1) * Vl); /* TP: this rank's columns, gathered in rank order */
        last.ndim = 1;
        last.shape[0] = Vl;
        last.shape[1] = last.shape[2] = 1;
        {
            int xk = pt__xfer_as(m->ctx, pt_tp_size(m->ctx) > 1 ? PT_XFER_TP : PT_XFER_IO); /* staged for the TP allgather */
            pt_tensor_read(&last, row + (int64_t)pt_tp_rank(m->ctx) * Vl);
            pt__xfer_as(m->ctx, xk);
        }
        if (!pt__tp_allgather(m->ctx, "pt_gpt_generate", row, Vl)) break;
        for (i = 1; i < V; i++)
            if (row[i] > row[best]) best = i;
        if (temperature > 0) {
            double sum = 0, u;
            for (i = 0; i < V; i++) sum += exp((double)(row[i] - row[best]) / temperature);
            u = pt_rng_float(&rng) * sum;
            for (i = 0; i < V; i++) {
                u -= exp((double)(row[i] - row[best]) / temperature);
                if (u <= 0) break;
            }
            best = i < V ? i : V - 1;
        }
        out[t] = best;
    }
    pt_graph_reset(g);
    pt_graph_set_grad(g, saved_grad);
    pt_graph_set_training(g, saved_train);
    PT_FREE(row);
    return m->ctx->status;
}
PTDEF int64_t pt_gpt_matmul_params(const pt_gpt_config *c) {
    int64_t C = c->width, Vp = c->vocab_padded ? c->vocab_padded : (c->vocab + 63) / 64 * 64;
    return (int64_t)c->layers * (3 * C * C + C * C + 4 * C * C + 4 * C * C) + Vp * C;
}
PTDEF double pt_gpt_flops(const pt_gpt_config *c, int64_t B, int64_t T) {
    return 6.0 * (double)pt_gpt_matmul_params(c) * (double)(B * T) + 12.0 * c->layers * (double)B * (double)T * (double)T * c->width;
}


// >>dp  data parallelism
/* Owns: pt_dp (buckets fixed at init, their non-blocking reductions), the ZeRO shard of gradients
   and optimizer state
   Invariants: buckets in a fixed order; the exact mean at pt_dp_finish
   Entry points: pt_dp_new pt_dp_new_opts pt_dp_begin pt_dp_finish pt_dp_zero pt_dp_stats_get; a
   bucket's allreduce or ZeRO reduce-scatter: pt__dp_call; the ZeRO parameter all-gather:
   pt__dp_zero_gather */
/* =================================================================================================
   data parallelism: bucketed, overlapped gradient averaging over the DP communicator
   =================================================================================================
   Buckets are cut once, at pt_dp_new, walking the parameters in reverse creation order (the order
   backward completes them): a bucket is a run of consecutive non-frozen parameters whose slab range
   (slices are 64-byte aligned, padding included) fits bucket_bytes; a parameter larger than that
   gets a bucket of its own; a frozen parameter ends the run. Since the slab is in creation order, a
   bucket is one contiguous range [lo, hi) of the gradient slab and its parameters have consecutive
   ids [p0, p1].

   A step (pt_dp_begin_step(dp, passes)) issues a fixed sequence of reductions ("ops"): rounds x
   buckets, round-major, rounds = 1, or = passes under ZeRO-2 (one reduce-scatter per micro-batch).
   The grad hook counts each parameter's completions (fired[]); op (round k, bucket b) is ready when
   every parameter of b has fired >= k+1 times (ZeRO-2) or >= passes times (otherwise): a per-
   parameter count, so passes of different model parts may interleave freely. Ready ops are started
   strictly in sequence order (op s+1 waits for s), so every rank issues the same collectives in the
   same order. An op has 1 phase (allreduce or reduce-scatter) or 3 (hierarchical: in-node reduce-
   scatter, cross-node allreduce, in-node allgather, each on its own communicator); op i issues
   phase q only after op i-1 did, so each communicator sees the ops in order too. The backward poll
   MPI_Tests the ops in flight and issues next phases; ops retire (their results are moved into
   place) strictly in order, so accumulation order is fixed. pt_dp_finish starts what is left in
   order (parameters a pass did not use never fire), waits, and divides by the DP size: an exact sum
   over ranks, then one scale, the same on every rank. No float atomics anywhere.

   Buffers: the f32 flat and ZeRO-1 paths reduce in place in the gradient slab. ZeRO-2 and bf16
   compression copy a bucket into a staging ring (two largest buckets) when its op starts: ZeRO-2
   then zeroes the bucket, so later passes accumulate only their own contribution (a pass that
   already began to accumulate into it is sent now or in a later round: each contribution is reduced
   exactly once); compression writes bf16(g + e) and keeps e = (g + e) - bf16(g + e) per element. A
   full ring waits for its oldest op.

   Device backends (the gradient slab has no host memory): a host mirror of the gradient slab (hg,
   slab_n floats) stands in for it. When a bucket's gradient is complete (the grad hook, during
   backward) its read into its place in hg starts without waiting (pt__dp_fetch: the backend's
   read_start, counted as PT_XFER_DP; the queue is in order, so the copy follows exactly the
   kernels that produced the bucket, while the host enqueues the rest of backward); the op starts
   (read_wait, then the reduction) in a later hook or poll once the copy is done, or in
   pt__dp_complete, still strictly in sequence order. Everything above runs on hg unchanged, and pt_dp_finish writes each bucket's reduced range back (one write per bucket, the
   own shard's part under ZeRO). ZeRO-2 zeroes the bucket on the device. The ZeRO allgathers of the
   parameter slab and of the optimizer state read the own shard to hg and write the others' parts
   back (pt__dp_allgather_slab). The CPU path works in the slab in place, as before.

   Collective records (see dist): every call goes through pt__coll_begin/pt__coll_end; a bucket's
   record (op->rec) stays in flight until MPI_Test or MPI_Wait sees it finish. The hierarchical
   phases are recorded on PT_COMM_DP_NODE (reduce-scatter; the allgatherv, which runs on node2, a
   duplicate) and PT_COMM_DP_CROSS. A refused or failed reduction fails the step (dp->failed: no
   later op starts; a refusal happens on every rank of the communicator, so all stop at the same
   op). Debug mode, hierarchical: pt__dp_issue_checked runs an op's phases one after another and
   the DP ranks agree on the outcome, so every DP rank fails, not just the refusing sub-group. */

typedef struct pt__dp_op {
    int b;        /* bucket */
    int issued;   /* phases issued so far */
    int active;   /* the last issued phase is in flight */
    int64_t soff; /* staging ring offset (floats), -1 = none */
    int64_t sn;   /* staging floats */
    uint64_t rec; /* the collective record of the phase in flight (pt__coll_begin) */
    void *rd;     /* device backend: the bucket's read to the host mirror, in flight (read_wait), or NULL */
#ifdef PTRAIN_MPI
    MPI_Request req;
#endif
} pt__dp_op;

struct pt_dp {
    pt_ctx *ctx;
    const pt_dist *dist; /* the grid: its collective records (NULL: none) */
    int dpsize, dprank; /* the DP communicator (1 = no communication) */
    int nparams;        /* parameters when created (more later is an error) */
    int nb;             /* buckets */
    int64_t *lo, *hi;   /* [nb]: slab element range of each bucket */
    int *p0, *p1;       /* [nb]: the bucket's parameter ids p0..p1 */
    int *bucket_of;     /* [nparams]: bucket of each parameter, -1 = frozen */
    int *fired;         /* [nparams]: grad hooks seen this step */
    int passes, rounds; /* this step's backward passes; reductions per bucket */
    int nseq, next, retired; /* ops this step; the next to start; the first not retired */
    int fetched;        /* ops whose bucket was handed over (device backend: its read started), >= next */
    pt__dp_op *ops;
    int cap_ops;
    int reducing;       /* a step is open (pt_dp_begin_step or pt_dp_begin(dp, 1) seen, not finished) */
    int failed;         /* a reduction of this step failed or was refused: start no more (a refusal is seen by every rank) */
    int stage;          /* ZeRO stage 0, 1, 2 */
    int hier, compress, nphases;
    int64_t zlo, zhi;   /* this rank's ZeRO range of the slab */
    float *acc;         /* ZeRO-2: [zhi - zlo] shard accumulator */
    float *resid;       /* compression: [slab_n] error feedback, carried across steps */
    float *stg;         /* staging ring [stg_n] */
    int64_t stg_n, stg_head;
    float *hg;          /* device backend: host mirror of the gradient slab [slab_n] (NULL on the CPU) */
    pt_dp_stats stats;
    pt_optim *zopt;     /* sharded optimizer (pt_dp_zero), or NULL */
#ifdef PTRAIN_MPI
    MPI_Comm comm, node, node2, cross; /* DP; hierarchical: in-node (twice: phases 0 and 2), across nodes */
    MPI_Comm agree;     /* a private duplicate of the DP communicator for pt_dp_finish's agreement */
    int blocking;       /* the ops started now use the blocking collective (see pt__dp_complete) */
    int lsize, lrank;   /* the in-node DP sub-communicator */
    int *zcnt, *zdispl; /* [dpsize]: ZeRO shard of each DP rank (elements, offsets) */
    int *bcnt;          /* [nb * dpsize]: each bucket's intersection with each rank's shard */
    int *hcnt, *hdispl; /* [nb * lsize]: in-node parts of each bucket */
    MPI_Op bf16sum;
#endif
};

/* The DP shard of the gradient slab that holds the reduced gradient after pt_dp_finish (ZeRO-1/2:
   this rank's range, else the whole slab); 1 when the sum of squares must be summed over DP. */
static int pt__dp_grad_range(pt_ctx *ctx, int64_t *lo, int64_t *hi) {
    pt_dp *dp = ctx->dp;
    *lo = 0, *hi = ctx->slab_n;
    if (!dp || dp->dpsize <= 1 || dp->stage == 0) return 0;
    *lo = dp->zlo, *hi = dp->zhi;
    return 1;
}
/* DP rank r's ZeRO range [*lo, *hi) of a slab of n floats over size ranks: equal parts, boundaries
   rounded down to 16 floats (slices are 64-byte aligned), the last rank takes the rest */
static void pt__dp_zero_range(int64_t n, int r, int size, int64_t *lo, int64_t *hi) {
    *lo = (n * r / size) & ~(int64_t)15;
    *hi = r + 1 < size ? (n * (r + 1) / size) & ~(int64_t)15 : n;
}
/* floats of the staging ring at ZeRO stage `stage`: two of the largest bucket's staging (ZeRO-2: f32,
   compression: bf16), at most all buckets' together (one bucket: one); none without either */
static int64_t pt__dp_ring_floats(const pt_dp *dp, int stage) {
    int64_t big = 0, all = 0;
    int b;
    for (b = 0; b < dp->nb; b++) {
        int64_t m = dp->compress ? (dp->hi[b] - dp->lo[b] + 1) / 2 : dp->hi[b] - dp->lo[b];
        big = PT__MAX(big, m), all += m;
    }
    return dp->compress || stage == 2 ? PT__MIN(2 * big, all) : 0;
}
/* Sums n doubles over the DP communicator of ctx's reducer, in place. */
static void pt__dp_sum(pt_ctx *ctx, double *x, int n) {
#ifdef PTRAIN_MPI
    const pt_dist *d;
    uint64_t s;
    int rc;
    if (!ctx->dp || ctx->dp->dpsize <= 1) return;
    d = ctx->dp->dist;
    s = pt__coll_begin(d, PT_COLL_ALLREDUCE, PT_COMM_DP, n, PT_COLL_F64, -1);
    rc = pt__coll_end(d, s, s ? MPI_Allreduce(MPI_IN_PLACE, x, n, MPI_DOUBLE, MPI_SUM, ctx->dp->comm) : PT__COLL_REFUSED);
    if (rc != MPI_SUCCESS) pt__fail(ctx, PT_ERR_DEVICE, "pt_grad_norm: the allreduce over the DP communicator failed: %s", pt__coll_why(d, rc));
#else
    (void)ctx, (void)x, (void)n;
#endif
}

/* bf16 round to nearest even (NaN kept quiet); also the safetensors export and import (see ckpt) */
static uint16_t pt__dp_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 64);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
static float pt__dp_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
#ifdef PTRAIN_MPI
/* the gradient slab the reductions work on: the slab itself, or its host mirror on a device */
static float *pt__dp_grads(pt_dp *dp) {
    pt_tensor gs = pt_grad_slab(dp->ctx);
    float *g = dp->hg ? dp->hg : pt_f32(&gs);
    if (!g) pt__fail(dp->ctx, PT_ERR_STATE, "pt_dp: the gradient slab has no host memory");
    return g;
}

static void pt__dp_bf16_sum(void *in, void *inout, int *len, MPI_Datatype *dt) {
    const uint16_t *a = (const uint16_t *)in;
    uint16_t *b = (uint16_t *)inout;
    int i;
    (void)dt;
    for (i = 0; i < *len; i++) b[i] = pt__dp_bf16(pt__dp_f32(a[i]) + pt__dp_f32(b[i]));
}

/* Starts phase q of op on buf, its record in op->rec: MPI's return code, or PT__COLL_REFUSED when
   debug mode refused it (nothing started). A call that did not start has its record closed. */
static int pt__dp_call(pt_dp *dp, pt__dp_op *op, char *buf, int q) {
    int b = op->b, rc, n = (int)(dp->hi[b] - dp->lo[b]), es = dp->compress ? 2 : 4, dt = dp->compress ? PT_COLL_BF16 : PT_COLL_F32;
    MPI_Datatype ty = dp->compress ? MPI_UINT16_T : MPI_FLOAT;
    MPI_Op mop = dp->compress ? dp->bf16sum : MPI_SUM;
    const pt_dist *d = dp->dist;
    uint64_t s;
    op->req = MPI_REQUEST_NULL;
    if (dp->nphases == 3) { /* hierarchical: the in-place reduce-scatter leaves my part at the start */
        int *c = dp->hcnt + (size_t)b * dp->lsize, *dd = dp->hdispl + (size_t)b * dp->lsize;
        if (q == 0) {
            s = pt__coll_begin(d, PT_COLL_IREDUCE_SCATTER, PT_COMM_DP_NODE, n, dt, -1);
            rc = s ? MPI_Ireduce_scatter(MPI_IN_PLACE, buf, c, ty, mop, dp->node, &op->req) : PT__COLL_REFUSED;
        } else if (q == 1) {
            s = pt__coll_begin(d, PT_COLL_IALLREDUCE, PT_COMM_DP_CROSS, c[dp->lrank], dt, -1);
            rc = s ? MPI_Iallreduce(MPI_IN_PLACE, buf, c[dp->lrank], ty, mop, dp->cross, &op->req) : PT__COLL_REFUSED;
        } else { /* on node2, a duplicate of the in-node communicator; recorded as that one */
            s = pt__coll_begin(d, PT_COLL_IALLGATHERV, PT_COMM_DP_NODE, n, dt, -1);
            if (s) memmove(buf + (size_t)dd[dp->lrank] * es, buf, (size_t)c[dp->lrank] * es);
            rc = s ? MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, c, dd, ty, dp->node2, &op->req) : PT__COLL_REFUSED;
        }
    } else if (dp->blocking) { /* after backward: the blocking collective, MPI's tuned algorithm */
        int zero = dp->stage != 0;
        s = pt__coll_begin(d, zero ? PT_COLL_REDUCE_SCATTER : PT_COLL_ALLREDUCE, PT_COMM_DP, n, dt, -1);
        rc = !s ? PT__COLL_REFUSED
             : zero ? MPI_Reduce_scatter(MPI_IN_PLACE, buf, dp->bcnt + (size_t)b * dp->dpsize, ty, mop, dp->comm)
                    : MPI_Allreduce(MPI_IN_PLACE, buf, n, ty, mop, dp->comm);
        if (rc == MPI_SUCCESS) pt__coll_end(d, s, rc), s = 0; /* done: the op completes at its first test */
    } else if (dp->stage == 0) {
        s = pt__coll_begin(d, PT_COLL_IALLREDUCE, PT_COMM_DP, n, dt, -1);
        rc = s ? MPI_Iallreduce(MPI_IN_PLACE, buf, n, ty, mop, dp->comm, &op->req) : PT__COLL_REFUSED;
    } else { /* ZeRO: in place, my part of the bucket lands at its start */
        s = pt__coll_begin(d, PT_COLL_IREDUCE_SCATTER, PT_COMM_DP, n, dt, -1);
        rc = s ? MPI_Ireduce_scatter(MPI_IN_PLACE, buf, dp->bcnt + (size_t)b * dp->dpsize, ty, mop, dp->comm, &op->req) : PT__COLL_REFUSED;
    }
    op->rec = s;
    if (rc != MPI_SUCCESS) {
        op->req = MPI_REQUEST_NULL;
        pt__coll_end(d, s, rc);
    }
    return rc;
}

/* Debug mode, hierarchical: the three phases one after the other, each waited for, so every rank
   makes the (blocking) agreements of pt__coll_begin on the three communicators in the same order and
   none can wait on another. A phase refused on some ranks is still offered (and run where agreed)
   on the others, so no peer is left waiting; then the DP ranks agree on the outcome: a phase that
   failed anywhere fails the op on every DP rank, with the lowest failing DP rank's message. */
static int pt__dp_issue_checked(pt_dp *dp, pt__dp_op *op, char *buf) {
    pt_dist *d = (pt_dist *)dp->dist;
    char msg[PT__DIST_MSG];
    int q, rc, v, low = dp->dpsize, es = dp->compress ? 2 : 4;
    uint64_t s;
    msg[0] = 0;
    d->comm[PT_COMM_DP_NODE] = dp->node, d->comm[PT_COMM_DP_CROSS] = dp->cross; /* what the agreements run on */
    for (q = 0; q < 3; q++) {
        rc = pt__dp_call(dp, op, buf, q);
        if (rc == MPI_SUCCESS) rc = pt__coll_end(d, op->rec, pt__coll_wait(d, 1, &op->req, 0));
        if (rc != MPI_SUCCESS && !msg[0]) pt__msg(msg, sizeof msg, "phase %d: %s", q, pt__coll_why(d, rc));
    }
    op->issued = 3, op->active = 0, op->req = MPI_REQUEST_NULL;
    dp->stats.bytes_reduced += (dp->hi[op->b] - dp->lo[op->b]) * es;
    v = msg[0] ? dp->dprank : dp->dpsize;
    s = pt__coll_begin(d, PT_COLL_ALLREDUCE, PT_COMM_DP, 1, PT_COLL_I32, -1);
    rc = pt__coll_end(d, s, s ? MPI_Allreduce(&v, &low, 1, MPI_INT, MPI_MIN, dp->comm) : PT__COLL_REFUSED);
    if (rc == MPI_SUCCESS && low < dp->dpsize) {
        s = pt__coll_begin(d, PT_COLL_BCAST, PT_COMM_DP, PT__DIST_MSG, PT_COLL_CHAR, low);
        rc = pt__coll_end(d, s, s ? MPI_Bcast(msg, PT__DIST_MSG, MPI_CHAR, low, dp->comm) : PT__COLL_REFUSED);
    }
    dp->failed = rc != MPI_SUCCESS || low < dp->dpsize;
    if (rc != MPI_SUCCESS)
        pt__fail(dp->ctx, PT_ERR_DEVICE, "pt_dp: the agreement on bucket %d's hierarchical reduction failed: %s", op->b, pt__coll_why(d, rc));
    else if (low < dp->dpsize)
        pt__fail(dp->ctx, PT_ERR_DEVICE, "pt_dp: the hierarchical reduction of bucket %d failed on DP rank %d, %.*s", op->b, low, PT__DIST_MSG - 1, msg);
    return rc == MPI_SUCCESS && low == dp->dpsize;
}

/* Issues op's next phase. 0 and a context error on failure. */
static int pt__dp_issue(pt_dp *dp, pt__dp_op *op) {
    int b = op->b, q = op->issued, rc, n = (int)(dp->hi[b] - dp->lo[b]), es = dp->compress ? 2 : 4;
    float *g = pt__dp_grads(dp);
    char *buf;
    if (!g) return 0;
    buf = op->soff >= 0 ? (char *)(dp->stg + op->soff) : (char *)(g + dp->lo[b]);
    if (dp->nphases == 3 && q == 0 && dp->dist && dp->dist->check) return pt__dp_issue_checked(dp, op, buf);
    rc = pt__dp_call(dp, op, buf, q);
    op->issued++;
    if (rc != MPI_SUCCESS) {
        op->issued = dp->nphases;
        dp->failed = 1;
        pt__fail(dp->ctx, PT_ERR_DEVICE, "pt_dp: the reduction of bucket %d (phase %d) failed to start: %s", b, q, pt__coll_why(dp->dist, rc));
        return 0;
    }
    op->active = 1;
    if (q == 0) dp->stats.bytes_reduced += (int64_t)n * es;
    return 1;
}

/* Moves a finished op's result into place (in sequence order). */
static void pt__dp_retire(pt_dp *dp, pt__dp_op *op) {
    int b = op->b;
    int64_t lo = dp->lo[b], n = dp->hi[b] - lo, a, c, i;
    float *g = pt__dp_grads(dp);
    const uint16_t *h = op->soff >= 0 ? (const uint16_t *)(dp->stg + op->soff) : NULL;
    if (!g) return;
    if (dp->stage == 0) {
        if (dp->compress)
            for (i = 0; i < n; i++) g[lo + i] = pt__dp_f32(h[i]);
        return;
    }
    a = PT__MAX(lo, dp->zlo);
    c = dp->bcnt[(size_t)b * dp->dpsize + dp->dprank];
    if (c <= 0) return;
    if (dp->stage == 1) {
        if (dp->compress)
            for (i = 0; i < c; i++) g[a + i] = pt__dp_f32(h[i]);
        else memmove(g + a, g + lo, (size_t)c * 4);
    } else {
        float *acc = dp->acc + (a - dp->zlo);
        if (dp->compress)
            for (i = 0; i < c; i++) acc[i] += pt__dp_f32(h[i]);
        else
            for (i = 0; i < c; i++) acc[i] += dp->stg[op->soff + i];
    }
}

/* Tests the ops in flight in order, issues next phases (op i's phase q only after op i-1's), retires
   finished ops in order. 0 on an MPI error. */
static int pt__dp_progress(pt_dp *dp) {
    int i, prev = dp->nphases, flag;
    for (i = dp->retired; i < dp->next; i++) {
        pt__dp_op *op = &dp->ops[i];
        for (;;) {
            if (op->active) {
                int rc;
                flag = 0;
                if ((rc = MPI_Test(&op->req, &flag, MPI_STATUS_IGNORE)) != MPI_SUCCESS) {
                    pt__coll_end(dp->dist, op->rec, rc);
                    op->active = 0, op->issued = dp->nphases, dp->failed = 1;
                    pt__fail(dp->ctx, PT_ERR_DEVICE, "pt_dp: MPI_Test of bucket %d failed: %s", op->b, pt__coll_why(dp->dist, rc));
                    return 0;
                }
                if (!flag) break;
                pt__coll_end(dp->dist, op->rec, MPI_SUCCESS);
                op->active = 0;
            }
            if (op->issued >= dp->nphases || prev <= op->issued) break;
            if (!pt__dp_issue(dp, op)) return 0;
        }
        prev = op->issued;
    }
    while (dp->retired < dp->next && dp->ops[dp->retired].issued >= dp->nphases && !dp->ops[dp->retired].active)
        pt__dp_retire(dp, &dp->ops[dp->retired++]);
    return 1;
}

/* Waits until the first `target` ops of the step are retired. */
static int pt__dp_wait(pt_dp *dp, int target) {
    while (dp->retired < target) {
        pt__dp_op *op;
        if (!pt__dp_progress(dp)) return 0;
        if (dp->retired >= target) break;
        op = &dp->ops[dp->retired];
        if (op->active) {
            int rc = pt__coll_end(dp->dist, op->rec, pt__coll_wait(dp->dist, 1, &op->req, 0));
            op->active = 0;
            if (rc != MPI_SUCCESS) {
                op->issued = dp->nphases, dp->failed = 1;
                pt__fail(dp->ctx, PT_ERR_DEVICE, "pt_dp: MPI_Wait of bucket %d failed: %s", op->b, pt__coll_why(dp->dist, rc));
                return 0;
            }
        }
    }
    return 1;
}

/* n floats of the staging ring (FIFO: waits for the oldest ops while the room overlaps one). */
static int64_t pt__dp_stage_alloc(pt_dp *dp, int64_t n) {
    for (;;) {
        int64_t off = dp->stg_head + n <= dp->stg_n ? dp->stg_head : 0;
        int i, clash = 0;
        for (i = dp->retired; i < dp->next && !clash; i++) {
            pt__dp_op *o = &dp->ops[i];
            clash = o->soff >= 0 && o->soff < off + n && off < o->soff + o->sn;
        }
        if (!clash) {
            dp->stg_head = off + n;
            return off;
        }
        if (!pt__dp_wait(dp, dp->retired + 1)) return -1;
    }
}

static int pt__dp_start(pt_dp *dp, int from_hook);

/* Hands the next op's bucket over (its gradient is complete): on a device backend its read to its
   place in the host mirror starts (non-blocking; the in-order queue makes it wait for exactly the
   kernels that produced it) and, under ZeRO-2, the device bucket is zeroed behind it. The op's
   reduction starts later (pt__dp_start, after read_wait). A bucket's earlier op of this step must
   have left the mirror first (ZeRO-2 rounds): it is started now. 0 and a context error on failure. */
static int pt__dp_fetch(pt_dp *dp, int from_hook) {
    pt__dp_op *op = &dp->ops[dp->fetched];
    int b = dp->fetched % dp->nb;
    int64_t lo = dp->lo[b], n = dp->hi[b] - lo;
    while (dp->next <= dp->fetched - dp->nb)
        if (!pt__dp_start(dp, from_hook)) return 0;
    op->b = b, op->issued = 0, op->active = 0, op->soff = -1, op->sn = 0, op->rec = 0, op->rd = NULL;
    op->req = MPI_REQUEST_NULL;
    dp->fetched++;
    if (dp->hg) {
        op->rd = pt__stage_read_start(dp->ctx, dp->ctx->gslab, lo, dp->hg + lo, n, PT_XFER_DP);
        if (dp->ctx->status != PT_OK) return 0;
        if (dp->stage == 2) { /* later passes accumulate afresh (queued after the read) */
            pt_tensor t = pt__slab_view(dp->ctx->gslab, n);
            t.off = lo;
            dp->ctx->be->fill(dp->ctx, &t, 0.0f);
        }
    }
    return 1;
}

/* Starts the next op of the sequence (fetched first if it was not), after its bucket's read is
   done. 0 and a context error on failure. */
static int pt__dp_start(pt_dp *dp, int from_hook) {
    pt__dp_op *op = &dp->ops[dp->next];
    int b = dp->next % dp->nb;
    int64_t lo = dp->lo[b], n = dp->hi[b] - lo, need = dp->compress ? (n + 1) / 2 : dp->stage == 2 ? n : 0, i;
    float *g = pt__dp_grads(dp);
    if (!g) return 0;
    if (dp->next == dp->fetched && !pt__dp_fetch(dp, from_hook)) return 0;
    if (op->rd) {
        void *h = op->rd;
        op->rd = NULL;
        dp->ctx->be->read_wait(dp->ctx, h, 1);
        if (dp->ctx->status != PT_OK) return 0;
    }
    if (need) {
        int64_t off = pt__dp_stage_alloc(dp, need);
        if (off < 0) return 0;
        op->soff = off, op->sn = need;
        if (dp->compress) {
            uint16_t *h = (uint16_t *)(dp->stg + off);
            float *e = dp->resid + lo;
            for (i = 0; i < n; i++) {
                float v = g[lo + i] + e[i];
                h[i] = pt__dp_bf16(v);
                e[i] = v - pt__dp_f32(h[i]);
            }
        } else {
            memcpy(dp->stg + off, g + lo, (size_t)n * 4);
        }
        if (dp->stage == 2) memset(g + lo, 0, (size_t)n * 4); /* later passes accumulate afresh (the device's: pt__dp_fetch) */
    }
    dp->next++;
    if (from_hook) dp->stats.started_before_end++;
    return pt__dp_issue(dp, op);
}

/* op s ready: every parameter of its bucket fired enough times */
static int pt__dp_ready(const pt_dp *dp, int s) {
    int b = s % dp->nb, thr = dp->stage == 2 ? s / dp->nb + 1 : dp->passes, p;
    for (p = dp->p0[b]; p <= dp->p1[b]; p++)
        if (dp->fired[p] < thr) return 0;
    return 1;
}

/* Starts, in order, the fetched ops whose bucket reads are done (block: waits for them). */
static int pt__dp_start_fetched(pt_dp *dp, int block) {
    while (!dp->failed && dp->next < dp->fetched) {
        pt__dp_op *op = &dp->ops[dp->next];
        if (op->rd && !block) {
            if (!dp->ctx->be->read_wait(dp->ctx, op->rd, 0)) return 1;
            op->rd = NULL;
            if (dp->ctx->status != PT_OK) return 0;
        }
        if (!pt__dp_start(dp, 1)) return 0;
    }
    return 1;
}
static void pt__dp_poll(void *user) {
    pt_dp *dp = (pt_dp *)user;
    if (dp->reducing && dp->ctx->status == PT_OK && pt__dp_start_fetched(dp, 0)) (void)pt__dp_progress(dp);
}
static void pt__dp_hook(void *user, pt_param *p) {
    pt_dp *dp = (pt_dp *)user;
    if (!dp->reducing || !p || p->id < 0 || p->id >= dp->nparams || dp->bucket_of[p->id] < 0) return;
    if (++dp->fired[p->id] > dp->passes) {
        pt__fail(dp->ctx, PT_ERR_STATE,
                 "pt_dp: gradient of '%s' completed %d times in a step of %d backward pass(es) (pt_dp_begin_step(dp, passes); pt_dp_begin(dp, 1) = 1 pass)",
                 p->spec.name, dp->fired[p->id], dp->passes);
        return;
    }
    while (!dp->failed && dp->fetched < dp->nseq && pt__dp_ready(dp, dp->fetched))
        if (!pt__dp_fetch(dp, 1)) return;
    (void)pt__dp_start_fetched(dp, 0);
}

/* Starts every op left (in order) and waits for all. Ops that no rank started during backward have
   nothing to overlap with: they use the blocking collective (MPI_Allreduce, MPI_Reduce_scatter),
   whose tuned algorithms Open MPI applies, unlike those of its non-blocking ones (often 2x slower
   for large buckets). Ranks may have started different numbers of ops during backward, and an op
   must be the same kind of call on every rank, so the ranks first agree, on a private duplicate of
   the DP communicator (not recorded: it is outside the DP communicator's sequence of collectives),
   on the most any rank started; up to there the ops stay non-blocking. One-phase paths (ZeRO-0/1,
   with or without bf16) only; ZeRO-2 and the hierarchical chain stay non-blocking. */
static pt_status pt__dp_complete(pt_dp *dp) {
    double t0 = pt_time();
    int ok = 1, i;
    /* the ops handed over during backward start first (a peer may wait on them in its staging ring
       before it joins the agreement below), then every read left goes in flight at once */
    ok = pt__dp_start_fetched(dp, 1);
    while (ok && !dp->failed && dp->fetched < dp->nseq) ok = pt__dp_fetch(dp, 0);
    if (dp->nphases == 1 && dp->stage < 2 && dp->agree != MPI_COMM_NULL && !dp->failed) {
        int most = dp->next, rc;
        double tw = MPI_Wtime();
        rc = MPI_Allreduce(MPI_IN_PLACE, &most, 1, MPI_INT, MPI_MAX, dp->agree);
        pt__coll_blocked(dp->dist, MPI_Wtime() - tw, 0); /* monitor: a wait for the slowest DP rank */
        if (rc != MPI_SUCCESS) {
            ok = 0, dp->failed = 1;
            pt__fail(dp->ctx, PT_ERR_DEVICE, "pt_dp_finish: the agreement on the buckets started during backward failed");
        }
        while (ok && !dp->failed && dp->next < most) ok = pt__dp_start(dp, 0);
        dp->blocking = 1;
    }
    while (ok && !dp->failed && dp->next < dp->nseq) ok = pt__dp_start(dp, 0);
    dp->blocking = 0;
    for (i = dp->next; i < dp->fetched; i++) /* after a failure: reads that no op will use */
        if (dp->ops[i].rd) dp->ctx->be->read_wait(dp->ctx, dp->ops[i].rd, 1), dp->ops[i].rd = NULL;
    dp->fetched = dp->next;
    ok = pt__dp_wait(dp, dp->next) && ok;
    dp->stats.wait_s += pt_time() - t0;
    return ok && !dp->failed ? PT_OK : PT_ERR_DEVICE;
}

/* The staging ring (pt__dp_ring_floats), or none. */
static pt_status pt__dp_alloc_stage(pt_dp *dp) {
    int64_t need = pt__dp_ring_floats(dp, dp->stage);
    if (need == dp->stg_n) return PT_OK;
    PT_FREE(dp->stg);
    dp->stg = NULL, dp->stg_n = dp->stg_head = 0;
    if (need && !(dp->stg = (float *)PT_MALLOC((size_t)need * 4)))
        return (pt_status)(pt__fail(dp->ctx, PT_ERR_OOM, "pt_dp: out of memory for the staging ring (%lld floats)", (long long)need), PT_ERR_OOM);
    dp->stg_n = need;
    return PT_OK;
}
static void pt__dp_account(pt_dp *dp) {
    dp->stats.extra_bytes = (dp->stg_n + (dp->acc ? dp->zhi - dp->zlo : 0) + (dp->resid ? dp->ctx->slab_n : 0) + (dp->hg ? dp->ctx->slab_n : 0)) * 4;
}

#endif

PTDEF pt_dp *pt_dp_new(pt_ctx *ctx, const pt_dist *d, int64_t bucket_bytes) {
    pt_dp_options o;
    memset(&o, 0, sizeof o);
    o.bucket_bytes = bucket_bytes;
    return pt_dp_new_opts(ctx, d, &o);
}

PTDEF pt_dp *pt_dp_new_opts(pt_ctx *ctx, const pt_dist *d, const pt_dp_options *opts) {
    pt_dp *dp;
    int i, n, b, open_b;
    int64_t cap, bucket_bytes;
    if (!ctx) return NULL;
    if (!opts) return (pt_dp *)pt__fail(ctx, PT_ERR_ARG, "pt_dp_new_opts: options are NULL");
    bucket_bytes = opts->bucket_bytes;
    if (bucket_bytes < 0)
        return (pt_dp *)pt__fail(ctx, PT_ERR_ARG, "pt_dp_new: bucket_bytes must be >= 0 (0 = 25 MiB), got %lld", (long long)bucket_bytes);
    if ((opts->hier != 0 && opts->hier != 1) || (opts->compress != 0 && opts->compress != 1))
        return (pt_dp *)pt__fail(ctx, PT_ERR_ARG, "pt_dp_new_opts: hier %d and compress %d must be 0 or 1", (int)opts->hier, (int)opts->compress);
    if (ctx->dp) return (pt_dp *)pt__fail(ctx, PT_ERR_STATE, "pt_dp_new: the context already has a pt_dp (free it first)");
    if (bucket_bytes == 0) bucket_bytes = (int64_t)25 << 20;
    cap = bucket_bytes / 4;
    if (cap < 1) cap = 1;
    n = ctx->nparams;
    dp = (pt_dp *)PT_MALLOC(sizeof *dp);
    if (!dp) return (pt_dp *)pt__fail(ctx, PT_ERR_OOM, "pt_dp_new: out of memory");
    memset(dp, 0, sizeof *dp);
    dp->ctx = ctx;
    dp->nparams = n;
    dp->dpsize = 1;
    dp->nphases = 1;
    dp->zhi = ctx->slab_n;
#ifdef PTRAIN_MPI
    dp->comm = dp->node = dp->node2 = dp->cross = dp->agree = MPI_COMM_NULL;
    dp->bf16sum = MPI_OP_NULL;
    if (d) {
        int s = 1;
        dp->comm = *(MPI_Comm *)pt_dist_comm(d, PT_COMM_DP);
        if (dp->comm == MPI_COMM_NULL || MPI_Comm_size(dp->comm, &s) != MPI_SUCCESS) {
            PT_FREE(dp);
            return (pt_dp *)pt__fail(ctx, PT_ERR_STATE, "pt_dp_new: the grid has no usable DP communicator");
        }
        dp->dpsize = s;
        dp->dist = d;
        MPI_Comm_rank(dp->comm, &dp->dprank);
    }
#else
    (void)d;
#endif
    /* the arrays: at most one bucket per parameter */
    dp->lo = (int64_t *)PT_MALLOC(sizeof(int64_t) * (size_t)(n + 1));
    dp->hi = (int64_t *)PT_MALLOC(sizeof(int64_t) * (size_t)(n + 1));
    dp->p0 = (int *)PT_MALLOC(sizeof(int) * (size_t)(n + 1));
    dp->p1 = (int *)PT_MALLOC(sizeof(int) * (size_t)(n + 1));
    dp->bucket_of = (int *)PT_MALLOC(sizeof(int) * (size_t)(n + 1));
    dp->fired = (int *)PT_MALLOC(sizeof(int) * (size_t)(n + 1));
    if (!dp->lo || !dp->hi || !dp->p0 || !dp->p1 || !dp->bucket_of || !dp->fired) goto oom;
    /* cut: reverse creation order = descending slab offsets */
    open_b = 0;
    for (i = n - 1; i >= 0; i--) {
        pt_param *p = ctx->params[i];
        int64_t slice_n = (pt_numel(&p->grad) + 15) & ~(int64_t)15;
        if (p->spec.flags & PT_PARAM_FROZEN) {
            dp->bucket_of[i] = -1;
            open_b = 0; /* a frozen slice ends the open bucket */
            continue;
        }
        if (slice_n > 0x7fffffff) {
            pt_dp_free(dp);
            return (pt_dp *)pt__fail(ctx, PT_ERR_ARG, "pt_dp_new: parameter '%s' has more than 2^31-1 elements", p->spec.name);
        }
        b = dp->nb - 1;
        if (open_b && dp->hi[b] - p->slab_off <= cap && dp->lo[b] == p->slab_off + slice_n) {
            dp->lo[b] = p->slab_off; /* extend the open bucket downwards */
        } else {
            b = dp->nb++;
            dp->lo[b] = p->slab_off;
            dp->hi[b] = p->slab_off + slice_n;
            dp->p1[b] = i;
            open_b = 1;
        }
        dp->p0[b] = i;
        dp->bucket_of[i] = b;
    }
    dp->stats.buckets = dp->nb;
    dp->hier = opts->hier;
    dp->compress = opts->compress;
#ifdef PTRAIN_MPI
    if (dp->dpsize > 1) {
        int mm[2], rc = MPI_SUCCESS;
        uint64_t s;
        if (MPI_Comm_dup(dp->comm, &dp->agree) != MPI_SUCCESS) goto mpi_fail;
        if (dp->compress) {
            if (MPI_Op_create(pt__dp_bf16_sum, 1, &dp->bf16sum) != MPI_SUCCESS) goto mpi_fail;
            if (!(dp->resid = (float *)PT_MALLOC((size_t)PT__MAX(ctx->slab_n, 1) * 4))) goto oom;
            memset(dp->resid, 0, (size_t)ctx->slab_n * 4);
            /* part of the training state: checkpoints keep it per rank (exact resume on the same layout) */
            if (ctx->slab_n > 0 && pt_state_register_flags(ctx, "dp.bf16_residual", dp->resid, ctx->slab_n * 4, PT_STATE_PER_RANK) != PT_OK)
                goto fail_state;
        }
        if (dp->hier) { /* DP sub-communicators: by node, then by index within the node */
            int wr = pt_dist_rank(d), r;
            if (MPI_Comm_split(dp->comm, pt_dist_node_of(d, wr), dp->dprank, &dp->node) != MPI_SUCCESS) goto mpi_fail;
            MPI_Comm_size(dp->node, &dp->lsize);
            MPI_Comm_rank(dp->node, &dp->lrank);
            if (MPI_Comm_split(dp->comm, dp->lrank, dp->dprank, &dp->cross) != MPI_SUCCESS || MPI_Comm_dup(dp->node, &dp->node2) != MPI_SUCCESS)
                goto mpi_fail;
            mm[0] = dp->lsize, mm[1] = -dp->lsize;
            s = pt__coll_begin(d, PT_COLL_ALLREDUCE, PT_COMM_DP, 2, PT_COLL_I32, -1);
            rc = pt__coll_end(d, s, s ? MPI_Allreduce(MPI_IN_PLACE, mm, 2, MPI_INT, MPI_MIN, dp->comm) : PT__COLL_REFUSED);
            if (rc != MPI_SUCCESS) {
                pt_dp_free(dp);
                return (pt_dp *)pt__fail(ctx, PT_ERR_DEVICE, "pt_dp_new_opts: the agreement on the DP ranks per node failed: %s", pt__coll_why(d, rc));
            }
            if (mm[0] != -mm[1]) {
                pt_dp_free(dp);
                return (pt_dp *)pt__fail(ctx, PT_ERR_ARG, "pt_dp_new_opts: hier needs the same number of DP ranks on every node (found %d..%d)", mm[0], -mm[1]);
            }
            dp->hcnt = (int *)PT_MALLOC(sizeof(int) * (size_t)dp->nb * dp->lsize + 1);
            dp->hdispl = (int *)PT_MALLOC(sizeof(int) * (size_t)dp->nb * dp->lsize + 1);
            if (!dp->hcnt || !dp->hdispl) goto oom;
            for (b = 0; b < dp->nb; b++)
                for (r = 0; r < dp->lsize; r++) {
                    int64_t m = dp->hi[b] - dp->lo[b], a = m * r / dp->lsize, e = m * (r + 1) / dp->lsize;
                    dp->hdispl[(size_t)b * dp->lsize + r] = (int)a;
                    dp->hcnt[(size_t)b * dp->lsize + r] = (int)(e - a);
                }
        }
        if (ctx->gslab && !ctx->gslab->host && !(dp->hg = (float *)PT_MALLOC((size_t)PT__MAX(ctx->slab_n, 1) * 4))) goto oom;
        if (pt__dp_alloc_stage(dp) != PT_OK) {
            pt_dp_free(dp);
            return NULL;
        }
        pt_set_grad_hook(ctx, pt__dp_hook, dp);
        pt_set_backward_poll(ctx, pt__dp_poll, dp);
    }
    pt__dp_account(dp);
#endif
    ctx->dp = dp;
    ctx->grad_range = pt__dp_grad_range, ctx->dp_sum = pt__dp_sum;
    return dp;
#ifdef PTRAIN_MPI
mpi_fail:
    pt_dp_free(dp);
    return (pt_dp *)pt__fail(ctx, PT_ERR_DEVICE, "pt_dp_new_opts: creating the MPI operator or the hierarchical communicators failed");
fail_state: /* the registry's message is in ctx */
    pt_dp_free(dp);
    return NULL;
#endif
oom:
    pt_dp_free(dp);
    return (pt_dp *)pt__fail(ctx, PT_ERR_OOM, "pt_dp_new: out of memory");
}

/* o still in ctx's optimizer list (it may have been freed before dp) */
static int pt__dp_optim_alive(pt_dp *dp, pt_optim *o) {
    pt_optim *q;
    for (q = dp->ctx->optims; q; q = q->next)
        if (q == o) return 1;
    return 0;
}

PTDEF void pt_dp_free(pt_dp *dp) {
    if (!dp) return;
    if (dp->zopt && pt__dp_optim_alive(dp, dp->zopt) && dp->zopt->post_user == (void *)dp) {
        dp->zopt->post_step = NULL;
        dp->zopt->post_user = NULL;
    }
    if (dp->ctx->dp == dp) dp->ctx->dp = NULL, dp->ctx->grad_range = NULL, dp->ctx->dp_sum = NULL;
#ifdef PTRAIN_MPI
    if (dp->reducing && dp->ops) (void)pt__dp_complete(dp);
    if (dp->dpsize > 1 && dp->ctx->grad_hook == pt__dp_hook && dp->ctx->grad_hook_user == (void *)dp)
        pt_set_grad_hook(dp->ctx, NULL, NULL);
    if (dp->dpsize > 1 && dp->ctx->poll == pt__dp_poll && dp->ctx->poll_user == (void *)dp)
        pt_set_backward_poll(dp->ctx, NULL, NULL);
    if (dp->dist && dp->node != MPI_COMM_NULL) { /* unregister what debug mode's agreements ran on */
        pt_dist *d = (pt_dist *)dp->dist;
        if (d->comm[PT_COMM_DP_NODE] == dp->node) d->comm[PT_COMM_DP_NODE] = MPI_COMM_NULL;
        if (d->comm[PT_COMM_DP_CROSS] == dp->cross) d->comm[PT_COMM_DP_CROSS] = MPI_COMM_NULL;
    }
    if (dp->node != MPI_COMM_NULL) MPI_Comm_free(&dp->node);
    if (dp->agree != MPI_COMM_NULL) MPI_Comm_free(&dp->agree);
    if (dp->node2 != MPI_COMM_NULL) MPI_Comm_free(&dp->node2);
    if (dp->cross != MPI_COMM_NULL) MPI_Comm_free(&dp->cross);
    if (dp->bf16sum != MPI_OP_NULL) MPI_Op_free(&dp->bf16sum);
    PT_FREE(dp->zcnt);
    PT_FREE(dp->zdispl);
    PT_FREE(dp->bcnt);
    PT_FREE(dp->hcnt);
    PT_FREE(dp->hdispl);
#endif
    PT_FREE(dp->lo);
    PT_FREE(dp->hi);
    PT_FREE(dp->p0);
    PT_FREE(dp->p1);
    PT_FREE(dp->bucket_of);
    PT_FREE(dp->fired);
    PT_FREE(dp->ops);
    PT_FREE(dp->acc);
    if (dp->resid) pt__state_unregister(dp->ctx, dp->resid);
    PT_FREE(dp->resid);
    PT_FREE(dp->stg);
    PT_FREE(dp->hg);
    PT_FREE(dp);
}

PTDEF void pt_dp_begin_step(pt_dp *dp, int passes) {
    if (!dp || dp->dpsize <= 1) return;
    if (passes < 1) {
        pt__fail(dp->ctx, PT_ERR_ARG, "pt_dp_begin_step: passes must be >= 1, got %d", passes);
        return;
    }
#ifdef PTRAIN_MPI
    if (dp->reducing) (void)pt__dp_complete(dp); /* a step never finished: drain it first */
    dp->rounds = dp->stage == 2 ? passes : 1;
    if ((int64_t)dp->rounds * dp->nb > 0x7fffffff) {
        pt__fail(dp->ctx, PT_ERR_ARG, "pt_dp_begin_step: %d passes x %d buckets is too many reductions", passes, dp->nb);
        return;
    }
    if (dp->rounds * dp->nb > dp->cap_ops) {
        pt__dp_op *ops = (pt__dp_op *)PT_REALLOC(dp->ops, sizeof *ops * (size_t)(dp->rounds * dp->nb));
        if (!ops) {
            pt__fail(dp->ctx, PT_ERR_OOM, "pt_dp_begin_step: out of memory");
            return;
        }
        dp->ops = ops, dp->cap_ops = dp->rounds * dp->nb;
    }
    dp->passes = passes;
    dp->nphases = dp->hier && dp->stage == 0 ? 3 : 1; /* hierarchical: the allreduce path only */
    dp->nseq = dp->rounds * dp->nb;
    dp->next = dp->retired = dp->fetched = 0, dp->failed = 0;
    dp->stg_head = 0;
    memset(dp->fired, 0, sizeof(int) * (size_t)dp->nparams);
    if (dp->acc) memset(dp->acc, 0, (size_t)(dp->zhi - dp->zlo) * 4);
    dp->reducing = 1;
#endif
}

PTDEF void pt_dp_begin(pt_dp *dp, int reduce_now) {
    if (!dp || dp->dpsize <= 1) return;
    if (reduce_now) {
        pt_dp_begin_step(dp, 1);
        return;
    }
#ifdef PTRAIN_MPI
    if (dp->reducing) (void)pt__dp_complete(dp);
#endif
    dp->reducing = 0;
}

PTDEF pt_status pt_dp_finish(pt_dp *dp) {
    if (!dp) return PT_ERR_ARG;
    if (dp->dpsize <= 1 || !dp->reducing) return PT_OK;
#ifdef PTRAIN_MPI
    {
        double tw = dp->ctx->trace ? pt_time() : 0.0;
        pt_status st = pt__dp_complete(dp);
        float *g, inv = (float)dp->dpsize;
        if (dp->ctx->trace) pt__trace_span(dp->ctx, PT_TRACE_COMM, "dp_wait", tw, PT_COMM_DP); /* trace */
        int k;
        int64_t i;
        dp->reducing = 0;
        if (st != PT_OK) return st;
        if (dp->ctx->nparams != dp->nparams)
            return (pt_status)(pt__fail(dp->ctx, PT_ERR_STATE, "pt_dp_finish: parameters were created after pt_dp_new (%d, now %d)",
                                        dp->nparams, dp->ctx->nparams),
                               PT_ERR_STATE);
        if (!(g = pt__dp_grads(dp))) return PT_ERR_STATE;
        for (k = 0; k < dp->nb; k++) { /* the sum over ranks, then one scale (ZeRO: only my shard holds it) */
            int64_t a = dp->stage ? PT__MAX(dp->lo[k], dp->zlo) : dp->lo[k], e = dp->stage ? PT__MIN(dp->hi[k], dp->zhi) : dp->hi[k];
            const float *src = dp->stage == 2 ? dp->acc + (a - dp->zlo) : g + a;
            float *dst = g + a;
            int64_t n = e - a, nch = (n + PT__CPU_CHUNK - 1) / PT__CPU_CHUNK;
            (void)i;
            PT__CPU_PAR_FOR(dp->ctx, n) /* threaded like the CPU kernels: a pass over the gradient costs */
            for (int64_t c = 0; c < nch; c++) {
                int64_t i0 = c * PT__CPU_CHUNK, i1 = PT__MIN(n, i0 + PT__CPU_CHUNK), j;
                for (j = i0; j < i1; j++) dst[j] = src[j] / inv;
            }
            if (dp->hg) pt__stage_xfer(dp->ctx, dp->ctx->gslab, a, dst, n, 0, PT_XFER_DP); /* back to the device */
        }
        if (dp->hg && dp->ctx->status != PT_OK) return dp->ctx->status;
    }
#endif
    return PT_OK;
}

PTDEF pt_dp_stats pt_dp_stats_get(const pt_dp *dp) {
    pt_dp_stats s;
    if (dp) return dp->stats;
    memset(&s, 0, sizeof s);
    return s;
}

/* ---- ZeRO: optimizer state (1) and accumulated gradients (2) sharded over the DP ranks -----------
   DP rank r owns the slab range [lo_r, hi_r): the slab cut in dp equal parts, boundaries rounded
   down to 16 floats (slices are 64-byte aligned), the last rank takes the rest; the same on every
   rank. Each bucket is reduce-scattered: rank r receives the sum of the bucket's intersection with
   its range (counts per rank; an in-place MPI_Ireduce_scatter leaves it at the bucket's start, from
   where it is moved to its slab place, ZeRO-1, or added to the shard accumulator, ZeRO-2). After
   pt_dp_finish only [lo_r, hi_r) of the gradient slab holds the averaged gradient; pt_grad_norm
   sums the shards' squares over DP (pt__grad_sumsq). pt_optim_step updates the own range with the
   own moment shard, then post_step allgathers the parameter slab in place over DP. */
#ifdef PTRAIN_MPI
/* Every DP rank's shard [zdispl[r], +zcnt[r]) of the slab storage st (slab_n floats) to every DP
   rank, in place. A device backend stages through the host mirror hg: the own shard is read, the
   other ranks' parts are written back (PT_XFER_DP). `what` names the slab in messages. */
static pt_status pt__dp_allgather_slab(pt_dp *dp, pt_storage *st, const char *fn, const char *what) {
    pt_ctx *ctx = dp->ctx;
    int64_t n = ctx->slab_n, lo = dp->zdispl[dp->dprank], hi = lo + dp->zcnt[dp->dprank];
    float *p = st->host ? (float *)st->host : dp->hg;
    uint64_t s;
    int rc;
    if (!p) return (pt_status)(pt__fail(ctx, PT_ERR_STATE, "%s: the %s has no host memory", fn, what), PT_ERR_STATE);
    if (!st->host) pt__stage_xfer(ctx, st, lo, p + lo, hi - lo, 1, PT_XFER_DP);
    if (ctx->status != PT_OK) return ctx->status;
    s = pt__coll_begin(dp->dist, PT_COLL_ALLGATHERV, PT_COMM_DP, n, PT_COLL_F32, -1);
    rc = pt__coll_end(dp->dist, s, s ? MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, p, dp->zcnt, dp->zdispl, MPI_FLOAT, dp->comm) : PT__COLL_REFUSED);
    if (rc != MPI_SUCCESS)
        return (pt_status)(pt__fail(ctx, PT_ERR_DEVICE, "%s: the allgather of the %s failed: %s", fn, what, pt__coll_why(dp->dist, rc)), PT_ERR_DEVICE);
    if (!st->host) { /* the other ranks' parts: before and after the own shard */
        pt__stage_xfer(ctx, st, 0, p, lo, 0, PT_XFER_DP);
        pt__stage_xfer(ctx, st, hi, p + hi, n - hi, 0, PT_XFER_DP);
    }
    return ctx->status;
}
static pt_status pt__dp_zero_gather(void *user) {
    pt_dp *dp = (pt_dp *)user;
    return pt__dp_allgather_slab(dp, dp->ctx->pslab, "pt_dp (ZeRO)", "parameters");
}
#endif

PTDEF pt_status pt_dp_zero(pt_dp *dp, pt_optim *o, int stage) {
    pt_ctx *ctx;
    int64_t lo = 0, hi;
    if (!dp || !o) return PT_ERR_ARG;
    ctx = dp->ctx;
    if (o->ctx != ctx) return (pt_status)(pt__fail(ctx, PT_ERR_ARG, "pt_dp_zero: the optimizer belongs to another context"), PT_ERR_ARG);
    if (stage < 0 || stage > 2)
        return (pt_status)(pt__fail(ctx, PT_ERR_ARG, "pt_dp_zero: stage %d (expected 0, 1 or 2)", stage), PT_ERR_ARG);
    if (stage && dp->zopt && dp->zopt != o && pt__dp_optim_alive(dp, dp->zopt))
        return (pt_status)(pt__fail(ctx, PT_ERR_STATE, "pt_dp_zero: another optimizer is already sharded over this pt_dp"), PT_ERR_STATE);
    if (dp->reducing)
        return (pt_status)(pt__fail(ctx, PT_ERR_STATE, "pt_dp_zero: a step is open (call it between pt_dp_finish and the next step)"), PT_ERR_STATE);
    hi = ctx->slab_n;
    if (dp->dpsize <= 1) return pt__optim_reshard(o, lo, hi); /* one rank: the shard is the whole slab */
#ifdef PTRAIN_MPI
    {
        int r, b, me = dp->dprank, n = dp->dpsize;
        pt_status st;
        if (ctx->slab_n > 0x7fffffff)
            return (pt_status)(pt__fail(ctx, PT_ERR_ARG, "pt_dp_zero: slab of %lld floats exceeds MPI's int counts", (long long)ctx->slab_n),
                               PT_ERR_ARG);
        if (!dp->zcnt) {
            dp->zcnt = (int *)PT_MALLOC(sizeof(int) * (size_t)n);
            dp->zdispl = (int *)PT_MALLOC(sizeof(int) * (size_t)n);
            dp->bcnt = (int *)PT_MALLOC(sizeof(int) * (size_t)n * (size_t)(dp->nb + 1));
            if (!dp->zcnt || !dp->zdispl || !dp->bcnt) return (pt_status)(pt__fail(ctx, PT_ERR_OOM, "pt_dp_zero: out of memory"), PT_ERR_OOM);
            for (r = 0; r < n; r++) {
                int64_t a, e;
                pt__dp_zero_range(ctx->slab_n, r, n, &a, &e);
                dp->zdispl[r] = (int)a;
                dp->zcnt[r] = (int)(e - a);
                for (b = 0; b < dp->nb; b++)
                    dp->bcnt[(size_t)b * n + r] = (int)PT__MAX(0, PT__MIN(dp->hi[b], e) - PT__MAX(dp->lo[b], a));
            }
        }
        if (stage) {
            st = pt__optim_reshard(o, dp->zdispl[me], (int64_t)dp->zdispl[me] + dp->zcnt[me]);
            if (st != PT_OK) return st;
            o->post_step = pt__dp_zero_gather;
            o->post_user = dp;
            dp->zopt = o;
            dp->zlo = dp->zdispl[me], dp->zhi = (int64_t)dp->zdispl[me] + dp->zcnt[me];
            PT_FREE(dp->acc);
            dp->acc = NULL;
            if (stage == 2 && !(dp->acc = (float *)PT_MALLOC((size_t)PT__MAX(dp->zhi - dp->zlo, 1) * 4)))
                return (pt_status)(pt__fail(ctx, PT_ERR_OOM, "pt_dp_zero: out of memory for the gradient shard"), PT_ERR_OOM);
            dp->stage = stage;
            st = pt__dp_alloc_stage(dp);
            pt__dp_account(dp);
            return st;
        }
        /* stage 0: gather the state shards back into full slabs */
        dp->stage = 0;
        dp->zlo = 0, dp->zhi = hi;
        PT_FREE(dp->acc);
        dp->acc = NULL;
        st = pt__dp_alloc_stage(dp);
        pt__dp_account(dp);
        if (st != PT_OK) return st;
        if (o->zlo == 0 && o->zhi == hi) return PT_OK;
        if (o->zlo != dp->zdispl[me] || o->zhi != (int64_t)dp->zdispl[me] + dp->zcnt[me])
            return (pt_status)(pt__fail(ctx, PT_ERR_STATE, "pt_dp_zero: the optimizer is not sharded over this pt_dp"), PT_ERR_STATE);
        st = pt__optim_reshard(o, 0, hi);
        if (st != PT_OK) return st;
        for (r = 0; r < 2; r++) {
            pt_storage *s = r ? &o->v : &o->m;
            if (!s->raw && !s->dev) continue;
            if ((st = pt__dp_allgather_slab(dp, s, "pt_dp_zero", "optimizer state")) != PT_OK) return st;
        }
        if (o->post_user == (void *)dp) o->post_step = NULL, o->post_user = NULL;
        if (dp->zopt == o) dp->zopt = NULL;
        return PT_OK;
    }
#else
    return PT_OK;
#endif
}

// >>pipeline  pipeline schedules as data: generate, check, simulate, print
/* Owns: pt_pp_schedule (per-rank instruction lists for GPipe, 1F1B, interleaved 1F1B, forward-only)
   Invariants: a schedule is checked (matching sends, order rules, no deadlock) before it runs
   Entry points: pt_pp_schedule_new pt_pp_schedule_check pt_pp_schedule_simulate
   pt_pp_schedule_print */
/* =================================================================================================
   pipeline schedules as data: GPipe, 1F1B, interleaved 1F1B, forward-only; a checker,
   an event simulation and a timeline table
   =================================================================================================
   A schedule is built in two steps: first the order of the compute operations on each rank (a list
   of (F|B, micro-batch, chunk)), then each one is expanded into receive, compute, send (a forward:
   RECV_ACT from the previous stage's rank, FWD, SEND_ACT to the next; a backward: RECV_GRAD from
   the next, BWD, SEND_GRAD to the previous; transfers between stages of one rank are dropped).
   Receives are issued right before the compute that needs them and sends right after the compute
   that produced the data, so with buffered sends the only waits are the data dependencies.
   Interleaved order (Megatron): the k-th forward of a rank (k = 0..m*v-1) runs chunk (k/p)%v of
   micro-batch (k/(p*v))*p + k%p, the k-th backward chunk v-1-(k/p)%v of the same micro-batch
   formula; warm-up (p-r-1)*2 + (v-1)*p forwards (at most m*v), then forward warm-up+i and backward
   i alternate, then the remaining backwards. 1F1B is the same with v = 1 and warm-up p-r-1.
   Messages are keyed by (micro-batch, source stage); the checker and the simulation both run the
   programs in sweeps over the ranks, each rank advancing until a receive whose send has not run. */

struct pt_pp_schedule {
    int kind, p, m, v;
    int *count;         /* [p] instructions per rank */
    int *warmup;        /* [p] warm-up forwards as built, -1 for pt_pp_schedule_from */
    pt_pp_instr **prog; /* [p] programs */
};


static const char *pt__pp_kind_name(int kind) {
    switch (kind) {
    case PT_PP_GPIPE: return "GPipe";
    case PT_PP_1F1B: return "1F1B";
    case PT_PP_INTERLEAVED: return "interleaved 1F1B";
    case PT_PP_FORWARD_ONLY: return "forward-only";
    default: return "unknown";
    }
}

static const char *pt__pp_op_name(int op) {
    static const char *const names[] = {"FWD", "BWD", "SEND_ACT", "RECV_ACT", "SEND_GRAD", "RECV_GRAD", "OPTIM"};
    return op >= 0 && op <= PT_PP_OPTIM ? names[op] : "bad op";
}

/* 1 if the arguments are valid, else 0 and a message */
static int pt__pp_args(int kind, int p, int m, int v, char *err, size_t errlen) {
    if (kind < PT_PP_GPIPE || kind > PT_PP_FORWARD_ONLY) {
        pt__msg(err, errlen, "pipeline schedule: unknown kind %d (PT_PP_GPIPE, PT_PP_1F1B, PT_PP_INTERLEAVED, PT_PP_FORWARD_ONLY)", kind);
        return 0;
    }
    if (p < 1 || m < 1 || v < 1) {
        pt__msg(err, errlen, "pipeline schedule: need p >= 1 ranks, m >= 1 micro-batches, v >= 1 virtual stages (got p = %d, m = %d, v = %d)", p, m, v);
        return 0;
    }
    if (kind != PT_PP_INTERLEAVED && kind != PT_PP_FORWARD_ONLY && v != 1) {
        pt__msg(err, errlen, "pipeline schedule: %s needs v = 1 virtual stage per rank (got v = %d); only PT_PP_INTERLEAVED (and forward-only) take v >= 2",
                   pt__pp_kind_name(kind), v);
        return 0;
    }
    if (kind == PT_PP_INTERLEAVED && v < 2) {
        pt__msg(err, errlen, "pipeline schedule: interleaved 1F1B needs v >= 2 virtual stages per rank (got v = %d; use PT_PP_1F1B for v = 1)", v);
        return 0;
    }
    if (kind == PT_PP_INTERLEAVED && m % p != 0) {
        pt__msg(err, errlen, "pipeline schedule: interleaved 1F1B needs the micro-batches to be a multiple of the ranks (m = %d is not a multiple of p = %d)", m, p);
        return 0;
    }
    if ((double)p * m * v > 16777216.0) {
        pt__msg(err, errlen, "pipeline schedule: p*m*v = %d*%d*%d too large (at most 2^24)", p, m, v);
        return 0;
    }
    return 1;
}

/* an empty schedule with room for cap[r] instructions on rank r (cap NULL: cap1 each); NULL on OOM */
static pt_pp_schedule *pt__pp_alloc(int kind, int p, int m, int v, const int *cap, int cap1, char *err, size_t errlen) {
    pt_pp_schedule *s = (pt_pp_schedule *)PT_MALLOC(sizeof *s);
    int r, ok = 1;
    if (!s) goto oom;
    s->kind = kind, s->p = p, s->m = m, s->v = v;
    s->count = (int *)PT_MALLOC(sizeof(int) * (size_t)p);
    s->warmup = (int *)PT_MALLOC(sizeof(int) * (size_t)p);
    s->prog = (pt_pp_instr **)PT_MALLOC(sizeof(pt_pp_instr *) * (size_t)p);
    if (!s->count || !s->warmup || !s->prog) {
        if (s->count) PT_FREE(s->count);
        if (s->warmup) PT_FREE(s->warmup);
        if (s->prog) PT_FREE(s->prog);
        PT_FREE(s);
        goto oom;
    }
    for (r = 0; r < p; r++) {
        s->count[r] = 0, s->warmup[r] = -1;
        int c = cap ? cap[r] : cap1;
        s->prog[r] = (pt_pp_instr *)PT_MALLOC(sizeof(pt_pp_instr) * (size_t)(c > 0 ? c : 1));
        if (!s->prog[r]) ok = 0;
    }
    if (!ok) {
        pt_pp_schedule_free(s);
        goto oom;
    }
    return s;
oom:
    pt__msg(err, errlen, "pipeline schedule: out of memory (p = %d, m = %d, v = %d)", p, m, v);
    return NULL;
}

PTDEF void pt_pp_schedule_free(pt_pp_schedule *s) {
    int r;
    if (!s) return;
    for (r = 0; r < s->p; r++)
        if (s->prog[r]) PT_FREE(s->prog[r]);
    PT_FREE(s->prog);
    PT_FREE(s->count);
    PT_FREE(s->warmup);
    PT_FREE(s);
}

static void pt__pp_emit(pt_pp_schedule *s, int r, int op, int mb, int chunk, int peer) {
    pt_pp_instr *in = &s->prog[r][s->count[r]++];
    in->op = op, in->mb = mb, in->chunk = chunk, in->peer = peer;
}

/* appends one compute op (fwd or bwd of mb, chunk on rank r) with its receive and send */
static void pt__pp_compute(pt_pp_schedule *s, int r, int fwd, int mb, int chunk) {
    int p = s->p, st = chunk * p + r, nst = s->v * p;
    if (fwd) {
        if (st > 0 && (st - 1) % p != r) pt__pp_emit(s, r, PT_PP_RECV_ACT, mb, chunk, (st - 1) % p);
        pt__pp_emit(s, r, PT_PP_FWD, mb, chunk, -1);
        if (st < nst - 1 && (st + 1) % p != r) pt__pp_emit(s, r, PT_PP_SEND_ACT, mb, chunk, (st + 1) % p);
    } else {
        if (st < nst - 1 && (st + 1) % p != r) pt__pp_emit(s, r, PT_PP_RECV_GRAD, mb, chunk, (st + 1) % p);
        pt__pp_emit(s, r, PT_PP_BWD, mb, chunk, -1);
        if (st > 0 && (st - 1) % p != r) pt__pp_emit(s, r, PT_PP_SEND_GRAD, mb, chunk, (st - 1) % p);
    }
}

/* (micro-batch, chunk) of the k-th forward (fwd) or backward of a rank, Megatron's order */
static void pt__pp_order(int p, int v, int k, int fwd, int *mb, int *chunk) {
    int c = (k / p) % v;
    *chunk = fwd ? c : v - 1 - c;
    *mb = (k / (p * v)) * p + k % p;
}

PTDEF pt_pp_schedule *pt_pp_schedule_new(int kind, int p, int m, int v, char *err, size_t errlen) {
    pt_pp_schedule *s;
    int r, k, n;
    if (!pt__pp_args(kind, p, m, v, err, errlen)) return NULL;
    s = pt__pp_alloc(kind, p, m, v, NULL, 6 * m * v + 1, err, errlen);
    if (!s) return NULL;
    n = m * v; /* compute ops of each kind per rank */
    for (r = 0; r < p; r++) {
        int mb, ch, warm;
        if (kind == PT_PP_GPIPE || kind == PT_PP_FORWARD_ONLY) {
            for (ch = 0; ch < v; ch++) /* forward-only may run v chunks: chunk by chunk */
                for (k = 0; k < m; k++) pt__pp_compute(s, r, 1, k, ch);
            if (kind == PT_PP_GPIPE)
                for (k = 0; k < m; k++) pt__pp_compute(s, r, 0, k, 0);
            s->warmup[r] = m;
        } else {
            warm = kind == PT_PP_1F1B ? p - r - 1 : (p - r - 1) * 2 + (v - 1) * p;
            if (warm > n) warm = n;
            s->warmup[r] = warm;
            for (k = 0; k < warm; k++) {
                pt__pp_order(p, v, k, 1, &mb, &ch);
                pt__pp_compute(s, r, 1, mb, ch);
            }
            for (k = 0; k < n - warm; k++) {
                pt__pp_order(p, v, warm + k, 1, &mb, &ch);
                pt__pp_compute(s, r, 1, mb, ch);
                pt__pp_order(p, v, k, 0, &mb, &ch);
                pt__pp_compute(s, r, 0, mb, ch);
            }
            for (k = n - warm; k < n; k++) {
                pt__pp_order(p, v, k, 0, &mb, &ch);
                pt__pp_compute(s, r, 0, mb, ch);
            }
        }
        if (kind != PT_PP_FORWARD_ONLY) pt__pp_emit(s, r, PT_PP_OPTIM, -1, -1, -1);
    }
    return s;
}

PTDEF pt_pp_schedule *pt_pp_schedule_from(int kind, int p, int m, int v, const int *counts,
                                          const pt_pp_instr *const *progs, char *err, size_t errlen) {
    pt_pp_schedule *s;
    int r;
    if (!pt__pp_args(kind, p, m, v, err, errlen)) return NULL;
    if (!counts || !progs) {
        pt__msg(err, errlen, "pt_pp_schedule_from: NULL counts or programs");
        return NULL;
    }
    for (r = 0; r < p; r++)
        if (counts[r] < 0 || (counts[r] > 0 && !progs[r])) {
            pt__msg(err, errlen, "pt_pp_schedule_from: rank %d has count %d and program %p", r, counts[r], (const void *)progs[r]);
            return NULL;
        }
    s = pt__pp_alloc(kind, p, m, v, counts, 0, err, errlen);
    if (!s) return NULL;
    for (r = 0; r < p; r++) {
        if (counts[r] > 0) memcpy(s->prog[r], progs[r], sizeof(pt_pp_instr) * (size_t)counts[r]);
        s->count[r] = counts[r];
    }
    return s;
}

PTDEF void pt_pp_schedule_shape(const pt_pp_schedule *s, int *kind, int *p, int *m, int *v) {
    if (kind) *kind = s ? s->kind : -1;
    if (p) *p = s ? s->p : 0;
    if (m) *m = s ? s->m : 0;
    if (v) *v = s ? s->v : 0;
}
PTDEF int pt_pp_schedule_count(const pt_pp_schedule *s, int rank) {
    return s && rank >= 0 && rank < s->p ? s->count[rank] : 0;
}
PTDEF const pt_pp_instr *pt_pp_schedule_instrs(const pt_pp_schedule *s, int rank) {
    return s && rank >= 0 && rank < s->p ? s->prog[rank] : NULL;
}
PTDEF int pt_pp_schedule_warmup(const pt_pp_schedule *s, int rank) {
    return s && rank >= 0 && rank < s->p ? s->warmup[rank] : -1;
}
PTDEF int pt_pp_schedule_peak_inflight(const pt_pp_schedule *s, int rank) {
    int i, cur = 0, peak = 0;
    if (!s || rank < 0 || rank >= s->p) return 0;
    for (i = 0; i < s->count[rank]; i++) {
        if (s->prog[rank][i].op == PT_PP_FWD) cur++;
        if (s->prog[rank][i].op == PT_PP_BWD) cur--;
        if (cur > peak) peak = cur;
    }
    return peak;
}

PTDEF double pt_pp_bubble_theory(int p, int m, int v) {
    if (p < 1 || m < 1 || v < 1) return 0.0;
    return (double)(p - 1) / ((double)v * m + p - 1);
}

/* ---- the simulation shared by the checker, pt_pp_schedule_simulate and the table ---------------- */

/* message slot of a send/receive instruction of rank r: (mb, source stage), act and grad apart;
   -1 if it names no valid transfer (bad stage, same rank, wrong peer) */
static int64_t pt__pp_key(const pt_pp_schedule *s, int r, const pt_pp_instr *in) {
    int p = s->p, nst = s->v * p, st = in->chunk * p + r, src, dst;
    if (in->mb < 0 || in->mb >= s->m || in->chunk < 0 || in->chunk >= s->v) return -1;
    switch (in->op) {
    case PT_PP_SEND_ACT: src = st, dst = st + 1; break;
    case PT_PP_RECV_ACT: src = st - 1, dst = st; break;
    case PT_PP_SEND_GRAD: src = st, dst = st - 1; break;
    case PT_PP_RECV_GRAD: src = st + 1, dst = st; break;
    default: return -1;
    }
    if (src < 0 || src >= nst || dst < 0 || dst >= nst || src % p == dst % p) return -1;
    if (in->peer != ((in->op == PT_PP_SEND_ACT || in->op == PT_PP_SEND_GRAD) ? dst : src) % p) return -1;
    return ((int64_t)(in->op == PT_PP_SEND_GRAD || in->op == PT_PP_RECV_GRAD) * s->m + in->mb) * nst + src;
}

/* runs the programs: compute costs tf / tb, transfers free, a receive waits for its send. start[]
   (total instructions, rank-major; may be NULL) gets each instruction's start time. Returns 1 if
   every rank finished, 0 on deadlock (*stuck_rank, *stuck_pc: the first blocked rank and its
   receive), -1 on a malformed instruction or OOM. */
static int pt__pp_run(const pt_pp_schedule *s, double tf, double tb, double *start, double *makespan,
                      double *busy, int *stuck_rank, int *stuck_pc) {
    int p = s->p, r, progress, left, rc = 1;
    int64_t nkey = (int64_t)2 * s->m * s->v * p, k, *base;
    double *sent = (double *)PT_MALLOC(sizeof(double) * (size_t)nkey);
    double *clock = (double *)PT_MALLOC(sizeof(double) * (size_t)p);
    int *pc = (int *)PT_MALLOC(sizeof(int) * (size_t)p);
    base = (int64_t *)PT_MALLOC(sizeof(int64_t) * (size_t)p);
    if (!sent || !clock || !pc || !base) {
        rc = -1;
        goto done;
    }
    for (k = 0; k < nkey; k++) sent[k] = -1.0;
    for (r = 0; r < p; r++) clock[r] = 0.0, pc[r] = 0, base[r] = r ? base[r - 1] + s->count[r - 1] : 0;
    *busy = 0.0;
    do {
        progress = 0, left = 0;
        for (r = 0; r < p; r++) {
            while (pc[r] < s->count[r]) {
                const pt_pp_instr *in = &s->prog[r][pc[r]];
                if (in->op == PT_PP_FWD || in->op == PT_PP_BWD) {
                    double c = in->op == PT_PP_FWD ? tf : tb;
                    if (start) start[base[r] + pc[r]] = clock[r];
                    clock[r] += c, *busy += c;
                } else if (in->op == PT_PP_OPTIM) {
                    if (start) start[base[r] + pc[r]] = clock[r];
                } else {
                    k = pt__pp_key(s, r, in);
                    if (k < 0) {
                        rc = -1;
                        goto done;
                    }
                    if (in->op == PT_PP_RECV_ACT || in->op == PT_PP_RECV_GRAD) {
                        if (sent[k] < 0) break;
                        if (sent[k] > clock[r]) clock[r] = sent[k];
                    } else
                        sent[k] = clock[r];
                    if (start) start[base[r] + pc[r]] = clock[r];
                }
                pc[r]++, progress = 1;
            }
            if (pc[r] < s->count[r]) left = 1;
        }
    } while (left && progress);
    *makespan = 0.0;
    for (r = 0; r < p; r++)
        if (clock[r] > *makespan) *makespan = clock[r];
    if (left) {
        rc = 0;
        for (r = 0; r < p; r++)
            if (pc[r] < s->count[r]) {
                *stuck_rank = r, *stuck_pc = pc[r];
                break;
            }
    }
done:
    if (sent) PT_FREE(sent);
    if (clock) PT_FREE(clock);
    if (pc) PT_FREE(pc);
    if (base) PT_FREE(base);
    return rc;
}

static int64_t pt__pp_total(const pt_pp_schedule *s) {
    int64_t t = 0;
    int r;
    for (r = 0; r < s->p; r++) t += s->count[r];
    return t;
}

PTDEF double pt_pp_schedule_simulate(const pt_pp_schedule *s, double t_fwd, double t_bwd, double *makespan) {
    double ms = 0.0, busy = 0.0;
    int stuck = -1, stuckpc = -1;
    if (makespan) *makespan = 0.0;
    if (!s || pt__pp_run(s, t_fwd, t_bwd, NULL, &ms, &busy, &stuck, &stuckpc) != 1) return -1.0;
    if (makespan) *makespan = ms;
    return ms > 0.0 ? 1.0 - busy / (s->p * ms) : 0.0;
}

/* ---- the checker ---------------------------------------------------------------------------------- */

PTDEF pt_status pt_pp_schedule_check(const pt_pp_schedule *s, char *err, size_t errlen) {
    pt_status st = PT_OK;
    int p, m, v, nst, r, i, train, stuck = -1, stuckpc = -1, rc;
    int64_t nkey, nms, k;
    /* per (mb, stage): FWD, BWD, RECV_ACT, RECV_GRAD seen; per message: send / recv (rank, index) */
    unsigned char *fw = NULL, *bw = NULL, *ra = NULL, *rg = NULL;
    int *snd = NULL, *rcv = NULL;
    double ms, busy, *start = NULL;
    if (!s) {
        pt__msg(err, errlen, "pt_pp_schedule_check: NULL schedule");
        return PT_ERR_ARG;
    }
    p = s->p, m = s->m, v = s->v, nst = v * p, train = s->kind != PT_PP_FORWARD_ONLY;
    nms = (int64_t)m * nst, nkey = 2 * nms;
    fw = (unsigned char *)PT_MALLOC((size_t)nms * 4);
    snd = (int *)PT_MALLOC(sizeof(int) * 2 * (size_t)nkey);
    start = (double *)PT_MALLOC(sizeof(double) * (size_t)(pt__pp_total(s) + 1));
    if (!fw || !snd || !start) {
        pt__msg(err, errlen, "pt_pp_schedule_check: out of memory");
        st = PT_ERR_OOM;
        goto done;
    }
    bw = fw + nms, ra = bw + nms, rg = ra + nms, rcv = snd + nkey;
    memset(fw, 0, (size_t)nms * 4);
    for (k = 0; k < 2 * nkey; k++) snd[k] = -1;
#define PT__PP_FAIL(...)                        \
    do {                                        \
        pt__msg(err, errlen, __VA_ARGS__);   \
        st = PT_ERR_STATE;                      \
        goto done;                              \
    } while (0)
    /* pass 1: each rank's program on its own: fields, order, duplicates */
    for (r = 0; r < p; r++) {
        const pt_pp_instr *prog = s->prog[r];
        for (i = 0; i < s->count[r]; i++) {
            const pt_pp_instr *in = &prog[i];
            int op = in->op, mb = in->mb, ch = in->chunk, sg = ch * p + r;
            int64_t ms_i = (int64_t)mb * nst + sg;
            if (op < PT_PP_FWD || op > PT_PP_OPTIM) PT__PP_FAIL("rank %d instruction %d: unknown op %d", r, i, op);
            if (op == PT_PP_OPTIM) {
                if (!train) PT__PP_FAIL("rank %d instruction %d: OPTIM in a forward-only schedule", r, i);
                if (i != s->count[r] - 1) PT__PP_FAIL("rank %d instruction %d: OPTIM is not the last instruction (%d follow)", r, i, s->count[r] - 1 - i);
                continue;
            }
            if (mb < 0 || mb >= m || ch < 0 || ch >= v)
                PT__PP_FAIL("rank %d instruction %d: %s micro-batch %d chunk %d out of range (m = %d, v = %d)", r, i, pt__pp_op_name(op), mb, ch, m, v);
            switch (op) {
            case PT_PP_FWD:
                if (fw[ms_i]) PT__PP_FAIL("rank %d instruction %d: second FWD of micro-batch %d chunk %d (stage %d)", r, i, mb, ch, sg);
                if (sg > 0 && (sg - 1) % p != r && !ra[ms_i])
                    PT__PP_FAIL("rank %d instruction %d: FWD of micro-batch %d chunk %d (stage %d) before its RECV_ACT from rank %d", r, i, mb, ch, sg, (sg - 1) % p);
                fw[ms_i] = 1;
                break;
            case PT_PP_BWD:
                if (!train) PT__PP_FAIL("rank %d instruction %d: BWD in a forward-only schedule", r, i);
                if (bw[ms_i]) PT__PP_FAIL("rank %d instruction %d: second BWD of micro-batch %d chunk %d (stage %d)", r, i, mb, ch, sg);
                if (!fw[ms_i]) PT__PP_FAIL("rank %d instruction %d: BWD of micro-batch %d chunk %d (stage %d) before its FWD", r, i, mb, ch, sg);
                if (sg < nst - 1 && (sg + 1) % p != r && !rg[ms_i])
                    PT__PP_FAIL("rank %d instruction %d: BWD of micro-batch %d chunk %d (stage %d) before its RECV_GRAD from rank %d", r, i, mb, ch, sg, (sg + 1) % p);
                bw[ms_i] = 1;
                break;
            default:
                k = pt__pp_key(s, r, in);
                if (k < 0)
                    PT__PP_FAIL("rank %d instruction %d: %s micro-batch %d chunk %d (stage %d) peer %d names no transfer between neighbouring stages on different ranks",
                                r, i, pt__pp_op_name(op), mb, ch, sg, in->peer);
                if (op == PT_PP_SEND_ACT || op == PT_PP_SEND_GRAD) {
                    if (op == PT_PP_SEND_ACT && !fw[ms_i])
                        PT__PP_FAIL("rank %d instruction %d: SEND_ACT of micro-batch %d chunk %d before its FWD", r, i, mb, ch);
                    if (op == PT_PP_SEND_GRAD && !bw[ms_i])
                        PT__PP_FAIL("rank %d instruction %d: SEND_GRAD of micro-batch %d chunk %d before its BWD", r, i, mb, ch);
                    if (snd[k] >= 0)
                        PT__PP_FAIL("rank %d instruction %d: second %s of micro-batch %d chunk %d (first at instruction %d)", r, i, pt__pp_op_name(op), mb, ch, snd[k]);
                    snd[k] = i;
                } else {
                    if (rcv[k] >= 0)
                        PT__PP_FAIL("rank %d instruction %d: second %s of micro-batch %d chunk %d (first at instruction %d)", r, i, pt__pp_op_name(op), mb, ch, rcv[k]);
                    if (op == PT_PP_RECV_ACT) ra[ms_i] = 1;
                    else rg[ms_i] = 1;
                    rcv[k] = i;
                }
            }
        }
        if (train && (s->count[r] == 0 || prog[s->count[r] - 1].op != PT_PP_OPTIM))
            PT__PP_FAIL("rank %d instruction %d: the program does not end with OPTIM", r, s->count[r]);
    }
    /* pass 2: completeness and matching */
    for (k = 0; k < nms; k++) {
        int mb = (int)(k / nst), sg = (int)(k % nst);
        if (!fw[k]) PT__PP_FAIL("rank %d instruction -: no FWD of micro-batch %d chunk %d (stage %d)", sg % p, mb, sg / p, sg);
        if (train && !bw[k]) PT__PP_FAIL("rank %d instruction -: no BWD of micro-batch %d chunk %d (stage %d)", sg % p, mb, sg / p, sg);
    }
    for (k = 0; k < nkey; k++) {
        int grad = k >= nms, mb = (int)((k % nms) / nst), src = (int)(k % nst), dst = grad ? src - 1 : src + 1;
        if (snd[k] >= 0 && rcv[k] < 0)
            PT__PP_FAIL("rank %d instruction %d: %s of micro-batch %d chunk %d to rank %d has no matching %s", src % p, snd[k],
                        grad ? "SEND_GRAD" : "SEND_ACT", mb, src / p, dst % p, grad ? "RECV_GRAD" : "RECV_ACT");
        if (rcv[k] >= 0 && snd[k] < 0)
            PT__PP_FAIL("rank %d instruction %d: %s of micro-batch %d chunk %d from rank %d has no matching %s", dst % p, rcv[k],
                        grad ? "RECV_GRAD" : "RECV_ACT", mb, dst / p, src % p, grad ? "SEND_GRAD" : "SEND_ACT");
    }
    /* pass 3: deadlock */
    rc = pt__pp_run(s, 1.0, 2.0, start, &ms, &busy, &stuck, &stuckpc);
    if (rc < 0) {
        pt__msg(err, errlen, "pt_pp_schedule_check: out of memory");
        st = PT_ERR_OOM;
        goto done;
    }
    if (rc == 0) {
        const pt_pp_instr *in;
        i = stuckpc;
        in = &s->prog[stuck][i];
        PT__PP_FAIL("rank %d instruction %d: deadlock: %s of micro-batch %d chunk %d from rank %d waits forever (its send is never reached)",
                    stuck, i, pt__pp_op_name(in->op), in->mb, in->chunk, in->peer);
    }
#undef PT__PP_FAIL
done:
    if (fw) PT_FREE(fw);
    if (snd) PT_FREE(snd);
    if (start) PT_FREE(start);
    return st;
}

/* ---- the table ------------------------------------------------------------------------------------ */

PTDEF void pt_pp_schedule_print(const pt_pp_schedule *s, void *file) {
    FILE *f = file ? (FILE *)file : stdout;
    double ms = 0.0, busy = 0.0, *start;
    int r, i, t, slots, w = 2, stuck = -1, stuckpc = -1, rc;
    int64_t b = 0;
    char lab[32];
    if (!s) {
        fprintf(f, "pipeline schedule: (null)\n");
        return;
    }
    fprintf(f, "pipeline schedule: %s, p = %d ranks, m = %d micro-batches, v = %d (F forward 1 unit, B backward 2 units)\n",
            pt__pp_kind_name(s->kind), s->p, s->m, s->v);
    start = (double *)PT_MALLOC(sizeof(double) * (size_t)(pt__pp_total(s) + 1));
    if (!start) {
        fprintf(f, "  (out of memory)\n");
        return;
    }
    rc = pt__pp_run(s, 1.0, 2.0, start, &ms, &busy, &stuck, &stuckpc);
    if (rc != 1) {
        fprintf(f, "  (%s: run pt_pp_schedule_check)\n", rc == 0 ? "deadlocks" : "malformed");
        PT_FREE(start);
        return;
    }
    slots = (int)(ms + 0.5);
    for (r = 0; r < s->p; r++)
        for (i = 0; i < s->count[r]; i++) {
            const pt_pp_instr *in = &s->prog[r][i];
            int n = s->v > 1 ? snprintf(lab, sizeof lab, "F%d.%d", (int)in->mb, (int)in->chunk) : snprintf(lab, sizeof lab, "F%d", (int)in->mb);
            if ((in->op == PT_PP_FWD || in->op == PT_PP_BWD) && n > w) w = n;
        }
    for (r = 0; r < s->p; r++) {
        int cur = 0;
        fprintf(f, "rank %d |", r);
        for (t = 0; t < slots; t++) {
            const char *txt = ".";
            /* the compute op of rank r covering [t, t+1) */
            for (; cur < s->count[r]; cur++) {
                const pt_pp_instr *in = &s->prog[r][cur];
                double st0 = start[b + cur], len;
                if (in->op != PT_PP_FWD && in->op != PT_PP_BWD) continue;
                len = in->op == PT_PP_FWD ? 1.0 : 2.0;
                if (st0 + len <= t + 0.5) continue;
                if (st0 <= t + 0.5) {
                    if (s->v > 1) snprintf(lab, sizeof lab, "%c%d.%d", in->op == PT_PP_FWD ? 'F' : 'B', (int)in->mb, (int)in->chunk);
                    else snprintf(lab, sizeof lab, "%c%d", in->op == PT_PP_FWD ? 'F' : 'B', (int)in->mb);
                    txt = lab;
                }
                break;
            }
            fprintf(f, " %*s", w, txt);
        }
        fprintf(f, "\n");
        b += s->count[r];
    }
    fprintf(f, "bubble: theory (p-1)/(v*m+p-1) = %.4f, simulated idle share = %.4f (makespan %d units)\n",
            pt_pp_bubble_theory(s->p, s->m, s->v), ms > 0.0 ? 1.0 - busy / (s->p * ms) : 0.0, slots);
    PT_FREE(start);
}

// >>pprun  pipeline execution over MPI
/* Owns: pt_pp (stages of this rank, graphs in flight, activation and gradient transfers), stage
   balancing
   Invariants: a checked schedule is executed instruction by instruction; the bubble is measured,
   not assumed
   Entry points: pt_pp_new pt_pp_step pt_pp_eval pt_pp_split pt_pp_set_dp pt_pp_stats_get; the
   schedule interpreter: pt__pp_exec */
/* =================================================================================================
   pipeline execution over MPI: one graph per (micro-batch, stage) in flight, transfers with
   a shape header, tied parameters summed between the first and last pipeline ranks
   =================================================================================================
   Every transfer is two messages on the PP communicator: a header of 8 int64 (ndim, 4 sizes, an
   error flag) and the f32 data. Tags are (micro-batch, receiving stage, kind) so a message can only
   match the receive it is meant for. Sends are MPI_Isend from buffers of a pool (each buffer busy
   until its request completes; no allocation once the pool has grown); receives block (Open MPI's
   progress engine also advances the data-parallel reductions meanwhile). A rank whose forward or
   backward fails keeps running its program with empty payloads (header flag set), so its peers
   never hang; the error is agreed over the world at the end of the step. The payloads live in host
   boxes: on a device backend filling a box reads the tensor and unboxing writes a new one, both
   counted as PT_XFER_PP (with p = 1 and v chunks the hand-over between this rank's chunks takes the
   same way); tied gradients are read, summed with the peer's and written back (PT_XFER_PP). */

enum { PT__PP_ACT = 0, PT__PP_GRAD = 1 };

typedef struct pt__pp_sendbuf {
    char *buf;
    size_t cap;
    int busy;
#ifdef PTRAIN_MPI
    MPI_Request req[2];
    uint64_t seq[2]; /* their collective records */
#endif
} pt__pp_sendbuf;

/* a host buffer holding one received (or locally handed over) activation or gradient */
typedef struct pt__pp_box {
    float *data;
    int64_t cap, n;
    int64_t shape[PT_MAX_DIMS];
    int ndim, full, bad;
} pt__pp_box;

struct pt_pp {
    pt_ctx *ctx;
    const pt_dist *d;
    pt_pp_desc desc;
    pt_pp_schedule *sched, *fsched; /* training and forward-only schedules */
    int p, rank, m, v;
    pt_dp *dp;
    pt_graph **gfree; /* pool of idle graphs */
    int nfree, ngraphs;
    pt_graph **slot_g; /* [m*v]: graph of (mb, chunk) */
    pt_tensor **slot_in, **slot_out;
    pt__pp_box *box[2]; /* [m*v] inbox per kind: activation in, gradient in */
    pt__pp_box *out;    /* [m*v] outgoing payload prepared by FWD / BWD for SEND_* */
    float *losses;      /* [m] */
    pt__pp_sendbuf *sb;
    int nsb;
    int ntied;
    pt_param **tied;    /* parameters summed with the other end of the pipeline */
    int *tied_fires;    /* [ntied] gradient completions held back this step */
    int fires;          /* completions per parameter in a step: m * rounds */
    void (*hook)(void *user, pt_param *p); /* the context's grad hook (the DP reducer's), interposed */
    void *hook_user;
    float *tied_tmp;
    int64_t tied_cap;
    int failed;         /* this step: a local forward/backward failed */
    pt_pp_stats stats;
#ifdef PTRAIN_MPI
    MPI_Comm comm; /* PP communicator (rank = pipeline coordinate) */
#endif
};

static pt_graph *pt__pp_graph(pt_pp *pp) {
    if (pp->nfree > 0) return pp->gfree[--pp->nfree];
    pp->ngraphs++;
    return pt_graph_new(pp->ctx);
}
static void pt__pp_release(pt_pp *pp, int slot) {
    pt_graph *g = pp->slot_g[slot];
    if (!g) return;
    pt_graph_reset(g);
    pp->gfree[pp->nfree++] = g; /* gfree has room for every graph ever made (m*v) */
    pp->slot_g[slot] = NULL;
    pp->slot_in[slot] = pp->slot_out[slot] = NULL;
}

/* copies t (or nothing when t is NULL: a failed step's placeholder) into box */
static int pt__pp_fill(pt_pp *pp, pt__pp_box *b, const pt_tensor *t) {
    int64_t n = t ? pt_numel(t) : 0;
    int i;
    if (n > b->cap) {
        float *nd = (float *)PT_REALLOC(b->data, (size_t)n * sizeof(float));
        if (!nd) return pt__fail(pp->ctx, PT_ERR_OOM, "pt_pp: out of memory for a %lld-float transfer buffer", (long long)n), 0;
        b->data = nd, b->cap = n;
    }
    b->n = n, b->bad = t == NULL, b->ndim = t ? t->ndim : 1, b->full = 1;
    for (i = 0; i < PT_MAX_DIMS; i++) b->shape[i] = t && i < t->ndim ? t->shape[i] : 1;
    if (!t) b->shape[0] = 0;
    if (t) {
        int k = pt__xfer_as(pp->ctx, PT_XFER_PP), ok = pt_tensor_read(t, b->data) == PT_OK;
        pt__xfer_as(pp->ctx, k);
        if (!ok) return 0;
    }
    return 1;
}

/* a tensor of g holding box's data */
static pt_tensor *pt__pp_unbox(pt_pp *pp, pt_graph *g, pt__pp_box *b, const char *what, int mb, int stage) {
    pt_tensor *t;
    int k;
    if (!b->full) return (pt_tensor *)pt__fail(pp->ctx, PT_ERR_STATE, "pt_pp: no %s for micro-batch %d of stage %d", what, mb, stage);
    b->full = 0;
    if (b->bad) return NULL; /* the sender failed: its error is reported at the agreement */
    k = pt__xfer_as(pp->ctx, PT_XFER_PP);
    t = pt_tensor_from(g, PT_F32, b->ndim, b->shape, b->data);
    pt__xfer_as(pp->ctx, k);
    return t;
}

#ifdef PTRAIN_MPI
/* the tag of a transfer's header (the data has tag + 1) */
static int pt__pp_tag(const pt_pp *pp, int mb, int stage, int kind) { return ((mb * pp->p * pp->v + stage) * 2 + kind) * 2; }

/* a send buffer's two messages completed (or failed): close their records */
static void pt__pp_send_done(pt_pp *pp, pt__pp_sendbuf *s, int rc) {
    pt__coll_end(pp->d, s->seq[0], rc);
    pt__coll_end(pp->d, s->seq[1], rc);
    s->busy = 0;
}

static pt__pp_sendbuf *pt__pp_sendbuf_get(pt_pp *pp, size_t bytes) {
    int i, pick = -1;
    for (i = 0; i < pp->nsb; i++) {
        pt__pp_sendbuf *s = &pp->sb[i];
        if (s->busy) {
            int flag = 0, rc = MPI_Testall(2, s->req, &flag, MPI_STATUSES_IGNORE);
            if (flag || rc != MPI_SUCCESS) pt__pp_send_done(pp, s, rc);
        }
        if (!s->busy && (pick < 0 || (s->cap >= bytes && pp->sb[pick].cap < bytes))) pick = i;
    }
    if (pick < 0) {
        pt__pp_sendbuf *n = (pt__pp_sendbuf *)PT_REALLOC(pp->sb, sizeof *n * (size_t)(pp->nsb + 1));
        if (!n) return NULL;
        pp->sb = n;
        pick = pp->nsb++;
        memset(&pp->sb[pick], 0, sizeof pp->sb[pick]);
    }
    if (pp->sb[pick].cap < bytes) {
        char *b = (char *)PT_REALLOC(pp->sb[pick].buf, bytes);
        if (!b) return NULL;
        pp->sb[pick].buf = b, pp->sb[pick].cap = bytes;
    }
    return &pp->sb[pick];
}

/* posts the payload of box b to pipeline rank peer: header then data */
static int pt__pp_send(pt_pp *pp, const pt__pp_box *b, int peer, int tag) {
    size_t bytes = 8 * sizeof(int64_t) + (size_t)b->n * sizeof(float);
    pt__pp_sendbuf *s = pt__pp_sendbuf_get(pp, bytes);
    int64_t *h;
    int i, rc;
    if (!s) return pt__fail(pp->ctx, PT_ERR_OOM, "pt_pp: out of memory for a send buffer of %zu bytes", bytes), 0;
    h = (int64_t *)s->buf;
    h[0] = b->ndim;
    for (i = 0; i < PT_MAX_DIMS; i++) h[1 + i] = b->shape[i];
    h[5] = b->bad, h[6] = b->n, h[7] = 0;
    if (b->n) memcpy(s->buf + 8 * sizeof(int64_t), b->data, (size_t)b->n * sizeof(float));
    s->req[0] = s->req[1] = MPI_REQUEST_NULL;
    s->seq[0] = pt__coll_begin(pp->d, PT_COLL_ISEND, PT_COMM_PP, 8, PT_COLL_I64, peer);
    rc = MPI_Isend(h, 8, MPI_INT64_T, peer, tag, pp->comm, &s->req[0]);
    s->seq[1] = pt__coll_begin(pp->d, PT_COLL_ISEND, PT_COMM_PP, b->n, PT_COLL_F32, peer);
    if (rc == MPI_SUCCESS) rc = MPI_Isend(s->buf + 8 * sizeof(int64_t), (int)b->n, MPI_FLOAT, peer, tag + 1, pp->comm, &s->req[1]);
    s->busy = 1;
    if (rc != MPI_SUCCESS) {
        pt__pp_send_done(pp, s, rc);
        return pt__fail(pp->ctx, PT_ERR_DEVICE, "pt_pp: MPI_Isend to pipeline rank %d failed: %s", peer, pt__coll_why(pp->d, rc)), 0;
    }
    pp->stats.bytes_sent += (int64_t)bytes;
    return 1;
}

static int pt__pp_recv(pt_pp *pp, pt__pp_box *b, int peer, int tag) {
    int64_t h[8], n;
    uint64_t sq = pt__coll_begin(pp->d, PT_COLL_RECV, PT_COMM_PP, 8, PT_COLL_I64, peer);
    int i, rc = pt__coll_end(pp->d, sq, MPI_Recv(h, 8, MPI_INT64_T, peer, tag, pp->comm, MPI_STATUS_IGNORE));
    if (rc != MPI_SUCCESS) return pt__fail(pp->ctx, PT_ERR_DEVICE, "pt_pp: MPI_Recv from pipeline rank %d failed: %s", peer, pt__coll_why(pp->d, rc)), 0;
    n = h[6];
    if (n < 0 || n > 0x7fffffff || h[0] < 1 || h[0] > PT_MAX_DIMS)
        return pt__fail(pp->ctx, PT_ERR_STATE, "pt_pp: malformed transfer header from pipeline rank %d (ndim %lld, %lld floats)", peer,
                        (long long)h[0], (long long)n), 0;
    if (n > b->cap) {
        float *nd = (float *)PT_REALLOC(b->data, (size_t)n * sizeof(float));
        if (!nd) return pt__fail(pp->ctx, PT_ERR_OOM, "pt_pp: out of memory for a %lld-float receive buffer", (long long)n), 0;
        b->data = nd, b->cap = n;
    }
    b->ndim = (int)h[0], b->bad = h[5] != 0, b->n = n, b->full = 1;
    for (i = 0; i < PT_MAX_DIMS; i++) b->shape[i] = h[1 + i];
    sq = pt__coll_begin(pp->d, PT_COLL_RECV, PT_COMM_PP, n, PT_COLL_F32, peer);
    rc = pt__coll_end(pp->d, sq, MPI_Recv(b->data, (int)n, MPI_FLOAT, peer, tag + 1, pp->comm, MPI_STATUS_IGNORE));
    if (rc != MPI_SUCCESS) return pt__fail(pp->ctx, PT_ERR_DEVICE, "pt_pp: MPI_Recv from pipeline rank %d failed: %s", peer, pt__coll_why(pp->d, rc)), 0;
    return 1;
}

static void pt__pp_wait_sends(pt_pp *pp) {
    int i;
    for (i = 0; i < pp->nsb; i++)
        if (pp->sb[i].busy) pt__pp_send_done(pp, &pp->sb[i], pt__coll_wait(pp->d, 2, pp->sb[i].req, 1));
}

/* tied parameters: pipeline rank 0 sends its parameter names and sizes to rank p-1, which answers
   with the indices it also holds; both keep them in rank 0's order */
static int pt__pp_find_tied(pt_pp *pp) {
    pt_ctx *ctx = pp->ctx;
    int other = pp->rank == 0 ? pp->p - 1 : 0, n = 0, i, j, k, rc = MPI_SUCCESS, ok = 1;
    int *idx = NULL;
    char *names = NULL;
    int64_t *sizes = NULL;
    if (pp->p < 2 || (pp->rank != 0 && pp->rank != pp->p - 1)) return 1;
    if (pp->rank == 0) {
        n = ctx->nparams;
        names = (char *)PT_MALLOC((size_t)PT__MAX(n, 1) * 96);
        sizes = (int64_t *)PT_MALLOC(sizeof(int64_t) * (size_t)PT__MAX(n, 1));
        idx = (int *)PT_MALLOC(sizeof(int) * (size_t)PT__MAX(n, 1) + sizeof(int));
        if (!names || !sizes || !idx) ok = 0, n = 0;
        for (i = 0; i < n; i++) {
            memset(names + (size_t)i * 96, 0, 96);
            snprintf(names + (size_t)i * 96, 96, "%s", ctx->params[i]->spec.name);
            sizes[i] = pt_numel(&ctx->params[i]->value);
        }
        rc = MPI_Send(&n, 1, MPI_INT, other, 1, pp->comm);
        if (rc == MPI_SUCCESS && n) rc = MPI_Send(names, n * 96, MPI_CHAR, other, 2, pp->comm);
        if (rc == MPI_SUCCESS && n) rc = MPI_Send(sizes, n, MPI_INT64_T, other, 3, pp->comm);
        if (rc == MPI_SUCCESS) rc = MPI_Recv(&k, 1, MPI_INT, other, 4, pp->comm, MPI_STATUS_IGNORE);
        if (rc == MPI_SUCCESS && k > 0 && idx) rc = MPI_Recv(idx, k, MPI_INT, other, 5, pp->comm, MPI_STATUS_IGNORE);
        if (rc == MPI_SUCCESS && k > 0 && idx) {
            pp->tied = (pt_param **)PT_MALLOC(sizeof(pt_param *) * (size_t)k);
            if (!pp->tied) ok = 0;
            for (j = 0; pp->tied && j < k; j++) pp->tied[pp->ntied++] = ctx->params[idx[j]];
        }
    } else {
        rc = MPI_Recv(&n, 1, MPI_INT, other, 1, pp->comm, MPI_STATUS_IGNORE);
        names = (char *)PT_MALLOC((size_t)PT__MAX(n, 1) * 96);
        sizes = (int64_t *)PT_MALLOC(sizeof(int64_t) * (size_t)PT__MAX(n, 1));
        idx = (int *)PT_MALLOC(sizeof(int) * (size_t)PT__MAX(n, 1));
        pp->tied = (pt_param **)PT_MALLOC(sizeof(pt_param *) * (size_t)PT__MAX(n, 1));
        if (!names || !sizes || !idx || !pp->tied) ok = 0; /* still answer, with k = 0 */
        if (rc == MPI_SUCCESS && n && names) rc = MPI_Recv(names, n * 96, MPI_CHAR, other, 2, pp->comm, MPI_STATUS_IGNORE);
        if (rc == MPI_SUCCESS && n && sizes) rc = MPI_Recv(sizes, n, MPI_INT64_T, other, 3, pp->comm, MPI_STATUS_IGNORE);
        k = 0;
        for (i = 0; ok && i < n; i++) {
            names[(size_t)i * 96 + 95] = 0;
            for (j = 0; j < ctx->nparams; j++) {
                pt_param *q = ctx->params[j];
                if (strcmp(q->spec.name, names + (size_t)i * 96) != 0) continue;
                if (pt_numel(&q->value) != sizes[i]) {
                    pt__fail(ctx, PT_ERR_SHAPE, "pt_pp_new: tied parameter '%s' has %lld elements on the last pipeline rank but %lld on the first",
                             q->spec.name, (long long)pt_numel(&q->value), (long long)sizes[i]);
                    ok = 0;
                    break;
                }
                idx[k++] = i;
                pp->tied[pp->ntied++] = q;
                q->spec.flags |= PT_PARAM_TIED_COPY;
            }
        }
        if (!ok) k = 0;
        if (rc == MPI_SUCCESS) rc = MPI_Send(&k, 1, MPI_INT, other, 4, pp->comm);
        if (rc == MPI_SUCCESS && k > 0) rc = MPI_Send(idx, k, MPI_INT, other, 5, pp->comm);
    }
    PT_FREE(names);
    PT_FREE(sizes);
    PT_FREE(idx);
    if (rc != MPI_SUCCESS) return pt__fail(ctx, PT_ERR_DEVICE, "pt_pp_new: exchanging parameter names failed (MPI error %d)", rc), 0;
    if (!ok && ctx->status == PT_OK) pt__fail(ctx, PT_ERR_OOM, "pt_pp_new: out of memory");
    return ok;
}

/* sums the tied gradients between pipeline ranks 0 and p-1 (a + b on both: the same bits) */
static int pt__pp_sum_tied(pt_pp *pp) {
    int other = pp->rank == 0 ? pp->p - 1 : 0, i;
    int64_t j, n;
    for (i = 0; i < pp->ntied; i++) {
        pt_param *q = pp->tied[i];
        float *g = pt_f32(&q->grad);
        int rc;
        n = pt_numel(&q->grad);
        if (n > pp->tied_cap) {
            float *t = (float *)PT_REALLOC(pp->tied_tmp, (size_t)n * sizeof(float));
            if (!t) return pt__fail(pp->ctx, PT_ERR_OOM, "pt_pp: out of memory"), 0;
            pp->tied_tmp = t, pp->tied_cap = n;
        }
        if (!g) { /* a device backend: the gradient crosses through host staging (PT_XFER_PP) */
            if (!(g = pt__stage_buf(pp->ctx, n))) return 0;
            pt__stage_xfer(pp->ctx, q->grad.st, q->grad.off, g, n, 1, PT_XFER_PP);
            if (pp->ctx->status != PT_OK) return 0;
        }
        {
            uint64_t sq = pt__coll_begin(pp->d, PT_COLL_SEND, PT_COMM_PP, n, PT_COLL_F32, other); /* a send-receive pair */
            rc = pt__coll_end(pp->d, sq, MPI_Sendrecv(g, (int)n, MPI_FLOAT, other, 7, pp->tied_tmp, (int)n, MPI_FLOAT, other, 7, pp->comm, MPI_STATUS_IGNORE));
        }
        if (rc != MPI_SUCCESS)
            return pt__fail(pp->ctx, PT_ERR_DEVICE, "pt_pp: exchanging the tied gradient of '%s' failed: %s", q->spec.name, pt__coll_why(pp->d, rc)), 0;
        for (j = 0; j < n; j++) g[j] = g[j] + pp->tied_tmp[j];
        if (!q->grad.st->host) pt__stage_xfer(pp->ctx, q->grad.st, q->grad.off, g, n, 0, PT_XFER_PP);
    }
    return pp->ctx->status == PT_OK;
}
#endif /* PTRAIN_MPI */

static void pt__pp_free_boxes(pt__pp_box *b, int n) {
    int i;
    if (!b) return;
    for (i = 0; i < n; i++) PT_FREE(b[i].data);
    PT_FREE(b);
}

PTDEF void pt_pp_free(pt_pp *pp) {
    int i, n;
    if (!pp) return;
    n = pp->m * pp->v;
#ifdef PTRAIN_MPI
    if (pp->p > 1) pt__pp_wait_sends(pp);
#endif
    for (i = 0; pp->slot_g && i < n; i++)
        if (pp->slot_g[i]) pt_graph_free(pp->slot_g[i]);
    for (i = 0; i < pp->nfree; i++) pt_graph_free(pp->gfree[i]);
    for (i = 0; i < pp->nsb; i++) PT_FREE(pp->sb[i].buf);
    pt__pp_free_boxes(pp->box[0], n);
    pt__pp_free_boxes(pp->box[1], n);
    pt__pp_free_boxes(pp->out, n);
    PT_FREE(pp->sb);
    PT_FREE(pp->gfree);
    PT_FREE(pp->slot_g);
    PT_FREE(pp->slot_in);
    PT_FREE(pp->slot_out);
    PT_FREE(pp->losses);
    PT_FREE(pp->tied);
    PT_FREE(pp->tied_fires);
    PT_FREE(pp->tied_tmp);
    pt_pp_schedule_free(pp->sched);
    pt_pp_schedule_free(pp->fsched);
    PT_FREE(pp);
}

PTDEF pt_pp *pt_pp_new(pt_ctx *ctx, const pt_pp_desc *desc) {
    pt_pp *pp;
    char msg[512];
    int ok = 1, n;
    const pt_dist *d;
    if (!ctx) return NULL;
    d = ctx->desc.dist;
    msg[0] = 0;
    pp = (pt_pp *)PT_MALLOC(sizeof *pp);
    if (!pp) return (pt_pp *)pt__fail(ctx, PT_ERR_OOM, "pt_pp_new: out of memory");
    memset(pp, 0, sizeof *pp);
    pp->ctx = ctx, pp->d = d;
    pp->p = d ? pt_dist_layout(d).pp : 1;
    pp->rank = d ? pt_dist_coords(d).pp : 0;
#ifdef PTRAIN_MPI
    pp->comm = d ? *(MPI_Comm *)pt_dist_comm(d, PT_COMM_PP) : MPI_COMM_NULL;
#else
    pp->p = 1, pp->rank = 0;
#endif
    if (!desc || !desc->forward) {
        pt__msg(msg, sizeof msg, "pt_pp_new: %s", desc ? "desc.forward (the stage function) is NULL" : "desc is NULL");
        ok = 0;
    } else {
        pp->desc = *desc;
        pp->m = desc->micro_batches > 0 ? desc->micro_batches : pp->p;
        pp->v = desc->kind == PT_PP_INTERLEAVED ? (desc->virtual_stages > 0 ? desc->virtual_stages : 2)
                : desc->kind == PT_PP_FORWARD_ONLY && desc->virtual_stages > 0 ? desc->virtual_stages : 1;
        if (desc->kind != PT_PP_INTERLEAVED && desc->kind != PT_PP_FORWARD_ONLY && desc->virtual_stages > 1) {
            pt__msg(msg, sizeof msg, "pt_pp_new: %d virtual stages need the interleaved schedule (kind %s)", desc->virtual_stages,
                    pt__pp_kind_name(desc->kind));
            ok = 0;
        } else if ((double)pp->m * pp->v * pp->p * 8.0 > 16777216.0) {
            pt__msg(msg, sizeof msg, "pt_pp_new: m*v*p = %d*%d*%d is too large for message tags", pp->m, pp->v, pp->p);
            ok = 0;
        } else {
            pp->sched = pt_pp_schedule_new(desc->kind, pp->p, pp->m, pp->v, msg, sizeof msg); /* forward-only: inference runtime */
            if (pp->sched) pp->fsched = pt_pp_schedule_new(PT_PP_FORWARD_ONLY, pp->p, pp->m, pp->v, msg, sizeof msg);
            ok = pp->sched && pp->fsched && pt_pp_schedule_check(pp->sched, msg, sizeof msg) == PT_OK &&
                 pt_pp_schedule_check(pp->fsched, msg, sizeof msg) == PT_OK;
        }
    }
    if (ok) {
        n = pp->m * pp->v;
        pp->gfree = (pt_graph **)PT_MALLOC(sizeof(pt_graph *) * (size_t)n);
        pp->slot_g = (pt_graph **)PT_MALLOC(sizeof(pt_graph *) * (size_t)n);
        pp->slot_in = (pt_tensor **)PT_MALLOC(sizeof(pt_tensor *) * (size_t)n);
        pp->slot_out = (pt_tensor **)PT_MALLOC(sizeof(pt_tensor *) * (size_t)n);
        pp->box[0] = (pt__pp_box *)PT_MALLOC(sizeof(pt__pp_box) * (size_t)n);
        pp->box[1] = (pt__pp_box *)PT_MALLOC(sizeof(pt__pp_box) * (size_t)n);
        pp->out = (pt__pp_box *)PT_MALLOC(sizeof(pt__pp_box) * (size_t)n);
        pp->losses = (float *)PT_MALLOC(sizeof(float) * (size_t)pp->m);
        if (!pp->gfree || !pp->slot_g || !pp->slot_in || !pp->slot_out || !pp->box[0] || !pp->box[1] || !pp->out || !pp->losses) {
            pt__msg(msg, sizeof msg, "pt_pp_new: out of memory");
            ok = 0;
        } else {
            memset(pp->slot_g, 0, sizeof(pt_graph *) * (size_t)n);
            memset(pp->slot_in, 0, sizeof(pt_tensor *) * (size_t)n);
            memset(pp->slot_out, 0, sizeof(pt_tensor *) * (size_t)n);
            memset(pp->box[0], 0, sizeof(pt__pp_box) * (size_t)n);
            memset(pp->box[1], 0, sizeof(pt__pp_box) * (size_t)n);
            memset(pp->out, 0, sizeof(pt__pp_box) * (size_t)n);
        }
    }
#ifdef PTRAIN_MPI
    if (d && pt_dist_size(d) > 1) {
        ok = pt_dist_agree_msg(d, ok, msg, sizeof msg);
        if (ok && !pt__pp_find_tied(pp)) pt__msg(msg, sizeof msg, "%s", pt_error(ctx)), ok = 0;
        if (ok && pp->ntied && !(pp->tied_fires = (int *)PT_MALLOC(sizeof(int) * (size_t)pp->ntied)))
            pt__msg(msg, sizeof msg, "pt_pp_new: out of memory"), ok = 0;
        ok = pt_dist_agree_msg(d, ok, msg, sizeof msg);
    }
#endif
    if (!ok) {
        pt_pp_free(pp);
        if (ctx->status == PT_OK || !strstr(pt_error(ctx), msg)) pt__fail(ctx, PT_ERR_ARG, "%s", msg);
        return NULL;
    }
    return pp;
}

PTDEF void pt_pp_set_dp(pt_pp *pp, pt_dp *dp) {
    if (pp) pp->dp = dp;
}

/* runs schedule s; train: with backward. Returns the mean loss over micro-batches (before the DP mean). */
static float pt__pp_exec(pt_pp *pp, const pt_pp_schedule *s, int train, float scale) {
    pt_ctx *ctx = pp->ctx;
    const pt_pp_instr *prog = pt_pp_schedule_instrs(s, pp->rank);
    int count = pt_pp_schedule_count(s, pp->rank), nst = pp->p * pp->v, i, k;
    double t0 = pt_time(), t, t1, idle = t0; /* idle: end of the last computation (trace: the bubble since) */
    float loss = 0.0f;
    pp->failed = ctx->status != PT_OK;
    pp->stats.fwd_s = pp->stats.bwd_s = 0.0;
    for (k = 0; k < pp->m; k++) pp->losses[k] = 0.0f;
    for (i = 0; i < count; i++) {
        const pt_pp_instr *in = &prog[i];
        int mb = in->mb, c = in->chunk, stage = c * pp->p + pp->rank, slot = mb * pp->v + c;
        if (ctx->trace) pt__trace_at(ctx, mb, c);
        switch (in->op) {
        case PT_PP_FWD: {
            pt_graph *g = pt__pp_graph(pp);
            pt_tensor *x = NULL, *y = NULL;
            pp->slot_g[slot] = g;
            if (!g) {
                pp->failed = 1;
            } else {
                pt_graph_set_grad(g, train);
                pt_graph_set_training(g, train);
                if (stage > 0) {
                    /* received from another rank, or handed over by this rank's previous chunk */
                    x = pt__pp_unbox(pp, g, &pp->box[PT__PP_ACT][slot], "input activation", mb, stage);
                    if (x && train) pt_requires_grad(x);
                }
                if (!pp->failed && (stage == 0 || x)) {
                    t = pt_time();
                    y = pp->desc.forward(g, stage, mb, x, pp->desc.user);
                    pp->stats.fwd_s += (t1 = pt_time()) - t;
                    if (ctx->trace) pt__trace_compute(ctx, PT_TRACE_FORWARD, &idle, t, t1, mb, c);
                }
                if (!y && (stage == 0 || x) && ctx->status == PT_OK && !pp->failed)
                    pt__fail(ctx, PT_ERR_STATE, "pt_pp: the stage function returned NULL for micro-batch %d, stage %d", mb, stage);
                if (!y || ctx->status != PT_OK) pp->failed = 1, y = NULL;
            }
            pp->slot_in[slot] = x, pp->slot_out[slot] = y;
            if (stage == nst - 1) {
                pp->losses[mb] = y ? pt_item(y) : NAN;
            } else {
                /* the output goes to the next stage: in place if it is ours, else via SEND_ACT */
                int nslot = pp->p == 1 ? slot + 1 : slot;
                pt__pp_box *b = pp->p == 1 ? &pp->box[PT__PP_ACT][nslot] : &pp->out[slot];
                if (!pt__pp_fill(pp, b, y)) pp->failed = 1;
            }
            if (!train) pt__pp_release(pp, slot);
            break;
        }
        case PT_PP_BWD: {
            pt_graph *g = pp->slot_g[slot];
            pt_tensor *y = pp->slot_out[slot], *x = pp->slot_in[slot], *dy = NULL;
            if (g && y && !pp->failed) {
                if (stage == nst - 1) {
                    int64_t one = 1;
                    dy = pt_full(g, 1, &one, scale);
                } else {
                    dy = pt__pp_unbox(pp, g, &pp->box[PT__PP_GRAD][slot], "output gradient", mb, stage);
                }
                if (dy) {
                    t = pt_time();
                    if (pt_backward_from(g, y, dy) != PT_OK) pp->failed = 1;
                    pp->stats.bwd_s += (t1 = pt_time()) - t;
                    if (ctx->trace) pt__trace_compute(ctx, PT_TRACE_BACKWARD, &idle, t, t1, mb, c);
                } else {
                    pp->failed = 1;
                }
            } else {
                pp->failed = 1;
                if (stage < nst - 1) pp->box[PT__PP_GRAD][slot].full = 0;
            }
            if (stage > 0) {
                /* the input's gradient goes to the previous stage: ours (p == 1) or via SEND_GRAD */
                pt__pp_box *b = pp->p == 1 ? &pp->box[PT__PP_GRAD][slot - 1] : &pp->out[slot];
                if (!pt__pp_fill(pp, b, !pp->failed && x ? x->grad : NULL)) pp->failed = 1;
            }
            pt__pp_release(pp, slot);
            break;
        }
#ifdef PTRAIN_MPI
        case PT_PP_SEND_ACT:
            if (!pt__pp_send(pp, &pp->out[slot], in->peer, pt__pp_tag(pp, mb, stage + 1, PT__PP_ACT))) pp->failed = 1;
            pp->out[slot].full = 0;
            break;
        case PT_PP_SEND_GRAD:
            if (!pt__pp_send(pp, &pp->out[slot], in->peer, pt__pp_tag(pp, mb, stage - 1, PT__PP_GRAD))) pp->failed = 1;
            pp->out[slot].full = 0;
            break;
        case PT_PP_RECV_ACT:
            if (!pt__pp_recv(pp, &pp->box[PT__PP_ACT][slot], in->peer, pt__pp_tag(pp, mb, stage, PT__PP_ACT))) pp->failed = 1;
            break;
        case PT_PP_RECV_GRAD:
            if (!pt__pp_recv(pp, &pp->box[PT__PP_GRAD][slot], in->peer, pt__pp_tag(pp, mb, stage, PT__PP_GRAD))) pp->failed = 1;
            break;
#endif
        default: break; /* PT_PP_OPTIM: the caller steps the optimizer after pt_pp_step */
        }
    }
#ifdef PTRAIN_MPI
    if (pp->p > 1) pt__pp_wait_sends(pp);
#endif
    for (k = 0; k < pp->m * pp->v; k++) pt__pp_release(pp, k); /* a failed step may leave graphs */
    pp->stats.step_s = (t = pt_time()) - t0;
    if (ctx->trace) pt__trace_compute(ctx, -1, &idle, t, t, -1, -1), pt__trace_at(ctx, -1, -1); /* the last bubble */
    pp->stats.busy_s = pp->stats.fwd_s + pp->stats.bwd_s;
    pp->stats.my_bubble = pp->stats.step_s > 0 ? 1.0 - pp->stats.busy_s / pp->stats.step_s : 0.0;
    pp->stats.bubble = pp->stats.my_bubble;
    pp->stats.graphs = pp->ngraphs;
    if (pp->rank == pp->p - 1)
        for (k = 0; k < pp->m; k++) loss += pp->losses[k] / (float)pp->m;
    return loss;
}

/* after a run: agree on errors, share the loss (from the last pipeline rank, mean over DP) and the bubble */
static float pt__pp_done(pt_pp *pp, float loss, pt_status st) {
    pt_ctx *ctx = pp->ctx;
    int ok = !pp->failed && st == PT_OK && ctx->status == PT_OK;
#ifdef PTRAIN_MPI
    if (pp->d && pt_dist_size(pp->d) > 1) {
        char msg[512];
        double b[2];
        /* a rank whose input came marked failed has no message of its own: the first rank with an
           error of its own (the one that failed first) speaks for all */
        pt__msg(msg, sizeof msg, "%s", ctx->status != PT_OK ? pt_error(ctx) : "");
        if (!pt_dist_agree_msg(pp->d, ctx->status == PT_OK && st == PT_OK, msg, sizeof msg)) {
            if (ctx->status == PT_OK) pt__fail(ctx, PT_ERR_STATE, "%s", msg);
            return NAN;
        }
        pt__msg(msg, sizeof msg, "pt_pp: a pipeline step failed");
        if (!pt_dist_agree_msg(pp->d, ok, msg, sizeof msg)) {
            if (ctx->status == PT_OK) pt__fail(ctx, PT_ERR_STATE, "%s", msg);
            return NAN;
        }
        if (pp->p > 1) {
            uint64_t sq = pt__coll_begin(pp->d, PT_COLL_BCAST, PT_COMM_PP, 1, PT_COLL_F32, pp->p - 1);
            pt__coll_end(pp->d, sq, sq ? MPI_Bcast(&loss, 1, MPI_FLOAT, pp->p - 1, pp->comm) : PT__COLL_REFUSED);
            b[0] = pp->stats.my_bubble;
            pt__sum_f64(ctx, PT_COMM_PP, b, "pt_pp (bubble)");
            pp->stats.bubble = b[0] / pp->p;
        }
        if (pt_dist_layout(pp->d).dp > 1) {
            b[0] = loss;
            pt__sum_f64(ctx, PT_COMM_DP, b, "pt_pp (loss)");
            loss = (float)(b[0] / pt_dist_layout(pp->d).dp);
        }
        return ctx->status == PT_OK ? loss : NAN;
    }
#endif
    return ok ? loss : NAN;
}

/* the grad hook while a step runs with tied parameters: passes every completion on to the DP
   reducer's hook except a tied parameter's, which pt_pp_step passes on after summing the two
   copies -- so the bucket holding it is reduced (with ZeRO-2: reduce-scattered) only once the sum
   is in; until then its slab range keeps accumulating, which is what the reducer expects */
static void pt__pp_hook(void *user, pt_param *p) {
    pt_pp *pp = (pt_pp *)user;
    int i;
    for (i = 0; i < pp->ntied; i++)
        if (pp->tied[i] == p) {
            pp->tied_fires[i]++;
            return;
        }
    if (pp->hook) pp->hook(pp->hook_user, p);
}

PTDEF float pt_pp_step(pt_pp *pp, int round, int rounds) {
    float loss;
    pt_status st = PT_OK;
    int last;
    if (!pp) return NAN;
    if (rounds < 1 || round < 0 || round >= rounds) {
        pt__fail(pp->ctx, PT_ERR_ARG, "pt_pp_step: round %d of %d (need 0 <= round < rounds)", round, rounds);
        return NAN;
    }
    if (pp->desc.kind == PT_PP_FORWARD_ONLY) {
        pt__fail(pp->ctx, PT_ERR_STATE, "pt_pp_step: this runtime was made with the forward-only schedule (inference: pt_pp_eval only)");
        return NAN;
    }
    last = round == rounds - 1;
    /* every parameter's gradient completes m * rounds times in a step; the DP reducer starts a
       bucket's reduction during the backward that completes it the last time */
    pp->fires = pp->m * rounds;
    if (round == 0) {
        int i;
        pt_dp_begin_step(pp->dp, pp->fires);
        for (i = 0; i < pp->ntied; i++) pp->tied_fires[i] = 0;
    }
    if (pp->ntied) { /* hold the tied parameters' last completion until the two copies are summed */
        pp->hook = pp->ctx->grad_hook, pp->hook_user = pp->ctx->grad_hook_user;
        pt_set_grad_hook(pp->ctx, pt__pp_hook, pp);
    }
    loss = pt__pp_exec(pp, pp->sched, 1, 1.0f / ((float)pp->m * (float)rounds));
    if (pp->ntied) pt_set_grad_hook(pp->ctx, pp->hook, pp->hook_user);
    if (last && !pp->failed) {
#ifdef PTRAIN_MPI
        int i;
        if (pp->ntied && !pt__pp_sum_tied(pp)) st = pp->ctx->status;
        for (i = 0; st == PT_OK && i < pp->ntied; i++)
            while (pp->hook && pp->tied_fires[i]-- > 0) pp->hook(pp->hook_user, pp->tied[i]);
#endif
        if (st == PT_OK && pp->dp) st = pt_dp_finish(pp->dp);
    }
    return pt__pp_done(pp, loss, st);
}

PTDEF float pt_pp_eval(pt_pp *pp) {
    float loss;
    if (!pp) return NAN;
    loss = pt__pp_exec(pp, pp->fsched, 0, 1.0f);
    return pt__pp_done(pp, loss, PT_OK);
}

PTDEF pt_pp_stats pt_pp_stats_get(const pt_pp *pp) {
    pt_pp_stats s;
    if (pp) return pp->stats;
    memset(&s, 0, sizeof s);
    return s;
}
PTDEF const pt_pp_schedule *pt_pp_get_schedule(const pt_pp *pp) { return pp ? pp->sched : NULL; }
PTDEF void pt_pp_shape(const pt_pp *pp, int *p, int *rank, int *m, int *v) {
    if (p) *p = pp ? pp->p : 0;
    if (rank) *rank = pp ? pp->rank : 0;
    if (m) *m = pp ? pp->m : 0;
    if (v) *v = pp ? pp->v : 0;
}

PTDEF pt_status pt_pp_split(int layers, int nstages, const double *cost, double first_extra, double last_extra, int32_t *first,
                            char *err, size_t errlen) {
    int s, l, j;
    double *best;
    int *cut;
    if (err && errlen) err[0] = 0;
    if (!first || layers < 1 || nstages < 1 || nstages > layers) {
        pt__msg(err, errlen, "pt_pp_split: %d layers cannot be cut into %d stages (need 1 <= stages <= layers)", layers, nstages);
        return PT_ERR_ARG;
    }
    if (!cost) {
        if (layers % nstages) {
            pt__msg(err, errlen, "pt_pp_split: layers = %d is not divisible by the %d stages (pp x virtual stages); change --layers, or use a balanced split",
                    layers, nstages);
            return PT_ERR_ARG;
        }
        for (s = 0; s <= nstages; s++) first[s] = (int32_t)((int64_t)layers * s / nstages);
        return PT_OK;
    }
    /* best[s][l]: least max-stage cost of layers [0, l) in stages [0, s]; cut[s][l] where stage s starts */
    best = (double *)PT_MALLOC(sizeof(double) * (size_t)nstages * (size_t)(layers + 1));
    cut = (int *)PT_MALLOC(sizeof(int) * (size_t)nstages * (size_t)(layers + 1));
    if (!best || !cut) {
        PT_FREE(best);
        PT_FREE(cut);
        pt__msg(err, errlen, "pt_pp_split: out of memory");
        return PT_ERR_OOM;
    }
#define PT__B(s, l) best[(size_t)(s) * (size_t)(layers + 1) + (size_t)(l)]
#define PT__K(s, l) cut[(size_t)(s) * (size_t)(layers + 1) + (size_t)(l)]
    for (s = 0; s < nstages; s++)
        for (l = 0; l <= layers; l++) PT__B(s, l) = HUGE_VAL, PT__K(s, l) = -1;
    for (l = 1; l <= layers; l++) {
        double c = first_extra;
        for (j = 0; j < l; j++) c += cost[j];
        if (nstages == 1) c += last_extra;
        PT__B(0, l) = c, PT__K(0, l) = 0;
    }
    for (s = 1; s < nstages; s++)
        for (l = s + 1; l <= layers; l++) {
            double c = s == nstages - 1 ? last_extra : 0.0;
            for (j = l - 1; j >= s; j--) { /* stage s = layers [j, l) */
                double m;
                c += cost[j];
                m = PT__MAX(PT__B(s - 1, j), c);
                if (m < PT__B(s, l)) PT__B(s, l) = m, PT__K(s, l) = j;
            }
        }
    first[nstages] = layers;
    for (s = nstages - 1, l = layers; s >= 0; s--) first[s] = PT__K(s, l), l = PT__K(s, l);
#undef PT__B
#undef PT__K
    PT_FREE(best);
    PT_FREE(cut);
    return PT_OK;
}

// >>data  token shards, the streaming loader, the byte-level BPE tokenizer
/* Owns: shard files (llm.c and ptrain layouts), pt_loader (memory-mapped, shuffled per epoch,
   prefetched), pt_tokenizer
   Invariants: every file is validated on open; the loader's state continues the stream exactly,
   also on another DP size
   Entry points: pt_shard_write pt_loader_new pt_loader_next pt_loader_register pt_tokenizer_train
   pt_tokenizer_load_dir */
/* =================================================================================================
   token shards (llm.c and ptrain layouts), the memory-mapped streaming loader with a
   prefetch thread (token windows, or IDX records + labels), its resumable state, the BPE tokenizer
   Order of an epoch: the shards in a permuted order (a keyed Feistel permutation of their indices,
   seeded by (seed, epoch)), and inside each shard its windows in a permuted order (keyed by (seed,
   epoch, shard)); the epoch's samples are that sequence, cut into global batches of B consecutive
   samples, of which DP rank r takes the r-th B/ranks. The permutations cost no memory (computed
   per index), so a state is (seed, epoch, sample). The last samples_total % B samples of an epoch
   are skipped (different ones each epoch when shuffled). A producer thread fills a ring of ready
   batches; without threads (PTRAIN_NO_THREADS, or a platform without pthreads) pt_loader_next reads.
   ================================================================================================= */
#if !defined(PTRAIN_NO_THREADS) && (defined(__unix__) || defined(__APPLE__))
#define PT__DATA_THREADS 1
#include <pthread.h>
#endif
#if defined(__unix__) || defined(__APPLE__)
#define PT__DATA_POSIX 1
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#endif

#define PT__SHARD_HDR 64
#define PT__LLMC_HDR 1024

static uint32_t pt__le32(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static void pt__put32(unsigned char *p, uint32_t v) { p[0] = (unsigned char)v, p[1] = (unsigned char)(v >> 8), p[2] = (unsigned char)(v >> 16), p[3] = (unsigned char)(v >> 24); }

/* size of a file in bytes, or -1 */
static int64_t pt__file_size(const char *path) {
#ifdef PT__DATA_POSIX
    struct stat st;
    if (stat(path, &st) != 0) return -1;
    return (int64_t)st.st_size;
#else
    long n;
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    fclose(f);
    return (int64_t)n;
#endif
}

/* validates a shard's header against its size; PT_OK, PT_ERR_IO or PT_ERR_FORMAT with a message in err */
static pt_status pt__shard_check(const char *path, pt_shard_info *info, char *err, size_t errlen) {
    unsigned char h[PT__LLMC_HDR];
    int64_t size = pt__file_size(path), want;
    size_t got;
    uint32_t magic;
    FILE *f = size >= 0 ? fopen(path, "rb") : NULL;
    memset(info, 0, sizeof *info);
    if (!f) {
        pt__msg(err, errlen, "shard %s: cannot open it for reading", path);
        return PT_ERR_IO;
    }
    got = fread(h, 1, sizeof h, f);
    fclose(f);
    if (got < 4) {
        pt__msg(err, errlen, "shard %s: truncated header, expected at least %d bytes, found a %lld-byte file", path, PT__SHARD_HDR, (long long)size);
        return PT_ERR_FORMAT;
    }
    magic = pt__le32(h);
    if (magic == (uint32_t)PT_SHARD_LLMC_MAGIC) {
        int32_t count;
        if (got < PT__LLMC_HDR) {
            pt__msg(err, errlen, "shard %s: truncated llm.c header, expected %d bytes, found a %lld-byte file", path, PT__LLMC_HDR, (long long)size);
            return PT_ERR_FORMAT;
        }
        if (pt__le32(h + 4) != 1) {
            pt__msg(err, errlen, "shard %s: llm.c shard version: expected 1, found %u", path, (unsigned)pt__le32(h + 4));
            return PT_ERR_FORMAT;
        }
        count = (int32_t)pt__le32(h + 8);
        if (count < 0) {
            pt__msg(err, errlen, "shard %s: token count: expected >= 0, found %d", path, (int)count);
            return PT_ERR_FORMAT;
        }
        info->format = PT_SHARD_LLMC, info->version = 1, info->token_bytes = 2, info->tokens = count;
        info->header_bytes = PT__LLMC_HDR;
    } else if (magic == PT_SHARD_MAGIC) {
        uint64_t count;
        int i;
        if (got < PT__SHARD_HDR) {
            pt__msg(err, errlen, "shard %s: truncated header, expected %d bytes, found a %lld-byte file", path, PT__SHARD_HDR, (long long)size);
            return PT_ERR_FORMAT;
        }
        if (pt__le32(h + 4) != 1) {
            pt__msg(err, errlen, "shard %s: version: expected 1, found %u", path, (unsigned)pt__le32(h + 4));
            return PT_ERR_FORMAT;
        }
        info->token_bytes = (int32_t)pt__le32(h + 8);
        info->vocab = (int32_t)pt__le32(h + 12);
        count = (uint64_t)pt__le32(h + 16) | (uint64_t)pt__le32(h + 20) << 32;
        if (info->token_bytes != 2 && info->token_bytes != 4) {
            pt__msg(err, errlen, "shard %s: token width: expected 2 or 4 bytes, found %d", path, (int)info->token_bytes);
            return PT_ERR_FORMAT;
        }
        if (info->vocab < 0 || (info->token_bytes == 2 && info->vocab > 65536)) {
            pt__msg(err, errlen, "shard %s: vocabulary size: expected 0..%d for %d-byte tokens, found %d", path,
                    info->token_bytes == 2 ? 65536 : 2147483647, (int)info->token_bytes, (int)info->vocab);
            return PT_ERR_FORMAT;
        }
        for (i = 24; i < PT__SHARD_HDR; i++)
            if (h[i]) {
                pt__msg(err, errlen, "shard %s: reserved header byte %d: expected 0, found %u", path, i, (unsigned)h[i]);
                return PT_ERR_FORMAT;
            }
        if (count > (uint64_t)1 << 60) {
            pt__msg(err, errlen, "shard %s: token count: expected < 2^60, found %llu", path, (unsigned long long)count);
            return PT_ERR_FORMAT;
        }
        info->format = PT_SHARD_PTRAIN, info->version = 1, info->tokens = (int64_t)count;
        info->header_bytes = PT__SHARD_HDR;
    } else {
        pt__msg(err, errlen, "shard %s: bad magic: expected 0x%08X (ptrain) or %d (llm.c), found 0x%08X", path, (unsigned)PT_SHARD_MAGIC,
                PT_SHARD_LLMC_MAGIC, (unsigned)magic);
        return PT_ERR_FORMAT;
    }
    want = info->header_bytes + info->tokens * info->token_bytes;
    if (size != want) {
        pt__msg(err, errlen, "shard %s: size: expected %lld bytes (%lld-byte header + %lld tokens x %d bytes), found %lld bytes%s", path,
                (long long)want, (long long)info->header_bytes, (long long)info->tokens, (int)info->token_bytes, (long long)size,
                size < want ? " (truncated)" : "");
        return PT_ERR_FORMAT;
    }
    return PT_OK;
}

PTDEF pt_status pt_shard_info_read(pt_ctx *ctx, const char *path, pt_shard_info *info) {
    char err[PT__ERRLEN];
    pt_shard_info tmp;
    pt_status st;
    if (!path) {
        pt__fail(ctx, PT_ERR_ARG, "pt_shard_info_read: NULL path");
        return PT_ERR_ARG;
    }
    st = pt__shard_check(path, info ? info : &tmp, err, sizeof err);
    if (st != PT_OK) pt__fail(ctx, st, "pt_shard_info_read: %s", err);
    return st;
}

PTDEF pt_status pt_shard_write(pt_ctx *ctx, const char *path, pt_shard_format format, const uint32_t *tokens, int64_t n, int32_t vocab) {
    unsigned char h[PT__LLMC_HDR], buf[4096];
    int width = format == PT_SHARD_LLMC || (vocab > 0 && vocab <= 65536) ? 2 : 4;
    int hdr = format == PT_SHARD_LLMC ? PT__LLMC_HDR : PT__SHARD_HDR;
    uint32_t lim = format == PT_SHARD_LLMC ? 65536u : (vocab > 0 ? (uint32_t)vocab : 0xFFFFFFFFu);
    char tmp[4096];
    int64_t i;
    size_t k = 0;
    int ok;
    FILE *f;
    if (!path || (!tokens && n > 0) || n < 0 || vocab < 0 || (format != PT_SHARD_PTRAIN && format != PT_SHARD_LLMC) ||
        (format == PT_SHARD_LLMC && n > 2147483647)) {
        pt__fail(ctx, PT_ERR_ARG, "pt_shard_write: bad arguments (path %s, %lld tokens, vocab %d, format %d)", path ? path : "NULL", (long long)n,
                 (int)vocab, (int)format);
        return PT_ERR_ARG;
    }
    for (i = 0; i < n; i++)
        if (tokens[i] >= lim && !(lim == 0xFFFFFFFFu)) {
            pt__fail(ctx, PT_ERR_ARG, "pt_shard_write: %s: token %lld is %u, expected < %u", path, (long long)i, (unsigned)tokens[i], (unsigned)lim);
            return PT_ERR_ARG;
        }
    memset(h, 0, sizeof h);
    if (format == PT_SHARD_LLMC) {
        pt__put32(h, (uint32_t)PT_SHARD_LLMC_MAGIC), pt__put32(h + 4, 1), pt__put32(h + 8, (uint32_t)n);
    } else {
        pt__put32(h, PT_SHARD_MAGIC), pt__put32(h + 4, 1), pt__put32(h + 8, (uint32_t)width), pt__put32(h + 12, (uint32_t)vocab);
        pt__put32(h + 16, (uint32_t)((uint64_t)n & 0xFFFFFFFFu)), pt__put32(h + 20, (uint32_t)((uint64_t)n >> 32));
    }
    if (strlen(path) + 5 > sizeof tmp) {
        pt__fail(ctx, PT_ERR_ARG, "pt_shard_write: path too long: %s", path);
        return PT_ERR_ARG;
    }
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    f = fopen(tmp, "wb");
    if (!f) {
        pt__fail(ctx, PT_ERR_IO, "pt_shard_write: cannot create %s", tmp);
        return PT_ERR_IO;
    }
    ok = fwrite(h, 1, (size_t)hdr, f) == (size_t)hdr;
    for (i = 0; ok && i < n; i++) {
        uint32_t v = tokens[i];
        buf[k++] = (unsigned char)v, buf[k++] = (unsigned char)(v >> 8);
        if (width == 4) buf[k++] = (unsigned char)(v >> 16), buf[k++] = (unsigned char)(v >> 24);
        if (k + 4 > sizeof buf || i == n - 1) ok = fwrite(buf, 1, k, f) == k, k = 0;
    }
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        remove(tmp);
        pt__fail(ctx, PT_ERR_IO, "pt_shard_write: writing %s failed", path);
        return PT_ERR_IO;
    }
    return PT_OK;
}

/* a bijection of [0, n) keyed by key: a 4-round Feistel network on the next even power of two,
   walked until the result falls inside [0, n) (cycle walking keeps it a bijection) */
static int64_t pt__perm(int64_t i, int64_t n, uint64_t key) {
    int bits = 2, half, r;
    uint64_t mask, x = (uint64_t)i;
    if (n <= 1) return 0;
    while (((int64_t)1 << bits) < n) bits += 2;
    half = bits / 2, mask = ((uint64_t)1 << half) - 1;
    do {
        uint64_t lo = x & mask, hi = x >> half;
        for (r = 0; r < 4; r++) {
            uint64_t t = lo;
            lo = hi ^ (pt_hash64(key + (uint64_t)r * 0x9E3779B97F4A7C15ull + lo) & mask);
            hi = t;
        }
        x = hi << half | lo;
    } while (x >= (uint64_t)n);
    return (int64_t)x;
}

typedef struct pt__dshard {
    char *path;
    pt_shard_info info;
    int64_t samples;
} pt__dshard;
/* one open shard: its mapping (or FILE on platforms without mmap) */
typedef struct pt__dmap {
    int shard;
    const unsigned char *base;
    size_t len;
    FILE *f;
    int64_t used;
} pt__dmap;

struct pt_loader {
    pt_ctx *ctx;
    pt__dshard *sh;
    int nsh;
    int64_t B, T, local, rank, ranks, total, tokens;
    int shuffle;
    uint64_t seed;
    pt_loader_state pub, seen; /* state after the last batch returned; seen = pub as left (a changed pub was loaded) */
    pt_loader_state cur;       /* where the filler (producer thread or pt_loader_next) stands */
    int64_t order_epoch;       /* epoch of order/prefix (-1 none) */
    int *order;                /* shard index at each slot of the epoch */
    int64_t *prefix;           /* samples before each slot */
    pt__dmap map[2];
    int64_t map_tick;
    unsigned char *win;        /* one window's bytes (stdio path) */
    int kind;                  /* pt_loader_kind; for PT_LOADER_IDX, sh[0] is the record file with info.tokens =
                                  records, info.token_bytes = record bytes (T = that too) */
    pt__dshard lab;            /* PT_LOADER_IDX: the label file (path NULL: none), mapped in labmap */
    pt__dmap labmap;
    int64_t abytes, bbytes, boff, slot_bytes; /* a batch: part a (x; IDX: record bytes), part b (y; labels) at boff */
    unsigned char *stage;      /* one batch, for pt_loader_next_records without the prefetch thread */
    int nring, head, count, stop, failed, running;
    unsigned char *ring;       /* nring slots of a | b */
    pt_loader_state *ring_state;
    char err[PT__ERRLEN];
    pt_status err_st;
    pt_loader_stats stats;
#ifdef PT__DATA_THREADS
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
#endif
};

static void pt__dmap_close(pt__dmap *m) {
#ifdef PT__DATA_POSIX
    if (m->base) munmap((void *)m->base, m->len);
#endif
    if (m->f) fclose(m->f);
    m->base = NULL, m->f = NULL, m->shard = -1;
}

/* maps (or opens, without mmap) the file of d into m; 0, or -1 with a message in L->err */
static int pt__dmap_open(pt_loader *L, pt__dmap *m, const pt__dshard *d) {
    const char *path = d->path;
#ifdef PT__DATA_POSIX
    int fd = open(path, O_RDONLY);
    size_t len = (size_t)(d->info.header_bytes + d->info.tokens * d->info.token_bytes);
    void *p = fd >= 0 && len > 0 ? mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
    if (fd >= 0) close(fd);
    if (p == MAP_FAILED) {
        pt__msg(L->err, sizeof L->err, "pt_loader_next: cannot map %s (%lld bytes)", path, (long long)len);
        return -1;
    }
    m->base = (const unsigned char *)p, m->len = len;
#else
    m->f = fopen(path, "rb");
    if (!m->f) {
        pt__msg(L->err, sizeof L->err, "pt_loader_next: cannot open %s", path);
        return -1;
    }
#endif
    return 0;
}

/* the open view of shard s (at most two shards open: the least recently used one is closed) */
static pt__dmap *pt__dmap_get(pt_loader *L, int s) {
    pt__dmap *m;
    int i;
    for (i = 0; i < 2; i++)
        if (L->map[i].shard == s) {
            L->map[i].used = ++L->map_tick;
            return &L->map[i];
        }
    m = L->map[0].used <= L->map[1].used ? &L->map[0] : &L->map[1];
    pt__dmap_close(m);
    if (pt__dmap_open(L, m, &L->sh[s]) != 0) return NULL;
    m->shard = s, m->used = ++L->map_tick;
    return m;
}

/* n bytes at offset off of the file mapped in m (through buf when it is not memory-mapped); NULL with a message in L->err */
static const unsigned char *pt__dmap_at(pt_loader *L, pt__dmap *m, const char *path, int64_t off, size_t n, unsigned char *buf) {
    if (m->base) return m->base + off;
    if (fseek(m->f, (long)off, SEEK_SET) != 0 || fread(buf, 1, n, m->f) != n) {
        pt__msg(L->err, sizeof L->err, "pt_loader_next: reading %s at byte %lld failed", path, (long long)off);
        return NULL;
    }
    return buf;
}

/* computes the shard order and prefix sums of an epoch */
static void pt__data_epoch(pt_loader *L, int64_t epoch) {
    int i;
    uint64_t key = pt_hash64(L->seed ^ pt_hash64((uint64_t)epoch * 2 + 1));
    if (L->order_epoch == epoch) return;
    for (i = 0; i < L->nsh; i++) L->order[i] = L->shuffle ? (int)pt__perm(i, L->nsh, key) : i;
    L->prefix[0] = 0;
    for (i = 0; i < L->nsh; i++) L->prefix[i + 1] = L->prefix[i] + L->sh[L->order[i]].samples;
    L->order_epoch = epoch;
}

/* slot of sample k of the current epoch (binary search of the prefix sums) */
static int pt__data_slot(const pt_loader *L, int64_t k) {
    int lo = 0, hi = L->nsh - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (L->prefix[mid] <= k) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

/* fills the informational shard/position of a state */
static void pt__data_locate(pt_loader *L, pt_loader_state *s) {
    s->shard = s->position = 0;
    if (s->sample < L->total) {
        int slot;
        pt__data_epoch(L, s->epoch);
        slot = pt__data_slot(L, s->sample);
        s->shard = slot, s->position = s->sample - L->prefix[slot];
    }
}

/* reads the batch at L->cur into a and b (this rank's rows: x and y, or IDX records and labels) and
   advances L->cur; 0 or an error in L->err */
static pt_status pt__data_fill(pt_loader *L, void *a, void *b) {
    pt_loader_state *c = &L->cur;
    int64_t j, t, T = L->T;
    int32_t *x = (int32_t *)a, *y = (int32_t *)b;
    if (c->sample + L->B > L->total) c->epoch++, c->sample = 0;
    pt__data_epoch(L, c->epoch);
    for (j = 0; j < L->local; j++) {
        int64_t k = c->sample + L->rank * L->local + j, w;
        int slot = pt__data_slot(L, k), s = L->order[slot], tb = L->sh[s].info.token_bytes;
        const unsigned char *p;
        pt__dmap *m;
        w = k - L->prefix[slot];
        if (L->shuffle) w = pt__perm(w, L->sh[s].samples, pt_hash64(L->seed ^ pt_hash64((uint64_t)c->epoch * 2 + 1) ^ pt_hash64((uint64_t)s + 0x51ED)));
        m = pt__dmap_get(L, s);
        if (!m) return PT_ERR_IO;
        if (L->kind == PT_LOADER_IDX) { /* record w: tb bytes; its label byte */
            const unsigned char *lp;
            unsigned char lb;
            if (!(p = pt__dmap_at(L, m, L->sh[s].path, L->sh[s].info.header_bytes + w * tb, (size_t)tb, L->win))) return PT_ERR_IO;
            memcpy((unsigned char *)a + j * tb, p, (size_t)tb);
            y[j] = 0;
            if (L->lab.path) {
                if (!(lp = pt__dmap_at(L, &L->labmap, L->lab.path, L->lab.info.header_bytes + w, 1, &lb))) return PT_ERR_IO;
                y[j] = lp[0];
            }
            continue;
        }
        if (!(p = pt__dmap_at(L, m, L->sh[s].path, L->sh[s].info.header_bytes + w * T * tb, (size_t)(tb * (T + 1)), L->win))) return PT_ERR_IO;
        if (tb == 2) {
            int32_t prev = (int32_t)(p[0] | p[1] << 8);
            for (t = 0; t < T; t++) {
                int32_t v = (int32_t)(p[2 * t + 2] | p[2 * t + 3] << 8);
                x[j * T + t] = prev, y[j * T + t] = v, prev = v;
            }
        } else {
            int32_t prev = (int32_t)pt__le32(p);
            for (t = 0; t < T; t++) {
                int32_t v = (int32_t)pt__le32(p + 4 * t + 4);
                x[j * T + t] = prev, y[j * T + t] = v, prev = v;
            }
        }
    }
    c->sample += L->B, c->batches++;
    pt__data_locate(L, c);
    return PT_OK;
}

#ifdef PT__DATA_THREADS
static void *pt__data_producer(void *arg) {
    pt_loader *L = (pt_loader *)arg;
    pthread_mutex_lock(&L->mu);
    for (;;) {
        int slot;
        pt_status st;
        while (!L->stop && L->count == L->nring) pthread_cond_wait(&L->cv, &L->mu);
        if (L->stop) break;
        slot = (L->head + L->count) % L->nring;
        pthread_mutex_unlock(&L->mu);
        st = pt__data_fill(L, L->ring + slot * L->slot_bytes, L->ring + slot * L->slot_bytes + L->boff);
        L->ring_state[slot] = L->cur;
        pthread_mutex_lock(&L->mu);
        if (st != PT_OK) {
            L->failed = 1, L->err_st = st;
            pthread_cond_broadcast(&L->cv);
            break;
        }
        L->count++;
        pthread_cond_broadcast(&L->cv);
    }
    pthread_mutex_unlock(&L->mu);
    return NULL;
}
#endif

static void pt__data_stop(pt_loader *L) {
#ifdef PT__DATA_THREADS
    if (L->running) {
        pthread_mutex_lock(&L->mu);
        L->stop = 1;
        pthread_cond_broadcast(&L->cv);
        pthread_mutex_unlock(&L->mu);
        pthread_join(L->thread, NULL);
        L->running = 0;
    }
#endif
    L->head = L->count = L->stop = L->failed = 0;
}

static void pt__data_start(pt_loader *L) {
#ifdef PT__DATA_THREADS
    if (L->nring > 0 && !L->running) {
        if (pthread_create(&L->thread, NULL, pt__data_producer, L) == 0) L->running = 1;
        else L->nring = 0; /* no thread: read in pt_loader_next */
    }
#else
    (void)L;
#endif
}

PTDEF void pt_loader_free(pt_loader *L) {
    int i;
    if (!L) return;
    pt__data_stop(L);
#ifdef PT__DATA_THREADS
    pthread_mutex_destroy(&L->mu);
    pthread_cond_destroy(&L->cv);
#endif
    for (i = 0; i < 2; i++) pt__dmap_close(&L->map[i]);
    pt__dmap_close(&L->labmap);
    PT_FREE(L->lab.path);
    PT_FREE(L->stage);
    for (i = 0; i < L->nsh; i++) PT_FREE(L->sh[i].path);
    PT_FREE(L->sh);
    PT_FREE(L->order);
    PT_FREE(L->prefix);
    PT_FREE(L->win);
    PT_FREE(L->ring);
    PT_FREE(L->ring_state);
    PT_FREE(L);
}

static int pt__data_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* the shard paths of desc (an explicit list, or dir/prefix* sorted), as PT_MALLOC'd strings */
static pt_status pt__data_paths(pt_ctx *ctx, const pt_loader_desc *d, char ***out, int *n) {
    int i, cap = 0;
    char **v = NULL;
    *n = 0;
    if (d->npaths > 0) {
        v = (char **)PT_MALLOC(sizeof(char *) * (size_t)d->npaths);
        if (!v) return PT_ERR_OOM;
        for (i = 0; i < d->npaths; i++) {
            size_t len = d->paths[i] ? strlen(d->paths[i]) + 1 : 0;
            v[i] = len ? (char *)PT_MALLOC(len) : NULL;
            if (!v[i]) {
                *out = v, *n = i;
                return len ? PT_ERR_OOM : PT_ERR_ARG;
            }
            memcpy(v[i], d->paths[i], len);
        }
        *out = v, *n = d->npaths;
        return PT_OK;
    }
#ifdef PT__DATA_POSIX
    if (d->dir) {
        DIR *dir = opendir(d->dir);
        struct dirent *e;
        size_t plen = d->prefix ? strlen(d->prefix) : 0;
        if (!dir) {
            pt__fail(ctx, PT_ERR_IO, "pt_loader_new: cannot open the directory %s", d->dir);
            return PT_ERR_IO;
        }
        while ((e = readdir(dir)) != NULL) {
            size_t nl = strlen(e->d_name), len = strlen(d->dir) + nl + 2;
            struct stat st;
            char *p;
            if (e->d_name[0] == '.' || (plen && strncmp(e->d_name, d->prefix, plen) != 0) || (nl > 4 && !strcmp(e->d_name + nl - 4, ".tmp"))) continue;
            p = (char *)PT_MALLOC(len);
            if (!p) break;
            snprintf(p, len, "%s/%s", d->dir, e->d_name);
            if (stat(p, &st) != 0 || !S_ISREG(st.st_mode)) {
                PT_FREE(p);
                continue;
            }
            if (*n == cap) {
                char **nv = (char **)PT_REALLOC(v, sizeof(char *) * (size_t)(cap = cap ? cap * 2 : 16));
                if (!nv) {
                    PT_FREE(p);
                    break;
                }
                v = nv;
            }
            v[(*n)++] = p;
        }
        closedir(dir);
        *out = v;
        if (*n > 1) qsort(v, (size_t)*n, sizeof(char *), pt__data_cmp);
        if (*n == 0) {
            pt__fail(ctx, PT_ERR_ARG, "pt_loader_new: no shard in %s (expected files named %s*)", d->dir, d->prefix ? d->prefix : "");
            return PT_ERR_ARG;
        }
        return PT_OK;
    }
#else
    (void)cap;
    if (d->dir) {
        pt__fail(ctx, PT_ERR_ARG, "pt_loader_new: desc.dir needs a POSIX system; list the shards in desc.paths");
        return PT_ERR_ARG;
    }
#endif
    pt__fail(ctx, PT_ERR_ARG, "pt_loader_new: no shards (set desc.paths/npaths or desc.dir)");
    return PT_ERR_ARG;
}

/* validates an IDX file (unsigned bytes) against its size: d->info.tokens = the first dimension,
   token_bytes = the product of the others, header_bytes = 4 + 4 ndims; dims (>= 3 entries) the
   others; PT_OK, PT_ERR_IO or PT_ERR_FORMAT with a message in err */
static pt_status pt__idx_check(const char *path, pt__dshard *d, int *ndims, int64_t *dims, char *err, size_t errlen) {
    unsigned char h[4 + 4 * 4];
    int64_t size = pt__file_size(path), want, rec = 1;
    FILE *f = size >= 0 ? fopen(path, "rb") : NULL;
    size_t got;
    int i, nd;
    memset(&d->info, 0, sizeof d->info);
    if (!f) {
        pt__msg(err, errlen, "IDX file %s: cannot open it for reading", path);
        return PT_ERR_IO;
    }
    got = fread(h, 1, sizeof h, f);
    fclose(f);
    if (got < 4 || h[0] != 0 || h[1] != 0) {
        pt__msg(err, errlen, "IDX file %s: bad magic: expected bytes 0x00 0x00 then type and dimensions, found %s", path,
                got < 4 ? "a file shorter than 4 bytes" : "other first bytes (not an IDX file, or still compressed?)");
        return PT_ERR_FORMAT;
    }
    nd = h[3];
    if (h[2] != 0x08) {
        pt__msg(err, errlen, "IDX file %s: value type: expected 0x08 (unsigned byte), found 0x%02X", path, (unsigned)h[2]);
        return PT_ERR_FORMAT;
    }
    if (nd < 1 || nd > 4) {
        pt__msg(err, errlen, "IDX file %s: number of dimensions: expected 1..4, found %d", path, nd);
        return PT_ERR_FORMAT;
    }
    if ((int64_t)got < 4 + 4 * nd) {
        pt__msg(err, errlen, "IDX file %s: truncated header, expected %d bytes, found a %lld-byte file", path, 4 + 4 * nd, (long long)size);
        return PT_ERR_FORMAT;
    }
    for (i = 0; i < nd; i++) {
        int64_t v = (int64_t)((uint32_t)h[4 + 4 * i] << 24 | (uint32_t)h[5 + 4 * i] << 16 | (uint32_t)h[6 + 4 * i] << 8 | h[7 + 4 * i]);
        if (i == 0) d->info.tokens = v;
        else {
            if (v <= 0 || v > ((int64_t)1 << 30) / rec) {
                pt__msg(err, errlen, "IDX file %s: dimension %d: expected 1..2^30 with a record of at most 2^30 bytes, found %lld", path, i, (long long)v);
                return PT_ERR_FORMAT;
            }
            dims[i - 1] = v, rec *= v;
        }
    }
    *ndims = nd - 1;
    d->info.token_bytes = (int32_t)rec, d->info.header_bytes = 4 + 4 * nd, d->samples = d->info.tokens;
    want = d->info.header_bytes + d->info.tokens * rec;
    if (size != want) {
        pt__msg(err, errlen, "IDX file %s: size: expected %lld bytes (%lld-byte header + %lld records x %lld bytes), found %lld bytes%s", path,
                (long long)want, (long long)d->info.header_bytes, (long long)d->info.tokens, (long long)rec, (long long)size,
                size < want ? " (truncated)" : "");
        return PT_ERR_FORMAT;
    }
    return PT_OK;
}

/* PT_LOADER_IDX: opens desc's record and label files into L (sh[0], lab) */
static pt_status pt__idx_open(pt_ctx *ctx, pt_loader *L, const pt_loader_desc *d) {
    char err[PT__ERRLEN];
    int64_t dims[3] = {0, 0, 0}, ldims[3];
    int nd = 0, lnd = 0, i;
    pt_status st;
    const char *paths[2];
    paths[0] = d->idx_data, paths[1] = d->idx_labels;
    L->sh = (pt__dshard *)PT_MALLOC(sizeof(pt__dshard));
    if (L->sh) memset(L->sh, 0, sizeof(pt__dshard)), L->nsh = 1;
    for (i = 0; i < 2 && L->sh; i++)
        if (paths[i]) {
            char **dst = i ? &L->lab.path : &L->sh[0].path;
            size_t len = strlen(paths[i]) + 1;
            if ((*dst = (char *)PT_MALLOC(len)) != NULL) memcpy(*dst, paths[i], len);
            else break;
        }
    if (!L->sh || i < 2) {
        pt__fail(ctx, PT_ERR_OOM, "pt_loader_new: out of memory");
        return PT_ERR_OOM;
    }
    if (!d->idx_data) {
        pt__fail(ctx, PT_ERR_ARG, "pt_loader_new: PT_LOADER_IDX needs desc.idx_data (the IDX file of records)");
        return PT_ERR_ARG;
    }
    st = pt__idx_check(d->idx_data, &L->sh[0], &nd, dims, err, sizeof err);
    if (st == PT_OK && d->idx_labels) {
        st = pt__idx_check(d->idx_labels, &L->lab, &lnd, ldims, err, sizeof err);
        if (st == PT_OK && (lnd != 0 || L->lab.info.tokens != L->sh[0].info.tokens)) {
            pt__msg(err, sizeof err, "IDX label file %s: expected one dimension of %lld labels (one per record of %s), found %d dimension(s), %lld entries",
                    d->idx_labels, (long long)L->sh[0].info.tokens, d->idx_data, lnd + 1, (long long)L->lab.info.tokens);
            st = PT_ERR_FORMAT;
        }
        if (st == PT_OK && pt__dmap_open(L, &L->labmap, &L->lab) != 0) st = PT_ERR_IO, pt__msg(err, sizeof err, "%s", L->err);
        if (st == PT_OK && d->classes > 0) {
            const unsigned char *lp;
            unsigned char lb;
            int64_t k;
            for (k = 0; k < L->lab.info.tokens && st == PT_OK; k++) {
                if (!(lp = pt__dmap_at(L, &L->labmap, L->lab.path, L->lab.info.header_bytes + k, 1, &lb))) st = PT_ERR_IO, pt__msg(err, sizeof err, "%s", L->err);
                else if (lp[0] >= d->classes) {
                    pt__msg(err, sizeof err, "IDX label file %s: label %lld: expected 0..%d, found %u", d->idx_labels, (long long)k, (int)d->classes - 1, (unsigned)lp[0]);
                    st = PT_ERR_FORMAT;
                }
            }
        }
    }
    if (st != PT_OK) {
        pt__fail(ctx, st, "pt_loader_new: %s", err);
        return st;
    }
    L->T = L->sh[0].info.token_bytes, L->total = L->sh[0].samples, L->tokens = L->total * L->T;
    L->stats.record_bytes = L->T, L->stats.record_ndim = nd;
    for (i = 0; i < nd; i++) L->stats.record_dims[i] = dims[i];
    return PT_OK;
}

/* PT_LOADER_TOKENS: the shards of desc (a path list, or dir + prefix) into L->sh, validated */
static pt_status pt__tokens_open(pt_ctx *ctx, pt_loader *L, const pt_loader_desc *d) {
    char **paths = NULL, err[PT__ERRLEN];
    int n = 0, i;
    pt_status st;
    st = pt__data_paths(ctx, d, &paths, &n);
    L->sh = (pt__dshard *)PT_MALLOC(sizeof(pt__dshard) * (size_t)(n > 0 ? n : 1));
    if (L->sh) memset(L->sh, 0, sizeof(pt__dshard) * (size_t)(n > 0 ? n : 1));
    for (i = 0; L->sh && i < n; i++) L->sh[i].path = paths[i];
    L->nsh = L->sh ? n : 0;
    if (!L->sh)
        for (i = 0; i < n; i++) PT_FREE(paths[i]);
    PT_FREE(paths);
    if (st != PT_OK || !L->sh) {
        if (st == PT_ERR_OOM || !L->sh) pt__fail(ctx, PT_ERR_OOM, "pt_loader_new: out of memory");
        else if (st == PT_ERR_ARG && pt_status_get(ctx) == PT_OK) pt__fail(ctx, PT_ERR_ARG, "pt_loader_new: NULL shard path");
        return L->sh ? st : PT_ERR_OOM;
    }
    for (i = 0; i < n; i++) {
        st = pt__shard_check(L->sh[i].path, &L->sh[i].info, err, sizeof err);
        if (st != PT_OK) {
            pt__fail(ctx, st, "pt_loader_new: %s", err);
            return st;
        }
        L->sh[i].samples = L->sh[i].info.tokens > 0 ? (L->sh[i].info.tokens - 1) / L->T : 0;
        L->total += L->sh[i].samples, L->tokens += L->sh[i].info.tokens;
    }
    return PT_OK;
}

PTDEF pt_loader *pt_loader_new(pt_ctx *ctx, const pt_loader_desc *d) {
    pt_loader *L;
    int n;
    pt_status st;
    int64_t ranks = d && d->ranks > 0 ? d->ranks : 1;
    if (d && d->kind != PT_LOADER_TOKENS && d->kind != PT_LOADER_IDX)
        return (pt_loader *)pt__fail(ctx, PT_ERR_ARG, "pt_loader_new: desc.kind: expected PT_LOADER_TOKENS (0) or PT_LOADER_IDX (1), found %d", (int)d->kind);
    if (!d || d->batch <= 0 || (d->seq <= 0 && d->kind == PT_LOADER_TOKENS) || d->rank < 0 || d->rank >= ranks || d->batch % ranks != 0) {
        return (pt_loader *)pt__fail(ctx, PT_ERR_ARG, "pt_loader_new: expected batch > 0 divisible by ranks, seq > 0, 0 <= rank < ranks; found batch %lld, seq %lld, rank %d of %lld",
                                     d ? (long long)d->batch : 0LL, d ? (long long)d->seq : 0LL, d ? (int)d->rank : 0, (long long)ranks);
    }
    L = (pt_loader *)PT_MALLOC(sizeof *L);
    if (!L) return (pt_loader *)pt__fail(ctx, PT_ERR_OOM, "pt_loader_new: out of memory");
    memset(L, 0, sizeof *L);
    L->ctx = ctx, L->B = d->batch, L->T = d->seq, L->ranks = ranks, L->rank = d->rank, L->local = d->batch / ranks;
    L->shuffle = d->shuffle != 0, L->seed = d->seed, L->order_epoch = -1, L->kind = d->kind;
    L->map[0].shard = L->map[1].shard = L->labmap.shard = -1;
#ifdef PT__DATA_THREADS
    pthread_mutex_init(&L->mu, NULL);
    pthread_cond_init(&L->cv, NULL);
    L->nring = d->prefetch < 0 ? 4 : d->prefetch;
#endif
    st = L->kind == PT_LOADER_IDX ? pt__idx_open(ctx, L, d) : pt__tokens_open(ctx, L, d);
    if (st != PT_OK) {
        pt_loader_free(L);
        return NULL;
    }
    n = L->nsh;
    if (L->total < L->B) {
        if (L->kind == PT_LOADER_IDX)
            pt__fail(ctx, PT_ERR_ARG, "pt_loader_new: the dataset is smaller than one global batch: expected at least %lld records (batch %lld), found %lld in %s",
                     (long long)L->B, (long long)L->B, (long long)L->total, L->sh[0].path);
        else
            pt__fail(ctx, PT_ERR_ARG, "pt_loader_new: the dataset is smaller than one global batch: expected at least %lld samples of %lld+1 tokens (batch %lld), found %lld in %d shard(s) of %lld tokens",
                     (long long)L->B, (long long)L->T, (long long)L->B, (long long)L->total, n, (long long)L->tokens);
        pt_loader_free(L);
        return NULL;
    }
    L->order = (int *)PT_MALLOC(sizeof(int) * (size_t)n);
    L->prefix = (int64_t *)PT_MALLOC(sizeof(int64_t) * (size_t)(n + 1));
    L->win = (unsigned char *)PT_MALLOC((size_t)(4 * (L->T + 1)));
    /* a batch: tokens x | y (int32 each); IDX records (bytes) | labels (int32), 8-byte aligned parts */
    L->abytes = L->kind == PT_LOADER_IDX ? L->local * L->T : 4 * L->local * L->T;
    L->bbytes = L->kind == PT_LOADER_IDX ? 4 * L->local : 4 * L->local * L->T;
    L->boff = (L->abytes + 7) / 8 * 8, L->slot_bytes = (L->boff + L->bbytes + 7) / 8 * 8;
    L->stage = (unsigned char *)PT_MALLOC((size_t)L->slot_bytes);
    L->ring = L->nring ? (unsigned char *)PT_MALLOC((size_t)(L->slot_bytes * L->nring)) : NULL;
    L->ring_state = L->nring ? (pt_loader_state *)PT_MALLOC(sizeof(pt_loader_state) * (size_t)L->nring) : NULL;
    if (!L->order || !L->prefix || !L->win || !L->stage || (L->nring && (!L->ring || !L->ring_state))) {
        pt_loader_free(L);
        return (pt_loader *)pt__fail(ctx, PT_ERR_OOM, "pt_loader_new: out of memory");
    }
    L->pub.seed = L->seed, L->pub.seq = L->T, L->pub.samples_total = L->total;
    pt__data_locate(L, &L->pub);
    L->seen = L->cur = L->pub;
    L->stats.samples_total = L->total, L->stats.batches_per_epoch = L->total / L->B;
    L->stats.shards = n, L->stats.tokens = L->tokens;
    pt__data_start(L);
    return L;
}

PTDEF pt_status pt_loader_set_state(pt_loader *L, const pt_loader_state *s) {
    if (!L || !s) return PT_ERR_ARG;
    if (s->seq != L->T || s->samples_total != L->total || s->epoch < 0 || s->sample < 0 || s->sample > L->total || s->batches < 0) {
        pt__fail(L->ctx, PT_ERR_ARG, "pt_loader_set_state: the state belongs to another stream: expected seq %lld and %lld samples per epoch, found seq %lld, %lld samples (epoch %lld, sample %lld)",
                 (long long)L->T, (long long)L->total, (long long)s->seq, (long long)s->samples_total, (long long)s->epoch, (long long)s->sample);
        L->pub = L->seen; /* keep the stream where it was */
        return PT_ERR_ARG;
    }
    pt__data_stop(L);
    L->seed = s->seed;
    L->order_epoch = -1;
    L->cur = *s;
    pt__data_locate(L, &L->cur);
    L->pub = L->seen = L->cur;
    pt__data_start(L);
    return PT_OK;
}

/* copies a batch's parts (a, b: as pt__data_fill writes them) out: part a to xa as bytes, or to xf
   as floats (byte / 255); part b to xb; NULL destinations are skipped */
static void pt__data_out(const pt_loader *L, const unsigned char *a, const unsigned char *b, void *xa, float *xf, void *xb) {
    int64_t i;
    if (xf)
        for (i = 0; i < L->abytes; i++) xf[i] = (float)a[i] * (1.0f / 255.0f);
    if (xa && xa != (const void *)a) memcpy(xa, a, (size_t)L->abytes);
    if (xb && xb != (const void *)b) memcpy(xb, b, (size_t)L->bbytes);
}

/* the next batch of this rank into xa (bytes) or xf (floats), and xb; fn names the caller in errors */
static pt_status pt__data_take(pt_loader *L, int kind, const char *fn, void *xa, float *xf, void *xb) {
    double t0;
    pt_status st = PT_OK;
    if (!L || (!xa && !xf) || (!xb && kind == PT_LOADER_TOKENS)) return PT_ERR_ARG;
    if (L->kind != kind) {
        pt__fail(L->ctx, PT_ERR_ARG, "%s: this loader reads %s; use %s", fn, L->kind == PT_LOADER_IDX ? "IDX records" : "token shards",
                 L->kind == PT_LOADER_IDX ? "pt_loader_next_records or pt_loader_next_bytes" : "pt_loader_next");
        return PT_ERR_ARG;
    }
    if (memcmp(&L->pub, &L->seen, sizeof L->pub) != 0) { /* a checkpoint load wrote the registered state */
        pt_loader_state s = L->pub;
        L->pub = L->seen;
        if ((st = pt_loader_set_state(L, &s)) != PT_OK) return st;
    }
    t0 = pt_time();
#ifdef PT__DATA_THREADS
    if (L->running) {
        pthread_mutex_lock(&L->mu);
        while (L->count == 0 && !L->failed) pthread_cond_wait(&L->cv, &L->mu);
        if (L->count == 0) st = L->err_st;
        else {
            const unsigned char *slot = L->ring + L->head * L->slot_bytes;
            pt__data_out(L, slot, slot + L->boff, xa, xf, xb);
            L->pub = L->ring_state[L->head];
            L->head = (L->head + 1) % L->nring, L->count--;
            pthread_cond_broadcast(&L->cv);
        }
        pthread_mutex_unlock(&L->mu);
    } else
#endif
    {   /* read in place: straight into the caller's buffers when it takes both parts as they are */
        unsigned char *a = xa ? (unsigned char *)xa : L->stage, *b = xb ? (unsigned char *)xb : L->stage + L->boff;
        st = pt__data_fill(L, a, b);
        if (st == PT_OK) L->pub = L->cur, pt__data_out(L, a, b, NULL, xf, NULL);
    }
    if (st != PT_OK) {
        pt__fail(L->ctx, st, "%s", L->err);
        return st;
    }
    L->seen = L->pub;
    L->stats.last_wait_s = pt_time() - t0;
    L->stats.wait_s += L->stats.last_wait_s;
    L->stats.batches++;
    if (L->ctx && L->ctx->trace) pt_trace_event(L->ctx, PT_TRACE_DATA, "data", t0, t0 + L->stats.last_wait_s, -1, -1); /* trace */
    return PT_OK;
}

PTDEF pt_status pt_loader_next(pt_loader *L, int32_t *x, int32_t *y) { return pt__data_take(L, PT_LOADER_TOKENS, "pt_loader_next", x, NULL, y); }
PTDEF pt_status pt_loader_next_records(pt_loader *L, float *x, int32_t *labels) {
    return pt__data_take(L, PT_LOADER_IDX, "pt_loader_next_records", NULL, x, labels);
}
PTDEF pt_status pt_loader_next_bytes(pt_loader *L, uint8_t *x, int32_t *labels) {
    return pt__data_take(L, PT_LOADER_IDX, "pt_loader_next_bytes", x, NULL, labels);
}

PTDEF pt_loader_state pt_loader_get_state(const pt_loader *L) {
    pt_loader_state s;
    if (L) return L->pub;
    memset(&s, 0, sizeof s);
    return s;
}

PTDEF pt_status pt_loader_register(pt_loader *L, const char *name) {
    if (!L) return PT_ERR_ARG;
    return pt_state_register(L->ctx, name, &L->pub, (int64_t)sizeof L->pub);
}

PTDEF pt_loader_stats pt_loader_stats_get(const pt_loader *L) {
    pt_loader_stats s;
    if (L) return L->stats;
    memset(&s, 0, sizeof s);
    return s;
}

/* ---- the byte-level BPE tokenizer ----------------------------------------------------------------
   One engine trains and encodes: the text as a doubly linked list of tokens (merged-away positions
   get token -1), a hash table of adjacent pairs with their count and the positions where they start
   (stale positions are skipped when checked), and -- training only -- a max-heap of (count, pair)
   with lazy updates: an entry whose count is no longer the pair's is re-pushed or dropped when it
   surfaces, and the pairs whose count grew during a merge are pushed once after it. */
struct pt_tokenizer {
    pt_ctx *ctx;
    int32_t merges;
    int32_t *pair; /* 2 x merges: the (left, right) ids of merge i */
    int64_t *len;  /* bytes of each id (saturated at 2^62) */
};

typedef struct pt__bpe_pair {
    uint64_t key; /* left << 32 | right */
    int64_t count;
    int32_t *occ, nocc, cap, touched, used;
} pt__bpe_pair;
typedef struct pt__bpe_heap {
    int64_t count;
    uint64_t key;
} pt__bpe_heap;
typedef struct pt__bpe {
    pt__bpe_pair *tab;
    int64_t tcap, tn;
    int32_t *tok, *nxt, *prv;
    pt__bpe_heap *heap;
    int64_t hn, hcap;
    uint64_t *touched;
    int64_t ntouched, cap_touched;
    int train, oom;
} pt__bpe;

static pt__bpe_pair *pt__bpe_find(pt__bpe *E, uint64_t key, int create) {
    uint64_t i;
    if (create && 2 * (E->tn + 1) > E->tcap) { /* grow to keep the table at most half full */
        int64_t ncap = E->tcap ? 2 * E->tcap : 4096, j;
        pt__bpe_pair *nt = (pt__bpe_pair *)PT_MALLOC(sizeof(pt__bpe_pair) * (size_t)ncap);
        if (!nt) {
            E->oom = 1;
            return NULL;
        }
        memset(nt, 0, sizeof(pt__bpe_pair) * (size_t)ncap);
        for (j = 0; j < E->tcap; j++)
            if (E->tab[j].used) {
                for (i = pt_hash64(E->tab[j].key) & (uint64_t)(ncap - 1); nt[i].used; i = (i + 1) & (uint64_t)(ncap - 1)) {
                }
                nt[i] = E->tab[j];
            }
        PT_FREE(E->tab);
        E->tab = nt, E->tcap = ncap;
    }
    if (!E->tcap) return NULL;
    for (i = pt_hash64(key) & (uint64_t)(E->tcap - 1); E->tab[i].used; i = (i + 1) & (uint64_t)(E->tcap - 1))
        if (E->tab[i].key == key) return &E->tab[i];
    if (!create) return NULL;
    memset(&E->tab[i], 0, sizeof E->tab[i]);
    E->tab[i].used = 1, E->tab[i].key = key, E->tab[i].touched = -2, E->tn++; /* steps: -1 (the first count), 0, 1, ... */
    return &E->tab[i];
}

static void pt__bpe_push(pt__bpe *E, int64_t count, uint64_t key) {
    int64_t i;
    if (E->hn == E->hcap) {
        int64_t nc = E->hcap ? 2 * E->hcap : 4096;
        pt__bpe_heap *nh = (pt__bpe_heap *)PT_REALLOC(E->heap, sizeof(pt__bpe_heap) * (size_t)nc);
        if (!nh) {
            E->oom = 1;
            return;
        }
        E->heap = nh, E->hcap = nc;
    }
    for (i = E->hn++; i > 0; i = (i - 1) / 2) { /* sift up: larger count first, then the smaller pair */
        pt__bpe_heap *p = &E->heap[(i - 1) / 2];
        if (p->count > count || (p->count == count && p->key < key)) break;
        E->heap[i] = *p;
    }
    E->heap[i].count = count, E->heap[i].key = key;
}

static pt__bpe_heap pt__bpe_pop(pt__bpe *E) {
    pt__bpe_heap top = E->heap[0], last = E->heap[--E->hn];
    int64_t i = 0, c;
    while ((c = 2 * i + 1) < E->hn) {
        if (c + 1 < E->hn && (E->heap[c + 1].count > E->heap[c].count || (E->heap[c + 1].count == E->heap[c].count && E->heap[c + 1].key < E->heap[c].key))) c++;
        if (last.count > E->heap[c].count || (last.count == E->heap[c].count && last.key < E->heap[c].key)) break;
        E->heap[i] = E->heap[c], i = c;
    }
    if (E->hn) E->heap[i] = last;
    return top;
}

/* one more occurrence of (a, b) at position pos; `step` marks the pair touched in this merge (training) */
static void pt__bpe_add(pt__bpe *E, int32_t a, int32_t b, int32_t pos, int32_t step) {
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    pt__bpe_pair *p = pt__bpe_find(E, key, 1);
    if (!p) return;
    if (p->nocc == p->cap) {
        int32_t nc = p->cap ? 2 * p->cap : 4, *no = (int32_t *)PT_REALLOC(p->occ, sizeof(int32_t) * (size_t)nc);
        if (!no) {
            E->oom = 1;
            return;
        }
        p->occ = no, p->cap = nc;
    }
    p->occ[p->nocc++] = pos, p->count++;
    if (E->train && p->touched != step) {
        if (E->ntouched == E->cap_touched) {
            int64_t nc = E->cap_touched ? 2 * E->cap_touched : 256;
            uint64_t *nt = (uint64_t *)PT_REALLOC(E->touched, sizeof(uint64_t) * (size_t)nc);
            if (!nt) {
                E->oom = 1;
                return;
            }
            E->touched = nt, E->cap_touched = nc;
        }
        p->touched = step, E->touched[E->ntouched++] = key;
    }
}

static void pt__bpe_dec(pt__bpe *E, int32_t a, int32_t b) {
    pt__bpe_pair *p = pt__bpe_find(E, (uint64_t)(uint32_t)a << 32 | (uint32_t)b, 0);
    if (p) p->count--;
}

static int pt__bpe_cmp32(const void *x, const void *y) {
    int32_t a = *(const int32_t *)x, b = *(const int32_t *)y;
    return (a > b) - (a < b);
}

/* replaces every occurrence of the pair key by id c, left to right */
static void pt__bpe_merge(pt__bpe *E, uint64_t key, int32_t c, int32_t step) {
    pt__bpe_pair *p = pt__bpe_find(E, key, 0);
    int32_t a = (int32_t)(key >> 32), b = (int32_t)(key & 0xFFFFFFFFu), *occ, n, k;
    if (!p) return;
    occ = p->occ, n = p->nocc;
    p->occ = NULL, p->nocc = p->cap = 0, p->count = 0; /* no new occurrence of (a, b) can appear: new pairs hold c */
    qsort(occ, (size_t)n, sizeof(int32_t), pt__bpe_cmp32);
    for (k = 0; k < n; k++) {
        int32_t i = occ[k], j = E->nxt[i], q, pv;
        if (E->tok[i] != a || j < 0 || E->tok[j] != b) continue; /* stale */
        q = E->nxt[j], pv = E->prv[i];
        if (pv >= 0) pt__bpe_dec(E, E->tok[pv], a);
        if (q >= 0) pt__bpe_dec(E, b, E->tok[q]);
        E->tok[i] = c, E->tok[j] = -1, E->nxt[i] = q;
        if (q >= 0) E->prv[q] = i;
        if (pv >= 0) pt__bpe_add(E, E->tok[pv], c, pv, step);
        if (q >= 0) pt__bpe_add(E, c, E->tok[q], i, step);
    }
    PT_FREE(occ);
    if ((p = pt__bpe_find(E, key, 0)) != NULL) p->count = 0; /* overlapping runs (a == b) decremented it */
}

static void pt__bpe_free(pt__bpe *E) {
    int64_t i;
    for (i = 0; i < E->tcap; i++)
        if (E->tab[i].used) PT_FREE(E->tab[i].occ);
    PT_FREE(E->tab);
    PT_FREE(E->tok);
    PT_FREE(E->nxt);
    PT_FREE(E->prv);
    PT_FREE(E->heap);
    PT_FREE(E->touched);
}

/* the engine over n bytes: train (tk->pair filled, up to want merges, tk->merges set) or encode with
   tk's merges (ids receives the tokens, *nout their count); PT_OK or PT_ERR_OOM */
static pt_status pt__bpe_run(pt_tokenizer *tk, const unsigned char *text, int64_t n, int32_t want, int32_t *ids, int64_t *nout) {
    pt__bpe E;
    int64_t i;
    int32_t m;
    memset(&E, 0, sizeof E);
    E.train = ids == NULL;
    E.tok = (int32_t *)PT_MALLOC(sizeof(int32_t) * (size_t)(n > 0 ? n : 1));
    E.nxt = (int32_t *)PT_MALLOC(sizeof(int32_t) * (size_t)(n > 0 ? n : 1));
    E.prv = (int32_t *)PT_MALLOC(sizeof(int32_t) * (size_t)(n > 0 ? n : 1));
    E.oom = !E.tok || !E.nxt || !E.prv;
    for (i = 0; i < n && !E.oom; i++) {
        E.tok[i] = text[i], E.nxt[i] = i + 1 < n ? (int32_t)(i + 1) : -1, E.prv[i] = (int32_t)(i - 1);
        if (i > 0) pt__bpe_add(&E, text[i - 1], text[i], (int32_t)(i - 1), -1);
    }
    if (E.train) {
        for (i = 0; i < E.ntouched; i++) pt__bpe_push(&E, pt__bpe_find(&E, E.touched[i], 0)->count, E.touched[i]);
        E.ntouched = 0;
        for (m = 0; m < want && !E.oom; m++) {
            pt__bpe_heap best;
            int found = 0;
            while (E.hn > 0 && !E.oom) {
                pt__bpe_pair *p;
                best = pt__bpe_pop(&E);
                p = pt__bpe_find(&E, best.key, 0);
                if (p->count == best.count) {
                    found = 1;
                    break;
                }
                if (p->count < best.count && p->count > 0) pt__bpe_push(&E, p->count, best.key); /* decreased: its true count */
            }
            if (!found || best.count < 2) break;
            tk->pair[2 * m] = (int32_t)(best.key >> 32), tk->pair[2 * m + 1] = (int32_t)(best.key & 0xFFFFFFFFu);
            pt__bpe_merge(&E, best.key, 256 + m, m);
            for (i = 0; i < E.ntouched; i++) {
                pt__bpe_pair *p = pt__bpe_find(&E, E.touched[i], 0);
                if (p->count > 0) pt__bpe_push(&E, p->count, E.touched[i]);
            }
            E.ntouched = 0;
        }
        tk->merges = m;
    } else {
        for (m = 0; m < tk->merges && !E.oom; m++) {
            uint64_t key = (uint64_t)(uint32_t)tk->pair[2 * m] << 32 | (uint32_t)tk->pair[2 * m + 1];
            pt__bpe_pair *p = pt__bpe_find(&E, key, 0);
            if (p && p->count > 0) pt__bpe_merge(&E, key, 256 + m, m);
        }
        *nout = 0;
        for (i = n > 0 ? 0 : -1; i >= 0 && !E.oom; i = E.nxt[i]) ids[(*nout)++] = E.tok[i];
    }
    pt__bpe_free(&E);
    return E.oom ? PT_ERR_OOM : PT_OK;
}

/* a tokenizer with room for merges pairs; lengths filled by pt__tok_lengths */
static pt_tokenizer *pt__tok_new(pt_ctx *ctx, int32_t merges) {
    pt_tokenizer *tk = (pt_tokenizer *)PT_MALLOC(sizeof *tk);
    if (!tk) return NULL;
    tk->ctx = ctx, tk->merges = merges;
    tk->pair = (int32_t *)PT_MALLOC(sizeof(int32_t) * (size_t)(2 * merges + 2));
    tk->len = (int64_t *)PT_MALLOC(sizeof(int64_t) * (size_t)(256 + merges));
    if (!tk->pair || !tk->len) {
        pt_tokenizer_free(tk);
        return NULL;
    }
    return tk;
}
static void pt__tok_lengths(pt_tokenizer *tk) {
    int32_t i;
    for (i = 0; i < 256; i++) tk->len[i] = 1;
    for (i = 0; i < tk->merges; i++) {
        int64_t l = tk->len[tk->pair[2 * i]] + tk->len[tk->pair[2 * i + 1]];
        tk->len[256 + i] = l > ((int64_t)1 << 62) ? (int64_t)1 << 62 : l;
    }
}

PTDEF void pt_tokenizer_free(pt_tokenizer *tk) {
    if (!tk) return;
    PT_FREE(tk->pair);
    PT_FREE(tk->len);
    PT_FREE(tk);
}

PTDEF int32_t pt_tokenizer_vocab(const pt_tokenizer *tk) { return tk ? 256 + tk->merges : 0; }

PTDEF pt_tokenizer *pt_tokenizer_train(pt_ctx *ctx, const void *text, int64_t n, int32_t merges) {
    pt_tokenizer *tk;
    if ((!text && n > 0) || n < 0 || n > 2147483647 || merges < 0 || merges > (1 << 24))
        return (pt_tokenizer *)pt__fail(ctx, PT_ERR_ARG, "pt_tokenizer_train: expected 0 <= n < 2^31 bytes and 0..2^24 merges, found n %lld, merges %d", (long long)n, (int)merges);
    if (!(tk = pt__tok_new(ctx, merges)) || pt__bpe_run(tk, (const unsigned char *)text, n, merges, NULL, NULL) != PT_OK) {
        pt_tokenizer_free(tk);
        return (pt_tokenizer *)pt__fail(ctx, PT_ERR_OOM, "pt_tokenizer_train: out of memory (%lld bytes, %d merges)", (long long)n, (int)merges);
    }
    pt__tok_lengths(tk);
    return tk;
}

PTDEF int64_t pt_tokenizer_encode(const pt_tokenizer *tk, const void *text, int64_t n, int32_t *ids) {
    int64_t got = 0;
    if (!tk) return -1;
    if ((!text || !ids) && n > 0) {
        pt__fail(tk->ctx, PT_ERR_ARG, "pt_tokenizer_encode: NULL text or ids for %lld bytes", (long long)n);
        return -1;
    }
    if (n < 0 || n > 2147483647) {
        pt__fail(tk->ctx, PT_ERR_ARG, "pt_tokenizer_encode: expected 0 <= n < 2^31 bytes, found %lld", (long long)n);
        return -1;
    }
    if (pt__bpe_run((pt_tokenizer *)tk, (const unsigned char *)text, n, 0, ids, &got) != PT_OK) {
        pt__fail(tk->ctx, PT_ERR_OOM, "pt_tokenizer_encode: out of memory (%lld bytes)", (long long)n);
        return -1;
    }
    return got;
}

PTDEF int64_t pt_tokenizer_decode(const pt_tokenizer *tk, const int32_t *ids, int64_t n, void *out, int64_t cap) {
    int64_t i, total = 0, at = 0;
    int32_t *stack;
    unsigned char *o = (unsigned char *)out;
    if (!tk || (!ids && n > 0)) return -1;
    for (i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= 256 + tk->merges) {
            pt__fail(tk->ctx, PT_ERR_ARG, "pt_tokenizer_decode: id %lld is %d, expected 0..%d", (long long)i, (int)ids[i], 255 + (int)tk->merges);
            return -1;
        }
        total += tk->len[ids[i]];
        if (total > ((int64_t)1 << 62)) total = (int64_t)1 << 62;
    }
    if (total > cap || !o) return total;
    stack = (int32_t *)PT_MALLOC(sizeof(int32_t) * (size_t)(tk->merges + 2));
    if (!stack) {
        pt__fail(tk->ctx, PT_ERR_OOM, "pt_tokenizer_decode: out of memory");
        return -1;
    }
    for (i = 0; i < n; i++) { /* expand each id depth first, left part first; the depth is at most merges + 1 */
        int32_t sp = 0;
        stack[sp++] = ids[i];
        while (sp > 0) {
            int32_t t = stack[--sp];
            if (t < 256) o[at++] = (unsigned char)t;
            else stack[sp++] = tk->pair[2 * (t - 256) + 1], stack[sp++] = tk->pair[2 * (t - 256)];
        }
    }
    PT_FREE(stack);
    return total;
}

#define PT__TOK_HDR 32
PTDEF pt_status pt_tokenizer_save(const pt_tokenizer *tk, const char *path) {
    unsigned char h[PT__TOK_HDR], *body;
    char tmp[4096];
    int32_t i;
    int ok;
    FILE *f;
    if (!tk || !path) return PT_ERR_ARG;
    body = (unsigned char *)PT_MALLOC((size_t)(8 * tk->merges + 8));
    if (!body) {
        pt__fail(tk->ctx, PT_ERR_OOM, "pt_tokenizer_save: out of memory");
        return PT_ERR_OOM;
    }
    for (i = 0; i < 2 * tk->merges; i++) pt__put32(body + 4 * i, (uint32_t)tk->pair[i]);
    memset(h, 0, sizeof h);
    pt__put32(h, PT_TOKENIZER_MAGIC), pt__put32(h + 4, 1), pt__put32(h + 8, (uint32_t)tk->merges), pt__put32(h + 12, (uint32_t)(256 + tk->merges));
    pt__put32(h + 16, pt_crc32c(0, body, (size_t)(8 * tk->merges)));
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    f = strlen(path) + 5 <= sizeof tmp ? fopen(tmp, "wb") : NULL;
    ok = f && fwrite(h, 1, sizeof h, f) == sizeof h && fwrite(body, 1, (size_t)(8 * tk->merges), f) == (size_t)(8 * tk->merges);
    ok = (f && fclose(f) == 0) && ok;
    PT_FREE(body);
    if (!ok || rename(tmp, path) != 0) {
        if (f) remove(tmp);
        pt__fail(tk->ctx, PT_ERR_IO, "pt_tokenizer_save: writing %s failed", path);
        return PT_ERR_IO;
    }
    return PT_OK;
}

PTDEF pt_tokenizer *pt_tokenizer_load(pt_ctx *ctx, const char *path) {
    unsigned char h[PT__TOK_HDR], *body = NULL;
    int64_t size = path ? pt__file_size(path) : -1;
    FILE *f = size >= 0 ? fopen(path, "rb") : NULL;
    pt_tokenizer *tk = NULL;
    uint32_t merges, crc;
    char err[PT__ERRLEN];
    int i;
    err[0] = 0;
    if (!f) return (pt_tokenizer *)pt__fail(ctx, PT_ERR_IO, "pt_tokenizer_load: cannot open %s", path ? path : "(NULL)");
    if (fread(h, 1, sizeof h, f) != sizeof h) pt__msg(err, sizeof err, "truncated header, expected %d bytes, found a %lld-byte file", PT__TOK_HDR, (long long)size);
    else if (pt__le32(h) != PT_TOKENIZER_MAGIC) pt__msg(err, sizeof err, "bad magic: expected 0x%08X (\"PBPE\"), found 0x%08X", PT_TOKENIZER_MAGIC, (unsigned)pt__le32(h));
    else if (pt__le32(h + 4) != 1) pt__msg(err, sizeof err, "version: expected 1, found %u", (unsigned)pt__le32(h + 4));
    else if ((merges = pt__le32(h + 8)) > (1u << 24)) pt__msg(err, sizeof err, "merges: expected 0..%d, found %u", 1 << 24, (unsigned)merges);
    else if (pt__le32(h + 12) != 256 + merges) pt__msg(err, sizeof err, "vocabulary: expected 256 + %u merges = %u, found %u", (unsigned)merges, (unsigned)(256 + merges), (unsigned)pt__le32(h + 12));
    else if (size != PT__TOK_HDR + 8 * (int64_t)merges)
        pt__msg(err, sizeof err, "size: expected %lld bytes (%d-byte header + %u merges x 8 bytes), found %lld bytes", (long long)(PT__TOK_HDR + 8 * (int64_t)merges), PT__TOK_HDR,
                (unsigned)merges, (long long)size);
    else {
        for (i = 20; i < PT__TOK_HDR; i++)
            if (h[i]) {
                pt__msg(err, sizeof err, "reserved header byte %d: expected 0, found %u", i, (unsigned)h[i]);
                break;
            }
        body = err[0] ? NULL : (unsigned char *)PT_MALLOC((size_t)(8 * merges + 8));
        tk = body ? pt__tok_new(ctx, (int32_t)merges) : NULL;
        if (!err[0] && !tk) pt__msg(err, sizeof err, "out of memory for %u merges", (unsigned)merges);
        else if (!err[0] && fread(body, 1, (size_t)(8 * merges), f) != (size_t)(8 * merges)) pt__msg(err, sizeof err, "reading the %u merges failed", (unsigned)merges);
        else if (!err[0] && (crc = pt_crc32c(0, body, (size_t)(8 * merges))) != pt__le32(h + 16))
            pt__msg(err, sizeof err, "checksum of the merges: expected CRC32C %08X (header), found %08X", (unsigned)pt__le32(h + 16), (unsigned)crc);
        for (i = 0; !err[0] && i < (int)(2 * merges); i++) {
            uint32_t v = pt__le32(body + 4 * i);
            if (v >= 256u + (uint32_t)(i / 2)) pt__msg(err, sizeof err, "merge %d: expected ids < %d, found %u", i / 2, 256 + i / 2, (unsigned)v);
            else tk->pair[i] = (int32_t)v;
        }
    }
    fclose(f);
    PT_FREE(body);
    if (err[0]) {
        pt_tokenizer_free(tk);
        return (pt_tokenizer *)pt__fail(ctx, PT_ERR_FORMAT, "pt_tokenizer_load: %s: %s", path, err);
    }
    pt__tok_lengths(tk);
    return tk;
}

PTDEF pt_tokenizer *pt_tokenizer_load_dir(pt_ctx *ctx, const char *dir) {
    char path[4096];
    if (!dir || strlen(dir) + sizeof PT_TOKENIZER_FILE + 1 > sizeof path)
        return (pt_tokenizer *)pt__fail(ctx, PT_ERR_ARG, "pt_tokenizer_load_dir: bad directory %s", dir ? dir : "(NULL)");
    snprintf(path, sizeof path, "%s/%s", dir, PT_TOKENIZER_FILE);
    if (pt__file_size(path) < 0) return NULL;
    return pt_tokenizer_load(ctx, path);
}

// >>ckpt  checkpoints
/* Owns: checkpoint directories (manifest + one data file per rank), the background writer, export
   and import
   Invariants: written to a temporary name, fsynced, renamed, then latest; nothing committed is lost
   by a failed save
   Entry points: pt_ckpt_save pt_ckpt_poll pt_ckpt_load pt_ckpt_verify pt_ckpt_export
   pt_safetensors_load */
/* =================================================================================================
   checkpoints: CRC32C, the manifest, save (synchronous or asynchronous), load with fallback to the previous one
   Layout and protocol: see the declarations (see api). The manifest is text, one record a line, the
   first word its kind, then key=value fields:
       ptrain-checkpoint version=1
       step value=K
       layout dp= tp= pp= world=
       model vocab= vocab_padded= max_seq= layers= width= heads= dropout= untied=      (if given)
       optim kind=adamw|sgd steps= lr= momentum= beta1= beta2= eps= weight_decay= clip_norm=
       rank rank= tp= pp= dp= zlo= zhi=                                   (one per rank)
       file rank= name=rank_00000.bin bytes= crc32c=                      (one per rank)
       tensor name= kind=param|m|v rank= dtype=f32 shape=a,b split_dim= split_parts= split_index=
              split_groups= stage= lo= hi= offset= bytes= crc32c=
       state name= rank= offset= bytes= crc32c=
       end crc32c=XXXXXXXX                                                (of all bytes before it)
   A tensor record holds elements [lo, hi) of the flat local shard its split describes; element i of
   it is global element pt_spec_global_index(split, i). Resharding (load): a reader fills each of its
   parameters (and its ZeRO range of the moments) from the pieces of that name and kind: a piece of
   its own TP cut by range overlap; a piece of another cut is walked in runs contiguous on both sides
   (at most a row of the last dim), each mapped writer local -> global -> reader local (the inverse:
   block = g / (size/G), part = offset / P) and copied where the reader holds it: index arithmetic
   per run, not per element, and no search; a piece is read only if it holds something the reader
   still needs. PP needs nothing (names are global), DP/ZeRO only re-cut the ranges. Floats are
   printed with 9 significant digits (exact for f32). Registered state is matched by name (and by
   rank on the same layout; see pt_state_register / PT_STATE_PER_RANK).
   ================================================================================================= */
#if defined(__unix__) || defined(__APPLE__)
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#define PT__CKPT_POSIX 1
#endif

#ifdef PT__CKPT_POSIX
enum { PT__CK_PARAM = 0, PT__CK_M, PT__CK_V };
static const char *const pt__ck_kind_names[3] = {"param", "m", "v"};
#define PT__CK_NAME 96

/* ---- the manifest in memory ---- */
typedef struct pt__ck_tensor {
    char name[PT__CK_NAME];
    int kind, rank, ndim;
    int64_t shape[PT_MAX_DIMS];
    int32_t split_dim, split_parts, split_index, split_groups, stage;
    int64_t lo, hi, off, bytes;
    uint32_t crc;
} pt__ck_tensor;
typedef struct pt__ck_state {
    char name[64];
    int rank;
    int64_t off, bytes;
    uint32_t crc;
} pt__ck_state;
typedef struct pt__ck_file {
    char name[64];
    int64_t bytes;
    uint32_t crc;
    int seen;
} pt__ck_file;
typedef struct pt__ck_man {
    int64_t step, optim_steps;
    int version, world, dp, tp, pp, has_optim, optim_kind, vocab_padded; /* vocab_padded: of the model record, 0 = none */
    pt__ck_file *files;   /* [world] */
    pt__ck_tensor *t;
    int nt, capt;
    pt__ck_state *s;
    int ns, caps;
} pt__ck_man;
static void pt__ck_man_free(pt__ck_man *m) {
    PT_FREE(m->files);
    PT_FREE(m->t);
    PT_FREE(m->s);
    memset(m, 0, sizeof *m);
}

/* the value of " key=" in a record line (up to the next space or end of line) into out; 0 if absent */
static int pt__ck_field(const char *line, const char *key, char *out, size_t n) {
    size_t kl = strlen(key), i = 0;
    const char *p = line;
    while ((p = strstr(p, key)) != NULL) {
        if (p > line && p[-1] == ' ' && p[kl] == '=') break;
        p += kl;
    }
    if (!p) return 0;
    p += kl + 1;
    while (*p && *p != ' ' && *p != '\n' && i + 1 < n) out[i++] = *p++;
    out[i] = 0;
    return *p == 0 || *p == ' ' || *p == '\n';
}
static int pt__ck_i64(const char *line, const char *key, int64_t *v) {
    char b[64], *e;
    if (!pt__ck_field(line, key, b, sizeof b) || !b[0]) return 0;
    *v = (int64_t)strtoll(b, &e, 0);
    return *e == 0;
}
static int pt__ck_int(const char *line, const char *key, int *v) {
    int64_t x;
    if (!pt__ck_i64(line, key, &x) || x < -2147483647 || x > 2147483647) return 0;
    *v = (int)x;
    return 1;
}
static int pt__ck_crc(const char *line, uint32_t *v) {
    int64_t x;
    if (!pt__ck_i64(line, "crc32c", &x) || x < 0 || x > 0xffffffffll) return 0;
    *v = (uint32_t)x;
    return 1;
}

/* reads a whole (small) file; NULL if it cannot */
static char *pt__ck_slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    char *s = NULL;
    long n;
    if (!f) return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 && (s = (char *)PT_MALLOC((size_t)n + 1)) != NULL) {
        if (fread(s, 1, (size_t)n, f) != (size_t)n) {
            PT_FREE(s);
            s = NULL;
        } else {
            s[n] = 0;
            *len = (size_t)n;
        }
    }
    fclose(f);
    return s;
}

/* parses dir/manifest into m; 0 and a message naming the file and the problem on failure */
static int pt__ck_man_read(const char *dir, pt__ck_man *m, char *err, size_t errlen) {
    char path[1024], *txt, *line, *next, b[128];
    size_t len = 0, endpos;
    const char *endl;
    uint32_t want;
    int r, ok = 0;
    memset(m, 0, sizeof *m);
    snprintf(path, sizeof path, "%s/manifest", dir);
    if (!(txt = pt__ck_slurp(path, &len))) {
        pt__msg(err, errlen, "%s: missing or unreadable", path);
        return 0;
    }
    endl = strstr(txt, "end crc32c=");
    while (endl && endl != txt && endl[-1] != '\n') endl = strstr(endl + 1, "end crc32c=");
    if (!endl || strlen(txt) != len) {
        pt__msg(err, errlen, "%s: no 'end crc32c=' line (a truncated manifest?)", path);
        goto out;
    }
    endpos = (size_t)(endl - txt);
    if (!strchr(endl, '\n') || strchr(endl, '\n')[1]) {
        pt__msg(err, errlen, "%s: bytes after the 'end' line", path);
        goto out;
    }
    if (!pt__ck_crc(endl, &want) || pt_crc32c(0, txt, endpos) != want) {
        pt__msg(err, errlen, "%s: checksum mismatch (manifest says %s, the bytes before it give %08x)", path,
                pt__ck_field(endl, "crc32c", b, sizeof b) ? b : "?", pt_crc32c(0, txt, endpos));
        goto out;
    }
    txt[endpos] = 0;
    if (strncmp(txt, "ptrain-checkpoint version=", 26) || (m->version = atoi(txt + 26)) != 1) {
        pt__msg(err, errlen, "%s: not a ptrain checkpoint manifest of version 1", path);
        goto out;
    }
    m->step = -1;
    for (line = txt; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = 0;
        if (!strncmp(line, "step ", 5)) {
            if (!pt__ck_i64(line, "value", &m->step)) break;
        } else if (!strncmp(line, "layout ", 7)) {
            if (!pt__ck_int(line, "dp", &m->dp) || !pt__ck_int(line, "tp", &m->tp) || !pt__ck_int(line, "pp", &m->pp) ||
                !pt__ck_int(line, "world", &m->world) || m->world < 1 || m->world > (1 << 20) || m->files)
                break;
            if (!(m->files = (pt__ck_file *)PT_MALLOC((size_t)m->world * sizeof *m->files))) break;
            memset(m->files, 0, (size_t)m->world * sizeof *m->files);
        } else if (!strncmp(line, "model ", 6)) {
            int v = 0; /* a recorded vocab_padded of 0 is the default: vocab rounded up to 64 (pt_gpt_new) */
            if (!pt__ck_int(line, "vocab_padded", &m->vocab_padded) || m->vocab_padded < 0) m->vocab_padded = 0;
            if (!m->vocab_padded && pt__ck_int(line, "vocab", &v) && v > 0) m->vocab_padded = (v + 63) / 64 * 64;
        } else if (!strncmp(line, "optim ", 6)) {
            m->has_optim = 1;
            if (!pt__ck_field(line, "kind", b, sizeof b) || !pt__ck_i64(line, "steps", &m->optim_steps)) break;
            m->optim_kind = !strcmp(b, "adamw") ? PT_OPTIM_ADAMW : PT_OPTIM_SGD;
        } else if (!strncmp(line, "file ", 5)) {
            pt__ck_file f;
            memset(&f, 0, sizeof f);
            if (!m->files || !pt__ck_int(line, "rank", &r) || r < 0 || r >= m->world || !pt__ck_field(line, "name", f.name, sizeof f.name) ||
                strchr(f.name, '/') || !f.name[0] || !pt__ck_i64(line, "bytes", &f.bytes) || !pt__ck_crc(line, &f.crc))
                break;
            f.seen = 1;
            m->files[r] = f;
        } else if (!strncmp(line, "tensor ", 7)) {
            pt__ck_tensor t;
            char sh[128], *p;
            int d;
            memset(&t, 0, sizeof t);
            if (!pt__ck_field(line, "name", t.name, sizeof t.name) || !pt__ck_field(line, "kind", b, sizeof b) ||
                !pt__ck_int(line, "rank", &t.rank) || !pt__ck_field(line, "shape", sh, sizeof sh) ||
                !pt__ck_int(line, "split_dim", &t.split_dim) || !pt__ck_int(line, "split_parts", &t.split_parts) ||
                !pt__ck_int(line, "split_index", &t.split_index) || !pt__ck_int(line, "split_groups", &t.split_groups) ||
                !pt__ck_int(line, "stage", &t.stage) || !pt__ck_i64(line, "lo", &t.lo) || !pt__ck_i64(line, "hi", &t.hi) ||
                !pt__ck_i64(line, "offset", &t.off) || !pt__ck_i64(line, "bytes", &t.bytes) || !pt__ck_crc(line, &t.crc) ||
                t.rank < 0 || t.rank >= m->world || t.lo < 0 || t.hi < t.lo || t.bytes != (t.hi - t.lo) * 4 || t.off < 0)
                break;
            for (t.kind = 0; t.kind < 3 && strcmp(b, pt__ck_kind_names[t.kind]); t.kind++) {}
            if (t.kind == 3) break;
            for (d = 0, p = sh; d < PT_MAX_DIMS && *p; d++) {
                t.shape[d] = strtoll(p, &p, 10);
                if (*p == ',') p++;
            }
            t.ndim = d;
            for (; d < PT_MAX_DIMS; d++) t.shape[d] = 1;
            if (m->nt == m->capt) {
                int c = m->capt ? 2 * m->capt : 64;
                pt__ck_tensor *nt = (pt__ck_tensor *)PT_REALLOC(m->t, (size_t)c * sizeof *nt);
                if (!nt) break;
                m->t = nt, m->capt = c;
            }
            m->t[m->nt++] = t;
        } else if (!strncmp(line, "state ", 6)) {
            pt__ck_state s;
            memset(&s, 0, sizeof s);
            if (!pt__ck_field(line, "name", s.name, sizeof s.name) || !pt__ck_int(line, "rank", &s.rank) || s.rank < 0 ||
                s.rank >= m->world || !pt__ck_i64(line, "offset", &s.off) || !pt__ck_i64(line, "bytes", &s.bytes) ||
                !pt__ck_crc(line, &s.crc) || s.bytes < 0 || s.off < 0)
                break;
            if (m->ns == m->caps) {
                int c = m->caps ? 2 * m->caps : 16;
                pt__ck_state *ns = (pt__ck_state *)PT_REALLOC(m->s, (size_t)c * sizeof *ns);
                if (!ns) break;
                m->s = ns, m->caps = c;
            }
            m->s[m->ns++] = s;
        }
    }
    if (line && *line) {
        pt__msg(err, errlen, "%s: malformed record '%.120s'", path, line);
        goto out;
    }
    if (m->step < 0 || !m->files) {
        pt__msg(err, errlen, "%s: no step or layout record", path);
        goto out;
    }
    for (r = 0; r < m->world; r++)
        if (!m->files[r].seen) {
            pt__msg(err, errlen, "%s: no file record for rank %d of %d", path, r, m->world);
            goto out;
        }
    ok = 1;
out:
    PT_FREE(txt);
    if (!ok) pt__ck_man_free(m);
    return ok;
}

/* checks the size and CRC32C of data file r of the checkpoint in dir */
static int pt__ck_file_check(const char *dir, const pt__ck_man *m, int r, char *err, size_t errlen) {
    char path[1024];
    FILE *f;
    unsigned char *buf;
    uint32_t crc = 0;
    int64_t total = 0;
    size_t k;
    snprintf(path, sizeof path, "%s/%s", dir, m->files[r].name);
    if (!(f = fopen(path, "rb"))) {
        pt__msg(err, errlen, "%s: missing (the manifest lists %lld bytes)", path, (long long)m->files[r].bytes);
        return 0;
    }
    if (!(buf = (unsigned char *)PT_MALLOC(1 << 20))) {
        fclose(f);
        pt__msg(err, errlen, "%s: out of memory", path);
        return 0;
    }
    while ((k = fread(buf, 1, 1 << 20, f)) > 0) crc = pt_crc32c(crc, buf, k), total += (int64_t)k;
    fclose(f);
    PT_FREE(buf);
    if (total != m->files[r].bytes) {
        pt__msg(err, errlen, "%s: %lld bytes, the manifest lists %lld (truncated or extended)", path, (long long)total,
                (long long)m->files[r].bytes);
        return 0;
    }
    if (crc != m->files[r].crc) {
        pt__msg(err, errlen, "%s: CRC32C mismatch (file %08x, manifest %08x)", path, crc, m->files[r].crc);
        return 0;
    }
    return 1;
}

PTDEF pt_status pt_ckpt_verify(const char *step_dir, char *err, size_t errlen) {
    pt__ck_man m;
    int r;
    if (!step_dir) {
        pt__msg(err, errlen, "pt_ckpt_verify: no directory given");
        return PT_ERR_ARG;
    }
    if (!pt__ck_man_read(step_dir, &m, err, errlen)) return PT_ERR_FORMAT;
    for (r = 0; r < m.world; r++)
        if (!pt__ck_file_check(step_dir, &m, r, err, errlen)) {
            pt__ck_man_free(&m);
            return PT_ERR_FORMAT;
        }
    pt__ck_man_free(&m);
    return PT_OK;
}

/* ---- file system helpers ---- */
static int pt__ck_fsync_path(const char *path) {
    int fd = open(path, O_RDONLY), rc;
    if (fd < 0) return 0;
    rc = fsync(fd);
    close(fd);
    return rc == 0;
}
/* removes a flat directory (its files, then itself) */
static void pt__ck_rmdir(const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *e;
    char p[1024];
    if (d) {
        while ((e = readdir(d)) != NULL) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            unlink(p);
        }
        closedir(d);
    }
    rmdir(dir);
}
/* steps of the step_<digits> directories of dir, newest first; count in *n (NULL when none) */
static int pt__ck_cmp_desc(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}
static int64_t *pt__ck_list(const char *dir, int *n) {
    DIR *d = opendir(dir);
    struct dirent *e;
    int64_t *v = NULL;
    int cap = 0;
    *n = 0;
    if (!d) return NULL;
    while ((e = readdir(d)) != NULL) {
        const char *s = e->d_name;
        char *end;
        long long k;
        if (strncmp(s, "step_", 5) || !s[5] || s[5] < '0' || s[5] > '9') continue;
        k = strtoll(s + 5, &end, 10);
        if (*end) continue;
        if (*n == cap) {
            int64_t *nv = (int64_t *)PT_REALLOC(v, (size_t)(cap = cap ? 2 * cap : 16) * sizeof *nv);
            if (!nv) break;
            v = nv;
        }
        v[(*n)++] = k;
    }
    closedir(d);
    if (v) qsort(v, (size_t)*n, sizeof *v, pt__ck_cmp_desc);
    return v;
}

/* ---- save ----
   A save has three parts. The snapshot (pt__ck_plan, at the call): every piece of this rank's file
   -- parameter shards, optimizer moments, registered state -- gets its file offset and its manifest
   record; an asynchronous save (and any device storage) copies the pieces into the context's host
   buffer, in file order, hashing each piece while it is in cache, so training may change everything
   right after the call. The write (pt__ck_write_file; on a background thread when asynchronous): the
   one file, written in runs of memory-contiguous pieces (a snapshot is one run), then fsynced. The
   commit (pt__ck_finish, on the calling thread: it runs MPI collectives, and MPI is not initialized
   for threads): agreement, the records gathered by rank 0, manifest, renames, latest, retention.
   Checkpoints that retention drops are renamed to .del.<name> (load never looks at them) and removed
   by a thread joined at the next commit or by pt_shutdown, so deleting them costs the save nothing. */
#if !defined(PTRAIN_NO_THREADS)
#define PT__CK_THREADS 1
#include <pthread.h>
#endif
/* writes all n bytes to fd; 0 on failure */
static int pt__ck_write_fd(int fd, const void *p, size_t n) {
    const char *c = (const char *)p;
    while (n > 0) {
        ssize_t k = write(fd, c, n);
        if (k <= 0) return 0;
        c += k, n -= (size_t)k;
    }
    return 1;
}
typedef struct pt__ck_piece {
    pt_storage *st;            /* a tensor piece: n floats at element el of st */
    int64_t el;                /* (a state entry: st NULL, src set) */
    const unsigned char *src;  /* what is written: live host memory (synchronous) or the snapshot */
    int64_t bytes;
    size_t crc_at;             /* where the 8 hex digits of its CRC32C go in the records */
    uint32_t crc;
    int hashed;
} pt__ck_piece;
/* the save of this rank that is being written or was written last (ctx->ckpt) */
#define PT__CK_TRACE_TID 16 /* the trace track of the asynchronous writer (after the non-blocking lanes of trace) */
typedef struct pt__ck_job {
    char dir[912], tmp[960], path[1024]; /* dir: at most 900 characters */
    int64_t step, limit, delay_ms; /* limit: PTRAIN_CKPT_FAIL, -1 = none; delay: PTRAIN_CKPT_DELAY_MS */
    int keep_last, async, pending, ok;
    pt__ck_piece *pc;
    int npc, cap_pc;
    unsigned char *snap; /* the snapshot, laid out as the file; grown only */
    int64_t snap_cap;
    pt__sb recs, head; /* this rank's records; the manifest's first lines (rank 0) */
    size_t file_crc_at;
    pt__sb doomed;     /* rank 0: directories (NUL-separated) the remover deletes */
    char err[PT__ERRLEN];
    pt_ckpt_stats st;
    double w0, w1;        /* when this rank's write ran (pt_time; the writer thread's, traced at the commit) */
#ifdef PT__CK_THREADS
    pthread_t writer, remover;
    pthread_mutex_t mu; /* guards written */
    int writer_on, remover_on, written;
#endif
} pt__ck_job;

static const char *pt__ck_optim_kind(const pt_optim *o) { return o->d.kind == PT_OPTIM_ADAMW ? "adamw" : "sgd"; }
/* moment storages of o that hold state: [0] m (AdamW m or SGD momentum), [1] v */
static pt_storage *pt__ck_moment(pt_optim *o, int k) {
    pt_storage *st = k == PT__CK_M ? &o->m : &o->v;
    if (k == PT__CK_M && o->d.kind == PT_OPTIM_SGD && !(o->d.momentum > 0)) return NULL;
    if (k == PT__CK_V && o->d.kind != PT_OPTIM_ADAMW) return NULL;
    return (st->host || st->raw || st->dev) ? st : NULL;
}

static int pt__ck_name_ok(const char *s) { return !strchr(s, ' ') && !strchr(s, '\n') && !strchr(s, '='); }
/* appends a piece whose record was just written up to "crc32c=0x" (the digits follow later) */
static int pt__ck_add_piece(pt__ck_job *j, pt_storage *st, int64_t el, const void *src, int64_t bytes) {
    pt__ck_piece *p;
    if (j->npc == j->cap_pc) {
        int c = j->cap_pc ? 2 * j->cap_pc : 256;
        pt__ck_piece *n = (pt__ck_piece *)PT_REALLOC(j->pc, (size_t)c * sizeof *n);
        if (!n) return 0;
        j->pc = n, j->cap_pc = c;
    }
    p = &j->pc[j->npc++];
    memset(p, 0, sizeof *p);
    p->st = st, p->el = el, p->src = (const unsigned char *)src, p->bytes = bytes, p->crc_at = j->recs.n;
    pt__sb_add(&j->recs, "00000000\n");
    return 1;
}
/* the manifest's first lines: version, step, layout, model, optimizer (taken at the call) */
static void pt__ck_head(pt_ctx *ctx, pt_optim *o, int64_t step, const pt_ckpt_opts *opts, pt__sb *m) {
    pt_layout l = pt_dist_layout(ctx->desc.dist);
    if (!ctx->desc.dist) l.dp = l.tp = l.pp = 1;
    pt__sb_add(m, "ptrain-checkpoint version=1\nstep value=%lld\nlayout dp=%d tp=%d pp=%d world=%d\n", (long long)step, l.dp, l.tp, l.pp,
                  pt_dist_size(ctx->desc.dist));
    if (opts && opts->model) {
        const pt_gpt_config *c = opts->model;
        pt__sb_add(m, "model vocab=%d vocab_padded=%d max_seq=%d layers=%d width=%d heads=%d dropout=%.9g untied=%d\n", c->vocab, c->vocab_padded,
                      c->max_seq, c->layers, c->width, c->heads, (double)c->dropout, c->untied);
    }
    if (o)
        pt__sb_add(m, "optim kind=%s steps=%lld lr=%.9g momentum=%.9g beta1=%.9g beta2=%.9g eps=%.9g weight_decay=%.9g clip_norm=%.9g\n",
                      pt__ck_optim_kind(o), (long long)o->steps, (double)o->d.lr, (double)o->d.momentum, (double)o->d.beta1, (double)o->d.beta2,
                      (double)o->d.eps, (double)o->d.weight_decay, (double)o->d.clip_norm);
}

/* the snapshot: this rank's pieces and records (kind by kind: parameters, m, v, then registered
   state), copied into j->snap when copy is set or the storage is on a device; 0 and j->err on failure */
static int pt__ck_plan(pt_ctx *ctx, pt_optim *o, pt__ck_job *j, int rank, pt_coords c, int dp_sharded, int copy) {
    int i, k, d;
    int64_t off = 0;
    j->npc = 0, j->recs.n = 0, j->recs.oom = 0;
    for (k = 0; k < 3; k++) {
        pt_storage *st = k == PT__CK_PARAM ? ctx->pslab : o ? pt__ck_moment(o, k) : NULL;
        if (!st || (k == PT__CK_PARAM && c.dp != 0)) continue; /* DP replicas hold equal values */
        if (k != PT__CK_PARAM && !dp_sharded && c.dp != 0) continue;
        for (i = 0; i < ctx->nparams; i++) {
            pt_param *p = ctx->params[i];
            const pt_spec *s = &p->spec;
            int64_t n = pt_numel(&p->value), lo = 0, hi = n, soff = p->slab_off;
            if (k != PT__CK_PARAM) {
                lo = PT__MAX(0, o->zlo - p->slab_off), hi = PT__MIN(n, o->zhi - p->slab_off);
                if (hi <= lo) continue;
                soff = p->slab_off - o->zlo;
            }
            if (!pt__ck_name_ok(s->name)) {
                pt__msg(j->err, sizeof j->err, "pt_ckpt_save: parameter name '%s' has a space, newline or '='", s->name);
                return 0;
            }
            pt__sb_add(&j->recs, "tensor name=%s kind=%s rank=%d dtype=f32 shape=", s->name, pt__ck_kind_names[k], rank);
            for (d = 0; d < s->ndim; d++) pt__sb_add(&j->recs, d ? ",%lld" : "%lld", (long long)s->global_shape[d]);
            pt__sb_add(&j->recs, " split_dim=%d split_parts=%d split_index=%d split_groups=%d stage=%d lo=%lld hi=%lld offset=%lld bytes=%lld crc32c=0x",
                          s->split_dim, s->split_dim >= 0 ? s->split_parts : 1, s->split_dim >= 0 ? s->split_index : 0, s->split_groups, s->stage,
                          (long long)lo, (long long)hi, (long long)off, (long long)((hi - lo) * 4));
            if (!pt__ck_add_piece(j, st, soff + lo, st->host ? (const float *)st->host + soff + lo : NULL, (hi - lo) * 4)) goto oom;
            off += (hi - lo) * 4;
        }
    }
    for (i = 0; i < ctx->nstate; i++) {
        const pt__state_entry *e = &ctx->state[i];
        if (!pt__ck_name_ok(e->name)) {
            pt__msg(j->err, sizeof j->err, "pt_ckpt_save: state name '%s' has a space, newline or '='", e->name);
            return 0;
        }
        pt__sb_add(&j->recs, "state name=%s rank=%d offset=%lld bytes=%lld crc32c=0x", e->name, rank, (long long)off, (long long)e->bytes);
        if (!pt__ck_add_piece(j, NULL, 0, e->ptr, e->bytes)) goto oom;
        off += e->bytes;
    }
    pt__sb_add(&j->recs, "rank rank=%d tp=%d pp=%d dp=%d zlo=%lld zhi=%lld\n", rank, c.tp, c.pp, c.dp, (long long)(o ? o->zlo : 0),
                  (long long)(o ? o->zhi : ctx->slab_n));
    pt__sb_add(&j->recs, "file rank=%d name=rank_%05d.bin bytes=%lld crc32c=0x", rank, rank, (long long)off);
    j->file_crc_at = j->recs.n;
    pt__sb_add(&j->recs, "00000000\n");
    if (j->recs.oom) goto oom;
    for (i = 0; i < j->npc && !copy; i++) copy = j->pc[i].bytes > 0 && !j->pc[i].src;
    if (copy && off > j->snap_cap) {
        unsigned char *n = (unsigned char *)PT_REALLOC(j->snap, (size_t)off);
        if (!n) {
            pt__msg(j->err, sizeof j->err, "pt_ckpt_save: out of memory for a %lld-byte snapshot", (long long)off);
            return 0;
        }
        j->snap = n, j->snap_cap = off;
    }
    for (i = 0, off = 0; copy && i < j->npc; off += j->pc[i].bytes, i++) {
        pt__ck_piece *p = &j->pc[i];
        unsigned char *dst = j->snap + off;
        int64_t at;
        if (p->bytes == 0) continue;
        if (!p->src) pt__stage_xfer(ctx, p->st, p->el, (float *)(void *)dst, p->bytes / 4, 1, PT_XFER_CKPT), p->crc = pt_crc32c(0, dst, (size_t)p->bytes);
        else
            for (at = 0; at < p->bytes; at += (int64_t)1 << 16) { /* hashed while the block is in cache */
                size_t b = (size_t)PT__MIN(p->bytes - at, (int64_t)1 << 16);
                memcpy(dst + at, p->src + at, b);
                p->crc = pt_crc32c(p->crc, dst + at, b);
            }
        p->src = dst, p->hashed = 1;
    }
    return 1;
oom:
    pt__msg(j->err, sizeof j->err, "pt_ckpt_save: out of memory for the manifest records");
    return 0;
}

/* the write: this rank's file, in runs of memory-contiguous pieces, fsynced; sets j->ok, j->err */
static void pt__ck_write_file(pt__ck_job *j) {
    double t0 = pt_time();
    int64_t off = 0;
    uint32_t fcrc = 0;
    int fd, i = 0;
    if (j->delay_ms > 0) { /* tests: keep the write in flight a while */
#if defined(CLOCK_MONOTONIC)
        struct timespec ts;
        ts.tv_sec = (time_t)(j->delay_ms / 1000), ts.tv_nsec = (long)(j->delay_ms % 1000) * 1000000L;
        nanosleep(&ts, NULL);
#else
        while (pt_time() - t0 < 1e-3 * (double)j->delay_ms) {}
#endif
    }
    if ((fd = open(j->path, O_WRONLY | O_CREAT | O_TRUNC, 0644)) < 0) {
        pt__msg(j->err, sizeof j->err, "%s: cannot create", j->path);
        j->ok = 0;
        return;
    }
    while (i < j->npc && j->ok) {
        const unsigned char *start = j->pc[i].src, *end = start;
        int64_t run = 0;
        int e;
        for (e = i; e < j->npc; e++) {
            pt__ck_piece *p = &j->pc[e];
            if (j->limit >= 0 && off + run + p->bytes > j->limit) break;
            if (p->bytes > 0) {
                if (run > 0 && p->src != end) break;
                if (run == 0) start = p->src;
                end = p->src + p->bytes;
            }
            if (!p->hashed) p->crc = pt_crc32c(0, p->src, (size_t)p->bytes), p->hashed = 1;
            fcrc = pt__crc32c_combine(fcrc, p->crc, p->bytes);
            run += p->bytes;
        }
        if (run > 0 && !pt__ck_write_fd(fd, start, (size_t)run)) {
            pt__msg(j->err, sizeof j->err, "%s: write of %lld bytes at offset %lld failed (disk full?)", j->path, (long long)run, (long long)off);
            j->ok = 0;
        }
        off += run;
        if (j->ok && e < j->npc && j->limit >= 0 && off + j->pc[e].bytes > j->limit) {
            pt__msg(j->err, sizeof j->err, "%s: write failed after %lld bytes (PTRAIN_CKPT_FAIL=%lld)", j->path, (long long)off, (long long)j->limit);
            j->ok = 0;
        }
        i = e;
    }
    if (j->ok && fsync(fd) != 0) {
        pt__msg(j->err, sizeof j->err, "%s: fsync failed", j->path);
        j->ok = 0;
    }
    if (close(fd) != 0 && j->ok) {
        pt__msg(j->err, sizeof j->err, "%s: close failed", j->path);
        j->ok = 0;
    }
    if (j->ok) { /* the records' CRC digits */
        char h[9];
        for (i = 0; i < j->npc; i++) snprintf(h, sizeof h, "%08x", j->pc[i].crc), memcpy(j->recs.s + j->pc[i].crc_at, h, 8);
        snprintf(h, sizeof h, "%08x", fcrc), memcpy(j->recs.s + j->file_crc_at, h, 8);
    }
    j->w0 = t0, j->w1 = pt_time();
    j->st.write_s = j->w1 - t0;
}
#ifdef PT__CK_THREADS
static void *pt__ck_writer_main(void *arg) {
    pt__ck_job *j = (pt__ck_job *)arg;
    pt__ck_write_file(j);
    pthread_mutex_lock(&j->mu);
    j->written = 1;
    pthread_mutex_unlock(&j->mu);
    return NULL;
}
#endif

/* gathers every rank's records at rank 0 (in rank order) into all; 0 on failure */
static int pt__ck_gather(const pt_dist *d, const pt__sb *mine, pt__sb *all) {
#ifdef PTRAIN_MPI
    int size = pt_dist_size(d), rank = pt_dist_rank(d), r, len = (int)mine->n, *lens = NULL, *displ = NULL, ok = 1;
    uint64_t s;
    if (d && size > 1) {
        MPI_Comm w = d->comm[PT_COMM_WORLD];
        if (rank == 0) {
            lens = (int *)PT_MALLOC((size_t)size * sizeof *lens);
            displ = (int *)PT_MALLOC((size_t)size * sizeof *displ);
            ok = lens && displ;
        }
        ok = pt_dist_agree(d, ok);
        s = ok ? pt__coll_begin(d, PT_COLL_GATHER, PT_COMM_WORLD, 1, PT_COLL_I32, 0) : 0;
        ok = ok && pt__coll_end(d, s, s ? MPI_Gather(&len, 1, MPI_INT, lens, 1, MPI_INT, 0, w) : PT__COLL_REFUSED) == MPI_SUCCESS;
        if (ok && rank == 0) {
            int64_t tot = 0;
            for (r = 0; r < size; r++) displ[r] = (int)tot, tot += lens[r];
            if (tot > 2147483647 || !(all->s = (char *)PT_MALLOC((size_t)tot + 1))) ok = 0;
            else all->n = (size_t)tot, all->cap = (size_t)tot + 1;
        }
        ok = pt_dist_agree(d, ok);
        s = ok ? pt__coll_begin(d, PT_COLL_GATHER, PT_COMM_WORLD, len, PT_COLL_CHAR, 0) : 0;
        ok = ok && pt__coll_end(d, s, s ? MPI_Gatherv(mine->s, len, MPI_CHAR, all->s, lens, displ, MPI_CHAR, 0, w) : PT__COLL_REFUSED) ==
                       MPI_SUCCESS;
        PT_FREE(lens);
        PT_FREE(displ);
        return ok;
    }
#else
    (void)d;
#endif
    pt__sb_add(all, "%.*s", (int)mine->n, mine->s ? mine->s : "");
    return !all->oom;
}

/* deletes the directories of j->doomed; on a thread when there are threads (joined by the next
   commit and by pt_shutdown) */
static void *pt__ck_remove_main(void *arg) {
    pt__ck_job *j = (pt__ck_job *)arg;
    size_t at;
    for (at = 0; at < j->doomed.n; at += strlen(j->doomed.s + at) + 1) pt__ck_rmdir(j->doomed.s + at);
    return NULL;
}
static void pt__ck_remover_join(pt__ck_job *j) {
#ifdef PT__CK_THREADS
    if (j->remover_on) pthread_join(j->remover, NULL);
    j->remover_on = 0;
#endif
    j->doomed.n = 0;
}
/* moves checkpoint directory path out of the way as dir/.del.<name> (the end of the commit queues
   every .del. directory for the remover) */
static void pt__ck_doom(pt__ck_job *j, const char *path, const char *name) {
    char del[1200];
    snprintf(del, sizeof del, "%s/.del.%s", j->dir, name);
    pt__ck_rmdir(del); /* left by a run that stopped before removing it */
    if (rename(path, del) != 0) pt__ck_rmdir(path); /* else removed with the other .del. directories */
}

/* rank 0: manifest (head, records, checksum line), fsync, rename into place, latest, retention */
static int pt__ck_commit(pt__ck_job *j, const pt__sb *recs, char *err, size_t errlen) {
    pt__sb m;
    char path[1200], fin[1024], old[1024], lt[1024], line[64];
    int fd, ok;
    struct stat sb;
    pt__ck_remover_join(j);
    memset(&m, 0, sizeof m);
    pt__sb_add(&m, "%.*s", (int)j->head.n, j->head.s ? j->head.s : "");
    pt__sb_add(&m, "%.*s", (int)recs->n, recs->s ? recs->s : "");
    pt__sb_add(&m, "end crc32c=0x%08x\n", m.s ? pt_crc32c(0, m.s, m.n) : 0);
    if (m.oom || j->head.oom) {
        PT_FREE(m.s);
        pt__msg(err, errlen, "pt_ckpt_save: out of memory for the manifest");
        return 0;
    }
    snprintf(path, sizeof path, "%s/manifest", j->tmp);
    ok = (fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644)) >= 0;
    if (ok) {
        ok = pt__ck_write_fd(fd, m.s, m.n) && fsync(fd) == 0;
        ok = close(fd) == 0 && ok;
    }
    PT_FREE(m.s);
    pt__ck_fsync_path(j->tmp); /* best effort: some file systems cannot fsync a directory */
    if (!ok) {
        pt__msg(err, errlen, "%s: write/fsync failed", path);
        return 0;
    }
    snprintf(fin, sizeof fin, "%s/step_%09lld", j->dir, (long long)j->step);
    snprintf(old, sizeof old, "%s/.old.step_%09lld", j->dir, (long long)j->step);
    if (stat(fin, &sb) == 0) { /* the same step saved again: the old one goes only after the new one is in place */
        pt__ck_rmdir(old);
        if (rename(fin, old) != 0) {
            pt__msg(err, errlen, "%s: cannot move the existing checkpoint aside", fin);
            return 0;
        }
    }
    if (rename(j->tmp, fin) != 0) {
        rename(old, fin);
        pt__msg(err, errlen, "%s: rename to %s failed", j->tmp, fin);
        return 0;
    }
    if (stat(old, &sb) == 0) pt__ck_doom(j, old, old + strlen(j->dir) + 1);
    pt__ck_fsync_path(j->dir);
    snprintf(lt, sizeof lt, "%s/latest.tmp", j->dir);
    snprintf(path, sizeof path, "%s/latest", j->dir);
    snprintf(line, sizeof line, "step_%09lld\n", (long long)j->step);
    ok = (fd = open(lt, O_WRONLY | O_CREAT | O_TRUNC, 0644)) >= 0;
    if (ok) {
        ok = pt__ck_write_fd(fd, line, strlen(line)) && fsync(fd) == 0;
        ok = close(fd) == 0 && ok;
    }
    if (!ok || rename(lt, path) != 0) {
        pt__msg(err, errlen, "%s: cannot update (the checkpoint %s is complete)", path, fin);
        return 0;
    }
    pt__ck_fsync_path(j->dir);
    if (j->keep_last > 0) {
        int n, i, kept = 0;
        int64_t *v = pt__ck_list(j->dir, &n);
        for (i = 0; i < n; i++) { /* steps after this one (an abandoned run's) are neither counted nor deleted */
            if (v[i] > j->step || kept++ < j->keep_last) continue;
            snprintf(line, sizeof line, "step_%09lld", (long long)v[i]);
            snprintf(path, sizeof path, "%s/%s", j->dir, line);
            pt__ck_doom(j, path, line);
        }
        PT_FREE(v);
    }
    { /* leftovers: temporaries of saves never committed (pt_shutdown before pt_ckpt_wait, a crash), .del. of a stopped run */
        DIR *dd = opendir(j->dir);
        struct dirent *e;
        while (dd && (e = readdir(dd)) != NULL)
            if (!strncmp(e->d_name, ".tmp.step_", 10) || !strncmp(e->d_name, ".del.", 5)) {
                pt__sb_add(&j->doomed, "%s/%s", j->dir, e->d_name);
                pt__sb_add(&j->doomed, "%c", 0);
            }
        if (dd) closedir(dd);
        if (j->doomed.oom) j->doomed.n = 0, j->doomed.oom = 0;
    }
#ifdef PT__CK_THREADS
    if (j->doomed.n) j->remover_on = pthread_create(&j->remover, NULL, pt__ck_remove_main, j) == 0;
    if (!j->remover_on)
#endif
    {
        pt__ck_remove_main(j);
        j->doomed.n = 0;
    }
    return 1;
}

/* joins this rank's write, then commits (collective); the save's status */
static pt_status pt__ck_finish(pt_ctx *ctx, pt__ck_job *j) {
    const pt_dist *d = ctx->desc.dist;
    int rank = pt_dist_rank(d), ok;
    char err[PT__ERRLEN];
    pt__sb all;
    double t0 = pt_time(), t1;
    int threaded = 0;
#ifdef PT__CK_THREADS
    if (j->writer_on) pthread_join(j->writer, NULL);
    threaded = j->writer_on;
    j->writer_on = 0;
#endif
    t1 = pt_time();
    j->st.wait_s = t1 - t0;
    j->pending = 0;
    memset(&all, 0, sizeof all);
    snprintf(err, sizeof err, "%s", j->err);
    ok = j->ok;
    if (pt_dist_agree_msg(d, ok, err, sizeof err)) {
        ok = pt__ck_gather(d, &j->recs, &all);
        if (!ok) pt__msg(err, sizeof err, "pt_ckpt_save: gathering the manifest records failed (out of memory?)");
        if (ok && rank == 0) ok = pt__ck_commit(j, &all, err, sizeof err);
        ok = pt_dist_agree_msg(d, ok, err, sizeof err);
    } else ok = 0;
    PT_FREE(all.s);
    j->st.commit_s = pt_time() - t1;
    if (threaded && ctx->trace) { /* trace: the writer's interval on its own track, the commit on the main one */
        pt_trace_rec tr;
        memset(&tr, 0, sizeof tr);
        tr.cat = PT_TRACE_CKPT, tr.tid = PT__CK_TRACE_TID, tr.name = "ckpt_write", tr.t0 = j->w0, tr.t1 = j->w1;
        tr.step = -1, tr.mb = -1, tr.chunk = -1, tr.comm = -1, tr.bytes = j->st.bytes;
        pt_trace_add(ctx, &tr);
        pt_trace_event(ctx, PT_TRACE_CKPT, "ckpt_commit", t0, pt_time(), -1, -1);
    }
    if (!ok) {
        if (rank == 0) pt__ck_rmdir(j->tmp);
        return (pt_status)(pt__fail(ctx, PT_ERR_IO, "pt_ckpt_save: step %lld not saved%s: %s", (long long)j->step,
                                    j->async ? " (asynchronous write)" : "", err),
                           PT_ERR_IO);
    }
    return PT_OK;
}

static void pt__ck_release(pt_ctx *ctx); /* below: joins the writer, frees the snapshot */
PTDEF pt_status pt_ckpt_save(pt_ctx *ctx, pt_optim *o, const char *dir, int64_t step, const pt_ckpt_opts *opts) {
    const pt_dist *d;
    char err[PT__ERRLEN], tmp[960];
    pt__ck_job *j;
    pt_coords c;
    int ok = 1, rank, dp_sharded, i;
    double t0 = pt_time();
    struct stat sb;
    if (!ctx) return PT_ERR_ARG;
    if (ctx->ckpt && ctx->ckpt->pending) { /* the previous save is committed first; its failure is this call's */
        pt_status st = pt__ck_finish(ctx, ctx->ckpt);
        if (st != PT_OK) return st;
    }
    d = ctx->desc.dist;
    rank = pt_dist_rank(d);
    c = pt_dist_coords(d);
    err[0] = 0;
    if (o && o->ctx != ctx) ok = 0, pt__msg(err, sizeof err, "pt_ckpt_save: the optimizer belongs to another context");
    if (!dir || !dir[0] || strlen(dir) > 900) ok = 0, pt__msg(err, sizeof err, "pt_ckpt_save: need a directory name (at most 900 characters)");
    if (step < 0) step = o ? o->steps : 0;
    if (!pt_dist_agree_msg(d, ok, err, sizeof err)) return (pt_status)(pt__fail(ctx, PT_ERR_ARG, "%s", err), PT_ERR_ARG);
    if (!ctx->ckpt && (ctx->ckpt = (pt__ck_job *)PT_MALLOC(sizeof *ctx->ckpt)) != NULL) {
        memset(ctx->ckpt, 0, sizeof *ctx->ckpt);
        pt__at_shutdown(ctx, pt__ck_release); /* joins a writer still running */
#ifdef PT__CK_THREADS
        pthread_mutex_init(&ctx->ckpt->mu, NULL);
#endif
    }
    if (!(j = ctx->ckpt)) ok = 0, pt__msg(err, sizeof err, "pt_ckpt_save: out of memory");
    snprintf(tmp, sizeof tmp, "%.900s/.tmp.step_%09lld", dir, (long long)step);
    if (ok && rank == 0) {
        if (!pt__mkdirs(dir)) ok = 0, pt__msg(err, sizeof err, "pt_ckpt_save: cannot create directory %s", dir);
        else {
            if (stat(tmp, &sb) == 0) pt__ck_rmdir(tmp); /* left by a save that died */
            if (mkdir(tmp, 0755) != 0) ok = 0, pt__msg(err, sizeof err, "pt_ckpt_save: cannot create %s", tmp);
        }
    }
    if (!pt_dist_agree_msg(d, ok, err, sizeof err)) return (pt_status)(pt__fail(ctx, PT_ERR_IO, "%s", err), PT_ERR_IO);
    {
        const char *fail = getenv("PTRAIN_CKPT_FAIL"), *delay = getenv("PTRAIN_CKPT_DELAY_MS");
        snprintf(j->dir, sizeof j->dir, "%.900s", dir);
        snprintf(j->tmp, sizeof j->tmp, "%s", tmp);
        snprintf(j->path, sizeof j->path, "%s/rank_%05d.bin", tmp, rank);
        j->step = step, j->keep_last = opts ? opts->keep_last : 0, j->async = opts && opts->async;
        j->limit = fail && *fail ? (int64_t)strtoll(fail, NULL, 10) : -1;
        j->delay_ms = delay && *delay && j->async ? (int64_t)strtoll(delay, NULL, 10) : 0;
        j->ok = 1, j->err[0] = 0, j->head.n = 0, j->head.oom = 0;
        memset(&j->st, 0, sizeof j->st);
        j->st.step = step;
    }
    dp_sharded = o && !(o->zlo == 0 && o->zhi == ctx->slab_n);
    ok = pt__ck_plan(ctx, o, j, rank, c, dp_sharded, j->async);
    if (ok && rank == 0) pt__ck_head(ctx, o, step, opts, &j->head);
    snprintf(err, sizeof err, "%s", j->err);
    if (!pt_dist_agree_msg(d, ok, err, sizeof err)) {
        if (rank == 0) pt__ck_rmdir(tmp);
        return (pt_status)(pt__fail(ctx, PT_ERR_IO, "pt_ckpt_save: step %lld not saved: %s", (long long)step, err), PT_ERR_IO);
    }
    for (i = 0; i < j->npc; i++) j->st.bytes += j->pc[i].bytes;
    j->st.snapshot_s = pt_time() - t0;
    j->pending = 1;
#ifdef PT__CK_THREADS
    j->written = 0;
    if (j->async && (j->writer_on = pthread_create(&j->writer, NULL, pt__ck_writer_main, j) == 0)) {
        if (ctx->trace) pt_trace_event(ctx, PT_TRACE_CKPT, "ckpt", t0, pt_time(), -1, -1); /* trace: the blocking part */
        return PT_OK;
    }
#endif
    pt__ck_write_file(j);
    {
        pt_status st = pt__ck_finish(ctx, j);
        if (ctx->trace) pt_trace_event(ctx, PT_TRACE_CKPT, "ckpt", t0, pt_time(), -1, -1); /* trace */
        return st;
    }
}

PTDEF pt_status pt_ckpt_wait(pt_ctx *ctx) {
    if (!ctx) return PT_ERR_ARG;
    return ctx->ckpt && ctx->ckpt->pending ? pt__ck_finish(ctx, ctx->ckpt) : PT_OK;
}
PTDEF pt_status pt_ckpt_poll(pt_ctx *ctx) {
    pt__ck_job *j;
    int mine = 1;
    if (!ctx) return PT_ERR_ARG;
    if (!(j = ctx->ckpt) || !j->pending) return PT_OK; /* the same on every rank: saves are collective */
#ifdef PT__CK_THREADS
    if (j->writer_on) {
        pthread_mutex_lock(&j->mu);
        mine = j->written;
        pthread_mutex_unlock(&j->mu);
    }
#endif
    return pt_dist_agree(ctx->desc.dist, mine) ? pt__ck_finish(ctx, j) : PT_OK;
}
PTDEF int64_t pt_ckpt_pending(const pt_ctx *ctx) { return ctx && ctx->ckpt && ctx->ckpt->pending ? ctx->ckpt->step : -1; }
PTDEF pt_ckpt_stats pt_ckpt_stats_get(const pt_ctx *ctx) {
    pt_ckpt_stats s;
    if (ctx && ctx->ckpt) return ctx->ckpt->st;
    memset(&s, 0, sizeof s);
    s.step = -1;
    return s;
}
static void pt__ck_release(pt_ctx *ctx) {
    pt__ck_job *j = ctx->ckpt;
    if (!j) return;
#ifdef PT__CK_THREADS
    if (j->writer_on) pthread_join(j->writer, NULL);
#endif
    pt__ck_remover_join(j);
#ifdef PT__CK_THREADS
    pthread_mutex_destroy(&j->mu);
#endif
    if (j->pending)
        pt_log(ctx, PT_LOG_WARN, "pt_shutdown: the asynchronous save of step %lld was never committed (call pt_ckpt_wait before pt_shutdown); %s is left behind",
               (long long)j->step, j->tmp);
    PT_FREE(j->pc);
    PT_FREE(j->snap);
    PT_FREE(j->recs.s);
    PT_FREE(j->head.s);
    PT_FREE(j->doomed.s);
    PT_FREE(j);
    ctx->ckpt = NULL;
}

/* ---- load ---- */
/* reads a tensor piece's bytes from its file into buf and checks its CRC */
static int pt__ck_read_piece(const char *dir, const pt__ck_man *m, int64_t off, int64_t bytes, uint32_t crc, int rank, void *buf, char *err,
                             size_t errlen) {
    char path[1024];
    FILE *f;
    int ok;
    snprintf(path, sizeof path, "%s/%s", dir, m->files[rank].name);
    if (!(f = fopen(path, "rb"))) {
        pt__msg(err, errlen, "%s: missing", path);
        return 0;
    }
    ok = fseek(f, (long)off, SEEK_SET) == 0 && fread(buf, 1, (size_t)bytes, f) == (size_t)bytes;
    fclose(f);
    if (!ok) pt__msg(err, errlen, "%s: cannot read %lld bytes at offset %lld", path, (long long)bytes, (long long)off);
    else if (pt_crc32c(0, buf, (size_t)bytes) != crc) {
        pt__msg(err, errlen, "%s: CRC32C mismatch of the piece at offset %lld", path, (long long)off);
        ok = 0;
    }
    return ok;
}

/* the message for a piece whose global shape differs from the parameter's (a padded vocabulary named) */
static void pt__ck_shape_msg(const pt__ck_man *m, const pt_spec *s, const pt__ck_tensor *t, char *err, size_t errlen) {
    char a[128], b[128];
    size_t na = 0, nb = 0;
    int d;
    a[0] = b[0] = 0;
    for (d = 0; d < t->ndim && na < sizeof a - 24; d++) na += (size_t)snprintf(a + na, sizeof a - na, d ? ",%lld" : "%lld", (long long)t->shape[d]);
    for (d = 0; d < s->ndim && nb < sizeof b - 24; d++) nb += (size_t)snprintf(b + nb, sizeof b - nb, d ? ",%lld" : "%lld", (long long)s->global_shape[d]);
    if (m->vocab_padded > 0 && t->ndim == 2 && s->ndim == 2 && t->shape[0] == m->vocab_padded && s->global_shape[0] != t->shape[0] &&
        t->shape[1] == s->global_shape[1])
        pt__msg(err, errlen, "pt_ckpt_load: '%s' has global shape [%s] in the checkpoint, [%s] here: the vocabulary is padded to %lld rows in the "
                "checkpoint (vocab_padded=%d), to %lld here; set pt_gpt_config.vocab_padded=%d to load it", s->name, a, b, (long long)t->shape[0],
                m->vocab_padded, (long long)s->global_shape[0], m->vocab_padded);
    else pt__msg(err, errlen, "pt_ckpt_load: '%s' has global shape [%s] in the checkpoint, [%s] here", s->name, a, b);
}
/* A TP cut of a tensor as the load path sees it: global shape g, local (shard) shape l, split dim sd
   (-1: whole, also for one part) cut in G = g[sd] / blk blocks, each in parts of `part` elements, of
   which this shard holds part `index` of every block (pt__global_index and its inverse). */
typedef struct pt__ck_cut {
    int ndim, sd;
    int32_t index;
    int64_t g[PT_MAX_DIMS], l[PT_MAX_DIMS], blk, part;
} pt__ck_cut;
/* 0 if the split does not describe a valid cut of the global shape */
static int pt__ck_cut_make(pt__ck_cut *c, int ndim, const int64_t *g, int sd, int parts, int index, int groups) {
    int d;
    memset(c, 0, sizeof *c);
    c->ndim = ndim, c->sd = -1;
    if (ndim < 1 || ndim > PT_MAX_DIMS) return 0;
    for (d = 0; d < ndim; d++) c->g[d] = c->l[d] = g[d];
    if (sd < 0 || parts == 1) return sd < ndim && index == 0;
    groups = groups > 1 ? groups : 1;
    if (sd >= ndim || parts < 1 || index < 0 || index >= parts || g[sd] % ((int64_t)groups * parts)) return 0;
    c->sd = sd, c->index = index, c->blk = g[sd] / groups, c->part = c->blk / parts;
    c->l[sd] = g[sd] / parts;
    return 1;
}
static int64_t pt__ck_numel(const pt__ck_cut *c) {
    int64_t n = 1;
    int d;
    for (d = 0; d < c->ndim; d++) n *= c->l[d];
    return n;
}
static int pt__ck_cut_same(const pt__ck_cut *a, const pt__ck_cut *b) {
    return a->sd == b->sd && (a->sd < 0 || (a->index == b->index && a->blk == b->blk && a->part == b->part));
}
/* The run of a writer's local elements starting at local flat index i that stays contiguous in the
   reader's shard: its length (at most `left`), and *j = the reader's local flat index of element i,
   or -1 when the reader does not hold that run (another TP part). */
static int64_t pt__ck_run(const pt__ck_cut *w, const pt__ck_cut *r, int64_t i, int64_t left, int64_t *j) {
    int64_t idx[PT_MAX_DIMS] = {0}, len, c;
    int d, last = w->ndim - 1, own = 1;
    for (d = last; d >= 0; d--) idx[d] = i % w->l[d], i /= w->l[d];
    len = w->l[last] - idx[last];
    if (w->sd == last) len = PT__MIN(len, w->part - idx[last] % w->part);
    if (w->sd >= 0) idx[w->sd] = idx[w->sd] / w->part * w->blk + (int64_t)w->index * w->part + idx[w->sd] % w->part; /* global */
    if (r->sd >= 0) {
        c = idx[r->sd] % r->blk; /* offset in its block */
        if (r->sd == last) len = PT__MIN(len, r->part - c % r->part);
        own = c / r->part == r->index;
        idx[r->sd] = idx[r->sd] / r->blk * r->part + c % r->part; /* reader's local */
    }
    *j = -1;
    if (own)
        for (*j = 0, d = 0; d <= last; d++) *j = *j * r->l[d] + idx[d];
    return PT__MIN(len, left);
}

/* fills elements [lo, hi) of local parameter p's kind k (its flat local shard) from the pieces of the
   manifest of the same name and kind, whatever their TP cut: a piece of the same cut is copied by
   range; a piece of another cut is walked in runs contiguous on both sides (pt__ck_run), each mapped
   to the reader's shard and copied where the reader holds it and needs it. A piece is read (and its
   CRC checked) only when it holds an element not filled yet (replicas of a replicated parameter are
   read once). out: hi - lo floats. */
static int pt__ck_fill(const char *dir, const pt__ck_man *m, const pt_param *p, int k, int64_t lo, int64_t hi, float *out, char *err,
                       size_t errlen) {
    const pt_spec *s = &p->spec;
    unsigned char *got = (unsigned char *)PT_MALLOC((size_t)PT__MAX(hi - lo, 1));
    float *buf = NULL;
    int64_t cap = 0, have = 0, i, j, n, a, b, x;
    int jt, d, ok = got != NULL, loaded;
    pt__ck_cut rc, wc;
    if (!ok) pt__msg(err, errlen, "pt_ckpt_load: out of memory");
    else memset(got, 0, (size_t)PT__MAX(hi - lo, 1));
    if (ok && !pt__ck_cut_make(&rc, s->ndim, s->global_shape, s->split_dim, s->split_parts, s->split_index, s->split_groups)) {
        pt__msg(err, errlen, "pt_ckpt_load: '%s' has an invalid split here (dim %d, %d parts)", s->name, s->split_dim, s->split_parts);
        ok = 0;
    }
    for (jt = 0; jt < m->nt && ok && have < hi - lo; jt++) {
        const pt__ck_tensor *t = &m->t[jt];
        if (t->kind != k || strcmp(t->name, s->name)) continue;
        if (t->ndim != s->ndim) goto shape;
        for (d = 0; d < s->ndim; d++)
            if (t->shape[d] != s->global_shape[d]) goto shape;
        if (!pt__ck_cut_make(&wc, t->ndim, t->shape, t->split_dim, t->split_parts, t->split_index, t->split_groups) ||
            t->hi > pt__ck_numel(&wc)) {
            pt__msg(err, errlen, "%s/manifest: piece of '%s' (%s) on rank %d: split dim %d parts %d index %d groups %d, range [%lld, %lld) "
                    "do not fit its shape", dir, s->name, pt__ck_kind_names[k], t->rank, t->split_dim, t->split_parts, t->split_index,
                    t->split_groups, (long long)t->lo, (long long)t->hi);
            ok = 0;
            break;
        }
        if (wc.sd == rc.sd && !pt__ck_cut_same(&wc, &rc) && wc.blk == rc.blk && wc.part == rc.part) continue; /* another TP part */
        loaded = 0;
        for (i = t->lo; i < t->hi && ok; i += n) {
            if (pt__ck_cut_same(&wc, &rc)) n = t->hi - i, j = i; /* the same cut: the same local indices */
            else n = pt__ck_run(&wc, &rc, i, t->hi - i, &j);
            if (j < 0) continue;
            a = PT__MAX(lo, j), b = PT__MIN(hi, j + n);
            for (x = a; x < b && got[x - lo]; x++) {}
            if (x >= b) continue; /* nothing this rank holds, or all filled already */
            if (!loaded) {
                if (t->hi - t->lo > cap) {
                    float *nb = (float *)PT_REALLOC(buf, (size_t)(t->hi - t->lo) * 4);
                    if (!nb) {
                        pt__msg(err, errlen, "pt_ckpt_load: out of memory");
                        ok = 0;
                        break;
                    }
                    buf = nb, cap = t->hi - t->lo;
                }
                if (!(ok = pt__ck_read_piece(dir, m, t->off, t->bytes, t->crc, t->rank, buf, err, errlen))) break;
                loaded = 1;
            }
            memcpy(out + (a - lo), buf + (i - t->lo) + (a - j), (size_t)(b - a) * 4);
            for (x = a; x < b; x++) have += !got[x - lo], got[x - lo] = 1;
        }
        continue;
    shape:
        pt__ck_shape_msg(m, s, t, err, errlen);
        ok = 0;
    }
    if (ok && have != hi - lo) {
        pt__msg(err, errlen, "pt_ckpt_load: the checkpoint holds %lld of the %lld elements of '%s' (%s) this rank needs", (long long)have,
                (long long)(hi - lo), s->name, pt__ck_kind_names[k]);
        ok = 0;
    }
    PT_FREE(got);
    PT_FREE(buf);
    return ok;
}

/* a checkpoint without optimizer state loaded with an optimizer: its moments are zeroed, its steps 0 */
static int pt__ck_no_moments(pt_ctx *ctx, pt_optim *o, const char *cdir, char *err, size_t errlen) {
    int k;
    for (k = PT__CK_M; k <= PT__CK_V; k++) {
        pt_storage *st = pt__ck_moment(o, k);
        int64_t n = o->zhi - o->zlo;
        if (!st || n <= 0) continue;
        if (st->host) memset(st->host, 0, (size_t)n * 4);
        else {
            float *z = (float *)PT_MALLOC((size_t)n * 4);
            if (!z) {
                pt__msg(err, errlen, "pt_ckpt_load: out of memory");
                return 0;
            }
            memset(z, 0, (size_t)n * 4);
            pt__stage_xfer(ctx, st, 0, z, n, 0, PT_XFER_CKPT);
            PT_FREE(z);
        }
    }
    o->steps = 0;
    if (pt_dist_rank(ctx->desc.dist) == 0)
        pt_log(ctx, PT_LOG_WARN, "pt_ckpt_load: %s holds no optimizer state (parameters only): the optimizer's moments start at zero", cdir);
    return 1;
}

/* loads one checkpoint directory; collective; 0 and the same message on every rank on failure */
static int pt__ck_load_one(pt_ctx *ctx, pt_optim *o, const char *cdir, int64_t *step, char *err, size_t errlen) {
    const pt_dist *d = ctx->desc.dist;
    int rank = pt_dist_rank(d), world = pt_dist_size(d), ok, r, i, k, same;
    pt_layout lay = pt_dist_layout(d);
    pt__ck_man m;
    float *host = NULL;
    int64_t hcap = 0;
    pt_optim *o0 = NULL; /* o, when the checkpoint holds no optimizer state (an import): its moments start at zero */
    ok = pt__ck_man_read(cdir, &m, err, errlen);
    if (ok && o && !m.has_optim) o0 = o, o = NULL;
    if (ok && o && (!m.has_optim || m.optim_kind != (int)o->d.kind)) {
        pt__msg(err, errlen, "%s/manifest: optimizer %s, this run uses %s", cdir, m.has_optim ? (m.optim_kind == PT_OPTIM_ADAMW ? "adamw" : "sgd") : "none",
                pt__ck_optim_kind(o));
        ok = 0;
    }
    /* every file is checked by one rank */
    for (r = rank; ok && r < m.world; r += world) ok = pt__ck_file_check(cdir, &m, r, err, errlen);
    if (!pt_dist_agree_msg(d, ok, err, errlen)) {
        pt__ck_man_free(&m);
        return 0;
    }
    for (i = 0; i < ctx->nparams && ok; i++) {
        pt_param *p = ctx->params[i];
        int64_t n = pt_numel(&p->value);
        for (k = 0; k < 3 && ok; k++) {
            pt_storage *st = k == PT__CK_PARAM ? ctx->pslab : o ? pt__ck_moment(o, k) : NULL;
            int64_t lo = 0, hi = n, soff = p->slab_off;
            if (!st) continue;
            if (k != PT__CK_PARAM) {
                lo = PT__MAX(0, o->zlo - p->slab_off), hi = PT__MIN(n, o->zhi - p->slab_off);
                if (hi <= lo) continue;
                soff = p->slab_off - o->zlo;
            }
            if (hi - lo > hcap) {
                float *nh = (float *)PT_REALLOC(host, (size_t)(hi - lo) * 4);
                if (!nh) {
                    pt__msg(err, errlen, "pt_ckpt_load: out of memory");
                    ok = 0;
                    break;
                }
                host = nh, hcap = hi - lo;
            }
            if (!(ok = pt__ck_fill(cdir, &m, p, k, lo, hi, host, err, errlen))) break;
            if (st->host) memcpy((float *)st->host + soff + lo, host, (size_t)(hi - lo) * 4);
            else pt__stage_xfer(ctx, st, soff + lo, host, hi - lo, 0, PT_XFER_CKPT);
        }
    }
    /* registered state: on the same layout each rank's own entry; on another layout rank 0's (entries
       equal on every rank), and a per-rank entry (PT_STATE_PER_RANK) is not restored (a warning) */
    same = m.dp == lay.dp && m.tp == lay.tp && m.pp == lay.pp && m.world == world;
    for (i = 0; i < ctx->nstate && ok; i++) {
        const pt__state_entry *e = &ctx->state[i];
        const pt__ck_state *s = NULL, *s0 = NULL;
        int j;
        for (j = 0; j < m.ns; j++)
            if (!strcmp(m.s[j].name, e->name)) {
                if (m.s[j].rank == rank) s = &m.s[j];
                if (m.s[j].rank == 0) s0 = &m.s[j];
            }
        if (e->flags & PT_STATE_PER_RANK) {
            if (!same || !s) {
                if (rank == 0)
                    pt_log(ctx, PT_LOG_WARN, "pt_ckpt_load: per-rank state '%s' not restored (left as it is): %s", e->name,
                           !same ? "the checkpoint was saved on another layout" : "the checkpoint does not hold it");
                continue;
            }
        } else if (!same || !s) s = s0;
        if (!s && o0 && e->ptr == (void *)&o0->steps) continue; /* set to 0 below */
        if (!s) {
            pt__msg(err, errlen, "%s/manifest: no state '%s' (registered here)", cdir, e->name);
            ok = 0;
        } else if (s->bytes != e->bytes) {
            pt__msg(err, errlen, "%s/manifest: state '%s' has %lld bytes, %lld registered here", cdir, e->name, (long long)s->bytes, (long long)e->bytes);
            ok = 0;
        } else {
            void *tmp = PT_MALLOC((size_t)PT__MAX(e->bytes, 1));
            ok = tmp && pt__ck_read_piece(cdir, &m, s->off, s->bytes, s->crc, s->rank, tmp, err, errlen);
            if (!tmp) pt__msg(err, errlen, "pt_ckpt_load: out of memory");
            if (ok) memcpy(e->ptr, tmp, (size_t)e->bytes);
            PT_FREE(tmp);
        }
    }
    if (ok && o) o->steps = m.optim_steps;
    if (ok && o0) ok = pt__ck_no_moments(ctx, o0, cdir, err, errlen);
    PT_FREE(host);
    *step = m.step;
    pt__ck_man_free(&m);
    return pt_dist_agree_msg(d, ok, err, errlen);
}

/* `latest` is the commit point: a step directory newer than the one it names is a save that died
   between its rename and the update of latest, or a run abandoned when training resumed from an
   older checkpoint; those are skipped (with a message) when latest names a listed step. Returns the
   number of candidates left at the front of steps (newest first). */
static int pt__ck_after_latest(pt_ctx *ctx, const char *dir, int64_t *steps, int n) {
    char path[1100], *txt, *end;
    size_t len = 0;
    long long k;
    int i, j;
    snprintf(path, sizeof path, "%s/latest", dir);
    if (!steps || !(txt = pt__ck_slurp(path, &len))) return n;
    k = strncmp(txt, "step_", 5) ? -1 : strtoll(txt + 5, &end, 10);
    if (k >= 0 && (*end == '\n' || *end == 0)) {
        for (i = 0; i < n && steps[i] != k; i++) {}
        if (i < n && i > 0) {
            if (pt_dist_rank(ctx->desc.dist) == 0)
                pt_log(ctx, PT_LOG_WARN, "pt_ckpt_load: %s names step_%09lld; %d newer step director%s (an unfinished save or an abandoned run) not used",
                       path, k, i, i == 1 ? "y is" : "ies are");
            for (j = 0; i + j < n; j++) steps[j] = steps[i + j];
            n = j;
        }
    }
    PT_FREE(txt);
    return n;
}

PTDEF pt_status pt_ckpt_load(pt_ctx *ctx, pt_optim *o, const char *path, int64_t *step_out) {
    char err[PT__ERRLEN], cdir[1024], last[PT__ERRLEN];
    struct stat sb;
    int64_t *steps = NULL, step = -1;
    int n = 0, i, single;
    if (step_out) *step_out = -1;
    if (!ctx) return PT_ERR_ARG;
    if (!path || !path[0] || strlen(path) > 900) return (pt_status)(pt__fail(ctx, PT_ERR_ARG, "pt_ckpt_load: need a directory name (at most 900 characters)"), PT_ERR_ARG);
    if (o && o->ctx != ctx) return (pt_status)(pt__fail(ctx, PT_ERR_ARG, "pt_ckpt_load: the optimizer belongs to another context"), PT_ERR_ARG);
    snprintf(cdir, sizeof cdir, "%s/manifest", path);
    single = stat(cdir, &sb) == 0;
    if (!single) {
        steps = pt__ck_list(path, &n);
        n = pt__ck_after_latest(ctx, path, steps, n);
        i = pt_dist_agree(ctx->desc.dist, n > 0);
        if (!i || !n) {
            PT_FREE(steps);
            return (pt_status)(pt__fail(ctx, PT_ERR_IO, "pt_ckpt_load: no checkpoint in %s (no step_* directory)", path), PT_ERR_IO);
        }
    }
    last[0] = 0;
    for (i = 0; i < (single ? 1 : n); i++) {
        if (single) snprintf(cdir, sizeof cdir, "%s", path);
        else snprintf(cdir, sizeof cdir, "%s/step_%09lld", path, (long long)steps[i]);
        err[0] = 0;
        if (pt__ck_load_one(ctx, o, cdir, &step, err, sizeof err)) {
            PT_FREE(steps);
            if (step_out) *step_out = step;
            if (i > 0) pt_log(ctx, PT_LOG_WARN, "pt_ckpt_load: resumed from %s, an older checkpoint, after the newer ones failed", cdir);
            return PT_OK;
        }
        snprintf(last, sizeof last, "%s", err);
        if (pt_dist_rank(ctx->desc.dist) == 0)
            pt_log(ctx, PT_LOG_WARN, "pt_ckpt_load: %s is not usable: %s%s", cdir, err, !single && i + 1 < n ? "; trying the previous checkpoint" : "");
    }
    PT_FREE(steps);
    return (pt_status)(pt__fail(ctx, PT_ERR_FORMAT, "pt_ckpt_load: no valid checkpoint in %s (last problem: %s)", path, last), PT_ERR_FORMAT);
}
#else /* not POSIX: no directories to write */
PTDEF pt_status pt_ckpt_save(pt_ctx *ctx, pt_optim *o, const char *dir, int64_t step, const pt_ckpt_opts *opts) {
    (void)o, (void)dir, (void)step, (void)opts;
    return ctx ? (pt_status)(pt__fail(ctx, PT_ERR_IO, "pt_ckpt_save: checkpoints need a POSIX file system"), PT_ERR_IO) : PT_ERR_ARG;
}
PTDEF pt_status pt_ckpt_wait(pt_ctx *ctx) { return ctx ? PT_OK : PT_ERR_ARG; }
PTDEF pt_status pt_ckpt_poll(pt_ctx *ctx) { return ctx ? PT_OK : PT_ERR_ARG; }
PTDEF int64_t pt_ckpt_pending(const pt_ctx *ctx) { return (void)ctx, -1; }
PTDEF pt_ckpt_stats pt_ckpt_stats_get(const pt_ctx *ctx) {
    pt_ckpt_stats s;
    (void)ctx;
    memset(&s, 0, sizeof s);
    s.step = -1;
    return s;
}
PTDEF pt_status pt_ckpt_load(pt_ctx *ctx, pt_optim *o, const char *path, int64_t *step_out) {
    (void)o, (void)path;
    if (step_out) *step_out = -1;
    return ctx ? (pt_status)(pt__fail(ctx, PT_ERR_IO, "pt_ckpt_load: checkpoints need a POSIX file system"), PT_ERR_IO) : PT_ERR_ARG;
}
PTDEF pt_status pt_ckpt_verify(const char *step_dir, char *err, size_t errlen) {
    (void)step_dir;
    pt__msg(err, errlen, "pt_ckpt_verify: checkpoints need a POSIX file system");
    return PT_ERR_IO;
}
#endif /* PT__CKPT_POSIX */

/* ---- inspection, safetensors export and import (see ckpt) ---------------------------------------
   safetensors: 8 bytes little-endian u64 N, N bytes of UTF-8 JSON {"<name>": {"dtype": "F32",
   "shape": [..], "data_offsets": [begin, end]}, ..., "__metadata__": {string: string}}, then the
   data, little-endian row-major, offsets relative to its start. The export pads N with spaces to a
   multiple of 8 (the data starts 8-aligned) and writes the tensors contiguously in offset order.
   The reader takes any valid file (keys in any order, string escapes, unknown keys of an entry
   skipped) and refuses, naming the file and the problem: a header size past the end of the file,
   invalid JSON, a byte count that does not match shape and dtype, overlapping or missing data,
   bytes after the last tensor. Floats are assumed little-endian in memory, as in the data files. */
typedef struct pt__sf_ent {
    char name[256], dtype[16];
    int ndim, esize;
    int64_t shape[PT_MAX_DIMS], begin, end;
} pt__sf_ent;
typedef struct pt__sf_meta {
    char key[64], val[256];
} pt__sf_meta;
typedef struct pt__sf {
    const char *path;
    int64_t data_off, data_bytes;
    pt__sf_ent *e;
    int n, cap;
    pt__sf_meta *m;
    int nm, capm;
} pt__sf;
static void pt__sf_free(pt__sf *st) {
    PT_FREE(st->e);
    PT_FREE(st->m);
    memset(st, 0, sizeof *st);
}

static void pt__js_ws(const char **p) {
    while (**p == ' ' || **p == '\t' || **p == '\n' || **p == '\r') (*p)++;
}
/* a JSON string at *p: its UTF-8 bytes into out (cap bytes, truncated; out may be NULL), its full
   length into *len (may be NULL); 0 on a syntax error */
static int pt__js_str(const char **p, char *out, size_t cap, size_t *len) {
    const char *s = *p;
    size_t n = 0;
    unsigned char u8[4];
    int k, i;
    if (*s++ != '"') return 0;
    for (;;) {
        unsigned c = (unsigned char)*s++;
        if (c == '"') break;
        if (c < 0x20) return 0; /* a control character, or the end of the header */
        k = 1, u8[0] = (unsigned char)c;
        if (c == '\\') {
            c = (unsigned char)*s++;
            switch (c) {
            case '"': case '\\': case '/': u8[0] = (unsigned char)c; break;
            case 'b': u8[0] = 8; break;
            case 'f': u8[0] = 12; break;
            case 'n': u8[0] = 10; break;
            case 'r': u8[0] = 13; break;
            case 't': u8[0] = 9; break;
            case 'u':
                for (c = 0, i = 0; i < 4; i++, s++) {
                    int h = *s >= '0' && *s <= '9' ? *s - '0' : *s >= 'a' && *s <= 'f' ? *s - 'a' + 10 : *s >= 'A' && *s <= 'F' ? *s - 'A' + 10 : -1;
                    if (h < 0) return 0;
                    c = c * 16 + (unsigned)h;
                }
                if (c < 0x80) u8[0] = (unsigned char)c;
                else if (c < 0x800) k = 2, u8[0] = (unsigned char)(0xc0 | (c >> 6)), u8[1] = (unsigned char)(0x80 | (c & 63));
                else k = 3, u8[0] = (unsigned char)(0xe0 | (c >> 12)), u8[1] = (unsigned char)(0x80 | ((c >> 6) & 63)), u8[2] = (unsigned char)(0x80 | (c & 63));
                break;
            default: return 0;
            }
        }
        for (i = 0; i < k; i++, n++)
            if (out && n + 1 < cap) out[n] = (char)u8[i];
    }
    if (out && cap) out[n < cap ? n : cap - 1] = 0;
    if (len) *len = n;
    *p = s;
    return 1;
}
/* a non-negative JSON integer below 2^62 */
static int pt__js_u62(const char **p, int64_t *v) {
    const char *s = *p;
    int64_t x = 0;
    if (*s < '0' || *s > '9' || (*s == '0' && s[1] >= '0' && s[1] <= '9')) return 0;
    for (; *s >= '0' && *s <= '9'; s++) {
        if (x > ((int64_t)1 << 62) / 10) return 0;
        x = x * 10 + (*s - '0');
    }
    if (*s == '.' || *s == 'e' || *s == 'E') return 0;
    *v = x, *p = s;
    return 1;
}
/* skips any JSON value */
static int pt__js_skip(const char **p, int depth) {
    const char *s;
    pt__js_ws(p);
    s = *p;
    if (depth > 64) return 0;
    if (*s == '"') return pt__js_str(p, NULL, 0, NULL);
    if (*s == '{' || *s == '[') {
        char close = *s == '{' ? '}' : ']';
        (*p)++;
        pt__js_ws(p);
        if (**p == close) return (*p)++, 1;
        for (;;) {
            if (close == '}') {
                if (!pt__js_str(p, NULL, 0, NULL)) return 0;
                pt__js_ws(p);
                if (*(*p)++ != ':') return 0;
            }
            if (!pt__js_skip(p, depth + 1)) return 0;
            pt__js_ws(p);
            if (**p == ',') {
                (*p)++;
                pt__js_ws(p);
                continue;
            }
            return *(*p)++ == close;
        }
    }
    if (!strncmp(s, "true", 4) || !strncmp(s, "null", 4)) return *p += 4, 1;
    if (!strncmp(s, "false", 5)) return *p += 5, 1;
    if (*s == '-') s++;
    if (*s < '0' || *s > '9') return 0;
    while (*s >= '0' && *s <= '9') s++;
    if (*s == '.') {
        if (*++s < '0' || *s > '9') return 0;
        while (*s >= '0' && *s <= '9') s++;
    }
    if (*s == 'e' || *s == 'E') {
        if (*++s == '+' || *s == '-') s++;
        if (*s < '0' || *s > '9') return 0;
        while (*s >= '0' && *s <= '9') s++;
    }
    *p = s;
    return 1;
}
/* [int, int, ...] (at most max) into v, count into *n */
static int pt__js_ints(const char **p, int64_t *v, int max, int *n) {
    pt__js_ws(p);
    *n = 0;
    if (*(*p)++ != '[') return 0;
    pt__js_ws(p);
    if (**p == ']') return (*p)++, 1;
    for (;;) {
        pt__js_ws(p);
        if (*n >= max || !pt__js_u62(p, &v[*n])) return 0;
        (*n)++;
        pt__js_ws(p);
        if (**p == ']') return (*p)++, 1;
        if (*(*p)++ != ',') return 0;
    }
}
/* bytes per element of a safetensors dtype, 0 if unknown */
static int pt__sf_esize(const char *dt) {
    static const char *const names[] = {"F64", "F32", "F16", "BF16", "I64", "I32", "I16", "I8", "U64", "U32", "U16", "U8", "BOOL", "F8_E4M3", "F8_E5M2"};
    static const int sizes[] = {8, 4, 2, 2, 8, 4, 2, 1, 8, 4, 2, 1, 1, 1, 1};
    int i;
    for (i = 0; i < (int)(sizeof sizes / sizeof sizes[0]); i++)
        if (!strcmp(dt, names[i])) return sizes[i];
    return 0;
}
static void pt__sf_shape_str(char *out, size_t n, int ndim, const int64_t *shape) {
    size_t k = 0;
    int d;
    k += (size_t)snprintf(out, n, "[");
    for (d = 0; d < ndim && k < n; d++) k += (size_t)snprintf(out + k, n - k, d ? ", %lld" : "%lld", (long long)shape[d]);
    if (k < n) snprintf(out + k, n - k, "]");
}
static int pt__sf_cmp_begin(const void *a, const void *b) {
    const pt__sf_ent *x = (const pt__sf_ent *)a, *y = (const pt__sf_ent *)b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : (x->end > y->end) - (x->end < y->end);
}
/* one tensor entry {"dtype": .., "shape": [..], "data_offsets": [b, e]} */
static int pt__sf_entry(const char **p, pt__sf_ent *e) {
    char key[32];
    int64_t off[2];
    int n, have = 0;
    pt__js_ws(p);
    if (*(*p)++ != '{') return 0;
    pt__js_ws(p);
    if (**p == '}') return 0;
    for (;;) {
        size_t kl;
        pt__js_ws(p);
        if (!pt__js_str(p, key, sizeof key, &kl)) return 0;
        pt__js_ws(p);
        if (*(*p)++ != ':') return 0;
        pt__js_ws(p);
        if (!strcmp(key, "dtype")) {
            if (!pt__js_str(p, e->dtype, sizeof e->dtype, &kl) || kl >= sizeof e->dtype) return 0;
            have |= 1;
        } else if (!strcmp(key, "shape")) {
            if (!pt__js_ints(p, e->shape, PT_MAX_DIMS, &e->ndim)) return 0;
            have |= 2;
        } else if (!strcmp(key, "data_offsets")) {
            if (!pt__js_ints(p, off, 2, &n) || n != 2) return 0;
            e->begin = off[0], e->end = off[1];
            have |= 4;
        } else if (!pt__js_skip(p, 1)) return 0;
        pt__js_ws(p);
        if (**p == '}') return (*p)++, have == 7;
        if (*(*p)++ != ',') return 0;
    }
}
/* opens and checks a safetensors file; 0 and a message naming the file on failure */
static int pt__sf_open(const char *path, pt__sf *st, char *err, size_t errlen) {
    FILE *f;
    unsigned char b8[8];
    uint64_t N = 0;
    long fsize = -1;
    char *h = NULL, key[256], sh[160];
    const char *p;
    int i, ok = 0;
    memset(st, 0, sizeof *st);
    st->path = path;
    if (!(f = fopen(path, "rb"))) {
        pt__msg(err, errlen, "%s: cannot open", path);
        return 0;
    }
    if (fseek(f, 0, SEEK_END) == 0) fsize = ftell(f);
    if (fsize < 8 || fseek(f, 0, SEEK_SET) != 0 || fread(b8, 1, 8, f) != 8) {
        pt__msg(err, errlen, "%s: %ld bytes, too short for a safetensors file (it starts with an 8-byte header size)", path, fsize);
        goto out;
    }
    for (i = 7; i >= 0; i--) N = N << 8 | b8[i];
    if (N < 2 || N > 100000000u || N > (uint64_t)fsize - 8) {
        pt__msg(err, errlen, "%s: header size %llu (its first 8 bytes) does not fit the file's %ld bytes (or the 100 MB limit): truncated or not safetensors",
                path, (unsigned long long)N, fsize);
        goto out;
    }
    if (!(h = (char *)PT_MALLOC((size_t)N + 1))) {
        pt__msg(err, errlen, "%s: out of memory for a %llu-byte header", path, (unsigned long long)N);
        goto out;
    }
    if (fread(h, 1, (size_t)N, f) != (size_t)N) {
        pt__msg(err, errlen, "%s: cannot read the %llu-byte header", path, (unsigned long long)N);
        goto out;
    }
    h[N] = 0;
    st->data_off = 8 + (int64_t)N, st->data_bytes = (int64_t)fsize - st->data_off;
    p = h;
    pt__js_ws(&p);
    if (*p++ != '{') goto bad;
    pt__js_ws(&p);
    if (*p == '}') p++;
    else
        for (;;) {
            size_t kl;
            pt__js_ws(&p);
            if (!pt__js_str(&p, key, sizeof key, &kl)) goto bad;
            pt__js_ws(&p);
            if (*p++ != ':') goto bad;
            if (kl >= sizeof key) {
                pt__msg(err, errlen, "%s: a tensor name of %zu bytes (at most %zu)", path, kl, sizeof key - 1);
                goto out;
            }
            pt__js_ws(&p);
            if (!strcmp(key, "__metadata__")) {
                if (*p++ != '{') goto bad;
                pt__js_ws(&p);
                if (*p == '}') p++;
                else
                    for (;;) {
                        pt__sf_meta mm;
                        size_t vl;
                        pt__js_ws(&p);
                        if (!pt__js_str(&p, mm.key, sizeof mm.key, &kl)) goto bad;
                        pt__js_ws(&p);
                        if (*p++ != ':') goto bad;
                        pt__js_ws(&p);
                        if (*p != '"') {
                            pt__msg(err, errlen, "%s: __metadata__ value of '%s' is not a string", path, mm.key);
                            goto out;
                        }
                        if (!pt__js_str(&p, mm.val, sizeof mm.val, &vl)) goto bad;
                        if (kl < sizeof mm.key && vl < sizeof mm.val) { /* longer ones are kept out (not ours) */
                            if (st->nm == st->capm) {
                                int c = st->capm ? 2 * st->capm : 16;
                                pt__sf_meta *nm = (pt__sf_meta *)PT_REALLOC(st->m, (size_t)c * sizeof *nm);
                                if (!nm) goto oom;
                                st->m = nm, st->capm = c;
                            }
                            st->m[st->nm++] = mm;
                        }
                        pt__js_ws(&p);
                        if (*p == '}') break;
                        if (*p++ != ',') goto bad;
                    }
                p++;
            } else {
                pt__sf_ent e;
                memset(&e, 0, sizeof e);
                memcpy(e.name, key, kl + 1);
                if (!pt__sf_entry(&p, &e)) {
                    pt__msg(err, errlen, "%s: the entry of tensor '%s' is not {\"dtype\": string, \"shape\": [integers, at most %d], \"data_offsets\": [begin, end]} (near header byte %ld)",
                            path, key, PT_MAX_DIMS, (long)(p - h));
                    goto out;
                }
                for (i = 0; i < st->n; i++)
                    if (!strcmp(st->e[i].name, e.name)) {
                        pt__msg(err, errlen, "%s: tensor '%s' appears twice in the header", path, e.name);
                        goto out;
                    }
                if (st->n == st->cap) {
                    int c = st->cap ? 2 * st->cap : 64;
                    pt__sf_ent *ne = (pt__sf_ent *)PT_REALLOC(st->e, (size_t)c * sizeof *ne);
                    if (!ne) goto oom;
                    st->e = ne, st->cap = c;
                }
                st->e[st->n++] = e;
            }
            pt__js_ws(&p);
            if (*p == '}') {
                p++;
                break;
            }
            if (*p++ != ',') goto bad;
        }
    pt__js_ws(&p);
    if (*p) goto bad;
    /* every entry: a known dtype, bytes = elements x size; together the data, contiguous */
    for (i = 0; i < st->n; i++) {
        pt__sf_ent *e = &st->e[i];
        int64_t numel = 1;
        int d;
        for (d = 0; d < e->ndim; d++) numel = e->shape[d] && numel > ((int64_t)1 << 58) / e->shape[d] ? -1 : numel * e->shape[d];
        if (!(e->esize = pt__sf_esize(e->dtype))) {
            pt__msg(err, errlen, "%s: tensor '%s' has unknown dtype '%s'", path, e->name, e->dtype);
            goto out;
        }
        pt__sf_shape_str(sh, sizeof sh, e->ndim, e->shape);
        if (numel < 0 || e->end < e->begin || e->end - e->begin != numel * e->esize) {
            pt__msg(err, errlen, "%s: tensor '%s' (%s %s) needs %lld bytes, its data_offsets [%lld, %lld] give %lld", path, e->name, e->dtype, sh,
                    (long long)(numel < 0 ? -1 : numel * e->esize), (long long)e->begin, (long long)e->end, (long long)(e->end - e->begin));
            goto out;
        }
    }
    if (st->n) qsort(st->e, (size_t)st->n, sizeof *st->e, pt__sf_cmp_begin);
    for (i = 0; i < st->n; i++) {
        int64_t want = i ? st->e[i - 1].end : 0;
        if (st->e[i].begin != want) {
            pt__msg(err, errlen, "%s: tensor '%s' starts at data byte %lld, expected %lld (%s)", path, st->e[i].name, (long long)st->e[i].begin,
                    (long long)want, st->e[i].begin < want ? "overlapping tensors" : "a hole in the data");
            goto out;
        }
    }
    if ((st->n ? st->e[st->n - 1].end : 0) != st->data_bytes) {
        pt__msg(err, errlen, "%s: the tensors cover %lld data bytes, the file has %lld after the header (%s)", path,
                (long long)(st->n ? st->e[st->n - 1].end : 0), (long long)st->data_bytes,
                (st->n ? st->e[st->n - 1].end : 0) > st->data_bytes ? "offsets past the end: truncated?" : "bytes after the last tensor");
        goto out;
    }
    ok = 1;
    goto out;
bad:
    pt__msg(err, errlen, "%s: the header is not valid safetensors JSON near byte %ld of %llu ('%.24s')", path, (long)(p - h), (unsigned long long)N,
            p && p >= h && p <= h + N ? p : "");
    goto out;
oom:
    pt__msg(err, errlen, "%s: out of memory", path);
out:
    if (f) fclose(f);
    PT_FREE(h);
    if (!ok) pt__sf_free(st);
    return ok;
}
static const pt__sf_ent *pt__sf_find(const pt__sf *st, const char *name) {
    int i;
    for (i = 0; i < st->n; i++)
        if (!strcmp(st->e[i].name, name)) return &st->e[i];
    return NULL;
}
static const char *pt__sf_meta_get(const pt__sf *st, const char *key) {
    int i;
    for (i = 0; i < st->nm; i++)
        if (!strcmp(st->m[i].key, key)) return st->m[i].val;
    return NULL;
}
static float pt__sf_f16(uint16_t h) {
    uint32_t s = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 31, m = h & 1023u, u;
    float f;
    if (e == 31) u = s | 0x7f800000u | m << 13;
    else if (e) u = s | (e + 112) << 23 | m << 13;
    else {
        f = (float)m * (1.0f / 16777216.0f); /* subnormal: m x 2^-24, exact */
        return s ? -f : f;
    }
    memcpy(&f, &u, 4);
    return f;
}
/* the values of entry e (F32, BF16 or F16) as floats into out */
static int pt__sf_read(const pt__sf *st, const pt__sf_ent *e, float *out, char *err, size_t errlen) {
    FILE *f = fopen(st->path, "rb");
    int64_t n = (e->end - e->begin) / (e->esize ? e->esize : 1), i, k;
    uint16_t buf[4096];
    int ok = f && fseek(f, (long)(st->data_off + e->begin), SEEK_SET) == 0;
    int bf = !strcmp(e->dtype, "BF16");
    if (ok && !strcmp(e->dtype, "F32")) ok = fread(out, 4, (size_t)n, f) == (size_t)n;
    else if (ok && (bf || !strcmp(e->dtype, "F16")))
        for (i = 0; i < n && ok; i += k) {
            int64_t c;
            k = PT__MIN(n - i, 4096);
            if (!(ok = fread(buf, 2, (size_t)k, f) == (size_t)k)) break;
            for (c = 0; c < k; c++) out[i + c] = bf ? pt__dp_f32(buf[c]) : pt__sf_f16(buf[c]);
        }
    else if (ok) {
        pt__msg(err, errlen, "%s: tensor '%s' is %s (readable: F32, BF16, F16)", st->path, e->name, e->dtype);
        fclose(f);
        return 0;
    }
    if (f) fclose(f);
    if (!ok) pt__msg(err, errlen, "%s: cannot read the %lld bytes of tensor '%s'", st->path, (long long)(e->end - e->begin), e->name);
    return ok;
}

PTDEF pt_status pt_safetensors_config(const char *path, pt_gpt_config *cfg, int64_t *step, char *err, size_t errlen) {
    static const char *const keys[] = {"vocab", "max_seq", "layers", "width", "heads", "vocab_padded", "untied", "dropout"};
    pt__sf st;
    int i;
    if (step) *step = -1;
    if (!path || !cfg) {
        pt__msg(err, errlen, "pt_safetensors_config: need a path and a configuration to fill");
        return PT_ERR_ARG;
    }
    if (!pt__sf_open(path, &st, err, errlen)) return PT_ERR_FORMAT;
    memset(cfg, 0, sizeof *cfg);
    for (i = 0; i < 8; i++) {
        const char *v = pt__sf_meta_get(&st, keys[i]);
        char *end;
        double x;
        if (!v) {
            if (i < 5) {
                pt__msg(err, errlen, "%s: __metadata__ has no '%s' (the model configuration: vocab, max_seq, layers, width, heads)", path, keys[i]);
                pt__sf_free(&st);
                return PT_ERR_FORMAT;
            }
            continue;
        }
        x = strtod(v, &end);
        if (!*v || *end || x < 0 || x > 2147483647.0 || (i < 7 && x != (double)(int32_t)x)) {
            pt__msg(err, errlen, "%s: __metadata__ '%s' is \"%s\", expected a non-negative %s", path, keys[i], v, i < 7 ? "integer" : "number");
            pt__sf_free(&st);
            return PT_ERR_FORMAT;
        }
        if (i == 0) cfg->vocab = (int32_t)x;
        else if (i == 1) cfg->max_seq = (int32_t)x;
        else if (i == 2) cfg->layers = (int32_t)x;
        else if (i == 3) cfg->width = (int32_t)x;
        else if (i == 4) cfg->heads = (int32_t)x;
        else if (i == 5) cfg->vocab_padded = (int32_t)x;
        else if (i == 6) cfg->untied = (int32_t)x;
        else cfg->dropout = (float)x;
    }
    if (step && pt__sf_meta_get(&st, "step")) *step = (int64_t)strtoll(pt__sf_meta_get(&st, "step"), NULL, 10);
    pt__sf_free(&st);
    return PT_OK;
}

PTDEF pt_status pt_safetensors_load(pt_ctx *ctx, const char *path) {
    const pt_dist *d;
    char err[PT__ERRLEN], a[160], b[160];
    pt__sf st;
    float *g = NULL, *loc = NULL;
    int i, j, ok, nopt = 0;
    pt_status why = PT_ERR_FORMAT;
    if (!ctx) return PT_ERR_ARG;
    d = ctx->desc.dist;
    err[0] = 0;
    if (!path) return (pt_status)(pt__fail(ctx, PT_ERR_ARG, "pt_safetensors_load: no path"), PT_ERR_ARG);
    ok = pt__sf_open(path, &st, err, sizeof err);
    /* first every check, then the values: a refused file changes nothing */
    for (i = 0; ok && i < ctx->nparams; i++) {
        const pt_spec *s = &ctx->params[i]->spec;
        const pt__sf_ent *e = pt__sf_find(&st, s->name);
        pt__sf_shape_str(a, sizeof a, s->ndim, s->global_shape);
        if (!e) {
            pt__msg(err, sizeof err, "pt_safetensors_load: %s has no tensor '%s' (a parameter of the model, shape %s)", path, s->name, a);
            ok = 0;
            break;
        }
        pt__sf_shape_str(b, sizeof b, e->ndim, e->shape);
        if (strcmp(a, b)) {
            pt__msg(err, sizeof err, "pt_safetensors_load: '%s' has shape %s in %s, %s in the model", s->name, b, path, a);
            why = PT_ERR_SHAPE;
            ok = 0;
        } else if (strcmp(e->dtype, "F32") && strcmp(e->dtype, "BF16") && strcmp(e->dtype, "F16")) {
            pt__msg(err, sizeof err, "pt_safetensors_load: '%s' is %s in %s (readable: F32, BF16, F16)", s->name, e->dtype, path);
            why = PT_ERR_DTYPE;
            ok = 0;
        }
    }
    for (j = 0; ok && j < st.n; j++) {
        const pt__sf_ent *e = &st.e[j];
        if (!strncmp(e->name, "optim.", 6)) {
            nopt++;
            continue;
        }
        if (d && pt_dist_layout(d).pp > 1) continue; /* another stage's parameter */
        if (!pt_param_find(ctx, e->name)) {
            pt__sf_shape_str(b, sizeof b, e->ndim, e->shape);
            pt__msg(err, sizeof err, "pt_safetensors_load: %s holds tensor '%s' %s, which is no parameter of the model", path, e->name, b);
            ok = 0;
        }
    }
    if (!pt_dist_agree_msg(d, ok, err, sizeof err)) {
        pt__sf_free(&st);
        return (pt_status)(pt__fail(ctx, why, "%s", err), why);
    }
    for (i = 0; ok && i < ctx->nparams; i++) {
        pt_param *p = ctx->params[i];
        const pt__sf_ent *e = pt__sf_find(&st, p->spec.name);
        int64_t n = pt_numel(&p->value), k;
        float *ng = (float *)PT_REALLOC(g, (size_t)PT__MAX((e->end - e->begin) / e->esize, 1) * 4);
        float *nl = ng ? (float *)PT_REALLOC(loc, (size_t)PT__MAX(n, 1) * 4) : NULL;
        if (ng) g = ng;
        if (nl) loc = nl;
        if (!ng || !nl) {
            pt__msg(err, sizeof err, "pt_safetensors_load: out of memory for '%s'", p->spec.name);
            ok = 0;
        } else if ((ok = pt__sf_read(&st, e, g, err, sizeof err)) != 0) {
            if (p->spec.split_dim < 0) memcpy(loc, g, (size_t)n * 4);
            else
                for (k = 0; k < n; k++) loc[k] = g[pt_spec_global_index(&p->spec, k)];
            ok = pt_tensor_write(&p->value, loc) == PT_OK;
        }
    }
    PT_FREE(g);
    PT_FREE(loc);
    pt__sf_free(&st);
    if (!pt_dist_agree_msg(d, ok, err, sizeof err)) return (pt_status)(pt__fail(ctx, PT_ERR_IO, "%s", err), PT_ERR_IO);
    if (nopt && pt_dist_rank(d) == 0)
        pt_log(ctx, PT_LOG_INFO, "pt_safetensors_load: %d optimizer tensors (optim.*) of %s not used (parameters only)", nopt, path);
    return PT_OK;
}

#ifdef PT__CKPT_POSIX
PTDEF pt_status pt_ckpt_step_dir(const char *path, char *out, size_t outlen) {
    char p[1100], *txt, *end;
    struct stat sb;
    size_t len = 0;
    int64_t *v;
    int n;
    if (!path || !out || strlen(path) > 900) return PT_ERR_ARG;
    snprintf(p, sizeof p, "%s/manifest", path);
    if (stat(p, &sb) == 0) {
        snprintf(out, outlen, "%s", path);
        return PT_OK;
    }
    snprintf(p, sizeof p, "%s/latest", path);
    if ((txt = pt__ck_slurp(p, &len)) != NULL) {
        long long k = strncmp(txt, "step_", 5) ? -1 : strtoll(txt + 5, &end, 10);
        PT_FREE(txt);
        snprintf(p, sizeof p, "%s/step_%09lld/manifest", path, k);
        if (k >= 0 && stat(p, &sb) == 0) {
            snprintf(out, outlen, "%s/step_%09lld", path, k);
            return PT_OK;
        }
    }
    v = pt__ck_list(path, &n);
    if (v && n > 0) snprintf(out, outlen, "%s/step_%09lld", path, (long long)v[0]);
    PT_FREE(v);
    if (n > 0) return PT_OK;
    snprintf(out, outlen, "%s: no checkpoint (no manifest, no latest, no step_* directory)", path);
    return PT_ERR_IO;
}

PTDEF void pt_ckpt_info_free(pt_ckpt_info *info) {
    if (!info) return;
    PT_FREE(info->files);
    PT_FREE(info->tensors);
    memset(info, 0, sizeof *info);
}

/* the model record of dir's manifest (read and checked before) into cfg; 0 if there is none */
static int pt__ck_man_model(const char *dir, pt_gpt_config *cfg) {
    char path[1100], *txt, *line, b[64];
    size_t len = 0;
    int ok = 0;
    snprintf(path, sizeof path, "%s/manifest", dir);
    if (!(txt = pt__ck_slurp(path, &len))) return 0;
    for (line = txt; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
        if (!strncmp(line, "model ", 6)) {
            char *nl = strchr(line, '\n');
            if (nl) *nl = 0;
            memset(cfg, 0, sizeof *cfg);
            ok = pt__ck_int(line, "vocab", &cfg->vocab) && pt__ck_int(line, "vocab_padded", &cfg->vocab_padded) &&
                 pt__ck_int(line, "max_seq", &cfg->max_seq) && pt__ck_int(line, "layers", &cfg->layers) && pt__ck_int(line, "width", &cfg->width) &&
                 pt__ck_int(line, "heads", &cfg->heads) && pt__ck_int(line, "untied", &cfg->untied) && pt__ck_field(line, "dropout", b, sizeof b);
            if (ok) cfg->dropout = (float)strtod(b, NULL);
            break;
        }
    PT_FREE(txt);
    return ok;
}

PTDEF pt_status pt_ckpt_info_read(const char *path, pt_ckpt_info *info, char *err, size_t errlen) {
    char dir[1024];
    pt__ck_man m;
    int i, j, k, r;
    if (!info) return PT_ERR_ARG;
    memset(info, 0, sizeof *info);
    if (pt_ckpt_step_dir(path, dir, sizeof dir) != PT_OK) {
        pt__msg(err, errlen, "%s", path ? dir : "pt_ckpt_info_read: no path");
        return path ? PT_ERR_IO : PT_ERR_ARG;
    }
    if (!pt__ck_man_read(dir, &m, err, errlen)) return PT_ERR_FORMAT;
    info->step = m.step, info->dp = m.dp, info->tp = m.tp, info->pp = m.pp, info->world = m.world;
    info->has_model = pt__ck_man_model(dir, &info->model);
    info->optim_kind = m.has_optim ? m.optim_kind : -1;
    info->optim_steps = m.optim_steps;
    info->files = (pt_ckpt_file_info *)PT_MALLOC((size_t)m.world * sizeof *info->files);
    info->tensors = (pt_ckpt_tensor_info *)PT_MALLOC((size_t)PT__MAX(m.nt, 1) * sizeof *info->tensors);
    if (!info->files || !info->tensors) {
        pt__ck_man_free(&m);
        pt_ckpt_info_free(info);
        pt__msg(err, errlen, "pt_ckpt_info_read: out of memory");
        return PT_ERR_OOM;
    }
    for (r = 0; r < m.world; r++) {
        memcpy(info->files[r].name, m.files[r].name, sizeof info->files[r].name);
        info->files[r].bytes = m.files[r].bytes, info->files[r].crc32c = m.files[r].crc;
    }
    info->nfiles = m.world;
    for (k = 0; k < 3; k++)
        for (j = 0; j < m.nt; j++) {
            const pt__ck_tensor *t = &m.t[j];
            pt_ckpt_tensor_info *ti;
            if (t->kind != k) continue;
            for (i = 0; i < info->ntensors && (info->tensors[i].kind != k || strcmp(info->tensors[i].name, t->name)); i++) {}
            ti = &info->tensors[i];
            if (i == info->ntensors) {
                memset(ti, 0, sizeof *ti);
                memcpy(ti->name, t->name, sizeof ti->name);
                ti->kind = k, ti->ndim = t->ndim;
                memcpy(ti->shape, t->shape, sizeof ti->shape);
                info->ntensors++;
            }
            ti->pieces++, ti->bytes += t->bytes;
        }
    info->nstate = m.ns;
    for (j = 0; j < m.ns; j++) info->state_bytes += m.s[j].bytes;
    pt__ck_man_free(&m);
    return PT_OK;
}

/* global tensor (name, kind) of the checkpoint in dir (manifest m) into out[n] */
static int pt__ck_assemble(const char *dir, const pt__ck_man *m, const char *name, int kind, float *out, int64_t n, char *err, size_t errlen) {
    unsigned char *got = (unsigned char *)PT_MALLOC((size_t)PT__MAX(n, 1));
    float *buf = NULL;
    int64_t cap = 0, have = 0, i;
    int j, d, ok = got != NULL, found = 0;
    if (!ok) pt__msg(err, errlen, "%s: out of memory for '%s'", dir, name);
    else memset(got, 0, (size_t)PT__MAX(n, 1));
    for (j = 0; j < m->nt && ok; j++) {
        const pt__ck_tensor *t = &m->t[j];
        pt_spec sp;
        int64_t numel = 1, local;
        if (t->kind != kind || strcmp(t->name, name)) continue;
        found = 1;
        memset(&sp, 0, sizeof sp);
        sp.ndim = t->ndim, sp.split_dim = t->split_dim, sp.split_parts = t->split_parts, sp.split_index = t->split_index;
        sp.split_groups = t->split_groups;
        for (d = 0; d < t->ndim; d++) numel *= (sp.global_shape[d] = t->shape[d]);
        local = sp.split_dim >= 0 && sp.split_parts > 0 ? numel / sp.split_parts : numel;
        if (numel != n || t->hi > local || (sp.split_dim >= 0 && pt_spec_global_index(&sp, 0) < 0)) {
            pt__msg(err, errlen, "%s/manifest: a piece of '%s' (%s) does not fit its global shape of %lld elements (range [%lld, %lld), split dim %d parts %d)",
                    dir, name, pt__ck_kind_names[kind], (long long)n, (long long)t->lo, (long long)t->hi, t->split_dim, t->split_parts);
            ok = 0;
            break;
        }
        if (t->hi - t->lo > cap) {
            float *nb = (float *)PT_REALLOC(buf, (size_t)(t->hi - t->lo) * 4);
            if (!nb) {
                pt__msg(err, errlen, "%s: out of memory for '%s'", dir, name);
                ok = 0;
                break;
            }
            buf = nb, cap = t->hi - t->lo;
        }
        if (!(ok = pt__ck_read_piece(dir, m, t->off, t->bytes, t->crc, t->rank, buf, err, errlen))) break;
        for (i = 0; i < t->hi - t->lo; i++) {
            int64_t gi = sp.split_dim >= 0 ? pt_spec_global_index(&sp, t->lo + i) : t->lo + i;
            if (!got[gi]) got[gi] = 1, have++, out[gi] = buf[i]; /* a tied copy: the first piece */
        }
    }
    if (ok && have != n) {
        pt__msg(err, errlen, "%s: the checkpoint holds %lld of the %lld elements of '%s' (%s)%s", dir, (long long)have, (long long)n, name,
                pt__ck_kind_names[kind], found ? "" : ": no such tensor");
        ok = 0;
    }
    PT_FREE(got);
    PT_FREE(buf);
    return ok;
}

PTDEF pt_status pt_ckpt_tensor_read(const char *step_dir, const char *name, int kind, float *out, int64_t n, char *err, size_t errlen) {
    pt__ck_man m;
    int ok;
    if (!step_dir || !name || !out || kind < 0 || kind > 2) {
        pt__msg(err, errlen, "pt_ckpt_tensor_read: need a directory, a name, a kind 0..2 and an output");
        return PT_ERR_ARG;
    }
    if (!pt__ck_man_read(step_dir, &m, err, errlen)) return PT_ERR_FORMAT;
    ok = pt__ck_assemble(step_dir, &m, name, kind, out, n, err, errlen);
    pt__ck_man_free(&m);
    return ok ? PT_OK : PT_ERR_FORMAT;
}

PTDEF pt_status pt_ckpt_export(const char *step_dir, const char *out_path, const pt_ckpt_export_opts *opts, char *err, size_t errlen) {
    static const char *const prefix[3] = {"", "optim.m.", "optim.v."};
    pt_ckpt_info info;
    pt__ck_man m;
    pt__sb h;
    char tmp[1100], name[128], dir[1024];
    float *buf = NULL;
    uint16_t *h16 = NULL;
    int64_t off = 0, cap = 0, n, e;
    int i, d, fd = -1, ok, bf16 = opts && opts->bf16, es = bf16 ? 2 : 4;
    pt_status st;
    if (!step_dir || !out_path || strlen(out_path) > 1000) {
        pt__msg(err, errlen, "pt_ckpt_export: need a checkpoint directory and an output path (at most 1000 characters)");
        return PT_ERR_ARG;
    }
    if (pt_ckpt_step_dir(step_dir, dir, sizeof dir) != PT_OK) {
        pt__msg(err, errlen, "%s", dir);
        return PT_ERR_IO;
    }
    if ((st = pt_ckpt_info_read(dir, &info, err, errlen)) != PT_OK) return st;
    if (!pt__ck_man_read(dir, &m, err, errlen)) {
        pt_ckpt_info_free(&info);
        return PT_ERR_FORMAT;
    }
    memset(&h, 0, sizeof h);
    pt__sb_add(&h, "{\"__metadata__\":{\"format\":\"pt\",\"step\":\"%lld\",\"layout\":\"dp=%d tp=%d pp=%d\"", (long long)info.step, info.dp,
                  info.tp, info.pp);
    for (i = 0; info.has_model && !info.model.vocab_padded && i < info.ntensors; i++) /* 0 = the default: the rows wte has */
        if (!info.tensors[i].kind && !strcmp(info.tensors[i].name, "wte")) info.model.vocab_padded = (int32_t)info.tensors[i].shape[0];
    if (info.has_model)
        pt__sb_add(&h, ",\"vocab\":\"%d\",\"vocab_padded\":\"%d\",\"max_seq\":\"%d\",\"layers\":\"%d\",\"width\":\"%d\",\"heads\":\"%d\","
                          "\"dropout\":\"%.9g\",\"untied\":\"%d\"",
                      info.model.vocab, info.model.vocab_padded, info.model.max_seq, info.model.layers, info.model.width, info.model.heads,
                      (double)info.model.dropout, info.model.untied);
    if (info.optim_kind >= 0)
        pt__sb_add(&h, ",\"optimizer\":\"%s\",\"optimizer_steps\":\"%lld\"", info.optim_kind == PT_OPTIM_ADAMW ? "adamw" : "sgd",
                      (long long)info.optim_steps);
    pt__sb_add(&h, "}");
    for (i = 0; i < info.ntensors; i++) {
        const pt_ckpt_tensor_info *t = &info.tensors[i];
        if (t->kind && !(opts && opts->moments)) continue;
        for (n = 1, d = 0; d < t->ndim; d++) n *= t->shape[d];
        snprintf(name, sizeof name, "%s%s", prefix[t->kind], t->name);
        pt__sb_add(&h, ",");
        pt__sb_json_str(&h, name);
        pt__sb_add(&h, ":{\"dtype\":\"%s\",\"shape\":[", bf16 ? "BF16" : "F32");
        for (d = 0; d < t->ndim; d++) pt__sb_add(&h, d ? ",%lld" : "%lld", (long long)t->shape[d]);
        pt__sb_add(&h, "],\"data_offsets\":[%lld,%lld]}", (long long)off, (long long)(off + n * es));
        off += n * es;
    }
    pt__sb_add(&h, "}");
    while (!h.oom && h.n % 8) pt__sb_add(&h, " ");
    ok = !h.oom;
    if (!ok) pt__msg(err, errlen, "pt_ckpt_export: out of memory for the header");
    snprintf(tmp, sizeof tmp, "%s.tmp", out_path);
    if (ok && (fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644)) < 0) {
        pt__msg(err, errlen, "%s: cannot create", tmp);
        ok = 0;
    }
    if (ok) {
        unsigned char b8[8];
        for (d = 0; d < 8; d++) b8[d] = (unsigned char)((uint64_t)h.n >> (8 * d));
        ok = pt__ck_write_fd(fd, b8, 8) && pt__ck_write_fd(fd, h.s, h.n);
        if (!ok) pt__msg(err, errlen, "%s: write failed (disk full?)", tmp);
    }
    for (i = 0; ok && i < info.ntensors; i++) {
        const pt_ckpt_tensor_info *t = &info.tensors[i];
        if (t->kind && !(opts && opts->moments)) continue;
        for (n = 1, d = 0; d < t->ndim; d++) n *= t->shape[d];
        if (n > cap) {
            float *nb = (float *)PT_REALLOC(buf, (size_t)n * 4);
            uint16_t *nh = nb ? (uint16_t *)PT_REALLOC(h16, (size_t)n * 2) : NULL;
            if (nb) buf = nb;
            if (nh) h16 = nh, cap = n;
            if (!nb || !nh) {
                pt__msg(err, errlen, "pt_ckpt_export: out of memory for '%s'", t->name);
                ok = 0;
                break;
            }
        }
        if (!(ok = pt__ck_assemble(dir, &m, t->name, t->kind, buf, n, err, errlen))) break;
        if (bf16)
            for (e = 0; e < n; e++) h16[e] = pt__dp_bf16(buf[e]);
        if (!(ok = pt__ck_write_fd(fd, bf16 ? (void *)h16 : (void *)buf, (size_t)(n * es)))) pt__msg(err, errlen, "%s: write failed (disk full?)", tmp);
    }
    if (fd >= 0) {
        if (ok && fsync(fd) != 0) ok = 0, pt__msg(err, errlen, "%s: fsync failed", tmp);
        if (close(fd) != 0 && ok) ok = 0, pt__msg(err, errlen, "%s: close failed", tmp);
        if (ok && rename(tmp, out_path) != 0) ok = 0, pt__msg(err, errlen, "%s: cannot rename to %s", tmp, out_path);
        if (!ok) unlink(tmp);
    }
    PT_FREE(buf);
    PT_FREE(h16);
    PT_FREE(h.s);
    pt__ck_man_free(&m);
    pt_ckpt_info_free(&info);
    return ok ? PT_OK : PT_ERR_IO;
}
#else /* not POSIX */
PTDEF pt_status pt_ckpt_step_dir(const char *path, char *out, size_t outlen) {
    (void)path;
    pt__msg(out, outlen, "pt_ckpt_step_dir: checkpoints need a POSIX file system");
    return PT_ERR_IO;
}
PTDEF pt_status pt_ckpt_info_read(const char *path, pt_ckpt_info *info, char *err, size_t errlen) {
    (void)path;
    if (info) memset(info, 0, sizeof *info);
    pt__msg(err, errlen, "pt_ckpt_info_read: checkpoints need a POSIX file system");
    return PT_ERR_IO;
}
PTDEF void pt_ckpt_info_free(pt_ckpt_info *info) { (void)info; }
PTDEF pt_status pt_ckpt_tensor_read(const char *step_dir, const char *name, int kind, float *out, int64_t n, char *err, size_t errlen) {
    (void)step_dir, (void)name, (void)kind, (void)out, (void)n;
    pt__msg(err, errlen, "pt_ckpt_tensor_read: checkpoints need a POSIX file system");
    return PT_ERR_IO;
}
PTDEF pt_status pt_ckpt_export(const char *step_dir, const char *out_path, const pt_ckpt_export_opts *opts, char *err, size_t errlen) {
    (void)step_dir, (void)out_path, (void)opts;
    pt__msg(err, errlen, "pt_ckpt_export: checkpoints need a POSIX file system");
    return PT_ERR_IO;
}
#endif /* PT__CKPT_POSIX */

// >>monitor  per-step metrics aggregated over the ranks, the JSON-lines log, the progress line
/* Owns: pt_monitor (one allgather of a fixed vector per step), the log file, the progress line
   Invariants: every rank gets the same aggregate; rank 0 writes
   Entry points: pt_monitor_new pt_monitor_step_end pt_monitor_event pt_monitor_ckpt_save
   pt_monitor_free */
/* =================================================================================================
   per-step metrics, aggregated over the world, and the JSON-lines log
   =================================================================================================
   Each rank measures its step from counters: pt_time for the step, the grid's collective totals
   (pt__coll_tally / pt__coll_wait in dist) for bytes per operation and the blocked time, the
   loader's wait, the pipeline's busy time, pt_mem and getrusage for memory. pt_monitor_step_end
   allgathers PT__MON_NV doubles per rank over the world (through the collective records), then
   every rank computes the same aggregate and rank 0 writes it; events of other ranks follow in one
   MPI_Gatherv when some rank has any. The monitor's own collectives fall between two steps'
   windows, so they are not in the numbers. */
#include <errno.h>
#if defined(__unix__) || defined(__APPLE__)
#include <sys/resource.h>
#define PT__MON_POSIX 1
#endif

enum { /* the per-rank vector of pt_monitor_step_end */
    PT__MV_STEP = 0, PT__MV_COMM, PT__MV_BUBBLE, PT__MV_DATA, PT__MV_CKPT, PT__MV_EVAL, PT__MV_LOSS, PT__MV_GNORM, PT__MV_LR,
    PT__MV_TOKENS, PT__MV_VAL, PT__MV_MEM, PT__MV_RSS, PT__MV_EVBYTES, PT__MV_PARAMS, PT__MV_GRADS, PT__MV_OPTIM,
    PT__MV_ACT, PT__MV_WORK, PT__MV_BYTES, PT__MV_SECS = PT__MV_BYTES + PT_COLL_OP_COUNT,
    PT__MON_NV = PT__MV_SECS + PT_COLL_OP_COUNT
};
#define PT__MON_EV_MAX (1 << 20) /* bytes of events a rank other than 0 keeps for the next step */


struct pt_monitor {
    pt_ctx *ctx;
    const pt_dist *d;
    pt_monitor_desc desc;
    FILE *f;
    int rank, world, progress, printed;
    double t_open, t_begin;          /* pt_time at pt_monitor_new, at the start of the step in progress */
    int64_t step, done;              /* number of the step in progress; steps ended */
    double add[PT_MON_TIMES];        /* pt_monitor_add_time */
    double comm_excl;                /* blocked time inside pt_monitor_ckpt_save (counted as checkpoint) */
    double val;                      /* NAN = none this step */
    pt_coll_totals c0;               /* the grid's totals at the step's start */
    double wait0;                    /* the loader's wait at the step's start */
    double flops_per_token, peak_flops, t_sum; /* t_sum: seconds of the steps ended (ETA) */
    char peak_source[160], fpt_source[160];
    pt__sb line, ev;            /* the line being written; events held for rank 0 (other ranks) */
    int64_t ev_dropped;
    double *all;                     /* [world * PT__MON_NV] */
    double *work;                    /* [world] */
    pt_monitor_metrics last, mine;
};


PTDEF const char *pt_coll_op_name(int op) { return pt__coll_op_name(op); }

PTDEF pt_coll_totals pt_dist_coll_totals(const pt_dist *d) {
    pt_coll_totals t;
    memset(&t, 0, sizeof t);
    if (!d) return t;
    pt__coll_lock(d);
    memcpy(t.bytes, d->mon_bytes, sizeof t.bytes);
    memcpy(t.calls, d->mon_calls, sizeof t.calls);
    memcpy(t.seconds, d->mon_s, sizeof t.seconds);
    t.blocked_s = d->mon_blocked_s, t.blocked_p2p_s = d->mon_blocked_p2p_s;
    pt__coll_unlock(d);
    return t;
}

PTDEF double pt_gpt_flops_per_token(const pt_gpt_config *cfg, int64_t seq) {
    return cfg && seq > 0 ? pt_gpt_flops(cfg, 1, seq) / (double)seq : 0.0;
}

PTDEF void pt_rss(int64_t *current, int64_t *peak) {
    int64_t cur = 0, pk = 0;
#ifdef PT__MON_POSIX
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0)
#ifdef __APPLE__
        pk = (int64_t)ru.ru_maxrss; /* bytes */
#else
        pk = (int64_t)ru.ru_maxrss * 1024; /* kilobytes */
#endif
#endif
#ifdef __linux__
    if (current) {
        FILE *f = fopen("/proc/self/statm", "r");
        long long size = 0, res = 0;
        if (f) {
            if (fscanf(f, "%lld %lld", &size, &res) == 2) cur = (int64_t)res * (int64_t)sysconf(_SC_PAGESIZE);
            fclose(f);
        }
    }
#endif
    if (current) *current = cur;
    if (peak) *peak = pk;
}

/* a JSON number, null when not finite */
static void pt__mon_num(pt__sb *b, double v) {
    if (isfinite(v)) pt__sb_add(b, "%.9g", v);
    else pt__sb_add(b, "null");
}
/* 1 if s is entirely a JSON-compatible number */
static int pt__mon_is_num(const char *s) {
    char *e;
    if (!s || !*s || *s == '+' || *s == '.' || (*s == '-' && (s[1] < '0' || s[1] > '9'))) return 0;
    if (*s == '0' && s[1] >= '0' && s[1] <= '9') return 0;
    strtod(s, &e);
    return *e == 0 && !strpbrk(s, "xXnNiI");
}
/* rank 0: writes buffer b as a line of the log */
static void pt__mon_write(pt_monitor *m, const pt__sb *b) {
    if (!m->f || b->oom || !b->n) return;
    fwrite(b->s, 1, b->n, m->f);
    fflush(m->f);
}

/* seconds of one 2 n^3 f32 matmul through the context's backend, best of 3 after a warm-up */
static double pt__mon_calibrate(pt_ctx *ctx, int n) {
    pt_graph *g = pt_graph_new(ctx), *gc = pt_graph_new(ctx);
    float *h = (float *)PT_MALLOC(sizeof(float) * (size_t)n * (size_t)n);
    double best = 0;
    int i;
    if (g && gc && h) {
        pt_tensor *a, *b;
        pt_graph_set_grad(g, 0);
        pt_graph_set_grad(gc, 0);
        for (i = 0; i < n * n; i++) h[i] = (float)(i % 7) * 0.125f;
        a = pt_tensor_new(g, PT_F32, 2, n, n, 0, 0);
        b = pt_tensor_new(g, PT_F32, 2, n, n, 0, 0);
        if (a && b && pt_tensor_write(a, h) == PT_OK && pt_tensor_write(b, h) == PT_OK)
            for (i = -1; i < 3; i++) {
                double t0, t;
                pt_graph_reset(gc);
                pt_sync(ctx);
                t0 = pt_time();
                if (!pt_matmul(gc, a, b, 0, 0)) break;
                pt_sync(ctx);
                t = pt_time() - t0;
                if (i >= 0 && (best == 0 || t < best)) best = t;
            }
    }
    PT_FREE(h);
    if (gc) pt_graph_free(gc);
    if (g) pt_graph_free(g);
    return best > 0 ? 2.0 * n * (double)n * n / best : 0.0;
}

/* sums n doubles over the world (through the collective records); 0 on an MPI error */
static int pt__mon_sum(pt_monitor *m, double *x, int n) {
#ifdef PTRAIN_MPI
    if (m->d && m->world > 1) {
        uint64_t s = pt__coll_begin(m->d, PT_COLL_ALLREDUCE, PT_COMM_WORLD, n, PT_COLL_F64, -1);
        int rc = pt__coll_end(m->d, s, s ? MPI_Allreduce(MPI_IN_PLACE, x, n, MPI_DOUBLE, MPI_SUM, m->d->comm[PT_COMM_WORLD]) : PT__COLL_REFUSED);
        if (rc != MPI_SUCCESS) return pt__fail(m->ctx, PT_ERR_DEVICE, "pt_monitor: a sum over the world failed: %s", pt__coll_why(m->d, rc)), 0;
    }
#else
    (void)m, (void)x, (void)n;
#endif
    return 1;
}

/* the counters the next step's numbers start from */
static void pt__mon_mark(pt_monitor *m) {
    m->c0 = pt_dist_coll_totals(m->d);
    m->wait0 = m->desc.loader ? pt_loader_stats_get(m->desc.loader).wait_s : 0.0;
    memset(m->add, 0, sizeof m->add);
    m->comm_excl = 0.0;
    m->val = NAN;
    m->t_begin = pt_time();
}

PTDEF pt_monitor *pt_monitor_new(pt_ctx *ctx, const pt_dist *d, const pt_monitor_desc *desc) {
    pt_monitor *m;
    char msg[PT__DIST_MSG];
    const char *env;
    int ok = 1, i;
    double v[2];
    if (!ctx) return NULL;
    if (!(m = (pt_monitor *)PT_MALLOC(sizeof *m))) return (pt_monitor *)pt__fail(ctx, PT_ERR_OOM, "pt_monitor_new: out of memory");
    memset(m, 0, sizeof *m);
    m->ctx = ctx, m->d = d;
    if (desc) m->desc = *desc;
    m->rank = pt_dist_rank(d), m->world = pt_dist_size(d);
    m->step = m->desc.first_step;
    m->t_open = pt_time();
    msg[0] = 0;
    m->all = (double *)PT_MALLOC(sizeof(double) * (size_t)m->world * PT__MON_NV);
    m->work = (double *)PT_MALLOC(sizeof(double) * (size_t)m->world);
    if (!m->all || !m->work) ok = 0, pt__msg(msg, sizeof msg, "pt_monitor_new: out of memory");
    if (ok && m->rank == 0 && m->desc.log_path && !(m->f = fopen(m->desc.log_path, m->desc.append ? "a" : "w")))
        ok = 0, pt__msg(msg, sizeof msg, "pt_monitor_new: cannot open the log file '%s' for writing: %s", m->desc.log_path, strerror(errno));
    if (!pt_dist_agree_msg(d, ok, msg, sizeof msg)) {
        pt__fail(ctx, strstr(msg, "out of memory") ? PT_ERR_OOM : PT_ERR_IO, "%s", msg);
        pt_monitor_free(m);
        return NULL;
    }
    /* FLOPs per token, peak FLOP/s (the mean over ranks of what each rank measured) */
    m->flops_per_token = m->desc.flops_per_token;
    pt__msg(m->fpt_source, sizeof m->fpt_source, "given by the program");
    if (m->flops_per_token <= 0 && m->desc.model && m->desc.seq > 0) {
        m->flops_per_token = pt_gpt_flops_per_token(m->desc.model, m->desc.seq);
        pt__msg(m->fpt_source, sizeof m->fpt_source, "6*P + 12*L*T*C (P = matmul weights incl. the LM head, L layers, T = %lld, C width)",
                (long long)m->desc.seq);
    }
    env = getenv("PTRAIN_PEAK_FLOPS");
    v[0] = m->desc.peak_flops, v[1] = 0;
    if (v[0] > 0) pt__msg(m->peak_source, sizeof m->peak_source, "pt_monitor_desc.peak_flops");
    else if (env && *env && atof(env) > 0) v[0] = atof(env), pt__msg(m->peak_source, sizeof m->peak_source, "env PTRAIN_PEAK_FLOPS");
    else {
        v[0] = pt__mon_calibrate(ctx, 384), v[1] = 1;
        pt__msg(m->peak_source, sizeof m->peak_source, "measured: ptrain f32 matmul 384x384x384 (%s, %d threads), best of 3, mean over %d ranks",
                pt_backend_name(ctx), pt_threads(ctx), m->world);
    }
    if (!pt__mon_sum(m, v, 2)) {
        pt_monitor_free(m);
        return NULL;
    }
    m->peak_flops = v[0] / m->world;
    /* the progress line: rank 0 on an interactive terminal, not under mpirun (whose ranks may see a pty) */
    env = getenv("PTRAIN_PROGRESS");
    if (env && *env) m->progress = atoi(env) != 0;
    else if (m->desc.progress) m->progress = m->desc.progress > 0;
    else {
#ifdef PT__MON_POSIX
        m->progress = isatty(2) && m->world == 1 && !getenv("OMPI_COMM_WORLD_SIZE") && !getenv("PMI_SIZE") &&
                      !getenv("PMI_RANK") && !getenv("PMIX_RANK");
#endif
    }
    if (m->rank != 0) m->progress = 0;
    if (m->f) { /* the header */
        pt__sb *b = &m->line;
        char when[32];
        time_t now = time(NULL);
        struct tm *tm = gmtime(&now);
        pt_layout l = pt_dist_layout(d);
        const pt_gpt_config *c = m->desc.model;
        if (!d) l.dp = l.tp = l.pp = 1;
        if (!tm || !strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", tm)) pt__msg(when, sizeof when, "unknown");
        b->n = 0;
        pt__sb_add(b, "{\"event\":\"run_start\",\"time\":\"%s\",\"version\":\"%s\",\"config\":{", when, PTRAIN_VERSION_STRING);
        i = 0;
        if (c)
            pt__sb_add(b, "\"vocab\":%d,\"layers\":%d,\"width\":%d,\"heads\":%d,\"max_seq\":%d,\"seq\":%lld,\"params\":%lld", (int)c->vocab, (int)c->layers,
                        (int)c->width, (int)c->heads, (int)c->max_seq, (long long)m->desc.seq, (long long)pt_param_numel(ctx)), i = 1;
        for (; m->desc.config && m->desc.config[0] && m->desc.config[1]; m->desc.config += 2) {
            pt__sb_add(b, "%s", i++ ? "," : "");
            pt__sb_json_str(b, m->desc.config[0]);
            pt__sb_add(b, ":");
            if (pt__mon_is_num(m->desc.config[1])) pt__sb_add(b, "%s", m->desc.config[1]);
            else pt__sb_json_str(b, m->desc.config[1]);
        }
        pt__sb_add(b, "},\"world\":%d,\"layout\":{\"dp\":%d,\"tp\":%d,\"pp\":%d},\"backend\":\"%s\",\"threads\":%d,\"first_step\":%lld,\"total_steps\":%lld,",
                    m->world, (int)l.dp, (int)l.tp, (int)l.pp, pt_backend_name(ctx), pt_threads(ctx), (long long)m->desc.first_step,
                    (long long)m->desc.total_steps);
        pt__sb_add(b, "\"flops_per_token\":");
        pt__mon_num(b, m->flops_per_token > 0 ? m->flops_per_token : NAN);
        pt__sb_add(b, ",\"flops_per_token_formula\":");
        pt__sb_json_str(b, m->flops_per_token > 0 ? m->fpt_source : "none (no MFU)");
        pt__sb_add(b, ",\"peak_flops\":");
        pt__mon_num(b, m->peak_flops);
        pt__sb_add(b, ",\"peak_source\":");
        pt__sb_json_str(b, m->peak_source);
        pt__sb_add(b, ",\"mfu_formula\":\"mfu = flops_per_token * tokens_per_s / (peak_flops * world); peak_flops per rank\"}\n");
        pt__mon_write(m, b);
    }
    m->desc.config = NULL; /* not kept: the caller's strings may go */
    m->val = NAN;
    pt__mon_mark(m);
    return m;
}

PTDEF void pt_monitor_step_begin(pt_monitor *m) {
    if (m) pt__mon_mark(m);
}
PTDEF void pt_monitor_add_time(pt_monitor *m, int kind, double seconds) {
    if (m && kind >= 0 && kind < PT_MON_TIMES && isfinite(seconds)) m->add[kind] += seconds;
}
PTDEF void pt_monitor_val_loss(pt_monitor *m, float val_loss) {
    if (m) m->val = val_loss;
}

/* [h:]mm:ss */
static void pt__mon_hms(char *buf, size_t n, double s) {
    long t = s > 0 && s < 1e9 ? (long)(s + 0.5) : 0;
    if (t >= 3600) snprintf(buf, n, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else snprintf(buf, n, "%ld:%02ld", t / 60, t % 60);
}
/* rank 0: the progress line or a plain line */
static void pt__mon_progress(pt_monitor *m) {
    const pt_monitor_metrics *a = &m->last;
    char eta[32], done[64];
    double left;
    int plain = !m->progress && m->desc.print_every > 0 && m->done % m->desc.print_every == 0;
    if (!m->progress && !plain) return;
    left = m->desc.total_steps > 0 ? (double)(m->desc.total_steps - (a->step + 1)) * (m->t_sum / (double)m->done) : -1;
    if (left >= 0) pt__mon_hms(eta, sizeof eta, left);
    else snprintf(eta, sizeof eta, "?");
    if (m->desc.total_steps > 0) snprintf(done, sizeof done, "%lld/%lld", (long long)a->step + 1, (long long)m->desc.total_steps);
    else snprintf(done, sizeof done, "%lld", (long long)a->step + 1);
    fprintf(stderr, "%sstep %s | loss %.4f | %.0f tok/s", m->progress ? "\r" : "", done, a->loss, a->tokens_per_s);
    if (isfinite(a->mfu)) fprintf(stderr, " | mfu %.1f%%", 100.0 * a->mfu);
    fprintf(stderr, " | %.0f ms (comm %.0f%%, bubble %.0f%%, data %.0f%%) | ETA %s%s", 1e3 * a->t_step,
            a->t_step > 0 ? 100.0 * a->t_comm / a->t_step : 0.0, a->t_step > 0 ? 100.0 * a->t_bubble / a->t_step : 0.0,
            a->t_step > 0 ? 100.0 * a->t_data / a->t_step : 0.0, eta, m->progress ? "   " : "\n");
    fflush(stderr);
    m->printed = m->progress;
}

/* the aggregate of the gathered vectors (the same on every rank) */
static void pt__mon_aggregate(pt_monitor *m, pt_monitor_metrics *a) {
    int r, k, nval = 0, world = m->world;
    double vsum = 0, med;
    memset(a, 0, sizeof *a);
    a->step = m->step;
    a->loss = 0, a->grad_norm = NAN, a->lr = NAN, a->straggler_rank = 0;
    for (r = 0; r < world; r++) {
        const double *v = m->all + (size_t)r * PT__MON_NV;
        a->t_step = PT__MAX(a->t_step, v[PT__MV_STEP]);
        a->t_comm += v[PT__MV_COMM] / world, a->t_bubble += v[PT__MV_BUBBLE] / world;
        a->t_data += v[PT__MV_DATA] / world, a->t_ckpt += v[PT__MV_CKPT] / world, a->t_eval += v[PT__MV_EVAL] / world;
        a->loss += v[PT__MV_LOSS] / world;
        a->grad_norm = fmax(a->grad_norm, v[PT__MV_GNORM]), a->lr = fmax(a->lr, v[PT__MV_LR]);
        a->tokens = PT__MAX(a->tokens, (int64_t)v[PT__MV_TOKENS]);
        if (isfinite(v[PT__MV_VAL])) vsum += v[PT__MV_VAL], nval++;
        a->mem_peak_bytes = PT__MAX(a->mem_peak_bytes, (int64_t)v[PT__MV_MEM]);
        a->rss_peak_bytes = PT__MAX(a->rss_peak_bytes, (int64_t)v[PT__MV_RSS]);
        for (k = 0; k < PT_COLL_OP_COUNT; k++) {
            a->coll_bytes[k] = PT__MAX(a->coll_bytes[k], (int64_t)v[PT__MV_BYTES + k]);
            a->coll_s[k] = PT__MAX(a->coll_s[k], v[PT__MV_SECS + k]);
        }
        m->work[r] = v[PT__MV_STEP] - v[PT__MV_COMM] - v[PT__MV_BUBBLE]; /* time not spent waiting for others */
        if (m->work[r] > m->work[a->straggler_rank]) a->straggler_rank = r;
    }
    a->val_loss = nval ? vsum / nval : NAN;
    a->t_compute = a->t_step - a->t_comm - a->t_bubble - a->t_data - a->t_ckpt - a->t_eval;
    a->tokens_per_s = a->t_step - a->t_eval > 0 ? (double)a->tokens / (a->t_step - a->t_eval) : 0.0;
    a->mfu = m->flops_per_token > 0 && m->peak_flops > 0 ? m->flops_per_token * a->tokens_per_s / (m->peak_flops * world) : NAN;
    /* the straggler's lead over the median rank (the lower median: with two ranks, the other one) */
    med = m->work[a->straggler_rank];
    for (r = 0; r < world; r++) { /* the (world-1)/2-th smallest */
        int below = 0, equal = 0, q;
        for (q = 0; q < world; q++) below += m->work[q] < m->work[r], equal += m->work[q] == m->work[r];
        if (below <= (world - 1) / 2 && (world - 1) / 2 < below + equal) med = m->work[r];
    }
    a->straggler_s = m->work[a->straggler_rank] - med;
}

/* rank 0: the step's JSON line */
static void pt__mon_line(pt_monitor *m) {
    const pt_monitor_metrics *a = &m->last;
    pt__sb *b = &m->line;
    int r, k, first = 1;
    b->n = 0;
    pt__sb_add(b, "{\"step\":%lld,\"loss\":", (long long)a->step);
    pt__mon_num(b, a->loss);
    if (isfinite(a->val_loss)) pt__sb_add(b, ",\"val_loss\":%.9g", a->val_loss);
    pt__sb_add(b, ",\"grad_norm\":");
    pt__mon_num(b, a->grad_norm);
    pt__sb_add(b, ",\"lr\":");
    pt__mon_num(b, a->lr);
    pt__sb_add(b, ",\"tokens\":%lld,\"tokens_per_s\":", (long long)a->tokens);
    pt__mon_num(b, a->tokens_per_s);
    pt__sb_add(b, ",\"mfu\":");
    pt__mon_num(b, a->mfu);
    pt__sb_add(b, ",\"t_step\":%.9g,\"t_compute\":%.9g,\"t_comm\":%.9g,\"t_bubble\":%.9g,\"t_data\":%.9g,\"t_ckpt\":%.9g", a->t_step, a->t_compute,
                a->t_comm, a->t_bubble, a->t_data, a->t_ckpt);
    if (a->t_eval > 0) pt__sb_add(b, ",\"t_eval\":%.9g", a->t_eval);
    pt__sb_add(b, ",\"mem_peak_bytes\":%lld,\"mem_rank_bytes\":[", (long long)a->mem_peak_bytes);
    for (r = 0; r < m->world; r++) pt__sb_add(b, "%s%.0f", r ? "," : "", m->all[(size_t)r * PT__MON_NV + PT__MV_MEM]);
    pt__sb_add(b, "],\"rss_rank_bytes\":[");
    for (r = 0; r < m->world; r++) pt__sb_add(b, "%s%.0f", r ? "," : "", m->all[(size_t)r * PT__MON_NV + PT__MV_RSS]);
    pt__sb_add(b, "],\"mem\":{");
    {
        static const char *const kinds[5] = {"params", "grads", "optim", "activations", "workspace"};
        for (k = 0; k < 5; k++) {
            double mx = 0;
            for (r = 0; r < m->world; r++) mx = PT__MAX(mx, m->all[(size_t)r * PT__MON_NV + PT__MV_PARAMS + k]);
            pt__sb_add(b, "%s\"%s\":%.0f", k ? "," : "", kinds[k], mx);
        }
    }
    pt__sb_add(b, "},\"t_wait_rank\":[");
    for (r = 0; r < m->world; r++) pt__sb_add(b, "%s%.6g", r ? "," : "", m->all[(size_t)r * PT__MON_NV + PT__MV_STEP] - m->work[r]);
    pt__sb_add(b, "],\"coll\":{");
    for (k = 1; k < PT_COLL_OP_COUNT; k++) {
        if (!a->coll_bytes[k] && a->coll_s[k] <= 0) continue;
        pt__sb_add(b, "%s\"%s\":{\"bytes\":%lld,\"s\":%.6g,\"gbs\":", first ? "" : ",", pt__coll_op_name(k), (long long)a->coll_bytes[k], a->coll_s[k]);
        pt__mon_num(b, a->coll_s[k] > 0 ? (double)a->coll_bytes[k] / a->coll_s[k] * 1e-9 : NAN);
        pt__sb_add(b, "}");
        first = 0;
    }
    pt__sb_add(b, "},\"straggler_rank\":%d,\"straggler_s\":%.6g}\n", (int)a->straggler_rank, a->straggler_s);
    pt__mon_write(m, b);
}

PTDEF pt_status pt_monitor_step_end(pt_monitor *m, const pt_monitor_step *s) {
    double *v, tnow;
    pt_coll_totals c;
    pt_mem_stats ms;
    int64_t rss = 0;
    int k;
    if (!m) return PT_ERR_ARG;
    tnow = pt_time();
    v = m->all + (size_t)m->rank * PT__MON_NV; /* this rank's slot: the in-place allgather */
    c = pt_dist_coll_totals(m->d);
    v[PT__MV_STEP] = tnow - m->t_begin;
    v[PT__MV_BUBBLE] = m->add[PT_MON_BUBBLE];
    if (m->desc.pp) {
        pt_pp_stats st = pt_pp_stats_get(m->desc.pp);
        v[PT__MV_BUBBLE] += PT__MAX(0.0, st.step_s - st.busy_s);
    }
    v[PT__MV_COMM] = m->add[PT_MON_COMM] + (c.blocked_s - m->c0.blocked_s) - m->comm_excl;
    if (!m->desc.pp) v[PT__MV_COMM] += c.blocked_p2p_s - m->c0.blocked_p2p_s; /* with a pipeline, its waits are bubble */
    v[PT__MV_COMM] = PT__MAX(0.0, v[PT__MV_COMM]);
    v[PT__MV_DATA] = m->add[PT_MON_DATA] + (m->desc.loader ? pt_loader_stats_get(m->desc.loader).wait_s - m->wait0 : 0.0);
    v[PT__MV_CKPT] = m->add[PT_MON_CKPT];
    v[PT__MV_EVAL] = m->add[PT_MON_EVAL];
    v[PT__MV_LOSS] = s ? s->loss : NAN;
    v[PT__MV_GNORM] = s ? s->grad_norm : NAN;
    v[PT__MV_LR] = s ? s->lr : NAN;
    v[PT__MV_TOKENS] = s ? (double)s->tokens : 0.0;
    v[PT__MV_VAL] = m->val;
    ms = pt_mem(m->ctx);
    pt_rss(NULL, &rss);
    v[PT__MV_MEM] = (double)ms.peak_total, v[PT__MV_RSS] = (double)rss;
    v[PT__MV_PARAMS] = (double)ms.params, v[PT__MV_GRADS] = (double)ms.grads, v[PT__MV_OPTIM] = (double)ms.optim;
    v[PT__MV_ACT] = (double)ms.activations, v[PT__MV_WORK] = (double)ms.workspace;
    v[PT__MV_EVBYTES] = m->ev.oom ? 0.0 : (double)m->ev.n;
    for (k = 0; k < PT_COLL_OP_COUNT; k++) {
        v[PT__MV_BYTES + k] = (double)(c.bytes[k] - m->c0.bytes[k]);
        v[PT__MV_SECS + k] = c.seconds[k] - m->c0.seconds[k];
    }
    /* this rank's own numbers */
    {
        double keep[PT__MON_NV], *all = m->all;
        int world = m->world;
        memcpy(keep, v, sizeof keep);
        m->all = keep, m->world = 1;
        pt__mon_aggregate(m, &m->mine);
        m->all = all, m->world = world;
        m->mine.straggler_rank = -1, m->mine.straggler_s = 0;
        m->mine.mfu = m->flops_per_token > 0 && m->peak_flops > 0 ? m->flops_per_token * m->mine.tokens_per_s / (m->peak_flops * m->world) : NAN;
    }
#ifdef PTRAIN_MPI
    if (m->d && m->world > 1) {
        uint64_t sq = pt__coll_begin(m->d, PT_COLL_ALLGATHER, PT_COMM_WORLD, PT__MON_NV, PT_COLL_F64, -1);
        int rc = pt__coll_end(m->d, sq, sq ? MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, m->all, PT__MON_NV, MPI_DOUBLE, m->d->comm[PT_COMM_WORLD])
                                           : PT__COLL_REFUSED);
        if (rc != MPI_SUCCESS) return (pt_status)(pt__fail(m->ctx, PT_ERR_DEVICE, "pt_monitor_step_end: the allgather of the step's numbers failed: %s", pt__coll_why(m->d, rc)), PT_ERR_DEVICE);
    }
#endif
    pt__mon_aggregate(m, &m->last);
    /* events of the other ranks, in one gather to rank 0, written before the step's line */
#ifdef PTRAIN_MPI
    {
        int64_t evn = 0;
        for (k = 0; k < m->world; k++) evn += (int64_t)m->all[(size_t)k * PT__MON_NV + PT__MV_EVBYTES];
        if (evn > 0 && m->d && m->world > 1) {
            int *cnt = (int *)PT_MALLOC(sizeof(int) * 2 * (size_t)m->world), ok = 1, rc;
            char *all = m->rank == 0 ? (char *)PT_MALLOC((size_t)evn + 1) : NULL;
            uint64_t sq;
            if (!cnt || (m->rank == 0 && !all)) ok = 0;
            if (!pt_dist_agree(m->d, ok)) {
                PT_FREE(cnt), PT_FREE(all);
                return (pt_status)(pt__fail(m->ctx, PT_ERR_OOM, "pt_monitor_step_end: out of memory for %lld bytes of events", (long long)evn), PT_ERR_OOM);
            }
            for (k = 0; k < m->world; k++) cnt[k] = (int)m->all[(size_t)k * PT__MON_NV + PT__MV_EVBYTES], cnt[m->world + k] = k ? cnt[m->world + k - 1] + cnt[k - 1] : 0;
            sq = pt__coll_begin(m->d, PT_COLL_GATHER, PT_COMM_WORLD, evn, PT_COLL_CHAR, 0);
            rc = pt__coll_end(m->d, sq, sq ? MPI_Gatherv(m->ev.s, (int)(m->ev.oom ? 0 : m->ev.n), MPI_CHAR, all, cnt, cnt + m->world, MPI_CHAR, 0, m->d->comm[PT_COMM_WORLD])
                                           : PT__COLL_REFUSED);
            if (rc == MPI_SUCCESS && m->f && all) {
                fwrite(all, 1, (size_t)evn, m->f);
                fflush(m->f);
            }
            PT_FREE(cnt), PT_FREE(all);
            if (rc != MPI_SUCCESS) return (pt_status)(pt__fail(m->ctx, PT_ERR_DEVICE, "pt_monitor_step_end: the gather of events failed: %s", pt__coll_why(m->d, rc)), PT_ERR_DEVICE);
        }
    }
#endif
    m->ev.n = 0, m->ev.oom = 0;
    if (m->f) pt__mon_line(m);
    m->done++;
    m->t_sum += m->last.t_step;
    if (m->rank == 0) pt__mon_progress(m);
    m->step++;
    pt__mon_mark(m);
    return PT_OK;
}

PTDEF void pt_monitor_event(pt_monitor *m, const char *name, const char *fmt, ...) {
    pt__sb *b;
    const char *p = fmt;
    va_list ap;
    if (!m) return;
    b = m->rank == 0 ? &m->line : &m->ev;
    if (m->rank == 0) b->n = 0, b->oom = 0;
    else if (b->n > PT__MON_EV_MAX) {
        m->ev_dropped++;
        return;
    }
    pt__sb_add(b, "{\"event\":");
    pt__sb_json_str(b, name ? name : "?");
    pt__sb_add(b, ",\"step\":%lld,\"time_s\":%.6f", (long long)m->step, pt_time() - m->t_open);
    if (m->rank != 0) pt__sb_add(b, ",\"rank\":%d", m->rank);
    va_start(ap, fmt);
    while (p && *p) {
        const char *k, *e;
        while (*p == ' ') p++;
        if (!*p) break;
        k = p;
        while (*p && *p != '=' && *p != ' ') p++;
        pt__sb_add(b, ",\"%.*s\":", (int)(p - k), k);
        if (*p != '=') { /* a bare key: true */
            pt__sb_add(b, "true");
            continue;
        }
        p++;
        if (*p == '%' && p[1] != '%') { /* one printf conversion */
            char spec[32], conv;
            size_t n;
            int lng = 0, sz = 0;
            e = p + 1;
            while (*e && strchr("-+ #0123456789.", *e)) e++;
            while (*e == 'l' || *e == 'z') lng += *e == 'l', sz |= *e == 'z', e++;
            conv = *e;
            n = (size_t)(e - p + 1);
            if (!conv || n >= sizeof spec) break;
            memcpy(spec, p, n), spec[n] = 0;
            p = e + 1;
            if (conv == 's') pt__sb_json_str(b, va_arg(ap, const char *));
            else if (strchr("feEgG", conv)) {
                double x = va_arg(ap, double);
                if (isfinite(x)) pt__sb_add(b, spec, x);
                else pt__sb_add(b, "null");
            } else if (conv == 'd' || conv == 'i') {
                if (sz) pt__sb_add(b, "%lld", (long long)va_arg(ap, size_t));
                else if (lng >= 2) pt__sb_add(b, spec, va_arg(ap, long long));
                else if (lng == 1) pt__sb_add(b, spec, va_arg(ap, long));
                else pt__sb_add(b, spec, va_arg(ap, int));
            } else if (conv == 'u') {
                if (sz) pt__sb_add(b, spec, va_arg(ap, size_t));
                else if (lng >= 2) pt__sb_add(b, spec, va_arg(ap, unsigned long long));
                else if (lng == 1) pt__sb_add(b, spec, va_arg(ap, unsigned long));
                else pt__sb_add(b, spec, va_arg(ap, unsigned));
            } else {
                pt__sb_add(b, "null");
                break; /* an unsupported conversion: the arguments that follow cannot be read */
            }
            while (*p && *p != ' ') p++; /* text glued to a conversion is dropped */
        } else { /* literal text up to the next space */
            char lit[256];
            size_t n;
            e = p;
            while (*e && *e != ' ') e++;
            n = PT__MIN((size_t)(e - p), sizeof lit - 1);
            memcpy(lit, p, n), lit[n] = 0;
            p = e;
            if (pt__mon_is_num(lit)) pt__sb_add(b, "%s", lit);
            else pt__sb_json_str(b, lit);
        }
    }
    va_end(ap);
    pt__sb_add(b, "}\n");
    if (m->rank == 0) {
        if (m->printed) fputc('\n', stderr), m->printed = 0; /* keep the progress line apart */
        pt__mon_write(m, b);
    }
}

PTDEF pt_status pt_monitor_ckpt_save(pt_monitor *m, pt_optim *o, const char *dir, int64_t step, const pt_ckpt_opts *opts) {
    pt_coll_totals c0, c1;
    double t0, t;
    pt_status st;
    if (!m) return PT_ERR_ARG;
    c0 = pt_dist_coll_totals(m->d);
    t0 = pt_time();
    st = pt_ckpt_save(m->ctx, o, dir, step, opts);
    t = pt_time() - t0;
    c1 = pt_dist_coll_totals(m->d);
    m->add[PT_MON_CKPT] += t;
    m->comm_excl += (c1.blocked_s - c0.blocked_s) + (m->desc.pp ? 0.0 : c1.blocked_p2p_s - c0.blocked_p2p_s);
    pt_monitor_event(m, "ckpt_save", "dir=%s ckpt_step=%lld seconds=%.6f ok=%d", dir ? dir : "", (long long)(step >= 0 ? step : (o ? pt_optim_steps(o) : 0)), t,
                     st == PT_OK);
    return st;
}

PTDEF void pt_monitor_last(const pt_monitor *m, pt_monitor_metrics *all, pt_monitor_metrics *mine) {
    if (all) {
        if (m) *all = m->last;
        else memset(all, 0, sizeof *all);
    }
    if (mine) {
        if (m) *mine = m->mine;
        else memset(mine, 0, sizeof *mine);
    }
}
PTDEF int pt_monitor_progress_on(const pt_monitor *m) { return m ? m->progress : 0; }
PTDEF void pt_monitor_set_step(pt_monitor *m, int64_t step) {
    if (m) m->step = step;
}

PTDEF void pt_monitor_free(pt_monitor *m) {
    if (!m) return;
    if (m->f) {
        pt__sb *b = &m->line;
        if (m->printed) fputc('\n', stderr);
        b->n = 0, b->oom = 0;
        pt__sb_add(b, "{\"event\":\"run_end\",\"step\":%lld,\"time_s\":%.6f,\"steps\":%lld,\"step_s_total\":%.6f}\n", (long long)m->step, pt_time() - m->t_open,
                    (long long)m->done, m->t_sum);
        pt__mon_write(m, b);
        fclose(m->f);
    } else if (m->printed) {
        fputc('\n', stderr);
    }
    PT_FREE(m->line.s);
    PT_FREE(m->ev.s);
    PT_FREE(m->all);
    PT_FREE(m->work);
    PT_FREE(m);
}

// >>guard  health guard
/* Owns: pt_guard and its event log
   Invariants: the verdict is agreed over the grid
   Entry points: pt_guard_new pt_guard_check pt_guard_rollback pt_guard_replica_check */
/* =================================================================================================
   health guard: non-finite losses and gradients (and the rank they appeared on), loss and
   gradient-norm spikes by a z-score over a ring of accepted steps, the warn / skip / roll back
   policies, DP replica hashes. One MPI_Allgather of 4 doubles per rank and check: the loss, the
   gradient norm, flags (1 = local loss not finite, 2 = local gradient slab not finite, 4 = the norm
   given not finite) and the parameter hash when a replica check is due; every rank then decides
   the same from the same numbers. The registered state "guard" is a pt__guard_st followed by the
   ring (2 doubles per step: loss, norm; norm < 0 = not given).
   ================================================================================================= */
typedef struct pt__guard_st {
    int64_t window, fill, head, accepted, consecutive, rollbacks;
    double lr_scale;
} pt__guard_st;

#define PT__GUARD_INJ 8
struct pt_guard {
    pt_ctx *ctx;
    pt_guard_desc d;
    char *dir;
    pt__guard_st *st; /* the registered block: state, then the ring */
    double *ring;
    double *all;      /* 4 doubles per world rank: the gathered records */
    int rank, size;
    int64_t nev, checks, skips, last_step;
    pt_guard_event ev[PT_GUARD_EVENTS_KEPT];
    struct { int kind, rank, fired; int64_t step; } inj[PT__GUARD_INJ]; /* PTRAIN_GUARD_INJECT */
    int ninj, forced; /* forced: an injected gradient value this step (test the slab) */
};

static const char *const pt__guard_kind_names[PT_GUARD_EV_KINDS] = {"loss_nonfinite", "grad_nonfinite", "loss_spike", "grad_spike", "rollback",
                                                                    "replica_mismatch"};
PTDEF const char *pt_guard_event_name(int kind) { return kind >= 0 && kind < PT_GUARD_EV_KINDS ? pt__guard_kind_names[kind] : "?"; }
static int pt__guard_finite(double x) { return x == x && x - x == 0; }

static int pt__guard_parse_inject(pt_guard *g, const char *s) {
    static const char *const kinds[4] = {"nan", "inf", "spike", "flip"};
    while (s && *s) {
        char kind[8];
        long long step;
        int k, n = 0, rank = -1;
        if (g->ninj == PT__GUARD_INJ) return 0;
        if (sscanf(s, "%7[a-z]:%lld:%n", kind, &step, &n) != 2 || n == 0) return 0;
        s += n;
        if (*s == '*') s++;
        else {
            char *e;
            rank = (int)strtol(s, &e, 10);
            if (e == s || rank < 0) return 0;
            s = e;
        }
        for (k = 0; k < 4 && strcmp(kind, kinds[k]); k++) {}
        if (k == 4 || step < 0 || (*s && *s != ',')) return 0;
        g->inj[g->ninj].kind = k, g->inj[g->ninj].rank = rank, g->inj[g->ninj].step = step, g->inj[g->ninj].fired = 0;
        g->ninj++;
        if (*s == ',') s++;
    }
    return 1;
}

PTDEF pt_guard *pt_guard_new(pt_ctx *ctx, const pt_guard_desc *desc) {
    pt_guard_desc d;
    pt_guard *g;
    const char *inj;
    int64_t bytes;
    if (!ctx) return NULL;
    if (!desc) return (pt_guard *)pt__fail(ctx, PT_ERR_ARG, "pt_guard_new: desc is NULL (expected a pt_guard_desc)");
    d = *desc;
    if (d.policy < PT_GUARD_POLICY_WARN || d.policy > PT_GUARD_POLICY_ROLLBACK)
        return (pt_guard *)pt__fail(ctx, PT_ERR_ARG, "pt_guard_new: policy %d (expected PT_GUARD_POLICY_WARN, _SKIP or _ROLLBACK)", (int)d.policy);
    if (d.window < 0 || d.window > (1 << 20) || d.warmup < 0 || d.rollback_after < 0 || d.replica_check_every < 0)
        return (pt_guard *)pt__fail(ctx, PT_ERR_ARG, "pt_guard_new: window %d (0..1048576), warmup %d, rollback_after %d, replica_check_every %d must be >= 0",
                                    (int)d.window, (int)d.warmup, (int)d.rollback_after, (int)d.replica_check_every);
    if (!pt__guard_finite(d.z_threshold) || d.z_threshold < 0 || !pt__guard_finite(d.lr_factor) || d.lr_factor < 0 || d.lr_factor > 1)
        return (pt_guard *)pt__fail(ctx, PT_ERR_ARG, "pt_guard_new: z_threshold %g must be >= 0, lr_factor %g in (0, 1] (0 = defaults)",
                                    (double)d.z_threshold, (double)d.lr_factor);
    if (d.policy == PT_GUARD_POLICY_ROLLBACK && (!d.ckpt_dir || !*d.ckpt_dir))
        return (pt_guard *)pt__fail(ctx, PT_ERR_ARG, "pt_guard_new: PT_GUARD_POLICY_ROLLBACK needs ckpt_dir (the checkpoints to roll back to), found none");
    if (!d.window) d.window = 128;
    if (d.z_threshold == 0) d.z_threshold = 6.0f;
    if (!d.warmup) d.warmup = 16;
    if (d.warmup < 2) d.warmup = 2;
    if (!d.rollback_after) d.rollback_after = 3;
    if (d.lr_factor == 0) d.lr_factor = 0.5f;
    g = (pt_guard *)PT_MALLOC(sizeof *g);
    if (!g) return (pt_guard *)pt__fail(ctx, PT_ERR_OOM, "pt_guard_new: out of memory");
    memset(g, 0, sizeof *g);
    g->ctx = ctx, g->d = d, g->last_step = -1;
    g->rank = pt_dist_rank(ctx->desc.dist), g->size = pt_dist_size(ctx->desc.dist);
    bytes = (int64_t)sizeof(pt__guard_st) + 2 * (int64_t)d.window * (int64_t)sizeof(double);
    g->st = (pt__guard_st *)PT_MALLOC((size_t)bytes);
    g->all = (double *)PT_MALLOC((size_t)g->size * 4 * sizeof(double));
    if (d.ckpt_dir) {
        size_t n = strlen(d.ckpt_dir) + 1;
        if ((g->dir = (char *)PT_MALLOC(n)) != NULL) memcpy(g->dir, d.ckpt_dir, n);
    }
    g->d.ckpt_dir = g->dir;
    if (!g->st || !g->all || (d.ckpt_dir && !g->dir)) {
        pt_guard_free(g);
        return (pt_guard *)pt__fail(ctx, PT_ERR_OOM, "pt_guard_new: out of memory for a window of %d steps", (int)d.window);
    }
    memset(g->st, 0, (size_t)bytes);
    g->st->window = d.window, g->st->lr_scale = 1.0;
    g->ring = (double *)(void *)(g->st + 1);
    inj = getenv("PTRAIN_GUARD_INJECT");
    if (inj && *inj && !pt__guard_parse_inject(g, inj)) {
        pt_guard_free(g);
        return (pt_guard *)pt__fail(ctx, PT_ERR_ARG, "pt_guard_new: PTRAIN_GUARD_INJECT='%s': expected KIND:STEP:RANK[,...] (KIND nan, inf, spike or flip; "
                                    "RANK a world rank or *; at most %d)", inj, PT__GUARD_INJ);
    }
    if (pt_state_register(ctx, "guard", g->st, bytes) != PT_OK) {
        pt_guard_free(g);
        return NULL;
    }
    return g;
}

PTDEF void pt_guard_free(pt_guard *g) {
    if (!g) return;
    if (g->st) pt__state_unregister(g->ctx, g->st);
    PT_FREE(g->st), PT_FREE(g->all), PT_FREE(g->dir), PT_FREE(g);
}

/* the gathered records of every world rank into g->all (4 doubles each) */
static int pt__guard_gather(pt_guard *g, const double *mine, const char *what) {
    memcpy(g->all, mine, 4 * sizeof(double));
#ifdef PTRAIN_MPI
    if (g->size > 1) {
        const pt_dist *d = g->ctx->desc.dist;
        uint64_t s = pt__coll_begin(d, PT_COLL_ALLGATHER, PT_COMM_WORLD, 4, PT_COLL_F64, -1);
        int rc = pt__coll_end(d, s, s ? MPI_Allgather((void *)mine, 4, MPI_DOUBLE, g->all, 4, MPI_DOUBLE, *(MPI_Comm *)pt_dist_comm(d, PT_COMM_WORLD))
                                      : PT__COLL_REFUSED);
        if (rc != MPI_SUCCESS)
            return pt__fail(g->ctx, PT_ERR_DEVICE, "%s: MPI_Allgather over the world communicator failed: %s", what, pt__coll_why(d, rc)), 0;
    }
#endif
    (void)what;
    return 1;
}

/* CRC32C of this rank's parameter slab (as a double; -1 if it could not be read) */
static double pt__guard_hash(pt_ctx *ctx) {
    pt_tensor p;
    const float *h;
    float *buf = NULL;
    uint32_t c;
    if (!ctx->pslab || ctx->slab_n <= 0) return 0.0;
    p = pt_param_slab(ctx);
    if ((h = pt_f32(&p)) == NULL) {
        if (!(buf = (float *)PT_MALLOC((size_t)ctx->slab_n * sizeof(float)))) return -1.0;
        pt_tensor_read(&p, buf);
        h = buf;
    }
    c = pt_crc32c(0, h, (size_t)ctx->slab_n * sizeof(float));
    PT_FREE(buf);
    return (double)c;
}

/* 1 if this rank's whole gradient slab holds a NaN or an infinity (one sum of squares) */
static int pt__guard_grad_bad(pt_ctx *ctx) {
    pt_tensor gs;
    if (!ctx->gslab || ctx->slab_n <= 0) return 0;
    gs = pt_grad_slab(ctx);
    return !pt__guard_finite(ctx->be->sumsq(ctx, &gs, ctx->slab_n));
}

static void pt__guard_inject(pt_guard *g, int64_t step, float *loss) {
    pt_ctx *ctx = g->ctx;
    int i;
    for (i = 0; i < g->ninj; i++) {
        pt_tensor v;
        float x;
        uint32_t u;
        if (g->inj[i].fired || g->inj[i].step != step || (g->inj[i].rank >= 0 && g->inj[i].rank != g->rank) || ctx->slab_n <= 0) continue;
        g->inj[i].fired = 1;
        if (g->inj[i].kind == 2) {
            *loss *= 100.0f;
        } else if (g->inj[i].kind == 3) {
            v = pt__slab_view(ctx->pslab, 1);
            ctx->be->read(ctx, &v, &x, 4);
            memcpy(&u, &x, 4), u ^= 1u << 22, memcpy(&x, &u, 4);
            ctx->be->write(ctx, &v, &x, 4);
        } else {
            v = pt__slab_view(ctx->gslab, 1);
            x = g->inj[i].kind == 0 ? NAN : INFINITY;
            ctx->be->write(ctx, &v, &x, 4);
            g->forced = 1;
        }
    }
}

static void pt__guard_emit(pt_guard *g, const pt_guard_event *e) {
    g->ev[g->nev % PT_GUARD_EVENTS_KEPT] = *e;
    g->nev++;
    if (g->d.on_event) g->d.on_event(g->d.user, e);
    if (g->rank == 0) pt_log(g->ctx, PT_LOG_WARN, "pt_guard: step %lld: %s: %s", (long long)e->step, pt_guard_event_name(e->kind), e->detail);
}
static void pt__guard_event(pt_guard *g, int64_t step, int kind, int rank, int verdict, double value, double z, double mean, double sd,
                            const char *detail) {
    pt_guard_event e;
    memset(&e, 0, sizeof e);
    e.step = step, e.kind = kind, e.rank = rank, e.verdict = verdict, e.value = value, e.z = z, e.mean = mean, e.std = sd, e.loaded_step = -1;
    snprintf(e.detail, sizeof e.detail, "%s", detail);
    pt__guard_emit(g, &e);
}

/* mean and population std of column col (0 loss, 1 norm; norms < 0 skipped) of the ring, in slot order */
static int pt__guard_stat(const pt_guard *g, int col, double *mean, double *sd) {
    double s = 0.0, q = 0.0;
    int64_t i, n = 0;
    for (i = 0; i < g->st->fill; i++)
        if (col == 0 || g->ring[2 * i + 1] >= 0) s += g->ring[2 * i + col], n++;
    *mean = n ? s / (double)n : 0.0;
    for (i = 0; i < g->st->fill; i++)
        if (col == 0 || g->ring[2 * i + 1] >= 0) q += (g->ring[2 * i + col] - *mean) * (g->ring[2 * i + col] - *mean);
    *sd = n ? sqrt(q / (double)n) : 0.0;
    return (int)n;
}

/* replicas: the DP ranks of each (tp, pp) position compared by the hashes in g->all[4 r + 3]; emits
   one event per position whose replicas differ (when emit); returns the number of differing ranks */
static int pt__guard_replicas(pt_guard *g, int64_t step, int emit, int verdict) {
    const pt_dist *d = g->ctx->desc.dist;
    pt_layout lay = pt_dist_layout(d);
    int r, k, j, total = 0;
    if (!d || lay.dp <= 1) return 0;
    for (r = 0; r < g->size; r++) {
        pt_coords c = pt_layout_coords(&lay, r), q = c;
        double ref = 0.0;
        int best = 0, nd = 0, first = -1;
        char det[160];
        size_t len;
        if (c.dp != 0) continue;
        for (k = 0; k < lay.dp; k++) { /* the majority hash; on a tie the lowest DP rank's */
            int cnt = 0;
            double h;
            q.dp = k, h = g->all[4 * pt_layout_rank(&lay, q) + 3];
            for (j = 0; j < lay.dp; j++) q.dp = j, cnt += g->all[4 * pt_layout_rank(&lay, q) + 3] == h;
            if (cnt > best) best = cnt, ref = h;
        }
        snprintf(det, sizeof det, "tp %d pp %d: ranks", (int)c.tp, (int)c.pp);
        for (k = 0; k < lay.dp; k++) {
            int rk;
            q.dp = k, rk = pt_layout_rank(&lay, q);
            if (g->all[4 * rk + 3] == ref) continue;
            if (first < 0) first = rk;
            nd++;
            len = strlen(det);
            snprintf(det + len, sizeof det - len, " %d (crc %08x)", rk, (unsigned)g->all[4 * rk + 3]);
        }
        if (nd && emit) {
            len = strlen(det);
            snprintf(det + len, sizeof det - len, " differ from crc %08x (held by %d of %d replicas)", (unsigned)ref, best, (int)lay.dp);
            pt__guard_event(g, step, PT_GUARD_EV_REPLICA_MISMATCH, first, verdict, (double)nd, 0.0, 0.0, 0.0, det);
        }
        total += nd;
    }
    return total;
}

PTDEF int pt_guard_check(pt_guard *g, int64_t step, float loss, float grad_norm) {
    static const char *const act[3] = {"continue", "skip the update", "roll back"};
    double mine[4], *all, lsum = 0.0, gmax = -1.0, lm = 0.0, ls = 0.0, gm = 0.0, gsd = 0.0, zl = 0.0, zg = 0.0;
    int r, lrank = -1, grank = -1, gseen = -1, lmax = 0, gmaxr = -1, nonfin, spike_l = 0, spike_g = 0, bad, verdict, mis = 0, due, flags;
    pt__guard_st *st;
    char det[160];
    if (!g) return -1;
    st = g->st;
    g->forced = 0, g->last_step = step;
    pt__guard_inject(g, step, &loss);
    due = g->d.replica_check_every > 0 && step % g->d.replica_check_every == 0;
    mine[0] = loss, mine[1] = grad_norm;
    flags = pt__guard_finite(loss) ? 0 : 1;
    if (!pt__guard_finite(grad_norm) || grad_norm < 0 || g->forced) flags |= pt__guard_grad_bad(g->ctx) ? 2 : 0; /* the slab itself */
    if (!pt__guard_finite(grad_norm)) flags |= 4;
    mine[2] = (double)flags;
    mine[3] = due ? pt__guard_hash(g->ctx) : 0.0;
    if (!pt__guard_gather(g, mine, "pt_guard_check")) return -1;
    all = g->all;
    for (r = g->size - 1; r >= 0; r--) { /* downwards: the lowest rank wins */
        int f = (int)all[4 * r + 2];
        if (f & 1) lrank = r;
        if (f & 2) grank = r;
        if (f & 4) gseen = r;
        if (all[4 * r + 1] >= 0 && all[4 * r + 1] >= gmax) gmax = all[4 * r + 1], gmaxr = r;
        if (all[4 * r] >= all[4 * lmax]) lmax = r;
    }
    for (r = 0; r < g->size; r++) lsum += all[4 * r];
    if (grank < 0) grank = gseen;
    nonfin = lrank >= 0 || grank >= 0;
    if (!nonfin && st->accepted >= g->d.warmup) {
        if (pt__guard_stat(g, 0, &lm, &ls) >= 2) {
            double sd = PT__MAX(ls, 1e-6 * fabs(lm) + 1e-12);
            zl = (lsum / g->size - lm) / sd;
            spike_l = zl > g->d.z_threshold;
        }
        if (gmaxr >= 0 && pt__guard_stat(g, 1, &gm, &gsd) >= 2) {
            double sd = PT__MAX(gsd, 1e-6 * fabs(gm) + 1e-12);
            zg = (gmax - gm) / sd;
            spike_g = zg > g->d.z_threshold;
        }
    }
    bad = nonfin || spike_l || spike_g;
    if (due) mis = pt__guard_replicas(g, step, 0, 0);
    st->consecutive = bad ? st->consecutive + 1 : 0;
    verdict = PT_GUARD_OK;
    if (g->d.policy == PT_GUARD_POLICY_SKIP && bad) verdict = PT_GUARD_SKIP;
    if (g->d.policy == PT_GUARD_POLICY_ROLLBACK && (bad || mis))
        verdict = mis || st->consecutive >= g->d.rollback_after ? PT_GUARD_ROLLBACK : PT_GUARD_SKIP;
    if (lrank >= 0) {
        snprintf(det, sizeof det, "loss %g, first on rank %d of %d: %s", all[4 * lrank], lrank, g->size, act[verdict]);
        pt__guard_event(g, step, PT_GUARD_EV_LOSS_NONFINITE, lrank, verdict, all[4 * lrank], 0.0, 0.0, 0.0, det);
    }
    if (grank >= 0) {
        snprintf(det, sizeof det, "gradient not finite, first on rank %d of %d (its norm %g): %s", grank, g->size, all[4 * grank + 1], act[verdict]);
        pt__guard_event(g, step, PT_GUARD_EV_GRAD_NONFINITE, grank, verdict, all[4 * grank + 1], 0.0, 0.0, 0.0, det);
    }
    if (spike_l) {
        snprintf(det, sizeof det, "loss %.6g (largest on rank %d: %.6g), z %.2f > %.2f over %lld steps (mean %.6g, std %.3g): %s", lsum / g->size, lmax,
                 all[4 * lmax], zl, (double)g->d.z_threshold, (long long)st->fill, lm, ls, act[verdict]);
        pt__guard_event(g, step, PT_GUARD_EV_LOSS_SPIKE, lmax, verdict, lsum / g->size, zl, lm, ls, det);
    }
    if (spike_g) {
        snprintf(det, sizeof det, "gradient norm %.6g (rank %d), z %.2f > %.2f over %lld steps (mean %.6g, std %.3g): %s", gmax, gmaxr, zg,
                 (double)g->d.z_threshold, (long long)st->fill, gm, gsd, act[verdict]);
        pt__guard_event(g, step, PT_GUARD_EV_GRAD_SPIKE, gmaxr, verdict, gmax, zg, gm, gsd, det);
    }
    if (mis) pt__guard_replicas(g, step, 1, verdict);
    if (!bad) { /* an accepted step joins the statistics */
        g->ring[2 * st->head] = lsum / g->size, g->ring[2 * st->head + 1] = gmaxr >= 0 ? gmax : -1.0;
        st->head = (st->head + 1) % st->window;
        if (st->fill < st->window) st->fill++;
        st->accepted++;
    }
    g->checks++;
    g->skips += verdict != PT_GUARD_OK;
    return verdict;
}

PTDEF int pt_guard_replica_check(pt_guard *g, int64_t step) {
    double mine[4] = {0.0, 0.0, 0.0, 0.0};
    int n;
    if (!g) return -1;
    mine[3] = pt__guard_hash(g->ctx);
    if (!pt__guard_gather(g, mine, "pt_guard_replica_check")) return -1;
    if ((n = pt__guard_replicas(g, step, 0, 0)) > 0) pt__guard_replicas(g, step, 1, PT_GUARD_OK);
    return n;
}

PTDEF pt_status pt_guard_rollback(pt_guard *g, pt_optim *o, int64_t *step) {
    pt_guard_event e;
    double scale;
    int64_t rb, bad, loaded = -1;
    pt_status rc;
    if (step) *step = -1;
    if (!g) return PT_ERR_ARG;
    if (!g->dir) {
        pt__fail(g->ctx, PT_ERR_STATE, "pt_guard_rollback: the guard has no ckpt_dir to roll back to (set pt_guard_desc.ckpt_dir)");
        return PT_ERR_STATE;
    }
    scale = g->st->lr_scale, rb = g->st->rollbacks, bad = g->st->consecutive;
    if ((rc = pt_ckpt_load(g->ctx, o, g->dir, &loaded)) != PT_OK) return rc;
    g->st->lr_scale = scale * g->d.lr_factor, g->st->rollbacks = rb + 1, g->st->consecutive = 0;
    memset(&e, 0, sizeof e);
    e.step = g->last_step, e.kind = PT_GUARD_EV_ROLLBACK, e.rank = -1, e.verdict = PT_GUARD_ROLLBACK, e.value = g->st->lr_scale, e.loaded_step = loaded;
    snprintf(e.detail, sizeof e.detail, "after %lld bad steps in a row: loaded step %lld of %s, lr scale %g (rollback %lld)", (long long)bad,
             (long long)loaded, g->dir, g->st->lr_scale, (long long)g->st->rollbacks);
    pt__guard_emit(g, &e);
    if (step) *step = loaded;
    return PT_OK;
}

PTDEF float pt_guard_lr_scale(const pt_guard *g) { return g ? (float)g->st->lr_scale : 1.0f; }

PTDEF int64_t pt_guard_events(const pt_guard *g, pt_guard_event *out, int max) {
    int64_t i, first;
    if (!g) return 0;
    first = g->nev > PT_GUARD_EVENTS_KEPT ? g->nev - PT_GUARD_EVENTS_KEPT : 0;
    if (out && max > 0) {
        if (g->nev - first > max) first = g->nev - max;
        for (i = first; i < g->nev; i++) out[i - first] = g->ev[i % PT_GUARD_EVENTS_KEPT];
    }
    return g->nev;
}

PTDEF pt_guard_stats pt_guard_stats_get(const pt_guard *g) {
    pt_guard_stats s;
    memset(&s, 0, sizeof s);
    s.lr_scale = 1.0;
    if (!g) return s;
    s.checks = g->checks, s.skips = g->skips, s.rollbacks = g->st->rollbacks, s.events = g->nev;
    s.accepted = g->st->accepted, s.consecutive_bad = g->st->consecutive, s.n = (int32_t)g->st->fill, s.lr_scale = g->st->lr_scale;
    pt__guard_stat(g, 0, &s.loss_mean, &s.loss_std);
    pt__guard_stat(g, 1, &s.grad_mean, &s.grad_std);
    return s;
}

// >>memest  memory estimate per rank from a GPT config and a layout
/* Owns: pt_mem_estimate
   Invariants: what it reports is pt_mem of the real constructors and ops, run on the counting
   backend; it matches pt_mem of a real run (tests/test_memest.c)
   Entry points: pt_mem_estimate */
/* =================================================================================================
   memory estimate per rank (pt_mem_estimate)
   =================================================================================================
   Nothing is modelled here. The estimate of pipeline rank r builds what a training process of that
   rank builds, in a private context on the counting backend (see backend: storages hold no data,
   pt__st_alloc accounts their bytes by kind, kernels compute nothing but take the CPU kernels'
   scratch), then reads pt_mem. The grid is a pt_dist of the layout seen from the rank's coordinates,
   without communicators (pt__me_grid): pt_tp_size / pt_tp_rank read it, so every constructor splits
   as on that rank, and the counting backend skips the TP sums. In order, as examples/07 does it:
   - pt_gpt_new_stages for the stages s with s % pp == r, pt_optim_new (its full moments);
   - dp > 1: pt_dp_new_opts cuts the buckets (no communicator is needed for that); ZeRO: the
     optimizer state is resharded (pt__optim_reshard, as pt_dp_zero does) to the range of the DP rank
     with the largest shard (pt__dp_zero_range), which gives the set-up peak; the reducer's own host
     buffers (pt_dp_stats extra_bytes, outside pt_mem: the staging ring pt__dp_ring_floats, the
     ZeRO-2 gradient shard, the bf16 residual of the whole slab) are summed as pt__dp_account sums them;
   - two steps of forward + backward of micro-batches of B x T tokens: the first spills into 64 MiB
     arena chunks, its resets consolidate them, the second is the steady state. pp = 1: one graph,
     reset per pass (plain accumulation). pp > 1: this rank's program of the real schedule, walked as
     pt__pp_exec walks it (which needs MPI peers): a graph per (micro-batch, chunk) from its forward to
     its backward, taken from a pool of idle graphs (last released first), the received activation
     [B, T, C] (needing a gradient) and the received output gradient made in the graph's arena, the
     last stage's seed gradient pt_full; the transfers themselves are not made.
   The stage function is examples/07's: the ids in stage 0's graph, the targets in the last stage's.
   TP coordinate 0 stands for every TP rank (they hold the same; the ids and targets read as 0 are in
   its vocabulary range); the optimizer step is not run (it allocates nothing). */

/* a grid of layout (dp, tp, pp) seen from coordinates c, without communicators: one process
   standing for that rank (size 1), so nothing takes it for a world to talk to */
static pt_dist *pt__me_grid(const pt_mem_plan *pl, pt_coords c) {
    pt_dist *d = (pt_dist *)PT_MALLOC(sizeof *d);
    if (!d) return NULL;
    memset(d, 0, sizeof *d);
    pt__dist_coll_setup(d);
    d->size = d->nodes = d->local_size = 1;
    d->layout.dp = pl->dp, d->layout.tp = pl->tp, d->layout.pp = pl->pp;
    d->coords = c;
    d->threads = pl->threads > 0 ? pl->threads : 1;
#ifdef PTRAIN_MPI
    {
        int i;
        for (i = 0; i < PT__COMM_ALL; i++) d->comm[i] = MPI_COMM_NULL;
    }
#endif
    return d;
}
static void pt__me_quiet(void *user, int level, const char *msg) { (void)user, (void)level, (void)msg; }

/* one micro-batch's forward of stage `stage` in g (x: the received activation, NULL on stage 0) */
static pt_tensor *pt__me_fwd(pt_graph *g, const pt_gpt *m, int stage, pt_tensor *x, const int64_t *bt) {
    pt_tensor *ids = stage == 0 ? pt_tensor_from(g, PT_I32, 2, bt, NULL) : NULL;
    pt_tensor *tg = stage == m->nstages - 1 ? pt_tensor_from(g, PT_I32, 2, bt, NULL) : NULL;
    return pt_gpt_stage_fwd(g, m, stage, x, ids, tg);
}
/* graph g after the steps: the largest graph (its bytes, its pooled gradient blocks) */
static void pt__me_graph(const pt_graph *g, pt_mem_estimate_out *o) {
    int64_t pool = 0;
    int i;
    for (i = 0; i < g->npool; i++) pool += g->pool[i]->st.bytes;
    if (g->bytes > o->act_per_mb) o->act_per_mb = g->bytes, o->act_grad_blocks = pool;
}
/* two steps of pipeline rank r's program of schedule sc */
static void pt__me_pipeline(pt_ctx *ctx, const pt_gpt *m, const pt_pp_schedule *sc, int r, int p, int mb, const int64_t *bt,
                            pt_mem_estimate_out *o) {
    const pt_pp_instr *prog = pt_pp_schedule_instrs(sc, r);
    int n = pt_pp_schedule_count(sc, r), v = m->nstages / p, slots = mb * v, nfree = 0, ngraphs = 0, step, i;
    pt_graph **idle = (pt_graph **)PT_MALLOC(sizeof(pt_graph *) * (size_t)slots * 2);
    pt_tensor **out = (pt_tensor **)PT_MALLOC(sizeof(pt_tensor *) * (size_t)slots);
    int64_t one = 1, shape[3];
    if (!idle || !out) {
        pt__fail(ctx, PT_ERR_OOM, "pt_mem_estimate: out of memory");
    } else {
        pt_graph **held = idle + slots; /* [slot]: the graph from its forward to its backward */
        shape[0] = bt[0], shape[1] = bt[1], shape[2] = m->cfg.width;
        for (step = 0; step < 2; step++)
            for (i = 0; i < n && ctx->status == PT_OK; i++) {
                int c = prog[i].chunk, stage = c * p + r, slot = prog[i].mb * v + c;
                pt_graph *g;
                pt_tensor *x = NULL, *dy;
                if (prog[i].op == PT_PP_FWD) {
                    g = held[slot] = nfree ? idle[--nfree] : (ngraphs++, pt_graph_new(ctx));
                    if (g && stage > 0 && (x = pt_tensor_from(g, PT_F32, 3, shape, NULL)) != NULL) pt_requires_grad(x);
                    out[slot] = g && (stage == 0 || x) ? pt__me_fwd(g, m, stage, x, bt) : NULL;
                } else if (prog[i].op == PT_PP_BWD && (g = held[slot]) != NULL) {
                    if (stage == m->nstages - 1) dy = pt_full(g, 1, &one, 1.0f);
                    else dy = out[slot] ? pt_tensor_from(g, PT_F32, out[slot]->ndim, out[slot]->shape, NULL) : NULL;
                    if (dy && pt_backward_from(g, out[slot], dy) == PT_OK) o->act_pass = PT__MAX(o->act_pass, g->dpass);
                    pt_graph_reset(g);
                    idle[nfree++] = g, held[slot] = NULL;
                }
            }
        for (i = 0; i < nfree; i++) pt__me_graph(idle[i], o);
    }
    o->in_flight = ngraphs;
    PT_FREE(idle);
    PT_FREE(out);
}

/* pipeline rank r (stages first[], nst of them; sc: the schedule when pp > 1) */
static pt_status pt__me_rank(const pt_gpt_config *c, const pt_mem_plan *pl, int r, const int32_t *first, int nst, const pt_pp_schedule *sc,
                             pt_mem_estimate_out *o, char *err, size_t errlen) {
    int p = pl->pp, nmine = 0, s;
    int32_t *mine = (int32_t *)PT_MALLOC(sizeof(int32_t) * (size_t)nst);
    int64_t bt[2];
    pt_coords co;
    pt_dist *d;
    pt_ctx *ctx = NULL;
    pt_gpt *m = NULL;
    pt_optim *opt = NULL;
    pt_dp *dp = NULL;
    pt_desc desc;
    pt_status st = PT_OK;
    memset(o, 0, sizeof *o);
    co.tp = co.dp = 0, co.pp = r;
    memset(&desc, 0, sizeof desc);
    desc.dist = d = pt__me_grid(pl, co);
    desc.threads = d ? d->threads : 1, desc.seed = 1, desc.device = "cpu", desc.log = pt__me_quiet;
    if (!mine || !d || !(ctx = pt_init(&desc))) {
        PT_FREE(mine);
        pt__dist_free(d);
        return pt__msg(err, errlen, "pt_mem_estimate: out of memory"), PT_ERR_OOM;
    }
    ctx->be = &pt__count_backend; /* before anything is allocated */
    for (s = r; s < nst; s += p) mine[nmine++] = s;
    m = pt_gpt_new_stages(ctx, c, nst, first, nmine, mine);
    if (m) {
        pt_optim_desc od;
        memset(&od, 0, sizeof od);
        od.kind = (pt_optim_kind)pl->optim;
        opt = pt_optim_new(ctx, &od);
    }
    if (opt && pl->dp > 1) {
        pt_dp_options dpo;
        memset(&dpo, 0, sizeof dpo);
        dpo.bucket_bytes = pl->bucket_bytes, dpo.hier = pl->hier, dpo.compress = pl->compress;
        if ((dp = pt_dp_new_opts(ctx, NULL, &dpo)) != NULL) {
            int64_t lo = 0, hi = 0, a, e;
            int k;
            for (k = 0; k < pl->dp; k++) /* the largest shard */
                if (pt__dp_zero_range(ctx->slab_n, k, pl->dp, &a, &e), e - a > hi - lo) lo = a, hi = e;
            if (pl->zero) pt__optim_reshard(opt, lo, hi);
            o->dp_extra = 4 * (pt__dp_ring_floats(dp, pl->zero) + (pl->zero == 2 ? hi - lo : 0) + (pl->compress ? ctx->slab_n : 0));
        }
    }
    bt[0] = pl->batch, bt[1] = pl->seq;
    if (ctx->status == PT_OK && p > 1) {
        pt__me_pipeline(ctx, m, sc, r, p, pl->micro_batches, bt, o);
    } else if (ctx->status == PT_OK) {
        pt_graph *g = pt_graph_new(ctx);
        for (s = 0; s < 2 && g && ctx->status == PT_OK; s++) {
            pt_graph_reset(g);
            if (pt_backward(g, pt__me_fwd(g, m, 0, NULL, bt)) == PT_OK) o->act_pass = g->dpass;
        }
        if (g) pt__me_graph(g, o);
        o->in_flight = 1;
    }
    if (ctx->status == PT_OK) {
        pt_mem_stats ms = pt_mem(ctx);
        o->pp_rank = r, o->stages = nmine, o->first_stage = m->mine[0], o->last_stage = m->mine[nst - 1];
        o->params = ms.params, o->grads = ms.grads, o->optim = ms.optim, o->activations = ms.activations, o->workspace = ms.workspace;
        o->total = o->params + o->grads + o->optim + o->activations + o->workspace;
        o->peak_total = ms.peak_total;
        o->slab_floats = ctx->slab_n;
    } else {
        st = ctx->status == PT_ERR_OOM ? PT_ERR_OOM : PT_ERR_ARG;
        pt__msg(err, errlen, "pt_mem_estimate: %s", pt_error(ctx));
    }
    pt_dp_free(dp);
    pt_gpt_free(m);
    pt_shutdown(ctx);
    pt__dist_free(d);
    PT_FREE(mine);
    return st;
}

PTDEF pt_status pt_mem_estimate(const pt_gpt_config *cfg, const pt_mem_plan *plan, int pp_rank, pt_mem_estimate_out *out, char *err,
                                size_t errlen) {
    pt_mem_plan pl;
    pt_gpt_config c;
    pt_pp_schedule *sc = NULL;
    int32_t *first = NULL;
    int nst, r;
    pt_status st = PT_OK;
    if (err && errlen) err[0] = 0;
    if (!cfg || !plan || !out) return pt__msg(err, errlen, "pt_mem_estimate: needs a config, a plan and out"), PT_ERR_ARG;
    pl = *plan, c = *cfg;
    if (!pl.dp) pl.dp = 1;
    if (!pl.tp) pl.tp = 1;
    if (!pl.pp) pl.pp = 1;
    if (!pl.micro_batches) pl.micro_batches = pl.pp;
    if (!pl.virtual_stages) pl.virtual_stages = pl.schedule == PT_PP_INTERLEAVED ? 2 : 1;
    if (pl.pp == 1) pl.virtual_stages = 1;
    if (pl.dp < 1 || pl.tp < 1 || pl.pp < 1)
        return pt__msg(err, errlen, "pt_mem_estimate: dp %d, tp %d, pp %d must be >= 1", pl.dp, pl.tp, pl.pp), PT_ERR_ARG;
    if (pl.zero < 0 || pl.zero > 2) return pt__msg(err, errlen, "pt_mem_estimate: zero %d (expected 0, 1 or 2)", pl.zero), PT_ERR_ARG;
    if (pl.batch < 1 || pl.seq < 1 || pl.seq > c.max_seq)
        return pt__msg(err, errlen, "pt_mem_estimate: micro-batch %d x %d tokens (expected >= 1 x 1..max_seq %d)", pl.batch, pl.seq, c.max_seq),
               PT_ERR_ARG;
    if (pl.micro_batches < 1) return pt__msg(err, errlen, "pt_mem_estimate: micro_batches %d (expected >= 1)", pl.micro_batches), PT_ERR_ARG;
    if (pl.optim != PT_OPTIM_SGD && pl.optim != PT_OPTIM_ADAMW)
        return pt__msg(err, errlen, "pt_mem_estimate: optim %d (expected PT_OPTIM_SGD or PT_OPTIM_ADAMW)", pl.optim), PT_ERR_ARG;
    if (pl.precision != PT_F32)
        return pt__msg(err, errlen, "pt_mem_estimate: precision %s: parameters, gradients, moments and activations are f32 only "
                       "(bf16 exists as DP gradient compression: plan.compress)", pt__dtname((pt_dtype)pl.precision)), PT_ERR_ARG;
    if (pl.recompute) return pt__msg(err, errlen, "pt_mem_estimate: recompute %d: activation recomputation is not implemented (expected 0)", pl.recompute), PT_ERR_ARG;
    if ((pl.compress != 0 && pl.compress != 1) || (pl.hier != 0 && pl.hier != 1) || pl.bucket_bytes < 0 || pl.threads < 0)
        return pt__msg(err, errlen, "pt_mem_estimate: compress %d, hier %d (0 or 1), bucket_bytes %lld, threads %d (>= 0)", pl.compress, pl.hier,
                       (long long)pl.bucket_bytes, pl.threads), PT_ERR_ARG;
    nst = pl.pp * pl.virtual_stages;
    if (pl.virtual_stages < 1 || nst > c.layers)
        return pt__msg(err, errlen, "pt_mem_estimate: %d layers cannot fill pp x virtual stages = %d x %d stages", c.layers, pl.pp, pl.virtual_stages),
               PT_ERR_ARG;
    if (pl.pp > 1) {
        if (pl.schedule != PT_PP_GPIPE && pl.schedule != PT_PP_1F1B && pl.schedule != PT_PP_INTERLEAVED)
            return pt__msg(err, errlen, "pt_mem_estimate: schedule %d (expected PT_PP_GPIPE, PT_PP_1F1B or PT_PP_INTERLEAVED)", pl.schedule), PT_ERR_ARG;
        if (!(sc = pt_pp_schedule_new(pl.schedule, pl.pp, pl.micro_batches, pl.virtual_stages, err, errlen))) return PT_ERR_ARG;
    }
    if (pp_rank < -1 || pp_rank >= pl.pp) {
        pt_pp_schedule_free(sc);
        return pt__msg(err, errlen, "pt_mem_estimate: pp_rank %d outside [-1, %d)", pp_rank, pl.pp), PT_ERR_ARG;
    }
    if (!(first = (int32_t *)PT_MALLOC(sizeof(int32_t) * (size_t)(nst + 1)))) st = PT_ERR_OOM, pt__msg(err, errlen, "pt_mem_estimate: out of memory");
    else if (pl.first) {
        int s;
        memcpy(first, pl.first, sizeof(int32_t) * (size_t)(nst + 1));
        for (s = 0; s < nst && st == PT_OK; s++)
            if (first[s + 1] <= first[s]) st = PT_ERR_ARG;
        if (st != PT_OK || first[0] != 0 || first[nst] != c.layers)
            st = PT_ERR_ARG, pt__msg(err, errlen, "pt_mem_estimate: the split must grow from layer 0 to %d over %d stages", c.layers, nst);
    } else if (c.layers % nst == 0) {
        st = pt_pp_split(c.layers, nst, NULL, 0, 0, first, err, errlen);
    } else {
        double *cost = (double *)PT_MALLOC(sizeof(double) * (size_t)c.layers), fe, le;
        if (!cost) st = PT_ERR_OOM;
        else {
            pt_gpt_stage_costs(&c, pl.batch, pl.seq, cost, &fe, &le);
            st = pt_pp_split(c.layers, nst, cost, fe, le, first, err, errlen);
        }
        PT_FREE(cost);
    }
    if (st == PT_OK && pp_rank >= 0) st = pt__me_rank(&c, &pl, pp_rank, first, nst, sc, out, err, errlen);
    for (r = 0; st == PT_OK && pp_rank < 0 && r < pl.pp; r++) {
        pt_mem_estimate_out o;
        st = pt__me_rank(&c, &pl, r, first, nst, sc, &o, err, errlen);
        if (st == PT_OK && (r == 0 || o.total > out->total)) *out = o;
    }
    pt_pp_schedule_free(sc);
    PT_FREE(first);
    return st;
}

#endif /* PTRAIN_IMPLEMENTATION */

// >>harness  the run harness of the training programs (switch PTRAIN_HARNESS)
/* Owns: pt_args (the shared flags) and pt_run (data, checkpoints, stop on signals, log, trace,
   guard)
   Invariants: uses only the public API above; compiled only when the program defines PTRAIN_HARNESS
   Entry points: pt_args_parse pt_run_parse pt_run_data pt_run_start pt_run_guard pt_run_step_end
   pt_run_free */
/* =================================================================================================
   The shared flags (pt_args), data, checkpoints, a clean stop on SIGINT / SIGTERM, log, trace and guard (pt_run).
   It stands last and uses only the public API above; a program that wants it defines
   PTRAIN_HARNESS before including ptrain.h (the tools and tutorials do), an embedding codebase
   gets none of it (no signal handlers, no flag parsing).
   ================================================================================================= */
#if defined(PTRAIN_HARNESS) && !defined(PTRAIN_HARNESS_H)
#define PTRAIN_HARNESS_H
#ifdef __cplusplus
extern "C" {
#endif

/** The command-line convention shared by the training examples. */
typedef struct pt_args {
    int64_t steps, seed, batch, seq, layers, width, heads, stop_after;
    float lr;
    const char *device;
    int help;
} pt_args;
/** Parses --steps --seed --batch --seq --lr --layers --width --heads --stop-after --device --help
    out of argv (pre-filled a holds the defaults). Flags it does not know stay in argv, compacted;
    returns the new argc, or -1 with a message in err for a bad value. */
PTDEF int pt_args_parse(pt_args *a, int argc, char **argv, char *err, size_t errlen);
/** Prints the shared flags and their defaults. */
PTDEF void pt_args_usage(const pt_args *a, const char *prog, const char *extra);

/** The rest of a training example's run, shared by 03, 07 and 08: its data (--data DIR: token
    shards DIR/train_*.bin and val_*.bin; text DIR/train.txt and val.txt is turned into such shards
    the first time), checkpoints (--ckpt-dir DIR --ckpt-every N, --resume or --resume-if-any) and a
    clean stop on SIGINT / SIGTERM. Zero-initialize, set the defaults (data, prepare), pt_run_parse. */
typedef struct pt_run {
    const char *data;       /**< --data DIR */
    const char *prepare;    /**< shell command that writes DIR/train.txt and val.txt when the default
                                 DIR has neither shards nor text (rank 0 runs it); --data clears it */
    const char *ckpt_dir;   /**< --ckpt-dir DIR (NULL = no checkpoints) */
    int64_t ckpt_every;     /**< --ckpt-every N: save after every N steps, and at the last step (0 = only
                                 the last step and when stopped) */
    int32_t resume;         /**< 1: --resume (a checkpoint must be there); 2: --resume-if-any (start at
                                 step 0 when DIR has no committed checkpoint, i.e. no DIR/latest) */
    int32_t keep_last;      /**< checkpoints kept (0 = 3) */
    const pt_gpt_config *model; /**< recorded in the manifests (may be NULL) */
    int32_t vocab;          /**< set by pt_run_data: the shards' vocabulary (header; 256 for bytes) */
    struct pt_loader *train;/**< set by pt_run_data: this DP rank's slice of the shuffled train stream,
                                 its state registered as "data" (checkpoints carry it) */
    struct pt_loader *val;  /**< set by pt_run_data: the val shards in order (pt_run_val_rewind) */
    struct pt_tokenizer *tok; /**< set by pt_run_data: DIR/tokenizer.bin when the shards hold BPE ids
                                 (tools/prepare_shards --bpe N), NULL for bytes */
    char cmd[2048];         /**< the command line as given, shell-quoted ("" if longer), for the resume hint */
    const char *log_path;   /**< --log FILE: the monitor's JSON lines, one per step plus events (world rank 0
                                 writes; appended to on a resume); NULL = no monitor */
    const char *trace_path; /**< --trace FILE: a Chrome trace of every rank, written by pt_run_free */
    int32_t guard;          /**< --guard off|warn|skip|rollback: -1 = off, else a pt_guard_policy (0 = warn) */
    float guard_z;          /**< --guard-z Z: the guard's spike threshold (0 = its default, 6) */
    int32_t ckpt_async;     /**< --ckpt-async: a background thread writes the checkpoints (pt_ckpt_opts.async) */
    const struct pt_pp *pp; /**< a pipeline run sets it before pt_run_start: the monitor's bubble */
    int64_t batch, seq;     /**< set by pt_run_data: the global batch and the sequence length */
    pt_ctx *ctx;            /**< set by pt_run_start */
    struct pt_monitor *mon; /**< set by pt_run_start with --log, else NULL */
    struct pt_guard *health;/**< set by pt_run_start unless --guard off */
    double t_update;        /**< when pt_run_guard returned (the optimizer's time starts) */
} pt_run;
/** Takes --data, --ckpt-dir, --ckpt-every, --ckpt-async, --resume, --resume-if-any, --log, --trace,
    --guard, --guard-z out of argv (compacted, like pt_args_parse; call it first: it records the command
    line as given). Returns the new argc, or -1 with a message in err (a bad value, --resume or --guard
    rollback without --ckpt-dir). */
PTDEF int pt_run_parse(pt_run *r, int argc, char **argv, char *err, size_t errlen);
/** Prints the flags of pt_run_parse and their defaults. */
PTDEF void pt_run_usage(const pt_run *r);
/** Collective over ctx's grid. Finds (or, from text, writes) the shards of r->data, reads the
    vocabulary from DIR/train_000000.bin, opens r->train (global batch `batch` of `seq` tokens, this
    DP rank's slice, shuffled by seed, prefetched, registered) and r->val (not shuffled); rank 0
    prints a summary line. The same error on every rank, naming DIR and what was expected. */
PTDEF pt_status pt_run_data(pt_ctx *ctx, pt_run *r, int64_t batch, int64_t seq, uint64_t seed);
/** Rewinds the validation stream to its start; returns how many of `batches` batches it holds
    (at most one epoch, so no window is counted twice). */
PTDEF int pt_run_val_rewind(pt_run *r, int batches);
/** Collective; call once the model, optimizer and loaders exist (and r->pp is set in a pipeline run).
    Creates the guard (--guard; its state is checkpointed: a checkpoint saved without it loads with a
    fresh one), applies --resume / --resume-if-any: loads the newest valid checkpoint of r->ckpt_dir
    into the parameters, o's state and the registered state (the data stream), sets *first_step to
    its step (0 when not resuming) and says so on rank 0, also when the run (`steps`) is already
    complete. Starts the trace (--trace) and the monitor (--log: model r->model, r->batch x r->seq
    tokens per step). An error (none there, none valid, a file) is in pt_error(ctx), the same on every
    rank. Then catches SIGINT and SIGTERM: they only raise a flag (a second SIGINT acts as usual; SIGTERM
    stays caught, since a scheduler may deliver it twice). */
PTDEF pt_status pt_run_start(pt_ctx *ctx, pt_optim *o, pt_run *r, int64_t steps, int64_t *first_step);
/** Collective; call after backward (and pt_dp_finish / pt_pp_step) and the gradient norm, before
    pt_optim_step, with this rank's loss (or the global one) and the global gradient norm (pt_grad_norm;
    < 0 = not computed). Runs the guard: PT_GUARD_OK: update (pt_optim_step with pt_run_lr); PT_GUARD_SKIP:
    no update this step, go on to pt_run_step_end; PT_GUARD_ROLLBACK: the newest checkpoint was loaded
    (an asynchronous save is committed first), the LR scale multiplied by 0.5, the step logged: set the
    loop to train step *resume_at next, without an update or pt_run_step_end. -1: an error (pt_error).
    PT_GUARD_OK without a guard (--guard off). */
PTDEF int pt_run_guard(pt_ctx *ctx, pt_optim *o, pt_run *r, int64_t step, float loss, float grad_norm, int64_t *resume_at);
/** lr times the guard's LR scale (1 until a rollback). */
PTDEF float pt_run_lr(const pt_run *r, float lr);
/** A validation loss measured during this step in `seconds`: with --log it is the step line's
    val_loss, and the time goes to t_eval (not compute, not the tokens/s). No-op without --log. */
PTDEF void pt_run_val(pt_run *r, float val_loss, double seconds);
/** Collective; call at the end of each step (updated or skipped) with done = steps completed and the
    step's loss, gradient norm and learning rate (for the log). The ranks agree whether a signal arrived
    (on any of them); an asynchronous save in flight is committed once written (pt_ckpt_poll); a
    checkpoint of step done is saved when it is due (every ckpt_every, the last of `steps`, or
    stopping; with --ckpt-async the last and a stopping one are committed before returning); the
    monitor ends the step. Returns 1 to stop (rank 0 printed how to resume), 0 to go on, -1 when a
    save failed (pt_error(ctx), the same on every rank). */
PTDEF int pt_run_step_end(pt_ctx *ctx, pt_optim *o, pt_run *r, int64_t done, int64_t steps, float loss, float grad_norm, float lr);
/** Collective: saves checkpoint `step` of r->ckpt_dir (keep_last, model, --ckpt-async; timed and logged
    by the monitor): the one save of the run. */
PTDEF pt_status pt_run_save(pt_ctx *ctx, pt_optim *o, const pt_run *r, int64_t step);
/** Writes token ids as text to file (a FILE *; NULL = stdout): decoded by r->tok when the shards are
    BPE, else one byte per id; control characters other than newline and tab (and ids outside the
    vocabulary) print as '?'. */
PTDEF void pt_run_print(const pt_run *r, const int32_t *ids, int64_t n, void *file);
/** Collective once pt_run_start succeeded: commits an asynchronous save still in flight (rank 0 reports
    a failure), writes the trace (--trace), closes the log, frees the guard; then frees the loaders
    and the tokenizer. Call it before pt_shutdown. */
PTDEF void pt_run_free(pt_run *r);

#ifdef __cplusplus
}
#endif
#endif /* PTRAIN_HARNESS_H */

#if defined(PTRAIN_HARNESS) && defined(PTRAIN_IMPLEMENTATION) && !defined(PTRAIN_HARNESS_DONE)
#define PTRAIN_HARNESS_DONE
/* the command line shared by the training programs (pt_args) */
PTDEF void pt_args_usage(const pt_args *a, const char *prog, const char *extra) {
    printf("usage: %s [flags]%s%s\n", prog, extra ? "\n" : "", extra ? extra : "");
    printf("  --steps N       total steps, also the LR schedule's length (%lld)\n", (long long)a->steps);
    printf("  --seed S        seed of init, data order and dropout (%lld)\n", (long long)a->seed);
    printf("  --batch B       sequences (or samples) per step (%lld)\n", (long long)a->batch);
    printf("  --seq T         sequence length (%lld)\n", (long long)a->seq);
    printf("  --lr X          peak learning rate (%g)\n", (double)a->lr);
    printf("  --layers L      transformer blocks (%lld)\n", (long long)a->layers);
    printf("  --width C       model width (%lld)\n", (long long)a->width);
    printf("  --heads H       attention heads (%lld)\n", (long long)a->heads);
    printf("  --stop-after K  stop after K steps, schedule unchanged (%lld, 0 = run all)\n", (long long)a->stop_after);
    printf("  --device D      cpu, or opencl[:P[:D]] in a build with -DPTRAIN_OPENCL (%s)\n", a->device ? a->device : "cpu");
}
PTDEF int pt_args_parse(pt_args *a, int argc, char **argv, char *err, size_t errlen) {
    static const char *names[] = {"--steps", "--seed", "--batch", "--seq", "--layers", "--width", "--heads", "--stop-after", "--lr", "--device"};
    int i, k, out = 1;
    for (i = 1; i < argc; i++) {
        const char *v;
        char *end;
        int which = -1;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            a->help = 1;
            continue;
        }
        for (k = 0; k < (int)(sizeof names / sizeof *names); k++)
            if (!strcmp(argv[i], names[k])) which = k;
        if (which < 0) {
            argv[out++] = argv[i];
            continue;
        }
        if (i + 1 >= argc) {
            snprintf(err, errlen, "flag %s needs a value", argv[i]);
            return -1;
        }
        v = argv[++i];
        if (which == 9) {
            a->device = v;
            continue;
        }
        if (which == 8) {
            double d = strtod(v, &end);
            if (*end || end == v || !(d > 0)) {
                snprintf(err, errlen, "flag --lr expects a positive number, found '%s'", v);
                return -1;
            }
            a->lr = (float)d;
        } else {
            long long x = strtoll(v, &end, 10);
            int64_t *dst[8];
            dst[0] = &a->steps, dst[1] = &a->seed, dst[2] = &a->batch, dst[3] = &a->seq, dst[4] = &a->layers, dst[5] = &a->width,
            dst[6] = &a->heads, dst[7] = &a->stop_after;
            if (*end || end == v || x < 0 || (x == 0 && which != 1 && which != 7)) {
                snprintf(err, errlen, "flag %s expects a %s integer, found '%s'", names[which], which == 1 || which == 7 ? "non-negative" : "positive",
                         v);
                return -1;
            }
            *dst[which] = x;
        }
    }
    argv[out] = NULL;
    return out;
}

/* The examples' run (pt_run): data, checkpoints, a clean stop. SIGINT / SIGTERM only raise a flag
   (SIGINT restores the default action, so a second Ctrl-C acts as usual); pt_run_step_end reads it. */
#include <signal.h>
static volatile sig_atomic_t pt__run_stopping = 0;
static void pt__run_on_signal(int sig) {
    pt__run_stopping = 1;
    /* a second Ctrl-C (a person) stops at once; SIGTERM stays caught: a scheduler may deliver it
       more than once, and follows up with SIGKILL when the save takes too long */
    if (sig == SIGINT) signal(sig, SIG_DFL);
    else signal(sig, pt__run_on_signal);
}

/* --guard's values, indexed by pt_run.guard + 1 (off = -1, then the pt_guard_policy values) */
static const char *const pt__run_guards[] = {"off", "warn", "skip", "rollback"};

static int pt__run_exists(const char *dir, const char *name) {
    char path[1024];
    FILE *f;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    f = fopen(path, "rb");
    if (f) fclose(f);
    return f != NULL;
}

PTDEF int pt_run_parse(pt_run *r, int argc, char **argv, char *err, size_t errlen) {
    static const char safe[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%";
    size_t n = 0, cap = sizeof r->cmd;
    int i, out = 1;
    r->cmd[0] = 0;
    for (i = 0; i < argc && n < cap; i++) { /* the command line as given, quoted where needed */
        const char *s = argv[i];
        int plain = *s && strspn(s, safe) == strlen(s);
        if (i && n + 1 < cap) r->cmd[n++] = ' ';
        if (!plain && n + 1 < cap) r->cmd[n++] = '\'';
        for (; *s && n + 5 < cap; s++) {
            if (*s == '\'') memcpy(r->cmd + n, "'\\''", 4), n += 4;
            else r->cmd[n++] = *s;
        }
        if (*s) n = cap; /* did not fit */
        else if (!plain && n + 1 < cap) r->cmd[n++] = '\'';
    }
    if (n + 1 >= cap) n = 0;
    r->cmd[n] = 0;
    for (i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (!strcmp(f, "--resume") || !strcmp(f, "--resume-if-any")) {
            r->resume = f[8] ? 2 : 1;
            continue;
        }
        if (!strcmp(f, "--ckpt-async")) {
            r->ckpt_async = 1;
            continue;
        }
        if (strcmp(f, "--data") && strcmp(f, "--ckpt-dir") && strcmp(f, "--ckpt-every") && strcmp(f, "--log") && strcmp(f, "--trace") &&
            strcmp(f, "--guard") && strcmp(f, "--guard-z")) {
            argv[out++] = argv[i];
            continue;
        }
        if (i + 1 >= argc) {
            snprintf(err, errlen, "flag %s needs a value", f);
            return -1;
        }
        if (!strcmp(f, "--data")) r->data = argv[++i], r->prepare = NULL;
        else if (!strcmp(f, "--ckpt-dir")) r->ckpt_dir = argv[++i];
        else if (!strcmp(f, "--log")) r->log_path = argv[++i];
        else if (!strcmp(f, "--trace")) r->trace_path = argv[++i];
        else if (!strcmp(f, "--guard")) {
            int k;
            for (k = 0; k < 4 && strcmp(argv[i + 1], pt__run_guards[k]); k++) {}
            if (k == 4) {
                snprintf(err, errlen, "flag --guard expects off, warn, skip or rollback, found '%s'", argv[i + 1]);
                return -1;
            }
            r->guard = k - 1, i++; /* off = -1, then the pt_guard_policy values */
        } else if (!strcmp(f, "--guard-z")) {
            char *end;
            double z = strtod(argv[++i], &end);
            if (*end || end == argv[i] || !(z > 0) || !(z < 1e30)) {
                snprintf(err, errlen, "flag --guard-z expects a positive number (standard deviations), found '%s'", argv[i]);
                return -1;
            }
            r->guard_z = (float)z;
        } else {
            char *end;
            long long x = strtoll(argv[++i], &end, 10);
            if (*end || end == argv[i] || x < 0) {
                snprintf(err, errlen, "flag --ckpt-every expects a non-negative integer, found '%s'", argv[i]);
                return -1;
            }
            r->ckpt_every = x;
        }
    }
    argv[out] = NULL;
    if (r->resume && !r->ckpt_dir) {
        snprintf(err, errlen, "%s needs --ckpt-dir DIR (the directory the checkpoints were saved to)", r->resume == 2 ? "--resume-if-any" : "--resume");
        return -1;
    }
    if (r->guard == PT_GUARD_POLICY_ROLLBACK && !r->ckpt_dir) {
        snprintf(err, errlen, "--guard rollback needs --ckpt-dir DIR (the checkpoints it rolls back to)");
        return -1;
    }
    return out;
}

PTDEF void pt_run_usage(const pt_run *r) {
    printf("  --data DIR      token shards DIR/train_*.bin, val_*.bin (tools/prepare_shards), or text DIR/train.txt,\n"
           "                  val.txt turned into shards the first time (%s)\n", r->data ? r->data : "none");
    printf("  --ckpt-dir DIR  checkpoint directory, shared by all ranks (none); the newest %d are kept\n", r->keep_last > 0 ? r->keep_last : 3);
    printf("  --ckpt-every N  save every N steps (0 = only at the end and when stopped by SIGINT/SIGTERM)\n");
    printf("  --resume        continue from the newest valid checkpoint of --ckpt-dir (on any DP/PP layout)\n");
    printf("  --resume-if-any the same when --ckpt-dir holds a checkpoint, else start at step 0\n");
    printf("  --ckpt-async    write checkpoints on a background thread while training goes on\n");
    printf("  --log FILE      per-step metrics and events as JSON lines (docs/monitoring.md)\n");
    printf("  --trace FILE    Chrome trace of every rank (open in ui.perfetto.dev; tools/ptreport)\n");
    printf("  --guard P       health guard: off, warn, skip or rollback (to the last checkpoint, LR halved, after\n"
           "                  3 bad steps in a row) on NaN/Inf or spikes (%s)\n", pt__run_guards[r->guard >= -1 && r->guard <= 2 ? r->guard + 1 : 0]);
    printf("  --guard-z Z     spike threshold in standard deviations (%g)\n", r->guard_z > 0 ? (double)r->guard_z : 6.0);
}

/* rank 0: text -> shards of split ("train"/"val") when DIR has text and no shards; err "" = fine */
static void pt__run_shards(pt_ctx *ctx, const char *dir, const char *split, char *err, size_t errlen) {
    char path[1024];
    unsigned char chunk[1 << 14];
    int64_t cap = 1 << 24, n = 0, total = 0;
    int shards = 0;
    size_t got, i;
    uint32_t *buf;
    FILE *f;
    snprintf(path, sizeof path, "%s/%s.txt", dir, split);
    if (!(f = fopen(path, "rb"))) {
        pt__msg(err, errlen, "--data %s: cannot read %s", dir, path);
        return;
    }
    if (!(buf = (uint32_t *)PT_MALLOC(sizeof(uint32_t) * (size_t)cap))) {
        fclose(f);
        pt__msg(err, errlen, "--data %s: out of memory", dir);
        return;
    }
    do { /* every byte is a token; shards of at most 2^24 tokens, as tools/prepare_shards writes them */
        got = fread(chunk, 1, sizeof chunk, f);
        for (i = 0; i < got; i++) buf[n++] = chunk[i];
        if (n && (n > cap - (int64_t)sizeof chunk || got == 0)) {
            snprintf(path, sizeof path, "%s/%s_%06d.bin", dir, split, shards++);
            if (pt_shard_write(ctx, path, PT_SHARD_PTRAIN, buf, n, 256) != PT_OK) {
                pt__msg(err, errlen, "%s", pt_error(ctx));
                break;
            }
            total += n, n = 0;
        }
    } while (got > 0);
    fclose(f);
    PT_FREE(buf);
    if (!err[0] && total == 0) pt__msg(err, errlen, "--data %s: %s/%s.txt is empty", dir, dir, split);
    if (!err[0]) printf("prepared %s/%s_*.bin: %lld tokens in %d shard(s) from %s.txt\n", dir, split, (long long)total, shards, split);
}

PTDEF pt_status pt_run_data(pt_ctx *ctx, pt_run *r, int64_t batch, int64_t seq, uint64_t seed) {
    const pt_dist *d = ctx ? ctx->desc.dist : NULL;
    pt_coords me = pt_dist_coords(d);
    pt_layout lay = pt_dist_layout(d);
    pt_loader_desc ld;
    pt_shard_info info;
    char err[PT__ERRLEN], path[1024];
    const char *dir = r ? r->data : NULL;
    pt_status st = PT_OK;
    if (!ctx) return PT_ERR_ARG;
    if (!r || !dir || !dir[0]) return (pt_status)(pt__fail(ctx, PT_ERR_ARG, "pt_run_data: no data directory (--data DIR)"), PT_ERR_ARG);
    r->batch = batch, r->seq = seq;
    err[0] = 0;
    if (pt_dist_rank(d) == 0 && !pt__run_exists(dir, "train_000000.bin")) { /* rank 0 prepares, the others wait */
        if (!pt__run_exists(dir, "train.txt") && r->prepare) {
            printf("preparing the corpus: %s\n", r->prepare);
            fflush(stdout);
            if (system(r->prepare) != 0) pt__msg(err, sizeof err, "`%s` failed (for the fortunes corpus: is the Debian package 'fortunes' installed? make deps)", r->prepare);
        }
        if (err[0]) {
        } else if (!pt__run_exists(dir, "train.txt") || !pt__run_exists(dir, "val.txt"))
            pt__msg(err, sizeof err, "--data %s: expected token shards %s/train_000000.bin ... and val_*.bin (as tools/prepare_shards writes them) "
                    "or text %s/train.txt and val.txt to make them from; found neither", dir, dir, dir);
        else {
            pt__run_shards(ctx, dir, "val", err, sizeof err); /* train last: its first shard marks the set complete */
            if (!err[0]) pt__run_shards(ctx, dir, "train", err, sizeof err);
            fflush(stdout);
        }
    }
    pt_dist_agree_msg(d, !err[0], err, sizeof err); /* a barrier: the shards exist now if they can */
    if (!err[0] && !pt__run_exists(dir, "val_000000.bin"))
        pt__msg(err, sizeof err, "--data %s: expected validation shards %s/val_*.bin next to the train shards", dir, dir);
    snprintf(path, sizeof path, "%s/train_000000.bin", dir);
    if (!err[0] && pt_shard_info_read(ctx, path, &info) != PT_OK) pt__msg(err, sizeof err, "--data %s: %s", dir, pt_error(ctx));
    if (!err[0]) { /* not recorded (llm.c's layout): GPT-2's vocabulary for llm.c, else all uint16 ids */
        r->vocab = info.vocab > 0 ? info.vocab : info.format == PT_SHARD_LLMC ? 50257 : 65536;
        r->tok = pt_tokenizer_load_dir(ctx, dir); /* NULL without an error: byte-level shards */
        if (!r->tok && pt_status_get(ctx) != PT_OK) pt__msg(err, sizeof err, "--data %s: %s", dir, pt_error(ctx));
        else if (r->tok && pt_tokenizer_vocab(r->tok) != r->vocab)
            pt__msg(err, sizeof err, "--data %s: %s/%s has a vocabulary of %d, the shards %d (prepared with another tokenizer? run tools/prepare_shards again)",
                    dir, dir, PT_TOKENIZER_FILE, (int)pt_tokenizer_vocab(r->tok), (int)r->vocab);
    }
    if (!err[0]) {
        memset(&ld, 0, sizeof ld);
        ld.dir = dir, ld.prefix = "train_", ld.batch = batch, ld.seq = seq, ld.rank = me.dp, ld.ranks = lay.dp;
        ld.seed = seed, ld.shuffle = 1, ld.prefetch = -1;
        if (!(r->train = pt_loader_new(ctx, &ld)) || pt_loader_register(r->train, "data") != PT_OK) pt__msg(err, sizeof err, "--data %s: %s", dir, pt_error(ctx));
        ld.prefix = "val_", ld.shuffle = 0, ld.prefetch = 0;
        if (!err[0] && !(r->val = pt_loader_new(ctx, &ld))) pt__msg(err, sizeof err, "--data %s (validation): %s", dir, pt_error(ctx));
    }
    st = pt_status_get(ctx) != PT_OK ? pt_status_get(ctx) : PT_ERR_IO;
    if (!pt_dist_agree_msg(d, !err[0], err, sizeof err)) {
        pt_run_free(r);
        pt_error_clear(ctx);
        return (pt_status)(pt__fail(ctx, st, "%s", err), st);
    }
    if (pt_dist_rank(d) == 0) {
        pt_loader_stats t = pt_loader_stats_get(r->train), v = pt_loader_stats_get(r->val);
        printf("data: %s: %lld train tokens in %lld shard(s), %lld val tokens; vocabulary %d (%s); %lld batches of %lld x %lld per epoch\n", dir,
               (long long)t.tokens, (long long)t.shards, (long long)v.tokens, (int)r->vocab, r->tok ? "BPE, " PT_TOKENIZER_FILE : "bytes",
               (long long)t.batches_per_epoch, (long long)batch, (long long)seq);
        fflush(stdout);
    }
    return PT_OK;
}

PTDEF int pt_run_val_rewind(pt_run *r, int batches) {
    pt_loader_state s;
    int64_t per = pt_loader_stats_get(r ? r->val : NULL).batches_per_epoch;
    if (!r || !r->val) return 0;
    s = pt_loader_get_state(r->val);
    s.epoch = 0, s.sample = 0, s.batches = 0;
    if (pt_loader_set_state(r->val, &s) != PT_OK) return 0;
    return batches < per ? batches : (int)per;
}


PTDEF pt_status pt_run_save(pt_ctx *ctx, pt_optim *o, const pt_run *r, int64_t step) {
    pt_ckpt_opts ck;
    memset(&ck, 0, sizeof ck);
    ck.keep_last = r->keep_last > 0 ? r->keep_last : 3, ck.model = r->model, ck.async = r->ckpt_async;
    if (r->mon) return pt_monitor_ckpt_save(r->mon, o, r->ckpt_dir, step, &ck);
    return pt_ckpt_save(ctx, o, r->ckpt_dir, step, &ck);
}

/* the guard's events into the log (world rank 0 writes for all: every rank sees the same events) */
static void pt__run_on_guard(void *user, const pt_guard_event *e) {
    static const char *const verdicts[] = {"update", "skip", "rollback"};
    pt_run *r = (pt_run *)user;
    if (!r->mon || pt_dist_rank(r->ctx->desc.dist) != 0) return;
    pt_monitor_event(r->mon, pt_guard_event_name(e->kind), "rank=%d verdict=%s value=%g z=%g mean=%g std=%g loaded_step=%lld detail=%s", (int)e->rank,
                     verdicts[e->verdict >= 0 && e->verdict <= 2 ? e->verdict : 0], e->value, e->z, e->mean, e->std, (long long)e->loaded_step,
                     e->detail);
}

static pt_guard *pt__run_guard_new(pt_ctx *ctx, pt_run *r) {
    pt_guard_desc gd;
    memset(&gd, 0, sizeof gd);
    gd.policy = r->guard, gd.z_threshold = r->guard_z, gd.ckpt_dir = r->ckpt_dir;
    gd.replica_check_every = 100; /* DP replicas compared by hash every 100 steps (one CRC32C of the parameters) */
    gd.on_event = pt__run_on_guard, gd.user = r;
    return pt_guard_new(ctx, &gd);
}

/* 1 if the checkpoint pt_ckpt_load would try first holds registered state `name` (rank 0 reads, all agree) */
static int pt__run_ckpt_has_state(const pt_dist *d, const char *dir, const char *name) {
    char path[1200], line[512];
    size_t n = strlen(name);
    int has = 0;
    FILE *f;
    if (pt_dist_rank(d) == 0 && pt_ckpt_step_dir(dir, path, 1024) == PT_OK && (strcat(path, "/manifest"), (f = fopen(path, "r")) != NULL)) {
        while (!has && fgets(line, sizeof line, f))
            has = !strncmp(line, "state name=", 11) && !strncmp(line + 11, name, n) && line[11 + n] == ' ';
        fclose(f);
    }
    return pt_dist_agree(d, pt_dist_rank(d) != 0 || has); /* all ranks: 1 only if rank 0 found it */
}

PTDEF pt_status pt_run_start(pt_ctx *ctx, pt_optim *o, pt_run *r, int64_t steps, int64_t *first_step) {
    const pt_dist *d = ctx ? ctx->desc.dist : NULL;
    int root = pt_dist_rank(d) == 0, loaded = 0;
    int64_t k = 0;
    if (first_step) *first_step = 0;
    if (!ctx || !r) return PT_ERR_ARG;
    r->ctx = ctx, r->mon = NULL, r->health = NULL;
    /* the guard before the load (its state is checkpointed); a checkpoint saved without one loads
       with a fresh one */
    if (r->guard >= 0 && !(r->health = pt__run_guard_new(ctx, r))) return pt_status_get(ctx);
    /* --resume-if-any: a checkpoint is committed once DIR/latest names it (rank 0 looks, all agree) */
    if (r->resume == 2 && !pt_dist_agree(d, !root || pt__run_exists(r->ckpt_dir, "latest"))) {
        if (root) printf("no checkpoint in %s yet: starting at step 0\n", r->ckpt_dir);
    } else if (r->resume) {
        int fresh = r->health && !pt__run_ckpt_has_state(d, r->ckpt_dir, "guard");
        if (fresh) pt_guard_free(r->health), r->health = NULL;
        if (pt_ckpt_load(ctx, o, r->ckpt_dir, &k) != PT_OK) return pt_status_get(ctx);
        if (fresh && !(r->health = pt__run_guard_new(ctx, r))) return pt_status_get(ctx);
        loaded = 1;
        if (root && k >= steps)
            printf("resumed from %s at step %lld: the run is already complete (--steps %lld); nothing to train "
                   "(raise --steps, or delete %s to start over)\n", r->ckpt_dir, (long long)k, (long long)steps, r->ckpt_dir);
        else if (root) printf("resumed from %s at step %lld%s\n", r->ckpt_dir, (long long)k, fresh ? " (its guard statistics start afresh)" : "");
    }
    if (root) fflush(stdout);
    if (first_step) *first_step = k;
    if (r->trace_path && pt_trace_start(ctx, d, r->trace_path, 0) != PT_OK) return pt_status_get(ctx);
    pt_trace_step(ctx, k);
    if (r->log_path) {
        const char *cfg[] = {"guard", pt__run_guards[r->guard >= -1 && r->guard <= 2 ? r->guard + 1 : 0], "ckpt_async", r->ckpt_async ? "1" : "0",
                             "batch", NULL, NULL};
        char batch[32];
        pt_monitor_desc md;
        snprintf(batch, sizeof batch, "%lld", (long long)r->batch);
        cfg[5] = batch;
        memset(&md, 0, sizeof md);
        md.log_path = r->log_path, md.append = loaded, md.model = r->model, md.seq = r->seq, md.config = cfg;
        md.loader = r->train, md.pp = r->pp, md.first_step = k, md.total_steps = steps;
        if (!(r->mon = pt_monitor_new(ctx, d, &md))) return pt_status_get(ctx);
        if (loaded) pt_monitor_event(r->mon, "ckpt_load", "dir=%s ckpt_step=%lld", r->ckpt_dir, (long long)k);
    }
    pt__run_stopping = 0;
    signal(SIGINT, pt__run_on_signal);
    signal(SIGTERM, pt__run_on_signal);
    r->t_update = 0;
    return PT_OK;
}

PTDEF float pt_run_lr(const pt_run *r, float lr) { return r && r->health ? lr * pt_guard_lr_scale(r->health) : lr; }
PTDEF void pt_run_val(pt_run *r, float val_loss, double seconds) {
    if (!r || !r->mon) return;
    pt_monitor_val_loss(r->mon, val_loss);
    pt_monitor_add_time(r->mon, PT_MON_EVAL, seconds);
}

/* commits the asynchronous save in flight (poll: only once every rank wrote it), says so and logs it */
static pt_status pt__run_commit_if(pt_run *r, int poll) {
    int64_t pending = pt_ckpt_pending(r->ctx);
    pt_ckpt_stats cs;
    if (pending < 0) return PT_OK;
    if ((poll ? pt_ckpt_poll(r->ctx) : pt_ckpt_wait(r->ctx)) != PT_OK) return pt_status_get(r->ctx);
    if (pt_ckpt_pending(r->ctx) >= 0) return PT_OK; /* still being written */
    cs = pt_ckpt_stats_get(r->ctx);
    if (r->mon) pt_monitor_event(r->mon, "ckpt_commit", "dir=%s ckpt_step=%lld write_s=%.6f wait_s=%.6f commit_s=%.6f", r->ckpt_dir, (long long)cs.step,
                                 cs.write_s, cs.wait_s, cs.commit_s);
    if (pt_dist_rank(r->ctx->desc.dist) == 0)
        printf("checkpoint: step %lld committed to %s/step_%09lld (written in %.2f s in the background)\n", (long long)cs.step, r->ckpt_dir,
               (long long)cs.step, cs.write_s);
    return PT_OK;
}
static pt_status pt__run_commit(pt_run *r) { return pt__run_commit_if(r, 0); }

PTDEF int pt_run_guard(pt_ctx *ctx, pt_optim *o, pt_run *r, int64_t step, float loss, float grad_norm, int64_t *resume_at) {
    int v;
    int64_t k = step;
    if (!ctx || !r) return -1;
    if (resume_at) *resume_at = step;
    v = r->health ? pt_guard_check(r->health, step, loss, grad_norm) : PT_GUARD_OK;
    if (v == PT_GUARD_ROLLBACK) {
        if (pt__run_commit(r) != PT_OK || pt_guard_rollback(r->health, o, &k) != PT_OK) return -1;
        if (r->mon) { /* the step rolled back is a step of the log too (no update); then the log continues at k */
            pt_monitor_step ms;
            ms.loss = loss, ms.grad_norm = grad_norm, ms.lr = NAN, ms.tokens = r->batch * r->seq;
            if (pt_monitor_step_end(r->mon, &ms) != PT_OK) return -1;
            pt_monitor_set_step(r->mon, k);
        }
        pt_trace_step(ctx, k);
        if (resume_at) *resume_at = k;
        if (pt_dist_rank(ctx->desc.dist) == 0)
            printf("guard: step %lld: rolled back to the checkpoint of step %lld in %s, learning rate scale now %g\n", (long long)step, (long long)k,
                   r->ckpt_dir, (double)pt_guard_lr_scale(r->health));
    }
    r->t_update = pt_time();
    return v;
}

PTDEF int pt_run_step_end(pt_ctx *ctx, pt_optim *o, pt_run *r, int64_t done, int64_t steps, float loss, float grad_norm, float lr) {
    const pt_dist *d = ctx ? ctx->desc.dist : NULL;
    int stop, save, saved = 0;
    double t0, tc = 0;
    if (!ctx || !r) return -1;
    t0 = pt_time();
    if (r->t_update > 0 && t0 > r->t_update) pt_trace_event(ctx, PT_TRACE_OPTIM, "optim", r->t_update, t0, -1, -1);
    r->t_update = 0;
    stop = !pt_dist_agree(d, !pt__run_stopping); /* a signal may reach only some ranks */
    save = r->ckpt_dir && ((r->ckpt_every > 0 && done % r->ckpt_every == 0) || done == steps || stop);
    if (pt_ckpt_pending(ctx) >= 0) { /* the save in flight: committed once every rank wrote it, before the next */
        if (pt__run_commit_if(r, !save) != PT_OK) return -1;
        tc = pt_time() - t0;
    }
    if (save) {
        double t1 = pt_time();
        if (pt_run_save(ctx, o, r, done) != PT_OK) return -1;
        saved = 1;
        if (pt_dist_rank(d) == 0)
            printf("checkpoint: step %lld %s %s/step_%09lld (%.2f s)\n", (long long)done, r->ckpt_async ? "snapshot taken, being written to" : "saved to",
                   r->ckpt_dir, (long long)done, pt_time() - t1);
        if (r->ckpt_async && (done == steps || stop)) { /* the last one is committed now */
            double t2 = pt_time();
            if (pt__run_commit(r) != PT_OK) return -1;
            tc += pt_time() - t2;
        }
    }
    if (r->mon) {
        pt_monitor_step ms;
        ms.loss = loss, ms.grad_norm = grad_norm, ms.lr = lr, ms.tokens = r->batch * r->seq;
        pt_monitor_add_time(r->mon, PT_MON_CKPT, tc); /* commits (pt_monitor_ckpt_save timed the saves) */
        if (pt_monitor_step_end(r->mon, &ms) != PT_OK) return -1;
    }
    pt_trace_step(ctx, done);
    if (stop && pt_dist_rank(d) == 0) {
        if (!saved) printf("interrupted at step %lld; nothing saved (no --ckpt-dir)\n", (long long)done);
        else {
            printf("interrupted at step %lld; resume with: ", (long long)done);
#ifdef PTRAIN_MPI
            printf("mpirun -np %d ", pt_dist_size(d));
#endif
            if (!r->cmd[0]) printf("the same command with --resume\n");
            else printf("%s%s\n", r->cmd, r->resume ? "" : " --resume");
        }
        fflush(stdout);
    }
    return stop;
}

PTDEF void pt_run_print(const pt_run *r, const int32_t *ids, int64_t n, void *file) {
    FILE *f = file ? (FILE *)file : stdout;
    int64_t i, len;
    unsigned char *text;
    if (!ids || n <= 0) return;
    if (r && r->tok) {
        for (i = 0; i < n; i++) /* the decoder expects ids of its vocabulary */
            if (ids[i] < 0 || ids[i] >= pt_tokenizer_vocab(r->tok)) break;
        len = i == n ? pt_tokenizer_decode(r->tok, ids, n, NULL, 0) : -1;
        text = len > 0 ? (unsigned char *)PT_MALLOC((size_t)len) : NULL;
        if (text && pt_tokenizer_decode(r->tok, ids, n, text, len) == len) {
            for (i = 0; i < len; i++) fputc(text[i] >= 32 || text[i] == '\n' || text[i] == '\t' ? text[i] : '?', f);
            PT_FREE(text);
            return;
        }
        PT_FREE(text);
    }
    for (i = 0; i < n; i++) fputc(ids[i] >= 32 && ids[i] < 256 ? ids[i] : ids[i] == '\n' || ids[i] == '\t' ? ids[i] : '?', f);
}

PTDEF void pt_run_free(pt_run *r) {
    if (!r) return;
    if (r->ctx) { /* pt_run_start ran: the collective part */
        pt_ctx *ctx = r->ctx;
        int root = pt_dist_rank(ctx->desc.dist) == 0;
        int64_t pending = pt_ckpt_pending(ctx);
        if (pt__run_commit(r) != PT_OK && root) fprintf(stderr, "checkpoint of step %lld lost: %s\n", (long long)pending, pt_error(ctx));
        if (r->trace_path && pt_trace_on(ctx)) {
            if (pt_trace_finish(ctx) != PT_OK && root) fprintf(stderr, "--trace %s: %s\n", r->trace_path, pt_error(ctx));
            else if (root) printf("trace: %s (every rank; open in ui.perfetto.dev)\n", r->trace_path);
        }
        pt_monitor_free(r->mon);
        pt_guard_free(r->health);
        if (root) fflush(stdout);
        r->ctx = NULL, r->mon = NULL, r->health = NULL;
    }
    pt_loader_free(r->train);
    pt_loader_free(r->val);
    pt_tokenizer_free(r->tok);
    r->train = r->val = NULL;
    r->tok = NULL;
}
#endif /* PTRAIN_HARNESS implementation */

/* -------------------------------------------------------------------------------------------------
   LICENSE: this software is available under two licenses; choose whichever you prefer.
   A - MIT License. Copyright (c) 2026 the ptrain.h authors. Permission is hereby granted, free of
   charge, to any person obtaining a copy of this software and associated documentation files (the
   "Software"), to deal in the Software without restriction, including without limitation the
   rights to use, copy, modify, merge, publish, distribute, sublicense, and/or sell copies of the
   Software, and to permit persons to whom the Software is furnished to do so, subject to the
   following conditions: The above copyright notice and this permission notice shall be included in
   all copies or substantial portions of the Software. THE SOFTWARE IS PROVIDED "AS IS", WITHOUT
   WARRANTY OF ANY KIND, EXPRESS OR IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF
   MERCHANTABILITY, FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
   AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER LIABILITY, WHETHER IN AN
   ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM, OUT OF OR IN CONNECTION WITH THE SOFTWARE OR
   THE USE OR OTHER DEALINGS IN THE SOFTWARE.
   B - Public Domain (www.unlicense.org). This is free and unencumbered software released into the
   public domain. Anyone is free to copy, modify, publish, use, compile, sell, or distribute this
   software, either in source code form or as a compiled binary, for any purpose, commercial or
   non-commercial, and by any means.
   ------------------------------------------------------------------------------------------------- */
