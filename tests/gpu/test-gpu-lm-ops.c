/* The CUDA backend's GEMM wrapper (cuda/gemm.c) and row kernels (cuda/lm_ops.cu) against the CPU
 * backend's own operations: cpu_matmul, cpu_tensor_to_f32 (embedding rows), cpu_rmsnorm_rows
 * after the residual add, cpu_relu2. Runs on a device (suite `gpu`, 77 without one) and in the
 * CUDA emulation (suite `gpu-emu`, three thread orders).
 *
 * Tolerances (sums are reduced in another order on the device, and nvcc contracts into FMA):
 * - GEMM: |got - want| <= 1e-5 * sum_k |w x| (+ 2^-8 |want| when y is bf16). In bf16 precision
 *   the CPU gets the same bf16-rounded x the device gets, so the products are exact on both and
 *   only the summation order differs.
 * - RMSNorm: 2e-6 relative + 1e-6 absolute in fp32, plus 2^-8 relative for a bf16 output.
 * - the GEMM cache: more shapes than GPU_BLAS_MAX_SHAPES, then earlier ones again, still right.
 * - embedding, ReLU² and the KV append: exact (fp32), or equal to the host's own bf16 rounding. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "cpu.h"
#include "gpu.h"
#include "model.h"
#include "test.h"

TEST_DEFINE_GLOBALS;

static struct gpu_context *g;
static uint64_t rng = 0x9e3779b97f4a7c15ull;

static float frand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (float)(rng >> 40) / (float)(1 << 24) * 2.0f - 1.0f;
}

static void *dev_from(const void *host, size_t bytes)
{
	void *p = NULL;
	REQUIRE(gpu_alloc(g, bytes, &p) == 0);
	if (host)
		REQUIRE(gpu_copy_to_device(g, p, host, bytes) == 0);
	return p;
}

static void to_host(void *dst, const void *dev, size_t bytes)
{
	REQUIRE(gpu_copy_to_host(g, dst, dev, bytes) == 0);
}

static float round_bf16(float v)
{
	return bf16_to_f32(f32_to_bf16(v));
}

/* ---- GEMM ------------------------------------------------------------------------------------ */

struct gemm_case {
	int out, in, rows;
	size_t ldx, ldy;
	bool accumulate;
	enum tensor_dtype w_dtype;
	enum gpu_dtype y_dtype;
	size_t w_off, x_off, y_off; /* views this many elements into their allocations */
};

/* A device allocation of `off + n` elements of `size` bytes holding host's n at element `off`;
 * returns the view, *ret_base the allocation. */
static void *dev_view(const void *host, size_t n, size_t size, size_t off, void **ret_base)
{
	*ret_base = dev_from(NULL, (off + n) * size);
	void *view = (char *)*ret_base + off * size;
	if (host)
		REQUIRE(gpu_copy_to_device(g, view, host, n * size) == 0);
	return view;
}

