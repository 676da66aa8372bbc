/* holo-infer: run the language model of a checkpoint directory from the command line.
 *
 *   holo-infer --model DIR (--prompt TEXT | --prompt-file FILE | --prompt-ids 1,2,3)
 *              [--tokenize] [--max-tokens N] [--temp T] [--top-k K] [--top-p P] [--seed S]
 *              [--stop ID]... [--ignore-eos] [--threads N] [--dump-logits FILE.npy]
 *              [--image FILE.png]... [--system TEXT] [--think] [--max-tiles N]
 *              [--backend auto|cpu|cuda] [--device N] [--precision bf16|fp32]
 *              [--weights default|bf16|q8|q4|fp8] [--profile]
 *   holo-infer --model DIR --render (--messages FILE.json | --prompt TEXT | --prompt-file FILE)
 *              [--image FILE.png]... [--system TEXT] [--think] [--max-tiles N]
 *
 * The generated text streams to stdout (ids when the checkpoint has no tokenizer); timings go to
 * stderr. --dump-logits writes a float32 .npy [rows, vocab]: the logits of every prompt position,
 * then of every generated token fed back into the model.
 *
 * With --image, --system or --think the prompt is a chat (engine_chat_*, model.md 5.2): an
 * optional system turn, the prompt as the user turn with the images (each `<image>` in the text
 * marks where one goes; without any they go in front), then the generation prompt. Images are
 * preprocessed and encoded by the checkpoint's vision tower on the run's backend (on a CUDA
 * device both steps run there, all tiles of an image in one batch, and the rows stay in device
 * memory for the prefill) and their rows spliced into the prompt; generation stops at the end
 * of the turn. The checkpoint's own chat template is
 * compared with that format and a difference is reported on stderr.
 *
 * --render prints the chat prompt instead of running the model: one JSON line with its text, its
 * ids and where each image's <image> run is, to diff against transformers' apply_chat_template
 * on the same checkpoint (tools/chat_template_diff.py). The conversation is the chat options'
 * (the images only preprocessed, for their tile counts) or a --messages file in transformers'
 * messages form, whose images are {"type": "image", "tiles": N} parts (render.c).
 *
 * --weights q8|q4|fp8 quantizes the language model's linear layers at load (the CPU backend;
 * docs/quantization.md; an FP8 checkpoint's are fp8 as stored); the backend line on stderr
 * names the format and the bytes held.
 * --backend, --precision and --weights are checked before the model loads (engine_backend_resolve()): a
 * backend that cannot run the language model is refused with one sentence, never replaced by the
 * CPU behind the user's back. --profile (CUDA only) prints to stderr, after the run, one line per
 * kernel and per GEMM call site (the vision encoder's too, on an image run) with its launches
 * and device milliseconds, then the bytes copied per direction; a run that put nothing on the
 * device is an error.
 */
#include <errno.h>
#include <math.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "engine.h"
#include "render.h"

#define NPY_HEADER_BYTES 128

/* The vision-language prompt (chat mode). */
struct chat_run {
	struct engine_vision *vision;
	struct engine_chat *chat;
	struct engine_chat_tokens prompt;
	struct engine_rows *images[ENGINE_CHAT_MAX_IMAGES]; /* each image's embedding rows, where
							     * the backend's prefill reads them */
	size_t n_images, n_rows;
	struct engine_row_ref *refs; /* per prompt position: an image row or none */
	int n_tiles;
	uint64_t preprocess_us, vision_us;
	bool on_device; /* preprocessed and encoded on the backend's device */
};

struct run {
	FILE *npy;
	uint64_t rows;
	int vocab;
	bool npy_failed;
	uint64_t t_first; /* when the first id was sampled (prefill done) */
	size_t n_ids;
	bool print_ids;
};

