/* holo-bench gpu: the language model and the vision tower on a CUDA device against ceilings
 * measured in the same run on the same device:
 *  - decode tok/s as a fraction of the roofline: device copy bandwidth (bytes read + written per
 *    second by a device-to-device copy) / weight bytes read per token: the backend's memory plan
 *    of the weights in their format (engine_backend_info's plan: the linear layers' records with
 *    their blocks and scales, the lm_head, norms, conv taps and vectors, each as the backend
 *    allocates it), all but the embedding table, whose one row per token is negligible, unless
 *    it is the tied lm_head;
 *  - prefill tok/s as a fraction of the cuBLASLt GEMM rate of the products the backend's prefill
 *    runs, converted to tokens with 2 flops per matrix parameter per token (attention's own
 *    O(n^2) work is left out, which flatters prefill slightly at long prompts): the bf16 GEMM
 *    (gpu_gemm, fp32 accumulation) of a large square problem for bf16, fp32 and q8/q4 (whose
 *    prefill dequantizes slices to bf16 for that GEMM), cuBLASLt's FP8 matmul (gpu_gemm_fp8,
 *    e4m3 x e4m3) of the same shape for fp8 weights in bf16 precision (the FP8 prefill);
 *  - state bytes per session after the run;
 *  - vision ms per tile: a 1920x1080 screenshot through engine_vision_encode_image_on()
 *    (preprocessing, ViT and projector on the device, the rows left there), against the tile's
 *    FLOPs (roofline.h) at the bf16 GEMM rate (the tower stays bf16 whatever --weights says).
 * Goals printed beside (issue 29): decode >= 85% of the roofline, prefill >= 60% of its GEMM
 * rate. Each figure is also a "figure name=... value=... unit=..." line (bench_figure()), named
 * gpu.FORMAT.*: the weights' format (bf16, q8, q4, fp8), or fp32 for --precision fp32's plain
 * weights (quantized weights in fp32 precision: q8-fp32...).
 *
 *   holo-bench gpu [--config FILE] [--prompt N] [--decode N] [--precision bf16|fp32]
 *                  [--weights bf16|q8|q4|fp8] [--profile] [--emulated]
 *
 * The weights are random, of the shapes of --config (a config.json; default: Holotron-12B's,
 * tools/bench/holotron-12b-config.json, with its RADIO-H tower), built in memory in bf16:
 * nothing is read but the config. --weights q8|q4|fp8 has the CUDA backend quantize the linear
 * layers at creation as holod does (engine_backend_options.weights); fp8 is refused before
 * anything is measured on a device below sm_89 (no FP8 tensor cores), as the backend refuses it.
 * Prefill and decode run twice on one session, reset between (the first run loads the kernels,
 * picks the GEMM algorithms and captures the decode graphs), and the second is shown; the
 * encode runs once, then the best of three is shown.
 *
 * Without a device, and in the emulated build (whose device is the CPU), it says so and exits
 * 77, unless --emulated asks for the emulation: then the same steps run there at tiny sizes
 * (default --config tools/bench/tiny-vl-config.json, 16 prompt and 4 decode tokens, a 4 MiB
 * copy and a 64^3 GEMM), so that what runs on a device is exercised in CI. --emulated in a build
 * with a real CUDA runtime is refused (exit 2).
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "common.h"
#include "engine.h"
#include "gpu.h"
#include "lm.h"
#include "model.h"
#include "roofline.h"
#include "shapes.h"

#define BENCH_SKIP 77
#define COPY_BYTES ((size_t)1 << 30)
#define COPY_ROUNDS 10
#define GEMM_N 8192
#define GEMM_ROUNDS 10
/* --emulated: the device is the CPU */
#define EMU_COPY_BYTES ((size_t)4 << 20)
#define EMU_COPY_ROUNDS 2
#define EMU_GEMM_N 64
#define DEFAULT_CONFIG HOLO_BENCH_DIR "/holotron-12b-config.json"
#define EMU_CONFIG HOLO_BENCH_DIR "/tiny-vl-config.json"
#define SCREEN_W 1920
#define SCREEN_H 1080
#define VISION_ROUNDS 3

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int bench_gpu_copy_rate(struct gpu_context *g, size_t bytes, int rounds, double *ret)
{
	void *a = NULL, *b = NULL;
	int r = gpu_alloc(g, bytes, &a);
	if (r >= 0)
		r = gpu_alloc(g, bytes, &b);
	if (r >= 0)
		r = gpu_memset(g, a, 1, bytes);
	if (r >= 0)
		r = gpu_copy_on_device(g, b, a, bytes); /* warm-up */
	if (r >= 0)
		r = gpu_synchronize(g);
	double t0 = now_s();
	for (int i = 0; i < rounds && r >= 0; i++)
		r = gpu_copy_on_device(g, i % 2 ? a : b, i % 2 ? b : a, bytes);
	if (r >= 0)
		r = gpu_synchronize(g);
	*ret = 2.0 * (double)bytes * rounds / (now_s() - t0);
	gpu_free(g, a);
	gpu_free(g, b);
	return r;
}

