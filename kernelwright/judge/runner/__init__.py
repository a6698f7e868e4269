"""The runner: the only process that runs candidate code, and the only judge code that runs in it.

The supervisor forks it, confined (`confine`: it writes only its own folder; the checker's folder,
the supervisor's, the request and the judge's caches of reference outputs and baselines are
unreadable to it; no signals or ptrace outside), and hands it one end of the call channel
(`judge.protocol`). It holds no reference output, no comparison and no timer: it loads the problem
(for `get_init_inputs`) and the candidate, builds `ModelNew`, and then answers calls. On a GPU each
call is fenced by the checker's flag words (`judge.memops`): the runner writes `gate`, waits for
`go`, runs `forward` and writes `done`; the checker writes the inputs, times from its own stream
and copies the outputs out of this process's memory (CUDA IPC) the moment `done` is written.

What it reports (launches of its own kernels, the ops it was seen to run, the kernels per call,
functions replaced, precision switches) is what the candidate's process says of itself: the
checker uses it for the rule sets' counts, never for correctness or time.

    main.py     the loop: one frame in, one frame out
    session.py  loading the candidate, the inputs, the calls
    observe.py  what is recorded of the candidate's work (launches, ops, kernels per call)
"""
