"""Curator function entry point (template.yaml: Handler stream_curator.lambda_handler).

The handler lives in the memkit layer so the local stack and the tests run this exact function.
"""

from memkit.curator.handlers import curator_handler as lambda_handler

__all__ = ["lambda_handler"]
