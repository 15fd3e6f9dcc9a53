//! History: what the state and the trie were at every block. Rows partitioned by epoch, keyed
//! as `keys` lays out, read through `lookup` with the epoch index that `index` keeps, held in
//! memory until a close or a commit writes them packed (`held`), trie nodes as deltas against
//! their next version (`nodes`), and the change lists that unwind the newest blocks
//! (`changes`). The trie-history stage's progress and what it writes live in `staged`. Closed
//! epochs behind the unwind window are frozen into segment files (`storage::segments`).

pub mod changes;
pub mod held;
pub mod index;
pub mod keys;
pub mod lookup;
pub mod nodes;
pub mod staged;
