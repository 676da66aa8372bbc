/* holo-bench agent: what one agent step costs at least on a GPU, from the FLOP and byte counts of
 * the real shapes (roofline.h): a screenshot cut into tiles through RADIO and the projector, the
 * new turn prefilled onto the persistent session, and the step's tokens decoded.
 *
 *   holo-bench agent --device-spec h100|h200 [--config FILE] [--screen WxH] [--max-tiles N]
 *                    [--prefix N] [--text N] [--decode N] [--context-cap N] [--steps A,B]
 *
 * --config is a checkpoint's config.json (default: tools/bench/holotron-12b-config.json in the
 * source tree, the
 * Nano-12B-v2-VL shapes of docs/design/model.md 1.2-1.3 written out, as Holotron-12B has them).
 * The ViT's depth and MLP width are not in config.json; they come from vision_config.args.model
 * (vit_huge_patch16_224: 32 blocks, MLP 5120). Step k of a persistent session starts after
 * prefix + k * (appended + decoded) tokens, at most --context-cap (holod's --context-tokens, whose
 * session is rebuilt before it is full). Weights and the KV cache are bf16, the Mamba state fp32,
 * as the CUDA backend keeps them at bf16 precision.
 *
 *   holo-bench agent --backend cpu|cuda --model DIR [--precision bf16|fp32] [--screen WxH]
 *                    [--prefix N] [--text N] [--decode N] [--context-cap N] [--steps N]
 *
 * measures instead: the checkpoint in DIR (its config.json gives the counts) runs N persistent
 * agent steps (default 50, fewer when the context cap comes first) on the backend through the
 * engine API the agent uses: a synthetic screenshot (a deterministic pattern) through
 * engine_vision_encode_image_on(), the turn's text and image positions appended with
 * engine_session_append_rows(), and --decode tokens decoded greedily. It prints steps 2 and N:
 * the measured vision / prefill / decode milliseconds beside the roofline of the same counts at
 * rates measured in the same run (a bf16 GEMM of the model's shapes through the backend's GEMM:
 * cuBLASLt on CUDA, oneDNN or the fp32 products on the CPU; a device-to-device copy on CUDA,
 * memcpy on the CPU), measured/roofline, and step N / step 2. Without a CUDA device (or the
 * emulation of a test build) --backend cuda fails saying so.
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "common.h"
#include "cpu.h"
#include "engine.h"
#include "loader.h"
#include "machine.h"
#include "roofline.h"
#ifdef HOLO_BENCH_GPU
#include "gpu.h"
#endif

/* HOLO_BENCH_DIR: this folder in the source tree (meson.build) */
#define DEFAULT_CONFIG HOLO_BENCH_DIR "/holotron-12b-config.json"
#define MAX_CONFIG_BYTES (1u << 20)
#define MAX_STEPS_SHOWN 8

/* ViT shapes timm names; config.json gives only the name. */
static const struct {
	const char *name;
	int width, depth, mlp;
} vits[] = {
	{"vit_huge_patch16_224", 1280, 32, 5120},
	{"vit_tiny_test", 64, 2, 256}, /* the test fixtures' (tools/gen_tiny_vision.py) */
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: holo-bench agent --device-spec h100|h200 [--config FILE] [--screen WxH]\n"
		"                        [--max-tiles N] [--prefix N] [--text N] [--decode N]\n"
		"                        [--context-cap N] [--steps A,B]\n"
		"       holo-bench agent --backend cpu|cuda --model DIR [--precision bf16|fp32]\n"
		"                        [--screen WxH] [--prefix N] [--text N] [--decode N]\n"
		"                        [--context-cap N] [--steps N]\n"
		"  --backend B      measure the steps of DIR's checkpoint on the CPU or CUDA device 0\n"
		"  --model DIR      the checkpoint the measured steps run (its config.json is --config)\n"
		"  --precision P    the backend's precision (default: the backend's own)\n"
		"  --device-spec D  the GPU whose peak rates the prediction uses\n"
		"  --config FILE    a checkpoint's config.json (default " DEFAULT_CONFIG ")\n"
		"  --screen WxH     screenshot size (default 1920x1080)\n"
		"  --max-tiles N    tile budget (default 12, the checkpoint's)\n"
		"  --prefix N       tokens of the system prompt and task (default 2000)\n"
		"  --text N         text tokens of a step's turn besides the image (default 50)\n"
		"  --decode N       tokens decoded per step (default 60)\n"
		"  --context-cap N  session size, holod's --context-tokens (default 32768)\n"
		"  --steps A,B      persistent steps to show (default 2,50); measured: steps to run\n"
		"                   (default 50), of which 2 and the last are shown\n");
}

