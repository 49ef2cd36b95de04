"""`carbguard policy init` from tool schemas, `policy validate --tools`, and guard.policy.check_tools."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from guard.cli import main
from guard.policy import load_policy
from guard.policy.tools import ToolSchema, check_tools, from_mcp_tools, from_openai_tools, skeleton_yaml

ROOT = Path(__file__).resolve().parents[2]
OPENAI_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_balance",
            "description": "Balance of the user's account.",
            "parameters": {"type": "object", "properties": {"account_id": {"type": "string"}}},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "send_message",
            "description": "Send a chat message.",
            "parameters": {
                "type": "object",
                "properties": {"recipient": {"type": "string"}, "text": {"type": "string"}},
            },
        },
    },
    {
        "type": "function",
        "name": "read_webpage",
        "description": "Fetch a web page.",
        "parameters": {"type": "object", "properties": {"url": {"type": "string"}}},
    },
    {
        "type": "function",
        "function": {
            "name": "update_note",
            "parameters": {"type": "object", "properties": {"note_id": {}, "content": {}}},
        },
    },
]
POLICY = """\
version: 1
name: chat
tools:
  send_message:
    kind: sink
    effect: irreversible
    payload_args: [message]
    identifier_args: [recipient]
  archive:
    kind: other
"""


def _tools_file(tmp_path: Path) -> Path:
    path = tmp_path / "tools.json"
    path.write_text(json.dumps(OPENAI_TOOLS))
    return path


def test_check_tools_finds_wrong_argument_names_and_missing_tools() -> None:
    """Catches the old behaviour: payload_args: [message] on a tool whose argument is `text` passed."""
    import yaml

    from guard.policy import parse_policy

    policy = parse_policy(yaml.safe_load(POLICY))
    schemas = from_openai_tools(OPENAI_TOOLS[:2])
    assert check_tools(policy, schemas) == [
        "agent tool 'get_balance' is not in policy 'chat': calls to it are refused (escalate)",
        "tools.send_message.payload_args: 'message' is not an argument of send_message"
        " (its arguments: recipient, text)",
        "policy tool 'archive' is not among the agent's tools",
    ]
    assert check_tools(policy, schemas, policy_extra=False)[-1].startswith("tools.send_message")


def test_skeleton_lists_every_tool_with_checked_guesses_and_validates(tmp_path: Path) -> None:
    """Catches a skeleton that drops a tool, guesses without a `# check:` mark, or does not load."""
    out = tmp_path / "policy.yaml"
    assert main(["policy", "init", "--from-openai-tools", str(_tools_file(tmp_path)), "--out", str(out)]) == 0
    policy = load_policy(out)
    assert list(policy.tools) == ["get_balance", "send_message", "read_webpage", "update_note"]
    kinds = {name: (spec.kind.value, spec.effect.value) for name, spec in policy.tools.items()}
    assert kinds == {
        "get_balance": ("private_source", "none"),
        "send_message": ("sink", "irreversible"),
        "read_webpage": ("untrusted_source", "none"),
        "update_note": ("other", "reversible"),
    }
    send = policy.tools["send_message"]
    assert set(send.payload_args) == {"recipient", "text"} and send.identifier_args == ("recipient",)
    guesses = [line for line in out.read_text().splitlines() if line.strip().startswith(("kind:", "effect:"))]
    assert len(guesses) == 8 and all("# check:" in line for line in guesses)
    assert policy.on_unknown.value == "escalate" and policy.audit.raw_args == ()
    assert check_tools(policy, from_openai_tools(OPENAI_TOOLS)) == []


def test_validate_tools_cli_reports_mismatches(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Catches `policy validate --tools` saying OK for a policy whose payload argument does not exist."""
    policy = tmp_path / "chat.yaml"
    policy.write_text(POLICY)
    tools = _tools_file(tmp_path)
    assert main(["policy", "validate", str(policy)]) == 0  # the schema alone cannot see it
    assert main(["policy", "validate", str(policy), "--tools", f"openai:{tools}"]) == 1
    out = capsys.readouterr().out
    assert "'message' is not an argument of send_message" in out and "FAILED: 5 mismatch(es)" in out
    fixed = tmp_path / "fixed.yaml"
    assert main(["policy", "init", "--from-openai-tools", str(tools), "--out", str(fixed)]) == 0
    assert main(["policy", "validate", str(fixed), "--tools", f"openai:{tools}"]) == 0


