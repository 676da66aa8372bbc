/* holo-bench quant-error: how far each weight format moves a model's logits, beside GGML's Q8_0
 * and Q4_0 on the same weights (issue 28's accuracy report, docs/quantization.md).
 *
 *   holo-bench quant-error [--model DIR | --random-config FILE [--pattern P]] [--tokens N]
 *                          [--decode N] [--seed N] [--threads N] [--no-head]
 *
 * One token sequence (seeded random ids: --tokens positions of prefill, then --decode steps of
 * one token, every position's logits kept) runs through the model on CPU backends that differ
 * only in the weights and precision (the prefill's products run on the quantized matrices
 * dequantized, the decode steps' on the decode GEMV kernels, which in bf16 precision quantize
 * the activations too):
 *   - the reference: the weights as stored, fp32 precision (run twice: the first row compares
 *     the second run to the first, which must be exact);
 *   - the weights as stored in bf16 precision (what bf16 precision alone costs);
 *   - each quantized format engine_weights_name() lists (everything but default and bf16: q8,
 *     q4, and whatever is added), in fp32 precision (the weights dequantized exactly, fp32 sums:
 *     the format's own error) and bf16 precision (the kernels users run);
 *   - GGML's Q8_0 and Q4_0 (ggml_ref.c) applied to the same matrices, in both precisions: they
 *     are written as q8 records (lm_quant_hooks.quantize_row; Q4_0's codes q - 8 in [-8, 7]),
 *     which dequantize to GGML's values exactly, so they run through the same forward and the
 *     q8 kernels;
 *   - with the lm_head quantized too (lm_quant_hooks.head: the logits products on the quantized
 *     head), in both precisions, each format and its GGML counterpart (--no-head: not run); for
 *     q8 and q4 in bf16 precision that is what --weights q8|q4 run.
 * Each backend quantizes from the model's tensors (the map, or the random model's memory) and is
 * destroyed before the next: the model is never held twice.
 *
 * Per row, against the reference's logits: the mean and least cosine of a position's logits,
 * NMSE (sum of squared differences over the sum of the reference's squares, every position),
 * the mean KL(reference || row) of the softmaxes, the rate at which the largest logit is the
 * same token, and for our formats the ratio of NMSE and of KL to the GGML format of the same
 * code bits (8: Q8_0, 4: Q4_0) in the same precision and lm_head. Beside them the quantized
 * matrices' own error, w_nmse (sum of squared weight errors over the sum of squared weights,
 * summed by the rows' quantizer, lm_quant_hooks: our formats through the reference quantizers
 * on the same fp32 values, GGML's through ggml_ref_row; "-" where the format's matrices are
 * not quantized row by row, as fp8's, whose lm_head alone is), and its ratio to GGML's. The goal
 * lines say whether issue 28's goals hold in fp32 precision: each block-scaled format (q8, q4:
 * GGML's class) no less accurate than the GGML format of its bits (both logits ratios <= 1;
 * where only the weights' is, the line says so), fp8's least row cosine >= 0.999.
 *
 * --random-config FILE: random bf16 weights (seed --seed) of FILE's language-model shapes
 * (shapes.c; tools/bench/holotron-12b-config.json: hidden 5120, MLP 20480, 128 Mamba heads of
 * 80, 40/8 attention heads of 128, vocab 131072) with the layer pattern P (default "M-M*-": two
 * Mamba, two MLP and one attention layer, the 12B's first five).
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "bench.h"
#include "common.h"
#include "engine.h"
#include "ggml_ref.h"
#include "lm.h"
#include "model.h"
#include "quant.h"
#include "shapes.h"

#define QE_MAX_TOKENS 4096		      /* --tokens */
#define QE_MAX_DECODE 1024		      /* --decode */
#define QE_MAX_PATTERN 64		      /* --pattern's layers */
#define QE_MAX_LOGITS_BYTES ((size_t)1 << 30) /* one run's logits: tokens x vocab x 4 */
#define QE_MAX_ROWS 64
#define QE_DEFAULT_PATTERN "M-M*-"

struct metrics {
	double cos_mean, cos_min, nmse, kl, top1;
	bool finite;
};

/* The quantized matrices' own error, summed by the rows' quantizer (lm_quant_hooks.arg) */
struct weight_error {
	pthread_mutex_t lock;
	bool ggml;
	enum quant_format ggml_format; /* GGML's of these bits: QUANT_Q8 Q8_0, QUANT_Q4 Q4_0 */
	double e2, w2;		       /* sum (dequantized - w)^2, sum w^2 */
};

