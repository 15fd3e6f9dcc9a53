//! Genesis dialects: a geth or a Besu `genesis.json` read into one alloy [`Genesis`], with what
//! was left out and which reading of the fork schedule was taken ([`GenesisReading`]).
//!
//! - **Names.** Both clients match field names case-insensitively (Go's JSON decoder; Besu
//!   lowercases every key before it reads one), so `chainID`, `mixhash` or `muirglacierblock`
//!   are read as `chainId`, `mixHash` and `muirGlacierBlock`, and Besu's `constantinopleFixBlock`
//!   as `petersburgBlock`. One field written twice with two values is refused.
//! - **Unknown fields** (Besu's `comment` and `privateKey` in accounts, its `contractSizeLimit`
//!   or `qbft` in `config`, anything loupe does not read) are dropped and named in one warning,
//!   as geth does, rather than refused.
//! - **Fixed difficulty.** Besu's `ethash.fixeddifficulty` is kept: every proof-of-work block of
//!   the chain must carry it ([`GenesisReading::fixed_difficulty`]).
//! - **Milestones.** geth activates each fork where the file names it, and refuses a file that
//!   leaves out a fork before a later one it names (only the DAO fork, the glaciers, the
//!   netsplit block and the forks after Shanghai may be left out). Besu's milestones are
//!   cumulative: a named fork brings every earlier one with it, so `istanbulBlock: 0` alone is
//!   every fork through Istanbul from block 0. A file is read the Besu way when it shows itself
//!   a Besu file ([`Dialect::Besu`] says how); otherwise the geth way.

use std::collections::BTreeSet;

use alloy_genesis::Genesis;
use alloy_primitives::U256;
use serde_json::{Map, Value};

use super::ChainError;
use super::milestones::{besu_milestones, geth_refuses};

/// Top-level fields loupe reads (alloy's names).
const TOP: &[&str] = &[
    "config",
    "nonce",
    "timestamp",
    "extraData",
    "gasLimit",
    "difficulty",
    "mixHash",
    "coinbase",
    "alloc",
    "baseFeePerGas",
    "excessBlobGas",
    "blobGasUsed",
    "slotNumber",
    "number",
    "parentHash",
];

/// Account fields loupe reads (`secretKey` is alloy's, for test keys; it is not state).
const ACCOUNT: &[&str] = &["balance", "nonce", "code", "storage", "secretKey"];

/// `config` fields: alloy's `ChainConfig`, and geth's `eip150Hash` (a checkpoint hash, unused).
const CONFIG: &[&str] = &[
    "chainId",
    "homesteadBlock",
    "daoForkBlock",
    "daoForkSupport",
    "eip150Block",
    "eip150Hash",
    "eip155Block",
    "eip158Block",
    "byzantiumBlock",
    "constantinopleBlock",
    "petersburgBlock",
    "istanbulBlock",
    "muirGlacierBlock",
    "berlinBlock",
    "londonBlock",
    "arrowGlacierBlock",
    "grayGlacierBlock",
    "mergeNetsplitBlock",
    "shanghaiTime",
    "cancunTime",
    "pragueTime",
    "osakaTime",
    "amsterdamTime",
    "bogotaTime",
    "bpo1Time",
    "bpo2Time",
    "bpo3Time",
    "bpo4Time",
    "bpo5Time",
    "terminalTotalDifficulty",
    "terminalTotalDifficultyPassed",
    "ethash",
    "clique",
    "parlia",
    "depositContractAddress",
    "blobSchedule",
];

/// Besu's other names of `config` fields.
const CONFIG_ALIASES: &[(&str, &str)] = &[("constantinopleFixBlock", "petersburgBlock")];

/// The `ethash` field loupe reads: Besu's fixed difficulty (geth's `ethash` is empty).
const ETHASH: &[&str] = &["fixeddifficulty"];

/// The `clique` fields alloy reads (geth's names).
const CLIQUE: &[&str] = &["period", "epoch"];

/// `config` items only Besu defines (its genesis file reference): each marks a Besu file.
const BESU_CONFIG: &[&str] = &[
    "contractSizeLimit",
    "evmStackSize",
    "ecCurve",
    "zeroBaseFee",
    "fixedBaseFee",
    "discovery",
    "transitions",
    "ibft2",
    "qbft",
    "checkpoint",
    "ecip1017EraRounds",
];

