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
#include "feed.h"
#include "ground.h"

#define FINISH_RETRY_US 200000 /* journaling a task's end on a full disk: retry period */

struct task {
	int64_t id;
	struct ipc_task_request *req;
	atomic_int stop; /* enum executor_stop */
	struct task *next;
	/* What the running task waits for from its user (under the scheduler's lock): the
	 * executor's wait, on its stack while it waits; answered once an answer is in it. */
	struct executor_wait *wait;
	uint64_t wait_since_us; /* real time */
	bool answered;
	/* holoctl pause (under the scheduler's lock): asked, and holding between two steps;
	 * takeover: a person's input on the display asked it (told to the model on resume) */
	bool pause, paused, takeover;
	/* `pause`, read without the lock by the step's decode (executor_task.pause) */
	atomic_bool pause_asked;
};

/* One display and its executor thread. */
struct lane {
	struct scheduler *s;
	size_t index;
	char *display;	      /* NULL: $DISPLAY at connect time */
	struct task *running; /* under the scheduler's lock */
	bool connected;	      /* the executor holds an X connection (under the lock) */
	pthread_t thread;
	bool started;
};

struct scheduler {
	struct lane *lanes;
	size_t n_lanes;
	unsigned settle_ms, max_steps, max_seconds, kill_switch_ms;
	unsigned ask_timeout_s, approve_timeout_s;
	enum ipc_approve approve;
	const struct approval_rules *approval_rules;
	enum ipc_takeover takeover;
	char *state_dir;
	unsigned prune_days;
	struct agent_config agent;
	struct journal *journal;
	struct shotwriter *writer;

	pthread_mutex_t lock;
	pthread_cond_t wake;	/* executors: work queued or stopping (broadcast: a task may be
				   for one display only) */
	pthread_cond_t changed; /* waiters: progress counter moved or stopping */
	struct task *head, *tail;
	uint64_t progress;
	uint64_t journal_progress; /* the part of `progress` that the journal or the queue moved */
	struct feed *feed;	   /* the running tasks' progress events (feed.h) */
	bool stopping;
	bool stopped; /* the executors have been joined: every task is final */
	char *stop_reason;
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
	s->journal_progress++;
	pthread_cond_broadcast(&s->changed);
}

/* A progress event was queued for a follower: the waiters wake, and need not read the
 * journal again for it. */
