"""Concern: tenancy, Kueue-style (the tenancy issue; docs/rules.md, docs/formulation.md).

Tenants are ClusterQueues: per-flavor `nominal` quota, `borrowing_limit` and `lending_limit`,
cohorts that lend unused nominal quota, a fair-share `weight`, and preemption policies. This
package holds all of it; the rule modules each carry the validator's rules, the metric terms and
the CP-SAT encoding of their part:

- `quota`: nominal, borrowing and lending (hard rule 5, Q1-Q3), the weighted DRF `fairness` term
  (F1-F3), and why quota defers a job;
- `preemption`: which running jobs may be preempted or reclaimed and by whom (hard rules 6 and 9,
  P1-P5), and the `disruption` term (lost work, GPU-equivalent hours);
- `serving`: an eviction serves its preemptor, by the victim's room or its quota (hard rule 10,
  S1-S3);
- `fairshare`: Kueue's fair sharing, dominant resource shares and the strategies that decide a
  reclaim above nominal (rule 6's fair-sharing clause and its encoding P2f, which `preemption`
  calls), and admission fair sharing's LocalQueue usage;
- `running`: the running jobs' data the others read (lost work, quota held, their table).

The `kueue` greedy baseline (`optsched.solvers.kueue`) is Kueue's admission and preemption on top
of these rules. No other module knows about cohorts.
"""

from optsched.concerns.tenancy import fairshare, preemption, quota, running, serving

__all__ = ["fairshare", "preemption", "quota", "running", "serving"]
