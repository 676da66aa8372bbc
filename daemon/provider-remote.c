/* The remote provider: an OpenAI-compatible server (vLLM, SGLang, llama.cpp's server) answers
 * each step through POST {url}/chat/completions (provider.h, issue 17).
 *
 * A step sends the conversation of the task's history mode as chat messages, as H Company's
 * Agent loop does (docs/policy.md, items 3-7 and 29): the system prompt, "Task: ...", then per
 * observation the previous action's result as a user message of its own and the observation's
 * user message (the screenshot as a PNG data URL at the captured size: the server's own
 * processor tiles it as the model expects), with the steps answered so far as assistant turns,
 * re-serialized canonically. Only the last K (--window, or the task's window) observations carry their
 * image, in every history mode: the server keeps no session between requests, so every one
 * re-sends what it shows, and K bounds the request (servers also cap images per prompt, as
 * vLLM's --limit-mm-per-prompt does); its prefix cache plays the persistent session. Older
 * ones say "[screenshot evicted]", and with --remote-images none every one does (the
 * text-only layout). The server is vLLM when --remote-server says so or, with auto, when its
 * GET {url}/models says so (its first model is "owned_by": "vllm"); it gets the step's JSON
 * schema as {"structured_outputs": {"json": S}} (what vLLM reads since guided_json was removed
 * in 0.12) and each observation as ONE text part holding the "<image>" placeholder where the
 * screenshot goes, then the image part: the Nemotron-Nano-VL template that vLLM applies joins a
 * message's text parts and puts a "<image>\n" in front of them unless the text holds its own
 * placeholder, so only this layout renders the screenshot inside <observation> as the local
 * engine does (tools/nemotron_vl_template.py). Any other server gets response_format
 * {"type": "json_schema"} and the parts in their order (text, image, text), which a template
 * that renders parts in order places alike. The model name is --remote-model or the first
 * model that list names. The same parser as the local engine's validates the answer; an
 * invalid one is asked again (sampled at RETRY_TEMPERATURE when greedy).
 *
 * Transport: libcurl's multi interface polled every REMOTE_POLL_MS, checking the task's stop
 * flag and deadline between polls, so cancel and the kill switch end a streamed answer at once
 * (stream: true, read as server-sent events). HTTP 429 and 5xx are retried up to
 * --remote-retries times after an exponential backoff (REMOTE_BACKOFF_BASE_MS doubling, or the
 * server's Retry-After, both capped at REMOTE_MAX_BACKOFF_MS); a 400, 422 or 500 whose body
 * names response_format (from a server not taken for vLLM) switches the provider to
 * {"type": "json_object", "schema"} (the form llama-cpp-python's server takes) at once; a 400
 * naming a thinking field (chat_template_kwargs, reasoning_effort, thinking_token_budget: sent
 * only with thinking on) is asked again at once without them, for the rest of the task;
 * anything else fails the step. What the server
 * sends is read by remote-reply.c, every size against a named limit.
 *
 * Credentials: the key (first line of --remote-key-file) goes only into the Authorization
 * header. Logs, errors, the journal and /v1/status name the endpoint without userinfo, query
 * or fragment.
 *
 * DESIGN (threads): the provider's configuration is immutable after creation; what the probe
 * of GET /models learns is guarded by `lock`. A task's transfers run on its executor thread. */
#include "provider.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"
#include "agent-history.h"
#include "common.h"
#include "remote-reply.h"

/* Bytes of a key file read at most. */
#define REMOTE_MAX_KEY_BYTES 4096
/* Bytes of GET /models read at most. */
#define REMOTE_MAX_MODELS_BYTES (1024 * 1024)
/* How often a transfer checks the stop flag and the deadline. */
#define REMOTE_POLL_MS 20
/* Backoff before the first retry of a 429/5xx; doubles, capped (as is Retry-After). */
#define REMOTE_BACKOFF_BASE_MS 500
#define REMOTE_MAX_BACKOFF_MS (REMOTE_MAX_RETRY_AFTER_S * 1000)
/* Sampling of a retried step: greedy would repeat the invalid answer. */
#define RETRY_TEMPERATURE 0.7f
/* What a thinking request says: the effort both references send, and the base template's
 * switch (docs/policy.md, Thinking). */
#define REMOTE_REASONING_EFFORT "medium"
#define REMOTE_THINK_SWITCH "/think"

struct remote_provider {
	struct provider base;
	char *url;	  /* chat completions, as configured (may hold userinfo) */
	char *models_url; /* GET: the served models */
	char *endpoint;	  /* the base URL without userinfo, query or fragment */
	char *model;	  /* --remote-model; NULL: the server's first */
	char *auth;	  /* "Authorization: Bearer KEY", or NULL */
	char *schema;	  /* the step's JSON Schema, compact */
	unsigned connect_timeout_s, timeout_s, retries;
	bool images;
	enum provider_remote_server server; /* --remote-server */

	pthread_mutex_t lock; /* guards what follows */
	bool probed;
	bool vllm;	    /* structured_outputs and the one-text-part layout (above) */
	bool json_object;   /* the server refused "json_schema": {"type":"json_object","schema"} */
	char *served_model; /* from GET /models */
};

struct remote_task {
	struct provider_task base;
	struct remote_provider *rp;
	const struct agent_config *cfg;
	const struct executor_task *t;
	struct executor_run *run;
	enum ipc_history history;
	size_t keep; /* observations sent with their image */
	struct provider_sampling sampling;
	const struct policy_format *fmt; /* the task's format: its turns, schema and parser */
	bool thinking;			 /* the server is asked for a think block before each step */
	bool no_think_fields;		 /* the server refused chat_template_kwargs, reasoning_effort or
					  * thinking_token_budget (HTTP 400): this task asks without them */
	unsigned thinking_tokens;	 /* its budget: vLLM's thinking_token_budget */
	char *system;			 /* the system turn */
	char *schema;			 /* the step's JSON Schema, as the system turn shows it */
	char *task_text;		 /* "Task: ..." */
	char *model;			 /* the name sent */
	bool vllm, json_object;
	char **pngs;	 /* pngs[i]: observation i's data URL (NULL once out of reach) */
	uint64_t png_us; /* encoding the last observation's PNG */
	size_t cap;
};

