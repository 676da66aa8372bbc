/* holoctl report: one self-contained HTML page per task (GET /v1/tasks/{id}, .../steps and each
 * step's screenshots), readable in any browser without a server.
 *
 * Everything that came from the task, the model or the screen is HTML-escaped where it is
 * written (html_text); none of it is ever written inside the page's one script, which carries a
 * fresh nonce that the page's Content-Security-Policy requires, so markup a model wrote can
 * neither run nor load anything. Markers are SVG drawn over each "before" screenshot in the
 * image's own pixel space (viewBox = the image size), so they stay on target at any zoom. */
#include "cli.h"

#include "common.h"
#include "ipc.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>

/* Screenshots fetched for one report at most, in bytes (embedded as base64 they grow by 4/3). */
#define REPORT_MAX_IMAGE_BYTES (2ull * 1024 * 1024 * 1024)

enum { OPT_EXTERNAL_IMAGES = CLI_OPT_FIRST_COMMAND_OPTION, OPT_INCLUDE_SENSITIVE };

static const struct option report_options[] = {
	CLI_COMMON_LONG_OPTIONS,
	{"output", required_argument, NULL, 'o'},
	{"external-images", no_argument, NULL, OPT_EXTERNAL_IMAGES},
	{"include-sensitive", no_argument, NULL, OPT_INCLUDE_SENSITIVE},
	{0},
};

struct report {
	struct cli_context *ctx;
	long id;
	FILE *f;
	bool external;		/* images in <dir>/<N>-<which>.png beside the page */
	bool include_sensitive; /* also the screenshots of steps that typed a secret */
	char *image_dir;	/* the folder, as written to disk */
	char *image_dir_href;	/* the same, relative to the page */
	unsigned long long image_bytes;
};

static void html_text(FILE *f, const char *s)
{
	for (; s && *s; s++) {
		switch (*s) {
		case '&':
			fputs("&amp;", f);
			break;
		case '<':
			fputs("&lt;", f);
			break;
		case '>':
			fputs("&gt;", f);
			break;
		case '"':
			fputs("&quot;", f);
			break;
		case '\'':
			fputs("&#39;", f);
			break;
		default:
			fputc(*s, f);
		}
	}
}

static void base64(FILE *f, const unsigned char *p, size_t n)
{
	static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t i;

	for (i = 0; i + 2 < n; i += 3) {
		unsigned v = (unsigned)p[i] << 16 | (unsigned)p[i + 1] << 8 | p[i + 2];
		fputc(tab[v >> 18], f), fputc(tab[(v >> 12) & 63], f);
		fputc(tab[(v >> 6) & 63], f), fputc(tab[v & 63], f);
	}
	if (n - i == 1) {
		unsigned v = (unsigned)p[i] << 16;
		fputc(tab[v >> 18], f), fputc(tab[(v >> 12) & 63], f), fputs("==", f);
	} else if (n - i == 2) {
		unsigned v = (unsigned)p[i] << 16 | (unsigned)p[i + 1] << 8;
		fputc(tab[v >> 18], f), fputc(tab[(v >> 12) & 63], f);
		fputc(tab[(v >> 6) & 63], f), fputc('=', f);
	}
}

static const char *str(json_t *o, const char *name)
{
	return json_string_value(json_object_get(o, name));
}

static bool int_of(json_t *o, const char *name, long long *ret)
{
	json_t *v = json_object_get(o, name);
	if (!json_is_integer(v))
		return false;
	*ret = json_integer_value(v);
	return true;
}

static int write_all_file(const char *path, const char *data, size_t size)
{
	FILE *f = fopen(path, "we");
	if (!f)
		return -errno;
	int r = fwrite(data, 1, size, f) == size ? 0 : -EIO;
	if (fclose(f) != 0 && r == 0)
		r = -errno;
	return r;
}

/* Writes the <img> of one screenshot (embedded or beside the page); false when the step has
 * none or it cannot be fetched (said in the page). */
