"""The floor every package stands on: typed YAML configs (``configkit.base``) and the process-wide
environment variables (``configkit.environ``). Imports nothing of ``toolenvs``, ``grpo`` or ``sweep``."""
