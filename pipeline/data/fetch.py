"""Verified, resumable shard fetch from the Hugging Face hub, an HTTP mirror or a local folder.

    repro data fetch                                   # the record's val shard + 9 train shards
    repro data fetch --source https://host/fineweb/{filename} --train-shards 2
    repro data fetch --source /mnt/shards --dir data/fineweb10B-gpt2

Each file is downloaded to `<dir>/.partial/<name>.part` by pipeline/http.py (resumed with Range
requests, retried with backoff within --max-retry-time, never written past its expected size),
then checked (header, exact size, sha256 against the manifest's lock and the hub's LFS sha256) and
only then renamed to its final name: a corrupt file never sits under a final name.

The hub is reached through huggingface_hub (HF_ENDPOINT, HF_TOKEN, the pinned revision, and
the LFS sha256 it declares in X-Linked-Etag), which resolves each file to its storage URL; the
bytes are then streamed here rather than by hf_hub_download: huggingface_hub 2.x writes in
10 MiB chunks to a per-process temporary file that it deletes when a download fails, so a
dropped connection costs up to 10 MiB and an interrupted run the whole 200 MB shard.

What vouches for a file's sha256: the manifest's lock, the hub's LFS metadata, or a source folder's
own data.lock.yaml (computed locally when it was written). A mirror's ETag or Digest header never
does: a mirror can put any hash beside any bytes, so `--lock` refuses to record a hash from one.
Every file name is one plain name inside --dir (pipeline/data/paths.py), checked before it is used.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from pipeline import http
from pipeline.atomic import DiskFull, commit, write_error, write_text
from pipeline.data.manifest import DatasetManifest, HubSource, load_dataset, record_lock
from pipeline.data.paths import check_file_name, file_in
from pipeline.data.shards import header_problems, read_header, size_from_header
from pipeline.data.verify import LockEntry, data_lock_digest, read_local_lock, write_local_lock
from pipeline.errors import InputError, Interrupted, ReproError
from pipeline.hashing import sha256_file
from pipeline.manifest_io import SHA256_RE
from pipeline.records.model import Record
from pipeline.redact import public_url
from pipeline.regular_file import read_text_bounded

COMMIT_RE = re.compile(r"^[0-9a-f]{40}$")


class Retryable(Exception):
    """A transient failure (connection dropped, timeout, 5xx): back off and resume."""


class FetchError(Exception):
    """A failure retrying cannot fix; carries the fix for the user.

    kind: "input" (no such file/revision, bad URL), "bad" (bytes failed their checks or disagree
    with the lock), "unreachable" (retries used up), "interrupted".
    """

    def __init__(self, what: str, fix: str, kind: str = "input"):
        super().__init__(what)
        self.what, self.fix, self.kind = what, fix, kind


@dataclass(frozen=True, kw_only=True)
class Remote:
    """Where one file's bytes are, and what the source declares about them."""

    url: str
    headers: dict
    size: int | None
    sha256: str | None
    label: str  # recorded in the lock: no credentials, no signed query strings


@dataclass(frozen=True, kw_only=True)
class FetchedFile:
    name: str
    size: int
    sha256: str
    tokens: int
    source: str
    checked: tuple[str, ...]  # e.g. ("header", "size", "sha256:lock", "sha256:server")
    downloaded_bytes: int
    reused: bool


@dataclass(frozen=True)
class FetchFailure:
    name: str
    what: str
    fix: str
    kind: str


@dataclass(frozen=True, kw_only=True)
class FetchResult:
    dataset: str
    data_dir: Path
    source: str
    files: tuple[FetchedFile, ...]
    failures: tuple[FetchFailure, ...]
    locked: tuple[str, ...] = ()
    lock_path: Path | None = None
    lock_digest: str | None = None

    @property
    def ok(self) -> bool:
        return not self.failures

    @property
    def unhashed(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.files if not any(c.startswith("sha256") for c in f.checked))


