"""Students join a lesson: a QR code and a short link to the teacher's current step, made on this
machine (no network), pointing at the address this server listens on. Each student who opens it
has a session of their own on the same step.

The link's base is chosen by `server_base_url` (docs/classroom.md says how a teacher sets it).
"""

from __future__ import annotations

import functools
import io
import ipaddress
import os
import socket
from urllib.parse import quote, urlencode, urlsplit

import segno
import streamlit as st

from views.text import md_escape

ss = st.session_state
# A teacher behind a name or a proxy states the address students use, e.g. http://room12.school:8501
PUBLIC_URL_ENV = "BAM_VIZ_PUBLIC_URL"
LESSONS_PATH = "lessons"                      # the Lessons page's url_path
EVERY_INTERFACE = ("", "0.0.0.0", "::")
# Pixels a module. A LAN link's code is 45 modules with its border: 360 px, drawn to the panel's width;
# 540 px when shown large, which fits a 1280 x 720 projector with the link beneath it and is read
# from the back of the room.
QR_SCALE, QR_SCALE_LARGE = 8, 12
# What a QR code holds: a version-40 code at error correction M, 2,331 bytes (ISO/IEC 18004, table 7).
QR_BYTES = 2331
# The longest PUBLIC_URL_ENV used: a code's bytes, less room for the rest of a join link
# (`/lessons?lesson=<id>&step=<n>`, an id of 255 bytes percent-encoded in three each).
MAX_PUBLIC_URL = QR_BYTES - (3 * 255 + 32)
CLASS_COMMAND = "`ADDRESS=0.0.0.0 make run` (or `streamlit run app.py --server.address 0.0.0.0`)"


def join_link(base: str, lesson: str, step: int) -> str:
    """The link to a lesson's step (`step` from 1) on the server at `base`."""
    query = urlencode({"lesson": lesson, "step": int(step)}, quote_via=quote)
    return f"{base.rstrip('/')}/{LESSONS_PATH}?{query}"


@functools.lru_cache(maxsize=64)
def qr_png(link: str, scale: int = QR_SCALE) -> bytes | None:
    """The QR code of `link` as PNG bytes, made once a link (11 ms each, and every student's first run
    draws one); None when the link is longer than a code holds (`QR_BYTES`). Error correction M
    survives a projector's glare; the 4-module border is the quiet zone the standard asks for."""
    try:
        code = segno.make(link, error="m")
    except segno.DataOverflowError:
        return None
    buf = io.BytesIO()
    code.save(buf, kind="png", scale=scale, border=4)
    return buf.getvalue()


def is_loopback(host: str) -> bool:
    host = host.strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def lan_address() -> str | None:
    """This machine's address on its network, found without sending anything; None when only
    loopback is found."""
    found = None
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            # connect() on a UDP socket only picks the route (and so the source address): no packet leaves.
            s.connect(("10.255.255.255", 1))
            found = s.getsockname()[0]
    except OSError:
        pass
    if not found or is_loopback(found) or found in EVERY_INTERFACE:
        try:
            found = socket.gethostbyname(socket.gethostname())
        except OSError:
            found = None
    return None if not found or is_loopback(found) or found in EVERY_INTERFACE else found


