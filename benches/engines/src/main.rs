//! Issue 62, item 3: the current-state store chosen by measurement.
//!
//! `engines extract` reads a loupe datadir (read-write open: copy a datadir you must not touch)
//! and writes the workload the bulk import writes to the four current-state tables
//! (`hashed_accounts`, `hashed_storage`, `account_trie`, `storage_trie`): the state at block 0,
//! then per block the hashed-account and hashed-storage upserts and deletes, and the trie-node
//! writes at each point the import settles a state root (each epoch's last block and each commit
//! group's end), with one durable commit per group of `loupe::import::DEFAULT_BATCH` blocks.
//! `engines replay` loads block 0's state into one engine, then replays the blocks and reports
//! wall time, CPU time, bytes on disk and peak RSS. `engines read` measures the head read paths
//! on the store a replay left. `engines bench` alternates the engines over repetitions and prints
//! the medians as a table. See README.md.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use redb::ReadableTable;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// The four tables, in the order of their ids in the workload file.
const TABLES: [&str; 4] = ["hashed_accounts", "hashed_storage", "account_trie", "storage_trie"];
/// Key length of each table (as loupe's table definitions fix them).
const KEY_LEN: [usize; 4] = [32, 64, 33, 65];

const TAG_END_BLOCK: u8 = 8;
const TAG_END_GENESIS: u8 = 9;
const TAG_END: u8 = 10;

// ---------------------------------------------------------------------------------------------
// Workload file: a stream of records.
//   put:    table id (0..4), key (KEY_LEN bytes), value length u32 LE, value
//   delete: table id + 4, key
//   end of block: 8, block u64 LE, commit u8 (1: the group's durable commit follows)
//   end of block 0's state: 9;  end of file: 10
// ---------------------------------------------------------------------------------------------

#[derive(Clone)]
struct Op {
    table: u8,
    key: Vec<u8>,
    value: Option<Vec<u8>>,
}

struct Block {
    number: u64,
    ops: Vec<Op>,
}

fn write_op(w: &mut impl Write, op: &Op) -> Res<()> {
    match &op.value {
        Some(v) => {
            w.write_all(&[op.table])?;
            w.write_all(&op.key)?;
            w.write_all(&(v.len() as u32).to_le_bytes())?;
            w.write_all(v)?;
        }
        None => {
            w.write_all(&[op.table + 4])?;
            w.write_all(&op.key)?;
        }
    }
    Ok(())
}

enum Rec {
    Op(Op),
    EndBlock(u64, bool),
    EndGenesis,
    End,
}

fn read_rec(r: &mut impl Read) -> Res<Rec> {
    let mut tag = [0u8; 1];
    r.read_exact(&mut tag)?;
    let tag = tag[0];
    match tag {
        0..=7 => {
            let table = tag % 4;
            let mut key = vec![0u8; KEY_LEN[table as usize]];
            r.read_exact(&mut key)?;
            let value = if tag < 4 {
                let mut len = [0u8; 4];
                r.read_exact(&mut len)?;
                let mut v = vec![0u8; u32::from_le_bytes(len) as usize];
                r.read_exact(&mut v)?;
                Some(v)
            } else {
                None
            };
            Ok(Rec::Op(Op { table, key, value }))
        }
        TAG_END_BLOCK => {
            let mut b = [0u8; 9];
            r.read_exact(&mut b)?;
            Ok(Rec::EndBlock(u64::from_le_bytes(b[..8].try_into()?), b[8] == 1))
        }
        TAG_END_GENESIS => Ok(Rec::EndGenesis),
        TAG_END => Ok(Rec::End),
        t => Err(format!("bad tag {t}").into()),
    }
}

/// Reads the workload's blocks one commit group at a time.
struct Workload {
    r: BufReader<File>,
}

impl Workload {
    /// Opens `path` and returns it with block 0's state.
    fn open(path: &Path) -> Res<(Self, Vec<Op>)> {
        let mut r = BufReader::with_capacity(1 << 20, File::open(path)?);
        let mut genesis = Vec::new();
        loop {
            match read_rec(&mut r)? {
                Rec::Op(op) => genesis.push(op),
                Rec::EndGenesis => break,
                _ => return Err("workload: block before the end of block 0's state".into()),
            }
        }
        Ok((Self { r }, genesis))
    }

