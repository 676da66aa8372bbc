/* The Nemotron-H language model on the CPU (model.md 2): embeddings, pre-norm blocks of Mamba-2,
 * attention (GQA, no positions) and ReLU^2 MLP layers, final norm, lm_head.
 *
 * Activations and the residual stream are fp32; weights are read in their stored dtype
 * (cpu_matmul), from copies in 2 MiB pages of the map's bf16/f16 matrices (hold_matrices) or
 * as the model has them, or quantized (lm.h). Prefill runs the Mamba SSM in the chunked SSD form, decode
 * (one position) in the recurrent form; both equal the per-token scan of model.md 2.5 up to fp32
 * rounding (tests/lm). The dt clamp uses the config's time_step_limit (dt_min, dt_max), never
 * time_step_min (model.md 6.1).
 *
 * DESIGN (threads): a forward call runs on the caller's thread and hands data-parallel jobs to
 * the process-wide pool (cpu.h): matmul row blocks, SSM heads (each head's state is touched by
 * one task only), attention heads (each task writes its own head's output columns).
 */
#include "lm.h"

#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common.h"
#include "cpu.h"
#include "cpu_rows.h"
#include "cpu_ssd.h"
#include "cpu_ssm.h"
#include "loader.h"
#include "quantized.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

/* ---- SSM ---------------------------------------------------------------------------------- */

static size_t pad16(size_t n)
{
	return (n + 15) & ~(size_t)15;
}

/* Per-thread scratch of the chunked scan, in floats: cum[chunk], M[chunk][chunk],
 * xt[P][chunk], the GEMM packing buffer, then a head's state [P][N] widened to fp32 when it is
 * stored in bf16 (64-byte aligned: every region is a multiple of 16 floats and the scratch
 * itself is aligned). */
static size_t ssm_state_at(const struct lm_dims *dm)
{
	size_t c = (size_t)dm->chunk;
	return pad16(c) + pad16(c * c) + pad16((size_t)dm->P * c) +
	       pad16(cpu_gemm_pack_floats(MAX(dm->N, dm->chunk)));
}

static size_t ssm_scratch_floats(const struct lm_dims *dm)
{
	return ssm_state_at(dm) + pad16((size_t)dm->P * dm->N);
}

size_t lm_ssm_scratch_bytes(const struct lm_dims *dm)
{
	return ssm_scratch_floats(dm) * sizeof(float);
}

size_t lm_ssm_cb_floats(const struct lm_dims *dm, int T)
{
	size_t nchunks = ((size_t)T + (size_t)dm->chunk - 1) / (size_t)dm->chunk;
	return (size_t)dm->G * nchunks * (size_t)dm->chunk * (size_t)dm->chunk;
}

struct ssm_job {
	const struct lm_dims *dm;
	int T, nchunks;
	const float *xbc;
	size_t ldx;
	const float *dt, *a, *dskip;
	float *state, *y, *cb;
	uint16_t *state16; /* the state when it is stored in bf16 (state NULL then) */
};

static float *ssm_pack(const struct lm_dims *dm, float *scratch)
{
	size_t c = (size_t)dm->chunk;
	return scratch + pad16(c) + pad16(c * c) + pad16((size_t)dm->P * c);
}

/* cb[g][c][l][s] = C[t0+l, g] . B[t0+s, g] within chunk c (the whole L x L block; only s <= l
 * is used) */
static void ssm_cb_task(void *ctx, int task, int thread)
{
	const struct ssm_job *j = ctx;
	const struct lm_dims *dm = j->dm;
	int g = task / j->nchunks, c = task % j->nchunks;
	int t0 = c * dm->chunk, L = MIN(dm->chunk, j->T - t0);
	float *cb = j->cb + (size_t)task * (size_t)dm->chunk * (size_t)dm->chunk;
	const float *B = j->xbc + (size_t)t0 * j->ldx + dm->d_in + g * dm->N;
	const float *C = B + (size_t)dm->G * dm->N;
	cpu_gemm_f32(C, j->ldx, B, j->ldx, true, L, dm->N, L, cb, (size_t)dm->chunk, false,
		     ssm_pack(dm, cpu_scratch(thread)));
}

/* One head over all chunks (model.md 2.5 step 5 in the SSD form): per chunk of L positions,
 *   Y = diag(exp(cum)) C S^T  +  (CB^T o decay o dt) X  +  D X
 *   S = exp(cum[L-1]) S + (X o coef)^T B,   coef[s] = exp(cum[L-1] - cum[s]) dt[s]
 * with S the [P][N] state carried in, as four small GEMMs. */
static void ssm_chunk_head_task(void *ctx, int h, int thread)
{
	const struct ssm_job *j = ctx;
	const struct lm_dims *dm = j->dm;
	const int P = dm->P, N = dm->N, H = dm->H, chunk = dm->chunk;
	int g = h / (H / dm->G);
	float *scratch = cpu_scratch(thread);
	float *S = j->state16 ? scratch + ssm_state_at(dm) : j->state + (size_t)h * P * N;
	uint16_t *S16 = j->state16 ? j->state16 + (size_t)h * P * N : NULL;
	if (S16)
		for (size_t i = 0; i < (size_t)P * N; i++)
			S[i] = bf16_to_f32(S16[i]);
	float *cum = scratch, *M = cum + pad16((size_t)chunk);
	float *xt = M + pad16((size_t)chunk * chunk), *pack = ssm_pack(dm, scratch);
	const float A = j->a[h], Dk = j->dskip[h];

	for (int c = 0; c < j->nchunks; c++) {
		int t0 = c * chunk, L = MIN(chunk, j->T - t0);
		const float *cb = j->cb + ((size_t)g * j->nchunks + c) * (size_t)chunk * chunk;
		const float *X = j->xbc + (size_t)t0 * j->ldx + h * P;
		const float *B = j->xbc + (size_t)t0 * j->ldx + dm->d_in + g * N;
		const float *C = B + (size_t)dm->G * N;
		float *Y = j->y + (size_t)t0 * dm->d_in + h * P;
		const float *dt = j->dt + (size_t)t0 * H + h;
		float acc = 0;
		for (int l = 0; l < L; l++) {
			acc += dt[(size_t)l * H] * A;
			cum[l] = acc;
		}
		/* contribution of the state carried into the chunk */
		cpu_gemm_f32(C, j->ldx, S, (size_t)N, true, L, N, P, Y, dm->d_in, false, pack);
		for (int l = 0; l < L; l++) {
			float el = expf(cum[l]), *yl = Y + (size_t)l * dm->d_in;
			for (int p = 0; p < P; p++)
				yl[p] *= el;
		}
		/* intra-chunk (diagonal block): M[l][s] = CB[l][s] exp(cum[l] - cum[s]) dt[s], s <= l */
		for (int l = 0; l < L; l++) {
			float *m = M + (size_t)l * chunk;
			for (int s = 0; s <= l; s++)
				m[s] = cb[(size_t)l * chunk + s] * expf(cum[l] - cum[s]) * dt[(size_t)s * H];
			for (int s = l + 1; s < L; s++)
				m[s] = 0.0f;
		}
		cpu_gemm_f32(M, (size_t)chunk, X, j->ldx, false, L, L, P, Y, dm->d_in, true, pack);
		for (int l = 0; l < L; l++)
			cpu_axpy(Y + (size_t)l * dm->d_in, Dk, X + (size_t)l * j->ldx, P);
		/* carry the state to the end of the chunk */
		float eL = expf(cum[L - 1]);
		for (int s = 0; s < L; s++) {
			float coef = expf(cum[L - 1] - cum[s]) * dt[(size_t)s * H];
			const float *xs = X + (size_t)s * j->ldx;
			for (int p = 0; p < P; p++)
				xt[(size_t)p * chunk + s] = coef * xs[p];
		}
		for (size_t i = 0; i < (size_t)P * N; i++)
			S[i] *= eL;
		cpu_gemm_f32(xt, (size_t)chunk, B, j->ldx, false, P, L, N, S, (size_t)N, true, pack);
	}
	if (S16)
		cpu_f32_to_bf16(S, S16, (size_t)P * N);
}

/* The state rows SSM_STATE_AHEAD bytes past the row the step is at are asked for as it reads
 * each one (cpu_prefetch_ahead; at the first position only: a head's state stays in cache for
 * the next ones), beside the hardware's prefetchers: with the heads in one stretch a thread, 8
 * rows of 128 fp32 ahead took the step's state read from ~4.5-5.3 to ~4.0-5.0 ms per 8 steps
 * (docs/benchmarks.md, "the SSM step's state read in one stretch a thread"). Past a stretch's end
 * it asks for the next one's rows (another thread's), or for at most SSM_STATE_AHEAD bytes past
 * the state. */
#define SSM_STATE_AHEAD 4096

/* A bf16 state is updated row by row by cpu_ssm_row_bf16(): widened, updated as an fp32 state
 * is, stored rounded; y from the unrounded row. */
static void ssm_scan_head_task(void *ctx, int h, int thread)
{
	(void)thread;
	const struct ssm_job *j = ctx;
	const struct lm_dims *dm = j->dm;
	const int P = dm->P, N = dm->N, H = dm->H;
	int g = h / (H / dm->G);
	float *S = j->state ? j->state + (size_t)h * P * N : NULL;
	uint16_t *S16 = j->state16 ? j->state16 + (size_t)h * P * N : NULL;
	const float A = j->a[h], Dk = j->dskip[h];

	for (int t = 0; t < j->T; t++) {
		const float *row = j->xbc + (size_t)t * j->ldx;
		const float *x = row + h * P, *B = row + dm->d_in + g * N;
		const float *C = row + dm->d_in + dm->G * N + g * N;
		float *y = j->y + (size_t)t * dm->d_in + h * P;
		float dt = j->dt[(size_t)t * H + h], dA = expf(dt * A);
		for (int p = 0; p < P; p++) {
			if (S16) {
				if (t == 0)
					cpu_prefetch_ahead(S16 + (size_t)p * N, (size_t)N * sizeof(uint16_t),
							   SSM_STATE_AHEAD);
				y[p] = cpu_ssm_row_bf16(S16 + (size_t)p * N, dA, dt * x[p], B, C, N) +
				       Dk * x[p];
				continue;
			}
			float *Sp = S + (size_t)p * N;
			if (t == 0)
				cpu_prefetch_ahead(Sp, (size_t)N * sizeof(float), SSM_STATE_AHEAD);
			cpu_axpby(Sp, dA, dt * x[p], B, N);
			y[p] = cpu_dot(Sp, C, N) + Dk * x[p];
		}
	}
}

static void ssm_chunked(const struct lm_dims *dm, int T, const float *xbc, size_t ldx, const float *dt,
			const float *a, const float *dskip, float *state, uint16_t *state16, float *y,
			float *cb_work)
{
	struct ssm_job j = {
		.dm = dm,
		.T = T,
		.nchunks = (T + dm->chunk - 1) / dm->chunk,
		.xbc = xbc,
		.ldx = ldx,
		.dt = dt,
		.a = a,
		.dskip = dskip,
		.state = state,
		.state16 = state16,
		.y = y,
		.cb = cb_work,
	};
	cpu_parallel_for_work(dm->G * j.nchunks, ssm_cb_task, &j, (double)dm->G * T * dm->chunk * dm->N / 2);
	cpu_parallel_for_work(dm->H, ssm_chunk_head_task, &j,
			      (double)dm->H * T * dm->P * (2.0 * dm->N + dm->chunk / 2));
}

static void ssm_scan(const struct lm_dims *dm, int T, const float *xbc, size_t ldx, const float *dt,
		     const float *a, const float *dskip, float *state, uint16_t *state16, float *y)
{
	struct ssm_job j = {
		.dm = dm,
		.T = T,
		.xbc = xbc,
		.ldx = ldx,
		.dt = dt,
		.a = a,
		.dskip = dskip,
		.state = state,
		.state16 = state16,
		.y = y,
	};
	cpu_parallel_for_work(dm->H, ssm_scan_head_task, &j, 2.0 * dm->H * T * dm->P * dm->N);
}

void lm_ssm_chunked(const struct lm_dims *dm, int T, const float *xbc, size_t ldx, const float *dt,
		    const float *a, const float *dskip, float *state, float *y, float *cb_work)
{
	ssm_chunked(dm, T, xbc, ldx, dt, a, dskip, state, NULL, y, cb_work);
}

void lm_ssm_scan(const struct lm_dims *dm, int T, const float *xbc, size_t ldx, const float *dt,
		 const float *a, const float *dskip, float *state, float *y)
{
	ssm_scan(dm, T, xbc, ldx, dt, a, dskip, state, NULL, y);
}

