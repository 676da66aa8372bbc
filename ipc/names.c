/* String forms of the protocol's enums (the JSON spelling is the contract). */
#include "ipc.h"

#include <errno.h>
#include <string.h>

#include "common.h"
#include "json-internal.h"

static const char *const task_status_names[] = {
	[IPC_TASK_QUEUED] = "queued",	    [IPC_TASK_RUNNING] = "running",
	[IPC_TASK_SUCCEEDED] = "succeeded", [IPC_TASK_FAILED] = "failed",
	[IPC_TASK_CANCELLED] = "cancelled", [IPC_TASK_INTERRUPTED] = "interrupted",
	[IPC_TASK_STUCK] = "stuck",
};

const char *const ipc_goal_status_names[IPC_N_GOAL_STATUS_NAMES] = {
	[IPC_GOAL_TODO] = "todo",
	[IPC_GOAL_RUNNING] = "running",
	[IPC_GOAL_DONE] = "done",
	[IPC_GOAL_FAILED] = "failed",
};

/* Also the member names of wait_for's conditions. */
const char *const ipc_wait_kind_names[IPC_N_WAIT_KIND_NAMES] = {
	[IPC_WAIT_WINDOW] = "window",
	[IPC_WAIT_WINDOW_GONE] = "window_gone",
	[IPC_WAIT_FOCUS] = "focus",
	[IPC_WAIT_SCREEN_STABLE] = "screen_stable",
	[IPC_WAIT_REGION_CHANGED] = "region_changed",
};

const char *ipc_wait_kind_to_string(enum ipc_wait_kind k)
{
	return (unsigned)k < ARRAY_SIZE(ipc_wait_kind_names) ? ipc_wait_kind_names[k] : NULL;
}

static const char *const coords_names[] = {
	[IPC_COORDS_PIXELS] = "pixels",
	[IPC_COORDS_MODEL] = "model",
};

/* The one spelling table of buttons and directions: the action parser (action.c) reads these
 * too (json-internal.h). */
const char *const ipc_button_names[IPC_N_BUTTON_NAMES] = {
	[IPC_BUTTON_LEFT] = "left",
	[IPC_BUTTON_RIGHT] = "right",
	[IPC_BUTTON_MIDDLE] = "middle",
};

const char *const ipc_direction_names[IPC_N_DIRECTION_NAMES] = {
	[IPC_DIRECTION_UP] = "up",
	[IPC_DIRECTION_DOWN] = "down",
	[IPC_DIRECTION_LEFT] = "left",
	[IPC_DIRECTION_RIGHT] = "right",
};

static const char *const kind_names[] = {
	[IPC_TASK_KIND_INSTRUCTION] = "instruction",
	[IPC_TASK_KIND_SCRIPT] = "script",
};

static int lookup(const char *const *table, size_t n, const char *s)
{
	if (!s)
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		if (table[i] && strcmp(table[i], s) == 0)
			return (int)i;
	return -EINVAL;
}

const char *ipc_task_status_to_string(enum ipc_task_status s)
{
	return (unsigned)s < ARRAY_SIZE(task_status_names) ? task_status_names[s] : NULL;
}

int ipc_task_status_from_string(const char *s)
{
	return lookup(task_status_names, ARRAY_SIZE(task_status_names), s);
}

bool ipc_task_status_is_final(enum ipc_task_status s)
{
	return s != IPC_TASK_QUEUED && s != IPC_TASK_RUNNING;
}

const char *ipc_coords_to_string(enum ipc_coords c)
{
	return (unsigned)c < ARRAY_SIZE(coords_names) ? coords_names[c] : NULL;
}

int ipc_coords_from_string(const char *s)
{
	return lookup(coords_names, ARRAY_SIZE(coords_names), s);
}

const char *ipc_button_to_string(enum ipc_button b)
{
	return (unsigned)b < ARRAY_SIZE(ipc_button_names) ? ipc_button_names[b] : NULL;
}

const char *ipc_direction_to_string(enum ipc_direction d)
{
	return (unsigned)d < ARRAY_SIZE(ipc_direction_names) ? ipc_direction_names[d] : NULL;
}

int ipc_button_from_string(const char *s)
{
	return lookup(ipc_button_names, ARRAY_SIZE(ipc_button_names), s);
}

int ipc_direction_from_string(const char *s)
{
	return lookup(ipc_direction_names, ARRAY_SIZE(ipc_direction_names), s);
}

const char *ipc_task_kind_to_string(enum ipc_task_kind k)
{
	return (unsigned)k < ARRAY_SIZE(kind_names) ? kind_names[k] : NULL;
}

const char *ipc_goal_status_to_string(enum ipc_goal_status s)
{
	return (unsigned)s < ARRAY_SIZE(ipc_goal_status_names) ? ipc_goal_status_names[s] : NULL;
}

int ipc_goal_status_from_string(const char *s)
{
	return lookup(ipc_goal_status_names, ARRAY_SIZE(ipc_goal_status_names), s);
}

static const char *const approve_names[] = {
	[IPC_APPROVE_NONE] = "none",
	[IPC_APPROVE_RISKY] = "risky",
	[IPC_APPROVE_ALL] = "all",
};

const char *ipc_approve_to_string(enum ipc_approve a)
{
	return a > IPC_APPROVE_DEFAULT && (unsigned)a < ARRAY_SIZE(approve_names) ? approve_names[a] : NULL;
}

int ipc_approve_from_string(const char *s)
{
	for (size_t i = IPC_APPROVE_NONE; s && i < ARRAY_SIZE(approve_names); i++)
		if (strcmp(s, approve_names[i]) == 0)
			return (int)i;
	return -EINVAL;
}