static bool write_image(struct report *rp, json_t *step, const char *which, char *err, size_t errlen)
{
	long long index = 0;
	char *path, *png = NULL, *sha = NULL, hex[65];
	size_t size = 0;
	int r;

	if (!json_is_object(json_object_get(json_object_get(step, "screenshots"), which))) {
		snprintf(err, errlen, "no %s screenshot was journaled", which);
		return false;
	}
	if (!rp->include_sensitive && json_is_true(json_object_get(step, "sensitive"))) {
		snprintf(err, errlen,
			 "the %s screenshot is left out: this step typed a secret "
			 "(holoctl report --include-sensitive shows it)",
			 which);
		return false;
	}
	int_of(step, "index", &index);
	path = xasprintf(IPC_API_PREFIX "/tasks/%ld/steps/%lld/screenshot?which=%s", rp->id, index, which);
	r = cli_api_raw(rp->ctx, "GET", path, NULL, &png, &size, &sha);
	free(path);
	if (r != 0) {
		snprintf(err, errlen, "the %s screenshot could not be fetched", which);
		return false;
	}
	ipc_sha256_hex(png, size, hex);
	if (sha && strcmp(sha, hex) != 0) {
		snprintf(err, errlen, "the %s screenshot differs from the journal's sha256", which);
		goto fail;
	}
	if (rp->image_bytes + size > REPORT_MAX_IMAGE_BYTES) {
		snprintf(err, errlen, "left out: the report's screenshots passed %llu bytes",
			 REPORT_MAX_IMAGE_BYTES);
		goto fail;
	}
	rp->image_bytes += size;
	if (rp->external) {
		char *file = xasprintf("%s/%lld-%s.png", rp->image_dir, index, which);
		r = write_all_file(file, png, size);
		free(file);
		if (r < 0) {
			snprintf(err, errlen, "cannot write the %s screenshot: %s", which, strerror(-r));
			goto fail;
		}
	}
	fprintf(rp->f, "<img alt=\"step %lld, %s\" src=\"", index, which);
	if (rp->external) {
		html_text(rp->f, rp->image_dir_href);
		fprintf(rp->f, "/%lld-%s.png", index, which);
	} else {
		fputs("data:image/png;base64,", rp->f);
		base64(rp->f, (const unsigned char *)png, size);
	}
	fputs("\">", rp->f);
	free(png);
	free(sha);
	return true;
fail:
	free(png);
	free(sha);
	return false;
}

