"""Device limits that a kernel configuration must fit before it is worth compiling or timing.

Read from the GPU where there is one (torch.cuda.get_device_properties); otherwise from a table,
so that a tuning plan made on a CPU machine for an H100 prunes the same configurations the H100
would. The names in `as_env()` are the ones template constraints may use.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass



@dataclass(frozen=True)
class DeviceLimits:
    name: str
    compute_capability: tuple[int, int]
    sm_count: int
    warp_size: int = 32
    max_threads_per_block: int = 1024
    max_threads_per_sm: int = 2048
    regs_per_sm: int = 65536
    regs_per_block: int = 65536
    max_regs_per_thread: int = 255
    smem_per_block_optin: int = 232448  # bytes a block may use after opting in (227 KiB on sm_90)
    smem_per_sm: int = 233472
    l2_bytes: int = 50 * 2**20
    source: str = "table"  # "device" when read from a GPU

    def as_env(self) -> dict[str, int]:
        """Names usable in template constraints (all integers)."""
        major, minor = self.compute_capability
        return {
            "WARP_SIZE": self.warp_size,
            "MAX_THREADS": self.max_threads_per_block,
            "MAX_THREADS_PER_SM": self.max_threads_per_sm,
            "REGS_PER_SM": self.regs_per_sm,
            "REGS_PER_BLOCK": self.regs_per_block,
            "MAX_REGS_PER_THREAD": self.max_regs_per_thread,
            "SMEM": self.smem_per_block_optin,
            "SMEM_PER_SM": self.smem_per_sm,
            "SM_COUNT": self.sm_count,
            "NUM_SMS": self.sm_count,  # the same, by the name persistent Triton kernels give it
            "CC": major * 10 + minor,
            "L2_BYTES": self.l2_bytes,
        }

    def to_dict(self) -> dict:
        data = dataclasses.asdict(self)
        data["compute_capability"] = list(self.compute_capability)
        return data


def from_target(target) -> DeviceLimits:
    """The limits of a judge.target.Target (the one home of known cards' facts)."""
    major, minor = int(target.arch[3:-1] or 9), int(target.arch[-1])
    return DeviceLimits(
        name=target.name, compute_capability=(major, minor), sm_count=target.sm_count,
        warp_size=target.warp_size, max_threads_per_block=target.max_threads_per_block,
        max_threads_per_sm=target.max_threads_per_sm, regs_per_sm=target.regs_per_sm,
        regs_per_block=target.regs_per_block, max_regs_per_thread=target.regs_per_thread,
        smem_per_block_optin=target.smem_per_block, smem_per_sm=target.smem_per_sm, l2_bytes=target.l2_bytes)


def _known(name: str) -> DeviceLimits:
    # the template format (constraints, template), which the engine's Templatizer imports, needs only
    # the limits' names: the engine's process must load no judge code (tests/search/test_engine.py)
    from kernelwright.judge.target import known_target  # noqa: PLC0415 -- keep judge code out of the engine's process

    return from_target(known_target(name))


# the names a template's constraints may use (the same for every device)
LIMIT_NAMES = tuple(DeviceLimits(name="", compute_capability=(9, 0), sm_count=1).as_env())
_KNOWN = {"H100_SXM": "h100", "A100_SXM": "a100", "L4": "l4"}


def __getattr__(name: str):
    """The known cards' limits, read from judge.target on first use (PEP 562): a module that only
    needs the limits' names (the template format, which the engine's Templatizer imports) loads no
    judge code."""
    if name in _KNOWN:
        value = globals()[name] = _known(_KNOWN[name])
        return value
    if name == "KNOWN_DEVICES":
        value = globals()[name] = {short: __getattr__(long) for long, short in _KNOWN.items()}
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def table_limits(name: str = "h100") -> DeviceLimits:
    key = name.lower()
    for short, limits in __getattr__("KNOWN_DEVICES").items():
        if short in key:
            return limits
    raise ValueError(f"no limits table for device {name!r}; known: {', '.join(_KNOWN.values())}")


def detect_limits(device_index: int | None = None) -> DeviceLimits:
    """Limits of the current CUDA device, else the H100 table (the project's reference GPU)."""
    try:
        import torch  # noqa: PLC0415 -- tune/ stays torch-free at import: the agents and the search import it (tune/__init__.py); a broken torch means the H100 table

        if not torch.cuda.is_available():
            return __getattr__("H100_SXM")
        props = torch.cuda.get_device_properties(device_index or 0)
    except Exception:  # noqa: BLE001 -- a broken CUDA setup is no reason to stop planning
        return __getattr__("H100_SXM")
    try:
        base = table_limits(props.name)
    except ValueError:
        base = __getattr__("H100_SXM")
    return DeviceLimits(
        name=props.name,
        compute_capability=(props.major, props.minor),
        sm_count=props.multi_processor_count,
        warp_size=getattr(props, "warp_size", base.warp_size),
        max_threads_per_block=getattr(props, "max_threads_per_block", base.max_threads_per_block),
        max_threads_per_sm=getattr(props, "max_threads_per_multi_processor", base.max_threads_per_sm),
        regs_per_sm=getattr(props, "regs_per_multiprocessor", base.regs_per_sm),
        regs_per_block=base.regs_per_block,
        max_regs_per_thread=base.max_regs_per_thread,
        smem_per_block_optin=getattr(props, "shared_memory_per_block_optin", base.smem_per_block_optin),
        smem_per_sm=getattr(props, "shared_memory_per_multiprocessor", base.smem_per_sm),
        l2_bytes=getattr(props, "L2_cache_size", base.l2_bytes),
        source="device",
    )
