"""Which logs of a record folder are the record's runs, and why every other log is left out.

    sel = select_runs(FolderInput(record_dir, linked="this_pr/11cb….txt", readme=text, era_single_run=False,
                                  track_gpus=8, parent_log_names=frozenset()))
    sel.runs, sel.left_out, sel.flags, sel.basis

Record folders hold more than the record's runs: baselines re-run for comparison (`baseline/`,
`baseline_pr299/`), earlier versions (`this_pr_v1/` beside the submitted `this_pr_v3/`), single-GPU
development runs (`single_gpu_baseline.txt`, `prefix-1375/` beside `prefix-1375-8x/`), ablations with other
step counts, the parent record's log or runs of its program, truncated or duplicated logs. The rules below
come from what upstream writes, not from a list of folder names:
1. The submission's folder. The manifest editor's choice (`selection.folder`) wins; else the folder of the
   log the records table links; else, when the table links a folder without logs of its own, the subfolder
   its README names beside the word "submit", else the one subfolder that is not a baseline, else the
   latest version (flagged: the editor should confirm it).
2. The hardware. The track is run on 8 GPUs (the README's task statement). When the linked folder ran on
   another GPU count, a sibling folder holding the same schedule on the track's GPU count is the record's.
3. Each log of that folder is a run unless it ran on other hardware, is named a baseline, is the parent's
   log (the previous row links it), runs the previous record's program where the linked log runs another (or
   where the README reports runs of the previous record or a baseline beside its own), repeats another log's
   bytes, never printed its final validation, has numbers that cannot be trusted, ran another step count than
   the linked log (an ablation), or validated at least 4 times as often (a diagnostic run kept for its loss
   curve, its extra validations in its time).
   When the linked log is itself such a run of the earlier code, the logs beside it that run another program are
   the record's (flagged for the editor). Before 2024-12-04 a record was one run: the linked log.
4. A re-timing the README declares. When the README says the record itself was re-timed on another software or
   hardware version (`declared_retiming`: "The record was retimed using torch==2.9.0.dev20250713+cu126,
   yielding 171743ms. This will be the official time for the record."), the logs that ran that version (their
   own `Running PyTorch` line or nvidia-smi table shows it, and their train time is the one stated, when one is)
   are the record's official time, not runs of its loss evidence: the runs of the other version "still stand in
   terms of acquiring p-value" (2025-07-12_BosAlign). They go to `retimings`; where every run ran that version
   there is no older set for the loss to stand on, and they stay runs.
5. A log behind a symbolic link is never read: it may be another record's file.
Every log ends up in `runs`, `retimings` or `left_out` with its reason; nothing is decided silently.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from pipeline.records.logfacts import LOG_SUFFIXES, LogFacts, LogUnreadable, read_log_facts

MAX_DEPTH = 4  # record folders nest versions one or two levels deep
BASELINE = re.compile(r"baseline", re.I)
SUBMITTED = re.compile(r"submi(?:t|tted|ssion)", re.I)
# How a README speaks of runs of the code it started from, timed beside its own ("Previous record (timed on same
# machine):", "the prior record", "timed it against the unmodified code", "I ran the baseline").
EARLIER_CODE = ("previous record", "prior record", "unmodified code", "baseline")
QUOTE_REACH = 300  # characters after such a phrase in which a run's train time counts as quoted
VERSION = re.compile(r"^(.*?)[-_]?v(\d+)$", re.I)
# A log that validated this many times as often as the record's runs is a diagnostic run, not a timed one: "I
# have attached logs with validation every 5 steps in this repo for more fine-grained analysis" (2025-11-29).
DIAGNOSTIC_VALIDATIONS = 4
# How a README declares that the record itself was re-timed (rule 4): a word of re-timing, in a sentence that
# names the version the re-timing ran (a PyTorch build, or a GPU) and does not speak of the earlier code
# (EARLIER_CODE: "retiming prior record: 147.4: [...]" re-times the parent, as every README from 2025-09-30 does).
# A sentence about a re-timing still to come ("I'll get an accurate retiming when I go to merge") names no version.
RETIMED = re.compile(r"\bre-?tim(?:ed|ing)\b", re.I)
TORCH_VERSION = re.compile(r"\b(?:py)?torch\s*(?:==|\s)\s*v?(\d+\.\d+[\w.+-]*\w)", re.I)
GPU_NAME = re.compile(r"(?:\b|(?<=\dx))((?:G?[HB]|A)\d{3})\b")  # H100, H200, GH200, B200, A100; 8xH200
STATED_TIME = re.compile(r"\b(\d+(?:\.(\d+))?)\s*(ms|s|sec|seconds|min|minutes)\b", re.I)
MS_PER_UNIT = {"ms": 1, "s": 1000, "sec": 1000, "seconds": 1000, "min": 60000, "minutes": 60000}


@dataclass(frozen=True, kw_only=True)
class FolderInput:
    record_dir: Path
    linked: str  # the table's link below the record folder ("" = the folder itself)
    readme: str  # the record's README.md ("" when it has none)
    era_single_run: bool  # before 2024-12-04 a record was one run
    track_gpus: int  # the GPU count the track is run on
    parent_log_names: frozenset[str]  # file names the previous row links (its log, copied here)
    # file names a later row of the table links in this same folder, with that row's number (track 2's first folder
    # holds row 1's llm.c log and row 2's record log): that row's record, not this one's
    later_logs: dict[str, str] = field(default_factory=dict)
    editor_folder: str | None = None  # the manifest editor's `selection.folder`
    parent_programs: frozenset[str] = frozenset()  # the previous record's runs' program sha256s and fingerprints


@dataclass(frozen=True)
class Run:
    rel: str  # path below the record folder, POSIX
    facts: LogFacts


@dataclass(frozen=True)
class LeftOut:
    file: str  # path below the record folder
    reason: str  # baseline | other-hardware | parent-log | later-record-log | duplicate | incomplete | untrusted |
    #              other-schedule | other-version | other-experiment | symlink | unreadable | previous-record |
    #              diagnostic
    detail: str = ""
    sha256: str = ""


@dataclass(frozen=True, kw_only=True)
class Retiming:
    """A README's declaration that the record itself was re-timed (rule 4): the version it ran, and its time when
    the sentence states one."""

    sentence: str  # the README's sentence, whitespace folded
    torch: str = ""  # the PyTorch build it names ("2.9.0.dev20250713+cu126"), or ""
    gpu: str = ""  # the GPU it names ("H200"), or ""
    time_ms: float | None = None  # the time it states, in ms
    time_slack_ms: float = 0.0  # half a unit of its last digit: "171.74 s" is 171735 to 171745 ms

    def shown_by(self, f: LogFacts) -> bool:
        """Whether a log's own header shows the declared version, and its train time is the stated one."""
        torch = not self.torch or f.torch == self.torch or f.torch.split("+")[0] == self.torch
        gpu = not self.gpu or bool(re.search(rf"\b{re.escape(self.gpu)}\b", f.gpu_model))
        time = self.time_ms is None or (f.train_time_ms is not None
                                        and abs(f.train_time_ms - self.time_ms) <= self.time_slack_ms)
        return torch and gpu and time

    @property
    def version(self) -> str:
        return " on ".join(x for x in (f"torch {self.torch}" if self.torch else "", self.gpu) if x)


