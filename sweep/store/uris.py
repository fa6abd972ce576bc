"""A storage value's shape, checked before anything starts: a local directory or ``s3://bucket/prefix``.

For S3-compatible servers the endpoint comes from the URI (``s3://bucket/prefix?endpoint_override=host:port&scheme=http``,
also ``region=``) or from ``AWS_ENDPOINT_URL`` (and ``AWS_REGION``/``AWS_DEFAULT_REGION``). Credentials come only
from the environment (or the machine's role): a URI that carries keys is refused, so no key is ever written into a
config, a result or a log.

``storage_problems``, run by every load: a scheme that is not ``s3://``, a URI missing its ``//`` that would become a
local folder, a bucket name no bucket can have, an endpoint that is not ``host:port``; a local path that is a file
or not writable. No network here: ``sweep.store.storage.reachability_problem`` asks a bucket at ``run`` and ``resume``.

Leaves out: other schemes (gs://, hdfs://) which pyarrow could serve but nothing here tests.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import parse_qs, parse_qsl, urlsplit

from configkit import environ
from configkit.outputs import placement_problem
from configkit.redact import PLAIN_QUERY_OPTIONS, looks_secret, redact_uri

SECRET_QUERY_KEYS = ("access_key", "secret_key", "session_token")


S3_QUERY_KEYS = PLAIN_QUERY_OPTIONS


ALLOWED = "allowed: a local directory (a plain path) or s3://bucket/prefix"


OTHER_SCHEMES = ("s3a", "s3n", "gs", "gcs", "file", "hdfs", "http", "https", "az", "abfs", "abfss", "wasb", "wasbs", "ftp", "sftp", "ssh")


ENV_VARIABLE = re.compile(r"\$\{?[A-Za-z_][A-Za-z0-9_]*\}?")  # $HOME, ${RESULTS}: a shell's, never expanded in a config


URI_START = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):(.*)$", re.DOTALL)


BUCKET_RULE = ("letters, digits, '.', '-' (and '_' in old us-east-1 names), 3 to 63 of them (255 in old names), starting and "
               "ending with a letter or digit, no '..', not an IP address; a new bucket's name is lower case")


def uri_problem(uri: str, what: str = "key 'storage'") -> str | None:
    """What is wrong with a storage value's shape (no file system or network touched), or None."""
    if not isinstance(uri, str) or not uri.strip():
        return f"{what} = {redact_uri(uri)!r}: empty; {ALLOWED}"
    if "\x00" in uri or uri != uri.strip():
        return f"{what} = {redact_uri(uri)!r}: a NUL byte or leading/trailing blanks; {ALLOWED}"
    variable = ENV_VARIABLE.search(uri)
    if variable:
        return (f"{what} = {redact_uri(uri)!r}: {variable[0]} is not expanded here (only ~ is); write the path itself "
                "(on a command line, a shell expands it outside single quotes)")
    start = URI_START.match(uri)
    if "://" not in uri:
        if start and (start[1].lower() in ("s3", *OTHER_SCHEMES) or start[2].startswith("/")):
            return f"{what} = {redact_uri(uri)!r}: looks like a URI but is not one ({start[1]}: without //), and would be taken as a local directory; {ALLOWED}"
        return None
    scheme = uri.split("://", 1)[0]
    if scheme == "file":
        return f"{what} = {redact_uri(uri)!r}: write a local directory as a plain path ({urlsplit(uri).path or '/'}), not file://"
    if scheme.lower() == "s3" and scheme != "s3":
        return f"{what} = {redact_uri(uri)!r}: write the scheme in lower case, {redact_uri('s3://' + uri.split('://', 1)[1])}"
    if scheme != "s3":
        return f"{what} = {redact_uri(uri)!r}: scheme {scheme}:// is not supported; {ALLOWED}"
    return _s3_problem(uri, what)


def _s3_problem(uri: str, what: str) -> str | None:
    """An ``s3://`` URI's bucket, path, query options and endpoint (the URI's or AWS_ENDPOINT_URL)."""
    query = uri_query(uri)
    secrets = sorted(key for key in query if key in SECRET_QUERY_KEYS or looks_secret(key))
    parts = urlsplit(uri)
    if "@" in parts.netloc:
        secrets.insert(0, "a user and password before the bucket (user:secret@)")
    if secrets:  # the value is not repeated: it holds a secret
        return (f"{what}: the URI carries {', '.join(secrets)}; credentials come only from the environment "
                "(AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN): remove them from the URI")
    given = [key for key, _ in parse_qsl(parts.query, keep_blank_values=True)]
    unknown = sorted(set(given) - set(S3_QUERY_KEYS))
    if unknown or not parts.netloc:
        problem = f"unknown option {', '.join(unknown)}" if unknown else "no bucket"
        return f"{what} = {redact_uri(uri)!r}: {problem}; write s3://bucket/prefix, optionally ?{'&'.join(k + '=...' for k in S3_QUERY_KEYS)}"
    twice = sorted({key for key in given if given.count(key) > 1})
    blank = sorted(key for key, value in parse_qsl(parts.query, keep_blank_values=True) if not value)
    if twice or blank:
        problem = f"option {', '.join(twice)} given more than once (one would silently win)" if twice else f"option {', '.join(blank)} empty"
        return f"{what} = {redact_uri(uri)!r}: {problem}; give each option once, with a value, or leave it out"
    if not _valid_bucket(parts.netloc):
        return f"{what} = {redact_uri(uri)!r}: {parts.netloc!r} is not a valid bucket name ({BUCKET_RULE})"
    if parts.fragment or "#" in uri or "//" in parts.path:
        return f"{what} = {redact_uri(uri)!r}: the prefix has an empty part or a '#'; write s3://bucket/prefix/more"
    if query.get("scheme", "https") not in ("http", "https"):
        return f"{what} = {redact_uri(uri)!r}: option scheme={query['scheme']!r}; allowed: http, https"
    if query.get("endpoint_override"):
        return _endpoint_problem(query["endpoint_override"], f"{what} = {redact_uri(uri)!r}: option endpoint_override")
    if environ.AWS_ENDPOINT_URL.get(""):
        return _endpoint_problem(environ.AWS_ENDPOINT_URL.get(""), f"{what} = {redact_uri(uri)!r}: {environ.AWS_ENDPOINT_URL.name}")
    return None


