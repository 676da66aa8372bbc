/* Chat rendering (engine/chat/chat.c, model.md 5.2) with images through the vision encoder and
 * the language model, against tools/make_chat_golden.py's goldens: each conversation of
 * tests/fixtures/vision/chat-golden.json rendered by holod (BOS first, as the base template
 * does) to the very ids transformers' apply_chat_template gave, and holod's rendering of the
 * image conversations (two images over two turns; one image of 3 tiles) spliced and prefilled
 * against transformers' logits on those ids (chat.safetensors); a session that gets the second
 * image turn of holod's rendering appended against one prefill of the whole rendering; the
 * rendering rules and errors, and the template check. tests/chat/test-chat-template.c holds the
 * rendering to apply_chat_template on more conversations (tests/fixtures/chat).
 *
 * Tolerances: logits 1e-4 absolute, as test-vision-splice.c (fp32 on both sides, logits ~1-5;
 * the projector rows' own fp32 error carried through). Turn by turn vs one prefill: 1e-5 (the
 * same arithmetic in a different grouping of positions). */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine.h"
#include "golden.h"
#include "test.h"
#include "test-backend.h"

TEST_DEFINE_GLOBALS;

#define LOGITS_TOL 1e-4
#define TURN_TOL 1e-5
#define MAX_MSGS 8

static struct engine_model *model;
static struct engine_backend *backend; /* test_env_backend()'s */
static struct engine_vision *vision;
static json_t *golden;

static int tiles_of(const char *image)
{
	const json_t *img = json_object_get(json_object_get(golden, "images"), image);

	REQUIRE(img);
	return (int)json_integer_value(json_object_get(img, "n_tiles"));
}

/* The golden case's messages; tiles[] holds the image tile counts in order. */
static size_t case_messages(const json_t *c, struct engine_chat_message *msgs, int *tiles)
{
	const json_t *arr = json_object_get(c, "messages"), *m;
	size_t i, n_tiles = 0;

	REQUIRE(json_array_size(arr) <= MAX_MSGS);
	json_array_foreach(arr, i, m)
	{
		const char *role = json_string_value(json_object_get(m, "role"));
		const json_t *imgs = json_object_get(m, "images"), *e;
		size_t k;

		msgs[i] = (struct engine_chat_message){
			.role = strcmp(role, "system") == 0 ? ENGINE_CHAT_SYSTEM :
				strcmp(role, "user") == 0   ? ENGINE_CHAT_USER :
							      ENGINE_CHAT_ASSISTANT,
			.text = json_string_value(json_object_get(m, "content")),
			.image_tiles = tiles + n_tiles,
			.n_images = json_array_size(imgs),
		};
		json_array_foreach(imgs, k, e) tiles[n_tiles++] = tiles_of(json_string_value(e));
	}
	return json_array_size(arr);
}

static float *encode(const char *image, size_t *ret_rows)
{
	const json_t *img = json_object_get(json_object_get(golden, "images"), image);
	struct engine_vision_preprocess p;
	struct engine_image *pic;
	struct engine_vision_grid g;
	float *rows = NULL;
	char err[256];
	int budget;

	REQUIRE(img);
	pic = engine_image_load_png(golden_path(json_string_value(json_object_get(img, "png"))), err,
				    sizeof(err));
	REQUIRE(pic);
	engine_vision_get_preprocess(vision, &p);
	budget = (int)json_integer_value(json_object_get(img, "max_tiles"));
	REQUIRE(engine_vision_encode_image(vision, pic, budget == p.max_tiles ? 0 : budget, &g, &rows,
					   ret_rows) == 0);
	CHECK_INT_EQ(g.n_tiles, tiles_of(image));
	engine_image_destroy(pic);
	return rows;
}

static const json_t *find_case(const char *name)
{
	const json_t *c;
	size_t i;

	json_array_foreach(json_object_get(golden, "cases"), i,
			   c) if (strcmp(json_string_value(json_object_get(c, "name")), name) == 0) return c;
	REQUIRE(!"golden case missing");
	return NULL;
}

