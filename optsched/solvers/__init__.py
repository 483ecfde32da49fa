"""Search strategies over the compiled round, behind one registry (`registry`, `contract`).

The placement baselines (`greedy`: the engine and six strategies; `portfolio`: the best of them),
`kueue` and `karpenter`; the model back ends `cpsat/` and `milp/` with what they share above the
round model (`incumbent`: the start plan, `warmstart`, `bound` + `guided`: the LP value bound and
its guided reruns, `backend`: `auto`'s choice). Solvers are looked up by name in `registry`.
"""
