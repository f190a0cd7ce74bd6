"""Why two runs differ (hostwire diff): each side's goodput, and the difference split into terms
that add up to it exactly (docs/timeline.md, "Why two runs differ")."""
