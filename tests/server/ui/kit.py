"""The dashboard's browser-test kit: a page on a running server, its form, its checks.

Every test ends with :func:`finish`, which closes the tab and asserts what the issue asks
of every page: no console error (a Content-Security-Policy violation is one), no request
beyond the server's own origin, only the expected refused API answers, and a screenshot
that is not blank. ``KILN_UI_SCREENSHOTS=DIR`` also saves each screenshot there (the
documentation's pictures are made that way).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from oracle.base import JsonObject
from oracle.envs.bandit import BanditEnvironment
from tests.browser import Chromium, PageVisit, Tab, ink_fraction

HOSTILE = (
    '<img src="x" onerror="window.__pwned=1"><script>window.__pwned=1</script>'
    "<b>bold</b> &amp; [link](javascript:window.__pwned=1)"
)
"""Markup and script that would set ``window.__pwned`` if any of it were parsed as HTML."""

NO_MODEL = ("/v1/adapters", "/v1/train/hf/exports")
"""Routes a server without a resident model refuses (409) on every page load."""


class HostileBandit(BanditEnvironment):
    """The oracle's bandit with the payload in its metadata, schemas, observations and
    Task API rows: everything the dashboard can show of an environment."""

    class_name = f"Hostile{HOSTILE}"
    description = f"description {HOSTILE}"
    readme = f"# readme\n\n{HOSTILE}\n"
    observation_title = f"Observation {HOSTILE}"

    def _observation(self) -> JsonObject:
        observation = super()._observation()
        observation["input_text"] = f"{HOSTILE}\n{observation['input_text']}"
        return observation

    @classmethod
    def task_splits(cls) -> list[dict[str, str]]:
        return [{"name": "hostile", "type": f"type {HOSTILE}"}]

    @classmethod
    def task_rows(cls, split: str) -> list[Any]:
        if split != "hostile":
            raise KeyError(split)
        return [{"prompt": f"row {index} {HOSTILE}", "answer": index} for index in range(3)]


def open_dashboard(browser: Chromium, base_url: str) -> Tab:
    tab = browser.open(f"{base_url}/ui/")
    tab.wait_for("document.body.dataset.ready === 'true' && !!document.querySelector('#runs > *')")
    return tab


def fill(tab: Tab, fields: dict[str, str]) -> None:
    """Type into the start-a-run form (``f-NAME`` controls) as a person would."""
    for name, value in fields.items():
        tab.evaluate(
            f"(() => {{ const c = document.getElementById('f-{name}');"
            f" c.value = {json.dumps(value)}; c.dispatchEvent(new Event('change')); }})()"
        )


STATUS = "document.getElementById('form-status').innerText"


def accepted_run(tab: Tab) -> str:
    """The run id the form's last submission was accepted as (its status line)."""
    note = tab.wait_for(f"/^(Already a|A)ccepted: run /.test({STATUS}) && {STATUS}")
    return str(note).split("run ", 1)[1].split(" ", 1)[0]


def card_of(run_id: str) -> str:
    """A JavaScript expression: the run's card element (or null)."""
    return f"document.querySelector(\".card[data-run-id='{run_id}']\")"


def wait_state(tab: Tab, run_id: str, state: str, timeout: float = 30.0) -> None:
    tab.wait_for(f"{card_of(run_id)}?.dataset.state === '{state}'", timeout)


def click(tab: Tab, selector: str) -> None:
    tab.evaluate(f"document.querySelector({json.dumps(selector)}).click()")


def small_run(environment_url: str, **fields: str) -> dict[str, str]:
    values = {
        "environment_urls": environment_url,
        "groups": "1",
        "group_size": "2",
        "max_steps": "2",
        "concurrency": "2",
        "capacity_wait_seconds": "5",
    }
    values.update(fields)
    return values


def finish(tab: Tab, base_url: str, name: str, refused: Iterable[str] = ()) -> PageVisit:
    """Screenshot, close, and the checks every dashboard page must pass."""
    shot = tab.screenshot()
    folder = os.environ.get("KILN_UI_SCREENSHOTS")
    if folder:
        Path(folder, f"{name}.png").write_bytes(tab.screenshot(full_page=True))
    visit = tab.close()
    visit.screenshot = shot
    assert visit.console_errors == [], visit.console_errors
    assert visit.requests, "the page made no request at all"
    elsewhere = [url for url in visit.requests if not url.startswith(f"{base_url}/")]
    assert elsewhere == [], elsewhere
    allowed = tuple(f"{base_url}{path} " for path in (*NO_MODEL, *refused))
    unexpected = [line for line in visit.network_errors if not line.startswith(allowed)]
    assert unexpected == [], unexpected
    assert ink_fraction(shot) > 0.02
    return visit
