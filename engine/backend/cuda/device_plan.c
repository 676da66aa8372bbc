/* The CUDA backend's device memory from a model's shapes (device_plan.h). */
#include "device_plan.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common.h"
#include "dims.h"
#include "quant.h"

static uint64_t align_up(uint64_t n)
{
	return (n + DEVICE_PLAN_ALIGN - 1) & ~(uint64_t)(DEVICE_PLAN_ALIGN - 1);
}

/* One scratch buffer as backend_cuda.c's carve() lays it out (at least one byte). */
static uint64_t carve(uint64_t n)
{
	return align_up(n ? n : 1);
}

struct planner {
	const struct device_plan_args *a;
	int quant;	  /* the quant_format of the layers, or -1 */
	uint64_t plain;	  /* bytes of a plain matrix element */
	uint64_t act;	  /* bytes of an activation (GEMM input) */
	uint64_t dequant; /* the largest dequantized slice */
	uint64_t tensors; /* tensors in the weight block (fp8's scale table has one float each) */
	uint64_t fp8_ldq; /* the FP8 GEMM's activation row: the widest fp8 matrix's, 16-aligned */
	struct engine_memory_plan *p;
};

/* A tensor the backend keeps plain: a matrix in the precision's dtype, a vector in fp32. */
static uint64_t plain(struct planner *pl, uint64_t elems, bool vector)
{
	pl->tensors++;
	return align_up(elems * (vector ? 4 : pl->plain));
}

/* A linear layer's matrix [rows, cols] in the layers' format (or the head's, when head). */
static uint64_t matrix(struct planner *pl, int64_t rows, int64_t cols, bool head)
{
	/* fp8 keeps the head plain, as ModelOpt does */
	int q = head && pl->quant == QUANT_FP8 ? -1 : pl->quant;
	if (q < 0)
		return plain(pl, (uint64_t)rows * (uint64_t)cols, false);
	size_t rb = 0;
	if (quant_row_bytes((enum quant_format)q, cols, &rb) < 0)
		return 0;
	pl->tensors++;
	/* bf16 precision's FP8 GEMM quantizes its activations into rows of the widest matrix */
	if (q == QUANT_FP8 && pl->act == 2)
		pl->fp8_ldq = MAX(pl->fp8_ldq, ((uint64_t)cols + 15) / 16 * 16);
	/* the prefill's slice: at least 64 rows, a multiple of 64, at most DEQUANT_BYTES */
	int64_t n = (int64_t)(DEVICE_PLAN_DEQUANT_BYTES / ((uint64_t)cols * pl->act)) / 64 * 64;
	n = MIN(rows, MAX(n, 64));
	pl->dequant = MAX(pl->dequant, (uint64_t)n * (uint64_t)cols * pl->act);
	return align_up((uint64_t)rows * rb);
}

/* backend_cuda.c's scratch_layout() with the attention and SSD workspaces of cuda/, then the
 * batched decode block of DEVICE_PLAN_MAX_DECODE rows. */
