"""`make install`, `make uninstall` and `make deb` (docs/install.md): installed into an empty
prefix, hostwire runs with its checkout out of sight (a tmpfs mounted over it in a private mount
namespace) from /, with a bare environment; uninstalling leaves nothing; the Debian package passes
lintian, installs with apt, passes `hostwire doctor`, and `apt-get remove` leaves no file of it."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BARE_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
WAIT_FOR_LOCK = ["-o", "DPkg::Lock::Timeout=300"]  # another apt on this machine finishes first

pytestmark = [pytest.mark.privileged("tracefs", "ptrace"), pytest.mark.timeout(1800)]


def make(*args: str, timeout: float = 900) -> None:
    proc = subprocess.run(["make", "--no-print-directory", "-C", str(REPO), *args], capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def without_checkout(*argv: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Runs argv from / with PATH=/usr/sbin:/usr/bin:/sbin:/bin and no other variable, in a mount
    namespace where the checkout is an empty tmpfs: as after the clone was moved away."""
    script = 'path=$1; shift; mount -t tmpfs -o size=1m moved "$0" && cd / && exec env -i PATH="$path" "$@"'
    return subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                           script, str(REPO), BARE_PATH, *argv],
                          capture_output=True, text=True, timeout=timeout)


def revision() -> str:
    return subprocess.run([str(REPO / "packaging" / "revision.sh")], capture_output=True, text=True,
                          check=True).stdout.strip()


def doctor_problems(stdout: str) -> list[str]:
    """doctor's lines that are not `ok`, but for LEFT: what killed runs, anyone's, left on this
    machine is its state, not the install's."""
    return [line for line in stdout.splitlines() if line.strip() and not line.startswith(("ok ", "LEFT "))]


def test_staged_install_runs_without_the_checkout_and_uninstall_leaves_nothing(tmp_path: Path) -> None:
    prefix = tmp_path / "prefix"
    built_from = revision()
    try:
        make("install", f"PREFIX={prefix}")
        for part in ("bin/hostwire", "libexec/hostwire/bin/hw-bench", "libexec/hostwire/lib/libhwiowrap.so",
                     "libexec/hostwire/lib/libhwpcapcols.so", "lib/hostwire/venv/bin/python", "share/man/man1/hostwire-gaps.1", "share/man/man5/hostwire-run.5",
                     "share/man/man7/hostwire-causes.7", "share/bash-completion/completions/hostwire",
                     "share/zsh/site-functions/_hostwire"):
            assert (prefix / part).exists(), part
        refers = subprocess.run(["grep", "-rlF", str(REPO), str(prefix)], capture_output=True, text=True)
        assert refers.stdout == "", f"files that name the checkout: {refers.stdout}"

        version = without_checkout(str(prefix / "bin" / "hostwire"), "--version")
        assert version.returncode == 0, version.stderr
        assert version.stdout.strip() == f"hostwire 0.1.0 (revision {built_from}, installed in {prefix})"

        doctor = without_checkout(str(prefix / "bin" / "hostwire"), "doctor")
        assert not doctor_problems(doctor.stdout), doctor.stdout + doctor.stderr
        assert doctor.returncode == (1 if "\nLEFT " in f"\n{doctor.stdout}" else 0), doctor.stdout
        for tool in ("hw-bench", "hw-wirecap", "hw-schedtrace", "hw-iotrace", "hw-pcapcols"):
            assert f"ok      tool {tool}: {prefix}/libexec/hostwire/bin/{tool} (installed)" in doctor.stdout
        assert f"private environment {prefix}/lib/hostwire/venv" in doctor.stdout
        assert "library libpcap: libpcap.so" in doctor.stdout  # as the installed tools load it
        assert f"manual pages: {prefix}/share/man/man1/hostwire.1" in doctor.stdout

        out = tmp_path / "recorded"
        record = without_checkout(str(prefix / "bin" / "hostwire"), "record", "-o", str(out), "--", "true")
        assert record.returncode == 0, record.stderr
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["status"] == "complete" and manifest["git_revision"] == built_from
        assert (out / "raw" / "wire.pcap").is_file() and (out / "raw" / "sched.tsv").is_file()
    finally:
        make("uninstall", f"PREFIX={prefix}")
    assert not prefix.exists(), sorted(str(p) for p in prefix.rglob("*"))


def package_files(deb: Path) -> list[Path]:
    listing = subprocess.run(["dpkg-deb", "--fsys-tarfile", str(deb)], capture_output=True, check=True).stdout
    names = subprocess.run(["tar", "-t"], input=listing, capture_output=True, check=True).stdout.decode()
    return [Path("/") / name.removeprefix("./") for name in names.splitlines() if not name.endswith("/")]


def installed(package: str) -> bool:
    proc = subprocess.run(["dpkg-query", "-W", "-f=${Status}", package], capture_output=True, text=True)
    return proc.returncode == 0 and "installed" in proc.stdout.split()[-1:]


def test_debian_package_passes_lintian_installs_works_and_is_removed_without_a_trace() -> None:
    if installed("hostwire"):
        pytest.skip("a hostwire package is installed on this machine; this test would replace it")
    built_from = revision()
    make("deb", timeout=1200)
    debs = sorted((REPO / "build" / "deb").glob("hostwire_*.deb"))
    assert len(debs) == 1, debs
    deb = debs[0]
    lintian = subprocess.run(["lintian", "--tag-display-limit", "0", str(deb)], capture_output=True, text=True,
                             timeout=1200)
    errors = [line for line in lintian.stdout.splitlines() if line.startswith("E:")]
    assert not errors and lintian.returncode == 0, lintian.stdout[-5000:] + lintian.stderr[-2000:]
    files = package_files(deb)
    assert Path("/usr/bin/hostwire") in files and Path("/usr/share/man/man1/hostwire-gaps.1.gz") in files
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    try:
        apt = subprocess.run(["apt-get", "install", "-y", "-q", *WAIT_FOR_LOCK, str(deb)], capture_output=True,
                             text=True, env=env, timeout=600)
        assert apt.returncode == 0, apt.stdout[-3000:] + apt.stderr[-3000:]
        doctor = without_checkout("hostwire", "doctor")
        assert not doctor_problems(doctor.stdout), doctor.stdout + doctor.stderr
        assert "ok      tool hw-bench: /usr/libexec/hostwire/bin/hw-bench (installed)" in doctor.stdout
        assert "ok      manual pages: /usr/share/man/man1/hostwire.1.gz" in doctor.stdout
        assert "ok      zsh completion: /usr/share/zsh/vendor-completions/_hostwire" in doctor.stdout
        version = without_checkout("hostwire", "--version")
        assert version.stdout.strip() == f"hostwire 0.1.0 (revision {built_from}, installed in /usr)", version.stderr
        page = subprocess.run(["man", "-w", "hostwire-gaps"], capture_output=True, text=True)
        assert page.stdout.strip() == "/usr/share/man/man1/hostwire-gaps.1.gz"
    finally:
        if installed("hostwire"):
            subprocess.run(["apt-get", "remove", "-y", "-q", *WAIT_FOR_LOCK, "hostwire"], capture_output=True, env=env,
                           timeout=600)
    assert not installed("hostwire")
    left = [str(path) for path in files if path.exists() or path.is_symlink()]
    assert not left, left
    assert not Path("/usr/lib/hostwire").exists() and not Path("/usr/libexec/hostwire").exists()
