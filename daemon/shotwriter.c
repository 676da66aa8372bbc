/* Screenshot writer threads (see shotwriter.h).
 *
 * DESIGN: the executor thread produces frames; SHOTWRITER_THREADS threads consume them, each job
 * independently (rows may be journaled out of order; nothing depends on that order). The queue and the
 * `stopping` flag, the count of jobs being written (`busy`) and the task failure record are
 * protected by `lock`; frames are owned by the queue until popped, then by
 * this thread. The journal has its own lock. Nothing here touches X. */
#include "shotwriter.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

struct shot_job {
	int64_t task_id;
	int index;
	char which[8];
	struct x11_frame *frame;
	struct shot_job *next;
};

struct shotwriter {
	char *state_dir;
	struct journal *journal;
	void (*written)(void *userdata);
	void *userdata;

	pthread_mutex_t lock;
	pthread_cond_t cond; /* queue changed (either direction) */
	struct shot_job *head, *tail;
	size_t queued;
	size_t busy; /* jobs popped and not yet written */
	bool stopping;
	/* The first failure of task `failed_task` (failed_err < 0), for the executor. */
	int64_t failed_task;
	int failed_err;
	char failed_msg[512];
	pthread_t threads[SHOTWRITER_THREADS];
	size_t n_threads;
};

static int write_file_durably(const char *path, const uint8_t *data, size_t size)
{
	char *tmp = xasprintf("%s.tmp", path);
	int fd, r = 0;

	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		r = -errno;
		goto free_tmp;
	}
	for (size_t off = 0; off < size;) {
		ssize_t n = write(fd, data + off, size - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = -errno;
			goto close_fd;
		}
		off += (size_t)n;
	}
	if (fsync(fd) < 0) {
		r = -errno;
		goto close_fd;
	}
	if (rename(tmp, path) < 0)
		r = -errno;
close_fd:
	close(fd);
	if (r < 0)
		unlink(tmp);
free_tmp:
	free(tmp);
	return r;
}

/* Keeps the task's first failure and logs it once at error level; later ones of the same task
 * (every screenshot after it usually fails for the same reason) only at debug level. */
static void record_failure(struct shotwriter *w, int64_t task_id, int err, const char *reason,
			   const char *what, const char *path)
{
	char msg[sizeof(w->failed_msg)];
	bool first;

	snprintf(msg, sizeof(msg), "cannot %s screenshot %s: %s", what, path, reason);
	pthread_mutex_lock(&w->lock);
	first = w->failed_task != task_id || w->failed_err == 0;
	if (first) {
		w->failed_task = task_id;
		w->failed_err = err;
		memcpy(w->failed_msg, msg, sizeof(msg));
	}
	pthread_mutex_unlock(&w->lock);
	if (first)
		log_error("task %lld: %s", (long long)task_id, msg);
	else
		log_debug("task %lld: %s", (long long)task_id, msg);
}

static void write_one(struct shotwriter *w, struct shot_job *job)
{
	char *reldir = xasprintf("screenshots/%lld", (long long)job->task_id);
	char *relpath = xasprintf("%s/%d-%s.png", reldir, job->index, job->which);
	char *dir = path_join(w->state_dir, reldir);
	char *path = path_join(w->state_dir, relpath);
	uint8_t *png = NULL;
	size_t size = 0;
	char hex[65];
	int r;

	uint64_t t0 = time_mono_us();
	if ((r = x11_frame_encode_png(job->frame, &png, &size)) < 0) {
		record_failure(w, job->task_id, r, x11_strerror(r), "encode", path);
		goto free_paths;
	}
	uint64_t t1 = time_mono_us();
	if ((r = path_mkdir_p(dir, 0700)) < 0 || (r = write_file_durably(path, png, size)) < 0) {
		record_failure(w, job->task_id, r, strerror(-r), "write", path);
		goto free_png;
	}
	ipc_sha256_hex(png, size, hex);
	uint64_t t2 = time_mono_us();
	r = journal_screenshot_insert(w->journal, job->task_id, job->index, job->which, relpath, hex, size,
				      job->frame->width, job->frame->height, t1 - t0, t2 - t1);
	if (r < 0) {
		/* Without its row the file is an orphan nobody can find: give its space back. */
		unlink(path);
		char *reason = xasprintf("%s: %s", journal_path(w->journal), strerror(-r));
		record_failure(w, job->task_id, r, reason, "journal", path);
		free(reason);
	} else if (w->written) {
		w->written(w->userdata);
	}
free_png:
	free(png);
free_paths:
	free(reldir);
	free(relpath);
	free(dir);
	free(path);
}

