"""AgentCore Memory's API (boto3 `bedrock-agentcore` and `bedrock-agentcore-control`) over
memkit's sessions and long-term records: a wing of its own (docs/agentcore.md). Its routes,
models, mapping, error shape, extraction, deletion and table live here; the core reaches it
only through the hooks that memkit.agentcore.wing fills and memkit.handlers.wiring plugs in.
"""
