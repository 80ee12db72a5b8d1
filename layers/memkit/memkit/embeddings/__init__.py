"""Embedders: text to vectors for long-term memory (ARCHITECTURE.md, "Indexing")."""
