/* holoctl's process entry: libcurl's global state around holoctl_main(). */
#include "cli.h"

#include "common.h"
#include "http.h"

#include <stdio.h>

int main(int argc, char **argv)
{
	int r;

	log_set_program_name("holoctl");
	log_setup_from_env();
	if (cli_http_global_init() < 0) {
		fprintf(stderr, "holoctl: cannot initialise libcurl\n");
		return CLI_EXIT_ERROR;
	}
	r = holoctl_main(argc, argv, stdin, stdout, stderr);
	cli_http_global_cleanup();
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "holoctl: cannot write the output\n");
		if (r == CLI_EXIT_OK)
			r = CLI_EXIT_ERROR;
	}
	return r;
}