/* ---- small helpers --------------------------------------------------------------------------- */

static char *base64_data_url(const uint8_t *data, size_t n)
{
	static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	static const char prefix[] = "data:image/png;base64,";
	size_t plen = sizeof(prefix) - 1;
	char *out = xmalloc(plen + (n + 2) / 3 * 4 + 1), *o = out + plen;

	memcpy(out, prefix, plen);
	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)data[i] << 16;
		if (i + 1 < n)
			v |= (uint32_t)data[i + 1] << 8;
		if (i + 2 < n)
			v |= data[i + 2];
		*o++ = tab[(v >> 18) & 63];
		*o++ = tab[(v >> 12) & 63];
		*o++ = i + 1 < n ? tab[(v >> 6) & 63] : '=';
		*o++ = i + 2 < n ? tab[v & 63] : '=';
	}
	*o = '\0';
	return out;
}

/* libcurl's callbacks, feeding the reply (remote-reply.h). */
static size_t on_write(char *p, size_t size, size_t n, void *userdata)
{
	return remote_reply_feed(userdata, p, size * n) < 0 ? 0 : size * n;
}

static size_t on_header(char *p, size_t size, size_t n, void *userdata)
{
	remote_reply_header(userdata, p, size * n);
	return size * n;
}

static bool stopped(const struct remote_task *rt)
{
	return rt && atomic_load(rt->t->stop) != EXECUTOR_RUN;
}

/* holoctl pause (or a takeover) asked while a step's request is under way: the request is
 * dropped (the server's answer would be for a screen the person is about to change) and the
 * step is asked again once the task resumes (provider.h's -EINTR); a remote step keeps no state
 * on the server, so the request asked again is the one a never-paused task sends. */
static bool paused(const struct remote_task *rt)
{
	return rt && rt->t->pause && atomic_load(rt->t->pause);
}

/* Sleeps ms in slices (a wait before a request is retried): 0, -ECANCELED, -ETIME, -EINTR. */
static int wait_ms(const struct remote_task *rt, uint64_t ms)
{
	uint64_t end = time_mono_us() + ms * 1000;
	for (;;) {
		uint64_t now = time_mono_us();
		if (stopped(rt))
			return -ECANCELED;
		if (paused(rt))
			return -EINTR;
		if (rt && now >= rt->run->deadline_us)
			return -ETIME;
		if (now >= end)
			return 0;
		time_sleep_us(MIN(end - now, (uint64_t)REMOTE_POLL_MS * 1000));
	}
}

static bool connected(CURL *e)
{
	curl_off_t us = 0;
	return curl_easy_getinfo(e, CURLINFO_CONNECT_TIME_T, &us) == CURLE_OK && us > 0;
}

/* One transfer: GET (body NULL) or POST of a JSON body. Returns 0 with rep->status set (any
 * HTTP status), -ECANCELED, -ETIME (the task's deadline), -EINTR (a POST, the task paused:
 * paused()), or -errno with err filled (no connection, the total timeout, a limit). */
static int transfer(struct remote_provider *rp, const struct remote_task *rt, const char *url,
		    const char *body, struct remote_reply *rep, char *err, size_t errlen)
{
	char cerr[CURL_ERROR_SIZE] = "";
	struct curl_slist *hdr = NULL;
	CURLM *m = curl_multi_init();
	CURL *e = curl_easy_init();
	int r = 0, running = 1;

	if (!m || !e) {
		r = -ENOMEM;
		snprintf(err, errlen, "cannot start an HTTP transfer: out of memory");
		goto cleanup;
	}
	if (body)
		hdr = curl_slist_append(hdr, "Content-Type: application/json");
	hdr = curl_slist_append(hdr, "Accept: text/event-stream, application/json");
	if (rp->auth)
		hdr = curl_slist_append(hdr, rp->auth);
	/* The probe, which no stop flag reaches, is bounded by the connect timeout; a task's
	 * deadline is checked by the loop below, not by curl. */
	uint64_t timeout_ms = (uint64_t)(rt ? rp->timeout_s : rp->connect_timeout_s) * 1000;
	if (rt && time_mono_us() >= rt->run->deadline_us) {
		r = -ETIME;
		goto cleanup;
	}
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, hdr);
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, cerr);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)rp->connect_timeout_s * 1000);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, rep);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, rep);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
	if (body) {
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
	}
	curl_multi_add_handle(m, e);
	while (running) {
		if (stopped(rt)) {
			r = -ECANCELED;
			break;
		}
		if (body && paused(rt)) {
			r = -EINTR;
			break;
		}
		if (rt && time_mono_us() >= rt->run->deadline_us) {
			r = -ETIME;
			break;
		}
		CURLMcode mc = curl_multi_perform(m, &running);
		if (mc == CURLM_OK && running)
			mc = curl_multi_poll(m, NULL, 0, REMOTE_POLL_MS, NULL);
		if (mc != CURLM_OK) {
			r = -EIO;
			snprintf(err, errlen, "HTTP transfer to %s failed: %s", rp->endpoint,
				 curl_multi_strerror(mc));
			break;
		}
	}
	if (r == 0) {
		int left;
		CURLMsg *msg = curl_multi_info_read(m, &left);
		CURLcode cc = msg && msg->msg == CURLMSG_DONE ? msg->data.result : CURLE_OK;
		curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &rep->status);
		if (cc == CURLE_WRITE_ERROR && rep->err[0]) {
			r = -E2BIG;
			snprintf(err, errlen, "%s", rep->err);
		} else if (cc == CURLE_OPERATION_TIMEDOUT && !connected(e)) {
			r = -ETIMEDOUT;
			snprintf(err, errlen,
				 "cannot connect to the model server at %s within %u s "
				 "(--remote-connect-timeout)",
				 rp->endpoint, rp->connect_timeout_s);
		} else if (cc == CURLE_OPERATION_TIMEDOUT) {
			r = -ETIMEDOUT;
			snprintf(err, errlen,
				 "the model server at %s did not answer within %u s "
				 "(--remote-timeout %u, --remote-connect-timeout %u)",
				 rp->endpoint, rp->timeout_s, rp->timeout_s, rp->connect_timeout_s);
		} else if (cc != CURLE_OK) {
			r = -ECONNREFUSED;
			snprintf(err, errlen, "cannot reach the model server at %s: %s", rp->endpoint,
				 cerr[0] ? cerr : curl_easy_strerror(cc));
		}
	}
