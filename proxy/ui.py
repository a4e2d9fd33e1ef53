"""``/ui``: a small read-only web page served by the proxy itself, rendered on the server with
Jinja2 (no build step, no JavaScript, no external assets: works offline). Sessions and requests
(filterable, newest first), a request page with what ``ctxproxy show`` prints, and a session page
charting context size per turn. With ``auth.mode: keys`` every page needs the admin key: a bearer
header, or ``?key=…`` once, which sets an HttpOnly cookie holding a token derived from the key."""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import os
import re
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from proxy import report_view as rv
from proxy.auth import check_admin
from proxy.errors import ProxyError
from proxy.settings import AuthSettings
from proxy.ui_charts import session_chart, stacked_bars

COOKIE = "ctxproxy_admin"
MAX_LIST = 500
SESSION_TURNS = 1000
RECENT_SCAN = 2000  # the session list looks at sessions seen in the latest N requests


def _when(ts: float | None) -> str:
    return dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S") if ts else "-"


def _ms(value: Any) -> str:
    return "-" if value is None else f"{float(value):.1f}"


_ASCII_NUMBER = re.compile(r"[0-9]{1,12}")


def _number(text: str) -> int | None:
    """A non-negative ASCII integer (``str.isdigit`` also takes '²' and other digits ``int``
    refuses or reads), or None; overly long ones read as a huge number, never overflow SQL."""
    if text.isascii() and text.isdigit():
        return int(text) if _ASCII_NUMBER.fullmatch(text) else 10**12
    return None


def _cookie_token(admin_key: str, expires: int) -> str:
    """``expires.mac``: the expiry is signed with the admin key, so a leaked cookie dies on its
    own and changing the key ends every session."""
    mac = hmac.new(admin_key.encode(), b"ctxproxy-ui-session:%d" % expires, hashlib.sha256)
    return f"{expires}.{mac.hexdigest()}"


def _cookie_valid(admin_key: str, cookie: str, now: float) -> bool:
    expires, _, _ = cookie.partition(".")
    if not (expires.isascii() and expires.isdigit() and len(expires) <= 12):
        return False
    if int(expires) <= now:
        return False
    # Bytes: compare_digest refuses str holding non-ASCII, and a cookie is anyone's to send.
    expected = _cookie_token(admin_key, int(expires)).encode()
    return hmac.compare_digest(cookie.encode("utf-8", "replace"), expected)


