"""Where a sweep's results live, as one URI: a local directory or ``s3://bucket/prefix``.

For S3-compatible servers the endpoint comes from the URI (``s3://bucket/prefix?endpoint_override=host:port&scheme=http``,
also ``region=``) or from ``AWS_ENDPOINT_URL`` (and ``AWS_REGION``/``AWS_DEFAULT_REGION``). Credentials come only from the environment (or the machine's role): a URI
that carries keys is refused, so no key is ever written into a config, a result or a log.

Under ``{storage}/{name}/``: Tune's experiment (trial results, checkpoints), ``trajectories/{trial}/``,
``leaderboard.json``, ``sweep_config.json`` (what ``sweep resume`` rebuilds the sweep from) and
``optuna.db``. SQLite cannot live on S3, so with S3 the study is kept in a local directory named after the
experiment (the same on every machine, since Tune pickles the searcher with its path) and copied up
whenever Tune snapshots the searcher; ``sweep resume`` copies it down first.

Before anything starts, a value is checked for its shape (``storage_problems``, run by every load: a scheme
that is not ``s3://``, a URI missing its ``//`` that would become a local folder, a bucket name no bucket can
have, an endpoint that is not ``host:port``; a local path that is a file or not writable), and ``run`` and
``resume`` ask an S3 bucket to answer within seconds (``reachability_problem``; ``validate`` stays offline).

Leaves out: other schemes (gs://, hdfs://) which pyarrow could serve but nothing here tests.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pyarrow.fs as pafs

from configkit import environ
from configkit.base import ConfigError

SECRET_QUERY_KEYS = ("access_key", "secret_key", "session_token")
S3_QUERY_KEYS = ("endpoint_override", "scheme", "region")
# pyarrow's default gives up on a request that stalls 3 s, which a busy S3-compatible server can exceed
S3_REQUEST_TIMEOUT_S = 60.0
S3_CONNECT_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Storage:
    """An opened storage URI: ``root`` is its path on ``fs`` (``/abs/dir`` or ``bucket/prefix``)."""

    uri: str
    fs: pafs.FileSystem
    root: str

    @property
    def is_local(self) -> bool:
        return isinstance(self.fs, pafs.LocalFileSystem)

    def path(self, *parts: str) -> str:
        """A path on ``fs`` under the root."""
        return "/".join([self.root.rstrip("/"), *(p.strip("/") for p in parts if p)])

    def display(self, *parts: str) -> str:
        """Where a thing is, for people: ``s3://bucket/prefix/...`` (no query) or a local path."""
        return self.path(*parts) if self.is_local else "s3://" + self.path(*parts)

    def exists(self, *parts: str) -> bool:
        return self.fs.get_file_info(self.path(*parts)).type != pafs.FileType.NotFound

    def read_text(self, *parts: str) -> str:
        with self.fs.open_input_stream(self.path(*parts)) as f:
            return f.read().decode()

    def write_text(self, text: str, *parts: str) -> str:
        target = self.path(*parts)
        self.fs.create_dir(target.rsplit("/", 1)[0], recursive=True)
        with self.fs.open_output_stream(target) as f:
            f.write(text.encode())
        return target

    def upload(self, local: str | Path, *parts: str) -> None:
        """Copy a local file (or directory, recursively) to ``parts`` under the root."""
        pafs.copy_files(str(local), self.path(*parts), source_filesystem=pafs.LocalFileSystem(), destination_filesystem=self.fs)

    def copy(self, source: tuple[str, ...], target: tuple[str, ...]) -> None:
        """Copy a file or directory within this storage."""
        pafs.copy_files(self.path(*source), self.path(*target), source_filesystem=self.fs, destination_filesystem=self.fs)

    def download(self, local: str | Path, *parts: str) -> bool:
        """Copy ``parts`` (a file or directory) to a local path; False when it is not there."""
        if not self.exists(*parts):
            return False
        Path(local).parent.mkdir(parents=True, exist_ok=True)
        pafs.copy_files(self.path(*parts), str(local), source_filesystem=self.fs, destination_filesystem=pafs.LocalFileSystem())
        return True

    def delete_dir(self, *parts: str) -> None:
        if self.exists(*parts):
            self.fs.delete_dir(self.path(*parts))


def open_storage(uri: str, what: str = "key 'storage'") -> Storage:
    """A local directory (made absolute) or an S3 URI; anything else is a ConfigError naming ``what``."""
    problem = uri_problem(uri, what)
    if problem:
        raise ConfigError(problem)
    if "://" not in uri:
        local = Path(uri).expanduser().resolve()
        return Storage(str(local), pafs.LocalFileSystem(), str(local))
    parts = urlsplit(uri)
    fs = pafs.S3FileSystem(request_timeout=S3_REQUEST_TIMEOUT_S, connect_timeout=S3_CONNECT_TIMEOUT_S, **_s3_options(_query(uri)))
    return Storage(uri, fs, (parts.netloc + parts.path).rstrip("/"))


