/* cuda module internal: shared between the host C files and the .cu kernels. */
#pragma once

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

struct gpu_context {
	int device;
	void *stream;		     /* cudaStream_t */
	struct gpu_profile *profile; /* NULL while profiling is off (profile.c) */
};

/* Frees the profile state (gpu_context_destroy()). */
void gpu_profile_free(struct gpu_context *g);
/* Counts one copy of `bytes` in direction `kind` (a cudaMemcpyKind) while profiling is on. */
void gpu_profile_copy(struct gpu_context *g, int kind, size_t bytes);

/* Makes g's device the calling thread's current one (CUDA's current device is per host thread,
 * and another context, library or thread's caller may have set another): every gpu.h function
 * that allocates, copies, launches, records or captures calls it first, so memory lands on g's
 * device and launches go to g's stream from any thread. -EINVAL for a NULL g (before any use
 * of it: it runs ahead of the callers' argument checks), -ENODEV/-EIO as GPU_CHECK. */
int gpu_bind(struct gpu_context *g);
#define GPU_BIND_OR_RETURN(g)                                                                                \
	do {                                                                                                 \
		int gpu_bind_r_ = gpu_bind(g);                                                               \
		if (gpu_bind_r_ < 0)                                                                         \
			return gpu_bind_r_;                                                                  \
	} while (0)

/* Translates a cudaError_t to -errno with a debug log; 0 for cudaSuccess. */
int gpu_translate_error(int err, const char *file, int line, const char *what);
#define GPU_CHECK(call) gpu_translate_error((int)(call), __FILE__, __LINE__, #call)

/* Kernel launchers (device pointers, asynchronous on `stream`). */
int gpu_launch_rmsnorm_f32(void *stream, const float *x, const float *w, float *out, int rows, int cols,
			   float eps);

/* The Mamba-2 kernels behind gpu.h's gpu_mamba_* (mamba.c checks the shapes first; the sizes
 * and pointers here are those already checked). w_bf16 / out_bf16: the operand is bf16, else
 * fp32. */
#define GPU_MAMBA_CONV_WINDOW 8 /* registers of the conv window: GPU_MAMBA_MAX_CONV_K (gpu.h) */
int gpu_launch_mamba_conv_silu(void *stream, int T, int conv_dim, int K, const float *raw, size_t ld_raw,
			       const void *w, int w_bf16, const float *bias, float *conv_state, float *out,
			       size_t ld_out);
/* The SSD workspace for T positions in floats, and the offsets of its four parts. */
size_t gpu_mamba_ssd_layout(int T, int H, int P, int N, int G, int Q, size_t off[4]);
int gpu_launch_mamba_ssd(void *stream, int T, int H, int P, int N, int G, int Q, const float *xbc,
			 size_t ld_xbc, const float *dt_raw, size_t ld_dt, const float *dt_bias,
			 const float *a_log, const float *d_skip, float dt_min, float dt_max, void *state,
			 int state_bf16, float *y, size_t ld_y, float *workspace);
/* state_bf16: the SSM state is stored in bf16 (loaded to fp32, stored rounded), else fp32. */
int gpu_launch_mamba_ssm_step(void *stream, int H, int P, int N, int G, const float *xbc, const float *dt_raw,
			      const float *dt_bias, const float *a_log, const float *d_skip, float dt_min,
			      float dt_max, void *state, int state_bf16, float *y);
/* One decode position of each of `rows` sequences (gpu.h, struct gpu_seq_row). */
struct gpu_seq_row;
int gpu_launch_mamba_conv_rows(void *stream, int rows, int conv_dim, int K, const float *raw, size_t ld_raw,
			       const void *w, int w_bf16, const float *bias, const struct gpu_seq_row *seq,
			       size_t conv_off, float *out, size_t ld_out);
int gpu_launch_mamba_ssm_step_rows(void *stream, int rows, int H, int P, int N, int G, const float *xbc,
				   size_t ld_xbc, const float *dt_raw, size_t ld_dt, const float *dt_bias,
				   const float *a_log, const float *d_skip, float dt_min, float dt_max,
				   const struct gpu_seq_row *seq, size_t ssm_off, int state_bf16, float *y,
				   size_t ld_y);
int gpu_launch_mamba_gated_rmsnorm(void *stream, int T, int d_in, int G, const float *y, size_t ld_y,
				   const float *z, size_t ld_z, const float *w, float eps, void *out,
				   size_t ld_out, int out_bf16);

#ifdef __cplusplus
}
#endif
