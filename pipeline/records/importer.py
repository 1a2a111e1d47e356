"""`repro records import UPSTREAM_CLONE [--track 1]`: one record manifest per row of the upstream table.

    result = import_records(clone, registry_records_dir, track=1, commit=None, environments=[...])
    result.written, result.unchanged, result.changes, result.warnings

For each row of the README's track table, pipeline/records/selection.py tells the record's runs from the
other logs of its folder (baselines, earlier versions, single-GPU runs, the parent's log, truncated or
duplicated logs), and every log left out is written with its reason (`imported.left_out`). Each run gives
its sha256, its program's sha256 and code fingerprint, its final validation loss and train time, and the
header's hardware and software (pipeline/records/logfacts.py). The parent is the previous row's record, past
rows without a log that say their change is to the systems (a torch upgrade between two records).
pipeline/records/eras.py proposes the rule that judges the loss claim (`imported.rule`, with its reason);
the track's target and GPU count are read from the README's statement above the table.

Merging with what is already in the registry (so a second import changes nothing, and a hand-edited
manifest keeps its edits): every field the import derives is recomputed, unless the manifest's `edited:` list
names it (a top-level key such as `rules`, or one sub-field such as `dataset.train_shards`); the kept edits
whose value differs from what the import derives are listed in the summary (`kept_edits`). An edit the
manifest does not mark is derived again: a stale value (a parent left empty by an earlier import of a
sample) never outlives the next import. Fields the import does not derive (notes, selection, a program's
smoke_fields, ...) are kept as written. A manifest's top-level blocks that do not change are written back
byte for byte, comments included.
"""

from __future__ import annotations

import dataclasses
import re
import tempfile
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from statistics import mean

from pipeline.atomic import write_text
from pipeline.errors import InputError, ReproError
from pipeline.records.environment_choice import EnvironmentPin, environment_by_rule, environment_family
from pipeline.records.eras import RULES_VERSION, Proposal, RuleInput, change_kind, propose_rule
from pipeline.records.import_result import DEFAULT_REPOSITORY, ImportResult, upstream_commit
from pipeline.records.logfacts import LogFacts, most_common
from pipeline.records.logparse import SEPARATOR
from pipeline.records.model import NAME_RE, load_record_file
from pipeline.records.selection import FolderInput, Selection, select_runs
from pipeline.records.upstream_table import TableRow, TrackTerms, read_track_table, track_terms
from pipeline.regular_file import open_regular, read_text_bounded
from pipeline.yamlio import LIMITS, YamlRefused, dump, load_file

SEPARATOR_TEXT = SEPARATOR.decode()
HEADER = ("# Imported by `repro records import` from the upstream records table and the logs of its folder.\n"
          "# The next import derives every field again, except those you list under `edited:` (e.g. [rules]).\n")

DEFAULT_RULES = {
    "version": RULES_VERSION, "target_val_loss": 3.28, "p_value_max": 0.01, "loss_evidence": "own",
    "consistency_alpha": 0.01, "consistency_required": ["record"], "time_confidence": 0.95,
    "time_tolerance": 0.02, "compare_hardware": ["gpu_model", "gpu_count"], "compare_software": ["torch"]}
DEFAULT_DATASET = {"name": "fineweb10B-gpt2", "train_shards": 0, "val_shards": 1, "val_tokens": 10485760,
                   "tokens_per_step": 0}

MAX_README_BYTES = 16 << 20  # upstream's README is 52 kB, its tables a few hundred rows: never this large
MAX_RECORD_README_BYTES = 1 << 20  # a record folder's README is prose of a few kB


def _licence(clone: Path) -> str:
    for name in ("LICENSE", "LICENSE.md", "LICENSE.txt"):
        path = clone / name
        if path.is_file():
            with open_regular(path, "licence", "") as f:  # its first lines say which licence it is
                head = f.read(400).decode("utf-8", errors="replace")
            return "MIT" if "MIT License" in head else f"see {name} in the upstream repository"
    return "unknown: the clone has no LICENSE file (see the upstream repository)"


def _raw_template(repository: str) -> str:
    m = re.match(r"^https://github\.com/([^/]+/[^/]+?)(?:\.git)?/?$", repository)
    return f"https://raw.githubusercontent.com/{m.group(1)}/{{commit}}/{{folder}}/{{file}}" if m else ""


