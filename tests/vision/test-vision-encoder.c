/* The vision encoder and projector against the PyTorch reference (tests/fixtures/vision,
 * tools/make_vision_golden.py: timm ViT blocks + RADIO's CPE patch generator + the NVIDIA/vLLM
 * pixel_shuffle + mlp1, in float64 on the tiny checkpoint's bf16-valued weights).
 *
 * Tolerances (the C code computes in fp32; the reference is exact float64 math):
 *   position embedding  2e-6                  (fp32 bilinear as torch does it; measured: equal)
 *   ViT features        3e-5 + 3e-5 * |ref|   (values up to ~10; measured max 4.8e-6)
 *   projector rows      3e-5 + 3e-5 * |ref|   (values up to ~3; measured max 1.2e-5)
 * i.e. a few times the measured fp32 error, far below what a wrong layout, order, eps or
 * activation would produce (such bugs give errors of order 0.01-1). */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "cpu.h"
#include "engine.h"
#include "golden.h"
#include "image.h"
#include "lm.h"
#include "model.h"
#include "vision.h"
#include "vision_cpu.h"

TEST_DEFINE_GLOBALS;

#define POS_TOL 2e-6
#define ABS_TOL 3e-5
#define REL_TOL 3e-5

static struct engine_model *load_model(const char *name)
{
	char path[4096], err[256];
	struct engine_model *m;

	snprintf(path, sizeof(path), "%s/tests/fixtures/%s", golden_source_root(), name);
	m = engine_model_load(path, err, sizeof(err));
	if (!m) {
		fprintf(stderr, "%s: %s\n", path, err);
		exit(1);
	}
	return m;
}

/* max over i of |got - want| / (ABS_TOL + REL_TOL * |want|): <= 1 passes. */
struct scaled_err {
	double worst, max_abs;
	size_t at;
};

static void scaled_add(struct scaled_err *e, float got, float want, size_t i)
{
	double d = fabs((double)got - want), s = d / (ABS_TOL + REL_TOL * fabs((double)want));

	if (!(s <= e->worst)) {
		e->worst = s != s ? 1e30 : s;
		e->at = i;
	}
	if (!(d <= e->max_abs))
		e->max_abs = d != d ? 1e30 : d;
}

static void test_pos(const struct vision_weights *w)
{
	struct st_file *f = golden_open("pos.safetensors");
	const float *rows, *p32, *p58;
	float *got = malloc(sizeof(float) * 48 * 48 * (size_t)w->width);
	struct golden_diff d = {0};
	size_t n_rows;

	REQUIRE(got);
	rows = golden_get(f, "pos.32x32.rows", &n_rows);
	p32 = golden_get(f, "pos.32x32", NULL);
	p58 = golden_get(f, "pos.5x8", NULL);
	CHECK_INT_EQ(vision_pos_embed(w, 32, 32, got), 0);
	for (size_t k = 0; k < n_rows; k++)
		for (int c = 0; c < w->width; c++)
			golden_diff_add(&d, got[(size_t)rows[k] * w->width + c], p32[k * w->width + c], k);
	printf("pos 48x48 -> 32x32: max |diff| %.3g\n", d.max_abs);
	CHECK(d.max_abs <= POS_TOL);

	memset(&d, 0, sizeof(d));
	CHECK_INT_EQ(vision_pos_embed(w, 5, 8, got), 0);
	for (size_t k = 0; k < (size_t)5 * 8 * w->width; k++)
		golden_diff_add(&d, got[k], p58[k], k);
	printf("pos 48x48 -> 5x8 window: max |diff| %.3g\n", d.max_abs);
	CHECK(d.max_abs <= POS_TOL);

	/* the grid's own size is the grid itself */
	CHECK_INT_EQ(vision_pos_embed(w, 48, 48, got), 0);
	{
		float first[4];

		cpu_tensor_to_f32(&w->pos_embed, 0, 4, first);
		CHECK(memcmp(first, got, sizeof(first)) == 0);
	}
	free(got);
	st_file_destroy(f);
}

/* The CPU backend in bf16 precision (oneDNN's products), for the bf16-vs-fp32 check. */
static struct engine_backend *bf16_backend;

