"""One timeline of a run: the scheduler, the system calls and the wire joined on the run's clock
(docs/timeline.md). hostwire.timeline.tables builds the joined tables from DataFrames,
hostwire.timeline.build from a Run (whose df_switches, df_running, ... call it),
hostwire.timeline.cache keeps them as Parquet under the run's tables/,
hostwire.timeline.gaps explains every long gap of a stream, hostwire.timeline.clocks maps the
receiver's stamps onto the run's clock, hostwire.timeline.perfetto_trace draws it all."""
