"""Held-out choice items: 38 prompts whose answer is one of a few words, five label sets, with gold.

Written to measure one question (issue 43): over the OpenAI wire, where a server's grammar takes a
choice as ``{"answer": ...}``, does listing the choices in the prompt help or hurt? Three label sets
name their choices in the prompt ("as positive, negative or neutral"), two do not (a language, an
animal's class). Not tuned on; benchmarks/told.py ``--tasks choices`` runs them. Each item: ``id``,
``kind`` (the label set), ``prompt``, ``schema`` (``module:Name``), ``gold``.
"""

from __future__ import annotations

from typing import Any, Literal

Sentiment = Literal["positive", "negative", "neutral"]
Topic = Literal["sports", "politics", "technology", "health"]
Urgency = Literal["low", "medium", "high"]
Language = Literal["english", "french", "spanish", "german"]
Animal = Literal["mammal", "bird", "fish", "reptile"]

SENTIMENT = [
    ("The soup was delicious and the staff were lovely.", "positive"),
    ("The laptop overheats and the battery died in a week.", "negative"),
    ("The library closes at six.", "neutral"),
    ("I am thrilled with how the garden turned out.", "positive"),
    ("The bus was late again and the driver shouted at us.", "negative"),
    ("The report has twelve sections.", "neutral"),
    ("Fantastic support team, they fixed it in minutes.", "positive"),
    ("The parcel was damaged and half the items were missing.", "negative"),
]
TOPICS = [
    ("The striker scored twice in the final minutes of the match.", "sports"),
    ("Parliament passed the new budget after a long debate.", "politics"),
    ("The new chip doubles battery life in smartphones.", "technology"),
    ("Doctors recommend thirty minutes of exercise a day for a healthy heart.", "health"),
    ("The tennis champion won her third title this year.", "sports"),
    ("The senator announced she will run for president.", "politics"),
    ("The company released an update to its cloud software.", "technology"),
    ("A new vaccine reduced flu cases by half.", "health"),
]
URGENCY = [
    ("The server is down and no customer can pay.", "high"),
    ("Could you update the footer colour when you have time?", "low"),
    ("The report is due Friday and one chart is still missing.", "medium"),
    ("Fire alarm in the data centre, evacuate now.", "high"),
    ("A typo on the about page.", "low"),
    ("Several users say login is slow this morning.", "medium"),
]
LANGUAGES = [
    ("Bonjour, je voudrais un café.", "french"),
    ("Where is the train station?", "english"),
    ("¿Dónde está el baño?", "spanish"),
    ("Ich habe meinen Schlüssel verloren.", "german"),
    ("Merci beaucoup pour votre aide.", "french"),
    ("The weather is lovely today.", "english"),
    ("Me gusta mucho la música.", "spanish"),
    ("Wie spät ist es?", "german"),
]
ANIMALS = [("salmon", "fish"), ("eagle", "bird"), ("lizard", "reptile"), ("dog", "mammal"),
           ("shark", "fish"), ("parrot", "bird"), ("whale", "mammal"), ("crocodile", "reptile")]


def items() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    def add(kind: str, name: str, prompt: str, gold: str) -> None:
        out.append({"id": f"{kind}-{sum(i['kind'] == kind for i in out)}", "kind": kind, "schema": f"choice_tasks:{name}",
                    "prompt": prompt, "gold": gold})

    for text, gold in SENTIMENT:
        add("sentiment, named", "Sentiment", f"Classify the sentiment of this text as positive, negative or neutral.\nText: {text}", gold)
    for text, gold in TOPICS:
        add("topic, named", "Topic", f"Which topic is this news about: sports, politics, technology or health?\nNews: {text}", gold)
    for text, gold in URGENCY:
        add("urgency, named", "Urgency", f"Rate the urgency of this support request as low, medium or high.\nRequest: {text}", gold)
    for text, gold in LANGUAGES:
        add("language, unnamed", "Language", f"In which language is this sentence written?\nSentence: {text}", gold)
    for text, gold in ANIMALS:
        add("animal, unnamed", "Animal", f"What class of animal is a {text}?", gold)
    return out
