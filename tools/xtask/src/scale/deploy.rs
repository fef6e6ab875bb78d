//! The files of `deploy/` read and checked: the Kubernetes manifests (parsed, the fields that
//! matter checked), the router's nginx config (the shipped `ors.conf` with a Kubernetes replica
//! section), and the Dockerfile (its user, host and health check). No cluster and no Docker
//! run here, so this is how they are tested; `cargo xtask scale` also runs `nginx -t` on the
//! router config and the image's binary as its non-root user.

use std::path::Path;

use serde_json::Value;

/// Every document of every YAML file in `deploy/k8s`, with its file name.
pub fn manifests(root: &Path) -> Result<Vec<(String, Value)>, String> {
    let dir = root.join("deploy/k8s");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    let mut docs = Vec::new();
    for path in files {
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        for doc in serde_yaml::Deserializer::from_str(&text) {
            let value: Value = serde::Deserialize::deserialize(doc)
                .map_err(|e| format!("{}: not valid YAML: {e}", path.display()))?;
            if !value.is_null() {
                docs.push((name.clone(), value));
            }
        }
    }
    Ok(docs)
}

/// The one document of `kind` named `name`.
pub fn find<'a>(docs: &'a [(String, Value)], kind: &str, name: &str) -> Result<&'a Value, String> {
    let mut found = docs
        .iter()
        .map(|(_, d)| d)
        .filter(|d| d["kind"] == kind && d["metadata"]["name"] == name);
    let first = found
        .next()
        .ok_or_else(|| format!("deploy/k8s has no {kind} named {name}"))?;
    if found.next().is_some() {
        return Err(format!("deploy/k8s has two {kind}s named {name}"));
    }
    Ok(first)
}

/// The router's `ors.conf`, from its ConfigMap.
pub fn router_conf(docs: &[(String, Value)]) -> Result<String, String> {
    find(docs, "ConfigMap", "ors-router")?["data"]["ors.conf"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| "the ors-router ConfigMap has no ors.conf".to_owned())
}

/// The router config made checkable here: its resolver (the cluster's DNS) becomes this
/// machine's, as `nginx -t` resolves the resolver's name at load time.
pub fn router_conf_for_nginx_t(conf: &str) -> String {
    conf.replace(
        "resolver kube-dns.kube-system.svc.cluster.local",
        "resolver 127.0.0.1",
    )
}

/// What the Dockerfile sets that a deployment relies on.
#[derive(Debug)]
pub struct Dockerfile {
    /// The `USER` of the runtime stage.
    pub user: String,
    /// `ENV` of the runtime stage, in order.
    pub env: Vec<(String, String)>,
    /// The `HEALTHCHECK` command (exec form), if any.
    pub healthcheck: Option<Vec<String>>,
    /// The default of `ARG BIN`.
    pub bin: String,
    /// The Debian packages the runtime stage installs: the default of its `ARG APT_PACKAGES`,
    /// when a `RUN` installs `${APT_PACKAGES}` with apt-get.
    pub apt_packages: Vec<String>,
}