static uint64_t scratch(const struct planner *pl, const struct lm_dims *dm, int n_mamba, int n_attn, int n_mlp)
{
	const uint64_t R = DEVICE_PLAN_MAX_ROWS, f = 4, a = pl->act;
	uint64_t s = carve(2 * R * 4) + carve(R * dm->d * f) + carve(R * dm->d * f) + carve(R * dm->d * a) +
		     carve((uint64_t)DEVICE_PLAN_LOGIT_ROWS * dm->vocab * f);
	if (n_mamba) {
		s += carve(R * dm->in_rows * f) + carve(R * dm->conv_dim * f) + carve(R * dm->d_in * f) +
		     carve(R * dm->d_in * a);
		/* gpu_mamba_ssd_layout(): four arrays of floats, each 64-float aligned */
		uint64_t q = (uint64_t)dm->chunk, T = DEVICE_PLAN_MAX_RUN, nc = (T + q - 1) / q;
		uint64_t parts[4] = {(uint64_t)dm->H * nc * q, (uint64_t)dm->H * nc * q,
				     nc * (uint64_t)dm->G * q * q, nc * (uint64_t)dm->H * dm->P * dm->N};
		uint64_t fl = 0;
		for (int i = 0; i < 4; i++)
			fl += (parts[i] + 63) & ~(uint64_t)63;
		s += carve(fl * 4);
	}
	if (n_attn) {
		/* gpu_attention_scratch_floats(MAX_RUN, ENGINE_SESSION_MAX_TOKENS, hq, dh) */
		uint64_t rows = DEVICE_PLAN_MAX_RUN;
		uint64_t splits = ((uint64_t)ENGINE_SESSION_MAX_TOKENS + DEVICE_PLAN_ATTN_SPLIT - 1) /
				  DEVICE_PLAN_ATTN_SPLIT;
		uint64_t cap = MAX(DEVICE_PLAN_ATTN_MAX_SPLITS / rows, 1);
		splits = MIN(splits, cap);
		s += carve(R * dm->q_dim * f) + carve(R * dm->kv_dim * a) + carve(R * dm->kv_dim * a) +
		     carve(R * dm->q_dim * a) + carve(rows * dm->hq * splits * ((uint64_t)dm->dh + 2) * f);
	}
	if (n_mlp)
		s += carve(R * dm->inter * f) + carve(R * dm->inter * a);
	if (pl->dequant)
		s += carve(pl->dequant);
	if (pl->fp8_ldq) /* e4m3 activations, their scale, the amax workspace */
		s += carve(R * pl->fp8_ldq) + carve(4) + carve(R * 4);
	const uint64_t D = DEVICE_PLAN_MAX_DECODE;
	s += carve(D * DEVICE_PLAN_SEQ_ROW_BYTES + D * 4) + carve(D * dm->vocab * f);
	return s;
}

/* vision_cuda.c: its weights, then alloc_buffers() for v->tiles tiles. */
static uint64_t vision(struct planner *pl, const struct device_plan_vision *v)
{
	const uint64_t D = v->width, M = v->mlp, p = v->patch, s2 = (uint64_t)v->shuffle * v->shuffle;
	const uint64_t side = (uint64_t)(v->tile / v->patch), n = side * side;
	const uint64_t pin = D * s2, ph = v->proj_hidden, out = v->out_dim, dsz = pl->act;
	uint64_t w = plain(pl, D * 3 * p * p, false) + plain(pl, ph * pin, false) +
		     plain(pl, out * ph, false) + plain(pl, (uint64_t)v->prefix * D, true) +
		     plain(pl, pin, true) + 2 * plain(pl, D, true) + plain(pl, n * D, true);
	uint64_t block = plain(pl, 3 * D * D, false) + plain(pl, D * D, false) + plain(pl, M * D, false) +
			 plain(pl, D * M, false) + 4 * plain(pl, D, true) + plain(pl, 3 * D, true) +
			 plain(pl, D, true) + plain(pl, M, true) + plain(pl, D, true);
	w += (uint64_t)v->depth * block;
	const uint64_t t = v->tiles, rows = t * (v->prefix + n), pr = t * n, tr = t * (n / s2);
	uint64_t act = 4 * pr * 3 * p * p + dsz * pr * 3 * p * p + 4 * pr * D + 4 * rows * D +
		       dsz * rows * D + 4 * rows * 3 * D + dsz * rows * D + 4 * rows * M + dsz * rows * M +
		       4 * rows * D + dsz * tr * pin + 4 * tr * ph + dsz * tr * ph + 4 * tr * out;
	return w + act;
}

