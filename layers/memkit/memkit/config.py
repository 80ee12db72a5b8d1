"""Settings: one pydantic model per function, read from the environment on first use.

Never read at import time (a cold start must not fail on a missing variable before the
handler can report it), never `os.environ[...]` in logic.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from memkit.identity import IdentitySettings

ENV_PREFIX = "MEMKIT_"
# Settings also read under the Agent Memory Server's name when MEMKIT_<FIELD> is unset.
AMS_NAMES = {"index_all_messages": "INDEX_ALL_MESSAGES_IN_LONG_TERM_MEMORY"}


def _from_env(model: type[BaseModel], environ: dict[str, str] | None = None) -> dict[str, Any]:
    """The model's fields found in the environment as MEMKIT_<FIELD_NAME> (or AMS's name)."""
    env = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    for name in model.model_fields:
        raw = env.get(f"{ENV_PREFIX}{name.upper()}")
        if (raw is None or raw == "") and name in AMS_NAMES:
            raw = env.get(AMS_NAMES[name])
        if raw is not None and raw != "":
            values[name] = raw
    return values


class StoreSettings(BaseModel):
    """Where the DynamoDB table is."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    table_name: str = Field(min_length=3, max_length=255)
    region: str = Field(default_factory=lambda: os.environ.get("AWS_REGION", "us-east-1"))
    # A DynamoDB-compatible endpoint (the local stack's moto, DynamoDB Local); None = AWS.
    dynamodb_endpoint: str | None = None
    connect_timeout_seconds: float = Field(default=2.0, gt=0)
    read_timeout_seconds: float = Field(default=5.0, gt=0)
    max_retry_attempts: int = Field(default=3, ge=0, le=10)


