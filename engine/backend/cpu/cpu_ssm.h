/* engine internal: the row kernel of decode's update of a Mamba SSM state stored in bf16
 * (cpu_ssm.c; lm_ssm_scan_s16() in lm.h runs it).
 *
 * Not a public header: only engine/ sources (and white-box tests) include it. */
#pragma once

#include <stdint.h>

#include "cpu_isa.h"

/* One row of n state entries: v[i] = a * s[i] + b * x[i] in fp32 (s widened from bf16), s[i] =
 * v[i] rounded to nearest even (NaN kept quiet), and the return value sum_i v[i] c[i] over the
 * unrounded v, in the variant's order of fp32 sums. x, c: n floats, not overlapping s. */
float cpu_ssm_row_bf16(uint16_t *s, float a, float b, const float *x, const float *c, int n);

/* The variant's set (portable or avx512): cpu_isa_pick()'s choice (cpu_isa.h). */
enum cpu_isa cpu_ssm_isa(void);
