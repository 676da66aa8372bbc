/* The whole vision encoder on the CUDA device (engine/backend/cuda/vision_cuda.c) against the CPU engine on
 * the tiny VL checkpoint (tests/fixtures/vision/tiny-vlm) and a fixture image (small.png,
 * preprocessed by the CPU path into two tiles and the thumbnail): the ViT features and the
 * projector rows through the device vs vision_vit_forward() and vision_project(). Runs on a
 * device (suite `gpu`, 77 without one) and in the CUDA emulation (`gpu-emu`).
 *
 * The checkpoint's 512-pixel tiles (1032 tokens) take minutes in the emulation, so the test
 * encodes the top-left windows of the tiles as smaller tiles of 4 x 4 patches (24 tokens) and
 * 6 x 6 patches (44 tokens: attention over more than one chunk of keys), with the position grid
 * the CPU computes for that size; on a device the full tile runs too.
 *
 * Acceptance (issue 12):
 * - fp32 precision: NMSE = sum (got - want)^2 / sum want^2 <= 1e-9 for features and for rows,
 *   over all tiles (fp32 GEMMs without TF32; the only differences are summation orders and the
 *   statistics of the norms in fp32 instead of double);
 * - bf16 precision: cosine similarity >= 0.999 for every projector row and every feature row
 *   (bf16 weights and GEMM inputs, fp32 everywhere else).
 * - The MLP's GELU is the exact (erf) one, as on the CPU: with weights that make the tanh form
 *   miss by an NMSE of 5e-5, fp32 still within 1e-9 (check_mlp_gelu()).
 * Preprocessing on the device: tiles within 1/255 of engine_vision_preprocess()'s (pixel units).
 * An encode with more tiles after a smaller one (buffers grow) gives the thumbnail's rows as
 * alone within NMSE 1e-9 (fp32) or cosine 0.9999 (bf16), not bit for bit: three tiles' GEMMs
 * have 3x the rows, for which cuBLASLt picks another algorithm (the emulation's stand-in its own
 * split-K); and a
 * profiled encode lists every vision kernel and GEMM site.
 * The backend seam (engine_vision_encode_on()): the CPU backend gives engine_vision_encode()'s
 * rows bit for bit, a CUDA backend the rows within the same bounds, on the tiny checkpoint with
 * its tile size set to 64 pixels (a temporary copy of its config) and a 6-tile observation.
 * Embedding rows (engine_vision_encode_image_on(), engine_session_append_rows()): check_rows(). */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "cpu.h"
#include "engine.h"
#include "gpu.h"
#include "image.h"
#include "model.h"
#include "test.h"
#include "vision.h"
#include "vision_cpu.h"
#include "vision_cuda.h"

TEST_DEFINE_GLOBALS;

static double nmse(const float *got, const float *want, size_t n)
{
	double e = 0, s = 0;
	for (size_t i = 0; i < n; i++) {
		double d = (double)got[i] - want[i];
		e += d * d;
		s += (double)want[i] * want[i];
	}
	return e / s;
}

/* The smallest cosine similarity over rows of dim floats. */
static double min_cosine(const float *got, const float *want, size_t rows, size_t dim)
{
	double worst = 1;
	for (size_t r = 0; r < rows; r++) {
		double dot = 0, gg = 0, ww = 0;
		for (size_t c = 0; c < dim; c++) {
			double a = got[r * dim + c], b = want[r * dim + c];
			dot += a * b;
			gg += a * a;
			ww += b * b;
		}
		double cs = dot / sqrt(gg * ww);
		if (!(cs >= worst))
			worst = cs != cs ? -2 : cs;
	}
	return worst;
}

struct fixture {
	const struct vision_weights *w;
	const float *pixels; /* preprocessed 512-pixel tiles */
	int tiles, tile_size;
};

/* The top-left (grid * patch)-pixel window of each tile, as tiles of that size. */
static float *crop(const struct fixture *f, int grid)
{
	int side = grid * f->w->patch;
	float *out = xmalloc(sizeof(float) * 3 * side * side * f->tiles);
	for (int t = 0; t < f->tiles; t++)
		for (int c = 0; c < 3; c++)
			for (int y = 0; y < side; y++)
				memcpy(out + (((size_t)t * 3 + c) * side + y) * side,
				       f->pixels + (((size_t)t * 3 + c) * f->tile_size + y) * f->tile_size,
				       sizeof(float) * side);
	return out;
}

