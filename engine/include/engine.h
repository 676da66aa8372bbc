/* engine: load a Nemotron-H (Nano-VL) checkpoint, tokenize, and run the language model.
 *
 * The one public header of the engine module. Opaque handles only; no foreign types.
 * Errors: int functions return >= 0 or a negative errno; constructors return NULL and set errno.
 * Functions that can fail for reasons a user must see (bad model files) take an `errbuf` that
 * receives one precise sentence.
 *
 * Threads: a model is immutable after load and may be shared by sessions; a session (and a
 * tokenizer's streaming decoder) is used by one thread at a time. The CPU backend runs its own
 * worker pool inside calls.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct engine_model;
struct engine_tokenizer;
struct engine_session;

/* ==== model loading (loader.c) =========================================================== */

/* Loads the checkpoint directory `dir`: config.json (a bare `nemotron_h` config or the
 * NemotronH_Nano_VL_V2 layout with `llm_config`), model.safetensors or
 * model.safetensors.index.json with its shards, and tokenizer.json when present. Weights are
 * memory-mapped read-only, never copied. Every tensor name, shape and dtype is checked against
 * the config and the layer pattern (model.md 1 and 3); tensors left over are an error, except
 * the vision tensors (`vision_model.*`, `mlp1.*`) of the VLM layout.
 * On failure returns NULL, sets errno (ENOENT for a missing file, EINVAL for a malformed or
 * unsupported checkpoint, EFBIG for a size over a limit) and writes one precise sentence to
 * errbuf (may be NULL when errlen is 0), e.g. "tensor 'backbone.layers.3.mixer.A_log' has shape
 * [16], expected [8]". The model is immutable afterwards and may be shared between threads. */
struct engine_model *engine_model_load(const char *dir, char *errbuf, size_t errlen);
/* Unmaps everything; accepts NULL. No session may still use the model. */
void engine_model_destroy(struct engine_model *model);
/* Whether `dir` holds the files a checkpoint needs, before any is read (a program checks this
 * before its long work: a missing tokenizer.json is told before gigabytes of weights are
 * loaded): a directory with config.json, model.safetensors or model.safetensors.index.json,
 * and tokenizer.json. Nothing is opened, so a file that blocks on open does not block here.
 * Returns 0, or -errno (-ENOENT for a missing file, -ENOTDIR) with one sentence naming what
 * is missing and what a checkpoint holds in errbuf. */
int engine_model_check_files(const char *dir, char *errbuf, size_t errlen);

#define ENGINE_MODEL_MAX_PATTERN 512

struct engine_model_info {
	int n_layers;
	int n_mamba, n_attention, n_mlp;
	int hidden;
	int vocab;	       /* embedding rows */
	int eos_id;	       /* config.json's eos_token_id (the first of a list), -1 when null */
	uint64_t n_params;     /* language-model parameters (a tied head counted once) */
	uint64_t weight_bytes; /* bytes of those parameters in the checkpoint */
	bool tied_embeddings;
	bool vlm; /* NemotronH_Nano_VL_V2 layout (vision tensors may be present) */
	char pattern[ENGINE_MODEL_MAX_PATTERN]; /* one of M * - per layer */
};

/* Fills *ret. Returns 0 or -EINVAL for NULL arguments. */
int engine_model_get_info(const struct engine_model *model, struct engine_model_info *ret);
/* The tokenizer loaded from the directory's tokenizer.json (owned by the model), or NULL when the
 * directory has none. */
struct engine_tokenizer *engine_model_tokenizer(const struct engine_model *model);

/* ==== tokenizer (tokenizer.c) ============================================================ */

/* A Hugging Face fast tokenizer (`tokenizer.json`): byte-level BPE with added tokens, the
 * pre-tokenizer and decoder the file names (model.md 5.1). What the file asks for is implemented
 * or the load fails naming it; nothing is tied to one vocabulary. The post-processor is not
 * applied (the VLM never adds BOS), and `truncation`/`padding` are encode-time options of the HF
 * Python API that callers handle themselves.
 *
 * A loaded tokenizer is immutable apart from an internal, mutex-protected word cache: any number
 * of threads may encode/decode with it at once. A streaming decoder belongs to one thread. */

/* Limits on what a tokenizer.json may contain; larger files fail to load with -EFBIG/-E2BIG. */
#define ENGINE_TOKENIZER_MAX_FILE_BYTES (256u << 20) /* tokenizer.json size */
#define ENGINE_TOKENIZER_MAX_VOCAB (1u << 21)	     /* ids (model vocab + added tokens) */
#define ENGINE_TOKENIZER_MAX_MERGES (1u << 22)
#define ENGINE_TOKENIZER_MAX_TOKEN_BYTES 4096u	  /* one token's string */
#define ENGINE_TOKENIZER_MAX_PATTERN_BYTES 65536u /* one pre-tokenizer regex */
/* Largest text engine_tokenizer_encode() accepts (-E2BIG above). */
#define ENGINE_TOKENIZER_MAX_INPUT_BYTES (64u << 20)

/* Loads `path`. On failure returns NULL, sets errno (ENOENT/EACCES from the file system,
 * EINVAL for a malformed or unsupported file, EFBIG/E2BIG for a limit) and writes one precise
 * sentence to errbuf (may be NULL when errlen is 0), e.g. "tokenizer.json: merges[17]: token
 * 'xy' is not in the vocabulary". */
struct engine_tokenizer *engine_tokenizer_load(const char *path, char *errbuf, size_t errlen);
/* Accepts NULL. */
void engine_tokenizer_destroy(struct engine_tokenizer *tok);

/* Encodes `len` bytes of UTF-8 `text` (need not be NUL-terminated) into ids, exactly as HF
 * `tokenizer.encode(text, add_special_tokens=False)` does. With parse_special, special added
 * tokens written in the text become their ids; without it only non-special added tokens are
 * matched (HF `encode_special_tokens=True`), so user text cannot inject control tokens.
 * *ret_ids is malloc'ed (caller frees; non-NULL even when *ret_n is 0).
 * Returns 0, -EILSEQ for invalid UTF-8, -E2BIG above ENGINE_TOKENIZER_MAX_INPUT_BYTES, -ENOMEM. */
int engine_tokenizer_encode(const struct engine_tokenizer *tok, const char *text, size_t len,
			    bool parse_special, int32_t **ret_ids, size_t *ret_n);

/* Decodes ids to UTF-8 as HF `tokenizer.decode(ids, skip_special_tokens=skip_special)`:
 * token bytes concatenated, invalid or truncated UTF-8 replaced by U+FFFD. *ret_text is
 * malloc'ed and NUL-terminated (caller frees); *ret_len excludes the NUL.
 * Returns 0, -EINVAL for an id that names no token, -ENOMEM. */
int engine_tokenizer_decode(const struct engine_tokenizer *tok, const int32_t *ids, size_t n,
			    bool skip_special, char **ret_text, size_t *ret_len);

/* Id of a token given by its vocabulary string (as written in tokenizer.json, e.g.
 * "<SPECIAL_12>", "<image>", or "Ġthe" for a byte-level token). Added tokens take precedence.
 * Returns the id (>= 0) or -ENOENT. */
int32_t engine_tokenizer_token_id(const struct engine_tokenizer *tok, const char *token);
/* One more than the largest id: the number of logits rows the tokenizer can name. Ids below
 * it may still be holes (no token); engine_tokenizer_token_bytes() says -ENOENT for those. */
size_t engine_tokenizer_vocab_size(const struct engine_tokenizer *tok);
/* The bytes `id` contributes to decoded text (byte-level mapping undone; for added tokens
 * their content), valid as long as the tokenizer. Not NUL-terminated. Returns 0 or -ENOENT. */
