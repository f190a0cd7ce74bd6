"""Subcommands of `hostwire`, discovered by module: each provides register(subparsers)."""
