"""Keep secrets out of bundles: find secret-looking values and replace them with "[REDACTED]".

    from pipeline.redact import Redactor
    redactor = Redactor.from_environ(os.environ)
    clean, count = redactor.text("... hf_abcdefghijklmnopqrstuvwx ...")

Two sources of secrets. First, the values of environment variables whose names say they hold
one (HF_TOKEN, AWS_SECRET_ACCESS_KEY, DB_PASSWORD, ...): a training program that prints its
environment, or a command line with a token in it, would otherwise carry them into a log. Second,
the shapes of well-known credentials (Hugging Face, GitHub, AWS, OpenAI-style keys, PEM private
keys), which are caught even when the variable that held them is not set in this shell.
The bundle never copies the environment itself; this scan is the second line of defence.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

REDACTED = "[REDACTED]"
SECRET_NAME_PARTS = ("TOKEN", "KEY", "SECRET", "PASSWORD", "PASSWD", "PASS", "CREDENTIAL", "AUTH")
# Shorter values are too likely to be ordinary words or numbers ("1", "true", "none") that
# would be blanked out all over the logs; real tokens and passwords are longer than this.
MIN_SECRET_CHARS = 6
# Values that name things rather than hide them: a socket path in SSH_AUTH_SOCK is not a secret.
_NOT_SECRET = re.compile(r"^(true|false|yes|no|none|null|[0-9]+|/[\w./-]*)$", re.I)

PATTERNS = (
    re.compile(r"hf_[A-Za-z0-9]{20,}"),  # Hugging Face access tokens
    re.compile(r"gh[pousr]_[A-Za-z0-9]{30,}"),  # GitHub tokens
    re.compile(r"github_pat_[A-Za-z0-9_]{40,}"),
    re.compile(r"(?:AKIA|ASIA)[0-9A-Z]{16}"),  # AWS access key ids
    re.compile(r"sk-[A-Za-z0-9_-]{20,}"),  # OpenAI-style secret keys
    re.compile(r"xox[abprs]-[A-Za-z0-9-]{10,}"),  # Slack tokens
    re.compile(r"(?<=://)[^/\s:@]+:[^/\s@]+(?=@)"),  # user:password@ inside URLs (pip freeze, git remotes)
    re.compile(r"-----BEGIN (?:[A-Z ]+ )?PRIVATE KEY-----.*?-----END (?:[A-Z ]+ )?PRIVATE KEY-----", re.S),
)


def is_secret_name(name: str) -> bool:
    upper = name.upper()
    return any(part in upper for part in SECRET_NAME_PARTS)


def secret_values(environ: Mapping[str, str]) -> tuple[str, ...]:
    """Values of secret-named variables worth scanning for, longest first (so overlaps redact fully)."""
    values = {v for k, v in environ.items() if is_secret_name(k) and len(v) >= MIN_SECRET_CHARS
              and not _NOT_SECRET.match(v)}
    return tuple(sorted(values, key=lambda v: (-len(v), v)))


@dataclass(frozen=True)
class Redactor:
    values: tuple[str, ...]

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> Redactor:
        return cls(secret_values(environ))

    def data(self, data: bytes) -> tuple[bytes, int]:
        """(bytes with every secret replaced, how many replacements).

        Works on bytes, not decoded text, so a log with one invalid UTF-8 byte is still scanned.
        """
        count = 0
        for value in self.values:
            raw = value.encode("utf-8")
            if raw in data:
                count += data.count(raw)
                data = data.replace(raw, _REDACTED_BYTES)
        for pattern in _BYTE_PATTERNS:
            data, n = pattern.subn(_REDACTED_BYTES, data)
            count += n
        return data, count

    def text(self, text: str) -> tuple[str, int]:
        clean, count = self.data(text.encode("utf-8"))
        return clean.decode("utf-8"), count


_REDACTED_BYTES = REDACTED.encode()
_BYTE_PATTERNS = tuple(re.compile(p.pattern.encode(), p.flags & re.S) for p in PATTERNS)