def _form_factor(gpu_model: str) -> str:
    # nvidia-smi does not print the form factor; the 80GB HBM3 H100 exists only as the SXM5 part.
    return "SXM" if "H100" in gpu_model and "HBM3" in gpu_model else ""


def _log_entry(rel: str, f: LogFacts, role: str = "run") -> dict:
    entry = {"file": rel, "sha256": f.sha256, "program_sha256": f.program_sha256,
             "program_bytes": f.program_bytes, "fingerprint": f.fingerprint,
             "val_loss": f.val_loss, "train_time_ms": f.train_time_ms, "torch": f.torch}
    if f.missing:
        entry["missing"] = list(f.missing)
    if f.files:  # a program of several files (pipeline/records/program_files.py)
        entry["files"] = list(f.files)
    if role != "run":  # the re-timing its README declares (selection.py, rule 4): written only where it is one
        entry["role"] = role
    return entry


@dataclass(frozen=True, kw_only=True)
class RowImport:
    """Everything one manifest is generated from."""

    row: TableRow
    name: str
    previous: str
    selection: Selection
    proposal: Proposal
    terms: TrackTerms
    commit: str
    repository: str
    licence: str
    data_need: dict = field(default_factory=dict)  # dataset.derived (pipeline/records/data_need.py)


def _published(facts: list[LogFacts], claimed_s: float | None, quoted: dict) -> dict:
    complete = [f for f in facts if f.val_loss is not None and f.train_time_ms is not None]
    times = [round(f.train_time_ms / 1000, 3) for f in complete]
    published = {"steps": most_common(f.scheduled_steps for f in facts) or 0,
                 "losses": [f.val_loss for f in complete], "times_s": times,
                 "mean_time_s": round(mean(times), 4) if times else claimed_s or 0.0, "ml_validation": "own"}
    if not complete and (single := [f.val_loss for f in facts if f.val_loss is not None]):
        published["losses"], published["times_s"] = single, [claimed_s or 0.0] * len(single)  # llm.c: no time
    if (avg := [f.step_avg_ms for f in complete if f.step_avg_ms]):
        published["step_avg_ms"] = round(mean(avg), 2)
    if (peak := most_common(f.peak_allocated_mib for f in complete)) is not None:
        published["peak_memory_allocated_mib"] = peak
    if quoted:
        published["quoted"] = quoted
    return published


def _rules(x: RowImport, gpu_model: str, torch: str) -> dict:
    evidence = x.proposal.evidence
    return {**DEFAULT_RULES, "target_val_loss": x.terms.target_val_loss, "loss_evidence": evidence,
            # a re-timing is judged against the re-timed record's evidence (pipeline/verdict/ancestry.py)
            "consistency_required": ["record"],
            # compare only what the headers told (an old log without nvidia-smi pins no GPU to compare with)
            "compare_hardware": ["gpu_model", "gpu_count"] if gpu_model else [],
            "compare_software": ["torch"] if torch else []}


