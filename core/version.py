"""Strata's version, written once: pyproject.toml takes the distribution's version from here
([tool.setuptools.dynamic], read as text at build time, nothing imported), so the two cannot differ.

A running daemon names itself with it (`strata serve`'s hello reply: agent/serve/_daemon.py). It asked
importlib.metadata for it before, which imported that module (with zipfile, csv, email's parser) and parsed the
installed METADATA, README included, as an e-mail message: ~8 ms of the CPU of every `strata serve` start, for one
string."""

VERSION = "0.1.0"
