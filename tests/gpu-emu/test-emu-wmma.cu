/* gpu-emu suite: WMMA fragments (m16n16k16, bf16 and half inputs, fp32 accumulators) against a
 * scalar reference, for every operand layout and both store layouts, with element-wise work on
 * the operands and the accumulator, under the run's fragment layout (HOLOD_GPU_EMU_WMMA_LAYOUT,
 * else drawn per run), the identity and three seeded random ones: the same bits under each.
 * The layouts themselves: each lane holds num_elements elements (8; 16 for half operands, every
 * element in two lanes), a random layout differs from the identity and between seeds, and a
 * kernel that assumes the identity layout (a row sum from x[]) computes wrong sums under the
 * random ones. A failing process that used a random layout prints the seed, which repeats it.
 * Runs in the order HOLOD_GPU_EMU_ORDER names.
 * Tolerance: 1e-5 relative + 1e-5 absolute (fp32 accumulation of 64 exact bf16/half products vs a
 * double reference); the row sums are of small integers, exact in fp32. */
#include "klaunch.h"
#include "test.h"
#include "test-spawn.h"

#include <mma.h>

#include <string>
#include <vector>

using namespace nvcuda;

TEST_DEFINE_GLOBALS;

enum { M = 32, N = 48, K = 64 };

/* C[M x N] = 0.5 * (-A[M x K] B[K x N]) + 1, one warp per 16x16 tile of C; A and B row-major or
 * column-major in memory (lda/ldb follow), C stored row- or column-major. */
template <typename T, typename LA, typename LB>
static __global__ void gemm_kernel(const T *a, const T *b, float *c, bool c_col)
{
	int warp = (threadIdx.x + blockDim.x * threadIdx.y) / 32;
	int tm = warp / (N / 16), tn = warp % (N / 16);
	bool a_col = std::is_same<LA, wmma::col_major>::value,
	     b_col = std::is_same<LB, wmma::col_major>::value;
	wmma::fragment<wmma::matrix_a, 16, 16, 16, T, LA> fa;
	wmma::fragment<wmma::matrix_b, 16, 16, 16, T, LB> fb;
	wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
	wmma::fill_fragment(acc, 0.0f);
	for (int k = 0; k < K; k += 16) {
		const T *pa = a_col ? a + (size_t)k * M + tm * 16 : a + (size_t)tm * 16 * K + k;
		const T *pb = b_col ? b + (size_t)tn * 16 * K + k : b + (size_t)k * N + tn * 16;
		wmma::load_matrix_sync(fa, pa, a_col ? M : K);
		wmma::load_matrix_sync(fb, pb, b_col ? K : N);
		/* element-wise on an operand: every copy of every element (half: two lanes each) */
		for (int i = 0; i < fa.num_elements; i++)
			fa.x[i] = -fa.x[i];
		wmma::mma_sync(acc, fa, fb, acc);
	}
	for (int i = 0; i < acc.num_elements; i++)
		acc.x[i] = acc.x[i] * 0.5f + 1.0f;
	if (c_col)
		wmma::store_matrix_sync(c + (size_t)tn * 16 * M + tm * 16, acc, M, wmma::mem_col_major);
	else
		wmma::store_matrix_sync(c + (size_t)tm * 16 * N + tn * 16, acc, N, wmma::mem_row_major);
}

/* An accumulator loaded from memory (C += A B with C's prior contents), row-major. */
template <typename T> static __global__ void accumulate_kernel(const T *a, const T *b, float *c)
{
	wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
	wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> fb;
	wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
	wmma::load_matrix_sync(acc, c, 16, wmma::mem_row_major);
	wmma::load_matrix_sync(fa, a, 16);
	wmma::load_matrix_sync(fb, b, 16);
	wmma::mma_sync(acc, fa, fb, acc);
	wmma::store_matrix_sync(c, acc, 16, wmma::mem_row_major);
}

