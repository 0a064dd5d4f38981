//! The target device description: what the kernels are compiled for and run on.
//!
//! A [`Target`] is detected on the host ([`Target::detect`]) and may be adjusted by the user
//! ([`Target::with_overrides`]). Its [`Target::key`] names the device in records: two
//! measurements are comparable only when their keys are equal.

use std::path::Path;
use std::process::{Command, Stdio};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Bumped whenever the set or encoding of the fields hashed by [`Target::key`] changes, so that
/// an old key can never collide with a new one that means something else.
const KEY_VERSION: &str = "tunehub-target-key-v1";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Target {
    /// CPU architecture as Rust names it: "x86_64", "aarch64", ...
    pub arch: String,
    /// ISA features relevant to codegen, sorted and deduplicated, spelled as Rust's
    /// `std::arch` detection spells them ("avx2", "avx512f", "fma", "sse4.1", "neon", "sve").
    pub features: Vec<String>,
    /// Cores the kernels use (OpenMP threads by default).
    pub cores: usize,
    /// Data/unified cache size per level in bytes: L1d, L2, L3. Empty when unknown.
    pub cache_bytes: Vec<u64>,
    /// The CPU's marketing name; informational, but part of the key (see [`Target::key`]).
    pub cpu_model: String,
    pub os: String,
    /// The C compiler command.
    pub compiler: String,
    /// First line of `<compiler> --version`; empty when the compiler cannot be run.
    pub compiler_version: String,
    /// Extra compiler flags, appended after the defaults.
    pub cflags: Vec<String>,
    /// The `-march=` value ("native" on the host). Empty: no `-march` flag.
    pub march: String,
    /// Command prefix to run a kernel executable (an emulator for cross targets); empty on host.
    pub run_prefix: Vec<String>,
}

/// User overrides of a detected target (from the CLI). `None` keeps the detected value.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TargetOverrides {
    /// Another architecture than the host's: a cross target (an edge device whose kernels are
    /// built by a cross compiler and run under an emulator or on the device). Host-only facts
    /// (features, caches, CPU model, `-march=native`) are replaced by the architecture's
    /// baseline unless given too.
    #[serde(default)]
    pub arch: Option<String>,
    pub cores: Option<usize>,
    pub compiler: Option<String>,
    pub cflags: Option<Vec<String>>,
    pub march: Option<String>,
    pub features: Option<Vec<String>>,
    pub run_prefix: Option<Vec<String>>,
}

impl Target {
    /// Describes the host with the default compiler `cc`. Never panics: whatever cannot be read
    /// falls back to a default (no cache sizes, "unknown" model, empty compiler version).
    pub fn detect() -> Target {
        Target::detect_with_compiler("cc")
    }

    /// Describes the host, compiling with `cc`.
    pub fn detect_with_compiler(cc: &str) -> Target {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cores = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        Target {
            arch: std::env::consts::ARCH.to_string(),
            features: normalize_features(host_features(&cpuinfo)),
            cores,
            cache_bytes: read_cache_sizes(Path::new("/sys/devices/system/cpu/cpu0/cache")),
            cpu_model: cpu_model(&cpuinfo),
            os: std::env::consts::OS.to_string(),
            compiler: cc.to_string(),
            compiler_version: compiler_version(cc),
            cflags: vec![],
            march: "native".to_string(),
            run_prefix: vec![],
        }
    }

    /// Applies user overrides. A new compiler re-reads its version (the key depends on it);
    /// features are re-sorted so the key stays canonical.
    pub fn with_overrides(mut self, o: &TargetOverrides) -> Target {
        if let Some(arch) = o.arch.as_ref().filter(|a| **a != self.arch) {
            self.arch = arch.clone();
            self.features = normalize_features(baseline_features(arch));
            self.cache_bytes = vec![];
            self.cpu_model = "unknown".to_string();
            self.march = baseline_march(arch).to_string();
        }
        if let Some(c) = o.cores {
            self.cores = c.max(1);
        }
        if let Some(cc) = &o.compiler {
            self.compiler_version = compiler_version(cc);
            self.compiler = cc.clone();
        }
        if let Some(f) = &o.cflags {
            self.cflags = f.clone();
        }
        if let Some(m) = &o.march {
            self.march = m.clone();
        }
        if let Some(f) = &o.features {
            self.features = normalize_features(f.clone());
        }
        if let Some(p) = &o.run_prefix {
            self.run_prefix = p.clone();
        }
        self
    }

