"""Cleanup function entry point (template.yaml: Handler scheduled_cleanup.lambda_handler).

The handler lives in the memkit layer (memkit.handlers.cleanup) so the local stack
and the tests run this exact function.
"""

from memkit.handlers.cleanup import lambda_handler

__all__ = ["lambda_handler"]
