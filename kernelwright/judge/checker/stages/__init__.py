"""The stages of one evaluation in the checker, one module each, in the order the defences rely
on (`checker.main.stages_in_order` calls them; each takes the typed result of the one before,
`records`):

    load     (Context)          -> Loaded    reference outputs of every trial, before the runner loads anything
    compile  (Context, Loaded)  -> Built     the runner imports the candidate and builds ModelNew
    check    (Context, Built)   -> Checked   every trial called and compared, the output-cache refill, the work rules
    time     (Context, Checked)              timed calls on fresh inputs (some checked), energy, kernel shares;
                                             the runner finishes; baselines, floor
    profile  (Context, Checked)              the profile, when asked for
    finish   (Context)                       status and summary from what the stages found

A stage that decides the verdict (an error loading the problem, a candidate that does not load or
raises in a trial) calls `Context.stop` and returns None; the later stages are skipped.
"""
