//! Prints every table's row count, stored bytes and pages: where a datadir's size goes.
//! Usage: `cargo run --release --example db_stats -- DATADIR`.

use redb::{ReadableDatabase, ReadableTableMetadata, TableHandle};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args().nth(1).ok_or("usage: db_stats DATADIR")?;
    let db = redb::Database::open(std::path::Path::new(&dir).join(loupe::storage::DB_FILE))?;
    let txn = db.begin_read()?;
    println!("| table | rows | stored MiB | leaf pages | branch pages | fragmented MiB |");
    println!("|---|---|---|---|---|---|");
    for handle in txn.list_tables()? {
        let def = redb::TableDefinition::<&[u8], &[u8]>::new(handle.name());
        let Ok(table) = txn.open_untyped_table(def) else { continue };
        let s = table.stats()?;
        println!(
            "| {} | {} | {:.1} | {} | {} | {:.1} |",
            handle.name(),
            table.len()?,
            s.stored_bytes() as f64 / 1048576.0,
            s.leaf_pages(),
            s.branch_pages(),
            s.fragmented_bytes() as f64 / 1048576.0
        );
    }
    Ok(())
}