int engine_tokenizer_token_bytes(const struct engine_tokenizer *tok, int32_t id, const uint8_t **ret_bytes,
				 size_t *ret_len);
/* The token's vocabulary string (NUL-terminated, owned by the tokenizer) or NULL. */
const char *engine_tokenizer_token_str(const struct engine_tokenizer *tok, int32_t id);
/* True for added tokens marked "special" (what skip_special drops). */
bool engine_tokenizer_is_special(const struct engine_tokenizer *tok, int32_t id);

/* Streaming decoder: turns ids into text as they are generated without ever emitting part of
 * a UTF-8 character. Bytes of an incomplete character wait for the next ids; a sequence that
 * can no longer become valid is emitted as U+FFFD, as engine_tokenizer_decode() would. */
struct engine_detok;

/* Returns NULL and sets errno on failure. The tokenizer must outlive the decoder. */
struct engine_detok *engine_detok_create(const struct engine_tokenizer *tok, bool skip_special);
/* Accepts NULL. */
void engine_detok_destroy(struct engine_detok *d);
/* Feeds one id. ret_text and ret_len receive the text that became complete (possibly empty;
 * NUL-terminated; owned by the decoder and valid until its next call).
 * Returns 0, -EINVAL for an id that names no token, -ENOMEM. */
int engine_detok_push(struct engine_detok *d, int32_t id, const char **ret_text, size_t *ret_len);
/* Ends the stream: returns whatever is still buffered (an incomplete character becomes U+FFFD)
 * and resets the decoder for a new stream. Same ownership as engine_detok_push(). */
int engine_detok_flush(struct engine_detok *d, const char **ret_text, size_t *ret_len);

/* ==== session, sampling (lm_*.c, session.c, sampling.c) ================================== */

/* A session is one sequence being processed by the language model: the per-sequence state of
 * every layer (Mamba conv window and fp32 SSM state, attention K/V cache) plus the number of
 * tokens consumed. Sessions read the model and never change it; several sessions may share one
 * model. A session is used by one thread at a time. All computation is fp32 over weights in
 * their stored dtype (model.md 2, 6). */

/* Largest max_tokens engine_session_create_on() accepts. */
#define ENGINE_SESSION_MAX_TOKENS (1 << 20)

/* CPU threads every session of the process computes with (default: the CPUs the process may
 * run on, or $HOLOD_THREADS). Call it while no session computes. Returns 0 or -EINVAL. */
int engine_set_threads(int n);
int engine_get_threads(void);
/* Name of the CPU matmul kernels selected for this machine ("avx512", "avx2", "generic").
 * $HOLOD_CPU_KERNELS (portable or generic, avx2, avx512, avx512bf16, amx) caps the instruction
 * set of every CPU kernel family alike (engine/backend/cpu/cpu_isa.h); an unknown value makes
 * the CPU backend's creation fail, naming it. */
const char *engine_cpu_kernels(void);

/* ---- backends ----
 * A backend runs the language model of one model on one device and owns what that takes: its
 * copy of the weights (the CPU reads the memory map as it is, the linear layers quantized where
 * asked; CUDA uploads them once), every
 * session's state and scratch. Sessions live on one backend, which engine_backend_create()
 * makes (a CUDA device, a precision, quantized weights, a state limit); a model has none of
 * its own. */

enum engine_backend_kind {
	ENGINE_BACKEND_AUTO, /* CUDA when a device is present (not the CPU emulation of a test
			      * build) and the CUDA backend can run the model, the CPU otherwise */
	ENGINE_BACKEND_CPU,
	ENGINE_BACKEND_CUDA,
};

enum engine_precision {
	ENGINE_PRECISION_DEFAULT, /* the backend's own: bf16 on CUDA; on the CPU what
				   * engine_model_cpu_precision() says */
	ENGINE_PRECISION_BF16,	  /* bf16 weights and matrix-product inputs, fp32 accumulation and
				   * SSM state; on CUDA also a bf16 KV cache */
	ENGINE_PRECISION_FP32,
};

/* The format the language model's linear layers (Mamba in_proj/out_proj, attention q/k/v/o, MLP
 * up/down) are held in (docs/quantization.md). Embeddings, lm_head, norms, conv, A, D and dt stay
 * as stored, and so does the vision tower. */
enum engine_weights {
	ENGINE_WEIGHTS_DEFAULT, /* as stored in the checkpoint (fp8 for an FP8 one) */
	/* as stored, which must be bf16 (else the backend refuses it); an FP8 checkpoint's layers
	 * are widened to bf16 at creation (the CPU) */
	ENGINE_WEIGHTS_BF16,
	ENGINE_WEIGHTS_Q8, /* int8, an fp16 scale per block of 32: quantized at backend creation */
	ENGINE_WEIGHTS_Q4, /* 4-bit, fp16 scale and minimum per block of 32: likewise */
	/* e4m3 with an fp32 scale per matrix or row (NVIDIA ModelOpt's FP8): an FP8 checkpoint's
	 * as stored (its default), another's quantized at creation with one scale max|w| / 448 */
	ENGINE_WEIGHTS_FP8,
};

struct engine_backend_options {
	enum engine_backend_kind kind;
	int device; /* CUDA device index */
	enum engine_precision precision;
	/* The linear layers' format. The CPU quantizes q8/q4 from the memory map at creation
	 * (progress reports the source bytes quantized) and runs their decode rows on the quantized
	 * GEMV kernels; --precision stays the activations' precision (FP32: the weights dequantized
	 * exactly, fp32 sums: the reference). CUDA quantizes q8/q4 on the host and uploads the
	 * records (docs/quantization.md "On CUDA"), fp8 too on a device of sm_89 or newer (EINVAL
	 * below, naming the architecture). */
	enum engine_weights weights;
	uint64_t state_limit; /* bytes of session state (all sessions and snapshots) the
			       * backend may allocate; 0: no limit but memory itself */
	/* How the Mamba SSM state (the largest per-session state) is stored: FP32 (DEFAULT), or
	 * BF16, which halves its memory and traffic: every update loads it, computes in fp32 and
	 * stores it rounded to nearest even. The conv window and the KV cache are unaffected. */
	enum engine_precision ssm_state;
	/* Weight loading progress: called on the creating thread with the bytes of the
	 * checkpoint's tensors prepared so far (CUDA: read from the files, converted and sent to
	 * the device; the CPU reads the memory map: the source bytes of the bf16 matrices as they
	 * are copied out of it, or with q8/q4 weights of the linear layers as they are quantized,
	 * then all of them at once), of `total`; the last call has done == total. NULL: none. */
	void (*progress)(void *arg, uint64_t done, uint64_t total);
	void *progress_arg;
	/* The CUDA backend's memory plan (docs/quantization.md "Memory plan"), computed from the
	 * shapes before anything is allocated and reported by engine_backend_get_info(): the
	 * weights, the vision tower (plan_vision: the checkpoint's, for its max_num_tiles tiles
	 * and the thumbnail at once), plan_sessions sessions of plan_context tokens, the scratch,
	 * the cuBLASLt workspace and a reserve. With plan_sessions >= 1 creation is refused
	 * (ENOMEM, naming every size and the formats that would fit) unless all of it fits in the
	 * device's free memory with plan_sessions_min of the sessions (1..plan_sessions; 0: all of
	 * them): a caller that can run with fewer sessions than it plans (holod: its tasks wait
	 * for admission) is created when they fit, and the report's sessions_fit says how many do;
	 * with plan_sessions 0 only the weights and the prefill's dequantized slice must fit (the
	 * sessions are then admitted against what is left), and the report says how many sessions
	 * of plan_context tokens fit. */
	int plan_sessions, plan_context, plan_sessions_min;
	bool plan_vision;
};

