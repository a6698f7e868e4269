"""Search settings: one flat dataclass, settable from the command line (`--set name=value`) and a
config file's `[optimize]` table, stored with the run so a resume replays under the same rules."""
from __future__ import annotations

import ast
import dataclasses
from dataclasses import dataclass, field
from typing import Any

from kernelwright import envvars
from kernelwright.tune.strategies import CHOICES

#: The search strategies by name, the one list: `search/strategies/__init__.py` fills it (each
#: strategy class under its `name`), and settings, `--strategy`'s help and `make_strategy` read it.
#: It is filled here rather than imported because the strategies read these settings; importing
#: this module runs `kernelwright.search` first, which imports the strategies, so it is full before
#: any Settings is made.
STRATEGIES: dict[str, type] = {}
OBJECTIVES = ("eager", "compile_default", "compile_max_autotune")
#: settings added after runs were stored, with the value that means "as before they existed"
ADDED_LATER: dict[str, Any] = {"tune": False, "sibling_directions": False, "dedupe": False, "tune_sweep": 0,
                               "tune_seeds": False, "seed_start": False}


def seed_start_default() -> bool:
    """On unless KW_SEED_START says 0 / false / no / off (a machine or a test suite that never wants
    torch.compile run before a search)."""
    return (envvars.get("KW_SEED_START") or "1").strip().lower() not in ("0", "false", "no", "off")


class SettingsError(ValueError):
    """A setting name or value is wrong; the message names it and the accepted values."""


