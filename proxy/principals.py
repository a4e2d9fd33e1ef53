"""Who a request is: every request belongs to a principal, and everything the proxy keeps per
session is kept per (principal, session), so one tenant never reads or writes another's state.

- ``auth.mode: keys``: the proxy key presented. A key listed under ``auth.principals`` is that
  name (several keys may share one name, so a key can be rotated without losing sessions); any
  other accepted key is ``key-`` and a keyed hash of it.
- passthrough: ``pt-`` and a keyed hash of the credential the client presented as its
  protocol's upstream reads it (its bearer, else its API key header; Gemini's key header, else
  ``?key=``), so two provider keys never share state and the key itself is never stored. On the
  Messages protocol every credential counts: its native relay sends every header, and the
  upstream (or a gateway) may read any, so an ``Authorization`` of any scheme (``Basic``) and
  every header it sends named as a credential is (``x-portkey-api-key``, ``x-auth-token``)
  count, and two clients sharing one but not another never share a principal. A header it never
  sends (a cookie, ``x-forwarded-authorization``) or one new on every request (an idempotency
  key) does not count: it authenticates nothing upstream, and would split one client into a
  principal per request.
  Elsewhere a header the upstream is not sent does not count: a junk ``x-api-key`` beside one
  bearer would have made a new principal, and with it a lane of its own, per value.
- no credential at all (passthrough only): the one ``anonymous`` namespace.

The keyed hash is an HMAC with the server secret, made at first start and kept in the store, so
every replica of a gateway names a key alike and a name in the log tells nothing of the key.
Rows stored before principals existed belong to ``legacy``, which no request is ever given."""

from __future__ import annotations

import hmac
import os
import re
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from proxy import charge_groups
from proxy.errors import Unauthorized
from proxy.networks import network_of
from proxy.relayed_headers import relayed_headers
from proxy.settings import AuthSettings, UpstreamSettings

ANONYMOUS = "anonymous"
LEGACY = "legacy"
# The lane of passthrough principals no upstream has accepted a request of yet (``lane``).
UNVERIFIED = "unverified"
VERIFIED_KEPT = 10_000  # accepted principals remembered (oldest forgotten: one more lane wait)
# Principals one client network may have accepted at once: an upstream that checks no key (a
# local vLLM or Ollama) accepts every made-up one, and 60 of them from one host held 480
# requests in flight, each with a lane's bounds; past this many, its new ones share its lane
VERIFIED_PER_NETWORK = 16
RESERVED = frozenset({ANONYMOUS, LEGACY})
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
SEPARATOR = "/"  # never in a principal's name: a scoped key splits at its first one
# Headers that carry a client's credential, in order (Gemini's key header included).
_KEY_HEADERS = ("x-api-key", "x-goog-api-key", "api-key")
# Every header a client's credential may come in: none of them is forwarded where the upstream
# gets the server's key (in keys mode the credential is the proxy key).
CREDENTIAL_HEADERS = frozenset({"authorization", *_KEY_HEADERS})
# Credentials whose principal is kept (newest): a client presents the same one on every request,
# and its HMAC costs ~2.5 µs hot, ~10 µs between requests (OpenSSL's code and tables gone cold).
KNOWN_CREDENTIALS = 256


def unverified_lane(client: Sequence[Any] | None) -> str:
    """The lane of unverified principals from ``client``'s network (the ASGI scope's client: the
    socket's peer, or what a trusted proxy said; ``proxy.networks``): without a readable
    address, the one lane of them all."""
    network = network_of(str(client[0])) if client else None
    return UNVERIFIED if network is None else f"{UNVERIFIED}@{network}"


def scoped(principal: str, name: str) -> str:
    """The key a principal's session (or parent) is kept under: ``principal/name``."""
    return f"{principal}{SEPARATOR}{name}"


def split_scoped(key: str) -> tuple[str, str]:
    """(principal, the client's name) of a scoped key."""
    principal, _, name = key.partition(SEPARATOR)
    return principal, name