class IndexSettings(BaseModel):
    """The embedding provider and the vector index (API and indexer share these)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # local: the shipped static model (no network); titan | cohere: Bedrock InvokeModel.
    embedder: Literal["local", "titan", "cohere"] = "local"
    # The Bedrock model id; None = the provider's default (Titan V2, Cohere English v3).
    embedding_model: str | None = None
    # Titan V2 only: 256, 512 or 1024.
    embedding_dimensions: int = Field(default=1024)
    # A Bedrock-runtime-compatible endpoint for titan | cohere (the local stack's loopback
    # Bedrock); None = AWS.
    bedrock_endpoint: str | None = None
    # An OpenSearch endpoint (https://...); None = the in-process local index (one process).
    opensearch_endpoint: str | None = None
    # domain: a managed domain (custom _id, external versioning); serverless: an AOSS
    # VECTORSEARCH collection (no custom _id, no refresh, no delete-by-query).
    opensearch_flavour: Literal["domain", "serverless"] = "domain"
    opensearch_index: str = Field(default="memkit-memories", min_length=1, max_length=255)
    # sigv4 on AWS (service es or aoss by flavour); none for the local stack's loopback index.
    opensearch_auth: Literal["sigv4", "none"] = "sigv4"
    # How long one request to OpenSearch may take, its resends included (a bulk write at
    # least 30 s), and never past the deadline in force (memkit.times.within: the API and
    # MCP functions' invocation less a margin, a cleanup run's). A Serverless collection
    # that scaled to zero answers its first request after 10 to 30 s: the template gives
    # the background functions 40 s, the API's 20 s.
    opensearch_timeout_seconds: float = Field(default=10.0, gt=0, le=300)
    # VectorStore dynamodb: the table whose native vector index is the vector index
    # (memkit.vectors.dynamodb); set, it is used instead of OpenSearch. Its vector index, and
    # a DynamoDB-compatible endpoint for it (the local stack's stand-in, memkit_dev.local.
    # vector_dynamodb); None = AWS, where SearchVectors goes to search-dynamodb.<region>.
    vector_table: str | None = Field(default=None, min_length=3, max_length=255)
    vector_index_name: str = Field(
        default="memkit-vectors", min_length=3, max_length=255, pattern=r"^[a-zA-Z0-9_.-]+$"
    )
    vector_endpoint: str | None = None
    # Index session messages as long-term records of memory_type "message" (a session's own
    # index_messages setting wins).
    index_messages: bool = True
    # AMS's INDEX_ALL_MESSAGES_IN_LONG_TERM_MEMORY: indexed messages outlive their session's
    # TTL as long-term records, and a GET of an expired session rebuilds it from them.
    index_all_messages: bool = False


class ApiSettings(StoreSettings, IndexSettings):
    """The API function's settings (MEMKIT_* environment variables)."""

    # How callers are identified (memkit.identity): jwt | iam | apikey | none (no identity:
    # the local stack and private networks only; the template's AuthMode sets it).
    auth_mode: Literal["none", "jwt", "iam", "apikey"] = "none"
    # The tenant of auth mode none, and of jwt when no tenant claim is configured.
    default_tenant: str = Field(default="default", min_length=1, max_length=128)
    # jwt: the claim holding the tenant (e.g. custom:tenant); None: one tenant, the default.
    tenant_claim: str | None = Field(default=None, min_length=1, max_length=128)
    # jwt: the claim holding the caller's user id.
    user_claim: str = Field(default="sub", min_length=1, max_length=128)
    # iam: a regex with a `tenant` group, matched against the principal's ARN; None: the
    # principal's account id is its tenant.
    iam_tenant_pattern: str | None = Field(default=None, min_length=1, max_length=512)
    # jwt: what the identity provider puts before memkit's scopes (the template's
    # JwtScopePrefix, Cognito's "memkit/"): only `<prefix>memory:read` and so on count.
    scope_prefix: str = Field(default="", max_length=256)
    # Optimistic-concurrency retries for a PATCH that loses the race to another writer.
    merge_max_attempts: int = Field(default=25, ge=1, le=100)
    # DELETE /v1/users/{user_id} works this long, then leaves the rest to a job on the
    # memory work queue (the function times out at 25 s; API Gateway waits 30 s); never past
    # the invocation's deadline (memkit.jobs.deletion), whatever this says.
    user_deletion_budget_seconds: float = Field(default=10.0, ge=0, le=25)
    # DeleteMemory (AgentCore) starts deleting a memory's data this long after it marked the
    # memory DELETING: longer than a request that found it ACTIVE can take (the function's
    # 25 s), so the deletion finds what such a request wrote. SQS delays at most 900 s.
    agentcore_deletion_grace_seconds: int = Field(default=30, ge=0, le=900)
    work_queue_url: str | None = None
    sqs_endpoint: str | None = None
    # The template's ApiKeyCacheSeconds: how long API Gateway keeps a key's answer, so how
    # long after a user's deletion revoked a key its follow-up sweep runs (jobs/users.py).
    api_key_cache_seconds: int = Field(default=300, ge=0, le=3600)
    # Requests a tenant may make a minute (memkit.store.quota: one counter write each);
    # 0: no quota. Beyond it: 429 quota_exceeded with Retry-After.
    tenant_requests_per_minute: int = Field(default=0, ge=0, le=10_000_000)

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> ApiSettings:
        return cls.model_validate(_from_env(cls, environ))

    @field_validator("iam_tenant_pattern")
    @classmethod
    def _tenant_pattern(cls, pattern: str | None) -> str | None:
        if pattern is not None:
            try:
                compiled = re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"not a regular expression: {exc}") from exc
            if "tenant" not in compiled.groupindex:
                raise ValueError("the pattern needs a (?P<tenant>...) group")
        return pattern

    @property
    def identity(self) -> IdentitySettings:
        return IdentitySettings(
            auth_mode=self.auth_mode,
            default_tenant=self.default_tenant,
            tenant_claim=self.tenant_claim,
            user_claim=self.user_claim,
            iam_tenant_pattern=self.iam_tenant_pattern,
            scope_prefix=self.scope_prefix,
        )


