"""Surveys: plan a grid of cells (``plan``), measure it in worker subprocesses (``runner``, ``worker``), keep every
row in a resumable, versioned SQLite store (``store``, ``schema``, ``migrations``)."""
