/* holo-bench agent: what one agent step costs at least on a GPU, from the FLOP and byte counts of
 * the real shapes (roofline.h): a screenshot cut into tiles through RADIO and the projector, the
 * new turn prefilled onto the persistent session, and the step's tokens decoded.
 *
 *   holo-bench agent --device-spec rtx3090|rtx4090|rtx5090|l4|h100|h200 [--config FILE]
 *                    [--screen WxH] [--max-tiles N] [--prefix N] [--text N] [--decode N]
 *                    [--context-cap N] [--steps A,B] [--weights bf16,q8,q4,fp8]
 *
 * --config is a checkpoint's config.json (default: tools/bench/holotron-12b-config.json in the
 * source tree, the
 * Nano-12B-v2-VL shapes of docs/design/model.md 1.2-1.3 written out, as Holotron-12B has them).
 * The ViT's depth and MLP width are not in config.json; they come from vision_config.args.model
 * by shapes.c's table (vit_huge_patch16_224: 32 blocks, MLP 5120). Step k of a persistent session starts
 * after prefix + k * (appended + decoded) tokens, at most --context-cap (holod's --context-tokens, whose
 * session is rebuilt before it is full). Weights and the KV cache are bf16, the Mamba state fp32, as the CUDA
 * backend keeps them at bf16 precision. Then one line per --weights format (default all four): the CUDA
 * backend's memory plan of the model (engine/backend/cuda/device_plan.h: the weights in the format, the
 * vision tower for max_num_tiles tiles and the thumbnail, one session of --context-cap tokens, scratch,
 * cuBLASLt workspace, reserve) against the card's memory less CONTEXT_BYTES, `fits` or `does not fit`, how
 * many sessions of --context-cap tokens fit, and the roofline of step A with that format's bytes (decode) and
 * tensor rate (prefill: FP8's for fp8, bf16's otherwise, as q8/q4 dequantize to bf16 for the GEMM); fp8 is
 * refused on a card before sm_89 (no FP8 tensor cores).
 *
 *   holo-bench agent --backend cpu|cuda --model DIR | --random-config FILE
 *                    [--precision bf16|fp32] [--screen WxH] [--prefix N] [--text N]
 *                    [--decode N] [--context-cap N] [--steps N]
 *
 * measures instead: the checkpoint in DIR (its config.json gives the counts), or random bf16
 * weights of FILE's shapes built in memory, the language model and the vision tower
 * (lm_random_model_create(), lm_random_vision_create(): nothing read but FILE), runs N persistent
 * agent steps (default 50, fewer when the context cap comes first) on the backend through the
 * engine API the agent uses: a synthetic screenshot (a deterministic pattern) through
 * engine_vision_encode_image_on(), the turn's text and image positions appended with
 * engine_session_append_rows(), and --decode tokens decoded greedily. It prints steps 2 and N:
 * the measured vision / prefill / decode milliseconds beside the roofline of the same counts at
 * rates measured in the same run (a bf16 GEMM of the model's shapes through the backend's GEMM:
 * cuBLASLt on CUDA, oneDNN or the fp32 products on the CPU; a device-to-device copy on CUDA,
 * memcpy on the CPU), measured/roofline, and step N / step 2 (with N = 2: step 2 alone), also as
 * figure lines (bench_figure(): agent.stepK.vision, .prefill, .decode, .sum, .roofline in ms,
 * .of_roofline with its goal, agent.last_over_step2). With DIR's tokenizer it then decodes
 * --jump-steps steps (default 4) greedily under the holo3 step grammar, each with jump-forward
 * off and on from the same state (jump_forward.c), and prints one summary line
 * "jump-forward steps=N tokens=T forced=F forwards_off=A forwards_on=B decode_ms_off=X
 * decode_ms_on=Y", then the same for scripted canonical click steps ("jump-forward-click ..."),
 * and from those steps' forwards the roofline's prediction of a click step's decode for
 * Holotron-12B's shapes (DEFAULT_CONFIG) with jump-forward off and on, on this CPU (CPU backend:
 * its bf16 peak and the read bandwidth measured here) and on the H100 and H200
 * ("jump-forward-predicted ..."). Without a CUDA device (or the emulation of a test
 * build) --backend cuda fails saying so.
 *
 *   holo-bench agent --history --model DIR [--config FILE] [--window K] [--step-tokens N] ...
 *
 * prints the tokens each history mode (persistent, window, rolling) prefills at steps 2, 10 and
 * --steps (default 50), rendered and fitted as holod does, with DIR's shapes and predicted for
 * --config's, with the seconds of prefill they take at least on this CPU and a GPU
 * (agent_history.c).
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
#include "lm.h"
#include "device_plan.h"
#include "quant.h"
#include "jump_forward.h"
#include "roofline.h"
#include "shapes.h"
#ifdef HOLO_BENCH_GPU
#include "gpu.h"
#endif

/* HOLO_BENCH_DIR: this folder in the source tree (meson.build) */
#define DEFAULT_CONFIG HOLO_BENCH_DIR "/holotron-12b-config.json"
#define MAX_STEPS_SHOWN 8

