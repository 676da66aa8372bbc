/* holo-bench gpu: the language model on a CUDA device against two ceilings measured in the same
 * run on the same device:
 *  - decode tok/s as a fraction of the roofline: device copy bandwidth (bytes read + written per
 *    second by a device-to-device copy) / weight bytes read per token (every matrix but the
 *    embedding table, whose one row per token is negligible, unless it is the tied lm_head);
 *  - prefill tok/s as a fraction of the cuBLASLt bf16 GEMM rate (gpu_gemm, fp32 accumulation) of
 *    a large square problem, converted to tokens with 2 flops per matrix parameter per token
 *    (attention's own O(n^2) work is left out, which flatters prefill slightly at long prompts);
 *  - state bytes per session after the run.
 * Goals printed beside: decode >= 85% of the roofline, prefill >= 60% of the GEMM rate.
 *
 *   holo-bench gpu [--prompt N] [--decode N] [--precision bf16|fp32] [--profile]
 *
 * The model is random (the engine benchmark's ~0.7B bf16 Nemotron-H). Without a device, and in
 * the emulated build (whose device is the CPU), it says so and exits 77.
 */
#include <errno.h>
#include <getopt.h>
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

#define BENCH_SKIP 77
#define COPY_BYTES ((size_t)1 << 30)
#define COPY_ROUNDS 10
#define GEMM_N 8192
#define GEMM_ROUNDS 10

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

static size_t elems(const struct tensor *t)
{
	size_t n = t->data ? 1 : 0;
	for (int i = 0; i < t->ndim; i++)
		n *= (size_t)t->shape[i];
	return n;
}

/* Matrix parameters a token multiplies (every layer's projections and the lm_head). */
static size_t matrix_params(const struct engine_model *m)
{
	size_t n = elems(&m->lm_head);
	for (int l = 0; l < m->cfg.n_layers; l++) {
		const struct lm_layer *L = &m->layers[l];
		n += elems(&L->mamba.in_proj) + elems(&L->mamba.out_proj) + elems(&L->attn.q) +
		     elems(&L->attn.k) + elems(&L->attn.v) + elems(&L->attn.o) + elems(&L->mlp.up) +
		     elems(&L->mlp.down);
	}
	return n;
}

