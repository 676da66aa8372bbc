/* holo-quantize: write a checkpoint's language model quantized to q8 or q4, once, as a
 * directory that holod, holo-infer and holo-bench load with no quantizing.
 *
 *   holo-quantize --model DIR --weights q8|q4 --out DIR2 [--force] [--threads N]
 *
 * DIR is a plain Hugging Face checkpoint (bf16, f16 or f32 weights). Its linear layers are
 * quantized by the CPU backend's own code (the same records --weights q8|q4 makes at load), on
 * every CPU, the source read through its memory map once; progress goes to stderr. DIR2 gets
 * config.json with a "holod_quantization" entry, each matrix as a U8 tensor of its row records,
 * every other tensor as stored and every other file copied (docs/quantization.md, "A quantized
 * checkpoint on disk"). DIR2 is written beside itself and renamed into place: it appears whole
 * or not at all. An existing non-empty DIR2 is refused unless --force replaces it.
 *
 * Exit status: 0 written; 1 an error (one sentence on stderr, nothing left behind); 2 usage.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "engine.h"
#include "lm.h"
#include "quantized.h"

struct progress {
	uint64_t t0;
	int tenths;
	const char *format;
};

static void on_progress(void *arg, uint64_t done, uint64_t total)
{
	struct progress *p = arg;
	int tenths = total ? (int)(done * 10 / total) : 10;

	if (tenths <= p->tenths)
		return;
	p->tenths = tenths;
	fprintf(stderr, "holo-quantize: quantizing the linear layers to %s: %d%% (%.1f of %.1f MiB, %.1f s)\n",
		p->format, tenths * 10, (double)done / (1 << 20), (double)total / (1 << 20),
		(double)(time_mono_ns() - p->t0) * 1e-9);
}

static void on_note(void *arg, const char *line)
{
	(void)arg;
	fprintf(stderr, "holo-quantize: %s\n", line);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: holo-quantize --model DIR --weights q8|q4 --out DIR2 [--force] [--threads N]\n"
		   "\n"
		   "Writes DIR's checkpoint to DIR2 with the language model's linear layers quantized\n"
		   "(q8: int8 with an fp16 scale per block of 32, 8.5 bits a weight; q4: 4-bit codes with\n"
		   "a 6-bit scale and a minimum in quarter steps per block of 32, 4.5 bits), every other\n"
		   "tensor and file as in DIR. holod, holo-infer and\n"
		   "holo-bench then load DIR2 with no quantizing (--weights default), on the CPU or CUDA\n"
		   "backend.\n"
		   "\n"
		   "  --model DIR     a bf16, f16 or f32 Hugging Face checkpoint directory\n"
		   "  --weights FMT   q8 or q4\n"
		   "  --out DIR2      the directory to write (refused if it exists and is not empty)\n"
		   "  --force         replace a non-empty DIR2\n"
		   "  --threads N     CPU threads to quantize with (default: every CPU, or $HOLOD_THREADS)\n"
		   "  -h, --help      this text\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"model", required_argument, NULL, 'm'},
		{"weights", required_argument, NULL, 'w'},
		{"out", required_argument, NULL, 'o'},
		{"force", no_argument, NULL, 'f'},
		{"threads", required_argument, NULL, 't'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *model_dir = NULL, *out = NULL, *weights = NULL;
	struct quantized_write_opts wo = {.note = on_note};
	enum quant_format fmt;
	char err[1024];
	int c, threads = 0;

	log_set_program_name("holo-quantize");
	log_setup_from_env();
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		char *end;

		switch (c) {
		case 'm':
			model_dir = optarg;
			break;
		case 'w':
			weights = optarg;
			break;
		case 'o':
			out = optarg;
			break;
		case 'f':
			wo.force = true;
			break;
		case 't':
			threads = (int)strtol(optarg, &end, 10);
			if (*end || threads < 1) {
				fprintf(stderr, "holo-quantize: --threads %s: expected a positive number\n",
					optarg);
				return 2;
			}
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc || !model_dir || !out || !weights) {
		fprintf(stderr, "holo-quantize: %s\n",
			optind < argc ? "unexpected argument" : "--model, --weights and --out are needed");
		usage(stderr);
		return 2;
	}
	if (quant_format_parse(weights, &fmt) < 0 || (fmt != QUANT_Q8 && fmt != QUANT_Q4)) {
		fprintf(stderr, "holo-quantize: --weights %s: expected q8 or q4\n", weights);
		return 2;
	}
	if (threads && engine_set_threads(threads) < 0) {
		fprintf(stderr, "holo-quantize: --threads %d: out of range\n", threads);
		return 2;
	}
	uint64_t t0 = time_mono_ns();
	struct engine_model *m = engine_model_load(model_dir, err, sizeof(err));
	if (!m) {
		fprintf(stderr, "holo-quantize: %s: %s\n", model_dir, err);
		return 1;
	}
	struct progress p = {.t0 = time_mono_ns(), .tenths = -1, .format = quant_format_desc(fmt)->name};
	struct lm_quantized lq = {0};
	wo.layers = lm_quantized_layers();
	wo.layers_arg = &lq;
	wo.format = fmt;
	wo.progress = on_progress;
	wo.progress_arg = &p;
	err[0] = '\0';
	int r = quantized_checkpoint_write(m, out, &wo, err, sizeof(err));
	engine_model_destroy(m);
	if (r < 0) {
		fprintf(stderr, "holo-quantize: %s\n", err[0] ? err : strerror(-r));
		return 1;
	}
	fprintf(stderr, "holo-quantize: wrote %s (%s) in %.1f s\n", out, quant_format_desc(fmt)->name,
		(double)(time_mono_ns() - t0) * 1e-9);
	return 0;
}
