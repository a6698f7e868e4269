"""What the prompts state about the mode (search/problem_info.py `mode_layers`, the task section) is
what the judge does: it builds the reference and the candidate as constructed and never switches
them to eval mode, so a BatchNorm normalises with the batch's statistics, and a candidate that uses
the running statistics instead is wrong."""
from __future__ import annotations

from kernelwright.judge import JudgeConfig, judge
from kernelwright.judge.request import SourceText

PROBLEM = SourceText('''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm1d(16)

    def forward(self, x):
        return self.bn(x)

def get_inputs():
    return [torch.rand(32, 16) * 4 + 1]

def get_init_inputs():
    return []
''', "batchnorm_problem")  # hand-written test problem in KernelBench format

# hand-written candidates: the batch's statistics (training mode) and the running ones (eval mode)
CANDIDATE = '''
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm1d(16)

    def forward(self, x):
        return torch.nn.functional.batch_norm(x, None, None, self.bn.weight, self.bn.bias, training=TRAINING)
'''


def test_the_judge_runs_a_batchnorm_reference_in_training_mode():
    config = JudgeConfig(device="cpu", trials=2, time=False)
    batch = judge(PROBLEM, SourceText(CANDIDATE.replace("training=TRAINING", "training=True"), "batch_stats"), config)
    running = judge(PROBLEM, SourceText(CANDIDATE.replace(
        "None, None, self.bn.weight", "self.bn.running_mean, self.bn.running_var, self.bn.weight").replace(
        "training=TRAINING", "training=False"), "running_stats"), config)
    assert batch.trials and all(t.ok for t in batch.trials), [t.message for t in batch.trials]
    assert running.trials and not any(t.ok for t in running.trials)
