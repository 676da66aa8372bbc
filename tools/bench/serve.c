/* holo-bench serve: the aggregate decode rate of many sessions of one model advancing together
 * (issue 16: weights read once per batched step), and what Holotron-12B's shapes allow at 100
 * sessions on an H200 and an H100.
 *
 *   holo-bench serve [--model DIR | --random SPEC | --random-config FILE] [--sessions LIST]
 *                    [--prompt N] [--decode N] [--rounds N] [--threads N]
 *                    [--backend auto|cpu|cuda] [--device N] [--precision bf16|fp32]
 *                    [--ssm-state fp32|bf16] [--config FILE] [--roofline-sessions N]
 *                    [--context N] [--profile] [--mixed N] [--reference TOK_S]
 *
 * The model: a checkpoint, random weights of the engine benchmark's ~0.7B model changed by SPEC,
 * or random bf16 weights of a config.json's shapes (--random-config
 * tools/bench/holotron-12b-config.json: Holotron-12B's, nothing read but the file).
 * For each session count of LIST (ascending, starting at 1; default 1,2,4,8,16) that many
 * sessions are prefilled with their own --prompt tokens in one batch, then decode --decode steps
 * together: each step is one engine_forward_batch() of one token per session with its logits,
 * the next token being each session's argmax (so the sessions diverge as real ones do). Only the
 * forward calls are timed. The counts run in --rounds rounds, every count once per round, and a
 * count's figures are those of its median round, so a shared machine's drift falls on all counts
 * alike. One line per count:
 *
 *   sessions=N tok/s=X speedup=Y step_ms=Z cpu_tok/s=W
 *
 * X is N * steps / seconds, Y is X over the 1-session X of the same run, Z the time of one
 * batched step, W the rate per CPU-second the process got, scaled to the thread count (what the
 * code does with its cores to itself). Each count's X and Z are also figure lines (bench_figure():
 * serve.sessionsN.tok_s, serve.sessionsN.step_ms); --reference R gives the largest count's
 * tok/s the goal >= R (e.g. 8900: vLLM's published rate for this model at 100 sessions on one
 * H100), printed beside it as "reference=R ratio=X/R". Then the roofline (roofline.h) of one batched decode
 * step of the --config shapes (default: holotron-12b-config.json beside this file) with
 * --roofline-sessions sessions (default 100) at --context cached tokens each (default 4096),
 * bf16 weights and KV, an fp32 conv window, and the SSM state in fp32 then in bf16 (a line
 * per state type and device; --profile first adds one more round per count with the backend's
 * profile on: "sessions=N profile <line>", the CPU's time per operation, then "profile peak
 * unit=U threads=N GFLOP/s=G" for each bf16 unit the CPU runs (amx, avx512bf16, fma), what the
 * products' GFLOP/s compare with). Before it, what the
 * daemon's model worker runs between two forwards besides them, the best of three:
 *
 *   state session_create_ms=A context=N snapshot_ms=B restore_ms=C snapshot_MiB=D tokens=T
 *
 * (a session created for --context tokens; a snapshot of the first session taken and restored).
 *
 *   roofline device=h200 sessions=100 context=4096 tok/s=X step_ms=Y weights_GB=A state_GB=B kv_GB=C
 * bound=memory ssm_state=fp32
 *
 * --mixed N (before the roofline): for each count, a prefill chunk of N tokens (one more session,
 * emptied before each step) beside the count's decode steps, every other step in the same
 * forward as the decoders ("together": the CPU's lm_forward_batch and CUDA's shared passes read
 * each weight once for both) and otherwise in a forward of its own after theirs ("apart"); the
 * mean step of each, and apart over together:
 *
 *   mixed sessions=N chunk=C together_ms=X apart_ms=Y speedup=Z
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "common.h"
#include "machine.h"
#include "engine.h"
#include "lm.h"
#include "roofline.h"
#include "shapes.h"

#define DEFAULT_CONFIG HOLO_BENCH_DIR "/holotron-12b-config.json"
/* Limits of the options: counts of sessions (each holds its full state), steps and rounds. */
#define SERVE_MAX_SESSIONS 256
#define SERVE_MAX_COUNTS 16
#define SERVE_MAX_TOKENS 4096
#define SERVE_MAX_ROUNDS 32

