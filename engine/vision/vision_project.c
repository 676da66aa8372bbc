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
	const int s = w->shuffle, D = w->width, P = w->proj_in, H = w->proj_hidden;
	const int orow = rows / s, ocol = cols / s, n = orow * ocol;
	float *x = NULL, *h = NULL, *g = NULL;
	int r = -ENOMEM;

	if (rows % s != 0 || cols % s != 0)
		return -EINVAL;
	x = malloc(sizeof(float) * (size_t)n * P);
	h = malloc(sizeof(float) * (size_t)n * H);
	g = malloc(sizeof(float) * (size_t)P);
	if (!x || !h || !g)
		goto out;
	cpu_tensor_to_f32(&w->mlp1_norm, 0, (size_t)P, g);

	vision_shuffle_norm(features, rows, cols, D, s, g, x);
	if ((r = vision_gemm(gm ? gm->mlp1_fc1 : NULL, &w->mlp1_fc1, x, (size_t)P, n, h, (size_t)H,
			     false)) < 0)
		goto out;
	vision_relu2(h, (size_t)n * H);
	r = vision_gemm(gm ? gm->mlp1_fc3 : NULL, &w->mlp1_fc3, h, (size_t)H, n, out,
			(size_t)w->out_dim, false);
out:
	free(x);
	free(h);
	free(g);
	return r;
}