cleanup:
	if (m && e)
		curl_multi_remove_handle(m, e);
	curl_easy_cleanup(e);
	curl_multi_cleanup(m);
	curl_slist_free_all(hdr);
	return r;
}

/* ---- the probe: GET /models ------------------------------------------------------------------ */

/* Learns the served model and the server's kind once; a failure to connect fails the task
 * (the server is down), a server without /models is used as configured. */
static int probe(struct remote_provider *rp, struct remote_task *rt, char *err, size_t errlen)
{
	pthread_mutex_lock(&rp->lock);
	bool done = rp->probed;
	pthread_mutex_unlock(&rp->lock);
	if (done)
		return 0;

	struct remote_reply rep;
	remote_reply_init(&rep, false, REMOTE_MAX_MODELS_BYTES);
	int r = transfer(rp, rt, rp->models_url, NULL, &rep, err, errlen);
	if (r < 0)
		goto finish;
	char *served = NULL;
	bool vllm = false;
	if (rep.status == 200 && rep.body.data) {
		json_t *o = json_loads(rep.body.data, 0, NULL);
		json_t *m0 = json_array_get(json_object_get(o, "data"), 0);
		const char *id = json_string_value(json_object_get(m0, "id"));
		const char *owner = json_string_value(json_object_get(m0, "owned_by"));
		if (id && strlen(id) <= REMOTE_MAX_MODEL_NAME)
			served = xstrdup(id);
		vllm = owner && strcmp(owner, "vllm") == 0;
		json_decref(o);
	}
	if (rep.status != 200)
		log_info("the model server at %s answered GET /models with HTTP %ld; using "
			 "--remote-model as given",
			 rp->endpoint, rep.status);
	pthread_mutex_lock(&rp->lock);
	if (!rp->probed) {
		rp->probed = true;
		rp->served_model = served;
		if (rp->server == PROVIDER_REMOTE_AUTO)
			rp->vllm = vllm;
		served = NULL;
		log_info("model server %s: model %s, %s", rp->endpoint,
			 rp->model	  ? rp->model :
			 rp->served_model ? rp->served_model :
					    "(unnamed)",
			 rp->vllm ? "vLLM (structured_outputs, the image inside the text part)" :
				    "OpenAI-compatible (response_format)");
	}
	pthread_mutex_unlock(&rp->lock);
	free(served);
finish:
	remote_reply_finish(&rep);
	return r;
}

/* ---- the ops ---------------------------------------------------------------------------------- */

static struct remote_provider *remote_of(struct provider *p)
{
	return (struct remote_provider *)p;
}

static enum provider_state remote_state(struct provider *p)
{
	(void)p;
	return PROVIDER_READY;
}

/* Probes the server before a task's provenance is written, so that it names the served model;
 * a server that does not answer is found again by the task itself, which fails saying so. */
static enum provider_state remote_wait_ready(struct provider *p)
{
	char err[PROVIDER_MAX_ERROR];
	probe(remote_of(p), NULL, err, sizeof(err));
	return PROVIDER_READY;
}

static const char *remote_error(struct provider *p)
{
	(void)p;
	return NULL;
}

/* What constrains the answer: vLLM's structured_outputs, or response_format's json_schema or
 * (after a refusal) json_object form. */
static const char *remote_structured_name(bool vllm, bool json_object)
{
	return vllm ? "structured_outputs" : json_object ? "json_object" : "json_schema";
}

static json_t *remote_provenance(struct provider *p)
{
	struct remote_provider *rp = remote_of(p);
	pthread_mutex_lock(&rp->lock);
	json_t *o = json_pack("{s:s, s:s?, s:s?, s:b, s:s, s:s}", "endpoint", rp->endpoint, "name",
			      rp->model ? rp->model : rp->served_model, "served", rp->served_model, "images",
			      rp->images, "server", rp->vllm ? "vllm" : "openai", "structured_output",
			      remote_structured_name(rp->vllm, rp->json_object));
	pthread_mutex_unlock(&rp->lock);
	return o;
}

static json_t *remote_status(struct provider *p)
{
	json_t *o = remote_provenance(p);
	if (o)
		json_object_set_new(o, "name", json_string("remote"));
	struct remote_provider *rp = remote_of(p);
	pthread_mutex_lock(&rp->lock);
	json_object_set_new(o, "model",
			    rp->model	     ? json_string(rp->model) :
			    rp->served_model ? json_string(rp->served_model) :
					       json_null());
	pthread_mutex_unlock(&rp->lock);
	return o;
}