static void usage(FILE *f)
{
	fprintf(f,
		"usage: holo-bench serve [--model DIR | --random SPEC] [--sessions LIST] [--prompt N]\n"
		"                        [--decode N] [--rounds N] [--threads N] [--backend B]\n"
		"                        [--device N] [--precision P] [--ssm-state S] [--config FILE]\n"
		"                        [--roofline-sessions N] [--context N] [--profile]\n"
		"                        [--mixed N]\n"
		"  --random SPEC          key=value,... over holo-bench engine's ~0.7B bf16 model\n"
		"  --random-config FILE   random bf16 weights of a config.json's shapes\n"
		"  --sessions LIST        ascending session counts from 1 (default 1,2,4,8,16; at most %d)\n"
		"  --prompt N             tokens prefilled per session (default 32)\n"
		"  --decode N             batched decode steps timed per count and round (default 16)\n"
		"  --rounds N             rounds over all counts; the median is shown (default 3)\n"
		"  --backend B            auto, cpu or cuda (default auto)\n"
		"  --precision P          bf16 or fp32 (default $HOLOD_PRECISION, else the backend's)\n"
		"  --ssm-state S          the SSM state's storage, fp32 or bf16 (default fp32)\n"
		"  --config FILE          config.json of the roofline's shapes (default Holotron-12B's)\n"
		"  --roofline-sessions N  sessions of the roofline step (default 100)\n"
		"  --context N            cached tokens per session in the roofline (default 4096)\n"
		"  --profile              the backend's time per operation, one more round per count\n"
		"  --mixed N              a prefill chunk of N tokens beside each count's decode steps,\n"
		"                         in their forward and in one of its own (default 0: none)\n"
		"  --reference TOK_S      the largest count's goal in aggregate tok/s (e.g. vLLM's)\n",
		SERVE_MAX_SESSIONS);
}

static int parse_int(const char *s, int min, int max, int *ret)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		return -EINVAL;
	*ret = (int)v;
	return 0;
}

/* "1,2,4": ascending, first 1 */
static int parse_counts(const char *s, int *counts, int *ret_n)
{
	int n = 0;
	char buf[256];
	if (strlen(s) >= sizeof(buf))
		return -EINVAL;
	strcpy(buf, s);
	for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (n == SERVE_MAX_COUNTS || parse_int(tok, 1, SERVE_MAX_SESSIONS, &counts[n]) < 0 ||
		    (n == 0 && counts[0] != 1) || (n > 0 && counts[n] <= counts[n - 1]))
			return -EINVAL;
		n++;
	}
	if (n == 0)
		return -EINVAL;
	*ret_n = n;
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static int32_t argmax(const float *v, int n)
{
	int32_t best = 0;
	for (int i = 1; i < n; i++)
		if (v[i] > v[best])
			best = i;
	return best;
}

struct serve {
	struct engine_backend *backend;
	int vocab, prompt, decode;
	struct engine_session **sessions;
	struct engine_batch_entry *entries;
	int32_t *tokens; /* [sessions][prompt]: each session's prompt, then its next token at [0] */
	float *logits;	 /* [sessions][vocab] */
	/* --mixed: the chunk's session, tokens and logits */
	int chunk;
	struct engine_session *chunk_session;
	int32_t *chunk_tokens;
	float *chunk_logits;
};

/* Prefills `n` sessions in one batch and times `steps` batched decode steps: wall and CPU
 * seconds of the forward calls (profiled when `profile`: the profile starts after the prefill). */
