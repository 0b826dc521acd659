"""views/join.py: the link students open, the address it points at, and its QR code read back by a decoder."""

import io
import socket
from urllib.parse import parse_qs, urlsplit

import numpy as np
import pytest
import segno
import zxingcpp
from PIL import Image
from streamlit.testing.v1 import AppTest

from views import join
from views.text import md_escape

LAN = "192.168.4.20"


def lan():
    return LAN


def no_lan():
    return None


def decode(png: bytes) -> list[str]:
    gray = np.asarray(Image.open(io.BytesIO(png)).convert("L"))
    return [code.text for code in zxingcpp.read_barcodes(gray)]


# ---- the link ----------------------------------------------------------------------------------

def test_the_link_names_the_lesson_and_step():
    assert join.join_link("http://10.0.0.5:8501", "prior-posterior-gap", 3) == (
        "http://10.0.0.5:8501/lessons?lesson=prior-posterior-gap&step=3")
    assert join.join_link("http://h:1/base/", "x", 1) == "http://h:1/base/lessons?lesson=x&step=1"


@pytest.mark.parametrize("lesson", ["a b", "a/b", "a&step=9", "é+ü", "100%"])
def test_odd_lesson_ids_survive_the_round_trip(lesson):
    link = join.join_link("http://h:8501", lesson, 2)
    query = urlsplit(link).query
    assert " " not in link and "+" not in query
    assert parse_qs(query, strict_parsing=True) == {"lesson": [lesson], "step": ["2"]}


# ---- the base URL ------------------------------------------------------------------------------

def test_a_valid_public_url_wins_over_everything():
    assert join.server_base_url("localhost", 8501, "/bam", public_url="https://room12.school/bam/",
                                browser_url="http://teacher.local:8501/lessons", lan=lan) == (
        "https://room12.school/bam", None)


@pytest.mark.parametrize("bad", ["room12.school:8501", "ftp://room12.school", "http://", "http://h:99999",
                                 "http://h:8501/?x=1", "http://user:pw@h:8501", "[join](javascript:alert(1))",
                                 "**bold** $x$ :red[r]"])
def test_an_invalid_public_url_is_named_and_not_used(bad):
    base, warning = join.server_base_url("0.0.0.0", 8501, public_url=bad, lan=lan)
    assert base == f"http://{LAN}:8501"
    # The warning is Markdown: the setting's value in it shows as typed, never as a link or markup.
    assert join.PUBLIC_URL_ENV in warning and md_escape(repr(bad)) in warning


def test_a_public_url_longer_than_a_qr_code_holds_is_refused_in_one_line():
    """5,000 characters pass the address check but no code holds them: the setting is refused, named,
    and not echoed; the longest one used still makes a code with a lesson id of 255 bytes at step 30."""
    long = "http://room12.school/" + "a" * 5000
    base, warning = join.server_base_url("0.0.0.0", 8501, public_url=long, lan=lan)
    assert base == f"http://{LAN}:8501"
    assert warning == (f"{join.PUBLIC_URL_ENV} is 5,021 characters long, over the {join.MAX_PUBLIC_URL:,} a QR "
                       "code holds with a lesson's link, so it is not used.")
    longest = "http://h.school/" + "p" * (join.MAX_PUBLIC_URL - len("http://h.school/"))
    assert join.server_base_url("0.0.0.0", 8501, public_url=longest, lan=lan) == (longest, None)
    assert join.server_base_url("0.0.0.0", 8501, public_url=longest + "p", lan=lan)[0] == f"http://{LAN}:8501"
    link = join.join_link(longest, "é" * 127, 30)                  # 254 bytes, each percent-encoded
    assert decode(join.qr_png(link)) == [link]


def test_qr_bytes_is_what_segno_holds_and_a_longer_link_has_no_code():
    assert segno.make("a" * join.QR_BYTES, error="m").designator == "40-M"
    with pytest.raises(segno.DataOverflowError):
        segno.make("a" * (join.QR_BYTES + 1), error="m")
    assert join.qr_png("http://h/" + "a" * join.QR_BYTES) is None


