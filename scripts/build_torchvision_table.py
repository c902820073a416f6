"""Write src/utilscope/models/torchvision_models.csv: the installed torchvision's model names, as the torchvision
model source lists them, under a line naming the torchvision version.

    python3 scripts/build_torchvision_table.py

Run it after installing another torchvision: the command line checks a torchvision:NAME (and a bare NAME) against
the table while it parses only when the installed torchvision is the table's version (else when the model is built).
"""

from __future__ import annotations

import sys
from pathlib import Path

from utilscope.models import torchvision_names

TABLE = Path(__file__).resolve().parents[1] / "src" / "utilscope" / "models" / torchvision_names.TABLE_FILE


def main() -> int:
    version = torchvision_names.write_table(TABLE)
    models = len(TABLE.read_text().splitlines()) - 2  # the version line and the header
    print(f"torchvision {version}: {models} models -> {TABLE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