static int read_file(const char *path, char **ret, size_t *ret_len)
{
	FILE *f = fopen(path, "rbe");
	if (!f)
		return -errno;
	char *buf = xmalloc(MAX_CONFIG_BYTES + 1);
	size_t n = fread(buf, 1, MAX_CONFIG_BYTES + 1, f);
	int r = ferror(f) ? -EIO : n > MAX_CONFIG_BYTES ? -EFBIG : 0;
	fclose(f);
	if (r < 0) {
		free(buf);
		return r;
	}
	buf[n] = '\0';
	*ret = buf;
	*ret_len = n;
	return 0;
}

static int get_int(const json_t *o, const char *key, int *ret)
{
	double v;
	if (model_config_number(o, key, &v) < 0 || v != floor(v) || v < 1 || v > 1e9)
		return -EINVAL;
	*ret = (int)v;
	return 0;
}

/* The ViT and projector shapes of a NemotronH_Nano_VL_V2 config.json. */
static int vit_from_config(const json_t *root, struct roofline_vit *v, bool *use_thumbnail,
			   char *err, size_t errlen)
{
	const json_t *vc = json_object_get(root, "vision_config");
	const json_t *args = vc ? json_object_get(vc, "args") : NULL;
	const char *model = args ? json_string_value(json_object_get(args, "model")) : NULL;
	double ratio;
	size_t i;

	if (!model) {
		snprintf(err, errlen, "no vision_config.args.model");
		return -EINVAL;
	}
	for (i = 0; i < ARRAY_SIZE(vits); i++)
		if (strcmp(vits[i].name, model) == 0)
			break;
	if (i == ARRAY_SIZE(vits)) {
		snprintf(err, errlen, "ViT '%s' has no known depth and MLP width", model);
		return -EINVAL;
	}
	*v = (struct roofline_vit){.width = vits[i].width, .depth = vits[i].depth,
				   .mlp = vits[i].mlp};
	int width, reg = 1;
	if (get_int(root, "vit_hidden_size", &width) < 0 || width != v->width ||
	    get_int(root, "force_image_size", &v->tile) < 0 ||
	    get_int(root, "patch_size", &v->patch) < 0 ||
	    get_int(root, "projector_hidden_size", &v->proj_hidden) < 0 ||
	    model_config_number(root, "downsample_ratio", &ratio) < 0 || ratio <= 0 || ratio > 1) {
		snprintf(err, errlen, "vit_hidden_size (%d for %s), force_image_size, patch_size, "
			 "projector_hidden_size or downsample_ratio missing or out of range",
			 v->width, model);
		return -EINVAL;
	}
	v->shuffle = (int)lround(1 / ratio);
	if (v->tile % (v->patch * v->shuffle)) {
		snprintf(err, errlen, "tile %d is not a multiple of patch %d x shuffle %d", v->tile,
			 v->patch, v->shuffle);
		return -EINVAL;
	}
	/* a class token per teacher (or one), padded with registers to register_multiple */
	const json_t *teachers = json_object_get(args, "teachers");
	int n_cls = json_is_true(json_object_get(args, "cls_token_per_teacher")) && teachers
			    ? (int)json_array_size(teachers)
			    : 1;
	if (json_object_get(args, "register_multiple") &&
	    get_int(args, "register_multiple", &reg) < 0) {
		snprintf(err, errlen, "vision_config.args.register_multiple is not a count");
		return -EINVAL;
	}
	v->prefix = (n_cls + reg - 1) / reg * reg;
	*use_thumbnail = !json_is_false(json_object_get(root, "use_thumbnail"));
	return 0;
}