    pub fn has_feature(&self, f: &str) -> bool {
        self.features.iter().any(|x| x == f)
    }

    /// Width of the widest f32 SIMD register the compiler will use.
    pub fn vector_bits(&self) -> u32 {
        if self.has_feature("avx512f") {
            512
        } else if self.has_feature("avx2") || self.has_feature("avx") {
            256
        } else {
            // NEON, SSE, SVE at its architectural minimum, or scalar code that still gets
            // 128-bit registers: 128 is the safe width.
            128
        }
    }

    pub fn vector_lanes_f32(&self) -> u32 {
        self.vector_bits() / 32
    }

    /// Whether the code generator writes an 8-bit dot product (4 byte products summed into
    /// each i32 lane) for this target (see [`Target::int8_dot_lanes`]).
    pub fn has_int8_dot(&self) -> bool {
        !self.int8_dot_lanes().is_empty()
    }

    /// The vector widths, in i32 lanes and widest first, at which the code generator writes an
    /// 8-bit dot product (see `codegen::dot`): AVX-512 VNNI on 512-bit vectors, and on 256-bit
    /// ones where AVX-512VL or AVX-VNNI encodes it there; AVX-VNNI on 256- and 128-bit ones;
    /// the dot-product extension on aarch64's 128-bit vectors. The narrower width serves sums
    /// whose output channels fill no whole wide vector (24, 40, 1000).
    pub fn int8_dot_lanes(&self) -> &'static [i64] {
        let half = self.has_feature("avx512vl") || self.has_feature("avxvnni");
        match (self.arch.as_str(), self.vector_bits()) {
            ("x86_64", 512) if self.has_feature("avx512vnni") && half => &[16, 8],
            ("x86_64", 512) if self.has_feature("avx512vnni") => &[16],
            ("x86_64", 256) if self.has_feature("avxvnni") => &[8, 4],
            ("aarch64", 128) if self.has_feature("dotprod") => &[4],
            _ => &[],
        }
    }

    /// The last-level cache in bytes, or 32 MiB when unknown (a typical server L3).
    pub fn last_level_cache_bytes(&self) -> u64 {
        self.cache_bytes.last().copied().unwrap_or(32 << 20)
    }

    /// A stable, readable device key: `<arch>-<isa>-c<cores>-<8 hex>`, e.g.
    /// `x86_64-avx512-c2-1a2b3c4d`.
    ///
    /// The hash covers everything that changes the generated code or its speed: arch, features,
    /// cores, cache sizes, cpu_model, os, compiler_version, march, cflags and run_prefix. The
    /// compiler *command* is left out (the same compiler under another path builds the same
    /// code; its version is in). cpu_model is in: it is stable on a machine, and two CPUs with
    /// equal features and caches may still differ in speed (e.g. Zen 4 and Sapphire Rapids).
    /// run_prefix is in: times under an emulator are not times on the device.
    pub fn key(&self) -> String {
        #[derive(Serialize)]
        struct Hashed<'a> {
            version: &'a str,
            arch: &'a str,
            features: &'a [String],
            cores: usize,
            cache_bytes: &'a [u64],
            cpu_model: &'a str,
            os: &'a str,
            compiler_version: &'a str,
            march: &'a str,
            cflags: &'a [String],
            run_prefix: &'a [String],
        }
        let h = Hashed {
            version: KEY_VERSION,
            arch: &self.arch,
            features: &self.features,
            cores: self.cores,
            cache_bytes: &self.cache_bytes,
            cpu_model: &self.cpu_model,
            os: &self.os,
            compiler_version: &self.compiler_version,
            march: &self.march,
            cflags: &self.cflags,
            run_prefix: &self.run_prefix,
        };
        // serde_json writes struct fields in declaration order: a canonical encoding.
        let canonical = serde_json::to_string(&h).expect("plain struct serializes");
        let digest = Sha256::digest(canonical.as_bytes());
        let hex: String = digest[..4].iter().map(|b| format!("{b:02x}")).collect();
        format!("{}-{}-c{}-{}", self.arch, self.isa_name(), self.cores, hex)
    }

    /// The widest vector ISA, for the readable part of the key.
    fn isa_name(&self) -> &'static str {
        const ORDER: &[(&str, &str)] = &[
            ("avx512f", "avx512"),
            ("avx2", "avx2"),
            ("avx", "avx"),
            ("sve2", "sve2"),
            ("sve", "sve"),
            ("neon", "neon"),
            ("sse2", "sse2"),
        ];
        ORDER
            .iter()
            .find(|(f, _)| self.has_feature(f))
            .map(|(_, n)| *n)
            .unwrap_or("generic")
    }

    /// Whether kernels may call glibc's vector math library (libmvec: `expf` and `logf` on
    /// 4-16 lanes in every x86-64 glibc since 2.22, `erff` and `tanhf` since 2.35). Kernels
    /// link `-lmvec` then.
    pub fn has_vector_math(&self) -> bool {
        self.arch == "x86_64" && self.os == "linux"
    }

    /// Libraries a kernel links besides libm (which always follows them): glibc's vector math
    /// where the kernels call it.
    pub fn libraries(&self) -> Vec<String> {
        if self.has_vector_math() {
            vec!["-lmvec".to_string()]
        } else {
            vec![]
        }
    }

    /// Flags for compiling a kernel together with its harness.
    pub fn compile_flags(&self) -> Vec<String> {
        let mut f = vec!["-O3".to_string()];
        if !self.march.is_empty() {
            f.push(format!("-march={}", self.march));
        }
        f.push("-fopenmp".to_string());
        f.push("-std=gnu11".to_string());
        // GCC keeps to 256-bit vectors by default even on AVX-512 parts; measured: matmul loses
        // 2x without this.
        if self.arch == "x86_64" && self.has_feature("avx512f") {
            f.push("-mprefer-vector-width=512".to_string());
        }
        // AArch64: NEON is the 128-bit vector unit (the search tiles for 4 f32 lanes, see
        // `vector_bits`). With SVE in the features and no `-march` naming it, GCC would still
        // emit NEON only: name it so `omp simd` loops use it. FMA contraction is GCC's default
        // for GNU C; explicit so that a `-std=c11` among the user's flags keeps it (NEON's
        // fused multiply-add is the matmul's inner instruction).
        if self.arch == "aarch64" {
            // Likewise the dot-product extension the integer kernels' dot tiles use, on ARMv8.2
            // at least: arm_neon.h defines its intrinsics for armv8.2-a+dotprod, which GCC
            // does not inline into a function built for armv8-a+dotprod.
            let mut march = self.march.clone();
            for ext in ["dotprod", "sve"] {
                if self.has_feature(ext) && !march.contains(ext) && self.march != "native" {
                    let base = match march.as_str() {
                        "" | "armv8-a" if ext == "dotprod" => "armv8.2-a",
                        "" => "armv8-a",
                        m => m,
                    };
                    march = format!("{base}+{ext}");
                }
            }
            if march != self.march {
                if let Some(m) = f.iter_mut().find(|x| x.starts_with("-march=")) {
                    *m = format!("-march={march}");
                } else {
                    f.push(format!("-march={march}"));
                }
            }
            f.push("-ffp-contract=fast".to_string());
        }
        f.extend(self.cflags.iter().cloned());
        f
    }
}

