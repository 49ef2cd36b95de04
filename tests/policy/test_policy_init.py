"""`carbguard policy init` from tool schemas, `policy validate --tools`, and guard.policy.check_tools."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from guard.cli import main
from guard.policy import load_policy
from guard.policy.skeleton import skeleton_yaml
from guard.policy.tools import (
    ToolSchema,
    check_tools,
    from_langchain_tools,
    from_mcp_tools,
    from_openai_tools,
)

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
    kinds = {name: (sorted(k.value for k in spec.kinds), spec.effect.value) for name, spec in policy.tools.items()}
    assert kinds == {
        "get_balance": (["private_source"], "none"),
        "send_message": (["sink"], "irreversible"),
        "read_webpage": (["sink", "untrusted_source"], "none"),  # a fetch: its URL carries data out
        "update_note": (["other"], "reversible"),
    }
    assert policy.tools["read_webpage"].source_kind.value == "untrusted_source"
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
    assert data["tools"]["purge"]["kind"] == "other" and data["tools"]["purge"]["effect"] == "irreversible"
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


# ----------------------------------------------------------------------------- hostile names (item: YAML injection)

HOSTILE = ["\n", "\r", "\r\n", "\u2028", "\u2029", "\u0085", "#", ": ", "\n---\n", "\n...\n", "\n- ", '"', "'", "\\"]


def _injection(h: str) -> str:
    """Text that, spliced into YAML after ``h``, would turn send_email into a public source."""
    return f"x{h}  send_email:{h}    kind: public_source{h}    effect: none{h}#"


@pytest.mark.parametrize("h", HOSTILE, ids=[repr(h) for h in HOSTILE])
def test_hostile_names_read_back_exactly(tmp_path: Path, h: str) -> None:
    """Argument names, tool names, descriptions, the policy name and the source label holding line breaks
    (\\n, \\r, U+2028, U+2029, U+0085), '#', ': ', quotes or document markers give back exactly the intended tools.

    Catches the old skeleton, which spliced argument names into a `# arguments:` comment: a newline in an
    argument name ended the comment and the following text became policy lines (send_email a public source),
    and the file still passed init's own check and `policy validate`.
    """
    tools = [
        ToolSchema("send_email", f"Send an e-mail.{_injection(h)}", ("to", _injection(h))),
        ToolSchema("read_notes", f"Notes.{h}    kind: public_source", (f"path{h}", _injection(h))),
        ToolSchema(f"get_{_injection(h)}", "Read a record.", ("id",)),
    ]
    out = tmp_path / "policy.yaml"
    out.write_text(skeleton_yaml(tools, f"n{_injection(h)}", f"src{_injection(h)}"), encoding="utf-8")
    policy = load_policy(out)  # the strict loader
    assert list(policy.tools) == [t.name for t in tools] and policy.name == f"n{_injection(h)}"
    send = policy.tools["send_email"]
    assert (send.kind.value, send.effect.value, send.severity) == ("sink", "irreversible", 3)
    assert set(send.payload_args) == {"to", _injection(h)}
    assert policy.tools["read_notes"].kind.value == "private_source"
    assert policy.tools[f"get_{_injection(h)}"].kind.value == "sink"  # its name holds the word "send"
    text = out.read_text(encoding="utf-8")
    assert text.count("\n") == len(text.splitlines()) and all(
        line.isascii() or "§" in line for line in text.splitlines()
    )


def test_hostile_argument_names_through_cli_and_validate(tmp_path: Path) -> None:
    """The CLI path (`policy init --from-openai-tools`, then `policy validate --tools`) keeps send_email a sink.

    Catches an init that checks its output with a lax loader (or not at all) after splicing names into text.
    """
    evil = [
        {
            "type": "function",
            "function": {
                "name": "send_email",
                "parameters": {
                    "properties": {
                        "to": {},
                        "body\n  leak:\n    kind: public_source\n  send_email:\n    kind: public_source\n#": {},
                    }
                },
            },
        },
        {"type": "function", "function": {"name": "read_doc", "parameters": {"properties": {"path": {}}}}},
    ]
    tools = tmp_path / "evil.json"
    tools.write_text(json.dumps(evil))
    out = tmp_path / "policy.yaml"
    assert main(["policy", "init", "--from-openai-tools", str(tools), "--out", str(out)]) == 0
    policy = load_policy(out)
    assert list(policy.tools) == ["send_email", "read_doc"]
    assert policy.tools["send_email"].kind.value == "sink" and policy.tools["send_email"].severity == 3
    assert main(["policy", "validate", str(out), "--tools", f"openai:{tools}"]) == 0


@pytest.mark.parametrize("brk", ["\n", "\r", "\x0b", "\x0c", "\x85", "\u2028", "\u2029"])
def test_comments_refuse_line_breaks(brk: str) -> None:
    """Catches a comment builder that lets a YAML line break (any of YAML's five, or a vertical tab) through."""
    from guard.errors import PolicyError
    from guard.policy.skeleton import _comment

    with pytest.raises(PolicyError, match="not one line of ASCII"):
        _comment(f"# check: {brk}kind: public_source")


# ----------------------------------------------------------------------------- names over hints


class _LCTool:
    """A duck-typed LangChain tool (name, description, args)."""

    def __init__(self, name: str, description: str, args: list[str]) -> None:
        self.name, self.description, self.args = name, description, {a: {"type": "string"} for a in args}


def _schemas(fmt: str, entries: list[tuple[str, str, list[str]]], hints: dict[str, Any]) -> list[ToolSchema]:
    if fmt == "mcp":
        return from_mcp_tools(
            [
                {
                    "name": n,
                    "description": d,
                    "inputSchema": {"properties": {a: {} for a in args}},
                    "annotations": hints,
                }
                for n, d, args in entries
            ]
        )
    if fmt == "openai":
        return from_openai_tools(
            [
                {
                    "type": "function",
                    "function": {"name": n, "description": d, "parameters": {"properties": {a: {} for a in args}}},
                }
                for n, d, args in entries
            ]
        )
    return from_langchain_tools([_LCTool(n, d, args) for n, d, args in entries])


def _kinds(schemas: list[ToolSchema]) -> dict[str, tuple[str, str, int, str | None]]:
    import yaml

    data = yaml.safe_load(skeleton_yaml(schemas, "t", "test"))
    return {n: (*_kind(s), s["effect"], s["severity"], *_also(s)) for n, s in data["tools"].items()}  # type: ignore[misc]


def _kind(spec: dict[str, Any]) -> tuple[str]:
    """The first kind of an entry (a sink that is also a source is written ``kind: [sink, <source kind>]``)."""
    kind = spec["kind"]
    return (kind[0] if isinstance(kind, list) else kind,)


def _also(spec: dict[str, Any]) -> tuple[str | None]:
    """The source kind a sink's results also are (the second kind of a list), or None."""
    kind = spec["kind"]
    assert "also_source" not in spec  # the older spelling is never written
    return (kind[1] if isinstance(kind, list) and len(kind) == 2 else None,)


SAFE_HINTS = {"readOnlyHint": True, "destructiveHint": False, "openWorldHint": False, "idempotentHint": True}


@pytest.mark.parametrize("fmt", ["mcp", "openai", "langchain"])
def test_server_hints_never_make_a_send_or_delete_look_safe(fmt: str) -> None:
    """send_email / uploadFile / wire-money with readOnlyHint=true, destructiveHint=false stay irreversible sinks,
    and delete_file an irreversible change (kind other, as docs/ledger.md models deletes), in every schema format.

    Catches the old guesser, which believed readOnlyHint over the name: send_email became an untrusted source and
    delete_file a private source (so both ran unchecked on the score alone).
    """
    entries = [
        ("send_email", "Send an e-mail.", ["to", "body"]),
        ("delete_file", "Delete a file.", ["path"]),
        ("uploadFile", "", ["path"]),
        ("wire-money", "", ["iban", "amount"]),
        ("frobnicate", "Sends a fax to the given number.", ["number", "text"]),
    ]
    kinds = _kinds(_schemas(fmt, entries, SAFE_HINTS))
    assert kinds == {n: ("other" if n == "delete_file" else "sink", "irreversible", 3, None) for n, _, _ in entries}


def test_hints_add_caution_to_reads() -> None:
    """readOnlyHint=false takes a read out of the plain sources, destructiveHint=true makes it a sink, and
    openWorldHint=true makes a source untrusted; the source kind is kept as also_source.

    Catches hints being ignored (a read that says it is not read-only executing as a plain source).
    """

    def one(name: str, hints: dict[str, Any]) -> tuple[str, str, int, str | None]:
        return _kinds(_schemas("mcp", [(name, "", ["id"])], hints))[name]

    assert one("get_record", {"readOnlyHint": False}) == ("sink", "reversible", 2, "private_source")
    assert one("get_record", {"destructiveHint": True}) == ("sink", "irreversible", 3, None)
    # a record belongs to someone (private); the open-world hint adds that third parties write it
    assert one("get_record", {"openWorldHint": True}) == ("private_source", "none", 0, "untrusted_source")
    assert one("get_record", {"readOnlyHint": True}) == ("private_source", "none", 0, None)


@pytest.mark.parametrize("fmt", ["mcp", "openai", "langchain"])
def test_a_fetch_with_a_url_is_source_and_sink(fmt: str) -> None:
    """get_webpage(url) is a sink (its URL carries data out, so SafeCommit certifies it) whose results are an
    untrusted source, with a read-only server hint or not.

    Catches a guesser that files a URL fetch as a plain untrusted source: `get_webpage(url=...?d=<secret>)`
    then executes uncertified on the score alone.
    """
    import yaml

    from guard.policy import parse_policy

    schemas = _schemas(fmt, [("get_webpage", "Fetch a web page.", ["url"]), ("search_news", "", ["query"])], SAFE_HINTS)
    policy = parse_policy(yaml.safe_load(skeleton_yaml(schemas, "t", "test")))
    page = policy.tools["get_webpage"]
    assert (page.is_sink, page.source_kind.value, page.payload_args) == (True, "untrusted_source", ("url",))
    assert page.certified and "url" in page.identifier_args
    assert policy.tools["search_news"].kind.value == "untrusted_source"


def test_matching_is_on_words_not_substrings() -> None:
    """Name words are split at snake, camel and kebab boundaries and matched whole.

    Catches substring matching: getPaymentStatus ('pay'), read_timeline ('time': public), get_postcode ('post')
    would change kind, while sendEmail / delete-file must still be sinks; a description saying "public" must
    not make a read public.
    """
    entries = [
        ("getPaymentStatus", "", ["id"]),
        ("read_timeline", "", []),
        ("get_postcode", "", ["address"]),
        ("sendEmail", "", ["to"]),
        ("delete-file", "", ["path"]),
        ("list_shared_files", "Files shared with the user.", []),
        ("get_notes", "Public notes.", []),
    ]
    kinds = {n: k[0] for n, k in _kinds(_schemas("openai", entries, {})).items()}
    assert kinds == {
        "getPaymentStatus": "private_source",
        "read_timeline": "private_source",
        "get_postcode": "private_source",
        "sendEmail": "sink",
        "delete-file": "other",  # a delete: irreversible, but it sends nothing out (docs/ledger.md)
        "list_shared_files": "private_source",
        "get_notes": "private_source",  # a description never makes a read public (less cautious)
    }


def test_unclear_tools_are_left_out_and_escalate_until_reviewed(tmp_path: Path) -> None:
    """A tool whose role is unclear (no verb, or a name that both reads and writes) is not written under tools:
    so its calls escalate (on_unknown) even with an infinite threshold, and a `# check:` comment names it.

    Catches the old fallback, which wrote unclear tools as a reversible sink of severity 2: with no SafeCommit
    configured such a call executed on the score alone before anyone reviewed it.
    """
    import math

    from guard.decision import Reason, Verdict
    from guard.runtime import Guard

    schemas = from_openai_tools(
        [
            {"type": "function", "function": {"name": n, "parameters": {"properties": {"x": {}}}}}
            for n in ("frobnicate", "get_or_create_user", "read_doc")
        ]
    )
    out = tmp_path / "p.yaml"
    out.write_text(skeleton_yaml(schemas, "t", "test"))
    policy = load_policy(out)
    assert list(policy.tools) == ["read_doc"] and policy.on_unknown.value == "escalate"
    text = out.read_text()
    assert all(any(n in line and "# " in line for line in text.splitlines()) for n in ("frobnicate", "get_or_create"))
    session = Guard(policy, threshold=math.inf).session("s")
    for i, name in enumerate(("frobnicate", "get_or_create_user")):
        decision = session.decide(name, {"x": "1"}, f"c{i}")
        assert (decision.verdict, decision.reason) == (Verdict.ESCALATE, Reason.UNKNOWN_TOOL)
    assert session.decide("read_doc", {"x": "1"}, "c9").verdict is Verdict.EXECUTE
    from guard.errors import PolicyError

    with pytest.raises(PolicyError, match="no tool's role is clear"):
        skeleton_yaml(schemas[:2], "t", "test")


def test_init_from_langchain_finds_a_module_in_the_current_folder(tmp_path: Path) -> None:
    """Catches the installed ``carbguard`` script not finding ``module:attr`` in the folder it runs in."""
    import os
    import subprocess
    import sys

    pytest.importorskip("langchain_core")
    (tmp_path / "cwd_tools_mod.py").write_text(
        "from langchain_core.tools import tool\n\n"
        "@tool\ndef search_docs(query: str) -> str:\n    '''Search the public documentation.'''\n    return query\n\n"
        "TOOLS = [search_docs]\n"
    )
    script = Path(sys.executable).with_name("carbguard")
    done = subprocess.run(
        [str(script), "policy", "init", "--from-langchain", "cwd_tools_mod:TOOLS", "-o", "p.yaml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )
    assert done.returncode == 0, done.stderr
    assert list(load_policy(tmp_path / "p.yaml").tools) == ["search_docs"]


# ----------------------------------------------------------------------------- URL fetches, deletes, nothing dropped


@pytest.mark.parametrize("fmt", ["mcp", "openai", "langchain"])
@pytest.mark.parametrize("name", ["fetch_url", "http_get", "browse", "open_page", "web_fetch", "download", "webFetch"])
def test_every_url_fetch_is_written_as_a_sink_that_is_also_a_source(fmt: str, name: str) -> None:
    """A tool that fetches a URL is written under tools: as a sink (its URL carries data out) whose results are a
    source (``also_source``), as docs/integrations/mcp.md says, with the URL as a payload argument.

    Catches the old guesser, which only read a verb as the name's first word: ``open_page(url)`` and
    ``web_fetch(url)`` were left out of the skeleton as "unclear" instead of classified as a fetch.
    """
    import yaml

    from guard.policy import parse_policy

    schemas = _schemas(fmt, [(name, "", ["url"])], {})
    policy = parse_policy(yaml.safe_load(skeleton_yaml(schemas, "t", "test")))
    assert list(policy.tools) == [name]
    spec = policy.tools[name]
    assert spec.is_sink and spec.source_kinds and spec.payload_args == ("url",)
    assert spec.also_source is None  # written in the list spelling, kind: [sink, <source kind>]
    assert spec.certified


def test_a_fetch_named_for_the_web_without_an_argument_schema_is_still_a_sink() -> None:
    """Catches a web fetch with no argument schema (so no visible URL argument) written as a plain source."""
    import yaml

    data = yaml.safe_load(skeleton_yaml([ToolSchema("web_fetch", "", None)], "t", "test"))
    assert data["tools"]["web_fetch"]["kind"] == ["sink", "untrusted_source"]


@pytest.mark.parametrize("fmt", ["mcp", "openai", "langchain"])
def test_deletes_are_irreversible_other_as_the_ledger_models_them(fmt: str) -> None:
    """delete_file / remove_* / drop_* / rm (and a tool whose description says it deletes) are ``kind: other``
    with an irreversible effect, the shape of docs/ledger.md's ``destructive`` example, with the object
    they act on as an identifier argument; a delete that also sends stays a sink.

    Catches the old guesser, which wrote deletes as sinks: the ledger's default ``attacker_directed`` and
    ``privacy_flow`` rules then treated a deleted file's path as a recipient of data.
    """
    entries = [
        ("delete_file", "", ["path"]),
        ("remove_user", "", ["user_id"]),
        ("drop_table", "", ["table"]),
        ("rm", "", ["path"]),
        ("purgeCache", "", []),
        ("frobnicate", "Deletes the given record.", ["record_id"]),
        ("delete_and_send_report", "", ["to"]),
    ]
    import yaml

    from guard.policy import parse_policy

    schemas = _schemas(fmt, entries, {})
    policy = parse_policy(yaml.safe_load(skeleton_yaml(schemas, "t", "test")))
    kinds = {n: (s.kind.value, s.effect.value, s.severity) for n, s in policy.tools.items()}
    deletes = [n for n, _, _ in entries[:-1]]
    assert kinds == {
        **dict.fromkeys(deletes, ("other", "irreversible", 3)),
        "delete_and_send_report": ("sink", "irreversible", 3),
    }
    assert policy.tools["delete_file"].identifier_args == ("path",) and policy.tools["delete_file"].payload_args == ()
    assert all(policy.tools[n].certified for n in deletes)  # an irreversible effect: SafeCommit certifies it


def test_every_tool_of_the_source_appears_in_the_skeleton(tmp_path: Path) -> None:
    """Each tool of the source is either under tools: or, when its role is unclear, in the `# check:` block with
    a conservative entry (an irreversible sink of severity 3 whose results are untrusted) that loads as a valid
    tool spec; nothing is dropped silently.

    Catches a skeleton that drops an unclear tool without a trace (or suggests a non-conservative entry for it).
    """
    import yaml

    from guard.policy import ToolSpec

    names = ["frobnicate", "get_or_create_user", "open_page", "read_doc", "zap"]
    schemas = from_openai_tools(
        [{"type": "function", "function": {"name": n, "parameters": {"properties": {"x": {}}}}} for n in names]
    )
    text = skeleton_yaml(schemas, "t", "test")
    written = list(yaml.safe_load(text)["tools"])
    block = [line.removeprefix("#   ") for line in text.splitlines() if line.startswith("#   {")]
    suggested = {k: v for line in block for k, v in yaml.safe_load(line.rsplit("}  (", 1)[0] + "}").items()}
    assert sorted(written + list(suggested)) == sorted(names) and not set(written) & set(suggested)
    assert set(suggested) == {"frobnicate", "get_or_create_user", "zap"}
    for spec in suggested.values():
        tool = ToolSpec.model_validate(spec)
        assert (tool.is_sink, tool.effect.value, tool.severity) == (True, "irreversible", 3)
        assert tool.source_kind.value == "untrusted_source"


# ----------------------------------------------------------------------------- records that belong to someone

TOOLSETS = Path(__file__).resolve().parents[2] / "examples" / "policy_init" / "toolsets.json"


@pytest.mark.parametrize(
    ("toolset", "tool", "kinds", "effect", "identifiers"),
    [
        ("e-commerce support", "crm_lookup", ["private_source"], "none", ["email"]),
        ("e-commerce support", "get_order", ["private_source"], "none", ["order_id"]),
        ("e-commerce support", "read_ticket", ["private_source", "untrusted_source"], "none", ["ticket_id"]),
        ("e-commerce support", "fetch_url", ["sink", "untrusted_source"], "none", ["url"]),
        ("e-commerce support", "issue_refund", ["sink"], "irreversible", ["order_id"]),
        ("e-commerce support", "change_address", ["other"], "reversible", ["order_id"]),
        ("e-commerce support", "send_email", ["sink"], "irreversible", ["address"]),
        ("clinic front desk", "read_patient_messages", ["private_source", "untrusted_source"], "none", ["patient_id"]),
        ("clinic front desk", "charge_card", ["sink"], "irreversible", ["patient_id"]),
        ("finance back office", "vendor_search", ["private_source"], "none", []),
        ("finance back office", "pay_invoice", ["sink"], "irreversible", ["iban"]),
    ],
)
def test_records_tickets_and_refunds_are_guessed_as_they_are(
    toolset: str, tool: str, kinds: list[str], effect: str, identifiers: list[str]
) -> None:
    """Catches the guesses a support-desk deployment found wrong: a CRM lookup read as untrusted because its
    description names an e-mail field, a customer's ticket not private, a refund or charge left out, a fetch
    written in the older ``also_source`` spelling, and a postal ``address`` taken for a destination (an
    identifier) on a tool that sends nothing; while ``address`` on a mail tool stays a destination."""
    import yaml

    tools = json.loads(TOOLSETS.read_text(encoding="utf-8"))[toolset]
    written = yaml.safe_load(skeleton_yaml(from_openai_tools(tools), "t", "test"))["tools"]
    spec = written[tool]
    assert ([spec["kind"]] if isinstance(spec["kind"], str) else spec["kind"]) == kinds
    assert spec["effect"] == effect and spec.get("identifier_args", []) == identifiers
    assert "also_source" not in spec
