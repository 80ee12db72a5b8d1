"""The local stack: memkit's real handlers on one machine, no AWS account, no Docker.

Needs the `local` extra (moto, werkzeug, PyYAML); nothing here is imported by a Lambda function.
"""
