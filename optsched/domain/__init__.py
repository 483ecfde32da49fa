"""The hierarchical round (DESIGN.md "Scale"): decide per domain first, then per node.

A round at 10,000 GPUs and beyond is too large for a model with a variable per (group, node).
Along the fabric's own hierarchy it is not:

1. `optsched.domain.cells`: the real, healthy nodes grouped into cells (a leaf domain's nodes of
   one device model and one quota flavor class), with their free capacity in aggregate;
2. `optsched.domain.model`: a MILP over cells, solved by HiGHS: which jobs are admitted, how many
   replicas of each group go to each cell, which running jobs are evicted and for which rule
   (docs/formulation.md, "Domain model"). It relaxes the node-level round, so its LP value bounds
   the admitted value of every valid plan on the existing nodes;
3. `optsched.domain.assign`: the cells' replicas placed on nodes and devices by the placement
   engine, evictions given their preemptors, and what does not fit moved or deferred, so that the
   plan passes `check` (anything else is a bug, reported and never returned).
"""
