/* GGML's Q8_0 and Q4_0 block formats, from ggml-quants.c's reference quantizers
 * (quantize_row_q8_0_ref, quantize_row_q4_0_ref), for the comparisons of docs/quantization.md:
 * tests/quant/test-quant.c (RMS error per element) and holo-bench quant-error (the logits of a
 * model whose layers hold them).
 *
 * DESIGN: both are a q8 record of this project (engine/quant/quant.h) with other codes: Q8_0's
 * w = d q (q in [-127, 127], d fp16) is one as it is, Q4_0's w = d (q - 8) (q in [0, 15]) is the
 * code q - 8 in [-8, 7] times the same fp16 d, so a model runs on them through the q8 kernels
 * and the same exact dequantization (llama.cpp's Q4_0 x Q8_0 product is the same integer sum
 * of (q - 8) times the activations' codes). q4's records cannot hold Q4_0 (their d has 6
 * significant bits and is never negative).
 */
#pragma once

#include <stdint.h>

#include "quant.h"

/* One block of n <= QUANT_BLOCK values (GGML pads a row to whole blocks with zeros, which
 * change neither the scale nor the other codes): the codes (q8: [-127, 127]; q4: [0, 15]) and
 * the fp16 scale d; GGML dequantizes q8 as q * d, q4 as (q - 8) * d. */
void ggml_ref_q8_0_block(const float *x, int n, int8_t q[QUANT_BLOCK], uint16_t *d);
void ggml_ref_q4_0_block(const float *x, int n, uint8_t q[QUANT_BLOCK], uint16_t *d);

/* A row of `cols` values as Q8_0 (f = QUANT_Q8) or Q4_0 (QUANT_Q4) written as one q8 record
 * (quant_row_bytes(QUANT_Q8) bytes, padding zero): quant_row_to_f32(QUANT_Q8) of it gives GGML's
 * dequantized values exactly (GGML's Q4_0 gives -0 for a zero code times a negative d). The refusals of
 * quant_row_from_f32(): -EINVAL for a NaN or infinite value, cols out of range or another format, -ERANGE for
 * |w| > QUANT_MAX_ABS (row untouched). */
int ggml_ref_row(enum quant_format f, const float *w, int64_t cols, void *row);
