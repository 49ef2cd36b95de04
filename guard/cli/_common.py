"""What the command groups share: the scope line, ``--json`` and ``-o/--out`` options, output, and the exit-2 path.

Every command reports bad input the same way: one line ``carbguard: error: ...`` on stderr, exit
code 2, nothing written (:func:`run_command`).  ``--json`` prints one JSON object instead of the
table (:func:`add_json`, :func:`emit`); ``-o/--out`` names the one file a command writes
(:func:`add_out`), written atomically and never over one of its inputs (:func:`write_output`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from guard.errors import GuardError
from guard.jsonio import write_atomic

_N = TypeVar("_N", int, float)

SCOPE = (
    "Guarantee: for exchangeable episodes and a frozen pipeline, the expected declared-ledger loss of a new "
    "episode is at most alpha (in expectation over calibration and the new episode). It covers the declared "
    "ledger only. Replay counts a probe as a stop; online, probes add records and replay equivalence needs "
    "traces collected with probes."
)


#: Exit code of bad input (argparse uses it too): one stderr line, nothing written.
EXIT_USAGE = 2
#: Exit code when stdout's reader closed the pipe early (128 + SIGPIPE, as a shell reports it).
EXIT_BROKEN_PIPE = 141


def add_json(parser: Any, what: str = "the result") -> None:
    """``--json``: print ``what`` as one JSON object instead of the table."""
    parser.add_argument("--json", action="store_true", help=f"print {what} as one JSON object instead of the table")


def add_out(parser: Any, help: str, *, required: bool = False, metavar: str | None = None) -> None:
    """``-o/--out FILE``: the file a command writes (``help`` says which, and what happens without it)."""
    parser.add_argument("-o", "--out", required=required, metavar=metavar, help=help)


def ranged(convert: Callable[[str], _N], accept: Callable[[_N], bool], rule: str) -> Callable[[str], _N]:
    """An argparse ``type``: ``convert(text)`` when ``accept`` holds, else one error naming ``rule``."""

    def parse(text: str) -> _N:
        try:
            value = convert(text)
        except ValueError:
            kind = "an integer" if convert is int else "a number"
            raise argparse.ArgumentTypeError(f"not {kind}: {text!r}") from None
        if not accept(value):
            raise argparse.ArgumentTypeError(f"{rule}, got {text}")
        return value

    return parse


def fail(message: object) -> int:
    """The exit-2 path: ``carbguard: error: MESSAGE`` as one line on stderr; returns :data:`EXIT_USAGE`."""
    print(f"carbguard: error: {message}", file=sys.stderr)
    return EXIT_USAGE


def run_command(func: Callable[[Any], int], args: Any) -> int:
    """``func(args)``; a GuardError becomes :func:`fail`, Ctrl-C exit code 130, a closed stdout pipe 141."""
    from guard.cli._policy_notes import summarised_policy_warnings

    try:
        with summarised_policy_warnings():
            return func(args)
    except GuardError as exc:
        return fail(exc)
    except KeyboardInterrupt:
        print("carbguard: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (``| head``): stop quietly, as other Unix tools do
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # the interpreter's final flush must not raise again
        return EXIT_BROKEN_PIPE


def emit(result: Any, as_json: bool, formatter: Callable[[Any], str]) -> int:
    """Print ``result`` as JSON or through ``formatter``; exit code 0."""
    print(json.dumps(result, indent=1) if as_json else formatter(result))
    return 0


def _identity(path: Path) -> tuple[int, int] | None:
    """``(st_dev, st_ino)`` of the file ``path`` names after symlinks, or None when it does not exist."""
    try:
        info = path.stat()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise GuardError(f"{path}: cannot stat: {exc.strerror or exc}") from None
    return info.st_dev, info.st_ino


def check_output(out: str | Path, inputs: Iterable[str | Path | None], option: str = "-o") -> Path:
    """``out`` as a Path; GuardError naming the clash when it is (a link to) one of ``inputs``.

    Compares resolved paths (symlinks followed) and, for an existing output, ``st_dev``/``st_ino``
    against every existing input, so a hard link or symlink to an input is refused like the input itself.
    """
    target = Path(out)
    if target.is_dir():
        raise GuardError(f"{option} {target} is a folder; give a file path")
    mine = _identity(target)
    resolved = target.resolve()
    for given in inputs:
        if given is None:
            continue
        source = Path(given)
        theirs = _identity(source)
        if resolved == source.resolve() or (mine is not None and mine == theirs):
            raise GuardError(f"{option} {target} is the input {source}; write the output to another file")
    return target


def write_output(
    out: str | Path, data: str | bytes, inputs: Iterable[str | Path | None] = (), option: str = "-o"
) -> Path:
    """Write ``data`` to ``out`` with :func:`guard.jsonio.write_atomic` (its permission: the umask's default).

    Refuses (GuardError) an ``out`` that is one of ``inputs`` (:func:`check_output`); a failed write
    leaves an existing ``out`` as it was and no temporary file behind.
    """
    target = check_output(out, inputs, option)
    try:
        return write_atomic(target, data)
    except OSError as exc:
        raise GuardError(f"{target}: cannot write: {exc.strerror or exc}") from None
