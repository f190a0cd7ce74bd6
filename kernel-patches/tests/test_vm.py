"""Boot tests of the guest kernels (make test-vm; make kernel first). Each boots QEMU: with KVM in
seconds, emulated (TCG) in tens of seconds. The patched kernel's event against ground truth:
test_vm_event.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from hostwire import paths

from hostwire.record import vm
from hostwire.read.sched import read_sched_tsv

pytestmark = [pytest.mark.vm, pytest.mark.privileged, pytest.mark.slow]


def tool(name: str) -> str:
    return str(paths.tool(name))


def booted(flavour: str, command: str, share: Path, timeout_s: float = 900, append: str = "") -> vm.Boot:
    result = vm.boot(flavour, command, share, timeout_s=timeout_s, append=append)
    assert result.failure() is None, (result.failure(), (share / "guest.log").read_text()[-3000:],
                                      (share / "console.log").read_text()[-3000:])
    return result


@pytest.fixture(scope="module", autouse=True)
def kernels_built() -> None:
    for flavour in vm.FLAVOURS:
        try:
            vm.kernel_image(flavour)
        except Exception as exc:  # noqa: BLE001 - the one line says what to do
            pytest.fail(str(exc), pytrace=False)


def test_every_boot_is_fresh(tmp_path: Path) -> None:
    first = booted("stock", "cat /proc/sys/kernel/random/boot_id > again", tmp_path / "a")
    second = booted("stock", "true", tmp_path / "b")
    assert first.boot_id and second.boot_id and first.boot_id != second.boot_id
    assert (tmp_path / "a" / "again").read_text().strip() == first.boot_id
    assert first.kernel_release.endswith("-hostwire") and first.boot_s > 0
    assert first.emulated == (not vm.kvm_usable())


def test_a_guest_that_never_boots_is_one_line(tmp_path: Path) -> None:
    result = vm.boot("stock", "true", tmp_path, timeout_s=300, init=Path("/no/such/init"))
    assert not result.timed_out and result.failure() == (
        f"the stock guest never reached its command (console: {tmp_path / 'console.log'})")
    assert "Requested init /no/such/init failed" in (tmp_path / "console.log").read_text()


def test_a_guest_that_hangs_is_killed(tmp_path: Path) -> None:
    result = vm.boot("stock", "sleep 100000", tmp_path, timeout_s=60)
    assert result.timed_out and result.failure().startswith("the stock guest was killed after its timeout")
    assert not [p for p in Path("/proc").iterdir() if p.name.isdigit() and str(tmp_path).encode()
                in _cmdline(p)]


def _cmdline(proc: Path) -> bytes:
    try:
        return (proc / "cmdline").read_bytes()
    except OSError:
        return b""


def test_a_failing_init_step_is_one_line_and_powers_off(tmp_path: Path) -> None:
    """vm-init.sh runs as PID 1: a step that fails (here the 9p mount of a writable directory
    QEMU does not export) prints one console line naming it and powers the guest off, instead
    of carrying on without it or panicking the kernel."""
    result = vm.boot("stock", "touch ran", tmp_path, timeout_s=300, append="hostwire.rw=/hostwire-no-such-export")
    assert not result.timed_out and result.exit_status is None and not (tmp_path / "ran").exists()
    lines = [line for line in (tmp_path / "console.log").read_text(errors="replace").splitlines()
             if "hostwire vm-init:" in line]
    assert len(lines) == 1 and re.fullmatch(r"hostwire vm-init: failed to mount the writable directory "
                                            r"/hostwire-no-such-export over 9p \(exit status \d+\); powering off",
                                            lines[0]), lines
    assert "Kernel panic" not in (tmp_path / "console.log").read_text(errors="replace")


def test_lockdown_confidentiality_exposes_none_of_the_new_data(tmp_path: Path) -> None:
    """Booted with lockdown=confidentiality, the patched kernel closes tracefs (it creates none of
    its files), and with it custom:sched_switch_ext_tp (user program counters, pending signals,
    run-queue state): the event can be neither read nor enabled, nor trace_pipe read,
    hw-schedtrace --switch-ext fails in one line, and there is no /proc/schedtrace (v1's ring,
    which lockdown did not close). The same commands on an unlocked boot: test_vm_event.py."""
    event = "/sys/kernel/tracing/events/custom/sched_switch_ext_tp"
    script = f"""
