#!/bin/sh
# The source revision an install records: the commit, with -dirty when tracked files differ from
# it; "unknown" outside a git checkout.
top=$(cd "$(dirname "$0")/.." && pwd)
head=$(git -C "$top" rev-parse HEAD 2>/dev/null) || { echo unknown; exit 0; }
if git -C "$top" diff --quiet HEAD -- 2>/dev/null; then echo "$head"; else echo "$head-dirty"; fi
