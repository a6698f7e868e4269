# legit: CUDA-graph replay -- the softmax launch is captured once per input buffer in a CUDA graph and
# replayed on later calls (the same buffers hold new values every call), removing launch overhead.
# problem: examples/problems/row_softmax.py
# needs: gpu
# expect: pass
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    e = tl.where(mask, tl.exp(x), 0.0)
    tl.store(y_ptr + row * stride + cols, e / tl.sum(e, axis=0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.graphs = {}

    def _launch(self, x, y):
        softmax_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), BLOCK=triton.next_power_of_2(x.shape[1]))

    def forward(self, x):
        if not x.is_cuda or not x.is_contiguous():
            y = torch.empty_like(x)
            self._launch(x.contiguous(), y)
            return y
        key = (x.data_ptr(), tuple(x.shape))
        if key not in self.graphs:
            y = torch.empty_like(x)
            self._launch(x, y)  # compiles the kernel outside the capture
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                self._launch(x, y)
            self.graphs[key] = (graph, y)
        graph, y = self.graphs[key]
        graph.replay()
        return y
