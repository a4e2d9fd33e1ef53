"""The cost model: prices from litellm's bundled table (read without importing litellm), the
providers' documented cache rules, config overrides by model glob and per upstream, the strictest
read ratio (0.1) for a model nobody prices, and the engine handing the facts to the rules and
the report."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from proxy.rewrite.cost_model import CostModel
from proxy.rewrite.engine import Engine
from proxy.rewrite.pipeline import Pipeline
from proxy.settings import ConfiguredRule, SettingsError, settings_from_mapping
from proxy.store.cache_feedback import CacheFeedback
from proxy.store.sqlite import Store
from rules.base import CacheFacts, Context, RuleConfig, RuleResult
from tests.support.factories import system, user


def costs(**config: Any) -> CostModel:
    return CostModel(settings_from_mapping(config))


@pytest.mark.parametrize(
    ("model", "read", "write", "min_prefix", "ttl"),
    [
        ("gpt-4o", 0.5, 1.0, 1024, 300.0),
        ("gpt-4.1", 0.25, 1.0, 1024, 300.0),
        ("gpt-5", 0.1, 1.0, 1024, 300.0),
        ("claude-sonnet-4-5", 0.1, 1.25, 1024, 300.0),
        ("anthropic/claude-sonnet-4-5", 0.1, 1.25, 1024, 300.0),  # the prefix is looked past
        ("claude-haiku-4-5", 0.1, 1.25, 4096, 300.0),  # Anthropic's minimum for Haiku 4.5
        ("gemini/gemini-2.5-pro", 0.1, 1.0, 2048, 300.0),
        ("gemini/gemini-2.5-flash", 0.1, 1.0, 1024, 300.0),
        # the table's write price of 0 is no surcharge, not a free write
        ("deepseek/deepseek-chat", 0.1, 1.0, 64, 3600.0),
    ],
)
def test_prices_from_litellms_table(
    model: str, read: float, write: float, min_prefix: int, ttl: float
) -> None:
    p = costs().prices(model)
    assert (p.read_ratio, p.write_ratio, p.min_prefix_tokens, p.ttl_s) == (
        read,
        write,
        min_prefix,
        ttl,
    )
    assert p.source == "litellm" and p.input_price is not None and p.input_price > 0


@pytest.mark.parametrize(
    ("model", "input_price", "min_prefix"),
    [
        ("gemini-2.5-flash", 3e-7, 1024),
        ("gemini-2.5-pro", 1.25e-6, 2048),
        ("gemini-3.8-flash", 7.5e-7, 4096),  # the table's minimum, newer than the docs quoted
        ("gemini-3.1-pro-preview", 2e-6, 4096),
    ],
)
def test_a_gemini_upstreams_models_are_priced_and_cached_as_the_table_says(
    model: str, input_price: float, min_prefix: int
) -> None:
    """Gemini's implicit cache: its read price and shortest cached prompt from the cost map
    (Google AI Studio's ``gemini/`` line for a ``gemini`` upstream), as for the others."""
    p = costs(upstreams=[{"name": "g", "kind": "gemini", "match": ["gemini-*"]}]).prices(model)
    assert p.family == "gemini" and p.source == "litellm"
    assert p.input_price == pytest.approx(input_price)
    assert (p.read_ratio, p.write_ratio, p.min_prefix_tokens) == (0.1, 1.0, min_prefix)


def test_gpt_4o_input_price_is_the_tables() -> None:
    assert costs().prices("gpt-4o").input_price == pytest.approx(2.5e-6)


def test_an_unknown_model_gets_the_strictest_read_ratio() -> None:
    p = costs().prices("my-local-model-7b")
    assert (p.read_ratio, p.input_price, p.source) == (0.1, None, "default")
    assert (p.write_ratio, p.ttl_s, p.min_prefix_tokens) == (1.0, 300.0, 1024)


def test_a_claude_model_nobody_prices_still_gets_anthropics_rules() -> None:
    p = costs().prices("bedrock/claude-3-5-haiku-custom")
    assert (p.read_ratio, p.write_ratio, p.min_prefix_tokens) == (0.1, 1.25, 2048)


def test_config_glob_wins_over_the_table_and_the_first_entry_wins() -> None:
    model = costs(
        pricing=[
            {"match": ["gpt-4o*"], "cache_read_ratio": 0.3, "ttl_s": 600},
            {"match": ["*"], "cache_read_ratio": 0.9, "min_prefix_tokens": 10},
        ]
    )
    p = model.prices("gpt-4o")
    assert (p.read_ratio, p.ttl_s, p.source) == (0.3, 600.0, "config")
    # keys the entry leaves unset fall through to the table and the provider's rules
    assert p.input_price == pytest.approx(2.5e-6) and p.min_prefix_tokens == 1024
    other = model.prices("gpt-4.1")
    assert (other.read_ratio, other.min_prefix_tokens) == (0.9, 10)


def test_per_mtok_prices_make_ratios() -> None:
    p = costs(
        pricing=[
            {
                "match": ["local-*"],
                "input_per_mtok": 2.0,
                "cache_read_per_mtok": 0.5,
                "cache_write_per_mtok": 2.5,
            }
        ]
    ).prices("local-llama")
    assert (p.input_price, p.read_ratio, p.write_ratio) == (2e-6, 0.25, 1.25)


def test_upstream_pricing_applies_to_its_models_under_the_glob_entries() -> None:
    model = costs(
        upstreams=[
            {
                "name": "vllm",
                "match": ["gpt-4o"],
                "base_url": "http://127.0.0.1:9/v1",
                "pricing": {"cache_read_ratio": 1.0, "ttl_s": 60, "min_prefix_tokens": 16},
            },
            {"name": "openai", "match": ["*"], "base_url": "http://127.0.0.1:9/v1"},
        ],
        pricing=[{"match": ["gpt-4o"], "ttl_s": 30}],
    )
    served = model.prices("gpt-4o")
    assert (served.read_ratio, served.ttl_s, served.min_prefix_tokens) == (1.0, 30.0, 16)
    assert served.source == "config"
    elsewhere = model.prices("gpt-4.1")  # the other upstream: the table's
    assert (elsewhere.read_ratio, elsewhere.source) == (0.25, "litellm")


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"cache_read_ratio": 0.1, "cache_read_per_mtok": 0.3}, "not both"),
        ({"cache_write_per_mtok": 3.75}, "needs input_per_mtok"),
        ({"cache_read_ratio": 1.5}, "less than or equal to 1"),
        ({"ttl_s": 0}, "greater than 0"),
        ({"match": []}, "at least 1 item"),
        ({"cache_reads": 0.1}, "Extra inputs are not permitted"),
    ],
)
def test_bad_pricing_fails_at_start_up_with_its_path(entry: dict[str, Any], message: str) -> None:
    with pytest.raises(SettingsError, match=message) as info:
        settings_from_mapping({"pricing": [entry]})
    assert "pricing[0]" in str(info.value)