def _generated(x: RowImport, environments: list[EnvironmentPin], warnings: list[str]) -> dict:
    row, sel = x.row, x.selection
    facts = [r.facts for r in sel.runs]
    torch = most_common(f.torch for f in facts) or ""
    fingerprints = sorted({f.fingerprint for f in facts if f.fingerprint})
    if len(fingerprints) > 1:
        warnings.append(f"{x.name}: its runs ran {len(fingerprints)} different programs (by code "
                        "fingerprint): program.fingerprint left empty, each log keeps its own")
    missing = sorted({m for f in facts for m in f.missing})
    # The environment the record ran in: chosen as of the record's date, when its nightly was on the index
    # (`repro records show` says what can be built today, and what stands in when it cannot).
    as_of = date.fromisoformat(row.date) if row.date else None
    choice = environment_by_rule(torch, x.name, row.date, environments, today=as_of)
    gpu_model = most_common(f.gpu_model for f in facts) or ""
    published = _published(facts, row.claimed_time_s, x.proposal.quoted)
    folder = f"{row.track_folder}/{row.record_name}"
    return {
        "schema_version": 1, "name": x.name, "title": row.description or x.name,
        "date": row.date, "track": row.track_folder.split("/", 1)[1],
        "description": f"Record #{row.number} of the upstream track table: {row.description} "
                       f"(claimed {row.claimed_time}).",
        "parent": x.previous,
        "upstream": {"repository": x.repository, "licence": x.licence, "commit": x.commit, "folder": folder,
                     "raw_url_template": _raw_template(x.repository)},
        # the runs first (a plan takes the first log's program), then the re-timing the README declares
        "logs": [_log_entry(r.rel, r.facts) for r in sel.runs]
        + [_log_entry(r.rel, r.facts, "retiming") for r in sel.retimings],
        "program": {"fingerprint": fingerprints[0] if len(fingerprints) == 1 else "", "separator": SEPARATOR_TEXT},
        "published": published,
        "hardware": {"gpu_model": gpu_model, "gpu_form_factor": _form_factor(gpu_model),
                     "gpu_count": most_common(f.gpu_count for f in facts) or 0, "interconnect": "",
                     "driver": most_common(f.driver for f in facts) or "",
                     "cuda_driver": most_common(f.cuda_driver for f in facts) or ""},
        "software": {"python": most_common(f.python for f in facts) or "", "torch": torch,
                     "torch_cuda": most_common(f.torch_cuda for f in facts) or "",
                     "triton": most_common(f.triton for f in facts) or ""},
        "environment": choice.environment,
        "dataset": {**DEFAULT_DATASET, "derived": x.data_need},
        "rules": _rules(x, gpu_model, torch),
        "imported": {"commit": x.commit, "row": row.number, "claimed_time": row.claimed_time,
                     "claimed_time_s": row.claimed_time_s, "linked_log": row.log_link,
                     "environment_family": environment_family(torch) if torch else "unknown",
                     "mean_time_source": "logs" if published["times_s"] and any(f.train_time_ms for f in facts)
                     else "claimed",
                     "skipped_folders": [], "missing": missing, "runs_basis": sel.basis,
                     "left_out": [{"file": o.file, "reason": o.reason, "detail": o.detail, "sha256": o.sha256}
                                  for o in sel.left_out],
                     "flags": list(sel.flags) + list(x.proposal.flags),
                     "rule": {"evidence": x.proposal.evidence, "why": x.proposal.why},
                     "target_val_loss": x.terms.target_val_loss},
    }


def _edited(existing: dict) -> set[str]:
    marks = existing.get("edited")
    return {m for m in marks if isinstance(m, str)} if isinstance(marks, list) else set()


def merge(existing: dict | None, generated: dict) -> dict:
    """The manifest to write: every field this import derives, recomputed, except those the manifest's `edited:`
    list names (`rules`, or one sub-field such as `dataset.train_shards`), which keep the editor's value. Fields
    the import does not derive (notes, selection, a program's smoke_fields, ...) are kept as written."""
    if not existing:
        return generated
    edited = _edited(existing)
    out = dict(existing)
    for key, value in generated.items():
        old = existing.get(key)
        if key in edited and key in existing:
            continue
        if isinstance(value, dict) and isinstance(old, dict):
            kept = {sub: old[sub] for sub in old if sub not in value or f"{key}.{sub}" in edited}
            out[key] = {**value, **kept}
        else:
            out[key] = value
    return out


def kept_edits(existing: dict | None, generated: dict) -> list[str]:
    """The edited fields whose value is not what this import derives: listed in the import's summary."""
    if not existing:
        return []
    out = []
    for mark in sorted(_edited(existing)):
        key, _, sub = mark.partition(".")
        old, new = existing.get(key), generated.get(key)
        if key not in generated or sub and not (isinstance(new, dict) and sub in new):
            continue  # a field the import does not derive: nothing was overruled
        if sub:
            old = old.get(sub) if isinstance(old, dict) else None
            new = new.get(sub) if isinstance(new, dict) else None
        if old != new:
            out.append(mark)
    return out


def changed_fields(old: dict | None, new: dict, prefix: str = "") -> list[str]:
    if old is None:
        return ["(new manifest)"]
    out = []
    for key in list(new) + [k for k in old if k not in new]:
        a, b = old.get(key), new.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            out += changed_fields(a, b, f"{prefix}{key}.")
        elif a != b:
            out.append(prefix + key)
    return out


