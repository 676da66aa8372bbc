/* engine: pixel shuffle v2 and the mlp1 projector (model.md 4.6, 4.7). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "cpu.h"
#include "vision.h"

void vision_shuffle_norm(const float *features, int rows, int cols, int D, int s, const float *g,
			 float *out)
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
					       features + ((size_t)(s * i + di) * cols + (size_t)(s * j + dj)) * D,
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

int vision_project(const struct vision_weights *w, const float *features, int rows, int cols,
		   float *out)
{
	return vision_project_gemms(w, NULL, features, rows, cols, out);
}

int vision_project_gemms(const struct vision_weights *w, const struct vision_gemms *gm,
			 const float *features, int rows, int cols, float *out)
{
	return vision_project_profile(w, gm, features, rows, cols, out, NULL);
}

/* vision_project_profile() in bf16 precision: the norm and ReLU^2 write the bf16 inputs of
 * the products (vision_bf16.c). */
static int project_bf16(const struct vision_weights *w, const struct vision_gemms *gm,
			const float *features, int rows, int cols, float *out,
			struct vision_profile *prof)
{
	const int s = w->shuffle, D = w->width, P = w->proj_in, H = w->proj_hidden;
	const int n = (rows / s) * (cols / s);
	uint16_t *xb = malloc(sizeof(uint16_t) * (size_t)n * P);
	uint16_t *hb = malloc(sizeof(uint16_t) * (size_t)n * H);
	float *h = malloc(sizeof(float) * (size_t)n * H), *g = malloc(sizeof(float) * (size_t)P);
	uint64_t t0;
	int r = -ENOMEM;

	if (!xb || !hb || !h || !g)
		goto out;
	cpu_tensor_to_f32(&w->mlp1_norm, 0, (size_t)P, g);
	t0 = vision_prof_start(prof);
	if ((r = vision_shuffle_norm_bf16(features, rows, cols, D, s, g, xb)) < 0)
		goto out;
	vision_prof_end(prof, VISION_OP_PROJ_ROWS, t0);
	t0 = vision_prof_start(prof);
	if ((r = vision_gemm_bf16(gm->mlp1_fc1, &w->mlp1_fc1, xb, n, h, (size_t)H, false)) < 0)
		goto out;
	vision_prof_end(prof, VISION_OP_PROJ_GEMM, t0);
	t0 = vision_prof_start(prof);
	vision_relu2_bf16_rows(h, (size_t)H, n, H, hb);
	vision_prof_end(prof, VISION_OP_PROJ_ROWS, t0);
	t0 = vision_prof_start(prof);
	r = vision_gemm_bf16(gm->mlp1_fc3, &w->mlp1_fc3, hb, n, out, (size_t)w->out_dim, false);
	vision_prof_end(prof, VISION_OP_PROJ_GEMM, t0);
out:
	free(xb);
	free(hb);
	free(h);
	free(g);
	return r;
}

int vision_project_profile(const struct vision_weights *w, const struct vision_gemms *gm,
			   const float *features, int rows, int cols, float *out,
			   struct vision_profile *prof)
{
	const int s = w->shuffle, D = w->width, P = w->proj_in, H = w->proj_hidden;
	const int orow = rows / s, ocol = cols / s, n = orow * ocol;
	float *x = NULL, *h = NULL, *g = NULL;
	uint64_t t0;
	int r = -ENOMEM;

	if (rows % s != 0 || cols % s != 0)
		return -EINVAL;
	if (gm)
		return project_bf16(w, gm, features, rows, cols, out, prof);
	x = malloc(sizeof(float) * (size_t)n * P);
	h = malloc(sizeof(float) * (size_t)n * H);
	g = malloc(sizeof(float) * (size_t)P);
	if (!x || !h || !g)
		goto out;
	cpu_tensor_to_f32(&w->mlp1_norm, 0, (size_t)P, g);

	t0 = vision_prof_start(prof);
	vision_shuffle_norm(features, rows, cols, D, s, g, x);
	vision_prof_end(prof, VISION_OP_PROJ_ROWS, t0);
	t0 = vision_prof_start(prof);
	if ((r = vision_gemm(gm ? gm->mlp1_fc1 : NULL, &w->mlp1_fc1, x, (size_t)P, n, h, (size_t)H,
			     false)) < 0)
		goto out;
	vision_prof_end(prof, VISION_OP_PROJ_GEMM, t0);
	t0 = vision_prof_start(prof);
	vision_relu2(h, (size_t)n * H);
	vision_prof_end(prof, VISION_OP_PROJ_ROWS, t0);
	t0 = vision_prof_start(prof);
	r = vision_gemm(gm ? gm->mlp1_fc3 : NULL, &w->mlp1_fc3, h, (size_t)H, n, out,
			(size_t)w->out_dim, false);
	vision_prof_end(prof, VISION_OP_PROJ_GEMM, t0);
out:
	free(x);
	free(h);
	free(g);
	return r;
}