/// Besu's Clique fields (geth's are `period` and `epoch`).
const BESU_CLIQUE: &[&str] = &["blockperiodseconds", "epochlength", "createemptyblocks"];

/// Account fields only Besu writes (and ignores).
const BESU_ACCOUNT: &[&str] = &["comment", "privateKey"];

/// Which client's reading of the file was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Dialect {
    /// geth's: each fork is active where the file names it.
    #[default]
    Geth,
    /// Besu's: milestones are cumulative, a named fork brings every earlier one (the glaciers
    /// included) from the same block or time; Spurious Dragon is `eip158Block` (Besu does not
    /// read `eip155Block`); a `daoForkBlock` above 0 is the DAO fork taken. Taken when the file
    /// has any of: a `config` item only Besu defines (`contractSizeLimit`, `evmStackSize`,
    /// `ecCurve`, `zeroBaseFee`, `fixedBaseFee`, `discovery`, `transitions`, `ibft2`, `qbft`,
    /// `checkpoint`, `ecip1017EraRounds`), `ethash.fixeddifficulty`, Besu's Clique fields
    /// (`blockperiodseconds`, `epochlength`, `createemptyblocks`), a `config` key spelled
    /// otherwise than geth spells it (`chainID`, `muirglacierblock`, `constantinopleFixBlock`),
    /// an account with `comment` or `privateKey`; or a fork schedule geth refuses for its order
    /// (a fork left out before a later one it names), which only Besu reads.
    Besu,
}

impl Dialect {
    /// The client's name.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Geth => "geth",
            Self::Besu => "Besu",
        }
    }
}

/// How a genesis file was read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GenesisReading {
    /// The reading taken.
    pub dialect: Dialect,
    /// Why the file was read as Besu's: the marks found (empty for geth's reading).
    pub marks: Vec<String>,
    /// Fields dropped, as dotted paths (`config.contractSizeLimit`, `alloc.*.comment`).
    pub ignored: Vec<String>,
    /// Accounts that had fields dropped.
    pub accounts_with_ignored: u64,
    /// Forks the Besu reading implied (`homesteadBlock = 0 (with istanbulBlock)`).
    pub implied: Vec<String>,
    /// Forks the Besu reading implies but loupe cannot place: a block fork before a time fork
    /// scheduled after genesis (loupe activates block forks at blocks).
    pub unplaced: Vec<String>,
    /// Besu's `ethash.fixeddifficulty`: the difficulty of every proof-of-work block.
    pub fixed_difficulty: Option<U256>,
}

impl GenesisReading {
    /// Logs the reading: one warning naming every field dropped (if any), and which reading of
    /// the fork schedule was taken and why.
    pub fn log(&self) {
        if !self.ignored.is_empty() {
            let accounts = match self.accounts_with_ignored {
                0 => String::new(),
                1 => " (in 1 account)".to_string(),
                n => format!(" (in {n} accounts)"),
            };
            tracing::warn!(
                target: "genesis",
                "genesis fields loupe does not read, ignored: {}{accounts}",
                self.ignored.join(", ")
            );
        }
        match self.dialect {
            Dialect::Geth => tracing::info!(
                target: "genesis",
                "genesis read as geth reads it: each fork is active where the file names it"
            ),
            Dialect::Besu => {
                let implied = if self.implied.is_empty() {
                    "none".to_string()
                } else {
                    self.implied.join(", ")
                };
                tracing::info!(
                    target: "genesis",
                    "genesis read as Besu reads it (milestones are cumulative: a named fork \
                     brings every earlier one), because of {}; implied: {implied}",
                    self.marks.join(", ")
                );
                if !self.unplaced.is_empty() {
                    tracing::warn!(
                        target: "genesis",
                        "Besu's reading implies forks loupe cannot place (a block fork before a \
                         fork by time after genesis; name its block): {}",
                        self.unplaced.join(", ")
                    );
                }
            }
        }
        if let Some(d) = self.fixed_difficulty {
            tracing::info!(
                target: "genesis",
                "every proof-of-work block has difficulty {d} (ethash.fixeddifficulty)"
            );
        }
    }
}

/// What reading the accounts of an allocation found, gathered across accounts.
#[derive(Debug, Clone, Default)]
pub(super) struct AccountNotes {
    /// Fields dropped from some account.
    ignored: BTreeSet<String>,
    /// Besu's account fields met.
    besu: BTreeSet<String>,
    /// Accounts that had fields dropped.
    accounts: u64,
}

