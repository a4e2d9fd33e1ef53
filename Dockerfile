# ctxproxy as a sidecar: listens on 0.0.0.0:8787, config mounted at /config/config.yaml.
# Clients from outside the container are not loopback: without an admin key (CTXPROXY_ADMIN_KEY
# in the environment) /ui and /metrics answer only inside it (docker exec); set the key to open
# them to the host (ui.public: true opens them to anyone). The start-up line says which applies.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    LITELLM_LOCAL_MODEL_COST_MAP=True

WORKDIR /app
COPY pyproject.toml README.md constraints.txt ./
COPY proxy ./proxy
COPY rules ./rules
# the versions the tests passed on (constraints.txt, written by bin/lock), not whatever is newest
RUN pip install --no-cache-dir -c constraints.txt . \
    # the tokenizer files must be on disk: the container may have no internet
    && python -c "from proxy.tokens import TiktokenCounter as T; T('o200k_base'); T('cl100k_base')" \
    && useradd --create-home --uid 10001 ctxproxy \
    && mkdir -p /data /config && chown ctxproxy /data \
    # the references lexicons and the tokenizers' tables built now (a start reads them: ~2 s
    # less), as root into a folder the server's user can read and not write: what a start
    # reads back, no process of that user can have planted
    && CTXPROXY_CACHE_DIR=/opt/ctxproxy-cache python -m proxy.lexicon_shelf \
    && chmod -R a+rX,go-w /opt/ctxproxy-cache

COPY config.example.yaml /config/config.yaml
ENV CTXPROXY_CACHE_DIR=/opt/ctxproxy-cache
USER ctxproxy
EXPOSE 8787
VOLUME ["/data"]

HEALTHCHECK --interval=15s --timeout=3s --start-period=10s --retries=3 \
    CMD ["python", "-c", "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8787/healthz', timeout=2).status == 200 else 1)"]

CMD ["ctxproxy", "serve", "--config", "/config/config.yaml", "--host", "0.0.0.0", "--port", "8787", "--db", "/data/ctxproxy.db"]