static void check_grid(struct gpu_context *g, const struct fixture *f, int grid)
{
	const struct vision_weights *w = f->w;
	const int tiles = f->tiles, per = (grid / w->shuffle) * (grid / w->shuffle);
	const size_t dim = (size_t)w->out_dim, n_rows = (size_t)tiles * per;
	const size_t feat_tile = (size_t)grid * grid * w->width,
		     tile_px = (size_t)3 * grid * w->patch * grid * w->patch;
	float *pixels = grid * w->patch == f->tile_size ? NULL : crop(f, grid);
	const float *px = pixels ? pixels : f->pixels;
	float *pos = xmalloc(sizeof(float) * (size_t)grid * grid * w->width);
	float *want_rows = xmalloc(n_rows * dim * sizeof(float)),
	      *want_feat = xmalloc(tiles * feat_tile * sizeof(float));
	float *got_rows = xmalloc(n_rows * dim * sizeof(float)),
	      *got_feat = xmalloc(tiles * feat_tile * sizeof(float));

	REQUIRE(vision_pos_embed(w, grid, grid, pos) == 0);
	for (int t = 0; t < tiles; t++) {
		REQUIRE(vision_vit_forward(w, px + t * tile_px, grid, grid, pos, want_feat + t * feat_tile) ==
			0);
		REQUIRE(vision_project(w, want_feat + t * feat_tile, grid, grid,
				       want_rows + (size_t)t * per * dim) == 0);
	}
	const enum engine_precision precisions[] = {ENGINE_PRECISION_FP32, ENGINE_PRECISION_BF16};
	for (size_t k = 0; k < ARRAY_SIZE(precisions); k++) {
		const char *name = engine_precision_name(precisions[k]);
		struct vision_cuda *vc = vision_cuda_create_grid(g, w, grid, pos, precisions[k]);
		const float *dev_rows = NULL;
		REQUIRE(vc);
		/* the thumbnail alone first, then all tiles: the buffers grow in between */
		CHECK_INT_EQ(vision_cuda_encode(vc, px + (tiles - 1) * tile_px, 1, &dev_rows), 0);
		CHECK_INT_EQ(vision_cuda_download(vc, 1, got_rows, NULL), 0);
		CHECK_INT_EQ(vision_cuda_download(vc, 2, got_rows, NULL), -EINVAL);
		float *first = xmalloc((size_t)per * dim * sizeof(float));
		memcpy(first, got_rows, (size_t)per * dim * sizeof(float));
		CHECK_INT_EQ(vision_cuda_encode(vc, px, tiles, &dev_rows), 0);
		CHECK(dev_rows != NULL);
		CHECK_INT_EQ(vision_cuda_download(vc, tiles, got_rows, got_feat), 0);
		const float *again = got_rows + (size_t)(tiles - 1) * per * dim;
		if (precisions[k] == ENGINE_PRECISION_FP32) {
			double n1 = nmse(again, first, (size_t)per * dim);
			if (!(n1 <= 1e-9))
				fprintf(stderr, "grid %d: the thumbnail inside %d tiles vs alone: NMSE %.3g\n",
					grid, tiles, n1);
			CHECK(n1 <= 1e-9);
		} else {
			double c1 = min_cosine(again, first, (size_t)per, dim);
			if (!(c1 >= 0.9999))
				fprintf(stderr,
					"grid %d: the thumbnail inside %d tiles vs alone: cosine %.6f\n",
					grid, tiles, c1);
			CHECK(c1 >= 0.9999);
		}
		free(first);
		if (precisions[k] == ENGINE_PRECISION_FP32) {
			double nf = nmse(got_feat, want_feat, tiles * feat_tile),
			       nr = nmse(got_rows, want_rows, n_rows * dim);
			fprintf(stderr, "grid %d, %s: features NMSE %.3g, rows NMSE %.3g\n", grid, name, nf,
				nr);
			CHECK(nf <= 1e-9);
			CHECK(nr <= 1e-9);
		} else {
			double cf = min_cosine(got_feat, want_feat, (size_t)tiles * grid * grid, w->width);
			double cr = min_cosine(got_rows, want_rows, n_rows, dim);
			fprintf(stderr, "grid %d, %s: smallest row cosine: features %.6f, rows %.6f\n", grid,
				name, cf, cr);
			CHECK(cf >= 0.999);
			CHECK(cr >= 0.999);
		}
		CHECK_INT_EQ(vision_cuda_encode(vc, px, 0, &dev_rows), -EINVAL);
		CHECK_INT_EQ(vision_cuda_encode(vc, px, VISION_CUDA_MAX_TILES + 1, &dev_rows), -EINVAL);
		vision_cuda_destroy(vc);
	}
	free(pixels);
	free(pos);
	free(want_rows);
	free(want_feat);
	free(got_rows);
	free(got_feat);
}

/* The ViT MLP's GELU on the device is the CPU's exact (erf) one (docs/design/model.md: RADIO's
 * nn.GELU), not the tanh form cuBLASLt's GELU epilogues compute (cuda/emu/cublaslt.cc, DESIGN).
 * The two differ by at most 4.7e-4, so the checkpoint's own MLPs show a swap only as an NMSE of
 * about 1.5e-8 (check_grid's bound is 1e-9). Here every block's MLP is made to show it: fc1's
 * bias is -2.7, where the tanh form exceeds the erf form by 4.7e-4 = 5% of GELU(-2.7) = -0.0093,
 * and fc2 sums the 256 GELU outputs into every feature with weights 1, 2, 3 (by feature), so
 * the MLP's output, which dominates the residual stream, moves by about 5% with the form. There
 * is no final LayerNorm to scale that away. The fp32 encode of one tile must match the CPU's
 * within NMSE 1e-9 (measured in the emulation: features 2.7e-14, rows 4.5e-13 with the erf GELU;
 * 5.1e-5 and 3.0e-7 with the tanh form in the kernel). */
