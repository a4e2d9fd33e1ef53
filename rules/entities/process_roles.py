"""What a started process is, read off its command line when no port it serves is known: a
server (``npm run dev``, ``uvicorn``, ``rails s``), a job that serves nothing (``celery
worker``, ``tail -f``), or either. "The server you started" may mean the first or the last,
never the second: the newest process is not a server for being the newest."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

# the words of a command line, split at what joins them in names: `reindex_worker.py`,
# `redis-server`, `http.server`, `dev:api` (a character class repeated: linear)
_WORD = re.compile(r"[a-z0-9]+")
_MAX_CHARS = 400  # a process's name and command are clipped shorter

_SERVES = frozenset(
    # (not "app", "api", "web": names of projects as often as of servers, `celery -A app`)
    ("serve", "server", "servers", "runserver", "dev", "develop", "start", "preview", "uvicorn",
     "gunicorn", "hypercorn", "daphne", "waitress", "flask", "fastapi", "rails", "puma",
     "unicorn", "vite", "next", "nuxt", "astro", "remix", "webpack", "parcel", "storybook",
     "jupyter", "notebook", "streamlit", "gradio", "hugo", "jekyll", "httpd", "nginx", "caddy",
     "apache2", "tomcat", "postgres", "mongod", "mysqld", "mariadbd", "ollama", "grafana",
     "prometheus", "minio", "mailhog", "http", "bootrun", "flower")
)  # fmt: skip
_SERVES_NOTHING = frozenset(
    ("worker", "workers", "celery", "rq", "sidekiq", "resque", "consumer", "consumers",
     "scheduler", "beat", "cron", "crond", "tail", "sleep", "watch", "watcher", "tsc", "jest",
     "pytest", "vitest", "mocha", "test", "tests", "ping", "top", "htop", "rsync", "backup",
     "build", "compile", "logs", "yes", "reindex", "indexer", "crawler", "scraper", "sync",
     "migrate", "migration", "train", "training", "benchmark", "bench")
)  # fmt: skip


def _words(e: Mapping[str, Any]) -> set[str]:
    text = f"{e.get('name') or ''} {e.get('by') or ''}".lower()[: 2 * _MAX_CHARS]
    return set(_WORD.findall(text))


def serves_a_port(e: Mapping[str, Any]) -> bool:
    """A port it serves is known: its command line or output named it."""
    rel = e.get("rel") or ()
    return "port" in (e.get("attrs") or {}) or any(r and r[0] == "serves" for r in rel)


def looks_like_a_server(e: Mapping[str, Any]) -> bool:
    """Its command line names what serves and nothing that does not."""
    words = _words(e)
    return bool(words & _SERVES) and not words & _SERVES_NOTHING


def serves_nothing(e: Mapping[str, Any]) -> bool:
    """Its command line names a job that serves nothing (a worker, a watcher, a test run) and
    nothing that serves."""
    words = _words(e)
    return bool(words & _SERVES_NOTHING) and not words & _SERVES


def servers(processes: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Of ``processes``, what "the server" may mean: those serving a known port; else those
    whose command says server; else those whose command says neither; else none."""
    for fits in (serves_a_port, looks_like_a_server):
        found = [e for e in processes if fits(e)]
        if found:
            return found
    return [e for e in processes if not serves_nothing(e)]