/// A map's keys under their known names: the known ones renamed, the others set aside.
struct Canonical {
    /// Known keys only, under their canonical names.
    map: Map<String, Value>,
    /// Keys that match no known name, as written, with their values.
    unknown: Vec<(String, Value)>,
    /// Known keys written otherwise than their canonical name (as written).
    respelled: Vec<String>,
}

/// Renames each key of `map` to the name of `known` (or of an alias) it matches ignoring case.
fn canonical(
    map: Map<String, Value>,
    known: &[&str],
    aliases: &[(&str, &str)],
) -> Result<Canonical, String> {
    let mut out = Canonical { map: Map::new(), unknown: Vec::new(), respelled: Vec::new() };
    // The key as written of each canonical name taken.
    let mut written: Vec<(&str, String)> = Vec::new();
    for (key, value) in map {
        let name = known.iter().find(|k| k.eq_ignore_ascii_case(&key)).copied().or_else(|| {
            aliases.iter().find(|(a, _)| a.eq_ignore_ascii_case(&key)).map(|(_, to)| *to)
        });
        let Some(name) = name else {
            out.unknown.push((key, value));
            continue;
        };
        if key != name {
            out.respelled.push(key.clone());
        }
        match out.map.get(name) {
            Some(first) if *first != value => {
                let before = written.iter().find(|(n, _)| *n == name).map_or(name, |(_, k)| k);
                return Err(format!(
                    "`{before}` and `{key}` are both `{name}`, with two values ({first} and \
                     {value})"
                ));
            }
            Some(_) => {}
            None => {
                written.push((name, key.clone()));
                out.map.insert(name.to_string(), value);
            }
        }
    }
    Ok(out)
}

fn is_one_of(key: &str, names: &[&str]) -> bool {
    names.iter().any(|n| n.eq_ignore_ascii_case(key))
}

/// One account object's fields under alloy's names, the unknown ones dropped and noted.
pub(super) fn account_fields(
    fields: Map<String, Value>,
    notes: &mut AccountNotes,
) -> Result<Map<String, Value>, String> {
    let c = canonical(fields, ACCOUNT, &[])?;
    if !c.unknown.is_empty() {
        notes.accounts += 1;
    }
    for (key, _) in c.unknown {
        if is_one_of(&key, BESU_ACCOUNT) {
            notes.besu.insert(key.clone());
        }
        notes.ignored.insert(key);
    }
    Ok(c.map)
}

/// A genesis as read: the parsed genesis, how it was read, and its JSON as loupe reads it
/// (names canonical, unknown fields dropped, implied forks written out, `alloc` empty), which
/// reads back to the same genesis and schedule in either dialect.
#[derive(Debug, Clone)]
pub(super) struct ReadGenesis {
    pub(super) genesis: Genesis,
    pub(super) reading: GenesisReading,
    pub(super) json: Map<String, Value>,
}

fn dialect_error(message: String) -> ChainError {
    ChainError::Dialect { path: "<json>".into(), message }
}

fn parse_error(error: serde_json::Error) -> ChainError {
    ChainError::Parse { path: "<json>".into(), error }
}

