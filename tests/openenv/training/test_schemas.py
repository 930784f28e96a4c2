"""The lineage we write is Kiln's published record; our contract file is current."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema

from kiln_verify.openenv.training.corpus import lineage_from_corpus
from kiln_verify.openenv.training.schema_export import CONTRACT
from kiln_verify.openenv.training.selection import select_for_training
from kiln_verify.records import AdapterIdentity
from tests.openenv.training.conftest import Collected

KILN: dict[str, Any] = json.loads(
    (Path(__file__).with_name("kiln_training_schema.json")).read_text(encoding="utf-8")
)
NAMES = ("OpenEnvTrainingDataProvenanceV1", "OpenEnvTrainingEnvironmentV1",
         "OpenEnvTerminationCountsV1")  # fmt: skip


def kiln_validator() -> jsonschema.Draft202012Validator:
    jsonschema.Draft202012Validator.check_schema(KILN)
    return jsonschema.Draft202012Validator(KILN)


def test_a_real_lineage_validates_against_kiln_s_published_schema(collected: Collected) -> None:
    lineage = lineage_from_corpus(select_for_training(collected.groups).corpus_bytes())
    validator = kiln_validator()
    validator.validate(lineage.to_json())
    # with every optional field Kiln has: a behaviour adapter, no OpenAPI version
    assert lineage.behavior_policy is not None
    adapter = AdapterIdentity(name="behaviour", content_sha256="sha256:" + "c" * 64)
    richer = lineage.model_copy(
        update={"behavior_policy": lineage.behavior_policy.model_copy(update={"adapter": adapter})}
    ).to_json()
    validator.validate(richer)
    richer["seed_min"] = 1
    assert not validator.is_valid(richer)  # the fragment really checks DecimalU64


def test_our_records_have_kiln_s_field_lists() -> None:
    ours = CONTRACT.build()["$defs"]
    for name in NAMES:
        kiln, mine = KILN["$defs"][name], ours[name]
        assert list(mine["properties"]) == list(kiln["properties"]), name
        assert set(mine.get("required", [])) | {"schema"} >= set(kiln["required"]), name
        optional = set(kiln["properties"]) - set(kiln["required"])
        assert not optional & set(mine.get("required", [])), name
        assert mine["additionalProperties"] is False


def test_the_checked_in_contract_is_current() -> None:
    assert CONTRACT.path.read_bytes() == CONTRACT.data(), (
        "contracts/kiln-training-v1.schema.json drifted; run "
        "python -m kiln_verify.openenv.training.schema_export"
    )
    assert CONTRACT.main(["--check"]) == 0