struct variant {
	char name[16]; /* "stored", "q8", "Q8_0" */
	bool ggml;     /* GGML's format (ggml_ref_row) */
	enum engine_weights weights;
	enum engine_precision precision;
	int head;    /* -1 or the enum quant_format of the lm_head */
	int bits;    /* code bits (8, 4), 0 unknown */
	bool blocks; /* scaled per block of 32 (q8, q4: GGML's class), not per row (fp8) */
	bool ran;
	char err[256];
	double seconds;
	struct metrics m;
	double w_nmse; /* of the quantized matrices, -1 for none */
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: holo-bench quant-error [--model DIR | --random-config FILE [--pattern P]]\n"
		"                              [--tokens N] [--decode N] [--seed N] [--threads N]\n"
		"                              [--no-head]\n"
		"  --model DIR           a checkpoint directory\n"
		"  --random-config FILE  random bf16 weights of a config.json's shapes instead, e.g.\n"
		"                        tools/bench/holotron-12b-config.json\n"
		"  --pattern P           the random model's layers, M (Mamba) * (attention) - (MLP),\n"
		"                        at most %d (default %s)\n"
		"  --tokens N            positions of the prefill, 1..%d (default 256)\n"
		"  --decode N            decode steps after it, 0..%d (default 16)\n"
		"  --seed N              the token ids' seed and the random weights' (default 1)\n"
		"  --threads N           CPU threads (default: $HOLOD_THREADS or every CPU)\n"
		"  --no-head             skip the runs with the lm_head quantized too\n",
		QE_MAX_PATTERN, QE_DEFAULT_PATTERN, QE_MAX_TOKENS, QE_MAX_DECODE);
}

static int parse_long(const char *s, long lo, long hi, long *ret)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return -EINVAL;
	*ret = v;
	return 0;
}

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* log-sum-exp of a row, in double */
static double lse(const float *x, int V)
{
	double mx = x[0];
	for (int i = 1; i < V; i++)
		mx = x[i] > mx ? x[i] : mx;
	double s = 0;
	for (int i = 0; i < V; i++)
		s += exp((double)x[i] - mx);
	return mx + log(s);
}

static int argmax(const float *x, int V)
{
	int best = 0;
	for (int i = 1; i < V; i++)
		if (x[i] > x[best])
			best = i;
	return best;
}

static void compare(const float *ref, const float *x, int T, int V, struct metrics *m)
{
	double err2 = 0, ref2 = 0, cos_sum = 0, kl_sum = 0;
	int agree = 0;
	*m = (struct metrics){.cos_min = 1, .finite = true};
	for (size_t i = 0; i < (size_t)T * V; i++)
		if (!isfinite(x[i])) {
			m->finite = false;
			return;
		}
	for (int t = 0; t < T; t++) {
		const float *r = ref + (size_t)t * V, *q = x + (size_t)t * V;
		double dot = 0, nr = 0, nq = 0, e2 = 0;
		for (int i = 0; i < V; i++) {
			double a = r[i], b = q[i];
			dot += a * b;
			nr += a * a;
			nq += b * b;
			e2 += (b - a) * (b - a);
		}
		double c = nr > 0 && nq > 0 ? dot / sqrt(nr * nq) : (nr == nq ? 1.0 : 0.0);
		cos_sum += c;
		m->cos_min = c < m->cos_min ? c : m->cos_min;
		err2 += e2;
		ref2 += nr;
		double lr = lse(r, V), lq = lse(q, V), kl = 0;
		for (int i = 0; i < V; i++) {
			double a = (double)r[i] - lr;
			kl += exp(a) * (a - ((double)q[i] - lq));
		}
		kl_sum += kl;
		agree += argmax(r, V) == argmax(q, V);
	}
	m->cos_mean = cos_sum / T;
	m->nmse = ref2 > 0 ? err2 / ref2 : (err2 > 0 ? INFINITY : 0);
	m->kl = kl_sum / T;
	m->top1 = (double)agree / T;
}

/* lm_quant_hooks.quantize_row: the reference quantizer of f (as the backend's, on the same fp32
 * values: bf16 weights widen exactly) or GGML's, and the row's squared error */
