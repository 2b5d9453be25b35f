"""Bundled golden sets and corpora (shipped in the wheel as sweep.data)."""
