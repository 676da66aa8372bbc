/* The API socket: ownership (lock file), stale socket replacement, permissions. */
#include "system.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common.h"
#include "ipc.h"

/* The socket's directory. One holod creates is made 0700. One that exists is never chmod'ed
 * (--socket ~/holod.sock must not change $HOME, nor --socket /tmp/h.sock change /tmp as root):
 * it is accepted when other users cannot write to it, or when it is sticky (/tmp), where they
 * cannot remove or replace the files holod creates; the socket itself is 0600 either way. */
static int prepare_dir(const char *socket_path)
{
	char *dir = xstrdup(socket_path);
	char *slash = strrchr(dir, '/');
	struct stat st;
	int r = 0;

	if (!slash)
		goto free_dir;
	if (slash == dir)
		slash[1] = '\0'; /* "/h.sock": the root directory */
	else
		*slash = '\0';
	if (stat(dir, &st) < 0) {
		if (errno != ENOENT) {
			r = log_error_errno(-errno, "cannot stat socket directory %s", dir);
			goto free_dir;
		}
		if ((r = path_mkdir_p(dir, 0700)) < 0)
			r = log_error_errno(r, "cannot create socket directory %s", dir);
		goto free_dir;
	}
	if (!S_ISDIR(st.st_mode)) {
		log_error("socket directory %s is not a directory", dir);
		r = -ENOTDIR;
	} else if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX)) {
		log_error("socket directory %s is writable by other users and not sticky (mode "
			  "%04o), so one of them could replace holod's socket; use a private "
			  "directory for --socket",
			  dir, (unsigned)(st.st_mode & 07777));
		r = -EPERM;
	}
free_dir:
	free(dir);
	return r;
}

/* In a directory others may write to (sticky), a file holod did not create could sit at its
 * lock or socket path: refuse one that belongs to another user. */
static int check_owner(int fd, const char *path)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return log_error_errno(-errno, "cannot stat %s", path);
	if (st.st_uid != geteuid()) {
		log_error("%s belongs to uid %u, not to holod's uid %u; refusing to use it", path,
			  (unsigned)st.st_uid, (unsigned)geteuid());
		return -EPERM;
	}
	return 0;
}

/* Only a socket may be replaced: anything else at the path is the user's mistake, and removing
 * it (HOLOD_SOCKET=/etc/passwd as root) would be a disaster. */
static int check_not_other_file(const char *path)
{
	struct stat st;

	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : log_error_errno(-errno, "cannot stat %s", path);
	if (S_ISSOCK(st.st_mode))
		return 0;
	log_error("%s exists and is not a socket; refusing to replace it (pick another path with "
		  "--socket or $HOLOD_SOCKET)",
		  path);
	return -EEXIST;
}

/* Connections waiting for accept(). A client connecting non-blocking (libcurl, so holoctl) gets
 * EAGAIN, not a wait, when a Unix socket's backlog is full: a burst of clients (followers
 * starting together) must fit, well above what the HTTP server serves at once. The kernel
 * caps it at net.core.somaxconn (4096 by default). */
#define LISTEN_BACKLOG 1024

/* True when something accepts connections on `path`. */
static bool socket_is_live(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool live;

	if (fd < 0)
		return false;
	strncpy(sa.sun_path, path, sizeof(sa.sun_path) - 1);
	live = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	close(fd);
	return live;
}

int listen_socket_open(struct listen_socket *ls, const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int r;

	memset(ls, 0, sizeof(*ls));
	ls->fd = ls->lock_fd = -1;
	if (strlen(path) >= sizeof(sa.sun_path))
		return log_error_errno(-ENAMETOOLONG, "socket path %s", path);
	if ((r = prepare_dir(path)) < 0 || (r = check_not_other_file(path)) < 0)
		return r;

	ls->lock_path = xasprintf("%s.lock", path);
	ls->lock_fd = open(ls->lock_path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (ls->lock_fd < 0) {
		r = log_error_errno(-errno, "cannot open lock file %s", ls->lock_path);
		goto close;
	}
	if ((r = check_owner(ls->lock_fd, ls->lock_path)) < 0)
		goto close;
	if (flock(ls->lock_fd, LOCK_EX | LOCK_NB) < 0) {
		r = -errno;
		if (r == -EWOULDBLOCK) {
			log_error("another holod is running on %s; stop it first or use --socket", path);
			r = -EADDRINUSE;
		} else {
			log_error_errno(r, "cannot lock %s", ls->lock_path);
		}
		goto close;
	}

	/* We hold the lock, so a socket file here is stale, unless a holod from before the lock
	 * file existed is serving it: never steal a live socket. */
	if (socket_is_live(path)) {
		log_error("another process is serving %s; refusing to replace it", path);
		r = -EADDRINUSE;
		goto close;
	}
	if ((r = check_not_other_file(path)) < 0)
		goto close;
	if (unlink(path) == 0)
		log_notice("replaced stale socket %s", path);
	else if (errno != ENOENT) {
		r = log_error_errno(-errno, "cannot remove stale socket %s", path);
		goto close;
	}

	ls->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (ls->fd < 0) {
		r = log_error_errno(-errno, "socket");
		goto close;
	}
	strncpy(sa.sun_path, path, sizeof(sa.sun_path) - 1);
	/* The socket is born 0600: no window in which another user could connect. */
	mode_t old = umask(0177);
	r = bind(ls->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ? -errno : 0;
	umask(old);
	if (r < 0) {
		log_error_errno(r, "cannot bind %s", path);
		goto close;
	}
	ls->path = xstrdup(path);
	if (listen(ls->fd, LISTEN_BACKLOG) < 0) {
		r = log_error_errno(-errno, "cannot listen on %s", path);
		goto close;
	}
	return 0;

close:
	listen_socket_close(ls);
	return r;
}

void listen_socket_close(struct listen_socket *ls)
{
	if (ls->fd >= 0)
		close(ls->fd);
	if (ls->path)
		unlink(ls->path);
	/* The lock file stays: unlinking it would let a holod that opened it just before lock
	 * the dead inode while another locks a new file at the same path, and both would then
	 * believe they own the socket. */
	if (ls->lock_fd >= 0)
		close(ls->lock_fd);
	free(ls->path);
	free(ls->lock_path);
	memset(ls, 0, sizeof(*ls));
	ls->fd = ls->lock_fd = -1;
}
