"""One timeline of a run: the scheduler, the system calls and the wire joined on the run's clock
(docs/timeline.md). hostwire.timeline.tables and stream_tables build the joined tables from
DataFrames; hostwire.timeline.build.Timeline builds them from a Run (which knows nothing of it)
and keeps them, hostwire.timeline.cache as Parquet under the run's tables/;
hostwire.timeline.gaps explains every long gap of a stream (on hostwire.timeline.intervals),
hostwire.timeline.clocks maps the receiver's stamps onto the run's clock,
hostwire.timeline.ledger tells where frames and calls went missing, and
hostwire.timeline.perfetto_trace and pcapng draw and annotate it all."""
