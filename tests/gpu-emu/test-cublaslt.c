/* The cuBLASLt subset the engine uses, against a naive double-precision reference.
 *
 * Built twice from this one source: in the `gpu-emu` suite against the emulated cuBLASLt
 * (HOLO_TEST_EMULATED defined), and in the `gpu` suite against NVIDIA's cuBLASLt, where it skips
 * (77) without a device. The refusals of the subset are checked only in the emulated build: the
 * real library supports more than the stand-in admits to.
 *
 * Cases: every accepted type pair (A/B -> C/D: 32F -> 32F, 16BF -> 16BF or 32F, 16F -> 16F or
 * 32F) x N/T x N/T x every accepted epilogue x beta 0 / beta with C != D / beta in place (C == D),
 * in batches of 1 and 3 (strides larger than a matrix; a zero stride broadcasting A, B or an
 * out-of-place C), leading dimensions larger than the rows, the bias type left to its default
 * (D's) or set; then odd shapes (m, n, k among 1, 7, 33, 130) over every type and transpose
 * pair; the bf16 rounding of D to nearest even on sums that are exact in fp32; a matmul captured
 * into a CUDA graph and replayed.
 *
 * Inputs are multiples of 1/64 in [-2, 2], exact in bf16, fp16 and fp32, so only the
 * accumulation, the epilogue and the rounding of D can differ from the reference. Tolerance per
 * element (u = 2^-24, S = sum over p of |a_ip b_pj|):
 *   before the activation: e = u ((2k + 4) |alpha| S + 4 (|beta c| + |bias|))
 *     (fp32 products of fp32 inputs round; any summation order stays within (k - 1) u S);
 *   after it: 1.2 e + 2^-21 |x| (GELU's slope is below 1.13; tanhf is within a few ulp);
 *   D of type bf16 / fp16 adds 2^-8 / 2^-11 of |reference| (half an ulp at most).
 * On a GPU, failures confined to GELU cases mean cuBLASLt's GELU is not the tanh form evaluated
 * accurately (the erf form, or an approximate tanh): settle that before fusing GELU.
 * Padding between columns and between batches holds NaN and must stay NaN in D and unread
 * elsewhere; C holds NaN when beta is 0 (cuBLAS does not read C then).
 */
#include "test.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TEST_DEFINE_GLOBALS;

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#define CHECK_LT(call) CHECK_INT_EQ((call), CUBLAS_STATUS_SUCCESS)

static float bits_to_f32(uint32_t u)
{
	float f;
	memcpy(&f, &u, 4);
	return f;
}

static uint32_t f32_to_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	return u;
}

static uint16_t bf16_from_f32_rn(float f)
{
	uint32_t u = f32_to_bits(f);
	if (isnan(f))
		return 0x7fc0;
	return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

static float bf16_to_f32(uint16_t h)
{
	return bits_to_f32((uint32_t)h << 16);
}

static float f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
	if (exp == 0x1f)
		return bits_to_f32(sign | 0x7f800000 | (man << 13));
	if (exp == 0) /* zero or subnormal: man * 2^-24 */
		return (sign ? -1.0f : 1.0f) * (float)man * 0x1p-24f;
	return bits_to_f32(sign | ((exp + 112) << 23) | (man << 13));
}

/* Only for values exact in fp16 (the inputs here), NaN and zero. */
static uint16_t f16_from_f32_exact(float f)
{
	if (isnan(f))
		return 0x7e00;
	if (f == 0.0f)
		return signbit(f) ? 0x8000 : 0;
	uint32_t u = f32_to_bits(f);
	uint32_t sign = (u >> 16) & 0x8000, exp = (u >> 23) & 0xff, man = u & 0x7fffff;
	REQUIRE(exp >= 113 && exp <= 142 && (man & 0x1fff) == 0);
	return (uint16_t)(sign | ((exp - 112) << 10) | (man >> 13));
}

static size_t type_size(cudaDataType t)
{
	return t == CUDA_R_32F ? 4 : 2;
}

static void encode(cudaDataType t, const float *src, void *dst, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (t == CUDA_R_32F)
			((float *)dst)[i] = src[i];
		else if (t == CUDA_R_16BF)
			((uint16_t *)dst)[i] = bf16_from_f32_rn(src[i]);
		else
			((uint16_t *)dst)[i] = f16_from_f32_exact(src[i]);
	}
}

static void decode(cudaDataType t, const void *src, float *dst, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (t == CUDA_R_32F)
			dst[i] = ((const float *)src)[i];
		else if (t == CUDA_R_16BF)
			dst[i] = bf16_to_f32(((const uint16_t *)src)[i]);
		else
			dst[i] = f16_to_f32(((const uint16_t *)src)[i]);
	}
}

/* A column-major matrix (batch of them) on the host as floats and on the device as `type`. */
struct mat {
	int rows, cols, batch;
	int64_t ld, stride;
	cudaDataType type;
	size_t elems;
	float *host;
	void *dev;
};

static float rand_value(void)
{
	return (float)(rand() % 257 - 128) / 64.0f;
}