static void usage(FILE *f)
{
	fprintf(f, "usage: holo-bench agent --device-spec " ROOFLINE_DEVICES " [--config FILE]\n"
		   "                        [--screen WxH] [--max-tiles N] [--prefix N] [--text N]\n"
		   "                        [--decode N] [--context-cap N] [--steps A,B]\n"
		   "                        [--weights bf16,q8,q4,fp8]\n"
		   "       holo-bench agent --backend cpu|cuda --model DIR | --random-config FILE\n"
		   "                        [--precision bf16|fp32] [--screen WxH] [--prefix N]\n"
		   "                        [--text N] [--decode N] [--context-cap N] [--steps N]\n"
		   "                        [--jump-steps N]\n"
		   "  --backend B      measure the steps of DIR's checkpoint on the CPU or CUDA device 0\n"
		   "  --model DIR      the checkpoint the measured steps run (its config.json is --config)\n"
		   "  --random-config FILE  measure random weights of FILE's shapes instead (a config.json,\n"
		   "                   e.g. " DEFAULT_CONFIG ")\n"
		   "  --precision P    the backend's precision (default: the backend's own)\n"
		   "  --device-spec D  the GPU whose peak rates and memory the prediction uses\n"
		   "  --weights LIST   formats the memory plan lines show (default bf16,q8,q4,fp8)\n"
		   "  --config FILE    a checkpoint's config.json (default " DEFAULT_CONFIG ")\n"
		   "  --screen WxH     screenshot size (default 1920x1080)\n"
		   "  --max-tiles N    tile budget (default 12, the checkpoint's)\n"
		   "  --prefix N       tokens of the system prompt and task (default 2000)\n"
		   "  --text N         text tokens of a step's turn besides the image (default 50)\n"
		   "  --decode N       tokens decoded per step (default 60)\n"
		   "  --context-cap N  session size, holod's --context-tokens (default 32768)\n"
		   "  --steps A,B      persistent steps to show (default 2,50); measured: steps to run\n"
		   "                   (default 50), of which 2 and the last are shown\n"
		   "  --jump-steps N   measured with DIR's tokenizer: then N steps (default 4, 0: none)\n"
		   "                   decoded greedily under the holo3 grammar with jump-forward off\n"
		   "                   and on, and their \"jump-forward ...\" summary line; then up to\n"
		   "                   4 scripted click steps (\"jump-forward-click ...\") and their\n"
		   "                   roofline for Holotron-12B (\"jump-forward-predicted ...\")\n"
		   "       holo-bench agent --history --model DIR [--config FILE] [--screen WxH]\n"
		   "                        [--max-tiles N] [--window K] [--context-cap N]\n"
		   "                        [--step-tokens N] [--steps N] [--device-spec D]\n"
		   "  --history        tokens prefilled per step by the persistent, window and rolling\n"
		   "                   histories (steps 2, 10, N), DIR's tokenizer and shapes, then\n"
		   "                   predicted for --config's, with seconds of prefill on this CPU\n"
		   "  --window K       observations kept with their screenshot (default 3)\n"
		   "  --step-tokens N  holod's --step-tokens (default 4096)\n");
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

static int cpu_rates(const struct engine_model *m, const struct engine_backend *b, bool bf16, int rows,
		     struct agent_rates *ret)
{
	double flop = 0, t = bench_gemm_only_seconds(m, b, bf16, rows, &flop);
	if (t < 0)
		return (int)t; /* -EOPNOTSUPP: a holo-quantize checkpoint */
	if (t == 0 || flop <= 0)
		return -EIO;
	ret->gemm = flop / t;
	snprintf(ret->gemm_what, sizeof(ret->gemm_what), "the model's matrix products for %d tokens, %s", rows,
		 !bf16			   ? "fp32" :
		 cpu_dnnl_bf16_supported() ? "bf16 (oneDNN)" :
					     "bf16 (the engine's own kernels, as fp32's)");
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
	snprintf(ret->copy_what, sizeof(ret->copy_what), "read, %d threads, median of %d passes over %zu MiB",
		 cpu_threads(), CPU_COPY_ROUNDS, CPU_COPY_BYTES >> 20);
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
		r = bench_gpu_gemm_rate(g, intermediate, hidden, rows, emu ? 1 : GPU_GEMM_ROUNDS, &ret->gemm);
	snprintf(ret->gemm_what, sizeof(ret->gemm_what),
		 "cuBLASLt bf16 %d x %d weight times %d tokens (the MLP up-projection)", intermediate, hidden,
		 rows);
	snprintf(ret->copy_what, sizeof(ret->copy_what), "device to device, read + write");
	gpu_context_destroy(g);
	return r;
}
#endif

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
	const struct bench_shapes *random; /* instead of model_dir: random weights of its shapes */
	const char *random_config;	   /* its file */
	struct engine_backend_options bopts;
	int sw, sh, prefix, text, decode, cap, steps;
	int jump_steps; /* steps decoded under the grammar with jump-forward off and on */
	struct roofline_lm lm;
	struct roofline_vit vit;
	int lm_hidden;
};

