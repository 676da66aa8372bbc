/* The task queue and its executor thread. The DESIGN comment in scheduler.h says who owns what. */
#include "scheduler.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"
#include "executor.h"

#define FINISH_RETRY_US 200000 /* journaling a task's end on a full disk: retry period */

struct task {
	int64_t id;
	struct ipc_task_request *req;
	atomic_int stop; /* enum executor_stop */
	struct task *next;
};

struct scheduler {
	char *display;
	unsigned settle_ms, max_steps, max_seconds, kill_switch_ms;
	char *state_dir;
	unsigned prune_days;
	struct agent_config agent;
	struct journal *journal;
	struct shotwriter *writer;

	pthread_mutex_t lock;
	pthread_cond_t wake;    /* executor: work queued or stopping */
	pthread_cond_t changed; /* waiters: progress counter moved or stopping */
	struct task *head, *tail;
	struct task *running;
	uint64_t progress;
	bool stopping;
	bool stopped;   /* the executor has been joined: every task is final */
	bool connected; /* the executor holds an X connection */
	char *stop_reason;

	pthread_t thread;
	bool started;
};

static void task_free(struct task *t)
{
	if (!t)
		return;
	ipc_task_request_destroy(t->req);
	free(t);
}

/* The first reason to stop a task is the one it ends with: a cancel or a kill switch that
 * arrives while holod is stopping must not turn 'interrupted' into 'cancelled'. */
static void task_stop(struct task *t, enum executor_stop why)
{
	int expected = EXECUTOR_RUN;
	atomic_compare_exchange_strong(&t->stop, &expected, (int)why);
}

static void bump_locked(struct scheduler *s)
{
	s->progress++;
	pthread_cond_broadcast(&s->changed);
}

void scheduler_notify(struct scheduler *s)
{
	pthread_mutex_lock(&s->lock);
	bump_locked(s);
	pthread_mutex_unlock(&s->lock);
}

static void notify_cb(void *userdata)
{
	scheduler_notify(userdata);
}

void scheduler_kill_switch(struct scheduler *s)
{
	pthread_mutex_lock(&s->lock);
	if (s->running) {
		log_warning("kill switch: stopping task %lld", (long long)s->running->id);
		task_stop(s->running, EXECUTOR_KILL);
	}
	pthread_mutex_unlock(&s->lock);
}

/* Runs on the kill switch's own thread. */
static void kill_switch_fired(void *userdata)
{
	scheduler_kill_switch(userdata);
}

/* The kill switch listens on the display of the tasks; it is armed before a task runs, and
 * retried before the next one when the display was not there yet. */
static void arm_kill_switch(struct scheduler *s, struct x11_killswitch **ks, bool *unsupported)
{
	if (*ks || *unsupported || !s->kill_switch_ms)
		return;
	*ks = x11_killswitch_create(s->display, s->kill_switch_ms, kill_switch_fired, s);
	if (*ks) {
		log_info("kill switch armed: press Escape twice within %u ms to stop a task",
			 s->kill_switch_ms);
	} else if (errno == ENOTSUP) {
		*unsupported = true;
		log_warning("no kill switch: the X server lacks XInput2; use holoctl cancel or "
			    "SIGTERM to stop a task");
	} else {
		log_debug_errno(-errno, "kill switch not armed yet");
	}
}

/* Journals a task's end. On a full disk whose reserve is already spent, the task would stay
 * 'running' in the journal for ever: retry until there is space or holod stops (its restart
 * then marks the task interrupted). The queue waits; the HTTP threads keep serving. */
static int finish_task(struct scheduler *s, int64_t id, const struct executor_outcome *out)
{
	int r = journal_task_finish(s->journal, id, out->status, time_real_us(), out->result,
				    out->error);
	if (r != -ENOSPC)
		return r;
	log_error_errno(r, "task %lld: cannot journal its end in %s; retrying until there is space",
			(long long)id, journal_path(s->journal));
	for (;;) {
		pthread_mutex_lock(&s->lock);
		bool stopping = s->stopping;
		pthread_mutex_unlock(&s->lock);
		if (stopping)
			return r;
		time_sleep_us(FINISH_RETRY_US);
		r = journal_task_finish(s->journal, id, out->status, time_real_us(), out->result,
					out->error);
		if (r != -ENOSPC)
			return r;
	}
}

void scheduler_prune_old(struct journal *j, const char *state_dir, unsigned days)
{
	uint64_t now = time_real_us(), age = (uint64_t)days * 86400u * 1000000u;
	uint64_t bytes = 0;
	int tasks = 0;

	if (!days || !state_dir)
		return;
	int r = journal_prune(j, state_dir, now > age ? now - age : 0, &tasks, &bytes);
	if (r < 0)
		log_warning_errno(r, "cannot prune tasks older than %u days from %s", days,
				  journal_path(j));
	else if (tasks > 0)
		log_info("pruned %d task(s) finished over %u days ago: %llu bytes of screenshots "
			 "freed", tasks, days, (unsigned long long)bytes);
}