def _blocks(text: str) -> list[tuple[str | None, str]]:
    """Top-level YAML blocks: (key, text including the comment lines just above it); a trailing (None, ...)."""
    blocks: list[tuple[str | None, str]] = []
    pending: list[str] = []
    key, body = None, []
    for line in text.splitlines(keepends=True):
        m = re.match(r"^([A-Za-z_][\w-]*):", line)
        if m:
            if key is not None or body:
                blocks.append((key, "".join(body)))
            key, body = m.group(1), pending + [line]
            pending = []
        elif key is not None and (line.startswith((" ", "-")) and line.strip()):
            body += pending + [line]
            pending = []
        else:
            pending.append(line)
    if key is not None or body:
        blocks.append((key, "".join(body)))
    if pending:
        blocks.append((None, "".join(pending)))
    return blocks


def _dump(key: str, value) -> str:
    return dump({key: value}, sort_keys=False, width=120, allow_unicode=True)


def render(existing_text: str | None, old: dict | None, new: dict) -> str:
    """YAML text for `new`: unchanged top-level blocks of `existing_text` verbatim, the rest dumped."""
    if existing_text is None or old is None:
        return HEADER + "".join(_dump(k, v) for k, v in new.items())
    out, done = [], set()
    for key, text in _blocks(existing_text):
        if key is None:
            out.append(text)
        elif key in new:
            done.add(key)
            if old.get(key) == new[key]:
                out.append(text)
            else:
                comments = "".join(line for line in text.splitlines(keepends=True)
                                   if line.startswith("#") or not line.strip())
                cut = text.find(f"{key}:")
                out.append(text[:cut] if cut > 0 and comments else "")
                out.append(_dump(key, new[key]))
    out += [_dump(k, v) for k, v in new.items() if k not in done]
    return "".join(out)


