"""Call graphs of a sampling profile: folded stacks of one event (weighted by period, as the
flame graph and `report` count them) through gprof2dot's `collapse` reader into Graphviz."""