def _valid_bucket(name: str) -> bool:
    """S3's bucket naming rules, old us-east-1 names (upper case, '_', up to 255) included: a name no bucket
    can have is refused here; one that could exist is looked for by ``reachability_problem`` at ``run``."""
    return (re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{1,253}[A-Za-z0-9]", name) is not None and ".." not in name
            and re.fullmatch(r"\d+\.\d+\.\d+\.\d+", name) is None)


def _endpoint_problem(endpoint: str, where: str) -> str | None:
    """An endpoint is ``host[:port]`` or ``http(s)://host[:port]``, nothing after."""
    scheme, sep, rest = endpoint.partition("://")
    if not sep:
        scheme, rest = "https", endpoint
    try:
        parts = urlsplit(f"//{rest}")
        port = parts.port
    except ValueError:
        parts, port = None, -1
    if scheme not in ("http", "https"):
        return f"{where} = {redact_uri(endpoint)!r}: scheme {scheme}:// is not http:// or https://; write http://host:port"
    host = parts.hostname if parts is not None else None
    named = bool(host) and (re.fullmatch(r"[A-Za-z0-9_.-]+", host) is not None or re.fullmatch(r"[0-9A-Fa-f:.]+", host) is not None)
    if parts is None or port == -1 or not named or parts.path.strip("/") or parts.query or parts.fragment or parts.username:
        return f"{where} = {redact_uri(endpoint)!r}: not host:port or http(s)://host:port (e.g. http://127.0.0.1:9000)"
    return None


def storage_problems(uri: str, name: str | None = None) -> list[str]:
    """Why results cannot go to ``{uri}/{name}``: its shape, and for a local directory, that it (or the
    nearest folder above it that exists) is a writable directory and not a file. No network: S3 is
    reached only by ``reachability_problem``."""
    problem = uri_problem(uri)
    if problem or "://" in uri:
        return [problem] if problem else []
    try:
        root = Path(uri).expanduser()
    except RuntimeError:  # ~user for a user this machine does not have
        return [f"key 'storage' = {redact_uri(uri)!r}: {uri.split('/', 1)[0]} is no user's home on this machine; write the path itself"]
    target = root / name if name else root
    try:
        for path in (root, target):
            if path.exists() and not path.is_dir():
                which = f"key 'storage' = {redact_uri(uri)!r}" if path == root else f"key 'storage' = {redact_uri(uri)!r} with key 'name' = {name!r}"
                return [f"{which}: {path.resolve()} is a file, not a directory; name a directory (or remove the file)"]
        problem = placement_problem(target.resolve())
        if problem:
            return [f"key 'storage' = {redact_uri(uri)!r}: {problem}; name a directory you can write to"]
    except OSError as exc:
        return [f"key 'storage' = {redact_uri(uri)!r}: cannot be used as a directory ({exc.strerror or exc})"]
    return []


def bare_uri(uri: str) -> str:
    """``uri`` without its query (an endpoint's settings stay out of messages and names) or a trailing slash."""
    return uri.split("?", 1)[0].rstrip("/")


def uri_query(uri: str) -> dict[str, str]:
    return {key: values[-1] for key, values in parse_qs(urlsplit(uri).query).items()}


def s3_options(query: dict[str, str]) -> dict[str, str]:
    """Endpoint, scheme and region from the URI's query, else from AWS_ENDPOINT_URL / AWS_REGION / AWS_DEFAULT_REGION."""
    options: dict[str, str] = {}
    endpoint = query.get("endpoint_override") or environ.AWS_ENDPOINT_URL.get("")
    if "://" in endpoint:
        options["scheme"], endpoint = endpoint.split("://", 1)
    if endpoint:
        options["endpoint_override"] = endpoint.rstrip("/")
    if query.get("scheme"):
        options["scheme"] = query["scheme"]
    region = query.get("region") or environ.AWS_REGION.get() or environ.AWS_DEFAULT_REGION.get()
    if region:
        options["region"] = region
    return options
