"""Shared pytest fixtures and the rules for privileged tests.

A test marked `privileged` needs root and the facilities named in the marker ("tracefs", "netns",
"ptrace"). When one is missing the test skips, unless HOSTWIRE_REQUIRE_PRIV=1 (set by `make test`),
where it fails: CI must not pass by skipping the kernel-touching tests."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent
SHARED_CORPUS = REPO_ROOT.parent / "shared" / "corpus"


def _missing_facility(name: str) -> str | None:
    from hostwire.record import doctor

    if os.geteuid() != 0:
        return "root"
    checks = {"tracefs": doctor.check_tracefs, "netns": doctor.check_netns, "ptrace": doctor.check_ptrace}
    if name in checks:
        finding = checks[name]()
        return None if finding.ok else f"{name} ({finding.detail})"
    return None


# Modules whose assertions depend on the host's timing (shares of gap causes, shaper intervals,
# CPU use, call stamps): `make test` runs them one at a time, after the parallel part, so that no
# other test's load on the two CPUs decides their outcome; and the fast fuzz, whose counts belong
# in the test log (a parallel worker's own output is not shown). Every other test runs in parallel.
TIMING_MODULES = frozenset({
    "tests/test_gaps_e2e.py", "tests/test_run_e2e.py", "tests/test_run_integrity.py",
    "capture/tests/test_wirecap.py", "syscall-tracer/tests/test_iotrace.py", "analyze/tests/test_overhead.py",
    "analyze/tests/test_resources.py", "sched-trace/tests/test_schedtrace.py",
    "analyze/tests/test_metrics_integrity.py", "analyze/tests/test_fuzz_fast.py", "tests/test_record.py",
    "analyze/tests/test_collector_stop.py", "tests/test_record_report.py",
})


LEFTOVERS_BEFORE_SESSION: list[str] = []


def pytest_sessionstart(session: pytest.Session) -> None:
    """Notes what earlier, killed hostwire processes left on this machine before any test ran:
    tests that look for leftovers judge only what the session itself leaves. Under xdist the
    controller looks, before any worker starts, and hands its list to the workers: a worker that
    looked itself would excuse what the other workers' tests had already left."""
    worker_input = getattr(session.config, "workerinput", None)
    if worker_input is not None:
        LEFTOVERS_BEFORE_SESSION.extend(worker_input.get("hostwire_leftovers", []))
        return
    from hostwire.record import doctor
    try:
        LEFTOVERS_BEFORE_SESSION.extend(doctor.leftovers())
    except OSError:
        pass


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: "object") -> None:
    node.workerinput["hostwire_leftovers"] = list(LEFTOVERS_BEFORE_SESSION)  # type: ignore[attr-defined]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if Path(item.path).resolve().relative_to(REPO_ROOT).as_posix() in TIMING_MODULES:
            item.add_marker(pytest.mark.timing)


def pytest_runtest_setup(item: pytest.Item) -> None:
    marker = item.get_closest_marker("privileged")
    if marker is None:
        return
    for facility in ("root", *marker.args):
        missing = _missing_facility(facility)
        if missing:
            message = f"needs {missing}"
            if os.environ.get("HOSTWIRE_REQUIRE_PRIV") == "1":
                pytest.fail(message + " (HOSTWIRE_REQUIRE_PRIV=1)", pytrace=False)
            pytest.skip(message)


@pytest.fixture(scope="session")
def build_dir() -> Path:
    from hostwire.paths import build_dir as _build_dir

    path = _build_dir()
    if not (path / "bin").is_dir():
        pytest.fail(f"{path}/bin is missing: run 'make build' first", pytrace=False)
    return path


@pytest.fixture(scope="session")
def shared_corpus() -> Path:
    """../shared/corpus: skips when absent outside CI, fails when absent in CI."""
    if not SHARED_CORPUS.is_dir():
        if os.environ.get("CI"):
            pytest.fail(f"{SHARED_CORPUS} is missing in CI", pytrace=False)
        pytest.skip(f"{SHARED_CORPUS} is absent")
    return SHARED_CORPUS


@pytest.fixture
def topology_pair() -> Iterator["object"]:
    """A fresh sender/receiver namespace pair with the default 10 Mbit/s link; removed afterwards."""
    from hostwire.record.topology import Topology, list_namespaces

    topo = Topology(run_id=f"t{_next_id()}")
    with topo:
        yield topo
    assert not {topo.tx_ns, topo.rx_ns} & set(list_namespaces())


def _processes_mentioning(text: str) -> list[int]:
    """Pids of the processes (other than this one) whose command line contains text."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and proc.name != str(os.getpid()):
            try:
                if text.encode() in (proc / "cmdline").read_bytes():
                    found.append(int(proc.name))
            except OSError:
                continue
    return found


@pytest.fixture(scope="session")
def processes_mentioning() -> Callable[[str], list[int]]:
    """A function: the processes whose command line names a path (what a run left running)."""
    return _processes_mentioning


_counter = [0]


def _next_id() -> str:
    _counter[0] += 1
    return str(_counter[0])
