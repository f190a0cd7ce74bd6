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
    "syscall-tracer/tests/test_iotrace_strace.py", "analyze/tests/test_resources.py",
    "sched-trace/tests/test_schedtrace.py", "sched-trace/tests/test_schedtrace_tracecmd.py",
    "analyze/tests/test_metrics_integrity.py", "analyze/tests/test_metrics_goodput_truth.py",
    "analyze/tests/test_metrics_sanity_marks.py", "analyze/tests/test_fuzz_fast.py", "tests/test_record.py",
    "analyze/tests/test_collector_stop.py", "tests/test_record_report.py", "tests/test_real_services.py",
    "tests/test_real_transfers.py", "tests/test_real_web.py", "tests/test_qdisc_causes.py",
    "tests/test_record_lifetimes.py", "tests/test_record_sendstyles.py", "tests/test_completion.py",
    "tests/test_hosts_receiver.py",
})


# Scenarios of about four seconds or more on two CPUs (measured with --durations on 2026-11-28), whole
# modules or tests by function name: they carry the `long` marker, so that `make test` stays
# within six minutes; `make test-long`, which CI runs after it, runs them (the sanitized ones
# against the ASan/UBSan build too). Each still runs in CI on every change.
LONG_TESTS = frozenset({
    "tests/test_campaign_e2e.py", "tests/test_gaps_e2e.py", "tests/test_install.py", "tests/test_record_lifetimes.py",
    "tests/test_record_sendstyles.py", "tests/test_record_waits.py", "tests/test_diff.py",
    "tests/test_until_ci.py::test_repetitions_are_added_until_each_point_is_within_or_at_the_bound",
    "analyze/tests/test_cache_code.py", "analyze/tests/test_open_files_limit.py",
    "analyze/tests/test_cache_integrity.py::test_report_recomputes_an_empty_table_instead_of_a_traceback",
    "analyze/tests/test_campaign.py::test_campaign_records_every_point_and_resume_skips_complete_runs",
    "analyze/tests/test_capture_pass.py::test_gaps_of_the_chunked_capture_are_the_gaps_in_memory",
    "analyze/tests/test_capture_pass.py::test_recorded_fixture_in_chunks_is_the_whole",
    "analyze/tests/test_capture_pass.py::test_synthetic_capture_in_chunks_is_the_whole",
    "analyze/tests/test_fixture_run.py::test_analysis_and_report_of_the_fixture",
    "analyze/tests/test_fuzz_fast.py::test_fuzz_every_format_in_process",
    "analyze/tests/test_gap_sinks.py::test_sinks_give_the_whole_tables_of_a_recorded_run",
    "analyze/tests/test_gap_sinks.py::test_the_command_streams_rows_as_the_whole_table",
    "analyze/tests/test_kernel_slabs.py::test_analyze_takes_the_chunked_paths_for_a_long_run_with_the_same_row",
    "analyze/tests/test_kernel_slabs.py::test_gaps_explained_in_slabs_are_the_gaps_explained_whole",
    "analyze/tests/test_kernel_slabs.py::test_gaps_in_slabs_from_the_command_line",
    "analyze/tests/test_kernel_slabs.py::test_pieces_of_the_trace_are_the_whole_trace",
    "analyze/tests/test_kernel_slabs.py::test_slabs_hold_the_whole_traces_states_and_cpus",
    "analyze/tests/test_kernel_slabs.py::test_the_one_run_report_of_a_long_run_reads_it_in_slabs_and_chunks",
    "analyze/tests/test_kernel_slabs.py::test_the_timeline_of_a_long_trace_from_its_slabs",
    "analyze/tests/test_linkrate_cli.py::test_metrics_and_gaps_agree_on_a_run_without_link_rate",
    "analyze/tests/test_metrics_integrity.py::test_a_real_run_goodput_within_the_link_and_its_cut_capture",
    "analyze/tests/test_overhead.py::test_each_syscall_backend_counts_the_writes_the_benchmark_logged",
    "analyze/tests/test_overhead.py::test_loss_ledger_names_the_source_of_losses_made_on_purpose",
    "analyze/tests/test_overhead_program.py::test_sigterm_during_the_program_rows_leaves_nothing_behind",
    "analyze/tests/test_run_object.py::test_a_recorded_run_is_decoded_once_by_the_summary_and_once_by_the_analysis",
    "analyze/tests/test_run_report.py::test_a_missing_capture_or_kernel_trace_is_named_in_place",
    "analyze/tests/test_run_report.py::test_benchmark_run",
    "analyze/tests/test_run_report.py::test_digest_is_a_campaign_option_and_a_missing_path_is_named",
    "analyze/tests/test_safe_writes.py::test_a_symlinked_output_folder_is_refused_in_one_line",
    "analyze/tests/test_safe_writes.py::test_links_at_every_output_name_are_replaced_not_followed",
    "analyze/tests/test_syscalls_pieces.py::test_each_fds_bytes_add_up_piece_by_piece",
    "analyze/tests/test_syscalls_pieces.py::test_the_kept_calls_of_the_pieces_are_the_whole_files",
    "analyze/tests/test_syscalls_pieces.py::test_the_writes_held_on_disk_are_the_writes_of_the_whole_file",
    "analyze/tests/test_timeline_pcapng.py::test_every_data_frame_names_its_sending_process",
    "benchmark/tests/test_bench.py::test_killed_sender_is_named",
    "benchmark/tests/test_bench.py::test_loopback_run",
    "capture/tests/test_pcapcols.py::test_corpus_matches_tshark",
    "capture/tests/test_wirecap.py::test_shaped_link_wire_timeline",
    "capture/tests/test_wirecap.py::test_two_cpus_filing_at_once_file_some_stamps_out_of_order",
    "kernel-patches/tests/test_series.py::test_broken_patch_is_one_line",
    "syscall-tracer/tests/test_iotrace.py::test_every_call_of_a_long_loop_is_recorded_inside_its_own_clock_readings",
    "syscall-tracer/tests/test_iotrace_strace.py::test_ptrace_preload_and_tracefs_agree_on_the_senders_writes",
    "tests/test_dry_run_estimate.py::test_dry_run_estimate_matches_a_short_campaign",
    "tests/test_fuzz_integrity.py::test_damaged_trace_is_named_by_convert",
    "tests/test_record.py::test_failures_one_line_each",
    "tests/test_record.py::test_iperf3_tcp",
    "tests/test_run_e2e.py::test_demo_records_a_complete_run",
    "tests/test_run_e2e.py::test_interrupted_run_cleans_up_and_keeps_partial_data",
    "tests/test_run_e2e.py::test_killed_runner_leaves_nothing_that_doctor_cannot_remove",
    "tests/test_run_e2e.py::test_metrics_sanity_of_a_real_two_namespace_run",
    "tests/test_run_integrity.py::test_default_run_captures_at_the_senders_end_with_wire_like_gaps",
    "tests/test_run_integrity.py::test_sender_cpu_cap_limits_the_sender_host_only_and_leaves_no_group",
    "tests/test_run_integrity.py::test_shaper_drops_are_read_from_the_kernel_into_the_manifest",
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
        module = Path(item.path).resolve().relative_to(REPO_ROOT).as_posix()
        if module in TIMING_MODULES:
            item.add_marker(pytest.mark.timing)
        if module in LONG_TESTS or f"{module}::{getattr(item, 'originalname', item.name)}" in LONG_TESTS:
            item.add_marker(pytest.mark.long)


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
