//! The service a command talks to: a server (`--server`, the environment, the config file), or
//! one embedded in this process on a database file (`--db`), as `tune` runs one. Either way the
//! command sees the same API, so `query`, `pack` and `records` answer alike online and offline.

use crate::client::{ClientArgs, Clients, connect_with};
use crate::embedded::{Embedded, EmbeddedOptions};
use anyhow::Result;
use clap::Args;
use tunehub_engine::target::Target;

/// A server, or a database file answered through an embedded service.
#[derive(Debug, Clone, Default, Args)]
pub struct ServiceArgs {
    /// Use this database (a SQLite file, or a URL) through a service embedded in this command,
    /// instead of a server (it wins over --server and TUNEHUB_SERVER): what `tunehub tune`
    /// stored there. Reading commands need it to exist. Its `local` target is this machine as
    /// detected.
    #[arg(long, value_name = "PATH_OR_URL")]
    pub db: Option<String>,

    #[command(flatten)]
    pub client: ClientArgs,
}

/// A command's connection; `close` stops an embedded service.
pub struct Session {
    pub clients: Clients,
    embedded: Option<Embedded>,
}

impl Session {
    /// A session on a server, or on a database that exists (reading commands create none).
    pub async fn open(args: &ServiceArgs) -> Result<Session> {
        Session::start(args, false).await
    }

    /// A session on a server, or on a database created if missing (`records import`).
    pub async fn open_or_create(args: &ServiceArgs) -> Result<Session> {
        Session::start(args, true).await
    }

    async fn start(args: &ServiceArgs, create: bool) -> Result<Session> {
        match &args.db {
            Some(db) => {
                let options = EmbeddedOptions::new(db.clone(), Target::detect());
                let e = if create {
                    Embedded::start(options).await?
                } else {
                    Embedded::open_existing(options).await?
                };
                Ok(Session {
                    clients: e.clients.clone(),
                    embedded: Some(e),
                })
            }
            None => Ok(Session {
                clients: connect_with(&args.client).await?,
                embedded: None,
            }),
        }
    }

    /// Ends the session: an embedded service stops, its database whole.
    pub async fn close(self) -> Result<()> {
        drop(self.clients);
        match self.embedded {
            Some(e) => e.shutdown().await,
            None => Ok(()),
        }
    }
}