    /// The next commit group, or `None` at the end.
    fn next_group(&mut self) -> Res<Option<Vec<Block>>> {
        let mut group = Vec::new();
        let mut ops = Vec::new();
        loop {
            match read_rec(&mut self.r)? {
                Rec::Op(op) => ops.push(op),
                Rec::EndBlock(number, commit) => {
                    group.push(Block { number, ops: std::mem::take(&mut ops) });
                    if commit {
                        return Ok(Some(group));
                    }
                }
                Rec::End => return Ok(if group.is_empty() { None } else { Some(group) }),
                Rec::EndGenesis => return Err("workload: two ends of block 0's state".into()),
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Extraction from a loupe datadir.
// ---------------------------------------------------------------------------------------------

/// Per entity (the table key), its history rows `(block, value before the block)`.
type Rows = HashMap<Vec<u8>, Vec<(u64, Vec<u8>)>>;

fn push_row(rows: &mut Rows, entity: &[u8], block: u64, value: &[u8]) {
    rows.entry(entity.to_vec()).or_default().push((block, value.to_vec()));
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        // splitmix64
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn extract(datadir: &Path, out: &Path, probes_out: &Path) -> Res<()> {
    use loupe::storage::segments::Kind;
    let started = Instant::now();
    let db = loupe::storage::Database::open(datadir)?;
    let reader = db.begin_read()?;
    let head = reader.head()?.ok_or("empty datadir")?;
    let t = reader.trie_tables();
    let epoch_len = t.epochs.len;
    let batch = loupe::import::DEFAULT_BATCH;
    eprintln!(
        "datadir {} head {head} epoch {epoch_len} group {batch} proof history {:?} trie stage {:?}",
        datadir.display(),
        reader.proof_history()?,
        reader.trie_stage()?
    );

    // Current tables.
    let mut current: [HashMap<Vec<u8>, Vec<u8>>; 4] = Default::default();
    for item in t.hashed_accounts.iter()? {
        let (k, v) = item?;
        current[0].insert(k.value().to_vec(), v.value().to_vec());
    }
    for item in t.hashed_storage.iter()? {
        let (k, v) = item?;
        current[1].insert(k.value().to_vec(), v.value().to_vec());
    }
    for item in t.account_trie.iter()? {
        let (k, v) = item?;
        current[2].insert(k.value().to_vec(), v.value().to_vec());
    }
    for item in t.storage_trie.iter()? {
        let (k, v) = item?;
        current[3].insert(k.value().to_vec(), v.value().to_vec());
    }
    eprintln!(
        "current rows: {} accounts, {} slots, {} account-trie nodes, {} storage-trie nodes",
        current[0].len(),
        current[1].len(),
        current[2].len(),
        current[3].len()
    );

    // History rows (B-tree and segments), by entity.
    let mut rows: [Rows; 4] = Default::default();
    t.account_history().for_each_row_rev::<44, &'static [u8]>(|k, v| {
        push_row(&mut rows[0], &k[4..36], u64::from_be_bytes(k[36..44].try_into().unwrap()), v);
        Ok(())
    })?;
    t.storage_history().for_each_row_rev::<76, &'static [u8]>(|k, v| {
        push_row(&mut rows[1], &k[4..68], u64::from_be_bytes(k[68..76].try_into().unwrap()), v);
        Ok(())
    })?;
    t.history(&t.account_trie_history, &t.account_trie_epochs, Kind::AccountTrieHistory)
        .for_each_row_rev::<45, &'static [u8]>(|k, v| {
        push_row(&mut rows[2], &k[4..37], u64::from_be_bytes(k[37..45].try_into().unwrap()), v);
        Ok(())
    })?;
    t.history(&t.storage_trie_history, &t.storage_trie_epochs, Kind::StorageTrieHistory)
        .for_each_row_rev::<77, &'static [u8]>(|k, v| {
        push_row(&mut rows[3], &k[4..69], u64::from_be_bytes(k[69..77].try_into().unwrap()), v);
        Ok(())
    })?;
    eprintln!(
        "history entities: {} accounts, {} slots, {} account-trie nodes, {} storage-trie nodes ({:.1} s)",
        rows[0].len(),
        rows[1].len(),
        rows[2].len(),
        rows[3].len(),
        started.elapsed().as_secs_f64()
    );

    // Where the bulk import commits. It settles a state root at each epoch's last block and
    // at each group's end, but the trie nodes a transaction changes are held in memory
    // (`storage::NodeWrites`: each read from the table at its first change, and written once,
    // in key order, at the commit), so the node tables see one read and one write per changed
    // node and group.
    let commits = |b: u64| b.is_multiple_of(batch) || b == head;
    let mut settle_of = vec![0u64; head as usize + 2];
    let mut next = head;
    for b in (1..=head).rev() {
        if commits(b) {
            next = b;
        }
        settle_of[b as usize] = next;
    }

    let mut genesis: Vec<Op> = Vec::new();
    let mut ops: Vec<(u64, Op)> = Vec::new();
    let mut counts = [0u64; 4];
    for table in 0..4u8 {
        let ti = table as usize;
        let mut table_rows = std::mem::take(&mut rows[ti]);
        // Entities with no history: their value at block 0 is the current one.
        for (k, v) in &current[ti] {
            if !table_rows.contains_key(k) {
                genesis.push(Op { table, key: k.clone(), value: Some(v.clone()) });
            }
        }
        for (key, mut list) in table_rows.drain() {
            // Newest first: each row's "before" resolves against the next version.
            list.sort_by(|a, b| b.0.cmp(&a.0));
            let mut next: Vec<u8> = current[ti].get(&key).cloned().unwrap_or_default();
            // (block, value after the block) newest first.
            let mut after: Vec<(u64, Vec<u8>, Vec<u8>)> = Vec::with_capacity(list.len());
            for (block, before) in list {
                let before = if table >= 2 {
                    loupe::storage::resolve_node_row(&before, &next)
                        .map_err(|e| format!("{}: {e}", TABLES[ti]))?
                } else {
                    before
                };
                after.push((block, next, before.clone()));
                next = before;
            }
            // `next` is now the value before the oldest row.
            after.reverse(); // oldest first
            let mut at_genesis = next;
            let mut changes: Vec<(u64, Vec<u8>, Vec<u8>)> = Vec::new(); // block, before, after
            for (block, value_after, before) in after {
                if block == 0 {
                    at_genesis = value_after;
                } else {
                    changes.push((block, before, value_after));
                }
            }
            if !at_genesis.is_empty() {
                genesis.push(Op { table, key: key.clone(), value: Some(at_genesis) });
            }
            if table < 2 {
                for (block, _, value) in changes {
                    let value = (!value.is_empty()).then_some(value);
                    ops.push((block, Op { table, key: key.clone(), value }));
                    counts[ti] += 1;
                }
            } else {
                // One write per commit group: the value after the group's last change, unless
                // the node is as it was before the group's first change.
                let mut i = 0;
                while i < changes.len() {
                    let s = settle_of[changes[i].0 as usize];
                    let before = changes[i].1.clone();
                    let mut j = i;
                    while j + 1 < changes.len() && settle_of[changes[j + 1].0 as usize] == s {
                        j += 1;
                    }
                    let value = changes[j].2.clone();
                    if value != before {
                        let value = (!value.is_empty()).then_some(value);
                        ops.push((s, Op { table, key: key.clone(), value }));
                        counts[ti] += 1;
                    }
                    i = j + 1;
                }
            }
        }
    }
    genesis.sort_by(|a, b| (a.table, &a.key).cmp(&(b.table, &b.key)));
    ops.sort_by(|a, b| (a.0, a.1.table, &a.1.key).cmp(&(b.0, b.1.table, &b.1.key)));
    eprintln!(
        "block 0 state: {} rows; writes over blocks 1..={head}: {} accounts, {} slots, {} account-trie nodes, {} storage-trie nodes",
        genesis.len(),
        counts[0],
        counts[1],
        counts[2],
        counts[3]
    );

    let mut w = BufWriter::with_capacity(1 << 20, File::create(out)?);
    for op in &genesis {
        write_op(&mut w, op)?;
    }
    w.write_all(&[TAG_END_GENESIS])?;
    let mut it = ops.iter().peekable();
    for b in 1..=head {
        while let Some((_, op)) = it.next_if(|(block, _)| *block == b) {
            write_op(&mut w, op)?;
        }
        w.write_all(&[TAG_END_BLOCK])?;
        w.write_all(&b.to_le_bytes())?;
        w.write_all(&[u8::from(commits(b))])?;
    }
    w.write_all(&[TAG_END])?;
    w.flush()?;

    // Probes for the read paths, from the head state: random accounts, and random storage
    // slots with up to three more slots of the same account.
    let mut rng = Rng(62);
    let accounts: Vec<&Vec<u8>> = current[0].keys().collect();
    let slots: Vec<&Vec<u8>> = current[1].keys().collect();
    let mut by_account: HashMap<&[u8], Vec<&[u8]>> = HashMap::new();
    for s in &slots {
        by_account.entry(&s[..32]).or_default().push(&s[32..]);
    }
    let mut p = BufWriter::new(File::create(probes_out)?);
    let n_accounts = 20_000u32;
    p.write_all(&n_accounts.to_le_bytes())?;
    for _ in 0..n_accounts {
        p.write_all(accounts[rng.below(accounts.len())])?;
    }
    let n_calls = if slots.is_empty() { 0u32 } else { 20_000 };
    p.write_all(&n_calls.to_le_bytes())?;
    for _ in 0..n_calls {
        let s = slots[rng.below(slots.len())];
        let others = &by_account[&s[..32]];
        p.write_all(accounts[rng.below(accounts.len())])?; // the caller
        p.write_all(&s[..32])?; // the contract
        for i in 0..4 {
            // The slot, then three more of the same contract (repeats where it has fewer).
            let slot = if i == 0 { &s[32..] } else { others[rng.below(others.len())] };
            p.write_all(slot)?;
        }
    }
    p.flush()?;
    eprintln!("extracted in {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// Checks the workload against loupe's own history lookup: applies block 0's state and the
/// blocks up to `at` in memory, then for every account and slot the datadir knows compares the
/// value with what `History::first_after` (the lookup `StateAt` uses) answers at `at`.
fn check(datadir: &Path, workload: &Path, at: u64) -> Res<()> {
    let db = loupe::storage::Database::open(datadir)?;
    let reader = db.begin_read()?;
    let t = reader.trie_tables();
    let (mut w, genesis) = Workload::open(workload)?;
    let mut state: [HashMap<Vec<u8>, Vec<u8>>; 2] = Default::default();
    let mut apply = |op: Op| {
        if op.table < 2 {
            let m = &mut state[op.table as usize];
            match op.value {
                Some(v) => {
                    m.insert(op.key, v);
                }
                None => {
                    m.remove(&op.key);
                }
            }
        }
    };
    for op in genesis {
        apply(op);
    }
    'groups: while let Some(group) = w.next_group()? {
        for b in group {
            if b.number > at {
                break 'groups;
            }
            for op in b.ops {
                apply(op);
            }
        }
    }
    // Every key the datadir has now or had: the current tables and the replayed ones.
    let mut keys: [std::collections::BTreeSet<Vec<u8>>; 2] = Default::default();
    for item in t.hashed_accounts.iter()? {
        keys[0].insert(item?.0.value().to_vec());
    }
    for item in t.hashed_storage.iter()? {
        keys[1].insert(item?.0.value().to_vec());
    }
    for (i, m) in state.iter().enumerate() {
        keys[i].extend(m.keys().cloned());
    }
    let mut checked = [0u64; 2];
    let mut differ = [0u64; 2];
    for (i, set) in keys.iter().enumerate() {
        for key in set {
            let current = if i == 0 {
                t.hashed_accounts
                    .get(<&[u8; 32]>::try_from(key.as_slice())?)?
                    .map(|v| v.value().to_vec())
            } else {
                t.hashed_storage
                    .get(<&[u8; 64]>::try_from(key.as_slice())?)?
                    .map(|v| v.value().to_vec())
            };
            let stamp =
                current.as_deref().map(|v| loupe::storage::row_stamp(v, TABLES[i])).transpose()?;
            let row = if i == 0 {
                t.account_history().first_after::<32, 44, 36, &'static [u8]>(
                    key.as_slice().try_into()?,
                    at,
                    stamp,
                )?
            } else {
                t.storage_history().first_after::<64, 76, 68, &'static [u8]>(
                    key.as_slice().try_into()?,
                    at,
                    stamp,
                )?
            };
            let loupe_value = match row {
                Some((_, v)) => (!v.is_empty()).then_some(v),
                None => current,
            };
            checked[i] += 1;
            if loupe_value.as_ref() != state[i].get(key) {
                differ[i] += 1;
            }
        }
    }
    println!(
        "CHECK at block {at}: accounts {} checked, {} differ; slots {} checked, {} differ",
        checked[0], differ[0], checked[1], differ[1]
    );
    if differ != [0, 0] {
        return Err("the workload differs from loupe's history".into());
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Engines.
// ---------------------------------------------------------------------------------------------

const REDB_CACHE: usize = loupe::storage::DEFAULT_CACHE_BYTES;

const R_ACC: redb::TableDefinition<'_, &[u8; 32], &[u8]> =
    redb::TableDefinition::new("hashed_accounts");
const R_STO: redb::TableDefinition<'_, &[u8; 64], &[u8]> =
    redb::TableDefinition::new("hashed_storage");
const R_AT: redb::TableDefinition<'_, &[u8; 33], &[u8]> =
    redb::TableDefinition::new("account_trie");
const R_ST: redb::TableDefinition<'_, &[u8; 65], &[u8]> =
    redb::TableDefinition::new("storage_trie");

enum Engine {
    Redb(redb::Database),
    Mdbx(libmdbx::Database<libmdbx::WriteMap>),
    Fjall(fjall::Database, [fjall::Keyspace; 4]),
}

fn open_engine(name: &str, dir: &Path) -> Res<Engine> {
    std::fs::create_dir_all(dir)?;
    Ok(match name {
        "redb" => {
            let db = redb::Database::builder()
                .set_cache_size(REDB_CACHE)
                .create(dir.join("state.redb"))?;
            let txn = db.begin_write()?;
            txn.open_table(R_ACC)?;
            txn.open_table(R_STO)?;
            txn.open_table(R_AT)?;
            txn.open_table(R_ST)?;
            txn.commit()?;
            Engine::Redb(db)
        }
        "mdbx" => {
            use libmdbx::{DatabaseOptions, Mode, ReadWriteOptions, SyncMode};
            let db = libmdbx::Database::<libmdbx::WriteMap>::open_with_options(
                dir,
                DatabaseOptions {
                    max_tables: Some(8),
                    mode: Mode::ReadWrite(ReadWriteOptions {
                        sync_mode: SyncMode::Durable,
                        max_size: Some(1 << 40),
                        growth_step: Some(16 << 20),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
            )?;
            let txn = db.begin_rw_txn()?;
            for name in TABLES {
                txn.create_table(Some(name), libmdbx::TableFlags::default())?;
            }
            txn.commit()?;
            Engine::Mdbx(db)
        }
        "fjall" => {
            // The same block cache as loupe gives redb.
            let db = fjall::Database::builder(dir).cache_size(REDB_CACHE as u64).open()?;
            let ks = |n: &str| db.keyspace(n, fjall::KeyspaceCreateOptions::default);
            let spaces = [ks(TABLES[0])?, ks(TABLES[1])?, ks(TABLES[2])?, ks(TABLES[3])?];
            Engine::Fjall(db, spaces)
        }
        e => return Err(format!("unknown engine {e}").into()),
    })
}

fn redb_apply<const N: usize>(
    t: &mut redb::Table<'_, &'static [u8; N], &'static [u8]>,
    op: &Op,
    read_first: bool,
    sink: &mut u64,
) -> Res<()> {
    let key: &[u8; N] = op.key.as_slice().try_into()?;
    if read_first && let Some(v) = t.get(key)? {
        *sink += v.value().len() as u64;
    }
    match &op.value {
        Some(v) => {
            t.insert(key, v.as_slice())?;
        }
        None => {
            t.remove(key)?;
        }
    }
    Ok(())
}

impl Engine {
    /// Writes `blocks` in one transaction (one batch for fjall) and commits it durably. With
    /// `read_first`, every written key is read first, as the import's execution and trie walk
    /// read what they then change.
    fn write_group(&self, blocks: &[Block], read_first: bool) -> Res<u64> {
        let mut sink = 0u64;
        match self {
            Engine::Redb(db) => {
                let txn = db.begin_write()?;
                {
                    let mut acc = txn.open_table(R_ACC)?;
                    let mut sto = txn.open_table(R_STO)?;
                    let mut at = txn.open_table(R_AT)?;
                    let mut st = txn.open_table(R_ST)?;
                    for op in blocks.iter().flat_map(|b| &b.ops) {
                        match op.table {
                            0 => redb_apply(&mut acc, op, read_first, &mut sink)?,
                            1 => redb_apply(&mut sto, op, read_first, &mut sink)?,
                            2 => redb_apply(&mut at, op, read_first, &mut sink)?,
                            _ => redb_apply(&mut st, op, read_first, &mut sink)?,
                        }
                    }
                }
                txn.commit()?;
            }
            Engine::Mdbx(db) => {
                let txn = db.begin_rw_txn()?;
                let tables = [
                    txn.open_table(Some(TABLES[0]))?,
                    txn.open_table(Some(TABLES[1]))?,
                    txn.open_table(Some(TABLES[2]))?,
                    txn.open_table(Some(TABLES[3]))?,
                ];
                for op in blocks.iter().flat_map(|b| &b.ops) {
                    let t = &tables[op.table as usize];
                    if read_first && let Some(v) = txn.get::<Vec<u8>>(t, &op.key)? {
                        sink += v.len() as u64;
                    }
                    match &op.value {
                        Some(v) => txn.put(t, &op.key, v, libmdbx::WriteFlags::UPSERT)?,
                        None => {
                            txn.del(t, &op.key, None)?;
                        }
                    }
                }
                txn.commit()?;
            }
            Engine::Fjall(db, spaces) => {
                // One atomic batch per group. A batch is not readable before its commit, so
                // the group's own writes are kept in an overlay that reads look at first, as a
                // port would (redb and MDBX read their open transaction's writes).
                let mut batch = db.batch();
                let mut overlay: HashMap<(u8, &[u8]), Option<&[u8]>> = HashMap::new();
                for op in blocks.iter().flat_map(|b| &b.ops) {
                    let ks = &spaces[op.table as usize];
                    if read_first {
                        match overlay.get(&(op.table, op.key.as_slice())) {
                            Some(v) => sink += v.map_or(0, |v| v.len() as u64),
                            None => {
                                if let Some(v) = ks.get(&op.key)? {
                                    sink += v.len() as u64;
                                }
                            }
                        }
                        overlay.insert((op.table, op.key.as_slice()), op.value.as_deref());
                    }
                    match &op.value {
                        Some(v) => batch.insert(ks, op.key.clone(), v.clone()),
                        None => batch.remove(ks, op.key.clone()),
                    }
                }
                batch.commit()?;
                db.persist(fjall::PersistMode::SyncAll)?;
            }
        }
        Ok(sink)
    }

    fn get(&self, r: &Reading<'_>, table: usize, key: &[u8]) -> Res<usize> {
        Ok(match (self, r) {
            (_, Reading::Redb(t)) => match table {
                0 => t.0.get(<&[u8; 32]>::try_from(key)?)?.map_or(0, |v| v.value().len()),
                1 => t.1.get(<&[u8; 64]>::try_from(key)?)?.map_or(0, |v| v.value().len()),
                2 => t.2.get(<&[u8; 33]>::try_from(key)?)?.map_or(0, |v| v.value().len()),
                _ => t.3.get(<&[u8; 65]>::try_from(key)?)?.map_or(0, |v| v.value().len()),
            },
            (_, Reading::Mdbx(txn, tables)) => {
                txn.get::<std::borrow::Cow<'_, [u8]>>(&tables[table], key)?.map_or(0, |v| v.len())
            }
            (Engine::Fjall(_, spaces), Reading::Fjall) => {
                spaces[table].get(key)?.map_or(0, |v| v.len())
            }
            _ => unreachable!(),
        })
    }

    /// The first key at or after `from` in `table`, if it starts with `prefix`'s bytes, and
    /// then up to `more` further keys with that prefix: returns (whether the first key equals
    /// `from`, rows read).
    fn seek(
        &self,
        r: &Reading<'_>,
        table: usize,
        from: &[u8],
        prefix: &[u8],
        more: usize,
    ) -> Res<(bool, usize)> {
        let mut exact = false;
        let mut n = 0usize;
        let mut visit = |k: &[u8]| -> bool {
            if n == 0 && k == from {
                exact = true;
            }
            if !k.starts_with(prefix) || n > more {
                return false;
            }
            n += 1;
            true
        };
        match (self, r) {
            (_, Reading::Redb(t)) => match table {
                0 => {
                    let k: &[u8; 32] = from.try_into()?;
                    for item in t.0.range::<&[u8; 32]>(k..)? {
                        if !visit(item?.0.value()) {
                            break;
                        }
                    }
                }
                2 => {
                    let k: &[u8; 33] = from.try_into()?;
                    for item in t.2.range::<&[u8; 33]>(k..)? {
                        if !visit(item?.0.value()) {
                            break;
                        }
                    }
                }
                _ => return Err("seek: table".into()),
            },
            (_, Reading::Mdbx(txn, tables)) => {
                let mut c = txn.cursor(&tables[table])?;
                for item in c.iter_from::<std::borrow::Cow<'_, [u8]>, ()>(from) {
                    if !visit(&item?.0) {
                        break;
                    }
                }
            }
            (Engine::Fjall(_, spaces), Reading::Fjall) => {
                for item in spaces[table].range(from.to_vec()..) {
                    let (k, _) = item.into_inner()?;
                    if !visit(k.as_ref()) {
                        break;
                    }
                }
            }
            _ => unreachable!(),
        }
        Ok((exact, n))
    }
}

type RedbTables = (
    redb::ReadOnlyTable<&'static [u8; 32], &'static [u8]>,
    redb::ReadOnlyTable<&'static [u8; 64], &'static [u8]>,
    redb::ReadOnlyTable<&'static [u8; 33], &'static [u8]>,
    redb::ReadOnlyTable<&'static [u8; 65], &'static [u8]>,
);

/// An open read snapshot.
enum Reading<'a> {
    Redb(Box<RedbTables>),
    Mdbx(libmdbx::Transaction<'a, libmdbx::RO, libmdbx::WriteMap>, Vec<libmdbx::Table<'a>>),
    Fjall,
}

fn begin_read(engine: &Engine) -> Res<Reading<'_>> {
    use redb::ReadableDatabase;
    Ok(match engine {
        Engine::Redb(db) => {
            let txn = db.begin_read()?;
            Reading::Redb(Box::new((
                txn.open_table(R_ACC)?,
                txn.open_table(R_STO)?,
                txn.open_table(R_AT)?,
                txn.open_table(R_ST)?,
            )))
        }
        Engine::Mdbx(db) => {
            let txn = db.begin_ro_txn()?;
            // Open the tables once per snapshot (reopening them per read would cost a name
            // lookup each time).
            let tables: Vec<libmdbx::Table<'_>> =
                TABLES.iter().map(|n| txn.open_table(Some(n))).collect::<Result<_, _>>()?;
            // SAFETY: a table handle is a plain dbi number with a lifetime marker; it stays valid
            // for as long as the transaction it is kept beside in `Reading::Mdbx`.
            let tables: Vec<libmdbx::Table<'_>> = unsafe { std::mem::transmute(tables) };
            Reading::Mdbx(txn, tables)
        }
        Engine::Fjall(..) => Reading::Fjall,
    })
}

// ---------------------------------------------------------------------------------------------
// Measurements.
// ---------------------------------------------------------------------------------------------

fn cpu_seconds() -> f64 {
    // SAFETY: getrusage fills a plain struct.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(u.ru_utime) + tv(u.ru_stime)
}

fn status_kib(field: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Resets the peak RSS (VmHWM) to the current RSS; false where the kernel refuses.
fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// Bytes allocated on disk under `dir` (st_blocks), and the files' apparent size.
fn disk_bytes(dir: &Path) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    let mut alloc = 0;
    let mut len = 0;
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let Ok(m) = e.metadata() else { continue };
            if m.is_dir() {
                let (a, l) = disk_bytes(&e.path());
                alloc += a;
                len += l;
            } else {
                alloc += m.blocks() * 512;
                len += m.len();
            }
        }
    }
    (alloc, len)
}

