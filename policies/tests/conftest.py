"""The rule modules import each other as the engine runs them: from the pack's own folder."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
