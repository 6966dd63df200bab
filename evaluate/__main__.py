"""``python -m gpusched_lab.evaluate leaderboard ...`` / ``python -m gpusched_lab.evaluate evaluate ...``."""

from gpusched_lab.evaluate.cli import main

if __name__ == "__main__":
    main()