fn replay(engine_name: &str, workload: &Path, dir: &Path, read_first: bool) -> Res<()> {
    if dir.exists() {
        std::fs::remove_dir_all(dir)?;
    }
    let (mut w, genesis) = Workload::open(workload)?;
    let engine = open_engine(engine_name, dir)?;
    let g0 = Instant::now();
    // Block 0's state in one commit, as `loupe init` writes it.
    engine.write_group(&[Block { number: 0, ops: genesis }], false)?;
    let genesis_s = g0.elapsed().as_secs_f64();
    let peak_reset = reset_peak();
    let cpu0 = cpu_seconds();
    let t0 = Instant::now();
    let mut blocks = 0u64;
    let mut ops = 0u64;
    let mut commits = 0u64;
    let mut sink = 0u64;
    let mut last = 0;
    while let Some(group) = w.next_group()? {
        blocks += group.len() as u64;
        ops += group.iter().map(|b| b.ops.len() as u64).sum::<u64>();
        last = group.last().map_or(last, |b| b.number);
        sink += engine.write_group(&group, read_first)?;
        commits += 1;
    }
    drop(engine);
    let wall = t0.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu0;
    let peak = status_kib("VmHWM:");
    let (alloc, len) = disk_bytes(dir);
    println!(
        "RESULT replay engine={engine_name} blocks={blocks} last={last} ops={ops} commits={commits} genesis_s={genesis_s:.2} wall_s={wall:.2} cpu_s={cpu:.2} disk_mib={:.1} apparent_mib={:.1} peak_rss_mib={:.1} peak_reset={peak_reset} read_first={read_first} sink={sink}",
        alloc as f64 / 1048576.0,
        len as f64 / 1048576.0,
        peak as f64 / 1024.0
    );
    Ok(())
}

