/* Sessions and snapshots over the backend seam (backend.h): argument checks, batching of
 * appends, and snapshot/restore/copy as sequence copies. The state itself lives in the backend.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "common.h"
#include "cpu.h"

struct engine_session {
	struct engine_backend *backend;
	struct backend_seq *seq;
};

/* A sequence cut to its tokens (seq_copy() gives it exactly the room it holds). */
struct engine_snapshot {
	struct engine_backend *backend;
	struct backend_seq *seq;
	size_t bytes;
};

int engine_set_threads(int n)
{
	return cpu_set_threads(n);
}

int engine_get_threads(void)
{
	return cpu_threads();
}

const char *engine_cpu_kernels(void)
{
	return cpu_kernel_name();
}

struct engine_session *engine_session_create_on(struct engine_backend *b, int max_tokens)
{
	if (!b || max_tokens < 1 || max_tokens > ENGINE_SESSION_MAX_TOKENS) {
		errno = EINVAL;
		return NULL;
	}
	struct engine_session *s = calloc(1, sizeof(*s));
	if (!s) {
		errno = ENOMEM;
		return NULL;
	}
	s->backend = b;
	s->seq = b->ops->seq_create(b, max_tokens);
	if (!s->seq) {
		free(s);
		return NULL;
	}
	return s;
}

void engine_session_destroy(struct engine_session *s)
{
	if (!s)
		return;
	s->backend->ops->seq_destroy(s->seq);
	free(s);
}

struct engine_backend *engine_session_backend(const struct engine_session *s)
{
	return s->backend;
}

int engine_session_n_tokens(const struct engine_session *s)
{
	return s->seq->n_tokens;
}

int engine_session_max_tokens(const struct engine_session *s)
{
	return s->seq->max_tokens;
}

int engine_session_vocab(const struct engine_session *s)
{
	return s->backend->model->cfg.vocab;
}

int engine_session_hidden(const struct engine_session *s)
{
	return s->backend->model->cfg.hidden;
}

size_t engine_session_state_bytes(const struct engine_session *s)
{
	return s->backend->ops->seq_state_bytes(s->seq);
}

size_t engine_session_state_bytes_at(const struct engine_session *s, int n_tokens)
{
	/* seq_state_bytes() is a function of n_tokens alone (backend.h): ask it of a copy of the
	 * sequence's header, the state itself untouched */
	struct backend_seq *seq = s->seq;
	int held = seq->n_tokens;
	seq->n_tokens = CLAMP(n_tokens, 0, ENGINE_SESSION_MAX_TOKENS);
	size_t bytes = s->backend->ops->seq_state_bytes(seq);
	seq->n_tokens = held;
	return bytes;
}

int backend_session_export(const struct engine_session *s, struct backend_seq_state *ret)
{
	return s->backend->ops->seq_export(s->seq, ret);
}

int backend_session_import(struct engine_session *s, const struct backend_seq_state *st)
{
	if (!st || !st->layers || st->n_layers != s->backend->model->cfg.n_layers || st->n_tokens < 0 ||
	    st->n_tokens > s->seq->max_tokens)
		return -EINVAL;
	return s->backend->ops->seq_import(s->seq, st);
}

void engine_session_reset(struct engine_session *s)
{
	s->backend->ops->seq_reset(s->seq);
}

/* ---- appends and batches -------------------------------------------------------------------- */

static bool want_ok(enum engine_logits want, const float *ret_logits)
{
	if (want == ENGINE_LOGITS_NONE)
		return true;
	return (want == ENGINE_LOGITS_LAST || want == ENGINE_LOGITS_ALL) && ret_logits;
}

/* Checks one append; returns 0, -EINVAL or -ENOSPC. */
static int check_append(const struct engine_session *s, const int32_t *tokens, size_t n,
			enum engine_logits want, const float *ret_logits)
{
	if (!s || !tokens || n == 0 || !want_ok(want, ret_logits))
		return -EINVAL;
	if (n > (size_t)(s->seq->max_tokens - s->seq->n_tokens))
		return -ENOSPC;
	int vocab = s->backend->model->cfg.vocab;
	for (size_t i = 0; i < n; i++)
		if (tokens[i] < 0 || tokens[i] >= vocab)
			return -EINVAL;
	return 0;
}

/* Reserve, then forward: every failure but a device's happens before any state changes. */
static int run_batch(struct engine_backend *b, const struct backend_batch *batch)
{
	int r = b->ops->reserve(b, batch);
	if (r < 0)
		return r;
	return b->ops->forward(b, batch);
}