/// Reads a genesis object; its accounts (those still in `alloc`) are read here, those streamed
/// before came through [`account_fields`] into `notes`.
pub(super) fn read(
    map: Map<String, Value>,
    mut notes: AccountNotes,
) -> Result<ReadGenesis, ChainError> {
    let mut reading = GenesisReading::default();
    let top = canonical(map, TOP, &[]).map_err(dialect_error)?;
    let mut top_map = top.map;
    for (key, value) in top.unknown {
        // Dumps of a genesis (geth's, reth's) carry `gasUsed`, zero at genesis, and the
        // `stateRoot` loupe computes from the allocation: no news, kept as written (alloy
        // skips them). Anything else is named and dropped.
        let zero = value.as_u64() == Some(0) || matches!(value.as_str(), Some("0x0" | "0"));
        let quiet =
            (key.eq_ignore_ascii_case("gasUsed") && zero) || key.eq_ignore_ascii_case("stateRoot");
        if quiet {
            top_map.insert(key, value);
        } else {
            reading.ignored.push(key);
        }
    }
    if let Some(Value::Object(alloc)) = top_map.get_mut("alloc") {
        for account in alloc.values_mut() {
            if let Value::Object(fields) = account {
                *fields =
                    account_fields(std::mem::take(fields), &mut notes).map_err(dialect_error)?;
            }
        }
    }
    let mut marks = Vec::new();
    if let Some(Value::Object(config)) = top_map.get_mut("config") {
        let c = canonical(std::mem::take(config), CONFIG, CONFIG_ALIASES).map_err(dialect_error)?;
        *config = c.map;
        for key in c.respelled {
            marks.push(format!("config.{key} (Besu's spelling)"));
        }
        for (key, _) in c.unknown {
            if is_one_of(&key, BESU_CONFIG) {
                marks.push(format!("config.{key}"));
            }
            reading.ignored.push(format!("config.{key}"));
        }
        if let Some(Value::Object(ethash)) = config.get_mut("ethash") {
            let e = canonical(std::mem::take(ethash), ETHASH, &[]).map_err(dialect_error)?;
            for (key, _) in e.unknown {
                reading.ignored.push(format!("config.ethash.{key}"));
            }
            if let Some(value) = e.map.get("fixeddifficulty") {
                reading.fixed_difficulty = Some(fixed_difficulty(value)?);
                marks.push("config.ethash.fixeddifficulty".into());
            }
            *ethash = e.map;
        }
        if let Some(Value::Object(clique)) = config.get_mut("clique") {
            let k = canonical(std::mem::take(clique), CLIQUE, &[]).map_err(dialect_error)?;
            for (key, _) in k.unknown {
                if is_one_of(&key, BESU_CLIQUE) {
                    marks.push(format!("config.clique.{key}"));
                }
                reading.ignored.push(format!("config.clique.{key}"));
            }
            *clique = k.map;
        }
    }
    for key in &notes.besu {
        marks.push(format!("alloc.*.{key}"));
    }
    reading.ignored.extend(notes.ignored.iter().map(|key| format!("alloc.*.{key}")));
    reading.accounts_with_ignored = notes.accounts;

    // The schedule, read from the configuration alone (the allocation set aside meanwhile).
    let alloc = top_map.remove("alloc");
    let head: Genesis =
        serde_json::from_value(Value::Object(top_map.clone())).map_err(parse_error)?;
    if let Some((unset, set)) = geth_refuses(&head.config) {
        marks.push(format!("{set} without {unset}, which geth refuses"));
    }
    if !marks.is_empty() {
        reading.dialect = Dialect::Besu;
        reading.marks = marks;
        let fill = besu_milestones(&head.config, head.timestamp);
        if let Some(Value::Object(config)) = top_map.get_mut("config") {
            for (key, value) in fill.set {
                match value {
                    Some(v) => config.insert(key.to_string(), v),
                    None => config.remove(key),
                };
            }
        }
        reading.implied = fill.implied;
        reading.unplaced = fill.unplaced;
    }
    let mut json = top_map.clone();
    json.insert("alloc".into(), Value::Object(Map::new()));
    if let Some(alloc) = alloc {
        top_map.insert("alloc".into(), alloc);
    }
    let genesis = serde_json::from_value(Value::Object(top_map)).map_err(parse_error)?;
    Ok(ReadGenesis { genesis, reading, json })
}

/// `ethash.fixeddifficulty`: a JSON number, or a decimal or `0x` string.
fn fixed_difficulty(value: &Value) -> Result<U256, ChainError> {
    let parsed = match value {
        Value::Number(n) => n.as_u64().map(U256::from),
        Value::String(s) => s.parse::<U256>().ok(),
        _ => None,
    };
    parsed.ok_or_else(|| {
        dialect_error(format!("config.ethash.fixeddifficulty {value} is not a whole number"))
    })
}

#[cfg(test)]
mod tests {
    use alloy_hardforks::{EthereumHardfork, EthereumHardforks, ForkCondition};

    use super::*;
    use crate::chain::{ChainSpec, DifficultyParent, GenesisItem, difficulty, stream_genesis};