/* Each lane's x[i] = lane * num_elements + i, stored: out[e] tells which (lane, i) holds element e
 * (what a kernel that fills x[] by its index writes). */
static __global__ void layout_probe_kernel(float *out)
{
	int lane = threadIdx.x % 32;
	wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
	for (int i = 0; i < acc.num_elements; i++)
		acc.x[i] = (float)(lane * acc.num_elements + i);
	wmma::store_matrix_sync(out, acc, 16, wmma::mem_row_major);
}

/* Loads a matrix_a fragment of the tile whose element (r, c) holds r * 16 + c and writes what lane
 * l's x[i] holds to out[l * num_elements + i]. */
template <typename T, typename L> static __global__ void operand_probe_kernel(const T *tile, float *out)
{
	int lane = threadIdx.x % 32;
	wmma::fragment<wmma::matrix_a, 16, 16, 16, T, L> fa;
	wmma::load_matrix_sync(fa, tile, 16);
	for (int i = 0; i < fa.num_elements; i++)
		out[lane * fa.num_elements + i] = (float)fa.x[i];
}

/* The row sums of A B, by a kernel that assumes a layout: that lane l holds row l / 2, columns
 * (l % 2) * 8 to + 7, in x[0..8) (the identity layout). Some GPU may lay the fragment out so;
 * nothing promises it. */
static __global__ void row_sum_kernel(const __nv_bfloat16 *a, const __nv_bfloat16 *b, float *sums)
{
	int lane = threadIdx.x % 32;
	wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
	wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> fb;
	wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
	wmma::fill_fragment(acc, 0.0f);
	wmma::load_matrix_sync(fa, a, 16);
	wmma::load_matrix_sync(fb, b, 16);
	wmma::mma_sync(acc, fa, fb, acc);
	float s = 0;
	for (int i = 0; i < acc.num_elements; i++)
		s += acc.x[i];
	s += __shfl_xor_sync(0xffffffffu, s, 1);
	if (lane % 2 == 0)
		sums[lane / 2] = s;
}

template <typename T> static float to_f(T v);
template <> float to_f(__nv_bfloat16 v)
{
	return __bfloat162float(v);
}
template <> float to_f(__half v)
{
	return __half2float(v);
}
template <typename T> static T from_f(float v);
template <> __nv_bfloat16 from_f(float v)
{
	return __float2bfloat16(v);
}
template <> __half from_f(float v)
{
	return __float2half(v);
}

