"""The verdict: which setting trains well, by how much, and why the others did not.

``score``: one noise-aware number per trial, how far training moved held-out pass@1 from the sweep's
shared base, with a bootstrap interval over eval tasks, and the one ranking (ties within noise marked)
that the end-of-run leaderboard, ``sweep report`` and ``sweep confirm`` all use. ``labels``: one label per
trial with its evidence, the labels mutually exclusive. ``summary``: the two or three sentences that open
the report. Pure: plain data in, plain data out; reading a sweep is ``sweep.report.load``'s job.
"""