static void remote_task_close(struct provider_task *pt)
{
	struct remote_task *rt = (struct remote_task *)pt;
	if (!rt)
		return;
	for (size_t i = 0; i < rt->cap; i++)
		free(rt->pngs[i]);
	free(rt->pngs);
	free(rt->system);
	free(rt->schema);
	free(rt->task_text);
	free(rt->model);
	free(rt);
}

static int remote_task_open(struct provider *p, const struct provider_task_args *args,
			    struct provider_task **ret, char *err, size_t errlen)
{
	struct remote_provider *rp = remote_of(p);
	struct remote_task *rt;
	int r;

	rt = xcalloc(1, sizeof(*rt));
	rt->base.p = p;
	rt->rp = rp;
	rt->cfg = args->cfg;
	rt->t = args->t;
	rt->run = args->run;
	rt->history = args->history;
	rt->keep = rp->images ? args->window : 0;
	rt->sampling = args->sampling;
	rt->fmt = args->format ? args->format : &policy_format_holo3;
	rt->thinking = args->thinking;
	rt->thinking_tokens = args->thinking_tokens;
	bool nano = rt->fmt == &policy_format_holo_nano;
	const struct policy_published *pub = nano ? args->cfg->published : NULL;
	struct policy_env penv = {.screen_width = args->run->monitor.width,
				  .screen_height = args->run->monitor.height,
				  .date = args->date,
				  .max_steps = args->t->max_steps,
				  .max_time_s = args->t->max_seconds,
				  .published = pub,
				  .secret_names = args->cfg->secret_names};
	rt->system = rt->fmt->system_text(&penv);
	/* The schema the system text shows is the one the server constrains with: holo3's, or
	 * holo-nano's (the published text when the published system text is used). */
	rt->schema = !nano ? xstrdup(rp->schema) :
		     pub   ? xstrndup(pub->nano_schema, pub->nano_schema_len) :
			     policy_nano_json_schema();
	rt->task_text = xasprintf("Task: %s", args->t->req->instruction);
	if (!rt->system || !rt->schema) {
		r = -ENOMEM;
		snprintf(err, errlen, "cannot write the system prompt: %s", strerror(-r));
		goto close_task;
	}
	if ((r = probe(rp, rt, err, errlen)) < 0) {
		if (r == -ETIME)
			snprintf(err, errlen,
				 "max_seconds budget (%u s) exhausted while asking the "
				 "model server at %s for its models",
				 args->t->max_seconds, rp->endpoint);
		goto close_task;
	}
	pthread_mutex_lock(&rp->lock);
	rt->model = xstrdup(rp->model ? rp->model : rp->served_model ? rp->served_model : "default");
	rt->vllm = rp->vllm;
	rt->json_object = rp->json_object;
	pthread_mutex_unlock(&rp->lock);
	/* Thinking on vLLM: the Nemotron-Nano-VL template reads no enable_thinking; its switch is
	 * a "/think" in the system text, which it removes from what it renders (docs/design/
	 * model.md 5.2), so the model sees the system text and the "<think>\n" generation prompt
	 * the local engine renders. */
	if (rt->thinking && rt->vllm) {
		char *s = xasprintf("%s\n%s", rt->system, REMOTE_THINK_SWITCH);
		free(rt->system);
		rt->system = s;
	}
	/* What the chat export reads (docs/journal.md, `prompt`). */
	char *obs = policy_format_observation_text(rt->fmt, false);
	json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s?, s:b, s:b, s:s, s:s}", "format", rt->fmt->name,
			      "system_text", pub ? "published" : "holod", "system", rt->system, "user",
			      rt->task_text, "evicted", rt->fmt->turns.evicted, "observation", obs,
			      "result_turn", rt->fmt->turns.result_own_turn, "reasoning", rt->thinking,
			      "provider", "remote", "endpoint", rp->endpoint);
	free(obs);
	char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
	if (!text || journal_task_prompt(args->run->env->journal, args->t->id, text) < 0)
		log_warning("task %lld: cannot journal its prompt", (long long)args->t->id);
	free(text);
	json_decref(o);
	log_info("task %lld: %s history, %s format, model %s at %s", (long long)args->t->id,
		 ipc_history_to_string(rt->history), rt->fmt->name, rt->model, rp->endpoint);
	*ret = &rt->base;
	return 0;

close_task:
	remote_task_close(&rt->base);
	return r;
}

static int remote_observe(struct provider_task *pt, size_t index, const struct x11_frame *frame, char *err,
			  size_t errlen)
{
	struct remote_task *rt = (struct remote_task *)pt;

	if (index >= rt->cap) {
		size_t cap = MAX(rt->cap * 2, index + 16);
		rt->pngs = xreallocarray(rt->pngs, cap, sizeof(*rt->pngs));
		memset(rt->pngs + rt->cap, 0, (cap - rt->cap) * sizeof(*rt->pngs));
		rt->cap = cap;
	}
	/* An observation that left the window is never sent with its image again. */
	if (rt->keep && index >= rt->keep) {
		free(rt->pngs[index - rt->keep]);
		rt->pngs[index - rt->keep] = NULL;
	}
	rt->png_us = 0;
	if (!rt->keep)
		return 0;
	uint8_t *png = NULL;
	size_t n = 0;
	uint64_t t0 = time_mono_us();
	int r = x11_frame_encode_png(frame, &png, &n);
	if (r < 0) {
		snprintf(err, errlen, "cannot encode the screenshot as PNG: %s", strerror(-r));
		return r;
	}
	free(rt->pngs[index]); /* observed again: its step paused during its request */
	rt->pngs[index] = base64_data_url(png, n);
	free(png);
	rt->png_us = time_mono_us() - t0;
	return 0;
}