@dataclass(kw_only=True)
class Options:
    jobs: int = 4
    retries: int = 5  # consecutive failures without progress before giving up on a file
    backoff_s: float = 1.0  # first wait; doubles up to 30 s, with jitter
    corrupt_retries: int = 1  # full re-downloads after a file fails its checks
    timeout_s: float = 60.0
    max_retry_s: float = 900.0  # time spent retrying one file without new bytes before giving up
    lock: bool = False
    quiet: bool = False
    stop: threading.Event = field(default_factory=threading.Event)

    def policy(self) -> http.Policy:
        return http.Policy(retries=self.retries, backoff_s=self.backoff_s, timeout_s=self.timeout_s,
                           max_retry_s=self.max_retry_s, stop=self.stop)


@dataclass(frozen=True)
class Claim:
    """What one party (the manifest's lock, or the source) says about a file's bytes; None: says nothing."""

    size: int | None = None
    sha256: str | None = None


@dataclass(frozen=True, kw_only=True)
class Fetcher:
    """What every file of one fetch shares: where from, which dataset, where to, one progress, the options."""

    source: object  # HubFiles, MirrorFiles or FolderFiles
    manifest: DatasetManifest
    data_dir: Path
    progress: _Progress  # one byte counter for every file (and closed once, at the end)
    opts: Options


@dataclass(frozen=True)
class _Shard:
    """One file to fetch: its final path and what the manifest expects of it."""

    name: str
    final: Path
    lock: Claim
    tokens_expected: int | None


# ---- sources ------------------------------------------------------------------------------------

def _origin(url: str) -> tuple:
    parts = urlsplit(url)
    return parts.scheme, parts.hostname, parts.port


class HubFiles:
    """Resolve files of a pinned hub revision with huggingface_hub (endpoint, token, redirects)."""

    def __init__(self, hub: HubSource, endpoint: str | None = None):
        self.hub = hub
        self.endpoint = (endpoint or os.environ.get("HF_ENDPOINT") or "").rstrip("/") or None
        self.description = f"hub {hub.repo_id}@{hub.revision}" + (f" via {public_url(self.endpoint)}"
                                                                    if self.endpoint else "")

    def resolve(self, name: str, timeout: float) -> Remote:
        from huggingface_hub import get_hf_file_metadata, hf_hub_url
        from huggingface_hub.utils import HfHubHTTPError, build_hf_headers

        url = hf_hub_url(self.hub.repo_id, name, repo_type=self.hub.repo_type, revision=self.hub.revision,
                         endpoint=self.endpoint)
        try:
            meta = get_hf_file_metadata(url, timeout=timeout)
        except HfHubHTTPError as exc:
            response = getattr(exc, "response", None)
            status = getattr(response, "status_code", None)
            code = response.headers.get("X-Error-Code", "") if response is not None else ""
            if status is not None and (status >= 500 or status in (408, 429)):
                raise Retryable(f"hub answered HTTP {status}") from None
            if code == "RevisionNotFound":
                raise FetchError(f"{self.hub.repo_id} has no revision {self.hub.revision}",
                                 "check `source.hub.revision` in the dataset manifest") from None
            if code == "EntryNotFound":
                raise FetchError(f"{self.hub.repo_id}@{self.hub.revision} has no file {name}",
                                 "check the split patterns and counts in the dataset manifest") from None
            raise FetchError(f"hub refused {name} (HTTP {status}{', ' + code if code else ''})",
                             "check the repo id; for a private or gated repo set HF_TOKEN") from None
        except Exception as exc:
            if isinstance(exc, (TypeError, AttributeError, NameError, AssertionError)):
                raise
            raise Retryable(f"hub unreachable ({type(exc).__name__}: {exc})") from None
        if COMMIT_RE.match(self.hub.revision) and meta.commit_hash and meta.commit_hash != self.hub.revision:
            raise FetchError(f"hub served commit {meta.commit_hash} for pinned revision {self.hub.revision}",
                             "the endpoint is not serving the pinned revision; check HF_ENDPOINT", "bad")
        commit = meta.commit_hash or self.hub.revision
        etag = (meta.etag or "").lower()
        location = meta.location or url
        # Authorization goes to the hub only, never to the storage host a file redirects to.
        headers = build_hf_headers() if _origin(location) == _origin(url) else {}
        headers["Accept-Encoding"] = "identity"
        label = f"hf://{'datasets/' if self.hub.repo_type == 'dataset' else ''}{self.hub.repo_id}@{commit}/{name}"
        if self.endpoint:
            label += f" (endpoint {public_url(self.endpoint)})"
        return Remote(url=location, headers=headers, size=meta.size, sha256=etag if SHA256_RE.match(etag) else None,
                      label=label)


