"""Meeting notes with action items: the schema as a notes application writes it, and 10 sets of
notes as people type them (bullets, prose, a post-mortem, dictated notes).

Gold: the meeting's date, the attendees (a multiset of names as written; someone who sent
apologies is not an attendee), and the action items' owners and due dates (a multiset of pairs;
an item with no date has ``None``). Where an item's date is only relative ("this week"), the
meeting's gold gives the owners alone. The title, decisions, tasks and summary: no gold.
"""

from __future__ import annotations

from datetime import date

from pydantic import BaseModel


class ActionItem(BaseModel):
    owner: str
    task: str
    due_date: date | None = None


class MeetingNotes(BaseModel):
    title: str
    date: date
    attendees: list[str]
    decisions: list[str]
    action_items: list[ActionItem]
    summary: str


INSTRUCTION = "Turn these meeting notes into structured minutes.\n\n"


def _gold(day: str, attendees: list[str], actions: list[tuple[str, str | None]]) -> dict[str, object]:
    return {"date": day, "attendees[]": attendees, "action_items[].owner": [o for o, _ in actions],
            "action_items[].due_date": [d for _, d in actions]}


ITEMS = [
    {"id": "meeting-0", "gold": _gold("2024-03-12", ["Maria", "Joon", "Sam", "Priya"],
                                      [("Joon", "2024-03-19"), ("Priya", "2024-03-22"), ("Sam", None)]),
     "text": """Weekly product sync - Tuesday 12 March 2024
Present: Maria, Joon, Sam, Priya

- Onboarding redesign: usability test results are in; 4 of 6 users got stuck on the permissions step.
  Decided to split permissions into its own screen.
- Release 3.8 slips one week to 26 March because of the payments bug.
- Joon to fix the payments rounding bug by 19 March.
- Priya will write the release notes by 22 March.
- Sam to book two more usability sessions (no date yet)."""},
    {"id": "meeting-1", "gold": _gold("2024-06-04", ["Hannah Fischer", "Omar Siddiqui", "Linda Park"],
                                      [("Omar Siddiqui", "2024-06-07"), ("Hannah Fischer", "2024-06-14"), ("Linda Park", "2024-06-14")]),
     "text": """Notes from the call with Greenfield Schools on 4 June 2024. On the call: Hannah Fischer and Omar Siddiqui
from our side, and Linda Park (Greenfield's IT lead). Linda confirmed they want to roll out the tablets
to all 14 schools in September rather than in two waves; we agreed to that. The main worry is Wi-Fi
capacity in the older buildings. Omar Siddiqui will send Linda the network survey checklist by 7 June.
Hannah Fischer is going to prepare a revised delivery schedule by 14 June. Linda Park will share the list
of buildings and room counts, also by 14 June."""},
    {"id": "meeting-2", "gold": _gold("2025-02-05", ["Raj", "Chloe", "Ben", "Ana"],
                                      [("Raj", "2025-02-12"), ("Chloe", "2025-02-07"), ("Ana", "2025-02-06")]),
     "text": """Post-incident review: checkout outage of 2 February 2025
Date of review: 5 February 2025. Attendees: Raj (SRE), Chloe (payments), Ben (eng manager), Ana (support).
What happened: an expired TLS certificate on the payments proxy caused 47 minutes of failed checkouts.
Decisions: certificates move to automatic renewal; we will page on expiry 14 days ahead instead of 3.
Actions:
1. Raj - switch the proxy to automatic renewal, due 12 February 2025
2. Chloe - reconcile the failed orders with the payment provider, due 7 February 2025
3. Ana - email affected customers with an apology and a discount code, due 6 February 2025"""},
    {"id": "meeting-3", "gold": _gold("2024-10-09", ["Gwen Morris", "Tunde Adeyemi", "Sarah Klein", "Phil Dawson"],
                                      [("Tunde Adeyemi", "2024-10-31"), ("Sarah Klein", "2024-11-01"), ("Phil Dawson", None)]),
     "text": """Riverside Rowing Club - committee meeting, 9 October 2024, clubhouse.
Attending: Gwen Morris (chair), Tunde Adeyemi (treasurer), Sarah Klein (secretary), Phil Dawson.
Apologies: Mark Ellis.
The treasurer reported that the boat fund stands at £18,400. The committee voted to buy a second-hand
coxed four for up to £12,000. The winter membership fee stays at £95.
Tunde Adeyemi will get three quotes for the boat by 31 October. Sarah Klein will send the AGM notice to
members by 1 November. Phil Dawson offered to organise the Christmas regatta; no deadline set."""},
    {"id": "meeting-4", "gold": _gold("2024-07-18", ["Elena", "Marco"], [("Marco", "2024-07-25"), ("Elena", "2024-08-01")]),
     "text": """1:1 Elena / Marco - 18 July 2024
Marco's project (the search ranking experiment) is on track; first results next week. He'd like to
present at the engineering all-hands in August - Elena agreed.
Marco is worried about on-call load; Elena will raise it with the other leads.
Follow-ups: Marco to share the experiment dashboard by 25 July. Elena to talk to the team leads about the
on-call rota by 1 August."""},
    {"id": "meeting-5", "gold": _gold("2024-11-20", ["Adaeze Nwosu", "Tim", "Keiko", "Rafael", "Lena"],
                                      [("Rafael", "2024-11-22"), ("Tim", "2024-11-21"), ("Lena", None)]),
     "text": """Lab meeting, Wednesday 20 November 2024. Present: Adaeze Nwosu (PI), Tim, Keiko, Rafael, Lena.
Keiko's western blots finally worked with the new antibody. Rafael's cell line is contaminated again; we
decided to discard it and order a fresh vial from the repository rather than try to rescue it.
The -80 freezer alarm went off twice this week.
To do: Rafael orders the new vial (by 22 Nov). Tim calls the facilities team about the freezer (by 21 Nov).
Lena books the confocal microscope for the December imaging runs."""},
    {"id": "meeting-6", "gold": _gold("2024-04-03", ["Nina Petrov", "James Whitaker", "Carlos Mendes"],
                                      [("James Whitaker", "2024-04-10"), ("Nina Petrov", "2024-04-24"), ("Carlos Mendes", "2024-04-12")]),
     "text": """Call with Brightwater Hotels - 3 April 2024
Us: Nina Petrov, James Whitaker. Them: Carlos Mendes (procurement).
Carlos said their budget is approved for 40 properties but they want a pilot in 5 first. We agreed on a
3-month pilot starting 1 May at the standard per-room price.
Next steps: James Whitaker sends the pilot contract by 10 April. Nina Petrov sets up the onboarding
workshop for the pilot hotels by 24 April. Carlos Mendes will send us the list of the 5 pilot hotels by
12 April."""},
    {"id": "meeting-7", "gold": {"date": "2025-01-15", "attendees[]": ["Dolores", "Kevin", "Aaliyah", "Petersen", "Yusuf"],
                                 "action_items[].owner": ["Kevin", "Aaliyah", "Dolores"]},
     "text": """Maple Court residents' meeting, 15 January 2025, 7 pm, community room.
Present: Dolores (unit 2), Kevin (unit 5), Aaliyah (unit 7), Mr. Petersen (unit 9), Yusuf (unit 11).
Topic: the broken gate and the parking lot lights. Agreed to hire Ace Gate Repair (quote $1,350) and to
split the cost evenly. The lights will be raised with the landlord first.
Kevin will call Ace Gate Repair to schedule the work this week. Aaliyah will email the landlord about the
lights by 20 January. Dolores will collect the money from each unit by 31 January."""},
    {"id": "meeting-8", "gold": _gold("2024-01-08", ["Fatima Al-Sayed", "Greg Holm", "Ines Duarte", "Paul Becker"],
                                      [("Greg Holm", "2024-01-26"), ("Ines Duarte", "2024-02-02"), ("Paul Becker", "2024-01-12")]),
     "text": """Kickoff: data warehouse migration. 8 January 2024. Attendees: Fatima Al-Sayed (sponsor), Greg Holm, Ines
Duarte, Paul Becker.
We will move from the on-prem warehouse to Snowflake; Fivetran was chosen for ingestion over a custom
build. Target cut-over is end of Q2.
Greg Holm owns the inventory of existing reports, due 26 January 2024. Ines Duarte will produce the cost
estimate by 2 February 2024. Paul Becker to set up the Snowflake trial account by 12 January 2024. Next
meeting in two weeks."""},
    {"id": "meeting-9", "gold": _gold("2024-09-05", ["Sofia", "Andre", "Mei"],
                                      [("Andre", "2024-09-13"), ("Mei", "2024-09-11"), ("Sofia", None)]),
     "text": """ok notes from today's design review (Thursday 5 Sept 2024) - me (Sofia), Andre, and Mei. we looked at the
new dashboard mockups. everyone liked the dark mode but the charts are too small on laptops, so we're
going with the two-column layout instead of three. Andre's going to redo the chart components by Friday
13 Sept. Mei will check contrast ratios for accessibility by Wednesday 11 Sept. I'll update the design
system docs once Andre is done."""},
]
