"""``carbguard policy validate|schema|init``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from guard.cli._common import add_out
from guard.errors import GuardError

TOOLS_HELP = "the agent's tools: langchain:MODULE:ATTR, openai:FILE.json, or mcp (the server command after --)"


def _read_tools(source: str, command: list[str]) -> tuple[list[Any], str]:
    """Tool schemas from ``langchain:module:attr``, ``openai:FILE`` or ``mcp`` (+ command); and a label."""
    from guard.policy import tools

    kind, _, rest = source.partition(":")
    if kind == "langchain":
        return tools.load_langchain_tools(rest), f"LangChain tools {rest}"
    if kind == "openai":
        return tools.read_openai_tools(rest), f"OpenAI tool schemas {rest}"
    if kind == "mcp" and not rest:
        import asyncio

        from guard.adapters.mcp import list_server_tools
        from guard.cli.mcp import server_command

        cmd = server_command(command)
        try:
            listed = asyncio.run(list_server_tools(cmd))
        except GuardError:
            raise
        except Exception as exc:  # noqa: BLE001 - a server that does not start is bad input: one line, exit 2
            raise GuardError(f"MCP server `{' '.join(cmd)}` did not answer tools/list: {_first_cause(exc)}") from None
        return listed, f"the tools/list of `{' '.join(cmd)}`"
    raise GuardError(f"tool source {source!r}: expected langchain:MODULE:ATTR, openai:FILE.json or mcp")


def _first_cause(exc: BaseException) -> str:
    """``Type: message`` of the first leaf of an exception (group), on one line."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:300]


def _split_rest(args: argparse.Namespace) -> None:
    """``--tools`` and the server command when they follow FILE (argparse stops at the first positional)."""
    rest: list[str] = list(args.rest)
    cut = rest.index("--") if "--" in rest else len(rest)
    args.command = rest[cut + 1 :]
    extra = argparse.ArgumentParser(prog="carbguard policy validate", add_help=False, exit_on_error=False)
    extra.add_argument("--tools")
    try:
        parsed, unknown = extra.parse_known_args(rest[:cut])
    except argparse.ArgumentError as exc:
        raise GuardError(f"policy validate: {exc}") from None
    if unknown:
        raise GuardError(f"policy validate: unrecognized arguments: {' '.join(unknown)}")
    if parsed.tools is not None:
        if args.tools is not None:
            raise GuardError("policy validate: --tools given twice")
        args.tools = parsed.tools


def _policy_validate(args: argparse.Namespace) -> int:
    import logging

    from guard.policy import load_policy
    from guard.policy.defaults import policy_warnings
    from guard.policy.tools import check_tools

    cut = args.rest.index("--") if "--" in args.rest else len(args.rest)
    if {"-h", "--help"} & set(args.rest[:cut]):  # after FILE, argparse leaves the help flag in REMAINDER
        args.print_help()
        return 0
    _split_rest(args)
    logging.getLogger("guard.policy").disabled = True  # printed below, once, instead of logged at load
    try:
        policy = load_policy(args.file)
    finally:
        logging.getLogger("guard.policy").disabled = False
    for warning in policy_warnings(policy):
        print(f"warning: {warning}", file=sys.stderr)
    if args.tools is None:
        if args.command:
            raise GuardError("a server command after -- needs --tools mcp")
        print(f"OK: policy {policy.name!r} with {len(policy.tools)} tools is valid")
        return 0
    schemas, label = _read_tools(args.tools, args.command)
    problems = check_tools(policy, schemas)
    for problem in problems:
        print(f"{args.file}: {problem}")
    if problems:
        print(f"FAILED: {len(problems)} mismatch(es) between policy {policy.name!r} and {label}")
        return 1
    print(f"OK: policy {policy.name!r} is valid and matches the {len(schemas)} tools of {label}")
    return 0


def _policy_schema(args: argparse.Namespace) -> int:
    from guard.policy import policy_schema_text

    print(policy_schema_text())
    return 0


def _policy_init(args: argparse.Namespace) -> int:
    from guard.policy import parse_policy
    from guard.policy.loader import read_yaml
    from guard.policy.skeleton import skeleton_yaml

    sources = [s for s in (args.from_langchain, args.from_openai_tools) if s] + (["mcp"] if args.from_mcp else [])
    if len(sources) != 1:
        raise GuardError("policy init needs exactly one of --from-langchain, --from-mcp, --from-openai-tools")
    if args.from_langchain:
        source = f"langchain:{args.from_langchain}"
    elif args.from_openai_tools:
        source = f"openai:{args.from_openai_tools}"
    else:
        source = "mcp"
    if args.command and source != "mcp":
        raise GuardError("a server command after -- needs --from-mcp")
    schemas, label = _read_tools(source, args.command)
    text = skeleton_yaml(schemas, args.name, label)  # already read back with the strict loader
    policy = parse_policy(read_yaml(text, Path("the written skeleton"))[0], source="the written skeleton")
    left_out = [s.name for s in schemas if s.name not in policy.tools]
    if args.out is None:
        sys.stdout.write(text)
    else:
        from guard.cli._common import write_output

        out = Path(args.out)
        if out.exists() and not args.force:
            raise GuardError(f"{out}: exists; pass --force to overwrite")
        write_output(out, text, [args.from_openai_tools], "--out")
        print(f"wrote {out}: {len(policy.tools)} tools; review every `# check:` line", file=sys.stderr)
    if left_out:
        names = ", ".join(json.dumps(n) for n in left_out)  # escaped: a tool name is server-controlled text
        print(
            f"warning: left out {len(left_out)} tool(s) whose role is unclear (their calls escalate): {names}",
            file=sys.stderr,
        )
    return 0


def register(sub: Any) -> None:
    policy = sub.add_parser(
        "policy", help="validate a policy file, print its JSON Schema, or write one from tool schemas"
    ).add_subparsers(dest="action", required=True)
    validate = policy.add_parser("validate", help="report every error of a policy file with its location")
    validate.add_argument("file", help="the policy file (YAML, TOML or JSON)")
    validate.add_argument("--tools", help="cross-check against " + TOOLS_HELP)
    validate.add_argument("rest", nargs=argparse.REMAINDER, help="[--tools SOURCE] [-- server command (--tools mcp)]")
    validate.set_defaults(func=_policy_validate, print_help=validate.print_help)
    policy.add_parser("schema", help="print the JSON Schema of policy files").set_defaults(func=_policy_schema)
    init = policy.add_parser("init", help="write a policy skeleton from the agent's tool schemas")
    init.add_argument("--from-langchain", metavar="MODULE:ATTR", help="a LangChain tool or list of tools")
    init.add_argument("--from-mcp", action="store_true", help="the tools/list of the MCP server command after --")
    init.add_argument("--from-openai-tools", metavar="FILE.json", help="OpenAI function-tool schemas")
    init.add_argument("--name", default="my-agent", help="policy name (default: my-agent)")
    add_out(init, "file to write (default: stdout)")
    init.add_argument("--force", action="store_true", help="overwrite --out if it exists")
    init.add_argument("command", nargs="*", help="with --from-mcp: -- then the server command")
    init.set_defaults(func=_policy_init)
