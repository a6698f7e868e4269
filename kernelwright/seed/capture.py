"""Run torch.compile (inductor) on a problem's Model once and keep what it wrote: the wrapper's
source, each Triton kernel with the launch configuration it runs with, and which model attribute or
forward argument each of the wrapper's arguments is.

The only module of kernelwright that imports `torch._inductor` and `torch._dynamo`, and only while a
seed is written: the file it produces imports neither (docs/seed.md).

On a GPU the compiled function runs once, so inductor's autotuner picks each kernel's configuration
as `torch.compile` would. On a CPU inductor emits Triton through its `cpu_backend = "triton"`; Triton
has no CPU backend here (the seed runs under TRITON_INTERPRET=1), so the code is generated without
being compiled, and each kernel keeps inductor's first configuration, the one inductor itself
launches under the interpreter.
"""
from __future__ import annotations

import contextlib
import inspect
import warnings
from typing import Any
from unittest import mock

import torch
import torch.utils._triton as triton_utils

from .kernels import heuristic_of
from .types import Capture, Kernel, LaunchConfig, SeedError
from .wrapper import kernel_sources


def capture(problem, gemm: str, device: str, seed: int = 0) -> Capture:
    """Compile `problem`'s Model at its loaded sizes with inductor and read back what it wrote."""
    model = problem.make_model(seed, device=device)
    inputs = problem.make_inputs(seed, "given", device=device)
    outputs, output_count = _output_shape(model, inputs)
    params = _forward_params(problem.Model)
    graphs: list[tuple[Any, list]] = []
    modules: list[Any] = []
    wrapper = _compile(model, inputs, gemm, device, graphs, modules)
    if len(graphs) != 1:
        raise SeedError(f"dynamo captured {len(graphs)} graphs for Model.forward; a seed needs exactly one")
    arg_exprs = tuple(_arg_expr(model, inputs, params, value) for value in graphs[0][1])
    live = modules[-1] if modules else None
    kernels = {name: _kernel(name, source, live) for name, source in kernel_sources(wrapper).items()}
    import triton  # noqa: PLC0415 -- triton may be absent: inductor's refusal without it is the SeedError reported (in _compile)

    return Capture(wrapper, kernels, arg_exprs, tuple(_param_text(p) for p in params), outputs, output_count,
                   device, gemm,
                   {"torch": torch.__version__, "triton": triton.__version__})


def _inductor_settings(gemm: str, device: str) -> dict[str, Any]:
    settings: dict[str, Any] = {"cpu_backend": "triton"} if device == "cpu" else {}
    if gemm == "native":
        settings["triton.native_matmul"] = True
    elif gemm == "template":
        if device == "cpu":
            raise SeedError("--gemm template needs a GPU: inductor picks a Triton GEMM template by timing its "
                            "candidates, which the Triton interpreter cannot do; use --gemm native on a CPU")
        settings.update({"max_autotune_gemm": True, "max_autotune_gemm_backends": "TRITON",
                         "max_autotune_conv_backends": "TRITON"})
    return settings


@contextlib.contextmanager
def _without_triton_backend(device: str):
    """Inductor hashes the active Triton backend into its kernels' metadata; on a CPU there is none
    (the kernels run interpreted), so a fixed name stands in while the code is generated."""
    if device != "cpu":
        yield
        return
    with mock.patch.object(triton_utils, "triton_hash_with_backend", lambda: "kernelwright-seed-interpreted"), \
            warnings.catch_warnings():  # "Could not find an active CPU backend": expected, the seed runs interpreted
        warnings.filterwarnings("ignore", message="Could not find an active CPU backend")
        yield


def _compile(model, inputs, gemm: str, device: str, graphs: list, modules: list) -> str:
    import torch._dynamo  # noqa: PLC0415 -- torch._inductor / torch._dynamo only while a seed is written (docs/architecture.md, seed/)
    from torch._inductor import config as inductor_config  # noqa: PLC0415 -- torch._inductor / torch._dynamo only while a seed is written (docs/architecture.md, seed/)
    from torch._inductor.compile_fx import compile_fx  # noqa: PLC0415 -- torch._inductor / torch._dynamo only while a seed is written (docs/architecture.md, seed/)
    from torch._inductor.graph import GraphLowering  # noqa: PLC0415 -- torch._inductor / torch._dynamo only while a seed is written (docs/architecture.md, seed/)
    from torch._inductor.utils import fresh_cache, get_code, run_and_get_code  # noqa: PLC0415 -- torch._inductor / torch._dynamo only while a seed is written (docs/architecture.md, seed/)

    def backend(gm, example_inputs):
        graphs.append((gm, list(example_inputs)))
        compiled = compile_fx(gm, example_inputs)
        return compiled if device != "cpu" else gm.forward

    original = GraphLowering.compile_to_module

    def recording(self):
        module = original(self)
        modules.append(module)
        return module

    compiled = torch.compile(model, backend=backend, fullgraph=True, dynamic=False)
    torch._dynamo.reset()
    try:
        with torch.no_grad(), fresh_cache(), inductor_config.patch(_inductor_settings(gemm, device)), \
                _without_triton_backend(device):
            if device == "cpu":
                codes = get_code(compiled, *inputs)
            else:
                with mock.patch.object(GraphLowering, "compile_to_module", recording):
                    _, codes = run_and_get_code(compiled, *inputs)
    except SeedError:
        raise
    except Exception as exc:  # noqa: BLE001 -- dynamo/inductor refusing the model is the reason to report
        raise SeedError(f"torch.compile could not compile Model.forward in one graph: {type(exc).__name__}: "
                        f"{_first_line(exc)}") from exc
    finally:
        torch._dynamo.reset()
    wrappers = [code for code in codes if "def call(" in code]
    if len(wrappers) != 1:
        raise SeedError(f"inductor wrote {len(wrappers)} wrapper modules for Model.forward; a seed needs one")
    return wrappers[0]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""