/* Runs gemm_kernel and checks C; returns C's bits for comparing layouts. */
template <typename T, typename LA, typename LB>
static std::vector<float> run_gemm(bool c_col, const char *what)
{
	bool a_col = std::is_same<LA, wmma::col_major>::value,
	     b_col = std::is_same<LB, wmma::col_major>::value;
	T *ha = (T *)malloc(sizeof(T) * M * K), *hb = (T *)malloc(sizeof(T) * K * N);
	float *hc = (float *)malloc(sizeof(float) * M * N);
	/* logical A(i,k), B(k,j): small values that bf16 and half hold exactly */
	for (int i = 0; i < M; i++)
		for (int k = 0; k < K; k++)
			ha[a_col ? k * M + i : i * K + k] =
				from_f<T>((float)((i * 7 + k * 3) % 11 - 5) * 0.25f);
	for (int k = 0; k < K; k++)
		for (int j = 0; j < N; j++)
			hb[b_col ? j * K + k : k * N + j] =
				from_f<T>((float)((k * 5 + j * 2) % 9 - 4) * 0.5f);
	T *da, *db;
	float *dc;
	REQUIRE(cudaMalloc((void **)&da, sizeof(T) * M * K) == cudaSuccess);
	REQUIRE(cudaMalloc((void **)&db, sizeof(T) * K * N) == cudaSuccess);
	REQUIRE(cudaMalloc((void **)&dc, sizeof(float) * M * N) == cudaSuccess);
	cudaMemcpy(da, ha, sizeof(T) * M * K, cudaMemcpyHostToDevice);
	cudaMemcpy(db, hb, sizeof(T) * K * N, cudaMemcpyHostToDevice);
	/* 6 warps as a 32x6 block: the warp index comes from a 2D thread index. */
	klaunch(gemm_kernel<T, LA, LB>, dim3(1), dim3(32, (M / 16) * (N / 16)), 0, 0, (const T *)da,
		(const T *)db, dc, c_col);
	CHECK_INT_EQ(cudaGetLastError(), cudaSuccess);
	cudaMemcpy(hc, dc, sizeof(float) * M * N, cudaMemcpyDeviceToHost);
	int bad = 0;
	for (int i = 0; i < M; i++)
		for (int j = 0; j < N; j++) {
			double want = 0;
			for (int k = 0; k < K; k++)
				want += (double)to_f(ha[a_col ? k * M + i : i * K + k]) *
					to_f(hb[b_col ? j * K + k : k * N + j]);
			want = -want * 0.5 + 1.0;
			float got = hc[c_col ? j * M + i : i * N + j];
			if (!(fabs(got - want) <= 1e-5 + 1e-5 * fabs(want)))
				bad++;
		}
	if (bad) {
		fprintf(stderr, "%s: %d of %d elements wrong\n", what, bad, M * N);
		test_failures++;
	}
	std::vector<float> out(hc, hc + M * N);
	free(ha), free(hb), free(hc);
	cudaFree(da), cudaFree(db), cudaFree(dc);
	return out;
}

template <typename T> static void run_accumulate(void)
{
	T ha[256], hb[256];
	float hc[256], want[256];
	for (int i = 0; i < 256; i++) {
		ha[i] = from_f<T>((float)(i % 5) - 2.0f);
		hb[i] = from_f<T>((float)(i % 3) * 0.5f);
		hc[i] = (float)i;
	}
	for (int i = 0; i < 16; i++)
		for (int j = 0; j < 16; j++) {
			double s = hc[i * 16 + j];
			for (int k = 0; k < 16; k++)
				s += (double)to_f(ha[i * 16 + k]) * to_f(hb[k * 16 + j]);
			want[i * 16 + j] = (float)s;
		}
	T *da, *db;
	float *dc;
	REQUIRE(cudaMalloc((void **)&da, sizeof(ha)) == cudaSuccess);
	REQUIRE(cudaMalloc((void **)&db, sizeof(hb)) == cudaSuccess);
	REQUIRE(cudaMalloc((void **)&dc, sizeof(hc)) == cudaSuccess);
	cudaMemcpy(da, ha, sizeof(ha), cudaMemcpyHostToDevice);
	cudaMemcpy(db, hb, sizeof(hb), cudaMemcpyHostToDevice);
	cudaMemcpy(dc, hc, sizeof(hc), cudaMemcpyHostToDevice);
	klaunch(accumulate_kernel<T>, dim3(1), dim3(32), 0, 0, (const T *)da, (const T *)db, dc);
	CHECK_INT_EQ(cudaGetLastError(), cudaSuccess);
	cudaMemcpy(hc, dc, sizeof(hc), cudaMemcpyDeviceToHost);
	for (int i = 0; i < 256; i++)
		CHECK_NEAR(hc[i], want[i], 1e-5 + 1e-5 * fabs(want[i]));
	cudaFree(da), cudaFree(db), cudaFree(dc);
}

typedef wmma::row_major R;
typedef wmma::col_major C;

