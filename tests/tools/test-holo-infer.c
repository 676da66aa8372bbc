/* holo-infer end to end: greedy generation on a fixture checkpoint reproduces the transformers
 * golden ids, and --dump-logits writes the golden logits as a float32 .npy. argv[1] is the
 * holo-infer binary. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cpu_dnnl.h"
#include "cpu_isa.h"
#include "engine.h"
#include "test.h"

TEST_DEFINE_GLOBALS;

static const char *root(void)
{
	const char *r = getenv("HOLOD_SOURCE_ROOT");
	return r ? r : ".";
}

/* Runs cmd; returns its exit status and its stdout (malloc'ed) in *out. */
static int run(const char *cmd, char **out)
{
	FILE *p = popen(cmd, "r");
	REQUIRE(p);
	size_t cap = 1 << 16, n = 0;
	char *buf = malloc(cap);
	REQUIRE(buf);
	size_t r;
	while ((r = fread(buf + n, 1, cap - 1 - n, p)) > 0) {
		n += r;
		if (n == cap - 1) {
			buf = realloc(buf, cap *= 2);
			REQUIRE(buf);
		}
	}
	buf[n] = 0;
	int st = pclose(p);
	*out = buf;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int main(int argc, char **argv)
{
	REQUIRE(argc == 2);
	const char *exe = argv[1];
	char path[4096], cmd[16384];

	/* the golden of tiny-mamba (format: tools/make_lm_golden.py) */
	snprintf(path, sizeof(path), "%s/tests/fixtures/lm/tiny-mamba.bin", root());
	FILE *f = fopen(path, "rb");
	REQUIRE(f);
	uint32_t hdr[5];
	REQUIRE(fread(hdr, 4, 5, f) == 5);
	uint32_t V = hdr[2], np = hdr[3], ng = hdr[4];
	REQUIRE(V == 256 && np < 1000 && ng < 1000);
	int32_t *ids = malloc((np + ng) * sizeof(int32_t));
	size_t rows = np + ng;
	float *want = malloc(rows * V * sizeof(float));
	REQUIRE(ids && want);
	REQUIRE(fread(ids, 4, np + ng, f) == np + ng);
	REQUIRE(fread(want, 4, rows * V, f) == rows * V);
	fclose(f);

	char npy[] = "/tmp/holo-infer-test-XXXXXX";
	int fd = mkstemp(npy);
	REQUIRE(fd >= 0);
	close(fd);
	int len = snprintf(cmd, sizeof(cmd),
			   "'%s' --model '%s/tests/fixtures/models/tiny-mamba' --max-tokens %u "
			   "--ignore-eos --threads 2 --dump-logits '%s' --prompt-ids ",
			   exe, root(), ng, npy);
	for (uint32_t i = 0; i < np; i++)
		len += snprintf(cmd + len, sizeof(cmd) - (size_t)len, "%s%d", i ? "," : "", ids[i]);
	snprintf(cmd + len, sizeof(cmd) - (size_t)len, " 2>/dev/null");
	char *out = NULL;
	CHECK_INT_EQ(run(cmd, &out), 0);
	/* no tokenizer in tiny-mamba: the ids are printed */
	char *p = out;
	for (uint32_t i = 0; i < ng; i++) {
		char *end;
		long v = strtol(p, &end, 10);
		CHECK(end != p);
		CHECK_INT_EQ(v, ids[np + i]);
		p = end;
	}
	free(out);

	/* the .npy: header, then (np + ng - 1) rows: prompt positions and fed-back tokens */
	f = fopen(npy, "rb");
	REQUIRE(f);
	char h[128];
	REQUIRE(fread(h, 1, sizeof(h), f) == sizeof(h));
	CHECK(memcmp(h, "\x93NUMPY\x01\x00", 8) == 0);
	CHECK(h[127] == '\n');
	char shape[64];
	snprintf(shape, sizeof(shape), "'shape': (%u, %u)", np + ng - 1, V);
	CHECK(memmem(h, sizeof(h), shape, strlen(shape)) != NULL);
	float *got = malloc(rows * V * sizeof(float));
	REQUIRE(got);
	size_t n = fread(got, sizeof(float), rows * V, f);
	fclose(f);
	CHECK_INT_EQ(n, (size_t)(np + ng - 1) * V);
	double worst = test_max_abs_diff(got, want, n);
	CHECK(worst < 1e-4);
	unlink(npy);
	free(got);

	/* --tokenize prints the tokenizer's ids as JSON */
	snprintf(cmd, sizeof(cmd),
		 "'%s' --model '%s/tests/fixtures/models/tiny-chat' --prompt 'Hello world' --tokenize", exe,
		 root());
	CHECK_INT_EQ(run(cmd, &out), 0);
	CHECK(out[0] == '[' && strstr(out, "]\n") != NULL);
	snprintf(path, sizeof(path), "%s/tests/fixtures/models/tiny-chat/tokenizer.json", root());
	struct engine_tokenizer *tok = engine_tokenizer_load(path, NULL, 0);
	REQUIRE(tok);
	int32_t *tids = NULL;
	size_t tn = 0;
	CHECK_INT_EQ(engine_tokenizer_encode(tok, "Hello world", 11, true, &tids, &tn), 0);
	char expect[1024];
	int el = snprintf(expect, sizeof(expect), "[");
	for (size_t i = 0; i < tn; i++)
		el += snprintf(expect + el, sizeof(expect) - (size_t)el, "%s%d", i ? ", " : "", tids[i]);
	snprintf(expect + el, sizeof(expect) - (size_t)el, "]\n");
	CHECK_STR_EQ(out, expect);
	free(tids);
	engine_tokenizer_destroy(tok);
	free(out);

	/* usage errors exit 2, a bad model directory exits 1 */
	snprintf(cmd, sizeof(cmd), "'%s' --prompt x 2>/dev/null", exe);
	CHECK_INT_EQ(run(cmd, &out), 2);
	free(out);
	snprintf(cmd, sizeof(cmd), "'%s' --model /nonexistent --prompt-ids 1 2>/dev/null", exe);
	CHECK_INT_EQ(run(cmd, &out), 1);
	free(out);

	/* backend options: checked before the model loads, one sentence each; a bad name is a
	 * usage error */
	const char *mamba = "tests/fixtures/models/tiny-mamba";
	snprintf(cmd, sizeof(cmd), "'%s' --model '%s/%s' --prompt-ids 1 --backend gpu 2>&1", exe, root(),
		 mamba);
	CHECK_INT_EQ(run(cmd, &out), 2);
	CHECK(strstr(out, "invalid value 'gpu' for --backend") != NULL);
	free(out);
	snprintf(cmd, sizeof(cmd), "'%s' --model '%s/%s' --prompt-ids 1 --backend cpu --precision bf16 2>&1",
		 exe, root(), mamba);
	/* bf16 on the CPU runs, and says which matrix-product kernels (--precision wins over the
	 * test environment's HOLOD_PRECISION=fp32) */
	CHECK_INT_EQ(run(cmd, &out), 0);
	/* (on the engine's own kernels where oneDNN has no bf16 products: AVX2 alone) */
	const char *gemm = cpu_dnnl_bf16_supported() ? "gemm=onednn:" : "gemm=own";
	CHECK(strstr(out, gemm) != NULL && strstr(out, "), bf16") != NULL);
	free(out);
	/* $HOLOD_PRECISION as --precision; unset, the fixture's bf16 weights run in bf16 (on the
	 * engine's own kernels where oneDNN has no bf16 products; fp32 on the portable ones) */
	snprintf(cmd, sizeof(cmd),
		 "HOLOD_PRECISION=fp32 '%s' --model '%s/%s' --prompt-ids 1 --backend cpu 2>&1", exe, root(),
		 mamba);
	CHECK_INT_EQ(run(cmd, &out), 0);
	CHECK(strstr(out, "), fp32") != NULL && strstr(out, "gemm=onednn:") == NULL);
	free(out);
	snprintf(cmd, sizeof(cmd),
		 "env -u HOLOD_PRECISION '%s' --model '%s/%s' --prompt-ids 1 --backend cpu 2>&1", exe, root(),
		 mamba);
	CHECK_INT_EQ(run(cmd, &out), 0);
	if (cpu_dnnl_bf16_supported())
		CHECK(strstr(out, "gemm=onednn:") != NULL && strstr(out, "), bf16") != NULL);
	else if (cpu_isa() >= CPU_ISA_AVX2)
		CHECK(strstr(out, "gemm=own") != NULL && strstr(out, "), bf16") != NULL);
	else
		CHECK(strstr(out, "gemm=") == NULL && strstr(out, "), fp32") != NULL);
	free(out);
	snprintf(cmd, sizeof(cmd),
		 "HOLOD_PRECISION=fp8 '%s' --model '%s/%s' --prompt-ids 1 --backend cpu 2>&1", exe, root(),
		 mamba);
	CHECK_INT_EQ(run(cmd, &out), 2);
	CHECK(strstr(out, "HOLOD_PRECISION=fp8: expected bf16 or fp32") != NULL);
	free(out);
	/* --weights (and $HOLOD_WEIGHTS): q8 quantizes the layers at load and says so with the
	 * bytes held; a bad name is a usage error; CUDA refuses quantized weights in one sentence */
	snprintf(cmd, sizeof(cmd),
		 "'%s' --model '%s/%s' --prompt-ids 1,2 --max-tokens 2 --backend cpu --weights q8 "
		 "2>&1 >/dev/null",
		 exe, root(), mamba);
	CHECK_INT_EQ(run(cmd, &out), 0);
	CHECK(strstr(out, "), fp32, weights q8 (") != NULL);
	free(out);
	snprintf(cmd, sizeof(cmd),
		 "HOLOD_WEIGHTS=q4 '%s' --model '%s/%s' --prompt-ids 1 --backend cpu 2>&1 >/dev/null", exe,
		 root(), mamba);
	CHECK_INT_EQ(run(cmd, &out), 0);
	CHECK(strstr(out, ", weights q4 (") != NULL);
	free(out);
	snprintf(cmd, sizeof(cmd), "'%s' --model '%s/%s' --prompt-ids 1 --weights q3 2>&1", exe, root(),
		 mamba);
	CHECK_INT_EQ(run(cmd, &out), 2);
	CHECK(strstr(out, "invalid value 'q3' for --weights") != NULL);
	free(out);
	snprintf(cmd, sizeof(cmd), "HOLOD_WEIGHTS=int8 '%s' --model '%s/%s' --prompt-ids 1 2>&1", exe, root(),
		 mamba);
	CHECK_INT_EQ(run(cmd, &out), 2);
	CHECK(strstr(out, "HOLOD_WEIGHTS=int8: expected default, bf16, q8, q4 or fp8") != NULL);
	free(out);
	/* fp8 on an sm_80 device (the emulation's HOLOD_GPU_EMU_ARCH) is refused naming the
	 * architecture, or for want of a device; q4 (and fp8 on sm_90) runs on a device (the
	 * emulation counts) and is refused only for want of one */
	snprintf(cmd, sizeof(cmd),
		 "HOLOD_GPU_EMU_ARCH=sm_80 '%s' --model '%s/%s' --prompt-ids 1 --backend cuda "
		 "--weights fp8 2>&1",
		 exe, root(), mamba);
	CHECK_INT_EQ(run(cmd, &out), 1);
	CHECK(strstr(out, "is sm_80: use --weights q8 or q4") != NULL ||
	      strstr(out, "no CUDA device") != NULL || strstr(out, "no CUDA backend") != NULL ||
	      strstr(out, "driver is too old") != NULL);
	CHECK(strstr(out, "prefill:") == NULL);
	free(out);
	snprintf(cmd, sizeof(cmd),
		 "'%s' --model '%s/%s' --prompt-ids 1,2 --max-tokens 2 --backend cuda --weights q4 2>&1", exe,
		 root(), mamba);
	int rc_q4 = run(cmd, &out);
	if (rc_q4 == 1) {
		CHECK(strstr(out, "no CUDA device") != NULL || strstr(out, "no CUDA backend") != NULL ||
		      strstr(out, "driver is too old") != NULL);
	} else {
		CHECK_INT_EQ(rc_q4, 0);
		CHECK(strstr(out, "backend: cuda (") != NULL && strstr(out, ", weights q4 (") != NULL);
	}
	CHECK(strstr(out, "issue 29") == NULL);
	free(out);
	/* no device here (ENODEV): refused, never run on the CPU instead; with one (the emulation
	 * counts) the run is on it, in CUDA's default bf16, and --profile lists what ran there */
	snprintf(cmd, sizeof(cmd),
		 "env -u HOLOD_PRECISION '%s' --model '%s/%s' --prompt-ids 1,2,3 --max-tokens 3 "
		 "--ignore-eos --backend cuda --profile 2>&1 >/dev/null",
		 exe, root(), mamba);
	int rc = run(cmd, &out);
	if (rc == 1) {
		CHECK(strstr(out, "no CUDA device") != NULL || strstr(out, "no CUDA backend") != NULL ||
		      strstr(out, "driver is too old") != NULL);
		CHECK(strstr(out, "prefill:") == NULL);
	} else {
		CHECK_INT_EQ(rc, 0);
		CHECK(strstr(out, "backend: cuda (") != NULL && strstr(out, "), bf16") != NULL);
		CHECK(strstr(out, "kernel embed launches=") != NULL);
		CHECK(strstr(out, "kernel mamba_ssd launches=") != NULL);
		CHECK(strstr(out, "kernel mamba_ssm_step launches=") != NULL);
		CHECK(strstr(out, "gemm mamba.in_proj calls=") != NULL);
		CHECK(strstr(out, "gemm lm_head calls=") != NULL);
	}
	free(out);
	/* an image run on the device: --profile lists the vision encoder's kernels and GEMM sites
	 * with the language model's, and shows that the image rows (3 tiles x 4 tokens x 64
	 * floats) were copied only on the device, the host getting nothing but two logits rows */
	snprintf(cmd, sizeof(cmd),
		 "'%s' --model '%s/tests/fixtures/models/tiny-agent' --image "
		 "'%s/tests/fixtures/vision/small.png' --prompt 'Click.' --max-tokens 2 --ignore-eos "
		 "--backend cuda --precision fp32 --profile 2>&1 >/dev/null",
		 exe, root(), root());
	rc = run(cmd, &out);
	if (rc == 1) {
		CHECK(strstr(out, "no CUDA device") != NULL || strstr(out, "no CUDA backend") != NULL ||
		      strstr(out, "driver is too old") != NULL);
	} else {
		static const char *const sites[] = {"kernel vision_patchify launches=1 ",
						    "gemm vision.embedder calls=1 ",
						    "kernel vision_attention launches=2 ",
						    "gemm vision.qkv calls=2 ",
						    "gemm vision.fc2 calls=2 ",
						    "kernel vision_shuffle_norm launches=1 ",
						    "gemm mlp1.fc3 calls=1 ",
						    "kernel embed launches=",
						    "gemm lm_head calls=",
						    "copy on_device calls=1 bytes=3072\n",
						    "copy to_host calls=2 bytes=10240\n"};
		CHECK_INT_EQ(rc, 0);
		CHECK(strstr(out, "2x1 tiles + thumbnail, 12 image tokens") != NULL);
		CHECK(strstr(out, "preprocess: 1 images on the device") != NULL);
		for (size_t i = 0; i < sizeof(sites) / sizeof(sites[0]); i++) {
			if (!strstr(out, sites[i]))
				fprintf(stderr, "--profile of an image run: no '%s' in:\n%s", sites[i], out);
			CHECK(strstr(out, sites[i]) != NULL);
		}
	}
	free(out);
	snprintf(cmd, sizeof(cmd), "'%s' --model '%s/%s' --prompt-ids 1 --backend cuda --device 7 2>&1", exe,
		 root(), mamba);
	CHECK_INT_EQ(run(cmd, &out), 1);
	CHECK(strstr(out, "CUDA device 7 does not exist") != NULL || strstr(out, "no CUDA device") != NULL ||
	      strstr(out, "no CUDA backend") != NULL || strstr(out, "driver is too old") != NULL);
	free(out);
	snprintf(cmd, sizeof(cmd),
		 "'%s' --model '%s/%s' --prompt-ids 1,2 --max-tokens 1 --backend cpu "
		 "--precision fp32 2>&1 >/dev/null",
		 exe, root(), mamba);
	CHECK_INT_EQ(run(cmd, &out), 0);
	CHECK(strstr(out, "backend: cpu (") != NULL && strstr(out, "), fp32") != NULL);
	free(out);
	/* --profile times a device's kernels: on the CPU it is refused before anything runs */
	snprintf(cmd, sizeof(cmd),
		 "'%s' --model '%s/%s' --prompt-ids 1,2 --max-tokens 1 --backend cpu --profile 2>&1", exe,
		 root(), mamba);
	CHECK_INT_EQ(run(cmd, &out), 2);
	CHECK(strstr(out, "--profile times the kernels of a device, and this run uses the cpu") != NULL);
	CHECK(strstr(out, "prefill:") == NULL);
	free(out);

	/* values out of their range: a usage error naming the value and the limit */
	static const struct {
		const char *args, *message;
	} bad[] = {
		{"--prompt-ids 1,99999999", "--prompt-ids: token id 99999999 is outside the vocabulary"},
		{"--prompt-ids 1 --temp nan", "--temp: 'nan' is not a temperature"},
		{"--prompt-ids 1 --temp -1", "--temp: '-1' is not a temperature"},
		{"--prompt-ids 1 --top-p 2", "--top-p: '2' is outside (0, 1]"},
		{"--prompt-ids 1 --top-p 0", "--top-p: '0' is outside (0, 1]"},
		{"--prompt-ids 1 --top-k -3", "--top-k: '-3' is not a token count"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(cmd, sizeof(cmd),
			 "'%s' --model '%s/tests/fixtures/models/tiny-mamba' --max-tokens 2 %s 2>&1", exe,
			 root(), bad[i].args);
		int st = run(cmd, &out);
		if (st != 2 || !strstr(out, bad[i].message)) {
			fprintf(stderr, "holo-infer %s: exit %d, output \"%s\", wanted \"%s\"\n", bad[i].args,
				st, out, bad[i].message);
			test_failures++;
		}
		free(out);
	}

	free(ids);
	free(want);
	return test_exit();
}
