"""API function entry point (template.yaml: Handler memory_api.lambda_handler).

The handler lives in the memkit layer (memkit.handlers.api) so the local stack
and the tests run this exact function.
"""

import gc

# The cold start allocates hundreds of thousands of long-lived objects (pydantic schemas,
# botocore models); cyclic GC passes over them cost ~20% of it. The handler re-enables the
# collector after the first invocation, with that heap frozen out of its way.
gc.disable()

from memkit.handlers.api import lambda_handler  # noqa: E402

__all__ = ["lambda_handler"]