class MirrorFiles:
    """An HTTP(S) mirror given as a URL template with {filename} (and optionally {repo_id}, {revision})."""

    def __init__(self, template: str, hub: HubSource | None):
        if "{filename}" not in template:
            raise InputError(f"mirror URL {template!r} has no {{filename}}",
                             "write the template like https://host/path/{filename}")
        try:
            template.format(filename="x", repo_id="r", revision="v")
        except (KeyError, IndexError, ValueError):
            raise InputError(f"mirror URL {template!r} has placeholders other than {{filename}}, {{repo_id}}, "
                             "{revision}", "escape literal braces as {{ }} or remove them") from None
        self.template, self.hub = template, hub
        self.description = f"mirror {public_url(template)}"

    def resolve(self, name: str, timeout: float) -> Remote:
        url = self.template.format(filename=name, repo_id=self.hub.repo_id if self.hub else "",
                                   revision=self.hub.revision if self.hub else "")
        # No size and no sha256: nothing a mirror says about its own bytes vouches for them.
        return Remote(url=url, headers={"Accept-Encoding": "identity"}, size=None, sha256=None, label=public_url(url))


class FolderFiles:
    """A local folder (another disk, a shared mount); its data.lock.yaml, if any, declares hashes."""

    def __init__(self, folder: Path):
        self.folder = Path(folder).resolve()
        if not self.folder.is_dir():
            raise InputError(f"source folder {folder} does not exist", "give a folder that holds the shards")
        self.lock = read_local_lock(self.folder)
        self.description = f"folder {self.folder}"

    def resolve(self, name: str, timeout: float) -> Remote:
        path = file_in(self.folder, name, f"source folder {self.folder}")
        if not path.is_file():
            raise FetchError(f"{path} does not exist", "copy the shard there or fetch from the hub")
        entry = self.lock.files.get(name) if self.lock else None  # written locally when the folder was filled
        return Remote(url=path.as_uri(), headers={}, size=path.stat().st_size, sha256=entry.sha256 if entry else None,
                      label=str(path))


def make_source(source: str, manifest: DatasetManifest):
    if source == "hub":
        if manifest.hub is None:
            raise InputError(f"dataset {manifest.name} has no hub source", "give --source URL-TEMPLATE or DIR")
        return HubFiles(manifest.hub)
    if source == "mirror":
        if not manifest.mirrors:
            raise InputError(f"dataset {manifest.name} lists no mirrors",
                             "give the mirror as --source https://host/path/{filename}")
        return MirrorFiles(manifest.mirrors[0], manifest.hub)
    if source.startswith(("http://", "https://")):
        return MirrorFiles(source, manifest.hub)
    if Path(source).is_dir():
        return FolderFiles(Path(source))
    raise InputError(f"--source {source!r} is neither hub, mirror, an http(s) URL template nor a folder",
                     "use --source hub, --source https://host/path/{filename} or --source /path/to/shards")


# ---- transfer -----------------------------------------------------------------------------------

def _staging(data_dir: Path, name: str) -> tuple[Path, Path]:
    """Where a file is downloaded before its checks: the part, and the note of whose bytes it holds."""
    partial = data_dir / ".partial"
    try:
        partial.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise write_error(partial, exc) from None
    return file_in(partial, f"{name}.part"), file_in(partial, f"{name}.part.json")


