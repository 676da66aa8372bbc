/* Decode's row kernel for a bf16-stored SSM state (cpu_ssm.h): the portable loop and AVX-512F.
 * The state is the largest thing a decode step reads and writes per session, so the kernel
 * touches each bf16 entry once: widen, update, add its product with C, round and store. */
#include "cpu_ssm.h"

#include <errno.h>
#include <stddef.h>

#include "common.h"
#include "cpu_isa.h"
#include "model.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_X86 1
#endif

typedef float (*row_fn)(uint16_t *, float, float, const float *, const float *, int);

static float row_portable(uint16_t *s, float a, float b, const float *x, const float *c, int n)
{
	float acc = 0;
	for (int i = 0; i < n; i++) {
		float v = a * bf16_to_f32(s[i]) + b * x[i];
		s[i] = f32_to_bf16(v);
		acc += v * c[i];
	}
	return acc;
}

#ifdef HAVE_X86
#define AVX512 __attribute__((target("avx512f")))

/* f32_to_bf16() on 16 lanes: round to nearest even, a NaN's payload kept with the quiet bit */
AVX512 static inline __m256i round16(__m512 v)
{
	__m512i u = _mm512_castps_si512(v), one = _mm512_set1_epi32(1);
	__m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), one);
	__m512i bias = _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff));
	__m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, bias), 16);
	__mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
	r = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
	return _mm512_cvtepi32_epi16(r);
}

AVX512 static float row_avx512(uint16_t *s, float a, float b, const float *x, const float *c, int n)
{
	__m512 va = _mm512_set1_ps(a), vb = _mm512_set1_ps(b), acc = _mm512_setzero_ps();
	int i = 0;
	for (; i + 16 <= n; i += 16) {
		__m256i h = _mm256_loadu_si256((const __m256i *)(s + i));
		__m512 sv = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
		__m512 v = _mm512_fmadd_ps(va, sv, _mm512_mul_ps(vb, _mm512_loadu_ps(x + i)));
		acc = _mm512_fmadd_ps(v, _mm512_loadu_ps(c + i), acc);
		_mm256_storeu_si256((__m256i *)(s + i), round16(v));
	}
	float sum = _mm512_reduce_add_ps(acc);
	return i < n ? sum + row_portable(s + i, a, b, x + i, c + i, n - i) : sum;
}
#endif

static const enum cpu_isa isas[] = {
	CPU_ISA_PORTABLE,
#ifdef HAVE_X86
	CPU_ISA_AVX512,
#endif
};
static const row_fn variants[] = {
	row_portable,
#ifdef HAVE_X86
	row_avx512,
#endif
};

float cpu_ssm_row_bf16(uint16_t *s, float a, float b, const float *x, const float *c, int n)
{
	return variants[cpu_isa_pick(isas, ARRAY_SIZE(isas))](s, a, b, x, c, n);
}

enum cpu_isa cpu_ssm_isa(void)
{
	return isas[cpu_isa_pick(isas, ARRAY_SIZE(isas))];
}