/* Splices rows (n_rows x 64, the images of t in order) and appends t to s. */
static int append_spliced(struct engine_session *s, const struct engine_chat_tokens *t, const float *rows,
			  size_t n_rows, enum engine_logits want, float *logits)
{
	const float **embeds = malloc(sizeof(*embeds) * (t->n_ids + 1));
	char err[256];
	int r;

	REQUIRE(embeds);
	r = engine_vision_splice(t->ids, t->n_ids, 250, rows, n_rows, 64, embeds, err, sizeof(err));
	if (r == 0)
		r = engine_session_append(s, t->ids, embeds, t->n_ids, want, logits);
	else
		fprintf(stderr, "splice: %s\n", err);
	free(embeds);
	return r;
}

/* The golden case's ids, with its image runs (runs of <image>, 256 per tile). */
static void golden_tokens(const json_t *c, struct engine_chat_tokens *t)
{
	const json_t *ids = json_object_get(c, "ids");
	size_t n = json_array_size(ids);

	REQUIRE((t->ids = malloc(sizeof(int32_t) * n)) && (t->images = calloc(16, sizeof(*t->images))));
	for (size_t i = 0; i < n; i++)
		t->ids[i] = (int32_t)json_integer_value(json_array_get(ids, i));
	t->n_ids = n;
	for (size_t i = 0; i < n;) {
		size_t j = i;

		while (j < n && t->ids[j] == 250)
			j++;
		if (j > i) {
			REQUIRE(t->n_images < 16);
			t->images[t->n_images++] =
				(struct engine_chat_image){.begin = i,
							   .n = j - i,
							   .n_tiles = (int)((j - i) / 256)};
		}
		i = j > i ? j : i + 1;
	}
}

/* Every golden conversation: holod's rendering is the reference's text and ids; for those with
 * logits, holod's rendering with its images spliced, in one prefill, gives transformers'
 * logits. */
static void test_golden_cases(void)
{
	struct st_file *f = golden_open("chat.safetensors");
	struct engine_chat *chat = engine_chat_create(engine_model_tokenizer(model), vision, false, NULL, 0);
	const json_t *c;
	size_t ci, n_logit_cases = 0;

	REQUIRE(chat);
	json_array_foreach(json_object_get(golden, "cases"), ci, c)
	{
		const char *name = json_string_value(json_object_get(c, "name"));
		struct engine_chat_message msgs[MAX_MSGS];
		struct engine_chat_tokens t = {0}, ref = {0};
		int tiles[16];
		size_t n = case_messages(c, msgs, tiles);
		char key[128], err[256] = "";

		engine_chat_reset(chat);
		CHECK(!json_is_true(json_object_get(c, "reasoning")));
		if (engine_chat_render(chat, msgs, n, true, &t, err, sizeof(err)) != 0) {
			fprintf(stderr, "%s: %s\n", name, err);
			test_failures++;
			continue;
		}
		golden_tokens(c, &ref);
		CHECK_STR_EQ(t.text, json_string_value(json_object_get(c, "text")));
		CHECK_INT_EQ(t.ids[0], 1); /* BOS */
		bool same = t.n_ids == ref.n_ids && memcmp(t.ids, ref.ids, sizeof(int32_t) * t.n_ids) == 0;
		if (!same)
			fprintf(stderr, "%s: holod renders %zu ids, the reference %zu\n", name, t.n_ids,
				ref.n_ids);
		CHECK(same);
		snprintf(key, sizeof(key), "%s.logits_rows", name);
		if (same && st_file_find(f, key)) {
			const json_t *msgs_j = json_object_get(c, "messages"), *m, *img;
			size_t mi, k, n_rows = 0, n_lrows;
			float *rows = NULL;
			json_array_foreach(msgs_j, mi, m)
				json_array_foreach(json_object_get(m, "images"), k, img)
			{
				size_t nr;
				float *r = encode(json_string_value(img), &nr);
				rows = realloc(rows, sizeof(float) * (n_rows + nr) * 64);
				REQUIRE(rows);
				memcpy(rows + n_rows * 64, r, sizeof(float) * nr * 64);
				n_rows += nr;
				free(r);
			}
			const float *rows_f = golden_get(f, key, &n_lrows);
			snprintf(key, sizeof(key), "%s.logits", name);
			const float *want = golden_get(f, key, NULL);
			struct engine_session *s = engine_session_create_on(backend, 4096);
			REQUIRE(s);
			int vocab = engine_session_vocab(s);
			float *l = malloc(sizeof(float) * t.n_ids * (size_t)vocab);
			struct golden_diff d = {0};
			REQUIRE(l);
			CHECK_INT_EQ(append_spliced(s, &t, rows, n_rows, ENGINE_LOGITS_ALL, l), 0);
			for (size_t q = 0; q < n_lrows; q++)
				for (int v = 0; v < vocab; v++)
					golden_diff_add(&d, l[(size_t)rows_f[q] * vocab + v],
							want[q * vocab + v], q);
			printf("%s: holod's rendering, %zu ids from <s>, %zu images: %zu logits rows "
			       "vs transformers, max |diff| %.3g\n",
			       name, t.n_ids, t.n_images, n_lrows, d.max_abs);
			CHECK(d.max_abs <= LOGITS_TOL);
			n_logit_cases++;
			engine_session_destroy(s);
			free(l);
			free(rows);
		}
		engine_chat_tokens_finish(&t);
		engine_chat_tokens_finish(&ref);
	}
	CHECK_INT_EQ(n_logit_cases, 2);
	engine_chat_destroy(chat);
	st_file_destroy(f);
}