def declared_retiming(readme: str) -> Retiming | None:
    """The first sentence of the README that declares a re-timing of the record itself on a named version (rule 4),
    or None."""
    for sentence in re.split(r"(?<=[.!?])\s+|\n\s*\n", readme):
        text = " ".join(sentence.split())
        if not RETIMED.search(text) or any(p in text.lower() for p in EARLIER_CODE):
            continue
        torch, gpu = TORCH_VERSION.search(text), GPU_NAME.search(text)
        if not (torch or gpu):
            continue
        said = Retiming(sentence=text, torch=torch.group(1) if torch else "", gpu=gpu.group(1) if gpu else "")
        if (stated := STATED_TIME.search(text[torch.end() if torch else 0:])) is not None:
            unit = MS_PER_UNIT[stated.group(3).lower()]
            decimals = len(stated.group(2) or "")
            said = Retiming(sentence=text, torch=said.torch, gpu=said.gpu, time_ms=float(stated.group(1)) * unit,
                            time_slack_ms=max(0.5 * unit / 10 ** decimals, 0.5))
        return said
    return None


@dataclass(frozen=True, kw_only=True)
class Selection:
    folder: str  # the submission's folder below the record folder ("" = the record folder)
    basis: str  # how the folder was chosen, as a sentence
    runs: tuple[Run, ...]
    left_out: tuple[LeftOut, ...]
    flags: tuple[str, ...]  # ambiguous cases, for the manifest's editor
    retimings: tuple[Run, ...] = ()  # the re-timing the README declares (rule 4): the official time, not a run


