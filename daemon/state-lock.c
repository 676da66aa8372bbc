/* One holod per state directory: the journal's crash recovery assumes no other writer. */
#include "system.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/file.h>
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