struct step_time {
	int context, tiles;
	double vision, prefill, decode;
};

/* The context of jump-forward's prediction: a session some steps into a task. */
#define JF_PREDICT_CONTEXT 8192

/* Jump-forward's click steps predicted for Holotron-12B's shapes (DEFAULT_CONFIG, bf16) from
 * the roofline: on this CPU (its bf16 peak and the read bandwidth measured in this run; rates
 * NULL: not measured, a GPU run) and on the H100 and H200 (the device specs). */
static int jf_predictions(const struct bench_jf *jf, const struct agent_rates *rates)
{
	char err[512];
	struct bench_shapes big;
	struct roofline_lm lm;

	if (bench_shapes_read(DEFAULT_CONFIG, &big, err, sizeof(err)) < 0) {
		fprintf(stderr, "holo-bench agent: %s\n", err);
		return -EINVAL;
	}
	bench_shapes_roofline_lm(&big, &lm);
	printf("(the click steps' forwards, predicted for %s at bf16 after %d tokens: %.2f GB per "
	       "decode forward)\n",
	       DEFAULT_CONFIG, JF_PREDICT_CONTEXT, roofline_forward_bytes(&lm, JF_PREDICT_CONTEXT, 1) / 1e9);
	if (rates) {
		struct bench_peak peak;
		int r = bench_bf16_peak(NULL, 0.2, &peak);
		if (r < 0) {
			fprintf(stderr, "holo-bench agent: the CPU's bf16 peak: %s\n", strerror(-r));
			return r;
		}
		struct roofline_device cpu = {.name = "cpu",
					      .flops = peak.flops_per_s,
					      .bandwidth = rates->copy};
		printf("(cpu: %.2f TFLOP/s bf16 peak (%s), %.1f GB/s read)\n", peak.flops_per_s / 1e12,
		       peak.unit, rates->copy / 1e9);
		bench_jf_print_prediction(jf, "holotron-12b", &lm, &cpu, JF_PREDICT_CONTEXT);
	}
	static const char *const gpus[] = {"h100", "h200"};
	for (size_t i = 0; i < ARRAY_SIZE(gpus); i++)
		bench_jf_print_prediction(jf, "holotron-12b", &lm, roofline_device_find(gpus[i]),
					  JF_PREDICT_CONTEXT);
	return 0;
}

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
	if (a->random) {
		struct lm_random_spec sp;
		struct lm_random_vision_spec vs;
		bench_shapes_lm_spec(a->random, &sp);
		bench_shapes_vision_spec(a->random, &vs);
		if (!(m = lm_random_model_create(&sp))) {
			fprintf(stderr, "holo-bench agent: cannot build the random model: %s\n",
				strerror(errno));
			goto out_fail;
		}
		v = lm_random_vision_create(m, &vs, err, sizeof(err));
	} else {
		m = engine_model_load(a->model_dir, err, sizeof(err));
		if (!m) {
			fprintf(stderr, "holo-bench agent: %s\n", err);
			goto out_fail;
		}
		v = engine_vision_create(m, err, sizeof(err));
	}
	if (!v) {
		fprintf(stderr, "holo-bench agent: %s\n", err);
		goto out_model;
	}
	int vocab = m->cfg.vocab, tpt = engine_vision_tokens_per_tile(v);
	int32_t image_token = engine_vision_image_token(v);
	struct engine_vision_grid grid;
	struct engine_vision_preprocess pp;
	engine_vision_get_preprocess(v, &pp);
	r = engine_vision_select_grid(a->sw, a->sh, pp.tile_size, pp.max_tiles, pp.use_thumbnail, &grid);
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
		fprintf(stderr,
			"holo-bench agent: a %d-token prefix and steps of %d tokens leave "
			"fewer than 2 steps under the context cap %d\n",
			a->prefix, per_step, a->cap);
		goto out_vision;
	}

	struct agent_rates rates = {0};
	bool bf16 = false;
