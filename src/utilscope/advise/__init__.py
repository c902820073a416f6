"""Rewrites that make a network run better on a GPU without changing what it computes: channel padding to the
tensor cores' multiple (``padding``), BatchNorm folded into the convolutions before it (``folding``)."""
