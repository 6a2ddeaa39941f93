//! What MPI launchers and batch schedulers tell a process through its environment: its rank, and
//! an id that every process of one launch shares.
//!
//! Both are pure functions of a variable lookup, so that they are tested with made-up
//! environments; [`Config::new`](crate::Config::new) and the `WAFFLE_OUTPUT` start-up
//! ([`crate::autostart`]) pass them `std::env::var`.
//!
//! ## Ranks
//!
//! `WAFFLE_RANK` (set by hand) first, then Open MPI's `OMPI_COMM_WORLD_RANK`, MPICH's (Hydra's)
//! `PMI_RANK`, PMIx's `PMIX_RANK` and Slurm's `SLURM_PROCID`.
//!
//! ## One launch, one trace
//!
//! The ranks started by one `mpirun` or `srun` should record under one trace id, so that their
//! files merge as one run, and two launches should not. No variable is common to every
//! launcher, so each launcher's own is read:
//!
//! | launcher | variables, the same in every rank of one launch |
//! |---|---|
//! | Open MPI 4 (`mpirun`, ORTE) | `OMPI_MCA_ess_base_jobid`, with `OMPI_MCA_orte_precondition_transports` when set: the job id is made from `mpirun`'s host and pid, so it comes back when a pid does; the transport key is drawn at random for each launch |
//! | PMIx (Open MPI 5's `mpirun`, `prterun`, Slurm's `srun --mpi=pmix`) | `PMIX_NAMESPACE` |
//! | Slurm (`srun`) | `SLURM_JOB_ID` and `SLURM_STEP_ID` (each `srun` of a job is a step of its own), with `SLURM_CLUSTER_NAME` when set |
//!
//! The first row whose variables are present names the launch: the launcher that started the
//! process itself comes before a scheduler around it, since ranks that one `mpirun` started on
//! its own node and on other nodes (through `srun`) see different Slurm steps. A process of a
//! Slurm batch script outside `srun` has no step and so no launch id.
//!
//! MPICH's Hydra (`mpiexec`) exports no id of the launch: `PMI_RANK`, `PMI_SIZE`, `PMI_FD`,
//! `MPI_LOCALRANKID` are per process or per node, and the name of the job's key-value space
//! travels over the PMI socket. Its ranks share an id under Slurm (Hydra starts its proxies with
//! `srun`), or when `WAFFLE_TRACE_ID` is exported to them.
//!
//! The launch's variables are hashed into the trace id with a fixed function (FNV-1a, 128 bits,
//! then mixed), so every rank computes the same id whatever machine and build it runs on.

/// The variables that name a process's rank, in the order they are tried.
pub const RANK_VARIABLES: [&str; 5] =
    ["WAFFLE_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"];

/// The variables that give the number of ranks of the launch (`MPI_COMM_WORLD`'s size), in
/// the order they are tried.
pub const SIZE_VARIABLES: [&str; 4] = ["WAFFLE_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"];

/// One row of the table in the module docs: a launcher, the variables it must set, and those
/// that refine its id when set.
struct Launcher {
    name: &'static str,
    required: &'static [&'static str],
    optional: &'static [&'static str],
}

const LAUNCHERS: [Launcher; 3] = [
    Launcher {
        name: "openmpi",
        required: &["OMPI_MCA_ess_base_jobid"],
        optional: &["OMPI_MCA_orte_precondition_transports"],
    },
    Launcher { name: "pmix", required: &["PMIX_NAMESPACE"], optional: &[] },
    Launcher {
        name: "slurm",
        required: &["SLURM_JOB_ID", "SLURM_STEP_ID"],
        optional: &["SLURM_CLUSTER_NAME"],
    },
];

/// Every variable that changes what a process records or under which trace: `WAFFLE_OUTPUT`,
/// the trace id and parent, the rank's and the launchers' (for tests and tools that start
/// programs in a clean environment).
pub fn variables() -> impl Iterator<Item = &'static str> {
    let own = ["WAFFLE_OUTPUT", "WAFFLE_TRACE_ID", "WAFFLE_TRACEPARENT"];
    let launchers = LAUNCHERS.iter().flat_map(|l| l.required.iter().chain(l.optional).copied());
    own.into_iter().chain(RANK_VARIABLES).chain(SIZE_VARIABLES).chain(launchers)
}

/// The value of `name`, if set and not empty.
fn get(lookup: &impl Fn(&str) -> Option<String>, name: &str) -> Option<String> {
    lookup(name).filter(|v| !v.is_empty())
}

/// The rank of this process, from the first of [`RANK_VARIABLES`] that is set.
pub fn rank(lookup: impl Fn(&str) -> Option<String>) -> Option<String> {
    RANK_VARIABLES.iter().find_map(|v| get(&lookup, v))
}

