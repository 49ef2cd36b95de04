"""The documentation as readers see it: the site built exactly as the README writes it, and every code fence
rendered as code, both in the built site and by pymdownx.superfences itself (without the site's hook)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import markdown
import pytest
import yaml

from tests.snippets import OUTPUT, PARSED, RUN, documents

ROOT = Path(__file__).resolve().parents[1]
#: Fences that still carry the runner's flags as bare words (```` ```bash notest ````), on pages other work
#: owns; superfences renders them as text, and only the site's hook (``docs/hooks.py``) makes them code.  Convert
#: each to the attribute form (```` ```bash {.notest} ````) and drop its entry here.
PENDING: dict[str, int] = {}
OLD_FLAGS = re.compile(r"^[ \t]*(?:`{3,}|~{3,})[\w+-]+(?:[ \t]+[\w-]+)+[ \t]*$", re.MULTILINE)
#: A fence's info string swallowed into an inline code span: what superfences makes of a fence it refuses.
SWALLOWED = re.compile(rf"<code>(?:{'|'.join(x for x in RUN + PARSED + OUTPUT if x)})(?:[ \t][^\n<]*)?\n")


def fences_shown_as_text(html: str) -> list[str]:
    """The places where rendered ``html`` shows a code fence as text instead of a code block: three backticks or
    tildes outside ``<pre>``/``<code>``, or a fence's language and lines swallowed into an inline ``<code>``."""
    outside_pre = re.sub(r"<pre\b.*?</pre>", "", html, flags=re.DOTALL)
    found = [m.group(0)[:80] for m in SWALLOWED.finditer(outside_pre)]
    outside_code = re.sub(r"<code\b.*?</code>", "", outside_pre, flags=re.DOTALL)
    found += [outside_code[max(m.start() - 20, 0) : m.end() + 40] for m in re.finditer(r"```|~~~", outside_code)]
    return found


def _extensions() -> tuple[list[Any], dict[str, Any]]:
    config: dict[str, Any] = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    names: list[Any] = []
    options: dict[str, Any] = {}
    for entry in config["markdown_extensions"]:
        name = entry if isinstance(entry, str) else next(iter(entry))
        names.append(name)
        if isinstance(entry, dict):
            options[name] = entry[name]
    return names, options


def render(text: str) -> str:
    """``text`` rendered by Python-Markdown with the site's extensions (mkdocs.yml), but without its hook."""
    names, options = _extensions()
    return markdown.markdown(text, extensions=names, extension_configs=options)


def test_the_check_sees_a_fence_rendered_as_text() -> None:
    """The check itself, on what superfences really makes of a fence with a bare second word (an inline code span
    holding the info string and the commands) and of a fence left as text; a fence rendered as code passes."""
    garbled = render("Install:\n\n```bash notest\npip install x\n```\n")
    assert "<pre" not in garbled and fences_shown_as_text(garbled), garbled
    assert fences_shown_as_text("<p>```bash\npip install x</p>")
    for fine in ("Install:\n\n```bash {.notest}\npip install x\n```\n", "```bash\nx\n```\n", "`bash` and `text`\n"):
        shown = render(fine)
        assert not fences_shown_as_text(shown), (fine, shown)


def test_every_fence_renders_as_code_without_the_hook() -> None:
    """Every page read as GitHub or any superfences renderer reads it (no hook): each fence is a code block.
    Catches a runner flag written as a bare word (```` ```bash notest ````, shown as raw text at the top of
    Getting started before) on any page but the listed ones still awaiting conversion, and a stale list."""
    old = Counter[str]()
    shown = {}
    for page in documents():
        name = page.relative_to(ROOT).as_posix()
        text = page.read_text(encoding="utf-8")
        old[name] = len(OLD_FLAGS.findall(text))
        if name not in PENDING:
            shown[name] = fences_shown_as_text(render(text))
    assert {k: v for k, v in old.items() if v} == PENDING, "convert to ```LANG {.flag} and update PENDING"
    assert not {k: v for k, v in shown.items() if v}


def _readme_docs_command() -> list[str]:
    found = re.findall(r"`\.venv/bin/(mkdocs build[^`]*)`", (ROOT / "README.md").read_text(encoding="utf-8"))
    assert len(set(found)) == 1, found
    return shlex.split(found[0])


def test_ci_builds_the_docs_as_the_readme_writes() -> None:
    """Catches CI building the site with other flags than the README's command (``--quiet`` hid a broken anchor)."""
    argv = _readme_docs_command()
    assert argv == ["mkdocs", "build", "--strict"], argv
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    (line,) = [x for x in ci.splitlines() if '/mkdocs"' in x]
    assert f'/mkdocs" {" ".join(argv[1:])} --site-dir "$WORK/site"' in line and "--quiet" not in line, line


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site built with the README's command (plus a temporary ``--site-dir``); fails on any warning."""
    where = tmp_path_factory.mktemp("docs") / "site"
    mkdocs = Path(sys.executable).parent / "mkdocs"
    done = subprocess.run(
        [str(mkdocs), *_readme_docs_command()[1:], "--site-dir", str(where)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return where


@pytest.mark.slow
def test_strict_build(site: Path) -> None:
    """Catches a broken link, anchor, nav entry, stale generated reference or API reference: the README's
    ``mkdocs build --strict`` must pass as written, without ``--quiet``."""
    assert (site / "cli" / "index.html").exists() and (site / "getting-started" / "index.html").exists()


@pytest.mark.slow
def test_no_built_page_shows_a_fence_as_text(site: Path) -> None:
    """Catches a page of the built site that shows a code fence as text (the install command at the top of
    Getting started did, when superfences refused its ```` ```bash notest ```` fence)."""
    shown = {
        str(p.relative_to(site)): fences_shown_as_text(p.read_text(encoding="utf-8")) for p in site.rglob("*.html")
    }
    assert len(shown) > 20
    assert not {k: v for k, v in shown.items() if v}
    install = (site / "getting-started" / "index.html").read_text(encoding="utf-8")
    assert re.search(r"<pre\b[^>]*>.*?pip.*?install", install, re.DOTALL)
