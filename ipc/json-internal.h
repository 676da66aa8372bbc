/* Shared between the ipc parsers; not installed, not part of the contract. */
#pragma once

#include <jansson.h>
#include <stdarg.h>

#include "ipc.h"

/* Writes "<path>: <message>" (or just the message when path is empty) and returns err. */
int ipc_error_at(char *errbuf, size_t errlen, int err, const char *path, const char *format, ...)
	__attribute__((format(printf, 5, 6)));

/* Joins a field path: "" + "x" -> "x", "script[2]" + "x" -> "script[2].x". Into buf. */
const char *ipc_field_path(char *buf, size_t size, const char *prefix, const char *name);

/* Validates one action object found at `path` (for messages). */
int ipc_action_from_json(const json_t *obj, enum ipc_coords coords, const char *path, struct ipc_action *ret,
			 char *errbuf, size_t errlen);
/* New reference, NULL on OOM. */
json_t *ipc_action_to_json_value(const struct ipc_action *a);
/* Loads a JSON document, turning jansson's error into "invalid JSON at line L column C: ...". */
json_t *ipc_json_load(const char *json, size_t len, char *errbuf, size_t errlen);

/* Spellings of enum ipc_button and enum ipc_direction (names.c), indexed by value. */
#define IPC_N_BUTTON_NAMES 3
#define IPC_N_DIRECTION_NAMES 4
#define IPC_N_WAIT_KIND_NAMES 5
#define IPC_N_GOAL_STATUS_NAMES 4
extern const char *const ipc_goal_status_names[IPC_N_GOAL_STATUS_NAMES];
extern const char *const ipc_wait_kind_names[IPC_N_WAIT_KIND_NAMES];
extern const char *const ipc_button_names[IPC_N_BUTTON_NAMES];
extern const char *const ipc_direction_names[IPC_N_DIRECTION_NAMES];
