/* The generation loop as a stepping generator: sample / stream / feed back, one token per step,
 * several sessions' generators advancing together in one batched forward. engine_generate() is
 * the prompt's prefill followed by stepping one generator alone: there is one generation loop. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "engine.h"

struct engine_generator {
	struct engine_session *s;
	const struct engine_tokenizer *tok;
	struct engine_generate_params p;
	struct engine_sampler *sm;
	struct engine_detok *detok;
	float *logits; /* [vocab]: what the next id is sampled from; the feed-back writes here */
	int vocab;
	int32_t *ids; /* [max_new_tokens] */
	size_t n;
	uint64_t forwards, forced; /* engine_generator_stats() */
	bool in_flight;
	int status; /* 0 running, 1 finished, < 0 failed */
};

static bool is_stop(const struct engine_generate_params *p, int32_t id)
{
	for (size_t i = 0; i < p->n_stop_ids; i++)
		if (p->stop_ids[i] == id)
			return true;
	return false;
}

struct engine_generator *engine_generator_create(struct engine_session *s, const struct engine_tokenizer *tok,
						 const struct engine_generate_params *p, const float *logits)
{
	if (!s || !p || !logits || p->max_new_tokens <= 0 || (p->on_text && !tok) ||
	    (p->n_stop_ids && !p->stop_ids)) {
		errno = EINVAL;
		return NULL;
	}
	struct engine_generator *g = calloc(1, sizeof(*g));
	if (!g) {
		errno = ENOMEM;
		return NULL;
	}
	g->s = s;
	g->tok = tok;
	g->p = *p;
	g->p.start_logits = NULL;
	g->vocab = engine_session_vocab(s);
	g->sm = engine_sampler_create(&p->sampling);
	if (!g->sm)
		goto fail;
	g->logits = malloc((size_t)g->vocab * sizeof(float));
	g->ids = malloc((size_t)p->max_new_tokens * sizeof(*g->ids));
	if (!g->logits || !g->ids) {
		errno = ENOMEM;
		goto fail;
	}
	memcpy(g->logits, logits, (size_t)g->vocab * sizeof(float));
	if (p->on_text && !(g->detok = engine_detok_create(tok, true)))
		goto fail;
	return g;
fail:
	engine_generator_destroy(g);
	return NULL;
}

void engine_generator_destroy(struct engine_generator *g)
{
	if (!g)
		return;
	engine_detok_destroy(g->detok);
	engine_sampler_destroy(g->sm);
	free(g->logits);
	free(g->ids);
	free(g);
}

/* Ends the generation: the streaming decoder's last text, then the status. */
static int finish(struct engine_generator *g, int err)
{
	if (g->status != 0)
		return g->status;
	if (err == 0 && g->detok) {
		const char *text;
		size_t len;
		err = engine_detok_flush(g->detok, &text, &len);
		if (err == 0 && len)
			g->p.on_text(g->p.userdata, text, len);
	}
	g->status = err < 0 ? err : 1;
	return g->status;
}

int engine_generator_sample(struct engine_generator *g, struct engine_batch_entry *ret_entry)
{
	if (!g || !ret_entry || g->in_flight)
		return -EINVAL;
	if (g->status != 0)
		return g->status < 0 ? g->status : 0;
	const struct engine_generate_params *p = &g->p;
	int r;
	if (p->logits_hook) {
		r = p->logits_hook(p->userdata, g->logits, g->vocab);
		if (r != 0)
			return finish(g, r < 0 ? r : 0) < 0 ? g->status : 0;
	}
	int32_t id = engine_sampler_sample(g->sm, g->logits, g->vocab);
	if (id < 0)
		return finish(g, id);
	g->ids[g->n++] = id;
	bool stop = is_stop(p, id) || g->n == (size_t)p->max_new_tokens;
	if (p->on_token && p->on_token(p->userdata, id))
		stop = true;
	/* ids the tokenizer cannot name (padding rows of the embedding) add no text, as in HF
	 * decode */
	if (g->detok && engine_tokenizer_token_str(g->tok, id)) {
		const char *text;
		size_t len;
		if ((r = engine_detok_push(g->detok, id, &text, &len)) < 0)
			return finish(g, r);
		if (len && p->on_text(p->userdata, text, len))
			stop = true;
	}
	if (stop)
		return finish(g, 0) < 0 ? g->status : 0;
	/* the append starts at the sampled id in ids[] and takes the forced ids after it */
	size_t at = g->n - 1, n_forced = 0;
	if (p->forced) {
		/* room for the id sampled after them: the limit ends the loop at a sample */
		size_t cap = (size_t)p->max_new_tokens - g->n - 1;
		r = cap ? p->forced(p->userdata, g->ids + g->n, cap) : 0;
		if (r < 0)
			return finish(g, r);
		n_forced = MIN((size_t)r, cap);
		for (size_t i = 0; i < n_forced && g->detok; i++) {
			const char *text;
			size_t len;
			int32_t f = g->ids[g->n + i];
			if (!engine_tokenizer_token_str(g->tok, f))
				continue;
			if ((r = engine_detok_push(g->detok, f, &text, &len)) < 0)
				return finish(g, r);
			if (len && p->on_text(p->userdata, text, len))
				stop = true;
		}
		g->n += n_forced;
		g->forced += n_forced;
		if (stop)
			return finish(g, 0) < 0 ? g->status : 0;
	}
	g->in_flight = true;
	*ret_entry = (struct engine_batch_entry){.session = g->s,
						 .tokens = g->ids + at,
						 .n = 1 + n_forced,
						 .want = ENGINE_LOGITS_LAST,
						 .ret_logits = g->logits};
	return 1;
}