/* Smallest cosine similarity over rows of dim floats, in double. */
static double min_row_cosine(const float *a, const float *b, size_t rows, size_t dim)
{
	double worst = 1;
	for (size_t r = 0; r < rows; r++) {
		double ab = 0, aa = 0, bb = 0;
		for (size_t i = 0; i < dim; i++) {
			double x = a[r * dim + i], y = b[r * dim + i];
			ab += x * y, aa += x * x, bb += y * y;
		}
		worst = fmin(worst, ab / sqrt(aa * bb));
	}
	return worst;
}

static void test_case(const struct engine_vision *v, const struct vision_weights *w, const char *image,
		      int max_tiles)
{
	char name[64], err[256];
	struct st_file *f;
	struct engine_image *img;
	struct engine_vision_preprocess p;
	struct engine_vision_grid g;
	const float *grid, *frows, *feats, *proj;
	float *px = NULL, *feat, *pos, *out, *out2 = NULL;
	struct scaled_err ef = {0}, ep = {0};
	size_t n_frows, n_proj, rows;
	int gp, tpt, dim;

	snprintf(name, sizeof(name), "%s-t%d.safetensors", image, max_tiles);
	f = golden_open(name);
	snprintf(name, sizeof(name), "%s.png", image);
	img = engine_image_load_png(golden_path(name), err, sizeof(err));
	REQUIRE(img);
	grid = golden_get(f, "grid", NULL);
	frows = golden_get(f, "feature_rows", &n_frows);
	feats = golden_get(f, "features", NULL);
	proj = golden_get(f, "projector", &n_proj);

	engine_vision_get_preprocess(v, &p);
	p.max_tiles = max_tiles;
	REQUIRE(engine_vision_preprocess(img, &p, &g, &px) == 0);
	REQUIRE(g.n_tiles == (int)grid[3]);
	gp = p.tile_size / w->patch;
	tpt = engine_vision_tokens_per_tile(v);
	dim = engine_vision_embed_dim(v);
	CHECK_INT_EQ(n_proj, (size_t)g.n_tiles * tpt * dim);

	/* Every tile through the ViT (features checked at the golden's sampled token rows) and the
	 * projector (all rows checked). */
	feat = malloc(sizeof(float) * (size_t)gp * gp * w->width);
	pos = malloc(sizeof(float) * (size_t)gp * gp * w->width);
	out = malloc(sizeof(float) * n_proj);
	REQUIRE(feat && pos && out);
	CHECK_INT_EQ(vision_pos_embed(w, gp, gp, pos), 0);
	for (int t = 0; t < g.n_tiles; t++) {
		CHECK_INT_EQ(vision_vit_forward(w, px + (size_t)t * 3 * p.tile_size * p.tile_size, gp, gp,
						pos, feat),
			     0);
		for (size_t k = 0; k < n_frows; k++)
			for (int c = 0; c < w->width; c++)
				scaled_add(&ef, feat[(size_t)frows[k] * w->width + c],
					   feats[((size_t)t * n_frows + k) * w->width + c], k);
		CHECK_INT_EQ(vision_project(w, feat, gp, gp, out + (size_t)t * tpt * dim), 0);
	}
	printf("%s, %d tiles: features %zu values, max |diff| %.3g (scaled %.3g)\n", image, g.n_tiles,
	       (size_t)g.n_tiles * n_frows * w->width, ef.max_abs, ef.worst);
	CHECK(ef.worst <= 1.0);
	for (size_t k = 0; k < n_proj; k++)
		scaled_add(&ep, out[k], proj[k], k);
	printf("%s, %d tiles: projector %zu values, max |diff| %.3g (scaled %.3g)\n", image, g.n_tiles,
	       n_proj, ep.max_abs, ep.worst);
	CHECK(ep.worst <= 1.0);
	free(feat);
	free(pos);

	/* The public path (preprocess + encode, position embedding cached in the handle) gives the
	 * same rows; run on one-tile images only, to keep the test fast under sanitizers. */
	if (g.n_tiles == 1) {
		CHECK_INT_EQ(engine_vision_encode_image(v, img, max_tiles, &g, &out2, &rows), 0);
		CHECK_INT_EQ(rows * (size_t)dim, n_proj);
		if (out2)
			CHECK(memcmp(out, out2, sizeof(float) * n_proj) == 0);
	}
	free(out2);

	/* --precision bf16 on the CPU (the products' inputs rounded to bf16, through oneDNN):
	 * every projector row within cosine 0.999 of fp32 */
	float *out16 = malloc(sizeof(float) * n_proj);
	REQUIRE(out16);
	CHECK_INT_EQ(engine_vision_encode_on(bf16_backend, v, px, g.n_tiles, out16), 0);
	double cos16 = min_row_cosine(out16, out, n_proj / (size_t)dim, (size_t)dim);
	printf("%s, %d tiles: bf16 projector rows, min cosine to fp32 %.6f\n", image, g.n_tiles, cos16);
	CHECK(cos16 >= 0.999);
	free(out16);
	free(out);
	free(px);
	engine_image_destroy(img);
	st_file_destroy(f);
}

