"""checkpoints rules."""
