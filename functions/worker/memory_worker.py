"""Memory worker function entry point (template.yaml: Handler memory_worker.lambda_handler).

The handler lives in the memkit layer (memkit.handlers.worker) so the local stack
and the tests run this exact function.
"""

from memkit.handlers.worker import lambda_handler

__all__ = ["lambda_handler"]