def _walk(root: Path) -> tuple[list[tuple[str, Path]], list[LeftOut]]:
    """(every log below root as (rel, path)), (links left out); links are listed, never followed."""
    logs, links = [], []

    def visit(folder: Path, depth: int) -> None:
        for entry in sorted(folder.iterdir()):
            rel = entry.relative_to(root).as_posix()
            if entry.is_symlink():
                if entry.is_dir() or entry.suffix in LOG_SUFFIXES:
                    links.append(LeftOut(rel, "symlink", "a symbolic link: it may lead to another record's files, "
                                                         "so it is not read"))
            elif entry.is_dir() and depth < MAX_DEPTH:
                visit(entry, depth + 1)
            elif entry.is_file() and entry.suffix in LOG_SUFFIXES:
                logs.append((rel, entry))

    visit(root, 0)
    return logs, links


def _parent_of(rel: str) -> str:
    parent = PurePosixPath(rel).parent.as_posix()
    return "" if parent == "." else parent


def _subfolders_with_logs(folders: set[str], base: str) -> list[str]:
    return sorted(f for f in folders if _parent_of(f) == base and f != base)


def _named_in_readme(readme: str, names: list[str]) -> list[str]:
    """Subfolders a README sentence about the submission names (`The current submitted version is X`)."""
    hits = set()
    for sentence in re.split(r"(?<=[.!?])\s+|\n\n", readme):
        if SUBMITTED.search(sentence):
            hits |= {n for n in names if re.search(rf"(?<![\w-]){re.escape(PurePosixPath(n).name)}(?![\w-])",
                                                   sentence)}
    return sorted(hits)


def _latest_version(names: list[str]) -> str | None:
    versions = [(m.group(1), int(m.group(2)), n) for n in names if (m := VERSION.match(PurePosixPath(n).name))]
    stems = {stem for stem, _, _ in versions}
    return max(versions, key=lambda v: v[1])[2] if versions and len(stems) == 1 else None


def _submission_folder(inp: FolderInput, folders: set[str]) -> tuple[str, str, list[str]]:
    """(folder, basis, flags) by rule 1 of the module docstring."""
    if inp.editor_folder is not None:
        return inp.editor_folder.strip("/"), f"the manifest's selection.folder names {inp.editor_folder!r}", []
    linked = inp.linked.strip("/")
    if linked and PurePosixPath(linked).suffix in LOG_SUFFIXES:
        return _parent_of(linked), f"the records table links {linked}", []
    if linked in folders:
        return linked, f"the records table links the folder {linked or '.'}, which holds logs", []
    subs = _subfolders_with_logs(folders, linked)
    named = _named_in_readme(inp.readme, subs)
    if len(named) == 1:
        return named[0], f"the record's README names {named[0]} as the submission", []
    others = [s for s in subs if not BASELINE.search(PurePosixPath(s).name)]
    if len(others) == 1:
        return others[0], f"{others[0]} is the only folder of logs that is not a baseline", []
    latest = _latest_version(others)
    if latest:
        flag = (f"the table links {linked or 'the record folder'}, whose logs sit in {', '.join(others)}; "
                f"the latest version, {latest}, is taken: confirm it with selection.folder")
        return latest, f"{latest} is the latest of the versions {', '.join(others)}", [flag]
    flag = (f"cannot tell which of {', '.join(subs) or 'no folder'} holds the record's runs: set "
            "selection.folder in the manifest")
    return linked, "no folder could be told to be the submission's", [flag]


