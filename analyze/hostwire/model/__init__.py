"""hostwire's performance model (docs/model.md): a layered queueing model of the sender host
that predicts a grid point's goodput, Jain's index and the senders' CPU wait from a few measured
costs, and its check against every run of a campaign (`hostwire model`)."""