/// Packs the first `d` nibbles of `hash` as loupe's trie keys do: 32 bytes, two nibbles a
/// byte, zero padded, then the length.
fn trie_key(hash: &[u8], d: usize) -> [u8; 33] {
    let mut k = [0u8; 33];
    for i in 0..d {
        let nib = if i % 2 == 0 { hash[i / 2] >> 4 } else { hash[i / 2] & 0x0f };
        k[i / 2] |= if i % 2 == 0 { nib << 4 } else { nib };
    }
    k[32] = d as u8;
    k
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    if v.is_empty() { 0.0 } else { v[v.len() / 2] }
}

fn read_probes(path: &Path) -> Res<(Vec<[u8; 32]>, Vec<[[u8; 32]; 6]>)> {
    let mut r = BufReader::new(File::open(path)?);
    let mut n = [0u8; 4];
    r.read_exact(&mut n)?;
    let mut accounts = vec![[0u8; 32]; u32::from_le_bytes(n) as usize];
    for a in &mut accounts {
        r.read_exact(a)?;
    }
    r.read_exact(&mut n)?;
    let mut calls = vec![[[0u8; 32]; 6]; u32::from_le_bytes(n) as usize];
    for c in &mut calls {
        for x in c.iter_mut() {
            r.read_exact(x)?;
        }
    }
    Ok((accounts, calls))
}

