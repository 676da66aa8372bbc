/* holo-bench agent --history: the prompt tokens each history mode prefills per step (issue 30).
 *
 *   holo-bench agent --history --model DIR [--config FILE] [--screen WxH] [--max-tiles N]
 *                    [--window K] [--context-cap N] [--step-tokens N] [--steps N]
 *                    [--device-spec h100|h200]
 *
 * A task of --steps steps (default 50) is rendered the way holod renders it, with the policy
 * renderer over DIR's tokenizer (the system prompt, "Task: ...", per step a tool result and a
 * screenshot, the canonical step of a click as the assistant turn), and each mode's step is
 * sized with holod's own fitting (daemon/agent-history.c):
 *   - persistent: the step's user turn and the close of its turn; at --context-cap the rebuild
 *     from the prefix with the recent history that fits half of the room;
 *   - window: the whole history from the prefix, the last K screenshots in full;
 *   - rolling: the observation leaving the window in evicted form plus the last K in full, from
 *     the rolling snapshot; a rebuild like persistent's when the snapshot would not fit.
 * Twice: with DIR's own vision shapes (tokens per tile, the tile grid of the screen: what holod
 * prefills with DIR), then predicted for --config's (default Holotron-12B's: 256 tokens per
 * tile, 9 tiles for 1920x1080), the text still counted by DIR's tokenizer. For the prediction,
 * the seconds a step's prefill takes at least: its FLOPs (roofline.c, attention over the context
 * included) over the GEMM rate measured here on --config's MLP shapes (bf16 through oneDNN, or
 * the fp32 products the forward runs where oneDNN has no bf16 on this CPU; this machine's CPU
 * threads) and over --device-spec's peak. Figures: agent.history.MODE.stepN tokens. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent-history.h"
#include "bench.h"
#include "common.h"
#include "cpu.h"
#include "cpu_dnnl.h"
#include "engine.h"
#include "lm.h"
#include "policy.h"
#include "roofline.h"
#include "shapes.h"

#define AH_MAX_STEPS 1000
#define AH_CLOSE_TOKENS 8 /* holod's CLOSE_TOKENS_MAX */
#define AH_GEMM_ROWS 512
#define AH_TASK "Open the text editor, type the meeting notes and save them as notes.txt."
#define AH_STEP                                                                                              \
	"{\"note\":null,\"thought\":\"Click the Save button in the toolbar.\","                              \
	"\"tool_call\":{\"tool_name\":\"click\",\"element\":\"Save button\",\"x\":512,"                      \
	"\"y\":48}}"

enum { AH_PERSISTENT, AH_WINDOW, AH_ROLLING, AH_MODES };
static const char *const mode_names[AH_MODES] = {"persistent", "window", "rolling"};

struct ah {
	struct policy_renderer *r;
	struct policy_observation *obs;
	struct policy_step *steps;
	size_t k; /* keep */
	long long prefix, decoded, close;
	long long cap, step_tokens;
	size_t index; /* for history_size */
};

static int window_size(struct ah *h, size_t first, size_t index, long long *ret)
{
	struct policy_piece p = {0};
	int r = policy_render_window(h->r, h->obs + first, h->steps + first, index - first, h->k, &p);
	if (r < 0)
		return r;
	*ret = (long long)p.n_ids;
	policy_piece_finish(&p);
	return 0;
}

static int history_size(void *userdata, size_t first, long long *ret_size)
{
	struct ah *h = userdata;
	long long n;
	int r = window_size(h, first, h->index, &n);
	if (r < 0)
		return r;
	*ret_size = h->prefix + n;
	return 0;
}

/* The first step of the recent history a rebuild (rebuild) or a window keeps; -ENOSPC. */
static int fit(struct ah *h, size_t index, bool rebuild, size_t *ret_first)
{
	long long limits[AGENT_HISTORY_MAX_LIMITS];
	size_t n = agent_history_limits(rebuild, h->cap, h->step_tokens, AH_CLOSE_TOKENS, h->prefix, limits);
	h->index = index;
	for (size_t l = 0; l < n; l++) {
		int r = agent_history_fit(index, limits[l], history_size, h, ret_first);
		if (r < 0)
			return r;
		if (*ret_first <= index)
			return 0;
	}
	return -ENOSPC;
}

