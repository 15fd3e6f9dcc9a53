//! The client libraries `tests/clients.rs` drives, installed on first use into `$LOUPE_TOOLS`
//! (default `target/tools`):
//!
//! - npm: [`NPM_PACKAGES`] (ethers v6, viem, foundry's cast 1.7.1, the same release as the anvil
//!   of `anvil.rs`) into `$LOUPE_TOOLS/clients/node_modules`, a prefix of its own: `npm install`
//!   prunes packages it was not asked for, so sharing `anvil.rs`'s prefix would remove anvil;
//! - PyPI: [`PY_PACKAGES`] (web3.py, and prometheus_client's text-format parser for
//!   `tests/metrics.rs`) into a virtual environment, `$LOUPE_TOOLS/py`.
//!
//! Each install runs under a lock file (one at a time across the test processes nextest
//! starts) and ends by writing a marker naming what it installed; a marker that names other
//! versions makes the next run install again. `node`, `npm` and `python3` (with `venv`) must be
//! on the PATH; under `CI=true`, running as root with `apt-get`, a missing one is installed from
//! Debian ([`APT_PACKAGES`]). Without them, or when an install fails: under `CI=true` the test
//! fails, otherwise it prints a note and returns early.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The npm packages, pinned (one `npm install` installs them all).
pub const NPM_PACKAGES: [&str; 3] =
    ["ethers@6.17.0", "viem@2.57.20", "@foundry-rs/cast-linux-amd64@1.7.1"];

/// The PyPI requirements, pinned (one `pip install`).
pub const PY_PACKAGES: [&str; 2] = ["web3==8.0.0", "prometheus-client==0.21.1"];

/// Debian packages that provide node, npm and a Python with `venv` (bookworm: nodejs 18,
/// npm 9, python3.11-venv).
pub const APT_PACKAGES: [&str; 4] = ["nodejs", "npm", "python3", "python3-venv"];

/// Whether the run is CI's (a missing tool fails the test rather than skipping it).
pub fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v.eq_ignore_ascii_case("true") || v == "1")
}

/// Fails the test under CI; otherwise prints a note (the caller returns early).
pub fn missing<T>(msg: String) -> Option<T> {
    if ci() {
        panic!("{msg}");
    }
    eprintln!("note: skipping test: {msg}");
    None
}

/// `$LOUPE_TOOLS`, or `target/tools` of this repository.
pub fn tools_dir() -> PathBuf {
    match std::env::var_os("LOUPE_TOOLS") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => Path::new(env!("CARGO_MANIFEST_DIR")).join("target/tools"),
    }
}

/// Holds an install lock file; removes it when dropped.
struct Lock(PathBuf);

impl Drop for Lock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Takes `path` as a lock (created exclusively), waiting up to 10 minutes for another process
/// to finish (an install can take minutes on a slow network). `done` returning true while
/// waiting ends the wait early with `Ok(None)`. A lock older than 20 minutes is left by a
/// killed process and is taken over.
fn lock(path: &Path, done: impl Fn() -> bool) -> Result<Option<Lock>, String> {
    let started = Instant::now();
    loop {
        match std::fs::OpenOptions::new().write(true).create_new(true).open(path) {
            Ok(_) => return Ok(Some(Lock(path.to_path_buf()))),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                if done() {
                    return Ok(None);
                }
                let stale = std::fs::metadata(path)
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|t| t.elapsed().ok())
                    .is_some_and(|age| age > Duration::from_secs(20 * 60));
                if stale {
                    let _ = std::fs::remove_file(path);
                    continue;
                }
                if started.elapsed() > Duration::from_secs(600) {
                    return Err(format!("timed out waiting for install lock {}", path.display()));
                }
                std::thread::sleep(Duration::from_millis(250));
            }
            Err(e) => return Err(format!("install lock {}: {e}", path.display())),
        }
    }
}

/// Whether `program --version` runs.
fn runs(program: &str) -> bool {
    Command::new(program).arg("--version").output().is_ok_and(|o| o.status.success())
}

/// Under CI, as root, with apt-get: installs [`APT_PACKAGES`] (once per machine, under a
/// lock). Returns what went wrong otherwise.
fn apt_install(why: &str) -> Result<(), String> {
    let is_root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    if !ci() || !is_root || !runs("apt-get") {
        return Err(format!(
            "{why}; install them with `apt-get install -y {}` (done automatically only under \
             CI=true as root)",
            APT_PACKAGES.join(" ")
        ));
    }
    let tools = tools_dir();
    std::fs::create_dir_all(&tools).map_err(|e| format!("{}: {e}", tools.display()))?;
    let done = tools.join(".apt.installed");
    let _lock = lock(&tools.join(".apt.lock"), || done.is_file())?;
    if done.is_file() {
        return Ok(());
    }
    eprintln!("note: {why}: apt-get install -y {}", APT_PACKAGES.join(" "));
    let apt = |args: &[&str]| {
        Command::new("apt-get")
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .output()
            .map_err(|e| format!("apt-get: {e}"))
            .and_then(|o| {
                if o.status.success() {
                    Ok(())
                } else {
                    Err(format!(
                        "apt-get {}: {}",
                        args.join(" "),
                        String::from_utf8_lossy(&o.stderr)
                    ))
                }
            })
    };
    apt(&["update"])?;
    let mut install = vec!["install", "-y", "--no-install-recommends"];
    install.extend(APT_PACKAGES);
    apt(&install)?;
    std::fs::write(&done, APT_PACKAGES.join(" ")).map_err(|e| e.to_string())?;
    Ok(())
}

