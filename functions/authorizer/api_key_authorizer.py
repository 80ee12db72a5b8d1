"""API-key authorizer entry point (template.yaml: Handler api_key_authorizer.lambda_handler).

An HTTP API Lambda REQUEST authorizer (payload 2.0, simple responses) for AuthMode=apikey.
The handler lives in the memkit layer (memkit.handlers.authorizer) so the local stack
and the tests run this exact function.
"""

from memkit.handlers.authorizer import lambda_handler

__all__ = ["lambda_handler"]
