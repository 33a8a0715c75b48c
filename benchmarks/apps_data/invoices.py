"""An invoice with line items, money and dates: the schema as an accounts-payable application
writes it (money as ``Decimal``), and 10 invoices as they arrive (PDF text, e-mails).

Gold: vendor, invoice number, issue and due dates, currency (each text names it or writes a
symbol only one currency uses), each line's quantity and unit price (as a multiset of pairs),
and the total. Every total is the sum of its lines. Line descriptions and notes: no gold.
"""

from __future__ import annotations

from datetime import date
from decimal import Decimal

from pydantic import BaseModel, Field


class LineItem(BaseModel):
    description: str
    quantity: int
    unit_price: Decimal


class Invoice(BaseModel):
    vendor: str
    invoice_number: str
    issue_date: date
    due_date: date
    currency: str = Field(description="ISO 4217 code, e.g. USD")
    line_items: list[LineItem]
    total: Decimal
    notes: str | None = None


INSTRUCTION = "Extract the invoice data from this document.\n\n"


def _gold(vendor: str, number: str, issued: str, due: str, currency: str, lines: list[tuple[int, str]], total: str) -> dict[str, object]:  # noqa: PLR0917 - one row of the table below
    return {"vendor": vendor, "invoice_number": number, "issue_date": issued, "due_date": due, "currency": currency,
            "line_items[].quantity": [q for q, _ in lines], "line_items[].unit_price": [p for _, p in lines], "total": total}