static int measured_row(void *arg, enum quant_format f, const float *w, int64_t cols, void *row)
{
	struct weight_error *we = arg;
	int r = we->ggml ? ggml_ref_row(we->ggml_format, w, cols, row) : quant_row_from_f32(f, w, cols, row);
	float *out = r == 0 ? malloc((size_t)cols * sizeof(float)) : NULL;
	if (r < 0 || !out)
		return r < 0 ? r : -ENOMEM;
	quant_row_to_f32(f, row, cols, out);
	double e2 = 0, w2 = 0;
	for (int64_t i = 0; i < cols; i++) {
		double e = (double)out[i] - w[i];
		e2 += e * e;
		w2 += (double)w[i] * w[i];
	}
	free(out);
	pthread_mutex_lock(&we->lock);
	we->e2 += e2;
	we->w2 += w2;
	pthread_mutex_unlock(&we->lock);
	return 0;
}

/* One run of the token sequence on a backend of variant v: T positions of prefill, then D
 * decode steps of one token; logits [T + D][V]. */
static int run(const struct engine_model *m, struct variant *v, const int32_t *tokens, int T, int D, int V,
	       float *logits)
{
	struct engine_backend_options o = {.kind = ENGINE_BACKEND_CPU,
					   .precision = v->precision,
					   .weights = v->weights,
					   .ssm_state = ENGINE_PRECISION_FP32};
	struct weight_error we = {.lock = PTHREAD_MUTEX_INITIALIZER,
				  .ggml = v->ggml,
				  .ggml_format = v->bits == 4 ? QUANT_Q4 : QUANT_Q8};
	struct lm_quant_hooks h = {.quantize_row = measured_row, .arg = &we, .head = v->head};
	double t0 = now_s();
	v->err[0] = 0;
	struct engine_backend *b = backend_cpu_create_hooked(m, &o, &h, v->err, sizeof(v->err));
	if (!b) {
		if (!v->err[0])
			snprintf(v->err, sizeof(v->err), "%s", strerror(errno));
		return -1;
	}
	struct engine_session *s = engine_session_create_on(b, T + D);
	int r = s ? engine_session_append(s, tokens, NULL, (size_t)T, ENGINE_LOGITS_ALL, logits) : -errno;
	for (int i = 0; r == 0 && i < D; i++)
		r = engine_session_append(s, tokens + T + i, NULL, 1, ENGINE_LOGITS_LAST,
					  logits + (size_t)(T + i) * V);
	if (r < 0)
		snprintf(v->err, sizeof(v->err), "the forward failed: %s", strerror(-r));
	engine_session_destroy(s);
	engine_backend_destroy(b);
	v->seconds = now_s() - t0;
	v->w_nmse = we.w2 > 0 ? we.e2 / we.w2 : -1;
	return r < 0 ? -1 : 0;
}

static const char *head_name(const struct variant *v)
{
	const struct quant_format_desc *d =
		v->head >= 0 ? quant_format_desc((enum quant_format)v->head) : NULL;
	return !d ? "stored" : v->ggml ? (v->bits == 8 ? "Q8_0" : "Q4_0") : d->name;
}

/* The GGML row of v's bits in v's precision and lm_head setting, or NULL. */
static const struct variant *partner(const struct variant *rows, int n, const struct variant *v)
{
	if (v->ggml || !v->bits)
		return NULL;
	for (int i = 0; i < n; i++)
		if (rows[i].ggml && rows[i].bits == v->bits && rows[i].precision == v->precision &&
		    (rows[i].head >= 0) == (v->head >= 0))
			return &rows[i];
	return NULL;
}

static void add(struct variant *rows, int *n, const char *name, bool ggml, enum engine_weights w,
		enum engine_precision p, int head, int bits, bool blocks)
{
	if (*n >= QE_MAX_ROWS)
		return;
	struct variant *v = &rows[(*n)++];
	*v = (struct variant){.ggml = ggml,
			      .weights = w,
			      .precision = p,
			      .head = head,
			      .bits = bits,
			      .blocks = blocks};
	snprintf(v->name, sizeof(v->name), "%s", name);
}

/* Every run's row, in order: the rerun of the reference, bf16 precision, GGML's formats, then
 * each of ours (whose ratios need GGML's rows). */