static void mat_init(struct mat *x, cudaDataType type, int rows, int cols, int pad, int batch,
		     int64_t stride)
{
	x->rows = rows, x->cols = cols, x->batch = batch, x->type = type;
	x->ld = rows + pad;
	x->stride = stride;
	int64_t one = x->ld * cols;
	x->elems = (size_t)(batch > 1 && stride > 0 ? (batch - 1) * stride + one : one);
	x->host = malloc(sizeof(float) * x->elems);
	REQUIRE(x->host);
	for (size_t i = 0; i < x->elems; i++)
		x->host[i] = NAN;
	for (int b = 0; b < (stride ? batch : 1); b++)
		for (int j = 0; j < cols; j++)
			for (int i = 0; i < rows; i++)
				x->host[b * stride + j * x->ld + i] = rand_value();
	REQUIRE(cudaMalloc(&x->dev, x->elems * type_size(type)) == cudaSuccess);
}

static void mat_upload(struct mat *x)
{
	size_t bytes = x->elems * type_size(x->type);
	void *tmp = malloc(bytes);
	REQUIRE(tmp);
	encode(x->type, x->host, tmp, x->elems);
	REQUIRE(cudaMemcpy(x->dev, tmp, bytes, cudaMemcpyHostToDevice) == cudaSuccess);
	free(tmp);
}

static void mat_download(const struct mat *x, float *out)
{
	size_t bytes = x->elems * type_size(x->type);
	void *tmp = malloc(bytes);
	REQUIRE(tmp);
	REQUIRE(cudaMemcpy(tmp, x->dev, bytes, cudaMemcpyDeviceToHost) == cudaSuccess);
	decode(x->type, tmp, out, x->elems);
	free(tmp);
}

static void mat_free(struct mat *x)
{
	free(x->host);
	cudaFree(x->dev);
}

static float host_at(const struct mat *x, int b, int i, int j)
{
	return x->host[(int64_t)b * x->stride + (int64_t)j * x->ld + i];
}

