//! `--config FILE`: a TOML file of flag values for the subcommand being run. Keys are the flags'
//! long names (`"http.port" = 8546`, or `[http]` then `port = 8546`); a flag given on the
//! command line wins over the file. An unknown key, or a value the flag refuses, is an error
//! that names it.
//!
//! The file becomes command-line arguments placed before the user's, parsed by clap with
//! `args_override_self`, so a value from the file goes through exactly the same parsing and
//! validation as the flag would (hand-written here: clap has no config-file layer).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::{CommandFactory, FromArgMatches, Parser};

use super::Cli;

/// Why a configuration file was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not valid TOML.
    #[error("config file {path} is not valid TOML: {message}")]
    Syntax {
        /// The file.
        path: PathBuf,
        /// The parser's message.
        message: String,
    },
    /// A key names no flag of the subcommand.
    #[error("unknown key `{key}` in config file {path}: not a flag of `loupe {command}`")]
    UnknownKey {
        /// The key, dotted.
        key: String,
        /// The file.
        path: PathBuf,
        /// The subcommand.
        command: String,
    },
    /// A value has a TOML type no flag takes (a date, a table inside an array).
    #[error("key `{key}` in config file {path}: {what} is not a flag value")]
    BadValue {
        /// The key.
        key: String,
        /// The file.
        path: PathBuf,
        /// What was found.
        what: &'static str,
    },
    /// The command line, with the file's values, does not parse (the message names the flag).
    #[error("{0}")]
    Clap(#[from] clap::Error),
}

impl Cli {
    /// Parses the process's command line, with `--config` applied; exits on `--help`,
    /// `--version` and command-line errors as clap does.
    pub fn parse_with_config() -> Result<Self, ConfigError> {
        match Self::parse_with_config_from(std::env::args_os()) {
            Err(ConfigError::Clap(e)) => e.exit(),
            other => other,
        }
    }

    /// [`Self::parse_with_config`] over `args` (the program name first).
    pub fn parse_with_config_from(
        args: impl IntoIterator<Item = impl Into<OsString>>,
    ) -> Result<Self, ConfigError> {
        let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
        // Found by hand: a first parse by clap would refuse a required flag the file sets.
        let Some(path) = config_path(&args) else { return Ok(Self::try_parse_from(&args)?) };
        let root = Self::command();
        let names: Vec<&str> = root.get_subcommands().map(|c| c.get_name()).collect();
        let found = args.iter().enumerate().skip(1).find_map(|(i, a)| {
            let a = a.to_str()?;
            names.iter().find(|n| **n == a).map(|n| (n.to_string(), i + 1))
        });
        let explicit = found.is_some();
        let (command, position) = found.unwrap_or_else(|| ("dev".to_string(), 1));
        let command = command.as_str();
        let mut file_args = config_args(&path, command)?;
        let mut merged: Vec<OsString> = args[..position].to_vec();
        if !explicit {
            merged.push("dev".into());
        }
        merged.append(&mut file_args);
        merged.extend_from_slice(&args[position..]);
        let cmd = Self::command()
            .args_override_self(true)
            .mut_subcommands(|s| s.args_override_self(true));
        let matches = cmd.try_get_matches_from(merged)?;
        Ok(Self::from_arg_matches(&matches)?)
    }
}

/// The value of `--config FILE` or `--config=FILE`.
fn config_path(args: &[OsString]) -> Option<PathBuf> {
    let mut it = args.iter().skip(1);
    while let Some(a) = it.next() {
        let a = a.to_str()?;
        if a == "--config" {
            return it.next().map(PathBuf::from);
        }
        if let Some(p) = a.strip_prefix("--config=") {
            return Some(PathBuf::from(p));
        }
    }
    None
}

/// The file's keys as `--flag value` arguments for `loupe <command>`.
fn config_args(path: &Path, command: &str) -> Result<Vec<OsString>, ConfigError> {
    let text = std::fs::read_to_string(path)
        .map_err(|source| ConfigError::Read { path: path.to_path_buf(), source })?;
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| ConfigError::Syntax {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    let root = Cli::command();
    // A flag's long name and its visible aliases (`genesis` for `chain`).
    let names = |a: &clap::Arg| -> Vec<String> {
        a.get_long_and_visible_aliases()
            .map(|v| v.into_iter().map(str::to_string).collect())
            .unwrap_or_default()
    };
    let mut flags: Vec<String> = root.get_arguments().flat_map(names).collect();
    if let Some(sub) = root.find_subcommand(command) {
        flags.extend(sub.get_arguments().flat_map(names));
    }
    flags.retain(|f| f != "config" && f != "help" && f != "version");
    let mut out = Vec::new();
    let mut entries = Vec::new();
    flatten("", &toml::Value::Table(table), &mut entries);
    for (key, value) in entries {
        if !flags.contains(&key) {
            return Err(ConfigError::UnknownKey {
                key,
                path: path.to_path_buf(),
                command: command.into(),
            });
        }
        let bad = |what| ConfigError::BadValue { key: key.clone(), path: path.to_path_buf(), what };
        let text = match value {
            toml::Value::Boolean(true) => {
                out.push(format!("--{key}").into());
                continue;
            }
            toml::Value::Boolean(false) => continue,
            // An array is one comma-separated value (`--http.api eth,trace`): repeating the
            // flag would keep only its last occurrence.
            toml::Value::Array(items) => items
                .into_iter()
                .map(|item| {
                    scalar(item).map_err(|_| bad("an array of other than strings or numbers"))
                })
                .collect::<Result<Vec<_>, _>>()?
                .join(","),
            other => scalar(other).map_err(bad)?,
        };
        out.push(format!("--{key}").into());
        out.push(text.into());
    }
    Ok(out)
}

/// A string or number as flag text; otherwise what it is, for the error.
fn scalar(value: toml::Value) -> Result<String, &'static str> {
    match value {
        toml::Value::String(s) => Ok(s),
        toml::Value::Integer(i) => Ok(i.to_string()),
        toml::Value::Float(f) => Ok(f.to_string()),
        toml::Value::Boolean(_) => Err("a boolean"),
        toml::Value::Datetime(_) => Err("a date"),
        toml::Value::Array(_) => Err("an array"),
        toml::Value::Table(_) => Err("a table"),
    }
}

/// Dotted keys and their values: `[http]` with `port = 1` gives `http.port`.
fn flatten(prefix: &str, value: &toml::Value, out: &mut Vec<(String, toml::Value)>) {
    match value {
        toml::Value::Table(t) => {
            for (k, v) in t {
                let key = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                flatten(&key, v, out);
            }
        }
        other => out.push((prefix.to_string(), other.clone())),
    }
}
