/* holod's step schema and step parser for the remote suite's shell tests:
 *
 *   step-tool schema   prints the step's JSON Schema, as holod sends it in response_format
 *   step-tool check    reads one step from stdin and parses it with holod's parser: prints the
 *                      canonical step and exits 0, or prints the parser's error and exits 1
 *
 * Exit status 2 on a usage or I/O error.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy.h"

static int check(void)
{
	/* One byte more than the parser takes, so a longer step reaches it and is refused. */
	static char text[POLICY_MAX_STEP_BYTES + 1];
	size_t n = fread(text, 1, sizeof(text), stdin);
	if (ferror(stdin)) {
		fprintf(stderr, "step-tool: cannot read the step: %s\n", strerror(errno));
		return 2;
	}
	struct policy_step step = {0};
	char err[256] = "";
	int r = policy_step_parse(text, n, &step, err, sizeof(err));
	if (r < 0) {
		printf("invalid step: %s (%s)\n", err, strerror(-r));
		return 1;
	}
	char *json = policy_step_to_json(&step);
	policy_step_finish(&step);
	if (!json) {
		fprintf(stderr, "step-tool: cannot serialize the step: %s\n", strerror(errno));
		return 2;
	}
	puts(json);
	free(json);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "schema") == 0) {
		char *schema = policy_step_json_schema();
		if (!schema) {
			fprintf(stderr, "step-tool: no schema: %s\n", strerror(errno));
			return 2;
		}
		puts(schema);
		free(schema);
		return 0;
	}
	if (argc == 2 && strcmp(argv[1], "check") == 0)
		return check();
	fprintf(stderr, "usage: step-tool schema|check\n");
	return 2;
}
