/* Pre-tokenizer: the `pre_tokenizer` of tokenizer.json as a flat list of steps.
 *
 * Supported (what byte-level BPE files use): Sequence (flattened), Split with a Regex or String
 * pattern, any split behavior and invert, and ByteLevel (add_prefix_space, use_regex with the
 * GPT-2 pattern). Every step runs on each piece the previous step produced, as HF applies
 * pre-tokenizers to each split; ByteLevel maps the bytes of its pieces to the GPT-2 alphabet, so a
 * step after it sees mapped text, as in HF. Anything else fails the load naming the type.
 *
 * Regexes are compiled with PCRE2 (UTF + UCP so \p{..}, \s and \w are Unicode-aware, like
 * Oniguruma in HF). JIT is used when available; a JIT stack overflow on a pathological input falls
 * back to the interpreter for that one match instead of failing.
 *
 * Known difference from HF: character properties come from PCRE2's Unicode tables (Unicode 14 in
 * PCRE2 10.42) while tokenizers' Oniguruma is newer, so code points first assigned in Unicode 15
 * or later can be split differently. Every code point assigned in Unicode 14 was checked against
 * HF in several contexts (tokenizers 0.23.3, both fixtures): no difference.
 */
#define PCRE2_CODE_UNIT_WIDTH 8

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pcre2.h>

#include "common.h"
#include "tokenizer_internal.h"

/* The pattern HF's ByteLevel pre-tokenizer splits with when use_regex is true. */
static const char gpt2_pattern[] =
	"'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

/* Bound on Sequence nesting, so a hostile file cannot exhaust the stack. */
#define PRETOK_MAX_DEPTH 8
#define PRETOK_MAX_STEPS 64

enum step_kind {
	STEP_SPLIT,
	STEP_BYTELEVEL,
};

enum split_behavior {
	SPLIT_REMOVED,
	SPLIT_ISOLATED,
	SPLIT_MERGED_WITH_PREVIOUS,
	SPLIT_MERGED_WITH_NEXT,
	SPLIT_CONTIGUOUS,
};

struct step {
	enum step_kind kind;
	pcre2_code *re; /* Split: the pattern; ByteLevel: the GPT-2 pattern or NULL */
	enum split_behavior behavior;
	bool invert;
	bool add_prefix_space;
};

struct tok_pretok {
	struct step steps[PRETOK_MAX_STEPS];
	size_t n;
	const struct tok_bytelevel *bl;
};

/* One stretch of a piece: a match of the pattern or the text between matches. */
struct segment {
	size_t start, end;
	bool is_match;
};

struct segments {
	struct segment *data;
	size_t n, cap;
};

/* ---- construction ------------------------------------------------------------------------- */

/* HF compiles these patterns with Oniguruma, whose Unicode \s is the White_Space property and
 * whose \w is letters, marks, decimal digits and connector punctuation. PCRE2's UCP classes differ
 * at the edges (its \s also takes U+180E, its \w takes every number and no marks), so \s, \S,
 * \w and \W are spelled out as explicit classes before compiling. Negated ones inside a class
 * ([\S...]) cannot be spelled that way and are left to PCRE2. */
#define WHITE_SPACE                                                                                          \
	"\\t\\n\\x0B\\f\\r\\x20\\x85\\xA0\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}"   \
	"\\x{3000}"
#define WORD "\\p{L}\\p{M}\\p{Nd}\\p{Pc}"

