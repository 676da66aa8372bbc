/* engine internal: the backend seam under sessions (not a public header).
 *
 * A backend instance serves one model on one device, the way sqlite3_io_methods sits under the
 * pager and ggml_backend_i under a model: it owns its copy of the weights (prepared once at
 * creation: the CPU reads the memory map as it is, CUDA uploads once), every sequence's state
 * (conv window, SSM state in fp32 or bf16, KV cache) and the scratch a forward needs. session.c holds the
 * public objects (engine_session, engine_snapshot) and validates every argument; backends only
 * see well-formed requests.
 *
 * Sequences: a struct backend_seq is the per-sequence state of the language model. A snapshot is
 * a sequence cut to its tokens; snapshot, restore and copy are seq_copy() between sequences
 * (device-side on CUDA). Backends embed struct backend_seq as the first member of their own
 * sequence type, and struct engine_backend as the first member of their instance type.
 *
 * Batches: forward() runs a batch of positions that may belong to several sequences. Each
 * sequence's positions are contiguous in the batch (one span), in order, and follow what the
 * sequence already holds. reserve() does everything that can fail for a batch (allocations, the
 * state limit); forward() after a successful reserve() of the same batch cannot fail on
 * resources, so a failed call leaves every sequence as it was.
 *
 * Ops: every member of struct backend_ops is mandatory unless its comment starts OPTIONAL (a
 * group that comes together: profiling; device rows, mandatory where the vision runs on the
 * device); backend_init() refuses a table that lacks one (backend_ops_check(), one sentence
 * naming the backend and the member), so callers never probe a member by NULL to infer what
 * kind of backend they hold. What differs between backends is data: the vision ops'
 * granularity (struct backend_vision_desc: device or host memory, tiles per call, what a
 * resumable encode's step is), read by the one encode loop in vision/.
 *
 * Threads: a backend may be used by several threads at once as long as each sequence is used by
 * one thread at a time (the CPU backend keeps a forward's scratch per sequence); the state
 * accounting is atomic. The CUDA backend's sequences belong to the thread that owns its context.
 */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "model.h"

struct engine_backend;
struct vision_weights;

struct backend_seq {
	struct engine_backend *backend;
	int max_tokens; /* positions it may hold (1..ENGINE_SESSION_MAX_TOKENS) */
	int n_tokens;	/* positions it holds; forward() advances it */
};

/* The positions of one sequence in a batch: batch positions [first, first + n). */
struct backend_span {
	struct backend_seq *seq;
	size_t first, n;
};

struct backend_batch {
	size_t n_pos;
	const int32_t *tokens;		   /* [n_pos] ids in [0, vocab) */
	const float *const *embeds;	   /* NULL, or [n_pos]: non-NULL rows of `hidden` floats replace
					    * the token embedding */
	const float *const *device_embeds; /* NULL, or [n_pos]: the same for rows in this
					    * backend's device memory (engine_rows); a position
					    * has at most one of the two. Only for a backend
					    * with rows_alloc. */
	float *const *logits;		   /* NULL (none), or [n_pos]: where forward() writes the
					    * logits[vocab] of each position (NULL: not wanted). A run of
					    * consecutive wanted positions of one sequence should have
					    * consecutive rows (the CPU then computes them in one pass). */
	const struct backend_span *spans;  /* n_spans spans covering [0, n_pos) in order, one per
					    * sequence */
	size_t n_spans;
};

/* The per-sequence state in the CPU layout (lm.h): what seq_export() produces, so tests and
 * conformance checks compare states across backends. Arrays are malloc'ed; free with
 * backend_seq_state_finish(). */
