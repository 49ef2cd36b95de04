"""Benches and studies: run once to write a README table, never on the decision path."""
