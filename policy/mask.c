/* Token masks: which vocabulary ids keep the output a valid prefix of a step.
 *
 * The vocabulary's token byte strings are put in a trie once. A mask is one depth-first walk of
 * that trie carrying a copy of the matcher: a subtree is skipped as soon as the automaton
 * rejects its first byte, so the walk costs what the allowed tokens cost, and tokens sharing a
 * prefix share its steps. Masks are cached by the matcher's state with the string byte budget
 * clamped: once a string has more room left than any token can use, the remaining budget cannot
 * change which tokens are allowed, so all the states inside a long string share one mask.
 *
 * Plain string content is where a walk would visit nearly the whole trie, so it has a fast
 * path: tokens that are plain text (complete UTF-8, no quote, backslash or control byte) are
 * allowed by any string state outside an escape or a character that has room for them, so
 * their bits are precomputed and only the other tokens (a second, small trie) are walked.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "policy-internal.h"

#define VT_NONE UINT32_MAX

struct vtrie_node {
	uint32_t first_child;
	uint32_t next_sibling;
	int32_t token; /* first id whose bytes end here, or -1; more in same_next[] */
	uint8_t byte;
};

struct cache_key {
	uint32_t node, sub, val, len;
	uint16_t count;
	uint8_t esc, utf8;
};

struct cache_slot {
	struct cache_key key;
	int32_t entry; /* index into masks, -1 when empty */
};

#define CACHE_SLOTS (2 * POLICY_MASK_CACHE_ENTRIES)

struct policy_masker {
	const struct policy_grammar *g;
	size_t n_tokens, n_words;
	const uint8_t **bytes; /* per id, NULL when never allowed */
	uint32_t *lens;
	uint8_t *owned;		    /* the bytes of a raw vocabulary */
	int32_t *same_next;	    /* ids with the same bytes, chained (in the trie of all tokens) */
	int32_t *same_next_special; /* the same in the trie of tokens that are not plain */
	int32_t *stops;
	size_t n_stops;
	uint8_t *is_stop; /* per id */

	struct vtrie_node *trie;
	size_t n_trie, cap_trie;
	uint32_t root_all, root_special; /* every token; the tokens that are not plain text */
	uint32_t max_token_len;
	uint32_t *plain_bits;
	int plain_count;

	struct frame {
		uint32_t node, child;
		struct policy_matcher m;
	} * stack;

	struct cache_slot slots[CACHE_SLOTS];
	uint32_t *masks;   /* POLICY_MASK_CACHE_ENTRIES x n_words */
	uint32_t *scratch; /* the mask of an uncached state */
	int32_t *counts;
	size_t n_entries;
	uint64_t hits, misses;
};

static uint32_t vtrie_new(struct policy_masker *mk, uint8_t byte)
{
	if (mk->n_trie == mk->cap_trie) {
		mk->cap_trie = mk->cap_trie ? 2 * mk->cap_trie : 4096;
		mk->trie = xreallocarray(mk->trie, mk->cap_trie, sizeof(*mk->trie));
	}
	mk->trie[mk->n_trie] = (struct vtrie_node){VT_NONE, VT_NONE, -1, byte};
	return (uint32_t)mk->n_trie++;
}

/* The root's children are found through this table while building (256 siblings otherwise). */
static void vtrie_insert(struct policy_masker *mk, uint32_t root, uint32_t *root_child, int32_t id,
			 int32_t *same_next)
{
	const uint8_t *p = mk->bytes[id];
	uint32_t len = mk->lens[id], cur;

	if (root_child[p[0]] == VT_NONE) {
		root_child[p[0]] = vtrie_new(mk, p[0]);
		mk->trie[root_child[p[0]]].next_sibling = mk->trie[root].first_child;
		mk->trie[root].first_child = root_child[p[0]];
	}
	cur = root_child[p[0]];
	for (uint32_t i = 1; i < len; i++) {
		uint32_t child = mk->trie[cur].first_child;
		while (child != VT_NONE && mk->trie[child].byte != p[i])
			child = mk->trie[child].next_sibling;
		if (child == VT_NONE) {
			child = vtrie_new(mk, p[i]);
			mk->trie[child].next_sibling = mk->trie[cur].first_child;
			mk->trie[cur].first_child = child;
		}
		cur = child;
	}
	same_next[id] = mk->trie[cur].token;
	mk->trie[cur].token = id;
}

/* Plain text: complete UTF-8 characters, none of them a quote, a backslash or a control
 * character. Such a token is allowed wherever string content may continue for its length. */