/* Checkpoints without a usable vision tower, and shape errors the checker must name. */
static void test_errors(const struct vision_weights *good)
{
	struct engine_model *m;
	struct vision_weights w;
	struct vision_block blocks[2];
	char err[256];

	m = load_model("models/tiny-mamba");
	errno = 0;
	err[0] = 0;
	CHECK(engine_vision_create(m, err, sizeof(err)) == NULL);
	CHECK_INT_EQ(errno, ENOENT);
	CHECK(strstr(err, "no vision tower") != NULL);
	engine_model_destroy(m);

	/* tiny-vl has a few vision tensors but no blocks and no head count */
	m = load_model("models/tiny-vl");
	errno = 0;
	err[0] = 0;
	CHECK(engine_vision_create(m, err, sizeof(err)) == NULL);
	CHECK_INT_EQ(errno, EINVAL);
	CHECK(err[0] != 0);
	engine_model_destroy(m);

	REQUIRE(good->depth == 2);
	w = *good;
	memcpy(blocks, good->blocks, sizeof(blocks));
	w.blocks = blocks;
	blocks[1].qkv_w = good->blocks[1].proj_w;
	CHECK_INT_EQ(vision_weights_check(&w, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "blocks.1.attn.qkv.weight") != NULL);

	w = *good;
	w.blocks = blocks;
	memcpy(blocks, good->blocks, sizeof(blocks));
	w.heads = 5;
	CHECK_INT_EQ(vision_weights_check(&w, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "heads") != NULL);

	w = *good;
	w.blocks = blocks;
	w.norm_w = good->blocks[0].norm1_w; /* a final norm weight without its bias */
	CHECK_INT_EQ(vision_weights_check(&w, err, sizeof(err)), -EINVAL);

	w = *good;
	w.blocks = blocks;
	w.mlp1_fc3 = good->mlp1_fc1; /* projector output that does not take mlp1.1's rows */
	CHECK_INT_EQ(vision_weights_check(&w, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "mlp1.3.weight") != NULL);

	/* a valid copy still passes (the checks above failed for their own reason) */
	w = *good;
	w.blocks = blocks;
	CHECK_INT_EQ(vision_weights_check(&w, err, sizeof(err)), 0);
}

static int write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	if (!f)
		return -1;
	fputs(text, f);
	return fclose(f);
}