static void usage(FILE *f)
{
	fprintf(f, "usage: holo-infer --model DIR (--prompt TEXT | --prompt-file FILE | --prompt-ids 1,2,3)\n"
		   "                  [--tokenize] [--max-tokens N] [--temp T] [--top-k K] [--top-p P]\n"
		   "                  [--seed S] [--stop ID]... [--ignore-eos] [--threads N]\n"
		   "                  [--dump-logits FILE.npy] [--image FILE.png]... [--system TEXT]\n"
		   "                  [--think] [--max-tiles N] [--backend B] [--device N]\n"
		   "                  [--precision P] [--weights W] [--profile]\n"
		   "       holo-infer --model DIR --render (--messages F | --prompt TEXT | --prompt-file F)\n"
		   "                  [--image FILE.png]... [--system TEXT] [--think] [--max-tiles N]\n"
		   "\n"
		   "  --render         print the chat prompt (text, ids, image runs) as JSON and exit\n"
		   "  --messages F     with --render: a JSON conversation in transformers' messages form;\n"
		   "                   an image part is {\"type\": \"image\", \"tiles\": N}\n"
		   "  --tokenize       print the prompt's ids as a JSON array and exit\n"
		   "  --max-tokens N   tokens to generate (default 64)\n"
		   "  --temp T         sampling temperature; 0 = greedy (default 0)\n"
		   "  --top-k K        keep the K most likely tokens (default off)\n"
		   "  --top-p P        nucleus sampling mass in (0, 1]; 1 keeps every token (default)\n"
		   "  --seed S         seed of the sampler's PRNG (default 0)\n"
		   "  --stop ID        stop after generating ID (repeatable; the model's eos id is added\n"
		   "                   unless --ignore-eos)\n"
		   "  --threads N      CPU threads (default: all available, or $HOLOD_THREADS)\n"
		   "  --dump-logits F  write every computed logits row as float32 .npy [rows, vocab]\n"
		   "  --image F        a PNG for the user turn (repeatable; chat mode); `<image>` in the\n"
		   "                   prompt marks where each goes, else they go in front\n"
		   "  --system TEXT    a system turn (chat mode)\n"
		   "  --think          open the answer with reasoning (<think>\\n; default off)\n"
		   "  --max-tiles N    tile budget per image, below the checkpoint's (default: its own)\n"
		   "  --backend B      auto, cpu or cuda (default auto: cuda when a device can run the\n"
		   "                   model, else the cpu)\n"
		   "  --device N       CUDA device index (default 0)\n"
		   "  --precision P    bf16 or fp32 (default $HOLOD_PRECISION, else bf16 on cuda and on\n"
		   "                   the cpu for a bf16 checkpoint, fp32 on the cpu otherwise)\n"
		   "  --weights W      the linear layers' format: default (as stored), bf16, q8, q4 or\n"
		   "                   fp8 (quantized at load; fp8 on the cpu only; default\n"
		   "                   $HOLOD_WEIGHTS)\n"
		   "  --profile        print the device's kernels and GEMM calls after the run (cuda)\n");
}

static int write_npy_header(FILE *f, uint64_t rows, int vocab)
{
	char hdr[NPY_HEADER_BYTES];
	memset(hdr, ' ', sizeof(hdr));
	memcpy(hdr, "\x93NUMPY\x01\x00", 8);
	uint16_t hlen = NPY_HEADER_BYTES - 10;
	hdr[8] = (char)(hlen & 0xff);
	hdr[9] = (char)(hlen >> 8);
	int n = snprintf(hdr + 10, sizeof(hdr) - 10,
			 "{'descr': '<f4', 'fortran_order': False, 'shape': (%" PRIu64 ", %d), }", rows,
			 vocab);
	if (n < 0 || n >= (int)sizeof(hdr) - 11)
		return -EINVAL;
	hdr[10 + n] = ' ';
	hdr[NPY_HEADER_BYTES - 1] = '\n';
	if (fseek(f, 0, SEEK_SET) != 0 || fwrite(hdr, 1, sizeof(hdr), f) != sizeof(hdr))
		return -errno;
	return 0;
}

static int on_logits(void *ud, const float *logits, int vocab)
{
	struct run *r = ud;
	if (r->npy && !r->npy_failed) {
		if (fwrite(logits, sizeof(float), (size_t)vocab, r->npy) != (size_t)vocab)
			r->npy_failed = true;
		r->rows++;
	}
	return 0;
}

static int on_token(void *ud, int32_t id)
{
	struct run *r = ud;
	if (r->n_ids++ == 0)
		r->t_first = time_mono_us();
	if (r->print_ids) {
		printf("%s%d", r->n_ids > 1 ? " " : "", id);
		fflush(stdout);
	}
	return 0;
}

static int on_text(void *ud, const char *text, size_t len)
{
	fwrite(text, 1, len, stdout);
	fflush(stdout);
	return 0;
}

static int parse_ids(const char *s, int32_t **ret, size_t *ret_n)
{
	size_t cap = 16, n = 0;
	int32_t *ids = xmalloc(cap * sizeof(*ids));
	while (*s) {
		char *end;
		errno = 0;
		long v = strtol(s, &end, 10);
		if (end == s || errno || v < 0 || v > INT32_MAX) {
			free(ids);
			return -EINVAL;
		}
		if (n == cap)
			ids = xreallocarray(ids, cap *= 2, sizeof(*ids));
		ids[n++] = (int32_t)v;
		s = end;
		while (*s == ',' || *s == ' ')
			s++;
	}
	if (n == 0) {
		free(ids);
		return -EINVAL;
	}
	*ret = ids;
	*ret_n = n;
	return 0;
}

static char *read_file(const char *path, size_t *ret_len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	size_t cap = 4096, n = 0;
	char *buf = xmalloc(cap);
	for (;;) {
		if (n == cap)
			buf = xrealloc(buf, cap *= 2);
		size_t r = fread(buf + n, 1, cap - n, f);
		n += r;
		if (r == 0)
			break;
	}
	bool err = ferror(f);
	fclose(f);
	if (err) {
		free(buf);
		errno = EIO;
		return NULL;
	}
	*ret_len = n;
	return buf;
}