static int plan(struct variant *rows, bool with_head)
{
	int n = 0;
	add(rows, &n, "stored", false, ENGINE_WEIGHTS_DEFAULT, ENGINE_PRECISION_FP32, -1, 0, false);
	add(rows, &n, "stored", false, ENGINE_WEIGHTS_DEFAULT, ENGINE_PRECISION_BF16, -1, 0, false);
	for (int g = 0; g < 2; g++) {
		/* both in q8 records (ggml_ref.h) */
		const char *name = g ? "Q4_0" : "Q8_0";
		enum engine_weights w = ENGINE_WEIGHTS_Q8;
		int qf = QUANT_Q8, bits = g ? 4 : 8;
		add(rows, &n, name, true, w, ENGINE_PRECISION_FP32, -1, bits, true);
		add(rows, &n, name, true, w, ENGINE_PRECISION_BF16, -1, bits, true);
		if (with_head) {
			add(rows, &n, name, true, w, ENGINE_PRECISION_FP32, qf, bits, true);
			add(rows, &n, name, true, w, ENGINE_PRECISION_BF16, qf, bits, true);
		}
	}
	/* the formats this build knows, found by name */
	for (int i = 0; i < 64; i++) {
		const char *name = engine_weights_name((enum engine_weights)i);
		enum engine_weights w;
		if (!name || strcmp(name, "unknown") == 0)
			break;
		if (engine_weights_parse(name, &w) < 0 || w == ENGINE_WEIGHTS_DEFAULT ||
		    w == ENGINE_WEIGHTS_BF16)
			continue;
		enum quant_format qf;
		const struct quant_format_desc *d =
			quant_format_parse(name, &qf) == 0 ? quant_format_desc(qf) : NULL;
		int bits = d ? d->code_bytes * 8 / d->block : 0;
		bool blocks = d && d->scale_bytes > 0;
		add(rows, &n, name, false, w, ENGINE_PRECISION_FP32, -1, bits, blocks);
		add(rows, &n, name, false, w, ENGINE_PRECISION_BF16, -1, bits, blocks);
		if (with_head && d) {
			add(rows, &n, name, false, w, ENGINE_PRECISION_FP32, (int)qf, bits, blocks);
			add(rows, &n, name, false, w, ENGINE_PRECISION_BF16, (int)qf, bits, blocks);
		}
	}
	return n;
}

static void print_ratio(double ours, double ggml)
{
	if (ggml > 0)
		printf("  %9.4f", ours / ggml);
	else
		printf("  %9s", ours > 0 ? "inf" : "1");
}

