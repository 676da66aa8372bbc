/* policy: what the model is asked and what it answers (agent.md 1, model.md 5).
 *
 * The one public header of the policy module. It holds, per policy format:
 *   - the step schema as a byte-level grammar (an automaton that accepts exactly the valid
 *     prefixes of a schema-conforming step in the canonical layout, docs/policy.md);
 *   - token masks for constrained decoding: which vocabulary ids keep the output a valid prefix;
 *   - the step parser / canonical serializer (the tool call is ipc's struct ipc_action);
 *   - the prompt builder: the conversation of agent.md 1.2 in the chat format of model.md 5.2
 *     (rendered by the engine's engine_chat_*), as token ids in incremental pieces for a
 *     persistent session, or as a window.
 *
 * Errors: int functions return >= 0 or a negative errno; constructors return NULL and set errno.
 * Threads: a grammar and a format are immutable and may be shared. A matcher, a masker and a
 * renderer belong to one thread at a time (the masker's cache is not locked).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "ipc.h"

/* ---- canonical step layout: named limits -------------------------------------------------- */

/* String limits count the bytes between the quotes as written (escapes included), so a value
 * within the limit is also within ipc's limit on the decoded string. */
#define POLICY_MAX_NOTE_BYTES 1024
#define POLICY_MAX_THOUGHT_BYTES 1024
#define POLICY_MAX_ELEMENT_BYTES IPC_MAX_ELEMENT_BYTES
#define POLICY_MAX_CONTENT_BYTES IPC_MODEL_MAX_CONTENT_BYTES
#define POLICY_MAX_QUESTION_BYTES                                                                            \
	IPC_MODEL_MAX_QUESTION_BYTES /* ask_user.question (within IPC_MAX_QUESTION_BYTES) */
/* The system texts' rule about secrets, with up to 64 names of 64 bytes. */
#define POLICY_MAX_SECRETS_RULE 5120
/* holo3's ranges (docs/policy.md), narrower than ipc's (IPC_MAX_SCROLL_SIZE, IPC_MAX_HOTKEY_REPEAT),
 * which holo-nano's published schema fills. */
#define POLICY_HOLO3_MAX_SCROLL_SIZE IPC_HOLO3_MAX_SCROLL_SIZE
#define POLICY_HOLO3_MAX_REPEAT_COUNT IPC_HOLO3_MAX_REPEAT_COUNT
/* holo-nano's published ranges and defaults (its pydantic schema). */
#define POLICY_NANO_MAX_SCROLL_SIZE IPC_NANO_MAX_SCROLL_SIZE
#define POLICY_NANO_DEFAULT_SCROLL_SIZE IPC_NANO_DEFAULT_SCROLL_SIZE
#define POLICY_NANO_MAX_REPEAT_COUNT IPC_NANO_MAX_REPEAT_COUNT
/* wait.duration is whole seconds in the schema: 1..POLICY_MAX_WAIT_SECONDS. */
#define POLICY_MAX_WAIT_SECONDS (IPC_MAX_WAIT_MS / 1000)
/* Largest step text the parser accepts. */
#define POLICY_MAX_STEP_BYTES (64 * 1024)

/* ---- grammar and matcher ------------------------------------------------------------------ */

/* A compiled step schema. Immutable; may be shared between threads. */
struct policy_grammar;

/* The Holo3-style step (agent.md 1.1) in the canonical layout of docs/policy.md:
 *   {"note":null|"...","thought":"...","tool_call":{"tool_name":"click","element":"...",...}}
 * compact (no whitespace), keys in a fixed order, optional arguments omissible. Tool names come
 * from ipc's vocabulary; key names are the model-facing names of policy_key_name(), each checked
 * against the key table (keys.h) at creation. NULL + errno (EINVAL when a table disagrees with
 * ipc or keys, ENOMEM). */
