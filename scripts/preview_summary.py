"""CLI: `python -m scripts.preview_summary [PREVIEW_JSON] [--policy-events EVENT_LOG]` prints the
reviewer's Markdown summary of a preview (review/), reading the preview from stdin when no file
is given."""

from __future__ import annotations

import argparse
import json
import sys

from review.summary import summarize


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("preview", nargs="?", help="`pulumi preview --json` output (default: stdin)")
    parser.add_argument("--policy-events", help="the preview's `--event-log` file (JSON lines)")
    args = parser.parse_args(argv)
    with open(args.preview) if args.preview else sys.stdin as handle:
        preview = json.load(handle)
    events = None
    if args.policy_events:
        with open(args.policy_events) as handle:
            events = [json.loads(line) for line in handle if line.strip()]
    sys.stdout.write(summarize(preview, events))
    return 0


if __name__ == "__main__":
    sys.exit(main())