/* The GEMMs under the current layout; their outputs, concatenated. */
static std::vector<float> run_all(void)
{
	std::vector<float> all, one;
	one = run_gemm<__nv_bfloat16, R, R>(false, "bf16 A row B row C row");
	all.insert(all.end(), one.begin(), one.end());
	one = run_gemm<__nv_bfloat16, R, C>(true, "bf16 A row B col C col");
	all.insert(all.end(), one.begin(), one.end());
	one = run_gemm<__nv_bfloat16, C, R>(false, "bf16 A col B row C row");
	all.insert(all.end(), one.begin(), one.end());
	one = run_gemm<__nv_bfloat16, C, C>(true, "bf16 A col B col C col");
	all.insert(all.end(), one.begin(), one.end());
	one = run_gemm<__half, R, R>(true, "half A row B row C col");
	all.insert(all.end(), one.begin(), one.end());
	one = run_gemm<__half, C, C>(false, "half A col B col C row");
	all.insert(all.end(), one.begin(), one.end());
	run_accumulate<__nv_bfloat16>();
	run_accumulate<__half>();
	return all;
}

/* Which (lane, i) holds each element of an accumulator, under the current layout. */
static std::vector<float> probe_accumulator(void)
{
	float *d;
	std::vector<float> h(256);
	REQUIRE(cudaMalloc((void **)&d, 256 * sizeof(float)) == cudaSuccess);
	klaunch(layout_probe_kernel, dim3(1), dim3(32), 0, 0, d);
	CHECK_INT_EQ(cudaGetLastError(), cudaSuccess);
	cudaMemcpy(h.data(), d, 256 * sizeof(float), cudaMemcpyDeviceToHost);
	cudaFree(d);
	return h;
}

/* What each (lane, i) of a matrix_a fragment holds, the tile's element (r, c) being r * 16 + c. */
template <typename T, typename L> static std::vector<float> probe_operand(void)
{
	enum { PER_LANE = wmma::fragment<wmma::matrix_a, 16, 16, 16, T, L>::num_elements };
	T tile[256];
	bool col = std::is_same<L, C>::value;
	for (int r = 0; r < 16; r++)
		for (int c = 0; c < 16; c++)
			tile[col ? c * 16 + r : r * 16 + c] = from_f<T>((float)(r * 16 + c));
	T *dt;
	float *d;
	std::vector<float> h(32 * PER_LANE);
	REQUIRE(cudaMalloc((void **)&dt, sizeof(tile)) == cudaSuccess);
	REQUIRE(cudaMalloc((void **)&d, h.size() * sizeof(float)) == cudaSuccess);
	cudaMemcpy(dt, tile, sizeof(tile), cudaMemcpyHostToDevice);
	klaunch(operand_probe_kernel<T, L>, dim3(1), dim3(32), 0, 0, (const T *)dt, d);
	CHECK_INT_EQ(cudaGetLastError(), cudaSuccess);
	cudaMemcpy(h.data(), d, h.size() * sizeof(float), cudaMemcpyDeviceToHost);
	cudaFree(dt), cudaFree(d);
	return h;
}

/* Every element 0..255 appears `copies` times in v. */
static bool covers(const std::vector<float> &v, int copies)
{
	int seen[256] = {0};
	for (float f : v) {
		if (!(f >= 0 && f < 256 && f == (float)(int)f))
			return false;
		seen[(int)f]++;
	}
	for (int e = 0; e < 256; e++)
		if (seen[e] != copies)
			return false;
	return true;
}

static bool is_identity(const std::vector<float> &v)
{
	for (size_t s = 0; s < v.size(); s++)
		if (v[s] != (float)(s % 256))
			return false;
	return true;
}