static int parse_pair(const char *s, char sep, int *a, int *b)
{
	char *end;
	long x = strtol(s, &end, 10);
	if (end == s || *end != sep || x < 1 || x > 1000000)
		return -EINVAL;
	const char *t = end + 1;
	long y = strtol(t, &end, 10);
	if (end == t || *end || y < 1 || y > 1000000)
		return -EINVAL;
	*a = (int)x;
	*b = (int)y;
	return 0;
}

static int parse_count(const char *s, int max, int *ret)
{
	char *end;
	long v = strtol(s, &end, 10);
	if (end == s || *end || v < 0 || v > max)
		return -EINVAL;
	*ret = (int)v;
	return 0;
}

/* ---- the measured side: --backend cpu|cuda --model DIR ---- */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The rates the roofline sum uses, measured in the same run: FLOP/s of a GEMM of the model's
 * shapes through the backend's own GEMM, and bytes/s (read + written) of a copy in the memory
 * the backend's decode reads. */
struct agent_rates {
	double gemm, copy;
	char gemm_what[160];
	char copy_what[96];
};

#define CPU_COPY_BYTES ((size_t)64 << 20)
#define CPU_COPY_ROUNDS 5

static int cpu_rates(const struct engine_model *m, bool bf16, int rows, struct agent_rates *ret)
{
	double flop = 0, t = bench_gemm_only_seconds(m, bf16, rows, &flop);
	if (t <= 0 || flop <= 0)
		return -EIO;
	ret->gemm = flop / t;
	snprintf(ret->gemm_what, sizeof(ret->gemm_what),
		 "the model's matrix products for %d tokens, %s", rows, bf16 ? "bf16 (oneDNN)" : "fp32");
	/* Decode on the CPU reads the weights: its floor is the read bandwidth of the engine's
	 * threads (machine.c's passes, which sum every word so that no pass can be optimised away;
	 * a memcpy loop here was elided by the release build and gave petabytes per second). */
	struct bench_bw *bw = bench_bw_create(CPU_COPY_BYTES);
	if (!bw)
		return -ENOMEM;
	double rates[CPU_COPY_ROUNDS];
	bench_bw_pass(bw); /* warm-up: the pages are touched */
	for (int i = 0; i < CPU_COPY_ROUNDS; i++)
		rates[i] = bench_bw_pass(bw);
	uint64_t words = bench_bw_bytes(bw) / 8;
	int r = bench_bw_last_sum(bw) == words * (words + 1) / 2 ? 0 : -EIO;
	bench_bw_destroy(bw);
	for (int i = 1; i < CPU_COPY_ROUNDS; i++) /* insertion sort for the median */
		for (int k = i; k > 0 && rates[k] < rates[k - 1]; k--) {
			double tmp = rates[k];
			rates[k] = rates[k - 1];
			rates[k - 1] = tmp;
		}
	ret->copy = rates[CPU_COPY_ROUNDS / 2];
	snprintf(ret->copy_what, sizeof(ret->copy_what),
		 "read, %d threads, median of %d passes over %zu MiB", cpu_threads(),
		 CPU_COPY_ROUNDS, CPU_COPY_BYTES >> 20);
	return r;
}

#ifdef HOLO_BENCH_GPU
#define GPU_COPY_BYTES ((size_t)1 << 30)
#define GPU_COPY_ROUNDS 10
#define EMU_COPY_BYTES ((size_t)16 << 20) /* the emulation's device is host memory under ASan */
#define EMU_COPY_ROUNDS 2
#define GPU_GEMM_ROUNDS 10

static int cuda_rates(int device, int hidden, int intermediate, int rows, struct agent_rates *ret)
{
	struct gpu_context *g = gpu_context_create(device);
	if (!g)
		return -errno;
	bool emu = gpu_devices_emulated();
	int r = bench_gpu_copy_rate(g, emu ? EMU_COPY_BYTES : GPU_COPY_BYTES,
			      emu ? EMU_COPY_ROUNDS : GPU_COPY_ROUNDS, &ret->copy);
	if (r >= 0)
		r = bench_gpu_gemm_rate(g, intermediate, hidden, rows, emu ? 1 : GPU_GEMM_ROUNDS,
					&ret->gemm);
	snprintf(ret->gemm_what, sizeof(ret->gemm_what),
		 "cuBLASLt bf16 %d x %d weight times %d tokens (the MLP up-projection)", intermediate,
		 hidden, rows);
	snprintf(ret->copy_what, sizeof(ret->copy_what), "device to device, read + write");
	gpu_context_destroy(g);
	return r;
}
#endif