int bench_gpu_gemm_rate(struct gpu_context *g, int out, int in, int rows, int rounds, double *ret)
{
	size_t wb = (size_t)out * in * 2, xb = (size_t)rows * in * 2, yb = (size_t)rows * out * 4;
	void *w = NULL, *x = NULL, *y = NULL;
	struct gpu_blas *blas = gpu_blas_create(g);
	int r = blas ? 0 : -errno;
	if (r >= 0)
		r = gpu_alloc(g, wb, &w);
	if (r >= 0)
		r = gpu_alloc(g, xb, &x);
	if (r >= 0)
		r = gpu_alloc(g, yb, &y);
	if (r >= 0)
		r = gpu_memset(g, w, 0x3c, wb); /* bf16 0x3c3c, about 0.0115 */
	if (r >= 0)
		r = gpu_memset(g, x, 0x3c, xb);
	if (r >= 0) /* warm-up: the shape's descriptors and algorithm */
		r = gpu_gemm(blas, w, GPU_DTYPE_BF16, out, in, x, (size_t)in, rows, y, GPU_DTYPE_F32,
			     (size_t)out, false);
	if (r >= 0)
		r = gpu_synchronize(g);
	double t0 = now_s();
	for (int i = 0; i < rounds && r >= 0; i++)
		r = gpu_gemm(blas, w, GPU_DTYPE_BF16, out, in, x, (size_t)in, rows, y, GPU_DTYPE_F32,
			     (size_t)out, false);
	if (r >= 0)
		r = gpu_synchronize(g);
	*ret = 2.0 * (double)out * in * rows * rounds / (now_s() - t0);
	gpu_free(g, w);
	gpu_free(g, x);
	gpu_free(g, y);
	gpu_blas_destroy(blas);
	return r;
}

int bench_gpu_gemm_fp8_rate(struct gpu_context *g, int out, int in, int rows, int rounds, double *ret)
{
	size_t wb = (size_t)out * in, xb = (size_t)rows * in, yb = (size_t)rows * out * 4;
	const float one[2] = {1, 1};
	void *w = NULL, *x = NULL, *y = NULL, *s = NULL;
	struct gpu_blas *blas = gpu_blas_create(g);
	int r = blas ? 0 : -errno;
	if (r >= 0)
		r = gpu_alloc(g, wb, &w);
	if (r >= 0)
		r = gpu_alloc(g, xb, &x);
	if (r >= 0)
		r = gpu_alloc(g, yb, &y);
	if (r >= 0)
		r = gpu_alloc(g, sizeof(one), &s);
	if (r >= 0)
		r = gpu_memset(g, w, 0x30, wb); /* e4m3 0x30: 0.5 */
	if (r >= 0)
		r = gpu_memset(g, x, 0x18, xb); /* e4m3 0x18: 0.0625 */
	if (r >= 0)
		r = gpu_copy_to_device(g, s, one, sizeof(one));
	const float *sw = s, *sx = (const float *)s + 1;
	if (r >= 0) /* warm-up: the shape's descriptors and algorithm */
		r = gpu_gemm_fp8(blas, w, (size_t)in, sw, out, in, x, (size_t)in, sx, rows, y, GPU_DTYPE_F32,
				 (size_t)out, false);
	if (r >= 0)
		r = gpu_synchronize(g);
	double t0 = now_s();
	for (int i = 0; i < rounds && r >= 0; i++)
		r = gpu_gemm_fp8(blas, w, (size_t)in, sw, out, in, x, (size_t)in, sx, rows, y, GPU_DTYPE_F32,
				 (size_t)out, false);
	if (r >= 0)
		r = gpu_synchronize(g);
	*ret = 2.0 * (double)out * in * rows * rounds / (now_s() - t0);
	gpu_free(g, w);
	gpu_free(g, x);
	gpu_free(g, y);
	gpu_free(g, s);
	gpu_blas_destroy(blas);
	return r;
}