def _output_shape(model, inputs) -> tuple[str, int]:
    with torch.no_grad():
        out = model(*inputs)
    if isinstance(out, torch.Tensor):
        return "tensor", 1
    if isinstance(out, (tuple, list)) and out and all(isinstance(o, torch.Tensor) for o in out):
        return "tuple", len(out)
    raise SeedError(f"Model.forward returns {type(out).__name__}; a seed's forward returns a tensor or a tuple "
                    "of tensors")


def _forward_params(model_cls: type) -> list[inspect.Parameter]:
    params = list(inspect.signature(model_cls.forward).parameters.values())[1:]
    odd = [p.name for p in params if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.KEYWORD_ONLY)]
    if odd:
        raise SeedError(f"Model.forward takes {', '.join(odd)} (*args, **kwargs or keyword-only); the seed maps "
                        "get_inputs() onto positional parameters only")
    return params


def _param_text(param: inspect.Parameter) -> str:
    if param.default is param.empty:
        return param.name
    return f"{param.name}={param.default!r}"


def _arg_expr(model, inputs: list, params: list[inspect.Parameter], value) -> str:
    """The expression, inside ModelNew.forward, of one argument of the wrapper's call: a forward
    parameter or a parameter/buffer of the model (found by identity, so names cannot be confused)."""
    for index, given in enumerate(inputs):
        if given is value:
            if index >= len(params):
                raise SeedError(f"get_inputs() gives {len(inputs)} inputs, Model.forward takes {len(params)}")
            return params[index].name
    for name, tensor in list(model.named_parameters()) + list(model.named_buffers()):
        if tensor is value:
            return "self" + "".join(f"[{part}]" if part.isdigit() else f".{part}" for part in name.split("."))
    raise SeedError("inductor's graph takes a tensor that is neither a forward input nor a parameter or buffer "
                    f"of the model (shape {tuple(getattr(value, 'shape', ()))}): a tensor attribute or global the "
                    "seed cannot name; register it as a buffer in Model")


def _kernel(name: str, source: str, live) -> Kernel:
    """The kernel with its launch: the autotuner's pick where the compiled code ran (a GPU), else
    inductor's first configuration (what inductor launches under the Triton interpreter)."""
    from torch._inductor.codecache import PyCodeCache  # noqa: PLC0415 -- torch._inductor / torch._dynamo only while a seed is written (docs/architecture.md, seed/)
    from torch._inductor.runtime.triton_heuristics import GridExpr  # noqa: PLC0415 -- torch._inductor / torch._dynamo only while a seed is written (docs/architecture.md, seed/)

    heuristic = heuristic_of(name, source)
    tuner = getattr(live, name, None) if live is not None else None
    tuned = tuner is not None and len(getattr(tuner, "launchers", []) or []) == 1
    if tuned:
        cfg = tuner.launchers[0].config
    else:
        with warnings.catch_warnings():  # no CPU backend for Triton: expected, the seed runs interpreted
            warnings.filterwarnings("ignore", message="Could not find an active CPU backend")
            tuner = getattr(PyCodeCache.load(source), name, None)
        if tuner is None or not getattr(tuner, "configs", None):
            raise SeedError(f"kernel {name}: inductor's module defines no autotuned kernel of that name")
        cfg = tuner.configs[0]
    grid = GridExpr.from_meta(tuner.inductor_meta, cfg, mode="python")
    config = LaunchConfig(dict(cfg.kwargs), int(cfg.num_warps), int(cfg.num_stages), tuned)
    return Kernel(name, source, config, tuple(grid.prefix), (str(grid.x_grid), str(grid.y_grid), str(grid.z_grid)),
                  heuristic, tuple(tuner.inductor_meta.get("extra_launcher_args") or ()))
