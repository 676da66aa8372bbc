/* The vision encoder's matrices prepared for oneDNN (vision_cpu.h's struct vision_gemms), and the
 * products the CPU encoder runs through them in bf16 precision. */
#include "vision_cpu.h"

#include <errno.h>
#include <stdlib.h>

#include "cpu.h"
#include "cpu_dnnl.h"

void vision_gemms_destroy(struct vision_gemms *g)
{
	if (!g)
		return;
	cpu_dnnl_weight_destroy(g->embedder);
	cpu_dnnl_weight_destroy(g->mlp1_fc1);
	cpu_dnnl_weight_destroy(g->mlp1_fc3);
	for (int i = 0; g->blocks && i < g->depth; i++)
		for (int k = 0; k < 4; k++)
			cpu_dnnl_weight_destroy(g->blocks[i].m[k]);
	free(g->blocks);
	free(g);
}

int vision_gemms_create(const struct vision_weights *w, enum cpu_dnnl_layout layout, struct vision_gemms **ret)
{
	struct vision_gemms *g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	g->depth = w->depth;
	g->blocks = calloc((size_t)(w->depth > 0 ? w->depth : 1), sizeof(*g->blocks));
	if (!g->blocks) {
		free(g);
		return -ENOMEM;
	}
	/* the patch embedding and the projector read their rows in place: reordering them bought
	 * nothing measurable (vision_gemms_create()'s contract) */
	int r = cpu_dnnl_weight_create(&w->embedder, CPU_DNNL_PLAIN, &g->embedder);
	if (r == 0)
		r = cpu_dnnl_weight_create(&w->mlp1_fc1, CPU_DNNL_PLAIN, &g->mlp1_fc1);
	if (r == 0)
		r = cpu_dnnl_weight_create(&w->mlp1_fc3, CPU_DNNL_PLAIN, &g->mlp1_fc3);
	for (int i = 0; i < w->depth && r == 0; i++) {
		const struct vision_block *b = &w->blocks[i];
		const struct tensor *mats[4] = {&b->qkv_w, &b->proj_w, &b->fc1_w, &b->fc2_w};
		for (int k = 0; k < 4 && r == 0; k++)
			r = cpu_dnnl_weight_create(mats[k], layout, &g->blocks[i].m[k]);
	}
	if (r < 0) {
		vision_gemms_destroy(g);
		return r;
	}
	*ret = g;
	return 0;
}

int vision_gemm(const struct cpu_dnnl_weight *dw, const struct tensor *w, float *x, size_t ldx, int T,
		float *y, size_t ldy, bool accumulate)
{
	if (dw) {
		cpu_round_bf16_rows(x, ldx, T, (int)w->shape[1]);
		int r = cpu_dnnl_matmul(dw, x, ldx, T, y, ldy, accumulate);
		if (r != -ENOTSUP)
			return r;
	}
	return cpu_matmul(w, x, ldx, T, y, ldy, accumulate);
}
