"""Every code block of README.md and docs/**/*.md runs as pasted (the runner is tests/snippets.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.snippets import ROOT, Snippet, SnippetError, documents, run_snippet, snippets, workdir

ALL = [s for path in documents() for s in snippets(path)]


def _param(snippet: Snippet) -> object:
    marks = [pytest.mark.slow] if "slow" in snippet.flags else []
    return pytest.param(snippet, id=snippet.name, marks=marks)


@pytest.mark.parametrize("snippet", [_param(s) for s in ALL if s.runs])
def test_snippet_runs(snippet: Snippet) -> None:
    """Catches a README or docs code block that fails as pasted (NameError, a wrong path, a failing command)."""
    run_snippet(snippet)


@pytest.mark.slow
def test_pages_pasted_in_order_into_one_checkout(tmp_path: Path) -> None:
    """README.md, then every docs page, pasted into one checkout: every block still runs, and every path they
    leave is in .gitignore.  Catches two pages writing the same file (``policy init --out`` refuses an existing
    policy, a keyed audit log refuses an unkeyed one's file), and a snippet's output showing up as untracked in
    ``git status``."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: no .gitignore to check against")
    where = workdir(tmp_path)
    linked = {p.name for p in where.iterdir()}
    for snippet in ALL:
        run_snippet(snippet, where)
    left = sorted(p.name + "/" * p.is_dir() for p in where.iterdir() if p.name not in linked)
    assert "my_server.yaml" in left and "audit.jsonl" in left, left  # the pages did write at the root
    done = subprocess.run(["git", "check-ignore", *left], cwd=ROOT, capture_output=True, text=True, check=False)
    ignored = done.stdout.split()
    assert sorted(ignored) == left, f"not in .gitignore: {sorted(set(left) - set(ignored))}"


def test_every_page_is_scanned() -> None:
    """Catches a runner that silently finds no blocks (a lexer or glob that matches nothing)."""
    assert len(documents()) > 10
    by_language = {lang: sum(s.language == lang and s.runs for s in ALL) for lang in ("python", "bash")}
    assert by_language["python"] >= 10 and by_language["bash"] >= 5, by_language


def test_shell_blocks_use_the_venv() -> None:
    """Catches a shell block that calls a bare ``carbguard``/``python``/``pip`` instead of ``.venv/bin/…``."""
    bare = []
    for snippet in ALL:
        if snippet.language != "bash":
            continue
        for line in snippet.source.splitlines():
            words = line.split()
            creates_a_venv = line.strip().startswith("python3 -m venv ")  # the one command run before a venv exists
            bare_tool = bool(words) and words[0] in {"carbguard", "python", "python3", "pip", "pytest", "mkdocs"}
            if bare_tool and not creates_a_venv:
                bare.append(f"{snippet.name}: {line.strip()}")
    assert not bare, bare


def _page(tmp_path: Path, body: str) -> list[Snippet]:
    page = tmp_path / "page.md"
    page.write_text(body, encoding="utf-8")
    return snippets(page)


def test_a_broken_python_block_fails(tmp_path: Path) -> None:
    """Negative control: a block that uses a name it never imports must fail the runner."""
    (snippet,) = _page(tmp_path, "# t\n\n```python\nguard = Guard.from_policy('x.yaml')\n```\n")
    with pytest.raises(SnippetError, match="NameError"):
        run_snippet(snippet)


def test_a_failing_command_fails(tmp_path: Path) -> None:
    """Negative control: a shell block whose command exits non-zero (here: bad input, exit 2) must fail."""
    (snippet,) = _page(tmp_path, "```bash\n.venv/bin/carbguard policy validate no-such-policy.yaml\n```\n")
    with pytest.raises(SnippetError, match="exited 2"):
        run_snippet(snippet)


def test_blocks_are_isolated(tmp_path: Path) -> None:
    """Catches a runner that shares a namespace: the second block cannot see the first block's names."""
    first, second = _page(tmp_path, "```python\nx = 1\n```\n\n```python\nassert x == 1\n```\n")
    run_snippet(first)
    with pytest.raises(SnippetError, match="NameError"):
        run_snippet(second)


def test_flags_and_languages(tmp_path: Path) -> None:
    """Catches a ``notest`` block that runs anyway (in the attribute form ``{.notest}`` or the older bare word),
    a ``{.slow}`` block that loses its flag, or an unknown fence language or flag accepted silently."""
    for fence in ("```bash {.notest}", "```bash { .notest }", "```bash notest"):
        (skipped,) = _page(tmp_path, f"{fence}\nexit 1\n```\n")
        assert skipped.language == "bash" and skipped.flags == ("notest",) and not skipped.runs, fence
        run_snippet(skipped)  # not run, so no failure
    (slow,) = _page(tmp_path, "```bash {.slow .notest}\nexit 1\n```\n")
    assert slow.flags == ("slow", "notest")
    with pytest.raises(SnippetError, match="unknown fence language"):
        _page(tmp_path, "```pyhton\nprint(1)\n```\n")
    for fence in ("```python notset", "```python {.notset}", "```python {notest}"):
        with pytest.raises(SnippetError, match="unknown fence flag"):
            _page(tmp_path, f"{fence}\nprint(1)\n```\n")


def test_a_bad_policy_block_fails(tmp_path: Path) -> None:
    """Catches a YAML policy example with a typo that the strict loader refuses."""
    (snippet,) = _page(tmp_path, "```yaml\nversion: 1\nname: x\ntools: {a: {kind: sinc}}\n```\n")
    with pytest.raises(SnippetError, match="not a valid policy"):
        run_snippet(snippet)


def test_runner_sees_nested_fences(tmp_path: Path) -> None:
    """Catches a lexer that misses a block inside a list item."""
    found = _page(tmp_path, "1. step\n\n   ```bash\n   .venv/bin/carbguard --help\n   ```\n")
    assert [(s.language, s.source.strip()) for s in found] == [("bash", ".venv/bin/carbguard --help")]
    assert ROOT.exists()
