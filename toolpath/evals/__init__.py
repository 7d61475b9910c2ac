"""Scoring and benchmarks: adapters turn records into TaskSpecs and score the answers."""
