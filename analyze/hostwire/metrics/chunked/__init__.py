"""The traffic metrics of a capture in bounded memory: passes over chunks of its rows
(hostwire.read.pcapchunks) with results equal to the in-memory path's (engine.py says which
kinds and options it serves)."""
