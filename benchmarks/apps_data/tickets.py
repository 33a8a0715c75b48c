"""Support-ticket triage: the schema as a help-desk application writes it, and 12 tickets.

Gold is given only for what the ticket's text settles: the category where one clearly applies,
the customer's name as signed, the order number (None where the ticket gives none),
``needs_human`` only where the customer asks for a person. Priority, tags and the summary are
judgement or prose: no gold.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class TicketTriage(BaseModel):
    """Triage of one customer support ticket."""

    category: Literal["billing", "shipping", "technical", "account", "returns", "other"]
    priority: int = Field(ge=1, le=5, description="1 = low, 5 = urgent")
    needs_human: bool = Field(description="True when an agent must handle it personally")
    tags: list[str]
    customer_name: str
    order_number: str | None = Field(default=None, description="The order number, if the ticket gives one")
    summary: str = Field(description="One or two sentences for the agent who picks it up")


INSTRUCTION = "Triage this customer support ticket.\n\n"

ITEMS = [
    {"id": "ticket-0", "gold": {"category": "billing", "customer_name": "Dana Whitfield", "order_number": "A-20931"},
     "text": """Subject: Charged twice for my order

Hi, I placed order A-20931 on Monday and my credit card statement shows two charges of $84.50 from your
store on the same day. I only ordered once and only received one package. Can you please refund the
duplicate charge? I've attached a screenshot of the statement.
Thanks,
Dana Whitfield"""},
    {"id": "ticket-1", "gold": {"category": "shipping", "customer_name": "Marcus Oyelaran", "order_number": "558-2210-7"},
     "text": """Hello, my order 558-2210-7 was supposed to arrive last Thursday. The tracking page has said "label
created" for nine days now and nothing has moved. I need these hiking boots for a trip that starts on
the 14th, so if they won't get here in time I'd rather cancel. Can someone tell me where the parcel
actually is?
- Marcus Oyelaran"""},
    {"id": "ticket-2", "gold": {"category": "technical", "customer_name": "Priya Raman", "order_number": None},
     "text": """The mobile app crashes every time I open the Scan Receipt screen. I'm on an iPhone 13 with iOS 17.4 and
the latest version of your app (5.2.1). I've tried deleting and reinstalling it, and restarting the phone,
but it still closes the moment the camera should turn on. Other screens work fine. This started after
last week's update.
Priya Raman"""},
    {"id": "ticket-3", "gold": {"category": "account", "customer_name": "Julien Laurent", "order_number": None, "needs_human": True},
     "text": """I can't log in to my account anymore. The password reset email never arrives (I checked spam) and the
account is registered to my old work address, jlaurent@brightwell-design.com, which I no longer have
access to. I need to change the email on file to my personal one. I have tried the chatbot three times
and it keeps sending me in circles, so please have a real person contact me.
Julien Laurent"""},
    {"id": "ticket-4", "gold": {"category": "returns", "customer_name": "Sofia Marchetti", "order_number": "10044871"},
     "text": """Hi there, I'd like to return the linen duvet cover from order 10044871. The colour is much darker than
in the photos ('sand' looks brown in person). It's unused and still in the original packaging. Could you
send me a return label? I'd prefer an exchange for the white version if it's in stock, otherwise a
refund is fine.
Best regards, Sofia Marchetti"""},
    {"id": "ticket-5", "gold": {"category": "billing", "customer_name": "Tomás Herrera", "order_number": None},
     "text": """My subscription renewed yesterday at $19.99 a month instead of the $12.99 I signed up for. Nobody told
me the price was going up. I've been a customer for four years. Either honour my original price or
cancel the subscription and refund yesterday's charge.
Tomás Herrera, customer ID 88213"""},
    {"id": "ticket-6", "gold": {"category": "shipping", "customer_name": "Eleanor Pike", "order_number": "ZX-4471"},
     "text": """I just noticed that order #ZX-4471 is being shipped to my old address in Leeds. I updated my address to
14 Harrow Lane, Bristol BS6 7QT two weeks ago, but the confirmation email still shows the old one. The
parcel hasn't been dispatched yet according to the status page. Can you change the delivery address
before it goes out?
Thank you, Eleanor Pike"""},
    {"id": "ticket-7", "gold": {"category": "technical", "customer_name": "Kenji Watanabe", "order_number": None},
     "text": """Checkout fails on your website with the message "Error 502: payment gateway unavailable". I've tried two
different cards and two browsers (Chrome and Firefox) over the last hour. My cart has 6 items and the
total is $312.40. I'd really like to complete the order before the sale ends tonight. Is the problem on
your side?
Kenji Watanabe"""},
    {"id": "ticket-8", "gold": {"customer_name": "Inês Carvalho", "order_number": None},
     "text": """Hello, I run a small bakery in Porto and I'd love to stock your organic flour. Do you offer wholesale
pricing for businesses ordering around 200 kg a month? We'd also need invoices with our VAT number. Who
should I talk to about setting up a business account?
Many thanks, Inês Carvalho"""},
    {"id": "ticket-9", "gold": {"customer_name": "Frank de Vries", "order_number": "7730-115"},
     "text": """This is the third time I'm writing. I returned the running shoes from order 7730-115 on March 2
(tracking shows you received them March 6) and I still haven't got my refund of €129. Your emails say
'within 5 business days' and it has been three weeks. I want the refund today or I'm disputing the
charge with my bank.
Frank de Vries"""},
    {"id": "ticket-10", "gold": {"category": "account", "customer_name": "Agnieszka Nowak", "order_number": None},
     "text": """Please delete my account and all the personal data you hold about me, as is my right under GDPR. The
account email is a.nowak@poczta.pl. I also want confirmation in writing once it's done. I have no open
orders and nothing to return.
Agnieszka Nowak"""},
    {"id": "ticket-11", "gold": {"category": "technical", "customer_name": "Rob", "order_number": None},
     "text": """hi, it still doesnt work. I tried again this morning and its the same thing as yesterday, nothing
happens when I click the button. my brother says his works fine. this is really annoying, i need it for
work on monday. pls fix asap!!!
- Rob"""},
]
