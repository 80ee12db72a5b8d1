"""memkit: serverless memory for AI agents (sessions, scratchpad, long-term memory)."""

__version__ = "0.1.0"
