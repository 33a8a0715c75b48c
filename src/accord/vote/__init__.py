"""Voting: how ballots become one decision.

    _vote       stage 7: the tally of canonical forms and the stop rules that decide it
    _fieldwise  a tally per field path, winners reassembled
    _gate       the margin gate: one ballot alone when no decoding step was fragile
    _predict    unrun ballots that the finished ones already determine
    _perturb    what varies between ballots, to sample the noise
"""