static cublasLtMatrixLayout_t layout_of(const struct mat *x)
{
	cublasLtMatrixLayout_t l;
	int32_t batch = x->batch;
	int64_t stride = x->stride;
	REQUIRE(cublasLtMatrixLayoutCreate(&l, x->type, (uint64_t)x->rows, (uint64_t)x->cols, x->ld) ==
		CUBLAS_STATUS_SUCCESS);
	if (batch > 1) {
		CHECK_LT(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch,
							  sizeof(batch)));
		CHECK_LT(cublasLtMatrixLayoutSetAttribute(
			l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
	}
	return l;
}

static double gelu_tanh(double x)
{
	return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

static bool has_bias(cublasLtEpilogue_t e)
{
	return e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_RELU_BIAS ||
	       e == CUBLASLT_EPILOGUE_GELU_BIAS;
}

enum beta_mode { BETA_ZERO, BETA_OUT_OF_PLACE, BETA_IN_PLACE };

struct gemm_case {
	cudaDataType ab, cd, bias_type;
	cublasOperation_t ta, tb;
	cublasLtEpilogue_t epilogue;
	int m, n, k, batch, pad;
	enum beta_mode beta_mode;
	bool broadcast_a, broadcast_b, broadcast_c; /* batch stride 0 (C: out of place only) */
	bool set_bias_type; /* else the default: D's type */
};

static cublasLtHandle_t lt;
static int cases_run;

static void run_case(const struct gemm_case *g)
{
	int failures_before = test_failures;
	int ar = g->ta == CUBLAS_OP_N ? g->m : g->k, ac = g->ta == CUBLAS_OP_N ? g->k : g->m;
	int br = g->tb == CUBLAS_OP_N ? g->k : g->n, bc = g->tb == CUBLAS_OP_N ? g->n : g->k;
	int64_t extra = g->batch > 1 ? 5 : 0; /* batch strides a little larger than a matrix */
	struct mat a, b, c, d;
	mat_init(&a, g->ab, ar, ac, g->pad, g->batch,
		 g->broadcast_a ? 0 : (ar + g->pad) * (int64_t)ac + extra);
	mat_init(&b, g->ab, br, bc, g->pad + 1, g->batch,
		 g->broadcast_b ? 0 : (br + g->pad + 1) * (int64_t)bc + extra);
	mat_init(&d, g->cd, g->m, g->n, g->pad, g->batch, (g->m + g->pad) * (int64_t)g->n + extra);
	float alpha = g->k % 2 ? 0.75f : -1.25f, beta = g->beta_mode == BETA_ZERO ? 0.0f : 0.5f;

	if (g->beta_mode == BETA_IN_PLACE) {
		c = d; /* the same device buffer, values and layout */
	} else {
		mat_init(&c, g->cd, g->m, g->n, 2, g->batch,
			 g->broadcast_c ? 0 : (g->m + 2) * (int64_t)g->n + extra);
		if (g->beta_mode == BETA_ZERO)
			for (size_t i = 0; i < c.elems; i++)
				c.host[i] = NAN;
		mat_upload(&c);
		/* D starts as garbage: every element must be written. */
		for (size_t i = 0; i < d.elems; i++)
			if (!isnan(d.host[i]))
				d.host[i] = 1000.0f;
	}
	mat_upload(&a), mat_upload(&b), mat_upload(&d);

	float *bias_host = malloc(sizeof(float) * (size_t)g->m);
	REQUIRE(bias_host);
	for (int i = 0; i < g->m; i++)
		bias_host[i] = rand_value();
	void *bias_dev = NULL;
	if (has_bias(g->epilogue)) {
		size_t bytes = (size_t)g->m * type_size(g->bias_type);
		void *tmp = malloc(bytes);
		REQUIRE(tmp);
		encode(g->bias_type, bias_host, tmp, (size_t)g->m);
		REQUIRE(cudaMalloc(&bias_dev, bytes) == cudaSuccess);
		REQUIRE(cudaMemcpy(bias_dev, tmp, bytes, cudaMemcpyHostToDevice) == cudaSuccess);
		free(tmp);
	}

	cublasLtMatmulDesc_t op;
	REQUIRE(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS);
	CHECK_LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &g->ta, sizeof(int32_t)));
	CHECK_LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &g->tb, sizeof(int32_t)));
	uint32_t epi = g->epilogue;
	CHECK_LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
	if (bias_dev) {
		int32_t bt = g->bias_type;
		CHECK_LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_dev,
							sizeof(bias_dev)));
		if (g->set_bias_type)
			CHECK_LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
								&bt, sizeof(bt)));
	}
	cublasLtMatrixLayout_t la = layout_of(&a), lb = layout_of(&b), lc = layout_of(&c),
			       ld = layout_of(&d);
	cublasLtMatmulPreference_t pref;
	REQUIRE(cublasLtMatmulPreferenceCreate(&pref) == CUBLAS_STATUS_SUCCESS);
	uint64_t ws_max = 0;
	CHECK_LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
						      &ws_max, sizeof(ws_max)));
	cublasLtMatmulHeuristicResult_t heur;
	int found = 0;
	CHECK_LT(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, ld, pref, 1, &heur, &found));
	CHECK_INT_EQ(found, 1);
	if (found == 1) {
		CHECK_LT(cublasLtMatmul(lt, op, &alpha, a.dev, la, b.dev, lb, &beta, c.dev, lc, d.dev, ld,
					&heur.algo, NULL, 0, 0));
		CHECK_INT_EQ(cudaDeviceSynchronize(), cudaSuccess);
	}

	float *got = malloc(sizeof(float) * d.elems);
	REQUIRE(got);
	mat_download(&d, got);
	double out_u = g->cd == CUDA_R_16BF ? 0x1p-8 : g->cd == CUDA_R_16F ? 0x1p-11 : 0.0;
	bool relu = g->epilogue == CUBLASLT_EPILOGUE_RELU || g->epilogue == CUBLASLT_EPILOGUE_RELU_BIAS;
	bool gelu = g->epilogue == CUBLASLT_EPILOGUE_GELU || g->epilogue == CUBLASLT_EPILOGUE_GELU_BIAS;
	char *written = calloc(d.elems, 1);
	REQUIRE(written);
	for (int bt = 0; bt < g->batch; bt++) {
		int ba = a.stride ? bt : 0;
		for (int j = 0; j < g->n; j++) {
			for (int i = 0; i < g->m; i++) {
				double s = 0, sabs = 0;
				for (int p = 0; p < g->k; p++) {
					double x = g->ta == CUBLAS_OP_N ? host_at(&a, ba, i, p) : host_at(&a, ba, p, i);
					double y = g->tb == CUBLAS_OP_N ? host_at(&b, bt, p, j) : host_at(&b, bt, j, p);
					s += x * y;
					sabs += fabs(x * y);
				}
				double cv = beta != 0 ? host_at(&c, bt, i, j) : 0;
				double bv = has_bias(g->epilogue) ? bias_host[i] : 0;
				double v = alpha * s + beta * cv + bv;
				double e = 0x1p-24 * ((2.0 * g->k + 4) * fabs(alpha) * sabs +
						      4 * (fabs(beta * cv) + fabs(bv)));
				if (relu)
					v = v < 0 ? 0 : v;
				else if (gelu)
					e = 1.2 * e + 0x1p-21 * fabs(v), v = gelu_tanh(v);
				double tol = e + out_u * (fabs(v) + e);
				size_t at = (size_t)(bt * d.stride + j * d.ld + i);
				written[at] = 1;
				CHECK_NEAR(got[at], v, tol);
			}
		}
	}
	for (size_t i = 0; i < d.elems; i++)
		if (!written[i])
			CHECK(isnan(got[i]));
	free(written);
	if (test_failures != failures_before)
		fprintf(stderr,
			"  in case ab=%d cd=%d bias=%d ta=%d tb=%d epilogue=%d m=%d n=%d k=%d batch=%d "
			"pad=%d beta_mode=%d broadcast a/b/c=%d/%d/%d\n",
			g->ab, g->cd, g->bias_type, g->ta, g->tb, g->epilogue, g->m, g->n, g->k,
			g->batch, g->pad, g->beta_mode, g->broadcast_a, g->broadcast_b, g->broadcast_c);
	cases_run++;

	free(got);
	free(bias_host);
	cudaFree(bias_dev);
	cublasLtMatmulPreferenceDestroy(pref);
	cublasLtMatrixLayoutDestroy(la), cublasLtMatrixLayoutDestroy(lb);
	cublasLtMatrixLayoutDestroy(lc), cublasLtMatrixLayoutDestroy(ld);
	cublasLtMatmulDescDestroy(op);
	if (g->beta_mode != BETA_IN_PLACE)
		mat_free(&c);
	mat_free(&a), mat_free(&b), mat_free(&d);
}

