"""The vocabulary of the seeded jobs: titles, employer names, descriptions.

The chosen word of the `q` scenario (seed.WORD) is in none of these lists: the seed puts it in
exactly 1% of the titles itself.
"""

from __future__ import annotations

from models.jobs.html import clean_description


def _words(text: str) -> tuple[str, ...]:
    return tuple(w.strip() for w in text.split(","))


SENIORITY = ("", "", "", "Junior", "Senior", "Lead", "Principal", "Assistant", "Intermediate")
SPECIALTIES = _words(
    "Software, Accounting, Payroll, Warehouse, Retail, Customer Service, Marketing, Network, "
    "Data, Cloud, Mechanical, Electrical, Civil, Dental, Pharmacy, Logistics, Sales, Legal, "
    "Construction, Kitchen, Security, Bilingual, HR, Finance, Maintenance, Production, Quality, "
    "Research, Field, Community"
)
ROLES = _words(
    "Developer, Engineer, Analyst, Clerk, Coordinator, Manager, Technician, Associate, "
    "Specialist, Administrator, Supervisor, Consultant, Driver, Assistant, Representative, "
    "Designer, Advisor, Operator, Planner, Officer, Préposé aux bénéficiaires, Éducatrice, "
    "Cuisinier, Commis, Soudeur"
)
COMPANY_WORDS = _words(
    "Maple, Aurora, Boreal, Cedar, Harbour, Prairie, Summit, Granite, Tundra, Lakeshore, "
    "Northern, Pacific, Atlantic, Laurentian, Fraser, Rideau, Birch"
)
COMPANY_KINDS = _words(
    "Logistics, Health, Foods, Systems, Construction, Credit Union, Retail, Energy, Software, "
    "Dental Group, Hospitality, Manufacturing, Consulting"
)
COMPANY_SUFFIXES = ("Inc.", "Ltd.", "Group", "Co.", "West", "East")
REF_PREFIXES = ("REQ", "JOB", "R", "POS", "HR", "ATS")

# As the service stores them: passed through the same nh3 cleaning as a written description.
DESCRIPTIONS = tuple(
    clean_description(d)
    for d in (
        "<p>We are hiring a motivated team member to join our growing operation. You will work "
        "closely with colleagues across departments and report to the team lead.</p><ul><li>"
        "Competitive pay and benefits</li><li>Paid training</li><li>Opportunities to grow</li>"
        "</ul><p>Apply today with your résumé.</p>",
        "<p><strong>About the role</strong></p><p>You will plan, organise and deliver work to a "
        "high standard, keep accurate records and help customers with their questions.</p><ol>"
        "<li>Two years of related experience</li><li>Strong communication skills</li><li>"
        "French an asset</li></ol>",
        "<div><p>Join a Canadian employer known for its people. This position offers a stable "
        "schedule, a friendly workplace and a group benefits plan from day one.</p><p>Questions? "
        'Visit <a href="https://example.com/careers">our careers page</a>.</p></div>',
        "<p>Responsibilities include day-to-day operations, inventory, scheduling and safety. "
        "<em>Evening and weekend availability required.</em></p><ul><li>Valid driver's licence"
        "</li><li>Able to lift 23 kg</li></ul><p>We thank all applicants; only those selected "
        "for an interview will be contacted.</p>",
        "<p>Nous recherchons une personne dynamique et autonome. Vous participerez à "
        "l'amélioration continue de nos services.</p><ul><li>Horaire flexible</li><li>Assurances "
        "collectives</li><li>REER avec contribution de l'employeur</li></ul>",
        "<p><b>What you will do</b></p><ul><li>Design, build and maintain reliable services</li>"
        "<li>Review code and mentor colleagues</li><li>Work with product and support teams</li>"
        "</ul><p><b>What you bring</b></p><p>Curiosity, care for quality, and a few years of "
        "experience in a similar role.</p>",
    )
)