fn read(engine_name: &str, dir: &Path, probes: &Path) -> Res<()> {
    let (accounts, calls) = read_probes(probes)?;
    let engine = open_engine(engine_name, dir)?;
    let r = begin_read(&engine)?;
    let mut sink = 0usize;
    // eth_getBalance at the head: one hashed-account point get.
    let get = |sink: &mut usize, a: &[u8; 32]| -> Res<()> {
        *sink += engine.get(&r, 0, a)?;
        Ok(())
    };
    // eth_getProof at the head (account part): the stored branch nodes along the account's
    // path, each found by a cursor seek as the proof walk finds them, then the leaves under
    // the deepest one (a range over hashed_accounts with that prefix).
    let proof = |sink: &mut usize, a: &[u8; 32]| -> Res<()> {
        let mut depth = 0;
        for d in 0..64 {
            let k = trie_key(a, d);
            let (exact, n) = engine.seek(&r, 2, &k, &k[..d / 2], 0)?;
            *sink += n;
            if !exact {
                break;
            }
            depth = d;
        }
        let prefix = trie_key(a, depth + 1);
        let mut from = [0u8; 32];
        from.copy_from_slice(&prefix[..32]);
        let bytes = (depth + 2) / 2;
        let (_, n) = engine.seek(&r, 0, &from, &from[..bytes.min(32)], 256)?;
        *sink += n;
        Ok(())
    };
    // trace_call's state reads: the caller's account, the contract's, four of its slots
    // (three more of the same contract) and two unset ones.
    let call = |sink: &mut usize, c: &[[u8; 32]; 6]| -> Res<()> {
        *sink += engine.get(&r, 0, &c[0])?;
        *sink += engine.get(&r, 0, &c[1])?;
        let mut key = [0u8; 64];
        key[..32].copy_from_slice(&c[1]);
        for s in &c[2..6] {
            key[32..].copy_from_slice(s);
            *sink += engine.get(&r, 1, &key)?;
        }
        for i in 0..2u8 {
            key[32..].copy_from_slice(&c[2]);
            key[63] ^= 0x5a + i;
            *sink += engine.get(&r, 1, &key)?;
        }
        Ok(())
    };
    // Warm-up: one pass over a tenth of the probes, untimed.
    for a in accounts.iter().take(accounts.len() / 10) {
        get(&mut sink, a)?;
        proof(&mut sink, a)?;
    }
    for c in calls.iter().take(calls.len() / 10) {
        call(&mut sink, c)?;
    }
    // Two timed passes over the same probes: the first after the short warm-up (redb's own
    // cache still cold, the OS page cache warm from the replay), the second warm.
    let pass = |sink: &mut usize| -> Res<[Vec<f64>; 5]> {
        let mut times = [Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new()];
        for a in accounts.iter().rev() {
            let t = Instant::now();
            get(sink, a)?;
            times[0].push(t.elapsed().as_nanos() as f64 / 1000.0);
        }
        for a in accounts.iter().rev() {
            let t = Instant::now();
            proof(sink, a)?;
            times[1].push(t.elapsed().as_nanos() as f64 / 1000.0);
        }
        for c in calls.iter().rev() {
            let t = Instant::now();
            call(sink, c)?;
            times[2].push(t.elapsed().as_nanos() as f64 / 1000.0);
        }
        // The parts of the trace_call-like reads: a stored slot's get, an unset slot's.
        for c in calls.iter().rev() {
            let mut key = [0u8; 64];
            key[..32].copy_from_slice(&c[1]);
            key[32..].copy_from_slice(&c[2]);
            let t = Instant::now();
            *sink += engine.get(&r, 1, &key)?;
            times[3].push(t.elapsed().as_nanos() as f64 / 1000.0);
            key[63] ^= 0x33;
            let t = Instant::now();
            *sink += engine.get(&r, 1, &key)?;
            times[4].push(t.elapsed().as_nanos() as f64 / 1000.0);
        }
        Ok(times)
    };
    let cpu0 = cpu_seconds();
    let times = pass(&mut sink)?;
    let warm = pass(&mut sink)?;
    let cpu = cpu_seconds() - cpu0;
    let [mut g, mut p, mut c, mut slot, mut miss] = times;
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let (gm, pm, cm) = (mean(&g), mean(&p), mean(&c));
    println!(
        "RESULT read engine={engine_name} get_us={:.2} proof_us={:.2} call_us={:.2} get_mean_us={gm:.2} proof_mean_us={pm:.2} call_mean_us={cm:.2} slot_us={:.2} unset_slot_us={:.2} cpu_s={cpu:.2} n_get={} n_call={} sink={sink}",
        median(&mut g),
        median(&mut p),
        median(&mut c),
        median(&mut slot),
        median(&mut miss),
        accounts.len(),
        calls.len()
    );
    let [mut g, mut p, mut c, mut slot, mut miss] = warm;
    println!(
        "RESULT_WARM get_warm_us={:.2} proof_warm_us={:.2} call_warm_us={:.2} slot_warm_us={:.2} unset_slot_warm_us={:.2}",
        median(&mut g),
        median(&mut p),
        median(&mut c),
        median(&mut slot),
        median(&mut miss),
    );
    Ok(())
}