struct policy_grammar *policy_grammar_create_holo3(void);
/* The holo-nano step (docs/policy.md): the published harness's twelve tools with their names
 * (click_desktop, ..., update_plan, answer), arguments, ranges and field order, in the same
 * canonical compact layout (note written, null or a string; optional arguments omissible; key
 * names holod's closed list). NULL + errno. */
struct policy_grammar *policy_grammar_create_holo_nano(void);
/* A point and nothing else, for grounding a script's target (one step, no history):
 *   {"x":X,"y":Y}   with X and Y integers in 0..IPC_MODEL_COORD_MAX (model space)
 * NULL + errno. */
struct policy_grammar *policy_grammar_create_point(void);
/* Accepts NULL. */
void policy_grammar_destroy(struct policy_grammar *g);

/* The key names the grammar accepts for hotkey.keys / key_down / key_up besides single printable
 * ASCII characters and f1..f24 (matched case-insensitively, as keys_lookup does). i from 0 until
 * NULL. */
const char *policy_key_name(size_t i);

/* Where one output stands in the grammar. Plain data: copy it by assignment to branch. The
 * members are the automaton's; callers only init, feed, copy and read is_complete. */
struct policy_matcher {
	const struct policy_grammar *grammar;
	uint32_t node;	/* grammar node */
	uint32_t sub;	/* position inside the node (trie node, digit count) */
	uint32_t val;	/* integer value so far, or \u escape value */
	uint32_t len;	/* bytes of the current string so far */
	uint16_t count; /* keys in the current hotkey list, minus one */
	uint8_t esc;	/* escape sub-state inside a string */
	uint8_t utf8;	/* UTF-8 sub-state inside a string */
};

/* Starts at the beginning of a step. */
void policy_matcher_init(struct policy_matcher *m, const struct policy_grammar *g);
/* Feeds bytes. Returns 0 when they keep the output a valid prefix (the matcher advanced), or
 * -EILSEQ (the matcher is unchanged). */
int policy_matcher_feed(struct policy_matcher *m, const void *bytes, size_t n);
/* True when the output so far is one whole step (only the end of turn may follow). */
bool policy_matcher_is_complete(const struct policy_matcher *m);

/* Jump-forward (docs/policy.md): the bytes the grammar forces from m on, the longest run along
 * which exactly one byte keeps the output a valid prefix at every position (a single path until
 * a choice or the end of the step). Writes at most cap of them into buf and returns how many
 * (0 at a choice point and at the end). m is not changed. */
size_t policy_matcher_forced(const struct policy_matcher *m, uint8_t *buf, size_t cap);
/* Largest forced run policy_masker_forced() looks at (a canonical step's longest structure run,
 * `,"tool_call":{"tool_name":"`, is 27 bytes). */
#define POLICY_MAX_FORCED_BYTES 256

/* Thinking (docs/policy.md): after a generation prompt that opened "<think>\n" the model writes
 * free text, closes it with "</think>" and then writes the step. A thinking matcher accepts that
 * whole output: any valid UTF-8 text without NUL up to the first POLICY_THINK_CLOSE (so the text
 * cannot contain one), at most POLICY_THINK_MAX_GAP bytes of '\n' or ' ', then a step as above. */
#define POLICY_THINK_CLOSE "</think>"
#define POLICY_THINK_MAX_GAP 2
/* Starts before the think block of a step grammar. -EINVAL for a grammar without one (point). */
int policy_matcher_init_thinking(struct policy_matcher *m, const struct policy_grammar *g);
/* True while m is inside the think block (its "</think>" not yet complete). */
bool policy_matcher_thinking(const struct policy_matcher *m);
/* A thinking budget spent: from now on the block may only close, with the bytes of the rest of
 * "</think>" (after the UTF-8 character in progress, if any). No effect outside the block. */
void policy_matcher_close_thinking(struct policy_matcher *m);
/* Splits the output of a thinking matcher: *ret_think_len bytes of think text, the step from
 * *ret_step (after "</think>" and the gap). -EINVAL when text has no "</think>". */