def audiences(listed: str) -> list[str]:
    """The audiences of a comma-separated list (the template's JwtAudience)."""
    return [one.strip() for one in listed.split(",") if one.strip()]


class McpSettings(BaseModel):
    """What the MCP function adds to the API's settings: how it describes itself as an OAuth
    protected resource (RFC 9728) to MCP clients."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # The authorization server whose tokens the API accepts (the JWT issuer); None: none is
    # advertised (auth modes apikey, iam and none: credentials come from elsewhere).
    oauth_issuer: str | None = Field(default=None, min_length=1, max_length=1024)
    # What the authorization server puts before memkit's scopes (Cognito: "memkit/"): the
    # scopes a client asks it for.
    scope_prefix: str = Field(default="", max_length=256)
    # AuthMode jwt: POST /mcp has no authorizer at the gateway (so its 401 can name the
    # metadata) and the function verifies tokens of `oauth_issuer` itself, as the gateway's
    # JWT authorizer does: the audiences it accepts (comma-separated, the template's
    # JwtAudience or the user pool's client), and where the issuer's keys are: a key set URL,
    # the key set itself as JSON (the local stack's development keys), or None: discovered
    # through <issuer>/.well-known/openid-configuration, as API Gateway finds them.
    jwt_audience: str | None = Field(default=None, min_length=1, max_length=4096)
    jwt_jwks: str | None = Field(default=None, min_length=1, max_length=16_384)

    @property
    def audiences(self) -> list[str]:
        return audiences(self.jwt_audience or "")

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> McpSettings:
        return cls.model_validate(_from_env(cls, environ))


@lru_cache(maxsize=1)
def mcp_settings() -> McpSettings:
    """The MCP function's own settings, validated once per process (first use, not import)."""
    return McpSettings.from_env()


class IndexerSettings(StoreSettings, IndexSettings):
    """The stream indexer's settings: it writes index states and promoted records back."""

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> IndexerSettings:
        return cls.model_validate(_from_env(cls, environ))


@lru_cache(maxsize=1)
def indexer_settings() -> IndexerSettings:
    """The indexer's settings, validated once per process (first use, not import)."""
    return IndexerSettings.from_env()


@lru_cache(maxsize=1)
def api_settings() -> ApiSettings:
    """The API settings, validated once per process (first use, not import)."""
    return ApiSettings.from_env()


class ApiKeySettings(StoreSettings):
    """The API-key authorizer (functions/authorizer) and `memkit keys`: the table only.

    The DynamoDB client is tighter than the other functions': the gateway waits for the
    authorizer on every uncached request, and a table that does not answer is better a
    quick error (the client retries) than a request held for seconds."""

    connect_timeout_seconds: float = Field(default=1.0, gt=0)
    read_timeout_seconds: float = Field(default=2.0, gt=0)
    max_retry_attempts: int = Field(default=2, ge=0, le=10)
    # A key's `last_used` is written when the stored one is older than this (an UpdateItem
    # at most once an interval per key); 0: never written (the authorizer then only reads).
    api_key_last_used_seconds: int = Field(default=3600, ge=0, le=86_400)

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> ApiKeySettings:
        return cls.model_validate(_from_env(cls, environ))


@lru_cache(maxsize=1)
def api_key_settings() -> ApiKeySettings:
    """The authorizer's settings, validated once per process (first use, not import)."""
    return ApiKeySettings.from_env()


