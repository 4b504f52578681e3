#!/usr/bin/env python3
"""Consistency checks for deploy/ that generic linters cannot do (run by scripts/check-deploy.sh).

Subcommands (each exits 1 and prints every problem it found, or prints one OK line):
  metrics           every raftlog_* name used by the Grafana dashboard and the alert rules is documented
                    in docs/metrics.md, and the dashboard shows every documented metric
  dashboard-rules   writes the dashboard's PromQL, with Grafana variables filled in, as a Prometheus rule
                    file so that `promtool check rules` parses every panel query
  scrape URL...     every raftlog_* name used by the dashboard and the alerts is in the union of the
                    given /metrics scrapes (pass the leader's: peer series exist only there); labelled
                    families without any series yet are noted, not failed
  k8s               the Kubernetes manifests parse and fit together (services, probes, volumes, members)
  compose           the compose file, its raftlogd config and the Prometheus targets agree
  docker BIN_DIR    the runtime stage of the Dockerfile installs the package of every shared library
                    that BIN_DIR/raftlogd and BIN_DIR/raftlogctl load
"""
from __future__ import annotations

import json
import pathlib
import re
import subprocess
import sys
import urllib.request

import yaml

REPO = pathlib.Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
METRICS_DOC = REPO / "docs" / "metrics.md"
DASHBOARD = DEPLOY / "grafana" / "raftlog-dashboard.json"
ALERTS = DEPLOY / "prometheus" / "alerts.yml"
METRIC_NAME = re.compile(r"\braftlog_[a-zA-Z0-9_]+")
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")
# Scrapes are small text documents; anything bigger than this is not a raftlogd /metrics page.
MAX_SCRAPE_BYTES = 16 * 1024 * 1024
SCRAPE_TIMEOUT_SECONDS = 10


class Problems:
    """Collects every problem of one check so that a run reports them all, not just the first."""

    def __init__(self, check: str):
        self.check = check
        self.items: list[str] = []

    def add(self, message: str) -> None:
        self.items.append(message)

    def finish(self, ok_message: str) -> int:
        if self.items:
            for item in self.items:
                print(f"check-deploy {self.check}: {item}", file=sys.stderr)
            return 1
        print(f"check-deploy {self.check}: OK ({ok_message})")
        return 0


# ----------------------------------------------------------------------------------------- metrics
def documented_metrics() -> tuple[set[str], set[str]]:
    """Names in docs/metrics.md (any backquoted raftlog_* word) and the subset typed histogram."""
    text = METRICS_DOC.read_text()
    names = set(re.findall(r"`(raftlog_[a-zA-Z0-9_]+)`", text))
    histograms = set(re.findall(r"^\|\s*`(raftlog_[a-zA-Z0-9_]+)`\s*\|\s*histogram\s*\|", text, re.M))
    return names, histograms


def base_name(name: str, histograms: set[str]) -> str:
    """The documented family a series name belongs to (histogram series carry a suffix)."""
    for suffix in HISTOGRAM_SUFFIXES:
        if name.endswith(suffix) and name[: -len(suffix)] in histograms:
            return name[: -len(suffix)]
    return name


def dashboard_queries(dashboard: dict) -> list[tuple[str, str]]:
    """(where, PromQL) for every panel target and every templating query of the dashboard."""
    queries = []

    def panels(items):
        for panel in items:
            yield panel
            yield from panels(panel.get("panels", []))

    for panel in panels(dashboard.get("panels", [])):
        for target in panel.get("targets", []):
            if "expr" in target:
                queries.append((f"panel {panel.get('id')} '{panel.get('title')}' {target.get('refId')}", target["expr"]))
    for variable in dashboard.get("templating", {}).get("list", []):
        query = variable.get("query")
        if isinstance(query, dict):
            query = query.get("query")
        if variable.get("type") == "query" and isinstance(query, str):
            queries.append((f"variable {variable.get('name')}", query))
    return queries


def alert_queries() -> list[tuple[str, str]]:
    rules = yaml.safe_load(ALERTS.read_text())
    return [(f"alert {rule.get('alert') or rule.get('record')}", rule["expr"])
            for group in rules["groups"] for rule in group["rules"]]


