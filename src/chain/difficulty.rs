//! [`difficulty`]: the proof-of-work difficulty a block must carry, by the formula of its
//! fork (Frontier, Homestead's EIP-2, Byzantium's EIP-100 with the ice-age delays of each later
//! fork), or the chain's fixed difficulty (Besu's `ethash.fixeddifficulty`).
//!
//! Written here: no crate outside reth's and geth's consensus code computes it (reth never
//! merged it). Checked against every vector of ethereum/tests `DifficultyTests`.

use alloy_hardforks::{EthereumChainHardforks, EthereumHardfork, EthereumHardforks};
use alloy_primitives::U256;

/// The lowest difficulty any proof-of-work block may have.
pub const MINIMUM_DIFFICULTY: u64 = 131_072;
/// The parent's difficulty over this is the size of one adjustment step.
const BOUND_DIVISOR: u64 = 2048;
/// Blocks per doubling of the difficulty bomb.
const EXP_PERIOD: u64 = 100_000;
/// Frontier: a block within this many seconds of its parent raises the difficulty.
const DURATION_LIMIT: u64 = 13;

/// What the difficulty rule reads of a chain: its forks, and a fixed difficulty if it has one.
pub trait DifficultyRules: EthereumHardforks {
    /// The difficulty every proof-of-work block of the chain carries, whatever its parent
    /// (Besu's `ethash.fixeddifficulty`, for test chains); `None`: the formula of each fork.
    fn fixed_difficulty(&self) -> Option<U256> {
        None
    }
}

/// A bare fork list has no fixed difficulty.
impl DifficultyRules for EthereumChainHardforks {}

/// What of the parent the formula reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DifficultyParent {
    /// The parent's number.
    pub number: u64,
    /// The parent's timestamp.
    pub timestamp: u64,
    /// The parent's difficulty.
    pub difficulty: U256,
    /// Whether the parent has ommers (EIP-100 targets the rate including them).
    pub has_ommers: bool,
}

/// The ice-age delay of the newest fork active at `number` that set one, from Byzantium on
/// (`None` before Byzantium: Frontier and Homestead count the bomb from block 0).
fn bomb_delay(forks: &impl EthereumHardforks, number: u64) -> Option<u64> {
    let active =
        |fork: EthereumHardfork| forks.ethereum_fork_activation(fork).active_at_block(number);
    [
        (EthereumHardfork::GrayGlacier, 11_400_000),
        (EthereumHardfork::ArrowGlacier, 10_700_000),
        (EthereumHardfork::London, 9_700_000),
        (EthereumHardfork::MuirGlacier, 9_000_000),
        (EthereumHardfork::Constantinople, 5_000_000),
        (EthereumHardfork::Byzantium, 3_000_000),
    ]
    .into_iter()
    .find(|(fork, _)| active(*fork))
    .map(|(_, delay)| delay)
}

/// The bomb's term for a (possibly delayed) block number: 2^(n/100,000 - 2) once that is at
/// least 1.
fn bomb(period_block: u64) -> U256 {
    let periods = period_block / EXP_PERIOD;
    if periods > 1 { U256::from(1) << (periods - 2) } else { U256::ZERO }
}

/// The difficulty block `parent.number + 1`, stamped `timestamp`, must have under `forks`: the
/// chain's fixed difficulty if it has one, else its fork's formula.
pub fn difficulty(forks: &impl DifficultyRules, timestamp: u64, parent: &DifficultyParent) -> U256 {
    if let Some(fixed) = forks.fixed_difficulty() {
        return fixed;
    }
    let number = parent.number + 1;
    let step = parent.difficulty / U256::from(BOUND_DIVISOR);
    let gap = timestamp.saturating_sub(parent.timestamp);
    let minimum = U256::from(MINIMUM_DIFFICULTY);
    if !forks.is_homestead_active_at_block(number) {
        let adjusted = if gap < DURATION_LIMIT {
            parent.difficulty.saturating_add(step)
        } else {
            parent.difficulty.saturating_sub(step)
        };
        return adjusted.max(minimum).saturating_add(bomb(number)).max(minimum);
    }
    // Homestead (EIP-2): max(1 - gap/10, -99) steps; Byzantium (EIP-100): max(k - gap/9, -99)
    // steps, where k is 2 if the parent has ommers, else 1.
    let delay = bomb_delay(forks, number);
    let (base, divisor) = match delay {
        Some(_) => (if parent.has_ommers { 2i64 } else { 1 }, 9),
        None => (1, 10),
    };
    let factor = (base - i64::try_from(gap / divisor).unwrap_or(i64::MAX)).max(-99);
    let change = step.saturating_mul(U256::from(factor.unsigned_abs()));
    let adjusted = if factor >= 0 {
        parent.difficulty.saturating_add(change)
    } else {
        parent.difficulty.saturating_sub(change)
    };
    // The bomb counts from a "fake" block number set back by the delay (the parent's number
    // minus delay - 1, floored at 0); Homestead counts from the block itself.
    let period_block = match delay {
        Some(delay) => parent.number.saturating_sub(delay - 1),
        None => number,
    };
    adjusted.max(minimum).saturating_add(bomb(period_block))
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy_hardforks::ForkCondition;

    fn forks(upto: EthereumHardfork) -> EthereumChainHardforks {
        use EthereumHardfork::*;
        let order = [
            Frontier,
            Homestead,
            Tangerine,
            SpuriousDragon,
            Byzantium,
            Constantinople,
            Petersburg,
            Istanbul,
            MuirGlacier,
            Berlin,
            London,
            ArrowGlacier,
            GrayGlacier,
        ];
        let end = order.iter().position(|f| *f == upto).map_or(0, |i| i + 1);
        EthereumChainHardforks::new(order[..end].iter().map(|f| (*f, ForkCondition::Block(0))))
    }

    #[test]
    fn frontier_rises_within_13_seconds_and_never_falls_below_the_minimum() {
        let f = forks(EthereumHardfork::Frontier);
        let parent = DifficultyParent {
            number: 1,
            timestamp: 100,
            difficulty: U256::from(2_048_000),
            has_ommers: false,
        };
        assert_eq!(difficulty(&f, 112, &parent), U256::from(2_049_000));
        assert_eq!(difficulty(&f, 113, &parent), U256::from(2_047_000));
        let low = DifficultyParent { difficulty: U256::from(MINIMUM_DIFFICULTY), ..parent };
        assert_eq!(difficulty(&f, 200, &low), U256::from(MINIMUM_DIFFICULTY));
    }
}
