"""Errors that the CLI turns into one line and an exit code (2 usage, 1 runtime)."""


class HostwireError(Exception):
    """A runtime failure: the message names what failed and why (exit 1)."""

    exit_code = 1


class InputError(HostwireError):
    """Bad input data: the message names the file, the line or byte offset and what was expected."""


class UsageError(HostwireError):
    """Bad arguments or configuration (exit 2)."""

    exit_code = 2


class Terminated(Exception):
    """SIGTERM arrived during long work: unwinding runs every teardown, as Ctrl-C does."""