class LLMSettings(BaseModel):
    """The language model that curates memory: summaries, extraction, titles, topics."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # local: extractive and heuristic methods, no network (it finds no facts);
    # bedrock: the Converse API with `llm_model`.
    llm_provider: Literal["local", "bedrock"] = "local"
    # A Converse model or inference profile id; None = amazon.nova-lite-v1:0. Where the model
    # is offered only through cross-region inference, use the profile (us.amazon.nova-lite-v1:0).
    llm_model: str | None = "amazon.nova-lite-v1:0"
    # A read waiting longer than this is abandoned and retried (background work: keep it
    # well inside the function's own timeout).
    llm_timeout_seconds: float = Field(default=30.0, gt=0, le=300)

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> LLMSettings:
        return cls.model_validate(_from_env(cls, environ))


@lru_cache(maxsize=1)
def llm_settings() -> LLMSettings:
    """The memory model's settings, validated once per process (first use, not import)."""
    return LLMSettings.from_env()


class CurationSettings(StoreSettings, IndexSettings, LLMSettings):
    """Background curation (the stream curator and the memory worker)."""

    # The memory work queue (the curator sends to it) and an SQS-compatible endpoint for
    # the local stack (None = AWS).
    work_queue_url: str | None = None
    sqs_endpoint: str | None = None
    # A session's view is summarised once its messages pass `summary_threshold` of this
    # many tokens, keeping the newest 40% of it.
    summary_window_tokens: int = Field(default=16_000, ge=500, le=2_000_000)
    summary_threshold: float = Field(default=0.7, ge=0.1, le=0.95)
    # Extraction waits until a session has been quiet this long (SQS delays at most 900 s).
    extraction_quiet_seconds: int = Field(default=60, ge=0, le=900)
    # As ApiSettings': a user's deletion the worker finishes queues the same follow-up.
    api_key_cache_seconds: int = Field(default=300, ge=0, le=3600)

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> CurationSettings:
        return cls.model_validate(_from_env(cls, environ))


@lru_cache(maxsize=1)
def curation_settings() -> CurationSettings:
    """The curator's and the worker's settings, validated once per process."""
    return CurationSettings.from_env()


class CleanupSettings(StoreSettings, IndexSettings, LLMSettings):
    """The scheduled cleanup run (functions/cleanup): expiry, forgetting, compaction, orphans.

    A run stops starting work `cleanup_margin_seconds` or `cleanup_margin_fraction` of the
    time Lambda gives it before the timeout, whichever is larger, so it saves its cursors and
    reports before Lambda would kill it; `cleanup_budget_seconds` caps it further."""

    cleanup_margin_seconds: float = Field(default=10.0, ge=0, le=300)
    cleanup_margin_fraction: float = Field(default=0.15, ge=0, lt=1)
    # None: as long as the function's timeout allows.
    cleanup_budget_seconds: float | None = Field(default=None, gt=0, le=900)
    # Expired sessions read from the lifecycle index per Query page.
    expiry_page_size: int = Field(default=100, ge=1, le=1000)
    # Vectors the orphan sweep checks against the table per run (memkit.jobs.orphans).
    orphan_sample_size: int = Field(default=1000, ge=0, le=100_000)
    # How long the sweep rests after a pass over the whole index: the runs in between leave
    # a Serverless collection that scaled to zero asleep. 0: a pass starts as one ends, and
    # a rest saved under a longer interval ends at the next run.
    orphan_sweep_interval_seconds: int = Field(default=7 * 86_400, ge=0, le=366 * 86_400)

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> CleanupSettings:
        return cls.model_validate(_from_env(cls, environ))


@lru_cache(maxsize=1)
def cleanup_settings() -> CleanupSettings:
    """The cleanup run's settings, validated once per process (first use, not import)."""
    return CleanupSettings.from_env()


class ReindexSettings(StoreSettings, IndexSettings):
    """A rebuild of the vector index (`memkit reindex`, functions/reindex): the embedder
    and index settings are those of the index being built (a new model, new dimensions)."""

    # Parallel Scan segments, each read by its own thread.
    reindex_segments: int = Field(default=4, ge=1, le=64)
    # Items a Scan page evaluates (and the most one indexing batch embeds).
    reindex_page_size: int = Field(default=500, ge=1, le=1000)

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> ReindexSettings:
        return cls.model_validate(_from_env(cls, environ))
