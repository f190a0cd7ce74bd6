"""Bit flips in the files a run keeps beside its logs (resources.tsv, trace.dat, sched.json) are
never read silently: the run's digests name them, and the readers check what they read when a
file is read on its own."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from hostwire.errors import InputError
from hostwire.paths import REPO_ROOT
from hostwire.read.sched import read_sched_json
from hostwire.run_directory import load_run

FIXTURE = REPO_ROOT / "tests" / "fixtures" / "run-small"


def _flip(path: Path, offset: int, bit: int = 0) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 1 << bit
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("relative", ["raw/resources.tsv", "raw/sched.json", "raw/trace.dat"])
def test_a_flipped_bit_in_a_sealed_run_is_named(tmp_path: Path, relative: str) -> None:
    run = tmp_path / "run"
    shutil.copytree(FIXTURE, run)
    path = run / relative
    if not path.exists():  # the fixture keeps no trace.dat: one recorded beside it, sealed with it
        path.write_bytes(bytes(range(256)) * 64)
        manifest = json.loads((run / "manifest.json").read_text())
        from hostwire.manifest import file_digest, seal

        manifest["raw_digests"][relative] = {"bytes": path.stat().st_size, "sha256": file_digest(path)}
        (run / "manifest.json").write_text(json.dumps(seal(manifest)))
    assert load_run(run).raw_damage(relative) is None  # whole: no fault
    _flip(path, path.stat().st_size // 2, 3)
    fault = load_run(run).raw_damage(relative)
    assert fault and relative in fault, fault
    with pytest.raises(InputError, match=relative):
        load_run(run).verify(relative)


@pytest.mark.parametrize("change, field", [
    (lambda d: d["buffers"][0]["cpus"][0].update(records=-5), "buffers[0].cpus[0].records"),
    (lambda d: d["buffers"][0]["cpus"][0].update(cpu=70000), "buffers[0].cpus[0].cpu"),
    (lambda d: d["buffers"][0]["cpus"][0]["end"].update(overrun="7"), "buffers[0].cpus[0].end.overrun"),
    (lambda d: d.update(stop_mono_ns=d["start_mono_ns"] - 1), "stop_mono_ns"),
    (lambda d: d["buffers"][0].update(lost_events=1.5), "buffers[0].lost_events"),
])
def test_sched_json_read_on_its_own_checks_its_fields(tmp_path: Path, change, field: str) -> None:
    data = json.loads((FIXTURE / "raw" / "sched.json").read_text())
    change(data)
    path = tmp_path / "sched.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InputError, match=rf"sched.json: {__import__('re').escape(field)}: expected"):
        read_sched_json(path)
    read_sched_json(FIXTURE / "raw" / "sched.json")  # the recorded one reads
