"""Every golden vector of kiln-hf-trl-contract §5 and §8, plus the digest properties."""

from __future__ import annotations

import pytest

from kiln_verify.core.digest import Sha256Digest, canonical_digest, sha256_bytes
from kiln_verify.errors import DigestMalformed
from kiln_verify.hf import digests
from kiln_verify.hf.manifest import BaseWeightShard, BaseWeightShardManifest
from tests.hf import fixtures


def test_canonical_manifest_digest_golden() -> None:  # §5.1, §8.1
    value = {
        "z": [3, {"kind": "decimal", "value": "2e-5"}],
        "a": {"text": "qwen/3.5", "flag": True},
        "n": 42,
    }
    expected = "sha256:1a00ddf29092a9e9e9ecd4ea9faf9c48f69208e5439834c6674d1d6bfb45e258"
    assert str(canonical_digest(value)) == expected
    assert (
        str(digests.manifest_digest({**value, "export_sha256": "x"}, "export_sha256")) == expected
    )


def test_base_model_aggregate_golden() -> None:  # §5.4, §8.3
    expected = "sha256:813979f1d3dd938e49874427651a97344cd1af5409e75aceaa741707616cd7a5"
    two = (Sha256Digest("2" * 64), 22)
    one = (Sha256Digest("1" * 64), 11)
    assert str(digests.base_model_aggregate([two, one])) == expected
    assert str(digests.base_model_aggregate([one, two])) == expected  # order-independent
    # The shard manifest computes the same aggregate, independent of file names.
    manifest = fixtures.shards()
    assert manifest.aggregate_sha256 == expected
    renamed = BaseWeightShardManifest.from_shards(
        [
            BaseWeightShard(filename="a.safetensors", size_bytes=11, sha256=str(one[0])),
            BaseWeightShard(filename="b.safetensors", size_bytes=22, sha256=str(two[0])),
        ]
    )
    assert renamed.aggregate_sha256 == expected


def test_grpo_corpus_golden_and_order() -> None:  # §5.5, §8.2
    expected = "sha256:3f495e234c3946d423ff971d5ade7fc11e7139a5a24cd3ea35a36cba2c6bdeb3"
    assert str(digests.grpo_corpus_digest([b'{"a":1}', b"[]"])) == expected
    reversed_digest = digests.grpo_corpus_digest([b"[]", b'{"a":1}'])
    assert str(reversed_digest) != expected
    hasher = digests.GrpoCorpusHasher()
    hasher.update(b'{"a":1}')
    hasher.update(b"[]")
    assert str(hasher.digest()) == expected
    assert hasher.count == 2


def test_adapter_content_revision_example() -> None:  # §5.6
    weights = b"adapter-weights"
    config = b'{"peft_type":"LORA","r":8}'
    revision = digests.adapter_content_revision(
        sha256_bytes(weights), len(weights), sha256_bytes(config)
    )
    assert revision == "759abefd8388a6caa41403086ca307b384de3da3aaa71cf2a2cedc9acbc35056"
    # The size and both halves are bound.
    assert (
        digests.adapter_content_revision(sha256_bytes(weights), 16, sha256_bytes(config))
        != revision
    )
    assert (
        digests.adapter_content_revision(sha256_bytes(config), len(weights), sha256_bytes(weights))
        != revision
    )


def test_prompt_digest_example() -> None:  # §5.7
    expected = "sha256:11fb024d048144c699305eb5f1685af0cc29e5bc51fb177e18d892df0f29ca6a"
    assert str(digests.prompt_messages_digest([{"role": "user", "content": "a"}])) == expected
    group = fixtures.grpo_group()
    assert str(digests.prompt_messages_digest(group.messages)) == expected


def test_scored_payload_digest_example() -> None:  # §5.7
    expected = "sha256:09d98e7c2ef7753d99a62ebe1f464fc802391e4166863c194c53dfba1f5adfa6"
    assert str(digests.scored_payload_digest("b", [])) == expected
    assert str(digests.scored_payload_digest("b")) == expected
    group = fixtures.grpo_group()
    assert group.completions[0].provenance.scored_payload_sha256 == expected


def test_kept_corpus_digest_example() -> None:  # §5.7, §4.6
    expected = "sha256:0e33aa57e34dc14a08d037aceddb409ed16c3e5b761e459f3af24a24a0cd0e97"
    assert str(digests.kept_corpus_digest(["sha256:" + "1" * 64])) == expected
    assert str(digests.kept_corpus_digest([])) != expected
    with pytest.raises(DigestMalformed):
        digests.kept_corpus_digest(["sha256:" + "1" * 63])


def test_sft_row_digests_are_domain_separated() -> None:
    row = {"messages": [{"role": "user", "content": "a"}]}
    parsed = digests.sft_parsed_row_digest(row)
    assert parsed == sha256_bytes(
        b'kiln.sft-parsed-row.v1\0{"messages":[{"content":"a","role":"user"}]}'
    )
    raw = digests.sft_raw_row_digest(b"  {not json \n")
    assert raw == sha256_bytes(b"kiln.sft-raw-row.v1\0{not json")


def test_sealed_documents_digest_their_omitted_form() -> None:
    export = fixtures.sft_export()
    document = export.to_json()
    assert "input_adapter" not in document
    assert "split_manifest" not in document["data"]
    assert export.export_sha256 == str(digests.manifest_digest(document, "export_sha256"))
    result = fixtures.result(export)
    assert result.result_sha256 == str(
        canonical_digest({k: v for k, v in result.to_json().items() if k != "result_sha256"})
    )


def test_grpo_corpus_of_groups_hashes_the_canonical_rows() -> None:
    from kiln_verify.hf.manifest import grpo_corpus_sha256, grpo_row_bytes

    group = fixtures.grpo_group()
    row = grpo_row_bytes(group)[:-1]
    assert grpo_corpus_sha256([group, group]) == digests.grpo_corpus_digest([row, row])
    assert grpo_corpus_sha256([group]) != grpo_corpus_sha256([group, group])