def _gpu_count(facts: list[LogFacts]) -> int | None:
    counted = Counter(f.gpu_count for f in facts if f.gpu_count)
    return counted.most_common(1)[0][0] if counted else None


def _steps(facts: list[LogFacts]) -> int | None:
    counted = Counter(f.scheduled_steps for f in facts if f.scheduled_steps)
    return counted.most_common(1)[0][0] if counted else None


def _validations(facts: list[LogFacts]) -> int:
    counted = Counter(f.validations for f in facts if f.validations)
    return counted.most_common(1)[0][0] if counted else 0


def _on_track_hardware(inp: FolderInput, folder: str, by_folder: dict[str, list[Run]]) -> tuple[str, str, list[str]]:
    """Rule 2: a sibling folder with the same schedule on the track's GPU count replaces a folder run elsewhere."""
    own = [r.facts for r in by_folder.get(folder, [])]
    gpus = _gpu_count(own)
    if gpus in (None, inp.track_gpus):
        return folder, "", []
    steps, name = _steps(own), PurePosixPath(folder).name
    siblings = [f for f in by_folder if f != folder and _parent_of(f) == _parent_of(folder)
                and name and name in PurePosixPath(f).name and not BASELINE.search(PurePosixPath(f).name)
                and _gpu_count([r.facts for r in by_folder[f]]) == inp.track_gpus
                and _steps([r.facts for r in by_folder[f]]) == steps]
    if len(siblings) == 1:
        return siblings[0], (f"; {folder} ran on {gpus} GPU(s), and {siblings[0]} holds the same {steps}-step "
                             f"schedule on the track's {inp.track_gpus}"), []
    return folder, "", [f"{folder or 'the linked folder'}'s logs ran on {gpus} GPU(s), not the track's "
                        f"{inp.track_gpus}, and no sibling folder holds the same schedule on {inp.track_gpus}"]


def _other_rows_log(run: Run, inp: FolderInput) -> LeftOut | None:
    """A log the table links for another row: the previous record's (copied here), or a later row's that shares
    this folder."""
    name = PurePosixPath(run.rel).name
    if name in inp.parent_log_names:
        return LeftOut(run.rel, "parent-log", "the previous record's log (the table links it for that row)",
                       run.facts.sha256)
    if name in inp.later_logs:
        return LeftOut(run.rel, "later-record-log", f"a later record's log (the table links it for row "
                       f"{inp.later_logs[name]}, which shares this folder)", run.facts.sha256)
    return None


def _earlier_code(run: Run, inp: FolderInput, own_program: frozenset[str]) -> LeftOut | None:
    """A run of the code the record started from, timed beside its own: a log running the previous record's
    program where the linked log runs another (whatever the README says, or when there is none: 2025-09-05's
    `comparison_*.txt` are the previous record's program re-run beside its own), or, in a folder whose README
    speaks of the previous record, a baseline or the unmodified code, one not running the linked log's program
    (bytes or fingerprint) whose train time the README quotes right after those words (`times = [95.972, ...]`,
    `finished in 1496283 ms`), whatever its file name."""
    f = run.facts
    if not f.program_sha256:
        return None
    programs = _programs(f)
    if own_program and programs & inp.parent_programs and not programs & own_program:
        return LeftOut(run.rel, "previous-record", "runs the previous record's program, not the record's own: the "
                                                   "earlier code, re-run beside it",
                       f.sha256)
    text = inp.readme.lower()
    said = next((p for p in EARLIER_CODE if p in text), None)
    if said is None:
        return None
    parents = bool(programs & inp.parent_programs)
    quoted = not (programs & own_program) and f.train_time_ms is not None and any(
        stamp in text[at:at + QUOTE_REACH] for at in _places(text, said)
        for stamp in (str(f.train_time_ms), f"{f.train_time_ms / 1000:.3f}"))
    if not (parents or quoted):
        return None
    how = "runs the previous record's program" if parents else "its train time is quoted there"
    return LeftOut(run.rel, "previous-record", f"the README reports runs of the earlier code (\"{said}\") beside its "
                                               f"own; this log {how}", f.sha256)


def _programs(f: LogFacts) -> frozenset[str]:
    return frozenset(x for x in (f.program_sha256, f.fingerprint) if x)


