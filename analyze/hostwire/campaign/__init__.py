"""Campaigns: the config, the batch that records its runs, and the analysis into summary.parquet
with the tables derived from it (the report is hostwire.report's)."""
