#include "common.h"

#include <stdio.h>
#include <time.h>

static uint64_t ts_ns(clockid_t clk)
{
	struct timespec ts;
	clock_gettime(clk, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t time_mono_ns(void)
{
	return ts_ns(CLOCK_MONOTONIC);
}

uint64_t time_mono_us(void)
{
	return ts_ns(CLOCK_MONOTONIC) / 1000u;
}

uint64_t time_real_us(void)
{
	return ts_ns(CLOCK_REALTIME) / 1000u;
}

void time_sleep_us(uint64_t usec)
{
	struct timespec ts = {.tv_sec = (time_t)(usec / 1000000u), .tv_nsec = (long)(usec % 1000000u) * 1000};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

char *time_format_rfc3339(uint64_t real_us, char *buf, size_t size)
{
	time_t secs = (time_t)(real_us / 1000000u);
	struct tm tm;
	gmtime_r(&secs, &tm);
	snprintf(buf, size, "%04d-%02d-%02dT%02d:%02d:%02d.%03uZ", tm.tm_year + 1900, tm.tm_mon + 1,
		 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (unsigned)(real_us % 1000000u / 1000u));
	return buf;
}
