//! Host preparation for the DPDK datapath, as explicit steps: the IOMMU check,
//! hugepages, and binding the NIC to its DPDK driver. Each step reads sysfs first; in
//! check mode it says what it would do and, where the machine cannot do it, why.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use endhost_core::host::plan::DpdkPrep;
use endhost_core::host::{Step, StepStatus};

/// The sysfs tree the steps read and write (`/sys` on a host).
pub struct Sysfs {
    pub root: PathBuf,
}

impl Default for Sysfs {
    fn default() -> Self {
        Sysfs {
            root: PathBuf::from("/sys"),
        }
    }
}

impl Sysfs {
    fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// Runs every step, in order; a failed step does not stop the later ones from
    /// reporting (so one run lists everything the machine lacks).
    pub fn prepare(&self, prep: &DpdkPrep, check: bool) -> Vec<Step> {
        vec![
            self.iommu(prep),
            self.hugepages(prep.hugepages_2m, check),
            self.bind(prep, check),
        ]
    }

    /// Why the kernel has nothing to configure for the NIC: it is bound to its DPDK
    /// driver and has no network interface (vfio-pci; a bifurcated mlx5 NIC keeps one).
    pub fn owned_by_dpdk(&self, prep: &DpdkPrep) -> Option<String> {
        let device = self.path(&format!("bus/pci/devices/{}", prep.pci));
        let bound = current_driver(&device).is_some_and(|d| d == prep.driver);
        let interfaces = fs::read_dir(device.join("net")).map_or(0, |d| d.count());
        (bound && interfaces == 0).then(|| {
            format!(
                "{} is bound to {} and has no kernel interface",
                prep.pci, prep.driver
            )
        })
    }

    fn iommu(&self, prep: &DpdkPrep) -> Step {
        let groups = fs::read_dir(self.path("kernel/iommu_groups"))
            .map(|d| d.count())
            .unwrap_or(0);
        let action = format!("{groups} IOMMU group(s)");
        if groups > 0 || prep.driver != "vfio-pci" {
            return Step::new("iommu", action, StepStatus::Ok);
        }
        Step::failed(
            "iommu",
            action,
            "the kernel has no IOMMU groups: enable the IOMMU (intel_iommu=on or \
             amd_iommu=on on the kernel command line) for vfio-pci",
        )
    }

    fn hugepages(&self, want: u32, check: bool) -> Step {
        const NAME: &str = "hugepages";
        let file = self.path("kernel/mm/hugepages/hugepages-2048kB/nr_hugepages");
        let have = match read_number(&file) {
            Ok(n) => n,
            Err(e) => {
                return Step::failed(
                    NAME,
                    format!("reserve {want} 2 MiB hugepages"),
                    format!(
                        "{}: {e} (the kernel has no 2 MiB hugepages)",
                        file.display()
                    ),
                );
            }
        };
        if have >= u64::from(want) {
            let action = format!("{have} 2 MiB hugepages reserved (want {want})");
            return Step::new(NAME, action, StepStatus::Ok);
        }
        let action = format!("reserve {want} 2 MiB hugepages (now {have})");
        if check {
            return Step::new(NAME, action, StepStatus::WouldChange);
        }
        if let Err(e) = fs::write(&file, want.to_string()) {
            return Step::failed(NAME, action, format!("{}: {e}", file.display()));
        }
        match read_number(&file) {
            Ok(got) if got >= u64::from(want) => Step::new(NAME, action, StepStatus::Changed),
            Ok(got) => Step::failed(
                NAME,
                action,
                format!("the kernel reserved only {got}: not enough free contiguous memory"),
            ),
            Err(e) => Step::failed(NAME, action, e.to_string()),
        }
    }

    fn bind(&self, prep: &DpdkPrep, check: bool) -> Step {
        const NAME: &str = "bind";
        let pci = prep.pci.to_string();
        let driver = &prep.driver;
        let device = self.path(&format!("bus/pci/devices/{pci}"));
        if !device.exists() {
            return Step::failed(
                NAME,
                format!("bind {pci} to {driver}"),
                format!(
                    "this host has no PCI device {pci} (not in {})",
                    device.parent().unwrap_or(&device).display()
                ),
            );
        }
        let current = current_driver(&device);
        let action = match current.as_deref() {
            Some(now) if now == driver => {
                return Step::new(NAME, format!("{pci} is bound to {driver}"), StepStatus::Ok);
            }
            Some(now) => format!("bind {pci} to {driver} (now {now})"),
            None => format!("bind {pci} to {driver}"),
        };
        if !self.path(&format!("bus/pci/drivers/{driver}")).exists() {
            let reason = format!("the {driver} driver is not loaded (modprobe {driver})");
            return Step::failed(NAME, action, reason);
        }
        if check {
            return Step::new(NAME, action, StepStatus::WouldChange);
        }
        let result = (|| -> io::Result<()> {
            fs::write(device.join("driver_override"), driver)?;
            if current.is_some() {
                fs::write(device.join("driver/unbind"), &pci)?;
            }
            fs::write(self.path("bus/pci/drivers_probe"), &pci)
        })();
        match (result, current_driver(&device)) {
            (Ok(()), Some(now)) if now == *driver => Step::new(NAME, action, StepStatus::Changed),
            (Ok(()), now) => {
                let now = now.unwrap_or_else(|| "no driver".into());
                Step::failed(NAME, action, format!("after binding, {pci} is on {now}"))
            }
            (Err(e), _) => Step::failed(NAME, action, e.to_string()),
        }
    }
}