static void check_mlp_gelu(struct gpu_context *g, const struct fixture *f)
{
	const int grid = 4, per = (grid / f->w->shuffle) * (grid / f->w->shuffle), M = f->w->mlp;
	struct vision_weights w = *f->w;
	REQUIRE(!w.norm_w.data);
	const int D = w.width;
	struct vision_block *blocks = xmalloc(sizeof(*blocks) * (size_t)w.depth);
	float *fc1_b = xmalloc(sizeof(float) * (size_t)M), *fc2_w = xmalloc(sizeof(float) * (size_t)D * M);
	for (int j = 0; j < M; j++)
		fc1_b[j] = -2.7f;
	for (int d = 0; d < D; d++)
		for (int j = 0; j < M; j++)
			fc2_w[(size_t)d * M + j] = (float)(1 + d % 3);
	for (int i = 0; i < w.depth; i++) {
		blocks[i] = f->w->blocks[i];
		blocks[i].fc1_b = (struct tensor){.data = fc1_b,
						  .dtype = TENSOR_F32,
						  .ndim = 1,
						  .shape = {M},
						  .nbytes = sizeof(float) * (size_t)M};
		blocks[i].fc2_w = (struct tensor){.data = fc2_w,
						  .dtype = TENSOR_F32,
						  .ndim = 2,
						  .shape = {D, M},
						  .nbytes = sizeof(float) * (size_t)D * M};
	}
	w.blocks = blocks;
	const size_t dim = (size_t)w.out_dim, feat = (size_t)grid * grid * D;
	float *pixels = crop(f, grid), *pos = xmalloc(sizeof(float) * feat);
	float *want_feat = xmalloc(sizeof(float) * feat), *got_feat = xmalloc(sizeof(float) * feat);
	float *want_rows = xmalloc(sizeof(float) * per * dim), *got_rows = xmalloc(sizeof(float) * per * dim);
	const float *dev_rows;
	REQUIRE(vision_pos_embed(&w, grid, grid, pos) == 0);
	REQUIRE(vision_vit_forward(&w, pixels, grid, grid, pos, want_feat) == 0);
	REQUIRE(vision_project(&w, want_feat, grid, grid, want_rows) == 0);
	struct vision_cuda *vc = vision_cuda_create_grid(g, &w, grid, pos, ENGINE_PRECISION_FP32);
	REQUIRE(vc);
	CHECK_INT_EQ(vision_cuda_encode(vc, pixels, 1, &dev_rows), 0);
	CHECK_INT_EQ(vision_cuda_download(vc, 1, got_rows, got_feat), 0);
	double nf = nmse(got_feat, want_feat, feat), nr = nmse(got_rows, want_rows, per * dim);
	fprintf(stderr, "MLP GELU at -2.7, fp32: features NMSE %.3g, rows NMSE %.3g\n", nf, nr);
	CHECK(nf <= 1e-9);
	CHECK(nr <= 1e-9);
	vision_cuda_destroy(vc);
	free(blocks), free(fc1_b), free(fc2_w), free(pixels), free(pos);
	free(want_feat), free(got_feat), free(want_rows), free(got_rows);
}

/* With profiling on, one encode reports every vision kernel and GEMM site, with a launch per
 * block for the per-block sites. */
static void check_profile(struct gpu_context *g, const struct fixture *f)
{
	const struct vision_weights *w = f->w;
	float *pixels = crop(f, 4), *pos = xmalloc(sizeof(float) * 16 * w->width);
	const float *rows;
	char **lines = NULL, want[128];
	static const char *const once[] = {"kernel vision_patchify launches=1 ",
					   "gemm vision.embedder calls=1 ",
					   "kernel vision_tokens launches=1 ",
					   "kernel vision_shuffle_norm launches=1 ",
					   "gemm mlp1.fc1 calls=1 ",
					   "kernel relu2 launches=1 ",
					   "gemm mlp1.fc3 calls=1 "};
	static const char *const per_block[] =
		{"gemm vision.qkv calls=", "kernel vision_attention launches=", "gemm vision.proj calls=",
		 "gemm vision.fc1 calls=", "kernel vision_bias_gelu launches=", "gemm vision.fc2 calls="};

	REQUIRE(vision_pos_embed(w, 4, 4, pos) == 0);
	struct vision_cuda *vc = vision_cuda_create_grid(g, w, 4, pos, ENGINE_PRECISION_BF16);
	REQUIRE(vc);
	REQUIRE(gpu_profile_enable(g, true) == 0);
	CHECK_INT_EQ(vision_cuda_encode(vc, pixels, f->tiles, &rows), 0);
	int n = gpu_profile_report(g, &lines);
	CHECK(n >= (int)(ARRAY_SIZE(once) + ARRAY_SIZE(per_block)));
	for (size_t k = 0; k < ARRAY_SIZE(once) + ARRAY_SIZE(per_block); k++) {
		bool found = false;
		if (k < ARRAY_SIZE(once))
			snprintf(want, sizeof(want), "%s", once[k]);
		else
			snprintf(want, sizeof(want), "%s%d ", per_block[k - ARRAY_SIZE(once)], w->depth);
		for (int i = 0; lines && lines[i]; i++)
			found = found || strncmp(lines[i], want, strlen(want)) == 0;
		if (!found)
			fprintf(stderr, "profile: no line starting '%s'\n", want);
		CHECK(found);
	}
	gpu_profile_lines_free(lines);
	REQUIRE(gpu_profile_enable(g, false) == 0);
	vision_cuda_destroy(vc);
	free(pixels);
	free(pos);
}

