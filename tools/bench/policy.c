/* holo-bench policy: the cost of schema-constrained decoding per generated token against a
 * vocabulary of the real size (131072 ids), next to the cost of a decode step.
 *
 *   holo-bench policy [--vocab N] [--steps N] [--model DIR] [--decode N] [--seed N]
 *
 * Without a tokenizer of that size at hand, the vocabulary is synthetic and byte-level like
 * Tekken's: the 256 bytes, JSON pieces that span structure ("},", "\":\"", "{\""), words with and
 * without a leading space, digits, multi-byte UTF-8 pieces, punctuation runs. Each "step" decodes
 * a realistic step text token by token: the mask is applied to a logits row (the timed part),
 * then the longest allowed token that continues the text is fed (as a model following its
 * format would). Next to it, decode steps (engine_session_decode, CPU backend) are timed: of
 * the checkpoint given with --model (whose tokenizer, when it has one, replaces the synthetic
 * vocabulary), or else of a small random model with the same vocabulary (5 layers, hidden 1024,
 * bf16): a lower bound for any model with this vocabulary, since its LM head alone reads
 * vocab x hidden weights per token. With --model's tokenizer it then decodes 4 steps greedily
 * under the holo3 grammar with jump-forward off and on (jump_forward.c) and prints their
 * "jump-forward ..." summary line.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "common.h"
#include "engine.h"
#include "env-backend.h"
#include "jump_forward.h"
#include "lm.h"
#include "policy.h"

#define DEFAULT_VOCAB 131072
#define N_SPECIAL 16 /* ids 0..15 are special; 2 (</s>) and 12 (<SPECIAL_12>) stop */
#define MAX_TOK 48

struct vocab {
	size_t n;
	uint8_t **bytes;
	size_t *lens;
	/* bytes -> id, open addressing */
	int32_t *table;
	size_t table_size;
};

static uint64_t rng_state;
static uint64_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static uint64_t hash_bytes(const uint8_t *p, size_t n)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h;
}

static int32_t vocab_find(const struct vocab *v, const uint8_t *p, size_t n)
{
	for (size_t s = hash_bytes(p, n) % v->table_size;; s = (s + 1) % v->table_size) {
		int32_t id = v->table[s];
		if (id < 0)
			return -1;
		if (v->lens[id] == n && memcmp(v->bytes[id], p, n) == 0)
			return id;
	}
}

/* Adds a token unless its bytes are already in the vocabulary. */
static void vocab_add(struct vocab *v, const void *p, size_t n)
{
	if (n == 0 || n > MAX_TOK || vocab_find(v, p, n) >= 0)
		return;
	int32_t id = (int32_t)v->n++;
	v->bytes[id] = xmalloc(n);
	memcpy(v->bytes[id], p, n);
	v->lens[id] = n;
	size_t s = hash_bytes(p, n) % v->table_size;
	while (v->table[s] >= 0)
		s = (s + 1) % v->table_size;
	v->table[s] = id;
}

static size_t utf8_put(uint8_t *p, uint32_t cp)
{
	if (cp < 0x80)
		return p[0] = (uint8_t)cp, 1;
	if (cp < 0x800)
		return p[0] = (uint8_t)(0xc0 | cp >> 6), p[1] = (uint8_t)(0x80 | (cp & 63)), 2;
	p[0] = (uint8_t)(0xe0 | cp >> 12);
	p[1] = (uint8_t)(0x80 | (cp >> 6 & 63));
	p[2] = (uint8_t)(0x80 | (cp & 63));
	return 3;
}

