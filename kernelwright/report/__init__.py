"""Reports: the evidence header of the best ModelNew, rich tables of runs, the live progress panel."""
from .best import evidence_lines, write_best
from .progress import progress_panel
from .tables import candidate_tree, run_summary, runs_table

__all__ = ["candidate_tree", "evidence_lines", "progress_panel", "run_summary", "runs_table", "write_best"]