int policy_split_thinking(const char *text, size_t len, size_t *ret_think_len, size_t *ret_step);

/* ---- token masks ---------------------------------------------------------------------------- */

/* Masks over a vocabulary for one grammar: a trie of the tokens' bytes walked alongside the
 * automaton, with the masks of string states cached (states inside long strings collapse to a
 * few classes). Special tokens are never allowed, except the stop ids, which are allowed exactly
 * when the step is complete (and then nothing else is), and a special "</think>" token, which
 * closes a think block like its text. */
struct policy_masker;

/* Masks cached at most (then the cache starts over). */
#define POLICY_MASK_CACHE_ENTRIES 256
/* Largest token (bytes) the masker accepts; longer tokens are never allowed. */
#define POLICY_MASK_MAX_TOKEN_BYTES 256

/* The tokenizer's vocabulary, n_logits rows (the model's logits; ids at or above the tokenizer's
 * vocab_size are never allowed, as are holes and special tokens). stop_ids: the end-of-turn ids
 * (e.g. <SPECIAL_12>, </s>). The grammar and tokenizer must outlive the masker.
 * NULL + errno (EINVAL, ENOMEM). */
struct policy_masker *policy_masker_create(const struct policy_grammar *g, const struct engine_tokenizer *tok,
					   size_t n_logits, const int32_t *stop_ids, size_t n_stop);
/* The same over an explicit vocabulary: token i has bytes[i] of lens[i] bytes (bytes[i] NULL:
 * never allowed). The arrays are copied. */
struct policy_masker *policy_masker_create_raw(const struct policy_grammar *g, const uint8_t *const *bytes,
					       const size_t *lens, size_t n_tokens, const int32_t *stop_ids,
					       size_t n_stop);
/* Accepts NULL. */
void policy_masker_destroy(struct policy_masker *mk);
size_t policy_masker_n_tokens(const struct policy_masker *mk);

/* Writes the allowed-set of matcher state m into ret_bits (bit i of word i/32 = id i allowed;
 * (n_tokens + 31) / 32 words). Returns the number of allowed ids (never 0 for a matcher the
 * grammar reached, given a byte-level vocabulary), -EINVAL for a matcher of another grammar. */
int policy_masker_compute(struct policy_masker *mk, const struct policy_matcher *m, uint32_t *ret_bits);
/* Sets logits[id] = -INFINITY for every id the mask forbids (n_logits = n_tokens).
 * Returns the number of allowed ids or a negative errno as above. */
int policy_masker_apply(struct policy_masker *mk, const struct policy_matcher *m, float *logits);
/* Advances m by token id. Returns 1 when id is a stop id and the step was complete (the end),
 * 0 when m advanced, -EILSEQ when the mask forbids id (m unchanged), -EINVAL for a bad id. */
int policy_masker_feed(const struct policy_masker *mk, struct policy_matcher *m, int32_t id);

/* Jump-forward (docs/policy.md): the ids to append after matcher state m without sampling,
 * because the grammar forces their bytes. The forced run (policy_matcher_forced) is encoded
 * canonically on its own by tok (the masker's tokenizer); the boundary rule: its last token is
 * dropped when a vocabulary token that extends it could continue the output after the run (it
 * could merge with the text the model chooses next, so the model samples it), and kept when
 * none could (always at the end of the step). The ids stop before the first one the mask would
 * forbid. Writes at most cap ids and returns how many (0: sample as usual), or -EINVAL (a
 * matcher of another grammar), -ENOMEM. m is not changed. */
int policy_masker_forced(const struct policy_masker *mk, const struct engine_tokenizer *tok,
			 const struct policy_matcher *m, int32_t *ret_ids, size_t cap);

/* Since creation: masks answered from the cache, and masks computed by a trie walk (states
 * outside strings are never cached: their walks are short). For benchmarks. */
