"""Curator function entry point (template.yaml: Handler stream_curator.lambda_handler).

The handler lives in the memkit layer (memkit.handlers.curator) so the local stack
and the tests run this exact function.
"""

from memkit.handlers.curator import lambda_handler

__all__ = ["lambda_handler"]
