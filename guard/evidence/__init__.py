"""The evidence layer: what a record holds, and what a proposal's arguments share with earlier records.

Read it bottom up.  ``bitset``, ``kgrams`` and ``regex_screen`` are the primitives: node sets as
integers, k-gram keys, and literal screens that skip regular expressions which cannot match.
``values`` recognises and validates structured values (addresses, URLs, IBANs, cards, phones,
amounts, dates, file names); ``value_parts`` reads an argument whole, as the sink may have built it,
``value_cores`` gives structured values cores that still match an altered copy, ``amount_values`` gives an
amount the currency-free key a call's plain number looks up, ``normalize`` holds
the opt-in normal forms, ``specificity`` says how much a shared span of free text is worth, and
``postings`` stores which nodes hold a k-gram.  ``value_index`` puts these together: value tokens,
structured values and k-grams mapped to the records that hold them.  On top sit the per-record and
per-proposal readings the graph and the scorer use: ``node_facts`` (flags computed once per record),
``edge_rules`` (the typed edges of the prefix graph), ``feature_index`` (prefix-wide indexes behind
the prefix-reading features), ``role_features`` (which argument carries what, from which kind of
source), ``instructions`` (instruction-shaped clauses of untrusted text, found by grammar, and the
values they hand over), ``scope`` (whether the user's words ask for a call's kind of action) and
``trust`` (arguments the user named, or the policy's allow-lists name).  The feature
table itself (names, groups, default weights) is :mod:`guard.features`, below this package so that
the policy can read it.  See docs/evidence.md for what each piece of evidence means.
"""