fn read_number(file: &Path) -> io::Result<u64> {
    fs::read_to_string(file)?
        .trim()
        .parse()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

fn current_driver(device: &Path) -> Option<String> {
    fs::read_link(device.join("driver"))
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prep() -> DpdkPrep {
        DpdkPrep {
            pci: "0000:3b:00.0".parse().unwrap(),
            hugepages_2m: 512,
            driver: "vfio-pci".into(),
        }
    }

    /// A sysfs tree with an IOMMU, `hugepages` 2 MiB pages, the vfio-pci and mlx5_core
    /// drivers, and device 0000:3b:00.0 bound to `driver`, with a kernel interface
    /// when `interface` is given. Removed when dropped.
    struct FakeSysfs(Sysfs);

    impl FakeSysfs {
        fn new(test: &str, hugepages: u32, driver: &str, interface: Option<&str>) -> FakeSysfs {
            // Removed by Drop.
            let root = mlt_common::files::scratch_dir(&format!("mltctl-sysfs-{test}-"))
                .unwrap()
                .keep();
            let huge = root.join("kernel/mm/hugepages/hugepages-2048kB");
            fs::create_dir_all(&huge).unwrap();
            fs::write(huge.join("nr_hugepages"), format!("{hugepages}\n")).unwrap();
            fs::create_dir_all(root.join("kernel/iommu_groups/12")).unwrap();
            for name in ["vfio-pci", "mlx5_core"] {
                fs::create_dir_all(root.join("bus/pci/drivers").join(name)).unwrap();
            }
            let device = root.join("bus/pci/devices/0000:3b:00.0");
            fs::create_dir_all(&device).unwrap();
            std::os::unix::fs::symlink(
                root.join("bus/pci/drivers").join(driver),
                device.join("driver"),
            )
            .unwrap();
            if let Some(interface) = interface {
                fs::create_dir_all(device.join("net").join(interface)).unwrap();
            }
            FakeSysfs(Sysfs { root })
        }
    }

    impl Drop for FakeSysfs {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0.root);
        }
    }

    #[test]
    fn a_nic_bound_to_vfio_pci_is_dpdks_and_its_network_part_is_skipped() {
        let sysfs = FakeSysfs::new("vfio", 512, "vfio-pci", None);
        let why = sysfs.0.owned_by_dpdk(&prep()).expect("no kernel interface");
        assert_eq!(
            why,
            "0000:3b:00.0 is bound to vfio-pci and has no kernel interface"
        );
        // The agent then leaves netlink alone (this test has no NIC named ens1f0) and
        // finds every DPDK step done.
        let plan = endhost_core::host::HostNetworkPlan {
            host: "h1".into(),
            nic: "ens1f0".into(),
            mac: "02:00:0a:01:01:0b".parse().unwrap(),
            mtu: 9000,
            addresses: vec!["10.1.1.11/24".parse().unwrap()],
            neighbours: vec![],
            routes: vec![],
            dpdk: Some(prep()),
            af_xdp_queues: None,
            no_gro: false,
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let report = runtime.block_on(crate::agent::configure(&plan, false, &sysfs.0));
        assert_eq!(report.error, None);
        assert_eq!(report.status, mlt_common::outcome::Status::Ok);
        assert_eq!(report.network_skipped.as_deref(), Some(why.as_str()));
        assert!(report.dpdk.iter().all(|s| s.status == StepStatus::Ok));
        assert!(
            endhost_core::host::render(&report, false).contains("network: skipped: 0000:3b:00.0")
        );
    }

    #[test]
    fn a_bifurcated_mlx5_nic_keeps_its_interface_and_its_driver() {
        let sysfs = FakeSysfs::new("mlx5", 512, "mlx5_core", Some("ens1f0"));
        let mlx5 = DpdkPrep {
            driver: "mlx5_core".into(),
            ..prep()
        };
        assert_eq!(sysfs.0.owned_by_dpdk(&mlx5), None);
        let steps = sysfs.0.prepare(&mlx5, false);
        assert!(
            steps.iter().all(|s| s.status == StepStatus::Ok),
            "{steps:?}"
        );
        assert_eq!(steps[2].action, "0000:3b:00.0 is bound to mlx5_core");
        // The same NIC planned for vfio-pci would be rebound, which check mode reports.
        let steps = sysfs.0.prepare(&prep(), true);
        assert_eq!(steps[2].status, StepStatus::WouldChange);
        assert_eq!(
            steps[2].action,
            "bind 0000:3b:00.0 to vfio-pci (now mlx5_core)"
        );
    }

    #[test]
    fn check_mode_on_a_machine_without_the_device_says_why() {
        let scratch = mlt_common::files::scratch_dir("mltctl-sysfs-").unwrap();
        let dir = scratch.path().to_path_buf();
        let huge = dir.join("kernel/mm/hugepages/hugepages-2048kB");
        fs::create_dir_all(&huge).unwrap();
        fs::create_dir_all(dir.join("kernel/iommu_groups")).unwrap();
        fs::create_dir_all(dir.join("bus/pci/devices")).unwrap();
        fs::write(huge.join("nr_hugepages"), "16\n").unwrap();
        let steps = Sysfs { root: dir }.prepare(&prep(), true);
        assert_eq!(steps[0].status, StepStatus::Failed);
        assert!(steps[0].reason.as_ref().unwrap().contains("intel_iommu=on"));
        assert_eq!(steps[1].status, StepStatus::WouldChange);
        assert_eq!(steps[1].action, "reserve 512 2 MiB hugepages (now 16)");
        assert_eq!(steps[2].status, StepStatus::Failed);
        assert!(
            steps[2]
                .reason
                .as_ref()
                .unwrap()
                .contains("no PCI device 0000:3b:00.0")
        );
    }
}
