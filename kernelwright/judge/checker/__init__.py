"""The checker: the trusted process of one evaluation (`main`), the call channel to the runner
(`link`), the timed calls (`timed_calls`) and the stages in their order (`stages/`).

Nothing here runs candidate code: the candidate runs in the runner (`judge.runner`), a sibling
process forked by the same supervisor, confined, which reaches this process only through the call
channel. This process keeps the reference outputs, writes the inputs, compares, and holds the clock.
"""
