/* The BPE model: turns one pre-tokenized word into ids.
 *
 * Merging follows HF tokenizers' Word::merge_all exactly: a min-heap of candidate merges keyed by
 * (rank, position) over a doubly linked list of symbols. Each merge is O(log n), so long words
 * (a 100 kB run of letters) cost O(n log n) instead of rescanning every pair after each merge.
 * Stale heap entries (a neighbour already merged away) are recognised and dropped on pop, as HF
 * does, which keeps the results identical including ties.
 *
 * DESIGN (threads): everything but the word cache is read-only after load. The cache is a
 * direct-mapped table of recently seen words behind one mutex, held only to look up or swap a
 * slot; entries are built and freed outside the lock.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "tokenizer_internal.h"

/* Words up to this many bytes are cached (longer ones are rare and would evict many short ones). */
#define BPE_CACHE_MAX_WORD 128
#define BPE_CACHE_SLOTS 8192

struct tok_bpe_symbol {
	int32_t id;
	int32_t prev, next; /* -1 at the ends */
	uint32_t len;	    /* bytes of the word covered; 0 once merged into the left neighbour */
};

struct tok_bpe_heap_entry {
	uint32_t rank;
	uint32_t pos;
	int32_t new_id;
};

struct cache_entry {
	uint64_t hash;
	uint32_t key_len, n_ids;
	int32_t *ids; /* points into the same allocation, after the key */
	char key[];
};

struct tok_bpe_cache {
	pthread_mutex_t lock;
	struct cache_entry *slots[BPE_CACHE_SLOTS];
};

/* ---- merge table --------------------------------------------------------------------------- */

static inline uint64_t pair_key(int32_t left, int32_t right)
{
	return ((uint64_t)(uint32_t)left << 32) | (uint32_t)right;
}

static inline size_t pair_hash(uint64_t key)
{
	key ^= key >> 31;
	key *= 0x9E3779B97F4A7C15ull;
	return (size_t)(key ^ (key >> 29));
}

static struct tok_bpe_merge_slot *merge_find(struct tok_bpe_merge_slot *slots, size_t cap, uint64_t key)
{
	size_t mask = cap - 1;

	for (size_t i = pair_hash(key) & mask;; i = (i + 1) & mask) {
		if (slots[i].key == key || slots[i].key == UINT64_MAX)
			return &slots[i];
	}
}

static const struct tok_bpe_merge_slot *merge_get(const struct tok_bpe *bpe, int32_t left, int32_t right)
{
	const struct tok_bpe_merge_slot *s;

	if (!bpe->merges_cap)
		return NULL;
	s = merge_find(bpe->merges, bpe->merges_cap, pair_key(left, right));
	return s->key == UINT64_MAX ? NULL : s;
}

static int merges_alloc(struct tok_bpe_merge_slot **ret, size_t *ret_cap, size_t expected)
{
	size_t cap = 16;
	struct tok_bpe_merge_slot *slots;

	while (cap < expected * 2) {
		if (!size_mul_ok(cap, 2, &cap))
			return -ENOMEM;
	}
	slots = malloc(cap * sizeof(*slots));
	if (!slots)
		return -ENOMEM;
	for (size_t i = 0; i < cap; i++)
		slots[i].key = UINT64_MAX;
	*ret = slots;
	*ret_cap = cap;
	return 0;
}

int tok_bpe_add_merge(struct tok_bpe *bpe, int32_t left, int32_t right, uint32_t rank, int32_t new_id)
{
	uint64_t key = pair_key(left, right);
	struct tok_bpe_merge_slot *s;

	if ((bpe->n_merges + 1) * 2 > bpe->merges_cap) {
		struct tok_bpe_merge_slot *slots;
		size_t cap;
		int r = merges_alloc(&slots, &cap, bpe->merges_cap ? bpe->merges_cap : 8);

		if (r < 0)
			return r;
		for (size_t i = 0; i < bpe->merges_cap; i++) {
			if (bpe->merges[i].key != UINT64_MAX)
				*merge_find(slots, cap, bpe->merges[i].key) = bpe->merges[i];
		}
		free(bpe->merges);
		bpe->merges = slots;
		bpe->merges_cap = cap;
	}
	s = merge_find(bpe->merges, bpe->merges_cap, key);
	if (s->key == UINT64_MAX)
		bpe->n_merges++;
	*s = (struct tok_bpe_merge_slot){.key = key, .rank = rank, .new_id = new_id};
	return 0;
}

