//! The storage layer's in-memory caches: headers by number ([`blocks`]), contract code by hash
//! ([`code`]) and the hashes of the addresses and slots state reads key by ([`hashes`]).

pub(crate) mod blocks;
pub(crate) mod code;
pub(crate) mod hashes;

pub(crate) use blocks::BlockCache;
