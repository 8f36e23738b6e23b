"""``python -m tests.servers.hub_app STATE_DIR``: olah, a self-hosted Hugging Face hub mirror,
serving the git repositories under ``STATE_DIR/mirrors`` (``models/<org>/<name>``,
``datasets/<org>/<name>``) on 127.0.0.1, offline (it never reaches huggingface.co), behind a thin
ASGI layer that adds what a mirror of local repositories cannot know.

olah answers the hub's API as huggingface_hub and datasets call it: ``/api/{models,datasets}/
<id>/revision/<rev>`` (branches, tags and commits resolved by git), ``tree``, ``paths-info``,
``resolve/<rev>/<file>`` with ``ETag`` (a git blob's sha1, an LFS object's sha256) and
``X-Repo-Commit``, and ``RepoNotFound`` for a repository it does not hold. The layer in front adds:

- gated repositories (``STATE_DIR/gated.json``: ``{"token": ..., "repos": [...]}``): a request
  for one without ``Authorization: Bearer <token>`` is refused as the hub refuses it (401,
  ``X-Error-Code: GatedRepo``); olah's local mirrors have no accounts;
- faults (``STATE_DIR/faults.json``, read at every request, so a test changes them while the
  server runs): ``{"cut": {"<repo>/<file>": BYTES}}`` sends the first BYTES of a download of that
  file and then drops the connection, and answers 503 to every later request for it while the
  fault stands (a server gone mid-transfer); ``{"slow": {"<repo>/<file>": SECONDS}}`` spreads a
  download of it over about SECONDS, so two clients overlap.

The listening socket is bound before olah's configuration is written (port 0: the system picks
a free port), so parallel test processes never race for a port; the port is written to
``STATE_DIR/port`` (olah sends standard output to its log).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import sys
from pathlib import Path

#: a file download: ``[/datasets]/<org>/<name>/resolve/<revision>/<path>`` (revision may be a
#: URL-encoded ref such as refs%2Fpr%2F1)
RESOLVE = re.compile(r"^/(?:(?:models|datasets)/)?(?P<repo>[^/]+/[^/]+)/resolve/[^/]+/"
                     r"(?P<file>.+)$")
#: any request naming a repository: the API's ``/api/<type>/<org>/<name>...`` or a download
REPO = re.compile(r"^/(?:api/(?:models|datasets)/|(?:models/|datasets/)?)(?P<repo>[^/]+/[^/]+)")


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


class HubLayer:
    """The ASGI layer in front of olah's app (see the module's docstring)."""

    def __init__(self, app, state: Path) -> None:
        self.app, self.state = app, state
        self.cut_done: set[str] = set()

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = scope["path"]
        named = REPO.match(path)
        gated = _read_json(self.state / "gated.json")
        if named and named["repo"] in gated.get("repos", []):
            headers = dict(scope["headers"])
            if headers.get(b"authorization", b"") != f"Bearer {gated['token']}".encode():
                return await _reply(send, 401, {
                    "x-error-code": "GatedRepo",
                    "x-error-message": f"Access to model {named['repo']} is restricted. You must "
                                       "have access to it and be authenticated to access it. "
                                       "Please log in."})
        download = RESOLVE.match(path) if scope["method"] == "GET" else None
        if download is None:
            return await self.app(scope, receive, send)
        key = f"{download['repo']}/{download['file']}"
        faults = _read_json(self.state / "faults.json")
        if key in faults.get("cut", {}):
            if key in self.cut_done:
                return await _reply(send, 503, {"x-error-message": "Service Unavailable"})
            self.cut_done.add(key)
            return await self.app(scope, receive, _cut_after(send, faults["cut"][key]))
        self.cut_done.discard(key)
        if key in faults.get("slow", {}):
            return await self.app(scope, receive, _slowed(send, faults["slow"][key]))
        return await self.app(scope, receive, send)


async def _reply(send, status: int, headers: dict) -> None:
    body = json.dumps({"error": headers.get("x-error-message", "")}).encode()
    raw = [(k.encode(), v.encode()) for k, v in headers.items()]
    raw += [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


class Dropped(Exception):
    """Raised after a cut's bytes are sent: uvicorn closes the connection mid-body."""


def _cut_after(send, limit: int):
    sent = 0

    async def cut(message):
        nonlocal sent
        if message["type"] == "http.response.body":
            body = message.get("body", b"")[: max(limit - sent, 0)]
            sent += len(body)
            await send({"type": "http.response.body", "body": body, "more_body": True})
            if sent >= limit:
                raise Dropped(f"connection dropped after {sent} bytes")
            return
        await send(message)

    return cut


def _slowed(send, seconds: float, pieces: int = 20):
    """Each body message's bytes in ``pieces`` parts, ``seconds / pieces`` apart, for the first
    message that carries the file (olah streams a file in 4 KiB chunks: the pause is per chunk,
    spread so that the whole download takes about ``seconds``)."""
    state = {"paused": 0}

    async def slowed(message):
        if message["type"] == "http.response.body" and state["paused"] < pieces:
            state["paused"] += 1
            await asyncio.sleep(seconds / pieces)
        await send(message)

    return slowed


def main(state: Path) -> None:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    netloc = f"127.0.0.1:{port}"
    config = state / "olah.toml"
    config.write_text(
        "[basic]\n"
        f'host = "127.0.0.1"\nport = {port}\n'
        f'mirror-netloc = "{netloc}"\nmirror-lfs-netloc = "{netloc}"\n'
        f'repos-path = "{state / "olah-cache"}"\n'
        f'mirrors-path = ["{state / "mirrors"}"]\n'
        "[accessibility]\noffline = true\n")
    os.environ["OLAH_CONFIG"] = str(config)  # olah.server configures its app from it on import
    os.environ["OLAH_LOG_PATH"] = str(state / "logs")
    import uvicorn
    from olah.server import app

    (state / "port.tmp").write_text(str(port))
    (state / "port.tmp").replace(state / "port")
    uvicorn.run(HubLayer(app, state), fd=listener.fileno(), log_level="warning")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