static int run_count(struct serve *sv, int n, int steps, bool profile, double *ret_s, double *ret_cpu)
{
	size_t V = (size_t)sv->vocab;
	for (int i = 0; i < n; i++) {
		engine_session_reset(sv->sessions[i]);
		int32_t *t = sv->tokens + (size_t)i * sv->prompt;
		for (int k = 0; k < sv->prompt; k++)
			t[k] = (int32_t)(((uint64_t)k * 7919 + (uint64_t)i * 104729 + 13) % V);
		sv->entries[i] = (struct engine_batch_entry){.session = sv->sessions[i],
							     .tokens = t,
							     .n = (size_t)sv->prompt,
							     .want = ENGINE_LOGITS_LAST,
							     .ret_logits = sv->logits + (size_t)i * V};
	}
	int r = engine_forward_batch(sv->backend, sv->entries, (size_t)n);
	if (r == 0 && profile)
		r = engine_backend_profile(sv->backend, true);
	if (r < 0)
		return r;
	double wall = 0, cpu = 0;
	for (int s = 0; s < steps; s++) {
		for (int i = 0; i < n; i++) {
			int32_t *t = sv->tokens + (size_t)i * sv->prompt;
			t[0] = argmax(sv->logits + (size_t)i * V, sv->vocab);
			sv->entries[i].n = 1;
		}
		double c0 = bench_cpu_seconds();
		uint64_t t0 = time_mono_ns();
		r = engine_forward_batch(sv->backend, sv->entries, (size_t)n);
		wall += (double)(time_mono_ns() - t0) / 1e9;
		cpu += bench_cpu_seconds() - c0;
		if (r < 0)
			return r;
	}
	*ret_s = wall;
	*ret_cpu = cpu;
	return 0;
}

/* Prefills `n` sessions as run_count() does, then `steps` decode steps with the --mixed chunk
 * beside them: even steps in one forward with the decoders, odd ones in a forward of its own
 * after theirs (the chunk's session emptied before each, untimed). Returns the wall seconds of
 * each kind's steps. */
static int run_mixed(struct serve *sv, int n, int steps, double *ret_together, double *ret_apart)
{
	double w, c;
	int r = run_count(sv, n, 0, false, &w, &c);
	size_t V = (size_t)sv->vocab;
	*ret_together = *ret_apart = 0;
	for (int s = 0; s < steps && r >= 0; s++) {
		for (int i = 0; i < n; i++) {
			int32_t *t = sv->tokens + (size_t)i * sv->prompt;
			t[0] = argmax(sv->logits + (size_t)i * V, sv->vocab);
			sv->entries[i].n = 1;
		}
		engine_session_reset(sv->chunk_session);
		sv->entries[n] = (struct engine_batch_entry){.session = sv->chunk_session,
							     .tokens = sv->chunk_tokens,
							     .n = (size_t)sv->chunk,
							     .want = ENGINE_LOGITS_LAST,
							     .ret_logits = sv->chunk_logits};
		uint64_t t0 = time_mono_ns();
		if (s % 2 == 0) {
			r = engine_forward_batch(sv->backend, sv->entries, (size_t)n + 1);
			*ret_together += (double)(time_mono_ns() - t0) / 1e9;
		} else {
			r = engine_forward_batch(sv->backend, sv->entries, (size_t)n);
			if (r >= 0)
				r = engine_forward_batch(sv->backend, &sv->entries[n], 1);
			*ret_apart += (double)(time_mono_ns() - t0) / 1e9;
		}
	}
	return r;
}

/* What the model worker runs as plain jobs between two forwards, against one forward: a session
 * created for `context` tokens, and a snapshot of session 0 (as the last round left it) taken
 * and restored, the best of three each. */