/// ISA features every CPU of an architecture has, for a cross target's description.
fn baseline_features(arch: &str) -> Vec<String> {
    match arch {
        // Advanced SIMD (NEON) is mandatory in ARMv8-A.
        "aarch64" => vec!["neon".to_string()],
        "x86_64" => vec!["sse".to_string(), "sse2".to_string()],
        _ => vec![],
    }
}

/// The `-march=` of a cross target: "native" would describe the build machine.
fn baseline_march(arch: &str) -> &'static str {
    match arch {
        "aarch64" => "armv8-a",
        "x86_64" => "x86-64",
        _ => "",
    }
}

fn normalize_features(mut f: Vec<String>) -> Vec<String> {
    f.sort();
    f.dedup();
    f
}

#[cfg(target_arch = "x86_64")]
fn host_features(_cpuinfo: &str) -> Vec<String> {
    // The std detector reads CPUID and checks OS support (XSAVE state), which /proc flags do not.
    // Only features that matter to f32 codegen: the full flag list carries noise (mitigations,
    // virtualisation flags) that would change the key without changing the code.
    let mut out = Vec::new();
    macro_rules! probe {
        ($($f:tt),*) => {
            $(if std::arch::is_x86_feature_detected!($f) { out.push($f.to_string()); })*
        };
    }
    probe!(
        "sse",
        "sse2",
        "sse3",
        "ssse3",
        "sse4.1",
        "sse4.2",
        "avx",
        "avx2",
        "fma",
        "f16c",
        "avx512f",
        "avx512bw",
        "avx512cd",
        "avx512dq",
        "avx512vl",
        "avx512vnni",
        "avxvnni",
        "avx512bf16",
        "avx512fp16"
    );
    out
}

