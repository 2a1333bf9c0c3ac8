//! What this node is, found from the kernel's files rather than configured:
//! its GPUs (NVIDIA from `/dev/nvidiaN` or `/proc/driver/nvidia/gpus`,
//! others from the DRM render nodes `/dev/dri/renderD*`) and its memory.
//! The roots are parameters so that fixture trees can stand in.

use std::path::Path;

use fluxgate_shared::IdSet;

/// The GPU ids of this node: NVIDIA's device numbers, else one id per
/// NVIDIA GPU the driver lists, else one per render node (AMD, Intel).
pub fn gpus(dev: &Path, proc_root: &Path) -> IdSet {
    let names = |dir: &Path| -> Vec<String> {
        std::fs::read_dir(dir)
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .filter_map(|e| e.file_name().into_string().ok())
                    .collect()
            })
            .unwrap_or_default()
    };
    let nvidia: IdSet = names(dev)
        .iter()
        .filter_map(|n| n.strip_prefix("nvidia")?.parse::<u32>().ok())
        .collect();
    if !nvidia.is_empty() {
        return nvidia;
    }
    let listed = names(&proc_root.join("driver/nvidia/gpus")).len();
    if listed > 0 {
        return first(listed);
    }
    let render = names(&dev.join("dri"))
        .iter()
        .filter(|n| {
            n.strip_prefix("renderD")
                .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
        })
        .count();
    first(render)
}

/// Ids 0..n.
fn first(n: usize) -> IdSet {
    match u32::try_from(n) {
        Ok(0) | Err(_) => IdSet::new(),
        Ok(n) => IdSet::from_range(0, n - 1),
    }
}

/// This node's memory in bytes, from `MemTotal` of `/proc/meminfo` (0 when unknown).
pub fn memory(proc_root: &Path) -> u64 {
    crate::cgroup::node_memory(&proc_root.join("meminfo")).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(p: &Path) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, "").unwrap();
    }

    #[test]
    fn nvidia_devices_give_their_numbers() {
        let t = tempfile::tempdir().unwrap();
        for n in [
            "nvidia0",
            "nvidia2",
            "nvidiactl",
            "nvidia-uvm",
            "nvidia-caps",
        ] {
            touch(&t.path().join("dev").join(n));
        }
        let got = gpus(&t.path().join("dev"), &t.path().join("proc"));
        assert_eq!(got.to_string(), "0,2");
    }

    #[test]
    fn the_nvidia_driver_list_counts_when_no_device_file_is_there() {
        let t = tempfile::tempdir().unwrap();
        let listed = t.path().join("proc/driver/nvidia/gpus");
        for bus in ["0000:3b:00.0", "0000:af:00.0"] {
            std::fs::create_dir_all(listed.join(bus)).unwrap();
        }
        assert_eq!(
            gpus(&t.path().join("dev"), &t.path().join("proc")).to_string(),
            "0-1"
        );
    }

    #[test]
    fn render_nodes_count_and_nothing_is_none() {
        let t = tempfile::tempdir().unwrap();
        let dev = t.path().join("dev");
        assert!(gpus(&dev, t.path()).is_empty());
        for n in [
            "card0",
            "card1",
            "renderD128",
            "renderD129",
            "renderD130",
            "by-path",
        ] {
            touch(&dev.join("dri").join(n));
        }
        assert_eq!(gpus(&dev, t.path()).to_string(), "0-2");
    }
}
