"""What a Kubernetes cluster does not say about itself: which labels name its fabric, which
extended resources are accelerators, which pods are one job.

Defaults follow the conventions of the components a GPU cluster runs: NVIDIA's GPU feature
discovery labels (`nvidia.com/gpu.product`, `nvidia.com/gpu.memory` in MiB), the device
plugins' resource names, Kueue's and Volcano's pod-group keys, and Kueue's Topology levels given
as node label keys from the top.
"""

from __future__ import annotations

from pydantic import Field

from optsched.model.base import Frozen, Identifier, NonNeg, Positive
from optsched.model.cluster import AdmissionFairSharing, FairSharing, PreemptionPolicy

HOSTNAME_LABEL = "kubernetes.io/hostname"
"""The label Kueue's Topology uses for its lowest level; it is optsched's `node` pseudo-level."""

DEVICES_ANNOTATION = "optsched.io/devices"
"""Pod annotation with the device indices optsched gave a replica, comma separated (`0,1,2,3`).
A Binding cannot name devices; the API server copies a Binding's annotations onto its pod, so a
bound pod carries it, and the next snapshot reads its devices back from it."""

ROLE_ANNOTATION = "optsched.io/role"
"""Pod annotation naming its task group within its job; before `KubeConfig.role_keys`."""

PREEMPTIBLE_ANNOTATION = "optsched.io/preemptible"
"""Pod annotation `"true"` / `"false"`: whether a plan may evict the running pod (overrides
`KubeConfig.running_preemptible`)."""


class Accelerator(Frozen):
    """An extended resource that counts devices, and the node labels that name their model."""

    resource: Identifier
    """The extended resource, e.g. `nvidia.com/gpu`."""
    product_label: str | None = None
    """Node label whose value names the device model (`nvidia.com/gpu.product`); None or absent on
    a node: the model is the resource name."""
    memory_label: str | None = None
    """Node label with one device's memory in MiB (`nvidia.com/gpu.memory`); None: unknown (0)."""


DEFAULT_ACCELERATORS = (
    Accelerator(resource="nvidia.com/gpu", product_label="nvidia.com/gpu.product",
                memory_label="nvidia.com/gpu.memory"),
    Accelerator(resource="amd.com/gpu", product_label="amd.com/gpu.product-name"),
    Accelerator(resource="huawei.com/Ascend910"),
    Accelerator(resource="habana.ai/gaudi"),
    Accelerator(resource="aws.amazon.com/neuron"),
    Accelerator(resource="google.com/tpu"),
)
"""Device plugins' resource names (NVIDIA, AMD, Huawei Ascend, Intel Gaudi, AWS Neuron, TPU). MIG
slices (`nvidia.com/mig-1g.10gb`, ...) are not devices here: each profile is a named resource,
counted like any other (a slice is its own unit; it has no index a plan must choose)."""

DEFAULT_GROUP_KEYS = (
    "kueue.x-k8s.io/pod-group-name",
    "scheduling.k8s.io/group-name",
    "scheduling.x-k8s.io/pod-group",
    "pod-group.scheduling.sigs.k8s.io",
)
"""Label or annotation keys that put pods into one job (Kueue's plain-pod groups, Volcano's
PodGroup annotation, the scheduler-plugins coscheduling label, its older form)."""

DEFAULT_ROLE_KEYS = (
    "volcano.sh/task-spec",
    "training.kubeflow.org/replica-type",
    "jobset.sigs.k8s.io/replicatedjob-name",
    "leaderworkerset.sigs.k8s.io/worker-index",
)
"""Label or annotation keys that name a pod's role within its job (its task group's name)."""


