"""The HTTP edge: Powertools resolver, routers, error mapping, the Lambda handler."""
