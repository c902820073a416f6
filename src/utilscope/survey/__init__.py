"""Surveys: plan a grid of cells, run it in worker subprocesses, keep every row in a resumable SQLite store."""

from utilscope.survey.runner import *  # noqa: F403
from utilscope.survey.runner import CELL_DONE, GROUP_DONE, PARENT_ENV, software_string  # noqa: F401
