/* notify-recv PATH TIMEOUT_S: plays the service manager's side of sd_notify for the lifecycle
 * test: binds a datagram socket at PATH, prints each message received (one per line) until one
 * contains "READY=1" or TIMEOUT_S passes (exit 1). */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char buf[4096];

	if (argc != 3 || strlen(argv[1]) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "usage: notify-recv PATH TIMEOUT_S\n");
		return 2;
	}
	int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
	strcpy(sa.sun_path, argv[1]);
	unlink(argv[1]);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		perror("notify-recv: bind");
		return 2;
	}
	/* Tell the test we are listening. */
	printf("LISTENING\n");
	fflush(stdout);
	time_t deadline = time(NULL) + atoi(argv[2]);
	while (time(NULL) < deadline) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (poll(&p, 1, 100) <= 0)
			continue;
		ssize_t n = recv(fd, buf, sizeof(buf) - 1, 0);
		if (n < 0)
			continue;
		buf[n] = '\0';
		printf("%s\n", buf);
		fflush(stdout);
		if (strstr(buf, "READY=1"))
			return 0;
	}
	return 1;
}
