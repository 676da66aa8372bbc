/* holo-bench agent's counting (tools/bench/roofline.c) on a tiny config, against values worked
 * out by hand below from the formulas of roofline.h. */
#include "roofline.h"
#include "test.h"

TEST_DEFINE_GLOBALS;

/* pattern "M*-", d = 8, V = 16, I = 12, 2 query heads and 1 KV head of 4, Mamba H = 2, P = 4,
 * G = 1, N = 2, K = 3; bf16 weights and KV, fp32 state. Per token:
 *   Mamba: d_in = 8, G*N = 2, in_proj rows 2*8 + 2*2 + 2 = 22, conv 3*(8 + 4) = 36, SSM 2*4*2 = 16
 *          FLOPs 2*8*22 + 2*8*8 + 2*36 + 5*16 = 352 + 128 + 72 + 80 = 632
 *          weights 8*22 + 36 + 8*8 = 276; state 16 + 2*(8 + 4) = 40
 *   attention: q/k/v 8*(2 + 2)*4 = 128, o 2*4*8 = 64: FLOPs 2*128 + 2*64 = 384, 4*2*4 = 32 per
 *          key; weights 192; K and V 2*1*4 = 8 per position
 *   MLP: FLOPs 4*8*12 = 384, weights 2*8*12 = 192
 *   sum: 1400 FLOPs + 32 per key; lm_head 2*16*8 = 256 per logits row; weights 660 + 16*8 + 8
 *          (lm_head, embedding row) = 796 */
static const struct roofline_lm lm = {
	.pattern = "M*-",
	.hidden = 8,
	.vocab = 16,
	.intermediate = 12,
	.n_heads = 2,
	.n_kv_heads = 1,
	.head_dim = 4,
	.m_heads = 2,
	.m_head_dim = 4,
	.m_groups = 1,
	.m_state = 2,
	.m_conv_kernel = 3,
	.weight_bytes = 2,
	.state_bytes = 4,
	.kv_bytes = 2,
};

/* ViT: width 8, 2 blocks, MLP 16, 2-px patches of 8-px tiles (16 patches), 1 prefix token
 * (T = 17), projector hidden 6, shuffle 2, into an 8-wide LM:
 *   patch embedding 2*16*(3*2*2)*8 = 3072
 *   block 6*17*64 + 2*17*64 + 4*17*8*16 + 4*17*17*8 = 6528 + 2176 + 8704 + 9248 = 26656, x2
 *   projector 2*(16/4)*(8*4*6 + 6*8) = 8*240 = 1920
 *   tile: 3072 + 53312 + 1920 = 58304 FLOPs, (8/2/2)^2 = 4 image tokens */
static const struct roofline_vit vit = {
	.width = 8,
	.depth = 2,
	.mlp = 16,
	.patch = 2,
	.tile = 8,
	.prefix = 1,
	.proj_hidden = 6,
	.shuffle = 2,
};

