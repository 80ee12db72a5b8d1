"""Vector indexes for long-term memory: the protocol, filters, and the local exact index."""