void policy_masker_stats(const struct policy_masker *mk, uint64_t *ret_hits, uint64_t *ret_misses);

/* ---- steps ---------------------------------------------------------------------------------- */

/* One parsed step. Strings are owned (freed by policy_step_finish). */
struct policy_step {
	char *note; /* NULL for JSON null */
	char *thought;
	struct ipc_action action; /* model coordinates (IPC_COORDS_MODEL) */
};

/* Frees the strings of s and zeroes it; accepts a zeroed step. */
void policy_step_finish(struct policy_step *s);

/* ---- formats ------------------------------------------------------------------------------- */

/* The published holo-nano texts as the daemon read them from the user's local copy and
 * verified against their SHA-256s (docs/policy.md; never committed). */
struct policy_published {
	const char *nano_template; /* the system template (str.format fields) */
	size_t nano_template_len;
	const char *nano_schema; /* the Step schema's json.dumps text */
	size_t nano_schema_len;
};

/* The local copy tools/policy_published.py writes (by default into
 * $XDG_DATA_HOME/holod/published): file names and the SHA-256s the published texts have
 * (tests/fixtures/policy/published/README.md). */
#define POLICY_NANO_TEMPLATE_FILE "system-template.txt"
#define POLICY_NANO_TEMPLATE_SHA256 "ee5cbd0f370bcde65f94a32c667010acf546786c03577017c8bb7762cef88475"
#define POLICY_NANO_SCHEMA_FILE "step-schema.json"
#define POLICY_NANO_SCHEMA_SHA256 "9c5781e05421b086909a02f904e4de8aeffdeacc49abc7987a798a5866b07cd7"
/* Reads both texts from dir and checks their SHA-256s: 0; -ENOENT (or another -errno) when a
 * file cannot be read, -E2BIG over the limits, -EBADMSG when a checksum differs; errbuf names
 * the file and why. */
int policy_published_load(const char *dir, struct policy_published *ret, char *errbuf, size_t errlen);
/* Frees the texts; accepts a zeroed one. */
void policy_published_finish(struct policy_published *p);

/* What the system prompt states about the environment. */
struct policy_env {
	int screen_width, screen_height; /* the monitor the agent sees, in pixels */
	const char *date;		 /* e.g. "2026-11-21"; NULL: not stated */
	bool reasoning;			 /* generation prompt opens <think> (default off) */
	unsigned max_steps, max_time_s;	 /* the task's budgets (holo-nano states them); 0: unsaid */
	/* holo-nano: the published texts, or NULL for holod's own system text */
	const struct policy_published *published;
	/* The secrets `write` may type, as "A, B" (never their values); NULL or "": none. The
	 * system text names them and says how to use them (docs/policy.md, "Secrets"). */
	const char *secret_names;
};

/* The rule of the system texts about secrets: the names of env->secret_names and the
 * {{secret:NAME}} placeholder, or, without secrets, never to invent one. */
void policy_secrets_rule(const struct policy_env *env, char *buf, size_t len);

/* How a format lays out its turns (docs/policy.md's table, items 3-7). */
struct policy_turns {
	const char *observation_open;  /* before the image */
	const char *observation_close; /* after it */
	const char *evicted;	       /* where an evicted observation's image was */
	bool result_own_turn;	       /* the tool result is a user turn of its own before the observation */
	bool result_newlines;	       /* <tool_output tool="T">\n{result}\n</tool_output> */
	unsigned result_max_chars;     /* the result is cut at this many characters; 0: not cut */
};

/* How a format's steps are sampled unless configuration or the task says otherwise: what the
 * format's published harness runs with (docs/policy.md). temperature 0 would be greedy; top_p
 * in (0, 1] (1: off). */
struct policy_sampling {
	double temperature;
	double top_p;
};

