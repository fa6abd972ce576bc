"""The notifier's webhook URL (``sweep.watch.notify``), its shape checked on every load before a sweep starts.

The URL is a secret (Slack's path is its token), so the check's message repeats no part of it.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from configkit import environ


def webhook_url(variable: str = environ.GRPO_SWEEP_SLACK_WEBHOOK.name) -> str:
    """The webhook URL from the environment, blanks around it dropped ("" when unset); ``variable``: a test's own."""
    known = environ.GRPO_SWEEP_SLACK_WEBHOOK
    return (known if variable == known.name else environ.Variable(variable, "a test's own webhook")).get("").strip()


def webhook_problem(url: str) -> str | None:
    """Why ``url`` cannot be posted to (not http(s)://host/..., blanks or control characters in it), or None."""
    try:
        parts = urlsplit(url)
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname or any(c.isspace() or ord(c) < 32 for c in url):
        return (f"{environ.GRPO_SWEEP_SLACK_WEBHOOK.name} is not an http(s) URL with a host and no blanks (its value is not shown: "
                "a webhook URL is a secret); set it to https://hooks.slack.com/services/..., or unset it for no notifications")
    return None