static void *executor_main(void *userdata)
{
	struct scheduler *s = userdata;
	struct x11_display *d = NULL;
	struct x11_killswitch *ks = NULL;
	bool ks_unsupported = false;
	struct executor_env env = {
		.journal = s->journal, .writer = s->writer, .progress = notify_cb, .userdata = s};

	pthread_mutex_lock(&s->lock);
	for (;;) {
		while (!s->head && !s->stopping)
			pthread_cond_wait(&s->wake, &s->lock);
		if (s->stopping)
			break;
		struct task *t = s->head;
		s->head = t->next;
		if (!s->head)
			s->tail = NULL;
		s->running = t;
		pthread_mutex_unlock(&s->lock);

		/* The connection kept from the last task: read the screen's size again (it may have
		 * been resized since); if its server went away meanwhile, drop it and the kill
		 * switch with it, so that both start over on the display as it is now. */
		if (d && x11_display_refresh(d) < 0) {
			x11_display_close(d);
			d = NULL;
			x11_killswitch_destroy(ks);
			ks = NULL;
		}
		arm_kill_switch(s, &ks, &ks_unsupported);
		int r = journal_task_start(s->journal, t->id, time_real_us());
		if (r < 0)
			log_warning_errno(r, "task %lld: cannot journal its start", (long long)t->id);
		scheduler_notify(s);

		const struct ipc_task_options *o = &t->req->options;
		struct executor_task et = {
			.id = t->id,
			.req = t->req,
			.settle_ms = o->settle_ms >= 0 ? (unsigned)o->settle_ms : s->settle_ms,
			.max_steps = o->max_steps ? o->max_steps : s->max_steps,
			.max_seconds = o->max_seconds ? o->max_seconds : s->max_seconds,
			.stop = &t->stop,
		};
		struct executor_outcome out = {0};
		if (t->req->kind == IPC_TASK_KIND_INSTRUCTION) {
			log_info("task %lld: running an instruction%s", (long long)t->id,
				 o->dry_run ? " (dry run)" : "");
			agent_run(&s->agent, &env, &d, s->display, &et, &out);
		} else {
			log_info("task %lld: running %zu actions%s", (long long)t->id,
				 t->req->n_actions, o->dry_run ? " (dry run)" : "");
			executor_run(&env, &d, s->display, &et, &out);
		}
		if (!d && ks) {
			/* The executor dropped its X connection (the X session ended): the kill
			 * switch's went with it, so arm a new one with the next connection. */
			x11_killswitch_destroy(ks);
			ks = NULL;
		}

		/* A task is not done before its screenshots are: one that could not be written
		 * (a full disk) fails a task that would otherwise have succeeded. */
		shotwriter_sync(s->writer);
		char shoterr[512];
		if (out.status == IPC_TASK_SUCCEEDED &&
		    shotwriter_task_error(s->writer, t->id, shoterr, sizeof(shoterr)) < 0) {
			free(out.result);
			executor_outcome_set(&out, IPC_TASK_FAILED, NULL, "%s", shoterr);
		}

		pthread_mutex_lock(&s->lock);
		s->connected = d != NULL;
		if (out.status == IPC_TASK_INTERRUPTED && !out.error)
			out.error = xstrdup(s->stop_reason ? s->stop_reason : "holod stopped");
		pthread_mutex_unlock(&s->lock);

		r = finish_task(s, t->id, &out);
		if (r < 0 && r != -ENOSPC) /* finish_task said why */
			log_error_errno(r, "task %lld: cannot journal its end in %s", (long long)t->id,
					journal_path(s->journal));
		log_info("task %lld: %s%s%s", (long long)t->id, ipc_task_status_to_string(out.status),
			 out.error ? ": " : "", out.error ? out.error : "");
		scheduler_prune_old(s->journal, s->state_dir, s->prune_days);
		free(out.result);
		free(out.error);

		pthread_mutex_lock(&s->lock);
		s->running = NULL;
		task_free(t);
		bump_locked(s);
	}
	pthread_mutex_unlock(&s->lock);
	x11_killswitch_destroy(ks);
	x11_display_close(d);
	return NULL;
}

struct scheduler *scheduler_create(const struct scheduler_config *cfg, struct journal *j,
				   struct shotwriter *w)
{
	struct scheduler *s = xcalloc(1, sizeof(*s));
	int r;

	s->display = cfg->display ? xstrdup(cfg->display) : NULL;
	s->settle_ms = cfg->settle_ms;
	s->max_steps = cfg->max_steps;
	s->max_seconds = cfg->max_seconds;
	s->kill_switch_ms = cfg->kill_switch_ms;
	s->state_dir = cfg->state_dir ? xstrdup(cfg->state_dir) : NULL;
	s->prune_days = cfg->prune_days;
	s->agent = cfg->agent;
	s->journal = j;
	s->writer = w;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->wake, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->changed, &ca);
	pthread_condattr_destroy(&ca);
	if ((r = pthread_create(&s->thread, NULL, executor_main, s)) != 0) {
		scheduler_destroy(s);
		errno = r;
		return NULL;
	}
	s->started = true;
	return s;
}

