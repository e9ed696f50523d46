"""CLI: `python -m scripts.preview_summary [PREVIEW_JSON] [--policy-events EVENT_LOG]` prints the
reviewer's Markdown summary of a preview (spear/review.py)."""

import sys

from spear.review import main

if __name__ == "__main__":
    sys.exit(main())
