/* holo-bench engine's GEMM-only rate: the matrix products of a prefill alone, on the model's
 * own weights and shapes, run the way lm_forward() runs them (runs of LM_MAX_BATCH tokens, every
 * layer's matrices, lm_head on the last row; oneDNN for runs of CPU_DNNL_MIN_T rows or more in
 * bf16, cpu_matmul() otherwise and in fp32). Nothing else of the forward runs: the prefill time
 * over this is the share the rest of the forward costs. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "common.h"
#include "cpu.h"
#include "cpu_dnnl.h"
#include "lm.h"
#include "quantized.h"

/* One pass over every product of an n_prompt-token prefill; the flops it did in *flop. */
static int pass(const struct engine_model *m, const struct engine_backend *b, struct cpu_dnnl_weight **dw,
		int n_prompt, float *x, float *y, double *flop)
{
	*flop = 0;
	for (int p = 0; p < n_prompt; p += LM_MAX_BATCH) {
		int T = MIN(LM_MAX_BATCH, n_prompt - p), i = 0;
		for (int l = 0; l < m->cfg.n_layers; l++) {
			const struct tensor *mats[4];
			int n = lm_layer_matrices(&m->layers[l], mats);
			for (int k = 0; k < n; k++, i++) {
				int in = (int)mats[k]->shape[1], out = (int)mats[k]->shape[0];
				int r = dw && T >= CPU_DNNL_MIN_T ?
						cpu_dnnl_matmul(dw[i], x, (size_t)in, T, y, (size_t)out,
								false) :
						cpu_matmul(backend_cpu_weights(b, mats[k]), x, (size_t)in, T,
							   y, (size_t)out, false);
				if (r < 0)
					return r;
				*flop += 2.0 * T * in * out;
			}
		}
	}
	*flop += 2.0 * (double)m->lm_head.shape[0] * (double)m->lm_head.shape[1];
	return cpu_matmul(backend_cpu_weights(b, &m->lm_head), x, (size_t)m->lm_head.shape[1], 1, y,
			  (size_t)m->lm_head.shape[0], false);
}

double bench_gemm_only_seconds(const struct engine_model *m, const struct engine_backend *b, bool bf16,
			       int n_prompt, double *ret_flop)
{
	/* a holo-quantize checkpoint's records: no plain products to time (its prefill
	 * dequantizes them, lm_forward.c) */
	if (model_quant_format(m) >= 0 || quantized_dtype_format(m->lm_head.dtype) >= 0)
		return -EOPNOTSUPP;
	/* where oneDNN has no bf16 products (a CPU with AVX2 alone) bf16 precision runs them on
	 * cpu_matmul() as fp32 does, on activations rounded to bf16 (lm_forward.c's product()) */
	if (bf16 && !cpu_dnnl_bf16_supported())
		bf16 = false;
	int n_mats = 0;
	size_t max_in = (size_t)m->lm_head.shape[1], max_out = (size_t)m->lm_head.shape[0];
	for (int l = 0; l < m->cfg.n_layers; l++) {
		const struct tensor *mats[4];
		int n = lm_layer_matrices(&m->layers[l], mats);
		for (int k = 0; k < n; k++) {
			max_in = MAX(max_in, (size_t)mats[k]->shape[1]);
			max_out = MAX(max_out, (size_t)mats[k]->shape[0]);
		}
		n_mats += n;
	}
	size_t rows = (size_t)MIN(n_prompt, LM_MAX_BATCH);
	float *x = malloc(rows * max_in * sizeof(float));
	float *y = malloc(rows * max_out * sizeof(float));
	struct cpu_dnnl_weight **dw = bf16 ? calloc((size_t)MAX(n_mats, 1), sizeof(*dw)) : NULL;
	double secs = -ENOMEM;
	if (!x || !y || (bf16 && !dw))
		goto out;
	for (size_t i = 0; i < rows * max_in; i++)
		x[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
	if (bf16) {
		const char *v = getenv("HOLOD_CPU_GEMM_WEIGHTS");
		enum cpu_dnnl_layout layout =
			v && strcmp(v, "reordered") == 0 ? CPU_DNNL_REORDERED : CPU_DNNL_PLAIN;
		cpu_round_bf16_rows(x, max_in, (int)rows, (int)max_in);
		for (int l = 0, i = 0; l < m->cfg.n_layers; l++) {
			const struct tensor *mats[4];
			int n = lm_layer_matrices(&m->layers[l], mats);
			for (int k = 0; k < n; k++, i++) {
				int r = cpu_dnnl_weight_create(backend_cpu_weights(b, mats[k]), layout,
							       &dw[i]);
				if (r < 0) {
					secs = r;
					goto out;
				}
			}
		}
	}
	int r = cpu_reserve_scratch(cpu_matmul_scratch_bytes((int)max_in));
	double flop = 0;
	/* the first pass creates the primitives and faults the weights in */
	if (r == 0)
		r = pass(m, b, dw, n_prompt, x, y, &flop);
	uint64_t t0 = time_mono_ns();
	if (r == 0)
		r = pass(m, b, dw, n_prompt, x, y, &flop);
	secs = r < 0 ? r : (double)(time_mono_ns() - t0) / 1e9;
	*ret_flop = flop;
out:
	for (int i = 0; dw && i < n_mats; i++)
		cpu_dnnl_weight_destroy(dw[i]);
	free(dw);
	free(x);
	free(y);
	return secs;
}