/* "auto", "cpu", "cuda" and "default", "bf16", "fp32": the names options use.
 * The parsers return 0 or -EINVAL. */
const char *engine_backend_kind_name(enum engine_backend_kind kind);
int engine_backend_kind_parse(const char *name, enum engine_backend_kind *ret);
const char *engine_precision_name(enum engine_precision p);
int engine_precision_parse(const char *name, enum engine_precision *ret);
/* "default", "bf16", "q8", "q4". */
const char *engine_weights_name(enum engine_weights w);
int engine_weights_parse(const char *name, enum engine_weights *ret);
/* The precision the CPU backend runs `model` in when none is asked for: BF16 for a bf16
 * checkpoint (its embedding matrix stored in bf16; a holo-quantize or FP8 one too) on a CPU
 * whose oneDNN has bf16 matrix products (AVX-512 and up) or that runs the engine's AVX2 kernels
 * (where BF16 runs every product on those: no slower than fp32, and q8/q4 weights decode on
 * their integer kernels, about 3x fp32's exact ones for q4), FP32 otherwise (f32 or f16 weights,
 * whose fp32 path rounds nothing; a CPU without AVX2, or kernels capped below it by
 * $HOLOD_CPU_KERNELS). */
enum engine_precision engine_model_cpu_precision(const struct engine_model *model);

/* What a program checks before loading a model: resolves AUTO in opts->kind (and DEFAULT in
 * opts->precision on CUDA; on the CPU DEFAULT stays, resolved by engine_backend_create() from
 * the checkpoint as engine_model_cpu_precision() says) and checks that the result can run the
 * language model here. Returns 0; -EINVAL for a bad value; -ENODEV when this
 * build has no CUDA backend or the device does not exist (or the driver is too old for this
 * build's CUDA runtime, which the sentence says with both versions). On error msg receives one
 * sentence; on success with AUTO it receives why a present device is not used (the CPU
 * emulation of a test build, or a driver too old; empty otherwise). msg may be NULL when msglen is 0. */
int engine_backend_resolve(struct engine_backend_options *opts, char *msg, size_t msglen);

struct engine_backend;

/* A backend for `model` (which must outlive it). AUTO is resolved as above. Returns NULL,
 * sets errno and writes one sentence to errbuf: EINVAL (bad options or a model the backend
 * cannot run), ENODEV (no such device or no CUDA in this build), ENOMEM (not enough memory
 * for the weights, naming the bytes needed and free), ENOTSUP (oneDNN refused a bf16 product
 * of the model), EIO (a device failure). */
struct engine_backend *engine_backend_create(const struct engine_model *model,
					     const struct engine_backend_options *opts, char *errbuf,
					     size_t errlen);
/* Accepts NULL. Every session and snapshot of the backend must be destroyed first. */
void engine_backend_destroy(struct engine_backend *b);

/* The CUDA backend's device memory plan (docs/quantization.md "Memory plan"): what the model and
 * its sessions need on the device, computed from the shapes before anything is allocated. Every
 * figure is in bytes. */
struct engine_memory_plan {
	char weights[8];       /* the linear layers' format: "bf16", "f32", "q8", "q4", "fp8" */
	uint64_t layers;       /* the linear layers' matrices in that format */
	uint64_t head;	       /* the lm_head's own copy (0: a tied head reads the embeddings) */
	uint64_t embeddings;   /* the embedding matrix (bf16, or fp32 in fp32 precision) */
	uint64_t other;	       /* norms, conv taps and biases, A, D, dt_bias */
	uint64_t weight_bytes; /* the weight block: the four above, each tensor 256-aligned */
	uint64_t vision;       /* the vision tower and projector: weights and a batch's activations */
	int sessions;	       /* sessions planned ... */
	int context;	       /* ... of this many tokens each */
	uint64_t session;      /* one such session: Mamba state and KV cache */
	uint64_t scratch;      /* activations of one pass, the prefill's dequantized slice and the
				* batched decode block */
	uint64_t workspace;    /* cuBLASLt's */
	uint64_t reserve;      /* CUDA graphs, the driver's own allocations, fragmentation */
	uint64_t total;	       /* everything above, sessions x session included */
	uint64_t free;	       /* the device's free memory when planned (0: not planned on one) */
	int sessions_fit;      /* sessions of `context` tokens that fit beside the rest in `free` */
};

struct engine_backend_info {
	enum engine_backend_kind kind;	 /* CPU or CUDA */
	const char *name;		 /* "cpu", "cuda" */
	char device[256];		 /* e.g. "NVIDIA H100 80GB HBM3", "x86_64, avx2 kernels" */
	enum engine_precision precision; /* BF16 or FP32 */
	enum engine_precision ssm_state; /* the SSM state's storage: BF16 or FP32 */
	/* the linear layers' format: "q8", "q4", or the checkpoint's dtype as stored ("bf16",
	 * "f32", "f16") */
	char weights[8];
	bool runs_model;		    /* false: sessions exist but computing is -EOPNOTSUPP */
	uint64_t weight_bytes;		    /* weights held for this backend (on the CPU the map's
					     * tensors it reads plus what it prepared: quantized
					     * layers replace their bf16 source's bytes) */
	uint64_t state_bytes;		    /* memory of its live sessions and snapshots */
	uint64_t state_limit;		    /* 0: none */
	uint64_t memory_total, memory_free; /* of the device (host RAM on the CPU); 0: unknown */
	bool has_plan;			    /* the CUDA backend: the plan it was created by */
	struct engine_memory_plan plan;
};
/* Fills *ret. Any thread may call it while others compute. Returns 0 or -EINVAL. */
int engine_backend_get_info(const struct engine_backend *b, struct engine_backend_info *ret);

/* Whether b's device has failed for good (a CUDA sticky error: an illegal address, a launch
 * failure...): every computation on b fails from then on, and only destroying b (after its
 * sessions) and creating a new backend recovers. True with the device's error in buf (may be
 * NULL); false for the CPU. */
bool engine_backend_fault(const struct engine_backend *b, char *buf, size_t len);

/* Writes one sentence for an error `err` (negative errno) that a computation on b returned and
 * returns buf: -ENOMEM names the device and its memory, e.g. "out of device memory on CUDA
 * device 0 (NVIDIA H100 80GB HBM3): 1234 of 81559 MiB free, sessions hold 512 MiB", -EIO says
 * the device failed; other errors are strerror(). b may be NULL (then strerror() alone). */
const char *engine_backend_strerror(const struct engine_backend *b, int err, char *buf, size_t len);

/* Profiling (`--profile`): while on, the backend times every kernel launch and GEMM call its
 * forward makes, per call site (on the CUDA backend; decode then runs its launches one by one
 * instead of replaying a graph, so each is timed), or the time of each kind of operation (on
 * the CPU: matrix products with their GFLOP/s, mamba scan, conv, attention, norms, other, then
 * the total; one line each). -ENOMEM, -EIO. Turning it on or off drops the counts. */
int engine_backend_profile(struct engine_backend *b, bool on);
/* Waits for the device, then sets *ret_lines to a NULL-terminated array of what ran since
 * profiling was turned on, one line per call site in first-use order: `kernel NAME launches=N
 * ms=T` or `gemm SITE calls=N ms=T` (device times from CUDA events on a GPU; host times on the
 * emulation), then for each direction that saw copies `copy DIR calls=N bytes=B` (DIR:
 * to_device, to_host, on_device). Returns the number of lines (0: nothing ran on the device), -EINVAL when
 * profiling is off, -EOPNOTSUPP, -ENOMEM, -EIO. Free with engine_backend_profile_free(). */
int engine_backend_profile_report(struct engine_backend *b, char ***ret_lines);
void engine_backend_profile_free(char **lines);