static void check_gemm(struct gpu_blas *gm, const struct gemm_case *c)
{
	bool bf = c->w_dtype == TENSOR_BF16;
	size_t nw = (size_t)c->out * c->in, nx = (size_t)c->rows * c->ldx, ny = (size_t)c->rows * c->ldy;
	float *w32 = xmalloc(nw * sizeof(float)), *x = xmalloc(nx * sizeof(float));
	float *want = xmalloc(ny * sizeof(float)), *y0 = xmalloc(ny * sizeof(float));
	uint16_t *w16 = xmalloc(nw * 2), *x16 = xmalloc(nx * 2);
	for (size_t i = 0; i < nw; i++) {
		w16[i] = f32_to_bf16(frand());
		w32[i] = bf ? bf16_to_f32(w16[i]) : frand();
	}
	for (size_t i = 0; i < nx; i++) {
		x16[i] = f32_to_bf16(frand() * 2);
		x[i] = bf ? bf16_to_f32(x16[i]) : frand() * 2;
	}
	/* a bf16 y starts from bf16 values on both sides */
	for (size_t i = 0; i < ny; i++)
		y0[i] = c->y_dtype == GPU_DTYPE_BF16 ? round_bf16(frand()) : frand();
	struct tensor t = {.data = bf ? (const void *)w16 : (const void *)w32,
			   .dtype = c->w_dtype,
			   .ndim = 2,
			   .shape = {c->out, c->in},
			   .nbytes = nw * (bf ? 2 : 4)};
	memcpy(want, y0, ny * sizeof(float));
	REQUIRE(cpu_reserve_scratch(cpu_matmul_scratch_bytes(c->in)) == 0);
	REQUIRE(cpu_matmul(&t, x, c->ldx, c->rows, want, c->ldy, c->accumulate) == 0);

	size_t ysz = c->y_dtype == GPU_DTYPE_BF16 ? 2 : 4, wxsz = bf ? 2 : 4;
	void *bw, *bx, *by;
	void *dw = dev_view(t.data, nw, wxsz, c->w_off, &bw);
	void *dx = dev_view(bf ? (void *)x16 : (void *)x, nx, wxsz, c->x_off, &bx);
	void *dy = dev_view(NULL, ny, ysz, c->y_off, &by);
	if (c->y_dtype == GPU_DTYPE_BF16) {
		uint16_t *h = xmalloc(ny * 2);
		for (size_t i = 0; i < ny; i++)
			h[i] = f32_to_bf16(y0[i]);
		REQUIRE(gpu_copy_to_device(g, dy, h, ny * 2) == 0);
		free(h);
	} else {
		REQUIRE(gpu_copy_to_device(g, dy, y0, ny * 4) == 0);
	}
	CHECK_INT_EQ(gpu_gemm(gm, dw, bf ? GPU_DTYPE_BF16 : GPU_DTYPE_F32, c->out, c->in, dx, c->ldx, c->rows,
			      dy, c->y_dtype, c->ldy, c->accumulate),
		     0);
	void *got = xmalloc(ny * ysz);
	to_host(got, dy, ny * ysz);
	int bad = 0;
	for (int r = 0; r < c->rows; r++) {
		for (size_t o = 0; o < c->ldy; o++) {
			size_t i = (size_t)r * c->ldy + o;
			float gv = ysz == 2 ? bf16_to_f32(((uint16_t *)got)[i]) : ((float *)got)[i];
			if (o >= (size_t)c->out) { /* padding is never written */
				float pad = ysz == 2 ? round_bf16(y0[i]) : y0[i];
				bad += gv != pad;
				continue;
			}
			double scale = c->accumulate ? fabs(y0[i]) : 0;
			for (int k = 0; k < c->in; k++)
				scale += fabs((double)w32[(size_t)o * c->in + k] * x[(size_t)r * c->ldx + k]);
			double tol = 1e-5 * scale + 1e-30;
			if (ysz == 2)
				tol += fabs(want[i]) / 256;
			if (!(fabs(gv - want[i]) <= tol)) {
				if (bad++ < 5)
					fprintf(stderr, "gemm %dx%dx%d: y[%d][%zu] = %.9g, cpu %.9g\n",
						c->out, c->in, c->rows, r, o, gv, want[i]);
			}
		}
	}
	CHECK_INT_EQ(bad, 0);
	gpu_free(g, bw), gpu_free(g, bx), gpu_free(g, by);
	free(w32), free(x), free(want), free(y0), free(w16), free(x16), free(got);
}