/// Read the parts of `deploy/Dockerfile` that matter (its runtime stage is the last `FROM`).
pub fn dockerfile(root: &Path) -> Result<Dockerfile, String> {
    let path = root.join("deploy/Dockerfile");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    // Continuation lines joined, comments dropped.
    let joined = text
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n")
        .replace("\\\n", " ");
    let mut out = Dockerfile {
        user: String::new(),
        env: Vec::new(),
        healthcheck: None,
        bin: String::new(),
        apt_packages: Vec::new(),
    };
    let mut apt_default: Vec<String> = Vec::new();
    for line in joined.lines().map(str::trim) {
        let (word, rest) = line.split_once(' ').unwrap_or((line, ""));
        let rest = rest.trim();
        match word {
            "FROM" => {
                out.user.clear();
                out.env.clear();
                out.healthcheck = None;
                out.apt_packages.clear();
                apt_default.clear();
            }
            "RUN" if rest.contains("apt-get install") && rest.contains("${APT_PACKAGES}") => {
                out.apt_packages = apt_default.clone();
            }
            "USER" => out.user = rest.to_owned(),
            "ENV" => {
                if let Some((k, v)) = rest.split_once('=') {
                    out.env.push((k.trim().to_owned(), v.trim().to_owned()));
                }
            }
            "ARG" => {
                if let Some(bin) = rest.strip_prefix("BIN=") {
                    out.bin = bin.to_owned();
                }
                if let Some(pkgs) = rest.strip_prefix("APT_PACKAGES=") {
                    apt_default = pkgs
                        .trim_matches('"')
                        .split_whitespace()
                        .map(str::to_owned)
                        .collect();
                }
            }
            "HEALTHCHECK" => {
                let cmd = rest
                    .find("CMD [")
                    .map(|i| &rest[i + 4..])
                    .ok_or("HEALTHCHECK without an exec-form CMD")?;
                let args: Vec<String> = serde_json::from_str(cmd)
                    .map_err(|e| format!("HEALTHCHECK CMD is not a JSON array: {e}"))?;
                out.healthcheck = Some(args);
            }
            _ => {}
        }
    }
    Ok(out)
}