/* Points logits[first..first+n) at an entry's rows as `want` asks. */
static void set_logits(float **logits, size_t first, size_t n, enum engine_logits want, float *ret_logits,
		       size_t vocab)
{
	for (size_t i = 0; i < n; i++)
		logits[first + i] = NULL;
	if (want == ENGINE_LOGITS_ALL)
		for (size_t i = 0; i < n; i++)
			logits[first + i] = ret_logits + i * vocab;
	else if (want == ENGINE_LOGITS_LAST)
		logits[first + n - 1] = ret_logits;
}

/* One append after check_append(), with host and device rows as the batch takes them. */
static int append(struct engine_session *s, const int32_t *tokens, const float *const *embeds,
		  const float *const *device_embeds, size_t n, enum engine_logits want, float *ret_logits)
{
	float **logits = NULL;
	int r;
	if (want != ENGINE_LOGITS_NONE) {
		logits = malloc(n * sizeof(*logits));
		if (!logits)
			return -ENOMEM;
		set_logits(logits, 0, n, want, ret_logits, (size_t)engine_session_vocab(s));
	}
	struct backend_span span = {.seq = s->seq, .first = 0, .n = n};
	struct backend_batch batch = {
		.n_pos = n,
		.tokens = tokens,
		.embeds = embeds,
		.device_embeds = device_embeds,
		.logits = logits,
		.spans = &span,
		.n_spans = 1,
	};
	r = run_batch(s->backend, &batch);
	free(logits);
	return r;
}

int engine_session_append(struct engine_session *s, const int32_t *tokens, const float *const *embeds,
			  size_t n, enum engine_logits want, float *ret_logits)
{
	int r = check_append(s, tokens, n, want, ret_logits);
	if (r < 0)
		return r;
	return append(s, tokens, embeds, NULL, n, want, ret_logits);
}

/* Checks refs[0..n) against session s: Returns 0 or -EINVAL; *any_host / *any_device say
 * which kinds of rows they name (or'ed in). */
static int check_refs(const struct engine_session *s, const struct engine_row_ref *refs, size_t n,
		      bool *any_host, bool *any_device)
{
	const int hidden = s->backend->model->cfg.hidden;
	for (size_t i = 0; i < n; i++) {
		const struct engine_rows *rows = refs[i].rows;
		if (!rows)
			continue;
		if (rows->dim != hidden || refs[i].row >= rows->n_rows ||
		    (rows->device && rows->backend != s->backend))
			return -EINVAL;
		*any_host |= rows->host != NULL;
		*any_device |= rows->device != NULL;
	}
	return 0;
}

/* Points embeds[i] / device_embeds[i] at the rows refs[i] names (arrays as check_refs() said
 * they are needed; the others are left alone). */
static void resolve_refs(const struct engine_session *s, const struct engine_row_ref *refs, size_t n,
			 const float **embeds, const float **device_embeds)
{
	const int hidden = s->backend->model->cfg.hidden;
	for (size_t i = 0; i < n; i++) {
		const struct engine_rows *rows = refs[i].rows;
		size_t at = rows ? refs[i].row * (size_t)hidden : 0;
		if (rows && rows->device)
			device_embeds[i] = rows->device + at;
		else if (rows)
			embeds[i] = rows->host + at;
	}
}

int engine_session_append_rows(struct engine_session *s, const int32_t *tokens,
			       const struct engine_row_ref *refs, size_t n, enum engine_logits want,
			       float *ret_logits)
{
	int r = check_append(s, tokens, n, want, ret_logits);
	if (r < 0 || !refs)
		return r < 0 ? r : append(s, tokens, NULL, NULL, n, want, ret_logits);
	bool any_host = false, any_device = false;
	if ((r = check_refs(s, refs, n, &any_host, &any_device)) < 0)
		return r;
	const float **embeds = any_host ? calloc(n, sizeof(*embeds)) : NULL;
	const float **device_embeds = any_device ? calloc(n, sizeof(*device_embeds)) : NULL;
	if ((any_host && !embeds) || (any_device && !device_embeds)) {
		r = -ENOMEM;
		goto free_arrays;
	}
	resolve_refs(s, refs, n, embeds, device_embeds);
	r = append(s, tokens, embeds, device_embeds, n, want, ret_logits);
free_arrays:
	free(device_embeds);
	free(embeds);
	return r;
}

int engine_session_decode(struct engine_session *s, int32_t token, float *ret_logits)
{
	return engine_session_append(s, &token, NULL, 1, ENGINE_LOGITS_LAST, ret_logits);
}

