"""Write bodies as employers' systems send them (issue 15): a description of a few hundred
words with paragraphs, lists and a link, two or three locations, a salary.

The seeded jobs' descriptions are a paragraph each, and most jobs have one location: written
back as they are, a PUT would cost less than a real one.
"""

from __future__ import annotations

import random
from typing import Any

SENTENCES = (
    "We are a Canadian employer known for the care we put into our work and our people.",
    "You will join a team of colleagues who share what they know and help each other grow.",
    "This role reports to the operations manager and works closely with every department.",
    "You will plan and organise your own work, keep accurate records and meet deadlines.",
    "Our customers count on us every day, and you will be one of the people they talk to.",
    "We offer a stable schedule, a friendly workplace and a group benefits plan from day one.",
    "Training is paid, and we support the certifications that help you move forward.",
    "You will take part in the continuous improvement of our processes and our services.",
    "Safety comes first: you will follow our procedures and help us make them better.",
    "The position is permanent and full time, with occasional evening and weekend shifts.",
    "Nous recherchons une personne dynamique, autonome et soucieuse du travail bien fait.",
    "You will review work orders, prepare materials and check the quality of what we ship.",
    "Bilingual candidates are encouraged to apply; French is an asset for this role.",
    "We value curiosity, reliability and a sense of humour in everyone who joins us.",
    "You will use our scheduling and inventory systems and learn them quickly on the job.",
    "Our head office is close to public transit, and parking is free at every location.",
)
ITEMS = (
    "Two years of related experience",
    "A high school diploma or the equivalent",
    "Strong written and spoken communication",
    "Comfort with computers and common office software",
    "A valid driver's licence and a clean abstract",
    "Able to lift 23 kg and to stand for long periods",
    "Competitive pay, reviewed every year",
    "Group insurance and a matched retirement plan",
    "Three weeks of vacation from the first year",
    "Paid training and tuition support",
    "Flexible hours and some work from home",
    "Employee discounts and a wellness budget",
)
HEADINGS = ("About us", "What you will do", "What you bring", "What we offer", "How to apply")


def description(rng: random.Random, words: int = 300) -> str:
    """HTML of about `words` words: headed paragraphs and lists, ending with a link."""
    parts: list[str] = []
    count = 0
    for heading in HEADINGS:
        if count >= words:
            break
        paragraph = " ".join(rng.sample(SENTENCES, rng.randint(3, 5)))
        parts.append(f"<p><strong>{heading}</strong></p><p>{paragraph}</p>")
        items = rng.sample(ITEMS, rng.randint(3, 5))
        parts.append("<ul>" + "".join(f"<li>{item}</li>" for item in items) + "</ul>")
        count += len(paragraph.split()) + sum(len(item.split()) for item in items) + 3
    parts.append('<p>Apply through <a href="https://example.com/careers">our careers page</a>.</p>')
    return "".join(parts)


def realistic(
    body: dict[str, Any], rng: random.Random, places: list[dict[str, Any]]
) -> dict[str, Any]:
    """`body` (a job's write shape) with a long description, 2 or 3 of `places` (each an
    id and a description, as a GET answers them) and a yearly salary."""
    amount = 40_000 + 1_000 * rng.randrange(60)
    return body | {
        "description": description(rng),
        "locations": rng.sample(places, rng.choice((2, 3))),
        "salary": {
            "amount": amount,
            "maxAmount": amount + 10_000,
            "period": {"id": 1},
            "plusCommission": False,
        },
    }