static void chat_run_finish(struct chat_run *c)
{
	engine_chat_tokens_finish(&c->prompt);
	engine_chat_destroy(c->chat);
	for (size_t i = 0; i < c->n_images; i++)
		engine_rows_destroy(c->images[i]);
	engine_vision_destroy(c->vision);
	free(c->refs);
}

/* Loads, preprocesses and encodes one image into c->images[c->n_images]: on a device, both on
 * it (the preprocessing then counts in the vision time), else on the CPU. */
static int chat_encode_image(struct chat_run *c, struct engine_backend *b, const char *path, int max_tiles,
			     int *ret_tiles)
{
	struct engine_vision_preprocess pre;
	struct engine_vision_grid grid;
	struct engine_backend_info bi;
	struct engine_image *img;
	float *pixels = NULL, *rows_data = NULL;
	const int dim = engine_vision_embed_dim(c->vision);
	size_t rows;
	char err[512];
	uint64_t t0 = time_mono_us();
	int r;

	img = engine_image_load_png(path, err, sizeof(err));
	if (!img) {
		log_error("%s", err);
		return -errno;
	}
	engine_vision_get_preprocess(c->vision, &pre);
	if (max_tiles > pre.max_tiles) {
		log_error("--max-tiles %d is above the checkpoint's budget of %d tiles", max_tiles,
			  pre.max_tiles);
		r = -EINVAL;
		goto out;
	}
	if (max_tiles > 0)
		pre.max_tiles = max_tiles;
	if (engine_backend_get_info(b, &bi) == 0 && bi.kind == ENGINE_BACKEND_CUDA) {
		r = engine_vision_encode_image_on(b, c->vision, img, max_tiles, &grid,
						  &c->images[c->n_images]);
		if (r < 0) {
			log_error("%s: vision encoder failed: %s", path,
				  engine_backend_strerror(b, r, err, sizeof(err)));
			goto out;
		}
		rows = engine_rows_count(c->images[c->n_images]);
		c->vision_us += time_mono_us() - t0;
		c->on_device = true;
		goto done;
	}
	r = engine_vision_preprocess(img, &pre, &grid, &pixels);
	if (r < 0) {
		log_error_errno(r, "%s: preprocessing failed", path);
		goto out;
	}
	c->preprocess_us += time_mono_us() - t0;
	t0 = time_mono_us();
	rows = (size_t)grid.n_tiles * (size_t)engine_vision_tokens_per_tile(c->vision);
	rows_data = malloc(sizeof(float) * (size_t)dim * rows);
	if (!rows_data) {
		r = log_error_errno(-ENOMEM, "%s", path);
		goto out;
	}
	/* on the backend, so that --precision bf16 encodes in bf16 too (fp32: engine_vision_encode()) */
	r = engine_vision_encode_on(b, c->vision, pixels, grid.n_tiles, rows_data);
	if (r < 0) {
		log_error_errno(r, "%s: vision encoder failed", path);
		goto out;
	}
	c->images[c->n_images] = engine_rows_from_host(rows_data, rows, dim);
	if (!c->images[c->n_images]) {
		r = log_error_errno(-errno, "%s", path);
		goto out;
	}
	rows_data = NULL;
	c->vision_us += time_mono_us() - t0;
done:
	c->n_images++;
	c->n_rows += rows;
	c->n_tiles += grid.n_tiles;
	*ret_tiles = grid.n_tiles;
	fprintf(stderr, "image %s: %dx%d, %dx%d tiles%s, %zu image tokens\n", path, engine_image_width(img),
		engine_image_height(img), grid.cols, grid.rows, grid.thumbnail ? " + thumbnail" : "", rows);
out:
	free(rows_data);
	free(pixels);
	engine_image_destroy(img);
	return r;
}

/* The run's backend, profiling when asked to. Returns 0 or -errno (logged). */
static int open_backend(const struct engine_model *model, const struct engine_backend_options *bopts,
			bool profile, struct engine_backend **ret)
{
	char err[512];
	struct engine_backend *b = engine_backend_create(model, bopts, err, sizeof(err));
	if (!b) {
		int r = -errno;
		log_error("%s", err);
		return r;
	}
	if (profile) {
		int r = engine_backend_profile(b, true);
		if (r < 0) {
			engine_backend_destroy(b);
			return log_error_errno(r, "cannot profile the device");
		}
	}
	*ret = b;
	return 0;
}

/* --render: renders the conversation (a --messages file, or the chat options with each image
 * preprocessed for its tile count) with the generation prompt and prints it. Returns the exit
 * status. */