/* Preprocessing on the device against engine_vision_preprocess() with 64-pixel tiles: the same
 * grid, every value within 1/255 in pixel units (|got - want| * std), and the rows encoded from
 * the device's tiles equal (fp32 NMSE <= 1e-9) to those encoded from the CPU's. */
static void check_preprocess(struct gpu_context *g, const struct engine_vision *v, const char *root,
			     const char *image, int max_tiles)
{
	const struct vision_weights *w = engine_vision_weights(v);
	char path[4096], err[256];
	snprintf(path, sizeof(path), "%s/tests/fixtures/vision/%s", root, image);
	struct engine_image *img = engine_image_load_png(path, err, sizeof(err));
	REQUIRE(img);
	struct engine_vision_preprocess pre;
	engine_vision_get_preprocess(v, &pre);
	pre.tile_size = 64;
	pre.max_tiles = max_tiles;
	struct engine_vision_grid want_grid, got_grid;
	float *want = NULL;
	REQUIRE(engine_vision_preprocess(img, &pre, &want_grid, &want) == 0);

	float *pos = xmalloc(sizeof(float) * 16 * w->width);
	REQUIRE(vision_pos_embed(w, 4, 4, pos) == 0);
	struct vision_cuda *vc = vision_cuda_create_grid(g, w, 4, pos, ENGINE_PRECISION_FP32);
	REQUIRE(vc);
	CHECK_INT_EQ(vision_cuda_preprocess(vc, img, &pre, &got_grid), 0);
	CHECK_INT_EQ(got_grid.n_tiles, want_grid.n_tiles);
	CHECK_INT_EQ(got_grid.cols, want_grid.cols);
	CHECK_INT_EQ(got_grid.rows, want_grid.rows);
	const int tiles = want_grid.n_tiles;
	const size_t plane = 64 * 64, n = (size_t)tiles * 3 * plane;
	float *got = xmalloc(n * sizeof(float));
	CHECK_INT_EQ(vision_cuda_download_pixels(vc, tiles, got), 0);
	double worst = 0;
	for (size_t i = 0; i < n; i++) {
		double d = fabs((double)got[i] - want[i]) * pre.std[(i / plane) % 3];
		if (!(d <= worst))
			worst = d != d ? 1e30 : d;
	}
	fprintf(stderr, "preprocess %s: %d tiles (%dx%d%s), largest difference %.3g of 1/255\n", image, tiles,
		want_grid.cols, want_grid.rows, want_grid.thumbnail ? " + thumbnail" : "", worst * 255);
	CHECK(worst <= 1.0 / 255);

	/* the whole observation on the device vs the encoder on the CPU's tiles */
	const size_t rows_n = (size_t)tiles * 4 * w->out_dim;
	float *rows_cpu_px = xmalloc(rows_n * sizeof(float)), *rows_dev_px = xmalloc(rows_n * sizeof(float));
	const float *dev_rows;
	CHECK_INT_EQ(vision_cuda_encode(vc, want, tiles, &dev_rows), 0);
	CHECK_INT_EQ(vision_cuda_download(vc, tiles, rows_cpu_px, NULL), 0);
	CHECK_INT_EQ(vision_cuda_encode_image(vc, img, &pre, &got_grid, &dev_rows), 0);
	CHECK_INT_EQ(vision_cuda_download(vc, tiles, rows_dev_px, NULL), 0);
	double e = nmse(rows_dev_px, rows_cpu_px, rows_n);
	fprintf(stderr, "preprocess %s: rows from device tiles vs CPU tiles NMSE %.3g\n", image, e);
	CHECK(e <= 1e-9);
	pre.tile_size = 128;
	CHECK_INT_EQ(vision_cuda_preprocess(vc, img, &pre, &got_grid), -EINVAL);

	vision_cuda_destroy(vc);
	free(rows_cpu_px);
	free(rows_dev_px);
	free(got);
	free(want);
	free(pos);
	engine_image_destroy(img);
}

/* ---- the backend seam: engine_vision_encode_on() ---------------------------------------------- */

static char *read_text(const char *path)
{
	FILE *f = fopen(path, "rb");
	REQUIRE(f);
	char *buf = xmalloc(1 << 16);
	size_t n = fread(buf, 1, (1 << 16) - 1, f);
	fclose(f);
	buf[n] = 0;
	return buf;
}