fn field(line: &str, name: &str) -> Option<f64> {
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
        .and_then(|v| v.parse().ok())
}

/// Runs `reps` alternating repetitions (redb, mdbx, fjall, redb, …) of replay then read, each
/// in its own process, and prints the medians as a table.
fn bench(workload: &Path, probes: &Path, work: &Path, reps: usize, engines: &[String]) -> Res<()> {
    let exe = std::env::current_exe()?;
    let mut results: HashMap<String, Vec<(String, String)>> = HashMap::new();
    for rep in 0..reps {
        for e in engines {
            let dir = work.join(e);
            let run = |args: &[&str]| -> Res<String> {
                let out = std::process::Command::new(&exe).args(args).output()?;
                if !out.status.success() {
                    return Err(format!(
                        "{args:?} failed: {}",
                        String::from_utf8_lossy(&out.stderr)
                    )
                    .into());
                }
                let s = String::from_utf8(out.stdout)?;
                Ok(s.lines().filter(|l| l.starts_with("RESULT")).collect::<Vec<_>>().join(" "))
            };
            let loadavg = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
            let rl = run(&[
                "replay",
                "--engine",
                e,
                "--workload",
                &workload.display().to_string(),
                "--dir",
                &dir.display().to_string(),
            ])?;
            eprintln!("rep {rep} load {} {rl}", loadavg.trim());
            let rd = run(&[
                "read",
                "--engine",
                e,
                "--dir",
                &dir.display().to_string(),
                "--probes",
                &probes.display().to_string(),
            ])?;
            eprintln!("rep {rep} {rd}");
            results.entry(e.clone()).or_default().push((rl, rd));
            std::fs::remove_dir_all(&dir)?;
        }
    }
    let cols: [(&str, bool, &str); 14] = [
        ("replay wall s", true, "wall_s"),
        ("CPU s", true, "cpu_s"),
        ("MiB on disk", true, "disk_mib"),
        ("peak RSS MiB", true, "peak_rss_mib"),
        ("point get µs", false, "get_us"),
        ("proof walk µs", false, "proof_us"),
        ("trace_call-like reads µs", false, "call_us"),
        ("of which: a stored slot µs", false, "slot_us"),
        ("an unset slot µs", false, "unset_slot_us"),
        ("warm: point get µs", false, "get_warm_us"),
        ("warm: proof walk µs", false, "proof_warm_us"),
        ("warm: trace_call-like µs", false, "call_warm_us"),
        ("warm: a stored slot µs", false, "slot_warm_us"),
        ("warm: an unset slot µs", false, "unset_slot_warm_us"),
    ];
    let med = |e: &str, replay: bool, f: &str| -> f64 {
        let mut v: Vec<f64> = results[e]
            .iter()
            .filter_map(|(rl, rd)| field(if replay { rl } else { rd }, f))
            .collect();
        median(&mut v)
    };
    println!();
    println!("| engine | {} |", cols.iter().map(|c| c.0).collect::<Vec<_>>().join(" | "));
    println!("|---|{}", "---|".repeat(cols.len()));
    let base = engines[0].as_str();
    for e in engines {
        let cells: Vec<String> = cols
            .iter()
            .map(|(_, replay, f)| {
                let v = med(e, *replay, f);
                let b = med(base, *replay, f);
                if e == base { format!("{v:.2}") } else { format!("{v:.2} ({:.2}×)", v / b) }
            })
            .collect();
        println!("| {e} | {} |", cells.join(" | "));
    }
    Ok(())
}