/* ---- lifecycle ----------------------------------------------------------------------------- */

int tok_bpe_init(struct tok_bpe *bpe, size_t vocab_expected, size_t merges_expected)
{
	int r;

	*bpe = (struct tok_bpe){.unk_id = -1};
	r = tok_strmap_init(&bpe->vocab, vocab_expected);
	if (r < 0)
		goto fail;
	r = merges_alloc(&bpe->merges, &bpe->merges_cap, merges_expected);
	if (r < 0)
		goto fail;
	bpe->cache = calloc(1, sizeof(*bpe->cache));
	if (!bpe->cache) {
		r = -ENOMEM;
		goto fail;
	}
	r = -pthread_mutex_init(&bpe->cache->lock, NULL);
	if (r < 0) {
		free(bpe->cache);
		bpe->cache = NULL;
		goto fail;
	}
	return 0;
fail:
	tok_bpe_finish(bpe);
	return r;
}

void tok_bpe_finish(struct tok_bpe *bpe)
{
	if (bpe->cache) {
		for (size_t i = 0; i < BPE_CACHE_SLOTS; i++)
			free(bpe->cache->slots[i]);
		pthread_mutex_destroy(&bpe->cache->lock);
		free(bpe->cache);
	}
	tok_strmap_finish(&bpe->vocab);
	free(bpe->merges);
	*bpe = (struct tok_bpe){.unk_id = -1};
}

void tok_bpe_scratch_finish(struct tok_bpe_scratch *s)
{
	free(s->symbols);
	free(s->heap);
	*s = (struct tok_bpe_scratch){0};
}

/* ---- cache ---------------------------------------------------------------------------------- */

static bool cache_lookup(struct tok_bpe_cache *c, const char *word, size_t len, uint64_t hash,
			 struct tok_ids *out, int *ret)
{
	struct cache_entry *e;
	bool hit = false;

	pthread_mutex_lock(&c->lock);
	e = c->slots[hash % BPE_CACHE_SLOTS];
	if (e && e->hash == hash && e->key_len == len && memcmp(e->key, word, len) == 0) {
		*ret = tok_ids_append(out, e->ids, e->n_ids);
		hit = true;
	}
	pthread_mutex_unlock(&c->lock);
	return hit;
}

static void cache_store(struct tok_bpe_cache *c, const char *word, size_t len, uint64_t hash,
			const int32_t *ids, size_t n)
{
	size_t key_bytes = (len + sizeof(int32_t) - 1) / sizeof(int32_t) * sizeof(int32_t);
	struct cache_entry *e = malloc(sizeof(*e) + key_bytes + n * sizeof(int32_t)), *old;

	/* The cache is an optimisation: without memory the word is simply not cached. */
	if (!e)
		return;
	e->hash = hash;
	e->key_len = (uint32_t)len;
	e->n_ids = (uint32_t)n;
	memcpy(e->key, word, len);
	e->ids = (int32_t *)(void *)(e->key + key_bytes);
	memcpy(e->ids, ids, n * sizeof(int32_t));

	pthread_mutex_lock(&c->lock);
	old = c->slots[hash % BPE_CACHE_SLOTS];
	c->slots[hash % BPE_CACHE_SLOTS] = e;
	pthread_mutex_unlock(&c->lock);
	free(old);
}

/* ---- merging -------------------------------------------------------------------------------- */