/* Copies src/name to dir/name with the first `from` replaced by `to`. */
static void copy_replacing(const char *src, const char *dir, const char *name, const char *from,
			   const char *to)
{
	char path[4096];
	REQUIRE((size_t)snprintf(path, sizeof(path), "%s/%s", src, name) < sizeof(path));
	char *text = read_text(path), *at = strstr(text, from);
	REQUIRE(at);
	REQUIRE((size_t)snprintf(path, sizeof(path), "%s/%s", dir, name) < sizeof(path));
	FILE *f = fopen(path, "wb");
	REQUIRE(f);
	fwrite(text, 1, (size_t)(at - text), f);
	fputs(to, f);
	fputs(at + strlen(from), f);
	REQUIRE(fclose(f) == 0);
	free(text);
}

/* The tiny checkpoint with 64-pixel tiles (4 x 4 patches), so that whole observations go
 * through the seam quickly in the emulation: the same tensors (linked), the tile size changed
 * in config.json and preprocessor_config.json. */
static void make_small_tile_model(const char *src, char *dir, size_t dirlen)
{
	static const char *const links[] = {"model.safetensors", "tokenizer.json", "tokenizer_config.json"};
	char a[4096], b[4096];
	snprintf(dir, dirlen, "/tmp/holod-test-gpu-vision-XXXXXX");
	REQUIRE(mkdtemp(dir));
	for (size_t i = 0; i < ARRAY_SIZE(links); i++) {
		REQUIRE((size_t)snprintf(a, sizeof(a), "%s/%s", src, links[i]) < sizeof(a));
		REQUIRE((size_t)snprintf(b, sizeof(b), "%s/%s", dir, links[i]) < sizeof(b));
		REQUIRE(symlink(a, b) == 0);
	}
	copy_replacing(src, dir, "config.json", "\"force_image_size\": 512", "\"force_image_size\": 64");
	copy_replacing(src, dir, "preprocessor_config.json", "\"image_size\": 512", "\"image_size\": 64");
}

static void remove_model_dir(const char *dir)
{
	static const char *const names[] = {"model.safetensors", "tokenizer.json", "tokenizer_config.json",
					    "config.json", "preprocessor_config.json"};
	char path[4096];
	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, names[i]) < sizeof(path))
			unlink(path);
	}
	rmdir(dir);
}

/* The `copy DIR calls=N bytes=B` line of a backend profile report (0 when absent). */
static unsigned long long copied_bytes(struct engine_backend *b, const char *dir)
{
	char **lines = NULL, head[64];
	unsigned long long calls = 0, bytes = 0;
	REQUIRE(engine_backend_profile_report(b, &lines) >= 0);
	snprintf(head, sizeof(head), "copy %s calls=", dir);
	for (int i = 0; lines && lines[i]; i++)
		if (strncmp(lines[i], head, strlen(head)) == 0)
			CHECK(sscanf(lines[i] + strlen(head), "%llu bytes=%llu", &calls, &bytes) == 2);
	engine_backend_profile_free(lines);
	return bytes;
}

/* The prompt of an observation: two text tokens, n image positions, three text tokens. */
static int32_t *image_prompt(int32_t image_token, size_t n_rows, size_t *ret_n)
{
	size_t n = n_rows + 5;
	int32_t *ids = xmalloc(n * sizeof(*ids));
	ids[0] = 1;
	ids[1] = 7;
	for (size_t i = 0; i < n_rows; i++)
		ids[2 + i] = image_token;
	ids[n - 3] = 9;
	ids[n - 2] = 30;
	ids[n - 1] = 2;
	*ret_n = n;
	return ids;
}

/* The logits of every position of `ids` appended to a new session on b, the image rows given
 * as engine_rows references (refs non-NULL) or as host pointers (embeds). */
static float *append_logits(struct engine_backend *b, const int32_t *ids, size_t n,
			    const struct engine_row_ref *refs, const float **embeds, int vocab)
{
	struct engine_session *s = engine_session_create_on(b, 256);
	REQUIRE(s);
	float *logits = xmalloc(n * (size_t)vocab * sizeof(float));
	if (refs)
		CHECK_INT_EQ(engine_session_append_rows(s, ids, refs, n, ENGINE_LOGITS_ALL, logits), 0);
	else
		CHECK_INT_EQ(engine_session_append(s, ids, embeds, n, ENGINE_LOGITS_ALL, logits), 0);
	engine_session_destroy(s);
	return logits;
}

/* engine_vision_encode_image_on() into engine_rows and engine_session_append_rows():
 * - no backend and the CPU backend: host rows equal to engine_vision_encode_image()'s bit for
 *   bit, and appending them gives the logits of engine_session_append() with the same floats,
 *   bit for bit;
 * - a CUDA backend in fp32: device rows (NMSE <= 1e-9 against the CPU's), and the prefill that
 *   reads them on the device gives the logits of the same rows taken back through the host bit
 *   for bit and the CPU engine's within NMSE 1e-9; the profile shows that nothing but the
 *   logits came back to the host (the rows never crossed the bus) and that the image went to the
 *   device once;
 * - bf16: rows within cosine 0.999 of the CPU's;
 * - misuse: device rows in a session of another backend, a row out of range, rows of another
 *   width are refused. */