/* config.json's preprocessing, then preprocessor_config.json over it. */
static void test_preprocessor_config(struct engine_model *m)
{
	struct engine_vision *v;
	struct engine_vision_preprocess p;
	char dir[] = "/tmp/holo-vision-pre-XXXXXX", path[64], err[256];

	v = engine_vision_create(m, err, sizeof(err));
	REQUIRE(v);
	engine_vision_get_preprocess(v, &p);
	CHECK_INT_EQ(p.tile_size, 512);
	CHECK_INT_EQ(p.max_tiles, 12);
	CHECK(p.use_thumbnail);
	CHECK_NEAR(p.std[2], 0.27577711, 1e-7);
	CHECK_INT_EQ(engine_vision_read_preprocessor_config(v,
							    golden_path("tiny-vlm/preprocessor_config.json"),
							    err, sizeof(err)),
		     0);

	REQUIRE(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/pre.json", dir);
	REQUIRE(write_file(path, "{\"image_size\": 512, \"max_num_tiles\": 6, \"use_thumbnail\": false,"
				 " \"norm_std\": [0.5, 0.25, 0.125]}") == 0);
	CHECK_INT_EQ(engine_vision_read_preprocessor_config(v, path, err, sizeof(err)), 0);
	engine_vision_get_preprocess(v, &p);
	CHECK_INT_EQ(p.max_tiles, 6);
	CHECK(!p.use_thumbnail);
	CHECK(p.std[2] == 0.125f);
	CHECK_NEAR(p.mean[0], 0.48145466, 1e-7);

	REQUIRE(write_file(path, "{\"image_size\": 448}") == 0);
	CHECK_INT_EQ(engine_vision_read_preprocessor_config(v, path, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "448") != NULL);
	REQUIRE(write_file(path, "{\"norm_std\": [0.5, 0, 1]}") == 0);
	CHECK_INT_EQ(engine_vision_read_preprocessor_config(v, path, err, sizeof(err)), -EINVAL);
	REQUIRE(write_file(path, "{\"max_num_tiles\": 6") == 0);
	CHECK_INT_EQ(engine_vision_read_preprocessor_config(v, path, err, sizeof(err)), -EINVAL);
	/* The broken file is named, not config.json. */
	CHECK(strncmp(err, path, strlen(path)) == 0 && strstr(err, ": malformed JSON at line 1"));
	engine_vision_get_preprocess(v, &p);
	CHECK_INT_EQ(p.max_tiles, 6); /* failed reads changed nothing */
	CHECK(p.std[1] == 0.25f);
	unlink(path);
	CHECK_INT_EQ(engine_vision_read_preprocessor_config(v, path, err, sizeof(err)), -ENOENT);
	rmdir(dir);
	engine_vision_destroy(v);
}

/* A random tower (lm_random_vision_create(), what holo-bench measures without a checkpoint):
 * the spec's shapes, a handle that owns its weights (it encodes after the model is gone), the
 * same rows from the same seed, other weights from another, and the spec's errors refused. */
static void encode_random(const struct lm_random_vision_spec *vs, float *rows, size_t n_rows)
{
	struct lm_random_spec sp = {.pattern = "M*-",
				    .hidden = 32,
				    .vocab = 96,
				    .intermediate = 64,
				    .n_heads = 2,
				    .n_kv_heads = 1,
				    .head_dim = 16,
				    .m_heads = 4,
				    .m_head_dim = 8,
				    .m_groups = 1,
				    .m_state = 8,
				    .m_conv_kernel = 4,
				    .m_chunk = 8,
				    .dtype = TENSOR_BF16,
				    .seed = 1};
	struct engine_model *m = lm_random_model_create(&sp);
	char err[256] = "";
	REQUIRE(m);
	struct engine_vision *v = lm_random_vision_create(m, vs, err, sizeof(err));
	if (!v)
		fprintf(stderr, "lm_random_vision_create: %s\n", err);
	REQUIRE(v);
	lm_random_model_destroy(m);

	const struct vision_weights *w = engine_vision_weights(v);
	struct engine_vision_preprocess p;
	engine_vision_get_preprocess(v, &p);
	CHECK_INT_EQ(w->width, 32);
	CHECK_INT_EQ(w->depth, 2);
	CHECK_INT_EQ(w->heads, 2);
	CHECK_INT_EQ(w->mlp, 64);
	CHECK_INT_EQ(w->n_prefix, 4);
	CHECK_INT_EQ(w->pos_rows, 4);
	CHECK_INT_EQ(w->proj_hidden, 48);
	CHECK_INT_EQ(engine_vision_embed_dim(v), 32);
	CHECK_INT_EQ(engine_vision_tokens_per_tile(v), 4); /* (64 / 16 / 2)^2 */
	CHECK_INT_EQ(engine_vision_image_token(v), 90);
	CHECK_INT_EQ(p.tile_size, 64);
	CHECK_INT_EQ(p.max_tiles, 4);

	uint8_t px[100 * 60 * 3];
	for (size_t i = 0; i < sizeof(px); i++)
		px[i] = (uint8_t)(i * 37 % 251);
	struct engine_image *img = engine_image_from_rgb(100, 60, 300, px);
	struct engine_vision_grid g;
	float *pixels = NULL;
	REQUIRE(img);
	REQUIRE(engine_vision_preprocess(img, &p, &g, &pixels) == 0);
	CHECK_INT_EQ(g.n_tiles, 3); /* 2 x 1 and the thumbnail */
	REQUIRE((size_t)g.n_tiles * 4 * 32 == n_rows);
	CHECK_INT_EQ(engine_vision_encode(v, pixels, g.n_tiles, rows), 0);
	double sq = 0;
	for (size_t i = 0; i < n_rows; i++)
		sq += (double)rows[i] * rows[i];
	CHECK(isfinite(sq) && sq > 0);
	free(pixels);
	engine_image_destroy(img);
	engine_vision_destroy(v);
}

static void test_random_tower(void)
{
	struct lm_random_vision_spec vs = {.width = 32,
					   .depth = 2,
					   .heads = 2,
					   .mlp = 64,
					   .patch = 16,
					   .n_prefix = 4,
					   .pos_grid = 4,
					   .shuffle = 2,
					   .proj_hidden = 48,
					   .image_token = 90,
					   .seed = 3};
	engine_vision_preprocess_defaults(&vs.pre);
	vs.pre.tile_size = 64;
	vs.pre.max_tiles = 4;
	float a[3 * 4 * 32], b[3 * 4 * 32], c[3 * 4 * 32];
	encode_random(&vs, a, 3 * 4 * 32);
	encode_random(&vs, b, 3 * 4 * 32);
	CHECK(memcmp(a, b, sizeof(a)) == 0);
	vs.seed = 4;
	encode_random(&vs, c, 3 * 4 * 32);
	CHECK(memcmp(a, c, sizeof(a)) != 0);

	struct lm_random_spec sp = {.pattern = "M",
				    .hidden = 32,
				    .vocab = 16,
				    .intermediate = 32,
				    .n_heads = 2,
				    .n_kv_heads = 1,
				    .head_dim = 16,
				    .m_heads = 4,
				    .m_head_dim = 8,
				    .m_groups = 1,
				    .m_state = 8,
				    .m_conv_kernel = 4,
				    .m_chunk = 8,
				    .dtype = TENSOR_BF16,
				    .seed = 1};
	struct engine_model *m = lm_random_model_create(&sp);
	char err[256] = "";
	REQUIRE(m);
	struct {
		const char *what, *message;
		struct lm_random_vision_spec vs;
	} bad[] = {{"no position grid", "out of range", vs},
		   {"3 heads", "heads", vs},
		   {"a 72-pixel tile", "tile size 72", vs},
		   {"no tile budget", "tile budget", vs}};
	bad[0].vs.pos_grid = 0;
	bad[1].vs.heads = 3;
	bad[2].vs.pre.tile_size = 72;
	bad[3].vs.pre.max_tiles = 0;
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		err[0] = '\0';
		errno = 0;
		struct engine_vision *v = lm_random_vision_create(m, &bad[i].vs, err, sizeof(err));
		CHECK(!v);
		CHECK_INT_EQ(errno, EINVAL);
		if (!strstr(err, bad[i].message))
			fprintf(stderr, "%s: '%s' does not say '%s'\n", bad[i].what, err, bad[i].message);
		CHECK(strstr(err, bad[i].message) != NULL);
		engine_vision_destroy(v);
	}
	lm_random_model_destroy(m);
}

