"""GPU check of the worked ModelNew examples shown to the Coder and Repairer (agents/prompts/examples).

The prompts present these modules as correct answers, so they must compile and match their
reference (out = x + alpha * y) on a real GPU for every dtype they claim to handle. Depends only on
torch, triton and the stdlib. Writes $OUT/agent_examples_gpu.json and exits non-zero on a failure.

    python bench/agent_examples_gpu.py
"""
from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
import traceback
from pathlib import Path

import torch

EXAMPLES = Path(__file__).resolve().parents[1] / "kernelwright" / "agents" / "prompts" / "examples"
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16, "float64": torch.float64}
TOLERANCE = {"float32": 1e-5, "float16": 1e-2, "bfloat16": 2e-2, "float64": 1e-12}  # atol = rtol
ALPHA = 0.75


def load(path: Path):
    spec = importlib.util.spec_from_file_location(f"example_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check_case(model, name: str, dtype: torch.dtype, shape, contiguous: bool) -> dict:
    torch.manual_seed(0)
    x = torch.randn(*shape, device="cuda", dtype=dtype)
    y = torch.randn(*shape, device="cuda", dtype=dtype)
    if not contiguous:
        x, y = x.t(), y.t()
    before = (x.clone(), y.clone())
    out = model(x, y)
    torch.cuda.synchronize()
    expected = (x.double() + ALPHA * y.double()).to(dtype)
    tol = TOLERANCE[name]
    diff = (out.double() - expected.double()).abs()
    err = diff.max().item() if out.numel() else 0.0
    within = bool((diff <= tol + tol * expected.double().abs()).all()) if out.numel() else True
    ok = (out.shape == expected.shape and out.dtype == dtype and within
          and torch.equal(x, before[0]) and torch.equal(y, before[1]))
    return {"dtype": name, "shape": list(shape), "contiguous": contiguous, "max_abs_err": err, "ok": bool(ok)}


def check_example(file_name: str) -> dict:
    started = time.time()
    try:
        model = load(EXAMPLES / file_name).ModelNew(ALPHA)
    except Exception:  # noqa: BLE001 -- an example that does not load is a result, not a crash
        return {"example": file_name, "ok": False, "error": traceback.format_exc(limit=5)}
    cases = []
    for name, dtype in DTYPES.items():
        for shape, contiguous in (((3, 100_003), True), ((4096, 1024), True), ((257, 129), False), ((0, 8), True)):
            try:
                cases.append(check_case(model, name, dtype, shape, contiguous))
            except Exception:  # noqa: BLE001 -- a failing case is a result; the others still run
                cases.append({"dtype": name, "shape": list(shape), "ok": False, "error": traceback.format_exc(limit=3)})
    return {"example": file_name, "ok": all(c["ok"] for c in cases), "cases": cases,
            "seconds": round(time.time() - started, 2)}


def main() -> int:
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    results = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
               "examples": [check_example("triton_elementwise.py"), check_example("cuda_elementwise.py")]}
    out_dir = Path(os.environ.get("OUT", "."))
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "agent_examples_gpu.json").write_text(json.dumps(results, indent=2))
    for example in results["examples"]:
        failed = [c for c in example.get("cases", []) if not c["ok"]]
        print(f"{example['example']}: {'ok' if example['ok'] else 'FAILED'}"
              + (f" ({len(failed)} failing cases)" if failed else "") + (f"\n{example['error']}" if "error" in example else ""))
    return 0 if all(e["ok"] for e in results["examples"]) else 1


if __name__ == "__main__":
    sys.exit(main())
