from __future__ import annotations

from pathlib import Path

import pytest

from app.__main__ import parse_args
from app.chat.templates.template_choice import TemplateChoice
from app.config import Settings


def test_cli_flags_override_environment(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("KVCHAT_PARALLEL", "3")
    monkeypatch.setenv("KVCHAT_CTX_SIZE", "1024")
    settings = Settings(**parse_args(["-np", "6", "--no-cache-prompt"]))
    assert settings.parallel == 6  # flag wins
    assert settings.ctx_size == 1024  # environment where no flag
    assert settings.cache_prompt is False
    config = settings.engine_config()
    assert (config.n_parallel, config.n_ctx, config.cache_prompt) == (6, 1024, False)


def test_defaults_use_the_packaged_model(model_path: str):
    settings = Settings(**parse_args([]))
    assert settings.model_path() == model_path
    assert Path(model_path).suffix == ".gguf"
    assert settings.cache_prompt is True and settings.parallel == 4


def test_invalid_settings_are_refused():
    with pytest.raises(ValueError):
        Settings(**parse_args(["-np", "0"]))


def test_batch_must_hold_a_token_for_every_slot():
    with pytest.raises(ValueError, match="batch-size"):
        Settings(**parse_args(["-np", "8", "-b", "4"]))


def test_llama_server_threads_gpu_and_memory_flags_reach_the_engine_config():
    args = [
        "-t",
        "2",
        "-tb",
        "1",
        "-ngl",
        "0",
        "-fa",
        "on",
        "-ctk",
        "q8_0",
        "-ctv",
        "q4_0",
        "--no-mmap",
        "--mlock",
    ]
    config = Settings(**parse_args(args)).engine_config()
    assert (config.n_threads, config.n_threads_batch, config.n_gpu_layers) == (2, 1, 0)
    assert (config.flash_attn, config.cache_type_k, config.cache_type_v) == ("on", "q8_0", "q4_0")
    assert (config.use_mmap, config.use_mlock) == (False, True)
    default = Settings(**parse_args([])).engine_config()
    assert default.n_threads_batch is None and default.n_gpu_layers == -1  # -tb = -t; GPU: all
    assert (default.flash_attn, default.cache_type_k, default.use_mmap) == ("auto", "f16", True)


def test_flags_are_never_abbreviated_and_bad_values_are_refused():
    with pytest.raises(SystemExit):
        parse_args(["--thread", "2"])  # llama-server's names only, no prefixes
    with pytest.raises(SystemExit):
        parse_args(["-ctk", "q3_k"])


def test_cache_idle_slots_is_on_by_default_and_needs_the_host_cache():
    def parked(*args: str) -> bool:
        return Settings(**parse_args(list(args))).engine_config().park_idle_slots

    assert parked() and parked("--cache-idle-slots")
    assert not parked("--no-cache-idle-slots")
    assert not parked("--cache-ram", "0")  # nowhere to keep what it would drop


def test_burst_wait_reaches_the_engine_and_cannot_be_negative():
    assert Settings(**parse_args([])).engine_config().burst_wait == 0.02
    config = Settings(**parse_args(["--burst-wait", "0"])).engine_config()
    assert config.burst_wait == 0.0
    with pytest.raises(ValueError):
        Settings(**parse_args(["--burst-wait", "-1"]))


def test_defrag_threshold_reaches_the_engine():
    assert Settings(**parse_args([])).engine_config().defrag_thold == 0.1
    assert Settings(**parse_args(["-dt", "-1"])).engine_config().defrag_thold == -1.0
    assert Settings(**parse_args(["--defrag-thold", "0.5"])).engine_config().defrag_thold == 0.5


def test_database_url_flag_and_environment_reach_the_settings(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("KVCHAT_DATABASE_URL", raising=False)
    monkeypatch.setenv("DATABASE_URL", "sqlite:///from-env.db")
    assert Settings(**parse_args([])).database() == "sqlite:///from-env.db"
    flagged = Settings(**parse_args(["--database-url", "postgresql+psycopg://u@h/db"]))
    assert flagged.database() == "postgresql+psycopg://u@h/db"  # the flag wins


def test_a_shared_cache_needs_a_cache_dir_and_journals_under_the_replica_name(model_path: str):
    with pytest.raises(ValueError, match="--cache-shared needs --cache-dir"):
        Settings(**parse_args(["--cache-shared"]))
    s = Settings(**parse_args(["--cache-shared", "--cache-dir", "kv", "--replica-name", "r1"]))
    config = s.engine_config()
    assert config.cache_shared and config.cache_journal == "r1" and s.replica() == "r1"
    unnamed = Settings(**parse_args(["--port", "8123"]))
    assert unnamed.replica().endswith(":8123") and not unnamed.engine_config().cache_shared
    assert unnamed.engine_config().cache_journal == unnamed.replica()


def test_kv_unified_lets_a_request_use_the_whole_context_as_llama_server():
    assert not Settings(**parse_args([])).engine_config().kv_unified
    assert Settings(**parse_args(["--kv-unified"])).engine_config().kv_unified
    assert Settings(**parse_args(["-kvu"])).kv_unified


def test_chat_template_flags_are_checked_when_the_settings_are_read(tmp_path: Path):
    assert Settings(**parse_args([])).template_choice() == TemplateChoice(None, True)
    chosen = Settings(**parse_args(["--chat-template", "gemma", "--no-jinja"]))
    assert chosen.template_choice() == TemplateChoice("gemma", False)
    with pytest.raises(ValueError, match="built-in templates"):
        Settings(**parse_args(["--chat-template", "llama-three"]))
    with pytest.raises(ValueError, match="cannot be read"):
        Settings(**parse_args(["--chat-template-file", str(tmp_path / "none.jinja")]))