static bool is_plain(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n;) {
		uint8_t b = p[i];
		size_t k;
		if (b < 0x80) {
			if (b < 0x20 || b == '"' || b == '\\')
				return false;
			i++;
			continue;
		}
		if (b >= 0xc2 && b <= 0xdf)
			k = 2;
		else if (b >= 0xe0 && b <= 0xef)
			k = 3;
		else if (b >= 0xf0 && b <= 0xf4)
			k = 4;
		else
			return false;
		if (i + k > n)
			return false;
		uint8_t lo = 0x80, hi = 0xbf;
		if (b == 0xe0)
			lo = 0xa0;
		else if (b == 0xed)
			hi = 0x9f;
		else if (b == 0xf0)
			lo = 0x90;
		else if (b == 0xf4)
			hi = 0x8f;
		if (p[i + 1] < lo || p[i + 1] > hi)
			return false;
		for (size_t j = 2; j < k; j++)
			if (p[i + j] < 0x80 || p[i + j] > 0xbf)
				return false;
		i += k;
	}
	return true;
}

void policy_masker_destroy(struct policy_masker *mk)
{
	if (!mk)
		return;
	free(mk->bytes);
	free(mk->lens);
	free(mk->owned);
	free(mk->same_next);
	free(mk->same_next_special);
	free(mk->plain_bits);
	free(mk->stops);
	free(mk->is_stop);
	free(mk->trie);
	free(mk->stack);
	free(mk->masks);
	free(mk->scratch);
	free(mk->counts);
	free(mk);
}

static void cache_clear(struct policy_masker *mk)
{
	for (size_t i = 0; i < CACHE_SLOTS; i++)
		mk->slots[i].entry = -1;
	mk->n_entries = 0;
}

/* Takes ownership of nothing: bytes/lens are filled by the caller after this. */
static struct policy_masker *masker_new(const struct policy_grammar *g, size_t n_tokens,
					const int32_t *stop_ids, size_t n_stop)
{
	size_t words = (n_tokens + 31) / 32, mask_bytes;
	if (!g || n_tokens == 0 || n_tokens > ENGINE_TOKENIZER_MAX_VOCAB || (n_stop && !stop_ids)) {
		errno = EINVAL;
		return NULL;
	}
	for (size_t i = 0; i < n_stop; i++)
		if (stop_ids[i] < 0 || (size_t)stop_ids[i] >= n_tokens) {
			errno = EINVAL;
			return NULL;
		}
	struct policy_masker *mk = calloc(1, sizeof(*mk));
	if (!mk)
		goto oom;
	mk->g = g;
	mk->n_tokens = n_tokens;
	mk->n_words = words;
	mk->bytes = calloc(n_tokens, sizeof(*mk->bytes));
	mk->lens = calloc(n_tokens, sizeof(*mk->lens));
	mk->same_next = calloc(n_tokens, sizeof(*mk->same_next));
	mk->same_next_special = calloc(n_tokens, sizeof(*mk->same_next_special));
	mk->plain_bits = calloc(words, sizeof(*mk->plain_bits));
	mk->is_stop = calloc(n_tokens, 1);
	mk->stops = calloc(n_stop ? n_stop : 1, sizeof(*mk->stops));
	mk->counts = calloc(POLICY_MASK_CACHE_ENTRIES, sizeof(*mk->counts));
	mk->stack = calloc(POLICY_MASK_MAX_TOKEN_BYTES + 1, sizeof(*mk->stack));
	if (!size_mul_ok(words * sizeof(uint32_t), POLICY_MASK_CACHE_ENTRIES, &mask_bytes))
		goto oom;
	mk->masks = malloc(mask_bytes);
	mk->scratch = calloc(words, sizeof(*mk->scratch));
	if (!mk->scratch || !mk->bytes || !mk->lens || !mk->same_next || !mk->same_next_special ||
	    !mk->plain_bits || !mk->is_stop || !mk->stops || !mk->counts || !mk->stack || !mk->masks)
		goto oom;
	for (size_t i = 0; i < n_stop; i++) {
		mk->stops[i] = stop_ids[i];
		mk->is_stop[stop_ids[i]] = 1;
	}
	mk->n_stops = n_stop;
	cache_clear(mk);
	return mk;
oom:
	policy_masker_destroy(mk);
	errno = ENOMEM;
	return NULL;
}

