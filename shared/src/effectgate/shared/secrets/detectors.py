"""Where credentials sit in a text: the detectors of ``detect-secrets`` (Yelp, 1.5) by position.

The library's plugins report secret *values*, not where they are (and some report only a
capture group, e.g. ``ghp`` for a GitHub token), so this adapter runs the plugins' own
maintained patterns (their ``denylist``) with ``finditer`` and reports spans. No global
settings of the library are touched: nothing here is shared between threads.

The plugin set, chosen deliberately:

- known formats, reported whole: AWS access key ids (``AWSKeyDetector``, first pattern), JWTs
  (``JwtTokenDetector``, with its formal-validity check), private key blocks
  (``PrivateKeyDetector`` headers; the block is redacted up to its ``END`` line), GitHub
  (``GitHubTokenDetector``), Slack (``SlackDetector``), Stripe (``StripeDetector``) and
  OpenAI (``OpenAIDetector``) tokens; a match is extended to the end of its token, so a
  pattern that stops early (Stripe's 24 characters, the JWT signature) leaks nothing;
- ``key=value`` / ``"key": "value"`` pairs (:mod:`effectgate.shared.secrets.assignments`): a
  secret-sounding keyword in the library's assignment syntax, redacted only when the value
  is shaped like a credential and the pair is not part of a link. The library's own
  ``KeywordDetector`` takes everything after ``password:`` up to a quote, so it flags prose
  ("Your new password: please choose …"); the high-entropy plugins flag digests, UUIDs
  and ordinary base64. Neither is used.
- what the library lacks: ``Authorization``-style ``Basic``/``Bearer`` credentials,
  fine-grained GitHub tokens (``github_pat_``), and URL passwords ``scheme://user:pass@host``
  as RFC 3986 writes them (``BasicAuthDetector`` misses an empty user and passwords with
  sub-delimiters such as ``!`` or ``*``; see :data:`_USERINFO`).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Iterator
from typing import Any

from detect_secrets.plugins.aws import AWSKeyDetector
from detect_secrets.plugins.github_token import GitHubTokenDetector
from detect_secrets.plugins.jwt import JwtTokenDetector
from detect_secrets.plugins.openai import OpenAIDetector
from detect_secrets.plugins.private_key import PrivateKeyDetector
from detect_secrets.plugins.slack import SlackDetector
from detect_secrets.plugins.stripe import StripeDetector

from effectgate.shared.secrets.assignments import assignments, credential_like
from effectgate.shared.secrets.redaction import Span

__all__ = ["find_secrets"]

_TOKEN_TAIL = re.compile(r"[A-Za-z0-9_\-+/=]*")
"""Characters a token continues with; a match is extended over them."""

_USERINFO = re.compile(r"://[^\s/?#@:]{0,256}:([^\s/?#@]{1,256})@")
"""RFC 3986 §3.2.1 ``userinfo`` (``user:password@``) after a scheme's ``://``: the password may
hold sub-delimiters and ``:``, and the user may be empty (``redis://:pw@host``);
``BasicAuthDetector`` misses both. Bounded parts keep a failed attempt short."""
_AUTHORIZATION = re.compile(r"(?i)\b(basic|bearer)\s+([A-Za-z0-9._~+/-]{8,}=*)")
_GITHUB_PAT = re.compile(r"\bgithub_pat_[A-Za-z0-9_]{22,}")
_BLOCK_END = {
    "PuTTY-User-Key-File-2": re.compile(r"Private-MAC: *\S*"),
}
_PEM_END = re.compile(r"-----END [A-Z0-9 ]*-----")
_KEY_HEADER = re.compile("|".join(pattern.pattern for pattern in PrivateKeyDetector.denylist))
"""The headers ``PrivateKeyDetector`` recognises, as one pattern (one search finds the first)."""


def _jwt(candidate: str) -> bool:
    """``JwtTokenDetector``'s pattern and formal check, on a candidate found in linear time.

    The plugin's own pattern, searched over a whole text, retries at every ``eyJ`` and
    reads to the end each time (quadratic): the candidate pattern above always matches
    once started.
    """
    return bool(JwtTokenDetector.denylist[0].match(candidate)) and JwtTokenDetector.is_formally_valid(candidate)


_FORMATS: tuple[tuple[str, re.Pattern[str], Callable[[str], bool] | None], ...] = (
    ("aws_access_key", AWSKeyDetector.denylist[0], None),
    ("github_token", GitHubTokenDetector.denylist[0], None),
    ("github_token", _GITHUB_PAT, None),
    *(("slack_token", pattern, None) for pattern in SlackDetector.denylist),
    *(("stripe_key", pattern, None) for pattern in StripeDetector.denylist),
    *(("openai_key", pattern, None) for pattern in OpenAIDetector.denylist),
    ("jwt", re.compile(r"eyJ[A-Za-z0-9_=-]*(?:\.[A-Za-z0-9_=-]*){0,2}"), _jwt),
)
"""(kind, the plugin's pattern, the plugin's validity check) for whole-token formats."""


def find_secrets(text: str) -> Iterator[Span]:
    """Every credential found in ``text``, as ``(kind, start, end)`` character offsets.

    Spans may overlap (the caller merges them). Time is linear in ``len(text)`` for each
    pattern (a private key block ends at its ``END`` line or at the end of the text).
    """
    yield from _formats(text)
    yield from _userinfo(text)
    yield from _private_keys(text)
    yield from assignments(text)
    yield from _authorizations(text)


def _formats(text: str) -> Iterator[Span]:
    """Each match extended to the end of its token; the search goes on after it (linear time)."""
    for kind, pattern, valid in _FORMATS:
        position = 0
        while (match := pattern.search(text, position)) is not None:
            position = _token_end(text, match.end())
            if valid is None or valid(match.group(0)):
                yield kind, match.start(), position


def _userinfo(text: str) -> Iterator[Span]:
    for match in _USERINFO.finditer(text):
        yield "url_password", match.start(1), match.end(1)


def _private_keys(text: str) -> Iterator[Span]:
    """Whole private key blocks, scanned left to right so each character is read about once."""
    position = 0
    while (header := _KEY_HEADER.search(text, position)) is not None:
        closing = _BLOCK_END.get(header.group(0), _PEM_END).search(text, header.end())
        end = closing.end() if closing else len(text)
        start = header.start() - 5 if text[max(header.start() - 5, 0) : header.start()] == "-----" else header.start()
        yield "private_key", start, end
        position = end


def _authorizations(text: str) -> Iterator[Span]:
    """``Basic``/``Bearer`` credentials; a full stop ending the sentence is not part of one."""
    for match in _AUTHORIZATION.finditer(text):
        scheme, token = match.group(1).lower(), match.group(2).rstrip(".")
        if _basic_credentials(token) if scheme == "basic" else credential_like(token):
            yield "authorization", match.start(2), match.start(2) + len(token)


def _basic_credentials(token: str) -> bool:
    """Whether ``token`` is RFC 7617 ``Basic`` credentials: base64 of ``user:password``."""
    try:
        decoded: Any = base64.b64decode(token, validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return False
    return ":" in decoded


def _token_end(text: str, end: int) -> int:
    match = _TOKEN_TAIL.match(text, end)
    return match.end() if match else end