/* A session of b's model able to hold up to max_tokens tokens (1..ENGINE_SESSION_MAX_TOKENS);
 * the KV cache grows on demand up to that size; b holds its state. NULL + errno (EINVAL,
 * ENOMEM, also for b's state limit). */
struct engine_session *engine_session_create_on(struct engine_backend *b, int max_tokens);
/* The backend a session lives on. */
struct engine_backend *engine_session_backend(const struct engine_session *s);
/* Accepts NULL. */
void engine_session_destroy(struct engine_session *s);

/* Tokens (positions) consumed so far. */
int engine_session_n_tokens(const struct engine_session *s);
int engine_session_max_tokens(const struct engine_session *s);
/* Rows of the logits (embedding rows of the model) and width of an embedding row. */
int engine_session_vocab(const struct engine_session *s);
int engine_session_hidden(const struct engine_session *s);
/* Bytes of per-sequence state currently held (conv + SSM states + the used part of the KV
 * cache), i.e. what a snapshot of this session costs. */
size_t engine_session_state_bytes(const struct engine_session *s);
/* What engine_session_state_bytes() would say for a session of the same backend holding
 * n_tokens (0..ENGINE_SESSION_MAX_TOKENS) tokens: what admitting a session that will grow to
 * that length costs. */
size_t engine_session_state_bytes_at(const struct engine_session *s, int n_tokens);

/* Forgets every token: back to the state of a new session. */
void engine_session_reset(struct engine_session *s);

enum engine_logits {
	ENGINE_LOGITS_NONE, /* no logits (prefill of a prefix) */
	ENGINE_LOGITS_LAST, /* logits of the last appended position: ret_logits[vocab] */
	ENGINE_LOGITS_ALL,  /* logits of every appended position: ret_logits[n][vocab] */
};

/* Appends n positions to the sequence (prefill; any n >= 1, on top of whatever the session
 * holds: appending A then B gives the state and logits of appending A+B).
 * Position i is embedded as E[tokens[i]] unless embeds is non-NULL and embeds[i] is non-NULL,
 * in which case the `hidden` floats at embeds[i] are used instead (image embeddings spliced in
 * by the vision path, model.md 4.8); tokens[i] is then only checked to be a valid id.
 * ret_logits (fp32) receives what `want` asks for; it may be NULL for ENGINE_LOGITS_NONE.
 * Returns 0; -EINVAL for a bad argument or a token id outside [0, vocab); -ENOSPC when the
 * session would exceed max_tokens; -ENOMEM; -EOPNOTSUPP on a backend that cannot compute
 * (engine_backend_info.runs_model). On error the session is unchanged (-EIO, a device failure,
 * leaves it undefined: reset or destroy it). */
int engine_session_append(struct engine_session *s, const int32_t *tokens, const float *const *embeds,
			  size_t n, enum engine_logits want, float *ret_logits);
/* ---- embedding rows ----
 * Rows of floats that replace token embeddings in an append (the image rows of the vision path,
 * model.md 4.8), held where the backend's forward reads them: host memory without a backend or
 * on the CPU backend, the device's memory on a CUDA backend, so that image rows go from the
 * vision encoder to the prefill without crossing the bus. Host rows may be appended to a
 * session of any backend; device rows only to sessions of the backend that made them, under its
 * thread rules (CUDA: the thread that owns its device). */
struct engine_rows;
#define ENGINE_ROWS_MAX_FLOATS ((size_t)1 << 32) /* n_rows * dim of one handle */

/* A copy of n_rows rows of dim floats (host memory) on backend b (NULL: on the host). Returns
 * NULL and sets errno: EINVAL (n_rows or dim 0, or n_rows * dim above ENGINE_ROWS_MAX_FLOATS),
 * ENOMEM (host or device memory), EIO. */
struct engine_rows *engine_rows_create(struct engine_backend *b, const float *rows, size_t n_rows, int dim);
/* A handle over host rows the caller malloc'ed: the handle owns `rows` from then on (on
 * success only). NULL + errno (EINVAL as above, ENOMEM). */
struct engine_rows *engine_rows_from_host(float *rows, size_t n_rows, int dim);
/* Accepts NULL. Frees device memory on the backend's thread rules; before the backend goes. */
void engine_rows_destroy(struct engine_rows *r);
size_t engine_rows_count(const struct engine_rows *r);
int engine_rows_dim(const struct engine_rows *r);
/* Whether the rows are in a device's memory (a CUDA backend's). */
bool engine_rows_on_device(const struct engine_rows *r);
/* Copies rows [first, first + n) to out (n * dim floats). Returns 0, -EINVAL (out of range),
 * -EIO. */
int engine_rows_read(const struct engine_rows *r, size_t first, size_t n, float *out);

/* One position's embedding: row `row` of `rows`, or the token's own embedding (rows NULL). */
struct engine_row_ref {
	const struct engine_rows *rows;
	size_t row;
};

/* engine_session_append() with the spliced rows given as references into engine_rows handles
 * (refs NULL, or [n]): position i takes row refs[i].row of refs[i].rows when that is non-NULL.
 * Host rows give exactly what engine_session_append() gives with pointers to the same floats.
 * Same errors, and -EINVAL for a row out of range, rows whose width is not the model's hidden
 * size, or device rows of another backend. */
int engine_session_append_rows(struct engine_session *s, const int32_t *tokens,
			       const struct engine_row_ref *refs, size_t n, enum engine_logits want,
			       float *ret_logits);

/* Appends one token (the recurrent decode step) and writes its logits[vocab]. Same errors. */
int engine_session_decode(struct engine_session *s, int32_t token, float *ret_logits);

/* Several sessions of one backend at once: entry i appends tokens[0..n) (and embeds) to
 * session i exactly as engine_session_append() would, with its own logits request. Every
 * session gets the state and logits it would get alone. All or nothing: returns 0, or
 * -EINVAL (a bad entry, a session of another backend, the same session twice), -ENOSPC,
 * -ENOMEM, -EOPNOTSUPP (a backend that cannot compute) with every session unchanged; -EIO for
 * a device failure. */
struct engine_batch_entry {
	struct engine_session *session;
	const int32_t *tokens;
	const float *const *embeds; /* NULL, or [n] as in engine_session_append() */
	size_t n;
	enum engine_logits want;
	float *ret_logits;
	/* NULL, or [n] as in engine_session_append_rows() (then embeds must be NULL): rows of
	 * engine_rows handles, host or this backend's device memory */
	const struct engine_row_ref *refs;
};
#define ENGINE_BATCH_MAX_SESSIONS 1024
int engine_forward_batch(struct engine_backend *b, const struct engine_batch_entry *entries, size_t n_entries);

/* A deep copy that continues exactly as the original would. NULL + errno (ENOMEM) on failure. */
struct engine_session *engine_session_copy(const struct engine_session *s);

/* A saved state of a session (prompt caching, model.md 6.9): restoring it into a session of the
 * same model makes that session continue exactly as the original did from that point. */
struct engine_snapshot;
/* NULL + errno (ENOMEM) on failure. The snapshot does not reference the session. */
struct engine_snapshot *engine_session_snapshot(const struct engine_session *s);
/* Returns 0; -EINVAL when the snapshot was taken from another model or on another backend
 * (sessions of one backend share its model); -ENOSPC when it holds
 * more tokens than s->max_tokens; -ENOMEM. On error the session is unchanged. */
int engine_session_restore(struct engine_session *s, const struct engine_snapshot *snap);
/* Accepts NULL. */
void engine_snapshot_destroy(struct engine_snapshot *snap);
size_t engine_snapshot_bytes(const struct engine_snapshot *snap);
int engine_snapshot_n_tokens(const struct engine_snapshot *snap);

