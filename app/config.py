"""Settings at the edge: the only place that reads environment variables (prefix KVCHAT_).

Each setting is declared once, below: `setting()` (app/setting.py) gives its flags (llama-server's
names), default, group and the `EngineConfig` field it feeds, the annotation its type, the
docstring under it its help. Its environment variable is KVCHAT_ plus its name, unless its
`validation_alias` lists others. The CLI (app/__main__.py), docs/configuration.md (`python -m
app.config_reference`) and `Settings.engine_config()` (app/config_derived.py, with the paths and
the checks across settings) are derived from these declarations. CLI flags override the
environment, which overrides the defaults; everything inside the engine sees only `EngineConfig`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import AliasChoices
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.config_derived import DerivedSettings
from app.setting import setting

# llama-server's -ctk/-ctv choices.
KvType = Literal["f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1"]

SERVER, MODEL, SLOTS, CACHE = "Server", "Model", "Slots and batching", "KV cache"
LIMITS, IMAGES, DOCUMENTS, STORAGE = "Requests and limits", "Images", "Documents", "Storage"
SPECULATION, REASONING, ROUTER = "Speculative decoding", "Reasoning", "Router"


class Settings(DerivedSettings, BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="KVCHAT_", extra="ignore", use_attribute_docstrings=True
    )

    host: str = setting("127.0.0.1", "--host", group=SERVER)
    """address to listen on; several, comma-separated (llama-server's)"""
    port: int = setting(8080, "--port", group=SERVER)
    """port to listen on"""
    # With neither this key nor keys in the database (`python -m app keys create`) the server is
    # open. The lower-case choice lets the CLI pass it by name.
    api_key: str | None = setting(
        None,
        "--api-key",
        group=SERVER,
        validation_alias=AliasChoices("KVCHAT_API_KEY", "LLAMA_API_KEY", "api_key"),
    )
    """a static API key clients send as `Authorization: Bearer KEY` (llama-server's); an admin
    key of tenant `""`"""
    shutdown_grace: float = setting(10.0, "--shutdown-grace", group=SERVER, ge=0.0)
    """on SIGTERM, seconds in-flight requests may finish before they are cancelled"""
    warmup: bool = setting(True, "--no-warmup", group=SERVER, engine="warmup")
    """skip the warm-up decode at start"""
    sleep_idle_seconds: float = setting(
        -1.0, "--sleep-idle-seconds", group=SERVER, engine="sleep_idle_seconds"
    )
    """seconds without work before the model is freed (its conversations' KV stays in the
    host and disk tiers; the next request loads it again); -1: never"""
    verbose: bool = setting(False, "-v", "--verbose", group=SERVER, engine="verbose")
    """llama.cpp's own log lines"""
    log_level: str = setting("info", "--log-level", group=SERVER)
    """log level of the server and uvicorn"""
    # Also names its journal in a shared --cache-dir (engine_config() fills in the default).
    replica_name: str | None = setting(None, "--replica-name", group=SERVER, engine="cache_journal")
    """this server's name in the X-Replica response header and its shared-cache journal, one
    per replica behind a load balancer (unset: host name:port)"""
    # Unset differs from llama-server's * only for an open server: it stores sessions and
    # documents, which any web page in a browser on the same machine could read otherwise.
    cors_origins: str | None = setting(None, "--cors-origins", group=SERVER)
    """origins a browser may call the API from: * (any), localhost (pages of localhost,
    127.0.0.1 or [::1]), or origins comma-separated; unset: * with --api-key (llama-server's
    default), localhost without"""
    cors_methods: str = setting("GET, POST, DELETE, OPTIONS", "--cors-methods", group=SERVER)
    """allowed methods a CORS preflight answers with"""
    cors_headers: str = setting("*", "--cors-headers", group=SERVER)
    """allowed headers a CORS preflight answers with"""
    cors_credentials: bool = setting(True, "--cors-credentials", group=SERVER)
    """CORS requests may carry credentials; with --cors-origins * the request's origin is
    reflected (llama-server's)"""
    # DNS rebinding (app/api/middleware/browser_guard.py): a page of another site whose name
    # resolves to 127.0.0.1 would otherwise be this server's own origin.
    allowed_hosts: str | None = setting(None, "--allowed-hosts", group=SERVER)
    """host names requests may name in `Host`, comma-separated (* any; localhost and loopback
    addresses always); unset: only those when the server listens on loopback alone, any
    otherwise. Behind a proxy that passes the client's Host on (nginx's $host), list the public
    name"""
    ui_mcp_proxy: bool = setting(False, "--ui-mcp-proxy", "--webui-mcp-proxy", group=SERVER)
    """serve llama-server's /cors-proxy?url=... (its web UI's MCP proxy): the server fetches the
    URLs it is asked, of public addresses only unless --fetch-allow-hosts names the host"""
    ui: bool = setting(True, "--ui", group=SERVER)
    """serve the web UI (frontend/dist) at / (--no-ui: the API only)"""
    metrics: bool = setting(True, "--metrics", group=SERVER)
    """serve GET /metrics (on by default, unlike llama-server)"""
    slots: bool = setting(True, "--slots", group=SERVER)
    """serve the GET /slots listing (--no-slots: 501; slot save, restore and erase are served
    either way, as llama-server's)"""
    # Replicas on one database (app/api/middleware/idempotent_writes.py): a write sent with an
    # Idempotency-Key is kept this long, so a retry of it replays its response.
    idempotency_retention: float = setting(86400.0, "--idempotency-retention", group=SERVER, gt=0.0)
    """seconds an `Idempotency-Key` and the response it got are kept for retries"""
    idempotency_lease: float = setting(10.0, "--idempotency-lease", group=SERVER, gt=0.0)
    """seconds a replica's hold on a keyed write, or on a session's turn, lasts unless renewed
    (every third of it); a retry after that replica died waits at most this long, then takes
    the write over"""

    model: str | None = setting(None, "-m", "--model", group=MODEL, engine="model_path")
    """GGUF model path (unset: the packaged SmolLM2-135M-Instruct)"""
    models_dir: str | None = setting(None, "--models-dir", group=ROUTER)
    """router mode: serve every GGUF under this folder (a folder in it is one model with its
    projector), each by its own server, loaded on request (llama-server's)"""
    models_preset: str | None = setting(None, "--models-preset", group=ROUTER)
    """router mode: an INI file of models, a section each (`[name]`, `model = PATH`, other keys
    are flags of that model's server; `[*]` for all)"""
    models_max: int = setting(4, "--models-max", group=ROUTER, ge=1)
    """router mode: most models loaded at once; the least recently used idle one is unloaded
    (asleep: its KV stays in its cache tiers) to make room"""
    models_autoload: bool = setting(True, "--no-models-autoload", group=ROUTER)
    """router mode: load a model when a request names it (off: only POST /models/load does)"""
    tags: str | None = setting(None, "--tags", group=MODEL)
    """comma-separated model tags, listed by /v1/models (informational)"""
    model_alias: str | None = setting(None, "-a", "--alias", group=MODEL)
    """model name shown to clients, or several, comma-separated: the first in sorted order is
    the name, every one is listed in /v1/models `aliases` (unset: the model file's stem)"""
    n_gpu_layers: int = setting(
        -1, "-ngl", "--n-gpu-layers", "--gpu-layers", group=MODEL, engine="n_gpu_layers", ge=-1
    )
    """layers offloaded to the GPU; -1: all when the build has a GPU backend (none on a CPU
    build)"""
    cpu_variant: str = setting("auto", "--cpu-variant", group=MODEL, engine="cpu_variant")
    """the CPU backend to load, by variant name (x64, haswell, skylakex, zen4 on x86-64);
    auto: the best one this CPU runs"""
    flash_attn: Literal["on", "off", "auto"] = setting(
        "auto", "-fa", "--flash-attn", group=MODEL, engine="flash_attn"
    )
    """flash attention (auto: llama.cpp decides per device)"""
    mmap: bool = setting(True, "--no-mmap", group=MODEL, engine="use_mmap")
    """read the model file instead of mapping it"""
    mlock: bool = setting(False, "--mlock", group=MODEL, engine="use_mlock")
    """keep the model in RAM"""
    jinja: bool = setting(True, "--jinja", group=MODEL)
    """render chats with a Jinja template (the model's own unless one is given), which can render
    the request's tools; off: llama.cpp's built-in C++ templates"""
    # A name (not llama-server's under --jinja, where a name is taken as template text) or text.
    chat_template: str | None = setting(None, "--chat-template", group=MODEL)
    """one of llama.cpp's built-in templates by name (chatml, llama3, gemma, mistral-v7, ...),
    or a Jinja template's text (unset: the model's own)"""
    chat_template_file: str | None = setting(None, "--chat-template-file", group=MODEL)
    """a Jinja chat template file (unset: the model's own)"""

    ctx_size: int = setting(8192, "-c", "--ctx-size", group=SLOTS, engine="n_ctx", ge=64)
    """total context (KV cells), shared by all slots (unified KV)"""
    parallel: int = setting(4, "-np", "--parallel", group=SLOTS, engine="n_parallel", ge=1, le=64)
    """number of slots, decoded together"""
    kv_unified: bool = setting(False, "-kvu", "--kv-unified", group=SLOTS, engine=True)
    """a request may use the whole --ctx-size, as llama-server's unified KV (off: --ctx-size /
    --parallel each, as its per-slot KV); the slots' KV is one shared pool either way"""
    threads: int = setting(2, "-t", "--threads", group=SLOTS, engine="n_threads", ge=1)
    """threads for generation"""
    threads_batch: int | None = setting(
        None, "-tb", "--threads-batch", group=SLOTS, engine="n_threads_batch", ge=1
    )
    """threads for prompt processing (unset: --threads)"""
    batch_size: int = setting(512, "-b", "--batch-size", group=SLOTS, engine="n_batch", ge=1)
    """most tokens put into one llama_decode; at least --parallel"""
    ubatch_size: int = setting(512, "-ub", "--ubatch-size", group=SLOTS, engine="n_ubatch", ge=1)
    """physical batch size (at most --batch-size)"""
    burst_wait: float = setting(0.02, "--burst-wait", group=SLOTS, engine="burst_wait", ge=0.0)
    """seconds an idle server waits for requests still being read before it prefills, so that
    requests sent at once are prefilled together (0: off)"""
    idle_prefill_delay: float = setting(
        0.25, "--idle-prefill-delay", group=SLOTS, engine="idle_prefill_delay"
    )
    """seconds the engine is idle before a chat's next-turn boundary is prefilled (< 0: off)"""
    background_batch_ms: float = setting(
        50.0, "--background-batch-ms", group=SLOTS, engine="background_batch_ms", gt=0.0
    )
    """longest one batch of background work (document prefill, next-turn boundaries) should
    take, ms: a request that arrives meanwhile waits for that batch to end"""

    cache_type_k: KvType = setting("f16", "-ctk", "--cache-type-k", group=CACHE, engine=True)
    """KV cache type of K; q8_0 stores a cached token in 34/64 of f16's bytes"""
    cache_type_v: KvType = setting("f16", "-ctv", "--cache-type-v", group=CACHE, engine=True)
    """KV cache type of V; a quantized V needs -fa on"""
    cache_prompt: bool = setting(True, "--no-cache-prompt", group=CACHE, engine=True)
    """turn off the server default of requests' `cache_prompt`"""
    slot_prompt_similarity: float = setting(
        0.1, "-sps", "--slot-prompt-similarity", group=CACHE, engine=True, ge=0.0, le=1.0
    )
    """least share of a prompt a slot's cache must hold to be preferred for it"""
    # llama-server's default. Parking idle slots never evicts a host entry, so a budget that
    # fills keeps idle KV resident (slower decodes); buffers are taken as states are saved.
    cache_ram: int = setting(
        8192,
        "-cram",
        "--cache-ram",
        group=CACHE,
        engine="cache_ram_bytes",
        to_engine="MiB -> bytes, -1: no limit",
        ge=-1,
    )
    """host-memory prompt cache, MiB (0: off, -1: no limit)"""
    cache_ram_tokens: int = setting(
        0, "--cache-ram-tokens", group=CACHE, engine=True, to_engine="0 -> None", ge=0
    )
    """host-memory prompt cache budget in tokens (0: no limit)"""
    cache_dir: str | None = setting(None, "--cache-dir", group=CACHE, engine=True)
    """disk tier: keep saved KV states in this directory across restarts (unset: off)"""
    cache_disk: int = setting(
        0, "--cache-disk", group=CACHE, engine="cache_disk_bytes", to_engine="MiB -> bytes", ge=0
    )
    """disk tier budget, MiB (0: no limit; least recently used go first)"""
    cache_shared: bool = setting(False, "--cache-shared", group=CACHE, engine=True)
    """the --cache-dir is shared by several replicas: each publishes the KV of every finished
    turn there and finds what the others published (docs/deployment.md)"""
    cache_policy: Literal["lru", "gdsf"] = setting(
        "gdsf", "--cache-policy", group=CACHE, engine=True
    )
    """host cache eviction (compared by `python -m bench.eviction`)"""
    cache_reuse: int = setting(0, "--cache-reuse", group=CACHE, engine=True, ge=0)
    """least chunk of tokens reused from the cache by KV shifting (0: off)"""
    # Idle slots' cells slow every decode (app/engine/kv/prefix_reuse.py PrefixReuse.park_idle), so
    # they go to host memory when a task starts; engine_config() also needs --cache-ram for it.
    cache_idle_slots: bool = setting(
        True, "--cache-idle-slots", group=CACHE, engine="park_idle_slots"
    )
    """when a task starts, move idle slots' KV to the host cache and free their cells (needs
    --cache-ram)"""
    defrag_thold: float = setting(0.1, "-dt", "--defrag-thold", group=CACHE, engine=True)
    """compact the KV cache when cuts may have freed more than this share of its cells under
    cells in use (< 0: off)"""
    swa_full: bool = setting(True, "--no-swa-full", group=CACHE, engine=True)
    """sliding-window models: keep only the window (less memory, less reuse)"""

    spec_type: Literal["none", "ngram-simple", "ngram-docs"] = setting(
        "none", "--spec-type", group=SPECULATION, engine=True
    )
    """draft tokens to verify in the same batch: ngram-simple, from the request's prompt and
    reply (llama-server's); ngram-docs, also from earlier replies on the same documents; none"""
    spec_ngram_size_n: int = setting(
        3, "--spec-ngram-simple-size-n", group=SPECULATION, engine=True, ge=1, le=64
    )
    """length of the n-gram looked up in the draft sources"""
    spec_draft_n_max: int = setting(
        16, "--spec-draft-n-max", group=SPECULATION, engine=True, ge=0, le=256
    )
    """most draft tokens one batch carries, all slots together (0: no speculation)"""
    spec_draft_n_min: int = setting(0, "--spec-draft-n-min", group=SPECULATION, engine=True, ge=0)
    """shortest draft worth verifying"""
    spec_replies: int = setting(8, "--spec-replies", group=SPECULATION, engine=True, ge=0)
    """ngram-docs: replies kept per document as a draft source (0: none)"""
    spec_draft_cost: float = setting(
        -1.0, "--spec-draft-cost", group=SPECULATION, engine=True, le=10.0
    )
    """what a draft token costs, in generated tokens' worth (< 0: measured from the engine's
    own steps); drafts are as long as their tokens' chance of acceptance beats it"""

    reasoning_format: Literal["none", "deepseek", "deepseek-legacy", "auto"] = setting(
        "auto", "--reasoning-format", group=REASONING
    )
    """a reply's `<think>` block: deepseek puts it in `reasoning_content`, and auto does where
    the chat template knows reasoning (as llama-server's template analysis);
    deepseek-legacy also keeps it in the content; none leaves it in the content (a request's
    `reasoning_format` overrides)"""
    reasoning: Literal["on", "off", "auto"] = setting(
        "auto", "-rea", "--reasoning", group=REASONING
    )
    """thinking in the chat template (its `enable_thinking`): on, off, or auto (on where the
    template can think, as llama-server's); a request's `chat_template_kwargs` override"""

    max_queue: int = setting(64, "--max-queue", group=LIMITS, engine=True, ge=0)
    """requests waiting for a slot before 503 + Retry-After (0: no bound)"""
    n_predict: int = setting(-1, "-n", "--n-predict", group=LIMITS, engine=True, ge=-1)
    """default `max_tokens` of a request that sets none (-1: until the end or the context)"""
    # Ours, not llama-server's (its -n is only a default): a public server's output cap.
    max_tokens_limit: int = setting(-1, "--max-tokens-limit", group=LIMITS, engine=True, ge=-1)
    """most tokens one reply may have, whatever the request asks (-1: no limit)"""
    ctx_per_request: int = setting(
        0, "--ctx-per-request", group=LIMITS, engine="n_ctx_request", ge=0
    )
    """KV cells one request may use, prompt + reply (0: ctx / parallel), so that one request
    cannot evict the other slots' caches"""
    max_body_bytes: int = setting(16 << 20, "--max-body-bytes", group=LIMITS, ge=1024)
    """larger request bodies get 413 before more is read (POST /v1/media may take
    --image-max-bytes)"""
    max_concurrent_per_key: int = setting(16, "--max-concurrent-per-key", group=LIMITS, ge=0)
    """requests at once per API key; more get 429 + Retry-After (0: no limit)"""
    request_timeout: float = setting(600.0, "--timeout", group=LIMITS, engine=True, ge=0.0)
    """seconds per request, queued or running; then 504 (0: no limit)"""
    seed: int = setting(-1, "-s", "--seed", group=LIMITS, engine=True)
    """default sampling seed (-1: random per request)"""
    temperature: float = setting(0.8, "--temp", "--temperature", group=LIMITS, engine=True, ge=0.0)
    """default sampling temperature of requests that give none (0: greedy)"""
    # What one request's own input may cost before anything of it is queued: grammars, prompts
    # per request (app/api/grammar/, app/api/llama_server/completion_routes.py).
    grammar_max_bytes: int = setting(128 << 10, "--grammar-max-bytes", group=LIMITS, ge=1024)
    """largest grammar a request may bring, bytes: a GBNF `grammar`, a JSON schema
    (response_format, json_schema, the tools' parameters) as JSON text, and the grammar made
    from it; larger ones are refused (400)"""
    grammar_max_repeat: int = setting(10_000, "--grammar-max-repeat", group=LIMITS, ge=1)
    """most repetitions a request's schemas or grammar may write out, all their counted bounds
    together (maxLength, minItems, maxItems, a pattern's {m,n}, GBNF's {m,n}); more are
    refused (400)"""
    max_prompts: int = setting(16, "--max-prompts", group=LIMITS, ge=1)
    """prompts one POST /completion may carry, each a generation of its own; more are refused
    (400)"""

    # Resumable streams (app/api/llama_server/stream_store.py): llama-server keeps them 300 s and
    # 4 MiB each, without a bound on how many; every bound here is a setting.
    stream_ttl: float = setting(300.0, "--stream-ttl", group=LIMITS, gt=0.0)
    """seconds a finished stream sent with `X-Conversation-Id` stays readable at GET /v1/stream"""
    stream_max_bytes: int = setting(4 << 20, "--stream-max-bytes", group=LIMITS, ge=4096)
    """bytes of SSE one resumable stream keeps; its oldest bytes are dropped first"""
    streams_per_tenant: int = setting(8, "--streams-per-tenant", group=LIMITS, ge=0)
    """resumable streams one tenant keeps: a new one replaces the oldest finished one, and is
    refused (429) while all are running (0: `X-Conversation-Id` is ignored)"""
    streams_max: int = setting(64, "--streams-max", group=LIMITS, ge=1)
    """resumable streams the server keeps, all tenants together (503 while all are running)"""
    # Worker threads by kind of work (app/thread_pools.py): document parsing, image decoding and
    # remote fetches' name lookups wait in pools of their own, never in the one key lookups and
    # database calls use; remote fetches (app/outbound/) reach public addresses only.
    parse_threads: int = setting(2, "--parse-threads", group=LIMITS, ge=1)
    """threads that parse document uploads (PDFium reads one PDF at a time)"""
    image_threads: int = setting(2, "--image-threads", group=LIMITS, ge=1)
    """threads that decode images and build image prompts"""
    fetch_threads: int = setting(4, "--fetch-threads", group=LIMITS, ge=1)
    """threads that look up the host names of remote fetches (/cors-proxy, remote images)"""
    pool_queue: int = setting(64, "--pool-queue", group=LIMITS, ge=0)
    """tasks waiting for a thread of one of those pools before 503 + Retry-After (0: no bound)"""
    fetch_timeout: float = setting(30.0, "--fetch-timeout", group=LIMITS, gt=0.0)
    """seconds a remote image may take in all: lookup, connection, redirects and every byte
    (its size is bounded by --image-max-bytes)"""
    fetch_allow_hosts: str | None = setting(None, "--fetch-allow-hosts", group=LIMITS)
    """host names or addresses, comma-separated, that /cors-proxy and remote images may reach
    although they are loopback, link-local or private (unset: public addresses only)"""

    mmproj: str | None = setting(None, "--mmproj", group=IMAGES, engine="mmproj_path")
    """multimodal projector GGUF of the model: enables image input (unset: text only)"""
    image_max_bytes: int = setting(20 << 20, "--image-max-bytes", group=IMAGES, ge=1)
    """largest accepted image file, inline or uploaded, bytes"""
    image_max_pixels: int = setting(4096 * 4096, "--image-max-pixels", group=IMAGES, ge=1)
    """largest accepted width x height (decompression-bomb guard)"""
    image_max_count: int = setting(16, "--image-max-count", group=IMAGES, ge=1)
    """most images one request's prompt may hold, earlier turns' included; more are refused
    (400) before any is decoded"""
    allow_remote_images: bool = setting(False, "--allow-remote-images", group=IMAGES)
    """fetch http(s) image URLs, of public addresses only unless --fetch-allow-hosts names the
    host (refused with 400 otherwise)"""
    media_path: str | None = setting(None, "--media-path", group=IMAGES)
    """directory that file:// image URLs are read from, by paths relative to it (unset: file://
    URLs are refused)"""
    encoder_cache: int = setting(
        256,
        "--encoder-cache",
        group=IMAGES,
        engine="encoder_cache_bytes",
        to_engine="MiB -> bytes",
        ge=0,
    )
    """vision-encoder output cache, MiB (0: off)"""

    doc_max_bytes: int = setting(20 << 20, "--doc-max-bytes", group=DOCUMENTS, ge=1)
    """largest accepted document upload, bytes (413 above)"""
    doc_max_pages: int = setting(2000, "--doc-max-pages", group=DOCUMENTS, ge=1)
    """most pages of an accepted PDF (413 above)"""
    doc_max_unpacked_bytes: int = setting(
        64 << 20, "--doc-max-unpacked-bytes", group=DOCUMENTS, ge=1
    )
    """most bytes a DOCX may unpack to, all its parts together (413 above: a zip bomb is
    refused before any part is unpacked)"""
    doc_parse_timeout: float = setting(30.0, "--doc-parse-timeout", group=DOCUMENTS, gt=0.0)
    """seconds reading an upload's text may take (PDF pages, DOCX blocks); then 413"""
    embedding_model: str | None = setting(None, "--embedding-model", group=DOCUMENTS)
    """sentence-transformers model folder (unset: the packaged all-MiniLM-L6-v2)"""
    embedding_threads: int = setting(2, "--embedding-threads", group=DOCUMENTS, ge=1)
    """embedding threads while the LLM engine computes nothing (one while it does)"""
    embedding_backend: Literal["torch", "torch-int8", "onnx-int8"] = setting(
        "onnx-int8", "--embedding-backend", group=DOCUMENTS
    )
    """how documents and queries are embedded: torch fp32, torch dynamic int8, or ONNX Runtime
    on an int8 export made once at install; a collection keeps the backend that made its
    vectors (another is refused, 409)"""
    doc_ann_min: int = setting(200_000, "--doc-ann-min", group=DOCUMENTS, ge=1)
    """chunks from which a collection is searched approximately (HNSW, rebuilt after deletes)
    instead of by an exact scan"""
    # Idle-time work (app/docs/background/doc_prefill.py): the first question on a document reuses
    # it.
    doc_prefill_tokens: int = setting(1024, "--doc-prefill-tokens", group=DOCUMENTS, ge=0)
    """tokens of each new document (head + leading chunks) computed into the prefix cache while
    no request runs (0: off)"""
    kv_reuse: Literal["prefix", "blend"] = setting("prefix", "--kv-reuse", group=DOCUMENTS)
    """document requests' default KV reuse: prefix only, or chunk KV at any position (blend;
    docs/blend.md); a collection's or a request's `kv_reuse` overrides it"""
    # Full-document mode (app/docs/questions/collection_prefix.py): the whole collection before
    # the question; a collection that leaves less than this free is too long for it.
    doc_full_reserve: int = setting(256, "--doc-full-reserve", group=DOCUMENTS, ge=1)
    """tokens a full-mode question keeps free in its context for the question and the answer:
    a collection whose documents leave less is too long for full mode (400, or retrieval when
    the request asks for that fallback)"""
    doc_full_prefill: bool = setting(True, "--doc-full-prefill", group=DOCUMENTS)
    """compute a full-mode collection's whole prefix into the prefix cache in the background
    after its documents change (off: the first full question computes it)"""
    # Replicas on one database (app/db/replicas/ingest_claims.py): a live worker renews its claim
    # every third of this; a dead one's documents wait this long before another replica takes them.
    ingest_lease: float = setting(30.0, "--ingest-lease", group=DOCUMENTS, gt=0.0)
    """seconds a replica's claim on a document it ingests lasts unless renewed; after that
    another replica takes the document over"""
    deletion_log_window: float = setting(
        7 * 86400.0, "--deletion-log-window", group=DOCUMENTS, gt=0.0
    )
    """seconds a replica may go unseen and still hold back the pruning of the deletion log
    (rows every other replica has applied are pruned; it then rereads what is left)"""
    # Servers of several models on one database (app/db/replicas/ingest_claims.py): a document
    # is chunked in its collection's model's tokens. Off, a server of one model keeps doing what
    # it did before collections had a model (one restarted with another model included).
    docs_own_model: bool = setting(False, "--docs-own-model", group=DOCUMENTS)
    """ingest and prefill only the documents of collections made for this server's model (its
    name: --alias, else the file's stem), for servers of several models on one database (router
    mode gives it to each model's server); off: every collection's"""
    blend_sink_tokens: int = setting(
        -1, "--blend-sink-tokens", group=DOCUMENTS, engine=True, ge=-1, le=1024
    )
    """tokens recomputed at the start of each chunk placed by blend (attention-sink repair); -1:
    the smallest k whose blended answers matched full prefill often enough on the model's
    quality set (docs/blend.md)"""
    blend_force: bool = setting(False, "--blend-force", group=DOCUMENTS, engine=True)
    """blend where its quality gate turns it off (the model's blended answers were not measured
    to match full prefill's often enough, or were never measured); replies carry the measured
    agreement"""
    # OCR (rag/ocr/, docs/documents.md#ocr): pages read in the ingestion worker, a tesseract
    # child process per page; llama-server has no such settings.
    ocr: Literal["tesseract", "off"] = setting("tesseract", "--ocr", group=DOCUMENTS)
    """reads PDF pages without a text layer and images of pages (PNG, JPEG, TIFF, WebP) in the
    background: Debian's tesseract-ocr; off: such PDF pages are left out (a PDF of none but
    them is refused) and image uploads are refused"""
    ocr_lang: str = setting(
        "eng", "--ocr-lang", group=DOCUMENTS, pattern=r"^[A-Za-z0-9_]+(\+[A-Za-z0-9_]+)*$"
    )
    """languages of the scanned text, tesseract's codes joined by + (eng+deu); each needs its
    data installed (Debian: tesseract-ocr-deu), checked at start (OCR is off without it)"""
    ocr_dpi: int = setting(300, "--ocr-dpi", group=DOCUMENTS, ge=72, le=600)
    """resolution a PDF page without a text layer is rendered at for OCR"""
    ocr_page_timeout: float = setting(60.0, "--ocr-page-timeout", group=DOCUMENTS, gt=0.0)
    """seconds OCR of one page may take; a page over it is reported in the document's
    `ocr_failed` and the next page goes on"""
    ocr_timeout: float = setting(900.0, "--ocr-timeout", group=DOCUMENTS, gt=0.0)
    """seconds OCR of one document may take, all its pages; pages not read by then are
    reported in its `ocr_failed`"""
    ocr_max_pages: int = setting(200, "--ocr-max-pages", group=DOCUMENTS, ge=1)
    """most pages of one upload read by OCR (a PDF's pages without text, an image's frames);
    more are refused at upload (413)"""
    # Pillow's own guard (Image.MAX_IMAGE_PIXELS, 89,478,485) refuses more in any case.
    ocr_max_pixels: int = setting(
        50_000_000, "--ocr-max-pixels", group=DOCUMENTS, ge=1, le=89_478_485
    )
    """largest width x height of a page of an image upload (decompression-bomb guard: refused
    from its header, 400)"""

    data_dir: str = setting("data", "--data-dir", group=STORAGE)
    """SQLite database (kvchat.db), media, indexes and slot files"""
    # The lower-case choice lets the CLI pass it by name (older pydantic-settings, e.g. 2.14,
    # match keyword arguments by alias only and would drop --database-url).
    database_url: str | None = setting(
        None,
        "--database-url",
        group=STORAGE,
        validation_alias=AliasChoices("KVCHAT_DATABASE_URL", "DATABASE_URL", "database_url"),
    )
    """SQLAlchemy URL, e.g. postgresql+psycopg://user@host/db (unset: SQLite in --data-dir)"""
    slot_save_path: str | None = setting(None, "--slot-save-path", group=STORAGE)
    """directory of POST /slots/{id}?action=save|restore files (unset: `<data-dir>/slots`)"""
