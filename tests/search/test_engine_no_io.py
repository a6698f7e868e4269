"""The engine never does I/O: agents read their prompt files when they are built, so a prompt
file edited during a run cannot change what the engine asks (docs/architecture.md, search)."""
from __future__ import annotations

import builtins
import io
import os
from contextlib import contextmanager

from search_scripts import Script, failed, passed, problem

from kernelwright.search.budget import Limits
from kernelwright.search.core import Engine
from kernelwright.search.settings import Settings


@contextmanager
def counting_file_access(monkeypatch):
    """Count opens (builtins.open, io.open, os.open) and stats (os.stat) while the block runs."""
    seen: list[str] = []

    def wrap(name, real):
        def counted(path, *args, **kwargs):
            seen.append(f"{name} {path}")
            return real(path, *args, **kwargs)
        return counted

    with monkeypatch.context() as patch:
        patch.setattr(builtins, "open", wrap("open", builtins.open))
        patch.setattr(io, "open", wrap("open", io.open))
        patch.setattr(os, "open", wrap("os.open", os.open))
        patch.setattr(os, "stat", wrap("stat", os.stat))
        yield seen


def test_the_counter_sees_a_file_read(monkeypatch, tmp_path):
    (tmp_path / "x").write_text("x")
    with counting_file_access(monkeypatch) as seen:
        (tmp_path / "x").read_text()
        os.path.getmtime(tmp_path / "x")
    assert any(s.startswith("open") for s in seen) and any(s.startswith("stat") for s in seen)


def test_tell_opens_no_file_in_a_run_with_repairs_and_improvements(monkeypatch):
    engine = Engine(problem(), "greedy", Limits(),
                    Settings(strategy="greedy", drafts=2, parallel=1, iterations=4, max_repairs=1))
    script = Script(lambda cid, code, n: failed("output differs") if n % 3 == 1 else passed(1.0 + n / 10))
    told, opened = 0, []
    while not engine.done:
        for ask in engine.ask():
            answer = script.answer(ask)
            with counting_file_access(monkeypatch) as seen:
                engine.tell(ask.id, answer)
            opened += seen
            told += 1
    assert told >= 8  # planner, coder, evaluation and repairer prompts were all written
    assert opened == [], f"tell() touched files: {opened[:10]}"