/* ---- sampling ---- */

struct engine_sampling {
	float temperature; /* <= 0: greedy (argmax, lowest id on ties) */
	int top_k;	   /* keep the k most likely ids; <= 0: off */
	float top_p;	   /* in (0, 1): keep the smallest set with probability mass >= top_p;
			    * otherwise off */
	uint64_t seed;	   /* the sampler's own PRNG: same seed, same logits -> same ids */
};

struct engine_sampler;
/* NULL + errno (EINVAL for a NaN temperature or top_p, ENOMEM). */
struct engine_sampler *engine_sampler_create(const struct engine_sampling *params);
/* Accepts NULL. */
void engine_sampler_destroy(struct engine_sampler *sm);
/* Draws one id from logits[vocab] (not modified). Returns the id or -EINVAL (also for logits
 * that are all NaN when sampling without top-k) / -ENOMEM. */
int32_t engine_sampler_sample(struct engine_sampler *sm, const float *logits, int vocab);

/* ---- generation loop ---- */

struct engine_generate_params {
	struct engine_sampling sampling;
	int max_new_tokens;	 /* > 0 */
	const int32_t *stop_ids; /* generation ends after emitting one of these (it is returned) */
	size_t n_stop_ids;
	/* Optional. Decoded text as it becomes complete (needs a tokenizer; special tokens and ids
	 * the tokenizer cannot name, such as padding rows of the vocabulary, add no text). Return
	 * nonzero to stop generating. */
	int (*on_text)(void *userdata, const char *text, size_t len);
	/* Optional. Every logits row the loop computes, in order: one per prompt position, then
	 * one per generated token fed back into the session. Return nonzero to stop. */
	int (*on_logits)(void *userdata, const float *logits, int vocab);
	/* Optional. Every sampled id. Return nonzero to stop. */
	int (*on_token)(void *userdata, int32_t id);
	/* Optional. The logits each id is about to be sampled from, which it may change (a
	 * grammar's mask, a bias; on_logits saw them unchanged). Returns 0 to sample, > 0 to end
	 * the loop without sampling, or a negative errno, which engine_generate returns. */
	int (*logits_hook)(void *userdata, float *logits, int vocab);
	void *userdata;
	/* Optional. Jump-forward (docs/policy.md): after a sampled id that does not end the loop
	 * (on_token has seen it), the ids that must follow it (a grammar's forced run), at most cap
	 * of them written to ids; they are appended together with the sampled id in one forward
	 * (an append of 1 + n positions whose last logits the next id is sampled from), count as
	 * generated ids (engine_generator_ids(), max_new_tokens, on_text) but are not sampled and
	 * not passed to on_token: the callee advances its own state over them. Returns n >= 0, or a
	 * negative errno that fails the loop. on_logits sees the last row of such an append only. */
	int (*forced)(void *userdata, int32_t *ids, size_t cap);
	/* Optional. The logits after a prompt the caller has already appended to the session (with
	 * images, in chunks): the loop then starts sampling from them, and takes no prompt. */
	const float *start_logits;
};

/* Appends the n_prompt >= 1 prompt ids to the session (on top of what it holds; none with
 * start_logits), then samples up to max_new_tokens ids, feeding each one back into the session
 * except the one that ends the loop (a stop id, the limit, or a callback's stop), which is
 * returned but not appended: append it yourself to continue the sequence. tok may be NULL when
 * on_text is NULL. *ret_ids (malloc'ed, caller frees) / *ret_n receive the generated ids.
 * Returns 0 or a negative errno (from the session, the sampler, the streaming decoder or the
 * logits hook). */
int engine_generate(struct engine_session *s, const struct engine_tokenizer *tok, const int32_t *prompt,
		    size_t n_prompt, const struct engine_generate_params *p, int32_t **ret_ids, size_t *ret_n);

/* ---- stepping generators ----
 * The loop of engine_generate() one token at a time, so that the generations of several
 * sessions of one backend advance together: each step samples every running generator's next
 * id and feeds the ids back in one engine_forward_batch(). A generator holds its session's
 * sampler, stop ids, callbacks (the logits hook of a grammar mask) and budget; it finishes
 * (a stop id, max_new_tokens, a callback's stop) or fails (a hook's error) on its own, leaving
 * the others running. The session must not be used otherwise while its generator runs, and
 * must outlive it. Sessions give exactly the ids engine_generate() gives them alone. */
struct engine_generator;

/* A generator over session s whose first id is sampled from logits[vocab] (copied): the
 * logits of the session's last position. p as for engine_generate() (start_logits is
 * ignored; tok may be NULL without on_text). NULL + errno (EINVAL, ENOMEM). */
struct engine_generator *engine_generator_create(struct engine_session *s, const struct engine_tokenizer *tok,
						 const struct engine_generate_params *p, const float *logits);
/* Accepts NULL. */
void engine_generator_destroy(struct engine_generator *g);
/* The two halves of a step, for a caller that puts other appends (prefill chunks) into the
 * same forward: sample() runs the hook and the sampler and, unless the id ended the
 * generation, fills *ret_entry with the append that feeds it back (its logits land in the
 * generator) and returns 1; it returns 0 when the generator has finished, or its error. The
 * entry goes into one engine_forward_batch(); then fed() takes that call's result (0 or a
 * negative errno, which fails the generator) and returns the status. -EINVAL out of order. */
int engine_generator_sample(struct engine_generator *g, struct engine_batch_entry *ret_entry);
int engine_generator_fed(struct engine_generator *g, int err);
/* Forwards the generator ran (appends fed back) and ids it appended without sampling them
 * (the forced callback's), since creation. */
void engine_generator_stats(const struct engine_generator *g, uint64_t *ret_forwards, uint64_t *ret_forced);
/* 0 while running, 1 finished, or the negative errno it failed with. */
int engine_generator_status(const struct engine_generator *g);
/* The ids generated so far (the last one, which ended the generation, is not appended to the
 * session, as with engine_generate()); valid until the next step or destroy. */
const int32_t *engine_generator_ids(const struct engine_generator *g, size_t *ret_n);
/* One step of n generators of backend b (finished ones are skipped): one batched forward for
 * all that continue. Returns how many are still running, or a negative errno: -EINVAL (a NULL
 * generator, one of another backend), -ENOMEM, or the forward's error, with which every
 * generator fed in this step fails. */
int engine_generators_step(struct engine_backend *b, struct engine_generator *const *gens, size_t n);

/* ==== vision (vision_*.c, image*.c) ====================================================== */

/* Images enter as 8-bit RGB: decoded from PNG or copied from a frame in memory. Sizes from a
 * file or a client are checked against these limits before anything is allocated (EFBIG). */
#define ENGINE_IMAGE_MAX_DIM 16384u		/* width and height, each */
#define ENGINE_IMAGE_MAX_PIXELS (64u << 20)	/* width * height */
#define ENGINE_IMAGE_MAX_PNG_BYTES (256u << 20) /* a PNG file or buffer */

struct engine_image;

/* Decodes a PNG file / a PNG held in memory. Every PNG colour type and bit depth is accepted
 * and becomes 8-bit RGB as PIL's convert("RGB") makes it: alpha and tRNS transparency are
 * dropped (not composited), grey is replicated, palettes are expanded, 16-bit samples keep
 * their high byte (as PIL does for 16-bit colour; PIL clips 16-bit grey instead). Gamma chunks
 * are ignored. On failure returns NULL, sets errno (ENOENT/EACCES from the file system, EINVAL
 * for a corrupt or truncated PNG, EFBIG for a limit, ENOMEM) and writes one precise sentence to
 * errbuf (may be NULL when errlen is 0), e.g. "shot.png: corrupt PNG: IDAT: invalid distance
 * too far back"; buffers are named "PNG". */
