/* The action-tool table (ipc.h, "the action-tool table"): every tool once, with the members the
 * parser accepts, holoctl do's arguments, and each policy format's view of it. action.c, the
 * policy formats and holoctl read this table; the executor runs what it describes. */
#include <ctype.h>
#include <errno.h>
#include <string.h>

#include "common.h"
#include "ipc.h"

/* brace initializers in macros, which it would open as blocks: */
/* clang-format off */
/* Arguments of the formats' layouts. */
#define STR(n, m) {.name = (n), .type = IPC_ARG_STRING, .required = true, .max = (m)}
#define INT(n, l, h) {.name = (n), .type = IPC_ARG_INT, .required = true, .lo = (l), .hi = (h)}
#define OPT_INT(n, l, h, d) {.name = (n), .type = IPC_ARG_INT, .lo = (l), .hi = (h), .def = (d)}
#define COORD(n) INT(n, 0, IPC_MODEL_COORD_MAX)
#define ELEMENT STR("element", IPC_MAX_ELEMENT_BYTES)
#define POINT ELEMENT, COORD("x"), COORD("y")
#define BOOL(n) {.name = (n), .type = IPC_ARG_BOOL}
#define BUTTON {.name = "button", .type = IPC_ARG_BUTTON}
#define DIRECTION {.name = "direction", .type = IPC_ARG_DIRECTION, .required = true}
#define KEY {.name = "key", .type = IPC_ARG_KEY, .required = true}
#define KEYS(n, h) {.name = (n), .type = IPC_ARG_KEYS, .required = true, .hi = (h)}
#define GOALS {.name = "goals", .type = IPC_ARG_GOALS, .required = true}
#define LAYOUT(...) {{__VA_ARGS__}, sizeof((struct ipc_tool_arg[]){__VA_ARGS__}) / \
					sizeof(struct ipc_tool_arg)}
/* clang-format on */

/* Clients' schemas (struct ipc_tool_client): JSON text, the parser's ranges. */
#define C_INT(n, lo, hi) "\"" n "\": {\"type\": \"integer\", \"minimum\": " #lo ", \"maximum\": " #hi "}"
#define C_XY C_INT("x", 0, 32767) ", " C_INT("y", 0, 32767)
#define C_ELEMENT                                                                                            \
	"\"element\": {\"type\": \"string\", \"maxLength\": 512, \"description\": \"what is at "             \
	"the point, for the journal\"}"
#define C_TARGET                                                                                             \
	"\"target\": {\"type\": \"string\", \"maxLength\": 512, \"description\": \"instead of x "            \
	"and y: a description holod's model locates on the screen\"}"
#define C_POINT C_XY ", " C_ELEMENT
#define C_KEY "{\"type\": \"string\", \"maxLength\": 32}"
#define C_KEYS(n) "{\"type\": \"array\", \"minItems\": 1, \"maxItems\": " #n ", \"items\": " C_KEY "}"
#define C_MATCH                                                                                              \
	"{\"type\": \"object\", \"description\": \"PCRE2 regexes, all of which must match\", "               \
	"\"properties\": {\"title\": {\"type\": \"string\", \"maxLength\": 512}, \"class\": "                \
	"{\"type\": \"string\", \"maxLength\": 512}, \"instance\": {\"type\": \"string\", "                  \
	"\"maxLength\": 512}}, \"additionalProperties\": false}"
#define C_TIMEOUT                                                                                            \
	"\"timeout\": {\"type\": \"number\", \"exclusiveMinimum\": 0, \"maximum\": 600, "                    \
	"\"description\": \"seconds (10)\"}"

_Static_assert(IPC_MAX_PIXEL_COORD == 32767 && IPC_MAX_ELEMENT_BYTES == 512 &&
		       IPC_MAX_CONTENT_BYTES == 65536 && IPC_MAX_HOTKEY_KEYS == 5 &&
		       IPC_MAX_KEY_NAME_BYTES == 32 && IPC_MAX_HOTKEY_REPEAT == 20 &&
		       IPC_MAX_SCROLL_SIZE == 100 && IPC_MAX_WAIT_MS == 30000,
	       "the clients' schemas below spell these limits");