/* A policy format: schema, parser and the text of the turns. Chosen by configuration by name. */
struct policy_format {
	const char *name;
	struct policy_sampling sampling; /* the defaults of instruction tasks in this format */
	/* The step grammar (NULL + errno). */
	struct policy_grammar *(*grammar_create)(void);
	/* Parses and validates one step (any JSON layout; text need not be NUL-terminated).
	 * -EINVAL (bad JSON, type, value, unknown or missing member: errbuf names the field),
	 * -E2BIG (over a named limit). *ret written only on success. */
	int (*step_parse)(const char *text, size_t len, struct policy_step *ret, char *errbuf, size_t errlen);
	/* The step in the canonical layout (malloc'd, NUL-terminated); NULL + errno. */
	char *(*step_to_json)(const struct policy_step *step);
	/* The system turn's text (malloc'd); NULL + errno. */
	char *(*system_text)(const struct policy_env *env);
	/* The name the format gives an ipc tool (in <tool_output tool=...>), NULL for none. */
	const char *(*tool_name)(enum ipc_tool tool);
	/* What the model is told its action did (docs/policy.md's table, item 8), from the action
	 * (model coordinates), whether it failed, the executor's text (its result, or its error when
	 * it failed: it may name root pixels, which the journal keeps) and the executor's warning
	 * (NULL: none; the executor's text holds it too). 0 and *ret (malloc'd), NULL when the
	 * format sends no result after this tool; -EINVAL. */
	int (*model_result)(const struct ipc_action *a, bool failed, const char *text, const char *warning,
			    char **ret);
	/* The task of a grounding (a script's `target`, docs/api.md "Grounded pointer actions"),
	 * said in the format's words: locate `target` and answer with its point as {"x":X,"y":Y}
	 * in 0..IPC_MODEL_COORD_MAX (policy_grammar_create_point). malloc'd; NULL + errno. */
	char *(*ground_text)(const char *target);
	struct policy_turns turns;
};

/* The Holo3-style format ("holo3"). */
extern const struct policy_format policy_format_holo3;
/* The published holo-nano harness's format ("holo-nano"). */
extern const struct policy_format policy_format_holo_nano;
/* The names of the formats, "holo3|holo-nano" (for usage and error messages). */
#define POLICY_FORMAT_NAMES "holo3|holo-nano"
/* holo-nano's Step schema generated from its tool table (the grammar's): what its own system
 * text shows in its <output_format> block. malloc'd; NULL + errno. */
char *policy_nano_json_schema(void);
/* The format named `name`, or NULL. */
const struct policy_format *policy_format_find(const char *name);

/* The holo3 step as JSON Schema (draft 2020-12 subset: type, properties, required, enum,
 * const, anyOf, $defs/$ref, minimum/maximum, maxLength, minItems/maxItems), on one line with
 * ", " and ": " separators as Python's json.dumps writes it, malloc'd. The holo3 system prompt
 * shows it in POLICY_OUTPUT_FORMAT_OPEN .. POLICY_OUTPUT_FORMAT_CLOSE, and servers that
 * constrain their output with a schema get the same text. It accepts what the grammar does,
 * except that string limits are in characters there and in bytes as written here, limits above
 * 1000 are left out and so are the '"' and '\\' keys (llama.cpp's schema converter breaks on
 * them): the parser decides.
 * NULL + errno. */
char *policy_step_json_schema(void);

/* The holo-nano format's parser (the published schema: note optional, the published tool names
 * and ranges, mapped onto ipc's actions with the published defaults: scroll_size 10) and its
 * serializer (model_dump_json's layout: compact, class field order, every default written). */
int policy_nano_step_parse(const char *text, size_t len, struct policy_step *ret, char *errbuf, size_t errlen);
char *policy_nano_step_to_json(const struct policy_step *step);
/* The holo-nano system text: the published template (holo-nano's system.j2 as the port writes
 * it, tools/policy_published.py) filled as Python's str.format fills it ("{{" and "}}" are
 * braces), then the schema block "\n<output_format>\n```json\n" schema "\n```\n</output_format>\n"
 * as _build_system_prompt appends it. */
