"""Fixtures of the browser tests: one service (`ragline serve --sample`, API keys on, the scripted
model) behind a cuttable proxy per module, one headless Chromium, and a fresh page per test."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.browser.harness import (
    CuttableProxy,
    SampleServer,
    launch_chromium,
    missing_browser,
)
from tests.conftest import SCRIPTED
from tests.scripted_model import ScriptedModel

API_KEY = "browser-test-key"
KEYS = {API_KEY: "default"}  # the tenant --sample indexes the sample knowledge base for


@pytest.fixture(scope="module")
def service(scripted_server: ScriptedModel, tmp_path_factory: pytest.TempPathFactory) -> Iterator[CuttableProxy]:
    """The service as the browser reaches it: through a proxy the test can cut."""
    data = tmp_path_factory.mktemp("browser-data")
    env = {
        "RAGLINE_DATA_DIR": str(data),
        "RAGLINE_CHAT_MODEL": SCRIPTED,
        "RAGLINE_CHAT_API_BASE": scripted_server.base_url,
        "RAGLINE_CHAT_API_KEY": "k",
        "RAGLINE_API_KEYS": json.dumps(KEYS),
    }
    server = SampleServer(env, log=data / "serve.log").start()
    proxy = CuttableProxy(server.port).start()
    yield proxy
    proxy.stop()
    server.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    reason = missing_browser()
    if reason:
        pytest.fail(reason, pytrace=False)  # a missing browser is a broken setup, not a skip
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = launch_chromium(playwright)
        yield chromium
        chromium.close()


@pytest.fixture
def model(scripted_server: ScriptedModel) -> ScriptedModel:
    """The scripted model with no rules yet: each test scripts its own replies."""
    scripted_server.rules.clear()
    scripted_server.requests.clear()
    return scripted_server


@pytest.fixture
def context(browser: Any) -> Iterator[Any]:
    """A fresh browser profile state (storage, cookies) per test."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 860})
    ctx.set_default_timeout(15_000)
    yield ctx
    ctx.close()


@pytest.fixture
def page(context: Any, service: CuttableProxy) -> Any:
    """The chat page, already signed in (the key is in localStorage before the page's scripts run)."""
    context.add_init_script(f"localStorage.setItem('ragline.apiKey', {json.dumps(API_KEY)});")
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda error: errors.append(str(error)))
    tab.goto(service.url)
    tab.locator(".kb").first.wait_for()
    yield tab
    assert not errors, f"the page threw: {errors}"
