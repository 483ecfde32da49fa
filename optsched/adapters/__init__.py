"""Adapters between optsched's documents and the objects of the schedulers users run.

`optsched.adapters.kube` reads Kubernetes Nodes, Pods and PriorityClasses (the official client's
models or the plain dicts `kubectl get -o json` prints) into a Cluster and a Queue, and turns a
Plan into the Bindings, evictions and pending conditions a scheduler writes back. It needs the
`k8s` extra (`pip install 'optsched[k8s]'`); the core package never imports it.
"""