/// The number of ranks of the launch, from the first of [`SIZE_VARIABLES`] that is set.
pub fn size(lookup: impl Fn(&str) -> Option<String>) -> Option<String> {
    SIZE_VARIABLES.iter().find_map(|v| get(&lookup, v))
}

/// The launch this process belongs to, as text naming the launcher and its variables' values
/// (`openmpi OMPI_MCA_ess_base_jobid=1468923905 ...`); `None` outside a launcher the module
/// docs list.
pub fn job(lookup: impl Fn(&str) -> Option<String>) -> Option<String> {
    LAUNCHERS.iter().find_map(|l| {
        let mut key = l.name.to_owned();
        for var in l.required {
            key += &format!(" {var}={}", get(&lookup, var)?);
        }
        for var in l.optional {
            if let Some(v) = get(&lookup, var) {
                key += &format!(" {var}={v}");
            }
        }
        Some(key)
    })
}

/// The trace id of the launch `job` (from [`job`]): a fixed hash of its text, never null.
pub fn trace_id(job: &str) -> waffle::TraceId {
    const FNV_OFFSET: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    const FNV_PRIME: u128 = 0x0000_0000_0100_0000_0000_0000_0000_013b;
    let mut h = job.bytes().fold(FNV_OFFSET, |h, b| (h ^ u128::from(b)).wrapping_mul(FNV_PRIME));
    // FNV's multiplication carries a byte's change only upwards; folding the halves into each
    // other spreads every input bit over the whole id.
    h ^= h >> 64;
    h = h.wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835);
    h ^= h >> 64;
    waffle::TraceId::from_u128(h.max(1))
}

