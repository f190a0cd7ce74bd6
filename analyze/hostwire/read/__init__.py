"""Reading what a run recorded: the TSV logs, the capture, the kernel timeline, the system calls,
the benchmark's logs and the resource samples. Imports nothing of hostwire.record."""