/* One observation's user turn: only text, or for vLLM the text with its "<image>" placeholder
 * and the image part, else text parts around the image part (the file's comment says why). */
static json_t *observation_content(const struct remote_task *rt, const struct provider_history *h, size_t i,
				   char **ret_text)
{
	bool image = rt->pngs[i] && i + rt->keep > h->index;
	struct policy_observation obs = {.result = h->results[i].text ? &h->results[i] : NULL};
	/* the result is in this turn unless the format gives it one of its own */
	char *text = rt->fmt->turns.result_own_turn ? policy_format_observation_text(rt->fmt, !image) :
						      policy_format_user_text(rt->fmt, &obs, !image);

	if (!text)
		return NULL;
	*ret_text = text;
	if (!image)
		return json_string(text);
	char *at = strstr(text, "<image>");
	json_t *parts = json_array();
	if (rt->vllm) {
		json_array_append_new(parts, json_pack("{s:s, s:s}", "type", "text", "text", text));
		json_array_append_new(parts, json_pack("{s:s, s:{s:s}}", "type", "image_url", "image_url",
						       "url", rt->pngs[i]));
		return parts;
	}
	if (at > text)
		json_array_append_new(parts, json_pack("{s:s, s:s%}", "type", "text", "text", text,
						       (size_t)(at - text)));
	json_array_append_new(parts, json_pack("{s:s, s:{s:s}}", "type", "image_url", "image_url", "url",
					       rt->pngs[i]));
	if (at[7])
		json_array_append_new(parts, json_pack("{s:s, s:s}", "type", "text", "text", at + 7));
	return parts;
}

/* The journal's text of a request: cut at AGENT_MAX_PROMPT_TEXT_BYTES with "[...]" (as
 * agent_prompt_text does), on a character boundary. */
static char *prompt_text_cut(const char *text, size_t len)
{
	static const char mark[] = "[...]";
	size_t k = AGENT_MAX_PROMPT_TEXT_BYTES - (sizeof(mark) - 1);

	if (len <= AGENT_MAX_PROMPT_TEXT_BYTES)
		return xstrdup(text);
	while (k > 0 && ((unsigned char)text[k] & 0xc0) == 0x80)
		k--;
	return xasprintf("%.*s%s", (int)k, text, mark);
}

static void prompt_text_add(struct remote_buf *pt, const char *role, const char *text)
{
	/* The history is bounded by the task's steps; the bound here only guards the sum. */
	if (remote_buf_add(pt, role, strlen(role)) == 0 && remote_buf_add(pt, text, strlen(text)) == 0)
		remote_buf_add(pt, "\n", 1);
}

/* The request body of a step and its text for the journal (images as "<image>"). */
static char *build_request(struct remote_task *rt, const struct provider_history *h, double temperature,
			   uint64_t seed, char **ret_prompt_text, char **ret_user_turn)
{
	json_t *msgs = json_array();
	struct remote_buf pt = {.max = REMOTE_MAX_RESPONSE_BYTES};
	char *req = NULL;

	json_array_append_new(msgs, json_pack("{s:s, s:s}", "role", "system", "content", rt->system));
	json_array_append_new(msgs, json_pack("{s:s, s:s}", "role", "user", "content", rt->task_text));
	for (size_t i = 0; i <= h->index; i++) {
		const struct policy_tool_result *res = h->results[i].text ? &h->results[i] : NULL;
		char *text = NULL;
		/* The previous action's result: a user message of its own before the observation
		 * when the format says so (both do), else the start of the observation's. */
		if (res && rt->fmt->turns.result_own_turn) {
			char *rtext = policy_format_result_text(rt->fmt, res);
			if (!rtext)
				goto finish;
			json_array_append_new(msgs, json_pack("{s:s, s:s}", "role", "user", "content", rtext));
			prompt_text_add(&pt, "User: ", rtext);
			free(rtext);
		}
		json_t *c = observation_content(rt, h, i, &text);
		if (!c)
			goto finish;
		json_array_append_new(msgs, json_pack("{s:s, s:o}", "role", "user", "content", c));
		/* The journal's prompt text: what this step's request holds past the prefix,
		 * as the local window writes it (cut at the bound). */
		prompt_text_add(&pt, "User: ", text);
		free(text);
		if (i == h->index) {
			struct policy_observation obs = {.result = res};
			*ret_user_turn = policy_format_user_text(rt->fmt, &obs, false);
			if (!*ret_user_turn)
				goto finish;
			break;
		}
		char *step = rt->fmt->step_to_json(&h->steps[i]);
		if (!step)
			goto finish;
		json_array_append_new(msgs, json_pack("{s:s, s:s}", "role", "assistant", "content", step));
		prompt_text_add(&pt, "Assistant: ", step);
		free(step);
	}
	json_t *schema = json_loads(rt->schema, 0, NULL);
	json_t *o = json_pack("{s:s, s:O, s:b, s:{s:b}, s:I, s:f, s:f, s:I}", "model", rt->model, "messages",
			      msgs, "stream", 1, "stream_options", "include_usage", 1, "max_tokens",
			      (json_int_t)rt->cfg->step_tokens, "temperature", temperature, "top_p",
			      rt->sampling.top_p, "seed", (json_int_t)(seed & 0x7fffffff));
	/* Thinking as both references ask for it (docs/policy.md, item 12): the templates that
	 * read it (vLLM, SGLang and llama.cpp's server pass chat_template_kwargs on) and the
	 * effort; the server's reasoning parser answers the block apart from the step. Sent only
	 * with thinking on (a strict server refuses arguments it does not know, HTTP 400), and
	 * no more once this task's server refused them (post()). */
	bool think_fields = rt->thinking && !rt->no_think_fields;
	if (o && think_fields)
		json_object_set_new(o, "chat_template_kwargs", json_pack("{s:b}", "enable_thinking", 1));
	if (o && think_fields)
		json_object_set_new(o, "reasoning_effort", json_string(REMOTE_REASONING_EFFORT));
	/* vLLM closes the block after this many tokens (with a reasoning parser configured);
	 * other servers have no such field: max_tokens bounds block and step together there */
	if (o && think_fields && rt->vllm)
		json_object_set_new(o, "thinking_token_budget", json_integer((json_int_t)rt->thinking_tokens));
	/* vLLM's own field; the OpenAI form, or the json_object form a server asked for */
	if (o && rt->vllm)
		json_object_set_new(o, "structured_outputs", json_pack("{s:O}", "json", schema));
	else if (o && rt->json_object)
		json_object_set_new(o, "response_format",
				    json_pack("{s:s, s:O}", "type", "json_object", "schema", schema));
	else if (o)
		json_object_set_new(o, "response_format",
				    json_pack("{s:s, s:{s:s, s:b, s:O}}", "type", "json_schema",
					      "json_schema", "name",
					      rt->fmt == &policy_format_holo3 ? "holo3_step" :
										"holo_nano_step",
					      "strict", 1, "schema", schema));
	req = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	json_decref(schema);
	*ret_prompt_text = prompt_text_cut(pt.data ? pt.data : "", pt.len);
finish:
	free(pt.data);
	json_decref(msgs);
	return req;
}