struct engine_image *engine_image_load_png(const char *path, char *errbuf, size_t errlen);
struct engine_image *engine_image_decode_png(const void *data, size_t len, char *errbuf, size_t errlen);
/* Copies a packed 8-bit RGB frame: `height` rows of `width` R,G,B triplets, rows `stride`
 * bytes apart (stride >= 3 * width). Returns NULL with errno EINVAL (bad geometry), EFBIG
 * (limits) or ENOMEM. */
struct engine_image *engine_image_from_rgb(int width, int height, size_t stride, const uint8_t *pixels);
/* Accepts NULL. */
void engine_image_destroy(struct engine_image *img);
int engine_image_width(const struct engine_image *img);
int engine_image_height(const struct engine_image *img);
/* The pixels: packed R,G,B rows, 3 * width bytes each; owned by the image. */
const uint8_t *engine_image_rgb(const struct engine_image *img);

/* Tiling (model.md 4.1): the image is resized to a grid of cols x rows square tiles, chosen
 * among every grid of at most max_tiles tiles as the one whose aspect ratio is closest to the
 * image's; on equal ratios a larger grid wins only if the image has more than half its pixels.
 * A thumbnail of the whole image follows the tiles when there is more than one. */
#define ENGINE_VISION_MAX_TILES 48	 /* largest tile budget accepted */
#define ENGINE_VISION_MAX_TILE_SIZE 2048 /* largest tile side in pixels */

struct engine_vision_grid {
	int cols;	/* tiles across: the target width is cols * tile_size */
	int rows;	/* tiles down */
	bool thumbnail; /* a whole-image thumbnail follows the cols * rows tiles */
	int n_tiles;	/* cols * rows + thumbnail */
};

/* The reference's grid choice for a width x height image, bit for bit. Pure.
 * Returns 0, or -EINVAL for a dimension < 1, a tile size outside 1..ENGINE_VISION_MAX_TILE_SIZE
 * or max_tiles outside 1..ENGINE_VISION_MAX_TILES. */
int engine_vision_select_grid(int width, int height, int tile_size, int max_tiles, bool use_thumbnail,
			      struct engine_vision_grid *ret_grid);

/* What the checkpoint's preprocessor config says (force_image_size, max_num_tiles,
 * use_thumbnail, norm_mean, norm_std). max_tiles may be lowered per request to trade accuracy
 * for speed (fewer image tokens). */
struct engine_vision_preprocess {
	int tile_size;
	int max_tiles;
	bool use_thumbnail;
	float mean[3];
	float std[3];
};

/* The Nano-VL v2 defaults: 512-pixel tiles, 12 tiles, thumbnail, OpenAI-CLIP mean/std. */
void engine_vision_preprocess_defaults(struct engine_vision_preprocess *p);

/* Turns an image into the model's pixel input (model.md 4.1): grid choice, torchvision's
 * antialiased bicubic resize of the [0,1] float image (unclamped), row-major tiles, the
 * thumbnail last, (x - mean) / std per channel. *ret_pixels receives
 * [n_tiles][3][tile_size][tile_size] floats (malloc'ed, caller frees). Returns 0, -EINVAL for
 * bad options, -ENOMEM. */
int engine_vision_preprocess(const struct engine_image *img, const struct engine_vision_preprocess *p,
			     struct engine_vision_grid *ret_grid, float **ret_pixels);

/* The vision encoder of a loaded NemotronH_Nano_VL_V2 checkpoint (model.md 4.2-4.7): RADIO ViT
 * (CPE position embedding, prefix tokens dropped, final norm only if the checkpoint has one),
 * pixel shuffle v2, mlp1. fp32 math over the weights in their stored dtype, on the CPU pool.
 * The handle borrows the model's tensors: destroy it before the model. It is immutable after
 * creation and may be used by several threads at once. */
struct engine_vision;

/* Reads the preprocessing from config.json and, when the model directory has one,
 * preprocessor_config.json (as engine_vision_read_preprocessor_config() does).
 * Returns NULL and sets errno: ENOENT when the checkpoint has no vision tower, EINVAL (with one
 * sentence in errbuf) for missing or mis-shaped vision tensors or unsupported settings
 * (ps_version other than "v2", a projector width other than the LM's hidden size), EFBIG for a
 * size over a limit, ENOMEM. */
struct engine_vision *engine_vision_create(const struct engine_model *model, char *errbuf, size_t errlen);
/* Accepts NULL. */
void engine_vision_destroy(struct engine_vision *v);
/* The checkpoint's preprocessing: config.json's force_image_size, max_num_tiles, use_thumbnail,
 * norm_mean, norm_std, with the defaults of engine_vision_preprocess_defaults() for what it
 * does not say. */
void engine_vision_get_preprocess(const struct engine_vision *v, struct engine_vision_preprocess *ret);
/* Applies the checkpoint's preprocessor_config.json (image_size, max_num_tiles, use_thumbnail,
 * norm_mean, norm_std) over config.json's values. The directory is the caller's (the model
 * does not keep it); call right after engine_vision_create(), before the handle is shared.
 * Returns 0; -ENOENT/-EACCES from the file system, -EINVAL (one sentence in errbuf) for a
 * malformed file or an image_size other than config.json's force_image_size, -EFBIG above
 * 1 MiB. On error the handle is unchanged. */
int engine_vision_read_preprocessor_config(struct engine_vision *v, const char *path, char *errbuf,
					   size_t errlen);
/* The `<image>` token id config.json declares (img_context_token_id, or the older
 * image_context_token_id), or -ENOENT when it declares none. The prompt builder should check it
 * against the tokenizer's id for "<image>". */
int32_t engine_vision_image_token(const struct engine_vision *v);
/* Language-model embeddings per tile ((tile / patch)^2 * downsample_ratio^2: 256). */
int engine_vision_tokens_per_tile(const struct engine_vision *v);
/* Width of those embeddings (the language model's hidden size). */
int engine_vision_embed_dim(const struct engine_vision *v);

/* Encodes n_tiles preprocessed tiles (engine_vision_preprocess() output with this checkpoint's
 * settings) into n_tiles * tokens_per_tile rows of embed_dim floats at `out` (caller-allocated),
 * tile by tile in order, each tile's rows in row-major (i, j) order: the rows that replace the
 * `<image>` positions (model.md 4.8). Returns 0, -EINVAL, -ENOMEM. */
int engine_vision_encode(const struct engine_vision *v, const float *pixels, int n_tiles, float *out);
/* The same on backend b, a backend of the handle's model: b NULL and the CPU backend in fp32
 * run engine_vision_encode() itself, the CPU backend in bf16 its bf16 steps (oneDNN products,
 * bf16 row kernels; rows within cosine 0.999 of fp32's); a CUDA backend runs the ViT and the projector on its
 * device in its precision, all tiles in one batch, and copies the rows to `out` (for tests and tools:
 * engine_vision_encode_image_on() keeps them on the device for the prefill). Uses the
 * backend's thread rules (CUDA: the thread that owns its device). Returns 0, -EINVAL (n_tiles beyond
 * ENGINE_VISION_MAX_TILES + 1), -ENOMEM, -EIO. */
int engine_vision_encode_on(struct engine_backend *b, const struct engine_vision *v, const float *pixels,
			    int n_tiles, float *out);
/* Preprocesses and encodes one image. max_tiles: 0 for the checkpoint's budget, or a smaller
 * per-request budget (1..budget; fewer tiles = fewer image tokens, faster, less detail).
 * *ret_embeds (malloc'ed, caller frees) receives *ret_rows = n_tiles * tokens_per_tile rows.
 * Returns 0, -EINVAL (bad max_tiles), -ENOMEM. */
