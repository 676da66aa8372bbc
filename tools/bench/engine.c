/* holo-bench engine: prefill and decode tokens/s of the CPU language model, peak RSS, and the
 * machine's memory read bandwidth measured in the same run, so that decode can be reported as a
 * fraction of its ceiling (weight bytes read per token / bandwidth).
 *
 *   holo-bench engine [--model DIR | --random SPEC] [--prompt N] [--decode N] [--threads N]
 *                     [--backend auto|cpu|cuda] [--device N] [--precision bf16|fp32]
 *                     [--ssm-state fp32|bf16] [--weights default|bf16|q8|q4|fp8] [--vs-bf16]
 *                     [--profile]
 *
 * With --weights q8|q4|fp8 the backend (the CPU, or CUDA for q8|q4) quantizes the linear layers at creation
 * (docs/quantization.md): the weight bytes read per decode token, and so the decode ceiling,
 * count those layers in their quantized bytes. --vs-bf16 runs a second backend on the same
 * checkpoint's bf16 weights and decodes the same tokens on it in rounds alternating with this
 * run's, each pair after the same bandwidth pass: the quantized format's rate against bf16's
 * under the same machine load (on a VM whose memory bandwidth drifts between runs, two runs'
 * rates compare the drift as much as the formats), beside the ratio of the bytes read per token.
 *
 * It also measures the machine's limits in the same run (machine.c): the read bandwidth with the
 * pool's threads (min/median/max over passes interleaved with the decode rounds), the decode GEMV
 * alone on the largest weight, the bf16 peak of the pool's threads (AMX when the kernel grants
 * it) and the pool's cost of starting a job against a decode layer's time.
 *
 * SPEC is a comma-separated list of key=value overriding the default random model (a ~0.7B
 * parameter bf16 Nemotron-H): pattern, hidden, vocab, intermediate, heads, kv_heads, head_dim,
 * m_heads, m_head_dim, m_groups, m_state, chunk, dtype (bf16|f16|f32).
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "bench.h"
#include "common.h"
#include "cpu.h"
#include "engine.h"
#include "machine.h"
#include "quant.h"
#include "quantized.h"
#include "lm.h"
#include "model.h"

/* 0.70B parameters: 22 Mamba, 4 attention and 22 MLP layers of width 1024, 128k vocabulary. */
#define DECODE_ROUND 4
#define DECODE_PROFILE_STEPS 8 /* decode steps profiled after the timed ones */
#define DEFAULT_PATTERN "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-"

void bench_engine_default_spec(struct lm_random_spec *ret)
{
	*ret = (struct lm_random_spec){
		.pattern = DEFAULT_PATTERN,
		.hidden = 1024,
		.vocab = 131072,
		.intermediate = 5120,
		.n_heads = 8,
		.n_kv_heads = 2,
		.head_dim = 128,
		.m_heads = 32,
		.m_head_dim = 64,
		.m_groups = 8,
		.m_state = 128,
		.m_conv_kernel = 4,
		.m_chunk = 128,
		.dtype = TENSOR_BF16,
		.seed = 1,
	};
}

static void usage(FILE *f)
{
	fprintf(f, "usage: holo-bench engine [--model DIR | --random SPEC] [--prompt N] [--decode N]\n"
		   "                         [--threads N] [--backend B] [--device N] [--precision P]\n"
		   "                         [--ssm-state S] [--weights W] [--vs-bf16] [--profile]\n"
		   "  --random SPEC  key=value,... over the default ~0.7B bf16 model: pattern, hidden,\n"
		   "                 vocab, intermediate, heads, kv_heads, head_dim, m_heads, m_head_dim,\n"
		   "                 m_groups, m_state, chunk, dtype (bf16|f16|f32)\n"
		   "  --prompt N     prefill length (default 512)\n"
		   "  --decode N     decode steps (default 32)\n"
		   "  --backend B    auto, cpu or cuda (default auto)\n"
		   "  --device N     CUDA device index (default 0)\n"
		   "  --precision P  bf16 or fp32 (default $HOLOD_PRECISION, else bf16 on cuda and on\n"
		   "                 the cpu for a bf16 checkpoint, fp32 on the cpu otherwise)\n"
		   "  --ssm-state S  the SSM state's storage, fp32 or bf16 (default fp32)\n"
		   "  --weights W    the linear layers' format: default (as stored), bf16, q8, q4 or fp8\n"
		   "                 (quantized at load; default $HOLOD_WEIGHTS)\n"
		   "  --vs-bf16      also decode on the checkpoint's bf16 weights, in rounds alternating\n"
		   "                 with these, and print the rate against them\n"
		   "  --profile      list the device's kernels and GEMM calls after the run (cuda)\n");
}