static void feed_wake(void *userdata)
{
	struct scheduler *s = userdata;
	pthread_mutex_lock(&s->lock);
	s->progress++;
	pthread_cond_broadcast(&s->changed);
	pthread_mutex_unlock(&s->lock);
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

void scheduler_kill_switch(struct scheduler *s, size_t index)
{
	if (index >= s->n_lanes)
		return;
	struct lane *l = &s->lanes[index];
	pthread_mutex_lock(&s->lock);
	if (l->running) {
		log_warning("kill switch of display %s: stopping task %lld",
			    l->display ? l->display : "$DISPLAY", (long long)l->running->id);
		task_stop(l->running, EXECUTOR_KILL);
	}
	pthread_mutex_unlock(&s->lock);
}

void scheduler_takeover(struct scheduler *s, size_t index)
{
	if (index >= s->n_lanes)
		return;
	struct lane *l = &s->lanes[index];
	pthread_mutex_lock(&s->lock);
	struct task *t = l->running;
	enum ipc_takeover mode = t ? t->req->options.takeover : IPC_TAKEOVER_IGNORE;
	if (mode == IPC_TAKEOVER_DEFAULT)
		mode = s->takeover == IPC_TAKEOVER_DEFAULT ? IPC_TAKEOVER_PAUSE : s->takeover;
	if (t && mode == IPC_TAKEOVER_PAUSE && !t->pause) {
		log_warning("input of a person on %s: pausing task %lld (holoctl resume %lld "
			    "hands it back)",
			    l->display ? l->display : "$DISPLAY", (long long)t->id, (long long)t->id);
		t->pause = t->takeover = true;
		atomic_store(&t->pause_asked, true);
		bump_locked(s);
	} else if (t && mode == IPC_TAKEOVER_CANCEL && atomic_load(&t->stop) == EXECUTOR_RUN) {
		log_warning("input of a person on %s: cancelling task %lld",
			    l->display ? l->display : "$DISPLAY", (long long)t->id);
		task_stop(t, EXECUTOR_CANCEL);
	}
	pthread_mutex_unlock(&s->lock);
}

/* Runs on the listener's thread. */
static void takeover_input(void *userdata)
{
	struct lane *l = userdata;
	scheduler_takeover(l->s, l->index);
}

/* Runs on the kill switch's own thread. */
static void kill_switch_fired(void *userdata)
{
	struct lane *l = userdata;
	scheduler_kill_switch(l->s, l->index);
}

/* The kill switch listens on the display of the lane's tasks; it is armed before a task runs,
 * and retried before the next one when the display was not there yet. */
static void arm_kill_switch(struct lane *l, struct x11_killswitch **ks, bool *unsupported)
{
	struct scheduler *s = l->s;
	if (*ks || *unsupported)
		return;
	/* the same listener sees a person's input for takeover, whose mode is per task */
	*ks = x11_killswitch_create_input(l->display, s->kill_switch_ms,
					  s->kill_switch_ms ? kill_switch_fired : NULL, takeover_input, l);
	if (*ks && s->kill_switch_ms) {
		log_info("kill switch armed on %s: press Escape twice within %u ms to stop a task",
			 l->display ? l->display : "$DISPLAY", s->kill_switch_ms);
	} else if (*ks) {
		log_info("takeover listener armed on %s", l->display ? l->display : "$DISPLAY");
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
	int r = journal_task_finish(s->journal, id, out->status, time_real_us(), out->result, out->error);
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
		r = journal_task_finish(s->journal, id, out->status, time_real_us(), out->result, out->error);
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
		log_warning_errno(r, "cannot prune tasks older than %u days from %s", days, journal_path(j));
	else if (tasks > 0)
		log_info("pruned %d task(s) finished over %u days ago: %llu bytes of screenshots "
			 "freed",
			 tasks, days, (unsigned long long)bytes);
}

/* The running task `id` (under the lock), or NULL. */
static struct task *running_locked(struct scheduler *s, int64_t id)
{
	for (size_t i = 0; i < s->n_lanes; i++)
		if (s->lanes[i].running && s->lanes[i].running->id == id)
			return s->lanes[i].running;
	return NULL;
}

/* How long a wait sleeps between two looks at the task's stop flag, which cancel and the kill
 * switch set without a broadcast. */
#define WAIT_POLL_US 20000

/* executor_env.wait_user: runs on the executor thread. */
static int wait_user(void *userdata, const struct executor_task *et, struct executor_wait *w)
{
	struct scheduler *s = userdata;
	uint64_t end = time_mono_us() + w->timeout_us;
	int r;

	pthread_mutex_lock(&s->lock);
	struct task *t = running_locked(s, et->id);
	if (!t) {
		pthread_mutex_unlock(&s->lock);
		return -ENOENT;
	}
	t->wait = w;
	t->wait_since_us = time_real_us();
	t->answered = false;
	bump_locked(s);
	for (;;) {
		if (t->answered) {
			r = 0;
			break;
		}
		if (atomic_load(&t->stop) != EXECUTOR_RUN) {
			r = -ECANCELED;
			break;
		}
		uint64_t now = time_mono_us();
		if (now >= w->deadline_us) {
			r = -ETIME;
			break;
		}
		if (now >= end) {
			r = -ETIMEDOUT;
			break;
		}
		uint64_t until = MIN(MIN(end, w->deadline_us), now + WAIT_POLL_US);
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		uint64_t ns = (uint64_t)ts.tv_nsec + (until - now) * 1000ull;
		ts.tv_sec += (time_t)(ns / 1000000000ull);
		ts.tv_nsec = (long)(ns % 1000000000ull);
		pthread_cond_timedwait(&s->changed, &s->lock, &ts);
	}
	t->wait = NULL;
	t->answered = false;
	bump_locked(s);
	pthread_mutex_unlock(&s->lock);
	return r;
}

/* executor_env.taken_over: runs on the executor thread. */
static bool taken_over(void *userdata, const struct executor_task *et)
{
	struct scheduler *s = userdata;
	pthread_mutex_lock(&s->lock);
	struct task *t = running_locked(s, et->id);
	bool b = t && t->pause && t->takeover;
	pthread_mutex_unlock(&s->lock);
	return b;
}

/* executor_env.pause_point: runs on the executor thread, between two steps. */
static int pause_point(void *userdata, const struct executor_task *et, uint64_t *ret_held_us,
		       bool *ret_takeover)
{
	struct scheduler *s = userdata;
	int r = 1;

	*ret_held_us = 0;
	*ret_takeover = false;
	pthread_mutex_lock(&s->lock);
	struct task *t = running_locked(s, et->id);
	if (!t || !t->pause || atomic_load(&t->stop) != EXECUTOR_RUN) {
		pthread_mutex_unlock(&s->lock);
		return 0;
	}
	uint64_t t0 = time_mono_us();
	t->paused = true;
	bump_locked(s);
	pthread_mutex_unlock(&s->lock);
	log_info("task %lld: paused", (long long)et->id);
	feed_status(s->feed, et->id, "paused");

	pthread_mutex_lock(&s->lock);
	while (t->pause) {
		if (atomic_load(&t->stop) != EXECUTOR_RUN) {
			r = -ECANCELED;
			break;
		}
		/* the stop flag is set without a broadcast: look at it every WAIT_POLL_US */
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		uint64_t ns = (uint64_t)ts.tv_nsec + WAIT_POLL_US * 1000ull;
		ts.tv_sec += (time_t)(ns / 1000000000ull);
		ts.tv_nsec = (long)(ns % 1000000000ull);
		pthread_cond_timedwait(&s->changed, &s->lock, &ts);
	}
	*ret_takeover = t->takeover;
	t->pause = t->paused = t->takeover = false;
	atomic_store(&t->pause_asked, false);
	bump_locked(s);
	pthread_mutex_unlock(&s->lock);
	*ret_held_us = time_mono_us() - t0;
	if (r == 1) {
		log_info("task %lld: resumed after %.1f s", (long long)et->id, *ret_held_us / 1e6);
		feed_status(s->feed, et->id, "running");
	}
	return r;
}

/* The oldest queued task that this lane may run: one naming its display, or none. */
static struct task *take_locked(struct scheduler *s, struct lane *l)
{
	for (struct task **p = &s->head, *prev = NULL; *p; prev = *p, p = &(*p)->next) {
		const char *want = (*p)->req->options.display;
		if (want && (!l->display || strcmp(want, l->display) != 0))
			continue;
		struct task *t = *p;
		*p = t->next;
		if (s->tail == t)
			s->tail = prev;
		t->next = NULL;
		return t;
	}
	return NULL;
}

static void *executor_main(void *userdata)
{
	struct lane *l = userdata;
	struct scheduler *s = l->s;
	struct x11_display *d = NULL;
	struct x11_killswitch *ks = NULL;
	bool ks_unsupported = false;
	struct executor_env env = {.journal = s->journal,
				   .writer = s->writer,
				   .state_dir = s->state_dir,
				   .progress = notify_cb,
				   .userdata = s,
				   .feed = s->feed,
				   /* Scripts' grounded actions ask the model (http.c refuses them
				    * without one). */
				   .ground = s->agent.worker ? ground_locate : NULL,
				   .ground_ctx = &s->agent,
				   .wait_user = wait_user,
				   .pause_point = pause_point,
				   .secrets = s->agent.secrets,
				   .approval_rules = s->approval_rules,
				   .taken_over = taken_over};

	pthread_mutex_lock(&s->lock);
	for (;;) {
		struct task *t = NULL;
		while (!s->stopping && !(t = take_locked(s, l)))
			pthread_cond_wait(&s->wake, &s->lock);
		if (s->stopping)
			break;
		l->running = t;
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
		arm_kill_switch(l, &ks, &ks_unsupported);
		int r = journal_task_start(s->journal, t->id, l->display, time_real_us());
		if (r < 0)
			log_warning_errno(r, "task %lld: cannot journal its start", (long long)t->id);
		scheduler_notify(s);
		feed_status(s->feed, t->id, ipc_task_status_to_string(IPC_TASK_RUNNING));

		const struct ipc_task_options *o = &t->req->options;
		struct executor_task et = {
			.id = t->id,
			.req = t->req,
			.settle_ms = o->settle_ms >= 0 ? (unsigned)o->settle_ms : s->settle_ms,
			.max_steps = o->max_steps ? o->max_steps : s->max_steps,
			.max_seconds = o->max_seconds ? o->max_seconds : s->max_seconds,
			.ask_timeout_s = o->ask_timeout ? o->ask_timeout : s->ask_timeout_s,
			.approve = o->approve != IPC_APPROVE_DEFAULT ? o->approve : s->approve,
			.approve_timeout_s = s->approve_timeout_s,
			.stop = &t->stop,
			.pause = &t->pause_asked,
		};
		struct executor_outcome out = {0};
		if (t->req->kind == IPC_TASK_KIND_INSTRUCTION) {
			log_info("task %lld: running an instruction on %s%s", (long long)t->id,
				 l->display ? l->display : "$DISPLAY", o->dry_run ? " (dry run)" : "");
			agent_run(&s->agent, &env, &d, l->display, &et, &out);
		} else {
			log_info("task %lld: running %zu actions on %s%s", (long long)t->id, t->req->n_actions,
				 l->display ? l->display : "$DISPLAY", o->dry_run ? " (dry run)" : "");
			executor_run(&env, &d, l->display, &et, &out);
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
		l->connected = d != NULL;
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
		l->running = NULL;
		task_free(t);
		bump_locked(s);
	}
	pthread_mutex_unlock(&s->lock);
	x11_killswitch_destroy(ks);
	x11_display_close(d);
	return NULL;
}

struct scheduler *scheduler_create(const struct scheduler_config *cfg, struct journal *j, struct shotwriter *w)
{
	struct scheduler *s;
	int r;

	if (cfg->n_displays > SCHEDULER_MAX_DISPLAYS) {
		errno = E2BIG;
		return NULL;
	}
	for (size_t i = 0; i < cfg->n_displays; i++)
		for (size_t k = 0; k < i; k++)
			if (!cfg->displays[i] || !cfg->displays[k] ||
			    strcmp(cfg->displays[i], cfg->displays[k]) == 0) {
				errno = EINVAL;
				return NULL;
			}
	s = xcalloc(1, sizeof(*s));
	s->n_lanes = cfg->n_displays ? cfg->n_displays : 1;
	s->lanes = xcalloc(s->n_lanes, sizeof(*s->lanes));
	for (size_t i = 0; i < s->n_lanes; i++) {
		s->lanes[i].s = s;
		s->lanes[i].index = i;
		if (cfg->n_displays && cfg->displays[i])
			s->lanes[i].display = xstrdup(cfg->displays[i]);
	}
	s->settle_ms = cfg->settle_ms;
	s->max_steps = cfg->max_steps;
	s->max_seconds = cfg->max_seconds;
	s->kill_switch_ms = cfg->kill_switch_ms;
	s->takeover = cfg->takeover;
	s->ask_timeout_s = cfg->ask_timeout_s;
	s->approve = cfg->approve == IPC_APPROVE_DEFAULT ? IPC_APPROVE_NONE : cfg->approve;
	s->approve_timeout_s = cfg->approve_timeout_s;
	s->approval_rules = cfg->approval_rules;
	s->state_dir = cfg->state_dir ? xstrdup(cfg->state_dir) : NULL;
	s->prune_days = cfg->prune_days;
	s->agent = cfg->agent;
	s->journal = j;
	s->writer = w;
	s->feed = feed_create(feed_wake, s);
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->wake, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->changed, &ca);
	pthread_condattr_destroy(&ca);
	for (size_t i = 0; i < s->n_lanes; i++) {
		if ((r = pthread_create(&s->lanes[i].thread, NULL, executor_main, &s->lanes[i])) != 0) {
			scheduler_destroy(s);
			errno = r;
			return NULL;
		}
		s->lanes[i].started = true;
	}
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
	for (size_t i = 0; i < s->n_lanes; i++)
		if (s->lanes[i].running)
			task_stop(s->lanes[i].running, EXECUTOR_SHUTDOWN);
	pthread_cond_broadcast(&s->wake);
	bump_locked(s);
	pthread_mutex_unlock(&s->lock);
join:
	for (size_t i = 0; i < s->n_lanes; i++)
		if (s->lanes[i].started) {
			pthread_join(s->lanes[i].thread, NULL);
			s->lanes[i].started = false;
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
	for (size_t i = 0; i < s->n_lanes; i++)
		free(s->lanes[i].display);
	free(s->lanes);
	feed_destroy(s->feed);
	free(s->state_dir);
	free(s->stop_reason);
	free(s);
}

static struct lane *find_lane(struct scheduler *s, const char *display)
{
	for (size_t i = 0; i < s->n_lanes; i++)
		if (s->lanes[i].display && strcmp(s->lanes[i].display, display) == 0)
			return &s->lanes[i];
	return NULL;
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
	/* The display a task will run on is known now when it names one or there is only one;
	 * otherwise the executor that takes it journals it when it starts. */
	const char *display = req->options.display;
	if (display && !find_lane(s, display)) {
		r = -ENXIO;
		goto free_spec;
	}
	if (!display && s->n_lanes == 1)
		display = s->lanes[0].display;
	pthread_mutex_lock(&s->lock);
	if (s->stopping) {
		r = -ESHUTDOWN;
		goto unlock;
	}
	/* Journal and enqueue under one lock hold: a task is never 'queued' in the journal
	 * without being in the queue, so cancel can trust what it finds. */
	if ((r = journal_task_insert(s->journal, req->kind, spec, display, time_real_us(), &id)) < 0)
		goto unlock;
	struct task *t = xcalloc(1, sizeof(*t));
	t->id = id;
	t->req = req;
	req = NULL;
	atomic_init(&t->stop, EXECUTOR_RUN);
	atomic_init(&t->pause_asked, false);
	if (s->tail)
		s->tail->next = t;
	else
		s->head = t;
	s->tail = t;
	pthread_cond_broadcast(&s->wake);
	bump_locked(s);
	log_info("task %lld: queued", (long long)id);
	*ret_id = id;
unlock:
	pthread_mutex_unlock(&s->lock);
free_spec:
	ipc_task_request_destroy(req);
	free(spec);
	return r;
}

int scheduler_cancel(struct scheduler *s, int64_t id)
{
	enum ipc_task_status status;
	int r;

	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < s->n_lanes; i++) {
		struct task *running = s->lanes[i].running;
		if (running && running->id == id) {
			task_stop(running, EXECUTOR_CANCEL);
			pthread_mutex_unlock(&s->lock);
			return 1;
		}
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

int scheduler_cancel_all(struct scheduler *s, json_t **ret_cancelled, json_t **ret_stopping)
{
	json_t *cancelled = json_array(), *stopping = json_array();
	int r = 0;

	if (!cancelled || !stopping) {
		json_decref(cancelled);
		json_decref(stopping);
		return -ENOMEM;
	}
	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < s->n_lanes; i++) {
		struct task *t = s->lanes[i].running;
		if (t && atomic_load(&t->stop) == EXECUTOR_RUN) {
			task_stop(t, EXECUTOR_CANCEL);
			json_array_append_new(stopping, json_integer(t->id));
		}
	}
	uint64_t now = time_real_us();
	while (s->head) {
		struct task *t = s->head;
		s->head = t->next;
		int jr = journal_task_finish(s->journal, t->id, IPC_TASK_CANCELLED, now, NULL,
					     "cancelled before it started");
		if (jr < 0 && r == 0)
			r = jr;
		json_array_append_new(cancelled, json_integer(t->id));
		task_free(t);
	}
	s->tail = NULL;
	bump_locked(s);
	pthread_mutex_unlock(&s->lock);
	*ret_cancelled = cancelled;
	*ret_stopping = stopping;
	return r;
}

/* Under the lock: a copy of what `t` waits for, or NULL. */
static json_t *waiting_locked(const struct task *t)
{
	if (!t->wait)
		return NULL;
	json_t *o = json_pack("{s:s, s:I}", "for", executor_wait_kind_to_string(t->wait->kind), "since_us",
			      (json_int_t)t->wait_since_us);
	if (o && t->wait->details)
		json_object_update(o, t->wait->details);
	return o;
}

json_t *scheduler_waiting(struct scheduler *s, int64_t id)
{
	pthread_mutex_lock(&s->lock);
	struct task *t = running_locked(s, id);
	json_t *o = t ? waiting_locked(t) : NULL;
	pthread_mutex_unlock(&s->lock);
	return o;
}

int scheduler_answer(struct scheduler *s, int64_t id, enum executor_wait_kind kind, bool approve,
		     const char *text, unsigned uid, int pid, char *why, size_t whylen)
{
	const char *want = kind == EXECUTOR_WAIT_REPLY ? "a reply" : "an approval";
	enum ipc_task_status status;
	int r;

	pthread_mutex_lock(&s->lock);
	struct task *t = running_locked(s, id);
	if (t && t->wait && t->wait->kind == kind && !t->answered) {
		t->wait->approved = approve;
		t->wait->text = text ? xstrdup(text) : NULL;
		t->wait->uid = uid;
		t->wait->pid = pid;
		t->wait->answered_us = time_real_us();
		t->answered = true;
		bump_locked(s);
		pthread_mutex_unlock(&s->lock);
		return 0;
	}
	if (t && t->wait && t->answered) {
		snprintf(why, whylen, "task %lld was already %s", (long long)id,
			 t->wait->kind == EXECUTOR_WAIT_REPLY ? "answered" :
			 t->wait->approved		      ? "approved" :
								"denied");
		pthread_mutex_unlock(&s->lock);
		return -EALREADY;
	}
	if (t) {
		snprintf(why, whylen, "task %lld is not waiting for %s%s", (long long)id, want,
			 !t->wait			      ? " (it is running)" :
			 t->wait->kind == EXECUTOR_WAIT_REPLY ? " (it waits for a reply: holoctl reply)" :
								" (it waits for an approval: "
								"holoctl approve or deny)");
		pthread_mutex_unlock(&s->lock);
		return -EBUSY;
	}
	for (struct task *q = s->head; q; q = q->next)
		if (q->id == id) {
			snprintf(why, whylen, "task %lld is not waiting for %s (it is queued)", (long long)id,
				 want);
			pthread_mutex_unlock(&s->lock);
			return -EBUSY;
		}
	pthread_mutex_unlock(&s->lock);
	if ((r = journal_task_status(s->journal, id, &status)) < 0) {
		snprintf(why, whylen, r == -ENOENT ? "no task %lld" : "cannot read task %lld", (long long)id);
		return r;
	}
	snprintf(why, whylen, "task %lld is not waiting for %s (it %s %s)", (long long)id, want,
		 ipc_task_status_is_final(status) ? "has" : "is",
		 ipc_task_status_is_final(status) ? "finished" : ipc_task_status_to_string(status));
	return ipc_task_status_is_final(status) ? -ESRCH : -EBUSY;
}

json_t *scheduler_snapshot(struct scheduler *s)
{
	json_t *queue = json_array(), *displays = json_array();
	if (!queue || !displays) {
		json_decref(queue);
		json_decref(displays);
		return NULL;
	}
	pthread_mutex_lock(&s->lock);
	for (struct task *t = s->head; t; t = t->next)
		json_array_append_new(queue, json_integer(t->id));
	for (size_t i = 0; i < s->n_lanes; i++) {
		const struct lane *l = &s->lanes[i];
		json_t *waiting = l->running ? waiting_locked(l->running) : NULL;
		json_array_append_new(displays,
				      json_pack("{s:o, s:o, s:b, s:o}", "name",
						l->display ? json_string(l->display) : json_null(), "running",
						l->running ? json_integer(l->running->id) : json_null(),
						"connected", l->connected, "waiting",
						waiting ? waiting : json_null()));
	}
	pthread_mutex_unlock(&s->lock);
	return json_pack("{s:o, s:o}", "queue", queue, "displays", displays);
}

struct feed *scheduler_feed(struct scheduler *s)
{
	return s->feed;
}

uint64_t scheduler_journal_progress(struct scheduler *s)
{
	pthread_mutex_lock(&s->lock);
	uint64_t p = s->journal_progress;
	pthread_mutex_unlock(&s->lock);
	return p;
}

/* Whether lane l may run a task asking for display `want` (NULL: any). */
static bool lane_fits(const struct lane *l, const char *want)
{
	return !want || (l->display && strcmp(want, l->display) == 0);
}

int scheduler_queue_position(struct scheduler *s, int64_t id)
{
	int ahead = 0, r = -ENOENT;
	pthread_mutex_lock(&s->lock);
	for (struct task *t = s->head; t; t = t->next) {
		if (t->id == id) {
			const char *want = t->req->options.display;
			for (size_t i = 0; i < s->n_lanes; i++)
				if (s->lanes[i].running && lane_fits(&s->lanes[i], want))
					ahead++;
			r = ahead;
			break;
		}
		ahead++;
	}
	pthread_mutex_unlock(&s->lock);
	return r;
}

/* Why task `id` (not running) cannot be paused or resumed: -EALREADY finished, -EBUSY
 * queued, -ENOENT unknown. */
static int not_running(struct scheduler *s, int64_t id)
{
	enum ipc_task_status status;
	int r = journal_task_status(s->journal, id, &status);
	if (r < 0)
		return r;
	return ipc_task_status_is_final(status) ? -EALREADY : -EBUSY;
}

int scheduler_pause(struct scheduler *s, int64_t id)
{
	pthread_mutex_lock(&s->lock);
	struct task *t = running_locked(s, id);
	if (t) {
		int r = t->paused ? 0 : 1;
		if (!t->pause) {
			t->pause = true;
			atomic_store(&t->pause_asked, true);
			bump_locked(s);
			log_info("task %lld: pause requested", (long long)id);
		}
		pthread_mutex_unlock(&s->lock);
		return r;
	}
	pthread_mutex_unlock(&s->lock);
	return not_running(s, id);
}

int scheduler_resume(struct scheduler *s, int64_t id)
{
	pthread_mutex_lock(&s->lock);
	struct task *t = running_locked(s, id);
	if (t) {
		int r = t->pause ? 0 : -EINVAL;
		if (t->pause) {
			t->pause = false;
			atomic_store(&t->pause_asked, false);
			bump_locked(s);
		}
		pthread_mutex_unlock(&s->lock);
		return r;
	}
	pthread_mutex_unlock(&s->lock);
	return not_running(s, id);
}

int scheduler_paused(struct scheduler *s, int64_t id)
{
	pthread_mutex_lock(&s->lock);
	struct task *t = running_locked(s, id);
	int r = !t || !t->pause ? 0 : t->paused ? 2 : 1;
	pthread_mutex_unlock(&s->lock);
	return r;
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