/* A deterministic screenshot: gradients with a grid of lines, like a window's edges. */
static struct engine_image *synthetic_screen(int w, int h)
{
	size_t stride = (size_t)w * 3;
	uint8_t *px = malloc(stride * (size_t)h);
	if (!px)
		return NULL;
	for (int y = 0; y < h; y++)
		for (int x = 0; x < w; x++) {
			uint8_t *p = px + (size_t)y * stride + (size_t)x * 3;
			bool line = x % 97 == 0 || y % 61 == 0;
			p[0] = line ? 20 : (uint8_t)(x * 255 / w);
			p[1] = line ? 20 : (uint8_t)(y * 255 / h);
			p[2] = line ? 20 : (uint8_t)((x ^ y) & 0xff);
		}
	struct engine_image *img = engine_image_from_rgb(w, h, stride, px);
	free(px);
	return img;
}

static int32_t argmax(const float *v, int n)
{
	int best = 0;
	for (int i = 1; i < n; i++)
		if (v[i] > v[best])
			best = i;
	return best;
}

/* A text token that is not the image token: deterministic, spread over the vocabulary. */
static int32_t text_token(unsigned i, int vocab, int32_t image_token)
{
	int32_t t = (int32_t)((i * 7919u + 17u) % (unsigned)vocab);
	return t == image_token ? (t + 1) % vocab : t;
}

struct agent_measure_args {
	const char *model_dir;
	struct engine_backend_options bopts;
	int sw, sh, prefix, text, decode, cap, steps;
	struct roofline_lm lm;
	struct roofline_vit vit;
	int lm_hidden;
};

struct step_time {
	int context, tiles;
	double vision, prefill, decode;
};

