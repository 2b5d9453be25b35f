"""`python -m sweep`: evaluate one retrieval configuration (or, with -m, every combination)."""

import hydra
from omegaconf import DictConfig

from sweep.cli import safe_run


@hydra.main(version_base="1.3", config_path="pkg://sweep.conf", config_name="config")
def main(cfg: DictConfig) -> float | None:
    means = safe_run(cfg)
    return None if means is None else means.get("ndcg_at_10")


if __name__ == "__main__":
    main()