struct backend_layer_state {
	float *conv;  /* Mamba: [K-1][conv_dim] */
	float *ssm;   /* Mamba: [H][P][N] (a bf16-stored state widened; import rounds it again) */
	float *k, *v; /* attention: [n_tokens][Hkv*Dh] */
};
struct backend_seq_state {
	int n_layers, n_tokens;
	struct backend_layer_state *layers;
};
void backend_seq_state_finish(struct backend_seq_state *st);
/* A session's state, through its backend's seq_export() / seq_import() (session.c). Import
 * returns -EINVAL for a state of another shape or more tokens than the session may hold. */
int backend_session_export(const struct engine_session *s, struct backend_seq_state *ret);
int backend_session_import(struct engine_session *s, const struct backend_seq_state *st);

/* Most tiles one encode on a backend takes: the largest grid plus the thumbnail. */
#define VISION_MAX_ENCODE_TILES (ENGINE_VISION_MAX_TILES + 1)

/* The vision tower as a backend's vision ops take it: what vision/ holds and derives once for a
 * handle (struct engine_vision, vision_tower()), valid while the handle lives. The
 * backends read the tower through this alone, never through the handle, so they sit below
 * vision/. */
struct backend_vision_tower {
	const struct vision_weights *w;		    /* vision_weights.h */
	uint64_t id;				    /* no other handle of the process has had it:
						     * caches key on it, not on an address */
	int grid;				    /* patches per tile side */
	int tokens_per_tile;			    /* rows of w->out_dim floats a tile gives */
	const float *pos;			    /* the position embedding of a grid x grid tile,
						     * [grid * grid][w->width] */
	const struct engine_vision_preprocess *pre; /* the handle's (its tile size, ...) */
};

/* What one step of a resumable vision encode (vision_encode_tiles() with a cursor) is. */
enum backend_vision_step {
	BACKEND_VISION_STEP_TILE,  /* a whole tile */
	BACKEND_VISION_STEP_LAYER, /* a part of a tile: its embedding, each ViT block, the final norm
				    * with the projector's first product, the projector's second
				    * (depth + 3 steps a tile; backend_vision_steps_per_tile()) */
};

/* The granularity of a backend's vision ops, as data: vision/ reads it and probes no member. */
struct backend_vision_desc {
	bool device;   /* tiles and rows in the backend's device memory (rows_alloc(), which is
			* then mandatory), so neither crosses the bus; false: host memory */
	int max_tiles; /* the most tiles one vision_encode_tiles() call takes (1..
			* VISION_MAX_ENCODE_TILES); a whole encode is cut in calls of this many */
	enum backend_vision_step step;
};

/* Where a resumable encode stands between two vision_encode_tiles() calls; zeroed before the
 * first, owned by the caller. */
struct backend_vision_cursor {
	int done;    /* steps done */
	void *state; /* the backend's tile in progress, or NULL */
};

/* Steps of a tile in a resumable encode of tower t on a backend of that granularity. */
int backend_vision_steps_per_tile(const struct backend_vision_desc *d, const struct backend_vision_tower *t);

/* The members of a backend's ops table are mandatory unless their comment starts OPTIONAL;
 * backend_init() refuses a table that lacks a mandatory one (backend_ops_check()). */