int main(void)
{
	CHECK_INT_EQ(roofline_tile_tokens(&vit), 4);
	CHECK_INT_EQ(roofline_tile_flops(&vit, 8), 58304);
	/* 3 tokens after 5: keys 3*5 + 3*4/2 = 21; 3*1400 + 21*32 + 256 */
	CHECK_INT_EQ(roofline_prefill_flops(&lm, 5, 3), 5128);
	/* one token after 5: 6 keys */
	CHECK_INT_EQ(roofline_decode_flops(&lm, 5), 1400 + 6 * 32 + 256);
	/* 796*2 weight bytes + 40*4 state bytes read and written + 6 positions * 8 * 2 */
	CHECK_INT_EQ(roofline_decode_bytes(&lm, 5), 1592 + 320 + 96);

	/* a step: 2 tiles and 1 text token (9 appended) after 5, then 2 tokens decoded */
	struct roofline_step s = {.context = 5, .n_tiles = 2, .text_tokens = 1, .decoded = 2};
	roofline_step_count(&lm, &vit, 8, &s);
	CHECK_INT_EQ(s.appended, 9);
	CHECK_INT_EQ(s.vision_flops, 2 * 58304);
	/* keys 9*5 + 9*10/2 = 90: 9*1400 + 90*32 + 256 */
	CHECK_INT_EQ(s.prefill_flops, 15736);
	/* after 14 and 15 tokens: 15 and 16 keys */
	CHECK_INT_EQ(s.decode_flops, (1400 + 15 * 32 + 256) + (1400 + 16 * 32 + 256));
	CHECK_INT_EQ(s.decode_bytes, (1912 + 15 * 16) + (1912 + 16 * 16));

	/* the datasheet rates: 989 TFLOP/s, 3.35 and 4.8 TB/s */
	const struct roofline_device *h100 = roofline_device_find("H100");
	const struct roofline_device *h200 = roofline_device_find("h200");
	REQUIRE(h100 && h200);
	CHECK_NEAR(roofline_seconds_flops(h100, 989e12), 1.0, 1e-12);
	CHECK_NEAR(roofline_seconds_bytes(h100, 3.35e12), 1.0, 1e-12);
	CHECK_NEAR(roofline_seconds_bytes(h200, 4.8e12), 1.0, 1e-12);
	CHECK(roofline_device_find("a100") == NULL);
	/* the consumer cards (issue 29): bandwidth, memory, FP8 only from sm_89 */
	const struct roofline_device *r3090 = roofline_device_find("RTX3090");
	const struct roofline_device *r4090 = roofline_device_find("rtx4090");
	const struct roofline_device *r5090 = roofline_device_find("rtx5090");
	const struct roofline_device *l4 = roofline_device_find("l4");
	REQUIRE(r3090 && r4090 && r5090 && l4);
	CHECK_NEAR(roofline_seconds_bytes(r4090, 1008e9), 1.0, 1e-12);
	CHECK_NEAR(roofline_seconds_bytes(r3090, 936e9), 1.0, 1e-12);
	CHECK(r3090->sm == 86 && r3090->fp8_flops == 0 && r4090->sm == 89 && l4->sm == 89);
	CHECK_NEAR(r4090->fp8_flops / r4090->flops, 2.0, 1e-3);
	CHECK_NEAR(h100->fp8_flops / h100->flops, 2.0, 2e-3);
	CHECK(r3090->memory == 24.0 * (1 << 30) && r5090->memory > 31.5 * (1 << 30));

	/* the head at its own bytes per element (fp8 keeps it bf16): 16*8 head elements at 2
	 * bytes instead of 1, 128 more bytes per decode token */
	struct roofline_lm fp8 = lm;
	fp8.weight_bytes = 1;
	fp8.head_bytes = 2;
	struct roofline_lm one = lm;
	one.weight_bytes = 1;
	CHECK_NEAR(roofline_decode_bytes(&fp8, 5) - roofline_decode_bytes(&one, 5), 128.0, 1e-9);

	/* 3 sessions after 5 tokens, batched: the weights once (1592 bytes), 3 x 320 state bytes,
	 * 3 x 96 KV bytes, 3 x 1848 FLOPs; memory-bound on both (2840 / 3.35e12 s) */
	struct roofline_serve sv;
	roofline_serve_step(&lm, 3, 5, &sv);
	CHECK_INT_EQ(sv.weight_bytes, 1592);
	CHECK_INT_EQ(sv.state_bytes, 960);
	CHECK_INT_EQ(sv.kv_bytes, 288);
	CHECK_INT_EQ(sv.flops, 3 * 1848);
	CHECK_NEAR(roofline_serve_seconds(h100, &sv), 2840 / 3.35e12, 1e-24);
	/* a device with no bandwidth to speak of is bound by its FLOPs instead */
	struct roofline_device slow = {.name = "slow", .flops = 1e3, .bandwidth = 1e12};
	CHECK_NEAR(roofline_serve_seconds(&slow, &sv), 3 * 1848 / 1e3, 1e-9);
	/* a bf16 SSM state: its 2*4*2 = 16 elements at 2 bytes, the conv window's (3-1)*(8+4) = 24
	 * at 4: 3 x 2 x 128 bytes */
	struct roofline_lm lm16 = lm;
	lm16.ssm_state_bytes = 2;
	roofline_serve_step(&lm16, 3, 5, &sv);
	CHECK_INT_EQ(sv.state_bytes, 768);
	CHECK_INT_EQ(sv.weight_bytes, 1592);

	/* Jump-forward: one forward over k positions. k = 1 is a decode token; k = 3 after 5
	 * tokens reads the weights and the state once (1592 + 320) and 6 + 7 + 8 KV rows of 16
	 * bytes, and does a prefill's FLOPs of 3 positions (one logits row) */
	CHECK_NEAR(roofline_forward_bytes(&lm, 5, 1), roofline_decode_bytes(&lm, 5), 1e-9);
	CHECK_NEAR(roofline_forward_flops(&lm, 5, 1), roofline_decode_flops(&lm, 5), 1e-9);
	CHECK_NEAR(roofline_forward_bytes(&lm, 5, 3), 1592 + 320 + 21 * 16, 1e-9);
	CHECK_NEAR(roofline_forward_flops(&lm, 5, 3), roofline_prefill_flops(&lm, 5, 3), 1e-9);
	/* memory-bound on the H100: the run of 3 costs its bytes, little more than one token's
	 * forward and far less than three */
	CHECK_NEAR(roofline_forward_seconds(&lm, h100, 5, 3), (1592 + 320 + 336) / 3.35e12, 1e-24);
	CHECK(roofline_forward_seconds(&lm, h100, 5, 3) < 1.2 * roofline_forward_seconds(&lm, h100, 5, 1));
	/* compute-bound on a device without FLOPs to spare: k tokens' FLOPs */
	CHECK_NEAR(roofline_forward_seconds(&lm, &slow, 5, 3), roofline_prefill_flops(&lm, 5, 3) / 1e3, 1e-9);
	return test_exit();
}
