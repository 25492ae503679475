"""Whether every team's job lands: the Job a team submits, followed from its queue to a GPU on a node started from zero."""