int bench_gpu_main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"prompt", required_argument, NULL, 'p'}, {"decode", required_argument, NULL, 'd'},
		{"precision", required_argument, NULL, 'P'}, {"profile", no_argument, NULL, 'f'},
		{"help", no_argument, NULL, 'h'}, {0},
	};
	int n_prompt = 2048, n_decode = 128;
	bool profile = false;
	struct engine_backend_options bopts = {.kind = ENGINE_BACKEND_CUDA,
					       .precision = ENGINE_PRECISION_BF16};
	const char *env_precision = getenv("HOLOD_PRECISION");
	if (env_precision && *env_precision &&
	    engine_precision_parse(env_precision, &bopts.precision) < 0) {
		fprintf(stderr, "holo-bench gpu: HOLOD_PRECISION=%s: expected bf16 or fp32\n",
			env_precision);
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
		case 'f':
			profile = true;
			break;
		case 'h':
			printf("usage: holo-bench gpu [--prompt N] [--decode N] [--precision bf16|fp32] "
			       "[--profile]\n");
			return 0;
		default:
			goto usage;
		}
	}
	if (optind != argc)
		goto usage;
	if (gpu_devices_emulated()) {
		printf("holo-bench gpu: this build's CUDA device is the CPU emulation, not a device: "
		       "nothing to measure\n");
		return BENCH_SKIP;
	}
	if (gpu_device_count() == 0) {
		printf("holo-bench gpu: no CUDA device\n");
		return BENCH_SKIP;
	}

	int ret = 1;
	struct gpu_device_info di;
	struct gpu_context *g = NULL;
	struct engine_model *m = NULL;
	struct engine_backend *b = NULL;
	struct engine_session *s = NULL;
	int32_t *tok = NULL;
	float *logits = NULL;
	double bw = 0, flops = 0;
	if (gpu_device_info(0, &di) < 0 || !(g = gpu_context_create(0))) {
		fprintf(stderr, "holo-bench gpu: cannot open CUDA device 0\n");
		goto out;
	}
	printf("device: %s, %zu MiB, %d SMs\n", di.name, di.total_memory >> 20, di.multiprocessors);
	if (bench_gpu_copy_rate(g, COPY_BYTES, COPY_ROUNDS, &bw) < 0 ||
	    bench_gpu_gemm_rate(g, GEMM_N, GEMM_N, GEMM_N, GEMM_ROUNDS, &flops) < 0) {
		fprintf(stderr, "holo-bench gpu: the copy or GEMM measurement failed on the device\n");
		goto out;
	}
	gpu_context_destroy(g);
	g = NULL;
	printf("device copy bandwidth: %.1f GB/s\ncuBLASLt bf16 GEMM (%d^3): %.1f TFLOP/s\n", bw / 1e9,
	       GEMM_N, flops / 1e12);

	struct lm_random_spec sp = {
		.pattern = "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-",
		.hidden = 1024, .vocab = 131072, .intermediate = 5120,
		.n_heads = 8, .n_kv_heads = 2, .head_dim = 128,
		.m_heads = 32, .m_head_dim = 64, .m_groups = 8, .m_state = 128,
		.m_conv_kernel = 4, .m_chunk = 128, .dtype = TENSOR_BF16, .seed = 1,
	};
	m = lm_random_model_create(&sp);
	char err[512] = "";
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
	double t0 = now_s();
	int r = engine_session_append(s, tok, NULL, (size_t)n_prompt, ENGINE_LOGITS_LAST, logits);
	double t1 = now_s();
	for (int i = 0; i < n_decode && r >= 0; i++)
		r = engine_session_decode(s, tok[n_prompt + i], logits);
	double t2 = now_s();
	if (r < 0) {
		fprintf(stderr, "holo-bench gpu: the forward failed: %s\n", strerror(-r));
		goto out;
	}
	struct engine_backend_info info;
	engine_backend_get_info(b, &info);
	size_t params = matrix_params(m);
	size_t wbytes = params * (info.precision == ENGINE_PRECISION_BF16 ? 2 : 4);
	double prefill = n_prompt / (t1 - t0), decode = n_decode / (t2 - t1);
	double prefill_ceiling = flops / (2.0 * (double)params), roofline = bw / (double)wbytes;
	printf("model: random %.2fB parameters (%zu matrix parameters per token), %s\n",
	       (double)info.weight_bytes / (info.precision == ENGINE_PRECISION_BF16 ? 2e9 : 4e9),
	       params, engine_precision_name(info.precision));
	printf("prefill: %d tokens, %.0f tok/s = %.1f%% of the GEMM rate (%.0f tok/s) [goal >= 60%%]\n",
	       n_prompt, prefill, 100.0 * prefill / prefill_ceiling, prefill_ceiling);
	printf("decode: %d tokens, %.1f tok/s = %.1f%% of the roofline (%.1f tok/s at %.1f MB per "
	       "token) [goal >= 85%%]\n",
	       n_decode, decode, 100.0 * decode / roofline, roofline, (double)wbytes / 1e6);
	printf("state: %zu bytes per session at %d tokens\n", engine_session_state_bytes(s),
	       n_prompt + n_decode);
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
	engine_session_destroy(s);
	engine_backend_destroy(b);
	if (m)
		lm_random_model_destroy(m);
	gpu_context_destroy(g);
	return ret;
usage:
	fprintf(stderr, "usage: holo-bench gpu [--prompt N] [--decode N] [--precision bf16|fp32] "
			"[--profile]\n");
	return 2;
}
