"""A secret's name with a type annotation before its value (Python's ``PASSWORD: Final = "…"``,
``api_key: str = "…"``, TypeScript's ``apiKey: string = "…"``): the type was read as the value
and went (``PASSWORD: [REDACTED] = "…"``) while the secret stayed, or, too short to be a value,
nothing went. The value after `` = `` goes; an annotation with no secret stays whole."""

from __future__ import annotations

from tests.support.redaction_cases import case, held_out_tests

SECRETS = [
    case("a Final constant", 'PASSWORD: Final = "Tr0ub4dor&3x"', ["Tr0ub4dor"], ["Final"]),
    case("a typed module constant", 'API_KEY: str = "9f8e7d6c5b4a3210"', ["9f8e7d6c5b4a"], ["str"]),
    case("a generic type", "DB_PASSWORD: Final[str] = 'pa55-w0rd-long'", ["pa55-w0rd"]),
    case("a dotted type", 'secret_key: typing.Final = "q8Zr4Lm2Wx9T"', ["q8Zr4Lm2Wx9T"]),
    case("an attribute", '        self.password: str = "s3cretpw99"', ["s3cretpw99"], ["self."]),
    case(
        "a TypeScript field",
        'class Api {\n  private apiKey: string = "ak_live_8dk3Lq0pZx";\n}',
        ["ak_live_8dk3Lq0pZx"],
        ["private apiKey: string = "],
    ),
    case("a union type", 'token: str | None = "ghx_8dk3Lq0pZxQ"', ["ghx_8dk3Lq0pZxQ"]),
    # no blank before ``=``: a YAML password holding ``=``, read whole as before
    case("a YAML password with =", "password: ab=cd99xQ", ["ab=cd99xQ", "cd99xQ"]),
]

LOOKALIKES = [
    case("unset", "password: str | None = None", [], []),
    case("an optional field", "token: Optional[str] = None", [], []),
    case("an empty default", 'api_key: str = ""', [], []),
]


ADVERSARIAL = [
    "password: " + "T | " * 40_000 + "= x",
    ("password: Final" + " " * 1_000) * 200,
    "token: List[" + "a" * 100_000,
]

test_secrets_go, test_lookalikes_stay, test_linear = held_out_tests(
    SECRETS, LOOKALIKES, ADVERSARIAL
)
