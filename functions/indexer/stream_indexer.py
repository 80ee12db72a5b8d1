"""Indexer function entry point (template.yaml: Handler stream_indexer.lambda_handler).

The handler lives in the memkit layer so the local stack and the tests run this exact function.
"""

from memkit.indexer.handler import lambda_handler

__all__ = ["lambda_handler"]