static int print_state_costs(struct serve *sv, int context)
{
	double create = INFINITY, snap = INFINITY, restore = INFINITY;
	size_t bytes = 0;
	for (int k = 0; k < 3; k++) {
		uint64_t t0 = time_mono_ns();
		struct engine_session *s = engine_session_create_on(sv->backend, context);
		uint64_t t1 = time_mono_ns();
		if (!s)
			return -errno;
		engine_session_destroy(s);
		struct engine_snapshot *sn = engine_session_snapshot(sv->sessions[0]);
		uint64_t t2 = time_mono_ns();
		if (!sn)
			return -errno;
		int r = engine_session_restore(sv->sessions[0], sn);
		uint64_t t3 = time_mono_ns();
		bytes = engine_snapshot_bytes(sn);
		engine_snapshot_destroy(sn);
		if (r < 0)
			return r;
		create = fmin(create, (double)(t1 - t0) / 1e6);
		snap = fmin(snap, (double)(t2 - t1) / 1e6);
		restore = fmin(restore, (double)(t3 - t2) / 1e6);
	}
	printf("state session_create_ms=%.2f context=%d snapshot_ms=%.2f restore_ms=%.2f "
	       "snapshot_MiB=%.1f tokens=%d\n",
	       create, context, snap, restore, (double)bytes / (1 << 20),
	       engine_session_n_tokens(sv->sessions[0]));
	return 0;
}

static int print_roofline(const char *config, int sessions, int context)
{
	struct bench_shapes sh;
	char err[512];
	int r = bench_shapes_read(config, &sh, err, sizeof(err));
	if (r < 0) {
		fprintf(stderr, "holo-bench serve: %s\n", err);
		return r;
	}
	const struct lm_config *l = &sh.mc.lm;
	struct roofline_lm lm;
	bench_shapes_roofline_lm(&sh, &lm);
	const char *base = strrchr(config, '/');
	printf("roofline of one batched decode step: %s (%d layers, hidden %d), bf16 weights and KV, "
	       "fp32 conv window, the SSM state in fp32 then in bf16 (--ssm-state)\n",
	       base ? base + 1 : config, l->n_layers, l->hidden);
	static const char *const devices[] = {"h200", "h100"};
	static const int ssm_bytes[] = {4, 2};
	for (size_t k = 0; k < ARRAY_SIZE(ssm_bytes); k++) {
		lm.ssm_state_bytes = ssm_bytes[k];
		struct roofline_serve st;
		roofline_serve_step(&lm, sessions, context, &st);
		for (size_t i = 0; i < ARRAY_SIZE(devices); i++) {
			const struct roofline_device *d = roofline_device_find(devices[i]);
			double s = roofline_serve_seconds(d, &st);
			bool compute =
				roofline_seconds_flops(d, st.flops) >=
				roofline_seconds_bytes(d, st.weight_bytes + st.state_bytes + st.kv_bytes);
			printf("roofline device=%s sessions=%d context=%d tok/s=%.0f step_ms=%.2f "
			       "weights_GB=%.2f state_GB=%.2f kv_GB=%.2f bound=%s ssm_state=%s\n",
			       d->name, sessions, context, sessions / s, s * 1e3, st.weight_bytes / 1e9,
			       st.state_bytes / 1e9, st.kv_bytes / 1e9, compute ? "compute" : "memory",
			       ssm_bytes[k] == 4 ? "fp32" : "bf16");
		}
	}
	return 0;
}

