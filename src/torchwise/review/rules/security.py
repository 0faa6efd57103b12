"""security rules."""
