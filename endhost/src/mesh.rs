//! The reliable control channel: one TCP connection per pair of ranks (tokio). The
//! higher rank connects to the lower; both open with a HELLO naming job and rank, so a
//! stray connection or another job's process is refused. Frames go both ways as the
//! protocol core asks; a connection that closes or sends nonsense is reported, so the
//! collectives waiting on that rank fail at once instead of timing out.

use std::io;
use std::net::{SocketAddr, SocketAddrV4};
use std::time::{Duration, Instant};

use std::os::fd::AsRawFd;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use crate::proto::Control;
use crate::sockopt::set_int;

/// What the control channel tells the datapath thread.
#[derive(Debug)]
pub enum Incoming {
    Control { peer: u16, message: Control },
    Lost { peer: u16, why: String },
}

/// Everyone's control address, by rank.
#[derive(Debug, Clone)]
pub struct MeshConfig {
    pub job: u32,
    pub rank: u16,
    pub addresses: Vec<SocketAddrV4>,
    /// How long to keep trying to reach peers that have not started yet.
    pub connect_timeout: Duration,
    /// IP TOS of the control connections: the control DSCP (its own switch queue).
    pub tos: u8,
}

/// Connected: a sender per peer (`None` for this rank), and the tasks writing to
/// them, which end once their sender is dropped and everything queued is written.
pub struct Mesh {
    pub outgoing: Vec<Option<UnboundedSender<Control>>>,
    pub writers: Vec<tokio::task::JoinHandle<()>>,
}

#[derive(Debug, thiserror::Error)]
pub enum MeshError {
    #[error("cannot listen on {address}: {source}")]
    Listen {
        address: SocketAddrV4,
        #[source]
        source: io::Error,
    },
    #[error("rank {peer} at {address} did not answer within {seconds} s ({last})")]
    Unreachable {
        peer: u16,
        address: SocketAddrV4,
        seconds: u64,
        last: String,
    },
    #[error("control connection from {from}: {why}")]
    Refused { from: SocketAddr, why: String },
    #[error("waiting for ranks {missing:?} to connect: gave up after {seconds} s")]
    Incomplete { missing: Vec<u16>, seconds: u64 },
}

/// Connects this rank to every other and starts the reader and writer tasks; frames
/// and losses go to `incoming`, after which `wake` is called.
pub async fn connect(
    config: &MeshConfig,
    incoming: std::sync::mpsc::Sender<crate::driver::Inbound>,
    wake: impl Fn() + Clone + Send + Sync + 'static,
) -> Result<Mesh, MeshError> {
    let me = config.rank;
    let world = config.addresses.len() as u16;
    let listen = config.addresses[usize::from(me)];
    let listener = listen_on(listen, config.tos).map_err(|source| MeshError::Listen {
        address: listen,
        source,
    })?;
    let deadline = Instant::now() + config.connect_timeout;
    // Each connection, with what arrived after its HELLO: a peer that is already up
    // may send its first frames right behind it.
    let mut streams: Vec<Option<(TcpStream, Vec<u8>)>> = (0..world).map(|_| None).collect();
    // Lower ranks: we call them.
    for peer in 0..me {
        let address = config.addresses[usize::from(peer)];
        let stream = dial(config, peer, address, deadline).await?;
        streams[usize::from(peer)] = Some(stream);
    }
    // Higher ranks call us.
    let mut missing: Vec<u16> = (me + 1..world).collect();
    while !missing.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        let accepted = tokio::time::timeout(left, listener.accept()).await;
        let Ok(Ok((mut stream, from))) = accepted else {
            return Err(MeshError::Incomplete {
                missing,
                seconds: config.connect_timeout.as_secs(),
            });
        };
        tune(&stream);
        let (peer, rest) = match read_hello(&mut stream, config.job).await {
            Ok((peer, rest)) if missing.contains(&peer) => (peer, rest),
            Ok((peer, _)) => {
                return Err(MeshError::Refused {
                    from,
                    why: format!("rank {peer} is not expected (already connected, or lower)"),
                });
            }
            Err(why) => return Err(MeshError::Refused { from, why }),
        };
        write_hello(&mut stream, config.job, me)
            .await
            .map_err(|e| MeshError::Refused {
                from,
                why: e.to_string(),
            })?;
        missing.retain(|&m| m != peer);
        streams[usize::from(peer)] = Some((stream, rest));
    }
    let mut outgoing = Vec::with_capacity(usize::from(world));
    let mut writers = Vec::new();
    for (peer, stream) in streams.into_iter().enumerate() {
        let Some((stream, rest)) = stream else {
            outgoing.push(None);
            continue;
        };
        let (reader, writer) = stream.into_split();
        let (tx, rx) = unbounded_channel();
        writers.push(tokio::spawn(write_frames(writer, rx)));
        tokio::spawn(read_frames(
            reader,
            rest,
            peer as u16,
            incoming.clone(),
            wake.clone(),
        ));
        outgoing.push(Some(tx));
    }
    Ok(Mesh { outgoing, writers })
}