static void test_gemm(void)
{
	struct gpu_blas *gm = gpu_blas_create(g);
	REQUIRE(gm);
	static const struct gemm_case cases[] = {
		{1, 1, 1, 1, 1, false, TENSOR_F32, GPU_DTYPE_F32},
		{37, 67, 5, 67, 37, false, TENSOR_F32, GPU_DTYPE_F32},
		{37, 67, 5, 70, 41, true, TENSOR_F32, GPU_DTYPE_F32},
		{64, 128, 17, 128, 64, false, TENSOR_BF16, GPU_DTYPE_F32},
		{130, 33, 3, 40, 131, true, TENSOR_BF16, GPU_DTYPE_F32},
		{48, 96, 1, 96, 48, false, TENSOR_BF16, GPU_DTYPE_BF16},
		{24, 40, 9, 48, 32, true, TENSOR_BF16, GPU_DTYPE_BF16},
		/* views at odd places, as the backend's column slices of wider rows are: each pointer
		 * 2, 4 or 8 bytes past a 16-byte boundary, leading dimensions of 16-byte multiples or
		 * not (cuBLASLt runs them only on algorithms chosen for that alignment) */
		{24, 40, 9, 48, 33, true, TENSOR_BF16, GPU_DTYPE_F32, 0, 1, 1},
		{64, 128, 17, 136, 64, false, TENSOR_BF16, GPU_DTYPE_BF16, 1, 8, 3},
		{37, 64, 5, 64, 40, true, TENSOR_F32, GPU_DTYPE_F32, 2, 2, 1},
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
		check_gemm(gm, &cases[i]);
	/* the same shapes again hit the cache and give the same answers */
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
		check_gemm(gm, &cases[i]);

	/* more shapes than the cache holds: the oldest are dropped and rebuilt, answers stay right */
	for (int pass = 0; pass < 2; pass++) {
		for (int out = 1; out <= GPU_BLAS_MAX_SHAPES + 20; out += pass ? 37 : 1) {
			struct gemm_case c = {out,	   3,	      1,	  3,
					      (size_t)out, pass == 1, TENSOR_F32, GPU_DTYPE_F32};
			if (pass == 0 && out % 64 != 1)
				c.in = 1, c.ldx = 1; /* cheap: fills the cache */
			check_gemm(gm, &c);
		}
	}

	void *d = dev_from(NULL, 4096);
	CHECK_INT_EQ(gpu_gemm(gm, d, GPU_DTYPE_F32, 4, 4, d, 3, 1, (char *)d + 1024, GPU_DTYPE_F32, 4, false),
		     -EINVAL); /* ldx < in */
	CHECK_INT_EQ(gpu_gemm(gm, d, GPU_DTYPE_F32, 4, 4, d, 4, 1, (char *)d + 1024, GPU_DTYPE_BF16, 4, false),
		     -EINVAL); /* fp32 W with a bf16 y */
	CHECK_INT_EQ(gpu_gemm(gm, d, GPU_DTYPE_F32, 0, 4, d, 4, 1, (char *)d + 1024, GPU_DTYPE_F32, 4, false),
		     -EINVAL);
	CHECK_INT_EQ(gpu_gemm(gm, d, GPU_DTYPE_F32, 4, 4, d, 4, 0, (char *)d + 1024, GPU_DTYPE_F32, 4, false),
		     0); /* no rows: nothing to do */
	gpu_free(g, d);
	gpu_blas_destroy(gm);
}

/* stderr of a few calls, read back: what a failed GEMM logs. */
struct stderr_capture {
	int saved, fd;
};

static void capture_begin(struct stderr_capture *c)
{
	char path[] = "/tmp/holo-lm-ops-XXXXXX";
	fflush(stderr);
	c->fd = mkstemp(path);
	REQUIRE(c->fd >= 0);
	unlink(path);
	c->saved = dup(2);
	REQUIRE(c->saved >= 0 && dup2(c->fd, 2) == 2);
}

static char *capture_end(struct stderr_capture *c)
{
	fflush(stderr);
	REQUIRE(dup2(c->saved, 2) == 2);
	close(c->saved);
	off_t n = lseek(c->fd, 0, SEEK_END);
	REQUIRE(n >= 0 && lseek(c->fd, 0, SEEK_SET) == 0);
	char *text = xmalloc((size_t)n + 1);
	REQUIRE(read(c->fd, text, (size_t)n) == n);
	text[n] = 0;
	close(c->fd);
	fputs(text, stderr);
	return text;
}

/* What cuBLASLt refuses reaches the caller as an error that names the shape, and y (and the rest
 * of its buffer) stays as it was: a bf16 x or an fp32 y not aligned to its element (no algorithm
 * at all: -EINVAL), and, in the emulation, a y that overlaps x (the stand-in's
 * CUBLAS_STATUS_INVALID_VALUE at the matmul; a GPU would compute garbage): -EINVAL. All in one
 * 1 KiB allocation: W at 0, x at 256, y at 512. */
static void test_gemm_errors(void)
{
	static const struct {
		enum gpu_dtype w_dtype, y_dtype;
		size_t x_at, y_at, ldy; /* byte offsets into the buffer */
		bool emulated_only;
		const char *log;
	} cases[] = {
		{GPU_DTYPE_BF16, GPU_DTYPE_F32, 257, 512, 4, false,
		 "cuBLASLt has no algorithm for a GEMM of 2 rows x 8 in -> 4 out (bf16 weights, fp32 out, "
		 "ldx 8, ldy 4; w, x, y aligned to 256, 1, 256 bytes)"},
		{GPU_DTYPE_F32, GPU_DTYPE_F32, 256, 514, 4, false,
		 "cuBLASLt has no algorithm for a GEMM of 2 rows x 8 in -> 4 out (fp32 weights, fp32 out, "
		 "ldx 8, ldy 4; w, x, y aligned to 256, 256, 2 bytes)"},
		{GPU_DTYPE_F32, GPU_DTYPE_F32, 256, 256, 8, true,
		 "cuBLASLt failed a GEMM of 2 rows x 8 in -> 4 out (fp32 weights, fp32 out, ldx 8, ldy 8; "
		 "w, x, y aligned to 256, 256, 256 bytes)"},
	};
	struct gpu_blas *gm = gpu_blas_create(g);
	REQUIRE(gm);
	uint8_t host[1024], after[1024];
	for (size_t i = 0; i < sizeof(host); i++)
		host[i] = (uint8_t)(i * 37 % 61); /* finite values, as fp32 and as bf16 */
	char *d = dev_from(host, sizeof(host));
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		if (cases[i].emulated_only && !gpu_devices_emulated())
			continue;
		struct stderr_capture cap;
		capture_begin(&cap);
		int r = gpu_gemm(gm, d, cases[i].w_dtype, 4, 8, d + cases[i].x_at, 8, 2, d + cases[i].y_at,
				 cases[i].y_dtype, cases[i].ldy, false);
		char *log = capture_end(&cap);
		CHECK_INT_EQ(r, -EINVAL);
		if (!strstr(log, cases[i].log))
			fprintf(stderr, "case %zu: the log does not say '%s'\n", i, cases[i].log);
		CHECK(strstr(log, cases[i].log) != NULL);
		free(log);
		to_host(after, d, sizeof(after));
		CHECK(memcmp(after, host, sizeof(host)) == 0);
	}
	gpu_free(g, d);
	gpu_blas_destroy(gm);
}

