//! Test certificates made with the `openssl` command: a CA, a server leaf for 127.0.0.1 and
//! client certificates, each signed by the CA that made it.

use std::path::{Path, PathBuf};
use std::process::Command;

fn openssl(args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .output()
        .expect("the openssl command (apt-get install openssl)");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A certificate authority in `dir`, its files named after `name`.
pub struct Ca {
    dir: PathBuf,
    name: String,
    /// The CA certificate (PEM).
    pub cert: PathBuf,
    key: PathBuf,
}

/// A leaf certificate and its key (PEM files).
pub struct Leaf {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl Ca {
    pub fn new(dir: &Path, name: &str) -> Ca {
        let cert = dir.join(format!("{name}.pem"));
        let key = dir.join(format!("{name}.key"));
        openssl(&[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            &format!("/CN=tunehub test {name}"),
            "-keyout",
            key.to_str().unwrap(),
            "-out",
            cert.to_str().unwrap(),
        ]);
        Ca {
            dir: dir.to_path_buf(),
            name: name.to_string(),
            cert,
            key,
        }
    }

    /// A server certificate for 127.0.0.1.
    pub fn server(&self, name: &str) -> Leaf {
        self.leaf(
            name,
            "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n",
        )
    }

    /// A client certificate (a worker's, for mutual TLS).
    pub fn client(&self, name: &str) -> Leaf {
        self.leaf(
            name,
            "basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n",
        )
    }

    fn leaf(&self, name: &str, ext: &str) -> Leaf {
        let p = |suffix: &str| self.dir.join(format!("{}-{name}.{suffix}", self.name));
        std::fs::write(p("ext"), ext).unwrap();
        let (cert, key, csr) = (p("pem"), p("key"), p("csr"));
        openssl(&[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            &format!("/CN={name}"),
            "-keyout",
            key.to_str().unwrap(),
            "-out",
            csr.to_str().unwrap(),
        ]);
        openssl(&[
            "x509",
            "-req",
            "-in",
            csr.to_str().unwrap(),
            "-CA",
            self.cert.to_str().unwrap(),
            "-CAkey",
            self.key.to_str().unwrap(),
            "-CAcreateserial",
            "-days",
            "1",
            "-extfile",
            p("ext").to_str().unwrap(),
            "-out",
            cert.to_str().unwrap(),
        ]);
        Leaf { cert, key }
    }
}
