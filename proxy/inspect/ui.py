"""``/ui``: a small read-only web page served by the proxy itself, rendered on the server with
Jinja2 (no build step, no JavaScript, no external assets: works offline), on a worker thread (a
1,000-turn session's page is some 150 ms of Python: on the loop it held every tenant's requests).
Sessions and requests (filterable, newest first), a request page with what ``ctxproxy show`` prints,
and a session page charting context size per turn. Each request and session names its principal, and
the lists filter by it (``?principal=NAME``): the admin sees every principal. Who may see them:
``proxy.auth.check_admin`` (with an admin key set, that key as a bearer header or the session cookie
the POST login form sets; else loopback clients only, unless ``ui.public``)."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import re
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route, request_response
from starlette.staticfiles import StaticFiles

from proxy.auth import COOKIE, admin_key, check_admin, session_seconds, session_token
from proxy.errors import Forbidden, Unauthorized
from proxy.inspect import conversations, cost_view, usage_view
from proxy.inspect import report_view as rv
from proxy.inspect.cache_chart import cache_chart
from proxy.inspect.page_headers import PageHeaders
from proxy.inspect.tenancy import session_filter, session_parts
from proxy.inspect.ui_charts import session_chart, stacked_bars
from proxy.settings import Settings
from proxy.store.read_errors import described, unreadable
from rules.report import listed_count

MAX_LIST = 500
SESSION_TURNS = 1000
RECENT_SCAN = 2000  # the session list looks at sessions seen in the latest N requests
MAX_LOGIN_BODY = 8192  # the login form: a key and where to go next

log = logging.getLogger("ctxproxy.ui")


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


def _root(request: Request) -> str:
    return str(request.scope.get("root_path", ""))


def _next_page(request: Request, value: str) -> str:
    """Where the login form sends the viewer: a /ui page of this server, never elsewhere."""
    home = _root(request) + "/ui"
    safe = value.startswith(home) and value[len(home) : len(home) + 1] in ("", "/", "?")
    return value if safe and value.isprintable() and "\\" not in value else home


async def _form(request: Request, timeout_s: float) -> dict[str, str] | None:
    """A small urlencoded form (no multipart parser needed); None when too large, too slow or
    malformed."""
    body = b""
    try:
        async with asyncio.timeout(timeout_s):
            async for chunk in request.stream():
                body += chunk
                if len(body) > MAX_LOGIN_BODY:
                    return None
    except TimeoutError:
        return None
    try:
        fields = parse_qs(body.decode("utf-8"), keep_blank_values=True, max_num_fields=8)
    except (UnicodeDecodeError, ValueError):
        return None
    return {k: v[0] for k, v in fields.items()}


def _shown(value: Any) -> Any:
    """What a page shows of a value: a string's controls and bidi marks made visible
    (``\u202e``), as the terminal views show them; a right-to-left override in a session name
    or a body reversed what followed it on the page. Markup (none is made now) is left."""
    if isinstance(value, str) and not isinstance(value, Markup):
        return rv.terminal_safe(value)
    return value


class UI:
    def __init__(self) -> None:
        self.env = Environment(
            loader=PackageLoader("proxy.inspect", "templates"),
            autoescape=select_autoescape(default=True),
            trim_blocks=True,
            lstrip_blocks=True,
            finalize=_shown,
        )
        self.env.filters.update(
            when=_when,
            ms=_ms,
            cell=rv.cell,
            q=lambda s: quote(str(s), ""),
            session_name=lambda sid, principal=None: session_parts(str(sid), principal)[1],
        )

    def routes(self) -> list[BaseRoute]:
        static = Path(__file__).parent / "static"
        page = self._readable
        return [  # each answer with the pages' headers (``page_headers``)
            Route("/ui", PageHeaders(request_response(page(self.index))), methods=["GET"]),
            Route("/ui/", PageHeaders(request_response(page(self.index))), methods=["GET"]),
            Route("/ui/login", PageHeaders(request_response(self.login)), methods=["POST"]),
            Route(
                "/ui/requests/{request_id}",
                PageHeaders(request_response(page(self.request_page))),
                methods=["GET"],
            ),
            Route(
                "/ui/sessions/{session_id:path}",
                PageHeaders(request_response(page(self.session_page))),
                methods=["GET"],
            ),
            Mount("/ui/static", PageHeaders(StaticFiles(directory=static)), name="ui-static"),
        ]

    def _readable(
        self, page: Callable[[Request], Awaitable[Response]]
    ) -> Callable[[Request], Awaitable[Response]]:
        """``page``, or a 503 that says so when the request log cannot be read (a table gone, a
        damaged file): a page, not a 500 with a traceback in the server's log."""

        async def read(request: Request) -> Response:
            try:
                return await page(request)
            except Exception as exc:  # PostgreSQL away or locked too: not only SQLite's errors
                if not unreadable(exc):
                    raise
                log.error("ui: the request log cannot be read (%s)", described(exc))
                return self._refused(503, "The request log cannot be read", described(exc))

        return read

    def _page(self, name: str, status: int = 200, **context: Any) -> HTMLResponse:
        return HTMLResponse(self.env.get_template(name).render(**context), status)

    def _refused(self, status: int, title: str, problem: str) -> HTMLResponse:
        return self._page("refused.html", status, title=title, problem=problem)

    def _key_in_address(self, request: Request) -> HTMLResponse | None:
        # A key in the address stays in browser history and front-proxy logs: refused, never read.
        if "key" not in request.query_params:
            return None
        return self._refused(
            400, "Key in the address", "Send the admin key with the login form, not the URL."
        )

    def _login_page(self, request: Request, failed: bool, next_page: str) -> HTMLResponse:
        action = _root(request) + "/ui/login"
        return self._page("login.html", 401, failed=failed, action=action, next=next_page)

    def _guard(self, request: Request) -> Response | None:
        """None when the viewer may see the page; else the login page or a refusal."""
        if (refused := self._key_in_address(request)) is not None:
            return refused
        settings: Settings = request.app.state.services.settings
        try:
            check_admin(
                settings.auth,
                settings.ui.public,
                {k.lower(): v for k, v in request.headers.items()},
                request.scope.get("client"),
                request.cookies.get(COOKIE),
                time.time(),
            )
        except Unauthorized:
            query = request.url.query  # the path includes the root path (ASGI)
            here = request.url.path + (f"?{query}" if query else "")
            return self._login_page(request, False, here)
        except Forbidden as exc:
            return self._refused(403, "Not open to this client", exc.message)
        return None

    async def login(self, request: Request) -> Response:
        """POST /ui/login: the form's key, checked; on success a session cookie and a redirect."""
        if (refused := self._key_in_address(request)) is not None:
            return refused
        settings: Settings = request.app.state.services.settings
        form = await _form(request, settings.limits.body_read_timeout_s)
        if form is None:
            return self._refused(400, "Bad login form", "The login form could not be read.")
        target = _next_page(request, form.get("next", ""))
        key = admin_key(settings.auth)
        if not key:  # nothing to log into: the page itself says whether it is open
            return RedirectResponse(target, 303)
        try:
            check_admin(
                settings.auth,
                settings.ui.public,
                {"authorization": f"Bearer {form.get('key', '')}"},
                request.scope.get("client"),
            )
        except Unauthorized:
            return self._login_page(request, True, target)
        response = RedirectResponse(target, 303)
        lifetime = session_seconds(settings.auth)
        response.set_cookie(
            COOKIE,
            session_token(key, int(time.time()) + lifetime),
            max_age=lifetime,
            path=_root(request) + "/ui",
            # https as the client sees it: TLS here, or X-Forwarded-Proto from a trusted proxy
            # (server.trusted_proxies; uvicorn's proxy headers middleware sets the scheme).
            secure=request.url.scheme == "https",
            httponly=True,
            samesite="strict",
        )
        return response

    async def index(self, request: Request) -> Response:
        if (denied := self._guard(request)) is not None:
            return denied
        store = request.app.state.services.store
        qp = request.query_params
        filters = {k: qp.get(k, "").strip() for k in ("principal", "session", "model", "status")}
        status = _number(filters["status"])
        if filters["status"] and (status is None or not 100 <= status <= 599):
            return self._page(
                "bad_request.html", 400, problem="status must be an HTTP status, 100 to 599."
            )
        limit = _number(qp.get("limit", "").strip() or "100")
        if limit is None or limit < 1:
            return self._page("bad_request.html", 400, problem="limit must be a positive number.")
        principal = filters["principal"] or None
        rows = await store.list_requests(
            session=session_filter(filters["session"], principal),
            principal=principal,
            model=filters["model"] or None,
            status=status,
            limit=min(MAX_LIST, limit),
            bodies=False,
        )
        sessions = await recent_sessions(store, principal=principal)
        return await asyncio.to_thread(self._index_page, rows, sessions, filters)

    def _index_page(
        self, rows: list[dict[str, Any]], sessions: list[dict[str, Any]], filters: dict[str, str]
    ) -> HTMLResponse:
        for r in rows:
            report = rv.report_of(rv.with_billed(r))
            r["n_repairs"] = listed_count(report, "repairs")
            r["n_pruned"] = listed_count(report, "pruning")
        return self._page("index.html", rows=rows, sessions=sessions, filters=filters)

    async def request_page(self, request: Request) -> Response:
        if (denied := self._guard(request)) is not None:
            return denied
        row = await request.app.state.services.store.get_request(request.path_params["request_id"])
        if row is None:
            return self._page("missing.html", 404, what="request")
        row = await cost_view.with_account_now(request.app.state.services.store, row)
        return await asyncio.to_thread(self._request_page, row)

    def _request_page(self, row: dict[str, Any]) -> HTMLResponse:
        report = rv.report_of(row)
        lists = [
            (rv.listed_title(report, key, title), rv.items(report, key))
            for key, title in (
                ("repairs", "Repairs"),
                ("pruning", "Pruning decisions"),
                ("loops", "Loops"),
                ("warnings", "Warnings"),
                ("rule_errors", "Rule errors"),
            )
        ]
        entities = [
            ("Entities the references point to", "referenced", rv.referenced_entities(report)),
            (
                rv.listed_title(report, "entities", "New entities (this request's tool calls)"),
                "new",
                rv.items(report, "entities"),
            ),
        ]
        timings = rv.timings(report)
        return self._page(
            "request.html",
            row=rv.with_billed(row),
            sections=rv.sections(row),
            bars=stacked_bars(rv.sections(row)),
            usage=usage_view.usage_summary(row),
            cache_lines=cost_view.cache_lines(row),
            lists=[(t, items, rv.item_columns(items)) for t, items in lists],
            entities=[(t, key, items, rv.item_columns(items)) for t, key, items in entities],
            references=[rv.reference_text(r) for r in rv.items(report, "references")],
            freed=rv.freed_by_stage(report),
            working_set=rv.working_set_lines(report),
            workspace=rv.workspace_view(report),
            timings=timings,
            timing_scale=max([0.001, *(ms for _, ms in timings)]),
            diff=rv.message_diff(row),
        )

    async def session_page(self, request: Request) -> Response:
        if (denied := self._guard(request)) is not None:
            return denied
        sid = request.path_params["session_id"]
        store = request.app.state.services.store
        rows = await store.list_requests(session=sid, limit=SESSION_TURNS, bodies=False)
        if not rows:
            return self._page("missing.html", 404, what="session")
        total = len(rows)
        if total >= SESSION_TURNS:  # the newest only: the page says of how many
            total = int((await store.fetchall(store.dialect.session_requests, (sid,)))[0][0])
        children = await conversations.child_sessions(store, sid)
        wanted = request.query_params.get("conversation")
        return await asyncio.to_thread(self._session_page, sid, rows, total, children, wanted)

    def _session_page(
        self,
        sid: str,
        rows: list[dict[str, Any]],
        total: int,
        children: list[dict[str, Any]],
        wanted: str | None,
    ) -> HTMLResponse:
        """``rows``: the session's newest, of ``total``."""
        rows.reverse()  # turn order
        for r in rows:
            rv.with_billed(r)
            r["loop_kinds"] = rv.loop_kinds(rv.report_of(r))
        principal, name = session_parts(sid, rows[-1].get("principal"))
        cost = cost_view.session_cost(rows)
        groups = conversations.conversations(rows)
        shown = conversations.chosen(groups, wanted)
        # the session's own turn numbers where the page holds one conversation; a conversation
        # among others is numbered in its own requests (those read)
        first = total - len(rows) if len(groups) == 1 else 0
        return self._page(
            "session.html",
            cost=cost,
            cost_line=cost_view.cost_text(cost, rows[-1].get("model")),
            cache_chart=cache_chart(shown.rows, first=first),
            session_id=sid,
            principal=principal,
            client_name=name,
            rows=shown.rows,
            all_rows=len(rows),
            total=total,
            first_turn=first,
            conversations=groups,
            shown=shown,
            children=children,
            chart=session_chart(shown.rows, first=first),
            parent=next((r["parent_session_id"] for r in rows if r.get("parent_session_id")), None),
        )


async def recent_sessions(
    store: Any, limit: int = 50, principal: str | None = None
) -> list[dict[str, Any]]:
    """Sessions seen in the latest requests (of ``principal`` when given), with totals and their
    principal; two indexed queries, no full scan."""
    rows: list[dict[str, Any]] = await store.recent_sessions(RECENT_SCAN, limit, principal)
    return rows


def routes() -> list[BaseRoute]:
    """The /ui routes, bound to a fresh UI (its own template environment) per app."""
    return UI().routes()
