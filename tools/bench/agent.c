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
 * It prints the prediction only: timing the parts on a device is not part of this command yet.
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "common.h"
#include "engine.h"
#include "loader.h"
#include "roofline.h"

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
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: holo-bench agent --device-spec h100|h200 [--config FILE] [--screen WxH]\n"
		"                        [--max-tiles N] [--prefix N] [--text N] [--decode N]\n"
		"                        [--context-cap N] [--steps A,B]\n"
		"  --device-spec D  the GPU whose peak rates the prediction uses\n"
		"  --config FILE    a checkpoint's config.json (default " DEFAULT_CONFIG ")\n"
		"  --screen WxH     screenshot size (default 1920x1080)\n"
		"  --max-tiles N    tile budget (default 12, the checkpoint's)\n"
		"  --prefix N       tokens of the system prompt and task (default 2000)\n"
		"  --text N         text tokens of a step's turn besides the image (default 50)\n"
		"  --decode N       tokens decoded per step (default 60)\n"
		"  --context-cap N  session size, holod's --context-tokens (default 32768)\n"
		"  --steps A,B      persistent steps to show (default 2,50)\n");
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

int bench_agent_main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"device-spec", required_argument, NULL, 'd'}, {"config", required_argument, NULL, 'c'},
		{"screen", required_argument, NULL, 's'},      {"max-tiles", required_argument, NULL, 't'},
		{"prefix", required_argument, NULL, 'p'},      {"text", required_argument, NULL, 'x'},
		{"decode", required_argument, NULL, 'n'},      {"context-cap", required_argument, NULL, 'C'},
		{"steps", required_argument, NULL, 'k'},       {"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const struct roofline_device *dev = NULL;
	const char *config = DEFAULT_CONFIG;
	int sw = 1920, sh = 1080, max_tiles = 12, prefix = 2000, text = 50, decode = 60;
	int cap = 32768, steps[2] = {2, 50};
	int c;

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
			r = parse_pair(optarg, ',', &steps[0], &steps[1]);
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
	if (optind != argc || !dev) {
		fprintf(stderr, "holo-bench agent: name the GPU with --device-spec h100|h200 (the "
				"prediction from the model's FLOP and byte counts)\n");
		usage(stderr);
		return 2;
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
