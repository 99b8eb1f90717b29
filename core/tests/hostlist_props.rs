//! The hostlist round trip, by property: any list of node names (a prefix, an optional
//! number with or without leading zeros) compressed as `scontrol show hostlist` would, then
//! expanded as `scontrol show hostnames` would, gives back the same names in the same order.

use proptest::prelude::*;
use slurmwatch_core::slurm::hostlist::{compress, expand};

fn name() -> impl Strategy<Value = String> {
    (
        prop::sample::select(vec!["n", "node", "gpu-a", "cn", "x"]),
        prop::option::weighted(0.9, (0u64..1200, 0usize..5)),
    )
        .prop_map(|(prefix, num)| match num {
            Some((n, width)) => format!("{prefix}{n:0width$}"),
            None => prefix.to_string(),
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn compress_then_expand_gives_the_names_back(names in prop::collection::vec(name(), 1..40)) {
        let mut names = names;
        names.dedup(); // Slurm's hostlists hold each name once in a row
        let list = compress(&names);
        let back = expand(&list).map_err(|e| TestCaseError::fail(format!("{list}: {e}")))?;
        prop_assert_eq!(back, names, "{}", list);
    }
}