struct tool_entry {
	struct ipc_tool_info info;
	/* The formats' views; a NULL name: not in that format's vocabulary. */
	struct ipc_model_tool holo3, nano;
};

#define POINTER_FIELDS "element x y"

static const struct tool_entry tools[IPC_TOOL_COUNT_] = {
	[IPC_TOOL_CLICK] =
		{
			{"click",
			 POINTER_FIELDS " button target",
			 {"X Y", 2, 2, "x y",
			  "  click X Y [--button left|right|middle]   right_click X Y   middle_click X Y\n"},
			 {"Click", "Clicks at a point (or a described target).",
			  "{" C_POINT ", " C_TARGET ", \"button\": {\"type\": \"string\", \"enum\": "
			  "[\"left\", \"right\", \"middle\"]}}",
			  NULL, false}},
			{"click", IPC_TOOL_CLICK, "click on an element", LAYOUT(POINT, BUTTON)},
			{"click_desktop", IPC_TOOL_CLICK, "click an element", LAYOUT(POINT, BUTTON)},
		},
	[IPC_TOOL_DOUBLE_CLICK] =
		{
			{"double_click",
			 POINTER_FIELDS " target",
			 {"X Y", 2, 2, "x y",
			  "  double_click X Y     triple_click X Y     move X Y     drag X Y X2 Y2\n"},
			 {"Double-click", "Double-clicks at a point (or a described target).",
			  "{" C_POINT ", " C_TARGET "}", NULL, false}},
			{"double_click", IPC_TOOL_DOUBLE_CLICK, "double-click on an element", LAYOUT(POINT)},
			{"double_click_desktop", IPC_TOOL_DOUBLE_CLICK, "double-click an element",
			 LAYOUT(POINT)},
		},
	[IPC_TOOL_TRIPLE_CLICK] =
		{
			{"triple_click",
			 POINTER_FIELDS,
			 {"X Y", 2, 2, "x y", ""},
			 {"Triple-click", "Triple-clicks at a point.", "{" C_POINT "}", "[\"x\", \"y\"]",
			  false}},
			{"triple_click", IPC_TOOL_TRIPLE_CLICK,
			 "triple-click on an element (selects a line or paragraph)", LAYOUT(POINT)},
			{0},
		},
	[IPC_TOOL_MOVE] =
		{
			{"move",
			 POINTER_FIELDS " target",
			 {"X Y", 2, 2, "x y", ""},
			 {"Move the pointer", "Moves the pointer to a point (or a described target).",
			  "{" C_POINT ", " C_TARGET "}", NULL, false}},
			{"move", IPC_TOOL_MOVE, "move the pointer over an element", LAYOUT(POINT)},
			{"move_to_desktop", IPC_TOOL_MOVE, "move the pointer over an element", LAYOUT(POINT)},
		},
	[IPC_TOOL_DRAG] =
		{
			{"drag",
			 POINTER_FIELDS " x2 y2 target target2",
			 {"X Y X2 Y2", 4, 4, "x y x2 y2", ""},
			 {"Drag", "Drags from (x, y) to (x2, y2) with the left button.",
			  "{" C_POINT ", " C_TARGET ", " C_INT("x2", 0, 32767) ", " C_INT(
				  "y2", 0,
				  32767) ", \"target2\": {\"type\": \"string\", \"maxLength\": 512}}",
			  NULL, false}},
			{"drag", IPC_TOOL_DRAG, "drag from (x, y) to (x2, y2)",
			 LAYOUT(POINT, COORD("x2"), COORD("y2"))},
			{0},
		},
	[IPC_TOOL_SCROLL] =
		{
			{"scroll",
			 POINTER_FIELDS " direction scroll_size",
			 {"X Y up|down|left|right [NOTCHES]", 3, 4, "x y direction scroll_size",
			  "  scroll X Y up|down|left|right [NOTCHES]  (default 5 notches, at most 100)\n"},
			 {"Scroll", "Scrolls at a point.",
			  "{" C_POINT ", \"direction\": {\"type\": \"string\", \"enum\": [\"up\", \"down\", "
			  "\"left\", \"right\"]}, " C_INT("scroll_size", 1, 100) "}",
			  "[\"x\", \"y\", \"direction\"]", false}},
			{"scroll", IPC_TOOL_SCROLL, "scroll at (x, y) by scroll_size wheel notches",
			 LAYOUT(POINT, DIRECTION,
				OPT_INT("scroll_size", 1, IPC_HOLO3_MAX_SCROLL_SIZE, IPC_DEFAULT_SCROLL_SIZE))},
			{"scroll_desktop", IPC_TOOL_SCROLL,
			 "scroll over an element by scroll_size wheel notches",
			 LAYOUT(POINT, DIRECTION,
				OPT_INT("scroll_size", 1, IPC_NANO_MAX_SCROLL_SIZE,
					IPC_NANO_DEFAULT_SCROLL_SIZE))},
		},
	[IPC_TOOL_WRITE] =
		{
			{"write",
			 "content press_enter overwrite",
			 {"TEXT", 1, 1, "content",
			  "  write TEXT [--enter] [--overwrite]       (--overwrite selects all first)\n"},
			 {"Type text", "Types UTF-8 text into the focused window.",
			  "{\"content\": {\"type\": \"string\", \"maxLength\": 65536}, \"press_enter\": "
			  "{\"type\": \"boolean\"}, \"overwrite\": {\"type\": \"boolean\", \"description\": "
			  "\"ctrl+a first\"}}",
			  "[\"content\"]", false}},
			{"write", IPC_TOOL_WRITE,
			 "type text into the focused element (overwrite: select all "
			 "first; press_enter: press Enter after)",
			 LAYOUT(STR("content", IPC_MODEL_MAX_CONTENT_BYTES), BOOL("press_enter"),
				BOOL("overwrite"))},
			{"write_desktop", IPC_TOOL_WRITE,
			 "type text into the focused element (overwrite: "
			 "select and delete what is there first; press_enter: press Enter afterwards)",
			 LAYOUT(STR("content", IPC_MODEL_MAX_CONTENT_BYTES), BOOL("press_enter"),
				BOOL("overwrite"))},
		},
	[IPC_TOOL_HOTKEY] =
		{
			{"hotkey",
			 "keys repeat_count",
			 {"KEY[+KEY...] [KEY...]", 1, IPC_MAX_HOTKEY_KEYS, "keys*",
			  "  hotkey KEY[+KEY...] [--repeat N]         e.g. ctrl+s, ctrl+shift+t, Return\n"},
			 {"Press keys", "Presses 1..5 keys together (ctrl, shift, t...), repeat_count times.",
			  "{\"keys\": " C_KEYS(5) ", " C_INT("repeat_count", 1, 20) "}", "[\"keys\"]", false}},
			{"hotkey", IPC_TOOL_HOTKEY,
			 "press keys together, e.g. [\"ctrl\",\"c\"], repeat_count "
			 "times",
			 LAYOUT(KEYS("keys", 0), OPT_INT("repeat_count", 1, IPC_HOLO3_MAX_REPEAT_COUNT, 1))},
			{"hotkey_desktop", IPC_TOOL_HOTKEY,
			 "press keys together, e.g. [\"ctrl\", \"c\"], "
			 "repeat_count times",
			 LAYOUT(KEYS("keys", IPC_MAX_HOTKEY_KEYS),
				OPT_INT("repeat_count", 1, IPC_NANO_MAX_REPEAT_COUNT, 1))},
		},
	[IPC_TOOL_KEY_DOWN] =
		{
			{"key_down",
			 "key",
			 {"KEY", 1, 1, "key",
			  "  key_down KEY     key_up KEY              wait SECONDS (at most 30)\n"},
			 {"Hold a key", "Presses a key and holds it until key_up (or the end of the task).",
			  "{\"key\": " C_KEY "}", "[\"key\"]", false}},
			{"key_down", IPC_TOOL_KEY_DOWN, "press and hold a key", LAYOUT(KEY)},
			{"key_down_desktop", IPC_TOOL_KEY_DOWN, "press and hold one key", LAYOUT(KEY)},
		},
	[IPC_TOOL_KEY_UP] =
		{
			{"key_up",
			 "key",
			 {"KEY", 1, 1, "key", ""},
			 {"Release a key", "Releases a held key.", "{\"key\": " C_KEY "}", "[\"key\"]",
			  false}},
			{"key_up", IPC_TOOL_KEY_UP, "release a held key", LAYOUT(KEY)},
			{"key_up_desktop", IPC_TOOL_KEY_UP, "release a held key", LAYOUT(KEY)},
		},
	[IPC_TOOL_WAIT] =
		{
			{"wait",
			 "duration",
			 {"SECONDS", 1, 1, "duration", ""},
			 {"Wait", "Waits a number of seconds (up to 30).",
			  "{\"duration\": {\"type\": \"number\", \"minimum\": 0.001, \"maximum\": 30}}",
			  "[\"duration\"]", false}},
			{"wait", IPC_TOOL_WAIT, "wait a number of seconds",
			 LAYOUT(INT("duration", 1, IPC_MAX_WAIT_MS / 1000))},
			{0},
		},
	[IPC_TOOL_ANSWER] =
		{
			{"answer", "content", {0}, {0}},
			{"answer", IPC_TOOL_ANSWER, "finish the task with the answer or result",
			 LAYOUT(STR("content", IPC_MODEL_MAX_CONTENT_BYTES))},
			{"answer", IPC_TOOL_ANSWER, "finish the task: the answer, or what was done",
			 LAYOUT(STR("content", IPC_MODEL_MAX_CONTENT_BYTES))},
		},
	[IPC_TOOL_ASK_USER] =
		{
			{"ask_user", "question", {0}, {0}},
			{"ask_user", IPC_TOOL_ASK_USER,
			 "ask the user a question only they can answer (a "
			 "choice, a missing detail); their reply is the next tool output",
			 LAYOUT(STR("question", IPC_MODEL_MAX_QUESTION_BYTES))},
			/* holod's own, not the published harness's: the task waits for the user's reply */
			{"ask_user", IPC_TOOL_ASK_USER,
			 "ask the user a question only they can answer (a "
			 "choice, a missing detail); their reply comes back as the tool's output",
			 LAYOUT(STR("question", IPC_MODEL_MAX_QUESTION_BYTES))},
		},
	[IPC_TOOL_LAUNCH] =
		{
			{"launch",
			 "command wait_window timeout",
			 {"[--title RE] [--class RE] -- PROGRAM [ARG...]", 1, IPC_MAX_LAUNCH_ARGS, "command*",
			  "  launch [--class RE] [--title RE] -- PROGRAM [ARG...]\n"
			  "                         start it on the display; wait for its window if asked\n"},
			 {"Launch a program",
			  "Starts a program on holod's display (searched in PATH; it outlives the task), and "
			  "with wait_window waits for its new window.",
			  "{\"command\": {\"type\": \"array\", \"minItems\": 1, \"maxItems\": 64, \"items\": "
			  "{\"type\": \"string\", \"maxLength\": 4096}}, \"wait_window\": " C_MATCH
			  ", " C_TIMEOUT "}",
			  "[\"command\"]", false}},
			{0},
			{0},
		},
	[IPC_TOOL_WAIT_FOR] =
		{
			{"wait_for",
			 "timeout window window_gone focus screen_stable region_changed",
			 {"window|window_gone|focus --title/--class/--instance RE | screen_stable MS | "
			  "region_changed X Y W H",
			  1, 5, NULL,
			  "  wait_for window|window_gone|focus --title/--class/--instance RE\n"
			  "  wait_for screen_stable MS            wait_for region_changed X Y W H\n"},
			 {"Wait for a condition",
			  "Waits for exactly one condition: a window (window), its absence (window_gone), "
			  "the "
			  "focus (focus), a still screen (screen_stable {ms}) or a change in a region "
			  "(region_changed {x, y, width, height}).",
			  "{\"window\": " C_MATCH ", \"window_gone\": " C_MATCH ", \"focus\": " C_MATCH ", "
			  "\"screen_stable\": {\"type\": \"object\", \"properties\": {" C_INT(
				  "ms", 50,
				  60000) "}, \"required\": [\"ms\"]}, \"region_changed\": {\"type\": "
					 "\"object\", "
					 "\"properties\": {\"x\": {\"type\": \"integer\"}, \"y\": {\"type\": "
					 "\"integer\"}, "
					 "\"width\": {\"type\": \"integer\"}, \"height\": {\"type\": "
					 "\"integer\"}}, "
					 "\"required\": [\"x\", \"y\", \"width\", \"height\"]}, " C_TIMEOUT
					 "}",
			  NULL, true}},
			{0},
			{0},
		},
	[IPC_TOOL_ACTIVATE] =
		{
			{"activate",
			 "window timeout",
			 {"--title/--class/--instance RE", 0, 0, "",
			  "  activate --title/--class/--instance RE  raise and focus a window\n"
			  "  (RE: a PCRE2 regex; --timeout SECONDS, default 10, at most 600)\n"},
			 {"Activate a window",
			  "Raises and focuses the topmost window matching title/class/instance regexes.",
			  "{\"window\": " C_MATCH ", " C_TIMEOUT "}", "[\"window\"]", false}},
			{0},
			{0},
		},
	[IPC_TOOL_HOLD_AND_TAP_KEY] =
		{
			{"hold_and_tap_key",
			 "hold_keys tap_keys",
			 {"HOLD[+HOLD...] TAP [TAP...]", 2, 1 + IPC_MAX_TAP_KEYS, "hold_keys tap_keys*",
			  "  hold_and_tap_key HOLD[+HOLD...] TAP [TAP...]  e.g. alt tab tab: hold, tap "
			  "each\n"},
			 {"Hold and tap keys",
			  "Holds 1..3 keys, taps 1..5 keys in order, releases the held ones (alt + tab tab).",
			  "{\"hold_keys\": " C_KEYS(3) ", \"tap_keys\": " C_KEYS(5) "}",
			  "[\"hold_keys\", \"tap_keys\"]", false}},
			{0},
			{"hold_and_tap_key_desktop", IPC_TOOL_HOLD_AND_TAP_KEY,
			 "hold the hold_keys down while tapping the tap_keys in turn",
			 LAYOUT(KEYS("hold_keys", IPC_MAX_HOLD_KEYS), KEYS("tap_keys", IPC_MAX_TAP_KEYS))},
		},
	[IPC_TOOL_DRAG_TO] =
		{
			{"drag_to",
			 POINTER_FIELDS,
			 {"X Y", 2, 2, "x y",
			  "  drag_to X Y            drag from where the pointer is to X Y\n"},
			 {"Drag to",
			  "Drags with the left button from where the pointer is (put it there with "
			  "move) to (x, y).",
			  "{" C_POINT "}", "[\"x\", \"y\"]", false}},
			{0},
			{"drag_to_desktop", IPC_TOOL_DRAG_TO,
			 "drag from where the pointer is now (put it "
			 "there with move_to_desktop) to (x, y)",
			 LAYOUT(POINT)},
		},
	[IPC_TOOL_UPDATE_PLAN] =
		{
			{"update_plan",
			 "goals",
			 {"STATUS:TITLE [STATUS:TITLE...]", 1, IPC_MAX_PLAN_GOALS, "goals*",
			  "  update_plan STATUS:TITLE...  journal a plan (todo|running|done|failed), no "
			  "input\n"},
			 {0}},
			{0},
			{"update_plan", IPC_TOOL_UPDATE_PLAN,
			 "record your plan: 1..20 goals, each a title "
			 "and a status (todo, running, done or failed); nothing happens on the screen",
			 LAYOUT(GOALS)},
		},
};