int bench_serve_main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"model", required_argument, NULL, 'm'},
		{"random", required_argument, NULL, 'r'},
		{"sessions", required_argument, NULL, 's'},
		{"prompt", required_argument, NULL, 'p'},
		{"decode", required_argument, NULL, 'd'},
		{"rounds", required_argument, NULL, 'R'},
		{"threads", required_argument, NULL, 't'},
		{"backend", required_argument, NULL, 'b'},
		{"device", required_argument, NULL, 'D'},
		{"precision", required_argument, NULL, 'P'},
		{"config", required_argument, NULL, 'c'},
		{"roofline-sessions", required_argument, NULL, 'S'},
		{"context", required_argument, NULL, 'C'},
		{"help", no_argument, NULL, 'h'},
		{"profile", no_argument, NULL, 'F'},
		{"ssm-state", required_argument, NULL, 'X'},
		{"mixed", required_argument, NULL, 'M'},
		{"random-config", required_argument, NULL, 'Q'},
		{"reference", required_argument, NULL, 'V'},
		{0},
	};
	struct lm_random_spec sp;
	bench_engine_default_spec(&sp);
	const char *model_dir = NULL, *config = DEFAULT_CONFIG, *random_config = NULL;
	struct bench_shapes shapes;
	int reference = 0;
	char *spec = NULL;
	int counts[SERVE_MAX_COUNTS] = {1, 2, 4, 8, 16}, n_counts = 5;
	int prompt = 32, decode = 16, rounds = 3, threads = 0, roof_sessions = 100, context = 4096;
	int chunk = 0;
	bool profile = false;
	struct engine_backend_options bopts = {.kind = ENGINE_BACKEND_AUTO};
	const char *env_precision = getenv("HOLOD_PRECISION");
	if (env_precision && *env_precision && engine_precision_parse(env_precision, &bopts.precision) < 0) {
		fprintf(stderr, "holo-bench serve: HOLOD_PRECISION=%s: expected bf16 or fp32\n",
			env_precision);
		return 2;
	}
	optind = 1;
	for (int c; (c = getopt_long(argc, argv, "h", opts, NULL)) != -1;) {
		int r = 0;
		switch (c) {
		case 'm':
			model_dir = optarg;
			break;
		case 'r':
			spec = optarg;
			break;
		case 's':
			r = parse_counts(optarg, counts, &n_counts);
			break;
		case 'p':
			r = parse_int(optarg, 1, SERVE_MAX_TOKENS, &prompt);
			break;
		case 'd':
			r = parse_int(optarg, 1, SERVE_MAX_TOKENS, &decode);
			break;
		case 'R':
			r = parse_int(optarg, 1, SERVE_MAX_ROUNDS, &rounds);
			break;
		case 't':
			r = parse_int(optarg, 1, 1024, &threads);
			break;
		case 'b':
			r = engine_backend_kind_parse(optarg, &bopts.kind);
			break;
		case 'D':
			r = parse_int(optarg, 0, 1024, &bopts.device);
			break;
		case 'P':
			r = engine_precision_parse(optarg, &bopts.precision);
			break;
		case 'c':
			config = optarg;
			break;
		case 'S':
			r = parse_int(optarg, 1, ENGINE_BATCH_MAX_SESSIONS, &roof_sessions);
			break;
		case 'C':
			r = parse_int(optarg, 0, 1 << 24, &context);
			break;
		case 'F':
			profile = true;
			break;
		case 'X':
			r = engine_precision_parse(optarg, &bopts.ssm_state);
			break;
		case 'M':
			r = parse_int(optarg, 0, SERVE_MAX_TOKENS, &chunk);
			break;
		case 'Q':
			random_config = optarg;
			break;
		case 'V':
			r = parse_int(optarg, 1, 1 << 30, &reference);
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
		if (r < 0) {
			fprintf(stderr, "holo-bench serve: invalid value '%s'\n", optarg);
			return 2;
		}
	}
	if (optind != argc || !!model_dir + !!spec + !!random_config > 1) {
		usage(stderr);
		return 2;
	}
	if (spec && bench_engine_parse_spec(spec, &sp) < 0) {
		fprintf(stderr, "holo-bench serve: invalid --random spec\n");
		return 2;
	}
	if (random_config) {
		char err[512];
		if (bench_shapes_read(random_config, &shapes, err, sizeof(err)) < 0) {
			fprintf(stderr, "holo-bench serve: %s\n", err);
			return 1;
		}
		bench_shapes_lm_spec(&shapes, &sp);
	}
	if (threads && engine_set_threads(threads) < 0) {
		fprintf(stderr, "holo-bench serve: invalid thread count\n");
		return 2;
	}
	char msg[512] = "";
	if (engine_backend_resolve(&bopts, msg, sizeof(msg)) < 0) {
		fprintf(stderr, "holo-bench serve: %s\n", msg);
		return 1;
	}
	if (msg[0])
		printf("%s\n", msg);

	int ret = 1, r = 0;
	int max_n = counts[n_counts - 1];
	struct engine_model *m = NULL;
	struct serve sv = {.prompt = prompt, .decode = decode, .chunk = chunk};
	double *wall = NULL, *cpu = NULL;
	if (model_dir) {
		char err[512] = "";
		m = engine_model_load(model_dir, err, sizeof(err));
		if (!m) {
			fprintf(stderr, "holo-bench serve: %s: %s\n", model_dir, err);
			goto out;
		}
		printf("model %s\n", model_dir);
	} else {
		m = lm_random_model_create(&sp);
		if (!m) {
			fprintf(stderr, "holo-bench serve: cannot build the random model: %s\n",
				strerror(errno));
			goto out;
		}
		printf("random model%s%s: pattern %s, hidden %d, vocab %d, intermediate %d, dtype %s\n",
		       random_config ? " of the shapes of " : "", random_config ? random_config : "",
		       sp.pattern, sp.hidden, sp.vocab, sp.intermediate,
		       sp.dtype == TENSOR_BF16 ? "bf16" :
		       sp.dtype == TENSOR_F16  ? "f16" :
						 "f32");
	}
	sv.backend = engine_backend_create(m, &bopts, msg, sizeof(msg));
	if (!sv.backend) {
		fprintf(stderr, "holo-bench serve: %s\n", msg);
		goto out;
	}
	struct engine_backend_info binfo;
	engine_backend_get_info(sv.backend, &binfo);
	printf("backend %s (%s), %s, SSM state %s, %d threads\n", binfo.name, binfo.device,
	       engine_precision_name(binfo.precision), engine_precision_name(binfo.ssm_state),
	       engine_get_threads());
	sv.vocab = m->cfg.vocab;
	sv.sessions = calloc((size_t)max_n, sizeof(*sv.sessions));
	sv.entries = calloc((size_t)max_n + 1, sizeof(*sv.entries)); /* + the --mixed chunk */
	sv.tokens = malloc((size_t)max_n * (size_t)prompt * sizeof(*sv.tokens));
	sv.logits = malloc((size_t)max_n * (size_t)sv.vocab * sizeof(float));
	wall = calloc((size_t)n_counts * (size_t)rounds, sizeof(double));
	cpu = calloc((size_t)n_counts * (size_t)rounds, sizeof(double));
	if (!sv.sessions || !sv.entries || !sv.tokens || !sv.logits || !wall || !cpu) {
		r = -ENOMEM;
		goto fail;
	}
	for (int i = 0; i < max_n; i++)
		/* --mixed takes at least two steps, one of each kind */
		if (!(sv.sessions[i] = engine_session_create_on(sv.backend, prompt + (chunk ? MAX(decode, 2) :
											      decode)))) {
			r = -errno;
			goto fail;
		}
	if (chunk) {
		sv.chunk_tokens = malloc((size_t)chunk * sizeof(*sv.chunk_tokens));
		sv.chunk_logits = malloc((size_t)sv.vocab * sizeof(float));
		if (!sv.chunk_tokens || !sv.chunk_logits) {
			r = -ENOMEM;
			goto fail;
		}
		for (int k = 0; k < chunk; k++)
			sv.chunk_tokens[k] = (int32_t)(((uint64_t)k * 6007 + 29) % (uint64_t)sv.vocab);
		if (!(sv.chunk_session = engine_session_create_on(sv.backend, chunk))) {
			r = -errno;
			goto fail;
		}
	}

	/* warm-up: the weights faulted in, every count's scratch and products sized */
	for (int k = 0; k < n_counts; k++) {
		double w, c;
		if ((r = run_count(&sv, counts[k], 1, false, &w, &c)) < 0)
			goto fail;
	}
	bench_print_load();
	for (int round = 0; round < rounds; round++)
		for (int k = 0; k < n_counts; k++) {
			size_t at = (size_t)k * (size_t)rounds + (size_t)round;
			if ((r = run_count(&sv, counts[k], decode, false, &wall[at], &cpu[at])) < 0)
				goto fail;
		}
	bench_print_load();
	double base = 0;
	int nthreads = engine_get_threads();
	for (int k = 0; k < n_counts; k++) {
		/* the median round by wall time, and its CPU time */
		double sorted[SERVE_MAX_ROUNDS];
		memcpy(sorted, &wall[(size_t)k * rounds], (size_t)rounds * sizeof(double));
		qsort(sorted, (size_t)rounds, sizeof(double), cmp_double);
		double w = sorted[rounds / 2], c = 0;
		for (int i = 0; i < rounds; i++)
			if (wall[(size_t)k * rounds + i] == w)
				c = cpu[(size_t)k * rounds + i];
		double tokens = (double)counts[k] * decode, tps = tokens / w;
		if (k == 0)
			base = tps;
		bool last = k == n_counts - 1;
		printf("sessions=%d tok/s=%.2f speedup=%.2f step_ms=%.3f cpu_tok/s=%.2f", counts[k], tps,
		       tps / base, w / decode * 1e3, c > 0 ? tokens / (c / nthreads) : 0.0);
		if (last && reference)
			printf(" reference=%d ratio=%.3f", reference, tps / reference);
		printf("\n");
		char name[64];
		snprintf(name, sizeof(name), "serve.sessions%d.tok_s", counts[k]);
		bench_figure(name, tps, "tok/s", last && reference ? ">=" : NULL, reference);
		snprintf(name, sizeof(name), "serve.sessions%d.step_ms", counts[k]);
		bench_figure(name, w / decode * 1e3, "ms", NULL, 0);
	}
	if ((r = print_state_costs(&sv, context)) < 0)
		goto fail;
	for (int k = 0; profile && k < n_counts; k++) {
		double w, c;
		char **lines = NULL;
		if ((r = run_count(&sv, counts[k], decode, true, &w, &c)) < 0 ||
		    (r = engine_backend_profile_report(sv.backend, &lines)) < 0)
			goto fail;
		for (int i = 0; i < r; i++)
			printf("sessions=%d profile %s\n", counts[k], lines[i]);
		engine_backend_profile_free(lines);
		engine_backend_profile(sv.backend, false);
	}
	/* what the products' GFLOP/s above compare with: each bf16 unit's rate on the pool */
	static const char *const units[] = {"amx", "avx512bf16", "fma"};
	for (size_t u = 0; profile && u < ARRAY_SIZE(units); u++) {
		struct bench_peak pk;
		if (bench_bf16_peak(units[u], 0.3, &pk) == 0)
			printf("profile peak unit=%s threads=%d GFLOP/s=%.0f\n", units[u], nthreads,
			       pk.flops_per_s / 1e9);
	}
	for (int k = 0; chunk && k < n_counts; k++) {
		/* one warm-up step of each kind (the chunk's scratch sized), then the timed ones */
		double together, apart;
		int steps = MAX(decode, 2);
		if ((r = run_mixed(&sv, counts[k], 2, &together, &apart)) < 0 ||
		    (r = run_mixed(&sv, counts[k], steps, &together, &apart)) < 0)
			goto fail;
		together /= (steps + 1) / 2, apart /= steps / 2;
		printf("mixed sessions=%d chunk=%d together_ms=%.3f apart_ms=%.3f speedup=%.2f\n", counts[k],
		       chunk, together * 1e3, apart * 1e3, apart / together);
	}
	if (print_roofline(config, roof_sessions, context) < 0)
		goto out;
	ret = 0;
	goto out;
fail:
	fprintf(stderr, "holo-bench serve: %s\n", strerror(-r));
out:
	for (int i = 0; sv.sessions && i < max_n; i++)
		engine_session_destroy(sv.sessions[i]);
	engine_session_destroy(sv.chunk_session);
	free(sv.chunk_tokens);
	free(sv.chunk_logits);
	free(sv.sessions);
	free(sv.entries);
	free(sv.tokens);
	free(sv.logits);
	free(wall);
	free(cpu);
	engine_backend_destroy(sv.backend);
	if (model_dir)
		engine_model_destroy(m);
	else
		lm_random_model_destroy(m);
	return ret;
}