def test_bad_upstream_pricing_fails_at_start_up() -> None:
    spec = {"name": "u", "base_url": "http://127.0.0.1:9/v1", "pricing": {"min_prefix_tokens": -1}}
    with pytest.raises(SettingsError, match=r"upstreams\[0\]\.pricing\.min_prefix_tokens"):
        settings_from_mapping({"upstreams": [spec]})


def test_facts_carry_the_sessions_last_report() -> None:
    feedback = CacheFeedback(at=100.0, prompt_tokens=5000, cached_tokens=4096, cache_write_tokens=7)
    model = costs()
    facts = model.facts("gpt-4o", feedback)
    assert facts == CacheFacts(
        input_price=2.5e-6,
        read_ratio=0.5,
        write_ratio=1.0,
        ttl_s=300.0,
        min_prefix_tokens=1024,
        last_at=100.0,
        last_prompt_tokens=5000,
        last_cached_tokens=4096,
        last_cache_write_tokens=7,
    )
    summary = model.summary("gpt-4o", facts, now=160.5)
    assert summary["idle_s"] == 60.5 and summary["last_cached_tokens"] == 4096
    assert model.summary("gpt-4o", model.facts("gpt-4o", None), 0.0)["idle_s"] is None


def probe_rule(seen: list[CacheFacts]) -> SimpleNamespace:
    """A rule that keeps the CacheFacts it is handed (the pipeline runs it like any other)."""

    def apply(ctx: Context, cfg: RuleConfig) -> RuleResult:
        seen.append(ctx.cache)
        return RuleResult.unchanged(ctx)

    return SimpleNamespace(apply=apply)


async def test_engine_hands_the_facts_to_the_rules_and_the_report(tmp_path: Path) -> None:
    settings = settings_from_mapping({"pricing": [{"match": ["claude-*"], "ttl_s": 3600}]})
    store = Store(str(tmp_path / "s.db"))
    await store.open()
    seen: list[CacheFacts] = []
    try:
        engine = Engine(settings, store, strict=True)
        rule = ConfiguredRule(name="probe", config=RuleConfig())
        engine.pipeline = Pipeline([rule], "fail", modules={"probe": probe_rule(seen)})
        body = {"model": "claude-sonnet-4-5", "messages": [system(), user("hi")]}
        store.cache_feedback.put("anonymous/s1", CacheFeedback(1000.0, 3000, 2048, 512))
        out = await engine.rewrite(body, {}, now=1090.0, session_id="s1")
        fresh = await engine.rewrite(body, {}, now=1090.0, session_id="s2")
    finally:
        await store.close()
    assert (seen[0].read_ratio, seen[0].write_ratio, seen[0].ttl_s) == (0.1, 1.25, 3600.0)
    assert (seen[0].last_at, seen[0].last_cached_tokens, seen[0].last_cache_write_tokens) == (
        1000.0,
        2048,
        512,
    )
    assert seen[1].last_at is None and seen[1].last_cached_tokens is None
    assert out.report["cache"] == {
        "read_ratio": 0.1,
        "write_ratio": 1.25,
        "ttl_s": 3600.0,
        "min_prefix": 1024,
        "source": "config",
        "last_cached_tokens": 2048,
        "last_cache_write_tokens": 512,
        "idle_s": 90.0,
    }
    assert fresh.report["cache"]["idle_s"] is None