struct backend_ops {
	const char *name; /* "cpu", "cuda" */
	void (*destroy)(struct engine_backend *b);
	/* A zeroed sequence with no KV room yet. NULL + errno (ENOMEM). */
	struct backend_seq *(*seq_create)(struct engine_backend *b, int max_tokens);
	void (*seq_destroy)(struct backend_seq *seq);
	/* Back to the state of a new sequence (capacity kept). */
	void (*seq_reset)(struct backend_seq *seq);
	/* dst takes src's state and token count (dst->max_tokens >= src->n_tokens, checked by the
	 * caller); dst's KV room grows to exactly what it needs, if it must. Returns 0 or -ENOMEM
	 * with dst unchanged. */
	int (*seq_copy)(struct backend_seq *dst, const struct backend_seq *src);
	/* Bytes of the state the sequence holds: conv + SSM + the used part of the KV cache; a
	 * function of seq->n_tokens alone (engine_session_state_bytes_at() asks it of other
	 * lengths). */
	size_t (*seq_state_bytes)(const struct backend_seq *seq);
	/* Copies the state to host arrays (struct backend_seq_state). Returns 0, -ENOMEM, -EIO. */
	int (*seq_export)(const struct backend_seq *seq, struct backend_seq_state *ret);
	/* Replaces the state with `st` (the layout seq_export() writes; st->n_tokens <=
	 * seq->max_tokens, checked by the caller), converting to the backend's precision: so a
	 * conformance test starts two backends from one state. Returns 0, -ENOMEM (seq unchanged),
	 * -EIO. */
	int (*seq_import)(struct backend_seq *seq, const struct backend_seq_state *st);
	/* Prepares everything forward() needs for `batch`. Returns 0, -ENOMEM (host or device
	 * memory, or the state limit); no sequence's state or token count changes either way. */
	int (*reserve)(struct engine_backend *b, const struct backend_batch *batch);
	/* Runs the batch after reserve(batch) succeeded and writes the wanted logits rows. Returns
	 * 0, or -EIO for a device failure (sequences in the batch are then undefined). */
	int (*forward)(struct engine_backend *b, const struct backend_batch *batch);
	/* OPTIONAL (both, or neither): profiling (engine_backend_profile(); NULL: -EOPNOTSUPP), a
	 * device's kernels, or the CPU's operations. */
	int (*profile)(struct engine_backend *b, bool on);
	int (*profile_report)(struct engine_backend *b, char ***ret_lines);
	/* Vision: two mandatory ops whose granularity is the data in `vision`, so that vision/ has
	 * one encode loop (engine_vision_encode_on(), engine_vision_encode_image_on() and the
	 * resumable job all run preprocess, then encode_tiles). Both take and write their buffers
	 * in the memory `vision.device` names (device memory from rows_alloc(), or host memory)
	 * and wait for their work; both return 0, -EINVAL, -ENOMEM, -EIO.
	 * Both take the handle's tower t (struct backend_vision_tower).
	 * vision_preprocess: img for t with p (engine_vision_preprocess()'s resize, cut and
	 * normalisation into engine_vision_select_grid()'s grid for p, which has n_tiles tiles)
	 * into the n_tiles tiles at pix (3 * tile_size^2 floats each).
	 * vision_encode_tiles: the n_tiles tiles at pix into their rows at out
	 * (engine_vision_encode()'s layout: tokens_per_tile rows of embed_dim floats per tile) in
	 * the backend's precision. cur NULL: every tile in one call (n_tiles <= vision.max_tiles).
	 * cur non-NULL: a resumable encode (engine_vision_encode_advance()): at most max_steps
	 * steps of vision.step from cur->done on, which it advances; rows do not depend on where
	 * the calls fall. The backend keeps its tile in progress in cur->state and frees it when
	 * the last step is done, or at a call with max_steps 0 (the caller abandons the encode). */
	struct backend_vision_desc vision;
	int (*vision_preprocess)(struct engine_backend *b, const struct backend_vision_tower *t,
				 const struct engine_image *img, const struct engine_vision_preprocess *p,
				 int n_tiles, float *pix);
	int (*vision_encode_tiles)(struct engine_backend *b, const struct backend_vision_tower *t,
				   const float *pix, int n_tiles, float *out,
				   struct backend_vision_cursor *cur, int max_steps);
	/* OPTIONAL (all three, or none; mandatory with vision.device): device memory for
	 * embedding rows (struct engine_rows.device); NULL on a backend without a device.
	 * rows_alloc: n floats, copied from `host` when it is non-NULL (0, -ENOMEM,
	 * -EIO); rows_read: n floats at dev to the host (0, -EIO); rows_free accepts NULL. */
	int (*rows_alloc)(struct engine_backend *b, size_t n, const float *host, float **ret);
	int (*rows_read)(struct engine_backend *b, const float *dev, size_t n, float *out);
	void (*rows_free)(struct engine_backend *b, float *dev);
	/* Fills the backend-specific parts of *ret (device name, memory). */
	void (*info)(const struct engine_backend *b, struct engine_backend_info *ret);
};

