"""Log records scrubbed of secrets before any handler writes them (message, string fields, traceback).

The rules are a :class:`~effectgate.shared.secrets.redaction.Redactor`'s: the detectors of
:mod:`effectgate.shared.secrets.detectors` and the operator's configured values. The executor
installs it over everything it logs; the registry over what it logs of the MCP servers it lists.
"""

from __future__ import annotations

import logging

from effectgate.shared.runtime.logs import described_errors, fields_of
from effectgate.shared.secrets.redaction import Redactor

__all__ = ["ScrubbingLogFilter", "install_log_filter"]


class ScrubbingLogFilter(logging.Filter):
    """Replaces a record's message, string fields and traceback by their scrubbed text (never drops a record)."""

    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self._redactor = redactor
        self._formatter = logging.Formatter()

    def filter(self, record: logging.LogRecord) -> bool:
        """Scrub ``record`` in place (an error without text described first); always keep it."""
        described_errors(record)
        record.msg, record.args = self._redactor.text(record.getMessage()), None
        for key, value in fields_of(record).items():
            if isinstance(value, str):
                setattr(record, key, self._redactor.text(value))
        if record.exc_info and not record.exc_text:
            record.exc_text = self._formatter.formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self._redactor.text(record.exc_text)
        if record.stack_info:
            record.stack_info = self._redactor.text(record.stack_info)
        return True


def install_log_filter(redactor: Redactor) -> None:
    """Scrub every record the process's root handlers write (call after logging is configured)."""
    for handler in logging.getLogger().handlers:
        handler.addFilter(ScrubbingLogFilter(redactor))
