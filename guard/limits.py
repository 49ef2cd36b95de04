"""Input limits of the decision path: larger or deeper arguments are refused, never read."""

MAX_ARG_CHARS = 200_000
MAX_DEPTH = 32
