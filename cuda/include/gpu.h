/* gpu: the CUDA backend (prefix gpu_, since cuda* is NVIDIA's namespace).
 *
 * The one public header of the cuda module; no CUDA types appear here. Built only when the
 * `cuda` feature is enabled and nvcc is found; nothing in holod requires a GPU to build or test.
 *
 * Threads: a struct gpu_context owns one device, one stream and its allocations, and belongs to
 * the model worker; other threads hand work to that thread (conventions.md).
 * Errors: int functions return >= 0 or a negative errno; CUDA errors become -EIO (kernel or
 * driver failure), -ENOMEM (allocation), -ENODEV (no device), with a debug log naming the CUDA
 * error at file:line.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
/* C names a struct and a function alike (gpu_device_info); C++ would warn that one hides the
 * other in every .cu file that includes this header. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wshadow"
extern "C" {
#endif

struct gpu_context;

struct gpu_device_info {
	char name[256];
	int compute_major, compute_minor;
	size_t total_memory;
	int multiprocessors;
};

/* Number of usable CUDA devices; 0 when there is none or no driver (never an error). */
int gpu_device_count(void);
/* The same count, or when there is none, one sentence in why (may be NULL) saying why and 0 (no
 * device, no driver, the runtime's error) or -ENXIO: a driver is there but too old for this
 * build's CUDA runtime (the sentence names the CUDA versions the driver and the runtime are, and
 * the driver series the runtime needs). */
int gpu_device_count_why(char *why, size_t len);
int gpu_device_info(int device, struct gpu_device_info *ret);

/* Whether this build's devices are the CPU emulation (-Dcuda-emulation=true): they run every
 * kernel, but are no accelerator, so nothing picks them unasked. */
bool gpu_devices_emulated(void);

/* Whether a sticky error (an illegal address or instruction, a launch failure, an uncorrectable
 * ECC error...) has broken this process's CUDA context: then every later CUDA call fails until
 * gpu_device_reset(). True with "cudaErrorX (its text)" in buf (may be NULL). */
bool gpu_device_fault(char *buf, size_t len);
/* Repairs the device after a fault (cudaDeviceReset): every allocation, stream and graph of the
 * process on it is gone, so call it once all were freed (their frees fail quietly). Returns 0 or
 * -EIO. */
int gpu_device_reset(int device);

/* NULL + errno (ENODEV when the device does not exist). */
struct gpu_context *gpu_context_create(int device);
void gpu_context_destroy(struct gpu_context *g);

/* RMSNorm over rows: out[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * w, fp32 in and out,
 * host buffers (copied to and from the device). Tested against the CPU backend's own
 * cpu_rmsnorm_rows (tests/gpu/test-gpu-rmsnorm.c). */
int gpu_rmsnorm_f32(struct gpu_context *g, const float *x, const float *w, float *out, int rows, int cols,
		    float eps);

/* ---- device memory (gpu_memory.c) ----
 * Device pointers are opaque `void *` here; they are valid only on the context's device and
 * only for these functions and the module's kernels. Every function runs on the context's
 * stream, in order: copies to and from the host return when the host buffer may be reused (and,
 * from the device, holds the data); device-to-device copies and memsets are queued, and
 * gpu_synchronize() waits for them. Errors are -ENOMEM (allocation), -EINVAL (a bad argument),
 * -EIO (a device failure). */

/* The device's free and total memory in bytes, as the driver reports them now. */
int gpu_memory_info(struct gpu_context *g, size_t *ret_free, size_t *ret_total);
/* Allocates `bytes` (> 0) of device memory, 256-byte aligned, contents undefined. */
int gpu_alloc(struct gpu_context *g, size_t bytes, void **ret_ptr);
/* Accepts NULL. The memory may still be in use by queued work: it is freed in stream order. */
void gpu_free(struct gpu_context *g, void *ptr);
int gpu_copy_to_device(struct gpu_context *g, void *dst, const void *src, size_t bytes);
int gpu_copy_to_host(struct gpu_context *g, void *dst, const void *src, size_t bytes);
int gpu_copy_on_device(struct gpu_context *g, void *dst, const void *src, size_t bytes);
int gpu_memset(struct gpu_context *g, void *dst, int byte, size_t bytes);
int gpu_synchronize(struct gpu_context *g);
/* Page-locked host memory (cudaHostAlloc), so a copy to the device is one DMA from it rather
 * than a pass through the driver's own staging buffer: for data that crosses the bus on every
 * request (the screenshot). gpu_host_free() accepts NULL and waits for the device first. */
