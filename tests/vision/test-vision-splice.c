/* Image embeddings spliced into the language model (model.md 4.8): logits of a prompt with one
 * image against transformers' NemotronH fed the reference's spliced inputs_embeds
 * (tests/fixtures/vision/lm.safetensors, tools/make_vision_golden.py); a count mismatch is a
 * clear error; two images over two turns appended to one session equal one prefill of the whole
 * conversation.
 *
 * Tolerance: 1e-4 absolute on logits of magnitude ~1-5, as the LM golden tests (fp32 on both
 * sides); it also absorbs the projector rows' own fp32 error (~6e-6, see test-vision-encoder.c)
 * carried through the network. Measured max |diff| 6.6e-6; turn by turn vs one prefill 2.9e-6. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "engine.h"
#include "golden.h"
#include "test.h"
#include "test-backend.h"

TEST_DEFINE_GLOBALS;

#define LOGITS_TOL 1e-4
#define TURN_TOL 1e-4

static struct engine_model *model;
static struct engine_backend *backend; /* test_env_backend()'s */
static struct engine_vision *vision;

static float *encode(const char *png, int max_tiles, size_t *ret_rows)
{
	char err[256];
	struct engine_image *img = engine_image_load_png(golden_path(png), err, sizeof(err));
	struct engine_vision_grid g;
	float *rows = NULL;

	REQUIRE(img);
	REQUIRE(engine_vision_encode_image(vision, img, max_tiles, &g, &rows, ret_rows) == 0);
	engine_image_destroy(img);
	return rows;
}

static void test_golden_logits(void)
{
	struct st_file *f = golden_open("lm.safetensors");
	const float *prompt_f, *rows_f, *want;
	size_t n, n_rows, n_img;
	int32_t *ids;
	const float **embeds;
	float *img_rows, *logits;
	struct engine_session *s;
	struct golden_diff d = {0};
	int vocab;
	char err[256];

	prompt_f = golden_get(f, "prompt", &n);
	rows_f = golden_get(f, "logits_rows", &n_rows);
	want = golden_get(f, "logits", NULL);
	ids = malloc(sizeof(*ids) * n);
	embeds = malloc(sizeof(*embeds) * n);
	REQUIRE(ids && embeds);
	for (size_t i = 0; i < n; i++)
		ids[i] = (int32_t)prompt_f[i];

	img_rows = encode("square.png", 0, &n_img);
	CHECK_INT_EQ(n_img, 256);
	CHECK_INT_EQ(engine_vision_splice(ids, n, 250, img_rows, n_img,
					  (size_t)engine_vision_embed_dim(vision), embeds, err, sizeof(err)),
		     0);
	CHECK(embeds[0] == NULL);
	CHECK(embeds[6] == img_rows);
	CHECK(embeds[6 + 255] == img_rows + 255 * 64);
	CHECK(embeds[6 + 256] == NULL);

	s = engine_session_create_on(backend, 4096);
	REQUIRE(s);
	vocab = engine_session_vocab(s);
	logits = malloc(sizeof(float) * n * (size_t)vocab);
	REQUIRE(logits);
	CHECK_INT_EQ(engine_session_append(s, ids, embeds, n, ENGINE_LOGITS_ALL, logits), 0);
	for (size_t k = 0; k < n_rows; k++)
		for (int v = 0; v < vocab; v++)
			golden_diff_add(&d, logits[(size_t)rows_f[k] * vocab + v], want[k * vocab + v], k);
	printf("spliced prompt of %zu positions: %zu logits rows, max |diff| %.3g\n", n, n_rows, d.max_abs);
	CHECK(d.max_abs <= LOGITS_TOL);

	/* one <image> too few: the counts are named */
	ids[6] = 17;
	err[0] = 0;
	CHECK_INT_EQ(engine_vision_splice(ids, n, 250, img_rows, n_img, 64, embeds, err, sizeof(err)),
		     -EINVAL);
	CHECK(strstr(err, "255") != NULL && strstr(err, "256") != NULL);

	engine_session_destroy(s);
	free(logits);
	free(img_rows);
	free(embeds);
	free(ids);
	st_file_destroy(f);
}

/* ids: pre..., 250 x n_img, post... */
static size_t build_turn(int32_t *ids, const int32_t *pre, size_t n_pre, size_t n_img, const int32_t *post,
			 size_t n_post)
{
	size_t n = 0;

	for (size_t i = 0; i < n_pre; i++)
		ids[n++] = pre[i];
	for (size_t i = 0; i < n_img; i++)
		ids[n++] = 250;
	for (size_t i = 0; i < n_post; i++)
		ids[n++] = post[i];
	return n;
}

