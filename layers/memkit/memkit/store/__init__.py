"""Data access: the only package that knows DynamoDB (PynamoDB, botocore errors)."""

from memkit.store.protocol import PadState, ProfilePage, Store

__all__ = ["PadState", "ProfilePage", "Store"]
