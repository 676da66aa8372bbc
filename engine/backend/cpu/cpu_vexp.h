/* engine internal: exp over vectors of floats, for the CPU kernels' softmaxes and activations.
 *
 * Not a public header: only engine/ sources (and white-box tests) include it.
 *
 * Cephes' expf: x clamped to [-87, 88], n = round(x / ln 2), r = x - n ln 2 in two parts, a
 * degree-5 polynomial for exp(r) on [-ln2/2, ln2/2], and 2^n added to its exponent bits.
 * Relative error below 2e-7 over the range (test-vision-bf16 checks it against exp()); the
 * clamp keeps 2^n and the result normal floats: exp(-87) is 1.6e-38, exp(88) 1.7e38.
 *
 * Written once over GCC/clang vector extensions: CPU_VEXP_DEFINE(name, VF, VI) defines
 * `static inline VF name(VF x)` for a vector type VF of floats and VI of as many int32_t. The
 * x86 vector types are such types, so cpu_vexp512 (AVX-512F) and cpu_vexp256 (AVX2) are defined
 * on them in files compiled with those instruction sets.
 */
#pragma once

#include <stdint.h>

#define CPU_VEXP_DEFINE(name, VF, VI)                                                                        \
	static inline VF name(VF x)                                                                          \
	{                                                                                                    \
		const VF lo = (VF){0} + -87.0f, hi = (VF){0} + 88.0f;                                        \
		x = (VF)(((VI)x & (VI)(x > lo)) | ((VI)lo & ~(VI)(x > lo)));                                 \
		x = (VF)(((VI)x & (VI)(x < hi)) | ((VI)hi & ~(VI)(x < hi)));                                 \
		/* round to nearest by the 1.5 * 2^23 trick: |x / ln 2| < 2^22 */                            \
		VF n = x * 1.44269504088896341f + 12582912.0f;                                               \
		n = n - 12582912.0f;                                                                         \
		VF r = x - n * 0.693359375f;                                                                 \
		r = r - n * -2.12194440e-4f;                                                                 \
		VF p = (VF){0} + 1.9875691500e-4f;                                                           \
		p = p * r + 1.3981999507e-3f;                                                                \
		p = p * r + 8.3334519073e-3f;                                                                \
		p = p * r + 4.1665795894e-2f;                                                                \
		p = p * r + 1.6666665459e-1f;                                                                \
		p = p * r + 5.0000001201e-1f;                                                                \
		p = p * r * r + r + 1.0f;                                                                    \
		return (VF)((VI)p + (__builtin_convertvector(n, VI) << 23));                                 \
	}

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif
#if defined(__AVX512F__)
typedef int32_t cpu_vexp_i32x16 __attribute__((vector_size(64)));
CPU_VEXP_DEFINE(cpu_vexp512, __m512, cpu_vexp_i32x16)
#endif
#if defined(__AVX2__)
typedef int32_t cpu_vexp_i32x8 __attribute__((vector_size(32)));
CPU_VEXP_DEFINE(cpu_vexp256, __m256, cpu_vexp_i32x8)
#endif
