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

#define ENGINE_MODEL_MAX_PATTERN 512

struct engine_model_info {
	int n_layers;
	int n_mamba, n_attention, n_mlp;
	int hidden;
	int vocab;                 /* embedding rows */
	uint64_t n_params;         /* language-model parameters (a tied head counted once) */
	uint64_t weight_bytes;     /* bytes of those parameters in the checkpoint */
	bool tied_embeddings;
	bool vlm;                  /* NemotronH_Nano_VL_V2 layout (vision tensors may be present) */
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
#define ENGINE_TOKENIZER_MAX_FILE_BYTES (256u << 20)   /* tokenizer.json size */
#define ENGINE_TOKENIZER_MAX_VOCAB (1u << 21)          /* ids (model vocab + added tokens) */
#define ENGINE_TOKENIZER_MAX_MERGES (1u << 22)
#define ENGINE_TOKENIZER_MAX_TOKEN_BYTES 4096u         /* one token's string */
#define ENGINE_TOKENIZER_MAX_PATTERN_BYTES 65536u      /* one pre-tokenizer regex */
/* Largest text engine_tokenizer_encode() accepts (-E2BIG above). */
#define ENGINE_TOKENIZER_MAX_INPUT_BYTES (64u << 20)

/* Loads `path`. On failure returns NULL, sets errno (-ENOENT/-EACCES from the file system,
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
int engine_tokenizer_token_bytes(const struct engine_tokenizer *tok, int32_t id,
				 const uint8_t **ret_bytes, size_t *ret_len);
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

/* ==== vision (vision_*.c, image*.c) ====================================================== */

/* Images enter as 8-bit RGB: decoded from PNG or copied from a frame in memory. Everything that
 * comes from a file or a client is checked against these limits first (-EFBIG / EFBIG above). */
#define ENGINE_IMAGE_MAX_DIM 16384u            /* width and height, each */
#define ENGINE_IMAGE_MAX_PIXELS (64u << 20)     /* width * height */
#define ENGINE_IMAGE_MAX_PNG_BYTES (256u << 20) /* a PNG file or buffer */

struct engine_image;

/* Decodes a PNG file / a PNG held in memory. Every PNG colour type and bit depth is accepted
 * and becomes 8-bit RGB as PIL's convert("RGB") makes it: alpha and tRNS transparency are
 * dropped (not composited), grey is replicated, palettes are expanded, 16-bit samples keep
 * their high byte. Gamma chunks are ignored. On failure returns NULL, sets errno (ENOENT/EACCES
 * from the file system, EINVAL for a corrupt or truncated PNG, EFBIG for a limit, ENOMEM) and
 * writes one precise sentence to errbuf (may be NULL when errlen is 0), e.g.
 * "shot.png: PNG: IDAT: invalid distance too far back". */
struct engine_image *engine_image_load_png(const char *path, char *errbuf, size_t errlen);
struct engine_image *engine_image_decode_png(const void *data, size_t len, char *errbuf,
					     size_t errlen);
/* Copies a packed 8-bit RGB frame: `height` rows of `width` R,G,B triplets, rows `stride`
 * bytes apart (stride >= 3 * width). Returns NULL with errno EINVAL (bad geometry), EFBIG
 * (limits) or ENOMEM. */
struct engine_image *engine_image_from_rgb(int width, int height, size_t stride,
					   const uint8_t *pixels);
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
#define ENGINE_VISION_MAX_TILES 48        /* largest tile budget accepted */
#define ENGINE_VISION_MAX_TILE_SIZE 2048  /* largest tile side in pixels */

struct engine_vision_grid {
	int cols;       /* tiles across: the target width is cols * tile_size */
	int rows;       /* tiles down */
	bool thumbnail; /* a whole-image thumbnail follows the cols * rows tiles */
	int n_tiles;    /* cols * rows + thumbnail */
};

/* The reference's grid choice for a width x height image, bit for bit. Pure.
 * Returns 0, or -EINVAL for a dimension < 1, a tile size outside 1..ENGINE_VISION_MAX_TILE_SIZE
 * or max_tiles outside 1..ENGINE_VISION_MAX_TILES. */
int engine_vision_select_grid(int width, int height, int tile_size, int max_tiles,
			      bool use_thumbnail, struct engine_vision_grid *ret_grid);

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
int engine_vision_preprocess(const struct engine_image *img,
			     const struct engine_vision_preprocess *p,
			     struct engine_vision_grid *ret_grid, float **ret_pixels);
