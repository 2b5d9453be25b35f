"""What a person reads: console tables and the sweep report."""