@pytest.mark.parametrize("address", [None, "", "0.0.0.0", "::"])
def test_every_interface_gives_the_lan_address(address):
    assert join.server_base_url(address, 8501, lan=lan) == (f"http://{LAN}:8501", None)


def test_every_interface_without_a_lan_says_so():
    base, warning = join.server_base_url("0.0.0.0", 8501, lan=no_lan)
    assert base == "http://localhost:8501"
    assert "no network address besides loopback" in warning


def test_a_lan_lookup_that_fails_does_not_reach_the_page():
    def broken():
        raise OSError("no route")

    base, warning = join.server_base_url("0.0.0.0", 8501, lan=broken)
    assert base == "http://localhost:8501" and warning


@pytest.mark.parametrize("address", ["localhost", "127.0.0.1", "127.0.1.1", "::1"])
def test_loopback_keeps_its_link_and_says_how_to_start_for_a_class(address):
    base, warning = join.server_base_url(address, 8501, lan=lan)
    assert base == f"http://{'[::1]' if address == '::1' else address}:8501"
    assert "cannot open this link" in warning
    assert "ADDRESS=0.0.0.0 make run" in warning and "--server.address 0.0.0.0" in warning


@pytest.mark.parametrize("address, expected", [("10.1.2.3", "http://10.1.2.3:8600"),
                                               ("teacher.local", "http://teacher.local:8600"),
                                               ("fe80::1", "http://[fe80::1]:8600")])
def test_a_specific_address_is_used_as_it_is(address, expected):
    assert join.server_base_url(address, 8600, lan=lan) == (expected, None)


@pytest.mark.parametrize("base_path", ["bam", "/bam", "/bam/", "bam/"])
def test_the_base_path_follows_the_port(base_path):
    assert join.server_base_url("10.1.2.3", 8501, base_path, lan=lan) == ("http://10.1.2.3:8501/bam", None)


def test_https_and_its_default_port():
    assert join.server_base_url("10.1.2.3", 8501, https=True, lan=lan)[0] == "https://10.1.2.3:8501"
    assert join.server_base_url("10.1.2.3", 80, lan=lan)[0] == "http://10.1.2.3"


def test_the_teachers_browser_url_wins_when_it_is_not_loopback():
    assert join.server_base_url("0.0.0.0", 8501, "bam", browser_url="http://teacher.local:8501/bam/lessons",
                                lan=lan) == ("http://teacher.local:8501/bam", None)
    assert join.server_base_url("0.0.0.0", 8501, browser_url="https://proxy.school/lessons", lan=lan) == (
        "https://proxy.school", None)


@pytest.mark.parametrize("url", ["http://localhost:8501/lessons", "http://127.0.0.1:8501/", "http://[::1]:8501",
                                 "http://h:notaport/", "", None])
def test_a_loopback_or_broken_browser_url_is_ignored(url):
    assert join.server_base_url("0.0.0.0", 8501, browser_url=url, lan=lan) == (f"http://{LAN}:8501", None)


def test_the_lan_lookup_sends_nothing(monkeypatch):
    """A UDP connect picks a route and sends no packet; nothing is ever sent or resolved remotely."""
    calls = []

    class Recorder(socket.socket):
        def connect(self, address):
            calls.append(("connect", self.type, address))
            return super().connect(address)

        def send(self, *a):
            raise AssertionError("sent")

        sendto = sendall = send

    monkeypatch.setattr(socket, "socket", Recorder)
    found = join.lan_address()
    assert all(kind == socket.SOCK_DGRAM for _, kind, _ in calls)
    assert found is None or not join.is_loopback(found)


def test_the_lan_lookup_falls_back_to_the_host_name_then_to_none(monkeypatch):
    class NoRoute(socket.socket):
        def connect(self, address):
            raise OSError("Network is unreachable")

    monkeypatch.setattr(socket, "socket", NoRoute)
    monkeypatch.setattr(socket, "gethostbyname", lambda name: "10.9.8.7")
    assert join.lan_address() == "10.9.8.7"
    monkeypatch.setattr(socket, "gethostbyname", lambda name: "127.0.1.1")
    assert join.lan_address() is None


