/* Logging to stderr. One mutex serialises whole lines so threads never interleave. */
#include "common.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static enum log_level max_level = LOG_LEVEL_INFO;
static const char *program_name;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *const level_names[] = {
	[LOG_LEVEL_ERROR] = "error", [LOG_LEVEL_WARNING] = "warning", [LOG_LEVEL_NOTICE] = "notice",
	[LOG_LEVEL_INFO] = "info",   [LOG_LEVEL_DEBUG] = "debug",
};

void log_set_max_level(enum log_level level)
{
	max_level = level;
}

enum log_level log_get_max_level(void)
{
	return max_level;
}

int log_level_from_string(const char *name)
{
	if (!name)
		return -EINVAL;
	for (size_t i = 0; i < ARRAY_SIZE(level_names); i++)
		if (level_names[i] && strcasecmp(level_names[i], name) == 0)
			return (int)i;
	return -EINVAL;
}

void log_setup_from_env(void)
{
	int l = log_level_from_string(getenv("HOLOD_LOG_LEVEL"));
	if (l >= 0)
		max_level = (enum log_level)l;
}

void log_set_program_name(const char *name)
{
	const char *slash = name ? strrchr(name, '/') : NULL;
	program_name = slash ? slash + 1 : name;
}

int log_internal(enum log_level level, int err, const char *file, int line, const char *func,
		 const char *format, ...)
{
	int saved_errno = errno;
	if (err < 0)
		err = -err;

	if (level <= max_level) {
		char msg[2048];
		va_list ap;
		va_start(ap, format);
		vsnprintf(msg, sizeof(msg), format, ap);
		va_end(ap);

		pthread_mutex_lock(&log_lock);
		if (program_name)
			fprintf(stderr, "%s: ", program_name);
		if (max_level >= LOG_LEVEL_DEBUG)
			fprintf(stderr, "[%s:%d %s] ", file, line, func);
		if (level <= LOG_LEVEL_WARNING)
			fprintf(stderr, "%s: ", level_names[level]);
		if (err)
			fprintf(stderr, "%s: %s\n", msg, strerror(err));
		else
			fprintf(stderr, "%s\n", msg);
		fflush(stderr);
		pthread_mutex_unlock(&log_lock);
	}
	errno = saved_errno;
	return -err;
}