void lm_ssm_chunked_s16(const struct lm_dims *dm, int T, const float *xbc, size_t ldx, const float *dt,
			const float *a, const float *dskip, uint16_t *state, float *y, float *cb_work)
{
	ssm_chunked(dm, T, xbc, ldx, dt, a, dskip, NULL, state, y, cb_work);
}

void lm_ssm_scan_s16(const struct lm_dims *dm, int T, const float *xbc, size_t ldx, const float *dt,
		     const float *a, const float *dskip, uint16_t *state, float *y)
{
	ssm_scan(dm, T, xbc, ldx, dt, a, dskip, NULL, state, y);
}

/* ---- scratch layout ----------------------------------------------------------------------- */

struct work {
	float *h, *xn; /* residual [M][d], normed [M][d] */
	float *mix;    /* per-layer activations, see the layer functions */
	/* bf16 precision where a product runs on oneDNN, else NULL: the normed rows rounded to bf16,
	 * dense, the input oneDNN's products read in place ([M][d] after the pre-norm, [M][d_in]
	 * after the Mamba mixer's gated norm) */
	uint16_t *xb;
};

static float *f32_copy(const struct tensor *t, size_t n)
{
	float *p = malloc(MAX(n, 1) * sizeof(float));
	if (p)
		cpu_tensor_to_f32(t, 0, n, p);
	return p;
}

/* Matrix i of a layer as the forward reads it: its copy in 2 MiB pages (lm_prepared_layer.held),
 * else the model's tensor w. */
static const struct tensor *mat(const struct lm_prepared_layer *P, int i, const struct tensor *w)
{
	return P->held[i].data ? &P->held[i] : w;
}

/* The lm_head as the forward reads it (lm_prepared.head_held, else the model's). */
static const struct tensor *head_mat(const struct lm_prepared *p, const struct engine_model *m)
{
	return p->head_held.data ? &p->head_held : &m->lm_head;
}

/* oneDNN's weights made from the matrices the forward reads (a held copy, where there is one):
 * the plain layout reads that copy in place. */
static int prepare_gemms(const struct engine_model *m, enum cpu_dnnl_layout layout, struct lm_prepared *p)
{
	/* a quantized lm_head (lm_prepared.head_q) runs on its records */
	int r = p->head_q.data ? 0 : cpu_dnnl_weight_create(head_mat(p, m), CPU_DNNL_PLAIN, &p->lm_head);
	if (r < 0)
		return r;
	p->gemm_bytes += p->lm_head ? cpu_dnnl_weight_bytes(p->lm_head) : 0;
	if (p->quant)
		return 0; /* the layers' matrices run on their quantized copies */
	for (int l = 0; l < p->n_layers; l++) {
		const struct tensor *mats[4];
		int n = lm_layer_matrices(&m->layers[l], mats);
		for (int i = 0; i < n; i++) {
			struct cpu_dnnl_weight **w = &p->layers[l].gemm[i];
			if ((r = cpu_dnnl_weight_create(mat(&p->layers[l], i, mats[i]), layout, w)) < 0)
				return r;
			p->gemm_bytes += cpu_dnnl_weight_bytes(*w);
		}
	}
	return 0;
}

/* ---- quantizing the matrices (lm_prepare_opts.quant) ------------------------------------- */

#define QUANT_TASK_ROWS 64

struct quantize_job {
	const struct tensor *w;
	struct quant_tensor *q;
	const struct lm_quant_hooks *hooks; /* NULL: the reference quantizers */
	_Atomic int err;
	_Atomic int64_t bad_row;
};

static void quantize_task(void *ctx, int task, int thread)
{
	(void)thread;
	struct quantize_job *j = ctx;
	const struct tensor *w = j->w;
	const int64_t in = w->shape[1], r0 = (int64_t)task * QUANT_TASK_ROWS;
	const int64_t r1 = MIN(r0 + QUANT_TASK_ROWS, w->shape[0]);
	enum quant_format f = j->q->format;
	const struct lm_quant_hooks *qh = j->hooks && j->hooks->quantize_row ? j->hooks : NULL;
	float *row = NULL;
	if ((w->dtype != TENSOR_BF16 || qh) && !(row = malloc((size_t)in * sizeof(float)))) {
		atomic_store(&j->err, -ENOMEM);
		return;
	}
	for (int64_t r = r0; r < r1; r++) {
		void *dst = (char *)j->q->data + (size_t)r * j->q->row_bytes;
		int e;
		if (w->dtype == TENSOR_BF16 && !qh) {
			e = quant_row_from_bf16(f, (const uint16_t *)w->data + (size_t)(r * in), in, dst);
		} else {
			cpu_tensor_to_f32(w, (size_t)(r * in), (size_t)in, row);
			e = qh ? qh->quantize_row(qh->arg, f, row, in, dst) :
				 quant_row_from_f32(f, row, in, dst);
		}
		if (e < 0) {
			int zero = 0;
			if (atomic_compare_exchange_strong(&j->err, &zero, e))
				atomic_store(&j->bad_row, r);
			break;
		}
	}
	free(row);
}

/* Quantizes w into q (allocated here) with the reference quantizers, or hooks->quantize_row.
 * The map's pages of w are then only read again by another backend of the model: they are
 * marked cold (MADV_COLD) so the kernel reclaims them first. */
static int quantize_matrix(const struct tensor *w, enum quant_format f, const struct lm_quant_hooks *hooks,
			   struct quant_tensor *q, int64_t *bad_row)
{
	size_t bytes;
	int r = quant_tensor_bytes(f, w->shape[0], w->shape[1], &bytes);
	if (r < 0)
		return r;
	void *data = alloc_huge(bytes); /* read at the bandwidth every token: huge pages */
	if (!data)
		return -ENOMEM;
	size_t row_bytes;
	quant_row_bytes(f, w->shape[1], &row_bytes);
	*q = (struct quant_tensor){.format = f,
				   .rows = w->shape[0],
				   .cols = w->shape[1],
				   .row_bytes = row_bytes,
				   .data = data};
	struct quantize_job j = {.w = w, .q = q, .hooks = hooks};
	atomic_init(&j.err, 0);
	atomic_init(&j.bad_row, -1);
	int tasks = (int)((w->shape[0] + QUANT_TASK_ROWS - 1) / QUANT_TASK_ROWS);
	cpu_parallel_for(tasks, quantize_task, &j);
	r = atomic_load(&j.err);
	*bad_row = atomic_load(&j.bad_row);
#ifdef MADV_COLD
	long page = sysconf(_SC_PAGESIZE);
	uintptr_t a = ((uintptr_t)w->data + (uintptr_t)page - 1) & ~((uintptr_t)page - 1);
	uintptr_t e = ((uintptr_t)w->data + w->nbytes) & ~((uintptr_t)page - 1);
	if (r == 0 && page > 0 && e > a)
		(void)madvise((void *)a, e - a, MADV_COLD);
#endif
	return r;
}

static const char *const matrix_names[3][4] = {
	{"mixer.in_proj", "mixer.out_proj"},
	{"mixer.q_proj", "mixer.k_proj", "mixer.v_proj", "mixer.o_proj"},
	{"mixer.up_proj", "mixer.down_proj"},
};

/* Once a layer's matrix is quantized at load its source pages are never read by this backend
 * again: the whole pages inside it are dropped from the process as it goes (MADV_DONTNEED; the
 * map's pages are clean file pages, read again from the file should another backend of the
 * model need them), so the load never holds much more than one matrix's source beside the
 * records, and the resident memory after it is what weight_bytes says. Only for the files'
 * maps: memory a test or a random model built would be zeroed. */
/* The whole pages inside [p, p + n) dropped from the process (MADV_DONTNEED). */
static void release_pages(const void *p, size_t n)
{
	long page = sysconf(_SC_PAGESIZE);
	if (page <= 0)
		return;
	uintptr_t a = ((uintptr_t)p + (uintptr_t)page - 1) & ~((uintptr_t)page - 1);
	uintptr_t e = ((uintptr_t)p + n) & ~((uintptr_t)page - 1);
	if (e > a)
		(void)madvise((void *)a, e - a, MADV_DONTNEED);
}

static void release_source(const struct engine_model *m, const struct tensor *w)
{
	if (m->files && model_files_mapped(m->files, w->data, w->nbytes))
		release_pages(w->data, w->nbytes);
}

/* ---- the matrices read as stored, held in 2 MiB pages (lm_prepared.head_held) ---------------- */

/* bytes one pool task copies (and then drops from the map): a few MB, so both cores share even
 * a small model's matrices and the load holds little of a matrix's source beside its copy (the
 * ~0.70B model's lm_head is 268 MB, a 12B's 1.34 GB) */
#define HOLD_TASK_BYTES ((size_t)4 << 20)

struct hold_job {
	const char *src;
	char *dst;
	size_t bytes;
};

static void hold_task(void *ctx, int task, int thread)
{
	(void)thread;
	const struct hold_job *j = ctx;
	const size_t at = (size_t)task * HOLD_TASK_BYTES, n = MIN(HOLD_TASK_BYTES, j->bytes - at);
	memcpy(j->dst + at, j->src + at, n);
	/* the map's pages this task alone read (those across its edges go with the matrix's) */
	release_pages(j->src + at, n);
}

/* w copied into held (2 MiB pages, owned), its source pages released as they are copied, where
 * w is a bf16 or f16 matrix in the files' map: 1; 0 where w is read as it is (another dtype, or
 * memory of its own: a random model's, a test's, a widened FP8 layer); -ENOMEM where its copy
 * cannot be allocated (w stays in the map). */
static int hold_matrix(const struct engine_model *m, const struct tensor *w, struct tensor *held)
{
	if ((w->dtype != TENSOR_BF16 && w->dtype != TENSOR_F16) || !w->data || !w->nbytes || !m->files ||
	    !model_files_mapped(m->files, w->data, w->nbytes))
		return 0;
	char *data = alloc_huge(w->nbytes);
	if (!data)
		return -ENOMEM;
	struct hold_job j = {.src = w->data, .dst = data, .bytes = w->nbytes};
	cpu_parallel_for_work((int)((w->nbytes + HOLD_TASK_BYTES - 1) / HOLD_TASK_BYTES), hold_task, &j,
			      (double)w->nbytes);
	*held = *w;
	held->data = data;
	release_source(m, w);
	return 1;
}

static void hold_one(const struct engine_model *m, const struct tensor *w, struct tensor *held,
		     struct lm_prepared *p)
{
	int r = hold_matrix(m, w, held);
	if (r < 0)
		p->held_failed++;
	if (r <= 0)
		return;
	p->held_bytes += alloc_huge_bytes(held->nbytes); /* whole 2 MiB pages */
	p->held_source_bytes += w->nbytes;
}

/* Every matrix read as stored (the layers' unless quantized, the lm_head unless quantized or
 * tied to the embeddings) copied out of the map, before oneDNN's weights are made from them;
 * o->progress told the source bytes done after each (a cold 12B checkpoint reads 24.6 GB here). */
static void hold_matrices(const struct engine_model *m, const struct lm_prepare_opts *o, struct lm_prepared *p)
{
	const uint64_t t0 = time_mono_ns();
	const bool head = !p->head_q.data && m->lm_head.data != m->embeddings.data;
	uint64_t total = head ? m->lm_head.nbytes : 0, done = 0;
	for (int pass = 0; pass < 2; pass++)
		for (int l = 0; !p->quant && l < p->n_layers; l++) {
			const struct tensor *mats[4];
			int n = lm_layer_matrices(&m->layers[l], mats);
			for (int i = 0; i < n; i++) {
				if (pass == 0) {
					total += mats[i]->nbytes;
					continue;
				}
				hold_one(m, mats[i], &p->layers[l].held[i], p);
				done += mats[i]->nbytes;
				if (o->progress)
					o->progress(o->progress_arg, done, total);
			}
		}
	if (head) {
		hold_one(m, &m->lm_head, &p->head_held, p);
		if (o->progress)
			o->progress(o->progress_arg, total, total);
	}
	p->held_ns = time_mono_ns() - t0;
}