/* The action drawn over the "before" screenshot, in the image's pixels. */
static void write_markers(FILE *f, json_t *step)
{
	json_t *call = json_object_get(step, "tool_call"), *px = json_object_get(step, "pixels");
	json_t *mon = json_object_get(step, "monitor"), *img = json_object_get(step, "image");
	long long w, h, mx = 0, my = 0, mw, mh, x, y, x2, y2;
	const char *tool = str(call, "tool_name");

	if (!tool || !int_of(img, "width", &w) || !int_of(img, "height", &h) || w <= 0 || h <= 0)
		return;
	if (!int_of(mon, "width", &mw) || !int_of(mon, "height", &mh) || mw <= 0 || mh <= 0)
		mw = w, mh = h;
	int_of(mon, "x", &mx);
	int_of(mon, "y", &my);
	if (!int_of(px, "x", &x) || !int_of(px, "y", &y))
		return;
	/* root-window pixels -> pixels of the captured monitor image */
	double sx = (double)w / (double)mw, sy = (double)h / (double)mh;
	double cx = (double)(x - mx) * sx, cy = (double)(y - my) * sy;
	double r = (w > h ? w : h) / 80.0 + 6;

	fprintf(f,
		"<svg class=\"overlay\" viewBox=\"0 0 %lld %lld\" preserveAspectRatio=\"none\" "
		"aria-hidden=\"true\">",
		w, h);
	if (strcmp(tool, "drag") == 0 && int_of(px, "x2", &x2) && int_of(px, "y2", &y2)) {
		double ex = (double)(x2 - mx) * sx, ey = (double)(y2 - my) * sy;
		fprintf(f,
			"<line class=\"marker drag\" x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" "
			"y2=\"%.0f\" marker-end=\"url(#arrow)\"/>",
			cx, cy, ex, ey);
		fprintf(f, "<circle class=\"marker drag-end\" cx=\"%.0f\" cy=\"%.0f\" r=\"%.0f\"/>", ex, ey,
			r / 2);
	}
	if (strcmp(tool, "scroll") == 0) {
		const char *d = str(call, "direction");
		double dx = 0, dy = 0;
		if (d && strcmp(d, "up") == 0)
			dy = -1;
		else if (d && strcmp(d, "down") == 0)
			dy = 1;
		else if (d && strcmp(d, "left") == 0)
			dx = -1;
		else if (d && strcmp(d, "right") == 0)
			dx = 1;
		fprintf(f,
			"<line class=\"marker scroll\" x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" "
			"y2=\"%.0f\" marker-end=\"url(#arrow)\"/>",
			cx, cy, cx + dx * r * 4, cy + dy * r * 4);
	}
	fprintf(f,
		"<circle class=\"marker %s\" data-x=\"%lld\" data-y=\"%lld\" cx=\"%.0f\" "
		"cy=\"%.0f\" r=\"%.0f\"/>",
		strcmp(tool, "click") == 0	  ? "click" :
		strcmp(tool, "double_click") == 0 ? "double" :
		strcmp(tool, "triple_click") == 0 ? "triple" :
						    "point",
		x, y, cx, cy, r);
	if (strcmp(tool, "double_click") == 0 || strcmp(tool, "triple_click") == 0)
		fprintf(f, "<circle class=\"marker ring\" cx=\"%.0f\" cy=\"%.0f\" r=\"%.0f\"/>", cx, cy,
			r * 1.6);
	fprintf(f,
		"<line class=\"cross\" x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\"/>"
		"<line class=\"cross\" x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\"/></svg>",
		cx - r / 2, cy, cx + r / 2, cy, cx, cy - r / 2, cx, cy + r / 2);
}

/* The typed text, keys or answer of a step, as a caption. */
static void write_caption(FILE *f, json_t *step)
{
	json_t *call = json_object_get(step, "tool_call");
	char args[1024];

	cli_format_tool_args(call, args, sizeof(args));
	fputs("<p class=\"action\"><b>", f);
	html_text(f, str(call, "tool_name") ? str(call, "tool_name") : "?");
	fputs("</b> ", f);
	html_text(f, args);
	json_t *px = json_object_get(step, "pixels");
	if (json_is_object(px)) {
		char where[64];
		cli_format_point(px, where, sizeof(where));
		fputs(" <span class=\"at\">at ", f);
		html_text(f, where);
		fputs("</span>", f);
	}
	fputs("</p>", f);
}

static void row(FILE *f, const char *key, const char *value)
{
	if (!value)
		return;
	fputs("<tr><th>", f);
	html_text(f, key);
	fputs("</th><td>", f);
	html_text(f, value);
	fputs("</td></tr>", f);
}

static void write_timings(FILE *f, json_t *timings)
{
	static const char *const phases[][2] =
		{{"capture", "capture"}, {"preprocess", "preprocess"}, {"encode", "vision"},
		 {"prefill", "prefill"}, {"decode", "decode"},	       {"map", "map"},
		 {"inject", "inject"},	 {"settle", "settle"},	       {"capture_after", "capture after"}};
	long long v;
	char buf[32];

	fputs("<p class=\"timings\">", f);
	for (size_t i = 0; i < ARRAY_SIZE(phases); i++) {
		if (!int_of(timings, phases[i][0], &v))
			continue;
		cli_format_duration_us(v, buf, sizeof(buf));
		fprintf(f, "<span>%s <b>%s</b></span> ", phases[i][1], buf);
	}
	fputs("</p>", f);
}