int gpu_host_alloc(struct gpu_context *g, size_t bytes, void **ret_ptr);
void gpu_host_free(struct gpu_context *g, void *ptr);
/* The device index the context was created for. */
int gpu_context_device(const struct gpu_context *g);

/* ---- graphs (graph.c) ----
 * Work queued on the context's stream between gpu_graph_begin() and gpu_graph_end() is captured
 * instead of run (kernels, device copies and memsets; nothing that waits for the host, such as
 * gpu_copy_to_host or gpu_synchronize, may be called in between), then replayed by
 * gpu_graph_launch() with the same arguments: a replay reads whatever the captured device
 * buffers hold at that time. gpu_graph_abort() ends a capture that must be given up. */
struct gpu_graph;
int gpu_graph_begin(struct gpu_context *g);
int gpu_graph_end(struct gpu_context *g, struct gpu_graph **ret);
int gpu_graph_abort(struct gpu_context *g);
int gpu_graph_launch(struct gpu_context *g, struct gpu_graph *graph);
void gpu_graph_destroy(struct gpu_graph *graph);

/* ---- profile (profile.c) ----
 * Device time per call site: while enabled, gpu_profile_begin(kind, site) ... gpu_profile_end()
 * around the work of one call site (one kernel launch or one GEMM call; not nested) records CUDA
 * events on the stream, so the site's time is what the device spent between them (on the
 * emulation: host time). `site` must outlive the context (a string literal). Both are no-ops
 * returning 0 while profiling is off. Not for work being captured into a graph. */
enum gpu_profile_kind { GPU_PROFILE_KERNEL, GPU_PROFILE_GEMM };
/* Turns profiling on (allocating its events; -ENOMEM, -EIO) or off (dropping the counts). */
int gpu_profile_enable(struct gpu_context *g, bool on);
bool gpu_profile_enabled(const struct gpu_context *g);
int gpu_profile_begin(struct gpu_context *g, enum gpu_profile_kind kind, const char *site);
int gpu_profile_end(struct gpu_context *g);
/* Waits for the stream, then returns the number of sites that ran and sets *ret_lines to a
 * NULL-terminated array of lines, in first-call order, `kernel NAME launches=N ms=T` or
 * `gemm SITE calls=N ms=T`; free it with gpu_profile_lines_free(). 0 lines (and an empty
 * array, or NULL while profiling is off) when nothing ran. */
int gpu_profile_report(struct gpu_context *g, char ***ret_lines);
void gpu_profile_lines_free(char **lines);
/* Zeroes the counts (profiling stays on). */
void gpu_profile_clear(struct gpu_context *g);
/* Copies made through gpu_copy_* while profiling was on (since it was turned on or cleared),
 * per direction: so a test or `--profile` shows what crossed the bus (e.g. that image rows
 * stay on the device). All zero while profiling is off. */
struct gpu_copy_counts {
	uint64_t to_device_calls, to_device_bytes;
	uint64_t to_host_calls, to_host_bytes;
	uint64_t on_device_calls, on_device_bytes;
};
void gpu_profile_copies(const struct gpu_context *g, struct gpu_copy_counts *ret);

/* ---- language-model operations (issue 11) ----
 * Every operation below takes device pointers, runs asynchronously on the context's stream and
 * returns 0, -EINVAL (an argument outside its contract, nothing queued) or -EIO (the launch
 * failed). None allocates or synchronises with the host, so each can be captured into a CUDA
 * graph. Matrices are row-major; `ld*` arguments are row strides in elements. */

/* Most rows (positions) one call of the operations below processes. */
#define GPU_MAX_ROWS (1 << 24)

enum gpu_dtype {
	GPU_DTYPE_F32,
	GPU_DTYPE_BF16, /* carried as uint16_t on the host */
};

/* GEMMs through cuBLASLt (gemm.c). A struct gpu_blas owns the cuBLASLt handle, a workspace
 * allocated once at creation (so calls never allocate and can be captured) and a cache of the
 * descriptors and the heuristic's algorithm per problem shape. It belongs to the context's
 * thread. NULL + errno (ENOMEM, EIO). */
struct gpu_blas;
struct gpu_blas *gpu_blas_create(struct gpu_context *g);
/* The workspace's device bytes (the memory plan counts them: engine/backend/cuda/device_plan.h). */
#define GPU_BLAS_WORKSPACE_BYTES ((size_t)32 << 20)
void gpu_blas_destroy(struct gpu_blas *gm);