int engine_forward_batch(struct engine_backend *b, const struct engine_batch_entry *entries, size_t n_entries)
{
	if (!b || !entries || n_entries == 0 || n_entries > ENGINE_BATCH_MAX_SESSIONS)
		return -EINVAL;
	size_t total = 0;
	bool any_embeds = false, any_device = false, any_logits = false;
	for (size_t i = 0; i < n_entries; i++) {
		const struct engine_batch_entry *e = &entries[i];
		if (!e->session || e->session->backend != b)
			return -EINVAL;
		for (size_t j = 0; j < i; j++)
			if (entries[j].session == e->session)
				return -EINVAL;
		int r = check_append(e->session, e->tokens, e->n, e->want, e->ret_logits);
		if (r < 0)
			return r;
		if (e->refs &&
		    (e->embeds || (r = check_refs(e->session, e->refs, e->n, &any_embeds, &any_device)) < 0))
			return r < 0 ? r : -EINVAL;
		/* each n is at most ENGINE_SESSION_MAX_TOKENS, so the sum cannot wrap */
		total += e->n;
		any_embeds |= e->embeds != NULL;
		any_logits |= e->want != ENGINE_LOGITS_NONE;
	}

	int r = -ENOMEM;
	size_t vocab = (size_t)b->model->cfg.vocab;
	struct backend_span *spans = calloc(n_entries, sizeof(*spans));
	int32_t *tokens = malloc(total * sizeof(*tokens));
	const float **embeds = any_embeds ? calloc(total, sizeof(*embeds)) : NULL;
	const float **device_embeds = any_device ? calloc(total, sizeof(*device_embeds)) : NULL;
	float **logits = any_logits ? malloc(total * sizeof(*logits)) : NULL;
	if (!spans || !tokens || (any_embeds && !embeds) || (any_device && !device_embeds) ||
	    (any_logits && !logits))
		goto free_arrays;
	size_t pos = 0;
	for (size_t i = 0; i < n_entries; i++) {
		const struct engine_batch_entry *e = &entries[i];
		spans[i] = (struct backend_span){.seq = e->session->seq, .first = pos, .n = e->n};
		memcpy(tokens + pos, e->tokens, e->n * sizeof(*tokens));
		if (e->embeds)
			memcpy(embeds + pos, e->embeds, e->n * sizeof(*embeds));
		else if (e->refs)
			resolve_refs(e->session, e->refs, e->n, embeds ? embeds + pos : NULL,
				     device_embeds ? device_embeds + pos : NULL);
		if (logits)
			set_logits(logits, pos, e->n, e->want, e->ret_logits, vocab);
		pos += e->n;
	}
	struct backend_batch batch = {
		.n_pos = total,
		.tokens = tokens,
		.embeds = embeds,
		.device_embeds = device_embeds,
		.logits = logits,
		.spans = spans,
		.n_spans = n_entries,
	};
	r = run_batch(b, &batch);
free_arrays:
	free(device_embeds);
	free(logits);
	free(embeds);
	free(tokens);
	free(spans);
	return r;
}

/* ---- copies ----------------------------------------------------------------------------------- */

struct engine_session *engine_session_copy(const struct engine_session *s)
{
	struct engine_session *c = engine_session_create_on(s->backend, s->seq->max_tokens);
	if (!c)
		return NULL;
	int r = s->backend->ops->seq_copy(c->seq, s->seq);
	if (r < 0) {
		engine_session_destroy(c);
		errno = -r;
		return NULL;
	}
	return c;
}

struct engine_snapshot *engine_session_snapshot(const struct engine_session *s)
{
	struct engine_backend *b = s->backend;
	struct engine_snapshot *snap = calloc(1, sizeof(*snap));
	if (!snap) {
		errno = ENOMEM;
		return NULL;
	}
	snap->backend = b;
	snap->bytes = b->ops->seq_state_bytes(s->seq);
	/* max_tokens of the snapshot's sequence is what it holds: it never grows */
	snap->seq = b->ops->seq_create(b, MAX(s->seq->n_tokens, 1));
	if (!snap->seq)
		goto free_snap;
	int r = b->ops->seq_copy(snap->seq, s->seq);
	if (r < 0) {
		b->ops->seq_destroy(snap->seq);
		errno = -r;
		goto free_snap;
	}
	return snap;
free_snap:
	free(snap);
	return NULL;
}

int engine_session_restore(struct engine_session *s, const struct engine_snapshot *snap)
{
	if (!s || !snap || snap->backend != s->backend)
		return -EINVAL;
	if (snap->seq->n_tokens > s->seq->max_tokens)
		return -ENOSPC;
	return s->backend->ops->seq_copy(s->seq, snap->seq);
}

void engine_snapshot_destroy(struct engine_snapshot *snap)
{
	if (!snap)
		return;
	snap->backend->ops->seq_destroy(snap->seq);
	free(snap);
}

size_t engine_snapshot_bytes(const struct engine_snapshot *snap)
{
	return snap->bytes;
}

int engine_snapshot_n_tokens(const struct engine_snapshot *snap)
{
	return snap->seq->n_tokens;
}