static int quantize_gemms(const struct engine_model *m, const struct lm_prepare_opts *o,
			  struct lm_prepared *p, char *err, size_t errlen)
{
	uint64_t total = 0, done = 0;
	for (int l = 0; l < p->n_layers; l++) {
		const struct tensor *mats[4];
		int n = lm_layer_matrices(&m->layers[l], mats);
		for (int i = 0; i < n; i++)
			total += mats[i]->nbytes;
	}
	for (int l = 0; l < p->n_layers; l++) {
		const struct lm_layer *L = &m->layers[l];
		const struct tensor *mats[4];
		int n = lm_layer_matrices(L, mats);
		for (int i = 0; i < n; i++) {
			int64_t bad = -1;
			/* fp8, or an FP8 checkpoint's matrix (lm_fp8.c) */
			int r = mats[i]->dtype == TENSOR_F8_E4M3 || o->quant == QUANT_FP8 ?
					lm_fp8_matrix(mats[i], &L->fp8_scale[i], (enum quant_format)o->quant,
						      &p->layers[l].q[i], &bad) :
					quantize_matrix(mats[i], (enum quant_format)o->quant, o->hooks,
							&p->layers[l].q[i], &bad);
			if (r < 0) {
				const char *name = matrix_names[L->kind == LM_LAYER_MAMBA     ? 0 :
								L->kind == LM_LAYER_ATTENTION ? 1 :
												2][i];
				if (err && errlen)
					snprintf(err, errlen,
						 r == -ENOMEM ?
							 "out of memory quantizing layer %d's %s to %s" :
						 r == -ERANGE ? "cannot quantize layer %d's %s to %s: row "
								"%lld has a weight "
								"past +-65504 (fp16 scales)" :
						 r == -EINVAL ? "cannot quantize layer %d's %s to %s: row "
								"%lld has a NaN or "
								"infinite weight" :
								"cannot quantize layer %d's %s to %s (size "
								"past a limit)",
						 l, name, quant_format_desc((enum quant_format)o->quant)->name,
						 (long long)bad);
				return r;
			}
			p->quant_bytes += alloc_huge_bytes((size_t)p->layers[l].q[i].rows *
							   p->layers[l].q[i].row_bytes);
			p->quant_source_bytes += mats[i]->nbytes;
			release_source(m, mats[i]);
			done += mats[i]->nbytes;
			if (o->progress)
				o->progress(o->progress_arg, done, total);
		}
	}
	return 0;
}

/* ---- a holod-quantized checkpoint's records (quantized.h) --------------------------------- */

#define CHECK_TASK_ROWS 256

struct records_job {
	const struct quant_tensor *q;
	_Atomic int64_t bad_row; /* the first row with a NaN or infinite scale, or -1 */
};

/* Every scale (q8: d; q4: dz's d) of the task's rows is a finite fp16: a corrupt record would
 * otherwise give NaN logits. The codes (and q4's offsets) need no check: every value is a
 * finite weight. */
static void records_task(void *ctx, int task, int thread)
{
	(void)thread;
	struct records_job *j = ctx;
	const struct quant_tensor *q = j->q;
	const int64_t r0 = (int64_t)task * CHECK_TASK_ROWS, r1 = MIN(r0 + CHECK_TASK_ROWS, q->rows);
	const int64_t nb = quant_blocks(q->cols);
	for (int64_t r = r0; r < r1; r++) {
		const void *row = (const char *)q->data + (size_t)r * q->row_bytes;
		const uint16_t *s =
			q->format == QUANT_Q8 ? quant_q8_scales(row, q->cols) : quant_q4_dz(row, q->cols);
		uint16_t bad = 0;
		for (int64_t k = 0; k < nb; k++)
			bad |= (uint16_t)!quant_scale_finite(q->format, s[k]);
		if (bad) {
			int64_t cur = atomic_load(&j->bad_row);
			while ((cur < 0 || r < cur) && !atomic_compare_exchange_weak(&j->bad_row, &cur, r))
				;
			return;
		}
	}
}

/* The first row of q's records with a NaN or infinite scale (checked on the pool), or -1. */
static int64_t records_bad_row(const struct quant_tensor *q)
{
	struct records_job j = {.q = q};
	atomic_init(&j.bad_row, -1);
	cpu_parallel_for((int)((q->rows + CHECK_TASK_ROWS - 1) / CHECK_TASK_ROWS), records_task, &j);
	return atomic_load(&j.bad_row);
}

/* A holod-quantized checkpoint's lm_head records (written when the head is not tied to the
 * embeddings) taken as p->head_q as they are in the map, checked as the layers' are: held in
 * place of quantizing the head at load, in the layers' format (the loader lists both in one). */
static int adopt_head(const struct engine_model *m, struct lm_prepared *p, char *err, size_t errlen)
{
	struct quant_tensor *q = &p->head_q;
	const int f = quantized_dtype_format(m->lm_head.dtype);
	size_t row_bytes = 0, bytes = 0;
	if (!p->quant_mapped || f != p->quant_format) {
		if (err && errlen)
			snprintf(err, errlen,
				 "the checkpoint's lm_head is stored as %s records, but its "
				 "linear layers are not: the checkpoint is corrupt",
				 quant_format_desc((enum quant_format)f)->name);
		return -EINVAL;
	}
	quantized_tensor_view(&m->lm_head, q);
	if (quant_row_bytes(q->format, q->cols, &row_bytes) < 0 ||
	    quant_tensor_bytes(q->format, q->rows, q->cols, &bytes) < 0 || q->row_bytes != row_bytes ||
	    m->lm_head.nbytes != bytes || !q->data) {
		memset(q, 0, sizeof(*q));
		if (err && errlen)
			snprintf(err, errlen, "the lm_head: its %s records do not have the format's sizes",
				 quant_format_desc((enum quant_format)f)->name);
		return -EINVAL;
	}
	p->head_mapped = true;
	const int64_t bad = records_bad_row(q);
	if (bad >= 0) {
		if (err && errlen)
			snprintf(err, errlen,
				 "the lm_head: row %lld of its %s records has a NaN or "
				 "infinite scale (the checkpoint is corrupt)",
				 (long long)bad, quant_format_desc((enum quant_format)f)->name);
		return -EINVAL;
	}
	p->quant_bytes += bytes;
	p->quant_source_bytes += bytes;
	return 0;
}

/* Takes the layers' matrices of a holod-quantized checkpoint as they are in the map (the loader
 * checked their sizes against quant.h; checked again here, the struct being the contract), and
 * checks their scales on the pool. Asking another format of them is refused by the backend. */
static int adopt_quantized(const struct engine_model *m, const struct lm_prepare_opts *o,
			   struct lm_prepared *p, char *err, size_t errlen)
{
	const int f = model_quant_format(m);
	if (o->quant != f) {
		if (err && errlen)
			snprintf(err, errlen,
				 "the checkpoint's linear layers are stored in %s: they cannot "
				 "be held as %s",
				 quant_format_desc((enum quant_format)f)->name,
				 quant_format_desc((enum quant_format)o->quant) ?
					 quant_format_desc((enum quant_format)o->quant)->name :
					 "stored");
		return -EINVAL;
	}
	p->quant_mapped = true;
	for (int l = 0; l < p->n_layers; l++) {
		const struct lm_layer *L = &m->layers[l];
		const struct tensor *mats[4];
		int n = lm_layer_matrices(L, mats);
		for (int i = 0; i < n; i++) {
			const char *name = matrix_names[L->kind == LM_LAYER_MAMBA     ? 0 :
							L->kind == LM_LAYER_ATTENTION ? 1 :
											2][i];
			struct quant_tensor *q = &p->layers[l].q[i];
			size_t row_bytes = 0, bytes = 0;
			quantized_tensor_view(mats[i], q);
			if ((int)q->format != f || quant_row_bytes(q->format, q->cols, &row_bytes) < 0 ||
			    quant_tensor_bytes(q->format, q->rows, q->cols, &bytes) < 0 ||
			    q->row_bytes != row_bytes || mats[i]->nbytes != bytes || !q->data) {
				if (err && errlen)
					snprintf(err, errlen,
						 "layer %d's %s: its %s records do not have the "
						 "format's sizes",
						 l, name, quant_format_desc((enum quant_format)f)->name);
				return -EINVAL;
			}
			const int64_t bad = records_bad_row(q);
			if (bad >= 0) {
				if (err && errlen)
					snprintf(err, errlen,
						 "layer %d's %s: row %lld of its %s records has a NaN "
						 "or infinite scale (the checkpoint is corrupt)",
						 l, name, (long long)bad,
						 quant_format_desc((enum quant_format)f)->name);
				return -EINVAL;
			}
			p->quant_bytes += bytes;
			p->quant_source_bytes += bytes;
		}
	}
	return 0;
}

int lm_prepare(const struct engine_model *m, const struct lm_prepare_opts *opts, struct lm_prepared *ret,
	       char *err, size_t errlen)
{
	struct lm_dims dm;
	lm_dims_init(&dm, &m->cfg);
	struct lm_prepared p = {.n_layers = m->cfg.n_layers,
				.bf16 = opts->bf16,
				.quant = opts->quant >= 0,
				.quant_format = opts->quant};
	int r;
	p.norm_f = f32_copy(&m->norm_f, (size_t)dm.d);
	p.layers = calloc((size_t)p.n_layers, sizeof(*p.layers));
	if (!p.norm_f || !p.layers)
		goto oom;
	if (p.quant && (r = model_quant_format(m) >= 0 ? adopt_quantized(m, opts, &p, err, errlen) :
							 quantize_gemms(m, opts, &p, err, errlen)) < 0)
		goto fail;
	/* The lm_head in the layers' format with --weights q8|q4 (a tool's hooks say otherwise):
	 * decode reads it for every token, so left in bf16 it would be most of what a small model's
	 * quantized decode reads (the ~0.7B bench model: 268 MB of 536 MB per token in q4). Its
	 * accuracy cost is measured (docs/quantization.md, holo-bench quant-error). fp8 keeps it as
	 * ModelOpt does. */
	int head = opts->hooks							   ? opts->hooks->head :
		   p.quant && (opts->quant == QUANT_Q8 || opts->quant == QUANT_Q4) ? opts->quant :
										     -1;
	/* a holod-quantized checkpoint's head records (an untied head): run from the map, as
	 * stored whatever the hooks ask (as its layers are) */
	if (quantized_dtype_format(m->lm_head.dtype) >= 0) {
		if ((r = adopt_head(m, &p, err, errlen)) < 0)
			goto fail;
		head = -1;
	}
	if (head >= 0) {
		int64_t bad = -1;
		if ((r = quantize_matrix(&m->lm_head, (enum quant_format)head, opts->hooks, &p.head_q,
					 &bad)) < 0) {
			if (err && errlen)
				snprintf(err, errlen,
					 r == -ENOMEM ? "out of memory quantizing the lm_head" :
					 r == -ERANGE ? "cannot quantize the lm_head: row %lld has a "
							"weight past +-65504 (fp16 scales)" :
					 r == -EINVAL ? "cannot quantize the lm_head: row %lld has a "
							"NaN or infinite weight" :
							"cannot quantize the lm_head (size past a limit)",
					 (long long)bad);
			goto fail;
		}
		/* held in place of the map's lm_head, whose pages go as the layers' do, unless it is
		 * the embeddings too (tied: they stay, read by every token's lookup) */
		if (!opts->hooks) {
			p.quant_bytes += alloc_huge_bytes((size_t)p.head_q.rows * p.head_q.row_bytes);
			if (m->lm_head.data != m->embeddings.data) {
				p.quant_source_bytes += m->lm_head.nbytes;
				release_source(m, &m->lm_head);
			}
		}
	}
	/* the layers' matrices read as stored (and their lm_head): into 2 MiB pages */
	if (!p.quant && !opts->map_weights)
		hold_matrices(m, opts, &p);
	/* where oneDNN has no bf16 products (a CPU with AVX2 alone) the weights stay unprepared
	 * and every product runs on the engine's own kernels with the same bf16-rounded inputs
	 * (product(): cpu_matmul or the GEMV), as a product oneDNN refuses does */
	if (opts->bf16 && cpu_dnnl_bf16_supported() && (r = prepare_gemms(m, opts->layout, &p)) < 0)
		goto fail;
	const int K = dm.K, cd = dm.conv_dim, H = dm.H;
	for (int l = 0; l < p.n_layers; l++) {
		const struct lm_layer *L = &m->layers[l];
		struct lm_prepared_layer *o = &p.layers[l];
		o->norm = f32_copy(&L->norm, (size_t)dm.d);
		if (!o->norm)
			goto oom;
		if (L->kind != LM_LAYER_MAMBA)
			continue;
		float *cw = f32_copy(&L->mamba.conv_w, (size_t)cd * K);
		o->conv_wt = malloc((size_t)cd * K * sizeof(float));
		if (cw && o->conv_wt) {
			/* transposed to [K][conv_dim] so the conv runs along channels */
			for (int ch = 0; ch < cd; ch++)
				for (int k = 0; k < K; k++)
					o->conv_wt[(size_t)k * cd + ch] = cw[(size_t)ch * K + k];
		}
		bool have_cw = cw != NULL;
		free(cw);
		o->conv_b = L->mamba.conv_b.data ? f32_copy(&L->mamba.conv_b, (size_t)cd) :
						   calloc((size_t)cd, sizeof(float));
		o->dt_bias = f32_copy(&L->mamba.dt_bias, (size_t)H);
		o->a = f32_copy(&L->mamba.a_log, (size_t)H);
		o->d = f32_copy(&L->mamba.d, (size_t)H);
		o->gnorm = f32_copy(&L->mamba.norm, (size_t)dm.d_in);
		if (!have_cw || !o->conv_wt || !o->conv_b || !o->dt_bias || !o->a || !o->d || !o->gnorm)
			goto oom;
		for (int h = 0; h < H; h++)
			o->a[h] = -expf(o->a[h]);
	}
	*ret = p;
	return 0;
oom:
	r = -ENOMEM;
fail:
	lm_prepared_finish(&p);
	return r;
}