class UI:
    def __init__(self) -> None:
        self.env = Environment(
            loader=PackageLoader("proxy", "templates"),
            autoescape=select_autoescape(default=True),
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.env.filters.update(when=_when, ms=_ms, cell=rv.cell, q=lambda s: quote(str(s), ""))

    def routes(self) -> list[BaseRoute]:
        static = Path(__file__).parent / "static"
        return [
            Route("/ui", self.index, methods=["GET"]),
            Route("/ui/", self.index, methods=["GET"]),
            Route("/ui/requests/{request_id}", self.request_page, methods=["GET"]),
            Route("/ui/sessions/{session_id:path}", self.session_page, methods=["GET"]),
            Mount("/ui/static", StaticFiles(directory=static), name="ui-static"),
        ]

    def _page(self, name: str, status: int = 200, **context: Any) -> HTMLResponse:
        return HTMLResponse(self.env.get_template(name).render(**context), status)

    def _guard(self, request: Request) -> Response | None:
        """None when the viewer may see the page; else the login page or a redirect."""
        auth: AuthSettings = request.app.state.services.settings.auth
        if auth.mode == "passthrough":
            return None
        headers = {k.lower(): v for k, v in request.headers.items()}
        admin = os.environ.get(auth.admin_key_env, "")
        key = request.query_params.get("key")
        if key is not None:
            try:
                check_admin(auth, {"authorization": f"Bearer {key}"}, None)
            except ProxyError:
                return self._page("login.html", 401, failed=True, path=request.url.path)
            rest = {k: v for k, v in request.query_params.items() if k != "key"}
            target = request.url.path + (f"?{urlencode(rest)}" if rest else "")
            response = RedirectResponse(target, 303)
            lifetime = int(auth.ui_session_hours * 3600)
            response.set_cookie(
                COOKIE,
                _cookie_token(admin, int(time.time()) + lifetime),
                max_age=lifetime,
                httponly=True,
                samesite="strict",
                path="/ui",
            )
            return response
        cookie = request.cookies.get(COOKIE)
        if admin and cookie and _cookie_valid(admin, cookie, time.time()):
            return None
        try:
            check_admin(auth, headers, None)
        except ProxyError:
            return self._page("login.html", 401, failed=False, path=request.url.path)
        return None

    async def index(self, request: Request) -> Response:
        if (denied := self._guard(request)) is not None:
            return denied
        store = request.app.state.services.store
        qp = request.query_params
        filters = {k: qp.get(k, "").strip() for k in ("session", "model", "status")}
        status = _number(filters["status"])
        if filters["status"] and (status is None or not 100 <= status <= 599):
            return self._page(
                "bad_request.html", 400, problem="status must be an HTTP status, 100 to 599."
            )
        limit = _number(qp.get("limit", "").strip() or "100")
        if limit is None or limit < 1:
            return self._page("bad_request.html", 400, problem="limit must be a positive number.")
        rows = await store.list_requests(
            session=filters["session"] or None,
            model=filters["model"] or None,
            status=status,
            limit=min(MAX_LIST, limit),
        )
        for r in rows:
            report = rv.report_of(r)
            r["n_repairs"], r["n_pruned"] = (
                len(rv.items(report, "repairs")),
                len(rv.items(report, "pruning")),
            )
        return self._page(
            "index.html", rows=rows, sessions=await recent_sessions(store), filters=filters
        )

    async def request_page(self, request: Request) -> Response:
        if (denied := self._guard(request)) is not None:
            return denied
        row = await request.app.state.services.store.get_request(request.path_params["request_id"])
        if row is None:
            return self._page("missing.html", 404, what="request")
        report = rv.report_of(row)
        lists = [
            (title, rv.items(report, key))
            for key, title in (
                ("repairs", "Repairs"),
                ("entities", "Entities"),
                ("references", "Resolved references"),
                ("pruning", "Pruning decisions"),
                ("warnings", "Warnings"),
                ("rule_errors", "Rule errors"),
            )
        ]
        ws = report.get("working_set")
        timings = rv.timings(report)
        return self._page(
            "request.html",
            row=row,
            sections=rv.sections(row),
            bars=stacked_bars(rv.sections(row)),
            usage=rv.usage_summary(row),
            lists=[(t, items, rv.item_columns(items)) for t, items in lists],
            freed=rv.freed_by_stage(report),
            working_set=(ws.items() if isinstance(ws, dict) else [("value", ws)]) if ws else [],
            timings=timings,
            timing_scale=max([0.001, *(ms for _, ms in timings)]),
            diff=rv.message_diff(row),
        )

    async def session_page(self, request: Request) -> Response:
        if (denied := self._guard(request)) is not None:
            return denied
        sid = request.path_params["session_id"]
        rows = await request.app.state.services.store.list_requests(
            session=sid, limit=SESSION_TURNS
        )
        if not rows:
            return self._page("missing.html", 404, what="session")
        rows.reverse()  # turn order
        return self._page(
            "session.html",
            session_id=sid,
            rows=rows,
            chart=session_chart(rows),
            parent=next((r["parent_session_id"] for r in rows if r.get("parent_session_id")), None),
        )


async def recent_sessions(store: Any, limit: int = 50) -> list[dict[str, Any]]:
    """Sessions seen in the latest requests, with totals; two indexed queries, no full scan."""
    sql = (
        "SELECT session_id FROM (SELECT session_id, created_at FROM requests "
        "ORDER BY created_at DESC LIMIT ?) WHERE session_id IS NOT NULL "
        "GROUP BY session_id ORDER BY MAX(created_at) DESC LIMIT ?"
    )
    async with store.reader.execute(sql, (RECENT_SCAN, limit)) as cur:
        ids = [r[0] for r in await cur.fetchall()]
    if not ids:
        return []
    marks = ",".join("?" for _ in ids)
    sql = (
        "SELECT session_id, COUNT(*) AS requests, MAX(created_at) AS last_seen, "
        "SUM(tokens_before) AS tokens_before, SUM(tokens_after) AS tokens_after, "
        f"SUM(cached_tokens) AS cached_tokens FROM requests WHERE session_id IN ({marks}) "
        "GROUP BY session_id ORDER BY last_seen DESC"
    )
    async with store.reader.execute(sql, ids) as cur:
        return [dict(r) for r in await cur.fetchall()]


def routes() -> list[BaseRoute]:
    """The /ui routes, bound to a fresh UI (its own template environment) per app."""
    return UI().routes()
