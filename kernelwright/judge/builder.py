"""`python -m kernelwright.judge.builder STAGING/request.json`: build one extension, confined.

Started by the supervisor's build service (`buildservice.serve_build`) in a fresh staging folder
inside the build cache. Before anything else it confines itself (`confine.confine`): it may write
only the staging folder, read no candidate's scratch folder but the requesting one's, signal no
process outside. Then it runs torch's `load_inline` / `load` with the arguments it was given,
the compiler output going to `build.log`. torch imports the built library at the end, so the
library's static initialisers run here too, inside the same confinement. Exit code 0: built.
"""
from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path

from .buildlog import LOG_FILE, BuildOutput, captured_output
from .confine import confine


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    request_path = Path(argv[0]).resolve()
    staging = request_path.parent
    request = json.loads(request_path.read_text())

    readable = [request["readable"]] if request.get("readable") else []
    report = confine(staging, [staging], private_root=Path(readable[0]).parent if readable else None,
                     readable=readable)
    if not report.active:
        print(f"kernelwright builder: unconfined ({report.reason})", file=sys.stderr)

    import torch.utils.cpp_extension as cpp  # noqa: PLC0415 -- torch.utils.cpp_extension takes 0.5 s to import (setuptools): loaded only when an extension is built

    output, ok = BuildOutput(), False
    try:
        with captured_output(output):
            getattr(cpp, request["builder"])(**request["arguments"])
        ok = True
    except BaseException as exc:  # noqa: BLE001 - every failure becomes the build log
        output.text += "\n" + "".join(traceback.format_exception_only(type(exc), exc))
    (staging / LOG_FILE).write_text(output.text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