/* ---- tiles (quant.h): the CPU backend's decode layout --------------------------------------- */

struct tile_job {
	const struct quant_tensor *q;
	void *data;	 /* where the tiles go */
	const void *src; /* the map's records (tiled into data), or NULL: data tiled in place */
	int64_t tiles;
	char *tmp; /* in place: per pool thread, QUANT_TILE_ROWS row_bytes */
};

#define TILE_TASK_TILES 64

static void tile_task(void *ctx, int task, int thread)
{
	const struct tile_job *j = ctx;
	const size_t tb = QUANT_TILE_ROWS * j->q->row_bytes;
	int64_t t0 = (int64_t)task * TILE_TASK_TILES, t1 = MIN(t0 + TILE_TASK_TILES, j->tiles);
	if (j->src)
		for (int64_t t = t0; t < t1; t++)
			quant_tile_from_records(j->q->format, j->q->cols,
						(const char *)j->src + (size_t)t * tb, j->q->row_bytes,
						(char *)j->data + (size_t)t * tb);
	else
		quant_tensor_tile_range(j->q, j->data, t0, t1, j->tmp + (size_t)thread * tb);
}

int lm_prepared_tile(const struct engine_model *m, struct lm_prepared *p)
{
	if (!p->quant || !quant_tile_supported((enum quant_format)p->quant_format))
		return 0;
	/* the matrices, and whether each is the map's (copied as it is tiled, owned from then on) */
	const int n = p->n_layers * 4 + 1;
	struct quant_tensor **qs = calloc((size_t)n, sizeof(*qs));
	void **fresh = calloc((size_t)n, sizeof(*fresh));
	bool *mapped = calloc((size_t)n, sizeof(*mapped));
	char *tmp = NULL;
	int k = 0, r = -ENOMEM;
	size_t max_tb = 0;
	if (!qs || !fresh || !mapped)
		goto out;
	for (int l = 0; l < p->n_layers; l++)
		for (int i = 0; i < 4; i++)
			if (p->layers[l].q[i].data) {
				mapped[k] = p->quant_mapped;
				qs[k++] = &p->layers[l].q[i];
			}
	if (p->head_q.data && (int)p->head_q.format == p->quant_format) {
		mapped[k] = p->head_mapped;
		qs[k++] = &p->head_q;
	}
	/* every allocation first, so that running out of memory changes nothing */
	for (int i = 0; i < k; i++) {
		max_tb = MAX(max_tb, QUANT_TILE_ROWS * qs[i]->row_bytes);
		if (mapped[i] && !(fresh[i] = alloc_huge((size_t)qs[i]->rows * qs[i]->row_bytes)))
			goto out;
	}
	if (!(tmp = malloc((size_t)cpu_threads() * max_tb)))
		goto out;
	for (int i = 0; i < k; i++) {
		struct quant_tensor *q = qs[i];
		const size_t tb = QUANT_TILE_ROWS * q->row_bytes, bytes = (size_t)q->rows * q->row_bytes;
		const int64_t tiles = q->rows / QUANT_TILE_ROWS;
		struct tile_job j = {.q = q,
				     .data = mapped[i] ? fresh[i] : (void *)q->data,
				     .src = mapped[i] ? q->data : NULL,
				     .tiles = tiles,
				     .tmp = tmp};
		if (mapped[i]) /* the rows past the last tile as they are */
			memcpy((char *)j.data + (size_t)tiles * tb,
			       (const char *)q->data + (size_t)tiles * tb, bytes - (size_t)tiles * tb);
		if (tiles > 0)
			cpu_parallel_for_work((int)((tiles + TILE_TASK_TILES - 1) / TILE_TASK_TILES),
					      tile_task, &j, (double)tiles * (double)tb);
		if (mapped[i]) {
			struct tensor src = {.data = (void *)q->data, .nbytes = bytes};
			p->quant_bytes += alloc_huge_bytes(bytes) - bytes; /* the copy's whole pages */
			q->data = fresh[i];
			fresh[i] = NULL;
			release_source(m, &src);
		}
		q->tiled = tiles > 0;
	}
	/* every matrix owned now */
	p->quant_mapped = false;
	if (p->head_q.data && (int)p->head_q.format == p->quant_format)
		p->head_mapped = false;
	r = 0;
out:
	for (int i = 0; fresh && i < n; i++)
		free(fresh[i]);
	free(tmp);
	free(qs);
	free(fresh);
	free(mapped);
	return r;
}

void lm_prepared_finish(struct lm_prepared *p)
{
	for (int l = 0; p->layers && l < p->n_layers; l++) {
		struct lm_prepared_layer *o = &p->layers[l];
		free(o->norm);
		free(o->conv_wt);
		free(o->conv_b);
		free(o->dt_bias);
		free(o->a);
		free(o->d);
		free(o->gnorm);
		for (int i = 0; i < 4; i++) {
			cpu_dnnl_weight_destroy(o->gemm[i]); /* before the held copy it may read */
			if (!p->quant_mapped)
				free((void *)o->q[i].data);
			free((void *)o->held[i].data);
		}
	}
	cpu_dnnl_weight_destroy(p->lm_head);
	if (!p->head_mapped)
		free((void *)p->head_q.data);
	free((void *)p->head_held.data);
	free(p->layers);
	free(p->norm_f);
	memset(p, 0, sizeof(*p));
}

static bool model_has(const struct engine_model *m, enum lm_layer_kind kind)
{
	for (int l = 0; l < m->cfg.n_layers; l++)
		if (m->layers[l].kind == kind)
			return true;
	return false;
}

/* The activations of a batched forward (lm_forward_batch) of M rows whose longest run has Tmax
 * positions, with `logit_rows` rows of logits gathered for the merged decode rows: floats past
 * h and xn. The conv window and the chunked scan's scratch serve one run at a time. */
static size_t mix_floats(const struct engine_model *m, const struct lm_dims *dm, int M, int Tmax,
			 int logit_rows)
{
	size_t t = (size_t)M, need = (size_t)logit_rows * (size_t)dm->vocab;
	if (model_has(m, LM_LAYER_MAMBA)) {
		size_t mamba = t * dm->in_rows + t * dm->conv_dim + t * dm->H + t * dm->d_in +
			       (size_t)(Tmax + dm->K - 1) * dm->conv_dim +
			       MAX(lm_ssm_cb_floats(dm, Tmax), cpu_ssd_work_floats(dm, Tmax));
		need = MAX(need, mamba);
	}
	if (model_has(m, LM_LAYER_ATTENTION))
		need = MAX(need, 2 * t * dm->q_dim + 2 * t * dm->kv_dim);
	if (model_has(m, LM_LAYER_MLP))
		need = MAX(need, t * dm->inter);
	return need;
}

static int max_in(const struct engine_model *m, const struct lm_dims *dm)
{
	int in = dm->d;
	if (model_has(m, LM_LAYER_MAMBA))
		in = MAX(in, dm->d_in);
	if (model_has(m, LM_LAYER_ATTENTION))
		in = MAX(in, dm->q_dim);
	if (model_has(m, LM_LAYER_MLP))
		in = MAX(in, dm->inter);
	return in;
}

int lm_reserve_kv(struct lm_seq *s, int need)
{
	const struct engine_model *m = s->model;
	struct lm_dims dm;
	lm_dims_init(&dm, &m->cfg);
	if (need <= s->kv_cap || !model_has(m, LM_LAYER_ATTENTION))
		return 0;
	int cap = MAX(need, MIN(s->base.max_tokens, MAX(64, s->kv_cap * 2)));
	size_t bytes = (size_t)cap * dm.kv_dim * sizeof(float);
	int n_attn = 0;
	for (int l = 0; l < m->cfg.n_layers; l++)
		n_attn += m->layers[l].kind == LM_LAYER_ATTENTION;
	uint64_t grow = 2 * (uint64_t)n_attn * (uint64_t)(cap - s->kv_cap) * dm.kv_dim * sizeof(float);
	int r = backend_charge(s->base.backend, grow);
	if (r < 0)
		return r;
	/* each realloc keeps its old block valid on failure, so a partial failure leaves larger
	 * caches on some layers and the old capacity recorded (and charged): still consistent */
	for (int l = 0; l < m->cfg.n_layers; l++) {
		if (m->layers[l].kind != LM_LAYER_ATTENTION)
			continue;
		struct lm_layer_state *st = &s->layers[l];
		float *k = realloc(st->k, bytes);
		if (!k)
			goto uncharge;
		st->k = k;
		float *v = realloc(st->v, bytes);
		if (!v)
			goto uncharge;
		st->v = v;
	}
	size_t part = lm_attention_decode_part_floats(&dm, cap);
	if (part) {
		float *p = realloc(s->attn_part, part * sizeof(float));
		if (!p)
			goto uncharge;
		s->attn_part = p;
	}
	s->kv_cap = cap;
	return 0;
uncharge:
	backend_uncharge(s->base.backend, grow);
	return -ENOMEM;
}

int lm_seq_prepare(struct lm_seq *s, int n)
{
	const struct engine_model *m = s->model;
	struct lm_dims dm;
	lm_dims_init(&dm, &m->cfg);
	int r = lm_reserve_kv(s, s->base.n_tokens + n);
	if (r < 0)
		return r;
	size_t scratch = cpu_matmul_scratch_bytes(max_in(m, &dm));
	scratch = MAX(scratch, lm_ssm_scratch_bytes(&dm));
	if (s->prep->bf16)
		scratch = MAX(scratch, cpu_ssd_scratch_bytes(&dm));
	scratch = MAX(scratch, (size_t)(s->base.n_tokens + n) * sizeof(float));
	scratch = MAX(scratch, (size_t)dm.d * sizeof(float));
	if (model_has(m, LM_LAYER_ATTENTION))
		scratch = MAX(scratch, MAX(lm_attention_blocked_scratch_bytes(&dm),
					   lm_attention_decode_scratch_bytes(&dm)));
	return cpu_reserve_scratch(scratch);
}

/* Where the merged decode rows' products run (lm.h: LM_BATCH_AMX_MIN_ROWS,
 * LM_BATCH_DNNL_MIN_ROWS); fp32 always on the GEMV kernels. */
enum merged_path { MERGED_GEMV, MERGED_AMX, MERGED_DNNL };

static enum merged_path merged_path(bool bf16, int rows)
{
	if (!bf16)
		return MERGED_GEMV;
	if (cpu_amx_enabled())
		return rows >= LM_BATCH_AMX_MIN_ROWS ? MERGED_AMX : MERGED_GEMV;
	return rows >= LM_BATCH_DNNL_MIN_ROWS ? MERGED_DNNL : MERGED_GEMV;
}

/* The rows of a batch: the runs of at most CPU_GEMV_T positions (decode) first, in order, then
 * the others. The decode rows (Ms) run as one product of Mp rows: Ms, or where oneDNN takes them
 * (merged_path), Ms rounded up to a multiple of LM_BATCH_DNNL_ROWS: oneDNN
 * JIT-compiles a primitive per row count and matrix (15 to 30 ms each, cached), so a batch whose
 * size changes by a session or two reuses the same few. The rows [Ms, Mp) are zeros that no
 * sequence reads. Also how many of the decode rows want logits and how many runs want them. */
struct batch_shape {
	int M, Ms, Mp, Tmax;
	int small_logit_rows, small_logit_runs;
};

static bool run_is_small(const struct lm_run *r)
{
	return r->T <= CPU_GEMV_T;
}

static int run_logit_rows(const struct lm_run *r)
{
	return r->want == ENGINE_LOGITS_ALL ? r->T : r->want == ENGINE_LOGITS_LAST ? 1 : 0;
}

/* Whether the layers' products may run on oneDNN or AMX (bf16 precision with bf16 weights): with
 * quantized weights the merged decode rows stay on the GEMV and no norm writes bf16 rows. */
static bool dnnl_layers(const struct lm_prepared *p)
{
	return p->bf16 && !p->quant;
}