    /// A genesis with `config` and one account `extra` fields are added to.
    fn genesis(config: Value, account_extra: Value) -> String {
        let mut account = serde_json::json!({"balance": "1000000000000000000000", "nonce": "0x1"});
        if let (Value::Object(a), Value::Object(extra)) = (&mut account, account_extra) {
            a.extend(extra);
        }
        serde_json::json!({
            "config": config, "difficulty": "0x10000", "gasLimit": "0x1000000",
            "alloc": {"70997970c51812dc3a010c7d01b50e0d17dc79c8": account,
                      "0x627306090abab3a6e1400e9345bc60c78a8bef57": {"balance": "0x5"}}
        })
        .to_string()
    }

    /// Every fork's activation in `spec`.
    fn schedule(spec: &ChainSpec) -> Vec<(EthereumHardfork, ForkCondition)> {
        EthereumHardfork::VARIANTS.iter().map(|f| (*f, spec.ethereum_fork_activation(*f))).collect()
    }

    /// A geth-style config naming every fork of `keys` at `at`.
    fn geth_config(chain_id: u64, keys: &[&str], at: u64) -> Value {
        let mut c = Map::new();
        c.insert("chainId".into(), Value::from(chain_id));
        for k in keys {
            c.insert((*k).to_string(), Value::from(at));
        }
        Value::Object(c)
    }

    const THROUGH_ISTANBUL: [&str; 8] = [
        "homesteadBlock",
        "eip150Block",
        "eip155Block",
        "eip158Block",
        "byzantiumBlock",
        "constantinopleBlock",
        "petersburgBlock",
        "istanbulBlock",
    ];

    #[test]
    fn unknown_fields_are_dropped_and_named_in_both_paths() {
        let besu = genesis(
            serde_json::json!({"chainId": 7, "contractSizeLimit": 2147483647, "verkleTime": 9}),
            serde_json::json!({"comment": "a test account", "privateKey": "59c6"}),
        );
        let plain = genesis(serde_json::json!({"chainId": 7}), serde_json::json!({}));
        let spec = ChainSpec::from_genesis_json(&besu).unwrap();
        let r = spec.genesis_reading();
        assert_eq!(
            r.ignored,
            [
                "config.contractSizeLimit",
                "config.verkleTime",
                "alloc.*.comment",
                "alloc.*.privateKey"
            ]
        );
        assert_eq!(r.accounts_with_ignored, 1);
        // The state is the allocation without them: alloy's root of the plain file.
        let g: Genesis = serde_json::from_str(&plain).unwrap();
        assert_eq!(
            spec.genesis_header().state_root,
            alloy_trie::root::state_root_ref_unhashed(&g.alloc)
        );
        // Streamed: the same fields named, the same allocation.
        let mut digest = U256::ZERO;
        let head = stream_genesis(besu.as_bytes(), |item: GenesisItem| {
            digest = digest.wrapping_add(crate::chain::item_digest(&item));
            Ok::<(), ()>(())
        })
        .unwrap()
        .unwrap();
        assert_eq!(head.reading, *r);
        let plain_head = stream_genesis(plain.as_bytes(), |_| Ok::<(), ()>(())).unwrap().unwrap();
        assert_eq!(head.alloc_digest, plain_head.alloc_digest);
        // What the datadir stores names none of them.
        assert!(!head.json.contains("contractSizeLimit") && !head.json.contains("comment"));
        // geth's `gasUsed` of zero is no news; another value is named.
        let mut v: Value = serde_json::from_str(&plain).unwrap();
        v["gasUsed"] = Value::from("0x0");
        let spec = ChainSpec::from_genesis_json(&v.to_string()).unwrap();
        assert!(spec.genesis_reading().ignored.is_empty());
        v["gasUsed"] = Value::from("0x5");
        let spec = ChainSpec::from_genesis_json(&v.to_string()).unwrap();
        assert_eq!(spec.genesis_reading().ignored, ["gasUsed"]);
    }