def load_dashboard(problems: Problems) -> dict | None:
    try:
        dashboard = json.loads(DASHBOARD.read_text())
    except (OSError, json.JSONDecodeError) as error:
        problems.add(f"{DASHBOARD.relative_to(REPO)} does not parse: {error}")
        return None
    for key in ("uid", "title", "panels", "templating"):
        if key not in dashboard:
            problems.add(f"dashboard has no '{key}'")
    ids = [panel.get("id") for panel in dashboard.get("panels", [])]
    duplicates = {i for i in ids if ids.count(i) > 1}
    if duplicates:
        problems.add(f"dashboard panel ids are not unique: {sorted(duplicates)}")
    for panel in dashboard.get("panels", []):
        grid = panel.get("gridPos", {})
        if grid.get("x", 0) + grid.get("w", 0) > 24:
            problems.add(f"panel {panel.get('id')} '{panel.get('title')}' is wider than the 24-column grid")
        if panel.get("type") != "row" and not panel.get("targets"):
            problems.add(f"panel {panel.get('id')} '{panel.get('title')}' has no query")
    return dashboard


def check_metrics() -> int:
    problems = Problems("metrics")
    documented, histograms = documented_metrics()
    if not documented:
        problems.add(f"no raftlog_* metric names found in {METRICS_DOC.relative_to(REPO)}")
    dashboard = load_dashboard(problems)
    if dashboard is None:
        return problems.finish("")
    shown = set()
    for source, queries in (("dashboard", dashboard_queries(dashboard)), ("alerts.yml", alert_queries())):
        for where, query in queries:
            for name in METRIC_NAME.findall(query):
                family = base_name(name, histograms)
                if family not in documented:
                    problems.add(f"{source}: {where} uses {name}, which docs/metrics.md does not document")
                if source == "dashboard":
                    shown.add(family)
    for name in sorted(documented - shown):
        problems.add(f"dashboard: no panel shows {name} (documented in docs/metrics.md)")
    return problems.finish(f"{len(documented)} documented metrics, all shown; every name used is documented")


def grafana_to_promql(query: str) -> str:
    """Fills the dashboard's Grafana variables with values any Prometheus accepts."""
    query = query.replace("$__rate_interval", "1m").replace("$__interval", "1m").replace("$__range", "1h")
    return re.sub(r"\$\{?(job|node)\}?", lambda m: "raftlog" if m.group(1) == "job" else ".*", query)


def write_dashboard_rules(out_path: str) -> int:
    problems = Problems("dashboard-rules")
    dashboard = load_dashboard(problems)
    if dashboard is None:
        return problems.finish("")
    rules = []
    for index, (where, query) in enumerate(dashboard_queries(dashboard)):
        if query.startswith("label_values("):
            # A Grafana function, not PromQL: check the selector inside it.
            inner = re.match(r"label_values\((.*),\s*\w+\)$", query)
            if not inner:
                problems.add(f"{where}: cannot read label_values query {query!r}")
                continue
            query = inner.group(1)
        # promtool names a failing rule by its record name: make that point at the panel.
        record = "dashboard:" + re.sub(r"[^a-zA-Z0-9_]+", "_", where.split("'")[0].strip()) + f"_{index}"
        rules.append({"record": record, "expr": grafana_to_promql(query),
                      "labels": {"dashboard_query": where}})
    pathlib.Path(out_path).write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    return problems.finish(f"{len(rules)} queries written to {out_path}")


def scraped_names(url: str, problems: Problems) -> set[str]:
    try:
        with urllib.request.urlopen(url, timeout=SCRAPE_TIMEOUT_SECONDS) as response:
            text = response.read(MAX_SCRAPE_BYTES).decode("utf-8", "replace")
    except OSError as error:
        problems.add(f"cannot scrape {url}: {error}")
        return set()
    names = set()
    for line in text.splitlines():
        if line.startswith("# TYPE ") or line.startswith("# HELP "):
            names.add(line.split()[2])
        elif line and not line.startswith("#"):
            names.add(re.split(r"[{\s]", line, maxsplit=1)[0])
    return names


def labelled_metrics() -> set[str]:
    """Documented metrics with labels: a family whose label values come from events (a rejection
    reason, an RPC code) has no series, and so no name in the scrape, until the first such event."""
    rows = re.findall(r"^\|\s*`(raftlog_[a-zA-Z0-9_]+)`\s*\|[^|]*\|([^|]*)\|", METRICS_DOC.read_text(), re.M)
    return {name for name, labels in rows if labels.strip()}


