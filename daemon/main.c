/* holod: the desktop automation daemon.
 *
 * DESIGN (threads and ownership; scheduler.h has the detail where they meet):
 *   main thread      parses options, owns every object below, creates them in dependency order,
 *                    then waits for SIGTERM/SIGINT (blocked in every thread, taken here with
 *                    sigwaitinfo) and tears down in reverse.
 *   executor thread  (scheduler.c) one per display: runs tasks FIFO, sole user of its X
 *                    connection and kill switch; one queue feeds them all.
 *   writer thread    (shotwriter.c) encodes, writes and hashes screenshots, journals them.
 *   model worker     (model-worker.c) loads the model at start-up and owns it and every
 *                    session; the executors hand it jobs for instruction tasks (agent.c
 *                    through provider-local.c), so tasks on several displays share the one
 *                    loaded model.
 *   HTTP threads     (libmicrohttpd, one per connection) parse requests, submit/cancel through
 *                    the scheduler, read the journal; http.c's reaper thread closes connections
 *                    whose request does not arrive in time.
 *   The journal (SQLite) is shared by all through its own mutex.
 *
 * Shutdown order matters: stop the scheduler first (the running task stops at a safe point,
 * held keys are released, the task and the queued ones are marked 'interrupted', waiters are
 * woken so event streams end), then the HTTP server (joins its threads), then the model worker
 * (no job can be in flight once the executor is joined), then the writer (drains pending
 * screenshots), then the journal; the socket is unlinked last. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "approval.h"
#include "common.h"
#include "model-worker.h"
#include "provider.h"
#include "holod-config.h"
#include "http.h"
#include "journal.h"
#include "options.h"
#include "policy.h"
#include "scheduler.h"
#include "secrets.h"
#include "shotwriter.h"
#include "system.h"
#include "x11.h"

#define MODEL_POLL_MS 100 /* --require-model: how often the load's end is looked for */

static void announce_ready(const struct holod_config *cfg, char *const *displays, size_t n)
{
	char list[256] = "";
	size_t off = 0;
	for (size_t i = 0; i < n && off < sizeof(list); i++)
		off += (size_t)snprintf(list + off, sizeof(list) - off, "%s%s", i ? ", " : "", displays[i]);
	log_info("holod %s ready on %s (display%s %s, state %s)", HOLOD_VERSION, cfg->socket_path,
		 n > 1 ? "s" : "", n ? list : "none", cfg->state_dir);
	notify_send("READY=1");
}

/* What can be checked before the long work (the Xvfbs, the model's weights) is checked first, so
 * that holod never reports ready with a display it cannot open or a model it cannot load: every
 * display named (--display, $DISPLAY; the virtual ones are holod's own) accepts a connection,
 * and the model directory holds a checkpoint's files. Logs what is wrong; returns -errno. */
static int check_before_start(const struct holod_config *cfg)
{
	int r;
	for (size_t i = 0; i < cfg->n_displays; i++) {
		struct x11_display *d = x11_display_open(cfg->displays[i]);
		if (!d) {
			r = -errno;
			log_error("cannot open display %s (%s): %s; start its X server first, or "
				  "give --virtual WxH for a display of holod's own",
				  cfg->displays[i],
				  cfg->display_cmdline ? "--display" : "$DISPLAY or the config file",
				  x11_strerror(r));
			return r;
		}
		x11_display_close(d);
	}
	if (cfg->model_dir) {
		char err[PATH_MAX + 512];
		if ((r = engine_model_check_files(cfg->model_dir, err, sizeof(err))) < 0) {
			log_error("--model: %s", err);
			return r;
		}
	}
	return 0;
}

/* Waits for SIGTERM or SIGINT (0, with `reason` set). With `worker` (--require-model), holod is
 * announced ready once the model has loaded, and a failed load returns 1. */
