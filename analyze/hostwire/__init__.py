"""hostwire: record the scheduler, the I/O system calls and the wire on one clock, and measure
how the mix of processes shapes the traffic."""

__version__ = "0.1.0"

from hostwire.errors import HostwireError, InputError, UsageError  # noqa: E402

__all__ = ["__version__", "HostwireError", "InputError", "UsageError", "load_run"]


def load_run(path: "str | object") -> "object":
    """Opens a run directory: see hostwire.run.Run."""
    from hostwire.run import load_run as _load_run

    return _load_run(path)  # type: ignore[arg-type]
