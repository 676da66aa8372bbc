/* x11 suite: several displays opened and closed at once from their own threads, as holod's
 * executors and kill switches are (one of each per display; all of them close together when holod
 * stops). Xlib and its extension libraries keep process-wide records (libXext's per-extension
 * display lists, libXi's and the Generic Event extension's state) that displays closing at the
 * same moment used to free twice (ASan: a double free in XCloseDisplay, seen in agent-fleet and
 * integration-startup). Each round: THREADS threads open a display and a kill switch, capture,
 * read the monitors and move the pointer, wait for one another, then all close at once. */
#include "common.h"
#include "test.h"
#include "x11-test-util.h"
#include "x11.h"

#include <pthread.h>
#include <stdlib.h>

TEST_DEFINE_GLOBALS;

#define THREADS 4
#define ROUNDS 25

static pthread_barrier_t opened;

static void on_kill(void *userdata)
{
	(void)userdata;
}

static void *worker(void *arg)
{
	int i = (int)(intptr_t)arg;
	struct x11_display *d = x11_display_open(NULL);
	struct x11_killswitch *k = x11_killswitch_create(getenv("DISPLAY"), 500, on_kill, NULL);
	struct x11_frame *f = NULL;
	struct x11_rect mons[4];
	bool ok = d && k && x11_capture(d, NULL, &f) == 0 &&
		  x11_display_monitors(d, mons, ARRAY_SIZE(mons)) >= 1 && x11_move(d, 10 + i, 10) == 0;
	x11_frame_destroy(f);
	pthread_barrier_wait(&opened);
	x11_killswitch_destroy(k);
	x11_display_close(d);
	return ok ? (void *)1 : NULL;
}

int main(int argc, char **argv)
{
	struct xt_xvfb x;

	(void)argc;
	(void)argv;
	REQUIRE(xt_xvfb_start(&x, "320x240x24", NULL) == 0);
	pthread_barrier_init(&opened, NULL, THREADS);
	for (int round = 0; round < ROUNDS; round++) {
		pthread_t t[THREADS];
		for (int i = 0; i < THREADS; i++)
			REQUIRE(pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i) == 0);
		for (int i = 0; i < THREADS; i++) {
			void *ok = NULL;
			pthread_join(t[i], &ok);
			CHECK(ok != NULL);
		}
	}
	pthread_barrier_destroy(&opened);
	xt_xvfb_stop(&x);
	return test_exit();
}
