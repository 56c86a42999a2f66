"""Which search engines a process tells of job pages (C18), and where those pages are.

The writes that queue notifications run deep in models (a job's write, upkeep, a take-down),
which take no settings; so each process's entry point installs its channels here, from its
settings, as it installs the webhook payloads. Nothing installed is every channel off: a
process (or a test) that configures none queues nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from models.core.settings import Settings

INDEXNOW, GOOGLE = "indexnow", "google"
CHANNELS = (INDEXNOW, GOOGLE)
LANGUAGES = ("en", "fr")  # each job page has both (C13)


@dataclass(frozen=True)
class Channels:
    base_url: str = ""
    on: tuple[str, ...] = ()


OFF = Channels()


def of_settings(settings: Settings) -> Channels:
    """The channels `settings` configure: IndexNow with INDEXNOW_KEY, Google with
    GOOGLE_SERVICE_ACCOUNT_FILE (settings refuse either without PUBLIC_BASE_URL)."""
    on = []
    if settings.indexnow_key:
        on.append(INDEXNOW)
    if settings.google_service_account_file is not None:
        on.append(GOOGLE)
    if not on or not settings.public_base_url:
        return OFF
    return Channels(settings.public_base_url, tuple(on))


_installed: list[Channels] = []


def install(channels: Channels) -> None:
    _installed[:] = [channels]


def installed() -> Channels:
    return _installed[0] if _installed else OFF


def page_urls(base_url: str, job_id: int) -> list[str]:
    """A job page's addresses, one a language: as api.pages.page_url writes them (a test
    keeps the two the same), which the sitemap lists too."""
    return [f"{base_url}/jobs/{job_id}?lang={code}" for code in LANGUAGES]