static int translate_pattern(const char *p, size_t len, struct tok_buf *out)
{
	bool in_class = false;
	int r = 0;

	for (size_t i = 0; i < len && r >= 0; i++) {
		const char *rep = NULL;

		if (p[i] == '\\' && i + 1 < len) {
			char c = p[i + 1];

			if (c == 's')
				rep = in_class ? WHITE_SPACE : "[" WHITE_SPACE "]";
			else if (c == 'S' && !in_class)
				rep = "[^" WHITE_SPACE "]";
			else if (c == 'w')
				rep = in_class ? WORD : "[" WORD "]";
			else if (c == 'W' && !in_class)
				rep = "[^" WORD "]";
			if (rep) {
				r = tok_buf_append(out, rep, strlen(rep));
			} else {
				r = tok_buf_append(out, p + i, 2);
			}
			i++;
			continue;
		}
		if (!in_class && p[i] == '[') {
			in_class = true;
			r = tok_buf_append(out, p + i, 1);
			/* A ']' right after '[' or '[^' is a literal member. */
			if (r >= 0 && i + 1 < len && p[i + 1] == '^')
				r = tok_buf_append(out, p + ++i, 1);
			if (r >= 0 && i + 1 < len && p[i + 1] == ']')
				r = tok_buf_append(out, p + ++i, 1);
			continue;
		}
		if (in_class && p[i] == '[' && i + 1 < len && p[i + 1] == ':') {
			/* A POSIX class such as [:alpha:] inside a class: copy it whole. */
			const char *end = memmem(p + i + 2, len - i - 2, ":]", 2);
			size_t n = end ? (size_t)(end - (p + i)) + 2 : 1;

			r = tok_buf_append(out, p + i, n);
			i += n - 1;
			continue;
		}
		if (in_class && p[i] == ']')
			in_class = false;
		r = tok_buf_append(out, p + i, 1);
	}
	return r;
}

static pcre2_code *compile(const char *pattern, size_t len, bool literal, char *err, size_t errlen)
{
	struct tok_buf translated = {0};
	int code;
	PCRE2_SIZE offset;
	pcre2_code *re;

	/* The pattern as written is compiled first so that errors point into the file's text.
	 * PCRE2_LITERAL admits no UCP (character classes do not apply to a literal anyway). */
	re = pcre2_compile((PCRE2_SPTR)pattern, len, PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP), &code,
			   &offset, NULL);
	if (re && !literal) {
		pcre2_code_free(re);
		re = NULL;
		if (translate_pattern(pattern, len, &translated) < 0) {
			snprintf(err, errlen, "pre_tokenizer: out of memory");
			errno = ENOMEM;
			return NULL;
		}
		re = pcre2_compile((PCRE2_SPTR)translated.data, translated.len, PCRE2_UTF | PCRE2_UCP, &code,
				   &offset, NULL);
		tok_buf_finish(&translated);
	}
	if (!re) {
		PCRE2_UCHAR msg[256];

		pcre2_get_error_message(code, msg, sizeof(msg));
		snprintf(err, errlen, "pre_tokenizer: pattern \"%.60s\": at offset %zu: %s", pattern,
			 (size_t)offset, (const char *)msg);
		errno = EINVAL;
		return NULL;
	}
	/* JIT is an optimisation: when it is unavailable the interpreter runs the same pattern. */
	(void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
	return re;
}

static int parse_bool(const json_t *obj, const char *key, bool def, bool *ret, const char *what, char *err,
		      size_t errlen)
{
	const json_t *v = json_object_get(obj, key);

	if (!v || json_is_null(v)) {
		*ret = def;
		return 0;
	}
	if (!json_is_boolean(v)) {
		snprintf(err, errlen, "pre_tokenizer: %s: \"%s\" is not a boolean", what, key);
		return -EINVAL;
	}
	*ret = json_is_true(v);
	return 0;
}

