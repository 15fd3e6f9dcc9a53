//! Fuzz target `params`: seeds are every method's example call as `method\nparams`;
//! `loupe_fuzz::checks::params` says what must hold.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(
    init: {
        let seeds = loupe_fuzz::example_calls()
            .into_iter()
            .map(|(m, p)| format!("{m}\n{p}").into_bytes());
        loupe_fuzz::write_seeds(seeds);
    },
    |data: &[u8]| loupe_fuzz::checks::params(data)
);
