"""hostwire: record the scheduler, the I/O system calls and the wire on one clock, and measure
how the mix of processes shapes the traffic."""

__version__ = "0.1.0"

from hostwire.errors import HostwireError, InputError, UsageError  # noqa: E402

__all__ = ["__version__", "HostwireError", "InputError", "UsageError"]
