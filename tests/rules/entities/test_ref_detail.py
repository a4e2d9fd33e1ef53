"""``detail_near``: the name said of a thing beside its noun where the grammar's word before an
English noun does not reach (the scenarios in ``scenarios/probes_o.yaml`` run the whole rule)."""

from __future__ import annotations

import time

import pytest

from rules.entities.ref_detail import detail_near


@pytest.mark.parametrize(
    ("lang", "text", "mention", "word"),
    [
        ("en", "restart the container running redis, please", "restart the container", "redis"),
        ("en", "stop the server you started for the docs", "the server you started", None),
        ("es", "detén el contenedor de postgres", "detén el contenedor", "postgres"),
        ("ru", "останови контейнер с redis", "останови контейнер", "redis"),
        ("fr", "redémarre le conteneur de mailhog", "redémarre le conteneur", "mailhog"),
        ("ja", "redisのコンテナを再起動して", "コンテナを再起動", "redis"),
        ("zh", "跑 postgres 的那个容器重启一下", "那个容器", "postgres"),
        ("ko", "redis 컨테이너 재시작해 줘", "컨테이너 재시작", "redis"),
        ("en", "restart the container with the new limits", "restart the container", None),
        ("en", "restart the container, with redis", "restart the container", None),
        ("en", "restart the container for me", "restart the container", None),
        ("ja", "さっき作ったコンテナ", "作ったコンテナ", None),
    ],
)
def test_the_word_beside_the_noun(lang: str, text: str, mention: str, word: str | None) -> None:
    start = text.index(mention)
    assert detail_near(lang, text, start, start + len(mention)) == word


def test_long_runs_are_read_in_bounded_time() -> None:
    text = "x" * 100_000 + "コンテナ" + " with " + "a" * 100_000
    start = 100_000
    began = time.process_time()
    for lang in ("en", "ja", "zh", "ko", "ru"):
        detail_near(lang, text, start, start + 4)
    assert time.process_time() - began < 0.05