int bench_quant_error_main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"model", required_argument, NULL, 'm'},   {"random-config", required_argument, NULL, 'r'},
		{"pattern", required_argument, NULL, 'p'}, {"tokens", required_argument, NULL, 'T'},
		{"decode", required_argument, NULL, 'D'},  {"seed", required_argument, NULL, 's'},
		{"threads", required_argument, NULL, 't'}, {"no-head", no_argument, NULL, 'H'},
		{"help", no_argument, NULL, 'h'},	   {NULL, 0, NULL, 0},
	};
	const char *model_dir = NULL, *config = NULL, *pattern = NULL;
	long T = 256, D = 16, seed = 1, threads = 0;
	bool with_head = true;
	opterr = 0;
	optind = 1;
	for (int c; (c = getopt_long(argc, argv, "h", opts, NULL)) != -1;) {
		switch (c) {
		case 'm':
			model_dir = optarg;
			break;
		case 'r':
			config = optarg;
			break;
		case 'p':
			pattern = optarg;
			break;
		case 'T':
			if (parse_long(optarg, 1, QE_MAX_TOKENS, &T) < 0) {
				fprintf(stderr,
					"holo-bench quant-error: --tokens '%s' is not a count from "
					"1 to %d\n",
					optarg, QE_MAX_TOKENS);
				return 2;
			}
			break;
		case 'D':
			if (parse_long(optarg, 0, QE_MAX_DECODE, &D) < 0) {
				fprintf(stderr,
					"holo-bench quant-error: --decode '%s' is not a count from "
					"0 to %d\n",
					optarg, QE_MAX_DECODE);
				return 2;
			}
			break;
		case 's':
			if (parse_long(optarg, 0, INT32_MAX, &seed) < 0) {
				fprintf(stderr,
					"holo-bench quant-error: --seed '%s' is not a number from "
					"0 to %d\n",
					optarg, INT32_MAX);
				return 2;
			}
			break;
		case 't':
			if (parse_long(optarg, 1, 1024, &threads) < 0) {
				fprintf(stderr,
					"holo-bench quant-error: --threads '%s' is not a count from "
					"1 to 1024\n",
					optarg);
				return 2;
			}
			break;
		case 'H':
			with_head = false;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			fprintf(stderr, "holo-bench quant-error: unknown option or missing value: '%s'\n",
				argv[optind - 1]);
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "holo-bench quant-error: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return 2;
	}
	if (!model_dir == !config) {
		fprintf(stderr, "holo-bench quant-error: give one of --model DIR and --random-config "
				"FILE\n");
		usage(stderr);
		return 2;
	}
	if (pattern && !config) {
		fprintf(stderr, "holo-bench quant-error: --pattern is for --random-config's model "
				"(a checkpoint has its own layers)\n");
		return 2;
	}
	if (!pattern)
		pattern = QE_DEFAULT_PATTERN;
	size_t plen = strlen(pattern);
	if (plen < 1 || plen > QE_MAX_PATTERN || strspn(pattern, "M*-") != plen) {
		fprintf(stderr,
			"holo-bench quant-error: --pattern '%s' is not 1 to %d layers of M, * "
			"and -\n",
			pattern, QE_MAX_PATTERN);
		return 2;
	}
	if (threads && engine_set_threads((int)threads) < 0) {
		fprintf(stderr, "holo-bench quant-error: cannot use %ld threads\n", threads);
		return 2;
	}

	char err[512] = "";
	struct engine_model *m = NULL;
	bool random = config != NULL;
	if (random) {
		struct bench_shapes sh;
		if (bench_shapes_read(config, &sh, err, sizeof(err)) < 0) {
			fprintf(stderr, "holo-bench quant-error: %s\n", err);
			return 1;
		}
		struct lm_random_spec sp;
		bench_shapes_lm_spec(&sh, &sp);
		sp.pattern = pattern;
		sp.seed = (uint64_t)seed;
		m = lm_random_model_create(&sp);
		if (!m) {
			fprintf(stderr,
				"holo-bench quant-error: cannot build the random model of %s's "
				"shapes: %s\n",
				config, strerror(errno));
			return 1;
		}
	} else {
		m = engine_model_load(model_dir, err, sizeof(err));
		if (!m) {
			fprintf(stderr, "holo-bench quant-error: %s: %s\n", model_dir, err);
			return 1;
		}
	}
	struct engine_model_info info;
	engine_model_get_info(m, &info);
	const int V = info.vocab;
	int ret = 1;
	float *ref = NULL, *cur = NULL;
	int32_t *tokens = NULL;
	const long N = T + D;
	if ((size_t)N * (size_t)V * sizeof(float) > QE_MAX_LOGITS_BYTES) {
		fprintf(stderr,
			"holo-bench quant-error: %ld positions x %d vocabulary entries of "
			"logits pass %zu MiB per run: use fewer --tokens or --decode\n",
			N, V, QE_MAX_LOGITS_BYTES >> 20);
		ret = 2;
		goto out;
	}
	ref = malloc((size_t)N * V * sizeof(float));
	cur = malloc((size_t)N * V * sizeof(float));
	tokens = malloc((size_t)N * sizeof(*tokens));
	if (!ref || !cur || !tokens) {
		fprintf(stderr, "holo-bench quant-error: out of memory for %ld x %d logits\n", N, V);
		goto out;
	}
	uint64_t st = (uint64_t)seed;
	for (long i = 0; i < N; i++)
		tokens[i] = (int32_t)(splitmix(&st) % (uint64_t)V);

	const struct tensor *mats[4];
	const char *dtype = "f32";
	if (m->cfg.n_layers > 0 && lm_layer_matrices(&m->layers[0], mats) > 0)
		dtype = mats[0]->dtype == TENSOR_BF16 ? "bf16" : mats[0]->dtype == TENSOR_F16 ? "f16" : "f32";
	if (random)
		printf("model: random %s weights (seed %ld) of %s's shapes, pattern %s\n", dtype, seed,
		       config, info.pattern);
	else
		printf("model: %s (%s weights), pattern %s\n", model_dir, dtype, info.pattern);
	printf("%.3f B parameters, hidden %d, vocab %d; %ld positions of prefill and %ld decode "
	       "steps (token ids seeded %ld), %d threads, %s kernels\n",
	       (double)info.n_params / 1e9, info.hidden, V, T, D, seed, engine_get_threads(),
	       engine_cpu_kernels());
	bench_print_load();

	struct variant base = {.weights = ENGINE_WEIGHTS_DEFAULT,
			       .precision = ENGINE_PRECISION_FP32,
			       .head = -1};
	if (run(m, &base, tokens, (int)T, (int)D, V, ref) < 0) {
		fprintf(stderr, "holo-bench quant-error: the reference run failed: %s\n", base.err);
		goto out;
	}
	printf("reference: the weights as stored, fp32 precision (%.1f s); every row against it\n\n",
	       base.seconds);
	printf("%-7s %-9s %-7s %9s %9s %10s %10s %7s  %9s  %9s %10s %9s %7s\n", "weights", "precision",
	       "lm_head", "cos_mean", "cos_min", "nmse", "kl_mean", "top1", "nmse/ggml", "kl/ggml", "w_nmse",
	       "w/ggml", "seconds");
	fflush(stdout);

	struct variant rows[QE_MAX_ROWS];
	int n = plan(rows, with_head);
	int failed = 0;
	for (int i = 0; i < n; i++) {
		struct variant *v = &rows[i];
		printf("%-7s %-9s %-7s", v->name, engine_precision_name(v->precision), head_name(v));
		if (run(m, v, tokens, (int)T, (int)D, V, cur) < 0) {
			printf(" refused: %s\n", v->err);
			fflush(stdout);
			continue;
		}
		compare(ref, cur, (int)N, V, &v->m);
		if (!v->m.finite) {
			printf(" non-finite logits\n");
			failed++;
			fflush(stdout);
			continue;
		}
		v->ran = true;
		printf(" %9.6f %9.6f %10.3e %10.3e %7.4f", v->m.cos_mean, v->m.cos_min, v->m.nmse, v->m.kl,
		       v->m.top1);
		const struct variant *g = partner(rows, i, v);
		if (g && g->ran) {
			print_ratio(v->m.nmse, g->m.nmse);
			print_ratio(v->m.kl, g->m.kl);
		} else {
			printf("  %9s  %9s", "-", "-");
		}
		if (v->w_nmse >= 0)
			printf(" %10.3e", v->w_nmse);
		else
			printf(" %10s", "-");
		if (g && g->ran && v->w_nmse >= 0 && g->w_nmse > 0)
			printf(" %9.4f", v->w_nmse / g->w_nmse);
		else
			printf(" %9s", "-");
		printf(" %7.1f\n", v->seconds);
		fflush(stdout);
	}
	printf("\n");
	for (int i = 0; i < n; i++) {
		const struct variant *v = &rows[i], *g = partner(rows, n, v);
		if (!v->ran || !g || !g->ran || v->precision != ENGINE_PRECISION_FP32 || !v->blocks)
			continue;
		bool holds = v->m.nmse <= g->m.nmse && v->m.kl <= g->m.kl;
		bool weights = v->w_nmse >= 0 && v->w_nmse <= g->w_nmse;
		printf("goal %s%s%s as accurate as %s%s (fp32 precision): logits nmse %.4gx, kl %.4gx "
		       "(weights' nmse %.4gx): %s\n",
		       v->name, v->head >= 0 ? " with the lm_head " : "", v->head >= 0 ? v->name : "",
		       g->name, g->head >= 0 ? " with its lm_head" : "",
		       g->m.nmse > 0 ? v->m.nmse / g->m.nmse : 1.0, g->m.kl > 0 ? v->m.kl / g->m.kl : 1.0,
		       v->w_nmse >= 0 && g->w_nmse > 0 ? v->w_nmse / g->w_nmse : NAN,
		       holds   ? "holds" :
		       weights ? "holds for the weights, not the logits" :
				 "does not hold");
	}
	for (int i = 0; i < n; i++) {
		const struct variant *v = &rows[i];
		if (v->ran && strcmp(v->name, "fp8") == 0 && v->head < 0)
			printf("goal fp8 logits cosine >= 0.999 (%s precision): least row %.6f, mean "
			       "%.6f: %s\n",
			       engine_precision_name(v->precision), v->m.cos_min, v->m.cos_mean,
			       v->m.cos_min >= 0.999 ? "holds" : "does not hold");
	}
	ret = failed ? 1 : 0;
out:
	free(ref);
	free(cur);
	free(tokens);
	if (random)
		lm_random_model_destroy(m);
	else
		engine_model_destroy(m);
	return ret;
}
