"""The watchers: what a person sees of a sweep while it runs and when it ends.

``live`` (the terminal table), ``live_page`` and ``live_server`` (the live page on loopback), ``loggers``
(TensorBoard, W&B, CSV), ``summary_logs`` (the end-of-sweep summaries), ``notify`` (a webhook). Each is a Tune
callback or fed by one; none decides anything about a trial.
"""