ALLOWED = "allowed: a local directory (a plain path) or s3://bucket/prefix"
OTHER_SCHEMES = ("s3a", "s3n", "gs", "gcs", "file", "hdfs", "http", "https", "az", "abfs", "abfss", "wasb", "wasbs", "ftp", "sftp", "ssh")
URI_START = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):(.*)$", re.DOTALL)
BUCKET_RULE = ("letters, digits, '.', '-' (and '_' in old us-east-1 names), 3 to 63 of them (255 in old names), starting and "
               "ending with a letter or digit, no '..', not an IP address; a new bucket's name is lower case")


def uri_problem(uri: str, what: str = "key 'storage'") -> str | None:
    """What is wrong with a storage value's shape (no file system or network touched), or None."""
    if not isinstance(uri, str) or not uri.strip():
        return f"{what} = {uri!r}: empty; {ALLOWED}"
    if "\x00" in uri or uri != uri.strip():
        return f"{what} = {uri!r}: a NUL byte or leading/trailing blanks; {ALLOWED}"
    start = URI_START.match(uri)
    if "://" not in uri:
        if start and (start[1].lower() in ("s3", *OTHER_SCHEMES) or start[2].startswith("/")):
            return f"{what} = {uri!r}: looks like a URI but is not one ({start[1]}: without //), and would be taken as a local directory; {ALLOWED}"
        return None
    scheme = uri.split("://", 1)[0]
    if scheme == "file":
        return f"{what} = {uri!r}: write a local directory as a plain path ({urlsplit(uri).path or '/'}), not file://"
    if scheme.lower() == "s3" and scheme != "s3":
        return f"{what} = {uri!r}: write the scheme in lower case, s3://{uri.split('://', 1)[1]}"
    if scheme != "s3":
        return f"{what} = {uri!r}: scheme {scheme}:// is not supported; {ALLOWED}"
    return _s3_problem(uri, what)


def _s3_problem(uri: str, what: str) -> str | None:
    """An ``s3://`` URI's bucket, path, query options and endpoint (the URI's or AWS_ENDPOINT_URL)."""
    query = _query(uri)
    secrets = sorted(set(query) & set(SECRET_QUERY_KEYS))
    if secrets:  # the value is not repeated: it holds a secret
        return (f"{what}: the URI carries {', '.join(secrets)}; credentials come only from the environment "
                "(AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN): remove them from the URI")
    parts = urlsplit(uri)
    unknown = sorted(set(query) - set(S3_QUERY_KEYS))
    if unknown or not parts.netloc:
        problem = f"unknown option {', '.join(unknown)}" if unknown else "no bucket"
        return f"{what} = {uri!r}: {problem}; write s3://bucket/prefix, optionally ?{'&'.join(k + '=...' for k in S3_QUERY_KEYS)}"
    if not _valid_bucket(parts.netloc):
        return f"{what} = {uri!r}: {parts.netloc!r} is not a valid bucket name ({BUCKET_RULE})"
    if parts.fragment or "#" in uri or "//" in parts.path:
        return f"{what} = {uri!r}: the prefix has an empty part or a '#'; write s3://bucket/prefix/more"
    if query.get("scheme", "https") not in ("http", "https"):
        return f"{what} = {uri!r}: option scheme={query['scheme']!r}; allowed: http, https"
    if query.get("endpoint_override"):
        return _endpoint_problem(query["endpoint_override"], f"{what} = {uri!r}: option endpoint_override")
    if environ.AWS_ENDPOINT_URL.get(""):
        return _endpoint_problem(environ.AWS_ENDPOINT_URL.get(""), f"{what} = {uri!r}: {environ.AWS_ENDPOINT_URL.name}")
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
        return f"{where} = {endpoint!r}: scheme {scheme}:// is not http:// or https://; write http://host:port"
    if parts is None or port == -1 or not parts.hostname or parts.path.strip("/") or parts.query or parts.fragment or parts.username:
        return f"{where} = {endpoint!r}: not host:port or http(s)://host:port (e.g. http://127.0.0.1:9000)"
    return None


def storage_problems(uri: str, name: str | None = None) -> list[str]:
    """Why results cannot go to ``{uri}/{name}``: its shape, and for a local directory, that it (or the
    nearest folder above it that exists) is a writable directory and not a file. No network: S3 is
    reached only by ``reachability_problem``."""
    problem = uri_problem(uri)
    if problem or "://" in uri:
        return [problem] if problem else []
    root = Path(uri).expanduser()
    target = root / name if name else root
    try:
        for path in (root, target):
            if path.exists() and not path.is_dir():
                which = f"key 'storage' = {uri!r}" if path == root else f"key 'storage' = {uri!r} with key 'name' = {name!r}"
                return [f"{which}: {path.resolve()} is a file, not a directory; name a directory (or remove the file)"]
        existing = target.resolve()
        while not existing.exists():
            existing = existing.parent
        if not existing.is_dir():
            return [f"key 'storage' = {uri!r}: {existing} is a file, so {target.resolve()} cannot be made; name a directory"]
        if not os.access(existing, os.W_OK | os.X_OK):
            return [f"key 'storage' = {uri!r}: {existing} is not writable by this user; name a directory you can write to"]
    except OSError as exc:
        return [f"key 'storage' = {uri!r}: cannot be used as a directory ({exc.strerror or exc})"]
    return []


