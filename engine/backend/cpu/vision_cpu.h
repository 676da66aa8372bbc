/* engine internal: the RADIO ViT and the mlp1 projector on the CPU (model.md 4), the CPU
 * backend's vision encoder (vision_vit.c, vision_project.c, vision_gemms.c, vision_bf16.c): the
 * tower's weights (vision_weights.h) and what vision/ derives for its handle
 * (backend.h's struct backend_vision_tower) come in as arguments; no handle is read here.
 *
 * Not a public header: only engine/ sources (and white-box tests) include it.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "common.h"
#include "cpu_dnnl.h"
#include "engine.h"
#include "model.h"
#include "vision_weights.h"

/* The ViT on one image of rows x cols patches: `pixels` [3][rows*patch][cols*patch] normalized;
 * `pos` the matching vision_pos_embed() output. Writes the rows * cols patch-token features
 * (prefix tokens dropped) to features [rows * cols][width]. Threads: runs on the CPU pool.
 * Returns 0, -ENOMEM. */
int vision_vit_forward(const struct vision_weights *w, const float *pixels, int rows, int cols,
		       const float *pos, float *features);

/* bf16 precision on the CPU: the encoder's matrices prepared for oneDNN (cpu_dnnl.h), whose
 * products then take bf16-rounded inputs (vision_gemm()). */
struct vision_gemms {
	struct cpu_dnnl_weight *embedder, *mlp1_fc1, *mlp1_fc3;
	struct {
		struct cpu_dnnl_weight *m[4]; /* qkv, proj, fc1, fc2 */
	} * blocks;
	int depth;
};
/* The ViT blocks' matrices in `layout`, the patch embedding's and the projector's plain (read
 * in place). On RADIO-H's blocks (1,032 rows, 1280 x 3840 to 5120 x 1280 weights) oneDNN's
 * product on plain rows re-copies the weight per block of rows and ran at half the rate of the
 * reordered copy; the projector's (256 rows) gained nothing from it (docs/benchmarks.md, issue
 * 21). Returns 0, -ENOMEM or -ENOTSUP (cpu_dnnl_weight_create()). w must outlive *ret. */
int vision_gemms_create(const struct vision_weights *w, enum cpu_dnnl_layout layout,
			struct vision_gemms **ret);
/* Accepts NULL. */
void vision_gemms_destroy(struct vision_gemms *g);
/* y (+)= W x: with dw, x rounded to bf16 in place (it must be the product's input only) and
 * the product through oneDNN (cpu_matmul() where oneDNN has no fast kernel); without,
 * cpu_matmul(). Returns 0, -ENOMEM. */
int vision_gemm(const struct cpu_dnnl_weight *dw, const struct tensor *w, float *x, size_t ldx, int T,
		float *y, size_t ldy, bool accumulate);
/* vision_vit_forward(), vision_project() and the whole encode of t's n_tiles tiles (the CPU
 * backend's vision_encode_tiles() in one call; engine_vision_encode()'s rows) with the products
 * of gm (NULL: fp32, cpu_matmul()). */
int vision_vit_forward_gemms(const struct vision_weights *w, const struct vision_gemms *gm,
			     const float *pixels, int rows, int cols, const float *pos, float *features);
int vision_project_gemms(const struct vision_weights *w, const struct vision_gemms *gm, const float *features,
			 int rows, int cols, float *out);
int vision_encode_gemms(const struct backend_vision_tower *t, const struct vision_gemms *gm,
			const float *pixels, int n_tiles, float *out);

/* Time per step of the CPU encoder (holo-bench vision's split), added up over calls, in ns.
 * The caller owns it; one forward at a time writes it. */