def _host(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def _origin(scheme: str, host: str, port: int | None) -> str:
    default = {"http": 80, "https": 443}[scheme]
    return f"{scheme}://{_host(host)}" + ("" if port in (None, default) else f":{port}")


def _public_url(value: str) -> str | None:
    """`value` without its trailing slash when it is http(s)://host[:port][/path] of at most
    MAX_PUBLIC_URL characters, else None."""
    if len(value.strip()) > MAX_PUBLIC_URL:
        return None
    try:
        url = urlsplit(value.strip())
        url.port                              # noqa: B018 -- raises ValueError on a port that is not one
    except ValueError:
        return None
    if url.scheme not in ("http", "https") or not url.hostname or url.query or url.fragment or "@" in url.netloc:
        return None
    return value.strip().rstrip("/")


def _browser_origin(url: str | None) -> tuple[str, str, int | None] | None:
    """(scheme, host, port) of the teacher's browser URL when it is not loopback."""
    try:
        seen = urlsplit(url or "")
        port = seen.port
    except ValueError:
        return None
    if seen.scheme not in ("http", "https") or not seen.hostname or is_loopback(seen.hostname):
        return None
    return seen.scheme, seen.hostname, port


def server_base_url(address: str | None, port: int, base_path: str = "", *, https: bool = False,
                    public_url: str | None = None, browser_url: str | None = None,
                    lan=lan_address) -> tuple[str, str | None]:
    """(the base URL students open, a warning for the teacher in Markdown or None).

    In this order: `public_url` ($BAM_VIZ_PUBLIC_URL) when it is a valid address; the teacher's own
    `browser_url` when it is not loopback (they reached the server by a name students can use too);
    the server's `address`: a specific one as it is, every interface as this machine's LAN address
    (`lan()`), loopback as it is with a warning that students cannot reach it."""
    warnings = []
    if public_url:
        if (base := _public_url(public_url)) is not None:
            return base, None
        if len(public_url.strip()) > MAX_PUBLIC_URL:
            warnings.append(f"{PUBLIC_URL_ENV} is {len(public_url.strip()):,} characters long, over the "
                            f"{MAX_PUBLIC_URL:,} a QR code holds with a lesson's link, so it is not used.")
        else:
            warnings.append(f"{PUBLIC_URL_ENV}={md_escape(repr(public_url))} is not an "
                            "http(s)://host[:port][/path] address, so it is not used.")
    path = "/" + base_path.strip("/") if base_path and base_path.strip("/") else ""
    scheme, host = ("https" if https else "http"), (address or "").strip()
    if (seen := _browser_origin(browser_url)) is not None:
        scheme, host, port = seen
    elif host in EVERY_INTERFACE:
        try:
            host = lan() or ""
        except Exception:                     # a lookup that fails must not take the page with it
            host = ""
        if not host:
            warnings.append("This machine has no network address besides loopback: students' laptops cannot "
                            "open this link. Connect it to the class's network, then reload this page.")
            host = "localhost"
    elif is_loopback(host):
        warnings.append(f"Students' laptops cannot open this link: the server listens on {host} only. "
                        f"For a class, start it with {CLASS_COMMAND}.")
    return _origin(scheme, host, port) + path, " ".join(warnings) or None


def served_base_url() -> tuple[str, str | None]:
    """`server_base_url` for this server: its options, its environment, the teacher's browser."""
    return server_base_url(st.get_option("server.address"), st.get_option("server.port"),
                           st.get_option("server.baseUrlPath") or "",
                           https=bool(st.get_option("server.sslCertFile")),
                           public_url=os.environ.get(PUBLIC_URL_ENV), browser_url=st.context.url)


def _close_large() -> None:
    ss.pop("_join_large", None)


# Opened again on every run while `_join_large` names the link: a page under the panel (the explorer,
# polling for its slider frames) reruns on its own, and a dialog that a run does not open closes.
@st.dialog("Scan to join this step", width="large", on_dismiss=_close_large)
def _large(link: str) -> None:
    with st.container(key="lesson_join_large"):
        if (png := qr_png(link, scale=QR_SCALE_LARGE)) is not None:
            st.image(png, alt=f"QR code of {link}")
        st.code(link, language=None, wrap_lines=True)


def _open_large(link: str) -> None:
    ss["_join_large"] = link


def join_panel(lesson: str, step: int) -> None:
    """The QR code and short link to `lesson`'s `step` (from 1), for students to open on their own."""
    with st.container(key="lesson_join"):
        base, warning = served_base_url()
        link = join_link(base, lesson, step)
        png = qr_png(link)
        if png is not None:
            st.image(png, width="stretch", alt=f"QR code of {link}")
        with st.container(key="lesson_link"):
            st.code(link, language=None, wrap_lines=True)
        if png is None:
            st.caption(f"This link is {len(link.encode()):,} bytes, more than a QR code holds ({QR_BYTES:,}): "
                       "type it, each of you gets your own copy of this step.")
        else:
            st.caption("Scan the code or type the link: each of you gets your own copy of this step.")
            # On a projector the class scans the code from the screen: the button that enlarges it stands out.
            st.button("Show the code large", key="lesson_join_show", on_click=_open_large, args=(link,),
                      type="primary" if ss.get("presentation") else "secondary")
        if warning:
            st.warning(warning)
    if ss.get("_join_large") == link:
        _large(link)