#[cfg(target_arch = "aarch64")]
fn host_features(_cpuinfo: &str) -> Vec<String> {
    let mut out = Vec::new();
    macro_rules! probe {
        ($($f:tt),*) => {
            $(if std::arch::is_aarch64_feature_detected!($f) { out.push($f.to_string()); })*
        };
    }
    probe!("neon", "fp16", "dotprod", "bf16", "i8mm", "sve", "sve2");
    out
}

/// Other architectures: the feature words of /proc/cpuinfo, as they are.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn host_features(cpuinfo: &str) -> Vec<String> {
    cpuinfo
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            let k = k.trim();
            (k == "flags" || k == "Features" || k == "isa").then(|| v.to_string())
        })
        .map(|v| v.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

fn cpu_model(cpuinfo: &str) -> String {
    // x86 says "model name"; arm64 kernels often only give "CPU implementer"/"CPU part".
    let field = |name: &str| {
        cpuinfo.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == name).then(|| v.trim().to_string())
        })
    };
    if let Some(m) = field("model name").filter(|m| !m.is_empty()) {
        return m;
    }
    match (field("CPU implementer"), field("CPU part")) {
        (Some(i), Some(p)) => format!("implementer {i} part {p}"),
        _ => "unknown".to_string(),
    }
}

/// Cache sizes per level from sysfs (`index*/{level,type,size}`), data and unified caches only,
/// ordered by level. Unreadable entries are skipped.
fn read_cache_sizes(dir: &Path) -> Vec<u64> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return vec![];
    };
    let mut levels: Vec<(u32, u64)> = entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("index"))
        .filter_map(|e| {
            let read = |f: &str| {
                std::fs::read_to_string(e.path().join(f))
                    .ok()
                    .map(|s| s.trim().to_string())
            };
            let ty = read("type")?;
            if ty != "Data" && ty != "Unified" {
                return None;
            }
            let level = read("level")?.parse().ok()?;
            Some((level, parse_size(&read("size")?)?))
        })
        .collect();
    levels.sort();
    levels.dedup_by_key(|(l, _)| *l);
    levels.into_iter().map(|(_, s)| s).collect()
}

/// "48K", "2048K", "1M", "32768" -> bytes.
fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let (num, mul) = match s.chars().last()? {
        'K' | 'k' => (&s[..s.len() - 1], 1u64 << 10),
        'M' | 'm' => (&s[..s.len() - 1], 1 << 20),
        'G' | 'g' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.trim().parse::<u64>().ok().map(|n| n * mul)
}

