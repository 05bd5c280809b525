import ipaddress

import pytest

from ragline.settings import get_settings
from ragline.web.fetch import fetch_url_content
from ragline.web.guard import AddressPolicy, BlockedAddressError, GuardedNetworkBackend
from tests.web.conftest import Page

REFUSED = ["http://127.0.0.1:{port}/", "http://10.1.2.3/", "http://169.254.169.254/latest/meta-data/", "http://[::1]:{port}/",
           "http://169.254.10.1/", "http://192.168.1.1/", "http://172.16.0.1/", "http://[::ffff:127.0.0.1]:{port}/",
           "http://100.64.0.1/", "http://0.0.0.0:{port}/", "http://[fd00::1]/"]


@pytest.mark.parametrize("template", REFUSED)
async def test_fetch_refuses_private_loopback_link_local_and_metadata_addresses(site, template):
    site.pages["/"] = Page("<p>secret</p>")
    with pytest.raises(BlockedAddressError):
        await fetch_url_content(template.format(port=site.port), AddressPolicy())
    assert site.hits == []


@pytest.mark.parametrize("target", ["{site}/secret", "http://10.0.0.1/", "http://169.254.169.254/latest/meta-data/",
                                    "http://[::1]:{port}/secret"])
async def test_fetch_refuses_a_redirect_to_a_private_address(site, second_site, target):
    """Only the first hop's address (127.0.0.2) is allowed; every redirect target is refused."""
    site.pages["/secret"] = Page("<p>secret</p>")
    location = target.format(site=site.url(""), port=site.port)
    second_site.pages["/go"] = Page("", status=302, headers={"Location": location})
    policy = AddressPolicy(allowed_networks=(ipaddress.ip_network("127.0.0.2/32"),))
    with pytest.raises(BlockedAddressError):
        await fetch_url_content(second_site.url("/go"), policy)
    assert second_site.hits == ["/go"] and site.hits == []


@pytest.mark.parametrize("host", ["localhost", "127.1", "2130706433", "0x7f000001"])
async def test_names_that_resolve_to_loopback_are_refused_after_dns_resolution(site, host):
    site.pages["/"] = Page("<p>secret</p>")
    with pytest.raises(BlockedAddressError, match="resolves to a refused address"):
        await fetch_url_content(f"http://{host}:{site.port}/", AddressPolicy())
    assert site.hits == []


async def test_the_network_backend_checks_every_address_a_name_resolves_to():
    backend = GuardedNetworkBackend(AddressPolicy())
    with pytest.raises(BlockedAddressError):
        await backend.resolve("localhost", 80)


async def test_metadata_addresses_stay_refused_when_private_addresses_are_allowed():
    with pytest.raises(BlockedAddressError, match="metadata"):
        await fetch_url_content("http://169.254.169.254/latest/meta-data/", AddressPolicy(allow_private=True))
    with pytest.raises(BlockedAddressError, match="metadata"):
        await fetch_url_content("http://metadata.google.internal/computeMetadata/v1/", AddressPolicy(allow_private=True))


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://example.com/x", "gopher://127.0.0.1/"])
async def test_only_http_and_https_urls_are_fetched(url):
    with pytest.raises(BlockedAddressError, match="only http and https"):
        await fetch_url_content(url, AddressPolicy(allow_private=True))


def test_public_addresses_pass_the_policy():
    policy = AddressPolicy()
    assert policy.refusal("93.184.216.34") is None and policy.refusal("2606:4700::1111") is None


async def test_allow_private_setting_lets_the_fetch_reach_loopback(site, allow_private):
    site.pages["/"] = Page("<article><p>Intranet page text.</p></article>")
    page = await fetch_url_content(site.url("/"), AddressPolicy.from_settings(get_settings()))
    assert page.text == "Intranet page text."