def _transfer(run: Fetcher, shard: _Shard, part: Path, part_note: Path,
              progress: Callable[[int], None]) -> tuple[Remote, http.Downloaded]:
    """Resolve the file and bring its part to the whole file (pipeline/http.py retries and resumes)."""
    policy = run.opts.policy()
    backoff = http.Backoff(shard.name, policy)
    lock_size, lock_sha = shard.lock.size, shard.lock.sha256
    while True:
        try:
            remote = run.source.resolve(shard.name, run.opts.timeout_s)
        except Retryable as exc:
            backoff.failed(f"{run.source.description}: {exc}")
            continue
        if lock_size is not None and remote.size is not None and remote.size != lock_size:
            raise FetchError(f"source offers {remote.size} bytes, the lock says {lock_size}",
                             "the source serves a different file; use the pinned source or fix the lock", "bad")
        if lock_sha and remote.sha256 and remote.sha256 != lock_sha:
            raise FetchError(f"source declares sha256 {remote.sha256}, the lock says {lock_sha}",
                             "the source serves a different version; use the pinned revision or fix the lock", "bad")
        _discard_stale_part(part, part_note, remote, lock_sha, progress)
        expected = lock_size if lock_size is not None else remote.size
        got = http.download(remote.url, part, headers=remote.headers, expected_size=expected,
                            size_from_prefix=size_from_header, prefix_bytes=1024, policy=policy, progress=progress)
        return remote, got


def _resolve_with_retries(source, name: str, opts: Options) -> Remote:
    backoff = http.Backoff(name, opts.policy())
    while True:
        try:
            return source.resolve(name, opts.timeout_s)
        except Retryable as exc:
            backoff.failed(f"{source.description}: {exc}")


def _as_fetch_error(exc: ReproError) -> FetchError:
    """An error of one file (not a full disk: that stops everything) as a per-file failure."""
    kind = {1: "bad", 4: "unreachable", 130: "interrupted"}.get(exc.exit_code, "input")
    return FetchError(exc.what, exc.fix or "", kind)


def _discard_stale_part(part: Path, meta_path: Path, remote: Remote, lock_sha, progress) -> None:
    """A part started for other bytes (new revision, other size) cannot be resumed."""
    want = {"size": remote.size, "sha256": lock_sha or remote.sha256}
    if part.exists() and meta_path.exists():
        try:
            old = json.loads(read_text_bounded(meta_path, 1 << 20, "partial download's note", "delete it"))
        except (ReproError, ValueError):
            old = {}
        if any(want[k] is not None and old.get(k) not in (None, want[k]) for k in want):
            progress(-part.stat().st_size)
            part.unlink()
    write_text(meta_path, json.dumps(want))


# ---- one file -----------------------------------------------------------------------------------

def _check(path: Path, sha256: str, tokens_expected: int | None, lock: Claim,
           source: Claim) -> tuple[list[str], tuple[str, ...]]:
    problems = header_problems(path, tokens_expected)
    actual = path.stat().st_size
    checked = ["header"]
    for where, want in (("lock", lock.size), ("source", source.size)):
        if want is not None:
            checked.append(f"size:{where}")
            if actual != want:
                problems.append(f"size {actual} differs from {want} ({where})")
    for where, want in (("lock", lock.sha256), ("server", source.sha256)):
        if want:
            checked.append(f"sha256:{where}")
            if sha256 != want:
                problems.append(f"sha256 {sha256} differs from {want} ({where})")
    return problems, tuple(dict.fromkeys(checked))


def _fsync(path: Path) -> None:
    """The part's bytes on disk before it is renamed to its final name (a crash must not leave a hole)."""
    with open(path, "rb") as f:
        os.fsync(f.fileno())


def fetch_one(run: Fetcher, name: str, previous_source: str = "") -> FetchedFile:
    try:
        return _fetch_one(run, name, previous_source)
    except DiskFull:
        raise  # not this file's problem: every file stops (fetch() removes the staging)
    except ReproError as exc:  # unreachable, refused, interrupted, a directory in the way, ...
        raise _as_fetch_error(exc) from None