/* The two-image conversation turn by turn: a session that gets the second image turn appended
 * gives what one prefill of the whole rendering gives. */
static void test_two_images(void)
{
	const json_t *c = find_case("two_images");
	struct engine_chat_message msgs[MAX_MSGS];
	int tiles[16];
	size_t n = case_messages(c, msgs, tiles), n_sq, n_sm;
	float *sq = encode("square", &n_sq), *sm = encode("small", &n_sm);
	float *both = malloc(sizeof(float) * (n_sq + n_sm) * 64);
	struct engine_chat *chat = engine_chat_create(engine_model_tokenizer(model), vision, false, NULL, 0);
	struct engine_chat_tokens whole = {0}, t1 = {0}, t2 = {0};
	struct engine_session *s1 = engine_session_create_on(backend, 4096);
	struct engine_session *s2 = engine_session_create_on(backend, 4096);
	int vocab = engine_session_vocab(s1);
	float *l_all, *l_last = malloc(sizeof(float) * (size_t)vocab);
	double dturn = 0;

	REQUIRE(both && chat && s1 && s2 && l_last && n == 4);
	memcpy(both, sq, sizeof(float) * n_sq * 64);
	memcpy(both + n_sq * 64, sm, sizeof(float) * n_sm * 64);

	/* holod's rendering of the same conversation in one prefill */
	CHECK_INT_EQ(engine_chat_render(chat, msgs, n, true, &whole, NULL, 0), 0);
	CHECK_INT_EQ(whole.n_images, 2);
	l_all = malloc(sizeof(float) * whole.n_ids * (size_t)vocab);
	REQUIRE(l_all);
	CHECK_INT_EQ(append_spliced(s1, &whole, both, n_sq + n_sm, ENGINE_LOGITS_ALL, l_all), 0);

	/* a persistent session: first system + user (image) + assistant, then the next
	 * observation turn (image + text) and the generation prompt appended on top */
	engine_chat_reset(chat);
	for (size_t k = 0; k < 3; k++)
		CHECK_INT_EQ(engine_chat_append(chat, &msgs[k], &t1, NULL, 0), 0);
	CHECK_INT_EQ(append_spliced(s2, &t1, sq, n_sq, ENGINE_LOGITS_NONE, NULL), 0);
	CHECK_INT_EQ(engine_chat_append(chat, &msgs[3], &t2, NULL, 0), 0);
	CHECK_INT_EQ(engine_chat_generation_prompt(chat, &t2), 0);
	CHECK_INT_EQ(t2.n_images, 1);
	CHECK_INT_EQ(t1.n_ids + t2.n_ids, whole.n_ids);
	CHECK(t2.n_ids <= whole.n_ids &&
	      memcmp(t2.ids, whole.ids + t1.n_ids, sizeof(int32_t) * t2.n_ids) == 0);
	CHECK_INT_EQ(t2.images[0].begin + t1.n_ids, whole.images[1].begin);
	CHECK_INT_EQ(append_spliced(s2, &t2, sm, n_sm, ENGINE_LOGITS_LAST, l_last), 0);
	for (int v = 0; v < vocab; v++)
		dturn = fmax(dturn, fabs(l_last[v] - l_all[(whole.n_ids - 1) * (size_t)vocab + v]));
	printf("image turn appended to a session vs one prefill: max |diff| %.3g\n", dturn);
	CHECK(dturn <= TURN_TOL);
	CHECK_INT_EQ(engine_session_n_tokens(s2), (int)whole.n_ids);

	engine_chat_tokens_finish(&whole);
	engine_chat_tokens_finish(&t1);
	engine_chat_tokens_finish(&t2);
	engine_chat_destroy(chat);
	engine_session_destroy(s1);
	engine_session_destroy(s2);
	free(l_all);
	free(l_last);
	free(both);
	free(sq);
	free(sm);
}