# What a header that may carry a credential is called, on a relay that sends every header (a
# gateway's `x-portkey-api-key`, `x-auth-token`); only a header the relay sends counts
# (``proxy.relayed_headers``: not the cookie, `x-forwarded-authorization`, `proxy-authorization`)
_CREDENTIAL_NAME = re.compile(r"key|token|auth|secret|passw|cookie|signature|credential")
# new on every request whatever the client (an SDK's `x-stainless-idempotency-key`): counted,
# each request would be a principal of its own, with no session state
_PER_REQUEST_SUFFIXES = ("idempotency-key", "request-id")


def credentials(headers: Mapping[str, str], presented: str | None = None) -> str | None:
    """Every credential a client presented (``presented``, its ``Authorization`` of any scheme,
    every header named as a credential is), as one string: the one itself when there is one (the
    principal a single key always had; a bearer's token alone), else their distinct values
    sorted, as a JSON list (unambiguous, whatever a value holds)."""
    found = {presented} if presented else set()
    for name, value in relayed_headers(headers):
        if name.endswith(_PER_REQUEST_SUFFIXES):
            continue
        if name == "authorization" and value[:7].lower() == "bearer ":
            found.add(value[7:].strip())
        elif _CREDENTIAL_NAME.search(name):
            found.add(value.strip())
    found.discard("")
    if len(found) <= 1:
        return next(iter(found), None)
    return orjson.dumps(sorted(found)).decode()


def credential(headers: Mapping[str, str]) -> str | None:
    """The credential a client presented: its bearer token, else its API key header."""
    auth = headers.get("authorization", "")
    if auth[:7].lower() == "bearer ":
        token = auth[7:].strip()
        if token:
            return token
    for name in _KEY_HEADERS:
        value = headers.get(name, "").strip()
        if value:
            return value
    return None


