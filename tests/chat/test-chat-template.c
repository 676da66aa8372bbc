/* The chat rendering (engine/chat/chat.c) against transformers' apply_chat_template with the base
 * model's template in its published layout, byte for byte: tests/fixtures/chat/<model>.json,
 * written by tools/chat_template_diff.py on the tiny checkpoints (whose tokenizer_config.json
 * tools/nemotron_vl_template.py writes) for the conversations of
 * tests/fixtures/chat/conversations.json: system + user, images (one, several, a placeholder of
 * the text's own), several turns with assistant turns, reasoning on and off, /think and
 * /no_think, `</think>` and `<think>` in a task text. Each conversation is rendered whole and
 * turn by turn (the same ids), and through `holo-infer --render --messages` (argv[1]), whose
 * JSON must hold the same text and ids. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine.h"
#include "golden.h"

TEST_DEFINE_GLOBALS;

#define MAX_MSGS 16
#define MAX_IMAGES 16

static const char *holo_infer;

struct conv {
	struct engine_chat_message msgs[MAX_MSGS];
	char *texts[MAX_MSGS];
	int tiles[MAX_IMAGES];
	size_t n, n_images;
};

/* The case's messages in transformers' form (content a string or text/image parts). */
static void conv_load(const json_t *messages, struct conv *cv)
{
	const json_t *m;
	size_t i;

	memset(cv, 0, sizeof(*cv));
	REQUIRE(json_array_size(messages) <= MAX_MSGS);
	json_array_foreach(messages, i, m)
	{
		const char *role = json_string_value(json_object_get(m, "role"));
		const json_t *content = json_object_get(m, "content"), *p;
		struct engine_chat_message *msg = &cv->msgs[i];
		size_t k;

		msg->role = strcmp(role, "system") == 0 ? ENGINE_CHAT_SYSTEM :
			    strcmp(role, "user") == 0	? ENGINE_CHAT_USER :
							  ENGINE_CHAT_ASSISTANT;
		if (json_is_string(content)) {
			cv->texts[i] = strdup(json_string_value(content));
		} else {
			cv->texts[i] = strdup("");
			msg->image_tiles = cv->tiles + cv->n_images;
			json_array_foreach(content, k, p)
			{
				const json_t *t = json_object_get(p, "text");

				if (json_is_string(t)) {
					size_t a = strlen(cv->texts[i]), b = json_string_length(t);

					REQUIRE((cv->texts[i] = realloc(cv->texts[i], a + b + 1)));
					memcpy(cv->texts[i] + a, json_string_value(t), b + 1);
				} else {
					REQUIRE(cv->n_images < MAX_IMAGES);
					cv->tiles[cv->n_images++] =
						(int)json_integer_value(json_object_get(p, "tiles"));
					msg->n_images++;
				}
			}
		}
		REQUIRE(cv->texts[i]);
		msg->text = cv->texts[i];
		cv->n++;
	}
}

static void conv_finish(struct conv *cv)
{
	for (size_t i = 0; i < cv->n; i++)
		free(cv->texts[i]);
}

static bool ids_equal(const int32_t *ids, size_t n, const json_t *want)
{
	if (n != json_array_size(want))
		return false;
	for (size_t i = 0; i < n; i++)
		if (ids[i] != json_integer_value(json_array_get(want, i)))
			return false;
	return true;
}

/* holo-infer --render --messages on the case: its JSON line. */
static json_t *holo_infer_render(const char *model_dir, const json_t *messages)
{
	char path[] = "/tmp/holo-render-XXXXXX", cmd[8192];
	json_error_t jerr;
	json_t *out;
	FILE *p;
	int fd = mkstemp(path);

	REQUIRE(fd >= 0);
	REQUIRE(json_dumpfd(messages, fd, 0) == 0);
	close(fd);
	snprintf(cmd, sizeof(cmd), "%s --model %s --render --messages %s", holo_infer, model_dir, path);
	p = popen(cmd, "r");
	REQUIRE(p);
	out = json_loadf(p, 0, &jerr);
	CHECK_INT_EQ(pclose(p), 0);
	unlink(path);
	if (!out)
		fprintf(stderr, "holo-infer --render: %s\n", jerr.text);
	return out;
}

