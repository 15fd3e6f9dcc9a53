//! Fork schedules as each client reads a genesis `config`: geth's order check and Besu's
//! cumulative milestones (what [`super::dialect`] applies to a Besu file).

use alloy_genesis::ChainConfig;
use alloy_primitives::U256;
use serde_json::Value;

/// The first fork geth's order check refuses: a fork it requires left out (`.0`) before a
/// later fork the file names (`.1`). Optional there: the DAO fork, the glaciers, the netsplit
/// block, and every fork by time after Shanghai.
pub(super) fn geth_refuses(c: &ChainConfig) -> Option<(&'static str, &'static str)> {
    let forks: [(&str, bool, bool); 26] = [
        ("homesteadBlock", false, c.homestead_block.is_some()),
        ("daoForkBlock", true, c.dao_fork_block.is_some()),
        ("eip150Block", false, c.eip150_block.is_some()),
        ("eip155Block", false, c.eip155_block.is_some()),
        ("eip158Block", false, c.eip158_block.is_some()),
        ("byzantiumBlock", false, c.byzantium_block.is_some()),
        ("constantinopleBlock", false, c.constantinople_block.is_some()),
        ("petersburgBlock", false, c.petersburg_block.is_some()),
        ("istanbulBlock", false, c.istanbul_block.is_some()),
        ("muirGlacierBlock", true, c.muir_glacier_block.is_some()),
        ("berlinBlock", false, c.berlin_block.is_some()),
        ("londonBlock", false, c.london_block.is_some()),
        ("arrowGlacierBlock", true, c.arrow_glacier_block.is_some()),
        ("grayGlacierBlock", true, c.gray_glacier_block.is_some()),
        ("mergeNetsplitBlock", true, c.merge_netsplit_block.is_some()),
        ("shanghaiTime", false, c.shanghai_time.is_some()),
        ("cancunTime", true, c.cancun_time.is_some()),
        ("pragueTime", true, c.prague_time.is_some()),
        ("osakaTime", true, c.osaka_time.is_some()),
        ("bpo1Time", true, c.bpo1_time.is_some()),
        ("bpo2Time", true, c.bpo2_time.is_some()),
        ("bpo3Time", true, c.bpo3_time.is_some()),
        ("bpo4Time", true, c.bpo4_time.is_some()),
        ("bpo5Time", true, c.bpo5_time.is_some()),
        ("amsterdamTime", true, c.amsterdam_time.is_some()),
        ("bogotaTime", true, c.bogota_time.is_some()),
    ];
    let mut last: Option<(&'static str, bool)> = None;
    for (name, optional, set) in forks {
        if let Some((unset, false)) = last
            && set
        {
            return Some((unset, name));
        }
        if !optional || set {
            last = Some((name, set));
        }
    }
    None
}

/// What Besu's reading changes in a `config`: keys to set (`None`: to remove), and what it
/// implied or could not place, for the log.
#[derive(Debug, Default)]
pub(super) struct Fill {
    /// `config` keys to set, or to remove (`None`).
    pub(super) set: Vec<(&'static str, Option<Value>)>,
    /// The forks the reading implied, in schedule order, for the log.
    pub(super) implied: Vec<String>,
    /// The forks it could not place, for the log.
    pub(super) unplaced: Vec<String>,
}

/// The next named milestone, walking the schedule backwards.
#[derive(Debug, Clone, Copy)]
enum Next {
    Block(u64, &'static str),
    Time(u64, &'static str),
}

/// Besu's cumulative milestones: every fork left out takes the activation of the first later
/// fork the file names (a block fork before a fork by time takes block 0 if that fork is
/// active at genesis, and the merge at genesis comes with it when the file sets no terminal
/// total difficulty); Spurious Dragon is `eip158Block`; a `daoForkBlock` above 0 is the fork
/// taken, and 0 none.
pub(super) fn besu_milestones(c: &ChainConfig, genesis_time: u64) -> Fill {
    let mut fill = Fill::default();
    let times: [(&'static str, Option<u64>); 5] = [
        ("shanghaiTime", c.shanghai_time),
        ("cancunTime", c.cancun_time),
        ("pragueTime", c.prague_time),
        ("osakaTime", c.osaka_time),
        ("amsterdamTime", c.amsterdam_time),
    ];
    let mut next: Option<Next> = None;
    for (key, value) in times.into_iter().rev() {
        match (value, next) {
            (Some(t), _) => next = Some(Next::Time(t, key)),
            (None, Some(Next::Time(t, from))) => {
                fill.set.push((key, Some(Value::from(t))));
                fill.implied.push(format!("{key} = {t} (with {from})"));
            }
            (None, _) => {}
        }
    }
    // The merge: at `mergeNetsplitBlock`, or block 0 for a terminal total difficulty of 0.
    let ttd = c.terminal_total_difficulty;
    let merge_block = c.merge_netsplit_block.or_else(|| ttd.filter(U256::is_zero).map(|_| 0));
    match (merge_block, ttd, next) {
        (Some(b), _, _) => next = Some(Next::Block(b, "the merge")),
        (None, None, Some(Next::Time(t, from))) if t <= genesis_time => {
            fill.set.push(("terminalTotalDifficulty", Some(Value::from(0))));
            fill.set.push(("mergeNetsplitBlock", Some(Value::from(0))));
            fill.implied.push(format!("the merge at block 0 (with {from})"));
            next = Some(Next::Block(0, from));
        }
        _ => {}
    }
    let blocks: [(&'static str, Option<u64>); 12] = [
        ("homesteadBlock", c.homestead_block),
        ("eip150Block", c.eip150_block),
        ("eip158Block", c.eip158_block),
        ("byzantiumBlock", c.byzantium_block),
        ("constantinopleBlock", c.constantinople_block),
        ("petersburgBlock", c.petersburg_block),
        ("istanbulBlock", c.istanbul_block),
        ("muirGlacierBlock", c.muir_glacier_block),
        ("berlinBlock", c.berlin_block),
        ("londonBlock", c.london_block),
        ("arrowGlacierBlock", c.arrow_glacier_block),
        ("grayGlacierBlock", c.gray_glacier_block),
    ];
    let mut spurious_dragon = c.eip158_block;
    for (key, value) in blocks.into_iter().rev() {
        let placed = match (value, next) {
            (Some(b), _) => {
                next = Some(Next::Block(b, key));
                continue;
            }
            (None, None) => continue,
            (None, Some(Next::Block(b, from))) => Some((b, from)),
            (None, Some(Next::Time(t, from))) if t <= genesis_time => {
                next = Some(Next::Block(0, from));
                Some((0, from))
            }
            (None, Some(Next::Time(t, from))) => {
                fill.unplaced.push(format!("{key} (before {from} = {t})"));
                None
            }
        };
        if let Some((b, from)) = placed {
            fill.set.push((key, Some(Value::from(b))));
            fill.implied.push(format!("{key} = {b} (with {from})"));
            if key == "eip158Block" {
                spurious_dragon = Some(b);
            }
        }
    }
    // Walked backwards: in schedule order for the log.
    fill.implied.reverse();
    fill.unplaced.reverse();
    if c.eip155_block != spurious_dragon {
        fill.set.push(("eip155Block", spurious_dragon.map(Value::from)));
        let at = spurious_dragon.map_or_else(|| "never".to_string(), |b| b.to_string());
        fill.implied
            .push(format!("eip155Block = {at} (Besu reads Spurious Dragon from eip158Block)"));
    }
    match c.dao_fork_block {
        Some(0) => {
            fill.set.push(("daoForkBlock", None));
            fill.implied.push("no DAO fork (Besu ignores daoForkBlock 0)".into());
        }
        Some(b) if !c.dao_fork_support => {
            fill.set.push(("daoForkSupport", Some(Value::Bool(true))));
            fill.implied.push(format!("the DAO fork taken at block {b}"));
        }
        _ => {}
    }
    fill
}
