"""litellm never fetches a URL a request names.

Given an image or file by URL that the provider cannot take as a URL (an ``http://`` image for
Anthropic, a ``file_id`` URL for OpenAI, …), litellm downloads it itself, from the proxy's host,
to send its bytes: a request field would choose a URL the proxy contacts. Its own policy only
refused private addresses, in words telling the user to set ``user_url_allowed_hosts``.
Every such download goes through litellm's ``validate_url`` (``safe_get``), which here refuses
every URL before any connection, raising ``ClientUrlRefused``;
``proxy.upstream.litellm_errors.failure`` tells the client a 400 naming the URL. A URL the
provider takes as its own source (Anthropic's ``https`` image or document, OpenAI's
``image_url``) is passed on, never fetched here.

Installed once, when litellm is first imported (``proxy.providers.load_litellm``);
``tests/proxy/upstream/test_bridge_no_fetch.py`` fails if a release moves what this replaces."""

from __future__ import annotations

from typing import Any

_INSTALLED = "_ctxproxy_no_fetch"


class ClientUrlRefused(Exception):
    """A URL of the request that litellm would have fetched."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.url = url


def install() -> None:
    """litellm's URL check for its downloads refuses every URL (above)."""
    import litellm
    from litellm.litellm_core_utils import url_utils

    if getattr(url_utils, _INSTALLED, False):
        return
    # the check runs only while validation is on: a plain fetch otherwise
    litellm.user_url_validation = True
    # litellm's handlers catch its SSRFError as a refused URL (no retry, no other fetch)
    refused: Any = type("ClientUrlRefusedSSRF", (ClientUrlRefused, url_utils.SSRFError), {})

    def validate_url(url: str) -> tuple[str, str]:
        raise refused(url)

    url_utils.validate_url = validate_url
    setattr(url_utils, _INSTALLED, True)
