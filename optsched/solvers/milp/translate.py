"""The CP-SAT round model as a MILP: the same variables, rules and terms, as sparse arrays.

The concerns write the round model once (`optsched.roundmodel.build.ENCODINGS`); this module reads
that model's proto and writes the mixed-integer program HiGHS solves, so that both back ends solve
the same model by construction (docs/formulation.md, "MILP back end"). Every CP-SAT variable is an
integer column with the same bounds. The constraints the concerns use become rows:

- linear ``lo <= sum a_i x_i <= hi``: one row;
- enforced linear (``only_enforce_if(e_1, ..., e_k)``): each side that can bind becomes a big-M
  row, ``sum a_i x_i + M (k - sum e_i) >= lo`` with ``M = lo - min(sum a_i x_i)``, and
  ``sum a_i x_i - M (k - sum e_i) <= hi`` with ``M = max(sum a_i x_i) - hi`` (the activity's
  bounds from the columns' bounds: the tightest M that keeps the rule exact);
- ``bool_or``, ``bool_and``, ``at_most_one``, ``exactly_one``: their linear forms over literals
  (a negated literal ``not x`` is ``1 - x``), enforced the same way;
- ``t = max(e_1, ..., e_m)`` (`add_max_equality`): ``t >= e_i``, ``t <= e_i + M_i (1 - z_i)``,
  ``sum z_i = 1`` with new binary columns ``z_i`` and ``M_i = max(t) - min(e_i)``.

Any other constraint kind raises `UnsupportedConstraint` (no concern uses one). The rows are
gathered as coordinate triplets and handed over as one CSR matrix; the enforcement pass is the
only per-row Python work, and it visits only the enforced rows.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
from ortools.sat import cp_model_pb2
from ortools.sat.python import cp_model, cp_model_helper

from optsched.problem import FArray, IArray

INT64_MAX = 2**63 - 1
INFINITE = 1e30
"""Row sides beyond this are open (CP-SAT writes an open side as the int64 limit)."""


class UnsupportedConstraint(Exception):
    """The CP-SAT model holds a constraint kind this translation does not linearise (a bug)."""


@dataclass
class MilpArrays:
    """``max c x  s.t.  row_lo <= A x <= row_hi,  lb <= x <= ub,  x integer`` (c is set per solve)."""

    a: sp.csr_matrix
    row_lo: FArray
    row_hi: FArray
    lb: FArray
    ub: FArray
    n_model_vars: int
    """Columns 0..n_model_vars-1 are the CP-SAT variables (same index); the rest are `z` columns."""
    selectors: list[tuple[list[int], list[tuple[list[int], list[int], int]]]]
    """Per `lin_max`: its `z` columns and its expressions (vars, coeffs, offset), to complete a start."""

    def extend(self, values: Any) -> FArray:
        """Column values from the CP-SAT variables' values: each `z` picks its lin_max's largest expression."""
        out = np.zeros(self.n_cols, dtype=np.float64)
        out[: self.n_model_vars] = values
        for zs, exprs in self.selectors:
            at = [off + sum(c * out[v] for v, c in zip(vs, cs, strict=True)) for vs, cs, off in exprs]
            out[zs[int(np.argmax(at))]] = 1.0
        return out

    @property
    def n_cols(self) -> int:
        return int(self.a.shape[1])

    @property
    def n_rows(self) -> int:
        return int(self.a.shape[0])


def _side(x: int) -> float:
    """A row side of the proto as a float (open sides become +-INFINITE)."""
    if x >= INT64_MAX:
        return INFINITE
    if x <= -INT64_MAX:
        return -INFINITE
    return float(x)


class _Rows:
    """Coordinate triplets of the rows and, per row, its sides and enforcement literals."""

    def __init__(self, lb: list[float], ub: list[float]) -> None:
        self.cols: list[IArray] = []
        self.vals: list[FArray] = []
        self.lo: list[float] = []
        self.hi: list[float] = []
        self.enforced: list[tuple[int, list[int]]] = []
        self.lb, self.ub = lb, ub
        self.selectors: list[tuple[list[int], list[tuple[list[int], list[int], int]]]] = []

    def new_binary(self) -> int:
        self.lb.append(0.0)
        self.ub.append(1.0)
        return len(self.lb) - 1

    def add(self, refs: Any, coeffs: Any, lo: float, hi: float, enforcement: Any = ()) -> None:
        """Row ``lo <= sum coeffs * lit(refs) <= hi``; a negative ref ``-i-1`` is ``1 - x_i``."""
        cols = np.asarray(refs, dtype=np.int64)
        vals = np.asarray(coeffs, dtype=np.float64)
        negated = cols < 0
        if negated.any():  # c (1 - x) = c - c x
            shift = float(vals[negated].sum())
            cols = np.where(negated, -cols - 1, cols)
            vals = np.where(negated, -vals, vals)
            lo, hi = lo - shift, hi - shift
        self.cols.append(cols)
        self.vals.append(vals)
        self.lo.append(lo)
        self.hi.append(hi)
        if len(enforcement):
            self.enforced.append((len(self.lo) - 1, list(enforcement)))


def _proto(model: cp_model.CpModel) -> cp_model_pb2.CpModelProto:
    """The model as a protobuf message: the C++ proto's fields cost about 1 us per element to read
    from Python, the serialised copy's about 0.2 (0.7 s vs 0.13 s for the 657k coefficients of a
    mixed-cloud-10k round with 300 jobs, a profile); exporting and parsing takes 0.04 s. The whole
    translation of that round took 2.0 s from the C++ proto and 0.79 s from the copy."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "round.pb"
        if not model.export_to_file(str(path)):
            raise UnsupportedConstraint("CP-SAT could not export the model")
        out = cp_model_pb2.CpModelProto()
        out.ParseFromString(path.read_bytes())
    return out


