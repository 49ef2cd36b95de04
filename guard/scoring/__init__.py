"""Where the scorer's evidence lives: one node's evidence view and the function of every feature row.

:mod:`guard.scoring.view` builds, once per (graph, node), the facts the features of a proposal read (its
tool spec, its argument values, the edge rules into it read once and split per argument, the user turns
before it, ...), each computed on first use.  :mod:`guard.scoring.rows` binds every row of the feature
table (:mod:`guard.features`) to the function of that view that computes it, and checks at import that
the binding covers the table exactly.  The scorer (:mod:`guard.scorer`) iterates the bound table; adding
a feature is one row in the table and one function here (docs/evidence.md#the-feature-table).
"""