/// Makes sure `programs` run, installing the Debian packages when allowed.
fn ensure_programs(programs: &[&str]) -> Result<(), String> {
    let absent: Vec<&str> = programs.iter().copied().filter(|p| !runs(p)).collect();
    if absent.is_empty() {
        return Ok(());
    }
    apt_install(&format!("{} not found", absent.join(", ")))?;
    match programs.iter().find(|p| !runs(p)) {
        Some(p) => Err(format!("{p} still not found after apt-get install")),
        None => Ok(()),
    }
}

/// The npm packages' install: the `node_modules` directory holding [`NPM_PACKAGES`].
#[derive(Debug, Clone)]
pub struct NodeTools {
    /// `$LOUPE_TOOLS/clients/node_modules`.
    pub node_modules: PathBuf,
}

impl NodeTools {
    /// foundry's `cast`.
    pub fn cast(&self) -> PathBuf {
        self.node_modules.join("@foundry-rs/cast-linux-amd64/bin/cast")
    }
}

/// [`NPM_PACKAGES`], installed on first use; `None` (outside CI) when they cannot be.
pub fn node_tools() -> Option<NodeTools> {
    match install_npm() {
        Ok(t) => Some(t),
        Err(e) => missing(e),
    }
}

fn install_npm() -> Result<NodeTools, String> {
    let prefix = tools_dir().join("clients");
    let tools = NodeTools { node_modules: prefix.join("node_modules") };
    let marker = prefix.join(".installed");
    let want = NPM_PACKAGES.join(" ");
    let done = || std::fs::read_to_string(&marker).is_ok_and(|m| m == want);
    if done() {
        return Ok(tools);
    }
    ensure_programs(&["node", "npm"])?;
    std::fs::create_dir_all(&prefix).map_err(|e| format!("{}: {e}", prefix.display()))?;
    let _lock = lock(&tools_dir().join(".clients-npm.lock"), done)?;
    if done() {
        return Ok(tools);
    }
    let _ = std::fs::remove_file(&marker);
    let out = Command::new("npm")
        .args(["install", "--no-save", "--no-package-lock", "--no-audit", "--no-fund"])
        .args(["--loglevel", "error", "--prefix"])
        .arg(&prefix)
        .args(NPM_PACKAGES)
        .output()
        .map_err(|e| format!("npm (to install {want}): {e}"))?;
    if !out.status.success() {
        return Err(format!("npm install {want} failed: {}", String::from_utf8_lossy(&out.stderr)));
    }
    for p in ["ethers/package.json", "viem/package.json"] {
        if !tools.node_modules.join(p).is_file() {
            return Err(format!("npm install {want}: {p} missing afterwards"));
        }
    }
    if !tools.cast().is_file() {
        return Err(format!("npm install {want}: {} missing afterwards", tools.cast().display()));
    }
    std::fs::write(&marker, &want).map_err(|e| e.to_string())?;
    Ok(tools)
}

/// The Python of a virtual environment with [`PY_PACKAGES`], made on first use; `None`
/// (outside CI) when it cannot be.
pub fn web3_python() -> Option<PathBuf> {
    match install_web3() {
        Ok(p) => Some(p),
        Err(e) => missing(e),
    }
}

fn install_web3() -> Result<PathBuf, String> {
    let venv = tools_dir().join("py");
    let python = venv.join("bin/python");
    let marker = venv.join(".installed");
    let want = PY_PACKAGES.join(" ");
    let done = || std::fs::read_to_string(&marker).is_ok_and(|m| m == want);
    if done() {
        return Ok(python);
    }
    ensure_programs(&["python3"])?;
    std::fs::create_dir_all(tools_dir()).map_err(|e| e.to_string())?;
    let _lock = lock(&tools_dir().join(".clients-py.lock"), done)?;
    if done() {
        return Ok(python);
    }
    let _ = std::fs::remove_file(&marker);
    let make_venv = || {
        Command::new("python3")
            .args(["-m", "venv", "--clear"])
            .arg(&venv)
            .output()
            .map_err(|e| format!("python3 -m venv: {e}"))
    };
    let mut out = make_venv()?;
    if !out.status.success() {
        // Debian's python3 has no ensurepip without python3-venv.
        apt_install(&format!(
            "python3 -m venv {} failed ({})",
            venv.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ))?;
        out = make_venv()?;
        if !out.status.success() {
            return Err(format!(
                "python3 -m venv {}: {}",
                venv.display(),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    let out = Command::new(&python)
        .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check"])
        .args(PY_PACKAGES)
        .output()
        .map_err(|e| format!("pip (to install {want}): {e}"))?;
    if !out.status.success() {
        return Err(format!("pip install {want} failed: {}", String::from_utf8_lossy(&out.stderr)));
    }
    std::fs::write(&marker, &want).map_err(|e| e.to_string())?;
    Ok(python)
}

/// A scratch directory to run a client script from: the script copied in, with a
/// `node_modules` link to the installed packages (Node resolves ES module imports from the
/// script's own directory, never from `NODE_PATH`).
pub fn node_script_dir(tools: &NodeTools, scripts: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients");
    for s in scripts {
        std::fs::copy(src.join(s), dir.path().join(s))
            .unwrap_or_else(|e| panic!("copy {}: {e}", src.join(s).display()));
    }
    std::os::unix::fs::symlink(&tools.node_modules, dir.path().join("node_modules")).unwrap();
    dir
}
