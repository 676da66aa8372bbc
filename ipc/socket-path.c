/* Where holod listens: one rule shared by the daemon and every client. */
#include "ipc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

int ipc_socket_path(char **ret)
{
	const char *env = getenv(IPC_SOCKET_ENV);
	char *path;

	if (env && env[0]) {
		path = xstrdup(env);
	} else {
		char *dir = NULL;
		int r = path_xdg(PATH_RUNTIME, "holod", &dir);
		if (r < 0)
			return r;
		path = path_join(dir, "holod.sock");
		free(dir);
	}
	if (strlen(path) > IPC_MAX_SOCKET_PATH) {
		free(path);
		return -ENAMETOOLONG;
	}
	*ret = path;
	return 0;
}