def _validate(name: str, text: str) -> None:
    """Load the text as the registry will (pipeline/records/model.py); a failure is a bug of this importer."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{name}.yaml"
        path.write_text(text, encoding="utf-8")
        load_record_file(path)


def _read_existing(path: Path) -> tuple[str | None, dict | None]:
    if not path.is_file():
        return None, None
    try:
        doc = load_file(path)
    except YamlRefused as exc:
        raise InputError(f"{path} is not a readable manifest: {exc.what}",
                         "fix or remove it, then import again") from None
    text = read_text_bounded(path, LIMITS["manifest"], "record manifest", "fix or remove it, then import again")
    return text, doc if isinstance(doc, dict) else None


def _row_folder(clone: Path, row: TableRow) -> tuple[Path | None, str, str]:
    """(the record's folder in the clone, the link below it, a reason when it cannot be used). A link is
    followed only inside its record's folder (a README is input: `..` or a symlink must not lead the importer
    to read files outside the clone)."""
    record_root = clone / row.track_folder / row.record_name
    target = clone / row.log_link
    if not record_root.resolve().is_relative_to(clone.resolve()) or record_root.is_symlink():
        return None, "", f"{row.track_folder}/{row.record_name} leads outside the clone: not followed"
    if not target.resolve().is_relative_to(record_root.resolve()):
        return None, "", f"{row.log_link} leads outside its record's folder: not followed"
    if not record_root.is_dir():
        return None, "", f"{row.log_link} is not in this clone"
    return record_root, row.log_link[len(f"{row.track_folder}/{row.record_name}"):].strip("/"), ""


def _renamed(clone: Path, row: TableRow) -> TableRow:
    """A row whose linked folder upstream renamed later: the folder of its track holding the linked file's name
    (track 2's rows 9 and 10 link `2025-08-28_NewValemb/036_….txt`, now in `2025-08-28_Medium_NewValemb/`). Only
    a file link is followed, and only when exactly one folder of the same date holds that name."""
    if not row.track_folder or Path(row.log_link).suffix not in (".txt", ".log"):
        return row
    track = clone / row.track_folder
    if (clone / row.track_folder / row.record_name).exists() or not track.is_dir() or track.is_symlink():
        return row
    file_name, dated = Path(row.log_link).name, row.record_name[:10]
    # a rename keeps the folder's date; another record's folder holding a copy of this row's log (a record often
    # carries its parent's log) is not a rename
    found = [d for d in sorted(track.iterdir()) if d.name.startswith(dated) and d.is_dir() and not d.is_symlink()
             and (d / file_name).is_file()]
    if len(found) != 1:
        return row
    return dataclasses.replace(row, log_link=f"{row.track_folder}/{found[0].name}/{file_name}")


def _names(rows: list[TableRow]) -> dict[int, str]:
    """Registry names by row line: the record folder's name; when two rows link logs of one folder (track 2's
    llm.c baseline beside its first record), the row dated as the folder keeps it and the other gets `-rowN`."""
    by_folder: dict[str, list[TableRow]] = {}
    for row in rows:
        by_folder.setdefault(row.record_name, []).append(row)
    names, taken = {}, set(by_folder)
    for folder, group in by_folder.items():
        keeper = next((r for r in group if r.date and folder.startswith(r.date)), group[0])
        for row in group:
            if row is keeper:
                names[row.line] = folder
                continue
            # two rows of one folder may share a number (a re-timing repeats it), and `<folder>-rowN` may be
            # another folder's name: each row gets a name no other row has, or one manifest would overwrite another
            name = f"{folder}-row{row.number}"
            if name in taken:
                name = f"{folder}-row{row.number}-line{row.line}"
            taken.add(name)
            names[row.line] = name
    return names


def _parent_name(rows: list[TableRow], index: int, names: dict[int, str], name: str, warnings: list[str]) -> str:
    """The previous row's record; past rows without a log whose description says their change is to the systems
    ("Torch 2.10", "Algebraic rewrite of XSA, same math faster execution"): the ML stands on the record before them.
    A row without a log that changed the ML ("Introduced the Muon optimizer") leaves the parent empty."""
    passed: list[TableRow] = []
    for row in reversed(rows[:index]):
        parent = names.get(row.line, row.record_name)
        if parent or change_kind(row.description, row.description) != "systems":
            break
        passed.append(row)
    else:
        parent = ""
    said = ", ".join(f"#{r.number} ({r.description!r})" for r in passed)
    if passed and parent:
        warnings.append(f"{name}: the row(s) before it, {said}, have no log in the table and change the systems, "
                        f"not the ML: its parent is {parent}")
    elif index > 0 and not parent:
        warnings.append(f"{name}: the previous row (#{rows[index - 1].number}) has no log in the table: parent left "
                        "empty")
    return parent


def _later_logs(plan: list[tuple[TableRow, Path, str]], index_of: dict[int, int], index: int,
                folder: Path) -> dict[str, str]:
    """The log files later rows of the table link in this same folder, by file name, with each row's number."""
    return {name: row.number for row, other, _ in plan if index_of[id(row)] > index and other == folder
            for name in _linked_file_name(row)}


def _linked_file_name(row: TableRow | None) -> frozenset[str]:
    if row is None or Path(row.log_link).suffix not in (".txt", ".log"):
        return frozenset()
    return frozenset({Path(row.log_link).name})


def _readme(folder: Path) -> str:
    path = folder / "README.md"
    if not path.is_file() or path.is_symlink():
        return ""
    with open_regular(path, "README", "") as f:
        return f.read(MAX_RECORD_README_BYTES).decode("utf-8", errors="replace")  # its first MiB is plenty


def _rows_to_import(clone: Path, rows: list[TableRow], result: ImportResult) -> list[tuple[TableRow, Path, str]]:
    """Each row whose log folder is in the clone, with its folder and linked file; every other row is listed in
    result.skipped_rows with why."""
    plan: list[tuple[TableRow, Path, str]] = []
    for row in rows:
        label = (f"row {row.number} (dated {row.date or 'no date'}, claimed {row.claimed_time or 'no time'}, "
                 f"{row.description[:50]!r})")
        if not row.log_link:
            result.skipped_rows.append(f"{label}: no log link in the table")
            continue
        if not row.track_folder:
            result.skipped_rows.append(f"{label}: its log link {row.log_link} is not under records/")
            continue
        if not NAME_RE.match(row.record_name) or ".." in row.record_name:
            result.skipped_rows.append(f"{label}: {row.record_name!r} is not a record folder name")
            continue
        folder, linked, why = _row_folder(clone, row)
        if folder is None:
            result.skipped_rows.append(f"{label}: {why}")
            continue
        plan.append((row, folder, linked))
    return plan