int engine_vision_encode_image(const struct engine_vision *v, const struct engine_image *img, int max_tiles,
			       struct engine_vision_grid *ret_grid, float **ret_embeds, size_t *ret_rows);

/* Preprocesses and encodes one image on backend b into an engine_rows handle of *ret_rows =
 * n_tiles * tokens_per_tile rows, the handle's rows held where b's prefill reads them. The CPU
 * backend (and b NULL) runs engine_vision_encode_image()'s steps with the tiles encoded as
 * engine_vision_encode_on() does (in fp32 host rows equal to engine_vision_encode_image()'s bit
 * for bit); a CUDA backend uploads the image once from page-locked memory, resizes,
 * cuts and normalises the tiles on its device (within 1/255 of the CPU's tiles), encodes all
 * tiles in one batch in its precision and leaves the rows in its device memory. max_tiles as in
 * engine_vision_encode_image(). Uses the backend's thread rules. Returns 0, -EINVAL, -ENOMEM,
 * -EIO. */
int engine_vision_encode_image_on(struct engine_backend *b, const struct engine_vision *v,
				  const struct engine_image *img, int max_tiles,
				  struct engine_vision_grid *ret_grid, struct engine_rows **ret_rows);

/* A resumable encode: what engine_vision_encode_on(b, v, pixels, n_tiles) computes, in
 * slices that the caller runs when it chooses (the daemon's model worker, one slice between two
 * batched forwards, so that a screenshot does not stall the other sessions' decoding). A step
 * is, on the CPU backend (and b NULL), a tile's patch embedding, one ViT block of a tile, its
 * final norm with the projector's first product, or the projector's second product, each with the backend's
 * products: the rows are engine_vision_encode_on()'s bit for bit however the steps are sliced. On a backend
 * with a device a step is one tile, encoded as engine_vision_encode_on(b, v, tile, 1) encodes it. */
struct engine_vision_job;

/* Begins the encode of n_tiles (1..ENGINE_VISION_MAX_TILES + 1) preprocessed tiles; `pixels`
 * is borrowed until the job is destroyed. Runs nothing yet. Returns 0, -EINVAL, -ENOMEM. */
int engine_vision_encode_begin(struct engine_backend *b, const struct engine_vision *v, const float *pixels,
			       int n_tiles, struct engine_vision_job **ret_job);
/* Begins the encode of one image as engine_vision_encode_image_on(b, v, img, max_tiles) encodes
 * it; `img` is borrowed until the job is destroyed. Chooses the grid (*ret_grid) and runs
 * nothing else yet, touching no backend state. The first step preprocesses: on a backend with a
 * device it uploads the image and resizes, cuts and normalises the tiles on the device as
 * engine_vision_encode_image_on() does there, then each step encodes one tile from those device
 * tiles into device rows; on the CPU backend (and b NULL) it runs engine_vision_preprocess() on
 * the host, then the steps are engine_vision_encode_begin()'s on those tiles. The finished rows
 * are engine_vision_encode_image_on()'s bit for bit on the CPU; on a device, each tile's rows
 * are what its encoder gives for a batch of one tile (bit for bit the whole image's batch where
 * the device's products do not depend on the batch's rows, as in the emulation).
 * engine_vision_encode_preprocess_us() times the first step. Returns 0, -EINVAL (bad max_tiles
 * or image), -ENOMEM. */
int engine_vision_encode_begin_image(struct engine_backend *b, const struct engine_vision *v,
				     const struct engine_image *img, int max_tiles,
				     struct engine_vision_grid *ret_grid, struct engine_vision_job **ret_job);
/* Microseconds the preprocessing step of an image-begun job took (its device work waited for),
 * 0 before it ran or for a job begun from pixels. */
uint64_t engine_vision_encode_preprocess_us(const struct engine_vision_job *j);
/* Runs up to max_steps (>= 1) steps under the backend's thread rules. Returns 1 while steps
 * remain, 0 once every tile is encoded, or the encoder's error (-ENOMEM, -EIO; the job can
 * then only be destroyed); -EINVAL after the end. */
int engine_vision_encode_advance(struct engine_vision_job *j, int max_steps);
/* Steps done and in all (*ret_total), for progress reports. */
int engine_vision_encode_progress(const struct engine_vision_job *j, int *ret_total);
/* After advance returned 0: the rows as an engine_rows handle (n_tiles * tokens_per_tile rows,
 * in host memory on the CPU, on b's device otherwise), the caller's. Returns 0, -EINVAL (not
 * finished, or taken already), -ENOMEM, -EIO. */
int engine_vision_encode_finish(struct engine_vision_job *j, struct engine_rows **ret_rows);
/* Accepts NULL. */
void engine_vision_job_destroy(struct engine_vision_job *j);

/* Splicing (model.md 4.8): for a run of prompt tokens, points embeds[i] at the next image row for
 * every position whose id is image_token (the `<image>` id, from the tokenizer or config) and
 * sets the others to NULL: the `embeds` argument of engine_session_append(). `rows` holds n_rows
 * rows of `dim` floats, image-major, tile by tile (what engine_vision_encode*() produced for the
 * images of this run, in order). The number of image_token positions must equal n_rows;
 * otherwise returns -EINVAL and writes one sentence to errbuf (may be NULL when errlen is 0)
 * naming both counts. embeds (n entries) is caller-allocated and points into `rows`. */
int engine_vision_splice(const int32_t *tokens, size_t n, int32_t image_token, const float *rows,
			 size_t n_rows, size_t dim, const float **embeds, char *errbuf, size_t errlen);
/* The same with the rows of n_images handles, image after image: refs (n entries,
 * caller-allocated) is the `refs` argument of engine_session_append_rows(). The same errors. */
int engine_vision_splice_rows(const int32_t *tokens, size_t n, int32_t image_token,
			      const struct engine_rows *const *images, size_t n_images,
			      struct engine_row_ref *refs, char *errbuf, size_t errlen);

/* ==== chat (chat.c) ====================================================================== */

/* The prompt format of the Nemotron-Nano-VL v2 family (model.md 5.2), rendered straight to token
 * ids with the checkpoint's tokenizer, turn by turn:
 *
 *   opening    <s><SPECIAL_10>System\n                           (before the first turn)
 *   system     {text}\n                                          (first turn only, optional;
 *                                                                else an empty line)
 *   user       <SPECIAL_11>User\n{text}\n
 *   assistant  <SPECIAL_11>Assistant\n{text}\n<SPECIAL_12>\n
 *   generation <SPECIAL_11>Assistant\n<think></think>             (reasoning off)
 *              <SPECIAL_11>Assistant\n<think>\n                   (reasoning on)
 *
 * {text} is stripped of surrounding whitespace (as Python's str.strip()) and, in system and user
 * turns, of every "/think" and "/no_think"; each of those switches reasoning on / off for the
 * following generation prompts (the last one written wins; the default is the `reasoning`
 * option). "/think" and "/no_think" are removed from message text, a "</think>" in it kept
 * whole and switching nothing, as the base model's template does. The first turn opens with BOS
 * (<s>) and the system block, empty when the first turn is not a system turn. Assistant turns
 * are rendered as given, thinking included (the caller drops what the history should not hold).
 * Each `<image>` placeholder in a user turn becomes <img> + <image> x (tokens_per_tile x
 * tiles) + </img>; a user turn with images but no placeholder gets "<image>\n" in front of its
 * text for one image, "<image 1><image> <image 2><image>\n" for more (the template's). The rendered text is
 * then tokenized as HF `tokenizer.encode(text, add_special_tokens=False)` does, so the ids equal those of the
 * reference template + processor + tokenizer. Marker ids come from the tokenizer, never from
 * constants. Message text may not contain special tokens of its own (-EINVAL): a task text
 * cannot forge a turn.
 *
 * Rendering a conversation turn by turn gives exactly the ids of rendering it at once, so a
 * persistent session appends only the new turn (an agent step: observation image + text, then
 * the generation prompt). A struct engine_chat holds that small conversation state (whether a
 * turn was rendered, the reasoning switch); it is used by one thread at a time. */

