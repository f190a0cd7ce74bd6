"""Reports: a campaign's (campaign_report) and one run's (run_report), their figures (plots on the
frame of figure), pages and tables, from what the analysis wrote."""