static void write_text_block(FILE *f, const char *label, const char *text, bool pre)
{
	if (!text)
		return;
	fprintf(f, "<div class=\"said\"><h4>%s</h4><%s>", label, pre ? "pre" : "p");
	html_text(f, text);
	fprintf(f, "</%s></div>", pre ? "pre" : "p");
}

/* Who approved, denied or answered a step that waited for its user, and when (UTC). */
static void held_row(FILE *f, json_t *held)
{
	if (!json_is_object(held))
		return;
	const char *decision = str(held, "decision"), *reason = str(held, "reason");
	const char *denial = str(held, "denial");
	json_t *uid = json_object_get(held, "uid"), *pid = json_object_get(held, "pid");
	json_int_t at = json_integer_value(json_object_get(held, "answered_us"));
	char when[64] = "", line[1024];
	if (at > 0) {
		time_t sec = (time_t)(at / 1000000);
		struct tm tm;
		strftime(when, sizeof(when), " at %Y-%m-%d %H:%M:%S UTC", gmtime_r(&sec, &tm));
	}
	if (json_is_integer(uid))
		snprintf(line, sizeof(line),
			 "%s by uid %" JSON_INTEGER_FORMAT " (pid %" JSON_INTEGER_FORMAT ")%s%s%s%s%s",
			 decision ? decision : "?", json_integer_value(uid), json_integer_value(pid), when,
			 denial ? ": " : "", denial ? denial : "", reason ? "; held because " : "",
			 reason ? reason : "");
	else
		snprintf(line, sizeof(line), "%s (nobody answered)%s%s", decision ? decision : "?",
			 reason ? "; held because " : "", reason ? reason : "");
	row(f, str(held, "waited_for") && strcmp(str(held, "waited_for"), "reply") == 0 ? "reply" : "approval",
	    line);
}

static void write_step(struct report *rp, json_t *step, size_t n)
{
	FILE *f = rp->f;
	json_t *agent = json_object_get(step, "agent");
	long long index = 0;
	char err[256];

	int_of(step, "index", &index);
	fprintf(f, "<section class=\"step\" id=\"step-%lld\" data-index=\"%lld\">", index, index);
	fprintf(f, "<h2>Step %lld <small>of %zu</small> <span class=\"status\">", index, n);
	html_text(f, str(step, "status"));
	fputs("</span></h2>", f);
	write_caption(f, step);
	fputs("<div class=\"shots\"><figure><div class=\"frame\">", f);
	if (write_image(rp, step, "before", err, sizeof(err)))
		write_markers(f, step);
	else
		fprintf(f, "<p class=\"missing\">%s</p>", err);
	fputs("</div><figcaption>before</figcaption></figure><figure><div class=\"frame\">", f);
	if (!write_image(rp, step, "after", err, sizeof(err)))
		fprintf(f, "<p class=\"missing\">%s</p>", err);
	fputs("</div><figcaption>after</figcaption></figure></div>", f);
	fputs("<table class=\"kv\">", f);
	row(f, "result", str(step, "result"));
	row(f, "error", str(step, "error"));
	row(f, "stuck", str(step, "stuck"));
	held_row(f, json_object_get(step, "held"));
	char tokens[128];
	if (json_is_object(agent) && cli_format_step_tokens(agent, tokens, sizeof(tokens)))
		row(f, "tokens", tokens);
	fputs("</table>", f);
	if (json_is_object(agent)) {
		write_text_block(f, "thought", str(agent, "thought"), false);
		write_text_block(f, "note", str(agent, "note"), false);
		write_text_block(f, "raw output", str(agent, "raw_output"), true);
	}
	write_timings(f, json_object_get(step, "timings_us"));
	fputs("</section>\n", f);
}

