/* holo-bench's models from a config.json's shapes (shapes.c): what the benchmarks read of a
 * NemotronH_Nano_VL_V2 (or bare nemotron_h) config.json, a checkpoint's or one committed
 * beside this file (holotron-12b-config.json: the real shapes; tiny-vl-config.json: the
 * emulated build's), and the random language model and vision tower of those shapes that
 * they measure when no checkpoint is at hand (nothing downloaded).
 *
 * config.json names the ViT (vision_config.args.model) without its depth, MLP width or heads:
 * those come from the table of timm names in shapes.c (vision_config.num_attention_heads, when
 * present, gives the heads).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "loader.h"
#include "roofline.h"

struct lm_random_spec;
struct lm_random_vision_spec;
struct engine_image;

struct bench_shapes {
	struct model_config mc; /* the language model's (model_config_from_json()) */
	/* The vision tower's, when has_vision; otherwise vision_err says why not. */
	bool has_vision;
	char vision_err[160];
	struct roofline_vit vit;
	int vit_heads;
	int pos_grid;  /* position grid side: vision_config.args.cpe_max_size / patch (0: none) */
	int max_tiles; /* max_num_tiles (default 12) */
	bool use_thumbnail;
	int32_t image_token; /* img_context_token_id, or -ENOENT */
};

/* Reads `path`. 0, or -errno with one sentence in err (the file, or its language model's
 * shapes); a vision tower that cannot be read leaves has_vision false (vision_err). */
int bench_shapes_read(const char *path, struct bench_shapes *ret, char *err, size_t errlen);
/* The roofline's language model: bf16 weights and KV cache, fp32 state. ret->pattern points
 * into s. */
void bench_shapes_roofline_lm(const struct bench_shapes *s, struct roofline_lm *ret);
/* A random bf16 model of s's language-model shapes (seed 1); sp->pattern points into s. */
void bench_shapes_lm_spec(const struct bench_shapes *s, struct lm_random_spec *ret);
/* A random vision tower of s's shapes (has_vision; seed 2), with the default normalisation. */
void bench_shapes_vision_spec(const struct bench_shapes *s, struct lm_random_vision_spec *ret);

/* A deterministic width x height screenshot: gradients with a grid of lines, like a window's
 * edges. NULL + errno. */
struct engine_image *bench_synthetic_screen(int width, int height);