#define POLICY_NANO_MAX_TEMPLATE_BYTES (64 * 1024)
#define POLICY_NANO_MAX_SCHEMA_BYTES (64 * 1024)
struct policy_nano_env {
	const char *date;     /* {start_time}: YYYY-MM-DD */
	unsigned max_steps;   /* {max_steps}: the task's step budget */
	unsigned max_time_s;  /* {max_time_s}: the task's time budget in seconds */
	const char *os_name;  /* {os_name}: "Linux" */
	const char *password; /* {password}; NULL: the sentence naming it is left out */
};
/* 0 and *ret (malloc'd); -EINVAL for a field other than the five, a lone brace, missing
 * values; -E2BIG over the limits; errbuf says which. */
int policy_nano_system_text(const char *tmpl, size_t tlen, const char *schema, size_t slen,
			    const struct policy_nano_env *env, char **ret, char *errbuf, size_t errlen);

/* What the holo3 system prompt puts around the schema, as H's Agent loop appends it to the
 * prompt: the prompt's text, then OPEN, the schema, CLOSE (the prompt ends there). */
#define POLICY_OUTPUT_FORMAT_OPEN "\n\n<output_format>\n```json\n"
#define POLICY_OUTPUT_FORMAT_CLOSE "\n```\n</output_format>"

/* Convenience wrappers of the holo3 format's parser and serializer. */
int policy_step_parse(const char *text, size_t len, struct policy_step *ret, char *errbuf, size_t errlen);
char *policy_step_to_json(const struct policy_step *step);

/* ---- prompt rendering ------------------------------------------------------------------------ */

/* A run of prompt tokens to append to a session. images[k] says where the k-th image's
 * <image> positions are (engine_vision_splice() fills them from the vision rows, image-major). */
struct policy_image_slot {
	size_t offset;	 /* index in ids of the first <image> of this image */
	size_t n_tokens; /* 256 * tiles */
};

struct policy_piece {
	int32_t *ids;
	size_t n_ids;
	char *text; /* the same run as text, images expanded (logs, tests), NUL-terminated */
	size_t text_len;
	struct policy_image_slot *images;
	size_t n_images;
};

/* Frees and zeroes; accepts a zeroed piece. */
void policy_piece_finish(struct policy_piece *p);

/* The result of the previous action, shown to the model in the next user turn. */
struct policy_tool_result {
	enum ipc_tool tool;
	bool error;	  /* <error tool=...> instead of <tool_output tool=...> */
	const char *text; /* short factual result */
};

/* One observation turn: the screenshot's tile count (image tokens = tokens_per_tile * n_tiles)
 * and the previous action's result, if any. */
struct policy_observation {
	int n_tiles;
	const struct policy_tool_result *result; /* NULL for the first step */
};

/* Renders turns with one format and tokenizer through engine_chat_* (marker ids read from the
 * tokenizer; turn contents stripped, "/think" and "/no_think" removed and switching reasoning, as
 * the template does). It keeps the conversation state of the last piece rendered and of the
 * prefix, from which a window starts again. NULL + errno (ENOENT when a marker is missing,
 * EINVAL, ENOMEM). The format, tokenizer and env strings must outlive the renderer.
 * The render calls return 0, -EINVAL for bad arguments or for task / tool result text holding a
 * special token or an "<image>" placeholder (it cannot forge a turn or an image), -EILSEQ for
 * invalid UTF-8, -E2BIG, -ENOMEM; *ret is written only on success. */
#define POLICY_TOKENS_PER_TILE 256
struct policy_renderer;
struct policy_renderer *policy_renderer_create(const struct policy_format *fmt,
					       const struct engine_tokenizer *tok,
					       const struct policy_env *env, int tokens_per_tile);
void policy_renderer_destroy(struct policy_renderer *r);
/* The end-of-turn id (<SPECIAL_12>) the generation stops at. */
int32_t policy_renderer_stop_id(const struct policy_renderer *r);