static int wait_for_stop(struct xvfb *xvfbs, size_t n_xvfb, struct model_worker *worker,
			 const struct holod_config *cfg, char *const *displays, size_t n_displays,
			 char *reason, size_t size)
{
	sigset_t set;
	siginfo_t si;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGCHLD);
	for (;;) {
		int sig;
		if (worker) {
			enum model_worker_state es = model_worker_state(worker);
			if (es == MODEL_WORKER_FAILED) {
				log_error("--require-model: %s", model_worker_error(worker));
				snprintf(reason, size, "holod could not load its model");
				return 1;
			}
			if (es == MODEL_WORKER_READY) {
				worker = NULL;
				announce_ready(cfg, displays, n_displays);
			}
		}
		if (worker) {
			struct timespec ts = {0, MODEL_POLL_MS * 1000000L};
			sig = sigtimedwait(&set, &si, &ts);
			if (sig < 0 && errno == EAGAIN)
				continue;
		} else {
			sig = sigwaitinfo(&set, &si);
		}
		if (sig < 0) {
			if (errno == EINTR)
				continue;
			return log_error_errno(-errno, "sigwaitinfo");
		}
		if (sig == SIGCHLD) {
			int status;
			pid_t pid;
			while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
				for (size_t i = 0; i < n_xvfb; i++) {
					struct xvfb *x = &xvfbs[i];
					if (x->pid == pid) {
						log_error("the virtual display %s exited (status %d); "
							  "its tasks will fail until holod is restarted",
							  x->display, status);
						x->pid = 0; /* reaped: xvfb_stop must not signal a
							       reused pid */
					} else if (x->session_pid == pid) {
						log_warning("the session on %s exited (status %d)",
							    x->display, status);
						x->session_pid = 0;
					}
				}
			continue;
		}
		const char *name = sig == SIGTERM ? "SIGTERM" : "SIGINT";
		/* The reason becomes the error of interrupted tasks, so it names holod. */
		snprintf(reason, size, "holod received %s", name);
		log_info("received %s, stopping", name);
		return 0;
	}
}

