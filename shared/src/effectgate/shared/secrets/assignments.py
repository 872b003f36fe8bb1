r"""Which ``key=value`` pairs of a text hold a credential: the value's shape decides, never the keyword.

The syntax is ``detect-secrets``' own (``RegexBasedDetector.build_assignment_regex``: ``=``,
``:``, ``:=``, ``=>``, ``::`` or spaces between an optionally quoted key and its value),
over its keyword list (``keyword.DENYLIST``) plus ``token``, ``passphrase``,
``credential(s)``, ``access_key`` and ``secret_key`` (``_``, ``-`` or nothing inside a
keyword: ``api_key``, ``X-Api-Key``, ``apiKey``). A keyword is no evidence by itself:

- after an explicit assignment (``password=…``, ``"token": "…"``, ``--password …``) the
  value must look like a credential (:func:`credential_like`);
- after spaces only, the keyword is a word of prose ("We use a token bucket.", "Password
  updated."): the value must be shaped like a generated token (:func:`token_shaped`);
- a pair inside a link is the link a tool returns to its user, not a secret: in a web URL
  (``http``, ``https``, ``ws``, ``wss``, ``ftp``, ``ftps``) or, without a scheme, right
  after ``/``, ``?``, ``&`` or ``#`` (``example.com/reset?token=…``,
  ``…/password-reset/token=?…``). In a URL of another scheme (``mongodb://…?password=…``,
  ``jdbc:sqlserver://…;password=…``) it is a connection string's credential, checked as
  any other. A known token format or a URL's own ``user:password@`` is still found by
  :mod:`effectgate.shared.secrets.detectors`, link or not.

Sentence punctuation ending a value (``.``, ``!``, ``?``, ``:``, ``…``) is not part of it, nor
is an escape of a JSON text and what follows it (``\n``, ``\"``, ``\u2026``): a result is
often JSON read as text.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator

from detect_secrets.filters.heuristic import (
    is_not_alphanumeric_string,
    is_potential_uuid,
    is_prefixed_with_dollar_sign,
    is_sequential_string,
    is_templated_secret,
)
from detect_secrets.plugins.base import RegexBasedDetector
from detect_secrets.plugins.keyword import DENYLIST

from effectgate.contracts.integrity.sealing import SEALED_LABEL
from effectgate.shared.secrets.redaction import Span

__all__ = ["assignments", "credential_like", "token_shaped"]

_WORDS = (*DENYLIST, "token", "passphrase", "credentials?", "access_?key", "secret_?key")
_KEYWORDS = "|".join(word.replace("_?", "[_-]?") for word in _WORDS)
_ASSIGNMENT = RegexBasedDetector.build_assignment_regex(
    prefix_regex=r"(?:[A-Za-z0-9]{1,32}[_-]){0,4}?",
    secret_keyword_regex=f"({_KEYWORDS})",
    secret_regex=r"([^\s\"'`,;&<>(){}\[\]]+)",
)
"""Group 1 the keyword, group 2 the value."""

_SENTENCE_END = ".!?:…"
_JSON_ESCAPE = re.compile(r'\\(?:["\\/bfnrt]|u[0-9A-Fa-f]{4})')
"""An escape of a JSON text (RFC 8259 §7): a value in a JSON text read as text ends before one."""
_WEB_SCHEMES = frozenset({"http", "https", "ws", "wss", "ftp", "ftps"})
_URL = re.compile(r"(?<![A-Za-z0-9+.-])([A-Za-z][A-Za-z0-9+.-]*)://[^\s\"'<>`]*")
"""A URL from its scheme to the first space or quote; a scheme starts only where a run of
scheme characters starts, so each run is read once (linear time)."""
_LINK_PARTS = "/?&#"
_TOKEN_ALPHABET = re.compile(r"[A-Za-z0-9+/=_-]{8,}")
_PLAIN_WORDS = re.compile(r"[A-Za-z]+(?:[_.-][A-Za-z]+)*")
_PATH_OR_URL = re.compile(r"(?:\.{0,2}/|~/|[A-Za-z][A-Za-z0-9+.-]*://)")
_OWN_LABELS = frozenset({SEALED_LABEL.split()[0]})
"""The first word of the label a sealed secret is shown as, which is never a credential itself
(a ``[redacted:…]`` placeholder cannot be a value: ``[`` ends one)."""


def assignments(text: str) -> Iterator[Span]:
    """Each credential assigned to a secret-sounding keyword in ``text`` (module doc), as ``keyword`` spans."""
    links = _Links(text)
    for match in _ASSIGNMENT.finditer(text):
        value = _JSON_ESCAPE.split(match.group(2), maxsplit=1)[0].rstrip(_SENTENCE_END + "\\")
        if links.holds(match.start()):
            continue
        if token_shaped(value) if _in_prose(text, match) else credential_like(value):
            yield "keyword", match.start(2), match.start(2) + len(value)


def credential_like(value: str) -> bool:
    """Whether a value explicitly assigned to a secret-sounding key looks like a credential.

    Not one: effectgate's own label (``«sealed secret»``), shorter than 6
    characters, plain words (``refresh_on_expiry``, ``please``),
    paths and URLs (``/home/me``, ``https://…``; a URL's own password is found on its own),
    or what ``detect-secrets``' heuristics call templates, ``$VARIABLES``, sequences,
    UUIDs or strings without letters and digits (``****``).
    """
    if value in _OWN_LABELS or len(value) < 6 or _PLAIN_WORDS.fullmatch(value) or _PATH_OR_URL.match(value):
        return False
    checks = (is_templated_secret, is_prefixed_with_dollar_sign, is_sequential_string, is_potential_uuid)
    return not any(check(value) for check in checks) and not is_not_alphanumeric_string(value)


def token_shaped(value: str) -> bool:
    """Whether a value after a keyword in prose is shaped like a generated token.

    It is :func:`credential_like`, 8 or more characters of a token alphabet (letters,
    digits, ``+/=_-``), with a digit, and either both cases or 16 characters or more
    (``Xy7pq2zK9``, ``9f8e7d6c5b4a3f2e``); not ``bucket``, ``updated``, ``v2``,
    ``AES-256-GCM``, ``gpt-4o-mini``, ``2024-01-05T10:00:00Z``.
    """
    if not credential_like(value) or not _TOKEN_ALPHABET.fullmatch(value):
        return False
    upper, lower = any(c.isupper() for c in value), any(c.islower() for c in value)
    return any(c.isdigit() for c in value) and ((upper and lower) or (len(value) >= 16 and (upper or lower)))


def _in_prose(text: str, match: re.Match[str]) -> bool:
    """Whether only spaces (and quotes) stand between the keyword and its value, and the keyword is no ``--flag``."""
    between = text[match.end(1) : match.start(2)]
    flag = text[max(match.start() - 1, 0) : match.start()] == "-"
    return not flag and not any(sign in between for sign in "=:>")


class _Links:
    """The URLs of one text, to tell whether a pair is part of a link (module doc)."""

    def __init__(self, text: str) -> None:
        found = _URL.finditer(text) if "://" in text else iter(())
        self._text = text
        self._spans = [(m.start(), m.end(), m.group(1).lower() in _WEB_SCHEMES) for m in found]
        self._starts = [start for start, _, _ in self._spans]

    def holds(self, at: int) -> bool:
        """Whether the pair starting at ``at`` is part of a link."""
        index = bisect.bisect_right(self._starts, at) - 1
        if index >= 0 and at < self._spans[index][1]:
            return self._spans[index][2]
        return at > 0 and self._text[at - 1] in _LINK_PARTS