/* One request with its retries on 429/5xx. 0 with rep filled by a 200; -ECANCELED, -ETIME,
 * -EINTR (paused, during the request or a wait before a retry); else -errno with err filled. */
static int post(struct remote_task *rt, const char *body, struct remote_reply *rep, char *err, size_t errlen)
{
	struct remote_provider *rp = rt->rp;
	int r;

	for (unsigned attempt = 0;; attempt++) {
		remote_reply_finish(rep);
		remote_reply_init(rep, true, REMOTE_MAX_RESPONSE_BYTES);
		if ((r = transfer(rp, rt, rp->url, body, rep, err, errlen)) < 0)
			return r;
		if (rep->status == 200)
			break;
		bool transient = rep->status == 429 || rep->status >= 500;
		char detail[400] = "";
		if (rep->body.data) {
			json_t *o = json_loads(rep->body.data, 0, NULL);
			json_t *e = json_object_get(o, "error");
			const char *m = json_string_value(json_object_get(e, "message"));
			if (!m)
				m = json_string_value(e);
			if (m)
				snprintf(detail, sizeof(detail), ": %.300s", m);
			json_decref(o);
		}
		/* A server that does not know the json_schema form (llama-cpp-python's server
		 * takes {"type":"json_object","schema":S}) says so in a 400, a 422 or (that one)
		 * a 500: asked again at once in the other form, not retried as a failure. */
		if (!rt->vllm && !rt->json_object &&
		    (rep->status == 400 || rep->status == 422 || rep->status == 500) && rep->body.data &&
		    (strstr(rep->body.data, "response_format") || strstr(rep->body.data, "json_schema"))) {
			snprintf(err, errlen,
				 "the model server at %s refused the json_schema "
				 "response_format (HTTP %ld%s)",
				 rp->endpoint, rep->status, detail);
			return -ENOPROTOOPT;
		}
		/* A strict server refuses the thinking fields it does not know (HTTP 400 naming
		 * one): asked again at once without them, once per task. */
		if (rep->status == 400 && rt->thinking && !rt->no_think_fields && rep->body.data &&
		    (strstr(rep->body.data, "chat_template_kwargs") ||
		     strstr(rep->body.data, "reasoning_effort") ||
		     strstr(rep->body.data, "thinking_token_budget"))) {
			snprintf(err, errlen,
				 "the model server at %s refused the thinking "
				 "arguments (HTTP %ld%s)",
				 rp->endpoint, rep->status, detail);
			return -EOPNOTSUPP;
		}
		if (!transient || attempt >= rp->retries) {
			snprintf(err, errlen, "the model server at %s answered HTTP %ld%s%s", rp->endpoint,
				 rep->status, detail,
				 transient ? " (retries exhausted, --remote-retries)" : "");
			return -EPROTO;
		}
		uint64_t ms = (uint64_t)REMOTE_BACKOFF_BASE_MS << MIN(attempt, 16u);
		if (rep->retry_after_s >= 0)
			ms = (uint64_t)rep->retry_after_s * 1000;
		ms = MIN(ms, (uint64_t)REMOTE_MAX_BACKOFF_MS);
		log_info("task %lld: the model server answered HTTP %ld; retry %u of %u in %llu ms",
			 (long long)rt->t->id, rep->status, attempt + 1, rp->retries, (unsigned long long)ms);
		if ((r = wait_ms(rt, ms)) < 0)
			return r;
	}
	if ((r = remote_reply_end(rep)) < 0) {
		snprintf(err, errlen, "%s", rep->err);
		return r;
	}
	return 0;
}

/* A server without a reasoning parser sends the think block in the answer's text: what comes
 * before the first "</think>" (an opening "<think>" left out) is the reasoning, the step
 * follows it. A text that starts as a step (its "{") holds none, whatever its strings say. */
static void split_think(const char **text, size_t *len, char **ret_reasoning)
{
	static const char open[] = "<think>", close[] = POLICY_THINK_CLOSE;
	const char *t = *text, *end = t + *len;
	const char *s = t;

	while (s < end && (*s == ' ' || *s == '\n' || *s == '\r' || *s == '\t'))
		s++;
	if (s < end && *s == '{')
		return;
	const char *c = memmem(t, *len, close, sizeof(close) - 1);
	if (!c)
		return;
	if ((size_t)(end - s) >= sizeof(open) - 1 && memcmp(s, open, sizeof(open) - 1) == 0)
		t = s + sizeof(open) - 1;
	*ret_reasoning = agent_text_valid_utf8(t, (size_t)(c - t));
	*text = c + sizeof(close) - 1;
	*len = (size_t)(end - *text);
}

