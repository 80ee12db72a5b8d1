"""Background curation's two functions: the stream curator and the memory worker."""