def _fetch_one(run: Fetcher, name: str, previous_source: str) -> FetchedFile:
    manifest = run.manifest
    final = file_in(run.data_dir, name, f"dataset {manifest.name}")
    locked = manifest.lock.get(name)
    shard = _Shard(name, final, Claim(locked.size, locked.sha256) if locked else Claim(),
                   manifest.tokens_expected(name))
    if final.is_dir():
        raise FetchError(f"{final} is a directory where the shard belongs",
                         f"remove or rename the directory {final}, then run again", "input")
    if final.exists():
        kept = _reuse(run, shard, previous_source)
        if kept is not None:
            return kept
        final.unlink()  # bad under a final name: fetch it properly
    return _download_checked(run, shard)


def _reuse(run: Fetcher, shard: _Shard, previous_source: str) -> FetchedFile | None:
    """The file already under its final name, when it passes its checks (None: it does not)."""
    final = shard.final
    try:
        sha = sha256_file(final)
    except (OSError, ReproError) as exc:
        raise FetchError(f"{final} cannot be read ({getattr(exc, 'strerror', None) or exc})",
                         f"fix its permissions, or delete {final} to fetch it again", "input") from None
    problems, checked = _check(final, sha, shard.tokens_expected, shard.lock, Claim())
    label = previous_source or "(already present)"
    if not problems and run.opts.lock and not shard.lock.sha256:
        # To lock a file we already have, the hub's LFS metadata (or a source folder's lock) must vouch for it.
        remote = _resolve_with_retries(run.source, shard.name, run.opts)
        label = remote.label
        if not remote.sha256:
            raise FetchError(f"{remote.label} vouches for no sha256 to lock it with (a mirror's ETag or "
                             "Digest is not trusted)",
                             "lock from the hub (it declares each file's LFS sha256), or write the hash "
                             "into the manifest's lock yourself", "input")
        problems, checked = _check(final, sha, shard.tokens_expected, Claim(), Claim(remote.size, remote.sha256))
    if problems:
        return None
    run.progress(final.stat().st_size)
    return FetchedFile(name=shard.name, size=final.stat().st_size, sha256=sha, tokens=read_header(final).num_tokens,
                       source=label, checked=checked, downloaded_bytes=0, reused=True)


def _download_checked(run: Fetcher, shard: _Shard) -> FetchedFile:
    """Download into the staging, check, and rename to the final name; a file failing its checks is fetched again."""
    part, meta_path = _staging(run.data_dir, shard.name)
    downloaded = 0

    def counted(n: int) -> None:
        nonlocal downloaded
        downloaded += max(n, 0)
        run.progress(n)

    for attempt in range(run.opts.corrupt_retries + 1):
        remote, got = _transfer(run, shard, part, meta_path, counted)
        problems, checked = _check(part, got.sha256, shard.tokens_expected, shard.lock,
                                   Claim(remote.size, remote.sha256))
        if got.cut_at_limit:
            problems.append(f"the source sent more than the expected {got.size} bytes (the rest was not written)")
        if not problems and run.opts.lock and not shard.lock.sha256 and not remote.sha256:
            counted(-part.stat().st_size)  # fetching again cannot help: nothing here can vouch for a hash
            part.unlink()
            meta_path.unlink(missing_ok=True)
            raise FetchError(f"neither the lock nor {remote.label} vouches for a sha256 to lock "
                             "(a mirror's own ETag or Digest header is not trusted)",
                             "lock from the hub (`--source hub`: it publishes each file's LFS sha256), or write "
                             "the hash into the manifest's lock yourself", "input")
        if not problems:
            _fsync(part)
            commit(part, shard.final)
            meta_path.unlink(missing_ok=True)
            return FetchedFile(name=shard.name, size=shard.final.stat().st_size, sha256=got.sha256,
                               tokens=read_header(shard.final).num_tokens, source=remote.label, checked=checked,
                               downloaded_bytes=downloaded, reused=False)
        counted(-part.stat().st_size)
        part.unlink()
        meta_path.unlink(missing_ok=True)
        if attempt == run.opts.corrupt_retries:
            raise FetchError(f"from {remote.label}: failed its checks {attempt + 1} times: "
                             + "; ".join(problems),
                             "the source serves bad bytes: try another source (--source), or run "
                             "`repro data fetch --lock` from the hub only if the lock itself is missing this hash",
                             "bad")
    raise AssertionError("unreachable")


