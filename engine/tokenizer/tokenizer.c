/* Tokenizer: loads a Hugging Face tokenizer.json and runs its encode/decode pipeline.
 *
 * Encode follows HF `Tokenizer::encode(text, add_special_tokens=false)` step by step:
 *   1. added tokens whose `normalized` is false are cut out of the raw text (leftmost-longest
 *      match, honouring special/lstrip/rstrip/single_word), then
 *   2. the normalizer runs on the remaining stretches (only the identity is supported; any other
 *      normalizer fails the load, naming it) and `normalized` added tokens are cut out of them,
 *   3. the pre-tokenizer splits each remaining stretch into words (tokenizer_pretok.c), and
 *   4. the BPE model turns each word into ids (tokenizer_bpe.c).
 * Decode concatenates the bytes of each token (the ByteLevel decoder's rule) and converts them
 * to UTF-8 the way Rust's from_utf8_lossy does, so results match HF byte for byte.
 *
 * DESIGN (threads): the loaded tokenizer is read-only except for the BPE word cache, which has its
 * own lock; each encode call owns its working memory. A struct engine_detok belongs to one thread.
 */
#define PCRE2_CODE_UNIT_WIDTH 8

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <pcre2.h>

#include "common.h"
#include "engine.h"
#include "tokenizer_internal.h"

struct token {
	char *str;	/* vocabulary string, NUL-terminated; NULL: no token has this id */
	uint8_t *bytes; /* what the token decodes to (same allocation as str) */
	uint32_t str_len, n_bytes;
	bool added, special, lstrip, rstrip, single_word;
};

/* Byte trie of added-token contents for leftmost-longest matching. The root's children are a
 * direct table (every scan position starts there); deeper nodes keep sibling lists, as added
 * tokens are few and share long prefixes ("<SPECIAL_"). */
struct trie_node {
	int32_t child, sibling; /* -1: none */
	int32_t token;		/* id of the token ending here, or -1 */
	uint8_t byte;
};

struct trie {
	int32_t root[256];
	struct trie_node *nodes;
	size_t n, cap;
};

/* Token strings live in a few large blocks instead of one allocation per token (a 131k-entry
 * vocabulary would otherwise cost as many mallocs at load and frees at destroy). */
#define ARENA_BLOCK_BYTES (1u << 20)

struct arena_block {
	struct arena_block *next;
	size_t used, size;
	char data[];
};

struct engine_tokenizer {
	struct arena_block *arena;
	struct token *tokens;
	size_t n_ids;
	struct tok_bpe bpe;
	struct tok_strmap added; /* added-token content -> id */
	struct trie trie_raw;	 /* added tokens with normalized=false */
	struct trie trie_norm;	 /* added tokens with normalized=true */
	struct tok_pretok *pretok;
	pcre2_code *word_re; /* word characters, only when some added token is single_word */
	struct tok_bytelevel bl;
};

struct engine_detok {
	const struct engine_tokenizer *tok;
	bool skip_special;
	uint8_t pending[4]; /* an incomplete UTF-8 character carried to the next token */
	size_t n_pending;
	struct tok_buf in, out;
};

/* ---- errors --------------------------------------------------------------------------------- */

struct load_ctx {
	const char *path;
	char *errbuf;
	size_t errlen;
};

/* Writes "<path>: <message>" and returns -|err|. */
static int __attribute__((format(printf, 3, 4))) load_error(struct load_ctx *c, int err, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (c->errbuf && c->errlen)
		snprintf(c->errbuf, c->errlen, "%s: %s", c->path, msg);
	return -abs(err);
}

/* ---- tries ---------------------------------------------------------------------------------- */

static void trie_init(struct trie *t)
{
	for (size_t i = 0; i < 256; i++)
		t->root[i] = -1;
}

static int32_t trie_new_node(struct trie *t, uint8_t byte)
{
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 64;
		struct trie_node *n = reallocarray(t->nodes, cap, sizeof(*n));

		if (!n)
			return -ENOMEM;
		t->nodes = n;
		t->cap = cap;
	}
	t->nodes[t->n] = (struct trie_node){.child = -1, .sibling = -1, .token = -1, .byte = byte};
	return (int32_t)t->n++;
}

static int trie_insert(struct trie *t, const char *s, size_t len, int32_t id)
{
	const uint8_t *u = (const uint8_t *)s;
	int32_t node = t->root[u[0]];

	if (node < 0) {
		node = trie_new_node(t, u[0]);
		if (node < 0)
			return node;
		t->root[u[0]] = node;
	}
	for (size_t i = 1; i < len; i++) {
		int32_t c = t->nodes[node].child;

		while (c >= 0 && t->nodes[c].byte != u[i])
			c = t->nodes[c].sibling;
		if (c < 0) {
			c = trie_new_node(t, u[i]);
			if (c < 0)
				return c;
			t->nodes[c].sibling = t->nodes[node].child;
			t->nodes[node].child = c;
		}
		node = c;
	}
	t->nodes[node].token = id;
	return 0;
}

