"""The manual pages and the completion scripts (issue: installed like the tools it sits beside):
committed as the generators give them from the argument parser, every long option of every
`--help` in its page, no warning from `man`, and completion in bash and zsh that offers the
commands, options, run directories and campaign files without starting Python."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hostwire.cli import build_parser

REPO = Path(__file__).resolve().parents[1]
MAN = REPO / "man"
COMPLETION = REPO / "completion"
LONG_OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def helps() -> dict[str, list[str]]:
    """page file name -> the --help texts it documents (a command's, and its kinds' for metrics)."""
    parser = build_parser()
    out = {"hostwire.1": [parser.format_help()]}
    for name, command in subparsers(parser).items():
        out[f"hostwire-{name}.1"] = [command.format_help(), *(s.format_help() for s in subparsers(command).values())]
    return out


def help_options(text: str) -> set[str]:
    """The long options a --help lists as its own (the lines that introduce an option)."""
    return {match for line in text.splitlines() if re.match(r"^\s{2}-", line)
            for match in LONG_OPTION.findall(line.split("  ")[1] if line.startswith("  ") else line)}


def rendered(page: Path) -> str:
    proc = subprocess.run(["man", "-l", str(page)], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "MANWIDTH": "200", "MANPAGER": "cat", "PAGER": "cat"})
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.replace("\u2010", "-")  # groff's hyphen in hyphenated words


def missing_options(page_text: str, help_texts: list[str]) -> set[str]:
    shown = set(LONG_OPTION.findall(page_text))
    return {option for text in help_texts for option in help_options(text)} - shown


def generated(script: str, tmp_path: Path) -> dict[str, str]:
    subprocess.run([sys.executable, str(REPO / "packaging" / script), str(tmp_path)], check=True, timeout=120)
    return {path.name: path.read_text() for path in sorted(tmp_path.iterdir())}


def test_committed_pages_are_what_the_parser_gives(tmp_path: Path) -> None:
    fresh = generated("gen_man.py", tmp_path)
    committed = {path.name: path.read_text() for path in sorted(MAN.glob("*.1"))}
    assert set(fresh) == set(committed), "run 'make man' and commit man/"
    stale = [name for name in fresh if fresh[name] != committed[name]]
    assert not stale, f"man pages differ from the parser: {stale}; run 'make man' and commit man/"
    assert set(fresh) == {"hostwire.1", *(f"hostwire-{name}.1" for name in subparsers(build_parser()))}


def test_committed_completion_is_what_the_parser_gives(tmp_path: Path) -> None:
    fresh = generated("gen_completion.py", tmp_path)
    committed = {path.name: path.read_text() for path in sorted(COMPLETION.iterdir())}
    assert fresh == committed, "run 'make completion' and commit completion/"


def test_every_long_option_of_every_help_is_in_its_page() -> None:
    texts = helps()
    counted = 0
    for name, help_texts in texts.items():
        page = rendered(MAN / name)
        assert not missing_options(page, help_texts), f"{name} lacks {sorted(missing_options(page, help_texts))}"
        counted += sum(len(help_options(text)) for text in help_texts)
    # the commands' own options (gaps alone has ten): the check sees them, it does not pass on none
    assert counted > 100 and "--min-gap" in help_options(texts["hostwire-gaps.1"][0])


def test_a_page_without_an_option_is_caught() -> None:
    page = rendered(MAN / "hostwire-gaps.1")
    cut = re.sub(r"--min-gap", "", page)
    assert missing_options(cut, helps()["hostwire-gaps.1"]) == {"--min-gap"}


def test_man_reports_nothing_for_any_page() -> None:
    pages = sorted(MAN.glob("hostwire*.[157]"))
    assert {p.suffix for p in pages} == {".1", ".5", ".7"}
    for page in pages:
        proc = subprocess.run(["man", "--warnings", "-l", str(page)], capture_output=True, text=True, timeout=60,
                              env={**os.environ, "MANPAGER": "cat", "PAGER": "cat"})
        assert proc.returncode == 0 and not proc.stderr, f"{page.name}: {proc.stderr}"


def test_hand_written_pages_cover_every_cause_and_the_run_directory() -> None:
    from hostwire.timeline.gap_tables import CAUSE_NAMES

    causes = rendered(MAN / "hostwire-causes.7")
    assert [name for name in CAUSE_NAMES.values() if f"{name} (" not in causes] == []
    run = rendered(MAN / "hostwire-run.5")
    for name in ("manifest.json", "raw/wire.pcap", "raw/sched.tsv", "raw/syscalls.tsv", "campaign.json"):
        assert name in run
