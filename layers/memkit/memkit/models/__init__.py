"""Pydantic models: the domain (`domain`) and the HTTP contract (`api`)."""