static struct policy_masker *masker_finish(struct policy_masker *mk)
{
	uint32_t *all = malloc(256 * sizeof(*all)), *special = malloc(256 * sizeof(*special));
	if (!all || !special) {
		free(all);
		free(special);
		policy_masker_destroy(mk);
		errno = ENOMEM;
		return NULL;
	}
	for (int i = 0; i < 256; i++)
		all[i] = special[i] = VT_NONE;
	mk->root_all = vtrie_new(mk, 0);
	mk->root_special = vtrie_new(mk, 0);
	for (size_t id = 0; id < mk->n_tokens; id++) {
		if (mk->is_stop[id] || !mk->bytes[id] || mk->lens[id] == 0 ||
		    mk->lens[id] > POLICY_MASK_MAX_TOKEN_BYTES) {
			mk->bytes[id] = NULL;
			continue;
		}
		vtrie_insert(mk, mk->root_all, all, (int32_t)id, mk->same_next);
		if (is_plain(mk->bytes[id], mk->lens[id])) {
			mk->plain_bits[id / 32] |= 1u << (id % 32);
			mk->plain_count++;
		} else {
			vtrie_insert(mk, mk->root_special, special, (int32_t)id, mk->same_next_special);
		}
		mk->max_token_len = MAX(mk->max_token_len, mk->lens[id]);
	}
	free(all);
	free(special);
	return mk;
}

struct policy_masker *policy_masker_create(const struct policy_grammar *g, const struct engine_tokenizer *tok,
					   size_t n_logits, const int32_t *stop_ids, size_t n_stop)
{
	if (!tok) {
		errno = EINVAL;
		return NULL;
	}
	struct policy_masker *mk = masker_new(g, n_logits, stop_ids, n_stop);
	if (!mk)
		return NULL;
	size_t vocab = engine_tokenizer_vocab_size(tok);
	for (size_t id = 0; id < n_logits && id < vocab; id++) {
		const uint8_t *b;
		size_t len;
		if (engine_tokenizer_token_bytes(tok, (int32_t)id, &b, &len) < 0)
			continue;
		/* a special "</think>" is what closes a think block in such a vocabulary */
		if (engine_tokenizer_is_special(tok, (int32_t)id) &&
		    !(len == strlen(POLICY_THINK_CLOSE) && memcmp(b, POLICY_THINK_CLOSE, len) == 0))
			continue;
		mk->bytes[id] = b;
		mk->lens[id] = (uint32_t)MIN(len, (size_t)UINT32_MAX);
	}
	return masker_finish(mk);
}

struct policy_masker *policy_masker_create_raw(const struct policy_grammar *g, const uint8_t *const *bytes,
					       const size_t *lens, size_t n_tokens, const int32_t *stop_ids,
					       size_t n_stop)
{
	size_t total = 0, off = 0;
	if (!bytes || !lens) {
		errno = EINVAL;
		return NULL;
	}
	struct policy_masker *mk = masker_new(g, n_tokens, stop_ids, n_stop);
	if (!mk)
		return NULL;
	for (size_t i = 0; i < n_tokens; i++)
		if (bytes[i] && lens[i] <= POLICY_MASK_MAX_TOKEN_BYTES)
			total += lens[i];
	mk->owned = malloc(total ? total : 1);
	if (!mk->owned) {
		policy_masker_destroy(mk);
		errno = ENOMEM;
		return NULL;
	}
	for (size_t i = 0; i < n_tokens; i++) {
		if (!bytes[i] || lens[i] > POLICY_MASK_MAX_TOKEN_BYTES)
			continue;
		memcpy(mk->owned + off, bytes[i], lens[i]);
		mk->bytes[i] = mk->owned + off;
		mk->lens[i] = (uint32_t)lens[i];
		off += lens[i];
	}
	return masker_finish(mk);
}

size_t policy_masker_n_tokens(const struct policy_masker *mk)
{
	return mk->n_tokens;
}

void policy_masker_stats(const struct policy_masker *mk, uint64_t *ret_hits, uint64_t *ret_misses)
{
	*ret_hits = mk->hits;
	*ret_misses = mk->misses;
}

static struct cache_key key_of(const struct policy_masker *mk, const struct policy_matcher *m)
{
	struct cache_key k = {.node = m->node,
			      .sub = m->sub,
			      .val = m->val,
			      .count = m->count,
			      .esc = m->esc,
			      .utf8 = m->utf8};
	const struct gnode *n = &mk->g->nodes[m->node];
	if (n->kind == GNODE_STRING) {
		/* Within a token at most max_token_len bytes are read, and a unit (escape, UTF-8
		 * sequence, surrogate pair) needs at most 12 bytes of room: beyond that the
		 * budget is invisible. */
		uint32_t room = n->max - m->len, cap = mk->max_token_len + 16;
		k.len = MIN(room, cap);
	}
	return k;
}