static void batch_shape(const struct lm_run *runs, int n, bool bf16, struct batch_shape *ret)
{
	struct batch_shape b = {0};
	for (int i = 0; i < n; i++) {
		b.M += runs[i].T;
		b.Tmax = MAX(b.Tmax, runs[i].T);
		if (!run_is_small(&runs[i]))
			continue;
		b.Ms += runs[i].T;
		int rows = run_logit_rows(&runs[i]);
		b.small_logit_rows += rows;
		b.small_logit_runs += rows > 0;
	}
	b.Mp = b.Ms;
	if (merged_path(bf16, b.Ms) == MERGED_DNNL)
		b.Mp = (b.Ms + LM_BATCH_DNNL_ROWS - 1) / LM_BATCH_DNNL_ROWS * LM_BATCH_DNNL_ROWS;
	b.M += b.Mp - b.Ms;
	*ret = b;
}

/* Rows of logits the merged decode rows are computed into before they are copied out: none when
 * one run wants them (its own rows take them), else chunks of LM_BATCH_LOGIT_ROWS. */
static int logit_scratch_rows(const struct batch_shape *b)
{
	return b->small_logit_runs > 1 ? MIN(b->small_logit_rows, LM_BATCH_LOGIT_ROWS) : 0;
}

/* Whether a product of the batch runs on oneDNN (bf16: the merged decode rows where
 * merged_path() says so, a longer run from CPU_DNNL_MIN_T): the norms then write the bf16 rows
 * those products read. */
static bool batch_uses_dnnl(const struct lm_run *runs, int n, bool bf16, const struct batch_shape *b)
{
	if (!bf16)
		return false;
	if (merged_path(bf16, b->Mp) == MERGED_DNNL)
		return true;
	for (int i = 0; i < n; i++)
		if (runs[i].T >= CPU_DNNL_MIN_T)
			return true;
	return false;
}

/* floats after the work's mix for its xb */
static size_t xb_floats(const struct lm_dims *dm, int M, bool used)
{
	return used ? ((size_t)M * (size_t)MAX(dm->d, dm->d_in) + 1) / 2 : 0;
}

static size_t batch_work_floats(const struct engine_model *m, bool bf16, const struct lm_run *runs, int n)
{
	struct lm_dims dm;
	lm_dims_init(&dm, &m->cfg);
	struct batch_shape b;
	batch_shape(runs, n, bf16, &b);
	return 2 * (size_t)b.M * dm.d + mix_floats(m, &dm, b.M, b.Tmax, logit_scratch_rows(&b)) +
	       xb_floats(&dm, b.M, batch_uses_dnnl(runs, n, bf16, &b));
}

int lm_batch_prepare(struct lm_seq *lead, const struct lm_run *runs, int n)
{
	size_t need = batch_work_floats(lead->model, dnnl_layers(lead->prep), runs, n);
	if (need <= lead->work_floats)
		return 0;
	float *w = NULL;
	if (posix_memalign((void **)&w, 64, need * sizeof(float)) != 0)
		return -ENOMEM;
	free(lead->work);
	lead->work = w;
	lead->work_floats = need;
	return 0;
}

/* ---- layers --------------------------------------------------------------------------------- */

void cpu_rmsnorm_rows(const float *x, float *out, const float *w, int T, int d, float eps)
{
	for (int t = 0; t < T; t++) {
		const float *xr = x + (size_t)t * d;
		float *o = out + (size_t)t * d;
		float ss = 0;
		for (int i = 0; i < d; i++)
			ss += xr[i] * xr[i];
		float scale = 1.0f / sqrtf(ss / (float)d + eps);
		for (int i = 0; i < d; i++)
			o[i] = w[i] * (xr[i] * scale);
	}
}

#if defined(__x86_64__) && defined(__GNUC__)
/* max(u, 0) takes the second operand for NaN and for -0, as `u > 0 ? u : 0` does: the same
 * bits as the scalar loop, without its unpredictable branch. */
__attribute__((target("avx512f"))) static void relu2_avx512(float *u, size_t n)
{
	size_t i = 0;
	for (; i + 16 <= n; i += 16) {
		__m512 r = _mm512_max_ps(_mm512_loadu_ps(u + i), _mm512_setzero_ps());
		_mm512_storeu_ps(u + i, _mm512_mul_ps(r, r));
	}
	for (; i < n; i++) {
		float r = u[i] > 0 ? u[i] : 0;
		u[i] = r * r;
	}
}
#endif

void cpu_relu2(float *u, size_t n)
{
#if defined(__x86_64__) && defined(__GNUC__)
	if (cpu_matmul_isa() == CPU_ISA_AVX512) {
		relu2_avx512(u, n);
		return;
	}
#endif
	for (size_t i = 0; i < n; i++) {
		float r = u[i] > 0 ? u[i] : 0;
		u[i] = r * r;
	}
}

static inline float softplus(float x)
{
	return x > 20.0f ? x : log1pf(expf(x));
}

const char *lm_op_name(enum lm_op op)
{
	static const char *const names[LM_OP_COUNT] = {
		[LM_OP_GEMM] = "matrix products", [LM_OP_SSM] = "mamba scan", [LM_OP_CONV] = "conv+silu, dt",
		[LM_OP_ATTENTION] = "attention",  [LM_OP_NORM] = "norms",     [LM_OP_OTHER] = "embed, relu2",
	};
	return (unsigned)op < LM_OP_COUNT ? names[op] : "?";
}

/* 0 when not profiling */
static inline uint64_t prof_start(const struct lm_prepared *p)
{
	return p->prof && atomic_load_explicit(&p->prof->on, memory_order_relaxed) ? time_mono_ns() : 0;
}

static inline void prof_end(const struct lm_prepared *p, enum lm_op op, uint64_t t0)
{
	if (t0)
		atomic_fetch_add_explicit(&p->prof->ns[op], time_mono_ns() - t0, memory_order_relaxed);
}

/* y (+)= W x. In bf16 precision x is rounded to bf16 (in place where oneDNN does not run the
 * product: every x here is a product's input only, and the rounding is idempotent, so q, k and
 * v may share theirs),
 * products of CPU_DNNL_MIN_T rows or more run through oneDNN and decode's on the GEMV kernels
 * with bf16 activations: all paths then multiply the same bf16 values, exactly, and differ only
 * in the order of the fp32 sums. `merged`: the decode rows of several sequences (struct
 * batch_shape's Ms rows), which run on the GEMV kernels whatever their number (each row's sums
 * as its sequence's own decode forms them), except in bf16 where merged_path() sends them to
 * the AMX products or oneDNN's, which are faster. cpu_matmul only fails on scratch, which
 * lm_seq_prepare() reserved; a oneDNN or AMX product that fails (memory for a new primitive or
 * for the packed activations) runs on the GEMV or cpu_matmul instead. oneDNN's products apply
 * `act` in their epilogue; returns whether act was applied (else the caller applies it).
 * Quantized layers (qw, lm.h's lm_prepared.quant): decode rows and merged rows on the quantized
 * GEMV (bf16 precision: on int8 activations, cpu_gemv_quant_rows_i8), longer runs on
 * quant_matmul(), x rounded to bf16 first in bf16 precision. */
struct dequant_job {
	const struct quant_tensor *q;
	int r0;
	float *out;
	char *rec; /* a tiled matrix: a row's record gathered, row_bytes per pool thread */
};

static void dequant_task(void *ctx, int task, int thread)
{
	const struct dequant_job *j = ctx;
	const struct quant_tensor *q = j->q;
	quant_row_to_f32(q->format,
			 quant_tensor_row(q, j->r0 + task,
					  j->rec ? j->rec + (size_t)thread * q->row_bytes : NULL),
			 q->cols, j->out + (size_t)task * (size_t)q->cols);
}

/* bf16 precision without oneDNN's bf16 products: task i rounds rows [r0 + 16 i, + 16) to bf16
 * (cpu_quant_rows_to_bf16: the variant's SIMD widening, whole tiles gathered at once) */
struct dequant16_job {
	const struct quant_tensor *q;
	int r0, n;
	uint16_t *out;
	_Atomic int err;
};

static void dequant16_task(void *ctx, int task, int thread)
{
	(void)thread;
	struct dequant16_job *j = ctx;
	const int a = task * QUANT_TILE_ROWS, n = MIN(QUANT_TILE_ROWS, j->n - a);
	int r = cpu_quant_rows_to_bf16(j->q, j->r0 + a, n, j->out + (size_t)a * (size_t)j->q->cols);
	if (r < 0)
		atomic_store_explicit(&j->err, r, memory_order_relaxed);
}

/* A longer run's product on quantized weights (lm_prepared.quant) off oneDNN's bf16 path:
 * LM_QUANT_PREFILL_BYTES of rows at a time dequantized on the pool and multiplied by
 * cpu_matmul(): exactly to fp32 (fp32 precision), or with bf16 set (bf16 precision on a CPU whose
 * oneDNN has no bf16 products: AVX2 alone, or where oneDNN's product failed) rounded to bf16,
 * the weights oneDNN's bf16 path multiplies, by the variant's SIMD code into half the bytes
 * (docs/benchmarks.md, "... and a CPU with AVX2 alone in bf16 by default"). Where the buffer
 * cannot be had, the GEMV kernels take the product (the exact weights: in bf16 mode they differ
 * from the rounded ones by under half a bf16 step). */
static void quant_matmul_range(const struct quant_tensor *q, int from, int nrows, const float *x, size_t ldx,
			       int T, float *y, size_t ldy, bool accumulate, bool bf16)
{
	const size_t in = (size_t)q->cols, esz = bf16 ? sizeof(uint16_t) : sizeof(float);
	const int end = from + nrows;
	int rows = (int)MIN((int64_t)MAX(LM_QUANT_PREFILL_BYTES / (in * esz), 16) / QUANT_TILE_ROWS *
				    QUANT_TILE_ROWS,
			    nrows);
	void *buf = NULL;
	char *rec = NULL; /* a tiled matrix's rows are gathered into records first */
	if (posix_memalign(&buf, 64, (size_t)rows * in * esz) != 0 ||
	    (!bf16 && q->tiled && !(rec = malloc((size_t)cpu_threads() * q->row_bytes)))) {
		free(buf);
		cpu_gemv_quant_rows(q, from, nrows, x, ldx, T, y + from, ldy, accumulate);
		return;
	}
	for (int r0 = from; r0 < end; r0 += rows) {
		int n = MIN(rows, end - r0), r = 0;
		if (bf16) {
			struct dequant16_job j = {.q = q, .r0 = r0, .n = n, .out = buf};
			cpu_parallel_for_work((n + QUANT_TILE_ROWS - 1) / QUANT_TILE_ROWS, dequant16_task, &j,
					      (double)n * (double)in);
			r = atomic_load(&j.err);
		} else {
			struct dequant_job j = {q, r0, buf, rec};
			cpu_parallel_for_work(n, dequant_task, &j, (double)n * (double)in);
		}
		struct tensor t = {.data = buf,
				   .dtype = bf16 ? TENSOR_BF16 : TENSOR_F32,
				   .ndim = 2,
				   .shape = {n, (int64_t)in},
				   .nbytes = (size_t)n * in * esz};
		if (r < 0 || cpu_matmul(&t, x, ldx, T, y + r0, ldy, accumulate) < 0)
			cpu_gemv_quant_rows(q, r0, n, x, ldx, T, y + r0, ldy, accumulate);
	}
	free(rec);
	free(buf);
}

static void quant_matmul(const struct quant_tensor *q, const float *x, size_t ldx, int T, float *y,
			 size_t ldy, bool accumulate, bool bf16)
{
	quant_matmul_range(q, 0, (int)q->rows, x, ldx, T, y, ldy, accumulate, bf16);
}

/* bf16 precision's longer runs on quantized weights: one oneDNN product over the whole matrix
 * whose weights are made a block of rows at a time (cpu_dnnl_matmul_bf16_fill): each pool task
 * dequantizes and rounds LM_QUANT_PREFILL_BLOCK_BYTES of rows to bf16 (cpu_quant_rows_to_bf16)
 * into its thread's buffer and multiplies them, still in its cache, by every row of x rounded to
 * bf16 once: the products bf16 weights take, on the quantized weights rounded to bf16 (below
 * half a bf16 step of each, against the format's own error of up to half a step of its block's
 * scale). A block that fails part way has the rest of its tokens on the fp32 path (on the same
 * x, rounded to bf16 in place). Returns 0,
 * or < 0 (oneDNN has no bf16 matmul here, memory) with y untouched: the caller runs
 * quant_matmul() on the weights rounded to bf16 (the same products, without oneDNN). */
struct fill_arg {
	const struct quant_tensor *q;
	const float *x;
	size_t ldx;
	int T;
	float *y;
	size_t ldy;
	bool accumulate;
};