int engine_generator_fed(struct engine_generator *g, int err)
{
	if (!g || !g->in_flight)
		return -EINVAL;
	g->in_flight = false;
	if (err < 0)
		return finish(g, err);
	g->forwards++;
	if (g->p.on_logits && g->p.on_logits(g->p.userdata, g->logits, g->vocab))
		return finish(g, 0);
	return 0;
}

void engine_generator_stats(const struct engine_generator *g, uint64_t *ret_forwards, uint64_t *ret_forced)
{
	*ret_forwards = g ? g->forwards : 0;
	*ret_forced = g ? g->forced : 0;
}

int engine_generator_status(const struct engine_generator *g)
{
	return g ? g->status : -EINVAL;
}

const int32_t *engine_generator_ids(const struct engine_generator *g, size_t *ret_n)
{
	*ret_n = g->n;
	return g->ids;
}

int engine_generators_step(struct engine_backend *b, struct engine_generator *const *gens, size_t n)
{
	if (!b || (n && !gens) || n > ENGINE_BATCH_MAX_SESSIONS)
		return -EINVAL;
	struct engine_batch_entry *entries = calloc(MAX(n, (size_t)1), sizeof(*entries));
	struct engine_generator **fed = calloc(MAX(n, (size_t)1), sizeof(*fed));
	size_t n_fed = 0, running = 0;
	int r = 0;

	if (!entries || !fed) {
		r = -ENOMEM;
		goto free_arrays;
	}
	for (size_t i = 0; i < n; i++) {
		if (!gens[i] || engine_session_backend(gens[i]->s) != b) {
			r = -EINVAL;
			goto free_arrays;
		}
	}
	for (size_t i = 0; i < n; i++)
		if (engine_generator_sample(gens[i], &entries[n_fed]) == 1)
			fed[n_fed++] = gens[i];
	if (n_fed)
		r = engine_forward_batch(b, entries, n_fed);
	for (size_t i = 0; i < n_fed; i++)
		running += engine_generator_fed(fed[i], r) == 0;
free_arrays:
	free(fed);
	free(entries);
	return r < 0 ? r : (int)running;
}

int engine_generate(struct engine_session *s, const struct engine_tokenizer *tok, const int32_t *prompt,
		    size_t n_prompt, const struct engine_generate_params *p, int32_t **ret_ids, size_t *ret_n)
{
	if (!s || !p || (p->start_logits ? n_prompt != 0 : !prompt || n_prompt == 0) ||
	    p->max_new_tokens <= 0 || (p->on_text && !tok) || (p->n_stop_ids && !p->stop_ids) || !ret_ids ||
	    !ret_n)
		return -EINVAL;

	int vocab = engine_session_vocab(s);
	int r = 0;
	float *logits = NULL;
	int32_t *ids = NULL;
	size_t n = 0;
	struct engine_generator *g = NULL;
	size_t rows = p->on_logits && n_prompt ? n_prompt : 1;

	logits = malloc(rows * (size_t)vocab * sizeof(float));
	if (!logits)
		return -ENOMEM;
	if (p->start_logits) {
		/* The caller computed these: on_logits sees only the rows the loop computes. */
		memcpy(logits, p->start_logits, (size_t)vocab * sizeof(float));
	} else if ((r = engine_session_append(s, prompt, NULL, n_prompt,
					      p->on_logits ? ENGINE_LOGITS_ALL : ENGINE_LOGITS_LAST,
					      logits)) < 0) {
		goto out;
	} else if (p->on_logits) {
		for (size_t i = 0; i < n_prompt; i++)
			if (p->on_logits(p->userdata, logits + i * (size_t)vocab, vocab))
				goto stopped_in_prompt;
		memmove(logits, logits + (n_prompt - 1) * (size_t)vocab, (size_t)vocab * sizeof(float));
	}

	g = engine_generator_create(s, tok, p, logits);
	if (!g) {
		r = -errno;
		goto out;
	}
	struct engine_backend *b = engine_session_backend(s);
	while ((r = engine_generators_step(b, &g, 1)) > 0)
		;
	if (r < 0 || (r = engine_generator_status(g)) < 0)
		goto out;
	const int32_t *gen_ids = engine_generator_ids(g, &n);
	ids = malloc(MAX(n, (size_t)1) * sizeof(*ids));
	if (!ids) {
		r = -ENOMEM;
		goto out;
	}
	memcpy(ids, gen_ids, n * sizeof(*ids));
	r = 0;
	goto out;
stopped_in_prompt:
	/* nothing was generated; the streaming decoder would have had nothing to flush */
	ids = malloc(sizeof(*ids));
	r = ids ? 0 : -ENOMEM;
out:
	engine_generator_destroy(g);
	free(logits);
	if (r < 0) {
		free(ids);
		return r;
	}
	*ret_ids = ids;
	*ret_n = n;
	return 0;
}
