"""Completion of `hostwire` in bash and zsh from the committed scripts (completion/): commands,
options, run directories (folders holding a manifest.json) and campaign files (*.toml), without
starting Python, `hostwire re<TAB>` in under 50 ms."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BASH_SCRIPT = REPO / "completion" / "hostwire.bash"
ZSH_SCRIPT = REPO / "completion" / "_hostwire"
BUDGET_MS = 50  # the bound for `hostwire re<TAB>`

# Completes each line (words separated by spaces; a trailing space starts a new empty word) with
# bash's own machinery: the function `complete -p hostwire` names, COMP_WORDS/COMP_CWORD set as
# readline sets them. Prints "<wall us> <cpu us> <candidates...>" per line, the CPU time being the
# shell's and its children's (user + system, from the `times` builtin, to the millisecond).
BASH_DRIVER = r'''
source "$1"; times_file=$2; shift 2
spec=$(complete -p hostwire); fn=${spec##*-F }; fn=${fn%% *}
cpu_now() {
  local field m s total=0
  times > "$times_file"
  for field in $(< "$times_file"); do
    m=${field%%m*}; s=${field#*m}; s=${s%s}
    total=$(( total + (10#$m * 60 + 10#${s%.*}) * 1000000 + 10#${s#*.} * 1000 ))
  done
  CPU_US=$total
}
for line in "$@"; do
  read -ra COMP_WORDS <<< "$line"
  [[ $line == *" " ]] && COMP_WORDS+=("")
  COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 )); COMP_LINE=$line; COMP_POINT=${#line}
  cpu_now; cpu_start=$CPU_US; start=$EPOCHREALTIME
  "$fn" hostwire "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
  end=$EPOCHREALTIME; cpu_now
  printf '%s %s %s\n' "$(( ${end/./} - ${start/./} ))" "$(( CPU_US - cpu_start ))" "${COMPREPLY[*]}"
done
'''


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """runs/camp/r1 is a run, runs/camp/r2.partial one cut short without a manifest yet, notes/ a
    folder of anything else; a campaign file, a capture and a text file beside them."""
    (tmp_path / "runs" / "camp" / "r1").mkdir(parents=True)
    (tmp_path / "runs" / "camp" / "r1" / "manifest.json").write_text("{}")
    (tmp_path / "runs" / "camp" / "campaign.json").write_text("{}")
    (tmp_path / "runs" / "camp" / "r2.partial").mkdir()
    (tmp_path / "notes" / "deep").mkdir(parents=True)
    for name in ("quick.toml", "wire.pcap", "readme.txt"):
        (tmp_path / name).write_text("")
    return tmp_path


def bash_complete(lines: list[str], cwd: Path, trace: Path | None = None) -> list[tuple[int, int, list[str]]]:
    """(wall µs, CPU µs, sorted candidates) of each line."""
    argv = ["bash", "--norc", "--noprofile", "-c", BASH_DRIVER, "driver", str(BASH_SCRIPT), str(cwd / ".times"),
            *lines]
    if trace is not None:
        argv = ["strace", "-f", "-qq", "-e", "trace=execve", "-o", str(trace), *argv]
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    rows = [(line + " ").split(" ", 2) for line in proc.stdout.splitlines()]
    return [(int(wall), int(cpu), sorted(rest.split())) for wall, cpu, rest in rows]


def test_bash_completes_re_to_record_and_report_fast_without_starting_a_program(workspace: Path) -> None:
    # The first completion in a fresh shell, the one a user waits for, then the same nine more.
    # Measured 2026-11-28, 12 shells of 10: on a quiet machine 1.1-1.4 ms wall each (9 ms once, the
    # first); with the load average at 12 on two CPUs 1.2 to 660 ms wall, the shell waiting for a
    # CPU, for the same 0-4 ms of CPU. So the bound holds the completion's own CPU time, every
    # time, and the wall time of the quickest of the ten (any quiet moment shows it).
    timed = bash_complete(["hostwire re"] * 10, workspace)
    assert all(words == ["record", "report"] for _, _, words in timed)
    assert max(cpu for _, cpu, _ in timed) < BUDGET_MS * 1000, timed
    assert min(wall for wall, _, _ in timed) < BUDGET_MS * 1000, timed
    # under strace: the shell's own start is the one program started; no Python, no helper
    trace = workspace / "execve.trace"
    assert bash_complete(["hostwire re", "hostwire gaps runs/camp/", "hostwire run "], workspace, trace)
    started = [line for line in trace.read_text().splitlines() if "execve(" in line and "= 0" in line]
    assert len(started) == 1 and "bash" in started[0], started


def test_bash_completes_options_run_directories_and_campaign_files(workspace: Path) -> None:
    options, top, runs, deeper, configs, inputs, reports = (words for _, _, words in bash_complete([
        "hostwire gaps --m", "hostwire gaps ", "hostwire gaps runs/", "hostwire gaps runs/camp/", "hostwire run ",
        "hostwire metrics idc ", "hostwire report runs/"], workspace))
    assert options == ["--min-gap"]
    assert top == ["runs"]  # notes/ leads to no run
    assert runs == ["runs/camp"] and deeper == ["runs/camp/r1"]
    assert "quick.toml" in configs and not {"readme.txt", "wire.pcap"} & set(configs)
    assert inputs == ["runs", "wire.pcap"]
    assert reports == ["runs/camp"]  # a campaign directory, for report


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed (make setup installs it)")
def test_zsh_completes_commands_options_and_run_directories(workspace: Path, tmp_path: Path) -> None:
    functions = tmp_path / "fpath"
    functions.mkdir()
    shutil.copy(ZSH_SCRIPT, functions / "_hostwire")
    harness = Path(__file__).with_name("zsh_complete.zsh")
    lines = ["hostwire re", "hostwire gaps --m", "hostwire gaps runs/camp/", "hostwire run "]
    proc = subprocess.run(["zsh", "-f", str(harness), str(functions), str(workspace), *lines], capture_output=True,
                          text=True, timeout=60, env={**os.environ, "TERM": "dumb"})
    assert proc.returncode == 0, proc.stderr
    got = {line: sorted(words.split()) for line, words in zip(lines, proc.stdout.splitlines(), strict=True)}
    assert got["hostwire re"] == ["record", "report"]
    assert got["hostwire gaps --m"] == ["--min-gap"]
    assert got["hostwire gaps runs/camp/"] == ["runs/camp/r1"]
    assert "quick.toml" in got["hostwire run "] and "readme.txt" not in got["hostwire run "]