static const char style[] =
	"body{font:15px/1.45 system-ui,sans-serif;margin:0;background:#f4f4f2;color:#1c1c1c}"
	"header,section{max-width:1800px;margin:0 auto;padding:12px 20px}"
	"header{background:#fff;border-bottom:1px solid #ccc}"
	"h1{font-size:20px;margin:4px 0}h2{font-size:17px;margin:6px 0}"
	"h4{margin:6px 0 2px;font-size:13px;color:#555;text-transform:uppercase}"
	"section.step{border-bottom:1px solid #ccc;scroll-margin-top:36px}"
	"section.step.current{background:#fffbe6}"
	".shots{display:grid;grid-template-columns:1fr 1fr;gap:12px}"
	"@media (max-width:1100px){.shots{grid-template-columns:1fr}}"
	"figure{margin:0}.frame{position:relative;line-height:0}"
	".frame img{width:100%;height:auto;border:1px solid #999}"
	"svg.overlay{position:absolute;left:0;top:0;width:100%;height:100%;pointer-events:none}"
	".marker{fill:none;stroke:#e6007e;stroke-width:4}.marker.ring{stroke-width:3}"
	".marker.drag,.marker.scroll{stroke-width:5}.cross{stroke:#e6007e;stroke-width:2}"
	"figcaption{font-size:12px;color:#555;line-height:1.6}"
	".action{font-size:16px}.at,.status{color:#555;font-weight:normal}"
	"pre{white-space:pre-wrap;word-break:break-word;background:#fff;padding:6px;"
	"border:1px solid #ddd;max-height:20em;overflow:auto}"
	"table.kv th{text-align:left;padding-right:12px;color:#555;font-weight:normal;"
	"vertical-align:top}"
	".timings span{margin-right:10px;color:#555}.missing{color:#a00;line-height:1.4}"
	"nav{position:sticky;top:0;background:#333;color:#fff;padding:6px 20px;font-size:13px;"
	"z-index:1}";

/* Moves between steps: n/j/right arrow next, p/k/left arrow previous, Home/End. */
static const char script[] =
	"(function(){var s=document.querySelectorAll('section.step'),i=-1;"
	"var pos=document.getElementById('pos');"
	"document.body.setAttribute('data-steps',String(s.length));"
	"function go(n){if(!s.length)return;i=Math.max(0,Math.min(s.length-1,n));"
	"for(var k=0;k<s.length;k++)s[k].classList.toggle('current',k===i);"
	"s[i].scrollIntoView({block:'start'});pos.textContent='step '+(i+1)+' / '+s.length;}"
	"document.addEventListener('keydown',function(e){if(e.altKey||e.ctrlKey||e.metaKey)"
	"return;var k=e.key;if(k==='ArrowRight'||k==='n'||k==='j'){go(i+1);}"
	"else if(k==='ArrowLeft'||k==='p'||k==='k'){go(i-1);}else if(k==='Home'){go(0);}"
	"else if(k==='End'){go(s.length-1);}else{return;}e.preventDefault();});"
	"window.addEventListener('load',function(){var n=0,im=document.images;"
	"for(var k=0;k<im.length;k++)if(im[k].complete&&im[k].naturalWidth>0)n++;"
	"document.body.setAttribute('data-images-loaded',String(n));});})();";

