"""Reading: one model output to a validated value, or a misreading with feedback.

Read top to bottom, in the order a text goes through them:

    _read       the pipeline: strictly first, then leniently; the one entry point (``read``)
    _answers    one answer or none: several different values in a text are refused (a marked final answer aside)
    _coercions  the closed list of what a reading may change and of what it refuses: one table, every reader
    _deadline   the bound on a reading's work (a deadline, sizes), so hostile text ends in time
    _settle     one value normalized, validated, canonicalized: a Reading or a Misreading
    _lenient    the lenient search: every candidate repaired, coerced, weighed; the cheapest valid one kept
    _extract    stage 3, extract: the strict reading (fences, prose around the value, the first value)
    _locate     where a JSON value stands in a text (a fence, a span, the whole), the first found
    _echo       an echoed schema or type signature is never a value
    _candidates every value a text may hold, in the order preferred on a tie
    _bare       a bare answer to an object of one field (``Yes.`` for ``{answer: bool}``)
    _jsonish    the lenient reader of JSON-like text (what json.loads refuses), saying what it did
    _words      what a word says (a choice, a yes/no, a null), or why it says none: one reading at every depth
    _numbers    what a number says, each form decided, or why it is not one number
    _plan       a schema node read once, for the walkers of normalize and coerce
    _normalize  stage 4, normalize: extracted data into the form the schema expects
    _leaves     a leaf under its node: a number, a yes/no, an enum member, a date (for normalize)
    _coerce     schema-aligned coercion, only where the schema says how, recorded
    _validate   stage 5, validate: data to a value (pydantic or jsonschema), errors as data
    _exact      a Decimal: every number form a float gets, its digits kept, and a vote by value
    _canonical  stage 6, canonicalize: the vote key of a validated value
    _loops      does a text end in a loop (while it is written, or once cut off), and where
"""