static int remote_step(struct provider_task *pt, const struct provider_history *h, uint64_t seed,
		       struct provider_step *ret)
{
	struct remote_task *rt = (struct remote_task *)pt;
	const struct agent_config *cfg = rt->cfg;
	struct remote_reply rep;
	int r = 0;

	remote_reply_init(&rep, true, REMOTE_MAX_RESPONSE_BYTES);
	ret->prompt_mode = rt->history == IPC_HISTORY_PERSISTENT ? "persistent" : "window";
	ret->as.provider = "remote";
	ret->as.preprocess_us = rt->png_us;
	ret->as.prompt_tokens = ret->as.completion_tokens = -1;
	for (ret->as.attempts = 1;; ret->as.attempts++) {
		double temp = rt->sampling.temperature;
		if (ret->as.attempts > 1 && temp <= 0.0)
			temp = RETRY_TEMPERATURE;
		char *ptext = NULL, *uturn = NULL;
		char *body = build_request(rt, h, temp, seed + (uint64_t)ret->as.attempts, &ptext, &uturn);
		if (!body) {
			free(ptext);
			free(uturn);
			r = -ENOMEM;
			snprintf(ret->err, sizeof(ret->err), "cannot write the request");
			break;
		}
		free(ret->prompt_text);
		free(ret->user_turn);
		ret->prompt_text = ptext;
		ret->user_turn = uturn;
		uint64_t t0 = time_mono_us();
		r = post(rt, body, &rep, ret->err, sizeof(ret->err));
		free(body);
		if (r == -ENOPROTOOPT) {
			log_info("task %lld: %s; asking with {\"type\": \"json_object\", \"schema\"} "
				 "instead",
				 (long long)rt->t->id, ret->err);
			rt->json_object = true;
			pthread_mutex_lock(&rt->rp->lock);
			rt->rp->json_object = true;
			pthread_mutex_unlock(&rt->rp->lock);
			ret->as.attempts--;
			ret->err[0] = '\0';
			continue;
		}
		if (r == -EOPNOTSUPP) {
			log_info("task %lld: %s; asking without them for the rest of the task",
				 (long long)rt->t->id, ret->err);
			rt->no_think_fields = true;
			ret->as.attempts--;
			ret->err[0] = '\0';
			continue;
		}
		ret->as.server_us += time_mono_us() - t0;
		free(ret->raw);
		ret->raw = agent_text_valid_utf8(rep.content.data ? rep.content.data : "", rep.content.len);
		const char *step_text = rep.content.data ? rep.content.data : "";
		size_t step_len = rep.content.len;
		free(ret->reasoning);
		ret->reasoning = NULL;
		if (rep.reasoning.len)
			ret->reasoning = agent_text_valid_utf8(rep.reasoning.data, rep.reasoning.len);
		else if (rt->thinking)
			split_think(&step_text, &step_len, &ret->reasoning);
		if (rep.prompt_tokens >= 0)
			ret->as.prompt_tokens = MAX(ret->as.prompt_tokens, 0) + rep.prompt_tokens;
		if (rep.completion_tokens >= 0)
			ret->as.completion_tokens = MAX(ret->as.completion_tokens, 0) + rep.completion_tokens;
		if (rep.model[0]) {
			free(ret->remote_model);
			ret->remote_model = xstrdup(rep.model);
		}
		if (r < 0)
			break;
		char perr[256];
		policy_step_finish(&ret->step);
		r = rt->fmt->step_parse(step_text, step_len, &ret->step, perr, sizeof(perr));
		if (r == 0)
			break;
		snprintf(ret->err, sizeof(ret->err), "invalid step: %s", perr);
		r = -EBADMSG;
		if (ret->as.attempts > (int)cfg->step_retries)
			break;
		log_info("task %lld: %s; retrying (attempt %d of %u)", (long long)rt->t->id, ret->err,
			 ret->as.attempts + 1, cfg->step_retries + 1);
	}
	ret->as.decode_us = ret->as.server_us;
	ret->as.remote_model = ret->remote_model;
	remote_reply_finish(&rep);
	return r;
}

static void remote_destroy(struct provider *p)
{
	struct remote_provider *rp = remote_of(p);
	free(rp->url);
	free(rp->models_url);
	free(rp->endpoint);
	free(rp->model);
	if (rp->auth) {
		/* The key leaves no copy behind in freed memory. */
		memset(rp->auth, 0, strlen(rp->auth));
		free(rp->auth);
	}
	free(rp->schema);
	free(rp->served_model);
	pthread_mutex_destroy(&rp->lock);
	free(rp);
}

static const struct provider_ops remote_ops = {
	.name = "remote",
	.state = remote_state,
	.wait_ready = remote_wait_ready,
	.error = remote_error,
	.provenance = remote_provenance,
	.task_open = remote_task_open,
	.observe = remote_observe,
	.step = remote_step,
	.task_close = remote_task_close,
	.status = remote_status,
	.destroy = remote_destroy,
};

/* ---- creation ---------------------------------------------------------------------------------- */