def check_scrape(urls: list[str]) -> int:
    problems = Problems("scrape")
    if not urls:
        problems.add("give at least one /metrics URL")
        return problems.finish("")
    _, histograms = documented_metrics()
    scraped = set()
    for url in urls:
        scraped |= scraped_names(url, problems)
    if problems.items:
        return problems.finish("")  # without every scrape, a missing name says nothing
    scraped_families = {base_name(name, histograms) for name in scraped} | scraped
    dashboard = load_dashboard(problems) or {}
    used = {}
    for where, query in dashboard_queries(dashboard) + alert_queries():
        for name in METRIC_NAME.findall(query):
            used.setdefault(name, where)
    labelled = labelled_metrics()
    not_yet = []
    for name, where in sorted(used.items()):
        if name in scraped or base_name(name, histograms) in scraped_families:
            continue
        if base_name(name, histograms) in labelled:
            not_yet.append(name)
        else:
            problems.add(f"{where} uses {name}, which no scrape of {', '.join(urls)} contains")
    for name in not_yet:
        print(f"check-deploy scrape: note: {name} (labelled) has no series yet in these scrapes")
    return problems.finish(f"{len(used) - len(not_yet)} of {len(used)} names used by the dashboard and alerts "
                           f"present in the scrapes, the other {len(not_yet)} labelled and without series yet")