/* Problem shapes one struct gpu_blas caches; beyond them the least recently used is dropped
 * (and rebuilt when it comes back). */
#define GPU_BLAS_MAX_SHAPES 256
/* Largest of rows, out, in and the strides (cuBLASLt's int32 dimensions). */
#define GPU_GEMM_MAX_DIM ((int64_t)1 << 30)

/* y[r][0:out] = W x[r] for r in [0, rows) (accumulate: y[r] += W x[r], the residual add fused
 * into the GEMM), with W [out][in] (row stride in), x [rows][ldx] of W's dtype, y [rows][ldy] of
 * y_dtype. fp32 W: fp32 x and y (exact fp32 products, no TF32). bf16 W: bf16 x, y fp32 or bf16
 * (fp32 accumulation, y rounded once). y must not overlap W or x. rows == 0 does nothing.
 * Returns 0, -EINVAL, -EIO. */
int gpu_gemm(struct gpu_blas *gm, const void *w, enum gpu_dtype w_dtype, int out, int in, const void *x,
	     size_t ldx, int rows, void *y, enum gpu_dtype y_dtype, size_t ldy, bool accumulate);

/* The prefill's FP8 product (gemm.c: cuBLASLt's FP8 matmul, e4m3 x e4m3, fp32 sums): y[r]
 * (+)= sw sx W x[r], W `out` rows of e4m3 codes ldw bytes apart (fp8 records: ldw =
 * gpu_quant_row_bytes(GPU_QUANT_FP8, in)), x [rows][ldx] e4m3 codes (gpu_fp8_quantize), sw and sx
 * device fp32 scales read when the product runs, y [rows][ldy] bf16 or fp32 (rounded once).
 * cuBLASLt's FP8 rules (gpu_gemm_fp8_ok): in, ldw, ldx and ldy's bytes multiples of 16, every
 * pointer 16-byte aligned. Returns 0, -EINVAL (a refused shape: logged), -EIO. */
bool gpu_gemm_fp8_ok(int in, size_t ldw, const void *w, const void *x, size_t ldx, const void *y,
		     enum gpu_dtype y_dtype, size_t ldy);
int gpu_gemm_fp8(struct gpu_blas *gm, const void *w, size_t ldw, const float *sw, int out, int in,
		 const void *x, size_t ldx, const float *sx, int rows, void *y, enum gpu_dtype y_dtype,
		 size_t ldy, bool accumulate);

/* Quantized weights (quant_gemv.cu, docs/quantization.md "On CUDA"): engine/quant/quant.h's row
 * records as they are, `out` rows of gpu_quant_row_bytes(f, in) bytes each (q8: int8 codes of
 * blocks of 32 columns, padded to 64 bytes, then one fp16 scale per block, padded to 64 bytes;
 * q4: 16 bytes of nibbles per block (byte j: column j low, j + 16 high), padded to 64 bytes,
 * then one uint16 dz per block (quant.h: d's fp16 bits less 5 and the offset code), padded;
 * fp8: one e4m3 code per column, padded to 64 bytes, then the row's fp32 scale in 64 bytes),
 * the first row 16-byte aligned. The values are quant.h's enum quant_format's. */
enum gpu_quant {
	GPU_QUANT_Q8,
	GPU_QUANT_Q4,
	GPU_QUANT_FP8,
};
/* Tokens one GEMV launch multiplies per weight load (its registers); more rows take more. */
#define GPU_QGEMV_TOKENS 8
/* Bytes of one row's record (quant_row_bytes()); 0 for a bad format or in < 1. */
size_t gpu_quant_row_bytes(enum gpu_quant f, int in);
/* The decode GEMV: y[r][0:out] = W x[r] for r in [0, rows) (accumulate: y[r] += W x[r]), x
 * [rows][ldx] fp32 or bf16, y [rows][ldy] fp32 or bf16 (rounded once), fp32 sums of the exact
 * dequantized weights. Every GPU_QGEMV_TOKENS rows read the weights once. y must not overlap W
 * or x. Returns 0, -EINVAL, -EIO. */
int gpu_qgemv(struct gpu_context *g, const void *w, enum gpu_quant f, int out, int in, const void *x,
	      enum gpu_dtype x_dtype, size_t ldx, int rows, void *y, enum gpu_dtype y_dtype, size_t ldy,
	      bool accumulate);