@dataclass
class Settings:
    strategy: str = "mcts"
    # expansion
    drafts: int = 2  # first candidates written from the reference
    parallel: int = 2  # expansion jobs in flight at once
    max_repairs: int = 2  # K: repair attempts for a failed candidate (a chain of at most K)
    parse_retries: int = 1  # re-asks with the parser's feedback when an answer is unusable
    plan: bool = True  # ask the Planner before the Coder
    analyst: bool = False  # ask the Analyst for a diagnosis of a parent before planning on it
    sibling_directions: bool = True  # expansions of one node started together each get their own direction (siblings.py)
    dedupe: bool = True  # a candidate with an earlier candidate's code is not judged again (duplicates.py)
    # greedy / mcts
    iterations: int = 10  # expansion jobs in all (drafts included)
    max_children: int = 4  # hard cap on expansions of one node
    max_depth: int = 8
    # beam
    beam_width: int = 2
    beam_branch: int = 2
    generations: int = 3
    # mcts
    mcts_c: float = 0.7  # UCT exploration constant (values lie in [0, 1))
    widen_k: float = 1.0  # progressive widening: at most ceil(k * visits^alpha) children
    widen_alpha: float = 0.5
    # value and context
    objective: str = "eager"  # baseline whose speedup is maximised
    context_tokens: int = 12000  # token budget of one prompt's dynamic context
    digest_items: int = 12  # "already tried" lines in a prompt
    digest_chars: int = 2000
    skills_k: int = 5  # skills ranked for an expansion; prompts take them whole from the top while they fit
    profile_evals: int = 8  # passing candidates profiled (ncu) per run on a GPU target; 0: none
    temperature: float | None = None  # None: the agents' own default
    # the tuning step (search/tuning.py): templatize a promising correct candidate, tune its parameters
    tune: bool = True  # on for LLM runs; false: never ask the Templatizer
    tune_top: int = 1  # a candidate is tuned when it ranks among the tune_top fastest as its expansion ends (1: a new best)
    tune_share: float = 0.25  # most of max_evals that tuning may use in all (no share without max_evals)
    tune_evals: int = 8  # most evaluations one tuning job spends, its default instance included (a sweep is one)
    tune_batch: int = 4  # instances of a job judged at once once its default instance reproduced the candidate
    tune_strategy: str = "auto"  # the tuner's strategy (tune.search.CHOICES)
    tune_match: float = 1.25  # the default instance reproduces the candidate when it passes within this time ratio
    tune_sweep: int = 32  # configurations benchmarked in one evaluation (a sweep), its fastest then judged in full; 0 or 1: one per evaluation
    tune_seeds: bool = True  # start each tuning with the best configurations measured earlier (tune.seeds.SeedCache)
    # the start (search/start.py, docs/seed.md): a new run writes torch.compile's kernels as a candidate
    # (`kernelwright seed`), judges it first and, when it passes, starts from it; KW_SEED_START=0 makes
    # the default false
    seed_start: bool = field(default_factory=lambda: seed_start_default())

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        if self.strategy not in STRATEGIES:
            raise SettingsError(f"strategy {self.strategy!r} is not one of {', '.join(STRATEGIES)}")
        if self.objective not in OBJECTIVES:
            raise SettingsError(f"objective {self.objective!r} is not one of {', '.join(OBJECTIVES)}")
        for name in ("drafts", "parallel", "iterations", "max_children", "max_depth", "beam_width",
                     "beam_branch", "context_tokens"):
            if getattr(self, name) < 1:
                raise SettingsError(f"setting {name} must be at least 1, got {getattr(self, name)}")
        for name in ("max_repairs", "parse_retries", "generations", "digest_items", "digest_chars",
                     "skills_k", "profile_evals"):
            if getattr(self, name) < 0:
                raise SettingsError(f"setting {name} must not be negative, got {getattr(self, name)}")
        if self.mcts_c < 0 or self.widen_k <= 0 or not 0 <= self.widen_alpha <= 1:
            raise SettingsError("need mcts_c >= 0, widen_k > 0 and 0 <= widen_alpha <= 1")
        self._validate_tuning()

    def _validate_tuning(self) -> None:
        if self.tune_strategy not in CHOICES:
            raise SettingsError(f"tune_strategy {self.tune_strategy!r} is not one of {', '.join(CHOICES)}")
        if self.tune_top < 1 or self.tune_batch < 1 or self.tune_evals < 2:
            raise SettingsError("need tune_top >= 1, tune_batch >= 1 and tune_evals >= 2 (the default instance "
                                "and one more)")
        if self.tune_sweep < 0:
            raise SettingsError(f"setting tune_sweep must not be negative, got {self.tune_sweep}")
        if not 0 < self.tune_share <= 1 or self.tune_match < 1:
            raise SettingsError("need 0 < tune_share <= 1 and tune_match >= 1")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Settings":
        unknown = set(data) - set(names())
        if unknown:
            raise SettingsError(f"unknown search settings: {', '.join(sorted(unknown))} "
                                f"(known: {', '.join(names())})")
        return cls(**{k: coerce(k, v) for k, v in data.items()})

    @classmethod
    def from_stored(cls, data: dict[str, Any]) -> "Settings":
        """The settings a run was stored with; a run stored before a setting existed keeps the
        behaviour it was made with (its replay log holds no ask of the newer features)."""
        return cls.from_dict({**ADDED_LATER, **data})


def names() -> list[str]:
    return [f.name for f in dataclasses.fields(Settings)]


def coerce(name: str, value: Any) -> Any:
    """Turn a command-line string into the field's type, with an error that names the setting."""
    field = {f.name: f for f in dataclasses.fields(Settings)}[name]
    kind = str(field.type)
    if isinstance(value, str) and "str" not in kind.split("|")[0]:
        try:
            value = ast.literal_eval(value.strip().capitalize() if "bool" in kind else value.strip())
        except (ValueError, SyntaxError):
            raise SettingsError(f"setting {name} needs a {kind} value, got {value!r}") from None
    if value is None and "None" in kind:
        return None
    try:
        if kind.startswith("bool"):
            if not isinstance(value, bool):
                raise TypeError
            return value
        if kind.startswith("int"):
            if isinstance(value, bool) or int(value) != value:
                raise TypeError
            return int(value)
        if kind.startswith("float"):
            return float(value)
        return str(value)
    except (TypeError, ValueError):
        raise SettingsError(f"setting {name} needs a {kind} value, got {value!r}") from None
