"""The local stack: DynamoDB (DynamoDB Local, moto or an endpoint), the API function, the HTTP
API in front, and long-term memory: a loopback OpenSearch (memkit_dev.local.opensearch) that
the production adapter talks to, or with `vector_store="dynamodb"` the template's VectorTable
on DynamoDB with vector indexes (memkit_dev.local.vector_dynamodb, in front of the same engine),
and a stream pump that reads the table's stream as Lambda's poller does and invokes the
indexer function with the real records (memkit_dev.local.streams).

Other background parts (the cleanup timer) join through `LocalStack.background`: anything
with start() and stop(), started after the table exists.
"""

from __future__ import annotations

import errno
import logging
import math
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

import boto3
from werkzeug.serving import (
    LISTEN_QUEUE,
    BaseWSGIServer,
    get_sockaddr,
    make_server,
    select_address_family,
)

from memkit.embeddings.local import DIMENSIONS as LOCAL_DIMENSIONS
from memkit_dev import aws
from memkit_dev.local.auth import (
    DEV_TENANT_CLAIM,
    KEY_CACHE_PARAMETER,
    IamAuthorizer,
    IamPrincipal,
    JwtAuthorizer,
    JwtSettings,
    LambdaKeyAuthorizer,
    dev_principal,
    key_cache_seconds,
)
from memkit_dev.local.bedrock import LoopbackBedrock
from memkit_dev.local.dynamodb import MotoDynamoDB, dynamodb_client
from memkit_dev.local.dynamodb_local import DynamoDBLocal, Unavailable, prepare
from memkit_dev.local.functions import FunctionSpec, LocalFunction, function_timeout
from memkit_dev.local.gateway import Cors, HttpApiGateway, http_api_routes, local_domains
from memkit_dev.local.meter import METER_VARIABLE
from memkit_dev.local.opensearch import LoopbackOpenSearch
from memkit_dev.local.queues import QueuePump, create_queues, queue_pump_for
from memkit_dev.local.schedule import ScheduleTimer
from memkit_dev.local.streams import StreamPump, pump_for
from memkit_dev.local.template import (
    VECTOR_TABLE_RESOURCE,
    create_table,
    find_template,
    load_template,
    table_definition,
)
from memkit_dev.local.vector_dynamodb import VectorDynamoDB

API_FUNCTION = "ApiFunction"
MCP_FUNCTION = "McpFunction"
INDEXER_FUNCTION = "IndexerFunction"
CURATOR_FUNCTION = "CuratorFunction"
WORKER_FUNCTION = "MemoryWorkerFunction"
WORK_QUEUE = "MemoryWorkQueue"
WORK_DEAD_LETTER_QUEUE = "MemoryWorkDeadLetterQueue"
CLEANUP_FUNCTION = "CleanupFunction"
KEY_AUTHORIZER_FUNCTION = "ApiKeyAuthorizerFunction"
# The name of the key `memkit serve --auth apikey` makes for user dev.
DEV_KEY_NAME = "memkit serve (development)"
log = logging.getLogger("memkit.local")
Engine = Literal["auto", "dynamodb-local", "moto"]
Embedder = Literal["local", "titan", "cohere"]
OpenSearchFlavour = Literal["domain", "serverless"]
# The index is rebuilt from the table on start; a progress line shows past this long.
REBUILD_QUIET_SECONDS = 1.0
# The longest a local function waits for one DynamoDB answer (see _environment).
MAX_LOCAL_READ_SECONDS = 60.0


class AddressUnavailable(Exception):
    """The stack cannot listen where it was asked to (the port is taken, the host is not
    this machine's): found before anything starts."""


class Background(Protocol):
    def start(self) -> None: ...

    def stop(self) -> None: ...