static void synthetic_vocab(struct vocab *v, size_t n)
{
	static const char *const pieces[] = {
		"{\"",	    "\"}",    "\"},",	"\"}}",	   "}}",     "\":\"",	  "\":",	"\",\"",
		",\"",	    "\":{\"", "null",	"true",	   "false",  "note",	  "thought",	"tool",
		"_call",    "_name",  "click",	"element", "scroll", "direction", "content",	"\\n",
		"\\\"",	    "\\u",    "[\"",	"\"]",	   "\"],",   "\":[\"",	  "\":null,\"", "\":true",
		"\":false", "},\"",   "\"}}\n", "\n",	   "\n\n",   "  ",	  "    ",
	};
	static const char consonants[] = "bcdfghjklmnprstvwxyz", vowels[] = "aeiouy";
	v->table_size = 4 * n + 1;
	v->table = xmalloc(v->table_size * sizeof(*v->table));
	for (size_t i = 0; i < v->table_size; i++)
		v->table[i] = -1;
	v->bytes = xcalloc(n, sizeof(*v->bytes));
	v->lens = xcalloc(n, sizeof(*v->lens));
	v->n = N_SPECIAL; /* no bytes: special */
	for (int b = 0; b < 256; b++) {
		uint8_t c = (uint8_t)b;
		vocab_add(v, &c, 1);
	}
	for (size_t i = 0; i < ARRAY_SIZE(pieces); i++)
		vocab_add(v, pieces[i], strlen(pieces[i]));
	while (v->n < n) {
		uint8_t t[MAX_TOK];
		size_t len = 0;
		unsigned kind = (unsigned)(rng() % 100);
		if (kind < 70) { /* a word: syllables, maybe a leading space or capital */
			if (rng() % 2)
				t[len++] = ' ';
			size_t syl = 1 + rng() % 4;
			for (size_t s = 0; s < syl && len + 3 < MAX_TOK; s++) {
				t[len++] = (uint8_t)consonants[rng() % (sizeof(consonants) - 1)];
				t[len++] = (uint8_t)vowels[rng() % (sizeof(vowels) - 1)];
				if (rng() % 3 == 0)
					t[len++] = (uint8_t)consonants[rng() % (sizeof(consonants) - 1)];
			}
			if (rng() % 5 == 0 && t[0] != ' ')
				t[0] = (uint8_t)(t[0] - 'a' + 'A');
		} else if (kind < 85) { /* multi-byte UTF-8: Latin-1, Cyrillic, CJK */
			static const uint32_t bases[] = {0xc0, 0x410, 0x4e00, 0x3040};
			size_t chars = 1 + rng() % 3;
			if (rng() % 3 == 0)
				t[len++] = ' ';
			for (size_t c = 0; c < chars; c++)
				len += utf8_put(t + len, bases[rng() % 4] + (uint32_t)(rng() % 200));
			if (rng() % 4 == 0)
				len--;	/* a partial character, as byte-level BPE has */
		} else if (kind < 95) { /* punctuation runs around JSON */
			static const char punct[] = "{}[]\":,.;!?()-_/\\'*#@&%+=<>|~`";
			size_t k = 1 + rng() % 4;
			if (rng() % 3 == 0)
				t[len++] = ' ';
			for (size_t c = 0; c < k; c++)
				t[len++] = (uint8_t)punct[rng() % (sizeof(punct) - 1)];
		} else { /* digits and whitespace */
			size_t k = 1 + rng() % 3;
			for (size_t c = 0; c < k; c++)
				t[len++] = (uint8_t)(rng() % 4 ? '0' + rng() % 10 : ' ');
		}
		vocab_add(v, t, len);
	}
}

static void vocab_free(struct vocab *v)
{
	for (size_t i = 0; i < v->n; i++)
		free(v->bytes[i]);
	free(v->bytes);
	free(v->lens);
	free(v->table);
}

/* Step texts as a model writes them: notes, a thought line, each kind of tool. */
static const char *const targets[] = {
	"{\"note\":null,\"thought\":\"Open the application menu to look for the text editor.\","
	"\"tool_call\":{\"tool_name\":\"click\",\"element\":\"Activities button in the top bar\","
	"\"x\":24,\"y\":12}}",
	"{\"note\":\"The editor is called Text Editor; it is in the Accessories group.\",\"thought\":"
	"\"Type hello into the empty document.\",\"tool_call\":{\"tool_name\":\"write\","
	"\"content\":\"hello\",\"press_enter\":false,\"overwrite\":false}}",
	"{\"note\":null,\"thought\":\"Save the file with the keyboard shortcut.\",\"tool_call\":"
	"{\"tool_name\":\"hotkey\",\"keys\":[\"ctrl\",\"s\"],\"repeat_count\":1}}",
	"{\"note\":\"Invoice total: 1 234,50 \xe2\x82\xac (due 2026-12-01).\",\"thought\":\"Scroll "
	"down to find the payment section.\",\"tool_call\":{\"tool_name\":\"scroll\",\"element\":"
	"\"invoice list\",\"x\":512,\"y\":640,\"direction\":\"down\",\"scroll_size\":5}}",
	"{\"note\":null,\"thought\":\"The document shows \\\"hello\\\"; the task is done.\","
	"\"tool_call\":{\"tool_name\":\"answer\",\"content\":\"Typed hello in Text Editor and saved "
	"it as notes.txt.\"}}",
};

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double now_us(void)
{
	return (double)time_mono_ns() / 1000.0;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: holo-bench policy [--vocab N] [--steps N] [--model DIR] [--decode N]\n"
		"                         [--seed N]\n"
		"  --vocab N   synthetic vocabulary size (default %d)\n"
		"  --steps N   step texts decoded under the mask (default 50)\n"
		"  --model DIR time decode steps of this checkpoint (its tokenizer, if any,\n"
		"              replaces the synthetic vocabulary); default: a small random model\n"
		"              with the same vocabulary\n"
		"  --decode N  decode steps timed (default 16)\n",
		DEFAULT_VOCAB);
}