static uint64_t key_hash(const struct cache_key *k)
{
	uint64_t h = 1469598103934665603ull;
	uint32_t parts[5] = {k->node, k->sub, k->val, k->len,
			     (uint32_t)k->count << 16 | (uint32_t)k->esc << 8 | k->utf8};
	for (int i = 0; i < 5; i++) {
		h ^= parts[i];
		h *= 1099511628211ull;
		h ^= h >> 29;
	}
	return h;
}

static bool key_eq(const struct cache_key *a, const struct cache_key *b)
{
	return a->node == b->node && a->sub == b->sub && a->val == b->val && a->len == b->len &&
	       a->count == b->count && a->esc == b->esc && a->utf8 == b->utf8;
}

/* Depth-first walk of the trie under `root`: sets the bit of every token the automaton
 * accepts from m (same_next chains the ids sharing bytes in that trie). Returns the count. */
static int walk_trie(struct policy_masker *mk, uint32_t root, const int32_t *same_next,
		     const struct policy_matcher *m, uint32_t *bits)
{
	int count = 0;
	size_t sp = 0;
	mk->stack[sp++] = (struct frame){.node = root, .child = mk->trie[root].first_child, .m = *m};
	while (sp > 0) {
		struct frame *f = &mk->stack[sp - 1];
		uint32_t c = f->child;
		if (c == VT_NONE) {
			sp--;
			continue;
		}
		const struct vtrie_node *cn = &mk->trie[c];
		f->child = cn->next_sibling;
		struct policy_matcher t = f->m;
		if (!policy_grammar_step(&t, cn->byte))
			continue;
		for (int32_t id = cn->token; id >= 0; id = same_next[id]) {
			bits[id / 32] |= 1u << (id % 32);
			count++;
		}
		if (cn->first_child != VT_NONE)
			mk->stack[sp++] = (struct frame){.node = c, .child = cn->first_child, .m = t};
	}
	return count;
}

static int walk(struct policy_masker *mk, const struct policy_matcher *m, uint32_t *bits)
{
	int count = 0;
	if (policy_matcher_is_complete(m)) {
		memset(bits, 0, mk->n_words * sizeof(*bits));
		for (size_t i = 0; i < mk->n_stops; i++) {
			uint32_t id = (uint32_t)mk->stops[i];
			if (!(bits[id / 32] & (1u << (id % 32))))
				count++;
			bits[id / 32] |= 1u << (id % 32);
		}
		return count;
	}
	const struct gnode *n = &mk->g->nodes[m->node];
	if (n->kind == GNODE_STRING && m->esc == 0 && m->utf8 == 0 && n->max - m->len >= mk->max_token_len) {
		memcpy(bits, mk->plain_bits, mk->n_words * sizeof(*bits));
		return mk->plain_count + walk_trie(mk, mk->root_special, mk->same_next_special, m, bits);
	}
	memset(bits, 0, mk->n_words * sizeof(*bits));
	return walk_trie(mk, mk->root_all, mk->same_next, m, bits);
}

/* The cached mask of m (valid until the next call). */
static int lookup(struct policy_masker *mk, const struct policy_matcher *m, const uint32_t **ret)
{
	if (!m || m->grammar != mk->g)
		return -EINVAL;
	/* Only string and think-block states are cached: their walks are the expensive ones
	 * (most of the vocabulary continues them), and they collapse to few keys (a think block
	 * has one per byte of "</think>" matched, closing or not, and UTF-8 state). Elsewhere a
	 * walk stops at the first byte of almost every token, and caching the many states of
	 * literal words and digits would only evict those masks. */
	if (mk->g->nodes[m->node].kind != GNODE_STRING && mk->g->nodes[m->node].kind != GNODE_THINK) {
		mk->misses++;
		*ret = mk->scratch;
		return walk(mk, m, mk->scratch);
	}
	struct cache_key k = key_of(mk, m);
	size_t slot = key_hash(&k) % CACHE_SLOTS;
	while (mk->slots[slot].entry >= 0) {
		if (key_eq(&mk->slots[slot].key, &k)) {
			mk->hits++;
			int32_t e = mk->slots[slot].entry;
			*ret = mk->masks + (size_t)e * mk->n_words;
			return mk->counts[e];
		}
		slot = (slot + 1) % CACHE_SLOTS;
	}
	mk->misses++;
	if (mk->n_entries == POLICY_MASK_CACHE_ENTRIES) {
		cache_clear(mk);
		slot = key_hash(&k) % CACHE_SLOTS;
	}
	int32_t e = (int32_t)mk->n_entries++;
	uint32_t *bits = mk->masks + (size_t)e * mk->n_words;
	mk->counts[e] = walk(mk, m, bits);
	mk->slots[slot].key = k;
	mk->slots[slot].entry = e;
	*ret = bits;
	return mk->counts[e];
}

