/* FLOP and byte counts of an agent step (see roofline.h for what is counted). */
#include "roofline.h"

#include <stddef.h>
#include <strings.h>

/* Peak rates from NVIDIA's spec sheets (dense: the sheets' sparse 2:4 figures halved), memory
 * as the driver reports its total (MiB):
 *   - H100 SXM5 80 GB and H200 SXM 141 GB datasheets: "BF16 Tensor Core 1,979 teraFLOPS" and
 *     "FP8 Tensor Core 3,958 teraFLOPS" with sparsity, so 989 and 1979 dense; GPU memory
 *     bandwidth 3.35 TB/s and 4.8 TB/s; 81559 and 143771 MiB; sm_90;
 *   - L4 datasheet: BF16 242 and FP8 485 teraFLOPS with sparsity (121 and 242.5 dense);
 *     300 GB/s; 23034 MiB; sm_89;
 *   - GeForce RTX 4090 (NVIDIA Ada GPU Architecture whitepaper, appendix table): peak FP16/BF16
 *     Tensor TFLOPS with FP32 accumulate 165.2, FP8 330.3 (dense); 1008 GB/s GDDR6X; 24564 MiB;
 *     sm_89;
 *   - GeForce RTX 3090 (NVIDIA Ampere GA102 GPU Architecture whitepaper): peak FP16/BF16 Tensor
 *     TFLOPS with FP32 accumulate 71 (dense); no FP8; 936 GB/s; 24576 MiB; sm_86;
 *   - GeForce RTX 5090 (NVIDIA RTX Blackwell GPU Architecture whitepaper): FP16/BF16 Tensor
 *     with FP32 accumulate 209.5, FP8 419 (dense); 1792 GB/s GDDR7; 32607 MiB; sm_120. */
#define MIB (1024.0 * 1024.0)
static const struct roofline_device devices[] = {
	{"rtx3090", 71e12, 936e9, 0, 24576 * MIB, 86, "NVIDIA GeForce RTX 3090"},
	{"rtx4090", 165.2e12, 1008e9, 330.3e12, 24564 * MIB, 89, "NVIDIA GeForce RTX 4090"},
	{"rtx5090", 209.5e12, 1792e9, 419e12, 32607 * MIB, 120, "NVIDIA GeForce RTX 5090"},
	{"l4", 121e12, 300e9, 242.5e12, 23034 * MIB, 89, "NVIDIA L4"},
	{"h100", 989e12, 3.35e12, 1979e12, 81559 * MIB, 90, "NVIDIA H100 80GB HBM3"},
	{"h200", 989e12, 4.8e12, 1979e12, 143771 * MIB, 90, "NVIDIA H200"},
};

const struct roofline_device *roofline_device_find(const char *name)
{
	for (size_t i = 0; i < sizeof(devices) / sizeof(devices[0]); i++)
		if (name && strcasecmp(name, devices[i].name) == 0)
			return &devices[i];
	return NULL;
}

int roofline_tile_tokens(const struct roofline_vit *v)
{
	int side = v->tile / v->patch / v->shuffle;
	return side * side;
}

double roofline_tile_flops(const struct roofline_vit *v, int lm_hidden)
{
	double W = v->width, M = v->mlp, side = (double)(v->tile / v->patch);
	double P = side * side, T = P + v->prefix;
	double s2 = (double)v->shuffle * v->shuffle;
	double embed = 2 * P * (3.0 * v->patch * v->patch) * W;
	double block = 6 * T * W * W + 2 * T * W * W + 4 * T * W * M + 4 * T * T * W;
	double proj = 2 * (P / s2) * (W * s2 * v->proj_hidden + (double)v->proj_hidden * lm_hidden);
	return embed + v->depth * block + proj;
}

struct per_token {
	double flops;	  /* everything but attention's key-dependent part and the lm_head */
	double attn_keys; /* FLOPs per attended key, summed over attention layers */
	double weights;	  /* matrix elements read per token (the embedding row included) */
	double head;	  /* the lm_head's elements */
	double ssm, conv; /* Mamba state elements (SSM, conv), read once and written once */
	double kv_row;	  /* KV elements per position, summed over attention layers (K and V) */
};

