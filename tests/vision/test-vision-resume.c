/* The resumable vision encode (engine_vision_encode_begin/advance/finish): on the tiny-vlm
 * and tiny-agent fixtures, the rows of a screenshot encoded in slices of 1, 5 and all steps equal
 * engine_vision_encode_on()'s bit for bit, with no backend, the CPU backend in fp32 and in
 * bf16, and (where this build has one: the emulation) the CUDA backend in fp32 and bf16, a tile
 * per step; the progress counts every step; misuse is refused. The encode begun from the image
 * (engine_vision_encode_begin_image(): its first step preprocesses, on the device where the
 * backend has one) gives engine_vision_encode_image_on()'s rows bit for bit, in slices of 1, 2
 * and all steps, on the same backends, for a 320x200 corner of the screenshot (its grid, a
 * sixteenth of the resizing); on a device within NMSE 1e-9 (fp32) or cosine 0.9999 (bf16)
 * instead: its steps encode a tile each where the whole encode batches the tiles, and a GEMM of
 * another shape may sum in another order (cuBLASLt's algorithm choice, the emulation's split-K). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "golden.h"
#include "image.h"
#include "test.h"

TEST_DEFINE_GLOBALS;

static size_t n_floats_per_tile(const struct engine_vision *v)
{
	struct engine_vision_preprocess pp;
	engine_vision_get_preprocess(v, &pp);
	return (size_t)3 * pp.tile_size * pp.tile_size;
}

/* The end of a resumable encode run in slices of `slice` steps (r: the last advance's result,
 * after `advances` that went on): the job is done, finishes once, and its rows are `want`
 * (on the device when want_rows, NULL or the whole encode's, is). Returns whether they are the
 * same bit for bit (read into got). */
static bool check_finished(struct engine_vision_job *j, int r, int advances, int slice, int total,
			   size_t n_rows, size_t dim, const float *want, float *got,
			   const struct engine_rows *want_rows)
{
	struct engine_rows *rows = NULL;
	CHECK_INT_EQ(r, 0);
	CHECK_INT_EQ(advances + 1, (total + slice - 1) / slice);
	CHECK_INT_EQ(engine_vision_encode_progress(j, &total), total);
	CHECK_INT_EQ(engine_vision_encode_advance(j, 1), -EINVAL);
	CHECK_INT_EQ(engine_vision_encode_finish(j, &rows), 0);
	CHECK_INT_EQ(engine_vision_encode_finish(j, &rows), -EINVAL);
	REQUIRE(rows && engine_rows_count(rows) == n_rows);
	if (want_rows)
		CHECK(engine_rows_on_device(rows) == engine_rows_on_device(want_rows));
	CHECK_INT_EQ(engine_rows_read(rows, 0, n_rows, got), 0);
	engine_rows_destroy(rows);
	return memcmp(got, want, sizeof(float) * n_rows * dim) == 0;
}

/* got's rows against want's, for a device whose steps run other shapes than the whole encode:
 * NMSE <= 1e-9 in fp32, cosine >= 0.9999 per row in bf16 */
static bool close_rows(const float *got, const float *want, size_t n_rows, size_t dim, bool bf16)
{
	double num = 0, den = 0, worst = 1;
	for (size_t r = 0; r < n_rows; r++) {
		double dot = 0, gg = 0, ww = 0;
		for (size_t i = r * dim; i < (r + 1) * dim; i++) {
			num += ((double)got[i] - want[i]) * ((double)got[i] - want[i]);
			den += (double)want[i] * want[i];
			dot += (double)got[i] * want[i], gg += (double)got[i] * got[i];
			ww += (double)want[i] * want[i];
		}
		worst = fmin(worst, dot / sqrt(gg * ww + 1e-300));
	}
	bool ok = bf16 ? worst >= 0.9999 : num <= 1e-9 * den;
	if (!ok)
		fprintf(stderr, "rows differ: NMSE %.3g, smallest cosine %.6f\n", num / den, worst);
	return ok;
}