struct engine_backend {
	const struct backend_ops *ops;
	const struct engine_model *model;
	enum engine_backend_kind kind;
	int device;
	enum engine_precision precision;
	enum engine_precision ssm_state; /* FP32 or BF16 (engine_backend_options) */
	uint64_t weight_bytes;		 /* weights held by the device for this backend */
	char weights[8];		 /* engine_backend_info.weights */
	uint64_t state_limit;		 /* 0: none */
	_Atomic uint64_t state_bytes;	 /* sequence memory allocated (capacity), all sequences */
	struct backend_vision *vision;	 /* CUDA: the device encoder of the vision handle used last
					  * (backend_cuda_vision.c); NULL until its first vision op */
};

/* Embedding rows (engine.h): in host memory, or in the device memory of `backend`. */
struct engine_rows {
	struct engine_backend *backend; /* the backend whose device holds `device`; NULL on the host */
	size_t n_rows;
	int dim;
	float *host;   /* [n_rows][dim], or NULL */
	float *device; /* [n_rows][dim] in backend's device memory, or NULL */
};

/* A handle over rows already made: host (malloc'ed) or device (b's rows_alloc()) memory, which
 * the handle then owns. NULL + errno (EINVAL, ENOMEM); the memory is not freed then. */
struct engine_rows *backend_rows_wrap(struct engine_backend *b, float *host, float *device, size_t n_rows,
				      int dim);

/* 0 when opts' kind, precision, SSM state type and weight format are values of their enums;
 * else -EINVAL with one sentence in msg ("unknown precision 7"). */
int backend_options_check(const struct engine_backend_options *opts, char *msg, size_t msglen);

/* Charges `bytes` of sequence memory to the backend; -ENOMEM when that would pass the state
 * limit (nothing charged then). backend_uncharge() gives it back. */
int backend_charge(struct engine_backend *b, uint64_t bytes);
void backend_uncharge(struct engine_backend *b, uint64_t bytes);

/* 0 when every mandatory member of ops is set and its vision description holds (max_tiles in
 * range; rows_alloc, rows_read and rows_free all set or none, and set when vision.device); else
 * -EINVAL with one sentence in err naming the backend and what is missing. */
int backend_ops_check(const struct backend_ops *ops, char *err, size_t errlen);

/* The ops the vision encode runs without a backend (engine_vision_encode_on(NULL, ...), chosen
 * by select/select_vision.c): the CPU's, in fp32 with cpu_matmul() (engine_vision_encode()),
 * called with b NULL. */
const struct backend_ops *backend_host_vision_ops(void);

/* Fills the common fields of a new instance after backend_ops_check(ops): -EINVAL (logged with
 * its sentence) for a table that lacks a mandatory member, else 0. */
int backend_init(struct engine_backend *b, const struct backend_ops *ops, const struct engine_model *m,
		 const struct engine_backend_options *opts);

/* The CPU backend (backend_cpu.c). NULL + errno (EINVAL for a model the CPU code cannot run,
 * a weight the quantizer refuses or --weights bf16 on weights stored otherwise; ENOMEM), with
 * one sentence in err where there is more to say than errno (else err is left empty). With
 * opts->weights Q8/Q4 the linear layers are quantized here, progress reported through
 * opts->progress as they are. */
struct engine_backend *backend_cpu_create(const struct engine_model *m,
					  const struct engine_backend_options *opts, char *err, size_t errlen);
/* The same with lm_prepare()'s quantization hooks (lm.h; NULL: none), for a tool measuring
 * other quantizers through the same forward (holo-bench quant-error). opts is taken as
 * resolved: kind CPU, ssm_state not DEFAULT. */
