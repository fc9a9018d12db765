"""MkDocs hook: the CLI reference, rendered from the Typer app at build time.

``docs/reference/cli.md`` holds the marker ``<!-- scopeguard-cli -->``; the hook replaces it with one
section per command (its help, usage and options), read from ``scopeguard.cli.app``, so the page
cannot drift from the code.
"""

from __future__ import annotations

from typing import Any

MARKER = "<!-- scopeguard-cli -->"


def _root_command() -> Any:
    import typer.main

    from scopeguard.cli import app

    return typer.main.get_command(app)


def command_names() -> list[str]:
    """Every ``scopeguard`` subcommand, in the order the app registers them."""
    return list(_root_command().commands)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _param_row(param: Any, ctx: Any) -> str:
    record = param.get_help_record(ctx)
    names, text = record if record else (param.name, "")
    return f"| `{_cell(names)}` | {_cell(text)} |"


def render() -> str:
    """The Markdown of every command: help text, usage line and a table of arguments and options."""
    root = _root_command()
    root_ctx = root.context_class(root, info_name="scopeguard")
    out = [_cell(root.help or ""), "", _cell(root.epilog or ""), ""]
    for name, command in root.commands.items():
        ctx = command.context_class(command, info_name=name, parent=root_ctx)
        usage = " ".join(command.collect_usage_pieces(ctx))
        out += [f"## `scopeguard {name}`", "", (command.help or "").strip(), ""]
        out += ["```text", f"scopeguard {name} {usage}", "```", ""]
        params = [p for p in command.params if p.name != "help"]
        if params:
            out += ["| argument / option | what it does |", "|---|---|"]
            out += [_param_row(param, ctx) for param in params]
            out.append("")
    return "\n".join(out)


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    if MARKER in markdown:
        return markdown.replace(MARKER, render())
    return markdown
