"""hostwire overhead: the tools measured (tools), the measurement (measure), what it writes
(output), and whether a collector changes the answer (accuracy)."""