class Principals:
    """Tells each request's principal (``of``), from the settings, the environment's keys and the
    server secret; built once at start-up."""

    def __init__(self, settings: AuthSettings, secret: bytes) -> None:
        self.mode = settings.mode
        self._secret = secret
        # keyed hash of each accepted key -> its principal: a lookup by a digest an attacker
        # cannot compute tells nothing through its timing
        self._keys: dict[bytes, str] = {}
        for key in proxy_keys(settings):
            self._keys[self._digest(key)] = self._hashed("key-", key)
        for name, envs in settings.principals.items():
            for env in envs:
                for key in _split_keys(os.environ.get(env, "")):
                    self._keys[self._digest(key)] = name
        # credential presented -> its principal, accepted ones only (a refused key is hashed
        # each time, as before); a hit needs the credential itself, so it tells a caller nothing
        self._known: dict[str, str] = {}
        # accepted principal -> the network it was accepted from (its unverified lane's name)
        self._accepted: OrderedDict[str, str] = OrderedDict()
        self._per_network: dict[str, int] = {}

    def lane(self, principal: str, client: Sequence[Any] | None = None) -> str:
        """Whose turn a request takes in what tenants share (the worker threads, the in-flight
        bounds): its principal's, except in passthrough for a principal no upstream has accepted
        a request of yet, which shares one lane with every such principal from its client's
        network (``client``: the ASGI scope's, ``unverified_lane``). A made-up key is a
        new principal for free, and the rules run before the upstream refuses it: ten made-up
        keys took ten turns of the workers, and a real tenant's request waited 5.2 s, not 1.3;
        in one lane for all, a new user's first request waited behind (or got the 429 of) a
        flood of made-up keys from anywhere. An upstream called with the server's key accepts
        any credential, so its answers verify none (``accepted`` is not told of them): there a
        made-up key stays in its network's lane, and cannot push a verified one out of the
        ``VERIFIED_KEPT`` remembered. Nor can an upstream that checks no key give more than
        ``VERIFIED_PER_NETWORK`` of one network's made-up keys lanes of their own. The shared
        in-memory maps charge an unverified principal's entries to its lane too
        (``proxy.charge_groups``)."""
        if self.mode == "keys" or principal in self._accepted:
            return principal
        lane = unverified_lane(client)
        charge_groups.unverified(principal, lane)  # its entries in the shared maps: its lane's
        return lane

    def answered(
        self, principal: str, status: int, upstream: UpstreamSettings, client: Sequence[Any] | None
    ) -> None:
        """An upstream answered a request of ``principal`` with ``status``: below 400, and with
        the client's own credential (not the server's, ``server_credentials``, whose answer
        vouches for none), it is ``accepted``."""
        if status < 400 and not upstream.server_credentials:
            self.accepted(principal, client)

    def accepted(self, principal: str, client: Sequence[Any] | None = None) -> None:
        """An upstream answered a request of ``principal`` (below 400) with the client's own
        credential: its own lane from now, unless ``VERIFIED_PER_NETWORK`` principals of its
        client's network (``client``, as for ``lane``) have one already."""
        if self.mode == "keys":
            return
        accepted = self._accepted
        if principal in accepted:
            accepted.move_to_end(principal)
            return
        network = unverified_lane(client)
        counts = self._per_network
        if counts.get(network, 0) >= VERIFIED_PER_NETWORK:
            return
        accepted[principal] = network
        counts[network] = counts.get(network, 0) + 1
        charge_groups.verified(principal)
        if len(accepted) > VERIFIED_KEPT:
            _, gone = accepted.popitem(last=False)
            counts[gone] -= 1
            if not counts[gone]:
                del counts[gone]

    def label(self, principal: str, value: str) -> str:
        """``value`` (an end user's id a body names) as ``principal``'s own: a keyed hash of
        both, never equal to another principal's (``proxy.upstream.tenant_ids``)."""
        return self._hashed("u-", f"{principal}\x00{value}")

    @property
    def key_count(self) -> int:
        return len(self._keys)

    def _digest(self, value: str) -> bytes:
        data = value.encode("utf-8", "surrogatepass")
        return hmac.digest(self._secret, data, "sha256")  # (the one-shot C call)

    def _hashed(self, prefix: str, value: str) -> str:
        return prefix + self._digest(value).hex()[:16]

    def of(
        self, headers: Mapping[str, str], presented: str | None = None, every: bool = False
    ) -> str:
        """The request's principal; raises Unauthorized in keys mode without an accepted key.
        ``presented``: the credential as the protocol reads it, where it reads one ``credential``
        does not (Gemini's ``?key=``, its key header before a bearer token). ``every``: the
        upstream is sent every credential header (the Messages relay): in passthrough they all
        count (``credentials``)."""
        if self.mode == "passthrough" and every:
            presented = credentials(headers, presented)
        else:
            presented = presented or credential(headers)
        if not presented:
            if self.mode == "passthrough":
                return ANONYMOUS
            raise Unauthorized("Invalid or missing proxy API key.")
        known = self._known.get(presented)
        if known is not None:
            return known
        if self.mode == "passthrough":
            name: str | None = self._hashed("pt-", presented)
        else:
            name = self._keys.get(self._digest(presented))
        if name is None:
            raise Unauthorized("Invalid or missing proxy API key.")
        if len(self._known) >= KNOWN_CREDENTIALS:
            del self._known[next(iter(self._known))]  # the oldest kept
        self._known[presented] = name
        return name


def no_keys_problem(settings: AuthSettings) -> str | None:
    """Keys mode with no proxy key set anywhere: what to say, refusing to start (every request
    would be refused); None otherwise."""
    if settings.mode != "keys" or proxy_keys(settings):
        return None
    if any(_split_keys(os.environ.get(env, "")) for envs in settings.principals.values()
           for env in envs):  # fmt: skip
        return None
    named = sorted({env for envs in settings.principals.values() for env in envs})
    if named:  # the principals are named: their variables are what is missing
        unset = ", ".join(f"${env}" for env in named)
        return (
            f"auth.mode: keys, but no proxy key is set: auth.principals names {unset}, and "
            f"none of them is set in the environment (nor ${settings.proxy_keys_env}); "
            "without one every request would be refused"
        )
    return (
        "auth.mode: keys, but no proxy key is set: put keys in "
        f"${settings.proxy_keys_env} (comma-separated) or name them under "
        "auth.principals; without one every request would be refused"
    )


def proxy_keys(settings: AuthSettings) -> list[str]:
    """The unnamed proxy keys, comma-separated in ``auth.proxy_keys_env``."""
    return _split_keys(os.environ.get(settings.proxy_keys_env, ""))


def _split_keys(raw: str) -> list[str]:
    return [k.strip() for k in raw.split(",") if k.strip()]
