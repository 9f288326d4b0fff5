"""The `strata` command line."""