    #[test]
    fn names_match_ignoring_case_and_chain_id_is_read_as_besu_spells_it() {
        let text = r#"{"Config": {"chainID": 2018}, "GASLIMIT": "0x1000000", "mixhash":
            "0x0000000000000000000000000000000000000000000000000000000000000001",
            "alloc": {"0x0000000000000000000000000000000000000001": {"Balance": "0x7"}}}"#;
        let spec = ChainSpec::from_genesis_json(text).unwrap();
        assert_eq!(spec.chain_id(), 2018);
        assert_eq!(spec.genesis_header().gas_limit, 0x1000000);
        assert_eq!(spec.genesis_header().mix_hash, alloy_primitives::B256::with_last_byte(1));
        assert_eq!(spec.genesis().alloc.values().next().unwrap().balance, U256::from(7));
        assert!(spec.genesis_reading().ignored.is_empty());
        assert!(spec.genesis_reading().marks.iter().any(|m| m.contains("chainID")));
        // One name twice: the same value is taken, two values are refused naming both keys.
        let same = genesis(serde_json::json!({"chainId": 5, "chainID": 5}), serde_json::json!({}));
        assert_eq!(ChainSpec::from_genesis_json(&same).unwrap().chain_id(), 5);
        let two = genesis(serde_json::json!({"chainId": 5, "chainID": 6}), serde_json::json!({}));
        let err = ChainSpec::from_genesis_json(&two).unwrap_err().to_string();
        assert!(err.contains("chainID") && err.contains("chainId"), "{err}");
        let err = stream_genesis(two.as_bytes(), |_| Ok::<(), ()>(())).unwrap().unwrap_err();
        assert!(err.to_string().contains("chainID"), "{err}");
    }

    #[test]
    fn besu_milestones_are_cumulative_where_geth_names_each_fork() {
        let besu = ChainSpec::from_genesis_json(&genesis(
            serde_json::json!({"chainID": 2018, "istanbulBlock": 0}),
            serde_json::json!({}),
        ))
        .unwrap();
        assert_eq!(besu.genesis_reading().dialect, Dialect::Besu);
        // The same schedule as geth's file naming each fork through Istanbul (the geth reading
        // of such a file: no glacier).
        let geth = ChainSpec::from_genesis_json(&genesis(
            geth_config(2018, &THROUGH_ISTANBUL, 0),
            serde_json::json!({}),
        ))
        .unwrap();
        assert_eq!(geth.genesis_reading().dialect, Dialect::Geth);
        assert!(geth.genesis_reading().marks.is_empty());
        assert_eq!(schedule(&besu), schedule(&geth));
        assert!(besu.is_constantinople_active_at_block(0) && !besu.is_berlin_active_at_block(0));
        // A later milestone at a later block: the forks it implies come with it.
        let besu = ChainSpec::from_genesis_json(&genesis(
            serde_json::json!({"chainId": 9, "homesteadBlock": 0, "constantinopleFixBlock": 5}),
            serde_json::json!({}),
        ))
        .unwrap();
        let geth = ChainSpec::from_genesis_json(&genesis(
            {
                let mut c = geth_config(9, &THROUGH_ISTANBUL[1..7], 5);
                c["homesteadBlock"] = Value::from(0);
                c
            },
            serde_json::json!({}),
        ))
        .unwrap();
        assert_eq!(schedule(&besu), schedule(&geth));
        // Besu's Berlin brings Muir Glacier (its bomb delay) with it; geth leaves it out.
        let besu = ChainSpec::from_genesis_json(&genesis(
            serde_json::json!({"chainId": 9, "berlinBlock": 0}),
            serde_json::json!({}),
        ))
        .unwrap();
        let mut keys = THROUGH_ISTANBUL.to_vec();
        keys.push("berlinBlock");
        let geth =
            ChainSpec::from_genesis_json(&genesis(geth_config(9, &keys, 0), serde_json::json!({})))
                .unwrap();
        let muir = EthereumHardfork::MuirGlacier;
        assert_eq!(besu.ethereum_fork_activation(muir), ForkCondition::Block(0));
        assert_eq!(geth.ethereum_fork_activation(muir), ForkCondition::Never);
        keys.push("muirGlacierBlock");
        let geth =
            ChainSpec::from_genesis_json(&genesis(geth_config(9, &keys, 0), serde_json::json!({})))
                .unwrap();
        assert_eq!(schedule(&besu), schedule(&geth));
    }

    #[test]
    fn a_schedule_geth_refuses_is_read_as_besu_reads_it_and_besu_marks_name_themselves() {
        let read = |config: Value, account: Value| {
            ChainSpec::from_genesis_json(&genesis(config, account)).unwrap()
        };
        let spec = read(serde_json::json!({"chainId": 9, "londonBlock": 0}), serde_json::json!({}));
        assert_eq!(spec.genesis_reading().dialect, Dialect::Besu);
        // Named as geth's order check names it: the last fork it requires before the one set.
        assert_eq!(
            spec.genesis_reading().marks,
            ["londonBlock without berlinBlock, which geth refuses"]
        );
        assert!(spec.is_london_active_at_block(0) && spec.is_homestead_active_at_block(0));
        // Forks geth lets a file leave out: read as geth reads them.
        let mut keys = THROUGH_ISTANBUL.to_vec();
        keys.extend(["berlinBlock", "londonBlock", "shanghaiTime", "pragueTime"]);
        let mut config = geth_config(9, &keys, 0);
        config["terminalTotalDifficulty"] = Value::from(0);
        let spec = read(config, serde_json::json!({}));
        assert_eq!(spec.genesis_reading().dialect, Dialect::Geth);
        assert!(!spec.is_cancun_active_at_timestamp(0), "geth: Prague without Cancun");
        for (config, account, mark) in [
            (
                serde_json::json!({"chainId": 9, "evmStackSize": 2048}),
                serde_json::json!({}),
                "config.evmStackSize",
            ),
            (
                serde_json::json!({"chainId": 9}),
                serde_json::json!({"comment": "x"}),
                "alloc.*.comment",
            ),
            (
                serde_json::json!({"chainId": 9, "ethash": {"fixeddifficulty": 1}}),
                serde_json::json!({}),
                "config.ethash.fixeddifficulty",
            ),
            (
                serde_json::json!({"chainId": 9, "clique": {"blockperiodseconds": 2}}),
                serde_json::json!({}),
                "config.clique.blockperiodseconds",
            ),
            (
                serde_json::json!({"chainId": 9, "muirglacierblock": 0}),
                serde_json::json!({}),
                "config.muirglacierblock",
            ),
        ] {
            let spec = read(config, account);
            let r = spec.genesis_reading();
            assert_eq!(r.dialect, Dialect::Besu, "{mark}");
            assert!(r.marks.iter().any(|m| m.starts_with(mark)), "{mark}: {:?}", r.marks);
        }
    }

    #[test]
    fn besu_reads_spurious_dragon_from_eip158_and_takes_the_dao_fork_by_its_block() {
        let spec = ChainSpec::from_genesis_json(&genesis(
            serde_json::json!({"chainID": 9, "homesteadBlock": 0, "daoForkBlock": 2,
                "eip150Block": 2, "eip155Block": 1, "eip158Block": 3, "byzantiumBlock": 4}),
            serde_json::json!({}),
        ))
        .unwrap();
        let dragon = spec.ethereum_fork_activation(EthereumHardfork::SpuriousDragon);
        assert_eq!(dragon, ForkCondition::Block(3));
        assert_eq!(spec.dao_fork(), Some((2, true)));
    }

    #[test]
    fn a_time_milestone_at_genesis_brings_the_block_forks_and_the_merge() {
        let spec = ChainSpec::from_genesis_json(&genesis(
            serde_json::json!({"chainID": 9, "cancunTime": 0}),
            serde_json::json!({}),
        ))
        .unwrap();
        assert!(spec.is_shanghai_active_at_timestamp(0) && spec.is_cancun_active_at_timestamp(0));
        assert!(spec.is_london_active_at_block(0) && spec.is_paris_active_at_block(0));
        assert!(spec.genesis_header().base_fee_per_gas.is_some(), "London at genesis");
        assert!(spec.genesis_header().parent_beacon_block_root.is_some(), "Cancun at genesis");
        // After genesis: the time forks come with it, the block forks before it cannot be
        // placed at a block, and say so.
        let spec = ChainSpec::from_genesis_json(&genesis(
            serde_json::json!({"chainID": 9, "pragueTime": 100}),
            serde_json::json!({}),
        ))
        .unwrap();
        assert!(spec.is_cancun_active_at_timestamp(100) && !spec.is_cancun_active_at_timestamp(99));
        let r = spec.genesis_reading();
        assert!(r.unplaced.iter().any(|u| u.starts_with("londonBlock")), "{:?}", r.unplaced);
    }

    #[test]
    fn a_fixed_difficulty_is_every_block_s_difficulty() {
        let parent = DifficultyParent {
            number: 7,
            timestamp: 100,
            difficulty: U256::from(1_000_000),
            has_ommers: false,
        };
        for value in [Value::from(15), Value::from("15"), Value::from("0xf")] {
            let spec = ChainSpec::from_genesis_json(&genesis(
                serde_json::json!({"chainId": 9, "istanbulBlock": 0, "ethash": {"fixeddifficulty": value}}),
                serde_json::json!({}),
            ))
            .unwrap();
            assert_eq!(spec.genesis_reading().fixed_difficulty, Some(U256::from(15)));
            assert_eq!(difficulty(&spec, 101, &parent), U256::from(15));
            assert_eq!(difficulty(&spec, 10_000, &parent), U256::from(15));
        }
        // Without it, the formula of the fork.
        let spec = ChainSpec::from_genesis_json(&genesis(
            serde_json::json!({"chainId": 9, "istanbulBlock": 0, "ethash": {}}),
            serde_json::json!({}),
        ))
        .unwrap();
        assert_ne!(difficulty(&spec, 101, &parent), U256::from(15));
        let bad = genesis(
            serde_json::json!({"chainId": 9, "ethash": {"fixeddifficulty": "many"}}),
            serde_json::json!({}),
        );
        let err = ChainSpec::from_genesis_json(&bad).unwrap_err().to_string();
        assert!(err.contains("fixeddifficulty"), "{err}");
    }

    #[test]
    fn the_stored_json_reads_back_to_the_same_schedule_and_difficulty() {
        let text = genesis(
            serde_json::json!({"chainID": 2018, "istanbulBlock": 0, "ethash": {"fixeddifficulty": 15},
                "contractSizeLimit": 1}),
            serde_json::json!({"comment": "x"}),
        );
        let spec = ChainSpec::from_genesis_json(&text).unwrap();
        let head = stream_genesis(text.as_bytes(), |_| Ok::<(), ()>(())).unwrap().unwrap();
        let (genesis, reading) = crate::chain::read_genesis_json(&head.json).unwrap();
        let stored =
            ChainSpec::from_genesis_read(genesis, reading, spec.genesis_header().state_root)
                .unwrap();
        assert_eq!(schedule(&stored), schedule(&spec));
        assert_eq!(stored.genesis_hash(), spec.genesis_hash());
        assert_eq!(stored.genesis_reading().fixed_difficulty, Some(U256::from(15)));
        assert!(stored.genesis_reading().implied.is_empty(), "written out already");
        assert!(stored.genesis_reading().ignored.is_empty(), "dropped already");
    }

    /// A QBFT genesis of the shape Besu's documentation shows (written here): it loads, the
    /// consensus items named as dropped (loupe checks no QBFT seal), the milestone cumulative.
    #[test]
    fn a_besu_qbft_genesis_loads() {
        let text = r#"{
          "config": {
            "chainId": 1337, "berlinBlock": 0,
            "qbft": {"blockperiodseconds": 2, "epochlength": 30000, "requesttimeoutseconds": 4}
          },
          "nonce": "0x0", "timestamp": "0x58ee40ba", "gasLimit": "0x47b760", "difficulty": "0x1",
          "mixHash": "0x63746963616c2062797a616e74696e65206661756c7420746f6c6572616e6365",
          "coinbase": "0x0000000000000000000000000000000000000000",
          "extraData": "0xf83aa00000000000000000000000000000000000000000000000000000000000000000d594c2ab482b506de561668e07f04547232a72897daf808400000000c0",
          "alloc": {
            "70997970c51812dc3a010c7d01b50e0d17dc79c8": {
              "privateKey": "59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d",
              "comment": "a test account", "balance": "0xad78ebc5ac6200000"
            }
          }
        }"#;
        let spec = ChainSpec::from_genesis_json(text).unwrap();
        let r = spec.genesis_reading();
        assert_eq!(r.dialect, Dialect::Besu);
        assert_eq!(r.ignored, ["config.qbft", "alloc.*.comment", "alloc.*.privateKey"]);
        assert!(spec.is_berlin_active_at_block(0) && spec.is_istanbul_active_at_block(0));
        assert_eq!(spec.chain_id(), 1337);
    }

    #[test]
    fn the_built_in_networks_read_as_geth_files_with_nothing_dropped() {
        for n in [
            crate::chain::Network::Mainnet,
            crate::chain::Network::Sepolia,
            crate::chain::Network::Holesky,
            crate::chain::Network::Hoodi,
        ] {
            let spec = ChainSpec::named(n).unwrap();
            assert_eq!(*spec.genesis_reading(), GenesisReading::default(), "{n}");
        }
    }
}