static const cudaDataType type_pairs[][2] = {
	{CUDA_R_32F, CUDA_R_32F}, {CUDA_R_16BF, CUDA_R_16BF}, {CUDA_R_16BF, CUDA_R_32F},
	{CUDA_R_16F, CUDA_R_16F}, {CUDA_R_16F, CUDA_R_32F},
};
static const cublasLtEpilogue_t epilogues[] = {
	CUBLASLT_EPILOGUE_DEFAULT, CUBLASLT_EPILOGUE_RELU, CUBLASLT_EPILOGUE_BIAS,
	CUBLASLT_EPILOGUE_RELU_BIAS, CUBLASLT_EPILOGUE_GELU, CUBLASLT_EPILOGUE_GELU_BIAS,
};
static const cublasOperation_t ops[] = {CUBLAS_OP_N, CUBLAS_OP_T};

static void test_every_combination(void)
{
	int counter = 0;
	for (size_t t = 0; t < ARRAY_SIZE(type_pairs); t++)
		for (int ta = 0; ta < 2; ta++)
			for (int tb = 0; tb < 2; tb++)
				for (size_t e = 0; e < ARRAY_SIZE(epilogues); e++)
					for (int bm = BETA_ZERO; bm <= BETA_IN_PLACE; bm++)
						for (int batch = 1; batch <= 3; batch += 2) {
							counter++;
							struct gemm_case g = {
								.ab = type_pairs[t][0],
								.cd = type_pairs[t][1],
								.bias_type = type_pairs[t][1],
								.set_bias_type = counter % 2,
								.ta = ops[ta],
								.tb = ops[tb],
								.epilogue = epilogues[e],
								.m = 7,
								.n = 5,
								.k = 33,
								.batch = batch,
								.pad = counter % 3,
								.beta_mode = (enum beta_mode)bm,
								.broadcast_a = batch > 1 && counter % 4 == 1,
								.broadcast_b = batch > 1 && counter % 4 == 3,
								.broadcast_c = batch > 1 && counter % 8 == 0,
							};
							run_case(&g);
						}
}

static void test_odd_shapes(void)
{
	static const int shapes[][3] = {
		{1, 1, 1}, {7, 1, 130}, {1, 33, 7}, {33, 7, 1}, {130, 33, 7}, {33, 130, 130},
	};
	int counter = 0;
	for (size_t s = 0; s < ARRAY_SIZE(shapes); s++)
		for (size_t t = 0; t < ARRAY_SIZE(type_pairs); t++)
			for (int ta = 0; ta < 2; ta++)
				for (int tb = 0; tb < 2; tb++) {
					counter++;
					struct gemm_case g = {
						.ab = type_pairs[t][0],
						.cd = type_pairs[t][1],
						.bias_type = type_pairs[t][1],
						.ta = ops[ta],
						.tb = ops[tb],
						.epilogue = epilogues[counter % ARRAY_SIZE(epilogues)],
						.m = shapes[s][0],
						.n = shapes[s][1],
						.k = shapes[s][2],
						.batch = counter % 5 == 0 ? 3 : 1,
						.pad = counter % 2 ? 3 : 0,
						.beta_mode = (enum beta_mode)(counter % 3),
						.broadcast_a = counter % 10 == 0,
					};
					run_case(&g);
				}
}

/* Sums exact in fp32, between bf16 neighbours: D must be their round-to-nearest-even. */
static void test_bf16_rounding(void)
{
	/* One row of A times a column of ones: [1, x] -> 1 + x. Spacing of bf16 at 1 is 2^-7. */
	static const float tails[] = {0.75f * 0x1p-7f, 0.5f * 0x1p-7f, 1.5f * 0x1p-7f, 0.25f * 0x1p-7f,
				      -0.75f * 0x1p-8f};
	static const float want[] = {1.0f + 0x1p-7f, 1.0f, 1.0f + 2 * 0x1p-7f, 1.0f, 1.0f - 0x1p-8f};
	int n = (int)ARRAY_SIZE(tails);
	uint16_t a_host[2 * 5], b_host[2] = {bf16_from_f32_rn(1.0f), bf16_from_f32_rn(1.0f)}, d_host[5];
	for (int i = 0; i < n; i++) {
		/* A is n x 2, column-major: column 0 all ones, column 1 the tails. */
		a_host[i] = bf16_from_f32_rn(1.0f);
		a_host[n + i] = bf16_from_f32_rn(tails[i]);
		REQUIRE(bf16_to_f32(a_host[n + i]) == tails[i]);
	}
	void *a, *b, *d;
	REQUIRE(cudaMalloc(&a, sizeof(a_host)) == cudaSuccess);
	REQUIRE(cudaMalloc(&b, sizeof(b_host)) == cudaSuccess);
	REQUIRE(cudaMalloc(&d, sizeof(d_host)) == cudaSuccess);
	REQUIRE(cudaMemcpy(a, a_host, sizeof(a_host), cudaMemcpyHostToDevice) == cudaSuccess);
	REQUIRE(cudaMemcpy(b, b_host, sizeof(b_host), cudaMemcpyHostToDevice) == cudaSuccess);
	cublasLtMatmulDesc_t op;
	cublasLtMatrixLayout_t la, lb, ld;
	REQUIRE(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS);
	REQUIRE(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, (uint64_t)n, 2, n) == CUBLAS_STATUS_SUCCESS);
	REQUIRE(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, 2, 1, 2) == CUBLAS_STATUS_SUCCESS);
	REQUIRE(cublasLtMatrixLayoutCreate(&ld, CUDA_R_16BF, (uint64_t)n, 1, n) == CUBLAS_STATUS_SUCCESS);
	float alpha = 1.0f, beta = 0.0f;
	CHECK_LT(cublasLtMatmul(lt, op, &alpha, a, la, b, lb, &beta, d, ld, d, ld, NULL, NULL, 0, 0));
	REQUIRE(cudaMemcpy(d_host, d, sizeof(d_host), cudaMemcpyDeviceToHost) == cudaSuccess);
	for (int i = 0; i < n; i++)
		CHECK_NEAR(bf16_to_f32(d_host[i]), want[i], 0.0);
	cublasLtMatrixLayoutDestroy(la), cublasLtMatrixLayoutDestroy(lb), cublasLtMatrixLayoutDestroy(ld);
	cublasLtMatmulDescDestroy(op);
	cudaFree(a), cudaFree(b), cudaFree(d);
}

