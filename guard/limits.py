"""Input limits of the decision path (README "Security model").

Proposals: larger or deeper arguments are refused, never read.  Observed texts (tool results, user
turns, final answers) are indexed up to ``MAX_RECORD_CHARS`` characters each and up to
``MAX_SESSION_CHARS`` characters and ``MAX_SESSION_RECORDS`` records per session; a text cut by a
limit marks the session *limited*, and every later proposal of that session is refused (the
unindexed text could hold what the proposal sends, so nothing is let through on a partial view).
A proposal whose own text would exceed the session budget is refused.
"""

MAX_ARG_CHARS = 200_000
MAX_DEPTH = 32
MAX_RECORD_CHARS = 100_000
MAX_SESSION_CHARS = 2_000_000
MAX_SESSION_RECORDS = 20_000
