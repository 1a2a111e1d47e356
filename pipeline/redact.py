"""Keep secrets out of bundles: find secret-looking values and replace them with "[REDACTED]".

    from pipeline.redact import Redactor
    redactor = Redactor.from_environ(os.environ)
    clean, count = redactor.text("... hf_abcdefghijklmnopqrstuvwx ...")

Two sources of secrets. First, the values of environment variables whose names say they hold
one (HF_TOKEN, AWS_SECRET_ACCESS_KEY, DB_PASSWORD, ...), whatever the value looks like (all
digits, a path): a training program that prints its environment, or a command line with a token
in it, would otherwise carry them into a log; wherever text assigns a secret-named variable
(NAME=value, NAME: value) the value goes too. Second, the shapes of well-known credentials (Hugging
Face, GitHub, AWS, OpenAI-style keys, PEM private keys, user:password@ in URLs), which are caught
even when the variable that held them is not set in this shell.
The bundle never copies the environment itself; this scan is the second line of defence.

This module holds the one list of secret names (SECRET_NAME_PARTS) and patterns: preflight's
environment filter, URL cleaning in locks and logs, and the bundle's scan all use it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

REDACTED = "[REDACTED]"
# The one list of what names a secret: a variable whose name contains any of these (case-insensitive).
# Generous on purpose: a false positive costs one variable not recorded, a false negative a leaked token.
SECRET_NAME_PARTS = ("TOKEN", "KEY", "SECRET", "PASS", "CRED", "AUTH", "SIGN", "COOKIE", "SESSION")
_SECRET_NAME = re.compile("|".join(SECRET_NAME_PARTS), re.IGNORECASE)
# A value of a secret variable is redacted wherever it appears, whatever it looks like (all digits, a
# path, ...), except when it is so short that blanking every occurrence would blank ordinary text ("1").
# Such short values are still redacted where the text assigns them: NAME=value, NAME: value, for the secret
# names set in the environment and for variable-shaped names (a word, an underscore, more: DB_PASS, HF_TOKEN);
# a bare word is not enough (a program's `metavar="KEY=VALUE"` is no secret, and rewriting a logged program
# would break its identity).
MIN_SECRET_CHARS = 6
_FLAG_WORDS = frozenset({"true", "false", "yes", "no", "none", "null", "on", "off"})
# `HF_TOKEN=...`, `DB_PASSWORD: ...`, `export AWS_SECRET_ACCESS_KEY="..."`: the value, whatever it is.
_PARTS = "|".join(SECRET_NAME_PARTS)
_VARIABLE_SHAPED = rf"[A-Z0-9]+_[A-Z0-9_]*(?:{_PARTS})[A-Z0-9_]*|[A-Z0-9_]*(?:{_PARTS})[A-Z0-9_]*_[A-Z0-9_]+"
_ASSIGNMENT_TAIL = r"(?P<sep>=|: ?)(?P<quote>[\"']?)(?!\[REDACTED\])(?P<value>[^\s\"',;]+)"
URL_CREDENTIALS = re.compile(r"(?<=://)[^/\s@]+(?=@)")  # user:password@ or token@ inside a URL

PATTERNS = (
    re.compile(r"hf_[A-Za-z0-9]{20,}"),  # Hugging Face access tokens
    re.compile(r"gh[pousr]_[A-Za-z0-9]{30,}"),  # GitHub tokens
    re.compile(r"github_pat_[A-Za-z0-9_]{40,}"),
    re.compile(r"(?:AKIA|ASIA)[0-9A-Z]{16}"),  # AWS access key ids
    re.compile(r"sk-[A-Za-z0-9_-]{20,}"),  # OpenAI-style secret keys
    re.compile(r"xox[abprs]-[A-Za-z0-9-]{10,}"),  # Slack tokens
    URL_CREDENTIALS,  # user:password@ inside URLs (pip freeze, git remotes, proxies)
    re.compile(r"-----BEGIN (?:[A-Z ]+ )?PRIVATE KEY-----.*?-----END (?:[A-Z ]+ )?PRIVATE KEY-----", re.S),
)


def is_secret_name(name: str) -> bool:
    return bool(_SECRET_NAME.search(name))


def secret_values(environ: Mapping[str, str]) -> tuple[str, ...]:
    """Values of secret-named variables to blank wherever they appear, longest first (overlaps redact fully)."""
    values = {v for k, v in environ.items() if is_secret_name(k) and len(v) >= MIN_SECRET_CHARS
              and v.strip().lower() not in _FLAG_WORDS}
    return tuple(sorted(values, key=lambda v: (-len(v), v)))


def without_secrets(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables whose names do not say they hold a secret (for anything that records an environment)."""
    return {k: v for k, v in environ.items() if not is_secret_name(k)}


def public_url(url: str, keep_query: bool = False) -> str:
    """A URL fit for a log or lock: no user:password@, and no query unless asked (signed URLs carry tokens there)."""
    parts = urlsplit(url)
    netloc = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query if keep_query else "", ""))


def scrub_urls(text: str) -> str:
    """Credentials inside any URL in free text (error messages, pip output), blanked."""
    return URL_CREDENTIALS.sub(REDACTED, text)


@dataclass(frozen=True)
class Redactor:
    values: tuple[str, ...]
    names: tuple[str, ...] = ()  # secret-named variables set in the environment: their assignments are blanked

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> Redactor:
        return cls(secret_values(environ), tuple(sorted(k for k in environ if is_secret_name(k) and environ[k])))

    @property
    def _assignment(self) -> re.Pattern:
        names = "|".join([re.escape(n) for n in sorted(self.names, key=len, reverse=True)] + [_VARIABLE_SHAPED])
        return re.compile((rf"\b(?P<name>{names})" + _ASSIGNMENT_TAIL).encode())

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
        data, n = self._assignment.subn(rb"\g<name>\g<sep>\g<quote>" + _REDACTED_BYTES, data)
        return data, count + n

    def text(self, text: str) -> tuple[str, int]:
        clean, count = self.data(text.encode("utf-8"))
        return clean.decode("utf-8"), count


_REDACTED_BYTES = REDACTED.encode()
_BYTE_PATTERNS = tuple(re.compile(p.pattern.encode(), p.flags & re.S) for p in PATTERNS)
