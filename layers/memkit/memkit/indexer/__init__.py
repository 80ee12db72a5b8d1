"""The stream indexer function (template.yaml IndexerFunction)."""
