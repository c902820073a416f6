"""Bad input of ``--threads`` (torch's thread count of a measurement): said before any model is built or store
opened."""

from bad_inputs import Case

CASES = [
    Case("profile {factory}:make --device cpu --threads 0", 2, "--threads must be a positive integer, got 0"),
    Case("layers {factory}:make --device cpu --threads -2", 2, "--threads must be a positive integer, got -2"),
    Case("survey --device cpu --models {factory}:make --threads 0 --db {missing}", 2, "--threads must be a positive"),
    Case("survey --device cpu --models {factory}:make --threads 0 --db {store} --dry-run", 2, "--threads must be"),
]