static inline bool heap_less(const struct tok_bpe_heap_entry *a, const struct tok_bpe_heap_entry *b)
{
	return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static int heap_push(struct tok_bpe_scratch *s, size_t *n, struct tok_bpe_heap_entry e)
{
	size_t i;

	if (*n == s->heap_cap) {
		size_t cap = s->heap_cap ? s->heap_cap * 2 : 64;
		struct tok_bpe_heap_entry *h = reallocarray(s->heap, cap, sizeof(*h));

		if (!h)
			return -ENOMEM;
		s->heap = h;
		s->heap_cap = cap;
	}
	i = (*n)++;
	while (i > 0) {
		size_t parent = (i - 1) / 2;

		if (!heap_less(&e, &s->heap[parent]))
			break;
		s->heap[i] = s->heap[parent];
		i = parent;
	}
	s->heap[i] = e;
	return 0;
}

static struct tok_bpe_heap_entry heap_pop(struct tok_bpe_scratch *s, size_t *n)
{
	struct tok_bpe_heap_entry top = s->heap[0], last = s->heap[--(*n)];
	size_t i = 0;

	for (;;) {
		size_t child = 2 * i + 1;

		if (child >= *n)
			break;
		if (child + 1 < *n && heap_less(&s->heap[child + 1], &s->heap[child]))
			child++;
		if (!heap_less(&s->heap[child], &last))
			break;
		s->heap[i] = s->heap[child];
		i = child;
	}
	if (*n)
		s->heap[i] = last;
	return top;
}

static int push_candidate(const struct tok_bpe *bpe, struct tok_bpe_scratch *s, size_t *n, size_t pos)
{
	const struct tok_bpe_symbol *sym = s->symbols;
	const struct tok_bpe_merge_slot *m;

	if (sym[pos].next < 0)
		return 0;
	m = merge_get(bpe, sym[pos].id, sym[sym[pos].next].id);
	if (!m)
		return 0;
	return heap_push(s, n,
			 (struct tok_bpe_heap_entry){.rank = m->rank,
						     .pos = (uint32_t)pos,
						     .new_id = m->new_id});
}

static int merge_all(const struct tok_bpe *bpe, struct tok_bpe_scratch *s, size_t n_sym)
{
	struct tok_bpe_symbol *sym = s->symbols;
	size_t n_heap = 0;
	int r;

	for (size_t i = 0; i + 1 < n_sym; i++) {
		r = push_candidate(bpe, s, &n_heap, i);
		if (r < 0)
			return r;
	}
	while (n_heap) {
		struct tok_bpe_heap_entry top = heap_pop(s, &n_heap);
		const struct tok_bpe_merge_slot *m;
		struct tok_bpe_symbol *cur = &s->symbols[top.pos], right;

		sym = s->symbols;
		if (cur->len == 0 || cur->next < 0)
			continue;
		right = sym[cur->next];
		/* Expired entry: the pair at this position changed since it was queued. */
		m = merge_get(bpe, cur->id, right.id);
		if (!m || m->new_id != top.new_id)
			continue;
		sym[cur->next].len = 0;
		cur->id = top.new_id;
		cur->len += right.len;
		cur->next = right.next;
		if (right.next >= 0)
			sym[right.next].prev = (int32_t)top.pos;
		if (cur->prev >= 0) {
			r = push_candidate(bpe, s, &n_heap, (size_t)cur->prev);
			if (r < 0)
				return r;
		}
		r = push_candidate(bpe, s, &n_heap, top.pos);
		if (r < 0)
			return r;
	}
	return 0;
}

static int add_symbol(struct tok_bpe_scratch *s, size_t *n, int32_t id, size_t len)
{
	if (*n == s->symbols_cap) {
		size_t cap = s->symbols_cap ? s->symbols_cap * 2 : 64;
		struct tok_bpe_symbol *p = reallocarray(s->symbols, cap, sizeof(*p));

		if (!p)
			return -ENOMEM;
		s->symbols = p;
		s->symbols_cap = cap;
	}
	s->symbols[*n] =
		(struct tok_bpe_symbol){.id = id, .prev = (int32_t)*n - 1, .next = -1, .len = (uint32_t)len};
	if (*n > 0)
		s->symbols[*n - 1].next = (int32_t)*n;
	(*n)++;
	return 0;
}

/* Byte fallback: the <0xXX> tokens spelling one character, if all of them exist. */
static int add_byte_fallback(const struct tok_bpe *bpe, struct tok_bpe_scratch *s, size_t *n, const char *c,
			     size_t len, bool *ret_done)
{
	int32_t ids[4];
	int r;

	*ret_done = false;
	for (size_t i = 0; i < len; i++) {
		char name[8];

		snprintf(name, sizeof(name), "<0x%02X>", (unsigned)(uint8_t)c[i]);
		ids[i] = tok_strmap_get(&bpe->vocab, name, 6);
		if (ids[i] < 0)
			return 0;
	}
	for (size_t i = 0; i < len; i++) {
		r = add_symbol(s, n, ids[i], 1);
		if (r < 0)
			return r;
	}
	*ret_done = true;
	return 0;
}

int tok_bpe_word(const struct tok_bpe *bpe, const char *word, size_t len, struct tok_ids *out,
		 struct tok_bpe_scratch *s)
{
	size_t n_sym = 0, start = out->len, unk_len = 0;
	bool unk_pending = false, cacheable = bpe->cache && len <= BPE_CACHE_MAX_WORD;
	uint64_t hash = 0;
	int r = 0;

	if (!len)
		return 0;
	if (bpe->ignore_merges) {
		int32_t id = tok_strmap_get(&bpe->vocab, word, len);

		if (id >= 0)
			return tok_ids_push(out, id);
	}
	if (cacheable) {
		hash = tok_hash_bytes(word, len);
		if (cache_lookup(bpe->cache, word, len, hash, out, &r))
			return r;
	}

	for (size_t i = 0; i < len;) {
		uint32_t cp;
		size_t k = utf8_decode((const uint8_t *)word + i, len - i, &cp);
		int32_t id;

		if (!k)
			k = 1; /* not reached for valid UTF-8 input; keeps the loop finite */
		id = tok_strmap_get(&bpe->vocab, word + i, k);
		if (id >= 0) {
			if (unk_pending) {
				r = add_symbol(s, &n_sym, bpe->unk_id, unk_len);
				if (r < 0)
					return r;
				unk_pending = false;
			}
			r = add_symbol(s, &n_sym, id, k);
			if (r < 0)
				return r;
		} else {
			bool done = false;

			if (bpe->byte_fallback) {
				/* A pending <unk> stays pending across byte-fallback tokens and lands
				 * after them: HF's merge_word does exactly this, and ids must match. */
				r = add_byte_fallback(bpe, s, &n_sym, word + i, k, &done);
				if (r < 0)
					return r;
			}
			if (!done && bpe->unk_id >= 0) {
				if (unk_pending && bpe->fuse_unk) {
					unk_len += k;
				} else {
					if (unk_pending) {
						r = add_symbol(s, &n_sym, bpe->unk_id, unk_len);
						if (r < 0)
							return r;
					}
					unk_pending = true;
					unk_len = k;
				}
			}
			/* Neither byte fallback nor an unk token: HF drops the character. */
		}
		i += k;
	}
	if (unk_pending) {
		r = add_symbol(s, &n_sym, bpe->unk_id, unk_len);
		if (r < 0)
			return r;
	}

	r = merge_all(bpe, s, n_sym);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n_sym; i++) {
		if (s->symbols[i].len) {
			r = tok_ids_push(out, s->symbols[i].id);
			if (r < 0)
				return r;
		}
	}
	/* A word whose characters were all dropped (no unk token) yields no ids and is not cached. */
	if (cacheable && out->len > start)
		cache_store(bpe->cache, word, len, hash, out->data + start, out->len - start);
	return 0;
}
