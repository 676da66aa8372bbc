/* Stream capture into CUDA graphs and their replay on a context's stream (gpu.h, "graphs"). */
#include "gpu.h"
#include "gpu_internal.h"

#include <cuda_runtime.h>
#include <errno.h>
#include <stdlib.h>

struct gpu_graph {
	cudaGraph_t graph;
	cudaGraphExec_t exec;
};

int gpu_graph_begin(struct gpu_context *g)
{
	GPU_BIND_OR_RETURN(g);
	/* ThreadLocal: other threads' CUDA calls (another context's copies) do not break it */
	return GPU_CHECK(cudaStreamBeginCapture((cudaStream_t)g->stream, cudaStreamCaptureModeThreadLocal));
}

int gpu_graph_end(struct gpu_context *g, struct gpu_graph **ret)
{
	GPU_BIND_OR_RETURN(g);
	*ret = NULL;
	cudaGraph_t graph = NULL;
	int r = GPU_CHECK(cudaStreamEndCapture((cudaStream_t)g->stream, &graph));
	if (r < 0)
		return r;
	struct gpu_graph *x = calloc(1, sizeof(*x));
	if (!x) {
		cudaGraphDestroy(graph);
		return -ENOMEM;
	}
	x->graph = graph;
	r = GPU_CHECK(cudaGraphInstantiate(&x->exec, graph, 0));
	if (r < 0) {
		cudaGraphDestroy(graph);
		free(x);
		return r;
	}
	*ret = x;
	return 0;
}

int gpu_graph_abort(struct gpu_context *g)
{
	GPU_BIND_OR_RETURN(g);
	cudaGraph_t graph = NULL;
	int r = GPU_CHECK(cudaStreamEndCapture((cudaStream_t)g->stream, &graph));
	if (graph)
		cudaGraphDestroy(graph);
	return r;
}

int gpu_graph_launch(struct gpu_context *g, struct gpu_graph *graph)
{
	GPU_BIND_OR_RETURN(g);
	return GPU_CHECK(cudaGraphLaunch(graph->exec, (cudaStream_t)g->stream));
}

void gpu_graph_destroy(struct gpu_graph *graph)
{
	if (!graph)
		return;
	cudaGraphExecDestroy(graph->exec);
	cudaGraphDestroy(graph->graph);
	free(graph);
}