mount -t securityfs securityfs /sys/kernel/security
cat /sys/kernel/security/lockdown > lockdown.txt
grep -c ' /sys/kernel/tracing tracefs ' /proc/mounts > mounted.txt
ls -A /sys/kernel/tracing > tracing_files.txt
cat {event}/format > format.txt 2> format.err; echo $? > format.rc
(echo 1 > {event}/enable) 2> enable.err; echo $? > enable.rc
cat /sys/kernel/tracing/trace_pipe > pipe.txt 2> pipe.err; echo $? > pipe.rc
{tool('hw-schedtrace')} -o raw --switch-ext -d 200ms > schedtrace.out 2> schedtrace.err; echo $? > schedtrace.rc
test -e /proc/schedtrace; echo $? > proc.rc
"""
    booted("patched", script, tmp_path, timeout_s=600, append="lockdown=confidentiality")

    def read(name: str) -> str:
        return (tmp_path / name).read_text()

    assert "[confidentiality]" in read("lockdown.txt"), read("lockdown.txt")
    assert read("mounted.txt").strip() == "1" and read("tracing_files.txt") == ""
    for step in ("format", "enable", "pipe"):
        assert read(f"{step}.rc").strip() != "0" and read(f"{step}.err"), step
    assert read("format.txt") == "" and read("pipe.txt") == ""
    assert read("schedtrace.rc").strip() == "1" and read("schedtrace.err") == (
        "hw-schedtrace: failed to read tracefs at /sys/kernel/tracing: it shows no files (a kernel locked down "
        "for confidentiality closes it; see /sys/kernel/security/lockdown)\n")
    assert read("proc.rc").strip() == "1"


@pytest.mark.timeout(2400)  # two emulated runs on a loaded host
def test_quick_campaign_in_vm_mode(tmp_path: Path) -> None:
    """Every run boots a fresh guest (boot ids differ), records its kernel timeline with the
    patched kernel's custom:sched_switch_ext_tp, its results land in its run directory, and the
    analysis and report mark the emulated timing."""
    from hostwire.campaign.analyze import analyze_campaign
    from hostwire.campaign.batch import run_campaign
    from hostwire.campaign.config import load_config
    from hostwire.report.campaign_report import build_report

    config_path = tmp_path / "vm.toml"
    config_path.write_text("[campaign]\nname = 'vmtest'\n[host]\nmode = 'vm'\nkernel = 'patched'\n"
                           "[defaults]\nwarmup_s = 0.5\nduration_s = 2.0\nquiet_s = 0.3\nkernel_source = 'event'\n"
                           "[grid]\nsenders = [1, 2]\nbackground = [1]\n")
    out = tmp_path / "campaign"
    result = run_campaign(load_config(config_path), out)
    assert [r["status"] for r in result.runs] == ["complete", "complete"], result.runs
    boots = []
    for entry in result.runs:
        run_dir = out / entry["run_id"]
        manifest = json.loads((run_dir / "manifest.json").read_text())
        guest = manifest["vm"]
        assert guest["flavour"] == "patched" and guest["kernel_release"].endswith("-hostwire")
        assert manifest["host"]["kernel_release"] == guest["kernel_release"]
        assert (run_dir / "vm-boot.log").stat().st_size > 0 and (run_dir / "raw" / "wire.pcap").stat().st_size > 0
        # the kernel timeline holds the patch's event beside the stock ones, in the usual files
        _, sched = read_sched_tsv(run_dir / "raw" / "sched.tsv", ["prev_pid", "nr_running"])
        counts = sched["event"].value_counts()
        # emitted in pairs; tracing switched on or off between the two calls splits at most one per
        # CPU at each end
        assert counts["sched_switch"] > 0 and abs(counts["sched_switch_ext_tp"] - counts["sched_switch"]) <= 4, counts
        assert manifest["losses"]["sched_lost_events"] == 0
        boots.append(guest["boot_id"])
    assert len(set(boots)) == 2 and all(boots)
    summary = analyze_campaign(out)
    assert set(summary["host_mode"]) == {"vm"}
    assert list(summary["timing_emulated"]) == [int(not vm.kvm_usable())] * 2
    report = build_report(out)
    text = Path(report).read_text()
    assert ("Timings are emulated" in text) == (not vm.kvm_usable())