/* The weights of `out` records into dst [out][in] of dtype: fp32 exactly (quant_row_to_f32()),
 * bf16 rounded to nearest even from it. Returns 0, -EINVAL, -EIO. */
int gpu_dequant(struct gpu_context *g, const void *w, enum gpu_quant f, int out, int in, void *dst,
		enum gpu_dtype dtype);

/* How gpu_fp8_quantize() scales the activations: one scale for all rows, one per row (token),
 * or the one the caller put in scales[0] (ModelOpt's static input_scale). */
enum gpu_fp8_scaling {
	GPU_FP8_PER_TENSOR,
	GPU_FP8_PER_TOKEN,
	GPU_FP8_GIVEN,
};
/* FP8 activations (quant_gemv.cu): x [rows][ldx] fp32 or bf16 into e4m3 codes q [rows][ldq],
 * c = e4m3(x / s) rounded to nearest even, saturating at +-448 (quant_f32_to_e4m3()'s codes), the
 * columns in..ldq zero. The scale s = amax / 448 (1 when every x is 0) is computed on the device
 * into scales[0] (PER_TENSOR: amax over every row; ws: `rows` floats of device scratch) or
 * scales[r] (PER_TOKEN: each row's own), or read from scales[0] (GIVEN). Returns 0, -EINVAL,
 * -EIO. */
int gpu_fp8_quantize(struct gpu_context *g, const void *x, enum gpu_dtype x_dtype, size_t ldx, int rows,
		     int in, void *q, size_t ldq, float *scales, enum gpu_fp8_scaling mode, float *ws);

/* Elementwise and row kernels of the language model (lm_ops.cu). */

/* Embedding rows: for r in [0, rows), h[r][0:d] = table[ids[r]] (table [vocab][d], fp32 or bf16,
 * widened exactly) when ids[r] >= 0, or spliced[-1 - ids[r]] (fp32 [n_spliced][d]) when
 * ids[r] < 0: the rows a caller splices in place of token embeddings (image features). ids is
 * a device array; an id outside both ranges fills its row with NaN (callers validate ids, so
 * this only makes an engine bug visible instead of reading out of bounds). h is fp32 [rows][d]. */
int gpu_embed(struct gpu_context *g, const void *table, enum gpu_dtype table_dtype, int vocab, int d,
	      const int32_t *ids, int rows, const float *spliced, int n_spliced, float *h);

/* The pre-norm of every block and the final norm, with the residual add fused: for each of
 * `rows` rows of d floats, first h[r] += delta[r] when delta is not NULL (h updated in place),
 * then out[r] = w * (h[r] / sqrt(mean(h[r]^2) + eps)), as cpu_rmsnorm_rows() computes it (fp32
 * sum of squares, 1 / sqrtf, the product in that order). h and delta have row stride d, out
 * [rows][ldo] of out_dtype (bf16 to feed a bf16 GEMM directly); out may equal h only for fp32
 * with ldo == d. w is fp32 [d]. */
int gpu_add_rmsnorm(struct gpu_context *g, float *h, const float *delta, const float *w, int rows, int d,
		    float eps, void *out, enum gpu_dtype out_dtype, size_t ldo);

/* ReLU² of the MLP: out[i] = max(u[i], 0)^2 for i in [0, n), u fp32, out of out_dtype; out may
 * equal u for fp32 (in place). NaN stays NaN. */
int gpu_relu2(struct gpu_context *g, const float *u, void *out, enum gpu_dtype out_dtype, size_t n);

/* Appends rows new positions to a KV cache at the position held in device memory, so a captured
 * graph stays valid as the sequence grows: for r in [0, rows), k_cache[*pos + r] = k_new[r] and
 * v_cache[*pos + r] = v_new[r], rows of kv_dim elements of `dtype`, contiguous. The caller
 * guarantees *pos + rows <= the caches' capacity. */
int gpu_kv_append(struct gpu_context *g, const void *k_new, const void *v_new, void *k_cache, void *v_cache,
		  enum gpu_dtype dtype, int kv_dim, int rows, const int32_t *pos);

