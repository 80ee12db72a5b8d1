"""MCP function entry point (template.yaml: Handler mcp_server.lambda_handler).

The handler lives in the memkit layer (memkit.handlers.mcp) so the local stack and the tests
run this exact function; the `mcp` SDK it needs is this function's own (requirements.txt),
not the layer's, so the API function's cold start does not load it.
"""

import gc

# As the API function: no cyclic GC passes over the startup heap (the SDK's pydantic models
# among it); the handler resumes the collector after the first invocation, that heap frozen.
gc.disable()

from memkit.handlers.mcp import lambda_handler  # noqa: E402

__all__ = ["lambda_handler"]
