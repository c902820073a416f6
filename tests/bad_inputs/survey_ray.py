"""Bad input of ``survey`` on Ray: addresses, GPU types."""

from bad_inputs import Case

CASES = [
    Case("survey --executor ray --ray-address garbage --device cpu --models {factory}:make --dry-run", 2, "address"),
]