static int fill_rows(void *arg, int r0, int n, uint16_t *w)
{
	const struct fill_arg *a = arg;
	return cpu_quant_rows_to_bf16(a->q, r0, n, w);
}

static void fill_rest(void *arg, int r0, int n, int t0)
{
	const struct fill_arg *a = arg;
	quant_matmul_range(a->q, r0, n, a->x + (size_t)t0 * a->ldx, a->ldx, a->T - t0,
			   a->y + (size_t)t0 * a->ldy, a->ldy, a->accumulate, false);
}

static int quant_matmul_bf16(const struct quant_tensor *q, float *x, size_t ldx, int T, float *y, size_t ldy,
			     bool accumulate)
{
	const size_t in = (size_t)q->cols;
	uint16_t *xb = NULL;
	if (posix_memalign((void **)&xb, 64, MAX((size_t)T * in * sizeof(uint16_t), 64)) != 0)
		return -ENOMEM;
	/* x rounded in place too (idempotent, product()'s inputs), so a block finished on the fp32
	 * path multiplies the same activations */
	cpu_round_bf16_rows(x, ldx, T, (int)in);
	for (int t = 0; t < T; t++)
		cpu_f32_to_bf16(x + (size_t)t * ldx, xb + (size_t)t * in, in);
	/* whole tiles of 16 rows, and 32-row multiples for oneDNN's blocks */
	int rows = (int)MAX(LM_QUANT_PREFILL_BLOCK_BYTES / (in * sizeof(uint16_t)) / 32 * 32, 32);
	struct fill_arg a = {q, x, ldx, T, y, ldy, accumulate};
	int r = cpu_dnnl_matmul_bf16_fill((int)q->rows, (int)in, xb, T, y, ldy, accumulate, rows, fill_rows,
					  fill_rest, &a);
	free(xb);
	return r;
}

static bool product(const struct lm_prepared *p, const struct tensor *w, const struct cpu_dnnl_weight *dw,
		    const struct quant_tensor *qw, float *x, const uint16_t *xb, size_t ldx, int T, float *y,
		    size_t ldy, bool accumulate, enum cpu_dnnl_act act, bool merged)
{
	bool applied = false;
	if (T <= 0)
		return true;
	uint64_t t0 = prof_start(p);
	if (t0)
		atomic_fetch_add_explicit(&p->prof->flop[LM_OP_GEMM],
					  2 * (uint64_t)T * (uint64_t)w->shape[0] * (uint64_t)w->shape[1],
					  memory_order_relaxed);
	int r;
	if (qw) {
		if (T < LM_QUANT_GEMV_MAX_T || merged) {
			/* decode rows and short runs (an agent step's few appended tokens) on the GEMV,
			 * which reads each weight once for every group of 4 positions: bf16 precision: the
			 * activations quantized to int8 per block, integer products
			 * (cpu_gemv_quant_rows_i8; -ENOMEM for their buffer: the exact kernels); fp32:
			 * the weights exact, fp32 products and sums */
			if (!p->bf16 ||
			    cpu_gemv_quant_rows_i8(qw, 0, (int)qw->rows, x, ldx, T, y, ldy, accumulate) < 0)
				cpu_gemv_quant_rows(qw, 0, (int)qw->rows, x, ldx, T, y, ldy, accumulate);
		} else if (!p->bf16 || !cpu_dnnl_bf16_supported() ||
			   quant_matmul_bf16(qw, x, ldx, T, y, ldy, accumulate) < 0) {
			/* fp32 precision: the weights exact, fp32 sums; bf16 precision without oneDNN's
			 * bf16 matmul (or where it failed): the activations and the weights rounded to
			 * bf16 as oneDNN's path has them, fp32 sums */
			if (p->bf16)
				cpu_round_bf16_rows(x, ldx, T, (int)qw->cols);
			quant_matmul(qw, x, ldx, T, y, ldy, accumulate, p->bf16);
		}
		goto done;
	}
	if (p->bf16) {
		/* oneDNN reads x's bf16 copy xb where the norm wrote one, else rounds its own copy
		 * of x; the rounding in place is for the other paths */
		enum merged_path mp = merged ? merged_path(dnnl_layers(p), T) : MERGED_GEMV;
		if (dw && (merged ? mp == MERGED_DNNL : T >= CPU_DNNL_MIN_T) &&
		    (xb ? cpu_dnnl_matmul_bf16_act(dw, xb, T, y, ldy, accumulate, act) :
			  cpu_dnnl_matmul_act(dw, x, ldx, T, y, ldy, accumulate, act)) == 0) {
			applied = true;
			goto done;
		}
		/* AMX rounds its own packed copy of x */
		if (mp == MERGED_AMX && cpu_amx_rows(w, x, ldx, T, y, ldy, accumulate) == 0)
			goto done;
		cpu_round_bf16_rows(x, ldx, T, (int)w->shape[1]);
		if (T <= CPU_GEMV_T || merged) {
			r = cpu_gemv_rows(w, 0, (int)w->shape[0], x, ldx, T, y, ldy, accumulate, true);
			(void)r;
			goto done;
		}
	}
	if (merged)
		r = cpu_gemv_rows(w, 0, (int)w->shape[0], x, ldx, T, y, ldy, accumulate, false);
	else
		r = cpu_matmul(w, x, ldx, T, y, ldy, accumulate);
	(void)r;
done:
	prof_end(p, LM_OP_GEMM, t0);
	return applied;
}

void lm_conv_silu(const struct lm_dims *dm, int T, const float *raw, size_t ldr, const float *cwt,
		  const float *cbias, float *conv_state, float *cbuf, float *out)
{
	const int K = dm->K, cd = dm->conv_dim;
	if (K > 1)
		memcpy(cbuf, conv_state, (size_t)(K - 1) * cd * sizeof(float));
	for (int t = 0; t < T; t++)
		memcpy(cbuf + (size_t)(K - 1 + t) * cd, raw + (size_t)t * ldr, (size_t)cd * sizeof(float));
	for (int t = 0; t < T; t++) {
		float *o = out + (size_t)t * cd;
		memcpy(o, cbias, (size_t)cd * sizeof(float));
		for (int k = 0; k < K; k++)
			cpu_vfma(o, cwt + (size_t)k * cd, cbuf + (size_t)(t + k) * cd, cd);
		cpu_silu(o, o, cd);
	}
	if (K > 1)
		memcpy(conv_state, cbuf + (size_t)T * cd, (size_t)(K - 1) * cd * sizeof(float));
}

void lm_dt_softplus(const struct lm_dims *dm, int T, const float *raw, size_t ldr, const float *dt_bias,
		    float dt_min, float dt_max, float *dt)
{
	const int H = dm->H;
	for (int t = 0; t < T; t++) {
		const float *r = raw + (size_t)t * ldr;
		for (int h = 0; h < H; h++) {
			float v = softplus(r[h] + dt_bias[h]);
			dt[(size_t)t * H + h] = fminf(fmaxf(v, dt_min), dt_max);
		}
	}
}

void lm_gated_rmsnorm(const struct lm_dims *dm, int T, float *y, const float *z, size_t ldz, const float *w,
		      float eps)
{
	int gs = dm->d_in / dm->G;
	for (int t = 0; t < T; t++) {
		float *yr = y + (size_t)t * dm->d_in;
		cpu_mul_silu(yr, z + (size_t)t * ldz, dm->d_in);
		for (int g = 0; g < dm->G; g++) {
			float *u = yr + (size_t)g * gs;
			float ss = 0;
			for (int i = 0; i < gs; i++)
				ss += u[i] * u[i];
			float scale = 1.0f / sqrtf(ss / (float)gs + eps);
			for (int i = 0; i < gs; i++)
				u[i] = w[g * gs + i] * (u[i] * scale);
		}
	}
}

/* bf16 precision runs the row kernels of cpu_rows.h (vectorized, on the pool's threads); fp32
 * keeps the reference functions of this file, bit for bit. */
static void norm_rows(const struct lm_prepared *p, const float *x, float *out, const float *w, int T, int d,
		      float eps, uint16_t *out_bf16)
{
	if (p->bf16)
		cpu_rows_rmsnorm(x, out, w, T, d, eps, out_bf16);
	else
		cpu_rmsnorm_rows(x, out, w, T, d, eps);
}

/* A batched forward in progress: the runs (lm_run.row set), their row counts and the
 * activations of all their rows. */
struct batch {
	const struct engine_model *m;
	const struct lm_prepared *p;
	struct lm_dims dm;
	struct lm_run *runs;
	int n;
	struct batch_shape shape;
	struct work wk;
};

/* The quantized copy of matrix i of layer P, or NULL. */
#define QW(p, P, i) ((p)->quant ? &(P)->q[i] : NULL)

/* y (+)= W x over every row of the batch: the merged decode rows [0, Mp) as one product, then
 * each longer run's rows as the product that run would be alone. `act` (the MLP's ReLU^2) is
 * applied to every row, in oneDNN's epilogue or after. */
static void batch_product(const struct batch *b, const struct tensor *w, const struct cpu_dnnl_weight *dw,
			  const struct quant_tensor *qw, float *x, const uint16_t *xb, size_t ldx, float *y,
			  size_t ldy, bool accumulate, enum cpu_dnnl_act act)
{
	int first = 0, rows = b->shape.Mp;
	for (int i = -1; i < b->n; i++) {
		if (i >= 0) {
			if (run_is_small(&b->runs[i]))
				continue;
			first = b->runs[i].row;
			rows = b->runs[i].T;
		}
		float *xr = x + (size_t)first * ldx, *yr = y + (size_t)first * ldy;
		const uint16_t *xbr = xb ? xb + (size_t)first * ldx : NULL; /* dense: ldx is x's width */
		if (!product(b->p, w, dw, qw, xr, xbr, ldx, rows, yr, ldy, accumulate, act, i < 0) &&
		    act == CPU_DNNL_ACT_RELU2) {
			/* ldy is the MLP's width here: the rows are contiguous */
			uint64_t t0 = prof_start(b->p);
			if (b->p->bf16)
				cpu_rows_relu2(yr, (size_t)rows * ldy);
			else
				cpu_relu2(yr, (size_t)rows * ldy);
			prof_end(b->p, LM_OP_OTHER, t0);
		}
	}
}

/* The recurrent step of decode run r (T = 1) in layer l: its rows of xc, dt and y, its state. */
static struct ssm_job decode_ssm_job(const struct lm_dims *dm, const struct lm_run *r, int l, const float *xc,
				     const float *dt, const float *a, const float *dskip, float *y)
{
	return (struct ssm_job){
		.dm = dm,
		.T = 1,
		.xbc = xc + (size_t)r->row * dm->conv_dim,
		.ldx = (size_t)dm->conv_dim,
		.dt = dt + (size_t)r->row * dm->H,
		.a = a,
		.dskip = dskip,
		.state = r->seq->layers[l].ssm,
		.state16 = r->seq->layers[l].ssm16,
		.y = y + (size_t)r->row * dm->d_in,
	};
}

/* bf16 precision's conv and dt arguments for run r of layer l (P its prepared layer): the
 * run's rows of in_proj's output zx, of the conv's xc and of dt */
static void conv_dt_args(const struct batch *b, const struct lm_prepared_layer *P, int l,
			 const struct lm_run *r, float *zx, float *xc, float *dt, struct cpu_conv_args *ca,
			 struct cpu_dt_args *da)
{
	const struct lm_dims *dm = &b->dm;
	const struct lm_config *c = &b->m->cfg;
	const float *rzx = zx + (size_t)r->row * dm->in_rows;
	*ca = (struct cpu_conv_args){.T = r->T,
				     .K = dm->K,
				     .channels = dm->conv_dim,
				     .raw = rzx + dm->d_in,
				     .ldr = dm->in_rows,
				     .wt = P->conv_wt,
				     .bias = P->conv_b,
				     .state = r->seq->layers[l].conv,
				     .out = xc + (size_t)r->row * dm->conv_dim,
				     .ldo = dm->conv_dim};
	*da = (struct cpu_dt_args){.T = r->T,
				   .H = dm->H,
				   .raw = rzx + dm->d_in + dm->conv_dim,
				   .ldr = dm->in_rows,
				   .bias = P->dt_bias,
				   .lo = c->dt_min,
				   .hi = c->dt_max,
				   .dt = dt + (size_t)r->row * dm->H};
}

/* The recurrent scan of every one-position run of a batch in one pool job: task = run * groups +
 * group, a group being consecutive heads, each head the arithmetic a scan of that run alone
 * gives it (ssm_scan_head_task); longer runs' tasks do nothing (they take the chunked form, run
 * by run). */
struct scan_runs_job {
	const struct lm_dims *dm;
	const struct lm_run *runs;
	int l;
	const float *xc, *dt, *a, *dskip;
	float *y;
	int groups; /* each run's heads in this many tasks of consecutive heads */
};

