"""Explain: per-layer device time, roofline, attainable utilization and diagnosis."""
