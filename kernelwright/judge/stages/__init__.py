"""The stages of one evaluation inside the judge worker, one module each, in the order the defences
rely on (`worker.run_stages` calls them; each takes the typed result of the one before, `records`):

    load     (Context)          -> Loaded    reference outputs of every trial before any candidate code
    compile  (Context, Loaded)  -> Built     snapshot and wrappers installed, then the candidate imported
    check    (Context, Built)   -> Checked   trials on poisoned memory, output-cache refill, work rules
    time     (Context, Checked)              timing, energy, kernel shares, baselines, floor
    profile  (Context, Checked)              the profile, when asked for
    finish   (Context)                       status and summary from what the stages found

A stage that decides the verdict (an error loading the problem, a candidate that does not load or
raises in a trial) calls `Context.stop` and returns None; the later stages are skipped.
`guard.after_call` runs after every call of candidate code.
"""
