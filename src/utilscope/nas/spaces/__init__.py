"""The registered search spaces (importing this package registers them)."""

from utilscope.nas.spaces import mbv3, regnet  # noqa: F401
