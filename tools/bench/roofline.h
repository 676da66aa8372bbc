/* roofline: FLOP and byte counts of one agent step (vision, prefill, decode) from a model's shapes,
 * and the time a device's peak rates allow for them. Pure arithmetic, no engine: holo-bench agent
 * prints it, tests/tools/test-roofline.c checks it on a tiny config against hand-computed values.
 *
 * What is counted (2 FLOPs per multiply-add; batch 1):
 *   - RADIO ViT, per tile of P = (tile/patch)^2 patches and T = P + prefix tokens: the patch
 *     embedding 2*P*(3*patch^2)*W, then per block QKV 6*T*W^2, the output projection 2*T*W^2,
 *     the MLP 4*T*W*M and attention 4*T^2*W (scores and the weighted sum); the mlp1 projector
 *     2*(P*ds^2)*((W/ds^2)*Hp + Hp*d) after the pixel shuffle. LayerNorms, GELU and softmax are
 *     left out (O(T*W), under 1% here).
 *   - Language model, per token: Mamba-2 2*d*(2*d_in + 2*G*N + H) (in_proj) + 2*d_in*d
 *     (out_proj) + 2*K*(d_in + 2*G*N) (conv) + 5*H*P*N (the recurrent state update and its
 *     readout: the chunked prefill form does a little more); attention 2*d*(hq + 2*hkv)*dh +
 *     2*hq*dh*d + 4*hq*dh*keys, keys being the positions it attends to (itself included); MLP
 *     4*d*I (ReLU^2 left out); the lm_head 2*V*d per logits row (prefill: the last position only).
 *   - Decode bytes per token: every matrix once (in_proj, conv, out_proj, q/k/v/o, up/down and
 *     the embedding row at weight_bytes per element, the lm_head at head_bytes); each Mamba layer's SSM and conv
 *     state read and written at state_bytes; each attention layer's K and V rows read for every
 *     key (the new row written) at kv_bytes. Norm weights and biases are left out (O(d) each).
 *   - Roofline time: vision and prefill FLOPs at the GEMM rate, decode bytes at the memory
 *     bandwidth (a batch-1 decode does ~1 FLOP per weight byte, far under any GPU's balance).
 *   - Serving (holo-bench serve): one decode step of S sessions batched reads every matrix once
 *     for all of them and each session's own state and KV rows; it takes the longer of its bytes
 *     at the bandwidth and its S decode tokens' FLOPs at the GEMM rate.
 */
#pragma once

#include <stdint.h>

struct roofline_lm {
	const char *pattern; /* one of M * - per layer */
	int hidden, vocab, intermediate;
	int n_heads, n_kv_heads, head_dim;
	int m_heads, m_head_dim, m_groups, m_state, m_conv_kernel;
	double weight_bytes; /* per matrix element: 2 for bf16, 1.0625 for q8 on 5120-wide rows */
	double head_bytes;   /* per lm_head element; 0: weight_bytes (fp8 keeps the head bf16) */
	int state_bytes;     /* per conv state element, and SSM element without ssm_state_bytes: 4 */
	int ssm_state_bytes; /* per SSM state element: 4 (fp32) or 2 (bf16); 0: state_bytes */
	int kv_bytes;	     /* per KV cache element: 2 (bf16) or 4 */
};

struct roofline_vit {
	int width, depth, mlp;
	int patch, tile;
	int prefix;	 /* class and register tokens in front of the patches */
	int proj_hidden; /* mlp1's hidden size */
	int shuffle;	 /* pixel-shuffle factor: 1 / downsample_ratio (2) */
};

/* FLOPs of one tile through the ViT and the projector into rows of lm_hidden. */
double roofline_tile_flops(const struct roofline_vit *v, int lm_hidden);
/* Image tokens one tile becomes: (tile/patch/shuffle)^2. */
int roofline_tile_tokens(const struct roofline_vit *v);
/* FLOPs of prefilling n tokens after `context` cached ones, with the logits of the last. */
double roofline_prefill_flops(const struct roofline_lm *m, double context, double n);
/* FLOPs and bytes of decoding one token after `context` cached ones (with its logits). */
double roofline_decode_flops(const struct roofline_lm *m, double context);
double roofline_decode_bytes(const struct roofline_lm *m, double context);

