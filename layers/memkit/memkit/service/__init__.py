"""Business logic: plain classes over domain models, storage passed in."""
