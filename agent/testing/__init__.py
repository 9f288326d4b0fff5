"""Test support others can use: strict fakes for a person and a model, and the store conformance suite.

The fakes stand in for what a test cannot have (a person at a terminal, a remote model) and are strict: a
question nobody scripted an answer for, or a model call past the end of its script, fails the test instead of
being answered with a default. This package imports pytest: it is for test code, never imported by the runtime."""

from agent.testing._fakes import PyHook, StrictApprover, StrictScriptedModel, UnexpectedCall
from agent.testing._store_conformance import T0, StoreConformance

__all__ = ["T0", "PyHook", "StoreConformance", "StrictApprover", "StrictScriptedModel", "UnexpectedCall"]