#ifdef HOLO_BENCH_GPU
	if (cuda) {
		r = cuda_rates(a->bopts.device, a->lm.hidden,
			       a->lm.intermediate > 0 ? a->lm.intermediate : a->lm.hidden, n_turn, &rates);
		if (r < 0) {
			fprintf(stderr,
				"holo-bench agent: the copy or GEMM measurement failed on CUDA "
				"device %d: %s\n",
				a->bopts.device, strerror(-r));
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
	if (!cuda && (r = cpu_rates(m, b, bf16, n_turn, &rates)) < 0) {
		fprintf(stderr, "holo-bench agent: the CPU GEMM or copy measurement failed: %s\n",
			strerror(-r));
		goto out_backend;
	}
	a->lm.weight_bytes = bf16 ? 2 : 4;
	a->lm.kv_bytes = bf16 && cuda ? 2 : 4;

	int max_tokens = a->prefix + steps * per_step + 1;
	s = engine_session_create_on(b, max_tokens);
	img = bench_synthetic_screen(a->sw, a->sh);
	st = calloc((size_t)steps, sizeof(*st));
	int n_buf = a->prefix > n_turn ? a->prefix : n_turn;
	tok = malloc(sizeof(*tok) * (size_t)n_buf);
	refs = malloc(sizeof(*refs) * (size_t)n_turn);
	/* the logits, and one image row when the vision time waits for its rows */
	logits = malloc(sizeof(*logits) * (size_t)(vocab > a->lm_hidden ? vocab : a->lm_hidden));
	if (!s || !img || !st || !tok || !refs || !logits) {
		fprintf(stderr, "holo-bench agent: out of memory for a %d-token session\n", max_tokens);
		goto out_buffers;
	}

	printf("holo-bench agent: measured on %s (%s), %s; %s%s\n", bi.name, bi.device,
	       engine_precision_name(bi.precision), a->random ? "random weights of the shapes of " : "",
	       a->random ? a->random_config : a->model_dir);
	printf("step: %dx%d synthetic screenshot -> %d x %d tiles%s = %d tiles; %d + %d tokens "
	       "appended, %d decoded greedily; prefix %d; %d persistent steps\n",
	       a->sw, a->sh, grid.cols, grid.rows, grid.thumbnail ? " + thumbnail" : "", grid.n_tiles,
	       n_image, a->text, a->decode, a->prefix, steps);
	if (steps < a->steps)
		printf("(%d steps asked; %d fit under the context cap %d)\n", a->steps, steps, a->cap);
	printf("GEMM rate: %.3f TFLOP/s (%s)\ncopy bandwidth: %.1f GB/s (%s)\n", rates.gemm / 1e12,
	       rates.gemm_what, rates.copy / 1e9, rates.copy_what);

	for (int i = 0; i < a->prefix; i++)
		tok[i] = text_token((unsigned)i, vocab, image_token);
	r = a->prefix ? engine_session_append(s, tok, NULL, (size_t)a->prefix, ENGINE_LOGITS_NONE, NULL) : 0;
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
		r = engine_vision_splice_rows(tok, (size_t)n, image_token, imgs, 1, refs, err, sizeof(err));
		if (r >= 0)
			r = engine_session_append_rows(s, tok, refs, (size_t)n, ENGINE_LOGITS_LAST, logits);
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

	printf("\n%-6s %8s %5s %10s %10s %10s %10s | %10s %10s %10s %10s %8s\n", "step", "context", "tiles",
	       "vision", "prefill", "decode", "sum", "vision", "prefill", "decode", "sum", "measured");
	printf("%-6s %8s %5s %10s %10s %10s %10s | %10s %10s %10s %10s %8s\n", "", "tokens", "", "ms", "ms",
	       "ms", "ms", "roof ms", "roof ms", "roof ms", "roof ms", "/roof");
	int shown[2] = {1, steps - 1}, n_shown = steps > 2 ? 2 : 1;
	double sum[2], roof[2];
	for (int i = 0; i < n_shown; i++) {
		const struct step_time *t = &st[shown[i]];
		struct roofline_step rs = {.context = t->context,
					   .n_tiles = t->tiles,
					   .text_tokens = a->text,
					   .decoded = a->decode};
		roofline_step_count(&a->lm, &a->vit, a->lm_hidden, &rs);
		double rv = rs.vision_flops / rates.gemm * 1e3, rp = rs.prefill_flops / rates.gemm * 1e3;
		double rd = rs.decode_bytes / rates.copy * 1e3;
		sum[i] = t->vision + t->prefill + t->decode;
		roof[i] = rv + rp + rd;
		printf("%-6d %8d %5d %10.2f %10.2f %10.2f %10.2f | %10.2f %10.2f %10.2f %10.2f %8.2f\n",
		       shown[i] + 1, t->context, t->tiles, t->vision, t->prefill, t->decode, sum[i], rv, rp,
		       rd, roof[i], sum[i] / roof[i]);
	}
	printf("\n");
	if (n_shown == 2)
		printf("step %d / step 2: %.3f (goal <= 1.1 in persistent mode up to the context cap); ",
		       steps, sum[1] / sum[0]);
	printf("goal per step: measured/roof <= 1.2\n");
	for (int i = 0; i < n_shown; i++) {
		const struct step_time *t = &st[shown[i]];
		const struct {
			const char *part;
			double ms;
		} parts[] = {{"vision", t->vision},
			     {"prefill", t->prefill},
			     {"decode", t->decode},
			     {"sum", sum[i]},
			     {"roofline", roof[i]}};
		char name[64];
		for (size_t k = 0; k < ARRAY_SIZE(parts); k++) {
			snprintf(name, sizeof(name), "agent.step%d.%s", shown[i] + 1, parts[k].part);
			bench_figure(name, parts[k].ms, "ms", NULL, 0);
		}
		snprintf(name, sizeof(name), "agent.step%d.of_roofline", shown[i] + 1);
		bench_figure(name, sum[i] / roof[i], "x", "<=", 1.2);
	}
	if (n_shown == 2)
		bench_figure("agent.last_over_step2", sum[1] / sum[0], "x", "<=", 1.1);
	/* jump-forward off and on, on the checkpoint's tokenizer (random weights have none) */
	const struct engine_tokenizer *mtok = a->random ? NULL : engine_model_tokenizer(m);
	if (mtok && a->jump_steps > 0) {
		struct bench_jf jf;
		if (bench_jump_forward(b, mtok, vocab, a->jump_steps, &jf, err, sizeof(err)) < 0) {
			fprintf(stderr, "holo-bench agent: jump-forward: %s\n", err);
			goto out_buffers;
		}
		printf("\n");
		bench_jf_print(&jf);
		if ((r = jf_predictions(&jf, cuda ? NULL : &rates)) < 0)
			goto out_buffers;
	}
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
	if (a->random)
		lm_random_model_destroy(m);
	else
		engine_model_destroy(m);
out_fail:
	return code;
}

/* ---- the memory plan per format: --device-spec with --weights ---- */

static const struct {
	const char *name;
	enum engine_weights weights;
	enum quant_format quant; /* the layers' rows; QUANT_FORMAT_COUNT: bf16 */
} plan_formats[] = {
	{"bf16", ENGINE_WEIGHTS_BF16, QUANT_FORMAT_COUNT},
	{"q8", ENGINE_WEIGHTS_Q8, QUANT_Q8},
	{"q4", ENGINE_WEIGHTS_Q4, QUANT_Q4},
	{"fp8", ENGINE_WEIGHTS_FP8, QUANT_FP8},
};

/* A comma-separated list of plan_formats' names into bits. */
static int parse_formats(const char *s, unsigned *ret)
{
	unsigned bits = 0;
	while (*s) {
		size_t n = strcspn(s, ","), i;
		for (i = 0; i < ARRAY_SIZE(plan_formats); i++)
			if (strlen(plan_formats[i].name) == n && !strncmp(s, plan_formats[i].name, n))
				break;
		if (i == ARRAY_SIZE(plan_formats))
			return -EINVAL;
		bits |= 1u << i;
		s += n + (s[n] == ',');
	}
	if (!bits)
		return -EINVAL;
	*ret = bits;
	return 0;
}

/* What the CUDA context (and on a desktop card the display) holds before holod allocates: not
 * in cudaMemGetInfo()'s free memory. An estimate (a few hundred MiB on a headless device). */
#define CONTEXT_BYTES ((uint64_t)512 << 20)

struct plan_step {
	double context;
	int step, n_tiles, text, decode;
};

static int plan_lines(const struct bench_shapes *sh, const struct roofline_lm *lm0,
		      const struct roofline_vit *vit, const struct roofline_device *dev, int cap,
		      const struct plan_step *st, unsigned formats)
{
	const struct lm_config *l = &sh->mc.lm;
	struct lm_config cfg = *l;
	cfg.vocab = sh->mc.vocab_size;
	struct device_plan_vision pv = {
		.width = vit->width,
		.depth = vit->depth,
		.mlp = vit->mlp,
		.patch = vit->patch,
		.prefix = vit->prefix,
		.shuffle = vit->shuffle,
		.proj_hidden = vit->proj_hidden,
		.out_dim = l->hidden,
		.tile = vit->tile,
		.tiles = sh->max_tiles + (sh->use_thumbnail ? 1 : 0),
	};
	uint64_t free_b = (uint64_t)dev->memory - CONTEXT_BYTES;
	printf("\nmemory plan on %s (%s, sm_%d, %.1f GiB; %.1f GiB free: less %llu MiB for the CUDA "
	       "context), one session of %d tokens, bf16 activations and KV cache:\n",
	       dev->name, dev->label, dev->sm, dev->memory / (1u << 30), (double)free_b / (1u << 30),
	       (unsigned long long)(CONTEXT_BYTES >> 20), cap);
	for (size_t i = 0; i < ARRAY_SIZE(plan_formats); i++) {
		if (!(formats & (1u << i)))
			continue;
		const char *f = plan_formats[i].name;
		bool fp8 = plan_formats[i].quant == QUANT_FP8;
		if (fp8 && !(dev->fp8_flops > 0)) {
			printf("%s %s: does not run: sm_%d has no FP8 tensor cores (fp8 needs sm_89 or "
			       "later): use q8 or q4\n",
			       dev->name, f, dev->sm);
			continue;
		}
		struct device_plan_args a = {
			.lm = &cfg,
			.tied = sh->mc.tie_word_embeddings,
			.conv_bias = sh->mc.use_conv_bias,
			.weights = plan_formats[i].weights,
			.precision = ENGINE_PRECISION_BF16,
			.vision = &pv,
			.sessions = 1,
			.context = cap,
		};
		struct engine_memory_plan p;
		if (device_plan_compute(&a, &p) < 0) {
			fprintf(stderr, "holo-bench agent: the model's shapes cannot be planned\n");
			return -EINVAL;
		}
		bool fits = device_plan_fit(&p, free_b);
		/* the step's roofline with this format's bytes and tensor rate */
		struct roofline_lm lm = *lm0;
		if (plan_formats[i].quant != QUANT_FORMAT_COUNT) {
			size_t rb = 0;
			if (quant_row_bytes(plan_formats[i].quant, l->hidden, &rb) < 0)
				return -EINVAL;
			lm.weight_bytes = (double)rb / l->hidden;
			lm.head_bytes = fp8 ? 2 : lm.weight_bytes;
		}
		struct roofline_step s = {.context = st->context,
					  .n_tiles = st->n_tiles,
					  .text_tokens = st->text,
					  .decoded = st->decode};
		roofline_step_count(&lm, vit, l->hidden, &s);
		double rate = fp8 ? dev->fp8_flops : dev->flops;
		double tv = roofline_seconds_flops(dev, s.vision_flops) * 1e3;
		double tp = s.prefill_flops / rate * 1e3;
		double td = roofline_seconds_bytes(dev, s.decode_bytes) * 1e3;
		char what[512];
		printf("%s %s: %s: %s; %d sessions of %d tokens fit; predicted step %d: %.1f ms "
		       "(vision %.1f + prefill %.1f + decode %.1f)\n",
		       dev->name, f, fits ? "fits" : "does not fit",
		       device_plan_describe(&p, what, sizeof(what)), p.sessions_fit, cap, st->step,
		       tv + tp + td, tv, tp, td);
	}
	return 0;
}

int bench_agent_main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"device-spec", required_argument, NULL, 'd'},
		{"config", required_argument, NULL, 'c'},
		{"screen", required_argument, NULL, 's'},
		{"max-tiles", required_argument, NULL, 't'},
		{"prefix", required_argument, NULL, 'p'},
		{"text", required_argument, NULL, 'x'},
		{"decode", required_argument, NULL, 'n'},
		{"context-cap", required_argument, NULL, 'C'},
		{"steps", required_argument, NULL, 'k'},
		{"help", no_argument, NULL, 'h'},
		{"backend", required_argument, NULL, 'b'},
		{"model", required_argument, NULL, 'm'},
		{"precision", required_argument, NULL, 'P'},
		{"random-config", required_argument, NULL, 'R'},
		{"history", no_argument, NULL, 'H'},
		{"window", required_argument, NULL, 'K'},
		{"step-tokens", required_argument, NULL, 'S'},
		{"weights", required_argument, NULL, 'W'},
		{"jump-steps", required_argument, NULL, 'J'},
		{NULL, 0, NULL, 0},
	};
	const struct roofline_device *dev = NULL;
	const char *config = DEFAULT_CONFIG;
	int sw = 1920, sh = 1080, max_tiles = 12, prefix = 2000, text = 50, decode = 60;
	int cap = 32768, steps[2] = {2, 50};
	int c, run_steps = 50;
	bool config_given = false;
	const char *model_dir = NULL, *random_config = NULL;
	struct engine_backend_options bopts = {.kind = ENGINE_BACKEND_AUTO};
	bool measure = false, history = false;
	int window = 3, step_tokens = 4096, jump_steps = 4;
	unsigned formats = 0; /* --weights: bit i for plan_formats[i]; 0: all */

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
		case 'R':
			random_config = optarg;
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
		case 'H':
			history = true;
			break;
		case 'J':
			r = parse_count(optarg, BENCH_JF_MAX_STEPS, &jump_steps);
			break;
		case 'K':
			r = parse_count(optarg, 64, &window);
			if (r >= 0 && window < 1)
				r = -EINVAL;
			break;
		case 'S':
			r = parse_count(optarg, 65536, &step_tokens);
			break;
		case 'W':
			r = parse_formats(optarg, &formats);
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
	if (history) {
		if (optind != argc || measure || !model_dir || random_config ||
		    (long long)step_tokens + 1024 > cap) {
			fprintf(stderr, "holo-bench agent --history: name the model whose tokenizer "
					"renders the prompt with --model DIR (no --backend), and a "
					"--context-cap above --step-tokens + 1024\n");
			usage(stderr);
			return 2;
		}
		return bench_agent_history(model_dir, config, sw, sh, max_tiles, (size_t)window, cap,
					   step_tokens, (size_t)run_steps, dev);
	}
	if (optind != argc || measure != !dev || measure != (!!model_dir + !!random_config == 1) ||
	    (measure && run_steps < 2) || (model_dir && random_config) || (measure && formats)) {
		fprintf(stderr, "holo-bench agent: name the GPU with --device-spec " ROOFLINE_DEVICES " (the "
				"prediction from the model's FLOP and byte counts), or measure with "
				"--backend cpu|cuda, --model DIR or --random-config FILE, and --steps of at "
				"least 2\n");
		usage(stderr);
		return 2;
	}

	char cfg_path[4096];
	if (random_config)
		config = random_config;
	else if (measure && !config_given) {
		if ((size_t)snprintf(cfg_path, sizeof(cfg_path), "%s/config.json", model_dir) >=
		    sizeof(cfg_path)) {
			fprintf(stderr, "holo-bench agent: the model path is too long\n");
			return 2;
		}
		config = cfg_path;
	}
	char err[512] = "";
	struct bench_shapes shapes;
	int r = bench_shapes_read(config, &shapes, err, sizeof(err));
	if (r < 0) {
		fprintf(stderr, "holo-bench agent: %s\n", err);
		return 1;
	}
	if (!shapes.has_vision) {
		fprintf(stderr, "holo-bench agent: %s: %s\n", config, shapes.vision_err);
		return 1;
	}
	if (random_config && shapes.pos_grid < 1) {
		fprintf(stderr,
			"holo-bench agent: %s: no vision_config.args.cpe_max_size for the random "
			"tower's position grid\n",
			config);
		return 1;
	}
	const struct roofline_vit vit = shapes.vit;
	struct engine_vision_grid grid;
	if (engine_vision_select_grid(sw, sh, vit.tile, max_tiles, shapes.use_thumbnail, &grid) < 0) {
		fprintf(stderr, "holo-bench agent: %s: no tile grid for %dx%d\n", config, sw, sh);
		return 1;
	}
	const struct lm_config *l = &shapes.mc.lm;
	struct roofline_lm lm;
	bench_shapes_roofline_lm(&shapes, &lm);
	if (measure) {
		struct agent_measure_args ma = {
			.model_dir = model_dir,
			.random = random_config ? &shapes : NULL,
			.random_config = random_config,
			.bopts = bopts,
			.sw = sw,
			.sh = sh,
			.prefix = prefix,
			.text = text,
			.decode = decode,
			.cap = cap,
			.steps = run_steps,
			.lm = lm,
			.vit = vit,
			.lm_hidden = l->hidden,
			.jump_steps = jump_steps,
		};
		return agent_measure(&ma);
	}
	int tile_tokens = roofline_tile_tokens(&vit);
	double per_step = (double)grid.n_tiles * tile_tokens + text + decode;

	printf("holo-bench agent: roofline prediction for %s (%.0f TFLOP/s dense bf16, %.2f TB/s)\n",
	       dev->name, dev->flops / 1e12, dev->bandwidth / 1e12);
	printf("model: %s: %d layers (%s), hidden %d, vocab %d; ViT %d x %d (MLP %d), %d-px tiles, "
	       "%d image tokens per tile\n",
	       config, l->n_layers, l->pattern, l->hidden, shapes.mc.vocab_size, vit.depth, vit.width,
	       vit.mlp, vit.tile, tile_tokens);
	printf("step: %dx%d screenshot -> %d x %d tiles%s = %d tiles; %d + %d tokens appended, %d "
	       "decoded; prefix %d, context cap %d\n",
	       sw, sh, grid.cols, grid.rows, grid.thumbnail ? " + thumbnail" : "", grid.n_tiles,
	       grid.n_tiles * tile_tokens, text, decode, prefix, cap);
	printf("decode bytes per token at an empty context: %.2f GB\n\n", roofline_decode_bytes(&lm, 0) / 1e9);
	printf("%-6s %8s %10s %10s %10s %10s %10s %10s %11s\n", "step", "context", "vision", "prefill",
	       "decode", "vision", "prefill", "decode", "roofline");
	printf("%-6s %8s %10s %10s %10s %10s %10s %10s %11s\n", "", "tokens", "TFLOP", "TFLOP", "GB", "ms",
	       "ms", "ms", "sum ms");
	double sums[2];
	for (int i = 0; i < 2; i++) {
		double ctx = prefix + steps[i] * per_step;
		bool capped = ctx + per_step > cap;
		struct roofline_step s = {.context = capped ? fmax(cap - per_step, prefix) : ctx,
					  .n_tiles = grid.n_tiles,
					  .text_tokens = text,
					  .decoded = decode};
		roofline_step_count(&lm, &vit, l->hidden, &s);
		double tv = roofline_seconds_flops(dev, s.vision_flops) * 1e3;
		double tp = roofline_seconds_flops(dev, s.prefill_flops) * 1e3;
		double td = roofline_seconds_bytes(dev, s.decode_bytes) * 1e3;
		sums[i] = tv + tp + td;
		printf("%-6d %8.0f %10.2f %10.2f %10.1f %10.1f %10.1f %10.1f %11.1f%s\n", steps[i], s.context,
		       s.vision_flops / 1e12, s.prefill_flops / 1e12, s.decode_bytes / 1e9, tv, tp, td,
		       sums[i], capped ? "  (at the cap)" : "");
	}
	printf("\nstep %d / step %d: %.3f (goal <= 1.1 in persistent mode up to the context cap)\n", steps[1],
	       steps[0], sums[1] / sums[0]);
	struct plan_step ps = {.context = prefix + steps[0] * per_step,
			       .step = steps[0],
			       .n_tiles = grid.n_tiles,
			       .text = text,
			       .decode = decode};
	if (ps.context + per_step > cap)
		ps.context = fmax(cap - per_step, prefix);
	return plan_lines(&shapes, &lm, &vit, dev, cap, &ps, formats ? formats : ~0u) < 0 ? 1 : 0;
}
