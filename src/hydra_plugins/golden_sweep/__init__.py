"""golden-sweep's Hydra plugins: Hydra instantiates plugins only from the `hydra_plugins` namespace."""
