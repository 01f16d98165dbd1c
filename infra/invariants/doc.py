"""The invariants as docs/configuration.md states them (appended by `python -m infra.configdoc`)."""

INVARIANTS_DOC = """## Plan invariants

After the keys are valid and the planner has chosen layouts, every plan is checked as a whole, over
the Kubernetes objects it renders plus those its controllers, charts and DOKS create (the Service
and proxy Deployment the gateway controller makes for its Gateway, each chart's pods with the
requests its values set, DOKS' own DaemonSets, kube-proxy and CoreDNS). When a release's chart is
templated (docs/charts.md) its real objects are checked instead of the assumed pods, as errors like
the project's own, with what its operators and hooks create at run time: the StatefulSet
prometheus-operator makes for a `Prometheus`/`Alertmanager` (the CR's replicas, nodeSelector,
tolerations and requests), Secrets a pod writes (`--secret-name=`, `--cert-secret-name=`); `helm
test` hooks are left out, and a problem in a chart's objects names the stack section that gives
the chart its values. Every node carries `kubernetes.io/os: linux`, `kubernetes.io/arch: amd64`,
`node.kubernetes.io/instance-type` (its size) and `topology.kubernetes.io/region` besides its
pool's labels; a selector on `kubernetes.io/hostname` picks one node. The checks are generic over kinds
(`infra/invariants/`), so a new feature's objects are covered without new code. A broken invariant
is a configuration error naming the stack key responsible (exit 2, one line per problem);
`infra plan`, `infra diff` and the Pulumi program itself (before anything is
declared, `infra.offline.check_before_up`, in its own process) all run them.

| invariant | what must hold |
|---|---|
| identity | (group, kind, namespace, name) is unique across everything the plan and its controllers create (the names controllers give their objects are derived in one place, `infra/invariants/implied.py`: the LeaderWorkerSet controller's headless Service and StatefulSets named after each LeaderWorkerSet, KEDA's `keda-hpa-<ScaledObject>`, the gateway controller's Service): a model named `<other>-pd-router`, or `<other>-engine` beside a model whose replicas span nodes, is refused (the router and the gateway live in `inference`, apart from the engines in `inference-engines`); `--out` never drops or overwrites an object |
| wiring: selectors | every Service, InferencePool and PodDisruptionBudget selects at least one pod, and pods of one role only (one `app.kubernetes.io/name`, component, model and prefill/decode side); the ports they send to are ports those pods declare, as is a PodMonitor's port |
| wiring: references | every `...Ref`/`...Refs` (scaleTargetRef, endpointPickerRef, parentRefs, backendRefs, parametersRef, roleRef, secretRef, secretKeyRef, configMapRef...), every pod volume, service account and image pull secret, and a claim's `volumeName` names an object the plan or its controllers create |
| wiring: the kubelet | every pod template (Deployments, DaemonSets, Jobs, StatefulSets, LeaderWorkerSet leaders and workers, templated chart workloads) as a node will run it: a probe's or lifecycle hook's named port is declared by the probed container itself (the kubelet never looks in its sidecars); `secretKeyRef`/`configMapKeyRef` keys and mounted `items[].key` are in the Secret/ConfigMap the plan renders (a Secret whose values are Pulumi secrets lists its key names in `inference-platform/keys`); an exec probe's or hook's program is in the image, for the images `infra/catalog/images.py` knows |
| prerequisites | every custom resource's CRD is installed by the plan (a chart, a pinned CRD manifest, a CRD object) or by DOKS (Gateway API on VPC-native clusters only) |
| capacity: pools | each pool's pods fit its nodes (vCPU, memory, GPUs, boot disk) at the declared counts and with each autoscaled workload at its maximum, after the DaemonSets that run on every node; the system pool holds everything pinned there, chart components included |
| capacity: storage | the NFS cache holds every checkpoint plus ~20 GiB of compile cache per model; a model's download into an unbounded emptyDir (no cache) counts its weights against the node's disk |
| GPU view | a GPU partition mode that splits GPUs (`AMD_PARTITION_MODE_DPX_NPS2`) is refused: the planner sizes layouts on whole GPUs |
| no silent ignores | a key that cannot take effect is refused, with why: `models[].autoscaling` settings on a model that does not autoscale, `router.session_header` where nothing keys on it (not `router.kind: session`, nor `gateway` with `routing: session`), router settings under `router.kind: service` (no router runs), `router.image` under `gateway`, `observability` settings while it is off, `gpu_runtime.disable_numa_balancing` without AMD pools, `router.allowed_source_cidrs` without `router.public`, `observability.alert_receiver.channel` without `kind: slack`, `models[].workload.think_time_s` with `turns_per_session` 1 (an explicit empty list or null is accepted); an autoscaling pool whose pods nothing scales is noted, and so is replica autoscaling a `models[].rollout` suspends (its settings are kept for after the rollout) |
| metric dependencies | what autoscaling, rules and dashboards read is still exported: a flag in an engine's command line that removes the `vllm:*` series a ScaledObject, a PrometheusRule or a dashboard reads for that model (`--disable-log-stats`, a rollout candidate's included) is refused at the `extra_args` element that set it |
| one number | notes, model lines, the cost table and the JSON agree (nodes for peak, cost at the pools' bounds) |

Assumed figures (DOKS publishes none): the kubelet's reservation (memory: 25 % of the first 4 GiB,
20 % of the next 4, 10 % of the next 8, 6 % up to 128 GiB, 2 % above, plus 100 MiB; CPU: 6 % of the
first core, 1 % of the next, 0.5 % of the next two, 0.25 % above), 250 m CPU and 600 MiB per node
for DOKS' DaemonSets, 60 GiB of each node's boot disk for the system and images, and the idle
footprint of chart pods whose values set no requests (Prometheus 500 m / 2 GiB, Grafana 150 m /
384 MiB, the rest 50–100 m / 64–256 MiB; `infra/invariants/implied.py`).
"""