@dataclass
class LocalStackConfig:
    host: str = "127.0.0.1"
    port: int = 8000
    # A DynamoDB-compatible endpoint (DynamoDB Local, AWS); None = the engine below.
    dynamodb_endpoint: str | None = None
    # auto: DynamoDB Local when Java 17+ is here (installed into tools_dir on first use),
    # else moto in this process; dynamodb-local: that or fail; moto: moto.
    engine: Engine = "moto"
    # DynamoDB Local keeps its data here across restarts; None = in memory (a throwaway run).
    data_dir: Path | None = None
    tools_dir: Path = Path(".tools")
    # Draw a progress line on stderr while the index is rebuilt from the table on start.
    progress: bool = False
    table_name: str = "memkit-local"
    region: str = "us-east-1"
    # Execution environments of the API function (Lambda's concurrency).
    concurrency: int = 4
    template: Path | None = None
    log_level: str = "WARNING"
    metrics: bool = False
    # Index session messages as long-term records (MEMKIT_INDEX_MESSAGES).
    index_messages: bool = True
    # The functions' embedder: local (the shipped model), or titan | cohere, the production
    # Bedrock embedders answered by a loopback Bedrock (memkit_dev.local.bedrock).
    embedder: Embedder = "local"
    # What the loopback OpenSearch stands in for (MEMKIT_OPENSEARCH_FLAVOUR): a managed
    # domain, or a Serverless collection (no custom ids, a search to find a doc's copies).
    opensearch_flavour: OpenSearchFlavour = "domain"
    # Background curation: how long a session must be quiet before extraction (seconds),
    # and the window its summaries keep it within (tokens).
    extraction_quiet_seconds: int = 5
    summary_window_tokens: int = 16_000
    # DeleteMemory (AgentCore) starts deleting a memory's data this long after marking it
    # DELETING (MEMKIT_AGENTCORE_DELETION_GRACE_SECONDS, 30 on AWS).
    agentcore_deletion_grace_seconds: int = 5
    # The cleanup function on a timer (EventBridge Scheduler's stand-in), every this many
    # seconds; 0 = off.
    cleanup_interval_seconds: float = 60.0
    # How callers are identified: none (no identity, every caller an admin), jwt (the
    # gateway verifies bearer tokens: `jwt`'s key set, or the dev key pair in data_dir),
    # iam (the gateway verifies SigV4 for execute-api, as AWS_IAM does) or apikey (the
    # template's ApiKeyAuthorizerFunction checks memkit's keys).
    auth: Literal["none", "jwt", "iam", "apikey"] = "none"
    jwt: JwtSettings | None = None
    # apikey: how long the gateway keeps a key's answer, and what the functions are told of
    # it (the template's ApiKeyCacheSeconds, MEMKIT_API_KEY_CACHE_SECONDS); None: the
    # template's default. 0 keeps no answer: a revoked key is refused at its next request.
    api_key_cache_seconds: int | None = None
    # The gateway's clock (monotonic seconds): the API-key authorizer's answers age on it.
    gateway_clock: Callable[[], float] = time.monotonic
    # iam: the principals whose access keys the gateway knows; empty: the development IAM
    # user, its key kept in data_dir (memkit_dev.local.auth.dev_principal).
    iam_principals: tuple[IamPrincipal, ...] = ()
    # iam: MEMKIT_IAM_TENANT_PATTERN (the template's IamTenantPattern); None: the account.
    iam_tenant_pattern: str | None = None
    # jwt: the claims holding the tenant and the user (MEMKIT_TENANT_CLAIM, _USER_CLAIM).
    tenant_claim: str = DEV_TENANT_CLAIM
    user_claim: str = "sub"
    # Meter every function invocation into this folder (memkit_dev.local.meter): durations,
    # DynamoDB capacity units, SQS sends; None: no metering.
    meter_dir: Path | None = None
    # Origins a browser page may call the API from (the template's CorsAllowedOrigins:
    # comma-separated, or *); empty: no CORS, as the template's default.
    cors_allowed_origins: str = ""
    # The vector index: opensearch (the loopback OpenSearch, a managed domain as the
    # adapter sees it unless opensearch_flavour says serverless, rebuilt from the table on
    # start) or dynamodb (VectorStore dynamodb:
    # the template's VectorTable, kept with the table's data).
    vector_store: Literal["opensearch", "dynamodb"] = "opensearch"

    @property
    def vector_table(self) -> str:
        """The vector table's name (the template's, with this stack's table name)."""
        return f"{self.table_name}-vectors-{embedder_dimensions(self.embedder, self.region)}"