/* ---- embedding -------------------------------------------------------------------------------- */

static void test_embed(enum tensor_dtype dt)
{
	const int vocab = 11, d = 45, rows = 7, n_spliced = 2;
	bool bf = dt == TENSOR_BF16;
	size_t n = (size_t)vocab * d;
	float *t32 = xmalloc(n * 4), *spl = xmalloc((size_t)n_spliced * d * 4);
	uint16_t *t16 = xmalloc(n * 2);
	for (size_t i = 0; i < n; i++) {
		t32[i] = frand();
		t16[i] = f32_to_bf16(t32[i]);
	}
	for (int i = 0; i < n_spliced * d; i++)
		spl[i] = frand() + 3;
	struct tensor t = {.data = bf ? (void *)t16 : (void *)t32,
			   .dtype = dt,
			   .ndim = 2,
			   .shape = {vocab, d},
			   .nbytes = n * (bf ? 2 : 4)};
	/* tokens, the first and last vocabulary rows, spliced rows, and one id out of range */
	const int32_t ids[] = {3, 0, -1, vocab - 1, -2, 5, vocab};
	void *dt_ = dev_from(t.data, t.nbytes), *dids = dev_from(ids, sizeof(ids));
	void *dspl = dev_from(spl, (size_t)n_spliced * d * 4), *dh = dev_from(NULL, (size_t)rows * d * 4);
	CHECK_INT_EQ(gpu_embed(g, dt_, bf ? GPU_DTYPE_BF16 : GPU_DTYPE_F32, vocab, d, dids, rows, dspl,
			       n_spliced, dh),
		     0);
	float *got = xmalloc((size_t)rows * d * 4), *want = xmalloc((size_t)d * 4);
	to_host(got, dh, (size_t)rows * d * 4);
	for (int r = 0; r < rows; r++) {
		const float *gr = got + (size_t)r * d;
		if (ids[r] >= vocab) {
			for (int c = 0; c < d; c++)
				CHECK(isnan(gr[c]));
			continue;
		}
		if (ids[r] >= 0)
			cpu_tensor_to_f32(&t, (size_t)ids[r] * d, d, want);
		else
			memcpy(want, spl + (size_t)(-1 - ids[r]) * d, (size_t)d * 4);
		CHECK(memcmp(gr, want, (size_t)d * 4) == 0);
	}
	CHECK_INT_EQ(gpu_embed(g, dt_, GPU_DTYPE_F32, vocab, d, dids, rows, NULL, 1, dh), -EINVAL);
	gpu_free(g, dt_), gpu_free(g, dids), gpu_free(g, dspl), gpu_free(g, dh);
	free(t32), free(t16), free(spl), free(got), free(want);
}

/* ---- residual add + RMSNorm -------------------------------------------------------------------- */