/* Attribute plumbing common to both libraries: sizes are checked, values read back. */
static void test_attributes(void)
{
	cublasLtMatmulDesc_t op;
	cublasLtMatrixLayout_t l;
	REQUIRE(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS);
	REQUIRE(cublasLtMatrixLayoutCreate(&l, CUDA_R_16BF, 4, 3, 4) == CUBLAS_STATUS_SUCCESS);
	int32_t t = CUBLAS_OP_T, got = -1;
	size_t written = 0;
	CHECK_INT_EQ(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &t, 2),
		     CUBLAS_STATUS_INVALID_VALUE);
	CHECK_LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t)));
	CHECK_LT(cublasLtMatmulDescGetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &got, sizeof(got),
						&written));
	CHECK_INT_EQ(got, CUBLAS_OP_T);
	CHECK_INT_EQ(written, sizeof(got));
	CHECK_LT(cublasLtMatmulDescGetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, NULL, 0, &written));
	CHECK_INT_EQ(written, sizeof(int32_t));
	int64_t stride = 99, stride_got = 0;
	CHECK_LT(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
						  &stride, sizeof(stride)));
	CHECK_LT(cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
						  &stride_got, sizeof(stride_got), &written));
	CHECK_INT_EQ(stride_got, 99);
	uint64_t rows = 0;
	CHECK_LT(cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_ROWS, &rows, sizeof(rows),
						  &written));
	CHECK_INT_EQ(rows, 4);
	CHECK(cublasLtGetStatusString(CUBLAS_STATUS_NOT_SUPPORTED) != NULL);

	/* the pointer alignments cuda/gemm.c tells the heuristic (the default assumes 256 bytes) */
	cublasLtMatmulPreference_t pref;
	REQUIRE(cublasLtMatmulPreferenceCreate(&pref) == CUBLAS_STATUS_SUCCESS);
	uint32_t align = 0;
	CHECK_LT(cublasLtMatmulPreferenceGetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
						      &align, sizeof(align), &written));
	CHECK_INT_EQ(align, 256);
	align = 16;
	CHECK_LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
						      &align, sizeof(align)));
	align = 0;
	CHECK_LT(cublasLtMatmulPreferenceGetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
						      &align, sizeof(align), &written));
	CHECK_INT_EQ(align, 16);
#ifdef HOLO_TEST_EMULATED
	align = 12; /* not a power of two */
	CHECK_INT_EQ(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
							  &align, sizeof(align)),
		     CUBLAS_STATUS_INVALID_VALUE);
#endif
	cublasLtMatmulPreferenceDestroy(pref);
	cublasLtMatrixLayoutDestroy(l);
	cublasLtMatmulDescDestroy(op);
}

/* A matmul captured into a graph runs at each launch, on the inputs of that moment, after its
 * descriptors are gone; capturing it computes nothing. */