/// What a deployment relies on in the manifests; each problem as a sentence.
pub fn check_manifests(docs: &[(String, Value)], ors_conf: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let mut check = |ok: bool, what: &str| {
        if !ok {
            problems.push(what.to_owned());
        }
    };
    for (file, doc) in docs {
        check(
            doc["apiVersion"].is_string() && doc["kind"].is_string(),
            &format!("{file}: a document without apiVersion or kind"),
        );
        check(
            doc["kind"] == "Namespace" || doc["metadata"]["namespace"] == "ors",
            &format!(
                "{file}: {} is not in namespace ors (the router's DNS names say ors)",
                doc["metadata"]["name"]
            ),
        );
    }
    match find(docs, "StatefulSet", "ors") {
        Ok(sts) => {
            let spec = &sts["spec"];
            let pod = &spec["template"]["spec"];
            let c = &pod["containers"][0];
            check(spec["serviceName"] == "ors-pods", "the StatefulSet's serviceName is not ors-pods (the router names pods ors-N.ors-pods)");
            check(
                spec["selector"]["matchLabels"] == spec["template"]["metadata"]["labels"],
                "the StatefulSet's selector does not match its pods' labels",
            );
            check(
                c["readinessProbe"]["httpGet"]["path"] == "/ready",
                "readiness is not on /ready",
            );
            check(
                c["livenessProbe"]["httpGet"]["path"] == "/health",
                "liveness is not on /health",
            );
            let env = |name: &str| {
                c["env"]
                    .as_array()
                    .and_then(|vars| vars.iter().find(|v| v["name"] == name))
                    .cloned()
            };
            check(
                env("ORS_SESSION_KEY")
                    .is_some_and(|v| v["valueFrom"]["secretKeyRef"]["name"] == "ors-session-key"),
                "ORS_SESSION_KEY does not come from the ors-session-key Secret",
            );
            check(
                env("ORS_REPLICA_ID").is_none(),
                "ORS_REPLICA_ID is set: every pod would get the same number (the host name ors-N gives it)",
            );
            check(
                env("ORS_HOST").is_some_and(|v| v["value"] == "0.0.0.0"),
                "ORS_HOST is not 0.0.0.0",
            );
            let drain = env("ORS_DRAIN_SECS")
                .and_then(|v| v["value"].as_str().and_then(|s| s.parse::<u64>().ok()))
                .unwrap_or(30);
            // The drain, then the shutdown grace (10 s) for calls still running.
            check(
                pod["terminationGracePeriodSeconds"].as_u64().is_some_and(|t| t >= drain + 10),
                "terminationGracePeriodSeconds is shorter than ORS_DRAIN_SECS + 10 s of shutdown grace",
            );
            check(
                pod["securityContext"]["runAsNonRoot"] == true,
                "the pods may run as root",
            );
            // What the sandboxes of environments that run code need (docs/programs.md, "Tools
            // that run programs"); each missing one is named by the server at start-up too.
            check(
                pod["hostUsers"] == false,
                "the pods share the host's user namespace (hostUsers: false is what procMount: \
                 Unmasked needs)",
            );
            check(
                pod["securityContext"]["seccompProfile"]["type"] == "Unconfined",
                "the pods' seccomp profile is not Unconfined: the default one refuses the \
                 sandboxes' user namespaces",
            );
            check(
                pod["securityContext"]["appArmorProfile"]["type"] == "Unconfined",
                "the pods' AppArmor profile is not Unconfined: the default one refuses the \
                 sandboxes' mounts",
            );
            check(
                c["securityContext"]["procMount"] == "Unmasked",
                "the container's /proc is masked: a sandbox cannot mount its own (procMount: \
                 Unmasked)",
            );
            check(
                c["securityContext"]["allowPrivilegeEscalation"] == false
                    && c["securityContext"]["capabilities"]["drop"]
                        .as_array()
                        .is_some_and(|d| d.contains(&Value::from("ALL"))),
                "the container may gain privileges or keeps capabilities (the sandboxes need \
                 neither)",
            );
        }
        Err(e) => check(false, &e),
    }
    match find(docs, "Service", "ors-pods") {
        Ok(s) => {
            check(s["spec"]["clusterIP"] == "None", "ors-pods is not headless");
            check(
                s["spec"]["publishNotReadyAddresses"] == true,
                "ors-pods hides unready pods: a draining replica's sessions would be unreachable",
            );
        }
        Err(e) => check(false, &e),
    }
    match find(docs, "Service", "ors-ready") {
        Ok(s) => {
            check(
                s["spec"]["clusterIP"] == "None",
                "ors-ready is not headless",
            );
            check(
                s["spec"]["publishNotReadyAddresses"] != true,
                "ors-ready lists unready pods: new sessions would reach draining replicas",
            );
        }
        Err(e) => check(false, &e),
    }
    match find(docs, "HorizontalPodAutoscaler", "ors") {
        Ok(h) => {
            check(
                h["spec"]["scaleTargetRef"]["kind"] == "StatefulSet",
                "the HPA does not scale the StatefulSet",
            );
            check(
                h["spec"]["metrics"][0]["pods"]["metric"]["name"] == "ors_sessions_active",
                "the HPA does not scale on ors_sessions_active",
            );
        }
        Err(e) => check(false, &e),
    }
    check(
        find(docs, "Secret", "ors-session-key").is_ok(),
        "no ors-session-key Secret",
    );
    check(
        find(docs, "Deployment", "ors-router").is_ok(),
        "no ors-router Deployment",
    );
    match router_conf(docs) {
        Ok(router) => match (
            crate::scale::nginx::split_replicas(&router),
            crate::scale::nginx::split_replicas(ors_conf),
        ) {
            (Ok((rb, rs, ra)), Ok((sb, _, sa))) => {
                check(
                    rb == sb && ra == sa,
                    "the router's ors.conf differs from deploy/nginx/ors.conf outside the replica section",
                );
                check(
                    rs.contains("ors-$replica.ors-pods.ors.svc.cluster.local:8080"),
                    "the router does not route ids to ors-N.ors-pods",
                );
                check(
                    rs.contains("ors-ready.ors.svc.cluster.local:8080"),
                    "the router does not send new sessions to ors-ready",
                );
                for problem in crate::scale::nginx::session_routing_problems(&router) {
                    check(false, &format!("the router's ors.conf: {problem}"));
                }
            }
            (Err(e), _) | (_, Err(e)) => check(false, &e),
        },
        Err(e) => check(false, &e),
    }
    problems
}