#define ENGINE_CHAT_MAX_TEXT_BYTES (4u << 20) /* one message's text */
#define ENGINE_CHAT_MAX_IMAGES 64	      /* images in one message */

enum engine_chat_role {
	ENGINE_CHAT_SYSTEM,
	ENGINE_CHAT_USER,
	ENGINE_CHAT_ASSISTANT,
};

struct engine_chat_message {
	enum engine_chat_role role;
	const char *text;	/* UTF-8, NUL-terminated */
	const int *image_tiles; /* tiles (engine_vision_grid.n_tiles) of each image, in order */
	size_t n_images;	/* user turns only */
};

/* Where one image's <image> positions are in engine_chat_tokens.ids. */
struct engine_chat_image {
	size_t begin; /* first <image> position */
	size_t n;     /* tiles * tokens_per_tile positions: the image's embedding rows */
	int n_tiles;
};

/* Rendered ids, accumulated over calls: each render call appends to it. Start from a zeroed
 * struct; engine_chat_tokens_finish() frees it (and accepts a zeroed one). */
struct engine_chat_tokens {
	int32_t *ids;
	size_t n_ids;
	struct engine_chat_image *images;
	size_t n_images;
	char *text; /* the rendered text the ids encode, NUL-terminated (NULL when empty) */
	size_t text_len;
};
void engine_chat_tokens_finish(struct engine_chat_tokens *t);

struct engine_chat;

/* A renderer over `tok` (must outlive it). vision may be NULL for text only (images are then
 * -EINVAL); with it, tokens per tile come from engine_vision_tokens_per_tile() and the config's
 * image token must be the tokenizer's "<image>". `reasoning` is the default of the generation
 * prompt. Returns NULL and sets errno: EINVAL with one sentence in errbuf when the tokenizer
 * lacks a marker of the format (e.g. "the tokenizer has no token '<SPECIAL_11>'"), ENOMEM. */
struct engine_chat *engine_chat_create(const struct engine_tokenizer *tok, const struct engine_vision *vision,
				       bool reasoning, char *errbuf, size_t errlen);
/* The same over a tokenizer alone, for a renderer that knows the vision encoder's tokens per tile
 * without holding it (the agent's prompt builder): each image tile expands to tokens_per_tile
 * <image> ids; 0 renders text only. Same errors, and EINVAL for tokens_per_tile outside
 * 0..ENGINE_CHAT_MAX_TOKENS_PER_TILE. */
#define ENGINE_CHAT_MAX_TOKENS_PER_TILE 4096
struct engine_chat *engine_chat_create_raw(const struct engine_tokenizer *tok, int tokens_per_tile,
					   bool reasoning, char *errbuf, size_t errlen);
/* A copy of c's conversation state (over the same tokenizer), e.g. the state after a prefix that
 * a session snapshot holds, to render from again. NULL + errno ENOMEM. */
struct engine_chat *engine_chat_dup(const struct engine_chat *c);
/* Accepts NULL. */
void engine_chat_destroy(struct engine_chat *c);
/* Back to an empty conversation (the reasoning default restored). */
void engine_chat_reset(struct engine_chat *c);

/* Renders one turn and appends its ids (and image ranges) to *out. Returns 0; -EINVAL (one
 * sentence in errbuf) for a system turn that is not the first, images outside a user turn, a
 * placeholder count that is neither 0 nor n_images, a tile count outside
 * 1..ENGINE_VISION_MAX_TILES + 1, or a special token in the text; -EILSEQ for invalid UTF-8;
 * -E2BIG above a limit; -ENOMEM. On error neither *out nor the conversation state changes. */
int engine_chat_append(struct engine_chat *c, const struct engine_chat_message *m,
		       struct engine_chat_tokens *out, char *errbuf, size_t errlen);
/* Appends the generation prompt (reasoning as the conversation so far says). Returns 0 or
 * -ENOMEM. */
int engine_chat_generation_prompt(struct engine_chat *c, struct engine_chat_tokens *out);
/* After generating an answer into a session: the ids that close the assistant turn
 * ("<SPECIAL_12>\n"), to append instead of the stop id engine_generate() returned, so the next
 * user turn follows a closed turn. Such a session keeps the generation prompt's <think></think>
 * and the answer as generated, where a whole-conversation render of the same history (the answer
 * as an assistant turn) would not: that is the price of never re-prefilling. Returns 0 or
 * -ENOMEM. */
int engine_chat_close_generation(struct engine_chat *c, struct engine_chat_tokens *out);
/* The same for a generation that stopped right after the last byte of its content, without the
 * "\n" the format puts before the end of turn (decoding constrained by a grammar that allows the
 * stop id only there): appends "\n<SPECIAL_12>\n", so the turn ends as an assistant turn of the
 * history does. Returns 0 or -ENOMEM. */
int engine_chat_close_content(struct engine_chat *c, struct engine_chat_tokens *out);
/* Resets, then renders n messages and, when add_generation_prompt, the generation prompt:
 * the whole-conversation form of the calls above. Same errors as engine_chat_append(). */
int engine_chat_render(struct engine_chat *c, const struct engine_chat_message *msgs, size_t n,
		       bool add_generation_prompt, struct engine_chat_tokens *out, char *errbuf,
		       size_t errlen);
/* Whether the next generation prompt opens reasoning (<think>\n). */
bool engine_chat_reasoning(const struct engine_chat *c);
/* The ids generation stops at: end of turn (<SPECIAL_12>) and, when the tokenizer has it,
 * </s>. Writes up to 2 ids to ret_ids and returns how many. */
size_t engine_chat_stop_ids(const struct engine_chat *c, int32_t ret_ids[2]);
/* The tokenizer's "<image>" id (what engine_vision_splice() looks for). */
int32_t engine_chat_image_token(const struct engine_chat *c);

/* The chat template a checkpoint ships, compared with the format rendered here. */
enum engine_chat_template {
	ENGINE_CHAT_TEMPLATE_KNOWN,	/* it has every marker of model.md 5.2 */
	ENGINE_CHAT_TEMPLATE_NONE,	/* the checkpoint ships none: the built-in format is used */
	ENGINE_CHAT_TEMPLATE_DIFFERENT, /* a different format: the prompts rendered here may not be
					 * what the model was trained on */
};
/* Checks template source text (Jinja). Returns an enum engine_chat_template (never NONE) and,
 * for DIFFERENT, writes one sentence to msg naming the markers it lacks and any foreign chat
 * markers it has, e.g. "the chat template lacks '<SPECIAL_11>User', '<SPECIAL_12>' and uses
 * '<|im_start|>'". `name` (e.g. the file) starts the sentence when non-NULL. */
int engine_chat_check_template(const char *name, const char *source, size_t len, char *msg, size_t msglen);
/* Checks the model directory's chat_template.jinja and tokenizer_config.json `chat_template`
 * (a string, or a list of {name, template} of which "default" or else the first is used).
 * Returns an enum engine_chat_template (msg says which file and what differs; for NONE it says
 * that the built-in format is used), or -EINVAL (one sentence in msg) for an unreadable or
 * malformed file, -EFBIG above ENGINE_CHAT_MAX_TEMPLATE_BYTES, -ENOMEM. */
#define ENGINE_CHAT_MAX_TEMPLATE_BYTES (16u << 20)
int engine_chat_check_model(const struct engine_model *model, char *msg, size_t msglen);