# ---- the QR code -------------------------------------------------------------------------------

def test_the_qr_code_decodes_back_to_its_link():
    link = join.join_link(f"http://{LAN}:8501", "attention-random-variable", 4)
    assert decode(join.qr_png(link)) == [link]
    assert decode(join.qr_png(link, scale=join.QR_SCALE_LARGE)) == [link]


def test_the_large_qr_code_fits_a_projector_with_its_link_beneath():
    link = join.join_link(f"http://{LAN}:8501", "attention-random-variable", 12)
    width, height = Image.open(io.BytesIO(join.qr_png(link, scale=join.QR_SCALE_LARGE))).size
    assert width == height and 500 <= height <= 720 - 150


# ---- the panel ---------------------------------------------------------------------------------

def _panel_page():
    import streamlit as st

    from views.join import join_panel

    st.session_state.presentation = st.query_params.get("presentation") == "1"
    join_panel("prior-posterior-gap", 2)


def test_the_panel_shows_the_code_and_the_link_and_the_code_large(monkeypatch):
    monkeypatch.setenv(join.PUBLIC_URL_ENV, "http://room12.school:8501")
    link = "http://room12.school:8501/lessons?lesson=prior-posterior-gap&step=2"
    at = AppTest.from_function(_panel_page, default_timeout=30).run()
    assert not at.exception
    assert [c.value for c in at.code] == [link]
    assert len(at.get("image")) == 1 and not at.warning
    at.button(key="lesson_join_show").click().run()
    assert not at.exception
    assert [c.value for c in at.code] == [link, link]
    assert len(at.get("image")) == 2
    at.run()                                     # a run the page makes on its own keeps it open
    assert [c.value for c in at.code] == [link, link]


@pytest.mark.parametrize("presentation, kind", [("0", "secondary"), ("1", "primary")])
def test_in_presentation_mode_the_button_that_enlarges_the_code_stands_out(presentation, kind):
    at = AppTest.from_function(_panel_page, default_timeout=30)
    at.query_params["presentation"] = presentation
    at.run()
    assert at.button(key="lesson_join_show").proto.type == kind


def _long_link_page():
    from views.join import join_panel

    join_panel("é" * 1000, 2)                  # a link of 6,000 bytes: more than a QR code holds


def test_a_link_too_long_for_a_qr_code_is_shown_with_a_note_and_no_code(monkeypatch):
    monkeypatch.setenv(join.PUBLIC_URL_ENV, "http://room12.school:8501")
    at = AppTest.from_function(_long_link_page, default_timeout=30).run()
    assert not at.exception and not at.get("image")
    (link,) = [c.value for c in at.code]
    assert link == join.join_link("http://room12.school:8501", "é" * 1000, 2)
    assert [c.value for c in at.caption] == [f"This link is {len(link.encode()):,} bytes, more than a QR code holds "
                                             f"({join.QR_BYTES:,}): type it, each of you gets your own copy of "
                                             "this step."]
    assert not at.button


def test_a_public_url_of_5000_characters_leaves_the_panel_running(monkeypatch):
    monkeypatch.setenv(join.PUBLIC_URL_ENV, "http://room12.school/" + "a" * 5000)
    at = AppTest.from_function(_panel_page, default_timeout=30).run()
    assert not at.exception
    assert len(at.code) == 1 and len(at.get("image")) == 1
    (warning,) = at.warning
    assert warning.value.startswith(f"{join.PUBLIC_URL_ENV} is 5,021 characters long") and "aaaa" not in warning.value


def test_the_panel_warns_the_teacher_of_a_public_url_it_cannot_use(monkeypatch):
    monkeypatch.setenv(join.PUBLIC_URL_ENV, "room12.school")
    at = AppTest.from_function(_panel_page, default_timeout=30).run()
    assert not at.exception
    assert len(at.code) == 1 and len(at.get("image")) == 1
    assert join.PUBLIC_URL_ENV in at.warning[0].value
