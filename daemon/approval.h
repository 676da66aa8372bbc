/* approval: which actions wait for the user's approval before they run (--approve none|risky|all,
 * docs/api.md "The user in the loop"). Pure: the rules are data, the matcher looks at an action
 * and the window it acts on, and knows no display; the executor finds the window and holds the
 * step (executor.c). Rules are immutable once built and may be shared between threads.
 *
 * The rule file (--approve-rules FILE, JSON; each member present replaces that default):
 *   {"hotkeys": ["alt+f4", "ctrl+alt+delete", "ctrl+w", "ctrl+q"],
 *    "terminals": ["xterm", "gnome-terminal", ...],
 *    "tools": ["launch"],
 *    "windows": [{"title": "regex", "class": "regex", "instance": "regex"}, ...]}
 * hotkeys: key combinations (keys.h names) held when an action presses all of their keys together
 * (a hotkey, or hold_and_tap_key's hold keys with one tap key); terminals: window classes (WM_CLASS
 * class or instance, compared case-insensitively) into which `write` is held; tools: tool names
 * always held; windows: PCRE2 window matches (ipc.h) on which any action is held. Keys an
 * earlier step holds down (key_down, not released yet: struct approval_held) count as pressed
 * with the keys of a later hotkey, hold_and_tap_key, key_down or write, so that a combination
 * spread over two steps (key_down ctrl, then hotkey w) is held as the hotkey itself is. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ipc.h"

/* Named limits of a rule file. */
#define APPROVAL_MAX_FILE_BYTES (64 * 1024)
#define APPROVAL_MAX_RULES 64	    /* entries of each list */
#define APPROVAL_MAX_NAME_BYTES 128 /* a terminal class, a hotkey combination */

struct approval_rules;

/* The built-in rules (the file's defaults above). NULL + errno (ENOMEM). */
struct approval_rules *approval_rules_default(void);
/* The rules of `path`, defaults for the members it leaves out. NULL + errno with a sentence in err
 * naming the file and the member: EINVAL (bad JSON, unknown member, unknown key or tool name, bad
 * regex), E2BIG (over a named limit), or the error opening it. */
struct approval_rules *approval_rules_load(const char *path, char *err, size_t errlen);
void approval_rules_destroy(struct approval_rules *r);

/* The window an action acts on (the one under its point, or the focused one for keys); members
 * may be NULL (none, or unknown). */
struct approval_window {
	const char *title, *class_name, *instance;
};

/* The keys a task's earlier steps hold down (key_down without its key_up yet), as folded
 * keysyms; zero-initialised: none. More than APPROVAL_MAX_HELD_KEYS: `overflow`, and every
 * action that presses a key is then held under --approve risky (fails closed). */
#define APPROVAL_MAX_HELD_KEYS 16
struct approval_held {
	uint32_t keysyms[APPROVAL_MAX_HELD_KEYS];
	size_t n;
	bool overflow;
};

/* After action `a` ran: a key_down adds its key, a key_up removes it; other tools change
 * nothing (a hotkey or hold_and_tap_key releases what it pressed itself). */
void approval_held_note(struct approval_held *h, const struct ipc_action *a);

/* Whether the action acts on the desktop at all: answer, ask_user, update_plan, wait and
 * wait_for never wait for approval. */
bool approval_acts(enum ipc_tool tool);

/* True when `a` waits for approval under `mode` (IPC_APPROVE_NONE: never; ALL: every action that
 * acts; RISKY: those the rules name), with the reason a person reads in `why` (e.g. "hotkey
 * presses alt+f4, one of the approval rules' hotkeys"). `w` and `held` (the keys earlier steps
 * hold down) may be NULL. */
bool approval_check(const struct approval_rules *r, enum ipc_approve mode, const struct ipc_action *a,
		    const struct approval_window *w, const struct approval_held *held, char *why,
		    size_t whylen);

/* data:image/png;base64,... of `png` (malloc'd), for a held step's target crop. */
char *approval_png_data_url(const unsigned char *png, size_t n);
