"""memkit: serverless memory for AI agents (sessions, scratchpad, long-term memory)."""

from pkgutil import extend_path

# The SDK, memkit.client, lives in a source root of its own (sdk/memkit/client) so that the
# Lambda layer, built from layers/memkit/, never ships it. An installed project maps it
# (pyproject.toml's package-dir); a source checkout with sdk/ on sys.path finds it here. On
# Lambda no other `memkit` folder is on sys.path and this adds nothing.
__path__ = extend_path(__path__, __name__)

__version__ = "0.1.0"
