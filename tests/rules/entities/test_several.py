"""``several``: a mention said with a word of number or totality joined to it asks for more than
the one thing a pointer names, so its resolution becomes an abstention."""

from __future__ import annotations

import pytest

from rules.entities.several import asks_several, several
from rules.report import Reference


def _around(text: str, mention: str) -> tuple[int, int]:
    start = text.index(mention)
    return start, start + len(mention)


@pytest.mark.parametrize(
    ("text", "mention", "asked"),
    [
        ("удали обе ветки, которые ты создал", "ветки, которые ты создал", True),
        ("запушь ветки, которые ты создал", "ветки, которые ты создал", True),
        ("запушь ветку, которую ты создал", "ветку, которую ты создал", False),
        ("把你创建的分支都删掉", "你创建的分支", True),
        ("你创建的分支两个都删掉", "你创建的分支", True),
        ("把你生成的文件全部内容打印出来", "你生成的文件", False),
        ("作ったブランチを両方削除して", "作ったブランチ", True),
        ("作ったブランチを削除して", "作ったブランチ", False),
        ("만든 브랜치 둘 다 삭제해", "만든 브랜치", True),
        ("만든 브랜치 다 삭제해", "만든 브랜치", True),
        ("만든 브랜치 다시 푸시해", "만든 브랜치", False),
        ("두 번째로 만든 브랜치", "만든 브랜치", False),
        ("push the branch you created, both of them", "the branch you created", True),
        ("remove both the folder you made", "the folder you made", True),
        ("remove the tag you cut, both locally and on origin", "the tag you cut", False),
        ("push the branch you created, both.", "the branch you created", True),
        ("delete all files in the folder you made", "the folder you made", False),
        ("delete the folder you made two minutes ago", "the folder you made", False),
        ("supprime les deux branches que tu as créées", "branches que tu as créées", True),
        ("lösche beide Branches, die du erstellt hast", "Branches, die du erstellt hast", True),
        ("borra las dos ramas que creaste", "ramas que creaste", True),
        ("apague os dois arquivos que você criou", "arquivos que você criou", True),
        ("elimina entrambi i file che hai creato", "file che hai creato", True),
    ],
)
def test_a_word_of_number_joined_to_the_mention(text: str, mention: str, asked: bool) -> None:
    assert asks_several(text, *_around(text, mention)) is asked


class _Mention:
    def __init__(self, start: int, end: int) -> None:
        self.start, self.end, self.lang, self.recency = start, end, "en", False
        self.ordinal, self.anchor = None, None


def test_the_resolution_becomes_an_abstention_with_its_entity_a_candidate() -> None:
    text = "push the branch you created, both of them"
    ref: Reference = {
        "mention": "the branch you created",
        "entity": {"path": "branch:feat/y", "kind": "branch"},
        "pointer": {"id": "feat/y"},
        "confidence": 0.95,
    }  # type: ignore[typeddict-item]
    out = several(ref, text, _Mention(*_around(text, "the branch you created")))
    assert out["entity"] is None
    assert out["abstained"] == "several"
    assert out["candidates"] == ["branch:feat/y"]
    assert "pointer" not in out
    alone = "push the branch you created"
    assert several(ref, alone, _Mention(*_around(alone, "the branch you created"))) is ref