static int render_run(const struct engine_model *model, const char *messages, const char *system,
		      const char *prompt, const char *prompt_file, const char *const *images, size_t n_images,
		      int max_tiles, bool think)
{
	struct render_conversation conv = {0};
	struct engine_chat_message msgs[2];
	const struct engine_chat_message *m = msgs;
	struct engine_chat_tokens t = {0};
	struct engine_vision *vision = NULL;
	struct engine_chat *chat = NULL;
	int tiles[ENGINE_CHAT_MAX_IMAGES];
	size_t n = 0, n_img = n_images, len;
	char err[512], *text = NULL;
	int r, ret = 1;

	r = engine_chat_check_model(model, err, sizeof(err));
	if (r == ENGINE_CHAT_TEMPLATE_DIFFERENT || r == ENGINE_CHAT_TEMPLATE_NONE)
		log_warning("%s", err);
	else if (r < 0)
		log_warning("cannot check the chat template: %s", err);
	if (messages) {
		if (render_conversation_load(messages, &conv, err, sizeof(err)) < 0) {
			log_error("%s", err);
			return 2;
		}
		m = conv.msgs;
		n = conv.n;
		n_img = conv.n_images;
	} else {
		text = prompt_file ? read_file(prompt_file, &len) : xstrdup(prompt);
		if (!text) {
			log_error_errno(-errno, "%s", prompt_file);
			return 1;
		}
		if (prompt_file) {
			if (memchr(text, '\0', len)) {
				log_error("the prompt contains a NUL byte");
				goto out;
			}
			text = xrealloc(text, len + 1);
			text[len] = '\0';
		}
		if (system)
			msgs[n++] = (struct engine_chat_message){.role = ENGINE_CHAT_SYSTEM, .text = system};
		msgs[n++] = (struct engine_chat_message){.role = ENGINE_CHAT_USER,
							 .text = text,
							 .image_tiles = tiles,
							 .n_images = n_images};
	}
	if (n_img) {
		vision = engine_vision_create(model, err, sizeof(err));
		if (!vision) {
			log_error("vision encoder: %s",
				  errno == ENOENT ? "the checkpoint has no vision tower" : err);
			goto out;
		}
	}
	for (size_t i = 0; i < n_images && !messages; i++) {
		struct engine_vision_preprocess pre;
		struct engine_vision_grid grid;
		struct engine_image *img = engine_image_load_png(images[i], err, sizeof(err));
		float *pixels = NULL;

		if (!img) {
			log_error("%s", err);
			goto out;
		}
		engine_vision_get_preprocess(vision, &pre);
		if (max_tiles > pre.max_tiles) {
			log_error("--max-tiles %d is above the checkpoint's budget of %d tiles", max_tiles,
				  pre.max_tiles);
			engine_image_destroy(img);
			goto out;
		}
		if (max_tiles > 0)
			pre.max_tiles = max_tiles;
		r = engine_vision_preprocess(img, &pre, &grid, &pixels);
		engine_image_destroy(img);
		free(pixels);
		if (r < 0) {
			log_error_errno(r, "%s: preprocessing failed", images[i]);
			goto out;
		}
		tiles[i] = grid.n_tiles;
	}
	chat = engine_chat_create(engine_model_tokenizer(model), vision, think, err, sizeof(err));
	if (!chat) {
		log_error("chat format: %s", err);
		goto out;
	}
	if (engine_chat_render(chat, m, n, true, &t, err, sizeof(err)) < 0) {
		log_error("chat prompt: %s", err);
		goto out;
	}
	if (render_print(stdout, &t, engine_chat_reasoning(chat)) < 0 || fflush(stdout) != 0) {
		log_error("cannot write the rendered prompt");
		goto out;
	}
	ret = 0;
out:
	engine_chat_tokens_finish(&t);
	engine_chat_destroy(chat);
	engine_vision_destroy(vision);
	render_conversation_finish(&conv);
	free(text);
	return ret;
}