def _beside_an_earlier_linked_log(linked_run: Run | None, candidates: list[Run], inp: FolderInput) -> list[Run]:
    """When the linked log is itself a run of the earlier code (the previous record's program, in a folder whose
    README reports such runs), the logs beside it that run neither its program nor the previous record's, of the
    most common program among them; else none."""
    if linked_run is None or not _programs(linked_run.facts) & inp.parent_programs \
            or _earlier_code(linked_run, inp, frozenset()) is None:
        return []
    earlier = _programs(linked_run.facts) | inp.parent_programs
    newer = [r for r in candidates if r.facts.program_sha256 and not _programs(r.facts) & earlier]
    if not newer:
        return []
    common = Counter(r.facts.fingerprint for r in newer).most_common(1)[0][0]
    return [r for r in newer if r.facts.fingerprint == common]


def _places(text: str, phrase: str) -> list[int]:
    out, at = [], text.find(phrase)
    while at >= 0 and len(out) < 50:
        out.append(at)
        at = text.find(phrase, at + 1)
    return out


def _why_not_run(run: Run, inp: FolderInput, linked_steps: int | None, seen: dict[str, str],
                 own_program: frozenset[str] = frozenset(), cadence: int = 0) -> LeftOut | None:
    f, name = run.facts, PurePosixPath(run.rel).name
    if f.gpu_count and f.gpu_count != inp.track_gpus:
        return LeftOut(run.rel, "other-hardware", f"ran on {f.gpu_count} GPU(s); the track is run on "
                                                  f"{inp.track_gpus}", f.sha256)
    if BASELINE.search(name):
        return LeftOut(run.rel, "baseline", "its name marks it a baseline run for comparison", f.sha256)
    if (parent := _other_rows_log(run, inp) or _earlier_code(run, inp, own_program)) is not None:
        return parent
    if f.sha256 in seen:
        return LeftOut(run.rel, "duplicate", f"the same bytes as {seen[f.sha256]}", f.sha256)
    if f.val_loss is None:
        return LeftOut(run.rel, "incomplete", "; ".join(f.warnings[:2]) or "no final validation loss", f.sha256)
    if f.problems:
        return LeftOut(run.rel, "untrusted", f"its numbers cannot be trusted ({', '.join(f.problems)})", f.sha256)
    if linked_steps and f.scheduled_steps and f.scheduled_steps != linked_steps:
        return LeftOut(run.rel, "other-schedule", f"ran {f.scheduled_steps} steps where the record's runs ran "
                                                  f"{linked_steps}: another version or an ablation", f.sha256)
    if cadence and f.validations >= DIAGNOSTIC_VALIDATIONS * cadence:
        return LeftOut(run.rel, "diagnostic", f"validated {f.validations} times where the record's runs validate "
                                              f"{cadence}: a run kept for its loss curve, not a timed run (its extra "
                                              "validations are in its train time)", f.sha256)
    return None


def _left_out_folder(run: Run, folder: str, inp: FolderInput) -> LeftOut:
    """A log outside the submission's folder: why, from its folder's name and header."""
    where = _parent_of(run.rel) or "."
    f = run.facts
    if BASELINE.search(where):
        reason, detail = "baseline", f"in {where}/, a baseline re-run for comparison"
    elif f.gpu_count and f.gpu_count != inp.track_gpus:
        reason, detail = "other-hardware", f"in {where}/, run on {f.gpu_count} GPU(s)"
    elif (m := VERSION.match(PurePosixPath(where).name)) and VERSION.match(PurePosixPath(folder).name):
        reason, detail = "other-version", f"in {where}/, version {m.group(2)} of the submission ({folder}/ is taken)"
    else:
        reason, detail = "other-experiment", f"in {where}/, not the submission's folder ({folder or '.'}/)"
    return LeftOut(run.rel, reason, detail, f.sha256)