PROBE_CONNECT_TIMEOUT_S = 3.0
PROBE_REQUEST_TIMEOUT_S = 5.0


def reachability_problem(store: Storage, what: str = "key 'storage'") -> str | None:
    """For S3: whether the bucket answers within a few seconds (one try, no retries), or why not; None when
    it does, or for a local directory. ``sweep run`` and ``resume`` ask before anything starts; ``validate``
    does not (it stays offline)."""
    if store.is_local:
        return None
    options = _s3_options(_query(store.uri))
    where = f"{what} = {store.uri!r}"
    endpoint = options.get("endpoint_override", "AWS's endpoint for the region")
    bucket = store.root.split("/", 1)[0]
    try:
        probe = pafs.S3FileSystem(connect_timeout=PROBE_CONNECT_TIMEOUT_S, request_timeout=PROBE_REQUEST_TIMEOUT_S,
                                  retry_strategy=pafs.AwsStandardS3RetryStrategy(max_attempts=1), **options)
        found = probe.get_file_info(bucket).type
    except (OSError, ValueError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return (f"{where}: the bucket {bucket!r} could not be reached at {endpoint} ({reason}); check the endpoint "
                f"({environ.AWS_ENDPOINT_URL.name} or ?endpoint_override=), the network and the credentials in the environment")
    if found == pafs.FileType.NotFound:
        return f"{where}: there is no bucket {bucket!r} at {endpoint}; create it, or name one that exists"
    return None


def _query(uri: str) -> dict[str, str]:
    return {key: values[-1] for key, values in parse_qs(urlsplit(uri).query).items()}


def _s3_options(query: dict[str, str]) -> dict[str, str]:
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


def split_experiment(uri: str) -> tuple[str, str]:
    """``s3://b/p/name?q`` -> (``s3://b/p?q``, ``name``); ``dir/name`` -> (``dir``, ``name``)."""
    problem = uri_problem(uri, "the sweep's path")
    if problem:
        raise ConfigError(problem)
    if "://" not in uri:
        path = Path(uri).expanduser().resolve()
        return str(path.parent), path.name
    parts = urlsplit(uri)
    parent, _, name = parts.path.rstrip("/").rpartition("/")
    if not name:
        raise ConfigError(f"{uri!r}: name the sweep's directory, s3://bucket/prefix/NAME")
    query = f"?{parts.query}" if parts.query else ""
    return f"{parts.scheme}://{parts.netloc}{parent}{query}", name


def optuna_db_path(store: Storage, name: str) -> Path:
    """The study's SQLite file: in the experiment directory when local; else a local copy named after the
    experiment, the same path on every machine (Tune pickles the searcher, and with it this path)."""
    if store.is_local:
        return Path(store.path(name, "optuna.db"))
    key = hashlib.sha1(store.path(name).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / "grpo-sweep-optuna" / key / "optuna.db"


_PUSHED: dict[Path, tuple[int, int]] = {}  # the study file's (size, mtime) when last copied up


def push_study(store: Storage, name: str) -> None:
    """Copy the local study up to ``{name}/optuna.db`` when it changed (S3 only; a local study already lives there)."""
    local = optuna_db_path(store, name)
    if store.is_local or not local.is_file():
        return
    stamp = (local.stat().st_size, local.stat().st_mtime_ns)
    if _PUSHED.get(local) != stamp:
        store.upload(local, name, "optuna.db")
        _PUSHED[local] = stamp


def pull_study(store: Storage, name: str) -> Path:
    """Before resuming on any machine: the study's local copy from storage (S3 only); returns its path."""
    local = optuna_db_path(store, name)
    local.parent.mkdir(parents=True, exist_ok=True)
    if not store.is_local:
        local.unlink(missing_ok=True)
        store.download(local, name, "optuna.db")
    return local


class DirMirror:
    """Mirrors a local directory to a storage path: each ``push`` uploads files new or changed since the last.

    Trials write eval trajectories to a local directory (the trainer knows only paths); with S3 storage the
    reporter pushes before each report, so whatever a step wrote is in the bucket before Tune sees the step.
    """

    def __init__(self, local: str | Path, store: Storage, *parts: str):
        self.local, self.store, self.parts = Path(local), store, parts
        self._seen: dict[Path, tuple[int, int]] = {}

    def pull(self) -> None:
        """Start from what storage already holds (a resumed trial appends to its earlier files)."""
        self.store.download(self.local, *self.parts)
        self._seen = self._snapshot()

    def push(self) -> None:
        now = self._snapshot()
        for path, stamp in now.items():
            if self._seen.get(path) != stamp:
                self.store.upload(path, *self.parts, path.relative_to(self.local).as_posix())
        self._seen = now

    def _snapshot(self) -> dict[Path, tuple[int, int]]:
        if not self.local.is_dir():
            return {}
        return {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in self.local.rglob("*") if p.is_file()}
