/* Tokenizer helpers: growable buffers, a string hash map, UTF-8 and the GPT-2 byte mapping.
 * Contracts are in tokenizer_internal.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "tokenizer_internal.h"

/* ---- buffers ------------------------------------------------------------------------------ */

static int grow(void **data, size_t *cap, size_t need, size_t elem)
{
	size_t ncap = *cap ? *cap : 16, bytes;
	void *p;

	if (need <= *cap)
		return 0;
	while (ncap < need) {
		if (!size_mul_ok(ncap, 2, &ncap))
			return -ENOMEM;
	}
	if (!size_mul_ok(ncap, elem, &bytes))
		return -ENOMEM;
	p = realloc(*data, bytes);
	if (!p)
		return -ENOMEM;
	/* Zero the spare capacity: PCRE2's JIT reads ahead of a subject's end in whole vectors (it
	 * masks what it finds there), and under valgrind uninitialised bytes would make every match
	 * look like an error. Growth is geometric, so this costs O(1) per byte amortised. */
	memset((char *)p + *cap * elem, 0, bytes - *cap * elem);
	*data = p;
	*cap = ncap;
	return 0;
}

int tok_buf_reserve(struct tok_buf *b, size_t extra)
{
	size_t need;

	/* +1 keeps room for a terminating NUL that callers may add without another check. */
	if (!size_add_ok(b->len, extra, &need) || !size_add_ok(need, 1, &need))
		return -ENOMEM;
	return grow((void **)&b->data, &b->cap, need, 1);
}

int tok_buf_append(struct tok_buf *b, const void *data, size_t n)
{
	int r = tok_buf_reserve(b, n);

	if (r < 0)
		return r;
	if (n)
		memcpy(b->data + b->len, data, n);
	b->len += n;
	return 0;
}

void tok_buf_finish(struct tok_buf *b)
{
	free(b->data);
	*b = (struct tok_buf){0};
}

int tok_ids_push(struct tok_ids *v, int32_t id)
{
	int r = grow((void **)&v->data, &v->cap, v->len + 1, sizeof(*v->data));

	if (r < 0)
		return r;
	v->data[v->len++] = id;
	return 0;
}

int tok_ids_append(struct tok_ids *v, const int32_t *ids, size_t n)
{
	size_t need;
	int r;

	if (!size_add_ok(v->len, n, &need))
		return -ENOMEM;
	r = grow((void **)&v->data, &v->cap, need, sizeof(*v->data));
	if (r < 0)
		return r;
	if (n)
		memcpy(v->data + v->len, ids, n * sizeof(*ids));
	v->len += n;
	return 0;
}

void tok_ids_finish(struct tok_ids *v)
{
	free(v->data);
	*v = (struct tok_ids){0};
}

int tok_pieces_add(struct tok_pieces *p, const char *data, size_t len)
{
	size_t off = p->buf.len;
	int r;

	if (!len)
		return 0;
	r = grow((void **)&p->spans, &p->cap, p->n + 1, sizeof(*p->spans));
	if (r < 0)
		return r;
	r = tok_buf_append(&p->buf, data, len);
	if (r < 0)
		return r;
	p->spans[p->n++] = (struct tok_span){.off = off, .len = len};
	return 0;
}

void tok_pieces_clear(struct tok_pieces *p)
{
	p->buf.len = 0;
	p->n = 0;
}

void tok_pieces_finish(struct tok_pieces *p)
{
	tok_buf_finish(&p->buf);
	free(p->spans);
	*p = (struct tok_pieces){0};
}

/* ---- hash map ----------------------------------------------------------------------------- */

uint64_t tok_hash_bytes(const void *data, size_t len)
{
	const uint8_t *s = data;
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < len; i++) {
		h ^= s[i];
		h *= 0x100000001b3ull;
	}
	return h ^ (h >> 29);
}

int tok_strmap_init(struct tok_strmap *m, size_t expected)
{
	size_t cap = 16;

	/* Load factor <= 1/2 keeps probe sequences short. */
	while (cap < expected * 2) {
		if (!size_mul_ok(cap, 2, &cap))
			return -ENOMEM;
	}
	m->slots = calloc(cap, sizeof(*m->slots));
	if (!m->slots)
		return -ENOMEM;
	m->cap = cap;
	m->n = 0;
	return 0;
}

void tok_strmap_finish(struct tok_strmap *m)
{
	free(m->slots);
	*m = (struct tok_strmap){0};
}

static struct tok_strmap_slot *strmap_find(const struct tok_strmap *m, const char *key, size_t len,
					   uint32_t hash)
{
	size_t mask = m->cap - 1;

	for (size_t i = hash & mask;; i = (i + 1) & mask) {
		struct tok_strmap_slot *s = &m->slots[i];

		if (!s->key || (s->hash == hash && s->len == len && memcmp(s->key, key, len) == 0))
			return s;
	}
}