/* A decode run's heads in min(H, threads) tasks of consecutive heads, not a task each: a thread
 * then reads one contiguous stretch of the layer's state (its heads' [P][N] rows are adjacent),
 * which the prefetchers follow; a head a task, claimed by whichever thread was free, left the
 * step reading the 24.2 MB fp32 state of the ~0.7B model at ~23-30 GB/s where the read pass ran
 * at 49-77 GB/s (docs/benchmarks.md, "the SSM step's state read in one stretch a thread"). */
static void scan_runs_task(void *ctx, int task, int thread)
{
	const struct scan_runs_job *j = ctx;
	const struct lm_dims *dm = j->dm;
	const struct lm_run *r = &j->runs[task / j->groups];
	if (r->T != 1)
		return;
	struct ssm_job one = decode_ssm_job(dm, r, j->l, j->xc, j->dt, j->a, j->dskip, j->y);
	const int g = task % j->groups;
	for (int h = g * dm->H / j->groups; h < (g + 1) * dm->H / j->groups; h++)
		ssm_scan_head_task(&one, h, thread);
}

/* A decode step's Mamba mixer, from in_proj's output to out_proj's input, in one pool job (bf16
 * precision, every run of the batch one position, no padding rows). Task run * groups + g owns
 * the Mamba groups [g G / groups, (g + 1) G / groups) (G % groups == 0) and so their heads, whose
 * x channels, B and C channels and conv state no other task touches: it runs the conv of exactly
 * those channels, their dt, their scan and the gated RMSNorm of their channels (whole norm
 * groups: the norm's groups are the Mamba groups). Nothing crosses between the threads until
 * out_proj, and the separate conv job and the caller's gated norm go: 22 of a ~0.70B decode
 * step's 149 pool jobs, each an exchange of activations between the cores (docs/quantization.md,
 * "The decode step against the read bandwidth"). Every channel, head and group runs the kernel
 * and order of the separate steps (conv_silu on a channel range, cpu_rows_dt, the recurrent
 * head, gated_rmsnorm on whole groups): the same bits. Only where the task count, min(H, threads),
 * divides G (2, 4 or 8 threads for Holotron's G = 8): with more threads than groups a task would
 * hold part of a group, whose B and C channels two tasks read, and the separate jobs run (not
 * measured: whether G tasks alone would keep up on 12 or 16 threads). */
struct mixer_job {
	const struct batch *b;
	int l, groups;
	float *zx, *xc, *dt, *y;
};

static bool mixer_fusable(const struct batch *b, int groups)
{
	const struct lm_dims *dm = &b->dm;
	if (!b->p->bf16 || b->shape.Mp != b->shape.Ms || b->shape.M != b->shape.Ms)
		return false;
	for (int i = 0; i < b->n; i++)
		if (b->runs[i].T != 1)
			return false;
	if (groups < 1 || dm->G % groups || dm->H % dm->G)
		return false;
	/* conv_silu takes ranges that start at a multiple of 16 channels: a task's x channels (d_in /
	 * groups of them) and its B and C channels (G / groups groups of N) */
	return (dm->d_in / groups) % 16 == 0 && (dm->G / groups * dm->N) % 16 == 0;
}

static void mixer_task(void *ctx, int task, int thread)
{
	const struct mixer_job *j = ctx;
	const struct batch *b = j->b;
	const struct lm_dims *dm = &b->dm;
	const struct lm_prepared_layer *P = &b->p->layers[j->l];
	const struct lm_run *r = &b->runs[task / j->groups];
	const int gpt = dm->G / j->groups, g0 = task % j->groups * gpt;
	const int hpg = dm->H / dm->G, h0 = g0 * hpg, h1 = h0 + gpt * hpg, gs = dm->d_in / dm->G;
	const struct cpu_rows_variant *v = cpu_rows();
	struct cpu_conv_args ca;
	struct cpu_dt_args da;
	conv_dt_args(b, P, j->l, r, j->zx, j->xc, j->dt, &ca, &da);
	const int bc = dm->d_in + g0 * dm->N, cc = dm->d_in + dm->G * dm->N + g0 * dm->N;
	v->conv_silu(&ca, h0 * dm->P, h1 * dm->P);
	v->conv_silu(&ca, bc, bc + gpt * dm->N);
	v->conv_silu(&ca, cc, cc + gpt * dm->N);
	cpu_rows_dt(&da, 0, h0, h1);
	struct ssm_job one = decode_ssm_job(dm, r, j->l, j->xc, j->dt, P->a, P->d, j->y);
	for (int h = h0; h < h1; h++)
		ssm_scan_head_task(&one, h, thread);
	/* the gate z: in_proj's first d_in rows */
	const float *z = j->zx + (size_t)r->row * dm->in_rows;
	float *yg = one.y + (size_t)g0 * gs;
	v->gated_rmsnorm(yg, z + (size_t)g0 * gs, P->gnorm + (size_t)g0 * gs, gpt, gs, b->m->cfg.eps);
	if (b->wk.xb)
		cpu_f32_to_bf16(yg, b->wk.xb + (size_t)r->row * dm->d_in + (size_t)g0 * gs, (size_t)gpt * gs);
}

static void mamba_layer(const struct batch *b, int l)
{
	const struct lm_layer *L = &b->m->layers[l];
	const struct lm_prepared_layer *P = &b->p->layers[l];
	const struct lm_config *c = &b->m->cfg;
	const struct lm_dims *dm = &b->dm;
	const int K = dm->K, cd = dm->conv_dim, H = dm->H, M = b->shape.M;
	float *zx = b->wk.mix;			  /* [M][in_rows] */
	float *xc = zx + (size_t)M * dm->in_rows; /* [M][conv_dim] */
	float *dt = xc + (size_t)M * cd;	  /* [M][H] */
	float *y = dt + (size_t)M * H;		  /* [M][d_in] */
	float *cbuf = y + (size_t)M * dm->d_in;	  /* [K-1+T][conv_dim], one run at a time */
	float *cb = cbuf + (size_t)(b->shape.Tmax + K - 1) * cd;
	const float *cwt = P->conv_wt, *cbias = P->conv_b, *dtb = P->dt_bias, *a = P->a, *dsk = P->d,
		    *gw = P->gnorm;

	batch_product(b, mat(P, 0, &L->mamba.in_proj), P->gemm[0], QW(b->p, P, 0), b->wk.xn, b->wk.xb, dm->d,
		      zx, dm->in_rows, false, CPU_DNNL_ACT_NONE);

	const int groups = MIN(H, cpu_threads());
	if (mixer_fusable(b, groups)) {
		uint64_t t0 = prof_start(b->p);
		struct mixer_job mj = {.b = b, .l = l, .groups = groups, .zx = zx, .xc = xc, .dt = dt, .y = y};
		cpu_parallel_for_work(b->n * groups, mixer_task, &mj, 2.0 * b->shape.Ms * H * dm->P * dm->N);
		prof_end(b->p, LM_OP_SSM, t0);
		batch_product(b, mat(P, 1, &L->mamba.out_proj), P->gemm[1], QW(b->p, P, 1), y, b->wk.xb,
			      dm->d_in, b->wk.h, dm->d, true, CPU_DNNL_ACT_NONE);
		return;
	}

	/* the conv window is each sequence's own: one run at a time */
	for (int i = 0; i < b->n; i++) {
		const struct lm_run *r = &b->runs[i];
		struct lm_layer_state *st = &r->seq->layers[l];
		const int T = r->T;
		float *rzx = zx + (size_t)r->row * dm->in_rows, *rxc = xc + (size_t)r->row * cd;
		float *rdt = dt + (size_t)r->row * H;
		uint64_t t0 = prof_start(b->p);
		if (b->p->bf16) {
			struct cpu_conv_args ca;
			struct cpu_dt_args da;
			conv_dt_args(b, P, l, r, zx, xc, dt, &ca, &da);
			cpu_rows_conv_dt(&ca, &da);
		} else {
			lm_conv_silu(dm, T, rzx + dm->d_in, dm->in_rows, cwt, cbias, st->conv, cbuf, rxc);
			lm_dt_softplus(dm, T, rzx + dm->d_in + cd, dm->in_rows, dtb, c->dt_min, c->dt_max,
				       rdt);
		}
		prof_end(b->p, LM_OP_CONV, t0);
	}

	/* the SSM state is each sequence's own: the decode runs' heads in one job, longer runs one
	 * at a time */
	uint64_t t0 = prof_start(b->p);
	if (b->shape.Ms) {
		struct scan_runs_job sj = {.dm = dm,
					   .runs = b->runs,
					   .l = l,
					   .xc = xc,
					   .dt = dt,
					   .a = a,
					   .dskip = dsk,
					   .y = y,
					   .groups = groups};
		cpu_parallel_for_work(b->n * groups, scan_runs_task, &sj,
				      2.0 * b->shape.Ms * H * dm->P * dm->N);
	}
	for (int i = 0; i < b->n; i++) {
		const struct lm_run *r = &b->runs[i];
		struct lm_layer_state *st = &r->seq->layers[l];
		const int T = r->T;
		if (T == 1)
			continue;
		float *rxc = xc + (size_t)r->row * cd, *rdt = dt + (size_t)r->row * H;
		float *ry = y + (size_t)r->row * dm->d_in;
		/* bf16: the products on oneDNN; lm_ssm_chunked() where it refuses (cpu_ssd.h) */
		bool done = false;
		if (b->p->bf16 && T >= CPU_SSD_MIN_T)
			done = (st->ssm16 ?
					cpu_ssd_scan_bf16_s16(dm, T, rxc, cd, rdt, a, dsk, st->ssm16, ry, cb) :
					cpu_ssd_scan_bf16(dm, T, rxc, cd, rdt, a, dsk, st->ssm, ry, cb)) == 0;
		if (!done)
			ssm_chunked(dm, T, rxc, cd, rdt, a, dsk, st->ssm, st->ssm16, ry, cb);
	}
	prof_end(b->p, LM_OP_SSM, t0);
	memset(y + (size_t)b->shape.Ms * dm->d_in, 0,
	       (size_t)(b->shape.Mp - b->shape.Ms) * dm->d_in * sizeof(float));

	t0 = prof_start(b->p);
	if (b->p->bf16)
		cpu_rows_gated_rmsnorm(y, dm->d_in, zx, dm->in_rows, gw, M, dm->G, dm->d_in / dm->G, c->eps,
				       b->wk.xb);
	else
		lm_gated_rmsnorm(dm, M, y, zx, dm->in_rows, gw, c->eps);
	prof_end(b->p, LM_OP_NORM, t0);
	batch_product(b, mat(P, 1, &L->mamba.out_proj), P->gemm[1], QW(b->p, P, 1), y, b->wk.xb, dm->d_in,
		      b->wk.h, dm->d, true, CPU_DNNL_ACT_NONE);
}

struct attn_job {
	const struct lm_dims *dm;
	int T, n0;
	const float *q, *k, *v;
	float *o;
};

static void attn_head_task(void *ctx, int i, int thread)
{
	const struct attn_job *j = ctx;
	const struct lm_dims *dm = j->dm;
	int kvh = i / (dm->hq / dm->hkv);
	float scale = 1.0f / sqrtf((float)dm->dh);
	float *p = cpu_scratch(thread);
	for (int t = 0; t < j->T; t++) {
		const float *q = j->q + (size_t)t * dm->q_dim + (size_t)i * dm->dh;
		float *o = j->o + (size_t)t * dm->q_dim + (size_t)i * dm->dh;
		int n = j->n0 + t + 1; /* causal: keys 0..n0+t */
		float mx = -INFINITY;
		for (int s = 0; s < n; s++) {
			p[s] = cpu_dot(q, j->k + (size_t)s * dm->kv_dim + (size_t)kvh * dm->dh, dm->dh) *
			       scale;
			mx = fmaxf(mx, p[s]);
		}
		float sum = 0;
		for (int s = 0; s < n; s++) {
			p[s] = expf(p[s] - mx);
			sum += p[s];
		}
		memset(o, 0, (size_t)dm->dh * sizeof(float));
		float inv = 1.0f / sum;
		for (int s = 0; s < n; s++)
			cpu_axpy(o, p[s] * inv, j->v + (size_t)s * dm->kv_dim + (size_t)kvh * dm->dh, dm->dh);
	}
}

void lm_attention_heads(const struct lm_dims *dm, int T, int n0, const float *q, const float *k,
			const float *v, float *o)
{
	struct attn_job j = {.dm = dm, .T = T, .n0 = n0, .q = q, .k = k, .v = v, .o = o};
	cpu_parallel_for_work(dm->hq, attn_head_task, &j, 2.0 * dm->hq * T * (n0 + T) * dm->dh);
}