_Static_assert(IPC_MAX_PLAN_GOALS == 20, "update_plan's help says 1..20 goals");

/* holo-nano's vocabulary in the published union's order (UpdatePlan .. Answer), then holod's
 * ask_user. holo3's is the enum's order up to IPC_TOOL_MODEL_COUNT. */
static const enum ipc_tool nano_order[] = {
	IPC_TOOL_UPDATE_PLAN,
	IPC_TOOL_WRITE,
	IPC_TOOL_CLICK,
	IPC_TOOL_DOUBLE_CLICK,
	IPC_TOOL_DRAG_TO,
	IPC_TOOL_SCROLL,
	IPC_TOOL_MOVE,
	IPC_TOOL_KEY_DOWN,
	IPC_TOOL_KEY_UP,
	IPC_TOOL_HOTKEY,
	IPC_TOOL_HOLD_AND_TAP_KEY,
	IPC_TOOL_ANSWER,
	IPC_TOOL_ASK_USER,
};

const struct ipc_tool_info *ipc_tool_info(enum ipc_tool t)
{
	return (unsigned)t < ARRAY_SIZE(tools) ? &tools[t].info : NULL;
}

const char *ipc_tool_to_string(enum ipc_tool t)
{
	return (unsigned)t < ARRAY_SIZE(tools) ? tools[t].info.name : NULL;
}

