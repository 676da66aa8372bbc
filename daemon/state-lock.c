/* The state directory: private, and one holod per directory (the journal's crash recovery
 * assumes no other writer). */
#include "system.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

int state_lock_take(const char *dir, int *ret_fd)
{
	char *path = path_join(dir, "holod.lock");
	int fd, r = 0;

	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		r = log_error_errno(-errno, "cannot open %s", path);
		goto free_path;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		r = -errno;
		if (r == -EWOULDBLOCK) {
			log_error("another holod uses the state directory %s", dir);
			r = -EBUSY;
		} else {
			log_error_errno(r, "cannot lock %s", path);
		}
		close(fd);
		goto free_path;
	}
	*ret_fd = fd;
free_path:
	free(path);
	return r;
}

int state_dir_prepare(const char *dir)
{
	struct stat st;
	int r;

	if ((r = path_mkdir_p(dir, 0700)) < 0)
		return log_error_errno(r, "cannot create the state directory %s", dir);
	if (stat(dir, &st) < 0)
		return log_error_errno(-errno, "cannot stat the state directory %s", dir);
	if (st.st_uid != geteuid()) {
		log_error("the state directory %s belongs to uid %u, not to holod's uid %u: its "
			  "journal would not be private; pick another with --state-dir",
			  dir, (unsigned)st.st_uid, (unsigned)geteuid());
		return -EPERM;
	}
	if (!(st.st_mode & 077))
		return 0;
	if (chmod(dir, 0700) < 0)
		return log_error_errno(-errno, "cannot make the state directory %s private (0700)", dir);
	log_notice("made the state directory %s private (mode %04o -> 0700): its journal and "
		   "screenshots hold what tasks typed and saw",
		   dir, (unsigned)(st.st_mode & 07777));
	return 0;
}