int device_plan_compute(const struct device_plan_args *a, struct engine_memory_plan *ret)
{
	const struct lm_config *c = a->lm;
	memset(ret, 0, sizeof(*ret));
	if (!c || c->n_layers < 1 || c->hidden < 1 || c->vocab < 1 || a->sessions < 0 || a->context < 0 ||
	    a->context > ENGINE_SESSION_MAX_TOKENS ||
	    (a->precision != ENGINE_PRECISION_BF16 && a->precision != ENGINE_PRECISION_FP32))
		return -EINVAL;
	struct lm_dims dm;
	lm_dims_init(&dm, c);
	int n_mamba = 0, n_attn = 0, n_mlp = 0;
	for (int l = 0; l < c->n_layers; l++) {
		char k = c->pattern[l];
		n_mamba += k == 'M';
		n_attn += k == '*';
		n_mlp += k == '-';
		if (!k || !strchr("M*-", k))
			return -EINVAL;
	}
	if ((n_mamba && (dm.H < 1 || dm.P < 1 || dm.N < 1 || dm.G < 1 || dm.K < 1 || dm.chunk < 1)) ||
	    (n_attn && (dm.hq < 1 || dm.hkv < 1 || dm.dh < 1)) || (n_mlp && dm.inter < 1))
		return -EINVAL;
	const struct device_plan_vision *v = a->vision;
	if (v &&
	    (v->width < 1 || v->depth < 1 || v->mlp < 1 || v->patch < 1 || v->prefix < 0 || v->shuffle < 1 ||
	     v->proj_hidden < 1 || v->out_dim < 1 || v->tile < v->patch || v->tiles < 1))
		return -EINVAL;

	bool fp32 = a->precision == ENGINE_PRECISION_FP32;
	struct planner pl = {.a = a, .quant = -1, .plain = fp32 ? 4 : 2, .act = fp32 ? 4 : 2, .p = ret};
	switch (a->weights) {
	case ENGINE_WEIGHTS_Q8:
		pl.quant = QUANT_Q8;
		break;
	case ENGINE_WEIGHTS_Q4:
		pl.quant = QUANT_Q4;
		break;
	case ENGINE_WEIGHTS_FP8:
		pl.quant = QUANT_FP8;
		break;
	default:
		break;
	}
	snprintf(ret->weights, sizeof(ret->weights), "%s",
		 pl.quant >= 0 ? quant_format_desc((enum quant_format)pl.quant)->name :
		 fp32	       ? "f32" :
				 "bf16");

	const int64_t d = dm.d;
	ret->embeddings = plain(&pl, (uint64_t)dm.vocab * (uint64_t)d, false);
	ret->other = plain(&pl, (uint64_t)d, true); /* norm_f */
	/* a tied head is the embeddings' unless the layers' format quantizes it (not fp8) */
	if (!a->tied || (pl.quant >= 0 && pl.quant != QUANT_FP8))
		ret->head = matrix(&pl, dm.vocab, d, true);
	for (int l = 0; l < c->n_layers; l++) {
		ret->other += plain(&pl, (uint64_t)d, true);
		switch (c->pattern[l]) {
		case 'M':
			ret->layers += matrix(&pl, dm.in_rows, d, false) + matrix(&pl, d, dm.d_in, false);
			ret->other += plain(&pl, (uint64_t)dm.conv_dim * dm.K, false) +
				      (a->conv_bias ? plain(&pl, (uint64_t)dm.conv_dim, true) : 0) +
				      3 * plain(&pl, (uint64_t)dm.H, true) +
				      plain(&pl, (uint64_t)dm.d_in, true);
			break;
		case '*':
			ret->layers += matrix(&pl, dm.q_dim, d, false) +
				       2 * matrix(&pl, dm.kv_dim, d, false) + matrix(&pl, d, dm.q_dim, false);
			break;
		case '-':
			ret->layers += matrix(&pl, dm.inter, d, false) + matrix(&pl, d, dm.inter, false);
			break;
		}
	}
	/* fp8: the per-tensor scales the FP8 GEMM reads, one float per tensor of the block */
	if (pl.quant == QUANT_FP8)
		ret->other += align_up(pl.tensors * 4);
	ret->weight_bytes = ret->layers + ret->head + ret->embeddings + ret->other;
	if (v)
		ret->vision = vision(&pl, v);

	/* a session: the Mamba layers' conv window (fp32) and SSM state, then the KV caches */
	uint64_t ssm = (uint64_t)dm.H * dm.P * dm.N;
	ssm = a->ssm_state == ENGINE_PRECISION_BF16 ? (ssm * 2 + 3) / 4 * 4 : ssm * 4;
	uint64_t fixed = (uint64_t)n_mamba * ((uint64_t)(dm.K - 1) * dm.conv_dim * 4 + ssm);
	uint64_t kv = 2 * (uint64_t)n_attn * (uint64_t)a->context * (uint64_t)dm.kv_dim * (fp32 ? 4 : 2);
	ret->sessions = a->sessions;
	ret->context = a->context;
	ret->session = fixed + kv;
	ret->scratch = scratch(&pl, &dm, n_mamba, n_attn, n_mlp);
	ret->workspace = DEVICE_PLAN_WORKSPACE;
	ret->reserve = DEVICE_PLAN_RESERVE;
	ret->total = ret->weight_bytes + ret->vision + (uint64_t)a->sessions * ret->session + ret->scratch +
		     ret->workspace + ret->reserve;
	return 0;
}

