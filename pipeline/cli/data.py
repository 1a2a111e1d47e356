"""`repro data fetch|verify|tokenize|synth`: get, check and make token shards.

    repro data fetch                          # the default record's dataset: val shard + 9 train shards
    repro data fetch --lock                   # also record hashes the manifest's lock lacks
    repro data verify data/fineweb10B-gpt2
    repro data tokenize corpus/ --out data/corpus --tokenizer-dir tokenizer/gpt2
    repro data synth --out data/synth

Exit codes: 0 ok; 1 a file failed its checks (or a server broke the HTTP range protocol); 3 bad input
(unknown file, revision, URL, a file name that would leave the folder, unreadable or misplaced files);
4 a source stayed unreachable after retries, or the disk is full; 130 interrupted.
"""

from __future__ import annotations

from pathlib import Path

import click

from pipeline.errors import CheckFailed, InputError, Interrupted, MissingDependency
from pipeline.registry import Registry

from .output import echo, emit_json, pass_registry


@click.group()
def data():
    """Token shards: fetch (verified, resumable), verify, tokenize text, generate synthetic data."""


def _mib(n: int) -> str:
    return f"{n / 2**20:,.1f} MiB"


@data.command()
@click.option("--record", "record_name", default=None, help="Take dataset and shard counts from this record "
              f"[default: {Registry.DEFAULT_RECORD}].")
@click.option("--dataset", default=None, help="Dataset manifest name (manifests/datasets/NAME.yaml).")
@click.option("--train-shards", type=click.IntRange(min=0), default=None, help="Train shards to fetch.")
@click.option("--val-shards", type=click.IntRange(min=0), default=None, help="Val shards to fetch.")
@click.option("--file", "files", multiple=True, help="Fetch exactly these files (repeatable).")
@click.option("--source", default="hub", show_default=True,
              help="hub (honours HF_ENDPOINT, HF_TOKEN), mirror (the manifest's first mirror), "
                   "an http(s) URL template with {filename}, or a local folder.")
@click.option("--dir", "data_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where the shards go [default: data/<dataset>].")
@click.option("--jobs", type=click.IntRange(1, 32), default=4, show_default=True, help="Parallel downloads.")
@click.option("--retries", type=click.IntRange(min=0), default=5, show_default=True,
              help="Consecutive failed attempts without progress before giving up on a file.")
@click.option("--backoff", type=click.FloatRange(min=0), default=1.0, show_default=True,
              help="Backoff factor, seconds: after the first immediate retry the waits are 2x, 4x, 8x ... "
                   "this (up to 30 s), with jitter.")
@click.option("--timeout", type=click.FloatRange(min=1), default=60.0, show_default=True,
              help="Network read timeout, seconds.")
@click.option("--max-retry-time", "max_retry", type=click.FloatRange(min=0), default=900.0, show_default=True,
              help="Give up on a file after retrying it for this many seconds without receiving a byte.")
@click.option("--lock", "lock", is_flag=True,
              help="Where the manifest's lock has no sha256, check against the hub's LFS sha256 (never a "
                   "mirror's ETag) and record it in the manifest.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (no progress bar).")