fn arg(args: &[String], name: &str) -> Res<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
        .ok_or_else(|| format!("missing {name}").into())
}

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().collect();
    let path = |n: &str| arg(&args, n).map(PathBuf::from);
    match args.get(1).map(String::as_str) {
        Some("extract") => extract(&path("--datadir")?, &path("--out")?, &path("--probes")?),
        Some("replay") => replay(
            &arg(&args, "--engine")?,
            &path("--workload")?,
            &path("--dir")?,
            !args.iter().any(|a| a == "--no-read-first"),
        ),
        Some("check") => {
            check(&path("--datadir")?, &path("--workload")?, arg(&args, "--at")?.parse()?)
        }
        Some("read") => read(&arg(&args, "--engine")?, &path("--dir")?, &path("--probes")?),
        Some("bench") => {
            let engines: Vec<String> = arg(&args, "--engines")
                .unwrap_or_else(|_| "redb,mdbx,fjall".into())
                .split(',')
                .map(str::to_string)
                .collect();
            let reps = arg(&args, "--reps").ok().and_then(|r| r.parse().ok()).unwrap_or(3);
            bench(&path("--workload")?, &path("--probes")?, &path("--work")?, reps, &engines)
        }
        _ => {
            eprintln!(
                "usage: engines extract --datadir D --out W --probes P\n       engines check --datadir D --workload W --at BLOCK\n       engines replay --engine redb|mdbx|fjall --workload W --dir X [--no-read-first]\n       engines read --engine E --dir X --probes P\n       engines bench --workload W --probes P --work DIR [--reps 3] [--engines redb,mdbx,fjall]"
            );
            std::process::exit(2)
        }
    }
}
