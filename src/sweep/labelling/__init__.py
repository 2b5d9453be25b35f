"""Growing a golden set: the labelling queue, its changes, the golden file store and the web app."""