static int strmap_rehash(struct tok_strmap *m)
{
	struct tok_strmap n = {0};
	int r = tok_strmap_init(&n, m->cap);

	if (r < 0)
		return r;
	for (size_t i = 0; i < m->cap; i++) {
		if (m->slots[i].key)
			*strmap_find(&n, m->slots[i].key, m->slots[i].len, m->slots[i].hash) = m->slots[i];
	}
	n.n = m->n;
	free(m->slots);
	*m = n;
	return 0;
}

int tok_strmap_put(struct tok_strmap *m, const char *key, size_t len, int32_t value)
{
	uint32_t hash = (uint32_t)tok_hash_bytes(key, len);
	struct tok_strmap_slot *s;

	if ((m->n + 1) * 2 > m->cap) {
		int r = strmap_rehash(m);

		if (r < 0)
			return r;
	}
	s = strmap_find(m, key, len, hash);
	if (!s->key)
		m->n++;
	*s = (struct tok_strmap_slot){.key = key, .len = (uint32_t)len, .hash = hash, .value = value};
	return 0;
}

int32_t tok_strmap_get(const struct tok_strmap *m, const char *key, size_t len)
{
	const struct tok_strmap_slot *s;

	if (!m->cap)
		return -1;
	s = strmap_find(m, key, len, (uint32_t)tok_hash_bytes(key, len));
	return s->key ? s->value : -1;
}

/* ---- UTF-8 -------------------------------------------------------------------------------- */

int tok_utf8_lossy_append(struct tok_buf *out, const uint8_t *s, size_t len, bool keep_tail, size_t *ret_tail)
{
	size_t i = 0, run = 0, tail = 0;
	uint32_t cp;
	int r;

	/* An empty input may come as (NULL, 0), and NULL + 0 is undefined in C. */
	if (len == 0) {
		if (ret_tail)
			*ret_tail = 0;
		return 0;
	}
	while (i < len) {
		size_t n = s[i] < 0x80 ? 1 : utf8_decode(s + i, len - i, &cp), bad;

		if (n) {
			i += n;
			continue;
		}
		r = tok_buf_append(out, s + run, i - run);
		if (r < 0)
			return r;
		bad = utf8_invalid_prefix(s + i, len - i);
		if (!bad) {
			/* Incomplete at the very end. */
			if (keep_tail) {
				tail = len - i;
				run = i = len;
				break;
			}
			bad = len - i;
		}
		r = tok_buf_append(out, UTF8_REPLACEMENT, 3);
		if (r < 0)
			return r;
		i += bad;
		run = i;
	}
	r = tok_buf_append(out, s + run, i - run);
	if (r < 0)
		return r;
	if (ret_tail)
		*ret_tail = tail;
	return 0;
}

bool tok_is_whitespace(uint32_t cp)
{
	return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
	       (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
	       cp == 0x205F || cp == 0x3000;
}

/* ---- byte-level mapping ------------------------------------------------------------------ */

void tok_bytelevel_init(struct tok_bytelevel *bl)
{
	uint32_t next = 256;

	for (size_t i = 0; i < ARRAY_SIZE(bl->byte_of); i++)
		bl->byte_of[i] = -1;
	for (uint32_t b = 0; b < 256; b++) {
		bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
		uint32_t cp = printable ? b : next++;
		char tmp[UTF8_MAX_SEQ];
		size_t n = utf8_encode(cp, tmp);

		memcpy(bl->utf8[b], tmp, n);
		bl->utf8_len[b] = (uint8_t)n;
		bl->byte_of[cp] = (int16_t)b;
	}
}

int tok_bytelevel_map(const struct tok_bytelevel *bl, struct tok_buf *out, const char *s, size_t len)
{
	size_t need;
	int r;

	if (!size_mul_ok(len, 2, &need))
		return -ENOMEM;
	r = tok_buf_reserve(out, need);
	if (r < 0)
		return r;
	for (size_t i = 0; i < len; i++) {
		uint8_t b = (uint8_t)s[i];

		out->data[out->len] = bl->utf8[b][0];
		if (bl->utf8_len[b] == 2)
			out->data[out->len + 1] = bl->utf8[b][1];
		out->len += bl->utf8_len[b];
	}
	return 0;
}

size_t tok_bytelevel_unmap(const struct tok_bytelevel *bl, const char *s, size_t len, uint8_t *out)
{
	const uint8_t *u = (const uint8_t *)s;
	size_t i = 0, n = 0;

	while (i < len) {
		uint32_t cp;
		size_t k = utf8_decode(u + i, len - i, &cp);

		if (!k || cp >= ARRAY_SIZE(bl->byte_of) || bl->byte_of[cp] < 0) {
			memcpy(out, s, len);
			return len;
		}
		out[n++] = (uint8_t)bl->byte_of[cp];
		i += k;
	}
	return n;
}
