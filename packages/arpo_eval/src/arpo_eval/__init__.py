"""Placeholder: implemented in a later issue."""
