"""One configuration end to end (`trial`) and the Hydra face that runs one or a sweep of them (`cli`)."""
