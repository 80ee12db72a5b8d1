"""Models that curate memory: summaries, extraction, titles, topics (Bedrock Converse | local)."""