/* The layout-assuming row sums against the CPU's: how many of the 16 rows are wrong. */
static int row_sums_wrong(void)
{
	__nv_bfloat16 ha[256], hb[256];
	double want[16] = {0};
	for (int i = 0; i < 256; i++) {
		ha[i] = __float2bfloat16((float)((i * 7) % 11 - 5));
		hb[i] = __float2bfloat16((float)((i * 5) % 9 - 4));
	}
	for (int r = 0; r < 16; r++)
		for (int c = 0; c < 16; c++)
			for (int k = 0; k < 16; k++)
				want[r] += (double)__bfloat162float(ha[r * 16 + k]) *
					   __bfloat162float(hb[k * 16 + c]);
	__nv_bfloat16 *da, *db;
	float *ds, got[16];
	REQUIRE(cudaMalloc((void **)&da, sizeof(ha)) == cudaSuccess);
	REQUIRE(cudaMalloc((void **)&db, sizeof(hb)) == cudaSuccess);
	REQUIRE(cudaMalloc((void **)&ds, sizeof(got)) == cudaSuccess);
	cudaMemcpy(da, ha, sizeof(ha), cudaMemcpyHostToDevice);
	cudaMemcpy(db, hb, sizeof(hb), cudaMemcpyHostToDevice);
	klaunch(row_sum_kernel, dim3(1), dim3(32), 0, 0, (const __nv_bfloat16 *)da, (const __nv_bfloat16 *)db,
		ds);
	CHECK_INT_EQ(cudaGetLastError(), cudaSuccess);
	cudaMemcpy(got, ds, sizeof(got), cudaMemcpyDeviceToHost);
	cudaFree(da), cudaFree(db), cudaFree(ds);
	int wrong = 0;
	for (int r = 0; r < 16; r++)
		wrong += got[r] != (float)want[r];
	return wrong;
}

static void test_layouts(void)
{
	/* every lane holds as many elements as NVIDIA's mma.h gives it, covering the tile */
	CHECK_INT_EQ((int)(wmma::fragment<wmma::accumulator, 16, 16, 16, float>::num_elements), 8);
	CHECK_INT_EQ((int)(wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, R>::num_elements), 8);
	CHECK_INT_EQ((int)(wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, C>::num_elements), 16);
	gpu_emu_set_wmma_layout(GPU_EMU_WMMA_IDENTITY, 0);
	std::vector<float> ident = probe_accumulator();
	CHECK(is_identity(ident));
	CHECK(is_identity(probe_operand<__nv_bfloat16, R>()));
	CHECK(is_identity(probe_operand<__half, R>()));
	CHECK_INT_EQ(row_sums_wrong(), 0); /* the assumed layout */
	std::vector<float> seen[3];
	for (unsigned long long seed = 1; seed <= 3; seed++) {
		gpu_emu_set_wmma_layout(GPU_EMU_WMMA_RANDOM, seed);
		std::vector<float> acc = probe_accumulator(), a_bf16 = probe_operand<__nv_bfloat16, C>(),
				   a_half = probe_operand<__half, R>();
		CHECK(covers(acc, 1));
		CHECK(covers(a_bf16, 1));
		CHECK(covers(a_half, 2)); /* each element in two lanes */
		CHECK(!is_identity(acc));
		CHECK(!is_identity(a_bf16));
		CHECK(!is_identity(a_half));
		/* the kernel that assumed the identity layout now disagrees with the CPU */
		int wrong = row_sums_wrong();
		if (wrong < 8) {
			fprintf(stderr,
				"random:%llu: the layout-assuming row sums are wrong in %d of 16 rows only\n",
				seed, wrong);
			test_failures++;
		}
		seen[seed - 1] = acc;
	}
	CHECK(seen[0] != seen[1]);
	CHECK(seen[1] != seen[2]);
	/* the same seed, the same layout */
	gpu_emu_set_wmma_layout(GPU_EMU_WMMA_RANDOM, 2);
	CHECK(probe_accumulator() == seen[1]);
}

/* ---- the failure report: a child process probes the layout and exits with `code` -------------- */

static int child(int code)
{
	std::vector<float> v = probe_accumulator();
	printf("probe:");
	for (float f : v)
		printf(" %d", (int)f);
	printf("\n");
	fflush(stdout);
	return code;
}

/* Runs this program as child(code) with HOLOD_GPU_EMU_ORDER and HOLOD_GPU_EMU_WMMA_LAYOUT as given
 * (null: unset); returns what it printed on stdout and stderr. */