static void test_two_turns(void)
{
	static const int32_t pre1[] = {3, 70, 251}, post1[] = {252, 11, 12, 2};
	static const int32_t pre2[] = {4, 71, 251}, post2[] = {252, 13, 14, 15};
	size_t n_a, n_b, n1, n2;
	float *a = encode("square.png", 0, &n_a);
	float *b = encode("small.png", 2, &n_b); /* 2 tiles + thumbnail */
	float *both = malloc(sizeof(float) * (n_a + n_b) * 64);
	int32_t *ids = malloc(sizeof(int32_t) * (n_a + n_b + 32));
	const float **embeds = malloc(sizeof(float *) * (n_a + n_b + 32));
	struct engine_session *s1 = engine_session_create_on(backend, 4096);
	struct engine_session *s2 = engine_session_create_on(backend, 4096);
	int vocab = engine_session_vocab(s1);
	float *l_turn1 = malloc(sizeof(float) * (size_t)vocab);
	float *l_turn2 = malloc(sizeof(float) * (size_t)vocab);
	float *l_all;
	double d1 = 0, d2 = 0;

	REQUIRE(both && ids && embeds && s1 && s2 && l_turn1 && l_turn2);
	CHECK_INT_EQ(n_b, 3 * 256);

	/* turn by turn */
	n1 = build_turn(ids, pre1, 3, n_a, post1, 4);
	CHECK_INT_EQ(engine_vision_splice(ids, n1, 250, a, n_a, 64, embeds, NULL, 0), 0);
	CHECK_INT_EQ(engine_session_append(s1, ids, embeds, n1, ENGINE_LOGITS_LAST, l_turn1), 0);
	n2 = build_turn(ids, pre2, 3, n_b, post2, 4);
	CHECK_INT_EQ(engine_vision_splice(ids, n2, 250, b, n_b, 64, embeds, NULL, 0), 0);
	CHECK_INT_EQ(engine_session_append(s1, ids, embeds, n2, ENGINE_LOGITS_LAST, l_turn2), 0);

	/* the whole conversation at once, both images' rows in order */
	memcpy(both, a, sizeof(float) * n_a * 64);
	memcpy(both + n_a * 64, b, sizeof(float) * n_b * 64);
	n1 = build_turn(ids, pre1, 3, n_a, post1, 4);
	n2 = build_turn(ids + n1, pre2, 3, n_b, post2, 4);
	CHECK_INT_EQ(engine_vision_splice(ids, n1 + n2, 250, both, n_a + n_b, 64, embeds, NULL, 0), 0);
	l_all = malloc(sizeof(float) * (n1 + n2) * (size_t)vocab);
	REQUIRE(l_all);
	CHECK_INT_EQ(engine_session_append(s2, ids, embeds, n1 + n2, ENGINE_LOGITS_ALL, l_all), 0);
	for (int v = 0; v < vocab; v++) {
		d1 = fmax(d1, fabs(l_turn1[v] - l_all[(n1 - 1) * (size_t)vocab + v]));
		d2 = fmax(d2, fabs(l_turn2[v] - l_all[(n1 + n2 - 1) * (size_t)vocab + v]));
	}
	printf("two images over two turns vs one prefill: max |diff| %.3g, %.3g\n", d1, d2);
	CHECK(d1 <= TURN_TOL);
	CHECK(d2 <= TURN_TOL);
	CHECK_INT_EQ(engine_session_n_tokens(s1), (int)(n1 + n2));

	free(l_all);
	free(l_turn1);
	free(l_turn2);
	engine_session_destroy(s1);
	engine_session_destroy(s2);
	free(embeds);
	free(ids);
	free(both);
	free(a);
	free(b);
}

int main(void)
{
	char path[4096], err[256];

	snprintf(path, sizeof(path), "%s/tests/fixtures/vision/tiny-vlm", golden_source_root());
	model = engine_model_load(path, err, sizeof(err));
	if (!model) {
		fprintf(stderr, "%s: %s\n", path, err);
		return 1;
	}
	backend = test_env_backend(model);
	if (!backend)
		return 1;
	vision = engine_vision_create(model, err, sizeof(err));
	if (!vision) {
		fprintf(stderr, "engine_vision_create: %s\n", err);
		return 1;
	}
	test_golden_logits();
	test_two_turns();
	engine_vision_destroy(vision);
	engine_backend_destroy(backend);
	engine_model_destroy(model);
	return test_exit();
}
