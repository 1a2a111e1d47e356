"""What a bundle check can prove, and against which rules.

Hashes prove only that a bundle is unchanged since whoever wrote it computed them: anyone can edit
a bundle and recompute SHA256SUMS. So:
- the verdict is always recomputed against the record manifest in the VERIFIER'S registry
  (`Workspace.records_dir`), found by the record name the bundle pins; the copy the bundle carries is
  never used to judge. When the bundle pins a different manifest hash, the check says so and names
  the rules that differ;
- the first line of the output says what was proven: "integrity only: unsigned" or
  "signed by <key fingerprint>" (an ed25519 signature over SHA256SUMS).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pipeline.bundle.manifest import BundleManifest, RecordPin
from pipeline.bundle.members import Problem
from pipeline.errors import InputError, ReproError
from pipeline.hashing import sha256_bytes
from pipeline.records.model import Record, check_record_name, load_record, load_record_file
from pipeline.regular_file import read_bounded
from pipeline.yamlio import LIMITS

SUMS = "SHA256SUMS"
SIGNATURE = "SHA256SUMS.sig"


def fingerprint(raw_public_key: bytes) -> str:
    """How a key is named to people: its algorithm and the sha256 of its 32 raw bytes."""
    return f"ed25519:{sha256_bytes(raw_public_key)}"


def raw_public_key(key) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


# ---- signatures -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class SignatureCheck:
    status: str  # valid | invalid | absent | unchecked
    fingerprint: str | None  # the key the signature was checked with
    key_source: str | None  # "--pubkey" or "the bundle" (the key it names: proves only who holds that key)
    problems: tuple[Problem, ...]

    def first_line(self) -> str:
        """What was proven, for the first line of `bundle verify`."""
        if self.status == "valid":
            named = "" if self.key_source == "--pubkey" else " (the key the bundle names; compare the fingerprint " \
                                                           "with the signer's, or pass --pubkey)"
            return f"signed by {self.fingerprint}{named}"
        if self.status == "absent":
            return "integrity only: unsigned"
        if self.status == "unchecked":
            return "integrity only: signed, but no key to check the signature with (pass --pubkey)"
        return "integrity only: the signature does NOT verify"


KEY_FILE_LIMIT = 64 << 10  # PEM keys are a few hundred bytes; a key file larger than this is no key

# The words of each key file's messages: what it is, what it must be, what kind of key it must hold, and the fix
# for a file that cannot be read, that does not parse, and that holds another kind of key.
_PRIVATE_KEY = ("signing key", "an unencrypted PEM private key", "an ed25519 key",
                "give the path of an ed25519 private key in PEM (`openssl genpkey -algorithm ed25519 -out key.pem`)",
                "create one with `openssl genpkey -algorithm ed25519 -out key.pem`",
                "create one with `openssl genpkey -algorithm ed25519 -out key.pem`")
_PUBLIC_KEY = ("public key", "a PEM public key", "an ed25519 public key",
               "give the signer's ed25519 public key in PEM",
               "export it with `openssl pkey -in key.pem -pubout -out key.pub.pem`",
               "give the public half of the ed25519 key the bundle was signed with")


def _read_key(path: Path, parse, kind: type, words: tuple[str, ...]):
    """The key in a PEM file, read bounded (a PEM key is a few hundred bytes), parsed, of the ed25519 kind."""
    from pipeline.regular_file import read_bounded

    what, must_be, key_kind, read_fix, parse_fix, kind_fix = words
    pem = read_bounded(Path(path), KEY_FILE_LIMIT, what, read_fix)
    try:
        key = parse(pem)
    except (ValueError, TypeError) as exc:
        raise InputError(f"{path} is not {must_be} ({exc})", parse_fix) from None
    if not isinstance(key, kind):
        raise InputError(f"{path} holds a {type(key).__name__}, not {key_kind}", kind_fix)
    return key


def load_private_key(path: Path):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    return _read_key(path, lambda pem: serialization.load_pem_private_key(pem, password=None), Ed25519PrivateKey,
                     _PRIVATE_KEY)


def load_public_key(pem: Path):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    return _read_key(pem, serialization.load_pem_public_key, Ed25519PublicKey, _PUBLIC_KEY)


def public_key_b64(key) -> str:
    from cryptography.hazmat.primitives import serialization

    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return base64.b64encode(raw).decode()


def check_signature(files: Mapping[str, bytes], manifest: BundleManifest | None, pubkey: Path | None
                    ) -> SignatureCheck:
    claimed = manifest.signature.public_key if manifest is not None and manifest.signature else None
    given = load_public_key(pubkey) if pubkey else None
    if SIGNATURE not in files:
        if given is not None:
            return SignatureCheck("absent", None, None, (Problem(SIGNATURE, "missing, although --pubkey asks for a "
                                                                            "signed bundle"),))
        if claimed:
            return SignatureCheck("absent", None, None, (Problem(SIGNATURE, "missing, although manifest.yaml says "
                                                                            "the bundle was signed"),))
        return SignatureCheck("absent", None, None, ())
    # only a signed bundle needs the crypto library (a node's bare Python may lack it)
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        signature = base64.b64decode(files[SIGNATURE].strip(), validate=True)
    except (binascii.Error, ValueError):
        return SignatureCheck("invalid", None, None, (Problem(SIGNATURE, "is not base64 text"),))
    if given is not None:
        key, source = given, "--pubkey"
    elif claimed:
        try:
            key, source = Ed25519PublicKey.from_public_bytes(base64.b64decode(claimed, validate=True)), "the bundle"
        except (binascii.Error, ValueError):
            return SignatureCheck("invalid", None, None,
                                  (Problem("manifest.yaml", "signature.public_key is not a base64 ed25519 key"),))
    else:
        return SignatureCheck("unchecked", None, None, ())
    print_ = fingerprint(raw_public_key(key))
    try:
        key.verify(signature, files.get(SUMS, b""))
    except InvalidSignature:
        return SignatureCheck("invalid", print_, source, (Problem(SIGNATURE, "does not match SHA256SUMS for key "
                                                                             f"{print_} (wrong key, or the bundle "
                                                                             "was altered after signing)"),))
    return SignatureCheck("valid", print_, source, ())


# ---- the record to judge against ---------------------------------------------------------------------

@dataclass(frozen=True)
class RecordChoice:
    record: Record | None  # the verifier's record, or None when it cannot be judged
    problems: tuple[Problem, ...]
    notes: tuple[str, ...]  # what differs between the bundle's pin and the verifier's registry


def _rule_differences(theirs: Record, ours: Record) -> list[str]:
    diffs = []
    for field in dataclasses.fields(ours.rules):
        a, b = getattr(theirs.rules, field.name), getattr(ours.rules, field.name)
        if a != b:
            diffs.append(f"{field.name} {a} (yours: {b})")
    if theirs.published.losses != ours.published.losses or theirs.published.mean_time_s != ours.published.mean_time_s:
        diffs.append("the published losses or times")
    if theirs.accepted_program_sha256 != ours.accepted_program_sha256:
        diffs.append("the accepted program hashes")
    return diffs


def _bundled_record(files: Mapping[str, bytes], member: str, name: str) -> Record | None:
    """The record copy a bundle carries, parsed only to tell how it differs (never to judge)."""
    import tempfile

    data = files.get(member)
    if data is None:
        return None
    with tempfile.TemporaryDirectory(prefix="repro-bundled-record-") as tmp:
        path = Path(tmp) / f"{name}.yaml"  # the name was checked to be one plain component
        path.write_bytes(data)
        try:
            return load_record_file(path)
        except ReproError:
            return None


def choose_record(files: Mapping[str, bytes], pin: RecordPin, records_dir: Path) -> RecordChoice:
    """The record manifest of the verifier's registry that the bundle names, and how it differs from the pin."""
    problems: list[Problem] = []
    notes: list[str] = []
    try:
        name = check_record_name(pin.name, "manifest.yaml record.name")
    except InputError as exc:
        return RecordChoice(None, (Problem("manifest.yaml", exc.what, exc.fix or ""),), ())
    member = f"manifests/records/{name}.yaml"
    if pin.manifest != member:
        problems.append(Problem("manifest.yaml", f"record.manifest is {pin.manifest!r}, expected {member!r}"))
    carried = files.get(member)
    if carried is not None and sha256_bytes(carried) != pin.manifest_sha256:
        problems.append(Problem(member, "its sha256 differs from record.manifest_sha256 in manifest.yaml"))
    path = Path(records_dir) / f"{name}.yaml"
    if not path.is_file():
        return RecordChoice(None, tuple(problems) + (Problem(
            "manifest.yaml", f"record {name!r} is not in your registry ({records_dir}), so the verdict cannot be "
                             "judged by rules you hold; the bundle's own copy is never used to judge",
            "add the record's manifest to your registry, or pass --registry DIR holding it"),), ())
    try:
        ours = load_record(name, records_dir)  # also refuses a manifest linked from outside the registry
        data = read_bounded(path, LIMITS["manifest"], "record manifest", "restore it from the registry")
    except ReproError as exc:
        return RecordChoice(None, tuple(problems) + (Problem(str(path), exc.what, exc.fix or ""),), ())
    mine = sha256_bytes(data)
    if mine != pin.manifest_sha256:
        theirs = _bundled_record(files, member, name)
        differs = _rule_differences(theirs, ours) if theirs is not None else []
        notes.append(f"the bundle was judged against its own record manifest {name} (sha256 "
                     f"{pin.manifest_sha256[:12]}…), not your registry's (sha256 {mine[:12]}…); the bundle's copy "
                     "was NOT used: the verdict was recomputed against yours"
                     + (f"; the bundle's own rules differ: {'; '.join(differs)}" if differs else ""))
    if pin.parent:
        parent_path = Path(records_dir) / f"{ours.parent}.yaml" if ours.parent else None
        if ours.parent != pin.parent:
            notes.append(f"the bundle names parent record {pin.parent}, your registry's {name} names "
                         f"{ours.parent or 'none'}")
        elif parent_path is not None and parent_path.is_file() and pin.parent_manifest_sha256 and \
                sha256_bytes(read_bounded(parent_path, LIMITS["manifest"], "record manifest",
                                          "restore it from the registry")) != pin.parent_manifest_sha256:
            notes.append(f"the bundle was judged with parent record manifest {pin.parent} sha256 "
                         f"{pin.parent_manifest_sha256[:12]}…, your registry's differs: recomputed with yours")
    return RecordChoice(ours, tuple(problems), tuple(notes))