static long long budget(const struct ah *h)
{
	return h->cap - h->step_tokens - AH_CLOSE_TOKENS;
}

/* Tokens prefilled by each mode at each step 0..n-1 (ret[mode][i]); rebuilds counted. */
static int simulate(struct ah *h, size_t n, long long *ret[AH_MODES], int rebuilds[AH_MODES])
{
	struct policy_piece p = {0}, ev = {0};
	long long session = h->prefix, base = h->prefix;
	size_t rf = 0, rh = 0, first;
	int r = 0;

	memset(rebuilds, 0, sizeof(int) * AH_MODES);
	for (size_t i = 0; i < n && r == 0; i++) {
		/* persistent */
		if ((r = policy_render_step(h->r, &h->obs[i], false, &p)) < 0)
			break;
		long long step = (long long)p.n_ids;
		policy_piece_finish(&p);
		if (session + step <= budget(h)) {
			ret[AH_PERSISTENT][i] = step + h->close;
			session += step + h->decoded + h->close;
		} else {
			long long w;
			if ((r = fit(h, i, true, &first)) < 0 || (r = window_size(h, first, i, &w)) < 0)
				break;
			ret[AH_PERSISTENT][i] = w + h->close;
			session = h->prefix + w + h->decoded + h->close;
			rebuilds[AH_PERSISTENT]++;
		}
		/* window */
		long long w;
		if ((r = fit(h, i, false, &first)) < 0 || (r = window_size(h, first, i, &w)) < 0)
			break;
		ret[AH_WINDOW][i] = w;
		/* rolling */
		size_t evicted = i + 1 - rf > h->k ? i + 1 - rf - h->k : 0;
		if ((r = policy_render_rolling(h->r, h->obs + rf, h->steps + rf, i - rf, h->k, rh, &ev, &p)) <
		    0)
			break;
		long long e = (long long)ev.n_ids, win = (long long)p.n_ids;
		policy_piece_finish(&ev);
		policy_piece_finish(&p);
		if (base + e + win <= budget(h)) {
			base += e;
			rh = evicted;
		} else {
			if ((r = fit(h, i, true, &first)) < 0 ||
			    (r = policy_render_rolling(h->r, h->obs + first, h->steps + first, i - first,
						       h->k, 0, &ev, &p)) < 0)
				break;
			e = (long long)ev.n_ids;
			win = (long long)p.n_ids;
			policy_piece_finish(&ev);
			policy_piece_finish(&p);
			base = h->prefix + e;
			rf = first;
			rh = i + 1 - first > h->k ? i + 1 - first - h->k : 0;
			rebuilds[AH_ROLLING]++;
		}
		ret[AH_ROLLING][i] = e + win;
	}
	return r;
}