/// First line of `<cc> --version`, or "" when it cannot be run.
fn compiler_version(cc: &str) -> String {
    Command::new(cc)
        .arg("--version")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .map(|l| l.trim().to_string())
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detect_describes_the_host() {
        let t = Target::detect();
        assert_eq!(t.arch, std::env::consts::ARCH);
        assert!(t.cores >= 1);
        assert_eq!(t.os, "linux");
        assert!(
            !t.compiler_version.is_empty(),
            "cc --version should run here"
        );
        let mut sorted = t.features.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(t.features, sorted, "features are sorted and unique");
        // Levels ascend, so sizes do on every real machine.
        assert!(
            t.cache_bytes.windows(2).all(|w| w[0] <= w[1]),
            "{:?}",
            t.cache_bytes
        );
    }

    #[test]
    fn key_is_stable_and_tracks_performance_fields() {
        let a = Target::detect();
        let b = Target::detect();
        assert_eq!(a.key(), b.key());
        let k = a.key();
        assert!(k.starts_with(&format!("{}-", a.arch)), "{k}");
        let hash = k.rsplit('-').next().unwrap();
        assert_eq!(hash.len(), 8);
        assert!(hash.chars().all(|c| c.is_ascii_hexdigit()));

        let more = a.clone().with_overrides(&TargetOverrides {
            cores: Some(a.cores + 1),
            ..Default::default()
        });
        assert_ne!(more.key(), k);
        assert!(more.key().contains(&format!("-c{}-", a.cores + 1)));
        let flags = a.clone().with_overrides(&TargetOverrides {
            cflags: Some(vec!["-O2".into()]),
            ..Default::default()
        });
        assert_ne!(flags.key(), k);
        // The compiler command alone does not change the key.
        let mut renamed = a.clone();
        renamed.compiler = "/usr/bin/cc".into();
        assert_eq!(renamed.key(), k);
    }

    #[test]
    fn vector_width_follows_features() {
        let t = Target::detect();
        let bits = t.vector_bits();
        assert_eq!(bits == 512, t.has_feature("avx512f"));
        assert_eq!(t.vector_lanes_f32(), bits / 32);
        let flags = t.compile_flags();
        assert_eq!(
            flags.iter().any(|f| f == "-mprefer-vector-width=512"),
            t.arch == "x86_64" && bits == 512
        );
        assert!(flags.iter().any(|f| f == "-fopenmp"));

        let mut arm = t.clone();
        arm.arch = "aarch64".into();
        arm.features = vec!["neon".into()];
        assert_eq!(arm.vector_bits(), 128);
        assert!(arm.key().starts_with("aarch64-neon-"));
        let mut avx2 = t.clone();
        avx2.features = vec!["avx".into(), "avx2".into(), "fma".into()];
        assert_eq!(avx2.vector_lanes_f32(), 8);
    }

    #[test]
    fn overrides_apply_and_stay_canonical() {
        let t = Target::detect().with_overrides(&TargetOverrides {
            cores: Some(3),
            march: Some("x86-64-v3".into()),
            features: Some(vec!["fma".into(), "avx2".into(), "fma".into()]),
            run_prefix: Some(vec!["qemu-x86_64".into()]),
            compiler: Some("no-such-compiler-xyz".into()),
            ..Default::default()
        });
        assert_eq!(t.cores, 3);
        assert_eq!(t.features, vec!["avx2".to_string(), "fma".to_string()]);
        assert_eq!(t.compiler_version, "");
        assert!(t.compile_flags().contains(&"-march=x86-64-v3".to_string()));
        let json = serde_json::to_string(&t).unwrap();
        assert_eq!(serde_json::from_str::<Target>(&json).unwrap(), t);
    }

    #[test]
    fn cross_aarch64_target_is_neon_aware() {
        let t = Target::detect().with_overrides(&TargetOverrides {
            arch: Some("aarch64".into()),
            compiler: Some("aarch64-linux-gnu-gcc".into()),
            run_prefix: Some(vec!["qemu-aarch64".into()]),
            ..Default::default()
        });
        assert_eq!(t.arch, "aarch64");
        assert_eq!(t.features, vec!["neon".to_string()]);
        assert_eq!(t.vector_lanes_f32(), 4);
        assert!(t.key().starts_with("aarch64-neon-"), "{}", t.key());
        let flags = t.compile_flags();
        assert!(flags.contains(&"-march=armv8-a".to_string()), "{flags:?}");
        assert!(flags.contains(&"-ffp-contract=fast".to_string()));
        assert!(
            !flags
                .iter()
                .any(|f| f.contains("native") || f.contains("vector-width"))
        );
        assert!(t.cache_bytes.is_empty());

        let sve = t.clone().with_overrides(&TargetOverrides {
            features: Some(vec!["neon".into(), "sve".into()]),
            ..Default::default()
        });
        assert!(
            sve.compile_flags()
                .contains(&"-march=armv8-a+sve".to_string())
        );
        assert!(sve.key().starts_with("aarch64-sve-"));
        // The host's own arch named again changes nothing.
        let same = Target::detect().with_overrides(&TargetOverrides {
            arch: Some(std::env::consts::ARCH.into()),
            ..Default::default()
        });
        assert_eq!(same, Target::detect());
    }

    #[test]
    fn sysfs_parsing_tolerates_missing_files() {
        assert_eq!(
            read_cache_sizes(Path::new("/nonexistent/cache")),
            Vec::<u64>::new()
        );
        assert_eq!(parse_size("48K"), Some(48 << 10));
        assert_eq!(parse_size("1M"), Some(1 << 20));
        assert_eq!(parse_size("512"), Some(512));
        assert_eq!(parse_size("x"), None);
        assert_eq!(cpu_model(""), "unknown");
        assert_eq!(cpu_model("model name\t: Foo CPU\n"), "Foo CPU");
    }
}