/* Runs args->steps persistent agent steps and prints the breakdown; returns the exit code. */
static int agent_measure(struct agent_measure_args *a)
{
	char err[512] = "";
	int code = 1, r;
	struct engine_model *m = NULL;
	struct engine_vision *v = NULL;
	struct engine_backend *b = NULL;
	struct engine_session *s = NULL;
	struct engine_image *img = NULL;
	struct engine_rows *rows = NULL;
	struct step_time *st = NULL;
	int32_t *tok = NULL;
	struct engine_row_ref *refs = NULL;
	float *logits = NULL;

	if (engine_backend_resolve(&a->bopts, err, sizeof(err)) < 0) {
		fprintf(stderr, "holo-bench agent: %s\n", err);
		return 1;
	}
	bool cuda = a->bopts.kind == ENGINE_BACKEND_CUDA;
	m = engine_model_load(a->model_dir, err, sizeof(err));
	if (!m) {
		fprintf(stderr, "holo-bench agent: %s\n", err);
		goto out_fail;
	}
	v = engine_vision_create(m, err, sizeof(err));
	if (!v) {
		fprintf(stderr, "holo-bench agent: %s\n", err);
		goto out_model;
	}
	struct engine_model_info mi;
	engine_model_get_info(m, &mi);
	int vocab = mi.vocab, tpt = engine_vision_tokens_per_tile(v);
	int32_t image_token = engine_vision_image_token(v);
	struct engine_vision_grid grid;
	struct engine_vision_preprocess pp;
	engine_vision_get_preprocess(v, &pp);
	r = engine_vision_select_grid(a->sw, a->sh, pp.tile_size, pp.max_tiles, pp.use_thumbnail,
				      &grid);
	if (r < 0) {
		fprintf(stderr, "holo-bench agent: no tile grid for a %dx%d screenshot\n", a->sw, a->sh);
		goto out_vision;
	}
	int n_image = grid.n_tiles * tpt, n_turn = n_image + a->text;
	int per_step = n_turn + a->decode;
	int steps = a->steps;
	if (a->prefix + (double)steps * per_step > a->cap)
		steps = (a->cap - a->prefix) / per_step;
	if (steps < 2) {
		fprintf(stderr, "holo-bench agent: a %d-token prefix and steps of %d tokens leave "
				"fewer than 2 steps under the context cap %d\n",
			a->prefix, per_step, a->cap);
		goto out_vision;
	}

	struct agent_rates rates = {0};
	bool bf16 = false;
#ifdef HOLO_BENCH_GPU
	if (cuda) {
		r = cuda_rates(a->bopts.device, a->lm.hidden,
			       a->lm.intermediate > 0 ? a->lm.intermediate : a->lm.hidden, n_turn,
			       &rates);
		if (r < 0) {
			fprintf(stderr, "holo-bench agent: the copy or GEMM measurement failed on CUDA "
					"device %d: %s\n", a->bopts.device, strerror(-r));
			goto out_vision;
		}
	}
#endif
	b = engine_backend_create(m, &a->bopts, err, sizeof(err));
	if (!b) {
		fprintf(stderr, "holo-bench agent: %s\n", err);
		goto out_vision;
	}
	struct engine_backend_info bi;
	engine_backend_get_info(b, &bi);
	bf16 = bi.precision == ENGINE_PRECISION_BF16;
	if (!cuda && (r = cpu_rates(m, bf16, n_turn, &rates)) < 0) {
		fprintf(stderr, "holo-bench agent: the CPU GEMM or copy measurement failed: %s\n",
			strerror(-r));
		goto out_backend;
	}
	a->lm.weight_bytes = bf16 ? 2 : 4;
	a->lm.kv_bytes = bf16 && cuda ? 2 : 4;

	int max_tokens = a->prefix + steps * per_step + 1;
	s = engine_session_create_on(b, max_tokens);
	img = synthetic_screen(a->sw, a->sh);
	st = calloc((size_t)steps, sizeof(*st));
	int n_buf = a->prefix > n_turn ? a->prefix : n_turn;
	tok = malloc(sizeof(*tok) * (size_t)n_buf);
	refs = malloc(sizeof(*refs) * (size_t)n_turn);
	/* the logits, and one image row when the vision time waits for its rows */
	logits = malloc(sizeof(*logits) * (size_t)(vocab > a->lm_hidden ? vocab : a->lm_hidden));
	if (!s || !img || !st || !tok || !refs || !logits) {
		fprintf(stderr, "holo-bench agent: out of memory for a %d-token session\n",
			max_tokens);
		goto out_buffers;
	}

	printf("holo-bench agent: measured on %s (%s), %s; %s\n", bi.name, bi.device,
	       engine_precision_name(bi.precision), a->model_dir);
	printf("step: %dx%d synthetic screenshot -> %d x %d tiles%s = %d tiles; %d + %d tokens "
	       "appended, %d decoded greedily; prefix %d; %d persistent steps\n", a->sw, a->sh,
	       grid.cols, grid.rows, grid.thumbnail ? " + thumbnail" : "", grid.n_tiles, n_image,
	       a->text, a->decode, a->prefix, steps);
	if (steps < a->steps)
		printf("(%d steps asked; %d fit under the context cap %d)\n", a->steps, steps, a->cap);
	printf("GEMM rate: %.3f TFLOP/s (%s)\ncopy bandwidth: %.1f GB/s (%s)\n",
	       rates.gemm / 1e12, rates.gemm_what, rates.copy / 1e9, rates.copy_what);

	for (int i = 0; i < a->prefix; i++)
		tok[i] = text_token((unsigned)i, vocab, image_token);
	r = a->prefix ? engine_session_append(s, tok, NULL, (size_t)a->prefix, ENGINE_LOGITS_NONE,
					      NULL)
		      : 0;
	for (int k = 0; k < steps && r >= 0; k++) {
		struct step_time *t = &st[k];
		t->context = engine_session_n_tokens(s);
		double t0 = now_s();
		struct engine_vision_grid g;
		r = engine_vision_encode_image_on(b, v, img, 0, &g, &rows);
		/* reading one row waits for the device: the vision time ends with its rows */
		if (r >= 0)
			r = engine_rows_read(rows, 0, 1, logits);
		double t1 = now_s();
		if (r < 0)
			break;
		t->tiles = g.n_tiles;
		/* the turn: half its text, the image's positions, the rest of its text */
		int h = a->text / 2, n = 0;
		for (int i = 0; i < h; i++)
			tok[n++] = text_token((unsigned)(k * 131 + i), vocab, image_token);
		for (int i = 0; i < n_image; i++)
			tok[n++] = image_token;
		for (int i = h; i < a->text; i++)
			tok[n++] = text_token((unsigned)(k * 131 + i), vocab, image_token);
		const struct engine_rows *imgs[1] = {rows};
		r = engine_vision_splice_rows(tok, (size_t)n, image_token, imgs, 1, refs, err,
					      sizeof(err));
		if (r >= 0)
			r = engine_session_append_rows(s, tok, refs, (size_t)n, ENGINE_LOGITS_LAST,
						       logits);
		double t2 = now_s();
		for (int i = 0; i < a->decode && r >= 0; i++)
			r = engine_session_decode(s, argmax(logits, vocab), logits);
		double t3 = now_s();
		engine_rows_destroy(rows);
		rows = NULL;
		t->vision = (t1 - t0) * 1e3;
		t->prefill = (t2 - t1) * 1e3;
		t->decode = (t3 - t2) * 1e3;
	}
	if (r < 0) {
		fprintf(stderr, "holo-bench agent: a step failed on the %s backend: %s\n", bi.name,
			err[0] ? err : strerror(-r));
		goto out_buffers;
	}

	printf("\n%-6s %8s %5s %10s %10s %10s %10s | %10s %10s %10s %10s %8s\n", "step", "context",
	       "tiles", "vision", "prefill", "decode", "sum", "vision", "prefill", "decode", "sum",
	       "measured");
	printf("%-6s %8s %5s %10s %10s %10s %10s | %10s %10s %10s %10s %8s\n", "", "tokens", "",
	       "ms", "ms", "ms", "ms", "roof ms", "roof ms", "roof ms", "roof ms", "/roof");
	int shown[2] = {1, steps - 1};
	double sum[2];
	for (int i = 0; i < 2; i++) {
		const struct step_time *t = &st[shown[i]];
		struct roofline_step rs = {.context = t->context, .n_tiles = t->tiles,
					   .text_tokens = a->text, .decoded = a->decode};
		roofline_step_count(&a->lm, &a->vit, a->lm_hidden, &rs);
		double rv = rs.vision_flops / rates.gemm * 1e3, rp = rs.prefill_flops / rates.gemm * 1e3;
		double rd = rs.decode_bytes / rates.copy * 1e3;
		sum[i] = t->vision + t->prefill + t->decode;
		printf("%-6d %8d %5d %10.2f %10.2f %10.2f %10.2f | %10.2f %10.2f %10.2f %10.2f %8.2f\n",
		       shown[i] + 1, t->context, t->tiles, t->vision, t->prefill, t->decode, sum[i],
		       rv, rp, rd, rv + rp + rd, sum[i] / (rv + rp + rd));
	}
	printf("\nstep %d / step 2: %.3f (goal <= 1.1 in persistent mode up to the context cap); "
	       "goal per step: measured/roof <= 1.2\n", steps, sum[1] / sum[0]);
	code = 0;
out_buffers:
	engine_rows_destroy(rows);
	free(logits);
	free(refs);
	free(tok);
	free(st);
	engine_image_destroy(img);
	engine_session_destroy(s);
out_backend:
	engine_backend_destroy(b);
out_vision:
	engine_vision_destroy(v);
out_model:
	engine_model_destroy(m);
out_fail:
	return code;
}

