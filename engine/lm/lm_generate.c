/* The generation loop: prompt prefill, then sample / stream / feed back, one token at a time. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "engine.h"

static bool is_stop(const struct engine_generate_params *p, int32_t id)
{
	for (size_t i = 0; i < p->n_stop_ids; i++)
		if (p->stop_ids[i] == id)
			return true;
	return false;
}

int engine_generate(struct engine_session *s, const struct engine_tokenizer *tok,
		    const int32_t *prompt, size_t n_prompt, const struct engine_generate_params *p,
		    int32_t **ret_ids, size_t *ret_n)
{
	if (!s || !p || (p->start_logits ? n_prompt != 0 : !prompt || n_prompt == 0) ||
	    p->max_new_tokens <= 0 || (p->on_text && !tok) || (p->n_stop_ids && !p->stop_ids) ||
	    !ret_ids || !ret_n)
		return -EINVAL;

	int vocab = engine_session_vocab(s);
	int r = 0;
	float *logits = NULL;
	int32_t *ids = NULL;
	size_t n = 0;
	struct engine_detok *detok = NULL;
	struct engine_sampler *sm = engine_sampler_create(&p->sampling);
	if (!sm)
		return -errno;
	size_t rows = p->on_logits && n_prompt ? n_prompt : 1;
	logits = malloc(rows * (size_t)vocab * sizeof(float));
	ids = malloc((size_t)p->max_new_tokens * sizeof(*ids));
	if (!logits || !ids) {
		r = -ENOMEM;
		goto out;
	}
	if (p->on_text) {
		detok = engine_detok_create(tok, true);
		if (!detok) {
			r = -errno;
			goto out;
		}
	}

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
				goto flush;
		memmove(logits, logits + (n_prompt - 1) * (size_t)vocab, (size_t)vocab * sizeof(float));
	}

	for (;;) {
		if (p->logits_hook) {
			r = p->logits_hook(p->userdata, logits, vocab);
			if (r < 0)
				goto out;
			if (r > 0)
				break;
		}
		int32_t id = engine_sampler_sample(sm, logits, vocab);
		if (id < 0) {
			r = id;
			goto out;
		}
		ids[n++] = id;
		bool stop = is_stop(p, id) || n == (size_t)p->max_new_tokens;
		if (p->on_token && p->on_token(p->userdata, id))
			stop = true;
		/* ids the tokenizer cannot name (padding rows of the embedding) add no text, as in
		 * HF decode */
		if (detok && engine_tokenizer_token_str(tok, id)) {
			const char *text;
			size_t len;
			r = engine_detok_push(detok, id, &text, &len);
			if (r < 0)
				goto out;
			if (len && p->on_text(p->userdata, text, len))
				stop = true;
		}
		if (stop)
			break;
		r = engine_session_decode(s, id, logits);
		if (r < 0)
			goto out;
		if (p->on_logits && p->on_logits(p->userdata, logits, vocab))
			break;
	}
flush:
	if (detok) {
		const char *text;
		size_t len;
		r = engine_detok_flush(detok, &text, &len);
		if (r < 0)
			goto out;
		if (len)
			p->on_text(p->userdata, text, len);
	}
	r = 0;
out:
	engine_detok_destroy(detok);
	engine_sampler_destroy(sm);
	free(logits);
	if (r < 0) {
		free(ids);
		return r;
	}
	*ret_ids = ids;
	*ret_n = n;
	return 0;
}
