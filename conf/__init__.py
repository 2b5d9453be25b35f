"""Hydra configuration groups (shipped in the wheel as sweep.conf)."""