enum vision_op {
	VISION_OP_EMBED,     /* patchify, the patch embedding's product, position, prefix tokens */
	VISION_OP_NORM,	     /* the blocks' LayerNorms and the final one */
	VISION_OP_GEMM,	     /* the blocks' matrix products (qkv, proj, fc1, fc2) */
	VISION_OP_BIAS,	     /* bias adds not fused into another step */
	VISION_OP_ATTENTION, /* scores, softmax, weighted sum (the qkv bias when fused into it) */
	VISION_OP_GELU,	     /* fc1's bias and the GELU */
	VISION_OP_PROJ_ROWS, /* pixel shuffle + RMSNorm and ReLU^2 of the projector */
	VISION_OP_PROJ_GEMM, /* the projector's two products */
	VISION_OP_COUNT,
};
struct vision_profile {
	uint64_t ns[VISION_OP_COUNT];
};
const char *vision_op_name(enum vision_op op);
/* The clock of a timed step: 0 without a profile. */
static inline uint64_t vision_prof_start(const struct vision_profile *prof)
{
	return prof ? time_mono_ns() : 0;
}
static inline void vision_prof_end(struct vision_profile *prof, enum vision_op op, uint64_t t0)
{
	if (prof)
		prof->ns[op] += time_mono_ns() - t0;
}
/* vision_vit_forward_gemms() and vision_project_gemms() adding their steps' times to prof
 * (NULL: not timed). */
int vision_vit_forward_profile(const struct vision_weights *w, const struct vision_gemms *gm,
			       const float *pixels, int rows, int cols, const float *pos, float *features,
			       struct vision_profile *prof);
int vision_project_profile(const struct vision_weights *w, const struct vision_gemms *gm,
			   const float *features, int rows, int cols, float *out, struct vision_profile *prof);

/* One tile's ViT forward as separate steps, so that an encode can stop between two blocks and
 * go on later (engine_vision_encode_begin()): vision_vit_forward_profile() is init, embed, the
 * depth blocks, final, finish, so the steps give its features bit for bit. `bf16` chooses the
 * buffers of the products of a vision_gemms (then every step takes one) or of cpu_matmul() (gm
 * NULL); the weights must outlive the run. The steps run on the CPU pool. */
struct vision_vit_run {
	const struct vision_weights *w;
	bool bf16;
	int rows, cols, L;
	int block;	      /* the next block */
	const float *pending; /* bf16: the residual bias not yet added to x (in vecs) */
	float *x, *patches, *vecs, *qkv, *hid;
	float *a, *att;		       /* fp32 */
	uint16_t *a_b, *att_b, *hid_b; /* bf16 */
	void *att_scratch;	       /* bf16 attention's, grown with the pool's thread count */
	size_t scratch_bytes;
};
/* Returns 0 or -ENOMEM (*run zeroed). */
int vision_vit_run_init(struct vision_vit_run *run, const struct vision_weights *w, bool bf16, int rows,
			int cols);
/* Accepts a zeroed run. */
void vision_vit_run_finish(struct vision_vit_run *run);
/* Patch embedding, position, prefix tokens of a new tile (pixels and pos as
 * vision_vit_forward() takes them); the blocks start again. 0, -EINVAL (gm against bf16),
 * -ENOMEM. */
int vision_vit_run_embed(struct vision_vit_run *run, const struct vision_gemms *gm, const float *pixels,
			 const float *pos, struct vision_profile *prof);
/* The next block. 0, -EINVAL (none left, gm against bf16), -ENOMEM, -EIO. */
int vision_vit_run_block(struct vision_vit_run *run, const struct vision_gemms *gm,
			 struct vision_profile *prof);
/* After the last block: the final norm into features [rows * cols][width]. 0, -EINVAL. */
int vision_vit_run_final(struct vision_vit_run *run, float *features, struct vision_profile *prof);

/* vision_project_profile() in two halves, the steps of a resumable encode: the pixel shuffle,
 * RMSNorm and mlp1's first product into h [(rows/s) * (cols/s)][proj_hidden]; then ReLU^2
 * (h is overwritten) and the second product of those n rows into out. 0, -EINVAL, -ENOMEM. */
int vision_project_first(const struct vision_weights *w, const struct vision_gemms *gm, const float *features,
			 int rows, int cols, float *h, struct vision_profile *prof);
int vision_project_second(const struct vision_weights *w, const struct vision_gemms *gm, float *h, int n,
			  float *out, struct vision_profile *prof);

/* Pixel shuffle v2 (model.md 4.6) and mlp1 (4.7) on one tile's features [rows][cols][width]
 * (rows, cols divisible by the shuffle factor): writes (rows/s) * (cols/s) rows of out_dim
 * floats to out. Returns 0, -ENOMEM. */
int vision_project(const struct vision_weights *w, const float *features, int rows, int cols, float *out);

