"""The review engine: one pass over a file's tree, the value model every rule
reads, and the project view it asks about other files (which the index provides)."""