/* Chat mode: encodes the images, renders system + user + generation prompt and splices. */
static int chat_prepare(struct chat_run *c, const struct engine_model *model, struct engine_backend *b,
			const char *system, const char *user, const char *const *images, size_t n_images,
			int max_tiles, bool think)
{
	int tiles[ENGINE_CHAT_MAX_IMAGES];
	char err[512];
	int r;

	r = engine_chat_check_model(model, err, sizeof(err));
	if (r == ENGINE_CHAT_TEMPLATE_DIFFERENT || r == ENGINE_CHAT_TEMPLATE_NONE)
		log_warning("%s", err);
	else if (r < 0)
		log_warning("cannot check the chat template: %s", err);
	if (n_images) {
		c->vision = engine_vision_create(model, err, sizeof(err));
		if (!c->vision) {
			r = -errno;
			log_error("vision encoder: %s",
				  errno == ENOENT ? "the checkpoint has no vision tower" : err);
			return r;
		}
	}
	for (size_t i = 0; i < n_images; i++) {
		r = chat_encode_image(c, b, images[i], max_tiles, &tiles[i]);
		if (r < 0)
			return r;
	}
	c->chat = engine_chat_create(engine_model_tokenizer(model), c->vision, think, err, sizeof(err));
	if (!c->chat) {
		log_error("chat format: %s", err);
		return -errno;
	}
	if (system) {
		struct engine_chat_message m = {.role = ENGINE_CHAT_SYSTEM, .text = system};

		r = engine_chat_append(c->chat, &m, &c->prompt, err, sizeof(err));
		if (r < 0)
			goto fail;
	}
	struct engine_chat_message m = {.role = ENGINE_CHAT_USER,
					.text = user,
					.image_tiles = tiles,
					.n_images = n_images};
	r = engine_chat_append(c->chat, &m, &c->prompt, err, sizeof(err));
	if (r < 0)
		goto fail;
	r = engine_chat_generation_prompt(c->chat, &c->prompt);
	if (r < 0)
		return log_error_errno(r, "chat prompt");
	if (n_images) {
		c->refs = malloc(sizeof(*c->refs) * c->prompt.n_ids);
		if (!c->refs)
			return log_error_errno(-ENOMEM, "chat prompt");
		r = engine_vision_splice_rows(c->prompt.ids, c->prompt.n_ids, engine_chat_image_token(c->chat),
					      (const struct engine_rows *const *)c->images, c->n_images,
					      c->refs, err, sizeof(err));
		if (r < 0)
			goto fail;
	}
	return 0;
fail:
	log_error("chat prompt: %s", err);
	return r;
}