static size_t elems(const struct tensor *t)
{
	size_t n = t->data ? 1 : 0;
	for (int i = 0; i < t->ndim; i++)
		n *= (size_t)t->shape[i];
	return n;
}

/* Matrix parameters a token multiplies (every layer's projections and the lm_head). A layer's
 * matrices are its kind's (lm_layer_matrices()): the kinds' members share a union. */
static size_t matrix_params(const struct engine_model *m)
{
	size_t n = elems(&m->lm_head);
	for (int l = 0; l < m->cfg.n_layers; l++) {
		const struct tensor *mats[4];
		int k = lm_layer_matrices(&m->layers[l], mats);
		for (int i = 0; i < k; i++)
			n += elems(mats[i]);
	}
	return n;
}

/* Weight bytes one decode token reads, from the backend's memory plan (the same figures it
 * allocates by): the linear layers in their format, the lm_head's own copy (or, tied and plain,
 * the embeddings it is), the norms, conv taps, vectors and fp8 scales; not the embedding table
 * otherwise (one row a token). */
static double decode_bytes(const struct engine_memory_plan *p)
{
	return (double)(p->layers + p->other + (p->head ? p->head : p->embeddings));
}

/* One prefill of n_prompt tokens and n_decode decode steps on a fresh session state: the
 * seconds of each. */
static int run_lm(struct engine_session *s, const int32_t *tok, int n_prompt, int n_decode, float *logits,
		  double *ret_prefill, double *ret_decode)
{
	engine_session_reset(s);
	double t0 = now_s();
	int r = engine_session_append(s, tok, NULL, (size_t)n_prompt, ENGINE_LOGITS_LAST, logits);
	double t1 = now_s();
	for (int i = 0; i < n_decode && r >= 0; i++)
		r = engine_session_decode(s, tok[n_prompt + i], logits);
	double t2 = now_s();
	*ret_prefill = t1 - t0;
	*ret_decode = t2 - t1;
	return r;
}

/* The screenshot's encode on the device: one untimed (the tower's upload, kernels, GEMM
 * algorithms), then the best of VISION_ROUNDS, each until one row has come back. */