static void check_rows(struct engine_model *m, const struct engine_vision *v, const struct engine_image *img)
{
	char err[256];
	const int dim = engine_vision_embed_dim(v), vocab = m->cfg.vocab;
	struct engine_vision_grid want_grid, grid;
	float *want = NULL;
	size_t n_rows = 0, n;
	REQUIRE(engine_vision_encode_image(v, img, 6, &want_grid, &want, &n_rows) == 0);
	int32_t *ids = image_prompt(engine_vision_image_token(v), n_rows, &n);
	const float **embeds = xcalloc(n, sizeof(*embeds));
	struct engine_row_ref *refs = xcalloc(n, sizeof(*refs));
	float *got = xmalloc(n_rows * (size_t)dim * sizeof(float));

	struct engine_backend_options opts = {.kind = ENGINE_BACKEND_CPU, .precision = ENGINE_PRECISION_FP32};
	struct engine_backend *cpu = engine_backend_create(m, &opts, err, sizeof(err));
	REQUIRE(cpu);
	CHECK_INT_EQ(engine_vision_splice(ids, n, engine_vision_image_token(v), want, n_rows, (size_t)dim,
					  embeds, err, sizeof(err)),
		     0);
	float *want_logits = append_logits(cpu, ids, n, NULL, embeds, vocab);
	struct engine_backend *hosts[] = {NULL, cpu};
	for (size_t k = 0; k < ARRAY_SIZE(hosts); k++) {
		struct engine_rows *rows = NULL;
		CHECK_INT_EQ(engine_vision_encode_image_on(hosts[k], v, img, 6, &grid, &rows), 0);
		REQUIRE(rows);
		CHECK(!engine_rows_on_device(rows));
		CHECK_INT_EQ(grid.n_tiles, want_grid.n_tiles);
		CHECK(engine_rows_count(rows) == n_rows && engine_rows_dim(rows) == dim);
		CHECK_INT_EQ(engine_rows_read(rows, 0, n_rows, got), 0);
		CHECK(memcmp(got, want, n_rows * (size_t)dim * sizeof(float)) == 0);
		const struct engine_rows *images[] = {rows};
		CHECK_INT_EQ(engine_vision_splice_rows(ids, n, engine_vision_image_token(v), images, 1, refs,
						       err, sizeof(err)),
			     0);
		float *logits = append_logits(cpu, ids, n, refs, NULL, vocab);
		CHECK(memcmp(logits, want_logits, n * (size_t)vocab * sizeof(float)) == 0);
		free(logits);
		engine_rows_destroy(rows);
	}

	const enum engine_precision precisions[] = {ENGINE_PRECISION_FP32, ENGINE_PRECISION_BF16};
	for (size_t k = 0; k < ARRAY_SIZE(precisions); k++) {
		opts = (struct engine_backend_options){.kind = ENGINE_BACKEND_CUDA,
						       .precision = precisions[k]};
		struct engine_backend *b = engine_backend_create(m, &opts, err, sizeof(err));
		REQUIRE(b);
		struct engine_rows *rows = NULL;
		/* the first image uploads the encoder's weights; the second is profiled */
		CHECK_INT_EQ(engine_vision_encode_image_on(b, v, img, 6, &grid, &rows), 0);
		engine_rows_destroy(rows);
		rows = NULL;
		const size_t image_bytes = (size_t)engine_image_width(img) * engine_image_height(img) * 3;
		const size_t rows_bytes = n_rows * (size_t)dim * sizeof(float);
		REQUIRE(engine_backend_profile(b, true) == 0);
		CHECK_INT_EQ(engine_vision_encode_image_on(b, v, img, 6, &grid, &rows), 0);
		REQUIRE(rows);
		/* the image went up (with the resize tables), nothing came back */
		unsigned long long up = copied_bytes(b, "to_device"), down = copied_bytes(b, "to_host");
		fprintf(stderr,
			"rows, %s: encode copied %llu bytes to the device (image %zu), %llu to the host\n",
			engine_precision_name(precisions[k]), up, image_bytes, down);
		CHECK(up >= image_bytes);
		CHECK(down == 0);
		REQUIRE(engine_backend_profile(b, false) == 0);
		CHECK(engine_rows_on_device(rows));
		CHECK(engine_rows_count(rows) == n_rows);
		const struct engine_rows *images[] = {rows};
		CHECK_INT_EQ(engine_vision_splice_rows(ids, n, engine_vision_image_token(v), images, 1, refs,
						       err, sizeof(err)),
			     0);
		REQUIRE(engine_backend_profile(b, true) == 0);
		float *dev_logits = append_logits(b, ids, n, refs, NULL, vocab);
		/* the prefill took the rows on the device; only the ids went up, the logits came back */
		up = copied_bytes(b, "to_device");
		down = copied_bytes(b, "to_host");
		unsigned long long on = copied_bytes(b, "on_device");
		fprintf(stderr,
			"rows, %s: append copied %llu bytes on the device (rows %zu), %llu to the device, "
			"%llu to the host (logits %zu)\n",
			engine_precision_name(precisions[k]), on, rows_bytes, up, down,
			n * (size_t)vocab * sizeof(float));
		CHECK(on == rows_bytes);
		CHECK(up < rows_bytes);
		CHECK(down == n * (size_t)vocab * sizeof(float));
		REQUIRE(engine_backend_profile(b, false) == 0);

		CHECK_INT_EQ(engine_rows_read(rows, 0, n_rows, got), 0);
		if (precisions[k] == ENGINE_PRECISION_FP32) {
			double e = nmse(got, want, n_rows * (size_t)dim);
			fprintf(stderr, "rows, fp32: device rows vs CPU NMSE %.3g\n", e);
			CHECK(e <= 1e-9);
			/* the same rows through the host: the same logits, bit for bit */
			CHECK_INT_EQ(engine_vision_splice(ids, n, engine_vision_image_token(v), got, n_rows,
							  (size_t)dim, embeds, err, sizeof(err)),
				     0);
			float *host_logits = append_logits(b, ids, n, NULL, embeds, vocab);
			CHECK(memcmp(host_logits, dev_logits, n * (size_t)vocab * sizeof(float)) == 0);
			free(host_logits);
			e = nmse(dev_logits, want_logits, n * (size_t)vocab);
			fprintf(stderr, "rows, fp32: logits after the image vs the CPU engine NMSE %.3g\n", e);
			CHECK(e <= 1e-9);
		} else {
			double c = min_cosine(got, want, n_rows, (size_t)dim);
			fprintf(stderr, "rows, bf16: smallest row cosine %.6f\n", c);
			CHECK(c >= 0.999);
		}
		free(dev_logits);

		/* misuse */
		struct engine_session *s = engine_session_create_on(cpu, 256);
		REQUIRE(s);
		CHECK_INT_EQ(engine_session_append_rows(s, ids, refs, n, ENGINE_LOGITS_NONE, NULL), -EINVAL);
		CHECK_INT_EQ(engine_session_n_tokens(s), 0);
		engine_session_destroy(s);
		s = engine_session_create_on(b, 256);
		REQUIRE(s);
		refs[2].row = n_rows;
		CHECK_INT_EQ(engine_session_append_rows(s, ids, refs, n, ENGINE_LOGITS_NONE, NULL), -EINVAL);
		refs[2].row = 0;
		struct engine_rows *narrow = engine_rows_create(b, want, 2, dim / 2);
		REQUIRE(narrow);
		refs[3] = (struct engine_row_ref){.rows = narrow, .row = 0};
		CHECK_INT_EQ(engine_session_append_rows(s, ids, refs, n, ENGINE_LOGITS_NONE, NULL), -EINVAL);
		CHECK_INT_EQ(engine_session_n_tokens(s), 0);
		engine_rows_destroy(narrow);
		engine_session_destroy(s);
		CHECK_INT_EQ(engine_rows_read(rows, n_rows, 1, got), -EINVAL);
		engine_rows_destroy(rows);
		engine_backend_destroy(b);
	}
	errno = 0;
	CHECK(engine_rows_create(NULL, want, 0, dim) == NULL && errno == EINVAL);
	CHECK(engine_rows_create(NULL, want, ENGINE_ROWS_MAX_FLOATS, 2) == NULL && errno == EINVAL);
	engine_backend_destroy(cpu);
	free(want_logits);
	free(got);
	free(refs);
	free(embeds);
	free(ids);
	free(want);
}

