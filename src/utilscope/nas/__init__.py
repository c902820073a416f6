"""NAS: search spaces, seeded sampling, utilization inside a space, prediction and utilization-aware search."""
