"""Every answer of the HF/TRL hand-off routes says ``Cache-Control: private, no-store``,
refusals included (the conformance suite found 400 and 404 answers without it); the run
routes are left as they were."""

from __future__ import annotations

import httpx


def test_refusals_of_the_hand_off_routes_are_private(http: httpx.Client) -> None:
    answers = [
        http.get("/v1/train/hf/exports"),  # no resident model: 409
        http.get("/v1/train/hf/exports/missing"),
        http.post("/v1/train/hf/sft/exports", content=b"{"),
        http.post("/v1/train/hf/peft/imports/-bad", content=b"x"),
        http.get("/v1/train/hf/no-such-route"),
    ]
    assert [answer.status_code >= 400 for answer in answers] == [True] * len(answers)
    for answer in answers:
        assert answer.headers.get_list("cache-control") == ["private, no-store"], answer.url
        assert "error" in answer.json()


def test_other_routes_are_unchanged(http: httpx.Client) -> None:
    assert "cache-control" not in http.get("/v1/openenv/runs").headers
    assert "cache-control" not in http.get("/v1/train/other").headers
