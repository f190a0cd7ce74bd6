"""hostwire: record the scheduler, the I/O system calls and the wire on one clock, and measure
how the mix of processes shapes the traffic."""

__version__ = "0.1.0"

from hostwire.errors import HostwireError, InputError, UsageError  # noqa: E402

__all__ = ["__version__", "HostwireError", "InputError", "UsageError", "load_run", "read_pcap"]


def load_run(path: "str | object") -> "object":
    """Opens a run directory: see hostwire.run_directory.Run."""
    from hostwire.run_directory import load_run as _load_run

    return _load_run(path)  # type: ignore[arg-type]


def __getattr__(name: str) -> object:
    # Heavy modules (numpy, pandas) load on first use, not on `import hostwire`.
    if name == "read_pcap":
        from hostwire.read.pcap import read_pcap

        return read_pcap
    raise AttributeError(f"module 'hostwire' has no attribute {name!r}")
