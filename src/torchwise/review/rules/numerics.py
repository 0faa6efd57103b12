"""numerics rules."""
