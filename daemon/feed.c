/* A task's progress events for its followers (see feed.h). */
#include "feed.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

struct feed_sub {
	struct feed *f;
	int64_t task;
	char *buf; /* lines not taken yet */
	size_t len;
	unsigned long long dropped; /* events beyond FEED_MAX_QUEUED_BYTES since the last take */
	struct feed_sub *next;
};

struct feed {
	pthread_mutex_t lock;
	pthread_mutex_t order; /* feed_order_begin/end (feed.h) */
	struct feed_sub *subs; /* under lock */
	atomic_int n_subs;     /* their count, read without the lock */
	void (*wake)(void *arg);
	void *arg;
};

struct feed *feed_create(void (*wake)(void *arg), void *arg)
{
	struct feed *f = xcalloc(1, sizeof(*f));
	pthread_mutex_init(&f->lock, NULL);
	pthread_mutex_init(&f->order, NULL);
	atomic_init(&f->n_subs, 0);
	f->wake = wake;
	f->arg = arg;
	return f;
}

void feed_destroy(struct feed *f)
{
	if (!f)
		return;
	while (f->subs)
		feed_unsubscribe(f->subs);
	pthread_mutex_destroy(&f->lock);
	pthread_mutex_destroy(&f->order);
	free(f);
}

struct feed_sub *feed_subscribe(struct feed *f, int64_t task)
{
	struct feed_sub *s = xcalloc(1, sizeof(*s));
	s->f = f;
	s->task = task;
	pthread_mutex_lock(&f->lock);
	s->next = f->subs;
	f->subs = s;
	atomic_fetch_add(&f->n_subs, 1);
	pthread_mutex_unlock(&f->lock);
	return s;
}

void feed_unsubscribe(struct feed_sub *s)
{
	if (!s)
		return;
	struct feed *f = s->f;
	pthread_mutex_lock(&f->lock);
	for (struct feed_sub **p = &f->subs; *p; p = &(*p)->next)
		if (*p == s) {
			*p = s->next;
			atomic_fetch_sub(&f->n_subs, 1);
			break;
		}
	pthread_mutex_unlock(&f->lock);
	free(s->buf);
	free(s);
}

static bool wanted_locked(struct feed *f, int64_t task)
{
	for (struct feed_sub *s = f->subs; s; s = s->next)
		if (s->task == task)
			return true;
	return false;
}

bool feed_wanted(struct feed *f, int64_t task)
{
	if (!f || atomic_load_explicit(&f->n_subs, memory_order_relaxed) == 0)
		return false;
	pthread_mutex_lock(&f->lock);
	bool w = wanted_locked(f, task);
	pthread_mutex_unlock(&f->lock);
	return w;
}

static void append(char **buf, size_t *len, const char *line, size_t n)
{
	*buf = xrealloc(*buf, *len + n + 2);
	memcpy(*buf + *len, line, n);
	(*buf)[*len + n] = '\n';
	*len += n + 1;
	(*buf)[*len] = '\0';
}

static void queue_event(struct feed *f, int64_t task, json_t *o);

void feed_progress(struct feed *f, int64_t task, int step, uint64_t step_t0_us, const char *phase,
		   const char *fmt, ...)
{
	if (!feed_wanted(f, task))
		return;
	json_t *o = json_pack("{s:s, s:I}", "event", "progress", "task_id", (json_int_t)task);
	if (!o)
		return;
	if (step >= 0)
		json_object_set_new(o, "step", json_integer(step));
	json_object_set_new(o, "phase", json_string(phase));
	if (step_t0_us) {
		uint64_t now = time_mono_us();
		json_object_set_new(o, "elapsed_ms",
				    json_integer(now > step_t0_us ? (json_int_t)((now - step_t0_us) / 1000) :
								    0));
	}
	if (fmt) {
		va_list ap;
		va_start(ap, fmt);
		json_t *more = json_vpack_ex(NULL, 0, fmt, ap);
		va_end(ap);
		if (!more) {
			json_decref(o);
			return;
		}
		json_object_update(o, more);
		json_decref(more);
	}
	queue_event(f, task, o);
}

void feed_status(struct feed *f, int64_t task, const char *status)
{
	if (!feed_wanted(f, task))
		return;
	queue_event(f, task,
		    json_pack("{s:s, s:I, s:s}", "event", "status", "task_id", (json_int_t)task, "status",
			      status));
}

/* Queues o (taken) for the task's followers. */
static void queue_event(struct feed *f, int64_t task, json_t *o)
{
	char *line = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
	json_decref(o);
	if (!line)
		return;
	size_t n = strlen(line);
	bool queued = false;
	pthread_mutex_lock(&f->lock);
	for (struct feed_sub *s = f->subs; s; s = s->next) {
		if (s->task != task)
			continue;
		if (s->len + n + 1 > FEED_MAX_QUEUED_BYTES) {
			s->dropped++;
			continue;
		}
		append(&s->buf, &s->len, line, n);
		queued = true;
	}
	pthread_mutex_unlock(&f->lock);
	free(line);
	if (queued && f->wake)
		f->wake(f->arg);
}

void feed_order_begin(struct feed *f)
{
	if (f)
		pthread_mutex_lock(&f->order);
}

void feed_order_end(struct feed *f)
{
	if (f)
		pthread_mutex_unlock(&f->order);
}

size_t feed_take(struct feed_sub *s, char **buf, size_t *len)
{
	struct feed *f = s->f;
	size_t before = *len;
	pthread_mutex_lock(&f->lock);
	if (s->len) {
		*buf = xrealloc(*buf, *len + s->len + 1);
		memcpy(*buf + *len, s->buf, s->len);
		*len += s->len;
		(*buf)[*len] = '\0';
		free(s->buf);
		s->buf = NULL;
		s->len = 0;
	}
	/* after the lines queued before them */
	if (s->dropped) {
		char line[160];
		int n = snprintf(line, sizeof(line),
				 "{\"event\":\"progress\",\"task_id\":%lld,\"phase\":\"dropped\","
				 "\"events\":%llu}",
				 (long long)s->task, s->dropped);
		append(buf, len, line, (size_t)n);
		s->dropped = 0;
	}
	pthread_mutex_unlock(&f->lock);
	return *len - before;
}
