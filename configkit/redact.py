"""Secrets typed where a value goes (keys in an S3 URI, an ``api_key=`` in a ``--set``), shown as ``***`` in every
message that repeats the value. Secrets belong in the environment (``configkit.environ``); configs refuse them, and
their refusals must not print them.
"""

from __future__ import annotations

import datetime
import re
from typing import Any

SECRET_PARTS = {"secret", "token", "password", "passwd", "pwd", "credential", "credentials", "signature", "apikey", "auth", "authorization",
                "pat"}
SECRET_NAMES = ("apikey", "accesskey", "secretkey", "privatekey", "sessiontoken", "secret", "password", "passwd", "credential", "signature")
PLAIN_QUERY_OPTIONS = ("endpoint_override", "scheme", "region")  # an S3 URI's options (sweep.store.uris): settings, shown in messages
HIDDEN = "***"
_USERINFO = re.compile(r"(?<![A-Za-z0-9+.-])([A-Za-z][A-Za-z0-9+.-]*:(?://)?)[^/@?#&=\s]*@")  # scheme://user:pw@ anywhere (or scheme:user:pw@, missing its //)
_QUERY_PAIR = re.compile(r"(?<=[?&])([^=&#\s]+)=([^&#\s]*)")
# name = value (or name: value) in free text: a whole name (not the tail of a longer run) of at most 100 characters (else
# a long value's every position began a name: quadratic), a value quoted whole, or after an auth scheme's word
_ASSIGNMENT = re.compile(r"""(?<![A-Za-z0-9_.\-])([A-Za-z_][A-Za-z0-9_.\-]{0,100})(["']?\s*[:=]\s*)((?:(?:Bearer|Basic|Token)\s+)?(?:"[^"]*"|'[^']*'|[^\s,}\]]+))""")


def _parts(name: str) -> list[str]:
    """A name's words: split at ``.``, ``_``, ``-``, a list's ``[0]`` and camelCase (``AWSAccessKeyId``: aws, access, key,
    id; ``token[0]``: token, 0)."""
    spaced = re.sub(r"([a-z0-9])([A-Z])|([A-Z])([A-Z][a-z])", lambda m: f"{m[1] or m[3]}_{m[2] or m[4]}", name)
    return [part for part in re.split(r"[._\-\s\[\]]+", spaced.lower()) if part]


def looks_secret(name: str) -> bool:
    """A key or option named like a secret: ``logging.wandb.api_key``, ``?aws_secret_access_key=``, ``AWSAccessKeyId``,
    ``live_token`` (not ``max_tokens`` or ``env_key``: whole words are compared, and runs of words without ``key``)."""
    parts = _parts(name)
    joined = "".join(parts)
    return bool(SECRET_PARTS & set(parts)) or any(word in joined for word in SECRET_NAMES)


def redact_uri(text: str) -> str:
    """``text`` with a URI's user:password@ and its query values hidden (but an S3 URI's plain options); else as it is."""
    text = _USERINFO.sub(lambda m: f"{m[1]}{HIDDEN}@", text)
    return _QUERY_PAIR.sub(lambda m: m[0] if m[1] in PLAIN_QUERY_OPTIONS else f"{m[1]}={HIDDEN}", text)


def redact_text(text: str) -> str:
    """Free text that may quote a user's file (a YAML error's snippet): URIs' secrets and the value after any
    secret-named key (``api_key: ...``, ``aws_secret_access_key = ...``) hidden."""
    text = redact_uri(text)
    return _ASSIGNMENT.sub(lambda m: f"{m[1]}{m[2]}{HIDDEN}" if looks_secret(m[1]) else m[0], text)


SHOWN_ITEMS, SHOWN_DEPTH, SHOWN_TEXT = 8, 4, 300  # how much of a value a message shows: a list's items, nesting, characters


class Elided:
    """Text a message shows as it is, as its repr: what it leaves out of a long value (``… 4 more`` items, ``[…]``
    deeper nesting), or a date as YAML wrote it."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text

    __str__ = __repr__


def shown_value(key: str, value: Any, depth: int = 0) -> Any:
    """A value as a message may show it: hidden under a secret-named key, at any depth of a section or list, a URI's
    secrets and a secret-named assignment (``API_TOKEN=...``) hidden in text; and short: the first items of a long list or section, four levels, 300 characters of
    text (a YAML alias bomb's millions of items, or a pasted file, would make a message of megabytes)."""
    if looks_secret(key):
        return HIDDEN
    if isinstance(value, (dict, list)) and value and depth >= SHOWN_DEPTH:
        return Elided("{…}" if isinstance(value, dict) else "[…]")
    more = Elided(f"… {len(value) - SHOWN_ITEMS} more") if isinstance(value, (dict, list)) and len(value) > SHOWN_ITEMS else None
    if isinstance(value, dict):  # a key inside a section is named by its whole path (aws_access: {key: ...} is a secret's)
        shown = {as_written(k): shown_value(f"{key}.{k}" if key else str(k), v, depth + 1) for k, v in list(value.items())[:SHOWN_ITEMS]}
        return {**shown, Elided("…"): Elided(f"{len(value) - SHOWN_ITEMS} more")} if more else shown
    if isinstance(value, list):
        return [shown_value(key, v, depth + 1) for v in value[:SHOWN_ITEMS]] + ([more] if more else [])
    if isinstance(value, datetime.date):
        return as_written(value)
    if isinstance(value, str):  # a URI's secrets, and any secret-named assignment in it (a pasted "API_TOKEN=...")
        text = redact_text(value)
        return text if len(text) <= SHOWN_TEXT else f"{text[:SHOWN_TEXT]}… ({len(text)} characters)"
    return value


def as_written(value: Any) -> Any:
    """A date as YAML writes it (``2026-01-05``, ``2026-01-05 10:30:00``), not ``datetime.date(2026, 1, 5)``; else
    ``value``. (Read back from the date: a time written with another offset or fewer digits is shown in this form.)"""
    if isinstance(value, datetime.datetime):
        return Elided(value.isoformat(" ").replace("+00:00", "Z"))
    return Elided(value.isoformat()) if isinstance(value, datetime.date) else value


def shown_repr(key: str, value: Any) -> str:
    """``repr(shown_value(key, value))``, cut at 300 characters: what a message shows of a value."""
    text = repr(shown_value(key, value))
    return text if len(text) <= SHOWN_TEXT else f"{text[:SHOWN_TEXT]}…"


def mentions_secret(text: str, under: str = "") -> bool:
    """Text that names a secret-looking key anywhere in it (``{api_key: ...}``), or one that is a secret's under the key
    ``under`` it is the value of (``{key: ...}`` under ``aws_access``): its raw form is not to be shown."""
    words = re.findall(r"[A-Za-z_][A-Za-z0-9_.\-]*", text)
    return any(looks_secret(word) or (under and looks_secret(f"{under}.{word}")) for word in words)


def shown_key(path: str) -> str:
    """A dotted key as a message may name it: cut after its first secret-named part, since the keys inside a secret's
    value are the secret's too (``logging.wandb.api_key.…``)."""
    shown = ""
    for piece in re.findall(r"\.?[^.\[]+|\[[^\]]*\]", path):
        shown += piece
        if looks_secret(shown):
            return shown if shown == path else f"{shown}.…"
    return path
