"""The networks of eager's validation (docs/predict.md, "Eager: the host side"), chosen by a rule written before any
eager error was seen: the 61 curated torchvision CNNs (``survey``'s set), and 100 of timm's CNNs (``timm-cnn``)
spread over their families: the families in name order, round robin, each giving its next member in the order of
the SHA-256 of the model id, until 100 are chosen. Prints one model id a line, after a header saying so.

    python3 scripts/eager_models.py > data/eager_validation_models.txt
"""

from __future__ import annotations

import hashlib
from collections import defaultdict

from utilscope.models import sets

TIMM_COUNT = 100


def by_hash(model_id: str) -> str:
    return hashlib.sha256(model_id.encode()).hexdigest()


def spread(models: list[str], count: int) -> list[str]:
    """``count`` models, the families round robin (the module's docstring)."""
    members = defaultdict(list)
    for model_id in models:
        members[sets.family_of(model_id)].append(model_id)
    queues = [sorted(members[family], key=by_hash) for family in sorted(members)]
    chosen: list[str] = []
    while len(chosen) < count and any(queues):
        for queue in queues:
            if queue and len(chosen) < count:
                chosen.append(queue.pop(0))
    return chosen


def main() -> None:
    timm = spread(sets.set_members("timm-cnn"), TIMM_COUNT)
    print("# eager's validation networks: scripts/eager_models.py (its docstring says the rule)")
    print(*sets.default_survey(), *timm, sep="\n")


if __name__ == "__main__":
    main()
