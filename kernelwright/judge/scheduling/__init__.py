"""Scheduling: which evaluation runs when, and where. Nothing here runs candidate code or judges
it: each evaluation is a supervisor with its checker and runner (`judge.api`, `judge.supervisor`);
these modules decide when it starts, on which GPU, beside what. The device lock that keeps a
timing alone on its GPU (`judge/gpulock.py`) is taken by the checker itself, so it lives beside it.

    pool.py           many candidates: compile in parallel, check several at once per GPU, time one at a time
    admission.py      GPU memory admission: an evaluation starts only while its peak fits
    ledger.py         the machine-wide record of what every judge process admitted on one GPU
    gpu_health.py     several GPUs: multicast off, which GPU a verdict ran on, a GPU that fails
    batch.py          batch folders: requests as files, verdicts written back beside them
    baseline_lane.py  the batch runner's lane that measures every problem's baselines ahead
    batch_profile.py  the batch's profile pass, best first, within a time budget
    forkserver.py     warm judge processes, forked instead of started
    daemon.py         the user's judge daemon that outlives a CLI call (`daemon_key.py`: its key)
    node.py           the entry point a cluster node runs (Ray)
"""
