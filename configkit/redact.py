"""Secrets typed where a value goes (keys in an S3 URI, an ``api_key=`` in a ``--set``), shown as ``***`` in every
message that repeats the value. Secrets belong in the environment (``configkit.environ``); configs refuse them, and
their refusals must not print them.
"""

from __future__ import annotations

import re
from typing import Any

SECRET_PARTS = {"secret", "token", "password", "passwd", "credential", "credentials", "signature", "apikey", "auth"}
SECRET_NAMES = ("api_key", "access_key", "secret_key", "private_key", "session_token", "access_key_id")
HIDDEN = "***"
_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*:(?://)?)[^/@?#&=]*@")  # scheme://user:pw@ anywhere (or scheme:user:pw@, missing its //)
_QUERY_PAIR = re.compile(r"(?<=[?&])([^=&#]+)=([^&#]*)")


def looks_secret(name: str) -> bool:
    """A key or option named like a secret: ``logging.wandb.api_key``, ``?aws_secret_access_key=``, ``live_token``
    (not ``max_tokens`` or ``env_key``: the name's parts, split at ``.``, ``_`` and ``-``, are compared)."""
    lowered = name.lower()
    return any(word in lowered for word in SECRET_NAMES) or bool(SECRET_PARTS & set(re.split(r"[._\-]", lowered)))


def redact_uri(text: str) -> str:
    """``text`` with a URI's user:password@ and its secret-named query values hidden; anything else as it is."""
    text = _USERINFO.sub(lambda m: f"{m[1]}{HIDDEN}@", text)
    return _QUERY_PAIR.sub(lambda m: f"{m[1]}={HIDDEN}" if looks_secret(m[1]) else m[0], text)


def shown_value(key: str, value: Any) -> Any:
    """A value as a message may show it: hidden under a secret-named key, at any depth of a section or list, and a
    URI's secrets hidden in text."""
    if looks_secret(key):
        return HIDDEN
    if isinstance(value, dict):
        return {k: shown_value(str(k), v) for k, v in value.items()}
    if isinstance(value, list):
        return [shown_value("", v) for v in value]
    return redact_uri(value) if isinstance(value, str) else value


def mentions_secret(text: str) -> bool:
    """Text that names a secret-looking key anywhere in it (``{api_key: ...}``): its raw form is not to be shown."""
    return any(looks_secret(word) for word in re.findall(r"[A-Za-z_][A-Za-z0-9_.\-]*", text))
