"""Long-term memory (the skill library) and short-term memory (the run's trajectory)."""
from kernelwright.memory.distill import review, write_candidate_skill
from kernelwright.memory.skills import (
    BUILTIN_DIR, Conditions, Skill, SkillFormatError, SkillLibrary, builtin_library, format_skills,
    skill_tags,
)
from kernelwright.memory.trajectory import Trajectory, TrajectoryEntry, approach_key

__all__ = [
    "BUILTIN_DIR", "Conditions", "Skill", "SkillFormatError", "SkillLibrary", "Trajectory",
    "TrajectoryEntry", "approach_key", "builtin_library", "format_skills", "review", "skill_tags", "write_candidate_skill",
]
