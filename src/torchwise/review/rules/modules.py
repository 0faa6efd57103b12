"""modules rules."""