# ---- the whole fetch ----------------------------------------------------------------------------

def default_data_dir(data_root: Path, dataset: str) -> Path:
    """<workspace data folder>/<dataset> (Workspace.data); the dataset name must be one plain name."""
    check_file_name(dataset, "dataset name", "give a dataset name from the registry's datasets/ folder")
    return Path(data_root) / dataset


class _Progress:
    """One byte counter for all parallel downloads (tqdm to stderr; silent when quiet)."""

    def __init__(self, total: int, quiet: bool, files: int):
        self._guard = threading.Lock()
        self.bar = None
        if not quiet:
            from tqdm import tqdm

            self.bar = tqdm(total=total or None, unit="B", unit_scale=True, unit_divisor=1024, file=sys.stderr,
                            desc=f"fetch {files} files", dynamic_ncols=True, leave=True)

    def __call__(self, n: int) -> None:
        if self.bar is not None and n:
            with self._guard:
                self.bar.update(n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def fetch(manifest: DatasetManifest, names: list[str], data_dir: Path, source: str = "hub",
          opts: Options | None = None) -> FetchResult:
    """Fetch `names` into data_dir in parallel; every file that fails is reported, none stops the rest."""
    opts = opts or Options()
    data_dir = Path(data_dir)
    _prepare_dir(manifest, names, data_dir)
    files_source = make_source(source, manifest)
    previous = read_local_lock(data_dir)
    total = sum((manifest.lock[n].size or 0) for n in names if n in manifest.lock)
    progress = _Progress(total, opts.quiet, len(names))
    run = Fetcher(source=files_source, manifest=manifest, data_dir=data_dir, progress=progress, opts=opts)
    done, failures = _fetch_all(run, names, previous)
    locked: list[str] = []
    if opts.lock:
        new = {f.name: (f.size, f.sha256) for f in done
               if not (manifest.lock.get(f.name) and manifest.lock[f.name].sha256)}
        if new:
            locked = record_lock(manifest, new)
    order = {n: i for i, n in enumerate(names)}
    lock_path = data_dir / "data.lock.yaml"
    return FetchResult(dataset=manifest.name, data_dir=data_dir, source=files_source.description,
                       files=tuple(sorted(done, key=lambda f: order[f.name])),
                       failures=tuple(sorted(failures, key=lambda f: order[f.name])), locked=tuple(locked),
                       lock_path=lock_path if lock_path.exists() else None,
                       lock_digest=data_lock_digest(data_dir) if lock_path.exists() else None)


def _prepare_dir(manifest: DatasetManifest, names: list[str], data_dir: Path) -> None:
    """Every name checked before anything is opened or written; the folder made and writable."""
    for name in names:
        file_in(data_dir, name, f"dataset {manifest.name}")
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise write_error(data_dir, exc) from None
    if not os.access(data_dir, os.R_OK | os.W_OK | os.X_OK):
        raise InputError(f"cannot write into {data_dir}: permission denied",
                         f"give your user access to {data_dir}, or choose another folder with --dir")


def _fetch_all(run: Fetcher, names: list[str], previous) -> tuple[list[FetchedFile], list[FetchFailure]]:
    """Every file fetched by parallel workers, each recorded in the folder's lock as soon as it is whole."""
    done: list[FetchedFile] = []
    failures: list[FetchFailure] = []

    def task(name: str) -> None:
        old_source = previous.files[name].source if previous and name in previous.files else ""
        try:
            fetched = fetch_one(run, name, old_source)
        except FetchError as exc:
            failures.append(FetchFailure(name, exc.what, exc.fix, exc.kind))
            return
        done.append(fetched)
        write_local_lock(run.data_dir, run.manifest.name,
                         [LockEntry(name=fetched.name, size=fetched.size, sha256=fetched.sha256,
                                                                     tokens=fetched.tokens, source=fetched.source)])

    try:
        crashed = _in_threads(names, task, run.opts)
    except KeyboardInterrupt:
        run.progress.close()
        raise Interrupted(f"fetch interrupted; partial files are kept in {run.data_dir / '.partial'}",
                          "run the same command again to resume") from None
    run.progress.close()
    if crashed:
        if isinstance(crashed[0], DiskFull):
            raise _remove_staging(run.data_dir, crashed[0]) from None
        raise crashed[0]
    try:
        (run.data_dir / ".partial").rmdir()  # only when empty: nothing left to resume
    except OSError:
        pass
    return done, failures


def _in_threads(names: list[str], task: Callable[[str], None], opts: Options) -> list[BaseException]:
    """task(name) for every name in opts.jobs threads; what a thread raised (a full disk, a bug) is returned.

    Daemon threads, not an executor: after Ctrl-C a thread blocked on a stalled socket must not
    hold the process open. A part file is always a prefix of the file, so stopping anywhere is safe.
    """
    queue = list(reversed(names))
    crashed: list[BaseException] = []

    def worker() -> None:
        while not opts.stop.is_set():
            try:
                name = queue.pop()
            except IndexError:
                return
            try:
                task(name)
            except BaseException as exc:  # surfaced in the main thread
                crashed.append(exc)
                opts.stop.set()

    threads = [threading.Thread(target=worker, name=f"fetch-{i}", daemon=True)
               for i in range(max(1, min(opts.jobs, len(names))))]
    for thread in threads:
        thread.start()
    try:
        for thread in threads:
            while thread.is_alive():
                thread.join(0.2)
    except KeyboardInterrupt:
        opts.stop.set()
        for thread in threads:
            thread.join(1.0)
        raise
    return crashed


def _remove_staging(data_dir: Path, error: DiskFull) -> DiskFull:
    """A full disk: the parts cannot be finished without space anyway, and they hold what space is left."""
    partial = data_dir / ".partial"
    freed = 0
    for path in partial.glob("*.part*") if partial.is_dir() else ():
        if path.is_file():
            freed += path.stat().st_size
            path.unlink()
    try:
        partial.rmdir()
    except OSError:
        pass
    return DiskFull(f"{error.what}; the partial downloads in {partial} ({freed} bytes) were removed", error.fix)


def plan(dataset: str | None, record: Record | None, train_shards: int | None, val_shards: int | None,
         files: tuple[str, ...] = (), *, registry: Path) -> tuple[DatasetManifest, list[str]]:
    """Which dataset and which files: explicit names, else counts, else the record's defaults.

    `record` is the one the command loaded from its Registry (None: `dataset` alone decides); `registry`
    is the workspace's registry folder (Workspace.registry), whose datasets/ are read.

    Shard counts default to the record's when the dataset is the record's, else to every shard.
    """
    rec_dataset, rec_train, rec_val = None, None, None
    if record is not None:
        ref = record.dataset
        rec_dataset, rec_train, rec_val = ref.name, ref.shards_to_fetch, ref.val_shards
    elif dataset is None:
        raise InputError("neither a dataset nor a record to take one from", "give --dataset NAME or --record NAME")
    dataset = dataset or rec_dataset
    manifest = load_dataset(dataset, registry)
    if dataset != rec_dataset:
        rec_train, rec_val = manifest.splits["train"].count, manifest.splits["val"].count
    train_shards = rec_train if train_shards is None else train_shards
    val_shards = rec_val if val_shards is None else val_shards
    if files:
        known = set(manifest.splits["val"].file_names()) | set(manifest.splits["train"].file_names())
        unknown = [f for f in files if f not in known]
        if unknown:
            raise InputError(f"{unknown[0]} is not a file of dataset {manifest.name}",
                             f"name files like {manifest.splits['train'].file_name(manifest.splits['train'].first)}")
        return manifest, list(dict.fromkeys(files))
    if train_shards < 0 or val_shards < 0:
        raise InputError("shard counts must be >= 0", "give --train-shards N --val-shards M with N, M >= 0")
    return manifest, manifest.file_names(train_shards, val_shards)