class TopologyLevel(Frozen):
    """One level of the fabric, from the top: its name and the node label whose value is the
    node's domain at that level (as a Kueue `Topology` level's `nodeLabel`)."""

    label: str
    """Node label key, e.g. `cloud.google.com/gce-topology-block`."""
    name: Identifier | None = None
    """Level name in the Cluster document; None: the label key itself (so a Kueue TAS annotation
    naming the label names the level)."""
    uplink_gbps: NonNeg | None = None
    """Bandwidth of each domain's link to its parent, Gbps; None: unlimited."""

    @property
    def level(self) -> str:
        """The level's name in the Cluster document."""
        return self.name or self.label


class KubeConfig(Frozen):
    """How the adapter reads a cluster: its fabric labels, accelerators, pod groups and defaults."""

    topology: list[TopologyLevel] = Field(default_factory=list)
    """Fabric levels from the top (a Kueue Topology's levels; a last `kubernetes.io/hostname` level
    is the `node` pseudo-level and is dropped). Empty: one domain holds every node."""
    uplinks_gbps: dict[str, NonNeg] = Field(default_factory=dict)
    """Uplink bandwidth of single domains, Gbps, by domain id (overrides the level's)."""
    accelerators: list[Accelerator] = Field(default_factory=lambda: list(DEFAULT_ACCELERATORS))
    """Extended resources that count devices; a node has devices of at most one of them."""
    rdma_resources: list[str] = Field(default_factory=list)
    """Extended resources counted as `rdma_nics` (e.g. `rdma/hca_shared_devices_a`); others stay
    named resources."""
    speeds: dict[str, Positive] = Field(default_factory=dict)
    """Relative speed per device model (a product label value, H100 = 1.0); unlisted models: 1.0."""
    interconnect: dict[str, list[list[int]]] = Field(default_factory=dict)
    """Device interconnect groups per device model (HCCS on Ascend 910B: `[[0,1,2,3],[4,5,6,7]]`);
    unlisted: one group of all devices."""
    group_keys: list[str] = Field(default_factory=lambda: list(DEFAULT_GROUP_KEYS))
    """Pod label or annotation keys that make pods one job, in order; the first present wins."""
    role_keys: list[str] = Field(default_factory=lambda: list(DEFAULT_ROLE_KEYS))
    """Pod label or annotation keys that name a pod's task group within its job."""
    scheduler_name: str | None = None
    """Only pending pods with this `spec.schedulerName` are queued; None: every pending pod."""
    tenant_label: str | None = None
    """Pod label naming its tenant (e.g. `kueue.x-k8s.io/queue-name` when each LocalQueue is a
    tenant); None: every job is tenant `default`."""
    preemption: PreemptionPolicy = Field(default_factory=lambda: PreemptionPolicy(within_tenant="lower_priority"))
    """Preemption policy of every tenant the pods name. The default is kube-scheduler's
    DefaultPreemption: a pending pod may evict lower-priority pods (of its own tenant; with no
    `tenant_label`, of the whole cluster). Kueue's ClusterQueue default is `never`."""
    running_preemptible: bool = False
    """Whether running pods may be evicted by a plan, unless their `optsched.io/preemptible`
    annotation says otherwise."""
    count_pods: bool = True
    """Count each replica as one of the node's allocatable `pods` (kube-scheduler's pod limit)."""
    kueue_fair_sharing: FairSharing | None = None
    """Kueue's Configuration `fairSharing` (in the kueue-manager-config ConfigMap, not an API object):
    with Kueue's objects, the cluster's `fair_sharing`; None: off."""
    kueue_admission_fair_sharing: AdmissionFairSharing | None = None
    """Kueue's Configuration `admissionFairSharing`: with Kueue's objects, the cluster's
    `admission_fair_sharing`; None: off."""

    def quota_resource(self, name: str) -> str:
        """The resource part of a quota key for a Kubernetes resource name, as requests name it
        (an accelerator resource is `gpu`, an RDMA resource `rdma_nics`, others keep their name)."""
        if name in {a.resource for a in self.accelerators}:
            return "gpu"
        if name in self.rdma_resources:
            return "rdma_nics"
        return name