/* Attention of every one-position run of a batch in one pool job, each task the task that run's
 * attention alone has; longer runs' tasks do nothing. bf16 precision: the runs' chunks' tasks
 * (lm_attention_decode_task), run i's from first[i] on, then a second job merges the runs
 * of several chunks (task = run * hkv + KV head); fp32 precision, the reference: task = run * hq
 * + head (lm_attention_heads' task). */
struct attn_runs_job {
	const struct lm_dims *dm;
	const struct lm_run *runs;
	int l;
	bool blocked; /* lm_attention_decode_task's tasks (bf16 precision), else lm_attention_heads' */
	const float *q;
	float *o;
	int first[LM_BATCH_MAX_RUNS + 1]; /* blocked: run i's first task */
};

static void attn_runs_task(void *ctx, int task, int thread)
{
	const struct attn_runs_job *j = ctx;
	const struct lm_dims *dm = j->dm;
	if (j->blocked) {
		int i = 0;
		while (task >= j->first[i + 1])
			i++;
		const struct lm_run *r = &j->runs[i];
		const int n0 = r->seq->base.n_tokens;
		const struct lm_layer_state *st = &r->seq->layers[j->l];
		lm_attention_decode_task(dm, n0, j->q + (size_t)r->row * dm->q_dim, st->k, st->v,
					 j->o + (size_t)r->row * dm->q_dim, r->seq->attn_part,
					 task - j->first[i], cpu_scratch(thread));
		return;
	}
	const struct lm_run *r = &j->runs[task / dm->hq];
	if (r->T != 1)
		return;
	const struct lm_layer_state *st = &r->seq->layers[j->l];
	struct attn_job one = {.dm = dm,
			       .T = 1,
			       .n0 = r->seq->base.n_tokens,
			       .q = j->q + (size_t)r->row * dm->q_dim,
			       .k = st->k,
			       .v = st->v,
			       .o = j->o + (size_t)r->row * dm->q_dim};
	attn_head_task(&one, task % dm->hq, thread);
}

static void attn_combine_task(void *ctx, int task, int thread)
{
	(void)thread;
	const struct attn_runs_job *j = ctx;
	const struct lm_dims *dm = j->dm;
	const struct lm_run *r = &j->runs[task / dm->hkv];
	const int n0 = r->seq->base.n_tokens;
	if (r->T == 1 && lm_attention_decode_chunks(n0) > 1)
		lm_attention_decode_combine(dm, n0, j->o + (size_t)r->row * dm->q_dim, r->seq->attn_part,
					    task % dm->hkv);
}

/* K and V of the new rows go to scratch first (rows of several sequences), then into each
 * sequence's cache: the same values a product into the cache writes. */
static void attention_layer(const struct batch *b, int l)
{
	const struct lm_layer *L = &b->m->layers[l];
	const struct lm_prepared_layer *P = &b->p->layers[l];
	const struct lm_dims *dm = &b->dm;
	const int M = b->shape.M;
	float *q = b->wk.mix, *o = q + (size_t)M * dm->q_dim;
	float *kn = o + (size_t)M * dm->q_dim, *vn = kn + (size_t)M * dm->kv_dim;
	const uint16_t *xb = b->wk.xb;
	batch_product(b, mat(P, 0, &L->attn.q), P->gemm[0], QW(b->p, P, 0), b->wk.xn, xb, dm->d, q, dm->q_dim,
		      false, CPU_DNNL_ACT_NONE);
	batch_product(b, mat(P, 1, &L->attn.k), P->gemm[1], QW(b->p, P, 1), b->wk.xn, xb, dm->d, kn,
		      dm->kv_dim, false, CPU_DNNL_ACT_NONE);
	batch_product(b, mat(P, 2, &L->attn.v), P->gemm[2], QW(b->p, P, 2), b->wk.xn, xb, dm->d, vn,
		      dm->kv_dim, false, CPU_DNNL_ACT_NONE);
	for (int i = 0; i < b->n; i++) {
		const struct lm_run *r = &b->runs[i];
		struct lm_layer_state *st = &r->seq->layers[l];
		const int T = r->T, n0 = r->seq->base.n_tokens;
		size_t kv = (size_t)T * dm->kv_dim * sizeof(float);
		memcpy(st->k + (size_t)n0 * dm->kv_dim, kn + (size_t)r->row * dm->kv_dim, kv);
		memcpy(st->v + (size_t)n0 * dm->kv_dim, vn + (size_t)r->row * dm->kv_dim, kv);
		if (T == 1)
			continue;
		const float *rq = q + (size_t)r->row * dm->q_dim;
		float *ro = o + (size_t)r->row * dm->q_dim;
		uint64_t t0 = prof_start(b->p);
		if (b->p->bf16)
			lm_attention_blocked(dm, T, n0, rq, st->k, st->v, ro, true);
		else
			lm_attention_heads(dm, T, n0, rq, st->k, st->v, ro);
		prof_end(b->p, LM_OP_ATTENTION, t0);
	}
	if (b->shape.Ms) {
		uint64_t t0 = prof_start(b->p);
		struct attn_runs_job aj =
			{.dm = dm, .runs = b->runs, .l = l, .blocked = b->p->bf16, .q = q, .o = o};
		double keys = 0;
		bool merge = false;
		for (int i = 0; i < b->n; i++) {
			const int n0 = b->runs[i].seq->base.n_tokens, chunks = lm_attention_decode_chunks(n0);
			const bool one = b->runs[i].T == 1;
			keys += one ? n0 + 1 : 0;
			merge |= one && chunks > 1;
			aj.first[i + 1] = aj.first[i] + (one ? chunks : 0);
		}
		cpu_parallel_for_work(aj.blocked ? aj.first[b->n] : b->n * dm->hq, attn_runs_task, &aj,
				      2.0 * dm->hq * keys * dm->dh);
		if (aj.blocked && merge)
			cpu_parallel_for_work(b->n * dm->hkv, attn_combine_task, &aj,
					      (double)dm->hq * keys / LM_ATTN_DECODE_KEYS * dm->dh);
		prof_end(b->p, LM_OP_ATTENTION, t0);
	}
	memset(o + (size_t)b->shape.Ms * dm->q_dim, 0,
	       (size_t)(b->shape.Mp - b->shape.Ms) * dm->q_dim * sizeof(float));
	batch_product(b, mat(P, 3, &L->attn.o), P->gemm[3], QW(b->p, P, 3), o, NULL, dm->q_dim, b->wk.h,
		      dm->d, true, CPU_DNNL_ACT_NONE);
}

static void mlp_layer(const struct batch *b, int l)
{
	const struct lm_layer *L = &b->m->layers[l];
	const struct lm_prepared_layer *P = &b->p->layers[l];
	const struct lm_dims *dm = &b->dm;
	float *u = b->wk.mix;
	/* bf16 precision: the ReLU^2 in oneDNN's epilogue where the product runs there */
	batch_product(b, mat(P, 0, &L->mlp.up), P->gemm[0], QW(b->p, P, 0), b->wk.xn, b->wk.xb, dm->d, u,
		      dm->inter, false, CPU_DNNL_ACT_RELU2);
	batch_product(b, mat(P, 1, &L->mlp.down), P->gemm[1], QW(b->p, P, 1), u, NULL, dm->inter, b->wk.h,
		      dm->d, true, CPU_DNNL_ACT_NONE);
}

/* The final norm and lm_head over the rows whose logits are wanted: the merged decode runs'
 * rows as one product (straight into the run's rows when one run wants them, else through
 * scratch in chunks of LM_BATCH_LOGIT_ROWS), every longer run's as it would be alone. */
static void batch_logits(const struct batch *b)
{
	const struct lm_dims *dm = &b->dm;
	const struct lm_prepared *p = b->p;
	const struct tensor *head = head_mat(p, b->m);
	const struct quant_tensor *hq = p->head_q.data ? &p->head_q : NULL;
	const size_t V = (size_t)dm->vocab, d = (size_t)dm->d;
	float *xn = b->wk.xn, *lg = b->wk.mix;
	int at = 0;
	float *direct = NULL;
	for (int i = 0; i < b->n; i++) {
		const struct lm_run *r = &b->runs[i];
		int rows = run_logit_rows(r);
		if (!rows || !run_is_small(r))
			continue;
		uint64_t t0 = prof_start(p);
		norm_rows(p, b->wk.h + (size_t)(r->row + r->T - rows) * d, xn + (size_t)at * d, p->norm_f,
			  rows, dm->d, b->m->cfg.eps, NULL);
		prof_end(p, LM_OP_NORM, t0);
		at += rows;
		direct = r->logits;
	}
	if (b->shape.small_logit_runs == 1) {
		product(p, head, p->lm_head, hq, xn, NULL, d, at, direct, V, false, CPU_DNNL_ACT_NONE, true);
	} else {
		int i = 0, in_run = 0;
		for (int done = 0; done < at;) {
			int n = MIN(LM_BATCH_LOGIT_ROWS, at - done);
			product(p, head, p->lm_head, hq, xn + (size_t)done * d, NULL, d, n, lg, V, false,
				CPU_DNNL_ACT_NONE, true);
			for (int k = 0; k < n; k++) {
				while (!run_is_small(&b->runs[i]) || in_run == run_logit_rows(&b->runs[i])) {
					i++;
					in_run = 0;
				}
				memcpy(b->runs[i].logits + (size_t)in_run * V, lg + (size_t)k * V,
				       V * sizeof(float));
				in_run++;
			}
			done += n;
		}
	}
	for (int i = 0; i < b->n; i++) {
		const struct lm_run *r = &b->runs[i];
		int rows = run_logit_rows(r);
		if (!rows || run_is_small(r))
			continue;
		uint64_t t0 = prof_start(p);
		norm_rows(p, b->wk.h + (size_t)(r->row + r->T - rows) * d, xn, p->norm_f, rows, dm->d,
			  b->m->cfg.eps, NULL);
		prof_end(p, LM_OP_NORM, t0);
		product(p, head, p->lm_head, hq, xn, NULL, d, rows, r->logits, V, false, CPU_DNNL_ACT_NONE,
			false);
	}
}

void lm_forward_batch(struct lm_seq *lead, struct lm_run *runs, int n)
{
	struct batch b = {.m = lead->model, .p = lead->prep, .runs = runs, .n = n};
	const struct lm_config *c = &b.m->cfg;
	lm_dims_init(&b.dm, c);
	batch_shape(runs, n, dnnl_layers(b.p), &b.shape);
	int small = 0, large = b.shape.Mp;
	for (int i = 0; i < n; i++) {
		int *at = run_is_small(&runs[i]) ? &small : &large;
		runs[i].row = *at;
		*at += runs[i].T;
	}
	const int M = b.shape.M, d = b.dm.d;
	b.wk.h = lead->work;
	b.wk.xn = b.wk.h + (size_t)M * d;
	b.wk.mix = b.wk.xn + (size_t)M * d;
	b.wk.xb = batch_uses_dnnl(runs, n, dnnl_layers(b.p), &b.shape) ?
			  (uint16_t *)(b.wk.mix + mix_floats(b.m, &b.dm, M, b.shape.Tmax,
							     logit_scratch_rows(&b.shape))) :
			  NULL;

	uint64_t t0 = prof_start(b.p);
	for (int i = 0; i < n; i++)
		for (int t = 0; t < runs[i].T; t++) {
			float *h = b.wk.h + (size_t)(runs[i].row + t) * d;
			if (runs[i].embeds && runs[i].embeds[t])
				memcpy(h, runs[i].embeds[t], (size_t)d * sizeof(float));
			else
				cpu_tensor_to_f32(&b.m->embeddings, (size_t)runs[i].tokens[t] * d, d, h);
		}
	memset(b.wk.h + (size_t)b.shape.Ms * d, 0, (size_t)(b.shape.Mp - b.shape.Ms) * d * sizeof(float));
	prof_end(b.p, LM_OP_OTHER, t0);

	for (int l = 0; l < c->n_layers; l++) {
		t0 = prof_start(b.p);
		norm_rows(b.p, b.wk.h, b.wk.xn, b.p->layers[l].norm, M, d, c->eps, b.wk.xb);
		prof_end(b.p, LM_OP_NORM, t0);
		switch (b.m->layers[l].kind) {
		case LM_LAYER_MAMBA:
			mamba_layer(&b, l);
			break;
		case LM_LAYER_ATTENTION:
			attention_layer(&b, l);
			break;
		case LM_LAYER_MLP:
			mlp_layer(&b, l);
			break;
		}
	}
	for (int i = 0; i < n; i++)
		runs[i].seq->base.n_tokens += runs[i].T;
	batch_logits(&b);
}
