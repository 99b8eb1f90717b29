//! Hugging Face's Trainer: the dict lines that carry rates. Its progress is its tqdm bar (read
//! by [`super::tqdm`]); its `{'loss': …, 'learning_rate': …, 'epoch': 1.0}` lines carry no
//! rate and are left out.
//!
//! What it prints (no transformers was run here: from a log a user published, see the test):
//! at the end of training `{'train_runtime': 120.4288, 'train_samples_per_second': 16.607,
//! 'train_steps_per_second': 8.304, 'train_loss': 0.13, 'epoch': 100.0}`, and after each
//! evaluation the same with `eval_`. A dict the script prints itself (`test_results = {…}`,
//! `TrainOutput(…)`) does not start the line, and is not read.

use super::{number, Rate, Reading, Tool};

/// `{'PREFIX_runtime': S, 'PREFIX_THINGS_per_second': R, …}`: the rates in `THINGS/s`, the
/// runtime as seconds, and PREFIX (`train`, `eval`) as the label.
pub(super) fn parse(line: &str) -> Option<Reading> {
    let body = line.trim().strip_prefix("{'")?.strip_suffix('}')?;
    let mut r = Reading::new(Tool::HfTrainer);
    for item in body.split(", '") {
        let (key, value) = item.split_once("': ")?;
        let Some((prefix, what)) = key.split_once('_') else {
            continue;
        };
        if what == "runtime" {
            r.elapsed_seconds = number(value);
        } else if let Some(things) = what.strip_suffix("_per_second") {
            r.rates
                .extend(Rate::new(number(value)?, format!("{things}/s")));
            r.label = Some(prefix.to_string());
        }
    }
    (!r.rates.is_empty()).then_some(r)
}

#[cfg(test)]
mod tests {
    use super::super::{readings, Tool};
    use super::parse;

    /// A Hugging Face Trainer run (transformers ≥ 4.38: its logs have `grad_norm`; the version is
    /// not given) as its user pasted it into fahimfarhan/mqtl-classification,
    /// src/experiment/tiny-overfit-test/temp.py (commit 5d41e35de3cc, the "hyenaDNA" block):
    /// tqdm bars with a logger's lines after them, loss dicts, the final train dict, an
    /// evaluation; verbatim, with the user's own `... ... ...` for what they left out.
    const CAPTURE: &str =
        include_str!("../../../tests/fixtures/joblog/progress/hf-trainer-mqtl-classification.txt");

    #[test]
    fn the_train_dict_gives_samples_and_steps_a_second_beside_the_bars() {
        let r = readings(CAPTURE);
        let hf: Vec<_> = r.iter().filter(|r| r.tool == Tool::HfTrainer).collect();
        assert_eq!(
            hf.len(),
            1,
            "loss dicts and the script's own dicts are not read"
        );
        let train = hf[0];
        assert_eq!(train.label.as_deref(), Some("train"));
        let rates: Vec<_> = train.rates.iter().map(|r| (r.value, &*r.unit)).collect();
        assert_eq!(rates, [(16.607, "samples/s"), (8.304, "steps/s")]);
        assert_eq!(train.elapsed_seconds, Some(120.4288));
        // The bars, a logger's line after each on the same line, are tqdm's.
        let bars: Vec<_> = r
            .iter()
            .filter(|r| r.tool == Tool::Tqdm)
            .map(|r| r.count.as_ref().unwrap().done)
            .collect();
        assert_eq!(bars, [0, 10, 20, 500, 510, 520, 990, 1000, 10]);
    }

    /// An evaluation's dict: the train dict's shape with `eval_` (the Trainer logs both alike).
    #[test]
    fn an_eval_dict_is_labelled_eval() {
        let l = "{'eval_loss': 0.35, 'eval_runtime': 9.144, 'eval_samples_per_second': 10.936, \
                 'eval_steps_per_second': 1.422, 'epoch': 1.0}";
        let r = parse(l).unwrap();
        assert_eq!(r.label.as_deref(), Some("eval"));
        assert_eq!((r.rates.len(), r.elapsed_seconds), (2, Some(9.144)));
        for l in [
            "{'loss': 0.7694, 'grad_norm': 5.42, 'learning_rate': 0.000981, 'epoch': 2.0}",
            "test_results = {'eval_runtime': 0.7, 'eval_samples_per_second': 27.5}",
            "{'a': 1}",
            "{}",
        ] {
            assert_eq!(parse(l), None, "{l:?}");
        }
    }
}