/* Causal GQA attention without positions (attention.cu), the device form of
 * lm_attention_heads(): `rows` new positions, whose K and V rows are already in the caches,
 * attend over the n0 positions before them and themselves. Query head i (of hq) uses KV head
 * i / (hq / hkv); row t attends to positions s <= n0 + t with softmax(q . k_s / sqrt(dh)) over
 * v_s. q: fp32 [rows][ldq] (head i at column i * dh); k, v: the caches, [>= n0 + rows][hkv * dh]
 * of kv_dtype; o: [rows][ldo] of o_dtype (head i at column i * dh), not overlapping q.
 * n0 is read from device memory at *pos when pos is not NULL (a captured decode graph stays
 * valid as the sequence grows), else taken from the argument. max_len >= n0 + rows bounds every
 * length the call will see; it sizes the grid, so a graph captured with it serves every length
 * up to it. scratch: gpu_attention_scratch_floats(rows, max_len, hq, dh) fp32 of device memory
 * (may be NULL when that is 0), not shared with a concurrent call.
 * Work: rows of 16 or more with a bf16 cache and dh a multiple of 16 up to
 * GPU_ATTN_WMMA_MAX_HEAD_DIM run flash-style on tensor cores (bf16 q, probabilities and values,
 * fp32 accumulation and softmax); the rest (decode, fp32) run in fp32 with the sequence split
 * in parallel (one split per GPU_ATTN_SPLIT positions of max_len, at most GPU_ATTN_MAX_SPLITS /
 * rows and at least one), then a combine; the scratch is at most
 * max(rows, GPU_ATTN_MAX_SPLITS) * hq * (dh + 2) floats whatever max_len is. */
#define GPU_ATTN_MAX_HEAD_DIM 1024
/* The most rows (new positions) of one call: a grid's y dimension (65535); longer prefills
 * come in passes (the CUDA backend's are at most a few hundred rows). */
#define GPU_ATTN_MAX_ROWS 65535
#define GPU_ATTN_WMMA_MAX_HEAD_DIM 128
#define GPU_ATTN_SPLIT 256
#define GPU_ATTN_MAX_SPLITS 64
size_t gpu_attention_scratch_floats(int rows, int max_len, int hq, int dh);
int gpu_attention(struct gpu_context *g, const float *q, size_t ldq, const void *k, const void *v,
		  enum gpu_dtype kv_dtype, int hq, int hkv, int dh, int rows, const int32_t *pos, int n0,
		  int max_len, void *o, enum gpu_dtype o_dtype, size_t ldo, float *scratch);

/* ---- the Mamba-2 mixer (mamba.c; kernels in mamba_conv.cu, _ssd, _step, _norm) ----
 * Kernels of model.md 2.5 steps 2-6, queued on the context's stream; every pointer is device
 * memory, rows are row-major with the given leading dimension (in elements), and the math is
 * fp32 whatever the storage. Each returns 0, -EINVAL (a shape out of the limits below, sizes up
 * to 4096 and T up to 2^20; nothing is queued) or -EIO. The CPU references, which the tests hold
 * them to, are lm_conv_silu, lm_dt_softplus, lm_ssm_chunked / lm_ssm_scan and lm_gated_rmsnorm
 * (engine/backend/cpu/lm.h). None allocates or waits for the host, so each can be captured into a graph. */

/* The longest conv1d kernel and SSD chunk the kernels take. */
#define GPU_MAMBA_MAX_CONV_K 8
#define GPU_MAMBA_MAX_CHUNK 256

/* One Mamba layer's sizes: d_in = n_heads * head_dim; conv_dim = d_in + 2 * groups * state
 * (xBC = x, then B, then C, each group's `state` columns together); n_heads a multiple of groups;
 * chunk is the SSD block length of gpu_mamba_ssd (any value in [1, GPU_MAMBA_MAX_CHUNK]; the
 * result does not depend on it beyond fp32 rounding). state_dtype is how the SSM state is
 * stored (F32, the zero value, or BF16): a bf16 state is loaded to fp32, updated in fp32 and
 * stored rounded to nearest even, once per decode step and once at the end of an SSD span (the
 * CPU's bf16 state, lm_ssm_scan_s16 / lm_ssm_chunked_s16). */
struct gpu_mamba_dims {
	int n_heads, head_dim, state, groups, conv_k, chunk;
	enum gpu_dtype state_dtype;
};

/* Causal depthwise conv1d over T >= 1 positions, + bias, then SiLU:
 *   out[t][c] = silu(bias[c] + sum_{k < K} w[c][k] * u[t + k][c])
 * where u[] is conv_state's K-1 rows (oldest first) followed by raw's T rows (u[K-1 + t] is raw
 * row t). raw: [T][ld_raw]
 * pre-conv xBC (columns [0, conv_dim)); w: [conv_dim][K] (conv1d.weight) in w_dtype; bias:
 * [conv_dim] fp32, or NULL for none; conv_state: [K-1][conv_dim] fp32, replaced by the last K-1
 * rows of u; out: [T][ld_out] fp32, overlapping neither raw nor conv_state. T = 1 is the decode
 * step. Needs 1 <= K <= GPU_MAMBA_MAX_CONV_K. */