bool device_plan_fit(struct engine_memory_plan *p, uint64_t free)
{
	uint64_t base = p->total - (uint64_t)p->sessions * p->session;
	p->free = free;
	p->sessions_fit = 0;
	if (base <= free && p->session)
		p->sessions_fit = (int)MIN((free - base) / p->session, (uint64_t)INT32_MAX);
	return p->total <= free;
}

static double gib(uint64_t b)
{
	return (double)b / (double)(1ull << 30);
}

const char *device_plan_describe(const struct engine_memory_plan *p, char *buf, size_t len)
{
	size_t n = 0;
#define ADD(...)                                                                                             \
	do {                                                                                                 \
		if (n < len)                                                                                 \
			n += (size_t)snprintf(buf + n, len - n, __VA_ARGS__);                                \
	} while (0)
	ADD("%.1f GiB of weights (%s)", gib(p->weight_bytes), p->weights);
	if (p->vision)
		ADD(" + %.1f GiB of vision tower", gib(p->vision));
	if (p->sessions)
		ADD(" + %d session%s of %d tokens (%.2f GiB each)", p->sessions, p->sessions == 1 ? "" : "s",
		    p->context, gib(p->session));
	ADD(" + %.2f GiB of scratch and cuBLASLt workspace + %.1f GiB reserve = %.1f GiB",
	    gib(p->scratch + p->workspace), gib(p->reserve), gib(p->total));
#undef ADD
	return buf;
}

const char *device_plan_refusal(const struct engine_memory_plan *p, const char *model, const char *device,
				const struct engine_memory_plan *const *alternatives, char *buf, size_t len)
{
	char what[320], fits[64] = "";
	device_plan_describe(p, what, sizeof(what));
	size_t n = 0;
	int k = 0;
	for (int i = 0; alternatives && alternatives[i]; i++) {
		const struct engine_memory_plan *q = alternatives[i];
		if (q->total > p->free || !strcmp(q->weights, p->weights))
			continue;
		n += (size_t)snprintf(fits + n, n < sizeof(fits) ? sizeof(fits) - n : 0, "%s%s",
				      k ? " or " : "", q->weights);
		k++;
	}
	uint64_t base = p->total - (uint64_t)p->sessions * p->session;
	const char *advice = k				    ? "use --weights " :
			     base <= p->free && p->sessions ? "fewer sessions or a shorter --context-tokens" :
							      "a GPU with more memory";
	snprintf(buf, len, "%s in %s needs %s of device memory; %s has %.1f GiB free: %s%s", model,
		 p->weights, what, device, gib(p->free), advice, k ? fits : "");
	return buf;
}
