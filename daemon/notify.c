/* sd_notify(3) protocol, implemented directly to avoid a libsystemd dependency. */
#include "system.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common.h"

static char *socket_path; /* $NOTIFY_SOCKET as holod was started with it */

void notify_init(void)
{
	const char *path = getenv("NOTIFY_SOCKET");
	if (path && path[0] && !socket_path)
		socket_path = strdup(path);
	unsetenv("NOTIFY_SOCKET");
}

int notify_send(const char *state)
{
	const char *path = socket_path;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	size_t n;
	int fd, r = 1;

	if (!path || !path[0])
		return 0;
	n = strlen(path);
	if ((path[0] != '/' && path[0] != '@') || n >= sizeof(sa.sun_path))
		return log_warning_errno(-EINVAL, "ignoring NOTIFY_SOCKET=%s", path);
	memcpy(sa.sun_path, path, n);
	if (path[0] == '@')
		sa.sun_path[0] = '\0';

	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return log_warning_errno(-errno, "sd_notify socket");
	socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + (path[0] == '/' ? 1 : 0));
	if (sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sa, len) < 0)
		r = log_warning_errno(-errno, "sd_notify %s", state);
	close(fd);
	return r;
}