struct lm_quant_hooks;
struct engine_backend *backend_cpu_create_hooked(const struct engine_model *m,
						 const struct engine_backend_options *opts,
						 const struct lm_quant_hooks *hooks, char *err, size_t errlen);
/* The tensor b's forward reads for w, a layer matrix or the lm_head of the model b runs: its
 * copy in 2 MiB pages (lm.h, lm_prepared.head_held) where b (a CPU backend) holds one, else w
 * itself (also for NULL b or another backend), so a tool times the products on the bytes the
 * forward streams. Valid as long as b. */
const struct tensor *backend_cpu_weights(const struct engine_backend *b, const struct tensor *w);
/* Whether b (a CPU backend) holds quantized layers (it reported its progress itself). */
bool backend_cpu_quantized(const struct engine_backend *b);

#ifdef HOLOD_HAVE_CUDA
struct gpu_context;
/* The CUDA backend (backend_cuda.c). NULL + errno and one sentence in errbuf (ENODEV, ENOMEM,
 * EIO). */
struct engine_backend *backend_cuda_create(const struct engine_model *m,
					   const struct engine_backend_options *opts, char *errbuf,
					   size_t errlen);
/* Tests: whether decode steps replay captured graphs (the default) or launch eagerly, and how
 * many graphs the backend has captured. */
void backend_cuda_set_graphs(struct engine_backend *b, bool on);
uint64_t backend_cuda_graph_captures(const struct engine_backend *b);
/* fp8 weights in bf16 precision: prefill products on cuBLASLt's FP8 matmul (on, the default) or
 * on the dequantized slices (off; tests compare the two). */
void backend_cuda_set_fp8_gemm(struct engine_backend *b, bool on);
/* Tests: cut spans into runs of `run` positions and pack a batch's runs into passes of at most
 * `rows` rows (beside its decode rows; by default 256 and 384), so that spans of a few dozen
 * positions take several runs and several passes. Needs 1 <= run <= 256 and run <= rows <= 384
 * (-EINVAL otherwise); call it before any session runs. */
int backend_cuda_set_pass_shape(struct engine_backend *b, int run, int rows);
/* The device copy of a model tensor (a pointer into b->model's tensors) and its dtype on the
 * device; NULL when the tensor is absent or not a language-model weight. */
const void *backend_cuda_weight(const struct engine_backend *b, const struct tensor *t,
				enum tensor_dtype *ret_dtype);
/* The backend's device context (gpu.h). */
struct gpu_context *backend_cuda_context(const struct engine_backend *b);
/* The device bytes of b's activation scratch and its largest batched decode block, as
 * reserve() lays them out (tests: the memory plan's scratch must equal it). */
uint64_t backend_cuda_scratch_bytes(const struct engine_backend *b);
/* The release of b->vision that the backend's destroy() calls before its context goes. */
void backend_cuda_vision_finish(struct engine_backend *b);
/* vision_preprocess() and vision_encode_tiles() (whole tiles) of the CUDA backend
 * (backend_cuda_vision.c), called under the backend's lock. */
int backend_cuda_vision_preprocess(struct engine_backend *b, const struct backend_vision_tower *t,
				   const struct engine_image *img, const struct engine_vision_preprocess *p,
				   int n_tiles, float *pix);
int backend_cuda_vision_encode_tiles(struct engine_backend *b, const struct backend_vision_tower *t,
				     const float *pix, int n_tiles, float *out);
/* rows_alloc(), rows_read() and rows_free() of the CUDA backend (backend_cuda_vision.c), called
 * under the backend's lock. */
int backend_cuda_rows_alloc(struct engine_backend *b, size_t n, const float *host, float **ret);
int backend_cuda_rows_read(struct engine_backend *b, const float *dev, size_t n, float *out);
void backend_cuda_rows_free(struct engine_backend *b, float *dev);
#endif