static void test_graph_capture(void)
{
	enum { M = 8, N = 4, K = 16 };
	float a1[M * K], a2[M * K], b[K * N], d[M * N];
	for (int i = 0; i < M * K; i++)
		a1[i] = (float)(i % 5 - 2), a2[i] = (float)(i % 3 - 1);
	for (int i = 0; i < K * N; i++)
		b[i] = (float)(i % 7 - 3);
	void *da, *db, *dd;
	REQUIRE(cudaMalloc(&da, sizeof(a1)) == cudaSuccess);
	REQUIRE(cudaMalloc(&db, sizeof(b)) == cudaSuccess);
	REQUIRE(cudaMalloc(&dd, sizeof(d)) == cudaSuccess);
	REQUIRE(cudaMemcpy(da, a1, sizeof(a1), cudaMemcpyHostToDevice) == cudaSuccess);
	REQUIRE(cudaMemcpy(db, b, sizeof(b), cudaMemcpyHostToDevice) == cudaSuccess);
	REQUIRE(cudaMemset(dd, 0, sizeof(d)) == cudaSuccess);

	cudaStream_t stream;
	REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
	cublasLtMatmulDesc_t op;
	cublasLtMatrixLayout_t la, lb, ld;
	REQUIRE(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS);
	REQUIRE(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, M, K, M) == CUBLAS_STATUS_SUCCESS);
	REQUIRE(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, K, N, K) == CUBLAS_STATUS_SUCCESS);
	REQUIRE(cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, M, N, M) == CUBLAS_STATUS_SUCCESS);
	float alpha = 1, beta = 0;
	cudaGraph_t graph;
	cudaGraphExec_t exec;
	REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) == cudaSuccess);
	CHECK_LT(cublasLtMatmul(lt, op, &alpha, da, la, db, lb, &beta, dd, ld, dd, ld, NULL, NULL, 0,
				stream));
	REQUIRE(cudaStreamEndCapture(stream, &graph) == cudaSuccess);
	cublasLtMatrixLayoutDestroy(la), cublasLtMatrixLayoutDestroy(lb), cublasLtMatrixLayoutDestroy(ld);
	cublasLtMatmulDescDestroy(op);
	REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);

	REQUIRE(cudaMemcpy(d, dd, sizeof(d), cudaMemcpyDeviceToHost) == cudaSuccess);
	for (int i = 0; i < M * N; i++)
		CHECK_NEAR(d[i], 0.0, 0.0);
	for (int round = 0; round < 2; round++) {
		const float *a = round ? a2 : a1;
		REQUIRE(cudaMemcpy(da, a, sizeof(a1), cudaMemcpyHostToDevice) == cudaSuccess);
		CHECK_INT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
		CHECK_INT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
		REQUIRE(cudaMemcpy(d, dd, sizeof(d), cudaMemcpyDeviceToHost) == cudaSuccess);
		for (int j = 0; j < N; j++)
			for (int i = 0; i < M; i++) {
				double want = 0; /* small integers: exact in any order */
				for (int p = 0; p < K; p++)
					want += (double)a[i + p * M] * b[p + j * K];
				CHECK_NEAR(d[i + j * M], want, 0.0);
			}
	}
	cudaGraphExecDestroy(exec);
	cudaGraphDestroy(graph);
	cudaStreamDestroy(stream);
	cudaFree(da), cudaFree(db), cudaFree(dd);
}

#ifdef HOLO_TEST_EMULATED
/* D = A B for one column of B, then for two (the first the same): the stand-in's split-K must
 * sum the first column in another order (the emulation's promise that a test holding a batch to
 * each sequence alone bit for bit fails, as on a GPU), both within the accumulation bound of a
 * double reference. Inputs are fp32 values that are not multiples of a power of two, so the
 * order shows in the bits. */
static void test_shape_dependent_order(void)
{
	enum { M = 32, K = 256 };
	static float a[M * K], b[K * 2], d1[M], d2[M * 2];
	for (int i = 0; i < M * K; i++)
		a[i] = sinf((float)i * 0.37f) * 1.3f;
	for (int i = 0; i < K; i++)
		b[i] = b[K + i] = cosf((float)i * 0.71f) * 0.9f;
	void *da, *db, *dd;
	REQUIRE(cudaMalloc(&da, sizeof(a)) == cudaSuccess);
	REQUIRE(cudaMalloc(&db, sizeof(b)) == cudaSuccess);
	REQUIRE(cudaMalloc(&dd, sizeof(d2)) == cudaSuccess);
	REQUIRE(cudaMemcpy(da, a, sizeof(a), cudaMemcpyHostToDevice) == cudaSuccess);
	REQUIRE(cudaMemcpy(db, b, sizeof(b), cudaMemcpyHostToDevice) == cudaSuccess);
	cublasLtMatmulDesc_t op;
	REQUIRE(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS);
	float alpha = 1, beta = 0;
	for (int n = 1; n <= 2; n++) {
		cublasLtMatrixLayout_t la, lb, ld;
		REQUIRE(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, M, K, M) == CUBLAS_STATUS_SUCCESS);
		REQUIRE(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, K, n, K) == CUBLAS_STATUS_SUCCESS);
		REQUIRE(cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, M, n, M) == CUBLAS_STATUS_SUCCESS);
		CHECK_LT(cublasLtMatmul(lt, op, &alpha, da, la, db, lb, &beta, dd, ld, dd, ld, NULL, NULL,
					0, 0));
		REQUIRE(cudaMemcpy(n == 1 ? d1 : d2, dd, sizeof(float) * M * n, cudaMemcpyDeviceToHost) ==
			cudaSuccess);
		cublasLtMatrixLayoutDestroy(la), cublasLtMatrixLayoutDestroy(lb);
		cublasLtMatrixLayoutDestroy(ld);
	}
	cublasLtMatmulDescDestroy(op);
	int differ = 0;
	for (int i = 0; i < M; i++) {
		double want = 0, mag = 0;
		for (int p = 0; p < K; p++) {
			want += (double)a[i + p * M] * b[p];
			mag += fabs((double)a[i + p * M] * b[p]);
		}
		double bound = (2.0 * K + 4) * ldexp(1.0, -24) * mag;
		CHECK_NEAR(d1[i], want, bound);
		CHECK_NEAR(d2[i], want, bound);
		CHECK(memcmp(&d2[i], &d2[M + i], sizeof(float)) == 0); /* the same column twice */
		differ += memcmp(&d1[i], &d2[i], sizeof(float)) != 0;
	}
	if (!differ)
		fprintf(stderr, "one column and two summed alike: split-K does not follow the shape\n");
	CHECK(differ > 0);
	cudaFree(da), cudaFree(db), cudaFree(dd);
}

/* One problem, 16 x 8 x 32 bf16 -> bf16, whose descriptors each refusal case bends. */
struct refusal {
	cublasLtMatmulDesc_t op;
	cublasLtMatrixLayout_t la, lb, lc, ld;
	cublasLtMatmulPreference_t pref;
	void *a, *b, *d;
};