int gpu_mamba_conv_silu(struct gpu_context *g, const struct gpu_mamba_dims *dm, int T, const float *raw,
			size_t ld_raw, const void *w, enum gpu_dtype w_dtype, const float *bias,
			float *conv_state, float *out, size_t ld_out);

/* Device bytes of workspace gpu_mamba_ssd() needs for T positions (0 on a bad shape). */
size_t gpu_mamba_ssd_workspace_bytes(const struct gpu_mamba_dims *dm, int T);

/* The SSM over T >= 1 positions in the chunked SSD form (Mamba-2's chunk cumsum, CB^T, chunk
 * states, state passing and chunk scan kernels), from and into state [n_heads][head_dim][state]
 * of dm->state_dtype:
 *   dt[t][h] = clamp(softplus(dt_raw[t][h] + dt_bias[h]), dt_min, dt_max), A[h] = -exp(a_log[h])
 *   S_h = exp(dt A) S_h + dt x_h B_g^T,  y_h = S_h C_g + d_skip[h] x_h   (g = h / (H / G))
 * xbc: [T][ld_xbc] conv outputs (x at 0, B at d_in, C at d_in + groups * state); dt_raw:
 * [T][ld_dt] (n_heads columns); dt_bias, a_log, d_skip: [n_heads] fp32; y: [T][ld_y] (d_in
 * columns), overlapping no input; workspace: gpu_mamba_ssd_workspace_bytes(dm, T) device bytes
 * (256-byte aligned), contents undefined and not kept. */
int gpu_mamba_ssd(struct gpu_context *g, const struct gpu_mamba_dims *dm, int T, const float *xbc,
		  size_t ld_xbc, const float *dt_raw, size_t ld_dt, const float *dt_bias, const float *a_log,
		  const float *d_skip, float dt_min, float dt_max, void *state, float *y, size_t ld_y,
		  void *workspace);

/* The same recurrence for one position (decode), one fused kernel: xbc [conv_dim], dt_raw
 * [n_heads], y [d_in]; state updated in place. */
int gpu_mamba_ssm_step(struct gpu_context *g, const struct gpu_mamba_dims *dm, const float *xbc,
		       const float *dt_raw, const float *dt_bias, const float *a_log, const float *d_skip,
		       float dt_min, float dt_max, void *state, float *y);

/* Gated grouped RMSNorm over T rows: u = y * silu(z), then per group of d_in / groups channels
 *   out = w * (u / sqrt(mean(u^2) + eps))
 * y: [T][ld_y] fp32; z: [T][ld_z] fp32; w: [d_in] fp32; out: [T][ld_out] in out_dtype (bf16
 * rounds to nearest even), which may be y itself (fp32, same ld) but must not overlap it
 * otherwise. */
int gpu_mamba_gated_rmsnorm(struct gpu_context *g, const struct gpu_mamba_dims *dm, int T, const float *y,
			    size_t ld_y, const float *z, size_t ld_z, const float *w, float eps, void *out,
			    size_t ld_out, enum gpu_dtype out_dtype);

/* ---- decode rows of several sequences at once (issue 16) ----
 * One decode position of each of `rows` sequences in one launch: row r of the activations belongs
 * to the sequence seq[r] (a device array of descriptors), whose state the kernel finds from its
 * descriptor, so a captured graph serves any set of sequences written there before the launch.
 * A row with pos < 0 is inactive (the padding of a batch-size bucket): its state is neither read
 * nor written and its outputs are zeros. Otherwise the row is the sequence's position `pos`; the
 * caller guarantees pos < kv_cap where the sequence has attention layers.
 * State layout: `fixed` holds each Mamba layer's fp32 conv window [K-1][conv_dim] and SSM state
 * [H][P][N] (of the dims' state_dtype) at float offsets the caller passes per layer; `kv` holds [attention
 * layer][K, V] [kv_cap][kv_dim] elements of the KV dtype. Same rules as the single-sequence kernels above. */
struct gpu_seq_row {
	float *fixed;	/* conv windows and SSM states, or NULL without Mamba layers */
	void *kv;	/* KV caches, or NULL without attention layers */
	int32_t pos;	/* the position this row computes (tokens held before it); < 0: inactive */
	int32_t kv_cap; /* positions each K or V cache in kv holds */
};