static void *writer_main(void *userdata)
{
	struct shotwriter *w = userdata;

	pthread_mutex_lock(&w->lock);
	for (;;) {
		while (!w->head && !w->stopping)
			pthread_cond_wait(&w->cond, &w->lock);
		if (!w->head)
			break; /* stopping and drained */
		struct shot_job *job = w->head;
		w->head = job->next;
		if (!w->head)
			w->tail = NULL;
		w->queued--;
		w->busy++;
		pthread_cond_broadcast(&w->cond);
		pthread_mutex_unlock(&w->lock);

		write_one(w, job);
		x11_frame_destroy(job->frame);
		free(job);

		pthread_mutex_lock(&w->lock);
		w->busy--;
		pthread_cond_broadcast(&w->cond);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

static bool is_partial_png(const char *name)
{
	static const char suffix[] = ".png.tmp";
	size_t n = strlen(name), k = sizeof(suffix) - 1;
	return n > k && strcmp(name + n - k, suffix) == 0;
}

/* A holod killed while writing leaves screenshots/<task>/<name>.png.tmp that no row refers to
 * (a PNG is journaled only after its rename): remove them. Only names of the layout above, in
 * holod's own state directory, are touched; a failure costs disk space, not correctness. */
static void remove_partial_pngs(const char *state_dir)
{
	char *shots = path_join(state_dir, "screenshots");
	DIR *top = opendir(shots);
	struct dirent *te, *e;
	unsigned removed = 0;

	if (!top)
		goto free_shots;
	while ((te = readdir(top))) {
		if (te->d_name[0] == '.' || strspn(te->d_name, "0123456789") != strlen(te->d_name))
			continue;
		int fd = openat(dirfd(top), te->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		DIR *task = fd >= 0 ? fdopendir(fd) : NULL;
		if (!task) {
			if (fd >= 0)
				close(fd);
			continue;
		}
		while ((e = readdir(task)))
			if (is_partial_png(e->d_name) && unlinkat(dirfd(task), e->d_name, 0) == 0)
				removed++;
		closedir(task);
	}
	closedir(top);
	if (removed)
		log_notice("removed %u partial screenshot file(s) (*.png.tmp) left by a previous "
			   "holod in %s",
			   removed, shots);
free_shots:
	free(shots);
}

struct shotwriter *shotwriter_create(const char *state_dir, struct journal *j,
				     void (*written)(void *userdata), void *userdata)
{
	struct shotwriter *w = xcalloc(1, sizeof(*w));
	int r;

	remove_partial_pngs(state_dir);

	w->state_dir = xstrdup(state_dir);
	w->journal = j;
	w->written = written;
	w->userdata = userdata;
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->cond, NULL);
	for (size_t i = 0; i < SHOTWRITER_THREADS; i++) {
		if ((r = pthread_create(&w->threads[i], NULL, writer_main, w)) != 0) {
			shotwriter_destroy(w);
			errno = r;
			return NULL;
		}
		w->n_threads++;
	}
	return w;
}

int shotwriter_submit(struct shotwriter *w, int64_t task_id, int index, const char *which,
		      struct x11_frame *frame)
{
	struct shot_job *job = xcalloc(1, sizeof(*job));

	job->task_id = task_id;
	job->index = index;
	snprintf(job->which, sizeof(job->which), "%s", which);
	job->frame = frame;

	pthread_mutex_lock(&w->lock);
	while (w->queued >= SHOTWRITER_QUEUE_MAX && !w->stopping)
		pthread_cond_wait(&w->cond, &w->lock);
	if (w->stopping) {
		pthread_mutex_unlock(&w->lock);
		x11_frame_destroy(frame);
		free(job);
		return -ESHUTDOWN;
	}
	if (w->tail)
		w->tail->next = job;
	else
		w->head = job;
	w->tail = job;
	w->queued++;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
	return 0;
}

void shotwriter_sync(struct shotwriter *w)
{
	pthread_mutex_lock(&w->lock);
	while ((w->head || w->busy) && w->n_threads)
		pthread_cond_wait(&w->cond, &w->lock);
	pthread_mutex_unlock(&w->lock);
}

int shotwriter_task_error(struct shotwriter *w, int64_t task_id, char *err, size_t errlen)
{
	int r = 0;

	pthread_mutex_lock(&w->lock);
	if (w->failed_err < 0 && w->failed_task == task_id) {
		r = w->failed_err;
		snprintf(err, errlen, "%s", w->failed_msg);
	}
	pthread_mutex_unlock(&w->lock);
	return r;
}

void shotwriter_destroy(struct shotwriter *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	w->stopping = true;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
	for (size_t i = 0; i < w->n_threads; i++)
		pthread_join(w->threads[i], NULL);
	pthread_mutex_destroy(&w->lock);
	pthread_cond_destroy(&w->cond);
	free(w->state_dir);
	free(w);
}
