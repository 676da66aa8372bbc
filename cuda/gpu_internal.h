/* cuda module internal: shared between the host C files and the .cu kernels. */
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

struct gpu_context {
	int device;
	void *stream; /* cudaStream_t */
};

/* Translates a cudaError_t to -errno with a debug log; 0 for cudaSuccess. */
int gpu_translate_error(int err, const char *file, int line, const char *what);
#define GPU_CHECK(call) gpu_translate_error((int)(call), __FILE__, __LINE__, #call)

/* Kernel launchers (device pointers, asynchronous on `stream`). */
int gpu_launch_rmsnorm_f32(void *stream, const float *x, const float *w, float *out, int rows,
			   int cols, float eps);

#ifdef __cplusplus
}
#endif