/* gpu_mamba_conv_silu with T = 1 for each row: raw [rows][ld_raw], out [rows][ld_out], row r's
 * conv window at seq[r].fixed + conv_off (floats). */
int gpu_mamba_conv_silu_rows(struct gpu_context *g, const struct gpu_mamba_dims *dm, int rows,
			     const float *raw, size_t ld_raw, const void *w, enum gpu_dtype w_dtype,
			     const float *bias, const struct gpu_seq_row *seq, size_t conv_off, float *out,
			     size_t ld_out);

/* gpu_mamba_ssm_step for each row: xbc [rows][ld_xbc], dt_raw [rows][ld_dt], y [rows][ld_y],
 * row r's state at seq[r].fixed + ssm_off (floats: a bf16 state starts on a float boundary). */
int gpu_mamba_ssm_step_rows(struct gpu_context *g, const struct gpu_mamba_dims *dm, int rows, const float *xbc,
			    size_t ld_xbc, const float *dt_raw, size_t ld_dt, const float *dt_bias,
			    const float *a_log, const float *d_skip, float dt_min, float dt_max,
			    const struct gpu_seq_row *seq, size_t ssm_off, float *y, size_t ld_y);

/* gpu_kv_append of one row per sequence into attention layer `layer`'s caches at its pos:
 * k_new, v_new [rows][kv_dim] of dtype. */
int gpu_kv_append_rows(struct gpu_context *g, const void *k_new, const void *v_new, enum gpu_dtype dtype,
		       int kv_dim, int rows, const struct gpu_seq_row *seq, int layer);

/* gpu_attention of one row per sequence over attention layer `layer`'s caches: row r attends
 * to positions 0..seq[r].pos of its own sequence (its K and V rows already appended). max_len
 * bounds every pos + 1 the call will see (it sizes the grid, as in gpu_attention); the split
 * path only. scratch: gpu_attention_scratch_floats(rows, max_len, hq, dh) floats. */
int gpu_attention_rows(struct gpu_context *g, const float *q, size_t ldq, enum gpu_dtype kv_dtype, int hq,
		       int hkv, int dh, int rows, const struct gpu_seq_row *seq, int layer, int max_len,
		       void *o, enum gpu_dtype o_dtype, size_t ldo, float *scratch);

/* ---- vision operations (issue 12; vision_ops.cu) ----
 * The RADIO ViT and the mlp1 projector over all tiles of an observation at once. Same rules as
 * the language-model operations: device pointers, asynchronous on the context's stream, 0,
 * -EINVAL (nothing queued) or -EIO; row-major, every buffer fp32 unless a dtype says otherwise.
 * The CPU references are engine/backend/cpu/vision_cpu.h's vision_* step functions. */

/* Largest head dimension of gpu_vision_attention, patch side of gpu_vision_patchify, and
 * shuffled width (d * s * s) of gpu_vision_shuffle_norm. */
#define GPU_VISION_MAX_HEAD_DIM 128
#define GPU_VISION_MAX_PATCH 64
#define GPU_VISION_MAX_DIM (1 << 16)

/* Patches of `tiles` images pixels [tiles][3][rows * p][cols * p] to patches [tiles * rows *
 * cols][3 * p * p] of dtype (channel, then row, then column inside a patch; patches of a tile
 * row-major), as vision_patchify() lays them out. */
int gpu_vision_patchify(struct gpu_context *g, const float *pixels, int tiles, int rows, int cols, int p,
			void *patches, enum gpu_dtype dtype);

/* The token rows of `tiles` tiles of n_prefix + n tokens each, x [tiles][n_prefix + n][d]:
 * x[t][i] = prefix[i] for i < n_prefix (prefix [n_prefix][d], the cls and register tokens),
 * x[t][n_prefix + i] = emb[t * n + i] + pos[i] (emb the patch embeddings [tiles * n][d], pos the
 * position grid [n][d]). x must not overlap the inputs. */
int gpu_vision_tokens(struct gpu_context *g, const float *emb, const float *pos, const float *prefix,
		      int tiles, int n, int n_prefix, int d, float *x);

/* LayerNorm with bias over rows of d: out[r] = (x[r] - mean) / sqrt(var + eps) * gamma + beta
 * (fp32, the mean first, then the centred sum of squares), x [rows][ldx], out [rows][ldo] of
 * out_dtype; out may equal x only for fp32 with ldo == ldx. gamma, beta fp32 [d]. */
