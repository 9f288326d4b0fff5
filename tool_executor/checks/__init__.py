"""The checks a call passes before dispatch, one module each. Their order is fixed in executor.py."""