async fn dial(
    config: &MeshConfig,
    peer: u16,
    address: SocketAddrV4,
    deadline: Instant,
) -> Result<(TcpStream, Vec<u8>), MeshError> {
    let mut last = String::from("no attempt");
    while Instant::now() < deadline {
        let connected = match socket(config.tos) {
            Ok(socket) => socket.connect(address.into()).await,
            Err(e) => Err(e),
        };
        match connected {
            Ok(mut stream) => {
                tune(&stream);
                let handshake = async {
                    write_hello(&mut stream, config.job, config.rank)
                        .await
                        .map_err(|e| e.to_string())?;
                    read_hello(&mut stream, config.job).await
                };
                match tokio::time::timeout(Duration::from_secs(5), handshake).await {
                    Ok(Ok((rank, rest))) if rank == peer => return Ok((stream, rest)),
                    Ok(Ok((rank, _))) => last = format!("rank {rank} answered instead"),
                    Ok(Err(why)) => last = why,
                    Err(_) => last = "no HELLO in 5 s".into(),
                }
            }
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(MeshError::Unreachable {
        peer,
        address,
        seconds: config.connect_timeout.as_secs(),
        last,
    })
}

/// A TCP socket whose packets, from the SYN on, carry the control DSCP (its own
/// switch queue). Accepted connections inherit it from the listening socket.
fn socket(tos: u8) -> io::Result<TcpSocket> {
    let socket = TcpSocket::new_v4()?;
    set_int(
        socket.as_raw_fd(),
        libc::IPPROTO_IP,
        libc::IP_TOS,
        libc::c_int::from(tos),
    )?;
    Ok(socket)
}

/// linux/tcp.h, Linux 6.15 and later.
const TCP_RTO_MIN_US: libc::c_int = 45;
/// The control channel's retransmission floor. Linux's default, 200 ms, is longer than
/// a whole collective step: one lost STOP or bitmap would stall the collective that
/// long. Spurious retransmissions of these small frames cost next to nothing.
const CONTROL_RTO_MIN_US: libc::c_int = 5_000;

/// No Nagle delay; a short retransmission floor where the kernel allows one per socket
/// (older kernels keep their 200 ms; `ip route … rto_min` sets it per route there).
fn tune(stream: &TcpStream) {
    let _ = stream.set_nodelay(true);
    let _ = set_int(
        stream.as_raw_fd(),
        libc::IPPROTO_TCP,
        TCP_RTO_MIN_US,
        CONTROL_RTO_MIN_US,
    );
}

fn listen_on(address: SocketAddrV4, tos: u8) -> io::Result<TcpListener> {
    let socket = socket(tos)?;
    socket.set_reuseaddr(true)?;
    socket.bind(address.into())?;
    socket.listen(1024)
}

async fn write_hello(stream: &mut TcpStream, job: u32, rank: u16) -> io::Result<()> {
    let mut frame = Vec::new();
    Control::Hello { job, rank }.encode(&mut frame);
    stream.write_all(&frame).await
}

/// Reads the peer's HELLO; returns its rank and whatever arrived after it.
async fn read_hello(stream: &mut TcpStream, job: u32) -> Result<(u16, Vec<u8>), String> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 64];
    loop {
        match Control::decode(&mut buf) {
            Ok(Some(Control::Hello { job: j, rank })) if j == job => return Ok((rank, buf)),
            Ok(Some(Control::Hello { job: j, .. })) => {
                return Err(format!("belongs to job {j}, not {job}"));
            }
            Ok(Some(other)) => return Err(format!("sent {other:?} before HELLO")),
            Ok(None) => {}
            Err(e) => return Err(e.to_string()),
        }
        let n = stream.read(&mut chunk).await.map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("closed before HELLO".into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

async fn write_frames(mut writer: OwnedWriteHalf, mut rx: UnboundedReceiver<Control>) {
    let mut frame = Vec::new();
    while let Some(first) = rx.recv().await {
        frame.clear();
        first.encode(&mut frame);
        // Whatever else is queued goes in the same write.
        while let Ok(next) = rx.try_recv() {
            next.encode(&mut frame);
        }
        if writer.write_all(&frame).await.is_err() {
            return;
        }
    }
}

async fn read_frames(
    mut reader: OwnedReadHalf,
    mut buf: Vec<u8>,
    peer: u16,
    incoming: std::sync::mpsc::Sender<crate::driver::Inbound>,
    wake: impl Fn(),
) {
    let mut chunk = vec![0u8; 64 * 1024];
    let why = loop {
        let mut frames = Vec::new();
        let failure = loop {
            match Control::decode(&mut buf) {
                Ok(Some(message)) => frames.push(message),
                Ok(None) => break None,
                Err(e) => break Some(e.to_string()),
            }
        };
        if !frames.is_empty() {
            for message in frames {
                let inbound = crate::driver::Inbound::Net(Incoming::Control { peer, message });
                if incoming.send(inbound).is_err() {
                    return;
                }
            }
            wake();
        }
        if let Some(why) = failure {
            break why;
        }
        match reader.read(&mut chunk).await {
            Ok(0) => break "closed the connection".to_string(),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) => break e.to_string(),
        }
    };
    let _ = incoming.send(crate::driver::Inbound::Net(Incoming::Lost { peer, why }));
    wake();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::Inbound;
    use crate::wire::MessageId;

    /// A peer that is already up sends its HELLO and its first frames in one write; the
    /// frames behind the HELLO must not be lost.
    #[test]
    fn frames_right_behind_the_hello_are_delivered() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let lower = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let lower_addr = match lower.local_addr().unwrap() {
                SocketAddr::V4(a) => a,
                SocketAddr::V6(_) => unreachable!(),
            };
            let id = MessageId {
                tensor: 1,
                round: 0,
                step: 0,
            };
            let fake_rank0 = tokio::spawn(async move {
                let (mut stream, _) = lower.accept().await.unwrap();
                read_hello(&mut stream, 5).await.unwrap();
                let mut bytes = Vec::new();
                Control::Hello { job: 5, rank: 0 }.encode(&mut bytes);
                Control::Ready(id).encode(&mut bytes);
                stream.write_all(&bytes).await.unwrap();
                stream
            });
            let (tx, rx) = std::sync::mpsc::channel();
            let config = MeshConfig {
                job: 5,
                rank: 1,
                addresses: vec![lower_addr, SocketAddrV4::new([127, 0, 0, 1].into(), 0)],
                connect_timeout: Duration::from_secs(5),
                tos: 0,
            };
            let _mesh = connect(&config, tx, || {}).await.unwrap();
            let _stream = fake_rank0.await.unwrap();
            let deadline = Instant::now() + Duration::from_secs(5);
            loop {
                match rx.try_recv() {
                    Ok(Inbound::Net(Incoming::Control { peer, message })) => {
                        assert_eq!((peer, message), (0, Control::Ready(id)));
                        break;
                    }
                    Ok(_) => panic!("unexpected inbound"),
                    Err(_) if Instant::now() < deadline => tokio::task::yield_now().await,
                    Err(e) => panic!("the READY never arrived: {e}"),
                }
            }
        });
    }

    /// A lost control frame is resent after milliseconds, not Linux's 200 ms, where the
    /// kernel lets a socket choose (6.15 and later); older kernels refuse the option.
    #[test]
    fn control_connections_retransmit_after_a_short_floor() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let address = listener.local_addr().unwrap();
            let stream = TcpStream::connect(address).await.unwrap();
            tune(&stream);
            let mut value: libc::c_int = 0;
            let mut len = size_of::<libc::c_int>() as libc::socklen_t;
            // SAFETY: a live socket, an int and its length.
            let rc = unsafe {
                libc::getsockopt(
                    stream.as_raw_fd(),
                    libc::IPPROTO_TCP,
                    TCP_RTO_MIN_US,
                    (&mut value as *mut libc::c_int).cast(),
                    &mut len,
                )
            };
            if rc == 0 {
                // Kept in jiffies: rounded up to the kernel's tick.
                assert!(
                    (CONTROL_RTO_MIN_US..20_000).contains(&value),
                    "floor {value} µs"
                );
            } else {
                let error = io::Error::last_os_error().raw_os_error();
                assert!(
                    matches!(error, Some(libc::ENOPROTOOPT | libc::EINVAL)),
                    "{error:?}"
                );
                eprintln!("kernel without TCP_RTO_MIN_US: the 200 ms floor stays");
            }
            assert!(stream.nodelay().unwrap());
        });
    }
}
