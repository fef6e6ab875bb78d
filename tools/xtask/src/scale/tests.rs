//! The deploy files and the nginx rendering, checked without a cluster.

use super::deploy::{check_manifests, dockerfile, manifests};
use super::episodes::replica_of;
use super::nginx::{render, session_routing_problems, split_replicas, ORS_CONF};

fn root() -> std::path::PathBuf {
    crate::workspace::workspace_root()
}

fn ors_conf() -> String {
    std::fs::read_to_string(root().join(ORS_CONF)).expect("deploy/nginx/ors.conf")
}

#[test]
fn the_kubernetes_manifests_hold_what_the_deployment_relies_on() {
    let docs = manifests(&root()).expect("the manifests parse");
    let problems = check_manifests(&docs, &ors_conf());
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn the_manifest_checks_catch_a_broken_manifest() {
    let mut docs = manifests(&root()).expect("the manifests parse");
    for (_, doc) in &mut docs {
        if doc["metadata"]["name"] == "ors-pods" {
            doc["spec"]["publishNotReadyAddresses"] = false.into();
        }
        if doc["kind"] == "StatefulSet" {
            doc["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = 5.into();
        }
    }
    let problems = check_manifests(&docs, &ors_conf());
    assert_eq!(problems.len(), 2, "{problems:#?}");
}

#[test]
fn the_manifest_checks_name_each_setting_the_sandboxes_need() {
    let shipped = manifests(&root()).expect("the manifests parse");
    type Break = fn(&mut serde_json::Value);
    let breaks: [(&str, Break); 5] = [
        ("hostUsers", |pod| pod["hostUsers"] = true.into()),
        ("seccomp", |pod| {
            pod["securityContext"]["seccompProfile"]["type"] = "RuntimeDefault".into()
        }),
        ("AppArmor", |pod| {
            pod["securityContext"]["appArmorProfile"]["type"] = "RuntimeDefault".into()
        }),
        ("procMount", |pod| {
            pod["containers"][0]["securityContext"]["procMount"] = "Default".into()
        }),
        ("capabilities", |pod| {
            pod["containers"][0]["securityContext"]["allowPrivilegeEscalation"] = true.into()
        }),
    ];
    for (name, break_it) in breaks {
        let mut docs = shipped.clone();
        for (_, doc) in &mut docs {
            if doc["kind"] == "StatefulSet" {
                break_it(&mut doc["spec"]["template"]["spec"]);
            }
        }
        let problems = check_manifests(&docs, &ors_conf());
        assert_eq!(problems.len(), 1, "{name}: {problems:#?}");
        assert!(problems[0].contains(name), "{name}: {problems:#?}");
    }
}

#[test]
fn a_session_is_only_ever_answered_by_its_own_replica() {
    let problems = session_routing_problems(&ors_conf());
    assert!(problems.is_empty(), "{problems:#?}");
    // The router's copy is checked by check_manifests (the test above).
}

#[test]
fn the_session_routing_check_catches_a_retry_a_404_or_a_bypass() {
    let shipped = ors_conf();
    let broken = [
        // nginx's default: with more than one server behind it, another replica is asked.
        (
            "proxy_next_upstream off;",
            "proxy_next_upstream error timeout;",
        ),
        // The old answer: the replica is unreachable, yet the client hears "no such session".
        (
            "return 502 '{\"detail\":\"the replica of session",
            "return 404 '{\"code\":\"session_not_found\",\"detail\":\"the replica of session",
        ),
        // Session requests handled like discovery.
        ("return 418;", "set $x 1;"),
    ];
    for (from, to) in broken {
        assert!(shipped.contains(from), "ors.conf has no {from:?}");
        let problems = session_routing_problems(&shipped.replacen(from, to, 1));
        assert_eq!(problems.len(), 1, "{from:?} -> {to:?}: {problems:#?}");
    }
    // A comment saying the right thing does not count.
    let commented = shipped.replacen("proxy_next_upstream off;", "# proxy_next_upstream off;", 1);
    assert_eq!(session_routing_problems(&commented).len(), 1);
}

#[test]
fn rendering_lists_the_replicas_and_keeps_the_rest_of_the_file() {
    let template = ors_conf();
    let conf = render(&template, &[(0, 4000), (7, 4007)], 9999).unwrap();
    let (before, section, after) = split_replicas(&conf).unwrap();
    let (t_before, _, t_after) = split_replicas(&template).unwrap();
    assert_eq!(before, t_before);
    assert_eq!(
        after,
        t_after.replace("listen 8000;", "listen 127.0.0.1:9999;")
    );
    for line in [
        "upstream ors_7 { server 127.0.0.1:4007 max_fails=0; keepalive 16; keepalive_timeout 20s; }",
        "    server 127.0.0.1:4000 max_fails=1 fail_timeout=5s;",
        "    \"~^00000007-\" ors_7;",
        "    \"~^[0-9]{8}-\" gone;",
    ] {
        assert!(section.contains(line), "no {line:?} in\n{section}");
    }
}

#[test]
fn the_image_runs_a_built_example_as_a_non_root_user_on_every_interface() {
    let d = dockerfile(&root()).expect("the Dockerfile reads");
    assert!(d.user.parse::<u32>().is_ok_and(|uid| uid != 0), "{d:?}");
    assert!(
        d.env.contains(&("ORS_HOST".into(), "0.0.0.0".into())),
        "{d:?}"
    );
    assert!(d.apt_packages.contains(&"bubblewrap".to_owned()), "{d:?}");
    let check = d.healthcheck.expect("a HEALTHCHECK");
    assert!(check.join(" ").contains("/health"), "{check:?}");
    assert!(
        root()
            .join(format!("examples/src/bin/{}.rs", d.bin))
            .is_file(),
        "BIN={} is not an example binary",
        d.bin
    );
}

#[test]
fn replica_numbers_are_read_from_decimal_first_groups_only() {
    assert_eq!(replica_of("00000007-0000-4000-8000-000000000000"), Some(7));
    assert_eq!(replica_of("00000012-0000-4000-8000-000000000000"), Some(12));
    assert_eq!(replica_of("0000000a-0000-4000-8000-000000000000"), None);
}
