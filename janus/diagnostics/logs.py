"""Named log channels: ``JANUS_LOG=fallbacks,guards,builds,breaks`` (as ``TORCH_LOGS``).

Each channel is a ``logging`` logger under ``janus`` (``janus.fallbacks``, ...), so the usual
``logging`` configuration applies to it. ``JANUS_LOG`` (or ``janus.config.log_level``) is a comma
list of channels, shown at DEBUG, and at most one level for all of janus (``info``, ``debug``,
``warning``, the default); ``all`` turns on every channel. Warnings show whatever is chosen.
"""

from __future__ import annotations

import logging

CHANNELS = {
    "fallbacks": "a call ran eagerly although profiling was over, and why",
    "guards": "each failed guard or JanusAssert, with its source line",
    "builds": "graph builds: their cost, size and guards; the C++ op build",
    "breaks": "why janus cannot convert a function (it runs imperatively) or retries a build",
    "transparent": "janus.enable(): what it routed or left alone, and when it stops watching",
    "profile": "profiled calls, and waits for the heap lock",
}
LEVELS = ("debug", "info", "warning", "error", "critical")
ROOT = "janus"


def logger(channel: str) -> logging.Logger:
    """The logger of one channel (``janus.<channel>``)."""
    if channel not in CHANNELS:
        raise ValueError(f"janus has no log channel {channel!r}; channels: {', '.join(CHANNELS)}")
    return logging.getLogger(f"{ROOT}.{channel}")


def parse(spec: str) -> tuple[int, set[str], list[str]]:
    """``(level of janus, channels shown at DEBUG, unknown words)`` of a ``JANUS_LOG`` value."""
    level, chosen, unknown = logging.WARNING, set(), []
    for word in (w.strip().lower() for w in str(spec).replace(";", ",").split(",")):
        if not word:
            continue
        if word == "all":
            chosen |= set(CHANNELS)
        elif word in LEVELS:
            level = getattr(logging, word.upper())
        elif word in CHANNELS:
            chosen.add(word)
        else:
            unknown.append(word)
    return level, chosen, unknown


def apply(spec: str) -> None:
    """Sets the level of ``janus`` and of each channel from a ``JANUS_LOG`` value."""
    level, chosen, unknown = parse(spec)
    install_handler()
    logging.getLogger(ROOT).setLevel(level)
    for channel in CHANNELS:
        logging.getLogger(f"{ROOT}.{channel}").setLevel(logging.DEBUG if channel in chosen else logging.NOTSET)
    if unknown:
        logging.getLogger(ROOT).warning(
            "JANUS_LOG: unknown %s %s; channels are %s (or all), levels %s",
            "words" if len(unknown) > 1 else "word", ", ".join(unknown), ", ".join(CHANNELS), ", ".join(LEVELS),
        )  # fmt: skip


def install_handler() -> None:
    """One stderr handler on ``janus`` that names the channel, unless the program configured one."""
    root = logging.getLogger(ROOT)
    if not root.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        root.addHandler(handler)