static void check_backend(struct engine_backend *b, const struct engine_vision *v, const float *pixels,
			  int n_tiles, bool quick, const char *what)
{
	size_t n_rows = (size_t)n_tiles * (size_t)engine_vision_tokens_per_tile(v);
	size_t dim = (size_t)engine_vision_embed_dim(v);
	float *want = malloc(sizeof(float) * n_rows * dim), *got = malloc(sizeof(float) * n_rows * dim);
	struct engine_backend_info bi = {.kind = ENGINE_BACKEND_CPU};
	if (b)
		engine_backend_get_info(b, &bi);
	bool device = bi.kind == ENGINE_BACKEND_CUDA;
	REQUIRE(want && got);
	REQUIRE(engine_vision_encode_on(b, v, pixels, n_tiles, want) == 0);
	if (device) {
		/* a step is a tile encoded alone; whether a batch of tiles gives the same rows is
		 * the device's matter (said, not required) */
		size_t tile_px = n_floats_per_tile(v), tile_rows = n_rows / (size_t)n_tiles * dim;
		for (int t = 0; t < n_tiles; t++)
			REQUIRE(engine_vision_encode_on(b, v, pixels + (size_t)t * tile_px, 1,
							got + (size_t)t * tile_rows) == 0);
		printf("%s: tiles alone %s the batch of %d\n", bi.name,
		       memcmp(got, want, sizeof(float) * n_rows * dim) ? "differ from" : "equal", n_tiles);
		memcpy(want, got, sizeof(float) * n_rows * dim);
	}

	/* one step per slice, a few across tile boundaries (quick: not), all at once */
	static const int slices[] = {1, 1 << 20, 3};
	for (size_t s = 0; s < (quick ? 2 : 3); s++) {
		struct engine_vision_job *j = NULL;
		struct engine_rows *rows = NULL;
		int r, advances = 0, total = 0;
		REQUIRE(engine_vision_encode_begin(b, v, pixels, n_tiles, &j) == 0);
		CHECK_INT_EQ(engine_vision_encode_progress(j, &total), 0);
		/* the CPU's steps: embedding, the blocks, the projector's halves, per tile; a
		 * device's: a tile */
		if (device)
			CHECK_INT_EQ(total, n_tiles);
		else
			CHECK(total > n_tiles);
		CHECK_INT_EQ(engine_vision_encode_finish(j, &rows), -EINVAL);
		while ((r = engine_vision_encode_advance(j, slices[s])) == 1)
			advances++;
		bool same = check_finished(j, r, advances, slices[s], total, n_rows, dim, want, got, NULL);
		printf("%s, %d tiles in %d steps, %d per slice: %s\n", what, n_tiles, total, slices[s],
		       same ? "bit for bit" : "DIFFERENT");
		CHECK(same);
		engine_vision_job_destroy(j);
	}
	/* abandoned half way: nothing leaks (ASan) */
	struct engine_vision_job *j = NULL;
	REQUIRE(engine_vision_encode_begin(b, v, pixels, n_tiles, &j) == 0);
	CHECK_INT_EQ(engine_vision_encode_advance(j, 1), 1);
	engine_vision_job_destroy(j);
	free(want);
	free(got);
}

