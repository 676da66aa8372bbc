/* Tests that run their own program again as a child (a case that must abort, a run under another
 * environment) and read what it printed. C++: the gpu-emu suite's .cu tests. Include after
 * test.h. */
#pragma once

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

extern char **environ;

/* Runs /proc/self/exe with argv[1] = arg in environment envp (NULL: this process's), its stdout
 * and stderr captured into *out; returns its wait status. */
static inline int test_spawn_self(const char *arg, char *const *envp, std::string *out)
{
	int fds[2];
	REQUIRE(pipe(fds) == 0);
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
	posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
	posix_spawn_file_actions_addclose(&fa, fds[0]);
	std::string a = arg;
	char *argv[] = {(char *)"/proc/self/exe", &a[0], nullptr};
	pid_t pid;
	REQUIRE(posix_spawn(&pid, "/proc/self/exe", &fa, nullptr, argv, envp ? envp : environ) == 0);
	posix_spawn_file_actions_destroy(&fa);
	close(fds[1]);
	out->clear();
	char buf[4096];
	ssize_t r;
	while ((r = read(fds[0], buf, sizeof(buf))) > 0)
		out->append(buf, (size_t)r);
	close(fds[0]);
	int status;
	REQUIRE(waitpid(pid, &status, 0) == pid);
	return status;
}