/* The prefix: system turn + "Task: ..." user turn. */
int policy_render_prefix(struct policy_renderer *r, const char *task, struct policy_piece *ret);
/* The texts of the prefix's system and user turns as policy_render_prefix renders them (before
 * the chat format strips them), malloc'd: what a chat export records. 0, -EINVAL, -ENOMEM. */
int policy_prefix_text(const struct policy_renderer *r, const char *task, char **ret_system, char **ret_user);
/* What an evicted observation says where its screenshot was. */
#define POLICY_EVICTED_TEXT "[screenshot evicted]"
/* The text of one observation's user turn in format fmt's layout: the previous result, then
 * the observation wrapper with the "<image>" placeholder (or the format's eviction text); when
 * the format gives the result its own turn, the two turns' texts joined by a newline (what the
 * journal records). malloc'd; NULL + errno EINVAL (no observation, an unknown tool). */
char *policy_format_user_text(const struct policy_format *fmt, const struct policy_observation *obs,
			      bool evicted);
/* The two parts of an observation's user text in format fmt's layout, malloc'd: the previous
 * action's result in its wrapper (<tool_output tool="NAME">, <error tool="NAME"> when it
 * failed; newline-padded and cut as the format says), NULL + errno EINVAL for a tool the
 * format does not name; and the observation wrapper around "<image>" or the format's eviction
 * text. What a remote request sends as its messages (daemon/provider-remote.c). */
char *policy_format_result_text(const struct policy_format *fmt, const struct policy_tool_result *res);
char *policy_format_observation_text(const struct policy_format *fmt, bool evicted);
/* One step's user turn(s) (the previous tool result, in a turn of its own when the format says
 * so, then <observation> with the image) followed by the generation prompt. evicted: the image
 * is replaced by the format's eviction text. */
int policy_render_step(struct policy_renderer *r, const struct policy_observation *obs, bool evicted,
		       struct policy_piece *ret);
/* What closes the assistant turn after the step's tokens were decoded (persistent mode):
 * "\n<SPECIAL_12>\n". The sampled stop id itself is not appended by the caller. */
int policy_render_close(struct policy_renderer *r, struct policy_piece *ret);
/* A whole assistant turn of the history, the step re-serialized canonically (window mode):
 * "<SPECIAL_11>Assistant\n{step}\n<SPECIAL_12>\n". */
int policy_render_assistant(struct policy_renderer *r, const struct policy_step *step,
			    struct policy_piece *ret);
/* Window mode: everything after the prefix for the next step. steps[i] was answered to obs[i]
 * for i < n_done; obs[n_done] is the current observation (n_done + 1 observations). Only the
 * last `keep` observations carry their image; older ones say "[screenshot evicted]". Ends with
 * the generation prompt. */
int policy_render_window(struct policy_renderer *r, const struct policy_observation *obs,
			 const struct policy_step *steps, size_t n_done, size_t keep,
			 struct policy_piece *ret);
/* Rolling mode: policy_render_window's conversation in three parts, for a session restored
 * from a snapshot that holds the prefix and the first n_held observations in their evicted form
 * (each its user turn with "[screenshot evicted]" and its assistant turn): those are rendered
 * but not returned; ret_evicted gets the evicted turns after them (obs[n_held..n_done - keep],
 * usually one, possibly none), which the caller appends and snapshots again; ret_window the
 * last `keep` observations with their images and turns, then the generation prompt. The ids of
 * the held turns, ret_evicted and ret_window, concatenated, are policy_render_window's.
 * -EINVAL also when n_held is more than the observations evicted (n_done + 1 - keep). */
int policy_render_rolling(struct policy_renderer *r, const struct policy_observation *obs,
			  const struct policy_step *steps, size_t n_done, size_t keep, size_t n_held,
			  struct policy_piece *ret_evicted, struct policy_piece *ret_window);
