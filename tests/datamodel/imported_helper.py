"""A user module that tests/datamodel/test_imports.py imports inside compiled functions."""
SCALE = 2.0