static int run_vision(struct engine_backend *b, const struct engine_vision *v, const struct engine_image *img,
		      int *ret_tiles, double *ret_s)
{
	float row[1 << 14];
	int r = 0;
	*ret_s = INFINITY;
	if (engine_vision_embed_dim(v) > (int)ARRAY_SIZE(row))
		return -EINVAL;
	for (int k = 0; k <= VISION_ROUNDS && r >= 0; k++) {
		struct engine_vision_grid grid;
		struct engine_rows *rows = NULL;
		double t0 = now_s();
		r = engine_vision_encode_image_on(b, v, img, 0, &grid, &rows);
		if (r >= 0)
			r = engine_rows_read(rows, 0, 1, row);
		double t = now_s() - t0;
		engine_rows_destroy(rows);
		if (r >= 0 && k > 0 && t < *ret_s)
			*ret_s = t;
		*ret_tiles = grid.n_tiles;
	}
	return r;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: holo-bench gpu [--config FILE] [--prompt N] [--decode N] "
		   "[--precision bf16|fp32]\n"
		   "                      [--weights bf16|q8|q4|fp8] [--profile] [--emulated]\n"
		   "  --config FILE  the shapes of the random model and vision tower (a config.json;\n"
		   "                 default " DEFAULT_CONFIG ")\n"
		   "  --prompt N     prefill tokens (default 2048; 16 with --emulated)\n"
		   "  --decode N     decode steps (default 128; 4 with --emulated)\n"
		   "  --precision P  bf16 (default) or fp32: the activations' (and plain weights')\n"
		   "  --weights W    the linear layers' format: bf16 (default), q8, q4 or fp8\n"
		   "                 (quantized at load; fp8 on sm_89 or newer)\n"
		   "  --profile      list the device's kernels and GEMM calls after the run\n"
		   "  --emulated     run on the CPU emulation of an emulated build, at tiny sizes\n"
		   "                 (default --config " EMU_CONFIG ")\n");
}

