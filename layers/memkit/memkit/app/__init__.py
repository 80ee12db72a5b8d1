"""The application layer, under both front doors (the HTTP API's routes, the MCP tools):
what a verified caller may do, each operation confining itself to the caller's scope
(memkit.app.access), over the services and the background jobs a request may start."""
