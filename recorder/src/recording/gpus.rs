//! How a step notes its GPUs once NVML has opened: the event line naming each card, and
//! which of them this step reads (a card another step of the job registered first is read
//! by that step only).

use crate::sample::GpuCard;

/// The `gpu` event text: each card as the user's code knows it, its UUID, NVML index and
/// PCI address, and whether another step records it. `ids`: `Writer::register_gpus`'s
/// `(gpus.id, mine)` per card.
pub fn registered_text(cards: &[GpuCard], ids: &[(i64, bool)]) -> String {
    let names: Vec<String> = cards
        .iter()
        .zip(ids)
        .map(|(c, (_, mine))| {
            format!(
                "{} = {} (nvml {}, {}){}",
                c.label(),
                c.uuid,
                c.nvml_index,
                c.pci_bus_id.as_deref().unwrap_or("?"),
                if *mine {
                    ""
                } else {
                    ", recorded by another step"
                }
            )
        })
        .collect();
    names.join("; ")
}

/// The `gpus.id` this step reads for each card, `None` for a card another step records.
pub fn recorded_ids(ids: Vec<(i64, bool)>) -> Vec<Option<i64>> {
    ids.into_iter()
        .map(|(id, mine)| mine.then_some(id))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn card(uuid: &str, cuda: Option<u32>, nvml: u32, pci: Option<&str>) -> GpuCard {
        GpuCard {
            uuid: uuid.into(),
            cuda_index: cuda,
            nvml_index: nvml,
            pci_bus_id: pci.map(str::to_string),
            name: Some("NVIDIA H200".into()),
            memory_total_bytes: None,
            sm_clock_max_mhz: None,
            power_limit_watts: None,
            nvlink_links: None,
        }
    }

    #[test]
    fn each_card_is_named_with_who_records_it() {
        let cards = [
            card("GPU-aaa", Some(0), 2, Some("00000000:3B:00.0")),
            card("GPU-bbb", None, 3, None),
        ];
        let ids = [(7, true), (8, false)];
        assert_eq!(
            registered_text(&cards, &ids),
            "cuda:0 = GPU-aaa (nvml 2, 00000000:3B:00.0); \
             nvml:3 = GPU-bbb (nvml 3, ?), recorded by another step"
        );
        assert_eq!(recorded_ids(ids.to_vec()), [Some(7), None]);
    }
}