static void check_seam(const char *root, const struct engine_image *img)
{
	char src[4096], dir[64], err[256];
	snprintf(src, sizeof(src), "%s/tests/fixtures/vision/tiny-vlm", root);
	make_small_tile_model(src, dir, sizeof(dir));
	struct engine_model *m = engine_model_load(dir, err, sizeof(err));
	if (!m)
		fprintf(stderr, "%s: %s\n", dir, err);
	REQUIRE(m);
	struct engine_vision *v = engine_vision_create(m, err, sizeof(err));
	REQUIRE(v);
	struct engine_vision_preprocess pre;
	struct engine_vision_grid vg;
	float *pixels = NULL;
	engine_vision_get_preprocess(v, &pre);
	CHECK_INT_EQ(pre.tile_size, 64);
	pre.max_tiles = 6;
	REQUIRE(engine_vision_preprocess(img, &pre, &vg, &pixels) == 0);
	const int tiles = vg.n_tiles;
	const size_t n = (size_t)tiles * engine_vision_tokens_per_tile(v) * engine_vision_embed_dim(v);
	float *want = xmalloc(n * sizeof(float)), *got = xmalloc(n * sizeof(float));
	REQUIRE(engine_vision_encode(v, pixels, tiles, want) == 0);
	fprintf(stderr, "seam: %d tiles of 64 pixels\n", tiles);

	/* no backend and the CPU backend: engine_vision_encode() itself */
	struct engine_backend_options opts = {.kind = ENGINE_BACKEND_CPU, .precision = ENGINE_PRECISION_FP32};
	struct engine_backend *b = engine_backend_create(m, &opts, err, sizeof(err));
	REQUIRE(b);
	CHECK_INT_EQ(engine_vision_encode_on(NULL, v, pixels, tiles, got), 0);
	CHECK(memcmp(got, want, n * sizeof(float)) == 0);
	memset(got, 0, n * sizeof(float));
	CHECK_INT_EQ(engine_vision_encode_on(b, v, pixels, tiles, got), 0);
	CHECK(memcmp(got, want, n * sizeof(float)) == 0);
	engine_backend_destroy(b);

	const enum engine_precision precisions[] = {ENGINE_PRECISION_FP32, ENGINE_PRECISION_BF16};
	for (size_t k = 0; k < ARRAY_SIZE(precisions); k++) {
		opts = (struct engine_backend_options){.kind = ENGINE_BACKEND_CUDA,
						       .precision = precisions[k]};
		b = engine_backend_create(m, &opts, err, sizeof(err));
		if (!b)
			fprintf(stderr, "cuda backend: %s\n", err);
		REQUIRE(b);
		memset(got, 0, n * sizeof(float));
		CHECK_INT_EQ(engine_vision_encode_on(b, v, pixels, tiles, got), 0);
		if (precisions[k] == ENGINE_PRECISION_FP32) {
			double e = nmse(got, want, n);
			fprintf(stderr, "seam, fp32: rows NMSE %.3g\n", e);
			CHECK(e <= 1e-9);
		} else {
			double c = min_cosine(got, want, n / engine_vision_embed_dim(v),
					      engine_vision_embed_dim(v));
			fprintf(stderr, "seam, bf16: smallest row cosine %.6f\n", c);
			CHECK(c >= 0.999);
		}
		/* another handle of the same model: a new device encoder, the same rows */
		struct engine_vision *v2 = engine_vision_create(m, err, sizeof(err));
		REQUIRE(v2);
		float *again = xmalloc(n * sizeof(float));
		CHECK_INT_EQ(engine_vision_encode_on(b, v2, pixels, tiles, again), 0);
		CHECK(memcmp(again, got, n * sizeof(float)) == 0);
		free(again);
		engine_vision_destroy(v2);
		CHECK_INT_EQ(engine_vision_encode_on(b, v, pixels, VISION_MAX_ENCODE_TILES + 1, got), -EINVAL);
		engine_backend_destroy(b);
	}
	free(want);
	free(got);
	free(pixels);
	check_rows(m, v, img);
	engine_vision_destroy(v);
	engine_model_destroy(m);
	remove_model_dir(dir);
}