def import_records(clone: Path, records_dir: Path, track: int = 1, commit: str | None = None,
                   repository: str = DEFAULT_REPOSITORY, environments: list[EnvironmentPin] | None = None,
                   dry_run: bool = False, shard_tokens: int | None = None) -> ImportResult:
    """`shard_tokens`: one shard's tokens in the records' dataset: dataset.derived counts shards of that size."""
    clone = Path(clone)
    readme = clone / "README.md"
    if not readme.is_file():
        raise InputError(f"{clone} has no README.md", "point at a clone of modded-nanogpt (its root folder)")
    sha = upstream_commit(clone, commit)
    text = read_text_bounded(readme, MAX_README_BYTES, "README", "point at a clone of modded-nanogpt (its README.md "
                     "is about 50 kB)")
    rows = [_renamed(clone, row) for row in read_track_table(text, track)]
    terms = track_terms(text, track)
    result = ImportResult(commit=sha, track=track)
    licence = _licence(clone)
    records_dir = Path(records_dir)
    known = {p.stem for p in records_dir.glob("*.yaml")} if records_dir.is_dir() else set()
    names = _names([r for r in rows if r.track_folder])
    plan = _rows_to_import(clone, rows, result)
    importing = {names[r.line] for r, _, _ in plan}
    index_of = {id(row): i for i, row in enumerate(rows)}  # rows.index per row was quadratic in the rows
    for row, folder, linked in plan:
        name = names[row.line]
        index = index_of[id(row)]
        previous_row = rows[index - 1] if index > 0 else None
        previous = _parent_name(rows, index, names, name, result.warnings)
        if previous and previous not in importing and previous not in known:
            # the table names it all the same: the parent is kept, and judged once the registry holds it
            result.warnings.append(f"{name}: the previous row, {previous}, is not in this clone or the registry")
        inp = FolderInput(record_dir=folder, linked=linked, readme=_readme(folder),
                          era_single_run=bool(row.date) and row.date < "2024-12-04", track_gpus=terms.gpu_count,
                          parent_log_names=_linked_file_name(previous_row),
                          later_logs=_later_logs(plan, index_of, index, folder),
                          editor_folder=_editor_folder(records_dir / f"{name}.yaml"),
                          parent_programs=_programs(records_dir / f"{previous}.yaml") if previous else frozenset())
        try:
            selection = select_runs(inp)
            proposal = _propose(row, previous_row, selection, inp.readme, terms)
            need = derived_data(folder, selection, terms.gpu_count, shard_tokens)
            _import_one(records_dir,
                        RowImport(row=row, name=name, previous=previous, selection=selection, proposal=proposal,
                                  terms=terms, commit=sha, repository=repository, licence=licence,
                                  data_need=need), environments or [], result, dry_run)
        except ReproError as exc:
            result.skipped_rows.append(f"row {row.number} ({name}): not imported: {exc.what}")
    return result


def derived_data(folder: Path, selection: Selection, track_gpus: int, shard_tokens: int | None) -> dict:
    """dataset.derived: the shards the first selected run's program reads, from its own hyperparameters, at the
    shard size of the record's dataset (`shard_tokens`, its manifest's format.tokens_per_shard); when they cannot
    be worked out, train_shards 0 and the reason."""
    from pipeline.records.data_need import DataNeed, remembered_data_need
    from pipeline.records.logparse import log_program  # through the memo: a log the import read is not parsed again

    run = next((r for r in selection.runs if r.facts.program_sha256), None)
    gpus = most_common(r.facts.gpu_count for r in selection.runs) or track_gpus
    try:
        if run is None:
            raise InputError("none of its runs' logs carries the program", "")
        if not shard_tokens:
            raise InputError(f"the registry's dataset {DEFAULT_DATASET['name']} fixes no tokens_per_shard", "")
        program = log_program(folder / run.rel)
        if program is None:
            raise InputError(f"{run.rel} carries no program text", "")
        return remembered_data_need(program, world_size=gpus, tokens_per_shard=shard_tokens).to_dict()
    except (ReproError, OSError) as exc:
        why = getattr(exc, "what", None) or str(exc)
        return DataNeed(train_shards=0, val_shards=1, steps=0, train_tokens=0, tokens_per_step=0,
                        val_tokens=DEFAULT_DATASET["val_tokens"], margin=0.0,
                        derivation=f"not derived: {why}").to_dict()