void scheduler_stop(struct scheduler *s, const char *reason)
{
	pthread_mutex_lock(&s->lock);
	if (s->stopping) {
		pthread_mutex_unlock(&s->lock);
		goto join;
	}
	s->stopping = true;
	s->stop_reason = xstrdup(reason);
	while (s->head) {
		struct task *t = s->head;
		s->head = t->next;
		journal_task_finish(s->journal, t->id, IPC_TASK_INTERRUPTED, time_real_us(), NULL,
				    "holod stopped before the task started");
		task_free(t);
	}
	s->tail = NULL;
	if (s->running)
		task_stop(s->running, EXECUTOR_SHUTDOWN);
	pthread_cond_broadcast(&s->wake);
	bump_locked(s);
	pthread_mutex_unlock(&s->lock);
join:
	if (s->started) {
		pthread_join(s->thread, NULL);
		s->started = false;
	}
	pthread_mutex_lock(&s->lock);
	s->stopped = true;
	bump_locked(s);
	pthread_mutex_unlock(&s->lock);
}

void scheduler_destroy(struct scheduler *s)
{
	if (!s)
		return;
	scheduler_stop(s, "holod stopped");
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->wake);
	pthread_cond_destroy(&s->changed);
	free(s->display);
	free(s->state_dir);
	free(s->stop_reason);
	free(s);
}

int scheduler_submit(struct scheduler *s, struct ipc_task_request *req, int64_t *ret_id)
{
	char *spec = ipc_task_request_to_json(req);
	int64_t id;
	int r;

	if (!spec) {
		ipc_task_request_destroy(req);
		return -ENOMEM;
	}
	pthread_mutex_lock(&s->lock);
	if (s->stopping) {
		r = -ESHUTDOWN;
		goto unlock;
	}
	/* Journal and enqueue under one lock hold: a task is never 'queued' in the journal
	 * without being in the queue, so cancel can trust what it finds. */
	if ((r = journal_task_insert(s->journal, req->kind, spec, s->display, time_real_us(),
				     &id)) < 0)
		goto unlock;
	struct task *t = xcalloc(1, sizeof(*t));
	t->id = id;
	t->req = req;
	req = NULL;
	atomic_init(&t->stop, EXECUTOR_RUN);
	if (s->tail)
		s->tail->next = t;
	else
		s->head = t;
	s->tail = t;
	pthread_cond_signal(&s->wake);
	bump_locked(s);
	log_info("task %lld: queued", (long long)id);
	*ret_id = id;
unlock:
	pthread_mutex_unlock(&s->lock);
	ipc_task_request_destroy(req);
	free(spec);
	return r;
}

int scheduler_cancel(struct scheduler *s, int64_t id)
{
	enum ipc_task_status status;
	int r;

	pthread_mutex_lock(&s->lock);
	if (s->running && s->running->id == id) {
		task_stop(s->running, EXECUTOR_CANCEL);
		pthread_mutex_unlock(&s->lock);
		return 1;
	}
	for (struct task **p = &s->head, *prev = NULL; *p; prev = *p, p = &(*p)->next) {
		if ((*p)->id != id)
			continue;
		struct task *t = *p;
		*p = t->next;
		if (s->tail == t)
			s->tail = prev;
		r = journal_task_finish(s->journal, id, IPC_TASK_CANCELLED, time_real_us(), NULL,
					"cancelled before it started");
		task_free(t);
		bump_locked(s);
		pthread_mutex_unlock(&s->lock);
		return r < 0 ? r : 0;
	}
	pthread_mutex_unlock(&s->lock);
	r = journal_task_status(s->journal, id, &status);
	if (r < 0)
		return r;
	return ipc_task_status_is_final(status) ? -EALREADY : -ENOENT;
}

json_t *scheduler_snapshot(struct scheduler *s)
{
	json_t *queue = json_array();
	pthread_mutex_lock(&s->lock);
	for (struct task *t = s->head; t && queue; t = t->next)
		json_array_append_new(queue, json_integer(t->id));
	json_t *o = json_pack("{s:o, s:o, s:o, s:b}", "running",
			      s->running ? json_integer(s->running->id) : json_null(), "queue",
			      queue ? queue : json_array(), "display",
			      s->display ? json_string(s->display) : json_null(), "connected",
			      s->connected);
	pthread_mutex_unlock(&s->lock);
	return o;
}

uint64_t scheduler_progress(struct scheduler *s)
{
	pthread_mutex_lock(&s->lock);
	uint64_t p = s->progress;
	pthread_mutex_unlock(&s->lock);
	return p;
}

uint64_t scheduler_wait(struct scheduler *s, uint64_t seen, unsigned timeout_ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += timeout_ms / 1000;
	ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&s->lock);
	while (s->progress == seen)
		if (pthread_cond_timedwait(&s->changed, &s->lock, &ts) == ETIMEDOUT)
			break;
	uint64_t p = s->progress;
	pthread_mutex_unlock(&s->lock);
	return p;
}

bool scheduler_stopped(struct scheduler *s)
{
	pthread_mutex_lock(&s->lock);
	bool b = s->stopped;
	pthread_mutex_unlock(&s->lock);
	return b;
}
