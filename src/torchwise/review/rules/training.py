"""training rules."""
