"""Contracts every Strata package shares: ids, events, state and fold, errors, tool specs, the model path."""
