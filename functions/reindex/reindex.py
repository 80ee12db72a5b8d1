"""Reindex function entry point (template.yaml: Handler reindex.lambda_handler).

Invoked by an operator, never on a schedule:
    aws lambda invoke --function-name memkit-<stage>-reindex --payload '{"segments": 8}' out.json
An invocation that runs short of time pauses and returns a `continuation` in its result;
invoke again with {"resume": <continuation>} until the result says "switched": true.
The handler lives in the memkit layer (memkit.handlers.reindex) so the tests run this exact
function.
"""

from memkit.handlers.reindex import lambda_handler

__all__ = ["lambda_handler"]
