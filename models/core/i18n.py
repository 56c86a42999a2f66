"""English and French (C13): gettext catalogs, en_CA and fr_CA formatting, Jinja2 templates.

Pages (api/) and emails (workers/) render the same way: a template of an `Environment` made by
`environment`, with the gettext callables and formatters of a `Language` in its context. The
catalogs are read and the templates compiled once per process; the API's JSON stays English.
Strings are extracted with Babel (`make catalogs`), and a test checks every one has French.
"""

from __future__ import annotations

import functools
import gettext as gettext_module
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from babel import Locale
from babel.dates import format_date, format_datetime, format_time
from babel.numbers import format_currency, format_decimal
from babel.support import Translations
from jinja2 import Environment, FileSystemLoader, pass_context, select_autoescape
from jinja2.runtime import Context
from markupsafe import Markup

LANGUAGES = ("en", "fr")
DEFAULT = "en"
TAGS = {"en": "en-CA", "fr": "fr-CA"}  # <html lang>, Content-Language
LOCALE_DIR = Path(__file__).parent / "locale"
DOMAIN = "messages"


def N_(text: str) -> str:
    """Marks a string for extraction (`make catalogs`); it is translated where it is shown."""
    return text


@dataclass(frozen=True)
class Language:
    """One language's catalog and locale conventions (Babel's `en_CA` or `fr_CA` data)."""

    code: str
    translations: gettext_module.NullTranslations
    locale: Locale
    context: dict[str, Any] = field(default_factory=dict)  # what templates call

    @property
    def tag(self) -> str:
        return TAGS[self.code]

    @property
    def other(self) -> str:
        return "fr" if self.code == "en" else "en"

    def gettext(self, text: str) -> str:
        return self.translations.gettext(text)

    def ngettext(self, singular: str, plural: str, n: int) -> str:
        return self.translations.ngettext(singular, plural, n)

    def date(self, day: date) -> str:
        """`November 25, 2026`, `25 novembre 2026`; in French the first is `1er` (OQLF)."""
        return _date(self.code, day)

    def moment(self, when: datetime) -> str:
        """`November 25, 2026, 1:40 p.m. EST`, `25 novembre 2026, 13 h 40 HNE`: an aware
        moment in its own zone."""
        time = format_time(when, "short", locale=self.locale)
        zone = format_datetime(when, "z", locale=self.locale)
        return f"{self.date(when.date())}, {time} {zone}"

    def money(self, amount: Decimal) -> str:
        """`$60,000`, `60 000 $`: dollars in the locale's pattern, no cents when whole."""
        return _money(self.code, amount)

    def number(self, value: int | Decimal) -> str:
        """`10,000`, `10 000`."""
        return _number(self.code, value)


# Babel's formatting, remembered: a page of 20 results formats dozens of dates and amounts,
# most of them the same few (docs/benchmarks.md, the search page).
@functools.lru_cache(maxsize=2048)
def _date(code: str, day: date) -> str:
    locale = _locale(code)
    if code == "fr" and day.day == 1:
        return format_date(day, "d'er' MMMM y", locale=locale)
    return format_date(day, "long", locale=locale)


@functools.lru_cache(maxsize=4096)
def _money(code: str, amount: Decimal) -> str:
    locale = _locale(code)
    pattern = locale.currency_formats["standard"].pattern
    if amount == amount.to_integral_value():
        pattern = pattern.replace(".00", "")
    return format_currency(amount, "CAD", format=pattern, locale=locale, currency_digits=False)


@functools.lru_cache(maxsize=4096)
def _number(code: str, value: int | Decimal) -> str:
    return format_decimal(value, locale=_locale(code))


@functools.cache
def _locale(code: str) -> Locale:
    return Locale.parse(f"{code}_CA")


@functools.cache
def language(code: str) -> Language:
    """The language `code` (`en` or `fr`), its catalog read once per process."""
    if code not in LANGUAGES:
        raise ValueError(f"no such language: {code!r}")
    translations: gettext_module.NullTranslations
    if code == DEFAULT:
        translations = gettext_module.NullTranslations()  # the msgids are the English
    else:
        translations = Translations.load(str(LOCALE_DIR), [code], DOMAIN)
        if not isinstance(translations, Translations):  # no compiled catalog: a broken install
            raise RuntimeError(f"the {code} catalog is missing from {LOCALE_DIR}")
    lang = Language(code, translations, _locale(code))
    lang.context.update(_template_callables(lang))
    return lang


def _template_callables(lang: Language) -> dict[str, Any]:
    """The gettext calls of Jinja2's i18n extension (new style: `%(name)s` filled by the call,
    the message escaped only where the template autoescapes), and the formatters."""

    @pass_context
    def gettext(context: Context, text: str, **variables: Any) -> str:
        result = lang.gettext(text)
        if context.eval_ctx.autoescape:
            result = Markup(result)
        return result % variables if variables else result

    @pass_context
    def ngettext(context: Context, singular: str, plural: str, n: int, **variables: Any) -> str:
        variables.setdefault("num", lang.number(n))
        result = lang.ngettext(singular, plural, n)
        if context.eval_ctx.autoescape:
            result = Markup(result)
        return result % variables

    return {
        "gettext": gettext,
        "_": gettext,
        "ngettext": ngettext,
        "lang": lang,
        "format_date": lang.date,
        "format_money": lang.money,
        "format_number": lang.number,
    }


def environment(folder: Path) -> Environment:
    """Templates of `folder`: autoescaped when HTML, i18n on, whitespace of `trans` trimmed."""
    env = Environment(
        loader=FileSystemLoader(folder),
        autoescape=select_autoescape(enabled_extensions=("html",), default_for_string=True),
        extensions=["jinja2.ext.i18n"],
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        auto_reload=False,
    )
    env.policies["ext.i18n.trimmed"] = True
    # New style: the gettext callables fill `%(name)s` themselves (see _template_callables).
    env.newstyle_gettext = True  # type: ignore[attr-defined]
    return env


def precompile(env: Environment) -> None:
    """Compile every template now (each once per process), not on its first request."""
    for name in env.list_templates():
        env.get_template(name)


def render(env: Environment, name: str, lang: Language, **values: Any) -> str:
    return env.get_template(name).render(lang.context, **values)