int bench_agent_main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"device-spec", required_argument, NULL, 'd'}, {"config", required_argument, NULL, 'c'},
		{"screen", required_argument, NULL, 's'},      {"max-tiles", required_argument, NULL, 't'},
		{"prefix", required_argument, NULL, 'p'},      {"text", required_argument, NULL, 'x'},
		{"decode", required_argument, NULL, 'n'},      {"context-cap", required_argument, NULL, 'C'},
		{"steps", required_argument, NULL, 'k'},       {"help", no_argument, NULL, 'h'},
		{"backend", required_argument, NULL, 'b'},     {"model", required_argument, NULL, 'm'},
		{"precision", required_argument, NULL, 'P'},
		{NULL, 0, NULL, 0},
	};
	const struct roofline_device *dev = NULL;
	const char *config = DEFAULT_CONFIG;
	int sw = 1920, sh = 1080, max_tiles = 12, prefix = 2000, text = 50, decode = 60;
	int cap = 32768, steps[2] = {2, 50};
	int c, run_steps = 50;
	bool config_given = false;
	const char *model_dir = NULL;
	struct engine_backend_options bopts = {.kind = ENGINE_BACKEND_AUTO};
	bool measure = false;

	optind = 1;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		int r = 0;
		switch (c) {
		case 'd':
			if (!(dev = roofline_device_find(optarg)))
				r = -EINVAL;
			break;
		case 'c':
			config = optarg;
			config_given = true;
			break;
		case 'b':
			r = engine_backend_kind_parse(optarg, &bopts.kind);
			if (r >= 0 && bopts.kind == ENGINE_BACKEND_AUTO)
				r = -EINVAL;
			measure = true;
			break;
		case 'm':
			model_dir = optarg;
			break;
		case 'P':
			r = engine_precision_parse(optarg, &bopts.precision);
			break;
		case 's':
			r = parse_pair(optarg, 'x', &sw, &sh);
			break;
		case 't':
			r = parse_count(optarg, ENGINE_VISION_MAX_TILES, &max_tiles);
			if (r >= 0 && max_tiles < 1)
				r = -EINVAL;
			break;
		case 'p':
			r = parse_count(optarg, ENGINE_SESSION_MAX_TOKENS, &prefix);
			break;
		case 'x':
			r = parse_count(optarg, ENGINE_SESSION_MAX_TOKENS, &text);
			break;
		case 'n':
			r = parse_count(optarg, 65536, &decode);
			break;
		case 'C':
			r = parse_count(optarg, ENGINE_SESSION_MAX_TOKENS, &cap);
			break;
		case 'k':
			if (strchr(optarg, ','))
				r = parse_pair(optarg, ',', &steps[0], &steps[1]);
			else
				r = parse_count(optarg, ENGINE_SESSION_MAX_TOKENS, &run_steps);
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
		if (r < 0) {
			fprintf(stderr, "holo-bench agent: '%s' is not a valid value for %s\n", optarg,
				argv[optind - 1]);
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc || measure != !dev || measure != !!model_dir || (measure && run_steps < 2)) {
		fprintf(stderr, "holo-bench agent: name the GPU with --device-spec h100|h200 (the "
				"prediction from the model's FLOP and byte counts), or measure with "
				"--backend cpu|cuda --model DIR and --steps of at least 2\n");
		usage(stderr);
		return 2;
	}

	char cfg_path[4096];
	if (measure && !config_given) {
		if ((size_t)snprintf(cfg_path, sizeof(cfg_path), "%s/config.json", model_dir) >=
		    sizeof(cfg_path)) {
			fprintf(stderr, "holo-bench agent: the model path is too long\n");
			return 2;
		}
		config = cfg_path;
	}
	char *text_buf = NULL, err[256] = "";
	size_t len = 0;
	json_t *root = NULL;
	struct model_config mc;
	int r = read_file(config, &text_buf, &len);
	if (r < 0) {
		fprintf(stderr, "holo-bench agent: %s: %s\n", config, strerror(-r));
		return 1;
	}
	r = model_config_load_json(text_buf, len, &root, err, sizeof(err));
	if (r >= 0)
		r = model_config_from_json(root, &mc, err, sizeof(err));
	struct roofline_vit vit;
	bool thumb = true;
	if (r >= 0)
		r = vit_from_config(root, &vit, &thumb, err, sizeof(err));
	struct engine_vision_grid grid;
	if (r >= 0 && (r = engine_vision_select_grid(sw, sh, vit.tile, max_tiles, thumb, &grid)) < 0)
		snprintf(err, sizeof(err), "no tile grid for %dx%d", sw, sh);
	json_decref(root);
	free(text_buf);
	if (r < 0) {
		fprintf(stderr, "holo-bench agent: %s: %s\n", config, err[0] ? err : strerror(-r));
		return 1;
	}

	const struct lm_config *l = &mc.lm;
	struct roofline_lm lm = {
		.pattern = l->pattern, .hidden = l->hidden, .vocab = mc.vocab_size,
		.intermediate = l->intermediate, .n_heads = l->n_heads, .n_kv_heads = l->n_kv_heads,
		.head_dim = l->head_dim, .m_heads = l->m_heads, .m_head_dim = l->m_head_dim,
		.m_groups = l->m_groups, .m_state = l->m_state, .m_conv_kernel = l->m_conv_kernel,
		.weight_bytes = 2, .state_bytes = 4, .kv_bytes = 2,
	};
	if (measure) {
		struct agent_measure_args ma = {
			.model_dir = model_dir, .bopts = bopts, .sw = sw, .sh = sh, .prefix = prefix,
			.text = text, .decode = decode, .cap = cap, .steps = run_steps, .lm = lm,
			.vit = vit, .lm_hidden = l->hidden,
		};
		return agent_measure(&ma);
	}
	int tile_tokens = roofline_tile_tokens(&vit);
	double per_step = (double)grid.n_tiles * tile_tokens + text + decode;

	printf("holo-bench agent: roofline prediction for %s (%.0f TFLOP/s dense bf16, %.2f TB/s)\n",
	       dev->name, dev->flops / 1e12, dev->bandwidth / 1e12);
	printf("model: %s: %d layers (%s), hidden %d, vocab %d; ViT %d x %d (MLP %d), %d-px tiles, "
	       "%d image tokens per tile\n", config, l->n_layers, l->pattern, l->hidden,
	       mc.vocab_size, vit.depth, vit.width, vit.mlp, vit.tile, tile_tokens);
	printf("step: %dx%d screenshot -> %d x %d tiles%s = %d tiles; %d + %d tokens appended, %d "
	       "decoded; prefix %d, context cap %d\n", sw, sh, grid.cols, grid.rows,
	       grid.thumbnail ? " + thumbnail" : "", grid.n_tiles, grid.n_tiles * tile_tokens, text,
	       decode, prefix, cap);
	printf("decode bytes per token at an empty context: %.2f GB\n\n",
	       roofline_decode_bytes(&lm, 0) / 1e9);
	printf("%-6s %8s %10s %10s %10s %10s %10s %10s %11s\n", "step", "context", "vision",
	       "prefill", "decode", "vision", "prefill", "decode", "roofline");
	printf("%-6s %8s %10s %10s %10s %10s %10s %10s %11s\n", "", "tokens", "TFLOP", "TFLOP", "GB",
	       "ms", "ms", "ms", "sum ms");
	double sums[2];
	for (int i = 0; i < 2; i++) {
		double ctx = prefix + steps[i] * per_step;
		bool capped = ctx + per_step > cap;
		struct roofline_step s = {.context = capped ? fmax(cap - per_step, prefix) : ctx,
					  .n_tiles = grid.n_tiles, .text_tokens = text,
					  .decoded = decode};
		roofline_step_count(&lm, &vit, l->hidden, &s);
		double tv = roofline_seconds_flops(dev, s.vision_flops) * 1e3;
		double tp = roofline_seconds_flops(dev, s.prefill_flops) * 1e3;
		double td = roofline_seconds_bytes(dev, s.decode_bytes) * 1e3;
		sums[i] = tv + tp + td;
		printf("%-6d %8.0f %10.2f %10.2f %10.1f %10.1f %10.1f %10.1f %11.1f%s\n", steps[i],
		       s.context, s.vision_flops / 1e12, s.prefill_flops / 1e12, s.decode_bytes / 1e9,
		       tv, tp, td, sums[i], capped ? "  (at the cap)" : "");
	}
	printf("\nstep %d / step %d: %.3f (goal <= 1.1 in persistent mode up to the context cap)\n",
	       steps[1], steps[0], sums[1] / sums[0]);
	return 0;
}