static void check_model(const char *fixture)
{
	char path[4096], model_dir[4096], err[256];
	json_error_t jerr;
	json_t *golden;
	const json_t *c;
	struct engine_model *model;
	struct engine_vision *vision;
	size_t i;

	snprintf(path, sizeof(path), "%s/tests/fixtures/chat/%s", golden_source_root(), fixture);
	golden = json_load_file(path, 0, &jerr);
	if (!golden) {
		fprintf(stderr, "%s: %s\n", path, jerr.text);
		REQUIRE(golden);
	}
	snprintf(model_dir, sizeof(model_dir), "%s/%s", golden_source_root(),
		 json_string_value(json_object_get(golden, "model")));
	model = engine_model_load(model_dir, err, sizeof(err));
	REQUIRE(model && engine_model_tokenizer(model));
	vision = engine_vision_create(model, err, sizeof(err));
	REQUIRE(vision);
	CHECK_INT_EQ(engine_vision_tokens_per_tile(vision),
		     (int)json_integer_value(json_object_get(golden, "tokens_per_tile")));
	/* the checkpoint's template is the one the renderer follows */
	CHECK_INT_EQ(engine_chat_check_model(model, err, sizeof(err)), ENGINE_CHAT_TEMPLATE_KNOWN);

	json_array_foreach(json_object_get(golden, "cases"), i, c)
	{
		const char *name = json_string_value(json_object_get(c, "name"));
		const char *want_text = json_string_value(json_object_get(c, "text"));
		const json_t *want_ids = json_object_get(c, "ids");
		struct engine_chat *chat =
			engine_chat_create(engine_model_tokenizer(model), vision, false, err, sizeof(err));
		struct engine_chat_tokens whole = {0}, steps = {0};
		bool reasoning, only_system = true;
		struct conv cv;
		json_t *hi;

		REQUIRE(chat);
		conv_load(json_object_get(c, "messages"), &cv);
		err[0] = 0;
		CHECK_INT_EQ(engine_chat_render(chat, cv.msgs, cv.n, true, &whole, err, sizeof(err)), 0);
		if (!whole.text || strcmp(whole.text, want_text) != 0)
			fprintf(stderr, "%s/%s: text differs (%s):\n%s\n---- transformers:\n%s\n", fixture,
				name, err, whole.text ? whole.text : "(null)", want_text);
		CHECK(whole.text && strcmp(whole.text, want_text) == 0);
		CHECK(ids_equal(whole.ids, whole.n_ids, want_ids));
		CHECK_INT_EQ(whole.n_images, cv.n_images);
		reasoning = engine_chat_reasoning(chat);
		CHECK(reasoning == (strcmp(want_text + strlen(want_text) - 8, "<think>\n") == 0));

		/* turn by turn, then the generation prompt: the same ids */
		engine_chat_reset(chat);
		for (size_t k = 0; k < cv.n; k++) {
			CHECK_INT_EQ(engine_chat_append(chat, &cv.msgs[k], &steps, err, sizeof(err)), 0);
			only_system &= cv.msgs[k].role == ENGINE_CHAT_SYSTEM;
		}
		if (only_system) /* what engine_chat_render() adds: the template's empty user turn */
			CHECK_INT_EQ(engine_chat_append(chat,
							&(struct engine_chat_message){ENGINE_CHAT_USER, ""},
							&steps, err, sizeof(err)),
				     0);
		CHECK_INT_EQ(engine_chat_generation_prompt(chat, &steps), 0);
		CHECK(ids_equal(steps.ids, steps.n_ids, want_ids));

		/* holo-infer --render prints the same */
		hi = holo_infer_render(model_dir, json_object_get(c, "messages"));
		CHECK(hi != NULL);
		if (hi) {
			const json_t *ids = json_object_get(hi, "ids"), *e;
			int32_t *got = malloc(sizeof(int32_t) * (json_array_size(ids) + 1));
			size_t k;

			REQUIRE(got);
			json_array_foreach(ids, k, e) got[k] = (int32_t)json_integer_value(e);
			CHECK(json_is_string(json_object_get(hi, "text")) &&
			      strcmp(json_string_value(json_object_get(hi, "text")), want_text) == 0);
			CHECK(ids_equal(got, json_array_size(ids), want_ids));
			CHECK_INT_EQ(json_array_size(json_object_get(hi, "images")), cv.n_images);
			CHECK(json_is_true(json_object_get(hi, "reasoning")) == reasoning);
			free(got);
			json_decref(hi);
		}
		printf("%s/%s: %zu ids, %zu images, reasoning %s\n", fixture, name, whole.n_ids,
		       whole.n_images, reasoning ? "on" : "off");
		conv_finish(&cv);
		engine_chat_tokens_finish(&whole);
		engine_chat_tokens_finish(&steps);
		engine_chat_destroy(chat);
	}
	engine_vision_destroy(vision);
	engine_model_destroy(model);
	json_decref(golden);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s HOLO-INFER\n", argv[0]);
		return 2;
	}
	holo_infer = argv[1];
	check_model("tiny-vlm.json");
	check_model("tiny-agent.json");
	return test_exit();
}
