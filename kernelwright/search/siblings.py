"""Sibling expansions: several jobs started from the same node at the same time.

Started together (the drafts from the reference, parallel expansions of one node, a beam's
branches), expansions see the same evidence, so a deterministic or cached model (a replay
cassette, temperature 0, an exchange that answers one prompt hash once) writes the same answer for
each, and the run judges one candidate several times. So each job is numbered from its node when
it starts, and once the engine has started what it has room for, each new job learns how many
expansions of its node are in progress. The prompt that decides the job's approach (the Planner's;
the Coder's when there is no plan) then carries an `Attempt`: its number, the direction that
number picks from prompts/attempt_directions.md, and the approaches its siblings already chose.
A lone expansion carries none and renders as before.

All of it is a function of what the engine was told, so a replayed run numbers its jobs the same
and renders the same prompts (a driver finds stored prompts again by their hash).
"""
from __future__ import annotations

from collections import Counter
from typing import Iterable

from kernelwright.agents.types import Attempt

from .context import in_progress_lines
from .jobs import Job
from .tree import ROOT_ID


class Siblings:
    def __init__(self) -> None:
        self.started: Counter = Counter()  # expansion jobs started from each node

    def number(self, job: Job) -> None:
        """A job starts: it is expansion number k of its node."""
        self.started[job.parent_id] += 1
        job.attempt = self.started[job.parent_id]

    @staticmethod
    def settle(new: Iterable[Job], active: Iterable[Job]) -> None:
        """The engine started what it had room for: each new job counts the expansions of its node
        in progress now, itself included (fixed from here on, so a re-ask renders the same)."""
        active = list(active)
        for job in new:
            job.attempts = sum(1 for other in active if other.parent_id == job.parent_id)

    @staticmethod
    def attempt(job: Job, agent: str, active: Iterable[Job]) -> Attempt | None:
        """What `agent`'s prompt for `job` says about its siblings; None for a lone expansion, and
        for the agents that do not choose the approach (the Coder of a plan, Repairer, Analyst)."""
        deciding = agent == "planner" or (agent == "coder" and job.plan is None)
        if job.attempts < 2 or not deciding:
            return None
        taken: list[str] = []
        if agent == "coder":  # a Planner sees every plan in progress under "In progress" already
            taken = in_progress_lines((other.approach_key, other.plan_text) for other in active
                                      if other is not job and other.parent_id == job.parent_id and other.plan_text)
        return Attempt(index=job.attempt, concurrent=job.attempts, taken=taken, draft=job.parent_id == ROOT_ID)
