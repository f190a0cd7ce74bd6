"""Writes the bash and zsh completion of `hostwire` from its argument parser (shtab), into
completion/: `make completion`. Generated ahead of time and committed, so that completing never
starts Python; tests/test_install_docs.py fails when they differ from what the parser gives.

Arguments complete as what they name: run directories (folders holding a manifest.json),
campaign directories (campaign.json), campaign files (*.toml), captures, and any folder leading to
one of them (up to two levels down, as runs/<campaign>/<run>).

usage: python packaging/gen_completion.py OUTPUT_DIR"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import shtab

from hostwire.cli import build_parser

# Pure bash (builtins and [[ ]] only): no program is started while completing. A name holding
# "_dir" or "_file" makes shtab turn on `compopt -o filenames` (a slash after a folder).
BASH_PREAMBLE = r'''
# folders under $1 that hold one of the marker files $2..., or lead to one up to two levels down
_hostwire_dirs_holding() {
  local word=$1 dir marker; shift
  while IFS= read -r dir; do
    for marker in "$@"; do
      if [[ -f $dir/$marker ]] || compgen -G "$dir/*/$marker" >/dev/null ||
         compgen -G "$dir/*/*/$marker" >/dev/null; then
        printf '%s\n' "$dir"
        break
      fi
    done
  done < <(compgen -d -- "$word")
}
_shtab_hostwire_run_dir() { _hostwire_dirs_holding "$1" manifest.json; }
_shtab_hostwire_campaign_dir() { _hostwire_dirs_holding "$1" campaign.json; }
_shtab_hostwire_result_dir() { _hostwire_dirs_holding "$1" campaign.json manifest.json; }
_shtab_hostwire_toml_file() { compgen -f -X '!*.toml' -- "$1"; compgen -d -- "$1"; }
_hostwire_captures() { compgen -f -X '!*.pcap' -- "$1"; compgen -f -X '!*.pcapng' -- "$1"; }
_shtab_hostwire_capture_or_run_file() { _hostwire_captures "$1"; _hostwire_dirs_holding "$1" manifest.json; }
_shtab_hostwire_capture_file() { _hostwire_captures "$1"; compgen -d -- "$1"; }
'''

ZSH_PREAMBLE = r'''
# folders that hold one of the marker files, or lead to one up to two levels down
_hostwire_dirs_holding() {
  local -a found below
  local dir marker
  for dir in ${~PREFIX}*(N-/); do
    for marker in "$@"; do
      below=($dir/$marker(N.) $dir/*/$marker(N.[1]) $dir/*/*/$marker(N.[1]))
      if (( $#below )); then
        found+=("$dir")
        break
      fi
    done
  done
  compadd -S / -q -- $found
}
_hostwire_run_dirs() { _hostwire_dirs_holding manifest.json }
_hostwire_campaign_dirs() { _hostwire_dirs_holding campaign.json }
_hostwire_result_dirs() { _hostwire_dirs_holding campaign.json manifest.json }
_hostwire_capture_or_run() { _alternative 'runs:run directory:_hostwire_run_dirs' 'captures:capture:_files -g "*.(pcap|pcapng)"' }
'''

RUN_DIR = {"bash": "_shtab_hostwire_run_dir", "zsh": "_hostwire_run_dirs"}
CAMPAIGN_DIR = {"bash": "_shtab_hostwire_campaign_dir", "zsh": "_hostwire_campaign_dirs"}
RESULT_DIR = {"bash": "_shtab_hostwire_result_dir", "zsh": "_hostwire_result_dirs"}
TOML_FILE = {"bash": "_shtab_hostwire_toml_file", "zsh": "_files -g '*.toml'"}
CAPTURE_FILE = {"bash": "_shtab_hostwire_capture_file", "zsh": "_files -g '*.(pcap|pcapng)'"}
CAPTURE_OR_RUN = {"bash": "_shtab_hostwire_capture_or_run_file", "zsh": "_hostwire_capture_or_run"}

# (command, argument dest) -> what it completes as; the dests are the parsers' own
ARGUMENTS = {
    ("analyze", "campaign"): CAMPAIGN_DIR,
    ("model", "campaign"): CAMPAIGN_DIR,
    ("model", "calibration"): RESULT_DIR,
    ("report", "campaign"): RESULT_DIR,
    ("gaps", "run"): RUN_DIR,
    ("timeline", "run"): RUN_DIR,
    ("run", "config"): TOML_FILE,
    ("pcapcols", "file"): CAPTURE_FILE,
    ("metrics *", "input"): CAPTURE_OR_RUN,
}
# options whose value is a folder or a file of any name, by metavar (else a folder for these dests)
FILE_METAVARS = {"FILE", "JSON"}
DIRECTORY_OPTIONS = {"out", "output", "runs_dir", "accuracy_dir", "calibration"}


def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def annotate(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Sets each argument's `.complete` (shtab's hook) by the table above."""
    for name, command in subparsers(parser).items():
        nested = subparsers(command)
        targets = [(f"{name} *", sub) for sub in nested.values()] if nested else [(name, command)]
        for key, target in targets:
            for action in target._actions:
                if (key, action.dest) in ARGUMENTS:
                    action.complete = ARGUMENTS[(key, action.dest)]  # type: ignore[attr-defined]
                elif action.option_strings and action.metavar in FILE_METAVARS:
                    action.complete = shtab.FILE  # type: ignore[attr-defined]
                elif action.option_strings and (action.metavar == "DIR" or action.dest in DIRECTORY_OPTIONS):
                    action.complete = shtab.DIRECTORY  # type: ignore[attr-defined]
    return parser


def scripts() -> dict[str, str]:
    """File name -> text of each completion script."""
    return {
        "hostwire.bash": shtab.complete(annotate(build_parser()), "bash", preamble=BASH_PREAMBLE),
        "_hostwire": shtab.complete(annotate(build_parser()), "zsh", preamble=ZSH_PREAMBLE),
    }


def main() -> int:
    if len(sys.argv) != 2:
        sys.stderr.write(__doc__.split("\n\n")[-1] + "\n")
        return 2
    target = Path(sys.argv[1])
    target.mkdir(parents=True, exist_ok=True)
    for name, text in scripts().items():
        (target / name).write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
