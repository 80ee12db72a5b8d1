"""memkit's MCP server (docs/mcp.md): the Model Context Protocol on `POST /mcp`, its tools
run by the same services as the REST API, for the verified caller.

- resource: the endpoint as an OAuth 2.1 protected resource (RFC 9728 metadata, the 401 and
  403 challenges);
- bearer: the route's own authorizer (AuthMode jwt and apikey): a JWT verified as API
  Gateway's JWT authorizer does, or an API key looked up as memkit's Lambda authorizer does;
- asgi: one API Gateway (payload 2.0) event through an ASGI application and back;
- tools: the MCP server (the official `mcp` SDK's MCPServer, stateless, JSON responses) and
  its tools, with the scope each needs.

Only `tools` imports the `mcp` SDK and `bearer` PyJWT, which the MCP function ships and
the layer does not.
"""