# --------------------------------------------------------------------------------------------- k8s
def load_manifests(problems: Problems) -> list[dict]:
    docs = []
    for path in sorted((DEPLOY / "k8s").glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        try:
            for doc in yaml.safe_load_all(path.read_text()):
                if doc is None:
                    continue
                for key in ("apiVersion", "kind", "metadata"):
                    if key not in doc:
                        problems.add(f"{path.name}: a document has no {key}")
                doc["__file__"] = path.name
                docs.append(doc)
        except yaml.YAMLError as error:
            problems.add(f"{path.name} does not parse: {error}")
    return docs


def labels_match(selector: dict, labels: dict) -> bool:
    return bool(selector) and all(labels.get(key) == value for key, value in selector.items())


def check_k8s() -> int:
    problems = Problems("k8s")
    docs = load_manifests(problems)
    by_kind: dict[str, list[dict]] = {}
    for doc in docs:
        by_kind.setdefault(doc.get("kind", "?"), []).append(doc)

    kustomization = yaml.safe_load((DEPLOY / "k8s" / "kustomization.yaml").read_text())
    for resource in kustomization.get("resources", []):
        if not (DEPLOY / "k8s" / resource).is_file():
            problems.add(f"kustomization.yaml lists {resource}, which does not exist")
    listed = set(kustomization.get("resources", []))
    for doc in docs:
        if doc["__file__"] not in listed:
            problems.add(f"kustomization.yaml does not list {doc['__file__']}")

    statefulsets = by_kind.get("StatefulSet", [])
    if len(statefulsets) != 1:
        problems.add(f"expected one StatefulSet, found {len(statefulsets)}")
        return problems.finish("")
    sts = statefulsets[0]
    spec = sts["spec"]
    name = sts["metadata"]["name"]
    replicas = spec.get("replicas")
    template = spec["template"]
    pod_labels = template["metadata"]["labels"]
    if not labels_match(spec["selector"]["matchLabels"], pod_labels):
        problems.add("StatefulSet selector does not match its pod template labels")
    if spec.get("podManagementPolicy") != "Parallel":
        problems.add("podManagementPolicy must be Parallel (pods are Ready only once a majority runs)")

    services = {svc["metadata"]["name"]: svc for svc in by_kind.get("Service", [])}
    headless = services.get(spec.get("serviceName"))
    if headless is None:
        problems.add(f"serviceName {spec.get('serviceName')!r} names no Service")
    else:
        if headless["spec"].get("clusterIP") != "None":
            problems.add(f"Service {headless['metadata']['name']} must be headless (clusterIP: None)")
        if headless["spec"].get("publishNotReadyAddresses") is not True:
            problems.add("the headless Service needs publishNotReadyAddresses: true so peers resolve before Ready")
    client_services = [svc for svc in services.values() if svc["spec"].get("clusterIP") != "None"]
    if not client_services:
        problems.add("no client (non-headless) Service")
    pod_spec = template["spec"]
    containers = pod_spec["containers"]
    port_names = {port["name"]: port["containerPort"] for c in containers for port in c.get("ports", [])}
    port_numbers = set(port_names.values())
    for svc in services.values():
        if not labels_match(svc["spec"].get("selector", {}), pod_labels):
            problems.add(f"Service {svc['metadata']['name']} selects no raftlog pod")
        for port in svc["spec"].get("ports", []):
            target = port.get("targetPort", port["port"])
            if target not in port_names and target not in port_numbers:
                problems.add(f"Service {svc['metadata']['name']} targets port {target!r}, which no container exposes")

    for c in containers:
        readiness = c.get("readinessProbe") or {}
        if "grpc" not in readiness:
            problems.add(f"container {c['name']}: readinessProbe must ask the gRPC health service (grpc:)")
        elif readiness["grpc"]["port"] not in port_numbers:
            problems.add(f"container {c['name']}: readinessProbe probes port {readiness['grpc']['port']}, not a container port")
        for probe_name in ("livenessProbe", "startupProbe"):
            probe = c.get(probe_name)
            if not probe:
                problems.add(f"container {c['name']}: no {probe_name}")
            elif probe.get("grpc", {}).get("service", "") in ("", "raftlog.v1.Log") and "grpc" in probe:
                # Those health services are NOT_SERVING while no leader is known: restarting the
                # survivors of a cluster that lost its majority makes the outage worse.
                problems.add(f"container {c['name']}: {probe_name} must not depend on a leader being known")
        mounts = {m["name"] for m in c.get("volumeMounts", [])}
        volumes = {v["name"] for v in pod_spec.get("volumes", [])}
        claims = {t["metadata"]["name"] for t in spec.get("volumeClaimTemplates", [])}
        for mount in sorted(mounts - volumes - claims):
            problems.add(f"container {c['name']} mounts {mount}, which is neither a volume nor a claim template")
        if not claims & mounts:
            problems.add("no volumeClaimTemplate is mounted: the log would not survive rescheduling")
    if pod_spec.get("terminationGracePeriodSeconds", 30) < 15:
        problems.add("terminationGracePeriodSeconds below 15 s leaves too little time to flush")
    anti = pod_spec.get("affinity", {}).get("podAntiAffinity", {})
    if not anti:
        problems.add("no podAntiAffinity: two replicas could share a machine")

    pdbs = by_kind.get("PodDisruptionBudget", [])
    if not any(pdb["spec"].get("maxUnavailable") == 1 and labels_match(pdb["spec"]["selector"]["matchLabels"], pod_labels)
               for pdb in pdbs):
        problems.add("no PodDisruptionBudget with maxUnavailable: 1 selecting the raftlog pods")

    # The members list must name exactly the StatefulSet's pods, node id = ordinal + 1.
    config_maps = {cm["metadata"]["name"]: cm for cm in by_kind.get("ConfigMap", [])}
    config_volume = next((v for v in pod_spec.get("volumes", []) if "configMap" in v), None)
    if config_volume is None or config_volume["configMap"]["name"] not in config_maps:
        problems.add("the pod mounts no ConfigMap defined here")
    else:
        namespace = kustomization.get("namespace", "default")
        conf = next(iter(config_maps[config_volume["configMap"]["name"]]["data"].values()))
        members = parse_conf(conf).get("members", "")
        founders = check_k8s_membership(config_maps, containers, replicas or 0, problems)
        expected = ",".join(f"{i + 1}={pod_dns_name(name, spec, namespace, i)}:{port_names.get('grpc')}" for i in founders)
        if members != expected:
            problems.add(f"ConfigMap members {members!r} do not name the founding pods {founders}; expected {expected!r}")
        seeds = ",".join(f"{pod_dns_name(name, spec, namespace, i)}:{port_names.get('grpc')}" for i in founders)
        if config_maps.get("raftlog-members", {}).get("data", {}).get("join-seeds") != seeds:
            problems.add(f"ConfigMap raftlog-members: join-seeds must be the founding pods' addresses {seeds!r}")
        domain = f"{spec.get('serviceName')}.{namespace}.svc.cluster.local"
        for c in containers:
            for e in c.get("env", []):
                if e["name"] == "RAFTLOG_PEER_DOMAIN" and e.get("value") != domain:
                    problems.add(f"container {c['name']}: RAFTLOG_PEER_DOMAIN must be {domain!r}")
        check_peer_authentication(parse_conf(conf), problems)
        volumes = {v["name"]: v for v in pod_spec.get("volumes", [])}
        secret_file = parse_conf(conf).get("peer-secret-file")
        for c in containers if secret_file else []:
            mount = next((m for m in c.get("volumeMounts", [])
                          if secret_file.startswith(m["mountPath"].rstrip("/") + "/")), None)
            secret = volumes.get(mount["name"], {}).get("secret") if mount else None
            if secret is None:
                problems.add(f"container {c['name']}: peer-secret-file {secret_file} is not in a mounted Secret volume")
            elif secret.get("defaultMode", 0o644) & 0o007:
                problems.add(f"Secret volume {mount['name']} has defaultMode {oct(secret.get('defaultMode', 0o644))}: "
                             "raftlogd refuses a peer secret that other users can read")
    return problems.finish(f"{len(docs)} manifests, {replicas} replicas, members match the founding pods")


def pod_dns_name(statefulset: str, spec: dict, namespace: str, ordinal: int) -> str:
    return f"{statefulset}-{ordinal}.{spec.get('serviceName')}.{namespace}.svc.cluster.local"


def check_k8s_membership(config_maps: dict, containers: list[dict], replicas: int, problems: Problems) -> list[int]:
    """The raftlog-members ConfigMap and the start script's environment (deploy/docker/k8s-start.sh).
    Returns the founding ordinals (bootstrap-ordinals)."""
    members_map = config_maps.get("raftlog-members")
    if members_map is None:
        problems.add("no ConfigMap raftlog-members (bootstrap-ordinals, join-ids, join-seeds, next-id)")
        return list(range(replicas))
    data = members_map.get("data", {})
    for key in ("bootstrap-ordinals", "join-ids", "join-seeds", "next-id"):
        if not isinstance(data.get(key), str):
            problems.add(f"ConfigMap raftlog-members: {key} missing or not a string")
    try:
        founders = sorted(int(item) for item in data.get("bootstrap-ordinals", "").split())
    except ValueError:
        problems.add("ConfigMap raftlog-members: bootstrap-ordinals is not a list of ordinals")
        founders = []
    if founders != list(range(len(founders))) or not founders:
        problems.add(f"bootstrap-ordinals {founders} must be 0..N-1 for a new cluster")
    # A single founder would found a one-member configuration, which raftlogd does only with
    # --bootstrap-new-cluster; raftlog-k8s-start never passes it (it cannot tell a first start from a
    # lost volume), so that pod would exit 2 at every start (review of bootstrap5, note 8).
    if len(founders) == 1:
        problems.add("bootstrap-ordinals names one founder: a one-founder StatefulSet can never start "
                     "(raftlog-k8s-start cannot pass --bootstrap-new-cluster); found with 3 or 5 pods "
                     "(at least 2: \"0 1 2\")")
    if replicas < len(founders):
        problems.add(f"{replicas} replicas but {len(founders)} founding pods: the cluster could never form")
    # Exactly one past the founders: the start script reads a higher next-id as "the membership
    # changed" and then bootstraps no founder (deploy/docker/k8s-start.sh).
    if not str(data.get("next-id", "")).isdigit() or int(data.get("next-id", 0)) != len(founders) + 1:
        problems.add(f"next-id {data.get('next-id')!r} must be one past the founders' ids: if this is a new "
                     f"cluster, next-id must be {len(founders) + 1} (a higher one reads as \"the membership "
                     f"changed\", and every founder then exits 2)")
    if data.get("join-ids", "").strip():
        problems.add("join-ids must start empty (deploy/k8s/raftlog-members assigns ids)")
    for c in containers:
        if c.get("command") != ["raftlog-k8s-start"]:
            problems.add(f"container {c['name']}: command must be [raftlog-k8s-start] (joins, restarts, bootstraps)")
        env = {e["name"]: e for e in c.get("env", [])}
        for name, key in (("RAFTLOG_BOOTSTRAP_ORDINALS", "bootstrap-ordinals"), ("RAFTLOG_JOIN_IDS", "join-ids"),
                          ("RAFTLOG_JOIN_SEEDS", "join-seeds"), ("RAFTLOG_NEXT_ID", "next-id")):
            ref = env.get(name, {}).get("valueFrom", {}).get("configMapKeyRef", {})
            if ref.get("name") != "raftlog-members" or ref.get("key") != key:
                problems.add(f"container {c['name']}: env {name} must come from ConfigMap raftlog-members key {key}")
        if "RAFTLOG_PEER_DOMAIN" not in env:
            problems.add(f"container {c['name']}: no RAFTLOG_PEER_DOMAIN (a joining pod's own address)")
    dockerfile = (DEPLOY / "docker" / "Dockerfile").read_text()
    if "deploy/docker/k8s-start.sh /usr/local/bin/raftlog-k8s-start" not in dockerfile:
        problems.add("the Dockerfile does not install deploy/docker/k8s-start.sh as raftlog-k8s-start")
    return founders


def check_peer_authentication(conf: dict[str, str], problems: Problems) -> None:
    """raftlogd refuses to start a multi-node cluster without peer authentication or with the shared
    default cluster id (docs/security.md)."""
    if "peer-secret-file" not in conf and "peer-tls-ca" not in conf:
        problems.add("raftlogd's config has neither peer-secret-file nor peer-tls-*: a multi-node node refuses to start")
    if conf.get("cluster-id", "raftlog") == "raftlog":
        problems.add("raftlogd's config keeps the default cluster-id, which a multi-node node refuses")


def parse_conf(text: str) -> dict[str, str]:
    """raftlogd's config file format (docs/configuration.md): name = value, # comments."""
    options = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            key, _, value = line.partition("=")
            options[key.strip()] = value.strip()
    return options


# ----------------------------------------------------------------------------------------- compose
def check_compose() -> int:
    problems = Problems("compose")
    compose_dir = DEPLOY / "compose"
    compose = yaml.safe_load((compose_dir / "docker-compose.yml").read_text())
    conf = parse_conf((compose_dir / "raftlog.conf").read_text())
    members = dict(item.split("=", 1) for item in conf.get("members", "").split(",") if item)
    services = compose.get("services", {})
    raftlog_services = {name: svc for name, svc in services.items() if "RAFTLOG_ID" in svc.get("environment", {})}
    if len(raftlog_services) != len(members):
        problems.add(f"{len(raftlog_services)} raftlog services but {len(members)} members in raftlog.conf")
    for name, svc in raftlog_services.items():
        node_id = str(svc["environment"]["RAFTLOG_ID"])
        address = members.get(node_id)
        if address is None:
            problems.add(f"service {name} has RAFTLOG_ID {node_id}, which is not a member")
        elif address.rsplit(":", 1)[0] != name:
            problems.add(f"member {node_id} is {address}, but service {name} carries that id")
        if not any(str(v).endswith(":/var/lib/raftlog") for v in svc.get("volumes", [])):
            problems.add(f"service {name} keeps its data in no volume")
        secret_file = conf.get("peer-secret-file")
        mounts = [str(v).split(":")[1] for v in svc.get("volumes", []) if ":" in str(v)]
        if secret_file and not any(secret_file.startswith(m.rstrip("/") + "/") for m in mounts):
            problems.add(f"service {name} mounts no volume holding peer-secret-file {secret_file}")
    for name, svc in services.items():
        for volume in svc.get("volumes", []):
            source = str(volume).split(":", 1)[0]
            if source.startswith(".") and not (compose_dir / source).exists():
                problems.add(f"service {name} mounts {source}, which does not exist")
    check_peer_authentication(conf, problems)
    metrics_port = conf.get("metrics-addr", ":").rsplit(":", 1)[1]
    prometheus = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    job = next((j for j in prometheus["scrape_configs"] if j["job_name"] == "raftlog"), None)
    targets = sorted(t for sc in (job or {}).get("static_configs", []) for t in sc["targets"])
    expected = sorted(f"{name}:{metrics_port}" for name in raftlog_services)
    if targets != expected:
        problems.add(f"prometheus.yml scrapes {targets}, expected {expected}")
    return problems.finish(f"{len(raftlog_services)} nodes, members and scrape targets agree")


# ------------------------------------------------------------------------------------------ docker
def dockerfile_runtime_packages() -> list[str]:
    text = (DEPLOY / "docker" / "Dockerfile").read_text()
    block = re.search(r"# runtime-packages-begin\n(.*?)# runtime-packages-end", text, re.S)
    if not block:
        return []
    return re.findall(r"^\s+([a-z0-9][a-z0-9.+-]+) \\$", block.group(1), re.M)


def installed_depends(packages: list[str]) -> list[str]:
    """Direct dependencies (first alternative of each, without versions) of installed packages."""
    result = subprocess.run(["dpkg-query", "-W", "-f=${Depends},${Pre-Depends}\n", *packages],
                            capture_output=True, text=True, check=False)
    deps = []
    for item in result.stdout.replace("\n", ",").split(","):
        item = item.split("|")[0].strip()
        if item:
            deps.append(re.split(r"[\s(:]", item)[0])
    return deps


def owning_packages(paths: list[str]) -> dict[str, str]:
    """Debian package owning each path, for the paths dpkg knows (one dpkg -S call: it is slow)."""
    result = subprocess.run(["dpkg", "-S", *paths], capture_output=True, text=True, check=False)
    owners = {}
    for line in result.stdout.splitlines():
        package, _, path = line.partition(": ")
        owners[path.strip()] = package.split(":", 1)[0]
    return owners


def check_docker(bin_dir: str) -> int:
    problems = Problems("docker")
    packages = dockerfile_runtime_packages()
    if not packages:
        problems.add("no package list between the runtime-packages markers of deploy/docker/Dockerfile")
        return problems.finish("")
    for package in packages:
        known = subprocess.run(["dpkg-query", "-W", package], capture_output=True, check=False).returncode == 0 or \
            subprocess.run(["apt-cache", "show", package], capture_output=True, check=False).returncode == 0
        if not known:
            problems.add(f"the runtime stage installs {package}, which is not a Debian 12 package known here")
    # Everything apt-get brings in for the listed packages, one dependency level per dpkg-query call
    # (bounded: Debian's dependency graph is finite and each package is visited once).
    closure, level = set(), list(packages)
    while level:
        closure.update(level)
        level = sorted(set(installed_depends(level)) - closure)
    libraries = {}
    for binary in ("raftlogd", "raftlogctl"):
        path = pathlib.Path(bin_dir) / binary
        if not path.is_file():
            problems.add(f"{path} does not exist: build first")
            continue
        ldd = subprocess.run(["ldd", str(path)], capture_output=True, text=True, check=False)
        for library in re.findall(r"=>\s+(/\S+)", ldd.stdout):
            libraries[library] = binary
    # dpkg knows a library by the path its package installed, which may be a symlink's target or
    # the same file under /lib instead of /usr/lib (merged /usr).
    candidates = {}
    for library in libraries:
        resolved = str(pathlib.Path(library).resolve())
        candidates[library] = [library, resolved] + [p.replace("/usr/lib/", "/lib/", 1) for p in (library, resolved)
                                                      if p.startswith("/usr/lib/")]
    owners = owning_packages(sorted({c for cs in candidates.values() for c in cs}))
    needed = set()
    for library, binary in sorted(libraries.items()):
        owner = next((owners[c] for c in candidates[library] if c in owners), None)
        if owner is None:
            problems.add(f"{binary} loads {library}, which no Debian package owns")
        else:
            needed.add(owner)
    for package in sorted(needed - closure):
        problems.add(f"the binaries load a library of {package}, which the runtime stage does not install")
    return problems.finish(f"{len(needed)} library packages, all installed by the runtime stage's {len(packages)} packages")


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    command, args = argv[0], argv[1:]
    if command == "metrics":
        return check_metrics()
    if command == "dashboard-rules" and len(args) == 1:
        return write_dashboard_rules(args[0])
    if command == "scrape":
        return check_scrape(args)
    if command == "k8s":
        return check_k8s()
    if command == "compose":
        return check_compose()
    if command == "docker" and len(args) == 1:
        return check_docker(args[0])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
