"""The round model: one mathematical model of a scheduling round, shared by every model back end.

Written with OR-Tools' CP-SAT modelling layer as its one representation (CP-SAT solves it; the
MILP back end translates it for HiGHS; the exact Pareto fronts enumerate it). Its modules, in the
order a model is made (docs/formulation.md has the symbols):

- `variables`: `RoundModel`, the shared admission, replica-count and keep variables and the
  candidate nodes of every group;
- `build`: `ENCODINGS`, every concern's encoding in order (each lives in its concern module,
  beside the rule's check and metric term), and `encode_all`;
- `weights`: the objective's integer weights (weighted sums, lexicographic big-M);
- `hint`: a plan as a value of every variable (the complete start);
- `decode`: a solution as a Plan (replicas, device indices, evictions).

The validator and the metrics import none of these: they are the ground truth the model is
tested against.
"""
