"""A ``${...}`` problem under a secret-named key names the field and line, and quotes none of the value."""

from __future__ import annotations

import pytest

from collectors.config.loader import parse_config
from collectors.config.problems import ConfigError

BASE = """
clusters:
  - name: prod
    bootstrap_servers: k:9092
    kafka:
      security.protocol: SASL_SSL
      sasl.mechanism: PLAIN
      sasl.username: mon
{extra}
"""


def problems(extra: str, env: dict[str, str] | None = None) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_config(BASE.format(extra=extra), "cfg.yaml", env or {})
    return info.value.problems


@pytest.mark.parametrize(("line", "fragments"), [
    ('      sasl.password: "S3cr${et pass}word"', ("S3cr", "et pass", "word")),
    ('      sasl.password: "S3cr${etpass}word"', ("S3cr", "etpass", "word")),
    ('      sasl.password: "S3cr${et pass}word${ALSO_UNSET}"', ("S3cr", "et pass", "ALSO_UNSET")),
    ('      sasl.jaas.config: "x password=\\"${1x}\\";"', ("password=", "1x")),
])
def test_secret_substitution_problem_quotes_nothing_of_the_value(line: str, fragments: tuple[str, ...]) -> None:
    found = problems(line)
    assert found and all(p.startswith('cfg.yaml:9: clusters[0].kafka["sasl.') for p in found), found
    for p in found:
        for fragment in fragments:
            assert fragment not in p.split(": ", 2)[2], p


def test_a_password_that_is_one_reference_still_names_its_variable() -> None:
    (p,) = problems("      sasl.password: ${KAFKA_PASSWORD}")
    assert p.startswith('cfg.yaml:9: clusters[0].kafka["sasl.password"]: ') and "KAFKA_PASSWORD is not set" in p


def test_other_fields_still_quote_the_reference_with_their_line() -> None:
    (p,) = problems("      client.id: 'mon-${bad name}'")
    assert p.startswith('cfg.yaml:9: clusters[0].kafka["client.id"]: ') and "'${bad name}'" in p