int bench_engine_parse_spec(char *spec, struct lm_random_spec *sp)
{
	for (char *save = NULL, *kv = strtok_r(spec, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(kv, '=');
		if (!eq)
			return -EINVAL;
		*eq = 0;
		const char *k = kv, *v = eq + 1;
		if (strcmp(k, "pattern") == 0) {
			sp->pattern = v;
			continue;
		}
		if (strcmp(k, "dtype") == 0) {
			if (strcmp(v, "bf16") == 0)
				sp->dtype = TENSOR_BF16;
			else if (strcmp(v, "f16") == 0)
				sp->dtype = TENSOR_F16;
			else if (strcmp(v, "f32") == 0)
				sp->dtype = TENSOR_F32;
			else
				return -EINVAL;
			continue;
		}
		char *end;
		long n = strtol(v, &end, 10);
		if (*end || n < 1 || n > (1 << 20))
			return -EINVAL;
		struct {
			const char *name;
			int *field;
		} keys[] = {
			{"hidden", &sp->hidden},
			{"vocab", &sp->vocab},
			{"intermediate", &sp->intermediate},
			{"heads", &sp->n_heads},
			{"kv_heads", &sp->n_kv_heads},
			{"head_dim", &sp->head_dim},
			{"m_heads", &sp->m_heads},
			{"m_head_dim", &sp->m_head_dim},
			{"m_groups", &sp->m_groups},
			{"m_state", &sp->m_state},
			{"chunk", &sp->m_chunk},
		};
		size_t i;
		for (i = 0; i < ARRAY_SIZE(keys); i++)
			if (strcmp(k, keys[i].name) == 0) {
				*keys[i].field = (int)n;
				break;
			}
		if (i == ARRAY_SIZE(keys))
			return -EINVAL;
	}
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* sorts v */
static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#define GEMV_ROUNDS 8

/* The decode GEMV alone on the largest weight, one token, in rounds interleaved with bandwidth
 * passes: its read rate against the bandwidth measured beside it, on the lm_head the backend
 * reads (its copy in 2 MiB pages where it holds one). A holo-quantize checkpoint's lm_head (its
 * q8/q4 records, quantized.h) runs on the quantized GEMV decode uses (int8 activations in bf16
 * precision). */
static int print_gemv_alone(const struct engine_model *m, const struct engine_backend *backend,
			    struct bench_bw *bw, bool bf16_act)
{
	const struct tensor *w = backend_cpu_weights(backend, &m->lm_head);
	const bool held = w != &m->lm_head;
	struct quant_tensor q = {0};
	if (quantized_dtype_format(w->dtype) >= 0)
		quantized_tensor_view(w, &q);
	int rows = (int)w->shape[0], in = (int)w->shape[w->ndim - 1];
	float *x = malloc((size_t)in * sizeof(float)), *y = malloc((size_t)rows * sizeof(float));
	if (!x || !y) {
		free(x);
		free(y);
		return -ENOMEM;
	}
	for (int i = 0; i < in; i++)
		x[i] = (float)((i * 37) % 17) / 17.0f - 0.5f;
	double g[GEMV_ROUNDS], b[GEMV_ROUNDS];
	int r = 0;
	for (int k = 0; k < GEMV_ROUNDS && r == 0; k++) {
		b[k] = bench_bw_pass(bw);
		uint64_t t0 = time_mono_ns();
		r = !q.data  ? cpu_gemv_rows(w, 0, rows, x, (size_t)in, 1, y, (size_t)rows, false, bf16_act) :
		    bf16_act ? cpu_gemv_quant_rows_i8(&q, 0, rows, x, (size_t)in, 1, y, (size_t)rows, false) :
			       cpu_gemv_quant_rows(&q, 0, rows, x, (size_t)in, 1, y, (size_t)rows, false);
		g[k] = (double)w->nbytes / ((double)(time_mono_ns() - t0) / 1e9);
	}
	free(x);
	free(y);
	if (r < 0)
		return r;
	double gm = median(g, GEMV_ROUNDS), bm = median(b, GEMV_ROUNDS);
	printf("gemv alone (%s, the lm head %d x %d%s%s%s, %s activations): median %.2f GB/s, %.0f%% of "
	       "the median read bandwidth of the same rounds (%.2f GB/s)\n",
	       cpu_gemv_name(), rows, in, q.data ? " in " : "",
	       q.data ? quant_format_desc(q.format)->name : "", held ? " held in 2 MiB pages" : "",
	       !q.data	? (bf16_act ? "bf16" : "fp32") :
	       bf16_act ? "int8" :
			  "fp32",
	       gm / 1e9, 100.0 * gm / bm, bm / 1e9);
	return 0;
}

/* Bytes a matrix of the layers is read as: its own, or its quantized size. */
static double matrix_bytes(const struct tensor *t, enum engine_weights w)
{
	size_t q;
	if ((w == ENGINE_WEIGHTS_Q8 || w == ENGINE_WEIGHTS_Q4) &&
	    quant_tensor_bytes(w == ENGINE_WEIGHTS_Q8 ? QUANT_Q8 : QUANT_Q4, t->shape[0], t->shape[1], &q) ==
		    0)
		return (double)q;
	/* fp8 rows: asked for, or an FP8 checkpoint's as stored (not widened by --weights bf16) */
	if ((w == ENGINE_WEIGHTS_FP8 || (t->dtype == TENSOR_F8_E4M3 && w != ENGINE_WEIGHTS_BF16)) &&
	    quant_tensor_bytes(QUANT_FP8, t->shape[0], t->shape[1], &q) == 0)
		return (double)q;
	if (t->dtype == TENSOR_F8_E4M3 && w == ENGINE_WEIGHTS_BF16)
		return 2.0 * (double)t->nbytes;
	return (double)t->nbytes;
}

/* Bytes of weights one decode step reads: every layer tensor (the linear layers in the format
 * `w` holds them in), the final norm and the head (q8/q4 quantize it too, lm_forward.c; fp8
 * keeps it as stored; one embedding row is negligible). */
static double decode_weight_bytes(const struct engine_model *m, enum engine_weights w)
{
	double b = (double)m->norm_f.nbytes + (w == ENGINE_WEIGHTS_Q8 || w == ENGINE_WEIGHTS_Q4 ?
						       matrix_bytes(&m->lm_head, w) :
						       (double)m->lm_head.nbytes);
	for (int l = 0; l < m->cfg.n_layers; l++) {
		const struct lm_layer *L = &m->layers[l];
		b += (double)L->norm.nbytes;
		switch (L->kind) {
		case LM_LAYER_MAMBA:
			b += matrix_bytes(&L->mamba.in_proj, w) + matrix_bytes(&L->mamba.out_proj, w) +
			     (double)(L->mamba.conv_w.nbytes + L->mamba.conv_b.nbytes +
				      L->mamba.dt_bias.nbytes + L->mamba.a_log.nbytes + L->mamba.d.nbytes +
				      L->mamba.norm.nbytes);
			break;
		case LM_LAYER_ATTENTION:
			b += matrix_bytes(&L->attn.q, w) + matrix_bytes(&L->attn.k, w) +
			     matrix_bytes(&L->attn.v, w) + matrix_bytes(&L->attn.o, w);
			break;
		case LM_LAYER_MLP:
			b += matrix_bytes(&L->mlp.up, w) + matrix_bytes(&L->mlp.down, w);
			break;
		}
	}
	return b;
}

/* Weights of t: a holo-quantize matrix's (records) from its shape, a plain tensor's from its
 * bytes. */
static double tensor_params(const struct tensor *t)
{
	if (quantized_dtype_format(t->dtype) >= 0)
		return (double)t->shape[0] * (double)t->shape[1];
	return (double)t->nbytes / (t->dtype == TENSOR_F32 ? 4 : 2);
}

static double count_params(const struct engine_model *m)
{
	double n = 0;
	const struct tensor *all[] = {&m->embeddings, &m->norm_f, &m->lm_head};
	for (size_t i = 0; i < ARRAY_SIZE(all); i++)
		n += tensor_params(all[i]);
	if (m->lm_head.data == m->embeddings.data)
		n -= tensor_params(&m->lm_head);
	for (int l = 0; l < m->cfg.n_layers; l++) {
		const struct lm_layer *L = &m->layers[l];
		const struct tensor *t[9];
		size_t k = 0;
		t[k++] = &L->norm;
		if (L->kind == LM_LAYER_MAMBA) {
			t[k++] = &L->mamba.in_proj;
			t[k++] = &L->mamba.conv_w;
			t[k++] = &L->mamba.conv_b;
			t[k++] = &L->mamba.dt_bias;
			t[k++] = &L->mamba.a_log;
			t[k++] = &L->mamba.d;
			t[k++] = &L->mamba.norm;
			t[k++] = &L->mamba.out_proj;
		} else if (L->kind == LM_LAYER_ATTENTION) {
			t[k++] = &L->attn.q;
			t[k++] = &L->attn.k;
			t[k++] = &L->attn.v;
			t[k++] = &L->attn.o;
		} else {
			t[k++] = &L->mlp.up;
			t[k++] = &L->mlp.down;
		}
		for (size_t i = 0; i < k; i++)
			n += tensor_params(t[i]);
	}
	return n;
}

static long peak_rss_kib(void)
{
	struct rusage ru;
	return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss : -1;
}

int bench_engine_main(int argc, char **argv)
{
	/* clang-format off */
	static const struct option opts[] = {
		{"model", required_argument, NULL, 'm'},
		{"random", required_argument, NULL, 'r'},
		{"prompt", required_argument, NULL, 'p'},
		{"decode", required_argument, NULL, 'd'},
		{"threads", required_argument, NULL, 't'},
		{"help", no_argument, NULL, 'h'},
		{"backend", required_argument, NULL, 'b'},
		{"precision", required_argument, NULL, 'P'},
		{"device", required_argument, NULL, 'D'},
		{"profile", no_argument, NULL, 'F'},
		{"ssm-state", required_argument, NULL, 'X'},
		{"weights", required_argument, NULL, 'W'},
		{"vs-bf16", no_argument, NULL, 'V'},
		{0},
	};
	/* clang-format on */
	struct lm_random_spec sp;
	bench_engine_default_spec(&sp);
	const char *model_dir = NULL;
	char *spec = NULL;
	int n_prompt = 512, n_decode = 32, threads = 0;
	bool profile = false, vs_bf16 = false;
	struct engine_backend_options bopts = {.kind = ENGINE_BACKEND_AUTO};
	const char *env_precision = getenv("HOLOD_PRECISION");
	if (env_precision && *env_precision && engine_precision_parse(env_precision, &bopts.precision) < 0) {
		fprintf(stderr, "holo-bench engine: HOLOD_PRECISION=%s: expected bf16 or fp32\n",
			env_precision);
		return 2;
	}
	const char *env_weights = getenv("HOLOD_WEIGHTS");
	if (env_weights && *env_weights && engine_weights_parse(env_weights, &bopts.weights) < 0) {
		fprintf(stderr,
			"holo-bench engine: HOLOD_WEIGHTS=%s: expected default, bf16, q8, "
			"q4 or fp8\n",
			env_weights);
		return 2;
	}

	optind = 1;
	for (int c; (c = getopt_long(argc, argv, "h", opts, NULL)) != -1;) {
		char *end = NULL;
		switch (c) {
		case 'm':
			model_dir = optarg;
			break;
		case 'r':
			spec = optarg;
			break;
		case 'p':
			n_prompt = (int)strtol(optarg, &end, 10);
			break;
		case 'd':
			n_decode = (int)strtol(optarg, &end, 10);
			break;
		case 't':
			threads = (int)strtol(optarg, &end, 10);
			break;
		case 'b':
			if (engine_backend_kind_parse(optarg, &bopts.kind) < 0) {
				fprintf(stderr, "holo-bench engine: invalid backend '%s'\n", optarg);
				return 2;
			}
			break;
		case 'D':
			bopts.device = (int)strtol(optarg, &end, 10);
			if (*end || bopts.device < 0) {
				fprintf(stderr, "holo-bench engine: invalid device '%s'\n", optarg);
				return 2;
			}
			end = NULL;
			break;
		case 'P':
			if (engine_precision_parse(optarg, &bopts.precision) < 0) {
				fprintf(stderr, "holo-bench engine: invalid precision '%s'\n", optarg);
				return 2;
			}
			break;
		case 'F':
			profile = true;
			break;
		case 'V':
			vs_bf16 = true;
			break;
		case 'W':
			if (engine_weights_parse(optarg, &bopts.weights) < 0) {
				fprintf(stderr,
					"holo-bench engine: invalid weight format '%s' (default, "
					"bf16, q8, q4, fp8)\n",
					optarg);
				return 2;
			}
			break;
		case 'X':
			if (engine_precision_parse(optarg, &bopts.ssm_state) < 0) {
				fprintf(stderr, "holo-bench engine: invalid SSM state type '%s'\n", optarg);
				return 2;
			}
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
		if (end && (*end || strtol(optarg, NULL, 10) < 1)) {
			fprintf(stderr, "holo-bench engine: invalid number '%s'\n", optarg);
			return 2;
		}
	}
	if (optind != argc || (model_dir && spec)) {
		usage(stderr);
		return 2;
	}
	if (spec && bench_engine_parse_spec(spec, &sp) < 0) {
		fprintf(stderr, "holo-bench engine: invalid --random spec\n");
		return 2;
	}
	if (threads && engine_set_threads(threads) < 0) {
		fprintf(stderr, "holo-bench engine: invalid thread count\n");
		return 2;
	}

	char msg[512] = "";
	if (engine_backend_resolve(&bopts, msg, sizeof(msg)) < 0) {
		fprintf(stderr, "holo-bench engine: %s\n", msg);
		return 1;
	}
	if (profile && bopts.kind != ENGINE_BACKEND_CUDA) {
		fprintf(stderr,
			"holo-bench engine: --profile times the kernels of a device, and this "
			"run uses the %s: add --backend cuda\n",
			engine_backend_kind_name(bopts.kind));
		return 2;
	}
	if (msg[0])
		printf("%s\n", msg);
	if (vs_bf16 && (bopts.weights == ENGINE_WEIGHTS_DEFAULT || bopts.weights == ENGINE_WEIGHTS_BF16)) {
		fprintf(stderr, "holo-bench engine: --vs-bf16 compares a quantized format with bf16: add "
				"--weights q8, q4 or fp8\n");
		return 2;
	}

	int ret = 1;
	struct bench_bw *bw = NULL;
	struct engine_model *m = NULL;
	struct engine_backend *backend = NULL, *ref = NULL;
	struct engine_session *s = NULL, *rs = NULL;
	double *bw_rates = NULL, *ratios = NULL;
	int32_t *tok = NULL;
	float *logits = NULL;

	if (model_dir) {
		char err[512] = "";
		m = engine_model_load(model_dir, err, sizeof(err));
		if (!m) {
			fprintf(stderr, "holo-bench engine: %s: %s\n", model_dir, err);
			goto out;
		}
		printf("model %s\n", model_dir);
	} else {
		m = lm_random_model_create(&sp);
		if (!m) {
			fprintf(stderr, "holo-bench engine: cannot build the random model: %s\n",
				strerror(errno));
			goto out;
		}
		printf("random model: pattern %s, hidden %d, vocab %d, intermediate %d, attn %d/%d x %d, "
		       "mamba H %d P %d G %d N %d, chunk %d, dtype %s\n",
		       sp.pattern, sp.hidden, sp.vocab, sp.intermediate, sp.n_heads, sp.n_kv_heads,
		       sp.head_dim, sp.m_heads, sp.m_head_dim, sp.m_groups, sp.m_state, sp.m_chunk,
		       sp.dtype == TENSOR_BF16 ? "bf16" :
		       sp.dtype == TENSOR_F16  ? "f16" :
						 "f32");
	}
	double wbytes = decode_weight_bytes(m, bopts.weights);
	printf("parameters %.3f B (%.0f), weight bytes read per decode token %.1f MB\n",
	       count_params(m) / 1e9, count_params(m), wbytes / 1e6);

	backend = engine_backend_create(m, &bopts, msg, sizeof(msg));
	if (!backend) {
		fprintf(stderr, "holo-bench engine: %s\n", msg);
		goto out;
	}
	int pr = profile ? engine_backend_profile(backend, true) : 0;
	if (pr < 0) {
		fprintf(stderr, "holo-bench engine: cannot profile the device: %s\n", strerror(-pr));
		goto out;
	}
	struct engine_backend_info binfo;
	engine_backend_get_info(backend, &binfo);
	printf("backend %s (%s), %s, SSM state %s, weights %s %.1f MB\n", binfo.name, binfo.device,
	       engine_precision_name(binfo.precision), engine_precision_name(binfo.ssm_state), binfo.weights,
	       (double)binfo.weight_bytes / 1e6);

	/* --vs-bf16: the same checkpoint's bf16 weights on a second backend of the same kind */
	double ref_wbytes = 0;
	if (vs_bf16) {
		struct engine_backend_options ro = bopts;
		ro.weights = ENGINE_WEIGHTS_BF16;
		ref = engine_backend_create(m, &ro, msg, sizeof(msg));
		if (!ref) {
			fprintf(stderr, "holo-bench engine: --vs-bf16: the bf16 weights: %s\n", msg);
			goto out;
		}
		ref_wbytes = decode_weight_bytes(m, ENGINE_WEIGHTS_BF16);
		struct engine_backend_info ri;
		if (engine_backend_get_info(ref, &ri) < 0) {
			fprintf(stderr,
				"holo-bench engine: --vs-bf16: the bf16 backend gave no information\n");
			goto out;
		}
		printf("reference (--vs-bf16): backend %s, weights %s %.1f MB, %.1f MB read per decode "
		       "token\n",
		       ri.name, ri.weights, (double)ri.weight_bytes / 1e6, ref_wbytes / 1e6);
	}

	int V = m->cfg.vocab;
	/* room for the profiled decode steps after the timed ones (below) */
	s = engine_session_create_on(backend, n_prompt + n_decode + DECODE_PROFILE_STEPS + 1);
	tok = malloc((size_t)n_prompt * sizeof(*tok));
	logits = malloc((size_t)V * sizeof(float));
	if (!s || !tok || !logits) {
		fprintf(stderr, "holo-bench engine: out of memory\n");
		goto out;
	}
	for (int i = 0; i < n_prompt; i++)
		tok[i] = (int32_t)((i * 7919 + 13) % V);

	/* warm-up: fault the weights in and size the scratch */
	int r = engine_session_append(s, tok, NULL, (size_t)MIN(n_prompt, 8), ENGINE_LOGITS_LAST, logits);
	if (r < 0)
		goto fail;
	engine_session_reset(s);
	if (ref) {
		/* the reference's session, warmed up as this one and holding the same prompt */
		rs = engine_session_create_on(ref, n_prompt + n_decode + 1);
		if (!rs) {
			fprintf(stderr, "holo-bench engine: out of memory\n");
			goto out;
		}
		if ((r = engine_session_append(rs, tok, NULL, (size_t)MIN(n_prompt, 8), ENGINE_LOGITS_LAST,
					       logits)) < 0)
			goto fail;
		engine_session_reset(rs);
		if ((r = engine_session_append(rs, tok, NULL, (size_t)n_prompt, ENGINE_LOGITS_LAST, logits)) <
		    0)
			goto fail;
	}

	/* The GEMM-only rate first: it also creates the oneDNN primitives the prefill reuses. On
	 * the CPU the prefill is profiled per operation (cheap: a clock read per operation). */
	bool on_cpu = binfo.kind == ENGINE_BACKEND_CPU;
	double gemm_flop = 0,
	       gemm_s = on_cpu ? bench_gemm_only_seconds(m, backend, binfo.precision == ENGINE_PRECISION_BF16,
							 n_prompt, &gemm_flop) :
				 0;
	/* not measured on a holo-quantize checkpoint's records (its prefill dequantizes them) */
	const bool gemm_measured = gemm_s != -EOPNOTSUPP;
	if (gemm_s < 0 && gemm_measured) {
		r = (int)gemm_s;
		goto fail;
	}
	if (on_cpu && (r = engine_backend_profile(backend, true)) < 0)
		goto fail;

	/* Besides wall-clock rates, the rate per CPU-second the process actually got, scaled to the
	 * thread count ("cpu-normalised"): on a shared machine it is what the code does when it
	 * has its cores to itself. */
	int nthreads = engine_get_threads();
	bench_print_load();
	double c0 = bench_cpu_seconds();
	uint64_t t0 = time_mono_ns();
	r = engine_session_append(s, tok, NULL, (size_t)n_prompt, ENGINE_LOGITS_LAST, logits);
	uint64_t t1 = time_mono_ns();
	double c1 = bench_cpu_seconds();
	if (r < 0)
		goto fail;
	double prefill_tps = n_prompt / ((double)(t1 - t0) / 1e9);
	printf("prefill: %d tokens in %.3f s: %.1f tok/s (cpu-normalised %.1f tok/s, %.2f CPUs used)\n",
	       n_prompt, (double)(t1 - t0) / 1e9, prefill_tps, n_prompt / ((c1 - c0) / nthreads),
	       (c1 - c0) / ((double)(t1 - t0) / 1e9));

	if (on_cpu) {
		char **lines = NULL;
		int n = engine_backend_profile_report(backend, &lines);
		for (int i = 0; i < n; i++)
			printf("prefill %s\n", lines[i]);
		engine_backend_profile_free(lines);
		engine_backend_profile(backend, false);
		double gemm_tps = n_prompt / gemm_s;
		if (!gemm_measured)
			printf("prefill GEMM-only rate: not measured (the checkpoint's matrices are "
			       "holo-quantize records)\n");
		else
			printf("prefill GEMM-only rate: %.1f tok/s (the matrix products alone, %.0f "
			       "GFLOP/s): prefill at %.0f%% of it\n",
			       gemm_tps, gemm_flop / gemm_s / 1e9, 100.0 * prefill_tps / gemm_tps);
	}

	/* peak RSS of the engine alone, before the bandwidth buffer exists */
	printf("peak RSS after prefill: %.1f MB (model, session, scratch%s)\n",
	       (double)peak_rss_kib() / 1024.0, ref ? "; the --vs-bf16 reference's too" : "");
	bw = bench_bw_create((size_t)1 << 30);
	if (!bw) {
		fprintf(stderr, "holo-bench engine: out of memory\n");
		goto out;
	}

	/* Decode in rounds of DECODE_ROUND steps, each round preceded by one bandwidth pass, so the
	 * ceiling is measured under the same machine load as the decode it is compared with; with
	 * --vs-bf16 each pass is followed by a round on each backend, the same tokens, the order
	 * alternating from one round to the next. */
	int32_t next = 0;
	double dec_s = 0, dec_cpu = 0, ref_s = 0;
	int rounds = 0;
	bw_rates = malloc(((size_t)n_decode / DECODE_ROUND + 1) * sizeof(double));
	ratios = malloc(((size_t)n_decode / DECODE_ROUND + 1) * sizeof(double));
	if (!bw_rates || !ratios) {
		fprintf(stderr, "holo-bench engine: out of memory\n");
		goto out;
	}
	uint64_t jobs = 0;
	for (int done = 0; done < n_decode; rounds++) {
		bw_rates[rounds] = bench_bw_pass(bw);
		int steps = MIN(DECODE_ROUND, n_decode - done);
		int32_t toks[DECODE_ROUND];
		for (int i = 0; i < steps; i++)
			toks[i] = next = (next * 31 + 7) % V;
		double round_s = 0, round_ref = 0;
		for (int k = 0; k < (rs ? 2 : 1); k++) {
			bool on_ref = rs && (k ^ (rounds & 1)) == 1;
			uint64_t jobs0 = cpu_parallel_jobs();
			c0 = bench_cpu_seconds();
			t0 = time_mono_ns();
			for (int i = 0; i < steps && r >= 0; i++)
				r = engine_session_decode(on_ref ? rs : s, toks[i], logits);
			t1 = time_mono_ns();
			c1 = bench_cpu_seconds();
			if (r < 0)
				goto fail;
			if (on_ref) {
				round_ref = (double)(t1 - t0) / 1e9;
				continue;
			}
			jobs += cpu_parallel_jobs() - jobs0;
			round_s = (double)(t1 - t0) / 1e9;
			dec_cpu += c1 - c0;
		}
		dec_s += round_s;
		ref_s += round_ref;
		ratios[rounds] = round_ref / round_s;
		done += steps;
	}
	double bw_med = median(bw_rates, rounds), bw_min = bw_rates[0], bw_max = bw_rates[rounds - 1];
	double decode_tps = n_decode / dec_s;
	double ceiling = bw_med / wbytes;
	printf("decode: %d tokens in %.3f s: %.2f tok/s\n", n_decode, dec_s, decode_tps);
	char pages[96];
	printf("read bandwidth (%d threads, %.0f MB passes interleaved with the decode rounds, %s): min "
	       "%.2f, median %.2f, max %.2f GB/s over %d passes\n",
	       nthreads, (double)bench_bw_bytes(bw) / 1e6, bench_bw_pages(bw, pages, sizeof(pages)),
	       bw_min / 1e9, bw_med / 1e9, bw_max / 1e9, rounds);
	/* the engine's weights are allocated as the buffer is (alloc_huge): its huge pages beside */
	long long huge_all = huge_bytes_in(NULL, SIZE_MAX), huge_bw = bench_bw_huge_bytes(bw);
	if (huge_all >= 0 && huge_bw >= 0)
		printf("2 MiB pages: %.1f MB of the process's besides the read pass's (the weights, "
		       "%.1f MB of them read per decode token%s)\n",
		       (double)(huge_all - huge_bw) / 1e6, wbytes / 1e6,
		       ref ? "; the --vs-bf16 reference's among them" : "");
	printf("decode ceiling: %.2f tok/s (%.1f MB per token at the median %.2f GB/s): decode at "
	       "%.0f%% of the read bandwidth\n",
	       ceiling, wbytes / 1e6, bw_med / 1e9, 100.0 * decode_tps / ceiling);
	printf("decode cpu-normalised: %.2f tok/s (%.2f CPUs used)\n", n_decode / (dec_cpu / nthreads),
	       dec_cpu / dec_s);
	/* the session's state is memory a decode step moves too: each Mamba layer's recurrent state
	 * (conv + SSM) read and written once, the attention layers' K/V cache read once (the state
	 * of a session holding no tokens is the recurrent part) */
	const double state = (double)engine_session_state_bytes(s),
		     recurrent = (double)engine_session_state_bytes_at(s, 0),
		     kv = state > recurrent ? state - recurrent : 0;
	if (rs) {
		const double besides = 2 * recurrent + kv;
		const int first = (rounds + 1) / 2; /* the quantized run went first in the even rounds */
		double ref_tps = n_decode / ref_s, lo = ratios[0], hi = ratios[0];
		for (int i = 1; i < rounds; i++) {
			lo = MIN(lo, ratios[i]);
			hi = MAX(hi, ratios[i]);
		}
		printf("decode against bf16 in the same rounds (--vs-bf16): %s %.2f tok/s (%.0f%% of the "
		       "read bandwidth), bf16 %.2f tok/s (%.0f%%): %.2fx (per round: min %.2fx, median "
		       "%.2fx, max %.2fx over %d rounds, %s first in %d); the bytes read per token give "
		       "%.2fx, %.2fx counting the session's state\n",
		       binfo.weights, decode_tps, 100.0 * decode_tps / ceiling, ref_tps,
		       100.0 * ref_tps / (bw_med / ref_wbytes), decode_tps / ref_tps, lo,
		       median(ratios, rounds), hi, rounds, binfo.weights, first, ref_wbytes / wbytes,
		       (ref_wbytes + besides) / (wbytes + besides));
	}
	if (binfo.kind == ENGINE_BACKEND_CPU) {
		/* where a decode step's time goes: the same steps again with the backend's profile
		 * on, so that decode below the ceiling says whether its matrix products or the rest
		 * (norms, the SSM step, attention, the pool's wakeups between them) are short of it */
		const int steps = DECODE_PROFILE_STEPS;
		if ((r = engine_backend_profile(backend, true)) < 0)
			goto fail;
		t0 = time_mono_ns();
		for (int i = 0; i < steps && r >= 0; i++) {
			next = (next * 31 + 7) % V;
			r = engine_session_decode(s, next, logits);
		}
		t1 = time_mono_ns();
		if (r < 0)
			goto fail;
		char **lines = NULL;
		double gemm_ms = 0;
		int n = engine_backend_profile_report(backend, &lines);
		for (int i = 0; i < n; i++) {
			const char *gemm = lm_op_name(LM_OP_GEMM);
			printf("decode %s\n", lines[i]);
			if (strncmp(lines[i], "cpu ", 4) == 0 &&
			    strncmp(lines[i] + 4, gemm, strlen(gemm)) == 0)
				sscanf(lines[i] + 4 + strlen(gemm), "%lf", &gemm_ms);
		}
		engine_backend_profile_free(lines);
		engine_backend_profile(backend, false);
		if (gemm_ms > 0) {
			double step = (double)(t1 - t0) / 1e9 / steps, gemm = gemm_ms / 1e3 / steps;
			printf("decode step %.2f ms (%d profiled): matrix products %.2f ms, reading the "
			       "weights at %.2f GB/s (%.0f%% of the median read bandwidth); the other "
			       "operations and the gaps between them %.2f ms (%.0f%% of the step)\n",
			       step * 1e3, steps, gemm * 1e3, wbytes / gemm / 1e9,
			       100.0 * wbytes / gemm / bw_med, (step - gemm) * 1e3,
			       100.0 * (step - gemm) / step);
		}
		/* the state's bytes as the timed decode left them (above) */
		double with_state = bw_med / (wbytes + 2 * recurrent + kv);
		printf("decode ceiling counting the session's state (%.1f MB recurrent, read and written "
		       "each step; %.1f MB of K/V cache, read) beside the weights: %.2f tok/s: decode at "
		       "%.0f%% of it\n",
		       recurrent / 1e6, kv / 1e6, with_state, 100.0 * decode_tps / with_state);
		r = print_gemv_alone(m, backend, bw, binfo.precision == ENGINE_PRECISION_BF16);
		if (r < 0)
			goto fail;
		double hot, cold;
		bench_pool_wake(200, &hot, &cold);
		double layer = dec_s / n_decode / m->cfg.n_layers;
		double per_token = (double)jobs / n_decode;
		printf("pool (%d threads): a job costs %.1f us back to back, %.1f us with the workers "
		       "asleep; a decode layer takes %.1f us; decode runs %.0f jobs per token: %.1f%% "
		       "of its time at the back-to-back cost\n",
		       nthreads, hot * 1e6, cold * 1e6, layer * 1e6, per_token,
		       100.0 * per_token * hot / (dec_s / n_decode));
		struct bench_peak pk;
		if (bench_bf16_peak(NULL, 0.3, &pk) == 0)
			printf("bf16 peak (%d threads, %s%s%s): %.0f GFLOP/s\n", nthreads, pk.unit,
			       *pk.note ? "; " : "", pk.note, pk.flops_per_s / 1e9);
	}
	bench_print_load();
	printf("session state after %d tokens: %.1f MB\n", engine_session_n_tokens(s),
	       (double)engine_session_state_bytes(s) / 1e6);
	printf("peak RSS: %.1f MB (with the 1 GiB bandwidth buffer)\n", (double)peak_rss_kib() / 1024.0);
	if (profile) {
		char **lines = NULL;
		int n = engine_backend_profile_report(backend, &lines);
		for (int i = 0; i < n; i++)
			printf("%s\n", lines[i]);
		engine_backend_profile_free(lines);
		if (n <= 0) {
			fprintf(stderr, "holo-bench engine: --profile: nothing ran on the CUDA device\n");
			goto out;
		}
	}
	ret = 0;
	goto out;
fail:
	fprintf(stderr, "holo-bench engine: %s\n", strerror(-r));
out:
	free(tok);
	free(logits);
	free(bw_rates);
	free(ratios);
	engine_session_destroy(rs);
	engine_backend_destroy(ref);
	engine_session_destroy(s);
	engine_backend_destroy(backend);
	if (model_dir)
		engine_model_destroy(m);
	else
		lm_random_model_destroy(m);
	bench_bw_destroy(bw);
	return ret;
}
