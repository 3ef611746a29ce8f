from __future__ import annotations

from typing import Any

import pytest

from memstore import Turn, hash_node

from .conftest import read_vectors

HASH_VECTORS = read_vectors("hash.jsonl")


@pytest.mark.parametrize("vector", HASH_VECTORS, ids=[v["id"] for v in HASH_VECTORS])
def test_hash_vector_from_a_plain_dict(vector: dict[str, Any]) -> None:
    assert hash_node(vector["parent"], vector["turn"], vector["createdAt"]) == vector["id"]


@pytest.mark.parametrize("vector", HASH_VECTORS, ids=[v["id"] for v in HASH_VECTORS])
def test_hash_vector_from_a_turn_model(vector: dict[str, Any]) -> None:
    turn = Turn.model_validate(vector["turn"])
    assert hash_node(vector["parent"], turn, vector["createdAt"]) == vector["id"]


def test_a_dict_hashes_in_its_own_key_order() -> None:
    forward = {"role": "user", "blocks": []}
    backward = {"blocks": [], "role": "user"}
    assert hash_node(None, forward, 1) != hash_node(None, backward, 1)
    assert hash_node(None, backward, 1) == hash_node(None, Turn.model_validate(backward), 1)


def test_roots_and_children_never_share_an_address() -> None:
    turn = {"role": "user", "blocks": []}
    assert hash_node(None, turn, 1) != hash_node("null", turn, 1)
    assert len(hash_node(None, turn, 1)) == 32