static int parse_split(struct tok_pretok *p, const json_t *node, char *err, size_t errlen)
{
	static const struct {
		const char *name;
		enum split_behavior behavior;
	} behaviors[] = {
		{"Removed", SPLIT_REMOVED},
		{"Isolated", SPLIT_ISOLATED},
		{"MergedWithPrevious", SPLIT_MERGED_WITH_PREVIOUS},
		{"MergedWithNext", SPLIT_MERGED_WITH_NEXT},
		{"Contiguous", SPLIT_CONTIGUOUS},
	};
	const json_t *pattern = json_object_get(node, "pattern");
	const json_t *behavior = json_object_get(node, "behavior");
	const json_t *str;
	struct step *st = &p->steps[p->n];
	bool literal, found = false;
	int r;

	if (!json_is_object(pattern)) {
		snprintf(err, errlen, "pre_tokenizer: Split: \"pattern\" is not an object");
		return -EINVAL;
	}
	str = json_object_get(pattern, "Regex");
	literal = !str;
	if (literal)
		str = json_object_get(pattern, "String");
	if (!json_is_string(str)) {
		snprintf(err, errlen,
			 "pre_tokenizer: Split: \"pattern\" has neither a \"Regex\" nor a \"String\"");
		return -EINVAL;
	}
	if (json_string_length(str) > ENGINE_TOKENIZER_MAX_PATTERN_BYTES) {
		snprintf(err, errlen, "pre_tokenizer: Split: pattern of %zu bytes exceeds the limit of %u",
			 json_string_length(str), ENGINE_TOKENIZER_MAX_PATTERN_BYTES);
		return -E2BIG;
	}
	if (!json_is_string(behavior)) {
		snprintf(err, errlen, "pre_tokenizer: Split: \"behavior\" is not a string");
		return -EINVAL;
	}
	for (size_t i = 0; i < ARRAY_SIZE(behaviors); i++) {
		if (strcmp(json_string_value(behavior), behaviors[i].name) == 0) {
			st->behavior = behaviors[i].behavior;
			found = true;
		}
	}
	if (!found) {
		snprintf(err, errlen, "pre_tokenizer: Split: behavior \"%.40s\" is not supported",
			 json_string_value(behavior));
		return -EINVAL;
	}
	r = parse_bool(node, "invert", false, &st->invert, "Split", err, errlen);
	if (r < 0)
		return r;
	st->kind = STEP_SPLIT;
	st->re = compile(json_string_value(str), json_string_length(str), literal, err, errlen);
	if (!st->re)
		return -EINVAL;
	p->n++;
	return 0;
}

static int parse_bytelevel(struct tok_pretok *p, const json_t *node, char *err, size_t errlen)
{
	struct step *st = &p->steps[p->n];
	bool use_regex;
	int r;

	/* HF's defaults for fields an older file may lack: add_prefix_space and use_regex true. */
	r = parse_bool(node, "add_prefix_space", true, &st->add_prefix_space, "ByteLevel", err, errlen);
	if (r < 0)
		return r;
	r = parse_bool(node, "use_regex", true, &use_regex, "ByteLevel", err, errlen);
	if (r < 0)
		return r;
	st->kind = STEP_BYTELEVEL;
	if (use_regex) {
		st->re = compile(gpt2_pattern, sizeof(gpt2_pattern) - 1, false, err, errlen);
		if (!st->re)
			return -EINVAL;
	}
	p->n++;
	return 0;
}

static int parse_node(struct tok_pretok *p, const json_t *node, int depth, char *err, size_t errlen)
{
	const json_t *type = json_object_get(node, "type");
	const char *name;

	if (!json_is_object(node) || !json_is_string(type)) {
		snprintf(err, errlen, "pre_tokenizer: an entry is not an object with a \"type\"");
		return -EINVAL;
	}
	name = json_string_value(type);
	if (strcmp(name, "Sequence") == 0) {
		const json_t *list = json_object_get(node, "pretokenizers");
		size_t i;
		json_t *child;

		if (!json_is_array(list)) {
			snprintf(err, errlen, "pre_tokenizer: Sequence: \"pretokenizers\" is not an array");
			return -EINVAL;
		}
		if (depth >= PRETOK_MAX_DEPTH) {
			snprintf(err, errlen, "pre_tokenizer: Sequences nested deeper than %d",
				 PRETOK_MAX_DEPTH);
			return -E2BIG;
		}
		json_array_foreach(list, i, child)
		{
			int r = parse_node(p, child, depth + 1, err, errlen);

			if (r < 0)
				return r;
		}
		return 0;
	}
	if (p->n >= PRETOK_MAX_STEPS) {
		snprintf(err, errlen, "pre_tokenizer: more than %d steps", PRETOK_MAX_STEPS);
		return -E2BIG;
	}
	if (strcmp(name, "Split") == 0)
		return parse_split(p, node, err, errlen);
	if (strcmp(name, "ByteLevel") == 0)
		return parse_bytelevel(p, node, err, errlen);
	snprintf(err, errlen, "pre_tokenizer type \"%.40s\" is not supported", name);
	return -EINVAL;
}

