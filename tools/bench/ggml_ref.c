/* GGML's Q8_0 and Q4_0 in this project's q8 records (ggml_ref.h). */
#include "ggml_ref.h"

#include <errno.h>
#include <math.h>
#include <string.h>

void ggml_ref_q8_0_block(const float *x, int n, int8_t q[QUANT_BLOCK], uint16_t *d)
{
	float amax = 0;
	for (int i = 0; i < n; i++)
		amax = fmaxf(amax, fabsf(x[i]));
	const float dd = amax / ((1 << 7) - 1);
	const float id = dd ? 1.0f / dd : 0.0f;
	*d = quant_f32_to_f16(dd); /* GGML_FP32_TO_FP16: round to nearest even */
	for (int i = 0; i < QUANT_BLOCK; i++)
		q[i] = i < n ? (int8_t)roundf(x[i] * id) : 0;
}

void ggml_ref_q4_0_block(const float *x, int n, uint8_t q[QUANT_BLOCK], uint16_t *d)
{
	float amax = 0, max = 0;
	for (int i = 0; i < n; i++)
		if (amax < fabsf(x[i])) {
			amax = fabsf(x[i]);
			max = x[i];
		}
	const float dd = max / -8;
	const float id = dd ? 1.0f / dd : 0.0f;
	*d = quant_f32_to_f16(dd);
	for (int i = 0; i < QUANT_BLOCK; i++) {
		int v = i < n ? (int)(int8_t)(x[i] * id + 8.5f) : 8; /* GGML's padding: zeros */
		q[i] = (uint8_t)(v > 15 ? 15 : v);
	}
}

int ggml_ref_row(enum quant_format f, const float *w, int64_t cols, void *row)
{
	size_t bytes;
	if ((f != QUANT_Q8 && f != QUANT_Q4) || quant_row_bytes(QUANT_Q8, cols, &bytes) < 0)
		return -EINVAL;
	for (int64_t i = 0; i < cols; i++) {
		if (!isfinite(w[i]))
			return -EINVAL;
		if (fabsf(w[i]) > QUANT_MAX_ABS)
			return -ERANGE;
	}
	memset(row, 0, bytes);
	const int64_t nb = quant_blocks(cols);
	for (int64_t b = 0; b < nb; b++) {
		const int n =
			(int)(cols - b * QUANT_BLOCK < QUANT_BLOCK ? cols - b * QUANT_BLOCK : QUANT_BLOCK);
		const float *x = w + b * QUANT_BLOCK;
		uint16_t d;
		if (f == QUANT_Q8) {
			int8_t q[QUANT_BLOCK];
			ggml_ref_q8_0_block(x, n, q, &d);
			/* the padding columns keep zero codes, as the reference quantizer's */
			memcpy((int8_t *)row + b * QUANT_BLOCK, q, (size_t)n);
		} else {
			/* d (q - 8) as a q8 code q - 8 in [-8, 7] times the same d */
			uint8_t q[QUANT_BLOCK];
			ggml_ref_q4_0_block(x, n, q, &d);
			for (int j = 0; j < n; j++)
				((int8_t *)row)[b * QUANT_BLOCK + j] = (int8_t)(q[j] - 8);
		}
		((uint16_t *)quant_q8_scales(row, cols))[b] = d;
	}
	return 0;
}