static void refusal_init(struct refusal *r)
{
	REQUIRE(cublasLtMatmulDescCreate(&r->op, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS);
	REQUIRE(cublasLtMatrixLayoutCreate(&r->la, CUDA_R_16BF, 16, 32, 16) == CUBLAS_STATUS_SUCCESS);
	REQUIRE(cublasLtMatrixLayoutCreate(&r->lb, CUDA_R_16BF, 32, 8, 32) == CUBLAS_STATUS_SUCCESS);
	REQUIRE(cublasLtMatrixLayoutCreate(&r->lc, CUDA_R_16BF, 16, 8, 16) == CUBLAS_STATUS_SUCCESS);
	REQUIRE(cublasLtMatrixLayoutCreate(&r->ld, CUDA_R_16BF, 16, 8, 16) == CUBLAS_STATUS_SUCCESS);
	REQUIRE(cublasLtMatmulPreferenceCreate(&r->pref) == CUBLAS_STATUS_SUCCESS);
	REQUIRE(cudaMalloc(&r->a, 16 * 32 * 2) == cudaSuccess);
	REQUIRE(cudaMalloc(&r->b, 32 * 8 * 2) == cudaSuccess);
	REQUIRE(cudaMalloc(&r->d, 16 * 8 * 2) == cudaSuccess);
	REQUIRE(cudaMemset(r->a, 0, 16 * 32 * 2) == cudaSuccess);
	REQUIRE(cudaMemset(r->b, 0, 32 * 8 * 2) == cudaSuccess);
}

static void refusal_finish(struct refusal *r)
{
	cublasLtMatmulPreferenceDestroy(r->pref);
	cublasLtMatrixLayoutDestroy(r->la), cublasLtMatrixLayoutDestroy(r->lb);
	cublasLtMatrixLayoutDestroy(r->lc), cublasLtMatrixLayoutDestroy(r->ld);
	cublasLtMatmulDescDestroy(r->op);
	cudaFree(r->a), cudaFree(r->b), cudaFree(r->d);
}

/* Both the heuristic (no algorithm) and the matmul give `want`. */
static void expect_status(struct refusal *r, cublasStatus_t want, int line)
{
	cublasLtMatmulHeuristicResult_t h;
	int found = -1;
	float alpha = 1, beta = 0;
	int before = test_failures;
	CHECK_INT_EQ(cublasLtMatmulAlgoGetHeuristic(lt, r->op, r->la, r->lb, r->lc, r->ld, r->pref, 1,
						    &h, &found),
		     want);
	CHECK_INT_EQ(found, want == CUBLAS_STATUS_SUCCESS ? 1 : 0);
	CHECK_INT_EQ(cublasLtMatmul(lt, r->op, &alpha, r->a, r->la, r->b, r->lb, &beta, r->d, r->lc,
				    r->d, r->ld, NULL, NULL, 0, 0),
		     want);
	if (test_failures != before)
		fprintf(stderr, "  in the refusal case at line %d\n", line);
}
#define EXPECT_STATUS(r, want) expect_status(r, want, __LINE__)

static void test_refusals(void)
{
	struct refusal r;

	refusal_init(&r);
	EXPECT_STATUS(&r, CUBLAS_STATUS_SUCCESS);
	uint32_t epi = CUBLASLT_EPILOGUE_GELU_AUX;
	CHECK_LT(cublasLtMatmulDescSetAttribute(r.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
	EXPECT_STATUS(&r, CUBLAS_STATUS_NOT_SUPPORTED);
	epi = CUBLASLT_EPILOGUE_DRELU_BGRAD;
	CHECK_LT(cublasLtMatmulDescSetAttribute(r.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
	EXPECT_STATUS(&r, CUBLAS_STATUS_NOT_SUPPORTED);
	/* A bias epilogue without a bias vector. */
	epi = CUBLASLT_EPILOGUE_BIAS;
	CHECK_LT(cublasLtMatmulDescSetAttribute(r.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
	{
		float alpha = 1, beta = 0;
		CHECK_INT_EQ(cublasLtMatmul(lt, r.op, &alpha, r.a, r.la, r.b, r.lb, &beta, r.d, r.lc, r.d,
					    r.ld, NULL, NULL, 0, 0),
			     CUBLAS_STATUS_INVALID_VALUE);
	}
	/* A bias type other than D's: fp32 for a bf16 D. */
	int32_t bias_type = CUDA_R_32F;
	CHECK_LT(cublasLtMatmulDescSetAttribute(r.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
						sizeof(bias_type)));
	EXPECT_STATUS(&r, CUBLAS_STATUS_NOT_SUPPORTED);
	refusal_finish(&r);

	/* Type combinations: fp32 inputs to a bf16 D; A and B of different types. */
	refusal_init(&r);
	uint32_t f32 = CUDA_R_32F;
	CHECK_LT(cublasLtMatrixLayoutSetAttribute(r.la, CUBLASLT_MATRIX_LAYOUT_TYPE, &f32, sizeof(f32)));
	EXPECT_STATUS(&r, CUBLAS_STATUS_NOT_SUPPORTED);
	CHECK_LT(cublasLtMatrixLayoutSetAttribute(r.lb, CUBLASLT_MATRIX_LAYOUT_TYPE, &f32, sizeof(f32)));
	EXPECT_STATUS(&r, CUBLAS_STATUS_NOT_SUPPORTED);
	refusal_finish(&r);

	/* Row-major order. */
	refusal_init(&r);
	int32_t row = CUBLASLT_ORDER_ROW;
	CHECK_LT(cublasLtMatrixLayoutSetAttribute(r.lb, CUBLASLT_MATRIX_LAYOUT_ORDER, &row, sizeof(row)));
	EXPECT_STATUS(&r, CUBLAS_STATUS_NOT_SUPPORTED);
	refusal_finish(&r);

	/* TF32 compute, a device pointer mode, an AUX pointer. */
	refusal_init(&r);
	int32_t compute = CUBLAS_COMPUTE_32F_FAST_TF32;
	CHECK_LT(cublasLtMatmulDescSetAttribute(r.op, CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, &compute,
						sizeof(compute)));
	EXPECT_STATUS(&r, CUBLAS_STATUS_NOT_SUPPORTED);
	compute = CUBLAS_COMPUTE_32F;
	CHECK_LT(cublasLtMatmulDescSetAttribute(r.op, CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, &compute,
						sizeof(compute)));
	int32_t mode = CUBLASLT_POINTER_MODE_DEVICE;
	CHECK_LT(cublasLtMatmulDescSetAttribute(r.op, CUBLASLT_MATMUL_DESC_POINTER_MODE, &mode,
						sizeof(mode)));
	EXPECT_STATUS(&r, CUBLAS_STATUS_NOT_SUPPORTED);
	void *aux = r.d;
	CHECK_INT_EQ(cublasLtMatmulDescSetAttribute(r.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
						    &aux, sizeof(aux)),
		     CUBLAS_STATUS_NOT_SUPPORTED);
	refusal_finish(&r);

	/* Inconsistent problems: k of A and B differ; batch counts differ; D overlapping A. */
	refusal_init(&r);
	uint64_t k = 31;
	CHECK_LT(cublasLtMatrixLayoutSetAttribute(r.lb, CUBLASLT_MATRIX_LAYOUT_ROWS, &k, sizeof(k)));
	EXPECT_STATUS(&r, CUBLAS_STATUS_INVALID_VALUE);
	k = 32;
	CHECK_LT(cublasLtMatrixLayoutSetAttribute(r.lb, CUBLASLT_MATRIX_LAYOUT_ROWS, &k, sizeof(k)));
	int32_t batch = 2;
	CHECK_LT(cublasLtMatrixLayoutSetAttribute(r.la, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch,
						  sizeof(batch)));
	EXPECT_STATUS(&r, CUBLAS_STATUS_INVALID_VALUE);
	batch = 1;
	CHECK_LT(cublasLtMatrixLayoutSetAttribute(r.la, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch,
						  sizeof(batch)));
	{
		float alpha = 1, beta = 0;
		CHECK_INT_EQ(cublasLtMatmul(lt, r.op, &alpha, r.a, r.la, r.b, r.lb, &beta, r.a, r.lc,
					    r.a, r.ld, NULL, NULL, 0, 0),
			     CUBLAS_STATUS_INVALID_VALUE);
	}
	/* Host memory where device memory is due, and an A whose layout runs past its allocation. */
	{
		float alpha = 1, beta = 0;
		void *host = malloc(16 * 32 * 2);
		REQUIRE(host);
		memset(host, 0, 16 * 32 * 2);
		CHECK_INT_EQ(cublasLtMatmul(lt, r.op, &alpha, host, r.la, r.b, r.lb, &beta, r.d, r.lc,
					    r.d, r.ld, NULL, NULL, 0, 0),
			     CUBLAS_STATUS_INVALID_VALUE);
		free(host);
		CHECK_INT_EQ(cublasLtMatmul(lt, r.op, &alpha, (char *)r.a + 2, r.la, r.b, r.lb, &beta,
					    r.d, r.lc, r.d, r.ld, NULL, NULL, 0, 0),
			     CUBLAS_STATUS_INVALID_VALUE);
		CHECK_LT(cublasLtMatmul(lt, r.op, &alpha, r.a, r.la, r.b, r.lb, &beta, r.d, r.lc, r.d,
					r.ld, NULL, NULL, 0, 0));
	}
	/* A leading dimension no buffer could span (its byte extent overflows 64 bits). */
	int64_t huge_ld = INT64_MAX / 2;
	CHECK_LT(cublasLtMatrixLayoutSetAttribute(r.la, CUBLASLT_MATRIX_LAYOUT_LD, &huge_ld,
						  sizeof(huge_ld)));
	EXPECT_STATUS(&r, CUBLAS_STATUS_INVALID_VALUE);
	refusal_finish(&r);
}
#endif

int main(void)
{
	int devices = 0;
	if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
		fprintf(stderr, "no CUDA device: skipping\n");
		return TEST_SKIP;
	}
	REQUIRE(cublasLtCreate(&lt) == CUBLAS_STATUS_SUCCESS);
	srand(20261125);
	test_attributes();
	test_bf16_rounding();
	test_every_combination();
	test_odd_shapes();
	test_graph_capture();
#ifdef HOLO_TEST_EMULATED
	test_shape_dependent_order();
	test_refusals();
#endif
	fprintf(stderr, "%d matmul cases\n", cases_run);
	CHECK_INT_EQ(cublasLtDestroy(lt), CUBLAS_STATUS_SUCCESS);
	return test_exit();
}
