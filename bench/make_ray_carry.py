"""Make Ray small enough to carry to a GPU machine that cannot reach a package registry.

The manylinux Ray wheel is ~79 MB (~200 MB unpacked): the Java jars, the dashboard's web client,
the libraries built on Ray (RLlib, Tune, Train, Serve, Data, LLM) and the debug symbols of its C++
binaries. A single-node local Ray (`ray.init()`, tasks, actors) needs none of them. This script
unpacks the wheel, drops those parts, strips the binaries, and writes one tar.xz of what is left
(`ray/` and its `dist-info`), plus the wheels of the dependencies the target machine lacks:

    python bench/make_ray_carry.py --python 3.12 --out .ray-carry          # for the GPU machine
    python bench/make_ray_carry.py --python 3.11 --out /tmp/ray311 --check # a copy for this one, tested

On the target, everything goes into one folder on PYTHONPATH (the printed install command):

    pip install -q --no-index --no-deps --target /tmp/site .ray-carry/*.whl
    tar -xJf .ray-carry/ray-*.tar.xz -C /tmp/site && export PYTHONPATH=/tmp/site:$PYTHONPATH

`--check` installs the result into a scratch folder and, in a fresh interpreter that sees only
that copy of Ray, starts a local cluster with two CPUs and runs a task and an actor.
Run here, where pip can reach the registry; the target needs no network.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

RAY_VERSION = "2.60.0"
# Ray's own requirements that the GPU image lacks (its other requirements are there:
# click, filelock, msgpack, packaging, protobuf, pyyaml, requests), with their own needs.
MISSING_DEPS = ("jsonschema==4.26.0", "jsonschema-specifications==2025.9.1", "referencing==0.37.0",
                "rpds-py==0.30.0")
# what a single-node local Ray does not need (paths inside the `ray` package)
DROP = (
    "jars",  # Java workers
    "dashboard/client",  # the dashboard's web client (a JS bundle and its source maps)
    "rllib", "tune", "train", "serve", "data", "llm", "air", "workflow",  # libraries built on Ray
    "core/src/ray/raylet/raylet.debug", "tests",
)
STRIP = ("_raylet.so", "core/src/ray/gcs/gcs_server", "core/src/ray/raylet/raylet")
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")


def pip_download(requirements: list[str], python: str, dest: Path) -> None:
    command = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
               "--python-version", python, "--implementation", "cp", "-d", str(dest)]
    for platform in PLATFORMS:
        command += ["--platform", platform]
    subprocess.run(command + requirements, check=True)


def prune(root: Path) -> list[str]:
    """Drop what a local cluster does not use; returns what was dropped."""
    package = root / "ray"
    dropped = []
    for rel in DROP:
        path = package / rel
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
        else:
            continue
        dropped.append(rel)
    for cache in package.rglob("__pycache__"):
        shutil.rmtree(cache, ignore_errors=True)
    return dropped


def strip_binaries(root: Path) -> None:
    strip = shutil.which("strip")
    if not strip:
        raise SystemExit("`strip` (binutils) is needed to drop the binaries' debug symbols")
    for rel in STRIP:
        subprocess.run([strip, "--strip-unneeded", str(root / "ray" / rel)], check=True)


def build(python: str, out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kw-ray-carry-") as tmp:
        tmp = Path(tmp)
        pip_download([f"ray=={RAY_VERSION}"], python, tmp / "wheel")
        wheel = next((tmp / "wheel").glob("ray-*.whl"))
        unpacked = tmp / "site"
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(unpacked)
        for info in zipfile.ZipFile(wheel).infolist():  # zipfile drops the executable bits
            mode = info.external_attr >> 16
            if mode & 0o111:
                os.chmod(unpacked / info.filename, mode & 0o7777)
        dropped = prune(unpacked)
        strip_binaries(unpacked)
        tag = wheel.name.split("-")[2]
        target = out / f"ray-{RAY_VERSION}-{tag}-local.tar.xz"
        with tarfile.open(target, "w:xz", preset=9) as archive:
            for entry in sorted(unpacked.iterdir()):
                archive.add(entry, arcname=entry.name)
    pip_download(list(MISSING_DEPS), python, out)
    print(f"dropped from ray/: {', '.join(dropped)}")
    return target


def install_command(out: Path, site: str = "/tmp/site") -> str:
    return (f"python3 -m pip install -q --no-index --no-deps --no-compile --target {site} {out}/*.whl && "
            f"tar -xJf {out}/ray-*-local.tar.xz -C {site} && export PYTHONPATH={site}:$PYTHONPATH")


CHECK = """
import os, ray
assert ray.__file__.startswith(os.environ["KW_SITE"]), ray.__file__
ray.init(num_cpus=2, include_dashboard=False)
@ray.remote(num_cpus=1)
def double(x):
    return 2 * x
@ray.remote(num_cpus=1)
class Counter:
    def add(self, x):
        return x + 1
assert ray.get([double.remote(i) for i in range(4)]) == [0, 2, 4, 6]
assert ray.get(Counter.remote().add.remote(41)) == 42
print("local Ray", ray.__version__, "from", ray.__file__, "ran a task and an actor")
ray.shutdown()
"""


def check(out: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="kw-ray-site-") as site:
        subprocess.run(["bash", "-c", install_command(out, site)], check=True)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env.update(PYTHONPATH=site, KW_SITE=site)
        subprocess.run([sys.executable, "-s", "-c", CHECK], env=env, check=True, timeout=300)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", default="3.12", help="the target's Python version")
    parser.add_argument("--out", default=".ray-carry", type=Path)
    parser.add_argument("--check", action="store_true", help="install into a scratch folder and start Ray "
                        "from it (only when --python is this interpreter's version)")
    args = parser.parse_args()
    target = build(args.python, args.out)
    total = sum(p.stat().st_size for p in args.out.iterdir() if p.is_file())
    print(f"{target.name}: {target.stat().st_size / 2**20:.1f} MiB; all of {args.out}: {total / 2**20:.1f} MiB")
    print("install on the target:", install_command(args.out))
    if args.check:
        check(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