static void test_add_rmsnorm(int rows, int d, bool with_delta, enum gpu_dtype out_dtype, size_t ldo)
{
	const float eps = 1e-5f;
	size_t n = (size_t)rows * d, no = (size_t)rows * ldo;
	float *h = xmalloc(n * 4), *delta = xmalloc(n * 4), *w = xmalloc((size_t)d * 4);
	float *want = xmalloc(n * 4);
	for (size_t i = 0; i < n; i++) {
		h[i] = frand() * 3;
		delta[i] = frand();
	}
	for (int i = 0; i < d; i++)
		w[i] = frand() + 1.5f;
	void *dh = dev_from(h, n * 4), *dd = dev_from(delta, n * 4), *dw = dev_from(w, (size_t)d * 4);
	size_t osz = out_dtype == GPU_DTYPE_BF16 ? 2 : 4;
	void *dout = dev_from(NULL, no * osz);
	CHECK_INT_EQ(gpu_add_rmsnorm(g, dh, with_delta ? dd : NULL, dw, rows, d, eps, dout, out_dtype, ldo),
		     0);
	/* the CPU forward: the residual add (cpu_matmul accumulating into h), then the norm */
	if (with_delta)
		for (size_t i = 0; i < n; i++)
			h[i] += delta[i];
	cpu_rmsnorm_rows(h, want, w, rows, d, eps);
	float *gh = xmalloc(n * 4);
	void *gout = xmalloc(no * osz);
	to_host(gh, dh, n * 4);
	to_host(gout, dout, no * osz);
	CHECK(memcmp(gh, h, n * 4) == 0);
	int bad = 0;
	for (int r = 0; r < rows; r++)
		for (int c = 0; c < d; c++) {
			size_t i = (size_t)r * ldo + c;
			float gv = osz == 2 ? bf16_to_f32(((uint16_t *)gout)[i]) : ((float *)gout)[i];
			float wv = want[(size_t)r * d + c];
			double tol = 1e-6 + 2e-6 * fabs(wv) + (osz == 2 ? fabs(wv) / 256 : 0);
			if (!(fabs(gv - wv) <= tol) && bad++ < 5)
				fprintf(stderr, "rmsnorm %dx%d: [%d][%d] = %.9g, cpu %.9g\n", rows, d, r, c,
					gv, wv);
		}
	CHECK_INT_EQ(bad, 0);
	gpu_free(g, dh), gpu_free(g, dd), gpu_free(g, dw), gpu_free(g, dout);
	free(h), free(delta), free(w), free(want), free(gh), free(gout);
}

/* ---- ReLU² and the KV append ------------------------------------------------------------------ */

static void test_relu2(size_t n, enum gpu_dtype out_dtype, bool in_place)
{
	float *u = xmalloc(n * 4), *want = xmalloc(n * 4);
	for (size_t i = 0; i < n; i++)
		u[i] = frand() * 4;
	u[0] = NAN; /* stays NaN on the device (the CPU's ReLU² gives 0 for it) */
	memcpy(want, u, n * 4);
	cpu_relu2(want, n);
	size_t osz = out_dtype == GPU_DTYPE_BF16 ? 2 : 4;
	void *du = dev_from(u, n * 4), *dout = in_place ? du : dev_from(NULL, n * osz);
	CHECK_INT_EQ(gpu_relu2(g, du, dout, out_dtype, n), 0);
	void *got = xmalloc(n * osz);
	to_host(got, dout, n * osz);
	CHECK(isnan(osz == 2 ? bf16_to_f32(((uint16_t *)got)[0]) : ((float *)got)[0]));
	int bad = 0;
	for (size_t i = 1; i < n; i++) {
		if (osz == 2)
			bad += ((uint16_t *)got)[i] != f32_to_bf16(want[i]);
		else
			bad += ((float *)got)[i] != want[i];
	}
	CHECK_INT_EQ(bad, 0);
	if (!in_place)
		gpu_free(g, dout);
	gpu_free(g, du);
	free(u), free(want), free(got);
}

