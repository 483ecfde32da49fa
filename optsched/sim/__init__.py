"""Simulation: the discrete-event simulator (`simulate`), trace readers, and FGD's protocol.

- `engine`: jobs of a trace through scheduling rounds on a cluster, with spot interruptions and
  node failures; every plan checked before it is applied (docs/simulator.md);
- `trace`: the generic CSV schema, Philly's job summaries and Alibaba's openb pod lists;
- `fgd`: FGD's packing protocol and its six placement policies (docs/fgd.md).
"""

from optsched.sim.engine import (
    JobRecord,
    PlanRejected,
    Policy,
    RoundRecord,
    Rounds,
    SimConfig,
    SimResult,
    SimulationError,
    Simulator,
    simulate,
)
from optsched.sim.trace import Trace, TraceJob, read_csv, read_openb, read_philly

__all__ = [
    "JobRecord",
    "PlanRejected",
    "Policy",
    "RoundRecord",
    "Rounds",
    "SimConfig",
    "SimResult",
    "SimulationError",
    "Simulator",
    "Trace",
    "TraceJob",
    "read_csv",
    "read_openb",
    "read_philly",
    "simulate",
]