def from_cpsat(model: cp_model.CpModel) -> MilpArrays:
    """The MILP of a CP-SAT model (module docstring); the objective is not read (see `linear`)."""
    proto = _proto(model)
    lb = [float(v.domain[0]) for v in proto.variables]
    ub = [float(v.domain[-1]) for v in proto.variables]
    n_model = len(lb)
    rows = _Rows(lb, ub)
    for ct in proto.constraints:
        enf = ct.enforcement_literal
        kind = ct.WhichOneof("constraint")
        if kind == "linear":
            lin = ct.linear
            domain = lin.domain
            if len(domain) != 2:
                raise UnsupportedConstraint(f"linear constraint with a domain of {len(domain) // 2} intervals")
            rows.add(lin.vars, lin.coeffs, _side(domain[0]), _side(domain[1]), enf)
        elif kind == "bool_or":
            lits = list(ct.bool_or.literals)
            rows.add(lits, [1] * len(lits), 1.0, INFINITE, enf)
        elif kind == "bool_and":
            for lit in ct.bool_and.literals:
                rows.add([lit], [1], 1.0, 1.0, enf)
        elif kind == "at_most_one":
            lits = list(ct.at_most_one.literals)
            rows.add(lits, [1] * len(lits), -INFINITE, 1.0, enf)
        elif kind == "exactly_one":
            lits = list(ct.exactly_one.literals)
            rows.add(lits, [1] * len(lits), 1.0, 1.0, enf)
        elif kind == "lin_max":
            if len(enf):
                raise UnsupportedConstraint("enforced lin_max")
            _lin_max(rows, ct.lin_max)
        else:
            raise UnsupportedConstraint(f"a {kind} constraint has no linear form here")
    return _assemble(rows, n_model)


def _bounds_of(rows: _Rows, vars_: Any, coeffs: Any, offset: float) -> tuple[float, float]:
    """Least and greatest value of ``offset + sum coeffs * x`` over the columns' bounds."""
    lo = hi = float(offset)
    if any(v < 0 for v in vars_):
        raise UnsupportedConstraint("a negated literal inside a lin_max expression")
    for v, c in zip(vars_, coeffs, strict=True):
        a, b = c * rows.lb[v], c * rows.ub[v]
        lo += min(a, b)
        hi += max(a, b)
    return lo, hi


def _lin_max(rows: _Rows, ct: Any) -> None:
    """``t = max_i e_i`` as rows (module docstring)."""
    t = ct.target
    t_vars, t_coeffs, t_off = list(t.vars), list(t.coeffs), float(t.offset)
    _, t_hi = _bounds_of(rows, t_vars, t_coeffs, t_off)
    zs: list[int] = []
    exprs: list[tuple[list[int], list[int], int]] = []
    for e in ct.exprs:
        e_vars, e_coeffs, e_off = list(e.vars), list(e.coeffs), float(e.offset)
        exprs.append((e_vars, e_coeffs, int(e.offset)))
        e_lo, _ = _bounds_of(rows, e_vars, e_coeffs, e_off)
        # t - e_i >= 0: sum t - sum e >= e_off - t_off
        diff_vars, diff_coeffs = t_vars + e_vars, t_coeffs + [-c for c in e_coeffs]
        rows.add(diff_vars, diff_coeffs, e_off - t_off, INFINITE)
        # t - e_i <= M (1 - z):  sum t - sum e + M z <= M + e_off - t_off
        big_m = max(t_hi - e_lo, 0.0)
        z = rows.new_binary()
        zs.append(z)
        rows.add([*diff_vars, z], [*diff_coeffs, big_m], -INFINITE, big_m + e_off - t_off)
    rows.add(zs, [1] * len(zs), 1.0, 1.0)
    rows.selectors.append((zs, exprs))


