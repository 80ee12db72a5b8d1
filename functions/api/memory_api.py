"""API function entry point (template.yaml: Handler memory_api.lambda_handler).

The handler lives in the memkit layer so the local stack and the tests run this exact function.
"""

from memkit.api.handler import lambda_handler

__all__ = ["lambda_handler"]