def _propose(row: TableRow, previous_row: TableRow | None, selection: Selection, readme: str,
             terms: TrackTerms) -> Proposal:
    return propose_rule(RuleInput(
        date=row.date, repeats_previous=bool(previous_row and previous_row.number == row.number),
        first_baseline=row.number == "1" and "baseline" in row.description.lower(), readme=readme,
        target=terms.target_val_loss, description=f"{row.description} {row.contributors}",
        losses=[r.facts.val_loss for r in selection.runs if r.facts.val_loss is not None]))


def _programs(path: Path) -> frozenset[str]:
    """The program sha256s and fingerprints of a manifest's runs (the previous record's, imported just before)."""
    try:
        doc = load_file(path) if path.is_file() else None
    except YamlRefused:
        return frozenset()
    logs = doc.get("logs") if isinstance(doc, dict) else None
    if not isinstance(logs, list):
        return frozenset()
    return frozenset(str(log[k]) for log in logs if isinstance(log, dict)
                     for k in ("program_sha256", "fingerprint") if log.get(k))


def _editor_folder(path: Path) -> str | None:
    """The editor's `selection.folder` in an existing manifest (read loosely: the import validates it later)."""
    if not path.is_file():
        return None
    try:
        doc = load_file(path)
    except YamlRefused:
        return None
    sel = doc.get("selection") if isinstance(doc, dict) else None
    return str(sel["folder"]) if isinstance(sel, dict) and isinstance(sel.get("folder"), str) else None


def _sanity(x: RowImport, facts: list[LogFacts]) -> list[str]:
    """What a maintainer would question in the runs the selection took."""
    out = []
    times = [f.train_time_ms / 1000 for f in facts if f.train_time_ms]
    claimed = x.row.claimed_time_s
    if times and claimed:
        ratio = mean(times) / claimed
        if not 0.67 <= ratio <= 1.5:
            out.append(f"{x.name}: its runs' mean time {mean(times):.1f} s is {ratio:.2f} x the claimed "
                       f"{claimed:.1f} s: these logs may not be the record's timed runs")
    gpus = {f.gpu_count for f in facts if f.gpu_count}
    if gpus and gpus != {x.terms.gpu_count}:
        out.append(f"{x.name}: its runs ran on {sorted(gpus)} GPU(s), the track on {x.terms.gpu_count}")
    return out


def _import_one(records_dir: Path, x: RowImport, environments: list[EnvironmentPin], result: ImportResult,
                dry_run: bool) -> None:
    name, sel = x.name, x.selection
    facts = [r.facts for r in sel.runs]
    if not facts:
        why = "; ".join(sel.flags) or "no run log"
        raise InputError(f"no run of the record among its folder's logs ({why}; "
                         f"{len(sel.left_out)} log(s) left out)", "")
    warnings: list[str] = []
    for f in facts + [r.facts for r in sel.retimings]:
        warnings += [f"{name}: {f.file}: {w}" for w in f.warnings]
    warnings += _sanity(x, facts)
    if (flags := list(sel.flags) + list(x.proposal.flags)):
        result.flags[name] = flags
        warnings += [f"{name}: needs the editor: {flag}" for flag in flags]
    generated = _generated(x, environments, warnings)
    result.warnings += warnings
    path = records_dir / f"{name}.yaml"
    text, old = _read_existing(path)
    if old and old.get("environment") not in {e.name for e in environments}:
        old_for_merge = {k: v for k, v in old.items() if k != "environment"}  # names an environment gone: re-chosen
    else:
        old_for_merge = old
    new = merge(old_for_merge, generated)
    if (kept := kept_edits(old_for_merge, generated)):
        result.kept_edits[name] = kept
    if old == new:
        result.unchanged.append(name)
        return
    rendered = render(text, old, new)
    _validate(name, rendered)
    result.changes[name] = changed_fields(old, new)
    result.written.append(name)
    if not dry_run:
        records_dir.mkdir(parents=True, exist_ok=True)
        write_text(path, rendered)
