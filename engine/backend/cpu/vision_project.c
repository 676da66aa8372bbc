/* engine: pixel shuffle v2 and the mlp1 projector (model.md 4.6, 4.7). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "cpu.h"
#include "vision_cpu.h"

void vision_shuffle_norm(const float *features, int rows, int cols, int D, int s, const float *g, float *out)
{
	const int orow = rows / s, ocol = cols / s, P = D * s * s;

	/* Token (i, j) is F[s*i + di][s*j + dj] concatenated over di (outer), dj (inner), then
	 * RMS-normalised. */
	for (int i = 0; i < orow; i++)
		for (int j = 0; j < ocol; j++) {
			float *t = out + ((size_t)i * ocol + j) * P;
			double sq = 0;
			float rms;

			for (int di = 0; di < s; di++)
				for (int dj = 0; dj < s; dj++)
					memcpy(t + (size_t)(di * s + dj) * D,
					       features +
						       ((size_t)(s * i + di) * cols + (size_t)(s * j + dj)) *
							       D,
					       sizeof(float) * (size_t)D);
			for (int c = 0; c < P; c++)
				sq += (double)t[c] * t[c];
			rms = (float)(1.0 / sqrt(sq / P + (double)VISION_RMS_EPS));
			for (int c = 0; c < P; c++)
				t[c] = t[c] * rms * g[c];
		}
}

void vision_relu2(float *h, size_t n)
{
	for (size_t k = 0; k < n; k++) {
		float v = h[k] > 0.0f ? h[k] : 0.0f;

		h[k] = v * v;
	}
}

int vision_project(const struct vision_weights *w, const float *features, int rows, int cols, float *out)
{
	return vision_project_gemms(w, NULL, features, rows, cols, out);
}

int vision_project_gemms(const struct vision_weights *w, const struct vision_gemms *gm, const float *features,
			 int rows, int cols, float *out)
{
	return vision_project_profile(w, gm, features, rows, cols, out, NULL);
}

/* The projector's first half: pixel shuffle, RMSNorm, mlp1's first product into h [n][H]
 * (bf16: the norm writes the product's bf16 input, vision_bf16.c). */
int vision_project_first(const struct vision_weights *w, const struct vision_gemms *gm, const float *features,
			 int rows, int cols, float *h, struct vision_profile *prof)
{
	const int s = w->shuffle, D = w->width, P = w->proj_in, H = w->proj_hidden;
	const int n = (rows / s) * (cols / s);
	float *g = NULL;
	void *x = NULL;
	uint64_t t0;
	int r = -ENOMEM;

	if (rows % s != 0 || cols % s != 0)
		return -EINVAL;
	g = malloc(sizeof(float) * (size_t)P);
	x = malloc((gm ? sizeof(uint16_t) : sizeof(float)) * (size_t)n * P);
	if (!g || !x)
		goto out;
	cpu_tensor_to_f32(&w->mlp1_norm, 0, (size_t)P, g);
	t0 = vision_prof_start(prof);
	if (gm) {
		if ((r = vision_shuffle_norm_bf16(features, rows, cols, D, s, g, x)) < 0)
			goto out;
	} else {
		vision_shuffle_norm(features, rows, cols, D, s, g, x);
	}
	vision_prof_end(prof, VISION_OP_PROJ_ROWS, t0);
	t0 = vision_prof_start(prof);
	if (gm)
		r = vision_gemm_bf16(gm->mlp1_fc1, &w->mlp1_fc1, x, n, h, (size_t)H, false);
	else
		r = vision_gemm(NULL, &w->mlp1_fc1, x, (size_t)P, n, h, (size_t)H, false);
	vision_prof_end(prof, VISION_OP_PROJ_GEMM, t0);
out:
	free(x);
	free(g);
	return r;
}

/* The second half: ReLU^2 of h (in place in fp32; bf16: into the product's bf16 input) and
 * mlp1's second product into out. */
int vision_project_second(const struct vision_weights *w, const struct vision_gemms *gm, float *h, int n,
			  float *out, struct vision_profile *prof)
{
	const int H = w->proj_hidden;
	uint16_t *hb = NULL;
	uint64_t t0;
	int r;

	if (gm && !(hb = malloc(sizeof(uint16_t) * (size_t)n * H)))
		return -ENOMEM;
	t0 = vision_prof_start(prof);
	if (gm)
		vision_relu2_bf16_rows(h, (size_t)H, n, H, hb);
	else
		vision_relu2(h, (size_t)n * H);
	vision_prof_end(prof, VISION_OP_PROJ_ROWS, t0);
	t0 = vision_prof_start(prof);
	if (gm)
		r = vision_gemm_bf16(gm->mlp1_fc3, &w->mlp1_fc3, hb, n, out, (size_t)w->out_dim, false);
	else
		r = vision_gemm(NULL, &w->mlp1_fc3, h, (size_t)H, n, out, (size_t)w->out_dim, false);
	vision_prof_end(prof, VISION_OP_PROJ_GEMM, t0);
	free(hb);
	return r;
}

int vision_project_profile(const struct vision_weights *w, const struct vision_gemms *gm,
			   const float *features, int rows, int cols, float *out, struct vision_profile *prof)
{
	const int s = w->shuffle, n = (rows / s) * (cols / s);
	int r;

	if (rows % s != 0 || cols % s != 0)
		return -EINVAL;
	float *h = malloc(sizeof(float) * (size_t)n * w->proj_hidden);
	if (!h)
		return -ENOMEM;
	r = vision_project_first(w, gm, features, rows, cols, h, prof);
	if (r == 0)
		r = vision_project_second(w, gm, h, n, out, prof);
	free(h);
	return r;
}

int vision_encode_gemms(const struct backend_vision_tower *t, const struct vision_gemms *gm,
			const float *pixels, int n_tiles, float *out)
{
	const struct vision_weights *w = t->w;
	size_t tile_floats = (size_t)3 * t->pre->tile_size * t->pre->tile_size;
	size_t rows_out = (size_t)t->tokens_per_tile * (size_t)w->out_dim;
	float *feat;
	int r = 0;

	if (!pixels || !out || n_tiles < 0)
		return -EINVAL;
	feat = malloc(sizeof(float) * (size_t)t->grid * t->grid * w->width);
	if (!feat)
		return -ENOMEM;
	for (int i = 0; i < n_tiles && r >= 0; i++) {
		r = vision_vit_forward_gemms(w, gm, pixels + (size_t)i * tile_floats, t->grid, t->grid,
					     t->pos, feat);
		if (r >= 0)
			r = vision_project_gemms(w, gm, feat, t->grid, t->grid, out + (size_t)i * rows_out);
	}
	free(feat);
	return r < 0 ? r : 0;
}