int main(int argc, char **argv)
{
	struct holod_config cfg;
	struct listen_socket ls = {.fd = -1, .lock_fd = -1};
	struct xvfb xvfbs[HOLOD_MAX_DISPLAYS] = {0};
	size_t n_xvfb = 0;
	struct journal *journal = NULL;
	struct shotwriter *writer = NULL;
	struct scheduler *sched = NULL;
	struct approval_rules *rules = NULL;
	struct model_worker *worker = NULL;
	struct provider *provider = NULL;
	struct http_server *http = NULL;
	char *db_path = NULL, *shots_dir = NULL;
	char reason[64] = "holod stopped";
	int state_fd = -1, r, ret = 1;
	struct secrets *secrets = NULL;
	char *secret_names = NULL;

	log_set_program_name("holod");
	log_setup_from_env();
	notify_init();
	if (options_parse(&cfg, argc, argv) < 0) {
		options_finish(&cfg);
		return 2;
	}
	if (cfg.help) {
		options_print_help(stdout, argv[0]);
		ret = 0;
		goto finish_options;
	}
	if (cfg.version) {
		printf("holod %s (API v%d)\n", HOLOD_VERSION, IPC_API_VERSION);
		ret = 0;
		goto finish_options;
	}
	if (cfg.dump_config) {
		options_dump(stdout, &cfg);
		ret = 0;
		goto finish_options;
	}
	log_set_max_level((enum log_level)log_level_from_string(cfg.log_level));
	/* Every file holod creates (journal, its -wal and -shm, screenshots, the socket's lock) is
	 * its user's alone, whatever the caller's umask. */
	umask(077);

	/* Secrets before any child starts (the Xvfbs, launched programs): the environment's are
	 * taken out of it. A vault that others may read is refused, and so is holod. */
	secrets = secrets_create();
	{
		char serr[PATH_MAX + 512];
		char *vault = cfg.secrets_file ? xstrdup(cfg.secrets_file) : NULL;
		if (!vault && path_xdg(PATH_CONFIG, "holod", &vault) >= 0) {
			char *p = path_join(vault, "secrets");
			free(vault);
			vault = p;
		}
		r = vault ? secrets_load_file(secrets, vault, cfg.secrets_file != NULL, serr, sizeof(serr)) :
			    0;
		free(vault);
		if (r >= 0 && cfg.secret_env)
			r = secrets_load_env(secrets, cfg.secret_env, serr, sizeof(serr));
		if (r < 0) {
			log_error("%s", serr);
			goto finish_options;
		}
		secret_names = secrets_names_text(secrets);
		if (secret_names[0])
			log_info("secrets: %s", secret_names);
	}

	if (check_before_start(&cfg) < 0)
		goto finish_options;

	/* Signals are taken by the main thread only; every thread created below inherits this. */
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGCHLD);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	/* The socket first: its lock decides whether we are the one holod, before we touch the
	 * journal of another running instance. */
	if (listen_socket_open(&ls, cfg.socket_path) < 0)
		goto finish_options;

	if (state_dir_prepare(cfg.state_dir) < 0)
		goto close_socket;
	if (state_lock_take(cfg.state_dir, &state_fd) < 0)
		goto close_socket;
	shots_dir = path_join(cfg.state_dir, "screenshots");
	if ((r = path_mkdir_p(shots_dir, 0700)) < 0) {
		log_error_errno(r, "cannot create %s", shots_dir);
		goto close_socket;
	}
	db_path = path_join(cfg.state_dir, "holod.db");
	journal = journal_open(db_path);
	if (!journal) {
		log_error_errno(-errno, "cannot open the journal %s", db_path);
		goto close_socket;
	}
	r = journal_recover(journal, time_real_us());
	if (r < 0) {
		log_error_errno(r, "cannot recover the journal %s", db_path);
		goto close_journal;
	}
	if (r > 0)
		log_notice("marked %d task(s) left over by a previous holod as interrupted", r);
	scheduler_prune_old(journal, cfg.state_dir, cfg.prune_days);

	if (cfg.virtual_size) {
		/* --session auto: a window manager, so that a launched program gets the focus and
		 * its dialogs too, as on a desktop (without one the keys go to the root window) */
		const char *session = cfg.session ? cfg.session : "auto";
		bool auto_wm = strcmp(session, "auto") == 0;
		if (auto_wm && xvfb_program_in_path(XVFB_AUTO_WM)) {
			session = XVFB_AUTO_WM_COMMAND;
		} else if (auto_wm) {
			log_warning("--session auto: %s is not installed, so no window manager runs on "
				    "the virtual display%s: windows get the focus only when a script "
				    "launches or activates them (apt-get install %s, or --session CMD)",
				    XVFB_AUTO_WM, cfg.n_virtual > 1 ? "s" : "", XVFB_AUTO_WM);
			session = NULL;
		} else if (strcmp(session, "none") == 0) {
			session = NULL;
		}
		/* One Xvfb (and session) per display, numbered from @:N when given. */
		for (; n_xvfb < cfg.n_virtual; n_xvfb++) {
			int number = cfg.virtual_number >= 0 ? cfg.virtual_number + (int)n_xvfb : -1;
			struct xvfb *x = &xvfbs[n_xvfb];
			if (xvfb_start(x, cfg.virtual_width, cfg.virtual_height, number) < 0)
				goto stop_xvfb;
			if (session && xvfb_start_session(x, session) < 0) {
				n_xvfb++;
				goto stop_xvfb;
			}
			cfg.displays = xrealloc(cfg.displays, (n_xvfb + 1) * sizeof(*cfg.displays));
			cfg.displays[cfg.n_displays++] = xstrdup(x->display);
		}
		free(cfg.display);
		cfg.display = xstrdup(cfg.displays[0]);
		/* The window managers start side by side; each is waited for before readiness. */
		for (size_t i = 0; auto_wm && session && i < n_xvfb; i++) {
			struct xvfb *x = &xvfbs[i];
			r = xvfb_wait_window_manager(x, XVFB_WM_START_TIMEOUT_MS);
			if (r == -ECHILD)
				log_warning("the window manager (%s) on %s exited at start (its "
					    "message is above): the display runs without one",
					    XVFB_AUTO_WM, x->display);
			else if (r < 0)
				log_warning("the window manager (%s) on %s does not manage the "
					    "display after %d s: %s",
					    XVFB_AUTO_WM, x->display, XVFB_WM_START_TIMEOUT_MS / 1000,
					    r == -ETIMEDOUT ? "going on without waiting" : x11_strerror(r));
			else
				log_info("window manager %s runs on %s", XVFB_AUTO_WM, x->display);
		}
	}
	if (!cfg.n_displays)
		log_warning("no display: set $DISPLAY, --display or --virtual WxH; tasks will fail "
			    "until one is available");

	writer = shotwriter_create(cfg.state_dir, journal, NULL, NULL);
	if (!writer) {
		log_error_errno(-errno, "cannot start the screenshot writer");
		goto stop_xvfb;
	}
	/* Loading runs on the model worker: holod serves scripts while a large model maps. */
	cfg.engine_backend.state_limit = (uint64_t)cfg.state_limit_kib << 10;
	/* the CUDA backend's memory plan: the vision tower and the sessions of --context-tokens
	 * of as many tasks as run at once (one a display, each holding the most its admission
	 * may reserve: a task picks its own history and thinking): a device that cannot hold one
	 * task's beside the weights refuses the load with the plan's sentence; one that holds
	 * fewer tasks' loads, and the model worker warns (the others wait for admission) */
	int task_sessions = provider_local_task_sessions_max(cfg.step_retries);
	cfg.engine_backend.plan_sessions = (int)(cfg.n_displays ? cfg.n_displays : 1) * task_sessions;
	cfg.engine_backend.plan_sessions_min = task_sessions;
	cfg.engine_backend.plan_context = (int)cfg.context_tokens;
	cfg.engine_backend.plan_vision = true;
	worker = model_worker_create(cfg.model_dir, &cfg.engine_backend);
	if (!worker) {
		log_error_errno(-errno, "cannot start the model worker");
		goto destroy_writer;
	}
	model_worker_set_prefill_chunk(worker, cfg.batch_prefill_chunk);
	model_worker_set_vision_slice(worker, cfg.batch_vision_slice);
	if (cfg.remote) {
		char perr[PROVIDER_MAX_ERROR] = "";
		bool images = strcmp(cfg.remote_images, "png") == 0;
		if (!images && strcmp(cfg.remote_images, "none") != 0) {
			log_error("--remote-images: \"%s\" is neither png nor none", cfg.remote_images);
			goto destroy_worker;
		}
		int server = provider_remote_server_from_string(cfg.remote_server);
		if (server < 0) {
			log_error("--remote-server: \"%s\" is not auto, vllm or openai", cfg.remote_server);
			goto destroy_worker;
		}
		struct provider_remote_config rc = {
			.url = cfg.remote,
			.model = cfg.remote_model,
			.key_file = cfg.remote_key_file,
			.connect_timeout_s = cfg.remote_connect_timeout,
			.timeout_s = cfg.remote_timeout,
			.retries = cfg.remote_retries,
			.images = images,
			.server = (enum provider_remote_server)server,
		};
		provider = provider_remote_create(&rc, perr, sizeof(perr));
		if (!provider) {
			log_error("%s", perr[0] ? perr : "cannot create the remote provider");
			goto destroy_worker;
		}
	} else {
		provider = provider_local_create(worker);
		if (!provider) {
			log_error_errno(-errno, "cannot create the model provider");
			goto destroy_worker;
		}
	}
	if (cfg.debug_unconstrained)
		log_warning("--debug-unconstrained: steps are decoded without the step grammar");
	/* holo-nano's published system text: the user's local copy when its SHA-256s match,
	 * else holod's own text (docs/policy.md); the tasks' provenance says which */
	static struct policy_published published;
	bool have_published = false;
	if (cfg.published_dir) {
		char perr[512];
		int pr = policy_published_load(cfg.published_dir, &published, perr, sizeof(perr));
		have_published = pr == 0;
		if (pr == 0)
			log_info("holo-nano: the published system text from %s", cfg.published_dir);
		else if (pr == -ENOENT)
			log_info("holo-nano: no published copy in %s: holod's own system text",
				 cfg.published_dir);
		else
			log_warning("holo-nano: the published copy is not used (holod's own system "
				    "text): %s",
				    perr);
	}
	/* --approve risky's rules: a bad file stops holod here, naming what is wrong */
	char rerr[1024];
	rules = cfg.approve_rules ? approval_rules_load(cfg.approve_rules, rerr, sizeof(rerr)) :
				    approval_rules_default();
	if (!rules) {
		log_error("%s", cfg.approve_rules ? rerr : "cannot build the approval rules");
		goto destroy_provider;
	}
	struct scheduler_config sc = {
		.displays = (const char *const *)cfg.displays,
		.n_displays = cfg.n_displays,
		.settle_ms = cfg.settle_ms,
		.max_steps = cfg.max_steps,
		.max_seconds = cfg.max_seconds,
		.kill_switch_ms = cfg.kill_switch_ms,
		.takeover = (enum ipc_takeover)ipc_takeover_from_string(cfg.takeover),
		.ask_timeout_s = cfg.ask_timeout_s,
		.approve = (enum ipc_approve)ipc_approve_from_string(cfg.approve),
		.approve_timeout_s = cfg.approve_timeout_s,
		.approval_rules = rules,
		.state_dir = cfg.state_dir,
		.prune_days = cfg.prune_days,
		.agent =
			{
				.provider = provider,
				.worker = worker,
				.history = (enum ipc_history)ipc_history_from_string(cfg.history),
				.window = cfg.window,
				.max_tiles = cfg.max_tiles,
				.context_tokens = cfg.context_tokens,
				.step_tokens = cfg.step_tokens,
				.step_retries = cfg.step_retries,
				.temperature = cfg.temperature,
				.top_p = cfg.top_p,
				.thinking = strcmp(cfg.thinking, "on") == 0,
				.thinking_tokens = cfg.thinking_tokens,
				.secrets = secrets,
				.secret_names = secret_names,
				.jump_forward = strcmp(cfg.jump_forward, "on") == 0,
				.stuck_warn = cfg.stuck_warn,
				.stuck_stop = cfg.stuck_stop,
				.seed = cfg.seed,
				.unconstrained = cfg.debug_unconstrained,
				.format = policy_format_find(cfg.policy_format),
				.published = have_published ? &published : NULL,
			},
	};
	sched = scheduler_create(&sc, journal, writer);
	if (!sched) {
		log_error_errno(-errno, "cannot start the executor");
		goto destroy_provider;
	}
	struct http_context hc = {
		.scheduler = sched,
		.journal = journal,
		.worker = worker,
		.provider = provider,
		.agent = &sc.agent,
		.state_dir = cfg.state_dir,
		.display = cfg.n_displays ? cfg.displays[0] : NULL,
		.socket_path = cfg.socket_path,
		.virtual_display = cfg.virtual_size != NULL,
	};
	http = http_server_create(ls.fd, &hc);
	if (!http) {
		log_error("cannot start the HTTP server on %s", cfg.socket_path);
		goto destroy_scheduler;
	}

	/* --require-model: ready only once the model is; a model that cannot load ends holod. */
	bool await_model = cfg.require_model && cfg.model_dir;
	if (await_model)
		log_info("waiting for the model %s to load before reporting ready "
			 "(--require-model)",
			 cfg.model_dir);
	else
		announce_ready(&cfg, cfg.displays, cfg.n_displays);

	r = wait_for_stop(xvfbs, n_xvfb, await_model ? worker : NULL, &cfg, cfg.displays, cfg.n_displays,
			  reason, sizeof(reason));
	if (r == 0)
		ret = 0;
	notify_send("STOPPING=1");

	scheduler_stop(sched, reason);
	http_server_destroy(http);
destroy_scheduler:
	/* The writer calls back into nothing; the scheduler may go before it drains. */
	scheduler_destroy(sched);
destroy_provider:
	approval_rules_destroy(rules);
	provider_destroy(provider);
	policy_published_finish(&published);
destroy_worker:
	model_worker_destroy(worker);
destroy_writer:
	shotwriter_destroy(writer);
stop_xvfb:
	while (n_xvfb > 0)
		xvfb_stop(&xvfbs[--n_xvfb]);
close_journal:
	journal_close(journal);
close_socket:
	if (state_fd >= 0)
		close(state_fd);
	listen_socket_close(&ls);
finish_options:
	secrets_destroy(secrets);
	free(secret_names);
	free(db_path);
	free(shots_dir);
	options_finish(&cfg);
	return ret;
}