int policy_masker_compute(struct policy_masker *mk, const struct policy_matcher *m, uint32_t *ret_bits)
{
	const uint32_t *bits;
	int n = lookup(mk, m, &bits);
	if (n < 0)
		return n;
	memcpy(ret_bits, bits, mk->n_words * sizeof(*bits));
	return n;
}

int policy_masker_apply(struct policy_masker *mk, const struct policy_matcher *m, float *logits)
{
	const uint32_t *bits;
	int n = lookup(mk, m, &bits);
	if (n < 0)
		return n;
	for (size_t w = 0; w < mk->n_words; w++) {
		uint32_t b = bits[w];
		size_t base = w * 32, end = MIN(base + 32, mk->n_tokens);
		if (b == UINT32_MAX)
			continue;
		if (b == 0) {
			for (size_t i = base; i < end; i++)
				logits[i] = -INFINITY;
			continue;
		}
		for (size_t i = base; i < end; i++)
			if (!(b & (1u << (i - base))))
				logits[i] = -INFINITY;
	}
	return n;
}

int policy_masker_feed(const struct policy_masker *mk, struct policy_matcher *m, int32_t id)
{
	if (!m || m->grammar != mk->g || id < 0 || (size_t)id >= mk->n_tokens)
		return -EINVAL;
	if (mk->is_stop[id])
		return policy_matcher_is_complete(m) ? 1 : -EILSEQ;
	if (!mk->bytes[id])
		return -EILSEQ;
	return policy_matcher_feed(m, mk->bytes[id], mk->lens[id]);
}

/* Whether a vocabulary token that starts with bytes[0..n) and is longer could follow matcher
 * state `after` (the state after those bytes): the trie node of the bytes has a child whose
 * byte the grammar takes there. */
static bool extends(const struct policy_masker *mk, const uint8_t *bytes, size_t n,
		    const struct policy_matcher *after)
{
	uint32_t cur = mk->root_all;
	for (size_t i = 0; i < n && cur != VT_NONE; i++) {
		uint32_t c = mk->trie[cur].first_child;
		while (c != VT_NONE && mk->trie[c].byte != bytes[i])
			c = mk->trie[c].next_sibling;
		cur = c;
	}
	if (cur == VT_NONE)
		return false;
	for (uint32_t c = mk->trie[cur].first_child; c != VT_NONE; c = mk->trie[c].next_sibling) {
		struct policy_matcher t = *after;
		if (policy_grammar_step(&t, mk->trie[c].byte))
			return true;
	}
	return false;
}

int policy_masker_forced(const struct policy_masker *mk, const struct engine_tokenizer *tok,
			 const struct policy_matcher *m, int32_t *ret_ids, size_t cap)
{
	uint8_t run[POLICY_MAX_FORCED_BYTES];
	int32_t *ids = NULL;
	size_t n_run, n_ids = 0, keep = 0;
	int r;

	if (!mk || !tok || !m || m->grammar != mk->g || (cap && !ret_ids))
		return -EINVAL;
	n_run = policy_matcher_forced(m, run, sizeof(run));
	if (n_run == 0 || cap == 0)
		return 0;
	r = engine_tokenizer_encode(tok, (const char *)run, n_run, false, &ids, &n_ids);
	if (r == -EILSEQ) /* a forced run that ends inside a UTF-8 character: nothing to jump */
		return 0;
	if (r < 0)
		return r;
	/* the ids the mask allows one after the other */
	struct policy_matcher t = *m;
	for (keep = 0; keep < n_ids && keep < cap; keep++) {
		struct policy_matcher u = t;
		if (policy_masker_feed(mk, &u, ids[keep]) != 0)
			break;
		t = u;
	}
	/* the boundary: a last token that a longer one could extend past where the ids end (into
	 * the text the model chooses next) is left to the model */
	if (keep > 0 && !policy_matcher_is_complete(&t)) {
		int32_t last = ids[keep - 1];
		if (extends(mk, mk->bytes[last], mk->lens[last], &t))
			keep--;
	}
	memcpy(ret_ids, ids, keep * sizeof(*ids));
	free(ids);
	return (int)keep;
}