int gpu_layernorm(struct gpu_context *g, const float *x, size_t ldx, const float *gamma, const float *beta,
		  int rows, int d, float eps, void *out, enum gpu_dtype out_dtype, size_t ldo);

enum gpu_act {
	GPU_ACT_NONE,
	GPU_ACT_GELU_ERF, /* 0.5 v (1 + erf(v / sqrt 2)), the exact GELU (not the tanh form) */
};

/* Bias and activation over rows of d: out[r][c] = act(x[r][c] + b[c]), x [rows][ldx], out
 * [rows][ldo] of out_dtype; out may equal x only for fp32 with ldo == ldx (in place). b fp32 [d]. */
int gpu_bias_act(struct gpu_context *g, const float *x, size_t ldx, const float *b, int rows, int d,
		 enum gpu_act act, void *out, enum gpu_dtype out_dtype, size_t ldo);

/* Bidirectional multi-head attention inside each of `tiles` tiles of L tokens: qkv [tiles * L][3 *
 * D] (q | k | v, head h at columns h * D / heads of each part), out [tiles * L][D] of out_dtype =
 * softmax(q k^T / sqrt(D / heads)) v per tile and head (an online softmax over chunks of 32
 * keys). fp32 output: fp32 throughout (SIMT). bf16 output with a head dim that is a multiple of
 * 16: on tensor cores (WMMA), q, k, v and the probabilities rounded to bf16, fp32 accumulation
 * and softmax statistics; other bf16 head dims: the fp32 path, rounded at the end.
 * D / heads <= GPU_VISION_MAX_HEAD_DIM; out must not overlap qkv. */
int gpu_vision_attention(struct gpu_context *g, const float *qkv, int tiles, int L, int D, int heads,
			 void *out, enum gpu_dtype out_dtype);

/* Pixel shuffle v2 and mlp1's RMSNorm, as vision_shuffle_norm(): for each of `tiles` feature maps
 * [rows][cols][d] (tile t at features + t * tile_stride), the (rows/s) * (cols/s) tokens
 * out[(t * rows/s + i) * cols/s + j] = concat over di (outer), dj (inner) of F[s*i + di][s*j + dj],
 * scaled by 1 / sqrt(mean square + eps) (fp32) and by gamma [d * s * s]; out of out_dtype. */
int gpu_vision_shuffle_norm(struct gpu_context *g, const float *features, size_t tile_stride, int tiles,
			    int rows, int cols, int d, int s, const float *gamma, float eps, void *out,
			    enum gpu_dtype out_dtype);

/* ---- image preprocessing (issue 12; vision_preprocess.cu) ---- */

/* Largest image side gpu_image_resize_tiles() takes (engine.h's ENGINE_IMAGE_MAX_* are below). */
#define GPU_IMAGE_MAX_SIDE 65535

/* One axis of the antialiased bicubic resize, as engine/image/image.h's struct image_resize_axis
 * computes it on the host, with its arrays copied to the device: output i =
 * sum_{j < count[i]} in[first[i] + j] * w[i * taps + j] (first product, then fused
 * multiply-adds). count[i] may be 0 (output 0). An axis that keeps its size is the identity
 * table (first[i] = i, count 1, weight 1). */
struct gpu_resize_axis {
	int n_out, taps;
	const int32_t *first, *count;
	const float *w;
};

/* Per-channel normalisation: (v - mean[c]) / std[c]. */
struct gpu_image_norm {
	float mean[3], std[3];
};

/* The 8-bit RGB image rgb [in_h][in_w][3] (device) as ToTensor() sees it (v / 255), resized to
 * ax_w->n_out x ax_h->n_out (= cols * ts x rows * ts) by the width pass into tmp (device, 3 * in_h
 * * ax_w->n_out floats) then the height pass, cut into the cols x rows grid of ts x ts tiles
 * (row-major) and normalised: out [cols * rows][3][ts][ts] fp32. rows * ts <= 65535. */
int gpu_image_resize_tiles(struct gpu_context *g, const uint8_t *rgb, int in_w, int in_h,
			   const struct gpu_resize_axis *ax_w, const struct gpu_resize_axis *ax_h, int ts,
			   int cols, int rows, const struct gpu_image_norm *norm, float *tmp, float *out);

#ifdef __cplusplus
}
#pragma GCC diagnostic pop
#endif