@pass_registry
def fetch(registry, record_name, dataset, train_shards, val_shards, files, source, data_dir, jobs, retries, backoff,
          timeout, max_retry, lock, as_json):
    """Download shards, resuming partial files, and keep only verified ones."""
    from pipeline.data.fetch import Options, default_data_dir, plan
    from pipeline.data.fetch import fetch as fetch_files

    ws = registry.workspace
    record = registry.record_or_default(record_name) if record_name or dataset is None else None
    manifest, names = plan(dataset, record, train_shards, val_shards, files, registry=ws.registry)
    data_dir = data_dir or default_data_dir(ws.data, manifest.name)
    opts = Options(jobs=jobs, retries=retries, backoff_s=backoff, timeout_s=timeout, max_retry_s=max_retry,
                   lock=lock, quiet=as_json)
    result = fetch_files(manifest, names, data_dir, source, opts)
    if as_json:
        emit_json({"ok": result.ok, **result.__dict__})
    else:
        echo(f"{len(result.files)} of {len(names)} files in {result.data_dir} ({result.source})")
        for f in result.files:
            how = "present" if f.reused else f"downloaded {_mib(f.downloaded_bytes)}"
            echo(f"  ok   {f.name}  {f.size} B  {f.tokens} tokens  sha256 {f.sha256[:16]}…  "
                 f"[{', '.join(f.checked)}]  {how}")
        for f in result.failures:
            echo(f"  FAIL {f.name}: {f.what}")
        if result.unhashed:
            echo(f"warning: no sha256 was known for {', '.join(result.unhashed)}: only header and size "
                 "were checked; `repro data fetch --lock` from the hub records the hashes", err=True)
        if result.locked:
            echo(f"recorded {len(result.locked)} hashes in {manifest.path}")
        if result.lock_digest:
            echo(f"lock {result.lock_path}  digest {result.lock_digest}")
    _raise_for_failures(result)


def _raise_for_failures(result) -> None:
    if not result.failures:
        return
    first = result.failures[0]
    by_problem: dict[str, list[str]] = {}
    for f in result.failures:
        by_problem.setdefault(f.what, []).append(f.name)
    parts = [f"{names[0] if len(names) == 1 else f'{names[0]} and {len(names) - 1} more'}: {what}"
             for what, names in by_problem.items()]
    what = f"{len(result.failures)} of {len(result.failures) + len(result.files)} files failed: " + "; ".join(parts)
    kinds = {f.kind for f in result.failures}
    if "interrupted" in kinds:
        raise Interrupted(what, first.fix)
    if "bad" in kinds:
        raise CheckFailed(what, next(f.fix for f in result.failures if f.kind == "bad"))
    if "input" in kinds:
        raise InputError(what, next(f.fix for f in result.failures if f.kind == "input"))
    raise MissingDependency(what, first.fix)


@data.command()
@click.argument("data_dir", required=False, type=click.Path(file_okay=False, path_type=Path))
@click.option("--dataset", default=None, help="Check against this dataset manifest's lock too "
              "[default: the dataset named in DATA_DIR/data.lock.yaml].")