struct tok_pretok *tok_pretok_create(const json_t *node, const struct tok_bytelevel *bl, char *err,
				     size_t errlen)
{
	struct tok_pretok *p = calloc(1, sizeof(*p));
	int r;

	if (!p) {
		errno = ENOMEM;
		return NULL;
	}
	p->bl = bl;
	if (node && !json_is_null(node)) {
		r = parse_node(p, node, 0, err, errlen);
		if (r < 0) {
			tok_pretok_destroy(p);
			errno = -r;
			return NULL;
		}
	}
	return p;
}

void tok_pretok_destroy(struct tok_pretok *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->n; i++)
		pcre2_code_free(p->steps[i].re);
	free(p);
}

/* ---- running ---------------------------------------------------------------------------- */

static int segments_add(struct segments *s, size_t start, size_t end, bool is_match)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 32;
		struct segment *d = reallocarray(s->data, cap, sizeof(*d));

		if (!d)
			return -ENOMEM;
		s->data = d;
		s->cap = cap;
	}
	s->data[s->n++] = (struct segment){.start = start, .end = end, .is_match = is_match};
	return 0;
}

static int match_at(const pcre2_code *re, const char *s, size_t len, size_t pos, pcre2_match_data *md)
{
	int rc = pcre2_match(re, (PCRE2_SPTR)s, len, pos, PCRE2_NO_UTF_CHECK, md, NULL);

	if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
		rc = pcre2_match(re, (PCRE2_SPTR)s, len, pos, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md, NULL);
	return rc;
}

/* The pattern's matches and the stretches between them, in order (HF Pattern::find_matches). */
static int find_matches(const pcre2_code *re, const char *s, size_t len, pcre2_match_data *md,
			struct segments *out)
{
	size_t pos = 0, prev = 0;
	int r;

	out->n = 0;
	while (pos <= len) {
		int rc = match_at(re, s, len, pos, md);
		PCRE2_SIZE *ov;
		size_t start, end;

		if (rc == PCRE2_ERROR_NOMATCH)
			break;
		if (rc < 0)
			return -EIO;
		ov = pcre2_get_ovector_pointer(md);
		start = ov[0];
		end = ov[1];
		if (start > prev) {
			r = segments_add(out, prev, start, false);
			if (r < 0)
				return r;
		}
		r = segments_add(out, start, end, true);
		if (r < 0)
			return r;
		prev = end;
		if (end > start) {
			pos = end;
		} else {
			/* An empty match: step over one character so the search moves on. */
			uint32_t cp;
			size_t k = end < len ? utf8_decode((const uint8_t *)s + end, len - end, &cp) : 1;

			pos = end + (k ? k : 1);
		}
	}
	if (prev < len)
		return segments_add(out, prev, len, false);
	return 0;
}

/* Turns matches into pieces according to the split behavior (HF SplitDelimiterBehavior). */
static int apply_behavior(enum split_behavior behavior, struct segments *m)
{
	size_t n = 0;
	bool previous_match = false;

	switch (behavior) {
	case SPLIT_ISOLATED:
		return 0;
	case SPLIT_REMOVED:
		for (size_t i = 0; i < m->n; i++) {
			if (!m->data[i].is_match)
				m->data[n++] = m->data[i];
		}
		break;
	case SPLIT_MERGED_WITH_PREVIOUS:
		for (size_t i = 0; i < m->n; i++) {
			struct segment seg = m->data[i];

			if (seg.is_match && !previous_match && n > 0)
				m->data[n - 1].end = seg.end;
			else
				m->data[n++] = seg;
			previous_match = seg.is_match;
		}
		break;
	case SPLIT_MERGED_WITH_NEXT:
		/* Mirror image of MergedWithPrevious, walking from the end. */
		n = m->n;
		for (size_t i = m->n; i-- > 0;) {
			struct segment seg = m->data[i];

			if (seg.is_match && !previous_match && n < m->n)
				m->data[n].start = seg.start;
			else
				m->data[--n] = seg;
			previous_match = seg.is_match;
		}
		memmove(m->data, m->data + n, (m->n - n) * sizeof(*m->data));
		n = m->n - n;
		break;
	case SPLIT_CONTIGUOUS:
		for (size_t i = 0; i < m->n; i++) {
			struct segment seg = m->data[i];

			if (seg.is_match == previous_match && n > 0)
				m->data[n - 1].end = seg.end;
			else
				m->data[n++] = seg;
			previous_match = seg.is_match;
		}
		break;
	}
	m->n = n;
	return 0;
}