ITEMS = [
    {"id": "invoice-0", "gold": _gold("Brightline Office Supply Co.", "INV-2024-0387", "2024-03-04", "2024-04-03", "USD",
                                      [(2, "249.00"), (5, "38.50"), (1, "60.00")], "750.50"),
     "text": """INVOICE
Brightline Office Supply Co.
Invoice no. INV-2024-0387
Date: 4 March 2024
Bill to: Harper & Lowe LLP

2 x Ergonomic desk chair @ $249.00
5 x Monitor arm, single @ $38.50
1 x Delivery and assembly @ $60.00

Total due: $750.50 (amounts in USD)
Payment due by 3 April 2024. Please quote the invoice number with your payment."""},
    {"id": "invoice-1", "gold": _gold("Kessler Druck GmbH", "24-1187", "2024-02-12", "2024-02-26", "EUR",
                                      [(5000, "0.06"), (40, "3.25")], "430.00"),
     "text": """From: accounts@kessler-druck.de
Subject: Rechnung / Invoice 24-1187

Dear Ms Becker,
please find below our invoice 24-1187 dated 12.02.2024 for the print job.
- Flyers A5, 4/4 colour: 5000 pcs at EUR 0.06
- Posters A1: 40 pcs at EUR 3.25
Total: EUR 430.00 (VAT included).
Payable within 14 days, i.e. by 26.02.2024.
Kind regards,
Kessler Druck GmbH"""},
    {"id": "invoice-2", "gold": _gold("Maya Okafor Design", "0042", "2023-11-30", "2023-12-14", "GBP",
                                      [(12, "55"), (6, "55"), (1, "24")], "1014.00"),
     "text": """Invoice #0042
From: Maya Okafor Design (sole trader)
To: Greenleaf Cafés Ltd
Issued: 30 November 2023
Due: 14 December 2023

Logo redesign - 12 hours at £55/hour
Menu layout - 6 hours at £55/hour
Printing proofs - 1 at £24

Amount due: £1,014.00 GBP
Notes: bank transfer only, sort code 20-45-77, account 43190822."""},
    {"id": "invoice-3", "gold": _gold("Sakura Tea Imports", "ST-5521", "2024-01-09", "2024-02-08", "JPY",
                                      [(3, "18000"), (2, "14500")], "83000"),
     "text": """Invoice from Sakura Tea Imports, No. ST-5521, dated 2024-01-09, due 2024-02-08.
3 cases of sencha (20 tins each) at JPY 18,000 per case; 2 cases of genmaicha at JPY 14,500 per case.
Total JPY 83,000. Shipping included. Thank you for your business!"""},
    {"id": "invoice-4", "gold": _gold("Northwind Cloud, Inc.", "NW-88410", "2024-06-01", "2024-06-30", "USD",
                                      [(14, "29.00"), (1, "45.00"), (1, "99.00")], "550.00"),
     "text": """Northwind Cloud, Inc. - Invoice NW-88410
Invoice date: June 1, 2024 | Due date: June 30, 2024 | Currency: USD
Customer: Fabrikam Robotics

Team plan seats (June)        14 x 29.00 = 406.00
Extra storage, 500 GB          1 x 45.00 =  45.00
Priority support add-on        1 x 99.00 =  99.00

TOTAL 550.00
Notes: This invoice will be charged automatically to the card on file ending 4417."""},
    {"id": "invoice-5", "gold": _gold("Alpenbau Renovations", "2024-066", "2024-04-15", "2024-05-15", "CHF",
                                      [(18, "85.00"), (1, "240.00"), (5, "95.00")], "2245.00"),
     "text": """Rechnung Nr. 2024-066 from Alpenbau Renovations, Zurich. Date of invoice: 15 April 2024. Work at
Seestrasse 12: bathroom tiling, 18 m² at CHF 85.00 per m²; 1 new shower valve at CHF 240.00; labour for
plumbing, 5 hours at CHF 95.00. Total amount CHF 2,245.00. Please pay by 15 May 2024. Warranty on
workmanship: 2 years."""},
    {"id": "invoice-6", "gold": _gold("Pacific Rim Produce", "7781-B", "2024-09-15", "2024-10-15", "USD",
                                      [(10, "22.00"), (4, "31.50"), (6, "18.75")], "458.50"),
     "text": """Pacific Rim Produce
INVOICE 7781-B
Sold to: Lucky Noodle House, 88 Grant Ave, San Francisco
Invoice date: 09/15/2024   Terms: Net 30   Due: 10/15/2024
Qty  Item                   Price
10   Bok choy, case         $22.00
4    Shiitake, 5 lb box     $31.50
6    Scallions, case        $18.75
Total (USD): $458.50"""},
    {"id": "invoice-7", "gold": _gold("Hotel Miramar Lisboa", "FT 2024/1932", "2024-08-22", "2024-08-22", "EUR",
                                      [(3, "145.00"), (3, "4.00"), (2, "16.50")], "480.00"),
     "text": """Hotel Miramar Lisboa - Fatura / Invoice FT 2024/1932
Guest: Mr. Daniel Cho. Issue date: 22 August 2024. Due: on receipt (22 August 2024).
Room, double, 3 nights at €145.00
City tax, 3 nights at €4.00
Breakfast, 2 at €16.50
Total: €480.00
Paid by Visa. Thank you for staying with us."""},
    {"id": "invoice-8", "gold": _gold("Camille Leblanc Translation", "CL-019", "2024-10-31", "2024-11-30", "CAD",
                                      [(1, "1150.00"), (3, "60.00")], "1330.00"),
     "text": """Hi Tom, here's my invoice for the October work.
Invoice CL-019 - Camille Leblanc Translation
Date: 31 October 2024
- Translation EN>FR, user manual: 1 at 1,150.00 CAD
- Proofreading, marketing brochure: 3 hours at 60.00 CAD
Total: 1,330.00 CAD, due 30 November 2024.
As usual, e-transfer to camille.leblanc@mailbox.ca works best. Thanks!"""},
    {"id": "invoice-9", "gold": _gold("Fenwick Motors Ltd", "000918", "2024-05-07", "2024-05-21", "GBP",
                                      [(1, "189.00"), (1, "96.00"), (2, "12.50")], "310.00"),
     "text": """Fenwick Motors Ltd
VAT invoice 000918
Date: 7 May 2024, payment due 21 May 2024
Vehicle: Ford Focus, reg. KM19 XRT
Full service (parts and labour)   1 x £189.00
Front brake pads                  1 x £96.00
Wiper blades                      2 x £12.50
Total £310.00 (incl. VAT)
Next service due at 45,000 miles."""},
]
