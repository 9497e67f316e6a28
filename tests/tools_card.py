"""Reading the dashboard's tools card and its unused_mcp_server banner in a browser, for the
dashboard tests (selenium drivers in, plain values out)."""

from __future__ import annotations

from typing import Any


def browser_errors(browser: Any) -> list[str]:
    return [e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"]


def server_rows(browser: Any) -> list[dict[str, str]]:
    """Each server row, top first: its client, server, share text and whole text."""
    rows: list[dict[str, str]] = browser.execute_script(
        "return [...document.querySelectorAll('#tool-servers tr[data-server]')].map(r => ({"
        "client: r.dataset.client, server: r.dataset.server, unused: r.classList.contains("
        "'unused'), share: r.querySelector('[data-share]').textContent, text: r.textContent}))"
    )
    return rows


def unused_under(browser: Any) -> dict[str, list[str]]:
    """client/server -> the tools its unused row names (and a "+N more" chip)."""
    rows: list[list[Any]] = browser.execute_script(
        "return [...document.querySelectorAll('#tool-servers tr.unused-tools')].map(r => ["
        "r.previousElementSibling.dataset.client + '/' + r.previousElementSibling.dataset.server,"
        "[...r.querySelectorAll('.chip')].map(c => c.dataset.tool || c.textContent)])"
    )
    return {key: names for key, names in rows}


def banner_servers(browser: Any) -> list[str]:
    names: list[str] = browser.execute_script(
        "return [...document.querySelectorAll("
        "'#advice [data-advice=\"unused_mcp_server\"] li[data-server]')]"
        ".map(e => e.dataset.client + '/' + e.dataset.server)"
    )
    return names