static void test_rules(void)
{
	const struct engine_tokenizer *tok = engine_model_tokenizer(model);
	struct engine_chat *chat = engine_chat_create(tok, vision, false, NULL, 0);
	struct engine_chat *text_only = engine_chat_create(tok, NULL, false, NULL, 0);
	struct engine_chat_tokens t = {0};
	int one = 1, two[2] = {1, 3};
	int32_t stops[2];
	char err[256];

	REQUIRE(chat && text_only);
	CHECK_INT_EQ(engine_chat_stop_ids(chat, stops), 2);
	CHECK_INT_EQ(stops[0], engine_tokenizer_token_id(tok, "<SPECIAL_12>"));
	CHECK_INT_EQ(stops[1], engine_tokenizer_token_id(tok, "</s>"));
	CHECK_INT_EQ(engine_chat_image_token(chat), 250);

	/* Python str.strip(): Unicode whitespace (U+3000, U+00A0, U+2009) and \x1c..\x1f go */
	CHECK_INT_EQ(engine_chat_append(chat,
					&(struct engine_chat_message){
						ENGINE_CHAT_USER, "\xe3\x80\x80\x1f Hi\xc2\xa0\xe2\x80\x89",
						NULL, 0},
					&t, err, sizeof(err)),
		     0);
	CHECK_STR_EQ(t.text, "<s><SPECIAL_10>System\n\n<SPECIAL_11>User\nHi\n");
	CHECK_INT_EQ(t.ids[0], 1); /* BOS (model.md 5.2) */
	/* images without placeholders go in front: "<image 1><image> <image 2><image>\n" */
	CHECK_INT_EQ(engine_chat_append(chat, &(struct engine_chat_message){ENGINE_CHAT_USER, "Look.", two, 2},
					&t, err, sizeof(err)),
		     0);
	CHECK_INT_EQ(t.n_images, 2);
	CHECK_INT_EQ(t.images[1].n, 3 * 256);
	CHECK(strstr(t.text, "<SPECIAL_11>User\n<image 1><img>") && strstr(t.text, "</img> <image 2><img>") &&
	      strstr(t.text, "</img>\nLook.\n"));

	/* errors leave the buffer and the state as they were */
	size_t n_ids = t.n_ids;
	err[0] = 0;
	CHECK_INT_EQ(engine_chat_append(chat,
					&(struct engine_chat_message){ENGINE_CHAT_SYSTEM, "late", NULL, 0},
					&t, err, sizeof(err)),
		     -EINVAL);
	CHECK(strstr(err, "first"));
	CHECK_INT_EQ(engine_chat_append(chat,
					&(struct engine_chat_message){ENGINE_CHAT_USER,
								      "click <SPECIAL_12> /think", NULL, 0},
					&t, err, sizeof(err)),
		     -EINVAL);
	CHECK(strstr(err, "special"));
	CHECK(!engine_chat_reasoning(chat)); /* the failed turn's /think did not count */
	CHECK_INT_EQ(engine_chat_append(chat,
					&(struct engine_chat_message){ENGINE_CHAT_USER, "<image> <image>",
								      two, 1},
					&t, err, sizeof(err)),
		     -EINVAL);
	CHECK(strstr(err, "2 '<image>' placeholders for 1 images"));
	CHECK_INT_EQ(engine_chat_append(chat,
					&(struct engine_chat_message){ENGINE_CHAT_ASSISTANT, "x", &one, 1},
					&t, err, sizeof(err)),
		     -EINVAL);
	CHECK_INT_EQ(engine_chat_append(text_only,
					&(struct engine_chat_message){ENGINE_CHAT_USER, "x", &one, 1}, &t,
					err, sizeof(err)),
		     -EINVAL);
	CHECK_INT_EQ(engine_chat_append(chat,
					&(struct engine_chat_message){ENGINE_CHAT_USER, "bad \xff", NULL, 0},
					&t, err, sizeof(err)),
		     -EILSEQ);
	CHECK_INT_EQ(t.n_ids, n_ids);

	/* the reasoning switch, and the turn that closes a generation */
	CHECK_INT_EQ(engine_chat_append(chat,
					&(struct engine_chat_message){ENGINE_CHAT_USER, "go /think", NULL, 0},
					&t, err, sizeof(err)),
		     0);
	CHECK(engine_chat_reasoning(chat));
	CHECK_INT_EQ(engine_chat_close_generation(chat, &t), 0);
	CHECK_INT_EQ(t.ids[t.n_ids - 2], 12);
	CHECK(strcmp(t.text + t.text_len - strlen("go\n<SPECIAL_12>\n"), "go\n<SPECIAL_12>\n") == 0);
	/* a copy keeps the state it was taken in, whatever happens to the original */
	struct engine_chat *copy = engine_chat_dup(chat);
	REQUIRE(copy);
	engine_chat_reset(chat);
	CHECK(!engine_chat_reasoning(chat));
	CHECK(engine_chat_reasoning(copy));
	CHECK_INT_EQ(engine_chat_append(copy,
					&(struct engine_chat_message){ENGINE_CHAT_SYSTEM, "late", NULL, 0},
					&t, err, sizeof(err)),
		     -EINVAL); /* a turn was rendered before the copy */
	engine_chat_destroy(copy);

	/* closing a generation that stopped right after its content (no "\n" of its own): the
	 * turn ends as the history's assistant turn "<SPECIAL_11>Assistant\nDone.\n<SPECIAL_12>\n" */
	struct engine_chat_tokens closed = {0}, history = {0};
	int32_t *nl;
	size_t n_nl;
	CHECK_INT_EQ(engine_chat_close_content(chat, &closed), 0);
	CHECK_STR_EQ(closed.text, "\n<SPECIAL_12>\n");
	REQUIRE(engine_tokenizer_encode(tok, "\n", 1, false, &nl, &n_nl) == 0 && n_nl == 1);
	CHECK_INT_EQ(closed.n_ids, 3);
	CHECK(closed.n_ids == 3 && closed.ids[0] == nl[0] && closed.ids[1] == 12 && closed.ids[2] == nl[0]);
	CHECK_INT_EQ(engine_chat_append(chat,
					&(struct engine_chat_message){ENGINE_CHAT_ASSISTANT, "Done.", NULL, 0},
					&history, err, sizeof(err)),
		     0);
	CHECK(history.text_len > closed.text_len &&
	      strcmp(history.text + history.text_len - closed.text_len, closed.text) == 0);
	free(nl);
	engine_chat_tokens_finish(&closed);
	engine_chat_tokens_finish(&history);

	engine_chat_tokens_finish(&t);
	engine_chat_destroy(chat);
	engine_chat_destroy(text_only);
	engine_chat_destroy(NULL);
}

