"""Presentation: rich tables and text for results the library computed. Nothing here computes results."""