def test_init_from_langchain_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Catches a LangChain reader that loses argument names or refuses a single tool."""
    pytest.importorskip("langchain_core")
    (tmp_path / "lc_tools_mod.py").write_text(
        "from langchain_core.tools import tool\n\n"
        "@tool\ndef delete_file(path: str) -> str:\n    '''Delete a file.'''\n    return path\n\n"
        "@tool\ndef search_docs(query: str, limit: int) -> str:\n"
        "    '''Search the public documentation.'''\n    return query\n\n"
        "TOOLS = [delete_file, search_docs]\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    for attr, names in (("TOOLS", ["delete_file", "search_docs"]), ("delete_file", ["delete_file"])):
        out = tmp_path / f"{attr}.yaml"
        assert main(["policy", "init", "--from-langchain", f"lc_tools_mod:{attr}", "--out", str(out)]) == 0
        policy = load_policy(out)
        assert list(policy.tools) == names
        assert policy.tools["delete_file"].effect.value == "irreversible"
    assert load_policy(tmp_path / "TOOLS.yaml").tools["search_docs"].kind.value == "public_source"
    assert main(["policy", "validate", str(tmp_path / "TOOLS.yaml"), "--tools", "langchain:lc_tools_mod:TOOLS"]) == 0


def test_init_and_validate_from_mcp_server(tmp_path: Path) -> None:
    """Catches `--from-mcp` not reading the server's tools/list, or validate --tools mcp not cross-checking."""
    pytest.importorskip("mcp")
    out = tmp_path / "mcp.yaml"
    server = ["--", sys.executable, str(ROOT / "tests" / "fixtures" / "mcp_server.py")]
    assert main(["policy", "init", "--from-mcp", "--out", str(out), *server]) == 0
    assert list(load_policy(out).tools) == ["read_record", "read_inbox", "send_email", "delete_file"]
    assert main(["policy", "validate", str(out), "--tools", "mcp", *server]) == 0
    partial = tmp_path / "partial.yaml"
    partial.write_text(
        (ROOT / "tests" / "fixtures" / "mcp_policy.yaml").read_text().replace("[subject, body]", "[text]")
    )
    assert main(["policy", "validate", str(partial), "--tools", "mcp", *server]) == 1


def test_mcp_hints_drive_the_guess() -> None:
    """Catches a guesser that ignores MCP's readOnlyHint / destructiveHint / openWorldHint annotations."""
    tools = from_mcp_tools(
        [
            {"name": "purge", "inputSchema": {"properties": {"target": {}}}, "annotations": {"destructiveHint": True}},
            {
                "name": "lookup",
                "inputSchema": {"properties": {}},
                "annotations": {"readOnlyHint": True, "openWorldHint": True},
            },
        ]
    )
    import yaml

    data = yaml.safe_load(skeleton_yaml(tools, "hints", "test"))
    assert data["tools"]["purge"]["kind"] == "sink" and data["tools"]["purge"]["effect"] == "irreversible"
    assert data["tools"]["lookup"]["kind"] == "untrusted_source"


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["policy", "init"], "exactly one of"),
        (["policy", "init", "--from-langchain", "no_colon"], "expected module:attr"),
        (["policy", "init", "--from-openai-tools", "/nonexistent.json"], "cannot read tool schemas"),
        (["policy", "init", "--from-mcp"], "no MCP server command"),
    ],
)
def test_bad_input_is_one_line_exit_2(argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Catches a traceback or a silent skeleton on bad input."""
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and "\n" not in err


def test_schema_without_arguments_is_not_cross_checked() -> None:
    """Catches a check that calls every declared argument wrong when the tool has no argument schema."""
    import yaml

    from guard.policy import parse_policy

    policy = parse_policy(yaml.safe_load(POLICY))
    assert check_tools(policy, [ToolSchema("send_message", args=None)], policy_extra=False) == []
