/* holo-infer --image end to end on tests/fixtures/vision/tiny-vlm: the chat prompt it renders for
 * a system turn, an image and a question equals transformers' apply_chat_template ids for that
 * conversation (tests/fixtures/chat/tiny-vlm.json "spec_example",
 * tools/chat_template_diff.py); a greedy run prints text, the phase timings and exits 0, and its
 * dumped logits of the spliced prompt match the engine's own prefill of that prompt in this
 * process (whose agreement with transformers test-vision-chat.c holds; tolerance 1e-4, the
 * thread counts differ); a missing image, a model without a vision tower and a tile budget above
 * the checkpoint's fail with exit code 1 and a message. argv[1] is holo-infer. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "golden.h"
#include "test-backend.h"

TEST_DEFINE_GLOBALS;

#define LOGITS_TOL 1e-4
#define NPY_HEADER_BYTES 128 /* what holo-infer writes */

/* Runs cmd (stderr to stdout); returns its exit status and output (malloc'ed) in *out. */
static int run(const char *cmd, char **out)
{
	char full[16384];
	FILE *p;
	size_t cap = 1 << 16, n = 0, r;
	char *buf = malloc(cap);
	int st;

	snprintf(full, sizeof(full), "%s 2>&1", cmd);
	p = popen(full, "r");
	REQUIRE(p && buf);
	while ((r = fread(buf + n, 1, cap - 1 - n, p)) > 0) {
		n += r;
		if (n == cap - 1) {
			buf = realloc(buf, cap *= 2);
			REQUIRE(buf);
		}
	}
	buf[n] = 0;
	st = pclose(p);
	*out = buf;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static const json_t *golden_case(json_t *golden, const char *name)
{
	const json_t *c;
	size_t i;

	json_array_foreach(json_object_get(golden, "cases"), i,
			   c) if (strcmp(json_string_value(json_object_get(c, "name")), name) == 0) return c;
	REQUIRE(!"golden case missing");
	return NULL;
}

/* The logits of every position of ids (the image's <image> runs spliced with the rows of png
 * encoded at a budget of 2 tiles), by the engine in this process. */
static float *engine_logits(const char *model_dir, const char *png, const json_t *ids)
{
	size_t n = json_array_size(ids), n_rows;
	int32_t *id = malloc(sizeof(int32_t) * n);
	const float **embeds = malloc(sizeof(*embeds) * n);
	char err[256];
	struct engine_model *m = engine_model_load(model_dir, err, sizeof(err));
	struct engine_vision *v = m ? engine_vision_create(m, err, sizeof(err)) : NULL;
	struct engine_image *pic = engine_image_load_png(png, err, sizeof(err));
	struct engine_vision_grid g;
	struct engine_backend *b = m ? test_env_backend(m) : NULL;
	struct engine_session *s;
	float *rows = NULL, *logits;

	REQUIRE(id && embeds && m && v && pic && b);
	for (size_t i = 0; i < n; i++)
		id[i] = (int32_t)json_integer_value(json_array_get(ids, i));
	REQUIRE(engine_vision_encode_image(v, pic, 2, &g, &rows, &n_rows) == 0);
	REQUIRE(engine_vision_splice(id, n, 250, rows, n_rows, engine_vision_embed_dim(v), embeds, err,
				     sizeof(err)) == 0);
	s = engine_session_create_on(b, (int)n + 1);
	logits = malloc(sizeof(float) * n * (size_t)engine_session_vocab(s));
	REQUIRE(s && logits);
	REQUIRE(engine_session_append(s, id, embeds, n, ENGINE_LOGITS_ALL, logits) == 0);
	engine_session_destroy(s);
	engine_image_destroy(pic);
	engine_vision_destroy(v);
	engine_backend_destroy(b);
	engine_model_destroy(m);
	free(rows);
	free(embeds);
	free(id);
	return logits;
}

int main(int argc, char **argv)
{
	char model[4096], img[4096], cmd[12288], npy[] = "/tmp/holo-infer-image-XXXXXX";
	const char *root = golden_source_root();
	json_t *golden;
	const json_t *c, *ids;
	char *out = NULL;
	int fd;

	REQUIRE(argc == 2);
	snprintf(model, sizeof(model), "%s/tests/fixtures/chat/tiny-vlm.json", root);
	golden = json_load_file(model, 0, NULL);
	REQUIRE(golden);
	c = golden_case(golden, "spec_example");
	ids = json_object_get(c, "ids");
	snprintf(model, sizeof(model), "%s/tests/fixtures/vision/tiny-vlm", root);
	snprintf(img, sizeof(img), "%s/tests/fixtures/vision/small.png", root);

	/* --tokenize: the rendered chat prompt, ids as the reference */
	snprintf(cmd, sizeof(cmd),
		 "'%s' --model '%s' --image '%s' --max-tiles 2 --system /no_think "
		 "--prompt 'Click on the search bar.' --tokenize --threads 2 2>/dev/null",
		 argv[1], model, img);
	{
		FILE *p = popen(cmd, "r");
		char *buf = malloc(1 << 16);
		size_t n;
		json_t *got;

		REQUIRE(p && buf);
		n = fread(buf, 1, (1 << 16) - 1, p);
		buf[n] = 0;
		CHECK_INT_EQ(pclose(p), 0);
		got = json_loads(buf, 0, NULL);
		CHECK(got && json_equal(got, ids));
		printf("--tokenize: %zu ids, %s the reference\n", json_array_size(got),
		       got && json_equal(got, ids) ? "equal to" : "DIFFERENT from");
		json_decref(got);
		free(buf);
	}

	/* a greedy run with the logits dumped */
	fd = mkstemp(npy);
	REQUIRE(fd >= 0);
	close(fd);
	snprintf(cmd, sizeof(cmd),
		 "'%s' --model '%s' --image '%s' --max-tiles 2 --system /no_think "
		 "--prompt 'Click on the search bar.' --max-tokens 3 --threads 2 --dump-logits '%s'",
		 argv[1], model, img, npy);
	CHECK_INT_EQ(run(cmd, &out), 0);
	printf("%s", out);
	CHECK(strstr(out, "2x1 tiles + thumbnail, 768 image tokens"));
	CHECK(strstr(out, "preprocess: 1 images in "));
	CHECK(strstr(out, "vision: 3 tiles in "));
	CHECK(strstr(out, "prefill: 799 tokens in "));
	CHECK(strstr(out, "decode: 2 tokens in "));
	free(out);
	{
		size_t vocab = 256, n_ids = json_array_size(ids);
		float *want = engine_logits(model, img, ids);
		FILE *nf = fopen(npy, "rb");
		float *got = malloc(sizeof(float) * (n_ids + 2) * vocab);
		struct golden_diff d = {0};

		REQUIRE(nf && got);
		REQUIRE(fseek(nf, NPY_HEADER_BYTES, SEEK_SET) == 0);
		/* every prompt row, then the 2 generated tokens fed back */
		CHECK_INT_EQ(fread(got, sizeof(float) * vocab, n_ids + 3, nf), n_ids + 2);
		fclose(nf);
		for (size_t k = 0; k < n_ids; k++)
			for (size_t v = 0; v < vocab; v++)
				golden_diff_add(&d, got[k * vocab + v], want[k * vocab + v], k);
		printf("dumped prompt logits vs the engine in process: %zu rows, max |diff| %.3g\n", n_ids,
		       d.max_abs);
		CHECK(d.max_abs <= LOGITS_TOL);
		free(got);
		free(want);
	}
	unlink(npy);

	/* failures name the cause and exit 1 */
	snprintf(cmd, sizeof(cmd), "'%s' --model '%s' --image '%s/nope.png' --prompt x", argv[1], model, root);
	CHECK_INT_EQ(run(cmd, &out), 1);
	CHECK(strstr(out, "nope.png"));
	free(out);
	snprintf(cmd, sizeof(cmd), "'%s' --model '%s/tests/fixtures/models/tiny-chat' --image '%s' --prompt x",
		 argv[1], root, img);
	CHECK_INT_EQ(run(cmd, &out), 1);
	CHECK(strstr(out, "no vision tower"));
	free(out);
	snprintf(cmd, sizeof(cmd), "'%s' --model '%s' --image '%s' --max-tiles 13 --prompt x", argv[1], model,
		 img);
	CHECK_INT_EQ(run(cmd, &out), 1);
	CHECK(strstr(out, "above the checkpoint's budget of 12"));
	free(out);
	snprintf(cmd, sizeof(cmd), "'%s' --model '%s' --image '%s' --prompt-ids 1,2", argv[1], model, img);
	CHECK_INT_EQ(run(cmd, &out), 2);
	free(out);

	json_decref(golden);
	return test_exit();
}