/* A renderer over the tokenizer alone with the encoder's tokens per tile renders what the one
 * created with the encoder does (the two-image conversation); 0 tokens per tile is text only. */
static void test_create_raw(void)
{
	const struct engine_tokenizer *tok = engine_model_tokenizer(model);
	const json_t *c = find_case("two_images");
	struct engine_chat_message msgs[MAX_MSGS];
	int tiles[16], one = 1;
	size_t n = case_messages(c, msgs, tiles);
	struct engine_chat *raw =
		engine_chat_create_raw(tok, engine_vision_tokens_per_tile(vision),
				       json_is_true(json_object_get(c, "reasoning")), NULL, 0);
	struct engine_chat *text_only = engine_chat_create_raw(tok, 0, false, NULL, 0);
	struct engine_chat *full = engine_chat_create(tok, vision, false, NULL, 0);
	struct engine_chat_tokens t = {0}, f = {0};
	char err[256] = "";

	REQUIRE(raw && text_only && full);
	CHECK_INT_EQ(engine_chat_render(raw, msgs, n, true, &t, err, sizeof(err)), 0);
	CHECK_INT_EQ(engine_chat_render(full, msgs, n, true, &f, err, sizeof(err)), 0);
	CHECK(t.n_ids == f.n_ids && memcmp(t.ids, f.ids, sizeof(int32_t) * t.n_ids) == 0);
	CHECK(t.text && f.text && strcmp(t.text, f.text) == 0);
	CHECK_INT_EQ(t.n_images, 2);
	CHECK_INT_EQ(engine_chat_image_token(raw), 250);
	CHECK_INT_EQ(engine_chat_append(text_only,
					&(struct engine_chat_message){ENGINE_CHAT_USER, "<image>", &one, 1},
					&t, err, sizeof(err)),
		     -EINVAL);
	errno = 0;
	CHECK(engine_chat_create_raw(tok, -1, false, NULL, 0) == NULL && errno == EINVAL);
	errno = 0;
	CHECK(engine_chat_create_raw(tok, ENGINE_CHAT_MAX_TOKENS_PER_TILE + 1, false, err, sizeof(err)) ==
		      NULL &&
	      errno == EINVAL);
	CHECK(strstr(err, "tokens per tile"));
	engine_chat_tokens_finish(&t);
	engine_chat_tokens_finish(&f);
	engine_chat_destroy(full);
	engine_chat_destroy(raw);
	engine_chat_destroy(text_only);
}