/* One table: tokens per step, and with lm (the prediction) seconds per step. */
static int table(const char *what, const struct engine_tokenizer *tok, int tokens_per_tile, int n_tiles,
		 int sw, int sh, size_t k, long long cap, long long step_tokens, size_t n_steps,
		 const int *shown, size_t n_shown, const struct roofline_lm *lm, double cpu_flops,
		 const struct roofline_device *dev, const char *figure)
{
	struct policy_env env = {.screen_width = sw, .screen_height = sh, .date = "2026-11-29"};
	struct ah h = {.k = k, .cap = cap, .step_tokens = step_tokens};
	struct policy_piece prefix = {0}, a = {0}, c = {0};
	struct policy_tool_result res = {.tool = IPC_TOOL_CLICK, .text = "clicked left x1 at (983,52)"};
	long long *tokens[AH_MODES] = {0};
	int rebuilds[AH_MODES], r;
	char perr[256];

	h.r = policy_renderer_create(&policy_format_holo3, tok, &env, tokens_per_tile);
	if (!h.r)
		return -errno;
	h.obs = xcalloc(n_steps, sizeof(*h.obs));
	h.steps = xcalloc(n_steps, sizeof(*h.steps));
	for (size_t m = 0; m < AH_MODES; m++)
		tokens[m] = xcalloc(n_steps, sizeof(**tokens));
	for (size_t i = 0; i < n_steps; i++) {
		h.obs[i] = (struct policy_observation){.n_tiles = n_tiles, .result = i ? &res : NULL};
		if ((r = policy_step_parse(AH_STEP, strlen(AH_STEP), &h.steps[i], perr, sizeof(perr))) < 0)
			goto out;
	}
	if ((r = policy_render_prefix(h.r, AH_TASK, &prefix)) < 0 ||
	    (r = policy_render_assistant(h.r, &h.steps[0], &a)) < 0 || (r = policy_render_close(h.r, &c)) < 0)
		goto out;
	h.prefix = (long long)prefix.n_ids;
	h.close = (long long)c.n_ids;
	/* what a step decodes: its canonical step, about its assistant turn less the markers */
	h.decoded = (long long)a.n_ids - h.close;
	if ((r = simulate(&h, n_steps, tokens, rebuilds)) < 0)
		goto out;

	printf("%s: %d tiles x %d tokens per screenshot, prefix %lld tokens, a step decodes %lld, "
	       "K = %zu, --context-tokens %lld, --step-tokens %lld\n",
	       what, n_tiles, tokens_per_tile, h.prefix, h.decoded, k, cap, step_tokens);
	printf("  %-11s", "step");
	for (size_t s = 0; s < n_shown; s++)
		printf(" %9d", shown[s]);
	printf(" %9s %9s\n", "mean", "rebuilds");
	for (size_t m = 0; m < AH_MODES; m++) {
		long long sum = 0;
		for (size_t i = 0; i < n_steps; i++)
			sum += tokens[m][i];
		printf("  %-11s", mode_names[m]);
		for (size_t s = 0; s < n_shown; s++)
			printf(" %9lld", tokens[m][shown[s] - 1]);
		printf(" %9.0f %9d   tokens prefilled\n", (double)sum / (double)n_steps, rebuilds[m]);
		for (size_t s = 0; s < n_shown && figure; s++) {
			char name[96];
			snprintf(name, sizeof(name), "agent.history.%s.%s.step%d", figure, mode_names[m],
				 shown[s]);
			bench_figure(name, (double)tokens[m][shown[s] - 1], "tokens", NULL, 0);
		}
		if (!lm)
			continue;
		/* the context the step's prefill attends to: about the prefix and half the cap */
		for (int d = 0; d < 2; d++) {
			if ((d == 0 && cpu_flops <= 0) || (d == 1 && !dev))
				continue;
			printf("  %-11s", "");
			double mean = 0;
			for (size_t s = 0; s < n_shown; s++) {
				double f = roofline_prefill_flops(lm, (double)h.prefix,
								  (double)tokens[m][shown[s] - 1]);
				printf(" %9.1f", d == 0 ? f / cpu_flops : f / dev->flops * 1e3);
			}
			for (size_t i = 0; i < n_steps; i++)
				mean += roofline_prefill_flops(lm, (double)h.prefix, (double)tokens[m][i]);
			mean /= (double)n_steps;
			printf(" %9.1f %9s   %s\n", d == 0 ? mean / cpu_flops : mean / dev->flops * 1e3, "",
			       d == 0 ? "s of prefill at the CPU's measured GEMM rate" :
					"ms of prefill at the GPU's peak (roofline)");
		}
	}
	printf("\n");
out:
	if (r < 0)
		fprintf(stderr, "holo-bench agent --history: %s: %s\n", what, strerror(-r));
	for (size_t i = 0; i < n_steps; i++)
		policy_step_finish(&h.steps[i]);
	for (size_t m = 0; m < AH_MODES; m++)
		free(tokens[m]);
	free(h.obs);
	free(h.steps);
	policy_piece_finish(&prefix);
	policy_piece_finish(&a);
	policy_piece_finish(&c);
	policy_renderer_destroy(h.r);
	return r;
}

/* FLOP/s of the products of a prefill on one MLP layer of the config's shapes (random weights,
 * a small vocabulary): the CPU's GEMM rate at the model's matrix sizes, in bf16 through oneDNN
 * where this CPU has it, else the fp32 products the forward runs instead (lm_forward.c). */
static double cpu_gemm_rate(const struct bench_shapes *sh)
{
	struct lm_random_spec sp;
	bench_shapes_lm_spec(sh, &sp);
	sp.pattern = "-";
	sp.vocab = 256;
	sp.seed = 1;
	struct engine_model *m = lm_random_model_create(&sp);
	if (!m)
		return -errno;
	double flop = 0, t = bench_gemm_only_seconds(m, NULL, cpu_dnnl_bf16_supported(), AH_GEMM_ROWS, &flop);
	lm_random_model_destroy(m);
	return t > 0 && flop > 0 ? flop / t : -EIO;
}

