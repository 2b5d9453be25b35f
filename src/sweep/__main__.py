"""`python -m sweep`: evaluate one retrieval configuration (or, with -m, every combination)."""

from sweep.experiment.cli import main

if __name__ == "__main__":
    main()