static int split_piece(const struct step *st, const char *s, size_t len, pcre2_match_data *md,
		       struct segments *segs, struct tok_pieces *out)
{
	int r = find_matches(st->re, s, len, md, segs);

	if (r < 0)
		return r;
	if (st->invert) {
		for (size_t i = 0; i < segs->n; i++)
			segs->data[i].is_match = !segs->data[i].is_match;
	}
	apply_behavior(st->behavior, segs);
	for (size_t i = 0; i < segs->n; i++) {
		r = tok_pieces_add(out, s + segs->data[i].start, segs->data[i].end - segs->data[i].start);
		if (r < 0)
			return r;
	}
	return 0;
}

static int bytelevel_piece(const struct tok_pretok *p, const struct step *st, const char *s, size_t len,
			   pcre2_match_data *md, struct segments *segs, struct tok_buf *tmp,
			   struct tok_pieces *out)
{
	int r;

	tmp->len = 0;
	if (st->add_prefix_space && s[0] != ' ') {
		r = tok_buf_append(tmp, " ", 1);
		if (r < 0)
			return r;
	}
	r = tok_buf_append(tmp, s, len);
	if (r < 0)
		return r;
	segs->n = 0;
	if (st->re) {
		r = find_matches(st->re, tmp->data, tmp->len, md, segs);
		if (r < 0)
			return r;
	} else {
		r = segments_add(segs, 0, tmp->len, false);
		if (r < 0)
			return r;
	}
	for (size_t i = 0; i < segs->n; i++) {
		size_t off = out->buf.len, n = segs->data[i].end - segs->data[i].start;

		if (!n)
			continue;
		/* Map straight into the output buffer and record the span. */
		r = tok_bytelevel_map(p->bl, &out->buf, tmp->data + segs->data[i].start, n);
		if (r < 0)
			return r;
		if (out->n == out->cap) {
			size_t cap = out->cap ? out->cap * 2 : 32;
			struct tok_span *sp = reallocarray(out->spans, cap, sizeof(*sp));

			if (!sp)
				return -ENOMEM;
			out->spans = sp;
			out->cap = cap;
		}
		out->spans[out->n++] = (struct tok_span){.off = off, .len = out->buf.len - off};
	}
	return 0;
}

int tok_pretok_run(const struct tok_pretok *p, const char *text, size_t len, struct tok_pieces *out,
		   struct tok_pieces *scratch)
{
	struct tok_pieces *cur = out, *next = scratch, tmp_pieces;
	struct segments segs = {0};
	struct tok_buf tmp = {0};
	pcre2_match_data *md = NULL;
	int r;

	tok_pieces_clear(out);
	r = tok_pieces_add(out, text, len);
	if (r < 0 || p->n == 0)
		return r;
	md = pcre2_match_data_create(1, NULL);
	if (!md)
		return -ENOMEM;
	for (size_t k = 0; k < p->n; k++) {
		const struct step *st = &p->steps[k];

		tok_pieces_clear(next);
		for (size_t i = 0; i < cur->n; i++) {
			const char *s = cur->buf.data + cur->spans[i].off;
			size_t n = cur->spans[i].len;

			if (st->kind == STEP_SPLIT)
				r = split_piece(st, s, n, md, &segs, next);
			else
				r = bytelevel_piece(p, st, s, n, md, &segs, &tmp, next);
			if (r < 0)
				goto finish;
		}
		tmp_pieces = *cur;
		*cur = *next;
		*next = tmp_pieces;
	}
	r = 0;
finish:
	pcre2_match_data_free(md);
	free(segs.data);
	tok_buf_finish(&tmp);
	return r;
}