static void test_kv_append(void)
{
	enum { kv_dim = 24, cap = 10, rows = 3, pos = 6 };
	float kc[cap * kv_dim], vc[cap * kv_dim], kn[rows * kv_dim], vn[rows * kv_dim];
	for (int i = 0; i < cap * kv_dim; i++)
		kc[i] = frand(), vc[i] = frand();
	for (int i = 0; i < rows * kv_dim; i++)
		kn[i] = frand() + 5, vn[i] = frand() - 5;
	void *dk = dev_from(kc, sizeof(kc)), *dv = dev_from(vc, sizeof(vc));
	void *dkn = dev_from(kn, sizeof(kn)), *dvn = dev_from(vn, sizeof(vn));
	int32_t p = pos;
	void *dp = dev_from(&p, sizeof(p));
	CHECK_INT_EQ(gpu_kv_append(g, dkn, dvn, dk, dv, GPU_DTYPE_F32, kv_dim, rows, dp), 0);
	float gk[cap * kv_dim], gv[cap * kv_dim];
	to_host(gk, dk, sizeof(gk));
	to_host(gv, dv, sizeof(gv));
	memcpy(kc + pos * kv_dim, kn, sizeof(kn));
	memcpy(vc + pos * kv_dim, vn, sizeof(vn));
	CHECK(memcmp(gk, kc, sizeof(kc)) == 0);
	CHECK(memcmp(gv, vc, sizeof(vc)) == 0);
	/* bf16: a device-side position moved on, rows copied bit for bit */
	uint16_t k16[cap * kv_dim], v16[cap * kv_dim], n16[kv_dim], g16[cap * kv_dim];
	memset(k16, 0, sizeof(k16)), memset(v16, 0, sizeof(v16));
	for (int i = 0; i < kv_dim; i++)
		n16[i] = f32_to_bf16(frand());
	void *dk16 = dev_from(k16, sizeof(k16)), *dv16 = dev_from(v16, sizeof(v16));
	void *dn16 = dev_from(n16, sizeof(n16));
	p = cap - 1;
	REQUIRE(gpu_copy_to_device(g, dp, &p, sizeof(p)) == 0);
	CHECK_INT_EQ(gpu_kv_append(g, dn16, dn16, dk16, dv16, GPU_DTYPE_BF16, kv_dim, 1, dp), 0);
	to_host(g16, dk16, sizeof(g16));
	memcpy(k16 + (cap - 1) * kv_dim, n16, sizeof(n16));
	CHECK(memcmp(g16, k16, sizeof(k16)) == 0);
	to_host(g16, dv16, sizeof(g16));
	CHECK(memcmp(g16, k16, sizeof(k16)) == 0);
	gpu_free(g, dk), gpu_free(g, dv), gpu_free(g, dkn), gpu_free(g, dvn), gpu_free(g, dp);
	gpu_free(g, dk16), gpu_free(g, dv16), gpu_free(g, dn16);
}

int main(void)
{
	if (gpu_device_count() == 0) {
		fprintf(stderr, "no CUDA device: skipping\n");
		return TEST_SKIP;
	}
	g = gpu_context_create(test_gpu_device());
	REQUIRE(g);
	/* the emulation's cuBLASLt refusing every algorithm its heuristic offers
	 * (HOLOD_GPU_EMU_LT_REFUSE=3, meson.build): a GEMM fails with -EIO, naming the shape in
	 * the log, and writes nothing; with fewer refused, test_gemm() below runs on the next one */
	const char *refuse = getenv("HOLOD_GPU_EMU_LT_REFUSE");
	if (refuse && strcmp(refuse, "3") == 0) {
		struct gpu_blas *gm = gpu_blas_create(g);
		REQUIRE(gm);
		float host[64];
		for (int i = 0; i < 64; i++)
			host[i] = 1.0f;
		void *d = dev_from(host, sizeof(host));
		CHECK_INT_EQ(gpu_gemm(gm, d, GPU_DTYPE_F32, 4, 4, d, 4, 2, (char *)d + 128, GPU_DTYPE_F32, 4,
				      false),
			     -EIO);
		to_host(host, d, sizeof(host));
		for (int i = 32; i < 40; i++)
			CHECK_NEAR(host[i], 1.0, 0.0);
		gpu_free(g, d);
		gpu_blas_destroy(gm);
		gpu_context_destroy(g);
		return test_exit();
	}
	test_gemm();
	test_gemm_errors();
	test_embed(TENSOR_F32);
	test_embed(TENSOR_BF16);
	test_add_rmsnorm(1, 1, false, GPU_DTYPE_F32, 1);
	test_add_rmsnorm(3, 45, true, GPU_DTYPE_F32, 45);
	test_add_rmsnorm(5, 300, true, GPU_DTYPE_BF16, 304);
	test_add_rmsnorm(2, 64, false, GPU_DTYPE_BF16, 64);
	test_relu2(1, GPU_DTYPE_F32, false);
	test_relu2(1000, GPU_DTYPE_F32, true);
	test_relu2(777, GPU_DTYPE_BF16, false);
	test_kv_append();
	gpu_context_destroy(g);
	return test_exit();
}