/* Mean milliseconds of n decode steps of m (after one warm-up step). */
static int time_decode(const struct engine_model *m, int n, double *ret_ms)
{
	struct engine_backend *b = test_env_backend(m);
	struct engine_session *s = b ? engine_session_create_on(b, n + 8) : NULL;
	if (!s) {
		int e = errno;
		engine_backend_destroy(b);
		return -e;
	}
	int vocab = engine_session_vocab(s);
	float *logits = xmalloc((size_t)vocab * sizeof(float));
	int r = engine_session_decode(s, 1, logits);
	double t0 = now_us();
	for (int i = 0; i < n && r == 0; i++)
		r = engine_session_decode(s, (int32_t)(i % vocab), logits);
	if (r == 0)
		*ret_ms = (now_us() - t0) / 1000.0 / n;
	free(logits);
	engine_session_destroy(s);
	engine_backend_destroy(b);
	return r;
}

int bench_policy_main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"vocab", required_argument, NULL, 'v'},
		{"steps", required_argument, NULL, 's'},
		{"model", required_argument, NULL, 'm'},
		{"decode", required_argument, NULL, 'd'},
		{"seed", required_argument, NULL, 'S'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	size_t n_vocab = DEFAULT_VOCAB;
	int steps = 50, n_decode = 16, c;
	const char *model_dir = NULL;
	rng_state = 0x2545f4914f6cdd1dull;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'v':
			n_vocab = strtoul(optarg, NULL, 10);
			break;
		case 's':
			steps = atoi(optarg);
			break;
		case 'm':
			model_dir = optarg;
			break;
		case 'd':
			n_decode = atoi(optarg);
			break;
		case 'S':
			rng_state = strtoull(optarg, NULL, 10) | 1;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (n_vocab < 1024 || n_vocab > ENGINE_TOKENIZER_MAX_VOCAB || steps < 1 || n_decode < 1) {
		usage(stderr);
		return 2;
	}

	struct engine_model *model = NULL;
	const struct engine_tokenizer *tok = NULL;
	char err[512];
	if (model_dir) {
		model = engine_model_load(model_dir, err, sizeof(err));
		if (!model) {
			fprintf(stderr, "holo-bench policy: %s\n", err);
			return 1;
		}
		tok = engine_model_tokenizer(model);
	}

	struct vocab v = {0};
	int32_t stops[2] = {2, 12};
	if (tok) {
		/* The checkpoint's own vocabulary, looked up the same way. */
		n_vocab = engine_tokenizer_vocab_size(tok);
		v.table_size = 4 * n_vocab + 1;
		v.table = xmalloc(v.table_size * sizeof(*v.table));
		for (size_t i = 0; i < v.table_size; i++)
			v.table[i] = -1;
		v.bytes = xcalloc(n_vocab, sizeof(*v.bytes));
		v.lens = xcalloc(n_vocab, sizeof(*v.lens));
		for (size_t id = 0; id < n_vocab; id++) {
			const uint8_t *b;
			size_t len;
			v.n = id;
			if (!engine_tokenizer_is_special(tok, (int32_t)id) &&
			    engine_tokenizer_token_bytes(tok, (int32_t)id, &b, &len) == 0 && len &&
			    len <= MAX_TOK && vocab_find(&v, b, len) < 0) {
				vocab_add(&v, b, len);
			}
		}
		v.n = n_vocab;
		stops[0] = engine_tokenizer_token_id(tok, "<SPECIAL_12>");
		stops[1] = engine_tokenizer_token_id(tok, "</s>");
		if (stops[0] < 0 || stops[1] < 0) {
			fprintf(stderr, "holo-bench policy: the tokenizer lacks <SPECIAL_12> or </s>\n");
			return 1;
		}
	} else {
		synthetic_vocab(&v, n_vocab);
	}

	double t0 = now_us();
	struct policy_grammar *g = policy_grammar_create_holo3();
	double t_grammar = now_us() - t0;
	t0 = now_us();
	struct policy_masker *mk =
		tok ? policy_masker_create(g, tok, n_vocab, stops, 2) :
		      policy_masker_create_raw(g, (const uint8_t *const *)v.bytes, v.lens, v.n, stops, 2);
	double t_masker = now_us() - t0;
	if (!g || !mk) {
		fprintf(stderr, "holo-bench policy: cannot build the grammar or masker: %s\n",
			strerror(errno));
		return 1;
	}
	/* Grounding's point grammar and its masker: holod builds them with the model, once. */
	t0 = now_us();
	struct policy_grammar *pg = policy_grammar_create_point();
	struct policy_masker *pmk =
		!pg ? NULL :
		tok ? policy_masker_create(pg, tok, n_vocab, stops, 2) :
		      policy_masker_create_raw(pg, (const uint8_t *const *)v.bytes, v.lens, v.n, stops, 2);
	double t_point = now_us() - t0;
	if (!pmk) {
		fprintf(stderr, "holo-bench policy: cannot build the point grammar's masker: %s\n",
			strerror(errno));
		return 1;
	}
	/* The holo-nano step's grammar and masker: holod builds them with the model too. */
	t0 = now_us();
	struct policy_grammar *ng = policy_grammar_create_holo_nano();
	struct policy_masker *nmk =
		!ng ? NULL :
		tok ? policy_masker_create(ng, tok, n_vocab, stops, 2) :
		      policy_masker_create_raw(ng, (const uint8_t *const *)v.bytes, v.lens, v.n, stops, 2);
	double t_nano = now_us() - t0;
	if (!nmk) {
		fprintf(stderr, "holo-bench policy: cannot build the holo-nano step's masker: %s\n",
			strerror(errno));
		return 1;
	}
	policy_masker_destroy(pmk);
	policy_grammar_destroy(pg);
	policy_masker_destroy(nmk);
	policy_grammar_destroy(ng);

	float *row = xmalloc(n_vocab * sizeof(float)), *logits = xmalloc(n_vocab * sizeof(float));
	for (size_t i = 0; i < n_vocab; i++)
		row[i] = (float)(rng() % 1000) / 100.0f;
	size_t cap = 1 << 16, n_tok = 0, n_miss_tok = 0;
	double *per_tok = xmalloc(cap * sizeof(double)), miss_sum = 0, miss_max = 0;
	int failures = 0;
	for (int s = 0; s < steps; s++) {
		const uint8_t *text = (const uint8_t *)targets[s % ARRAY_SIZE(targets)];
		size_t len = strlen((const char *)text), pos = 0;
		struct policy_matcher m;
		policy_matcher_init(&m, g);
		for (;;) {
			uint64_t h0, m0, h1, m1;
			memcpy(logits, row, n_vocab * sizeof(float));
			policy_masker_stats(mk, &h0, &m0);
			double a = now_us();
			int allowed = policy_masker_apply(mk, &m, logits);
			double dt = now_us() - a;
			policy_masker_stats(mk, &h1, &m1);
			if (allowed <= 0) {
				failures++;
				break;
			}
			if (n_tok == cap)
				per_tok = xreallocarray(per_tok, cap *= 2, sizeof(double));
			per_tok[n_tok++] = dt;
			if (m1 > m0) {
				n_miss_tok++;
				miss_sum += dt;
				miss_max = MAX(miss_max, dt);
			}
			if (pos == len) {
				if (logits[stops[0]] == -INFINITY)
					failures++;
				break;
			}
			int32_t pick = -1;
			for (size_t k = MIN((size_t)MAX_TOK, len - pos); k >= 1 && pick < 0; k--) {
				int32_t id = vocab_find(&v, text + pos, k);
				if (id >= 0 && logits[id] != -INFINITY)
					pick = id;
			}
			if (pick < 0 || policy_masker_feed(mk, &m, pick) != 0) {
				failures++;
				break;
			}
			pos += v.lens[pick];
		}
	}

	qsort(per_tok, n_tok, sizeof(double), cmp_double);
	double sum = 0;
	for (size_t i = 0; i < n_tok; i++)
		sum += per_tok[i];
	double mean = sum / (double)n_tok;
	uint64_t hits, misses;
	policy_masker_stats(mk, &hits, &misses);

	printf("policy: constrained decoding (holo3 step grammar)\n");
	printf("  vocabulary          %zu ids (%s)\n", n_vocab,
	       tok ? "the checkpoint's tokenizer" : "synthetic byte-level");
	printf("  grammar build       %.2f ms\n", t_grammar / 1000.0);
	printf("  masker build (trie) %.1f ms\n", t_masker / 1000.0);
	printf("  point grammar + masker build %.1f ms (grounding's, once per model)\n", t_point / 1000.0);
	printf("  holo-nano grammar + masker build %.1f ms (once per model)\n", t_nano / 1000.0);
	printf("  decoded             %d steps, %zu tokens, %d failures\n", steps, n_tok, failures);
	printf("  mask per token      mean %.1f us, p50 %.1f us, p99 %.1f us, max %.1f us\n", mean,
	       per_tok[n_tok / 2], per_tok[(size_t)((double)n_tok * 0.99)], per_tok[n_tok - 1]);
	printf("  cache               %llu hits, %llu misses; a miss (trie walk) costs mean %.1f us, "
	       "max %.1f us\n",
	       (unsigned long long)hits, (unsigned long long)misses,
	       n_miss_tok ? miss_sum / (double)n_miss_tok : 0.0, miss_max);

	/* The reference: decode steps of the checkpoint, or of a small random model with this
	 * vocabulary. */
	double decode_ms = 0;
	struct lm_random_spec sp = {
		.pattern = "M-*M-",
		.hidden = 1024,
		.vocab = (int)n_vocab,
		.intermediate = 2048,
		.n_heads = 8,
		.n_kv_heads = 2,
		.head_dim = 128,
		.m_heads = 32,
		.m_head_dim = 64,
		.m_groups = 8,
		.m_state = 128,
		.m_conv_kernel = 4,
		.m_chunk = 128,
		.dtype = TENSOR_BF16,
		.seed = 1,
	};
	struct engine_model *ref = model ? model : lm_random_model_create(&sp);
	if (!ref || time_decode(ref, n_decode, &decode_ms) < 0) {
		fprintf(stderr, "holo-bench policy: cannot time decode steps: %s\n", strerror(errno));
		failures++;
	} else {
		printf("  decode step         %.2f ms (%s, %d threads)\n", decode_ms,
		       model ? model_dir : "random 5-layer model, hidden 1024, bf16, same vocabulary",
		       engine_get_threads());
		printf("  mask / decode step  %.2f%% (mean), %.2f%% (p99)\n",
		       100.0 * mean / 1000.0 / decode_ms,
		       100.0 * per_tok[(size_t)((double)n_tok * 0.99)] / 1000.0 / decode_ms);
	}
	if (ref && !model)
		lm_random_model_destroy(ref);

	/* Jump-forward off and on: greedy steps of the checkpoint under the grammar (its
	 * tokenizer turns the forced runs into ids; the synthetic vocabulary has none). */
	if (tok) {
		struct engine_backend *b = test_env_backend(model);
		struct engine_session *s = b ? engine_session_create_on(b, 8) : NULL;
		struct bench_jf jf;
		if (!s || bench_jump_forward(engine_session_backend(s), tok, engine_session_vocab(s), 4, &jf,
					     err, sizeof(err)) < 0) {
			fprintf(stderr, "holo-bench policy: jump-forward: %s\n", s ? err : strerror(errno));
			failures++;
		} else {
			bench_jf_print(&jf);
		}
		engine_session_destroy(s);
		engine_backend_destroy(b);
	}

	free(per_tok);
	free(row);
	free(logits);
	policy_masker_destroy(mk);
	policy_grammar_destroy(g);
	vocab_free(&v);
	engine_model_destroy(model);
	return failures ? 1 : 0;
}
