"""``python -m evaluate leaderboard ...`` / ``python -m evaluate evaluate ...``."""

from evaluate.cli import main

if __name__ == "__main__":
    main()