int bench_gpu_main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"prompt", required_argument, NULL, 'p'},
		{"decode", required_argument, NULL, 'd'},
		{"precision", required_argument, NULL, 'P'},
		{"weights", required_argument, NULL, 'W'},
		{"profile", no_argument, NULL, 'f'},
		{"config", required_argument, NULL, 'c'},
		{"emulated", no_argument, NULL, 'e'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	int n_prompt = 0, n_decode = 0;
	bool profile = false, emulated = false;
	const char *config = NULL;
	struct engine_backend_options bopts = {.kind = ENGINE_BACKEND_CUDA,
					       .precision = ENGINE_PRECISION_BF16,
					       .weights = ENGINE_WEIGHTS_BF16};
	const char *env_precision = getenv("HOLOD_PRECISION");
	if (env_precision && *env_precision && engine_precision_parse(env_precision, &bopts.precision) < 0) {
		fprintf(stderr, "holo-bench gpu: HOLOD_PRECISION=%s: expected bf16 or fp32\n", env_precision);
		return 2;
	}
	optind = 1;
	for (int c; (c = getopt_long(argc, argv, "h", opts, NULL)) != -1;) {
		char *end = NULL;
		switch (c) {
		case 'p':
			n_prompt = (int)strtol(optarg, &end, 10);
			if (*end || n_prompt < 1 || n_prompt > 65536)
				goto usage;
			break;
		case 'd':
			n_decode = (int)strtol(optarg, &end, 10);
			if (*end || n_decode < 1 || n_decode > 65536)
				goto usage;
			break;
		case 'P':
			if (engine_precision_parse(optarg, &bopts.precision) < 0)
				goto usage;
			break;
		case 'W':
			if (engine_weights_parse(optarg, &bopts.weights) < 0 ||
			    bopts.weights == ENGINE_WEIGHTS_DEFAULT) {
				fprintf(stderr, "holo-bench gpu: --weights %s: expected bf16, q8, q4 or fp8\n",
					optarg);
				return 2;
			}
			break;
		case 'f':
			profile = true;
			break;
		case 'c':
			config = optarg;
			break;
		case 'e':
			emulated = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			goto usage;
		}
	}
	if (optind != argc)
		goto usage;
	if (emulated && !gpu_devices_emulated()) {
		fprintf(stderr, "holo-bench gpu: --emulated: this build runs the CUDA runtime, not the "
				"emulation (-Dcuda-emulation=true)\n");
		return 2;
	}
	if (gpu_devices_emulated() && !emulated) {
		printf("holo-bench gpu: this build's CUDA device is the CPU emulation, not a device: "
		       "nothing to measure (--emulated runs the steps there at tiny sizes)\n");
		return BENCH_SKIP;
	}
	if (gpu_device_count() == 0) {
		printf("holo-bench gpu: no CUDA device\n");
		return BENCH_SKIP;
	}
	if (!config)
		config = emulated ? EMU_CONFIG : DEFAULT_CONFIG;
	if (!n_prompt)
		n_prompt = emulated ? 16 : 2048;
	if (!n_decode)
		n_decode = emulated ? 4 : 128;

	int ret = 1;
	char err[512] = "";
	struct bench_shapes sh;
	struct gpu_device_info di;
	struct gpu_context *g = NULL;
	struct engine_model *m = NULL;
	struct engine_backend *b = NULL;
	struct engine_session *s = NULL;
	struct engine_vision *v = NULL;
	struct engine_image *img = NULL;
	int32_t *tok = NULL;
	float *logits = NULL;
	double bw = 0, flops = 0, flops_fp8 = 0;
	if (bench_shapes_read(config, &sh, err, sizeof(err)) < 0) {
		fprintf(stderr, "holo-bench gpu: %s\n", err);
		return 1;
	}
	if (gpu_device_info(0, &di) < 0 || !(g = gpu_context_create(0))) {
		fprintf(stderr, "holo-bench gpu: cannot open CUDA device 0\n");
		goto out;
	}
	int gemm_n = emulated ? EMU_GEMM_N : GEMM_N;
	int sm = di.compute_major * 10 + di.compute_minor;
	const bool fp8 = bopts.weights == ENGINE_WEIGHTS_FP8;
	printf("device: %s, sm_%d, %zu MiB, %d SMs%s\n", di.name, sm, di.total_memory >> 20,
	       di.multiprocessors,
	       emulated ? " (the CPU emulation: figures of the emulation, not of a GPU)" : "");
	/* as the backend refuses it (backend_cuda.c), before anything is measured */
	if (fp8 && sm < 89) {
		fprintf(stderr,
			"holo-bench gpu: --weights fp8 needs a GPU with FP8 tensor cores, compute "
			"capability 8.9 or newer (sm_89: Ada, sm_90: Hopper), but CUDA device 0 (%s) is "
			"sm_%d: measure --weights q8 or q4 there\n",
			di.name, sm);
		goto out;
	}
	if (bench_gpu_copy_rate(g, emulated ? EMU_COPY_BYTES : COPY_BYTES,
				emulated ? EMU_COPY_ROUNDS : COPY_ROUNDS, &bw) < 0 ||
	    bench_gpu_gemm_rate(g, gemm_n, gemm_n, gemm_n, emulated ? 1 : GEMM_ROUNDS, &flops) < 0) {
		fprintf(stderr, "holo-bench gpu: the copy or GEMM measurement failed on the device\n");
		goto out;
	}
	if (fp8 &&
	    bench_gpu_gemm_fp8_rate(g, gemm_n, gemm_n, gemm_n, emulated ? 1 : GEMM_ROUNDS, &flops_fp8) < 0) {
		fprintf(stderr, "holo-bench gpu: the FP8 GEMM measurement failed on the device\n");
		goto out;
	}
	gpu_context_destroy(g);
	g = NULL;
	printf("device copy bandwidth: %.1f GB/s\ncuBLASLt bf16 GEMM (%d^3): %.1f TFLOP/s\n", bw / 1e9,
	       gemm_n, flops / 1e12);
	bench_figure("gpu.copy", bw / 1e9, "GB/s", NULL, 0);
	bench_figure("gpu.gemm", flops / 1e12, "TFLOP/s", NULL, 0);
	if (fp8) {
		printf("cuBLASLt FP8 GEMM (%d^3, e4m3 x e4m3, fp32 sums): %.1f TFLOP/s = %.2fx bf16's\n",
		       gemm_n, flops_fp8 / 1e12, flops_fp8 / flops);
		bench_figure("gpu.gemm_fp8", flops_fp8 / 1e12, "TFLOP/s", NULL, 0);
	}

	struct lm_random_spec sp;
	bench_shapes_lm_spec(&sh, &sp);
	double tb = now_s();
	m = lm_random_model_create(&sp);
	double built = now_s() - tb;
	b = m ? engine_backend_create(m, &bopts, err, sizeof(err)) : NULL;
	if (!b) {
		fprintf(stderr, "holo-bench gpu: %s\n", m ? err : "out of memory for the model");
		goto out;
	}
	if (profile && engine_backend_profile(b, true) < 0) {
		fprintf(stderr, "holo-bench gpu: cannot profile the device\n");
		goto out;
	}
	s = engine_session_create_on(b, n_prompt + n_decode + 1);
	tok = malloc(sizeof(*tok) * (size_t)(n_prompt + n_decode));
	logits = malloc(sizeof(float) * (size_t)m->cfg.vocab);
	if (!s || !tok || !logits) {
		fprintf(stderr, "holo-bench gpu: out of memory for the session\n");
		goto out;
	}
	for (int i = 0; i < n_prompt + n_decode; i++)
		tok[i] = (int32_t)((i * 7919u + 17u) % (unsigned)m->cfg.vocab);
	double t_prefill, t_decode;
	int r = run_lm(s, tok, n_prompt, n_decode, logits, &t_prefill, &t_decode); /* warm-up */
	if (r >= 0)
		r = run_lm(s, tok, n_prompt, n_decode, logits, &t_prefill, &t_decode);
	if (r < 0) {
		fprintf(stderr, "holo-bench gpu: the forward failed: %s\n", strerror(-r));
		goto out;
	}
	struct engine_backend_info info;
	engine_backend_get_info(b, &info);
	if (!info.has_plan) {
		fprintf(stderr, "holo-bench gpu: the backend has no memory plan to count its weights by\n");
		goto out;
	}
	/* the figures' format: the weights', or the precision's for plain weights */
	char fmt[32];
	if (bopts.weights == ENGINE_WEIGHTS_BF16)
		snprintf(fmt, sizeof(fmt), "%s", engine_precision_name(info.precision));
	else
		snprintf(fmt, sizeof(fmt), "%s%s", info.plan.weights,
			 info.precision == ENGINE_PRECISION_FP32 ? "-fp32" : "");
	size_t params = matrix_params(m);
	double wbytes = decode_bytes(&info.plan);
	/* the prefill's products: cuBLASLt's FP8 matmul for fp8 weights in bf16 precision, the
	 * bf16 (or fp32) GEMM otherwise, q8/q4 after dequantizing slices for it */
	const bool fp8_gemm = fp8 && info.precision == ENGINE_PRECISION_BF16;
	double prefill = n_prompt / t_prefill, decode = n_decode / t_decode;
	double prefill_ceiling = (fp8_gemm ? flops_fp8 : flops) / (2.0 * (double)params),
	       roofline = bw / wbytes;
	char name[96];
	printf("model: random, %.2f%s matrix parameters per token, weights %s, %s activations, the "
	       "shapes of %s (built in %.1f s)\n",
	       params >= 1000000000 ? (double)params / 1e9 : (double)params / 1e6,
	       params >= 1000000000 ? "B" : "M", info.plan.weights, engine_precision_name(info.precision),
	       config, built);
	printf("weights read per decode token: %.1f MB (the memory plan: layers %.1f MB in %s, lm_head "
	       "%.1f MB, norms, conv and vectors %.1f MB)\n",
	       wbytes / 1e6, (double)info.plan.layers / 1e6, info.plan.weights,
	       (double)(info.plan.head ? info.plan.head : info.plan.embeddings) / 1e6,
	       (double)info.plan.other / 1e6);
	printf("prefill: %d tokens, %.0f tok/s = %.1f%% of the %sGEMM rate (%.0f tok/s) [goal >= 60%%]\n",
	       n_prompt, prefill, 100.0 * prefill / prefill_ceiling, fp8_gemm ? "FP8 " : "", prefill_ceiling);
	printf("decode: %d tokens, %.1f tok/s = %.1f%% of the roofline (%.1f tok/s at %.1f MB per "
	       "token) [goal >= 85%%]\n",
	       n_decode, decode, 100.0 * decode / roofline, roofline, wbytes / 1e6);
	printf("state: %zu bytes per session at %d tokens\n", engine_session_state_bytes(s),
	       n_prompt + n_decode);
	snprintf(name, sizeof(name), "gpu.%s.prefill", fmt);
	bench_figure(name, prefill, "tok/s", NULL, 0);
	snprintf(name, sizeof(name), "gpu.%s.prefill_of_gemm", fmt);
	bench_figure(name, 100.0 * prefill / prefill_ceiling, "%", ">=", 60);
	snprintf(name, sizeof(name), "gpu.%s.decode", fmt);
	bench_figure(name, decode, "tok/s", NULL, 0);
	snprintf(name, sizeof(name), "gpu.%s.decode_bytes", fmt);
	bench_figure(name, wbytes / 1e6, "MB", NULL, 0);
	snprintf(name, sizeof(name), "gpu.%s.decode_of_roofline", fmt);
	bench_figure(name, 100.0 * decode / roofline, "%", ">=", 85);
	snprintf(name, sizeof(name), "gpu.%s.state", fmt);
	bench_figure(name, (double)engine_session_state_bytes(s) / (1 << 20), "MiB", NULL, 0);

	if (!sh.has_vision || sh.pos_grid < 1) {
		printf("vision: not measured: %s has no vision tower holo-bench can build (%s)\n", config,
		       sh.has_vision ? "no vision_config.args.cpe_max_size" : sh.vision_err);
	} else {
		struct lm_random_vision_spec vs;
		bench_shapes_vision_spec(&sh, &vs);
		int tiles = 0;
		double t_vision = 0;
		if (!(v = lm_random_vision_create(m, &vs, err, sizeof(err)))) {
			fprintf(stderr, "holo-bench gpu: random vision tower: %s\n", err);
			goto out;
		}
		if (!(img = bench_synthetic_screen(SCREEN_W, SCREEN_H))) {
			fprintf(stderr, "holo-bench gpu: out of memory for the screenshot\n");
			goto out;
		}
		if ((r = run_vision(b, v, img, &tiles, &t_vision)) < 0) {
			fprintf(stderr, "holo-bench gpu: the vision encode failed: %s\n", strerror(-r));
			goto out;
		}
		double per_tile = t_vision / tiles;
		double roof = roofline_tile_flops(&sh.vit, m->cfg.hidden) / flops;
		printf("vision: random ViT of width %d, %d blocks, MLP %d, %d-px tiles: a %dx%d "
		       "screenshot = %d tiles in %.2f ms: %.2f ms/tile = %.1f%% of the GEMM rate "
		       "(%.2f ms/tile)\n",
		       sh.vit.width, sh.vit.depth, sh.vit.mlp, sh.vit.tile, SCREEN_W, SCREEN_H, tiles,
		       t_vision * 1e3, per_tile * 1e3, 100.0 * roof / per_tile, roof * 1e3);
		snprintf(name, sizeof(name), "gpu.%s.vision", fmt);
		bench_figure(name, per_tile * 1e3, "ms/tile", NULL, 0);
		snprintf(name, sizeof(name), "gpu.%s.vision_of_gemm", fmt);
		bench_figure(name, 100.0 * roof / per_tile, "%", NULL, 0);
	}
	if (profile) {
		char **lines = NULL;
		int n = engine_backend_profile_report(b, &lines);
		for (int i = 0; i < n; i++)
			printf("%s\n", lines[i]);
		engine_backend_profile_free(lines);
		if (n <= 0) {
			fprintf(stderr, "holo-bench gpu: --profile: nothing ran on the CUDA device\n");
			goto out;
		}
	}
	ret = 0;
out:
	free(tok);
	free(logits);
	engine_image_destroy(img);
	engine_session_destroy(s);
	engine_backend_destroy(b);
	engine_vision_destroy(v);
	if (m)
		lm_random_model_destroy(m);
	gpu_context_destroy(g);
	return ret;
usage:
	usage(stderr);
	return 2;
}
