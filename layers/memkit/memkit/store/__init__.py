"""Data access: the only package that knows DynamoDB (PynamoDB, botocore errors).

Import what you need from its modules (`memkit.store.protocol`, `memkit.store.dynamodb`...):
this package module imports nothing, so a light one (`memkit.store.apikeys`, which the
API-key authorizer loads) costs no more than itself.
"""
