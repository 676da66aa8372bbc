/* The Mamba-2 kernels' entry points (gpu.h, "the Mamba-2 mixer"): shape and argument checks, then
 * the launchers in mamba_*.cu on the context's stream. */
#include "gpu.h"
#include "gpu_internal.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include "common.h"

_Static_assert(GPU_MAMBA_MAX_CONV_K == GPU_MAMBA_CONV_WINDOW,
	       "the conv kernel keeps GPU_MAMBA_MAX_CONV_K inputs in registers");

/* Limits that keep every index and grid dimension of the kernels in range: each size at most
 * MAMBA_MAX_DIM, T at most MAMBA_MAX_T, chunks times heads within a grid's x dimension. */
#define MAMBA_MAX_DIM 4096
#define MAMBA_MAX_T (1 << 20)

static bool dims_ok(const struct gpu_mamba_dims *dm, int T)
{
	if (!dm || T < 1 || T > MAMBA_MAX_T)
		return false;
	if (dm->n_heads < 1 || dm->n_heads > MAMBA_MAX_DIM || dm->head_dim < 1 ||
	    dm->head_dim > MAMBA_MAX_DIM || dm->state < 1 || dm->state > MAMBA_MAX_DIM || dm->groups < 1 ||
	    dm->groups > MAMBA_MAX_DIM || dm->n_heads % dm->groups != 0)
		return false;
	if (dm->conv_k < 1 || dm->conv_k > GPU_MAMBA_MAX_CONV_K || dm->chunk < 1 ||
	    dm->chunk > GPU_MAMBA_MAX_CHUNK)
		return false;
	uint64_t chunks = ((uint64_t)T + (uint64_t)dm->chunk - 1) / (uint64_t)dm->chunk;
	return chunks * (uint64_t)dm->n_heads <= INT32_MAX;
}

static bool state_dtype_ok(const struct gpu_mamba_dims *dm)
{
	return dm->state_dtype == GPU_DTYPE_F32 || dm->state_dtype == GPU_DTYPE_BF16;
}

static size_t d_in_of(const struct gpu_mamba_dims *dm)
{
	return (size_t)dm->n_heads * (size_t)dm->head_dim;
}

static size_t conv_dim_of(const struct gpu_mamba_dims *dm)
{
	return d_in_of(dm) + 2 * (size_t)dm->groups * (size_t)dm->state;
}

int gpu_mamba_conv_silu(struct gpu_context *g, const struct gpu_mamba_dims *dm, int T, const float *raw,
			size_t ld_raw, const void *w, enum gpu_dtype w_dtype, const float *bias,
			float *conv_state, float *out, size_t ld_out)
{
	GPU_BIND_OR_RETURN(g);
	if (!g || !dims_ok(dm, T) || !raw || !w || !out || (dm->conv_k > 1 && !conv_state) ||
	    (w_dtype != GPU_DTYPE_F32 && w_dtype != GPU_DTYPE_BF16))
		return -EINVAL;
	size_t cd = conv_dim_of(dm);
	if (ld_raw < cd || ld_out < cd)
		return -EINVAL;
	return gpu_launch_mamba_conv_silu(g->stream, T, (int)cd, dm->conv_k, raw, ld_raw, w,
					  w_dtype == GPU_DTYPE_BF16, bias, conv_state, out, ld_out);
}

size_t gpu_mamba_ssd_workspace_bytes(const struct gpu_mamba_dims *dm, int T)
{
	if (!dims_ok(dm, T))
		return 0;
	size_t off[4];
	return gpu_mamba_ssd_layout(T, dm->n_heads, dm->head_dim, dm->state, dm->groups, dm->chunk, off) *
	       sizeof(float);
}

int gpu_mamba_ssd(struct gpu_context *g, const struct gpu_mamba_dims *dm, int T, const float *xbc,
		  size_t ld_xbc, const float *dt_raw, size_t ld_dt, const float *dt_bias, const float *a_log,
		  const float *d_skip, float dt_min, float dt_max, void *state, float *y, size_t ld_y,
		  void *workspace)
{
	GPU_BIND_OR_RETURN(g);
	if (!g || !dims_ok(dm, T) || !state_dtype_ok(dm) || !xbc || !dt_raw || !dt_bias || !a_log ||
	    !d_skip || !state || !y || !workspace)
		return -EINVAL;
	if (ld_xbc < conv_dim_of(dm) || ld_dt < (size_t)dm->n_heads || ld_y < d_in_of(dm))
		return -EINVAL;
	return gpu_launch_mamba_ssd(g->stream, T, dm->n_heads, dm->head_dim, dm->state, dm->groups, dm->chunk,
				    xbc, ld_xbc, dt_raw, ld_dt, dt_bias, a_log, d_skip, dt_min, dt_max, state,
				    dm->state_dtype == GPU_DTYPE_BF16, y, ld_y, workspace);
}

