/* Entry points of holo-bench's commands: argv[0] is the command name. Return an exit code. */
#pragma once

int bench_x11_main(int argc, char **argv);
int bench_engine_main(int argc, char **argv);
int bench_policy_main(int argc, char **argv);
int bench_vision_main(int argc, char **argv);
