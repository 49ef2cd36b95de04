"""Policy warnings on the command line: one line per policy file, not one per feature left off.

Loading a policy logs a warning (logger ``guard.policy``) for each feature it leaves off
(:func:`guard.policy.defaults.policy_warnings`).  A command that loads a deliberate policy (a worked example
that pins earlier weights) would print them at every run; while a command runs, :class:`PolicyNotes` counts
them per file instead, and the command ends with one line per file naming ``carbguard policy validate FILE``,
which lists them.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

LOGGER = "guard.policy"


class PolicyNotes(logging.Handler):
    """Counts the ``guard.policy`` warnings of each policy file (the file is the record's second argument)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.counts: dict[str, int] = {}

    def emit(self, record: logging.LogRecord) -> None:
        args = record.args if isinstance(record.args, tuple) else ()
        where = str(args[1]) if len(args) >= 2 else record.getMessage()
        self.counts[where] = self.counts.get(where, 0) + 1

    def lines(self) -> list[str]:
        """One line per policy file that had warnings."""
        return [
            f"carbguard: policy {where}: {n} feature warning{'s' if n != 1 else ''} "
            f"(carbguard policy validate {where} lists them)"
            for where, n in self.counts.items()
        ]


@contextmanager
def summarised_policy_warnings(stream: TextIO | None = None) -> Iterator[PolicyNotes]:
    """While the block runs, count policy warnings instead of printing each; print one line per file after."""
    logger = logging.getLogger(LOGGER)
    notes = PolicyNotes()
    propagate = logger.propagate
    logger.addHandler(notes)
    logger.propagate = False
    try:
        yield notes
    finally:
        logger.removeHandler(notes)
        logger.propagate = propagate
        for line in notes.lines():
            print(line, file=stream or sys.stderr)
