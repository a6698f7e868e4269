"""Host-side helpers every library template carries (this file's text is copied into the
candidate, so an instance stays standalone; it is also imported and tested as a module).

Kernels address each operand through strides over a few merged dimensions: broadcasting is a
zero stride, and adjacent dimensions that are laid out contiguously for every operand merge into
one, so the common all-contiguous case becomes a flat index.
"""

import torch


def kw_strides(t, shape):
    """Strides of `t` broadcast to `shape` (0 along broadcast dimensions)."""
    return list(t.expand(shape).stride()) if t.dim() else [0] * len(shape)


def kw_merge(shape, strides_list, dims, max_dims):
    """Merge the dimensions `dims` of `shape` (outer to inner) for all operands at once.

    Returns (sizes, [strides per operand]), each exactly `max_dims` long, outer first and padded on
    the inner side with size-1, stride-0 dimensions (a size of 1 reaches the kernel as a constant,
    so the index arithmetic of the missing dimensions compiles away), or raises ValueError when
    more dimensions stay apart.
    """
    merged = []  # innermost first: [size, [stride per operand]]
    for d in reversed(list(dims)):
        size = shape[d]
        if size == 1:
            continue
        strides = [s[d] for s in strides_list]
        if merged:
            inner_size, inner_strides = merged[-1]
            if all(s == t * inner_size for s, t in zip(strides, inner_strides)):
                merged[-1][0] = inner_size * size
                continue
        merged.append([size, strides])
    if len(merged) > max_dims:
        raise ValueError(f"operands do not merge into {max_dims} dimension(s) over dims {list(dims)} of {list(shape)}")
    merged.reverse()
    merged += [[1, [0] * len(strides_list)]] * (max_dims - len(merged))
    sizes = [m[0] for m in merged]
    per_operand = [[m[1][k] for m in merged] for k in range(len(strides_list))]
    return sizes, per_operand


def kw_numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def kw_check_device(*tensors):
    """All operands on one device; the kernels read raw pointers."""
    devices = {t.device for t in tensors}
    if len(devices) > 1:
        raise RuntimeError(f"operands on several devices: {sorted(map(str, devices))}")


def kw_wave(t, num_warps):
    """Programs of one full wave of a persistent grid on `t`'s device: the SMs times the programs
    of `num_warps` warps one SM holds at once (threads are the limit of a light kernel). Without a
    GPU (the Triton interpreter) a few programs, so the loop over blocks is still exercised."""
    if t.device.type != "cuda":
        return 4

    props = torch.cuda.get_device_properties(t.device)
    per_sm = max(1, props.max_threads_per_multi_processor // (32 * num_warps))
    return props.multi_processor_count * per_sm


def kw_row_layout(shape, dims):
    """(P dims, Q dims) of a reduction over `dims`: a program owns one P index and BLOCK_Q of Q.

    Reduced dims innermost: the rows go to Q (a tile takes several short rows); reduced dims in
    the middle: what is before goes to P, what is after to Q (a tile takes contiguous columns);
    reduced dims apart from one another: every kept dim goes to Q.
    """
    dims = sorted(dims)
    kept = [d for d in range(len(shape)) if d not in dims]
    if dims != list(range(dims[0], dims[-1] + 1)):
        return [], kept
    outer, inner = list(range(0, dims[0])), list(range(dims[-1] + 1, len(shape)))
    if kw_numel([shape[d] for d in inner]) == 1:
        return inner, outer
    return outer, inner


def kw_pool_size(size, kernel, stride, padding, dilation, ceil_mode):
    """Output length of a pooling window along one dim, as PyTorch computes it."""
    span = size + 2 * padding - dilation * (kernel - 1) - 1 + (stride - 1 if ceil_mode else 0)
    out = span // stride + 1
    if ceil_mode and (out - 1) * stride >= size + padding:
        out -= 1  # the last window must start inside the input or its left padding
    return out


def kw_phase_taps(phase, stride, padding, dilation, kernel):
    """A transposed convolution's taps for the outputs o = phase + stride * j along one dim.

    Output o reads input (o + padding - k * dilation) / stride where that is whole: for one phase
    the taps k that qualify form a progression k0 + step * t, t < count, and the input read is
    j + c0 - c1 * t. Returns (k0, step, count, c0, c1); count 0 when no tap reaches the phase.
    """
    taps = [k for k in range(kernel) if (phase + padding - k * dilation) % stride == 0]
    if not taps:
        return 0, 1, 0, 0, 0
    step = taps[1] - taps[0] if len(taps) > 1 else 1
    k0 = taps[0]
    return k0, step, len(taps), (phase + padding - k0 * dilation) // stride, step * dilation // stride