/* The ViT's and projector's steps on the CPU, as the forwards above call them (so the CUDA
 * kernels are checked against the CPU's own operations). Rows have ld elements between them.
 * vision_layernorm_rows: out = (in - mean) / sqrt(var + VISION_LN_EPS) * g + b per row (mean and
 * variance summed in double); vision_bias_rows: x += b; vision_bias_gelu_rows: x = gelu(x + b)
 * with the exact (erf) GELU. Run on the CPU pool. */
void vision_layernorm_rows(const float *in, size_t ld_in, float *out, size_t ld_out, int rows, int cols,
			   const float *g, const float *b);
void vision_bias_rows(float *x, size_t ld, int rows, int cols, const float *b);
void vision_bias_gelu_rows(float *x, size_t ld, int rows, int cols, const float *b);
/* The same steps in bf16 precision (vision_bf16.c, kernels of vision_rows.h), each writing the
 * bf16 rows (dense, `cols` apart) that the next product reads through vision_gemm_bf16().
 * vision_layernorm_bf16_rows: x += add (stored back; add NULL: none), out = LN(x) * g + b;
 * vision_bias_gelu_bf16_rows: out = gelu(x + b); vision_bias_add_rows: x += b in fp32;
 * vision_relu2_bf16_rows: out = max(x, 0)^2; vision_shuffle_norm_bf16: vision_shuffle_norm()
 * with bf16 output (-ENOMEM). Run on the CPU pool. */
void vision_layernorm_bf16_rows(float *x, size_t ldx, const float *add, int rows, int cols, const float *g,
				const float *b, uint16_t *out);
void vision_bias_gelu_bf16_rows(const float *x, size_t ldx, int rows, int cols, const float *b, uint16_t *out);
void vision_bias_add_rows(float *x, size_t ldx, int rows, int cols, const float *b);
void vision_relu2_bf16_rows(const float *x, size_t ldx, int rows, int cols, uint16_t *out);
int vision_shuffle_norm_bf16(const float *features, int rows, int cols, int D, int s, const float *g,
			     uint16_t *out);
/* vision_attention() in bf16 precision on the qkv product before its bias: out [L][D] (bf16) =
 * softmax(q k^T / sqrt(D / heads)) v per head with q, k, v = bf16(qkv + qkv_bias), the scores
 * and weighted sums as oneDNN products per head and block of query rows, the probabilities
 * rounded to bf16 before the weighted sum and normalised after it. Where oneDNN has no fast
 * kernel, vision_attention()'s fp32 path. scratch: vision_attention_bf16_scratch() bytes, so
 * that a forward allocates them once. Returns 0, -EINVAL, -ENOMEM, -EIO. */
int vision_attention_bf16(const float *qkv, const float *qkv_bias, int L, int D, int heads, void *scratch,
			  uint16_t *out);
/* The bytes of vision_attention_bf16()'s scratch (64-byte aligned) at the pool's current
 * thread count; 0 for impossible sizes. */
size_t vision_attention_bf16_scratch(int L, int D, int heads);
/* y (+)= W x for T dense rows x of bf16 (W's `in` columns each): through oneDNN with dw, else
 * cpu_matmul() on the same values. Returns 0, -ENOMEM. */
int vision_gemm_bf16(const struct cpu_dnnl_weight *dw, const struct tensor *w, const uint16_t *x, int T,
		     float *y, size_t ldy, bool accumulate);
/* Bidirectional multi-head attention over L tokens: qkv [L][3 * D] (q | k | v, head h at
 * columns h * D / heads), out [L][D] = softmax(q k^T / sqrt(D / heads)) v per head. Needs the
 * CPU matmul scratch for L inputs. Returns 0, -ENOMEM. */
int vision_attention(const float *qkv, float *out, int L, int D, int heads);
/* pixels [3][rows * p][cols * p] to patches [rows * cols][3 * p * p] (channel, row, column). */
void vision_patchify(const float *pixels, int rows, int cols, int p, float *patches);
/* Pixel shuffle v2 of features [rows][cols][D] by s, each of the (rows/s) * (cols/s) tokens of
 * s * s * D values RMS-normalised (sum of squares in double, VISION_RMS_EPS) and scaled by g. */
void vision_shuffle_norm(const float *features, int rows, int cols, int D, int s, const float *g, float *out);
/* mlp1's activation in place: h = max(h, 0)^2. */
void vision_relu2(float *h, size_t n);
