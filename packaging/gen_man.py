"""Writes hostwire(1) and one hostwire-<command>(1) per subcommand from the argument parser
(argparse-manpage), into man/: `make man`. The pages are committed, so that installing needs no
documentation tool; tests/test_install_docs.py fails when they differ from what the parser gives.

usage: python packaging/gen_man.py OUTPUT_DIR"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from argparse_manpage.manpage import Manpage

import hostwire
from hostwire.cli import build_parser

# The date in each page's header: the release's, not the day of generation, so that the committed
# pages are what the generator gives on any day.
RELEASE_DATE = "2026-11-28"
MANUAL = "hostwire manual"
HAND_WRITTEN = ("hostwire-causes.7", "hostwire-run.5")


def subcommands(parser: argparse.ArgumentParser) -> argparse._SubParsersAction:
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))


def page(parser: argparse.ArgumentParser, name: str, summary: str, see_also: list[str], commands: str = "") -> str:
    manpage = Manpage(parser, {"date": RELEASE_DATE, "project_name": "hostwire", "version": hostwire.__version__,
                               "manual_title": MANUAL, "manual_section": 1, "description": summary})
    manpage.prog = name
    if commands:
        manpage.add_section("commands", "=", commands)
    manpage.add_section("see also", "=", ",\n".join(f".BR {ref}" for ref in see_also))
    return with_help_option(unfilled_epilog(str(manpage)))


def unfilled_epilog(text: str) -> str:
    """The epilog (examples, one per line, aligned comments) is shown as written, as --help shows
    it: groff would otherwise fill its lines into paragraphs."""
    lines = text.split("\n")
    if ".SH COMMENTS" not in lines:
        return text
    start = lines.index(".SH COMMENTS") + 1
    end = next((i for i in range(start, len(lines)) if lines[i].startswith(".SH")), len(lines))
    while end > start and not lines[end - 1].strip():
        end -= 1
    lines[start - 1] = ".SH EXAMPLES AND NOTES"
    return "\n".join([*lines[:start], ".nf", *lines[start:end], ".fi", *lines[end:]])


def top_parser(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """hostwire(1): the global options and COMMAND; the commands are listed in their own section
    (commands_section) and each has its own page."""
    top = argparse.ArgumentParser(prog=parser.prog, description=parser.description,
                                  formatter_class=argparse.RawDescriptionHelpFormatter,
                                  epilog="Each command's options are in its own page: man hostwire-COMMAND.")
    for action in parser._actions:
        if action.option_strings and action.dest != "help":
            top._add_action(action)
    top.add_argument("command", metavar="COMMAND", help="one of the commands below")
    top.add_argument("arguments", metavar="ARGS", nargs=argparse.REMAINDER, help="the command's arguments")
    return top


def commands_section(parser: argparse.ArgumentParser) -> str:
    entries = []
    for choice in subcommands(parser)._choices_actions:
        entries += [".TP", f"\\fB{choice.dest}\\fR", roff_text(choice.help or ""),
                    ".br", f"See \\fBhostwire\\-{choice.dest}\\fR(1)."]
    return "\n".join(entries)


def roff_text(text: str) -> str:
    return text.replace("\\", "\\e").replace("-", "\\-")


def with_help_option(text: str) -> str:
    """argparse-manpage leaves -h/--help out; every --help lists it, and so does every page."""
    entry = [".TP", "\\fB\\-h\\fR, \\fB\\-\\-help\\fR", "show the usage, the options and the examples, and exit"]
    lines = []
    for line in text.split("\n"):
        lines.append(line)
        if line.startswith(".SH OPTIONS"):
            lines += entry
    return "\n".join(lines)


def pages() -> dict[str, str]:
    """File name -> text of every generated page."""
    parser = build_parser()
    commands = subcommands(parser)
    names = [choice.dest for choice in commands._choices_actions]
    helps = {choice.dest: choice.help or "" for choice in commands._choices_actions}
    command_refs = [f"hostwire-{name} (1)" for name in names]
    out = {"hostwire.1": page(top_parser(parser), "hostwire", "record and explain a host's bursty traffic",
                              [*command_refs, "hostwire-causes (7)", "hostwire-run (5)"],
                              commands_section(parser))}
    for name in names:
        sub = commands.choices[name]
        out[f"hostwire-{name}.1"] = page(sub, f"hostwire-{name}", helps[name],
                                         ["hostwire (1)", "hostwire-causes (7)", "hostwire-run (5)"])
    return out


def main() -> int:
    if len(sys.argv) != 2:
        sys.stderr.write(__doc__.split("\n\n")[-1] + "\n")
        return 2
    target = Path(sys.argv[1])
    target.mkdir(parents=True, exist_ok=True)
    generated = pages()
    for stale in target.glob("hostwire*.1"):
        if stale.name not in generated:
            stale.unlink()
    for name, text in generated.items():
        (target / name).write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
