//! The `/etc` a sandbox sees: the host's files that programs read (the dynamic linker's cache,
//! certificates, name-service and locale settings, interpreters' own), copied once into a
//! directory of their own that each sandbox binds read-only in one mount (thirty binds made
//! the start of a sandbox a third slower). Users, groups, `hosts` and `hostname` are written
//! for the sandbox, so the host's user and host names are not there to read, nor is anything
//! the sandbox's host user could not read on the host (`/etc/ssl/private`, `/etc/shadow`).
//!
//! The copy is named by a hash of what it copies (paths, sizes, modification times), so a
//! server restarted after `/etc` changed makes a new one and one started before reuses it; a
//! directory of that name is used only if it is this user's and nobody else can write it.

use std::hash::{Hash, Hasher};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::SandboxError;

/// What of `/etc` is copied (if the host has it).
const ETC: &[&str] = &[
    "alternatives",
    "bash.bashrc",
    "ca-certificates",
    "ca-certificates.conf",
    "crypto-policies",
    "debian_version",
    "gai.conf",
    "host.conf",
    "inputrc",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "locale.alias",
    "locale.conf",
    "localtime",
    "magic",
    "magic.mime",
    "mime.types",
    "nsswitch.conf",
    "os-release",
    "perl",
    "pki",
    "profile",
    "protocols",
    "resolv.conf",
    "services",
    "ssl",
    "terminfo",
    "timezone",
];

/// Written for the sandbox rather than copied.
const WRITTEN: &[(&str, &str)] = &[
    (
        "passwd",
        "root:x:0:0:root:/root:/usr/sbin/nologin\n\
         sandbox:x:1000:1000:sandbox:/workspace:/bin/sh\n\
         nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
    ),
    ("group", "root:x:0:\nsandbox:x:1000:\nnogroup:x:65534:\n"),
    (
        "hosts",
        "127.0.0.1\tlocalhost\n127.0.1.1\tsandbox\n::1\tlocalhost ip6-localhost ip6-loopback\n",
    ),
    ("hostname", "sandbox\n"),
];

/// Bumped when what is copied or written changes, so older copies are not reused.
const VERSION: u32 = 1;

/// The prepared `/etc` of this server's sandboxes, made on first use.
pub(crate) fn prepared() -> Result<&'static Path, SandboxError> {
    static DIR: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    DIR.get_or_init(|| prepare(Path::new("/etc"), &std::env::temp_dir()))
        .as_ref()
        .map(PathBuf::as_path)
        .map_err(|e| SandboxError::Start(format!("preparing the sandbox's /etc: {e}")))
}

/// The entries of `etc` to copy: [`ETC`] and the interpreters' own (`python3`, `python3.11`).
fn entries(etc: &Path) -> Vec<String> {
    // An unreadable directory, or entry, adds nothing.
    let dir = std::fs::read_dir(etc).into_iter().flatten().flatten();
    let mut extra: Vec<String> = dir
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("python"))
        .collect();
    extra.sort();
    ETC.iter().map(|s| (*s).to_owned()).chain(extra).collect()
}

/// Every path under `etc` that would be copied, with what identifies its version.
fn fingerprint(etc: &Path, names: &[String]) -> u64 {
    fn walk(path: &Path, h: &mut std::collections::hash_map::DefaultHasher) {
        let Ok(meta) = std::fs::symlink_metadata(path) else {
            return;
        };
        path.hash(h);
        (meta.len(), meta.mtime(), meta.mtime_nsec(), meta.mode()).hash(h);
        if meta.is_dir() {
            // An unreadable directory, or entry, adds nothing.
            let dir = std::fs::read_dir(path).into_iter().flatten().flatten();
            let mut kids: Vec<PathBuf> = dir.map(|e| e.path()).collect();
            kids.sort();
            kids.iter().for_each(|k| walk(k, h));
        }
    }
    let mut h = std::collections::hash_map::DefaultHasher::new();
    VERSION.hash(&mut h);
    for n in names {
        walk(&etc.join(n), &mut h);
    }
    h.finish()
}

