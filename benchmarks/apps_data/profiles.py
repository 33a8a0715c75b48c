"""A person profile with dates and lists: the schema as a recruiting or CRM application writes
it, and 10 texts about people (about-me pages, speaker bios, recruiter notes, profile headers).

Gold: name, birth date, the city the person lives in (only where the text names one city for
it), employer (None for a freelancer; no gold where a student or a retiree leaves it open), and
the languages (a multiset: every text lists them plainly). Skills and the bio: no gold.
"""

from __future__ import annotations

from datetime import date

from pydantic import BaseModel, Field


class Profile(BaseModel):
    name: str
    birth_date: date
    city: str
    employer: str | None = None
    skills: list[str]
    languages: list[str]
    bio: str = Field(description="A short third-person bio, one or two sentences")


INSTRUCTION = "Build a profile of the person described below.\n\n"

ITEMS = [
    {"id": "profile-0", "gold": {"name": "Aisha Bello", "birth_date": "1991-09-03", "city": "Manchester", "employer": "Northcote Bank",
                                 "languages[]": ["English", "Yoruba", "French"]},
     "text": """About me: My name is Aisha Bello and I was born on 3 September 1991. I live in Manchester and work as a
data engineer at Northcote Bank, where I build the pipelines behind our fraud models. Day to day I use
Python, SQL and Airflow, and I've recently been learning Rust. I speak English, Yoruba and French.
Outside work I coach a junior netball team on Saturday mornings."""},
    {"id": "profile-1", "gold": {"name": "Henrik Aalto", "birth_date": "1978-01-12", "city": "Oslo", "employer": "Nordlys Energy",
                                 "languages[]": ["Finnish", "Norwegian", "English"]},
     "text": """Henrik Aalto (born 12 January 1978) is a principal research scientist at Nordlys Energy in Oslo. His work
focuses on battery degradation modelling and grid-scale storage. He holds a PhD in electrochemistry, has
led teams using MATLAB, Python and finite-element simulation, and holds three patents on cell balancing.
Henrik speaks Finnish, Norwegian and English. He lives in Oslo with his family and is an avid
cross-country skier."""},
    {"id": "profile-2", "gold": {"name": "Carmen Ruiz Ortega", "birth_date": "1986-06-28", "city": "Valencia", "employer": "Lumen Health",
                                 "languages[]": ["Spanish", "Catalan", "English"]},
     "text": """Carmen Ruiz Ortega - Senior UX Designer at Lumen Health. Based in Valencia. Born 28/06/1986.
I design patient-facing apps and run usability research with clinicians. Tools: Figma, Miro, a bit of
HTML/CSS. Languages: Spanish (native), Catalan, English (C1). Previously at two fintech start-ups;
mentor at a local design bootcamp."""},
    {"id": "profile-3", "gold": {"name": "Wei Zhang", "birth_date": "1995-11-02", "city": "Singapore", "employer": "Tidepool Logistics",
                                 "languages[]": ["Mandarin", "English", "Malay"]},
     "text": """Candidate: Wei Zhang. DOB 1995-11-02. Currently in Singapore, working as a backend developer at Tidepool
Logistics (since 2021). Strong in Go, PostgreSQL and Kubernetes; some experience with Kafka. Speaks
Mandarin and English fluently, basic Malay. Looking for a remote role, notice period one month. Very
clear communicator in the phone screen."""},
    {"id": "profile-4", "gold": {"name": "Lukas Brenner", "birth_date": "1989-05-09", "city": "Innsbruck", "employer": None,
                                 "languages[]": ["German", "Italian", "English"]},
     "text": """I'm Lukas Brenner, a freelance wildlife photographer based in Innsbruck. I was born on 9 May 1989. I shoot
mostly in the Alps and have had work published in several nature magazines. I edit in Lightroom and
Photoshop and fly drones (licensed). I speak German, Italian and English. I also teach weekend
photography workshops for beginners."""},
    {"id": "profile-5", "gold": {"name": "Nadia Haddad", "birth_date": "2002-03-17", "city": "Toronto",
                                 "languages[]": ["Arabic", "French", "English"]},
     "text": """Nadia Haddad, born 17 March 2002, is a final-year mechanical engineering student at the University of
Toronto and lives in Toronto. This summer she is interning at Kestrel Aerospace, working on test rigs for
landing-gear actuators. She is comfortable with SolidWorks, ANSYS and LabVIEW, and captains the
university's Formula SAE team. She speaks Arabic, French and English."""},
    {"id": "profile-6", "gold": {"name": "Margaret O'Sullivan", "birth_date": "1952-10-30", "city": "Cork",
                                 "languages[]": ["English", "Irish"]},
     "text": """Margaret O'Sullivan was born on 30 October 1952 and has lived in Cork all her life. She taught mathematics
at St. Brendan's Secondary School for 38 years before retiring in 2017. These days she volunteers as a
literacy tutor, sings in the cathedral choir and keeps bees. She speaks English and Irish, and she still
tutors a few students for the Leaving Cert every spring."""},
    {"id": "profile-7", "gold": {"name": "Kofi Mensah", "birth_date": "1984-04-21", "city": "Accra", "employer": "Ember & Salt",
                                 "languages[]": ["English", "Twi", "Ga"]},
     "text": """Kofi Mensah (b. 21 April 1984) is head chef at Ember & Salt in Accra, a restaurant known for wood-fired
West African cooking. He trained in London and worked in kitchens in Lisbon before coming home in 2016.
He is skilled in butchery, fermentation and menu costing, and runs the restaurant's apprenticeship
scheme. He speaks English, Twi and Ga."""},
    {"id": "profile-8", "gold": {"name": "Olivia Tran", "birth_date": "1993-12-05", "city": "Sydney", "employer": "St Vincent's Hospital",
                                 "languages[]": ["English", "Vietnamese"]},
     "text": """G'day, I'm Olivia Tran. Born 5 December 1993, living in Sydney. I'm a registered nurse in the ICU at
St Vincent's Hospital. I'm certified in advanced life support, and I'm the unit's go-to person for the
new infusion pumps. I speak English and Vietnamese. In my spare time I surf and volunteer with a refugee
health clinic."""},
    {"id": "profile-9", "gold": {"name": "Tomasz Wiśniewski", "birth_date": "1990-08-14", "city": "Kraków", "employer": "Vistula Games",
                                 "languages[]": ["Polish", "English", "German"]},
     "text": """Name: Tomasz Wiśniewski | Date of birth: 14.08.1990 | Location: Kraków, Poland | Current employer: Vistula
Games | Role: Lead gameplay programmer. Ships C++ and Unreal Engine 5 titles; also writes tooling in C#.
Speaks Polish, English and German. Has shipped four console games, one of which won a regional award.
Interested in procedural animation."""},
]
