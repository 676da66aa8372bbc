/* engine internal: the pieces of the tokenizer (tokenizer*.c). Not a public header.
 *
 * Layers, in the order text flows through them on encode:
 *   tokenizer.c         load tokenizer.json, added-token splitting, decode, streaming decode
 *   tokenizer_pretok.c  pre-tokenizer steps (Split regex, ByteLevel) compiled with PCRE2
 *   tokenizer_bpe.c     the BPE model: vocab and merge tables, priority-queue merging, word cache
 *   tokenizer_util.c    hash map, growable buffers, UTF-8 helpers shared by the above
 *
 * Everything built at load time is read-only afterwards, so encode/decode may run on many threads;
 * the only mutable shared state is the BPE word cache, behind its own mutex.
 */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "engine.h"

/* ---- loading from memory (tokenizer.c) ----------------------------------------------------- */

/* engine_tokenizer_load() for a tokenizer.json already in memory (the fuzz target's entry);
 * `name` stands for the path in error messages. Same contract otherwise. */
struct engine_tokenizer *tok_load_buffer(const char *data, size_t len, const char *name, char *errbuf,
					 size_t errlen);

/* ---- growable buffers (tokenizer_util.c) --------------------------------------------------- */

struct tok_buf {
	char *data;
	size_t len, cap;
};

struct tok_ids {
	int32_t *data;
	size_t len, cap;
};

/* A piece of text: [off, off+len) of a tok_pieces buffer. */
struct tok_span {
	size_t off, len;
};

/* A list of pieces whose bytes live in `buf`. */
struct tok_pieces {
	struct tok_buf buf;
	struct tok_span *spans;
	size_t n, cap;
};

/* All return 0 or -ENOMEM; finish functions accept zeroed structs. */
int tok_buf_reserve(struct tok_buf *b, size_t extra);
int tok_buf_append(struct tok_buf *b, const void *data, size_t n);
void tok_buf_finish(struct tok_buf *b);
int tok_ids_push(struct tok_ids *v, int32_t id);
int tok_ids_append(struct tok_ids *v, const int32_t *ids, size_t n);
void tok_ids_finish(struct tok_ids *v);
/* Appends a piece (copying its bytes); empty pieces are dropped, as HF drops them. */
int tok_pieces_add(struct tok_pieces *p, const char *data, size_t len);
void tok_pieces_clear(struct tok_pieces *p);
void tok_pieces_finish(struct tok_pieces *p);

/* ---- string -> id hash map (tokenizer_util.c) --------------------------------------------- */

/* Keys are not copied: they must outlive the map. Open addressing, power-of-two capacity. */
struct tok_strmap_slot {
	const char *key; /* NULL: empty */
	uint32_t len;
	uint32_t hash;
	int32_t value;
};

struct tok_strmap {
	struct tok_strmap_slot *slots;
	size_t cap, n;
};

uint64_t tok_hash_bytes(const void *data, size_t len);
int tok_strmap_init(struct tok_strmap *m, size_t expected);
void tok_strmap_finish(struct tok_strmap *m);
/* Inserts or replaces. Returns 0, or -ENOMEM. */
int tok_strmap_put(struct tok_strmap *m, const char *key, size_t len, int32_t value);
/* Returns the value or -1. */
int32_t tok_strmap_get(const struct tok_strmap *m, const char *key, size_t len);

/* ---- UTF-8 (tokenizer_util.c; decoding and validation are common.h's utf8_*) ------------ */

/* Appends bytes to out replacing ill-formed sequences by U+FFFD, as Rust's
 * String::from_utf8_lossy. With keep_tail, an incomplete sequence at the end is not converted;
 * its length is returned in *ret_tail (0 otherwise). Returns 0 or -ENOMEM. */
int tok_utf8_lossy_append(struct tok_buf *out, const uint8_t *s, size_t len, bool keep_tail, size_t *ret_tail);
/* Rust char::is_whitespace (Unicode White_Space). */
bool tok_is_whitespace(uint32_t cp);

/* ---- byte-level mapping (tokenizer_util.c) -------------------------------------------------- */

/* GPT-2 bytes_to_unicode: every byte has a printable code point (U+0021..U+0143). */
struct tok_bytelevel {
	char utf8[256][2]; /* each mapped code point is 1 or 2 bytes of UTF-8 */
	uint8_t utf8_len[256];
	int16_t byte_of[324]; /* code point -> byte, -1 where no byte maps there */
};

void tok_bytelevel_init(struct tok_bytelevel *bl);
/* Appends the mapped form of `len` raw bytes. */
int tok_bytelevel_map(const struct tok_bytelevel *bl, struct tok_buf *out, const char *s, size_t len);
/* ByteLevel decoder for one token string: if every character maps back to a byte, writes those
 * bytes; otherwise the string's own bytes (HF decoders::ByteLevel). out must hold len bytes. */
size_t tok_bytelevel_unmap(const struct tok_bytelevel *bl, const char *s, size_t len, uint8_t *out);

/* ---- pre-tokenizer (tokenizer_pretok.c) ----------------------------------------------------- */

struct tok_pretok;

/* Builds the pre-tokenizer from the tokenizer.json `pre_tokenizer` node (NULL or json null:
 * none, the text goes to the model whole). On failure returns NULL with errno set and one
 * sentence in err. */
struct tok_pretok *tok_pretok_create(const json_t *node, const struct tok_bytelevel *bl, char *err,
				     size_t errlen);
void tok_pretok_destroy(struct tok_pretok *p);
/* Splits and transforms text into the model's input words, appended to *out (cleared first).
 * `scratch` is working memory the caller keeps between calls. text must be valid UTF-8.
 * Returns 0, -ENOMEM, or -EIO for a PCRE2 matching failure. */
int tok_pretok_run(const struct tok_pretok *p, const char *text, size_t len, struct tok_pieces *out,
		   struct tok_pieces *scratch);

/* ---- BPE model (tokenizer_bpe.c) ---------------------------------------------------------- */

struct tok_bpe_merge_slot {
	uint64_t key; /* (left << 32) | right; UINT64_MAX: empty */
	uint32_t rank;
	int32_t new_id;
};

struct tok_bpe_cache;

struct tok_bpe {
	struct tok_strmap vocab; /* model vocab string -> id (keys owned by the tokenizer) */
	struct tok_bpe_merge_slot *merges;
	size_t merges_cap, n_merges;
	int32_t unk_id; /* -1: none */
	bool fuse_unk, byte_fallback, ignore_merges;
	struct tok_bpe_cache *cache;
};

/* Working memory of one encode call. */
struct tok_bpe_scratch {
	struct tok_bpe_symbol *symbols;
	size_t symbols_cap;
	struct tok_bpe_heap_entry *heap;
	size_t heap_cap;
};

int tok_bpe_init(struct tok_bpe *bpe, size_t vocab_expected, size_t merges_expected);
void tok_bpe_finish(struct tok_bpe *bpe);
/* Adds merge (left, right) -> new_id with the given rank; a repeated pair keeps the later
 * rank, as HF's map construction does. Returns 0 or -ENOMEM. */
int tok_bpe_add_merge(struct tok_bpe *bpe, int32_t left, int32_t right, uint32_t rank, int32_t new_id);
/* Tokenizes one pre-tokenized word (in the model's alphabet) and appends the ids.
 * Returns 0 or -ENOMEM. */
int tok_bpe_word(const struct tok_bpe *bpe, const char *word, size_t len, struct tok_ids *out,
		 struct tok_bpe_scratch *scratch);
void tok_bpe_scratch_finish(struct tok_bpe_scratch *s);