static void write_page(struct report *rp, json_t *task, json_t *steps, const char *nonce)
{
	FILE *f = rp->f;
	json_t *spec = json_object_get(task, "spec"), *step;
	const char *instruction = str(spec, "instruction");
	char *prov = json_dumps(json_object_get(task, "provenance"), JSON_INDENT(1) | JSON_SORT_KEYS);
	size_t i, n = json_array_size(steps);

	fprintf(f,
		"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
		"<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
		"<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
		"img-src data: 'self'; style-src 'unsafe-inline'; script-src 'nonce-%s'\">"
		"<title>holod task %ld</title><style>%s</style></head><body>\n",
		nonce, rp->id, style);
	fprintf(f,
		"<nav><span id=\"pos\">%zu steps</span> &middot; keys: n/&rarr; next, "
		"p/&larr; previous, Home, End</nav>",
		n);
	fprintf(f, "<header><h1>Task %ld: ", rp->id);
	if (instruction)
		html_text(f, instruction);
	else
		fprintf(f, "script of %zu actions", json_array_size(json_object_get(spec, "script")));
	fputs("</h1><table class=\"kv\">", f);
	static const char *const fields[] = {"status",	   "kind",	  "display", "created_at",
					     "started_at", "finished_at", "result",  "error"};
	for (size_t k = 0; k < ARRAY_SIZE(fields); k++)
		row(f, fields[k], str(task, fields[k]));
	char buf[32];
	snprintf(buf, sizeof(buf), "%zu", n);
	row(f, "steps", buf);
	fputs("</table>", f);
	/* why the task ended stuck: which steps, the screen's hash, the repeated action */
	json_t *stuck = json_object_get(task, "stuck");
	if (json_is_object(stuck)) {
		char *ev = json_dumps(stuck, JSON_INDENT(1) | JSON_SORT_KEYS);
		write_text_block(f, "stuck", ev, true);
		free(ev);
	}
	if (prov && strcmp(prov, "null") != 0)
		write_text_block(f, "provenance", prov, true);
	free(prov);
	fputs("</header>\n", f);
	fputs("<svg width=\"0\" height=\"0\" style=\"position:absolute\"><defs><marker id=\"arrow\" "
	      "viewBox=\"0 0 10 10\" refX=\"8\" refY=\"5\" markerWidth=\"4\" markerHeight=\"4\" "
	      "orient=\"auto\"><path d=\"M0,0 L10,5 L0,10 z\" fill=\"#e6007e\"/></marker></defs>"
	      "</svg>\n",
	      f);
	json_array_foreach(steps, i, step) write_step(rp, step, n);
	if (n == 0)
		fputs("<section><p>This task has no steps.</p></section>", f);
	fprintf(f, "<script nonce=\"%s\">%s</script></body></html>\n", nonce, script);
}

/* "x.html" -> "x-images" (and its name relative to the page). */
static void image_dir_for(const char *output, char **ret_dir, char **ret_href)
{
	size_t n = strlen(output);
	if (n > 5 && strcmp(output + n - 5, ".html") == 0)
		n -= 5;
	*ret_dir = xasprintf("%.*s-images", (int)n, output);
	const char *slash = strrchr(*ret_dir, '/');
	*ret_href = xstrdup(slash ? slash + 1 : *ret_dir);
}