def _assemble(rows: _Rows, n_model: int) -> MilpArrays:
    """The CSR matrix, with each enforced row replaced by its big-M sides."""
    lb, ub = np.asarray(rows.lb, dtype=np.float64), np.asarray(rows.ub, dtype=np.float64)
    lengths = np.fromiter((len(c) for c in rows.cols), dtype=np.int64, count=len(rows.cols))
    row_of = np.repeat(np.arange(len(rows.cols)), lengths)
    cols: IArray = np.concatenate(rows.cols) if rows.cols else np.zeros(0, dtype=np.int64)
    vals: FArray = np.concatenate(rows.vals) if rows.vals else np.zeros(0)
    lo, hi = np.asarray(rows.lo, dtype=np.float64), np.asarray(rows.hi, dtype=np.float64)
    # activity bounds of every row, vectorised over the triplets
    act_lo = np.bincount(row_of, weights=np.minimum(vals * lb[cols], vals * ub[cols]), minlength=len(lo))
    act_hi = np.bincount(row_of, weights=np.maximum(vals * lb[cols], vals * ub[cols]), minlength=len(lo))
    keep = np.ones(len(lo), dtype=bool)
    extra_rows: list[tuple[list[int], list[float], float, float]] = []
    for r, enforcement in rows.enforced:
        keep[r] = False
        base_cols, base_vals = rows.cols[r].tolist(), rows.vals[r].tolist()
        k = len(enforcement)
        # slack s = k - sum e_i (0 when every literal holds); a literal `not x` is 1 - x
        s_cols = [e if e >= 0 else -e - 1 for e in enforcement]
        s_vals = [-1.0 if e >= 0 else 1.0 for e in enforcement]
        s_const = float(k - sum(1 for e in enforcement if e < 0))  # s = s_const + sum s_vals x
        if hi[r] < INFINITE and act_hi[r] > hi[r]:  # a x - M s <= hi
            m = float(act_hi[r] - hi[r])
            extra_rows.append((base_cols + s_cols, base_vals + [-m * v for v in s_vals], -INFINITE,
                               hi[r] + m * s_const))
        if lo[r] > -INFINITE and act_lo[r] < lo[r]:  # a x + M s >= lo
            m = float(lo[r] - act_lo[r])
            extra_rows.append((base_cols + s_cols, base_vals + [m * v for v in s_vals], lo[r] - m * s_const, INFINITE))
    kept_rows = np.flatnonzero(keep)
    new_index = np.full(len(lo), -1, dtype=np.int64)
    new_index[kept_rows] = np.arange(len(kept_rows))
    mask = keep[row_of]
    r_idx = [new_index[row_of[mask]]]
    c_idx, v_idx = [cols[mask]], [vals[mask]]
    lo_all, hi_all = [lo[kept_rows]], [hi[kept_rows]]
    n = len(kept_rows)
    for i, (cs, vs, _, _) in enumerate(extra_rows):
        r_idx.append(np.full(len(cs), n + i, dtype=np.int64))
        c_idx.append(np.asarray(cs, dtype=np.int64))
        v_idx.append(np.asarray(vs, dtype=np.float64))
    lo_all.append(np.array([x[2] for x in extra_rows], dtype=np.float64))
    hi_all.append(np.array([x[3] for x in extra_rows], dtype=np.float64))
    n_rows = n + len(extra_rows)
    a = sp.csr_matrix((np.concatenate(v_idx), (np.concatenate(r_idx), np.concatenate(c_idx))),
                      shape=(n_rows, len(lb)))
    a.sum_duplicates()
    return MilpArrays(a=a, row_lo=np.concatenate(lo_all), row_hi=np.concatenate(hi_all), lb=lb, ub=ub,
                      n_model_vars=n_model, selectors=rows.selectors)


def linear(expr: Any, n_cols: int) -> tuple[FArray, float]:
    """A CP-SAT integer expression as (dense coefficients over the columns, constant)."""
    coef = np.zeros(n_cols, dtype=np.float64)
    if isinstance(expr, int | float):
        return coef, float(expr)
    flat = cp_model_helper.FlatIntExpr(expr)
    idx = np.fromiter((v.index for v in flat.vars), dtype=np.int64, count=len(flat.vars))
    np.add.at(coef, idx, np.asarray(flat.coeffs, dtype=np.float64))
    return coef, float(flat.offset)


class Assignment:
    """Values of a CP-SAT model's variables read like a `CpSolver`'s (`value(expr)`), so that the
    CP-SAT decoding (`optsched.roundmodel.decode.decode`) turns a MILP solution into a plan."""

    def __init__(self, values: IArray) -> None:
        self.values = values

    def value(self, expr: Any) -> int:
        if isinstance(expr, int):
            return expr
        if isinstance(expr, cp_model_helper.IntVar):
            return int(self.values[expr.index])
        if isinstance(expr, cp_model_helper.NotBooleanVariable):
            return 1 - int(self.values[-expr.index - 1])
        flat = cp_model_helper.FlatIntExpr(expr)
        return int(flat.offset) + sum(int(c) * int(self.values[v.index])
                                      for v, c in zip(flat.vars, flat.coeffs, strict=True))