/* Longest token starting at s (its id and length), or -1. */
static int32_t trie_longest(const struct trie *t, const uint8_t *s, size_t len, size_t *ret_len)
{
	int32_t node = t->root[s[0]], best = -1;

	for (size_t i = 1;; i++) {
		if (t->nodes[node].token >= 0) {
			best = t->nodes[node].token;
			*ret_len = i;
		}
		if (i >= len)
			break;
		node = t->nodes[node].child;
		while (node >= 0 && t->nodes[node].byte != s[i])
			node = t->nodes[node].sibling;
		if (node < 0)
			break;
	}
	return best;
}

/* ---- loading ------------------------------------------------------------------------------ */

static int read_file(struct load_ctx *c, char **ret_data, size_t *ret_len)
{
	struct stat st;
	char *data = NULL;
	size_t len = 0;
	int fd, r;

	fd = open(c->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return load_error(c, errno, "cannot open: %s", strerror(errno));
	if (fstat(fd, &st) < 0) {
		r = load_error(c, errno, "cannot stat: %s", strerror(errno));
		goto close_fd;
	}
	if (!S_ISREG(st.st_mode)) {
		r = load_error(c, EINVAL, "not a regular file");
		goto close_fd;
	}
	if ((uint64_t)st.st_size > ENGINE_TOKENIZER_MAX_FILE_BYTES) {
		r = load_error(c, EFBIG, "%lld bytes exceeds the limit of %u bytes", (long long)st.st_size,
			       ENGINE_TOKENIZER_MAX_FILE_BYTES);
		goto close_fd;
	}
	data = malloc((size_t)st.st_size + 1);
	if (!data) {
		r = load_error(c, ENOMEM, "out of memory reading %lld bytes", (long long)st.st_size);
		goto close_fd;
	}
	while (len < (size_t)st.st_size) {
		ssize_t n = read(fd, data + len, (size_t)st.st_size - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = load_error(c, errno, "read failed: %s", strerror(errno));
			goto free_data;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	*ret_data = data;
	*ret_len = len;
	close(fd);
	return 0;
free_data:
	free(data);
close_fd:
	close(fd);
	return r;
}

static int get_bool(struct load_ctx *c, const json_t *obj, const char *where, const char *key, bool def,
		    bool *ret)
{
	const json_t *v = json_object_get(obj, key);

	if (!v || json_is_null(v)) {
		*ret = def;
		return 0;
	}
	if (!json_is_boolean(v))
		return load_error(c, EINVAL, "%s.%s is not a boolean", where, key);
	*ret = json_is_true(v);
	return 0;
}

static char *arena_alloc(struct engine_tokenizer *tok, size_t n)
{
	struct arena_block *b = tok->arena;

	if (!b || b->size - b->used < n) {
		size_t size = MAX((size_t)ARENA_BLOCK_BYTES, n);

		b = malloc(sizeof(*b) + size);
		if (!b)
			return NULL;
		b->next = tok->arena;
		b->used = 0;
		b->size = size;
		tok->arena = b;
	}
	b->used += n;
	return b->data + b->used - n;
}

/* Gives id `id` the string s (copied) and its decoded bytes. */
static int set_token(struct engine_tokenizer *tok, int32_t id, const char *s, size_t len)
{
	struct token *t = &tok->tokens[id];
	char *mem = arena_alloc(tok, 2 * len + 1);

	if (!mem)
		return -ENOMEM;
	memcpy(mem, s, len);
	mem[len] = '\0';
	t->str = mem;
	t->str_len = (uint32_t)len;
	t->bytes = (uint8_t *)mem + len + 1;
	t->n_bytes = (uint32_t)tok_bytelevel_unmap(&tok->bl, s, len, t->bytes);
	return 0;
}

/* The common case without formatting a message: a valid id. */
static bool plain_id(const json_t *v, size_t *ret)
{
	json_int_t id;

	if (!json_is_integer(v))
		return false;
	id = json_integer_value(v);
	if (id < 0 || id >= (json_int_t)ENGINE_TOKENIZER_MAX_VOCAB)
		return false;
	*ret = (size_t)id;
	return true;
}

static int check_id(struct load_ctx *c, const json_t *v, const char *what, size_t *ret)
{
	json_int_t id;

	if (!json_is_integer(v))
		return load_error(c, EINVAL, "%s: id is not an integer", what);
	id = json_integer_value(v);
	if (id < 0 || id >= (json_int_t)ENGINE_TOKENIZER_MAX_VOCAB)
		return load_error(c, id < 0 ? EINVAL : E2BIG, "%s: id %lld is outside [0, %u)", what,
				  (long long)id, ENGINE_TOKENIZER_MAX_VOCAB);
	*ret = (size_t)id;
	return 0;
}

static int check_token_string(struct load_ctx *c, size_t len, const char *what)
{
	if (len == 0)
		return load_error(c, EINVAL, "%s: empty token", what);
	if (len > ENGINE_TOKENIZER_MAX_TOKEN_BYTES)
		return load_error(c, E2BIG, "%s: token of %zu bytes exceeds the limit of %u", what, len,
				  ENGINE_TOKENIZER_MAX_TOKEN_BYTES);
	return 0;
}

static int load_vocab(struct load_ctx *c, struct engine_tokenizer *tok, const json_t *vocab)
{
	for (void *it = json_object_iter((json_t *)vocab); it;
	     it = json_object_iter_next((json_t *)vocab, it)) {
		const char *key = json_object_iter_key(it);
		size_t len = json_object_iter_key_len(it), id = 0;
		char what[96];
		int r;

		if (!plain_id(json_object_iter_value(it), &id) || len == 0 ||
		    len > ENGINE_TOKENIZER_MAX_TOKEN_BYTES || tok->tokens[id].str) {
			snprintf(what, sizeof(what), "model.vocab \"%.40s\"", key);
			r = check_id(c, json_object_iter_value(it), what, &id);
			if (r < 0)
				return r;
			r = check_token_string(c, len, what);
			if (r < 0)
				return r;
			return load_error(c, EINVAL, "%s: id %zu is also \"%.40s\"", what, id,
					  tok->tokens[id].str);
		}
		if (set_token(tok, (int32_t)id, key, len) < 0)
			return load_error(c, ENOMEM, "out of memory");
		if (tok_strmap_put(&tok->bpe.vocab, tok->tokens[id].str, len, (int32_t)id) < 0)
			return load_error(c, ENOMEM, "out of memory");
	}
	return 0;
}

static int32_t vocab_id(const struct engine_tokenizer *tok, const char *s, size_t len)
{
	return tok_strmap_get(&tok->bpe.vocab, s, len);
}

static int load_merges(struct load_ctx *c, struct engine_tokenizer *tok, const json_t *merges)
{
	char joined[2 * ENGINE_TOKENIZER_MAX_TOKEN_BYTES];
	size_t i;
	json_t *m;

	json_array_foreach(merges, i, m)
	{
		const char *a, *b;
		size_t alen, blen;
		int32_t ia, ib, in;

		if (json_is_string(m)) {
			/* "a b": the two tokens separated by the one space (tokens never contain one). */
			const char *s = json_string_value(m), *sp = memchr(s, ' ', json_string_length(m));

			if (!sp || memchr(sp + 1, ' ', json_string_length(m) - (size_t)(sp + 1 - s)))
				return load_error(c, EINVAL,
						  "model.merges[%zu]: \"%.40s\" is not two tokens separated "
						  "by one space",
						  i, s);
			a = s;
			alen = (size_t)(sp - s);
			b = sp + 1;
			blen = json_string_length(m) - alen - 1;
		} else if (json_is_array(m) && json_array_size(m) == 2 &&
			   json_is_string(json_array_get(m, 0)) && json_is_string(json_array_get(m, 1))) {
			a = json_string_value(json_array_get(m, 0));
			alen = json_string_length(json_array_get(m, 0));
			b = json_string_value(json_array_get(m, 1));
			blen = json_string_length(json_array_get(m, 1));
		} else {
			return load_error(c, EINVAL,
					  "model.merges[%zu] is neither \"a b\" nor an array of two strings",
					  i);
		}
		if (alen > ENGINE_TOKENIZER_MAX_TOKEN_BYTES || blen > ENGINE_TOKENIZER_MAX_TOKEN_BYTES)
			return load_error(c, E2BIG, "model.merges[%zu]: token exceeds the limit of %u bytes",
					  i, ENGINE_TOKENIZER_MAX_TOKEN_BYTES);
		ia = vocab_id(tok, a, alen);
		if (ia < 0)
			return load_error(c, EINVAL,
					  "model.merges[%zu]: token \"%.*s\" is not in the vocabulary", i,
					  (int)MIN(alen, 40), a);
		ib = vocab_id(tok, b, blen);
		if (ib < 0)
			return load_error(c, EINVAL,
					  "model.merges[%zu]: token \"%.*s\" is not in the vocabulary", i,
					  (int)MIN(blen, 40), b);
		memcpy(joined, a, alen);
		memcpy(joined + alen, b, blen);
		in = vocab_id(tok, joined, alen + blen);
		if (in < 0)
			return load_error(c, EINVAL,
					  "model.merges[%zu]: merged token \"%.*s\" is not in the vocabulary",
					  i, (int)MIN(alen + blen, 40), joined);
		if (tok_bpe_add_merge(&tok->bpe, ia, ib, (uint32_t)i, in) < 0)
			return load_error(c, ENOMEM, "out of memory");
	}
	return 0;
}

static int load_model(struct load_ctx *c, struct engine_tokenizer *tok, const json_t *model)
{
	const json_t *merges = json_object_get(model, "merges");
	const json_t *v;
	int r;

	r = load_vocab(c, tok, json_object_get(model, "vocab"));
	if (r < 0)
		return r;
	if (!json_is_array(merges))
		return load_error(c, EINVAL, "model.merges is not an array");
	if (json_array_size(merges) > ENGINE_TOKENIZER_MAX_MERGES)
		return load_error(c, E2BIG, "model.merges has %zu entries, more than the limit of %u",
				  json_array_size(merges), ENGINE_TOKENIZER_MAX_MERGES);
	r = load_merges(c, tok, merges);
	if (r < 0)
		return r;

	v = json_object_get(model, "dropout");
	if (v && !json_is_null(v) && !(json_is_number(v) && json_number_value(v) == 0.0))
		return load_error(c, EINVAL,
				  "model.dropout is set; BPE dropout is not supported at inference");
	v = json_object_get(model, "continuing_subword_prefix");
	if (v && !json_is_null(v) && !(json_is_string(v) && json_string_length(v) == 0))
		return load_error(c, EINVAL, "model.continuing_subword_prefix is not supported");
	v = json_object_get(model, "end_of_word_suffix");
	if (v && !json_is_null(v) && !(json_is_string(v) && json_string_length(v) == 0))
		return load_error(c, EINVAL, "model.end_of_word_suffix is not supported");
	v = json_object_get(model, "unk_token");
	if (v && !json_is_null(v)) {
		if (!json_is_string(v))
			return load_error(c, EINVAL, "model.unk_token is not a string");
		tok->bpe.unk_id = vocab_id(tok, json_string_value(v), json_string_length(v));
		if (tok->bpe.unk_id < 0)
			return load_error(c, EINVAL, "model.unk_token \"%.40s\" is not in the vocabulary",
					  json_string_value(v));
	}
	r = get_bool(c, model, "model", "fuse_unk", false, &tok->bpe.fuse_unk);
	if (r >= 0)
		r = get_bool(c, model, "model", "byte_fallback", false, &tok->bpe.byte_fallback);
	if (r >= 0)
		r = get_bool(c, model, "model", "ignore_merges", false, &tok->bpe.ignore_merges);
	return r;
}

/* Ids of added tokens follow HF's AddedVocabulary::add_tokens, which is what the model was trained
 * with: a token the model vocabulary has keeps the model's id; any other gets the next id after
 * the model vocabulary (or after the largest added id once that is beyond it), in file order.
 * The ids written in the file are checked for type and range only: HF-written files agree with
 * this assignment, and where a hand-edited file does not, HF's ids are the ones that count. A
 * repeated content is skipped, as HF does. */
static int load_added(struct load_ctx *c, struct engine_tokenizer *tok, const json_t *list)
{
	size_t n_model = tok->bpe.vocab.n, i;
	bool need_word_re = false, any_added = false;
	size_t max_added = 0;
	json_t *a;

	json_array_foreach(list, i, a)
	{
		const json_t *content = json_object_get(a, "content");
		char what[64];
		bool normalized = false;
		struct token *t;
		int32_t vid;
		size_t id = 0, len;
		int r;

		snprintf(what, sizeof(what), "added_tokens[%zu]", i);
		if (!json_is_object(a) || !json_is_string(content))
			return load_error(c, EINVAL, "%s has no string \"content\"", what);
		len = json_string_length(content);
		r = check_id(c, json_object_get(a, "id"), what, &id);
		if (r >= 0)
			r = check_token_string(c, len, what);
		if (r < 0)
			return r;
		if (tok_strmap_get(&tok->added, json_string_value(content), len) >= 0)
			continue;
		vid = vocab_id(tok, json_string_value(content), len);
		if (vid >= 0)
			id = (size_t)vid;
		else if (!any_added || (max_added < n_model && n_model > 0))
			id = n_model;
		else
			id = max_added + 1;
		if (id >= tok->n_ids)
			return load_error(c, E2BIG, "%s: id %zu is beyond the limit of %u ids", what, id,
					  ENGINE_TOKENIZER_MAX_VOCAB);
		max_added = any_added ? MAX(max_added, id) : id;
		any_added = true;
		t = &tok->tokens[id];
		if (t->str && vid < 0)
			return load_error(c, EINVAL, "%s: id %zu for \"%.40s\" is \"%.40s\" in the vocabulary",
					  what, id, json_string_value(content), t->str);
		if (!t->str && set_token(tok, (int32_t)id, json_string_value(content), len) < 0)
			return load_error(c, ENOMEM, "out of memory");
		t->added = true;
		r = get_bool(c, a, what, "special", false, &t->special);
		if (r >= 0)
			r = get_bool(c, a, what, "lstrip", false, &t->lstrip);
		if (r >= 0)
			r = get_bool(c, a, what, "rstrip", false, &t->rstrip);
		if (r >= 0)
			r = get_bool(c, a, what, "single_word", false, &t->single_word);
		/* HF's default: special tokens are matched on raw text, others after normalization. */
		if (r >= 0)
			r = get_bool(c, a, what, "normalized", !t->special, &normalized);
		if (r < 0)
			return r;
		need_word_re |= t->single_word;
		if (tok_strmap_put(&tok->added, t->str, len, (int32_t)id) < 0 ||
		    trie_insert(normalized ? &tok->trie_norm : &tok->trie_raw, t->str, len, (int32_t)id) < 0)
			return load_error(c, ENOMEM, "out of memory");
	}
	if (need_word_re) {
		/* Unicode \w as the Rust regex crate defines it (regex_syntax::is_word_character), which
		 * HF uses for single_word: unlike PCRE2's \w it includes marks and excludes non-decimal
		 * numbers such as U+00BD. */
		static const char word_class[] = "[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\x{200C}\\x{200D}]";
		int code;
		PCRE2_SIZE off;

		tok->word_re = pcre2_compile((PCRE2_SPTR)word_class, sizeof(word_class) - 1,
					     PCRE2_UTF | PCRE2_UCP, &code, &off, NULL);
		if (!tok->word_re)
			return load_error(c, ENOMEM, "cannot compile the word-character pattern");
	}
	return 0;
}

static int check_normalizer(struct load_ctx *c, const json_t *n, int depth)
{
	const json_t *type;
	size_t i;
	json_t *child;

	if (!n || json_is_null(n))
		return 0;
	type = json_object_get(n, "type");
	if (!json_is_string(type))
		return load_error(c, EINVAL, "normalizer has no \"type\"");
	if (strcmp(json_string_value(type), "Sequence") == 0 && depth < 8 &&
	    json_is_array(json_object_get(n, "normalizers"))) {
		json_array_foreach(json_object_get(n, "normalizers"), i, child)
		{
			int r = check_normalizer(c, child, depth + 1);

			if (r < 0)
				return r;
		}
		return 0;
	}
	return load_error(c, EINVAL, "normalizer \"%.40s\" is not supported (only none)",
			  json_string_value(type));
}

static int check_decoder(struct load_ctx *c, const json_t *d, int depth)
{
	const json_t *type;
	size_t i;
	json_t *child;

	if (!d || json_is_null(d))
		return load_error(c, EINVAL, "decoder is null; only the ByteLevel decoder is supported");
	type = json_object_get(d, "type");
	if (!json_is_string(type))
		return load_error(c, EINVAL, "decoder has no \"type\"");
	if (strcmp(json_string_value(type), "ByteLevel") == 0)
		return 0;
	if (strcmp(json_string_value(type), "Sequence") == 0 && depth < 8 &&
	    json_is_array(json_object_get(d, "decoders")) &&
	    json_array_size(json_object_get(d, "decoders")) > 0) {
		json_array_foreach(json_object_get(d, "decoders"), i, child)
		{
			int r = check_decoder(c, child, depth + 1);

			if (r < 0)
				return r;
		}
		return 0;
	}
	return load_error(c, EINVAL, "decoder \"%.40s\" is not supported (only ByteLevel)",
			  json_string_value(type));
}

/* Size of the token table: every model id, plus room for each added token to get an id of its
 * own after them (load_added). Also validates the file's ids. */
static int table_size(struct load_ctx *c, const json_t *vocab, const json_t *added, size_t *ret)
{
	size_t max = 0, id = 0, i, n;
	json_t *a;
	int r;

	for (void *it = json_object_iter((json_t *)vocab); it;
	     it = json_object_iter_next((json_t *)vocab, it)) {
		char what[96];

		if (!plain_id(json_object_iter_value(it), &id)) {
			snprintf(what, sizeof(what), "model.vocab \"%.40s\"", json_object_iter_key(it));
			r = check_id(c, json_object_iter_value(it), what, &id);
			if (r < 0)
				return r;
		}
		max = MAX(max, id);
	}
	json_array_foreach(added, i, a)
	{
		char what[64];

		snprintf(what, sizeof(what), "added_tokens[%zu]", i);
		if (!json_is_object(a))
			return load_error(c, EINVAL, "%s is not an object", what);
		r = check_id(c, json_object_get(a, "id"), what, &id);
		if (r < 0)
			return r;
	}
	n = MAX(max + 1, json_object_size(vocab)) + (added ? json_array_size(added) : 0);
	*ret = MIN(n, (size_t)ENGINE_TOKENIZER_MAX_VOCAB);
	return 0;
}

static int load_json(struct load_ctx *c, struct engine_tokenizer *tok, const json_t *root)
{
	const json_t *model = json_object_get(root, "model");
	const json_t *type = json_object_get(model, "type");
	const json_t *vocab = json_object_get(model, "vocab");
	const json_t *added = json_object_get(root, "added_tokens");
	int r;

	if (!json_is_object(root))
		return load_error(c, EINVAL, "the top level is not a JSON object");
	if (!json_is_object(model))
		return load_error(c, EINVAL, "\"model\" is missing or not an object");
	if (!json_is_string(type))
		return load_error(c, EINVAL, "model.type is missing");
	if (strcmp(json_string_value(type), "BPE") != 0)
		return load_error(c, EINVAL, "model.type \"%.40s\" is not supported (only BPE)",
				  json_string_value(type));
	if (!json_is_object(vocab))
		return load_error(c, EINVAL, "model.vocab is missing or not an object");
	if (json_object_size(vocab) == 0)
		return load_error(c, EINVAL, "model.vocab is empty");
	if (json_object_size(vocab) > ENGINE_TOKENIZER_MAX_VOCAB)
		return load_error(c, E2BIG, "model.vocab has %zu entries, more than the limit of %u",
				  json_object_size(vocab), ENGINE_TOKENIZER_MAX_VOCAB);
	if (added && json_is_null(added))
		added = NULL;
	if (added && !json_is_array(added))
		return load_error(c, EINVAL, "added_tokens is not an array");
	if (added && json_array_size(added) > ENGINE_TOKENIZER_MAX_VOCAB)
		return load_error(c, E2BIG, "added_tokens has more than %u entries",
				  ENGINE_TOKENIZER_MAX_VOCAB);

	/* Validate what is cheap to check before building anything. */
	r = check_normalizer(c, json_object_get(root, "normalizer"), 0);
	if (r >= 0)
		r = check_decoder(c, json_object_get(root, "decoder"), 0);
	if (r >= 0)
		r = table_size(c, vocab, added, &tok->n_ids);
	if (r < 0)
		return r;

	tok->tokens = calloc(tok->n_ids, sizeof(*tok->tokens));
	if (!tok->tokens)
		return load_error(c, ENOMEM, "out of memory for %zu token ids", tok->n_ids);
	if (tok_bpe_init(&tok->bpe, json_object_size(vocab),
			 json_array_size(json_object_get(model, "merges"))) < 0 ||
	    tok_strmap_init(&tok->added, added ? json_array_size(added) : 0) < 0)
		return load_error(c, ENOMEM, "out of memory");
	r = load_model(c, tok, model);
	if (r >= 0 && added)
		r = load_added(c, tok, added);
	if (r < 0)
		return r;
	/* The table was sized for the worst case; the vocabulary ends at the last id in use. */
	while (tok->n_ids > 1 && !tok->tokens[tok->n_ids - 1].str)
		tok->n_ids--;

	{
		char msg[400] = "";

		tok->pretok =
			tok_pretok_create(json_object_get(root, "pre_tokenizer"), &tok->bl, msg, sizeof(msg));
		if (!tok->pretok)
			return load_error(c, errno, "%s", msg[0] ? msg : "out of memory");
	}
	return 0;
}

static struct engine_tokenizer *load_buffer(struct load_ctx *c, const char *data, size_t len)
{
	struct engine_tokenizer *tok = NULL;
	json_error_t jerr;
	json_t *root = NULL;
	int r;

	if (len > ENGINE_TOKENIZER_MAX_FILE_BYTES) {
		r = load_error(c, EFBIG, "%zu bytes exceeds the limit of %u bytes", len,
			       ENGINE_TOKENIZER_MAX_FILE_BYTES);
		goto fail;
	}
	/* JSON_ALLOW_NUL: a token may legitimately contain U+0000; lengths are tracked throughout. */
	root = json_loadb(data, len, JSON_ALLOW_NUL, &jerr);
	if (!root) {
		r = load_error(c, EINVAL, "invalid JSON at line %d, column %d: %s", jerr.line, jerr.column,
			       jerr.text);
		goto fail;
	}
	tok = calloc(1, sizeof(*tok));
	if (!tok) {
		r = load_error(c, ENOMEM, "out of memory");
		goto fail;
	}
	tok_bytelevel_init(&tok->bl);
	trie_init(&tok->trie_raw);
	trie_init(&tok->trie_norm);
	tok->bpe.unk_id = -1;
	r = load_json(c, tok, root);
	if (r < 0)
		goto fail;
	json_decref(root);
	return tok;
fail:
	json_decref(root);
	engine_tokenizer_destroy(tok);
	errno = -r;
	return NULL;
}

struct engine_tokenizer *tok_load_buffer(const char *data, size_t len, const char *name, char *errbuf,
					 size_t errlen)
{
	struct load_ctx c = {.path = name ? name : "tokenizer.json", .errbuf = errbuf, .errlen = errlen};

	if (errbuf && errlen)
		errbuf[0] = '\0';
	if (!data && len) {
		errno = EINVAL;
		return NULL;
	}
	return load_buffer(&c, data ? data : "", len);
}

struct engine_tokenizer *engine_tokenizer_load(const char *path, char *errbuf, size_t errlen)
{
	struct load_ctx c = {.path = path, .errbuf = errbuf, .errlen = errlen};
	struct engine_tokenizer *tok;
	char *data = NULL;
	size_t len = 0;
	int r;

	if (errbuf && errlen)
		errbuf[0] = '\0';
	if (!path) {
		errno = EINVAL;
		return NULL;
	}
	r = read_file(&c, &data, &len);
	if (r < 0) {
		errno = -r;
		return NULL;
	}
	tok = load_buffer(&c, data, len);
	free(data);
	return tok;
}

void engine_tokenizer_destroy(struct engine_tokenizer *tok)
{
	if (!tok)
		return;
	while (tok->arena) {
		struct arena_block *next = tok->arena->next;

		free(tok->arena);
		tok->arena = next;
	}
	free(tok->tokens);
	tok_bpe_finish(&tok->bpe);
	tok_strmap_finish(&tok->added);
	free(tok->trie_raw.nodes);
	free(tok->trie_norm.nodes);
	tok_pretok_destroy(tok->pretok);
	pcre2_code_free(tok->word_re);
	free(tok);
}

/* ---- encoding ------------------------------------------------------------------------------- */

struct encode_ctx {
	const struct engine_tokenizer *tok;
	bool parse_special;
	struct tok_ids ids;
	struct tok_pieces words, scratch;
	struct tok_bpe_scratch bpe;
	pcre2_match_data *md; /* for the single_word checks */
};

/* Text between added tokens: pre-tokenize, then BPE each word. */
static int encode_plain(struct encode_ctx *e, const char *s, size_t len)
{
	int r;

	if (!len)
		return 0;
	r = tok_pretok_run(e->tok->pretok, s, len, &e->words, &e->scratch);
	if (r < 0)
		return r;
	for (size_t i = 0; i < e->words.n; i++) {
		r = tok_bpe_word(&e->tok->bpe, e->words.buf.data + e->words.spans[i].off,
				 e->words.spans[i].len, &e->ids, &e->bpe);
		if (r < 0)
			return r;
	}
	return 0;
}

static bool is_word_char(struct encode_ctx *e, const char *s, size_t len)
{
	if (!e->md) {
		e->md = pcre2_match_data_create(1, NULL);
		if (!e->md)
			return false;
	}
	return pcre2_match(e->tok->word_re, (PCRE2_SPTR)s, len, 0, PCRE2_ANCHORED | PCRE2_NO_UTF_CHECK, e->md,
			   NULL) >= 0;
}

/* Start of the last character of s[0..end). */
static size_t char_start_before(const char *s, size_t end)
{
	size_t i = end - 1;

	while (i > 0 && ((uint8_t)s[i] & 0xC0) == 0x80)
		i--;
	return i;
}

static size_t char_len_at(const char *s, size_t len)
{
	uint32_t cp;
	size_t k = utf8_decode((const uint8_t *)s, len, &cp);

	return k ? k : 1;
}

static bool cp_at_is_space(const char *s, size_t len)
{
	uint32_t cp;

	return utf8_decode((const uint8_t *)s, len, &cp) && tok_is_whitespace(cp);
}

/* Cuts the added tokens of trie `t` out of s and encodes the stretches between them: with the
 * normalized trie next when `raw`, else as plain text (HF AddedVocabulary::find_matches). */
static int encode_added(struct encode_ctx *e, const struct trie *t, bool raw, const char *s, size_t len)
{
	const uint8_t *u = (const uint8_t *)s;
	size_t pos = 0, start_offset = 0;
	int r;

	while (pos < len) {
		const struct token *tk;
		size_t mstart = pos, mlen = 0, start, stop;
		int32_t id = -1;

		for (; mstart < len; mstart++) {
			if (t->root[u[mstart]] >= 0) {
				id = trie_longest(t, u + mstart, len - mstart, &mlen);
				if (id >= 0)
					break;
			}
		}
		if (id < 0)
			break;
		/* The matcher moves past this match whether or not it is used, as HF's does. */
		pos = mstart + mlen;
		tk = &e->tok->tokens[id];
		if (!e->parse_special && tk->special)
			continue;
		start = mstart;
		stop = mstart + mlen;
		if (tk->single_word) {
			bool word_before = start > 0 && is_word_char(e, s + char_start_before(s, start),
								     start - char_start_before(s, start));
			bool word_after =
				stop < len && is_word_char(e, s + stop, char_len_at(s + stop, len - stop));

			if (word_before || word_after)
				continue;
		}
		if (tk->lstrip) {
			size_t newstart = start;

			while (newstart > 0) {
				size_t cs = char_start_before(s, newstart);

				if (!cp_at_is_space(s + cs, newstart - cs))
					break;
				newstart = cs;
			}
			start = MAX(newstart, start_offset);
		}
		if (tk->rstrip) {
			while (stop < len && cp_at_is_space(s + stop, len - stop))
				stop += char_len_at(s + stop, len - stop);
		}
		if (start_offset < start) {
			r = raw ? encode_added(e, &e->tok->trie_norm, false, s + start_offset,
					       start - start_offset) :
				  encode_plain(e, s + start_offset, start - start_offset);
			if (r < 0)
				return r;
		}
		r = tok_ids_push(&e->ids, id);
		if (r < 0)
			return r;
		start_offset = stop;
	}
	if (start_offset < len)
		return raw ? encode_added(e, &e->tok->trie_norm, false, s + start_offset, len - start_offset) :
			     encode_plain(e, s + start_offset, len - start_offset);
	return 0;
}

int engine_tokenizer_encode(const struct engine_tokenizer *tok, const char *text, size_t len,
			    bool parse_special, int32_t **ret_ids, size_t *ret_n)
{
	struct encode_ctx e = {.tok = tok, .parse_special = parse_special};
	int r;

	if (!tok || (!text && len) || !ret_ids || !ret_n)
		return -EINVAL;
	if (len > ENGINE_TOKENIZER_MAX_INPUT_BYTES)
		return -E2BIG;
	if (!utf8_valid((const uint8_t *)text, len))
		return -EILSEQ;
	r = encode_added(&e, &tok->trie_raw, true, text, len);
	if (r < 0)
		goto finish;
	/* A non-NULL array even for no ids, so callers can free unconditionally. */
	r = tok_ids_push(&e.ids, 0);
	if (r < 0)
		goto finish;
	*ret_n = e.ids.len - 1;
	*ret_ids = e.ids.data;
	e.ids = (struct tok_ids){0};
finish:
	tok_ids_finish(&e.ids);
	tok_pieces_finish(&e.words);
	tok_pieces_finish(&e.scratch);
	tok_bpe_scratch_finish(&e.bpe);
	pcre2_match_data_free(e.md);
	return r;
}

/* ---- decoding ------------------------------------------------------------------------------- */

static const struct token *token_of(const struct engine_tokenizer *tok, int32_t id)
{
	if (!tok || id < 0 || (size_t)id >= tok->n_ids || !tok->tokens[id].str)
		return NULL;
	return &tok->tokens[id];
}

int engine_tokenizer_decode(const struct engine_tokenizer *tok, const int32_t *ids, size_t n,
			    bool skip_special, char **ret_text, size_t *ret_len)
{
	struct tok_buf raw = {0}, out = {0};
	int r = 0;

	if (!tok || (!ids && n) || !ret_text || !ret_len)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		const struct token *t = token_of(tok, ids[i]);

		if (!t) {
			r = -EINVAL;
			goto finish;
		}
		if (skip_special && t->special)
			continue;
		r = tok_buf_append(&raw, t->bytes, t->n_bytes);
		if (r < 0)
			goto finish;
	}
	r = tok_utf8_lossy_append(&out, (const uint8_t *)raw.data, raw.len, false, NULL);
	if (r >= 0)
		r = tok_buf_reserve(&out, 0);
	if (r < 0)
		goto finish;
	out.data[out.len] = '\0';
	*ret_text = out.data;
	*ret_len = out.len;
	out = (struct tok_buf){0};
finish:
	tok_buf_finish(&raw);
	tok_buf_finish(&out);
	return r;
}

struct engine_detok *engine_detok_create(const struct engine_tokenizer *tok, bool skip_special)
{
	struct engine_detok *d;

	if (!tok) {
		errno = EINVAL;
		return NULL;
	}
	d = calloc(1, sizeof(*d));
	if (!d) {
		errno = ENOMEM;
		return NULL;
	}
	d->tok = tok;
	d->skip_special = skip_special;
	return d;
}

void engine_detok_destroy(struct engine_detok *d)
{
	if (!d)
		return;
	tok_buf_finish(&d->in);
	tok_buf_finish(&d->out);
	free(d);
}

/* Converts pending + bytes; keeps an incomplete trailing character unless flushing. */
static int detok_emit(struct engine_detok *d, const uint8_t *bytes, size_t n, bool flush,
		      const char **ret_text, size_t *ret_len)
{
	size_t tail = 0;
	int r;

	d->in.len = 0;
	d->out.len = 0;
	r = tok_buf_append(&d->in, d->pending, d->n_pending);
	if (r >= 0)
		r = tok_buf_append(&d->in, bytes, n);
	if (r >= 0)
		r = tok_utf8_lossy_append(&d->out, (const uint8_t *)d->in.data, d->in.len, !flush, &tail);
	if (r >= 0)
		r = tok_buf_reserve(&d->out, 0);
	if (r < 0)
		return r;
	/* A tail is a proper prefix of one character, so at most 3 bytes. */
	memcpy(d->pending, d->in.data + d->in.len - tail, tail);
	d->n_pending = tail;
	d->out.data[d->out.len] = '\0';
	*ret_text = d->out.data;
	*ret_len = d->out.len;
	return 0;
}

int engine_detok_push(struct engine_detok *d, int32_t id, const char **ret_text, size_t *ret_len)
{
	const struct token *t;

	if (!d || !ret_text || !ret_len)
		return -EINVAL;
	t = token_of(d->tok, id);
	if (!t)
		return -EINVAL;
	if (d->skip_special && t->special)
		return detok_emit(d, NULL, 0, false, ret_text, ret_len);
	return detok_emit(d, t->bytes, t->n_bytes, false, ret_text, ret_len);
}

int engine_detok_flush(struct engine_detok *d, const char **ret_text, size_t *ret_len)
{
	if (!d || !ret_text || !ret_len)
		return -EINVAL;
	return detok_emit(d, NULL, 0, true, ret_text, ret_len);
}

/* ---- lookups ------------------------------------------------------------------------------ */

int32_t engine_tokenizer_token_id(const struct engine_tokenizer *tok, const char *token)
{
	size_t len;
	int32_t id;

	if (!tok || !token)
		return -EINVAL;
	len = strlen(token);
	id = tok_strmap_get(&tok->added, token, len);
	if (id < 0)
		id = tok_strmap_get(&tok->bpe.vocab, token, len);
	return id >= 0 ? id : -ENOENT;
}

size_t engine_tokenizer_vocab_size(const struct engine_tokenizer *tok)
{
	return tok ? tok->n_ids : 0;
}

int engine_tokenizer_token_bytes(const struct engine_tokenizer *tok, int32_t id, const uint8_t **ret_bytes,
				 size_t *ret_len)
{
	const struct token *t = token_of(tok, id);

	if (!t)
		return -ENOENT;
	*ret_bytes = t->bytes;
	*ret_len = t->n_bytes;
	return 0;
}

const char *engine_tokenizer_token_str(const struct engine_tokenizer *tok, int32_t id)
{
	const struct token *t = token_of(tok, id);

	return t ? t->str : NULL;
}

bool engine_tokenizer_is_special(const struct engine_tokenizer *tok, int32_t id)
{
	const struct token *t = token_of(tok, id);

	return t && t->special;
}