def embedder_dimensions(embedder: Embedder, region: str) -> int:
    """The vector size of `embedder` as the functions build it: the local model's, Titan's
    (MEMKIT_EMBEDDING_DIMENSIONS' default) or Cohere's."""
    if embedder == "local":
        return LOCAL_DIMENSIONS
    from memkit.config import IndexSettings
    from memkit.handlers.wiring import embedder_for

    return embedder_for(IndexSettings(embedder=embedder), region).dimensions


def _plain_variables(
    variables: dict[str, Any] | None, parameters: dict[str, str]
) -> dict[str, str]:
    """Template environment variables that are plain values or a `Ref` to one of
    `parameters` (the template's parameters the stack sets); other intrinsics are resolved
    locally."""
    plain: dict[str, str] = {}
    for name, value in (variables or {}).items():
        if not isinstance(value, dict):
            plain[name] = str(value)
        elif set(value) == {"Ref"} and value["Ref"] in parameters:
            plain[name] = parameters[value["Ref"]]
    return plain


@dataclass
class LocalStack:
    config: LocalStackConfig = field(default_factory=LocalStackConfig)
    background: list[Background] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._moto: MotoDynamoDB | None = None
        self._api: LocalFunction | None = None
        self._mcp: LocalFunction | None = None
        self._indexer: LocalFunction | None = None
        self._curator: LocalFunction | None = None
        self._worker: LocalFunction | None = None
        self._cleanup: LocalFunction | None = None
        self.cleanup_timer: ScheduleTimer | None = None
        self.opensearch: LoopbackOpenSearch | None = None
        self.bedrock: LoopbackBedrock | None = None
        self.vectors: VectorDynamoDB | None = None
        self.pump: StreamPump | None = None
        self.curator_pump: StreamPump | None = None
        self.worker_pump: QueuePump | None = None
        self.queue_urls: dict[str, str] = {}
        # What the indexer could not index after its retries (the on-failure queue).
        self.dead_letters: list[dict[str, Any]] = []
        self._server: BaseWSGIServer | None = None
        self._gateway: HttpApiGateway | None = None
        self._thread: threading.Thread | None = None
        self.dynamodb_endpoint: str | None = None
        # The work queues (moto's SQS, whatever serves DynamoDB).
        self.sqs_endpoint: str | None = None
        self._dynamodb_local: DynamoDBLocal | None = None
        # What serves DynamoDB, in words (for the start banner).
        self.engine = ""
        # The gateway's authorizer: JWT (auth jwt; the dev key pair unless a key set is given),
        # SigV4 (auth iam; the dev IAM user unless principals are given) or the API-key
        # Lambda authorizer (auth apikey, set up once the table exists).
        self.authorizer: JwtAuthorizer | LambdaKeyAuthorizer | IamAuthorizer | None = None
        self._key_authorizer: LocalFunction | None = None
        # auth apikey: a key for user dev made at start (the start banner prints it).
        self.dev_key: str | None = None
        # The template's ApiKeyCacheSeconds as this stack sets it (known once it is loaded).
        self._key_cache_seconds = 0
        if self.config.auth == "jwt":
            self.authorizer = JwtAuthorizer(self._jwt_settings())
        if self.config.auth == "iam":
            principals = self.config.iam_principals or (dev_principal(self.config.data_dir),)
            self.authorizer = IamAuthorizer(principals, self.config.region)

    def _jwt_settings(self) -> JwtSettings:
        """How the gateway verifies tokens (auth jwt): the configured key set, or the dev key."""
        return self.config.jwt or JwtSettings(data_dir=self.config.data_dir)

    @property
    def url(self) -> str:
        assert self._server is not None, "start() first"
        host, port = self._server.socket.getsockname()[:2]
        return f"http://{host}:{port}"

    def _environment(self, template: dict[str, Any], resource: str) -> dict[str, str]:
        config = self.config
        function = template["Resources"][resource]["Properties"]
        # The template's parameters the stack sets, as a deployment's stack would.
        parameters = {KEY_CACHE_PARAMETER: str(self._key_cache_seconds)}
        environment = {
            **_plain_variables(
                template.get("Globals", {})
                .get("Function", {})
                .get("Environment", {})
                .get("Variables"),
                parameters,
            ),
            **_plain_variables(function.get("Environment", {}).get("Variables"), parameters),
            "MEMKIT_TABLE_NAME": config.table_name,
            "MEMKIT_REGION": config.region,
            "AWS_REGION": config.region,
            "AWS_DEFAULT_REGION": config.region,
            "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
            "POWERTOOLS_LOG_LEVEL": config.log_level,
            "POWERTOOLS_METRICS_DISABLED": "false" if config.metrics else "true",
            "MEMKIT_EMBEDDER": config.embedder,
            "MEMKIT_INDEX_MESSAGES": "true" if config.index_messages else "false",
            "MEMKIT_LLM_PROVIDER": "local",
            "MEMKIT_EXTRACTION_QUIET_SECONDS": str(config.extraction_quiet_seconds),
            "MEMKIT_SUMMARY_WINDOW_TOKENS": str(config.summary_window_tokens),
            "MEMKIT_AGENTCORE_DELETION_GRACE_SECONDS": str(config.agentcore_deletion_grace_seconds),
            "MEMKIT_AUTH_MODE": config.auth,
        }
        if config.auth == "jwt":
            environment["MEMKIT_TENANT_CLAIM"] = config.tenant_claim
            environment["MEMKIT_USER_CLAIM"] = config.user_claim
            # The MCP server's RFC 9728 metadata names the issuer the gateway trusts, and its
            # function verifies that issuer's tokens itself (POST /mcp has no authorizer).
            environment["MEMKIT_OAUTH_ISSUER"] = self._jwt_settings().issuer
            # The scopes count only as the issuer names them (the template's JwtScopePrefix).
            environment["MEMKIT_SCOPE_PREFIX"] = self._jwt_settings().scope_prefix
            if resource == MCP_FUNCTION and isinstance(self.authorizer, JwtAuthorizer):
                environment["MEMKIT_JWT_AUDIENCE"] = self._jwt_settings().audience
                environment["MEMKIT_JWT_JWKS"] = self.authorizer.key_set()
        if config.meter_dir is not None:
            environment[METER_VARIABLE] = str(config.meter_dir)
        if config.auth == "iam" and config.iam_tenant_pattern:
            environment["MEMKIT_IAM_TENANT_PATTERN"] = config.iam_tenant_pattern
        if WORK_QUEUE in self.queue_urls:
            environment["MEMKIT_WORK_QUEUE_URL"] = self.queue_urls[WORK_QUEUE]
            environment["MEMKIT_SQS_ENDPOINT"] = self.sqs_endpoint or ""
        if self.opensearch is not None:
            environment.update(
                {
                    "MEMKIT_OPENSEARCH_ENDPOINT": self.opensearch.url,
                    "MEMKIT_OPENSEARCH_FLAVOUR": config.opensearch_flavour,
                    "MEMKIT_OPENSEARCH_AUTH": "none",
                }
            )
        if self.bedrock is not None:
            environment["MEMKIT_BEDROCK_ENDPOINT"] = self.bedrock.url
        if self.vectors is not None:
            environment["MEMKIT_VECTOR_TABLE"] = config.vector_table
            environment["MEMKIT_VECTOR_ENDPOINT"] = self.vectors.url
        if self.dynamodb_endpoint:
            environment["MEMKIT_DYNAMODB_ENDPOINT"] = self.dynamodb_endpoint
        if aws.is_local(self.dynamodb_endpoint):
            environment.update(aws.LOCAL_CREDENTIALS)
            # A local engine on a busy machine can be slow without being down (moto walks its
            # table per Query and answers one request at a time): a request may take the
            # function's Timeout (at most a minute: past that it is stuck, not slow) instead
            # of DynamoDB's 5 s, so a slow answer is waited for, not retried into a 503.
            timeout = min(function_timeout(template, resource), MAX_LOCAL_READ_SECONDS)
            environment["MEMKIT_READ_TIMEOUT_SECONDS"] = str(timeout)
        return environment

    def start(self) -> LocalStack:
        try:
            return self._start()
        except BaseException:
            self.stop()  # what did start (DynamoDB Local: a process of its own) stops
            raise

    def _listen(self) -> BaseWSGIServer:
        """The HTTP API's socket, bound before anything else starts (a taken port is said at
        once, not after DynamoDB Local and the index rebuild); requests wait in its backlog
        until the gateway serves them."""
        config = self.config
        family = select_address_family(config.host, config.port)
        try:  # bound here: werkzeug's own bind prints its words and exits the process
            with socket.socket(family, socket.SOCK_STREAM) as listener:
                listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                listener.bind(get_sockaddr(config.host, config.port, family))
                listener.listen(LISTEN_QUEUE)
                # The server takes a copy of the descriptor (socket.fromfd).
                return make_server(
                    config.host,
                    config.port,
                    self._serve_request,
                    threaded=True,
                    fd=listener.fileno(),
                )
        except OSError as exc:
            where = f"{config.host}:{config.port}"
            if exc.errno == errno.EADDRINUSE:
                reason = f"{where} is already in use (another memkit serve?): stop it or use --port"
            else:
                reason = f"cannot listen on {where}: {exc.strerror or exc}"
            raise AddressUnavailable(reason) from exc

    def _serve_request(self, environ: dict[str, Any], start_response: Any) -> Any:
        assert self._gateway is not None, "served only once started"
        return self._gateway(environ, start_response)

    def _start(self) -> LocalStack:
        config = self.config
        template_path = config.template or find_template()
        template = load_template(template_path)
        self._server = self._listen()
        self._key_cache_seconds = key_cache_seconds(template, config.api_key_cache_seconds)
        # moto's server always runs: it serves the work queues (SQS), and DynamoDB when
        # nothing else does.
        self._moto = MotoDynamoDB().start()
        self.sqs_endpoint = self._moto.endpoint
        self.dynamodb_endpoint, self.engine = self._dynamodb(self._moto.endpoint)
        if aws.is_local(self.dynamodb_endpoint):
            aws.use_local_credentials()
        os.environ.setdefault("AWS_ACCOUNT_ID_ENDPOINT_MODE", "disabled")
        create_table(
            dynamodb_client(self.dynamodb_endpoint, config.region), template, config.table_name
        )

        if config.embedder != "local":
            self.bedrock = LoopbackBedrock().start()
        if config.vector_store == "dynamodb":
            self._start_vector_table(template)
        else:
            self.opensearch = LoopbackOpenSearch(
                embedder_dimensions(config.embedder, config.region),
                flavour=config.opensearch_flavour,
            )
            self.opensearch.start()
        root = template_path.parent
        self._create_queues(template)  # first: every function's environment names them
        self._api = self._function(template, root, API_FUNCTION, config.concurrency).prestart()
        # One environment each: an event source mapping runs a shard's batches one at a
        # time. Every function's cold start begins now, alongside the rebuild below.
        self._indexer = self._function(template, root, INDEXER_FUNCTION).prestart()
        self._curator = self._function(template, root, CURATOR_FUNCTION).prestart()
        self._worker = self._function(template, root, WORKER_FUNCTION).prestart()
        if config.cleanup_interval_seconds > 0:
            self._cleanup = self._function(template, root, CLEANUP_FUNCTION).prestart()
        self.pump = pump_for(
            template,
            INDEXER_FUNCTION,
            self.dynamodb_endpoint,
            config.region,
            config.table_name,
            self._indexer.invoke,
            on_failure=self.dead_letters.append,
            positions=self._positions(INDEXER_FUNCTION),
        )
        # The table is the source of truth and the loopback index lives in memory: fill it
        # from the table before the pump starts, so the two never race for the index (the
        # pump's indexer would create a plain index where the rebuild makes an alias). The
        # gateway does not serve yet: nothing is written meanwhile, and the pump then reads
        # on from its kept positions (from TRIM_HORIZON the first time; replays are harmless).
        # The vector table keeps its data with the table's.
        if self.opensearch is not None:
            self._rebuild_index()
        self._api.warm()
        self._indexer.warm()
        self.pump.start()
        self._start_curation(template)
        self._start_cleanup(template)
        if config.auth == "apikey":
            self._start_key_authorizer(template, root)
        # The MCP function starts on its first request, as Lambda would: its SDK's import is
        # a cold start of its own, which a stack that never serves MCP does not pay.
        mcp_spec = FunctionSpec.from_template(template, root, MCP_FUNCTION)
        self._mcp = LocalFunction(
            mcp_spec, self._environment(template, MCP_FUNCTION), config.concurrency
        )
        gateway = HttpApiGateway(
            [
                (self._api, http_api_routes(template, API_FUNCTION)),
                (self._mcp, http_api_routes(template, MCP_FUNCTION)),
            ],
            local_health=self.health,
            authorizer=self.authorizer,
            cors=Cors.from_template(template, config.cors_allowed_origins),
        )
        self._gateway = gateway
        gateway.domain_names = local_domains(config.host, self._server.socket.getsockname()[1])
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="http-api", daemon=True
        )
        self._thread.start()
        for part in self.background:
            part.start()
        return self

    def _start_key_authorizer(self, template: dict[str, Any], root: Path) -> None:
        """The API-key authorizer function in one execution environment, and a development
        key of user dev (the previous start's is revoked: one dev key at a time)."""
        from memkit.config import ApiKeySettings
        from memkit.handlers.wiring import api_keys_for

        spec = FunctionSpec.from_template(template, root, KEY_AUTHORIZER_FUNCTION)
        environment = self._environment(template, KEY_AUTHORIZER_FUNCTION)
        self._key_authorizer = LocalFunction(spec, environment, 1)
        self._key_authorizer.warm()
        self.authorizer = LambdaKeyAuthorizer(
            self._key_authorizer,
            self._key_cache_seconds,
            clock=self.config.gateway_clock,
        )
        settings = ApiKeySettings(
            table_name=self.config.table_name,
            region=self.config.region,
            dynamodb_endpoint=self.dynamodb_endpoint,
        )
        keys = api_keys_for(settings)
        for old in keys.keys_of("default"):
            if old.name == DEV_KEY_NAME and old.revoked_at is None:
                keys.revoke("default", old.key_id)
        scopes = ["memory:read", "memory:write"]
        self.dev_key = keys.create("default", scopes, user_id="dev", name=DEV_KEY_NAME).plain

    def health(self) -> dict[str, Any]:
        """What GET /v1/health adds on the local stack: the engine, each stream pump (a pump
        whose records wait with no batch done says `stalled`) and how many stream batches
        went to the on-failure destination (AWS: the dead-letter queues)."""
        pumps = {"indexer": self.pump, "curator": self.curator_pump}
        return {
            "dynamodb": self.engine,
            "stream_pumps": {name: p.health() for name, p in pumps.items() if p is not None},
            "dead_letters": len(self.dead_letters),
            # Where its parts listen: what `memkit reindex --local` rebuilds from and into.
            "endpoints": {
                "table": self.config.table_name,
                "region": self.config.region,
                "dynamodb": self.dynamodb_endpoint,
                "opensearch": self.opensearch.url if self.opensearch is not None else None,
                "vectors": self.vectors.url if self.vectors is not None else None,
                "vector_table": self.config.vector_table if self.vectors is not None else None,
            },
        }

    def failure(self) -> str | None:
        """What ended under the running stack (DynamoDB Local's Java, its own process), in
        words; None while everything runs. Its functions then answer 503 (health too)."""
        if self._dynamodb_local is None:
            return None
        status = self._dynamodb_local.exit_status()
        return None if status is None else f"DynamoDB Local exited (status {status})"

    def _dynamodb(self, moto_endpoint: str) -> tuple[str, str]:
        """The DynamoDB endpoint the configuration asks for, and what serves it, in words."""
        config = self.config
        if config.dynamodb_endpoint:
            return config.dynamodb_endpoint, config.dynamodb_endpoint
        if config.engine != "moto":
            try:
                home = prepare(config.tools_dir)
                self._dynamodb_local = DynamoDBLocal(home, config.data_dir).start()
                where = config.data_dir or "memory"
                return self._dynamodb_local.endpoint, f"DynamoDB Local (data in {where})"
            except Unavailable as exc:
                if config.engine == "dynamodb-local":
                    raise
                log.warning(
                    "DynamoDB Local unavailable (%s): moto instead, in memory, small data only",
                    exc,
                )
        return moto_endpoint, "moto, in memory (small data only)"

    def _index_settings(self) -> dict[str, Any]:
        """The embedder and vector index the functions use, as IndexSettings fields."""
        return {
            "embedder": self.config.embedder,
            "bedrock_endpoint": self.bedrock.url if self.bedrock is not None else None,
            "opensearch_flavour": self.config.opensearch_flavour,
            "opensearch_auth": "none",
        }

    def _start_vector_table(self, template: dict[str, Any]) -> None:
        """DynamoDB with vector indexes in front of the engine, and the template's
        VectorTable on it: created, or (data kept from an earlier run) given its indexes
        again, filled from the table's items."""
        config = self.config
        assert self.dynamodb_endpoint is not None
        dimensions = embedder_dimensions(config.embedder, config.region)
        self.vectors = VectorDynamoDB(self.dynamodb_endpoint, region=config.region).start()
        client = dynamodb_client(self.vectors.url, config.region)
        created = create_table(
            client, template, config.vector_table, VECTOR_TABLE_RESOURCE, dimensions
        )
        if not created:
            definition = table_definition(
                template, config.vector_table, VECTOR_TABLE_RESOURCE, dimensions
            )
            self.vectors.adopt(definition)

    def _function(
        self, template: dict[str, Any], root: Path, resource: str, concurrency: int = 1
    ) -> LocalFunction:
        """The template's function `resource` with `concurrency` execution environments."""
        spec = FunctionSpec.from_template(template, root, resource)
        return LocalFunction(spec, self._environment(template, resource), concurrency)

    def _positions(self, function: str) -> Path | None:
        """Where a stream pump keeps its shard positions: in the data folder, with the data
        whose stream it reads (None in memory: a stream that dies with the stack)."""
        if self.config.data_dir is None:
            return None
        return (
            self.config.data_dir / "stream-positions" / f"{self.config.table_name}-{function}.json"
        )

    def _rebuild_index(self) -> None:
        """Fill the loopback index from the table, as `memkit reindex` does (nothing to do
        for an empty table)."""
        from memkit.config import ReindexSettings
        from memkit.handlers.wiring import reindexer
        from memkit_dev.reindex import run_quietly

        config = self.config
        client = dynamodb_client(self.dynamodb_endpoint, config.region)
        if not client.scan(TableName=config.table_name, Limit=1, Select="COUNT").get("Count"):
            return
        assert self.opensearch is not None
        settings = ReindexSettings(
            table_name=config.table_name,
            region=config.region,
            dynamodb_endpoint=self.dynamodb_endpoint,
            opensearch_endpoint=self.opensearch.url,
            **self._index_settings(),
        )
        show_after = REBUILD_QUIET_SECONDS if config.progress else math.inf
        report = run_quietly(reindexer(settings), sys.stderr, show_after=show_after)
        log.info("index rebuilt from the table: %s", report.summary())

    def _create_queues(self, template: dict[str, Any]) -> None:
        """The work queues (moto's SQS) as the template declares them."""
        config = self.config
        sqs = boto3.client("sqs", endpoint_url=self.sqs_endpoint, region_name=config.region)
        self.queue_urls = create_queues(
            sqs,
            template,
            {
                WORK_QUEUE: f"{config.table_name}-work",
                WORK_DEAD_LETTER_QUEUE: f"{config.table_name}-work-dlq",
            },
        )

    def _start_curation(self, template: dict[str, Any]) -> None:
        """The curator on the stream and the memory worker on the work queue, each as the
        template declares them."""
        config = self.config
        assert self._curator is not None, "prestarted by _start"
        assert self._worker is not None, "prestarted by _start"
        self._curator.warm()
        self._worker.warm()
        self.curator_pump = pump_for(
            template,
            CURATOR_FUNCTION,
            self.dynamodb_endpoint,
            config.region,
            config.table_name,
            self._curator.invoke,
            on_failure=self.dead_letters.append,
            positions=self._positions(CURATOR_FUNCTION),
        )
        self.worker_pump = queue_pump_for(
            template,
            WORKER_FUNCTION,
            self.sqs_endpoint,
            config.region,
            self.queue_urls[WORK_QUEUE],
            self._worker.invoke,
        )
        self.curator_pump.start()
        self.worker_pump.start()

    def _start_cleanup(self, template: dict[str, Any]) -> None:
        """The cleanup function, invoked every `cleanup_interval_seconds` with the time its
        template Timeout gives it (off at 0)."""
        config = self.config
        if config.cleanup_interval_seconds <= 0:
            return
        assert self._cleanup is not None, "prestarted by _start"
        self._cleanup.warm()
        self.cleanup_timer = ScheduleTimer(
            f"{config.table_name}-cleanup",
            self._cleanup.invoke,
            config.cleanup_interval_seconds,
            function_timeout(template, CLEANUP_FUNCTION),
            config.region,
        )
        self.cleanup_timer.start()

    def stop(self) -> None:
        for part in reversed(self.background):
            part.stop()
        if self.cleanup_timer is not None:
            self.cleanup_timer.stop()
        if self._cleanup is not None:
            self._cleanup.stop()
        for pump in (self.worker_pump, self.curator_pump, self.pump):
            if pump is not None:
                pump.stop()
        for function in (self._worker, self._curator, self._indexer):
            if function is not None:
                function.stop()
        if self._server is not None:
            # shutdown() waits for serve_forever to return: only a running one can
            if self._thread is not None and self._thread.is_alive():
                self._server.shutdown()
            self._server.server_close()
        for http_function in (self._api, self._mcp):
            if http_function is not None:
                http_function.stop()
        if self._key_authorizer is not None:
            self._key_authorizer.stop()
        if self.opensearch is not None:
            self.opensearch.stop()
        if self.bedrock is not None:
            self.bedrock.stop()
        if self.vectors is not None:
            self.vectors.stop()
        if self._dynamodb_local is not None:
            self._dynamodb_local.stop()
        if self._moto is not None:
            self._moto.stop()

    def __enter__(self) -> LocalStack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
