/* engine internal: the row kernel of decode's update of a Mamba SSM state stored in bf16
 * (cpu_ssm.c; lm_ssm_scan_s16() in lm.h runs it).
 *
 * Not a public header: only engine/ sources (and white-box tests) include it. */
#pragma once

#include <stdint.h>

/* One row of n state entries: v[i] = a * s[i] + b * x[i] in fp32 (s widened from bf16), s[i] =
 * v[i] rounded to nearest even (NaN kept quiet), and the return value sum_i v[i] c[i] over the
 * unrounded v, in the variant's order of fp32 sums. x, c: n floats, not overlapping s. */
float cpu_ssm_row_bf16(uint16_t *s, float a, float b, const float *x, const float *c, int n);

/* The variant (cpu_isa.h): "portable" or "avx512"; NULL the most capable (what the first call
 * chose). Returns 0, -EINVAL (unknown name) or -ENOTSUP (not on this CPU); for tests. */
int cpu_ssm_select(const char *name);