/// Copy `from` to `to`: links as links, files and directories only if others may read them.
fn copy(from: &Path, to: &Path) -> std::io::Result<()> {
    let meta = std::fs::symlink_metadata(from)?;
    if meta.file_type().is_symlink() {
        return std::os::unix::fs::symlink(std::fs::read_link(from)?, to);
    }
    // Only what others (the sandbox's host user) may read is copied; a directory must be
    // searchable too.
    let need = if meta.is_dir() { 0o005 } else { 0o004 };
    if meta.mode() & need != need {
        return Ok(());
    }
    if meta.is_dir() {
        std::fs::create_dir(to)?;
        std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o755))?;
        for entry in std::fs::read_dir(from)? {
            let entry = entry?;
            copy(&entry.path(), &to.join(entry.file_name()))?;
        }
        Ok(())
    } else if meta.is_file() {
        std::fs::copy(from, to)?;
        std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o644))
    } else {
        Ok(())
    }
}

/// A finished copy: marked complete, in a directory this process's user owns and only it can
/// write.
fn ready(dir: &Path) -> bool {
    let (Ok(meta), Ok(me)) = (
        std::fs::symlink_metadata(dir),
        std::fs::metadata("/proc/self"),
    ) else {
        return false;
    };
    let trusted = meta.is_dir() && meta.uid() == me.uid() && meta.mode() & 0o022 == 0;
    trusted && dir.join(".complete").exists()
}

/// Make (or find) the copy of `etc` under `parent`.
fn prepare(etc: &Path, parent: &Path) -> Result<PathBuf, String> {
    let names = entries(etc);
    let uid = std::fs::metadata("/proc/self").map_or(0, |m| m.uid());
    let name = format!("ors-sandbox-etc-{uid}-{:016x}", fingerprint(etc, &names));
    let done = parent.join(&name);
    if ready(&done) {
        return Ok(done);
    }
    let building = parent.join(format!("{name}.{}.tmp", std::process::id()));
    let _ = std::fs::remove_dir_all(&building);
    let build = || -> std::io::Result<()> {
        std::fs::create_dir(&building)?;
        std::fs::set_permissions(&building, std::fs::Permissions::from_mode(0o755))?;
        // What the host has of them.
        let present = names
            .iter()
            .filter(|n| etc.join(n).symlink_metadata().is_ok());
        for n in present {
            copy(&etc.join(n), &building.join(n))?;
        }
        for (n, text) in WRITTEN {
            std::fs::write(building.join(n), text)?;
            std::fs::set_permissions(building.join(n), std::fs::Permissions::from_mode(0o644))?;
        }
        std::fs::write(building.join(".complete"), "")
    };
    let made = build().map_err(|e| e.to_string()).and_then(|()| {
        match std::fs::rename(&building, &done) {
            Ok(()) => Ok(()),
            // Another server made it first.
            Err(_) if ready(&done) => Ok(()),
            Err(e) => Err(format!("{}: {e}", done.display())),
        }
    });
    // Whatever is left of the copy (nothing once it was renamed).
    let _ = std::fs::remove_dir_all(&building);
    made.map(|()| done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_others_may_read_is_copied_and_users_are_the_sandboxs() {
        let root = std::env::temp_dir().join(format!("ors-etc-test-{}", std::process::id()));
        let etc = root.join("etc");
        std::fs::create_dir_all(etc.join("ssl/private")).unwrap();
        std::fs::write(etc.join("ssl/openssl.cnf"), "cnf").unwrap();
        std::fs::write(etc.join("ssl/private/key.pem"), "secret").unwrap();
        std::fs::set_permissions(etc.join("ssl/private"), PermissionsExt::from_mode(0o710))
            .unwrap();
        std::fs::write(
            etc.join("passwd"),
            "alice:x:1000:1000::/home/alice:/bin/sh\n",
        )
        .unwrap();
        std::fs::write(etc.join("hostname"), "prod-7\n").unwrap();
        std::os::unix::fs::symlink("/usr/lib/os-release", etc.join("os-release")).unwrap();
        let made = prepare(&etc, &root).unwrap();
        assert_eq!(
            std::fs::read_to_string(made.join("ssl/openssl.cnf")).unwrap(),
            "cnf"
        );
        assert!(!made.join("ssl/private").exists());
        assert!(!std::fs::read_to_string(made.join("passwd"))
            .unwrap()
            .contains("alice"));
        assert_eq!(
            std::fs::read_to_string(made.join("hostname")).unwrap(),
            "sandbox\n"
        );
        assert_eq!(
            std::fs::read_link(made.join("os-release")).unwrap(),
            Path::new("/usr/lib/os-release")
        );
        // Made again unchanged, it is the same copy; changed, a new one.
        assert_eq!(prepare(&etc, &root).unwrap(), made);
        std::fs::write(etc.join("ssl/openssl.cnf"), "changed").unwrap();
        assert_ne!(prepare(&etc, &root).unwrap(), made);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
