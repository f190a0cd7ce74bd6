"""Issue 22, case 6: a campaign file is checked completely before anything starts. Every limit
(docs/formats.md, "Campaign files"), names of one path component, the key and line of the real
fault (variants and --set too), duplicate grid values and duplicate points, and a --dry-run
estimate that does not wrap at a day."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from hostwire.campaign.batch import dry_run_lines, format_estimate
from hostwire.campaign.config import load_config, parse_overrides
from hostwire.errors import UsageError


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "c.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("text, message", [
    # limits of every duration (hw-bench refuses more than a day at run time)
    ("[defaults]\nduration_s = 90000\n", r"c.toml:2: defaults.duration_s: at most 86400 s .*, got 90000.0"),
    ("[grid]\nwarmup_s = [1, 90000]\n", r"c.toml:2: grid.warmup_s: at most 86400 s .*, got 90000.0"),
    ("[defaults]\nquiet_s = 1e6\n", r"c.toml:2: defaults.quiet_s: at most 86400 s .*, got 1000000.0"),
    ("[defaults]\nthink_s = 86401\n", r"c.toml:2: defaults.think_s: at most 86400 s .*, got 86401.0"),
    ("[variants.long]\nreceiver_pause_s = 1e9\n", r"c.toml:2: variants.long.receiver_pause_s: .*at most 86400 s"),
    ("[defaults]\nduration_s = 1e-7\n", r"c.toml:2: defaults.duration_s: .*at least 0.001 s"),
    # counts
    ("[campaign]\nrepetitions = 100000\n", r"c.toml:2: campaign.repetitions: expected 1 to 1000"),
    ("[campaign]\nseed = -1\n", r"c.toml:2: campaign.seed: expected a whole number from 0"),
    ("[host]\nvm_timeout_s = 1e9\n", r"c.toml:2: host.vm_timeout_s: .*at most 172800"),
    ("[campaign]\nrepetitions = 1000\n[grid]\nread_size = [" + ", ".join(str(i) for i in range(1, 102)) + "]\n",
     r"c.toml:4: grid.read_size: 101000 runs: at most 100000"),
    # names: one path component
    ("[campaign]\nname = '..'\n", r"c.toml:2: campaign.name: '..': expected one path component"),
    ("[campaign]\nname = '.'\n", r"c.toml:2: campaign.name: '.': expected one path component"),
    ("[campaign]\nname = '.hidden'\n", r"c.toml:2: campaign.name: '.hidden': expected one path component"),
    ("[campaign]\nname = '-x'\n", r"c.toml:2: campaign.name: '-x': expected one path component"),
    ("[campaign]\nname = 'a/b'\n", r"c.toml:2: campaign.name: 'a/b': expected one path component"),
    # the key and line of the real fault
    ("[defaults]\nsender_cpus = 'a'\n", r"c.toml:2: defaults.sender_cpus: CPU list 'a'|c.toml:2: defaults.sender_cpus: expected numbers"),
    ("[defaults]\nsenders = 1\n[variants.a]\nreceiver_cpus = '0-x'\n", r"c.toml:4: variants.a.receiver_cpus: "),
    ("[variants]\nx = { duration_s = -1.0 }\n", r"c.toml:2: variants.x.duration_s: .*more than 0 s"),
    ("[defaults]\nsenders = 1\n\n[ variants . slow ]\n\"duration_s\" = 0.0\n",
     r"c.toml:5: variants.slow.duration_s: .*more than 0 s"),
    ("[defaults]\nsender_cpu_share = 0.5\n[grid]\nsender_cpus = ['0', 'zz']\n", r"c.toml:4: grid.sender_cpus: "),
    # duplicate grid values: two runs with one key
    ("[grid]\nsenders = [1, 2, 1]\n", r"c.toml:2: grid.senders: 1 is listed twice"),
    ("[grid]\nduration_s = [1, 1.0]\n", r"c.toml:2: grid.duration_s: 1.0 is listed twice"),
    ("[variants.a]\nlink_rate = '1mbit'\n[variants.b]\nlink_rate = '1mbit'\n",
     r"c.toml:3: variants.b: variant 'b', \[defaults\] is the same run as variant 'a'"),
    ("[defaults]\ncollectors = 'none'\n[grid]\ncapture = [true, false]\n",
     r"c.toml:3: grid: capture = False is the same run as capture = True"),
])
def test_config_refused_with_file_line_and_key(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        load_config(write(tmp_path, text))


def test_a_bad_set_is_named_as_set_not_as_the_files_line(tmp_path: Path) -> None:
    path = write(tmp_path, "[defaults]\nduration_s = 3\n")
    with pytest.raises(UsageError, match=r"^--set duration_s: expected more than 0 s$"):
        load_config(path, parse_overrides(["duration_s=-1"]))
    with pytest.raises(UsageError, match=r"^--set warmup_s: at most 86400 s"):
        load_config(path, parse_overrides(["warmup_s=100000"]))


def test_limits_at_the_edge_are_accepted(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, "[campaign]\nname = 'a.b-c_1'\nrepetitions = 1000\n"
                                         "[defaults]\nduration_s = 86400\nwarmup_s = 0\nquiet_s = 86400\n"
                                         "[grid]\nsenders = [1, 2]\n"))
    assert len(config.points()) == 2 and config.name == "a.b-c_1"


@pytest.mark.parametrize("seconds, text", [
    (0, "00:00:00"), (59.2, "00:01:00"), (3600, "01:00:00"), (86399, "23:59:59"),
    (86400, "1 day 00:00:00"), (90000 * 3 + 3 * 4.5, "3 days 03:00:14"),
])
def test_estimate_is_not_wrapped_at_a_day(seconds: float, text: str) -> None:
    assert format_estimate(seconds) == text


def test_dry_run_estimate_of_a_long_campaign(tmp_path: Path) -> None:
    # 3 runs of 86400 s (+0 warm-up, 0 quiet, 2.5 s each of overhead): 3 days and 7.5 s
    config = load_config(write(tmp_path, "[defaults]\nduration_s = 86400\nwarmup_s = 0\nquiet_s = 0\n"
                                         "[grid]\nsenders = [1, 2, 3]\n"))
    assert dry_run_lines(config)[-1] == "estimated time: 3 days 00:00:08"


def test_cli_refuses_a_day_long_duration_with_one_line(tmp_path: Path) -> None:
    path = write(tmp_path, "[defaults]\nduration_s = 90000\n")
    proc = subprocess.run([sys.executable, "-m", "hostwire", "run", str(path), "--dry-run"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        f"hostwire: {path}:2: defaults.duration_s: at most 86400 s (one day, hw-bench's limit), got 90000.0"]