def select_runs(inp: FolderInput) -> Selection:
    paths, left = _walk(inp.record_dir)
    by_folder: dict[str, list[Run]] = {}
    for rel, path in paths:
        try:
            facts = read_log_facts(path)
        except LogUnreadable as exc:
            left.append(LeftOut(rel, "unreadable", str(exc)))
            continue
        by_folder.setdefault(_parent_of(rel), []).append(Run(rel, facts))
    folder, basis, flags = _submission_folder(inp, set(by_folder))
    folder, moved, more = _on_track_hardware(inp, folder, by_folder)
    basis, flags = basis + moved, flags + more
    linked = inp.linked.strip("/")
    candidates = by_folder.get(folder, [])
    linked_run = next((r for r in candidates if r.rel == linked), None)
    if linked and PurePosixPath(linked).suffix in LOG_SUFFIXES and linked_run is None and not moved:
        flags.append(f"the table links {linked}, which is not in the folder: the logs beside it are taken")
    linked_steps = (linked_run.facts.scheduled_steps if linked_run and not moved
                    else _steps([r.facts for r in candidates if not BASELINE.search(r.rel)]))
    runs, seen = [], {}
    # the linked log's program, by bytes and by code fingerprint (runs differing only in comments are one program)
    own = _programs(linked_run.facts) if linked_run else frozenset()
    cadence = linked_run.facts.validations if linked_run else _validations([r.facts for r in candidates])
    if (newer := _beside_an_earlier_linked_log(linked_run, candidates, inp)):
        # the table links a run of the earlier code the README reports beside the record's own (2025-12-11 links
        # a baseline log): the record's runs, their program, step count and cadence are the others'
        own = frozenset().union(*(_programs(r.facts) for r in newer))
        linked_steps, cadence = _steps([r.facts for r in newer]), _validations([r.facts for r in newer])
    for run in candidates:
        if inp.era_single_run and linked_run is not None and run is not linked_run:
            why = _other_rows_log(run, inp) or LeftOut(run.rel, "other-experiment", "before 2024-12-04 a record was "
                                                   f"one run: the table links {linked}", run.facts.sha256)
        else:
            why = _why_not_run(run, inp, linked_steps, seen, own, cadence)
        if why is None:
            runs.append(run)
            seen[run.facts.sha256] = run.rel
        else:
            left.append(why)
    for other, logs in sorted(by_folder.items()):
        if other != folder:
            left += [_left_out_folder(r, folder, inp) for r in logs]
    said = None if inp.era_single_run else declared_retiming(inp.readme)
    runs, retimings, more = _split_retimings(runs, said)
    flags += more
    if retimings:
        files = ", ".join(r.rel for r in retimings)
        basis += (f"; {files} {'is' if len(retimings) == 1 else 'are'} the re-timing its README declares "
                  f"(\"{_clip(said.sentence)}\"): the record's official time, not a run of its loss evidence")
    if linked_run is not None and linked_run not in runs and linked_run not in retimings and runs:
        why = next(x for x in left if x.file == linked_run.rel)
        flags.append(f"the table links {linked}, which is not one of the record's runs ({why.reason}: {why.detail}); "
                     f"the {len(runs)} other log(s) of {folder or '.'}/ are taken: the editor should confirm it")
    if not runs and candidates:
        flags.append(f"none of the {len(candidates)} log(s) in {folder or '.'}/ is usable as a run")
    return Selection(folder=folder, basis=basis, runs=tuple(runs), left_out=tuple(sorted(left, key=lambda x: x.file)),
                     flags=tuple(flags), retimings=tuple(retimings))


def _split_retimings(runs: list[Run], said: Retiming | None) -> tuple[list[Run], list[Run], list[str]]:
    """(runs, re-timings, flags) by rule 4: the runs that show the README's declared re-timing are its official
    time when runs of another version remain to carry the loss evidence."""
    if said is None or not runs:
        return runs, [], []
    shown = [r for r in runs if said.shown_by(r.facts)]
    if not shown:
        stated = f", {said.time_ms:g} ms" if said.time_ms is not None else ""
        return runs, [], [f"its README declares a re-timing of the record ({said.version}{stated}: "
                          f"\"{_clip(said.sentence)}\") that none of its runs' logs shows: every log is taken as a "
                          "run; the editor should confirm it"]
    if len(shown) == len(runs):
        return runs, [], []  # every run ran the declared version: no older set for the loss to stand on
    return [r for r in runs if r not in shown], shown, []


def _clip(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"
