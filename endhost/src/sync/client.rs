//! A worker's side of the controller protocol ([`super::service`]).

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

use endhost_core::sync::protocol::{FromWorker, ToWorker};
use endhost_core::sync::{Launch, WorkerId};

use crate::lines::next_line;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("controller at {addr}: {source}")]
    Io {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("controller at {0} closed the connection")]
    Closed(SocketAddr),
    #[error("controller at {addr} refused: {message}")]
    Refused { addr: SocketAddr, message: String },
    #[error("controller at {addr} sent something unreadable: {message}")]
    Protocol { addr: SocketAddr, message: String },
    #[error("no launch from the controller at {addr} within {waited:?}")]
    Timeout { addr: SocketAddr, waited: Duration },
}

pub struct ControllerClient {
    addr: SocketAddr,
    reader: BufReader<OwnedReadHalf>,
    write: OwnedWriteHalf,
}

impl ControllerClient {
    /// Connects and introduces this worker, with the controller's token if it has one.
    pub async fn connect(
        addr: SocketAddr,
        rank: WorkerId,
        bandwidth_bps: f64,
        token: Option<String>,
    ) -> Result<Self, ClientError> {
        let stream = TcpStream::connect(addr)
            .await
            .map_err(|source| ClientError::Io { addr, source })?;
        let _ = stream.set_nodelay(true);
        let (read, write) = stream.into_split();
        let mut client = Self {
            addr,
            reader: BufReader::new(read),
            write,
        };
        client
            .send(&FromWorker::Hello {
                rank,
                bandwidth_bps,
                token,
            })
            .await?;
        Ok(client)
    }

    /// This round's computation is done.
    pub async fn ready(
        &mut self,
        compute_seconds: f64,
        bandwidth_bps: f64,
    ) -> Result<(), ClientError> {
        self.send(&FromWorker::Ready {
            compute_seconds,
            bandwidth_bps,
        })
        .await
    }

    /// The synchronization is over; the worker computes again.
    pub async fn done(&mut self, sync: u64) -> Result<(), ClientError> {
        self.send(&FromWorker::Done { sync }).await
    }

    /// Waits for the controller's next launch that includes this worker.
    pub async fn next_launch(&mut self, timeout: Duration) -> Result<Launch, ClientError> {
        let addr = self.addr;
        let line = tokio::time::timeout(timeout, next_line(&mut self.reader))
            .await
            .map_err(|_| ClientError::Timeout {
                addr,
                waited: timeout,
            })?
            .map_err(|e| ClientError::Protocol {
                addr,
                message: e.to_string(),
            })?
            .ok_or(ClientError::Closed(addr))?;
        match serde_json::from_str::<ToWorker>(&line) {
            Ok(ToWorker::Launch(launch)) => Ok(launch),
            Ok(ToWorker::Error(message)) => Err(ClientError::Refused { addr, message }),
            Err(e) => Err(ClientError::Protocol {
                addr,
                message: e.to_string(),
            }),
        }
    }

    async fn send(&mut self, message: &FromWorker) -> Result<(), ClientError> {
        let mut line = serde_json::to_vec(message).expect("serializable");
        line.push(b'\n');
        let addr = self.addr;
        self.write
            .write_all(&line)
            .await
            .map_err(|source| ClientError::Io { addr, source })
    }
}
