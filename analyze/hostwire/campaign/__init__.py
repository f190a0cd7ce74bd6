"""Campaigns: the config, the batch that records its runs, the analysis into summary.parquet, the
report and its figures."""