int main(void)
{
	struct engine_model *model = load_model("vision/tiny-vlm");
	struct engine_vision *v;
	struct vision_weights w;
	char err[256];

	v = engine_vision_create(model, err, sizeof(err));
	if (!v) {
		fprintf(stderr, "engine_vision_create: %s\n", err);
		return 1;
	}
	REQUIRE(vision_weights_load(&w, model->files, err, sizeof(err)) == 0);
	CHECK_INT_EQ(w.width, 64);
	CHECK_INT_EQ(w.depth, 2);
	CHECK_INT_EQ(w.heads, 4);
	CHECK_INT_EQ(w.n_prefix, 8);
	CHECK_INT_EQ(w.pos_rows, 48);
	CHECK_INT_EQ(engine_vision_tokens_per_tile(v), 256);
	CHECK_INT_EQ(engine_vision_image_token(v), 250);
	CHECK_INT_EQ(engine_vision_embed_dim(v), 64);

	struct engine_backend_options bo = {.kind = ENGINE_BACKEND_CPU, .precision = ENGINE_PRECISION_BF16};
	bf16_backend = engine_backend_create(model, &bo, err, sizeof(err));
	REQUIRE(bf16_backend);

	test_errors(&w);
	test_preprocessor_config(model);
	test_pos(&w);
	test_case(v, &w, "square", 12);
	test_case(v, &w, "small", 2);
	test_random_tower();

	vision_weights_finish(&w);
	engine_backend_destroy(bf16_backend);
	engine_vision_destroy(v);
	engine_model_destroy(model);
	return test_exit();
}
