"""A record's published run logs, by their pinned URL and sha256, in the workspace's cache.

    logs = fetch_published_logs(record, ws.cache)                    # download what is missing, verify all
    logs = fetch_published_logs(record, ws.cache, source_dir=DIR)    # offline: copy from a folder, verify
    folder = published_logs_dir(record, ws.cache, record_logs=None)  # where `repro report` reads them, or None

Every log of the manifest's `logs:` is fetched from `upstream.raw_url_template` filled with the pinned
commit and folder (a raw GitHub URL), written atomically into <cache>/record-logs/<record>/ and kept
only when its sha256 is the manifest's. A file already there is re-hashed, not trusted. Nothing is
read from outside the cache, the given folder or the network.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pipeline.atomic import write_bytes
from pipeline.errors import CheckFailed, InputError, MissingDependency, ReproError
from pipeline.hashing import sha256_bytes, sha256_file
from pipeline.records.model import PublishedLog, Record
from pipeline.regular_file import kind_of, read_bounded

MAX_LOG_BYTES = 64 << 20
ATTEMPTS = 3
CHUNK = 1 << 16


@dataclass(frozen=True)
class FetchedLog:
    file: str
    path: Path
    source: str  # cache | url | folder
    sha256: str


def cache_dir(record: Record, cache: Path) -> Path:
    return Path(cache) / "record-logs" / record.name


def _check_record(record: Record) -> None:
    if not record.logs:
        raise InputError(f"record {record.name} pins no published logs (its manifest's logs: is empty)",
                         "import the record (`repro records import CLONE`) or add its logs with their sha256")


def _download(url: str, dest: Path, timeout: float) -> None:
    """GET url into dest (atomically), at most MAX_LOG_BYTES, through the tool's one HTTP client
    (pipeline/http.py: retries with backoff on network errors and 5xx, bounded in time and size)."""
    from pipeline.http import HttpRefused, Policy, Unreachable, fetch_bytes

    try:
        data = fetch_bytes(url, MAX_LOG_BYTES, Policy(timeout_s=timeout, retries=ATTEMPTS - 1, max_retry_s=120))
    except (HttpRefused, Unreachable) as exc:
        raise MissingDependency(f"cannot download {url}: {exc.what}",
                                "check the network, or fetch offline: `repro records fetch-logs NAME --from DIR` "
                                "with a folder holding the logs (e.g. the record's folder of a modded-nanogpt "
                                "clone)") from None
    except CheckFailed:
        raise InputError(f"{url} is larger than {MAX_LOG_BYTES >> 20} MiB: not a run log",
                         "check the record manifest's upstream URL template") from None
    write_bytes(dest, data)


def _verified(log: PublishedLog, path: Path) -> bool:
    return path.is_file() and sha256_file(path) == log.sha256


def fetch_published_logs(record: Record, cache: Path, source_dir: Path | None = None,
                         timeout: float = 60.0) -> list[FetchedLog]:
    """Every published log of `record` in the cache, each verified against its pinned sha256."""
    _check_record(record)
    if source_dir is None and not record.upstream.raw_url_template:
        raise InputError(f"record {record.name} has no upstream.raw_url_template to fetch its logs from",
                         "fetch offline with --from DIR, or add the template to the manifest")
    folder = cache_dir(record, cache)
    folder.mkdir(parents=True, exist_ok=True)
    out, bad = [], []
    for log in record.logs:
        dest = folder / log.file  # a path below the record's folder (records/model.py checks it)
        dest.parent.mkdir(parents=True, exist_ok=True)
        if _verified(log, dest):
            out.append(FetchedLog(log.file, dest, "cache", log.sha256))
            continue
        if source_dir is not None:
            src = Path(source_dir) / log.file
            if kind_of(src) is None:  # a flat copy of the record's folder: its bytes are checked all the same
                src = Path(source_dir) / Path(log.file).name
            if kind_of(src) is None:
                bad.append(f"{log.file}: not in {source_dir}")
                continue
            try:  # checked before anything is copied: bounded, and only the pinned bytes are written
                data = read_bounded(src, MAX_LOG_BYTES, "log", "restore the published log")
            except ReproError as exc:
                bad.append(f"{log.file}: {exc.what}")
                continue
            if sha256_bytes(data) != log.sha256:
                bad.append(f"{log.file}: sha256 {sha256_bytes(data)} in {source_dir}, pinned {log.sha256}")
                continue
            write_bytes(dest, data)
            source = "folder"
        else:
            _download(record.upstream.log_url(log.file), dest, timeout)
            source = "url"
        if _verified(log, dest):
            out.append(FetchedLog(log.file, dest, source, log.sha256))
        else:
            got = sha256_file(dest)
            dest.unlink(missing_ok=True)
            bad.append(f"{log.file}: sha256 {got[:16]}… is not the pinned {log.sha256[:16]}… (removed)")
    if bad:
        raise CheckFailed(f"{len(bad)} of {len(record.logs)} published log(s) of {record.name} failed: "
                          + "; ".join(bad),
                          "with --from: the folder needs every log, laid out as upstream's record folder or flat; "
                          "else fetch again. A sha256 that still differs is not the record's published log")
    return out


def verify_folder(record: Record, folder: Path) -> list[str]:
    """Problems with a folder claimed to hold `record`'s published logs (empty list: all there and verified)."""
    return [f"{log.file}: missing" if not (Path(folder) / log.file).is_file() else f"{log.file}: sha256 differs"
            for log in record.logs if not _verified(log, Path(folder) / log.file)]


def published_logs_dir(record: Record, cache: Path, record_logs: Path | None = None) -> Path | None:
    """The folder holding the record's published logs for a report, or None when there are none to use.

    `record_logs` (the user's --record-logs DIR) may hold them directly or in a <record>/ subfolder; the
    logs in it are used as given (a folder of log tails has no pinned hashes). Otherwise the cache
    filled by `repro records fetch-logs`, when every pinned log in it verifies; otherwise the folder beside the
    record's manifest in the registry (manifests/records/<record>/, e.g. the demo record's four committed logs),
    verified against the pins where the manifest has them, else as committed with the manifest itself."""
    if record_logs is not None:
        for candidate in (Path(record_logs) / record.name, Path(record_logs)):
            if candidate.is_dir() and any(candidate.glob("*.txt")):
                return candidate
        raise InputError(f"--record-logs {record_logs} holds no logs of {record.name} (*.txt)",
                         f"give a folder with the record's logs, or `repro records fetch-logs {record.name}`")
    folder = cache_dir(record, cache)
    if record.logs and not verify_folder(record, folder):
        return folder
    beside = Path(record.path).with_suffix("") if getattr(record, "path", None) else None
    if beside is not None and beside.is_dir() and any(beside.glob("*.txt")) \
            and not (record.logs and verify_folder(record, beside)):
        return beside
    return None