int bench_agent_history(const char *model_dir, const char *config, int sw, int sh, int max_tiles, size_t k,
			long long cap, long long step_tokens, size_t n_steps,
			const struct roofline_device *dev)
{
	char err[512] = "";
	int shown[3] = {2, 10, (int)n_steps}, code = 1;
	size_t n_shown = n_steps > 10 ? 3 : n_steps >= 2 ? 1 : 0;

	if (n_steps < 2 || n_steps > AH_MAX_STEPS || k < 1) {
		fprintf(stderr, "holo-bench agent --history: --steps must be 2 to %d\n", AH_MAX_STEPS);
		return 2;
	}
	if (n_shown == 1)
		shown[0] = (int)n_steps;
	struct engine_model *m = engine_model_load(model_dir, err, sizeof(err));
	if (!m) {
		fprintf(stderr, "holo-bench agent --history: %s: %s\n", model_dir, err);
		return 1;
	}
	struct engine_vision *v = engine_vision_create(m, err, sizeof(err));
	const struct engine_tokenizer *tok = engine_model_tokenizer(m);
	struct bench_shapes shapes;
	struct engine_vision_preprocess pp;
	struct engine_vision_grid grid, pgrid;
	if (!v || !tok) {
		fprintf(stderr, "holo-bench agent --history: %s: %s\n", model_dir,
			v ? "no tokenizer.json" : err);
		goto out;
	}
	if (bench_shapes_read(config, &shapes, err, sizeof(err)) < 0 || !shapes.has_vision) {
		fprintf(stderr, "holo-bench agent --history: %s: %s\n", config,
			err[0] ? err : shapes.vision_err);
		goto out;
	}
	engine_vision_get_preprocess(v, &pp);
	if (engine_vision_select_grid(sw, sh, pp.tile_size, MIN(max_tiles, pp.max_tiles), pp.use_thumbnail,
				      &grid) < 0 ||
	    engine_vision_select_grid(sw, sh, shapes.vit.tile, max_tiles, shapes.use_thumbnail, &pgrid) < 0) {
		fprintf(stderr, "holo-bench agent --history: no tile grid for %dx%d\n", sw, sh);
		goto out;
	}
	printf("holo-bench agent --history: tokens prefilled per step by each history mode, "
	       "%zu steps of a %dx%d screen, holod's rendering and fitting\n",
	       n_steps, sw, sh);
	bench_print_load();
	printf("\n");
	if (table(model_dir, tok, engine_vision_tokens_per_tile(v), grid.n_tiles, sw, sh, k, cap, step_tokens,
		  n_steps, shown, n_shown, NULL, 0, NULL, "model") < 0)
		goto out;
	struct roofline_lm lm;
	bench_shapes_roofline_lm(&shapes, &lm);
	double rate = cpu_gemm_rate(&shapes);
	if (rate > 0)
		printf("CPU %s GEMM rate at %s's MLP shapes (%d x %d, %d rows, %d threads): "
		       "%.1f GFLOP/s\n",
		       cpu_dnnl_bf16_supported() ? "bf16" : "fp32 (no oneDNN bf16 here)", config,
		       shapes.mc.lm.intermediate, shapes.mc.lm.hidden, AH_GEMM_ROWS, cpu_threads(),
		       rate / 1e9);
	else
		printf("CPU GEMM rate: not measured (%s)\n", strerror((int)-rate));
	if (dev)
		printf("GPU: %s, %.0f TFLOP/s dense bf16\n", dev->name, dev->flops / 1e12);
	char what[600];
	snprintf(what, sizeof(what), "predicted for %s (text counted by %s's tokenizer)", config, model_dir);
	if (table(what, tok, roofline_tile_tokens(&shapes.vit), pgrid.n_tiles, sw, sh, k, cap, step_tokens,
		  n_steps, shown, n_shown, &lm, rate, dev, "predicted") < 0)
		goto out;
	code = 0;
out:
	engine_vision_destroy(v);
	engine_model_destroy(m);
	return code;
}