int main(int argc, char **argv)
{
	enum {
		OPT_PROMPT = 256,
		OPT_PROMPT_FILE,
		OPT_PROMPT_IDS,
		OPT_TOKENIZE,
		OPT_MAX,
		OPT_TEMP,
		OPT_TOPK,
		OPT_TOPP,
		OPT_SEED,
		OPT_STOP,
		OPT_IGNORE_EOS,
		OPT_THREADS,
		OPT_DUMP,
		OPT_IMAGE,
		OPT_SYSTEM,
		OPT_THINK,
		OPT_MAX_TILES,
		OPT_BACKEND,
		OPT_PRECISION,
		OPT_DEVICE,
		OPT_PROFILE,
		OPT_WEIGHTS,
		OPT_RENDER,
		OPT_MESSAGES,
	};
	static const struct option opts[] = {
		{"model", required_argument, NULL, 'm'},
		{"prompt", required_argument, NULL, OPT_PROMPT},
		{"prompt-file", required_argument, NULL, OPT_PROMPT_FILE},
		{"prompt-ids", required_argument, NULL, OPT_PROMPT_IDS},
		{"tokenize", no_argument, NULL, OPT_TOKENIZE},
		{"max-tokens", required_argument, NULL, OPT_MAX},
		{"temp", required_argument, NULL, OPT_TEMP},
		{"top-k", required_argument, NULL, OPT_TOPK},
		{"top-p", required_argument, NULL, OPT_TOPP},
		{"seed", required_argument, NULL, OPT_SEED},
		{"stop", required_argument, NULL, OPT_STOP},
		{"ignore-eos", no_argument, NULL, OPT_IGNORE_EOS},
		{"threads", required_argument, NULL, OPT_THREADS},
		{"dump-logits", required_argument, NULL, OPT_DUMP},
		{"image", required_argument, NULL, OPT_IMAGE},
		{"system", required_argument, NULL, OPT_SYSTEM},
		{"think", no_argument, NULL, OPT_THINK},
		{"max-tiles", required_argument, NULL, OPT_MAX_TILES},
		{"backend", required_argument, NULL, OPT_BACKEND},
		{"precision", required_argument, NULL, OPT_PRECISION},
		{"device", required_argument, NULL, OPT_DEVICE},
		{"profile", no_argument, NULL, OPT_PROFILE},
		{"weights", required_argument, NULL, OPT_WEIGHTS},
		{"render", no_argument, NULL, OPT_RENDER},
		{"messages", required_argument, NULL, OPT_MESSAGES},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	const char *model_dir = NULL, *prompt = NULL, *prompt_file = NULL, *prompt_ids = NULL;
	const char *dump = NULL, *system = NULL, *messages = NULL;
	const char *images[ENGINE_CHAT_MAX_IMAGES];
	size_t n_images = 0;
	int max_tiles = 0;
	bool think = false, chat_mode = false;
	bool tokenize = false, ignore_eos = false, profile = false, render = false;
	int max_tokens = 64, threads = 0;
	struct engine_sampling sampling = {0};
	struct engine_backend_options bopts = {.kind = ENGINE_BACKEND_AUTO};
	int32_t stops[64];
	size_t n_stops = 0;
	int ret = 1;

	log_set_program_name("holo-infer");
	log_setup_from_env();
	/* $HOLOD_PRECISION as --precision (which overrides it): the variable holod reads too */
	const char *env_precision = getenv("HOLOD_PRECISION");
	if (env_precision && *env_precision && engine_precision_parse(env_precision, &bopts.precision) < 0) {
		log_error("HOLOD_PRECISION=%s: expected bf16 or fp32", env_precision);
		return 2;
	}
	const char *env_weights = getenv("HOLOD_WEIGHTS");
	if (env_weights && *env_weights && engine_weights_parse(env_weights, &bopts.weights) < 0) {
		log_error("HOLOD_WEIGHTS=%s: expected default, bf16, q8, q4 or fp8", env_weights);
		return 2;
	}
	for (int c; (c = getopt_long(argc, argv, "m:h", opts, NULL)) != -1;) {
		char *end = NULL;
		errno = 0;
		switch (c) {
		case 'm':
			model_dir = optarg;
			break;
		case OPT_PROMPT:
			prompt = optarg;
			break;
		case OPT_PROMPT_FILE:
			prompt_file = optarg;
			break;
		case OPT_PROMPT_IDS:
			prompt_ids = optarg;
			break;
		case OPT_TOKENIZE:
			tokenize = true;
			break;
		case OPT_MAX:
			max_tokens = (int)strtol(optarg, &end, 10);
			if (*end || max_tokens < 0 || max_tokens > ENGINE_SESSION_MAX_TOKENS)
				goto bad_value;
			break;
		case OPT_TEMP:
			sampling.temperature = strtof(optarg, &end);
			if (*end || errno || !isfinite(sampling.temperature) || sampling.temperature < 0) {
				log_error("--temp: '%s' is not a temperature: expected a finite number, "
					  "0 (greedy) or more",
					  optarg);
				return 2;
			}
			break;
		case OPT_TOPK:
			sampling.top_k = (int)strtol(optarg, &end, 10);
			if (*end || errno || sampling.top_k < 0) {
				log_error("--top-k: '%s' is not a token count: expected an integer, 0 "
					  "(off) or more",
					  optarg);
				return 2;
			}
			break;
		case OPT_TOPP:
			sampling.top_p = strtof(optarg, &end);
			if (*end || errno || !(sampling.top_p > 0 && sampling.top_p <= 1)) {
				log_error("--top-p: '%s' is outside (0, 1]: it is the probability mass "
					  "of the tokens kept",
					  optarg);
				return 2;
			}
			break;
		case OPT_SEED:
			sampling.seed = strtoull(optarg, &end, 0);
			if (*end || errno)
				goto bad_value;
			break;
		case OPT_STOP: {
			long v = strtol(optarg, &end, 10);
			if (*end || errno || v < 0 || v > INT32_MAX || n_stops == ARRAY_SIZE(stops) - 3)
				goto bad_value;
			stops[n_stops++] = (int32_t)v;
			break;
		}
		case OPT_IGNORE_EOS:
			ignore_eos = true;
			break;
		case OPT_THREADS:
			threads = (int)strtol(optarg, &end, 10);
			if (*end || threads < 1)
				goto bad_value;
			break;
		case OPT_DUMP:
			dump = optarg;
			break;
		case OPT_IMAGE:
			if (n_images == ARRAY_SIZE(images))
				goto bad_value;
			images[n_images++] = optarg;
			chat_mode = true;
			break;
		case OPT_SYSTEM:
			system = optarg;
			chat_mode = true;
			break;
		case OPT_THINK:
			think = true;
			chat_mode = true;
			break;
		case OPT_MAX_TILES:
			max_tiles = (int)strtol(optarg, &end, 10);
			if (*end || max_tiles < 1 || max_tiles > ENGINE_VISION_MAX_TILES)
				goto bad_value;
			break;
		case OPT_BACKEND:
			if (engine_backend_kind_parse(optarg, &bopts.kind) < 0)
				goto bad_value;
			break;
		case OPT_PRECISION:
			if (engine_precision_parse(optarg, &bopts.precision) < 0)
				goto bad_value;
			break;
		case OPT_WEIGHTS:
			if (engine_weights_parse(optarg, &bopts.weights) < 0)
				goto bad_value;
			break;
		case OPT_DEVICE: {
			long v = strtol(optarg, &end, 10);
			if (*end || errno || v < 0 || v > INT_MAX)
				goto bad_value;
			bopts.device = (int)v;
			break;
		}
		case OPT_PROFILE:
			profile = true;
			break;
		case OPT_RENDER:
			render = true;
			break;
		case OPT_MESSAGES:
			messages = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
		continue;
	bad_value:
		log_error("invalid value '%s' for --%s", optarg, opts[c == 'm' ? 0 : c - 255].name);
		return 2;
	}
	if (!model_dir || optind != argc || (!!prompt + !!prompt_file + !!prompt_ids + !!messages) != 1) {
		usage(stderr);
		return 2;
	}
	if (messages && !render) {
		log_error("--messages is for --render");
		return 2;
	}
	if (render && (prompt_ids || (messages && (n_images || system)))) {
		log_error("--render takes a conversation: --messages alone, or --prompt/--prompt-file "
			  "with --system and --image");
		return 2;
	}
	if (chat_mode && prompt_ids) {
		log_error("--image, --system and --think need a text prompt (--prompt or --prompt-file)");
		return 2;
	}
	if (threads && engine_set_threads(threads) < 0) {
		log_error("cannot use %d threads", threads);
		return 2;
	}

	char err[512] = "";
	if (engine_backend_resolve(&bopts, err, sizeof(err)) < 0) {
		log_error("%s", err);
		return 1;
	}
	if (err[0])
		log_notice("%s", err);
	if (profile && bopts.kind != ENGINE_BACKEND_CUDA) {
		log_error("--profile times the kernels of a device, and this run uses the %s: add "
			  "--backend cuda",
			  engine_backend_kind_name(bopts.kind));
		return 2;
	}
	struct engine_model *model = engine_model_load(model_dir, err, sizeof(err));
	if (!model) {
		log_error("%s: %s", model_dir, err);
		return 1;
	}
	struct engine_model_info minfo;
	engine_model_get_info(model, &minfo);
	struct engine_tokenizer *tok = engine_model_tokenizer(model);
	struct engine_backend *backend = NULL;
	struct engine_session *s = NULL;
	int32_t *ids = NULL, *out = NULL;
	size_t n_ids = 0, n_out = 0;
	char *text = NULL;
	struct run run = {0};
	struct chat_run chat = {0};

	if (render) {
		if (!tok) {
			log_error("%s has no tokenizer.json: nothing to render with", model_dir);
			goto out;
		}
		ret = render_run(model, messages, system, prompt, prompt_file, images, n_images, max_tiles,
				 think);
		goto out;
	}

	if (prompt_ids) {
		if (parse_ids(prompt_ids, &ids, &n_ids) < 0) {
			log_error("--prompt-ids: expected comma-separated token ids");
			goto out;
		}
		for (size_t i = 0; i < n_ids; i++)
			if (ids[i] >= minfo.vocab) {
				log_error("--prompt-ids: token id %d is outside the vocabulary of %s "
					  "(0..%d)",
					  ids[i], model_dir, minfo.vocab - 1);
				ret = 2;
				goto out;
			}
	} else {
		size_t len;
		if (prompt_file) {
			text = read_file(prompt_file, &len);
			if (!text) {
				log_error_errno(-errno, "%s", prompt_file);
				goto out;
			}
		} else {
			text = xstrdup(prompt);
			len = strlen(text);
		}
		if (!tok) {
			log_error("%s has no tokenizer.json: use --prompt-ids", model_dir);
			goto out;
		}
		if (chat_mode) {
			if (memchr(text, '\0', len)) {
				log_error("the prompt contains a NUL byte");
				goto out;
			}
			text[len] = '\0';
			/* images are encoded on the backend, whose prefill reads their rows */
			if (n_images && !tokenize && open_backend(model, &bopts, profile, &backend) < 0)
				goto out;
			if (chat_prepare(&chat, model, backend, system, text, images, n_images, max_tiles,
					 think) < 0)
				goto out;
			ids = xmalloc(sizeof(*ids) * chat.prompt.n_ids);
			memcpy(ids, chat.prompt.ids, sizeof(*ids) * chat.prompt.n_ids);
			n_ids = chat.prompt.n_ids;
			if (!ignore_eos)
				n_stops += engine_chat_stop_ids(chat.chat, stops + n_stops);
		} else {
			int r = engine_tokenizer_encode(tok, text, len, true, &ids, &n_ids);
			if (r < 0) {
				log_error_errno(r, "cannot tokenize the prompt");
				goto out;
			}
		}
	}
	if (tokenize) {
		printf("[");
		for (size_t i = 0; i < n_ids; i++)
			printf("%s%d", i ? ", " : "", ids[i]);
		printf("]\n");
		ret = 0;
		goto out;
	}
	if (n_ids == 0) {
		log_error("the prompt is empty");
		goto out;
	}

	if (!ignore_eos && minfo.eos_id >= 0)
		stops[n_stops++] = minfo.eos_id;
	if (!backend && open_backend(model, &bopts, profile, &backend) < 0)
		goto out;
	s = engine_session_create_on(backend, (int)MIN(n_ids + (size_t)max_tokens + 1,
						       (size_t)ENGINE_SESSION_MAX_TOKENS));
	if (!s) {
		log_error_errno(-errno, "cannot create a session");
		goto out;
	}
	run.vocab = engine_session_vocab(s);
	run.print_ids = !tok;
	if (dump) {
		run.npy = fopen(dump, "wb");
		if (!run.npy || write_npy_header(run.npy, 0, run.vocab) < 0) {
			log_error_errno(-errno, "%s", dump);
			goto out;
		}
	}

	uint64_t t0 = time_mono_us();
	if (max_tokens == 0) {
		/* prefill only */
		float *logits = malloc((size_t)n_ids * (size_t)run.vocab * sizeof(float));
		int r = logits ? engine_session_append_rows(s, ids, chat.refs, n_ids,
							    dump ? ENGINE_LOGITS_ALL : ENGINE_LOGITS_LAST,
							    logits) :
				 -ENOMEM;
		for (size_t i = 0; r == 0 && dump && i < n_ids; i++)
			on_logits(&run, logits + i * (size_t)run.vocab, run.vocab);
		free(logits);
		if (r < 0) {
			log_error_errno(r, "prefill failed");
			goto out;
		}
		run.t_first = time_mono_us();
	} else {
		struct engine_generate_params p = {
			.sampling = sampling,
			.max_new_tokens = max_tokens,
			.stop_ids = stops,
			.n_stop_ids = n_stops,
			.on_text = tok ? on_text : NULL,
			.on_logits = dump ? on_logits : NULL,
			.on_token = on_token,
			.userdata = &run,
		};
		size_t n_pre = 0;
		int r = 0;

		if (chat.refs) {
			/* engine_generate() takes plain ids: the spliced part goes in first; the
			 * generation prompt's last id (never an image position) starts the loop */
			n_pre = n_ids - 1;
			float *logits =
				dump ? malloc((size_t)n_pre * (size_t)run.vocab * sizeof(float)) : NULL;
			r = dump && !logits ?
				    -ENOMEM :
				    engine_session_append_rows(s, ids, chat.refs, n_pre,
							       dump ? ENGINE_LOGITS_ALL : ENGINE_LOGITS_NONE,
							       logits);
			for (size_t i = 0; r == 0 && dump && i < n_pre; i++)
				on_logits(&run, logits + i * (size_t)run.vocab, run.vocab);
			free(logits);
		}
		if (r == 0)
			r = engine_generate(s, tok, ids + n_pre, n_ids - n_pre, &p, &out, &n_out);
		if (r < 0) {
			char why[512];
			log_error("generation failed: %s",
				  engine_backend_strerror(backend, r, why, sizeof(why)));
			goto out;
		}
	}
	uint64_t t1 = time_mono_us();
	printf("\n");
	fflush(stdout);

	double prefill_s = (double)(run.t_first - t0) / 1e6, decode_s = (double)(t1 - run.t_first) / 1e6;
	fprintf(stderr, "prefill: %zu tokens in %.3f s (%.1f tok/s)\n", n_ids, prefill_s,
		prefill_s > 0 ? (double)n_ids / prefill_s : 0.0);
	if (n_out > 1)
		fprintf(stderr, "decode: %zu tokens in %.3f s (%.2f tok/s)\n", n_out - 1, decode_s,
			(double)(n_out - 1) / decode_s);
	if (chat.n_tiles && chat.on_device)
		fprintf(stderr, "preprocess: %zu images on the device, in the vision time\n", n_images);
	else if (chat.n_tiles)
		fprintf(stderr, "preprocess: %zu images in %.3f s\n", n_images,
			(double)chat.preprocess_us / 1e6);
	if (chat.n_tiles)
		fprintf(stderr, "vision: %d tiles in %.3f s (%.1f ms/tile), %zu image tokens\n", chat.n_tiles,
			(double)chat.vision_us / 1e6, (double)chat.vision_us / 1e3 / chat.n_tiles,
			chat.n_rows);
	struct engine_backend_info binfo;
	engine_backend_get_info(backend, &binfo);
	fprintf(stderr, "backend: %s (%s), %s, weights %s (%.1f MiB)\n", binfo.name, binfo.device,
		engine_precision_name(binfo.precision), binfo.weights, (double)binfo.weight_bytes / (1 << 20));
	if (profile) {
		char **lines = NULL;
		int n = engine_backend_profile_report(backend, &lines);
		for (int i = 0; i < n; i++)
			fprintf(stderr, "%s\n", lines[i]);
		engine_backend_profile_free(lines);
		if (n <= 0) {
			if (n < 0)
				log_error_errno(n, "cannot read the device profile");
			else
				log_error("--profile: nothing ran on the CUDA device");
			goto out;
		}
	}

	if (run.npy) {
		if (run.npy_failed || write_npy_header(run.npy, run.rows, run.vocab) < 0 ||
		    fclose(run.npy) != 0) {
			run.npy = NULL;
			log_error("%s: write failed", dump);
			goto out;
		}
		run.npy = NULL;
		fprintf(stderr, "logits: %" PRIu64 " x %d rows written to %s\n", run.rows, run.vocab, dump);
	}
	ret = 0;
out:
	chat_run_finish(&chat);
	if (run.npy)
		fclose(run.npy);
	free(text);
	free(ids);
	free(out);
	engine_session_destroy(s);
	engine_backend_destroy(backend);
	engine_model_destroy(model);
	return ret;
}
