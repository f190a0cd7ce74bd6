"""Recording a run: the run point, the link and the two-namespace topology, the CPU cap, the
collectors, the benchmark's launcher, the resource sampler, the runner, the guest of vm mode,
and doctor's checks and cleanup. Nothing of the reading side imports this package."""
