"""Golden event logs replayed by tests/core/test_fold.py; regenerate with `python -m tests.golden.make_golden`."""
