"""``python -m scopeguard`` runs the CLI."""

from scopeguard.cli import main

if __name__ == "__main__":
    main()