/* The key: the first line of the file, trimmed; printable ASCII only (it goes into a header). */
static int read_key(const char *path, char **ret, char *err, size_t errlen)
{
	char buf[REMOTE_MAX_KEY_BYTES + 1];
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC), r = 0;

	if (fd < 0) {
		r = -errno;
		snprintf(err, errlen, "cannot open the key file %s: %s", path, strerror(-r));
		return r;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		r = -EINVAL;
		snprintf(err, errlen, "the key file %s is not a regular file", path);
		goto close_fd;
	}
	if (st.st_mode & 077)
		log_warning("the key file %s can be read by other users (mode %03o); chmod 600 it", path,
			    (unsigned)(st.st_mode & 0777));
	ssize_t n = read(fd, buf, sizeof(buf));
	if (n < 0) {
		r = -errno;
		snprintf(err, errlen, "cannot read the key file %s: %s", path, strerror(-r));
		goto close_fd;
	}
	if (n > REMOTE_MAX_KEY_BYTES) {
		r = -E2BIG;
		snprintf(err, errlen, "the key file %s is over %d bytes", path, REMOTE_MAX_KEY_BYTES);
		goto close_fd;
	}
	size_t len = 0;
	while (len < (size_t)n && buf[len] != '\n' && buf[len] != '\r')
		len++;
	while (len && (buf[len - 1] == ' ' || buf[len - 1] == '\t'))
		len--;
	size_t start = 0;
	while (start < len && (buf[start] == ' ' || buf[start] == '\t'))
		start++;
	for (size_t i = start; i < len; i++)
		if ((unsigned char)buf[i] < 0x21 || (unsigned char)buf[i] > 0x7e) {
			r = -EINVAL;
			snprintf(err, errlen,
				 "the key in %s holds a character that is not printable "
				 "ASCII",
				 path);
			goto close_fd;
		}
	if (start == len) {
		r = -EINVAL;
		snprintf(err, errlen, "the key file %s is empty", path);
		goto close_fd;
	}
	*ret = xasprintf("Authorization: Bearer %.*s", (int)(len - start), buf + start);
close_fd:
	memset(buf, 0, sizeof(buf));
	close(fd);
	return r;
}

/* The chat completions URL, the models URL and the endpoint shown, from the configured URL. */
static int parse_url(struct remote_provider *rp, const char *url, char *err, size_t errlen)
{
	CURLU *u = curl_url();
	char *scheme = NULL, *host = NULL, *port = NULL, *path = NULL;
	int r = 0;

	if (!u)
		return -ENOMEM;
	if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
	    (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0)) {
		r = -EINVAL;
		snprintf(err, errlen, "--remote: not an http:// or https:// URL");
		goto cleanup;
	}
	curl_url_get(u, CURLUPART_PORT, &port, 0);
	curl_url_get(u, CURLUPART_PATH, &path, 0);
	/* The base: the path without a trailing "/chat/completions" or "/". */
	size_t plen = path ? strlen(path) : 0;
	static const char cc[] = "/chat/completions";
	if (plen >= sizeof(cc) - 1 && strcmp(path + plen - (sizeof(cc) - 1), cc) == 0)
		plen -= sizeof(cc) - 1;
	while (plen && path[plen - 1] == '/')
		plen--;
	rp->endpoint = xasprintf("%s://%s%s%s%.*s", scheme, host, port ? ":" : "", port ? port : "",
				 (int)plen, path ? path : "");
	/* The requests keep the URL's userinfo (basic auth) but no query or fragment. */
	char *full = NULL;
	curl_url_set(u, CURLUPART_QUERY, NULL, 0);
	curl_url_set(u, CURLUPART_FRAGMENT, NULL, 0);
	char *base_path = xasprintf("%.*s/chat/completions", (int)plen, path ? path : "");
	curl_url_set(u, CURLUPART_PATH, base_path, 0);
	free(base_path);
	curl_url_get(u, CURLUPART_URL, &full, 0);
	rp->url = xstrdup(full);
	curl_free(full);
	base_path = xasprintf("%.*s/models", (int)plen, path ? path : "");
	curl_url_set(u, CURLUPART_PATH, base_path, 0);
	free(base_path);
	curl_url_get(u, CURLUPART_URL, &full, 0);
	rp->models_url = xstrdup(full);
	curl_free(full);
cleanup:
	curl_free(scheme);
	curl_free(host);
	curl_free(port);
	curl_free(path);
	curl_url_cleanup(u);
	return r;
}

int provider_remote_server_from_string(const char *s)
{
	if (s && strcmp(s, "auto") == 0)
		return PROVIDER_REMOTE_AUTO;
	if (s && strcmp(s, "vllm") == 0)
		return PROVIDER_REMOTE_VLLM;
	if (s && strcmp(s, "openai") == 0)
		return PROVIDER_REMOTE_OPENAI;
	return -EINVAL;
}

struct provider *provider_remote_create(const struct provider_remote_config *c, char *err, size_t errlen)
{
	struct remote_provider *rp = xcalloc(1, sizeof(*rp));
	int r;

	rp->base.ops = &remote_ops;
	pthread_mutex_init(&rp->lock, NULL);
	rp->connect_timeout_s = c->connect_timeout_s;
	rp->timeout_s = c->timeout_s;
	rp->retries = c->retries;
	rp->images = c->images;
	rp->server = c->server;
	rp->vllm = c->server == PROVIDER_REMOTE_VLLM;
	if (c->model && c->model[0])
		rp->model = xstrdup(c->model);
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		r = -ENOMEM;
		snprintf(err, errlen, "cannot initialise libcurl");
		goto fail;
	}
	if ((r = parse_url(rp, c->url, err, errlen)) < 0)
		goto fail;
	if (c->key_file && (r = read_key(c->key_file, &rp->auth, err, errlen)) < 0)
		goto fail;
	rp->schema = policy_step_json_schema();
	if (!rp->schema) {
		r = -errno;
		snprintf(err, errlen, "cannot write the step schema: %s", strerror(-r));
		goto fail;
	}
	return &rp->base;

fail:
	remote_destroy(&rp->base);
	errno = -r;
	return NULL;
}