/// The environment's trace id for a launch, as [`Config::new`](crate::Config::new) reads it.
pub(crate) fn job_trace_id(lookup: impl Fn(&str) -> Option<String>) -> Option<waffle::TraceId> {
    job(lookup).map(|j| trace_id(&j))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lookup over `vars` only.
    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| (*v).to_owned())
    }

    #[test]
    fn rank_comes_from_the_first_variable_set() {
        assert_eq!(rank(env(&[])), None);
        assert_eq!(rank(env(&[("SLURM_PROCID", "7")])).as_deref(), Some("7"));
        assert_eq!(rank(env(&[("SLURM_PROCID", "7"), ("PMI_RANK", "3")])).as_deref(), Some("3"));
        assert_eq!(rank(env(&[("OMPI_COMM_WORLD_RANK", "1"), ("PMIX_RANK", "1")])).as_deref(), Some("1"));
        assert_eq!(rank(env(&[("WAFFLE_RANK", "9"), ("OMPI_COMM_WORLD_RANK", "1")])).as_deref(), Some("9"));
        assert_eq!(
            rank(env(&[("WAFFLE_RANK", ""), ("PMIX_RANK", "2")])).as_deref(),
            Some("2"),
            "empty is unset"
        );
    }

    #[test]
    fn size_comes_from_the_first_variable_set() {
        assert_eq!(size(env(&[("OMPI_COMM_WORLD_RANK", "1")])), None);
        assert_eq!(size(env(&[("SLURM_NTASKS", "8"), ("PMI_SIZE", "4")])).as_deref(), Some("4"));
        assert_eq!(size(env(&[("OMPI_COMM_WORLD_SIZE", "2"), ("WAFFLE_SIZE", "")])).as_deref(), Some("2"));
    }

    /// What Open MPI 4.1's `mpirun -np 2 env` printed for rank 1 (its launch-wide part).
    const OPEN_MPI: [(&str, &str); 6] = [
        ("OMPI_COMM_WORLD_RANK", "1"),
        ("OMPI_MCA_ess_base_jobid", "1468923905"),
        ("OMPI_MCA_ess_base_vpid", "1"),
        ("OMPI_MCA_orte_precondition_transports", "add1f75160b2ca5c-eeb2e03d237a6a81"),
        ("PMIX_NAMESPACE", "1468923905"),
        ("PMIX_RANK", "1"),
    ];

    #[test]
    fn no_launcher_no_job() {
        assert_eq!(job(env(&[])), None);
        assert_eq!(job(env(&[("OMPI_COMM_WORLD_RANK", "0"), ("PMI_RANK", "0")])), None, "ranks alone");
        // A Slurm batch script outside `srun`: a job but no step.
        assert_eq!(job(env(&[("SLURM_JOB_ID", "4242"), ("SLURM_PROCID", "0")])), None);
        assert_eq!(job(env(&[("PMIX_NAMESPACE", "")])), None, "empty is unset");
    }

    #[test]
    fn open_mpi_names_the_job_by_its_id_and_transport_key() {
        assert_eq!(
            job(env(&OPEN_MPI)).as_deref(),
            Some(
                "openmpi OMPI_MCA_ess_base_jobid=1468923905 \
                 OMPI_MCA_orte_precondition_transports=add1f75160b2ca5c-eeb2e03d237a6a81"
            )
        );
        // Rank 0 of the same launch: same job.
        let rank0 =
            OPEN_MPI.map(|(k, v)| (k, if k.ends_with("RANK") || k.ends_with("vpid") { "0" } else { v }));
        assert_eq!(job(env(&rank0)), job(env(&OPEN_MPI)));
        // The second launch of the same check: another job id and key.
        let other = OPEN_MPI.map(|(k, v)| match k {
            "OMPI_MCA_ess_base_jobid" | "PMIX_NAMESPACE" => (k, "1468399617"),
            "OMPI_MCA_orte_precondition_transports" => (k, "94ec2ebc16c19851-6e37fb0efad60562"),
            _ => (k, v),
        });
        assert_ne!(job(env(&other)), job(env(&OPEN_MPI)));
        // A pid that comes back gives the job id again; the transport key still differs.
        let same_id = OPEN_MPI.map(|(k, v)| match k {
            "OMPI_MCA_orte_precondition_transports" => (k, "0123456789abcdef-0123456789abcdef"),
            _ => (k, v),
        });
        assert_ne!(job(env(&same_id)), job(env(&OPEN_MPI)));
        // Without the key (another ORTE configuration), the job id alone.
        assert_eq!(
            job(env(&[("OMPI_MCA_ess_base_jobid", "5")])).as_deref(),
            Some("openmpi OMPI_MCA_ess_base_jobid=5")
        );
    }

    #[test]
    fn pmix_namespace_and_slurm_steps() {
        let prrte = [("PMIX_NAMESPACE", "prterun-node1-4021@1"), ("PMIX_RANK", "3")];
        assert_eq!(job(env(&prrte)).as_deref(), Some("pmix PMIX_NAMESPACE=prterun-node1-4021@1"));
        let step = |id: &'static str| {
            [
                ("SLURM_JOB_ID", "4242"),
                ("SLURM_STEP_ID", id),
                ("SLURM_PROCID", "5"),
                ("SLURM_CLUSTER_NAME", "c1"),
            ]
        };
        assert_eq!(
            job(env(&step("0"))).as_deref(),
            Some("slurm SLURM_JOB_ID=4242 SLURM_STEP_ID=0 SLURM_CLUSTER_NAME=c1")
        );
        assert_ne!(job(env(&step("0"))), job(env(&step("1"))), "two sruns of one job");
        // `srun --mpi=pmix`: PMIx's namespace (which names the step) comes first.
        let mut pmix_step = step("2").to_vec();
        pmix_step.push(("PMIX_NAMESPACE", "slurm.pmix.4242.2"));
        assert_eq!(job(env(&pmix_step)).as_deref(), Some("pmix PMIX_NAMESPACE=slurm.pmix.4242.2"));
        // `mpirun` inside an allocation: Open MPI's variables, not the Slurm step ranks differ in.
        let mut nested = OPEN_MPI.to_vec();
        nested.extend(step("0"));
        assert_eq!(job(env(&nested)), job(env(&OPEN_MPI)));
    }

    #[test]
    fn trace_ids_are_fixed_distinct_and_never_null() {
        // Fixed: the same text gives the same id in every process, build and machine (the values
        // were computed separately, with Python's integers).
        assert_eq!(trace_id("").to_u128(), 0xd39d_c233_da75_5cdc_40c0_82ac_ce66_2a07);
        assert_eq!(
            trace_id("slurm SLURM_JOB_ID=4242 SLURM_STEP_ID=0").to_u128(),
            0x49ed_4f12_3101_a2ac_dcc2_e464_6e1d_1e32
        );
        // Neighbouring jobs differ in both halves.
        let a = trace_id("slurm SLURM_JOB_ID=4242 SLURM_STEP_ID=0").to_u128();
        let b = trace_id("slurm SLURM_JOB_ID=4242 SLURM_STEP_ID=1").to_u128();
        assert_ne!(a >> 64, b >> 64);
        assert_ne!(a as u64, b as u64);
        let ids: std::collections::HashSet<u128> = (0..10_000)
            .map(|i| trace_id(&format!("openmpi OMPI_MCA_ess_base_jobid={i}")).to_u128())
            .collect();
        assert_eq!(ids.len(), 10_000);
        assert!(!ids.contains(&0));
    }

    #[test]
    fn job_trace_id_follows_the_job() {
        assert_eq!(job_trace_id(env(&[])), None);
        assert_eq!(job_trace_id(env(&OPEN_MPI)), Some(trace_id(&job(env(&OPEN_MPI)).unwrap())));
    }
}
