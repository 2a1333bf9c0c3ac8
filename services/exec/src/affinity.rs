//! Which CPUs a task is bound to and which GPUs it sees, by the job's
//! `cpu-affinity` and `gpu-affinity` shell options (flux-core's
//! `affinity.c` and `gpubind.c`): `on` gives every task all of the job's
//! CPUs (GPUs) on its node, `per-task` shares them out evenly, `map:LIST`
//! names each local task's set, `off` binds nothing.

use fluxgate_shared::jobspec::Affinity;

use crate::layout::RankTasks;

/// The CPUs local task `local_id` of `rank` is bound to; empty binds nothing.
pub fn cpus(affinity: &Affinity, rank: &RankTasks, local_id: u32) -> Vec<usize> {
    let ids = match affinity {
        Affinity::On => rank.cores.clone(),
        Affinity::Off => Vec::new(),
        Affinity::PerTask => share(&rank.cores, rank.ntasks, local_id),
        Affinity::Map(sets) => mapped(sets, local_id),
    };
    ids.into_iter().map(|c| c as usize).collect()
}

/// The GPUs local task `local_id` of `rank` sees; `None` sets no variable.
pub fn gpus(affinity: &Affinity, rank: &RankTasks, local_id: u32) -> Option<Vec<u32>> {
    let ids = match affinity {
        Affinity::Off => return None,
        Affinity::On => rank.gpus.clone(),
        Affinity::PerTask => share(&rank.gpus, rank.ntasks, local_id),
        Affinity::Map(sets) => mapped(sets, local_id),
    };
    (!ids.is_empty()).then_some(ids)
}

/// The variables naming a task's GPUs (CUDA's and ROCm's).
pub fn gpu_env(ids: &[u32]) -> [(String, String); 2] {
    let list: Vec<String> = ids.iter().map(u32::to_string).collect();
    let list = list.join(",");
    [
        ("CUDA_VISIBLE_DEVICES".to_string(), list.clone()),
        ("ROCR_VISIBLE_DEVICES".to_string(), list),
    ]
}

/// Task `i` of `n`'s even share of `ids`; one each, round robin, when
/// there are more tasks than ids.
pub fn share(ids: &[u32], n: u32, i: u32) -> Vec<u32> {
    let (n, c, i) = (n as usize, ids.len(), i as usize);
    if c == 0 || n == 0 {
        return Vec::new();
    }
    if c < n {
        return vec![ids[i % c]];
    }
    ids[i * c / n..(i + 1) * c / n].to_vec()
}

fn mapped(sets: &[fluxgate_shared::IdSet], local_id: u32) -> Vec<u32> {
    if sets.is_empty() {
        return Vec::new();
    }
    sets[local_id as usize % sets.len()].iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rank(cores: &[u32], gpus: &[u32], ntasks: u32) -> RankTasks {
        RankTasks {
            rank: 0,
            shell_rank: 0,
            hostname: None,
            cores: cores.to_vec(),
            gpus: gpus.to_vec(),
            first_task: 0,
            ntasks,
        }
    }

    #[test]
    fn on_binds_every_task_to_all_the_node_s_cores() {
        let r = rank(&[0, 1, 2, 3], &[], 2);
        assert_eq!(cpus(&Affinity::On, &r, 1), [0, 1, 2, 3]);
        assert!(cpus(&Affinity::Off, &r, 1).is_empty());
        assert_eq!(cpus(&Affinity::PerTask, &r, 1), [2, 3]);
        let map = Affinity::Map(vec!["5".parse().unwrap(), "6-7".parse().unwrap()]);
        assert_eq!(cpus(&map, &r, 1), [6, 7]);
        assert_eq!(cpus(&map, &r, 2), [5]);
    }

    #[test]
    fn gpus_follow_the_same_modes() {
        let r = rank(&[0, 1], &[0, 1, 2, 3], 4);
        assert_eq!(gpus(&Affinity::On, &r, 3), Some(vec![0, 1, 2, 3]));
        assert_eq!(gpus(&Affinity::PerTask, &r, 3), Some(vec![3]));
        assert_eq!(gpus(&Affinity::Off, &r, 3), None);
        assert_eq!(gpus(&Affinity::On, &rank(&[0], &[], 1), 0), None);
        assert_eq!(gpu_env(&[1, 2])[1].1, "1,2");
    }

    #[test]
    fn more_tasks_than_ids_share_round_robin() {
        assert_eq!(share(&[4, 5], 3, 2), [4]);
        assert_eq!(share(&[0, 1, 2, 3, 4, 5], 4, 3), [4, 5]);
    }
}