/* engine_vision_encode_begin_image() on b against engine_vision_encode_image_on(b). */
static void check_image(struct engine_backend *b, const struct engine_vision *v,
			const struct engine_image *img, int max_tiles, bool quick, const char *what)
{
	struct engine_vision_grid want_grid, grid;
	struct engine_rows *want_rows = NULL;
	struct engine_vision_job *j = NULL;
	REQUIRE(engine_vision_encode_image_on(b, v, img, max_tiles, &want_grid, &want_rows) == 0);
	size_t n_rows = engine_rows_count(want_rows), dim = (size_t)engine_vision_embed_dim(v);
	float *want = malloc(sizeof(float) * n_rows * dim), *got = malloc(sizeof(float) * n_rows * dim);
	REQUIRE(want && got);
	CHECK_INT_EQ(engine_rows_read(want_rows, 0, n_rows, want), 0);
	struct engine_backend_info bi = {.kind = ENGINE_BACKEND_CPU};
	if (b)
		engine_backend_get_info(b, &bi);
	bool device = bi.kind == ENGINE_BACKEND_CUDA;

	struct engine_vision_preprocess pp;
	engine_vision_get_preprocess(v, &pp);
	CHECK_INT_EQ(engine_vision_encode_begin_image(b, v, NULL, max_tiles, &grid, &j), -EINVAL);
	CHECK_INT_EQ(engine_vision_encode_begin_image(b, v, img, -1, &grid, &j), -EINVAL);
	CHECK_INT_EQ(engine_vision_encode_begin_image(b, v, img, pp.max_tiles + 1, &grid, &j), -EINVAL);
	CHECK(j == NULL);

	/* one step per slice (quick: only that), all at once, two (the preprocessing with a step
	 * of the first tile, then steps across tile boundaries on the CPU) */
	static const int slices[] = {1, 1 << 20, 2};
	for (size_t s = 0; s < (quick ? 1 : 3); s++) {
		struct engine_rows *rows = NULL;
		int r, advances = 0, total = 0;
		REQUIRE(engine_vision_encode_begin_image(b, v, img, max_tiles, &grid, &j) == 0);
		CHECK_INT_EQ(grid.n_tiles, want_grid.n_tiles);
		CHECK_INT_EQ(grid.cols, want_grid.cols);
		CHECK_INT_EQ(grid.rows, want_grid.rows);
		CHECK_INT_EQ(engine_vision_encode_progress(j, &total), 0);
		CHECK(engine_vision_encode_preprocess_us(j) == 0);
		/* the preprocessing, then a device's tiles or the CPU's steps of each tile */
		if (device)
			CHECK_INT_EQ(total, 1 + grid.n_tiles);
		else
			CHECK(total > 1 + grid.n_tiles);
		CHECK_INT_EQ(engine_vision_encode_finish(j, &rows), -EINVAL);
		r = engine_vision_encode_advance(j, slices[s]);
		if (slices[s] == 1) {
			CHECK_INT_EQ(r, 1);
			int done = engine_vision_encode_progress(j, &total);
			CHECK_INT_EQ(done, 1);
			CHECK(engine_vision_encode_preprocess_us(j) > 0);
		}
		while (r == 1) {
			advances++;
			r = engine_vision_encode_advance(j, slices[s]);
		}
		bool same =
			check_finished(j, r, advances, slices[s], total, n_rows, dim, want, got, want_rows);
		bool close = same || (device && close_rows(got, want, n_rows, dim,
							   bi.precision == ENGINE_PRECISION_BF16));
		printf("%s, from the image: %d tiles in %d steps, %d per slice: %s\n", what, grid.n_tiles,
		       total, slices[s],
		       same  ? "bit for bit" :
		       close ? "within the device's bounds" :
			       "DIFFERENT");
		CHECK(close);
		engine_vision_job_destroy(j);
		j = NULL;
	}
	/* abandoned after the preprocessing: its tiles and rows are freed (ASan, the device's
	 * allocation count in the emulation) */
	REQUIRE(engine_vision_encode_begin_image(b, v, img, max_tiles, &grid, &j) == 0);
	CHECK_INT_EQ(engine_vision_encode_advance(j, 1), 1);
	engine_vision_job_destroy(j);
	engine_rows_destroy(want_rows);
	free(want);
	free(got);
}

/* The fixture in `dir` on screen.png (max_tiles: 0 for the checkpoint's): the CPU backend (and
 * unless `quick`, no backend and slices across tiles), and with `cuda` the CUDA backend where
 * this build has one. */
