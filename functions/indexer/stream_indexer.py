"""Indexer function entry point (template.yaml: Handler stream_indexer.lambda_handler).

The handler lives in the memkit layer (memkit.handlers.indexer) so the local stack
and the tests run this exact function.
"""

from memkit.handlers.indexer import lambda_handler

__all__ = ["lambda_handler"]