int ipc_tool_from_string(const char *s)
{
	for (size_t i = 0; s && i < ARRAY_SIZE(tools); i++)
		if (strcmp(tools[i].info.name, s) == 0)
			return (int)i;
	return -EINVAL;
}

bool ipc_tool_has_field(enum ipc_tool t, const char *member)
{
	if ((unsigned)t >= ARRAY_SIZE(tools) || !member || !member[0])
		return false;
	if (strcmp(member, "tool_name") == 0)
		return true;
	size_t n = strlen(member);
	for (const char *p = tools[t].info.fields; *p;) {
		size_t len = strcspn(p, " ");
		if (len == n && strncmp(p, member, n) == 0)
			return true;
		p += len;
		p += strspn(p, " ");
	}
	return false;
}

bool ipc_tool_has_point(enum ipc_tool t)
{
	return ipc_tool_has_field(t, "x");
}

const struct ipc_model_tool *ipc_model_tool(enum ipc_policy_format f, size_t i)
{
	switch (f) {
	case IPC_POLICY_FORMAT_HOLO3:
		return i < IPC_TOOL_MODEL_COUNT ? &tools[i].holo3 : NULL;
	case IPC_POLICY_FORMAT_HOLO_NANO:
		return i < ARRAY_SIZE(nano_order) ? &tools[nano_order[i]].nano : NULL;
	default:
		return NULL;
	}
}