static void check_model(const char *dir, int max_tiles, bool quick, bool cuda)
{
	static const enum engine_precision precisions[] = {ENGINE_PRECISION_FP32, ENGINE_PRECISION_BF16};
	char path[4096], err[256], what[128];
	snprintf(path, sizeof(path), "%s/tests/fixtures/%s", golden_source_root(), dir);
	struct engine_model *m = engine_model_load(path, err, sizeof(err));
	REQUIRE(m);
	struct engine_vision *v = engine_vision_create(m, err, sizeof(err));
	REQUIRE(v);
	snprintf(path, sizeof(path), "%s/tests/fixtures/vision/screen.png", golden_source_root());
	struct engine_image *img = engine_image_load_png(path, err, sizeof(err));
	REQUIRE(img);
	struct engine_vision_preprocess pp;
	struct engine_vision_grid grid;
	float *pixels = NULL;
	engine_vision_get_preprocess(v, &pp);
	if (max_tiles)
		pp.max_tiles = max_tiles;
	REQUIRE(engine_vision_preprocess(img, &pp, &grid, &pixels) == 0);
	REQUIRE(grid.n_tiles >= 2);
	/* the screenshot's aspect, so its grid; emulated kernels resize it in a fraction of the
	 * time */
	struct engine_image *corner = engine_image_from_rgb(320, 200, (size_t)img->width * 3, img->rgb);
	REQUIRE(corner && img->width == 1280 && img->height == 800);

	struct engine_vision_job *j = NULL;
	CHECK_INT_EQ(engine_vision_encode_begin(NULL, v, pixels, 0, &j), -EINVAL);
	CHECK_INT_EQ(engine_vision_encode_begin(NULL, v, pixels, ENGINE_VISION_MAX_TILES + 2, &j), -EINVAL);

	snprintf(what, sizeof(what), "%s, no backend (fp32)", dir);
	if (!quick) {
		check_backend(NULL, v, pixels, grid.n_tiles, quick, what);
		check_image(NULL, v, corner, max_tiles, quick, what);
	}
	for (size_t i = 0; i < 2; i++) {
		struct engine_backend_options bo = {.kind = ENGINE_BACKEND_CPU, .precision = precisions[i]};
		struct engine_backend *b = engine_backend_create(m, &bo, err, sizeof(err));
		REQUIRE(b);
		snprintf(what, sizeof(what), "%s, CPU backend, %s", dir, engine_precision_name(precisions[i]));
		check_backend(b, v, pixels, grid.n_tiles, quick, what);
		check_image(b, v, corner, max_tiles, quick, what);
		engine_backend_destroy(b);
	}
	for (size_t i = 0; cuda && i < 2; i++) {
		struct engine_backend_options bo = {.kind = ENGINE_BACKEND_CUDA, .precision = precisions[i]};
		struct engine_backend *b = engine_backend_create(m, &bo, err, sizeof(err));
		if (!b) {
			printf("CUDA backend: skipped (%s)\n", err);
			break;
		}
		snprintf(what, sizeof(what), "%s, CUDA backend, %s", dir,
			 engine_precision_name(precisions[i]));
		check_backend(b, v, pixels, grid.n_tiles, quick, what);
		check_image(b, v, corner, max_tiles, quick, what);
		engine_backend_destroy(b);
	}
	free(pixels);
	engine_image_destroy(corner);
	engine_image_destroy(img);
	engine_vision_destroy(v);
	engine_model_destroy(m);
}

int main(void)
{
	/* RADIO's shapes at a 512-pixel tile on the CPU, briefly (ASan); the agent checkpoint's
	 * 64-pixel tiles in full, and where the device may be emulated */
	check_model("vision/tiny-vlm", 2, true, false);
	check_model("models/tiny-agent", 0, false, true);
	return test_exit();
}
