"""`ragline serve`: registered in the CLI, and no keyless service beyond loopback."""

from __future__ import annotations

import pytest

from ragline.cli import build_parser, main


def test_serve_is_a_subcommand_with_host_and_port():
    args = build_parser().parse_args(["serve", "--host", "127.0.0.1", "--port", "8123"])
    assert (args.host, args.port) == ("127.0.0.1", 8123) and callable(args.func)


def test_dev_mode_refuses_to_listen_beyond_loopback(monkeypatch, capsys):
    monkeypatch.delenv("RAGLINE_API_KEYS", raising=False)
    assert main(["serve", "--host", "0.0.0.0", "--port", "1"]) == 2
    assert "no API keys configured" in capsys.readouterr().err


def test_bad_key_settings_are_one_line_errors(monkeypatch, capsys, tmp_path):
    from ragline.settings import get_settings

    keys = tmp_path / "keys.json"
    keys.write_text("[1, 2]")
    monkeypatch.setenv("RAGLINE_API_KEYS_FILE", str(keys))
    get_settings.cache_clear()
    try:
        assert main(["serve", "--port", "1"]) == 2
    finally:
        get_settings.cache_clear()
    assert "bad API key settings" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["acme", "acme/alice"])
def test_a_key_names_a_tenant_and_optionally_a_user(value):
    from ragline.api.auth import principal_of

    who = principal_of(value)
    assert who.tenant_id == "acme" and who.user_id == ("alice" if "/" in value else "acme")