static std::string run_child(int code, const char *order, const char *layout)
{
	std::vector<std::string> env;
	for (char **e = environ; *e; e++)
		if (strncmp(*e, "HOLOD_GPU_EMU_ORDER=", 20) && strncmp(*e, "HOLOD_GPU_EMU_WMMA_LAYOUT=", 26))
			env.push_back(*e);
	if (order)
		env.push_back(std::string("HOLOD_GPU_EMU_ORDER=") + order);
	if (layout)
		env.push_back(std::string("HOLOD_GPU_EMU_WMMA_LAYOUT=") + layout);
	std::vector<char *> envp;
	for (std::string &e : env)
		envp.push_back(&e[0]);
	envp.push_back(nullptr);
	std::string out;
	int status = test_spawn_self(code ? "child-fail" : "child-pass", envp.data(), &out);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != code) {
		fprintf(stderr, "the child did not exit with %d (status 0x%x); it said:\n%s\n", code, status,
			out.c_str());
		test_failures++;
	}
	return out;
}

/* The line "probe: ..." of a child's output. */
static std::string probe_of(const std::string &out)
{
	size_t a = out.find("probe:");
	return a == std::string::npos ? "" : out.substr(a, out.find('\n', a) - a);
}

/* The seed the failure report names ("" when there is no report). */
static std::string seed_of(const std::string &out)
{
	const char *key = "HOLOD_GPU_EMU_WMMA_LAYOUT=random:";
	size_t a = out.find(key);
	if (a == std::string::npos)
		return "";
	a += strlen(key);
	return out.substr(a, out.find_first_not_of("0123456789", a) - a);
}

static void expect_same(const std::string &got, const std::string &want, const char *what)
{
	if (got != want) {
		fprintf(stderr, "%s: \"%s\" is not \"%s\"\n", what, got.c_str(), want.c_str());
		test_failures++;
	}
}

static void test_failure_report(void)
{
	/* a failing run names its seed, and the seed repeats its layout */
	std::string first = run_child(1, "forward", nullptr), second = run_child(1, "forward", nullptr);
	std::string seed = seed_of(first);
	CHECK(!seed.empty());
	CHECK(!probe_of(first).empty());
	CHECK(seed_of(second) != seed); /* a seed of each run's own */
	std::string again = run_child(1, "forward", ("random:" + seed).c_str());
	expect_same(probe_of(again), probe_of(first), "the layout of the reported seed");
	expect_same(seed_of(again), seed, "the seed reported again");
	/* a random thread order's seed is the layout's too */
	expect_same(seed_of(run_child(1, "random:7", nullptr)), "7",
		    "the seed under HOLOD_GPU_EMU_ORDER=random:7");
	expect_same(probe_of(run_child(1, "random:7", nullptr)), probe_of(run_child(1, "forward", "random:7")),
		    "the layout under HOLOD_GPU_EMU_ORDER=random:7");
	/* a run that passes says nothing; neither does one with the identity layout */
	std::string quiet = run_child(0, "forward", nullptr);
	CHECK(!probe_of(quiet).empty());
	expect_same(seed_of(quiet), "", "a passing run's report");
	expect_same(seed_of(run_child(1, "forward", "identity")), "", "the identity layout's report");
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "child-fail"))
		return child(1);
	if (argc == 2 && !strcmp(argv[1], "child-pass"))
		return child(0);
	/* the run's own layout, then the identity and three random ones: the same bits under each */
	std::vector<float> first = run_all();
	gpu_emu_set_wmma_layout(GPU_EMU_WMMA_IDENTITY, 0);
	CHECK(run_all() == first);
	for (unsigned long long seed = 1; seed <= 3; seed++) {
		gpu_emu_set_wmma_layout(GPU_EMU_WMMA_RANDOM, seed);
		CHECK(run_all() == first);
	}
	test_layouts();
	test_failure_report();
	return test_exit();
}