static void put(const char *dir, const char *name, const char *text)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	REQUIRE(f);
	fputs(text, f);
	fclose(f);
}

static void unlink_in(const char *dir, const char *name)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	unlink(path);
}

static void test_template_check(void)
{
	static const char *const chatml =
		"{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + "
		"'<|im_end|>\\n' }}{% endfor %}";
	char msg[512], dir[] = "/tmp/holo-chat-XXXXXX", src[4096], dst[4096];
	const char *files[] = {"config.json", "model.safetensors", "tokenizer.json"};
	struct engine_model *m;

	/* the fixture ships the model.md 5.2 template */
	CHECK_INT_EQ(engine_chat_check_model(model, msg, sizeof(msg)), ENGINE_CHAT_TEMPLATE_KNOWN);
	CHECK_INT_EQ(engine_chat_check_template(NULL, chatml, strlen(chatml), msg, sizeof(msg)),
		     ENGINE_CHAT_TEMPLATE_DIFFERENT);
	printf("ChatML: %s\n", msg);
	CHECK(strstr(msg, "'<SPECIAL_11>User'") && strstr(msg, "'<SPECIAL_12>'") &&
	      strstr(msg, "'<think>'") && strstr(msg, "'<|im_start|>'"));

	/* a checkpoint directory: no template, a different one in each place */
	REQUIRE(mkdtemp(dir));
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(src, sizeof(src), "%s/tests/fixtures/vision/tiny-vlm/%s", golden_source_root(),
			 files[i]);
		snprintf(dst, sizeof(dst), "%s/%s", dir, files[i]);
		REQUIRE(symlink(src, dst) == 0);
	}
	m = engine_model_load(dir, msg, sizeof(msg));
	REQUIRE(m);
	CHECK_INT_EQ(engine_chat_check_model(m, msg, sizeof(msg)), ENGINE_CHAT_TEMPLATE_NONE);
	CHECK(strstr(msg, "no chat template"));
	put(dir, "tokenizer_config.json",
	    "{\"chat_template\": [{\"name\": \"tool_use\", \"template\": \"x\"},"
	    " {\"name\": \"default\", \"template\": \"bos_token <SPECIAL_10>System"
	    " <SPECIAL_11>User <SPECIAL_11>Assistant <SPECIAL_12> <think>\"}]}");
	CHECK_INT_EQ(engine_chat_check_model(m, msg, sizeof(msg)), ENGINE_CHAT_TEMPLATE_KNOWN);
	put(dir, "tokenizer_config.json",
	    "{\"chat_template\": \"bos_token <SPECIAL_10>System "
	    "<SPECIAL_11>User <SPECIAL_11>Assistant <SPECIAL_12>\"}");
	CHECK_INT_EQ(engine_chat_check_model(m, msg, sizeof(msg)), ENGINE_CHAT_TEMPLATE_DIFFERENT);
	printf("no <think>: %s\n", msg);
	CHECK(strstr(msg, "tokenizer_config.json") && strstr(msg, "'<think>'") && !strstr(msg, "User'") &&
	      !strstr(msg, "bos_token"));
	/* a template that writes no BOS renders a different prompt (model.md 5.2) */
	put(dir, "tokenizer_config.json",
	    "{\"chat_template\": \"<SPECIAL_10>System <SPECIAL_11>User "
	    "<SPECIAL_11>Assistant <SPECIAL_12> <think>\"}");
	CHECK_INT_EQ(engine_chat_check_model(m, msg, sizeof(msg)), ENGINE_CHAT_TEMPLATE_DIFFERENT);
	CHECK(strstr(msg, "'bos_token'"));
	put(dir, "chat_template.jinja", chatml);
	CHECK_INT_EQ(engine_chat_check_model(m, msg, sizeof(msg)), ENGINE_CHAT_TEMPLATE_DIFFERENT);
	CHECK(strstr(msg, "chat_template.jinja") && strstr(msg, "<|im_start|>"));
	unlink_in(dir, "chat_template.jinja");
	put(dir, "tokenizer_config.json", "{\"chat_template\": 7}");
	CHECK_INT_EQ(engine_chat_check_model(m, msg, sizeof(msg)), -EINVAL);
	CHECK(strstr(msg, "not a string"));
	put(dir, "tokenizer_config.json", "{oops");
	CHECK_INT_EQ(engine_chat_check_model(m, msg, sizeof(msg)), -EINVAL);
	engine_model_destroy(m);

	/* a tokenizer without the format's markers cannot render it */
	m = engine_model_load(golden_path("../models/tiny-chat"), msg, sizeof(msg));
	REQUIRE(m);
	{
		struct engine_chat *c =
			engine_chat_create(engine_model_tokenizer(m), NULL, false, msg, sizeof(msg));
		CHECK(c != NULL); /* the tekken fixture has <SPECIAL_10..12> */
		engine_chat_destroy(c);
		/* tiny-vlm's vision config says <image> is 250; tiny-chat's tokenizer says 1226 */
		c = engine_chat_create(engine_model_tokenizer(m), vision, false, msg, sizeof(msg));
		CHECK(c == NULL && errno == EINVAL && strstr(msg, "img_context_token_id 250"));
	}
	engine_model_destroy(m);
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		unlink_in(dir, files[i]);
	unlink_in(dir, "tokenizer_config.json");
	CHECK_INT_EQ(rmdir(dir), 0);
}

int main(void)
{
	char path[4096], err[256];
	json_error_t jerr;

	golden = json_load_file(golden_path("chat-golden.json"), 0, &jerr);
	if (!golden) {
		fprintf(stderr, "chat-golden.json: %s\n", jerr.text);
		return 1;
	}
	snprintf(path, sizeof(path), "%s/tests/fixtures/vision/tiny-vlm", golden_source_root());
	model = engine_model_load(path, err, sizeof(err));
	if (!model || !engine_model_tokenizer(model)) {
		fprintf(stderr, "%s: %s\n", path, model ? "no tokenizer" : err);
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
	test_golden_cases();
	test_two_images();
	test_rules();
	test_create_raw();
	test_template_check();
	engine_vision_destroy(vision);
	engine_backend_destroy(backend);
	engine_model_destroy(model);
	json_decref(golden);
	return test_exit();
}