@click.option("--jobs", type=click.IntRange(1, 32), default=2, show_default=True, help="Files hashed at once.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_registry
def verify(registry, data_dir, dataset, jobs, as_json):
    """Check every shard in DATA_DIR: header, exact size, sha256 against the locks. Reports all bad files."""
    from pipeline.data.fetch import default_data_dir
    from pipeline.data.verify import LOCK_NAME, data_lock_digest, verify_dir

    ws = registry.workspace
    if data_dir is None:
        data_dir = default_data_dir(ws.data, dataset or registry.default_record().dataset.name)
    report = verify_dir(data_dir, dataset, workers=jobs, registry=ws.registry)
    digest = data_lock_digest(data_dir) if (Path(data_dir) / LOCK_NAME).exists() else None
    if as_json:
        emit_json({**report.to_dict(), "lock_digest": digest})
    else:
        for f in report.files:
            state = "ok  " if f.ok else "BAD "
            note = "" if f.hash_checked or not f.ok else "  (no recorded sha256: header and size only)"
            echo(f"  {state} {f.name}{note}")
            for problem in f.problems:
                echo(f"         {problem}")
        echo(f"{len(report.files) - len(report.bad)} of {len(report.files)} files ok in {report.data_dir}"
             + (f"; lock digest {digest}" if digest else ""))
    if not report.ok:
        raise CheckFailed(f"{len(report.bad)} bad files in {report.data_dir}: "
                          + ", ".join(f.name for f in report.bad),
                          "fetch them again: `repro data fetch` replaces bad files with verified ones")


@data.command()
@click.argument("inputs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Folder for the shards.")
@click.option("--tokenizer-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Folder with GPT-2's encoder.json and vocab.bpe (hash-checked) [default: tiktoken download].")
@click.option("--format", "fmt", type=click.Choice(["auto", "text", "jsonl"]), default="auto", show_default=True,
              help="auto: *.jsonl/*.ndjson/*.json are JSONL, everything else one text document per file.")
@click.option("--field", default="text", show_default=True, help="JSONL field holding the document text.")
@click.option("--shard-tokens", type=click.IntRange(min=1), default=100_000_000, show_default=True)
@click.option("--val-tokens", type=click.IntRange(min=0), default=10_485_760, show_default=True,
              help="The first this many tokens form the val shard(s).")
@click.option("--prefix", default="fineweb", show_default=True, help="Shard names: PREFIX_{val,train}_NNNNNN.bin.")
@click.option("--workers", type=click.IntRange(1, 64), default=2, show_default=True, help="Encoding processes.")
@click.option("--errors", type=click.Choice(["strict", "replace"]), default="strict", show_default=True,
              help="What to do with bytes that are not UTF-8.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (no progress bar).")
def tokenize(inputs, out_dir, tokenizer_dir, fmt, field, shard_tokens, val_tokens, prefix, workers, errors,
             as_json):
    """Tokenize text or JSONL INPUTS (files or folders) with the GPT-2 BPE into shards."""
    from pipeline.data.tokenize import tokenize as run_tokenize

    result = run_tokenize(list(inputs), out_dir, tokenizer_dir=tokenizer_dir, fmt=fmt, field=field,
                          shard_tokens=shard_tokens, val_tokens=val_tokens, prefix=prefix, workers=workers,
                          errors=errors, quiet=as_json)
    if as_json:
        emit_json({**result.__dict__, "tokens_per_s": result.tokens_per_s})
        return
    for name, tokens, split in result.shards:
        echo(f"  {split:5} {name}  {tokens} tokens")
    echo(f"{result.documents} documents, {result.tokens} tokens in {result.seconds:.1f} s "
         f"({result.tokens_per_s:,.0f} tokens/s) into {result.out_dir}")
    if not any(split == "train" for _, _, split in result.shards):
        echo(f"warning: everything went to val; lower --val-tokens (now {val_tokens})", err=True)


@data.command()
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Folder for the shards.")
@click.option("--train-tokens", type=click.IntRange(min=1), default=5_000_000, show_default=True)
@click.option("--val-tokens", type=click.IntRange(min=1), default=500_000, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--vocab", type=click.IntRange(2, 50255), default=512, show_default=True,
              help="Distinct token ids (besides BOS).")
@click.option("--branching", type=click.IntRange(min=1), default=8, show_default=True,
              help="Likely successors per token: fewer = more learnable.")
@click.option("--end-prob", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=1 / 256,
              show_default=True, help="Chance a token ends its document (mean length 1/p).")
@click.option("--shard-tokens", type=click.IntRange(min=1), default=None, help="[default: one train shard].")
@click.option("--prefix", default="fineweb", show_default=True, help="Shard names: PREFIX_{val,train}_NNNNNN.bin.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def synth(out_dir, train_tokens, val_tokens, seed, vocab, branching, end_prob, shard_tokens, prefix, as_json):
    """Generate learnable shards (a random Markov chain) for demos and tests."""
    from pipeline.data.synth import synth as run_synth

    result = run_synth(out_dir, train_tokens=train_tokens, val_tokens=val_tokens, seed=seed, vocab=vocab,
                       branching=branching, end_prob=end_prob, shard_tokens=shard_tokens, prefix=prefix)
    if as_json:
        emit_json(result)
        return
    for name, tokens, split in result.shards:
        echo(f"  {split:5} {name}  {tokens} tokens")
    echo(f"unigram entropy {result.unigram_entropy:.4f} nats (the loss without context); "
         f"conditional entropy {result.conditional_entropy:.4f} nats (the best achievable loss)")
    echo(f"measured on val: {result.val_unigram_entropy:.4f} / {result.val_conditional_entropy:.4f} nats; "
         f"{result.seconds:.1f} s")
