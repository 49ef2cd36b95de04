"""The snippet runner: every fenced code block of README.md and docs/**/*.md runs as pasted.

Blocks are found by sybil's Markdown lexer (fences inside lists and block quotes, longer fences
around shorter ones) and evaluated here, each in a fresh process and a fresh working directory that
looks like a checkout after the README's setup line: ``policies``, ``examples``, ``tests``,
``calibration_artifacts`` and ``guard`` are links into this repository, and ``.venv`` is a link to
the running interpreter's environment, so ``.venv/bin/carbguard`` works as written.

The first word of a fence's info string says what the block is; flags follow as classes in braces,
the attribute form pymdownx.superfences renders as code (```` ```bash {.notest} ````, ```` ```bash {.slow} ````):

- ``python``: run with ``.venv/bin/python`` (no shared namespace: every block must be complete);
- ``bash``: run with ``bash -euo pipefail`` (every command must succeed);
- ``yaml`` / ``json``: parsed; a YAML mapping with ``version`` and ``tools`` is loaded as a policy;
- ``text`` and blocks without a language are output and are not run.

Flags: ``notest`` — not run (say why next to the block: a new virtual environment, a benchmark of
minutes, a server that waits for a client); ``slow`` — run only when slow tests run (``-m slow``).

The older form, flags as bare words (```` ```bash notest ````), is still read until every page is converted;
superfences does not render such a fence as code (the site's hook, ``docs/hooks.py``, drops the words).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import yaml
from sybil import Document, Example, Region
from sybil.parsers.markdown.lexers import RawFencedCodeBlockLexer

ROOT = Path(__file__).resolve().parents[1]
LINKED = ("policies", "examples", "tests", "calibration_artifacts", "guard", "benchmarks", "pyproject.toml")
RUN = ("python", "bash")
PARSED = ("yaml", "json")
OUTPUT = ("text", "")
FLAGS = ("notest", "slow")
TIMEOUT = 600
INFO = re.compile(r"(?P<language>[\w-]*)(?P<flags>[^\n]*)\n")
#: The attribute form of the flags: ``{.notest}``, ``{ .slow }``, ``{.notest .slow}``.
ATTRIBUTES = re.compile(r"^\{\s*((?:\.[\w-]+\s*)+)\}$")


class SnippetError(AssertionError):
    """A snippet failed: its file, line, language and what went wrong."""


@dataclass(frozen=True)
class Snippet:
    """One fenced block: where it is, its language, its flags and its source."""

    path: Path
    line: int
    language: str
    flags: tuple[str, ...]
    source: str

    @property
    def name(self) -> str:
        """``README.md:L42:python``, relative to the repository root."""
        return f"{self.path.relative_to(ROOT) if self.path.is_relative_to(ROOT) else self.path}:L{self.line}"

    @property
    def runs(self) -> bool:
        """Whether the runner does anything with this block."""
        return self.language in RUN + PARSED and "notest" not in self.flags


def fence_flags(text: str) -> tuple[str, ...]:
    """The runner's flags in what follows a fence's language: ``{.notest .slow}`` (classes in braces, which
    superfences renders as code) or the older bare words ``notest slow``.  Anything else is returned as is, so
    the caller reports it as an unknown flag."""
    text = text.strip()
    found = ATTRIBUTES.match(text)
    if found:
        return tuple(word.lstrip(".") for word in found.group(1).split())
    return tuple(text.split())


def _regions(document: Document) -> Iterator[Region]:
    lexer = RawFencedCodeBlockLexer(info_pattern=INFO)
    for region in lexer(document):
        language = str(region.lexemes["language"]).strip()
        flags = fence_flags(str(region.lexemes["flags"]))
        unknown = [f for f in flags if f not in FLAGS]
        line = document.text.count("\n", 0, region.start) + 1
        if language not in RUN + PARSED + OUTPUT:
            raise SnippetError(
                f"{document.path}:L{line}: unknown fence language {language!r} (use one of "
                f"{', '.join(repr(x) for x in RUN + PARSED + OUTPUT)})"
            )
        if unknown:
            raise SnippetError(f"{document.path}:L{line}: unknown fence flag(s) {unknown} (known: {FLAGS})")
        source = str(region.lexemes["source"])
        snippet = Snippet(Path(document.path), line, language, flags, source)
        yield Region(region.start, region.end, parsed=snippet, evaluator=evaluate)


def snippets(path: Path) -> list[Snippet]:
    """Every fenced block of the Markdown file ``path``, in order."""
    document = Document.parse(str(path), _regions)
    examples: list[Example] = list(document.examples())
    return [example.parsed for example in examples]


def documents() -> list[Path]:
    """README.md and every page under docs/."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def workdir(base: Path) -> Path:
    """A directory that looks like a set-up checkout: links into the repository and ``.venv``."""
    for name in LINKED:
        (base / name).symlink_to(ROOT / name)
    (base / ".venv").symlink_to(Path(sys.prefix))
    return base


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = ""  # the snippet sees the installed package, as a user does
    env["MPLBACKEND"] = "Agg"
    return env


def _run(snippet: Snippet, cwd: Path) -> None:
    if snippet.language == "python":
        script = cwd / "snippet.py"
        script.write_text(snippet.source, encoding="utf-8")
        argv = [str(cwd / ".venv" / "bin" / "python"), str(script)]
    else:
        argv = ["bash", "-euo", "pipefail", "-c", snippet.source]
    try:
        done = subprocess.run(
            argv, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired as exc:
        raise SnippetError(f"{snippet.name}: {snippet.language} block did not finish in {TIMEOUT} s") from exc
    if done.returncode != 0:
        raise SnippetError(
            f"{snippet.name}: {snippet.language} block exited {done.returncode}\n"
            f"--- stdout\n{done.stdout[-4000:]}\n--- stderr\n{done.stderr[-4000:]}"
        )


def _parse(snippet: Snippet) -> None:
    try:
        data = json.loads(snippet.source) if snippet.language == "json" else yaml.safe_load(snippet.source)
    except (ValueError, yaml.YAMLError) as exc:
        raise SnippetError(f"{snippet.name}: {snippet.language} block does not parse: {exc}") from exc
    if isinstance(data, dict) and "version" in data and "tools" in data:
        from guard.errors import PolicyError
        from guard.policy import parse_policy

        try:
            parse_policy(data, source=snippet.name)
        except PolicyError as exc:
            raise SnippetError(f"{snippet.name}: policy block is not a valid policy: {exc}") from exc


def evaluate(example: Example) -> None:
    """Run one snippet (sybil's evaluator signature); raise :class:`SnippetError` if it fails."""
    snippet: Snippet = example.parsed
    run_snippet(snippet)


def run_snippet(snippet: Snippet, where: Path | None = None) -> None:
    """Run, parse or skip ``snippet`` according to its language and flags; in a fresh :func:`workdir`, or in
    ``where`` (a :func:`workdir` shared with other snippets, as when pages are pasted one after another)."""
    if not snippet.runs:
        return
    if snippet.language in PARSED:
        _parse(snippet)
        return
    if where is not None:
        try:
            _run(snippet, where)
        finally:
            (where / "snippet.py").unlink(missing_ok=True)  # the runner's file, not the snippet's
        return
    with tempfile.TemporaryDirectory(prefix="carbguard-snippet-") as tmp:
        _run(snippet, workdir(Path(tmp)))