static int report_run(struct cli_context *ctx, int argc, char **argv)
{
	struct report rp = {.ctx = ctx};
	json_t *task = NULL, *steps = NULL;
	const char *output = NULL;
	char *path, *html = NULL, nonce[33];
	size_t len = 0;
	unsigned char rnd[16];
	int c, r;

	cli_getopt_reset();
	while ((c = getopt_long(argc, argv, CLI_COMMON_SHORT_OPTIONS "o:", report_options, NULL)) != -1) {
		if (c == 'o') {
			output = optarg;
			continue;
		}
		if (c == OPT_EXTERNAL_IMAGES) {
			rp.external = true;
			continue;
		}
		if (c == OPT_INCLUDE_SENSITIVE) {
			rp.include_sensitive = true;
			continue;
		}
		r = cli_common_option(ctx, &cli_cmd_report, c, argv);
		if (r >= 0)
			return r;
	}
	if (argc - optind != 1)
		return cli_usage_error(ctx, &cli_cmd_report, "needs exactly one task ID");
	r = cli_parse_task_id(ctx, &cli_cmd_report, argv[optind], &rp.id);
	if (r != 0)
		return r;
	if (ctx->json)
		return cli_usage_error(ctx, &cli_cmd_report, "--json does not apply: the report is HTML");
	char *default_output = xasprintf("task-%ld.html", rp.id);
	if (!output)
		output = default_output;
	if (rp.external && strcmp(output, "-") == 0) {
		r = cli_usage_error(ctx, &cli_cmd_report,
				    "--external-images needs a file: the images go beside it");
		goto cleanup;
	}

	path = xasprintf(IPC_API_PREFIX "/tasks/%ld", rp.id);
	r = cli_api_json(ctx, "GET", path, NULL, &task);
	free(path);
	if (r != 0)
		goto cleanup;
	path = xasprintf(IPC_API_PREFIX "/tasks/%ld/steps", rp.id);
	r = cli_api_json(ctx, "GET", path, NULL, &steps);
	free(path);
	if (r != 0)
		goto cleanup;
	json_t *arr = json_is_array(steps) ? steps : json_object_get(steps, "steps");
	if (!json_is_array(arr)) {
		r = cli_error(ctx, "holod's answer for the steps of task %ld has no \"steps\" array", rp.id);
		goto cleanup;
	}
	if (rp.external) {
		image_dir_for(output, &rp.image_dir, &rp.image_dir_href);
		if (mkdir(rp.image_dir, 0755) < 0 && errno != EEXIST) {
			r = cli_error(ctx, "cannot create %s: %s", rp.image_dir, strerror(errno));
			goto cleanup;
		}
	}
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
		r = cli_error(ctx, "cannot draw the page's script nonce: %s", strerror(errno));
		goto cleanup;
	}
	for (size_t i = 0; i < sizeof(rnd); i++)
		snprintf(nonce + 2 * i, 3, "%02x", rnd[i]);

	rp.f = open_memstream(&html, &len);
	if (!rp.f) {
		r = cli_error(ctx, "out of memory");
		goto cleanup;
	}
	write_page(&rp, task, arr, nonce);
	if (fclose(rp.f) != 0) {
		r = cli_error(ctx, "out of memory writing the report");
		goto cleanup;
	}
	if (strcmp(output, "-") == 0) {
		if (fwrite(html, 1, len, ctx->out) != len || fflush(ctx->out) != 0)
			r = cli_error(ctx, "cannot write the report to stdout");
		goto cleanup;
	}
	if ((r = cli_write_file_atomic(output, html, len)) < 0) {
		r = cli_error(ctx, "cannot write %s: %s", output, strerror(-r));
		goto cleanup;
	}
	fprintf(ctx->out, "%s: task %ld, %zu steps%s%s\n", output, rp.id, json_array_size(arr),
		rp.external ? ", images in " : "", rp.external ? rp.image_dir : "");
	r = CLI_EXIT_OK;

cleanup:
	free(html);
	free(default_output);
	free(rp.image_dir);
	free(rp.image_dir_href);
	json_decref(task);
	json_decref(steps);
	return r;
}

const struct cli_command cli_cmd_report = {
	.name = "report",
	.args = "[-o FILE.html] [--external-images] [--include-sensitive] ID",
	.summary = "write a task's review page (self-contained HTML)",
	.help = "Writes one HTML page that opens in any browser without a server: the task\n"
		"(instruction or script, provenance, outcome, steps used), then per step the\n"
		"before screenshot with the action drawn on it (click and double-click markers,\n"
		"the drag path, the scroll direction; typed text and keys as a caption), the\n"
		"after screenshot, the model's thought, note and raw output, and the timings.\n"
		"Keys in the page: n or right arrow next step, p or left arrow previous.\n"
		"  -o FILE             where to write it (default task-ID.html; - for stdout)\n"
		"  --external-images   screenshots as PNG files in FILE-images/ beside the page\n"
		"                      instead of embedded in it\n"
		"  --include-sensitive also the screenshots of steps that typed a secret (left\n"
		"                      out by default)\n",
	.run = report_run,
};
