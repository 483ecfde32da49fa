"""The time budget of a round: its phases, their shares of the time limit, and the estimates
that decide what fits. Every number a model solver times itself by lives here, with where it
was measured.

A model round (`cpsat`, `milp`) runs in phases, each ending at a share of the time limit counted
from the call's start (the limit includes compiling the problem):

1. **start plan** (`START_SHARE_*`): the greedy baselines, the `kueue` plan on a multi-tenant
   round, the `karpenter` plan where nodes may be provisioned, then the value bound (LP) and the
   baselines rerun in the order it guides (`optsched.solvers.incumbent`);
2. **build** (`BUILD_BY`, `ENCODE_BY`): the model's variables, then every concern's encoding;
3. **hint and solve** (`HINT_SHARE`, `SOLVE_BY`): the start plan completed into a value of every
   variable, then the search, or the neighbourhood steps (`NEIGHBOURHOODS_BY`);
4. **finish** (`finish_reserve`): decoding, checking and evaluating the plan.

`Budget` turns the shares into perf_counter deadlines for one call; `estimate_build_s` is the one
estimate of how long a model takes to build, which decides between a whole model and
neighbourhoods (`cpsat`), between the back ends (`auto`), whether the exact round bound is tried
(`bound`), and whether Pareto seeds are solved (`pareto`).
"""

from __future__ import annotations

from dataclasses import dataclass

from optsched import clock
from optsched.problem import Problem

# ---------------------------------------------------------------------------- estimates
GREEDY_SECONDS_PER_JOB = 3.5e-4
"""A greedy pass over the queue takes about this long per job (best-fit: 0.23-0.25 s for 1,000
jobs on mixed-cloud-10k at 2x load, benchmarks/results/tenancy.md), rounded up. The Kueue plan goes
first only when the time limit holds two such passes (it preempts during the first
`KUEUE_PREEMPTS` of it)."""

LP_SECONDS_PER_JOB = 1e-4
"""Time the value bound is expected to take per queued job (0.039-0.061 s for 1,000 jobs on
mixed-cloud-10k, benchmarks/results/bound.md; 0.12 s for 10,000 jobs, results/huge.md), rounded
up: it is computed only when it should end within the time limit."""

SECONDS_PER_CANDIDATE = 8e-5
"""Measured cost of building the model and completing its hint per (group, candidate node) pair:
6.5e-5 to 7.6e-5 s on mixed-cloud-10k with 1,000 jobs (benchmarks/results/cpsat-tuning.md), 4.7e-5
on dgx-h100-1k with 300 jobs; rounded up."""

FINISH_SECONDS_PER_JOB = 8e-4
"""Time kept back per queued and running job after the solve: on mixed-cloud-10k at 4x load with
473 running jobs, CP-SAT ran 0.9 s past its limit on a 57k-variable model and decoding, checking
and evaluating took 0.8 s more: a 10 s round took 11.1 s (benchmarks/results/cpsat.md, before this
reserve; 5.4e-4 s per job for the part after the solve, rounded up for the solver's overrun)."""

TARGET_COUNT_VARIABLES = 24_000
"""Candidate nodes per group are capped so that the model has about this many count variables:
on mixed-cloud-10k with 1,000 jobs, 16 candidates per group (48k variables) gave the best plan in
10 s among 8, 16 and 32 (benchmarks/results/cpsat-tuning.md)."""