static struct per_token per_token(const struct roofline_lm *m)
{
	struct per_token p = {0};
	double d = m->hidden, d_in = (double)m->m_heads * m->m_head_dim;
	double gn = (double)m->m_groups * m->m_state, hd = m->head_dim;
	for (const char *c = m->pattern; *c; c++) {
		if (*c == 'M') {
			double in_rows = 2 * d_in + 2 * gn + m->m_heads;
			double conv = (double)m->m_conv_kernel * (d_in + 2 * gn);
			double ssm = (double)m->m_heads * m->m_head_dim * m->m_state;
			p.flops += 2 * d * in_rows + 2 * d_in * d + 2 * conv + 5 * ssm;
			p.weights += d * in_rows + conv + d_in * d;
			p.ssm += ssm;
			p.conv += (double)(m->m_conv_kernel - 1) * (d_in + 2 * gn);
		} else if (*c == '*') {
			double qkv = d * (m->n_heads + 2.0 * m->n_kv_heads) * hd;
			double o = (double)m->n_heads * hd * d;
			p.flops += 2 * qkv + 2 * o;
			p.attn_keys += 4.0 * m->n_heads * hd;
			p.weights += qkv + o;
			p.kv_row += 2.0 * m->n_kv_heads * hd;
		} else if (*c == '-') {
			p.flops += 4 * d * m->intermediate;
			p.weights += 2 * d * m->intermediate;
		}
	}
	p.weights += d;		       /* the embedding row */
	p.head = (double)m->vocab * d; /* the lm_head */
	return p;
}

/* Bytes of one session's Mamba state (SSM + conv) */
static double state_bytes(const struct roofline_lm *m, const struct per_token *p)
{
	int ssm = m->ssm_state_bytes ? m->ssm_state_bytes : m->state_bytes;
	return p->ssm * ssm + p->conv * m->state_bytes;
}

/* Bytes of every matrix once, the lm_head at its own bytes per element */
static double head_and_weights(const struct roofline_lm *m, const struct per_token *p)
{
	return p->weights * m->weight_bytes + p->head * (m->head_bytes > 0 ? m->head_bytes : m->weight_bytes);
}

double roofline_prefill_flops(const struct roofline_lm *m, double context, double n)
{
	struct per_token p = per_token(m);
	/* token i (1..n) attends to context + i keys */
	double keys = n * context + n * (n + 1) / 2;
	return n * p.flops + keys * p.attn_keys + 2.0 * m->vocab * m->hidden;
}

double roofline_decode_flops(const struct roofline_lm *m, double context)
{
	return roofline_prefill_flops(m, context, 1);
}

double roofline_decode_bytes(const struct roofline_lm *m, double context)
{
	struct per_token p = per_token(m);
	return head_and_weights(m, &p) + 2 * state_bytes(m, &p) + (context + 1) * p.kv_row * m->kv_bytes;
}

double roofline_forward_bytes(const struct roofline_lm *m, double context, int k)
{
	struct per_token p = per_token(m);
	/* position i (0..k-1) reads context + i keys and writes its own row */
	double rows = k * (context + 1) + (double)k * (k - 1) / 2;
	return head_and_weights(m, &p) + 2 * state_bytes(m, &p) + rows * p.kv_row * m->kv_bytes;
}

double roofline_forward_flops(const struct roofline_lm *m, double context, int k)
{
	/* a prefill of k positions, the logits of the last alone */
	return roofline_prefill_flops(m, context, k);
}

double roofline_forward_seconds(const struct roofline_lm *m, const struct roofline_device *d, double context,
				int k)
{
	double b = roofline_seconds_bytes(d, roofline_forward_bytes(m, context, k));
	double f = roofline_seconds_flops(d, roofline_forward_flops(m, context, k));
	return b > f ? b : f;
}

void roofline_serve_step(const struct roofline_lm *m, int sessions, double context, struct roofline_serve *ret)
{
	struct per_token p = per_token(m);
	ret->weight_bytes = head_and_weights(m, &p);
	ret->state_bytes = sessions * 2 * state_bytes(m, &p);
	ret->kv_bytes = sessions * (context + 1) * p.kv_row * m->kv_bytes;
	ret->flops = sessions * roofline_decode_flops(m, context);
}

void roofline_step_count(const struct roofline_lm *m, const struct roofline_vit *v, int lm_hidden,
			 struct roofline_step *s)
{
	s->appended = (double)s->n_tiles * roofline_tile_tokens(v) + s->text_tokens;
	s->vision_flops = s->n_tiles * roofline_tile_flops(v, lm_hidden);
	s->prefill_flops = roofline_prefill_flops(m, s->context, s->appended);
	s->decode_flops = s->decode_bytes = 0;
	for (int j = 0; j < s->decoded; j++) {
		double c = s->context + s->appended + j;
		s->decode_flops += roofline_decode_flops(m, c);
		s->decode_bytes += roofline_decode_bytes(m, c);
	}
}