/* Jump-forward (docs/policy.md): one forward of a session over k positions after `context`
 * cached ones, as a step's sampled token and the forced tokens appended with it are: every matrix
 * once, the Mamba state read and written once, each position's K and V rows, k positions' FLOPs
 * with the logits of the last alone. k = 1 is one decode token (roofline_decode_bytes and
 * _flops). Its seconds on d: the longer of its bytes at the bandwidth and its FLOPs at the GEMM
 * rate, so a run costs about one token's forward until k reaches the device's balance (FLOP/s
 * over bytes/s, ~300 FLOPs per byte on an H100 against ~1 per weight byte and token). */
double roofline_forward_bytes(const struct roofline_lm *m, double context, int k);
double roofline_forward_flops(const struct roofline_lm *m, double context, int k);
struct roofline_device;
double roofline_forward_seconds(const struct roofline_lm *m, const struct roofline_device *d, double context,
				int k);

/* One agent step: n_tiles tiles, the new turn's text tokens besides the image tokens, and the
 * tokens decoded, after `context` cached tokens. */
struct roofline_step {
	double context;
	int n_tiles, text_tokens, decoded;
	/* results */
	double appended; /* image + text tokens prefilled */
	double vision_flops, prefill_flops, decode_flops, decode_bytes;
};
void roofline_step_count(const struct roofline_lm *m, const struct roofline_vit *v, int lm_hidden,
			 struct roofline_step *s);

/* One batched decode step of `sessions` sessions, each after `context` cached tokens. */
struct roofline_serve {
	double weight_bytes; /* every matrix once, for all sessions */
	double state_bytes;  /* every session's SSM and conv state, read and written */
	double kv_bytes;     /* every session's K and V rows read, the new one written */
	double flops;	     /* sessions x one decode token's */
};
void roofline_serve_step(const struct roofline_lm *m, int sessions, double context,
			 struct roofline_serve *ret);

/* A device's peak rates and memory. */
struct roofline_device {
	const char *name;
	double flops;	   /* dense bf16 tensor-core FLOP/s (fp32 accumulate) */
	double bandwidth;  /* memory bytes/s */
	double fp8_flops;  /* dense fp8 (e4m3) tensor-core FLOP/s; 0: no FP8 (before sm_89) */
	double memory;	   /* bytes, as the driver reports the total */
	int sm;		   /* compute capability x 10: 86, 89, 90, 120 */
	const char *label; /* e.g. "NVIDIA GeForce RTX 4090" */
};
/* "rtx3090", "rtx4090", "rtx5090", "l4", "h100" or "h200" (case-insensitive); NULL for another
 * name. */
const struct roofline_device *roofline_device_find(const char *name);
/* The names, "|"-separated, for usage lines. */
#define ROOFLINE_DEVICES "rtx3090|rtx4090|rtx5090|l4|h100|h200"

/* Seconds the device needs at least: FLOPs at its GEMM rate, bytes at its bandwidth. */
static inline double roofline_seconds_flops(const struct roofline_device *d, double flops)
{
	return flops / d->flops;
}
static inline double roofline_seconds_bytes(const struct roofline_device *d, double bytes)
{
	return bytes / d->bandwidth;
}
/* Seconds of a serve step: its bytes at the bandwidth or its FLOPs at the GEMM rate, the longer. */
static inline double roofline_serve_seconds(const struct roofline_device *d, const struct roofline_serve *s)
{
	double b = roofline_seconds_bytes(d, s->weight_bytes + s->state_bytes + s->kv_bytes);
	double f = roofline_seconds_flops(d, s->flops);
	return b > f ? b : f;
}