def candidate_cap(p: Problem) -> int:
    """Candidate nodes per group: 64 on small rounds, fewer as the queue grows (at least 8)."""
    groups = sum(len(j.groups) for j in p.jobs)
    return int(min(64, max(8, TARGET_COUNT_VARIABLES // max(groups, 1))))


def slot_candidates(max_candidates: int) -> int:
    """Provisioning slots per pool kept as candidates of a group beyond its `max_candidates` real
    nodes (the first ones: slots are created in order)."""
    return max(1, max_candidates // 2)


def estimate_build_s(p: Problem, max_candidates: int | None = None, *, provision: bool | None = None) -> float:
    """Seconds to build the round's model (and complete its hint): `SECONDS_PER_CANDIDATE` per
    (group, candidate node) pair, with `max_candidates` real nodes per group (default
    `candidate_cap`) plus the provisioning slots kept (`provision`: default, where the cluster
    has provisionable pools)."""
    cap = candidate_cap(p) if max_candidates is None else max_candidates
    if provision is None:
        provision = bool(p.pool_max_nodes.sum() > 0)
    per_group = cap + (slot_candidates(cap) if provision else 0)
    return SECONDS_PER_CANDIDATE * per_group * sum(len(j.groups) for j in p.jobs)


DOMAIN_FROM_BUILD_S = 0.5
"""Rounds whose node-level model would take at least this long to build (`estimate_build_s`) start
from the domain model's plan (`optsched.solvers.domain`): at 1 s on dgx-h100-1k (300 jobs, 1.9 s)
and ascend-910b-4k (500 jobs) the round was at or above the best greedy baseline on 15 of 15 rounds
each, and on mixed-cloud-10k (1,000 jobs, 2.8 s) above Kueue's value on 5 of 5
(benchmarks/results/scale.md); smaller rounds keep the node-level model's start plan (the
baselines), where that model is exact."""


# ---------------------------------------------------------------------------- phases of a model round
WHOLE_MODEL_SHARE = 0.4
"""A round is one whole model when its estimated build time is within this share of the time
limit; else `cpsat` improves the start plan neighbourhood by neighbourhood and `auto` picks
`cpsat` (the share leaves the hint and the search the rest)."""

START_SHARE_WHOLE = 0.5
"""The start plan's extra candidates (baselines after the first, Kueue, karpenter, the guided
reruns) end by this share of the limit when a whole model follows."""

START_SHARE_NEIGHBOURHOODS = 0.9
"""... and by this share when neighbourhoods follow (they start from the best plan found)."""

KUEUE_PREEMPTS = (0.5, 0.7)
"""Share of the time limit in which the Kueue candidate may preempt (then it only admits what
fits): the first below `KUEUE_LONG` greedy passes of time, the second above. On mixed-cloud-10k
(1,000 jobs; Kueue alone 5.8-7.6 s on this machine), 0.5 vs 0.7 gave 0.87 / 0.65 / 0.76 vs 0.83 /
0.62 / 0.67 of Kueue's value at 1 s (load 2), and 0.98 / 0.9993 / 0.98 vs 1.0 / 1.0 / 1.0 at 10 s
(load 4), seeds 0-2 (a profile run beside benchmarks/results/cpsat.md)."""

KUEUE_LONG = 10
"""Greedy passes (`GREEDY_SECONDS_PER_JOB` x jobs) of time limit above which the Kueue candidate
preempts for the longer share: a Kueue plan takes about 4-10 passes on mixed-cloud-10k."""

KUEUE_BY = 0.85
"""The Kueue candidate that runs first (rounds that may evict) ends by this share of the limit."""

BUILD_BY = 0.75
"""The whole model's variables are built by this share of the limit (BuildTimeout after it)."""

BUILD_MARGIN = 1.5
"""A whole model is built only when the time left to `BUILD_BY`, after the start plan, is at
least this many times its estimated build time; else the round goes to the neighbourhoods. On
mixed-cloud-10k with 1,000 jobs and provisionable pools, the baselines (karpenter among them)
took 4.6 s of a 10 s round, and building the model (2.8 s estimated) ran past 7.5 s: the round
fell back (a profile beside benchmarks/results/cost.md)."""

SOLVE_BY = 0.9
"""Encodings, the hint and the neighbourhood steps end by this share of the limit (the last
tenth, at least, is the search's and the finish's)."""

MIN_MODEL_SHARE = 0.1
"""A model phase (neighbourhoods, hint and solve) starts only with this share of the limit left
before `SOLVE_BY`."""

HINT_SHARE = 0.4
"""Share of the time left before `SOLVE_BY` that completing the whole model's hint may take."""

EVICTIONS_FIRST_SHARE = 0.5
"""Where the start plan evicts, the eviction steps get this share of the time left before
`SOLVE_BY`, the placement neighbourhoods the rest."""

FINISH_SHARE = 0.05
"""The least share of the limit kept back after the search (see `FINISH_SECONDS_PER_JOB`)."""

EVALUATE_RESERVE = 0.1
"""Share of the time limit the greedy portfolio keeps back for evaluating its first plan (later:
its measured time), at least `EVALUATE_SECONDS_PER_JOB` per job."""

EVALUATE_SECONDS_PER_JOB = 4e-5
"""Time to evaluate and stamp a baseline's plan per queued and running job (0.033 s for the 1,473
of mixed-cloud-10k: at a 0.2 s limit, compiling took 0.17 s and a tenth of the limit left too
little for it, so calls ended at 1.15-1.2x their limit; benchmarks/results/timelimit.md)."""

# ---------------------------------------------------------------------------- sub-model steps
STEP_BUILD_SHARE = 0.15
"""Share of the time left that one neighbourhood's model may take to build (its solve gets up to
`STEP_SOLVE_PER_BUILD` times the step's build time, so a step takes about 45% of what is left and
two or more fit)."""

STEP_VARIABLES_SHARE = 0.5
"""A neighbourhood's variables are built within this share of the time left."""

STEP_HINT_SHARE = 0.25
"""Share of the time left that completing a step's hint may take."""

STEP_SOLVE_PER_BUILD = 2.0
"""A neighbourhood's solve takes at most this many times the step's build (and hint) time ..."""

STEP_SOLVE_LEAST_S = 0.1
"""... but at least this many seconds ..."""

STEP_SOLVE_SHARE = 0.8
"""... and at most this share of the time left (the rest merges and checks the plan)."""

FIRST_STEP_SECONDS = 0.25
"""A first step starts only with this much time left (later ones: as long as the longest step so
far). In a profile, a first step on mixed-cloud-10k with 1,000 jobs took 0.25 s to build and
complete its hint (view, ledger, model), and one started with 0.05 s left overran a 1 s round."""

EVICTION_STEP_SECONDS = 2.0
"""Time one eviction step may take (build, hint, two phases); the last one takes what is left.
On mixed-cloud-10k seed 0, steps of 16 preemptors in 2 s each cut the Kueue plan's lost work from
820.9 to 786.7 GPU-h at equal value (a profile; benchmarks/results/tenancy.md)."""

LAST_STEP_FACTOR = 1.5
"""An eviction step takes all that is left when less than this many steps' time remains."""

EVICTION_VARIABLES_SHARE = 0.4
"""An eviction step's variables are built within this share of its time."""

# ---------------------------------------------------------------------------- the MILP back end
MILP_VARIABLES_BY = 0.5
"""`milp` builds the model's variables by this share of the limit ..."""

MILP_ENCODE_BY = 0.6
"""... and its encodings by this share."""

MILP_TRANSLATE_BY = 0.8
"""The translation to sparse arrays starts only if it should end by this share of the limit."""

TRANSLATE_SHARE = 0.5
"""The translation is expected to take at most this share of the model's build time: a third of
it at 300 dgx-h100-1k jobs (0.53 s vs 1.45 s, a profile)."""

HIGHS_FIRST_LEVEL_SHARE = 0.85
"""Share of the time left that the first level of a lexicographic order gets: the later levels
(disruption, topology, evictions at a fixed value) mostly end early; with 0.7, 10 s rounds on
dgx-h100-1k ended after 6.9-7.8 s with the first level cut (benchmarks/results/milp.md, first run)."""

ROUND_BOUND_VARIABLES_SHARE = 0.4
"""`model_bound` (the round model bounded by HiGHS) builds its variables within this share of its
time ..."""

ROUND_BOUND_ENCODE_SHARE = 0.5
"""... and its encodings within this share."""

EXACT_BOUND_SHARE = 0.3
"""`bound` also bounds the whole round model when building it with every eligible node as a
candidate is estimated at most this share of the time left."""

# ---------------------------------------------------------------------------- Pareto sets
PARETO_CPSAT_SHARE = 0.3
"""Share of the time limit the CP-SAT seeds of a Pareto search may use (none when a model would
not fit it)."""

PARETO_MIN_SEED_S = 0.4
"""Least time per CP-SAT seed: fewer seeds rather than slices too short to prove the extremes
(on a 12-node, 10-job round each extreme took 0.4-0.5 s to prove: benchmarks/results/pareto.md)."""

PARETO_CHECK_SHARE = 0.1
"""Most of the time limit kept back for checking the returned plans with the validator."""

PARETO_CHECK_PER_EVALUATION = 0.25
"""Time to check a plan, as a share of a baseline's run and evaluation: 13% on an 8-node round,
12% on mixed-cloud-10k with 1,000 jobs (a profile), doubled."""


@dataclass(frozen=True)
class Budget:
    """One call's clock: `start` (`clock.now()` seconds) and `limit` (seconds), with each phase's
    deadline (module docstring)."""

    start: float
    limit: float

    @classmethod
    def from_now(cls, limit: float, started: float | None = None) -> Budget:
        """The budget of a call that began at `started` (default: now)."""
        return cls(clock.now() if started is None else started, limit)

    @property
    def end(self) -> float:
        """When the call must return."""
        return self.start + self.limit

    def at(self, share: float) -> float:
        """The deadline `share` of the limit after the start."""
        return self.start + share * self.limit

    def left(self, share: float = 1.0) -> float:
        """Seconds from now until `at(share)` (negative when past)."""
        return self.at(share) - clock.now()

    def elapsed(self) -> float:
        """Seconds since the start."""
        return clock.now() - self.start

    def start_share(self, whole_model: bool) -> float:
        """Share of the limit by which the start plan's extra candidates end."""
        return START_SHARE_WHOLE if whole_model else START_SHARE_NEIGHBOURHOODS

    def finish_reserve(self, p: Problem) -> float:
        """Seconds kept back after the search for handing over, decoding, checking and evaluating
        the plan (`FINISH_SHARE`, `FINISH_SECONDS_PER_JOB`)."""
        return max(FINISH_SHARE * self.limit, FINISH_SECONDS_PER_JOB * (len(p.jobs) + len(p.running)))

    def solve_end(self, p: Problem) -> float:
        """When the search must stop: the end less the finish reserve."""
        return self.end - self.finish_reserve(p)

    def greedy_passes(self, p: Problem) -> float:
        """How many greedy passes over the queue the limit holds (`GREEDY_SECONDS_PER_JOB`)."""
        return self.limit / max(GREEDY_SECONDS_PER_JOB * len(p.jobs), 1e-12)

    def fits_greedy_passes(self, p: Problem, passes: float, by: float) -> bool:
        """Whether `passes` greedy passes started now end before `by` (`clock.now()` seconds)."""
        return clock.now() + passes * GREEDY_SECONDS_PER_JOB * len(p.jobs) < by

    def kueue_preempts_share(self, p: Problem) -> float:
        """Share of the limit in which the Kueue candidate may preempt (`KUEUE_PREEMPTS`)."""
        return KUEUE_PREEMPTS[self.greedy_passes(p) >= KUEUE_LONG]

    def fits_value_bound(self, p: Problem) -> bool:
        """Whether the value bound (LP) started now should end within the limit."""
        return clock.now() + LP_SECONDS_PER_JOB * len(p.jobs) < self.end


__all__ = ["DOMAIN_FROM_BUILD_S", "Budget", "candidate_cap", "estimate_build_s", "slot_candidates"]