/* ---- did you mean ---------------------------------------------------------------------------- */

#define SUGGEST_MAX_LEN 64

/* Optimal string alignment distance (a swap of neighbours is one edit), case ignored. */
static size_t edit_distance(const char *a, const char *b)
{
	size_t n = strlen(a), m = strlen(b);
	size_t d[SUGGEST_MAX_LEN + 1][SUGGEST_MAX_LEN + 1];

	for (size_t i = 0; i <= n; i++)
		d[i][0] = i;
	for (size_t j = 0; j <= m; j++)
		d[0][j] = j;
	for (size_t i = 1; i <= n; i++)
		for (size_t j = 1; j <= m; j++) {
			int ca = tolower((unsigned char)a[i - 1]), cb = tolower((unsigned char)b[j - 1]);
			size_t v = d[i - 1][j - 1] + (ca != cb);
			v = MIN(v, d[i - 1][j] + 1);
			v = MIN(v, d[i][j - 1] + 1);
			if (i > 1 && j > 1 && ca == tolower((unsigned char)b[j - 2]) &&
			    tolower((unsigned char)a[i - 2]) == cb)
				v = MIN(v, d[i - 2][j - 2] + 1);
			d[i][j] = v;
		}
	return d[n][m];
}

const char *ipc_did_you_mean(const char *word, const char *(*name)(size_t i, void *data), void *data)
{
	const char *best = NULL;
	size_t best_d = SIZE_MAX, n = word ? strlen(word) : 0;

	if (n == 0 || n > SUGGEST_MAX_LEN)
		return NULL;
	for (size_t i = 0;; i++) {
		const char *c = name(i, data);
		if (!c)
			break;
		if (strlen(c) > SUGGEST_MAX_LEN)
			continue;
		size_t d = edit_distance(word, c);
		if (d < best_d) {
			best_d = d;
			best = c;
		}
	}
	/* "ctr" for "ctrl" (1 of 3), "clik" for "click" (1 of 4); not "a" for "b" */
	return best && best_d > 0 && best_d <= 2 && 2 * best_d < n ? best : NULL;
}
