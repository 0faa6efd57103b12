"""``python -m torchwise`` runs the CLI."""

from torchwise.cli import main

if __name__ == "__main__":
    main()