int gpu_mamba_ssm_step(struct gpu_context *g, const struct gpu_mamba_dims *dm, const float *xbc,
		       const float *dt_raw, const float *dt_bias, const float *a_log, const float *d_skip,
		       float dt_min, float dt_max, void *state, float *y)
{
	GPU_BIND_OR_RETURN(g);
	if (!g || !dims_ok(dm, 1) || !state_dtype_ok(dm) || !xbc || !dt_raw || !dt_bias || !a_log ||
	    !d_skip || !state || !y)
		return -EINVAL;
	return gpu_launch_mamba_ssm_step(g->stream, dm->n_heads, dm->head_dim, dm->state, dm->groups, xbc,
					 dt_raw, dt_bias, a_log, d_skip, dt_min, dt_max, state,
					 dm->state_dtype == GPU_DTYPE_BF16, y);
}

/* Rows of one batch: within a grid's y and z dimensions. */
static bool rows_ok(int rows)
{
	return rows >= 1 && rows <= 65535;
}

int gpu_mamba_conv_silu_rows(struct gpu_context *g, const struct gpu_mamba_dims *dm, int rows,
			     const float *raw, size_t ld_raw, const void *w, enum gpu_dtype w_dtype,
			     const float *bias, const struct gpu_seq_row *seq, size_t conv_off, float *out,
			     size_t ld_out)
{
	GPU_BIND_OR_RETURN(g);
	if (!g || !dims_ok(dm, 1) || !rows_ok(rows) || !raw || !w || !seq || !out ||
	    (w_dtype != GPU_DTYPE_F32 && w_dtype != GPU_DTYPE_BF16))
		return -EINVAL;
	size_t cd = conv_dim_of(dm);
	if (ld_raw < cd || ld_out < cd)
		return -EINVAL;
	return gpu_launch_mamba_conv_rows(g->stream, rows, (int)cd, dm->conv_k, raw, ld_raw, w,
					  w_dtype == GPU_DTYPE_BF16, bias, seq, conv_off, out, ld_out);
}

int gpu_mamba_ssm_step_rows(struct gpu_context *g, const struct gpu_mamba_dims *dm, int rows,
			    const float *xbc, size_t ld_xbc, const float *dt_raw, size_t ld_dt,
			    const float *dt_bias, const float *a_log, const float *d_skip, float dt_min,
			    float dt_max, const struct gpu_seq_row *seq, size_t ssm_off, float *y, size_t ld_y)
{
	GPU_BIND_OR_RETURN(g);
	if (!g || !dims_ok(dm, 1) || !state_dtype_ok(dm) || !rows_ok(rows) || !xbc || !dt_raw || !dt_bias ||
	    !a_log || !d_skip || !seq || !y)
		return -EINVAL;
	if (ld_xbc < conv_dim_of(dm) || ld_dt < (size_t)dm->n_heads || ld_y < d_in_of(dm))
		return -EINVAL;
	return gpu_launch_mamba_ssm_step_rows(g->stream, rows, dm->n_heads, dm->head_dim, dm->state,
					      dm->groups, xbc, ld_xbc, dt_raw, ld_dt, dt_bias, a_log, d_skip,
					      dt_min, dt_max, seq, ssm_off, dm->state_dtype == GPU_DTYPE_BF16,
					      y, ld_y);
}

int gpu_mamba_gated_rmsnorm(struct gpu_context *g, const struct gpu_mamba_dims *dm, int T, const float *y,
			    size_t ld_y, const float *z, size_t ld_z, const float *w, float eps, void *out,
			    size_t ld_out, enum gpu_dtype out_dtype)
{
	GPU_BIND_OR_RETURN(g);
	if (!g || !dims_ok(dm, T) || !y || !z || !w || !out ||
	    (out_dtype != GPU_DTYPE_F32 && out_dtype != GPU_DTYPE_BF16))
		return -EINVAL;
	size_t d_in = d_in_of(dm);
	if (ld_y < d_in || ld_z < d_in || ld_out < d_in)
		return -EINVAL;
	return gpu_launch_mamba_gated_rmsnorm(g->stream, T, (int)d_in, dm->groups, y, ld_y, z, ld_z, w, eps,
					      out, ld_out, out_dtype == GPU_DTYPE_BF16);
}
