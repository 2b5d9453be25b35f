"""Hydra configuration groups, shipped in the wheel as sweep.conf.

Importing this package (Hydra does, to read it) registers the resolver the configs use:
`${sweep_data:kb/golden.jsonl}` is a bundled data file, found wherever the package lives.
"""

from importlib import resources

from omegaconf import OmegaConf

OmegaConf.register_new_resolver("sweep_data", lambda name: str(resources.files("sweep.data") / name), replace=True)