int main(void)
{
	char path[4096], err[256];
	const char *root = getenv("HOLOD_SOURCE_ROOT");

	if (gpu_device_count() == 0) {
		fprintf(stderr, "no CUDA device: skipping\n");
		return TEST_SKIP;
	}
	REQUIRE(root);
	snprintf(path, sizeof(path), "%s/tests/fixtures/vision/tiny-vlm", root);
	struct engine_model *m = engine_model_load(path, err, sizeof(err));
	if (!m)
		fprintf(stderr, "%s: %s\n", path, err);
	REQUIRE(m);
	struct engine_vision *v = engine_vision_create(m, err, sizeof(err));
	if (!v)
		fprintf(stderr, "vision: %s\n", err);
	REQUIRE(v);
	snprintf(path, sizeof(path), "%s/tests/fixtures/vision/small.png", root);
	struct engine_image *img = engine_image_load_png(path, err, sizeof(err));
	REQUIRE(img);

	struct engine_vision_preprocess pre;
	struct engine_vision_grid vg;
	float *pixels = NULL;
	engine_vision_get_preprocess(v, &pre);
	pre.max_tiles = 2;
	REQUIRE(engine_vision_preprocess(img, &pre, &vg, &pixels) == 0);
	CHECK_INT_EQ(vg.n_tiles, 3);
	struct fixture f = {engine_vision_weights(v), pixels, vg.n_tiles, pre.tile_size};

	struct gpu_context *g = gpu_context_create(test_gpu_device());
	REQUIRE(g);
	check_grid(g, &f, 4);
	check_grid(g, &f, 6);
	check_mlp_gelu(g, &f);
#ifndef HOLO_TEST_EMULATED
	/* the checkpoint's own tile */
	check_grid(g, &f, engine_vision_grid_side(v));
#endif
	struct vision_cuda *vc = vision_cuda_create(g, vision_tower(v), ENGINE_PRECISION_BF16);
	REQUIRE(vc);
	vision_cuda_destroy(vc);
	errno = 0;
	CHECK(vision_cuda_create(g, vision_tower(v), ENGINE_PRECISION_DEFAULT) == NULL && errno == EINVAL);
	check_profile(g, &f);
	check_preprocess(g, v, root, "small.png", 6);
	check_preprocess(g, v, root, "wide.png", 12);
	check_preprocess(g, v, root, "screen.png", 12);
	check_preprocess(g, v, root, "square.png", 1);
	check_seam(root, img);

	gpu_context_destroy(g);
	free(pixels);
	engine_image_destroy(img);
	engine_vision_destroy(v);
	engine_model_destroy(m);
	return test_exit();
}
